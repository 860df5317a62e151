"""Console lines composed from the parts people print them with, read whole: counters, metrics in every spelling,
values with units, separators and prefixes, in any combination.

A printer nobody on the team has seen combines parts we have seen in a way we have not (`Epoch 1/50 iter 50/100 loss
1.950 lr 0.001`, `iter 50 loss 1.950 mem 2100MB`): the generator composes such lines, writes a short log of them as a
training script would, reads it, and checks that the training loss is stored with every printed value at the printed
counter, and that each other named metric keeps its own name and value. One part the grammar does not know costs
that part only, never the line."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ingest.console as C
from ingest.console import parse_line, read_console
from ingest.roles import role_of
from tests.runwriters import log_messages

LINES = 14  # records per generated log


# ------------------------------------------------------------------------------------------ the parts

@dataclass(frozen=True)
class Counter:
    """A counter as printed (`{e}`, `{E}`, `{s}`, `{S}`, `{b}`, `{B}` are filled per record) and what it counts."""

    form: str
    counts: tuple[str, ...]  # of "epoch", "step", "batch", in the order they appear


COUNTERS = [
    Counter("Epoch {e}/{E}", ("epoch",)),
    Counter("epoch [{e}/{E}]", ("epoch",)),
    Counter("Epoch: {e}", ("epoch",)),
    Counter("iter {s}/{S}", ("step",)),
    Counter("Iter: {s}", ("step",)),
    Counter("Step {s}", ("step",)),
    Counter("step={s}", ("step",)),
    Counter("step: {s}/{S}", ("step",)),
    Counter("it {s}", ("step",)),
    Counter("global_step {s}", ("step",)),
    Counter("[Iter {s}/{S}]", ("step",)),
    Counter("Iteration: {s}", ("step",)),
    Counter("batch {b}/{B}", ("batch",)),
    Counter("Batch [{b}/{B}]", ("batch",)),
    Counter("({b}/{B})", ("batch",)),
    Counter("[{e}, {b}]", ("epoch", "batch")),
    Counter("[{e}/{E}][{b}/{B}]", ("epoch", "batch")),
]
# Counters that may follow another: an epoch, then a step or batch within it.
EPOCH_FIRST = [c for c in COUNTERS if c.counts == ("epoch",)]
WITHIN = [c for c in COUNTERS if c.counts in (("step",), ("batch",)) and not c.form.startswith("(")] + [
    Counter("({b}/{B})", ("batch",))]

LOSS_NAMES = ["loss", "Loss", "train_loss", "train loss", "total_loss", "LOSS"]


@dataclass(frozen=True)
class Metric:
    """A metric other than the loss: its name, the values it is printed with (as text) and the value each reads as,
    and the words its stored name may add after the printed one (a unit kept in the name)."""

    name: str
    values: tuple[tuple[str, float], ...]
    unit_words: tuple[str, ...] = ()


METRICS = [
    Metric("lr", (("0.001", 0.001), ("1.2e-3", 1.2e-3), ("5.00E-05", 5e-05), ("3e-4", 3e-4))),
    Metric("acc", (("95.2%", 95.2), ("0.912", 0.912), ("87.50 %", 87.5))),
    Metric("mem", (("2100MB", 2100.0), ("12.3GiB", 12.3), ("2100 MB", 2100.0), ("812MiB", 812.0)),
           ("MB", "GiB", "MiB")),
    Metric("memory", (("2100MB", 2100.0), ("12.3GB", 12.3)), ("MB", "GB")),
    Metric("time", (("0.52s", 0.52), ("52ms", 52.0), ("0.5", 0.5), ("1.25 s", 1.25)), ("ms",)),
    Metric("grad_norm", (("1.73", 1.73), ("2.5e+01", 25.0))),
    Metric("tok/s", (("12000", 12000.0), ("1.2e4", 12000.0))),
    Metric("ppl", (("7.03", 7.03),)),
]
# Parts that carry no metric of their own, or one the reader may leave (a duration, a rate named by its unit):
# they must not cost the line.
EXTRAS = ["ETA 0:01:02", "eta: 0:01:02", "12.3 it/s", "2.51s/it", "ETA: 1:02:03", "[00:12<01:40,  2.31it/s]",
          "12s", "30ms/step", "(52.28%)", "done"]

STYLES = {
    "space": "{k} {v}",
    "colon_space": "{k}: {v}",
    "equals": "{k}={v}",
    "colon": "{k}:{v}",
    "pipe": "{k} {v}",  # a row framed in pipes: `| epoch 1 | loss 1.95 | lr 0.001 |`
}
SEPARATORS = [" ", "  ", "\t", ", ", " | ", " - ", " , "]

PREFIXES = [
    "",
    "{date} {time},{ms:03d} - INFO - ",
    "{date} {time},{ms:03d} - trainer - INFO - ",
    "{date} {time} INFO     ",
    "INFO:root:",
    "INFO:__main__:",
    "[rank0]: ",
    "[{date} {time}] ",
    "[{time}] ",
    "{date}T{time}.{ms:03d}Z ",
    "I1129 {time}.{ms:03d}123 4242 train.py:88] ",
    "{date} {time}.{ms:03d} | INFO     | __main__:train_one_epoch:41 - ",  # loguru's default
]


@dataclass(frozen=True)
class Composition:
    prefix: str
    counters: tuple[Counter, ...]
    loss_name: str
    loss_first: bool
    metrics: tuple[tuple[Metric, int], ...]  # (metric, index of its value form)
    extras: tuple[str, ...]
    style: str
    separator: str
    loss_scientific: bool

    def record(self, i: int) -> tuple[str, dict[str, int], float, dict[str, float]]:
        """Line `i` as printed, the counters it prints, its loss, and the other metrics' values by name."""
        e, b = 1 + i // 5, 1 + 10 * (i % 5)
        s = 50 * (i + 1)
        numbers = {"e": e, "E": 50, "s": s, "S": 5000, "b": b, "B": 391}
        printed = {"epoch": e, "step": s, "batch": b}
        loss = round(2.5 - 0.05 * i - 0.001 * (i % 3), 4)
        loss_text = f"{loss:.4e}" if self.loss_scientific else f"{loss:.4f}"
        style = STYLES[self.style]
        pairs = [style.format(k=self.loss_name, v=loss_text)]
        values = {}
        for metric, form in self.metrics:
            text, value = metric.values[form]
            pairs.append(style.format(k=metric.name, v=text))
            values[metric.name] = value
        if not self.loss_first:
            pairs.append(pairs.pop(0))
        parts = [c.form.format(**numbers) for c in self.counters]
        parts += pairs
        parts += list(self.extras)
        line = " | ".join(parts).join(("| ", " |")) if self.style == "pipe" else self.separator.join(parts)
        prefix = self.prefix.format(date="2024-03-26", time=f"10:{i // 60:02d}:{i % 60:02d}", ms=17 * i % 1000)
        counted = {name: printed[name] for c in self.counters for name in c.counts}
        return prefix + line, counted, loss, values


