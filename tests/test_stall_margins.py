"""The stall margins set by the healthy pool (docs/engine.md, plateau), on TensorBoard's SummaryWriter: a loss that
falls, then stalls at two thirds of its start (above `min_level` 0.6) is a plateau, its twin that falls on to under
half of its start is not; a loss that falls at once and then holds its level within ±0.5% over nine tenths of the
log (under `held_move` 2%) is a plateau, its twin that keeps falling 10% over the same stretch is not."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_glaring import analyze

N = 200


def series(loss: np.ndarray, seed: int = 0) -> dict[str, np.ndarray]:
    """`loss` with 1% multiplicative noise, a constant LR, memory holding its level, step times of 0.5 s."""
    rng = np.random.default_rng(seed)
    n = loss.size
    return {"loss": loss * (1 + rng.normal(0, 0.01, n)), "lr": np.full(n, 1e-3),
            "memory": 2000 + rng.normal(0, 5, n), "step_time": 0.5 * (1 + rng.normal(0, 0.05, n))}


def stall_at(share: float) -> dict[str, np.ndarray]:
    """From 2.0 down to `share` of it over the first third of the points, then flat to the end: in its band for less
    than the held rule's 85% of the points, so the level decides."""
    t = np.arange(N) / (N - 1)
    return series(2.0 * (share + (1 - share) * np.exp(-12 * t)))


def held(move: float) -> dict[str, np.ndarray]:
    """From 2.0 to 0.4 within the first tenth of the points, then a straight trend moving `move` of 0.4 to the end."""
    t = np.arange(N) / (N - 1)
    fall = 0.4 + 1.6 * np.exp(-60 * t)
    after = np.clip((t - 0.1) / 0.9, 0, 1)
    return series(fall * (1 - move * after))


def plateaus(out: dict) -> list[str]:
    return [f["summary"] for f in out["findings"] if f["kind"] == "plateau"]


@pytest.mark.parametrize("share, found", [(2 / 3, True), (0.45, False)])
def test_a_stall_above_the_level_margin_is_a_plateau_and_a_lower_one_converged(capsys, tmp_path, share, found):
    out = analyze(capsys, tmp_path, "tensorboard", stall_at(share))
    assert bool(plateaus(out)) == found, [f["summary"] for f in out["findings"]]


@pytest.mark.parametrize("move, found", [(0.0, True), (0.1, False)])
def test_a_held_level_is_a_plateau_and_a_steady_fall_is_not(capsys, tmp_path, move, found):
    out = analyze(capsys, tmp_path, "tensorboard", held(move))
    assert bool(plateaus(out)) == found, [f["summary"] for f in out["findings"]]
