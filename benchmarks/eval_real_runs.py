"""Per-kind precision and recall of `forensics analyze` on labelled runs (../shared/real_runs/labels.json).

A development measurement, not a test: it runs the engine through its public API (`forensics.services.analysis.analyze`)
on every labelled run, compares the set of finding kinds with the label's pathologies (`["healthy"]` = no
finding expected), and prints per-kind true/false positives, precision and recall, the false findings per
healthy run, and the critical findings on healthy runs. Every finding counts, whatever its severity
(DECISIONS.md §8).

    python benchmarks/eval_real_runs.py                       # ../shared/real_runs
    python benchmarks/eval_real_runs.py --runs DIR --labels DIR/labels.json --json
    python benchmarks/eval_real_runs.py --gallery             # sample_runs/runs vs ground_truth.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _shared() -> Path:
    for p in (REPO.parent / "shared", REPO.parent.parent / "shared"):
        if p.is_dir():
            return p
    return REPO.parent / "shared"


def load_labels(path: Path, gallery: bool) -> dict[str, set[str]]:
    """run name -> expected kinds (empty for a healthy run)."""
    data = json.loads(path.read_text())
    if gallery:  # ground_truth.json: {"runs": {name: {"kinds": [{"kind": ...}, ...]}}}
        data = data["runs"]
    out = {}
    for name, entry in data.items():
        kinds = entry.get("pathologies", entry.get("kinds", []))
        kinds = [k["kind"] if isinstance(k, dict) else k for k in kinds]
        out[name] = {k for k in kinds if k != "healthy"}
    return out


def predict(runs: Path, names: list[str], db: Path) -> dict[str, list[dict]]:
    """run name -> its findings (kind, severity, step, summary) from the engine."""
    from forensics.services.analysis import analyze

    out = {}
    for name in names:
        result = analyze(runs / name, db=db).as_dict()
        out[name] = [{k: f.get(k) for k in ("kind", "severity", "step", "summary")} for f in result["findings"]]
    return out


def score(labels: dict[str, set[str]], found: dict[str, list[dict]]) -> dict:
    tp, fp, fn = Counter(), Counter(), Counter()
    false_on_healthy, critical_on_healthy = [], []
    for name, want in labels.items():
        got = {f["kind"] for f in found[name]}
        for k in got & want:
            tp[k] += 1
        for k in got - want:
            fp[k] += 1
        for k in want - got:
            fn[k] += 1
        if not want:
            false_on_healthy.append(len(got))
            critical_on_healthy += [f"{name}: {f['kind']}" for f in found[name] if f["severity"] == "critical"]
    kinds = sorted(set(tp) | set(fp) | set(fn))
    table = []
    for k in kinds:
        p = tp[k] / (tp[k] + fp[k]) if tp[k] + fp[k] else None
        r = tp[k] / (tp[k] + fn[k]) if tp[k] + fn[k] else None
        table.append({"kind": k, "tp": tp[k], "fp": fp[k], "fn": fn[k], "precision": p, "recall": r})
    T, F, N = sum(tp.values()), sum(fp.values()), sum(fn.values())
    return {"kinds": table, "overall": {"tp": T, "fp": F, "fn": N, "precision": T / (T + F) if T + F else None,
                                        "recall": T / (T + N) if T + N else None},
            "healthy_runs": len(false_on_healthy),
            "false_kinds_per_healthy_run": sum(false_on_healthy) / len(false_on_healthy) if false_on_healthy else None,
            "critical_on_healthy": critical_on_healthy}


def render(s: dict, labels: dict[str, set[str]], found: dict[str, list[dict]]) -> str:
    fmt = lambda x: "  -  " if x is None else f"{x:.2f}"  # noqa: E731
    lines = [f"{'kind':<24} {'tp':>3} {'fp':>3} {'fn':>3}  prec  recall"]
    for r in s["kinds"]:
        lines.append(f"{r['kind']:<24} {r['tp']:>3} {r['fp']:>3} {r['fn']:>3}  {fmt(r['precision'])}  {fmt(r['recall'])}")
    o = s["overall"]
    lines.append(f"{'overall':<24} {o['tp']:>3} {o['fp']:>3} {o['fn']:>3}  {fmt(o['precision'])}  {fmt(o['recall'])}")
    lines.append(f"healthy runs: {s['healthy_runs']}, false kinds per healthy run: {fmt(s['false_kinds_per_healthy_run'])}, "
                 f"critical on healthy: {len(s['critical_on_healthy'])} {s['critical_on_healthy']}")
    lines.append("")
    for name in sorted(labels):
        got = sorted({f["kind"] for f in found[name]})
        want = sorted(labels[name])
        mark = "ok " if set(got) == set(want) else "DIFF"
        lines.append(f"{mark} {name:<22} want={','.join(want) or 'healthy'}  got={','.join(got) or 'healthy'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=Path, help="folder of run folders (default ../shared/real_runs)")
    ap.add_argument("--labels", type=Path, help="labels file (default RUNS/labels.json)")
    ap.add_argument("--gallery", action="store_true", help="sample_runs/runs against sample_runs/ground_truth.json")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--verbose", action="store_true", help="print every finding of every run")
    a = ap.parse_args(argv)
    if a.gallery:
        runs, labels_path = REPO / "sample_runs" / "runs", REPO / "sample_runs" / "ground_truth.json"
    else:
        runs = a.runs or _shared() / "real_runs"
        labels_path = a.labels or runs / "labels.json"
    labels = load_labels(labels_path, a.gallery)
    labels = {n: k for n, k in labels.items() if (runs / n).is_dir()}
    with tempfile.TemporaryDirectory() as tmp:
        found = predict(runs, sorted(labels), Path(tmp) / "eval.duckdb")
    s = score(labels, found)
    if a.json:
        print(json.dumps({"score": s, "found": found}, indent=1))
    else:
        print(render(s, labels, found))
        if a.verbose:
            for name in sorted(found):
                for f in found[name]:
                    print(f"  {name}:{f['step']} {f['kind']} [{f['severity']}] {f['summary']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
