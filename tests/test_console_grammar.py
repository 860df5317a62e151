"""Console logs read from the grammar of printed metrics: tokens, reprs, tables under a header, bare values,
groups, messages without a loss; recognition by lines sampled across a file; what a refused text file is told.

Real logs from ../shared/wild/console (module-level paths), files the real tools write (Python's logging, tqdm),
and hypothesis lines generated from the grammar whose values must come back exact."""

import csv
import math
import os
import time
from pathlib import Path, PurePosixPath

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ingest.console as C
from ingest.console import parse_line, read_console, sniff_console
from ingest.formats import format_for, sample
from ingest.roles import role_of
from ingest.run import ingest_run

from tests.paths import SHARED
from tests.runwriters import log_messages

WILD = SHARED / "wild" / "console"
# One real log per class, each from a different printer.
HEADER_TABLE_TSV = WILD / "c029_tsvtable" / "train_log.txt"  # tab table, one header row, trailing tabs
HEADER_TABLE_REPRINTED = WILD / "c021_jde" / "log_train.txt"  # header re-printed per epoch, a stamp before it
TABLE_ROW_WITH_BAR = WILD / "c063_yolov5" / "yolov5" / "runs" / "terminal_output_300_epochs.md"
BARE_VALUES = WILD / "c069_bare" / "loss.txt"  # one float a line, the name only in the file's name
LIST_REPR = WILD / "c071_listrepr" / "loss.txt"  # one list on one line, no line break at all
TENSOR_REPR = WILD / "c073_tensorrepr" / "loss.txt"  # `idx: 0loss: tensor(8.4650, grad_fn=<NegBackward>)`
LOSS_GROUP = WILD / "c018_yolov3pt" / "log_train.txt"  # `[Losses: x .., total X, recall: ..]`
LONG_PREAMBLE = WILD / "c089_llamafactory" / "running_log.txt"  # transformers' config dump before any record
BOX_TABLE = WILD / "c062_sb3" / "frozenlake_code" / "4x4_ppo_on.txt"  # `|    loss    | -0.016   |`
SENTENCE = WILD / "c001_dl4j" / "train.log"  # `Score at iteration N is X`, an unusual stamp
APPENDED_NANS = WILD / "c033_plainprint" / "loss_log.txt"  # the same `Loss: nan` record on every step
NO_LOSS_CONFIG_DUMP = WILD / "c024_detectron2" / "output" / "log.txt"  # a config dump's LOSS_WEIGHT: 1.0 only
NO_LOSS_BEST_VALUES = WILD / "c087_tqdm" / "nohup.log"  # validation only, with a running `min_loss`
REAL3 = SHARED / "real_runs_3"
PADDED_NAN = REAL3 / "s40_log" / "model_RNN_RELU_epochs_5.md"  # `| loss   nan | ppl      nan`, a format's width
MEMORY_LABEL = REAL3 / "s34_log" / "console.log"  # `Memory info of GPU /physical_device:GPU:0: current: 0.18, ...`
BAR_PER_EPOCH = REAL3 / "s31_log" / "console.log"  # one finished bar an epoch, `Step: 100%|...| 1827/1827`
EPOCH_FALLS_BACK = REAL3 / "s26_log" / "train_log.txt"  # `epoch N` / `loss: X` / `test accuracy: Y%`, resumed at 71


def _frame(path: Path) -> pl.DataFrame:
    frames = [c.scalars for c in read_console(path) if c.scalars is not None]
    return pl.concat(frames) if frames else pl.DataFrame({"tag": [], "value": []})


def _losses(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.filter(pl.col("tag").map_elements(lambda t: role_of(t).role == "train_loss",
                                                   return_dtype=pl.Boolean))


# ------------------------------------------------------------------------------------------ the real logs


@pytest.mark.needs_shared
def test_tab_table_columns_are_named_by_its_header():
    frame = _frame(HEADER_TABLE_TSV)
    total = frame.filter(pl.col("tag") == "total loss")
    assert total.height == 600 and total["value"][0] == 46.604204 and total["value"][-1] == 17.122059
    assert set(frame["tag"]) == {"total loss", "score loss", "border loss", "direc loss", "ctc loss"}


@pytest.mark.needs_shared
def test_reprinted_header_names_the_rows_and_its_counter_columns_are_counters():
    frame = _frame(HEADER_TABLE_REPRINTED)
    total = frame.filter(pl.col("tag") == "total loss")  # `total` among loss components: the loss they sum to
    assert total["value"][0] == 158 and total["value"][-1] == -13.9 and total.height == 150
    assert total["epoch"][-1] == 29 and total["batch"][-1] == 160
    assert "Epoch" not in set(frame["tag"]) and "Batch" not in set(frame["tag"])


@pytest.mark.needs_shared
def test_a_table_row_followed_by_its_progress_bar():
    box = _frame(TABLE_ROW_WITH_BAR).filter(pl.col("tag") == "box")
    assert box["value"][0] == 0.06359 and box["value"][-1] == 0.01268 and box["epoch"][0] == 0
    assert role_of("box").role == "train_loss"


@pytest.mark.needs_shared
def test_bare_values_take_the_name_of_their_file():
    frame = _frame(BARE_VALUES)
    assert set(frame["tag"]) == {"loss"} and frame.height == 20923
    assert frame["value"][0] == 21.28346061706543 and frame["value"][-1] == 7.077110290527344


@pytest.mark.needs_shared
def test_a_list_on_one_unended_line_is_a_series_by_position():
    frame = _frame(LIST_REPR)  # the file is long finished: its one line, never ended, is read
    assert frame["value"].to_list()[:2] == [0.33006555, 0.13408972] and frame["step"].to_list() == list(range(10))


@pytest.mark.needs_shared
def test_tensor_reprs_and_a_counter_glued_to_the_name():
    frame = _frame(TENSOR_REPR)
    loss = frame.filter(pl.col("tag") == "loss")
    assert loss.height == 5000 and loss["value"][0] == 8.465 and loss["value"][-1] == 45.8649
    assert "idx" not in set(frame["tag"])


@pytest.mark.needs_shared
def test_values_under_a_losses_label_are_its_parts():
    frame = _frame(LOSS_GROUP)
    total = frame.filter(pl.col("tag") == "Losses total")
    assert total["value"][0] == 15.143305 and total["value"][-1] == 8.151598
    assert role_of("Losses total").role == "train_loss" and "recall" in set(frame["tag"])


@pytest.mark.needs_shared
def test_box_table_rows_and_sentences_with_counters():
    box = _frame(BOX_TABLE).filter(pl.col("tag") == "loss")
    assert box["value"][0] == -0.016 and box.height == 244
    # DL4J's `Score at iteration N is X`: its score is its loss; the evaluation's `F1 Score` stays a metric
    frame = _frame(SENTENCE)
    score = _losses(frame)
    assert set(score["tag"]) == {"loss"} and role_of("loss").canonical
    assert score["step"][0] == 0 and score["value"][0] == 1.6235184989295723 and score.height == 788
    assert "Score" not in set(frame["tag"]) and role_of("Score").role == "other"


@pytest.mark.needs_shared
def test_one_record_printed_on_every_step_is_not_a_copy():
    loss = _frame(APPENDED_NANS).filter(pl.col("tag") == "Loss")
    assert loss.height == 1425 and math.isnan(loss["value"][0]) and loss["value"][-1] == 0.1401


@pytest.mark.parametrize("path", [NO_LOSS_CONFIG_DUMP, NO_LOSS_BEST_VALUES], ids=["config_dump", "best_values"])
@pytest.mark.needs_shared
def test_no_loss_is_invented_from_settings_or_running_extremes(path):
    assert _losses(_frame(path)).height == 0


@pytest.mark.needs_shared
def test_a_log_after_a_long_preamble_is_recognised_by_its_sampled_lines():
    head = LONG_PREAMBLE.read_bytes()[:4096]
    assert not sniff_console(head, LONG_PREAMBLE.name)  # its first kilobytes are the config dump
    assert sniff_console(sample(LONG_PREAMBLE), LONG_PREAMBLE.name)
    fmt = format_for(PurePosixPath(LONG_PREAMBLE.name), lambda: sample(LONG_PREAMBLE))
    assert fmt is not None and fmt.name == "console"


# ------------------------------------------------------------------------- files the real tools write


def _logging_file(path: Path, messages: list[str], fmt: str, encoding: str | None = None) -> None:
    """`messages` written by Python's logging to `path` with `fmt`, in `encoding` (the handler's default if None)."""
    log_messages(path, messages, fmt, encoding)


def test_python_logging_with_name_colon_value_and_a_dumped_config_first(tmp_path):
    log = tmp_path / "run_output.txt"  # a name no reader claims: recognised by its content
    dump = [f"  {k}: {v}" for k, v in (("hidden_size", 768), ("num_layers", 12), ("dropout", 0.1))] * 300
    records = [f"epoch {e} it {i} | train loss:{1.0 / (e * 10 + i + 1):.6f} lr:{1e-3:.1e}"
               for e in range(3) for i in range(10)]
    _logging_file(log, ["config:", *dump, *records], "%(asctime)s %(levelname)s %(name)s: %(message)s")
    assert sniff_console(sample(log), log.name)
    loss = _frame(log).filter(pl.col("tag") == "train loss")
    assert loss.height == 30 and loss["value"][0] == 1.0 and loss["value"][-1] == round(1 / 30, 6)
    assert loss["wall_time"].null_count() == 0


def test_tqdm_description_and_postfix(tmp_path):
    from tqdm import tqdm

    log = tmp_path / "nohup.out"
    with log.open("w") as f:
        bar = tqdm(range(40), file=f, mininterval=0, miniters=1, ascii=False)
        for i in bar:
            bar.set_description(f"d: {-i / 7:.3f};gen: {i / 3:.3f}")
            bar.set_postfix(loss=f"{1 / (i + 1):.4f}")
        bar.close()
    frame = _frame(log)
    assert frame.filter(pl.col("tag") == "loss")["value"][-1] == round(1 / 40, 4)
    d = frame.filter(pl.col("tag") == "d")
    assert d["value"][-1] == round(-39 / 7, 3) and role_of("d").role == "train_loss"


def test_csv_logger_file_under_a_log_name_goes_to_the_csv_reader(tmp_path):
    # Keras's CSVLogger (keras/callbacks/csv_logger.py) writes `epoch` then the logs' keys, sorted, with
    # csv.DictWriter and the default `,` separator; Keras is not installed here, so the same writer writes it.
    log = tmp_path / "training.log"
    with log.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["epoch", "accuracy", "loss", "val_accuracy", "val_loss"])
        writer.writeheader()
        for e in range(5):
            writer.writerow({"epoch": e, "accuracy": 0.5 + e / 10, "loss": 1 / (e + 1), "val_accuracy": 0.4,
                             "val_loss": 0.9})
    frame = _frame(log)
    loss = frame.filter(pl.col("tag") == "loss")
    assert loss["value"].to_list() == [1, 0.5, 1 / 3, 0.25, 0.2]


