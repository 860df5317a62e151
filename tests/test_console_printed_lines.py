"""Lines of real training logs, as their printers wrote them, that the reader once misread: a clipping message's
threshold (read, but judged by nothing), an LR printed per optimizer by its index (`current_lr_0`, not read), the dev
results a bare `Evaluation:` line heads in the training record's own shape (read as training), and a test line whose
loss is a bare `loss` after its `test accuracy` (read as the training loss).

Each fixture is a few lines of a public log, quoted byte for byte (a trailing space written `\\x20`); the source is in
the comment above it."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from forensics.judge.detectors import FrequentClipping, LrScheduleAnomaly
from ingest.console import read_console
from ingest.roles import role_of
from tests.runwriters import load_run

# Caffe's SGDSolver with `clip_gradients: 10000`, one glog line per clipped iteration (no iteration counter on them).
# Source: https://github.com/VisionU/HF-FCN-for-Robust-Building-Extraction/issues/6
CAFFE_CLIPPING = [
    "I1023 19:14:38.399847   464 solver.cpp:558] Gradient clipping: scaling down gradients "
    "(L2 norm 411365 > 10000) by scale factor 0.0243093",
    "I1023 19:14:40.305779   464 solver.cpp:558] Gradient clipping: scaling down gradients "
    "(L2 norm 592750 > 10000) by scale factor 0.0168705",
    "I1023 19:14:42.183034   464 solver.cpp:558] Gradient clipping: scaling down gradients "
    "(L2 norm 555496 > 10000) by scale factor 0.0180019",
    "I1023 19:14:44.096856   464 solver.cpp:558] Gradient clipping: scaling down gradients "
    "(L2 norm 553458 > 10000) by scale factor 0.0180682",
    "I1023 19:14:45.964202   464 solver.cpp:558] Gradient clipping: scaling down gradients "
    "(L2 norm 494606 > 10000) by scale factor 0.0202181",
    "I1023 19:14:47.872601   464 solver.cpp:558] Gradient clipping: scaling down gradients "
    "(L2 norm 529258 > 10000) by scale factor 0.0188944",
    "I1023 19:14:49.732904   464 solver.cpp:558] Gradient clipping: scaling down gradients "
    "(L2 norm 480459 > 10000) by scale factor 0.0208134",
    "I1023 19:14:51.594462   464 solver.cpp:558] Gradient clipping: scaling down gradients "
    "(L2 norm 604299 > 10000) by scale factor 0.0165481",
    "I1023 19:14:53.456291   464 solver.cpp:558] Gradient clipping: scaling down gradients "
    "(L2 norm 661342 > 10000) by scale factor 0.0151208",
]

# Coqui TTS's console logger on a GAN vocoder: one LR per optimizer (generator 0, discriminator 1), then the eval block.
# Source: https://github.com/coqui-ai/TTS/issues/1003
COQUI_BLOCK = """\
 > TRAINING (2021-11-29 10:06:07)\x20

   --> STEP: 24/352 -- GLOBAL_STEP: 244300
     | > G_l1_spec_loss: 0.36788  (0.35471)
     | > G_gen_loss: 16.55468  (15.96176)
     | > G_adv_loss: 0.00000  (0.00000)
     | > loss_0: 16.55468  (15.96176)
     | > grad_norm_0: 22.85464  (28.87626)
     | > current_lr_0: 7.0524350586068e-111\x20
     | > current_lr_1: 0.00010\x20
     | > step_time: 0.29070  (0.29190)
     | > loader_time: 0.00150  (0.00135)
 --> EVAL PERFORMANCE
     | > avg_loader_time: 0.00034 (-0.00003)
     | > avg_G_l1_spec_loss: 0.35621 (+0.00000)
     | > avg_G_gen_loss: 16.02957 (+0.00000)
     | > avg_G_adv_loss: 0.00000 (+0.00000)
     | > avg_loss_0: 16.02957 (+0.00000)
