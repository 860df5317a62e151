"""Console logs: the step axis from the counters a line prints, launches appended to one log, and what is no clock,
no counter and no value (an estimate's time, a settings dump, a file's name)."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import polars as pl
import pytest

from forensics.judge.detectors.exploding_gradients import ExplodingGradients
from forensics.judge.detectors.loss_spike import LossSpike
from forensics.judge.detectors.overfitting import Overfitting
from forensics.judge.detectors.resumed_run import ResumedRun
from ingest.announcements import RESUME, read
from ingest.console import LAUNCH_TAG, read_console
from tests.runwriters import load_run, log_messages


def _frame(path: Path) -> pl.DataFrame:
    return pl.concat([c.scalars for c in read_console(path) if c.scalars is not None])


def _series(frame: pl.DataFrame, tag: str) -> pl.DataFrame:
    return frame.filter(pl.col("tag") == tag)


def _progress_meter(epoch: int, batch: int, batches: int, loss: float) -> str:
    # PyTorch's ImageNet example (ProgressMeter): `Epoch: [{}]` then `[{:>4d}/{}]`, tab-separated meters
    return f"Epoch: [{epoch}][{batch:>4d}/{batches}]\tTime  0.130 ( 0.600)\tLoss {loss:.4e} ({loss:.4e})"


def test_an_epoch_and_its_batch_of_a_printed_total_make_the_global_step(tmp_path):
    log = tmp_path / "train.log"
    lines = [_progress_meter(e, b, 500, 2.0 / (1 + e * 5 + b / 100)) for e in range(3) for b in range(0, 500, 100)]
    log_messages(log, lines, "%(message)s")
    loss = _series(_frame(log), "Loss")
    assert loss["step"].to_list() == [e * 500 + b for e in range(3) for b in range(0, 500, 100)]
    assert not loss["ordinal"].any() and loss["epoch"].to_list()[-1] == 2


def test_a_batch_that_goes_back_within_its_epoch_is_a_resume(tmp_path):
    root = tmp_path / "run"
    root.mkdir()
    lines = [_progress_meter(e, b, 500, 2.0 / (1 + e * 5 + b / 100)) for e in range(4) for b in range(0, 500, 100)]
    again = [_progress_meter(2, b, 500, 2.1 / (1 + 10 + b / 100)) for b in range(300, 500, 100)]
    log_messages(root / "train.log", lines[:15] + again + lines[15:], "%(message)s")  # [2][300] after [2][400]
    found = [f for f in ResumedRun().check(load_run(root, tmp_path / "r.duckdb")) if f.evidence.get("restart_step")]
    assert [f.step for f in found] == [2 * 500 + 300]


def test_an_evaluation_pass_is_read_at_the_training_step_logged_last(tmp_path):
    log = tmp_path / "train.log"
    lines = [_progress_meter(0, b, 300, 1.0) for b in range(0, 300, 100)]
    lines += [f"Test: [{b:>3d}/196]\tTime  0.100 ( 0.100)\tLoss {0.5 + b / 1000:.4e} ({0.5:.4e})" for b in (0, 100)]
    log_messages(log, lines, "%(message)s")
    test = _series(_frame(log), "Test Loss")
    # the pass printed batch by batch is one evaluation (its last running average), at the training step logged last
    assert test["step"].to_list() == [200] and not test["ordinal"].any()


def test_a_global_batch_is_the_step(tmp_path):
    log = tmp_path / "training.log"
    lines = [f"Epoch {1 + b // 50}, Global Batch {b}, Training Loss: {10 - b / 20:.4f}, Validation Loss: 1.0"
             for b in range(5, 100, 5)]
    lines.insert(3, "Checkpoint saved to checkpoints/checkpoint-epoch1-batch20.pth")
    log_messages(log, lines, "%(asctime)s - %(levelname)s - %(message)s")
    frame = _frame(log)
    assert _series(frame, "Training Loss")["step"].to_list() == list(range(5, 100, 5))
    assert set(frame["tag"]) == {"Training Loss", "Validation Loss"}  # a checkpoint's file name holds no value


def test_a_bare_batch_count_with_no_epoch_is_the_step(tmp_path):
    log = tmp_path / "train.log"
    log_messages(log, [f"batch: {b}, time: 25.3, loss: {55 - b / 100:.2f}" for b in range(9, 80, 10)], "%(message)s")
    loss = _series(_frame(log), "loss")
    assert loss["step"].to_list() == list(range(9, 80, 10)) and not loss["ordinal"].any()
    # under an epoch the batch counts within it: the record's ordinal stays its step
    per_epoch = tmp_path / "epochs.log"
    log_messages(per_epoch, [f"epoch {e} batch: {b}, loss: 1.0" for e in range(2) for b in (10, 20)], "%(message)s")
    assert _series(_frame(per_epoch), "loss")["ordinal"].all()


def test_a_json_lines_record_takes_its_iteration_as_the_step(tmp_path):
    # detectron2's JSONWriter: `json.dumps(to_save, sort_keys=True)` per line; three launches from iteration 19, then
    # a resume from a checkpoint at 59 after 99
    run = tmp_path / "run"
    run.mkdir()
    launches = [range(19, 80, 20), range(19, 40, 20), range(19, 120, 20), range(59, 140, 20)]
    iters = [i for launch in launches for i in launch]
    with (run / "metrics.json").open("w") as f:
        for k, launch in enumerate(launches):
            for i in launch:
                f.write(json.dumps({"iteration": i, "total_loss": 2.0 / (1 + i / 50) + k / 100, "lr": 0.02,
                                    "eta_seconds": 10.0}, sort_keys=True) + "\n")
    frame = _frame(run / "metrics.json")
    assert _series(frame, "total_loss")["step"].to_list() == iters and "iteration" not in set(frame["tag"])
    assert _series(frame, LAUNCH_TAG)["value"].to_list() == [2.0, 3.0]
    found = [f for f in ResumedRun().check(load_run(run, tmp_path / "j.duckdb")) if f.evidence.get("restart_step")]
    assert [f.step for f in found] == [59]


def test_an_estimate_of_the_finish_is_not_the_line_time(tmp_path):
    # `etc:` (the estimated time of completion, `time.ctime()`) converges as the run goes on: it runs backwards
    log = tmp_path / "train.log"
    start = time.mktime((2019, 9, 17, 14, 0, 0, 0, 0, -1))
    lines = [f"step: {s:5d}/ 3305 loss:{0.7 / (1 + s / 100):.4f} imps:50.0 lr: 0.1000 "
             f"etc:{time.ctime(start + 3600 - s)}" for s in range(0, 1600, 100)]
    log_messages(log, lines, "%(message)s")
    frame = _frame(log)
    assert set(frame["tag"]) == {"loss", "imps", "lr"}
    assert frame["wall_time"].is_null().all() and _series(frame, "loss")["step"].to_list() == list(range(0, 1600, 100))


def _keras_launch(epochs: int, losses: list[float], val: list[float] | None = None) -> list[str]:
    # Keras 2.0's fit(verbose=2) with ModelCheckpoint(verbose=1): its model summary, `Epoch e/E`, the callback's
    # `Epoch %05d: ...` (0-based), then the epoch's line
    out = ["_" * 65, "Layer (type)                 Output Shape              Param #", "=" * 65,
           "Total params: 134,346,581", "_" * 65]
    for e, loss, v in zip(range(epochs), losses, val or losses):
        out += [f"Epoch {e + 1}/100", f"Epoch {e:05d}: val_acc improved from -inf to 0.69706, saving model to "
                f"weights.best.hdf5", f"300s - loss: {loss:.4g} - acc: 0.7004 - val_loss: {v:.4g} - val_acc: 0.69"]
    return out


def test_keras_launches_appended_to_one_log_are_split(tmp_path):
    root = tmp_path / "run"
    root.mkdir()
    lines = _keras_launch(5, [3.3, 3.2, 3.1, 3.0, 2.9]) + _keras_launch(1, [float("nan")]) + ["Epoch 2/100"]
    lines += _keras_launch(6, [3.4, 3.3, 3.2, 3.1, 3.0, 2.9])
    (root / "train.log").write_text("\n".join(lines) + "\n")
    frame = _frame(root / "train.log")
    assert _series(frame, LAUNCH_TAG)["value"].to_list() == [2.0, 3.0]
    assert _series(frame, "loss")["epoch"].to_list() == [1, 2, 3, 4, 5, 1, 1, 2, 3, 4, 5, 6]
    assert not any("weights" in t or "hdf" in t for t in frame["tag"])
    run = load_run(root, tmp_path / "k.duckdb")
    assert list(LossSpike().check(run)) == []  # a launch ending in NaN, the next starting at 12: no spike between


def test_a_second_hf_run_appended_after_the_summary_is_a_launch(tmp_path):
    # the HF Trainer's console: `{'loss': ..., 'grad_norm': ..., 'learning_rate': ..., 'epoch': ...}` per logging step,
    # `{'train_runtime': ...}` at the end, then the next run's TrainingArguments dump and a fresh warm-up
    root = tmp_path / "run"
    root.mkdir()
    first = [f"{{'loss': 0.05, 'grad_norm': {0.0 if i % 2 else 0.01}, 'learning_rate': 0.000231, "
             f"'epoch': {i / 10:.2f}}}" for i in range(1, 50)]
    second = [f"{{'loss': {1.2 - i / 100:.3f}, 'grad_norm': {1.0 + i / 50:.3f}, 'learning_rate': {min(i, 10) * 3e-5:.6f}, "
              f"'epoch': {i / 10:.2f}}}" for i in range(0, 50)]
    dump = ["TrainingArguments(", "_n_gpu=1,", "learning_rate=0.0003,", "max_grad_norm=1.0,", ")",
            "{'config_name': 'a.yaml', 'epochs': 5, 'group_by_length': False, 'learning_rate': 0.0003, "
            "'save_epoch_adapters': True, 'save_total_limit': None}"]
    summary = "{'train_runtime': 86619.19, 'train_samples_per_second': 4.019, 'train_loss': 0.025, 'epoch': 5.0}"
    (root / "out.txt").write_text("\n".join(dump + first + [summary] + dump + second) + "\n")
    frame = _frame(root / "out.txt")
    assert _series(frame, "learning_rate").height == 99  # the dumps' `learning_rate` is a setting, not a point
    assert _series(frame, LAUNCH_TAG).height == 1
    assert list(ExplodingGradients().check(load_run(root, tmp_path / "h.duckdb"))) == []


def test_a_resume_option_naming_a_checkpoint_is_an_announcement():
    said = read("% python3 ./train_mnist.py --epoch=10 --resume ./result/snapshot_iter_3000")
    assert said is not None and said.kind == RESUME and (said.counter, said.at) == ("step", 3000)
    for line in ("python train.py --resume auto", "python train.py --resume '' --lr 0.1", "python train.py --resume",
                 "  --resume PATH   path to latest checkpoint (default: none)"):
        assert read(line) is None, line


def test_overfitting_reads_the_last_launch_not_an_aborted_one(tmp_path):
    # an aborted launch whose validation loss collapsed to 1e-7 and then went NaN, before the launch the log ends on,
    # whose validation loss bottoms at epoch 10 and rises 25% while training falls
    root = tmp_path / "run"
    root.mkdir()
    train = [1.0 / (1 + e / 5) for e in range(30)]
    val = [0.9 - 0.03 * e if e < 10 else 0.6 * (1 + 0.015 * (e - 9)) for e in range(30)]
    lines = _keras_launch(2, [0.98, 1.17e-07], [1.17e-07, 1.17e-07]) + _keras_launch(1, [float("nan")])
    (root / "train.log").write_text("\n".join(lines + _keras_launch(30, train, val)) + "\n")
    [found] = Overfitting().check(load_run(root, tmp_path / "o.duckdb"))
    assert found.evidence["crossover_step"] > _series(_frame(root / "train.log"), LAUNCH_TAG)["step"].max()


def test_records_whose_logged_epoch_goes_back_with_nothing_between_begin_no_launch(tmp_path):
    # DeiT's main.py appends `json.dumps(log_stats)` per epoch to log.txt: a restart from epoch 0 right after epoch 1,
    # with no summary or settings between, is the log's own record (resumed_run reads the epoch's fall), no launch
    log = tmp_path / "log.txt"
    with log.open("w") as f:
        for e in [0, 1, *range(0, 20)]:
            f.write(json.dumps({"train_lr": 1e-6, "train_loss": 4.2 - e / 10, "test_acc1": 0.3, "epoch": e,
                                "n_parameters": 5536768}) + "\n")
    assert LAUNCH_TAG not in set(_frame(log)["tag"])


def test_a_bare_batch_count_that_starts_again_every_epoch_is_no_launch_nor_resume(tmp_path):
    # `print(f"batch {i}, loss {loss:.4f}")` inside an epoch loop that prints no epoch: the count starts again at
    # every epoch; the judge composes the passes, as for a step counted within each epoch
    root = tmp_path / "run"
    root.mkdir()
    log_messages(root / "train.log", [f"batch {b}, loss {2.0 / (1 + e + b / 100):.4f}" for e in range(4)
                                      for b in range(10, 100, 10)], "%(message)s")
    frame = _frame(root / "train.log")
    assert not _series(frame, "loss")["ordinal"].any() and LAUNCH_TAG not in set(frame["tag"])
    assert list(ResumedRun().check(load_run(root, tmp_path / "b.duckdb"))) == []


def _keras_bars(losses: list[float]) -> list[str]:
    # Keras' fit(verbose=1) captured to a file: `Epoch e/E`, then the progress bar's last state, its batch counter at
    # the epoch's full count on every record
    out = []
    for e, loss in enumerate(losses):
        out += [f"Epoch {e + 5}/300", f"3425/3425 [==============================] - 3680s 1s/step - loss: {loss:.4f} - "
                f"dice_coef: 0.0686 - val_loss: {0.28 + 0.01 * e:.4f} - val_dice_coef: 0.0525"]
    return out


@pytest.mark.parametrize("losses, spiked", [([0.32, 1245.76, 0.43, 0.41, 0.40, 0.38], True),
                                            ([0.32, 0.31, 0.43, 0.41, 0.40, 0.38], False)])
def test_a_keras_bar_at_its_full_count_starts_no_pass_and_hides_no_spike(tmp_path, losses, spiked):
    """The bar's counter, the same on every record, never goes back: no record starts a pass of a counter, so a
    loss ×1000 its neighbours at the log's second record and back at the third is a spike; its healthy twin is
    none."""
    root = tmp_path / "run"
    root.mkdir()
    (root / "train.log").write_text("\n".join(_keras_bars(losses)) + "\n")
    run = load_run(root, tmp_path / "k.duckdb")
    assert run.pass_starts(run.pick("loss")) == frozenset()
    found = list(LossSpike().check(run))
    assert bool(found) == spiked, [f.summary for f in found]


def test_one_record_an_epoch_at_the_same_iteration_counts_within_the_epoch(tmp_path):
    """A sweep's loop prints one training record an epoch, always at `iter 1000 / 1221`, and the validation record
    under it: the iteration counts within the epoch (a global step never repeats as the epoch moves on), so each
    epoch is its own point, not thirty records piled on one step."""
    import numpy as np

    from tests.runwriters import load_run

    rng = np.random.default_rng(0)
    lines = []
    for e in range(1, 31):
        lines.append(f"[epoch {e}], [iter 1000 / 1221], [train loss {0.9 * 0.85 ** e + rng.uniform(0, .01):.5f}], "
                     f"[train acc {0.7 + e / 200:.5f}]")
        lines.append(f"[epoch {e}], [val loss {0.5 * 0.9 ** e + 0.2:.5f}], [val acc {0.8 + e / 300:.5f}]")
    root = tmp_path / "run"
    root.mkdir()
    (root / "train.log").write_text("\n".join(lines) + "\n")
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.series("loss").height == 30 and run.series("val_loss").height == 30


def test_records_that_log_their_own_epoch_take_no_step_from_another_printers_line(tmp_path):
    """DeepSpeed's engine prints `[Rank 0] step=0, skipped=0, lr=[...]` once at set-up (its `steps_per_print` past the
    run's length), then HF Trainer's ProgressCallback prints its dicts, each with its own `'epoch': 0.05`: those
    records are counted by the epoch they log and their lines, not all read at DeepSpeed's step 0."""
    transformers = pytest.importorskip("transformers", reason="the test extra installs transformers")
    from transformers.trainer_callback import ProgressCallback, TrainerControl, TrainerState

    log = tmp_path / "train.log"
    log_messages(log, ["[Rank 0] step=0, skipped=0, lr=[0.0, 0.0], mom=[(0.9, 0.999), (0.9, 0.999)]"],
                 "[%(asctime)s] [%(levelname)s] [logging.py:107:log_dist] %(message)s")
    state = TrainerState(max_steps=400, is_world_process_zero=True)
    args = transformers.TrainingArguments(output_dir=str(tmp_path / "out"), report_to=[])
    control, bar = TrainerControl(), ProgressCallback()
    losses = [round(1.5 * 0.97 ** i, 3) for i in range(20)]  # HF prints 4 significant digits
    with log.open("a") as out, contextlib.redirect_stdout(out):
        bar.on_train_begin(args, state, control)
        for i, loss in enumerate(losses):
            state.global_step, state.epoch = 20 * (i + 1), (i + 1) / 20
            bar.on_log(args, state, control, logs={"loss": loss, "learning_rate": 5e-5, "epoch": state.epoch})
        bar.on_train_end(args, state, control)
    run = load_run(tmp_path, tmp_path / "f.duckdb")
    steps, values = run.arrays("loss")
    assert values.tolist() == losses and len(set(steps.tolist())) == 20  # one point a record, none piled at step 0
