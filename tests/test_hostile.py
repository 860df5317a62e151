"""Hostile and faulty inputs (issue 26): each reader turns a damaged or malicious file into a read problem, within
bounded memory, and keeps what it can. The files are built here by the tests, never shipped as fixtures."""

from __future__ import annotations

import json
import math
import os
import struct

import pytest

from ingest.configs import MAX_DEPTH, MAX_NODES, DocumentTooLarge, parse_config_text, read_config
from ingest.tensorfiles import Unreadable, read_safetensors_header
from tests.paths import REPO


def alias_bomb(levels: int = 10, width: int = 9) -> str:
    """YAML whose anchors each repeat the previous one `width` times: about 500 bytes, width**levels leaves."""
    lines = [f"a0: &a0 [{', '.join(['x'] * width)}]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def nested(depth: int, suffix: str) -> str:
    return "a: " + "[" * depth + "]" * depth if suffix == ".yaml" else "[" * depth + "]" * depth


def safetensors_bytes(header: dict, data: bytes) -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


def test_yaml_alias_bomb_is_refused_before_it_expands(tmp_path):
    """Issue 26 item 1: 478 bytes of YAML aliases expanded to 9**9 leaves in flatten / the store's JSON: 11 GB."""
    path = tmp_path / "config.yaml"
    path.write_text(alias_bomb())
    assert path.stat().st_size < 600
    [chunk] = read_config(path)
    assert [i.kind for i in chunk.issues] == ["too_large"] and not chunk.configs
    assert "config.yaml" in chunk.issues[0].detail


def test_aliases_within_the_limit_are_kept_as_written():
    doc = parse_config_text(alias_bomb(levels=3, width=3), ".yaml")
    assert doc["a2"] == [[["x"] * 3] * 3] * 3


@pytest.mark.parametrize("text", ["a: &a [*a]", "a: &a {b: *a}"])
def test_a_yaml_cycle_is_refused_not_walked_forever(text):
    with pytest.raises(DocumentTooLarge):
        parse_config_text(text, ".yaml")


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
@pytest.mark.parametrize("depth", [100_000, MAX_DEPTH + 1])
def test_deep_nesting_is_a_read_problem_not_a_recursion_error(tmp_path, suffix, depth):
    """Issue 26 item 6: 100k-deep nesting in config.json / config.yaml raised RecursionError."""
    path = tmp_path / f"config{suffix}"
    path.write_text(nested(depth, suffix))
    [chunk] = read_config(path)
    assert [i.kind for i in chunk.issues] == ["too_large"]


def test_the_node_limit_counts_values_once_per_use():
    width = 1000
    text = f"a: &a [{', '.join(['1'] * width)}]\nb: [{', '.join(['*a'] * (MAX_NODES // width))}]\n"
    with pytest.raises(DocumentTooLarge, match="more than"):
        parse_config_text(text, ".yaml")


def test_deep_trainer_state_keeps_nothing_and_says_why(tmp_path):
    from ingest.hf_trainer import read_trainer_state

    path = tmp_path / "trainer_state.json"
    path.write_text('{"log_history": ' + "[" * 100_000 + "]" * 100_000 + "}")
    [chunk] = read_trainer_state(path)
    assert [i.kind for i in chunk.issues] == ["too_large"] and chunk.scalars is None


def test_deep_jsonl_line_is_skipped_and_the_rest_kept(tmp_path):
    from ingest.tabular import read_jsonl

    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "loss": 2.0}\n' + "[" * 100_000 + "]" * 100_000 + '\n{"step": 2, "loss": 1.0}\n')
    [chunk] = read_jsonl(path)
    assert chunk.scalars["value"].to_list() == [2.0, 1.0] and [i.position for i in chunk.issues] == [2]


def test_deep_wandb_summary_is_a_read_problem(tmp_path):
    from ingest.wandb_files import read_wandb_summary

    path = tmp_path / "wandb-summary.json"
    path.write_text('{"loss": ' + "[" * 100_000 + "]" * 100_000 + "}")
    chunks = list(read_wandb_summary(path))
    assert [i.kind for c in chunks for i in c.issues] == ["too_large"]


def test_safetensors_header_nested_deep_is_unreadable_not_a_crash(tmp_path):
    path = tmp_path / "model.safetensors"
    raw = ("[" * 100_000 + "]" * 100_000).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)
    with pytest.raises(Unreadable):
        read_safetensors_header(path)


def test_safetensors_metadata_that_is_a_list_is_ignored_with_an_issue(tmp_path):
    """Issue 26 item 6: a `__metadata__` list raised AttributeError."""
    path = tmp_path / "model.safetensors"
    path.write_bytes(safetensors_bytes({"__metadata__": [1, 2], "w": {"dtype": "F32", "shape": [3],
                                                                        "data_offsets": [0, 12]}}, bytes(12)))
    metadata, refs, issues = read_safetensors_header(path)
    assert metadata == {} and list(refs) == ["w"] and [i.kind for i in issues] == ["garbled"]


