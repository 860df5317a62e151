"""Statistics of tensors read slice by slice in float64, so a tensor never has to fit in memory at once.

Shared by checkpoint and batch ingest. Torch is imported inside the functions (DECISIONS.md §11): this
module is imported by `ingest.checkpoints` without pulling torch in.

A tensor is reached through a `TensorRef`: either a torch tensor already at hand (possibly memory-mapped
by `torch.load(mmap=True)`), or a byte range of a safetensors file read with plain `readinto` into one
reused buffer. The second keeps resident memory bounded by the slice size however large the file is:
pages of a memory-mapped file count toward a process's RSS once touched, buffered reads do not.

Statistics (see `TENSOR_STAT_COLUMNS`):
    numel           every element
    n_nan, n_inf    exact counts
    zero_fraction   elements equal to 0, over numel (complex: real and imaginary parts counted apart)
    l2, mean, std, min, max, abs_max
                    over the finite elements only, so that one NaN does not hide the magnitude of the
                    rest; NaN when no element is finite. std is the population std (ddof = 0).
Every element is upcast to float64 before it is summed (bf16/fp16/fp8 included); mean and std are
merged across slices with Chan et al.'s pairwise update, which keeps float64 precision. The sums run on one torch
thread: a parallel reduction's order, and so its last bits, depends on the thread count (2 threads in a process,
1 in a forked worker), and the same file must give the same statistics in every process (`--jobs`, watch, Ray).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

# 4 Mi elements: a float64 slice of 32 MiB, a few temporaries of that size at most.
SLICE_ELEMENTS = 1 << 22

TENSOR_STAT_COLUMNS: dict[str, pl.DataType] = {
    "dtype": pl.Utf8,
    "shape": pl.List(pl.Int64),
    "numel": pl.Int64,
    "l2": pl.Float64,
    "mean": pl.Float64,
    "std": pl.Float64,
    "abs_max": pl.Float64,
    "min": pl.Float64,
    "max": pl.Float64,
    "zero_fraction": pl.Float64,
    "n_nan": pl.Int64,
    "n_inf": pl.Int64,
}

# safetensors' dtype names (https://github.com/huggingface/safetensors, format section) -> torch's.
SAFETENSORS_DTYPES = {
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
    "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8",
    "U64": "uint64", "U32": "uint32", "U16": "uint16", "U8": "uint8", "BOOL": "bool",
    "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "F8_E8M0": "float8_e8m0fnu",
    "C64": "complex64",
}
# Bytes per element of each safetensors dtype: a header's shape and byte range must agree.
SAFETENSORS_ITEM_BYTES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
    "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "C64": 8,
}


def dtype_name(dtype: Any) -> str:
    """torch.float32 -> 'float32'."""
    return str(dtype).removeprefix("torch.")


@dataclass
class TensorRef:
    """A tensor that can be read in 1-D slices of its flattened elements, in its own dtype.

    Exactly one of `tensor` (a torch tensor) or `path`+`offset`+`nbytes` (a byte range of a file) is set.
    `dtype` is torch's name; `readable` is False for a dtype torch cannot represent.
    """

    dtype: str
    shape: tuple[int, ...]
    tensor: Any = None
    path: Path | None = None
    offset: int = 0
    nbytes: int = 0

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def readable(self) -> bool:
        import torch

        return isinstance(getattr(torch, self.dtype, None), torch.dtype)

    def slices(self, n: int = SLICE_ELEMENTS) -> Iterator[Any]:
        """Consecutive 1-D views of at most `n` elements, in the tensor's own dtype.

        For a file range, one buffer is reused: a slice is valid only until the next one is asked for.
        """
        import torch

        if self.tensor is not None:
            t = self.tensor
            if t.is_complex():
                t = torch.view_as_real(t)
            if t.is_contiguous() or t.ndim == 0:
                flat = t.reshape(-1)  # a view: no copy
                for i in range(0, flat.numel(), n):
                    yield flat[i : i + n]
                return
            # A strided tensor (torch.save keeps a transposed view's strides): flattening it whole would copy
            # it whole, so copy a block of leading rows at a time, in row-major element order.
            rows = max(1, n // max(1, t[0].numel()))
            for i in range(0, t.shape[0], rows):
                yield t[i : i + rows].reshape(-1)
            return
        dtype = getattr(torch, self.dtype)
        itemsize = torch.empty((), dtype=dtype).element_size()
        chunk = n * itemsize
        buf = bytearray(min(chunk, max(self.nbytes, itemsize)))
        view = memoryview(buf)
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            left = self.nbytes
            while left > 0:
                want = min(chunk, left)
                got = f.readinto(view[:want])
                if got != want:
                    raise EOFError(f"{self.path}: tensor data ends {left - got} bytes early at offset {f.tell()}")
                part = torch.frombuffer(view[:want], dtype=dtype)
                yield torch.view_as_real(part).reshape(-1) if part.is_complex() else part
                left -= want


@functools.cache
def _countable() -> frozenset:
    """The dtypes `torch.count_nonzero` supports on CPU (not fp8, not uint16/32/64)."""
    import torch

    return frozenset((torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32,
                      torch.int16, torch.int8, torch.uint8, torch.bool))


class Moments:
    """Running statistics of a tensor fed slice by slice (`add`); `row()` gives them (module docstring)."""

    def __init__(self) -> None:
        self.count = 0  # finite elements seen
        self.mean = self.m2 = self.sumsq = 0.0  # mean is relative to `shift`
        # The first finite element: means are merged relative to it, so that slices of a tensor whose
        # |mean| ≫ std do not lose their differences to the rounding of a large running mean.
        self.shift: float | None = None
        self.lo, self.hi = math.inf, -math.inf
        self.n_nan = self.n_inf = self.zeros = self.seen = 0  # seen: values read (a complex element is two)

    def add(self, part: Any) -> Any:
        """Take in one 1-D slice; returns its float64 copy (every element), for callers that need it too."""
        import torch

        self.seen += part.numel()
        x = full = part.to(torch.float64)
        # Zeros on the original dtype where torch can count them there (4x cheaper than on float64); NaN is
        # not zero either way.
        src = part if part.dtype in _countable() else x
        self.zeros += part.numel() - int(torch.count_nonzero(src))
        total_k = float(x.sum())
        if not math.isfinite(total_k):
            # Only a slice whose sum is not finite can hold NaN/Inf: the common, finite case skips two passes.
            nan = torch.isnan(x)
            inf = torch.isinf(x)
            k_nan, k_inf = int(nan.sum()), int(inf.sum())
            self.n_nan, self.n_inf = self.n_nan + k_nan, self.n_inf + k_inf
            if k_nan or k_inf:
                x = x[~(nan | inf)]
            total_k = float(x.sum())  # may still overflow for values near 1e308: then the exact path below
        k = x.numel()
        if k == 0:
            return full
        if self.shift is None:
            self.shift = float(x[0])
        shift = self.shift
        mean_k = total_k / k - shift
        sumsq_k = float(torch.dot(x, x))
        m2_k = sumsq_k - total_k * total_k / k
        # The one-pass M2 loses digits when |mean| ≫ std; its relative error is about eps·sumsq/M2, so it is
        # kept only while that stays below ~1e-10. Else the corrected two-pass algorithm on shifted data
        # (Chan, Golub & LeVeque 1983); torch.var_mean was measured 1e-7 off on such data, so it is not used.
        if not (math.isfinite(m2_k) and math.isfinite(mean_k) and m2_k > 1e-6 * sumsq_k):
            d = x - shift
            mean_k = float(d.mean())
            d -= mean_k
            s_k = float(d.sum())
            m2_k = float(torch.dot(d, d)) - s_k * s_k / k
        lo_k, hi_k = torch.aminmax(x)
        self.lo, self.hi = min(self.lo, float(lo_k)), max(self.hi, float(hi_k))
        self.sumsq += sumsq_k
        # Chan, Golub & LeVeque's pairwise merge of (count, mean, M2).
        delta = mean_k - self.mean
        total = self.count + k
        self.mean += delta * k / total
        self.m2 += m2_k + delta * delta * self.count * k / total
        self.count = total
        return full

    def row(self) -> dict[str, Any]:
        n, nan = self.count, math.nan
        return {
            "l2": math.sqrt(self.sumsq) if n else nan,
            "mean": (self.shift or 0.0) + self.mean if n else nan,
            "std": math.sqrt(self.m2 / n) if n else nan,
            "min": self.lo if n else nan,
            "max": self.hi if n else nan,
            "abs_max": max(abs(self.lo), abs(self.hi)) if n else nan,
            "zero_fraction": self.zeros / self.seen if self.seen else nan,
            "n_nan": self.n_nan,
            "n_inf": self.n_inf,
        }


def _one_thread(fn: Callable) -> Callable:
    """Run `fn` with torch's intra-op threads at 1, the caller's count given back after (module docstring)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import torch

        threads = torch.get_num_threads()
        if threads == 1:
            return fn(*args, **kwargs)
        torch.set_num_threads(1)
        try:
            return fn(*args, **kwargs)
        finally:
            torch.set_num_threads(threads)
    return wrapper


