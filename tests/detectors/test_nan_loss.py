"""nan_loss on real TensorBoard event files."""

import numpy as np

from forensics.judge.detectors import NanLoss
from tests.runwriters import curve, load_run, write_tb



def test_fires_at_exact_first_nonfinite_step(tmp_path):
    steps, loss = curve()
    loss[137:] = np.nan
    loss[140] = np.inf
    run = load_run(write_tb(tmp_path / "r", {"train/loss": (steps, loss)}), tmp_path / "f.duckdb")
    [f] = NanLoss().check(run)
    assert f.kind == "nan_loss" and f.severity == "critical" and f.step == 1370
    assert f.evidence["last_finite_step"] == 1360 and f.evidence["stays_nonfinite"] is True


def test_healthy_run_is_silent(tmp_path):
    run = load_run(write_tb(tmp_path / "r", {"train/loss": curve()}), tmp_path / "f.duckdb")
    assert list(NanLoss().check(run)) == []
