"""Saved batches: dicts of tensors with a leading batch dimension (DECISIONS.md §10). Batch files are untrusted:
torch files are read with `weights_only=True`, safetensors with safetensors."""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch

from ingest.errors import MissingBatch


def _torch_load(path: Path) -> Any:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, OSError, zipfile.BadZipFile) as exc:
        raise MissingBatch(f"cannot read {path} with weights_only=True: {str(exc).splitlines()[0]}") from None


def load_batch(root: Path, rel: str) -> dict[str, torch.Tensor]:
    """A saved batch as a dict of tensors with a leading batch dimension (non-tensor entries dropped)."""
    path = root / rel
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file
        obj = load_file(path)
    else:
        obj = _torch_load(path)
    if not isinstance(obj, dict):
        raise MissingBatch(f"{rel} holds a {type(obj).__name__}, not a dict of tensors (see docs/replay.md)")
    return {k: v for k, v in obj.items() if isinstance(v, torch.Tensor)}


def batch_size(batch: dict[str, torch.Tensor]) -> int:
    return next(v.shape[0] for v in batch.values() if v.dim() > 0)


def select(batch: dict[str, torch.Tensor], rows: list[int]) -> dict[str, torch.Tensor]:
    """The batch restricted to `rows` (every tensor with the leading batch dimension is sliced)."""
    n = batch_size(batch)
    idx = torch.tensor(rows, dtype=torch.long)
    return {k: (v.index_select(0, idx.to(v.device)) if v.dim() > 0 and v.shape[0] == n else v) for k, v in batch.items()}



def to_device(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    return {k: v.to(device) for k, v in batch.items()}
