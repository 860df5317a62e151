"""The store: where it lives, lock handling, schema version checks, concurrent ingests, interrupts."""

import json
import subprocess
import sys
import textwrap
import time

import duckdb
import pytest

from ingest.errors import ForensicsError, SchemaError, StoreLocked
from ingest.schema import SCHEMA_VERSION
from forensics.cli import db_path
from ingest.store import connect


def test_db_path_prefers_flag_then_env_then_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FORENSICS_DB", str(tmp_path / "env.duckdb"))
    assert db_path(tmp_path / "flag.duckdb") == tmp_path / "flag.duckdb"
    assert db_path(None) == tmp_path / "env.duckdb"
    monkeypatch.delenv("FORENSICS_DB")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert db_path(None) == tmp_path / "cache" / "run-forensics" / "forensics.duckdb"


def test_reading_a_missing_database_says_to_ingest_first(tmp_path):
    with pytest.raises(ForensicsError, match="forensics ingest"):
        with connect(tmp_path / "none.duckdb", write=False):
            pass


def test_write_creates_schema_and_records_version(tmp_path):
    db = tmp_path / "f.duckdb"
    with connect(db, write=True) as con:
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert {"scalars", "series", "sources", "findings", "tensor_stats", "batches", "ingest_issues"} <= tables
    with connect(db, write=False) as con:
        assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)


def test_newer_schema_is_refused_with_a_clear_message(tmp_path):
    db = tmp_path / "f.duckdb"
    with connect(db, write=True):
        pass
    con = duckdb.connect(str(db))
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION + 1)])
    con.close()
    with pytest.raises(SchemaError, match="newer run-forensics"):
        with connect(db, write=False):
            pass


def test_lock_held_by_another_process_fails_with_one_line_after_retrying(tmp_path):
    db = tmp_path / "f.duckdb"
    with connect(db, write=True):
        pass
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import duckdb, sys, time
            con = duckdb.connect({str(db)!r})
            print("locked", flush=True)
            sys.stdin.readline()
        """)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(StoreLocked, match="locked by another process"):
            with connect(db, write=True, wait_s=0.3):
                pass
    finally:
        holder.communicate("\n", timeout=10)


# -- issue 13: the store under many series, two ingests at once, and Ctrl-C -----------------------------------

CLI = "import sys; from forensics.cli import main; sys.exit(main(sys.argv[1:]))"


def test_more_than_a_hundred_series_with_layers_after_the_first_hundred(tmp_path):
    """Issue 13: polars guessed `layer`'s type from the first 100 series (all null) and crashed on the 101st."""
    from torch.utils.tensorboard import SummaryWriter

    from ingest.run import ingest_run

    run = tmp_path / "run"
    w = SummaryWriter(log_dir=str(run))
    for step in range(3):
        for i in range(120):
            w.add_scalar(f"a_system/metric_{i:03d}", float(i), step)  # sorts first: series ids 1..120
        w.add_scalar("grad_norm/fc1.weight", 0.5, step)
        w.add_scalar("train/loss", 2.0 - step, step)
    w.close()
    db = tmp_path / "f.duckdb"
    report = ingest_run(run, db)
    with connect(db, write=False) as con:
        layers = con.execute("SELECT name, layer FROM series WHERE run_id = ? AND layer IS NOT NULL",
                             [report.run_id]).fetchall()
        n = con.execute("SELECT count(*) FROM series WHERE run_id = ?", [report.run_id]).fetchone()[0]
    assert n == 122
    assert layers == [("grad_norm/fc1.weight", "fc1.weight")]


def _tb_run(root, n_steps: int):
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(log_dir=str(root))
    for step in range(n_steps):
        w.add_scalar("train/loss", 1.0 / (step + 1), step)
        w.add_scalar("train/lr", 1e-3, step)
    w.close()
    return root


