"""Benchmark: reading a `.wandb` log of >= 1M scalars: the compiled core, our pure-Python walk, and a naive peer.

    python benchmarks/bench_ingest_wandb.py [--scalars 1000000] [--metrics 10] [--file /tmp/bench.wandb]
    python benchmarks/bench_ingest_wandb.py --x87     # the core with and without its x87 number branch

The log is written with wandb's own protobufs and the real framing (`frame_records`, which the tests check
reproduces a file wandb 0.31 wrote byte for byte): per logged row, a summary record and a history record
holding the metrics plus `_step`, `_timestamp`, `_runtime`, as wandb 0.31 writes them (real wandb's
offline writer is far too slow for a million points). Readers: `compiled` (read_wandb, the C core in
ingest/_wandblog.c), `python` (read_wandb(compiled=False), the exact pure-Python walk the core is tested
against) and `naive` (protobuf parse + one json.loads per value). Each runs in its own process so that its
peak RSS is its own. Prints scalars/s, peak memory and the ratios; tests never time things.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BLOCK = 32 * 1024
HEADER = 7


def frame_records(payloads) -> bytes:
    """A `.wandb` file from serialized Records: W&B header, then LevelDB-style chunks in 32 KiB blocks.

    Mirrors what wandb-core's leveldb writer does (wandb 0.31): CRC-32 (IEEE) over type byte + payload,
    a block with fewer than 7 bytes left is zero-padded, exactly 7 bytes left still takes a FIRST chunk.
    """
    out = bytearray(b":W&B" + struct.pack("<HB", 0xBEE1, 0))
    for p in payloads:
        left = BLOCK - len(out) % BLOCK
        if left < HEADER:
            out += b"\0" * left
            left = BLOCK
        first = True
        while True:
            room = left - HEADER
            piece, p = p[:room], p[room:]
            last = not p
            typ = (1 if last else 2) if first else (4 if last else 3)
            out += struct.pack("<IHB", zlib.crc32(bytes([typ]) + piece), len(piece), typ)
            out += piece
            if last:
                break
            first = False
            left = BLOCK
    return bytes(out)


def write_bench_log(path: Path, n_scalars: int, n_metrics: int) -> int:
    """Write the benchmark log; returns how many metric scalars it holds (the `_step`/`_timestamp` excluded)."""
    import numpy as np
    from wandb.proto import wandb_internal_pb2 as pb

    rows = math.ceil(n_scalars / (n_metrics + 1))  # + _runtime, stored as a series too
    rng = np.random.default_rng(0)
    values = rng.standard_normal((rows, n_metrics)) * np.logspace(-6, 3, n_metrics)
    values[rows // 2, 0] = np.nan
    values[rows // 3, 1] = np.inf
    names = [f"train/metric_{k}" for k in range(n_metrics)]
    payloads = []
    run = pb.Record()
    run.run.run_id, run.run.project = "bench01", "bench"
    upd = run.run.config.update.add()
    upd.key, upd.value_json = "lr", "0.001"
    payloads.append(run.SerializeToString())
    t0 = 1.7e9
    for i in range(rows):
        items = [(n, json.dumps(float(v))) for n, v in zip(names, values[i])]
        items += [("_timestamp", repr(t0 + 0.1 * i)), ("_runtime", repr(0.1 * i)), ("_step", str(i))]
        summary = pb.Record()
        history = pb.Record()
        for key, vj in items:
            s = summary.summary.update.add()
            s.nested_key.append(key)
            s.value_json = vj
            h = history.history.item.add()
            h.nested_key.append(key)
            h.value_json = vj
        history.history.step.num = i
        payloads.append(summary.SerializeToString())
        payloads.append(history.SerializeToString())
    path.write_bytes(frame_records(payloads))
    return rows * (n_metrics + 1)


def naive_read(path: Path):
    """The peer: frame like wandb's old datastore.py, parse each Record, one json.loads per value."""
    import polars as pl
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    pos, parts = HEADER, []
    tags, steps, vals, walls = [], [], [], []
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:
            pos += left
            continue
        crc, length, typ = struct.unpack_from("<IHB", data, pos)
        payload = data[pos + HEADER:pos + HEADER + length]
        if zlib.crc32(bytes([typ]) + payload) != crc:
            raise ValueError(f"crc at {pos}")
        pos += HEADER + length
        parts.append(payload)
        if typ not in (1, 4):
            continue
        record = pb.Record()
        record.ParseFromString(b"".join(parts))
        parts = []
        if record.WhichOneof("record_type") != "history":
            continue
        row = {"/".join(i.nested_key) or i.key: json.loads(i.value_json) for i in record.history.item}
        step, wall = row.pop("_step"), row.pop("_timestamp")
        for k, v in row.items():
            tags.append(k)
            steps.append(step)
            vals.append(float(v))
            walls.append(wall)
    return pl.DataFrame({"tag": tags, "step": steps, "value": vals, "wall_time": walls},
                        schema={"tag": pl.Utf8, "step": pl.Int64, "value": pl.Float64, "wall_time": pl.Float64})


