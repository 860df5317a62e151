"""oscillation on real TensorBoard event files: structured swings fire, per-step noise of any size does not."""

import numpy as np
import pytest

from forensics.judge.detectors import Oscillation
from tests.runwriters import curve, load_run, write_tb



def _check(tmp_path, steps, loss):
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    return list(Oscillation().check(run))


def test_fires_on_swings_around_a_flat_level(tmp_path):
    rng = np.random.default_rng(0)
    steps = np.arange(300) * 10
    loss = 1.0 + 0.4 * np.sin(steps / 60.0) + rng.normal(0, 0.03, 300)
    [f] = _check(tmp_path, steps, loss)
    assert f.evidence["relative_amplitude"] > 0.2 and f.evidence["lag1_autocorr"] > 0.5


def test_fires_on_a_short_cycle_that_lag_one_misses(tmp_path):
    """SGD+momentum at the edge of stability cycles over a few steps: a 4-step cycle has lag-1 autocorrelation
    near 0 (as per-step noise does), its structure shows at lag 4 (regression: oscillation_sgd_high_lr)."""
    rng = np.random.default_rng(1)
    steps = np.arange(1, 801)
    loss = 1.0 * (1 + 0.35 * np.sin(2 * np.pi * steps / 4 + 0.3) + rng.normal(0, 0.15, steps.size))
    [f] = _check(tmp_path, steps, loss)
    assert abs(f.evidence["lag1_autocorr"]) < 0.3
    assert f.evidence["autocorr_lag"] in (4, 8) and f.evidence["autocorr"] > 0.5
    assert f.step >= 400 and f.evidence["relative_amplitude"] > 0.2


def test_noisy_healthy_run_is_silent(tmp_path):
    assert _check(tmp_path, *curve(noise=0.3)) == []


@pytest.mark.parametrize("seed", range(4))
def test_converged_loss_with_large_minibatch_noise_is_silent(tmp_path, seed):
    """A run that converged early and whose per-batch loss scatters by ±40% of its level, flat for the whole
    second half: large swings, no trend, sign-change rate 2/3, yet nothing repeats from batch to batch."""
    rng = np.random.default_rng(seed)
    steps = np.arange(1, 1001)
    loss = (0.3 + 1.3 * np.exp(-steps / 30.0)) * (1 + rng.normal(0, 0.4, steps.size)).clip(0.05)
    assert _check(tmp_path, steps, loss) == []


@pytest.mark.parametrize("seed", range(3))
def test_heavy_tailed_noise_on_a_slow_decay_is_silent(tmp_path, seed):
    rng = np.random.default_rng(seed)
    steps = np.arange(600) * 5
    loss = (0.5 + 2.0 * np.exp(-steps / 500.0)) * np.exp(0.25 * rng.standard_t(3, steps.size))
    assert _check(tmp_path, steps, loss) == []


def test_logging_window_means_of_noisy_batches_are_silent(tmp_path):
    """HF Trainer logs the mean loss of each logging window: means of independent batches stay independent."""
    rng = np.random.default_rng(7)
    batches = 1.2 * (1 + rng.normal(0, 0.8, (200, 10))).clip(0.01)
    assert _check(tmp_path, np.arange(1, 201) * 10, batches.mean(axis=1)) == []


def test_fires_on_a_loss_thrown_far_above_chance_that_swings_without_settling(tmp_path):
    """SGD at LR 1.2 on a tanh MLP (issue 12): the loss is thrown from 4 to ~8, five times log(5), and jumps
    ±40% from batch to batch for the rest of the run, as independent as noise (no autocorrelation)."""
    rng = np.random.default_rng(5)
    steps = np.arange(1, 81) * 10
    loss = np.minimum(4.0 + steps / 30, 8.5) * np.exp(rng.normal(0, 0.4, steps.size))
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}, config={"num_classes": 5}),
                   tmp_path / "f.duckdb")
    [f] = Oscillation().check(run)
    assert f.evidence["rule"] == "unsettled" and f.step >= 400
    assert f.evidence["level"] / f.evidence["reference"] > 3 and f.evidence["reference_source"] == "log(5)"
    assert f.evidence["progress"] == 0.0


@pytest.mark.parametrize("seed", range(3))
def test_noise_at_chance_level_is_silent(tmp_path, seed):
    """A model that learns nothing: the loss sits at log(5) with ±25% batch noise. Flat, not thrown around:
    its level is at its reference, not far above it."""
    rng = np.random.default_rng(seed)
    steps = np.arange(1, 401) * 2
    loss = np.log(5) * np.exp(rng.normal(0, 0.25, steps.size))
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}, config={"num_classes": 5}),
                   tmp_path / "f.duckdb")
    assert _check_run(run) == []


