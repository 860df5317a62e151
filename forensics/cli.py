"""The `forensics` command line: argparse subcommands; `main(argv) -> exit code` is what tests call too.

Exit codes: 0 the command did its job (whatever it found), 1 only with `--fail-on` (findings at or above
that severity), 2 the tool could not do its job (bad arguments, unreadable input). Results go to stdout,
progress and errors to stderr. Only this module catches `ForensicsError`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from forensics import __version__
from forensics.helptext import JOBS
from ingest.errors import ForensicsError


def db_path(explicit: str | os.PathLike | None = None) -> Path:
    """`--db PATH`, else `$FORENSICS_DB`, else the user's cache folder (ingest.store.db_location's rule)."""
    from ingest.store import db_location

    return db_location(explicit, os.environ)


def _command(sub, name: str, func, *common: str) -> argparse.ArgumentParser:
    """The subcommand `name` running `func`, with its help, description and example from forensics/helptext.py
    and the `common` arguments named."""
    from forensics.helptext import COMMANDS, COMMON

    help_line, description, epilog = COMMANDS[name]
    p = sub.add_parser(name, help=help_line, description=description, epilog=epilog,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    for c in common:
        flags, kw = COMMON[c]
        p.add_argument(*flags, **kw)
    p.set_defaults(func=func)
    return p


# -- ingest -------------------------------------------------------------------------------------------------

def _ingest_parser(sub) -> None:
    p = _command(sub, "ingest", cmd_ingest, "run_dirs", "db", "json", "quiet", "trust_pickle", "follow_links")
    p.add_argument("--all", action="store_true",
                   help="a RUN_DIR holding several runs is split into them (discovery rules: docs/watch.md)")


def cmd_ingest(args: argparse.Namespace) -> int:
    """Read every directory it can; report each one it cannot (one line each on stderr) and exit 2 if any
    could not be read, after the others are stored: a script must not take a partial ingest for a whole one."""
    from forensics.folders import ingest_folders
    from forensics.render import ProgressBars, clean, ingest_text

    db = db_path(args.db)
    run_dirs, reports, failed = ingest_folders(
        args.run_dirs, db, split=args.all, trust_pickle=args.trust_pickle, follow_links=args.follow_links,
        progress_for=lambda d: ProgressBars(Path(d).name, enabled=not args.quiet))
    for f in failed:  # each message names its directory
        print(f"forensics: error: {clean(f['error'])}", file=sys.stderr)
    code = 2 if failed else 0
    if args.json:
        print(json.dumps({"db": str(db), "runs": [r.to_json() for r in reports], "failed": failed},
                         indent=2, allow_nan=True))
        return code
    out, err = ingest_text(reports, failed, len(run_dirs), str(db))
    if err:
        print(err, file=sys.stderr)
    print(out)
    return code


# -- runs ---------------------------------------------------------------------------------------------------

def _runs_parser(sub) -> None:
    _command(sub, "runs", cmd_runs, "db", "json")


def cmd_runs(args: argparse.Namespace) -> int:
    from forensics.render import runs_text, short_path
    from ingest.queries import list_runs
    from ingest.store import connect

    db = db_path(args.db)
    with connect(db, write=False) as con:
        out = list_runs(con)
    if args.json:
        print(json.dumps({"db": str(db), "runs": out}, indent=2))
    else:
        print(runs_text(out, str(db), short_path))
    return 0


# -- analyze ------------------------------------------------------------------------------------------------

def _selection(args: argparse.Namespace):
    """`--only`, `--skip` and `--set`, checked and typed (forensics.settings) before any reading."""
    from forensics.settings import selection

    return selection(args.only, args.skip, dict(args.settings))


def _analyze_parser(sub) -> None:
    from forensics.helptext import kinds_arg, setting_arg

    p = _command(sub, "analyze", cmd_analyze, "run_dir", "db", "json", "trust_pickle", "follow_links")
    _add_fleet(p)
    p.add_argument("--markdown", metavar="FILE", type=Path,
                   help="also write the diagnosis as markdown to FILE (`-`: print it instead of the text)")
    p.add_argument("--only", type=kinds_arg, default=[], metavar="KINDS", help="run only these detectors (comma-separated kinds)")
    p.add_argument("--skip", type=kinds_arg, default=[], metavar="KINDS", help="do not run these detectors")
    p.add_argument("--set", dest="settings", type=setting_arg, action="append", default=[], metavar="DETECTOR.FIELD=VALUE",
                   help="override a detector threshold, e.g. loss-spike.z=6 (repeatable)")
    p.add_argument("--fail-on", choices=["critical", "warning", "inconclusive"],
                   help="exit 1 when a finding reaches this severity; `inconclusive`: unless the verdict is healthy")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="print each finding's evidence, every read problem and why each detector could not run")
    p.add_argument("--open", action="store_true", help="then open the report in the app (forensics app)")
    p.add_argument("--no-browser", action="store_true", help="with --open: only print the app's URL")


def cmd_analyze(args: argparse.Namespace) -> int:
    from forensics import report
    from forensics.analysis import analyze
    from forensics.verdict import fails

    if args.all:
        return cmd_analyze_all(args)
    if args.json and str(args.markdown) == "-":
        raise ForensicsError("--json and --markdown - both write to stdout; write the markdown to a file")
    markdown_to = report.markdown_target(args.markdown, args.run_dir)  # checked before any work is done
    result = analyze(args.run_dir, db_path(args.db), selection=_selection(args), trust_pickle=args.trust_pickle,
                     follow_links=args.follow_links)
    if args.json:
        print(json.dumps(result.as_dict(), indent=2))
    elif markdown_to != "-":
        print(report.text(result, verbose=args.verbose))
    if markdown_to == "-":
        print(report.markdown(result))
    elif markdown_to is not None:
        try:
            markdown_to.write_text(report.markdown(result), encoding="utf-8")
        except OSError as exc:
            raise ForensicsError(f"cannot write --markdown {markdown_to}: {exc.strerror or exc}") from None
        print(f"markdown written to {markdown_to}", file=sys.stderr)
    if args.open:
        from app.server import serve_app

        serve_app(db_path(args.db), run=result.run_id, browser=not args.no_browser)
    return 1 if args.fail_on and fails(result, args.fail_on) else 0


# -- rules --------------------------------------------------------------------------------------------------

def _rules_parser(sub) -> None:
    _command(sub, "rules", cmd_rules, "json")


def cmd_rules(args: argparse.Namespace) -> int:
    from forensics import report
    from forensics.detectors import ALL

    detected = {c.kind: c for c in ALL}
    print(json.dumps(report.rules_json(detected), indent=2) if args.json else report.rules_text(detected))
    return 0


# -- checkpoints --------------------------------------------------------------------------------------------

def _checkpoints_parser(sub) -> None:
    from forensics.helptext import at_least

    p = _command(sub, "checkpoints", cmd_checkpoints, "run_dir", "db", "json", "quiet", "trust_pickle")
    p.add_argument("--top", type=at_least(0), default=5, metavar="N",
                   help="movers shown per pair of checkpoints (default 5; 0 lists only what did not move)")


def cmd_checkpoints(args: argparse.Namespace) -> int:
    from forensics.detectors.bad_batch import outlier_samples
    from forensics.render import ProgressBars, checkpoints_text
    from ingest.queries import checkpoint_summary
    from ingest.run import ingest_run
    from ingest.store import connect

    db = db_path(args.db)
    with ProgressBars(args.run_dir.name, enabled=not args.quiet) as bars:
        report = ingest_run(args.run_dir, db, progress=bars, trust_pickle=args.trust_pickle)
    with connect(db, write=False) as con:
        summary = outlier_samples(checkpoint_summary(con, report.run_id, top=args.top))
    if args.json:
        print(json.dumps({"db": str(db), "run": report.run_id, "name": report.name, **summary}, indent=2))
    else:
        print(checkpoints_text(report.name, report.run_id, summary, args.top))
    return 0


# -- app (the Streamlit browser; issue 15) ---------------------------------------------------------------------

def _app_parser(sub) -> None:
    p = _command(sub, "app", cmd_app, "db")
    p.add_argument("--port", type=int, metavar="N",
                   help="port on localhost (default 8501, or the next free one when it is taken)")
    p.add_argument("--run", metavar="NAME", help="open this run's report (its name or id)")
    p.add_argument("--no-browser", action="store_true", help="only print the URL; do not open a browser")


def cmd_app(args: argparse.Namespace) -> int:
    from app.server import serve_app

    return serve_app(db_path(args.db), port=args.port, run=args.run, browser=not args.no_browser)


# -- watch and fleet mode (analyze ROOT --all) ------------------------------------------------------------------

def _add_fleet(p: argparse.ArgumentParser) -> None:
    """`analyze --all`'s own arguments."""
    p.add_argument("--all", action="store_true",
                   help="RUN_DIR is a folder of runs: find each run (docs/watch.md) and analyse them all")
    p.add_argument("--jobs", type=JOBS, default=1, metavar="N", help="with --all: N worker processes (default 1)")
    p.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="with --all: run as Ray tasks, on the cluster at ADDRESS or a local Ray without one "
                        "(needs the ray extra)")


