"""Plain CSV / JSONL / Parquet metric logs: step, time, epoch columns; damage; resume."""

import csv
import json
import math
from pathlib import PurePosixPath

import polars as pl
import pytest

from tests.paths import REAL_RUNS

from ingest.formats import format_for
from ingest.tabular import read_csv, read_jsonl, read_parquet


def _write_history_csv(path, rows, fields):
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def test_csv_with_step_and_unix_time(tmp_path):
    path = tmp_path / "history.csv"
    rows = [{"global_step": 10 * i, "loss": 1 / (i + 1) if i < 3 else float("nan"), "timestamp": 1.7e9 + i,
             "phase": "train"} for i in range(5)]
    _write_history_csv(path, rows, ["global_step", "loss", "timestamp", "phase"])
    [chunk] = list(read_csv(path, 0))
    frame = chunk.scalars
    assert frame["tag"].unique().to_list() == ["loss"]  # timestamp -> wall_time; text column skipped
    assert frame["step"].to_list() == [0, 10, 20, 30, 40] and not frame["ordinal"].any()
    assert math.isnan(frame["value"][3]) and frame["wall_time"][1] == 1.7e9 + 1
    assert frame["position"].to_list() == [2, 3, 4, 5, 6]


def test_csv_without_step_is_ordinal_and_durations_stay_series(tmp_path):
    path = tmp_path / "log.csv"
    _write_history_csv(path, [{"epoch": e, "loss": 0.5, "time": 12.5} for e in range(3)], ["epoch", "loss", "time"])
    [chunk] = list(read_csv(path, 0))
    frame = chunk.scalars
    assert frame.filter(frame["tag"] == "loss")["step"].to_list() == [0, 1, 2] and frame["ordinal"].all()
    assert set(frame["tag"].to_list()) == {"epoch", "loss", "time"}  # epoch stays a series, time is a duration
    assert frame.filter(frame["tag"] == "loss")["epoch"].to_list() == [0, 1, 2]
    assert frame["wall_time"].null_count() == frame.height


def test_csv_resume_and_partial_last_line(tmp_path):
    path = tmp_path / "metrics_log.csv"
    path.write_text("step,loss\n0,1.0\n1,0.9\n")
    [first] = list(read_csv(path, 0))
    with open(path, "a") as f:
        f.write("2,inf\n3,0.")
    [second] = list(read_csv(path, first.end))
    assert second.scalars["step"].to_list() == [2] and second.scalars["value"][0] == math.inf
    assert second.scalars["position"].to_list() == [4]
    assert second.end == path.stat().st_size - len("3,0.")


def test_csv_garbled_middle_line(tmp_path):
    path = tmp_path / "history.csv"
    path.write_text("step,loss,acc\n0,1.0,0.1\n1,0.9\x00\x01,0.2,9,9\n2,0.8,0.3\n\n3,nan,0.4\n")
    [chunk] = list(read_csv(path, 0))
    assert [(i.kind, i.position) for i in chunk.issues] == [("garbled", 3)]
    loss = chunk.scalars.filter(chunk.scalars["tag"] == "loss")
    assert loss["step"].to_list() == [0, 2, 3] and math.isnan(loss["value"][2])


def test_jsonl_nan_tokens_nested_and_garbled(tmp_path):
    path = tmp_path / "metrics.jsonl"
    records = [{"_step": i, "train": {"loss": 1.0 / (i + 1)}, "_timestamp": 1.7e9 + i, "note": "x"} for i in range(3)]
    records[2]["train"]["loss"] = float("inf")
    lines = [json.dumps(r) for r in records]  # Python's json writes Infinity / NaN tokens
    lines.insert(1, '{"_step": 5, "train": {"lo')
    path.write_text("\n".join(lines) + "\n")
    [chunk] = list(read_jsonl(path, 0))
    assert [(i.kind, i.position) for i in chunk.issues] == [("garbled", 2)]
    frame = chunk.scalars
    assert frame["tag"].unique().to_list() == ["train/loss"]
    assert frame["step"].to_list() == [0, 1, 2] and frame["value"][2] == math.inf
    assert frame["wall_time"][0] == 1.7e9


