"""The device replay and probe run on: `auto` is CUDA when present, else the CPU (one code path for both)."""

from __future__ import annotations

from typing import Any


def choose_device(name: str) -> Any:
    import torch

    from ingest.errors import ReplayError

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ReplayError("--device cuda: no CUDA device is available here; use --device cpu")
    return torch.device(name)
