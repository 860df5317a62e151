"""divergence on real TensorBoard event files."""

import numpy as np

from forensics.detectors import Divergence
from tests.runwriters import curve, load_run, write_tb



def test_fires_at_the_minimum_before_the_rise(tmp_path):
    steps, loss = curve(n=300)
    loss[200:] = loss[200] * np.exp((steps[200:] - steps[200]) / 300)
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    [f] = Divergence().check(run)
    assert f.severity == "critical" and abs(f.step - 2000) <= 100
    assert f.evidence["growth_factor"] > 2


def test_healthy_run_is_silent(tmp_path):
    run = load_run(write_tb(tmp_path / "r", {"loss": curve(noise=0.1)}), tmp_path / "f.duckdb")
    assert list(Divergence().check(run)) == []
