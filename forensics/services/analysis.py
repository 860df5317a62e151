"""The one-call Python API: `analyze(run_dir)` ingests what is new, runs every detector, stores and returns the result.

    from forensics.services.analysis import analyze
    result = analyze("sample_runs/runs/nan_lr_too_high", db="/tmp/f.duckdb")
    result.as_dict()          # the same object `forensics analyze --json` prints
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from forensics.judge.detectors.base import Detector
from forensics.judge.engine import analyze_run, store_analysis
from forensics.judge.findings import Analysis, Finding
from forensics.services.folders import refuse_folder_of_runs
from forensics.judge.run import Run
from forensics.judge.settings import Selection
from forensics.judge.verdict import judge


def analyze(run_dir: str | os.PathLike, db: str | os.PathLike, *, selection: Selection = Selection(),
            progress: Callable[[str, int, int], None] | None = None, trust_pickle: bool = False,
            follow_links: bool = False, implied_db: str | os.PathLike | None = None) -> Analysis:
    """Ingest `run_dir` (only what is new since the last ingest), analyse it, store findings, spikes and skips.

    `db` is the DuckDB file (the CLI resolves `--db`, `$FORENSICS_DB` and the user cache, DECISIONS.md §5).
    `selection` says which detectors run with which thresholds (`forensics.judge.settings.selection` builds it from
    `--only`/`--skip`/`--set`); `progress` is ingest's callback; `trust_pickle` lets ingest unpickle checkpoints
    that need it (runs code from the file); `follow_links` lets it read file links that lead out of the run;
    `implied_db` is the store a command finds with no `--db` (the CLI's default): the printed replay and probe
    commands name `--db` only for another store.
    Raises ForensicsError subclasses for unreadable runs or a locked database.
    """
    from ingest import queries
    from ingest.run import ingest_run
    from ingest.store import hold

    refuse_folder_of_runs(Path(run_dir), "analyze")
    path = Path(db).expanduser()
    # One connection for the whole command on a small run (ingest lets it go on a large one): opening and closing
    # DuckDB five times cost more than an ordinary run's work (store.hold)
    with hold(path) as store:
        report = ingest_run(Path(run_dir), store, progress=progress, trust_pickle=trust_pickle,
                            follow_links=follow_links)
        with store.connect(write=False) as con:
            result = analyze_stored(con, report.run_id, selection)
            has_batch = bool(queries.stored_batches(con, report.run_id))
        result.db = str(path)
        set_replay_command(result, run_dir, path, implied_db)
        set_probe_command(result, run_dir, path, has_batch, implied_db)
        with store.connect(write=True) as con:
            store_analysis(con, result, selection.as_json())
        if result.verdict == "failed":  # the store's closest run that worked, in one line (`forensics compare`)
            from forensics.services.compare import sibling_line

            with store.connect(write=False) as con:
                result.sibling = sibling_line(con, report.run_id)
    return result


def set_replay_command(result: Analysis, run_dir: str | os.PathLike, db: str | os.PathLike,
                       implied_db: str | os.PathLike | None = None) -> None:
    """The exact `forensics replay` command for the NaN onset, where a finite checkpoint comes before it and no
    replay of it is stored since the run last changed (paths under the home directory written with `~`, as the
    README shows them)."""
    from forensics.judge.learned import replay_fresh

    r = result.replay_from
    if r and r.get("checkpoint") and not replay_fresh(result.answers, r["onset_step"]):
        from forensics.usercode.replay import replay_command  # only here: an ordinary run (no checkpoint) never needs it

        r["command"] = replay_command(run_dir, r["onset_step"], db=_db_argument(db, implied_db))


def _db_argument(db: str | os.PathLike, implied_db: str | os.PathLike | None) -> str | os.PathLike | None:
    """`db` for a printed command, or None where the command would find that store by itself (`implied_db`, the
    CLI's default: the README's sample shows the default store's command without --db)."""
    same = implied_db is not None and Path(db).expanduser() == Path(implied_db).expanduser()
    return None if same else db


def set_probe_command(result: Analysis, run_dir: str | os.PathLike, db: str | os.PathLike, has_batch: bool,
                      implied_db: str | os.PathLike | None = None) -> None:
    """`forensics probe RUN_DIR`, for a finding a probe explains, when the run has an entry point and a saved batch
    (the probe runs the user's code: only that command does, never analyze), and no probe is stored since the run
    last changed."""
    from forensics.judge.learned import probe_fresh
    from forensics.judge.numbers import shell_path
    from forensics.usercode.probe import PROBED_KINDS
    from forensics.usercode.kit.entry import ENTRY_NAME

    probed = frozenset(f.kind for f in result.findings if f.kind in PROBED_KINDS)
    if has_batch and (Path(run_dir) / ENTRY_NAME).is_file() and probed and not probe_fresh(result.answers):
        db_arg = _db_argument(db, implied_db)
        result.probed = probed
        result.probe_command = f"forensics probe {shell_path(run_dir)}" + (f" --db {shell_path(db_arg)}" if db_arg else "")


def analyze_stored(con, run_id: str, selection: Selection = Selection()) -> Analysis:
    """Analyse a run the store already holds (an open read-only connection): findings, read problems and the
    verdict. `analyze` and the fleet's workers both come here, so a run gets the same diagnosis either way."""
    from ingest import queries

    detectors = selection.detectors()
    run = Run.from_store(con, run_id, selection.long_series)
    result = analyze_run(run, detectors, selection.spike)
    result.replay_from = replay_start(run, result.findings)
    result.findings = replay_advice(result.findings, result.replay_from)
    result.only, result.skip = list(selection.only), list(selection.skip)
    result.read_problems = queries.read_problems(con, run_id)
    from forensics.usercode.kit.entry import is_code

    unknown = queries.unknown_files(con, run_id)
    result.unknown_files = [p for p in unknown if not is_code(p)]
    result.code_files = [p for p in unknown if is_code(p)]
    result.lines_read = queries.lines_read(con, run_id)
    result.answers = queries.stored_answers(con, run_id)
    give_verdict(result, run, detectors, restricted=selection.restricted)
    return result


def replay_start(run: Run, findings: list[Finding]) -> dict[str, Any] | None:
    """For the earliest non-finite onset (nan_loss or masked_nonfinite), the checkpoint a replay of that step starts
    from, chosen by the rule replay itself uses (`forensics.usercode.kit.checkpoints.starting_checkpoint`), and the
    saved batch of that step. None when there is no such finding."""
    onset = next((f for f in findings if f.kind in ("nan_loss", "masked_nonfinite")), None)
    if onset is None or onset.step is None:
        return None
    import polars as pl

    from forensics.usercode.kit.checkpoints import starting_checkpoint  # only here: most runs have no NaN onset

    out: dict[str, Any] = {"onset_step": onset.step, "checkpoint": None, "batch": None}
    ck = run.table("checkpoints")
    start = starting_checkpoint(ck.to_dicts() if ck.height else [], onset.step)
    if start is not None:
        out["checkpoint"] = {"path": start["path"], "step": int(start["step"])}
    b = run.table("batches")
    if b.height:
        at = b.filter(pl.col("step") == onset.step)
        if at.height:
            out["batch"] = {"path": at["path"][0], "step": onset.step}
        else:
            near = b.filter(pl.col("step") <= onset.step).sort("step")
            out["batch_note"] = (f"no batch saved for step {onset.step}" +
                                 (f"; nearest before: {near['path'][-1]} (step {near['step'][-1]})" if near.height else ""))
    return out


def replay_advice(findings: list[Finding], replay_from: dict[str, Any] | None) -> list[Finding]:
    """Findings whose first checks send the user to replay where no finite checkpoint could start one say what to do
    instead (`catalog.without_replay`): a finding that names its last finite checkpoint (nonfinite_weights) by that,
    the others by the checkpoint a replay of the NaN onset would start from."""
    import dataclasses

    from forensics.judge import catalog

    onset_start = bool(replay_from and replay_from.get("checkpoint"))
    out = []
    for f in findings:
        able = (f.evidence["last_finite_checkpoint"] is not None if "last_finite_checkpoint" in f.evidence
                else onset_start)
        out.append(f if able else dataclasses.replace(f, checks=catalog.without_replay(f.checks)))
    return out


def give_verdict(result: Analysis, run: Run, detectors: Sequence[Detector], *, restricted: bool) -> None:
    """Set `result.verdict` and its reason (rules in forensics/judge/verdict.py) from what the analysis could see."""
    loss_points = run.finite_points("loss") if run.has("loss") else None
    v = judge(result, selected=[d.kind for d in detectors],
              loss_detectors=[d.kind for d in detectors
                              if "loss" in d.requires or getattr(d, "reads_validation_alone", False)],
              val_points=run.finite_points("val_loss") if run.has("val_loss") else None,
              restricted=restricted, loss_points=loss_points, read_problems=result.read_problems)
    result.verdict, result.verdict_reason, result.short_log = v.value, v.reason, v.short