"""

# A TF1 text-CNN train.py through Python's logging: `ISO-time: step N, loss X, acc Y` per training step and, under a
# bare `Evaluation:` line, the dev result in the same shape at the step just trained (lines 766-790 of the log).
# Source: yinminggang/CnnTopic@c36b845bdae01bc393b539c44d99159ac0b45d9d:logs/train_log.log
TF_TEXTCNN = """\
2017-07-11 19:28:58,181: INFO: 2017-07-11T19:28:58.181435: step 690, loss 0.0218642, acc 0.984375
2017-07-11 19:29:07,123: INFO: 2017-07-11T19:29:07.123947: step 691, loss 0.002413, acc 1
2017-07-11 19:29:16,280: INFO: 2017-07-11T19:29:16.280470: step 692, loss 0.000317419, acc 1
2017-07-11 19:29:25,461: INFO: 2017-07-11T19:29:25.461995: step 693, loss 0.000266974, acc 1
2017-07-11 19:29:34,191: INFO: 2017-07-11T19:29:34.191495: step 694, loss 0.0286789, acc 0.984375
2017-07-11 19:29:42,843: INFO: 2017-07-11T19:29:42.843990: step 695, loss 0.0120944, acc 0.984375
2017-07-11 19:29:51,648: INFO: 2017-07-11T19:29:51.648493: step 696, loss 0.00582088, acc 1
2017-07-11 19:30:00,326: INFO: 2017-07-11T19:30:00.326990: step 697, loss 0.00105522, acc 1
2017-07-11 19:30:09,375: INFO: 2017-07-11T19:30:09.375507: step 698, loss 0.00148523, acc 1
2017-07-11 19:30:18,193: INFO: 2017-07-11T19:30:18.193011: step 699, loss 0.00273405, acc 1
2017-07-11 19:30:27,280: INFO: 2017-07-11T19:30:27.280531: step 700, loss 0.00106142, acc 1
2017-07-11 19:30:27,292: INFO:\x20
Evaluation:
2017-07-11 19:30:39,171: INFO: 2017-07-11T19:30:39.171211: step 700, loss 0.00889265, acc 1
2017-07-11 19:30:39,171: INFO:\x20
2017-07-11 19:30:40,516: INFO: Saved model checkpoint to E:\\DLTopicWorkspace\\CnnTopic\\runs\\1499766378\\checkpoints\\model-700

