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

from forensics import __version__, numbers
from ingest.errors import ForensicsError

EPILOG_DB = "The database is --db PATH, else $FORENSICS_DB, else ~/.cache/run-forensics/forensics.duckdb."


def db_path(explicit: str | os.PathLike | None = None) -> Path:
    """`--db PATH`, else `$FORENSICS_DB`, else the user's cache folder; never inside a run directory
    (DECISIONS.md §5). The one place the environment is read."""
    if explicit:
        return Path(explicit).expanduser()
    if os.environ.get("FORENSICS_DB"):
        return Path(os.environ["FORENSICS_DB"]).expanduser()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "run-forensics" / "forensics.duckdb"


class ProgressBars:
    """Draws ingest's progress callback as one tqdm bar per stage on stderr, only when stderr is a terminal
    (tqdm's `disable=None`). Call `close()` when the work is done."""

    def __init__(self, name: str, enabled: bool = True) -> None:
        self.name, self.enabled = name, enabled
        self.stage: str | None = None
        self.bar = None

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        if stage != self.stage:
            from tqdm import tqdm

            self.close()
            self.stage = stage
            self.bar = tqdm(total=total, desc=f"{stage} {self.name}", unit="B", unit_scale=True, disable=None,
                            file=sys.stderr, leave=False)
        self.bar.n = min(done, total)
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


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
    p.set_defaults(func=cmd_ingest)


def _add_trust_pickle(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trust-pickle", action="store_true",
        help="read checkpoints that need full unpickling (this runs code from the file: only for files you trust)",
    )


def cmd_ingest(args: argparse.Namespace) -> int:
    """Read every directory it can; report each one it cannot (one line each on stderr) and exit 2 if any
    could not be read, after the others are stored: a script must not take a partial ingest for a whole one."""
    from forensics.folders import refuse_folder_of_runs
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
            reports.append(ingest_run(run_dir, db, progress=bars, trust_pickle=args.trust_pickle))
        except ForensicsError as exc:
            failed.append({"path": str(run_dir), "error": str(exc)})
            print(f"forensics: error: {exc}", file=sys.stderr)  # each message names its directory
        finally:
            bars.close()
    code = 2 if failed else 0
    if args.json:
        print(json.dumps({"db": str(db), "runs": [r.to_json() for r in reports], "failed": failed},
                         indent=2, allow_nan=True))
        return code
    for r in reports:
        by_format: dict[str, int] = {}
        for s in r.sources:
            # Checkpoints and batches hold tensors, not points: count them.
            key = {"checkpoint": "checkpoints", "batch": "saved batches"}.get(s.format, s.format)
            by_format[key] = by_format.get(key, 0) + (1 if s.format in ("checkpoint", "batch") else s.points)
        formats = ", ".join(f"{n} {fmt}" for fmt, n in sorted(by_format.items())) or "nothing new"
        print(f"{r.name} ({r.run_id}): {r.points:,} new points from {len(r.sources)} files [{formats}] "
              f"in {r.seconds:.2f}s")
        issues = r.issues
        if issues:
            print(f"  warning: {len(issues)} problems; good records were kept:", file=sys.stderr)
            for path, issue in issues[:20]:
                where = f" at {issue.position}" if issue.position is not None else ""
                print(f"    {path}{where}: {issue.kind}: {issue.detail}", file=sys.stderr)
            if len(issues) > 20:
                print(f"    ... {len(issues) - 20} more (forensics runs --json lists them all)", file=sys.stderr)
        if r.unknown:
            shown = ", ".join(r.unknown[:5]) + (f", ... ({len(r.unknown)} in all)" if len(r.unknown) > 5 else "")
            print(f"  not read (no reader for these files): {shown}", file=sys.stderr)
    if failed:
        print(f"{len(reports)} of {len(run_dirs)} directories read; not read: {', '.join(f['path'] for f in failed)}")
    print(f"database: {db}")
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
    from ingest.queries import list_runs
    from ingest.store import connect

    db = db_path(args.db)
    with connect(db, write=False) as con:
        out = list_runs(con)
        found = _found_by_watch(con)
    for r in out:
        r["found_by_watch"] = found.get(r["run"])
    if args.json:
        print(json.dumps({"db": str(db), "runs": out}, indent=2))
        return 0
    if not out:
        print(f"no runs in {db}; add one with `forensics ingest RUN_DIR`")
        return 0
    # Two runs with one folder name (`version_0` of two experiments) are told apart by their path.
    seen: dict[str, int] = {}
    for r in out:
        seen[r["name"]] = seen.get(r["name"], 0) + 1
    shown = {r["run"]: r["name"] if seen[r["name"]] == 1 else _short_path(r["root"]) for r in out}
    width = max(28, *(len(v) for v in shown.values()))
    print(f"{'id':<10}  {'run':<{width}} {'points':>12}  {'series':>6}  {'problems':>8}  sources")
    for r in out:
        formats: dict[str, int] = {}
        for s in r["sources"]:
            formats[s["format"]] = formats.get(s["format"], 0) + 1
        kinds = ", ".join(f"{n} {f}" for f, n in sorted(formats.items()))
        problems = sum(1 for i in r["issues"] if i["kind"] != "unknown_file")
        print(f"{r['run']:<10}  {shown[r['run']]:<{width}} {r['points']:>12,}  {r['series']:>6}  {problems:>8}  "
              f"{len(r['sources'])} ({kinds})")
        if r["found_by_watch"]:
            w = r["found_by_watch"]
            print(f"{'':12}found by watch as {w['kind']}: {w['reason']} ({w['state']})")
    print(f"database: {db}")
    return 0


