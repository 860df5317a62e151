"""The TensorBoard reader: real writers' files, real public files, damage, resume, and the compiled core
checked against a slow pure-Python reference (tests/tb_reference.py)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path, PurePosixPath

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.formats import format_for
from ingest.tensorboard import read_events
from tests.paths import REAL_RUNS
from tests.tb_reference import masked_crc, read_reference, row

REAL_EVENT_FILES = sorted(REAL_RUNS.glob("tb_dlgn_*/events.out.tfevents.*")) + sorted(
    REAL_RUNS.glob("mlflow_swahili_stt/events.out.tfevents.*")
)
ISSUE_KINDS = {"crc_mismatch", "bad_length", "truncated", "garbled", "empty", "not_this_format"}


# ---------------------------------------------------------------- helpers


def read_all(path: Path, start: int = 0, chunk_bytes: int | None = None):
    """Everything read_events yields, joined: (scalars, histograms, texts, configs, issues, end, n_chunks)."""
    kwargs = {} if chunk_bytes is None else {"chunk_bytes": chunk_bytes}
    chunks = list(read_events(path, start, **kwargs))
    def cat(name):
        frames = [getattr(c, name) for c in chunks if getattr(c, name) is not None]
        return pl.concat(frames) if frames else None
    configs = {}
    for c in chunks:
        for k, v in c.configs.items():
            configs.setdefault(k, {}).update(v)
    issues = [i for c in chunks for i in c.issues]
    end = chunks[-1].end if chunks else start
    return cat("scalars"), cat("histograms"), cat("texts"), configs, issues, end, len(chunks)


def scalar_rows(frame: pl.DataFrame | None) -> list[tuple]:
    if frame is None:
        return []
    return [row(p, t, s, w, v) for p, t, s, w, v in
            frame.select("position", "tag", "step", "wall_time", "value").iter_rows()]


def issue_pairs(issues) -> list[tuple]:
    return [(i.kind, i.position) for i in issues]


def records(data: bytes) -> list[tuple[int, int]]:
    """(offset, total size) of each record of an undamaged file."""
    out, off = [], 0
    while off < len(data):
        n = int.from_bytes(data[off : off + 8], "little")
        out.append((off, n + 16))
        off += n + 16
    return out


def f32(x: float) -> float:
    return float(np.float32(x))


# ---------------------------------------------------------------- files written by the real writers


@pytest.fixture(scope="module")
def torch_run(tmp_path_factory) -> Path:
    """A run written by torch.utils.tensorboard.SummaryWriter, with train/ and val/ sub-folders."""
    from torch.utils.tensorboard import SummaryWriter

    root = tmp_path_factory.mktemp("torch_run")
    w = SummaryWriter(str(root / "train"))
    for step, value in enumerate([2.5, 1.25, float("nan"), float("inf"), float("-inf"), 0.1]):
        w.add_scalar("loss", value, step, walltime=1000.0 + step)
    w.add_scalar("lr", 3e-4, 7, walltime=2000.5)
    w.add_scalar("big_step", 1.0, 2**40, walltime=2001.0)
    w.add_scalars("grads", {"a": 1.0, "b": 2.0}, 3, walltime=2002.0)
    w.add_histogram("weights", np.array([-2.0, -1.0, 0.0, 0.0, 0.5, 1.0, 3.0]), 5, walltime=2003.0)
    w.add_text("notes", "diverged at step 4", 4, walltime=2004.0)
    w.add_hparams({"lr": 0.01, "optimizer": "adam", "layers": 4, "amp": True}, {"hp/final_loss": 0.5})
    # TF2-style summaries (tensor values with plugin metadata), written through the same writer.
    w.add_scalar("tf2_scalar", 0.75, 9, walltime=2005.0, new_style=True)
    w.add_scalar("tf2_double", 1.0 / 3.0, 9, walltime=2005.5, new_style=True, double_precision=True)
    from tensorboard.plugins.histogram.summary_v2 import histogram_pb
    from tensorboard.plugins.scalar.summary_v2 import scalar_pb

    w.file_writer.add_summary(scalar_pb("tf2_pb", 1.0 / 3.0), 10, walltime=2006.0)  # stored as float32
    w.file_writer.add_summary(histogram_pb("tf2_hist", np.array([-1.0, 0.0, 0.0, 2.0]), buckets=4), 11,
                              walltime=2007.0)
    w.close()
    v = SummaryWriter(str(root / "val"))
    v.add_scalar("loss", 3.5, 0, walltime=1000.0)
    v.add_scalar("loss", 2.5, 10, walltime=1010.0)
    v.close()
    return root


@pytest.fixture(scope="module")
def tbx_run(tmp_path_factory) -> Path:
    import tensorboardX

    root = tmp_path_factory.mktemp("tbx_run")
    w = tensorboardX.SummaryWriter(str(root))
    for step in range(20):
        w.add_scalar("train/loss", 1.0 / (step + 1), step, walltime=500.0 + step)
    w.add_scalar("train/loss", float("nan"), 20, walltime=520.0)
    w.add_histogram("w", np.arange(10.0), 3, walltime=530.0)
    w.add_text("t", "hello", 1, walltime=531.0)
    w.close()
    return root


def one(root: Path, sub: str = "") -> Path:
    (path,) = (root / sub).glob("events.out.tfevents.*")
    return path


def test_torch_summarywriter_scalars_exact(torch_run):
    scalars, *_ , issues, end, _ = read_all(one(torch_run, "train"))
    assert issues == []
    loss = scalars.filter(pl.col("tag") == "loss").sort("step")
    assert loss["step"].to_list() == [0, 1, 2, 3, 4, 5]
    assert loss["wall_time"].to_list() == [1000.0 + s for s in range(6)]
    values = loss["value"].to_list()
    assert values[:2] == [2.5, 1.25] and math.isnan(values[2])
    assert values[3] == math.inf and values[4] == -math.inf and values[5] == f32(0.1)
    lr = scalars.filter(pl.col("tag") == "lr").row(0, named=True)
    assert (lr["step"], lr["value"], lr["wall_time"]) == (7, f32(3e-4), 2000.5)
    assert scalars.filter(pl.col("tag") == "big_step")["step"].to_list() == [2**40]
    tf2 = dict(scalars.filter(pl.col("tag").cast(pl.Utf8).str.starts_with("tf2")).select("tag", "value").iter_rows())
    assert tf2 == {"tf2_scalar": 0.75, "tf2_double": 1.0 / 3.0, "tf2_pb": f32(1.0 / 3.0)}
    assert end == one(torch_run, "train").stat().st_size


def test_add_scalars_writes_one_file_per_tag_and_each_is_read(torch_run):
    files = sorted(torch_run.glob("train/grads_*/events.out.tfevents.*"))
    assert len(files) == 2
    got = {f.parent.name: read_all(f)[0].select("tag", "step", "value").row(0) for f in files}
    assert got == {"grads_a": ("grads", 3, 1.0), "grads_b": ("grads", 3, 2.0)}


def test_histograms_keep_buckets_and_derive_statistics(torch_run):
    _, hist, *_ = read_all(one(torch_run, "train"))
    h = hist.filter(pl.col("tag") == "weights").row(0, named=True)
    data = np.array([-2.0, -1.0, 0.0, 0.0, 0.5, 1.0, 3.0])
    assert (h["step"], h["wall_time"], h["num"], h["min"], h["max"]) == (5, 2003.0, 7.0, -2.0, 3.0)
    assert h["sum"] == data.sum() and h["sum_squares"] == (data**2).sum()
    assert h["mean"] == pytest.approx(data.mean()) and h["std"] == pytest.approx(data.std())
    assert sum(h["bucket_counts"]) == 7 and len(h["bucket_limits"]) == len(h["bucket_counts"])
    # The bucket holding 0 is [left, right) with right the first limit above 0; it holds the two zeros.
    i = int(np.searchsorted(h["bucket_limits"], 0.0, side="right"))
    assert h["zero_fraction"] == h["bucket_counts"][i] / 7 and h["zero_fraction"] >= 2 / 7
    tf2 = hist.filter(pl.col("tag") == "tf2_hist").row(0, named=True)
    assert tf2["num"] == 4 and tf2["min"] == -1.0 and tf2["max"] == 2.0 and tf2["sum"] is None
    assert len(tf2["bucket_limits"]) == 4 and tf2["bucket_limits"][-1] == 2.0


def test_text_and_hparams(torch_run):
    _, _, texts, *_ = read_all(one(torch_run, "train"))
    assert texts.select("tag", "step", "text", "wall_time").rows() == [
        ("notes/text_summary", 4, "diverged at step 4", 2004.0)]
    # add_hparams writes a sub-run named by the time (add_scalars' sub-runs are grads_a, grads_b)
    (hp_file,) = [p for p in torch_run.glob("train/*/events.out.tfevents.*") if not p.parent.name.startswith("grads")]
    scalars, _, _, configs, issues, _, _ = read_all(hp_file)
    assert configs["hparams"] == {"lr": 0.01, "optimizer": "adam", "layers": 4.0, "amp": True}
    assert configs["hparams_session_end"] == {"status": "STATUS_SUCCESS"}
    assert scalars.select("tag", "value").rows() == [("hp/final_loss", 0.5)]


def test_tensorboardx_writer(tbx_run):
    scalars, hist, texts, _, issues, _, _ = read_all(one(tbx_run))
    assert issues == []
    loss = scalars.filter(pl.col("tag") == "train/loss").sort("step")
    assert loss["value"].to_list()[:20] == [f32(1.0 / (s + 1)) for s in range(20)]
    assert math.isnan(loss["value"][20]) and loss["wall_time"].to_list() == [500.0 + s for s in range(21)]
    assert hist["num"].to_list() == [10.0] and hist["mean"].to_list() == [4.5]
    assert texts["text"].to_list() == ["hello"]


def test_format_claims_event_files_grouped_by_folder(torch_run):
    for rel, group in [("train/events.out.tfevents.1.host.2.0", "train"), ("events.out.tfevents.9.h.v2", "")]:
        fmt = format_for(PurePosixPath(rel))
        assert fmt.name == "tensorboard" and fmt.resumable and fmt.group(PurePosixPath(rel)) == group
        assert fmt.load_reader() is read_events


def test_train_and_val_folders_are_separate_series(torch_run, tmp_path):
    import duckdb

    from ingest.run import ingest_run

    db = tmp_path / "f.duckdb"
    ingest_run(torch_run, db)
    with duckdb.connect(str(db), read_only=True) as con:
        groups = con.execute("SELECT grp, count(*) FROM series WHERE tag = 'loss' GROUP BY grp ORDER BY grp").fetchall()
        n_val = con.execute("SELECT count(*) FROM scalars JOIN series USING (series_id) "
                            "WHERE tag = 'loss' AND grp = 'val'").fetchone()[0]
    assert groups == [("train", 1), ("val", 1)] and n_val == 2


# ---------------------------------------------------------------- peers and real files


def accumulator_rows(path: Path) -> list[tuple]:
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.util import tensor_util

    acc = ea.EventAccumulator(str(path), size_guidance={k: 0 for k in ea.DEFAULT_SIZE_GUIDANCE})
    acc.Reload()
    out = [(t, e.step, e.wall_time, e.value) for t in acc.Tags()["scalars"] for e in acc.Scalars(t)]
    for t in acc.Tags()["tensors"]:
        for e in acc.Tensors(t):
            array = tensor_util.make_ndarray(e.tensor_proto)
            if array.dtype.kind in "fiu" and array.size == 1 and acc.SummaryMetadata(t).plugin_data.plugin_name in (
                    "scalars", ""):
                out.append((t, e.step, e.wall_time, float(array.reshape(-1)[0])))
    return sorted((t, s, w, "nan" if math.isnan(v) else v) for t, s, w, v in out)


def ours_rows(path: Path) -> list[tuple]:
    return sorted(r[1:] for r in scalar_rows(read_all(path)[0]))


@pytest.mark.parametrize("path", REAL_EVENT_FILES, ids=lambda p: p.parent.name)
@pytest.mark.needs_shared
def test_real_files_match_event_accumulator_and_reference(path):
    scalars, _, _, _, issues, end, _ = read_all(path)
    assert issues == [] and end == path.stat().st_size
    assert ours_rows(path) == accumulator_rows(path)
    ref_rows, ref_issues = read_reference(path.read_bytes())
    assert scalar_rows(scalars) == ref_rows and ref_issues == []


@pytest.mark.needs_shared
def test_swahili_tf2_file_yields_its_epoch_losses():
    (path,) = REAL_RUNS.glob("mlflow_swahili_stt/events.out.tfevents.*")
    scalars = read_all(path)[0]
    loss = scalars.filter(pl.col("tag") == "epoch_loss").sort("step")
    assert loss["step"].to_list() == list(range(10)) and loss["value"][0] == pytest.approx(332.684174)


def test_writer_files_match_tbparse_and_event_accumulator(torch_run, tbx_run):
    from tbparse import SummaryReader

    for path in [one(torch_run, "train"), one(torch_run, "val"), one(tbx_run)]:
        assert ours_rows(path) == accumulator_rows(path)
        frame = SummaryReader(str(path), pivot=False, extra_columns={"wall_time"}).scalars
        theirs = sorted((t, int(s), float(w), "nan" if math.isnan(v) else float(v))
                        for t, s, w, v in frame[["tag", "step", "wall_time", "value"]].itertuples(index=False))
        ours = [r for r in ours_rows(path) if not r[0].startswith("tf2_")]  # tbparse reads TF2 tensors apart
        assert ours == [r for r in theirs if not r[0].startswith("tf2_")]


# ---------------------------------------------------------------- damage, one regression test each


@pytest.fixture()
def real_copy(tmp_path) -> tuple[Path, bytes]:
    """A copy of a real Lightning event file (355 records) to damage; never the original."""
    src = REAL_RUNS / "tb_dlgn_v25"
    (path,) = src.glob("events.out.tfevents.*")
    dst = tmp_path / path.name
    shutil.copyfile(path, dst)
    return dst, path.read_bytes()


@pytest.mark.needs_shared
def test_truncated_event_file_keeps_earlier_steps(real_copy):
    path, data = real_copy
    last_off, last_size = records(data)[-1]
    path.write_bytes(data[:-7])  # a crash mid-write of the last record
    scalars, *_, issues, end, _ = read_all(path)
    full = scalar_rows(_read_bytes(path, data)[0])
    assert scalar_rows(scalars) == [r for r in full if r[0] < last_off]
    assert issue_pairs(issues) == [("truncated", last_off)] and end == last_off


def _read_bytes(path: Path, data: bytes):
    other = path.with_name(path.name + ".orig")
    other.write_bytes(data)
    return read_all(other)


@pytest.mark.needs_shared
def test_crc_mismatch_mid_file_skips_exactly_that_record(real_copy):
    path, data = real_copy
    off, size = records(data)[100]
    damaged = bytearray(data)
    damaged[off + 12 + 5] ^= 0x20  # inside the payload
    path.write_bytes(damaged)
    scalars, *_, issues, end, _ = read_all(path)
    full = scalar_rows(_read_bytes(path, data)[0])
    assert scalar_rows(scalars) == [r for r in full if r[0] != off]
    assert issue_pairs(issues) == [("crc_mismatch", off)] and end == len(data)


@pytest.mark.needs_shared
def test_corrupt_length_crc_resyncs_at_next_record(real_copy):
    path, data = real_copy
    off, size = records(data)[200]
    damaged = bytearray(data)
    damaged[off + 2] ^= 0x01  # the length field: its CRC no longer matches
    path.write_bytes(damaged)
    scalars, *_, issues, end, _ = read_all(path)
    full = scalar_rows(_read_bytes(path, data)[0])
    assert scalar_rows(scalars) == [r for r in full if r[0] != off]
    assert issue_pairs(issues) == [("bad_length", off)]
    assert f"skipped {size} bytes" in issues[0].detail


def test_zero_length_file_is_an_empty_issue(tmp_path):
    path = tmp_path / "events.out.tfevents.1.host"
    path.write_bytes(b"")
    scalars, *_, issues, end, _ = read_all(path)
    assert scalars is None and issue_pairs(issues) == [("empty", None)] and end == 0


def test_non_event_file_with_event_name_is_not_this_format(tmp_path):
    path = tmp_path / "events.out.tfevents.1.host"
    path.write_text("step,loss\n" + "".join(f"{i},{1 / (i + 1)}\n" for i in range(500)))
    scalars, *_, issues, end, _ = read_all(path)
    assert scalars is None and issue_pairs(issues) == [("not_this_format", None)]


def test_resume_from_end_returns_only_records_appended_later(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(str(tmp_path))
    for s in range(5):
        w.add_scalar("loss", float(s), s, walltime=10.0 + s)
    w.flush()
    path = one(tmp_path)
    first = read_all(path)
    assert first[0]["step"].to_list() == list(range(5))
    for s in range(5, 8):
        w.add_scalar("loss", float(s), s, walltime=10.0 + s)
    w.close()
    again = read_all(path, start=first[5])
    assert again[0]["step"].to_list() == [5, 6, 7] and again[4] == []
    assert again[5] == path.stat().st_size
    assert read_all(path, start=again[5])[6] == 0  # nothing new: no chunk at all


@pytest.mark.needs_shared
def test_resume_after_truncation_reads_the_completed_record(real_copy):
    """A writer still running: the tail record is half-written, then finished by appending its bytes."""
    path, data = real_copy
    last_off, _ = records(data)[-1]
    path.write_bytes(data[:-7])
    _, _, _, _, _, end, _ = read_all(path)
    with path.open("ab") as f:
        f.write(data[-7:])
    scalars, *_, issues, end2, _ = read_all(path, start=end)
    assert scalars["position"].to_list() == [last_off] and issues == [] and end2 == len(data)


# ---------------------------------------------------------------- the compiled core against the reference


@pytest.mark.parametrize("chunk_bytes", [1, 64, 1000, 4096])
def test_small_chunks_read_the_same_as_one(torch_run, chunk_bytes):
    path = one(torch_run, "train")
    whole = read_all(path)
    chunked = read_all(path, chunk_bytes=chunk_bytes)
    assert scalar_rows(chunked[0]) == scalar_rows(whole[0]) and chunked[1].equals(whole[1])
    assert chunked[5] == whole[5] and chunked[6] > 1


def check_against_reference(path: Path, data: bytes, chunk_bytes: int | None = None) -> list[tuple]:
    path.write_bytes(data)
    scalars, _, _, _, issues, end, n_chunks = read_all(path, chunk_bytes=chunk_bytes)
    ref_rows, ref_issues = read_reference(data)
    assert {i.kind for i in issues} <= ISSUE_KINDS
    assert scalar_rows(scalars) == ref_rows
    assert issue_pairs(issues) == ref_issues
    assert 0 <= end <= len(data)
    if chunk_bytes:  # bounded work: one chunk per chunk_bytes of file, plus the last
        assert n_chunks <= len(data) // max(1, chunk_bytes - 16) + 2
    return scalar_rows(scalars)


@settings(deadline=None, max_examples=80)
@given(data=st.binary(max_size=400), chunk_bytes=st.sampled_from([None, 13, 64]))
def test_random_bytes_never_raise(tmp_path_factory, data, chunk_bytes):
    path = tmp_path_factory.mktemp("fuzz") / "events.out.tfevents.0.fuzz"
    check_against_reference(path, data, chunk_bytes)


@settings(deadline=None, max_examples=80)
@given(flips=st.lists(st.tuples(st.integers(0, 16578), st.integers(1, 255)), max_size=6),
       cut=st.integers(0, 16579), chunk_bytes=st.sampled_from([None, 97, 2048]))
@pytest.mark.needs_shared
def test_damaged_real_file_keeps_only_original_records(tmp_path_factory, flips, cut, chunk_bytes):
    (src,) = (REAL_RUNS / "tb_dlgn_v25").glob("events.out.tfevents.*")
    original = src.read_bytes()
    damaged = bytearray(original)
    for index, mask in flips:
        damaged[index] ^= mask
    path = tmp_path_factory.mktemp("fuzz") / src.name
    got = check_against_reference(path, bytes(damaged[:cut]), chunk_bytes)
    assert set(got) <= set(read_reference(original)[0])


def frame_record(payload: bytes) -> bytes:
    header = len(payload).to_bytes(8, "little")
    return header + masked_crc(header).to_bytes(4, "little") + payload + masked_crc(payload).to_bytes(4, "little")


@settings(deadline=None, max_examples=150)
@given(payloads=st.lists(st.binary(max_size=60), min_size=1, max_size=8))
def test_any_payload_with_valid_crcs_decodes_as_protobuf_does(tmp_path_factory, payloads):
    """Records whose CRCs check out but whose payloads are arbitrary: the compiled decoder must accept exactly
    what protobuf accepts and read it the same way (else it hands the record to protobuf)."""
    path = tmp_path_factory.mktemp("fuzz") / "events.out.tfevents.0.fuzz"
    check_against_reference(path, b"".join(frame_record(p) for p in payloads))


@settings(deadline=None, max_examples=100)
@given(edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
       which=st.integers(0, 354))
@pytest.mark.needs_shared
def test_mutated_real_events_with_valid_crcs_decode_as_protobuf_does(tmp_path_factory, edits, which):
    """Real Events with bytes overwritten and CRCs recomputed: near-misses of the fast shape (a wrong wire
    type, a length one off, an extra field) must not be decoded differently from protobuf."""
    (src,) = (REAL_RUNS / "tb_dlgn_v25").glob("events.out.tfevents.*")
    data = src.read_bytes()
    off, size = records(data)[which]
    payload = bytearray(data[off + 12 : off + size - 4])
    for index, byte in edits:
        payload[index % len(payload)] = byte
    path = tmp_path_factory.mktemp("fuzz") / src.name
    check_against_reference(path, data[:off] + frame_record(bytes(payload)) + data[off + size :])


def test_length_claiming_more_than_the_file_is_truncated_not_allocated(tmp_path):
    """A header whose CRC checks out but whose length is 2**60: read as a truncated tail, never allocated."""
    header = (2**60).to_bytes(8, "little")
    path = tmp_path / "events.out.tfevents.2.host"
    path.write_bytes(header + masked_crc(header).to_bytes(4, "little") + b"\0" * 5000)
    scalars, *_, issues, end, _ = read_all(path, chunk_bytes=1024)
    assert scalars is None and issue_pairs(issues) == [("truncated", 0)] and end == 0


def test_record_larger_than_a_chunk_is_read_whole(torch_run):
    """The histogram record (~9 kB) spans many 256-byte chunks; it is read once, whole."""
    path = one(torch_run, "train")
    hist = read_all(path, chunk_bytes=256)[1]
    assert sorted(hist["tag"].to_list()) == ["tf2_hist", "weights"]


def test_merged_summary_gives_one_row_per_value_at_one_position(tmp_path):
    """TF1's merged summaries put many Values in one Event: each is a row, all at that record's offset."""
    from tensorboard.compat.proto import summary_pb2
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(str(tmp_path))
    values = [summary_pb2.Summary.Value(tag=f"m/{i}", simple_value=i / 4) for i in range(3)]
    w.file_writer.add_summary(summary_pb2.Summary(value=values), 12, walltime=77.0)
    w.close()
    path = one(tmp_path)
    scalars = read_all(path)[0]
    assert scalars.select("tag", "step", "value", "wall_time").rows() == [
        ("m/0", 12, 0.0, 77.0), ("m/1", 12, 0.25, 77.0), ("m/2", 12, 0.5, 77.0)]
    assert scalars["position"].n_unique() == 1
    assert ours_rows(path) == accumulator_rows(path)
    assert scalar_rows(scalars) == read_reference(path.read_bytes())[0]


@pytest.fixture(scope="module")
def tf2_file(tmp_path_factory) -> Path:
    """TF2-style scalar summaries (tensor + "scalars" metadata) from torch's writer: float, double, and
    tensorboard's own scalar_pb."""
    from tensorboard.plugins.scalar.summary_v2 import scalar_pb
    from torch.utils.tensorboard import SummaryWriter

    root = tmp_path_factory.mktemp("tf2")
    w = SummaryWriter(str(root))
    for step in range(6):
        w.add_scalar("f32", 1.5 * step, step, walltime=10.0 + step, new_style=True)
        w.add_scalar("f64", 1.0 / (step + 3), step, walltime=20.0 + step, new_style=True, double_precision=True)
        w.file_writer.add_summary(scalar_pb("pb", -0.5 * step), step, walltime=30.0 + step)
    w.add_scalar("f32", float("nan"), 6, walltime=16.0, new_style=True)
    w.close()
    return one(root)


