"""Ingest one run directory: find its files, read each from where the last ingest stopped, write in bulk.

The walk claims each file for one format (`ingest.formats`), reads it with that format's pure reader from
its resume position, buffers the chunks, and writes them in short write transactions of about a million
points each (DECISIONS.md §5: no connection is held for the whole ingest). Checkpoints and saved batches are
read one at a time and each written in its own transaction. After the writes, every series of the run gets
its display name, role and counts refreshed.

This module decides what to read and when to write; the readers (`read_x(path, start) -> Iterator[Chunk]`,
`read_checkpoint`, `read_batch`) write nothing, and the SQL lives in `ingest.writes` and `ingest.queries`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import polars as pl

from ingest import queries, writes
from ingest.batches import FoundBatch, find_batches, read_batch
from ingest.checkpoints import CheckpointRead, FoundCheckpoint, find_checkpoints, read_checkpoint, tensor_deltas
from ingest.configs import flatten
from ingest.errors import MissingDependency, UnreadableRun
from ingest.files import walk
from ingest.formats import (LFS_POINTER_MAX, TEXT_LOG_SUFFIXES, Format, format_for, lfs_pointer, may_be_text_log, sample,
                            why_unread)
from ingest.names import storable
from ingest.records import Chunk, Issue, histograms_frame, scalars_frame
from ingest.roles import (KL_WORDS, NEUTRAL_WORDS, RETURN_WORDS, REWARD_WORDS, SPLIT_WORDS, is_perplexity, loss_like,
                          names_loss_function, objective_among, role_of, words)
from ingest.store import Session, run_lock, session_of

log = logging.getLogger(__name__)
FLUSH_POINTS = 2_000_000  # about 100 MB of points: bounded memory, few transactions
# The most bytes of logs a run may have for `analyze` to keep one connection through ingest, analysis and storing
# (store.hold): ~100-250k points, whose analysis takes well under a second here (docs/engine.md, first answer).
HOLD_BYTES = 8 * 2**20
# The distinct series one file may create. Real logs hold tens to a few thousand (per-layer statistics of a large
# model); a file naming a new metric on every line would otherwise cost time per name in every later stage. Past
# the cap a file's new names are skipped (one read problem names how many), so any file reads in time linear in
# its bytes.
MAX_SERIES_PER_FILE = 10_000
HEAD_BYTES = 4096
# progress(stage, done, total): bytes of `stage` ("logs", "checkpoints") read so far, of `total`.
Progress = Callable[[str, int, int], None]


def run_id_for(root: Path) -> str:
    """Stable short id for a run: a hash of its resolved path (DECISIONS.md §1), as the bytes it is on disk (a
    folder name need not be UTF-8; for one that is, the id is the hash of its UTF-8 text, as before)."""
    return hashlib.sha1(os.fsencode(root.resolve())).hexdigest()[:10]


@dataclass
class SourceReport:
    path: str
    format: str
    points: int = 0
    issues: list[Issue] = field(default_factory=list)
    status: str = "ok"


@dataclass
class IngestReport:
    run_id: str
    name: str
    root: str
    sources: list[SourceReport] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    unread_text: dict[str, str] = field(default_factory=dict)  # text files among `unknown`: why each was not read
    skipped: list[tuple[str, Issue]] = field(default_factory=list)  # folders not listed, links not followed
    seconds: float = 0.0

    @property
    def points(self) -> int:
        return sum(s.points for s in self.sources)

    @property
    def issues(self) -> list[tuple[str, Issue]]:
        return [(s.path, i) for s in self.sources for i in s.issues] + self.skipped

    def to_json(self) -> dict:
        return {
            "run": self.run_id, "name": self.name, "root": self.root, "points": self.points,
            "seconds": round(self.seconds, 3),
            "sources": [{"path": s.path, "format": s.format, "points": s.points, "status": s.status} for s in self.sources],
            "issues": [{"path": p, "position": i.position, "kind": i.kind, "detail": i.detail} for p, i in self.issues],
            "unknown_files": self.unknown,
        }


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _binary(data: bytes) -> bool:
    from ingest.console import _is_binary

    return _is_binary(data[:4096])


def _head(path: Path, n: int = HEAD_BYTES) -> bytes:
    try:
        with path.open("rb") as f:
            return f.read(n)
    except OSError:
        return b""


def _head_hash(path: Path, n: int = HEAD_BYTES) -> str:
    return hashlib.sha1(_head(path, n)).hexdigest()[:16]


@dataclass
class _Pending:
    """A source's chunks read in this ingest, not yet written."""

    rel: str
    fmt: Format
    grp: str
    size: int
    mtime: float
    head_hash: str
    source_id: int | None
    chunks: list[Chunk] = field(default_factory=list)
    end: int = 0
    report: SourceReport | None = None
    tags: set[str] = field(default_factory=set)  # the series this file has created, up to MAX_SERIES_PER_FILE
    over_cap: set[str] = field(default_factory=set)  # the names past it, skipped

    @property
    def n_points(self) -> int:
        return sum(len(c.scalars) for c in self.chunks if c.scalars is not None)


