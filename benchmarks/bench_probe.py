"""`forensics probe`'s checks, each timed against a plain training step of the same model in the same process.

The run is written here with forensics.capture (step-0 checkpoint, the first 4 batches, a checkpoint every 10
steps, 20 steps of training): the gallery's tiny causal transformer (default d=256, 4 layers, 16 x 128 tokens,
AdamW at 1e-3) on a learnable next-token task (each row counts up modulo the vocabulary from a random start), so
the overfit check memorises its batch and stops early, as on a healthy run. Checks run as `forensics probe` runs
them, sharing one Context (the watched forward each check reuses is paid by the first that asks):
    plain step          forward + backward + AdamW step (the unit)
    input_scale ... lr_range   each check's `check(ctx)` (forensics/usercode/probe/<check>.py)
Each is timed as process CPU time (what it computes, robust to other processes on a shared machine) and wall
time; medians over --repeat rounds, ratios are CPU-time medians over the plain step's (wall on CUDA, where the
CPU waits). The last line sums all checks, in plain steps (goal: <= 300).

    python benchmarks/bench_probe.py [--d 256] [--layers 4] [--batch 16] [--seq 128] [--repeat 3] [--device cpu]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ENTRY = '''
import torch
from sample_runs.gen.models import TinyTransformer


def build_model(config):
    torch.manual_seed(0)
    return TinyTransformer(vocab=config["vocab"], d=config["d"], heads=4, layers=config["layers"], seq=config["seq"])


def loss_fn(model, batch):
    logits = model(batch["input_ids"])
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten())


def build_optimizer(model, config):
    return torch.optim.AdamW(model.parameters(), lr=config["lr"])
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1,
                    help="CPU threads (default 1: idle OpenMP threads spin, which CPU time would count as work)")
    a = ap.parse_args()

    import torch

    from forensics.capture import Capture
    from forensics.usercode.probe import CHECKS
    from forensics.usercode.probe.context import Context
    from forensics.usercode.kit.entry import ENTRY_NAME
    from forensics.judge.run import Run
    from ingest.run import ingest_run
    from ingest.store import connect

    warnings.filterwarnings("ignore")
    torch.set_num_threads(a.threads)
    tmp = Path(tempfile.mkdtemp(prefix="bench_probe_"))
    run_dir, db = tmp / "run", tmp / "f.duckdb"
    run_dir.mkdir()
    (run_dir / ENTRY_NAME).write_text(ENTRY)
    ns: dict = {}
    exec(ENTRY, ns)
    vocab = 16
    config = {"vocab": vocab, "d": a.d, "layers": a.layers, "seq": a.seq, "lr": 1e-3}
    device = torch.device(a.device)
    model = ns["build_model"](config).to(device).train()
    opt = ns["build_optimizer"](model, config)
    cap = Capture(run_dir, config=config, every=10, model=model, optimizer=opt)
    g = torch.Generator().manual_seed(0)

    def make_batch():
        start = torch.randint(0, vocab, (a.batch, 1), generator=g)
        tokens = (start + torch.arange(a.seq + 1)) % vocab
        return {"input_ids": tokens[:, :-1].contiguous(), "labels": tokens[:, 1:].contiguous()}

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def plain(batch):
        opt.zero_grad(set_to_none=True)
        loss = ns["loss_fn"](model, batch)
        loss.backward()
        opt.step()
        return loss

    for step in range(1, 21):
        batch = make_batch()
        loss = plain({k: v.to(device) for k, v in batch.items()})
        cap.step(step, batch, loss, None, model, opt)
    report = ingest_run(run_dir, db, progress=None)
    with connect(db, write=False) as con:
        run = Run.from_store(con, report.run_id)

    one = {k: v.to(device) for k, v in make_batch().items()}

    def timed(fn):
        sync()
        c, w = time.process_time(), time.perf_counter()
        out = fn()
        sync()
        return time.process_time() - c, time.perf_counter() - w, out

    names = ["plain step"] + [c.name for c in CHECKS]
    times: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    statuses = {}
    timed(lambda: plain(one))  # warm up kernels and the allocator
    for _ in range(a.repeat):
        for _ in range(5):
            c, w, _ = timed(lambda: plain(one))
            times["plain step"].append((c, w))
        ctx = Context.open(run, run_dir, run_dir / ENTRY_NAME, a.device)  # a fresh context: nothing cached
        for check in CHECKS:
            c, w, res = timed(lambda check=check: check.check(ctx))
            times[check.name].append((c, w))
            statuses[check.name] = f"{res['status']}: {res['summary'][:300]}"

    use_wall = device.type == "cuda"
    med = {n: (statistics.median(t[0] for t in v), statistics.median(t[1] for t in v)) for n, v in times.items()}
    unit = med["plain step"][1 if use_wall else 0]
    params = sum(p.numel() for p in model.parameters())
    print(f"model: TinyTransformer d={a.d} layers={a.layers}, {params / 1e6:.2f}M parameters; batch {a.batch} x {a.seq} "
          f"tokens; AdamW 1e-3; device {device}; torch {torch.__version__}; threads {a.threads}; median of {a.repeat}")
    print("| check | CPU s | wall s | x plain step |")
    print("|---|---:|---:|---:|")
    total_c = total_w = 0.0
    for n in names:
        c, w = med[n]
        if n != "plain step":
            total_c, total_w = total_c + c, total_w + w
        print(f"| {n} | {c:.4f} | {w:.4f} | {(w if use_wall else c) / unit:.2f} |")
    total = total_w if use_wall else total_c
    print(f"| **all checks (sum)** | {total_c:.4f} | {total_w:.4f} | **{total / unit:.1f}** (goal <= 300) |")
    for n, s in statuses.items():
        print(f"  {n}: {s}")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
