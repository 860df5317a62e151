"""The DuckDB store: where it lives, how it is opened (briefly, with lock retries), and its schema version.

DuckDB allows one read-write process or several read-only ones, never both (DECISIONS.md §5). So every
write holds its connection for one transaction only, readers open read-only, and a lock held by another
process is retried with backoff for a few seconds before failing with one line.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from ingest.errors import ForensicsError, SchemaError, StoreLocked
from ingest.schema import MIGRATIONS, SCHEMA_VERSION, SEQUENCES, TABLES

LOCK_WAIT_S = 5.0
# Databases whose tables this process has already created: an ingest opens the store once per write
# transaction, and ~20 CREATE IF NOT EXISTS statements each time would cost more than a small write.
_SCHEMA_READY: set[str] = set()


def default_db_path(explicit: str | os.PathLike | None = None) -> Path:
    """`--db PATH`, else `$FORENSICS_DB`, else the user's cache folder; never inside a run directory."""
    if explicit:
        return Path(explicit).expanduser()
    if os.environ.get("FORENSICS_DB"):
        return Path(os.environ["FORENSICS_DB"]).expanduser()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "run-forensics" / "forensics.duckdb"


def _is_lock_error(exc: duckdb.Error) -> bool:
    text = str(exc)
    return "lock" in text.lower() or "Conflicting" in text


@contextmanager
def connect(db: Path, *, write: bool, wait_s: float = LOCK_WAIT_S) -> Iterator[duckdb.DuckDBPyConnection]:
    """Open the store for one piece of work and close it after.

    Writers get the schema created (or checked) on open. Readers of a missing database get a one-line
    error telling them to ingest first.
    """
    db = Path(db)
    if not write and not db.exists():
        raise ForensicsError(f"no database at {db}; run `forensics ingest RUN_DIR --db {db}` first")
    if write:
        db.parent.mkdir(parents=True, exist_ok=True)
    if not db.exists():
        _SCHEMA_READY.discard(str(db.resolve()))  # a new (or deleted and re-made) file has no schema yet
    deadline = time.monotonic() + wait_s
    delay = 0.05
    while True:
        try:
            con = duckdb.connect(str(db), read_only=not write)
            break
        except (duckdb.IOException, duckdb.ConnectionException) as exc:
            if not _is_lock_error(exc):
                raise ForensicsError(f"cannot open database {db}: {str(exc).splitlines()[0]}") from None
            if time.monotonic() >= deadline:
                raise StoreLocked(
                    f"database {db} is locked by another process writing to it; "
                    f"wait for it to finish or pass another --db"
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
    try:
        key = str(db.resolve())
        if write and key not in _SCHEMA_READY:
            ensure_schema(con, db)
            _SCHEMA_READY.add(key)
        else:
            check_schema(con, db)  # one query: the version may have changed under a long-lived process
        yield con
    finally:
        con.close()


def ensure_schema(con: duckdb.DuckDBPyConnection, db: Path) -> None:
    """Create what is missing; refuse a database written by a newer schema."""
    for seq in SEQUENCES:
        con.execute(f"CREATE SEQUENCE IF NOT EXISTS {seq} START 1")
    for ddl in TABLES.values():
        con.execute(ddl)
    row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
    else:
        _check_version(int(row[0]), db)
        if int(row[0]) < SCHEMA_VERSION:  # migratable (checked above): the loop above created the new tables
            con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)])


def check_schema(con: duckdb.DuckDBPyConnection, db: Path) -> None:
    try:
        row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except duckdb.CatalogException:
        raise SchemaError(f"{db} is not a run-forensics database (no meta table)") from None
    if row is None:
        raise SchemaError(f"{db} has no schema version; re-create it with `forensics ingest`")
    _check_version(int(row[0]), db)


def _check_version(found: int, db: Path) -> None:
    if found > SCHEMA_VERSION:
        raise SchemaError(
            f"{db} was written by a newer run-forensics (schema {found}, this one reads {SCHEMA_VERSION}); "
            f"upgrade run-forensics or use another --db"
        )
    if found < SCHEMA_VERSION and not migratable(found):
        raise SchemaError(
            f"{db} has schema {found}, this version needs {SCHEMA_VERSION} and has no migration for it; "
            f"delete the file and ingest again (the run directories are the source of truth)"
        )


def migratable(found: int) -> bool:
    """Whether every version from `found` up has a migration (schema.MIGRATIONS: tables to add). A reader
    accepts such a store as it is; the next write adds the tables, and queries of a new table check for it."""
    return all(v in MIGRATIONS for v in range(found, SCHEMA_VERSION))
