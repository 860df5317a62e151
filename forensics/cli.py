"""The `forensics` command line: argparse subcommands; `main(argv) -> exit code` is what tests call too.

Exit codes: 0 the command did its job (whatever it found), 1 only with `--fail-on` (findings at or above
that severity), 2 the tool could not do its job (bad arguments, unreadable input). Results go to stdout,
progress and errors to stderr. Only this module catches `ForensicsError`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from forensics.grammar import build_parser
from forensics.services.process import end_on_sigterm
from ingest.errors import ForensicsError


@dataclass(frozen=True)
class Done:
    """What a command returns when nothing of its work outlives it: its output written, every store connection
    closed (each `connect` closes at the end of its block), no thread, worker process, server or user code of its
    left running. `main` then ends the process without the interpreter's teardown (`services.process.leave_now`). A command that
    may leave something behind (`--all`'s workers, `--open`'s server, `watch`, `app`, replay's torch) returns its
    exit code as a plain int."""

    code: int


def db_path(explicit: str | os.PathLike | None = None) -> Path:
    """`--db PATH`, else `$FORENSICS_DB`, else the user's cache folder (ingest.store.db_location's rule). The
    cache folder is made here when missing; a folder the user named must exist (the store says so)."""
    from ingest.store import db_location

    db = db_location(explicit, os.environ)
    if not explicit and not os.environ.get("FORENSICS_DB"):
        try:
            db.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ForensicsError(f"cannot make the cache folder {db.parent} for the database: "
                                 f"{exc.strerror or exc}; pass --db") from None
    return db


def implied_db() -> Path:
    """The store a command finds with no --db (printed commands omit --db for it): located, not made."""
    from ingest.store import db_location

    return db_location(None, os.environ)


# -- ingest -------------------------------------------------------------------------------------------------


def cmd_ingest(args: argparse.Namespace) -> Done:
    """Read every directory it can; report each one it cannot (one line each on stderr) and exit 2 if any
    could not be read, after the others are stored: a script must not take a partial ingest for a whole one."""
    from forensics.services.folders import ingest_folders
    from forensics.text.render import ProgressBars, clean, ingest_text

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
        return Done(code)
    out, err = ingest_text(reports, failed, len(run_dirs), str(db))
    if err:
        print(err, file=sys.stderr)
    print(out)
    return Done(code)


# -- runs ---------------------------------------------------------------------------------------------------


def cmd_runs(args: argparse.Namespace) -> Done:
    from forensics.text.render import runs_text, short_path
    from ingest.queries import list_runs
    from ingest.store import connect

    db = db_path(args.db)
    with connect(db, write=False) as con:
        out = list_runs(con)
    print(json.dumps({"db": str(db), "runs": out}, indent=2) if args.json else runs_text(out, str(db), short_path))
    return Done(0)


def cmd_compare(args: argparse.Namespace) -> int:
    from forensics.services.compare import compare_at
    from forensics.text import compare as words

    return _run_user_code(args, lambda: compare_at(db_path(args.db), args.run_dir, args.others),
                          lambda r: r.as_dict(), words.text, words.markdown)


# -- analyze ------------------------------------------------------------------------------------------------

def _selection(args: argparse.Namespace):
    """`--only`, `--skip` and `--set`, checked and typed (forensics.judge.settings) before any reading."""
    from forensics.judge.settings import selection

    return selection(args.only, args.skip, dict(args.settings))


def cmd_analyze(args: argparse.Namespace) -> Done | int:
    from forensics.text import report
    from forensics.services.analysis import analyze
    from forensics.judge.verdict import fails

    if args.all:
        return cmd_analyze_all(args)
    if args.json and str(args.markdown) == "-":
        raise ForensicsError("--json and --markdown - both write to stdout; write the markdown to a file")
    markdown_to = report.markdown_target(args.markdown, args.run_dir)  # checked before any work is done
    result = analyze(args.run_dir, db_path(args.db), selection=_selection(args), trust_pickle=args.trust_pickle,
                     follow_links=args.follow_links, implied_db=implied_db())
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
    code = 1 if args.fail_on and fails(result, args.fail_on) else 0
    if not args.open:
        return Done(code)
    from app.server import serve_app

    serve_app(db_path(args.db), run=result.run_id, browser=not args.no_browser)
    return code


# -- rules --------------------------------------------------------------------------------------------------


def cmd_rules(args: argparse.Namespace) -> Done:
    from forensics.text import report
    from forensics.judge.detectors import ALL

    detected = {c.kind: c for c in ALL}
    print(json.dumps(report.rules_json(detected), indent=2) if args.json else report.rules_text(detected))
    return Done(0)


# -- checkpoints --------------------------------------------------------------------------------------------


def cmd_checkpoints(args: argparse.Namespace) -> Done:
    from forensics.judge.detectors.bad_batch import outlier_samples
    from forensics.text.render import ProgressBars, checkpoints_text
    from ingest.queries import checkpoint_summary
    from ingest.run import ingest_run
    from ingest.store import connect

    db = db_path(args.db)
    with ProgressBars(args.run_dir.name, enabled=not args.quiet) as bars:
        report = ingest_run(args.run_dir, db, progress=bars, trust_pickle=args.trust_pickle)
    with connect(db, write=False) as con:
        summary = outlier_samples(checkpoint_summary(con, report.run_id, top=args.top))
    print(json.dumps({"db": str(db), "run": report.run_id, "name": report.name, **summary}, indent=2) if args.json
          else checkpoints_text(report.name, report.run_id, summary, args.top))
    return Done(0)


# -- app (the Streamlit browser) ---------------------------------------------------------------------


def cmd_app(args: argparse.Namespace) -> int:
    from app.server import serve_app

    return serve_app(db_path(args.db), port=args.port, run=args.run, browser=not args.no_browser)


# -- watch and fleet mode (analyze ROOT --all) ------------------------------------------------------------------


def cmd_analyze_all(args: argparse.Namespace) -> int:
    from forensics.services.fleet import Options, analyze_root
    from forensics.text.render import fleet_text
    from forensics.judge.verdict import fails

    if args.markdown is not None:
        raise ForensicsError("--markdown writes one run's diagnosis; with --all use --json")
    if args.follow_links:
        raise ForensicsError("--follow-links reads one run's links; analyse that run by itself to follow them")
    db = db_path(args.db)
    tty = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if tty:
            print(f"\r{done}/{total} runs", end="" if done < total else "\n", file=sys.stderr, flush=True)

    def unlisted(path: str, err: str) -> None:  # as watch says them: runs below these folders were not looked for
        print(f"forensics: cannot list {path} ({err}); runs inside it, if any, are not analysed", file=sys.stderr)

    out = analyze_root(args.run_dir, db, Options(_selection(args), args.trust_pickle, implied_db()), jobs=args.jobs, ray=args.ray,
                       progress=progress, unlisted=unlisted)
    if args.json:
        print(json.dumps(out.as_dict(), indent=2))
    else:
        print(fleet_text(out, args.verbose))
    if out.failed:
        print(f"forensics: error: {len(out.failed)} of {len(out.found.runs)} runs could not be analysed; the others "
              "were", file=sys.stderr)
        return 2
    return 1 if args.fail_on and any(fails(r.analysis, args.fail_on) for r in out.results) else 0


def cmd_watch(args: argparse.Namespace) -> int:
    from forensics.services.fleet import Options
    from forensics.text.render import clean
    from forensics.services.watch import WatchSettings, serve

    def emit(alert) -> None:
        print(json.dumps(alert.as_dict(), default=str) if args.json else clean(alert.message), flush=True)

    def log(message: str) -> None:
        print(f"forensics watch: {clean(message)}", file=sys.stderr, flush=True)

    settings = WatchSettings(interval=args.interval, jobs=args.jobs, stall_factor=args.stall_factor,
                             min_stall_s=args.min_stall, events=not args.no_events,
                             options=Options(trust_pickle=args.trust_pickle, implied_db=implied_db()))
    serve(args.roots, db_path(args.db), settings, emit=emit, log=log, once=args.once)
    return 0


# -- replay ---------------------------------------------------------------------------------------


def cmd_replay(args: argparse.Namespace) -> int:
    from forensics.usercode.replay import replay
    from forensics.usercode.replay import report as replay_report

    return _run_user_code(args, lambda: replay(args.run_dir, args.step, entry=args.entry,
                                               from_checkpoint=args.from_checkpoint, device=args.device,
                                               threads=args.threads, db=db_path(args.db)),
                          lambda r: r.to_json(), replay_report.text, replay_report.markdown)


def _run_user_code(args: argparse.Namespace, work, as_json, text, markdown) -> int:
    """`replay` and `probe`, which run the run's entry point, and `compare`: --markdown checked first; a missing
    entry point's fill-in template goes to stdout (so `> forensics_entry.py` saves it); the result as JSON or text."""
    from forensics.text.render import lines
    from forensics.text.report import markdown_target
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


