"""Logs whose values carry no name, saved under a name that says nothing of them either (`output.txt`, `train.log`):
one float per line, unnamed columns, printed tensors, a value before a progress bar, a logger's fields after a
counter. Each value is stored as `<file>[<column>]`; in a run where nothing is named as a loss, the one a user would
read as the loss is taken as the training loss, and an issue says which. The fixtures are real logs' lines (their
sources in the comments); the twins that must stay unread are written by the real tools (pip, numpy)."""

from __future__ import annotations

import math
import subprocess
import sys

import duckdb
import numpy as np
import pytest

from forensics.judge.detectors import NanLoss
from ingest.console import sniff_console
from tests.pasted import POINTNETLK_EPOCHS
from tests.runwriters import load_run, log_messages, sgd_losses

# `print(loss, accuracy)` of a NIN on CIFAR-10 stuck at chance (ln 10 = 2.302585): loss, then minibatch accuracy.
# Source: https://github.com/purine/purine2/issues/16
PURINE_PAIRS = """\
2.411124 0.132812
2.542028 0.132812
2.302772 0.125000
2.312779 0.109375
2.310245 0.117188
2.302449 0.101562
2.306294 0.085938
2.301918 0.148438
2.302899 0.031250
2.302605 0.132812
2.302575 0.132812
2.302580 0.109375
2.302587 0.093750
2.302583 0.117188
2.302583 0.054688
2.302583 0.093750
2.302583 0.070312
2.302583 0.109375
2.302583 0.078125
2.302583 0.125000
2.302583 0.109375
2.302583 0.062500
2.302583 0.109375
2.302583 0.093750
2.302583 0.125000
2.302583 0.109375
2.302583 0.070312
2.302583 0.093750
"""

# `print(loss.detach().float())` of a LoRA fine-tune, the same batch ten times: NaN from the second step.
# Source: https://github.com/lich99/ChatGLM-finetune-LoRA/issues/32
CHATGLM_TENSORS = """\
tensor(3.2207, device='cuda:0')
tensor(nan, device='cuda:0')
tensor(nan, device='cuda:0')
tensor(nan, device='cuda:0')
tensor(nan, device='cuda:0')
tensor(nan, device='cuda:0')
tensor(nan, device='cuda:0')
tensor(nan, device='cuda:0')
tensor(nan, device='cuda:0')
tensor(nan, device='cuda:0')
"""

# Torch7's xlua progress bar with the minibatch loss printed before it (the last line cut where the paste ended).
# Source: https://github.com/gcr/torch-residual-networks/issues/10
XLUA_BAR = "\n".join([
    '12.243277549744 ',
    '314.09014892578.............................................. 128/50000 ................]'
    ' ETA: 0ms | Step: 0ms          ',
    '684.17578125................................................... 256/50000 ..............]'
    ' ETA: 1m26s | Step: 1ms        ',
    '1731.8382568359................................................ 384/50000 ..............]'
    ' ETA: 1m40s | Step: 2ms        ',
    '1436.0552978516................................................ 512/50000 ..............]'
    ' ETA: 1m42s | Step: 2ms        ',
    '1810.4338378906................................................ 640/50000 ..............]'
    ' ETA: 1m44s | Step: 2ms        ',
    '2016.3845214844................................................ 768/50000 ..............]'
    ' ETA: 1m42s | Step: 2ms        ',
    '1415.6356201172................................................ 896/50000 ..............]'
    ' ETA: 1m43s | Step: 2ms        ',
    '980.73388671875................................................ 1024/50000 .............]'
    ' ETA: 1m45s | Step: 2ms        ',
    '404.52484130859................................',
    '',
])

# The first 16 lines: epochs 40-52 and 89-91.
POINTNETLK_FIELDS = "".join(POINTNETLK_EPOCHS.splitlines(keepends=True)[:16])

# A Whisper fine-tune's `print(loss.item())` under `Epoch k` lines, ending `Done!` (lines 1-25, 257-266, 765-769).
# Source: bob80333/comp5300_final_project@82b78ffeec2f7df7b9394fcd2fffed196853c9e5:logs/train_log.txt
WHISPER_FLOATS = """\
Epoch 0
11.647171020507812
9.664155960083008
9.157904624938965
8.578604698181152
8.630502700805664
8.637770652770996
7.5847392082214355
7.705773830413818
7.374486446380615
7.548015594482422
7.449544429779053
7.512004375457764
7.161774158477783
6.931373596191406
7.164464950561523
7.048131465911865
6.798522472381592
6.995151519775391
6.7779388427734375
7.161849021911621
6.914164066314697
6.726862907409668
6.892773628234863
6.889658451080322
Epoch 1
4.0343098640441895
3.8839786052703857
3.719430923461914
3.8331868648529053
4.267645359039307
4.407917022705078
4.1777167320251465
3.669753313064575
4.2653889656066895
3.5947418212890625
3.864373207092285
3.9394240379333496
3.733337879180908
Done!
"""

