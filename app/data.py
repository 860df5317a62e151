"""The app's one door to the store: open read-only, run one query from `ingest.queries`, close.

Never holding a connection lets `forensics ingest` and `analyze` write while the app is open (DECISIONS.md §5).
Results are cached per database state (file size and modification time, the WAL's too), so a page redraw costs
no query and a new ingest shows on the next redraw. A missing, locked, empty or older-schema database becomes a
`StoreProblem` whose message the page shows, never a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import streamlit as st

from ingest import queries
from ingest.errors import ForensicsError
from ingest.store import connect

LOCK_WAIT_S = 2.0  # a page waits less than the CLI for a writer to finish: it can be redrawn


class StoreProblem(Exception):
    """The store cannot be read right now; `str()` is the sentence to show."""


def stamp(db: Path) -> tuple:
    """What changes when the database changes: size and mtime of the file and of its write-ahead log."""
    out: list = []
    for p in (db, Path(str(db) + ".wal")):
        try:
            s = p.stat()
            out += [s.st_size, s.st_mtime_ns]
        except FileNotFoundError:
            out += [None, None]
    return tuple(out)


@st.cache_data(max_entries=512, show_spinner=False)
def _cached(db: str, state: tuple, name: str, args: tuple) -> Any:
    return _run(db, name, args)


def _run(db: str, name: str, args: tuple) -> Any:
    fn = getattr(queries, name)
    try:
        with connect(Path(db), write=False, wait_s=LOCK_WAIT_S) as con:
            return fn(con, *args)
    except ForensicsError as exc:  # missing, locked, not ours, older or newer schema: one sentence on the page
        raise StoreProblem(str(exc)) from None
    except duckdb.Error as exc:  # e.g. a file that is not a DuckDB database at all
        raise StoreProblem(f"cannot read {db}: {str(exc).splitlines()[0]}") from None


def query(db: Path, name: str, *args: Any) -> Any:
    """`ingest.queries.<name>(con, *args)` on a brief read-only connection, cached for this database state."""
    if not db.exists():
        raise StoreProblem(f"no database at {db}; create one with `forensics analyze RUN_DIR --db {db}`")
    return _cached(str(db), stamp(db), name, tuple(args))


@st.cache_data(max_entries=64, show_spinner=False)
def _compared(db: str, state: tuple, run_id: str, others: tuple) -> Any:
    from forensics.services.compare import compare

    try:
        with connect(Path(db), write=False, wait_s=LOCK_WAIT_S) as con:
            return compare(con, run_id, list(others) or None)
    except ForensicsError as exc:  # not analysed yet, locked, ...: one sentence on the page
        raise StoreProblem(str(exc)) from None


def compared(db: Path, run_id: str, others: tuple[str, ...] = ()) -> Any:
    """`forensics compare`'s result for a stored run (`forensics.services.compare.compare`, the CLI's own), on a
    brief read-only connection, cached for this database state: the app shows it, never computes its own."""
    if not db.exists():
        raise StoreProblem(f"no database at {db}; create one with `forensics analyze RUN_DIR --db {db}`")
    return _compared(str(db), stamp(db), run_id, tuple(others))
