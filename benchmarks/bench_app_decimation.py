"""Benchmark: one app chart of a 10M-point series, M4 in DuckDB against loading the series whole and plotting it.

    python benchmarks/bench_app_decimation.py                    # 10M points (~100 MB DuckDB file under /tmp)
    python benchmarks/bench_app_decimation.py --points 2000000 --db /tmp/app_bench.duckdb

The series is generated straight into a store with the project's schema by one SQL statement: a decaying loss
with noise, 20 spikes, a NaN stretch and a non-finite tail; the spikes are also written to the `spikes` table, as
`forensics analyze` would, so the query keeps them as the app does. Each side runs in a fresh subprocess, so
its peak memory (max RSS) is its own:

- app: what a chart costs the app: open the store read-only, `ingest.queries.app_m4` over the whole step range
  (and over a 1% zoom) at 1,000 / 2,000 / 4,000 pixel columns, close; then `app.charts.series_figure` and the
  figure's JSON (what Streamlit sends to the browser). Median of 5 runs, the first (cold) run shown too, and
  the query alone repeated on one open connection (warm q: DuckDB's buffers already hold the series; the app
  never holds a connection, DECISIONS.md §5, so a fresh one pays for reading the columns again).
- peer: the same series loaded whole into Python (DuckDB → Arrow → numpy), a plotly figure of all its points
  and that figure's JSON.

Prints seconds, points drawn, peak RSS, the peer / app time ratio, and checks that every spike and the first
non-finite step are among the drawn points. Goal: under 0.5 s per chart.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

N_SPIKES = 20


def build(db: Path, n: int) -> None:
    """A store holding one run with one `n`-point loss series and its spike rows."""
    from ingest.store import connect

    db.unlink(missing_ok=True)
    nan_from, nan_to, tail = int(n * 0.61), int(n * 0.61) + 500, int(n * 0.97)
    spike_every = n // (N_SPIKES + 1)
    with connect(db, write=True) as con:
        con.execute("INSERT INTO runs (run_id, name, root, first_ingested, last_ingested) "
                    "VALUES ('bench', 'bench', '/bench', now(), now())")
        con.execute("INSERT INTO sources (source_id, run_id, path, format, grp) "
                    "VALUES (1, 'bench', 'metrics.parquet', 'parquet', '')")
        con.execute("INSERT INTO series (series_id, run_id, grp, tag, format, name, role, split, canonical) "
                    "VALUES (1, 'bench', '', 'loss', 'parquet', 'loss', 'train_loss', 'train', true)")
        con.execute(f"""
            INSERT INTO scalars (series_id, source_id, position, step, value)
            SELECT 1, 1, i, i,
                   CASE WHEN i >= {tail} THEN 'NaN'::DOUBLE
                        WHEN i BETWEEN {nan_from} AND {nan_to} THEN 'NaN'::DOUBLE
                        WHEN i = {nan_to + 1} THEN 'Infinity'::DOUBLE
                        ELSE (0.3 + 2.0 * exp(-8.0 * i / {n})) * (1 + 0.05 * sin(i * 12.9898) * cos(i * 0.61))
                             * CASE WHEN i % {spike_every} = 7 AND i > 7 THEN 6 ELSE 1 END END
            FROM range({n}) t(i)""")
        con.execute("""UPDATE series SET n_points = (SELECT count(*) FROM scalars WHERE series_id = 1),
                       n_nonfinite = (SELECT count(*) FROM scalars WHERE series_id = 1 AND NOT isfinite(value)),
                       first_step = 0, last_step = (SELECT max(step) FROM scalars WHERE series_id = 1)""")
        con.execute("INSERT INTO analyses (analysis_id, run_id, created, healthy) VALUES (1, 'bench', now(), false)")
        con.execute(f"""INSERT INTO spikes (analysis_id, run_id, series, step, value, baseline, z)
                        SELECT 1, 'bench', 'loss', step, value, value / 6, 20 FROM scalars
                        WHERE series_id = 1 AND step % {spike_every} = 7 AND step > 7 AND isfinite(value)""")


APP_SIDE = """
import json, resource, statistics, sys, time
from pathlib import Path
sys.path.insert(0, {repo!r})
from app import charts
from ingest import queries
from ingest.store import connect

db, n = Path({db!r}), {n}
out = {{}}
with connect(db, write=False) as con:
    spikes = set(r[0] for r in con.execute("SELECT step FROM spikes").fetchall())
    first = con.execute("SELECT min(step) FROM scalars WHERE NOT isfinite(value)").fetchone()[0]

