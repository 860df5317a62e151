"""Regenerate the development corpus: `python -m corpus.generate --out DIR [--split tune|holdout] [--only ...] [--jobs N]`.

Each run is trained on the CPU (one thread, deterministic algorithms) from its RunSpec (corpus/spec.py) and labelled
from its own logged numbers (corpus/label.py); DIR/<split>/<run>/labels.json holds its labels and DIR/index.json
all of them. The same spec gives the same values; file names that embed the real time (TensorBoard, W&B) differ.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import shutil
import sys
import time
from pathlib import Path


def _one(args) -> tuple[str, dict | None, str, float]:
    name, out = args
    import os
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch
    torch.set_num_threads(1)
    from corpus.build import build_run
    from corpus.spec import all_specs
    spec = next(s for s in all_specs() if s.name == name)
    root = Path(out) / spec.split / spec.name
    shutil.rmtree(root, ignore_errors=True)
    t = time.perf_counter()
    try:
        return name, build_run(spec, root), "", time.perf_counter() - t
    except Exception as e:  # noqa: BLE001 - one failed run is reported and the others go on
        import traceback
        return name, None, "".join(traceback.format_exception(e))[-2000:], time.perf_counter() - t


def select(specs, split: str | None, only: list[str] | None):
    out = [s for s in specs if split in (None, "all", s.split)]
    if only:
        out = [s for s in out if any(s.name == o or s.variant == o or s.name.startswith(o) for o in only)]
    return out


def main(argv: list[str] | None = None) -> int:
    from corpus.spec import all_specs
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                epilog="example: python -m corpus.generate --out /tmp/corpus --split tune --jobs 2")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--split", choices=("tune", "holdout", "calib", "holdout2", "holdout3", "holdout4", "holdout5", "holdout6", "holdout7", "holdout8", "holdout9", "all"), default="all")
    p.add_argument("--only", nargs="*", default=None, help="run names, variants or name prefixes")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--list", action="store_true", help="print the selected run names and exit")
    p.add_argument("--relabel", action="store_true",
                   help="re-apply the labelling rules to runs already in --out (no training)")
    a = p.parse_args(argv)
    specs = select(all_specs(), a.split, a.only)
    if not specs:
        print("no run matches --split/--only", file=sys.stderr)
        return 2
    if a.list:
        for s in specs:
            print(s.split, s.name)
        return 0
    a.out.mkdir(parents=True, exist_ok=True)
    index_path = a.out / "index.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {"version": 1, "runs": {}}
    if a.relabel:
        from corpus.build import relabel
        for s in specs:
            root = a.out / s.split / s.name
            if (root / "labels.json").exists():
                index["runs"][s.name] = relabel(s, root)
        index_path.write_text(json.dumps(index, indent=1, allow_nan=False) + "\n")
        print(f"relabelled {sum((a.out / s.split / s.name / 'labels.json').exists() for s in specs)} run(s)", file=sys.stderr)
        return 0
    failed = []
    jobs = [(s.name, str(a.out)) for s in specs]
    t0 = time.perf_counter()
    if a.jobs > 1:
        ctx = mp.get_context("spawn")
        with ctx.Pool(a.jobs, maxtasksperchild=25) as pool:
            results = pool.imap_unordered(_one, jobs)
            failed = _collect(results, index, len(jobs), t0)
    else:
        failed = _collect(map(_one, jobs), index, len(jobs), t0)
    order = {s.name: i for i, s in enumerate(all_specs())}
    index["runs"] = dict(sorted(index["runs"].items(), key=lambda kv: order.get(kv[0], 10**6)))
    index_path.write_text(json.dumps(index, indent=1, allow_nan=False) + "\n")
    if failed:
        print(f"{len(failed)} run(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _collect(results, index, n, t0) -> list[str]:
    failed = []
    for i, (name, labels, err, dt) in enumerate(results, 1):
        if labels is None:
            failed.append(name)
            print(f"[{i}/{n}] {name}: FAILED\n{err}", file=sys.stderr)
        else:
            index["runs"][name] = labels
            kinds = ",".join(k["kind"] for k in labels["kinds"]) or "healthy"
            print(f"[{i}/{n}] {name}: {kinds} ({dt:.1f} s, {time.perf_counter() - t0:.0f} s total)", file=sys.stderr)
    return failed


if __name__ == "__main__":
    sys.exit(main())
