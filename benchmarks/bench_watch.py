"""Benchmark: fleet mode's runs per minute (1 process, --jobs 2, Ray local), its single writer's share, an idle
watch pass over 10,000 runs, and the latency from a NaN written into a watched run to its alert. One run.

    python benchmarks/bench_watch.py                          # 40 runs, 10,000 idle runs, latency
    python benchmarks/bench_watch.py --runs 1000 --dir /tmp/wb  # the issue's full size (hours on 2 busy cores)

Fleet: `--runs` generated runs in four formats, round robin, 10k-100k points each: TensorBoard event files
(the bytes torch.utils.tensorboard writes, from the ingest benchmark's record writer), HF `trainer_state.json`
(transformers' TrainerState serialisation), Lightning CSVLogger `metrics.csv` and a console `train.log`; a
quarter of them turn NaN. Each contender analyses every run into a fresh store (ingest + every detector +
storing); the writer's share is the driver's time appending workers' tables and storing analyses over the
wall time, printed with the load average and the driver's and workers' CPU seconds, from which the cluster
projection (Amdahl) is printed after the table. `--rounds N` alternates the contenders N times. A second pass over the same store (nothing new to read, every run analysed again, as a watch does
for runs that grew) is timed too.

Idle pass: `--idle-runs` run folders (one event file each, hard links of one file, under 100 user folders),
watched after a first pass has fingerprinted them; one more pass finds nothing changed. Printed: folders listed,
files stat'ed, wall time, against the floor any poller pays (os.walk + os.stat of every file, the same tree).

Latency: a SummaryWriter keeps writing one run while `Watcher.run_forever` watches it; a NaN is written and
flushed, and the time until its nan_loss alert is printed with watchdog's file events and with polling alone.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FORMATS = ("tensorboard", "hf", "lightning", "console")


def write_runs(root: Path, n: int, seed: int = 0) -> list[Path]:
    """`n` runs of 10k-100k points, formats in turn; every fourth one's loss turns NaN near its end."""
    from benchmarks.bench_analyze import write_run as write_tb
    from sample_runs.gen.loggers import TrainerState

    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        fmt = FORMATS[i % len(FORMATS)]
        points = int(rng.integers(10_000, 100_001))
        run = root / f"{fmt}_{i:04d}"
        if fmt == "tensorboard":
            write_tb(run, points, seed=i)  # 4 series; bench_analyze's curve dies (NaN) at 97% of its steps
            out.append(run)
            continue
        run.mkdir(parents=True)
        steps = points // 3
        t = np.arange(steps) / steps
        loss = (0.3 + 2.0 * np.exp(-t * 8)) * (1 + rng.normal(0, 0.05, steps))
        if i % 4 == 1:
            loss[int(steps * 0.9):] = np.nan
        grad = np.exp(rng.normal(0, 0.2, steps))
        lr = 1e-3 * 0.5 * (1 + np.cos(np.pi * t))
        if fmt == "hf":
            hist = [{"epoch": round(s / 1000, 4), "grad_norm": float(g), "learning_rate": float(r), "loss": float(v),
                     "step": s + 1} for s, (v, g, r) in enumerate(zip(loss, grad, lr))]
            TrainerState(global_step=steps, max_steps=steps, logging_steps=1, log_history=hist).save_to_json(
                run / "trainer_state.json")
        elif fmt == "lightning":
            (run / "lightning_logs" / "version_0").mkdir(parents=True)
            with open(run / "lightning_logs" / "version_0" / "metrics.csv", "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=["epoch", "grad_norm", "lr-Adam", "step", "train_loss"])
                w.writeheader()
                w.writerows({"epoch": s // 1000, "grad_norm": g, "lr-Adam": r, "step": s, "train_loss": v}
                            for s, (v, g, r) in enumerate(zip(loss, grad, lr)))
        else:
            with open(run / "train.log", "w") as f:
                f.writelines(f"step {s}/{steps} | loss {v:.4f} | grad_norm {g:.4f} | lr {r:.3e}\n"
                             for s, (v, g, r) in enumerate(zip(loss, grad, lr)))
        out.append(run)
    return out


def fleet(runs: list[Path], work: Path, ray_ok: bool, rounds: int = 1, second_pass: bool = True) -> list[dict]:
    """Each contender analyses every run into a fresh store, contenders in turn, `rounds` times (a loaded machine's
    load moves: alternating pairs the contenders). Besides the wall time: the driver's CPU seconds and, for
    worker processes, the workers' (each run's `cpu_seconds`), which the machine's load does not inflate."""
    from forensics.services.fleet import Options, analyze_runs

    rows = []
    contenders = [("1 process", dict(jobs=1)), ("--jobs 2", dict(jobs=2))]
    if ray_ok:
        contenders.append(("Ray local (2 CPUs)", dict(use_ray=True)))
    for round_ in range(rounds):
        for label, kw in contenders:
            db = work / f"fleet_{len(rows)}.duckdb"
            init = 0.0
            if kw.get("use_ray"):
                import ray

                t0 = time.monotonic()
                ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
                init = time.monotonic() - t0
            load = os.getloadavg()[0]
            cpu0, t0 = time.process_time(), time.monotonic()
            results = analyze_runs([str(r) for r in runs], db, Options(), **kw)
            wall, cpu = time.monotonic() - t0, time.process_time() - cpu0
            workers_cpu = sum(r.cpu_seconds for r in results)
            failed = [r for r in results if r.error]
            store = sum(r.store_seconds for r in results)
            wall2 = again = None
            if second_pass:
                # A second pass over the same store: nothing new to read, every run analysed again (what a watch
                # does for runs that grew): the driver ingests, workers read the store (under Ray: the driver).
                t1 = time.monotonic()
                again = analyze_runs([str(r) for r in runs], db, Options(), **kw)
                wall2 = time.monotonic() - t1
            if kw.get("use_ray"):
                import ray

                ray.shutdown()
            rows.append({"contender": label, "round": round_ + 1, "runs": len(runs), "failed": len(failed),
                         "seconds": wall, "load": load, "runs_per_min": 60 * len(runs) / wall,
                         "writer_s": store, "writer_share": store / wall if kw != {"jobs": 1} else None,
                         "driver_cpu_s": cpu, "workers_cpu_s": workers_cpu if kw.get("jobs", 1) > 1 else None,
                         "ray_init_s": init if kw.get("use_ray") else None,
                         "second_pass_runs_per_min": 60 * len(runs) / wall2 if wall2 else None,
                         "second_pass_failed": sum(1 for r in again if r.error) if again else None,
                         "errors": sorted({r.error for r in failed})[:3]})
    return rows


def projection(rows: list[dict]) -> list[dict]:
    """Amdahl from CPU seconds, per round: one process does the work in T CPU seconds; with workers, the driver
    (the single writer, and taking workers' results) spends D, the workers W together. N workers with a core
    each go at most T / max(D, W / N) times one process; the cap, 1 / (D / T), is what no cluster passes."""
    out = []
    for one, par in zip((r for r in rows if r["contender"] == "1 process"),
                        (r for r in rows if r["contender"] == "--jobs 2")):
        t, d, w = one["driver_cpu_s"], par["driver_cpu_s"], par["workers_cpu_s"]
        out.append({"round": one["round"], "T": t, "D": d, "W": w, "serial_share": d / t, "cap": t / d,
                    "speedup": {n: t / max(d, w / n) for n in (2, 4, 8, 16, 32, 64)}})
    return out


def idle_pass(root: Path, n: int, work: Path) -> dict:
    """Fingerprint n runs once, then time a pass that finds nothing changed; and the os.walk + stat floor."""
    from benchmarks.bench_analyze import write_run as write_tb
    from forensics.services.watch import Watcher, WatchSettings

    template = write_tb(work / "template", 40)
    event = next(template.iterdir())
    for i in range(n):
        run = root / f"user{i % 100:02d}" / f"run_{i:05d}"
        run.mkdir(parents=True)
        os.link(event, run / event.name)
    w = Watcher([root], work / "idle.duckdb", WatchSettings(events=False))
    w._analyse = lambda changed: []  # the first pass only discovers and fingerprints: reading 10,000 runs is not
    w.poll_once()                    # what an idle pass costs
    for st in w.memory.runs.values():
        st.fingerprint = st.next_fingerprint
    del w._analyse
    passes = []
    for _ in range(3):
        r = w.poll_once()
        assert r.changed == 0 and r.runs == n, (r.changed, r.runs)
        passes.append(r)
    t0 = time.monotonic()
    listed = stats = 0
    for dirpath, dirnames, filenames in os.walk(root):
        listed += 1
        for f in filenames:
            os.stat(os.path.join(dirpath, f))
            stats += 1
    floor = time.monotonic() - t0
    best = min(passes, key=lambda r: r.seconds)
    return {"runs": n, "listings": best.listings, "stats": best.stats, "seconds": best.seconds,
            "all_passes_s": [round(p.seconds, 3) for p in passes], "floor_listings": listed, "floor_stats": stats,
            "floor_seconds": floor}


def latency(work: Path, events: bool, interval: float) -> dict:
    """Seconds from a flushed NaN to its alert, with a SummaryWriter still writing the run."""
    from torch.utils.tensorboard import SummaryWriter

    from forensics.services.watch import Watcher, WatchSettings

    root = work / f"live_{'events' if events else 'poll'}"
    w = SummaryWriter(str(root / "job"))
    for s in range(200):
        w.add_scalar("train/loss", 2.0 * np.exp(-s / 50) + 0.1, s, walltime=1.7e9 + s)
    w.flush()
    got: dict[str, float] = {}
    watcher = Watcher([root], work / f"live_{events}.duckdb", WatchSettings(interval=interval, events=events),
                      emit=lambda a: got.setdefault(a.kind, time.monotonic()))
    first = threading.Event()
    thread = threading.Thread(target=watcher.run_forever, kwargs={"on_pass": lambda r: first.set()}, daemon=True)
    thread.start()
    first.wait(300)
    time.sleep(interval * 0.4)  # the NaN lands somewhere inside an interval, not right after a pass
    for s in range(200, 220):
        w.add_scalar("train/loss", float("nan"), s, walltime=1.7e9 + s)
    w.flush()
    t0 = time.monotonic()
    deadline = t0 + 10 * interval + 120
    while "nan_loss" not in got and time.monotonic() < deadline:
        time.sleep(0.05)
    watcher.stop.set()
    thread.join(60)
    w.close()
    return {"events": events, "interval_s": interval,
            "latency_s": got["nan_loss"] - t0 if "nan_loss" in got else None}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=40, help="generated runs for fleet mode (the issue: 1000)")
    p.add_argument("--idle-runs", type=int, default=10_000)
    p.add_argument("--interval", type=float, default=10.0, help="watch interval for the latency test")
    p.add_argument("--rounds", type=int, default=1, help="fleet contenders in turn, this many times")
    p.add_argument("--no-second-pass", action="store_true", help="fleet: skip the second pass over the same store")
    p.add_argument("--dir", type=Path, default=None)
    p.add_argument("--skip", nargs="*", default=[], choices=["fleet", "idle", "latency"])
    p.add_argument("--json", type=Path, help="also write the numbers here")
    args = p.parse_args(argv)
    work = args.dir or Path(tempfile.mkdtemp(prefix="bench_watch_"))
    work.mkdir(parents=True, exist_ok=True)
    out: dict = {"cpus": os.cpu_count(), "load_avg_start": os.getloadavg()}
    try:
        if "fleet" not in args.skip:
            t0 = time.monotonic()
            runs = write_runs(work / "fleet_runs", args.runs)
            print(f"generated {len(runs)} runs in {time.monotonic() - t0:.0f}s", file=sys.stderr)
            try:
                import ray  # noqa: F401
                ray_ok = True
            except ImportError:
                ray_ok = False
                print("ray not installed: Ray local skipped (pip install -e '.[ray]')", file=sys.stderr)
            out["fleet"] = fleet(runs, work, ray_ok, args.rounds, not args.no_second_pass)
            print(f"\nfleet mode, {args.runs} runs (10k-100k points; TensorBoard, HF, Lightning, console):")
            print(f"  {'contender':<20} {'round':>5} {'load':>5} {'runs/min':>9} {'vs 1 process':>13} {'seconds':>8} "
                  f"{'writer s':>8} {'writer share':>13} {'driver CPU s':>12} {'workers CPU s':>13} failed  "
                  f"{'2nd pass runs/min':>17}")
            for r in out["fleet"]:
                base = next(b["runs_per_min"] for b in out["fleet"] if b["round"] == r["round"])
                share = f"{r['writer_share']:.1%}" if r["writer_share"] is not None else "-"
                extra = f"  (+ray.init {r['ray_init_s']:.1f}s)" if r["ray_init_s"] else ""
                second = f"{r['second_pass_runs_per_min']:.1f}" if r["second_pass_runs_per_min"] else "-"
                workers = f"{r['workers_cpu_s']:.1f}" if r["workers_cpu_s"] is not None else "-"
                print(f"  {r['contender']:<20} {r['round']:>5} {r['load']:>5.1f} {r['runs_per_min']:>9.1f} "
                      f"{r['runs_per_min'] / base:>12.2f}x {r['seconds']:>8.1f} {r['writer_s']:>8.1f} {share:>13} "
                      f"{r['driver_cpu_s']:>12.1f} {workers:>13} {r['failed']:>6}  {second:>17}{extra}")
            out["projection"] = projection(out["fleet"])
            print("\ncluster projection (Amdahl on CPU seconds: T one process, D the driver with workers, W the "
                  "workers):")
            for p in out["projection"]:
                ups = ", ".join(f"{n}: {x:.1f}x" for n, x in p["speedup"].items())
                print(f"  round {p['round']}: T {p['T']:.1f}s, D {p['D']:.1f}s ({p['serial_share']:.1%} of T), "
                      f"W {p['W']:.1f}s; N workers -> {ups}; cap {p['cap']:.0f}x")
        if "idle" not in args.skip:
            out["idle"] = r = idle_pass(work / "idle_root", args.idle_runs, work)
            print(f"\nidle watch pass over {r['runs']:,} runs: {r['listings']:,} folders listed, {r['stats']:,} "
                  f"files stat'ed, {r['seconds']:.2f}s (passes: {r['all_passes_s']})")
            print(f"  floor (os.walk + os.stat, same tree): {r['floor_listings']:,} listed, {r['floor_stats']:,} "
                  f"stat'ed, {r['floor_seconds']:.2f}s; ratio {r['seconds'] / r['floor_seconds']:.2f}x")
        if "latency" not in args.skip:
            out["latency"] = [latency(work, True, args.interval), latency(work, False, args.interval)]
            print("\nNaN written -> alert printed:")
            for r in out["latency"]:
                how = "watchdog events + polling" if r["events"] else "polling only"
                lat = f"{r['latency_s']:.1f}s" if r["latency_s"] is not None else "no alert"
                print(f"  {how:<26} interval {r['interval_s']:g}s: {lat}")
    finally:
        out["load_avg_end"] = os.getloadavg()
        if args.json:
            args.json.write_text(json.dumps(out, indent=2, default=str))
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\nload average {out['load_avg_start'][0]:.1f} at start, {out['load_avg_end'][0]:.1f} at the end "
          f"({out['cpus']} CPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
