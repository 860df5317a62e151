"""Benchmark: saved batches beside the logs they came with. `forensics ingest` of one run's logs alone and of the
same logs with its saved batches, whole processes into fresh stores, contenders alternating, plus the batches'
ingest in one process whose torch is already imported (the cost per batch, without torch's one import).

    python benchmarks/bench_ingest_batches.py [--run sample_runs/runs/nan_log_zero] [--repeat 5] [--baseline DIR]

The run's checkpoints are left out of both copies (they are the checkpoint benchmark's), so the two differ by the
batches only. Printed, medians over --repeat rounds (after one uncounted round that warms the page cache): wall
and CPU seconds (user + system, less sensitive to a busy neighbour) of each process, the batches' share (logs +
batches minus logs alone) per batch, `python -c "import torch"` (a run with batches imports torch once), and the
in-process cost per batch. The goal: a small batch (a few KB) at most 5 ms, measured on a quiet machine (the
load average is printed: at load 10 on 2 cores every figure is ~5x what the code costs). `--baseline DIR`: the
same two ingests from another checkout (e.g. `git worktree add DIR main`), in the same rounds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path, PurePosixPath

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout's modules for the in-process part, not an installed copy

from benchmarks.bench_first_answer import timed  # noqa: E402  (one process, wall and CPU; bytecode as installed)


def copies(run: Path, work: Path) -> tuple[Path, Path, int, int]:
    """The run without checkpoints, with and without its batches; the number of batches and their bytes."""
    from ingest.batches import find_batches

    files = [PurePosixPath(p.relative_to(run)) for p in run.rglob("*") if p.is_file()]
    batches = {b.path for b in find_batches(files)}
    with_batches, logs = work / "with_batches" / run.name, work / "logs_only" / run.name
    skip = shutil.ignore_patterns("checkpoints", "checkpoint-*", "*.py")
    shutil.copytree(run, with_batches, ignore=skip)
    shutil.copytree(run, logs, ignore=skip)
    for rel in batches:
        (logs / rel).unlink(missing_ok=True)
    return logs, with_batches, len(batches), sum((run / rel).stat().st_size for rel in batches)


def in_process(run: Path, work: Path, repeat: int) -> tuple[float, float]:
    """Median wall and CPU milliseconds per batch of `ingest_batches` alone, torch imported before."""
    import torch  # noqa: F401 - imported once, outside the timing

    from ingest.batches import find_batches
    from ingest.run import ingest_batches
    from ingest.store import connect

    found = find_batches([PurePosixPath(p.relative_to(run)) for p in run.rglob("*") if p.is_file()])
    walls, cpus = [], []
    for i in range(repeat + 1):
        db = work / f"inproc{i}.duckdb"
        with connect(db, write=True):
            pass
        t0, c0 = time.monotonic(), time.process_time()
        ingest_batches(db, "bench", run, found)
        if i:  # the first warms the page cache and torch's first calls
            walls.append((time.monotonic() - t0) * 1000 / len(found))
            cpus.append((time.process_time() - c0) * 1000 / len(found))
    return statistics.median(walls), statistics.median(cpus)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", type=Path, default=REPO / "sample_runs" / "runs" / "nan_log_zero")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--baseline", type=Path, help="another checkout whose two ingests run in the same rounds")
    args = p.parse_args(argv)
    py = sys.executable
    work = Path(tempfile.mkdtemp(prefix="bench_ingest_batches_"))
    try:
        logs, with_batches, n, size = copies(args.run.resolve(), work)
        contenders: list[tuple[str, Path, Path | None]] = [
            ("import torch", REPO, None), ("ingest logs alone", REPO, logs), ("ingest logs + batches", REPO, with_batches)]
        if args.baseline:
            base = args.baseline.resolve()
            contenders += [(f"logs alone ({args.baseline})", base, logs), (f"logs + batches ({args.baseline})", base,
                                                                             with_batches)]
        wall: dict[str, list[float]] = {name: [] for name, _, _ in contenders}
        cpu: dict[str, list[float]] = {name: [] for name, _, _ in contenders}
        loads = [os.getloadavg()[0]]
        k = 0
        for round_ in range(args.repeat + 1):
            for name, cwd, run in contenders:
                k += 1
                cmd = ([py, "-c", "import torch"] if run is None else
                       [py, "-m", "forensics.cli", "ingest", str(run), "--db", str(work / f"s{k}.duckdb"), "--quiet"])
                took, used = timed(cmd, cwd)
                if round_:
                    wall[name].append(took)
                    cpu[name].append(used)
            loads.append(os.getloadavg()[0])
        per_wall, per_cpu = in_process(with_batches, work, args.repeat)
        loads.append(os.getloadavg()[0])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    med = {name: (statistics.median(wall[name]), statistics.median(cpu[name])) for name in wall}
    print(f"saved batches: `forensics ingest {args.run.name}` (checkpoints left out) with its {n} batches "
          f"({size / 1024:.0f} KB, {size / n / 1024:.1f} KB each) and without, fresh stores, median of "
          f"{args.repeat} alternating rounds")
    print(f"  {'process':<44} {'wall s':>7} {'CPU s':>6}   wall, all rounds")
    for name in wall:
        print(f"  {name:<44} {med[name][0]:>7.3f} {med[name][1]:>6.2f}   {', '.join(f'{t:.2f}' for t in wall[name])}")
    pairs = [("", "ingest logs alone", "ingest logs + batches")]
    if args.baseline:
        pairs.append((f" ({args.baseline})", f"logs alone ({args.baseline})", f"logs + batches ({args.baseline})"))
    torch_wall, torch_cpu = med["import torch"]
    for label, alone, both in pairs:
        dw, dc = med[both][0] - med[alone][0], med[both][1] - med[alone][1]
        print(f"  batches' share{label}: {dw:.3f} s wall, {dc:.2f} s CPU: {dw * 1000 / n:.1f} ms wall and "
              f"{dc * 1000 / n:.1f} ms CPU per batch; less the one torch import, {(dw - torch_wall) * 1000 / n:.1f} "
              f"and {(dc - torch_cpu) * 1000 / n:.1f} ms")
    print(f"  in one process, torch imported: {per_wall:.2f} ms wall, {per_cpu:.2f} ms CPU per batch "
          f"(read, statistics, stored)")
    print(f"load average {min(loads):.1f}-{max(loads):.1f} over the rounds ({os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
