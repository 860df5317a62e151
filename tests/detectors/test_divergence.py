"""divergence on real TensorBoard event files."""

import numpy as np
import pytest

from forensics.judge.detectors import Divergence, FlatLoss
from tests.paths import REAL_RUNS_TEST
from tests.test_console_misreadings import WENET_CV
from tests.runwriters import curve, hf_history, load_run, log_messages, write_tb, write_trainer_state

needs_real = pytest.mark.skipif(not (REAL_RUNS_TEST / "log_hf33336").is_dir(),
                                reason="shared/real_runs_test is not beside the checkout")



def test_fires_at_the_minimum_before_the_rise(tmp_path):
    steps, loss = curve(n=300)
    loss[200:] = loss[200] * np.exp((steps[200:] - steps[200]) / 300)
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    [f] = Divergence().check(run)
    assert f.severity == "critical" and abs(f.step - 2000) <= 100
    assert f.evidence["growth_factor"] > 2


def test_healthy_run_is_silent(tmp_path):
    run = load_run(write_tb(tmp_path / "r", {"loss": curve(noise=0.1)}), tmp_path / "f.duckdb")
    assert list(Divergence().check(run)) == []


def test_short_per_epoch_step_up_that_stays_is_divergence(tmp_path):
    """Issue 12 class 4: eight per-epoch points, 1.6 → 1.4 → 3.3 → 6.4 then 5.5, 4.9, 4.9, 4.6."""
    steps = np.arange(1, 9) * 25
    loss = np.array([1.593, 1.406, 3.316, 6.437, 5.478, 4.857, 4.874, 4.604])
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    [f] = Divergence().check(run)
    assert f.step == 50 and f.evidence["growth_factor"] > 3


def test_short_rise_into_nan_is_divergence(tmp_path):
    steps = np.arange(1, 10)
    loss = np.array([45.7, 46.0, 45.8, 60.2, 61.2, 70.4, np.nan, np.nan, np.nan])
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    [f] = Divergence().check(run)
    assert f.evidence["ends_nonfinite"] and f.evidence["final_level"] == np.float32(70.4)


def test_loss_blown_up_before_the_log_began(tmp_path):
    """A classifier (its accuracy at chance beside it) whose cross-entropy stands at 1e9-1e12 from its first point:
    no sane model's loss is there, whatever it does next."""
    steps = np.arange(1, 6) * 1000 - 1
    loss = np.array([1.87e12, 2.09e11, 1.38e10, 3.3e9, 2.2e9])
    acc = np.array([0.49, 0.51, 0.47, 0.52, 0.5])
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss), "accuracy": (steps, acc)}), tmp_path / "f.duckdb")
    [f] = Divergence().check(run)
    assert f.step == 999 and f.evidence["min_level"] > Divergence().blown_level


def test_a_huge_regression_loss_that_does_not_move_has_not_blown_up(tmp_path):
    """An MSE on unnormalised targets, 2.688e8 at every epoch to five digits: huge, but nothing says it blew up
    (no non-finite value, no rise, no class count): a loss that does not move is flat, not diverged."""
    steps = np.arange(37) * 4 + 3
    loss = 268782816.0 - 60.0 * np.minimum(np.arange(37), 12)
    run = load_run(write_tb(tmp_path / "r", {"train_loss_epoch": (steps, loss)}), tmp_path / "f.duckdb")
    assert list(Divergence().check(run)) == []
    [f] = FlatLoss().check(run)
    assert f.severity == "critical"
    # the same level beside a gradient norm of 1e6 climbing steadily: the gradients say what the scale cannot
    grad = 6.8e5 * (1 + 0.02 * np.arange(37)) * np.exp(np.random.default_rng(0).normal(0, 0.05, 37))
    run = load_run(write_tb(tmp_path / "g", {"train_loss_epoch": (steps, loss), "grad_norm": (steps, grad)}),
                   tmp_path / "g.duckdb")
    [f] = Divergence().check(run)
    assert "blown up before the log began" in f.summary


def test_short_noisy_healthy_log_is_silent(tmp_path):
    steps = np.arange(1, 9)
    loss = np.array([2.3, 1.9, 1.7, 1.75, 1.6, 1.62, 1.55, 1.58])  # falls, with an ordinary wobble
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    assert list(Divergence().check(run)) == []


def test_rise_then_noisy_plateau_is_divergence(tmp_path):
    """SGD far above a stable LR throws the loss from 2.3 to ~30 within 60 of 800 steps; it then swings 15-45
    there without a trend, so Mann–Kendall after the minimum sees a flat top (issue 12): the tail still sits
    above the points at the minimum on ranks."""
    rng = np.random.default_rng(3)
    steps = np.arange(1, 801)
    level = 2.3 + 27.7 * np.clip((steps - 3) / 60, 0, 1)
    loss = level * np.exp(rng.normal(0, 0.25, steps.size))
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    [f] = Divergence().check(run)
    assert f.kind == "divergence" and f.step <= 20 and f.severity == "critical"
    assert f.evidence["level_shift_p"] < 1e-6 and f.evidence["growth_factor"] > 3


@pytest.mark.parametrize("seed", range(3))
def test_noisy_converging_run_with_a_bump_is_silent(tmp_path, seed):
    """A healthy noisy loss that falls, bumps up by a third for a while and falls again: the rank test
    compares the tail with the minimum, which the tail is not above."""
    rng = np.random.default_rng(seed)
    steps = np.arange(600) * 5
    base = 0.4 + 1.9 * np.exp(-steps / 400) + 0.3 * np.exp(-((steps - 1500) / 200) ** 2)
    loss = base * np.exp(rng.normal(0, 0.2, steps.size))
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    assert list(Divergence().check(run)) == []


def test_a_log_that_ends_on_a_blow_up_is_divergence(tmp_path):
    """A regression whose script guards `if loss > limit: raise`: the loss falls to 3e-4, wanders up to 3e-3, and
    the last line it logs is 0.034 before the job dies (corpus holdout, exploding_guard_regression_40_r1: 16
    points, too few after the minimum for a trend test). The log ends on a blow-up, as one ending in NaN does.
    The same log without its last line is no divergence."""
    steps = np.arange(10, 170, 10)
    loss = np.array([0.013, 0.00624, 0.00312, 0.0019, 0.00137, 0.000897, 0.000428, 0.000328, 0.00041, 0.0035,
                     0.00293, 0.0022, 0.00156, 0.00245, 0.00333, 0.0337])
    run = load_run(write_tb(tmp_path / "a", {"loss": (steps, loss)}), tmp_path / "a.duckdb")
    [f] = Divergence().check(run)
    assert f.evidence["ends_on_blow_up"] and f.evidence["final_level"] == pytest.approx(0.0337)
    assert list(Divergence(end_jump=0, late_rise=float("inf")).check(run)) == []
    [late] = Divergence(end_jump=0).check(run)  # the late rise sees it too: rising at each of its last 3 records
    assert late.evidence["rising_points"] == 3
    cut = load_run(write_tb(tmp_path / "b", {"loss": (steps[:-1], loss[:-1])}), tmp_path / "b.duckdb")
    assert list(Divergence().check(cut)) == []


def test_a_negative_loss_that_climbs_back_is_told_in_differences(tmp_path):
    """Issue 24 class 7: a negative log-likelihood falls from 20 to -147 and climbs back to about -0.5. There is no
    ratio to a negative minimum (the old summary printed ×inf): the rise is said and judged against the fall before
    it. The same curve that keeps falling below zero is silent."""
    rng = np.random.default_rng(3)
    steps = np.arange(300) * 10
    fall = 20 - 167 * (1 - np.exp(-steps / 400))
    loss = np.where(steps < 1500, fall, fall[150] + (steps - 1500) / 1500 * 146.8) + rng.normal(0, 1.0, steps.size)
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    [f] = Divergence().check(run)
    assert f.evidence["growth_factor"] is None and f.evidence["min_level"] < -140
    assert "×" not in f.summary and "of its earlier fall" in f.summary
    healthy = load_run(write_tb(tmp_path / "h", {"loss": (steps, fall + rng.normal(0, 1.0, steps.size))}), tmp_path / "h.duckdb")
    assert list(Divergence().check(healthy)) == []


def test_a_short_log_that_jumps_x30_and_stays_is_divergence_at_any_length(tmp_path):
    """Issue 24 class 2: tacotron2 resumed under apex fp16 logs 0.166 then 4.97, 5.32, 4.38, 4.54, 8.92, 5.22: seven
    points, no trend test can speak, the effect size does. Three points that jump x3 and stay are enough; a lone
    low point between higher ones is no minimum to jump from."""
    steps = np.array([12001, 12002, 12005, 12006, 12007, 12010, 12011])
    loss = np.array([0.166141, 4.972964, 5.318559, 4.378150, 4.543454, 8.917800, 5.221804])
    [f] = Divergence().check(load_run(write_tb(tmp_path / "a", {"loss": (steps, loss)}), tmp_path / "a.duckdb"))
    assert (f.step, f.evidence["jump_step"], f.severity) == (12001, 12002, "critical")
    assert f.evidence["growth_factor"] == pytest.approx(4.378150 / 0.166141)
    [f] = Divergence().check(load_run(write_tb(tmp_path / "b", {"loss": ([1, 2, 3], [1.2, 4.0, 4.5])}), tmp_path / "b.duckdb"))
    assert f.evidence["jump_step"] == 2
    dip = load_run(write_tb(tmp_path / "c", {"loss": ([1, 2, 3, 4], [0.02, 0.005, 0.018, 0.02])}), tmp_path / "c.duckdb")
    assert list(Divergence().check(dip)) == []


