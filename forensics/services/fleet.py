"""Fleet mode: ingest and analyse many runs in parallel, with one writer (`forensics analyze ROOT --all`, watch).

Per-run ingest and analysis are independent, so they run in N worker processes (concurrent.futures) or as Ray
tasks. DuckDB has one writer (DECISIONS.md §5), so a worker never opens the store: it ingests the run into a
private database of its own (a file in RAM, /dev/shm where present, deleted after), analyses it there, and
hands back the run's tables as Arrow with the analysis. The driver appends the tables in bulk, renumbering ids
(`ingest.writes.append_run_tables`), many runs per transaction, and stores the analyses: the store ends up as a
sequential `forensics analyze` of each run would leave it.

A run the store already holds is ingested by the driver itself (`ingest_run` resumes where the last ingest
stopped: DECISIONS.md §3, so nothing is read or stored twice), then analysed by workers that open the store
read-only, and the driver stores the analyses. A run another process (a watch on the same store) stored while a
worker read it is analysed so too: the worker's copy is dropped, never reported as a failure. A run whose worker
fails is reported with its error; the rest complete.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forensics.judge.findings import Analysis
from forensics.judge.numbers import count
from forensics.judge.settings import Selection
from ingest.errors import ForensicsError


@dataclass
class Options:
    """What every run's ingest and analysis get: the detectors and thresholds (`analyze --only/--skip/--set`,
    typed), whether checkpoints may be unpickled, and the store the printed commands find with no --db."""

    selection: Selection = field(default_factory=Selection)
    trust_pickle: bool = False
    implied_db: Path | None = None  # the store a command finds with no --db: printed commands omit --db for it


@dataclass
class RunResult:
    """One run's outcome. `analysis` is None when it failed; `error` says why (one line), `trace` keeps the
    traceback of an unexpected failure; `retry` is True when the failure is not the run's (a locked store, a
    failed write, a crashed worker), so a service tries it again; `points` counts the points a worker read
    (0 in the driver); `cpu_seconds` the CPU time of the process that read and analysed it, while it did (the
    benchmark's Amdahl projection: the machine's load does not inflate it as it does `seconds`)."""

    path: str
    run_id: str | None = None
    name: str = ""
    analysis: Analysis | None = None
    error: str | None = None
    trace: str | None = None
    retry: bool = False
    points: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    store_seconds: float = 0.0  # the driver's time appending a worker's tables and storing its analysis
    where: str = "driver"  # driver, process, ray
    stored_meanwhile: bool = False  # another process stored the run first: the driver analyses it from the store
    tables: dict | None = field(default=None, repr=False)  # a worker's Arrow tables, until the driver appends them

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "run": self.run_id, "name": self.name, "error": self.error, "trace": self.trace,
                "points": self.points, "seconds": round(self.seconds, 3), "where": self.where,
                "analysis": self.analysis.as_dict() if self.analysis is not None else None}


def _private_dir() -> str:
    """A worker's folder for its private store, named after the worker's pid, the folder's owner: a worker
    killed with it (kill -9, out of memory) cannot remove it, so the next start does (`remove_orphaned_folders`)."""
    global _current_private_dir
    _current_private_dir = tempfile.mkdtemp(prefix=f"forensics-worker-{os.getpid()}-", dir=_scratch_parent())
    return _current_private_dir


_current_private_dir: str | None = None  # the folder this worker process is using now, for _follow_driver


def _scratch_parent() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


# A folder the fleet makes outside --db (a worker's private store, the driver's empty one) is named
# PREFIX-PID-RANDOM, PID its owner. Folders named before the owner was in the name are removed once this old.
SCRATCH_PREFIXES = ("forensics-worker-", "forensics-fleet-")
UNOWNED_SCRATCH_SECONDS = 24 * 3600.0


def remove_orphaned_folders() -> list[str]:
    """Remove the fleet's scratch folders whose owner process is gone (a driver or worker killed before its
    cleanup ran); return their paths. A folder whose owner lives (this machine's other analyses) or that this
    user may not remove is left alone."""
    removed = []
    for parent in {p for p in (_scratch_parent(), tempfile.gettempdir()) if p}:
        try:
            entries = list(os.scandir(parent))
        except OSError:
            continue
        for e in entries:
            if not e.name.startswith(SCRATCH_PREFIXES) or not e.is_dir(follow_symlinks=False):
                continue
            if not _owner_gone(e):
                continue
            shutil.rmtree(e.path, ignore_errors=True)
            if not os.path.lexists(e.path):
                removed.append(e.path)
    return removed


def _owner_gone(entry: os.DirEntry) -> bool:
    rest = entry.name.removeprefix("forensics-worker-").removeprefix("forensics-fleet-")
    pid = rest.partition("-")[0]
    if not pid.isdigit():  # named before the owner was in the name: gone once nothing touched it for a day
        try:
            return time.time() - entry.stat(follow_symlinks=False).st_mtime > UNOWNED_SCRATCH_SECONDS
        except OSError:
            return False
    return not _alive(int(pid))


def empty_store(folder: Path) -> Path:
    """A store with the schema and nothing else, made once by the driver for its workers to copy: each worker's
    private store began by creating the schema, ~0.1 s of a small run's ~0.6 s (40 runs: 4 s of 25 CPU s)."""
    from ingest.store import connect

    db = Path(folder) / "empty.duckdb"
    with connect(db, write=True):
        pass
    return db


def work_on_run(path: str, options: Options, empty: str | None = None) -> RunResult:
    """Worker: `analyze` the run against a private store, return the analysis and the run's tables.

    Runs in a worker process or a Ray task: it imports what it needs itself and never opens the shared store.
    `empty` is `empty_store`'s copy to start from, where this process can see it (not on a Ray node).
    """
    from forensics.services.analysis import analyze
    from ingest.errors import ForensicsError
    from ingest.queries import export_run_tables
    from ingest.store import connect

    started, cpu = time.monotonic(), time.process_time()
    out = RunResult(path=path, name=Path(path).name)
    tmp = _private_dir()
    db = Path(tmp) / "run.duckdb"
    try:
        if empty is not None and Path(empty).is_file():
            shutil.copyfile(empty, db)
        try:
            out.analysis = analyze(path, db, selection=options.selection,
                                   trust_pickle=options.trust_pickle)
            out.run_id = out.analysis.run_id
        except ForensicsError as exc:
            out.error = str(exc)
        if db.exists():
            # Also after a failure: what the ingest stored of an unreadable run (its read problems) goes to the
            # store as a sequential ingest leaves it.
            with connect(db, write=False) as con:
                out.tables = export_run_tables(con)
            out.points = out.tables["scalars"].num_rows
            runs = out.tables["runs"].column("run_id").to_pylist()
            out.run_id = out.run_id or (runs[0] if runs else None)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out.seconds, out.cpu_seconds = time.monotonic() - started, time.process_time() - cpu
    return out


def run_in_driver(path: str, db: Path, options: Options) -> RunResult:
    """The sequential path (also used for runs the store already holds): `analyze` against the store itself,
    which reads only what is new since the last ingest."""
    from forensics.services.analysis import analyze
    from ingest.errors import ForensicsError, StoreLocked, StoreUnwritable

    started = time.monotonic()
    out = RunResult(path=path, name=Path(path).name)
    try:
        out.analysis = analyze(path, db, selection=options.selection,
                               trust_pickle=options.trust_pickle)
        out.run_id = out.analysis.run_id
    except ForensicsError as exc:
        out.error, out.retry = str(exc), isinstance(exc, (StoreLocked, StoreUnwritable))
    out.seconds = time.monotonic() - started
    return out


def store_worker_results(db: Path, results: list[RunResult], options: Options) -> None:
    """Driver: append workers' tables and store their analyses, many runs in one connection and one transaction
    (each connection's open and close, and each commit, cost the single writer more than a run's rows: see
    docs/watch.md). Should that transaction fail (a full disk, a bug in one run's rows), it is rolled back and
    each run is written in a transaction of its own, so a run whose store fails gets the error and the others
    go on. Each run's tables are dropped once written, so the driver holds one batch's rows at most."""
    from ingest.queries import known_run_ids
    from ingest.store import connect

    todo = [r for r in results if r.tables is not None and r.run_id is not None]
    if not todo:
        return
    t0 = time.monotonic()
    with connect(db, write=True) as con:
        known = known_run_ids(con)
        fresh = []
        for r in todo:
            if r.run_id in known:
                # Another writer (a watch on the same store) stored this run meanwhile: the worker's copy would
                # hold its points twice. `analyze_runs` analyses it from the store instead (`stored_meanwhile`).
                r.error, r.analysis, r.retry = "the run was stored by another process meanwhile", None, True
                r.tables, r.stored_meanwhile = None, True
                continue
            known.add(r.run_id)  # the same run twice in one batch (two paths to one folder): stored once
            fresh.append(r)
        try:
            _write_runs(con, db, fresh, options)
        except Exception:  # noqa: BLE001 - the batch failed as a whole: find the run it was, one at a time
            for r in fresh:
                try:
                    _write_runs(con, db, [r], options)
                except Exception as exc:  # noqa: BLE001 - a failed write fails this run only (see analyze_runs)
                    failed = _failed(r.path, exc, r.where)
                    r.error, r.trace, r.retry, r.analysis = failed.error, failed.trace, True, None
    for r in todo:
        r.tables = None
    share = (time.monotonic() - t0) / len(todo)  # the connection, the transaction and the rows, shared
    for r in todo:
        r.store_seconds += share


def _write_runs(con: Any, db: Path, runs: list[RunResult], options: Options) -> None:
    """One transaction: every run's tables appended, then every analysis stored (rolled back whole on failure)."""
    from forensics.services.analysis import set_replay_command
    from forensics.judge.engine import store_analysis
    from ingest.writes import append_run_tables

    if not runs:
        return
    con.execute("BEGIN")
    try:
        for r in runs:
            append_run_tables(con, r.tables)
        for r in runs:
            if r.analysis is not None:
                r.analysis.db = str(db)  # the worker analysed against its private copy, now gone
                set_replay_command(r.analysis, r.path, db, options.implied_db)
                store_analysis(con, r.analysis, options.selection.as_json(), transaction=False)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def _failed(path: str, exc: BaseException, where: str) -> RunResult:
    """A worker that raised something other than ForensicsError (a bug, a crash, a killed process): the run is
    reported with the error and its traceback, and the others go on (the issue's "the rest complete")."""
    first = (str(exc).strip().splitlines() or [""])[0]
    return RunResult(path=path, name=Path(path).name, error=f"{type(exc).__name__}: {first}",
                     trace="".join(traceback.format_exception(exc)), where=where, retry=True)


# The single writer appends workers' results in batches, one transaction each: when the runs waiting hold
# WRITE_POINTS points (the driver's memory: ~60 bytes a point as Arrow), when the oldest has waited WRITE_SECONDS
# (checked as each run finishes), and when the workers are done. Fewer, larger transactions are what keep the
# writer's share of the wall time small (docs/watch.md, measured).
WRITE_POINTS = 2_000_000
_swept = False  # remove_orphaned_folders has run in this process
WRITE_SECONDS = 10.0


def analyze_runs(paths: Sequence[str], db: Path, options: Options, *, jobs: int = 1, ray_address: str | None = None,
                 use_ray: bool = False, known: set[str] | None = None,
                 on_result: Callable[[RunResult], None] | None = None,
                 should_stop: Callable[[], bool] = lambda: False) -> list[RunResult]:
    """Ingest and analyse every run in `paths`; store everything; return one result per run, in `paths` order.

    `jobs` = 1 without Ray: each run in this process, in order (the sequential reference). Otherwise runs the
    store does not hold yet go to `jobs` worker processes (or Ray tasks); runs it holds are ingested here
    (only what is new) and analysed by `jobs` processes reading the store (by this process under Ray). `known` is
    the set of run ids the store holds (read from it when None). A run another process (a watch on the same
    store) stored while a worker read it is one the store holds: it is analysed as those are, never failed.
    `on_result` sees each result as soon as it is stored (the CLI prints progress with it; workers' results are
    stored in batches, see WRITE_POINTS). When `should_stop()` turns true (SIGINT/SIGTERM), no other run starts,
    the runs finished are written, and the results returned are those of the runs done.

    A run that fails in an unexpected way (a bug, a full disk, a killed worker) is reported with its error and
    traceback, and the others go on: this is the one place that catches any Exception, per run.
    """
    from ingest.run import run_id_for

    results: dict[str, RunResult] = {}

    def done(r: RunResult) -> None:
        results[r.path] = r
        if on_result is not None:
            on_result(r)

    def in_driver(p: str) -> None:
        try:
            done(run_in_driver(p, db, options))
        except Exception as exc:  # noqa: BLE001 - see the docstring: one run's failure is that run's only
            done(_failed(p, exc, "driver"))

    global _swept
    if not _swept:  # once a process: a watch calls this every pass
        _swept = True
        remove_orphaned_folders()
    if jobs <= 1 and not use_ray:
        for p in paths:
            if should_stop():
                break
            in_driver(p)
        return [results[p] for p in paths if p in results]
    if known is None:
        known = _known(db)
    fresh = [p for p in paths if run_id_for(Path(p)) not in known]
    stored = [p for p in paths if p not in set(fresh)]
    workers = (batch for batch in ())  # a generator, like the two below: it can be closed
    scratch = tempfile.TemporaryDirectory(prefix=f"forensics-fleet-{os.getpid()}-") if fresh and not use_ray else None
    if fresh:  # (a generator: Ray starts, or a pool, only when there is work for it)
        workers = _ray_results(fresh, options, ray_address) if use_ray else _process_results(
            _largest_first(fresh), options, jobs, empty=str(empty_store(Path(scratch.name))))
    waiting: list[RunResult] = []  # finished by workers, not yet written
    since = 0.0

    def write() -> None:
        store_worker_results(db, waiting, options)
        for r in waiting:
            if r.stored_meanwhile:  # analysed from the store below, with the runs it held at the start
                stored.append(r.path)
            else:
                done(r)
        waiting.clear()

    try:
        for batch in workers:
            if should_stop():
                workers.close()  # pending runs are cancelled; finished ones are written below
                break
            if not waiting:
                since = time.monotonic()
            waiting.extend(batch)
            if sum(r.points for r in waiting) >= WRITE_POINTS or time.monotonic() - since >= WRITE_SECONDS:
                write()
        write()
    finally:
        if scratch is not None:
            scratch.cleanup()
    if use_ray:  # a Ray task may run on another machine, which cannot open this store: the driver reads them
        for p in stored:
            if should_stop():
                break
            in_driver(p)
    else:
        for r in _stored_runs(stored, db, options, jobs, should_stop):
            done(r)
    return [results[p] for p in paths if p in results]


def _stored_runs(paths: Sequence[str], db: Path, options: Options, jobs: int,
                 should_stop: Callable[[], bool]) -> list[RunResult]:
    """Runs the store already holds, with N processes: the driver ingests what is new in each (one writer), then
    workers analyse them reading the store read-only (DuckDB allows many readers when nobody writes), then the
    driver stores every analysis through one connection. The phases do not overlap: a writer and readers
    cannot hold the file at once."""
    from ingest.errors import ForensicsError, StoreLocked, StoreUnwritable
    from ingest.run import ingest_run

    out: list[RunResult] = []
    ingested: list[tuple[str, str]] = []
    for p in paths:
        if should_stop():
            return out
        try:
            report = ingest_run(Path(p), db, progress=None, trust_pickle=options.trust_pickle)
            ingested.append((p, report.run_id))
        except ForensicsError as exc:
            out.append(RunResult(path=p, name=Path(p).name, error=str(exc), retry=isinstance(exc, (StoreLocked, StoreUnwritable))))
        except Exception as exc:  # noqa: BLE001 - see analyze_runs
            out.append(_failed(p, exc, "driver"))
    if not ingested or should_stop():
        return out
    analysed: list[RunResult] = []
    if len(ingested) == 1:  # a pool's start costs more than one run's analysis
        analysed.append(analyse_stored(ingested[0], options, db))
    else:
        for batch in _process_results(ingested, options, jobs, task=analyse_stored, db=db):
            analysed.extend(batch)
    from forensics.judge.engine import store_analysis
    from ingest.store import connect

    with connect(db, write=True) as con:
        for r in analysed:
            if r.analysis is None:
                continue
            t0 = time.monotonic()
            try:
                store_analysis(con, r.analysis, options.selection.as_json())
            except Exception as exc:  # noqa: BLE001 - a failed write fails this run only (see analyze_runs)
                failed = _failed(r.path, exc, r.where)
                r.error, r.trace, r.retry, r.analysis = failed.error, failed.trace, True, None
            r.store_seconds = time.monotonic() - t0
    return out + analysed


def analyse_stored(item: tuple[str, str], options: Options, db: Path) -> RunResult:
    """Worker: analyse a run the store holds (already ingested by the driver), reading the store read-only."""
    from forensics.services.analysis import analyze_stored, set_replay_command
    from ingest.errors import ForensicsError, StoreLocked, StoreUnwritable
    from ingest.store import connect

    path, run_id = item
    started, cpu = time.monotonic(), time.process_time()
    out = RunResult(path=path, name=Path(path).name, run_id=run_id)
    try:
        with connect(db, write=False) as con:
            out.analysis = analyze_stored(con, run_id, options.selection)
        out.analysis.db = str(db)
        set_replay_command(out.analysis, path, db, options.implied_db)
    except ForensicsError as exc:
        out.error, out.retry = str(exc), isinstance(exc, (StoreLocked, StoreUnwritable))
    out.seconds, out.cpu_seconds = time.monotonic() - started, time.process_time() - cpu
    return out


def _known(db: Path) -> set[str]:
    from ingest.queries import known_run_ids
    from ingest.store import connect

    if not Path(db).exists():
        return set()
    with connect(db, write=False) as con:
        return known_run_ids(con)


def _process_results(paths: Sequence, options: Options, jobs: int, task: Callable = work_on_run,
                     **kwargs: Any) -> Iterator[list[RunResult]]:
    """Results as workers finish, in batches of those finished together. A worker process that dies (killed, out of memory) breaks the pool: the runs
    it left undone are retried once in a fresh pool, then reported failed."""
    import concurrent.futures as cf
    import multiprocessing as mp

    todo, attempt = list(paths), 0
    while todo and attempt < 2:
        attempt += 1
        retry: list[str] = []
        # forkserver, not fork: the driver may hold DuckDB and polars thread pools, which fork does not copy.
        pool = cf.ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("forkserver"),
                                      initializer=_start_worker, initargs=(os.getpid(),))
        try:
            pending = {pool.submit(task, p, options, **kwargs): p for p in todo}
            while pending:
                finished, _ = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
                batch = []
                for fut in finished:
                    p = pending.pop(fut)
                    try:
                        r = fut.result()
                        r.where = "process"
                        batch.append(r)
                    except cf.process.BrokenProcessPool as exc:
                        if attempt < 2:
                            retry.append(p)
                        else:
                            batch.append(_failed(_path(p), exc, "process"))
                    except Exception as exc:  # noqa: BLE001 - see _failed
                        batch.append(_failed(_path(p), exc, "process"))
                if batch:
                    yield batch
        finally:
            # Stopped early (the generator closed): runs not started are cancelled, running ones finish.
            pool.shutdown(wait=True, cancel_futures=True)
        todo = retry


