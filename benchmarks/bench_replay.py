"""Replay's phases, each timed against a plain training step of the same model in the same process.

The model is the gallery's tiny causal transformer grown to GPT-like shapes (default d=256, 4 layers, 16 x 128
tokens, AdamW + clipping at 1.0) with the hand-written norm whose eps sits outside the sqrt, and a batch whose
rows 3 and 11 are padded: the forward is finite and the backward NaN, so every phase does its real work
(backward instrumentation, per-sample gradients, bisection is not needed). Phases, as `forensics replay` runs
them after the fidelity re-execution:
    plain step          forward + backward + clip + AdamW step (the unit)
    replayed step       run_step with the state snapshot replay takes before each step
    re-run              the failing step once more from the snapshot (restore + step)
    instr. forward      TorchFunctionMode over every torch call + module stack hooks
    instr. backward     node-owner recording forward + a hook on every grad_fn node
    culprits (vmap)     per-sample losses + per-sample gradient norms via torch.func vmap(grad)
    culprits (B runs)   the naive peer: one forward+backward per sample
    counterfactuals     four re-runs of the step, each from the snapshot
    detect_anomaly      forward + backward under torch.autograd.detect_anomaly(check_nan=True), the folklore peer
Medians over --repeat runs; ratios are to the plain step's median. The last line sums what a replay spends
after fidelity (re-run + instrumented forward and backward + culprits by vmap + counterfactuals), in plain steps.

    python benchmarks/bench_replay.py [--d 256] [--layers 4] [--batch 16] [--seq 128] [--repeat 5] [--device cpu]
"""

from __future__ import annotations

import argparse
import statistics
import sys
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
    a = ap.parse_args()

    import torch

    from forensics.replay import counterfactuals, culprits, instrument
    from forensics.replay.state import State, StepOptions, restore, run_step, snapshot
    from sample_runs.gen.models import TinyTransformer

    warnings.filterwarnings("ignore")
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

    def timed(fn, repeat=a.repeat):
        out = []
        for _ in range(repeat):
            restore(st, snap)
            sync()
            t = time.perf_counter()
            fn()
            sync()
            out.append(time.perf_counter() - t)
        return statistics.median(out)

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

    timed(plain, 2)  # warm up kernels and allocator
    found = {}
    rows = [
        ("plain step", timed(plain)),
        ("replayed step (with snapshot)", timed(replayed)),
        ("re-run of the failing step", timed(rerun)),
        ("instrumented forward", timed(lambda: instrument.first_nonfinite_forward(st, batch))),
        ("instrumented backward", timed(lambda: found.setdefault("b", instrument.first_nonfinite_backward(st, batch)))),
        ("culprits: vmap per-sample", timed(lambda: found.setdefault("c", culprits.find_culprits(st, batch, "backward")))),
        (f"culprits: {a.batch} single-sample runs", timed(loop_culprits)),
        ("4 counterfactuals", timed(lambda: counterfactuals.try_changes(st, snap, batch, [3, 11]))),
        ("detect_anomaly(check_nan=True) fwd+bwd", timed(anomaly)),
    ]
    base = rows[0][1]
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: TinyTransformer d={a.d} layers={a.layers}, {n_params / 1e6:.2f}M parameters; batch {a.batch} x "
          f"{a.seq} tokens; AdamW + clip 1.0; device {device}; torch {torch.__version__}; "
          f"threads {torch.get_num_threads()}; median of {a.repeat}")
    print(f"found: backward {found['b']['op']} in {found['b']['module']}; culprits {found['c']['samples']} "
          f"({found['c']['method']})")
    print(f"{'phase':<42} {'seconds':>9} {'x plain step':>13}")
    for name, t in rows:
        print(f"{name:<42} {t:>9.4f} {t / base:>13.2f}")
    after = sum(t for n, t in rows if n.startswith(("re-run", "instrumented", "culprits: vmap", "4 counter")))
    print(f"{'full answer after fidelity (sum)':<42} {after:>9.4f} {after / base:>13.2f}   goal <= 8")


if __name__ == "__main__":
    main()
