"""A log whose line breaks were lost (a web page that joined its lines with blanks): one long line holding many
records, each opening with the line's own opening words and a number, is read as the records it holds, the values and
steps its lines would give; a line that repeats its opening only once, or opens with a number, stays whole."""

from __future__ import annotations

import numpy as np

from forensics.judge.engine import analyze_run
from ingest.console import _flattened_apart
from tests.runwriters import load_run

# A TF-Slim object-detection run's output as a blog page stores it, every record on one line.
# Source: https://cnblogs.com/YouXiangLiThon/p/9505976.html (the post's example log, pasted whole).
TF_SLIM_ONE_LINE = (
    "INFO:tensorflow:global step 272: loss = 0.2479 (0.158 sec/step) INFO:tensorflow:global step 273: loss = 0.3874 "
    "(0.159 sec/step) INFO:tensorflow:global step 274: loss = 0.2599 (0.158 sec/step) INFO:tensorflow:global step "
    "275: loss = 27207767073038008320.0000 (0.155 sec/step) INFO:tensorflow:global step 276: loss = "
    "363770730445224804352.0000 (0.154 sec/step) INFO:tensorflow:global step 277: loss = "
    "2319587573063963639808.0000 (0.157 sec/step) INFO:tensorflow:global step 278: loss = "
    "9538479895582634672128.0000 (0.155 sec/step) INFO:tensorflow:global step 279: loss = "
    "35610680577759077466112.0000 (0.153 sec/step)\n")


def _loss(tmp_path, name, text):
    root = tmp_path / name
    root.mkdir()
    (root / "log.txt").write_text(text)
    run = load_run(root, tmp_path / f"{name}.duckdb")
    return run, *run.arrays("loss")


def test_records_joined_on_one_line_are_read_as_their_lines_would_be(tmp_path):
    run, steps, values = _loss(tmp_path, "one_line", TF_SLIM_ONE_LINE)
    lines = TF_SLIM_ONE_LINE.replace(" INFO:", "\nINFO:")
    _, line_steps, line_values = _loss(tmp_path, "lines", lines)
    assert steps.tolist() == list(range(272, 280))
    assert values[0] == 0.2479 and values[-1] == 35610680577759077466112.0
    assert steps.tolist() == line_steps.tolist() and np.array_equal(values, line_values)


def test_a_loss_joined_on_one_line_that_explodes_is_a_critical_divergence(tmp_path):
    run, _, _ = _loss(tmp_path, "one_line", TF_SLIM_ONE_LINE)
    kinds = {f.kind: f.severity for f in analyze_run(run).findings}
    assert kinds.get("divergence") == "critical"


def test_a_line_that_says_its_opening_twice_or_opens_with_a_number_stays_whole():
    # two mentions of the opening on a long line are one record's words, not records; a row of numbers is a table's;
    # names that share a numbered prefix are one record's fields (what follows the prefix differs)
    twice = (b"Epoch 3: train loss 0.5123, train acc 0.8123, lr 0.001000, time 12.3 s, Epoch 3: train loss 0.6012, "
             b"val acc 0.7712\n")
    row = b" ".join(b"%d 0.%04d" % (k, 5000 - k) for k in range(40)) + b"\n"
    fields = (b"DS1-loss:   13.97142 | DS1-TER: 55.34 | DS1-WER: 78.76 | DS2-loss:   16.55996 | DS2-TER: 60.12 | "
              b"DS2-WER: 80.02\n")
    for line in (twice, row, fields):
        assert _flattened_apart(line) == line


def test_three_records_on_a_line_are_cut_at_the_blank_before_each_same_length():
    line = b" ".join(b"Epoch %d: train loss 0.%d, train acc 0.81, lr 0.001000, time 12.3 s," % (e, 60 - e)
                     for e in (1, 2, 3)) + b"\n"
    cut = _flattened_apart(line)
    assert len(cut) == len(line) and cut.count(b"\r") == 2
    assert cut.split(b"\r")[1].startswith(b"Epoch 2: train loss 0.58")