def cmd_analyze_all(args: argparse.Namespace) -> int:
    from forensics.fleet import Options, analyze_root
    from forensics.render import fleet_text
    from forensics.verdict import fails

    if args.markdown is not None:
        raise ForensicsError("--markdown writes one run's diagnosis; with --all use --json")
    if args.follow_links:
        raise ForensicsError("--follow-links reads one run's links; analyse that run by itself to follow them")
    db = db_path(args.db)
    tty = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if tty:
            print(f"\r{done}/{total} runs", end="" if done < total else "\n", file=sys.stderr, flush=True)

    out = analyze_root(args.run_dir, db, Options(_selection(args), args.trust_pickle), jobs=args.jobs, ray=args.ray,
                       progress=progress)
    if args.json:
        print(json.dumps(out.as_dict(), indent=2))
    else:
        print(fleet_text(out, args.verbose))
    if out.failed:
        print(f"forensics: error: {len(out.failed)} of {len(out.found.runs)} runs could not be analysed; the others "
              "were", file=sys.stderr)
        return 2
    return 1 if args.fail_on and any(fails(r.analysis, args.fail_on) for r in out.results) else 0


def _watch_parser(sub) -> None:
    p = _command(sub, "watch", cmd_watch, "roots", "db", "json", "trust_pickle")
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


