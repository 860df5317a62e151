"""Benchmark: `forensics analyze` time on runs of 1M, 2M, 4M and 8M points, and tbparse merely reading the largest.

    python benchmarks/bench_analyze.py                       # 1M, 2M, 4M, 8M points (~0.5 GB under /tmp)
    python benchmarks/bench_analyze.py --points 1000000 2000000 --dir /tmp/an_bench
    python benchmarks/bench_analyze.py --reuse --points 8000000 32000000 100000000 --tbparse-max 8000000

Each run is one TensorBoard event file written with the ingest benchmark's generator
(`benchmarks/bench_ingest_tensorboard.py`: the bytes torch.utils.tensorboard writes) holding four series the
detectors read, of equal length: train loss (a decaying curve with noise, spikes and a NaN onset), gradient
norm, LR and validation loss. The run is ingested first (not timed here: the ingest benchmark measures that);
then the full analysis (Run view, every detector, spikes, events, storing findings) is timed in a fresh
subprocess, as is tbparse's `SummaryReader(file).scalars` on the largest file. Prints seconds, CPU seconds,
peak RSS, points/s, the growth per doubling (near 2.0 is linear) and the analysis / tbparse ratio (below 1
means faster than the read). tbparse holds every point it reads (~0.3 KB each): `--tbparse-max` times it on the
largest run it can hold and gives the ratio there; `--reuse` keeps runs written and ingested by an earlier call
(a run is ~50 bytes a point on disk, its store ~11).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# Equal-length tags (the generator's record layout needs one tag length); roles: train_loss, grad_norm, lr, val_loss.
TAGS = ("loss/train", "grad_norm_", "lr/train__", "loss/valid")


def series_values(n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, 4) float32 values: loss, grad norm, LR, val loss over steps 0..n-1."""
    t = np.arange(n) / n
    loss = (0.3 + 2.0 * np.exp(-t * 8)) * (1 + rng.normal(0, 0.05, n))
    spikes = rng.choice(n, size=5, replace=False)
    loss[spikes] *= 6
    loss[int(n * 0.97):] = np.nan  # the run dies near its end
    grad = np.exp(rng.normal(0, 0.2, n))
    lr = 1e-3 * 0.5 * (1 + np.cos(np.pi * t))
    val = 0.35 + 2.0 * np.exp(-t * 8) + 0.2 * np.maximum(0, t - 0.6)
    return np.stack([loss, grad, lr, val], axis=1).astype(np.float32)


def write_run(root: Path, n_points: int, seed: int = 0) -> Path:
    """One event file of `n_points` scalars over the four tags, written with the ingest benchmark's record writer."""
    try:
        from benchmarks.bench_ingest_tensorboard import record, scalar_records
    except ImportError as exc:
        sys.exit(f"needs benchmarks/bench_ingest_tensorboard.py and the TensorBoard reader on this branch ({exc})")
    from tensorboard.compat.proto import event_pb2

    root.mkdir(parents=True, exist_ok=True)
    path = root / "events.out.tfevents.1700000000.bench.1.0"
    rng = np.random.default_rng(seed)
    n_steps = n_points // len(TAGS)
    vals = series_values(n_steps, rng)
    tags = [t.encode() for t in TAGS]
    bounds = [0, 1, 128, 16384, 2097152, 268435456]
    with path.open("wb") as f:
        f.write(record(event_pb2.Event(wall_time=1.7e9, file_version="brain.Event:2").SerializeToString()))
        s = 0
        while s < n_steps:
            nxt = min(n_steps, s + 50_000, next(b for b in bounds if b > s))
            steps = np.repeat(np.arange(s, nxt, dtype=np.int64), len(TAGS))
            tag_idx = np.tile(np.arange(len(TAGS)), nxt - s)
            values = vals[s:nxt].reshape(-1)
            f.write(scalar_records(tags, tag_idx, steps, values, 1.7e9 + steps * 0.05))
            s = nxt
    return root


def timed(code: str) -> float:
    """Seconds a fresh interpreter takes to run `code` (imports included, as a user's command pays them).
    Prints its CPU seconds, peak RSS and the load average beside (2 cores shared: compare within one run)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"failed ({proc.returncode}): {code}")
    secs = time.perf_counter() - t0
    print(f"    {secs:.2f} s wall, {usage.ru_utime + usage.ru_stime:.2f} s CPU, peak RSS {usage.ru_maxrss / 1024:.0f} MB, "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    return secs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--points", type=int, nargs="+", default=[1_000_000, 2_000_000, 4_000_000, 8_000_000])
    ap.add_argument("--dir", type=Path, default=Path("/tmp/forensics_bench_analyze"))
    ap.add_argument("--reuse", action="store_true",
                    help="keep runs and stores already under --dir (written and ingested by an earlier call)")
    ap.add_argument("--tbparse-max", type=int, default=None, metavar="N",
                    help="time tbparse on the largest run of at most N points (tbparse holds every point: ~0.4 KB "
                         "each, so 32M points need ~13 GB); the ratio is given at that size")
    args = ap.parse_args()
    if not args.reuse:
        shutil.rmtree(args.dir, ignore_errors=True)
    rows = []
    for n in args.points:
        root, db = args.dir / f"run_{n}", args.dir / f"run_{n}.duckdb"
        if not (args.reuse and db.exists()):
            write_run(root, n)
            subprocess.run([sys.executable, "-c", f"from ingest.run import ingest_run; ingest_run({str(root)!r}, "
                            f"__import__('pathlib').Path({str(db)!r}))"], check=True, cwd=REPO)
        # The process as `forensics analyze` sets it up (cli.main: freed arrays go back at once), then the analysis
        secs = timed("from forensics.services.process import return_freed_arrays; return_freed_arrays(); "
                     "from forensics.services.analysis import analyze; "
                     f"a = analyze({str(root)!r}, {str(db)!r}); print(len(a.findings), 'findings,', len(a.spikes), 'spikes')")
        rows.append((n, secs))
        print(f"analyze {n:>10,} points: {secs:6.2f} s  ({n / secs / 1e6:.2f} M points/s)", flush=True)
    for (n0, s0), (n1, s1) in zip(rows, rows[1:]):
        print(f"  {n0:,} -> {n1:,}: time x{s1 / s0:.2f} for points x{n1 / n0:.1f}")
    readable = [r for r in rows if args.tbparse_max is None or r[0] <= args.tbparse_max]
    if not readable:
        print(f"tbparse not timed: no run of at most {args.tbparse_max:,} points")
        return
    n, secs = readable[-1]
    event = next((args.dir / f"run_{n}").glob("events.out.tfevents.*"))
    tb = timed(f"from tbparse import SummaryReader; print(len(SummaryReader({str(event)!r}).scalars), 'scalars (tbparse)')")
    print(f"tbparse reading {n:,} points: {tb:6.2f} s; analysis / tbparse read = {secs / tb:.3f}")


if __name__ == "__main__":
    main()
