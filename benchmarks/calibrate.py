"""Sweep one detector's threshold over labelled runs: false alarms on healthy runs against recall, per value.

    python benchmarks/calibrate.py --corpus /work/corpus_data --kind overfitting \\
        --sweep noise_k=1,2,3 --sweep min_rise=0.02,0.05
    python benchmarks/calibrate.py --real ../shared/real_runs --kind plateau --sweep min_points=5,8,20
    python benchmarks/calibrate.py --corpus /work/corpus_data --real ../shared/real_runs   # every detector
    python benchmarks/calibrate.py --pool LABELS... --kind overfitting --sweep min_rise=0.05,0.1 --cache /tmp/pool_fa
    python benchmarks/calibrate.py --pool SET8/*/LABELS ... SET13/*/LABELS --real ../shared/real_runs \\
        --kind overfitting --sweep min_rise=0.02,0.05 --loso      # the value chosen on five sets, scored on the sixth

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
from ingest.errors import ForensicsError
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


def counts(case: Case, db: Path, rid: str, kind: str, settings: dict[str, str]) -> tuple[int, int, int, bool]:
    """One run under `settings`: the kind's true findings, its false ones, its labels of the kind, and whether the
    detector could run there."""
    found, checked = findings(db, rid, kind, settings)
    s = score_case(case, {"findings": found})
    return s["tp"].count(kind), sum(f["kind"] == kind for f in s["fp"]), s["tp"].count(kind) + s["fn"].count(kind), \
        checked


def sweep_one(cases: list[tuple[Case, Path, str]], kind: str, settings: dict[str, str]) -> dict:
    healthy_hits, fp, tp, labels, fired, checkable = 0, 0, 0, 0, [], 0
    for case, db, rid in cases:
        hit, wrong, labelled, checked = counts(case, db, rid, kind, settings)
        checkable += case.healthy and checked
        fp += wrong
        if case.healthy and wrong:
            healthy_hits += 1
            fired.append(case.name)
        elif wrong:
            fired.append(case.name + " (FP)")
        tp += hit
        labels += labelled
    n_healthy = sum(c.healthy for c, _, _ in cases)
    return {"healthy_hits": healthy_hits, "healthy": n_healthy, "checkable": checkable, "fp": fp, "tp": tp,
            "labels": labels, "fired": fired}


LOSO_COST = 2  # a false finding costs two true ones when a value is chosen


def leave_one_set_out(cases: list[tuple[Case, Path, str]], kind: str, grid: list[tuple[str, dict]]) -> int:
    """Each pool set in turn held out: the value (defaults included) with the most true findings minus `LOSO_COST`
    × false ones on the other sets, and no more false findings than the defaults on the runs of no set (`--real`,
    the corpus), is applied to the held-out set. What it gains there over the defaults estimates what choosing a
    value on labelled runs does on runs it was not chosen on (a gain in-sample that vanishes held out is fit)."""
    table: dict[str, dict[str | None, list[int]]] = {}  # value -> fold -> [tp, fp]
    for name, settings in grid:
        per = table.setdefault(name, {})
        for case, db, rid in cases:
            hit, wrong, _, _ = counts(case, db, rid, kind, settings)
            fold = case.name.split("/")[0] if "/" in case.name else None
            cell = per.setdefault(fold, [0, 0])
            cell[0] += hit
            cell[1] += wrong
    folds = sorted({f for per in table.values() for f in per if f is not None})
    if len(folds) < 2:
        print("leave-one-set-out needs --pool labels of two sets or more")
        return 2
    defaults = table["(defaults)"]
    fixed_fp = defaults.get(None, [0, 0])[1]

    def value(name: str, sets: list[str]) -> int:
        return sum(table[name].get(f, [0, 0])[0] - LOSO_COST * table[name].get(f, [0, 0])[1] for f in sets)

    print("| held-out set | value chosen on the others | true / false findings held out | defaults |\n|---|---|---|---|")
    gain = [0, 0]
    for fold in folds:
        others = [f for f in folds if f != fold]
        allowed = [n for n in table if table[n].get(None, [0, 0])[1] <= fixed_fp]
        best = max(allowed, key=lambda n: (value(n, others), n == "(defaults)"))
        got, base = table[best].get(fold, [0, 0]), defaults.get(fold, [0, 0])
        gain[0] += got[0] - base[0]
        gain[1] += got[1] - base[1]
        print(f"| {fold} | {best} | {got[0]} / {got[1]} | {base[0]} / {base[1]} |")
    print(f"\nheld out, over the defaults: {gain[0]:+d} true findings, {gain[1]:+d} false findings")
    return 0


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
    ap.add_argument("--loso", action="store_true",
                    help="leave one set out: choose the value on the other --pool sets, score it on the one left "
                         "out (sets are the label files' grandparent folders, e.g. set9 of set9/console)")
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
        try:
            db, rid = stored(c, a.cache)
        except ForensicsError as e:  # a run nothing reads: left out of every figure, and said
            print(f"\nleft out {c.name}: {e}", file=sys.stderr)
            continue
        ready.append((c, db, rid))
    if tty:
        print(file=sys.stderr)
    if not a.kind:
        return overview(ready)
    grid = [("(defaults)", {})]
    for spec in a.sweep:
        field, _, values = spec.partition("=")
        grid += [(f"{field}={v}", {f"{a.kind}.{field}": v}) for v in values.split(",")]
    if a.loso:
        return leave_one_set_out(ready, a.kind, grid)
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
