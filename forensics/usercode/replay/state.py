"""What a replay starts from: the run's config, the entry point, a checkpoint's states, saved batches, and one
training step done the way the run did it (DECISIONS.md §10).

Checkpoints are untrusted: torch files are read with `weights_only=True`, weights preferably from safetensors.
Nothing here writes into the run directory; importing the entry point writes no `__pycache__` there.
"""

from __future__ import annotations

import copy
import importlib.util
import math
import pickle
import random
import sys
import zipfile
from collections import OrderedDict
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ingest.checkpoints import States, strip_prefix
from ingest.errors import CheckpointMismatch, EntryPointError, MissingBatch, ReplayError

# ------------------------------------------------------------------------------------------ config, entry

def read_config(root: Path, store_config: dict[str, Any] | None = None) -> tuple[dict, str]:
    """The run's saved config and where it came from: the root's config file as ingest reads it
    (`ingest.configs.root_config`), else the config the store read elsewhere (W&B, Lightning's hparams.yaml), as
    a nested dict. ({}, "none") when there is none; a root config that does not parse falls back to the store's."""
    from ingest.configs import root_config

    doc, name, issue = root_config(root)
    if doc is not None:
        return doc, name
    if store_config:
        return store_config, "store" + (f" ({name} unreadable: {issue.detail})" if issue else "")
    if issue is not None:
        raise EntryPointError(f"{name} at the run root cannot be read ({issue.detail}) and the store holds no "
                              f"other config; fix the file (see docs/replay.md)")
    return {}, "none"


def load_entry(path: Path) -> Any:
    """Import the user's entry point (this runs their code: `forensics replay` is the opt-in)."""
    if not path.is_file():
        raise EntryPointError(f"no entry point at {path}")
    spec = importlib.util.spec_from_file_location(f"forensics_entry_{abs(hash(str(path)))}", path)
    mod = importlib.util.module_from_spec(spec)
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no __pycache__ inside the run directory
    try:
        spec.loader.exec_module(mod)
    except Exception as exc:
        raise EntryPointError(f"importing {path} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.dont_write_bytecode = saved
    missing = [f for f in ("build_model", "loss_fn") if not callable(getattr(mod, f, None))]
    if missing:
        raise EntryPointError(f"{path} defines no {' or '.join(missing)} (docs/replay.md: the entry point needs build_model "
                              f"and loss_fn; build_optimizer, build_scheduler, step_options are optional)")
    return mod


@dataclass(frozen=True)
class StepOptions:
    """What the run's step did around `loss_fn` (the entry point's `step_options`)."""

    max_grad_norm: float | None = None
    grad_accumulation_steps: int = 1
    grad_scaler: dict | None = None
    autocast_dtype: str | None = None          # "float16" / "bfloat16" when the forward ran under autocast
    step_numbering: str | None = None          # overrides the checkpoint layout's (ingest.checkpoints.STEP_NUMBERINGS)

    @classmethod
    def from_entry(cls, entry: Any, config: dict) -> StepOptions:
        from ingest.checkpoints import STEP_NUMBERINGS

        raw = dict(entry.step_options(config)) if callable(getattr(entry, "step_options", None)) else {}
        gs = raw.get("grad_scaler")
        numbering = raw.get("step_numbering")
        if numbering is not None and numbering not in STEP_NUMBERINGS:
            raise EntryPointError(f"step_options: unknown step_numbering {numbering!r}; accepted: "
                                  f"{', '.join(STEP_NUMBERINGS)} (or leave it out: the checkpoint's layout says "
                                  f"what its step means; see docs/replay.md)")
        return cls(max_grad_norm=raw.get("max_grad_norm"),
                   grad_accumulation_steps=int(raw.get("grad_accumulation_steps") or 1),
                   grad_scaler=(gs if isinstance(gs, dict) else {}) if gs else None,
                   autocast_dtype=raw.get("autocast_dtype"), step_numbering=numbering)


# ------------------------------------------------------------------------------------------ checkpoints

def _torch_load(path: Path) -> Any:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, OSError, zipfile.BadZipFile) as exc:
        raise MissingBatch(f"cannot read {path} with weights_only=True: {str(exc).splitlines()[0]}") from None


# ------------------------------------------------------------------------------------------ batches

def load_batch(root: Path, rel: str) -> dict[str, torch.Tensor]:
    """A saved batch as a dict of tensors with a leading batch dimension (non-tensor entries dropped)."""
    path = root / rel
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file
        obj = load_file(path)
    else:
        obj = _torch_load(path)
    if not isinstance(obj, dict):
        raise MissingBatch(f"{rel} holds a {type(obj).__name__}, not a dict of tensors (see docs/replay.md)")
    return {k: v for k, v in obj.items() if isinstance(v, torch.Tensor)}


def batch_size(batch: dict[str, torch.Tensor]) -> int:
    return next(v.shape[0] for v in batch.values() if v.dim() > 0)


def select(batch: dict[str, torch.Tensor], rows: list[int]) -> dict[str, torch.Tensor]:
    """The batch restricted to `rows` (every tensor with the leading batch dimension is sliced)."""
    n = batch_size(batch)
    idx = torch.tensor(rows, dtype=torch.long)
    return {k: (v.index_select(0, idx.to(v.device)) if v.dim() > 0 and v.shape[0] == n else v) for k, v in batch.items()}


# ------------------------------------------------------------------------------------------ the state

