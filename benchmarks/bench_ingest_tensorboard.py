"""Benchmark: TensorBoard event-file ingest against tbparse and TensorBoard's EventAccumulator, in one run.

    python benchmarks/bench_ingest_tensorboard.py                  # 10M scalars, 100 tags, 4,000 histograms
    python benchmarks/bench_ingest_tensorboard.py --scalars 1000000 --dir /tmp/tb_bench
    python benchmarks/bench_ingest_tensorboard.py --only "forensics ingest,tbparse"   # the issue's pair

Writes one event file in the real format (61-byte scalar records, as torch.utils.tensorboard writes them,
plus 2 histograms every 50 steps: 4,000 at 10M scalars over 100 tags), checks a sample of its records byte for byte against SummaryWriter's
output for the same values, then times each contender in its own subprocess (so peak memory is its own):

    forensics ingest   ingest.run.ingest_run into a fresh DuckDB file (reader + series ids + bulk insert)
    forensics reader   ingest.tensorboard.read_events alone (frames built, nothing stored)
    reader + DuckDB    the reader plus a bare insert of the same rows into the store's `scalars` table (the floor)
    DuckDB append      the same bare insert alone, its CPU timed apart from the read (the floor's store part)
    imports            the interpreter and the imports ingest needs (the floor's fixed part)
    python loop        a plain loop over records: crc32c package + TensorBoard's compiled Event protobuf
    tbparse            SummaryReader(file, extra_columns={"wall_time"}).scalars
    EventAccumulator   size_guidance 0 for every kind (keep all), then a (tag, step, wall_time, value) table

and prints scalars/s, CPU seconds, peak RSS, the load average and each one's ratio to tbparse. The real
SummaryWriter manages ~30k scalars/s, so the file is written directly with numpy (same bytes), which takes a
few seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

N_TAGS = 100
HIST_EVERY = 50
HIST_TAGS = ("hist/weights_0", "hist/weights_1")


def tag_names(n: int) -> list[str]:
    """Tags of 21 characters: with 3-byte steps each scalar record is 61 bytes, as in the issue."""
    return [f"train/metric_{i:03d}_vals" for i in range(n)]


def _masked_crc(data: bytes) -> int:
    from ingest._tfevents import masked_crc32c

    return masked_crc32c(data)


def scalar_records(tags: list[bytes], tag_idx: np.ndarray, steps: np.ndarray, values: np.ndarray,
                   walls: np.ndarray) -> bytes:
    """TFRecords of Events `wall_time, step, summary{value{tag, simple_value}}`, byte for byte as the
    tensorboard event writer serialises them (proto3: a step of 0 is omitted). All `tags` must have one
    length and all `steps` one varint length; the caller splits at 1, 128, 16384, ..."""
    n = len(steps)
    if n == 0:
        return b""
    tag_len = len(tags[0])
    first = int(steps[0])
    k = 0 if first == 0 else (first.bit_length() + 6) // 7
    value_body = 2 + tag_len + 5
    summary_body = 2 + value_body
    data_len = 9 + (1 + k if k else 0) + 2 + summary_body
    rec = 16 + data_len
    arr = np.zeros((n, rec), np.uint8)
    header = np.uint64(data_len).tobytes()
    arr[:, 0:8] = np.frombuffer(header, np.uint8)
    arr[:, 8:12] = np.frombuffer(np.uint32(_masked_crc(header)).tobytes(), np.uint8)
    c = 12
    arr[:, c] = 0x09
    arr[:, c + 1 : c + 9] = walls.astype("<f8").view(np.uint8).reshape(n, 8)
    c += 9
    if k:
        arr[:, c] = 0x10
        s = steps.astype(np.uint64)
        for j in range(k):
            byte = (s >> np.uint64(7 * j)) & np.uint64(0x7F)
            if j < k - 1:
                byte |= np.uint64(0x80)
            arr[:, c + 1 + j] = byte.astype(np.uint8)
        c += 1 + k
    arr[:, c : c + 6] = [0x2A, summary_body, 0x0A, value_body, 0x0A, tag_len]
    c += 6
    tag_table = np.frombuffer(b"".join(tags), np.uint8).reshape(len(tags), tag_len)
    arr[:, c : c + tag_len] = tag_table[tag_idx]
    c += tag_len
    arr[:, c] = 0x15
    arr[:, c + 1 : c + 5] = values.astype("<f4").view(np.uint8).reshape(n, 4)
    c += 5
    flat = arr.reshape(-1)
    mv = memoryview(flat)
    crcs = np.fromiter((_masked_crc(mv[i * rec + 12 : i * rec + 12 + data_len]) for i in range(n)), np.uint32, n)
    arr[:, c : c + 4] = crcs.view(np.uint8).reshape(n, 4)
    return flat.tobytes()


def record(data: bytes) -> bytes:
    header = len(data).to_bytes(8, "little")
    return header + _masked_crc(header).to_bytes(4, "little") + data + _masked_crc(data).to_bytes(4, "little")


def histogram_record(tag: str, step: int, wall: float, rng: np.random.Generator) -> bytes:
    from tensorboard.compat.proto import event_pb2
    from torch.utils.tensorboard.summary import histogram

    summary = histogram(tag, rng.normal(size=1000) * (1 + step / 10000), bins=64)
    return record(event_pb2.Event(wall_time=wall, step=step, summary=summary).SerializeToString())


def write_event_file(path: Path, n_scalars: int, seed: int = 0) -> dict:
    """Write `n_scalars` scalars over N_TAGS tags (steps 0..n/N_TAGS-1) plus 2 histograms every HIST_EVERY steps."""
    from tensorboard.compat.proto import event_pb2

    rng = np.random.default_rng(seed)
    tags = [t.encode() for t in tag_names(N_TAGS)]
    n_steps = n_scalars // N_TAGS
    t0 = 1.7e9
    n_hist = 0
    with path.open("wb") as f:
        f.write(record(event_pb2.Event(wall_time=t0, file_version="brain.Event:2").SerializeToString()))
        bounds = [0, 1, 128, 16384, 2097152, 268435456]
        block = 1000
        s = 0
        while s < n_steps:
            nxt = min(n_steps, s + block, next(b for b in bounds if b > s))
            steps = np.repeat(np.arange(s, nxt, dtype=np.int64), N_TAGS)
            tag_idx = np.tile(np.arange(N_TAGS), nxt - s)
            values = rng.standard_normal(len(steps)).astype(np.float32)
            values[rng.random(len(steps)) < 1e-5] = np.nan  # the evidence a reader must keep
            walls = t0 + steps * 0.05 + tag_idx * 1e-4
            f.write(scalar_records(tags, tag_idx, steps, values, walls))
            for st in range(s + (-s % HIST_EVERY), nxt, HIST_EVERY):
                for tag in HIST_TAGS:
                    f.write(histogram_record(tag, st, t0 + st * 0.05, rng))
                    n_hist += 1
            s = nxt
    return {"scalars": n_steps * N_TAGS, "histograms": n_hist, "bytes": path.stat().st_size}


def check_against_summarywriter(tmp: Path) -> None:
    """Write a sample with the real SummaryWriter and with `scalar_records`; the record bytes must agree."""
    from torch.utils.tensorboard import SummaryWriter

    from ingest import _tfevents

    tags = [t.encode() for t in tag_names(N_TAGS)]
    sample = [(3, 0, 0.25, 1.7e9), (7, 5, float("nan"), 1.7e9 + 1), (99, 300, -2.5, 1.7e9 + 2.5),
              (0, 40000, float("inf"), 1.7e9 + 3)]
    out = tmp / "sample"
    shutil.rmtree(out, ignore_errors=True)
    writer = SummaryWriter(str(out))
    for idx, step, value, wall in sample:
        writer.add_scalar(tags[idx].decode(), value, step, walltime=wall)
    writer.close()
    real = next(out.glob("events.out.tfevents.*")).read_bytes()
    first = int.from_bytes(real[:8], "little") + 16  # the file_version record
    ours = b"".join(
        scalar_records(tags, np.array([i]), np.array([s]), np.array([v], np.float32), np.array([w]))
        for i, s, v, w in sample
    )
    if real[first:] != ours:
        raise SystemExit("generated records differ from SummaryWriter's bytes; the benchmark file would be wrong")
    assert _tfevents.scan(real, True, -1)[0] == len(real)


# ---------------------------------------------------------------- contenders (each runs in a subprocess)


def run_ingest(file: Path, work: Path) -> int:
    from ingest.run import ingest_run

    db = work / "bench.duckdb"
    for p in (db, Path(str(db) + ".wal")):
        p.unlink(missing_ok=True)
    ingest_run(file.parent, db)
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT count(*) FROM scalars").fetchone()[0]


def run_reader(file: Path, work: Path) -> int:
    from ingest.tensorboard import read_events

    return sum(len(c.scalars) for c in read_events(file) if c.scalars is not None)


def run_reader_duckdb(file: Path, work: Path) -> int:
    """The reader plus a bare DuckDB insert of the same rows into the store's own `scalars` table (the tag's
    code as series id; no series rows, sources, counts or histograms): the floor of the store path."""
    import duckdb
    import polars as pl

    from ingest.schema import TABLES
    from ingest.tensorboard import read_events

    db = work / "bare.duckdb"
    for p in (db, Path(str(db) + ".wal")):
        p.unlink(missing_ok=True)
    with duckdb.connect(str(db)) as con:
        con.execute(TABLES["scalars"])
        con.execute("BEGIN")
        for chunk in read_events(file):
            if chunk.scalars is not None:
                frame = chunk.scalars.select(  # noqa: F841
                    pl.col("tag").to_physical().cast(pl.Int32).alias("series_id"), pl.lit(1).alias("source_id"),
                    "position", "step", "value", "wall_time")
                con.execute("INSERT INTO scalars (series_id, source_id, position, step, value, wall_time) "
                            "SELECT * FROM frame")
        con.execute("COMMIT")
        return con.execute("SELECT count(*) FROM scalars").fetchone()[0]


def run_append_alone(file: Path, work: Path) -> int:
    """DuckDB's append alone: the reader's rows are gathered first, then only the bare insert into the store's
    `scalars` table is timed (its CPU seconds are reported as `part_cpu_s`): the store's share of the floor."""
    import duckdb
    import polars as pl

    from ingest.schema import TABLES
    from ingest.tensorboard import read_events

    frames = [c.scalars.select(pl.col("tag").to_physical().cast(pl.Int32).alias("series_id"),
                               pl.lit(1).alias("source_id"), "position", "step", "value", "wall_time")
              for c in read_events(file) if c.scalars is not None]
    db = work / "bare.duckdb"
    for p in (db, Path(str(db) + ".wal")):
        p.unlink(missing_ok=True)
    with duckdb.connect(str(db)) as con:
        con.execute(TABLES["scalars"])
        started = _cpu()
        con.execute("BEGIN")
        for frame in frames:
            con.execute("INSERT INTO scalars (series_id, source_id, position, step, value, wall_time) "
                        "SELECT * FROM frame")
        con.execute("COMMIT")
        PART["part_cpu_s"] = _cpu() - started
        return con.execute("SELECT count(*) FROM scalars").fetchone()[0]