# -- probe ----------------------------------------------------------------------------------------


def cmd_probe(args: argparse.Namespace) -> int:
    from forensics.usercode.probe import parse_checks, probe
    from forensics.usercode.probe import report as probe_report

    checks = parse_checks(args.checks)
    return _run_user_code(args, lambda: probe(args.run_dir, checks=checks, entry=args.entry, device=args.device,
                                              threads=args.threads, db=db_path(args.db)),
                          probe_report.as_json, probe_report.text, probe_report.markdown)


# -- main ---------------------------------------------------------------------------------------------------


class _StderrLines(logging.Handler):
    """The store's notices (waiting for the database or a run's ingest lock) as `forensics: ...` on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"forensics: {record.getMessage()}", file=sys.stderr, flush=True)


def _say_notices() -> None:
    logger = logging.getLogger("ingest")
    if not any(isinstance(h, _StderrLines) for h in logger.handlers):
        logger.addHandler(_StderrLines())
        logger.setLevel(logging.INFO)
        logger.propagate = False


@dataclass(frozen=True)
class Command:
    """One subcommand: what it does (its arguments and help are forensics/grammar.py's), and whether it judges
    runs in this process, where long series' arrays come and go (`return_freed_arrays`; not for replay and probe,
    whose user model allocates as it would in training)."""

    run: Callable[[argparse.Namespace], Done | int]
    judges: bool = False


COMMANDS = {"ingest": Command(cmd_ingest), "runs": Command(cmd_runs), "analyze": Command(cmd_analyze, judges=True),
            "compare": Command(cmd_compare), "rules": Command(cmd_rules), "checkpoints": Command(cmd_checkpoints),
            "replay": Command(cmd_replay), "probe": Command(cmd_probe), "app": Command(cmd_app),
            "watch": Command(cmd_watch, judges=True)}


def main(argv: list[str] | None = None) -> int:
    """Run one command. Called with no arguments, this process is the command (tests call main with theirs, in
    their own process), so main also sets the process's policy: the collector's threshold, freed arrays returned
    at once for a command that judges runs, an end without teardown (at once for `Done`, else after the exit
    handlers), and SIGTERM as one line and 143 until the end (services/process.py)."""
    import signal

    own_process = argv is None
    if own_process:
        from forensics.services.process import own_process_policy

        own_process_policy(os.environ)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on bad arguments and 0 on --help
        return int(exc.code or 0)
    command = COMMANDS[args.command]
    if own_process and command.judges:
        from forensics.services.process import return_freed_arrays

        return_freed_arrays()
    _say_notices()
    from forensics.services.process import catch_sigterm, say_terminated, sigterm_seen

    try:
        previous = catch_sigterm()
    except ValueError:  # not the main thread: leave signals to whoever owns it
        previous = None
    from forensics.services.process import OUTPUT_LOST, GuardedOutput, OutputLost

    stdout, closed = sys.stdout, sys.stdout is None  # `forensics analyze RUN >&-`: no standard output at all
    sys.stdout = GuardedOutput(open(os.devnull, "w") if closed else stdout)
    try:
        out = command.run(args)
        if closed:
            raise OutputLost("standard output is closed")
        sys.stdout.flush()
    except OutputLost as exc:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # the interpreter's last flush must not fail again
        print(f"forensics: could not write the output ({exc}); what the command stored is kept", file=sys.stderr)
        return OUTPUT_LOST
    except ForensicsError as exc:
        from forensics.text.render import clean

        if sigterm_seen():  # a write the termination cut short
            return say_terminated()
        print(f"forensics: error: {clean(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if sigterm_seen():
            return say_terminated()
        print("forensics: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of our output went away (`forensics rules --json | head`): not an error of ours.
        # Point stdout at devnull so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    finally:
        sys.stdout = stdout
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    if isinstance(out, Done):
        if own_process:
            from forensics.services.process import leave_now

            leave_now(out.code)
        return out.code
    if own_process and previous is not None:
        end_on_sigterm(out)  # the exit handlers come, then the end (imported first: services/process.py)
    return out


if __name__ == "__main__":
    sys.exit(main())
