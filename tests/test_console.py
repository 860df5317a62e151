"""Console logs: the pattern table's examples, the real logs' values, tqdm, damage, resume."""

import math
import re
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path, PurePosixPath

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ingest.console as C
from ingest.console import PATTERNS, ParsedLine, parse_line, read_console
from ingest.formats import format_for
from ingest.records import Chunk, Issue, scalars_frame

from tests.paths import REAL_RUNS, REAL_RUNS_TEST

REAL = REAL_RUNS


def _read(path: Path, start: int = 0):
    """Points, problems (not the `lines_read` tally) and the end of a read."""
    chunks = list(read_console(path, start))
    frames = [c.scalars for c in chunks if c.scalars is not None]
    return pl.concat(frames), [i for c in chunks for i in c.issues if i.kind != "lines_read"], chunks[-1].end


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda p: p.name)
def test_every_pattern_parses_its_example(pattern):
    parsed = parse_line(pattern.example)
    got = dict(parsed.metrics)
    got.update({k: getattr(parsed, k) for k in ("step", "epoch", "batch") if getattr(parsed, k) is not None})
    for key, value in pattern.expect.items():
        assert key in got and _same(got[key], value), (pattern.name, key, got)
    assert pattern.regex.search(pattern.example), f"{pattern.name}'s own example must use it"


def test_traceback_lines_are_not_metrics():
    assert parse_line('  File "/home/u/trainer.py", line 71, in <module>').metrics == {}


@pytest.mark.needs_shared
def test_real_nanogpt_nan_after_step_3000():
    frame, issues, _ = _read(REAL / "log_nanogpt215" / "console.log")
    loss = frame.filter(pl.col("tag") == "loss")
    assert loss["step"][0] == 2920 and loss["value"][0] == 3.9883
    assert loss["step"][-1] == 3060 and math.isnan(loss["value"][-1])
    first_nan = loss.filter(pl.col("value").is_nan())["step"][0]
    assert first_nan == 3010
    val = frame.filter(pl.col("tag") == "val loss")
    assert val["step"].to_list() == [3000] and val["value"][0] == 4.0427
    assert loss["wall_time"][0] == 1679477439.0  # 2023-03-22 09:30:39 UTC
    assert issues == []


@pytest.mark.needs_shared
def test_real_byteps_epoch_batch_ordinal():
    frame, _, _ = _read(REAL / "log_byteps411" / "console.log")
    loss = frame.filter(pl.col("tag") == "IDLoss")
    assert loss["batch"].to_list() == list(range(1, 10)) and set(loss["epoch"].to_list()) == {1}
    assert loss["ordinal"].all() and loss["step"].to_list() == list(range(9))
    assert loss["value"][5] == 70.405 and math.isnan(loss["value"][6])
    assert loss["wall_time"][0] == pytest.approx(1628747042.294)


@pytest.mark.needs_shared
def test_real_caffe_iterations_and_output_lines():
    frame, issues, _ = _read(REAL / "log_caffe499" / "console.log")
    loss = frame.filter(pl.col("tag") == "loss")
    assert loss["step"].to_list() == [2, 10, 20, 30, 40] and loss["value"].is_nan().all()
    mbox = frame.filter(pl.col("tag") == "mbox_loss")
    assert mbox["step"].to_list() == [2, 10, 20, 30] and (mbox["value"] == math.inf).all()
    assert frame.filter(pl.col("tag") == "lr")["value"].to_list() == [0.001] * 3
    assert [i.kind for i in issues] == ["assumed_date"]  # glog stamps carry no year
    assert loss["wall_time"][1] - loss["wall_time"][0] == pytest.approx(4.109669, abs=1e-6)


@pytest.mark.needs_shared
def test_real_insightface_global_step_nan():
    frame, _, _ = _read(REAL / "log_insightface2262" / "console.log")
    loss = frame.filter(pl.col("tag") == "Loss")
    assert loss["step"].to_list() == [20, 30, 40] and loss["value"].is_nan().all()
    assert loss["epoch"].to_list() == [0, 0, 0]
    assert frame.filter(pl.col("tag") == "LearningRate")["value"][0] == 0.001


@pytest.mark.needs_shared
def test_real_ipexllm_infinity():
    frame, _, _ = _read(REAL / "log_ipexllm1486" / "console.log")
    loss = frame.filter(pl.col("tag") == "Loss")
    assert loss["step"].to_list() == [45457, 45458, 45459, 45460]
    assert loss["value"][2] == math.inf and loss["value"][3] == 1.2483193
    assert set(loss["epoch"].to_list()) == {64}


@pytest.mark.needs_shared
def test_real_mlx_train_and_val_loss():
    frame, _, _ = _read(REAL / "log_mlx620" / "console.log")
    train = frame.filter(pl.col("tag") == "Train loss")
    assert train["step"][0] == 25 and train["step"][-1] == 200 and train["value"][3] == 6.437
    assert frame.filter(pl.col("tag") == "Val loss")["step"].to_list() == [1]
    assert "iters" not in frame["tag"].to_list()


@pytest.mark.needs_shared
def test_real_wandb_output_log_tqdm_postfix():
    frame, _, _ = _read(REAL / "wandb_vqvae" / "output.log")
    assert frame["tag"].to_list() == ["loss"] and frame["value"][0] == 0.481  # not the bar's own 3.38it/s
    assert frame["epoch"][0] == 1 and frame["batch"][0] == 158 and frame["ordinal"][0]


def _series(frame: pl.DataFrame, tag: str) -> pl.DataFrame:
    return frame.filter(pl.col("tag") == tag)


@pytest.mark.needs_shared
def test_real_tacotron2_counter_between_loss_name_and_value():
    # tacotron2's `Train loss {iteration} {loss:.6f} Grad Norm {grad_norm:.6f} {duration:.2f}s/it`, pasted
    # with `**` bold markers: read nothing but the loss-scale lines before
    frame, issues, _ = _read(REAL_RUNS_TEST / "log_tacotron485" / "train.log")
    loss = _series(frame, "Train loss")
    assert loss["step"].to_list()[:3] == [12001, 12002, 12005] and not loss["ordinal"].any()
    assert loss["value"].to_list()[:2] == [0.166141, 4.972964]
    assert _series(frame, "Grad Norm")["value"].to_list()[:2] == [0.372761, math.inf]
    assert _series(frame, "s/it")["value"].to_list()[:2] == [2.51, 1.78]
    assert not [i for i in issues if i.kind == "unmatched_lines"]


@pytest.mark.needs_shared
def test_real_pytorch_imagenet_style_epoch_and_batch_in_brackets():
    # `Epoch: [11][1/48]\tTime 0.470 (1.206)\tData ...\tLoss 3.2168 (37.0903)` (deepspeech.pytorch, as in
    # PyTorch's ImageNet example): tab-separated, no `step`; only `Loss` was read before, without counters
    frame, _, _ = _read(REAL_RUNS_TEST / "log_deepspeech127" / "train.log")
    loss = _series(frame, "Loss")
    assert loss["epoch"].unique().to_list() == [11] and loss["batch"].to_list() == list(range(1, 18))
    assert loss["value"][0] == 3.2168 and _series(frame, "Time")["value"][:2].to_list() == [0.470, 0.407]


@pytest.mark.needs_shared
def test_real_metric_logger_closs_and_max_mem():
    # LLaMA2-Accessory's MetricLogger: `Epoch: [1]  [1480/1504]  lr: 0.000012  closs: 0.9233 (0.9531) ...`
    from ingest.roles import role_of

    frame, _, _ = _read(REAL_RUNS_TEST / "log_llama2acc48" / "train.log")
    closs = _series(frame, "closs")
    assert closs["epoch"][0] == 1 and closs["batch"][0] == 1480 and closs["value"][0] == 0.9233
    assert closs["epoch"].to_list()[-1] == 2  # the end of epoch 1, then epoch 2 from batch 0
    assert role_of("closs").role == "train_loss" and role_of("max mem").role == "memory"
    assert _series(frame, "max mem")["value"][0] == 51710