def run_imports(file: Path, work: Path) -> int:
    """The interpreter and the imports `forensics ingest` needs before its first read: the floor's fixed part."""
    import duckdb  # noqa: F401
    import polars  # noqa: F401
    import pyarrow  # noqa: F401

    import ingest.run
    import ingest.tensorboard  # noqa: F401

    return 0


def _cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


PART: dict[str, float] = {}  # a contender's CPU seconds for the part it is about (DuckDB append alone)


def run_python_loop(file: Path, work: Path) -> int:
    import crc32c
    from tensorboard.compat.proto import event_pb2

    def masked(b):
        c = crc32c.crc32c(b)
        return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

    rows = []
    with file.open("rb") as f:
        while True:
            header = f.read(12)
            if len(header) < 12:
                break
            n = int.from_bytes(header[:8], "little")
            if masked(header[:8]) != int.from_bytes(header[8:], "little"):
                raise SystemExit("bad length CRC")
            data = f.read(n)
            if masked(data) != int.from_bytes(f.read(4), "little"):
                raise SystemExit("bad data CRC")
            event = event_pb2.Event.FromString(data)
            for v in event.summary.value:
                if v.WhichOneof("value") == "simple_value":
                    rows.append((v.tag, event.step, event.wall_time, v.simple_value))
    return len(rows)