@pytest.mark.parametrize("name", ["training.log", "history.csv"])
@pytest.mark.parametrize("ends", ["\r", "\r\r"])
def test_a_csv_whose_lines_end_in_carriage_returns_alone_is_read_row_by_row(tmp_path, name, ends):
    # Python's csv module with `lineterminator="\r"` (classic Mac line ends), and `\r\n` written through a
    # text-mode handle whose `\n` was then lost: no `\n` anywhere, yet every row is a line.
    log = tmp_path / name
    with log.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["epoch", "loss", "val_loss"], lineterminator=ends)
        writer.writeheader()
        for e in range(6):
            writer.writerow({"epoch": e, "loss": 1 / (e + 1), "val_loss": 0.5 + e / 10})
    assert b"\n" not in log.read_bytes()
    frame = _frame(log)
    val = frame.filter(pl.col("tag") == "val_loss").sort("step")
    assert val["value"].to_list() == [0.5 + e / 10 for e in range(6)] and val["step"].to_list() == list(range(6))


def test_a_mean_over_a_count_of_batches_takes_the_value_after_the_colon(tmp_path):
    # `Mean test loss of 8 batches: 0.93`: the 8 counts the batches the loss is a mean of; read as the value, every
    # evaluation printed the same count and the held-out loss looked constant.
    from tests.runwriters import log_messages

    log = log_messages(tmp_path / "train.log", [
        m for e, (t, v) in enumerate([(1.7, 0.93), (1.1, 0.66), (0.8, 0.67)])
        for m in (f"Eval epoch: {e + 1}", f"\tMean training loss: {t:.4f}.", f"\tMean test loss of 8 batches: {v}.")])
    frame = _frame(log)
    held_out = frame.filter(pl.col("tag").str.contains("test loss"))
    assert held_out["value"].to_list() == [0.93, 0.66, 0.67] and held_out["tag"].unique().to_list() == ["Mean test loss"]


def test_a_text_file_not_taken_says_which_and_why(tmp_path):
    (tmp_path / "notes.txt").write_text("We trained the model for a while.\nIt went fine, mostly.\n")
    with pytest.raises(Exception) as err:
        ingest_run(tmp_path, db=tmp_path / "r.duckdb")
    assert "notes.txt" in str(err.value) and "not read as a training log" in str(err.value)


def test_unmatched_lines_are_reported_without_advice_to_edit_the_package(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("".join(f"step {i} loss 0.{i}\n" for i in range(1, 5)) + "loss≈0.5 by eye\n" * 3)
    issues = [i for c in read_console(log) for i in c.issues if i.kind == "unmatched_lines"]
    assert issues and "LinePattern" not in issues[0].detail and "loss≈0.5 by eye" in issues[0].detail


# ------------------------------------------------------------------------------------ no loss, evidence


def test_clipping_and_loss_scale_messages_are_series():
    clip = parse_line("I0822 20:54:57.256644 14071 sgd_solver.cpp:91] Gradient clipping: scaling down gradients "
                      "(L2 norm 5120.3 > 35) by scale factor 0.0068")
    assert clip.metrics == {"grad_norm": 5120.3, "grad_clip": 35.0, "clip_scale": 0.0068}
    assert role_of("grad_norm").role == "grad_norm"
    scale = parse_line("2020-01-01 10:00:00 | WARNING | fairseq.trainer | NOTE: overflow detected, setting loss "
                       "scale to: 0.5")
    assert scale.metrics == {"loss_scale": 0.5} and role_of("loss_scale").role == "loss_scale"


# ---------------------------------------------------------------------------------- the grammar, generated

_NAMES = st.sampled_from(["loss", "train_loss", "val_loss", "acc", "lr", "grad_norm", "cost", "nll", "xent",
                          "total_loss", "objective", "box_loss", "perplexity", "Loss", "mae"])
_SEPARATORS = st.sampled_from([": ", ":", "=", " = ", " "])
_JOINS = st.sampled_from([", ", " | ", "  ", "\t", " - ", "; "])
_VALUES = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False).map(lambda v: round(v, 6))
_FORMS = st.sampled_from(["{}", "'{}'", "tensor({}, device='cuda:0')", "tensor({}, grad_fn=<AddBackward0>)",
                          "[{}]", "{}±0.02"])
