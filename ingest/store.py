"""The DuckDB store: how it is opened (briefly, with lock retries), its schema version, and the per-run ingest lock.

DuckDB allows one read-write process or several read-only ones, never both (DECISIONS.md §5). So every
write holds its connection for one transaction only, and readers open read-only. Where the database lives
(`--db`, `$FORENSICS_DB`, the user cache) is the CLI's decision: nothing here reads the environment.

Processes of this tool queue for the database instead of racing for DuckDB's lock (of eight
`analyze` at once, up to four gave up after DuckDB's lock refused them for 5 s, their runs half-stored): a
writer holds an exclusive, a reader a shared `lockf` on one byte of `<db>.lock` (the file of the per-run
ingest locks) while its connection is open. A waiter tries for its place every 10-50 ms, jittered, which
is cheap (no file is opened) and catches the gap between two transactions of the holder. DuckDB's own lock,
held by a program that is not ours, is retried with jittered backoff. Either wait ends after `LOCK_WAIT_S`
with one line (StoreLocked). Whoever waits says so on the `ingest.store` logger ("waiting for the database
(another forensics is writing)"), once and then every `NOTICE_EVERY_S`; the CLI prints it to stderr.

A query interrupted by Ctrl-C raises DuckDB's "Query interrupted"; `connect` turns it back into the
KeyboardInterrupt it was, after the connection has closed (which rolls back an open transaction).
"""

from __future__ import annotations

import fcntl
import logging
import os
import random
import time
import zlib
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path

import duckdb

from ingest.errors import ForensicsError, SchemaError, StoreLocked, StoreUnwritable
from ingest.schema import MIGRATIONS, SCHEMA_VERSION, SEQUENCES, TABLES

# How long a process waits for the database before it gives up with one line. The queue moves one write
# transaction at a time (each a second or two at most), so eight analyses of large runs at once wait well
# under this; a process that holds the database longer than this is stuck or not ours.
LOCK_WAIT_S = 300.0
# What one read connection may hold in DuckDB's own buffers (its block cache and sort runs): see `_open`
READ_MEMORY_LIMIT = "64MB"
NOTICE_EVERY_S = 30.0  # a long wait is said again this often
# The byte of `<db>.lock` that queues whole-database access; the per-run ingest locks use bytes below 2**32.
GATE_OFFSET = 2**32
log = logging.getLogger(__name__)


def db_location(explicit: str | Path | None, env: Mapping[str, str]) -> Path:
    """Where the database is: `explicit` (`--db PATH`), else `$FORENSICS_DB`, else the user's cache folder, never
    inside a run directory (DECISIONS.md §5). The one rule; the CLI and the app pass their environment in."""
    if explicit:
        return Path(explicit).expanduser()
    if env.get("FORENSICS_DB"):
        return Path(env["FORENSICS_DB"]).expanduser()
    cache = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "run-forensics" / "forensics.duckdb"

# Databases whose tables this process has already created: an ingest opens the store once per write
# transaction, and ~20 CREATE IF NOT EXISTS statements each time would cost more than a small write.
_SCHEMA_READY: set[str] = set()


def _is_lock_error(exc: duckdb.Error) -> bool:
    text = str(exc)
    return "lock" in text.lower() or "Conflicting" in text


def connect(db: Path, *, write: bool, wait_s: float = LOCK_WAIT_S) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
    """Open the store for one piece of work and close it after (a `with` block yielding the connection).

    Writers get the schema created (or checked) on open. Readers of a missing database get a one-line
    error telling them to ingest first. Waits up to `wait_s` for other processes (see the module docstring),
    then raises StoreLocked. A command that wants one connection for several pieces of work passes a `Session`
    (`hold`) to them instead."""
    return Session(db).connect(write=write, wait_s=wait_s)


