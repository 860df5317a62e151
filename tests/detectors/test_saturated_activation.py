"""saturated_activation on real TensorBoard event files with per-layer saturated fractions."""

import numpy as np

from forensics.judge.detectors import DeadRelu, SaturatedActivation
from tests.runwriters import curve, load_run, write_tb


STEPS = np.arange(100) * 10


def _fractions(end: float, start: float = 0.1, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A layer's logged fraction moving from `start` to `end` over the first half, then holding (with noise)."""
    rng = np.random.default_rng(seed)
    ramp = np.clip(np.arange(100) / 50, 0, 1)
    return STEPS, np.clip(start + (end - start) * ramp + rng.normal(0, 0.01, 100), 0, 1)


def test_saturated_activation_fires_on_the_pinned_layer(tmp_path):
    run = load_run(write_tb(tmp_path / "r", {
        "activations/lstm/saturated_fraction": _fractions(0.7, seed=3),
        "activations/gate/saturated_fraction": _fractions(0.05, seed=4),
    }), tmp_path / "f.duckdb")
    [f] = SaturatedActivation().check(run)
    assert f.kind == "saturated_activation" and f.evidence["layers"] == ["lstm"]
    assert abs(f.evidence["fractions"][0] - 0.7) < 0.03


def test_unsaturated_layers_are_silent_and_runs_without_stats_are_skipped(tmp_path):
    run = load_run(write_tb(tmp_path / "r", {
        "loss": curve(n=100),
        "activations/lstm/saturated_fraction": _fractions(0.2, seed=3),
    }), tmp_path / "f.duckdb")
    assert list(SaturatedActivation().check(run)) == []
    reason = DeadRelu().unavailable(run)  # no dead-fraction series: skipped with a reason, not "nothing found"
    assert reason is not None and "dead_fraction" in reason


def test_a_series_named_as_a_fraction_that_holds_counts_is_no_fraction(tmp_path):
    """A printed count (`'saturated': 2` of a dict) takes a fraction's name; values past 1 are no fraction, so no
    layer is '200% saturated'. The same name holding fractions still fires."""
    counts = (STEPS, np.where(np.arange(100) % 2 == 0, 2.0, 0.0))
    run = load_run(write_tb(tmp_path / "r", {"activations/lstm/saturated_fraction": counts}), tmp_path / "f.duckdb")
    assert list(SaturatedActivation().check(run)) == []
