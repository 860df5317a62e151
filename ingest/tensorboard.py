"""TensorBoard event files (torch.utils.tensorboard, tensorboardX, TensorFlow): scalars, histograms, text, hparams.

An event file is a sequence of TFRecords, each holding one `Event` protobuf:

    uint64 length | uint32 masked_crc32c(length) | data[length] | uint32 masked_crc32c(data)

The compiled core `ingest._tfevents` walks the framing, checks both CRCs of every record and decodes the
common Event shape (wall_time, step, Values of tag + simple_value) straight into arrays, without a Python call
per record. Records of any other shape (histograms, TF2 tensor summaries, text, hparams, file_version, graphs)
come back as (offset, length) pairs and are decoded here with TensorBoard's compiled protobufs (imported
lazily, 0.03 s). docs/tensorboard.md has the measurements behind this split.

Damage is data (DECISIONS.md §4). TensorBoard's own reader stops at the first bad record; this one keeps
every good record and reports the rest as `Issue`s:

    crc_mismatch     a record whose data CRC fails: skipped, reading goes on with the next record
    bad_length       a length whose own CRC fails: skipped forward to the next offset whose length and
                     length CRC check out (detail gives the bytes skipped)
    truncated        the file ends inside a record (a crash mid-write, or a writer still running): every
                     record before it is kept and `Chunk.end` stops at its start, so a later ingest of the
                     grown file resumes there
    garbled          a record whose CRCs check out but whose payload is not a parseable Event
    empty            a zero-length file
    not_this_format  a file named like an event file holding no valid record at all
"""

from __future__ import annotations

import math
import os
from bisect import bisect_right
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ingest.errors import MissingDependency
from ingest.records import Chunk, Issue, histograms_frame, scalars_frame, texts_frame

try:
    from ingest import _tfevents
except ImportError as exc:  # the extension is part of the build: a source checkout that was never built
    _tfevents = None
    _IMPORT_ERROR = str(exc)

CHUNK_BYTES = 64 << 20  # file bytes per Chunk: bounds memory (~3x this at peak) for any file size

_ISSUE_CRC, _ISSUE_BAD_LENGTH, _ISSUE_TRUNCATED = 0, 1, 2


def read_events(path: Path, start: int = 0, chunk_bytes: int = CHUNK_BYTES) -> Iterator[Chunk]:
    """Read an event file from byte `start`, one `Chunk` per `chunk_bytes` of file.

    Every record is CRC-checked. Scalars keep the writer's step and wall time and their exact value (float32
    `simple_value`s widen to float64 exactly; NaN and ±Inf are kept). A record holding several Values gives
    several rows sharing that record's `position` (its byte offset). `Chunk.end` is the end of the last
    complete record read (or, past damage that reaches the end of the file, the file's end), so resuming at
    it never reads a record twice. A record longer than `chunk_bytes` is read whole (a large graph).
    """
    core = _core()
    path = Path(path)
    size = path.stat().st_size
    if size == 0:
        yield Chunk(end=0, issues=[Issue(None, "empty", f"{path} is empty (0 bytes): no events were written")])
        return
    if start >= size:
        return
    chunk_bytes = max(chunk_bytes, 16)  # a buffer must hold a record's 12-byte header, or no scan can progress
    decoder = _SlowDecoder(path)
    found_any = False  # a record decoded, failed only its data CRC, or was cut off
    # One bytearray, refilled in place: memory stays ~ chunk_bytes for the buffer plus one chunk's frames.
    buf = bytearray(chunk_bytes)
    filled, base, resync = 0, start, -1
    with path.open("rb", buffering=0) as f:
        f.seek(start)
        while True:
            filled, final = _fill(f, buf, filled)
            with memoryview(buf) as whole, whole[:filled] as view:
                result = core.scan(view, final, resync)
                consumed, need, resync = result[:3]
                if need > filled - consumed and not final and consumed == 0:
                    grow = True
                else:
                    grow = False
                    chunk = _chunk(path, base, view, result, decoder)
            if grow:
                # One record is larger than the buffer: read on until it fits. A length claiming more than the
                # file holds (valid CRC, so written so) asks for no more than the file: it ends as truncated.
                left = os.fstat(f.fileno()).st_size - base
                target = min(max(need, 2 * len(buf)), max(left, len(buf)) + 1)
                buf.extend(bytes(target - len(buf)))
                continue
            raw_issues = result[-1]
            found_any = found_any or bool(len(result[3]) or len(result[9]))
            found_any = found_any or any(kind != _ISSUE_BAD_LENGTH for kind, _, _ in raw_issues)
            del result
            if final and start == 0 and not found_any and _only_bad_lengths(chunk.issues):
                chunk.issues = [
                    Issue(None, "not_this_format", f"{path} is named like an event file but holds no valid "
                          "TFRecord (no length whose CRC32C checks out); it was not written by TensorBoard")
                ]
                chunk.end = size
            yield chunk
            del chunk  # let the consumer free it before the next one is built
            if final:
                return
            buf[: filled - consumed] = buf[consumed:filled]
            filled -= consumed
            base += consumed
            if resync != -1:
                resync -= consumed
            if len(buf) > chunk_bytes and filled < chunk_bytes:
                del buf[chunk_bytes:]  # back to the usual size after a record larger than a chunk


