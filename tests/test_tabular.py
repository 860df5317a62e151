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
