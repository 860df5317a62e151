"""`forensics probe`: the debugging guides' first questions, asked post hoc of the run's own model, checkpoints and
saved batches: can it overfit one batch, which LR works, do gradients reach every layer, is the loss fed logits,
does the initial loss match log(C), do labels line up with inputs, are inputs scaled.

    from forensics.usercode.probe import probe
    result = probe("runs/exp1", db="/tmp/f.duckdb")          # every check; checks=("lr_range",) for one
    result["checks"][0]        # {"name", "status": "pass"|"fail"|"n/a", "summary", "evidence", "names", "explains"}

Running it runs the user's code (the run's `forensics_entry.py`, DECISIONS.md §10): calling `probe` is the opt-in.
It shares the user-code kit with replay (forensics/usercode/kit/: entry point loading, checkpoint choice and
reading, state restore, batches, RNG, device, threads); the run directory is never written to. Each check is one
small class in `checks.CHECKS` (its name, the finding kinds it explains, `check(ctx)`), its work in its own module.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from forensics.usercode.probe.checks import CHECK_NAMES, CHECKS, PROBED_KINDS

__all__ = ["CHECKS", "CHECK_NAMES", "PROBED_KINDS", "parse_checks", "probe"]


def parse_checks(text: str | None) -> tuple[str, ...]:
    """`--checks a,b` as check names, in the run order; an unknown name is an error listing the valid ones."""
    from ingest.errors import ForensicsError

    if not text:
        return CHECK_NAMES
    wanted = [c.strip() for c in text.split(",") if c.strip()]
    unknown = [c for c in wanted if c not in CHECK_NAMES]
    if unknown:
        raise ForensicsError(f"--checks: unknown check {', '.join(unknown)}; valid: {', '.join(CHECK_NAMES)}")
    return tuple(c for c in CHECK_NAMES if c in wanted)


def probe(run_dir: str | os.PathLike, *, checks: tuple[str, ...] | None = None, entry: str | os.PathLike | None = None,
          device: str = "auto", threads: int | None = None, db: str | os.PathLike, store: bool = True) -> dict[str, Any]:
    """Run `checks` (default all) on `run_dir` with `threads` intra-op CPU threads (default: the CPUs free now, as
    replay chooses them); returns the documented object (docs/probe.md) and, with `store`,
    writes one row per check to the `probes` table of `db`. Raises ReplayError subclasses when the run has no
    entry point or no checkpoint or batch at all (a check missing only its own ingredient says n/a)."""
    from forensics.judge.run import Run
    from forensics.usercode.kit.template import entry_path
    from forensics.usercode.kit.rng import get_rng, set_rng
    from forensics.usercode.kit.threads import intra_op_threads
    from forensics.usercode.probe.context import Context
    from ingest.errors import ForensicsError
    from ingest.run import ingest_run
    from ingest.store import connect

    root = Path(run_dir).resolve()
    if not root.is_dir():
        raise ForensicsError(f"{run_dir} is not a directory")
    path = Path(db).expanduser()
    report = ingest_run(root, path, progress=None)
    with connect(path, write=False) as con:
        run = Run.from_store(con, report.run_id)
        if run.pick("lr"):
            run.series("lr")
    entry_file = entry_path(run, root, entry)
    t0 = time.perf_counter()
    saved_rng = get_rng()
    try:
        with intra_op_threads(threads) as (n_threads, threads_from):
            ctx = Context.open(run, root, entry_file, device)
            result: dict[str, Any] = {
                "run": run.name, "run_id": run.run_id, "entry": str(entry_file), "from_checkpoint": ctx.checkpoints(),
                "device": str(ctx.device), "threads": n_threads, "threads_from": threads_from,
                "batches": ctx.batch_steps(), "notes": ctx.notes, "checks": [], "timings_s": {}}
            by_name = {c.name: c for c in CHECKS}
            for name in checks or CHECK_NAMES:
                t1 = time.perf_counter()
                result["checks"].append(by_name[name].check(ctx))
                result["timings_s"][name] = time.perf_counter() - t1
    finally:
        set_rng(saved_rng)
    result["timings_s"]["total"] = time.perf_counter() - t0
    if store:
        from ingest.writes import insert_probe

        with connect(path, write=True) as con:
            result["probe_id"] = insert_probe(con, result)
    return result
