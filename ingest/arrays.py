"""Histories saved as arrays or pickles, read by the shapes of a JSON document (`ingest.jsondocs.read_document`).

- NumPy's `.npy` and `.npz` (`np.save("train_losses.npy", losses)`, `np.savez("history.npz", loss=..., val=...)`),
  named for a history (`ingest.formats.HISTORY_WORDS`, or a metric's name: not a folder of a dataset's samples):
  each array of one dimension (or a column, `(N, 1)`) is a list of values along its index; an `(N, 2)` array whose
  first column is a counter that never goes back is a series on those steps (`[[step, value], ...]`). Arrays of
  any other shape (a saved batch, weights, predictions) are no series: they are skipped, and said so. Read with
  `allow_pickle=False`: an array of Python objects is refused, never unpickled.
- A pickled history (`pickle.dump(history.history, f)`, Keras' History object itself, a dict of loss lists) in a
  file named so too, read by `hf_trainer.inert_unpickle` (every global an inert record, nothing imported or
  called); NumPy scalars in it (`np.float32(0.41)`) are decoded from their bytes, every other object is left out.

A lone array is named by its file's stem, an `.npz` member by its key (as a JSON document's lists are); the list
index is an ordinal step (DECISIONS §2). Each file is read whole (`start` counts the points already stored).
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ingest.hf_trainer import MAX_PICKLE_BYTES, _Inert, inert_unpickle
from ingest.jsondocs import read_document
from ingest.records import Chunk, Issue

MAX_POINTS = 10_000_000  # values in one array: a curve of ten million steps is the most a run's history holds
MAX_NODES = 2_000_000  # objects walked in one pickle (a History pickled with its model holds the model's records too)
MAX_DEPTH = 64
ARRAY_SUFFIXES = (".npy", ".npz")
_SCALAR = ("numpy.core.multiarray.scalar", "numpy._core.multiarray.scalar")
_DTYPE = "numpy.dtype"


def read_arrays(path: Path, start: int = 0) -> Iterator[Chunk]:
    """The series of one `.npy`, `.npz` or pickled history (see the module docstring)."""
    try:
        if path.suffix.lower() in ARRAY_SUFFIXES:
            doc, skipped = _arrays(path)
        else:
            doc, skipped = _pickled(path), []
    except _Cut as e:
        yield Chunk(end=start, issues=[Issue(None, "truncated", f"{path.name}: {e}")])
        return
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        yield Chunk(end=start, issues=[Issue(None, "unreadable", f"{path.name}: {e}")])
        return
    except Exception as e:  # noqa: BLE001 - an unpickler meets any damage a file holds; it is a read problem
        yield Chunk(end=start, issues=[Issue(None, "unreadable", f"{path.name}: {type(e).__name__}: {e}")])
        return
    issues = [Issue(None, "skipped_values", f"{path.name}: {why}; not a series") for why in skipped]
    if doc is None:
        yield Chunk(end=start, issues=issues or [Issue(None, "skipped_values", f"{path.name}: no list of numbers")])
        return
    chunk = read_document(doc, path, start, settings=False)
    yield Chunk(end=chunk.end, scalars=chunk.scalars, issues=[*issues, *chunk.issues])


class _Cut(ValueError):
    pass


def _arrays(path: Path) -> tuple[Any, list[str]]:
    """A `.npy` file's array, or an `.npz` file's arrays by key, as the lists of a document; what was skipped."""
    if path.suffix.lower() == ".npy":
        with path.open("rb") as f:
            value, why = _series(f, path.stem)
        if why:
            return None, [why]
        return ({path.stem: value} if isinstance(value, dict) else value), []
    doc: dict[str, Any] = {}
    skipped: list[str] = []
    with zipfile.ZipFile(path) as z:
        for member in z.namelist():
            if not member.endswith(".npy"):
                continue
            key = member[: -len(".npy")]
            with z.open(member) as f:
                value, why = _series(f, key)
            if why:
                skipped.append(why)
            else:
                doc[key] = value
    return doc or None, skipped


def _series(f: Any, name: str) -> tuple[Any, str | None]:
    """One array read from `f` as a list (or `{"steps", "values"}` for `[[step, value], ...]`), or why it is none.
    The header is read first: an array too large or of another shape is never loaded."""
    version = np.lib.format.read_magic(f)
    shape, fortran, dtype = (np.lib.format.read_array_header_1_0(f) if version == (1, 0)
                             else np.lib.format.read_array_header_2_0(f))
    if dtype.hasobject:
        return None, f"`{name}` holds Python objects (read only with pickle, which may run code)"
    if dtype.kind not in "fiub":
        return None, f"`{name}` is of {dtype} values"
    size = int(np.prod(shape)) if shape else 1
    if not (len(shape) == 1 or len(shape) == 2 and shape[1] in (1, 2)) or not 2 <= size <= MAX_POINTS:
        return None, f"`{name}` has shape {tuple(shape)}"
    data = f.read(size * dtype.itemsize)
    if len(data) < size * dtype.itemsize:
        raise _Cut(f"`{name}` ends before its {size:,} values")
    array = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C").astype(float)
    if array.ndim == 1 or array.shape[1] == 1:
        return array.reshape(-1).tolist(), None
    steps, values = array[:, 0], array[:, 1]
    if np.all(np.isfinite(steps)) and np.all(steps == np.round(steps)) and np.all(np.diff(steps) >= 0):
        return {"steps": steps.astype(np.int64).tolist(), "values": values.tolist()}, None
    return None, f"`{name}` has shape {tuple(shape)} and no counter in its first column"


def _pickled(path: Path) -> Any:
    """A pickled history as plain lists, dicts and numbers (`_plain`); None where it holds no number."""
    size = path.stat().st_size
    if size > MAX_PICKLE_BYTES:
        raise ValueError(f"{size:,} bytes, more than the {MAX_PICKLE_BYTES:,} a pickled history may hold")
    with path.open("rb") as f:
        return _plain(inert_unpickle(f))


def _plain(obj: Any) -> Any:
    """Plain data out of an inertly unpickled object: dicts, lists and numbers kept; an object built with a dict
    of state (Keras' History) becomes that dict; a NumPy scalar its number; every other object left out (None)."""
    count = [0]

    def plain(value: Any, depth: int) -> Any:
        count[0] += 1
        if count[0] > MAX_NODES or depth > MAX_DEPTH:
            raise ValueError("nested too deep or too large for a history")
        if isinstance(value, bool) or value is None:
            return None
        if isinstance(value, (int, float, str)):
            return value
        if isinstance(value, dict):
            out = {str(k): plain(v, depth + 1) for k, v in value.items() if isinstance(k, (str, int))}
            return {k: v for k, v in out.items() if v is not None}
        if isinstance(value, (list, tuple)):
            return [plain(v, depth + 1) for v in value]
        if isinstance(value, _Inert):
            name = type(value).name
            if name in _SCALAR:
                return _scalar(value)
            if isinstance(value.state, dict):
                return plain(value.state, depth + 1)
        return None

    return plain(obj, 0)


def _scalar(value: _Inert) -> float | None:
    """A NumPy scalar's number: `scalar(dtype, bytes)`, its dtype an inert `numpy.dtype('f4', ...)` whose state
    names its byte order."""
    if len(value.args) != 2 or not isinstance(value.args[1], bytes) or not isinstance(value.args[0], _Inert):
        return None
    dtype = value.args[0]
    if type(dtype).name != _DTYPE or not dtype.args or not isinstance(dtype.args[0], str):
        return None
    order = dtype.state[1] if isinstance(dtype.state, tuple) and len(dtype.state) > 1 else "|"
    try:
        kind = np.dtype(dtype.args[0]).newbyteorder("=" if order in ("|", "=") else order)
    except TypeError:
        return None
    if kind.kind not in "fiub" or kind.itemsize != len(value.args[1]):
        return None
    return float(np.frombuffer(value.args[1], dtype=kind)[0])