def ours_read(path: Path, compiled: bool = True):
    import polars as pl

    from ingest.records import scalars_frame
    from ingest.wandb import read_wandb

    return pl.concat([scalars_frame(c.scalars) for c in read_wandb(path, 0, compiled=compiled)
                      if c.scalars is not None])


def profile_ours(path: Path) -> None:
    import cProfile
    import pstats

    cProfile.runctx("ours_read(path)", globals(), {"path": path, "ours_read": ours_read}, "/tmp/wandb_bench.prof")
    pstats.Stats("/tmp/wandb_bench.prof").sort_stats("tottime").print_stats(8)


def build_core(out_dir: Path, no_x87: bool) -> Path:
    """Compile ingest/_wandblog.c into `out_dir` as setup.py does (-O3 -std=c11), with or without the x87
    branch of its number parser; returns the folder to put first on `ingest.__path__`."""
    import sysconfig

    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"_wandblog{sysconfig.get_config_var('EXT_SUFFIX')}"
    cmd = [os.environ.get("CC", "gcc"), "-O3", "-std=c11", "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}",
           *(["-DWANDBLOG_NO_X87"] if no_x87 else []), str(ROOT / "ingest/_wandblog.c"), "-o", str(target)]
    subprocess.run(cmd, check=True)
    return out_dir


def child_core(path: Path, core_dir: Path, repeats: int) -> None:
    """Time the whole compiled read (best of `repeats`) with the extension built in `core_dir`; print a JSON line."""
    import ingest

    ingest.__path__.insert(0, str(core_dir))
    from ingest import _wandblog
    from ingest.wandb import _load_protos

    assert Path(_wandblog.__file__).parent == core_dir, _wandblog.__file__
    _load_protos()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        frame = ours_read(path)
        times.append(time.perf_counter() - t)
    print(json.dumps({"read_s": min(times), "points": frame.height}))


