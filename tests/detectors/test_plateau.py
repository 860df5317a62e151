"""plateau on real TensorBoard event files."""


import contextlib

import numpy as np
import pytest

from forensics.judge.detectors import FlatLoss, Plateau
from tests.paths import REAL_RUNS_TEST
from tests.runwriters import curve, load_run, write_tb

needs_second_set = pytest.mark.skipif(not (REAL_RUNS_TEST / "pl_lstm_v0").is_dir(),
                                      reason="shared/real_runs_test is not beside the checkout")



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
    # without the noise guards (the fall's, the initial level's, the trend's) the 20% "fall" reads as a plateau
    assert list(Plateau(min_drop_sigmas=0.0, head_sigmas=0.0, max_pace=float("inf")).check(run))


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


# Epoch means of an image captioner's loss as its script prints them (kapsaquarius/Image-Captioning@b0a6d17,
# training_logs.txt): from ln 50257 = 10.82, a 6% fall in two epochs, then 13 epochs within 0.4%.
CAPTION_MEANS = [10.804, 10.149, 10.109, 10.089, 10.085, 10.083, 10.082, 10.080, 10.078, 10.075, 10.073, 10.072,
                 10.071, 10.070, 10.070]


def test_a_short_log_that_falls_then_holds_its_level_high_is_a_plateau(tmp_path):
    """Under 20 points (10 to 19 epoch means), a loss that falls from its first value and then holds a level at 3/4 of
    it or more for the rest of the log, its trend moving under 2% (`_held`), is a plateau: the fall in two epochs
    hides from a median of the first three. The same shape settling at half its first value is convergence."""
    def printed(means):
        return "".join(f"Epoch: {i} | Loss: {v:.3f}: 100%|##########| 2086/2086 [14:08<00:00,  2.46it/s]\n"
                       for i, v in enumerate(means, 1))

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "train.log").write_text(printed(CAPTION_MEANS))
    run = load_run(tmp_path / "a", tmp_path / "a.duckdb")
    [f] = Plateau().check(run)
    assert f.evidence["points"] == 15 and f.evidence["length_fraction"] > 0.85 and f.evidence["initial_level"] == 10.804
    assert Plateau().unavailable(run) is None
    low = [v if i == 0 else v / 2 for i, v in enumerate(CAPTION_MEANS)]  # the same hold at half the first value
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "train.log").write_text(printed(low))
    assert list(Plateau().check(load_run(tmp_path / "b", tmp_path / "b.duckdb"))) == []


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


def test_a_small_steady_validation_fall_under_a_training_stall_is_no_plateau(tmp_path):
    """Under dropout the training loss stalls at 67% of its start while validation is lower at
    nearly every one of 100 evaluations, 3.7% over the stall (under the 5% rule, far beyond its noise). The same
    3.7% as noise around a flat validation loss leaves the plateau standing."""
    rng = np.random.default_rng(8)
    steps = np.arange(0, 3000, 10)
    train = (1.6 + 0.8 * np.exp(-steps / 150)) * (1 + rng.normal(0, 0.01, steps.size))
    vs = np.arange(30, 3001, 30)
    steady = 1.5 - 0.055 * (vs - vs[0]) / (vs[-1] - vs[0]) + rng.normal(0, 0.001, vs.size)
    noisy = 1.48 + rng.normal(0, 0.03, vs.size)
    run = load_run(write_tb(tmp_path / "a", {"train/loss": (steps, train), "val/loss": (vs, steady)}), tmp_path / "a.duckdb")
    assert Plateau()._stall(run) is not None and list(Plateau().check(run)) == []
    run = load_run(write_tb(tmp_path / "b", {"train/loss": (steps, train), "val/loss": (vs, noisy)}), tmp_path / "b.duckdb")
    assert len(list(Plateau().check(run))) == 1


@needs_second_set
@pytest.mark.parametrize("name,start,level", [("pl_lstm_v0", 0.61, 0.2506), ("pl_lstm_v6", 1.52, 0.2500)])
@pytest.mark.needs_shared
def test_a_stall_at_a_constant_predictions_mse_is_a_plateau_at_any_level(tmp_path, name, start, level):
    """Issue 24: a real Lightning metrics.csv of a toy LSTM trained with MSE on binary targets. The loss falls 61% (86%)
    from its start and then settles at 0.25, the MSE of predicting 0.5 for every input, and never gets below it:
    under the 55% level rule that is convergence, but a loss that stops at a constant prediction's loss learned only
    the targets' mean. The same code reaches 0.0012 in another version: 0.25 is no floor."""
    run = load_run(REAL_RUNS_TEST / name, tmp_path / "f.duckdb")
    [f] = Plateau().check(run)
    ev = f.evidence
    assert ev["constant_predictor_level"] == 0.25 and abs(ev["level"] - level) < 1e-3
    assert abs(ev["initial_level"] - start) < 0.01 and ev["fraction_of_initial"] < 0.55
    assert "constant prediction (0.25)" in f.summary
    # the constant predictor's level is what decides the level rule (held flat to the end, the held rule finds it too,
    # and where the loss repeats to its fifth digit to the end, the frozen-loss rule)
    assert list(Plateau(constant_tol=0.0, held_move=0.0, flat_loss=FlatLoss(frozen_records=10**6)).check(run)) == []
    assert list(FlatLoss().check(run)) == []  # it fell: not flat


