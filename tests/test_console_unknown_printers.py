"""Printers the reader has never seen: a line-oriented log whose records carry a loss-like name and a number, in any
common form (`name: v`, `name=v`, `name v`, `name<TAB>v`, `| name | v |`, `name[v]`, `(name v)`), any common number
form (fixed, scientific, `%g`, nan/inf, a tensor's repr), under any counter or none, behind a logger's prefix, with
other metrics beside it and tqdm redraws between records, must yield that series and never be refused; and a log that
prints no loss must say so, naming what it prints instead. Beside the generated printers, real lines of shapes the
reader once refused or misread."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ingest.console import read_console, why_not_console
from ingest.decoding import sample
from ingest.roles import role_of
from tests.runwriters import load_run


def _frame(path: Path) -> pl.DataFrame:
    frames = [c.scalars for c in read_console(path) if c.scalars is not None]
    return pl.concat(frames) if frames else pl.DataFrame({"tag": [], "step": [], "value": []})


def _losses(frame: pl.DataFrame) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for tag, value in frame.select("tag", "value").iter_rows():
        if role_of(tag).role == "train_loss":
            out.setdefault(tag, []).append(value)
    return out


def _same(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or abs(a - b) <= 1e-6 * max(abs(a), abs(b))


# --------------------------------------------------------------------------------------------- real lines

# Python logging's `'%(asctime)s - %(levelname)s - %(message)s'` with each value printed as `f"{name} {value}:"`: a
# colon after the value, nothing after it (the log was refused: no pair was read on any line).
# Source: eunseon02/PointTransformer@3a12a9b981fc49a8a97b33e68cd7e49bc1299475:loss_log.txt (lines 1-9)
VALUE_THEN_COLON = [
    "2024-08-13 02:00:48,743 - INFO - generated new fontManager",
    "2024-08-13 02:15:28,490 - INFO - chamfer_dist 1.6065226793289185:",
    "2024-08-13 02:15:28,490 - INFO - occupancy_loss 0.7006500363349915:",
    "2024-08-13 02:15:31,292 - INFO - chamfer_dist 1.2296479940414429:",
    "2024-08-13 02:15:31,292 - INFO - occupancy_loss 0.6982229351997375:",
    "2024-08-13 02:15:31,469 - INFO - chamfer_dist 0.8352420330047607:",
    "2024-08-13 02:15:31,469 - INFO - occupancy_loss 0.69756019115448:",
    "2024-08-13 02:15:31,648 - INFO - chamfer_dist 0.6422353982925415:",
    "2024-08-13 02:15:31,648 - INFO - occupancy_loss 0.6974087357521057:",
]


def _write(tmp_path: Path, lines: list[str], name: str = "loss_log.txt", end: str = "\n") -> Path:
    path = tmp_path / name
    path.write_text(end.join(lines) + end, encoding="utf-8")
    return path


def test_a_value_that_ends_its_line_with_a_colon_is_read_and_the_log_not_refused(tmp_path):
    path = _write(tmp_path, VALUE_THEN_COLON)
    assert why_not_console(sample(path), path.name) == "read as a console log"
    assert _losses(_frame(path)) == {"occupancy_loss": [0.7006500363349915, 0.6982229351997375, 0.69756019115448,
                                                        0.6974087357521057]}


def test_an_integer_before_a_colon_at_the_end_of_a_line_stays_a_header(tmp_path):
    """`Epoch 3:` heads the records after it: its number is no value of `Epoch`."""
    path = _write(tmp_path, [f"Epoch {e}:\n  loss 0.{9 - e}1" for e in range(5)])
    frame = _frame(path)
    assert _losses(frame) == {"loss": [0.91, 0.81, 0.71, 0.61, 0.51]}
    assert "Epoch" not in frame["tag"].to_list()


def test_a_value_in_brackets_glued_to_its_name_keeps_the_name_whole(tmp_path):
    """`loss[2.2878]` (a one-element list printed after the name) was read as a series `loss2.` of 2878.0."""
    path = _write(tmp_path, [f"step {10 * i} loss[{v}] acc[0.{i}]" for i, v in enumerate(["2.2878", "1.9", "nan"])],
                  name="train.log")
    losses = _losses(_frame(path))
    assert list(losses) == ["loss"] and losses["loss"][:2] == [2.2878, 1.9] and math.isnan(losses["loss"][2])
    assert _frame(path).filter(pl.col("tag") == "acc")["value"].to_list() == [0.0, 0.1, 0.2]


# ------------------------------------------------------------------------------------------ generated printers

NAMES = ["loss", "Loss", "LOSS", "train_loss", "train loss", "Train Loss", "total_loss", "loss_total", "avg_loss",
         "training_loss", "train/loss", "nll", "xent"]
FORMS = {"colon": "{n}: {v}", "equals": "{n}={v}", "space": "{n} {v}", "tab": "{n}\t{v}", "cells": "| {n} | {v} |",
         "brackets": "{n}[{v}]", "parenthesised": "({n} {v})", "spaced_colon": "{n} : {v}", "padded": "{n}  {v}"}
COUNTERS = {"none": "{r}", "step": "step {i} {r}", "epoch": "Epoch {e}/{E} - {r}", "iter_of": "[{i}/{I}] {r}",
            "iteration": "Iteration {i}, {r}", "comma_step": "step: {i}, {r}",
            "ordinal_epoch_cjk": "第{e}轮 {r}", "ordinal_step_cjk": "第 {i} 步, {r}"}
PREFIXES = ["", "2024-01-01 12:00:00,123 - INFO - ", "[INFO] ", "INFO:root:", "[2024-01-01 12:00:00] "]
OTHERS = ["", ", acc: {a}", " lr={lr}", " | acc {a} | lr {lr}", ", grad_norm: {a}"]


def _printed(v: float, style: str) -> str:
    return {"f4": f"{v:.4f}", "f6": f"{v:.6f}", "e": f"{v:.3e}", "E": f"{v:.2E}", "g": f"{v:g}", "r": repr(v),
            "tensor": f"tensor({v:.4f}, device='cuda:0', grad_fn=<NllLossBackward0>)"}[style]


# (inf, nan) as Python and NumPy, JavaScript, and torch print them
NONFINITE = {"python": ("inf", "nan"), "js": ("Infinity", "NaN"), "tensor": ("tensor(inf, device='cuda:0')",
                                                                             "tensor(nan, device='cuda:0')")}


def _as_read(text: str) -> float:
    return float(text.split("(")[1].split(",")[0]) if text.startswith("tensor") else float(text)


@st.composite
def printers(draw):
    n = draw(st.one_of(st.integers(5, 400), st.integers(2000, 5000)))  # thousands of lines too
    start, floor = draw(st.floats(0.5, 20)), draw(st.floats(0.001, 0.4))
    values = [floor + (start - floor) * math.exp(-k / max(n / 4, 1)) for k in range(n)]
    if draw(st.booleans()):
        values[draw(st.integers(n // 2, n - 1))] = draw(st.sampled_from([math.nan, math.inf]))
    return dict(values=values, name=draw(st.sampled_from(NAMES)), form=draw(st.sampled_from(sorted(FORMS))),
                style=draw(st.sampled_from(["f4", "f6", "e", "E", "g", "r", "tensor"])),
                nonfinite=draw(st.sampled_from(["python", "js", "tensor"])),
                counter=draw(st.sampled_from(sorted(COUNTERS))), prefix=draw(st.sampled_from(PREFIXES)),
                other=draw(st.sampled_from(OTHERS)), bars=draw(st.booleans()), end=draw(st.sampled_from(["\n", "\r\n"])))


def _log(p: dict) -> tuple[list[str], list[float]]:
    lines, printed = [], []
    for k, v in enumerate(p["values"]):
        text = _printed(v, p["style"]) if math.isfinite(v) else NONFINITE[p.get("nonfinite", "python")][math.isnan(v)]
        printed.append(_as_read(text) if math.isfinite(v) else v)
        other = " acc | {a} |" if p["form"] == "cells" and p["other"] else p["other"]  # a row of cells throughout
        record = FORMS[p["form"]].format(n=p["name"], v=text) + other.format(a=f"0.{k % 10}1", lr="1e-4")
        counter = "| step | {i} {r}" if p["form"] == "cells" and p["counter"] != "none" else COUNTERS[p["counter"]]
        line = p["prefix"] + counter.format(r=record, i=10 * (k + 1), I=10 * len(p["values"]),
                                                              e=k + 1, E=len(p["values"]))
        if p["bars"]:  # tqdm's redraws of a batch bar, each ended by a carriage return, before the record
            line = "".join(f"{q:3d}%|{'#' * (q // 10):<10}| {q}/100 [00:01<00:00, 90.00it/s]\r" for q in (0, 50, 100)) \
                + line
        lines.append(line)
    return lines, printed


@settings(deadline=None, max_examples=60, derandomize=True)
@given(printers())
@example(dict(values=[2.3 * 0.9 ** k for k in range(40)], name="loss", form="brackets", style="e", counter="step",
              prefix="", other="", bars=False, end="\n"))
@example(dict(values=[2.3 * 0.9 ** k for k in range(40)], name="Loss", form="colon", style="tensor", counter="epoch",
              prefix="[INFO] ", other=", acc: {a}", bars=True, end="\r\n"))
def test_a_loss_printed_by_an_unknown_printer_is_read_whole(tmp_path_factory, p):
    lines, printed = _log(p)
    path = _write(tmp_path_factory.mktemp("log"), lines, name="output.txt", end=p["end"])
    assert why_not_console(sample(path), path.name) == "read as a console log", lines[:3]
    losses = _losses(_frame(path))
    assert len(losses) == 1, (lines[:3], losses.keys())
    [read] = losses.values()
    assert len(read) == len(printed) and all(_same(a, b) for a, b in zip(read, printed)), (lines[:3], read[:5])


def test_a_refused_log_without_a_loss_says_what_it_prints_instead(tmp_path):
    """A log of messages with one accuracy and one lr printed: refused, and the message names what was read."""
    path = _write(tmp_path, ["Loading data"] + [f"Evaluating checkpoint {i}" for i in range(40)]
                  + ["accuracy: 0.5", "lr: 0.1"], name="output.txt")
    why = why_not_console(sample(path), path.name)
    assert why.startswith("not read as a training log") and why.endswith("no loss-like series: it prints accuracy, lr")


# Python logging in a federated trainer: a legend of names, an arrow, then the values in the legend's order; the
# first name is the record's split. Source: a kGCN `run_toxicity.py` log (lines 4-7 of its log.txt).
LEGEND_THEN_VALUES = [
    "2020-12-18 11:15:22,720 - run_toxicity.py - main - L139 ::: val, round, loss, acc, auc ===> 002, 0.88136, "
    "0.54241, 0.55131,",
    "2020-12-18 11:16:03,470 - run_toxicity.py - main - L133 ::: train, round, loss, acc, auc  ===> 003, 0.82290, "
    "0.39816, 0.38508,",
    "2020-12-18 11:16:20,459 - run_toxicity.py - main - L139 ::: val, round, loss, acc, auc ===> 003, 0.77909, "
    "0.48353, 0.50844,",
    "2020-12-18 11:17:02,793 - run_toxicity.py - main - L133 ::: train, round, loss, acc, auc  ===> 004, 0.71339, "
    "0.53043, 0.44991,",
]


def test_values_after_a_legend_and_an_arrow_are_the_legends_names(tmp_path):
    frame = _frame(_write(tmp_path, LEGEND_THEN_VALUES, name="log.txt"))
    assert _losses(frame) == {"loss": [0.8229, 0.71339]}
    held = frame.filter(pl.col("tag").map_elements(lambda t: role_of(t).role == "val_loss", return_dtype=pl.Boolean))
    assert held["value"].to_list() == [0.88136, 0.77909]


def test_a_legend_whose_values_do_not_match_its_names_names_nothing(tmp_path):
    frame = _frame(_write(tmp_path, [f"a, b => {i}, 0.{i}, 0.{i}5" for i in range(1, 6)], name="log.txt"))
    assert not set(frame["tag"].to_list()) & {"a", "b"}


# A C++ DyNet trainer's report every 500 updates: the objective printed as `E` (the error), nothing named a loss.
# Source: a DyNet target-sentiment trainer's log (lines 3-6).
DYNET_E = [
    "[epoch=3 eta=0.00769231 clips=64 updates=500]  E = 0.74376 371.88/500 [completed in 18553.3 ms]",
    "[epoch=3 eta=0.00769231 clips=56 updates=500]  E = 0.70866 354.33/500 [completed in 9147.94 ms]",
    "[epoch=3 eta=0.00769231 clips=51 updates=500]  E = 0.752163 376.082/500 [completed in 9250.65 ms]",
    "[epoch=3 eta=0.00769231 clips=55 updates=500]  E = 0.764009 382.004/500 [completed in 9131.15 ms]",
]


def test_an_error_printed_as_e_alone_in_a_log_naming_no_loss_is_the_training_loss(tmp_path):
    root = tmp_path / "run"
    root.mkdir()
    _write(root, DYNET_E, name="log.txt")
    run = load_run(root, tmp_path / "r.duckdb")
    assert run.arrays("loss")[1].tolist() == [0.74376, 0.70866, 0.752163, 0.764009]


# A FedAvg loop's print, once per round: the server evaluates the aggregated model, trains nothing (cut after the
# number, no closing bracket). Source: a FedAvg project's nohup.out (lines 11-16).
SERVER_STATS = ["Round 0", "server stats: [loss: 1.925", "server stats: [accuracy: 69.735",
                "Round 1", "server stats: [loss: 2.002", "server stats: [accuracy: 46.338",
                "Round 2", "server stats: [loss: 1.969", "server stats: [accuracy: 52.101"]


def test_a_federated_servers_loss_is_held_out_not_the_training_loss(tmp_path):
    frame = _frame(_write(tmp_path, SERVER_STATS, name="nohup.out"))
    assert not _losses(frame)
    held = frame.filter(pl.col("tag").map_elements(lambda t: role_of(t).role == "val_loss", return_dtype=pl.Boolean))
    assert held["value"].to_list() == [1.925, 2.002, 1.969]


# ------------------------------------------------------------------------------------- tables, and their last row

# pointMLP's utils.Logger (tab after every cell, the header's names joined by dashes), pasted into an issue and cut
# inside its last row. Source: a pointMLP issue's log.txt excerpt (first three and last rows).
LOGGER_TABLE_CUT = [
    "Epoch-Num\tLearning-Rate\tTrain-Loss\tTrain-acc-B\tTrain-acc\tValid-Loss\tValid-acc-B\tValid-acc\t",
    "0.000000\t0.009999\t2.770000\t8.452000\t12.631000\t2.568000\t9.543000\t16.759000\t",
    "1.000000\t0.009998\t2.521000\t14.481000\t19.828000\t2.433000\t19.117000\t25.330000\t",
    "15.000000\t0.009844\t1.635000\t65.519000\t70.915000\t1.699000\t62.419000\t67.176000\t",
    "16.000000\t0.009825\t1.619000\t67.284000",
]


def _finished(path: Path) -> Path:
    """`path` as a run that ended an hour ago leaves it (a file still written to may be mid-line)."""
    import os
    import time

    os.utime(path, (time.time() - 3600, time.time() - 3600))
    return path


def test_a_tables_last_row_cut_short_keeps_its_cells(tmp_path):
    frame = _frame(_finished(_write(tmp_path, LOGGER_TABLE_CUT, name="log.txt")))
    assert _losses(frame) == {"Train-Loss": [2.77, 2.521, 1.635, 1.619]}
    assert frame.filter(pl.col("tag") == "Valid-Loss")["value"].to_list() == [2.568, 2.433, 1.699]
    # the cell the cut fell in may be part of a number: not read
    assert frame.filter(pl.col("tag") == "Train-acc-B")["value"].to_list() == [8.452, 14.481, 65.519]


def test_the_cell_a_cut_fell_in_is_not_read(tmp_path):
    # nolearn's epoch table pasted short: the last row stops inside its validation loss (`-5` of `-5.72...`)
    lines = ["  epoch  |  train loss  |  valid loss  |  train/val  |  valid acc  |  dur",
             "---------|--------------|--------------|-------------|-------------|------",
             "     12  |   -5.605903  |   -5.640381  |     0.993887  |     52.17%  |  0.6s",
             "     13  |   -5.692804  |   -5.725166  |     0.994347  |     52.17%  |  0.6s",
             "     14  |   -5.775415  |   -5"]
    frame = _frame(_finished(_write(tmp_path, lines, name="log.txt")))
    assert _losses(frame) == {"train loss": [-5.605903, -5.692804, -5.775415]}
    assert frame.filter(pl.col("tag") == "valid loss")["value"].to_list() == [-5.640381, -5.725166]


def test_a_short_row_before_the_last_line_is_no_row_of_the_table(tmp_path):
    # only a finished file's last line is a row cut off; a short row of numbers amid the table is something else
    lines = LOGGER_TABLE_CUT[:2] + ["3\t4"] + LOGGER_TABLE_CUT[2:4]
    assert _losses(_frame(_finished(_write(tmp_path, lines, name="log.txt")))) == {"Train-Loss": [2.77, 2.521, 1.635]}


# A summary table typed into a pull-request comment: a name with a qualifier in parentheses, best values in
# Markdown bold, notes after some rows. Source: a PR thread's quoted table (the `> ` quoting removed).
HAND_TABLE = [
    "Epoch\ttrain/loss (avg)\tval/loss\t",
    "0\t0.1554\t0.1907\t",
    "1\t0.1108\t0.2017\tval jumps UP",
    "2\t0.0957\t0.1921\t",
    "4\t0.0798\t**0.1843**\t**best val**",
    "5\t**0.0735**\t0.1864\tval rises again",
]


def test_a_table_typed_by_hand_with_bold_cells_and_notes_is_read_whole(tmp_path):
    frame = _frame(_write(tmp_path, HAND_TABLE, name="log.txt"))
    assert _losses(frame) == {"train/loss (avg)": [0.1554, 0.1108, 0.0957, 0.0798, 0.0735]}
    assert frame.filter(pl.col("tag") == "val/loss")["value"].to_list() == [0.1907, 0.2017, 0.1921, 0.1843, 0.1864]


TABLE_NAMES = ["loss", "Train Loss", "train_loss", "Train-Loss", "train/loss (avg)", "Loss (mean)", "loss_total"]
TABLE_SEPARATORS = {"tab": "\t", "spaces": "   ", "pipes": " | "}


@st.composite
def tables(draw):
    n = draw(st.integers(4, 300))
    start, floor = draw(st.floats(0.5, 20)), draw(st.floats(0.001, 0.4))
    return dict(values=[floor + (start - floor) * math.exp(-k / max(n / 4, 1)) for k in range(n)],
                name=draw(st.sampled_from(TABLE_NAMES)), sep=draw(st.sampled_from(sorted(TABLE_SEPARATORS))),
                style=draw(st.sampled_from(["f4", "f6", "e", "g"])), trailing=draw(st.booleans()),
                bold=draw(st.booleans()), note=draw(st.booleans()), cut=draw(st.booleans()))


@settings(deadline=None, max_examples=40, derandomize=True)
@given(tables())
@example(dict(values=[2.3 * 0.9 ** k for k in range(12)], name="train/loss (avg)", sep="tab", style="f4",
              trailing=True, bold=True, note=True, cut=True))
def test_a_loss_column_of_a_table_by_an_unknown_printer_is_read_whole(tmp_path_factory, p):
    """A header naming the loss among other columns, rows apart by tabs, spaces or pipes, with a separator after the
    last cell or not, a cell set in bold, a note after a row, the last row cut after its loss cell: every loss is
    read under the column's name."""
    sep = TABLE_SEPARATORS[p["sep"]]
    end = sep.rstrip(" ") if p["trailing"] and p["sep"] != "spaces" else ""
    lines = [sep.join(["Epoch", "lr", p["name"], "acc", "val loss"]) + end]
    printed = []
    for k, v in enumerate(p["values"]):
        cell = _printed(v, p["style"])
        printed.append(float(cell))
        if p["bold"] and k == len(p["values"]) // 2:
            cell = f"**{cell}**"
        row = [str(k), "0.0001", cell, f"0.{k % 10}1", f"{v * 1.1:.4f}"]
        if p["cut"] and k == len(p["values"]) - 1:
            row = row[:3] + [row[3][:2]]  # cut inside the cell after the loss
        note = f"{sep}best so far" if p["note"] and k == 1 else ""
        lines.append(sep.join(row) + (end if len(row) == 5 else "") + note)
    path = _finished(_write(tmp_path_factory.mktemp("table"), lines, name="log.txt"))
    losses = _losses(_frame(path))
    assert list(losses) == [p["name"]], (lines[:3], losses.keys())
    assert len(losses[p["name"]]) == len(printed) and all(_same(a, b) for a, b in zip(losses[p["name"]], printed)), \
        lines[:3]


def test_a_log_read_whole_without_a_loss_says_what_it_prints(tmp_path):
    # a knowledge-base completion log's ranking scores and a log of messages: taken as logs by their names, they give
    # no training loss, and the reader says what each printed instead, naming the file
    scores = _write(tmp_path, [f"epoch {e} | MRR {0.2 + e / 100:.4f} | Hits@10 {0.4 + e / 100:.4f}" for e in range(10)],
                    name="train.log")
    [issue] = [i for c in read_console(scores) for i in c.issues if i.kind == "no_loss_named"]
    assert issue.detail.startswith("train.log names no training loss: it prints ") and "MRR" in issue.detail
    prose = _write(tmp_path, [f"Processing shard {i} of 20" for i in range(20)], name="log.txt")
    [issue] = [i for c in read_console(prose) for i in c.issues if i.kind == "no_loss_named"]
    assert "none of its 20 lines" in issue.detail and issue.detail.startswith("log.txt")
    loss = _write(tmp_path, [f"step {i} loss {1 / (i + 1):.4f}" for i in range(20)], name="run.log")
    assert not [i for c in read_console(loss) for i in c.issues if i.kind == "no_loss_named"]
