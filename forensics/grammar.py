"""The command line's grammar: every `forensics` command with its arguments, its help line, description and a
runnable example (as sqlite-utils' help ends), the arguments several commands share, and the argument types that
check words. `build_parser()` makes the argparse parser; `forensics.cli` runs the parsed command and prints."""

from __future__ import annotations

import argparse
from pathlib import Path

from forensics import __version__

EPILOG_DB = 'The database is --db PATH, else $FORENSICS_DB, else ~/.cache/run-forensics/forensics.duckdb.'

EXIT_CODES = ("exit codes: 0 done; 1 a --fail-on level was met (analyze); 2 an error, said in one line on stderr;\n"
              "  74 the output could not be written (standard output closed or full; what was stored is kept);\n"
              "  130 interrupted; 143 terminated")

# command -> (one-line help, description, epilog ending with an example)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "ingest": (
        'read run directories into the database',
        'Read everything each run directory holds (TensorBoard event files, W&B runs, HF trainer_state.json, '
        'Lightning metrics.csv, MLflow, CSV/JSONL/Parquet metric logs, NumPy and pickled histories, console logs, '
        'configs) into the database. Re-ingesting reads only what is new. Damaged files keep their good records; '
        'what was skipped is listed. The run directory is never written to. A folder that holds several runs '
        '(TensorBoard run folders, wandb/run-*, lightning_logs/version_*, ...) is not read as one: name the runs, '
        'or pass --all. Every directory that can be read is; each one that cannot is named on stderr, and then the '
        'exit code is 2.',
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
        'whatever it found; --fail-on critical makes a critical finding exit 1, --fail-on warning any verdict but '
        'healthy (a warning, a critical finding, or a run that could not be judged).',
        EPILOG_DB + "\nThresholds: `forensics rules` lists every detector's fields.\n\nexample:\n  forensics analyze "
            'sample_runs/runs/nan_lr_too_high --db /tmp/f.duckdb --set spike.z=6'),
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
    "compare": (
        'a failed run beside the runs that worked: siblings, where the losses part, ranked settings, team counts',
        'Compare RUN (a run folder, name or id in the store; analyse the runs first, e.g. `forensics analyze ROOT '
        '--all`) with its siblings: with no OTHER, the judged runs of the store with the same writer and model shape '
        '(config keys and series), nearest config, healthy or with fewer or later critical findings, ranked with one '
        'line of why each. Against the best: the first step where the loss leaves the sibling\'s beyond both runs\' '
        'noise (aligned by step) and which of LR, gradient norm, loss scale and update ratio left it first; the '
        'config values that differ (dotted keys), ranked by what the diagnosis implicates; and for each, how the '
        'store\'s runs with each value ended, with counts and Fisher\'s exact test where enough runs hold it (an '
        'association, never a cause). Reads the store only.',
        EPILOG_DB + '\n\nexample:\n  forensics compare sample_runs/runs/nan_lr_too_high --db /tmp/f.duckdb --json'),
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
        'reproduced failure is diagnosed: phase, op, module, file:line, culprit samples and counterfactuals '
        "replayed over the window from the checkpoint to the failing step (fp32, clipping at the run's own "
        'threshold, lr_div_10, eps_default, drop_culprits), the likely fix last. The result is stored in the '
        'database. The run directory is never written to.',
        EPILOG_DB + '\n\nexample:\n  forensics replay sample_runs/runs/nan_bad_sample --step 229 --db /tmp/f.duckdb'),
}

# Arguments several commands share: name -> (flags, add_argument's keywords).
def at_least(minimum: int, what: str = ""):
    """An argument type: an integer of at least `minimum` (`what` starts the message)."""
    def parse(text: str) -> int:
        if int(text) < minimum:
            raise argparse.ArgumentTypeError(f"{what}expected {minimum} or more, got {int(text)}")
        return int(text)
    return parse


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
    "threads": (("--threads",), {"type": at_least(1, "--threads: "), "metavar": "N",
                                 "help": "intra-op CPU threads (default: the CPUs free now, from the load average; "
                                         "reported)"}),
    "markdown": (("--markdown",), {"metavar": "FILE", "type": Path, "help": "also write the report as markdown to FILE"}),
    "follow_links": (("--follow-links",), {"action": "store_true", "help": "read file links that lead out of the run "
                     "directory (by default they are listed, not read)"}),
}


def kinds_arg(text: str) -> list[str]:
    """`--only`/`--skip`: comma-separated kinds."""
    return [k.strip() for k in text.split(",") if k.strip()]


def setting_arg(text: str) -> tuple[str, str]:
    """`--set DETECTOR.FIELD=VALUE`, split; forensics.judge.settings checks the names and the value's type."""
    key, sep, value = text.partition("=")
    if not sep or "." not in key:
        raise argparse.ArgumentTypeError(f"expected DETECTOR.FIELD=VALUE, got {text!r} (e.g. spike.z=6)")
    return key.strip(), value.strip()


JOBS = at_least(1, "--jobs takes a number of processes: ")


# -- one parser per command ------------------------------------------------------------------------------------