@_one_thread
def stats_of(ref: TensorRef, n: int = SLICE_ELEMENTS) -> dict[str, Any]:
    """The statistics of one tensor (the module docstring defines them), streamed slice by slice."""
    m = Moments()
    for part in ref.slices(n):
        m.add(part)
    return {"dtype": ref.dtype, "shape": list(ref.shape), "numel": ref.numel, **m.row()}


@_one_thread
def stats_and_delta(cur: TensorRef, prev: TensorRef, n: int = SLICE_ELEMENTS) -> tuple[dict[str, Any], float, float]:
    """`stats_of(cur)` and `delta_norms(prev, cur)` in one pass over `cur` (read once, not twice)."""
    import torch

    m = Moments()
    d2 = p2 = 0.0
    for a, b in _aligned(prev.slices(n), cur.slices(n)):
        b64 = m.add(b)
        a64 = a.to(torch.float64)
        diff = b64 - a64
        d2 += float(torch.dot(diff, diff))
        p2 += float(torch.dot(a64, a64))
    row = {"dtype": cur.dtype, "shape": list(cur.shape), "numel": cur.numel, **m.row()}
    return row, math.sqrt(d2), math.sqrt(p2)


def empty_stats(ref: TensorRef) -> dict[str, Any]:
    """A row for a tensor whose values could not be read: shape and dtype only."""
    row = {k: None for k in TENSOR_STAT_COLUMNS}
    row.update(dtype=ref.dtype, shape=list(ref.shape), numel=ref.numel)
    return row