def _compositions(draw_index, draw_bool, draw_subset) -> Composition:
    first = COUNTERS[draw_index(len(COUNTERS))]
    counters = (first,)
    if first.counts == ("epoch",) and draw_bool():
        counters = (first, WITHIN[draw_index(len(WITHIN))])
    metrics = tuple((m, draw_index(len(m.values))) for m in draw_subset(METRICS, 3))
    extras = tuple(draw_subset(EXTRAS, 1))
    return Composition(PREFIXES[draw_index(len(PREFIXES))], counters, LOSS_NAMES[draw_index(len(LOSS_NAMES))],
                       draw_bool(), metrics, extras, list(STYLES)[draw_index(len(STYLES))],
                       SEPARATORS[draw_index(len(SEPARATORS))], draw_bool())


@st.composite
def compositions(draw) -> Composition:
    return _compositions(lambda n: draw(st.integers(0, n - 1)), lambda: draw(st.booleans()),
                         lambda items, most: draw(st.lists(st.sampled_from(items), max_size=most,
                                                           unique_by=lambda m: getattr(m, "name", m))))


def random_compositions(n: int, seed: int = 0) -> list[Composition]:
    """`n` compositions drawn with a seeded generator (for a sweep outside hypothesis)."""
    rng = random.Random(seed)
    return [_compositions(lambda k: rng.randrange(k), lambda: rng.random() < 0.5,
                          lambda items, most: rng.sample(items, rng.randint(0, most))) for _ in range(n)]


