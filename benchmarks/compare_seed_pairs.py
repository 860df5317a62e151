"""`forensics compare`'s seed band against healthy replica pairs: two seeds of one healthy recipe must never part.

    python -m corpus.generate --out /work/corpus_data --split calib --jobs 2
    python benchmarks/compare_seed_pairs.py /work/corpus_data/calib --db /tmp/pairs.duckdb

Each `<recipe>_r2` / `<recipe>_r3` pair is compared both ways (each run as the failed one) with the constants of
`forensics.services.compare`; for each, whether they part, and the smallest SEED_BAND (as a factor) that keeps
them together with the noise band off: the band must sit above the largest of these (docs/engine.md, "compare").
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def smallest_band(compare, a, b) -> float:
    """The smallest SEED_BAND factor under which `a` does not part from `b` with BAND_SIGMAS at 0 (bisection)."""
    saved = compare.SEED_BAND, compare.BAND_SIGMAS
    lo, hi = 0.0, 8.0
    try:
        compare.BAND_SIGMAS = 0.0
        for _ in range(30):
            compare.SEED_BAND = (lo + hi) / 2
            if compare.part(a[1], a[2], b[1], b[2]).step is None:
                hi = compare.SEED_BAND
            else:
                lo = compare.SEED_BAND
    finally:
        compare.SEED_BAND, compare.BAND_SIGMAS = saved
    return math.exp(hi)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="a folder of corpus runs holding _r2/_r3 pairs")
    parser.add_argument("--db", type=Path, required=True, help="DuckDB file the runs are ingested into")
    args = parser.parse_args()

    from forensics.judge.run import Run
    from forensics.services import compare
    from ingest.run import ingest_run
    from ingest.store import connect

    pairs = sorted(d.name[:-3] for d in args.root.iterdir() if d.name.endswith("_r2") and (args.root / (d.name[:-3] + "_r3")).is_dir())
    ids = {name: ingest_run(args.root / name, args.db).run_id for base in pairs for name in (base + "_r2", base + "_r3")}
    rows = []
    with connect(args.db, write=False) as con:
        for base in pairs:
            a, b = (compare._curves(Run.from_store(con, ids[base + s]), "loss") for s in ("_r2", "_r3"))
            if a is None or b is None:
                continue
            for x, y, way in ((a, b, "r2|r3"), (b, a, "r3|r2")):
                p = compare.part(x[1], x[2], y[1], y[2])
                rows.append((smallest_band(compare, x, y), base, way, p.step, p.aligned_points))
    for band, base, way, step, points in sorted(rows, reverse=True)[:10]:
        print(f"{base} {way}: parts at {step}; needs a seed band of x{band:.3f} ({points} aligned points)")
    print(f"parted: {sum(r[3] is not None for r in rows)} of {len(rows)} directed pairs; seed band "
          f"x{math.exp(compare.SEED_BAND):.2f}, largest needed x{max(r[0] for r in rows):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