@pytest.mark.needs_shared
def test_real_repeated_record_lines_without_counter_or_metric_word():
    # YOLACT: `[  1]    1440 || B: 5.495 | C: 3.668 | M: 6.919 | S: 1.564 | T: 17.647 || ETA: ... || timer: 0.298`
    # names its losses by one letter and prints no counter the table knows: read because the line repeats
    frame, _, _ = _read(REAL_RUNS_TEST / "log_yolact359" / "train.log")
    total = _series(frame, "T")
    # the first line was pasted behind a backtick: its letters are the others', so it is a record too
    assert total["value"].to_list()[:3] == [17.647, 17.658, 17.662] and total["ordinal"].all()
    assert {"B", "C", "M", "S", "timer", "loss_scale"} <= set(frame["tag"])


def test_a_lone_traceback_line_number_is_no_series(tmp_path):
    # the repeated-line rule needs two pairs on a line: a traceback repeats `line N` alone
    path = tmp_path / "train.log"
    path.write_text("".join(f'  File "/home/u/train.py", line {70 + i}, in <module>\n' for i in range(5)))
    chunks = list(read_console(path))
    assert all(c.scalars is None or c.scalars.height == 0 for c in chunks)


@pytest.mark.needs_shared
def test_real_keras_progress_bar_takes_the_epoch_header_above_it():
    # Keras prints `Epoch 2/200` on its own line, then `50000/50000 [====] - 701s - loss: 1.3731 - ...`
    frame, _, _ = _read(REAL_RUNS_TEST / "log_keras2937" / "train.log")
    loss = _series(frame, "loss")
    # the excerpt starts under `Epoch 1/200`'s result line, whose header was not pasted
    assert loss["epoch"].to_list() == [None, *range(2, 11)] and loss["batch"].to_list() == [50000] * 10


def test_header_epoch_goes_back_on_a_resume(tmp_path):
    # a multi-line record (`epoch N` / `loss: X` / `test accuracy: Y%`) that restarts from an earlier epoch: the
    # reader keeps every epoch as printed, so the resume shows as the epoch going back (60 -> 41)
    path = tmp_path / "out"
    epochs = [58, 59, 60, 41, 42]
    path.write_text("".join(f"epoch {e}\nloss: {1 / e:.4f}\ntest accuracy: {50 + e / 10:.1f}%\n" for e in epochs))
    frame, _, _ = _read(path)
    assert _series(frame, "loss")["epoch"].to_list() == epochs
    assert _series(frame, "test accuracy")["epoch"].to_list() == epochs


@pytest.mark.needs_shared
def test_real_command_line_and_argparse_namespace_are_not_metrics():
    # `train.py --n_epoch=100 --lr=5e-4 ...` and `Namespace(batch_size=10, ..., lr=0.0005, ...)` printed at start
    frame, _, _ = _read(REAL_RUNS_TEST / "log_mt_en2zh" / "train.log")
    assert not {"lr", "n_epoch", "batch_size"} & set(frame["tag"])
    frame, _, _ = _read(REAL_RUNS_TEST / "log_dsfd_anime" / "train.log")
    assert not {"momentum", "batch_size", "gamma"} & set(frame["tag"])
    assert parse_line(next(p for p in PATTERNS if p.kind == "ignore").example).metrics == {}


def test_word_language_model_padded_values_and_ms_per_batch():
    # pytorch/examples word_language_model's own format string: values padded after their names (`loss  7.63`)
    line = ("| epoch {:3d} | {:5d}/{:5d} batches | lr {:02.2f} | ms/batch {:5.2f} | loss {:5.2f} | ppl {:8.2f}"
            .format(1, 200, 2983, 20.0, 45.37, 7.63, 2056.27))
    parsed = parse_line(line)
    assert parsed.epoch == 1 and parsed.metrics == {"lr": 20.0, "ms/batch": 45.37, "loss": 7.63, "ppl": 2056.27}


@pytest.mark.needs_shared
def test_real_several_pairs_in_one_clause():
    # `INFO  * Train Acc 10.144 Train Loss 2.315` (a W&B run's output.log): read nothing before
    frame, issues, _ = _read(REAL_RUNS_TEST / "wandb_cifar_alexnet" / "files" / "output.log")
    assert _series(frame, "Train Loss")["value"].to_list()[:2] == [2.315, 2.304]
    assert _series(frame, "Val Acc")["value"][0] == 10.0 and _series(frame, "Val Loss")["value"][0] == 2.303
    assert not [i for i in issues if i.kind == "unmatched_lines"]


def test_imagenet_example_validation_lines_take_their_split():
    # pytorch/examples imagenet/main.py's ProgressMeter: prefix "Epoch: [{}]" in training, "Test: " in
    # validation, each meter printed as '{name} {val:6.3f} ({avg:6.3f})' (Loss as ':.4e'), tab-separated
    train = "Epoch: [0][  10/5005]\tTime  0.365 ( 0.912)\tData  0.001 ( 0.402)\tLoss 6.8941e+00 (6.9077e+00)\tAcc@1   0.39 (  0.14)"
    test = "Test: [ 10/196]\tTime  0.254 ( 0.400)\tLoss 8.0120e-01 (9.0027e-01)\tAcc@1  80.00 ( 79.10)"
    assert parse_line(train).metrics == {"Time": 0.365, "Data": 0.001, "Loss": 6.8941, "Acc@1": 0.39}
    parsed = parse_line(test)
    assert parsed.metrics == {"Test Time": 0.254, "Test Loss": 0.8012, "Test Acc@1": 80.0} and parsed.batch == 10
    from ingest.roles import role_of

    assert (role_of("Test Loss").role, role_of("Test Acc@1").role) == ("val_loss", "val_accuracy")


@pytest.mark.needs_shared
def test_real_records_printed_by_every_node_are_kept_once():
    # LlamaFactory on 4 nodes: each `{'loss': ...}` record 4 times, behind each node's address
    frame, _, _ = _read(REAL_RUNS_TEST / "log_llamafactory813" / "train.log")
    assert _series(frame, "loss")["value"].to_list() == [1.8673, 0.7744, 0.6309, 0.5621]
    tally = [i for c in read_console(REAL_RUNS_TEST / "log_llamafactory813" / "train.log") for i in c.issues
             if i.kind == "lines_read"]
    assert "12 records printed again under another prefix" in tally[0].detail


def test_a_record_counted_against_a_total_is_no_copy_of_the_one_before(tmp_path):
    # a stuck value printed at two counts of one epoch (lines of a log pasted in a public issue thread,
    # github.com/yunlongyu/EPGN/issues/5): the lines differ before the loss only in `50/100` vs `100/100`, which a
    # node's or rank's prefix never is, so both are records
    path = tmp_path / "output.txt"
    path.write_text("[epoch 1/15, episode 50/100] => loss:nan\n[epoch 1/15, episode 100/100] => loss:nan\n"
                    "('Accuracy: unseen class', 0.05)\n\n"
                    "[epoch 2/15, episode 50/100] => loss:nan\n[epoch 2/15, episode 100/100] => loss:nan\n")
    frame, _, _ = _read(path)
    assert _series(frame, "loss")["epoch"].to_list() == [1, 1, 2, 2]


def test_a_record_numbered_by_a_word_is_no_copy_of_the_one_before(tmp_path):
    # a loss stuck at nan under an iteration count the reader does not take as its step (E2E-MLT's train_ocr.py
    # print, lines of a log pasted in a public issue thread, github.com/MichalBusta/E2E-MLT/issues/53): the lines
    # differ before the loss only in the bracketed count a word names, which a node's prefix never is
    path = tmp_path / "train.log"
    path.write_text("epoch 0[4000], loss: 3.301, lr: 0.00010 \nepoch 0[4500], loss: nan, lr: 0.00010 \n"
                    "epoch 1[5000], loss: nan, lr: 0.00010 \nsave model: backup2/E2E_5000.h5\n"
                    "epoch 1[5500], loss: nan, lr: 0.00010 \nepoch 1[6000], loss: nan, lr: 0.00010 \n")
    frame, _, _ = _read(path)
    assert _series(frame, "loss").height == 5