@needs_real
@pytest.mark.needs_shared
def test_a_short_rise_shown_by_the_validation_loss_too_is_divergence(tmp_path):
    """Issue 24 class 2, hf_whisper_braj: five training points 1.24 → 2.03, 2.16, 1.98, 1.79 (LR warmed up to 3e-3)
    and twenty evaluations 2.55 → 3.6-4.5 → 3.1-3.7. Five points can never pass a trend test at p=0.01 (its exact
    floor is 0.017), but the held-out loss, measured on fixed data, rises with the training loss and stays up:
    two independent curves. The same training points without that witness are no finding."""
    run = load_run(REAL_RUNS_TEST / "hf_whisper_braj", tmp_path / "f.duckdb")
    [f] = Divergence().check(run)
    assert (f.step, f.step_end, f.severity) == (500, 2500, "critical")
    assert f.evidence["witness"] == "eval_loss" and f.evidence["val_min_step"] == 132
    assert f.evidence["val_growth"] > 1.2 and f.evidence["val_lowest_since"] > f.evidence["val_min"]
    assert [s["series"] for s in f.sources] == ["loss", "eval_loss"]
    steps, loss = run.arrays("loss")
    alone = load_run(write_tb(tmp_path / "a", {"loss": (steps, loss)}), tmp_path / "a.duckdb")
    assert list(Divergence().check(alone)) == []


def test_overfitting_is_no_witness(tmp_path):
    """A validation loss that rises while the training loss falls is overfitting (its own detector), and a short
    training log that wobbles up without a rising validation loss has no witness either."""
    steps = np.arange(1, 7) * 100
    falling = (steps, np.array([1.2, 0.9, 0.7, 0.6, 0.5, 0.45]))
    val = (steps, np.array([1.1, 1.0, 1.2, 1.4, 1.6, 1.8]))
    run = load_run(write_tb(tmp_path / "a", {"loss": falling, "val_loss": val}), tmp_path / "a.duckdb")
    assert list(Divergence().check(run)) == []
    wobble = (steps, np.array([1.0, 1.6, 1.7, 1.55, 1.6, 1.5]))
    flat_val = (steps, np.array([1.1, 1.05, 1.07, 1.04, 1.06, 1.05]))
    run = load_run(write_tb(tmp_path / "b", {"loss": wobble, "val_loss": flat_val}), tmp_path / "b.duckdb")
    assert list(Divergence().check(run)) == []


@needs_real
@pytest.mark.needs_shared
def test_a_slow_steady_climb_is_divergence(tmp_path):
    """Issue 24 class 2, log_hf33336 (HF Trainer dict lines with typographic quotes): the loss bottoms at 1.41 and
    climbs +12% over eleven of its twelve points while the LR decays; ten of eleven steps go up (Kendall τ 0.93,
    exact Mann–Kendall p 3e-6). Under divergence's ×1.5 effect size, but a near-monotone rise over most of the log
    is the model getting worse at what it trains on."""
    [f] = Divergence().check(load_run(REAL_RUNS_TEST / "log_hf33336", tmp_path / "f.duckdb"))
    assert f.evidence["drift"] and f.evidence["kendall_tau"] > 0.9 and f.evidence["mk_p"] < 1e-4
    assert 1.1 < f.evidence["growth_factor"] < 1.2 and f.severity == "critical"
    assert "+12%" in f.summary and "×" not in f.summary
    assert f.evidence["lr_at_end"] < f.evidence["lr_at_onset"] and "while the LR falls" in f.summary


@pytest.mark.parametrize("seed", range(3))
def test_an_epoch_sawtooth_is_no_drift(tmp_path, seed):
    """A healthy multi-epoch run: the loss drops at each epoch boundary and is flat and noisy within the epoch.
    Its minimum sits in the last epoch, and what follows is noise, not a steady climb."""
    rng = np.random.default_rng(seed)
    steps = np.arange(200) * 10
    loss = 1.0 * 0.85 ** (steps // 500) * (1 + 0.01 * ((steps % 500) / 500)) * np.exp(rng.normal(0, 0.03, steps.size))
    assert list(Divergence().check(load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb"))) == []


@needs_real
@pytest.mark.needs_shared
def test_a_noisy_per_batch_rise_inside_one_short_excerpt_is_not_divergence(tmp_path):
    """Issue 24, log_deepspeech127: seventeen per-batch CTC losses of one epoch, 3.2 → 13.1, swinging ×2 from one
    batch to the next (5.8, 13.5, 8.9, 5.9, 14.9) while the step time rises with them (longer utterances later in
    the epoch). The trend test sees an order (p 6e-4), but the rise is three times the batch-to-batch noise, not
    the five a short log needs. A short rise that stands out of its noise still counts (tests above)."""
    run = load_run(REAL_RUNS_TEST / "log_deepspeech127", tmp_path / "f.duckdb")
    assert list(Divergence().check(run)) == []
    assert len(list(Divergence(short_sigmas=2.0).check(run))) == 1


def test_a_log_that_ends_on_a_blow_up_of_orders_of_magnitude_is_divergence_at_two_points(tmp_path):
    """Effect size first: two logged points, the second ×2000 the first, need no trend test to be a blow-up."""
    run = load_run(write_tb(tmp_path / "r", {"loss": (np.array([10, 20]), np.array([2.31, 4.6e3]))}),
                   tmp_path / "f.duckdb")
    assert Divergence().unavailable(run) is None
    [f] = Divergence().check(run)
    assert f.severity == "critical" and f.step == 10 and f.evidence["blow_up_factor"] > 1000
    assert "4600 at step 20" in f.summary
    calm = load_run(write_tb(tmp_path / "c", {"loss": (np.array([10, 20]), np.array([2.31, 2.2]))}),
                    tmp_path / "c.duckdb")
    assert Divergence().unavailable(calm) is not None


def test_a_blow_up_on_the_last_record_of_a_short_log_needs_no_trend_test(tmp_path):
    """Three per-epoch points, 2.3, 2.1, then 5e4: one point after the minimum is too few for any trend or step
    rule; its size alone is the finding, counted from the last ordinary point."""
    steps = np.array([1, 2, 3])
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, np.array([2.3, 2.1, 5e4]))}), tmp_path / "f.duckdb")
    [f] = Divergence().check(run)
    assert f.step == 2 and f.evidence["blow_up_points"] == 1 and "blows up where the log ends" in f.summary


def test_a_tenfold_end_jump_needs_the_validation_loss_to_blow_up_beside_it(tmp_path):
    steps = np.array([1, 2])
    witnessed = load_run(write_tb(tmp_path / "w", {"train/loss": (steps, np.array([1.5, 30.0])),
                                                    "val/loss": (steps, np.array([1.2, 25.0]))}), tmp_path / "w.duckdb")
    [f] = Divergence().check(witnessed)
    assert f.evidence["witness"] == "val/loss" and "validation loss ends on a blow-up too" in f.summary
    alone = load_run(write_tb(tmp_path / "a", {"train/loss": (steps, np.array([1.5, 30.0])),
                                                "val/loss": (steps, np.array([1.2, 1.1]))}), tmp_path / "a.duckdb")
    assert Divergence().unavailable(alone) is not None and list(Divergence().check(alone)) == []


def test_heavy_tailed_noise_near_zero_is_no_blow_up(tmp_path):
    """A converged classifier's per-batch losses span 3e-4 to 0.6 (heavy-tailed minibatch noise near 0): the last
    point, the highest since the first step, is ×1000 the lowest one and ×60 the median: no blow-up."""
    rng = np.random.default_rng(3)
    steps = np.arange(1, 171) * 50
    y = np.exp(rng.normal(np.log(0.01), 1.3, steps.size))
    y[:10] = np.linspace(0.6, 0.1, 10)
    y[-1] = 1.05 * float(y[:-1].max())
    assert y[-1] > 1000 * y[:-1].min() and y[-1] < 100 * np.median(y[:-1])
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, y)}), tmp_path / "f.duckdb")
    assert list(Divergence().check(run)) == []


def test_a_loss_rising_at_every_epoch_beside_a_rising_validation_loss_is_divergence(tmp_path):
    """Six epochs, each worse than the one before, validation worse at each of its last four (five points): too few points for
    a trend test at p 0.01, glaring to a reader."""
    ep = np.arange(1, 7)
    train = np.array([1.0, 1.04, 1.1, 1.17, 1.26, 1.38])
    val = np.array([0.95, 0.93, 0.97, 1.02, 1.08, 1.15])
    run = load_run(write_tb(tmp_path / "r", {"train/loss": (ep, train), "val/loss": (ep, val)}), tmp_path / "f.duckdb")
    [f] = Divergence().check(run)
    assert f.step == 1 and f.evidence["rising_points"] == 6 and f.evidence["val_rising_points"] == 5
    falling_val = load_run(write_tb(tmp_path / "v", {"train/loss": (ep, train), "val/loss": (ep, val[::-1])}),
                           tmp_path / "v.duckdb")
    assert list(Divergence().check(falling_val)) == []