def _largest_first(paths: Sequence[str]) -> list[str]:
    """The runs by the bytes of the files ingest reads in them (`ingest.files`), largest first: with workers taking
    runs in turn, a large run started last leaves the other workers idle while it finishes (on 40 runs of 10k-100k
    points, the tail was the last second of 14)."""
    from ingest.files import folders, is_read

    def size(p: str) -> int:
        root, total = Path(p).resolve(), 0
        for _, entries in folders(root, lambda exc: None):
            for e in entries:
                try:
                    total += e.stat().st_size if is_read(e, root, follow_links=False) else 0
                except OSError:
                    pass
        return total

    return sorted(paths, key=size, reverse=True)


def _path(item: str | tuple[str, str]) -> str:
    return item if isinstance(item, str) else item[0]


def _start_worker(driver: int) -> None:
    """A worker process judges runs as `analyze` does, so freed arrays go back at once (`return_freed_arrays`); it
    leaves Ctrl-C to the driver, which lets the run being written finish and stops cleanly, and it dies with the
    driver: a pool's workers wait on a queue the driver feeds, and a killed driver never closes it, so they, the
    forkserver and the resource tracker (both kept alive by the workers) would wait for ever."""
    from forensics.services.process import return_freed_arrays

    return_freed_arrays()
    import signal
    import threading

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_follow_driver, args=(driver,), name="follow-driver", daemon=True).start()


