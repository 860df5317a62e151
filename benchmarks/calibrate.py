"""Sweep one detector's threshold over labelled runs: false alarms on healthy runs against recall, per value.

    python benchmarks/calibrate.py --corpus /work/corpus_data --kind overfitting \\
        --sweep noise_k=1,2,3 --sweep min_rise=0.02,0.05
    python benchmarks/calibrate.py --real ../shared/real_runs --kind plateau --sweep min_points=5,8,20
    python benchmarks/calibrate.py --corpus /work/corpus_data --real ../shared/real_runs   # every detector
    python benchmarks/calibrate.py --pool LABELS... --kind overfitting --sweep min_rise=0.05,0.1 --cache /tmp/pool_fa

Issue 12 asks that each threshold come from the distribution of its statistic on healthy runs (a false-alarm
budget of at most 1 % of healthy runs per kind). This prints, for each value of each swept field (one field at a
time, the others at their defaults), how many healthy runs the detector fires on (of those where it could run:
a detector without its series is skipped, and a skip proves nothing about its false-alarm rate), its false findings on labelled
runs, and its recall on the runs labelled with its kind — matched by `eval_corpus.score_case`, the same rule as
the benchmark. Each run is ingested into `--cache` (a DuckDB file per run, reused across calls: ingest is
incremental, so an unchanged run costs a look at its files, and a store of an older schema or parsed by an older
reader is brought up to date); the sweep then analyses the stored runs in-process, a few ms per run and value.
Only the TUNE and CALIB parts and the development runs are for tuning: sweeping the holdout is tuning on it.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from eval_corpus import Case, Label, corpus_cases, real_cases, score_case
from false_alarms import cases as pool_cases


def stored(case: Case, cache: Path) -> tuple[Path, str]:
    """The case's DuckDB file in `cache`, up to date with the run and this version's readers, and its run id. The
    file is named by the run's path, as `false_alarms.py` names it, so one cache serves both and runs of the same
    name in different sets never share a store."""
    from ingest.run import ingest_run, run_id_for

    db = cache / (hashlib.sha1(str(case.path).encode()).hexdigest()[:12] + ".duckdb")
    ingest_run(case.path, db)
    return db, run_id_for(case.path)


def as_dicts(result) -> list[dict]:
    """An Analysis's findings in the shape `eval_corpus.score_case` reads (that of `analyze --json`)."""
    return [{"kind": f.kind, "step": f.step, "step_end": f.step_end, "severity": f.severity,
             "summary": f.summary} for f in result.findings]


def findings(db: Path, run_id: str, kind: str, settings: dict[str, str]) -> tuple[list[dict], bool]:
    """The detector's findings on one stored run, and whether it could run there (not skipped)."""
    from forensics.services.analysis import analyze_stored
    from forensics.judge.settings import selection
    from ingest.store import connect

    with connect(db, write=False) as con:
        result = analyze_stored(con, run_id, selection([kind], (), settings))
    checked = not any(s.kind == kind for s in result.skipped)
    return as_dicts(result), checked


def sweep_one(cases: list[tuple[Case, Path, str]], kind: str, settings: dict[str, str]) -> dict:
    healthy_hits, fp, tp, labels, fired, checkable = 0, 0, 0, 0, [], 0
    for case, db, rid in cases:
        found, checked = findings(db, rid, kind, settings)
        checkable += case.healthy and checked
        s = score_case(case, {"findings": found})
        mine_fp = [f for f in s["fp"] if f["kind"] == kind]
        fp += len(mine_fp)
        if case.healthy and mine_fp:
            healthy_hits += 1
            fired.append(case.name)
        elif mine_fp:
            fired.append(case.name + " (FP)")
        tp += s["tp"].count(kind)
        labels += s["tp"].count(kind) + s["fn"].count(kind)
    n_healthy = sum(c.healthy for c, _, _ in cases)
    return {"healthy_hits": healthy_hits, "healthy": n_healthy, "checkable": checkable, "fp": fp, "tp": tp,
            "labels": labels, "fired": fired}