def test_a_running_mean_that_creeps_up_within_an_epoch_is_not_divergence(tmp_path):
    """`avg loss so far` printed five times in an epoch drifts +6% while the validation loss sits still: the rise is
    under `rising_growth` and the validation loss does not climb with it."""
    steps = np.arange(25, 126, 25)
    train = np.array([0.02068, 0.02146, 0.02191, 0.02196, 0.02204])
    val = np.array([0.02971, 0.02966, 0.02967, 0.02971, 0.02973])
    run = load_run(write_tb(tmp_path / "r", {"train/loss": (steps, train), "val/loss": (steps, val)}),
                   tmp_path / "f.duckdb")
    assert list(Divergence().check(run)) == []


@pytest.mark.parametrize("seed", [25, 65, 114, 128])
def test_single_batch_losses_under_a_poly_decay_are_not_divergence(tmp_path, seed):
    """Per-display single-batch losses: eighty points swinging ×2.2 (log sd 0.8) around a level that falls and then
    holds while a poly schedule decays the LR. In these draws a lucky dip late in the log makes the smoothed minimum
    and the tail's median stands ×4-12 above it, at Mann–Kendall p ≤ 0.01: no level moved, the points after the dip
    sit where the points before it did, and none blows up past every earlier point."""
    rng = np.random.default_rng(seed)
    steps = np.arange(1, 81) * 20
    level = 0.4 + 1.5 * np.exp(-steps / (steps[-1] / 3))
    y = level * np.exp(rng.normal(0, 0.8, steps.size))
    lr = 0.01 * (1 - steps / (steps[-1] + 1)) ** 0.9
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, y), "lr": (steps, lr)}), tmp_path / "f.duckdb")
    assert list(Divergence().check(run)) == []
    # without the spread guard (and the chance-low one) this draw reads as a rise
    assert list(Divergence(wide_spread=10.0, lucky_reach=0.0).check(run))


def test_a_loss_that_doubles_and_holds_until_it_turns_nan_for_good_is_divergence(tmp_path):
    """One record per epoch: the loss more than doubles after the first epoch, holds there, then is NaN at every
    epoch to the end. No trend test speaks (the held level drifts down a little), the effect does: the NaN ends a
    rise. The same NaN after a loss that kept falling, or a NaN that recovers, is no divergence."""
    steps = np.arange(10)
    up = np.array([1.5, 3.6, 4.2, 4.15, 4.1, 4.07, 4.05, np.nan, np.nan, np.nan])
    [f] = Divergence().check(load_run(write_tb(tmp_path / "a", {"loss": (steps, up)}), tmp_path / "a.duckdb"))
    assert (f.step, f.step_end, f.severity) == (0, 7, "critical")
    assert f.evidence["jump_step"] == 1 and f.evidence["points_held"] == 6 and f.evidence["ends_nonfinite"]
    assert "3.6 at step 1" in f.summary and "non-finite at step 7" in f.summary
    falling = np.array([4.2, 3.0, 2.5, 2.2, 2.1, 2.0, 1.95, np.nan, np.nan, np.nan])
    run = load_run(write_tb(tmp_path / "b", {"loss": (steps, falling)}), tmp_path / "b.duckdb")
    assert list(Divergence().check(run)) == []
    blip = up.copy()
    blip[8:] = [1.4, 1.3]  # finite again after the NaN: the NaN is a blip, not where the run died
    blip[1:7] = [1.45, 1.6, 1.5, 1.42, 1.4, 1.38]
    run = load_run(write_tb(tmp_path / "c", {"loss": (steps, blip)}), tmp_path / "c.duckdb")
    assert list(Divergence().check(run)) == []


@pytest.mark.parametrize("seed", range(3))
def test_a_short_log_whose_level_doubles_and_stays_is_divergence(tmp_path, seed):
    """Sixteen per-epoch records: eight around 0.5, then eight swinging 0.7-1.4, every one of them above the first
    eight. Not every later record is ×2 the earlier level, but their median is and none comes back down: the level
    moved. A second half that dips back into the first half's range is silent."""
    rng = np.random.default_rng(seed)
    steps = np.arange(16)
    low = 0.5 * np.exp(rng.uniform(-0.2, 0.2, 8))
    high = np.sort(rng.uniform(0.72, 1.4, 8))[rng.permutation(8)]
    high[0] = 1.3  # the jump itself
    [f] = Divergence().check(load_run(write_tb(tmp_path / "a", {"loss": (steps, np.r_[low, high])}),
                                      tmp_path / "a.duckdb"))
    assert f.severity == "critical" and f.step <= 7 and f.evidence["growth_factor"] >= 2
    if seed == 0:  # where no trend test speaks: told by the moved level
        assert f.evidence["level_up_points"] == 8 and f.evidence["lowest_after"] > f.evidence["highest_before"]
    back = high.copy()
    back[4] = float(np.median(low))  # one record back at the earlier level: no level moved for good
    run = load_run(write_tb(tmp_path / "b", {"loss": (steps, np.r_[low, back])}), tmp_path / "b.duckdb")
    assert list(Divergence().check(run)) == []


def _stepped_language_model(val_steps_up: bool, lr_restart: bool = False):
    """140 logged points of a language model's loss: it falls from 9 to ~5.2, then at point 60 steps up to ~6.5 and
    holds to the end (a quarter more than its best, a third of its fall given back), with small noise; ten
    evaluations that step up with it (or keep falling); an LR that is constant (or restarts ×4 at the step)."""
    rng = np.random.default_rng(0)
    steps = np.arange(140)
    loss = 5.2 + 3.8 * np.exp(-steps / 8.0)
    loss[60:] = 6.5
    loss *= np.exp(rng.normal(0, 0.01, steps.size))
    ev = np.arange(14, 140, 14)
    val = 5.6 - 0.1 * np.arange(ev.size)
    if val_steps_up:
        val[ev >= 60] += 1.0
    lr = np.where(steps >= 60, 4.0, 1.0) if lr_restart else np.ones(steps.size)
    return {"loss": (steps, loss), "val_loss": (ev, val), "lr": (steps, lr)}


def test_a_step_up_that_holds_beside_the_validation_loss_is_divergence(tmp_path):
    """A loss that steps up a quarter and never comes back, with every evaluation since above every one before: a
    model that broke (an LR too high for a moment), not noise. The same step with the validation loss still falling
    (another objective, a harder data mix) or at an LR restart (the schedule's own doing) is no finding."""
    run = load_run(write_tb(tmp_path / "a", _stepped_language_model(True)), tmp_path / "a.duckdb")
    [f] = Divergence().check(run)
    assert f.severity == "critical" and f.evidence["jump_step"] in (59, 60) and f.evidence["witness"] == "val_loss"
    assert 1.2 < f.evidence["growth_factor"] < 1.35
    assert f.evidence["lowest_after_jump"] > f.evidence["highest_before_jump"]
    run = load_run(write_tb(tmp_path / "b", _stepped_language_model(False)), tmp_path / "b.duckdb")
    assert list(Divergence().check(run)) == []
    run = load_run(write_tb(tmp_path / "c", _stepped_language_model(True, lr_restart=True)), tmp_path / "c.duckdb")
    assert list(Divergence().check(run)) == []


def _warmup_fine_tune(val_rises: bool, warmup: bool = True) -> list[dict]:
    """An HF Trainer fine-tune logged every 25 steps: the loss falls to ~0.12 by step 125, then climbs to ~0.3 as
    a linear warmup raises the LR ×20 to 1e-4 (step 500), holds there, and drops to ~0.17 when the data repeats
    (step 1125); evaluations every 250 steps that double after the first and stay (or keep improving)."""
    rng = np.random.default_rng(1)
    steps = np.arange(25, 1501, 25)
    lr = np.minimum(steps / 500, 1.0) * 1e-4 if warmup else np.full(steps.size, 1e-4)
    loss = np.where(steps <= 125, 0.12 + 0.7 * np.exp(-(steps - 25) / 25.0),
                    np.where(steps <= 550, 0.12 + 0.18 * (steps - 125) / 425, 0.3))
    loss = np.where(steps >= 1125, 0.17, loss) * np.exp(rng.normal(0, 0.03, steps.size))
    hist = [{"loss": round(float(v), 4), "grad_norm": 3.0, "learning_rate": float(r), "epoch": round(s / 1125, 4),
             "step": int(s)} for s, v, r in zip(steps, loss, lr)]
    val = [0.219, 0.416, 0.423, 0.41, 0.438, 0.402] if val_rises else [0.219, 0.2, 0.19, 0.185, 0.18, 0.178]
    for s, v in zip(range(250, 1501, 250), val):
        hist.append({"eval_loss": v, "epoch": round(s / 1125, 4), "step": s})
    return sorted(hist, key=lambda e: (e["step"], "eval_loss" in e))


def test_a_loss_that_climbs_as_the_warmup_raises_the_lr_is_divergence(tmp_path):
    """The loss more than doubles from its minimum while a warmup raises the LR, and every evaluation after the
    first stands far above it: a peak LR too high for the fine-tune, the model got worse and stayed so. The same
    climb with evaluations that keep improving, or under a constant LR, is no finding of this rule."""
    run = load_run(write_trainer_state(tmp_path / "a", _warmup_fine_tune(True)), tmp_path / "a.duckdb")
    [f] = Divergence().check(run)
    assert f.severity == "critical" and f.evidence["val_min_step"] == 250 and f.evidence["growth_factor"] > 2
    assert f.evidence["lr_at_peak"] / f.evidence["lr_at_onset"] >= 2 and "while the LR rises" in f.summary
    run = load_run(write_trainer_state(tmp_path / "b", _warmup_fine_tune(False)), tmp_path / "b.duckdb")
    assert list(Divergence().check(run)) == []
    run = load_run(write_trainer_state(tmp_path / "c", _warmup_fine_tune(True, warmup=False)), tmp_path / "c.duckdb")
    assert list(Divergence().check(run)) == []