# Torch7's optim.Logger: a header line naming its one column (an accuracy), then a value per epoch, tab-ended.
# Source: Mireu-Lab/lua_vs_python_DL@04e73a96e458ab9d6c07227f83fe5bd2f0751cbe:logs/train.log
OPTIM_LOGGER = "".join(f"{line}\t\n" for line in [
    "% mean class accuracy (train set)", " 7.5300e+01", " 9.3450e+01", " 9.6850e+01", " 9.7950e+01", " 9.8850e+01",
    " 9.9700e+01", " 9.9900e+01", " 1.0000e+02", " 1.0000e+02", " 1.0000e+02", " 1.0000e+02"])

# agent57's (keras-rl) DisTrainLogger: each process's `Train K` counter, then its episode rewards; no loss printed.
# Source: https://github.com/pocokhc/agent57/issues/8
AGENT_REWARDS = """\
actor0   Train 8000, Time: 3.49m, Reward    :  154.57 -  199.93 (ave:  180.55), nb_steps: 29200
actor1   Train 8059, Time: 3.51m, Reward    :  147.16 -  188.48 (ave:  172.04), nb_steps: 29800
weight save, ave reward:186.7012
learner  Train 9000, Time: 3.74m, TestReward:  177.70 -  199.75 (ave:  186.70)
actor1   Train 9000, Time: 3.89m, Reward    :  168.06 -  188.86 (ave:  184.96), nb_steps: 33000
actor0   Train 9058, Time: 3.90m, Reward    :  169.45 -  199.82 (ave:  186.78), nb_steps: 32600
learner  Train 10000, Time: 4.14m, TestReward:  160.58 -  188.92 (ave:  176.36)
actor0   Train 10039, Time: 4.31m, Reward    :  156.93 -  199.19 (ave:  178.46), nb_steps: 36000
actor1   Train 10050, Time: 4.31m, Reward    :  153.15 -  199.38 (ave:  179.51), nb_steps: 36600
learner  Train 11000, Time: 4.55m, TestReward:  153.46 -  188.85 (ave:  173.87)
actor1   Train 11048, Time: 4.72m, Reward    :  152.95 -  199.83 (ave:  181.00), nb_steps: 40000
actor0   Train 11060, Time: 4.72m, Reward    :  157.20 -  199.82 (ave:  183.92), nb_steps: 39400
"""


def _run(tmp_path, files: dict[str, str], name: str = "run"):
    root = tmp_path / name
    root.mkdir()
    for file, text in files.items():
        (root / file).write_text(text, encoding="utf-8")
    db = tmp_path / f"{name}.duckdb"
    return load_run(root, db), db


def _guesses(db) -> list[str]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [d for (d,) in con.execute("SELECT detail FROM ingest_issues WHERE kind = 'loss_by_elimination'")
                .fetchall()]
    finally:
        con.close()


