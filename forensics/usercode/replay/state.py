"""One training step done the way the run did it (DECISIONS.md §10), and snapshots of the state it changes, so
that replay can rewind to the step and re-run it. What a replay starts from (entry point, config, checkpoint,
batches, RNG) is the user-code kit's (`forensics.usercode.kit`).
"""

from __future__ import annotations

import copy
import math
from collections import OrderedDict
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from forensics.usercode.kit.entry import StepOptions
from forensics.usercode.kit.restore import State
from forensics.usercode.kit.rng import get_rng, set_rng
from ingest.errors import ReplayError


def snapshot(st: State) -> dict:
    """Everything a step changes, copied: the optimizer keeps references to its state tensors."""
    return _copied({"model": st.model.state_dict(), "optimizer": st.optimizer.state_dict(),
                    "scheduler": st.scheduler.state_dict() if st.scheduler is not None else None,
                    "scaler": st.scaler.state_dict() if st.scaler is not None else None, "rng": get_rng()}, {})


_IMMUTABLE = (int, float, bool, str, bytes, complex)


def _copied(obj: Any, memo: dict[int, Any]) -> Any:
    """A deep copy of a state tree that clones its tensors directly: `copy.deepcopy` pays Python's reduce protocol
    per tensor, a quarter of a replay's own time (22 snapshots of a 4-layer model: 0.55 of 2.6 s). Tensors shared
    in the tree stay shared in the copy, as deepcopy keeps them; a state dict's `_metadata` (module versions that
    `load_state_dict` reads) is kept; numbers and strings are immutable and kept; any other leaf is deep-copied."""
    if obj is None or type(obj) in _IMMUTABLE:
        return obj
    if isinstance(obj, torch.Tensor):
        if id(obj) not in memo:
            with torch.no_grad():
                c = obj.detach().clone(memory_format=torch.preserve_format)
            memo[id(obj)] = c.requires_grad_(obj.requires_grad) if obj.is_leaf else c
        return memo[id(obj)]
    if type(obj) in (dict, OrderedDict):
        out = type(obj)((k, _copied(v, memo)) for k, v in obj.items())
        if hasattr(obj, "_metadata"):
            out._metadata = copy.deepcopy(obj._metadata)
        return out
    if type(obj) is tuple and all(v is None or type(v) in _IMMUTABLE for v in obj):
        return obj  # Python's RNG state: 625 ints
    if type(obj) in (list, tuple):
        return type(obj)(_copied(v, memo) for v in obj)
    return copy.deepcopy(obj)


def restore(st: State, snap: dict) -> None:
    snap = _copied(snap, {})
    st.model.load_state_dict(snap["model"])
    st.optimizer.load_state_dict(snap["optimizer"])
    if st.scheduler is not None:
        st.scheduler.load_state_dict(snap["scheduler"])
    if st.scaler is not None:
        st.scaler.load_state_dict(snap["scaler"])
    set_rng(snap["rng"])


# ------------------------------------------------------------------------------------------ one step

def nonfinite(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point() and not bool(torch.isfinite(t).all())


@dataclass
class StepOut:
    """One replayed step: the loss and gradient norm as the run logged them, and where non-finite values were.

    The optimizer phase is checked stage by stage (`stage`): `unscale_` (a GradScaler's unscaling turned finite
    gradients non-finite), `clip_grad_norm_` (the total norm overflowed, or the clip coefficient turned
    gradients non-finite: max_norm/inf scales every gradient to 0, an inf one to NaN) and `step` (the update
    wrote a non-finite weight). `zeroed`: clipping scaled every gradient to 0, so the update did nothing."""

    loss: float
    grad_norm: float
    lr: float
    loss_finite: bool
    grads_finite: bool
    params_finite: bool
    skipped: bool = False  # a GradScaler skipped the update (non-finite gradients under fp16)
    norm_finite: bool = True  # the total norm clip_grad_norm_ computed (True when the run does not clip)
    stage: str | None = None  # the optimizer-phase stage that made the first non-finite value
    zeroed: bool = False

    @property
    def finite(self) -> bool:
        return self.loss_finite and (self.grads_finite or self.skipped) and self.stage is None

    @property
    def phase(self) -> str | None:
        """Where the first non-finite value showed: forward, backward or optimizer (None: all finite)."""
        if not self.loss_finite:
            return "forward"
        if not self.grads_finite and not self.skipped:
            return "backward"
        if self.stage is not None:
            return "optimizer"
        return None


def autocast(st: State, fp32: bool = False):
    if st.options.autocast_dtype and not fp32:
        return torch.autocast(st.device.type, dtype=getattr(torch, st.options.autocast_dtype))
    return nullcontext()


def total_norm(params: list[torch.nn.Parameter]) -> float:
    """The gradient norm a run logs without clipping: the norm of the per-parameter norms."""
    if not params:
        return 0.0
    return float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad.detach()) for p in params])))