2017-07-11 19:30:49,104: INFO: 2017-07-11T19:30:49.104779: step 701, loss 0.0127042, acc 1
2017-07-11 19:30:57,793: INFO: 2017-07-11T19:30:57.793276: step 702, loss 8.59408e-05, acc 1
2017-07-11 19:31:06,462: INFO: 2017-07-11T19:31:06.462772: step 703, loss 0.00348389, acc 1
2017-07-11 19:31:13,311: INFO: 2017-07-11T19:31:13.311164: step 704, loss 0.00017723, acc 1
2017-07-11 19:31:22,331: INFO: 2017-07-11T19:31:22.331680: step 705, loss 0.0042148, acc 1
2017-07-11 19:31:31,231: INFO: 2017-07-11T19:31:31.231189: step 706, loss 0.00565465, acc 1
2017-07-11 19:31:39,959: INFO: 2017-07-11T19:31:39.959688: step 707, loss 6.0915e-05, acc 1
2017-07-11 19:31:48,722: INFO: 2017-07-11T19:31:48.722189: step 708, loss 0.00824921, acc 1
"""

# A CapsuleNet trainer's print: batch records, the epoch's train loss, then `test accuracy: A, loss: L` (a tqdm bar's
# closing line between). Source: https://github.com/jindongwang/Pytorch-CapsuleNet/issues/3
CAPSNET = """\
Epoch: [12/30], Batch: [1/500], train accuracy: 0.680000, loss: 0.004995
Epoch: [12/30], Batch: [101/500], train accuracy: 0.650000, loss: 0.004921
Epoch: [12/30], Batch: [201/500], train accuracy: 0.650000, loss: 0.005072
Epoch: [12/30], Batch: [301/500], train accuracy: 0.680000, loss: 0.004890
Epoch: [12/30], Batch: [401/500], train accuracy: 0.600000, loss: 0.005777
100% 500/500 [02:44<00:00,  3.04it/s]
Epoch: [12/30], train loss: 0.004758
Epoch: [12/30], test accuracy: 0.669700, loss: 0.492968
Epoch: [13/30], Batch: [1/500], train accuracy: 0.650000, loss: 0.004795
Epoch: [13/30], Batch: [101/500], train accuracy: 0.730000, loss: 0.004316
Epoch: [13/30], Batch: [201/500], train accuracy: 0.720000, loss: 0.003964
Epoch: [13/30], Batch: [301/500], train accuracy: 0.760000, loss: 0.004180
Epoch: [13/30], Batch: [401/500], train accuracy: 0.710000, loss: 0.004485
100% 500/500 [02:44<00:00,  3.06it/s]
Epoch: [13/30], train loss: 0.004673
Epoch: [13/30], test accuracy: 0.672600, loss: 0.498016
"""


def _log(tmp_path: Path, text: str) -> Path:
    root = tmp_path / "r"
    root.mkdir()
    (root / "train.log").write_text(text)
    return root


def _frame(root: Path) -> pl.DataFrame:
    return pl.concat([c.scalars for c in read_console(root / "train.log") if c.scalars is not None])


def _values(frame: pl.DataFrame, role: str) -> list[float]:
    return frame.filter(pl.col("tag").map_elements(lambda t: role_of(t).role == role, return_dtype=pl.Boolean))[
        "value"].to_list()


def test_a_clipping_message_gives_frequent_clipping_its_threshold(tmp_path):
    """The norm before clipping and the threshold it was clipped to, on every logged iteration: 40-66x the threshold,
    the clip doing all the work. With no config beside the log, the threshold comes from the lines themselves."""
    run = load_run(_log(tmp_path, "".join(f"{line}\n" for line in CAFFE_CLIPPING)), tmp_path / "f.duckdb")
    assert run.pick("clip_threshold") == "grad_clip" and run.arrays("clip_threshold")[1].tolist() == [10000.0] * 9
    assert FrequentClipping().unavailable(run) is None
    [f] = FrequentClipping().check(run)
    assert f.evidence["threshold"] == 10000.0 and f.evidence["clip_rate"] == 1.0 and f.evidence["points"] == 9
    assert f.evidence["median_norm"] == 553458.0 and f.series == "grad_norm"


def test_an_lr_printed_per_optimizer_by_its_index_is_an_lr(tmp_path):
    """`current_lr_0` and `current_lr_1`: each optimizer's LR. The generator's 7e-111 beside the discriminator's 1e-4
    reaches the LR detector as an LR."""
    root = _log(tmp_path, COQUI_BLOCK)
    frame = _frame(root)
    lrs = frame.filter(pl.col("tag").str.starts_with("current_lr"))
    assert dict(zip(lrs["tag"], lrs["value"])) == {"current_lr_0": 7.0524350586068e-111, "current_lr_1": 1e-4}
    run = load_run(root, tmp_path / "f.duckdb")
    assert set(run.all_of("lr")) == {"current_lr_0", "current_lr_1"}
    assert all(role in run.meta["role"].to_list() for role in LrScheduleAnomaly.requires)


def test_dev_records_under_a_bare_evaluation_line_in_the_training_shape_are_held_out(tmp_path):
    """Under `Evaluation:` the dev result prints the training record's shape at the step just trained (`step 700`
    twice): that record is the dev loss, and the training records after it (one with an exponent, `8.59408e-05`,
    whose outline differs) stay the training's."""
    frame = _frame(_log(tmp_path, TF_TEXTCNN))
    assert _values(frame, "val_loss") == [0.00889265]
    train = _values(frame, "train_loss")
    assert len(train) == 19 and 0.00889265 not in train and 8.59408e-05 in train and 0.0127042 in train


def test_a_bare_loss_after_a_test_accuracy_is_the_test_loss(tmp_path):
    """`test accuracy: 0.6697, loss: 0.4930`: the loss of the test pass, 100 times the training's; read as the
    training loss it made a critical divergence of a healthy run."""
    frame = _frame(_log(tmp_path, CAPSNET))
    assert _values(frame, "val_loss") == [0.492968, 0.498016]
    assert 0.492968 not in _values(frame, "train_loss") and len(_values(frame, "train_loss")) == 12
    assert set(frame.filter(pl.col("tag").str.starts_with("test"))["tag"]) == {"test accuracy", "test loss"}