def _stored(db, tag: str) -> list[tuple[int | None, float]]:
    """(epoch, value) of a series' points in the order of the file."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT k.epoch, c.value FROM scalars c JOIN series s USING (series_id) "
                           "LEFT JOIN point_counters k USING (series_id, source_id, position) WHERE s.tag = ? "
                           "ORDER BY c.position", [tag]).fetchall()
    finally:
        con.close()


def test_unnamed_pairs_are_read_and_the_first_is_taken_as_the_loss_and_said(tmp_path):
    """Loss then accuracy, no names: the accuracy (within [0, 1]) stays `output.txt[2]`; the loss, pinned at chance,
    is the training loss, and the issue names the file and the column taken."""
    run, db = _run(tmp_path, {"output.txt": PURINE_PAIRS})
    assert run.all_of("train_loss") == ["output.txt[1]"]
    steps, values = run.arrays("train_loss")
    assert values.size == 28 and values[0] == pytest.approx(2.411124) and values[-1] == pytest.approx(2.302583)
    assert run.arrays("output.txt[2]")[1][0] == pytest.approx(0.132812)
    [said] = _guesses(db)
    assert "output.txt" in said and "first of its 2 values" in said and "`output.txt[1]`" in said


def test_printed_tensors_are_values_and_their_nan_is_the_diagnosis(tmp_path):
    run, _ = _run(tmp_path, {"output.txt": CHATGLM_TENSORS})
    steps, values = run.arrays("train_loss")
    assert values.size == 10 and values[0] == pytest.approx(3.2207) and np.isnan(values[1:]).all()
    [f] = NanLoss().check(run)
    assert f.severity == "critical" and f.step == steps[1]


def test_a_value_before_a_progress_bar_is_the_lines_value(tmp_path):
    run, _ = _run(tmp_path, {"train.log": XLUA_BAR})
    values = run.arrays("train_loss")[1]
    assert values.size == 10 and values[0] == pytest.approx(12.243277549744)
    assert values[1] == pytest.approx(314.09014892578) and values[-1] == pytest.approx(404.52484130859)


def test_fields_after_a_logger_prefix_and_a_counter_are_columns_at_that_epoch(tmp_path):
    """The counter names the epoch; the first field is the loss (the others, within [0, 1], are not taken)."""
    run, db = _run(tmp_path, {"train.log": POINTNETLK_FIELDS})
    assert run.all_of("train_loss") == ["train.log[1]"]
    epochs, values = zip(*_stored(db, "train.log[1]"))
    assert epochs[:2] == (40, 41) and len(values) == 16 and values[12] == pytest.approx(17.802472)
    assert run.has("train.log[4]")


def test_one_float_per_line_under_epoch_lines_is_every_value_with_its_epoch(tmp_path):
    """Every value is read (not only the one under each `Epoch k` line), each under its epoch; `Done!` is no value."""
    run, db = _run(tmp_path, {"train_log.txt": WHISPER_FLOATS})
    assert run.all_of("train_loss") == ["train_log.txt[1]"]
    epochs, values = zip(*_stored(db, "train_log.txt[1]"))
    assert len(values) == 24 + 9 + 4 and values[0] == pytest.approx(11.647171020507812)
    assert epochs == (0,) * 24 + (1,) * 13  # (the fixture skips the `Epoch 2` line)


def test_no_unnamed_value_is_taken_where_a_loss_is_named_or_two_files_could_be_it(tmp_path):
    named = tmp_path / "named.log"
    log_messages(named, [f"step {i} loss: {v:.5f}" for i, v in enumerate(sgd_losses(12))])
    run, db = _run(tmp_path, {"output.txt": PURINE_PAIRS, "train.log": named.read_text()}, "named")
    assert run.all_of("train_loss") == ["loss"] and run.has("output.txt[1]") and not _guesses(db)
    run, db = _run(tmp_path, {"output.txt": PURINE_PAIRS, "log.txt": CHATGLM_TENSORS}, "two")
    assert run.all_of("train_loss") == [] and run.has("log.txt[1]") and not _guesses(db)


def test_values_under_a_header_that_names_them_are_no_unnamed_values(tmp_path):
    """A header names the column (an accuracy): no `<file>[1]`, and no loss is guessed."""
    run, db = _run(tmp_path, {"train.log": OPTIM_LOGGER})
    assert not run.has("train.log[1]") and run.all_of("train_loss") == [] and not _guesses(db)


def test_text_that_is_no_log_stays_refused(tmp_path):
    """A requirements list (pip freeze), a table under its header and whole numbers (numpy.savetxt) are no file of
    unnamed values."""
    frozen = subprocess.run([sys.executable, "-m", "pip", "freeze"], capture_output=True, check=False).stdout
    assert not sniff_console(frozen, "packages.txt")
    rng = np.random.default_rng(0)
    table = tmp_path / "results.txt"
    np.savetxt(table, np.c_[np.arange(20.0) / 7, rng.random(20), rng.random(20)], header="loss acc f1", fmt="%.4f")
    assert not sniff_console(table.read_bytes(), table.name)
    ids = tmp_path / "ids.txt"
    np.savetxt(ids, rng.integers(0, 1000, (20, 2)), fmt="%d")
    assert not sniff_console(ids.read_bytes(), ids.name)


def test_a_split_named_alone_over_whole_numbers_that_never_fall_counts_and_is_no_loss(tmp_path):
    """`learner  Train 9000, Time: 3.74m, TestReward: ...`: `Train` alone names the split's loss by its name, but its
    values count the learner's and actors' steps: no training loss is read, and none is guessed."""
    run, db = _run(tmp_path, {"log.txt": AGENT_REWARDS})
    assert run.all_of("train_loss") == [] and run.has("Train") and not _guesses(db)


def _tutorial_clock(seconds: float) -> str:
    """The PyTorch NLP tutorials' `asMinutes`: `'%dm %ds' % (m, s)`."""
    m = math.floor(seconds / 60)
    return "%dm %ds" % (m, seconds - m * 60)


@pytest.mark.parametrize("shape", ["generation", "translation", "classification"])
def test_the_pytorch_tutorials_average_loss_print_is_the_loss_on_its_iteration(tmp_path, shape):
    """The three NLP-from-scratch tutorials print their average loss with no name, after the time since the start
    (the translation tutorial adds the time left) and the iteration with its share of the run, or (classification)
    the iteration first and the sample it guessed after the value. Their own format strings write the log."""
    losses = sgd_losses(20, seed=3)
    lines = []
    for k, loss in enumerate(losses, 1):
        it, percent, spent = k * 5000, k * 5, k * 13.7
        if shape == "generation":
            lines.append("%s (%d %d%%) %.4f" % (_tutorial_clock(spent), it, percent, loss))
        elif shape == "translation":
            since = "%s (- %s)" % (_tutorial_clock(spent), _tutorial_clock(spent / (percent / 100) - spent))
            lines.append("%s (%d %d%%) %.4f" % (since, k, percent, loss))
        else:
            mark = "✓" if k % 3 else "✗ (Czech)"
            lines.append("%d %d%% (%s) %.4f %s / %s %s" % (it, percent, _tutorial_clock(spent), loss, "Abreu",
                                                              "Portuguese", mark))
    root = tmp_path / "run"
    root.mkdir()
    (root / "train.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = load_run(root, tmp_path / "f.duckdb")
    steps, values = run.arrays("loss")
    every = 1 if shape == "translation" else 5000
    assert steps.tolist() == [k * every for k in range(1, 21)]
    assert values.tolist() == [float("%.4f" % v) for v in losses]
