"""Torch's intra-op thread count for one replay or probe: chosen from what the machine can give now, set, and
given back afterwards (one function for both commands)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager


def available_threads() -> tuple[int, str]:
    """The intra-op threads this machine can give now: its usable CPUs less the ones busy (the 1-minute load
    average), at least 1; and how that was decided. A busy neighbour slows an oversubscribed step 50-100x."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    free = max(1, min(cpus, cpus - int(load)))
    return free, f"{cpus} CPUs, load {load:.1f}: {free} free"


@contextmanager
def intra_op_threads(threads: int | None = None) -> Iterator[tuple[int, str]]:
    """Within: torch's intra-op thread count set to `threads`, else to `available_threads()`; yields (count, how it
    was chosen) and gives the old count back on exit. Replay and probe both run under it: torch's default of one
    thread per core, on a machine whose cores are busy, makes a small model's step 50-100x slower."""
    import torch

    saved = torch.get_num_threads()
    chosen, why = (threads, "--threads") if threads else available_threads()
    try:
        torch.set_num_threads(chosen)
        yield chosen, why
    finally:
        torch.set_num_threads(saved)