def test_parquet_rows_and_resume(tmp_path):
    path = tmp_path / "history.parquet"
    pl.DataFrame({"step": [0, 1, 2], "loss": [1.0, float("nan"), 0.5], "flag": [True, False, True]}).write_parquet(path)
    [chunk] = list(read_parquet(path, 0))
    assert chunk.scalars["tag"].unique().to_list() == ["loss"] and chunk.end == 3
    assert math.isnan(chunk.scalars["value"][1])
    [again] = list(read_parquet(path, 2))
    assert again.scalars["step"].to_list() == [2]


@pytest.mark.parametrize("reader,name,content", [
    (read_csv, "log.csv", b""), (read_jsonl, "m.jsonl", b""), (read_parquet, "h.parquet", b"not parquet"),
])
def test_empty_or_junk_is_an_issue(tmp_path, reader, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    chunks = list(reader(path, 0))
    assert chunks[0].issues and (chunks[0].scalars is None or chunks[0].scalars.height == 0)


@pytest.mark.needs_shared
def test_real_lightning_file_reads_as_plain_csv_too():
    [chunk] = list(read_csv(REAL_RUNS / "pl_slm_v7" / "metrics.csv", 0))
    assert chunk.scalars.filter(chunk.scalars["tag"] == "train_loss_step").height == 220


@pytest.mark.parametrize("rel,name", [
    ("logs/history.csv", "csv"), ("metrics.jsonl", "jsonl"), ("out/h.parquet", "parquet"),
    ("wandb_export_2024-01-01.csv", "wandb_export"), ("files/wandb-history.jsonl", "wandb_history"), ("version_0/metrics.csv", "lightning_csv"),
])
def test_format_table(rel, name):
    fmt = format_for(PurePosixPath(rel))
    assert (fmt.name if fmt else None) == name


# -- rows that do not fit their header: every row that can be aligned is kept, and the read problem says how


def _series(chunk, tag):
    frame = chunk.scalars.filter(chunk.scalars["tag"] == tag)
    return frame["step"].to_list(), frame["value"].to_list()


def test_trailing_separator_on_every_row(tmp_path):
    path = tmp_path / "log.csv"
    with open(path, "w") as f:  # a hand-written logger that ends each field with its separator
        f.write("epoch,loss,acc\n")
        for epoch in range(4):
            f.write(f"{epoch},{1.0 / (epoch + 1)},{0.5 + epoch / 10},\n")
    [chunk] = list(read_csv(path, 0))
    assert _series(chunk, "loss")[1] == [1.0, 0.5, 1 / 3, 0.25]
    assert set(chunk.scalars["tag"].to_list()) == {"epoch", "loss", "acc"}
    assert [(i.kind, i.position) for i in chunk.issues] == [("realigned", 2)]
    assert "4 rows (lines 2..5)" in chunk.issues[0].detail


def test_an_empty_field_written_twice_on_every_row_is_dropped(tmp_path):
    """Old Flair's loss.tsv: an empty cell and `_` placeholders written under a header one field shorter, so every
    column after the empty cell would sit one to the right of its name."""
    path = tmp_path / "loss.tsv"
    with open(path, "w") as f:
        f.write("EPOCH\tTIMESTAMP\tTRAIN_LOSS\tTRAIN_F-SCORE\tDEV_LOSS\tDEV_F-SCORE\n")
        for epoch in range(3):
            f.write(f"{epoch}\t11:17:{epoch:02d}\t{0.1 / (epoch + 1)}\t\t_\t{0.2 / (epoch + 1)}\t0.8\n")
    [chunk] = list(read_csv(path, 0))
    assert _series(chunk, "TRAIN_LOSS")[1] == [0.1, 0.05, 0.1 / 3]
    assert _series(chunk, "DEV_LOSS")[1] == [0.2, 0.1, 0.2 / 3]  # not the placeholder, not shifted
    assert _series(chunk, "DEV_F-SCORE")[1] == [0.8] * 3
    assert [i.kind for i in chunk.issues] == ["realigned"] and "field 4 dropped" in chunk.issues[0].detail


def test_a_column_added_mid_run_without_its_name(tmp_path):
    path = tmp_path / "train_log.csv"
    with open(path, "w") as f:
        f.write("step,loss\n")
        for step in range(3):
            f.write(f"{step},{1.0 - step / 10}\n")
        for step in range(3, 5):  # the script began logging a validation loss, the header stayed as it was
            f.write(f"{step},{1.0 - step / 10},{2.0 - step / 10}\n")
    [chunk] = list(read_csv(path, 0))
    assert _series(chunk, "loss") == ([0, 1, 2], pytest.approx([1.0, 0.9, 0.8]))  # under its name where it is known
    assert _series(chunk, "column 2") == ([3, 4], pytest.approx([0.7, 0.6]))  # by position where it is not
    assert _series(chunk, "column 3") == ([3, 4], pytest.approx([1.7, 1.6]))
    assert [(i.kind, i.position) for i in chunk.issues] == [("realigned", 5)]


def test_keras_csvlogger_appending_a_fit_with_more_metrics_reads_no_value_under_another_s_name(tmp_path, monkeypatch):
    """Keras' CSVLogger(append=True) keeps the first fit's header and writes a later fit's keys sorted, so with a
    metric added every field after `epoch` moves: the later rows' fields are read by position, not by the header."""
    monkeypatch.setenv("KERAS_BACKEND", "torch")  # read when keras is first imported; torch is installed
    keras = pytest.importorskip("keras", reason="the test extra installs keras")
    import numpy as np

    x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
    y = (x.sum(1) > 0).astype("float32")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, activation="sigmoid")])
    log = tmp_path / "training.log"
    model.compile("sgd", "binary_crossentropy")
    first = model.fit(x, y, epochs=3, verbose=0, callbacks=[keras.callbacks.CSVLogger(str(log))])
    model.compile("sgd", "binary_crossentropy", metrics=["accuracy"])
    model.fit(x, y, epochs=2, verbose=0, callbacks=[keras.callbacks.CSVLogger(str(log), append=True)])
    assert b",NA" in log.read_bytes()  # what it writes for a key a fit did not log
    # Under the name Keras' documentation gives it (a log's name: read as the CSV it is) and as a .csv.
    path = tmp_path / "training.csv"
    path.write_bytes(log.read_bytes())
    for read in (format_for(PurePosixPath(log.name)).load_reader(), read_csv):
        [chunk] = list(read(log if read is not read_csv else path, 0))
        assert _series(chunk, "loss")[1] == pytest.approx(first.history["loss"])  # no later accuracy among them
        assert set(chunk.scalars["tag"].to_list()) >= {"column 2", "column 3"}
        assert [i.kind for i in chunk.issues] == ["realigned"]