@needs_second_set
@pytest.mark.needs_shared
def test_a_curve_that_falls_briefly_then_stalls_is_a_plateau_not_flat_loss(tmp_path):
    """Issue 24: a real console output.log of a small transformer, 500 steps: the loss falls 2.815 -> 2.611 in the
    first 25 steps (6% below the median of the first three) and then stays at 2.60-2.63 to the end. It learned and
    then stopped: plateau, and not flat_loss, whose first-tenth median (2.61) hides the fall. The fall is quicker
    than the smoothing window, so the plateau starts where the points enter the band."""
    run = load_run(REAL_RUNS_TEST / "log_tfplateau_q4", tmp_path / "f.duckdb")
    [f] = Plateau().check(run)
    assert f.step <= 25 and f.evidence["length_fraction"] > 0.9 and 0.9 < f.evidence["fraction_of_initial"] < 0.95
    assert list(FlatLoss().check(run)) == []
    assert list(FlatLoss(learned_fall=0.1).check(run))  # the shared boundary (stats.learned) is what decides


def test_a_loss_flat_from_its_first_points_is_flat_loss_not_plateau(tmp_path):
    """The other side of the boundary: a loss that never falls 5% below its first points (a dead model at
    0.25 with minibatch noise) is flat_loss's, and plateau stays silent."""
    rng = np.random.default_rng(3)
    steps = np.arange(0, 3000, 10)
    loss = 0.2522 - 0.002 * (1 - np.exp(-steps / 300)) + rng.normal(0, 2e-4, steps.size)
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    assert list(Plateau().check(run)) == []
    assert [f.kind for f in FlatLoss().check(run)] == ["flat_loss"]


def test_a_loss_frozen_by_an_lr_drop_just_after_it_settled_is_a_plateau(tmp_path):
    """Issue 24 class 8, a plateau under a tiny LR: the loss has nearly settled at 30% of its start when the LR drops
    ×1e-3 at 8% of the run (milestones given in steps), and stays there. The smoothed curve enters the band a few
    points before the drop, so the LR at the plateau's first step has not fallen yet: the median LR over the
    plateau has. TensorBoard keeps the LR as float32, where 1e-4 -> 1e-4 * 1e-3 reads ×999.99996."""
    rng = np.random.default_rng(5)
    steps = np.arange(2, 1602, 2)
    drop = 128
    level = 0.7 + 1.6 * np.exp(-steps / 25)
    level[steps >= drop] = level[steps < drop][-1]
    loss = level * (1 + rng.normal(0, 0.01, steps.size))
    lr = np.where(steps < drop, 1e-4, 1e-4 * 1e-3)  # as MultiStepLR(gamma=1e-3) computes it
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss), "lr": (steps, lr)}), tmp_path / "f.duckdb")
    [f] = Plateau().check(run)
    assert f.step < drop and 999 < f.evidence["lr_fall_at_start"] < 1000 and f.evidence["fraction_of_initial"] < 0.4
    assert list(Plateau(lr_fall=1002.0, held_move=0.0).check(run)) == []  # the LR collapse decides the level rule


def test_a_noisy_loss_still_falling_at_its_earlier_pace_is_no_plateau(tmp_path):
    """Per-log losses with a wide spread (one point's noise sigma a fifth of the whole fall) that fall steadily over
    the whole run: the smoothed curve sits in a wide band for the last half, and the fall inside it is within one
    point's 2σ, yet beyond the trend's own uncertainty over those ~40 points (σ·√(12/n)) and at more than a quarter
    of the pace before it: still learning. A quick fall, then a level that holds in the same spread, is a plateau."""
    rng = np.random.default_rng(2)
    steps = np.arange(1, 81) * 25
    steady = 0.45 - 0.2 * (1 - np.exp(-steps / 1500)) / (1 - np.exp(-2000 / 1500))  # 0.45 -> 0.25, steadily
    noise = rng.normal(0, 0.04, steps.size)
    run = load_run(write_tb(tmp_path / "a", {"loss": (steps, steady + noise)}), tmp_path / "a.duckdb")
    assert list(Plateau().check(run)) == []
    # without the pace rule the noisy fall reads as a stall (at a level rule that admits its end, 0.56 of its start)
    assert list(Plateau(max_pace=10.0, min_level=0.5).check(run))
    flat = 0.90 + 0.30 * np.exp(-steps / 150.0)  # 1.2 -> 0.9: the level holds at 75% of its start
    run = load_run(write_tb(tmp_path / "b", {"loss": (steps, flat + noise)}), tmp_path / "b.duckdb")
    [f] = Plateau().check(run)
    assert f.evidence["fraction_of_initial"] > 0.7


def test_a_stall_that_held_until_a_restart_and_was_beaten_after_it_is_a_plateau(tmp_path):
    """A run stopped on a stall and resumed from an earlier checkpoint (the epoch goes back while the steps rise):
    the first segment falls to 30% of its start and holds there for its last 40 epochs; after the restart the loss
    falls to half that level. Judged as one curve it keeps falling; judged per segment, the stall was not the run's
    floor. The same restart after which the loss stays at the stall level is convergence, and silent."""
    rng = np.random.default_rng(4)
    e1 = np.arange(1, 101)
    seg1 = 1.6 + 4.0 * np.exp(-e1 / 12.0)  # 5.3 -> 1.6, flat from epoch ~60
    e2 = np.arange(71, 201)
    for later, expect in ((0.8 + 0.8 * np.exp(-(e2 - 71) / 30.0), 1), (1.6 + 0 * e2, 0)):
        loss = np.r_[seg1, later] * (1 + rng.normal(0, 0.002, e1.size + e2.size))
        steps = np.arange(1, loss.size + 1) * 3
        run = load_run(write_tb(tmp_path / f"r{expect}", {"loss": (steps, loss), "epoch": (steps, np.r_[e1, e2])}),
                       tmp_path / f"r{expect}.duckdb")
        found = list(Plateau().check(run))
        assert len(found) == expect, [f.summary for f in found]
        if expect:
            [f] = found
            assert f.evidence["restart_step"] == 303 and f.step_end == 300 and f.evidence["later_floor"] < 0.9
            assert "until the run was restarted at step 303" in f.summary


