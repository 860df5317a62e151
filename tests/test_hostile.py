"""Hostile and faulty inputs (issue 26): each reader turns a damaged or malicious file into a read problem, within
bounded memory, and keeps what it can. The files are built here by the tests, never shipped as fixtures."""

from __future__ import annotations

import json
import os
import struct

import pytest

from ingest.configs import MAX_DEPTH, MAX_NODES, DocumentTooLarge, parse_config_text, read_config
from ingest.tensorfiles import Unreadable, read_safetensors_header


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
    from forensics.watch import Watcher, WatchSettings

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


def _tb(root, n: int = 60):
    from tests.runwriters import curve, write_tb

    return write_tb(root, {"loss": curve(n)})


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
    assert main(["analyze", str(run), "--db", str(db), "--json"]) == 0
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
    assert [(i["path"], i["kind"]) for i in out["issues"]] == [("outside.log", "outside_run")]
    followed = ingest_run(run, tmp_path / "g.duckdb", follow_links=True)  # asked for: read
    assert "outside.log" in [s.path for s in followed.sources]