def test_a_record_whose_values_turn_nan_keeps_its_shape(tmp_path):
    # a region-loss print of unnamed-counter records (lines of a log pasted in a public issue thread,
    # github.com/Bohao-Lee/CME/issues/30): its two finite records are the same record shape as the nan ones after
    # them, so the total's first value, 1.7e6, is read with the rest
    path = tmp_path / "train.log"
    path.write_text("64: nGT 42, recall 1, proposals 35613, loss: x 27.029242, y 28.630236, w 177730.062500, h 1531226.000000, conf 2786.200684, cls 108.162247, class_contrast 0.000000, total 1711906.125000\ncoord_mask: tensor(27.0292, device='cuda:0')\n80: nGT 40, recall 13, proposals 39993, loss: x 23.945053, y 22.210649, w 2029862.625000, h 16542059.000000, conf nan, cls 111.281578, class_contrast 0.000000, total nan\ncoord_mask: tensor(23.9451, device='cuda:0')\n96: nGT 30, recall 0, proposals 0, loss: x nan, y nan, w nan, h nan, conf nan, cls nan, class_contrast nan, total nan\ncoord_mask: tensor(nan, device='cuda:0')\n112: nGT 36, recall 0, proposals 0, loss: x nan, y nan, w nan, h nan, conf nan, cls nan, class_contrast nan, total nan\ncoord_mask: tensor(nan, device='cuda:0')\n")
    frame, _, _ = _read(path)
    total = _series(frame, "loss total")["value"].to_list()
    assert total[0] == 1711906.125 and len(total) == 4 and all(math.isnan(v) for v in total[1:])


@pytest.mark.needs_shared
def test_a_record_repeated_as_is_is_kept(tmp_path):
    # HF Trainer dicts without a step, the loss stuck at 0.0 (Time-MoE's real lines): identical lines are records
    frame, _, _ = _read(REAL_RUNS_TEST / "log_timemoe31" / "train.log")
    assert _series(frame, "loss").height == 10


@pytest.mark.needs_shared
def test_real_step_in_a_hand_annotation_does_not_take_the_records_after_it():
    # unsloth issue: nine `{'loss': 1.46,  'grad_norm':    14.98}` lines, the 4th annotated `<-- spike #1 (step 4)`:
    # the lines after it are records of their own, not its detail lines (as Caffe's output lines are)
    frame, _, _ = _read(REAL_RUNS_TEST / "log_unsloth5207" / "train.log")
    grad = _series(frame, "grad_norm")
    assert grad["step"].to_list() == [0, 1, 2, 4, 4, 5, 6, 7, 9] and grad["step"].n_unique() == 8
    assert grad["value"].to_list()[-1] == 11140.0


def test_mxnet_speedometer_lines_both_spellings():
    # mxnet/callback.py Speedometer: 'Epoch[%d] Batch [%d-%d]\tSpeed: %.2f samples/sec' + '\t%s=%f' per metric
    # (MXNet >= 1.0), and 'Epoch[%d] Batch [%d]\tSpeed: %.2f samples/sec\tTrain-%s=%f' before it
    new = "Epoch[%d] Batch [%d-%d]\tSpeed: %.2f samples/sec" % (2, 100, 200, 1205.34) + "\t%s=%f" % ("cross-entropy", 2.30153)
    old = "Epoch[%d] Batch [%d]\tSpeed: %.2f samples/sec\tTrain-%s=%f" % (0, 1000, 512.3, "CrossEntropy", 2.302)
    for line, epoch, batch, loss in ((new, 2, 200, "cross-entropy"), (old, 0, 1000, "Train-CrossEntropy")):
        parsed = parse_line("INFO:root:" + line)
        assert (parsed.epoch, parsed.batch) == (epoch, batch) and set(parsed.metrics) == {"Speed", loss}


def test_loss_scale_spellings():
    lines = {  # DeepSpeed before 0.4; ColossalAI's amp; fairseq; apex; DeepSpeed now
        "[deepspeed] fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: 4294967296, "
        "reducing to 2147483648": 2147483648,
        "Overflow occurs, the loss scale is adjusted to 32768.0": 32768,
        "| WARNING | fairseq.trainer | NOTE: overflow detected, setting loss scale to: 0.0625": 0.0625,
        "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 16384.0": 16384,
        "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 64, reducing to 32": 32,
    }
    for line, scale in lines.items():
        assert parse_line(line).metrics == {"loss_scale": scale}, line


def test_bare_rates_and_memory_units():
    from ingest.roles import role_of

    assert parse_line("step 100, 0.35 sec/step, loss 2.3").metrics == {"sec/step": 0.35, "loss": 2.3}
    assert parse_line("Speed: 512.3 samples/sec").metrics == {}  # a counter-less line: Speed is no metric word
    mem = parse_line("step 7 | gpu memory current 0.3 GB, peak 2.1 GB | rss=1234.5MB").metrics
    assert mem == {"gpu memory current GB": 0.3, "peak GB": 2.1, "rss MB": 1234.5}  # units kept in the tag
    assert {role_of(t).role for t in mem} == {"memory"}
    assert {role_of(t).role for t in ("s/it", "sec/step", "ms/batch")} == {"step_time"}
    assert {role_of(t).role for t in ("it/s", "samples/sec", "Speed")} == {"throughput"}


def test_tqdm_carriage_return_updates_are_records(tmp_path):
    from tqdm import tqdm

    path = tmp_path / "train.log"
    with open(path, "w") as f:
        bar = tqdm(total=5, file=f, ascii=False, mininterval=0, miniters=1)
        for i in range(5):
            bar.set_postfix(loss=1.0 / (i + 1) if i < 4 else float("nan"))
            bar.update(1)
        bar.close()
    frame, issues, _ = _read(path)
    loss = frame.filter(pl.col("tag") == "loss")
    assert loss["batch"].to_list()[-1] == 5 and math.isnan(loss["value"][-1])
    assert loss["value"][0] == 1.0 and loss.height >= 5


def test_resume_reads_only_appended_lines(tmp_path):
    path = tmp_path / "train.log"
    path.write_text("iter 1: loss 2.0\niter 2: loss 1.5\n")
    _, _, end = _read(path)
    with open(path, "a") as f:
        f.write("iter 3: loss nan\niter 4: lo")
    frame, _, end2 = _read(path, end)
    assert frame["step"].to_list() == [3] and math.isnan(frame["value"][0])
    assert frame["position"].to_list() == [end]
    assert end2 == path.stat().st_size - len("iter 4: lo")
    with open(path, "a") as f:
        f.write("ss 0.5\nTrain net output #0: acc = 0.25\n")
    frame, _, _ = _read(path, end2)
    assert frame["step"].to_list() == [4, 4]  # the counter-less line takes the last step seen before it


def test_second_counter_on_a_line_leaves_the_metrics_readable(tmp_path):
    # litgpt's pretrain loop prints the micro-batch and the optimizer step on one line, with this f-string:
    # f"iter {iter_num} step {step_count}: loss {loss:.4f}, iter time: {ms:.2f}ms{' (optimizer.step)' ...}"
    lines = []
    for iter_num in range(76, 82):
        accumulating = iter_num % 2 == 0
        lines.append(f"iter {iter_num} step {(iter_num + 1) // 2}: loss {10.8259:.4f}, iter time:"
                     f" {198.0 if accumulating else 215.0:.2f}ms{' (optimizer.step)' if not accumulating else ''}")
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    frame, issues, _ = _read(path)
    loss = frame.filter(pl.col("tag") == "loss")
    assert loss["value"].to_list() == [10.8259] * 6
    assert loss["step"].to_list() == list(range(76, 82)) and not loss["ordinal"].any()  # the first counter
    assert "step" not in frame["tag"].to_list() and issues == []


def test_hf_log_lines_with_typographic_quotes(tmp_path):
    # HF Trainer prints its logs as a dict; pasted through an issue tracker or an editor, the quotes become
    # typographic (transformers#33336 shows `{‘loss’: 1.453, ...}`). The values are read the same.
    logs = [{"loss": 1.453, "grad_norm": 2.474428415298462, "learning_rate": 4.682539682539683e-05, "epoch": 0.19},
            {"loss": 1.406, "grad_norm": 2.5064773559570312, "learning_rate": 4.3650793650793655e-05, "epoch": 0.38}]
    path = tmp_path / "train.log"
    path.write_text("".join(str(d).replace("'", "\u2019").replace("{\u2019", "{\u2018")
                            .replace(", \u2019", ", \u2018") + "\n" for d in logs), encoding="utf-8")
    assert "\u2018loss\u2019: 1.453" in path.read_text(encoding="utf-8")
    frame, issues, _ = _read(path)
    for key in logs[0]:
        assert frame.filter(pl.col("tag") == key)["value"].to_list() == [d[key] for d in logs]
    assert issues == []