def chart(lo, hi, px):
    t0 = time.perf_counter()
    with connect(db, write=False) as con:
        pts = queries.app_m4(con, 1, lo, hi, px, 1, "loss")
    t1 = time.perf_counter()
    fig = charts.series_figure("loss", [{{"name": "loss", "colour": charts.TRAIN, "points": pts}}], lo, hi)
    payload = fig.to_json()
    t2 = time.perf_counter()
    return pts, t1 - t0, t2 - t1, len(payload)

for px in (1000, 2000, 4000):
    for label, lo, hi in (("all", 0, n - 1), ("zoom 1%", int(n * 0.6), int(n * 0.61) + 1000)):
        times = []
        for _ in range(5):
            pts, q, f, size = chart(lo, hi, px)
            times.append((q, f))
        with connect(db, write=False) as con:  # the same query on a connection whose buffers are warm
            warm = []
            for _ in range(5):
                t0 = time.perf_counter()
                queries.app_m4(con, 1, lo, hi, px, 1, "loss")
                warm.append(time.perf_counter() - t0)
        steps = set(pts["step"].to_list())
        kept = all(s in steps for s in spikes if lo <= s <= hi) and (not lo <= first <= hi or first in steps)
        out[f"{{px}} {{label}}"] = {{
            "cold_s": times[0][0] + times[0][1],
            "query_s": statistics.median(t[0] for t in times), "figure_s": statistics.median(t[1] for t in times),
            "warm_query_s": statistics.median(warm),
            "points": pts.height, "json_bytes": size, "evidence_kept": kept}}
out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""

PEER_SIDE = """
import json, resource, sys, time
from pathlib import Path
import warnings
sys.path.insert(0, {repo!r})
import plotly.graph_objects as go
from ingest.store import connect

db = Path({db!r})
t0 = time.perf_counter()
with connect(db, write=False) as con, warnings.catch_warnings():
    warnings.simplefilter("ignore")
    table = con.execute("SELECT step, value FROM scalars WHERE series_id = 1 ORDER BY step").to_arrow_table()
steps, values = table["step"].to_numpy(), table["value"].to_numpy()
t1 = time.perf_counter()
fig = go.Figure(go.Scatter(x=steps, y=values, mode="lines"))
payload = fig.to_json()
t2 = time.perf_counter()
print(json.dumps({{"load_s": t1 - t0, "figure_s": t2 - t1, "points": len(steps), "json_bytes": len(payload),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def side(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=False)
    if done.returncode != 0:
        sys.exit(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=10_000_000)
    parser.add_argument("--db", type=Path, default=Path("/tmp/bench_app_decimation.duckdb"))
    parser.add_argument("--no-peer", action="store_true", help="skip loading and plotting the whole series")
    args = parser.parse_args()

    t0 = time.perf_counter()
    build(args.db, args.points)
    print(f"built {args.points:,} points in {time.perf_counter() - t0:.1f} s: {args.db} "
          f"({args.db.stat().st_size / 1e6:.0f} MB)")
    app = side(APP_SIDE.format(repo=str(REPO), db=str(args.db), n=args.points))
    print(f"\napp: open read-only, M4 query, close; then the plotly figure and its JSON "
          f"(median of 5; peak RSS {app['peak_rss_mb']:.0f} MB)")
    print(f"{'pixels':>7} {'range':<8} {'query s':>8} {'figure s':>9} {'total s':>8} {'cold s':>7} "
          f"{'warm q s':>8} {'points':>7} {'JSON KB':>8}  evidence kept")
    for key, r in app.items():
        if key == "peak_rss_mb":
            continue
        px, label = key.split(" ", 1)
        print(f"{px:>7} {label:<8} {r['query_s']:>8.3f} {r['figure_s']:>9.3f} {r['query_s'] + r['figure_s']:>8.3f} "
              f"{r['cold_s']:>7.3f} {r['warm_query_s']:>8.3f} {r['points']:>7,} {r['json_bytes'] / 1e3:>8.0f}  "
              f"{r['evidence_kept']}")
    if args.no_peer:
        return
    peer = side(PEER_SIDE.format(repo=str(REPO), db=str(args.db)))
    total = peer["load_s"] + peer["figure_s"]
    print(f"\npeer: load the whole series into numpy, plot every point: load {peer['load_s']:.2f} s + figure and "
          f"JSON {peer['figure_s']:.2f} s = {total:.2f} s; {peer['points']:,} points, "
          f"{peer['json_bytes'] / 1e6:.0f} MB of JSON; peak RSS {peer['peak_rss_mb']:.0f} MB")
    worst = max(r["query_s"] + r["figure_s"] for k, r in app.items() if k != "peak_rss_mb")
    print(f"ratio peer / app (slowest app chart): {total / worst:.0f}x time, "
          f"{peer['peak_rss_mb'] / app['peak_rss_mb']:.1f}x peak memory")


if __name__ == "__main__":
    main()