def ingest_run(root: Path | str, db: Path | Session, *, progress: Progress | None = None,
               trust_pickle: bool = False, follow_links: bool = False) -> IngestReport:
    """Read everything new under `root` into the store at `db` (a path, or the caller's `store.Session`: a held one
    keeps its connection through a small run and is let go before a large one's reading); return what was read
    and skipped.

    Checkpoints and saved batches are found first (by name) and their tensor files kept from the log formats;
    `trust_pickle` lets a checkpoint that needs full unpickling be read (the CLI's --trust-pickle);
    `follow_links` reads file symlinks that lead out of the run directory (`walk`).
    `progress(stage, done, total)` is called as bytes are read ("logs", then "checkpoints"); the CLI draws it.
    Two ingests of one run take turns (`store.run_lock`): the second reads only what the first left new.

    Raises UnreadableRun when `root` is no directory, holds no files, or nothing in it could be read.
    """
    started = time.monotonic()
    root = Path(root).expanduser()
    if not root.is_dir():
        raise UnreadableRun(f"{root} is not a directory; point forensics at a training run's folder")
    root = root.resolve()
    run_id = run_id_for(root)
    report = IngestReport(run_id=run_id, name=storable(root.name), root=storable(str(root)))
    files = walk(root, report.skipped, follow_links=follow_links)
    if not files and not report.skipped:
        raise UnreadableRun(f"{root} is empty: no logs, checkpoints or configs to read")
    store = session_of(db)
    with run_lock(store.db, run_id):
        _ingest_locked(root, store, run_id, files, report, progress or _no_progress, trust_pickle)
    report.seconds = time.monotonic() - started
    return report


def _no_progress(stage: str, done: int, total: int) -> None:
    pass


def _ingest_locked(root: Path, store: Session, run_id: str, files: list[PurePosixPath], report: IngestReport,
                   progress: Progress, trust_pickle: bool) -> None:
    with store.connect(write=True) as con:
        known = queries.known_sources(con, run_id)
        if queries.ingest_complete(con, run_id) is False:
            log.info("the last ingest of %s did not finish (stopped or locked out); reading on from where it "
                     "stopped", root)

    # Tensor files first: checkpoints and batches claim them before any log format sees them. An HF folder's
    # trainer_state.json is not claimed (the HF log reader reads it; the checkpoint only takes its step).
    # A tensor file whose name is not UTF-8 is left to the walk below, which lists it as unknown (escaped).
    named = [rel for rel in files if storable(str(rel)) == str(rel)]
    batches = find_batches(named)
    checkpoints = find_checkpoints(named)
    tensor_files = {b.path for b in batches} | {p for c in checkpoints for p in c.files}
    claimed: list[tuple[PurePosixPath, Format]] = []
    for rel in files:
        if rel in tensor_files:
            continue
        sampled: list[bytes] = []
        fmt = format_for(rel, lambda rel=rel: sampled.append(sample(root / rel)) or sampled[-1])
        if fmt is None:
            report.unknown.append(storable(str(rel)))
            if sampled and sampled[-1] and may_be_text_log(rel) and (
                    rel.suffix.lower() in TEXT_LOG_SUFFIXES[1:] or not _binary(sampled[-1])):
                # a text file no reader took (one named as text, even where its bytes look binary): a read problem,
                # with the reason (not just "unknown")
                report.unread_text[storable(str(rel))] = why_unread(rel, sampled[-1])
        else:
            claimed.append((rel, fmt))

    total_bytes = sum(_size(root / rel) for rel, _ in claimed)
    if total_bytes > HOLD_BYTES:
        # Not a small run: reading it and analysing it take long, so the connection an `analyze` holds
        # (store.hold) is closed and others get their turn between transactions. A checkpoint or batch not yet
        # stored lets it go where it is read (below): one stored already costs nothing to pass over.
        store.let_go()

    # Sources parsed by another version of their reader (or by another format's) are read again from nothing:
    # a reader fix reaches runs stored before it (sources.reader_version).
    stale = {storable(str(rel)): known[storable(str(rel))][0] for rel, fmt in claimed
             if storable(str(rel)) in known and known[storable(str(rel))][5:7] != (fmt.name, fmt.version)}
    if stale:
        with store.connect(write=True) as con:
            con.execute("BEGIN")
            writes.upsert_run(con, run_id, report.name, report.root)
            writes.forget_sources(con, run_id, stale)
            con.execute("COMMIT")
            known = queries.known_sources(con, run_id)

    done = 0
    rewrite: Issue | None = None
    pending: list[_Pending] = []
    for rel, fmt in claimed:
        path = root / rel
        try:
            stat = path.stat()
        except OSError:
            continue  # gone since the walk (a rotated log): the next ingest sees what is there then
        head_hash = _head_hash(path)
        name = storable(str(rel))  # the file's name in the store: `\xNN` for bytes that are not UTF-8
        prior = known.get(name)
        start = 0
        source_id = None
        if prior is not None:
            source_id, size, mtime, old_hash, resume_at = prior[:5]
            unchanged = size == stat.st_size and mtime == stat.st_mtime and old_hash == head_hash
            if unchanged and (not fmt.resumable or resume_at >= stat.st_size):
                done += stat.st_size
                progress("logs", done, total_bytes)
                continue
            # A file shorter than HEAD_BYTES when last read grows into its own head: compare the bytes it had
            # then, or a log still being written would be read again from 0 and its points stored twice.
            then = head_hash if size is None or size >= HEAD_BYTES else _head_hash(path, size)
            rewritten = old_hash != then or (fmt.resumable and stat.st_size < (resume_at or 0))
            start = 0 if rewritten and fmt.resumable else (resume_at or 0)
            if rewritten and fmt.resumable and resume_at:
                rewrite = _forget_rewritten(store, run_id, name, source_id, size, stat.st_size, old_hash != then)
        item = _Pending(name, fmt, storable(fmt.group(rel)), stat.st_size, stat.st_mtime, head_hash, source_id,
                        end=start, report=SourceReport(name, fmt.name))
        if rewrite is not None:
            item.chunks.append(Chunk(end=start, issues=[rewrite]))
            item.report.issues.append(rewrite)
            rewrite = None
        report.sources.append(item.report)
        pending.append(item)
        pointer = lfs_pointer(_head(path)) if stat.st_size < LFS_POINTER_MAX else None
        if pointer is not None:
            # Not the file but where to fetch it. An append-only log's pointer counts as read to its end, so that
            # the file `git lfs pull` puts in its place is a rewrite: read from byte 0, this problem forgotten.
            issue = Issue(None, "lfs_pointer", f"{name} is a Git LFS pointer to a file of {pointer:,} bytes, not the "
                                               "file: its content was not checked out (`git lfs pull` fetches it)")
            item.end = stat.st_size if fmt.resumable else 0
            item.chunks.append(Chunk(end=item.end, issues=[issue]))
            item.report.issues.append(issue)
            done += stat.st_size
            progress("logs", done, total_bytes)
            continue
        try:
            with closing(_read_ahead(fmt.load_reader()(path, start))) as chunks:  # a failed write stops the reader
                for chunk in chunks:
                    _cap_series(item, chunk)
                    item.chunks.append(chunk)
                    item.end = chunk.end
                    item.report.issues.extend(chunk.issues)
                    if fmt.resumable:
                        progress("logs", done + max(0, chunk.end), total_bytes)
                    if sum(p.n_points for p in pending) >= FLUSH_POINTS:
                        _flush(store, report, pending)
                        pending = [item]  # keep the current source's row for its later chunks
        except MissingDependency as exc:
            # One format's optional package is missing: say so for its files and read the rest of the run.
            item.chunks.append(Chunk(end=start, issues=[Issue(None, "missing_dependency", str(exc))]))
            item.report.issues.extend(item.chunks[-1].issues)
        except OSError as exc:
            # Not readable (permissions, an I/O error, gone mid-read): what was read before stays, and where the
            # next ingest goes on is where reading stopped.
            item.chunks.append(Chunk(end=item.end, issues=[Issue(None, "unreadable", f"{name} cannot be read "
                                                                 f"({exc.strerror or exc})")]))
            item.report.issues.extend(item.chunks[-1].issues)
        if item.over_cap:
            issue = Issue(None, "too_many_series",
                          f"{name} names more than {MAX_SERIES_PER_FILE:,} series; the points of "
                          f"{len(item.over_cap):,} more (e.g. {', '.join(sorted(item.over_cap)[:3])}) were skipped")
            item.chunks.append(Chunk(end=item.end, issues=[issue]))
            item.report.issues.append(issue)
        done += stat.st_size
        progress("logs", done, total_bytes)
    _flush(store, report, pending)
    if checkpoints or batches:
        _ingest_tensors(store, run_id, root, checkpoints, batches, report, trust_pickle, progress)

    failure = None if known else _nothing_read(root, report)
    with store.connect(write=True) as con:
        con.execute("BEGIN")
        if failure is not None:
            # A first ingest that read nothing leaves no trace: no run row, no sources, no issues (before,
            # `analyze /etc` left a run of 1043 unknown files in `runs`).
            writes.delete_run(con, run_id)
        else:
            writes.upsert_run(con, run_id, report.name, report.root, complete=True)
            refresh_series(con, run_id)
            writes.insert_issues(con, run_id, [(u, Issue(None, "unknown_file", "no reader knows this file"))
                                               for u in report.unknown]
                                 + [(u, Issue(None, "unread_text", f"{u}: {why}")) for u, why in report.unread_text.items()]
                                 + report.skipped)
            # A stored source no longer found is deleted, unless it sits in a folder that could not be listed.
            on_disk = {storable(str(p)) for rel in files for p in (rel, *rel.parents)}
            unlisted = tuple(f"{path}/" for path, issue in report.skipped if issue.kind == "unreadable")
            gone = [p for p in known if p not in on_disk and not p.startswith(unlisted)]
            writes.mark_deleted(con, run_id, gone, [p for p in known if p in on_disk])
        con.execute("COMMIT")
    if failure is not None:
        raise failure


