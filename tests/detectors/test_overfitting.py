"""overfitting on real TensorBoard event files."""

import numpy as np

from forensics.detectors import Overfitting
from tests.runwriters import curve, load_run, write_tb



def _val(rise: bool, seed=0):
    rng = np.random.default_rng(seed)
    steps = np.arange(0, 3000, 100)
    v = 0.6 + 1.7 * np.exp(-steps / 500) + (0.0004 * np.maximum(0, steps - 1200) if rise else 0)
    return steps, v + rng.normal(0, 0.01, steps.size)


def test_fires_at_the_validation_minimum(tmp_path):
    run = load_run(write_tb(tmp_path / "r", {"train/loss": curve(), "val/loss": _val(True)}), tmp_path / "f.duckdb")
    [f] = Overfitting().check(run)
    assert abs(f.step - 1300) <= 0.05 * 3000 and f.evidence["val_rise"] > 0.3


def test_no_rise_is_silent(tmp_path):
    run = load_run(write_tb(tmp_path / "r", {"train/loss": curve(), "val/loss": _val(False)}), tmp_path / "f.duckdb")
    assert list(Overfitting().check(run)) == []


def test_a_training_loss_that_rises_too_is_divergence_not_overfitting(tmp_path):
    """The catalog's overfitting needs a training loss that keeps falling. Here validation goes from ~0.7 to ~40
    while training, after its minimum, climbs ×13: the run diverges (the absolute rises, +13 against +39, would
    pass the half-the-validation-rise rule alone)."""
    steps = np.arange(0, 3000, 10)
    train = 0.6 + 1.7 * np.exp(-steps / 300) + np.where(steps > 1500, (steps - 1500) / 1500 * 13, 0)
    vs, v = steps[::10], 0.6 + 1.7 * np.exp(-steps[::10] / 300) + np.where(steps[::10] > 1500,
                                                                           (steps[::10] - 1500) / 1500 * 39, 0)
    run = load_run(write_tb(tmp_path / "r", {"train/loss": (steps, train), "val/loss": (vs, v)}), tmp_path / "f.duckdb")
    assert list(Overfitting(max_train_rise=float("inf")).check(run))  # the relative rule is what decides
    assert list(Overfitting().check(run)) == []