RUN = object()  # run_step's default: do what the run did


def run_step(st: State, batch: dict[str, torch.Tensor], *, fp32: bool = False, max_grad_norm: Any = RUN,
             lr_scale: float = 1.0, hyper: dict[str, float] | None = None) -> StepOut:
    """One optimizer step as the run did it (`step_options`), or with one change (a counterfactual): `fp32`
    (no autocast), another `max_grad_norm`, the learning rate times `lr_scale` for this step, or optimizer
    hyperparameters `hyper` (`{"eps": 1e-8}`) for this step's update, in every group that has them. The loss is the
    step's mean loss (`loss_fn`). Each stage of the optimizer phase is checked (StepOut)."""
    model, opt = st.model, st.optimizer
    opt.zero_grad(set_to_none=True)
    with autocast(st, fp32=fp32):
        loss = st.entry.loss_fn(model, batch)
    loss_value = float(loss.detach().float())
    (st.scaler.scale(loss) if st.scaler is not None else loss).backward()
    params = [p for p in model.parameters() if p.grad is not None]
    stage = None
    grads_finite = not any(nonfinite(p.grad) for p in params)
    if st.scaler is not None:  # fp16 overflow in backward is the scaler's to skip: judge the unscaled grads
        st.scaler.unscale_(opt)
        unscaled_finite = not any(nonfinite(p.grad) for p in params)
        if grads_finite and not unscaled_finite:
            stage = "unscale_"
        grads_finite = unscaled_finite
    max_norm = st.options.max_grad_norm if max_grad_norm is RUN else max_grad_norm
    norm_finite, zeroed = True, False
    if max_norm is not None and params:
        gn = float(torch.nn.utils.clip_grad_norm_(params, float(max_norm)))
        norm_finite = math.isfinite(gn)
        if stage is None and grads_finite and (not norm_finite or any(nonfinite(p.grad) for p in params)):
            stage = "clip_grad_norm_"  # finite gradients in, a non-finite norm or gradients out
            zeroed = all(not bool(p.grad.any()) for p in params)
    else:
        gn = total_norm(params)
    lr = float(opt.param_groups[0]["lr"])
    saved = [dict(g) for g in opt.param_groups] if lr_scale != 1.0 or hyper else None
    for g in opt.param_groups:
        if lr_scale != 1.0:
            g["lr"] = g["lr"] * lr_scale
        for k, v in (hyper or {}).items():
            if k in g:
                g[k] = v
    skipped = False
    if st.scaler is not None:
        before = st.scaler.get_scale()
        st.scaler.step(opt)
        st.scaler.update()
        skipped = st.scaler.get_scale() < before
    else:
        opt.step()
    if saved is not None:  # the run's own hyperparameters back (the scheduler steps from them)
        for g, old in zip(opt.param_groups, saved):
            for k in ("lr", *(hyper or {})):
                if k in old:
                    g[k] = old[k]
    opt.zero_grad(set_to_none=True)
    if st.scheduler is not None:
        st.scheduler.step()
    params_finite = not any(nonfinite(p) for p in model.parameters())
    if stage is None and not params_finite and (grads_finite or skipped):
        stage = "step"
    return StepOut(loss_value, gn, lr, math.isfinite(loss_value), grads_finite, params_finite, skipped, norm_finite,
                   stage, zeroed)


def require_single_micro_batch(options: StepOptions) -> None:
    if options.grad_accumulation_steps != 1:
        raise ReplayError(f"grad_accumulation_steps={options.grad_accumulation_steps}: replaying accumulated "
                          f"micro-batches is not supported yet (save one batch per micro-step to replay it)")