def _nothing_read(root: Path, report: IngestReport) -> UnreadableRun | None:
    """The error for a run in which no file could be read, or None when something was."""
    if not report.sources and report.unknown:
        texts = [f"{u} ({why})" for u, why in report.unread_text.items()][:3]
        return UnreadableRun(
            f"nothing in {root} is a format forensics reads ({len(report.unknown)} unknown files, e.g. "
            f"{'; '.join(texts or report.unknown[:3])}); see `forensics ingest --help` for the formats"
        )
    if report.sources and all(s.status == "unreadable" for s in report.sources):
        return UnreadableRun(
            f"no file in {root} could be read: "
            + "; ".join(f"{s.path}: {s.issues[0].detail}" for s in report.sources[:3] if s.issues)
        )
    return None


def _forget_rewritten(store: Session, run_id: str, rel: str, source_id: int, was: int | None, now: int,
                      head_changed: bool) -> Issue:
    """A log rewritten since the last ingest (shorter than where reading stopped, or its first bytes changed) is
    read again from byte 0, so what was read from it before is forgotten first: points no file holds any more
    must not stay in the diagnosis, and none may be stored twice (DECISIONS.md §3). Returns the issue saying so."""
    with store.connect(write=True) as con:
        con.execute("BEGIN")
        forgotten = queries.source_points(con, source_id)
        writes.mark_incomplete(con, run_id)
        writes.forget_sources(con, run_id, {rel: source_id})
        con.execute("COMMIT")
    why = "its first bytes changed" if head_changed else f"it shrank from {was:,} to {now:,} bytes"
    return Issue(None, "rewritten", f"{rel} was rewritten since the last ingest ({why}): its {forgotten:,} earlier "
                                    "points were forgotten and it was read again from the start")


