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
from ingest.errors import ForensicsError

EPILOG_DB = "The database is --db PATH, else $FORENSICS_DB, else ~/.cache/run-forensics/forensics.duckdb."


def db_path(explicit: str | os.PathLike | None = None) -> Path:
    """`--db PATH`, else `$FORENSICS_DB`, else the user's cache folder (ingest.store.db_location's rule)."""
    from ingest.store import db_location

    return db_location(explicit, os.environ)


def _add_db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", metavar="PATH", help="DuckDB file to use (default: $FORENSICS_DB or the user cache)")


def _add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object for scripts instead of text")


# -- ingest -------------------------------------------------------------------------------------------------

def _ingest_parser(sub) -> None:
    p = sub.add_parser(
        "ingest",
        help="read run directories into the database",
        description=(
            "Read everything each run directory holds (TensorBoard event files, W&B runs, HF trainer_state.json, "
            "Lightning metrics.csv, MLflow, CSV/JSONL/Parquet metric logs, console logs, configs) into the "
            "database. Re-ingesting reads only what is new. Damaged files keep their good records; what was "
            "skipped is listed. The run directory is never written to. A folder that holds several runs "
            "(TensorBoard run folders, wandb/run-*, lightning_logs/version_*, ...) is not read as one: name the "
            "runs, or pass --all. Every directory that can be read is; each one that cannot is named on stderr, "
            "and then the exit code is 2."
        ),
        epilog=f"{EPILOG_DB}\n\nexample:\n  forensics ingest sample_runs/runs/nan_lr_too_high --db /tmp/f.duckdb",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", type=Path, help="a training run's folder")
    _add_db(p)
    _add_json(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--all", action="store_true",
                   help="a RUN_DIR holding several runs is split into them (discovery rules: docs/watch.md)")
    _add_trust_pickle(p)
    _add_follow_links(p)
    p.set_defaults(func=cmd_ingest)


def _add_trust_pickle(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trust-pickle", action="store_true",
        help="read checkpoints that need full unpickling (this runs code from the file: only for files you trust)",
    )


def _add_follow_links(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--follow-links", action="store_true",
        help="read file links that lead out of the run directory (by default they are listed, not read)",
    )


def cmd_ingest(args: argparse.Namespace) -> int:
    """Read every directory it can; report each one it cannot (one line each on stderr) and exit 2 if any
    could not be read, after the others are stored: a script must not take a partial ingest for a whole one."""
    from forensics.folders import refuse_folder_of_runs
    from forensics.render import ProgressBars, clean, ingest_text
    from ingest.discovery import discover_runs
    from ingest.run import ingest_run

    db = db_path(args.db)
    run_dirs: list[Path] = []
    for d in args.run_dirs:
        found = discover_runs(d) if args.all and d.is_dir() else []
        run_dirs.extend([r.path for r in found] or [d])
    reports, failed = [], []
    for run_dir in run_dirs:
        bars = ProgressBars(Path(run_dir).name, enabled=not args.quiet)
        try:
            if not args.all:
                refuse_folder_of_runs(run_dir, "ingest")
            reports.append(ingest_run(run_dir, db, progress=bars, trust_pickle=args.trust_pickle,
                                      follow_links=args.follow_links))
        except ForensicsError as exc:
            failed.append({"path": str(run_dir), "error": str(exc)})
            print(f"forensics: error: {clean(exc)}", file=sys.stderr)  # each message names its directory
        finally:
            bars.close()
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
    p = sub.add_parser(
        "runs",
        help="list ingested runs with their sources and point counts",
        description="List every run in the database: its sources (format, points, status) and what was skipped.",
        epilog=f"{EPILOG_DB}\n\nexample:\n  forensics runs --db /tmp/f.duckdb --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_db(p)
    _add_json(p)
    p.set_defaults(func=cmd_runs)


def cmd_runs(args: argparse.Namespace) -> int:
    from forensics.render import runs_text, short_path
    from ingest.queries import list_runs, watched_runs
    from ingest.store import connect

    db = db_path(args.db)
    with connect(db, write=False) as con:
        out = list_runs(con)
        found = {w["run_id"]: {"kind": w["kind"], "reason": w["reason"], "state": w["state"],
                               "watch_root": w["watch_root"]} for w in watched_runs(con)}
    for r in out:
        r["found_by_watch"] = found.get(r["run"])
    if args.json:
        print(json.dumps({"db": str(db), "runs": out}, indent=2))
    else:
        print(runs_text(out, str(db), short_path))
    return 0


# -- analyze ------------------------------------------------------------------------------------------------

def _kinds(text: str) -> list[str]:
    return [k.strip() for k in text.split(",") if k.strip()]


def _setting(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or "." not in key:
        raise argparse.ArgumentTypeError(f"expected DETECTOR.FIELD=VALUE, got {text!r} (e.g. loss-spike.z=6)")
    return key.strip(), value.strip()


def _analyze_parser(sub) -> None:
    p = sub.add_parser(
        "analyze",
        help="diagnose a run: ingest what is new, run every detector, print a ranked diagnosis",
        description=(
            "Ingest RUN_DIR if needed, run every detector of the pathology catalog, store findings, spikes and "
            "skipped checks in the database, and print the diagnosis: the verdict (failed, suspicious, "
            "inconclusive or healthy) with its reason, the files read with problems, the earliest cause, then one "
            "finding per line `run:step kind: summary`. A run is healthy only when it was read and checked: no "
            "training loss, a missing reader, a loss too short to judge or a file read with problems make it "
            "inconclusive. Exit code 0 whatever it found; --fail-on makes findings of that severity or worse "
            "(or, with `inconclusive`, any verdict but healthy) exit 1."
        ),
        epilog=(f"{EPILOG_DB}\nThresholds: `forensics rules` lists every detector's fields.\n\nexample:\n"
                "  forensics analyze sample_runs/runs/nan_lr_too_high --db /tmp/f.duckdb --set loss-spike.z=6"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run_dir", metavar="RUN_DIR", type=Path, help="a training run's folder")
    _add_db(p)
    _add_json(p)
    _add_fleet(p)
    p.add_argument("--markdown", metavar="FILE", type=Path,
                   help="also write the diagnosis as markdown to FILE (`-`: print it instead of the text)")
    p.add_argument("--only", type=_kinds, default=[], metavar="KINDS", help="run only these detectors (comma-separated kinds)")
    p.add_argument("--skip", type=_kinds, default=[], metavar="KINDS", help="do not run these detectors")
    p.add_argument("--set", dest="settings", type=_setting, action="append", default=[], metavar="DETECTOR.FIELD=VALUE",
                   help="override a detector threshold, e.g. loss-spike.z=6 (repeatable)")
    p.add_argument("--fail-on", choices=["critical", "warning", "inconclusive"],
                   help="exit 1 when a finding reaches this severity; `inconclusive`: unless the verdict is healthy")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="print each finding's evidence, every read problem and why each detector could not run")
    p.add_argument("--open", action="store_true", help="then open the report in the app (forensics app)")
    p.add_argument("--no-browser", action="store_true", help="with --open: only print the app's URL")
    _add_trust_pickle(p)
    _add_follow_links(p)
    p.set_defaults(func=cmd_analyze)


def cmd_analyze(args: argparse.Namespace) -> int:
    from forensics import report
    from forensics.analysis import analyze
    from forensics.verdict import fails

    if args.all:
        return cmd_analyze_all(args)
    markdown_to = _markdown_target(args)
    result = analyze(args.run_dir, db_path(args.db), only=args.only, skip=args.skip, settings=dict(args.settings),
                     trust_pickle=args.trust_pickle, follow_links=args.follow_links)
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


def _markdown_target(args: argparse.Namespace) -> Path | str | None:
    """Where --markdown goes: None, "-" (stdout), or a path checked before any work is done."""
    target = args.markdown
    if target is None:
        return None
    if str(target) == "-":
        if args.json:
            raise ForensicsError("--json and --markdown - both write to stdout; write the markdown to a file")
        return "-"
    if target.resolve().is_relative_to(args.run_dir.resolve()):
        raise ForensicsError(f"--markdown {target} is inside the run directory, which is never written to")
    parent = target.resolve().parent
    if target.is_dir():
        raise ForensicsError(f"--markdown {target} is a directory; name a file, e.g. {target / 'diagnosis.md'}")
    if not parent.is_dir():
        raise ForensicsError(f"--markdown {target}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise ForensicsError(f"--markdown {target}: not writable")
    return target


# -- rules --------------------------------------------------------------------------------------------------

def _rules_parser(sub) -> None:
    p = sub.add_parser(
        "rules",
        help="list every catalog pathology, whether it is detected yet, and each detector's thresholds",
        description="Every kind of the pathology catalog with its one-line summary; detected kinds show the "
                    "fields `forensics analyze --set` accepts, the others say why they are not detected yet.",
        epilog="example:\n  forensics rules --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_json(p)
    p.set_defaults(func=cmd_rules)


def cmd_rules(args: argparse.Namespace) -> int:
    import dataclasses

    from forensics import catalog, report
    from forensics.detectors import ALL

    detected = {c.kind: c for c in ALL}
    if args.json:
        print(json.dumps({"rules": [
            {"kind": e.kind, "summary": e.summary, "detected": e.kind in detected,
             "not_yet_reason": catalog.NOT_YET_DETECTED.get(e.kind),
             "fields": {f.name: f.default for f in dataclasses.fields(detected[e.kind])} if e.kind in detected else {},
             "causes": list(e.causes), "checks": list(e.checks)} for e in catalog.ENTRIES]}, indent=2))
    else:
        print(report.rules_text(detected))
    return 0


# -- checkpoints --------------------------------------------------------------------------------------------

def _checkpoints_parser(sub) -> None:
    p = sub.add_parser(
        "checkpoints",
        help="list a run's checkpoints, whether they are finite, and what moved between them",
        description=(
            "Ingest RUN_DIR (only what is new), then list its checkpoints by step with format, size, whether "
            "every model tensor is finite and the read status; for each consecutive pair, the tensors that moved "
            "most relative to their size (‖Δw‖/‖w‖) and those that did not move at all; and the saved batches "
            "with the samples holding NaN/Inf or outliers. Torch files are read with weights_only=True: a file "
            "that needs full unpickling is listed as needs_pickle unless --trust-pickle is given."
        ),
        epilog=f"{EPILOG_DB}\n\nexample:\n  forensics checkpoints sample_runs/runs/nan_lr_too_high --top 3 --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run_dir", metavar="RUN_DIR", type=Path, help="a training run's folder")
    p.add_argument("--top", type=_count_arg, default=5, metavar="N",
                   help="movers shown per pair of checkpoints (default 5; 0 lists only what did not move)")
    _add_db(p)
    _add_json(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_trust_pickle(p)
    p.set_defaults(func=cmd_checkpoints)


def cmd_checkpoints(args: argparse.Namespace) -> int:
    from forensics.detectors.bad_batch import outlier_samples
    from forensics.render import ProgressBars, checkpoints_text
    from ingest.queries import checkpoint_summary
    from ingest.run import ingest_run
    from ingest.store import connect

    db = db_path(args.db)
    bars = ProgressBars(args.run_dir.name, enabled=not args.quiet)
    try:
        report = ingest_run(args.run_dir, db, progress=bars, trust_pickle=args.trust_pickle)
    finally:
        bars.close()
    with connect(db, write=False) as con:
        summary = outlier_samples(checkpoint_summary(con, report.run_id, top=args.top))
    if args.json:
        print(json.dumps({"db": str(db), "run": report.run_id, "name": report.name, **summary}, indent=2))
    else:
        print(checkpoints_text(report.name, report.run_id, summary, args.top))
    return 0


def _count_arg(text: str) -> int:
    n = int(text)
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {n}")
    return n


# -- app (the Streamlit browser; issue 15) ---------------------------------------------------------------------

def _app_parser(sub) -> None:
    p = sub.add_parser(
        "app",
        help="browse runs, findings, curves, checkpoints and replays in the browser",
        description=(
            "Start the Streamlit app on localhost and print its URL. It reads the database read-only and "
            "briefly, so it stays open while `forensics ingest` or `analyze` write to it (reload to see new "
            "results). Pages: Runs, Run report, Layers, Checkpoints and replays, Compare. Needs the app extra: "
            "pip install -e \".[app]\"."
        ),
        epilog=f"{EPILOG_DB}\n\nexample:\n  forensics app --db /tmp/f.duckdb --run nan_lr_too_high --port 8502",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_db(p)
    p.add_argument("--port", type=int, metavar="N",
                   help="port on localhost (default 8501, or the next free one when it is taken)")
    p.add_argument("--run", metavar="NAME", help="open this run's report (its name or id)")
    p.add_argument("--no-browser", action="store_true", help="only print the URL; do not open a browser")
    p.set_defaults(func=cmd_app)


def cmd_app(args: argparse.Namespace) -> int:
    from app.server import serve_app

    return serve_app(db_path(args.db), port=args.port, run=args.run, browser=not args.no_browser)


# -- watch and fleet mode (analyze ROOT --all) ------------------------------------------------------------------

def _jobs(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"--jobs takes a number of processes, 1 or more (got {n})")
    return n


def _add_fleet(p: argparse.ArgumentParser) -> None:
    p.add_argument("--all", action="store_true",
                   help="RUN_DIR is a folder of runs: find each run (docs/watch.md) and analyse them all")
    p.add_argument("--jobs", type=_jobs, default=1, metavar="N", help="with --all: N worker processes (default 1)")
    p.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="with --all: run as Ray tasks, on the cluster at ADDRESS or a local Ray without one "
                        "(needs the ray extra)")


def cmd_analyze_all(args: argparse.Namespace) -> int:
    import time

    from forensics.fleet import Options, analyze_runs
    from forensics.render import fleet_text, lines
    from forensics.verdict import fails
    from ingest.discovery import discover
    from ingest.queries import latest_verdicts
    from ingest.store import connect

    if args.markdown is not None:
        raise ForensicsError("--markdown writes one run's diagnosis; with --all use --json")
    if args.follow_links:
        raise ForensicsError("--follow-links reads one run's links; analyse that run by itself to follow them")
    root = args.run_dir
    if not root.is_dir():
        raise ForensicsError(f"{root} is not a folder; --all takes a folder of runs")
    found = discover(root)
    if not found.runs:
        raise ForensicsError(f"no runs found under {root} ({found.dirs_scanned} folders looked at); "
                             f"docs/watch.md lists the layouts recognised")
    db = db_path(args.db)
    options = Options(args.only, args.skip, dict(args.settings), args.trust_pickle)
    started = time.monotonic()
    tty = sys.stderr.isatty()
    count = [0]

    def progress(r) -> None:
        count[0] += 1
        if tty:
            print(f"\r{count[0]}/{len(found.runs)} runs", end="", file=sys.stderr, flush=True)

    results = analyze_runs([str(r.path) for r in found.runs], db, options, jobs=args.jobs,
                           use_ray=args.ray is not None, ray_address=args.ray or None, on_result=progress)
    if tty:
        print(file=sys.stderr)
    seconds = time.monotonic() - started
    by_path = {r.path: r for r in results}
    failed = [r for r in results if r.error is not None]
    with connect(db, write=False) as con:  # each run's verdict and headline as the engine stored them
        stored = latest_verdicts(con, [r.run_id for r in results if r.error is None and r.run_id])
    if args.json:
        print(json.dumps({"db": str(db), "root": str(found.root), "jobs": args.jobs, "ray": args.ray is not None,
                          "seconds": round(seconds, 2), "failed": len(failed), "runs": [
                              {"path": str(d.path), "kind": d.kind, "reason": d.reason,
                               **by_path[str(d.path)].as_dict()} for d in found.runs]}, indent=2))
    else:
        rows = [(d.path.relative_to(found.root) if d.path != found.root else Path(d.path.name), by_path[str(d.path)],
                 stored.get(by_path[str(d.path)].run_id)) for d in found.runs]
        workers = f"{args.jobs} {'Ray' if args.ray is not None else 'process'}" + (
            "es" if args.jobs > 1 and args.ray is None else "")
        print(lines([*fleet_text(rows, args.verbose),
                     f"{len(results) - len(failed)} of {len(found.runs)} runs analysed in {seconds:.1f}s "
                     f"({workers}); database: {db}"]))
    if failed:
        print(f"forensics: error: {len(failed)} of {len(found.runs)} runs could not be analysed; the others were",
              file=sys.stderr)
        return 2
    return 1 if args.fail_on and any(fails(r.analysis, args.fail_on) for r in results) else 0


def _watch_parser(sub) -> None:
    p = sub.add_parser(
        "watch",
        help="watch folders of runs: diagnose every new or growing run and alert on what changed",
        description=(
            "Find every run under each ROOT (the layouts W&B, TensorBoard, Lightning, HF Trainer, MLflow and "
            "console scripts leave: docs/watch.md), then poll: a run whose files changed is ingested (only "
            "what is new) and analysed again. An alert is one line on stdout (a JSON line with --json) and a "
            "row in the database's alerts table: a finding the run did not have or a worse severity, a run "
            "that stopped growing for longer than its usual interval times --stall-factor, a file whose tail "
            "ends inside a record and has not grown by the next pass, a run that cannot be read or was "
            "deleted. Service messages go to stderr. SIGINT/SIGTERM finish the current write and exit 0."
        ),
        epilog=(f"{EPILOG_DB}\nThe write lock is held only per transaction: `forensics app` can read meanwhile."
                "\n\nexample:\n  forensics watch sample_runs/runs --db /tmp/f.duckdb --once --json"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("roots", nargs="+", metavar="ROOT", type=Path, help="a folder holding runs (or one run)")
    _add_db(p)
    _add_json(p)
    p.add_argument("--interval", type=float, default=30.0, metavar="S", help="seconds between passes (default 30)")
    p.add_argument("--once", action="store_true", help="one pass, then exit (for cron and CI)")
    p.add_argument("--jobs", type=_jobs, default=1, metavar="N",
                   help="analyse changed runs in N worker processes (default 1)")
    p.add_argument("--stall-factor", type=float, default=10.0, metavar="F",
                   help="a run is stalled after F times its usual interval without growth (default 10)")
    p.add_argument("--min-stall", type=float, default=300.0, metavar="S",
                   help="and never before S seconds without growth (default 300)")
    p.add_argument("--no-events", action="store_true",
                   help="poll only; do not use watchdog's file events to wake early")
    _add_trust_pickle(p)
    p.set_defaults(func=cmd_watch)


def cmd_watch(args: argparse.Namespace) -> int:
    import signal

    from forensics.fleet import Options
    from forensics.render import clean
    from forensics.watch import Watcher, WatchSettings

    missing = [str(r) for r in args.roots if not r.is_dir()]
    if missing:
        raise ForensicsError(f"not a folder: {', '.join(missing)}; watch takes folders holding runs")
    if args.interval <= 0:
        raise ForensicsError(f"--interval must be positive (got {args.interval:g})")
    db = db_path(args.db)

    def emit(alert) -> None:
        print(json.dumps(alert.as_dict(), default=str) if args.json else clean(alert.message), flush=True)

    def log(message: str) -> None:
        print(f"forensics watch: {clean(message)}", file=sys.stderr, flush=True)

    settings = WatchSettings(interval=args.interval, jobs=args.jobs, stall_factor=args.stall_factor,
                             min_stall_s=args.min_stall, events=not args.no_events, options=Options(trust_pickle=args.trust_pickle))
    watcher = Watcher(args.roots, db, settings, emit=emit, log=log)

    def stop(signum, frame) -> None:
        log(f"{signal.Signals(signum).name}: finishing the current write, then exiting")
        watcher.stop.set()

    old = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        if args.once:
            r = watcher.poll_once()
            log(f"{r.runs} runs, {r.changed} changed, {r.analysed} analysed, {r.failed} failed, "
                f"{len(r.alerts)} alerts in {r.seconds:.1f}s; database: {db}")
        else:
            log(f"watching {', '.join(str(r) for r in watcher.roots)} every {args.interval:g}s; database: {db}")
            watcher.run_forever()
            log("stopped")
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    return 0


# -- replay (issue 14) ---------------------------------------------------------------------------------------

def _replay_parser(sub) -> None:
    p = sub.add_parser(
        "replay",
        help="re-execute the bad step from the last finite checkpoint: first non-finite op, samples, fixes",
        description=(
            "Re-execute RUN_DIR's step N from the last finite checkpoint before it, through the saved batches, "
            "with the run's entry point (forensics_entry.py at the run root, docs/replay.md). RUNNING THIS RUNS "
            "THE USER'S CODE in that file: the command is the opt-in. Fidelity first (replayed vs logged losses and "
            "gradient norms), then a second re-run of the failing step (transient or deterministic); only a faithful, "
            "reproduced failure is diagnosed: phase, op, module, file:line, culprit samples and four "
            "counterfactuals (fp32, clip_1.0, lr_div_10, drop_culprits). The result is stored in the database. "
            "The run directory is never written to."
        ),
        epilog=(f"{EPILOG_DB}\n\nexample:\n"
                "  forensics replay sample_runs/runs/nan_bad_sample --step 229 --db /tmp/f.duckdb"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run_dir", metavar="RUN_DIR", type=Path, help="a training run's folder")
    p.add_argument("--step", type=int, metavar="N",
                   help="the step to replay (default: the first non-finite loss, grad norm or checkpoint in the store)")
    p.add_argument("--entry", metavar="FILE.py", type=Path, help="entry point (default: RUN_DIR/forensics_entry.py)")
    p.add_argument("--from-checkpoint", metavar="PATH", help="start from this checkpoint (relative to RUN_DIR)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto", help="default auto: CUDA when present")
    p.add_argument("--threads", type=int, metavar="N",
                   help="intra-op CPU threads (default: the CPUs free now, from the load average; reported)")
    p.add_argument("--markdown", metavar="FILE", type=Path, help="also write the report as markdown to FILE")
    _add_db(p)
    _add_json(p)
    p.set_defaults(func=cmd_replay)


def cmd_replay(args: argparse.Namespace) -> int:
    from ingest.errors import EntryPointError

    if args.markdown is not None and args.markdown.resolve().is_relative_to(args.run_dir.resolve()):
        raise ForensicsError(f"--markdown {args.markdown} is inside the run directory, which is never written to")
    from forensics.render import lines
    from forensics.replay import replay
    from forensics.replay import report as replay_report

    try:
        result = replay(args.run_dir, args.step, entry=args.entry, from_checkpoint=args.from_checkpoint,
                        device=args.device, threads=args.threads, db=db_path(args.db))
    except EntryPointError as exc:
        if exc.template:  # the fill-in file goes to stdout, so `> forensics_entry.py` saves it
            print(exc.template)
        raise
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(lines(replay_report.text(result).split("\n")))
    if args.markdown is not None:
        args.markdown.write_text(replay_report.markdown(result), encoding="utf-8")
        print(f"markdown written to {args.markdown}", file=sys.stderr)
    return 0


# -- probe (issue 27) ----------------------------------------------------------------------------------------

def _probe_parser(sub) -> None:
    from forensics.probe import CHECKS

    p = sub.add_parser(
        "probe",
        help="ask the run's own model the debugging guides' first questions: overfit one batch, LR range, ...",
        description=(
            "Run the debugging guides' first checks on RUN_DIR's own model, checkpoints and saved batches, through "
            "its entry point (forensics_entry.py, DECISIONS.md §10). RUNNING THIS RUNS THE USER'S CODE in that file: "
            "the command is the opt-in. Checks: " + ", ".join(CHECKS) + ". Each says pass, fail or n/a (with why), "
            "the numbers, the modules or parameters it names and the findings it explains (docs/probe.md). The "
            "result is stored in the database; the run directory is never written to."),
        epilog=(f"{EPILOG_DB}\n\nexample:\n"
                "  forensics probe runs/exp1 --checks overfit_one_batch,lr_range --db /tmp/f.duckdb"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run_dir", metavar="RUN_DIR", type=Path, help="a training run's folder")
    p.add_argument("--checks", metavar="A,B", help="run only these checks (default: all)")
    p.add_argument("--entry", metavar="FILE.py", type=Path, help="entry point (default: RUN_DIR/forensics_entry.py)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto", help="default auto: CUDA when present")
    p.add_argument("--markdown", metavar="FILE", type=Path, help="also write the report as markdown to FILE")
    _add_db(p)
    _add_json(p)
    p.set_defaults(func=cmd_probe)


def cmd_probe(args: argparse.Namespace) -> int:
    from forensics.probe import parse_checks, probe
    from forensics.probe import report as probe_report
    from ingest.errors import EntryPointError

    if args.markdown is not None and args.markdown.resolve().is_relative_to(args.run_dir.resolve()):
        raise ForensicsError(f"--markdown {args.markdown} is inside the run directory, which is never written to")
    checks = parse_checks(args.checks)
    try:
        result = probe(args.run_dir, checks=checks, entry=args.entry, device=args.device, db=db_path(args.db))
    except EntryPointError as exc:
        if exc.template:  # the fill-in file goes to stdout, so `> forensics_entry.py` saves it
            print(exc.template)
        raise
    print(json.dumps(probe_report.as_json(result), indent=2) if args.json else probe_report.text(result))
    if args.markdown is not None:
        args.markdown.write_text(probe_report.markdown(result), encoding="utf-8")
        print(f"markdown written to {args.markdown}", file=sys.stderr)
    return 0


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