def test_a_late_climb_beside_a_climbing_gradient_norm_is_divergence(tmp_path):
    """An HF Trainer log of 40 records: the loss falls to ~0.4 and its last four records climb to ×6 that, not at
    every record (0.9, 1.6, 1.4, 2.4) but each above everything before them, while the gradient norm ends at its
    highest, ×5 its level: the run is coming apart where the log ends. Beside a calm gradient norm the same climb
    is still a rise dozens of times the ±2% its level scattered before: divergence by its effect alone."""
    rng = np.random.default_rng(3)
    steps = np.arange(10, 401, 10)
    loss = 0.4 + 1.6 * np.exp(-steps / 60.0) * np.exp(rng.normal(0, 0.02, steps.size))
    loss[-4:] = [0.9, 1.6, 1.4, 2.4]
    calm = 1.0 * np.exp(rng.normal(0, 0.05, steps.size))
    climbing = calm.copy()
    climbing[-4:] = [2.5, 4.0, 3.5, 5.2]
    run = load_run(write_trainer_state(tmp_path / "a", hf_history(steps, loss, climbing)), tmp_path / "a.duckdb")
    [f] = Divergence().check(run)
    assert f.severity == "critical" and f.evidence["climb_points"] == 4 and f.evidence["grad_norm_growth"] > 4
    assert f.evidence["growth_factor"] > 5 and "2.4 at step 400" in f.summary
    run = load_run(write_trainer_state(tmp_path / "b", hf_history(steps, loss, calm)), tmp_path / "b.duckdb")
    [f] = Divergence().check(run)
    assert f.evidence["held_points"] == 4 and "grad_norm_growth" not in f.evidence


def _epoch_lines(root, values):
    root.mkdir()
    log_messages(root / "train.log", [f"Epoch {i + 1}/{len(values)} - loss: {v:.4f}" for i, v in enumerate(values)])
    return root


def test_a_rise_that_dwarfs_the_runs_own_scatter_is_divergence_at_any_length(tmp_path):
    """Eight epoch averages printed by a logger: five within 0.8% of each other, then ×1.3, ×2.0, ×1.9 where the log
    ends: a rise a hundred times the scatter before it, too short for any trend test. The same tail after epochs
    that scattered ±20% is no finding: the rise does not stand out of the run's own noise."""
    root = _epoch_lines(tmp_path / "a", [0.0475, 0.0474, 0.0473, 0.0471, 0.0472, 0.0612, 0.0958, 0.0877])
    [f] = Divergence().check(load_run(root, tmp_path / "a.duckdb"))
    assert f.severity == "critical" and f.evidence["held_points"] == 2 and f.evidence["level_points"] == 5
    assert "0.0877 or above" in f.summary and "0.0475" in f.summary
    root = _epoch_lines(tmp_path / "b", [0.040, 0.062, 0.045, 0.058, 0.041, 0.0612, 0.0958, 0.0877])
    assert list(Divergence().check(load_run(root, tmp_path / "b.duckdb"))) == []


def test_a_loss_that_climbs_fourfold_as_the_warmup_raises_the_lr_is_divergence(tmp_path):
    """Four records of a detector's warmup: the loss 4.83, 4.72, then 8.42 and 21.5 while the LR climbs from 0 to
    0.0112: ×4.6 its minimum at the end, rising at each record, the LR ×2.7 since the minimum. The same loss under a
    constant LR is a record too few to call."""
    steps = np.array([100, 200, 300, 400])
    loss = np.array([4.831, 4.718, 8.423, 21.497])
    run = load_run(write_tb(tmp_path / "a", {"loss": (steps, loss), "lr": (steps, [0.0, 0.00422, 0.007, 0.01122])}),
                   tmp_path / "a.duckdb")
    [f] = Divergence().check(run)
    assert f.evidence["lr_at_end"] / f.evidence["lr_at_onset"] > 2 and "4.718 at step 200" in f.summary
    run = load_run(write_tb(tmp_path / "b", {"loss": (steps, loss), "lr": (steps, [0.01] * 4)}), tmp_path / "b.duckdb")
    assert list(Divergence().check(run)) == []


def _onmt_lines(root, xent, acc):
    root.mkdir()
    log_messages(root / "train.log", [
        f"Epoch  1, {12900 + 50 * i:5d}/37527; acc: {a:6.2f}; ppl: {np.exp(x):8.2f}; xent: {x:.2f}; 3650 src tok/s; "
        f"3712 tgt tok/s; {10000 + 14 * i} s elapsed" for i, (x, a) in enumerate(zip(xent, acc))])
    return root


def test_a_cross_entropy_that_gives_back_most_of_its_fall_is_divergence(tmp_path):
    """OpenNMT-py report lines: xent falls from 10.47 to 7.73 and climbs back to 9.95 (ppl ×9.2 from its best) while
    the accuracy ends below where it began: 81% of the fall given back, on a log scale where ×1.3 in nats is ×9 in
    perplexity. The same fall giving back a fifth of itself, the accuracy holding, is noise."""
    xent = [10.47, 10.67, 10.09, 10.18, 9.18, 8.24, 7.73, 7.82, 8.00, 9.69, 9.95]
    acc = [4.48, 4.50, 4.40, 4.36, 5.25, 5.66, 5.32, 4.79, 4.27, 4.25, 1.89]
    [f] = Divergence().check(load_run(_onmt_lines(tmp_path / "a", xent, acc), tmp_path / "a.duckdb"))
    assert f.evidence["given_back"] > 0.8 and "7.73 at step" in f.summary and "ppl" in f.summary
    xent = [10.47, 10.67, 10.09, 10.18, 9.18, 8.24, 7.73, 7.82, 8.00, 8.20, 8.25]
    acc = [4.48, 4.50, 4.40, 4.36, 5.25, 5.66, 5.32, 5.79, 6.27, 6.25, 6.29]
    assert list(Divergence().check(load_run(_onmt_lines(tmp_path / "b", xent, acc), tmp_path / "b.duckdb"))) == []


def test_a_loss_that_blows_up_from_its_first_record_and_never_falls_is_divergence(tmp_path):
    """The first record at a uniform guess's loss (ln 6), every later one ×5-×17 above it, swinging without trend:
    no minimum after progress to rise from, yet it blew up at once and never came back."""
    steps = np.arange(21) * 10
    rng = np.random.default_rng(3)
    loss = np.r_[1.7957, rng.uniform(8.2, 31.0, 20)]
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    [f] = Divergence().check(run)
    assert f.step == 0 and f.evidence["growth_factor"] >= 3 and "never falls below" in f.summary


def test_a_first_record_logged_too_low_before_a_falling_loss_is_no_divergence(tmp_path):
    """A running sum over one batch divided by the print interval: the first record 1/100 of the loss, every later
    one far above it, and the loss falls from there as it trains."""
    steps = np.arange(30) * 100
    loss = np.r_[0.023, 2.3 * np.exp(-np.arange(29) / 12) + 0.4]
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    assert list(Divergence().check(run)) == []


def test_a_loss_weight_ramped_from_zero_makes_no_divergence_from_the_start(tmp_path):
    """A total loss that grows as a KL weight anneals from 0: the rise is by design."""
    steps = np.arange(30) * 100
    beta = np.linspace(0.0, 1.0, 30)
    loss = 0.5 + 4.0 * beta + np.random.default_rng(1).normal(0, 0.02, 30)
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss), "kl_weight": (steps, beta)}), tmp_path / "f.duckdb")
    assert [f for f in Divergence().check(run) if "never falls below" in f.summary] == []


def test_a_loss_that_fell_decades_and_gives_back_half_of_them_is_divergence(tmp_path):
    """19 epochs: 2.6 falling to 0.06 by epoch 13, then rising to 0.55 (×9) with the validation loss: a fifth of
    the fall in linear units, three fifths of it on the log scale the loss fell on."""
    steps = np.arange(19)
    loss = np.r_[2.6 * np.exp(-np.arange(14) / 3.5) + 0.04, [0.09, 0.14, 0.22, 0.35, 0.554]]
    val = np.r_[loss[:14] * 1.05, [0.2, 0.15, 0.4, 0.35, 0.73]]  # rising, not at every evaluation
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss), "val_loss": (steps, val)}), tmp_path / "f.duckdb")
    [f] = Divergence().check(run)
    assert f.evidence["growth_factor"] > 5


def test_a_classifier_loss_at_its_floor_wandering_in_its_own_scatter_is_no_divergence(tmp_path):
    """An excerpt of a trained classifier (accuracy 0.998): the loss scatters 0.004-0.012, its lowest dip in the
    middle, while the validation loss rises (overfitting's): the "rise" from the dip is the floor's own scatter."""
    steps = np.arange(14, 23)
    loss = np.array([0.0094, 0.0067, 0.0122, 0.0091, 0.0110, 0.0036, 0.0109, 0.0074, 0.0085])
    val = np.array([0.1048, 0.1130, 0.1463, 0.1685, 0.1224, 0.1733, 0.1539, 0.1791, 0.2264])
    acc = np.array([0.9974, 0.9982, 0.9974, 0.9976, 0.9977, 0.9989, 0.9978, 0.9982, 0.9986])
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss), "val_loss": (steps, val), "accuracy": (steps, acc)}),
                   tmp_path / "f.duckdb")
    assert list(Divergence().check(run)) == []