# --------------------------------------------------------------------------------------- the checks


def read_composed(comp: Composition, folder: Path) -> tuple[pl.DataFrame, list]:
    """A log of `LINES` records of `comp` written to `folder/train.log` and read; the frame and the records."""
    records = [comp.record(i) for i in range(LINES)]
    log = folder / "train.log"
    log.write_text("".join(line + "\n" for line, *_ in records))
    frames = [c.scalars for c in read_console(log) if c.scalars is not None]
    return (pl.concat(frames) if frames else pl.DataFrame({"tag": []})), records


def problems(comp: Composition, frame: pl.DataFrame, records: list) -> list[str]:
    """What the read got wrong: the loss missing, wrong or at the wrong counter; a metric missing or misnamed."""
    out = []
    loss = frame.filter(pl.col("tag") == comp.loss_name) if frame.height else frame
    if loss.height != LINES:
        return [f"{loss.height} of {LINES} loss points under {comp.loss_name!r}; tags {sorted(set(frame['tag']))}"
                f"; line: {records[0][0]!r}"]
    if role_of(comp.loss_name).role != "train_loss":
        out.append(f"{comp.loss_name!r} is not a training loss")
    for row, (line, counted, value, _) in zip(loss.iter_rows(named=True), records):
        if row["value"] != value:
            out.append(f"loss {row['value']} for {value}: {line!r}")
        for name, n in counted.items():
            got = row["step"] if name == "step" else row[name]
            if name == "batch" and "step" in counted:
                continue  # a step beside a batch: the step is the record's counter
            if got != n:
                out.append(f"{name} {got} for {n}: {line!r}")
                break
    for metric, _ in comp.metrics:
        names = [t for t in set(frame["tag"]) if t == metric.name or t.startswith(metric.name + " ")
                 and t[len(metric.name) + 1:] in metric.unit_words]
        got = frame.filter(pl.col("tag").is_in(names))
        want = [values[metric.name] for *_, values in records]
        if got["value"].to_list() != want:
            out.append(f"{metric.name}: {got.height} points {got['value'].to_list()[:3]} under {names} for "
                       f"{want[:3]}; line: {records[0][0]!r}")
    return out


@settings(deadline=None, max_examples=300, derandomize=True)
@given(compositions())
def test_composed_lines_give_the_loss_and_every_metric_back(tmp_path_factory, comp):
    folder = tmp_path_factory.mktemp("composed")
    frame, records = read_composed(comp, folder)
    assert not problems(comp, frame, records), problems(comp, frame, records)


# ---------------------------------------------------------------------------- the lines found by probing