_COUNTERS = st.sampled_from(["", "step {n} ", "Epoch {n} ", "iter {n} | ", "[Iteration {n}] ", "Step {n}/100: "])
_STAMPS = st.sampled_from(["", "2024-03-26 10:00:00,123 - INFO - ", "[10:00:00] ", "I0822 20:54:57.256644 1 x.cpp:9] ",
                           "[03.24.23|09:56:11] "])


@settings(deadline=None, max_examples=300, derandomize=True)
@given(st.lists(st.tuples(_NAMES, _SEPARATORS, _FORMS, _VALUES), min_size=1, max_size=4,
                unique_by=lambda t: t[0]), _JOINS, _COUNTERS, _STAMPS, st.integers(0, 10 ** 6))
def test_generated_lines_give_their_values_back_exact(pairs, join, counter, stamp, n):
    written = []
    for name, sep, form, value in pairs:
        text = repr(value)
        if form.startswith("'"):  # a quoted value is a printed dict's: its key is quoted too
            written.append(f"'{name}': {form.format(text)}")
        else:
            written.append(f"{name}{sep}{form.format(text)}")
    line = stamp + counter.format(n=n) + join.join(written)
    parsed = parse_line(line)
    for name, _, _, value in pairs:
        assert name in parsed.metrics, (line, parsed.metrics)
        assert parsed.metrics[name] == value, (line, parsed.metrics)
    if counter:
        assert n in (parsed.step, parsed.epoch), (line, parsed)


@settings(deadline=None, max_examples=60, derandomize=True)
@given(st.lists(st.sampled_from(["epoch", "train loss", "val loss", "lr", "acc@1", "grad norm"]), min_size=2,
                max_size=5, unique=True), st.sampled_from(["\t", "   ", " | "]),
       st.lists(st.lists(_VALUES, min_size=5, max_size=5), min_size=2, max_size=6))
def test_generated_tables_give_their_columns_back(names, sep, rows):
    state = C._State()
    state.note_header(sep.join(n.title() if n == "epoch" else n for n in names))
    for i, row in enumerate(rows):
        values = [str(i) if n == "epoch" else repr(v) for n, v in zip(names, row)]
        metrics, counters = state.table_row(sep.join(values))
        for n, v in zip(names, row):
            if n == "epoch":
                assert counters["epoch"] == i
            else:
                assert metrics[n] == v


def test_bare_values_are_named_by_a_file_that_names_them_else_as_unnamed_values(tmp_path):
    """`loss.txt`: its values are `loss`; `numbers.txt`: values nothing names, read as `numbers.txt[1]`
    (`C.unnamed_width`; whether one is the loss is `ingest.run.loss_by_elimination`'s)."""
    values = "".join(f"{1 / (i + 1)!r}\n" for i in range(50))
    (tmp_path / "loss.txt").write_text(values)
    (tmp_path / "numbers.txt").write_text(values)
    assert sniff_console(sample(tmp_path / "loss.txt"), "loss.txt")
    assert C._sniff(sample(tmp_path / "numbers.txt"), "numbers.txt") == (True, "its lines are rows of 1 unnamed value")