def test_a_noisy_start_drawn_low_makes_no_plateau(tmp_path):
    """Single-batch losses spread ±30% that fall from ~2 to ~0.95 (under half their start) and creep on: the
    first three points drew low (a median of 1.5), so the tail reads as 60% of "its start" against that draw."""
    rng = np.random.default_rng(5)
    t = np.arange(600)
    mean = 1.1 + 0.9 * np.exp(-t / 60) - 0.15 * t / 600
    loss = mean * np.exp(rng.normal(0, 0.3, t.size) - 0.3 ** 2 / 2)
    run = load_run(write_tb(tmp_path / "r", {"loss": ((t + 1) * 10, loss)}), tmp_path / "f.duckdb")
    assert list(Plateau().check(run)) == []
    [f] = Plateau(head_sigmas=0.0).check(run)  # the initial level's noise is what decides
    assert f.evidence["fraction_of_initial"] > 0.55


@pytest.mark.parametrize("seed", [4, 5, 9, 10])
def test_a_stall_the_few_noisy_points_cannot_show_is_no_plateau(tmp_path, seed):
    """An excerpt of 29 noisy records (±6%): the loss falls 23 → 14.5 over 16 of them, then on at a third of that
    pace. The fall over the last 13 is not significant, yet the fall their trend allows is learning at a quarter of
    the earlier pace or more: no stall is shown."""
    rng = np.random.default_rng(seed)
    t = np.arange(29)
    mean = np.where(t < 16, 23.0 - 0.55 * t, 14.5 - 0.16 * (t - 16))
    loss = mean * (1 + rng.normal(0, 0.06, t.size))
    run = load_run(write_tb(tmp_path / "r", {"loss": ((t + 3) * 100, loss)}), tmp_path / "f.duckdb")
    assert list(Plateau().check(run)) == []


def _to_chance(level: float, n: int = 60, fall: int = 3, start: float = 0.79, noise: float = 2e-4, seed: int = 0):
    """A per-epoch loss that falls from `start` to `level` within `fall` points and sits there with `noise`."""
    rng = np.random.default_rng(seed)
    steps = np.arange(n)
    loss = level + (start - level) * np.exp(-steps / max(fall / 3, 0.5)) + rng.normal(0, noise, n)
    return steps, loss


def test_a_loss_that_falls_to_ln_2_and_sits_there_is_a_plateau_at_chance_level(tmp_path):
    """A binary classifier whose loss falls from its first epoch and then sits at ln 2 = 0.6931 for the rest of the
    run learned the prior and nothing else: a plateau at chance, far below its first value, with no class count."""
    run = load_run(write_tb(tmp_path / "r", {"loss": _to_chance(np.log(2))}), tmp_path / "f.duckdb")
    [f] = Plateau().check(run)
    assert f.evidence["chance_k"] == 2 and f.evidence["length_fraction"] > 0.8
    assert "chance level" in f.summary and "ln 2 = 0.6931" in f.summary and f.summary.startswith("loss falls from 0.79")


def test_a_loss_at_a_declared_class_counts_chance_level_is_a_plateau_in_a_short_log(tmp_path):
    """Twelve epochs of a 10-class model falling from 3.5 to ln 10 within its 2% band (noise 1%): the config
    declares the class count, so the level is judged against ln 10 even where it matches no ln k exactly."""
    steps, loss = _to_chance(np.log(10) * 1.01, n=12, fall=2, start=3.5, noise=0.01, seed=1)
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}, config={"num_classes": 10}), tmp_path / "f.duckdb")
    [f] = Plateau().check(run)
    assert f.evidence["chance_k"] == 10 and "num_classes = 10 in the config" in f.summary


def test_chance_level_twins_stay_silent(tmp_path):
    """The healthy twins: a loss that passes ln 2 and goes on falling, one that sits at ln 2 from its first point
    (flat_loss's: it never fell), and one that stalls just off ln 2 (0.70: no class count, no ln k it matches)."""
    steps, loss = _to_chance(np.log(2))
    passing = np.where(steps < 5, loss, np.log(2) * np.exp(-(steps - 5) / 20))
    cases = {"passes": passing, "from_the_start": _to_chance(np.log(2), start=np.log(2))[1],
             "near": _to_chance(0.70)[1]}
    for name, values in cases.items():
        run = load_run(write_tb(tmp_path / name, {"loss": (steps, values)}), tmp_path / f"{name}.duckdb")
        assert [f for f in Plateau().check(run) if "chance_k" in f.evidence] == [], name


def _held(n: int = 50, level: float = 0.32, creep: float = 0.0, seed: int = 0):
    """A per-epoch loss that halves in its first epoch, then sits at `level` (noise 0.3%) while its trend takes
    `creep` of the level off over the rest of the run."""
    rng = np.random.default_rng(seed)
    steps = np.arange(n)
    loss = level * (1 + creep * (1 - steps / (n - 1))) * (1 + rng.normal(0, 0.003, n))
    loss[0] = 2.1 * level
    return steps, loss


def test_a_loss_held_flat_after_a_first_epoch_fall_is_a_plateau_at_any_level(tmp_path):
    """All the fall in the first epoch, then under 1% of movement for the other 49: at 48% of its first value, below
    the level rule, yet the run stopped learning after one epoch; validation beside it does not improve either."""
    steps, loss = _held()
    val = 0.315 * (1 + np.random.default_rng(1).normal(0, 0.002, steps.size))
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss), "val_loss": (steps, val)}), tmp_path / "f.duckdb")
    [f] = Plateau().check(run)
    assert f.step == 1 and abs(f.evidence["move_in_plateau"]) < 0.01 and f.evidence["fraction_of_initial"] < 0.5
    assert "holds it from step 1 to the end" in f.summary and "validation loss" in f.summary


