"""W&B readers: a real offline run written by wandb itself, damaged copies of it, and the real runs in ../shared."""

from __future__ import annotations

import json
import math
import os
import struct
from pathlib import Path, PurePosixPath

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.formats import format_for
from ingest.records import histograms_frame, scalars_frame
from ingest.wandb import BLOCK, _Framing, _log_records, read_wandb, wandb_group
from ingest.wandb_files import (read_wandb_config, read_wandb_debug_log, read_wandb_export, read_wandb_history,
                                read_wandb_summary)

from tests.paths import REAL_RUNS, SHARED

REAL = REAL_RUNS

RUN_ID = "frnsx01"
CONFIG = {"lr": 0.001, "model": {"layers": 4, "act": "gelu"}, "name": "baseline"}
N_IMPLICIT = 1200  # enough rows for a log of several 32 KiB blocks
LOGGED: list[tuple[int, dict]] = []
REFUSED_STEP = 3500  # logged after step 4000: W&B drops it and says so in logs/debug-internal.log  # (step, the dict given to wandb.log), in order


def _implicit_rows() -> list[dict]:
    rng = np.random.default_rng(0)
    rows = [{"train/loss": float(v), "lr": 1e-3 / (i + 1), "tokens": i * 2**40}
            for i, v in enumerate(rng.standard_normal(N_IMPLICIT) * 3)]
    rows[7]["train/loss"] = 0.1 + 0.2  # not exactly 0.3: checks the round trip bitwise
    rows[8]["train/loss"] = 1e-310  # subnormal
    rows[9]["train/loss"] = float("nan")
    rows[10]["train/loss"] = float("inf")
    rows[11]["train/loss"] = float("-inf")
    rows[12]["grad/norm"] = float("nan")
    rows[13]["nested"] = {"a": 1.5, "b": -2}
    rows[14]["note"] = "a string, not a scalar"
    return rows