def _short_path(path: str) -> str:
    """A run's root, relative to the working folder when it is below it."""
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


def _found_by_watch(con) -> dict[str, dict]:
    """run_id -> how `forensics watch` found the run (docs/watch.md's rules) and its state there."""
    from ingest.queries import watched_runs

    return {w["run_id"]: {"kind": w["kind"], "reason": w["reason"], "state": w["state"], "watch_root": w["watch_root"]}
            for w in watched_runs(con)}


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
    _add_trust_pickle(p)
    p.set_defaults(func=cmd_analyze)


def cmd_analyze(args: argparse.Namespace) -> int:
    from forensics import report
    from forensics.analysis import analyze

    if args.all:
        return cmd_analyze_all(args)
    markdown_to = _markdown_target(args)
    result = analyze(args.run_dir, db_path(args.db), only=args.only, skip=args.skip, settings=dict(args.settings),
                     trust_pickle=args.trust_pickle)
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
        serve_app(db_path(args.db), run=result.run_id)
    return 1 if args.fail_on and fails(result, args.fail_on) else 0


def fails(result, level: str) -> bool:
    """--fail-on: `critical` a critical finding; `warning` a warning or worse; `inconclusive` any verdict but
    healthy (a pipeline that wants proof of health)."""
    from forensics.findings import RANK

    if level == "inconclusive":
        return result.verdict != "healthy"
    return any(RANK[f.severity] <= RANK[level] for f in result.findings)


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
        summary = _judge_batches(checkpoint_summary(con, report.run_id, top=args.top))
    if args.json:
        print(json.dumps({"db": str(db), "run": report.run_id, "name": report.name, **summary}, indent=2))
        return 0
    ckpts, batches = summary["checkpoints"], summary["batches"]
    print(f"{report.name} ({report.run_id}): {len(ckpts)} checkpoints, {len(batches)} saved batches")
    if ckpts:
        print(f"  {'step':>8}  {'from':<8} {'format':<11} {'size':>9}  {'finite':<6} {'status':<12} path")
    for c in ckpts:
        step = "?" if c["step"] is None else str(c["step"])
        finite = "-" if c["finite"] is None else "yes" if c["finite"] else "NO"
        print(f"  {step:>8}  {c['step_from'] or '-':<8} {c['format']:<11} {numbers.size(c['size_bytes']):>9}  {finite:<6} "
              f"{c['status']:<12} {c['path']}")
        if c["nonfinite_tensors"]:
            print(f"  {'':>8}  {_nonfinite_line(c)}")
        if c["status"] != "ok" and c["detail"]:
            print(f"  {'':>8}  {c['detail']}")
    if summary["deltas"] and args.top > 0:
        print("biggest movers between consecutive checkpoints (‖Δw‖/‖w‖, model parameters):")
    elif any(d["frozen"] for d in summary["deltas"]):
        print("parameters unchanged between consecutive checkpoints (--top 0: movers not listed):")
    for d in summary["deltas"]:
        if args.top > 0:
            movers = ", ".join(f"{m['tensor']} {m['ratio']:.2e}" for m in d["top"]) or "no parameter moved"
            print(f"  {d['prev_step']} → {d['step']} ({d['step_distance']} steps): {movers}")
        elif d["frozen"]:
            print(f"  {d['prev_step']} → {d['step']} ({d['step_distance']} steps):")
        if d["frozen"]:
            more = f" and {len(d['frozen']) - 8} more" if len(d["frozen"]) > 8 else ""
            print(f"    unchanged: {', '.join(d['frozen'][:8])}{more}")
    for b in batches:
        step = "?" if b["step"] is None else str(b["step"])
        flags = []
        for t in b["tensors"]:
            if t["nonfinite_samples"]:
                flags.append(f"{t['tensor']}: NaN/Inf in samples {numbers.ints(t['nonfinite_samples'])}")
            if t["outlier_samples"]:
                flags.append(f"{t['tensor']}: outlier samples {numbers.ints(t['outlier_samples'])}")
        line = f"  batch step {step}: {b['path']} {b['n_samples'] or 0} samples, {b['status']}"
        print(line + "".join(f"; {f}" for f in flags))
    return 0