@contextmanager
def _failures(con: duckdb.DuckDBPyConnection, db: Path, write: bool, close) -> Iterator[None]:
    """What a failed piece of work on `con` becomes: Ctrl-C during a query a KeyboardInterrupt, a failed write a
    StoreUnwritable; `close()` (which rolls back an open transaction) runs first."""
    try:
        yield
    except (duckdb.InterruptException, RuntimeError, duckdb.ProgrammingError) as exc:
        # DuckDB turns Ctrl-C during a query into "Query interrupted" (a RuntimeError in duckdb 1.x/2.x); Ctrl-C
        # while DuckDB calls back into Python (the schema of a frame handed over as an Arrow stream, at
        # `con.register`) comes back as an InvalidInputException whose message ends in the KeyboardInterrupt.
        if not (isinstance(exc, duckdb.InterruptException) or str(exc).startswith("Query interrupted")
                or "failed: KeyboardInterrupt" in str(exc)):
            close()
            raise
        close()  # an open transaction is rolled back here
        raise KeyboardInterrupt from None
    except (duckdb.IOException, duckdb.TransactionException) as exc:
        close()  # an open transaction is rolled back here
        if not write:
            raise
        raise StoreUnwritable(f"cannot write the database {db}: {_write_failure(exc)}; nothing of this write "
                              "was kept (the store holds what it held before); free space or pass another "
                              "--db") from None
    except BaseException:
        close()
        raise


