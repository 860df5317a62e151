"""Score `forensics analyze` against labelled runs: per-kind precision and recall, false findings per healthy run.

    python benchmarks/eval_corpus.py --corpus /work/corpus_data --split tune
    python benchmarks/eval_corpus.py --real ../shared/real_runs --labels ../shared/real_runs/labels.json
    python benchmarks/eval_corpus.py --corpus /work/corpus_data --split tune --real ../shared/real_runs --json

The code under test is whatever `forensics` the environment imports (PYTHONPATH): each run is analysed in its own
subprocess, `python -c "from forensics.cli import main; ..." analyze RUN --json --db <temp>`, so this script
knows nothing of the engine's internals. Label readers are pluggable (`READERS`): the generated corpus's
per-run labels.json, and shared/real_runs' labels.json ({run: {"pathologies": [...]}}, "healthy" = none).

Matching (DECISIONS §8: every finding is a claim, whatever its severity):
- a finding of a labelled kind is *correct* when it matches a label of that kind: for the step-checked kinds
  (STEP_KINDS) its [step, step_end] overlaps the label's [step, step_end] widened by a tolerance of
  max(10 steps, 5 % of the run's steps); other kinds, and labels or findings without a step, match on the kind;
- a finding of a kind in the run's `allowed` list is neither right nor wrong (not counted);
- every other finding is a false positive (FP);
- a label matched by at least one finding is a true positive (TP), else a false negative (FN).
Per kind: precision = correct findings / (correct findings + FP); recall = TP / labels. Overall: the same sums
(micro).
Printed beside it, the count of issue 24's table and ../shared/tools/score.py ("claims"): each kind found in a run
is one claim, true when the run is labelled with it (nan_loss and masked_nonfinite count for each other), false
otherwise, allowed or not; no step check. `--real` may be given more than once (both shared sets in one call). Healthy runs (no labelled kind): false findings per run and the critical ones. NaN onset: a nan_loss
finding whose step equals the label's first non-finite logged step.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

STEP_KINDS = {"nan_loss", "loss_spike", "divergence", "exploding_gradients", "resumed_run", "overfitting",
              "plateau", "masked_nonfinite", "bad_batch", "grokking"}


@dataclass
class Label:
    kind: str
    step: int | None = None
    step_end: int | None = None


@dataclass
class Case:
    """One labelled run: where it is, what it shows, what else is defensible."""

    name: str
    path: Path
    labels: list[Label]
    allowed: set[str] = field(default_factory=set)
    nan_onset: int | None = None
    steps: int | None = None     # the run's length, for the step tolerance

    @property
    def healthy(self) -> bool:
        return not self.labels


def corpus_cases(root: Path, split: str) -> list[Case]:
    """The generated corpus: ROOT/<split>/<run>/labels.json (corpus/README.md)."""
    out = []
    for lab_path in sorted(root.glob("*/*/labels.json")):
        lab = json.loads(lab_path.read_text())
        if split not in ("all", lab["split"]):
            continue
        out.append(Case(lab["name"], lab_path.parent, [Label(k["kind"], k["step"], k["step_end"]) for k in lab["kinds"]],
                        set(lab["allowed"]), lab["nan_onset"], lab["steps"]))
    return out


def real_cases(root: Path, labels_file: Path) -> list[Case]:
    """shared/real_runs: {run: {"pathologies": [...], ...}}; "healthy" means none; no steps (run-level match)."""
    labels = json.loads(labels_file.read_text())
    out = []
    for name, lab in sorted(labels.items()):
        kinds = [k for k in lab.get("pathologies", []) if k != "healthy"]
        out.append(Case(name, root / name, [Label(k) for k in kinds], set(lab.get("allowed", []))))
    return out


READERS = {"corpus": corpus_cases, "real": real_cases}


def analyze(case: Case, timeout: float = 600.0) -> dict:
    """Run the engine under test on one run in a subprocess; {"findings": [...]} or {"error": "..."}."""
    with tempfile.TemporaryDirectory(prefix="eval_corpus_") as tmp:
        cmd = [sys.executable, "-c", "import sys; from forensics.cli import main; sys.exit(main(sys.argv[1:]))",
               "analyze", str(case.path), "--json", "--db", str(Path(tmp) / "f.duckdb")]
        t = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=os.environ.copy())
        dt = time.perf_counter() - t
    if p.returncode not in (0, 1):
        return {"error": (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1], "seconds": dt}
    doc = json.loads(p.stdout)
    reports = doc["runs"] if "runs" in doc else [doc]
    findings = [f for r in reports for f in r.get("findings", [])]
    return {"findings": findings, "seconds": dt}


def _overlap(f: dict, lab: Label, tol: float) -> bool:
    if lab.kind not in STEP_KINDS or lab.step is None or f.get("step") is None:
        return True
    a, b = f["step"], f.get("step_end") if f.get("step_end") is not None else f["step"]
    lo, hi = lab.step - tol, (lab.step_end if lab.step_end is not None else lab.step) + tol
    return a <= hi and b >= lo


def score_case(case: Case, result: dict) -> dict:
    """Classify one run's findings and labels (the module docstring's rule)."""
    tol = max(10.0, 0.05 * (case.steps or 0))
    findings = result.get("findings", [])
    matched = [False] * len(case.labels)
    correct, fp, ignored = [], [], []
    for f in findings:
        hits = [i for i, lab in enumerate(case.labels) if lab.kind == f["kind"] and _overlap(f, lab, tol)]
        if hits:
            for i in hits:
                matched[i] = True
            correct.append(f)
        elif f["kind"] in case.allowed:
            ignored.append(f)
        else:
            fp.append(f)
    nan = None
    if case.nan_onset is not None:
        steps = [f.get("step") for f in findings if f["kind"] == "nan_loss"]
        nan = {"label": case.nan_onset, "found": steps, "exact": case.nan_onset in steps}
    return {"run": case.name, "healthy": case.healthy, "error": result.get("error"),
            "tp": [lab.kind for lab, m in zip(case.labels, matched) if m],
            "fn": [lab.kind for lab, m in zip(case.labels, matched) if not m],
            "correct": [f["kind"] for f in correct],
            "fp": [{"kind": f["kind"], "severity": f.get("severity"), "step": f.get("step"),
                    "summary": f.get("summary", "")[:200]} for f in fp],
            "allowed_found": [f["kind"] for f in ignored], "nan": nan, "seconds": result.get("seconds")}


def summarise(scored: list[dict]) -> dict:
    kinds: dict[str, dict] = {}

    def k(name):
        return kinds.setdefault(name, {"examples": 0, "tp": 0, "fn": 0, "correct": 0, "fp": 0})
    for s in scored:
        for x in s["tp"]:
            k(x)["examples"] += 1
            k(x)["tp"] += 1
        for x in s["fn"]:
            k(x)["examples"] += 1
            k(x)["fn"] += 1
        for x in s["correct"]:
            k(x)["correct"] += 1
        for f in s["fp"]:
            k(f["kind"])["fp"] += 1
    for v in kinds.values():
        v["precision"] = v["correct"] / (v["correct"] + v["fp"]) if v["correct"] + v["fp"] else None
        v["recall"] = v["tp"] / v["examples"] if v["examples"] else None
    tot = {x: sum(v[x] for v in kinds.values()) for x in ("examples", "tp", "fn", "correct", "fp")}
    healthy = [s for s in scored if s["healthy"]]
    nan = [s["nan"] for s in scored if s["nan"]]
    return {
        "runs": len(scored), "errors": [{"run": s["run"], "error": s["error"]} for s in scored if s["error"]],
        "kinds": dict(sorted(kinds.items())),
        "overall": {**tot, "precision": tot["correct"] / (tot["correct"] + tot["fp"]) if tot["correct"] + tot["fp"] else None,
                    "recall": tot["tp"] / tot["examples"] if tot["examples"] else None},
        "healthy_runs": len(healthy),
        "false_findings_per_healthy_run": (sum(len(s["fp"]) for s in healthy) / len(healthy)) if healthy else None,
        "healthy_runs_with_a_false_finding": sum(1 for s in healthy if s["fp"]),
        "critical_on_healthy": [{"run": s["run"], **f} for s in healthy for f in s["fp"] if f["severity"] == "critical"],
        "nan_onset_exact": [sum(1 for n in nan if n["exact"]), len(nan)],
    }


def evaluate(cases: list[Case], jobs: int, progress: bool) -> tuple[dict, list[dict]]:
    scored = []

    def one(c):
        return score_case(c, analyze(c))
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        for i, s in enumerate(pool.map(one, cases), 1):
            scored.append(s)
            if progress:
                bad = f" FP {','.join(f['kind'] for f in s['fp'])}" if s["fp"] else ""
                miss = f" FN {','.join(s['fn'])}" if s["fn"] else ""
                err = f" ERROR {s['error']}" if s["error"] else ""
                print(f"[{i}/{len(cases)}] {s['run']} ({s['seconds']:.1f} s){miss}{bad}{err}", file=sys.stderr)
    return summarise(scored), scored


# kinds that are the same observation seen from two sides (as ../shared/tools/score.py counts them)
EQUIVALENT = {"nan_loss": {"nan_loss", "masked_nonfinite"}, "masked_nonfinite": {"nan_loss", "masked_nonfinite"}}


def claims(scored: list[dict]) -> dict:
    """Issue 24's count over scored runs: per kind, labels found (tp), labels missed (fn), kinds found in a run
    that the run is not labelled with nor an equivalent of a label (fp, allowed ones included)."""
    tp: dict[str, int] = {}
    fp: dict[str, int] = {}
    fn: dict[str, int] = {}
    for s in scored:
        want = set(s["tp"]) | set(s["fn"])
        got = set(s["correct"]) | {f["kind"] for f in s["fp"]} | set(s["allowed_found"])
        for k in want:
            d = tp if got & EQUIVALENT.get(k, {k}) else fn
            d[k] = d.get(k, 0) + 1
        for k in got - want:
            if not any(k in EQUIVALENT.get(w, {w}) for w in want):
                fp[k] = fp.get(k, 0) + 1
    T, F, N = sum(tp.values()), sum(fp.values()), sum(fn.values())
    kinds = {k: {"tp": tp.get(k, 0), "fp": fp.get(k, 0), "fn": fn.get(k, 0)} for k in sorted(set(tp) | set(fp) | set(fn))}
    return {"kinds": kinds, "tp": T, "fp": F, "fn": N, "recall": T / (T + N) if T + N else None,
            "precision": T / (T + F) if T + F else None}


def claims_table(c: dict) -> str:
    lines = ["", "As issue 24's table counts (claims: a kind found is true when labelled, allowed or not):", "",
             "| kind | TP | FP | FN | recall | precision |", "|---|---|---|---|---|---|"]
    for kind, v in c["kinds"].items():
        r = v["tp"] / (v["tp"] + v["fn"]) if v["tp"] + v["fn"] else None
        p = v["tp"] / (v["tp"] + v["fp"]) if v["tp"] + v["fp"] else None
        lines.append(f"| {kind} | {v['tp']} | {v['fp']} | {v['fn']} | {_f(r)} | {_f(p)} |")
    lines.append(f"| **overall** | {c['tp']} | {c['fp']} | {c['fn']} | {_f(c['recall'])} | {_f(c['precision'])} |")
    return "\n".join(lines)


def _f(x) -> str:
    return "  -  " if x is None else f"{x:.2f}"


def table(title: str, summ: dict) -> str:
    lines = [f"## {title}: {summ['runs']} runs", "",
             "| kind | examples | TP | FN | FP | precision | recall |", "|---|---|---|---|---|---|---|"]
    for kind, v in summ["kinds"].items():
        lines.append(f"| {kind} | {v['examples']} | {v['tp']} | {v['fn']} | {v['fp']} | {_f(v['precision'])} | {_f(v['recall'])} |")
    o = summ["overall"]
    lines.append(f"| **overall (micro)** | {o['examples']} | {o['tp']} | {o['fn']} | {o['fp']} | {_f(o['precision'])} | {_f(o['recall'])} |")
    lines += ["", f"- healthy runs: {summ['healthy_runs']}; false findings per healthy run: "
                  f"{_f(summ['false_findings_per_healthy_run'])}; healthy runs with a false finding: "
                  f"{summ['healthy_runs_with_a_false_finding']}",
              f"- critical findings on healthy runs: {len(summ['critical_on_healthy'])}"
              + "".join(f"\n  - {c['run']}: {c['kind']} at {c['step']}" for c in summ["critical_on_healthy"]),
              f"- NaN onset exact: {summ['nan_onset_exact'][0]}/{summ['nan_onset_exact'][1]}"
              if summ["nan_onset_exact"][1] else "- NaN onset exact: no labelled onset"]
    if summ["errors"]:
        lines.append(f"- analyze failed on {len(summ['errors'])} run(s): " +
                     "; ".join(f"{e['run']}: {e['error']}" for e in summ["errors"]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="example:\n  python benchmarks/eval_corpus.py --corpus /work/corpus_data --split tune --jobs 2")
    p.add_argument("--corpus", type=Path, help="a generated corpus (python -m corpus.generate --out DIR)")
    p.add_argument("--split", choices=("tune", "holdout", "calib", "holdout2", "holdout3", "holdout4", "holdout5", "holdout6", "holdout7", "holdout8", "holdout9", "all"), default="tune")
    p.add_argument("--real", type=Path, action="append", default=[],
                   help="a folder of real runs with a labels.json (repeatable)")
    p.add_argument("--labels", type=Path, help="the real runs' labels.json (default: REAL/labels.json; one --real only)")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--json", action="store_true", help="print one JSON object (summaries and per-run details)")
    p.add_argument("--progress", action="store_true", help="progress on stderr even when it is not a terminal")
    a = p.parse_args(argv)
    if not a.corpus and not a.real:
        print("give --corpus DIR and/or --real DIR", file=sys.stderr)
        return 2
    parts = []
    if a.corpus:
        if not a.corpus.is_dir():
            print(f"no corpus folder {a.corpus}", file=sys.stderr)
            return 2
        parts.append((f"corpus {a.corpus} ({a.split})", READERS["corpus"](a.corpus, a.split)))
    if a.labels and len(a.real) > 1:
        print("--labels goes with one --real; each folder of several keeps its own labels.json", file=sys.stderr)
        return 2
    for real in a.real:
        lf = a.labels or real / "labels.json"
        if not lf.is_file():
            print(f"no labels file {lf}", file=sys.stderr)
            return 2
        parts.append((f"real runs {real}", READERS["real"](real, lf)))
    progress = a.progress or sys.stderr.isatty()
    out = {}
    for title, cases in parts:
        if not cases:
            print(f"{title}: no labelled runs", file=sys.stderr)
            return 2
        summ, scored = evaluate(cases, a.jobs, progress)
        out[title] = {"summary": summ, "claims": claims(scored), "runs": scored}
    if a.json:
        print(json.dumps(out, indent=1))
    else:
        print("\n\n".join(table(t, v["summary"]) + "\n" + claims_table(v["claims"]) for t, v in out.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
