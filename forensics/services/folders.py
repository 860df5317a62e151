"""What a folder given as RUN_DIR is: one run, or a folder of several runs that must be named, not merged."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


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
    if len(runs) < 2 or _versions_of_one_run(runs):
        return
    rel = [str(r.path.relative_to(root.resolve())) for r in runs]
    shown = ", ".join(rel[:5]) + (f" and {len(rel) - 5} more" if len(rel) > 5 else "")
    raise IngestError(f"{root} holds {len(runs)} runs ({shown}), not one; take one, e.g. "
                      f"`forensics {command} {root / rel[0]}`, or all with `forensics {command} {root} --all`")


def _versions_of_one_run(runs: Sequence) -> bool:
    """Lightning's `version_*` folders side by side (one `lightning_logs/`) are one run's sources (DECISIONS.md §1):
    a relaunch or a resume from a checkpoint writes the next version, so a later version re-logging steps is the
    run's resumed evidence, kept beside the first (§3). Only `--all` and `watch` split them, as discovery does."""
    return all(r.kind == "lightning_version" for r in runs) and len({r.path.parent for r in runs}) == 1


def ingest_folders(paths: Sequence[Path], db: Path, *, split: bool, trust_pickle: bool, follow_links: bool = False,
                   progress_for: Callable[[Path], Any]) -> tuple[list[Path], list, list[dict[str, str]]]:
    """`forensics ingest`: read every folder it can, each as one run (a folder of several runs is refused), or,
    with `split`, each run found in it (`follow_links`: also file links leading out of a run). Returns (the run folders, an IngestReport per folder read, {path, error}
    per folder that could not be). `progress_for(folder)` gives ingest's progress callback, with a `close()`."""
    from ingest.discovery import discover_runs
    from ingest.errors import ForensicsError
    from ingest.run import ingest_run

    run_dirs: list[Path] = []
    for d in paths:
        found = discover_runs(d) if split and d.is_dir() else []
        run_dirs.extend([r.path for r in found] or [d])
    reports, failed = [], []
    for run_dir in run_dirs:
        bars = progress_for(run_dir)
        try:
            if not split:
                refuse_folder_of_runs(run_dir, "ingest")
            reports.append(ingest_run(run_dir, db, progress=bars, trust_pickle=trust_pickle,
                                      follow_links=follow_links))
        except ForensicsError as exc:
            failed.append({"path": str(run_dir), "error": str(exc)})
        finally:
            bars.close()
    return run_dirs, reports, failed