def test_tf2_scalar_tensors_take_the_compiled_path(tf2_file):
    from ingest import _tfevents

    data = tf2_file.read_bytes()
    result = _tfevents.scan(data, True, -1)
    slow = np.frombuffer(result[9], np.int64).reshape(-1, 2)
    assert len(result[3]) // 8 == 19 and len(slow) == 1  # every scalar decoded in C; only file_version left
    rows = read_reference(data)[0]
    assert scalar_rows(read_all(tf2_file)[0]) == rows and len(rows) == 19


@settings(deadline=None, max_examples=100)
@given(edits=st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 255)), min_size=1, max_size=3),
       which=st.integers(1, 19))
def test_mutated_tf2_events_with_valid_crcs_decode_as_protobuf_does(tmp_path_factory, tf2_file, edits, which):
    data = tf2_file.read_bytes()
    off, size = records(data)[which]
    payload = bytearray(data[off + 12 : off + size - 4])
    for index, byte in edits:
        payload[index % len(payload)] = byte
    path = tmp_path_factory.mktemp("fuzz") / tf2_file.name
    check_against_reference(path, data[:off] + frame_record(bytes(payload)) + data[off + size :])


def test_a_mutated_dtype_the_reference_cannot_decode_is_a_rejected_value(tmp_path_factory, tf2_file):
    """Found with Hypothesis's default profile (issue 26): byte 800 of record 1 set to 120 makes the dtype
    DT_RESOURCE_REF, which `make_ndarray` cannot decode (KeyError: 120); the reference must reject the value."""
    test_mutated_tf2_events_with_valid_crcs_decode_as_protobuf_does.hypothesis.inner_test(
        tmp_path_factory, tf2_file, edits=[(800, 120)], which=1)