def _judge_batches(summary: dict) -> dict:
    """Outlier samples of each saved batch by the bad_batch detector's own rule and default threshold (the store
    keeps per-sample norms, not a verdict); tensors with neither NaN/Inf nor outlier samples are left out."""
    from forensics.detectors.bad_batch import BadBatch

    judge = BadBatch()
    for b in summary["batches"]:
        tensors = []
        for t in b["tensors"]:
            far = judge.outliers(t.pop("sample_norms"))
            if t["nonfinite_samples"] or far:
                tensors.append(t | {"outlier_samples": [s for s, _ in far], "outlier_z": [z for _, z in far]})
        b["tensors"] = tensors
    return summary


def _nonfinite_line(c: dict) -> str:
    """Model values as `analyze` counts them (nonfinite_weights), optimizer and other state apart."""
    model = [t for t in c["nonfinite_tensors"] if t["kind"] in ("param", "buffer")]
    other = [t for t in c["nonfinite_tensors"] if t["kind"] not in ("param", "buffer")]
    values = f"{c['n_nonfinite']:,} NaN/Inf " + ("value" if c["n_nonfinite"] == 1 else "values")
    line = f"{values} in {len(model)} model " + ("tensor" if len(model) == 1 else "tensors")
    if model:
        line += " (" + ", ".join(t["tensor"] for t in model[:4]) + (", ...)" if len(model) > 4 else ")")
    if other:
        kinds = sorted({t["kind"] for t in other})
        line += f"; NaN/Inf also in {len(other)} {'/'.join(kinds)} " + ("tensor" if len(other) == 1 else "tensors")
    return line


def _count_arg(text: str) -> int:
    n = int(text)
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {n}")
    return n


# -- app (the Streamlit browser; issue 15) ---------------------------------------------------------------------

APP_PORT = 8501


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
                   help=f"port on localhost (default {APP_PORT}, or the next free one when it is taken)")
    p.add_argument("--run", metavar="NAME", help="open this run's report (its name or id)")
    p.add_argument("--no-browser", action="store_true", help="only print the URL; do not open a browser")
    p.set_defaults(func=cmd_app)


def cmd_app(args: argparse.Namespace) -> int:
    return serve_app(db_path(args.db), port=args.port, run=args.run, browser=not args.no_browser)


def _free_port(port: int | None) -> int:
    """`port` if given and free (else an error); else the first free port from APP_PORT on."""
    import socket

    def free(n: int) -> bool:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            # As the server will: a port left in TIME_WAIT by a server just stopped is free; one listened on is not.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", n))
            except OSError:
                return False
            return True

    if port is not None:
        if not free(port):
            raise ForensicsError(f"port {port} is in use; pass another --port")
        return port
    for n in range(APP_PORT, APP_PORT + 50):
        if free(n):
            return n
    raise ForensicsError(f"no free port in {APP_PORT}-{APP_PORT + 49}; pass --port N")


def _wait_listening(proc, port: int, wait_s: float = 60.0) -> None:
    """Return once the server accepts connections, so the printed URL works when it is printed."""
    import socket
    import time

    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ForensicsError(f"the app stopped with exit code {proc.returncode} before it served a page "
                                 "(streamlit's message is above)")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    proc.terminate()
    raise ForensicsError(f"the app did not start listening on port {port} within {wait_s:.0f} s")


