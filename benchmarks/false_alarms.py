"""False alarms per detector on labelled real runs: the budget each threshold is measured against.

    python benchmarks/false_alarms.py ../shared/real_runs/labels.json ../shared/real_runs_test/labels.json \\
        ../shared/real_runs_3/labels.json /work/wild_own/console/blind/labels.json --jobs 2
    python benchmarks/false_alarms.py LABELS... --json OUT --show     # the false findings' summaries too

Each LABELS file maps a run name (a folder beside the file) to {"pathologies": [...], "allowed": [...]}, the
format `../shared/tools/score.py` reads. A false finding is every finding on a healthy run (no pathologies) and,
on a labelled run, a finding whose kind is neither labelled nor allowed (nan_loss and masked_nonfinite count as
one observation, as the scorer counts them). For each detector it prints the false findings over the healthy runs
it judged (not skipped: a skip proves nothing about a false-alarm rate), how many healthy runs it fired on, the
severities, its false findings on labelled runs, and the shape of each run it fired on wrongly (format, points,
what the config declares), never its name unless `--names` asks. Runs are ingested into `--cache` (one DuckDB file
per run, incremental, reused across calls) and analysed in-process through `analyze_stored`, the function
`forensics analyze` calls, in `--jobs` worker processes (2 at most on a shared machine).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import traceback
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

# kinds that are the same observation seen from two sides, as ../shared/tools/score.py counts them
EQUIVALENT = {"nan_loss": {"nan_loss", "masked_nonfinite"}, "masked_nonfinite": {"nan_loss", "masked_nonfinite"}}


def cases(labels_files: list[Path]) -> list[dict]:
    """Every labelled run: its folder, its labelled and allowed kinds, and the set it came from."""
    out = []
    for lab_path in labels_files:
        labels = json.loads(lab_path.read_text())
        for name in sorted(n for n in labels if not n.startswith("_")):
            lab = labels[name]
            out.append({"set": str(lab_path.parent), "name": name, "path": str(lab_path.parent / name),
                        "want": sorted(set(lab.get("pathologies", [])) - {"healthy"}),
                        "allowed": sorted(lab.get("allowed", []))})
    return out


def shape(run) -> str:
    """What a reader of the run sees before any judgement: the loss's format and points, the validation loss's
    points, and what the config declares (pretrained weights, a class count)."""
    from forensics.judge.detectors.base import class_count, pretrained_key

    loss = run.pick("loss")
    parts = [run.format_of(loss) or "?" if loss else "no loss"]
    if loss:
        parts.append(f"loss {run.finite_points('loss')} pts")
    if run.has("val_loss"):
        parts.append(f"val {run.finite_points('val_loss')} pts")
    if pretrained_key(run):
        parts.append("pretrained")
    found = class_count(run)
    if found:
        parts.append(f"{found[0]} classes")
    return ", ".join(parts)


def judge_one(case: dict, cache: str) -> dict:
    """Ingest the run into its cached store and analyse it: its findings, the detectors that judged it, its shape."""
    from forensics.services.analysis import analyze_stored
    from ingest.run import ingest_run
    from ingest.store import connect
    from forensics.judge.run import Run
    from ingest.errors import ForensicsError

    db = Path(cache) / (hashlib.sha1(case["path"].encode()).hexdigest()[:12] + ".duckdb")
    try:
        report = ingest_run(Path(case["path"]), db)
        with connect(db, write=False) as con:
            result = analyze_stored(con, report.run_id)
            run_shape = shape(Run.from_store(con, report.run_id))
    except ForensicsError as e:  # an unreadable run is reported and the others judged
        return {**case, "error": f"{type(e).__name__}: {e}"}
    except Exception as e:  # noqa: BLE001 - an engine bug on one run: reported with its traceback, the rest judged
        return {**case, "error": f"BUG {type(e).__name__}: {e}", "traceback": traceback.format_exc()}
    skipped = {s.kind for s in result.skipped}
    from forensics.judge.detectors import ALL

    return {**case, "shape": run_shape, "judged": sorted(d.kind for d in ALL if d.kind not in skipped),
            "findings": [{"kind": f.kind, "severity": f.severity, "step": f.step, "summary": f.summary,
                          "evidence": f.evidence} for f in result.findings]}


def false_findings(row: dict) -> list[dict]:
    """The run's findings that no label or allowance covers."""
    covered = set()
    for k in row["want"] + row["allowed"]:
        covered |= EQUIVALENT.get(k, {k})
    return [f for f in row.get("findings", []) if f["kind"] not in covered]


