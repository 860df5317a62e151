"""Which series stands for a role: a curve over its echo, the epoch aggregate for the curve's shape, each part of a loss
of several parts beside its held-out twin, a held-out line's values as held-out, and no plan read from a sentinel."""

import sys
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import polars as pl

from forensics.judge.detectors.overfitting import Overfitting
from forensics.judge.engine import analyze_run
from forensics.judge.run import META_SCHEMA, usable_series
from tests.runwriters import curve, load_run, log_messages, write_tb


def _meta(rows: list[dict]) -> pl.DataFrame:
    base = {"series_id": 0, "grp": "", "tag": "", "name": "", "role": "train_loss", "split": None, "layer": None,
            "canonical": True, "ordinal": False, "n_points": 10, "n_nonfinite": 0, "format": "tensorboard"}
    return pl.DataFrame([{**base, "series_id": i, **r} for i, r in enumerate(rows)], schema=META_SCHEMA)


def test_a_few_logged_points_displace_no_curve_on_line_ordinals():
    meta = _meta([{"name": "loss", "format": "console", "ordinal": True, "n_points": 26},
                  {"name": "train loss", "format": "console", "ordinal": False, "n_points": 2}])
    assert sorted(usable_series(meta, "train_loss")["name"].to_list()) == ["loss", "train loss"]


def test_a_structured_echo_displaces_no_console_curve():
    meta = _meta([{"name": "loss", "format": "wandb", "n_points": 3},
                  {"name": "Loss", "format": "console", "ordinal": True, "n_points": 400}])
    assert sorted(usable_series(meta, "train_loss")["name"].to_list()) == ["Loss", "loss"]


def test_the_curve_is_read_not_a_per_evaluation_echo_of_it(tmp_path):
    """A printer of one line per logging step (`420 | loss 4.06 | lr ... | 7367ms`, no counter word) and, every
    hundred steps, an evaluation line that repeats the training loss (`step 500: train loss 4.39, val loss 4.43`):
    the loss is the per-step curve, not the two-point echo."""
    root = tmp_path / "r"
    root.mkdir()
    rng = np.random.default_rng(0)
    lines = []
    for step in range(420, 680, 10):
        if step % 100 == 0:
            lines.append(f"step {step}: train loss {4.4 + rng.normal(0, 0.01):.4f}, val loss {4.42:.4f}")
        lines.append(f"{step} | loss {4.3 + rng.normal(0, 0.15):.4f} | lr 9.000000e-04 | {7360 + rng.normal(0, 9):.2f}ms")
    (root / "train.log").write_text("\n".join(lines) + "\n")
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.finite_points(run.pick("loss")) >= 10


def test_the_longer_logged_curve_still_displaces_line_ordinals(tmp_path):
    """The healthy twin: where the logged series is a curve of its own (an epoch line for each of 30 epochs), it is
    the loss, as before."""
    meta = _meta([{"name": "loss", "format": "console", "ordinal": True, "n_points": 900},
                  {"name": "train loss", "format": "console", "ordinal": False, "n_points": 30}])
    assert usable_series(meta, "train_loss")["name"].to_list() == ["train loss"]


@dataclass(frozen=True)
class _Reads:
    """A detector that records which training loss it was handed."""

    kind: ClassVar[str] = "plateau"
    requires: ClassVar[tuple[str, ...]] = ("loss",)
    stage: ClassVar[int] = 2
    reads_shape: ClassVar[bool] = True
    seen: list

    def check(self, run):
        self.seen.append(run.pick("loss"))
        return iter(())


def test_shape_detectors_read_the_epoch_aggregate_and_spike_detectors_the_steps(tmp_path):
    """Lightning's `train_loss_step` (every batch) beside `train_loss_epoch` (each epoch's mean): a detector of the
    curve's shape reads the epoch means, every other one the per-step values."""
    steps, step_loss = curve(n=400, every=1, noise=0.3)
    epochs = np.arange(19, 400, 20)
    epoch_loss = np.array([step_loss[e - 19:e + 1].mean() for e in epochs])
    run = load_run(write_tb(tmp_path / "r", {"train_loss_step": (steps, step_loss),
                                             "train_loss_epoch": (epochs, epoch_loss)}), tmp_path / "f.duckdb")
    shape, steps_reader = [], []

    @dataclass(frozen=True)
    class _Steps(_Reads):
        reads_shape: ClassVar[bool] = False

    analyze_run(run, [_Reads(shape), _Steps(steps_reader)])
    assert shape == ["train_loss_epoch"] and steps_reader == ["train_loss_step"]


