"""flat_loss on real TensorBoard event files."""

import math

import numpy as np

from forensics.detectors import FlatLoss
from tests.runwriters import curve, load_run, write_tb



def test_fires_on_loss_stuck_at_log_c(tmp_path):
    rng = np.random.default_rng(0)
    steps = np.arange(200) * 10
    loss = math.log(10) + rng.normal(0, 0.02, 200)
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}, config={"num_classes": 10}), tmp_path / "f.duckdb")
    [f] = FlatLoss().check(run)
    assert f.severity == "critical" and abs(f.evidence["relative_change"]) < 0.03
    assert f.evidence["log_classes"] == math.log(10)


def test_learning_run_is_silent(tmp_path):
    run = load_run(write_tb(tmp_path / "r", {"loss": curve()}), tmp_path / "f.duckdb")
    assert list(FlatLoss().check(run)) == []