def test_held_level_twins_stay_silent(tmp_path):
    """The healthy twins: the same fall, then a loss still creeping down 6% of its level over the run (a model
    converging slowly, as healthy runs that settle early do), and one whose validation loss still falls 8%."""
    steps, creeping = _held(creep=0.06)
    run = load_run(write_tb(tmp_path / "a", {"loss": (steps, creeping)}), tmp_path / "a.duckdb")
    assert list(Plateau().check(run)) == []
    steps, flat = _held()
    val = 0.34 * (1 - 0.08 * steps / steps[-1])
    run = load_run(write_tb(tmp_path / "b", {"loss": (steps, flat), "val_loss": (steps, val)}), tmp_path / "b.duckdb")
    assert list(Plateau().check(run)) == []


def test_a_loss_slowing_while_the_lr_still_warms_up_is_no_plateau(tmp_path):
    """Speech pre-training inside a long linear warm-up: the loss falls fast, then slowly while the LR is still
    rising at the last record. Nothing has stalled: the schedule has not reached its peak. The same curve under an
    LR that reached its peak early is a plateau."""
    steps = np.arange(200, 4601, 200)
    loss = 4.6 + 5.0 * np.exp(-(steps - 200) / 350) + 0.4 * np.exp(-(steps - 200) / 3000) + 0.01 * np.sin(steps)
    warming = 3.125e-6 * steps / 200
    run = load_run(write_tb(tmp_path / "a", {"loss": (steps, loss), "lr": (steps, warming)}), tmp_path / "a.duckdb")
    assert list(Plateau()._found(run)) and list(Plateau().check(run)) == []
    peaked = np.minimum(warming, 1e-5)
    run = load_run(write_tb(tmp_path / "b", {"loss": (steps, loss), "lr": (steps, peaked)}), tmp_path / "b.duckdb")
    assert len(list(Plateau().check(run))) == 1


def test_a_validation_loss_setting_new_bests_at_its_last_evaluations_vetoes_a_plateau(tmp_path):
    """Training stalls at 68% of its start; validation swings, then sets a new best at 4 of its last 5 evaluations,
    1.3% over the stall (under `val_fall`, and no steady fall): a sign test says the model still improves. The same
    validation values in another order (no new best at the end) leave the plateau standing, and so do new bests by a
    hair (0.3% in all, under `val_steady_fall`): no improvement a user would wait for."""
    rng = np.random.default_rng(4)
    steps = np.arange(0, 3000, 10)
    train = (1.6 + 0.8 * np.exp(-steps / 150)) * (1 + rng.normal(0, 0.01, steps.size))
    vs = np.arange(300, 3001, 300)
    best = np.array([1.52, 1.50, 1.53, 1.51, 1.54, 1.50, 1.495, 1.49, 1.485, 1.48])
    run = load_run(write_tb(tmp_path / "a", {"train/loss": (steps, train), "val/loss": (vs, best)}), tmp_path / "a.duckdb")
    assert list(Plateau()._found(run)) and list(Plateau().check(run)) == []
    shuffled = best[[9, 3, 7, 1, 5, 0, 8, 2, 6, 4]]  # no new best at the end
    run = load_run(write_tb(tmp_path / "b", {"train/loss": (steps, train), "val/loss": (vs, shuffled)}), tmp_path / "b.duckdb")
    assert len(list(Plateau().check(run))) == 1
    hair = 1.50 - 0.0005 * np.arange(vs.size)
    run = load_run(write_tb(tmp_path / "c", {"train/loss": (steps, train), "val/loss": (vs, hair)}), tmp_path / "c.duckdb")
    assert len(list(Plateau().check(run))) == 1


def test_a_few_records_flat_at_chance_after_a_large_fall_are_a_plateau_at_any_length(tmp_path):
    """A pasted solver log of five records: the loss falls ×10 from a saturated first value, then sits within ±0.4%
    for four records while the test accuracy is unchanged at 0.00028 (1/3571), the accuracy of a uniform guess
    whose loss (ln 3571 = 8.18) the loss sits at. An expert names that at a glance; the twin whose accuracy moves
    learned something, and stays too short to judge."""
    from tests.runwriters import log_messages

    found = {}
    for name, last_acc in (("stuck", "0.00028"), ("moves", "0.0413")):
        (tmp_path / name).mkdir()
        lines = ["Iteration 0, Testing net: accuracy = 0.00028"]
        for it, v in zip(range(0, 5000, 1000), [87.3366, 8.26466, 8.25553, 8.24047, 8.28462]):
            if it == 4000:
                lines.append(f"Iteration {it}, Testing net: accuracy = {last_acc}")
            lines += [f"Iteration {it}, loss = {v}", f"Iteration {it}, lr = 0.001"]
        log_messages(tmp_path / name / "train.log", lines)
        run = load_run(tmp_path / name, tmp_path / f"{name}.duckdb")
        found[name] = (Plateau().unavailable(run), list(Plateau().check(run)))
    [f] = found["stuck"][1]
    assert found["stuck"][0] is None and f.step == 1000 and f.evidence["chance_k"] == 3571
    assert "8.26" in f.summary and "0.00028" in f.summary
    assert found["moves"][0] is not None and found["moves"][1] == []


def test_a_few_points_at_a_declared_class_counts_ln_c_after_a_fall_are_a_plateau(tmp_path):
    """Six per-epoch points: 9.8 at the first, then 6.90-6.93 at ln 1000 = 6.908 with num_classes = 1000 in the
    config. The same fall to 5.0 (far below chance: learning) stays too short to judge."""
    steps = np.arange(1, 7)
    at_chance = np.array([9.8, 6.93, 6.91, 6.90, 6.92, 6.91])
    learned = np.array([9.8, 5.03, 5.01, 5.00, 5.02, 5.01])
    run = load_run(write_tb(tmp_path / "a", {"loss": (steps, at_chance)}, {"num_classes": 1000}), tmp_path / "a.duckdb")
    [f] = Plateau().check(run)
    assert f.evidence["chance_k"] == 1000 and f.step == 2
    run = load_run(write_tb(tmp_path / "b", {"loss": (steps, learned)}, {"num_classes": 1000}), tmp_path / "b.duckdb")
    assert Plateau().unavailable(run) is not None and list(Plateau().check(run)) == []