def _parts(tmp_path, obj_rises: bool):
    """A YOLO-style run: box and objectness losses on train and val each epoch, a class loss of 0 (one class)."""
    e = np.arange(60)
    fall = lambda a, b: a + (b - a) * (1 - np.exp(-e / 10))  # noqa: E731
    rng = np.random.default_rng(1)
    jitter = lambda x: x * (1 + rng.normal(0, 0.01, e.size))  # noqa: E731
    val_obj = np.where(e < 15, fall(0.08, 0.05), 0.05 + 0.0012 * (e - 15)) if obj_rises else fall(0.08, 0.05)
    series = {"train/box_loss": (e, jitter(fall(0.09, 0.04))), "val/box_loss": (e, jitter(fall(0.08, 0.05))),
              "train/obj_loss": (e, jitter(fall(0.05, 0.015))), "val/obj_loss": (e, jitter(val_obj)),
              "train/cls_loss": (e, np.zeros(e.size)), "val/cls_loss": (e, np.zeros(e.size))}
    return load_run(write_tb(tmp_path / "r", series), tmp_path / "f.duckdb")


def test_each_part_of_a_loss_is_paired_with_its_held_out_twin(tmp_path):
    run = _parts(tmp_path, obj_rises=True)
    pairs = run.loss_pairs()
    assert pairs[0] == (run.pick("loss"), run.pick("val_loss"))
    assert ("train/obj_loss", "val/obj_loss") in pairs
    assert not any("cls" in t for t, _ in pairs)  # a part logged as 0 throughout is no head the task uses
    found = analyze_run(run, [Overfitting()]).findings
    assert [f.series for f in found] == ["val/obj_loss"]


def test_parts_that_all_fall_together_show_no_overfitting(tmp_path):
    assert analyze_run(_parts(tmp_path, obj_rises=False), [Overfitting()]).findings == []


def test_a_line_led_by_a_held_out_word_after_an_unblanked_date_is_held_out(tmp_path):
    """`2023.01.18 17:15:04 [Epoch: 01] Valid acc: 0.84 | loss: 9.41`: the line's `loss` is the validation loss, not
    a training point that would zig-zag with the `Train ...` lines."""
    root = tmp_path / "r"
    root.mkdir()
    log_messages(root / "train_log.txt", (f"[Epoch: {e:02d}] {split} acc: {acc:.4f} | loss: {loss:.4f}"
                                          for e in range(1, 21)
                                          for split, acc, loss in (("Train", 0.8 + e / 200, 11 - e * 0.3),
                                                                   ("Valid", 0.8, 9.4 + (e % 2)))),
                 "%(asctime)s %(message)s")
    text = (root / "train_log.txt").read_text()
    (root / "train_log.txt").write_text("\n".join(line.replace("-", ".", 2) for line in text.splitlines()) + "\n")
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.pick("val_loss") is not None
    assert run.finite_points(run.pick("loss")) == 20
    assert np.all(np.diff(run.arrays("loss")[1]) < 0)


def test_a_length_sentinel_is_no_plan(tmp_path):
    """HF writes `num_train_epochs = sys.maxsize` when `max_steps` bounds the run: the plan is max_steps."""
    steps, loss = curve(n=30)
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)},
                            config={"num_train_epochs": sys.maxsize, "max_steps": 15000, "seed": 10**10}),
                   tmp_path / "f.duckdb")
    assert run.config_number("num_train_epochs") is None
    assert run.config_number("num_train_epochs", "max_steps") == 15000
    assert run.config_number("seed") == 10**10  # a large number of anything else is a number