class Session:
    """The store as one command's pieces of work reach it, passed to each of them: `connect` opens a connection
    for one piece of work and closes it after; a session made by `hold` keeps its first write connection open
    instead and hands it to every later `connect`, read or write, until `let_go` or the end of the `hold` block.

    A session is one caller's, never shared between threads or processes; `Session(db)` keeps nothing (what
    `connect(db, ...)` uses)."""

    def __init__(self, db: str | os.PathLike, *, keep: bool = False) -> None:
        self.db = Path(db)
        self.keeping = keep  # False once `let_go` was called: later connections close as usual
        self._con: duckdb.DuckDBPyConnection | None = None
        self._gate: ExitStack | None = None  # the kept connection's place in the queue (`_gate`)

    @contextmanager
    def connect(self, *, write: bool, wait_s: float = LOCK_WAIT_S) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection for one piece of work: the kept one if there is one, else a new one (see `connect`)."""
        db = self.db
        if self._con is not None:
            with _failures(self._con, db, write, close=self.close):
                yield self._con
            return
        if write or not db.exists():
            _need_folder(db)
        if not write and not db.exists():
            raise ForensicsError(f"no database at {db}; run `forensics ingest RUN_DIR --db {db}` first")
        deadline = time.monotonic() + wait_s
        gate = ExitStack()
        gate.enter_context(_gate(db, write=write, deadline=deadline))
        try:
            if not db.exists():
                _SCHEMA_READY.discard(str(db.resolve()))  # a new (or deleted and re-made) file has no schema yet
            con = _open(db, write, deadline)
        except BaseException:
            gate.close()
            raise
        try:
            with _failures(con, db, write, close=con.close):
                key = str(db.resolve())
                if write and key not in _SCHEMA_READY:
                    ensure_schema(con, db)
                    _SCHEMA_READY.add(key)
                else:
                    check_schema(con, db)  # one query: the version may have changed under a long-lived process
                yield con
        except BaseException:
            con.close()
            gate.close()
            raise
        if write and self.keeping:
            self._con, self._gate = con, gate  # the next `connect` of this session takes it as it is
        else:
            con.close()
            gate.close()

    def let_go(self) -> None:
        """Close the kept connection (if any), and keep no other: a long stretch of work comes (a large run to read
        or analyse, a checkpoint to load), and others get their turn between transactions."""
        self.keeping = False
        self.close()

    def close(self) -> None:
        if self._con is not None:
            self._con.close()  # commits nothing: every writer here commits its own transaction
            self._gate.close()
        self._con = self._gate = None


@contextmanager
def hold(db: str | os.PathLike) -> Iterator[Session]:
    """A session that keeps its first write connection for the pieces of work it is passed to (`Session`), closed
    at the end of the block at the latest.

    For a command on a small run (`forensics analyze`: ingest's three transactions, the analysis's read, the
    findings' write), where opening DuckDB (~50-70 ms: it builds its catalog of built-in functions every time)
    and closing it (its checkpoint) five times cost more than the work (docs/engine.md, first answer). The
    connection is held for the command's few hundred milliseconds, as one write transaction would hold it, and
    never past the block: the app and other commands open the store between commands. Whoever knows that a long
    stretch of work comes (a large run to read or analyse) calls the session's `let_go` first, so that others get
    their turn between transactions as without `hold` (DECISIONS.md §5; docs/schema.md). A read through the held
    connection is a writer's, without READ_MEMORY_LIMIT: that cap matters for long series, which a held run does
    not have."""
    session = Session(db, keep=True)
    try:
        yield session
    finally:
        session.close()


def session_of(store: str | os.PathLike | Session) -> Session:
    """`store` as a session: itself, or the path of a database, reached one connection per piece of work."""
    return store if isinstance(store, Session) else Session(store)


def _open(db: Path, write: bool, deadline: float) -> duckdb.DuckDBPyConnection:
    """duckdb.connect, retried with jittered backoff while a process outside the queue holds DuckDB's lock."""
    delay = 0.05
    waiting = _Waiting()
    while True:
        try:
            # DuckDB draws its own progress bar on stderr for a query over 2 s: our commands say their progress
            # themselves, and a bar in the middle of `analyze --json`'s stderr or watch's log is noise
            con = duckdb.connect(str(db), read_only=not write)
            con.execute("SET enable_progress_bar = false")  # a session option: not settable in connect's config
            if not write:
                # A reader's block cache counts in its peak memory: DuckDB's default (80% of RAM) kept the whole
                # store's columns cached beside the series a detector holds (analysing 4 series of 2M
                # points, the first series read cost 208 MB of which 48 MB were its points). Sorts and scans past
                # the limit page from the file (or spill), the results handed to Arrow are not counted
                con.execute(f"SET memory_limit = '{READ_MEMORY_LIMIT}'")
            return con
        except (duckdb.IOException, duckdb.ConnectionException) as exc:
            if not _is_lock_error(exc):
                raise ForensicsError(f"cannot open database {db}: {str(exc).splitlines()[0]}") from None
            if time.monotonic() >= deadline:
                raise _locked(db) from None
            waiting.notice(db, "another program has it open")
            time.sleep(delay * random.uniform(0.5, 1.5))  # jitter: waiters do not retry in step
            delay = min(delay * 2, 0.5)


def _locked(db: Path) -> StoreLocked:
    return StoreLocked(f"database {db} is locked by another process writing to it; "
                       f"wait for it to finish or pass another --db")


class _Waiting:
    """Says that this process waits for the database: on its first wait, then at most every NOTICE_EVERY_S (an
    ingest opens the store once per transaction, and eight processes in a queue wait many times each)."""

    said: float | None = None  # when this process last said it, for all its waits

    def __init__(self) -> None:
        self.started = time.monotonic()

    def notice(self, db: Path, who: str) -> None:
        now = time.monotonic()
        if _Waiting.said is None or now - _Waiting.said >= NOTICE_EVERY_S:
            waited = now - self.started
            log.info("waiting for the database (%s)%s: %s", who, f", {waited:.0f}s so far" if waited >= 1 else "", db)
            _Waiting.said = now


# One open `<db>.lock` per database per process, never closed: POSIX record locks belong to the process and
# closing any descriptor of the file drops all of them, so the gate and the run locks must share it.
_LOCK_FILES: dict[str, tuple[object, list[int]]] = {}


def _need_folder(db: Path) -> None:
    """A writer's database goes in a folder that exists: a mistyped --db must not become a new, empty store
    somewhere nobody looks (the CLI makes the default cache folder itself)."""
    if not db.parent.is_dir():
        what = "is not a folder" if db.parent.exists() else "does not exist"
        raise ForensicsError(f"the database's folder {db.parent} {what}: create it, or pass a --db in a writable "
                             f"folder that exists")


def _lock_file(db: Path, *, write: bool):
    """The process's open `<db>.lock` and its gate depth; None for a reader that cannot open it (a database in a
    read-only folder: no writer of ours can be writing it either)."""
    key = os.path.abspath(f"{db}.lock")
    if key not in _LOCK_FILES:
        if write:
            _need_folder(db)
        try:
            fh = open(key, "a+b")
        except OSError as exc:
            if not write:
                try:
                    fh = open(key, "rb")
                except OSError:
                    return None
            else:
                raise ForensicsError(f"cannot write beside the database {db}: {exc.strerror or exc}; "
                                     f"pass a --db in a writable folder") from None
        _LOCK_FILES[key] = (fh, [0])
    return _LOCK_FILES[key]


@contextmanager
def _gate(db: Path, *, write: bool, deadline: float) -> Iterator[None]:
    """Hold the database's place in the queue: exclusive for a writer, shared for a reader. Nested holds in one
    process (a connection opened inside another's) share the outer one."""
    found = _lock_file(db, write=write)
    if found is None:
        yield
        return
    fh, depth = found
    if depth[0] == 0:
        mode = fcntl.LOCK_EX if write else fcntl.LOCK_SH
        waiting = None
        delay = 0.01
        while True:
            try:
                fcntl.lockf(fh, mode | fcntl.LOCK_NB, 1, GATE_OFFSET)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    raise _locked(db) from None
                waiting = waiting or _Waiting()
                waiting.notice(db, "another forensics is writing")
                # Short jittered polls: the holder's transaction ends within a second or two, and a waiter
                # that polls often gets its turn between the holder's transactions.
                time.sleep(delay * random.uniform(0.5, 1.5))
                delay = min(delay * 2, 0.05)
    depth[0] += 1
    try:
        yield
    finally:
        depth[0] -= 1
        if depth[0] == 0:
            fcntl.lockf(fh, fcntl.LOCK_UN, 1, GATE_OFFSET)


def _write_failure(exc: BaseException) -> str:
    """The first line of the DuckDB error that says why a write failed: a failed COMMIT is often followed by a
    ROLLBACK that fails too ("no transaction is active"), which would hide the cause."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, duckdb.Error) and "no transaction is active" not in str(seen):
            return str(seen).splitlines()[0]
        seen = seen.__context__
    return str(exc).splitlines()[0]


@contextmanager
def run_lock(db: Path, run_id: str) -> Iterator[None]:
    """Hold the ingest lock of one run in one database, waiting while another process holds it.

    Two ingests of one run at once would both see its files as new and store every point twice; with this
    lock the second waits, then reads only what the first left new. The lock is a byte-range
    `lockf` on `<db>.lock` beside the database (never in a run directory), one byte per run id, so ingests
    of different runs do not wait for each other; the kernel releases it when the process ends, however
    it ends."""
    db = Path(db)
    offset = zlib.crc32(run_id.encode())
    fh, _ = _lock_file(db, write=True)
    try:
        fcntl.lockf(fh, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
    except OSError:
        log.info("waiting for another forensics that is reading this run (run %s) into %s", run_id, db)
        fcntl.lockf(fh, fcntl.LOCK_EX, 1, offset)
    try:
        yield
    finally:
        fcntl.lockf(fh, fcntl.LOCK_UN, 1, offset)


# Every CREATE ... IF NOT EXISTS as one script, run in one transaction: one commit instead of one per statement
# (a fresh store is part of the first answer's time: docs/engine.md).
_CREATE = ";\n".join([*(f"CREATE SEQUENCE IF NOT EXISTS {seq} START 1" for seq in SEQUENCES), *TABLES.values()])


def ensure_schema(con: duckdb.DuckDBPyConnection, db: Path) -> None:
    """Create what is missing, migrate an older schema (schema.MIGRATIONS), refuse a newer one."""
    con.execute("BEGIN")
    try:
        con.execute(_CREATE)
        row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchall()
        if not row:
            con.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    if not row:
        return
    found = int(row[0][0])
    if found < SCHEMA_VERSION and all(v in MIGRATIONS for v in range(found, SCHEMA_VERSION)):
        con.execute("BEGIN")
        for version in range(found, SCHEMA_VERSION):
            for statement in MIGRATIONS[version]:
                con.execute(statement)
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)])
        con.execute("COMMIT")
        return
    _check_version(found, db)


def check_schema(con: duckdb.DuckDBPyConnection, db: Path) -> None:
    try:
        # fetchall, not fetchone: a result left unfinished on the connection refuses the caller's next relation
        # (`con.sql`, as `queries.series_points` reads) with DuckDB's "unfinished result from execute()"
        row = next(iter(con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchall()), None)
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
    if found < SCHEMA_VERSION and all(v in MIGRATIONS for v in range(found, SCHEMA_VERSION)):
        raise SchemaError(
            f"{db} has schema {found}, this version needs {SCHEMA_VERSION}; `forensics ingest RUN_DIR --db {db}` "
            f"(or `analyze`) upgrades it in place"
        )
    if found < SCHEMA_VERSION:
        raise SchemaError(
            f"{db} has schema {found}, this version needs {SCHEMA_VERSION} and has no migration for it; "
            f"delete the file and ingest again (the run directories are the source of truth)"
        )

