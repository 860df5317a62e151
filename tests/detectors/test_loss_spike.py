"""loss_spike on real TensorBoard event files."""


from forensics.detectors import LossSpike
from tests.runwriters import curve, load_run, write_tb



def test_fires_at_each_spike_with_its_baseline(tmp_path):
    steps, loss = curve(n=400, every=5)
    loss[120] *= 4
    loss[300] *= 3
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    found = list(LossSpike().check(run))
    assert [f.step for f in found] == [600, 1500]
    assert found[0].evidence["ratio"] > 3 and found[0].evidence["z"] >= 8


def test_level_shift_and_noise_are_not_spikes(tmp_path):
    steps, loss = curve(n=400, every=5, noise=0.05)
    loss[350:] *= 3  # a level shift that never comes back
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    assert list(LossSpike().check(run)) == []
