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


# A Caffe FCN run's output as a blog page stores it: one iteration's three glog lines joined on a line, whose net's
# loss layer is called `loss` (the raw loss under the smoothed one). Source: https://zoyathinksdeeper.blogspot.com
CAFFE_ONE_LINE = (
    'I0621 16:14:39.496878 20752 solver.cpp:228] Iteration 0, loss = 163741 I0621 16:14:39.496912 20752 solver.cpp:'
    '244] Train net output #0: loss = 161660 (* 1 = 161660 loss) I0621 16:14:39.496918 20752 sgd_solver.cpp:106] It'
    'eration 0, lr = 0.001 I0621 16:15:25.024097 20752 solver.cpp:228] Iteration 20, loss = 4.84049e+09 I0621 16:15'
    ':25.024127 20752 solver.cpp:244] Train net output #0: loss = 3.70536e+09 (* 1 = 3.70536e+09 loss) I0621 16:15:'
    '25.024132 20752 sgd_solver.cpp:106] Iteration 20, lr = 0.001 I0621 16:16:12.229852 20752 solver.cpp:228] Itera'
    'tion 40, loss = 2.78827e+09 I0621 16:16:12.229883 20752 solver.cpp:244] Train net output #0: loss = 1.38314e+0'
    '9 (* 1 = 1.38314e+09 loss)'
)


def test_a_caffe_net_output_named_as_the_iteration_loss_is_that_iterations_detail(tmp_path):
    """Each `Train net output #0: loss = ..` is read at its `Iteration N` line's step, beside the smoothed loss,
    never on line numbers: the steps quoted are the file's iterations."""
    run, steps, values = _loss(tmp_path, "caffe", CAFFE_ONE_LINE + "\n")
    assert steps.tolist() == [0, 20, 40]  # one value a step in the run's view: the net's output, printed last
    assert values.tolist() == [161660.0, 3.70536e09, 1.38314e09]
    found = [f for f in analyze_run(run).findings if f.kind == "divergence"]
    assert found and "at step 20" in found[0].summary and "at step 0" in found[0].summary


# Keras fit(verbose=2) output as a Q&A page stores it: its last epochs joined on one line, the excerpt opening in the
# middle of epoch 26's record. Source: https://morioh.com/p/8d60ad591574
KERAS_MID_RECORD = (
    '- 67s - loss: 0.0767 - acc: 0.9750 - val_loss: 0.6755 - val_acc: 0.8412 Epoch 27/30 - 67s - loss: 0.1039 - acc'
    ': 0.9630 - val_loss: 0.3671 - val_acc: 0.9018 Epoch 28/30 - 67s - loss: 0.0639 - acc: 0.9775 - val_loss: 1.192'
    '1e-07 - val_acc: 0.1190 Epoch 29/30 - 66s - loss: 0.0767 - acc: 0.9744 - val_loss: 0.8091 - val_acc: 0.8306 Ep'
    'och 30/30 - 66s - loss: 0.0534 - acc: 0.9815 - val_loss: 0.2091 - val_acc: 0.9433 Using TensorFlow backend.'
)


def test_a_joined_log_that_opens_mid_record_is_cut_at_its_counter_word(tmp_path):
    """The line opens with no words (`- 67s - loss: ..`): each `Epoch N/30` after a blank begins a record, so epochs
    27-30 give their own training and validation losses (epoch 26's partial record keeps no epoch of its own)."""
    run, steps, values = _loss(tmp_path, "keras", KERAS_MID_RECORD + "\n")
    assert values.tolist()[-4:] == [0.1039, 0.0639, 0.0767, 0.0534]
    val = run.arrays("val_loss")[1].tolist()
    assert val[-4:] == [0.3671, 1.1921e-07, 0.8091, 0.2091]
