"""exploding_gradients on real TensorBoard event files."""

import numpy as np
import pytest

from forensics.judge import stats
from forensics.judge.detectors import ExplodingGradients
from tests.paths import REAL_RUNS_TEST
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


def test_exponential_growth_to_the_end_of_the_log_is_an_explosion(tmp_path):
    """Fast and still as fast at the end (a job killed mid-explosion, the loss not yet paying): explosion."""
    steps, g = _norms(3)
    g[250:] = np.exp((steps[250:] - 250) / 6.0)
    loss = np.full(steps.size, 1.386) + np.random.default_rng(3).normal(0, 0.02, steps.size)
    run = load_run(write_tb(tmp_path / "r", {"grad_norm": (steps, g), "loss": (steps, loss)}), tmp_path / "f.duckdb")
    [f] = ExplodingGradients().check(run)
    assert f.evidence["factor"] >= 100 and f.step >= 245


def test_gradients_accumulating_from_the_first_step_rise_slowly_and_are_no_explosion(tmp_path):
    """A corpus run of a real bug (corpus/build.py `flat_frozen_all`): the head is replaced after the optimizer
    was built, so nothing steps it and `zero_grad()` never clears its gradients. Its norm grows linearly from the
    first logged steps (×38 by the end) while the loss stays at log 4. The rise from ×2 to ×10 takes dozens of
    points; it starts before the reference level exists, and counting it from the episode's first point (where
    the norm is already ×10) made it "fast" (0 points)."""
    from corpus.build import build_run
    from corpus.spec import all_specs

    [spec] = [s for s in all_specs() if s.name == "flat_frozen_all_cnn_1_r4"]
    root = tmp_path / spec.name
    build_run(spec, root)
    run = load_run(root, tmp_path / "f.duckdb")
    steps, g = run.arrays("grad_norm")
    assert g[-1] / np.median(g[:5]) >= 20  # the growth is real
    assert list(ExplodingGradients().check(run)) == []
    det = ExplodingGradients()
    lg = np.log10(g)
    trailing, _ = stats.rolling_baseline(lg, det.window)
    base = np.fmin.accumulate(np.where(np.isfinite(trailing), trailing, np.inf))
    excess = lg - np.where(np.isfinite(base), base, np.nan)
    a = int(np.argmax(excess >= 1))  # the episode's first point: already ×10
    assert det._rise_points(excess, a, g.size - 1) > det.fast_points


@pytest.mark.skipif(not (REAL_RUNS_TEST / "hf_codebert_clinical").is_dir(), reason="shared/real_runs_test is not beside the checkout")
@pytest.mark.parametrize("name", ["hf_codebert_clinical", "log_fairseq311"])
@pytest.mark.needs_shared
def test_a_short_episode_that_comes_back_or_ends_the_log_small_is_no_explosion(name, tmp_path):
    """Issue 24: a classifier at loss 3e-4 whose grad norm jumps x1300 for one logged step and is back the next
    (hf_codebert_clinical, HF trainer_state), and a fairseq excerpt whose last line is x17 with no outcome in view
    (log_fairseq311): spikes, not explosions."""
    run = load_run(REAL_RUNS_TEST / name, tmp_path / "f.duckdb")
    assert ExplodingGradients().unavailable(run) is None
    assert list(ExplodingGradients().check(run)) == []


def test_a_log_that_ends_on_a_x1000_jump_is_an_explosion(tmp_path):
    """unsloth's pre-clip grad norms on nine lines: 15, 9.8, 7.6, 92 (x12, back the next line), 29, 5.2, 7.8, 7.8,
    then 11140 on the last: the x12 one came back, the x1300 one is an explosion whatever follows."""
    steps = np.arange(1, 10)
    norms = [14.98, 9.78, 7.64, 92.10, 29.00, 5.21, 7.83, 7.79, 11140.0]
    loss = [1.46, 1.28, 1.6, 1.5, 1.4, 1.36, 1.45, 1.3, 1.51]
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss), "grad_norm": (steps, norms)}), tmp_path / "f.duckdb")
    [f] = ExplodingGradients().check(run)
    assert (f.step, f.step_end) == (9, 9) and f.evidence["factor"] > 1000


def test_a_norm_growing_at_every_record_to_the_end_of_a_short_log_is_an_explosion(tmp_path):
    """Ten records, the norm ×1.5 at each (3.8e12 to 1.4e14) while the loss sits at 11.3: too few points for a
    reference level, glaring growth. Five flat records then one ×15 jump at the end are no such growth."""
    steps = np.arange(10)
    loss = (steps, np.array([11.68, 11.43, 11.32, 11.25, 11.11, 11.24, 11.38, 11.23, 11.39, 11.28]))
    run = load_run(write_tb(tmp_path / "a", {"loss": loss, "grad_norm": (steps, 3.8e12 * 1.5 ** steps)}),
                   tmp_path / "a.duckdb")
    [f] = ExplodingGradients().check(run)
    assert f.step == 0 and f.evidence["points"] == 10 and "every one of its last 10 points" in f.summary
    short = load_run(write_tb(tmp_path / "s", {"grad_norm": (steps[:6], 2.0 * 1.8 ** steps[:6])}), tmp_path / "s.duckdb")
    assert ExplodingGradients().unavailable(short) is None and len(list(ExplodingGradients().check(short))) == 1
    jump = np.array([0.787, 0.788, 0.789, 0.794, 0.795, 11.5])
    run = load_run(write_tb(tmp_path / "j", {"grad_norm": (steps[:6], jump)}), tmp_path / "j.duckdb")
    assert list(ExplodingGradients().check(run)) == []


@pytest.mark.parametrize("gap, fires", [("skipped", False), (None, True)])
def test_a_rise_from_norms_of_exactly_zero_has_no_level_to_rise_from(tmp_path, gap, fires):
    """A per-step grad norm of ~0.3, then a stretch of tiny norms (0.005, the loss near 0), then 200 steps logged
    as exactly 0.0 or NaN (steps an fp16 scaler skipped), then ~2.0 (a second launch appended to the log): a rise
    from zeros is no explosion, and 2.0 is an ordinary norm. The same ~2.0 right after the tiny norms is ×400."""
    rng = np.random.default_rng(0)
    parts = [0.3 * np.exp(rng.normal(0, 0.1, 200)), 0.005 * np.exp(rng.normal(0, 0.1, 40))]
    if gap:
        parts.append(np.where(rng.random(200) < 0.8, 0.0, np.nan))
    parts.append(2.0 * np.exp(rng.normal(0, 0.1, 200)))
    g = np.concatenate(parts)
    steps = np.arange(g.size)
    run = load_run(write_tb(tmp_path / "r", {"train/grad_norm": (steps, g),
                                             "train/loss": (steps, np.full(g.size, 0.05))}), tmp_path / "f.duckdb")
    found = list(ExplodingGradients().check(run))
    assert bool(found) == fires, [f.summary for f in found]
