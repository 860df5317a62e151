"""Evaluation blocks labelled only by a line above them: the records under `Eval begin...`, `Validation:`,
`==> Evaluating`, `Test on Epoch N` print the training's names and are the held-out split's (`val loss`), until a
training record's shape, a line that says train, an `Epoch N` line or the block's end marker (`Eval samples: N`).

Logs are written with Python's `logging` and `print` in the printers' shapes; a hypothesis test varies the opener's
words, the records and the block's end, and checks each value lands in its own split."""

from pathlib import Path

import polars as pl
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from ingest.console import read_console
from ingest.roles import role_of

from tests.paths import SHARED
from tests.runwriters import log_messages


def _frame(path: Path) -> pl.DataFrame:
    frames = [c.scalars for c in read_console(path) if c.scalars is not None]
    return pl.concat(frames) if frames else pl.DataFrame({"tag": [], "value": []})


def _by_role(frame: pl.DataFrame, role: str) -> list[float]:
    return frame.filter(pl.col("tag").map_elements(lambda t: role_of(t).role == role, return_dtype=pl.Boolean))[
        "value"].to_list()


def _logged(path: Path, lines: list[str]) -> Path:
    """`lines` written through Python's logging with a stamped format, as a training script's logger writes them."""
    return log_messages(path, lines, "%(asctime)s - %(name)s - %(levelname)s - %(message)s")


def test_paddle_hapi_shape_eval_records_of_the_training_shape_end_at_the_samples_count(tmp_path):
    # hapi's Model.fit: `Epoch e/E`, `step n/N - loss: X - acc: Y`, then `Eval begin...`, the same record shape
    # counted over the evaluation's steps, and `Eval samples: N`
    train, held = [], []
    lines = []
    for epoch in range(1, 4):
        lines.append(f"Epoch {epoch}/3")
        for step in (10, 20, 30):
            train.append(round(1.0 / (epoch * step), 4))
            lines.append(f"step {step:3d}/30 - loss: {train[-1]:.4f} - acc: 0.5 - 12ms/step")
        lines += ["save checkpoint at /tmp/save/0", "Eval begin..."]
        for step in (5, 8):
            held.append(round(2.0 / (epoch * step), 4))
            lines.append(f"step {step}/8 - loss: {held[-1]:.4f} - acc: 0.6 - 8ms/step")
        lines.append("Eval samples: 250")
    path = tmp_path / "train.log"
    path.write_text("".join(f"    {line}\n" for line in lines))  # a notebook's print, indented
    frame = _frame(path)
    assert _by_role(frame, "train_loss") == train
    assert _by_role(frame, "val_loss") == held
    assert set(frame.filter(pl.col("tag").str.starts_with("val"))["tag"]) == {"val loss", "val acc", "val ms/step"}


def test_hand_written_loop_validation_header_with_the_training_names(tmp_path):
    lines = []
    train, held = [], []
    for epoch in range(3):
        lines.append(f"Epoch {epoch}")
        for it in range(4):
            train.append(round(3.0 - epoch - it * 0.1, 3))
            lines.append(f"iter {it * 50} loss: {train[-1]} lr: 0.001")
        lines.append("==> Evaluating")
        for _ in range(2):
            held.append(round(2.5 - epoch * 0.5, 3))
            lines.append(f"loss: {held[-1]} acc: 0.7")
    frame = _frame(_logged(tmp_path / "train.log", lines))
    assert _by_role(frame, "train_loss") == train
    assert _by_role(frame, "val_loss") == held
    assert not frame.filter(pl.col("tag") == "launch").height  # the evaluation's own counters start no launch


def test_a_training_record_shape_ends_a_block_and_a_line_that_says_train_too(tmp_path):
    lines = ["step 1 loss: 0.9", "step 2 loss: 0.8", "Validation:", "val set  accuracy: 0.51  avg cost: 0.7",
             "step 3 loss: 0.7", "Running evaluation", "cost: 0.66", "Training...", "cost: 0.6"]
    frame = _frame(_logged(tmp_path / "train.log", lines))
    assert _by_role(frame, "train_loss") == [0.9, 0.8, 0.7, 0.6]
    assert _by_role(frame, "val_loss") == [0.7, 0.66]


def test_a_record_with_a_step_after_evaluation_records_without_one_ends_the_block(tmp_path):
    # A NER script's logger: `evaluate:dev` / `evaluate:test` over metrics that print no step, then the training's
    # `iteration:I step:S/N, NER loss:X`, whose shape is first met after the blocks
    lines = ["start training"]
    train = []
    for it in range(1, 5):
        for split in ("dev", "test"):
            lines += [f"evaluate:{split}", f"accuracy:  {80 + it:.2f}%; precision:  {10 + it:.2f}%; FB1:  {it:.2f}",
                      f"new best {split} f1 score:{it:.3f}"]
        train.append(round(30 / it, 6))
        lines.append(f"iteration:{it + 1} step:{18 * it}/82, NER loss:{train[-1]:f}")
    frame = _frame(_logged(tmp_path / "train.log", lines))
    assert _by_role(frame, "train_loss") == train
    assert frame.filter(pl.col("tag") == "val accuracy").height == 4


