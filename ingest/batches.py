"""Saved batches: per-tensor statistics, which samples hold NaN/Inf, which are outliers, label ranges.

A saved batch (DECISIONS.md §10) is a dict of tensors with a leading batch dimension, saved as
`batches/step_N.pt` or `.safetensors` (N = the logged step it was used at), or a file named `batch_N.*`.
Non-tensor entries are ignored; nested dicts are flattened to dotted names; a bare tensor is named `batch`
and a tuple/list `(x, y)` gives `0`, `1`. Torch files are read with `weights_only=True` only (see
`ingest.tensorfiles.load_torch`).

Per tensor (`batch_stats`): the statistics of `ingest.tensorstats` (min/max give an integer label's range),
`nonfinite_samples` = indices along dim 0 holding any NaN/Inf, and for floating tensors `sample_norms` = each
sample's L2 norm over its finite entries (NULL for integer tensors: labels are categories, not magnitudes).
Which samples are outliers is the `bad_batch` detector's judgement, with its own threshold (`--set
bad-batch.z=...` reaches it, no re-ingest needed); ingest only measures.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import polars as pl

from ingest.jsonvalues import int64_or_none
from ingest.records import Issue
from ingest.tensorfiles import STEP_IN_NAME, Unreadable, first_line, is_batch_path, load_torch, read_safetensors_header
from ingest.tensorstats import TensorRef, dtype_name, is_float_dtype, stats_of

BATCH_STATS_SCHEMA: dict[str, pl.DataType] = {
    "step": pl.Int64,
    "tensor": pl.Utf8,
    "dtype": pl.Utf8,
    "shape": pl.List(pl.Int64),
    "l2": pl.Float64,
    "mean": pl.Float64,
    "std": pl.Float64,
    "abs_max": pl.Float64,
    "min": pl.Float64,
    "max": pl.Float64,
    "n_nan": pl.Int64,
    "n_inf": pl.Int64,
    "nonfinite_samples": pl.List(pl.Int64),
    "sample_norms": pl.List(pl.Float64),
}


@dataclass(frozen=True)
class FoundBatch:
    path: PurePosixPath
    format: str  # torch or safetensors
    step: int | None


@dataclass
class BatchRead:
    """The `batches` row (without run_id/batch_id), the `batch_stats` frame, issues as (path, Issue)."""

    row: dict[str, Any]
    stats: pl.DataFrame
    issues: list[tuple[str, Issue]] = field(default_factory=list)


def batch_step(rel: PurePosixPath) -> int | None:
    """`step_500.pt` → 500, `batch_00500.safetensors` → 500: a step pattern, else the last number in the name."""
    found = STEP_IN_NAME.findall(rel.name)
    if found:
        return int64_or_none(int(found[-1]))
    numbers = re.findall(r"\d+", rel.name.split(".")[0])
    return int64_or_none(int(numbers[-1])) if numbers else None


def find_batches(rel_paths: Iterable[PurePosixPath]) -> list[FoundBatch]:
    """Saved batches among a run's files, by name and place only (no I/O)."""
    return [
        FoundBatch(rel, "safetensors" if rel.suffix.lower() == ".safetensors" else "torch", batch_step(rel))
        for rel in sorted(rel_paths)
        if is_batch_path(rel)
    ]


def _tensors(obj: Any, prefix: str = "") -> Iterable[tuple[str, Any]]:
    import torch

    if isinstance(obj, torch.Tensor):
        yield prefix or "batch", obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _tensors(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            yield from _tensors(v, f"{prefix}.{i}" if prefix else str(i))


def per_sample(t: Any) -> tuple[list[int], list[float] | None]:
    """(samples holding NaN/Inf, each sample's L2 norm over its finite entries) along dim 0 of `t`; the norms
    are None for a tensor that is not floating point (or complex) or has no leading dimension."""
    import torch

    if t.ndim == 0 or t.shape[0] == 0:
        return [], None
    if t.is_complex():
        t = torch.view_as_real(t)
    x = t.reshape(t.shape[0], -1).to(torch.float64)
    finite = torch.isfinite(x)
    nonfinite = torch.nonzero(~finite.all(dim=1)).flatten().tolist()
    if not is_float_dtype(dtype_name(t.dtype)):
        return nonfinite, None
    return nonfinite, torch.where(finite, x, 0.0).pow(2).sum(dim=1).sqrt().tolist()


def read_batch(root: Path, found: FoundBatch, trust_pickle: bool = False) -> BatchRead:
    """Statistics of one saved batch. Never raises on bad input: a damaged file is a status and an issue."""
    path = root / found.path
    rel = str(found.path)
    issues: list[tuple[str, Issue]] = []
    row: dict[str, Any] = {"path": rel, "step": found.step, "format": found.format, "n_samples": None,
                           "n_nonfinite": None, "status": "ok", "detail": None}
    try:
        if found.format == "safetensors":
            _, refs, file_issues = read_safetensors_header(path)
            issues += [(rel, i) for i in file_issues]
            if file_issues:
                row.update(status="partial", detail="; ".join(i.detail for i in file_issues))
            tensors = [(name, _materialise(ref)) for name, ref in refs.items() if ref.readable]
        else:
            obj, note = load_torch(path, trust_pickle)
            if note is not None:
                issues.append((rel, note))
            tensors = list(_tensors(obj))
    except Unreadable as exc:
        issues.append((rel, Issue(None, exc.kind, str(exc))))
        row.update(status="needs_pickle" if exc.kind == "needs_pickle" else "unreadable", detail=str(exc))
        return BatchRead(row, pl.DataFrame(schema=BATCH_STATS_SCHEMA), issues)
    except (OSError, EOFError) as exc:
        issues.append((rel, Issue(None, "unreadable", first_line(exc))))
        row.update(status="unreadable", detail=first_line(exc))
        return BatchRead(row, pl.DataFrame(schema=BATCH_STATS_SCHEMA), issues)
    if not tensors:
        issues.append((rel, Issue(None, "no_tensors", "the file holds no tensors")))
    rows = []
    for name, t in tensors:
        s = stats_of(TensorRef(dtype_name(t.dtype), tuple(t.shape), tensor=t))
        nonfinite, norms = per_sample(t)
        rows.append({"step": found.step, "tensor": name, **{k: s[k] for k in BATCH_STATS_SCHEMA if k in s},
                     "nonfinite_samples": nonfinite, "sample_norms": norms})
    stats = pl.DataFrame(rows, schema=BATCH_STATS_SCHEMA) if rows else pl.DataFrame(schema=BATCH_STATS_SCHEMA)
    leading = [t.shape[0] for _, t in tensors if t.ndim > 0]
    row["n_samples"] = max(set(leading), key=leading.count) if leading else None
    row["n_nonfinite"] = int((stats["n_nan"] + stats["n_inf"]).sum()) if rows else 0
    return BatchRead(row, stats, issues)


def _materialise(ref: TensorRef) -> Any:
    """A file-backed tensor read whole (a batch must fit in memory: it was on a GPU once)."""
    import torch

    parts = [p.clone() for p in ref.slices()]
    flat = torch.cat(parts) if parts else torch.empty(0, dtype=getattr(torch, ref.dtype))
    if flat.dtype != getattr(torch, ref.dtype):  # complex arrives as its real view
        flat = torch.view_as_complex(flat.reshape(-1, 2))
    return flat.reshape(ref.shape)