def child(which: str, path: Path, to_duckdb: bool) -> None:
    """Run one reader in this process and print a JSON line: seconds, points, peak RSS."""
    from ingest.wandb import _load_protos

    _load_protos()  # the protobuf import (0.4 s) is the same for every reader: not timed
    t = time.perf_counter()
    frame = naive_read(path) if which == "naive" else ours_read(path, compiled=which == "compiled")
    read_s = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # the reader's peak, before DuckDB's
    db_s = None
    if to_duckdb:
        import duckdb

        t = time.perf_counter()
        con = duckdb.connect(":memory:")
        con.execute("CREATE TABLE scalars AS SELECT * FROM frame")
        n = con.execute("SELECT count(*) FROM scalars").fetchone()[0]
        assert n == frame.height
        db_s = time.perf_counter() - t
    print(json.dumps({"which": which, "read_s": read_s, "db_s": db_s, "points": frame.height, "rss_mb": rss}))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scalars", type=int, default=1_000_000)
    ap.add_argument("--metrics", type=int, default=10, help="metrics per logged row")
    ap.add_argument("--file", type=Path, default=Path("/tmp/bench_ingest_wandb.wandb"))
    ap.add_argument("--rewrite", action="store_true", help="write the log again even if it exists")
    ap.add_argument("--profile", action="store_true", help="print where our reader spends its time")
    ap.add_argument("--x87", action="store_true", help="compare the core built with and without its x87 branch")
    ap.add_argument("--repeats", type=int, default=5, help="best of this many runs (--x87)")
    ap.add_argument("--child", choices=["compiled", "python", "naive"], help=argparse.SUPPRESS)
    ap.add_argument("--core-dir", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--duckdb", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.core_dir:
        child_core(args.file, args.core_dir, args.repeats)
        return 0
    if args.child:
        child(args.child, args.file, args.duckdb)
        return 0
    if args.rewrite or not args.file.exists():
        t = time.perf_counter()
        n = write_bench_log(args.file, args.scalars, args.metrics)
        print(f"wrote {args.file} ({args.file.stat().st_size / 2**20:.1f} MiB, {n:,} scalars) "
              f"in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    if args.profile:
        profile_ours(args.file)
        return 0
    if args.x87:
        return compare_x87(args)
    results = {}
    for which in ("compiled", "python", "naive"):
        cmd = [sys.executable, __file__, "--child", which, "--file", str(args.file)]
        if which == "compiled":
            cmd.append("--duckdb")
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, env={**os.environ}).stdout
        results[which] = json.loads(out.strip().splitlines()[-1])
    fast, python, naive = results["compiled"], results["python"], results["naive"]
    assert fast["points"] == python["points"] >= naive["points"], results
    print(f"file: {args.file.stat().st_size / 2**20:.1f} MiB")
    for r in (fast, python, naive):
        print(f"{r['which']:>8}: {r['points']:>10,} scalars in {r['read_s']:.2f} s = "
              f"{r['points'] / r['read_s'] / 1e6:.2f} M scalars/s, peak RSS {r['rss_mb']:.0f} MiB")
    print(f"duckdb bulk insert of the compiled reader's frame: {fast['db_s']:.2f} s "
          f"({fast['points'] / fast['db_s'] / 1e6:.1f} M rows/s)")
    for r in (python, naive):
        print(f"compiled vs {r['which']}: {r['read_s'] / fast['read_s']:.1f}x faster, "
              f"peak RSS ratio {fast['rss_mb'] / r['rss_mb']:.2f}")
    return 0


def compare_x87(args: argparse.Namespace) -> int:
    """The same core with and without the x87 branch (16-19 digit numbers: one 80-bit operation instead of
    CPython's correctly rounded string_to_double), alternating builds so that machine load hits both alike."""
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="bench_x87_"))
    builds = {"x87": build_core(tmp / "x87", no_x87=False), "no_x87": build_core(tmp / "no_x87", no_x87=True)}
    runs: dict[str, list[dict]] = {k: [] for k in builds}
    for _ in range(3):
        for name, core_dir in builds.items():
            cmd = [sys.executable, __file__, "--file", str(args.file), "--core-dir", str(core_dir),
                   "--repeats", str(args.repeats)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            runs[name].append(json.loads(out.strip().splitlines()[-1]))
    best = {k: min(r["read_s"] for r in v) for k, v in runs.items()}
    n = runs["x87"][0]["points"]
    assert all(r["points"] == n for v in runs.values() for r in v)
    for name, secs in best.items():
        each = ", ".join(f"{r['read_s']:.3f}" for r in runs[name])
        print(f"{name:>7}: {n:,} scalars in {secs:.3f} s ({n / secs / 1e6:.2f} M scalars/s), best of "
              f"{3 * args.repeats} (best per process: {each})")
    print(f"x87 branch: the compiled read is x{best['no_x87'] / best['x87']:.2f} as fast with it")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