def test_no_block_without_an_opener_nor_before_training_nor_without_a_marker(tmp_path):
    # a line that mentions a split without announcing an evaluation opens nothing; an opener before any training
    # record opens nothing; records of the training's shape after an opener, ended by no marker, stay the training's
    lines = ["Evaluating the pretrained model", "loss: 1.2", "loss: 1.1", "Loading validation dataset from /data/val",
             "loss: 1.0", "Validation:", "loss: 0.9", "loss: 0.8", "Validation:", "loss: 0.7"]
    frame = _frame(_logged(tmp_path / "train.log", lines))
    assert _by_role(frame, "train_loss") == [1.2, 1.1, 1.0, 0.9, 0.8, 0.7]
    assert not _by_role(frame, "val_loss")
    # a config dump's section (yacs prints `TEST:` over its keys) announces no evaluation
    path = tmp_path / "log.txt"
    path.write_text("iter: 19  total_loss: 3.2\nFull config:\nSOLVER:\n  BASE_LR: 0.02\nTEST:\n  DETECTIONS_PER_IMAGE: 100\n"
                    "  test:\n    LOSS_COST: 4.0\nVERSION: 2\nfocal cost: 0.5\niter: 39  total_loss: 3.1\n")
    frame = _frame(path)
    assert not _by_role(frame, "val_loss") and not any(t.startswith(("test", "TEST")) for t in frame["tag"])


def test_a_data_summary_counting_a_test_set_opens_no_block_over_the_epochs_after_it(tmp_path, capsys):
    """A script that prints its data split (per-class counts, `Test set: 172 samples`) before training: the count of
    test samples is no evaluation, and the epoch records after it are the training's."""
    lines = ["Class 0: 319 samples (train: 223, test: 96)", "Class 1: 156 samples (train: 109, test: 47)",
             "Class 2: 94 samples (train: 65, test: 29)", "Test set: 172 samples"]
    losses = [0.4198, 0.3961, 0.3864, 0.3817]
    lines += [f"Epoch [{50 * (i + 1)}/200], Loss: {v:.4f}, Accuracy: {89.67 + i:.2f}%" for i, v in enumerate(losses)]
    path = tmp_path / "training_output.txt"
    for line in lines:
        print(line)
    path.write_text(capsys.readouterr().out)
    frame = _frame(path)
    assert frame.filter(pl.col("tag") == "Loss")["value"].to_list() == losses
    assert not any(t.startswith("test ") for t in frame["tag"].to_list())  # no record taken as the test split's


def test_a_record_labelled_by_its_own_line_takes_its_split(tmp_path):
    # mmengine's `Epoch(val)` beside `Epoch(train)` (logging's `name - LEVEL - message`), and PyTorch's MNIST example's
    # `Test set: Average loss: X` after its `Train Epoch: N [...]\tLoss: X` lines
    lines = ["Epoch(train) [1][10/50]  lr: 1.0000e-03  eta: 0:00:10  time: 0.1000  loss: 0.6100",
             "Epoch(train) [1][20/50]  lr: 1.0000e-03  eta: 0:00:09  time: 0.1000  loss: 0.5900",
             "Epoch(val) [1][10/25]    eta: 0:00:02  time: 0.0500  loss: 0.5100",
             "Epoch(train) [2][10/50]  lr: 1.0000e-03  eta: 0:00:08  time: 0.1000  loss: 0.5700"]
    frame = _frame(_logged(tmp_path / "mmengine.log", lines))
    assert _by_role(frame, "train_loss") == [0.61, 0.59, 0.57] and _by_role(frame, "val_loss") == [0.51]
    path = tmp_path / "mnist.log"
    path.write_text("Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.305\nTrain Epoch: 1 [640/60000 (1%)]\tLoss: 1.352\n"
                    "\nTest set: Average loss: 0.1031, Accuracy: 9685/10000 (97%)\n\n"
                    "Train Epoch: 2 [0/60000 (0%)]\tLoss: 0.219\n")
    frame = _frame(path)
    assert _by_role(frame, "train_loss") == [2.305, 1.352, 0.219] and _by_role(frame, "val_loss") == [0.1031]


OPEN_SPLITS = ["Eval", "Evaluation", "Evaluating", "Validation", "Validating", "Test", "Testing", "VALIDATION"]
OPEN_FORMS = ["{w} begin...", "==> {w}", "{w}:", "***** Running {w} *****", "Starting {w}!", "----- {w} -----",
              "begin {w} on \"valid\" subset", "{w} on epoch 3"]