def test_a_training_stall_while_validation_rises_after_its_minimum_is_overfittings_not_a_plateau(tmp_path):
    """The training loss flattens at 1.6 from step 600 while validation, lowest at step 1000, climbs 1.5 -> 1.53
    beyond its own scatter over the evaluations after it: the stall is the model memorising, and the finding is
    overfitting's, not plateau's. The same stall beside a validation loss that stalls too is a plateau."""
    rng = np.random.default_rng(4)
    steps = np.arange(0, 3000, 10)
    train = (1.6 + 0.8 * np.exp(-steps / 150)) * (1 + rng.normal(0, 0.01, steps.size))
    vs = np.arange(100, 3001, 100)
    rising = 1.5 + 0.015 * np.maximum(0, vs - 1000) / 1000 + rng.normal(0, 0.002, vs.size)
    stalled = 1.5 + rng.normal(0, 0.002, vs.size)
    run = load_run(write_tb(tmp_path / "a", {"train/loss": (steps, train), "val/loss": (vs, stalled)}), tmp_path / "a.duckdb")
    [f] = Plateau().check(run)
    run = load_run(write_tb(tmp_path / "b", {"train/loss": (steps, train), "val/loss": (vs, rising)}), tmp_path / "b.duckdb")
    assert Plateau()._stall(run) is not None  # the training curve alone is a plateau ...
    assert list(Plateau().check(run)) == []  # ... validation rising says the model memorises


def _mmcv_log(path, loss, planned_iters, per_epoch=5000, every=50, seconds_per_iter=0.24):
    """`loss` as mmcv's TextLoggerHook prints it through Python's logging: `Epoch [e][i/n]`, the LR, and the time
    left of `planned_iters` (`eta`, str(timedelta)); the records' clock advances by the iterations' time."""
    import datetime
    import logging

    logger = logging.getLogger("mmdet")
    logger.propagate = False
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s - %(name)s - %(levelname)s - %(message)s"))
    clock = {"t": 1_611_757_726.0}

    def stamp(record):
        record.created, record.msecs = clock["t"], 0.0
        return True

    handler.addFilter(stamp)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        for k, value in enumerate(loss, 1):
            done = k * every
            clock["t"] += every * seconds_per_iter
            eta = datetime.timedelta(seconds=int((planned_iters - done) * seconds_per_iter))
            epoch, i = divmod(done - 1, per_epoch)
            logger.info(f"Epoch [{epoch + 1}][{i + 1}/{per_epoch}]\tlr: 1.000e-02, eta: {eta}, "
                        f"time: {seconds_per_iter:.3f}, data_time: 0.003, memory: 3676, loss: {value:.4f}")
    finally:
        handler.close()
        logger.removeHandler(handler)
    return path


@pytest.mark.parametrize("plan, expect", [(1, 1), (20, 0)])
def test_a_stall_in_a_log_that_stops_early_in_its_printed_plan_has_no_end(tmp_path, plan, expect):
    """A loss that falls then sits at 65% of its start over 15,000 iterations. Where the trainer's last `eta` says
    the plan ends there, the loss stalls to the end: a plateau. Where it says nineteen times as long is left, the
    log stopped at 5% of its plan: its last stretch says nothing of the run's end."""
    _, loss = curve(n=300, start=2.3, floor=1.5, tau=200)
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    _mmcv_log(run_dir / "train.log", loss, planned_iters=15_000 * plan)
    found = list(Plateau().check(load_run(run_dir, tmp_path / "f.duckdb")))
    assert len(found) == expect, [f.summary for f in found]


def test_a_stall_whose_validation_fell_then_froze_is_a_plateau(tmp_path):
    """Training falls to 65% of its start and sits there; validation falls over the stall's first evaluations,
    then reads the same to its fifth digit at every later one: the fall over the stall is no sign of learning
    when a fixed held-out set then scores identically (the weights stopped). The same validation still moving at
    its last evaluations keeps the stall silent."""
    rng = np.random.default_rng(4)
    steps = np.arange(0, 3000, 10)
    train = (1.6 + 0.8 * np.exp(-steps / 150)) * (1 + rng.normal(0, 0.01, steps.size))
    vs = np.arange(100, 3001, 100)
    falling = 1.55 - 0.3 * (vs - 100) / 2900 + rng.normal(0, 0.005, vs.size)
    frozen = 1.55 - 0.15 * (vs - 100) / 900 + rng.normal(0, 0.005, vs.size)
    frozen[10:] = 1.3912345 + rng.uniform(-2e-6, 2e-6, vs.size - 10)
    run = load_run(write_tb(tmp_path / "a", {"train/loss": (steps, train), "val/loss": (vs, frozen)}), tmp_path / "a.duckdb")
    assert Plateau()._val_improves(run, Plateau()._stall(run)["plateau_start_step"]) is not None
    [f] = Plateau().check(run)
    assert f.evidence["frozen_evals"] == 20 and f.step == 1100
    run = load_run(write_tb(tmp_path / "b", {"train/loss": (steps, train), "val/loss": (vs, falling)}), tmp_path / "b.duckdb")
    assert list(Plateau().check(run)) == []