def test_rows_shorter_than_the_header_keep_their_cells(tmp_path):
    path = tmp_path / "history.csv"
    path.write_text("step,loss,val_loss\n0,1.0\n1,0.9,0.8\n2,0.7\n")
    [chunk] = list(read_csv(path, 0))
    assert _series(chunk, "loss") == ([0, 1, 2], [1.0, 0.9, 0.7]) and _series(chunk, "val_loss") == ([1], [0.8])
    assert [i.kind for i in chunk.issues] == ["realigned"] and "not logged" in chunk.issues[0].detail


def test_pandas_appends_a_launch_with_its_header_and_another_column(tmp_path):
    pd = pytest.importorskip("pandas")
    path = tmp_path / "metrics.csv"
    pd.DataFrame({"epoch": [0, 1], "loss": [1.0, 0.8]}).to_csv(path, index=False)
    pd.DataFrame({"epoch": [2, 3], "lr": [0.1, 0.05], "loss": [0.6, 0.5]}).to_csv(path, mode="a", index=False)
    [chunk] = list(read_csv(path, 0))
    assert _series(chunk, "loss")[1] == [1.0, 0.8, 0.6, 0.5]  # read under each header, not shifted
    assert _series(chunk, "lr")[1] == [0.1, 0.05]
    assert [(i.kind, i.position) for i in chunk.issues] == [("realigned", 4)]
    # A later read that starts below the second header reads under it too.
    [first] = list(read_csv(path, 0))
    pd.DataFrame({"epoch": [4], "lr": [0.01], "loss": [0.45]}).to_csv(path, mode="a", index=False, header=False)
    [more] = list(read_csv(path, first.end))
    assert _series(more, "loss")[1] == [0.45] and _series(more, "lr")[1] == [0.01] and not more.issues


def test_a_csv_separated_by_semicolons_or_tabs_is_read_by_its_header(tmp_path):
    pd = pytest.importorskip("pandas")
    history = pd.DataFrame({"epoch": [0, 1, 2], "loss": [1.5, 1.25, 1.0], "val_loss": [1.6, 1.4, 1.3]})
    for sep in (";", "\t"):
        path = tmp_path / "history.csv"
        history.to_csv(path, sep=sep, index=False)
        [chunk] = list(read_csv(path, 0))
        assert _series(chunk, "loss") == ([0, 1, 2], [1.5, 1.25, 1.0]) and not chunk.issues


