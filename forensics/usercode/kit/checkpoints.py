"""The one rule that chooses the checkpoint a replay or a probe starts from, over the store's checkpoint rows
(`run.table("checkpoints")`: path, format, step, finite, status). Pure and without torch: `analyze` names the
replay start with it, `replay` starts there, `probe` takes its earliest and last usable checkpoints from it, so
analyze never names a checkpoint replay would refuse."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ingest.checkpoints import first_step_after
from ingest.errors import CheckpointMismatch


def usable(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The checkpoints a replay or a probe can start from, in the order given: the store knows their step, they are
    not known to hold a non-finite value, and they were read whole or in part (status ok or partial)."""
    return [r for r in rows if r["step"] is not None and r["finite"] is not False and r["status"] in ("ok", "partial")]


def starting_checkpoint(rows: Iterable[dict[str, Any]], target: int,
                        step_numbering: str | None = None) -> dict[str, Any] | None:
    """The usable checkpoint whose state comes last while a replay of step `target` can still start from it (the
    first step it has not done is `target` or earlier); None when there is none. What a checkpoint's step means
    comes from its layout (`ingest.checkpoints.LAYOUTS`: Lightning's `step=N` holds the state before step N),
    unless the entry point's `step_numbering` overrides it; `analyze`, which never runs the entry point, reads the
    layout's meaning."""
    ok = [r for r in usable(rows) if first_step_after(r["format"], r["step"], step_numbering) <= target]
    return max(ok, key=lambda r: first_step_after(r["format"], r["step"], step_numbering)) if ok else None


def choose_checkpoint(rows: list[dict[str, Any]], root: Path, target: int, step_numbering: str | None,
                      explicit: str | None) -> tuple[str, str, int, int]:
    """(path, layout, step, first step to replay) of the checkpoint to start from: the explicit one (a path from
    the run root, or from here inside it), else `starting_checkpoint`. Raises CheckpointMismatch naming the
    checkpoints the store knows when there is none."""
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
    best = starting_checkpoint(rows, target, step_numbering)
    if best is None:
        listed = ", ".join(f"{r['path']} (step {r['step']}, {'finite' if r['finite'] else 'NON-FINITE'})"
                           for r in sorted(rows, key=lambda r: r["step"] or -1)) or "none"
        raise CheckpointMismatch(
            f"no finite checkpoint before step {target} (checkpoints: {listed}); save checkpoints with optimizer "
            f"state every few hundred steps next time (forensics.capture does)")
    return best["path"], best["format"], int(best["step"]), first_step_after(best["format"], best["step"], step_numbering)