def test_a_level_that_steps_up_a_half_and_holds_against_a_still_level_is_divergence(tmp_path):
    """Three records within 0.1% of one another, then four ×1.4-×1.5 above them: tiny beside the ×5 a short log's
    jump needs, 400 × the level's own scatter."""
    steps = np.array([2100, 2200, 2300, 18900, 19000, 19100, 19200])
    loss = np.array([9.480, 9.478, 9.483, 13.47, 13.40, 13.97, 13.83])
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    [f] = Divergence().check(run)
    assert f.evidence["lowest_after"] > 13.3 and f.evidence["growth_factor"] > 1.4


def test_a_loss_that_fell_decades_and_rises_under_warm_restarts_is_no_divergence(tmp_path):
    """A fine-tune memorising its data (1.5 → 0.009 over 200 steps as the LR decays), then resumed with its LR
    schedule restarted from 0 to a new peak twice: the loss jumps at each restart and falls again, ending ×7 above its
    floor. On the log scale it gave back 40% of its fall; the rise is the restarts' by design."""
    steps = np.arange(1, 301)
    rng = np.random.default_rng(2)
    first = 0.009 + 1.5 * np.exp(-np.arange(200) / 25)
    second = 0.5 + 1.0 * np.exp(-np.arange(50) / 10)
    third = 0.06 + 1.0 * np.exp(-np.arange(50) / 15)
    loss = np.r_[first, second, third] * (1 + rng.normal(0, 0.02, 300))
    lr = np.r_[2e-4 * np.linspace(1, 0.01, 200), 0.0, 4e-5 * np.linspace(1, 0.02, 49), 0.0,
               4e-5 * np.linspace(1, 0.02, 49)]
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss), "learning_rate": (steps, lr)}), tmp_path / "f.duckdb")
    assert list(Divergence().check(run)) == []


@pytest.mark.parametrize("improves, severity", [(True, "warning"), (False, "critical")])
def test_a_rise_while_the_accuracy_improves_is_no_critical(tmp_path, improves, severity):
    """A printed `Iter N: loss=X, test_acc=Y` per epoch: the loss grows 2% an epoch from the start (a loss term
    whose weight is multiplied every epoch, as a growing regulariser does) while the test accuracy climbs. The
    curve alone is a divergence, the model is not getting worse: a warning that says so. The same loss beside an
    accuracy that falls is critical."""
    rng = np.random.default_rng(3)
    epochs = np.arange(40)
    loss = 1.5e5 * 1.02 ** epochs
    acc = (0.05 + 0.5 * (1 - np.exp(-epochs / 8)) if improves else 0.5 - 0.01 * epochs) + rng.normal(0, 0.01, 40)
    root = tmp_path / "r"
    root.mkdir()
    log_messages(root / "train.log", [f"Iter {e}: loss={v:.4f}, test_acc={a:.4f}" for e, v, a in zip(epochs, loss, acc)],
                 fmt="%(message)s")
    run = load_run(root, tmp_path / "f.duckdb")
    [f] = Divergence().check(run)
    assert f.severity == severity, f.summary
    assert ("test_acc improves" in f.summary) == improves


@pytest.mark.parametrize("blows_up", [True, False])
def test_a_blow_up_followed_by_zeros_that_hide_a_nan_ends_in_the_nan(tmp_path, blows_up):
    """HF Trainer logs every 1000 steps: the loss jumps ×2500 and from the next log on reads exactly 0.0 beside a
    NaN grad norm (its filter zeroing a NaN). Those zeros are the NaN, not a level the loss came back to: the
    blow-up is what the log ends on, a divergence, and no spike that recovered. Without the jump the same zeros are
    masked_nonfinite's alone."""
    from forensics.judge.detectors import LossSpike

    steps = np.array([1000, 2000, 3000, 4000, 5000])
    loss = np.array([2.2934, 5661.338 if blows_up else 2.1, 0.0, 0.0, 0.0])
    norm = np.array([0.393, np.nan, np.nan, np.nan, np.nan])
    run = load_run(write_trainer_state(tmp_path / "r", hf_history(steps, loss, norm)), tmp_path / "f.duckdb")
    found = list(Divergence().check(run))
    assert len(found) == int(blows_up), [f.summary for f in found]
    if blows_up:
        assert found[0].severity == "critical" and found[0].evidence.get("ends_nonfinite", True)
        assert "5661 at step 2000" in found[0].summary and "turns non-finite" in found[0].summary
    assert list(LossSpike().check(run)) == []


def test_a_new_writer_that_starts_its_counter_again_at_the_untrained_level_is_no_rise(tmp_path):
    """A fine-tune's TensorBoard writer logs a falling loss and an evaluation loss that climbs after its minimum; a
    second writer of a launch started afresh in the same folder logs one record at its first step, back at the
    untrained level. That record opens a new launch (`Run.launch_starts`): no divergence of the first launch, and the
    overfitting of the first launch is still read."""
    from forensics.judge.detectors import Overfitting

    steps, loss = curve(n=66, every=10, start=3.9, floor=0.6, tau=120.0, noise=0.02)
    steps = steps + 10
    evals = np.arange(50, 660, 50)
    val = 1.05 + 0.12 * np.clip((evals - 200) / 400, 0, None)
    root = write_tb(tmp_path / "r", {"train/loss": (steps, loss), "eval/loss": (evals, val)})
    write_tb(root, {"train/loss": (np.array([10]), np.array([4.565]))})
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.launch_starts(run.pick("loss"))
    assert list(Divergence().check(run)) == []
    assert [f.kind for f in Overfitting().check(run)] == ["overfitting"]
    # the same second writer opening near where the first closed (a pass of a counter that restarts, not a new
    # model) starts no launch
    again = write_tb(tmp_path / "s", {"train/loss": (steps, loss)})
    write_tb(again, {"train/loss": (np.array([10]), np.array([loss[-1] * 1.05]))})
    run = load_run(again, tmp_path / "g.duckdb")
    assert run.launch_starts(run.pick("loss")) == ()


# The training loss of a pretrained GPT-2's dialogue fine-tune, as Lightning's CSVLogger wrote it (single-batch values
# every 50 steps, one epoch), from github.com/Melissasssss/TurnGPT, lightning_logs/version_0/metrics.csv at f7f5b23.
_FLAT_SINGLE_BATCH_CSV = """\
epoch,loss,step
0,2.369102716445923,49
0,2.229456901550293,99
0,2.2015838623046875,149
0,2.962423801422119,199
0,2.1700685024261475,249
0,2.6844329833984375,299
0,2.175774335861206,349
0,2.4971249103546143,399
0,2.4370036125183105,449
0,3.1323721408843994,499
0,2.2781267166137695,549
0,2.3874635696411133,599
0,2.8875277042388916,649
0,2.9367291927337646,699
0,2.353027582168579,749
0,1.8584657907485962,799
0,2.1680243015289307,849
0,2.1542675495147705,899
0,1.8306028842926025,949
0,2.0287890434265137,999
0,1.753556489944458,1049
0,2.365447998046875,1099
0,1.8806239366531372,1149
0,2.178842306137085,1199
0,2.966130256652832,1249
0,2.07307505607605,1299
0,2.270951747894287,1349
0,2.2358858585357666,1399
0,1.8900820016860962,1449
0,2.281494379043579,1499
0,1.8230829238891602,1549
0,1.9500335454940796,1599
0,2.6993606090545654,1649
0,1.5443782806396484,1699
0,1.2439128160476685,1749
0,2.0017576217651367,1799
0,1.8888895511627197,1849
0,2.3274950981140137,1899
0,1.8438767194747925,1949
0,2.0146727561950684,1999
0,2.528590202331543,2049
0,2.404451608657837,2099
0,3.1462624073028564,2149
0,2.86942720413208,2199
0,2.6428728103637695,2249
0,3.016693592071533,2299
0,2.4123318195343018,2349
0,2.0160763263702393,2399
0,2.7666661739349365,2449
0,2.243922710418701,2499
"""


def test_a_return_from_a_dip_of_single_batch_scatter_to_the_opening_level_is_no_rise(tmp_path):
    """A fine-tune's single-batch loss that never falls: its three-point minimum is a chance low of its scatter
    (σ·√(2 ln n) under the level it opened at) and it ends about where it opened. The "rise" from that dip is the
    scatter of a flat loss, not a divergence."""
    root = tmp_path / "version_0"
    root.mkdir()
    (root / "metrics.csv").write_text(_FLAT_SINGLE_BATCH_CSV)
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.arrays("loss")[0].size == 50
    assert list(Divergence().check(run)) == []
    assert list(Divergence(lucky_reach=0.0).check(run))  # read from the dip, the end stands ×1.6 above it