# Records printed by an aspect-sentiment trainer (`loss: %.4f, acc: %.2f, test_acc: %.2f, f1: %.2f`, one batch's
# loss beside running accuracies), pasted in https://github.com/yangheng95/PyABSA/issues/5: its first value is one
# batch, as noisy as every later one.
_PRINTED_BATCHES = [
    (1.2473, 78.96, 70.52, 69.90), (0.6735, 78.89, 74.71, 72.78), (0.3350, 79.03, 72.69, 70.96),
    (0.7195, 79.07, 73.27, 72.28), (0.5589, 78.91, 69.08, 68.60), (0.6324, 78.65, 73.84, 72.76),
    (0.4494, 78.79, 73.12, 71.35), (0.6808, 78.82, 73.55, 71.58), (0.5765, 78.68, 74.13, 73.18),
    (0.5336, 78.71, 74.28, 73.37), (0.4067, 78.66, 75.00, 74.12), (0.1632, 78.96, 76.01, 75.00),
    (0.9298, 78.65, 75.58, 74.10), (0.4981, 78.60, 72.98, 71.30), (0.9244, 78.38, 74.28, 70.93),
    (0.6246, 78.33, 72.11, 71.65), (0.7035, 78.21, 64.88, 65.32), (0.7599, 78.08, 75.43, 73.99),
    (0.7689, 77.96, 75.29, 74.08), (0.2959, 81.25, 69.94, 69.99), (0.2067, 87.50, 74.86, 73.76)]


def test_a_first_batch_within_the_held_levels_own_swings_is_no_fall_to_it(tmp_path):
    """Single-batch losses scattered 0.16-0.93 around 0.66, the first at 1.25: the first value sits within the
    excursions the held stretch itself allows (twice its noise band), so nothing shows a fall before a held level.
    The held rule still finds a first-epoch fall far outside that band (`_held` above)."""
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    with open(run_dir / "train.log", "w") as out, contextlib.redirect_stdout(out):
        for loss, acc, test_acc, f1 in _PRINTED_BATCHES:
            print(f"loss: {loss:.4f}, acc: {acc:.2f}, test_acc: {test_acc:.2f}, f1: {f1:.2f}")
    run = load_run(run_dir, tmp_path / "f.duckdb")
    assert run.arrays("loss")[1].size == len(_PRINTED_BATCHES)
    assert Plateau()._held(run) is None and list(Plateau().check(run)) == []
    steps, loss = _held()
    run = load_run(write_tb(tmp_path / "t", {"loss": (steps, loss)}), tmp_path / "t.duckdb")
    assert Plateau()._held(run) is not None




def test_a_validation_loss_printed_to_one_significant_digit_is_no_evidence_of_frozen_weights(tmp_path):
    """Regression (false plateau on a healthy run): a loop printing `Val Loss: 0.0002` at 4 decimals repeats that
    value once the loss has fallen under 0.00025, however the weights move (the accuracy beside it still changes):
    "identical to its fifth digit" needs a print that shows the fifth digit. The same last evaluations read at full
    precision, identical, are frozen weights."""
    epochs = np.arange(1, 21)
    train = 0.002 * np.exp(-epochs / 2.5) + 0.00005
    val = np.r_[0.0030, 0.0016, 0.0010, 0.0007, 0.0005, 0.0004, 0.0004, 0.0003, 0.0003, 0.0003, 0.0003, 0.0003,
                np.full(8, 0.0002)]
    run = load_run(write_tb(tmp_path / "a", {"train/loss": (epochs, np.round(train, 4)), "val/loss": (epochs, val)}),
                   tmp_path / "a.duckdb")
    assert list(Plateau().check(run)) == []
    val[-8:] = 0.000213456
    run = load_run(write_tb(tmp_path / "b", {"train/loss": (epochs, np.round(train, 4)), "val/loss": (epochs, val)}),
                   tmp_path / "b.duckdb")
    [f] = Plateau().check(run)
    assert f.evidence["frozen_evals"] == 8