@pytest.fixture(scope="module")
def wandb_run(tmp_path_factory) -> Path:
    """One real offline W&B run (wandb.init is slow: one run serves the module). Returns its run folder."""
    wandb = pytest.importorskip("wandb", reason="wandb writes the test runs")
    root = tmp_path_factory.mktemp("wandb_run")
    env = {"WANDB_MODE": "offline", "WANDB_DIR": str(root), "WANDB_SILENT": "true"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        run = wandb.init(project="forensics-test", id=RUN_ID, config=CONFIG)
        LOGGED.clear()
        for i, row in enumerate(_implicit_rows()):
            run.log(row)
            LOGGED.append((i, row))
        hist_step = N_IMPLICIT
        run.log({"weights": wandb.Histogram(np_histogram=([1, 0, 5, 2], [-2.0, -1.0, 0.0, 1.0, 2.0]))})
        LOGGED.append((hist_step, {}))
        # Explicit steps: W&B holds a row until the step changes, so each explicit step is logged once.
        for step, value in ((2000, 0.5), (3000, float("nan")), (4000, 0.25)):
            run.log({"val/loss": value}, step=step)
            LOGGED.append((step, {"val/loss": value}))
        run.log({"val/loss": 0.75}, step=REFUSED_STEP)  # below step 4000: W&B refuses it (not in LOGGED)
        run.finish()
        # finish() can return before wandb's service process has written the last records; teardown()
        # waits for the service to exit, so the file is complete when the tests read it.
        wandb.teardown()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    (folder,) = (root / "wandb").glob(f"offline-run-*-{RUN_ID}")
    return folder


@pytest.fixture(scope="module")
def log_path(wandb_run) -> Path:
    return wandb_run / f"run-{RUN_ID}.wandb"


@pytest.fixture(scope="module")
def full(log_path):
    return _read_all(log_path)


def _read_all(path: Path, start: int = 0):
    chunks = list(read_wandb(path, start))
    scalars = pl.concat([scalars_frame(c.scalars) for c in chunks])
    hists = pl.concat([histograms_frame(c.histograms) for c in chunks])
    issues = [i for c in chunks for i in c.issues]
    configs: dict = {}
    for c in chunks:
        configs.update(c.configs)
    return chunks, scalars, hists, issues, configs


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def _expected_points() -> set[tuple[str, int, bytes]]:
    out = set()
    for step, row in LOGGED:
        for key, value in row.items():
            if isinstance(value, dict):
                for sub, v in value.items():
                    out.add((f"{key}.{sub}", step, _bits(float(v))))
            elif isinstance(value, (int, float)):
                out.add((key, step, _bits(float(value))))
    return out


def test_every_logged_value_is_read_back_bitwise(full):
    _, scalars, _, _, _ = full
    history = scalars.filter(~pl.col("tag").str.starts_with("system/") & (pl.col("tag") != "_runtime"))
    got = {(t, s, _bits(v)) for t, s, v in history.select("tag", "step", "value").iter_rows()}
    assert got == _expected_points()
    assert history.height == len(got)  # no point twice


def test_nonfinite_values_and_steps_are_kept(full):
    _, scalars, _, _, _ = full
    loss = scalars.filter(pl.col("tag") == "train/loss").sort("step")
    values = dict(zip(loss["step"].to_list(), loss["value"].to_list()))
    assert math.isnan(values[9]) and values[10] == math.inf and values[11] == -math.inf
    assert values[7] == 0.1 + 0.2 and values[8] == 1e-310
    val = scalars.filter(pl.col("tag") == "val/loss").sort("step")
    assert val["step"].to_list() == [2000, 3000, 4000]
    assert math.isnan(val["value"][1])
    assert loss["step"].to_list() == list(range(N_IMPLICIT))
    assert loss["wall_time"].null_count() == 0 and loss["wall_time"].is_sorted()
    assert not loss["ordinal"].any()


def test_positions_are_record_offsets_and_end_is_file_end(full, log_path):
    chunks, scalars, _, issues, _ = full
    offsets = {off for off, _, _ in _log_records(log_path.read_bytes(), 0, _Framing())}
    assert set(scalars["position"].to_list()) <= offsets
    assert chunks[-1].end == log_path.stat().st_size
    assert not [i for i in issues if i.kind != "skipped_values"]


def test_histogram_and_non_scalars(full):
    _, scalars, hists, issues, _ = full
    (row,) = hists.filter(pl.col("tag") == "weights").iter_rows(named=True)
    assert row["step"] == N_IMPLICIT
    assert row["bucket_counts"] == [1.0, 0.0, 5.0, 2.0]
    assert row["bucket_limits"] == [-1.0, 0.0, 1.0, 2.0]
    assert (row["min"], row["max"], row["num"]) == (-2.0, 2.0, 8.0)
    assert row["zero_fraction"] == 5 / 8  # numpy's buckets are half-open: 0 falls in [0, 1)
    assert "note" not in scalars["tag"].to_list()
    skipped = [i for i in issues if i.kind == "skipped_values"]
    assert skipped and "str" in skipped[0].detail


def test_config_summary_and_run(full):
    _, _, _, _, configs = full
    assert configs["wandb_config"] == CONFIG
    assert configs["wandb_run"]["run_id"] == RUN_ID
    assert configs["wandb_run"]["project"] == "forensics-test"
    summary = configs["wandb_summary"]
    assert summary["val/loss"] == 0.25 and summary["_step"] == 4000
    assert summary["weights"]["_type"] == "histogram"


def test_system_metrics_are_ordinal_series(full):
    _, scalars, _, _, _ = full
    system = scalars.filter(pl.col("tag").str.starts_with("system/"))
    if system.is_empty():
        pytest.skip("this machine's wandb wrote no system metrics during the short test run")
    assert system["ordinal"].all()


def test_resume_reads_only_what_follows(full, log_path):
    chunks, scalars, _, _, _ = full
    offsets = sorted({off for off, _, _ in _log_records(log_path.read_bytes(), 0, _Framing())})
    middle = offsets[len(offsets) // 2]
    _, later, _, issues, _ = _read_all(log_path, middle)
    assert not [i for i in issues if i.kind != "skipped_values"]
    expected = scalars.filter(pl.col("position") >= middle)
    assert later.sort("position", "tag").select("tag", "step", "position").equals(
        expected.sort("position", "tag").select("tag", "step", "position"))


# -- damage -------------------------------------------------------------------------------------------------


def test_truncated_mid_block_keeps_earlier_history(full, log_path, tmp_path):
    """A crash mid-write: the tail record is cut off; everything before it is kept."""
    _, scalars, _, _, _ = full
    raw = log_path.read_bytes()
    records = list(_log_records(raw, 0, _Framing()))
    off, end, _ = records[len(records) * 2 // 3]
    cut = (off + end) // 2
    damaged = tmp_path / f"run-{RUN_ID}.wandb"
    damaged.write_bytes(raw[:cut])
    chunks, got, _, issues, _ = _read_all(damaged)
    truncated = [i for i in issues if i.kind == "truncated"]
    assert len(truncated) == 1 and truncated[0].position == off
    assert chunks[-1].end == records[len(records) * 2 // 3 - 1][1]
    before = scalars.filter(pl.col("position") < off).sort("position", "tag")
    assert got.sort("position", "tag").select("tag", "step", "position").equals(
        before.select("tag", "step", "position"))


def test_flipped_byte_skips_only_its_block(full, log_path, tmp_path):
    _, scalars, _, _, _ = full
    raw = bytearray(log_path.read_bytes())
    assert len(raw) > 5 * BLOCK, "the fixture run should span several blocks"
    at = 2 * BLOCK + 5000
    raw[at] ^= 0xFF
    damaged = tmp_path / "run-flip.wandb"
    damaged.write_bytes(bytes(raw))
    _, got, _, issues, _ = _read_all(damaged)
    bad = [i for i in issues if i.kind in ("crc_mismatch", "garbled")]
    assert bad and 2 * BLOCK <= bad[0].position < 3 * BLOCK
    key = ["tag", "step", "position"]
    got_keys = set(got.select(key).iter_rows())
    full_keys = set(scalars.select(key).iter_rows())
    assert got_keys < full_keys  # something lost, nothing invented
    lost_positions = {p for _, _, p in full_keys - got_keys}
    assert min(lost_positions) >= BLOCK and max(lost_positions) < 3 * BLOCK  # only records touching block 2
    assert any(p >= 3 * BLOCK for _, _, p in got_keys)  # reading went on after the damage


def test_zero_length_file(tmp_path):
    empty = tmp_path / "run-empty.wandb"
    empty.write_bytes(b"")
    (chunk,) = read_wandb(empty, 0)
    assert [i.kind for i in chunk.issues] == ["empty"] and chunk.scalars is None


def test_not_a_wandb_file(tmp_path):
    other = tmp_path / "run-x.wandb"
    other.write_bytes(b"this is a text file that happens to be named like a W&B log\n" * 10)
    (chunk,) = read_wandb(other, 0)
    assert [i.kind for i in chunk.issues] == ["not_this_format"]


def test_header_only_file_has_nothing(tmp_path, log_path):
    head = tmp_path / "run-head.wandb"
    head.write_bytes(log_path.read_bytes()[:7])
    assert list(read_wandb(head, 0)) == []


@pytest.fixture(scope="module")
def fuzz_seed() -> bytes:
    return (REAL / "wandb_vqvae" / "run-6uznqj8h.wandb").read_bytes()[: 2 * BLOCK + 3000]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(cut=st.integers(min_value=0, max_value=2 * BLOCK + 3000),
       flips=st.lists(st.tuples(st.integers(min_value=0, max_value=2 * BLOCK + 2999), st.integers(1, 255)),
                      max_size=6),
       junk=st.binary(max_size=200))
@pytest.mark.needs_shared
def test_fuzzed_logs_never_raise(tmp_path_factory, fuzz_seed, cut, flips, junk):
    data = bytearray(fuzz_seed)
    for at, x in flips:
        data[at] ^= x
    data = bytes(data[:cut]) + junk
    path = tmp_path_factory.mktemp("fuzz") / "run-fuzz.wandb"
    path.write_bytes(data)
    chunks = list(read_wandb(path, 0))
    for c in chunks:
        assert 0 <= c.end <= len(data)
        if c.scalars is not None:
            scalars_frame(c.scalars)
            assert c.scalars["position"].max() < len(data)


# -- the real runs ------------------------------------------------------------------------------------------


@pytest.mark.needs_shared
def test_real_vqvae_run():
    path = REAL / "wandb_vqvae" / "run-6uznqj8h.wandb"
    chunks, scalars, _, issues, configs = _read_all(path)
    assert not [i for i in issues if i.kind not in ("skipped_values",)]
    loss = scalars.filter(pl.col("tag") == "train_loss").sort("step")
    assert loss["step"].to_list() == list(range(158))
    # The run's own wandb-summary.json holds the last logged values: they must match the log's last row.
    summary = json.loads((REAL / "wandb_vqvae" / "wandb-summary.json").read_text())
    assert loss["value"][-1] == summary["train_loss"]
    assert configs["wandb_config"]["batch_size"] == 64
    assert configs["wandb_summary"]["train_loss"] == summary["train_loss"]
    assert chunks[-1].end == path.stat().st_size


@pytest.mark.needs_shared
def test_real_gpt_baseline_run():
    path = REAL / "wandb_gpt_baseline" / "run-xan8n35e.wandb"
    _, scalars, _, issues, configs = _read_all(path)
    assert not [i for i in issues if i.kind not in ("skipped_values",)]
    tags = set(scalars["tag"].to_list())
    assert {"train/loss", "val/loss", "val/bpb", "train/lr_matrix"} <= tags
    val = scalars.filter(pl.col("tag") == "val/loss").sort("step")
    assert val["step"][0] == 0 and val["value"][0] == 429.50817099487966
    assert configs["wandb_run"]["run_id"] == "xan8n35e"
    assert "_wandb" not in configs["wandb_config"]


@pytest.mark.needs_shared
def test_real_summary_json():
    (chunk,) = read_wandb_summary(REAL / "wandb_vqvae" / "wandb-summary.json", 0)
    assert chunk.configs["wandb_summary"]["_step"] == 157


# -- older run files, the UI export, and the format table ---------------------------------------------------


def test_config_yaml_written_by_wandb(tmp_path, log_path):
    """config.yaml as wandb's own config_util writes it from the run's ConfigRecord (`key: {desc, value}`)."""
    from wandb.proto import wandb_internal_pb2 as pb
    from wandb.sdk.lib import config_util

    record = pb.Record()
    for _, _, payload in _log_records(log_path.read_bytes(), 0, _Framing()):
        record.ParseFromString(payload)
        if record.WhichOneof("record_type") == "run":
            break
    path = tmp_path / "config.yaml"
    config_util.save_config_file_from_dict(str(path), config_util.dict_from_proto_list(record.run.config.update))
    (chunk,) = read_wandb_config(path, 0)
    assert chunk.configs["wandb_config"] == CONFIG


def test_history_jsonl_written_by_wandb(tmp_path):
    """wandb-history.jsonl rows serialised with wandb's own json_dumps_safer_history, as older runs wrote them."""
    from wandb import util

    rows = [{"_step": i, "_timestamp": 1.7e9 + i, "_runtime": 0.5 * i, "loss": v}
            for i, v in enumerate([2.0, float("nan"), float("inf"), 0.1 + 0.2])]
    rows[1]["hist"] = {"_type": "histogram", "values": [1, 2], "bins": [0.0, 0.5, 1.0]}
    lines = [util.json_dumps_safer_history(r) for r in rows]
    path = tmp_path / "wandb-history.jsonl"
    path.write_text("\n".join(lines[:3]) + "\n" + lines[3][:10])  # last line still being written
    (chunk,) = read_wandb_history(path, 0)
    loss = chunk.scalars.filter(pl.col("tag") == "loss").sort("step")
    assert loss["step"].to_list() == [0, 1, 2]
    assert loss["value"][0] == 2.0 and math.isnan(loss["value"][1]) and loss["value"][2] == math.inf
    assert chunk.histograms["bucket_counts"].to_list() == [[1.0, 2.0]]
    assert chunk.end == len("\n".join(lines[:3]) + "\n")
    path.write_text("\n".join(lines) + "\n")
    (rest,) = read_wandb_history(path, chunk.end)
    assert rest.scalars.filter(pl.col("tag") == "loss")["value"].to_list() == [0.1 + 0.2]


def test_ui_export_csv(tmp_path):
    path = tmp_path / "wandb_export_2025-03-15T17_09_08.csv"
    path.write_text('"Step","vqvae-1 - train_loss","vqvae-1 - train_loss__MIN","vqvae-1 - train_loss__MAX"\n'
                    '"0","1.07","1.07","1.07"\n"10","0.5","0.4","NaN"\n"20","","",""\n')
    (chunk,) = read_wandb_export(path, 0)
    frame = chunk.scalars.sort("step", "tag")
    assert set(frame["tag"].to_list()) == {"train_loss", "train_loss__MIN", "train_loss__MAX"}
    assert frame.filter(pl.col("tag") == "train_loss")["step"].to_list() == [0, 10]
    assert math.isnan(frame.filter((pl.col("tag") == "train_loss__MAX") & (pl.col("step") == 10))["value"][0])
    assert format_for(PurePosixPath("exports") / path.name).name == "wandb_export"


@pytest.mark.parametrize(("rel", "fmt", "group"), [
    ("wandb/run-20250315_170908-6uznqj8h/run-6uznqj8h.wandb", "wandb", "wandb/6uznqj8h"),
    ("wandb/offline-run-20250315_170908-6uznqj8h/files/wandb-history.jsonl", "wandb_history", "wandb/6uznqj8h"),
    ("wandb/offline-run-20250315_170908-6uznqj8h/files/wandb-summary.json", "wandb_summary", "wandb/6uznqj8h"),
    ("wandb/offline-run-20250315_170908-6uznqj8h/files/config.yaml", "wandb_config", "wandb/6uznqj8h"),
    ("wandb/offline-run-20250315_170908-6uznqj8h/logs/debug-internal.log", "wandb_debug", "wandb/6uznqj8h"),
    ("wandb_vqvae/run-6uznqj8h.wandb", "wandb", "wandb/6uznqj8h"),
    ("config.yaml", "config", None),
])
def test_format_table_claims(rel, fmt, group):
    f = format_for(PurePosixPath(rel))
    assert f is not None and f.name == fmt
    if group is not None:
        assert f.group(PurePosixPath(rel)) == group == wandb_group(PurePosixPath(rel))


def test_debug_log_gives_the_refused_steps_only(wandb_run, tmp_path):
    """wandb-core's own debug log: the record logged below the reached step is the one point read; a copy cut
    mid-line keeps what came before and leaves the partial line for the next read."""
    log = wandb_run / "logs" / "debug-internal.log"
    [chunk] = read_wandb_debug_log(log)
    assert chunk.end == log.stat().st_size
    got = scalars_frame(chunk.scalars)
    assert got["tag"].to_list() == ["wandb/dropped_history_step"]
    assert got["step"].to_list() == [REFUSED_STEP] and got["value"].to_list() == [4000.0]
    assert got["wall_time"][0] > 1.7e9
    raw = log.read_bytes()
    at = raw.index(b"ignoring partial history record")
    cut = tmp_path / "debug-internal.log"
    cut.write_bytes(raw[:at])
    [part] = read_wandb_debug_log(cut)
    assert part.scalars is None and part.end == raw.rfind(b"\n", 0, at) + 1
    cut.write_bytes(raw)
    [rest] = read_wandb_debug_log(cut, part.end)
    assert rest.issues == []
    assert scalars_frame(rest.scalars)["step"].to_list() == [REFUSED_STEP]
    assert format_for(PurePosixPath("wandb/debug-internal.log")) is None  # wandb/'s link to the latest run's log
    line_end = raw.index(b"\n", at) + 1
    line_start = raw.rfind(b"\n", 0, at) + 1
    cut.write_bytes(raw[:line_start] + raw[line_start:line_end - 12] + b"\n" + raw[line_end:])  # a torn line
    [torn] = read_wandb_debug_log(cut)
    assert torn.scalars is None and [(i.position, i.kind) for i in torn.issues] == [(line_start, "garbled")]


def test_output_log_is_not_claimed():
    assert format_for(PurePosixPath("wandb/run-20250315_170908-6uznqj8h/files/output.log")) is None or \
        format_for(PurePosixPath("wandb/run-20250315_170908-6uznqj8h/files/output.log")).name != "wandb"


def test_copied_log_is_found_by_sniffing(tmp_path, log_path):
    head = log_path.read_bytes()[:4096]
    f = format_for(PurePosixPath("renamed.bin"), head=lambda: head)
    assert f is not None and f.name == "wandb"


def test_real_writer_framing_reproduced(log_path):
    """The benchmark's writer re-frames the real log's payloads into the very same bytes."""
    from benchmarks.bench_ingest_wandb import frame_records

    raw = log_path.read_bytes()
    payloads = [p for _, _, p in _log_records(raw, 0, _Framing())]
    assert frame_records(payloads) == raw



# -- the compiled core against the pure-Python walk ---------------------------------------------------------
# `read_wandb(..., compiled=False)` is the reference: the compiled core must give the same chunks, point for
# point (values bitwise), issue for issue (words included), with the same ends and configs.


def _snapshot(chunks) -> list[tuple]:
    out = []
    for c in chunks:
        s = c.scalars
        rows = None
        if s is not None:
            bits = {c: s[c].fill_null(0.0).to_numpy().view(np.int64).tolist() for c in ("value", "wall_time")}
            rows = (s.columns, [str(d) for d in s.dtypes], s.select("tag", "step", "position").rows(),
                    s["wall_time"].is_null().to_list(), bits)  # floats bitwise: NaN == NaN, -0.0 != 0.0
        hists = None if c.histograms is None else repr(c.histograms.rows())
        out.append((c.end, rows, hists, [(i.position, i.kind, i.detail) for i in c.issues], repr(c.configs)))
    return out


def _assert_same(path: Path, start: int = 0) -> list:
    fast = list(read_wandb(path, start))
    slow = list(read_wandb(path, start, compiled=False))
    a, b = _snapshot(fast), _snapshot(slow)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x == y
    return fast


def test_compiled_core_is_built():
    from ingest import wandb as module

    assert module._wandblog is not None, "ingest._wandblog is not built: run `python setup.py build_ext --inplace`"


def test_compiled_matches_python_on_the_real_writer(log_path):
    chunks = _assert_same(log_path)
    assert sum(c.scalars.height for c in chunks if c.scalars is not None) > 3 * N_IMPLICIT
    offsets = sorted({off for off, _, _ in _log_records(log_path.read_bytes(), 0, _Framing())})
    for at in (offsets[1], offsets[len(offsets) // 3], offsets[-2]):
        _assert_same(log_path, at)


@pytest.mark.parametrize("name", ["wandb_vqvae/run-6uznqj8h.wandb", "wandb_gpt_baseline/run-xan8n35e.wandb"])
@pytest.mark.needs_shared
def test_compiled_matches_python_on_real_runs(name):
    _assert_same(REAL / name)


def test_compiled_matches_python_across_chunk_boundaries(log_path, monkeypatch):
    import ingest.wandb as module

    monkeypatch.setattr(module, "SCALARS_PER_CHUNK", 37)
    chunks = _assert_same(log_path)
    assert len(chunks) > 50


def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, body: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(body)) + body


def _item(key: bytes, value: bytes | None, *, as_key: bool = False) -> bytes:
    """A HistoryItem / SummaryItem by hand, so that keys may be bytes protobuf's Python API refuses."""
    return _field(1 if as_key else 2, key) + (b"" if value is None else _field(16, value))


def _history(items: list[bytes], step: int | None = None) -> bytes:
    body = b"".join(_field(1, i) for i in items)
    if step is not None:
        body += _field(2, b"\x08" + _varint(step))
    return b"\x08\x05" + _field(2, body)  # num = 5, history


# value_json texts as W&B could write them, and some it would not: each either parsed by the core exactly as
# Python parses it, or the record handed to Python.
TRICKY_VALUES = [
    "0.30000000000000004", "1e-310", "5e-324", "2.2250738585072011e-308", "-0", "-0.0", "0", "1e400", "-1e400",
    "1e-400", "NaN", "Infinity", "-Infinity", "9007199254740993", "9007199254740995", "123456789012345678",
    "1234567890123456789", "123456789012345678901234567890", "1E5", "1e+5", "-1.5E-5", "1.7976931348623157e308",
    "1.7976931348623159e308", "0.1", "100", "1e23", "8.98846567431158e307", "3.141592653589793238462643383279",
    "1700000000.1234567", "01", "1.", ".5", "+1", " 1.5", "1.5 ", "nan", "inf", "-NaN", "true", "null", '"x"',
    "[1, 2]", '{"a": 1}', "1_000", "0x10", "", "1e", "-", "\u0661",
]


def _adversarial_log(path: Path) -> None:
    """A log of history and summary records built to stress the core: tricky numbers, odd keys and steps,
    records split over blocks, summary removes, and the records only Python reads, in between."""
    from benchmarks.bench_ingest_wandb import frame_records
    from wandb.proto import wandb_internal_pb2 as pb

    rng = np.random.default_rng(7)
    payloads = []
    run = pb.Record()
    run.run.run_id, run.run.starting_step = "adv01", 3
    payloads.append(run.SerializeToString())
    for i, vj in enumerate(TRICKY_VALUES):
        payloads.append(_history([_item(b"a", vj.encode()), _item(b"_timestamp", b"1.7e9"),
                                  _item(b"_step", str(i).encode())]))
        payloads.append(b"\x08\x06" + _field(3, _field(1, _item(b"a", vj.encode()))))
    randoms = [json.dumps(float(v)) for v in rng.standard_normal(300) * np.logspace(-300, 300, 300)]
    steps = [None, "7", "-1", "007", "1.0", "1e3", " 8", "99999999999999999999", "-0"]
    stamps = [None, "-0", "NaN", "1e400", "abc", "1.5"]
    keys = [b"loss", b"\xce\xbb/lr", b"", b"\xff\xfe", b"\xed\xa0\x80", b"\xc0\xaf", b"_runtime", b"_step"]
    for i, vj in enumerate(randoms):
        items = [_item(b"loss", vj.encode()), _item(b"acc", randoms[-i].encode(), as_key=i % 5 == 0)]
        if i % 7 == 0:
            items.append(_item(keys[i % len(keys)], vj.encode()))
        step, stamp = steps[i % len(steps)], stamps[i % len(stamps)]
        if step is not None:
            items.append(_item(b"_step", step.encode()))
        if stamp is not None:
            items.append(_item(b"_timestamp", stamp.encode()))
        if i % 11 == 0:
            items.append(_field(2, b"nested") + _field(2, b"deep") + _field(16, b"1.5"))  # a two-part key
        if i % 13 == 0:
            items.append(_item(b"typed", None) + b"\x31" + struct.pack("<d", 2.5))  # typed `number` value
        payloads.append(_history(items, step=100 + i if i % 3 == 0 else None))
        summary = b"".join(_field(1, _item(k, vj.encode())) for k in (b"loss", b"acc"))
        if i % 17 == 0:
            summary += _field(2, _item(b"acc", None))  # a remove
        payloads.append(b"\x08\x07" + _field(3, summary))
        if i % 19 == 0:
            cfg = pb.Record()
            cfg.config.update.add(key="lr", value_json=vj)
            payloads.append(cfg.SerializeToString())
        if i % 23 == 0:  # a record split over several blocks
            big = [_item(f"k{j}".encode(), randoms[j % len(randoms)].encode()) for j in range(3000)]
            payloads.append(_history(big + [_item(b"_step", str(10_000 + i).encode())]))
            payloads.append(b"\x08\x07" + _field(3, b"".join(_field(1, x) for x in big[:2000])))
    path.write_bytes(frame_records(payloads))


@pytest.fixture(scope="module")
def adversarial_log(tmp_path_factory) -> Path:
    pytest.importorskip("wandb", reason="wandb's protobufs build the log")
    path = tmp_path_factory.mktemp("adv") / "run-adv01.wandb"
    _adversarial_log(path)
    return path


def test_compiled_matches_python_on_adversarial_values(adversarial_log):
    chunks = _assert_same(adversarial_log)
    frame = pl.concat([c.scalars for c in chunks if c.scalars is not None])
    a = frame.filter(pl.col("tag") == "a")
    got = {s: v for s, v in zip(a["step"].to_list(), a["value"].to_list())}
    for i, text in enumerate(TRICKY_VALUES):  # and both agree with Python's own reading of the text
        try:
            want = json.loads(text)
        except ValueError:
            want = None
        if type(want) in (int, float):
            assert _bits(got[i]) == _bits(float(want)), text
        else:
            assert i not in got, text
    assert len(adversarial_log.read_bytes()) > 4 * BLOCK


@pytest.fixture(scope="module")
def adversarial_payloads(adversarial_log) -> list[bytes]:
    return [p for _, _, p in _log_records(adversarial_log.read_bytes(), 0, _Framing())]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(picks=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 255),
                                st.sampled_from(["flip", "insert", "delete", "truncate"])), min_size=1, max_size=8))
def test_compiled_matches_python_on_mutated_records(tmp_path_factory, adversarial_payloads, picks):
    """Records whose CRCs check out but whose protobuf is mangled: the core takes in exactly what it fully
    understands, and protobuf decides the rest (garbled or not) as in the Python walk."""
    from benchmarks.bench_ingest_wandb import frame_records

    payloads = list(adversarial_payloads[:80])
    for which, at, byte, how in picks:
        i = which % len(payloads)
        p = bytearray(payloads[i])
        k = at % (len(p) + 1)
        if how == "flip" and p:
            p[k % len(p)] ^= byte or 1
        elif how == "insert":
            p[k:k] = bytes([byte])
        elif how == "delete":
            del p[k:k + 1 + byte % 3]
        else:
            del p[k:]
        payloads[i] = bytes(p)
    path = tmp_path_factory.mktemp("mut") / "run-mut.wandb"
    path.write_bytes(frame_records(payloads))
    _assert_same(path)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(cut=st.integers(min_value=0, max_value=6 * BLOCK),
       flips=st.lists(st.tuples(st.integers(min_value=0, max_value=6 * BLOCK - 1), st.integers(1, 255)),
                      max_size=6),
       junk=st.binary(max_size=200),
       start_at=st.integers(0, 6 * BLOCK))
def test_compiled_matches_python_on_damaged_files(tmp_path_factory, adversarial_log, cut, flips, junk, start_at):
    """Damaged framing (flipped bytes, cut tails, junk appended), read from the start and from a later byte."""
    data = bytearray(adversarial_log.read_bytes()[: 6 * BLOCK])
    for at, x in flips:
        data[at] ^= x
    data = bytes(data[:cut]) + junk
    path = tmp_path_factory.mktemp("dmg") / "run-dmg.wandb"
    path.write_bytes(data)
    _assert_same(path)
    starts = [off for off, _, _ in _log_records(data, 0, _Framing())]
    if starts:
        _assert_same(path, starts[start_at % len(starts)])


@pytest.mark.needs_shared
def test_rewritten_summary_json_is_read_again(tmp_path):
    """wandb-summary.json is rewritten whole as a run goes on: a changed file replaces its values (the W&B
    text readers now read documents as every config is read, ignoring the resume position)."""
    import json

    from forensics.cli import main

    run = tmp_path / "run"
    run.mkdir()
    doc = json.loads((REAL / "wandb_vqvae" / "wandb-summary.json").read_text())
    (run / "wandb-summary.json").write_text(json.dumps(doc))
    db = tmp_path / "f.duckdb"
    assert main(["ingest", str(run), "--db", str(db), "--quiet"]) == 0
    doc["_step"] = 123456789
    (run / "wandb-summary.json").write_text(json.dumps(doc, indent=1))
    assert main(["ingest", str(run), "--db", str(db), "--quiet"]) == 0
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT value_num FROM configs WHERE name = 'wandb_summary' AND key = '_step'").fetchall() \
        == [(123456789,)]
    con.close()


def test_missing_compiled_core_is_a_one_line_error_naming_the_build(log_path, monkeypatch):
    """Both compiled cores are part of the build (docs/wandb.md): no silent fall back to the slow walk."""
    import ingest.wandb as module
    from ingest.errors import MissingDependency

    monkeypatch.setattr(module, "_wandblog", None)
    monkeypatch.setattr(module, "_IMPORT_ERROR", "No module named 'ingest._wandblog'", raising=False)
    with pytest.raises(MissingDependency, match="pip install -e"):
        list(read_wandb(log_path, 0))
    assert list(read_wandb(log_path, 0, compiled=False))  # the reference walk still reads it


def test_overlong_step_varint_reads_as_protobuf_reads_it(tmp_path):
    """ingest/_wire.h: one varint rule for both cores, protobuf's. The W&B core used to refuse a 10th byte
    above 1 (and handed the record to Python); both paths must give protobuf's reading of it."""
    from benchmarks.bench_ingest_wandb import frame_records

    over = bytes([0xFF] * 9 + [0x02])  # 2**63 - 1, with a stray bit past the 64th
    payloads = [b"\x08\x05" + _field(2, _field(1, _item(b"loss", b"1.5")) + _field(2, b"\x08" + over))]
    path = tmp_path / "run-over01.wandb"
    path.write_bytes(frame_records(payloads))
    chunks = _assert_same(path)
    frame = pl.concat([c.scalars for c in chunks if c.scalars is not None])
    assert frame.filter(pl.col("tag") == "loss")["step"].to_list() == [2**63 - 1]


def test_wandbs_own_link_to_its_service_log_is_no_read_problem_but_other_outside_links_are(wandb_run, tmp_path):
    import shutil

    from ingest.run import walk

    link = wandb_run / "logs" / "debug-core.log"
    assert link.is_symlink() and not link.resolve().is_relative_to(wandb_run.resolve())  # wandb's, into its cache
    run = tmp_path / wandb_run.name
    shutil.copytree(wandb_run, run, symlinks=True)
    outside = tmp_path / "elsewhere.log"
    outside.write_text("step 1 loss 0.5\n")
    (run / "outside.log").symlink_to(outside)
    skipped = []
    files = walk(run.resolve(), skipped)
    assert [p for p, _ in skipped] == ["outside.log"]
    assert PurePosixPath("logs/debug-core.log") not in files


def test_analysing_a_wandb_run_leaves_nothing_in_the_temp_folder(tmp_path):
    """Every analysis of a W&B run left two empty folders, tmp*wandb-artifacts and tmp*wandb-media, in the system
    temp folder: `import wandb` (run to reach its protobufs) makes them for its uploads, and the CLI's end, which
    skips the interpreter's teardown, never removed them. The real CLI, with a temp folder of its own: nothing
    is left there, and the run's history was read."""
    import shutil
    import subprocess
    import sys

    from tests.paths import REPO

    run = tmp_path / "runs" / "val_noise_tiny_val"
    shutil.copytree(REPO / "sample_runs" / "runs" / "val_noise_tiny_val", run, symlinks=True)
    scratch, store = tmp_path / "tmp", tmp_path / "store"
    scratch.mkdir()
    store.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(scratch), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "forensics", "analyze", str(run), "--db", str(store / "f.duckdb"),
                           "--json"], capture_output=True, text=True, env=env, timeout=300, cwd=REPO)
    assert proc.returncode in (0, 1), proc.stderr
    assert json.loads(proc.stdout)["findings"] is not None
    assert sorted(p.name for p in scratch.iterdir()) == []
    from ingest.store import connect
    with connect(store / "f.duckdb", write=False) as con:
        formats = {f for (f,) in con.execute("SELECT DISTINCT format FROM sources WHERE n_points > 0").fetchall()}
    assert "wandb" in formats


@pytest.mark.needs_shared
def test_a_summary_kept_without_its_history_gives_its_last_values_as_points():
    """A run folder kept with only `files/` (summary, config, console; Keras' WandbCallback): the summary's numbers
    are the run's last values, at its `_step`. Beside the history (`run-*.wandb` above `files/`) they are no points:
    they would repeat its last ones."""
    summary = SHARED / "wild" / "structured" / "m022_wandb" / "files" / "wandb-summary.json"
    [alone] = list(read_wandb_summary(summary))
    points = {t: (s, v) for t, s, v in alone.scalars.select("tag", "step", "value").iter_rows()}
    doc = alone.configs["wandb_summary"]
    assert points["loss"] == (doc["_step"], doc["loss"]) and points["val_loss"] == (doc["_step"], doc["val_loss"])
    assert not any(t.startswith("_") or t == "graph" for t in points) and not alone.scalars["ordinal"].any()
    [beside] = list(read_wandb_summary(next((SHARED / "real_runs_3").glob("*/wandb/run-*/files/wandb-summary.json"))))
    assert beside.scalars is None and beside.configs["wandb_summary"]