def _fill(f, buf: bytearray, filled: int) -> tuple[int, bool]:
    """Read into buf[filled:] until it is full or the file ends; (bytes held, whether the file ended)."""
    with memoryview(buf) as view:
        while filled < len(buf):
            n = f.readinto(view[filled:])
            if not n:
                return filled, True
            filled += n
    return filled, False


def _core():
    if _tfevents is None:
        raise MissingDependency(
            f"the compiled TensorBoard reader ingest._tfevents is not built ({_IMPORT_ERROR}); "
            "run `pip install -e .` in the run-forensics checkout (needs a C compiler)"
        )
    return _tfevents


def _only_bad_lengths(issues: list[Issue]) -> bool:
    """No length in the whole file checked out (a valid length gives a record, a CRC mismatch or a truncation)."""
    return bool(issues) and all(i.kind == "bad_length" for i in issues)


def _chunk(path: Path, base: int, buf: memoryview, result: tuple, decoder: _SlowDecoder) -> Chunk:
    """Turn one `scan` result into a Chunk: numpy views of the packed arrays, then the rare records."""
    consumed, _, _, pos, steps, walls, values, ids, tags, slow, raw_issues = result
    issues = [_issue(path, base, kind, offset, extra) for kind, offset, extra in raw_issues]
    n = len(pos) // 8
    scalars = None
    if n:
        names, bad = _tag_names(tags)
        tag_ids = np.frombuffer(ids, np.int32)
        scalars = pl.DataFrame(
            {
                # A Categorical column: 10M tags cost a 4-byte code each, chunks still concatenate, and the
                # store maps codes to series ids without comparing a string per point.
                "tag": pl.Series("tag", names, dtype=pl.Categorical).gather(pl.Series(tag_ids)),
                "step": np.frombuffer(steps, np.int64),
                "value": np.frombuffer(values, np.float64),
                "position": np.frombuffer(pos, np.int64) + base,
                "wall_time": np.frombuffer(walls, np.float64),
            }
        )
        if bad:
            # protobuf rejects a whole Event whose tag is not UTF-8; so do we (the core does not check).
            garbled = np.isin(tag_ids, bad)
            for p in np.unique(np.frombuffer(pos, np.int64)[garbled] + base).tolist():
                issues.append(Issue(p, "garbled", f"{path}: the record at byte {p} passes its CRCs but its "
                                    "tag is not UTF-8, so it is no valid Event; skipped it"))
            scalars = scalars.filter(pl.Series(~garbled))
            if scalars.is_empty():
                scalars = None
    out = decoder.decode(buf, np.frombuffer(slow, np.int64).reshape(-1, 2), base)
    issues.extend(out.issues)
    issues.sort(key=lambda i: -1 if i.position is None else i.position)
    if out.scalars:
        extra = pl.DataFrame(out.scalars, schema=["tag", "step", "value", "position", "wall_time"], orient="row")
        extra = extra.with_columns(pl.col("tag").cast(pl.Categorical))  # every chunk's tags are Categorical
        scalars = extra if scalars is None else pl.concat([scalars, extra]).sort("position", maintain_order=True)
    return Chunk(
        end=base + consumed,
        scalars=None if scalars is None else scalars_frame(scalars),
        histograms=histograms_frame(out.histograms.frame()) if out.histograms else None,
        texts=texts_frame(pl.DataFrame(out.texts)) if out.texts else None,
        configs=out.configs,
        issues=issues,
    )