# A logging-module log with launches appended (https://github.com/choumartin1234/Music-Eye, log/train.log at
# 55e2772a3f4c1a60ead0ce4e17a8a73b4e5eebd9): every 40th line of its first launch (20 epochs, 0.91 -> 0.010) and
# every 28th of its last (18 epochs, 0.94 -> 0.029 by its fifth epoch, then 0.028-0.030 to the end).
_RELAUNCHED = [
    '2020-02-22 14:48:36,976 - __main__ - INFO - epoch 0 step 0/71 loss 0.9137094616889954',
    '2020-02-22 14:49:37,182 - __main__ - INFO - epoch 0 step 40/71 loss 0.08613935858011246',
    '2020-02-22 14:51:18,240 - __main__ - INFO - epoch 1 step 7/71 loss 0.06582732498645782',
    '2020-02-22 14:52:20,543 - __main__ - INFO - epoch 1 step 47/71 loss 0.047134652733802795',
    '2020-02-22 14:53:13,142 - __main__ - INFO - epoch 2 step 14/71 loss 0.034843623638153076',
    '2020-02-22 14:53:59,460 - __main__ - INFO - epoch 2 step 54/71 loss 0.033935241401195526',
    '2020-02-22 14:54:47,547 - __main__ - INFO - epoch 3 step 21/71 loss 0.026634851470589638',
    '2020-02-22 14:55:35,896 - __main__ - INFO - epoch 3 step 61/71 loss 0.024326547980308533',
    '2020-02-22 14:56:17,204 - __main__ - INFO - epoch 4 step 28/71 loss 0.02366035245358944',
    '2020-02-22 14:57:00,322 - __main__ - INFO - epoch 4 step 68/71 loss 0.026520373299717903',
    '2020-02-22 14:57:32,623 - __main__ - INFO - epoch 5 step 35/71 loss 0.021649982780218124',
    '2020-02-22 14:58:15,697 - __main__ - INFO - epoch 6 step 2/71 loss 0.023465698584914207',
    '2020-02-22 14:58:55,689 - __main__ - INFO - epoch 6 step 42/71 loss 0.017695700749754906',
    '2020-02-22 14:59:44,435 - __main__ - INFO - epoch 7 step 9/71 loss 0.016469156369566917',
    '2020-02-22 15:00:22,197 - __main__ - INFO - epoch 7 step 49/71 loss 0.02013561874628067',
    '2020-02-22 15:01:03,090 - __main__ - INFO - epoch 8 step 16/71 loss 0.014968625269830227',
    '2020-02-22 15:01:42,702 - __main__ - INFO - epoch 8 step 56/71 loss 0.017783120274543762',
    '2020-02-22 15:02:21,484 - __main__ - INFO - epoch 9 step 23/71 loss 0.01801127754151821',
    '2020-02-22 15:03:05,466 - __main__ - INFO - epoch 9 step 63/71 loss 0.016389837488532066',
    '2020-02-22 15:03:44,300 - __main__ - INFO - epoch 10 step 30/71 loss 0.016790077090263367',
    '2020-02-22 15:04:31,431 - __main__ - INFO - epoch 10 step 70/71 loss 0.01574491523206234',
    '2020-02-22 15:05:07,708 - __main__ - INFO - epoch 11 step 37/71 loss 0.015404440462589264',
    '2020-02-22 15:05:54,615 - __main__ - INFO - epoch 12 step 4/71 loss 0.014845677651464939',
    '2020-02-22 15:06:28,496 - __main__ - INFO - epoch 12 step 44/71 loss 0.014393359422683716',
    '2020-02-22 15:07:11,241 - __main__ - INFO - epoch 13 step 11/71 loss 0.012591474689543247',
    '2020-02-22 15:07:50,255 - __main__ - INFO - epoch 13 step 51/71 loss 0.011672005988657475',
    '2020-02-22 15:08:31,055 - __main__ - INFO - epoch 14 step 18/71 loss 0.014142586849629879',
    '2020-02-22 15:09:10,751 - __main__ - INFO - epoch 14 step 58/71 loss 0.013105829246342182',
    '2020-02-22 15:09:50,059 - __main__ - INFO - epoch 15 step 25/71 loss 0.015605251304805279',
    '2020-02-22 15:10:33,690 - __main__ - INFO - epoch 15 step 65/71 loss 0.013770311139523983',
    '2020-02-22 15:11:08,881 - __main__ - INFO - epoch 16 step 32/71 loss 0.012693320401012897',
    '2020-02-22 15:11:53,284 - __main__ - INFO - epoch 17',
    '2020-02-22 15:12:33,419 - __main__ - INFO - epoch 17 step 39/71 loss 0.00988711602985859',
    '2020-02-22 15:13:24,320 - __main__ - INFO - epoch 18 step 6/71 loss 0.013687324710190296',
    '2020-02-22 15:14:00,574 - __main__ - INFO - epoch 18 step 46/71 loss 0.012430807575583458',
    '2020-02-22 15:14:54,017 - __main__ - INFO - epoch 19 step 13/71 loss 0.012575769796967506',
    '2020-02-22 15:15:38,882 - __main__ - INFO - epoch 19 step 53/71 loss 0.011957639828324318',
    '2020-02-22 16:17:21,672 - __main__ - INFO - epoch 0 step 0/62 loss 0.9362788200378418',
    '2020-02-22 16:17:57,134 - __main__ - INFO - epoch 0 step 28/62 loss 0.07678484916687012',
    '2020-02-22 16:18:43,092 - __main__ - INFO - epoch 0 step 56/62 loss 0.06414658576250076',
    '2020-02-22 16:19:16,595 - __main__ - INFO - epoch 1 step 20/62 loss 0.06363777816295624',
    '2020-02-22 16:19:55,600 - __main__ - INFO - epoch 1 step 48/62 loss 0.04357258230447769',
    '2020-02-22 16:20:30,993 - __main__ - INFO - epoch 2 step 12/62 loss 0.043954215943813324',
    '2020-02-22 16:20:57,897 - __main__ - INFO - epoch 2 step 40/62 loss 0.03658017888665199',
    '2020-02-22 16:21:33,980 - __main__ - INFO - epoch 3 step 4/62 loss 0.03701373562216759',
    '2020-02-22 16:22:00,637 - __main__ - INFO - epoch 3 step 32/62 loss 0.029175307601690292',
    '2020-02-22 16:22:42,040 - __main__ - INFO - epoch 3 step 60/62 loss 0.02396385744214058',
    '2020-02-22 16:23:16,780 - __main__ - INFO - epoch 4 step 24/62 loss 0.029624618589878082',
    '2020-02-22 16:23:55,308 - __main__ - INFO - epoch 4 step 52/62 loss 0.03290051966905594',
    '2020-02-22 16:24:28,628 - __main__ - INFO - epoch 5 step 16/62 loss 0.023684963583946228',
    '2020-02-22 16:25:01,340 - __main__ - INFO - epoch 5 step 44/62 loss 0.027878034859895706',
    '2020-02-22 16:25:35,462 - __main__ - INFO - epoch 6 step 8/62 loss 0.030387576669454575',
    '2020-02-22 16:26:03,744 - __main__ - INFO - epoch 6 step 36/62 loss 0.029175128787755966',
    '2020-02-22 16:26:39,646 - __main__ - INFO - epoch 7 step 0/62 loss 0.028033215552568436',
    '2020-02-22 16:27:05,367 - __main__ - INFO - epoch 7 step 28/62 loss 0.027554094791412354',
    '2020-02-22 16:27:41,641 - __main__ - INFO - epoch 7 step 56/62 loss 0.034762509167194366',
    '2020-02-22 16:28:11,241 - __main__ - INFO - epoch 8 step 20/62 loss 0.032153211534023285',
    '2020-02-22 16:28:50,294 - __main__ - INFO - epoch 8 step 48/62 loss 0.02977878600358963',
    '2020-02-22 16:29:22,934 - __main__ - INFO - epoch 9 step 12/62 loss 0.03740702569484711',
    '2020-02-22 16:29:53,865 - __main__ - INFO - epoch 9 step 40/62 loss 0.025067927315831184',
    '2020-02-22 16:30:33,514 - __main__ - INFO - epoch 10 step 4/62 loss 0.029125012457370758',
    '2020-02-22 16:31:05,809 - __main__ - INFO - epoch 10 step 32/62 loss 0.026681924238801003',
    '2020-02-22 16:31:49,877 - __main__ - INFO - epoch 10 step 60/62 loss 0.033586129546165466',
    '2020-02-22 16:32:21,153 - __main__ - INFO - epoch 11 step 24/62 loss 0.028552796691656113',
    '2020-02-22 16:32:56,928 - __main__ - INFO - epoch 11 step 52/62 loss 0.028591077774763107',
    '2020-02-22 16:33:29,183 - __main__ - INFO - epoch 12 step 16/62 loss 0.02576378360390663',
    '2020-02-22 16:34:03,151 - __main__ - INFO - epoch 12 step 44/62 loss 0.027922824025154114',
    '2020-02-22 16:34:36,297 - __main__ - INFO - epoch 13 step 8/62 loss 0.029986683279275894',
    '2020-02-22 16:35:03,517 - __main__ - INFO - epoch 13 step 36/62 loss 0.03239470720291138',
    '2020-02-22 16:35:41,245 - __main__ - INFO - epoch 14 step 0/62 loss 0.02821497991681099',
    '2020-02-22 16:36:10,575 - __main__ - INFO - epoch 14 step 28/62 loss 0.02900470793247223',
    '2020-02-22 16:36:48,819 - __main__ - INFO - epoch 14 step 56/62 loss 0.03391997516155243',
    '2020-02-22 16:37:21,566 - __main__ - INFO - epoch 15 step 20/62 loss 0.023111090064048767',
    '2020-02-22 16:37:57,080 - __main__ - INFO - epoch 15 step 48/62 loss 0.022882718592882156',
    '2020-02-22 16:38:36,666 - __main__ - INFO - epoch 16 step 12/62 loss 0.030595283955335617',
    '2020-02-22 16:39:12,143 - __main__ - INFO - epoch 16 step 40/62 loss 0.030772069469094276',
    '2020-02-22 16:40:12,983 - __main__ - INFO - epoch 17 step 4/62 loss 0.026944100856781006',
    '2020-02-22 16:40:49,145 - __main__ - INFO - epoch 17 step 32/62 loss 0.02850545197725296',
]


