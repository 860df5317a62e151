"""Settings a forensics process makes for itself, chosen by whoever owns the process: the CLI's `main` for the
command's own process, fleet for its worker processes (memory returned, the collector's pace, standard output's
failures as one exit code, an end without teardown). Nothing that judges or reads a run changes them."""

from __future__ import annotations

import atexit
import logging
import os
import sys
from collections.abc import Mapping

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


def own_process_policy(environ: Mapping[str, str]) -> None:
    """What a command run as its own process sets first: the collector's threshold (below), and under
    `FORENSICS_STRICT=1` (the tests' subprocesses) a detector that raises fails the command (forensics.judge.engine)."""
    collect_garbage_less_often()
    if environ.get("FORENSICS_STRICT") == "1":
        from forensics.judge import engine

        engine.STRICT = True


def collect_garbage_less_often() -> None:
    """Raise the cyclic garbage collector's first threshold from 700 to 50,000 new objects.

    A command allocates most of its objects importing duckdb, polars and numpy, objects that live as long as the
    process: with the default, `analyze` of an ordinary run ran 131 collections that scanned them again and again,
    80-120 ms of a 1.2 s first answer (docs/engine.md). Reference cycles are still collected, a little later; the
    objects that hold a run's points (numpy arrays, polars and Arrow buffers) are freed by reference counting, so peak
    memory does not change (same peak RSS, measured)."""
    import gc

    gc.set_threshold(50_000, *gc.get_threshold()[1:])


OUTPUT_LOST = 74  # sysexits' EX_IOERR: standard output was closed or could not be written (a full disk)


class OutputLost(Exception):
    """Writing to standard output failed (closed, a full disk): the command's work is kept, its answer is not."""


class GuardedOutput:
    """Standard output whose write errors (other than a reader that went away) become `OutputLost`."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputLost(exc.strerror or str(exc)) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputLost(exc.strerror or str(exc)) from None

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def leave_now(code: int) -> None:
    """End the process without the interpreter's teardown: flush what was written, then `os._exit`.

    Tearing down duckdb's, polars' and numpy's ~800 modules does nothing the user waits for, yet it cost 0.15-0.19 s
    of wall time (0.08-0.1 CPU s) after `analyze` had printed its answer (docs/engine.md: `import duckdb, polars,
    numpy` and exit, with and without `os._exit`, 7 rounds). Nothing of ours registers an exit handler. Where the
    final flush fails (a reader that went away), the interpreter's own exit says so, as before."""
    logging.shutdown()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except OSError:
        return
    os._exit(code)


TERMINATED = 143  # 128 + SIGTERM, as a shell reports a process SIGTERM ended
TERMINATED_LINE = ("forensics: terminated (SIGTERM); what was written before is kept, and the next run goes on "
                   "from there")
_sigterm_seen = False


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process is, so open transactions roll back as on Ctrl-C."""


def raise_terminated(signum, frame) -> None:
    """The command's SIGTERM handler. It is remembered as well as raised: a library that catches the interrupt
    and raises its own (DuckDB's "Query interrupted", turned back into a KeyboardInterrupt by the store; a write
    refused after it) must not make a SIGTERM read as Ctrl-C (130) or as a store failure (2)."""
    global _sigterm_seen
    _sigterm_seen = True
    raise Terminated


def catch_sigterm():
    """Install `raise_terminated` for this command (none seen yet); return the handler it replaces. Raises
    ValueError outside the main thread, where signals are whoever owns it's."""
    import signal

    global _sigterm_seen
    previous = signal.signal(signal.SIGTERM, raise_terminated)
    _sigterm_seen = False
    return previous


def sigterm_seen() -> bool:
    return _sigterm_seen


def say_terminated() -> int:
    sys.stderr.write(TERMINATED_LINE + "\n")
    sys.stderr.flush()
    return TERMINATED


_exit_code: int | None = None  # set by `end_on_sigterm`: the code the process ends with, after the exit handlers


def _leave_after_the_exit_handlers() -> None:
    """Once the other exit handlers have run (those of torch, multiprocessing and user code, after non-daemon
    threads were joined), end as `leave_now` does: without the teardown of torch's and duckdb's modules (about a
    second), in which no Python signal handler runs and a SIGTERM would end the process without a word."""
    if _exit_code is not None:
        leave_now(_exit_code)


# Registered when this module is first imported (by forensics.cli's import, before torch, multiprocessing or user
# code register theirs): exit handlers run last registered first, so this one runs after theirs.
atexit.register(_leave_after_the_exit_handlers)


def end_on_sigterm(code: int) -> None:
    """For a command that ends with the interpreter's exit handlers (replay's and probe's torch and user code): a
    SIGTERM meanwhile says the one line and exits 143 at once, as during the command, not silently by the
    default action; then the process ends with `code` (`_leave_after_the_exit_handlers`)."""
    import signal

    global _exit_code
    _exit_code = code

    def leave(signum, frame) -> None:
        os.write(2, (TERMINATED_LINE + "\n").encode())  # no stream: they may be half torn down
        os._exit(TERMINATED)

    signal.signal(signal.SIGTERM, leave)
