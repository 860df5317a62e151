"""The one-call Python API: `analyze(run_dir)` ingests what is new, runs every detector, stores and returns the result.

    from forensics.analysis import analyze
    result = analyze("sample_runs/runs/nan_lr_too_high", db="/tmp/f.duckdb")
    result.as_dict()          # the same object `forensics analyze --json` prints
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from forensics.detectors.base import Detector
from forensics.engine import analyze_run, store_analysis
from forensics.findings import Analysis
from forensics.folders import refuse_folder_of_runs
from forensics.run import Run
from forensics.settings import Selection
from forensics.verdict import judge


def analyze(run_dir: str | os.PathLike, db: str | os.PathLike, *, selection: Selection = Selection(),
            progress: Callable[[str, int, int], None] | None = None, trust_pickle: bool = False,
            follow_links: bool = False, implied_db: str | os.PathLike | None = None) -> Analysis:
    """Ingest `run_dir` (only what is new since the last ingest), analyse it, store findings, spikes and skips.

    `db` is the DuckDB file (the CLI resolves `--db`, `$FORENSICS_DB` and the user cache, DECISIONS.md §5).
    `selection` says which detectors run with which thresholds (`forensics.settings.selection` builds it from
    `--only`/`--skip`/`--set`); `progress` is ingest's callback; `trust_pickle` lets ingest unpickle checkpoints
    that need it (runs code from the file); `follow_links` lets it read file links that lead out of the run;
    `implied_db` is the store a command finds with no `--db` (the CLI's default): the printed replay and probe
    commands name `--db` only for another store.
    Raises ForensicsError subclasses for unreadable runs or a locked database.
    """
    from ingest import queries
    from ingest.run import ingest_run
    from ingest.store import connect, hold

    refuse_folder_of_runs(Path(run_dir), "analyze")
    path = Path(db).expanduser()
    # One connection for the whole command on a small run (ingest lets it go on a large one): opening and closing
    # DuckDB five times cost more than an ordinary run's work (issue 28; store.hold)
    with hold(path):
        report = ingest_run(Path(run_dir), path, progress=progress, trust_pickle=trust_pickle,
                            follow_links=follow_links)
        with connect(path, write=False) as con:
            result = analyze_stored(con, report.run_id, selection)
            has_batch = bool(queries.stored_batches(con, report.run_id))
        result.db = str(path)
        set_replay_command(result, run_dir, path, implied_db)
        set_probe_command(result, run_dir, path, has_batch, implied_db)
        with connect(path, write=True) as con:
            store_analysis(con, result, selection.as_json())
    return result


def set_replay_command(result: Analysis, run_dir: str | os.PathLike, db: str | os.PathLike,
                       implied_db: str | os.PathLike | None = None) -> None:
    """The exact `forensics replay` command for the NaN onset, where a finite checkpoint comes before it (paths
    under the home directory written with `~`, as the README shows them)."""
    r = result.replay_from
    if r and r.get("checkpoint"):
        from forensics.replay import replay_command  # only here: an ordinary run (no checkpoint) never needs it

        r["command"] = replay_command(run_dir, r["onset_step"], db=_db_argument(db, implied_db))


def _db_argument(db: str | os.PathLike, implied_db: str | os.PathLike | None) -> str | os.PathLike | None:
    """`db` for a printed command, or None where the command would find that store by itself (`implied_db`, the
    CLI's default: the README's sample shows the default store's command without --db)."""
    same = implied_db is not None and Path(db).expanduser() == Path(implied_db).expanduser()
    return None if same else db


def set_probe_command(result: Analysis, run_dir: str | os.PathLike, db: str | os.PathLike, has_batch: bool,
                      implied_db: str | os.PathLike | None = None) -> None:
    """`forensics probe RUN_DIR`, for a finding a probe explains, when the run has an entry point and a saved batch
    (the probe runs the user's code: only that command does, never analyze)."""
    from forensics.numbers import shell_path
    from forensics.probe import PROBED_KINDS
    from forensics.replay import ENTRY_NAME

    if has_batch and (Path(run_dir) / ENTRY_NAME).is_file() and any(f.kind in PROBED_KINDS for f in result.findings):
        db_arg = _db_argument(db, implied_db)
        result.probe_command = f"forensics probe {shell_path(run_dir)}" + (f" --db {shell_path(db_arg)}" if db_arg else "")


def analyze_stored(con, run_id: str, selection: Selection = Selection()) -> Analysis:
    """Analyse a run the store already holds (an open read-only connection): findings, read problems and the
    verdict. `analyze` and the fleet's workers both come here, so a run gets the same diagnosis either way."""
    from ingest import queries

    detectors = selection.detectors()
    run = Run.from_store(con, run_id, selection.long_series)
    result = analyze_run(run, detectors)
    result.only, result.skip = list(selection.only), list(selection.skip)
    result.read_problems = queries.read_problems(con, run_id)
    result.unknown_files = queries.unknown_files(con, run_id)
    result.lines_read = queries.lines_read(con, run_id)
    give_verdict(result, run, detectors, restricted=selection.restricted)
    return result


def give_verdict(result: Analysis, run: Run, detectors: Sequence[Detector], *, restricted: bool) -> None:
    """Set `result.verdict` and its reason (rules in forensics/verdict.py) from what the analysis could see."""
    loss_points = run.finite_points("loss") if run.has("loss") else None
    v = judge(result, selected=[d.kind for d in detectors],
              loss_detectors=[d.kind for d in detectors
                              if "loss" in d.requires or getattr(d, "reads_validation_alone", False)],
              val_points=run.finite_points("val_loss") if run.has("val_loss") else None,
              restricted=restricted, loss_points=loss_points, read_problems=result.read_problems)
    result.verdict, result.verdict_reason = v.value, v.reason