def test_a_last_launch_that_stalls_where_an_earlier_launch_went_lower_is_a_plateau(tmp_path):
    """The last launch falls to 3% of its first loss and holds 0.029 for most of its epochs: a converged curve by
    its own level. An earlier launch of the same log took the same printer's loss to 0.012: the stall is not the
    floor. Without that launch's level (`later_fall` off), no plateau."""
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "train.log").write_text("\n".join(_RELAUNCHED) + "\n")
    run = load_run(tmp_path / "r", tmp_path / "r.duckdb")
    [f] = Plateau().check(run)
    assert f.evidence["later_floor"] < 0.6 * f.evidence["level"] and "earlier launch" in f.summary
    assert list(Plateau(later_fall=1.0).check(run)) == []


# A commenter's paste in https://github.com/TreB1eN/InsightFace_Pytorch/issues/71 (the ArcFace head's weights not
# updating): the training loss printed once per step, whole.
_FROZEN = ["tensor(34.6456, device='cuda:0', grad_fn=<NllLossBackward>)"] + \
    ["tensor(3.6976, device='cuda:0', grad_fn=<NllLossBackward>)"] * 9


def test_a_training_loss_that_falls_and_then_repeats_to_its_fifth_digit_is_a_plateau(tmp_path):
    """Batches of different data give the same loss to the fifth digit only when nothing changes any more: after
    one fall the loss is frozen. A plateau at any length (and flat_loss's identical records, its own claim)."""
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "output.txt").write_text("\n".join(_FROZEN) + "\n")
    run = load_run(tmp_path / "r", tmp_path / "r.duckdb")
    [f] = Plateau().check(run)
    # an exact pin after a fall is claimed by the glaring rule first (`FlatLoss.fell_then_froze`, flat_loss's boundary);
    # `FlatLoss.fell_then_froze` is that shape's one home, exact or identical to the fifth digit
    assert f.step == 1 and f.evidence["frozen"] and "3.6976" in f.summary and "34.6456" in f.summary


def test_a_loss_that_stops_at_an_lr_cut_is_a_plateau_and_one_the_cut_takes_lower_is_not(tmp_path):
    """A fine-tune falling 13% at a constant LR until a ×10 cut half-way, then holding its level (±1% noise) to the
    end, 87% of its start: the cut bought nothing. The twin, whose loss drops 15% more at the cut (a step schedule
    doing its work), is no stall at the cut."""
    rng = np.random.default_rng(7)
    steps = np.arange(0, 1500, 5)
    half = steps.size // 2
    lr = np.where(np.arange(steps.size) < half, 1e-5, 1e-6)
    fall = np.where(np.arange(steps.size) < half, 6.9 - 0.9 * np.arange(steps.size) / half, 6.0)
    noisy = fall * (1 + rng.normal(0, 0.01, steps.size))
    run = load_run(write_tb(tmp_path / "a", {"loss": (steps, noisy), "lr": (steps, lr)}), tmp_path / "a.duckdb")
    [f] = Plateau().check(run)
    assert f.step == steps[half] and abs(f.evidence["gain_after_cut"]) < 0.03
    assert f.evidence["lr_before_cut"] == pytest.approx(1e-5) and f.evidence["lr_after_cut"] == pytest.approx(1e-6)
    taken = np.where(np.arange(steps.size) < half, fall, 6.0 - 0.9 * (1 - np.exp(-(np.arange(steps.size) - half) / 10)))
    taken = taken * (1 + rng.normal(0, 0.01, steps.size))
    run = load_run(write_tb(tmp_path / "b", {"loss": (steps, taken), "lr": (steps, lr)}), tmp_path / "b.duckdb")
    assert Plateau()._after_cut(run) is None
