"""The one-call Python API: `analyze(run_dir)` ingests what is new, runs every detector, stores and returns the result.

    from forensics.analysis import analyze
    result = analyze("sample_runs/runs/nan_lr_too_high", db="/tmp/f.duckdb")
    result.as_dict()          # the same object `forensics analyze --json` prints
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from forensics.engine import analyze_run, build_detectors, store_analysis
from forensics.findings import Analysis
from forensics.run import Run


def analyze(run_dir: str | os.PathLike, db: str | os.PathLike | None = None, *, only: Sequence[str] = (),
            skip: Sequence[str] = (), settings: dict[str, str] | None = None, progress: bool = False,
            trust_pickle: bool = False) -> Analysis:
    """Ingest `run_dir` (only what is new since the last ingest), analyse it, store findings, spikes and skips.

    `db` as everywhere (DECISIONS.md §5): this path, else $FORENSICS_DB, else the user cache. `only`/`skip`
    take catalog kinds; `settings` maps "detector.field" to a value (see `forensics rules`); `trust_pickle` lets
    ingest unpickle checkpoints that need it (runs code from the file). Raises
    ForensicsError subclasses for unreadable runs, bad settings or a locked database.
    """
    from ingest.run import ingest_run
    from ingest.store import connect, default_db_path

    detectors = build_detectors(only, skip, settings)
    path = default_db_path(db)
    report = ingest_run(Path(run_dir), path, progress=progress, trust_pickle=trust_pickle)
    with connect(path, write=False) as con:
        run = Run.from_store(con, report.run_id)
        result = analyze_run(run, detectors)
    r = result.replay_from
    if r and r.get("checkpoint"):  # the exact command that replays the onset (issue 14)
        import shlex
        r["command"] = (f"forensics replay {shlex.quote(str(run_dir))} --step {r['onset_step']}"
                        + (f" --db {shlex.quote(str(db))}" if db else ""))
    with connect(path, write=True) as con:
        store_analysis(con, result, settings)
    return result
