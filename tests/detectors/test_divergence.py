"""divergence on real TensorBoard event files."""

import numpy as np
import pytest

from forensics.judge.detectors import Divergence, FlatLoss
from tests.paths import REAL_RUNS_TEST
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