def _command(sub, name: str, *common: str) -> argparse.ArgumentParser:
    """The subcommand `name`, with its help, description and example from COMMANDS and the `common` arguments
    named (COMMON)."""
    help_line, description, epilog = COMMANDS[name]
    p = sub.add_parser(name, help=help_line, description=description, epilog=f"{EXIT_CODES}\n\n{epilog}",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    for c in common:
        flags, kw = COMMON[c]
        p.add_argument(*flags, **kw)
    return p


def _ingest_parser(sub) -> None:
    p = _command(sub, "ingest", "run_dirs", "db", "json", "quiet", "trust_pickle", "follow_links")
    p.add_argument("--all", action="store_true",
                   help="a RUN_DIR holding several runs is split into them (discovery rules: docs/watch.md)")


def _runs_parser(sub) -> None:
    _command(sub, "runs", "db", "json")


def _analyze_parser(sub) -> None:
    p = _command(sub, "analyze", "run_dir", "db", "json", "trust_pickle", "follow_links")
    _add_fleet(p)
    p.add_argument("--markdown", metavar="FILE", type=Path,
                   help="also write the diagnosis as markdown to FILE (`-`: print it instead of the text)")
    p.add_argument("--only", type=kinds_arg, default=[], metavar="KINDS", help="run only these detectors (comma-separated kinds)")
    p.add_argument("--skip", type=kinds_arg, default=[], metavar="KINDS", help="do not run these detectors")
    p.add_argument("--set", dest="settings", type=setting_arg, action="append", default=[], metavar="DETECTOR.FIELD=VALUE",
                   help="override a detector threshold, e.g. plateau.start_points=5, or the spike rule, e.g. spike.z=6 (repeatable)")
    p.add_argument("--fail-on", choices=["critical", "warning", "inconclusive"],
                   help="exit 1 when a finding reaches this severity; an INCONCLUSIVE run ranks with `warning` "
                        "(`warning`: any verdict but healthy; `inconclusive`: the same)")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="print each finding's evidence, every read problem and why each detector could not run")
    p.add_argument("--open", action="store_true", help="then open the report in the app (forensics app)")
    p.add_argument("--no-browser", action="store_true", help="with --open: only print the app's URL")


def _compare_parser(sub) -> None:
    p = _command(sub, "compare", "db", "json", "markdown")
    p.add_argument("run_dir", metavar="RUN", type=Path, help="the run to explain: its folder, or its name or id in the store")
    p.add_argument("others", nargs="*", metavar="OTHER", help="compare with these runs instead of the chosen siblings")


def _rules_parser(sub) -> None:
    _command(sub, "rules", "json")


def _checkpoints_parser(sub) -> None:
    p = _command(sub, "checkpoints", "run_dir", "db", "json", "quiet", "trust_pickle")
    p.add_argument("--top", type=at_least(0), default=5, metavar="N",
                   help="movers shown per pair of checkpoints (default 5; 0 lists only what did not move)")


def _app_parser(sub) -> None:
    p = _command(sub, "app", "db")
    p.add_argument("--port", type=int, metavar="N",
                   help="port on localhost (default 8501, or the next free one when it is taken)")
    p.add_argument("--run", metavar="NAME", help="open this run's report (its name or id)")
    p.add_argument("--no-browser", action="store_true", help="only print the URL; do not open a browser")


def _add_fleet(p: argparse.ArgumentParser) -> None:
    """`analyze --all`'s own arguments."""
    p.add_argument("--all", action="store_true",
                   help="RUN_DIR is a folder of runs: find each run (docs/watch.md) and analyse them all")
    p.add_argument("--jobs", type=JOBS, default=1, metavar="N", help="with --all: N worker processes (default 1)")
    p.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="with --all: run as Ray tasks, on the cluster at ADDRESS or a local Ray without one "
                        "(needs the ray extra)")


def _watch_parser(sub) -> None:
    p = _command(sub, "watch", "roots", "db", "json", "trust_pickle")
    p.add_argument("--interval", type=float, default=30.0, metavar="S", help="seconds between passes (default 30)")
    p.add_argument("--once", action="store_true", help="one pass, then exit (for cron and CI)")
    p.add_argument("--jobs", type=JOBS, default=1, metavar="N",
                   help="analyse changed runs in N worker processes (default 1)")
    p.add_argument("--stall-factor", type=float, default=10.0, metavar="F",
                   help="a run is stalled after F times its usual interval without growth (default 10)")
    p.add_argument("--min-stall", type=float, default=300.0, metavar="S",
                   help="and never before S seconds without growth (default 300)")
    p.add_argument("--no-events", action="store_true",
                   help="poll only; do not use watchdog's file events to wake early")


def _replay_parser(sub) -> None:
    p = _command(sub, "replay", "run_dir", "entry", "device", "threads", "markdown", "db", "json")
    p.add_argument("--step", type=int, metavar="N",
                   help="the step to replay (default: the first non-finite loss, grad norm or checkpoint in the store)")
    p.add_argument("--from-checkpoint", metavar="PATH", help="start from this checkpoint (relative to RUN_DIR)")


def _probe_parser(sub) -> None:
    from forensics.usercode.probe import CHECK_NAMES

    p = _command(sub, "probe", "run_dir", "entry", "device", "threads", "markdown", "db", "json")
    p.description += " Checks: " + ", ".join(CHECK_NAMES) + "."
    p.add_argument("--checks", metavar="A,B", help="run only these checks (default: all)")


PARSERS = [_ingest_parser, _runs_parser, _analyze_parser, _compare_parser, _rules_parser, _checkpoints_parser, _replay_parser,
           _probe_parser, _app_parser, _watch_parser]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="forensics",  # also as `python -m forensics`
        description="Post-hoc forensics for failed deep-learning training runs.",
        epilog="example:\n  forensics ingest sample_runs/runs/nan_lr_too_high && forensics runs",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"forensics {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in PARSERS:
        add(sub)
    return parser
