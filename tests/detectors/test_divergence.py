"""divergence on real TensorBoard event files."""

import numpy as np
import pytest

from forensics.detectors import Divergence
from tests.runwriters import curve, load_run, write_tb



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
    steps = np.arange(1, 6) * 1000 - 1
    loss = np.array([1.87e12, 2.09e11, 1.38e10, 3.3e9, 2.2e9])
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    [f] = Divergence().check(run)
    assert f.step == 999 and f.evidence["min_level"] > Divergence().blown_level


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
    assert list(Divergence(end_jump=0).check(run)) == []
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