def test_a_csv_printed_as_a_pipe_table_is_read_by_its_header(tmp_path):
    # NeuralForceField's PrintingHook `log_human_read.csv`: a fixed-width table whose columns are parted by `|`
    # (its first lines, as pasted in github.com/learningmatter-mit/NeuralForceField/issues/5)
    path = tmp_path / "log_human_read.csv"
    path.write_text(
        ' Time|Epoch|Learning rate|Train loss|Validation loss|MAE_energy|MAE_energy_grad|GPU Memory (MB)\n'
        '03:32|    1|    1.000e-03|  101.8518|        33.3223|    1.5607|         4.3254|             53\n'
        '03:39|    2|    1.000e-03|   20.4361|        16.1170|    2.3860|         2.9328|             53\n'
        '03:46|    3|    1.000e-03|   13.9259|        11.0102|    0.8016|         2.4171|             53\n'
    )
    [chunk] = list(read_csv(path, 0))
    assert _series(chunk, "Train loss")[1] == [101.8518, 20.4361, 13.9259]
    assert _series(chunk, "Validation loss")[1] == [33.3223, 16.117, 11.0102]


def test_two_tables_written_in_turn_into_one_file_each_keep_their_names(tmp_path):
    """A logger that dumps two tables into one progress.csv in turn (rllab-style: the iteration's statistics, then
    per-option gate statistics printed as numpy reprs): each row is read under the header of its width."""
    import numpy as np

    path = tmp_path / "progress.csv"
    with open(path, "w", newline="") as f:
        main, gates = csv.writer(f), csv.writer(f)
        main.writerow(["SurrogateLoss", "vf_loss", "AverageReturn"])
        for i in range(4):
            main.writerow([-0.1 / (i + 1), 1.0 + i, 10.0 * i])
            if i == 0:
                gates.writerow(["MeanGateDist", "MaxGateDist"])
            gates.writerow([str(np.array([0.25, 0.75])), str(np.array([0.5, 0.5]))])
    [chunk] = list(read_csv(path, 0))
    assert _series(chunk, "SurrogateLoss")[1] == pytest.approx([-0.1, -0.05, -0.1 / 3, -0.025])
    assert _series(chunk, "AverageReturn")[1] == [0.0, 10.0, 20.0, 30.0]
    assert not [t for t in chunk.scalars["tag"].unique().to_list() if t.startswith("column")]
    assert [(i.kind, i.position) for i in chunk.issues] == [("realigned", 3)]


