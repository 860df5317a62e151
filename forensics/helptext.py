"""The `forensics` commands' help: a line, a description and an example each (every help ends with a runnable
example, as sqlite-utils' do), the arguments several commands share, and the argument types that check words.
`forensics.cli` builds its parsers from these tables."""

from __future__ import annotations

import argparse
from pathlib import Path

EPILOG_DB = 'The database is --db PATH, else $FORENSICS_DB, else ~/.cache/run-forensics/forensics.duckdb.'

# command -> (one-line help, description, epilog ending with an example)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "ingest": (
        'read run directories into the database',
        'Read everything each run directory holds (TensorBoard event files, W&B runs, HF trainer_state.json, '
        'Lightning metrics.csv, MLflow, CSV/JSONL/Parquet metric logs, console logs, configs) into the database. '
        'Re-ingesting reads only what is new. Damaged files keep their good records; what was skipped is listed. '
        'The run directory is never written to. A folder that holds several runs (TensorBoard run folders, '
        'wandb/run-*, lightning_logs/version_*, ...) is not read as one: name the runs, or pass --all. Every '
        'directory that can be read is; each one that cannot is named on stderr, and then the exit code is 2.',
        EPILOG_DB + '\n\nexample:\n  forensics ingest sample_runs/runs/nan_lr_too_high --db /tmp/f.duckdb'),
    "runs": (
        'list ingested runs with their sources, point counts and latest verdict',
        'List every run in the database: its sources (format, points, status), what was skipped, and its latest '
        'analysis as `analyze` stored it (verdict, reason, earliest cause, --only/--skip).',
        EPILOG_DB + '\n\nexample:\n  forensics runs --db /tmp/f.duckdb --json'),
    "analyze": (
        'diagnose a run: ingest what is new, run every detector, print a ranked diagnosis',
        'Ingest RUN_DIR if needed, run every detector of the pathology catalog, store findings, spikes and '
        'skipped checks in the database, and print the diagnosis: the verdict (failed, suspicious, inconclusive '
        'or healthy) with its reason, the files read with problems, the earliest cause, then one finding per line '
        '`run:step kind: summary`. A run is healthy only when it was read and checked: no training loss, a '
        'missing reader, a loss too short to judge or a file read with problems make it inconclusive. Exit code 0 '
        'whatever it found; --fail-on makes findings of that severity or worse (or, with `inconclusive`, any '
        'verdict but healthy) exit 1.',
        EPILOG_DB + "\nThresholds: `forensics rules` lists every detector's fields.\n\nexample:\n  forensics analyze "
            'sample_runs/runs/nan_lr_too_high --db /tmp/f.duckdb --set loss-spike.z=6'),
    "rules": (
        "list every catalog pathology, whether it is detected yet, and each detector's thresholds",
        'Every kind of the pathology catalog with its one-line summary; detected kinds show the fields `forensics '
        'analyze --set` accepts, the others say why they are not detected yet.',
        'example:\n  forensics rules --json'),
    "checkpoints": (
        "list a run's checkpoints, whether they are finite, and what moved between them",
        'Ingest RUN_DIR (only what is new), then list its checkpoints by step with format, size, whether every '
        'model tensor is finite and the read status; for each consecutive pair, the tensors that moved most '
        'relative to their size (‖Δw‖/‖w‖) and those that did not move at all; and the saved batches with the '
        'samples holding NaN/Inf or outliers. Torch files are read with weights_only=True: a file that needs full '
        'unpickling is listed as needs_pickle unless --trust-pickle is given.',
        EPILOG_DB + '\n\nexample:\n  forensics checkpoints sample_runs/runs/nan_lr_too_high --top 3 --json'),
    "probe": (
        'ask the run\'s own model the debugging guides\' first questions: overfit one batch, LR range, ...',
        'Run the debugging guides\' first checks on RUN_DIR\'s own model, checkpoints and saved batches, through its '
        'entry point (forensics_entry.py, docs/replay.md). RUNNING THIS RUNS THE USER\'S CODE in that file: the '
        'command is the opt-in. Each check says pass, fail or n/a (with why), the numbers, the modules or parameters '
        'it names and the findings it explains (docs/probe.md). The result is stored in the database; the run '
        'directory is never written to.',
        EPILOG_DB + '\n\nexample:\n  forensics probe runs/exp1 --checks overfit_one_batch,lr_range --db /tmp/f.duckdb'),
    "app": (
        'browse runs, findings, curves, checkpoints and replays in the browser',
        'Start the Streamlit app on localhost and print its URL. It reads the database read-only and briefly, so '
        'it stays open while `forensics ingest` or `analyze` write to it (reload to see new results). Pages: '
        'Runs, Run report, Layers, Checkpoints and replays, Compare. Needs the app extra: pip install -e '
        '".[app]".',
        EPILOG_DB + '\n\nexample:\n  forensics app --db /tmp/f.duckdb --run nan_lr_too_high --port 8502'),
    "watch": (
        'watch folders of runs: diagnose every new or growing run and alert on what changed',
        'Find every run under each ROOT (the layouts W&B, TensorBoard, Lightning, HF Trainer, MLflow and console '
        'scripts leave: docs/watch.md), then poll: a run whose files changed is ingested (only what is new) and '
        "analysed again. An alert is one line on stdout (a JSON line with --json) and a row in the database's "
        'alerts table: a finding the run did not have or a worse severity, a run that stopped growing for longer '
        'than its usual interval times --stall-factor, a file whose tail ends inside a record and has not grown '
        'by the next pass, a run that cannot be read or was deleted. Service messages go to stderr. '
        'SIGINT/SIGTERM finish the current write and exit 0.',
        EPILOG_DB + '\nThe write lock is held only per transaction: `forensics app` can read meanwhile.\n\nexample:\n  '
            'forensics watch sample_runs/runs --db /tmp/f.duckdb --once --json'),
    "replay": (
        're-execute the bad step from the last finite checkpoint: first non-finite op, samples, fixes',
        "Re-execute RUN_DIR's step N from the last finite checkpoint before it, through the saved batches, with "
        "the run's entry point (forensics_entry.py at the run root, docs/replay.md). RUNNING THIS RUNS THE "
        "USER'S CODE in that file: the command is the opt-in. Fidelity first (replayed vs logged losses and "
        'gradient norms), then a second re-run of the failing step (transient or deterministic); only a faithful, '
        'reproduced failure is diagnosed: phase, op, module, file:line, culprit samples and four counterfactuals '
        '(fp32, clip_1.0, lr_div_10, drop_culprits). The result is stored in the database. The run directory is '
        'never written to.',
        EPILOG_DB + '\n\nexample:\n  forensics replay sample_runs/runs/nan_bad_sample --step 229 --db /tmp/f.duckdb'),
}