def _ingest_tensors(store: Session, run_id: str, root: Path, checkpoints: list[FoundCheckpoint], batches: list[FoundBatch],
                    report: IngestReport, trust_pickle: bool, progress: Progress) -> None:
    """Checkpoints (statistics, values, deltas) and saved batches; each is written in its own transaction."""
    total = sum(checkpoint_size(root, c) for c in checkpoints)
    done = 0

    def on_read(_: FoundCheckpoint, n: int) -> None:
        nonlocal done
        done += n
        progress("checkpoints", done, total)

    written = ingest_checkpoints(store, run_id, root, checkpoints, trust_pickle, on_read=on_read)
    written += ingest_batches(store, run_id, root, batches, trust_pickle)
    for row in written:
        kind = "checkpoint" if "ckpt_id" in row else "batch"
        report.sources.append(SourceReport(row["path"], kind, 0, [i for _, i in row["issues"]], row["status"]))


def _flush(store: Session, report: IngestReport, pending: list[_Pending]) -> None:
    """Write the buffered chunks of `pending` sources in one transaction, then forget the chunks.

    The run's row is written in the same transaction, so an ingest interrupted before its first write leaves
    no empty run behind."""
    if not pending:
        return
    run_id = report.run_id
    with store.connect(write=True) as con:
        con.execute("BEGIN")
        writes.upsert_run(con, run_id, report.name, report.root)
        for item in pending:
            if item.source_id is None:
                item.source_id = writes.claim_source(con, run_id, item.rel, item.fmt.name, item.grp)
            scalars = [scalars_frame(c.scalars) for c in item.chunks if c.scalars is not None and len(c.scalars)]
            hist = [histograms_frame(c.histograms) for c in item.chunks if c.histograms is not None and len(c.histograms)]
            # Each frame's distinct tags, found once: they name the series and map the frame's tags to their ids.
            present = [_distinct(f["tag"]) for f in scalars]
            ordinal = _tags([f.filter(pl.col("ordinal").fill_null(False)).select("tag") for f in scalars
                             if f["ordinal"].any()])
            tags = {t for p in present for t in p.cast(pl.Utf8).to_list()} | _tags(hist)
            ids = writes.series_ids(con, run_id, item.grp, item.fmt.name, sorted(tags), ordinal, role_of)
            # Tags become series ids chunk by chunk: chunks may carry different Enum tag types.
            frame = pl.concat([_with_series(f, ids, p) for f, p in zip(scalars, present)]) if scalars else None
            written, dropped = writes.insert_scalars(con, item.source_id, frame, dedupe=item.fmt.dedupe_across_sources)
            if hist:
                writes.insert_histograms(con, item.source_id, pl.concat([_with_series(h, ids) for h in hist]))
            writes.insert_texts(con, run_id, item.source_id, [c.texts for c in item.chunks if c.texts is not None])
            writes.replace_configs(con, run_id, item.source_id,
                                   ((name, key, value) for c in item.chunks for name, doc in c.configs.items()
                                    for key, value in flatten(doc)),
                                   whole=not item.fmt.resumable)
            writes.insert_issues(con, run_id, [(item.rel, i) for c in item.chunks for i in c.issues])
            item.report.points += written
            item.report.status = _source_status(item.report.points, dropped, item.report.issues)
            writes.update_source(con, item.source_id, size=item.size, mtime=item.mtime, head_hash=item.head_hash,
                                 resume_at=item.end, points=written, dropped=dropped, status=item.report.status,
                                 fmt=item.fmt.name, grp=item.grp, reader_version=item.fmt.version)
            item.chunks = []
        con.execute("COMMIT")