def _follow_driver(driver: int) -> None:
    """Wait for the driver's death (a pidfd where Linux has one, else a check each second), then remove this
    worker's folder and exit at once: what the worker was doing has nobody left to hand it to."""
    import select

    try:
        fd = os.pidfd_open(driver)
    except ProcessLookupError:  # died before this worker started
        fd = None
    except (AttributeError, OSError):  # no pidfd here (not Linux, or a kernel before 5.3)
        fd = -1
    if fd is not None and fd >= 0:
        select.select([fd], [], [])  # readable when the process exits
    elif fd == -1:
        while _alive(driver):
            time.sleep(1.0)
    if _current_private_dir is not None:
        shutil.rmtree(_current_private_dir, ignore_errors=True)
    os._exit(1)


def _alive(pid: int) -> bool:
    """True unless no process has this pid (another user's process is alive, and not ours to judge)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True
    return True


def _ray_results(paths: Sequence[str], options: Options, address: str | None) -> Iterator[list[RunResult]]:
    """Results as Ray tasks finish, in batches of those finished together: `ray.init()` locally when no address is given, else the cluster's."""
    try:
        import ray
    except ImportError:
        from ingest.errors import MissingDependency

        raise MissingDependency('--ray needs ray: pip install -e ".[ray]"') from None
    if not ray.is_initialized():
        ray.init(address=address or None, include_dashboard=False, log_to_driver=False)
    task = ray.remote(_ray_task).options(max_retries=1)
    pending = {task.remote(p, options): p for p in paths}
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        rest = [ref for ref in pending if ref not in ready]
        if rest:
            more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
            ready = list(ready) + list(more)
        batch = []
        for ref in ready:
            p = pending.pop(ref)
            try:
                r = ray.get(ref)
                r.where = "ray"
                batch.append(r)
            except Exception as exc:  # noqa: BLE001 - see _failed
                batch.append(_failed(p, exc, "ray"))
        yield batch


