"""Console text that looks like a value or a clock and is neither, printed by the real printers: the HF Trainer's own
banner (`Num update steps per epoch = 8` is no epoch), argparse's help (`stop training if the loss is nan` is no loss),
a duration printed as `HH:MM:SS` (no time of day), and full-width punctuation of a CJK print (`Loss：1.98` is a value)."""

from __future__ import annotations

import argparse
import time

import numpy as np
import pytest

from tests.runwriters import hf_console, hf_toy, load_run, log_messages

torch = pytest.importorskip("torch")


def _loop(log, epochs, line):
    """A user's loop over a small regression, printing `line(epoch, loss, seconds)` after each epoch."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(64, 4)
    y = x @ torch.tensor([1.0, -2.0, 0.5, 3.0])
    for e in range(1, epochs + 1):
        loss = torch.nn.functional.mse_loss(model(x).squeeze(-1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(line(e, loss.item(), 60 + e), file=log)


def test_the_hf_trainers_banner_gives_no_epoch_and_no_series(tmp_path):
    """transformers' Trainer at INFO prints `***** Running training *****` and its sizes (`Num update steps per epoch =
    8`) before its first logged record: those are no values, and the epoch series starts at the trainer's own."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), num_train_epochs=3, logging_steps=2, per_device_train_batch_size=8,
        learning_rate=0.01, report_to=[], disable_tqdm=True, use_cpu=True, save_strategy="no")
    root = tmp_path / "r"
    root.mkdir()
    with hf_console(root / "train.log"):
        data, model = hf_toy()
        transformers.Trainer(model=model, args=args, train_dataset=data).train()
    assert "Num update steps per epoch = 8" in (root / "train.log").read_text()
    run = load_run(root, tmp_path / "f.duckdb")
    _, epoch = run.arrays("epoch")
    assert epoch.size >= 10 and epoch.max() <= 3 and np.all(np.diff(epoch) >= 0)  # no `8` before the first record
    assert not [n for n in run.meta["name"].to_list() if "Num" in n or "per device" in n or "optimization" in n]


def test_argparse_help_printed_before_the_loop_gives_no_loss(tmp_path):
    p = argparse.ArgumentParser(prog="train.py")
    p.add_argument("--stop-on-nan", action="store_true", help="stop training if the loss is nan")
    p.add_argument("-b", "--batch-size", type=int, metavar="N", help="batch size; the loss is 0.5 per sample")
    root = tmp_path / "r"
    root.mkdir()
    with open(root / "train.log", "w") as log:
        print(p.format_help(), file=log)
        _loop(log, 10, lambda e, loss, s: f"epoch {e} loss {loss:.4f}")
    _, loss = load_run(root, tmp_path / "f.duckdb").arrays("loss")
    assert loss.size == 10 and np.all(np.isfinite(loss)) and not np.any(loss == 0.5)


def test_a_duration_printed_as_hours_minutes_seconds_is_no_clock(tmp_path):
    """`Time: 00:01:02` (`time.strftime` of an epoch's seconds) is how long the epoch took, not when it ended: the
    records carry no wall time (the log stamps none)."""
    root = tmp_path / "r"
    root.mkdir()
    with open(root / "train.log", "w") as log:
        _loop(log, 8, lambda e, loss, s: f"Epoch {e} | loss: {loss:.4f} | Time: {time.strftime('%H:%M:%S', time.gmtime(s))}")
    run = load_run(root, tmp_path / "f.duckdb")
    pts = run.points(run.pick("loss"))
    assert pts.height == 8 and pts["wall_time"].null_count() == 8


def test_full_width_colons_of_a_chinese_print_are_read(tmp_path):
    """The PyTorch tutorial as printed in Chinese: `训练次数：N, Loss：X` per 100 steps (full-width colons), then the
    whole test set's summed loss, `整体测试集上的Loss: Y` (its qualifier glued to `Loss`): the first is the training
    loss, the second is not (it would read as a ×100 jump)."""
    root = tmp_path / "r"
    root.mkdir()
    with open(root / "train.log", "w", encoding="utf-8") as log:
        print("-------第 1 轮训练开始------", file=log)
        _loop(log, 12, lambda e, loss, s: f"训练次数：{e * 100}, Loss：{loss}")
        print(f"整体测试集上的Loss: {262.6}", file=log)
    run = load_run(root, tmp_path / "f.duckdb")
    _, loss = run.arrays("loss")
    assert loss.size == 12 and np.all(np.isfinite(loss)) and loss.max() < 100
    assert "整体测试集上的Loss" in run.meta["name"].to_list()


def test_a_chinese_print_in_gbk_names_its_loss_in_chinese(tmp_path):
    """A loop on a Chinese Windows console (GBK, as `open(..., encoding="gbk")` writes it) naming every value in Chinese:
    `当前Batch：N/6035 | 当前epoch:E/50 | 当前损失值：X | 当前准确率：Y%` (current batch, epoch, loss value, accuracy).
    The file is read in its encoding and `损失` (loss) names the training loss, `准确率` (accuracy) the accuracy."""
    root = tmp_path / "r"
    root.mkdir()
    with open(root / "train_log.txt", "w", encoding="gbk") as log:
        print("模型训练开始，起始时间：2024-07-13 06:23:43.091239", file=log)
        _loop(log, 30, lambda e, loss, s: f"当前Batch：{e * 10}/6035 | 当前epoch:0/50 | 当前损失值：{loss:.4f} | "
                                          f"当前准确率：{min(e, 99) / 100:.2%}")
    run = load_run(root, tmp_path / "f.duckdb")
    _, loss = run.arrays("loss")
    assert loss.size == 30 and np.all(np.isfinite(loss)) and loss[-1] < loss[0]
    assert run.has("accuracy")
    assert "当前损失值" in run.meta["name"].to_list()  # the writer's own name, decoded


def test_python_logging_s_default_prefix_names_the_logger_not_a_split(tmp_path):
    """`logging.basicConfig()`'s format `%(levelname)s:%(name)s:%(message)s` with a logger named after the
    experiment (`mi-test`, as RVC's `train.py` names it): `INFO:mi-test:loss_disc=…, loss_mel=…` are training
    losses, not a test pass's."""
    from tests.runwriters import logger_writing

    root = tmp_path / "r"
    root.mkdir()
    with logger_writing(root / "train.log", "%(levelname)s:%(name)s:%(message)s", name="mi-test") as logger:
        for step in range(12):
            logger.info(f"loss_disc={3.3 - step * 0.01:.3f}, loss_gen={3.67:.3f}, loss_mel={24.86 - step:.3f}")
    run = load_run(root, tmp_path / "f.duckdb")
    names = run.meta["name"].to_list()
    assert "loss_mel" in names and not [n for n in names if n.startswith("test")]


def test_a_value_after_its_counter_word_in_a_file_named_for_it(tmp_path):
    """A loop that writes `"epoch%d\t%f" % (epoch, loss)` to `train_loss.txt` (a Chainer demo's writer): the counter
    glued to its word is the epoch, the value is the training loss the file is named for."""
    root = tmp_path / "r"
    root.mkdir()
    with open(root / "train_loss.txt", "w") as log:
        _loop(log, 40, lambda e, loss, s: "epoch%d\t%f" % (e, loss))
    run = load_run(root, tmp_path / "f.duckdb")
    steps, loss = run.arrays("loss")
    assert loss.size == 40 and steps[0] == 1 and steps[-1] == 40 and loss[-1] < loss[0]


def test_a_nan_printed_as_a_pair_s_value_is_that_pair_s_value(tmp_path):
    """A loop printing `step: N total_loss: X obj_cls: Y` whose loss turns NaN (Python prints `nan`, `inf`): the word is
    the value of the pair before it, never a label's end nor the first word of the next name (`nan obj_cls`)."""
    torch.manual_seed(0)
    lines = []
    for step in range(0, 1000, 100):
        total = torch.tensor(9.5 - step / 500) if step < 300 else torch.tensor(float("nan"))
        part = torch.tensor(float("inf")) if step == 500 else total / 3
        lines.append(f"step: {step} total_loss: {total.item()} obj_cls: {part.item()} frag_loc: {2.3 + step / 1e4}")
    root = tmp_path / "r"
    root.mkdir()
    (root / "train.log").write_text("\n".join(lines) + "\n")
    run = load_run(root, tmp_path / "f.duckdb")
    assert sorted(run.names()) == ["frag_loc", "obj_cls", "total_loss"]
    steps, loss = run.arrays("total_loss")
    assert steps.tolist() == list(range(0, 1000, 100))
    assert np.isnan(loss[3:]).all() and np.isfinite(loss[:3]).all()
    assert np.isinf(run.arrays("obj_cls")[1][5])


def test_settings_dict_after_a_logger_prefix_is_no_record(tmp_path):
    # fairseq's hydra_train logs its whole config as one dict after the logger's prefix (`[time][name][INFO] - {...}`):
    # its numbers are settings (`fp16_scale_tolerance`, `bucket_cap_mb`, `lr`), not one-point series. The records
    # logged after it by the same logger are read.
    from ingest.console import read_console

    config = {"_name": None, "common": {"_name": None, "no_progress_bar": False, "log_interval": 200, "fp16": True,
                                        "fp16_scale_tolerance": 0.0, "min_loss_scale": 0.0001},
              "optimization": {"max_update": 320000, "lr": [5e-05], "update_freq": [4]}, "bucket_cap_mb": 25}
    records = [{"epoch": 1, "update": 0.1, "loss": 3.2 - 0.1 * i, "num_updates": 200 * (i + 1)} for i in range(3)]
    path = log_messages(tmp_path / "hydra_train.log", [str(config)] + [str(r) for r in records],
                        fmt="[%(asctime)s][%(name)s][%(levelname)s] - %(message)s")
    tags = {t for c in read_console(path) if c.scalars is not None for t in c.scalars["tag"].to_list()}
    assert "loss" in tags
    assert not tags & {"fp16_scale_tolerance", "min_loss_scale", "log_interval", "bucket_cap_mb", "max_update"}
    # a settings dict printed right after a record, with no line break (a scheduler's state_dict after a tqdm bar),
    # leaves the record's values
    from ingest.console import parse_line

    glued = ("Steps:  20%|██▍         | 2/10 [00:05<00:20,  2.55s/it, lr=3e-5, step_loss=0.0871]{'base_lrs': [3e-05], "
             "'last_epoch': 0, 'verbose': False, '_step_count': 1, '_get_lr_called_within_step': False}")
    assert parse_line(glued).metrics["step_loss"] == 0.0871


def test_a_logger_named_after_an_experiment_with_a_split_word_names_no_split(tmp_path):
    # Python logging's default format `LEVEL:logger:message` with the logger named after the experiment (a voice
    # model's training script names it from the experiment, `mi-test`): `test` there is the experiment's name, not
    # the split of the values. A NaN in those training losses is then the training loss's NaN.
    from tests.runwriters import logger_writing

    path = tmp_path / "train.log"
    with logger_writing(path, "%(levelname)s:%(name)s:%(message)s", name="mi-test") as logger:
        logger.info("loss_disc=3.322, loss_gen=3.670, loss_fm=10.674, loss_mel=24.860, loss_kl=9.000")
        logger.info("loss_disc=nan, loss_gen=nan, loss_fm=nan, loss_mel=23.440, loss_kl=9.000")
    from ingest.console import read_console

    tags = {t for c in read_console(path) if c.scalars is not None for t in c.scalars["tag"].to_list()}
    assert {"loss_disc", "loss_gen", "loss_mel"} <= tags
    assert not any(t.startswith("test") for t in tags)
    # a split word the message itself begins with after the logger's prefix still names the split
    path = tmp_path / "eval.log"
    with logger_writing(path, "%(levelname)s:%(name)s:%(message)s", name="root") as logger:
        for i in range(3):
            logger.info(f"Test: loss: {0.5 - 0.1 * i:.3f}, acc: {0.6 + 0.1 * i:.3f}")
    tags = {t for c in read_console(path) if c.scalars is not None for t in c.scalars["tag"].to_list()}
    assert tags and all(t.startswith("Test") for t in tags), tags


def test_a_split_word_at_the_head_of_a_records_first_name_labels_the_record(tmp_path):
    # Lines of a capsule network's training print (https://github.com/jindongwang/Pytorch-CapsuleNet/issues/3): the
    # epoch's test record names its split once, at its first value (`test accuracy: ..., loss: ...`); its `loss` is
    # the test loss, not a training point one hundred times the batch losses.
    from ingest.console import read_console

    path = tmp_path / "train.log"
    path.write_text("""\
Epoch: [12/30], Batch: [1/500], train accuracy: 0.680000, loss: 0.004995
Epoch: [12/30], Batch: [101/500], train accuracy: 0.650000, loss: 0.004921
Epoch: [12/30], Batch: [201/500], train accuracy: 0.650000, loss: 0.005072
Epoch: [12/30], train loss: 0.004758
Epoch: [12/30], test accuracy: 0.669700, loss: 0.492968
Epoch: [13/30], Batch: [1/500], train accuracy: 0.650000, loss: 0.004795
Epoch: [13/30], Batch: [101/500], train accuracy: 0.730000, loss: 0.004316
Epoch: [13/30], Batch: [201/500], train accuracy: 0.720000, loss: 0.003964
Epoch: [13/30], train loss: 0.004673
Epoch: [13/30], test accuracy: 0.672600, loss: 0.498016
""")
    frame = next(c.scalars for c in read_console(path) if c.scalars is not None)
    values = dict(zip(frame["tag"].to_list(), frame["value"].to_list()))
    assert values["test loss"] == 0.498016
    assert max(v for t, v in zip(frame["tag"].to_list(), frame["value"].to_list()) if t == "loss") < 0.01



def test_a_best_value_that_moved_is_no_record(tmp_path):
    # OpenNMT-py's lines around its first validations (github.com/BitMap4/morphological-inflections, train.log at
    # 0f08038): after each validation its early stopper says how its best moved, `-inf` before any evaluation. The
    # old best is no value of a series (no `-inf` accuracy at step 200), the evaluation's own lines print the values.
    from ingest.console import read_console

    path = tmp_path / "train.log"
    path.write_text("""\
[2024-05-08 04:06:25,202 INFO] Step 150/100000; acc:  39.07; ppl:  7.69; xent: 2.04; lr: 1.00000; 15020/11663 tok/s;     12 sec
[2024-05-08 04:06:28,390 INFO] Step 200/100000; acc:  45.52; ppl:  6.11; xent: 1.81; lr: 1.00000; 14904/11549 tok/s;     15 sec
[2024-05-08 04:06:28,463 INFO] Validation perplexity: 5.45281
[2024-05-08 04:06:28,463 INFO] Validation accuracy: 44.6274
[2024-05-08 04:06:28,463 INFO] Model is improving ppl: inf --> 5.45281.
[2024-05-08 04:06:28,463 INFO] Model is improving acc: -inf --> 44.6274.
[2024-05-08 04:06:28,465 INFO] Saving checkpoint run/model_step_200.pt
[2024-05-08 04:06:31,938 INFO] Step 250/100000; acc:  51.68; ppl:  4.97; xent: 1.60; lr: 1.00000; 13370/10343 tok/s;     18 sec
[2024-05-08 04:06:35,329 INFO] Step 300/100000; acc:  57.88; ppl:  3.97; xent: 1.38; lr: 1.00000; 13933/10788 tok/s;     22 sec
[2024-05-08 04:06:38,523 INFO] Step 350/100000; acc:  64.46; ppl:  3.26; xent: 1.18; lr: 1.00000; 14901/11617 tok/s;     25 sec
[2024-05-08 04:06:41,716 INFO] Step 400/100000; acc:  74.17; ppl:  2.37; xent: 0.86; lr: 1.00000; 14808/11448 tok/s;     28 sec
[2024-05-08 04:06:41,789 INFO] Validation perplexity: 2.44446
[2024-05-08 04:06:41,792 INFO] Validation accuracy: 71.3172
[2024-05-08 04:06:41,792 INFO] Model is improving ppl: 5.45281 --> 2.44446.
[2024-05-08 04:06:41,792 INFO] Model is improving acc: 44.6274 --> 71.3172.
""")
    frame = next(c.scalars for c in read_console(path) if c.scalars is not None)
    tags = set(frame["tag"].to_list())
    assert {"xent", "Validation perplexity", "Validation accuracy"} <= tags
    assert not any("improving" in t for t in tags), tags


# A ResNet training loop's `Loss [epoch, minibatch](epoch, minibatch):  X` print, a mean over the last 100
# minibatches (https://github.com/JayPatwardhan/ResNet-PyTorch/issues/2, the commenter's second run, epochs 1-5).
LEGENDED_PAIR = """Loss [1, 100](epoch, minibatch):  11.6797882938385
Loss [1, 200](epoch, minibatch):  6.862401247024536
Loss [1, 300](epoch, minibatch):  4.945142064094544
Loss [2, 100](epoch, minibatch):  4.521172280311585
Loss [2, 200](epoch, minibatch):  4.397140665054321
Loss [2, 300](epoch, minibatch):  4.324621558189392
Loss [3, 100](epoch, minibatch):  4.266140768527984
Loss [3, 200](epoch, minibatch):  4.1990881085395815
Loss [3, 300](epoch, minibatch):  4.17779137134552
Loss [4, 100](epoch, minibatch):  4.16957403421402
Loss [4, 200](epoch, minibatch):  4.132833144664764
Loss [4, 300](epoch, minibatch):  4.085322487354278
Loss [5, 100](epoch, minibatch):  4.112524454593658
Loss [5, 200](epoch, minibatch):  4.055501687526703
"""


def test_a_bracketed_epoch_and_batch_named_by_a_legend_are_the_records_counters_not_the_losss_values(tmp_path):
    """Regression (false divergence, critical): `Loss [1, 100](epoch, minibatch):  11.68` was read as a list
    `Loss_0 = 1, Loss_1 = 100` whose rising epoch looked like a loss blowing up; the legend says the bracket holds
    the record's epoch and minibatch, and the loss is the value after the colon."""
    root = tmp_path / "run"
    root.mkdir()
    (root / "output.txt").write_text(LEGENDED_PAIR)
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.pick("loss") == "Loss"
    steps, loss = run.arrays("loss")
    assert loss[0] == pytest.approx(11.6797882938385) and loss[-1] == pytest.approx(4.055501687526703)
    assert run.counters("Loss", steps.tolist())[int(steps[-1])] == (5, 200)


# WeNet's training lines and its cross-validation pass, one line per rank
# (https://github.com/wenet-e2e/wenet/issues/941).
WENET_CV = """2023-01-30 18:47:07,107 DEBUG TRAIN Batch 4/203700 loss 12.646465 loss_att 10.921429 loss_ctc 16.671551 lr 0.00032621 rank 0
2023-01-30 18:47:16,614 DEBUG TRAIN Batch 4/203700 loss 16.885244 loss_att 13.554604 loss_ctc 24.656742 lr 0.00032621 rank 1
2023-01-30 18:47:22,712 DEBUG TRAIN Batch 4/203700 loss 19.729301 loss_att 16.203592 loss_ctc 27.955961 lr 0.00032621 rank 2
2023-01-30 18:49:20,301 DEBUG TRAIN Batch 4/203800 loss 23.600426 loss_att 18.615641 loss_ctc 35.231586 lr 0.00032619 rank 2
2023-01-30 18:49:20,315 DEBUG TRAIN Batch 4/203800 loss 18.340179 loss_att 15.005867 loss_ctc 26.120243 lr 0.00032619 rank 1
2023-01-30 18:49:20,438 DEBUG TRAIN Batch 4/203800 loss 25.618004 loss_att 20.509174 loss_ctc 37.538609 lr 0.00032619 rank 0
2023-01-30 18:49:55,773 DEBUG CV Batch 4/0 loss 28.517015 loss_att 24.142754 loss_ctc 38.723625 history loss 27.957858 rank 2
2023-01-30 18:49:56,046 DEBUG CV Batch 4/0 loss 28.402842 loss_att 24.164579 loss_ctc 38.292122 history loss 27.845923 rank 0
2023-01-30 18:49:56,076 DEBUG CV Batch 4/0 loss 28.509480 loss_att 24.174435 loss_ctc 38.624588 history loss 27.950470 rank 3
2023-01-30 18:49:56,101 DEBUG CV Batch 4/0 loss 28.402861 loss_att 24.164606 loss_ctc 38.292122 history loss 27.845942 rank 1
"""


def test_a_speech_toolkits_cv_pass_is_held_out_not_training(tmp_path):
    """Regression (false divergence, critical): WeNet, ESPnet and Kaldi call their held-out pass `CV`; its loss
    (`CV Batch 4/0 loss 28.5`) read into the training loss looked like training rising from 12.6 to 28.5."""
    root = tmp_path / "run"
    root.mkdir()
    (root / "train.log").write_text(WENET_CV)
    run = load_run(root, tmp_path / "f.duckdb")
    assert float(np.max(run.arrays("loss")[1])) < 26
    assert run.pick("val_loss") is not None and float(np.min(run.arrays("val_loss")[1])) > 27


def test_a_checkpoint_path_in_a_save_message_gives_no_value(tmp_path):
    """Keras' ModelCheckpoint(verbose=1) names the file it saves (`saving model to ckpt/03-0.7748.keras`), and the
    epoch's line follows: the log holds the loss and val_loss, nothing from the path. TF2's Keras saved a SavedModel
    folder with no extension (`saving model to ckpt/run_mb/01-58.0256`), a shape Keras 3 no longer writes: its
    digits are a name's too, as are those of OLMo's `Checkpoint saved to .../step500-unsharded`."""
    import contextlib
    import io
    import os

    from ingest.console import parse_line

    os.environ.setdefault("KERAS_BACKEND", "torch")
    keras = pytest.importorskip("keras", reason="the test extra installs keras")
    x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, activation="sigmoid")])
    model.compile("sgd", "binary_crossentropy")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        model.fit(x, (x.sum(1) > 0).astype("float32"), validation_split=0.25, epochs=12, verbose=2, callbacks=[
            keras.callbacks.ModelCheckpoint(str(tmp_path / "ckpt" / "{epoch:02d}-{val_loss:.4f}.keras"), verbose=1)])
    assert "saving model to" in out.getvalue()
    root = tmp_path / "r"
    root.mkdir()
    (root / "train.log").write_text(out.getvalue())
    run = load_run(root, tmp_path / "f.duckdb")
    assert {"loss", "val_loss"} <= set(run.meta["name"]) and not [n for n in run.meta["name"] if "sav" in n]
    assert run.arrays("val_loss")[1].size == 12
    for line in ("Epoch 1: val_loss improved from inf to 58.02555, saving model to ckpt/run_mb/01-58.0256",
                 "INFO\tUnsharded checkpoint saved to /home/u/checkpoints/OLMo-1B/step500-unsharded"):
        assert dict(parse_line(line).metrics) == {}, line