def _check_run(run):
    return list(Oscillation().check(run))


def test_a_loss_swinging_by_a_factor_around_the_level_it_started_at_is_oscillation(tmp_path):
    """Sixty points whose upper quartile is about twice the lower one, around a flat mean the loss started at:
    no autocorrelation (the structured rule is silent) and a level at its start (not 1.5× above it), yet an expert
    sees a loss bouncing instead of converging. The same spread around a curve that falls is learning, and silent."""
    rng = np.random.default_rng(0)
    steps = np.arange(1, 61) * 10
    swings = np.exp(rng.normal(0, 0.6, steps.size))
    run = load_run(write_tb(tmp_path / "a", {"loss": (steps, 1.2 * swings)}), tmp_path / "a.duckdb")
    [f] = Oscillation().check(run)
    assert f.evidence["rule"] == "unsettled" and "no lower than its start" in f.summary
    assert list(Oscillation(min_factor=2.5).check(run)) == []  # the factor is what decides
    falling = 1.2 * np.exp(-steps / 150.0) * np.exp(rng.normal(0, 0.1, steps.size)) + 0.05
    run = load_run(write_tb(tmp_path / "b", {"loss": (steps, falling)}), tmp_path / "b.duckdb")
    assert list(Oscillation().check(run)) == []


@pytest.mark.parametrize("seed", range(4))
def test_a_wide_single_batch_spread_around_a_falling_curve_is_silent(tmp_path, seed):
    """Single-batch losses spread ±45% around a mean that falls a quarter: the median of three first points
    cannot show the fall, the first tenth's median and a trend over every point do. A loss that learns."""
    rng = np.random.default_rng(100 + seed)
    steps = np.arange(1, 601) * 10
    mean = 2.3 - 0.6 * (1 - np.exp(-steps / 2000))
    assert _check(tmp_path, steps, mean * np.exp(rng.normal(0, 0.45, steps.size) - 0.45 ** 2 / 2)) == []


@pytest.mark.parametrize("seed", range(3))
def test_a_level_that_moved_up_after_a_calm_start_is_no_oscillation(tmp_path, seed):
    """A hundred single-batch losses: ten calm ones of a first objective, then the objective gains terms and the
    loss sits about twice as high, spread ±50% from batch to batch (batches from datasets of different levels) for
    the rest of the log. The level moved once and stayed: no LR throws it around a level far above its start."""
    rng = np.random.default_rng(seed)
    steps = np.arange(100) * 500
    loss = np.r_[0.04 * np.exp(rng.normal(0, 0.3, 10)), 0.09 * np.exp(rng.normal(0, 0.5, 90))]
    assert _check(tmp_path, steps, loss) == []
    assert list(Oscillation(min_above=1.5, around=10.0).check(load_run(write_tb(
        tmp_path / "b", {"loss": (steps, loss)}), tmp_path / "b.duckdb")))  # what the old gates called swinging


def test_losses_repeating_at_the_lag_of_one_epoch_are_batch_order_not_swings(tmp_path):
    """Four unshuffled batches per epoch logged to TensorBoard beside the epoch counter: their losses repeat every
    four records (±12%, autocorrelation ~1 at lag 4) while the model stands still. Without the epoch counter nothing
    says the lag is an epoch, and the swings count."""
    per_step = np.tile([289062912.0, 288432992.0, 254839312.0, 211432752.0], 37) - 16.0 * np.arange(148)
    steps = np.arange(148)
    run = load_run(write_tb(tmp_path / "a", {"train_loss": (steps, per_step), "epoch": (steps, steps // 4)}),
                   tmp_path / "a.duckdb")
    assert list(Oscillation().check(run)) == []
    run = load_run(write_tb(tmp_path / "b", {"train_loss": (steps, per_step)}), tmp_path / "b.duckdb")
    [f] = Oscillation().check(run)
    assert f.evidence["autocorr_lag"] == 4


@pytest.mark.parametrize("seed", range(3))
def test_a_validation_loss_that_bounces_beside_a_training_loss_that_does_not_swing_is_silent(tmp_path, seed):
    """A training loss that settles on a slow fall with every third record far above it (each epoch's validation
    loss read into the same series), and a validation loss jumping ×2 between evaluations: the validation is noisy
    (val_noise's), the training loss never swings below its trend and back, so nothing oscillates."""
    rng = np.random.default_rng(seed)
    steps = np.arange(600) * 5
    loss = 0.1 + 0.1 * np.exp(-steps / 300.0) + rng.normal(0, 0.002, steps.size)
    vsteps = steps[2::3]
    val = rng.uniform(0.15, 0.7, vsteps.size)
    loss[2::3] = val
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss), "val_loss": (vsteps, val)}), tmp_path / "f.duckdb")
    assert list(Oscillation().check(run)) == []


