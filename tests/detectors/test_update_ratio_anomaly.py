"""update_ratio_anomaly on logged per-layer update ratios (real TensorBoard event files)."""

import numpy as np

from forensics.judge.detectors import UpdateRatioAnomaly
from tests.runwriters import curve, load_run, write_tb


STEPS = np.arange(10, 801, 10)


def _run(tmp_path, fc1, head, log10=False):
    rng = np.random.default_rng(0)
    noisy = lambda r: r * np.exp(rng.normal(0, 0.2, STEPS.size))  # noqa: E731
    fc1, head = noisy(fc1), noisy(head)
    if log10:
        fc1, head = np.log10(fc1), np.log10(head)
    series = {"train/loss": curve(n=80, every=10), "update_ratio/body.fc1": (STEPS, fc1),
              "update_ratio/head": (STEPS, head)}
    return load_run(write_tb(tmp_path / "r", series), tmp_path / "f.duckdb")


def test_glacial_updates_fire_once_for_the_run(tmp_path):
    run = _run(tmp_path, np.full(STEPS.size, 3e-6), np.full(STEPS.size, 1e-3))
    [f] = UpdateRatioAnomaly().check(run)
    assert f.kind == "update_ratio_anomaly" and f.evidence["direction"] == "too_small"
    assert f.evidence["layers"] == ["update_ratio/body.fc1"] and f.step == 10 and f.step_end == 800
    assert 2e-6 < f.evidence["lowest_median"] < 5e-6


def test_huge_updates_fire_per_episode_from_log10_values(tmp_path):
    head = np.full(STEPS.size, 1e-3)
    head[(STEPS >= 200) & (STEPS <= 260)] = 0.5  # one unstable stretch
    run = _run(tmp_path, np.full(STEPS.size, 1e-3), head, log10=True)
    [f] = UpdateRatioAnomaly().check(run)
    assert f.evidence["direction"] == "too_large" and f.evidence["peak_layer"] == "update_ratio/head"
    assert f.step == 200 and f.step_end == 260 and f.evidence["peak_ratio"] > 0.2


def test_healthy_ratios_are_silent(tmp_path):
    run = _run(tmp_path, np.full(STEPS.size, 1e-3), np.full(STEPS.size, 3e-3))
    assert list(UpdateRatioAnomaly().check(run)) == []