@pytest.mark.parametrize("entry", [
    {"dtype": "F32", "shape": [2**40], "data_offsets": [0, 16]},  # a shape far larger than its bytes
    {"dtype": "F32", "shape": [4], "data_offsets": [-64, -48]},  # an offset that reads the header as weights
    {"dtype": "F32", "shape": [4], "data_offsets": [16, 0]},
    {"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]},
])
def test_inconsistent_safetensors_entries_are_not_read_as_ok(tmp_path, entry):
    """Issue 26 item 12: a 2**40-element shape over 16 bytes, or an offset reading the header, was accepted."""
    path = tmp_path / "model.safetensors"
    path.write_bytes(safetensors_bytes({"w": entry, "b": {"dtype": "F32", "shape": [2], "data_offsets": [16, 24]}},
                                       bytes(24)))
    _, refs, issues = read_safetensors_header(path)
    assert list(refs) == ["b"] and [i.kind for i in issues] == ["garbled"] and "'w'" in issues[0].detail


@pytest.mark.parametrize("content", [b"\x80garbage", b"\x80\x02}q\x00(X\x01", b"\x80\x02h\x05."],
                         ids=["stack", "cut", "memo"])
def test_a_torch_file_the_unpickler_chokes_on_is_unreadable_not_a_traceback(tmp_path, capsys, content):
    """A nine-byte `batches/step_3.pt` of `\x80garbage` ended analyze in an IndexError from torch's weights-only
    unpickler (an empty stack popped); it is a read problem and the log beside it is judged."""
    from forensics.cli import main

    run = tmp_path / "run"
    (run / "batches").mkdir(parents=True)
    (run / "train.log").write_text(console_log())
    (run / "batches" / "step_3.pt").write_bytes(content)
    (run / "model.pt").write_bytes(content)
    assert main(["analyze", str(run), "--db", str(tmp_path / "f.duckdb"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {p["path"] for p in out["read_problems"]} == {"batches/step_3.pt", "model.pt"}


def console_log(n: int = 60) -> str:
    return "".join(f"step {i} loss {2.0 / (i + 1):.4f}\n" for i in range(1, n))


def test_a_file_name_that_is_not_utf8_is_read_and_stored_escaped(tmp_path, capsys):
    """Issue 26 item 2: a non-UTF-8 file name inside a run crashed analyze (InvalidInputException in claim_source)."""
    from forensics.cli import main
    from ingest.store import connect

    run, db = tmp_path / "run", tmp_path / "f.duckdb"
    run.mkdir()
    (run / "train.log").write_text(console_log())
    with open(os.fsencode(run) + b"/extra\xff.log", "wb") as f:
        f.write(console_log(20).encode())
    for _ in range(2):  # the second ingest finds the name it stored, and reads nothing again
        assert main(["analyze", str(run), "--db", str(db)]) == 0
    with connect(db, write=False) as con:
        rows = con.execute("SELECT path, n_points FROM sources ORDER BY path").fetchall()
    assert rows == [("extra\\xff.log", 19), ("train.log", 59)]


def test_a_folder_name_that_is_not_utf8_does_not_stop_the_watch(tmp_path):
    """Issue 26 item 2: one non-UTF-8 folder name failed every watch pass (UnicodeEncodeError in run_id_for)."""
    from forensics.services.watch import Watcher, WatchSettings

    root = tmp_path / "runs"
    for name in (b"bad\xfe", b"good"):
        os.makedirs(os.fsencode(root) + b"/" + name)
        with open(os.fsencode(root) + b"/" + name + b"/train.log", "w") as f:
            f.write(console_log())
    db = tmp_path / "f.duckdb"
    first = Watcher([root], db, WatchSettings(events=False)).poll_once()
    assert (first.runs, first.analysed, first.failed) == (2, 2, 0)
    with open(os.fsencode(root) + b"/bad\xfe/train.log", "a") as f:
        f.write("step 60 loss 0.03\n")
    again = Watcher([root], db, WatchSettings(events=False)).poll_once()  # restarted: it stored the name escaped
    assert (again.changed, again.analysed, again.failed) == (1, 1, 0)


@pytest.mark.parametrize("proc", [True, False], ids=["proc_fd", "open_file"])
def test_a_run_in_a_folder_named_in_latin1_reads_its_checkpoints_optimizer_and_batches(tmp_path, monkeypatch, capsys,
                                                                                         proc):
    """In a folder named with Latin-1 bytes every torch checkpoint, optimizer file and batch was `unreadable:
    UnicodeEncodeError … surrogates not allowed` (torch's zip reader and safetensors encode the name as UTF-8), so
    a healthy run was INCONCLUSIVE. Each is read; where there is no /proc, from an open file."""
    from pathlib import Path

    import torch
    from safetensors.torch import save_file

    from forensics.cli import main
    from ingest import tensorfiles
    from ingest.checkpoints import read_states
    from ingest.store import connect

    if not proc:
        monkeypatch.setattr(tensorfiles, "PROC_FD", str(tmp_path / "no-proc"))
    run = Path(os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9"))
    (run / "checkpoints").mkdir(parents=True)
    (run / "batches").mkdir()
    (run / "train.log").write_text("".join(f"step {i} loss {2 / (i + 1):.4f}\n" for i in range(1, 200)))
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    for step in (50, 100):
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step},
                   run / "checkpoints" / f"step_{step}.pt")
    torch.save(opt.state_dict(), run / "checkpoints" / "optimizer.pt")
    save_file(model.state_dict(), str(run / "checkpoints" / "step_150.safetensors"))
    torch.save({"x": torch.ones(4, 3)}, run / "batches" / "step_10.pt")
    save_file({"x": torch.ones(4, 3)}, str(run / "batches" / "step_11.safetensors"))
    db = tmp_path / "f.duckdb"
    assert main(["analyze", str(run), "--db", str(db), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["read_problems"] == [] and out["verdict"] == "healthy"
    with connect(db, write=False) as con:
        assert con.execute("SELECT count(*) FROM checkpoints WHERE status = 'ok'").fetchone()[0] == 4  # optimizer.pt too
        assert con.execute("SELECT count(*) FROM batches").fetchone()[0] == 2
    states = read_states(run, "checkpoints/step_150.safetensors", "safetensors")  # replay's restore too
    assert set(states.model) == {"weight", "bias"}
    assert read_states(run, "checkpoints/step_100.pt", "torch").optimizer["state"]


def _tb(root, n: int = 60):
    """A healthy loss curve written by SummaryWriter, one step a second (so no throughput finding comes from
    how fast the test happened to write it)."""
    from torch.utils.tensorboard import SummaryWriter

    from tests.runwriters import curve

    steps, values = curve(n)
    w = SummaryWriter(str(root))
    for step, value in zip(steps.tolist(), values.tolist()):
        w.add_scalar("loss", value, step, walltime=1.7e9 + step)
    w.close()
    return root


def _denied(monkeypatch, *names: str) -> None:
    """Make opening (or listing) paths ending in `names` fail with EACCES, as `chmod 000` does for a user other
    than root: the suite runs as root too, whom file modes do not stop."""
    import errno
    import pathlib

    real_open, real_scandir = pathlib.Path.open, os.scandir

    def refuse(path):
        if str(path).endswith(names):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))

    def path_open(self, *args, **kwargs):
        refuse(self)
        return real_open(self, *args, **kwargs)

    def scandir(path="."):
        refuse(path)
        return real_scandir(path)

    monkeypatch.setattr(pathlib.Path, "open", path_open)
    monkeypatch.setattr(os, "scandir", scandir)


@pytest.mark.parametrize("denied", ["config.yaml", "events"])
def test_an_unreadable_file_is_a_read_problem_and_the_rest_is_read(tmp_path, monkeypatch, capsys, denied):
    """Issue 26 item 7: an unreadable event file or config.yaml ended analyze in a PermissionError traceback."""
    from forensics.cli import main

    run = tmp_path / "run"
    _tb(run / "train")
    _tb(run / "events")
    (run / "config.yaml").write_text("lr: 0.1\n")
    [target] = (run / denied).glob("events.out.*") if denied == "events" else [run / denied]
    _denied(monkeypatch, target.name if denied != "events" else f"events/{target.name}")
    assert main(["analyze", str(run), "--db", str(tmp_path / "f.duckdb"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    problems = [(p["path"], p["kind"]) for p in out["read_problems"]]
    assert (str(target.relative_to(run)), "unreadable") in problems
    assert out["verdict"] != "healthy"


def test_an_unreadable_folder_is_a_read_problem_not_silently_dropped(tmp_path, monkeypatch, capsys):
    """Issue 26 item 7: an unreadable `val/` folder was dropped without a word, and the run called healthy."""
    from forensics.cli import main

    run = tmp_path / "run"
    _tb(run / "train", 200)
    _tb(run / "val", 20)
    db = tmp_path / "f.duckdb"
    assert main(["analyze", str(run), "--db", str(tmp_path / "whole.duckdb"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "healthy"  # the same run, all of it readable
    _denied(monkeypatch, "/val")
    for stored_before in (False, True):  # a first read, and one after the folder was read whole (not "deleted")
        target = str(tmp_path / "whole.duckdb") if stored_before else str(db)
        assert main(["analyze", str(run), "--db", target, "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert [(p["path"], p["kind"]) for p in out["read_problems"]] == [("val", "unreadable")]
        assert out["verdict"] == "inconclusive"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode; the monkeypatched cases above "
                                              "cover the same path")
def test_a_file_without_read_permission_is_a_read_problem(tmp_path, capsys):
    from forensics.cli import main

    run = tmp_path / "run"
    _tb(run)
    (run / "config.yaml").write_text("lr: 0.1\n")
    (run / "config.yaml").chmod(0)
    assert main(["analyze", str(run), "--db", str(tmp_path / "f.duckdb"), "--json"]) == 0
    assert ("config.yaml", "unreadable") in [(p["path"], p["kind"])
                                             for p in json.loads(capsys.readouterr().out)["read_problems"]]


def test_a_link_out_of_the_run_is_not_followed(tmp_path, capsys):
    """Issue 26 item 12: `outside.log -> a file elsewhere` was read and stored as the run's own."""
    from forensics.cli import main
    from ingest import queries
    from ingest.run import ingest_run

    secret = tmp_path / "elsewhere" / "secret.log"
    secret.parent.mkdir()
    secret.write_text(console_log())
    run = tmp_path / "run"
    _tb(run)
    (run / "outside.log").symlink_to(secret)
    (run / "inside.log").symlink_to(run / "logs" / "train.log")
    (run / "logs").mkdir()
    (run / "logs" / "train.log").write_text(console_log(30))
    assert main(["ingest", str(run), "--db", str(tmp_path / "f.duckdb"), "--json"]) == 0
    [out] = json.loads(capsys.readouterr().out)["runs"]
    assert "outside.log" not in [s["path"] for s in out["sources"]]
    assert {"inside.log", "logs/train.log"} <= {s["path"] for s in out["sources"]}
    problems = [(i["path"], i["kind"]) for i in out["issues"] if i["kind"] not in queries.NOT_A_READ_PROBLEM]
    assert problems == [("outside.log", "outside_run")]  # the console reader's line tallies are no problem
    followed = ingest_run(run, tmp_path / "g.duckdb", follow_links=True)  # asked for: read
    assert "outside.log" in [s.path for s in followed.sources]
    assert main(["analyze", str(run), "--db", str(tmp_path / "h.duckdb"), "--json", "--follow-links"]) == 0
    assert "outside.log" not in [p["path"] for p in json.loads(capsys.readouterr().out)["read_problems"]]


def test_deleted_sources_and_checkpoints_are_marked_not_listed_as_ok(tmp_path, capsys):
    """Issue 26 item 12: a deleted log or checkpoint stayed `ok` in `checkpoints` and said nothing in analyze."""
    import torch

    from forensics.cli import main

    run, db = tmp_path / "run", str(tmp_path / "f.duckdb")
    _tb(run)
    (run / "train.log").write_text(console_log())
    (run / "checkpoints").mkdir()
    for step in (10, 20):
        torch.save({"w": torch.ones(3) * step, "step": step}, run / "checkpoints" / f"step_{step}.pt")
    assert main(["ingest", str(run), "--db", db]) == 0
    capsys.readouterr()
    (run / "checkpoints" / "step_20.pt").unlink()
    (run / "train.log").unlink()
    assert main(["analyze", str(run), "--db", db, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {(p["path"], p["kind"]) for p in out["read_problems"]} == {("checkpoints/step_20.pt", "deleted"),
                                                                      ("train.log", "deleted")}
    assert main(["checkpoints", str(run), "--db", db, "--json"]) == 0
    listed = {c["path"]: c["status"] for c in json.loads(capsys.readouterr().out)["checkpoints"]}
    assert listed == {"checkpoints/step_10.pt": "ok", "checkpoints/step_20.pt": "deleted"}
    (run / "train.log").write_text(console_log())  # back again: no longer marked
    assert main(["analyze", str(run), "--db", db, "--json"]) == 0
    assert [p["path"] for p in json.loads(capsys.readouterr().out)["read_problems"]] == ["checkpoints/step_20.pt"]


@pytest.mark.parametrize("reader", ["csv", "lightning"])
def test_a_table_wider_than_the_series_limit_keeps_the_first_columns(tmp_path, reader):
    """Issue 26 item 11: a metrics.csv with a 10**6-column header took 5 min 48 s and 3.4 GB (one polars select
    per column). Columns past MAX_COLUMNS are cut before parsing, with a read problem saying so."""
    from ingest.lightning import read_metrics_csv
    from ingest.tabular import MAX_COLUMNS, read_csv

    n = MAX_COLUMNS + 50
    path = tmp_path / "metrics.csv"
    path.write_text("step," + ",".join(f"m{i}" for i in range(n)) + "\n"
                    + "".join(f"{s}," + ",".join(str(s + i / n) for i in range(n)) + "\n" for s in range(3)))
    [chunk] = (read_csv if reader == "csv" else read_metrics_csv)(path)
    assert [i.kind for i in chunk.issues if i.kind == "too_large"] == ["too_large"]
    tags = chunk.scalars["tag"].cast(str).unique().to_list()
    assert len(tags) == MAX_COLUMNS - 1 and f"m{MAX_COLUMNS - 2}" in tags  # `step` is one of the columns kept
    last = chunk.scalars.filter(chunk.scalars["tag"].cast(str) == "m7")
    assert last["step"].to_list() == [0, 1, 2] and last["value"].to_list() == [7 / n, 1 + 7 / n, 2 + 7 / n]


def _series_count(db, run_id: str | None = None) -> dict[str, int]:
    """Points per series tag of `run_id` (or of the store's one run)."""
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        return dict(con.execute("SELECT tag, n_points FROM series WHERE run_id = coalesce(?, run_id)",
                                [run_id]).fetchall())


def test_a_console_log_naming_a_new_metric_on_every_line_keeps_the_first_series_and_says_so(tmp_path, monkeypatch):
    """A log naming a new metric on every line cost time per name in every stage after reading (10**6 names ran
    past 7 minutes). Past the per-file cap, the points of new names are skipped with one read problem: the loss,
    named first, is kept whole."""
    import ingest.run
    from ingest.run import ingest_run

    monkeypatch.setattr(ingest.run, "MAX_SERIES_PER_FILE", 40)
    run = tmp_path / "run"
    run.mkdir()
    (run / "train.log").write_text("".join(f"step {i} loss {2.0 / (i + 1):.4f} metric_{i} {i * 0.5}\n"
                                           for i in range(1, 201)))
    report = ingest_run(run, tmp_path / "db.duckdb")
    [problem] = [i for s in report.sources for i in s.issues if i.kind == "too_many_series"]
    assert "more than 40 series" in problem.detail and "161 more" in problem.detail  # 39 metric_i kept beside loss
    counts = _series_count(tmp_path / "db.duckdb", report.run_id)
    assert counts["loss"] == 200 and len(counts) == 40
    assert counts["metric_39"] == 1 and "metric_40" not in counts


def test_a_tensorboard_file_with_more_tags_than_the_cap_keeps_the_first_tags(tmp_path, monkeypatch):
    """The same cap for a TensorBoard file written by SummaryWriter with one scalar tag per step."""
    import ingest.run
    from ingest.run import ingest_run
    from tests.runwriters import write_tb

    monkeypatch.setattr(ingest.run, "MAX_SERIES_PER_FILE", 30)
    series = {"train/loss": (list(range(100)), [1.0 / (s + 1) for s in range(100)])}
    series.update({f"probe/unit_{s}": ([s], [float(s)]) for s in range(100)})
    report = ingest_run(write_tb(tmp_path / "run", series), tmp_path / "db.duckdb")
    assert [i.kind for s in report.sources for i in s.issues if i.kind == "too_many_series"] == ["too_many_series"]
    counts = _series_count(tmp_path / "db.duckdb", report.run_id)
    assert len(counts) == 30 and counts["train/loss"] == 100


BIG = "9" * 5000  # more digits than Python's int() converts by default (4,300)
GOOD = [(i, 2.0 / (i + 1)) for i in range(1, 30)]


@pytest.mark.parametrize("name, text, far_line", [
    ("train.log", "".join(f"step {s} loss {v:.4f}\n" for s, v in GOOD) + f"step {2**64} loss 0.5\n", 30),
    ("train.log", "".join(f"step {s} loss {v:.4f}\n" for s, v in GOOD) + f"step {BIG} loss 0.5\n", 30),
    ("metrics.csv", "step,train_loss\n" + "".join(f"{s},{v}\n" for s, v in GOOD) + f"{2**64},0.5\n", 31),
    ("log.jsonl", "".join(json.dumps({"step": s, "loss": v}) + "\n" for s, v in GOOD)
     + '{"step": %d, "loss": 0.5}\n' % 2**64, 30),
])
def test_a_step_past_64_bits_in_a_text_log_skips_its_line_and_names_it(tmp_path, capsys, name, text, far_line):
    """A 5,000-digit step in a console log (int() refuses the digits), a 2**64 step in a CSV (the Int64 cast
    fails) or in JSON lines: a traceback, and the run not analysed. The line is skipped and named; the rest kept."""
    from forensics.cli import main

    run = tmp_path / "run"
    run.mkdir()
    (run / name).write_text(text)
    assert main(["analyze", str(run), "--db", str(tmp_path / "db.duckdb"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    [far] = [p for p in report["read_problems"] if p["kind"] == "out_of_range"]
    assert far["position"] == far_line and "past 64 bits" in far["detail"]
    counts = _series_count(tmp_path / "db.duckdb")
    assert counts[next(t for t in counts if "loss" in t)] == len(GOOD)


def test_an_integer_past_float64_in_json_lines_is_inf_and_named(tmp_path):
    from ingest.tabular import read_jsonl

    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps({"step": s, "loss": v}) + "\n" for s, v in GOOD)
                    + '{"step": 30, "loss": 1%s}\n{"step": 31, "grad_norm": %s}\n' % ("0" * 400, BIG))
    [chunk] = list(read_jsonl(path))
    tail = chunk.scalars.filter(chunk.scalars["step"] >= 30).sort("step")
    assert tail["value"].to_list() == [math.inf, math.inf]
    assert [(i.kind, i.position) for i in chunk.issues] == [("out_of_range", 30), ("out_of_range", 31)]
    assert "401 digits" in chunk.issues[0].detail and "5,000 digits" in chunk.issues[1].detail


def test_a_config_holding_an_integer_of_thousands_of_digits_is_read(tmp_path):
    """json.loads refused the digits: the whole config.json was a garbled file and the run inconclusive."""
    [chunk] = list(read_config_file(tmp_path, '{"lr": 0.001, "epochs": %s, "batch_size": %d}' % (BIG, 2**64)))
    assert not chunk.issues
    doc = chunk.configs["config.json"]
    assert doc["lr"] == 0.001 and doc["batch_size"] == 2**64 and math.isinf(doc["epochs"])


def read_config_file(folder, text: str):
    path = folder / "config.json"
    path.write_text(text)
    return read_config(path)


# -- the fuzz-style suite: each hostile file beside a good run, analysed in a subprocess under ceilings ------------

MEMORY_GOAL = 1.5 * 2**30  # issue 26: no file under 100 MB takes analyze over 1.5 GB
WALL_S = 240


def _bytes_path(path, name: bytes) -> bytes:
    return os.fsencode(path) + b"/" + name


def _forged_length_event_file(run) -> str:
    """A real event file with a record whose length field claims 2**63 bytes (its CRC valid)."""
    from tests.tb_reference import masked_crc

    [path] = run.glob("events.out.tfevents.*")
    header = (2**63).to_bytes(8, "little")
    with open(path, "ab") as f:
        f.write(header + masked_crc(header).to_bytes(4, "little") + b"\0" * 64)
    return path.name


def _hostile_console(run) -> str:
    lines = [b"step 1 loss 2.0\n", b"step 2 loss \x1b]0;pwned\x07 1.5\n", b"\xff\xfe step 3 loss 1.0\n",
             b"step 4 loss 0.5\x00\x00\n", b"\r\rstep 5 loss nan\r\n", b"x" * 2_000_000 + b"\n"]
    (run / "console.log").write_bytes(b"".join(lines))
    return "console.log"


def _write(rel: str, text: str | bytes):
    def make(run) -> str:
        path = run / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        return rel
    return make


def _safetensors(header: dict, data: bytes):
    return _write("model.safetensors", safetensors_bytes(header, data))


def _non_utf8_name(run) -> None:
    with open(_bytes_path(run, b"log\xff\x1b[2J.log"), "wb") as f:
        f.write(console_log().encode())
    return None  # read like any log: no problem to name


def _outside_link(run) -> str:
    (run / "outside.log").symlink_to("/etc/passwd")
    return "outside.log"


def _wide_csv(run) -> str:
    n = 200_000
    (run / "metrics.csv").write_text("step," + ",".join(f"m{i}" for i in range(n)) + "\n"
                                     + "".join(f"{s}," + ",".join(["0.5"] * n) + "\n" for s in range(3)))
    return "metrics.csv"


def _no_step_checkpoint(run) -> str | None:
    import torch

    torch.save({"w": torch.tensor([1.0, float("nan")])}, run / "best_model.pth")
    return "best_model.pth"


DEEP = "[" * 100_000 + "]" * 100_000
HOSTILE = {
    "yaml_alias_bomb": _write("config.yaml", alias_bomb()),
    "yaml_deep": _write("config.yaml", "a: " + DEEP),
    "yaml_cycle": _write("hparams.yaml", "a: &a [*a]\n"),
    "json_deep_config": _write("config.json", DEEP),
    "json_deep_trainer_state": _write("trainer_state.json", '{"log_history": ' + DEEP + "}"),
    "json_deep_wandb_summary": _write("wandb/run-x/files/wandb-summary.json", '{"loss": ' + DEEP + "}"),
    "jsonl_deep_line": _write("metrics.jsonl", '{"step": 1, "loss": 1.0}\n' + DEEP + "\n"),
    "safetensors_deep_header": _write("model.safetensors", struct.pack("<Q", len(DEEP)) + DEEP.encode()),
    "safetensors_list_metadata": _safetensors({"__metadata__": [1], "w": {"dtype": "F32", "shape": [2],
                                                                           "data_offsets": [0, 8]}}, bytes(8)),
    "safetensors_huge_shape": _safetensors({"w": {"dtype": "F32", "shape": [2**40], "data_offsets": [0, 16]}},
                                           bytes(16)),
    "safetensors_offset_into_header": _safetensors({"w": {"dtype": "F32", "shape": [4],
                                                          "data_offsets": [-40, -24]}}, bytes(16)),
    "safetensors_header_length_2_63": _write("model.safetensors", struct.pack("<Q", 2**63) + b"{}"),
    "event_length_2_63": _forged_length_event_file,
    "console_control_bytes": _hostile_console,
    "non_utf8_file_name": _non_utf8_name,
    "link_out_of_the_run": _outside_link,
    "csv_200k_columns": _wide_csv,
    "checkpoint_without_step": _no_step_checkpoint,
}


# The child reports its own peak RSS last, whatever way the CLI ends (a traceback, if any, still follows it). It calls
# main with its arguments: as the process's own command, main would end it with os._exit (services.process.leave_now), past this.
_CHILD = ("import resource, sys\n"
          "try:\n"
          "    from forensics.cli import main\n"
          "    sys.exit(main(sys.argv[1:]))\n"
          "finally:\n"
          "    sys.stderr.write(f'\\npeak_rss_kb {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\\n')\n")


def _run_capped(argv: list[str], file_size: int | None = None) -> tuple[int, str, str, int]:
    """The CLI in a subprocess under an address-space and CPU-time ceiling: (exit code, stdout, stderr without
    the last line, peak RSS in bytes). `file_size` caps the bytes any file it writes may hold (RLIMIT_FSIZE, with
    SIGXFSZ ignored so that a write fails as on a full disk)."""
    import resource
    import signal
    import subprocess
    import sys

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (8 * 2**30, 8 * 2**30))  # a backstop; the goal is checked after
        resource.setrlimit(resource.RLIMIT_CPU, (WALL_S, WALL_S))
        if file_size is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    proc = subprocess.run([sys.executable, "-c", _CHILD, *argv], env={**os.environ, "PYTHONPATH": str(REPO)},
                          preexec_fn=limits, capture_output=True, timeout=WALL_S * 2)
    err = proc.stderr.decode(errors="replace").rstrip("\n")
    err, _, last = err.rpartition("\n")
    assert last.startswith("peak_rss_kb "), err + last
    return proc.returncode, proc.stdout.decode(errors="replace"), err, int(last.split()[1]) * 1024


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_file_is_a_read_problem_within_bounds_and_the_runs_beside_it_are_analysed(tmp_path, case):
    """Issue 26, "How to test it": exit 0 or 2, never a traceback, the message names the file, no point stored
    twice, peak memory under the goal, and the good run beside it (and the good log in its own run) analysed."""
    import duckdb

    root = tmp_path / "runs"
    _tb(root / "good")
    _tb(root / "hostile")
    named = HOSTILE[case](root / "hostile")
    db = tmp_path / "f.duckdb"
    code, out, err, rss = _run_capped(["analyze", str(root), "--all", "--json", "--db", str(db)])
    assert code in (0, 2) and "Traceback" not in err, err[-3000:]
    assert rss < MEMORY_GOAL, f"peak RSS {rss / 2**30:.2f} GiB"
    if named:
        assert named in out + err
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) - count(DISTINCT (source_id, series_id, position, step)) "
                           "FROM scalars").fetchone() == (0,)
        points = dict(con.execute("SELECT r.name, count(*) FROM scalars p JOIN series s USING (series_id) "
                                  "JOIN runs r ON r.run_id = s.run_id WHERE s.format = 'tensorboard' "
                                  "GROUP BY r.name").fetchall())
        analysed = {r for (r,) in con.execute("SELECT DISTINCT r.name FROM analyses a JOIN runs r USING (run_id)"
                                              ).fetchall()}
    assert points == {"good": 60, "hostile": 60} and analysed == {"good", "hostile"}


# -- Hypothesis: the document and console readers on nesting, aliases, control characters, invalid UTF-8 --------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
import polars as pl  # noqa: E402

_DOC_FRAGMENTS = ["a: ", "- ", "[", "]", "{", "}", ", ", "\n", "  ", "&x ", "*x", "&y [*x, *x]", "*y", "!!python/tuple ",
                  "!foo ", '"', "'", "\\", ": ", "1e999", "NaN", "Infinity", "-", "null", "\x00", "\x1b]0;t\x07",
                  "\ud800", "\t", "#", "---\n", "...", "? ", "|", ">", "%YAML 1.1\n", "<<: *x"]
_RAW_FRAGMENTS = [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xef\xbb\xbf", b"\r", b"\r\n"]


def _fragments_text(parts: list) -> bytes:
    return b"".join(p if isinstance(p, bytes) else p.encode("utf-8", "surrogatepass") for p in parts)


@settings(deadline=None)  # two shared cores: timings vary (DECISIONS.md §14), in any profile
@given(parts=st.lists(st.sampled_from(_DOC_FRAGMENTS + _RAW_FRAGMENTS), max_size=40),
       depth=st.integers(0, 3 * MAX_DEPTH), suffix=st.sampled_from([".yaml", ".json"]))
def test_any_document_is_read_or_refused_never_raised(tmp_path_factory, parts, depth, suffix):
    """Whatever the bytes, a config reads as one chunk: its values (which flatten and store as JSON), or one issue
    naming the file."""
    from ingest.configs import flatten
    from ingest.writes import _json_value

    path = tmp_path_factory.mktemp("doc") / f"config{suffix}"
    path.write_bytes(b"[" * depth + _fragments_text(parts) + b"]" * depth)
    [chunk] = read_config(path)
    if chunk.issues:
        assert not chunk.configs and len(chunk.issues) == 1 and "config" in chunk.issues[0].detail
    else:
        for _, value in flatten(chunk.configs[path.name]):
            _json_value(value)


@settings(deadline=None)  # two shared cores: timings vary (DECISIONS.md §14), in any profile
@given(entries=st.lists(st.recursive(st.none() | st.booleans() | st.floats() | st.text(max_size=5),
                                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3),
                                                                                                 inner, max_size=3),
                                     max_leaves=20), max_size=5),
       cut=st.integers(0, 400), depth=st.integers(0, 2 * MAX_DEPTH))
def test_any_trainer_state_is_read_or_refused_never_raised(tmp_path_factory, entries, cut, depth):
    from ingest.hf_trainer import read_trainer_state

    history = [{"step": i, "loss": 1.0, "extra": e} for i, e in enumerate(entries)]
    text = json.dumps({"global_step": 3, "log_history": history})
    nested = "[" * depth + "]" * depth
    text = text.replace('"global_step": 3', f'"global_step": 3, "deep": {nested}' if depth else '"global_step": 3')
    path = tmp_path_factory.mktemp("hf") / "trainer_state.json"
    path.write_text(text[: len(text) - cut] if cut else text)
    chunks = list(read_trainer_state(path))
    assert len(chunks) == 1
    points = chunks[0].scalars
    if points is not None:
        assert points["position"].n_unique() <= len(history)


_LINE_FRAGMENTS = [b"step ", b"loss ", b"epoch ", b"iter ", b"1", b"0.5", b"nan", b"inf", b"-", b"=", b": ", b" ",
                   b"|", b"\t", b"\x1b[31m", b"\x1b[0m", b"\x1b]0;title\x07", b"\x00", b"\xff", b"\xc3\xa9",
                   b"\xed\xa0\x80", b"\r", b"\n", b"1e308", b"[", b"]", b"/", b"%", b"lr ", b"grad_norm "]


@settings(deadline=None)  # two shared cores: timings vary (DECISIONS.md §14), in any profile
@given(parts=st.lists(st.sampled_from(_LINE_FRAGMENTS), max_size=60), split=st.integers(0, 400))
def test_any_console_bytes_read_whole_or_resumed_give_each_point_once(tmp_path_factory, parts, split):
    """The console reader on control characters, escapes and invalid UTF-8: never raises, and a read resumed at a
    chunk's end over the file grown after it stores no position twice and the same points as one whole read."""
    from ingest.console import _is_binary, read_console

    data = b"".join(parts)
    path = tmp_path_factory.mktemp("console") / "train.log"
    path.write_bytes(data)
    whole = _console_points(read_console(path))
    path.write_bytes(data[:split])
    first = list(read_console(path))
    resume_at = first[-1].end if first else 0
    path.write_bytes(data)
    resumed = _console_points(first + list(read_console(path, resume_at)))
    assert all(0 <= p < len(data) for p, _, _ in resumed)
    assert len(resumed) == len(set(resumed))
    if not _is_binary(data[:4096]):  # a file whose head is binary keeps nothing read whole, by design; read in
        assert sorted(resumed) == sorted(whole)  # pieces its first piece may have been text, and is kept


def _console_points(chunks) -> list[tuple[int, str, str]]:
    """(position, tag, value as text: NaN equals NaN) of every point in `chunks`."""
    return [(p, str(t), repr(v)) for c in chunks if c.scalars is not None
            for p, t, v in c.scalars.select("position", pl.col("tag").cast(pl.Utf8), "value").rows()]


@settings(deadline=None)  # two shared cores: timings vary (DECISIONS.md §14), in any profile
@given(name=st.binary(min_size=1, max_size=12).filter(lambda b: b"/" not in b and b"\0" not in b))
def test_any_file_name_stores_as_utf8_and_a_utf8_name_as_it_is(name):
    from ingest.names import storable

    text = os.fsdecode(name)
    stored = storable(text)
    stored.encode("utf-8")  # always storable
    try:
        assert stored == name.decode("utf-8")
    except UnicodeDecodeError:
        assert "\\x" in stored


def test_a_log_whose_first_flush_looks_binary_is_judged_again_from_its_start(tmp_path):
    """Found by the property above: 5 bytes that looked binary were skipped to their end, and the next read went
    on from the middle of a line, storing a point `ep loss`. The verdict now consumes nothing."""
    from ingest.console import read_console

    data = b"\xed\xa0\x80step loss 1\r"
    path = tmp_path / "train.log"
    path.write_bytes(data[:5])
    [chunk] = read_console(path)
    assert chunk.end == 0 and [i.kind for i in chunk.issues] == ["not_this_format"]
    path.write_bytes(data)
    tags = [t for c in read_console(path, chunk.end) if c.scalars is not None for t in c.scalars["tag"].cast(str)]
    assert tags in ([], ["loss"])  # the whole line's `loss 1` at most, never a mid-line `ep loss`


def test_a_database_write_that_fails_is_one_line_and_the_store_stays_intact(tmp_path):
    """Issue 26 item 7: a full disk (`IOException: No space left on device`, or a failed COMMIT) ended in a
    traceback. Here the files it writes may not pass 20 kB (RLIMIT_FSIZE): its writes fail as on a full disk."""
    import duckdb

    _tb(tmp_path / "first")
    _tb(tmp_path / "second", 2000)
    db = tmp_path / "f.duckdb"
    assert _run_capped(["analyze", str(tmp_path / "first"), "--db", str(db)])[0] == 0
    with duckdb.connect(str(db), read_only=True) as con:
        before = con.execute("SELECT count(*) FROM scalars").fetchone()
    # 20 kB: the write-ahead log of the second run's points cannot be written (and no block past it of the file)
    code, out, err, _ = _run_capped(["analyze", str(tmp_path / "second"), "--db", str(db)], file_size=20_000)
    assert code == 2 and "Traceback" not in err and err.strip().startswith("forensics: error: cannot write")
    assert len(err.strip().splitlines()) == 1, err
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM scalars").fetchone() >= before
        assert con.execute("SELECT count(*) - count(DISTINCT (source_id, series_id, position)) FROM scalars"
                           ).fetchone() == (0,)


def test_an_unreadable_root_config_is_an_issue_for_replay_too(tmp_path, monkeypatch):
    """Replay and probe read the root config outside ingest's walk: an unreadable one is an issue, not an OSError."""
    from ingest.configs import root_config

    (tmp_path / "config.yaml").write_text("lr: 0.1\n")
    _denied(monkeypatch, "config.yaml")
    doc, name, issue = root_config(tmp_path)
    assert (doc, name, issue.kind) == (None, "config.yaml", "unreadable")
