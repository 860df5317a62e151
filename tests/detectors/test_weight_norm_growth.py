"""weight_norm_growth on logged per-layer weight norms (real TensorBoard event files)."""

import numpy as np

from forensics.detectors import WeightCollapse, WeightNormGrowth
from tests.runwriters import curve, load_run, write_tb


STEPS = np.arange(25, 1501, 25)


def _norms(head, fc1, seed=0):
    rng = np.random.default_rng(seed)
    return {"train/loss": curve(n=60, every=25),
            "weight_norm/head": (STEPS, head * (1 + rng.normal(0, 0.003, STEPS.size))),
            "weight_norm/body.fc1": (STEPS, fc1 * (1 + rng.normal(0, 0.003, STEPS.size)))}


def test_steady_growth_fires_growth_only(tmp_path):
    head = 1.9 + 1.3 * (STEPS - 25) / 1475  # linear: ×1.7 and still rising at the end
    run = load_run(write_tb(tmp_path / "r", _norms(head, np.full(STEPS.size, 2.5))), tmp_path / "f.duckdb")
    [f] = WeightNormGrowth().check(run)
    assert f.kind == "weight_norm_growth" and f.step == 25 and f.series == "weight_norm/head"
    assert 1.6 < f.evidence["factor"] < 1.8 and f.evidence["n_growing"] == 1
    assert list(WeightCollapse().check(run)) == []


def test_growth_that_levels_off_is_silent(tmp_path):
    head = 1.9 + 1.3 * (1 - np.exp(-(STEPS - 25) / 150))  # moves away from init, then settles: healthy
    run = load_run(write_tb(tmp_path / "r", _norms(head, np.full(STEPS.size, 2.5))), tmp_path / "f.duckdb")
    assert list(WeightNormGrowth().check(run)) == []