def run_tbparse(file: Path, work: Path) -> int:
    from tbparse import SummaryReader

    return len(SummaryReader(str(file), pivot=False, extra_columns={"wall_time"}).scalars)


def run_accumulator(file: Path, work: Path) -> int:
    from tensorboard.backend.event_processing import event_accumulator as ea

    acc = ea.EventAccumulator(str(file), size_guidance={k: 0 for k in ea.DEFAULT_SIZE_GUIDANCE})
    acc.Reload()
    rows = [(tag, e.step, e.wall_time, e.value) for tag in acc.Tags()["scalars"] for e in acc.Scalars(tag)]
    return len(rows)


CONTENDERS = {
    "forensics ingest": run_ingest,
    "forensics reader": run_reader,
    "reader + DuckDB": run_reader_duckdb,
    "DuckDB append": run_append_alone,
    "imports": run_imports,
    "python loop": run_python_loop,
    "tbparse": run_tbparse,
    "EventAccumulator": run_accumulator,
}


def child(name: str, file: Path, work: Path) -> None:
    t = time.perf_counter()
    n = CONTENDERS[name](file, work)
    seconds = time.perf_counter() - t
    # VmHWM is this interpreter's own peak (ru_maxrss would include the parent's pages from before exec).
    status = Path("/proc/self/status").read_text()
    peak_kb = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))
    print(json.dumps({"seconds": seconds, "scalars": n, "peak_kb": peak_kb, **PART}))