def overview(cases: list[tuple[Case, Path, str]]) -> int:
    """Every detector at its defaults, in one analysis per run: on how many healthy runs it could run, how many
    it fired on (the false-alarm rate the budget is about), and its false findings and recall elsewhere."""
    from forensics.services.analysis import analyze_stored
    from forensics.judge.detectors import ALL
    from ingest.store import connect

    rows = {c.kind: {"checked": 0, "fired": 0, "fp": 0, "tp": 0, "labels": 0} for c in ALL}
    for case, db, rid in cases:
        with connect(db, write=False) as con:
            result = analyze_stored(con, rid)
        skipped = {s.kind for s in result.skipped}
        s = score_case(case, {"findings": as_dicts(result)})
        for kind, r in rows.items():
            mine = [f for f in s["fp"] if f["kind"] == kind]
            r["fp"] += len(mine)
            r["tp"] += s["tp"].count(kind)
            r["labels"] += s["tp"].count(kind) + s["fn"].count(kind)
            if case.healthy and kind not in skipped:
                r["checked"] += 1
                r["fired"] += bool(mine)
    n = sum(c.healthy for c, _, _ in cases)
    print(f"| kind | healthy runs checked (of {n}) | healthy runs fired on | false findings | recall |")
    print("|---|---|---|---|---|")
    for kind, r in rows.items():
        rec = f"{r['tp']}/{r['labels']}" if r["labels"] else "-"
        print(f"| {kind} | {r['checked']} | {r['fired']} | {r['fp']} | {rec} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="example:\n  python benchmarks/calibrate.py --corpus /work/corpus_data "
                                        "--kind plateau --sweep min_points=8,12,20")
    ap.add_argument("--corpus", type=Path, help="a generated corpus (python -m corpus.generate --out DIR)")
    ap.add_argument("--split", default="tune,calib",
                    help="comma-separated parts of the corpus: tune, calib (extra healthy runs), holdout, all; "
                         "tune and calib are for tuning (default: %(default)s)")
    ap.add_argument("--real", type=Path, action="append", default=[],
                    help="a folder of real runs with a labels.json (repeatable: both shared sets at once)")
    ap.add_argument("--labels", type=Path, help="the real runs' labels.json (default: REAL/labels.json)")
    ap.add_argument("--pool", type=Path, nargs="+", default=[], metavar="LABELS",
                    help="labels files of real runs (each run a folder beside its file), judged as one pool; "
                         "runs are listed as SET/NAME")
    ap.add_argument("--kind", help="the detector (a catalog kind) to sweep; without it, one table of every "
                                   "detector at its defaults: healthy runs it could check and fired on")
    ap.add_argument("--sweep", action="append", default=[], metavar="FIELD=V1,V2,...",
                    help="a field of the detector and the values to try (repeatable; default: the defaults only)")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/forensics_calibrate"),
                    help="where the ingested runs are kept between calls (default: %(default)s)")
    ap.add_argument("--show", action="store_true", help="list the runs each value fires on wrongly")
    a = ap.parse_args(argv)
    if not a.corpus and not a.real and not a.pool:
        ap.error("give --corpus, --real and/or --pool")
    cases = []
    if a.corpus:
        for part in a.split.split(","):
            cases += corpus_cases(a.corpus, part.strip())
    if a.labels and len(a.real) > 1:
        ap.error("--labels goes with one --real")
    for real in a.real:
        cases += real_cases(real, a.labels or real / "labels.json")
    for labels_file in a.pool:
        root = labels_file.parent
        for c in pool_cases([labels_file]):
            cases.append(Case(f"{root.parent.name}/{root.name}/{c['name']}", Path(c["path"]),
                              [Label(k) for k in c["want"]], set(c["allowed"])))
    a.cache.mkdir(parents=True, exist_ok=True)
    ready = []
    tty = sys.stderr.isatty()
    for i, c in enumerate(cases):
        if tty:
            print(f"\r{i + 1}/{len(cases)} ingested", end="", file=sys.stderr)
        db, rid = stored(c, a.cache)
        ready.append((c, db, rid))
    if tty:
        print(file=sys.stderr)
    if not a.kind:
        return overview(ready)
    grid = [("(defaults)", {})]
    for spec in a.sweep:
        field, _, values = spec.partition("=")
        grid += [(f"{field}={v}", {f"{a.kind}.{field}": v}) for v in values.split(",")]
    print(f"| {a.kind} | healthy runs fired on (of those it could check) | false findings | recall |\n|---|---|---|---|")
    for name, settings in grid:
        r = sweep_one(ready, a.kind, settings)
        rec = f"{r['tp']}/{r['labels']}" if r["labels"] else "-"
        print(f"| {name} | {r['healthy_hits']}/{r['checkable']} of {r['healthy']} | {r['fp']} | {rec} |")
        if a.show and r["fired"]:
            print("|  | " + ", ".join(r["fired"]) + " | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
