"""The `forensics` command line: argparse subcommands; `main(argv) -> exit code` is what tests call too.

Exit codes: 0 the command did its job (whatever it found), 1 only with `--fail-on` (findings at or above
that severity), 2 the tool could not do its job (bad arguments, unreadable input). Results go to stdout,
progress and errors to stderr. Only this module catches `ForensicsError`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ingest.errors import ForensicsError
from ingest.store import default_db_path

EPILOG_DB = "The database is --db PATH, else $FORENSICS_DB, else ~/.cache/run-forensics/forensics.duckdb."


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
            "skipped is listed. The run directory is never written to."
        ),
        epilog=f"{EPILOG_DB}\n\nexample:\n  forensics ingest sample_runs/runs/nan_lr_too_high --db /tmp/f.duckdb",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", type=Path, help="a training run's folder")
    _add_db(p)
    _add_json(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_trust_pickle(p)
    p.set_defaults(func=cmd_ingest)


def _add_trust_pickle(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trust-pickle", action="store_true",
        help="read checkpoints that need full unpickling (this runs code from the file: only for files you trust)",
    )


def cmd_ingest(args: argparse.Namespace) -> int:
    from ingest.run import ingest_run

    db = default_db_path(args.db)
    reports = [ingest_run(run_dir, db, progress=not args.quiet, trust_pickle=args.trust_pickle)
               for run_dir in args.run_dirs]
    if args.json:
        print(json.dumps({"db": str(db), "runs": [r.to_json() for r in reports]}, indent=2, allow_nan=True))
        return 0
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
    print(f"database: {db}")
    return 0


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
    from ingest.store import connect

    db = default_db_path(args.db)
    with connect(db, write=False) as con:
        runs = con.execute("SELECT run_id, name, root, last_ingested FROM runs ORDER BY name, run_id").fetchall()
        sources = con.execute(
            "SELECT run_id, path, format, n_points, duplicate_points, status FROM sources ORDER BY run_id, path"
        ).fetchall()
        series = dict(con.execute("SELECT run_id, count(*) FROM series GROUP BY run_id").fetchall())
        issues = con.execute(
            "SELECT run_id, path, position, kind, detail FROM ingest_issues ORDER BY run_id, path, position"
        ).fetchall()
    out = []
    for run_id, name, root, last in runs:
        srcs = [s for s in sources if s[0] == run_id]
        out.append({
            "run": run_id, "name": name, "root": root, "last_ingested": str(last),
            "points": sum(s[3] or 0 for s in srcs), "series": series.get(run_id, 0),
            "sources": [{"path": s[1], "format": s[2], "points": s[3], "duplicate_points": s[4], "status": s[5]}
                        for s in srcs],
            "issues": [{"path": i[1], "position": i[2], "kind": i[3], "detail": i[4]} for i in issues if i[0] == run_id],
        })
    if args.json:
        print(json.dumps({"db": str(db), "runs": out}, indent=2))
        return 0
    if not out:
        print(f"no runs in {db}; add one with `forensics ingest RUN_DIR`")
        return 0
    for r in out:
        formats: dict[str, int] = {}
        for s in r["sources"]:
            formats[s["format"]] = formats.get(s["format"], 0) + 1
        kinds = ", ".join(f"{n} {f}" for f, n in sorted(formats.items()))
        skipped = sum(1 for i in r["issues"] if i["kind"] != "unknown_file")
        print(f"{r['run']}  {r['name']:<28} {r['points']:>12,} points  {r['series']:>4} series  "
              f"{len(r['sources'])} sources ({kinds})" + (f"  {skipped} problems" if skipped else ""))
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
            "skipped checks in the database, and print the diagnosis: the verdict and the earliest critical "
            "finding first, then one finding per line `run:step kind: summary`. Exit code 0 whatever it found; "
            "--fail-on makes findings of that severity or worse exit 1."
        ),
        epilog=(f"{EPILOG_DB}\nThresholds: `forensics rules` lists every detector's fields.\n\nexample:\n"
                "  forensics analyze sample_runs/runs/nan_lr_too_high --db /tmp/f.duckdb --set loss-spike.z=6"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run_dir", metavar="RUN_DIR", type=Path, help="a training run's folder")
    _add_db(p)
    _add_json(p)
    p.add_argument("--markdown", metavar="FILE", type=Path, help="also write the diagnosis as markdown to FILE")
    p.add_argument("--only", type=_kinds, default=[], metavar="KINDS", help="run only these detectors (comma-separated kinds)")
    p.add_argument("--skip", type=_kinds, default=[], metavar="KINDS", help="do not run these detectors")
    p.add_argument("--set", dest="settings", type=_setting, action="append", default=[], metavar="DETECTOR.FIELD=VALUE",
                   help="override a detector threshold, e.g. loss-spike.z=6 (repeatable)")
    p.add_argument("--fail-on", choices=["critical", "warning"], help="exit 1 when a finding reaches this severity")
    p.add_argument("--verbose", "-v", action="store_true", help="print each finding's evidence")
    _add_trust_pickle(p)
    p.set_defaults(func=cmd_analyze)


def cmd_analyze(args: argparse.Namespace) -> int:
    from forensics import report
    from forensics.analysis import analyze
    from forensics.findings import RANK

    if args.markdown is not None and args.markdown.resolve().is_relative_to(args.run_dir.resolve()):
        raise ForensicsError(f"--markdown {args.markdown} is inside the run directory, which is never written to")
    result = analyze(args.run_dir, args.db, only=args.only, skip=args.skip, settings=dict(args.settings),
                     trust_pickle=args.trust_pickle)
    if args.json:
        print(json.dumps(result.as_dict(), indent=2))
    else:
        print(report.text(result, verbose=args.verbose))
    if args.markdown is not None:
        args.markdown.write_text(report.markdown(result), encoding="utf-8")
        print(f"markdown written to {args.markdown}", file=sys.stderr)
    if args.fail_on and any(RANK[f.severity] <= RANK[args.fail_on] for f in result.findings):
        return 1
    return 0


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
    p.add_argument("--top", type=int, default=5, metavar="N", help="movers shown per pair (default 5)")
    _add_db(p)
    _add_json(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_trust_pickle(p)
    p.set_defaults(func=cmd_checkpoints)


def cmd_checkpoints(args: argparse.Namespace) -> int:
    from ingest.checkpoints import checkpoint_summary
    from ingest.run import ingest_run
    from ingest.store import connect

    db = default_db_path(args.db)
    report = ingest_run(args.run_dir, db, progress=not args.quiet, trust_pickle=args.trust_pickle)
    with connect(db, write=False) as con:
        summary = checkpoint_summary(con, report.run_id, top=args.top)
    if args.json:
        print(json.dumps({"db": str(db), "run": report.run_id, "name": report.name, **summary}, indent=2))
        return 0
    ckpts, batches = summary["checkpoints"], summary["batches"]
    print(f"{report.name} ({report.run_id}): {len(ckpts)} checkpoints, {len(batches)} saved batches")
    if ckpts:
        print(f"  {'step':>8}  {'from':<8} {'format':<11} {'size':>9}  {'finite':<28} {'status':<12} path")
    for c in ckpts:
        step = "?" if c["step"] is None else str(c["step"])
        if c["finite"] is None:
            finite = "-"
        elif c["finite"]:
            finite = "yes"
        else:
            finite = f"NO: {c['n_nonfinite']:,} NaN/Inf in {len(c['nonfinite_tensors'])} tensors"
        print(f"  {step:>8}  {c['step_from'] or '-':<8} {c['format']:<11} {_size(c['size_bytes']):>9}  {finite:<28} "
              f"{c['status']:<12} {c['path']}")
        if c["status"] != "ok" and c["detail"]:
            print(f"  {'':>8}  {c['detail']}")
    if summary["deltas"]:
        print("biggest movers between consecutive checkpoints (‖Δw‖/‖w‖):")
    for d in summary["deltas"]:
        movers = ", ".join(f"{m['tensor']} {m['ratio']:.2e}" for m in d["top"]) or "nothing moved"
        print(f"  {d['prev_step']} → {d['step']} ({d['step_distance']} steps): {movers}")
        if d["frozen"]:
            more = f" and {len(d['frozen']) - 8} more" if len(d["frozen"]) > 8 else ""
            print(f"    unchanged: {', '.join(d['frozen'][:8])}{more}")
    for b in batches:
        step = "?" if b["step"] is None else str(b["step"])
        flags = []
        for t in b["tensors"]:
            if t["nonfinite_samples"]:
                flags.append(f"{t['tensor']}: NaN/Inf in samples {_ints(t['nonfinite_samples'])}")
            if t["outlier_samples"]:
                flags.append(f"{t['tensor']}: outlier samples {_ints(t['outlier_samples'])}")
        line = f"  batch step {step}: {b['path']} {b['n_samples'] or 0} samples, {b['status']}"
        print(line + "".join(f"; {f}" for f in flags))
    return 0


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def _ints(values: list[int], shown: int = 8) -> str:
    more = f", ... ({len(values)} in all)" if len(values) > shown else ""
    return ", ".join(str(v) for v in values[:shown]) + more


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
                        device=args.device, db=args.db)
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


# -- main ---------------------------------------------------------------------------------------------------

PARSERS = [_ingest_parser, _runs_parser, _analyze_parser, _rules_parser, _checkpoints_parser, _replay_parser]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="forensics",
        description="Post-hoc forensics for failed deep-learning training runs.",
        epilog="example:\n  forensics ingest sample_runs/runs/nan_lr_too_high && forensics runs",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