def test_an_unended_last_line_waits_while_the_file_is_being_written(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("step 1 loss 0.5\nstep 2 loss 0.4")
    assert _frame(log).height == 1  # written just now: the writer may be mid-line
    old = time.time() - 2 * C.IDLE_SECONDS
    os.utime(log, (old, old))
    assert _frame(log)["value"].to_list() == [0.5, 0.4]


def test_discovery_finds_a_run_whose_log_opens_with_a_long_dump(tmp_path):
    from ingest.discovery import discover_runs

    run = tmp_path / "exp1"
    run.mkdir()
    dump = "".join(f"  model.layers.{i}.attention.dropout: 0.1\n" for i in range(2000))  # ~80 KB of config
    records = "".join(f"[INFO|2024-11-26 22:{i:02d}:01] >> {{'loss': {2 - i / 50}, 'epoch': {i / 10}}}\n"
                      for i in range(40))
    (run / "stdout").write_text("LlamaConfig {\n" + dump + "}\n" + records)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("try a lower lr: 0.1 was too high, 0.01 next\n")
    found = discover_runs(tmp_path)
    assert [(r.path.name, r.kind) for r in found] == [("exp1", "console_log")]


def test_counts_with_thousands_separators_are_one_number():
    parsed = parse_line("[epoch: 0, iter: 121,400, lr:(1.723e-04,)] l_pix: 5.1789e-03")
    # (the LR printed as a one-element tuple of its one parameter group is that LR)
    assert parsed.step == 121400 and parsed.metrics == {"lr": 1.723e-04, "l_pix": 5.1789e-03}
    assert parse_line("[035420][Epoch 01/10] PV:10,434,100 Loss:14.286367").metrics == {"PV": 10434100,
                                                                                      "Loss": 14.286367}
    assert parse_line("[1,  2000] loss: 2.183").batch == 2000  # a pair of counters, not a number


def test_a_stamps_milliseconds_after_a_comma_are_no_thousands():
    parsed = parse_line("Training: 2023-11-14 22:13:37,195-Speed 2183.40 samples/sec   Loss 1.6935   Global Step: 30")
    assert parsed.time["frac"] == "195" and parsed.metrics["Speed"] == 2183.4 and parsed.step == 30


# ------------------------------------------------------------------ padded values, labels, bars, restarts


def test_a_non_finite_value_padded_to_its_columns_width(tmp_path):
    # word_language_model's record: `'| loss {:5.2f} | ppl {:8.2f}'` pads nan to the width, two spaces or more.
    log = tmp_path / "train.log"
    with log.open("w") as f:
        for batch in range(200, 1001, 200):
            loss = float("nan") if batch > 200 else 5.2
            print("| epoch {:3d} | {:5d}/{:5d} batches | lr {:02.2f} | ms/batch {:5.2f} | loss {:5.2f} | ppl {:8.2f}"
                  .format(1, batch, 2983, 20.0, 11.61, loss, math.exp(loss)), file=f)
    loss = _frame(log).filter(pl.col("tag") == "loss")["value"].to_list()
    assert loss[0] == 5.2 and len(loss) == 5 and all(math.isnan(v) for v in loss[1:])


@pytest.mark.needs_shared
def test_a_real_log_whose_loss_is_nan_from_its_first_record():
    loss = _frame(PADDED_NAN).filter(pl.col("tag") == "loss")
    assert loss.height > 50 and loss["value"].is_nan().all()


def test_values_under_a_label_naming_memory_are_memory(tmp_path):
    log = tmp_path / "train.log"
    with log.open("w") as f:
        for i in range(6):
            print(f"epoch 1/50 - it {i}/100 - loss: {2.4 - i / 100:.3f}", file=f)
            print(f"GPU memory: allocated: {0.18 + i / 30:.2f}, reserved: {2.55 + i / 30:.2f}", file=f)
            print(f"Train: loss: {2.4 - i / 100:.3f}", file=f)
    frame = _frame(log)
    allocated = frame.filter(pl.col("tag") == "GPU memory allocated")
    assert allocated.height == 6 and allocated["value"][0] == 0.18 and role_of("GPU memory allocated").role == "memory"
    assert frame.filter(pl.col("tag") == "loss").height == 12  # `Train: loss: X`: the pair after its label


@pytest.mark.needs_shared
def test_a_real_labelled_memory_report_names_its_quantity():
    frame = _frame(MEMORY_LABEL)
    current = frame.filter(pl.col("tag") == "Memory info of GPU current")["value"].to_list()
    assert current[0] == 0.18 and current[-1] == 0.35 and len(current) == 7
    assert frame.filter(pl.col("tag") == "Memory info of CPU available")["value"][0] == 190.78
    assert {role_of(t).role for t in frame["tag"].unique() if t.startswith("Memory info")} == {"memory"}


def test_a_bar_whose_description_names_a_counter_is_one_record_per_epoch(tmp_path):
    from tqdm import tqdm

    log = tmp_path / "console.log"
    with log.open("w") as f:
        for epoch in range(3):
            bar = tqdm(range(20), file=f, desc=f"Epoch [{epoch:03d}/210] | Loss {0.003 - epoch / 1e4:.4f} | "
                       f"LR {0.0:.8f} | Step", mininterval=1e9)
            for _ in bar:
                pass
            bar.close()
            f.write("\n")
    frame = _frame(log)
    lr, loss = frame.filter(pl.col("tag") == "LR"), frame.filter(pl.col("tag") == "Loss")
    assert lr["value"].to_list()[-3:] == [0.0, 0.0, 0.0] and loss["step"].n_unique() == loss.height
    assert loss["value"][-1] == 0.0028 and loss["epoch"][-1] == 2


@pytest.mark.needs_shared
def test_a_real_bar_per_epoch_gives_a_point_per_epoch():
    frame = _frame(BAR_PER_EPOCH)
    for tag, values in (("Loss", [0.0029, 0.0037]), ("LR", [0.0, 0.0])):
        points = frame.filter(pl.col("tag") == tag)
        assert points["value"].to_list() == values and points["epoch"].to_list() == [0, 1]


def test_an_epoch_counter_that_falls_back_is_kept_in_write_order(tmp_path):
    log = tmp_path / "train_log.txt"
    with log.open("w") as f:
        for epoch in [*range(1, 6), *range(3, 8)]:  # resumed from epoch 2's checkpoint
            print(f"epoch {epoch:3d}\nloss: {1 / epoch:.6f}\ntest accuracy: {epoch:.2f}%", file=f)
    frame = _frame(log)
    epochs = frame.filter(pl.col("tag") == "epoch").sort("position")["value"].to_list()
    assert epochs == [1, 2, 3, 4, 5, 3, 4, 5, 6, 7]
    assert frame.filter(pl.col("tag") == "loss").sort("position")["epoch"].to_list() == epochs


@pytest.mark.needs_shared
def test_a_real_resumed_log_keeps_both_segments():
    frame = _frame(EPOCH_FALLS_BACK).sort("position")
    epochs = frame.filter(pl.col("tag") == "epoch")["value"].to_list()
    back = [i for i in range(1, len(epochs)) if epochs[i] < epochs[i - 1]]
    assert len(epochs) == 300 and len(back) == 1 and (epochs[back[0] - 1], epochs[back[0]]) == (100, 71)
    assert frame.filter(pl.col("tag") == "loss")["value"][0] == 6.608444


def test_a_log_written_in_gbk_is_text(tmp_path):
    log = tmp_path / "train_log.txt"
    with log.open("w", encoding="gbk", newline="\r\n") as f:
        print("训练开始，模型结构如下：" * 40, file=f)  # a Chinese console's banner: most of the head is not UTF-8
        for i in range(1, 21):
            print(f"2021-09-03 19:05:{i:02d} | INFO | 训练器 - epoch: 1/300, iter: {i}/47, total_loss: {10.7 - i / 10:.1f}",
                  file=f)
    assert sniff_console(sample(log), log.name)
    loss = _frame(log).filter(pl.col("tag") == "total_loss")
    assert loss.height == 20 and loss["value"][0] == 10.6 and loss["value"][-1] == 8.7


def test_a_log_after_a_run_of_nuls_is_read(tmp_path):
    # `> train.log` while the job still writes at its old offset: the file restarts with zeros up to that offset.
    log = tmp_path / "training.log"
    with log.open("wb") as f:
        f.write(b"\x00" * 11_000)
        for step in range(710, 810, 10):
            f.write(f"step {step} | loss {4.37 - step / 1e4:.4f} | lr 3e-4\r\n\r\n".encode())
    loss = _frame(log).filter(pl.col("tag") == "loss")
    assert loss["step"].to_list() == list(range(710, 810, 10)) and loss["value"][0] == 4.299
    assert C._is_binary(b"\x00" * 100 + b"\x00\x01\x02" * 2000)  # zeros inside the data are still binary


def test_a_count_of_epochs_after_its_word_is_the_epoch(tmp_path):
    log = tmp_path / "cnn_output.log"
    with log.open("w") as f:
        for epoch in range(1, 4):
            print(f"MRR : {0.6 + epoch / 100:.3f}\t\nLoss after {epoch} epochs: {0.04 - epoch / 100:.3f}\t", file=f)
    loss = _frame(log).filter(pl.col("tag") == "Loss")
    assert loss["value"].to_list() == [0.03, 0.02, 0.01] and loss["epoch"].to_list() == [1, 2, 3]


# ------------------------------------------------------------- shapes of printers met only outside our sets


def test_a_leading_step_before_name_value_pairs(tmp_path):
    # build-nanoGPT's train_gpt2.py: `f.write(f"{step} train {loss_accum.item():.6f}\n")`, `{step} val {..:.4f}`,
    # `{step} hella {acc_norm:.4f}`: the word `loss` never appears; a value named by its split alone is its loss.
    log = tmp_path / "log.txt"
    with log.open("w") as f:
        for step in range(30):
            if step % 10 == 0:
                f.write(f"{step} val {4.5 - step / 20:.4f}\n")
                f.write(f"{step} hella {0.25 + step / 1000:.4f}\n")
            f.write(f"{step} train {5 - step / 10:.6f}\n")
    frame = _frame(log)
    train = frame.filter(pl.col("tag") == "train")
    assert train["step"].to_list() == list(range(30)) and train["value"][-1] == 2.1
    assert (role_of("train").role, role_of("val").role, role_of("hella").role) == ("train_loss", "val_loss", "other")
    assert C.stem_tag(Path("train.log")) is None  # a file named by its split names no quantity for bare values
    assert sniff_console(sample(log), log.name)


def test_a_key_value_csv_under_a_log_name(tmp_path):
    # csv.writer rows of alternating names and values, no header: `iteration,1,train_loss,2.31,train_accuracy,0.05`
    log = tmp_path / "train.log"
    with log.open("w", newline="") as f:
        writer = csv.writer(f)
        for i in range(1, 6):
            writer.writerow(["iteration", i, "train_loss", 2.31 - i / 100, "train_accuracy", i / 20])
    frame = _frame(log)
    loss = frame.filter(pl.col("tag") == "train_loss")
    assert loss["step"].to_list() == [1, 2, 3, 4, 5] and loss["value"].to_list() == [2.31 - i / 100 for i in range(1, 6)]
    assert parse_line("loss;0.5;acc;0.9").metrics == {"loss": 0.5, "acc": 0.9}
    assert parse_line("name,resnet,loss,0.5").metrics == {}  # a text value: not alternating names and values


def test_python_logging_with_a_source_location_and_dashed_separators(tmp_path):
    log = tmp_path / "train.log"
    fmt = "%(asctime)s - %(filename)s[line:%(lineno)d] - %(levelname)s: %(message)s"
    messages = []
    for e in range(1, 6):
        messages.append(f"Train Epoch {e} --- train loss : {1 / e} --- train accuracy:{1 - 1 / (e + 1)}")
        messages.append(f"Test Epoch {e} --- test loss : {1.2 / e} --- test accuracy:{0.9 - 1 / (e + 2)}")
    _logging_file(log, messages, fmt)
    frame = _frame(log)
    assert frame.filter(pl.col("tag") == "train loss")["value"].to_list() == [1 / e for e in range(1, 6)]
    assert frame.filter(pl.col("tag") == "test loss").height == 5
    assert "line" not in frame["tag"].to_list()  # the logger's source line is no metric


def test_the_loss_in_prose_and_after_an_arrow(tmp_path):
    log = tmp_path / "train.log"
    messages = [f"the training loss is {1 / (s + 1):.4f} at step {s * 10}" for s in range(5)]
    messages += [f"Loss at step {s * 10 + 50}: {0.1 / (s + 1):.4f}" for s in range(3)]
    _logging_file(log, messages, "%(asctime)s %(name)s %(levelname)s %(message)s")
    frame = _frame(log)
    prose = frame.filter(pl.col("tag") == "training loss")
    assert prose["step"].to_list() == [0, 10, 20, 30, 40] and prose["value"][0] == 1.0
    assert frame.filter(pl.col("tag") == "Loss")["step"].to_list() == [50, 60, 70]
    assert parse_line("[Module] training_step -> loss: nan").metrics.keys() == {"loss"}
    assert math.isnan(parse_line("Epoch 0: 5%| 5/100 [00:49<1:22:02, v_num=45, train_loss_step=nan.0]")
                      .metrics["train_loss_step"])
    assert parse_line("Processing the files of the dataset 3 times").metrics == {}  # prose, no metric's name


def test_a_held_out_split_before_its_counter_names_its_values():
    # PaddleVideo's `epoch:[  1/25 ] train step:0   loss: 4.97 lr: 0.01 ... batch_cost: 7.44 sec, ...`
    train = parse_line("[12/25 14:22:40] epoch:[  1/25 ] train step:0    loss: 4.97011 lr: 0.010000 top1: 0.01562 "
                       "batch_cost: 7.44212 sec, reader_cost: 7.01723 sec, ips: 8.59970 instance/sec.")
    assert (train.epoch, train.step) == (1, 0) and train.metrics["loss"] == 4.97011 and train.metrics["lr"] == 0.01
    val = parse_line("[12/25 14:25:57] epoch:[  1/25 ] val step:0    loss: 3.27431 top1: 0.12500")
    assert val.metrics == {"val loss": 3.27431, "val top1": 0.125} and role_of("val loss").role == "val_loss"
    mask_rcnn = parse_line("Epoch 0 [  0/188] loss=6.8574 cls=0.1 box=0.2 lr=0.01 (3.2s)")
    assert (mask_rcnn.epoch, mask_rcnn.batch, mask_rcnn.metrics["loss"]) == (0, 0, 6.8574)


_KV_NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)


