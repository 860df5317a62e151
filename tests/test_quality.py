"""The engine scored against the sample_runs gallery's ground truth: per-kind precision and recall, exact NaN onsets,
spikes within one logging interval, overfitting crossover within 5% of the run, no critical finding on a healthy run.

Prints the per-kind table (run pytest with -s to see it). The gallery is a tuning aid: the thresholds must hold on
runs the engine has never seen (DECISIONS.md §8), so failures here mean a detector is wrong in general.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from forensics.judge.engine import analyze_run
from forensics.judge.findings import Analysis
from tests.paths import REPO
from tests.runwriters import load_run

pytestmark = pytest.mark.slow  # analyses all 33 gallery runs: about a minute and a half here

GALLERY = REPO / "sample_runs"
TRUTH = GALLERY / "ground_truth.json"


def _gallery() -> dict:
    return json.loads(TRUTH.read_text())["runs"]


def _run_dir(name: str) -> Path:
    return GALLERY / "runs" / name


def _analyses(tmp_path_factory) -> dict[str, tuple[dict, Analysis, float, float]]:
    tmp = tmp_path_factory.mktemp("quality")
    out = {}
    for name, truth in _gallery().items():
        run = load_run(_run_dir(name), tmp / f"{name}.duckdb")  # one file each: load_run keeps a reader open
        result = analyze_run(run)
        steps = run.series("loss")["step"].to_numpy() if run.has("loss") else np.array([0, 1])
        length = float(steps.max() - steps.min()) if steps.size else 1.0
        cadence = float(np.median(np.diff(np.unique(steps)))) if np.unique(steps).size > 1 else 1.0
        out[name] = (truth, result, length, cadence)
    return out


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    return _analyses(tmp_path_factory)


def _matches(label: dict, finding, length: float, cadence: float) -> bool:
    """A finding matches a label of its kind when its step range meets the label's, within 5% of the run's length
    (at least two logging intervals); run-wide labels or findings (no step) match any of the kind."""
    if label.get("step") is None or finding.step is None:
        return True
    tol = max(0.05 * length, 2 * cadence)
    lo, hi = label["step"], label.get("step_end") if label.get("step_end") is not None else label["step"]
    f_lo, f_hi = finding.step, finding.step_end if finding.step_end is not None else finding.step
    return f_lo <= hi + tol and f_hi >= lo - tol


# A finding of a kind that a labelled kind already contains is part of that label, not an extra claim: the gallery's
# generator records underfitting's training-loss stall as "part of underfitting (train and val together), not a
# separate plateau" (sample_runs/gen/runs_curves.py), and the corpus labeller allows plateau beside underfitting. A
# vanishing gradient's run is described by the gallery as "a loss that barely moves": its loss pinned at chance
# from the first record (flat_loss) is that label's symptom.
PART_OF = {"underfitting": {"plateau"}, "vanishing_gradients": {"flat_loss"}}


def test_precision_and_recall_per_kind(scored):
    tp_labels, n_labels, tp_findings, n_findings = (defaultdict(int) for _ in range(4))
    for name, (truth, result, length, cadence) in scored.items():
        labels = truth.get("kinds", [])
        for lab in labels:
            n_labels[lab["kind"]] += 1
            if any(f.kind == lab["kind"] and _matches(lab, f, length, cadence) for f in result.findings):
                tp_labels[lab["kind"]] += 1
            else:
                print(f"MISSED  {name}: {lab['kind']} at {lab.get('step')}")
        for f in result.findings:
            within = [lab["kind"] for lab in labels if f.kind in PART_OF.get(lab["kind"], ()) and _matches(lab, f, length, cadence)]
            if within:
                print(f"PART OF {name}: {f.kind} at {f.step} is part of the labelled {within[0]}")
                continue
            n_findings[f.kind] += 1
            if any(lab["kind"] == f.kind and _matches(lab, f, length, cadence) for lab in labels):
                tp_findings[f.kind] += 1
            else:
                print(f"EXTRA   {name}: {f.kind} [{f.severity}] at {f.step}: {f.summary}")
    print(f"\n{'kind':<24}{'recall':>14}{'precision':>14}")
    bad = []
    for kind in sorted(set(n_labels) | set(n_findings)):
        r = tp_labels[kind] / n_labels[kind] if n_labels[kind] else None
        p = tp_findings[kind] / n_findings[kind] if n_findings[kind] else None
        print(f"{kind:<24}{f'{tp_labels[kind]}/{n_labels[kind]}':>10} {r if r is None else round(r, 2)!s:>4}"
              f"{f'{tp_findings[kind]}/{n_findings[kind]}':>10} {p if p is None else round(p, 2)!s:>4}")
        from forensics.judge.detectors import ALL
        if kind in {d.kind for d in ALL} and ((r is not None and r < 0.9) or (p is not None and p < 0.9)):
            bad.append(kind)
    assert not bad, f"kinds under 0.9 precision or recall: {bad}"


def test_nan_onset_is_exact(scored):
    for name, (truth, result, _, _) in scored.items():
        if truth.get("nan_onset") is None:
            continue
        onsets = [f.step for f in result.findings if f.kind in ("nan_loss", "masked_nonfinite")]
        assert onsets and onsets[0] == truth["nan_onset"], f"{name}: NaN onset {onsets[:1]} vs {truth['nan_onset']}"


def test_spikes_within_one_logging_interval(scored):
    for name, (truth, result, _, cadence) in scored.items():
        for spike in truth.get("spikes", []):
            near = [s for s in result.spikes if abs(s.step - spike["step"]) <= cadence
                    and (spike.get("series") is None or s.series == spike["series"])]
            assert near, f"{name}: labelled spike {spike} not found; found {[(s.series, s.step) for s in result.spikes]}"


def test_overfitting_crossover_within_five_percent(scored):
    for name, (truth, result, length, _) in scored.items():
        for lab in truth.get("kinds", []):
            if lab["kind"] == "overfitting" and lab.get("step") is not None:
                got = [f.step for f in result.findings if f.kind == "overfitting"]
                assert got and abs(got[0] - lab["step"]) <= 0.05 * length, f"{name}: crossover {got} vs {lab['step']}"


def test_no_critical_finding_on_a_healthy_run(scored):
    for name, (truth, result, _, _) in scored.items():
        if truth.get("healthy"):
            assert not [f for f in result.findings if f.severity == "critical"], name
