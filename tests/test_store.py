"""The store: where it lives, lock handling, schema version checks."""

import subprocess
import sys
import textwrap

import duckdb
import pytest

from ingest.errors import ForensicsError, SchemaError, StoreLocked
from ingest.schema import SCHEMA_VERSION
from ingest.store import connect, default_db_path


def test_default_db_path_prefers_flag_then_env_then_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FORENSICS_DB", str(tmp_path / "env.duckdb"))
    assert default_db_path(tmp_path / "flag.duckdb") == tmp_path / "flag.duckdb"
    assert default_db_path(None) == tmp_path / "env.duckdb"
    monkeypatch.delenv("FORENSICS_DB")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert default_db_path(None) == tmp_path / "cache" / "run-forensics" / "forensics.duckdb"


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


def test_schema_1_store_is_migrated_by_the_next_write_and_readable_before_it(tmp_path):
    """A store written before the replays table existed (schema 1) stays readable and gains the table."""
    db = tmp_path / "f.duckdb"
    with connect(db, write=True):
        pass
    con = duckdb.connect(str(db))
    con.execute("DROP TABLE replays")
    con.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    con.close()
    import ingest.store
    ingest.store._SCHEMA_READY.clear()
    with connect(db, write=False) as con:
        assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "1"
    with connect(db, write=True) as con:
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        assert "replays" in tables
        assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
