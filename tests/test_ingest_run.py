"""Run ingest through the CLI: discovery, idempotence, bad input, and never writing into the run."""

import json
import os

import duckdb
import pytest
import yaml

from forensics.cli import main
from tests.writers import TrainerState


def _snapshot(root):
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


@pytest.fixture
def config_run(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump({"optimizer": {"lr": 3e-4, "name": "adamw"},
                                                    "max_grad_norm": 1.0, "num_classes": 10}))
    (run / "notes.bin").write_bytes(b"\x00\x01")
    return run


def test_config_values_are_stored_flat_and_unknown_files_listed(config_run, tmp_path, capsys):
    db = tmp_path / "f.duckdb"
    before = _snapshot(config_run)
    assert main(["ingest", str(config_run), "--db", str(db), "--quiet"]) == 0
    assert _snapshot(config_run) == before, "ingest must never write into the run directory"
    assert "notes.bin" in capsys.readouterr().err
    con = duckdb.connect(str(db), read_only=True)
    values = dict(con.execute("SELECT key, value_num FROM configs").fetchall())
    assert values["optimizer.lr"] == pytest.approx(3e-4)
    assert values["max_grad_norm"] == 1.0
    issues = con.execute("SELECT path, kind FROM ingest_issues").fetchall()
    assert ("notes.bin", "unknown_file") in issues
    con.close()


