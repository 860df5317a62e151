"""Structured files written with a UTF-8 byte-order mark (Excel, Windows tools) or as UTF-16 (PowerShell's `>`):
a BOM made a whole JSON config, trainer_state.json or W&B export unread ("Unexpected UTF-8 BOM", no Step column);
UTF-16 text was garbled line by line or not read at all. Now a BOM is dropped, UTF-16 (and UTF-32) is read where a
reader decodes the whole file, and named as such (`wide_text`) by the readers of UTF-8 lines."""

from __future__ import annotations

import json

import pytest

from ingest.decoding import decode, encoding_of
from ingest.records import READ_PROBLEMS
from ingest.run import ingest_run
from ingest.store import connect

ROWS = [{"step": i, "loss": 2.0 - i / 100} for i in range(1, 51)]
CSV = "step,loss\n" + "".join(f"{r['step']},{r['loss']}\n" for r in ROWS)
STATE = json.dumps({"global_step": 50, "log_history": ROWS}, indent=2)


def _ingest(tmp_path, files: dict[str, bytes]) -> tuple[dict, set, list]:
    run = tmp_path / "run"
    for rel, data in files.items():
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        (run / rel).write_bytes(data)
    db = tmp_path / "f.duckdb"
    ingest_run(run, db, progress=None)
    with connect(db, write=False) as con:
        points = dict(con.execute("SELECT path, n_points FROM sources").fetchall())
        configs = {(n, k, v) for n, k, v in con.execute("SELECT name, key, value FROM configs").fetchall()}
        issues = con.execute("SELECT path, kind, detail FROM ingest_issues").fetchall()
    return points, configs, issues


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16", "utf-16-le", "utf-32"])
@pytest.mark.parametrize("name", ["config.json", "config.yaml"])
def test_a_config_with_a_bom_or_in_utf16_is_read(tmp_path, encoding, name):
    text = json.dumps({"lr": 0.001, "batch_size": 32}) if name.endswith(".json") else "lr: 0.001\nbatch_size: 32\n"
    _, configs, issues = _ingest(tmp_path, {"metrics.csv": CSV.encode(), name: text.encode(encoding)})
    assert {(k, v) for n, k, v in configs if n == name} == {("lr", "0.001"), ("batch_size", "32")}
    assert issues == []


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16"])
def test_a_trainer_state_with_a_bom_or_in_utf16_is_read(tmp_path, encoding):
    points, configs, issues = _ingest(tmp_path, {"trainer_state.json": STATE.encode(encoding)})
    assert points == {"trainer_state.json": 50} and ("trainer_state", "global_step", "50") in configs
    assert issues == []


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16"])
def test_a_json_document_of_metrics_in_utf16_is_read(tmp_path, encoding):
    doc = json.dumps([{"epoch": r["step"], "iteration": r["step"] * 10, "main/loss": r["loss"]} for r in ROWS], indent=4)
    points, _, issues = _ingest(tmp_path, {"log": doc.encode(encoding)})
    assert points == {"log": 100} and issues == []


def test_a_wandb_export_with_a_bom_is_read(tmp_path):
    from ingest.wandb_files import read_wandb_export

    path = tmp_path / "wandb_export_2025-03-15T17_09_08.csv"
    path.write_bytes('Step,run-1 - train_loss\n0,1.07\n10,0.5\n'.encode("utf-8-sig"))
    (chunk,) = read_wandb_export(path, 0)
    assert chunk.scalars["step"].to_list() == [0, 10] and chunk.issues == []


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-8"])
@pytest.mark.parametrize("rel", ["metrics.csv", "metrics.jsonl", "lightning_logs/version_0/metrics.csv"])
def test_logs_of_lines_with_a_bom_are_read_whole(tmp_path, encoding, rel):
    text = CSV if rel.endswith(".csv") else "".join(json.dumps(r) + "\n" for r in ROWS)
    points, _, issues = _ingest(tmp_path, {rel: text.encode(encoding)})
    assert points == {rel: 50} and issues == []


@pytest.mark.parametrize("rel", ["metrics.csv", "metrics.jsonl", "lightning_logs/version_0/metrics.csv"])
def test_logs_of_lines_in_utf16_are_named_as_utf16_not_garbled(tmp_path, rel):
    text = CSV if rel.endswith(".csv") else "".join(json.dumps(r) + "\n" for r in ROWS)
    points, _, issues = _ingest(tmp_path, {rel: text.encode("utf-16"), "config.json": b'{"lr": 0.1}'})
    assert points[rel] == 0
    assert [(p, k) for p, k, _ in issues] == [(rel, "wide_text")] and "UTF-16" in issues[0][2]
    assert READ_PROBLEMS["wide_text"][0]  # its points are lost evidence


@pytest.mark.parametrize(("raw", "codec"), [
    (b"\xef\xbb\xbf{}", "utf-8-sig"), (b"\xff\xfe{\x00", "utf-16"), (b"\xfe\xff\x00{", "utf-16"),
    (b"\xff\xfe\x00\x00{\x00\x00\x00", "utf-32"), ("{}".encode("utf-16-le"), "utf-16-le"),
    ("{}".encode("utf-16-be"), "utf-16-be"), ("{".encode("utf-32-le"), "utf-32-le"), (b"{}\n", "utf-8"),
    (b"\x00\x00\x00\x00", "utf-8"), (b"", "utf-8"), ("é".encode(), "utf-8"),
])
def test_the_encoding_of_a_files_first_bytes(raw, codec):
    assert encoding_of(raw[:4]) == codec
    assert decode(raw) == raw.decode(codec, "replace")


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16"])
def test_an_mlflow_param_with_a_bom_or_in_utf16_is_its_number(tmp_path, encoding):
    from ingest.mlflow import _read_value_file

    path = tmp_path / "mlruns" / "0" / "abc" / "params" / "lr"
    path.parent.mkdir(parents=True)
    path.write_bytes("0.001".encode(encoding))
    [chunk] = _read_value_file(path, 0, "params")
    assert chunk.configs == {"mlflow_params": {"lr": 0.001}}


@pytest.mark.parametrize("codec", ["gb18030", "gbk"])
def test_a_legacy_logs_byte_offsets_are_the_files_own(codec):
    """Each UTF-8 byte of a decoded legacy-encoding log maps to the bytes the file holds before it: the records of a
    GBK log keep their positions, so a later ingest resumes where this one ended. Checked against the file's own
    encoding of every prefix, with ASCII, two-byte CJK, a four-byte GB18030 character (where the codec has it) and a
    character the codec cannot write (written as one replacement byte, as the reader decodes it)."""
    from ingest.console import legacy_offsets

    text = "当前epoch:1 | 当前损失值：2.3026\nstep 2 loss 1.9\n准确率 0.5 \U00020000 é\n"
    done = text.encode(codec, errors="replace").decode(codec, errors="replace")
    data = done.encode("utf-8") + b"\n"  # the reader adds a line break after an unended last line
    got = legacy_offsets(done, data, codec)
    assert got.size == len(data) + 1
    starts, at = [], 0  # at the first UTF-8 byte of each character: the file's bytes of the text before it
    for i, ch in enumerate(done):
        starts.append((at, len(done[:i].encode(codec, errors="replace"))))
        at += len(ch.encode("utf-8"))
    assert all(got[u8] == file_bytes for u8, file_bytes in starts)
    assert got[len(done.encode("utf-8"))] == len(done.encode(codec, errors="replace"))
    assert got[-1] == got[-2] + 1
    assert legacy_offsets("", b"", codec).tolist() == [0]