def _read_ahead(chunks: Iterator[Chunk]) -> Iterator[Chunk]:
    """Yield `chunks`, reading the next one in a second thread while the caller stores this one.

    DuckDB's insert and polars release the GIL, so on two cores the compiled reader's scan of chunk k+1 runs
    beside the store's insert of chunk k. At most one chunk is read ahead (memory stays bounded: one chunk
    more than reading in line). What the reader raises is raised here, in the caller's thread, as it was.
    """
    handed = queue.SimpleQueue()  # ("chunk", c) | ("end", None) | ("error", exc)
    may_read = threading.Semaphore(1)  # the reader reads one chunk, then waits until the caller takes it
    stop = threading.Event()

    def read() -> None:
        try:
            for chunk in chunks:
                handed.put(("chunk", chunk))
                del chunk
                may_read.acquire()
                if stop.is_set():
                    return
            handed.put(("end", None))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, who raises it
            handed.put(("error", exc))
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()  # the reader's open file is closed in the thread that iterated it

    may_read.acquire()
    thread = threading.Thread(target=read, name="forensics-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            kind, item = handed.get()
            if kind == "end":
                return
            if kind == "error":
                raise item
            may_read.release()  # read the next chunk while this one is stored
            yield item
            del item
    finally:
        stop.set()
        may_read.release()
        thread.join()


def _cap_series(item: _Pending, chunk: Chunk) -> None:
    """Keep `chunk`'s points of the first MAX_SERIES_PER_FILE series its file names; drop the rest's, noting their
    names in `item.over_cap`. Costs one distinct-tags pass per chunk; filters only a chunk that crosses the cap."""
    frames = [f for f in (chunk.scalars, chunk.histograms) if f is not None and len(f)]
    names = [t for f in frames for t in f["tag"].unique(maintain_order=True).cast(pl.Utf8).to_list()]
    new = [t for t in dict.fromkeys(names) if t not in item.tags]  # in the order the file names them
    room = MAX_SERIES_PER_FILE - len(item.tags)
    if len(new) <= room:
        item.tags.update(new)
        return
    item.tags.update(new[:max(room, 0)])
    item.over_cap.update(new[max(room, 0):])
    keep = list(item.tags)
    if chunk.scalars is not None and len(chunk.scalars):
        chunk.scalars = chunk.scalars.filter(pl.col("tag").cast(pl.Utf8).is_in(keep))
    if chunk.histograms is not None and len(chunk.histograms):
        chunk.histograms = chunk.histograms.filter(pl.col("tag").cast(pl.Utf8).is_in(keep))


def _tags(frames: list[pl.DataFrame]) -> set[str]:
    return {t for f in frames for t in _distinct(f["tag"]).cast(pl.Utf8).to_list()}


def _distinct(tags: pl.Series) -> pl.Series:
    """The distinct tags of a column. A Categorical one is hashed by its codes, not by each point's string
    (polars 2.1, a chunk of 1.1M points: 4.2 ms; a numpy scatter of the codes took 6.4 ms)."""
    if isinstance(tags.dtype, pl.Categorical):
        return tags.unique(maintain_order=True)
    return tags.unique()


UNREADABLE_KINDS = ("empty", "not_this_format", "lfs_pointer", "unreadable", "garbled", "missing_dependency", "too_large")
NOTICE_KINDS = ("rewritten", "realigned")  # said, but nothing was skipped: the source stays `ok`


def _source_status(points: int, dropped: int, issues: list[Issue]) -> str:
    """ok; partial (some records skipped); duplicate (every point a copy of another source's); unreadable."""
    if points == 0 and dropped > 0:
        return "duplicate"
    if points == 0 and any(i.kind in UNREADABLE_KINDS for i in issues):
        return "unreadable"
    return "partial" if any(i.kind not in NOTICE_KINDS for i in issues) else "ok"


def _with_series(frame: pl.DataFrame, series_ids: dict[str, int], present: pl.Series | None = None) -> pl.DataFrame:
    """Replace the tag column by series ids. A Categorical tag column maps through its codes: one lookup per
    distinct tag (`present`, the column's distinct tags where the caller has them), not a string compare per point."""
    tags = frame["tag"]
    if isinstance(tags.dtype, pl.Categorical):
        present = _distinct(tags) if present is None else present
        codes = present.to_physical().to_numpy()
        lookup = np.zeros(int(codes.max()) + 1, dtype=np.int32)
        lookup[codes] = [series_ids[t] for t in present.cast(pl.Utf8).to_list()]
        ids = pl.Series("series_id", lookup[tags.to_physical().to_numpy()])
    else:
        ids = tags.replace_strict(series_ids, return_dtype=pl.Int32).alias("series_id")
    return frame.drop("tag").with_columns(ids)


FILE_NAMED_FORMATS = ("csv", "table")  # formats whose series group is one file (`formats.file_group`)


def refresh_series(con, run_id: str) -> None:
    """Give every series of the run its display name and role, now that all its sources are known.

    TensorBoard shows each event file's folder, relative to the log folder, as a run: `train/loss` and
    `val/loss`. So a TensorBoard series is named by its folder relative to the folders of all the run's
    event files (nothing when there is only one), then its tag.
    """
    rows = queries.series_rows(con, run_id)
    tb_groups = sorted({grp for _, grp, _, fmt in rows if fmt == "tensorboard"})
    common = os.path.commonpath(tb_groups) if len(tb_groups) > 1 and all(tb_groups) else None
    # A file that holds one metric named like the file (DVCLive's plots/metrics/val/loss.tsv for `val/loss`,
    # numpy.savetxt's `train_loss`) is named, like an event file, by its folder below the folders of all such files.
    own = {grp: str(PurePosixPath(grp).parent) for _, grp, tag, fmt in rows
           if fmt in FILE_NAMED_FORMATS and tag == PurePosixPath(grp).stem}
    own_common = os.path.commonpath(list(own.values())) if len(set(own.values())) > 1 else None
    # A table whose file names a held-out split (`test_error.tsv`, `val_log.csv`) and none of whose columns names
    # a split: its columns are that split's (`test_error/Logloss` is a test loss, not the training loss).
    # A console log so named (`valid.log` beside `train.log`) too, where another file of the run prints the same
    # quantity: the pair's held-out half (alone, a `test.log` may hold a whole training run).
    split_named: dict[str, bool] = {}
    tags_of: dict[str, set[str]] = {}
    console: set[str] = set()
    for _, grp, tag, fmt in rows:
        tags_of.setdefault(grp, set()).add(tag)
        if fmt == "console":
            console.add(grp)
        if (fmt in FILE_NAMED_FORMATS or fmt == "console") and grp not in own:
            split_named[grp] = split_named.get(grp, True) and role_of(tag).split is None

    def pairs_another(grp: str) -> bool:  # a training loss of this file is printed by another file of the run
        others = set().union(*(tags for other, tags in tags_of.items() if other != grp))
        return any(role_of(t).role == "train_loss" and t in others for t in tags_of[grp])

    held_out = {grp for grp, unsplit in split_named.items()
                if unsplit and role_of(PurePosixPath(grp).stem).split in ("val", "test")
                and (grp not in console or pairs_another(grp))}
    updates = []
    for series_id, grp, tag, fmt in rows:
        name = tag
        if fmt == "tensorboard" and len(tb_groups) > 1:
            prefix = os.path.relpath(grp or ".", common or ".") if grp else ""
            name = tag if prefix in ("", ".") else f"{prefix}/{tag}"
        elif own_common is not None and grp in own and tag == PurePosixPath(grp).stem:
            prefix = os.path.relpath(own[grp], own_common or ".")
            name = tag if prefix == "." else f"{prefix}/{tag}"
        elif grp in held_out:
            name = f"{PurePosixPath(grp).stem}/{tag}"
        r = role_of(name)
        updates.append((series_id, name, r.role, r.split, r.layer, r.canonical))
    updates = _split_counters(con, run_id, updates)
    updates, said = loss_by_elimination(con, run_id, rows, updates)
    updates = loss_named_otherwise(updates)
    writes.update_series_names(con, updates)
    writes.replace_issues(con, run_id, "loss_by_elimination", said)


def _split_counters(con, run_id: str, updates: list[tuple]) -> list[tuple]:
    """A value named by its split alone is that split's loss (`roles.role_of`), unless its values are whole numbers
    that never fall: then it counts the split's steps (`learner  Train 9000, Time: 3.74m`), and is `other`."""
    alone = [u[0] for u in updates if u[2] in ("train_loss", "val_loss") and u[3] is not None and not _unsplit(u[1])]
    counters = queries.counting(con, run_id, alone) if alone else set()
    return [(u[0], u[1], "other", u[3], u[4], False) if u[0] in counters else u for u in updates]


MIN_ELIMINATED_POINTS = 2


def loss_by_elimination(con, run_id: str, rows: list[tuple[int, str, str, str]], updates: list[tuple]) -> tuple[
        list[tuple], list[tuple[str, Issue]]]:
    """In a run that names no training loss, the one console value whose name may be a loss (`roles.loss_like`: `Le`,
    `L_rec`, `Train_rf`) and that is printed on every training record of its log, if exactly one is: the
    training loss, and its held-out twin (the same name under a held-out split's word) the validation loss. Its series
    takes the role, and one issue names it, so the user can check the choice. A whole-number
    value (a counter) is none; two such values leave both as they were (which one the trainer minimises is a guess).
    Returns the updates, changed or not, and the issue to store."""
    if any(u[2] == "train_loss" for u in updates):
        return updates, []
    console = {series_id for series_id, _, _, fmt in rows if fmt == "console"}
    unnamed = _unnamed_columns(rows)
    names = [u for u in updates if u[0] in console and u[0] not in unnamed and loss_like(u[1])]
    if any(set(words(u[1])) & (REWARD_WORDS | RETURN_WORDS) for u in updates):
        # an agent's log: its KL is the policy update's size (`roles.KL_WORDS`), not a term of a loss
        names = [u for u in names if not set(words(u[1])) <= KL_WORDS | NEUTRAL_WORDS]
    others = [u[1] for u in names]
    if (chosen := objective_among(others)) is not None:
        names = [u for u in names if u[1] == chosen]  # ℒ beside its terms, a reconstruction beside its KL
    others = [n for n in others if n != chosen] if chosen is not None else []
    if not names:
        return _unnamed_loss(con, run_id, rows, updates, unnamed)
    # a training record: one that prints a value of the training's, other than a rate or a counter announced alone
    # (`Updating learning rate to 1e-4`, `epoch 3`)
    peers = [u[0] for u in updates if u[0] in console and u[2] not in ("lr", "epoch", "launch")
             and u[3] not in ("val", "test")]
    taken = [(series_id, grp) for series_id, grp, n, records, whole in
             queries.record_coverage(con, run_id, [u[0] for u in names], peers)
             if n >= max(records, MIN_ELIMINATED_POINTS) and not whole]
    if len(taken) != 1:
        return updates, []
    series_id, grp = taken[0]
    name = next(u[1] for u in updates if u[0] == series_id)
    # its held-out twin (`3d_valid` beside `3d_train`, `Valid Le` beside `Le`) is the validation loss
    twins = {u[0] for u in updates if u[0] in console and u[2] == "other" and u[3] in ("val", "test")
             and _unsplit(u[1]) == _unsplit(name)}
    out = [(u[0], u[1], "train_loss", u[3], u[4], True) if u[0] == series_id else
           (u[0], u[1], "val_loss", u[3], u[4], True) if u[0] in twins else u for u in updates]
    issue = Issue(None, "loss_by_elimination",
                  f"no series is named as a training loss; `{name}`, "
                  + (f"whose name makes it the objective beside {', '.join(f'`{n}`' for n in others)}, printed on "
                     "every training record" if others else
                     "the one loss-like value printed on every training record")
                  + ", is taken as the training loss"
                  + (f" (and {', '.join(f'`{u[1]}`' for u in updates if u[0] in twins)} as its validation loss)"
                     if twins else "") + ": check that it is the objective")
    return out, [(queries.source_path_of_group(con, run_id, grp) or grp, issue)]


def _unnamed_columns(rows: list[tuple[int, str, str, str]]) -> dict[int, tuple[str, int]]:
    """{series_id: (group, column)} of the console values nothing names, stored as `<file>[<column>]`
    (`ingest.console.unnamed_width`)."""
    from ingest.console import unnamed_column

    columns = {series_id: (grp, unnamed_column(PurePosixPath(grp).name, tag))
               for series_id, grp, tag, fmt in rows if fmt == "console"}
    return {series_id: (grp, column) for series_id, (grp, column) in columns.items() if column is not None}


def _unnamed_loss(con, run_id: str, rows: list[tuple[int, str, str, str]], updates: list[tuple],
                  unnamed: dict[int, tuple[str, int]]) -> tuple[list[tuple], list[tuple[str, Issue]]]:
    """In a run where nothing is named as a loss (no training or validation loss, no name `roles.loss_like`), the one
    file of unnamed values whose first column a user would read as the loss: its only column, or its first where
    every other is bounded like an accuracy (within [0, 1]) or counts (whole numbers); never a column of whole numbers
    (a counter). It becomes the training loss, and an issue names the file and column, so the report shows the guess.
    Two such files leave both as they were (which one is the objective is a guess)."""
    if not unnamed or any(u[2] in ("train_loss", "val_loss") or u[0] not in unnamed and loss_like(u[1])
                          for u in updates):
        return updates, []
    ranges = queries.value_ranges(con, run_id, list(unnamed))
    split = {u[0]: u[3] for u in updates}
    files: dict[str, dict[int, tuple[int, int, float | None, float | None, bool]]] = {}
    for series_id, (grp, column) in unnamed.items():
        if series_id in ranges and split.get(series_id) not in ("val", "test"):  # (`val_log.txt`: a held-out split's)
            files.setdefault(grp, {})[column] = (series_id, *ranges[series_id])
    taken = []
    for grp, columns in files.items():
        first = columns.get(1)
        if first is None or first[1] < MIN_ELIMINATED_POINTS or first[4]:
            continue
        if all(whole or lo is not None and 0 <= lo and hi <= 1
               for column, (_, _, lo, hi, whole) in columns.items() if column != 1):
            taken.append((first[0], grp))
    if len(taken) != 1:
        return updates, []
    series_id, grp = taken[0]
    name = next(u[1] for u in updates if u[0] == series_id)
    out = [(u[0], u[1], "train_loss", u[3], u[4], True) if u[0] == series_id else u for u in updates]
    width = len(files[grp])
    where = "its only value" if width == 1 else f"the first of its {width} values on each line"
    issue = Issue(None, "loss_by_elimination",
                  f"no series is named as a loss; {PurePosixPath(grp).name} prints values nothing names, and {where} "
                  f"(`{name}`) is taken as the training loss: check that it is the objective")
    return out, [(queries.source_path_of_group(con, run_id, grp) or grp, issue)]


def loss_named_otherwise(updates: list[tuple]) -> list[tuple]:
    """In a run that names no training loss (and has none by elimination), a training series that names the objective
    otherwise: its perplexity (`ppl`, `perplexity=`, `train_perplexity`: e^loss, what language-model and seq2seq
    trainers print instead of the loss), else a loss function's name (`train_mse_step`). Those series are the training
    loss under their names as printed (findings quote the file; `roles.is_perplexity` keeps a perplexity away from
    log-levels), and, where no validation loss is named, their held-out twins the validation loss. A run with a loss
    keeps it, and its perplexity stays `other`."""
    if any(u[2] == "train_loss" for u in updates):
        return updates
    for named in (is_perplexity, names_loss_function):
        train = {u[0] for u in updates if u[2] == "other" and u[3] in (None, "train") and named(u[1])}
        if not train:
            continue
        held = set() if any(u[2] == "val_loss" for u in updates) else {
            u[0] for u in updates if u[2] == "other" and u[3] in ("val", "test") and named(u[1])}
        return [(u[0], u[1], "train_loss", u[3], u[4], True) if u[0] in train else
                (u[0], u[1], "val_loss", u[3], u[4], "step" not in words(u[1])) if u[0] in held else u
                for u in updates]
    return updates


def _unsplit(name: str) -> list[str]:
    """A name's words without its split's (`3d_valid` and `3d_train`: 3, d)."""
    return [w for w in words(name) if w not in SPLIT_WORDS]


# -- checkpoints and saved batches --------------------------------------------------------------------------


def checkpoint_size(root: Path, found: FoundCheckpoint) -> int:
    """Bytes of the files a checkpoint claims (those still present)."""
    return sum((root / p).stat().st_size for p in found.files if (root / p).exists())


def _mtime(root: Path, files: Iterable[PurePosixPath]) -> float | None:
    """The newest modification time among `files`: Lightning's last.ckpt is rewritten at the same size."""
    times = [(root / p).stat().st_mtime for p in files if (root / p).exists()]
    return max(times) if times else None


def ingest_checkpoints(
    db: Path | Session,
    run_id: str,
    root: Path,
    found: list[FoundCheckpoint],
    trust_pickle: bool = False,
    on_read: Callable[[FoundCheckpoint, int], None] | None = None,
) -> list[dict[str, Any]]:
    """Read and store every new or changed checkpoint of a run, then the deltas between consecutive ones.

    Each checkpoint is read with no connection open and written in its own short write transaction
    (DECISIONS.md §5: a 10 GB checkpoint must not hold the database lock while it is read). A checkpoint
    already stored with the same size and mtime is not read again, unless it was refused for pickle and
    `trust_pickle` is now given. Deltas are computed for consecutive readable pairs (by step) that have none
    yet, with at most two checkpoints open at once, in the same pass as the statistics where the order is
    known from the names; deltas of pairs no longer consecutive are removed.
    `on_read(found, size_bytes)` is called after each checkpoint (read or skipped), for progress. Returns
    the `checkpoints` rows written, with their issues under "issues" as (path, Issue) pairs.
    """
    store = session_of(db)
    with store.connect(write=True) as con:
        stored = queries.stored_checkpoints(con, run_id)
    written = []
    # In name order (which is step order in every layout above), each checkpoint's deltas against the one
    # before are computed while its statistics are: its tensors are read once, the previous one's again.
    # Pairs this misses or gets wrong (contents steps out of name order) are settled by _store_deltas.
    prev: tuple[int, CheckpointRead] | None = None
    for f in sorted(found, key=lambda f: (f.name_step is None, f.name_step or 0, str(f.path))):
        size, mtime = checkpoint_size(root, f), _mtime(root, f.files)
        old = stored.get(str(f.path))
        if old and (old[1], old[3]) == (size, mtime) and not (trust_pickle and old[2] == "needs_pickle"):
            prev = None  # stored earlier, not open: _store_deltas pairs it
            if on_read:
                on_read(f, size)
            continue
        store.let_go()  # reading a checkpoint (and importing torch) takes long: no held connection meanwhile
        read = read_checkpoint(root, f, trust_pickle, prev=prev[1] if prev else None)
        with store.connect(write=True) as con:
            con.execute("BEGIN")
            writes.upsert_run(con, run_id, storable(Path(root).name), storable(str(root)))
            if old:
                writes.delete_checkpoint(con, run_id, old[0])
            ckpt_id = writes.insert_checkpoint(con, run_id, read.row, read.stats, read.values)
            writes.register_source(con, run_id, str(f.path), "checkpoint", size, mtime, read.row["status"],
                                   read.row["detail"])
            writes.insert_issues(con, run_id, read.issues)
            if prev is not None and read.deltas is not None:
                writes.insert_deltas(con, run_id, ckpt_id, prev[0], read.deltas)
            con.execute("COMMIT")
        written.append({"ckpt_id": ckpt_id, **read.row, "issues": read.issues})
        if read.row["status"] in ("ok", "partial") and read.row["step"] is not None and read.model:
            if prev is not None:
                prev[1].model.clear()  # at most the previous checkpoint stays open
            prev = (ckpt_id, read)
        else:
            read.model.clear()
        if on_read:
            on_read(f, size)
    _store_deltas(store, run_id, root, {str(f.path): f for f in found}, trust_pickle)
    return written


def _store_deltas(store: Session, run_id: str, root: Path, found: dict[str, FoundCheckpoint], trust_pickle: bool) -> None:
    """Deltas for each consecutive pair of readable checkpoints (by step) that has none stored yet."""
    with store.connect(write=True) as con:
        ckpts, done = queries.delta_state(con, run_id)
    pairs = [(cur[0], prev[0], prev[1], cur[1]) for prev, cur in zip(ckpts, ckpts[1:], strict=False)]
    stale = done - {(cur, prev) for cur, prev, _, _ in pairs}  # no longer neighbours: one came between
    if stale:
        with store.connect(write=True) as con:
            writes.delete_deltas(con, run_id, stale)
    opened: dict[int, CheckpointRead] = {}
    for cur_id, prev_id, prev_path, cur_path in pairs:
        if (cur_id, prev_id) in done or prev_path not in found or cur_path not in found:
            continue  # stored already, or a file gone since: its stored rows stay as evidence
        for ckpt_id, path in ((prev_id, prev_path), (cur_id, cur_path)):
            if ckpt_id not in opened:
                store.let_go()
                opened[ckpt_id] = read_checkpoint(root, found[path], trust_pickle, stats=False)
        frame = tensor_deltas(opened[prev_id], opened[cur_id])
        for old in [i for i in opened if i != cur_id]:
            del opened[old]  # only the next pair's first checkpoint stays open
        with store.connect(write=True) as con:
            con.execute("BEGIN")
            writes.insert_deltas(con, run_id, cur_id, prev_id, frame)
            con.execute("COMMIT")


# Saved batches are read in groups, and each group is written in one transaction: a small batch takes ~3 ms to
# read, while a transaction of its own (a connection opened and closed, a commit, five statements) cost ~80 ms,
# which made a run of 100 small batches wait ten times longer than its logs. A group ends when its files reach
# BATCH_GROUP_BYTES (what a crash can cost to read again) or BATCH_GROUP_FILES; what it holds meanwhile is each
# batch's statistics (a row per tensor), never its tensors.
BATCH_GROUP_BYTES = 64 * 2**20
BATCH_GROUP_FILES = 1000


def ingest_batches(
    db: Path | Session, run_id: str, root: Path, found: list[FoundBatch], trust_pickle: bool = False
) -> list[dict[str, Any]]:
    """Read and store saved batches, a group of them per short write transaction (BATCH_GROUP_BYTES). One already
    stored under the same path, size and mtime is not read again, unless it was refused for pickle and
    `trust_pickle` is now given. Returns the `batches` rows written, with their issues under "issues"."""
    store = session_of(db)
    with store.connect(write=True) as con:
        stored = queries.stored_batches(con, run_id)
    todo = []
    for f in found:
        stat = (root / f.path).stat() if (root / f.path).exists() else None
        size, mtime = (stat.st_size, stat.st_mtime) if stat else (0, None)
        old = stored.get(str(f.path))
        if old and old[2:] == (size, mtime) and not (trust_pickle and old[1] == "needs_pickle"):
            continue
        todo.append((f, size, mtime, old))
    if sum(size for _, size, _, _ in todo) > HOLD_BYTES:
        store.let_go()  # a long read: no held connection meanwhile, others get their turn between groups
    written: list[dict[str, Any]] = []
    group: list[tuple[FoundBatch, int, float | None, Any, Any]] = []
    group_bytes = 0
    for f, size, mtime, old in todo:
        group.append((f, size, mtime, old, read_batch(root, f, trust_pickle)))
        group_bytes += size
        if group_bytes >= BATCH_GROUP_BYTES or len(group) >= BATCH_GROUP_FILES:
            written += _write_batches(store, run_id, root, group)
            group, group_bytes = [], 0
    if group:
        written += _write_batches(store, run_id, root, group)
    return written


def _write_batches(store: Session, run_id: str, root: Path, group: list) -> list[dict[str, Any]]:
    """One transaction: each batch of the group replaces the copy stored before (if any), with its source row
    and read problems."""
    written = []
    with store.connect(write=True) as con:
        con.execute("BEGIN")
        writes.upsert_run(con, run_id, storable(Path(root).name), storable(str(root)))
        olds = [old[0] for _, _, _, old, _ in group if old]
        if olds:
            writes.delete_batches(con, run_id, olds)
        ids = writes.insert_batches(con, run_id, [(read.row, read.stats) for *_, read in group])
        writes.register_sources(con, run_id, [(str(f.path), "batch", size, mtime, read.row["status"],
                                               read.row["detail"]) for f, size, mtime, _, read in group])
        writes.insert_issues(con, run_id, [i for *_, read in group for i in read.issues])
        con.execute("COMMIT")
    for batch_id, (*_, read) in zip(ids, group):
        written.append({"batch_id": batch_id, **read.row, "issues": read.issues})
    return written
