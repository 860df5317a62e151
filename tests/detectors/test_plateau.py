"""plateau on real TensorBoard event files."""


from forensics.detectors import Plateau
from tests.runwriters import curve, load_run, write_tb



def test_fires_where_the_loss_stalls_high(tmp_path):
    steps, loss = curve(n=300, start=2.3, floor=1.5, tau=200)  # falls fast, then sits at 65% of the start
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    [f] = Plateau().check(run)
    assert f.evidence["fraction_of_initial"] > 0.6 and f.step < 1500


def test_converging_run_is_silent(tmp_path):
    run = load_run(write_tb(tmp_path / "r", {"loss": curve(floor=0.05, tau=1200)}), tmp_path / "f.duckdb")
    assert list(Plateau().check(run)) == []