def measure(name: str, file: Path, work: Path) -> dict:
    """Run one contender in a fresh interpreter; its import time is included, its peak RSS is its own."""
    proc = subprocess.Popen([sys.executable, __file__, "--child", name, "--file", str(file), "--dir", str(work)],
                            stdout=subprocess.PIPE, cwd=REPO)
    started = time.perf_counter()
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed (status {proc.returncode})")
    result = json.loads(out.decode().strip().splitlines()[-1])
    # CPU seconds (user + system, every thread) move less with the neighbours' load than wall time does.
    return {"name": name, "wall_s": wall, "seconds": result["seconds"], "scalars": result["scalars"],
            "peak_mb": result["peak_kb"] / 1024, "cpu_s": usage.ru_utime + usage.ru_stime,
            "load": os.getloadavg()[0], "part_cpu_s": result.get("part_cpu_s")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scalars", type=int, default=10_000_000)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/tb_bench"))
    parser.add_argument("--only", help="comma-separated contenders (default: all)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.file, args.dir)
        return 0
    run_dir = args.dir / f"run_{args.scalars}_{N_TAGS}tags_hist{HIST_EVERY}"
    file = run_dir / "events.out.tfevents.1700000000.bench.1.0"
    args.dir.mkdir(parents=True, exist_ok=True)
    check_against_summarywriter(args.dir)
    if not file.exists():
        run_dir.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        partial = file.with_suffix(".partial")  # not named like an event file until complete
        info = write_event_file(partial, args.scalars)
        partial.rename(file)
        print(f"wrote {file}: {info['scalars']:,} scalars, {info['histograms']:,} histograms, "
              f"{info['bytes'] / 1e6:.0f} MB in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    size = file.stat().st_size
    names = args.only.split(",") if args.only else list(CONTENDERS)
    results = []
    for name in names:
        r = measure(name, file, args.dir)
        results.append(r)
        print(f"  {name}: {r['wall_s']:.2f} s", file=sys.stderr)
    base = next((r for r in results if r["name"] == "tbparse"), None)
    print(f"\n{size / 1e6:.0f} MB event file, {results[0]['scalars']:,} scalars; wall time includes interpreter "
          "start and imports\n")
    print(f"| {'contender':<18} | {'wall s':>7} | {'in-process s':>12} | {'CPU s':>6} | {'M scalars/s':>11} "
          f"| {'peak RSS MB':>11} | {'x tbparse':>9} | {'load':>5} |")
    print(f"|{'-' * 20}|{'-' * 9}|{'-' * 14}|{'-' * 8}|{'-' * 13}|{'-' * 13}|{'-' * 11}|{'-' * 7}|")
    for r in results:
        rate = r["scalars"] / r["wall_s"] / 1e6
        ratio = f"{base['wall_s'] / r['wall_s']:.1f}" if base else "-"
        print(f"| {r['name']:<18} | {r['wall_s']:>7.2f} | {r['seconds']:>12.2f} | {r['cpu_s']:>6.2f} | {rate:>11.3f} | "
              f"{r['peak_mb']:>11.0f} | {ratio:>9} | {r['load']:>5.1f} |")
    for r in results:
        if r["part_cpu_s"] is not None:
            print(f"\n{r['name']}: the insert alone {r['part_cpu_s']:.2f} CPU s "
                  f"({r['scalars'] / r['part_cpu_s'] / 1e6:.2f} M rows per CPU second)")
    floor = next((r for r in results if r["name"] == "reader + DuckDB"), None)
    ingest = next((r for r in results if r["name"] == "forensics ingest"), None)
    if floor and ingest:
        print(f"\nforensics ingest / its floor (reader + bare insert of the same rows): wall "
              f"{ingest['wall_s'] / floor['wall_s']:.2f}x, CPU {ingest['cpu_s'] / floor['cpu_s']:.2f}x")
    print(f"\nM scalars/s and x tbparse use wall time; load is the 1-minute load average as each contender ended "
          f"(machine of {os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
