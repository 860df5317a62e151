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


def _lightning_epochs(root, train, val):
    """Lightning's CSVLogger as `self.log(..., on_epoch=True)` reaches it: the epoch's training loss and its
    validation loss at the step that ends each epoch."""
    import pytest

    pytest.importorskip("lightning", reason="the test extra installs lightning")
    from lightning.pytorch.loggers import CSVLogger

    logger = CSVLogger(str(root))
    for e, (t, v) in enumerate(zip(train, val)):
        logger.log_metrics({"train_loss": float(t), "val_loss": float(v), "epoch": e}, step=e * 100 + 99)
    logger.save()
    logger.finalize("success")
    return root


def test_six_epochs_whose_validation_stays_far_above_a_collapsing_training_loss_are_a_mismatch(tmp_path):
    """Training falls 97% in six epochs while validation, 17× above training at the first epoch already, swings
    ±30% around 6.5 and never comes near where training started: an expert names it from these six rows. The twin
    whose validation starts near training and rises after it is overfitting's (and too short here)."""
    train = [0.409, 0.030, 0.0168, 0.0153, 0.0151, 0.0122]
    far = [6.84, 8.60, 5.13, 6.72, 5.99, 6.26]
    [f] = DistributionMismatch().check(load_run(_lightning_epochs(tmp_path / "a", train, far), tmp_path / "a.duckdb"))
    assert f.evidence["rule"] == "gap" and f.evidence["min_ratio"] >= 15 and f.evidence["train_drop"] > 0.9
    near = [0.42, 0.45, 0.47, 0.50, 0.52, 0.55]
    run = load_run(_lightning_epochs(tmp_path / "b", train, near), tmp_path / "b.duckdb")
    assert DistributionMismatch().unavailable(run) is not None and list(DistributionMismatch().check(run)) == []


def test_a_validation_loss_exactly_constant_while_training_falls_is_a_mismatch(tmp_path):
    """A triplet loss: validation exactly 0.2 (the margin) at each of 7 evaluations while training falls 8%: the
    validation loss does not depend on the model. The same validation moving in its third digit is no evidence."""
    steps = np.arange(1, 9)
    train = np.array([0.1927, 0.1902, 0.1872, 0.1844, 0.182, 0.1794, 0.1777, 0.1775])
    vs = steps[1:]
    run = load_run(write_tb(tmp_path / "a", {"train/loss": (steps, train), "val/loss": (vs, np.full(7, 0.2))}),
                   tmp_path / "a.duckdb")
    [f] = DistributionMismatch().check(run)
    assert f.evidence["rule"] == "constant" and "exactly 0.2 at all 7 evaluations" in f.summary
    moving = 0.2 + 0.001 * np.array([0, 1, -1, 2, 0, 1, -2])
    run = load_run(write_tb(tmp_path / "b", {"train/loss": (steps, train), "val/loss": (vs, moving)}), tmp_path / "b.duckdb")
    assert list(DistributionMismatch().check(run)) == []
