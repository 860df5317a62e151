"""exploding_gradients on real TensorBoard event files."""

import numpy as np

from forensics.detectors import ExplodingGradients
from tests.runwriters import load_run, write_tb



def _norms(seed=0):
    rng = np.random.default_rng(seed)
    steps = np.arange(300)
    return steps, np.exp(rng.normal(0, 0.2, 300))


def test_exponential_growth_to_inf_is_critical(tmp_path):
    steps, g = _norms()
    g[200:] = np.exp((steps[200:] - 200) / 8.0)
    g[260:] = np.inf
    run = load_run(write_tb(tmp_path / "r", {"grad_norm": (steps, g)}), tmp_path / "f.duckdb")
    [f] = ExplodingGradients().check(run)
    assert f.severity == "critical" and f.evidence["ends_nonfinite"] and 195 <= f.step <= 215


def test_single_spike_is_not_an_explosion(tmp_path):
    steps, g = _norms(1)
    g[150] *= 30
    run = load_run(write_tb(tmp_path / "r", {"grad_norm": (steps, g)}), tmp_path / "f.duckdb")
    assert list(ExplodingGradients().check(run)) == []


def test_late_slow_growth_while_the_loss_falls_is_not_an_explosion(tmp_path):
    """Issue 12 class 1: the norm grows ×20 over the last 60% of a healthy run while the loss keeps falling."""
    steps, g = _norms(2)
    g[120:] *= np.exp(np.log(20) * (steps[120:] - 120) / 180)
    loss = 2.0 * np.exp(-steps / 80) + 0.004
    run = load_run(write_tb(tmp_path / "r", {"grad_norm": (steps, g), "loss": (steps, loss)}), tmp_path / "f.duckdb")
    assert list(ExplodingGradients().check(run)) == []


def test_slow_growth_the_loss_pays_for_is_an_explosion(tmp_path):
    steps, g = _norms(2)
    g[120:] *= np.exp(np.log(20) * (steps[120:] - 120) / 180)
    loss = np.where(steps < 150, 2.0 * np.exp(-steps / 80), 2.0 * np.exp(-150 / 80) * (1 + (steps - 150) / 30))
    run = load_run(write_tb(tmp_path / "r", {"grad_norm": (steps, g), "loss": (steps, loss)}), tmp_path / "f.duckdb")
    [f] = ExplodingGradients().check(run)
    assert f.evidence["loss_change_over_episode"] >= 0.2 and f.evidence["factor"] >= 10