def test_unmatched_metric_lines_are_counted_once(tmp_path):
    path = tmp_path / "train.log"
    path.write_text("loss(5) reached\nstarting\nacc# 92.1 top\nloss(7) reached\n")
    chunks = list(read_console(path, 0))
    issues = [i for c in chunks for i in c.issues]
    assert [i.kind for i in issues] == ["lines_read", "unmatched_lines", "no_loss_named"]  # nothing was read from it
    assert "3 lines" in issues[1].detail and "1, 3, 4" in issues[1].detail
    assert issues[0].detail.endswith("took: none; 3 lines look like metrics but no pattern took them")


@pytest.mark.needs_shared
def test_lines_read_counts_the_lines_each_pattern_took():
    chunks = list(read_console(REAL_RUNS_TEST / "log_tacotron485" / "train.log"))
    tally = [i for c in chunks for i in c.issues if i.kind == "lines_read"]
    assert len(tally) == 1 and tally[0].position == 0
    # 7 `Train loss N X ... s/it` lines and 7 apex `reducing loss scale to` lines
    assert ("loss_step_value 7" in tally[0].detail and "bare_rate 7" in tally[0].detail
            and "loss_scale_set 7" in tally[0].detail and "phrase 7" in tally[0].detail)
    assert tally[0].detail.endswith("; 0 lines look like metrics but no pattern took them")


def test_binary_junk_named_train_log(tmp_path):
    path = tmp_path / "train.log"
    path.write_bytes(bytes(range(256)) * 40)
    chunks = list(read_console(path, 0))
    assert [i.kind for c in chunks for i in c.issues] == ["not_this_format"]
    assert all(c.scalars is None or c.scalars.height == 0 for c in chunks)


def test_empty_log(tmp_path):
    path = tmp_path / "train.log"
    path.write_bytes(b"")
    chunks = list(read_console(path, 0))
    assert all(c.scalars is None or c.scalars.height == 0 for c in chunks) and chunks[-1].end == 0


@pytest.mark.parametrize("rel,claimed", [
    ("train.log", True), ("slurm-12345.out", True), ("nohup.out", True), ("stdout.txt", True),
    ("console-rank0.txt", True), ("wandb/run-x/files/output.log", True),
    ("wandb/run-x/logs/debug-internal.log", False), ("wandb/run-x/logs/debug.log", False), ("notes.txt", False),
])
def test_format_claims(rel, claimed):
    fmt = format_for(PurePosixPath(rel))
    assert (fmt is not None and fmt.name == "console") == claimed


@pytest.mark.needs_shared
def test_unnamed_log_is_sniffed(tmp_path):
    head = (REAL / "log_nanogpt215" / "console.log").read_bytes()[:4096]
    fmt = format_for(PurePosixPath("run1"), lambda: head)
    assert fmt is not None and fmt.name == "console"
    assert format_for(PurePosixPath("README"), lambda: b"This project trains models.\nSee docs.\n") is None


