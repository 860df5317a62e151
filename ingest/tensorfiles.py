"""Opening tensor files safely, shared by checkpoint and batch reading: which files are tensor files,
safetensors headers, `torch.load(weights_only=True)`, and the one exception a damaged file turns into.

Safety: torch files are read with `torch.load(weights_only=True)` only. A file that needs full unpickling is
refused (`needs_pickle`) unless the user passed --trust-pickle. Torch is imported inside the functions.
"""

from __future__ import annotations

import math
import os
import pickle
import re
import struct
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any

from ingest.configs import parse_json
from ingest.formats import LFS_POINTER_MAX, lfs_pointer
from ingest.records import Issue
from ingest.tensorstats import SAFETENSORS_DTYPES, SAFETENSORS_ITEM_BYTES, TensorRef

TENSOR_SUFFIXES = (".safetensors", ".pt", ".pth", ".ckpt", ".bin")
# Step in a name: the keyword, an optional separator, the number (zero padding allowed).
STEP_IN_NAME = re.compile(r"(?:^|[^a-z])(?:global_step|step|steps|ckpt|checkpoint|iter|iteration)[=_\-]?(\d+)", re.I)


def is_batch_path(rel: PurePosixPath) -> bool:
    """Saved batches (DECISIONS.md §10): tensor files under a `batches/` folder, or named for a batch."""
    if rel.suffix.lower() not in TENSOR_SUFFIXES:
        return False
    return any(p.lower() in ("batches", "batch", "saved_batches") for p in rel.parts[:-1]) or bool(
        re.match(r"^batch(?:es)?[_\-.=]", rel.name, re.I)
    )


# What an unpickler raises on bytes that are no pickle past the first (`\x80garbage`): torch's weights-only
# unpickler pops an empty stack (IndexError), looks up a memo it never stored (KeyError), or unpacks a short
# argument (struct.error, TypeError).
GARBLED_PICKLE = (IndexError, KeyError, TypeError, struct.error)


class Unreadable(Exception):
    """A file could not be read; `kind` is the ingest_issues kind, the message the reason."""

    def __init__(self, kind: str, detail: str):
        super().__init__(detail)
        self.kind = kind


