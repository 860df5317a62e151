"""W&B runs read from local files with no network: the binary `run-*.wandb` log and the older text files.

A W&B run folder is `wandb/run-YYYYMMDD_HHMMSS-<id>/` (or `offline-run-...`). Current wandb keeps history,
summary and config only in `run-<id>.wandb`: a 7-byte W&B header, then a LevelDB-style log of 32 KiB blocks
whose chunks reassemble into `wandb_internal_pb2.Record` protobufs. wandb ships no local reader for it, so
this module reads the framing itself and decodes the records with wandb's own protobuf classes (loaded
lazily, without the rest of wandb: `_load_protos`). The compiled core `ingest._wandblog` walks the framing and
decodes the common history and summary records into arrays; every other record goes to the exact Python path here
(`_Decoder.handle`), which is also the reference the core is tested against (docs/wandb.md). The text files
of a run folder (`files/config.yaml`, `wandb-summary.json`, `wandb-history.jsonl`, `wandb-metadata.json`)
and the UI's `wandb_export_*.csv` are read by `ingest.wandb_files`, with the value semantics defined here
(`parse_values`, `media`, `unwrap_config_value`).

All files of one W&B run share the group `wandb/<run id>` (`wandb_group`), so history read from the
`.wandb` log and from `wandb-history.jsonl` are one set of series; the jsonl's format is registered with
`dedupe_across_sources=True`, so its points that repeat the log's are stored once (DECISIONS.md §3).
"""

from __future__ import annotations

import json
import math
import mmap
import re
import struct
import sys
import threading
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import polars as pl

from ingest.configs import parse_json
from ingest.errors import MissingDependency
from ingest.records import Chunk, Issue

try:
    from ingest import _wandblog
except ImportError as exc:  # the extension is part of the build: a source checkout that was never built
    _wandblog = None
    _IMPORT_ERROR = str(exc)

# -- groups -----------------------------------------------------------------------------------------------

RUN_FOLDER = re.compile(r"^(?:offline-)?run-\d{8}_\d{6}-(?P<id>[A-Za-z0-9]+)$")
RUN_FILE = re.compile(r"^run-(?P<id>[A-Za-z0-9]+)\.wandb$")


def wandb_run_id(rel: PurePosixPath) -> str | None:
    """The W&B run id from the nearest folder named like a run folder, else from a `run-<id>.wandb` name."""
    for part in reversed(rel.parts[:-1]):
        m = RUN_FOLDER.match(part)
        if m:
            return m.group("id")
    m = RUN_FILE.match(rel.name)
    return m.group("id") if m else None


def wandb_group(rel: PurePosixPath) -> str:
    """`wandb/<run id>` for every file of one W&B run; a loose file with no id groups by its folder."""
    run_id = wandb_run_id(rel)
    if run_id is not None:
        return f"wandb/{run_id}"
    return "" if str(rel.parent) == "." else str(rel.parent)


def in_run_folder(rel: PurePosixPath) -> bool:
    return any(RUN_FOLDER.match(part) for part in rel.parts[:-1])


# -- the binary log ---------------------------------------------------------------------------------------

BLOCK = 32 * 1024
HEADER = 7  # both the W&B file header and each chunk header are 7 bytes
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
WANDB_IDENT = b":W&B"
WANDB_MAGIC = 0xBEE1
KNOWN_VERSIONS = (0, 1)
_CHUNK = struct.Struct("<IHB")
_TYPE_CRC = [zlib.crc32(bytes([t])) for t in range(256)]
SCALARS_PER_CHUNK = 250_000  # bounds memory: a chunk of frames is yielded once this many points are held
# A value_json that starts with one of these is a JSON number (or W&B's NaN / Infinity / -Infinity).
_NUMERIC_START = frozenset("-0123456789NI")


class _Framing:
    """Issues met while walking the log's framing."""

    def __init__(self) -> None:
        self.issues: list[Issue] = []