@pytest.mark.parametrize("line, step, epoch, metrics", [
    ("Epoch 1/50 iter 50/100 loss 1.950 lr 0.001", 50, 1, {"loss": 1.95, "lr": 0.001}),
    ("iter 50 loss 1.950 mem 2100MB time 0.5", 50, None, {"loss": 1.95, "mem MB": 2100, "time": 0.5}),
    ("iter 50 loss 1.950 mem 2100MB", 50, None, {"loss": 1.95, "mem MB": 2100}),
    ("iter 50 loss 1.950 time 0.5", 50, None, {"loss": 1.95, "time": 0.5}),
    ("epoch 1 batch 50 loss=1.9500 memory=2100MiB", None, 1, {"loss": 1.95, "memory MiB": 2100}),
    ("iter 5 loss 2.5 3.0 MB lr 0.1", 5, None, {"loss": 2.5, "lr": 0.1}),  # an unnamed value and its unit: skipped
])
def test_a_line_whose_loss_is_printed_is_read_beside_a_part_it_does_not_know(line, step, epoch, metrics):
    parsed = parse_line(line)
    assert (parsed.step, parsed.epoch) == (step, epoch) and parsed.metrics == metrics


@pytest.mark.parametrize("line, counters, metrics", [
    # PyTorch's MNIST example: `Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}` (the count of samples as the batch)
    ("Train Epoch: 1 [3200/60000 (5%)]\tLoss: 0.521", {"epoch": 1, "batch": 3200}, {"Loss": 0.521}),
    # PyTorch's DCGAN example: `[%d/%d][%d/%d]\tLoss_D: %.4f\tLoss_G: %.4f\tD(x): %.4f ...`
    ("[0/5][50/1583]\tLoss_D: 1.9847\tLoss_G: 5.5914", {"epoch": 0, "batch": 50}, {"Loss_D": 1.9847, "Loss_G": 5.5914}),
    # torchtitan under torchrun: the rank's prefix is no metric, the memory keeps its unit
    ("[rank0]:[titan] 2025-06-16 22:30:50,322 - root - INFO - step: 200  loss:  6.1384  memory: 49.66GiB(52.28%)  "
     "tps: 5,856  mfu: 34.29%", {"step": 200},
     {"loss": 6.1384, "memory GiB": 49.66, "tps": 5856, "mfu": 34.29}),
    ("INFO     [1, 50] loss 0.25", {"epoch": 1, "batch": 50}, {"loss": 0.25}),  # a level before `[epoch, batch]`
    ("step:7 loss:1.5 mem:2100 MB lr:3e-4", {"step": 7}, {"loss": 1.5, "mem MB": 2100, "lr": 3e-4}),
    ("train.py --lr=5e-4 --epochs=3 loss 0.5", {}, {"loss": 0.5}),  # a command line's flags are no metrics
    # prose whose words hold a metric's letters (`normal`, `were`) and a header's `mAP@.5:.95:` name no value
    ("findfont: score(<Font 'DejaVu Serif' (DejaVuSerif-Italic.ttf) italic normal 400 normal>) = 11.05", {}, {}),
    ("England were 262 all out while futures were up 1.5 on the day", {}, {}),
    ("   Class   Images   Labels   P   R   mAP@.5 mAP@.5:.95: 100%|##########| 17/17 [00:23<00:00,  1.39s/it]",
     {"batch": 17}, {}),
    # PL/Python's notices (MADlib): the value in angle brackets
    ("INFO:  Iteration: 3, Loss: <0.805838101786>", {"step": 3}, {"Loss": 0.805838101786}),
    # hasktorch's 0-d tensor as `show` prints it, its value padded
    ("Iteration: 300 | Loss: Tensor Float []  3.4295e-2", {"step": 300}, {"Loss": 3.4295e-2}),
])
def test_real_shapes_give_their_counters_and_metrics(line, counters, metrics):
    parsed = parse_line(line)
    assert {k: getattr(parsed, k) for k in ("step", "epoch", "batch") if getattr(parsed, k) is not None} == counters
    assert parsed.metrics == metrics, parsed.metrics


def test_a_table_keeps_the_units_of_its_values_in_their_tags():
    state = C._State()
    state.note_header("Epoch   gpu_mem   box   loss   mem")
    metrics, counters = state.table_row("  1/299   3.21G   0.0636   0.25   12.3GiB")
    assert counters == {"epoch": 1} and metrics == {"gpu_mem G": 3.21, "box": 0.0636, "loss": 0.25, "mem GiB": 12.3}
    assert role_of("gpu_mem G").role == role_of("mem GiB").role == "memory"


