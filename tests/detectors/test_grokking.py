"""grokking on real TensorBoard event files: train accuracy saturates long before validation jumps."""

import numpy as np

from forensics.judge.detectors import Grokking
from tests.runwriters import load_run, write_tb



def _curves(val_jump_at: float | None, seed: int = 0):
    rng = np.random.default_rng(seed)
    steps = np.arange(0, 10000, 50)
    train = 1 - 0.97 * np.exp(-steps / 250) + rng.normal(0, 0.005, steps.size)
    if val_jump_at is None:  # healthy: validation follows training, a little lower
        val = 0.9 * (1 - 0.97 * np.exp(-steps / 300))
    else:
        val = 0.03 + 0.92 / (1 + np.exp(-(steps - val_jump_at) / 150))
    return steps, np.clip(train, 0, 1), np.clip(val + rng.normal(0, 0.01, steps.size), 0, 1)


def test_fires_where_validation_jumps_long_after_training_saturated(tmp_path):
    steps, train, val = _curves(6500)
    run = load_run(write_tb(tmp_path / "r", {"train/acc": (steps, train), "val/acc": (steps, val)}),
                   tmp_path / "f.duckdb")
    [f] = Grokking().check(run)
    assert f.evidence["metric"] == "accuracy" and f.evidence["train_saturation_step"] <= 1000
    assert 5500 <= f.step <= 6500 and f.step_end <= 7500 and f.evidence["val_gain"] > 0.8


def test_validation_that_follows_training_is_silent(tmp_path):
    steps, train, val = _curves(None)
    run = load_run(write_tb(tmp_path / "r", {"train/acc": (steps, train), "val/acc": (steps, val)}),
                   tmp_path / "f.duckdb")
    assert list(Grokking().check(run)) == []


def test_validation_that_never_improves_is_silent(tmp_path):
    steps, train, _ = _curves(None)
    val = 0.05 + np.random.default_rng(1).normal(0, 0.01, steps.size)
    run = load_run(write_tb(tmp_path / "r", {"train/acc": (steps, train), "val/acc": (steps, np.clip(val, 0, 1))}),
                   tmp_path / "f.duckdb")
    assert list(Grokking().check(run)) == []


def test_accuracy_logged_in_percent_gains_in_points_of_its_scale(tmp_path):
    """A validation accuracy printed in percent (a 36-image set: 91.67, 94.44, 97.22, 100.00) that creeps from 93
    to 100 after the training loss saturated gains 7 points, not 7: no grokking; the same run's jump from 3% to 95%
    still is one."""
    steps, train, _ = _curves(None)
    loss = np.maximum(0.6 * (1 - train), 0.0005)  # a cross-entropy that saturates in the first tenth
    creep = 93 + 7 / (1 + np.exp(-(steps - 6500) / 150))
    run = load_run(write_tb(tmp_path / "r", {"train/loss": (steps, loss), "val/accuracy": (steps, creep)}),
                   tmp_path / "f.duckdb")
    assert list(Grokking().check(run)) == []
    _, _, jump = _curves(6500)
    run = load_run(write_tb(tmp_path / "j", {"train/loss": (steps, loss), "val/accuracy": (steps, 100 * jump)}),
                   tmp_path / "g.duckdb")
    [f] = Grokking().check(run)
    assert f.evidence["metric"] == "accuracy" and 0.8 < f.evidence["val_gain"] <= 1.0
