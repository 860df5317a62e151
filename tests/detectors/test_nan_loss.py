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


def _two_losses(tmp_path, component: np.ndarray, val: np.ndarray | None = None):
    """A total loss that stays finite beside a component of it (another series of the training-loss role), and an
    evaluation loss where given, written by SummaryWriter."""
    steps, loss = curve()
    series = {"train/loss": (steps, loss), "train/loss_bbox": (steps, component)}
    if val is not None:
        series["val/loss"] = (steps[::30], val)
    return load_run(write_tb(tmp_path / "r", series), tmp_path / "f.duckdb")


def test_a_component_that_ends_nonfinite_beside_a_finite_total_is_a_nan_loss(tmp_path):
    """The judged loss stays finite while another series of the training-loss role turns NaN and ends so (an SSD's
    box loss, an epoch mean `Mean Training loss: nan`): the run ended on a NaN all the same."""
    component = curve(seed=1)[1] / 4
    component[200:] = np.nan
    run = _two_losses(tmp_path, component)
    assert run.pick("loss") == "train/loss" and "train/loss_bbox" in run.all_of("train_loss")
    [f] = NanLoss().check(run)
    assert (f.severity, f.step, f.series) == ("critical", 2000, "train/loss_bbox")
    assert f.evidence["judged_loss"] == "train/loss" and f.evidence["last_finite_step"] == 1990


def test_a_component_nan_that_comes_back_finite_is_silent(tmp_path):
    """One NaN in a component that is finite again on the next records (a batch the training skipped) leaves no
    NaN at the end: nothing for nan_loss."""
    component = curve(seed=1)[1] / 4
    component[150] = np.nan
    assert list(NanLoss().check(_two_losses(tmp_path, component))) == []


def test_an_evaluation_loss_that_ends_nonfinite_is_a_warning_of_its_own(tmp_path):
    val = np.array([1.9, 1.2, 0.9, 0.8, 0.7, 0.65, 0.6, 0.6, np.nan, np.nan])
    run = _two_losses(tmp_path, curve(seed=1)[1] / 4, val)
    [f] = NanLoss().check(run)
    assert (f.severity, f.step, f.evidence["split"]) == ("warning", 2400, "val")
    assert "evaluation" in f.summary


def test_finite_evaluations_beside_a_finite_loss_are_silent(tmp_path):
    val = np.array([1.9, 1.2, 0.9, 0.8, 0.7, 0.65, 0.6, 0.6, 0.58, 0.57])
    assert list(NanLoss().check(_two_losses(tmp_path, curve(seed=1)[1] / 4, val))) == []


def test_evaluation_columns_that_are_placeholders_are_silent(tmp_path):
    """A detector's evaluation terms, one inf and one exactly 0 at every evaluation while the training loss learns
    (a writer filling columns it never computed): no nan_loss. A lone evaluation loss NaN from its first evaluation is
    still one (the evaluation produced it), a warning."""
    steps, loss = curve()
    placeholders = {"train/loss": (steps, loss), "val/cls_loss": (steps[::30], np.full(10, np.inf)),
                    "val/box_loss": (steps[::30], np.zeros(10))}
    run = load_run(write_tb(tmp_path / "p", placeholders), tmp_path / "p.duckdb")
    assert list(NanLoss().check(run)) == []
    lone = load_run(write_tb(tmp_path / "l", {"train/loss": (steps, loss), "val/loss": (steps[::30], np.full(10, np.nan))}),
                    tmp_path / "l.duckdb")
    [f] = NanLoss().check(lone)
    assert (f.severity, f.evidence["split"], f.step) == ("warning", "val", 0)


# A spectrum model's history table as its logger prints it (https://github.com/Noble-Lab/casanovo/issues/367): each
# row fills the training or the validation column and prints NaN in the other.
TURNS = """\
2024-08-19 13:28:48,101 INFO [casanovo/MainProcess] model._log_history : Step\tTrain loss\tValid loss\t
2024-08-19 13:28:48,101 INFO [casanovo/MainProcess] model._log_history : 20000\tnan\t1.594399
2024-08-19 13:49:20,856 INFO [casanovo/MainProcess] model._log_history : 33440\t1.816622\tnan
2024-08-19 14:01:56,689 INFO [casanovo/MainProcess] model._log_history : 40000\tnan\t1.010075
2024-08-19 14:34:15,835 INFO [casanovo/MainProcess] model._log_history : 60000\tnan\t0.746913
2024-08-19 14:44:42,826 INFO [casanovo/MainProcess] model._log_history : 66880\t0.945725\tnan
2024-08-19 15:07:10,980 INFO [casanovo/MainProcess] model._log_history : 80000\tnan\t0.643513
2024-08-19 15:39:42,118 INFO [casanovo/MainProcess] model._log_history : 100000\tnan\t0.582115
2024-08-19 15:40:13,280 INFO [casanovo/MainProcess] model._log_history : 100320\t0.712074\tnan
2024-08-19 16:14:05,699 INFO [casanovo/MainProcess] model._log_history : 120000\tnan\t0.512935
2024-08-19 16:36:41,683 INFO [casanovo/MainProcess] model._log_history : 133760\t0.596518\tnan
2024-08-19 16:51:00,203 INFO [casanovo/MainProcess] model._log_history : 140000\tnan\t0.459005
"""


def _table(tmp_path, text: str):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "train.log").write_text(text)
    return load_run(tmp_path / "r", tmp_path / "f.duckdb")


def test_a_table_whose_columns_take_turns_prints_no_nan(tmp_path):
    run = _table(tmp_path, TURNS)
    assert np.isnan(run.arrays("loss")[1]).any()  # the NaN cells are read as printed
    assert list(NanLoss().check(run)) == []


def test_a_table_whose_training_column_dies_of_nan_is_still_a_nan_loss(tmp_path):
    rows = TURNS.splitlines()
    died = [r.replace("\t0.596518\tnan", "\tnan\tnan").replace("\tnan\t0.459005", "\tnan\tnan") for r in rows]
    [f] = NanLoss().check(_table(tmp_path, "\n".join(died) + "\n"))
    assert f.severity == "critical"