@_one_thread
def delta_norms(prev: TensorRef, cur: TensorRef, n: int = SLICE_ELEMENTS) -> tuple[float, float]:
    """(‖cur − prev‖₂, ‖prev‖₂) in float64, streaming both tensors in step. NaN anywhere gives NaN."""
    import torch

    d2 = p2 = 0.0
    for a, b in _aligned(prev.slices(n), cur.slices(n)):
        a64 = a.to(torch.float64)
        diff = b.to(torch.float64) - a64
        d2 += float(torch.dot(diff, diff))
        p2 += float(torch.dot(a64, a64))
    return math.sqrt(d2), math.sqrt(p2)


def _aligned(xs: Iterator[Any], ys: Iterator[Any]) -> Iterator[tuple[Any, Any]]:
    """Pairs of equally long pieces from two slice streams of one element count whose slice boundaries may
    differ (a contiguous tensor against a strided one). A piece is used before its stream is pulled again."""
    x = y = None
    while True:
        if x is None or x.numel() == 0:
            x = next(xs, None)
        if y is None or y.numel() == 0:
            y = next(ys, None)
        if x is None or y is None:
            if x is not None or y is not None:
                raise ValueError("tensors of different element counts")
            return
        k = min(x.numel(), y.numel())
        yield x[:k], y[:k]
        x, y = x[k:], y[k:]


def is_float_dtype(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat", "complex"))