def serve_app(db: Path, *, port: int | None = None, run: str | None = None, browser: bool = True) -> int:
    """Run `python -m streamlit run app/streamlit_app.py -- --db DB [--run RUN]` until it stops or Ctrl+C."""
    import importlib.util
    import os
    import signal
    import subprocess
    import threading
    from urllib.parse import urlencode

    from ingest.errors import MissingDependency

    missing = [m for m in ("streamlit", "plotly") if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingDependency(f"the app needs {', '.join(missing)}: pip install -e \".[app]\"")
    spec = importlib.util.find_spec("app")
    if spec is None or spec.origin is None:
        raise ForensicsError("the app's files (app/streamlit_app.py) are not installed with this copy")
    script = Path(spec.origin).parent / "streamlit_app.py"
    port = _free_port(port)
    if not db.exists():
        print(f"forensics: note: no database at {db} yet; the page says so until `forensics analyze RUN_DIR "
              f"--db {db}` creates it", file=sys.stderr)
    cmd = [sys.executable, "-m", "streamlit", "run", str(script), "--server.port", str(port),
           "--server.address", "localhost", "--server.headless", "false" if browser else "true",
           "--browser.gatherUsageStats", "false", "--global.developmentMode", "false", "--client.toolbarMode", "minimal",
           "--", "--db", str(db)]
    if run:
        cmd += ["--run", run]
    env = dict(os.environ)
    root = str(script.parent.parent)  # so the script imports `app` and `ingest` from this same copy
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    query = "?" + urlencode({"run": run, "page": "Run report"}) if run else ""
    # A SIGTERM (a service manager, a test's teardown) must stop the server too, not orphan it.
    previous = signal.signal(signal.SIGTERM, _interrupt) if threading.current_thread() is threading.main_thread() \
        else None
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
    try:
        _wait_listening(proc, port)
        print(f"run-forensics app: http://localhost:{port}/{query}  (Ctrl+C stops it)", flush=True)
        code = proc.wait()
    except KeyboardInterrupt:
        code = 0
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    if code not in (0, -15):
        raise ForensicsError(f"the app stopped with exit code {code} (streamlit's message is above)")
    return 0


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


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

    from forensics import report
    from forensics.findings import RANK
    from forensics.fleet import Options, analyze_runs
    from ingest.discovery import discover

    if args.markdown is not None:
        raise ForensicsError("--markdown writes one run's diagnosis; with --all use --json")
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
    if args.json:
        print(json.dumps({"db": str(db), "root": str(found.root), "jobs": args.jobs, "ray": args.ray is not None,
                          "seconds": round(seconds, 2), "failed": len(failed), "runs": [
                              {"path": str(d.path), "kind": d.kind, "reason": d.reason,
                               **by_path[str(d.path)].as_dict()} for d in found.runs]}, indent=2))
    else:
        for d in found.runs:
            r = by_path[str(d.path)]
            rel = d.path.relative_to(found.root) if d.path != found.root else Path(d.path.name)
            if r.error is not None:
                print(f"{rel}: could not analyse: {r.error}")
                if args.verbose and r.trace:
                    print(r.trace, end="")
                continue
            line = report.verdict(r.analysis).split(": ", 1)[1]
            head = r.analysis.headline()
            more = f" — first: {head.kind} at step {head.step}" if head is not None and head.step is not None else (
                f" — first: {head.kind}" if head is not None else "")
            print(f"{rel}: {line}{more}")
        print(f"{len(results) - len(failed)} of {len(found.runs)} runs analysed in {seconds:.1f}s "
              f"({args.jobs} {'Ray' if args.ray is not None else 'process'}{'es' if args.jobs > 1 and args.ray is None else ''}); "
              f"database: {db}")
    if failed:
        print(f"forensics: error: {len(failed)} of {len(found.runs)} runs could not be analysed; the others were",
              file=sys.stderr)
        return 2
    if args.fail_on and any(RANK[f.severity] <= RANK[args.fail_on] for r in results for f in r.analysis.findings):
        return 1
    return 0


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
    from forensics.watch import Watcher, WatchSettings

    missing = [str(r) for r in args.roots if not r.is_dir()]
    if missing:
        raise ForensicsError(f"not a folder: {', '.join(missing)}; watch takes folders holding runs")
    if args.interval <= 0:
        raise ForensicsError(f"--interval must be positive (got {args.interval:g})")
    db = db_path(args.db)

    def emit(alert) -> None:
        print(json.dumps(alert.as_dict(), default=str) if args.json else alert.message, flush=True)

    def log(message: str) -> None:
        print(f"forensics watch: {message}", file=sys.stderr, flush=True)

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
            "with the run's entry point (forensics_entry.py at the run root, DECISIONS.md §10). RUNNING THIS RUNS "
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
    p.add_argument("--markdown", metavar="FILE", type=Path, help="also write the report as markdown to FILE")
    _add_db(p)
    _add_json(p)
    p.set_defaults(func=cmd_replay)


def cmd_replay(args: argparse.Namespace) -> int:
    from ingest.errors import EntryPointError

    if args.markdown is not None and args.markdown.resolve().is_relative_to(args.run_dir.resolve()):
        raise ForensicsError(f"--markdown {args.markdown} is inside the run directory, which is never written to")
    from forensics.replay import replay
    from forensics.replay import report as replay_report

    try:
        result = replay(args.run_dir, args.step, entry=args.entry, from_checkpoint=args.from_checkpoint,
                        device=args.device, db=db_path(args.db))
    except EntryPointError as exc:
        if exc.template:  # the fill-in file goes to stdout, so `> forensics_entry.py` saves it
            print(exc.template)
        raise
    if args.json:
        print(json.dumps(replay_report.plain(result), indent=2))
    else:
        print(replay_report.text(result))
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
        print(f"forensics: error: {exc}", file=sys.stderr)
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
