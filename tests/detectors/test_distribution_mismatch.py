"""distribution_mismatch on real TensorBoard event files (train/ and val/ writers, as Lightning and Keras lay them out)."""

import numpy as np

from forensics.judge.detectors import DistributionMismatch
from tests.runwriters import curve, load_run, write_tb



def _val(levels, every: int = 100, seed: int = 0, noise: float = 0.005):
    rng = np.random.default_rng(seed)
    steps = np.arange(len(levels)) * every
    return steps, np.asarray(levels, dtype=float) * (1 + rng.normal(0, noise, len(levels)))


def test_fires_when_val_stays_at_its_first_level(tmp_path):
    steps, train = curve(n=300)  # 2.3 -> ~0.3 over steps 0-2990
    run = load_run(write_tb(tmp_path / "r", {"train/loss": (steps, train), "val/loss": _val([2.31] * 30)}),
                   tmp_path / "f.duckdb")
    [f] = DistributionMismatch().check(run)
    assert f.kind == "distribution_mismatch" and f.step == 0 and f.step_end == 2900
    assert f.evidence["train_drop"] > 0.7 and abs(f.evidence["val_drop"]) < 0.02


def test_val_falling_with_train_is_silent(tmp_path):
    steps, train = curve(n=300)
    val = 0.35 + 1.95 * np.exp(-np.arange(30) * 100 / 800)
    run = load_run(write_tb(tmp_path / "r", {"train/loss": (steps, train), "val/loss": _val(val)}), tmp_path / "f.duckdb")
    assert list(DistributionMismatch().check(run)) == []


def test_first_evaluation_after_the_fast_drop_is_silent(tmp_path):
    """Validation runs once per epoch; by the first evaluation training has already converged, so both are flat
    from there on. Comparing the whole train curve with the val curve would call that a mismatch."""
    steps, train = curve(n=1000, every=10, tau=300, floor=0.3)  # converged by step ~1500
    vs = np.arange(1, 11) * 1000  # evaluations at the end of each epoch of 1000 steps
    val = 0.32 + 0.01 * np.exp(-vs / 3000)
    run = load_run(write_tb(tmp_path / "r", {"train/loss": (steps, train), "val/loss": (vs, val)}), tmp_path / "f.duckdb")
    assert list(DistributionMismatch().check(run)) == []


def test_a_settled_validation_far_below_log_c_is_silent(tmp_path):
    """A 2-class run first logged after most of its learning (0.18, far below log 2 = 0.69) keeps training down
    to 0.01 while validation sits at 0.09 from its first evaluation on: it learnt, then settled. The first logged
    training point is no untrained level; log(C) from the config is. A validation loss at log 2 all along, beside
    the same training curve, is the mismatch."""
    steps, train = curve(n=250, every=10, start=0.18, floor=0.008, tau=600)
    config = {"num_classes": 2}
    settled = {"train/loss": (steps, train), "val/loss": _val([0.09] * 12, every=200)}
    run = load_run(write_tb(tmp_path / "a", settled, config=config), tmp_path / "a.duckdb")
    assert list(DistributionMismatch().check(run)) == []
    without_c = load_run(write_tb(tmp_path / "b", settled), tmp_path / "b.duckdb")
    assert list(DistributionMismatch().check(without_c))  # only the first training point to go by: it fires
    run = load_run(write_tb(tmp_path / "c", {"train/loss": (steps, train), "val/loss": _val([0.693] * 12, every=200)},
                            config=config), tmp_path / "c.duckdb")
    [f] = DistributionMismatch().check(run)
    assert f.evidence["untrained_level"] == np.log(2)