@settings(deadline=None, max_examples=200, derandomize=True)
@given(st.lists(st.tuples(_KV_NAMES, _VALUES), min_size=2, max_size=5, unique_by=lambda t: t[0].lower()),
       st.sampled_from([",", ";", "\t", "|"]))
def test_generated_key_value_rows_give_their_values_back(pairs, sep):
    line = sep.join(f"{name}{sep}{value!r}" for name, value in pairs)
    parsed = parse_line(line)
    got = {**parsed.metrics, **{k: v for k, v in (("step", parsed.step), ("epoch", parsed.epoch),
                                                   ("batch", parsed.batch)) if v is not None}}
    for name, value in pairs:
        assert any(got.get(k) == value for k in (name, "step", "epoch", "batch")), (line, got)


@settings(deadline=None, max_examples=200, derandomize=True)
@given(st.integers(0, 10 ** 7), st.lists(st.tuples(st.sampled_from(["train", "val", "loss", "acc", "ppl"]), _VALUES),
                                         min_size=1, max_size=3, unique_by=lambda t: t[0]))
def test_generated_leading_step_lines_give_their_values_back(step, pairs):
    line = f"{step} " + " ".join(f"{name} {value!r}" for name, value in pairs)
    parsed = parse_line(line)
    assert parsed.step == step and parsed.metrics == dict(pairs), (line, parsed)


def _detector_log(path: Path, epochs: int, batches: int) -> list[float]:
    """A console as Ultralytics' trainer prints it, drawn by tqdm: its header row, then one bar per epoch whose
    description is the row of running means (`("%11s" * 2 + "%11.4g" * 5) % (...)`), redrawn with `\\r`."""
    from tqdm import tqdm

    written = []
    with path.open("w") as f:
        for epoch in range(epochs):
            f.write(("\n" + "%11s" * 7) % ("Epoch", "GPU_mem", "box_loss", "cls_loss", "dfl_loss", "Instances",
                                           "Size") + "\n")
            bar = tqdm(range(batches), file=f, mininterval=0, miniters=1, bar_format="{l_bar}{bar:10}{r_bar}")
            for i in bar:
                box = round(1.9 - epoch / 10 - i / 100, 4)
                bar.set_description(("%11s" * 2 + "%11.4g" * 5) % (f"{epoch + 1}/{epochs}", "2.1G", box, 2.0, 0.01,
                                                                    40, 768))
                if not written or written[-1] != box:
                    written.append(box)
            bar.close()
    return written


def test_every_refresh_of_a_redrawn_bar_is_a_record_and_a_repeat_counts_once(tmp_path):
    log = tmp_path / "train.log"
    written = _detector_log(log, epochs=4, batches=6)
    assert log.read_bytes().count(b"\r") > 24  # every refresh drawn over the last
    box = _frame(log).filter(pl.col("tag") == "box_loss")
    assert box["value"].to_list() == written and box["epoch"].to_list()[-1] == 4
    assert box["step"].is_sorted() and role_of("box_loss").role == "train_loss"
    # Ultralytics 8.3+ draws its own bar in box characters, without tqdm's pipes
    row = "       4/40      2.21G       1.51     0.9812   0.009121         48        768: 40% ━━━━╸─────── 2/5 3.3it/s"
    state = C._State()
    state.note_header("      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size")
    metrics, counters = state.table_row(row)
    assert metrics["box_loss"] == 1.51 and counters["epoch"] == 4 and parse_line(row).batch == 2


# Ultralytics 8.3 in a notebook whose saved text output dropped the bars' glyphs (`640: 100% 63/63 [00:18<00:00, ...]`),
# as pasted in a README. Lines from fasafa/Sign-Language-Detection@0d4534272384babf55d46976dfc5b2010ae0d3fd:README.md
_NOTEBOOK_BAR_LOG = """\
      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size
    452/500      4.18G     0.2503     0.1963     0.8819          9        640: 100% 63/63 [00:18<00:00,  3.35it/s]
                 Class     Images  Instances      Box(P          R      mAP50  mAP50-95): 100% 5/5 [00:00<00:00,  5.12it/s]
                   all        141        141      0.925      0.901      0.978      0.925

      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size
    453/500      4.19G     0.2577     0.2038     0.8861         11        640: 100% 63/63 [00:20<00:00,  3.14it/s]
                 Class     Images  Instances      Box(P          R      mAP50  mAP50-95): 100% 5/5 [00:00<00:00,  5.52it/s]
                   all        141        141      0.892      0.922      0.977      0.925

      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size
    454/500       4.2G       0.25     0.2014      0.888         12        640: 100% 63/63 [00:19<00:00,  3.31it/s]
                 Class     Images  Instances      Box(P          R      mAP50  mAP50-95): 100% 5/5 [00:00<00:00,  5.41it/s]
                   all        141        141       0.94       0.87      0.975      0.924
"""