def read_safetensors_header(path: Path) -> tuple[dict[str, str], dict[str, TensorRef], list[Issue]]:
    """The metadata and a `TensorRef` per tensor of a safetensors file, from its header alone.

    Format (huggingface/safetensors README): 8-byte little-endian header length N, N bytes of JSON
    {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}}, then the data, offsets
    relative to its start. A file cut off mid-save keeps every tensor whose bytes are all present; the
    others become `truncated` issues. An entry whose shape and byte range disagree (a 2**40-element shape over
    16 bytes, a range starting before the data) is `garbled` and not read, and so is a `__metadata__` that is
    not a mapping. Raises `Unreadable` when not even the header can be read.
    """
    size = path.stat().st_size
    if size == 0:
        raise Unreadable("empty", "file is empty (0 bytes)")
    _refuse_lfs_pointer(path, size)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise Unreadable("truncated", f"file is {size} bytes, shorter than the 8-byte header length")
        (n,) = struct.unpack("<Q", head)
        if n > size - 8:
            kind = "truncated" if n < 100 << 20 else "not_this_format"
            raise Unreadable(kind, f"header of {n} bytes does not fit in a {size}-byte file")
        try:
            header = parse_json(f.read(n))
        except ValueError as exc:  # not UTF-8, not JSON, or nested past the document limits
            raise Unreadable("not_this_format", f"safetensors header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise Unreadable("not_this_format", "safetensors header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    start = 8 + n
    refs: dict[str, TensorRef] = {}
    issues: list[Issue] = []
    if not isinstance(metadata, dict):
        issues.append(Issue(None, "garbled", f"__metadata__ is a JSON {type(metadata).__name__}, not an object; ignored"))
        metadata = {}
    for name, info in header.items():
        try:
            begin, end = (int(x) for x in info["data_offsets"])
            shape = tuple(int(s) for s in info["shape"])
            dtype = SAFETENSORS_DTYPES.get(info["dtype"], info["dtype"])
        except (KeyError, TypeError, ValueError) as exc:
            issues.append(Issue(None, "garbled", f"tensor {name!r}: header entry unreadable ({exc})"))
            continue
        item = SAFETENSORS_ITEM_BYTES.get(info["dtype"]) if isinstance(info["dtype"], str) else None
        if begin < 0 or end < begin or min(shape, default=0) < 0 or (
                item is not None and math.prod(shape) * item != end - begin):
            issues.append(Issue(None, "garbled", f"tensor {name!r}: header says shape {list(shape)} of "
                                f"{info['dtype']} in bytes {begin}-{end} of the data, which do not agree; not read"))
            continue
        if start + end > size:
            issues.append(Issue(start + begin, "truncated", f"tensor {name!r} ends at byte {start + end}, "
                                f"past the end of the {size}-byte file (cut off mid-save?)"))
            continue
        refs[name] = TensorRef(dtype=dtype, shape=shape, path=path, offset=start + begin, nbytes=end - begin)
    return {str(k): str(v) for k, v in metadata.items()}, refs, issues


@contextmanager
def native_path(path: Path) -> Iterator[str | None]:
    """`path` as a name native readers can open: torch's zip reader and safetensors encode it as UTF-8, which a
    name holding non-UTF-8 bytes (a folder named in Latin-1, decoded with surrogate escapes) cannot be. Such a
    file is opened here and named by its descriptor (`/proc/self/fd/N`) while the block runs; None where there is
    no /proc: the caller then reads an open file object."""
    name = os.fspath(path)
    try:
        name.encode("utf-8")
        encodable = True
    except UnicodeEncodeError:
        encodable = False
    if encodable:
        yield name
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        yield f"{PROC_FD}/{fd}" if os.path.isdir(PROC_FD) else None
    finally:
        os.close(fd)


PROC_FD = "/proc/self/fd"  # Linux: a process's open files, each by a name that is all ASCII


def torch_load(path: Path, **options: Any) -> Any:
    """`torch.load(path, **options)` for any file name (see `native_path`; without /proc, from an open file and
    not memory-mapped)."""
    import torch

    with native_path(path) as name:
        if name is not None:
            return torch.load(name, **options)
        with open(path, "rb") as f:
            return torch.load(f, **{**options, "mmap": False})


def load_safetensors(path: Path) -> dict[str, Any]:
    """`safetensors.torch.load_file` for any file name (see `native_path`)."""
    from safetensors.torch import load, load_file

    with native_path(path) as name:
        if name is not None:
            return load_file(name)
        return load(Path(path).read_bytes())


def load_torch(path: Path, trust_pickle: bool = False) -> tuple[Any, Issue | None]:
    """`torch.load` a file safely: (object, None), or raises `Unreadable`.

    Zip-format files (torch ≥ 1.6) are memory-mapped; legacy ones are read into memory. With
    `weights_only=True`, a file that names other globals (a pickled nn.Module, numpy arrays) raises
    `Unreadable('needs_pickle', …)` naming them, unless `trust_pickle`; then it is fully unpickled and an
    `untrusted_pickle_read` issue records that.
    """
    import torch

    size = path.stat().st_size
    if size == 0:
        raise Unreadable("empty", "file is empty (0 bytes)")
    _refuse_lfs_pointer(path, size)
    with open(path, "rb") as f:
        magic = f.read(4)
    is_zip = magic == b"PK\x03\x04"
    if not is_zip and magic[:1] != b"\x80":  # neither a zip archive nor a pickle (protocol ≥ 2)
        raise Unreadable("not_this_format", f"not a torch file (starts with {magic!r})")
    if is_zip and not zipfile.is_zipfile(path):
        raise Unreadable("truncated", "zip archive has no central directory: cut off mid-save?")
    try:
        return torch_load(path, map_location="cpu", weights_only=True, mmap=is_zip), None
    except pickle.UnpicklingError as exc:
        refused = _unsafe_globals(path) if is_zip else []
        if not trust_pickle:
            names = ", ".join(refused) or _refused_global(str(exc))
            raise Unreadable(
                "needs_pickle",
                f"needs full unpickling (globals: {names}); read it with --trust-pickle only if you trust it",
            ) from None
    except (RuntimeError, EOFError, ValueError, OSError, zipfile.BadZipFile, *GARBLED_PICKLE) as exc:
        raise Unreadable("truncated" if isinstance(exc, EOFError) else "unreadable", first_line(exc)) from None
    try:
        obj = torch_load(path, map_location="cpu", weights_only=False, mmap=is_zip)  # the user opted in
    except (RuntimeError, EOFError, ValueError, OSError, pickle.UnpicklingError, AttributeError, ImportError,
            *GARBLED_PICKLE) as exc:
        raise Unreadable("unreadable", f"full unpickling failed too: {first_line(exc)}") from None
    if isinstance(obj, torch.nn.Module):
        obj = obj.state_dict()
    note = f"read with full unpickling (--trust-pickle): {', '.join(refused) or 'globals unknown'}"
    return obj, Issue(None, "untrusted_pickle_read", note)


def _refuse_lfs_pointer(path: Path, size: int) -> None:
    """A Git LFS pointer checked out in place of the tensor file is not a damaged file: say what it is."""
    if size >= LFS_POINTER_MAX:
        return
    with open(path, "rb") as f:
        pointer = lfs_pointer(f.read(LFS_POINTER_MAX))
    if pointer is not None:
        raise Unreadable("lfs_pointer", f"a Git LFS pointer to a file of {pointer:,} bytes, not the file "
                                        "(`git lfs pull` fetches it)")


def _unsafe_globals(path: Path) -> list[str]:
    import torch

    try:
        with native_path(path) as name:
            if name is None:
                return []
            return list(torch.serialization.get_unsafe_globals_in_checkpoint(name))
    except (RuntimeError, ValueError, pickle.UnpicklingError):
        return []


def _refused_global(message: str) -> str:
    m = re.search(r"Unsupported global: GLOBAL (\S+)", message)
    return m[1] if m else "unknown"


def first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