def test_two_ingests_of_one_new_run_at_once_store_each_point_once(tmp_path):
    """Issue 13: two `forensics ingest` of one new run raced to insert its sources (duplicate key, exit 1)."""
    run = _tb_run(tmp_path / "run", 3000)
    db = tmp_path / "f.duckdb"
    procs = [subprocess.Popen([sys.executable, "-c", CLI, "ingest", str(run), "--db", str(db), "--quiet", "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    new_points = sorted(json.loads(out)["runs"][0]["points"] for out, _ in outs)
    assert new_points == [0, 6000]  # one read everything, the other found nothing new
    with connect(db, write=False) as con:
        assert con.execute("SELECT count(*) FROM scalars").fetchone()[0] == 6000
        assert con.execute("SELECT count(*), count(DISTINCT path) FROM sources").fetchone() == (1, 1)
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 1


INTERRUPTIBLE = textwrap.dedent("""
    import sys
    from forensics import cli, render

    class Signal:  # says when the last bytes are read: the bulk insert of every point comes next
        def __init__(self, name, enabled=True):
            pass
        def __call__(self, stage, done, total):
            if stage == "logs" and done >= total:
                print("read", flush=True)
        def close(self):
            pass

    render.ProgressBars = Signal  # the CLI takes its progress bars from forensics.render when it runs
    sys.exit(cli.main(sys.argv[1:]))
""")


@pytest.mark.slow
def test_ctrl_c_during_the_insert_rolls_back_and_exits_130_with_one_line(tmp_path):
    """Issue 13: Ctrl-C during the insert left an empty run row and a `RuntimeError: Query interrupted`."""
    import signal

    from benchmarks.bench_ingest_tensorboard import write_event_file

    run = tmp_path / "run"
    run.mkdir()
    info = write_event_file(run / "events.out.tfevents.1700000000.host.1.0", 1_500_000)
    db = tmp_path / "f.duckdb"
    proc = subprocess.Popen([sys.executable, "-c", INTERRUPTIBLE, "ingest", str(run), "--db", str(db)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "read"
    time.sleep(0.3)  # into the insert of 1.5M points (about a second here)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["forensics: interrupted"]
    with connect(db, write=True) as con:
        runs = con.execute("SELECT count(*) FROM runs").fetchone()[0]
        stored = con.execute("SELECT count(*) FROM scalars").fetchone()[0]
        counted = con.execute("SELECT coalesce(sum(n_points), 0) FROM sources").fetchone()[0]
    assert stored == counted  # whatever was committed is whole: no points without their source's count
    assert runs == (1 if stored else 0)  # no run row without its points
    # The next ingest reads what the interrupted one did not store, and only that.
    assert subprocess.run([sys.executable, "-c", CLI, "ingest", str(run), "--db", str(db), "--quiet"],
                          capture_output=True, text=True, timeout=120).returncode == 0
    with connect(db, write=False) as con:
        assert con.execute("SELECT count(*) FROM scalars").fetchone()[0] == info["scalars"]


def test_schema_1_database_is_migrated_and_its_batches_read_again(tmp_path):
    """v1 stored outlier flags judged at ingest (z >= 6); v2 stores per-sample norms (issue 11). A v1 file is
    upgraded in place by the next writer, and its saved batches are forgotten so that ingest reads them again."""
    from ingest.schema import SEQUENCES, TABLES

    db = tmp_path / "f.duckdb"
    con = duckdb.connect(str(db))
    for seq in SEQUENCES:
        con.execute(f"CREATE SEQUENCE {seq} START 1")
    for ddl in TABLES.values():
        con.execute(ddl)
    # The v1 shape of batch_stats, and a batch stored by a v1 ingest.
    con.execute("ALTER TABLE batch_stats DROP COLUMN sample_norms")
    con.execute("ALTER TABLE batch_stats ADD COLUMN outlier_samples BIGINT[]")
    con.execute("ALTER TABLE batch_stats ADD COLUMN outlier_z DOUBLE[]")
    con.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1')")
    con.execute("INSERT INTO batches (batch_id, run_id, path, format) VALUES (1, 'r1', 'batches/step_5.pt', 'torch')")
    con.execute("INSERT INTO batch_stats (run_id, batch_id, tensor, outlier_samples, outlier_z) "
                "VALUES ('r1', 1, 'x', [3], [7.5])")
    con.execute("INSERT INTO sources (source_id, run_id, path, format, grp) VALUES (1, 'r1', 'batches/step_5.pt', "
                "'batch', ''), (2, 'r1', 'events.out.tfevents.1', 'tensorboard', '')")
    con.close()
    with pytest.raises(SchemaError, match="upgrades it in place"):
        with connect(db, write=False):
            pass
    with connect(db, write=True) as con:
        columns = [r[0] for r in con.execute("SELECT column_name FROM information_schema.columns "
                                             "WHERE table_name = 'batch_stats'").fetchall()]
        assert "sample_norms" in columns and "outlier_z" not in columns
        assert con.execute("SELECT count(*) FROM batches").fetchone()[0] == 0
        assert con.execute("SELECT path FROM sources").fetchall() == [("events.out.tfevents.1",)]
    with connect(db, write=False) as con:
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)


def test_database_where_no_folder_can_be_made_is_one_line_exit_2(tmp_path, capsys):
    """The ingest lock beside the database needs a folder it can write: a one-line error, never a traceback
    (a path under a regular file fails for every user, root included)."""
    from forensics.cli import main

    run = _tb_run(tmp_path / "run", 5)
    (tmp_path / "a_file").write_text("not a folder")
    assert main(["ingest", str(run), "--db", str(tmp_path / "a_file" / "f.duckdb"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "writable" in err[0], err


def test_schema_3_store_gains_the_replays_table_on_the_next_write(tmp_path):
    """A store written before the replays table existed (schema 3) is upgraded in place by the next write; a
    reader meanwhile is told how, never handed a store without the table."""
    db = tmp_path / "f.duckdb"
    with connect(db, write=True):
        pass
    con = duckdb.connect(str(db))
    con.execute("DROP TABLE replays")
    con.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    con.close()
    import ingest.store
    ingest.store._SCHEMA_READY.clear()
    with pytest.raises(SchemaError, match="upgrades it in place"):
        with connect(db, write=False):
            pass
    with connect(db, write=True) as con:
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        assert "replays" in tables
        assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