def table(rows: list[dict], names: bool, show: bool) -> str:
    per = defaultdict(lambda: {"judged": 0, "fired": 0, "false": 0, "labelled_false": 0,
                               "severity": defaultdict(int), "shapes": []})
    healthy = [r for r in rows if not r["want"] and "error" not in r]
    for r in rows:
        if "error" in r:
            continue
        for kind in r["judged"]:
            per[kind]["judged"] += not r["want"]
        wrong = false_findings(r)
        for kind in sorted({f["kind"] for f in wrong}):
            mine = [f for f in wrong if f["kind"] == kind]
            p = per[kind]
            if r["want"]:
                p["labelled_false"] += len(mine)
            else:
                p["false"] += len(mine)
                p["fired"] += 1
            for f in mine:
                p["severity"][f["severity"]] += 1
            who = f" [{r['name']}]" if names else ""
            label = "healthy" if not r["want"] else "labelled " + "+".join(r["want"])
            p["shapes"].append(f"{label}: {r['shape']}{who}" + "".join(f"\n        {f['summary']}" for f in mine if show))
    lines = [f"healthy runs judged: {len(healthy)} of {sum(not r['want'] for r in rows)}; labelled runs: "
             f"{sum(bool(r['want']) for r in rows)}; errors: {sum('error' in r for r in rows)}", "",
             f"{'detector':24} {'false/healthy judged':>20} {'runs':>5} {'on labelled':>11}  severity"]
    for kind, p in sorted(per.items(), key=lambda kv: (-(kv[1]["false"] + kv[1]["labelled_false"]), kv[0])):
        if not (p["false"] or p["labelled_false"]):
            continue
        sev = ", ".join(f"{n} {s}" for s, n in sorted(p["severity"].items()))
        lines.append(f"{kind:24} {p['false']:>9}/{p['judged']:<10} {p['fired']:>5} {p['labelled_false']:>11}  {sev}")
        lines += [f"    {s}" for s in p["shapes"]]
    total = sum(len(false_findings(r)) for r in healthy)
    lines += ["", f"FALSE healthy_findings={total} healthy_runs_with_any={sum(bool(false_findings(r)) for r in healthy)}"
                  f"/{len(healthy)} labelled_extra={sum(len(false_findings(r)) for r in rows if r['want'] and 'error' not in r)}"]
    lines += [f"ERROR {r['shape'] if 'shape' in r else r['set']}: {r['error']}" + (f" [{r['name']}]" if names else "")
              for r in rows if "error" in r]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="example:\n  python benchmarks/false_alarms.py ../shared/real_runs_3/labels.json --jobs 2")
    ap.add_argument("labels", type=Path, nargs="+", help="labels.json files, each beside the runs it names")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (at most 2 on a shared machine)")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/forensics_false_alarms"),
                    help="where the ingested runs are kept between calls (default: %(default)s)")
    ap.add_argument("--json", type=Path, help="write every run's findings and false findings here")
    ap.add_argument("--names", action="store_true", help="name the runs (development only: never copy into code)")
    ap.add_argument("--show", action="store_true", help="print each false finding's summary under its run")
    a = ap.parse_args(argv)
    a.cache.mkdir(parents=True, exist_ok=True)
    todo = cases(a.labels)
    with ProcessPoolExecutor(max(1, min(a.jobs, 2))) as pool:
        rows = list(pool.map(judge_one, todo, [str(a.cache)] * len(todo)))
    print(table(rows, a.names, a.show))
    if a.json:
        for r in rows:
            r["false"] = false_findings(r) if "error" not in r else []
        a.json.write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