@dataclass
class State:
    """Model, optimizer, scheduler and scaler rebuilt by the entry point, with the checkpoint's states loaded."""

    entry: Any
    config: dict
    options: StepOptions
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: Any
    scaler: Any
    device: torch.device
    restored: list[str]
    notes: list[str]


def restore_checkpoint(entry: Any, config: dict, root: Path, rel: str, fmt: str, device: torch.device) -> State:
    """The entry point's model, optimizer, scheduler and scaler with checkpoint `rel` (of layout `fmt`, as the
    store found it) loaded into them: what replay and probe start from. Raises CheckpointMismatch when the
    checkpoint cannot be read with weights_only=True or does not fit the entry point's model."""
    from ingest.checkpoints import read_states

    return build_state(entry, config, read_states(root, rel, fmt), device)


def build_state(entry: Any, config: dict, saved: States, device: torch.device) -> State:
    """§10's order: build model, optimizer, scheduler; then load their saved states; then the RNG."""
    options = StepOptions.from_entry(entry, config)
    model = entry.build_model(config)
    model.train()  # the tool, not the entry point, sets train mode
    restored, notes = ["model"], list(saved.notes)
    wanted = set(model.state_dict())
    state = strip_prefix(saved.model, wanted, getattr(entry, "STATE_DICT_PREFIX", None))  # torch.compile's _orig_mod. too
    missing, unexpected = sorted(wanted - set(state)), sorted(set(state) - wanted)
    if missing or unexpected:
        raise CheckpointMismatch(
            f"{saved.path} does not fit the entry point's model: missing {missing[:5]}{'...' if len(missing) > 5 else ''}, "
            f"unexpected {unexpected[:5]}{'...' if len(unexpected) > 5 else ''}")
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        raise CheckpointMismatch(f"{saved.path} does not fit the entry point's model: {str(exc).splitlines()[-1].strip()}") from None
    model.to(device)
    if callable(getattr(entry, "build_optimizer", None)):
        optimizer = entry.build_optimizer(model, config)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
        notes.append("entry point has no build_optimizer: the update is not replayed (SGD lr=0)")
    scheduler = entry.build_scheduler(optimizer, config) if callable(getattr(entry, "build_scheduler", None)) else None
    scaler = None
    if options.grad_scaler is not None:
        scaler = torch.amp.GradScaler(device.type, **{k: v for k, v in options.grad_scaler.items()
                                                      if k in ("init_scale", "growth_factor", "backoff_factor",
                                                               "growth_interval", "enabled")})
    if saved.optimizer is not None:
        try:
            optimizer.load_state_dict(saved.optimizer)
        except (ValueError, KeyError, RuntimeError) as exc:
            raise CheckpointMismatch(f"{saved.path}: optimizer state does not fit build_optimizer's optimizer ({exc}); "
                                     f"build_optimizer must list parameters in the run's order") from None
        restored.append("optimizer")
    else:
        notes.append(f"{saved.path} holds no optimizer state: {type(optimizer).__name__} starts from empty state, "
                     f"so later steps are not the run's")
    if scheduler is not None:
        if saved.scheduler is not None:
            scheduler.load_state_dict(saved.scheduler)
            restored.append("scheduler")
        else:
            notes.append(f"{saved.path} holds no scheduler state")
    if scaler is not None:
        if saved.scaler is not None:
            scaler.load_state_dict(saved.scaler)
            restored.append("scaler")
        else:
            notes.append(f"{saved.path} holds no GradScaler state: the scale starts at its initial value")
    if saved.rng is not None:
        set_rng(saved.rng)
        restored.append("rng")
    return State(entry, config, options, model, optimizer, scheduler, scaler, device, restored, notes)


def set_rng(rng: dict) -> None:
    import numpy as np
    if rng.get("python") is not None:
        random.setstate(rng["python"])
    if rng.get("numpy") is not None:
        state = rng["numpy"]
        if isinstance(state, list):  # forensics.capture stores numpy's keys as a tensor (weights_only-safe)
            state = (state[0], np.asarray(state[1], dtype=np.int64).astype(np.uint32), *state[2:])
        np.random.set_state(tuple(state))
    if rng.get("cpu") is not None:
        torch.set_rng_state(rng["cpu"])
    cuda = rng.get("cuda")
    if cuda is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda) if isinstance(cuda, (list, tuple)) else torch.cuda.set_rng_state(cuda)


def get_rng() -> dict:
    import numpy as np
    out = {"python": random.getstate(), "numpy": np.random.get_state(), "cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        out["cuda"] = torch.cuda.get_rng_state_all()
    return out


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


def to_device(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    return {k: v.to(device) for k, v in batch.items()}


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
             lr_scale: float = 1.0) -> StepOut:
    """One optimizer step as the run did it (`step_options`), or with one change (a counterfactual): `fp32`
    (no autocast), another `max_grad_norm`, the learning rate times `lr_scale` for this step. The loss is the
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
    if lr_scale != 1.0:
        lrs = [g["lr"] for g in opt.param_groups]
        for g in opt.param_groups:
            g["lr"] = g["lr"] * lr_scale
    skipped = False
    if st.scaler is not None:
        before = st.scaler.get_scale()
        st.scaler.step(opt)
        st.scaler.update()
        skipped = st.scaler.get_scale() < before
    else:
        opt.step()
    if lr_scale != 1.0:
        for g, value in zip(opt.param_groups, lrs):
            g["lr"] = value
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
