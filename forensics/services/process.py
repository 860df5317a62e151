"""Settings a forensics process makes for itself, chosen by whoever owns the process: the CLI's `main` for the
command's own process, fleet for its worker processes. Nothing that judges or reads a run changes them."""

from __future__ import annotations

_FREED_ARRAYS_RETURNED = False


def return_freed_arrays() -> None:
    """Have glibc give a freed array's memory back at once. By default each free of a large block raises its
    mmap threshold (up to 32 MB), after which arrays of a long series (16 MB per 2M points) come from the heap
    and stay in the process once freed: analysing 4 series of 2M points held ~100 MB more at the end and its
    peak varied by as much from run to run (docs/engine.md). A fixed threshold maps every block of 1 MB or more
    on its own and unmaps it when freed. Elsewhere (no glibc) nothing is done."""
    global _FREED_ARRAYS_RETURNED
    if _FREED_ARRAYS_RETURNED:
        return
    _FREED_ARRAYS_RETURNED = True
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass


def collect_garbage_less_often() -> None:
    """Raise the cyclic garbage collector's first threshold from 700 to 50,000 new objects.

    A command allocates most of its objects importing duckdb, polars and numpy, objects that live as long as the
    process: with the default, `analyze` of an ordinary run ran 131 collections that scanned them again and again,
    80-120 ms of a 1.2 s first answer (docs/engine.md). Reference cycles are still collected, a little later; the
    objects that hold a run's points (numpy arrays, polars and Arrow buffers) are freed by reference counting, so peak
    memory does not change (same peak RSS, measured)."""
    import gc

    gc.set_threshold(50_000, *gc.get_threshold()[1:])
