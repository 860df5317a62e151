"""The checkpoint a replay starts from."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def choose_checkpoint(run: Any, root: Path, target: int, step_numbering: str | None,
                      explicit: str | None) -> tuple[str, str, int, int]:
    """(path, layout, step, first step to replay) of the checkpoint to start from: the explicit one, else the
    last finite one whose state precedes `target`. What a checkpoint's step means comes from its layout
    (`ingest.checkpoints.LAYOUTS`), unless the entry point's `step_numbering` overrides it."""
    from ingest.checkpoints import first_step_after
    from ingest.errors import CheckpointMismatch

    ck = run.table("checkpoints")
    rows = ck.to_dicts() if ck.height else []
    if explicit:
        p = Path(explicit)
        if p.is_absolute() or (not (root / p).exists() and p.exists()):  # a path from here, not from the run root
            if not p.resolve().is_relative_to(root):
                raise CheckpointMismatch(f"--from-checkpoint {explicit} is not inside the run directory {root}")
            rel = str(p.resolve().relative_to(root))
        else:
            rel = str(p)
        for r in rows:
            if r["path"] == rel or r["path"].rstrip("/") == rel.rstrip("/"):
                if r["step"] is None:
                    raise CheckpointMismatch(f"{rel}: the store knows no step for this checkpoint")
                return r["path"], r["format"], int(r["step"]), first_step_after(r["format"], r["step"], step_numbering)
        known = ", ".join(r["path"] for r in rows) or "none"
        raise CheckpointMismatch(f"--from-checkpoint {explicit}: not a checkpoint of this run (known: {known})")
    ok = [r for r in rows if r["step"] is not None and r["finite"] is not False and r["status"] in ("ok", "partial")
          and first_step_after(r["format"], r["step"], step_numbering) <= target]
    if not ok:
        listed = ", ".join(f"{r['path']} (step {r['step']}, {'finite' if r['finite'] else 'NON-FINITE'})"
                           for r in sorted(rows, key=lambda r: r["step"] or -1)) or "none"
        raise CheckpointMismatch(
            f"no finite checkpoint before step {target} (checkpoints: {listed}); save checkpoints with optimizer "
            f"state every few hundred steps next time (forensics.capture does)")
    best = max(ok, key=lambda r: first_step_after(r["format"], r["step"], step_numbering))
    return best["path"], best["format"], int(best["step"]), first_step_after(best["format"], best["step"], step_numbering)