def _ray_task(path: str, options: Options) -> RunResult:
    """`work_on_run` in a Ray worker, which judges runs as a worker process of ours does (`_start_worker`)."""
    from forensics.services.process import return_freed_arrays

    return_freed_arrays()
    return work_on_run(path, options)


@dataclass
class RootAnalysis:
    """`analyze ROOT --all`: the runs found under ROOT, one result each, each run's stored judgement
    (`ingest.queries.latest_verdicts`: what the text shows), and the time it took."""

    found: Any  # ingest.discovery.Discovery
    results: list[RunResult]
    stored: dict[str, dict]
    seconds: float
    db: Path
    jobs: int
    ray: bool

    @property
    def failed(self) -> list[RunResult]:
        return [r for r in self.results if r.error is not None]

    def rows(self) -> list[tuple[Path, RunResult, dict | None]]:
        """(path below the root, result, stored judgement) per run found, in discovery order."""
        by_path = {r.path: r for r in self.results}
        return [(d.path.relative_to(self.found.root) if d.path != self.found.root else Path(d.path.name),
                 by_path[str(d.path)], self.stored.get(by_path[str(d.path)].run_id)) for d in self.found.runs]

    def as_dict(self) -> dict[str, Any]:
        by_path = {r.path: r for r in self.results}
        return {"db": str(self.db), "root": str(self.found.root), "jobs": self.jobs, "ray": self.ray,
                "seconds": round(self.seconds, 2), "failed": len(self.failed),
                "not_listed": [{"path": p, "error": e} for p, e in self.found.errors],
                "left_out": [{"path": p, "reason": why} for p, why in self.found.left_out], "runs": [
                    {"path": str(d.path), "kind": d.kind, "reason": d.reason, **by_path[str(d.path)].as_dict()}
                    for d in self.found.runs]}