def test_overlong_step_varint_reads_as_protobuf_reads_it(tmp_path):
    """ingest/_wire.h holds one varint rule for both compiled cores, protobuf's (upb): a 10th byte's bits past
    the 64th are dropped. The cores disagreed before (issue 11): this Event must decode as protobuf decodes it."""
    import struct

    from tensorboard.compat.proto import event_pb2

    from benchmarks.bench_ingest_tensorboard import record

    over = bytes([0xFF] * 9 + [0x02])  # 2**63 - 1, with a stray bit past the 64th
    value = b"\x0a\x04loss" + b"\x15" + struct.pack("<f", 1.5)
    event = b"\x09" + struct.pack("<d", 1.7e9) + b"\x10" + over + b"\x2a" + bytes([len(value) + 2, 0x0a, len(value)]) + value
    expected = event_pb2.Event.FromString(event)
    path = tmp_path / "events.out.tfevents.1.host"
    path.write_bytes(record(event_pb2.Event(wall_time=1.7e9, file_version="brain.Event:2").SerializeToString())
                     + record(event))
    [chunk] = list(read_events(path))
    assert chunk.issues == []
    assert chunk.scalars["step"].to_list() == [expected.step] == [2**63 - 1]
    assert chunk.scalars["value"].to_list() == [1.5]
