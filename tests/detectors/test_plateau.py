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