# A Caffe SSD solver's display lines, the last of its log: the smoothed loss ("loss =", Caffe's running average over
# `average_loss` iterations) rises at every display, 12.1 to 18.3. Source: https://github.com/weiliu89/caffe/issues/383
_CAFFE_CLIMB = """\
I0110 10:17:38.227036 12020 solver.cpp:546]     Test net output #0: detection_eval = 0.0157478
I0110 10:17:38.513036 12020 solver.cpp:243] Iteration 200, loss = 12.1152
I0110 10:17:38.513036 12020 solver.cpp:259]     Train net output #0: mbox_loss = 9.1294 (* 1 = 9.1294 loss)
I0110 10:17:38.513036 12020 sgd_solver.cpp:138] Iteration 200, lr = 0.001
I0110 10:17:43.265036 12020 solver.cpp:243] Iteration 210, loss = 13.4585
I0110 10:17:43.265036 12020 solver.cpp:259]     Train net output #0: mbox_loss = 7.60361 (* 1 = 7.60361 loss)
I0110 10:17:43.265036 12020 sgd_solver.cpp:138] Iteration 210, lr = 0.001
I0110 10:17:48.051036 12020 solver.cpp:243] Iteration 220, loss = 14.3801
I0110 10:17:48.051036 12020 solver.cpp:259]     Train net output #0: mbox_loss = 11.5277 (* 1 = 11.5277 loss)
I0110 10:17:48.051036 12020 sgd_solver.cpp:138] Iteration 220, lr = 0.001
I0110 10:17:52.827036 12020 solver.cpp:243] Iteration 230, loss = 16.3444
I0110 10:17:52.827036 12020 solver.cpp:259]     Train net output #0: mbox_loss = 14.9786 (* 1 = 14.9786 loss)
I0110 10:17:52.827036 12020 sgd_solver.cpp:138] Iteration 230, lr = 0.001
I0110 10:17:57.657037 12020 solver.cpp:243] Iteration 240, loss = 18.3031
I0110 10:17:57.657037 12020 solver.cpp:259]     Train net output #0: mbox_loss = 21.9139 (* 1 = 21.9139 loss)
"""

# A speech recogniser's per-rank training lines and their CV lines, four ranks printing one batch each: healthy.
# Source: https://github.com/wenet-e2e/wenet/issues/941
_WENET_RANKS = WENET_CV  # the same real excerpt, one home

# A tracker's per-step single-batch losses, an excerpt opening on a low one: no divergence (its label: a data stall).
# Source: https://github.com/aharley/pips/issues/17
_PIPS_STEPS = """\
16hv_8_96_I4_5e-4_A_debug_15:30:12; step 000024/200000; rtime 0.06; itime 1.95; loss = 67.71947
16hv_8_96_I4_5e-4_A_debug_15:30:12; step 000025/200000; rtime 0.05; itime 1.91; loss = 107.49207
16hv_8_96_I4_5e-4_A_debug_15:30:12; step 000026/200000; rtime 0.06; itime 1.86; loss = 106.29369
16hv_8_96_I4_5e-4_A_debug_15:30:12; step 000027/200000; rtime 0.03; itime 2.02; loss = 105.84137
16hv_8_96_I4_5e-4_A_debug_15:30:12; step 000028/200000; rtime 0.03; itime 1.83; loss = 167.15781
16hv_8_96_I4_5e-4_A_debug_15:30:12; step 000029/200000; rtime 0.03; itime 2.09; loss = 111.99800
16hv_8_96_I4_5e-4_A_debug_15:30:12; step 000030/200000; rtime 0.06; itime 2.06; loss = 102.14317
16hv_8_96_I4_5e-4_A_debug_15:30:12; step 000031/200000; rtime 0.03; itime 1.80; loss = 100.11551
warning: sampling failed
16hv_8_96_I4_5e-4_A_debug_15:30:12; step 000032/200000; rtime 210.16; itime 212.36; loss = 76.14967
16hv_8_96_I4_5e-4_A_debug_15:30:12; step 000033/200000; rtime 0.05; itime 2.00; loss = 106.69480
16hv_8_96_I4_5e-4_A_debug_15:30:12; step 000034/200000; rtime 0.05; itime 1.91; loss = 107.20820
16hv_8_96_I4_5e-4_A_debug_15:30:12; step 000035/200000; rtime 0.05; itime 1.97; loss = 82.02447
"""

# An audio classifier's CSV of a loss summed over each epoch's batches (a cumulative sum, reset at every epoch): its
# last five rows rise ×290 at every row, as every epoch's did. Healthy. Source:
# Gardenou/TFG_IA_Model@5bfed1d656fba0dd0858262914086a2e5e501f5c:training_log.csv
_CUMSUM_CSV = """\
Epoch,Batch,Loss
1,1,0.23854405879974366
1,101,22.71660451889038
1,201,43.28118394613266
1,301,62.673566377162935
1,401,80.76311357021332
1,summary,1.9891022108239496,0.30360721442885774,6986
2,1,0.1543079733848572
2,101,16.502217853069304
2,201,32.0016026198864
2,301,46.34074706435204
2,401,60.641294080018994
2,summary,1.5037103060726715,0.49069567706842254,6986
3,1,0.16902321577072144
3,101,13.54579754471779
3,201,26.11577761769295
3,301,37.78569179773331
3,401,49.190438461303714
3,summary,1.212485002434772,0.5977669624964214,6986
4,1,0.13085209131240844
4,101,10.566382104158402
4,201,20.832595014572142
4,301,30.722795325517655
4,401,39.82176653444767
4,summary,0.9838380939082095,0.6717721156598913,6986
5,1,0.06757609248161316
5,101,8.612436425685882
5,201,16.96063124239445
5,301,24.852924796938897
5,401,32.31801712214947
5,summary,0.8059297010336642,0.7356140853134842,6986
6,1,0.11755900382995606
6,101,7.256219232082367
6,201,13.927343146502972
6,301,21.049096681177616
6,401,27.787824188172817
6,summary,0.6978460371289701,0.7755511022044088,6986
7,1,0.06493240594863892
7,101,6.43489753305912
7,201,12.651792895793914
7,301,18.475405433773993
7,401,24.115214727818966
7,summary,0.6001149717061962,0.8070426567420556,6986
8,1,0.04281873404979706
8,101,5.571196334064007
8,201,11.451223912835122
8,301,17.059352277219297
8,401,22.43179872781038
8,summary,0.5590662526593329,0.8187804179788147,6986
9,1,0.056786751747131346
9,101,5.126349879801273
9,201,10.510385946929455
9,301,15.57819323092699
9,401,20.688994313776494
9,summary,0.5135518026706556,0.8406813627254509,6986
10,1,0.06644784212112427
10,101,4.6886937960982324
10,201,9.61266182810068
10,301,14.46029527783394
10,401,19.270004165172576
10,summary,0.48291748963313463,0.8522759805324935,6986
"""

# A multimodal trainer's list of per-epoch training losses (its `loss_log.txt`, written with `str(list)`), the first
# the lowest: 1.05 → 1.68 by epoch 16, about 1.5 to epoch 99. Source:
# MissingJoe/OGM-GE_CVPR2022@f8e773f8be83bdb0e07706f1933ec05415e1dcce:loss_log.txt
_LOSS_LIST = (
    "[1.0490270853042603, 1.0680480003356934, 1.1406527757644653, 1.1806983947753906, 1.3270788192749023, "
    "1.3163621425628662, 1.3017792701721191, 1.4827401638031006, 1.4630484580993652, 1.5213443040847778, "
    "1.578468680381775, 1.5616166591644287, 1.4995341300964355, 1.5413835048675537, 1.5133265256881714, "
    "1.583482027053833, 1.676746129989624, 1.5517791509628296, 1.672929048538208, 1.5170446634292603, "
    "1.5280086994171143, 1.5571720600128174, 1.6046442985534668, 1.541593313217163, 1.6084611415863037, "
    "1.6489793062210083, 1.5346475839614868, 1.524461269378662, 1.4733154773712158, 1.6432678699493408, "
    "1.5014688968658447, 1.5286239385604858, 1.6241810321807861, 1.5398701429367065, 1.6463102102279663, "
    "1.546028971672058, 1.5072014331817627, 1.5541507005691528, 1.5181784629821777, 1.539919376373291, "
    "1.5270912647247314, 1.4761189222335815, 1.5266813039779663, 1.5375043153762817, 1.5273998975753784, "
    "1.468686819076538, 1.5101675987243652, 1.5167059898376465, 1.5972497463226318, 1.5050262212753296, "
    "1.5266178846359253, 1.5219422578811646, 1.5092183351516724, 1.5715547800064087, 1.4979406595230103, "
    "1.498030424118042, 1.5913165807724, 1.5901726484298706, 1.4856382608413696, 1.5251835584640503, "
    "1.458817958831787, 1.5049374103546143, 1.5702763795852661, 1.6097592115402222, 1.6096901893615723, "
    "1.5791761875152588, 1.5029839277267456, 1.6091567277908325, 1.6088558435440063, 1.5786889791488647, "
    "1.4980379343032837, 1.6232713460922241, 1.6687315702438354, 1.5022207498550415, 1.6228210926055908, "
    "1.5031300783157349, 1.5117002725601196, 1.6095449924468994, 1.5256088972091675, 1.5806454420089722, "
    "1.501017451286316, 1.5220552682876587, 1.6053072214126587, 1.6085418462753296, 1.5666232109069824, "
    "1.631201982498169, 1.5922602415084839, 1.5759366750717163, 1.4729465246200562, 1.5118046998977661, "
    "1.4820256233215332, 1.5431069135665894, 1.5854299068450928, 1.543035864830017, 1.6062241792678833, "
    "1.542162299156189, 1.4808573722839355, 1.5331519842147827, 1.5782138109207153, 1.4715789556503296]"
)