# Formats of Python's logging as scripts configure it: basicConfig's default, and common custom ones.
LOGGING_FORMATS = ["%(levelname)s:%(name)s:%(message)s", "%(asctime)s - %(name)s - %(levelname)s - %(message)s",
                   "[%(asctime)s] %(levelname)s %(message)s", "%(asctime)s %(levelname)-8s %(message)s"]


@settings(deadline=None, max_examples=60, derandomize=True)
@given(compositions(), st.sampled_from(LOGGING_FORMATS))
def test_composed_lines_written_by_python_logging(tmp_path_factory, comp, fmt):
    comp = Composition("", *list(vars(comp).values())[1:])  # the logger writes the prefix
    records = [comp.record(i) for i in range(LINES)]
    log = tmp_path_factory.mktemp("logged") / "train.log"
    log_messages(log, (line for line, *_ in records), fmt)
    frames = [c.scalars for c in read_console(log) if c.scalars is not None]
    frame = pl.concat(frames) if frames else pl.DataFrame({"tag": []})
    assert not problems(comp, frame, records), problems(comp, frame, records)


def test_two_leading_integers_are_the_epoch_and_its_step_and_equal_records_stay_apart(tmp_path):
    # `print('%d %d Loss=%.3f Time=%.3f' % (epoch, cnt, ...))`: a loss stuck at nan, times that repeat
    log = tmp_path / "train.log"
    rows = [(333, i, 0.036 + (i % 3) * 0.002) for i in range(154, 162)] + [(334, i, 0.040) for i in range(1, 4)]
    with log.open("w") as f:
        for epoch, i, t in rows:
            print("%d %d Loss=%.3f Time=%.3f" % (epoch, i, float("nan"), t), file=f)
    frames = [c.scalars for c in read_console(log) if c.scalars is not None]
    loss = pl.concat(frames).filter(pl.col("tag") == "Loss")
    assert loss.height == len(rows) and loss["value"].is_nan().all()  # no record taken for another rank's copy
    assert loss["epoch"].to_list() == [r[0] for r in rows] and loss["batch"].to_list() == [r[1] for r in rows]


@pytest.mark.parametrize("comp", random_compositions(6, seed=11), ids=lambda c: f"{c.counters[0].form}|{c.style}")
def test_composed_logs_land_in_the_store_as_the_training_loss(tmp_path, comp):
    import duckdb

    from ingest.run import ingest_run

    run = tmp_path / "run"
    run.mkdir()
    _, records = read_composed(comp, run)
    db = tmp_path / "r.duckdb"
    ingest_run(run, db, progress=None)
    con = duckdb.connect(str(db), read_only=True)
    try:
        stored = con.execute("SELECT value FROM scalars JOIN series USING (series_id) WHERE series.role = 'train_loss' "
                             "AND series.tag = ? ORDER BY position", [comp.loss_name]).fetchall()
    finally:
        con.close()
    assert [v for (v,) in stored] == [loss for _, _, loss, _ in records]


def test_prose_repeated_in_a_log_gives_no_pairs_where_it_holds_more_than_pairs(tmp_path):
    # an environment dump printed by each of three launches (detectron2's collect_env), beside the records
    log = tmp_path / "train.log"
    prose = "Intel(R) Math Kernel Library Version 2020.0.2 Product Build 20200624 for Intel(R) 64 architecture"
    log.write_text("".join(f"{prose}\n" + "".join(f"iter {i} loss {1 / (i + 1):.4f}\n" for i in range(5))
                           for _ in range(3)))
    frames = [c.scalars for c in read_console(log) if c.scalars is not None]
    assert set(pl.concat(frames)["tag"]) <= {"loss", "launch"}