# Arguments several commands share: name -> (flags, add_argument's keywords).
COMMON = {
    "run_dir": (("run_dir",), {"metavar": "RUN_DIR", "type": Path, "help": "a training run's folder"}),
    "run_dirs": (("run_dirs",), {"nargs": "+", "metavar": "RUN_DIR", "type": Path, "help": "a training run's folder"}),
    "roots": (("roots",), {"nargs": "+", "metavar": "ROOT", "type": Path, "help": "a folder holding runs (or one run)"}),
    "db": (("--db",), {"metavar": "PATH", "help": "DuckDB file to use (default: $FORENSICS_DB or the user cache)"}),
    "json": (("--json",), {"action": "store_true", "help": "print one JSON object for scripts instead of text"}),
    "quiet": (("--quiet",), {"action": "store_true", "help": "no progress bar"}),
    "trust_pickle": (("--trust-pickle",), {"action": "store_true", "help": "read checkpoints that need full "
                     "unpickling (this runs code from the file: only for files you trust)"}),
    "entry": (("--entry",), {"metavar": "FILE.py", "type": Path,
                             "help": "entry point (default: RUN_DIR/forensics_entry.py)"}),
    "device": (("--device",), {"choices": ["auto", "cpu", "cuda"], "default": "auto",
                               "help": "default auto: CUDA when present"}),
    "markdown": (("--markdown",), {"metavar": "FILE", "type": Path, "help": "also write the report as markdown to FILE"}),
    "follow_links": (("--follow-links",), {"action": "store_true", "help": "read file links that lead out of the run "
                     "directory (by default they are listed, not read)"}),
}


def kinds_arg(text: str) -> list[str]:
    """`--only`/`--skip`: comma-separated kinds."""
    return [k.strip() for k in text.split(",") if k.strip()]


def setting_arg(text: str) -> tuple[str, str]:
    """`--set DETECTOR.FIELD=VALUE`, split; forensics.settings checks the names and the value's type."""
    key, sep, value = text.partition("=")
    if not sep or "." not in key:
        raise argparse.ArgumentTypeError(f"expected DETECTOR.FIELD=VALUE, got {text!r} (e.g. loss-spike.z=6)")
    return key.strip(), value.strip()


def at_least(minimum: int, what: str = ""):
    """An argument type: an integer of at least `minimum` (`what` starts the message)."""
    def parse(text: str) -> int:
        if int(text) < minimum:
            raise argparse.ArgumentTypeError(f"{what}expected {minimum} or more, got {int(text)}")
        return int(text)
    return parse


JOBS = at_least(1, "--jobs takes a number of processes: ")