def test_with_no_validation_loss_a_held_out_error_is_the_held_out_curve(tmp_path):
    """`Loss` for training and `Test_RMSE` for the held-out data (no validation loss): the error is the held-out
    curve; a held-out score that rises as the model learns (`Test_acc`) is not."""
    steps, loss = curve(n=40)
    run = load_run(write_tb(tmp_path / "r", {"Loss": (steps, loss), "Test_RMSE": (steps, loss + 0.5),
                                             "Test_acc": (steps, 1 - loss / 3)}), tmp_path / "f.duckdb")
    assert run.pick("val_loss") == "Test_RMSE"
    assert run.loss_pairs() == [("Loss", "Test_RMSE")]


def test_a_validation_loss_wins_over_a_held_out_error(tmp_path):
    steps, loss = curve(n=40)
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss), "val_loss": (steps, loss + 0.1),
                                             "val_rmse": (steps, loss + 0.5)}), tmp_path / "f.duckdb")
    assert run.pick("val_loss") == "val_loss"


def _heads(tmp_path, spike: bool):
    """A head-pose printer, `Epoch [1/25], Iter [100/1912] Losses: Yaw 161.4, Pitch 180.9, Roll 41.3`: the loss is
    logged only as its three parts; one head's loss jumps ×6 at one record and is back at the next."""
    rng = np.random.default_rng(3)
    root = tmp_path / "r"
    root.mkdir()
    lines = []
    for i in range(1, 41):
        yaw, pitch, roll = (150 * (1 + rng.normal(0, 0.1, 3))).tolist()
        if spike and i == 25:
            yaw *= 6
        lines.append(f"Epoch [{1 + i // 20}/25], Iter [{100 * (i % 20 or 20)}/1912] "
                     f"Losses: Yaw {yaw:.4f}, Pitch {pitch:.4f}, Roll {roll:.4f}")
    log_messages(root / "train.log", lines, "%(message)s")
    return load_run(root, tmp_path / "f.duckdb")


def test_a_spike_in_one_part_of_a_loss_logged_only_as_parts_is_read(tmp_path):
    from forensics.judge.detectors.loss_spike import LossSpike

    run = _heads(tmp_path, spike=True)
    assert len(run.loss_parts()) == 3
    assert [f.series for f in analyze_run(run, [LossSpike()]).findings] == ["Losses Yaw"]


def test_parts_without_a_spike_show_none(tmp_path):
    from forensics.judge.detectors.loss_spike import LossSpike

    assert analyze_run(_heads(tmp_path, spike=False), [LossSpike()]).findings == []


def test_where_the_whole_loss_is_logged_its_parts_are_not_paired(tmp_path):
    e = np.arange(40)
    fall = 1 / (1 + e / 5)
    run = load_run(write_tb(tmp_path / "r", {"train/loss": (e, 2 * fall), "val/loss": (e, 2.2 * fall),
                                             "train/obj_loss": (e, fall), "val/obj_loss": (e, 1.1 * fall)}),
                   tmp_path / "f.duckdb")
    assert run.loss_pairs() == [("train/loss", "val/loss")]


def test_a_loss_that_never_moved_is_flat_loss_not_also_underfitting(tmp_path):
    """Lightning's per-epoch means of a loss that never moves from its start (targets far too large for the step),
    validation beside it: one observation, reported once (flat_loss), not again as underfitting."""
    from forensics.judge.detectors.flat_loss import FlatLoss
    from forensics.judge.detectors.underfitting import Underfitting

    e = np.arange(3, 148, 4)
    settle = 1 - 8e-6 * (1 - np.exp(-np.arange(e.size) / 4))  # a few float32 ulps down, then still
    train = (2.6878e8 * settle).astype(np.float32)
    val = (2.6877e8 * settle).astype(np.float32)
    run = load_run(write_tb(tmp_path / "r", {"train_loss_epoch": (e, train), "val_loss_epoch": (e, val)}),
                   tmp_path / "f.duckdb")
    alone = analyze_run(run, [Underfitting()]).findings
    both = analyze_run(run, [FlatLoss(), Underfitting()]).findings
    assert [f.kind for f in alone] == ["underfitting"]
    assert [f.kind for f in both] == ["flat_loss"]
