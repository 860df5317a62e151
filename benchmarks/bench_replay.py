"""Replay's phases, each timed against a plain training step of the same model in the same process.

The model is the gallery's tiny causal transformer grown to GPT-like shapes (default d=256, 4 layers, 16 x 128
tokens, AdamW + clipping at 1.0) with the hand-written norm whose eps sits outside the sqrt, and a batch whose
rows 3 and 11 are padded: the forward is finite and the backward NaN, so every phase does its real work
(backward instrumentation, per-sample gradients, bisection is not needed). Phases, as `forensics replay` runs
them after the fidelity re-execution:
    plain step          forward + backward + clip + AdamW step (the unit)
    replayed step       run_step with the state snapshot replay takes before each step
    re-run              the failing step once more from the snapshot (restore + step)
    instr. forward      TorchFunctionMode over every torch call + module stack hooks (a forward failure stops here)
    instr. step         one recorded forward (ops checked, autograd nodes mapped to ops and modules) + a backward
                        with a hook on every grad_fn node: what a backward failure costs
    culprits (vmap)     per-sample losses + per-sample gradient norms via torch.func vmap(grad)
    culprits (B runs)   the naive peer: one forward+backward per sample
    counterfactuals     the changes over a one-step window (each further step of a window costs as much again),
                        each from the snapshot; a change that is what the run already did is reported from the
                        re-run instead of re-run (here fp32, as there is no autocast, and clip_1.0, as the run clips
                        at 1.0), eps_default does not apply (AdamW's default eps): so 2 steps here
    detect_anomaly      forward + backward under torch.autograd.detect_anomaly(check_nan=True), the folklore peer
Then the whole process, as a user meets it: `forensics replay` of the gallery's nan_sqrt_norm (the store already
holding it) timed beside `python -c "import torch"`, alternating, wall time, median of --repeat (goal: <= 2x; the
determinism flags are set without importing torch's compiler stack, forensics/usercode/replay/determinism.py). Phases run round-robin (each repeat times every phase once), so load on a shared machine drifts over all of them
alike; each is timed as process CPU time (what the phase computes, robust to other processes on the machine) and
wall time. Medians over --repeat rounds; ratios are CPU-time medians over the plain step's. The last line sums
what a replay spends after fidelity (re-run + instrumented step + culprits by vmap + counterfactuals), in plain steps.

    python benchmarks/bench_replay.py [--d 256] [--layers 4] [--batch 16] [--seq 128] [--repeat 5] [--device cpu]
                                      [--whole-process-only] [--run sample_runs/runs/nan_sqrt_norm] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1,
                    help="CPU threads (default 1: idle OpenMP threads spin, which CPU time would count as work)")
    ap.add_argument("--whole-process-only", action="store_true", help="only the whole-process comparison")
    ap.add_argument("--run", type=Path, default=ROOT / "sample_runs" / "runs" / "nan_sqrt_norm",
                    help="the run the whole-process comparison replays")
    ap.add_argument("--baseline", type=Path, help="another checkout whose replay is timed in the same rounds")
    a = ap.parse_args()
    whole_process(a.run, a.repeat, a.device, a.baseline)
    if a.whole_process_only:
        return

    import torch

    from forensics.usercode.replay import counterfactuals, culprits, instrument
    from forensics.usercode.kit.entry import StepOptions
    from forensics.usercode.kit.restore import State
    from forensics.usercode.replay.state import restore, run_step, snapshot
    from sample_runs.gen.models import TinyTransformer

    warnings.filterwarnings("ignore")
    torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    torch.manual_seed(0)
    pad, vocab = 15, 16
    model = TinyTransformer(vocab=vocab, d=a.d, heads=4, layers=a.layers, seq=a.seq, norm="custom", pad_idx=pad)
    model.to(device).train()
    tokens = torch.randint(0, pad, (a.batch, a.seq + 1))
    tokens[[3, 11], a.seq // 2:] = pad
    batch = {"input_ids": tokens[:, :-1].contiguous().to(device), "labels": tokens[:, 1:].contiguous().to(device)}

    def loss_fn(m, b):
        logits = m(b["input_ids"])
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), b["labels"].flatten(), ignore_index=pad)

    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    entry = SimpleNamespace(loss_fn=loss_fn)
    st = State(entry, {}, StepOptions(max_grad_norm=1.0), model, opt, None, None, device, ["model"], [])
    # one finite warm-up step on an unpadded batch so that AdamW has state, then the snapshot replay would hold
    clean = {"input_ids": tokens[:, :-1].clamp(max=pad - 1).to(device), "labels": tokens[:, 1:].clamp(max=pad - 1).to(device)}
    run_step(st, clean)
    snap = snapshot(st)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def once(fn):
        restore(st, snap)
        sync()
        c, w = time.process_time(), time.perf_counter()
        fn()
        sync()
        return time.process_time() - c, time.perf_counter() - w

    def plain():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model, clean)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    def replayed():
        snapshot(st)
        run_step(st, clean)

    def rerun():
        restore(st, snap)
        run_step(st, batch)

    def anomaly():
        opt.zero_grad(set_to_none=True)
        with torch.autograd.detect_anomaly(check_nan=True):
            loss = loss_fn(model, batch)
            try:
                loss.backward()
            except RuntimeError:
                pass

    def loop_culprits():
        for i in range(a.batch):
            opt.zero_grad(set_to_none=True)
            loss_fn(model, {k: v[i:i + 1] for k, v in batch.items()}).backward()

    restore(st, snap)
    base_out = run_step(st, batch)  # the re-run's result, which no-op counterfactuals (fp32 here) report
    found = {}
    phases = [
        ("plain step", plain),
        ("replayed step (with snapshot)", replayed),
        ("re-run of the failing step", rerun),
        ("instrumented forward only", lambda: instrument.first_nonfinite_forward(st, batch)),
        ("instrumented step (forward + backward)", lambda: found.setdefault("b", instrument.locate(st, batch, "backward"))),
        ("culprits: vmap per-sample", lambda: found.setdefault("c", culprits.find_culprits(st, batch, "backward"))),
        (f"culprits: {a.batch} single-sample runs", loop_culprits),
        ("counterfactuals (one-step window)", lambda: counterfactuals.try_changes(
            st, snap, [1], lambda s: batch, [3, 11], baseline={1: base_out}, phase="backward")),
        ("detect_anomaly(check_nan=True) fwd+bwd", anomaly),
    ]
    for _, fn in phases:  # warm up kernels, allocator, vmap's caches
        once(fn)
    times = {name: [] for name, _ in phases}
    for _ in range(a.repeat):
        for name, fn in phases:
            times[name].append(once(fn))
    rows = [(name, statistics.median(c for c, _ in ts), statistics.median(w for _, w in ts)) for name, ts in times.items()]
    base = rows[0][1]
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: TinyTransformer d={a.d} layers={a.layers}, {n_params / 1e6:.2f}M parameters; batch {a.batch} x "
          f"{a.seq} tokens; AdamW + clip 1.0; device {device}; torch {torch.__version__}; "
          f"threads {torch.get_num_threads()}; median of {a.repeat}")
    print(f"found: backward {found['b']['op']} in {found['b']['module']}; culprits {found['c']['samples']} "
          f"({found['c']['method']})")
    print("| phase | CPU s | wall s | x plain step (CPU) |")
    print("|---|---:|---:|---:|")
    for name, c, w in rows:
        print(f"| {name} | {c:.4f} | {w:.4f} | {c / base:.2f} |")
    after = [r for r in rows if r[0].startswith(("re-run", "instrumented step", "culprits: vmap", "4 counter"))]
    cpu = sum(r[1] for r in after)
    print(f"| **full answer after fidelity (sum)** | {cpu:.4f} | {sum(r[2] for r in after):.4f} | "
          f"**{cpu / base:.2f}** (goal <= 8) |")


def whole_process(run: Path, repeat: int, device: str, baseline: Path | None = None) -> None:
    """`forensics replay RUN` as a fresh process against `import torch` as one, alternating, wall time; beside them
    the floor any replay pays: `import torch, torch._dynamo` (torch.optim.Optimizer.step imports torch._dynamo on
    every call, `_use_grad_for_differentiable`, and sympy with it). With `baseline`, the same replay from that
    checkout too (another version of this code), in the same rounds."""
    import shutil

    with tempfile.TemporaryDirectory() as tmp:
        cmds = {"import torch": ([sys.executable, "-c", "import torch"], ROOT),
                "floor: import torch, torch._dynamo": ([sys.executable, "-c", "import torch, torch._dynamo"], ROOT)}
        for name, root in (("forensics replay", ROOT), ("forensics replay (baseline)", baseline)):
            if root is None:
                continue
            db = Path(tmp) / f"{len(cmds)}.duckdb"
            run_copy = Path(tmp) / f"run{len(cmds)}"
            shutil.copytree(run, run_copy)  # each its own copy: the store keys runs by path
            cmds[name] = ([sys.executable, "-m", "forensics.cli", "replay", str(run_copy), "--db", str(db), "--json",
                           "--device", device], root)
            subprocess.run(cmds[name][0], env={**os.environ, "PYTHONPATH": str(root)}, cwd=root, check=True,
                           capture_output=True)  # ingest once: the store holds the run

        def wall(cmd: list[str], root: Path) -> float:
            t = time.perf_counter()
            subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(root)}, cwd=root, check=True, capture_output=True)
            return time.perf_counter() - t

        times: dict[str, list[float]] = {name: [] for name in cmds}
        loads = []
        for _ in range(repeat):
            for name, (cmd, root) in cmds.items():
                times[name].append(wall(cmd, root))
            loads.append(os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan"))
    med = {name: statistics.median(ts) for name, ts in times.items()}
    print(f"whole process: {run.name}, the store holding it, device {device}, load {min(loads):.1f}-{max(loads):.1f}, "
          f"median of {repeat} alternating rounds (wall s)")
    for name, t in med.items():
        print(f"  {name:<38} {t:6.2f} s  {t / med['import torch']:5.2f}x import torch")
    print(f"  replay over its floor: {med['forensics replay'] / med['floor: import torch, torch._dynamo']:.2f}x; "
          f"goal <= 2x import torch")


if __name__ == "__main__":
    main()
