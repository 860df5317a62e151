"""A small hyperparameter sweep really trained here: one MLP, several learning rates and seeds, logged with
torch's SummaryWriter (loss, LR, gradient norm every step) beside each run's config.yaml, as a user's sweep
script leaves it. The highest LR diverges after its warmup (the loss climbs and stays high); the others train."""

from __future__ import annotations

import math
from pathlib import Path

import yaml

SWEEP_LRS = (0.02, 0.1, 2.0)
SWEEP_SEEDS = (0, 1)
STEPS = 150
WARMUP = 40
START_TIME = 1.7e9


def sweep_name(lr: float, seed: int) -> str:
    return f"mlp_lr{lr:g}_s{seed}"


def train_run(root: Path, lr: float, seed: int, steps: int = STEPS) -> Path:
    """Train the sweep's MLP with SGD (momentum 0.9, linear warmup) on a fixed teacher task; the data is the
    same for every run (seed 1234), the model's initialisation and batch order follow `seed`."""
    import torch
    from torch.utils.tensorboard import SummaryWriter

    from tests.runwriters import one_torch_thread

    config = {"seed": seed, "model": {"d_in": 16, "hidden": 64, "depth": 2, "classes": 5, "act": "tanh"},
              "optim": {"name": "sgd", "lr": lr, "momentum": 0.9, "warmup_steps": WARMUP},
              "data": {"n": 2048, "batch_size": 32}, "max_steps": steps}
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    with one_torch_thread():
        g = torch.Generator().manual_seed(1234)
        x = torch.randn(2048, 16, generator=g)
        y = (x @ torch.randn(16, 5, generator=g)).argmax(1)
        torch.manual_seed(seed)
        model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64),
                                    torch.nn.Tanh(), torch.nn.Linear(64, 5))
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / WARMUP))
        order = torch.Generator().manual_seed(seed)
        w = SummaryWriter(log_dir=str(root / "train"))
        for step in range(1, steps + 1):
            idx = torch.randint(0, 2048, (32,), generator=order)
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            grad = float(torch.nn.utils.clip_grad_norm_(model.parameters(), math.inf))
            # Wall times of a steady 20 ms step: the time a shared test machine takes is not the run's evidence
            # (throughput_drop reads it)
            at = START_TIME + 0.02 * step
            w.add_scalar("loss", float(loss.detach()), step, walltime=at)
            w.add_scalar("lr", opt.param_groups[0]["lr"], step, walltime=at)
            w.add_scalar("grad_norm", grad, step, walltime=at)
            if not math.isfinite(float(loss.detach())):
                break  # a user's script stops at the first NaN
            opt.step()
            sched.step()
        w.close()
    return root


def train_sweep(root: Path) -> dict[tuple[float, int], Path]:
    """Every (lr, seed) of the sweep under `root`, by (lr, seed)."""
    return {(lr, seed): train_run(root / sweep_name(lr, seed), lr, seed) for lr in SWEEP_LRS for seed in SWEEP_SEEDS}