def test_a_loss_climbing_at_each_of_its_last_five_records_to_its_highest_is_divergence(tmp_path):
    """Five displays of a smoothed loss, each above the one before, ×1.5 in all and the log's highest where it ends:
    too few for a trend test and no validation loss beside it, a climb a user reads at a glance."""
    root = tmp_path / "r"
    root.mkdir()
    (root / "train.log").write_text(_CAFFE_CLIMB + "\n")
    run = load_run(root, tmp_path / "f.duckdb")
    [f] = Divergence().check(run)
    assert f.severity == "critical" and f.evidence["rising_points"] == 4
    assert "12.12 at step 200 to 18.3 at step 240" in f.summary
    assert list(Divergence(climb_points=6).check(run)) == []


def test_a_cumulative_sum_that_climbs_every_epoch_is_no_divergence(tmp_path):
    """The same climb at every row over the last five, where every earlier epoch climbed as high: the log does not end
    on its highest point, so the climb is the sum's own sawtooth."""
    root = tmp_path / "r"
    root.mkdir()
    (root / "training_log.csv").write_text(_CUMSUM_CSV + "\n")
    assert list(Divergence().check(load_run(root, tmp_path / "f.duckdb"))) == []


def test_a_loss_never_better_than_its_first_record_is_divergence(tmp_path):
    """A hundred epochs none of which gets below the first: the loss climbs ×1.6 over sixteen epochs and stays there.
    Every rule measuring a rise from a minimum reached after progress is silent (its growth is ×1.47 from the
    smoothed start, its trend flat after epoch 16)."""
    root = tmp_path / "r"
    root.mkdir()
    (root / "loss_log.txt").write_text("".join(_LOSS_LIST))
    run = load_run(root, tmp_path / "f.duckdb")
    [f] = Divergence().check(run)
    assert f.severity == "critical" and "never better than its first value 1.049 at step 0" in f.summary
    assert "all 99 later records stand above it" in f.summary
    assert list(Divergence(never_better=1.5).check(run)) == []


def test_a_loss_blown_up_at_its_first_step_is_divergence_though_it_falls_back_part_of_the_way(tmp_path):
    """The first optimizer step throws the loss from 93 to 2e14; it then falls for eighty steps, but ends near 6e10,
    eight orders of magnitude above where it began. A falling tail alone reads as a first record logged too low; one
    that stays orders of magnitude above it, with a step logged at every step, is a blow-up never recovered."""
    steps = np.arange(84)
    loss = np.concatenate([[92.77], 2.1e14 * np.geomspace(1.0, 3e-4, 83)])
    run = load_run(write_tb(tmp_path / "r", {"train_loss": (steps, loss)}), tmp_path / "f.duckdb")
    [f] = Divergence().check(run)
    assert f.severity == "critical" and "never better than its first value 92.77 at step 0" in f.summary
    assert f.evidence["growth_factor"] > 1e8
    assert list(Divergence(never_orders=1e10).check(run)) == []


def test_a_first_record_logged_too_low_by_its_interval_is_no_divergence(tmp_path):
    """One batch's loss summed and divided by a logging interval of 5000 steps: the first record is 5000 × under the
    loss, which then falls. Its end stands more than three orders above that first record, but no more than the
    interval explains."""
    steps = np.arange(0, 60_001, 5000)
    loss = np.concatenate([[2.30 / 5000], np.geomspace(2.30, 0.80, 12)])
    run = load_run(write_tb(tmp_path / "r", {"train_loss": (steps, loss)}), tmp_path / "f.duckdb")
    assert run.arrays("loss")[1].size == 13
    assert list(Divergence().check(run)) == []


def test_a_short_or_noisy_log_above_its_first_record_is_no_divergence(tmp_path):
    """Never better than the first record, but in six records (four ranks' single batches, healthy) or in an excerpt
    of single-batch losses swinging ×1.5 record to record whose first was a low one: no level moved."""
    root = tmp_path / "a"
    root.mkdir()
    (root / "train.log").write_text(_WENET_RANKS + "\n")
    assert list(Divergence().check(load_run(root, tmp_path / "a.duckdb"))) == []
    root = tmp_path / "b"
    root.mkdir()
    (root / "train.log").write_text(_PIPS_STEPS + "\n")
    run = load_run(root, tmp_path / "b.duckdb")
    assert run.arrays("loss")[1].size == 12
    assert list(Divergence().check(run)) == [] and list(Divergence(never_better=1.2).check(run)) == []


# A modular-addition transformer's loss curve (its own CSV, one row per 50 steps): training cross-entropy falls from
# 2.8 to 0.001 and wanders up to 0.009 over the last third of the run while it generalises (its label: grokking).
# The header, the first three rows, then every third row. Source:
# RemiliaScar1ett/TransGrokking@d647066a9cc1db69536a32e705ff33bbcc54556f:results/m1_ce_reference/loss_curve.csv
_NEAR_ZERO_CSV = """\
step,train_cross_entropy,test_cross_entropy
50,2.8192813396453857,7.058824062347412
100,0.1707446426153183,15.368352890014648
150,0.015969211235642433,21.229026794433594
200,0.009306780993938446,22.433496475219727
350,0.0044709788635373116,23.979297637939453
500,0.002887388924136758,24.969039916992188
650,0.0020235206466168165,25.853214263916016
800,0.0014788478147238493,26.659011840820312
950,0.001116511644795537,27.381258010864258
1100,0.0008611846133135259,28.019256591796875
1250,0.0006747502484358847,28.581310272216797
1400,4.371933937072754,4.9960432052612305
1550,1.2917509078979492,10.194058418273926
1700,0.02433655597269535,17.819761276245117
1850,0.01495847012847662,18.20048713684082
2000,0.011875217780470848,18.28204345703125
2150,0.0096881790086627,18.52193832397461
2300,0.007881361059844494,18.94108772277832
2450,0.006349508184939623,19.538990020751953
2600,0.005037884693592787,20.302078247070312
2750,0.003946382086724043,21.214962005615234
2900,0.0030191107653081417,22.248937606811523
3050,0.0023118651006370783,23.260028839111328
3200,0.0017826652619987726,24.2099609375
3350,0.0013917934847995639,25.055240631103516
3500,4.434091091156006,4.735742092132568
3650,3.8435800075531006,5.945521354675293
3800,2.2548627853393555,8.768773078918457
3950,0.15155363082885742,15.211688995361328
4100,0.03153408318758011,16.86767578125
4250,0.02031492069363594,16.41973114013672
4400,0.015988387167453766,15.772987365722656
4550,0.013053958304226398,15.19001293182373
4700,0.010690147057175636,14.709134101867676
4850,0.008733951486647129,14.319084167480469
5000,0.00699275080114603,14.057482719421387
5150,0.005544485058635473,13.867414474487305
5300,0.004349526483565569,13.767435073852539
5450,0.0034094350412487984,13.76901912689209
5600,0.0026165670715272427,13.77983283996582
5750,0.002004820853471756,13.689352989196777
5900,4.3053998947143555,4.638466835021973
6050,0.13982722163200378,0.823123037815094
6200,0.013445054180920124,0.35478898882865906
6350,0.007513610180467367,0.2412053644657135
6500,0.005485736299306154,0.1668718308210373
6650,0.004561869893223047,0.11281821131706238
6800,0.003971144091337919,0.07612628489732742
6950,0.0035088208969682455,0.05372845008969307
7100,0.0031033793929964304,0.03950995206832886
7250,0.0027563071344047785,0.03189101070165634
7400,2.6341373920440674,3.013625144958496
7550,0.008237425237894058,0.0725821927189827
7700,0.0052176835015416145,0.0384172685444355
7850,0.004563558381050825,0.025017552077770233
8000,0.004255068954080343,0.01782916858792305
8150,0.004012363031506538,0.013381609693169594
8300,0.003703625174239278,0.010507929138839245
8450,2.99916672706604,3.2024314403533936
8600,0.020583830773830414,0.051679760217666626
8750,0.012373292818665504,0.02809145487844944
8900,0.010469361208379269,0.021624039858579636
9050,0.009271791204810143,0.01799919269979
9200,0.00817278865724802,0.015269818715751171
9350,0.007142424583435059,0.013177752494812012
9500,0.006211550906300545,0.011516041122376919
9650,0.00538999866694212,0.010214338079094887
9800,0.004670953843742609,0.009151367470622063
9950,0.004045844543725252,0.00827636756002903
10100,0.9442147016525269,1.0861316919326782
10250,0.012330819852650166,0.026939542964100838
10400,0.008459349162876606,0.0167380440980196
10550,0.007911751046776772,0.013866639696061611
10700,0.007655643858015537,0.01231072936207056
10850,0.007229348178952932,0.010925734415650368
11000,0.006629657931625843,0.009622346609830856
11150,0.005960017908364534,0.008423388935625553
11300,0.005300427787005901,0.0073524173349142075
11450,0.004680778831243515,0.006431336514651775
11600,0.004112910479307175,0.005634122062474489
11750,0.003620678558945656,0.004988810047507286
11900,0.003183708293363452,0.004450968932360411
12050,0.002797390567138791,0.0039809634909033775
12200,0.002453672466799617,0.0035692763049155474
12350,2.4379937648773193,2.593675374984741
12500,0.01593860797584057,0.05322159826755524
12650,0.007280374877154827,0.024416934698820114
12800,0.005699825938791037,0.011908836662769318
12950,0.005116625223308802,0.00793393049389124
13100,0.004818524233996868,0.006573103833943605
13250,0.004617893602699041,0.005893349647521973
13400,0.004383656661957502,0.005377529188990593
13550,0.004079286940395832,0.004882095847278833
13700,0.0037262942641973495,0.004388854838907719
13850,0.0033611622639000416,0.003917896654456854
14000,0.0030114268884062767,0.0034865441266447306
14150,0.002688309643417597,0.0030985260382294655
14300,1.6569275856018066,1.8665056228637695
14450,0.010061047971248627,0.09497027844190598
14600,0.0048260376788675785,0.0428551621735096
14750,0.003930043429136276,0.022245066240429878
14900,0.0036069282796233892,0.012562945485115051
15050,0.0033961161971092224,0.008386102505028248
15200,0.0031685892026871443,0.006566242780536413
15350,4.4170660972595215,4.487430572509766
15500,0.26038047671318054,0.36172911524772644
15650,0.011528797447681427,0.04910201206803322
15800,0.007501592859625816,0.03282061964273453
15950,0.006116874516010284,0.02368382178246975
16100,0.0053312890231609344,0.01653890125453472
16250,0.004847282078117132,0.012071679346263409
16400,0.004391462076455355,0.008849464356899261
16550,0.00394838722422719,0.00692023104056716
16700,0.003500488121062517,0.005581346806138754
16850,0.003077662317082286,0.0046495674178004265
17000,0.0026986398734152317,0.003968395758420229
17150,0.0023636945988982916,0.0034145801328122616
17300,0.0020653055980801582,0.002911827526986599
17450,0.0017978191608563066,0.0024885758757591248
17600,1.2195098400115967,1.379637598991394
17750,0.0160960890352726,0.10339147597551346
17900,0.008397557772696018,0.0805663913488388
18050,0.006687079556286335,0.06280864775180817
18200,0.005635017529129982,0.0496271587908268
18350,4.8637213706970215,4.9482102394104
18500,1.4921144247055054,1.6888777017593384
18650,0.08641175180673599,0.23964132368564606
18800,0.027494041249155998,0.16530050337314606
18950,0.018360011279582977,0.12528499960899353
19100,0.014503924176096916,0.09363757073879242
19250,0.01213875226676464,0.07397252321243286
19400,0.01019362360239029,0.06053371727466583
19550,0.008661482483148575,0.0504298210144043
19700,0.007391403894871473,0.04417649656534195
19850,0.006322118453681469,0.03940625116229057
20000,0.005428866483271122,0.03560838848352432
"""