ENDS = ["Eval samples: 512", "Epoch 9/10", "Training...", "==> training", "TRAIN"]


@settings(max_examples=60, deadline=None)
# one training record at step 0, then an evaluation that counts from 0 in the training's shape against its own total
@example(split="Eval", form="{w} begin...", end="TRAIN", n_train=1, n_held=3, same_shape=True, values=[1.0] * 20)
@given(split=st.sampled_from(OPEN_SPLITS), form=st.sampled_from(OPEN_FORMS), end=st.sampled_from(ENDS),
       n_train=st.integers(1, 5), n_held=st.integers(1, 5), same_shape=st.booleans(),
       values=st.lists(st.floats(0.001, 50, allow_nan=False).map(lambda v: round(v, 4)), min_size=20, max_size=20))
def test_generated_blocks_put_each_value_in_its_split(tmp_path_factory, split, form, end, n_train, n_held, same_shape,
                                                     values):
    assume(not (split.isupper() and form == "{w}:"))  # `TEST:` alone is a config dump's section (yacs), no opener
    train, held = values[:n_train] + values[10:10 + n_train], values[5:5 + n_held]
    eval_shape = "step {i}/9 - loss: {v}" if same_shape else "mean loss = {v} | n {i}"
    lines = [f"step {i}/99 - loss: {v}" for i, v in enumerate(train[:n_train])]
    lines.append(form.format(w=split))
    lines += [eval_shape.format(i=i, v=v) for i, v in enumerate(held)]
    lines.append(end)
    lines += [f"step {i + 10}/99 - loss: {v}" for i, v in enumerate(train[n_train:])]
    path = tmp_path_factory.mktemp("blocks") / "train.log"
    path.write_text("\n".join(lines) + "\n")
    frame = _frame(path)
    assert _by_role(frame, "train_loss") == train
    assert _by_role(frame, "val_loss") == held


@pytest.mark.needs_shared
def test_real_log_test_blocks_name_their_metrics():
    # `Test on Epoch N`, a bar, `Evaluation`, then `mAP: X`, `CP: X, CR: X, CF1 :X` lines, then training again
    frame = _frame(SHARED / "wild" / "console" / "c082_paddle" / "output" / "train.log")
    tags = set(frame["tag"])
    held = {t for t in tags if t.endswith((" CP", " OF1"))}
    assert len(held) == 2 and all(role_of(t).split in ("val", "test") for t in held) and not tags & {"CP", "OF1"}
    assert len(_by_role(frame, "train_loss")) == frame.filter(pl.col("tag") == "loss").height > 100


# PaddleSeg's train.py prints its YAML config (dataset entries under `train_dataset:`/`val_dataset:`, each with a
# `mode:` key) between the launcher's own output and the first record; excerpt of
# simuler/ESPNet@618768f log/trainer-0.log, the records shortened to two.
_SPLIT_SETTINGS_THEN_RECORDS = """\
PADDLE_PORT=12345
PADDLE_TRAINER_ID=0
launch train in GPU mode!
launch proc_id:1517 idx:0
INFO 2021-12-06 01:51:40,171 launch_utils.py:510] Local start 4 processes. First process distributed environment info (Only For Debug):
    |        PADDLE_CURRENT_ENDPOINT                 127.0.0.1:42551               |
------------------------------------------------
batch_size: 4
iters: 120000
train_dataset:
  dataset_root: cityscapes
  mode: train
  transforms:
  - max_scale_factor: 2.0
    min_scale_factor: 0.5
    type: ResizeStepScaling
  type: Cityscapes
val_dataset:
  dataset_root: cityscapes
  mode: val
  transforms:
  - type: Normalize
  type: Cityscapes
------------------------------------------------
2021-12-06 01:52:16 [INFO]\t[TRAIN] epoch: 1, iter: 50/120000, loss: 2.6943, lr: 0.001000, batch_cost: 0.4023, reader_cost: 0.20281, ips: 9.9425 samples/sec | ETA 13:24:17
2021-12-06 01:52:26 [INFO]\t[TRAIN] epoch: 1, iter: 100/120000, loss: 2.2411, lr: 0.000999, batch_cost: 0.2134, reader_cost: 0.00096, ips: 18.7484 samples/sec | ETA 07:06:20
"""


@pytest.mark.parametrize("setting", ["  mode: val", "  split: 'test'", "    - val", "  phase = valid"])
def test_a_config_dump_entry_whose_value_is_a_split_opens_no_block(tmp_path, setting):
    # a dataset entry's `mode: val` in a dump says which split the entry is; it announces no evaluation, so the
    # training records printed after the dump stay the training's
    path = tmp_path / "trainer-0.log"
    path.write_text(_SPLIT_SETTINGS_THEN_RECORDS.replace("  mode: val", setting))
    frame = _frame(path)
    assert _by_role(frame, "train_loss") == [2.6943, 2.2411]
    assert _by_role(frame, "val_loss") == []