def cmd_watch(args: argparse.Namespace) -> int:
    from forensics.fleet import Options
    from forensics.render import clean
    from forensics.watch import WatchSettings, serve

    def emit(alert) -> None:
        print(json.dumps(alert.as_dict(), default=str) if args.json else clean(alert.message), flush=True)

    def log(message: str) -> None:
        print(f"forensics watch: {clean(message)}", file=sys.stderr, flush=True)

    settings = WatchSettings(interval=args.interval, jobs=args.jobs, stall_factor=args.stall_factor,
                             min_stall_s=args.min_stall, events=not args.no_events,
                             options=Options(trust_pickle=args.trust_pickle))
    serve(args.roots, db_path(args.db), settings, emit=emit, log=log, once=args.once)
    return 0


# -- replay (issue 14) ---------------------------------------------------------------------------------------

def _replay_parser(sub) -> None:
    p = _command(sub, "replay", cmd_replay, "run_dir", "entry", "device", "markdown", "db", "json")
    p.add_argument("--step", type=int, metavar="N",
                   help="the step to replay (default: the first non-finite loss, grad norm or checkpoint in the store)")
    p.add_argument("--from-checkpoint", metavar="PATH", help="start from this checkpoint (relative to RUN_DIR)")
    p.add_argument("--threads", type=int, metavar="N",
                   help="intra-op CPU threads (default: the CPUs free now, from the load average; reported)")


def cmd_replay(args: argparse.Namespace) -> int:
    from forensics.replay import replay
    from forensics.replay import report as replay_report

    return _run_user_code(args, lambda: replay(args.run_dir, args.step, entry=args.entry,
                                               from_checkpoint=args.from_checkpoint, device=args.device,
                                               threads=args.threads, db=db_path(args.db)),
                          lambda r: r.to_json(), replay_report.text, replay_report.markdown)


def _run_user_code(args: argparse.Namespace, work, as_json, text, markdown) -> int:
    """`replay` and `probe`, which run the run's entry point: --markdown checked first; a missing entry point's
    fill-in template goes to stdout (so `> forensics_entry.py` saves it); the result as JSON or text."""
    from forensics.render import lines
    from forensics.report import markdown_target
    from ingest.errors import EntryPointError

    markdown_target(args.markdown, args.run_dir)  # before any work: never inside the run directory
    try:
        result = work()
    except EntryPointError as exc:
        if exc.template:
            print(exc.template)
        raise
    print(json.dumps(as_json(result), indent=2) if args.json else lines(text(result).split("\n")))
    if args.markdown is not None:
        args.markdown.write_text(markdown(result), encoding="utf-8")
        print(f"markdown written to {args.markdown}", file=sys.stderr)
    return 0


# -- probe (issue 27) ----------------------------------------------------------------------------------------

def _probe_parser(sub) -> None:
    from forensics.probe import CHECKS

    p = _command(sub, "probe", cmd_probe, "run_dir", "entry", "device", "markdown", "db", "json")
    p.description += " Checks: " + ", ".join(CHECKS) + "."
    p.add_argument("--checks", metavar="A,B", help="run only these checks (default: all)")


def cmd_probe(args: argparse.Namespace) -> int:
    from forensics.probe import parse_checks, probe
    from forensics.probe import report as probe_report

    checks = parse_checks(args.checks)
    return _run_user_code(args, lambda: probe(args.run_dir, checks=checks, entry=args.entry, device=args.device,
                                              db=db_path(args.db)),
                          probe_report.as_json, probe_report.text, probe_report.markdown)


# -- main ---------------------------------------------------------------------------------------------------

PARSERS = [_ingest_parser, _runs_parser, _analyze_parser, _rules_parser, _checkpoints_parser, _replay_parser,
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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on bad arguments and 0 on --help
        return int(exc.code or 0)
    try:
        return args.func(args)
    except ForensicsError as exc:
        from forensics.render import clean

        print(f"forensics: error: {clean(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("forensics: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of our output went away (`forensics rules --json | head`): not an error of ours.
        # Point stdout at devnull so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
