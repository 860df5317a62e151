"""Checkpoint statistics over a ≥ 2 GB checkpoint: streaming reader vs naive `torch.load` + per-tensor loop.

Writes one checkpoint per format to a temporary folder (default /tmp; deleted afterwards), then measures,
each in a fresh subprocess so that peaks do not mix:
    ours    ingest.checkpoints.read_checkpoint: safetensors read by byte range slice by slice, torch files
            memory-mapped (`torch.load(mmap=True, weights_only=True)`), float64 statistics per slice
    naive   torch.load(weights_only=True) (safetensors.torch.load_file for safetensors), then per tensor
            t.double() and the same statistics on the whole tensor
Reported per run: wall time, peak RSS (getrusage's ru_maxrss: every resident page, file-backed mmap pages
included), peak anonymous RSS (RssAnon sampled every 5 ms: memory the process actually needs, since clean
file pages can be dropped by the kernel at any time), both after subtracting the process's RSS once torch
is imported. Finally the ratios naive / ours. Run once or twice, not in a loop: it reads 4+ GB per format.

    python benchmarks/bench_checkpoint_stats.py [--gb 2.1] [--formats torch,safetensors] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[1]


def rss_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def write_checkpoint(path: Path, fmt: str, gb: float) -> None:
    """A state_dict of fp32 4096×4096 matrices plus bf16 ones and small vectors, totalling `gb` GB."""
    import torch

    torch.manual_seed(0)
    sd: dict = {}
    total, i = 0, 0
    while total < gb * 1e9:
        if i % 4 == 3:
            t = torch.randn(4096, 4096).to(torch.bfloat16)
        else:
            t = torch.randn(4096, 4096) * 0.02
        sd[f"layers.{i}.weight"] = t
        sd[f"layers.{i}.bias"] = torch.zeros(4096)
        total += t.numel() * t.element_size() + 4096 * 4
        i += 1
    sd["layers.0.weight"][0, 0] = float("nan")  # one NaN: both must count it
    if fmt == "safetensors":
        from safetensors.torch import save_file

        save_file(sd, path, metadata={"step": "1000"})
    else:
        torch.save({"model": sd, "step": 1000}, path)


def naive_stats(t) -> dict:
    import torch

    x = t.reshape(-1).double()
    fin = x[torch.isfinite(x)]
    return {"numel": x.numel(), "l2": float(fin.norm()), "mean": float(fin.mean()), "std": float(fin.std(correction=0)),
            "min": float(fin.min()), "max": float(fin.max()), "abs_max": float(fin.abs().max()),
            "zero_fraction": float((x == 0).double().mean()), "n_nan": int(torch.isnan(x).sum()),
            "n_inf": int(torch.isinf(x).sum())}


def child(mode: str, path: Path, fmt: str) -> None:
    import torch

    sys.path.insert(0, str(ROOT))
    from ingest.checkpoints import find_checkpoints, read_checkpoint

    base = rss_kib("VmRSS")
    peak_anon = [rss_kib("RssAnon")]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.005):
            peak_anon[0] = max(peak_anon[0], rss_kib("RssAnon"))

    threading.Thread(target=sample, daemon=True).start()
    base_anon = peak_anon[0]
    t0 = time.perf_counter()
    if mode == "ours":
        [found] = find_checkpoints([PurePosixPath(path.name)])
        read = read_checkpoint(path.parent, found)
        assert read.row["status"] == "ok", read.row
        n_nan = int(read.stats["n_nan"].sum())
        l2 = {r["tensor"]: r["l2"] for r in read.stats.iter_rows(named=True)}
    else:
        if fmt == "safetensors":
            from safetensors.torch import load_file

            sd = load_file(path)
        else:
            sd = torch.load(path, map_location="cpu", weights_only=True)["model"]
        rows = {name: naive_stats(t) for name, t in sd.items()}
        n_nan = sum(r["n_nan"] for r in rows.values())
        l2 = {name: r["l2"] for name, r in rows.items()}
    elapsed = time.perf_counter() - t0
    stop.set()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": elapsed, "peak_rss_mib": (peak - base) / 1024,
                      "peak_anon_mib": (peak_anon[0] - base_anon) / 1024, "n_nan": n_nan, "l2": l2}))


def measure(mode: str, path: Path, fmt: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", mode, "--path", str(path), "--format", fmt],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=2.1)
    ap.add_argument("--formats", default="torch,safetensors")
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--child", choices=["ours", "naive"])
    ap.add_argument("--path", type=Path)
    ap.add_argument("--format", default="torch")
    args = ap.parse_args()
    if args.child:
        child(args.child, args.path, args.format)
        return
    for fmt in args.formats.split(","):
        folder = Path(tempfile.mkdtemp(prefix="bench_ckpt_", dir=args.dir))
        try:
            path = folder / ("model.safetensors" if fmt == "safetensors" else "model.pt")
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
                            f"from benchmarks.bench_checkpoint_stats import write_checkpoint as w; "
                            f"from pathlib import Path; w(Path({str(path)!r}), {fmt!r}, {args.gb})"], check=True)
            size = path.stat().st_size
            print(f"{fmt}: wrote {size / 1e9:.2f} GB in {time.perf_counter() - t0:.1f} s", flush=True)
            naive = measure("naive", path, fmt)
            ours = measure("ours", path, fmt)
            assert naive["n_nan"] == ours["n_nan"] == 1
            worst = max(abs(ours["l2"][k] - v) / max(abs(v), 1e-300) for k, v in naive["l2"].items())
            assert worst < 1e-9, worst
            for name, r in (("naive", naive), ("ours", ours)):
                print(f"  {name:5s}  {r['seconds']:6.1f} s   peak RSS +{r['peak_rss_mib']:7.0f} MiB   "
                      f"peak anonymous +{r['peak_anon_mib']:7.0f} MiB")
            print(f"  ratio naive/ours: time {naive['seconds'] / ours['seconds']:.2f}x, peak RSS "
                  f"{naive['peak_rss_mib'] / max(ours['peak_rss_mib'], 1):.1f}x, peak anonymous "
                  f"{naive['peak_anon_mib'] / max(ours['peak_anon_mib'], 1):.1f}x; l2 agree to {worst:.1e}",
                  flush=True)
        finally:
            shutil.rmtree(folder)


if __name__ == "__main__":
    main()