def _tag_names(tags: list[bytes]) -> tuple[list[str], list[int]]:
    """Tag bytes as strings, and the ids of those that are not UTF-8."""
    names, bad = [], []
    for i, t in enumerate(tags):
        try:
            names.append(t.decode("utf-8"))
        except UnicodeDecodeError:
            names.append("")
            bad.append(i)
    return names, bad


def _issue(path: Path, base: int, kind: int, offset: int, extra: int) -> Issue:
    at = base + offset
    if kind == _ISSUE_CRC:
        return Issue(at, "crc_mismatch", f"{path}: the {extra}-byte record at byte {at} fails its data CRC32C "
                     "(corrupted on disk or in transfer); skipped it and read on")
    if kind == _ISSUE_BAD_LENGTH:
        return Issue(at, "bad_length", f"{path}: the record length at byte {at} fails its CRC32C; skipped "
                     f"{extra} bytes to byte {at + extra}, the next offset whose length checks out")
    return Issue(at, "truncated", f"{path} ends {extra} bytes into the record at byte {at} (a crash mid-write, "
                 "or a writer still running); kept every record before it, the next ingest resumes there")


class _Decoded:
    def __init__(self) -> None:
        self.scalars: list[tuple] = []
        self.histograms = _Histograms()
        self.texts: list[dict[str, Any]] = []
        self.configs: dict[str, dict[str, Any]] = {}
        self.issues: list[Issue] = []