def test_a_bar_whose_glyphs_a_notebook_dropped_is_a_bar_and_a_header_names_no_values(tmp_path):
    log = tmp_path / "README.md"
    log.write_text(_NOTEBOOK_BAR_LOG)
    frame = _frame(log)
    box = frame.filter(pl.col("tag") == "box_loss")
    assert box["value"].to_list() == [0.2503, 0.2577, 0.25] and box["epoch"].to_list() == [452, 453, 454]
    # `mAP50  mAP50-95` in the evaluation's header are names: no `mAP5` of 0 nor `mAP50-9` of 5
    assert not frame.filter(pl.col("tag").str.starts_with("mAP")).height


# Ultralytics 8.4 on a Windows console: its UTF-8 bar read through the OEM code page and saved as UTF-16, so `━` is
# `Ôöü`. Lines from 127158017-hue/YOLO_MINIPROJ@0fde770784d693f6f166f76b53bf17ce46ff11b7:train_output.txt
_OEM_BAR_LOG = (
    "\r\n      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size\r\n\r\n"
    "\x1b[K      1/100         0G       3.35      5.818      4.334         30        320: 0% ÔöÇÔöÇÔöÇÔöÇÔöÇÔöÇÔöÇÔöÇÔöÇÔöÇÔöÇÔöÇ 0/1  0.7s\r\n"
    "\x1b[K      1/100         0G       3.35      5.818      4.334         30        320: 100% ÔöüÔöüÔöüÔöüÔöüÔöüÔöüÔöüÔöüÔöüÔöüÔöü 1/1 1.5it/s 0.7s\r\n\r\n"
    "\x1b[K                 Class     Images  Instances      Box(P          R      mAP50  mAP50-95): 100% ÔöüÔöüÔöüÔöüÔöüÔöüÔöüÔöüÔöüÔöüÔöüÔöü 1/1 5.0it/s 0.2s\r\n"
    "                   all          4         17          0          0          0          0\r\n\r\n"
    "      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size\r\n\r\n"
    "\x1b[K      2/100         0G      3.458      5.648      4.318         30        320: 0% ÔöÇÔöÇÔöÇÔöÇÔöÇÔöÇÔöÇÔöÇÔöÇÔöÇÔöÇÔöÇ 0/1  0.5s\r\n"
    "\x1b[K      2/100         0G      3.458      5.648      4.318         30        320: 100% ÔöüÔöüÔöüÔöüÔöüÔöüÔöüÔöüÔöüÔöüÔöüÔöü 1/1 1.9it/s 0.5s\r\n")


def test_a_bar_shown_through_an_oem_code_page_is_a_bar(tmp_path):
    log = tmp_path / "train_output.txt"
    log.write_bytes(_OEM_BAR_LOG.encode("utf-16"))
    frame = _frame(log)
    box = frame.filter(pl.col("tag") == "box_loss")
    assert set(box["value"].to_list()) == {3.35, 3.458} and set(box["epoch"].to_list()) == {1, 2}
    assert frame["position"].max() < log.stat().st_size  # the bar read as its box characters keeps byte offsets
    assert C._oem_bars("100% ÔöüÔöü 1/1".encode()) == "100% ━━".encode() + b" " * 7 + b"1/1"


# DeepXDE prints each loss term in a list under the `Train loss` and `Test loss` columns. Lines from
# Debashis-Gupta/790_project@0176ccd6f63526d4488e2057a7900ffe246876cb:output/log.txt
_LIST_CELL_LOG = "\n".join([
    "Compiling model...", "'compile' took 1.176812 s", "", "Training model...", "",
    "Step      Train loss                        Test loss                         Test metric",
    "0         [1.18e-02, 1.29e-02, 5.61e-01]    [1.18e-02, 1.29e-02, 5.61e-01]    []  ",
    "1000      [3.86e-02, 7.37e-04, 5.66e-02]    [3.86e-02, 7.37e-04, 5.66e-02]    []  ",
    "2000      [2.49e-02, 2.48e-04, 3.49e-02]    [2.49e-02, 2.48e-04, 3.49e-02]    []  ",
    "", "Best model at step 2000:", "  train loss: 5.99e-02", "  test loss: 5.99e-02", "  test metric: []", ""])


def test_a_table_cell_holding_a_list_gives_each_term_and_a_loss_their_sum(tmp_path):
    log = tmp_path / "log.txt"
    log.write_text(_LIST_CELL_LOG)
    frame = _frame(log)
    train = frame.filter(pl.col("tag") == "Train loss").sort("step")
    assert train["step"].to_list()[:3] == [0, 1000, 2000]
    assert train["value"].to_list()[:3] == [0.5857, 0.095937, 0.060048]  # the terms' sum, as `train loss:` prints it
    assert frame.filter(pl.col("tag") == "Train loss_2")["value"].to_list() == [0.561, 0.0566, 0.0349]
    assert frame.filter(pl.col("tag") == "Test loss_0")["value"].to_list() == [0.0118, 0.0386, 0.0249]
    assert not frame.filter(pl.col("tag").str.starts_with("Test metric")).height  # `[]`: no value


# ------------------------------------------------------------------------ text in any bytes a console writes


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "latin-1"])
def test_a_log_in_utf16_or_latin1_is_read(tmp_path, encoding):
    # PowerShell's `>` and Tee-Object write UTF-16 (with a byte-order mark); Python's FileHandler writes what it is told
    log = tmp_path / "train.log"
    messages = ["Démarrage de l'entraînement: modèle chargé"] + [
        f"Epoch {e} [{b:4d}/188] loss={6.8 - e - b / 1000:.4f} cls=0.1 lr=0.01" for e in range(3) for b in (0, 20, 40)]
    _logging_file(log, messages, "%(asctime)s %(levelname)s: %(message)s", encoding)
    chunks = list(read_console(log))
    loss = pl.concat([c.scalars for c in chunks if c.scalars is not None]).filter(pl.col("tag") == "loss")
    assert loss["value"].to_list() == [round(6.8 - e - b / 1000, 4) for e in range(3) for b in (0, 20, 40)]
    assert loss["position"].is_sorted() and chunks[-1].end == log.stat().st_size
    assert sniff_console(sample(log), "run_output") and C.prints_a_loss(sample(log))


def test_a_utf16_log_resumes_where_the_last_read_ended(tmp_path):
    log = tmp_path / "train.log"
    with log.open("w", encoding="utf-16", newline="\r\n") as f:
        for step in range(5):
            print(f"step {step} | loss {1 / (step + 1):.4f}", file=f)
    first = list(read_console(log))
    end = first[-1].end
    with log.open("a", encoding="utf-16-le", newline="\r\n") as f:  # appending writes no second byte-order mark
        for step in range(5, 8):
            print(f"step {step} | loss {1 / (step + 1):.4f}", file=f)
    more = pl.concat([c.scalars for c in read_console(log, end) if c.scalars is not None])
    assert more.filter(pl.col("tag") == "loss")["step"].to_list() == [5, 6, 7]
    assert more["position"].min() >= end


def test_a_log_with_a_crashs_nuls_odd_bytes_and_escape_codes_is_text(tmp_path):
    log = tmp_path / "train.log"
    with log.open("wb") as f:
        f.write(b"\x1b[32m2024-01-01 10:00:00\x1b[0m \x1b[1mINFO\x1b[0m starting \x01\x02\xff\xfe\n" * 3)
        for step in range(20):
            f.write(f"\x1b[36mstep {step}\x1b[0m | loss {2 - step / 20:.3f}\n".encode())
            if step == 10:
                f.write(b"\x00" * 3000)  # the block of zeros a crash or a full disk leaves
    loss = _frame(log).filter(pl.col("tag") == "loss")
    assert loss["step"].to_list() == list(range(20))
    assert C.binary_reason(bytes(range(256)) * 16) is not None  # data is still data


