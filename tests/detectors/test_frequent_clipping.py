"""frequent_clipping on HF trainer_state.json (HF logs the pre-clip norm that clip_grad_norm_ returns)."""

import numpy as np

from forensics.judge.detectors import FrequentClipping
from tests.runwriters import curve, hf_history, load_run, write_tb, write_trainer_state


def _run(tmp_path, norms, config):
    steps, loss = curve(n=norms.size, every=10)
    return load_run(write_trainer_state(tmp_path / "r", hf_history(steps, loss, norms), config), tmp_path / "f.duckdb")


def _norms(median: float, n: int = 200, seed: int = 0) -> np.ndarray:
    return median * np.exp(np.random.default_rng(seed).normal(0, 0.3, n))


def test_fires_when_most_steps_exceed_max_grad_norm(tmp_path):
    run = _run(tmp_path, _norms(3.0), {"max_grad_norm": 1.0})
    [f] = FrequentClipping().check(run)
    assert f.kind == "frequent_clipping" and f.step == 0 and f.step_end == 1990
    assert f.evidence["threshold"] == 1.0 and f.evidence["clip_rate"] > 0.95 and f.evidence["points"] == 200
    assert 2.5 < f.evidence["median_norm"] < 3.5


def test_a_few_percent_clipped_is_healthy(tmp_path):
    norms = _norms(0.4, seed=1)
    norms[::25] = 2.5  # 4% of the steps clip: what a healthy run with clipping looks like
    run = _run(tmp_path, norms, {"max_grad_norm": 1.0})
    assert list(FrequentClipping().check(run)) == []


def test_without_a_threshold_it_is_skipped_not_silent(tmp_path):
    run = _run(tmp_path, _norms(3.0), {"learning_rate": 5e-5})
    assert "max_grad_norm" in FrequentClipping().unavailable(run)


def _fairseq_tb(tmp_path, pct):
    # fairseq's TensorBoard logger writes each stat under its split: `train/clip` is the percentage of updates
    # in the logging interval whose norm was clipped (0-100), `train/gnorm` the norm before clipping
    steps, loss = curve(n=pct.size, every=100)
    return load_run(write_tb(tmp_path / "r", {"train/loss": (steps, loss), "train/clip": (steps, pct),
                                              "train/gnorm": (steps, _norms(2.0, n=pct.size))}),
                    tmp_path / "f.duckdb")


def test_a_logged_clip_percentage_is_read_without_a_threshold(tmp_path):
    run = _fairseq_tb(tmp_path, np.full(40, 100.0))
    assert FrequentClipping().unavailable(run) is None
    [f] = FrequentClipping().check(run)
    assert f.evidence["clip_rate"] == 1.0 and f.evidence["threshold"] is None and f.evidence["points"] == 40
    assert f.series == "train/clip" and "100% of updates clipped" in f.summary


def test_a_few_percent_logged_clipped_is_healthy(tmp_path):
    pct = np.zeros(40)
    pct[::10] = 25.0  # a quarter of the updates in one interval out of ten: 2.5% overall
    assert list(FrequentClipping().check(_fairseq_tb(tmp_path, pct))) == []


def _clip_messages_tb(tmp_path, clipped_steps):
    # a norm and its threshold logged on the clipped steps only (as a clip message is printed), the loss every step
    steps, loss = curve(n=100, every=10)
    at = steps[clipped_steps]
    return load_run(write_tb(tmp_path / "r", {"loss": (steps, loss), "grad_norm": (at, np.full(at.size, 50.0)),
                                              "grad_clip": (at, np.full(at.size, 1.0))}), tmp_path / "f.duckdb")


def test_a_threshold_logged_beside_the_norm_stands_in_for_the_config(tmp_path):
    run = _clip_messages_tb(tmp_path, np.arange(100))
    assert FrequentClipping().unavailable(run) is None
    [f] = FrequentClipping().check(run)
    assert f.evidence["threshold"] == 1.0 and f.evidence["clip_rate"] == 1.0 and f.evidence["points"] == 100
    assert "logged beside it" in f.summary


def test_norms_logged_on_clipped_steps_only_are_a_rate_of_every_logged_step(tmp_path):
    """Ten clip messages among 100 logged steps: 10% clipped, however far above the threshold each of the ten is."""
    assert list(FrequentClipping().check(_clip_messages_tb(tmp_path, np.arange(0, 100, 10)))) == []


def test_norms_just_over_the_threshold_on_most_steps_are_no_change_worth_making(tmp_path):
    """Regression (false frequent_clipping on a healthy reward model): norms a median 14% over `max_grad_norm` 1.0
    are clipped on most steps, but each loses an eighth of its length: the update barely changes. Norms ×3 over it
    lose two thirds, and fire (`test_fires_when_most_steps_exceed_max_grad_norm`)."""
    run = _run(tmp_path, 1.14 * np.exp(np.random.default_rng(2).normal(0, 0.1, 200)),
               {"max_grad_norm": 1.0})
    assert list(FrequentClipping().check(run)) == []


def test_norms_around_the_threshold_with_a_long_tail_are_judged_by_the_typical_step(tmp_path):
    """Regression (false frequent_clipping on two healthy fine-tunes at HF's default `max_grad_norm` 1.0): norms of
    a median ×1.2 the threshold, scattered widely, are clipped on 68% of steps and the clipped ones have a median
    ×1.5, but half the steps lose under a sixth of their gradient: the typical step is judged, not the tail."""
    norms = 1.2 * np.exp(np.random.default_rng(3).normal(0, 0.45, 200))
    assert np.mean(norms > 1.0) > 0.6 and np.median(norms[norms > 1.0]) > 1.5  # the shape: clipped often, a tail
    assert list(FrequentClipping().check(_run(tmp_path, norms, {"max_grad_norm": 1.0}))) == []