def _masked_crc32c(typ: int, payload: bytes) -> int:
    import crc32c

    c = crc32c.crc32c(bytes([typ]) + payload)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _log_records(data: bytes | mmap.mmap, start: int, framing: _Framing) -> Iterator[tuple[int, int, bytes]]:
    """Yield (offset, end, payload) of each complete record of a `.wandb` log, from byte `start` on.

    This is the one place that knows W&B's private on-disk layout. Checked against wandb 0.31.0 (the
    files its wandb-core writes) and against the Python writer of older releases
    (`wandb/sdk/internal/datastore.py`) and wandb-core's `core/pkg/leveldb/record.go`:
      - file header: b":W&B", uint16 LE magic 0xBEE1, uint8 version (0; wandb-core's newest source also
        names 1). The header sits inside block 0: blocks are 32 KiB of the file, counted from byte 0.
      - chunk: uint32 LE CRC, uint16 LE length, uint8 type (1 FULL, 2 FIRST, 3 MIDDLE, 4 LAST), payload.
        The CRC is zlib's CRC-32 (IEEE) over the type byte and the payload, unmasked; LevelDB proper uses a
        masked CRC-32C, which wandb-core's leveldb package also offers, so that is accepted too.
      - a chunk never crosses a block; fewer than 7 bytes left in a block are zero padding; a block whose
        remainder is all zero (a preallocated file) holds no more chunks.
    `offset` is the byte offset of the record's first chunk header (the point's identity), `end` the
    offset just past its last chunk (where a later read resumes). Damage is reported on `framing.issues`:
    a bad CRC or a chunk overflowing its block skips to the next block (the records touching the bad block
    are lost, every other one kept); a file cut off mid-record keeps everything before it.
    """
    n = len(data)
    pos = max(start, HEADER)
    parts: list[bytes] = []  # chunks of the record being reassembled
    rec_start = -1
    recovering = False  # after damage: chunks continuing a lost record are skipped silently

    def resync(at: int, kind: str, why: str) -> int:
        nonlocal parts, recovering
        lost = " and the record it continued, begun at byte %d," % rec_start if parts else ""
        nxt = (at // BLOCK + 1) * BLOCK
        framing.issues.append(Issue(at, kind, f"{why} at byte {at}; skipped{lost} to the next block at byte "
                                              f"{min(nxt, n)}"))
        parts = []
        recovering = True
        return nxt

    while True:
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # block trailer: zero padding
            pos += left
            continue
        if pos + HEADER > n:
            if pos < n or parts:
                at = rec_start if parts else pos
                framing.issues.append(Issue(at, "truncated", f"log ends inside a record at byte {at} "
                                                             f"(file is {n} bytes): the writer stopped mid-write"))
            return
        crc, length, typ = _CHUNK.unpack_from(data, pos)
        if crc == 0 and length == 0 and typ == 0:  # zeroed rest of block
            if parts:
                pos = resync(pos, "garbled", "zeroed bytes inside a multi-chunk record")
            else:
                pos += left
            continue
        end = pos + HEADER + length
        if length > left - HEADER:
            if end > n and pos + left >= n:  # the last block, cut short: a chunk the writer never finished
                at = rec_start if parts else pos
                framing.issues.append(Issue(at, "truncated", f"log ends inside a record at byte {at} "
                                                             f"(file is {n} bytes): the writer stopped mid-write"))
                return
            pos = resync(pos, "garbled", f"chunk length {length} overflows its block")
            continue
        if end > n:
            at = rec_start if parts else pos
            framing.issues.append(Issue(at, "truncated", f"log ends inside a record at byte {at} "
                                                         f"(file is {n} bytes): the writer stopped mid-write"))
            return
        payload = data[pos + HEADER:end]
        if typ > LAST or (zlib.crc32(payload, _TYPE_CRC[typ]) != crc and _masked_crc32c(typ, payload) != crc):
            pos = resync(pos, "crc_mismatch", f"chunk CRC mismatch (type {typ}, length {length})")
            continue
        if typ == FULL or typ == FIRST:
            if parts:
                framing.issues.append(Issue(rec_start, "garbled", f"record begun at byte {rec_start} never "
                                                                  f"finished (next record at byte {pos}); dropped"))
                parts = []
            recovering = False
            if typ == FULL:
                yield pos, end, payload
            else:
                parts, rec_start = [payload], pos
        elif not parts:
            if not recovering:
                framing.issues.append(Issue(pos, "garbled", f"continuation chunk at byte {pos} with no record "
                                                            "begun; skipped"))
        elif typ == MIDDLE:
            parts.append(payload)
        else:
            parts.append(payload)
            yield rec_start, end, b"".join(parts)
            parts = []
        pos = end


def check_header(head: bytes) -> str | None:
    """None when `head` opens a W&B log this reader knows, else why not (one sentence)."""
    if len(head) < HEADER:
        return f"file is {len(head)} bytes, shorter than the 7-byte W&B header"
    ident, magic, version = struct.unpack_from("<4sHB", head)
    if ident != WANDB_IDENT or magic != WANDB_MAGIC:
        return f"does not start with the W&B log header (first bytes {head[:7]!r})"
    if version not in KNOWN_VERSIONS:
        return f"W&B log version {version} is newer than this reader knows ({KNOWN_VERSIONS}); try a newer run-forensics"
    return None


_PROTOS: Any = None
_PROTOS_LOCK = threading.Lock()


def _load_protos():
    """wandb's `Record` protobuf classes, loaded without running `wandb/__init__.py` when this process has not
    imported wandb itself: that import makes folders in the system temp folder for uploads
    (`tmp*wandb-artifacts`, `tmp*wandb-media`), removed only by the interpreter's teardown, which the CLI and
    its workers skip, and costs over a second more. Only the protobuf modules (`wandb.proto`, which import
    nothing of wandb's but each other) are loaded, under a stand-in for the package that is taken away at once,
    with them: a later `import wandb` in this process is the whole package, as if nothing had been loaded."""
    global _PROTOS
    with _PROTOS_LOCK:
        if _PROTOS is None:
            try:
                _PROTOS = _protos_alone() if "wandb" not in sys.modules else _protos_of_wandb()
            except ImportError as exc:
                raise MissingDependency(f"reading W&B .wandb files needs the wandb package ({exc}); "
                                        "run: pip install wandb") from None
        return _PROTOS


def _protos_of_wandb():
    from wandb.proto import wandb_internal_pb2

    return wandb_internal_pb2


def _protos_alone():
    import importlib.util
    import types

    spec = importlib.util.find_spec("wandb")  # finds the package without running it
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("No module named 'wandb'")
    stand_in = types.ModuleType("wandb")
    stand_in.__path__ = list(spec.submodule_search_locations)
    before = set(sys.modules)
    sys.modules["wandb"] = stand_in
    try:
        return _protos_of_wandb()
    finally:
        for name in [n for n in sys.modules if n not in before and (n == "wandb" or n.startswith("wandb."))]:
            del sys.modules[name]


def _core():
    if _wandblog is None:
        raise MissingDependency(
            f"the compiled W&B reader ingest._wandblog is not built ({_IMPORT_ERROR}); "
            "run `pip install -e .` in the run-forensics checkout (needs a C compiler)"
        )
    return _wandblog


def read_wandb(path: Path, start: int = 0, *, compiled: bool = True) -> Iterator[Chunk]:
    """Read a `run-<id>.wandb` log from byte `start`: history as scalars (and histograms), config and summary.

    - step: the row's `_step` item, else the record's `step.num`, else the next step W&B's own
      HistoryStepTracker would assign (previous step + 1, from the run's `starting_step`).
      wall_time: the row's `_timestamp`. `_runtime` is kept as its own series.
    - values are kept exactly as logged: NaN, Infinity and -Infinity included. Strings, booleans, media and
      tables are not scalars; they are counted in one `skipped_values` issue. W&B histograms become
      histogram rows.
    - system metrics (`stats` records) become `system/<key>` series (as W&B names them), stepped by their
      ordinal among the key's points and marked `ordinal`; their wall_time is the record's timestamp.
    - configs: `wandb_config` (the run's config, `_wandb` dropped), `wandb_summary` (the summary keys updated
      in this read: on a resumed read, only the newer ones), `wandb_run` (id, name, project, ...).
    A file that is not a W&B log, is empty, or is of an unknown version gives one issue and no points.
    `compiled=False` reads with the pure-Python walk, the reference the compiled core is tested against.
    The compiled core is part of the build, as TensorBoard's is (docs/wandb.md, "Compiled cores"): when it is
    missing the read is a MissingDependency naming the build command, never a silent 10x slower walk.
    """
    with open(path, "rb") as fh:
        head = fh.read(HEADER)
        problem = check_header(head)
        if problem is not None:
            kind = "empty" if not head else "not_this_format"
            yield Chunk(end=start, issues=[Issue(0, kind, f"{path.name}: {problem}")])
            return
        size = fh.seek(0, 2)
        if size <= max(start, HEADER):
            return
        pb = _load_protos()
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            if compiled:
                yield from _decode_compiled(data, start, path, pb, _core())
            else:
                yield from _decode(data, start, path, pb)


class _Run:
    """What the log says about the run, accumulated across records."""

    def __init__(self) -> None:
        self.info: dict[str, Any] = {}
        self.config: dict[str, str] = {}  # dotted key -> raw value_json, parsed when emitted
        self.summary: dict[str | tuple[str, ...], str] = {}  # key (a tuple when nested) -> raw value_json
        self.next_step = 0  # the step W&B assigns to a row that names none
        self.stats_ordinal = 0


def _view_class(pb):
    """A flat view of W&B's Record for the hot path, built from wandb's own descriptors' field numbers.

    Protobuf merges repeated occurrences of a singular message field, so declaring HistoryRecord.item
    (a repeated HistoryItem) as ONE `Items` message whose fields are repeated strings makes the C parser
    collect every item's `nested_key` and `value_json` into two flat lists: no Python object per item.
    (wandb's upb classes make one per item when iterated, ~2 us each: most of a naive reader's time.)
    The lists line up one to one only when every item has exactly one `nested_key` and a `value_json`;
    `_fast_items` checks that by counting (see there), else the record takes the exact per-item path.
    """
    global _VIEW
    if _VIEW is not None:
        return _VIEW
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    pkg = "forensics_wandb_view"
    fdp = descriptor_pb2.FileDescriptorProto(name=f"{pkg}.proto", package=pkg, syntax="proto3")

    def message(name, fields):
        m = fdp.message_type.add(name=name)
        for fname, number, ftype, label, type_name in fields:
            m.field.add(name=fname, number=number, type=ftype, label=label, type_name=type_name or None)

    rep, opt = field.LABEL_REPEATED, field.LABEL_OPTIONAL
    item = pb.HistoryItem.DESCRIPTOR.fields_by_name
    message("Items", [(n, item[n].number, field.TYPE_STRING, rep, None) for n in ("key", "nested_key", "value_json")])
    hist = pb.HistoryRecord.DESCRIPTOR.fields_by_name
    message("Step", [("num", pb.HistoryStep.DESCRIPTOR.fields_by_name["num"].number, field.TYPE_INT64, opt, None)])
    message("History", [("item", hist["item"].number, field.TYPE_MESSAGE, opt, f".{pkg}.Items"),
                        ("step", hist["step"].number, field.TYPE_MESSAGE, opt, f".{pkg}.Step")])
    summ = pb.SummaryRecord.DESCRIPTOR.fields_by_name
    message("Summary", [("update", summ["update"].number, field.TYPE_MESSAGE, opt, f".{pkg}.Items"),
                        ("remove", summ["remove"].number, field.TYPE_BYTES, rep, None)])
    rec = pb.Record.DESCRIPTOR.fields_by_name
    message("Record", [("history", rec["history"].number, field.TYPE_MESSAGE, opt, f".{pkg}.History"),
                       ("summary", rec["summary"].number, field.TYPE_MESSAGE, opt, f".{pkg}.Summary")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    _VIEW = message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{pkg}.Record"))
    return _VIEW


_VIEW = None


def _fast_items(items) -> tuple[list[str], list[str]] | None:
    """(keys, value_json texts) of merged items when they line up one to one, else None (see `_view_class`).

    When no item uses `key`, each names itself by >= 1 `nested_key` and has at most one `value_json`; so
    equal counts mean every item has exactly one of each. An item with a typed value instead of value_json
    (newer writers), or a nested dict, breaks the equality and goes the exact way.
    """
    nk = list(items.nested_key)
    vj = list(items.value_json)
    if len(nk) != len(vj) or items.key:
        return None
    return nk, vj


def _history_exact(hist, tags, raws, hist_rows, skipped, offset) -> tuple[int | None, float | None, dict | None]:
    """The per-item path for history rows the flat view cannot line up: nested dicts, `key`, typed values."""
    step = wall = None
    groups: dict[str, list] | None = None
    for item in hist.item:
        nk = item.nested_key
        if len(nk) == 1:
            key = nk[0]
        elif not nk:
            key = item.key
        else:  # a nested dict: media objects (with `_type`) or nested metrics
            if groups is None:
                groups = {}
            groups.setdefault(nk[0], []).append(item)
            continue
        vj = item.value_json
        if key == "_step":
            step = _as_int(vj)
            continue
        if key == "_timestamp":
            wall = _as_float(vj)
            continue
        if not vj:
            vj = _typed_value_json(item)
            if vj is None:
                skipped["typed non-number"] += 1
                continue
        tags.append(key)
        raws.append(vj)
    return step, wall, groups


class _Decoder:
    """The exact meaning of each record, accumulated into chunks: used by the Python walk for every record and
    by the compiled walk for the records its core hands back. Holds one chunk's lists until `chunk()`."""

    def __init__(self, pb, start: int) -> None:
        self.framing = _Framing()
        self.run = _Run()
        self.record = pb.Record()
        self.view = _view_class(pb)()
        self.config_dirty = self.summary_dirty = self.run_dirty = False
        self.stat_rows: list[tuple[str, str, int, int, float]] = []
        self.fast_rows = 0  # history rows the compiled core holds for this chunk (they count as `tags` too)
        self._reset()

    def _reset(self) -> None:
        self.tags: list[str] = []
        self.raws: list[str] = []
        self.positions: list[int] = []
        self.steps: list[int] = []
        self.walls: list[float | None] = []
        self.hist_rows: list[dict[str, Any]] = []
        self.skipped: Counter[str] = Counter()

    def handle(self, offset: int, end: int, payload: bytes) -> None:
        """Take in one record (its first chunk at byte `offset`); its rows are collected as raw strings."""
        run, view, record, tags, raws = self.run, self.view, self.record, self.tags, self.raws
        try:
            view.ParseFromString(payload)
            kind = "history" if view.HasField("history") else "summary" if view.HasField("summary") else None
            fast = None
            if kind == "history":
                fast = _fast_items(view.history.item)
            elif kind == "summary" and not view.summary.remove:
                fast = _fast_items(view.summary.update)
            if fast is None:
                record.ParseFromString(payload)
                kind = record.WhichOneof("record_type")
        except Exception as exc:  # protobuf's DecodeError has no stable import path across versions: re-raised below
            if type(exc).__name__ != "DecodeError":
                raise
            self.framing.issues.append(Issue(offset, "garbled", f"record at byte {offset} passed its CRC but is "
                                                                f"not a W&B Record protobuf ({exc}); skipped"))
            return
        if kind == "history":
            n0 = len(tags)
            groups = None
            if fast is not None:
                keys, values = fast
                step = wall = None
                if "_step" in keys:
                    i = keys.index("_step")
                    step = _as_int(values[i])
                    del keys[i], values[i]
                if "_timestamp" in keys:
                    i = keys.index("_timestamp")
                    wall = _as_float(values[i])
                    del keys[i], values[i]
                tags.extend(keys)
                raws.extend(values)
                hist = view.history
            else:
                hist = record.history
                step, wall, groups = _history_exact(hist, tags, raws, self.hist_rows, self.skipped, offset)
            if step is None:
                step = hist.step.num if hist.HasField("step") else run.next_step
            run.next_step = step + 1
            if groups:
                for top, items in groups.items():
                    _nested_group(top, items, tags, raws, self.hist_rows, self.skipped, step, wall, offset)
            n = len(tags) - n0
            if n:
                self.positions.extend([offset] * n)
                self.steps.extend([step] * n)
                self.walls.extend([wall] * n)
        elif kind == "summary":
            if fast is not None:
                run.summary.update(zip(*fast))
            else:
                for item in record.summary.update:
                    run.summary[_summary_key(item)] = item.value_json
                for item in record.summary.remove:
                    run.summary.pop(_summary_key(item), None)
            self.summary_dirty = True
        elif kind == "config":
            _config_update(run, record.config)
            self.config_dirty = True
        elif kind == "run":
            r = record.run
            run.info.update({k: v for k, v in (("run_id", r.run_id), ("name", r.display_name),
                                               ("project", r.project), ("entity", r.entity),
                                               ("group", r.run_group), ("job_type", r.job_type),
                                               ("host", r.host)) if v})
            if r.HasField("start_time"):
                run.info["start_time"] = r.start_time.seconds + r.start_time.nanos / 1e9
            if r.starting_step:
                run.info["starting_step"] = r.starting_step
                if not tags and not self.fast_rows:
                    run.next_step = max(run.next_step, r.starting_step)
            if r.resumed:
                run.info["resumed"] = True
            _config_update(run, r.config)
            self.run_dirty = self.config_dirty = True
        elif kind == "stats":
            s = record.stats
            t = s.timestamp.seconds + s.timestamp.nanos / 1e9 if s.HasField("timestamp") else None
            for item in s.item:
                self.stat_rows.append((item.key, item.value_json, run.stats_ordinal, offset, t))
            run.stats_ordinal += 1

    def chunk(self, end: int, fast: pl.DataFrame | None = None) -> Chunk:
        """The chunk of what was collected (plus the compiled core's rows `fast`); the lists start afresh."""
        chunk = _chunk(end, self.tags, self.raws, self.positions, self.steps, self.walls, self.hist_rows,
                       self.skipped, self.framing, fast)
        self._reset()
        self.framing.issues = []
        return chunk

    def finish(self, end: int, fast: pl.DataFrame | None = None) -> Iterator[Chunk]:
        """The last chunk, with the configs, then the system metrics (their steps are ordinals of the read)."""
        chunk = self.chunk(end, fast)
        if self.run_dirty:
            chunk.configs["wandb_run"] = dict(self.run.info)
        if self.config_dirty:
            chunk.configs["wandb_config"] = {k: v for k, v in _parse_config(self.run).items() if k != "_wandb"}
        if self.summary_dirty:
            chunk.configs["wandb_summary"] = _parse_summary(self.run.summary)
        yield chunk
        if self.stat_rows:
            yield _stats_chunk(end, self.stat_rows)


def _decode(data: mmap.mmap, start: int, path: Path, pb) -> Iterator[Chunk]:
    """The pure-Python walk: every record through `_Decoder.handle` (the reference the compiled walk matches)."""
    dec = _Decoder(pb, start)
    if start > HEADER:
        _seed_steps(data, start, dec.run, pb)
    last_end = start
    for offset, end, payload in _log_records(data, start, dec.framing):
        dec.handle(offset, end, payload)
        last_end = end
        if len(dec.tags) >= SCALARS_PER_CHUNK:
            yield dec.chunk(last_end)
    yield from dec.finish(last_end)


_WHY_END, _WHY_SLOW, _WHY_FULL = 0, 1, 2


def _decode_compiled(data: mmap.mmap, start: int, path: Path, pb, core) -> Iterator[Chunk]:
    """The compiled walk: `ingest._wandblog` takes in the common history and summary records itself (rows go
    to packed arrays, tags interned once per read) and stops at every other record, which `_Decoder.handle`
    takes in exactly as the Python walk would. Chunks, issues, steps and resume positions are the Python
    walk's, point for point (tests/test_wandb.py checks it on real and damaged files)."""
    dec = _Decoder(pb, start)
    if start > HEADER:
        _seed_steps(data, start, dec.run, pb)
    scanner = core.Scanner()
    names: list[str] = []  # interned keys, by id
    n = len(data)
    pos, last_end = max(start, HEADER), start

    def held_frame() -> pl.DataFrame | None:
        pos_b, step_b, wall_b, has_wall_b, value_b, tag_b = scanner.take()
        if not pos_b:
            return None
        names.extend(k.decode("utf-8") for k in scanner.keys(len(names)))
        walls = pl.Series("wall_time", np.frombuffer(wall_b, np.float64))
        has_wall = np.frombuffer(has_wall_b, np.bool_)
        if not has_wall.all():
            walls = walls.scatter(np.flatnonzero(~has_wall), None)
        return pl.DataFrame({
            "tag": pl.Series("tag", names, dtype=pl.Utf8).gather(pl.Series(np.frombuffer(tag_b, np.int32))),
            "step": np.frombuffer(step_b, np.int64),
            "position": np.frombuffer(pos_b, np.int64),
            "wall_time": walls,
            "value": np.frombuffer(value_b, np.float64),
        })

    while True:
        why, pos, dec.run.next_step, fast_end, n_summaries, issues, summary, slow = scanner.scan(
            data, pos, dec.run.next_step, SCALARS_PER_CHUNK - len(dec.tags))
        if fast_end >= 0:
            last_end = fast_end
        if issues:
            dec.framing.issues.extend(_framing_issue(n, *i) for i in issues)
        if n_summaries:
            if summary:
                names.extend(k.decode("utf-8") for k in scanner.keys(len(names)))
                dec.run.summary.update((names[i], v) for i, v in summary)
            dec.summary_dirty = True
        if why == _WHY_SLOW:
            dec.fast_rows = scanner.held()
            offset, last_end, payload = slow
            dec.handle(offset, last_end, payload)
        if why == _WHY_END:
            break
        if scanner.held() + len(dec.tags) >= SCALARS_PER_CHUNK:
            yield dec.chunk(last_end, held_frame())
    yield from dec.finish(last_end, held_frame())


def _framing_issue(n: int, code: int, at: int, rec_start: int, length: int, typ: int) -> Issue:
    """An issue the compiled walk met, worded exactly as `_log_records` words it."""
    if code == 0:
        return Issue(at, "truncated", f"log ends inside a record at byte {at} (file is {n} bytes): the writer "
                                      "stopped mid-write")
    if code == 4:
        return Issue(at, "garbled", f"record begun at byte {at} never finished (next record at byte {rec_start}); "
                                    "dropped")
    if code == 5:
        return Issue(at, "garbled", f"continuation chunk at byte {at} with no record begun; skipped")
    kind, why = {1: ("garbled", "zeroed bytes inside a multi-chunk record"),
                 2: ("garbled", f"chunk length {length} overflows its block"),
                 3: ("crc_mismatch", f"chunk CRC mismatch (type {typ}, length {length})")}[code]
    lost = " and the record it continued, begun at byte %d," % rec_start if rec_start >= 0 else ""
    nxt = (at // BLOCK + 1) * BLOCK
    return Issue(at, kind, f"{why} at byte {at}; skipped{lost} to the next block at byte {min(nxt, n)}")


def _summary_key(item) -> str | tuple[str, ...]:
    nk = item.nested_key
    return nk[0] if len(nk) == 1 else (tuple(nk) or item.key)


def _as_int(vj: str) -> int | None:
    """A step from its text; None when it is no integer or does not fit int64 (the store's step type)."""
    try:
        n = int(vj)
    except ValueError:
        f = _as_float(vj)
        n = int(f) if f is not None and math.isfinite(f) and f == int(f) else None
    return n if n is not None and -2**63 <= n < 2**63 - 1 else None


def _as_float(vj: str) -> float | None:
    """A number from its JSON text; float() reads W&B's NaN / Infinity too, and far faster than json.loads."""
    try:
        return float(vj)
    except ValueError:
        try:
            return float(parse_json(vj))
        except (ValueError, TypeError):
            return None


def _typed_value_json(item) -> str | None:
    """A HistoryItem carrying its value in the typed `value` oneof (newer writers) as JSON text, if a number."""
    which = item.WhichOneof("value")
    if which == "number":
        v = item.number
        return "NaN" if v != v else ("Infinity" if v == math.inf else "-Infinity" if v == -math.inf else repr(v))
    if which == "integer":
        return str(item.integer)
    if which == "json":
        return item.json or None
    return None


def _nested_group(top, items, tags, raws, hist_rows, skipped, step, wall, offset) -> None:
    """Items sharing a first key: a W&B media object when one of them is `_type`, else nested metrics."""
    typ = next((it.value_json for it in items if len(it.nested_key) == 2 and it.nested_key[1] == "_type"), None)
    if typ is None:
        for it in items:
            tags.append(".".join(it.nested_key))
            raws.append(it.value_json)
        return
    obj: dict[str, Any] = {}
    for it in items:
        try:
            obj[it.nested_key[1]] = parse_json(it.value_json)
        except ValueError:
            pass
    media(top, obj, hist_rows, skipped, step, wall, offset)


def media(tag: str, obj: dict[str, Any], hist_rows, skipped, step, wall, offset) -> None:
    """A W&B media object (`_type`): a histogram becomes a histogram row, anything else a count in `skipped`."""
    kind = obj.get("_type")
    if kind == "histogram":
        row = histogram_row(tag, obj, step, wall, offset)
        if row is not None:
            hist_rows.append(row)
            return
    skipped[str(kind)] += 1


def histogram_row(tag: str, obj: dict[str, Any], step: int, wall: float | None, position: int) -> dict | None:
    """A W&B histogram (`values` counts with `bins` edges, or `packedBins` {min, size, count}) as a row.

    W&B keeps bucket edges (n+1 of them), not sums: `bucket_limits` are the right edges, `min`/`max` the outer
    edges, `num` the total count; sum, sum_squares, mean and std are unknown (null). `zero_fraction` is the
    mass of the bucket holding 0 (buckets half-open, as numpy.histogram makes them). None when the object
    is not a well-formed histogram.
    """
    counts = obj.get("values")
    bins = obj.get("bins")
    packed = obj.get("packedBins")
    if bins is None and isinstance(packed, dict):
        try:
            lo, size, count = float(packed["min"]), float(packed["size"]), int(packed["count"])
        except (KeyError, TypeError, ValueError):
            return None
        bins = [lo + size * i for i in range(count + 1)]
    if not isinstance(counts, list) or not isinstance(bins, list) or len(bins) != len(counts) + 1 or not counts:
        return None
    try:
        counts = [float(c) for c in counts]
        bins = [float(b) for b in bins]
    except (TypeError, ValueError):
        return None
    num = sum(counts)
    zero = 0.0
    last = len(counts) - 1
    for i, c in enumerate(counts):  # buckets are half-open [lo, hi) as numpy makes them; the last is closed
        if bins[i] <= 0.0 < bins[i + 1] or (i == last and bins[i] <= 0.0 == bins[i + 1]):
            zero = c
            break
    return {"tag": tag, "step": step, "position": position, "wall_time": wall, "bucket_limits": bins[1:],
            "bucket_counts": counts, "min": bins[0], "max": bins[-1], "num": num,
            "zero_fraction": zero / num if num else None}


def parse_values(raws: list[str]) -> list[Any]:
    """Parse many JSON texts at once: one `json.loads` over a joined array (W&B's NaN/Infinity included).

    A per-value `json.loads` caps near 0.25M values/s; one call over the joined text runs in C. If any text
    is malformed the batch falls back to one parse per value, and the bad ones become None.
    """
    if not raws:
        return []
    try:
        out = json.loads("[" + ",".join(raws) + "]")
        if len(out) == len(raws):
            return out
    except (ValueError, RecursionError):  # a malformed text, or one nested past the document limits
        pass
    parsed: list[Any] = []
    for raw in raws:
        try:
            parsed.append(parse_json(raw))
        except ValueError:
            parsed.append(None)
    return parsed


def _scalar_mask(raws: list[str]) -> list[bool]:
    return [bool(r) and r[0] in _NUMERIC_START for r in raws]


def _chunk(end, tags, raws, positions, steps, walls, hist_rows, skipped, framing, fast) -> Chunk:
    """Build one Chunk: every value parsed in one go; non-numbers (dicts, strings, lists, bools) sorted out.

    `fast` holds the rows the compiled core decoded (records none of these lists hold): merged in by record
    position, so the frame's rows come in file order as the Python walk gives them.
    """
    issues = list(framing.issues)
    values = parse_values(raws)
    keep = None
    if not set(map(type, values)) <= {float, int}:  # one C-level pass; the common case stops here
        keep = [type(v) in (float, int) for v in values]
        for i, k in enumerate(keep):
            if not k:
                obj = values[i]
                if isinstance(obj, dict) and "_type" in obj:
                    media(tags[i], obj, hist_rows, skipped, steps[i], walls[i], positions[i])
                else:
                    skipped[type(obj).__name__ if obj is not None else "null"] += 1
        values = [v for v, k in zip(values, keep) if k]
    scalars = None
    if tags:
        frame = pl.DataFrame({"tag": tags, "step": steps, "position": positions, "wall_time": walls},
                             schema={"tag": pl.Utf8, "step": pl.Int64, "position": pl.Int64, "wall_time": pl.Float64})
        if keep is not None:
            frame = frame.filter(pl.Series(keep))
        scalars = frame.with_columns(pl.Series("value", values, dtype=pl.Float64))
    if fast is not None:
        scalars = fast if scalars is None else pl.concat([fast, scalars]).sort("position", maintain_order=True)
    histograms = pl.DataFrame(hist_rows) if hist_rows else None
    if skipped:
        detail = ", ".join(f"{n} {k}" for k, n in skipped.most_common())
        issues.append(Issue(None, "skipped_values", f"history values that are not scalars, not stored: {detail}"))
    return Chunk(end=end, scalars=scalars, histograms=histograms, issues=issues)


def _stats_chunk(end: int, rows) -> Chunk:
    """System metrics as `system/<key>` series (W&B's own names for them).

    They carry no step: each point's step is its ordinal among this key's points in this read (`ordinal`).
    """
    keys, raws, _ordinals, positions, walls = (list(c) for c in zip(*rows))
    numeric = _scalar_mask(raws)
    idx = [i for i, k in enumerate(numeric) if k]
    values = parse_values([raws[i] for i in idx])
    frame = pl.DataFrame({"tag": ["system/" + keys[i] for i in idx],
                          "value": pl.Series(values, dtype=pl.Float64, strict=False),
                          "position": [positions[i] for i in idx], "wall_time": [walls[i] for i in idx]},
                         schema_overrides={"position": pl.Int64, "wall_time": pl.Float64})
    frame = frame.with_columns(step=pl.int_range(pl.len()).over("tag").cast(pl.Int64), ordinal=pl.lit(True))
    return Chunk(end=end, scalars=frame.filter(pl.col("value").is_not_null()))


def _config_update(run: _Run, cfg) -> None:
    for item in cfg.update:
        key = ".".join(item.nested_key) if item.nested_key else item.key
        run.config[key] = item.value_json
    for item in cfg.remove:
        run.config.pop(".".join(item.nested_key) if item.nested_key else item.key, None)


def _parse_config(run: _Run) -> dict[str, Any]:
    keys = list(run.config)
    values = parse_values(list(run.config.values()))
    out: dict[str, Any] = {}
    for key, value in zip(keys, values):
        out[key] = unwrap_config_value(value)
    return out


def unwrap_config_value(value: Any) -> Any:
    """W&B config values are sometimes `{"value": v, "desc": ...}` wrapped (config.yaml): unwrap them."""
    if isinstance(value, dict) and "value" in value and set(value) <= {"value", "desc"}:
        return value["value"]
    return value


def _parse_summary(summary: dict[str | tuple[str, ...], str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in zip(summary, parse_values(list(summary.values()))):
        path = (key,) if isinstance(key, str) else key
        node = out
        for part in path[:-1]:
            nxt = node.get(part)
            if not isinstance(nxt, dict):
                nxt = node[part] = {}
            node = nxt
        node[path[-1]] = value
    return out


def _seed_steps(data: mmap.mmap, start: int, run: _Run, pb) -> None:
    """On a resumed read, replay the history steps before `start` so that step-less rows get W&B's numbering.

    Only needed for writers that leave auto-numbered rows without `_step` (wandb 0.31 always writes it). It
    parses every record before `start` with protobuf: a cost paid only on a resumed read.
    """
    record = pb.Record()
    for _offset, _end, payload in _log_records(data[:start], 0, _Framing()):
        try:
            record.ParseFromString(payload)
        except Exception as exc:  # DecodeError only, as in _decode: anything else is re-raised
            if type(exc).__name__ != "DecodeError":
                raise
            continue
        kind = record.WhichOneof("record_type")
        if kind == "run" and record.run.starting_step:
            run.next_step = max(run.next_step, record.run.starting_step)
        elif kind == "history":
            step = next((_as_int(i.value_json) for i in record.history.item
                         if i.key == "_step" or list(i.nested_key) == ["_step"]), None)
            if step is None:
                step = record.history.step.num if record.history.HasField("step") else run.next_step
            run.next_step = step + 1