class _SlowDecoder:
    """Decodes the records the compiled core hands back, with TensorBoard's protobufs."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._pb = None

    def decode(self, buf: memoryview, slow: np.ndarray, base: int) -> _Decoded:
        out = _Decoded()
        if not len(slow):
            return out
        if self._pb is None:
            from google.protobuf.message import DecodeError
            from tensorboard.compat.proto import event_pb2

            self._pb = (event_pb2.Event, DecodeError)
        event_cls, decode_error = self._pb
        view = buf  # a memoryview: slices of it are not copies
        for offset, length in slow.tolist():
            position = base + offset
            try:
                event = event_cls.FromString(view[offset + 12 : offset + 12 + length])
            except decode_error as exc:
                out.issues.append(Issue(position, "garbled", f"{self.path}: the record at byte {position} passes "
                                        f"its CRCs but is not a TensorBoard Event ({exc}); skipped it"))
                continue
            if event.WhichOneof("what") == "summary":
                _decode_summary(event, position, out, self.path)
        return out


def _decode_summary(event, position: int, out: _Decoded, path: Path) -> None:
    step, wall_time = event.step, event.wall_time
    for value in event.summary.value:
        kind = value.WhichOneof("value")
        plugin = value.metadata.plugin_data.plugin_name
        if kind == "simple_value":
            out.scalars.append((value.tag, step, float(value.simple_value), position, wall_time))
        elif kind == "histo":
            h = value.histo
            out.histograms.add(value.tag, step, position, wall_time, list(h.bucket_limit), list(h.bucket), h.min,
                               h.max, h.num, h.sum, h.sum_squares)
        elif kind == "tensor":
            _decode_tensor(value, plugin, step, wall_time, position, out, path)
        elif kind is None and plugin == "hparams":
            _decode_hparams(value.metadata.plugin_data.content, position, out, path)


def _decode_tensor(value, plugin: str, step: int, wall_time: float, position: int, out: _Decoded, path: Path):
    """TF2 summaries: scalars and histograms as numeric tensors, text as string tensors."""
    tensor = value.tensor
    shape = [d.size for d in tensor.tensor_shape.dim]
    if plugin == "text" or (tensor.dtype == _DT_STRING and plugin in ("", "text")):
        strings = [s.decode("utf-8", errors="replace") for s in tensor.string_val]
        if strings:
            # A text summary of more than one string is a table; its rows are kept one per line.
            out.texts.append({"tag": value.tag, "step": step, "position": position, "wall_time": wall_time,
                              "text": "\n".join(strings)})
        return
    array = _tensor_array(tensor, shape)
    if array is None:
        return
    if plugin == "histograms" and array.ndim == 2 and array.shape[1] == 3:
        left, right, counts = array[:, 0].astype(np.float64), array[:, 1].astype(np.float64), array[:, 2]
        counts = counts.astype(np.float64)
        num = float(counts.sum())
        centers = (left + right) / 2
        # TF2 histograms keep no exact sum: mean and std come from bucket centres (documented as such).
        total = float((counts * centers).sum())
        squares = float((counts * centers * centers).sum())
        lo = float(left[0]) if len(left) else math.nan
        hi = float(right[-1]) if len(right) else math.nan
        out.histograms.add(value.tag, step, position, wall_time, right.tolist(), counts.tolist(), lo, hi, num, None,
                           None, mean_sum=total, mean_squares=squares)
    elif plugin in ("scalars", "") and array.size == 1:
        out.scalars.append((value.tag, step, float(array.reshape(-1)[0]), position, wall_time))


_DT_STRING = 7
# TensorProto dtype -> (numpy dtype of tensor_content, the repeated field holding values otherwise).
_NUMERIC = {
    1: ("<f4", "float_val"),  # DT_FLOAT
    2: ("<f8", "double_val"),  # DT_DOUBLE
    3: ("<i4", "int_val"),  # DT_INT32
    4: ("<u1", "int_val"),  # DT_UINT8
    5: ("<i2", "int_val"),  # DT_INT16
    6: ("<i1", "int_val"),  # DT_INT8
    9: ("<i8", "int64_val"),  # DT_INT64
    10: ("?", "bool_val"),  # DT_BOOL
    17: ("<u2", "int_val"),  # DT_UINT16
    19: ("<f2", "half_val"),  # DT_HALF: half_val holds the raw 16 bits
    22: ("<u4", "uint32_val"),  # DT_UINT32
    23: ("<u8", "uint64_val"),  # DT_UINT64
}


def _tensor_array(tensor, shape: list[int]) -> np.ndarray | None:
    """A numeric TensorProto as an ndarray, or None for other dtypes or inconsistent contents.

    As TensorFlow's MakeNdarray: `tensor_content` holds the packed little-endian values when set; otherwise
    the typed repeated field does, and a shorter list is padded with its last value (an empty one for a
    non-empty shape is no tensor: None, as TensorBoard's `tensor_util.make_ndarray` refuses it).
    """
    if tensor.dtype not in _NUMERIC or any(d < 0 for d in shape):
        return None
    dtype, field = _NUMERIC[tensor.dtype]
    size = math.prod(shape)
    if tensor.tensor_content:
        if len(tensor.tensor_content) != size * np.dtype(dtype).itemsize:
            return None
        return np.frombuffer(tensor.tensor_content, dtype).reshape(shape)
    raw = list(getattr(tensor, field))
    if len(raw) > size:
        return None
    if tensor.dtype == 19:
        values = np.array(raw, np.uint16).view(np.float16)
    else:
        values = np.array(raw, dtype)
    if len(values) < size:
        if not len(values):
            return None  # no values at all: TensorBoard's make_ndarray refuses it too
        values = np.concatenate([values, np.full(size - len(values), values[-1], values.dtype)])
    return values.reshape(shape)


class _Histograms:
    """A chunk's histograms, gathered column by column and made into one frame at the end of the chunk.

    Building the frame from a dict per histogram made polars construct two list Series per row: 4,000 histograms
    (0.04% of a 10M-scalar file's records) cost 1.2 s of a 3.8 s ingest. Here the bucket lists go
    into two flat arrays with offsets, and become list columns in one Arrow step.
    """

    _SCALARS = ("step", "position", "wall_time", "min", "max", "num", "sum", "sum_squares", "mean", "std",
                "zero_fraction")

    def __init__(self) -> None:
        self.tags: list[str] = []
        self.columns: dict[str, list] = {name: [] for name in self._SCALARS}
        self.limits: list[float] = []
        self.counts: list[float] = []
        self.limit_ends: list[int] = [0]
        self.count_ends: list[int] = [0]

    def __len__(self) -> int:
        return len(self.tags)

    def add(self, tag, step, position, wall_time, limits, counts, lo, hi, num, total, squares,
            mean_sum=None, mean_squares=None) -> None:
        """One histogram and its derived statistics.

        mean = sum / num; std = sqrt(max(0, sum_squares / num - mean²)); both null when num is 0.
        zero_fraction = counts of the bucket holding 0 over num. Buckets are [left, right) with `limits` the
        right edges (TensorBoard's convention), so it is the first bucket whose right edge exceeds 0; 0 when 0
        lies outside [min, max]. It bounds the fraction of exact zeros from above.
        """
        s = total if total is not None else mean_sum
        q = squares if squares is not None else mean_squares
        mean = std = zero = None
        if num and num > 0:
            mean = s / num
            std = math.sqrt(max(0.0, q / num - mean * mean))
            if lo <= 0 <= hi and limits:
                # bisect_right is numpy's searchsorted(side="right") step for step, except where NaN sorts last:
                # a sum that is NaN (a NaN limit, or +inf and -inf) leaves the search to numpy.
                exact = not math.isnan(sum(limits))
                i = bisect_right(limits, 0.0) if exact else int(np.searchsorted(np.asarray(limits), 0.0, "right"))
                zero = counts[i] / num if i < len(counts) else 0.0
            else:
                zero = 0.0
        self.tags.append(tag)
        for name, v in zip(self._SCALARS, (step, position, wall_time, lo, hi, num, total, squares, mean, std, zero)):
            self.columns[name].append(v)
        self.limits.extend(limits)
        self.counts.extend(counts)
        self.limit_ends.append(len(self.limits))
        self.count_ends.append(len(self.counts))  # a damaged record may hold more counts than limits

    def frame(self) -> pl.DataFrame:
        return pl.DataFrame({"tag": self.tags, **self.columns,
                             "bucket_limits": _lists(self.limits, self.limit_ends),
                             "bucket_counts": _lists(self.counts, self.count_ends)})


def _lists(flat: list[float], ends: list[int]) -> pl.Series:
    """A List(Float64) Series from flat values and offsets, in one Arrow step (not one Series per row)."""
    import pyarrow as pa  # polars' own dependency for Arrow interchange; DuckDB's frame scans import it too

    offsets = pl.Series(ends, dtype=pl.Int64).to_arrow()
    values = pl.Series(flat, dtype=pl.Float64).to_arrow()
    return pl.Series(pl.from_arrow(pa.LargeListArray.from_arrays(offsets, values))).cast(pl.List(pl.Float64))


def _decode_hparams(content: bytes, position: int, out: _Decoded, path: Path) -> None:
    """The hparams plugin's HParamsPluginData: the session's hparams -> configs["hparams"].

    `experiment` only lists names and domains; `session_end_info` carries the run's end status (kept as
    configs["hparams_session_end"], a forensic hint when a run was marked failed).
    """
    from google.protobuf.message import DecodeError
    from tensorboard.plugins.hparams import plugin_data_pb2

    try:
        data = plugin_data_pb2.HParamsPluginData.FromString(content)
    except DecodeError as exc:
        out.issues.append(Issue(position, "garbled", f"{path}: hparams at byte {position} do not parse ({exc})"))
        return
    which = data.WhichOneof("data")
    if which == "session_start_info":
        info = data.session_start_info
        doc = out.configs.setdefault("hparams", {})
        doc.update({name: _struct_value(v) for name, v in sorted(info.hparams.items())})
    elif which == "session_end_info":
        from tensorboard.plugins.hparams import api_pb2

        out.configs["hparams_session_end"] = {"status": api_pb2.Status.Name(data.session_end_info.status)}


def _struct_value(v) -> Any:
    kind = v.WhichOneof("kind")
    if kind == "number_value":
        return v.number_value
    if kind == "string_value":
        return v.string_value
    if kind == "bool_value":
        return v.bool_value
    if kind == "list_value":
        return [_struct_value(x) for x in v.list_value.values]
    if kind == "struct_value":
        return {k: _struct_value(x) for k, x in v.struct_value.fields.items()}
    return None