def test_reingest_reads_nothing_new(config_run, tmp_path, capsys):
    db = tmp_path / "f.duckdb"
    assert main(["ingest", str(config_run), "--db", str(db), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["ingest", str(config_run), "--db", str(db), "--quiet", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["runs"][0]["sources"] == []
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM configs").fetchone()[0] == 4
    assert con.execute("SELECT count(*) FROM ingest_issues").fetchone()[0] == 1
    con.close()


def test_changed_config_replaces_its_values(config_run, tmp_path):
    db = tmp_path / "f.duckdb"
    assert main(["ingest", str(config_run), "--db", str(db), "--quiet"]) == 0
    (config_run / "config.yaml").write_text(yaml.safe_dump({"max_grad_norm": 0.5}))
    os.utime(config_run / "config.yaml", ns=(1, 1))
    assert main(["ingest", str(config_run), "--db", str(db), "--quiet"]) == 0
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT key, value_num FROM configs").fetchall() == [("max_grad_norm", 0.5)]
    con.close()


def test_garbled_config_is_an_issue_not_a_traceback(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text('{"lr": 0.1, ')
    (run / "hparams.yaml").write_text("lr: 0.1\n")
    assert main(["ingest", str(run), "--db", str(tmp_path / "f.duckdb"), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "config.json" in err and "garbled" in err


@pytest.mark.parametrize("make", ["missing", "empty", "unknown_only", "file"])
def test_unreadable_run_is_one_line_and_exit_2(tmp_path, capsys, make):
    target = tmp_path / "run"
    if make == "empty":
        target.mkdir()
    elif make == "unknown_only":
        target.mkdir()
        (target / "photo.jpg").write_bytes(b"\xff\xd8\xff")
    elif make == "file":
        target.write_text("x")
    assert main(["ingest", str(target), "--db", str(tmp_path / "f.duckdb"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("forensics: error:") and "Traceback" not in "\n".join(err)


def test_runs_lists_ingested_runs(config_run, tmp_path, capsys):
    db = tmp_path / "f.duckdb"
    assert main(["ingest", str(config_run), "--db", str(db), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["runs", "--db", str(db), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in out["runs"]] == ["run"]
    assert out["runs"][0]["sources"][0]["format"] == "config"


def test_runs_without_database_exits_2(tmp_path, capsys):
    assert main(["runs", "--db", str(tmp_path / "none.duckdb")]) == 2
    assert "forensics ingest" in capsys.readouterr().err


def test_help_ends_with_an_example(capsys):
    assert main(["ingest", "--help"]) == 0
    assert "example:" in capsys.readouterr().out


def test_hf_checkpoint_copies_of_trainer_state_are_stored_once(tmp_path):
    """DECISIONS §3: checkpoint-*/trainer_state.json repeats the root log_history; store each point once."""
    run = tmp_path / "run"
    (run / "checkpoint-20").mkdir(parents=True)
    history = [{"epoch": s / 100, "grad_norm": 1.0, "learning_rate": 1e-4, "loss": 2.0 - s / 100, "step": s}
               for s in range(5, 45, 5)]
    history[-1]["loss"] = float("nan")
    TrainerState(global_step=40, max_steps=40, logging_steps=5, log_history=history).save_to_json(run / "trainer_state.json")
    TrainerState(global_step=20, max_steps=40, logging_steps=5, log_history=history[:4]).save_to_json(
        run / "checkpoint-20" / "trainer_state.json")
    db = tmp_path / "f.duckdb"
    assert main(["ingest", str(run), "--db", str(db), "--quiet"]) == 0
    con = duckdb.connect(str(db), read_only=True)
    losses = con.execute("SELECT step, value FROM scalars JOIN series USING (series_id) "
                         "WHERE series.tag = 'loss' ORDER BY step").fetchall()
    assert [s for s, _ in losses] == list(range(5, 45, 5))
    assert losses[-1][1] != losses[-1][1]  # NaN kept
    dup = dict(con.execute("SELECT path, duplicate_points FROM sources").fetchall())
    assert dup["checkpoint-20/trainer_state.json"] == 4 * 4  # 4 entries x (epoch, grad_norm, lr, loss)
    assert dup["trainer_state.json"] == 0
    con.close()


def test_help_examples_name_runs_that_exist(capsys):
    """Every example in --help must run as written: the sample run it names exists."""
    import re

    from tests.paths import REPO

    for command in ([], ["ingest"], ["runs"], ["analyze"], ["rules"], ["checkpoints"]):
        assert main([*command, "--help"]) == 0
        for path in re.findall(r"sample_runs/runs/\w+", capsys.readouterr().out):
            assert (REPO / path).is_dir(), path


def test_stored_status_matches_the_report(tmp_path, capsys):
    """The database and the ingest report once disagreed: 'partial' stored for a file reported 'unreadable'."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump({"lr": 0.1}))
    (run / "events.out.tfevents.1.host").write_bytes(b"this is not an event file at all")
    db = tmp_path / "f.duckdb"
    assert main(["ingest", str(run), "--db", str(db), "--quiet", "--json"]) == 0
    reported = {s["path"]: s["status"] for s in json.loads(capsys.readouterr().out)["runs"][0]["sources"]}
    assert main(["runs", "--db", str(db), "--json"]) == 0
    stored = {s["path"]: s["status"] for s in json.loads(capsys.readouterr().out)["runs"][0]["sources"]}
    assert reported == stored == {"config.yaml": "ok", "events.out.tfevents.1.host": "unreadable"}


def test_progress_is_a_callback_the_caller_draws(tmp_path):
    """Issue 11: ingest reports progress through one callback (stage, bytes done, bytes total); the CLI draws it."""
    from ingest.run import ingest_run
    from tests.paths import REPO

    run = REPO / "sample_runs" / "runs" / "nan_lr_too_high"  # event files, checkpoints and saved batches
    calls: list[tuple[str, int, int]] = []
    ingest_run(run, tmp_path / "f.duckdb", progress=lambda stage, done, total: calls.append((stage, done, total)))
    stages = [c[0] for c in calls]
    assert set(stages) == {"logs", "checkpoints"} and stages.index("checkpoints") > max(
        i for i, s in enumerate(stages) if s == "logs")
    for stage in ("logs", "checkpoints"):
        done = [d for s, d, _ in calls if s == stage]
        [total] = {t for s, _, t in calls if s == stage}
        assert done == sorted(done) and done[-1] == total > 0


def test_small_log_that_grows_is_read_on_not_read_again(tmp_path):
    """Regression (found by the watch issue's tests): a log under 4 KiB when first ingested grew into its own head
    hash, so ingest took it for a rewritten file, read it again from byte 0 and stored its first points twice."""
    from torch.utils.tensorboard import SummaryWriter

    from ingest.run import ingest_run
    from ingest.store import connect

    w = SummaryWriter(str(tmp_path / "run"))
    for step in range(20):
        w.add_scalar("loss", 1.0 / (step + 1), step)
    w.flush()  # the writer is still open: the job goes on
    db = tmp_path / "f.duckdb"
    assert ingest_run(tmp_path / "run", db, progress=None).points == 20
    for step in range(20, 200):
        w.add_scalar("loss", 1.0 / (step + 1), step)
    w.close()
    assert ingest_run(tmp_path / "run", db, progress=None).points == 180
    with connect(db, write=False) as con:
        assert con.execute("SELECT count(*), count(DISTINCT position) FROM scalars").fetchone() == (200, 200)


def _reader_before_the_fix(path, start):
    """The console reader as it was before a fix: the same chunks without their loss points (as the reader
    read litgpt's `iter N step M: loss X` lines before it learned two counters on one line)."""
    import polars as pl

    from ingest.console import read_console

    for chunk in read_console(path, start):
        if chunk.scalars is not None:
            chunk.scalars = chunk.scalars.filter(pl.col("tag").cast(pl.Utf8) != "loss")
        yield chunk


def test_a_reader_fix_reaches_a_run_stored_before_it(tmp_path, monkeypatch):
    """Ingest is incremental, so without a reader version a fixed reader would never see a file it had read:
    the store would keep the old parse. A source parsed by another version of its reader is forgotten and read
    again, its points counted once; a source of the current version is left alone."""
    import dataclasses

    from ingest import formats

    run = tmp_path / "run"
    run.mkdir()
    lines = [f"iter {2 * i} step {i}: loss {10.8 - 0.05 * i:.4f}, iter time: 197.87ms" for i in range(1, 41)]
    (run / "train.log").write_text("\n".join(lines) + "\n")
    db = tmp_path / "f.duckdb"
    i = next(k for k, f in enumerate(formats.FORMATS) if f.name == "console")
    fixed = formats.FORMATS[i]
    before = dataclasses.replace(fixed, reader="tests.test_ingest_run:_reader_before_the_fix",
                                 version=fixed.version - 1)
    monkeypatch.setattr(formats, "FORMATS", formats.FORMATS[:i] + [before] + formats.FORMATS[i + 1:])
    assert main(["ingest", str(run), "--db", str(db), "--quiet"]) == 0

    def stored():
        with duckdb.connect(str(db), read_only=True) as con:
            tags = dict(con.execute("SELECT tag, n_points FROM series").fetchall())
            return (tags, con.execute("SELECT count(*) FROM scalars").fetchone()[0],
                    con.execute("SELECT reader_version FROM sources").fetchall())

    old_tags, old_points, old_version = stored()
    assert "loss" not in old_tags and old_points > 0 and old_version == [(fixed.version - 1,)]
    monkeypatch.undo()  # the upgrade: today's reader
    assert main(["ingest", str(run), "--db", str(db), "--quiet"]) == 0
    tags, points, version = stored()
    assert tags["loss"] == 40 and version == [(fixed.version,)]
    assert points == old_points + 40  # the old parse's points were forgotten, not stored twice
    assert main(["ingest", str(run), "--db", str(db), "--quiet"]) == 0
    assert stored() == (tags, points, version)  # the same version: nothing read again


def test_a_store_from_before_reader_versions_reads_its_logs_again_once(tmp_path):
    """A schema-4 store has no reader versions: the write that upgrades it leaves them empty, so the next ingest
    reads every log again with today's readers, replacing (never doubling) the old points."""
    from tests.runwriters import curve, write_tb

    run = write_tb(tmp_path / "run", {"loss": curve(n=50)})
    db = tmp_path / "f.duckdb"
    assert main(["ingest", str(run), "--db", str(db), "--quiet"]) == 0
    con = duckdb.connect(str(db))
    con.execute("ALTER TABLE sources DROP COLUMN reader_version")
    con.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    con.close()
    import ingest.store
    ingest.store._SCHEMA_READY.clear()
    assert main(["ingest", str(run), "--db", str(db), "--quiet"]) == 0
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*), count(DISTINCT position) FROM scalars").fetchone() == (50, 50)
        assert con.execute("SELECT n_points FROM series").fetchall() == [(50,)]
        assert con.execute("SELECT reader_version FROM sources").fetchall() == [(1,)]


def _tb_run(root, steps, scale=1.0):
    """A real event file (SummaryWriter) holding loss at `steps`; returns its path."""
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(str(root))
    for step in steps:
        w.add_scalar("loss", scale / (step + 1), step)
    w.close()
    [path] = root.glob("events.out.tfevents.*")
    return path


@pytest.mark.parametrize("how", ["cut", "replaced"])
def test_a_log_rewritten_shorter_forgets_its_old_points(tmp_path, how):
    """Issue 26 item 3: a file rewritten shorter was read again from byte 0 while its old points stayed: an
    event file cut to a third held 533 points where a fresh read holds 133; one replaced by a different, shorter
    file kept points no file holds any more. A rewrite forgets the source's points first, and says so."""
    from ingest.run import ingest_run
    from ingest.store import connect

    run, db = tmp_path / "run", tmp_path / "f.duckdb"
    path = _tb_run(run, range(400))
    assert ingest_run(run, db).points == 400
    if how == "cut":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 3])
    else:
        other = _tb_run(tmp_path / "other", range(0, 300, 3), scale=7.0)
        path.write_bytes(other.read_bytes())
    report = ingest_run(run, db)
    fresh = ingest_run(run, tmp_path / "fresh.duckdb")
    assert report.points == fresh.points
    assert [i.kind for _, i in report.issues if i.kind == "rewritten"] == ["rewritten"]
    with connect(db, write=False) as con, connect(tmp_path / "fresh.duckdb", write=False) as fresh_con:
        query = "SELECT step, value FROM scalars ORDER BY step, position"
        assert con.execute(query).fetchall() == fresh_con.execute(query).fetchall()
        sources = "SELECT status, n_points FROM sources"
        assert con.execute(sources).fetchall() == fresh_con.execute(sources).fetchall()


def test_read_ahead_keeps_order_raises_the_readers_error_and_stops_its_thread():
    """The store reads one chunk ahead in a second thread (issue 28): what it hands over is what the reader
    yielded, in order; the reader's error is raised in the caller after the chunks before it; closing early
    ends the reader (its generator is closed, in its own thread)."""
    import threading

    from ingest.run import _read_ahead

    closed = []

    def reader(n, fail_at=None):
        try:
            for i in range(n):
                if i == fail_at:
                    raise OSError(5, "Input/output error")
                yield i
        finally:
            closed.append(threading.current_thread().name)

    assert list(_read_ahead(reader(5))) == [0, 1, 2, 3, 4]
    got = []
    with pytest.raises(OSError, match="Input/output"):
        for c in _read_ahead(reader(5, fail_at=3)):
            got.append(c)
    assert got == [0, 1, 2]
    chunks = _read_ahead(reader(1000))
    assert next(chunks) == 0
    chunks.close()
    assert closed == ["forensics-read-ahead"] * 3
    assert not any(t.name == "forensics-read-ahead" for t in threading.enumerate())


def _lfs_pointer(content: bytes) -> bytes:
    """What `git lfs` checks out in place of `content` when the LFS object is not fetched (the pointer spec v1)."""
    import hashlib

    return (b"version https://git-lfs.github.com/spec/v1\noid sha256:" + hashlib.sha256(content).hexdigest().encode()
            + b"\nsize " + str(len(content)).encode() + b"\n")


def test_a_git_lfs_pointer_in_place_of_a_log_or_checkpoint_says_so_and_the_rest_is_read(tmp_path):
    """A clone without LFS holds pointers where event files, JSON-lines logs and checkpoints were: each is one
    `lfs_pointer` read problem naming the size it stands for (not 'not an event file', not garbled lines), and
    what was checked out is read. Once the file is fetched, the next ingest reads it."""
    import torch

    run = tmp_path / "run"
    _tb_run(run / "train", range(5))
    fetched = _tb_run(tmp_path / "elsewhere", range(20), scale=2.0)
    (run / "val").mkdir()
    pointer = run / "val" / fetched.name
    pointer.write_bytes(_lfs_pointer(fetched.read_bytes()))
    log = b"".join(json.dumps({"step": s, "loss": 1.0 / (s + 1)}).encode() + b"\n" for s in range(30))
    (run / "metrics.jsonl").write_bytes(_lfs_pointer(log))
    torch.save({"w": torch.ones(3)}, tmp_path / "model.pt")
    (run / "model.pt").write_bytes(_lfs_pointer((tmp_path / "model.pt").read_bytes()))
    db = tmp_path / "f.duckdb"
    assert main(["ingest", str(run), "--db", str(db), "--quiet"]) == 0
    with duckdb.connect(str(db), read_only=True) as con:
        issues = dict(con.execute("SELECT path, kind FROM ingest_issues").fetchall())
        details = " ".join(d for (d,) in con.execute("SELECT detail FROM ingest_issues").fetchall())
        assert con.execute("SELECT sum(n_points) FROM series").fetchone() == (5,)
    assert issues == {f"val/{fetched.name}": "lfs_pointer", "metrics.jsonl": "lfs_pointer", "model.pt": "lfs_pointer"}
    assert f"{fetched.stat().st_size:,} bytes" in details and f"{len(log):,} bytes" in details

    pointer.write_bytes(fetched.read_bytes())  # `git lfs pull`
    (run / "metrics.jsonl").write_bytes(log)
    assert main(["ingest", str(run), "--db", str(db), "--quiet"]) == 0
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT sum(n_points) FROM series").fetchone() == (55,)
        assert con.execute("SELECT count(*) FROM ingest_issues WHERE kind = 'lfs_pointer'").fetchone() == (1,)
