"""A Lightning `Callback` writing what `forensics replay` needs (the layout of `forensics.capture`):

    from forensics.capture.lightning import ForensicsCapture
    trainer = L.Trainer(callbacks=[ForensicsCapture("runs/exp1", every=100)], ...)

Checkpoints are `checkpoints/step_N.pt` with N the logged (0-based) step just finished, so a replay starts at
N + 1 as for any other capture; Lightning's own `epoch=E-step=N.ckpt` files (state before logged step N) are
left as they are. The state at initialisation (what `forensics probe` starts its overfit and initial-loss checks
from) is `checkpoints/epoch=0-step=0.ckpt`, in Lightning's layout: with 0-based steps, `step_0.pt` would read as the
state after logged step 0, while a `.ckpt` at global_step 0 is the state before it (ingest/checkpoints.py). The entry point is generated at the run root unless one exists: the LightningModule rebuilt
from its source file with its saved hyperparameters, `training_step` as the loss, `configure_optimizers` for the
optimizer and scheduler. Imports lightning only here (DECISIONS.md §13).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import lightning.pytorch as L
import torch

from forensics.capture import Capture, _to_cpu
from forensics.capture.entry import optimizer_spec, write_entry

ENTRY_BODY = '''

_SCHEDULERS = {}


def build_model(config):
    torch.manual_seed(0)  # the weights come from the checkpoint
    return _model_class()(**config["hparams"])


def loss_fn(model, batch):
    out = model.training_step(_batch(batch), 0)
    return out["loss"] if isinstance(out, dict) else out


def build_optimizer(model, config):  # noqa: F811 -- Lightning: the module's own configure_optimizers
    got = model.configure_optimizers()
    if isinstance(got, dict):
        opt, sched = got["optimizer"], got.get("lr_scheduler")
    elif isinstance(got, (list, tuple)) and len(got) == 2 and isinstance(got[0], (list, tuple)):
        opt, sched = got[0][0], (got[1][0] if got[1] else None)
    else:
        opt, sched = (got[0] if isinstance(got, (list, tuple)) else got), None
    if isinstance(sched, dict):
        sched = sched["scheduler"]
    _SCHEDULERS[id(opt)] = sched
    return opt


def build_scheduler(optimizer, config):
    return _SCHEDULERS.get(id(optimizer))


def step_options(config):
    return {"max_grad_norm": config["max_grad_norm"], "grad_accumulation_steps": config["accumulate_grad_batches"]}
'''


class ForensicsCapture(L.Callback):
    """Periodic full checkpoints, the last `keep` batches flushed on a non-finite or spiking loss or gradient
    norm, every step's loss and (unclipped) gradient norm, the config, and a generated entry point."""

    def __init__(self, run_dir: str | Path | None = None, every: int = 100, keep: int | None = None,
                 spike: float = 10.0):
        self.run_dir, self.every, self.keep, self.spike = run_dir, every, keep, spike
        self.cap: Capture | None = None
        self.grad_norm: float | None = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        root = Path(self.run_dir or trainer.default_root_dir)
        clip = trainer.gradient_clip_val if trainer.gradient_clip_algorithm in (None, "norm") else None
        config = {"hparams": dict(pl_module.hparams), "max_grad_norm": float(clip) if clip else None,
                  "accumulate_grad_batches": trainer.accumulate_grad_batches,
                  "optimizer": optimizer_spec(pl_module, trainer.optimizers[0])}
        self.cap = Capture(root, config=config, every=0, keep=self.keep or self.every, spike=self.spike)
        if trainer.global_step == 0:  # a fresh run, not one resumed from a checkpoint
            self.initial_checkpoint(root, trainer, pl_module)
        write_entry(root, "forensics.capture.lightning.ForensicsCapture", type(pl_module), ENTRY_BODY)

    def initial_checkpoint(self, root: Path, trainer: L.Trainer, pl_module: L.LightningModule) -> Path:
        """The state before the first step as `checkpoints/epoch=0-step=0.ckpt`: Lightning's keys (state_dict,
        optimizer_states, lr_schedulers, global_step), plain tensors and containers (weights_only-readable)."""
        sched = trainer.lr_scheduler_configs[0].scheduler if trainer.lr_scheduler_configs else None
        obj = {"epoch": 0, "global_step": 0, "state_dict": _to_cpu(pl_module.state_dict()),
               "optimizer_states": [_to_cpu(trainer.optimizers[0].state_dict())],
               "lr_schedulers": [sched.state_dict()] if sched is not None else []}
        (root / "checkpoints").mkdir(exist_ok=True)
        path = root / "checkpoints" / "epoch=0-step=0.ckpt"
        tmp = path.with_suffix(".ckpt.tmp")
        torch.save(obj, tmp)
        tmp.replace(path)  # a crash mid-save leaves no half-written checkpoint
        return path

    def on_before_optimizer_step(self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer: Any) -> None:
        # Lightning calls this before it clips: the norm clip_grad_norm_ returns, as a run logs it
        grads = [p.grad.detach() for p in pl_module.parameters() if p.grad is not None]
        self.grad_norm = (float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])))
                          if grads else 0.0)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        step = trainer.global_step - 1  # the logged (0-based) step of this batch; the update is done
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        self.cap.remember(step, batch)
        self.cap.log(step, loss, self.grad_norm)
        if self.every and (step + 1) % self.every == 0:
            sched = trainer.lr_scheduler_configs[0].scheduler if trainer.lr_scheduler_configs else None
            self.cap.checkpoint(step, pl_module, trainer.optimizers[0], sched)
        if loss is not None and not math.isfinite(float(loss)):
            self.grad_norm = None