def test_a_log_whose_head_is_junk_is_read_where_its_lines_carry_metrics(tmp_path):
    log = tmp_path / "train.log"
    with log.open("wb") as f:
        f.write(bytes(range(1, 32)) * 200)  # junk where the log's head was overwritten
        f.write(b"\n")
        for step in range(40):
            f.write(f"iter {step}: loss {3 - step / 40:.4f}, time 12.3ms\n".encode())
    assert _frame(log).filter(pl.col("tag") == "loss").height == 40
    junk = tmp_path / "other.log"
    junk.write_bytes(bytes(range(1, 32)) * 400)
    issues = [i for c in read_console(junk) for i in c.issues]
    assert any(i.kind == "not_this_format" and "control bytes" in i.detail for i in issues)


# ---------------------------------------------------------------------------------- counters that restart


def test_a_step_counted_within_each_epoch_is_the_batch(tmp_path):
    # PaddleVideo's `"{} epoch:[{:>3d}/{:<3d}] {} step:{:<4d} ..."`: its step starts again with each epoch and a
    # validation pass prints its own between them
    log = tmp_path / "train.log"
    messages = []
    for e in range(1, 4):
        messages += [f"epoch:[{e:>3d}/25 ] train step:{s:<4d} loss: {5 - e - s / 1000:.5f} lr: 0.010000"
                     for s in (0, 100)]
        messages.append(f"epoch:[{e:>3d}/25 ] val step:0    loss: {4 - e:.5f} top1: 0.1")
    _logging_file(log, messages, "[%(asctime)s] %(message)s")
    loss = _frame(log).filter(pl.col("tag") == "loss")
    assert loss["epoch"].to_list() == [1, 1, 2, 2, 3, 3] and loss["batch"].to_list() == [0, 100] * 3
    assert loss["ordinal"].all() and loss["step"].is_sorted()
    assert _frame(log).filter(pl.col("tag") == "val loss").height == 3
    # Paddle's ProgBarLogger: an `Epoch e/E` line, then `step s/N - loss: ...` lines counting within it
    hapi = tmp_path / "hapi.log"
    with hapi.open("w") as f:
        for e in range(1, 4):
            print(f"Epoch {e}/10", file=f)
            for s in (10, 20, 30):
                print(f"step {s:3d}/30 - loss: {1 / (e * s):.4f} - acc: 0.5 - 12ms/step", file=f)
    hapi_loss = _frame(hapi).filter(pl.col("tag") == "loss")
    assert hapi_loss["epoch"].to_list() == [1, 1, 1, 2, 2, 2, 3, 3, 3] and hapi_loss["batch"].to_list() == [10, 20, 30] * 3
    # ... against the steps per epoch it prints: the global step is epoch × steps per epoch + step
    assert not hapi_loss["ordinal"].any() and hapi_loss["step"].to_list() == [e * 30 + s for e in (1, 2, 3)
                                                                             for s in (10, 20, 30)]
    # a global step printed beside its epoch stays the step
    rising = tmp_path / "rising.log"
    _logging_file(rising, [f"epoch {e} step {e * 100 + s} loss {1 / (s + 1):.3f}" for e in range(3) for s in (0, 50)],
                  "%(message)s")
    assert not _frame(rising).filter(pl.col("tag") == "loss")["ordinal"].any()


def test_launches_appended_to_one_log_are_marked_where_each_begins(tmp_path):
    # a script run twice with the same FileHandler (mode "a"): the second launch counts from the start again
    log = tmp_path / "train.log"
    for launch in range(2):
        _logging_file(log, [f"Epoch {e}/5 - loss: {1 / (e + launch):.4f}" for e in range(1, 6)], "%(message)s")
    frame = _frame(log)
    marks = frame.filter(pl.col("tag") == C.LAUNCH_TAG)
    assert marks["value"].to_list() == [2.0] and marks["epoch"].to_list() == [1]
    assert role_of(C.LAUNCH_TAG).role == "launch"
    # a resume from a checkpoint goes back to a later epoch: no launch
    resumed = tmp_path / "resumed.log"
    _logging_file(resumed, [f"Epoch {e}/9 - loss: {1 / e:.4f}" for e in (*range(1, 6), *range(3, 9))], "%(message)s")
    assert _frame(resumed).filter(pl.col("tag") == C.LAUNCH_TAG).height == 0


def test_a_text_file_whose_bytes_look_binary_is_named_with_the_reason(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "train.log").write_text("".join(f"step {s} | loss {1 / (s + 1):.3f}\n" for s in range(20)))
    (run / "notes.txt").write_bytes(bytes(range(1, 32)) * 300)  # a text name over data
    report = ingest_run(run, tmp_path / "db.duckdb")
    why = report.unread_text.get("notes.txt", "")
    assert "binary data" in why and "control bytes" in why


def test_a_period_that_abbreviates_a_word_of_the_name_ends_no_clause(tmp_path):
    # Keras 0.x's progbar (`- loss: X - val. loss: Y`) and a print with abbreviated words (`Test. Acc.: 97.4% |
    # Loss: ...`): the name is its words, the period aside, so the held-out split stays in it.
    log = tmp_path / "train.log"
    with log.open("w") as f:
        for e in range(6):
            print(f"Epoch {e}", file=f)
            print(f"5823/5823 [==============================] - 322s - loss: {900 - 50 * e:.4f} - "
                  f"val. loss: {1000 - 10 * e:.4f}", file=f)
            print(f"**Epoch: {e + 1:03d}/006 | Test. Acc.: {90 + e:.3f}% | Loss: {0.5 - e / 100:.4f}", file=f)
    frame = _frame(log)
    roles = {t: role_of(t).role for t in frame["tag"].unique()}
    assert roles["val. loss"] == "val_loss" and roles["Test. Acc."] == "val_accuracy"
    # the abbreviated split heads the line: the line's other values are that split's, as under a `Test:` label
    assert roles["test Loss"] == "val_loss" and frame.filter(pl.col("tag") == "test Loss").height == 6
    assert frame.filter(pl.col("tag") == "loss")["value"].to_list() == [900 - 50 * e for e in range(6)]
    assert frame.filter(pl.col("tag") == "val. loss")["value"].to_list() == [1000 - 10 * e for e in range(6)]
    # a period that ends a sentence still ends its clause: the next name does not take the sentence's last word
    assert parse_line("Epoch 3 done. loss: 0.52").metrics == {"loss": 0.52}


@pytest.mark.needs_shared
def test_a_real_log_whose_second_loss_differs_by_a_word_before_an_abbreviation():
    # `avg. loss: X` (the current task's) and `mem avg. loss: X` (the replay memory's) are two series
    frame = _frame(WILD / "c044_plainprint" / "train.out")
    assert frame.filter(pl.col("tag") == "avg. loss").height == 50
    assert frame.filter(pl.col("tag") == "mem avg. loss").height == 50
    assert role_of("avg. loss") == role_of("loss") and not role_of("mem avg. loss").canonical


