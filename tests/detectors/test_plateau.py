"""plateau on real TensorBoard event files."""


import numpy as np

from forensics.detectors import Plateau
from tests.runwriters import curve, load_run, write_tb



def test_fires_where_the_loss_stalls_high(tmp_path):
    steps, loss = curve(n=300, start=2.3, floor=1.5, tau=200)  # falls fast, then sits at 65% of the start
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    [f] = Plateau().check(run)
    assert f.evidence["fraction_of_initial"] > 0.6 and f.step < 1500


def test_converging_run_is_silent(tmp_path):
    run = load_run(write_tb(tmp_path / "r", {"loss": curve(floor=0.05, tau=1200)}), tmp_path / "f.duckdb")
    assert list(Plateau().check(run)) == []


def test_stall_after_the_lr_collapses_is_a_plateau_at_any_level(tmp_path):
    """Issue 12 class 8: the LR dropped ×1e-4 at 8% of the run; the loss stops where it was, at 30% of the start."""
    steps, loss = curve(n=300, start=2.3, floor=0.05, tau=150)
    stop = 24  # 8% of the points
    loss[stop:] = loss[stop] * (1 + np.random.default_rng(2).normal(0, 0.01, loss.size - stop))
    lr = np.where(np.arange(steps.size) < stop, 1e-3, 1e-7)
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss), "lr": (steps, lr)}), tmp_path / "f.duckdb")
    [f] = Plateau().check(run)
    assert f.evidence["lr_fall_at_start"] >= 1000 and f.evidence["fraction_of_initial"] < 0.5


def test_cosine_to_zero_with_a_converged_loss_is_silent(tmp_path):
    steps, loss = curve(n=300, floor=0.05, tau=300)
    lr = 1e-3 * 0.5 * (1 + np.cos(np.pi * np.arange(steps.size) / (steps.size - 1)))
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss), "lr": (steps, lr)}), tmp_path / "f.duckdb")
    assert list(Plateau().check(run)) == []


def test_a_noisy_plateau_is_found_from_where_it_starts(tmp_path):
    """An LR that dropped ×1e-4 at 9% of 800 steps: the loss sits at 75% of its start with heavy minibatch noise
    (Student-t, 3 dof). A rolling median of such noise strays out of the band now and then, and its shrinking
    window does at the very end: brief excursions must not move the plateau's start to the last one."""
    rng = np.random.default_rng(7)
    n, stop = 800, 72
    steps = np.arange(1, n + 1)
    level = np.where(steps < stop, 2.3 - 0.58 * steps / stop, 1.72)
    loss = level * (1 + 0.06 * rng.standard_t(3, n))
    lr = np.where(steps < stop, 1e-3, 1e-7)
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss), "lr": (steps, lr)}), tmp_path / "f.duckdb")
    [f] = Plateau().check(run)
    assert f.step <= 2 * stop and 0.7 < f.evidence["fraction_of_initial"] < 0.8
    strict = Plateau(max_outside=0.0, far=1.0)  # every excursion ends the band: the plateau starts too late or never
    assert [g.step for g in strict.check(run)] != [f.step]


def test_a_fall_within_the_noise_is_not_a_plateau(tmp_path):
    """The loss an exploding GRU logged every 10 steps (corpus holdout4, exploding_rnn_gru_4_r6): it swings
    0.06-8.6 between points; the median of its last points sits 20% below that of its first three, well inside
    the point-to-point noise (robust sigma ~0.6). Nothing fell, so nothing stalled after falling."""
    loss = np.array([0.6821, 0.8954, 1.316, 0.9817, 0.9987, 2.05, 1.378, 0.6322, 0.06198, 0.3458, 1.166, 2.325, 8.649,
                     0.8048, 1.198, 1.834, 2.093, 0.9026, 0.6949, 1.323, 0.7348, 0.6024, 0.8208, 4.814, 0.9588, 0.7219,
                     0.7272, 0.4428, 1.605, 0.6961])
    run = load_run(write_tb(tmp_path / "r", {"loss": (np.arange(10, 310, 10), loss)}), tmp_path / "f.duckdb")
    assert list(Plateau().check(run)) == []
    assert list(Plateau(min_drop_sigmas=0.0).check(run))  # without the noise guard the 20% "fall" reads as a plateau


def test_a_short_per_epoch_log_that_stalls_high_is_a_plateau(tmp_path):
    """Issue 12 class 4: 10 per-epoch points converging geometrically to 84% of the median of the first three
    (shared/real_runs/mlflow_swahili_stt's CTC loss has this shape: 332.7 -> 239.0 -> 234.8). Under 20 points only
    a stall at 3/4 of the initial loss or more is called a plateau; a short log that settles lower is convergence,
    and the detector then counts as not run ("too short") for the verdict, as it does under 10 points."""
    epochs = np.arange(10)
    high = 235 + 100 * np.exp(-epochs / 1.2)
    run = load_run(write_tb(tmp_path / "a", {"loss": (epochs, high)}), tmp_path / "a.duckdb")
    [f] = Plateau().check(run)
    assert f.evidence["points"] == 10 and f.evidence["fraction_of_initial"] > 0.75 and f.step <= 5
    assert Plateau().unavailable(run) is None
    assert list(Plateau(short_min_level=0.9).check(run)) == []  # the level rule is what decides
    low = 100 + 235 * np.exp(-epochs / 1.2)  # the same fall, settling at 43% of the first three's median
    run = load_run(write_tb(tmp_path / "b", {"loss": (epochs, low)}), tmp_path / "b.duckdb")
    assert list(Plateau().check(run)) == [] and "at least 20" in Plateau().unavailable(run)
    run = load_run(write_tb(tmp_path / "c", {"loss": (epochs[:9], high[:9])}), tmp_path / "c.duckdb")
    assert list(Plateau().check(run)) == [] and "at least 20" in Plateau().unavailable(run)


def test_a_training_stall_while_validation_keeps_improving_is_no_plateau(tmp_path):
    """Issue 24 class 5: with heavy dropout the training loss stalls at 1.6 from step 600 while validation keeps
    falling 1.5 -> 1.2 over the same steps: the model is still learning. The same stall beside a validation loss
    that stalls too is a plateau."""
    rng = np.random.default_rng(4)
    steps = np.arange(0, 3000, 10)
    train = (1.6 + 0.8 * np.exp(-steps / 150)) * (1 + rng.normal(0, 0.01, steps.size))
    vs = np.arange(100, 3001, 100)
    improving = 1.5 - 0.3 * (vs - 100) / 2900 + rng.normal(0, 0.005, vs.size)
    stalled = 1.5 + rng.normal(0, 0.005, vs.size)
    run = load_run(write_tb(tmp_path / "a", {"train/loss": (steps, train), "val/loss": (vs, stalled)}), tmp_path / "a.duckdb")
    [f] = Plateau().check(run)
    assert f.step < 1000
    run = load_run(write_tb(tmp_path / "b", {"train/loss": (steps, train), "val/loss": (vs, improving)}), tmp_path / "b.duckdb")
    assert Plateau()._stall(run) is not None  # the training curve alone is a plateau ...
    assert list(Plateau().check(run)) == []  # ... validation says the model still learns