def test_heavy_tailed_single_batch_losses_beside_a_falling_validation_loss_are_no_swinging(tmp_path):
    """A regression that starts near its floor logs single-batch losses every 50 steps: a heavy-tailed spread (its
    upper quartile several times its lower) that never trends, while the validation loss, once an epoch, falls at
    every evaluation. The model is still learning: the spread is batch noise, not weights that do not settle. The
    same training losses beside no validation loss are the unsettled swings of a loss that never fell."""
    rng = np.random.default_rng(3)
    steps = np.arange(1, 601) * 50 - 1
    loss = 0.005 * np.exp(rng.normal(0, 1.2, steps.size))
    evals = np.arange(1, 21) * 1500 - 1
    val = 0.0257 + 0.001 * np.exp(-np.arange(20) / 4)
    run = load_run(write_tb(tmp_path / "v", {"train_loss": (steps, loss), "val_loss": (evals, val)}),
                   tmp_path / "v.duckdb")
    assert list(Oscillation().check(run)) == []
    [f] = _check(tmp_path, steps, loss)
    assert f.evidence["rule"] == "unsettled"


@pytest.mark.parametrize("seed", range(2))
def test_a_validation_loss_climbing_with_reversals_is_memorising_not_bouncing_weights(tmp_path, seed):
    """Regression (false oscillation on an overfitting run): single-batch training losses spread wide around a
    settled level while the validation loss climbs from its minimum, reversing at every other evaluation. Its steps
    ride a rise (overfitting's), not weights that do not settle; the same reversals around a level fire."""
    rng = np.random.default_rng(seed)
    steps = np.arange(0, 3000, 5)
    train = np.where(steps < 300, 0.22 - 0.13 * steps / 300, 0.09) * np.exp(rng.normal(0, 0.45, steps.size))
    vs = np.arange(100, 3001, 100)
    jitter = 0.006 * (-1.0) ** np.arange(vs.size) + rng.normal(0, 0.002, vs.size)
    for name, rise, fires in (("a", 0.08, False), ("b", 0.0, True)):
        val = 0.17 + rise * (vs - 100) / 2900 + jitter
        run = load_run(write_tb(tmp_path / name, {"train/loss": (steps, train), "val/loss": (vs, val)}),
                       tmp_path / f"{name}.duckdb")
        found = list(Oscillation().check(run))
        assert bool(found) == fires and all(f.evidence["rule"] == "bouncing_weights" for f in found)


def _heavy_ball(lr: float, beta: float, n: int = 40, seed: int = 0):
    """Full-batch gradient descent with momentum on a least-squares fit (w → 3): the loss it logs each step. With
    too much momentum for the LR the weight overshoots its optimum, and the loss climbs back from near 0 and falls
    again each time the weight swings back (as Adam with an LR too high does on a regression MSE)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=64)
    w, v, out = 0.0, 0.0, []
    for _ in range(n):
        out.append(float(np.mean((w * x - 3 * x) ** 2)))
        g = float(np.mean(2 * (w * x - 3 * x) * x))
        v = beta * v + g
        w -= lr * v
    return np.arange(n), np.array(out)


def test_a_smooth_loss_that_climbs_back_from_its_minimum_twice_is_oscillation(tmp_path):
    steps, y = _heavy_ball(0.02, 0.9)
    run = load_run(write_tb(tmp_path / "r", {"train/mse": (steps, y)}), tmp_path / "f.duckdb")
    [f] = Oscillation().check(run)
    assert f.evidence["rule"] == "rebounds" and f.evidence["rebounds"] >= 2
    assert min(f.evidence["factors"]) >= 3 and f.evidence["sign_change_rate"] <= 0.25


def test_the_same_fit_with_less_momentum_converges_without_rebounds(tmp_path):
    steps, y = _heavy_ball(0.02, 0.5)
    run = load_run(write_tb(tmp_path / "r", {"train/mse": (steps, y)}), tmp_path / "f.duckdb")
    assert list(Oscillation().check(run)) == []
