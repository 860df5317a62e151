"""dead_relu on real TensorBoard event files with per-layer dead-unit fractions."""

import numpy as np

from forensics.judge.detectors import DeadRelu
from tests.runwriters import curve, load_run, write_tb


STEPS = np.arange(100) * 10


def _fractions(end: float, start: float = 0.1, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A layer's logged fraction moving from `start` to `end` over the first half, then holding (with noise)."""
    rng = np.random.default_rng(seed)
    ramp = np.clip(np.arange(100) / 50, 0, 1)
    return STEPS, np.clip(start + (end - start) * ramp + rng.normal(0, 0.01, 100), 0, 1)


def test_dead_relu_fires_on_the_layer_that_dies(tmp_path):
    run = load_run(write_tb(tmp_path / "r", {
        "loss": curve(n=100),
        "activations/fc1/dead_fraction": _fractions(0.12, seed=1),
        "activations/fc2/dead_fraction": _fractions(0.85, seed=2),
    }), tmp_path / "f.duckdb")
    [f] = DeadRelu().check(run)
    assert f.kind == "dead_relu" and f.evidence["layers"] == ["fc2"]
    assert abs(f.evidence["fractions"][0] - 0.85) < 0.03 and f.step == 0 and f.step_end == 990


def test_healthy_relu_layers_are_silent(tmp_path):
    run = load_run(write_tb(tmp_path / "r", {
        "activations/fc1/dead_fraction": _fractions(0.15, seed=1),
        "activations/fc2/dead_fraction": _fractions(0.3, seed=2),
    }), tmp_path / "f.duckdb")
    assert list(DeadRelu().check(run)) == []


def test_dead_at_init_then_recovered_is_silent(tmp_path):
    """Many units are dead in the first steps (a naive max-over-run rule fires) but they come back."""
    run = load_run(write_tb(tmp_path / "r", {"activations/fc1/dead_fraction": _fractions(0.2, start=0.8)}),
                   tmp_path / "f.duckdb")
    assert list(DeadRelu().check(run)) == []