def test_a_row_of_text_as_wide_as_the_header_is_no_header(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text("model,split,loss\nresnet,train,0.5\nresnet,val,NA\nvit,train,0.25\n")
    [chunk] = list(read_csv(path, 0))
    assert _series(chunk, "loss")[1] == [0.5, 0.25] and not [i for i in chunk.issues if i.kind == "realigned"]


def test_cells_that_say_not_logged_in_words_are_not_logged(tmp_path):
    path = tmp_path / "log.csv"  # Keras' CSVLogger with validation every other epoch writes NA between
    path.write_text("epoch,loss,val_loss\n0,1.0,NA\n1,0.9,0.95\n2,0.8,NA\n3,0.7,0.85\n")
    [chunk] = list(read_csv(path, 0))
    assert _series(chunk, "val_loss") == ([1, 3], [0.95, 0.85]) and not chunk.issues


def test_a_table_written_without_a_header_keeps_its_first_row_and_names_only_what_its_columns_prove(tmp_path):
    # A language model's script appending `step,loss,perplexity,lr` rows with csv.writer and no header row.
    rows = [(s, 10.4 - s * 0.05 - (s % 3) * 0.01, None, s * 1.5e-6) for s in range(12)]
    for name in ("train.csv", "validation.csv"):
        with open(tmp_path / name, "w", newline="") as f:
            csv.writer(f).writerows((s, loss, math.exp(loss), lr) for s, loss, _, lr in rows)
    [chunk] = list(read_csv(tmp_path / "train.csv", 0))
    assert _series(chunk, "loss") == (list(range(12)), [r[1] for r in rows])
    assert set(chunk.scalars["tag"]) == {"loss", "perplexity", "column 4"}  # the lr column says nothing of itself
    [held] = list(read_csv(tmp_path / "validation.csv", 0))
    assert "validation loss" in set(held.scalars["tag"]) and "loss" not in set(held.scalars["tag"])
    # No relation, no name: an epoch and an accuracy in percent are columns, and no loss is invented.
    with open(tmp_path / "progress.csv", "w", newline="") as f:
        csv.writer(f).writerows((e, 40 + e * 0.5) for e in range(1, 30))
    [progress] = list(read_csv(tmp_path / "progress.csv", 0))
    assert set(progress.scalars["tag"]) == {"column 2"} and progress.scalars["step"].to_list() == list(range(1, 30))
    # pandas' `to_csv(index=False)` of a frame with default columns writes their indices as its header.
    pl.DataFrame({"0": [0.5, 0.4], "1": [0.9, 0.8]}).write_csv(tmp_path / "indexed.csv")
    [indexed] = list(read_csv(tmp_path / "indexed.csv", 0))
    assert set(indexed.scalars["tag"]) == {"0", "1"} and indexed.scalars.height == 4


def test_summary_rows_that_name_their_values_are_read_under_those_names(tmp_path):
    # A script's csv.writer writes a row per batch under `epoch,batch,loss,accuracy` and, after each epoch, a
    # summary row whose cells name their values: those are series of their own (the validation loss among them),
    # not a header the batch rows below it would be read under.
    path = tmp_path / "loss_log.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["epoch", "batch", "loss", "accuracy"])
        for epoch in range(1, 4):
            for batch in range(1, 6):
                writer.writerow([epoch, batch, f"{0.7 + batch / 100:.6f}", "0.5000"])
            writer.writerow([f"Epoch {epoch} Summary", f"train_loss={0.72:.6f}", f"val_loss={epoch * 1.5:.6f}",
                             f"val_acc={0.5:.4f}"])
    frame = pl.concat([c.scalars for c in read_csv(path) if c.scalars is not None])
    val = frame.filter(pl.col("tag") == "val_loss").sort("step")
    assert val["value"].to_list() == [1.5, 3.0, 4.5]
    loss = frame.filter(pl.col("tag") == "loss")
    assert loss.height == 15 and loss["value"].max() == pytest.approx(0.75)
    assert frame.filter(pl.col("tag") == "val_loss")["step"].to_list() == [5, 11, 17]  # after each epoch's rows


def test_one_cell_holding_an_equals_sign_is_a_value_not_a_row_of_named_values(tmp_path):
    path = tmp_path / "history.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["step", "loss", "note"])
        for step in range(4):
            writer.writerow([step, 1 / (step + 1), "lr=0.1"])
    frame = pl.concat([c.scalars for c in read_csv(path) if c.scalars is not None])
    assert frame.filter(pl.col("tag") == "loss").height == 4 and "lr" not in frame["tag"].to_list()




# The first rows of a real log whose writer put each loss tensor in a cell as its repr.
# source: Andrew-Linville/UNet-SNGP@9201ca1f912aeb5b6667491283b86d61fbf9c7d7:losses.csv
TENSOR_CELLS = """Epoch,Train_loss,Val_loss
1,"tensor(3.1304, device='cuda:0', grad_fn=<DivBackward0>)","tensor(2.9495, device='cuda:0')"
2,"tensor(3.0639, device='cuda:0', grad_fn=<DivBackward0>)","tensor(2.8784, device='cuda:0')"
3,"tensor(2.9983, device='cuda:0', grad_fn=<DivBackward0>)","tensor(2.8202, device='cuda:0')"
4,"tensor(2.9385, device='cuda:0', grad_fn=<DivBackward0>)","tensor(2.7774, device='cuda:0')"
"""


def test_a_cell_that_is_a_tensor_repr_is_the_number_inside(tmp_path):
    path = tmp_path / "losses.csv"
    path.write_text(TENSOR_CELLS)
    chunks = list(read_csv(path))
    frame = pl.concat([c.scalars for c in chunks if c.scalars is not None])
    assert frame.filter(pl.col("tag") == "Train_loss").sort("step")["value"].to_list() == [3.1304, 3.0639, 2.9983,
                                                                                          2.9385]
    assert frame.filter(pl.col("tag") == "Val_loss")["value"].to_list()[0] == 2.9495
    assert not [i for c in chunks for i in c.issues]


def test_pandas_to_csv_of_tensors_and_numpy_scalars_reads_their_numbers(tmp_path):
    # pandas writes a column of tensors (a GAN's per-epoch losses kept as the tensors themselves) as their reprs;
    # a one-element tensor and NumPy 2's scalar reprs are read alike; a tensor of two elements is no one number.
    torch = pytest.importorskip("torch")
    pd = pytest.importorskip("pandas")
    np = pytest.importorskip("numpy")
    weights = torch.tensor([0.5, -1.0], requires_grad=True)
    losses_g = [torch.nn.functional.binary_cross_entropy_with_logits(weights * k, torch.ones(2)) for k in (1, 2, 3)]
    path = tmp_path / "losses.csv"
    pd.DataFrame({"losses_g": losses_g, "losses_d": [torch.tensor([0.25 * k]) for k in (1, 2, 3)],
                  "val_loss": [repr(np.float32(0.5 * k)) for k in (1, 2, 3)],
                  "probs": [torch.tensor([0.1, 0.9])] * 3}).to_csv(path, index=False)
    assert "grad_fn=<BinaryCrossEntropyWithLogitsBackward0>" in path.read_text()
    assert "np.float32(" in path.read_text()
    chunks = list(read_csv(path))
    frame = pl.concat([c.scalars for c in chunks if c.scalars is not None])
    got = frame.filter(pl.col("tag") == "losses_g").sort("step")["value"].to_list()
    assert got == pytest.approx([float(v) for v in losses_g], rel=1e-4)
    assert frame.filter(pl.col("tag") == "losses_d")["value"].to_list() == [0.25, 0.5, 0.75]
    assert frame.filter(pl.col("tag") == "val_loss")["value"].to_list() == [0.5, 1.0, 1.5]
    assert "probs" not in frame["tag"].to_list()  # two elements: no one number, the column is text


def test_reprs_of_scalars_are_the_numbers_they_stand_for():
    np = pytest.importorskip("numpy")
    from ingest.reprs import cell_float

    assert cell_float(repr(np.float64(-1.5e-3))) == -1.5e-3 and cell_float(repr(np.int64(7))) == 7
    # TensorFlow 2 prints a 0-d tensor as `tf.Tensor(value, shape=(), dtype=...)` (its str) and shows its repr as
    # `<tf.Tensor: shape=(), dtype=float32, numpy=value>`
    assert cell_float("tf.Tensor(0.6202628, shape=(), dtype=float32)") == 0.6202628
    assert cell_float("<tf.Tensor: shape=(), dtype=float32, numpy=0.737>") == 0.737
    assert math.isnan(cell_float("tensor(nan, device='cuda:0', grad_fn=<AddBackward0>)"))
    assert cell_float("tensor([0.1000, 0.9000])") is None and cell_float("0.5") is None


# The first rows of a YOLOv10 results.csv: each loss term (box, cls, dfl) per head (one-to-many `_om`, one-to-one
# `_oo`), no total. source: 4prince8/Object_Detection_Yolov10@32aac5dd8e4e421f2c93f7d772f720338b9764f1:runs/detect/train/results.csv
YOLO_HEADS = """                  epoch,           train/box_om,           train/cls_om,           train/dfl_om,           train/box_oo,           train/cls_oo,           train/dfl_oo,   metrics/precision(B),      metrics/recall(B),       metrics/mAP50(B),    metrics/mAP50-95(B),             val/box_om,             val/cls_om,             val/dfl_om,             val/box_oo,             val/cls_oo,             val/dfl_oo,                 lr/pg0,                 lr/pg1,                 lr/pg2
                      1,                 1.4151,                 2.4813,                 1.5898,                 1.3941,                  5.207,                 1.5542,                0.64904,                0.14344,                0.16351,                0.07372,                 2.2704,                 3.5462,                 2.5393,                 2.3285,                 17.652,                  2.558,             0.00047515,             0.00047515,             0.00047515
                      2,                  1.527,                 2.1288,                 1.6217,                 1.6025,                 2.3555,                  1.619,                0.39031,                0.48379,                0.44189,                0.24197,                   1.52,                  3.846,                 1.6932,                 1.5321,                 3.0197,                 1.6449,             0.00088869,             0.00088869,             0.00088869
                      3,                 1.4794,                 1.9873,                 1.5716,                 1.5512,                 2.2229,                 1.5668,                0.65507,                0.49896,                0.57527,                0.34624,                 1.2591,                 1.7327,                 1.4834,                 1.3533,                 1.8483,                 1.5311,              0.0012393,              0.0012393,              0.0012393
"""


def test_detection_loss_terms_per_head_are_summed_into_the_loss(tmp_path):
    from ingest.roles import role_of

    path = tmp_path / "results.csv"
    path.write_text(YOLO_HEADS)
    frame = pl.concat([c.scalars for c in read_csv(path) if c.scalars is not None])
    train = [t for t in frame["tag"].unique().to_list() if role_of(t).role == "train_loss" and role_of(t).canonical]
    val = [t for t in frame["tag"].unique().to_list() if role_of(t).role == "val_loss" and role_of(t).canonical]
    assert train == ["train/loss (sum of box_om, cls_om, dfl_om, box_oo, cls_oo, dfl_oo)"] and len(val) == 1
    loss = frame.filter(pl.col("tag") == train[0]).sort("step")
    assert loss["value"].to_list() == pytest.approx([13.6415, 10.8545, 10.3792]) and loss["epoch"].to_list() == [1, 2, 3]


def test_head_sums_need_every_term_under_every_head_and_no_other_loss():
    from ingest.tabular import head_sums, loss_sums

    yolo8 = ["train/box_loss", "train/cls_loss", "train/dfl_loss"]
    assert list(loss_sums(yolo8)) == ["train/loss (sum of box_loss, cls_loss, dfl_loss)"]  # as before
    assert head_sums(["train/box_om", "train/cls_om", "train/box_oo"]) == {}  # cls_oo missing: not a grid
    assert head_sums(["box_x", "box_y", "box_w", "box_h", "cls_id"]) == {}  # a box's coordinates and a class id
    assert head_sums(["train/box_om", "train/cls_om", "train/loss"]) == {}  # a total is logged


def test_one_row_of_values_in_a_file_named_for_them_is_a_series_along_the_row(tmp_path):
    """A list of per-epoch losses written as one CSV row after an empty index cell (`,0.72,0.39,...`, no header, no
    line break at the end): one series named by the file, steps the positions. A file whose name says nothing, or a
    row of two values, stays a table's."""
    losses = [0.724270815650622, 0.38909592231114704, 0.3325187216202418, 0.27252347022295, float("nan")]
    path = tmp_path / "losses.csv"
    with path.open("w", newline="") as f:
        csv.writer(f).writerow([""] + losses)
    frame = pl.concat([c.scalars for c in read_csv(path) if c.scalars is not None])
    assert frame["tag"].unique().to_list() == ["losses"] and frame["step"].to_list() == [0, 1, 2, 3, 4]
    assert frame["value"].to_list()[:4] == losses[:4] and math.isnan(frame["value"][4])
    other = tmp_path / "results.csv"
    with other.open("w", newline="") as f:
        csv.writer(f).writerow([""] + losses)
    assert all(c.scalars is None or "results" not in c.scalars["tag"].to_list() for c in read_csv(other))


@pytest.mark.parametrize("agent", [True, False])
def test_an_agents_objective_is_never_summed_into_a_tables_loss(tmp_path, agent):
    """A representation loss trained beside a SAC agent, written with pandas' `to_csv`: `Policy_Loss` is the actor's
    -Q, which falls without bound as Q grows; summed with `MVMAE_Loss` it made a loss that "diverged". No sum then:
    the table's loss is the representation loss. Its twin's two supervised terms are still summed."""
    import numpy as np

    pd = pytest.importorskip("pandas")
    from tests.runwriters import load_run

    n = 200
    first = np.linspace(2.4, 0.15, n)
    second = np.linspace(-5.0, -35.0, n) if agent else np.linspace(0.8, 0.05, n)
    names = ["MVMAE_Loss", "Policy_Loss"] if agent else ["recon_loss", "kl_loss"]
    root = tmp_path / "run"
    root.mkdir()
    pd.DataFrame({names[0]: first, names[1]: second}).to_csv(root / "history.csv")
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.pick("loss") == ("MVMAE_Loss" if agent else "loss (sum of recon_loss, kl_loss)"), run.names()
