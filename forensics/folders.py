"""What a folder given as RUN_DIR is: one run, or a folder of several runs that must be named, not merged."""

from __future__ import annotations

from pathlib import Path


def refuse_folder_of_runs(root: Path, command: str) -> None:
    """Raise IngestError when `root` is no run itself but holds several (discovery rules: ingest/discovery.py,
    docs/watch.md), naming them and how to take one or all with `forensics <command>`, instead of reading them
    all as one run. A folder that is one run, holds one run or none goes on as given (DECISIONS.md §1)."""
    from ingest.discovery import classify, discover_runs
    from ingest.errors import IngestError

    root = root.expanduser()
    if not root.is_dir() or classify(root.resolve()) is not None:
        return
    runs = discover_runs(root)
    if len(runs) < 2:
        return
    rel = [str(r.path.relative_to(root.resolve())) for r in runs]
    shown = ", ".join(rel[:5]) + (f" and {len(rel) - 5} more" if len(rel) > 5 else "")
    raise IngestError(f"{root} holds {len(runs)} runs ({shown}), not one; take one, e.g. "
                      f"`forensics {command} {root / rel[0]}`, or all with `forensics {command} {root} --all`")