def test_a_converged_loss_wandering_over_a_minimum_near_zero_is_no_divergence(tmp_path):
    """×8 over a minimum of 0.001 after a fall from 2.8: a rise of 0.3% of the first value, tiny next to what the
    loss learned. Read from the minimum alone it is a divergence that stays (Mann–Whitney)."""
    root = tmp_path / "r"
    root.mkdir()
    (root / "loss_curve.csv").write_text(_NEAR_ZERO_CSV)
    run = load_run(root, tmp_path / "f.duckdb")
    assert list(Divergence().check(run)) == []
    [f] = Divergence(tiny_rise=0.0).check(run)
    assert f.evidence["final_level"] / f.evidence["min_level"] > 5


# A BasicSR-style logger's lines (an event-guided deblurring fine-tune whose loss is minus the PSNR), as printed:
# github.com/AHupuJR/EFNet/issues/12; the 24-minute validation between iterations 152 and 153 left out.
PSNR_LOSS_INTO_INF = """\
2023-06-16 21:58:43,765 INFO: [debug..][epoch:  0, iter:     151, lr:(2.000e-04,2.000e-05,)] [eta: 395 days, 5:42:49, time (data): 0.489 (0.001)] l_pix: -3.0743e+01
2023-06-16 21:58:44,519 INFO: [debug..][epoch:  0, iter:     152, lr:(2.000e-04,2.000e-05,)] [eta: 392 days, 15:56:30, time (data): 0.482 (0.001)] l_pix: -2.8084e+01
2023-06-16 22:22:48,546 INFO: [debug..][epoch:  0, iter:     153, lr:(2.000e-04,2.000e-05,)] [eta: 411 days, 19:13:58, time (data): 0.490 (0.001)] l_pix: -3.0197e+01
2023-06-16 22:22:49,036 INFO: [debug..][epoch:  0, iter:     154, lr:(2.000e-04,2.000e-05,)] [eta: 409 days, 3:35:46, time (data): 0.489 (0.001)] l_pix: -2.7506e+01
2023-06-16 22:22:49,505 INFO: [debug..][epoch:  0, iter:     155, lr:(2.000e-04,2.000e-05,)] [eta: 406 days, 12:46:06, time (data): 0.470 (0.001)] l_pix: inf
2023-06-16 22:22:49,988 INFO: [debug..][epoch:  0, iter:     156, lr:(2.000e-04,2.000e-05,)] [eta: 403 days, 22:44:43, time (data): 0.482 (0.002)] l_pix: nan
"""


def test_a_loss_that_swings_within_its_noise_and_then_turns_inf_is_nan_loss_alone(tmp_path):
    """A loss alternating ±10% from record to record (-30.7, -28.1, -30.2, -27.5) that then turns inf and NaN: no
    rise of its own stands before the NaN (it spans one typical move), so the NaN is nan_loss's finding alone. The
    same records climbing at each step into the NaN stay a divergence."""
    root = tmp_path / "r"
    root.mkdir()
    (root / "train.log").write_text(PSNR_LOSS_INTO_INF)
    run = load_run(root, tmp_path / "f.duckdb")
    assert list(Divergence().check(run)) == []
    climbing = PSNR_LOSS_INTO_INF.replace("-3.0197e+01", "-2.6197e+01").replace("-2.7506e+01", "-2.2506e+01")
    (root / "train.log").write_text(climbing)
    [f] = Divergence().check(load_run(root, tmp_path / "g.duckdb"))
    assert f.evidence["ends_nonfinite"] and f.evidence["min_level"] == np.float32(-30.743)


# A knowledge-graph embedding trainer's epoch table as printed (github.com/facebookresearch/kbc/issues/10): the
# column headed "Train(loss)" holds the training set's MRR, beside the validation and test MRR.
SCORE_UNDER_A_LOSS_HEADER = """\
Epoch	Train(loss)	Valid(MRR)	Test(MRR)
0	0.28557111	0.21563877	0.21695131
1	0.51367164	0.34545964	0.34569839
2	0.71805871	0.48132567	0.47928540
3	0.82222313	0.56841329	0.56578165
4	0.88000029	0.62548071	0.62345359
5	0.91472250	0.66596788	0.66418925
6	0.93698156	0.69591397	0.69439766
7	0.95358196	0.71943289	0.71805435
8	0.96355888	0.73751086	0.73588541
9	0.97203004	0.75185460	0.75069633
10	0.97879598	0.76432011	0.76255512
11	0.98380214	0.77389356	0.77257067
12	0.98672199	0.78240332	0.78084379
13	0.98983303	0.78926352	0.78804612
14	0.99128643	0.79544601	0.79427382
15	0.99359611	0.80076903	0.79957074
16	0.99423641	0.80527973	0.80403480
17	0.99501967	0.80940974	0.80801624
18	0.99618039	0.81269062	0.81145489
19	0.99689016	0.81547362	0.81428304
20	0.99707615	0.81818026	0.81722468
21	0.99751508	0.82045570	0.81961802
22	0.99799338	0.82271165	0.82185829
23	0.99809900	0.82455397	0.82380486
24	0.99842545	0.82617694	0.82553080
25	0.99881667	0.82775342	0.82701689
26	0.99896574	0.82907116	0.82846227
27	0.99898544	0.83034629	0.82978585
28	0.99923363	0.83151683	0.83103910
29	0.99919987	0.83264852	0.83193302
30	0.99923709	0.83367193	0.83296466
31	0.99939093	0.83448964	0.83397171
32	0.99949011	0.83532438	0.83483064
33	0.99951237	0.83608401	0.83568957
34	0.99949709	0.83680180	0.83645040
"""


def test_a_score_that_saturates_at_one_under_a_loss_header_is_no_divergence(tmp_path):
    """A "loss" within [0, 1] that rises at nearly every epoch, ever more slowly, closing 99.9% of its distance to 1
    (0.2856 -> 0.9995) is a score's learning curve: the model improving, not a loss climbing. The same values turned
    into an accelerating climb away from a floor (a loss that gets worse ever faster) stay a divergence."""
    root = tmp_path / "r"
    root.mkdir()
    (root / "log.txt").write_text(SCORE_UNDER_A_LOSS_HEADER)
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.has("loss") and list(Divergence().check(run)) == []
    values = np.array([float(r.split()[1]) for r in SCORE_UNDER_A_LOSS_HEADER.splitlines()[1:]])
    climbing = 1.2856 - values[::-1]  # the same steps, the large ones last: an acceleration, not a saturation
    steps = np.arange(values.size)
    [f] = Divergence().check(load_run(write_tb(tmp_path / "c", {"loss": (steps, climbing)}), tmp_path / "c.duckdb"))
    assert f.severity == "critical"