def analyze_root(root: Path, db: Path, options: Options, *, jobs: int = 1, ray: str | None = None,
                 progress: Callable[[int, int], None] | None = None,
                 unlisted: Callable[[str, str], None] | None = None) -> RootAnalysis:
    """Find every run under `root` (docs/watch.md's rules), analyse them all (`analyze_runs`; `ray` is None for
    processes, else a Ray address or "" for a local Ray), then read back each run's stored verdict and headline.
    `unlisted(path, error)` for each folder that could not be listed (before any work), `progress(done, total)`
    after each run."""
    from ingest.discovery import discover
    from ingest.queries import latest_verdicts
    from ingest.store import connect

    if not root.is_dir():
        raise ForensicsError(f"{root} is not a folder; --all takes a folder of runs")
    found = discover(root)
    for path, err in found.errors if unlisted is not None else ():
        unlisted(path, err)
    if not found.runs:
        raise ForensicsError(f"no runs found under {root} ({count(found.dirs_scanned, 'folder')} looked at); "
                             f"docs/watch.md lists the layouts recognised")
    started = time.monotonic()
    done = [0]

    def one_more(_: RunResult) -> None:
        done[0] += 1
        if progress is not None:
            progress(done[0], len(found.runs))

    results = analyze_runs([str(r.path) for r in found.runs], db, options, jobs=jobs, use_ray=ray is not None,
                           ray_address=ray or None, on_result=one_more)
    seconds = time.monotonic() - started
    with connect(db, write=False) as con:  # each run's verdict and headline as the engine stored them
        stored = latest_verdicts(con, [r.run_id for r in results if r.error is None and r.run_id])
    return RootAnalysis(found, results, stored, seconds, db, jobs, ray is not None)