def test_reading_never_imports_heavy_modules():
    import subprocess

    code = ("import sys, ingest.formats, ingest.console, ingest.tabular, ingest.hf_trainer, ingest.mlflow, "
            "ingest.lightning; bad=[m for m in ('torch','scipy','wandb','tensorboard') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[1])


# ------------------------------------------------------------------------------ the slow reference
# The reader as it was before it was made fast (ingest/console.py at 342bb9a): every pattern of the table
# applied to every line, one line at a time. The fast reader must give exactly what this gives.


def reference_parse_line(line: str, repeated: bool = False) -> ParsedLine:
    text = C._as_assignments(C._normalise(C.ANSI.sub("", line)))
    clean = text
    out = ParsedLine(metrics={})
    prefix = None
    covered = 0  # characters spanned by pairs: a repeated line's loose pairs count on a record line only
    chars = sum(not c.isspace() for c in text)
    for pattern in C._TIME:
        match = None
        for found in pattern.regex.finditer(text):
            estimate = C._ESTIMATE_BEFORE.search(text, 0, found.start())
            if estimate:  # an estimate's clock is blanked, never the line's time
                year = C._YEAR_AFTER.match(text, found.end())
                text = C._blank(text, (estimate.start(), year.end() if year else found.end()))
                continue
            match = found
            break
        if match:
            out.time = {k: v for k, v in match.groupdict().items() if v is not None}
            out.time_kind = pattern.name
            text = C._blank(text, match.span())
            break
    for pattern in C._IGNORED:
        for match in list(pattern.regex.finditer(text)):
            text = C._blank(text, match.span())
    unignored = text
    counted_by = set()
    for pattern in C._COUNTERS:
        for match in pattern.regex.finditer(text):
            groups = match.groupdict()
            found = [name for name in ("step", "epoch", "batch") if groups.get(name) is not None]
            if found:
                counted_by.add(pattern.name)
            took = [name for name in found if getattr(out, name) is None]
            for name in took:
                setattr(out, name, int(groups[name]))
            if groups.get("of") is not None and out.per_epoch is None and {"step", "batch"} & set(took):
                out.per_epoch = int(groups["of"])
            if groups.get("value") is not None:  # a counter inside a metric: `Train loss 12001 0.166141`
                covered += match.end() - match.start()
                out.metrics.setdefault(match["key"].strip(), C._float(match["value"]))
            if groups.get("split") is not None and prefix is None:
                prefix = groups["split"]
            if found:  # a second counter of a taken kind is blanked too (`iter 76 step 38: loss ...`)
                text = C._blank(text, match.span())
            if took:
                break
    out.counted_by = counted_by  # the counter patterns that matched (the reader's `batch_step` asks for `batch`)
    bar = "tqdm_bar" in counted_by or "tqdm_count" in counted_by
    if bar:  # tqdm's `: ` after a description's value ends the value
        text = C._DESCRIPTION_END.sub(lambda m: m.group(1) + " ", text)
    text = C._LINE_END_COLON.sub(lambda m: m.group(1) + " ", text)  # `chamfer_dist 1.6065:` ends its value
    for pattern in C._ASSIGN:
        if pattern.name == "bare_rate" and bar:
            continue  # a tqdm bar's own rate is not read
        for match in list(pattern.regex.finditer(text)):
            covered += match.end() - match.start()
            if pattern.tags:
                for group, tag in pattern.tags:
                    if match[group] is not None:
                        out.metrics.setdefault(tag, C._float(match[group]))
            elif pattern.tag is not None:
                out.metrics.setdefault(pattern.tag, C._float(match["value"]))
            else:  # a unit printed with the value stays in its tag (`mem=2100MB`: `mem MB`)
                key = match["key"].strip()
                out.metrics.setdefault(C._unit_tag(key, match.groupdict().get("unit")) or key, C._float(match["value"]))
            text = C._blank(text, match.span())
    counted = out.step is not None or out.epoch is not None or out.batch is not None
    text = C._WIDE_SEPARATOR.sub(r"\1 ", text)
    loose = []
    for clause in C.CLAUSE_SPLIT.split(text):
        clause = clause.strip().lstrip("-:>#*").rstrip(".").strip()
        if not clause or not any(c.isdigit() or c in "nNiI" for c in clause):
            continue
        match = C.PHRASE.match(clause)
        if match is not None and match["lead"] and not C.METRIC_WORDS.search(match["key"]):
            match = None  # prose before a pair counts only before a metric's name
        if match is not None and any(C._VALUE_WORD.fullmatch(w) for w in match["key"].split()):
            match = None  # `nan` is a value, never a word of a name
        if match is None and ": " in clause:  # `Train: loss: 0.3`: the pair after a label ending in a colon
            for cut in C._LABEL_END.finditer(clause):  # never before a value word (`Loss: nan 1`)
                match = C.PHRASE.match(clause[cut.end():])
                if match is not None:
                    clause = clause[cut.end():]
                    break
        if match is not None:
            pairs = [(match.start("key"), match.end("key"), *match.span("value"), match["unit"] or match["unit2"])]
        else:  # `Train Acc 10.144 Train Loss 2.315 mem 2100MB`, part by part
            pairs, whole = C._pairs(clause)
        for ks, ke, vs, ve, unit in pairs:
            covered += ve - ks
            key = clause[ks:ke].strip()
            tag = C._unit_tag(key, unit) or key  # `current 0.3 GB`, nanoGPT's `time 1099.34ms`
            if counted or C.METRIC_WORDS.search(key) and (match is not None or whole or C._names_quantity(key)):
                out.metrics.setdefault(tag, C._float(clause[vs:ve]))
            elif match is not None or whole:  # without a counter or a metric's name: pairs only, no prose
                loose.append((tag, C._float(clause[vs:ve])))
    # Values under a label naming memory, ending in a colon, before the first pair (`Memory info of GPU
    # /physical_device:GPU:0: current: 0.18, peak: 2.55`): `Memory info of GPU current`, with or without a counter.
    named = {**out.metrics, **dict(loose)}
    if named:
        first = min(text.find(t.split(" ")[0]) if t in text or t.split(" ")[0] in text else len(text) for t in named)
        head = text[:first].rsplit("\x00", 1)[-1].rstrip()
        kept = [w for w in (t.rstrip(":") for t in head.split()) if re.fullmatch(r"[A-Za-z][A-Za-z_-]*", w)]
        if head.endswith(":") and 0 < len(kept) <= 6 and C.role_of(" ".join(kept)).role == "memory":
            label = " ".join(kept)
            out.metrics = {(f"{label} {t}" if C.role_of(t).role == "other" and not any(c.isdigit() for c in t)
                            else t): v for t, v in named.items()}
            loose = []
    # A repeated line's loose pairs count where it holds two pairs or more (`T: 17.6 | B: 3.2`).
    if repeated and loose and len(out.metrics) + len(loose) >= 2 and 2 * covered >= chars:
        for tag, value in loose:
            out.metrics.setdefault(tag, value)
    if C._GROUP_LABEL.search(line):  # `[Losses: x 0.27, total 15.1]`: `Losses x`, `Losses total`
        groups = []
        for match in C._GROUP_LABEL.finditer(line):
            opened = line[match.end():match.end() + 1] in "[{("
            end = C._GROUP_END.search(line, match.end() + (1 if opened else 0))
            groups.append((match["label"], match.end(), end.start()))
        renamed = {}
        for tag, value in out.metrics.items():
            at = line.find(tag)
            label = next((g for g, s, e in groups if s <= at < e), None)
            if label is not None and C.role_of(tag).role == "other" and not C._OWN_NAMES.search(tag):
                tag = f"{label} {tag}"
            renamed.setdefault(tag, value)
        out.metrics = renamed
    if C._SPLIT_GROUP.search(line):  # `val_metrics={"loss": 1.2}`: `val loss`
        groups = [(m["split"], m.end(), line.find("}", m.end())) for m in C._SPLIT_GROUP.finditer(line)]
        renamed = {}
        for tag, value in out.metrics.items():
            at = line.find(tag)
            split = next((g for g, s, e in groups if s <= at < e), None)
            renamed.setdefault(tag if split is None or C._names_split(tag) else f"{split} {tag}", value)
        out.metrics = renamed
    if not clean.isascii():  # a key glued to letters of another script before it (`整体测试集上的Loss: 230`) names it whole
        glued = {}
        for tag, value in out.metrics.items():
            m = re.search(rf"(\w*)(?<![A-Za-z0-9_]){re.escape(tag)}(?![A-Za-z0-9_])", clean)
            glue = m.group(1) if m else ""
            k = len(glue)
            while k > 0 and C._uncased_letter(glue[k - 1]):
                k -= 1
            glued.setdefault(glue[k:] + tag, value)
        out.metrics = glued
    if prefix is None and out.metrics:  # `Valid | Epoch 1 | Loss 0.22`: a line that begins with a held-out split
        prefix = C._line_split(unignored)
    if prefix is not None:  # `Test: [10/196] ... Loss 0.8`: `Test Loss`, unless the tag names a split itself
        out.metrics = {(t if any(w in C.SPLIT_WORDS for w in C.words(t)) else f"{prefix} {t}"): v
                       for t, v in out.metrics.items()}
    # `v_loss 4.03  loss 4.25  v_kl 59.8  kl 22.5`: a `v_` prefix mirroring two of the line's names or more
    mirrored = [t for t in out.metrics if t.startswith("v_") and t[2:] in out.metrics]
    if len(mirrored) >= 2:
        out.metrics = {(f"val {t[2:]}" if t in mirrored else t): v for t, v in out.metrics.items()}
    return out


def _looks(line: str) -> bool:
    """LOOKS_LIKE_METRIC outside the line's time and what the table ignores (a settings dump is no unread metric)."""
    text = line
    for pattern in C._TIME:
        match = pattern.regex.search(text)
        if match:
            text = C._blank(text, match.span())
            break
    for pattern in C._IGNORED:
        for match in list(pattern.regex.finditer(text)):
            text = C._blank(text, match.span())
    return C.LOOKS_LIKE_METRIC.search(text) is not None


class _ReferenceState(C._State):
    """The old per-line loop; `_wall_time` and `issues` are the old ones too (below)."""

    def parse(self, data: bytes, offset: int) -> pl.DataFrame:
        cols: dict[str, list] = {k: [] for k in ("tag", "step", "value", "position", "wall_time", "epoch",
                                                 "batch", "ordinal")}
        pos = 0
        data, settings = C._settings_blanked(data)  # a settings dump's numbers: no records
        self.n_settings += settings
        # Outlines counted over the chunk, on top of those counted before it (the fast reader's rule).
        texts = [m.group().rstrip(b"\r\n").decode("utf-8", errors="replace")
                 for m in re.finditer(rb"[^\r\n]*(?:\r\n|\r|\n)", data)]
        chunk_counts: dict[str, int] = {}
        for text in texts:
            if re.search(C._PAIR, text):
                chunk_counts[C.outline(text)] = chunk_counts.get(C.outline(text), 0) + 1
        for name, n in chunk_counts.items():
            if name in self.outlines or len(self.outlines) < C.MAX_OUTLINES:
                self.outlines[name] = self.outlines.get(name, 0) + n
        lines = []
        closing: set[int] = set()  # positions of progress bars' closing lines read as records
        header = self.epoch_heard
        after_cr = False  # the segment before this one, in this chunk, ended with a lone `\r` (a bar's redraw)
        for match in re.finditer(rb"[^\r\n]*(?:\r\n|\r|\n)", data):
            raw = match.group()
            position = offset + pos
            pos += len(raw)
            ordinal = self.segment
            line_no = self.line_no
            self.segment += 1
            if raw.endswith(b"\n"):
                self.line_no += 1
            redrawn, after_cr = after_cr, raw.endswith(b"\r")
            text = raw.rstrip(b"\r\n").decode("utf-8", errors="replace")
            if not text.strip():
                continue
            repeated = bool(re.search(C._PAIR, text)) and self.outlines.get(C.outline(text), 0) >= C.REPEATS
            parsed = reference_parse_line(text, repeated)
            line_counters = {k: getattr(parsed, k) for k in ("step", "epoch", "batch") if getattr(parsed, k) is not None}
            if parsed.per_epoch is not None:
                line_counters["of"] = parsed.per_epoch
            metrics, counters, _, by, listed = self.tabled(text, parsed.metrics, line_counters, False,
                                                           tuple(parsed.counted_by))
            if "epoch" in counters and not listed:
                header = None if metrics else counters["epoch"]
            self.note_epoch_steps(metrics, counters, header)
            lines.append((position, ordinal, line_no, redrawn, text, parsed, metrics, counters, listed, by))
        self.epoch_heard = header
        for position, ordinal, line_no, redrawn, text, parsed, metrics, counters, listed, by in lines:
            if self.steps_in_epoch and "step" in counters and ("epoch" in counters or self.header_epoch is not None):
                counters = {**counters, "batch": counters.get("batch", counters["step"])}
                del counters["step"]
            parsed = ParsedLine(metrics, counters.get("step"), counters.get("epoch"), counters.get("batch"),
                                parsed.time, parsed.time_kind)
            wall_time = self._reference_wall_time(parsed, line_no)
            if listed:
                for i, (n, value) in enumerate(listed):
                    cols["tag"].append(self.stem_tag)
                    cols["step"].append((ordinal if len(listed) == 1 else i) if n is None else n)
                    for col, v in (("value", value), ("position", position), ("wall_time", wall_time),
                                   ("epoch", None), ("batch", None), ("ordinal", n is None)):
                        cols[col].append(v)
                continue
            held_out = counts_batches = False  # this reference reads no evaluation block
            if parsed.epoch is not None:
                self.epoch_seen = True
            if parsed.step is None and parsed.batch is not None and parsed.metrics:
                held_out = all(C._names_split(t) for t in parsed.metrics)
                if not held_out:
                    parsed.step = self.batch_step(counters, by)
                    counts_batches = parsed.step is not None and "of" not in counters
            if not parsed.metrics:
                if _looks(text):
                    self.n_unmatched += 1
                    if len(self.unmatched) < C.MAX_LINES_LISTED:
                        self.unmatched.append(line_no)
                    if self.unmatched_sample is None:
                        self.unmatched_sample = text.strip()[:C.MAX_SAMPLE_CHARS]
                if parsed.step is not None:
                    self.last_step, self.step_tags = parsed.step, frozenset()
                if parsed.epoch is not None:
                    self.header_epoch, self.epoch_kept = parsed.epoch, False
                    self.note_header_epoch(parsed.epoch, line_no)
                    if parsed.step is None and not self.step_tags:
                        self.last_step = None
                continue
            if parsed.epoch is not None:
                self.header_epoch = None
            if parsed.step is not None:
                step, is_ordinal = parsed.step, False
                self.last_step, self.step_tags = parsed.step, frozenset(parsed.metrics)
            elif self.last_step is not None and frozenset(parsed.metrics) != self.step_tags and (
                    parsed.epoch is None and parsed.batch is None and C.EPOCH_TAG not in parsed.metrics or held_out
                    or parsed.batch is None and any(C._names_split(t) for t in parsed.metrics)):
                step, is_ordinal = self.last_step, False
            else:
                step, is_ordinal = ordinal, True
            if self.copied_record(parsed.metrics, (None if is_ordinal else step, parsed.epoch, self.header_epoch,
                                                   parsed.batch), text, wall_time):
                continue
            if self.redraw(ordinal, parsed.metrics, parsed.epoch, redrawn):
                continue
            if is_ordinal and parsed.epoch is None and parsed.batch is None and self.header_epoch is not None \
                    and not self.epoch_kept and "epoch" not in parsed.metrics:
                parsed.metrics["epoch"] = float(self.header_epoch)  # once under an `epoch N` line, as a series
                self.epoch_kept = True
            launch = self.relaunched(None if is_ordinal or counts_batches else step,
                                     parsed.epoch if parsed.epoch is not None else self.header_epoch,
                                     parsed.metrics.get(C.EPOCH_TAG) if is_ordinal else None, line_no)
            if launch is not None:
                parsed.metrics[C.LAUNCH_TAG] = float(launch)
            if is_ordinal and re.search(r"\b100%\|[^|\n]*\|\s*(\d+)/\1\b", text):
                closing.add(position)  # a bar's closing line: its pass's summary where records print a step
            for tag, value in parsed.metrics.items():
                cols["tag"].append(tag)
                cols["step"].append(step)
                cols["value"].append(value)
                cols["position"].append(position)
                cols["wall_time"].append(wall_time)
                cols["epoch"].append(parsed.epoch if parsed.epoch is not None else self.header_epoch)
                cols["batch"].append(parsed.batch)
                cols["ordinal"].append(is_ordinal)
                self.record_line = line_no
        frame = pl.DataFrame(cols, schema={
            "tag": pl.Utf8, "step": pl.Int64, "value": pl.Float64, "position": pl.Int64, "wall_time": pl.Float64,
            "epoch": pl.Int64, "batch": pl.Int64, "ordinal": pl.Boolean})
        stepped = set(frame.filter(~pl.col("ordinal"))["tag"].to_list())
        summaries = {p for p in closing if stepped and set(frame.filter(pl.col("position") == p)["tag"].to_list())
                     - {C.LAUNCH_TAG, C.EPOCH_TAG} <= stepped}
        self.n_summaries += len(summaries)
        frame = frame.filter(~pl.col("position").is_in(sorted(summaries)))
        self.names_read.update(frame["tag"].unique().to_list())
        return scalars_frame(frame)

    def _reference_wall_time(self, parsed: ParsedLine, line_no: int) -> float | None:
        t = parsed.time
        if not t:
            return None
        frac = float("0." + t["frac"]) if t.get("frac") else 0.0
        tod = int(t["h"]) * 3600 + int(t["mi"]) * 60 + int(t["s"]) + frac
        if "y" in t:
            try:
                midnight = datetime(int(t["y"]), int(t["mo"]), int(t["d"]), tzinfo=timezone.utc)
            except ValueError:
                return None
            self.date, self.last_tod = midnight, None
            return midnight.timestamp() + tod - C._offset_seconds(t.get("tz"))
        if self.assumed is None and self.date is None:
            self.assumed = line_no
        base = self.date or datetime(1970, 1, 1, tzinfo=timezone.utc)
        if "mo" in t:
            try:
                base = base.replace(month=int(t["mo"]), day=int(t["d"]))
            except ValueError:
                return None
        elif self.last_tod is not None and tod < self.last_tod - 60:
            base = base + timedelta(days=1)
            self.date = base
        self.last_tod = tod
        return base.timestamp() + tod


def reference_read(path: Path, start: int = 0):
    """Chunks as the old reader cut and parsed them (the chunking and resume code is unchanged)."""
    with path.open("rb") as f:
        head = f.read(4096) if start == 0 else b""
        if start == 0 and C._is_binary(head):
            yield Chunk(end=path.stat().st_size, issues=[Issue(0, "not_this_format", "binary")])
            return
        state = _ReferenceState.resume(f, start)
        state.start = start  # as read_console's state knows where its read began
        f.seek(start)
        offset, pending = start, b""
        while True:
            block = f.read(C.CHUNK_BYTES)
            data = pending + block
            cut = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
            if cut == 0 and block:
                pending = data
                continue
            complete, pending = data[:cut], data[cut:]
            if complete:
                frame = state.parse(complete, offset)
                offset += len(complete)
                last = not block
                yield Chunk(end=offset, scalars=frame, issues=state.issues(path.name) if last else [])
                if last:
                    return
            if not block:
                yield Chunk(end=offset, issues=state.issues(path.name))
                return


# ------------------------------------------------------------------- the fast reader equals the reference


def _rows(chunks) -> tuple[list, list, list]:
    """Points (values as their bits, so NaN == NaN and -0.0 != 0.0), issues and chunk ends."""
    frames = [c.scalars for c in chunks if c.scalars is not None]
    frame = pl.concat(frames) if frames else scalars_frame(None)
    bits = frame["value"].to_numpy().view(np.int64).tolist()
    rows = list(zip(frame["tag"], frame["step"], bits, frame["wall_time"], frame["position"], frame["epoch"],
                    frame["batch"], frame["ordinal"]))
    # the `lines_read` tally names the fast reader's patterns: the reference keeps none
    return rows, [i for c in chunks for i in c.issues if i.kind != "lines_read"], [c.end for c in chunks]


def _assert_same_as_reference(path: Path, start: int = 0) -> int:
    got, want = _rows(list(read_console(path, start))), _rows(list(reference_read(path, start)))
    assert got[0] == want[0], "points differ"
    assert got[1:] == want[1:]
    return len(got[0])


CONSOLE_LOGS = sorted(REAL.glob("log_*/console.log")) + [REAL / "wandb_vqvae" / "output.log"]


@pytest.mark.parametrize("path", CONSOLE_LOGS, ids=lambda p: p.parent.name)
@pytest.mark.needs_shared
def test_real_console_log_equals_reference_from_every_line(path):
    data = path.read_bytes()
    assert _assert_same_as_reference(path) > 0
    for start in [m.end() for m in re.finditer(rb"\r\n|\r|\n", data)]:
        _assert_same_as_reference(path, start)


# Lines the generated log adds to the benchmark's mix: what the fast path must not get wrong.
TRICKY = [
    "\x1b[32m2024-01-01 10:00:00\x1b[0m iter 5: loss 1.5",  # escapes split a stamp; taken out first
    "lr\x1b[0m5", "\x1b[1mloss\x1b[0m: 0.25 \x1b[31m(grad 3)\x1b[0m",
    "f1 0.93", "F1: 0.5 top5 acc 0.8 f2 0.1", "val f1=0.7, f2=0.6",  # METRIC_WORDS names the digit 1
    "lr5", "lrnan", "ſtep 5 loss 2", "Global \u017ftep: 7, \u212al 0.1", "\u0130ter 3: lo\u0131ss 2",
    "learnıng rate 0.1", "x=\u00a05", "x=\x1c7", "'k':\x1f 8", "Loss is Infinity", "loss = +inf, acc = -NaN",
    "{'lr 2024-01-01 10:00:00': 5, 'loss': 1}",  # a dict key holding a blanked time stamp
    "{\u2018loss\u2019: 1.453, \u201cgrad_norm\u201d: 2.47}", "{\u2018k\u2019: 8}",  # typographic quotes
    "iter 76 step 38: loss 10.8259, iter time: 197.87ms", "step 3 epoch 1 step 4 loss 2",  # two counters
    "Fp16 Grad Scale:  0   Required: 194 hours  Epoch: 1", "a:   b:    c: 7   loss:     9",
    "step 12/300 | loss 0.5 | acc 0.9", "epoch 2 batch 3/9 loss 0.31 loss 0.4",
    "[10:00:00] step 1 loss: 0.25", "[09:00:00] step 2 loss: 0.2", "[23:59:59.5] loss 1", "[00:00:01] loss 2",
    "I0822 20:54:57.256644 14071 solver.cpp:341] Iteration 2, loss = nan",
    "I1340 20:54:57.256644 14071 solver.cpp:341] Iteration 3, loss = 1",  # month 13: no wall time
    "2024-02-30 10:00:00 loss 1", "2024-03-26T10:00:00.123456789+05:30 loss 3", "2024-03-26 10:00:00Z loss 4",
    "loss(5) reached", "acc@1 92.1 top", "grad norm", "Traceback: line 71", "٣ loss ٣", "loss ٣.٥",
    "line 71, in <module>", "   ", "", "Map:  45%|████▌     | 450/1000 [00:01<00:02, 400it/s]",
    "Epoch 1:  50%|█████     | 5/10 [00:01<00:01, 4.2it/s, loss=0.5, v_num=0]", "\ufffd\ufffd loss \ufffd 3",
]


def _tricky_log(path: Path, n_lines: int = 3000) -> None:
    from benchmarks.bench_ingest_console import write_mixed_log

    write_mixed_log(path, n_lines, seed=7)
    mixed = path.read_bytes().split(b"\n")
    extra = [t.encode() for t in TRICKY] + [b"loss \xff\xfe 3", b"\xe2\x80 iter 9 loss 1", b"acc 0.5 \xe2"]
    out = []
    for i, line in enumerate(mixed):
        out.append(line)
        if i % 7 == 0:
            out.append(extra[(i // 7) % len(extra)])
    # line breaks of every kind: \n, \r\n, a lone \r (a tqdm update), blank lines
    breaks = [b"\n", b"\r\n", b"\r", b"\n\n", b"\r\r\n"]
    path.write_bytes(b"".join(line + breaks[i % 5 if i % 3 == 0 else 0] for i, line in enumerate(out)))


def test_mixed_log_equals_reference(tmp_path, monkeypatch):
    path = tmp_path / "train.log"
    _tricky_log(path)
    assert _assert_same_as_reference(path) > 1000
    # Small chunks put chunk boundaries everywhere, `\r|\n` pairs included; resume from arbitrary bytes.
    monkeypatch.setattr(C, "CHUNK_BYTES", 4099)
    _assert_same_as_reference(path)
    size = path.stat().st_size
    for start in (1, size // 3, size // 2 + 1, size - 100):
        _assert_same_as_reference(path, start)


def test_every_tricky_line_parses_as_the_reference():
    for line in TRICKY:
        _assert_parses_as_reference(line)


_FRAGMENTS = [p.example for p in PATTERNS] + TRICKY + [
    "loss", "Loss", "lr", "acc", "f", "1", "0", "7", "12", "3.5", "1e-3", ".5", "nan", "Inf", "-inf", "=", ":",
    " ", "  ", "   ", ",", "|", "'", '"', "[", "]", "(", ")", "\x00", "\x1b[0m", "%|", "/", "-", ". ", "is",
    "step", "Iter", "Epoch", "batch", "global_step", "10:00:00", "2024-01-01 ", "ſ", "K", "ı", "İ", "٣", "\u00a0",
    "\x1c", "█", "\ufffd", "_", "e5", "Train net output #0:",
    "train", "val step:", " -> ", " --- ", "nan.0", "the training loss is ", "iteration,1,train_loss,2.3", ";", "\t",
]


@settings(deadline=None, max_examples=400, derandomize=True)
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=12))
def test_any_line_parses_as_the_reference(parts):
    _assert_parses_as_reference("".join(parts).replace("\n", " ").replace("\r", " "))


def _assert_parses_as_reference(line: str) -> None:
    fast, slow = parse_line(line), reference_parse_line(line)
    assert list(fast.metrics) == list(slow.metrics), line
    assert all(_bits(fast.metrics[k]) == _bits(slow.metrics[k]) for k in slow.metrics), line
    assert (fast.step, fast.epoch, fast.batch, fast.time, fast.time_kind) == (
        slow.step, slow.epoch, slow.batch, slow.time, slow.time_kind), line
    looks = not slow.metrics and _looks(line)
    assert C._parse(line)[4] == looks, line
    # A line the pre-filter drops must give nothing at all.
    one = pl.Series([line])
    if not (one.str.contains(C._CANDIDATE) | (one.str.contains(C._METRIC_WORD) & one.str.contains(C._NUMBER)))[0]:
        assert not line.strip() or (not slow.metrics and slow.time is None and slow.step is None and not looks)


def _bits(x: float) -> int:
    return int(np.float64(x).view(np.int64))


def test_no_pattern_names_a_digit_but_f1():
    """The shape cache treats the ASCII digits alike; a regex naming one (as `f1` does) must be handled."""
    from re import _parser

    named = []

    def walk(tree, prev):
        for op, av in tree:
            name = str(op)
            if name == "LITERAL" and chr(av).isdigit():
                named.append((prev, chr(av)))
            elif name in ("NOT_LITERAL",) and chr(av).isdigit():
                named.append((None, chr(av)))
            elif name == "IN":
                digits = {chr(c) for o, c in av if str(o) == "LITERAL" and chr(c).isdigit()}
                ranges = [r for o, r in av if str(o) == "RANGE"]
                covered = {chr(c) for lo, hi in ranges for c in range(lo, hi + 1) if chr(c) in "0123456789"}
                if (digits | covered) and (digits | covered) != set("0123456789"):
                    named.append((None, "".join(sorted(digits | covered))))
            for sub in av if isinstance(av, (list, tuple)) else ():
                if isinstance(sub, _parser.SubPattern):
                    walk(sub, None)
                elif isinstance(sub, (list, tuple)):
                    for item in sub:
                        if isinstance(item, _parser.SubPattern):
                            walk(item, None)
            prev = chr(av) if name == "LITERAL" else None

    regexes = [p.regex for p in PATTERNS] + [C.PHRASE, C.CLAUSE_SPLIT, C._WIDE_SEPARATOR, C.METRIC_WORDS,
                                              C.LOOKS_LIKE_METRIC]
    for regex in regexes:
        walk(_parser.parse(regex.pattern, regex.flags), None)
    assert set(named) == {("f", "1")}, named
    assert C._DIGIT_WORDS == ("f1", "F1")


def test_doubled_sign_before_inf_is_no_number_and_no_crash(tmp_path):
    """`loss=--inf` once crashed the reader with ValueError from float(); now it is simply not a value."""
    log = tmp_path / "train.log"
    log.write_text("step 1: loss=--inf lr=0.1\nstep 2: loss: +-Infinity\nstep 3: loss=-inf\n")
    points = pl.concat([c.scalars for c in read_console(log, 0) if c.scalars is not None])
    got = {(r["tag"], r["step"]): r["value"] for r in points.iter_rows(named=True)}
    assert got[("lr", 1)] == 0.1
    assert got[("loss", 3)] == float("-inf")
    assert ("loss", 1) not in got and ("loss", 2) not in got


@pytest.mark.needs_shared
def test_analyze_verbose_shows_the_lines_each_pattern_took(tmp_path, capsys):
    from forensics.cli import main

    run = REAL_RUNS_TEST / "log_tacotron485"
    assert main(["analyze", str(run), "--db", str(tmp_path / "f.duckdb"), "-v"]) == 0
    out = capsys.readouterr().out
    assert "console lines read:\n  train.log from byte 0: lines each pattern took: " in out
    assert main(["analyze", str(run), "--db", str(tmp_path / "f.duckdb")]) == 0
    quiet = capsys.readouterr().out
    assert "console lines read" not in quiet and "read with problems" not in quiet  # a tally, not a problem


def test_tqdm_description_ending_in_a_value_is_read(tmp_path):
    # tqdm joins a description and its bar with `: `, so a description that ends in a value (`Loss: 0.9741`) is
    # followed by a colon: the value ends there, it is no label.
    from tqdm import tqdm

    path = tmp_path / "train.log"
    losses = [0.9741, 1.3742, 1.239, float("nan")]
    with open(path, "w") as f:
        bar = tqdm(total=len(losses), file=f, mininterval=0, miniters=1)
        for step, loss in enumerate(losses):
            bar.set_description(f"Epoch 1, Step {step}, Loss: {loss:.4f}")
            bar.update(1)
        bar.close()
    frame, _, _ = _read(path)
    got = frame.filter(pl.col("tag") == "Loss")["value"].to_list()
    assert got[:3] == losses[:3] and math.isnan(got[-1])


def test_message_glued_to_a_value_is_cut_off(tmp_path):
    # A progress line printed without its line break, then another print (Keras' progbar before TerminateOnNaN's
    # message, or before the next epoch's header): the value ends where the capitalised message begins, and the
    # message's counters (`Batch 8`, `Epoch 1/100`) are not the record's.
    path = tmp_path / "train.log"
    with open(path, "w") as f:
        for epoch, loss in [(35, 1.4), (36, 1.3995), (37, float("nan"))]:
            print(f"Epoch {epoch}/100", file=f)
            print(f" 99/100 [=============================>.] - ETA: 0s - loss: {loss:.4f}", end="", file=f)
            print("Epoch 1/100" if epoch < 37 else "Batch 8: Invalid loss, terminating training", file=f)
            print(f"100/100 [==============================] - 1s 1ms/step - loss: {loss:.4f} - val_loss: 1.9", file=f)
    frame, _, _ = _read(path)
    loss = frame.filter(pl.col("tag") == "loss")
    assert loss.height == 6 and loss["value"][0] == 1.4 and math.isnan(loss["value"][-1])
    assert set(loss["epoch"].to_list()) == {35, 36, 37} and "launch" not in frame["tag"].to_list()
    # digits that end a name, and a date, stay as they are
    assert parse_line("resnet50Block loss: 0.3").metrics == {"resnet50Block loss": 0.3}
    assert parse_line("step 3 loss 0.5 on 12Nov2023").metrics == {"loss": 0.5}


def test_asctime_stamps_are_times_not_metrics(tmp_path):
    # st-gcn's print_log stamps each line with `time.asctime()`: `[ Tue Nov 14 17:22:06 2023 ] ...`. Its weekday and
    # month are a date's words, not a metric's name (`Tue Nov` 14), and the stamp is the line's time.
    import time

    path = tmp_path / "log.txt"
    start = datetime(2023, 11, 14, 17, 20, 12, tzinfo=timezone.utc).timestamp()
    with open(path, "w") as f:
        for epoch in range(1, 4):
            now = start + 120 * epoch
            stamp = time.asctime(time.gmtime(now))
            print(f"[ {stamp} ] Training epoch: {epoch}", file=f)
            print(f"[ {stamp} ] \tMean training loss: {2.0 / epoch:.4f}.  Mean training acc: {40 + epoch}.00%.", file=f)
            print(f"[ {stamp} ] Eval epoch: {epoch}", file=f)
            print(f"[ {stamp} ] \tMean test loss of 8 batches: {1.5 / epoch}.", file=f)
    frame, _, _ = _read(path)
    assert not {t for t in frame["tag"].unique() if re.search(r"Tue|Nov", t)}
    loss = frame.filter(pl.col("tag") == "Mean training loss")
    assert loss["value"].to_list() == [2.0, 1.0, 0.6667]
    assert loss["wall_time"].to_list() == [start + 120 * e for e in range(1, 4)]


def test_table_with_a_duration_column_keeps_its_rows(tmp_path):
    # fastai's per-epoch table ends in a `time` column printed on a clock (`00:03`): a cell that holds no value, so
    # the row's other cells are still read under the header's names.
    path = tmp_path / "train.log"
    with open(path, "w") as f:
        print(" 16.00% [4/25 00:13<01:10]", file=f)
        print("\t".join(["epoch", "train_loss", "valid_loss", "accuracy", "time"]), file=f)
        for epoch, loss in enumerate([0.91, 0.72, float("nan")]):
            print("\t".join([str(epoch), f"{loss:.6f}", "nan", "0.958595", f"00:0{epoch + 3}"]), file=f)
    frame, _, _ = _read(path)
    loss = frame.filter(pl.col("tag") == "train_loss")
    assert loss["value"].to_list()[:2] == [0.91, 0.72] and math.isnan(loss["value"][-1])
    assert loss["epoch"].to_list() == [0, 1, 2] and "time" not in frame["tag"].to_list()


def test_rows_of_tab_separated_values_under_a_comma_header_in_a_banner(tmp_path):
    """A loop that prints `*******train_loss,train_acc,valid_loss,valid_ac**********` before each epoch's row of
    values apart by tabs (`print(*values, sep="\\t")`): every row takes the banner's names; a comma list in prose
    names nothing."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print("Loading data, model, tokenizer")
        for e, (tl, ta, vl, va) in enumerate([(5.2009, 2.79, 4.9771, 3.6058), (5.0857, 2.29, 4.9544, 3.6058),
                                              (5.0195, 2.90, 4.9611, 3.6058)], start=1):
            print(f"Epoch: {e:02} | Epoch Time: 0m 57s")
            print("*******train_loss,train_acc,valid_loss,valid_ac********** ")
            print(tl, ta, vl, va, sep="\t")
    path = tmp_path / "train.log"
    path.write_text(out.getvalue())
    frame, _, _ = _read(path)
    assert _series(frame, "train_loss")["value"].to_list() == [5.2009, 5.0857, 5.0195]
    assert _series(frame, "valid_loss")["value"].to_list() == [4.9771, 4.9544, 4.9611]
    assert not frame.filter(pl.col("tag").is_in(["data", "model", "tokenizer"])).height


def test_two_records_stamped_a_millisecond_apart_are_two(tmp_path):
    # one logger writing the same values twice (an evaluation's two batches): the lines differ only in the
    # milliseconds of their stamp, which a node's or rank's prefix never is alone
    path = tmp_path / "train.log"
    path.write_text("2024-05-01 10:00:00,123 - INFO - loss: 2.0 acc: 0.7\n"
                    "2024-05-01 10:00:00,124 - INFO - loss: 2.0 acc: 0.7\n"
                    "2024-05-01 10:00:00,999 - INFO - loss: 1.5 acc: 0.7\n"
                    "2024-05-01 10:00:01,001 - INFO - loss: 1.5 acc: 0.7\n")
    frame, _, _ = _read(path)
    assert _series(frame, "loss")["value"].to_list() == [2.0, 2.0, 1.5, 1.5]
