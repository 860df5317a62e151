"""Benchmark: the first answer, `forensics analyze` of an ordinary run (logs only) into a fresh store, whole process,
beside `python -c "import torch"` (the goal: at most half of it). One run, contenders alternating.

    python benchmarks/bench_first_answer.py [--run ../shared/real_runs/hf_tsviz] [--repeat 7] [--baseline DIR]

Each round times, as separate processes and in turn (a shared machine's load drifts over all of them alike):
    import torch        python -c "import torch"
    analyze             python -m forensics.cli analyze RUN --db FRESH (ingest, every detector, storing, the report)
    import analysis     python -c "import forensics.services.analysis" (the engine's imports)
    floor               python -c "import duckdb, polars, numpy" (what the engine cannot run without)
    fresh store         python -c "... connect(FRESH, write=True)" minus its imports: creating the schema
`--baseline DIR`: also `analyze` from another checkout (e.g. `git worktree add DIR main`), same rounds. Printed:
medians of wall time over --repeat rounds (after one round that warms bytecode and page caches, uncounted), each
as a multiple of `import torch`, the median CPU time (user + system, the process and its threads: less sensitive to
a busy neighbour than wall time) and the load average.

What it measures is a user's view: our modules run from compiled bytecode, as `pip install` leaves them. Every
process runs without PYTHONDONTWRITEBYTECODE (set on this project's machine, where each process would compile our
.py files again: ~0.2-0.45 s more per `analyze`), so the uncounted first round writes `__pycache__` and the
counted rounds read it.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("FORENSICS_SHARED") or REPO.parent / "shared")  # as tests/paths.py finds it


def timed(cmd: list[str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one process."""
    # Bytecode written and read as an installed package has it (pip compiles on install): an environment with
    # PYTHONDONTWRITEBYTECODE would compile every module of ours from source in every process (~0.2 s here).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"PYTHONPATH": str(cwd)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run(cmd, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", type=Path, default=SHARED / "real_runs" / "hf_tsviz")
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--baseline", type=Path, help="another checkout whose `analyze` runs in the same rounds")
    args = p.parse_args(argv)
    py = sys.executable
    work = Path(tempfile.mkdtemp(prefix="bench_first_answer_"))
    store_code = ("import sys; from pathlib import Path; from ingest.store import connect\n"
                  "with connect(Path(sys.argv[1]), write=True): pass")
    contenders: list[tuple[str, Path, list[str] | None]] = [
        ("import torch", REPO, [py, "-c", "import torch"]),
        ("analyze", REPO, None),
        ("import forensics.services.analysis", REPO, [py, "-c", "import forensics.services.analysis"]),
        ("floor: import duckdb, polars, numpy", REPO, [py, "-c", "import duckdb, polars, numpy"]),
        ("import ingest.store", REPO, [py, "-c", "import ingest.store"]),
        ("ingest.store + a fresh store", REPO, None),
    ]
    if args.baseline:
        contenders.insert(2, (f"analyze ({args.baseline})", args.baseline.resolve(), None))
    times: dict[str, list[float]] = {name: [] for name, _, _ in contenders}
    cpu: dict[str, list[float]] = {name: [] for name, _, _ in contenders}
    loads = [os.getloadavg()[0]]
    n = 0
    for round_ in range(args.repeat + 1):  # round 0 warms the bytecode caches and the page cache: not counted
        for name, cwd, cmd in contenders:
            n += 1
            db = work / f"s{n}.duckdb"
            if cmd is None and name.startswith("analyze"):
                cmd_ = [py, "-m", "forensics.cli", "analyze", str(args.run), "--db", str(db)]
            elif cmd is None:
                cmd_ = [py, "-c", store_code, str(db)]
            else:
                cmd_ = cmd
            took, used = timed(cmd_, cwd)
            if round_:
                times[name].append(took)
                cpu[name].append(used)
        loads.append(os.getloadavg()[0])
    torch_s = statistics.median(times["import torch"])
    torch_cpu = statistics.median(cpu["import torch"])
    print(f"first answer: `forensics analyze {args.run.name}` (fresh store) beside `import torch`, "
          f"median of {args.repeat} alternating rounds; our modules from compiled bytecode, as installed")
    print(f"  {'process':<40} {'wall s':>7} {'x import torch':>15} {'CPU s':>6} {'x':>6}   wall, all rounds")
    for name, _, _ in contenders:
        med, med_cpu = statistics.median(times[name]), statistics.median(cpu[name])
        print(f"  {name:<40} {med:>7.3f} {med / torch_s:>14.2f}x {med_cpu:>6.2f} {med_cpu / torch_cpu:>5.2f}x   "
              f"{', '.join(f'{t:.2f}' for t in times[name])}")
    store = statistics.median(times["ingest.store + a fresh store"]) - statistics.median(times["import ingest.store"])
    print(f"  a fresh store's schema alone (the two above, subtracted): {store:.3f} s")
    print(f"load average {min(loads):.1f}-{max(loads):.1f} over the rounds ({os.cpu_count()} CPUs)")
    shutil.rmtree(work, ignore_errors=True)  # one fresh store per process: ~60 MB by the end
    return 0


if __name__ == "__main__":
    sys.exit(main())