def test_rows_of_numbers_with_a_counter_are_records_whose_first_other_column_is_the_loss(tmp_path):
    # `f.write(f"{epoch}, {loss:.5f},{acc:.3f}\n")` with no header line; a second launch appends its rows
    log = tmp_path / "train.log"
    with log.open("w") as f:
        for launch in range(2):
            for epoch in range(8):
                f.write(f"{epoch}, {44.7 - 0.1 * epoch - launch:.5f},{50 + epoch:.3f}\n")
    frame = _frame(log)
    assert frame.filter(pl.col("tag") == "loss")["value"].to_list()[:3] == [44.7, 44.6, 44.5]
    assert frame.filter(pl.col("tag") == "loss").height == 16 and frame.filter(pl.col("tag") == "column 3").height == 16
    assert role_of("column 3").role == "other"  # nothing names it: no role is guessed from its range


def test_rows_of_numbers_with_the_counter_last_under_epoch_lines(tmp_path):
    # `print(f"Epoch: {e}")` then `print(f"{loss}, {batch_idx}")` every 100 batches; a file named for the held-out
    # split holds that split's loss
    for name, tag in (("train_log.txt", "loss"), ("validation_log.txt", "validation loss")):
        log = tmp_path / name
        with log.open("w") as f:
            for e in range(3):
                print(f"Epoch: {e}", file=f)
                for b in range(0, 500, 100):
                    print(f"{10.19 - e / 100 - b / 1e5}, {b}", file=f)
        loss = _frame(log).filter(pl.col("tag") == tag)
        assert loss.height == 15 and loss["value"][0] == 10.19
    assert role_of("validation loss").role == "val_loss"


def test_rows_of_numbers_printed_among_named_records_are_no_loss(tmp_path):
    # a data setup's printout (`for i, w in enumerate(ws): print(i, w)`) before `it: N, avg. loss: X` records
    log = tmp_path / "train.out"
    with log.open("w") as f:
        for i in range(10):
            print(i, round(0.4 * i, 1), file=f)
        for it in range(1, 3001, 100):
            print(f"==>>> it: {it}, avg. loss: {6 - it / 1000:.6f}, running train acc: {it / 4000:.3f}", file=f)
    frame = _frame(log)
    assert "loss" not in frame["tag"].to_list() and frame.filter(pl.col("tag") == "avg. loss").height == 30


def test_rows_of_whole_numbers_or_without_a_counter_are_no_loss(tmp_path):
    # a confusion matrix's rows (whole numbers only) and pairs of floats with no counter name nothing
    log = tmp_path / "train.log"
    with log.open("w") as f:
        for i in range(8):
            print(" ".join(str((i * 7 + j) % 50) for j in range(5)), file=f)
        for i in range(8):
            print(f"{0.5 + i / 100} {5.7 - i / 10}", file=f)
    frame = _frame(log)
    assert not frame.filter(pl.col("tag").map_elements(lambda t: role_of(t).role in ("train_loss", "val_loss"),
                                                       return_dtype=pl.Boolean)).height


def test_the_candidate_filter_keeps_out_a_line_that_can_give_nothing():
    # every alternative of the pre-filter is a pattern: an empty one (`||`, `|` at an end) would keep every line; a box
    # table's row holds a value whatever its key (`pipe_row`), its rule line none
    lines = pl.Series(["kl just right!", "| EpLenMean |             |", "Epoch 3: 100%|██| 5/5 [00:01<00:00]",
                       "| EpLenMean | 200 |"])
    assert lines.str.contains(C._CANDIDATE).to_list() == [False, False, True, True]


def test_a_word_that_opens_with_a_value_word_is_no_value(tmp_path):
    # a sampling banner between records (LinJasian/Mini-GPT@a3993d6db0c439b644d8e9af8f7d957e316c7c5a:
    # results/training_log.txt): `Inference` is no `inf` with a unit `erence`
    assert parse_line("--- SFT Inference at step 0 ---").metrics == {}
    log = tmp_path / "training_log.txt"
    log.write_text("SFT step 0: train loss 6.8173, val loss 10.9098\n\n--- SFT Inference at step 0 ---\n"
                   "SFT step 50: train loss 1.4398, val loss 6.1116\n")
    assert set(_frame(log)["tag"]) == {"train loss", "val loss"}


# A Logger table (bearpaw's `Logger`: names apart by tabs, then one row of values per append, no step column) whose
# names begin with a count (`2d_loss`, `3d_loss`); its first rows and its last two.
# source: lyuheng/unsupervised_3d_pose@2ae5c90aa099f6d2052efeffb0ce858494ca3491:checkpoints/log.txt
_DIGIT_NAMES_TABLE = (
    "2d_loss   \t3d_loss   \tadv_loss   \ttemporal_loss   \t\n"
    "6.044518\t7.064738\t1.806704\t4.053606\t\n"
    "6.132456\t7.090755\t1.862426\t6.002899\t\n"
    "5.942394\t6.765058\t2.276356\t7.492224\t\n"
    "0.143662\t0.238047\t3.197078\t3.217911\t\n"
    "0.157853\t0.212473\t3.524785\t3.067791\t\n"
)


def test_a_header_whose_names_begin_with_a_count_names_the_rows_below(tmp_path):
    log = tmp_path / "log.txt"
    log.write_text(_DIGIT_NAMES_TABLE)
    chunks = list(read_console(log))
    frame = pl.concat([c.scalars for c in chunks if c.scalars is not None])
    first = frame.filter(pl.col("tag") == "2d_loss").sort("position")
    assert first["value"].to_list() == [6.044518, 6.132456, 5.942394, 0.143662, 0.157853]
    assert first["ordinal"].all() and role_of("2d_loss").role == "train_loss"
    assert frame.filter(pl.col("tag") == "temporal_loss")["value"].to_list()[-1] == 3.067791
    assert not [i for c in chunks for i in c.issues if i.kind == "unmatched_lines"]  # the header is no unread line


def test_a_split_standing_as_a_field_between_bars_names_the_lines_values():
    # Mozilla DeepSpeech's epoch lines: the split is a field of its own; a value after a bar names a key instead
    train = parse_line("Epoch 0 |   Training | Elapsed Time: 0:45:15 | Steps: 3533 | Loss: 6.246435")
    val = parse_line("Epoch 0 | Validation | Elapsed Time: 0:00:11 | Steps: 31 | Loss: 12.449680 | Dataset: dev.csv")
    assert role_of(next(k for k in train.metrics if "Loss" in k)).role == "train_loss"
    assert role_of(next(k for k in val.metrics if "Loss" in k)).role == "val_loss", val.metrics
    assert parse_line("loss|0.3|val|0.2").metrics.get("val") == 0.2


def test_a_name_qualified_in_parentheses_is_a_key(tmp_path):
    """A hand-written print through Python's logging that puts the split after the name (`Loss(train): 6.551672,
    Loss(val): 6.492640`) logs a training and a validation loss; a call's argument (`f(x) = 1`) is no name."""
    log = log_messages(tmp_path / "train_log.log", [
        f"[Prompt]Epoch:{s // 5000}, Current step: {s}, Loss(train): {6.5 / (1 + s / 4000):.6f}, "
        f"Loss(val): {6.4 / (1 + s / 5000):.6f}, alpha:0.030000" for s in range(1000, 21000, 1000)],
        "%(asctime)s - %(filename)s:%(lineno)d - %(name)s - %(message)s")
    frame = pl.concat([c.scalars for c in read_console(log) if c.scalars is not None])
    train = frame.filter(pl.col("tag") == "Loss(train)")
    assert train["step"].to_list() == list(range(1000, 21000, 1000)) and train["value"][0] == 5.2
    assert frame.filter(pl.col("tag") == "Loss(val)").height == 20
    assert role_of("Loss(train)").role == "train_loss" and role_of("Loss(val)").role == "val_loss"
    assert dict(parse_line("f(x) = 1").metrics) == {}
