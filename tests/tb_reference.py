"""A slow, obviously correct reader of event files: the reference the compiled core is checked against.

One Python step per byte offset or record, the `crc32c` package for checksums (not the core's own CRC code),
TensorBoard's protobufs and `tensor_util.make_ndarray` for payloads. It applies DECISIONS.md §4 as written:
skip a record whose data CRC fails, scan forward byte by byte past a length whose CRC fails, keep
everything before a truncated tail.
"""

from __future__ import annotations

import math

import crc32c


def masked_crc(data: bytes) -> int:
    c = crc32c.crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_reference(data: bytes) -> tuple[list[tuple], list[tuple]]:
    """(scalar rows, issues) of a whole file; hparams whose plugin data do not parse are `garbled`. Rows are (position, tag, step, wall_time, value) with NaN as
    the string "nan" so rows compare equal; issues are (kind, position)."""
    from google.protobuf.message import DecodeError
    from tensorboard.compat.proto import event_pb2
    from tensorboard.plugins.hparams import plugin_data_pb2
    from tensorboard.util import tensor_util

    rows: list[tuple] = []
    issues: list[tuple] = []
    if not data:
        return rows, [("empty", None)]
    off, resync, records = 0, None, 0
    n = len(data)
    while True:
        if n - off < 12:
            if resync is None and n - off > 0:
                issues.append(("truncated", off))
            break
        length = int.from_bytes(data[off : off + 8], "little")
        if masked_crc(data[off : off + 8]) != int.from_bytes(data[off + 8 : off + 12], "little"):
            if resync is None:
                resync = off
            off += 1
            continue
        if resync is not None:
            issues.append(("bad_length", resync))
            resync = None
        if n - off - 16 < length:
            issues.append(("truncated", off))
            break
        payload = data[off + 12 : off + 12 + length]
        records += 1
        if masked_crc(payload) != int.from_bytes(data[off + 12 + length : off + 16 + length], "little"):
            issues.append(("crc_mismatch", off))
        else:
            try:
                event = event_pb2.Event.FromString(payload)
            except DecodeError:
                issues.append(("garbled", off))
                event = None
            if event is not None:
                for v in event.summary.value:
                    kind = v.WhichOneof("value")
                    if kind is None and v.metadata.plugin_data.plugin_name == "hparams":
                        try:
                            plugin_data_pb2.HParamsPluginData.FromString(v.metadata.plugin_data.content)
                        except DecodeError:
                            issues.append(("garbled", off))
                    elif kind == "simple_value":
                        rows.append(row(off, v.tag, event.step, event.wall_time, v.simple_value))
                    elif kind == "tensor" and v.metadata.plugin_data.plugin_name in ("scalars", ""):
                        if v.tensor.dtype == 7:  # DT_STRING: not a scalar
                            continue
                        try:
                            array = tensor_util.make_ndarray(v.tensor)
                        except (TypeError, ValueError, KeyError):
                            # What the reference cannot decode is a rejected value, as for the reader: a dtype
                            # make_ndarray does not know (a mutated DT_RESOURCE_REF raises KeyError: 120).
                            continue
                        if array.size == 1:
                            rows.append(row(off, v.tag, event.step, event.wall_time, float(array.reshape(-1)[0])))
        off += 16 + length
    if resync is not None:
        issues.append(("bad_length", resync))
    if records == 0 and issues and all(kind == "bad_length" for kind, _ in issues):
        issues = [("not_this_format", None)]
    return rows, issues


def row(position: int, tag: str, step: int, wall_time: float, value: float) -> tuple:
    return (position, tag, step, wall_time, "nan" if math.isnan(value) else value)
