"""The shared training loop, checkpoint layouts, the non-finite probe and the per-run context."""

from __future__ import annotations

import copy
import importlib.util
import inspect
import json
import math
import random
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import yaml

from . import models

T0 = 1_763_000_000.0  # simulated clock origin (2025-11-13) for every run


def seed_all(seed: int):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)


@dataclass
class Ctx:
    """One run being generated: its folder, config, simulated clock and ground-truth record."""

    name: str
    root: Path
    config: dict = field(default_factory=dict)
    truth: dict = field(default_factory=dict)
    wall: float = T0
    entry_module: object = None

    def write_config(self, fmt: str = "yaml"):
        if fmt == "yaml":
            (self.root / "config.yaml").write_text(yaml.safe_dump(self.config, sort_keys=False))
        else:
            (self.root / "config.json").write_text(json.dumps(self.config, indent=2) + "\n")

    def write_entry(self, body: str, replay: bool) -> object:
        """Write the run's model/loss code (models.py + `body`) as train.py, and as forensics_entry.py for a
        replayable run; return it imported, so the generator trains with exactly the code it ships."""
        src = inspect.getsource(models).replace('"""Tiny models shared', '"""Model code of this run. Tiny models shared', 1)
        text = src + "\n\n# ---- this run's model, loss and optimizer (DECISIONS.md §10 entry point) ----\n" + body.strip() + "\n"
        (self.root / "train.py").write_text(text)
        if replay:
            (self.root / "forensics_entry.py").write_text(text)
        spec = importlib.util.spec_from_file_location(f"gallery_entry_{self.name}", self.root / "train.py")
        mod = importlib.util.module_from_spec(spec)
        sys.dont_write_bytecode, saved = True, sys.dont_write_bytecode  # no __pycache__ inside the run
        try:
            spec.loader.exec_module(mod)
        finally:
            sys.dont_write_bytecode = saved
        self.entry_module = mod
        return mod

    def meta(self, *, healthy: bool, bug: str, description: str, logger: str, model: str):
        self.truth.update({"healthy": healthy, "bug": bug, "description": description, "logger": logger,
                           "model": model, "kinds": [], "spikes": [], "nan_onset": None, "replay": None})

    def kind(self, kind, step=None, step_end=None, series=None, note="", primary=False):
        self.truth.setdefault("kinds", []).append(
            {"kind": kind, "primary": primary, "step": step, "step_end": step_end, "series": series, "note": note})


# --------------------------------------------------------------------------------------------- probing

def _nonfinite(t) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point() and not bool(torch.isfinite(t).all())


class _FirstNonfinite(torch.overrides.TorchFunctionMode):
    """Records the first torch function whose output holds a non-finite value and requires grad (masks
    full of -inf do not), and the innermost module running it."""

    def __init__(self, stack):
        super().__init__()
        self.stack, self.hit = stack, None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.hit is None:
            outs = out if isinstance(out, (tuple, list)) else (out,)
            # only values on the autograd path count: attention masks hold -inf on purpose and need no grad
            if any(_nonfinite(o) and o.requires_grad for o in outs):
                self.hit = (getattr(func, "__name__", str(func)), self.stack[-1] if self.stack else "")
        return out


def probe_step(model, batch, loss_fn) -> dict:
    """Where the first non-finite value of one training step appears: forward (op = torch function name,
    module = innermost module running it) or backward (op = the autograd node anomaly mode names, module =
    the module whose forward made that node). Returns {"phase", "op", "module"} or {} when all finite."""
    names = {m: n for n, m in model.named_modules()}
    stack, hooks = [], []
    for m, n in names.items():
        hooks.append(m.register_forward_pre_hook(lambda mod, inp, n=n: stack.append(n)))
        hooks.append(m.register_forward_hook(lambda mod, inp, out: (stack.pop(), None)[1]))
    mode = _FirstNonfinite(stack)
    model.zero_grad(set_to_none=True)
    try:
        with mode:
            loss = loss_fn(model, batch)
    finally:
        for h in hooks:
            h.remove()
    if mode.hit is not None:
        return {"phase": "forward", "op": mode.hit[0], "module": mode.hit[1]}
    # backward: anomaly mode names the node; node hooks find which instance of it returned NaN first, and
    # a function mode remembers the module whose forward created each node
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        op = None
        with torch.autograd.detect_anomaly(check_nan=True):
            loss = loss_fn(model, batch)
            try:
                loss.backward()
            except RuntimeError as e:
                msg = str(e)
                op = msg.split("'")[1] if "Function '" in msg else msg
    model.zero_grad(set_to_none=True)
    if op is not None:
        node_module = {}
        hooks = []
        for m, n in names.items():
            hooks.append(m.register_forward_pre_hook(lambda mod, inp, n=n: stack.append(n)))
            hooks.append(m.register_forward_hook(lambda mod, inp, out: (stack.pop(), None)[1]))
        rec = _NodeOwners(stack, node_module)
        try:
            with rec:
                loss = loss_fn(model, batch)
        finally:
            for h in hooks:
                h.remove()
        hits = []
        for node, mod in node_module.items():
            node.register_hook(lambda gi, go, node=node, mod=mod: hits.append((type(node).__name__, mod))
                               if any(g is not None and bool(torch.isnan(g).any()) for g in gi) else None)
        loss.backward()
        model.zero_grad(set_to_none=True)
        module = next((m for o, m in hits if o == op), hits[0][1] if hits else "")
        return {"phase": "backward", "op": op, "module": module}
    grads = [n for n, p in model.named_parameters() if p.grad is not None and _nonfinite(p.grad)]
    if grads:  # inf (not NaN) gradients: anomaly mode's check_nan does not flag them
        return {"phase": "backward", "op": "inf gradient", "module": grads[0].rsplit(".", 1)[0]}
    return {}


class _NodeOwners(torch.overrides.TorchFunctionMode):
    """Maps each autograd node created in the forward pass to the innermost module that created it."""

    def __init__(self, stack, owners):
        super().__init__()
        self.stack, self.owners = stack, owners

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for o in (out if isinstance(out, (tuple, list)) else (out,)):
            if isinstance(o, torch.Tensor) and o.grad_fn is not None:
                self.owners.setdefault(o.grad_fn, self.stack[-1] if self.stack else "")
        return out


def culprit_samples(model, batch, loss_fn) -> list[int]:
    """Rows of the batch whose own forward+backward produces a non-finite loss or gradient."""
    n = next(v for v in batch.values() if isinstance(v, torch.Tensor)).shape[0]
    bad = []
    for i in range(n):
        one = {k: v[i:i + 1] for k, v in batch.items()}
        model.zero_grad(set_to_none=True)
        loss = loss_fn(model, one)
        loss.backward()
        if _nonfinite(loss.detach()) or any(_nonfinite(p.grad) for p in model.parameters() if p.grad is not None):
            bad.append(i)
    model.zero_grad(set_to_none=True)
    return bad


# ------------------------------------------------------------------------------------------ checkpoints

class Checkpoints:
    """Checkpoint layouts a fleet mixes: 'torch' (checkpoints/step_N.pt dict), 'hf' (checkpoint-N/),
    'lightning' (lightning_logs/version_0/checkpoints/epoch=E-step=N.ckpt), 'safetensors'
    (weights/step_N.safetensors with the step in metadata). Keeps the newest `keep` (save_total_limit)."""

    def __init__(self, ctx: Ctx, layout: str, every: int, keep: int = 5, hf=None, steps_per_epoch: int = 1):
        self.ctx, self.layout, self.every, self.keep, self.hf, self.spe = ctx, layout, every, keep, hf, steps_per_epoch
        self.saved: list[tuple[int, Path]] = []

    def save(self, step, model, opt, sched=None, scaler=None):
        from safetensors.torch import save_file
        root = self.ctx.root
        sd = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
        if self.layout == "torch":
            path = root / "checkpoints" / f"step_{step}.pt"
            path.parent.mkdir(exist_ok=True)
            obj = {"model": sd, "optimizer": opt.state_dict(), "step": step}
            if sched is not None:
                obj["scheduler"] = sched.state_dict()
            if scaler is not None:
                obj["scaler"] = scaler.state_dict()
            torch.save(obj, path)
        elif self.layout == "hf":
            path = root / f"checkpoint-{step}"
            path.mkdir(exist_ok=True)
            save_file(sd, path / "model.safetensors", metadata={"format": "pt"})
            torch.save(opt.state_dict(), path / "optimizer.pt")
            if sched is not None:
                torch.save(sched.state_dict(), path / "scheduler.pt")
            torch.save({"python": random.getstate(), "numpy": np.random.get_state(),
                        "cpu": torch.get_rng_state()}, path / "rng_state.pth")
            (path / "config.json").write_text(json.dumps({"model_type": "gallery", **self.ctx.config.get("model", {})}, indent=2) + "\n")
            if self.hf is not None:
                self.hf.state.global_step = step
                self.hf.save_state(path / "trainer_state.json")
        elif self.layout == "lightning":
            d = root / "lightning_logs" / "version_0" / "checkpoints"
            d.mkdir(parents=True, exist_ok=True)
            epoch = (step - 1) // self.spe
            path = d / f"epoch={epoch}-step={step}.ckpt"
            torch.save({"epoch": epoch, "global_step": step, "pytorch-lightning_version": "2.4.0",
                        "state_dict": {f"model.{k}": v for k, v in sd.items()}, "loops": {}, "callbacks": {},
                        "optimizer_states": [opt.state_dict()],
                        "lr_schedulers": [sched.state_dict()] if sched is not None else [],
                        "hparams_name": "kwargs", "hyper_parameters": self.ctx.config}, path)
        elif self.layout == "safetensors":
            path = root / "weights" / f"step_{step}.safetensors"
            path.parent.mkdir(exist_ok=True)
            save_file(sd, path, metadata={"step": str(step)})
        else:
            raise ValueError(self.layout)
        self.saved.append((step, path))
        while len(self.saved) > self.keep:
            _, old = self.saved.pop(0)
            shutil.rmtree(old) if old.is_dir() else old.unlink()
        return path


def capture(ctx: Ctx, model, opt, sched=None, every: int = 0, first: int = 2):
    """What `forensics probe` needs, written by forensics.capture's helpers as a user's script would: the state at
    initialisation (checkpoints/step_0.pt), the run's first `first` batches (batches/step_N.pt) and, with `every`,
    a checkpoint every `every` steps. The gallery keeps them few (every = the run's length: step 0 and the last)
    and tiny. Its full-precision metrics log (`Capture.log`) is left out: each run's series are its logger's."""
    from forensics.capture import Capture

    return Capture(ctx.root, every=every, keep=first, first=first, model=model, optimizer=opt, scheduler=sched)


def save_batch(ctx: Ctx, step: int, batch: dict, fmt: str = "pt") -> Path:
    d = ctx.root / "batches"
    d.mkdir(exist_ok=True)
    if fmt == "pt":
        path = d / f"step_{step}.pt"
        torch.save({k: v.clone() for k, v in batch.items()}, path)
    else:
        from safetensors.torch import save_file
        path = d / f"step_{step}.safetensors"
        save_file({k: v.contiguous().clone() for k, v in batch.items()}, path, metadata={"step": str(step)})
    return path


# ----------------------------------------------------------------------------------------- the loop

@dataclass
class Fit:
    """Options of the one training loop every run uses (the bug is injected through them)."""

    steps: int
    batch_fn: Callable[[int], dict]            # step -> batch dict (leading batch dimension)
    loggers: list = field(default_factory=list)
    max_grad_norm: float | None = None         # None: no clip_grad_norm_ call
    sched: object = None
    accum: int = 1                             # micro-batches per optimizer step
    sched_per_micro: bool = False              # BUG knob: scheduler.step() on every micro-batch
    backward: bool = True                      # BUG knob: backward() never called
    scaler: object = None                      # torch.amp.GradScaler("cpu")
    amp_dtype: object = None
    eval_fn: Callable | None = None            # model -> dict of val metrics
    eval_every: int = 0
    extra_fn: Callable | None = None           # (model, step, batch) -> dict of extra metrics (logged by tags)
    ckpt: Checkpoints | None = None
    dt: Callable[[int], float] = lambda step: 0.05   # simulated seconds per step
    window: int = 0                            # ring buffer of batches dumped before a NaN / at spike steps
    batch_fmt: str = "pt"
    save_batches_at: tuple = ()                # steps whose batch is saved (spikes)
    stop_after_nan: int | None = None          # stop this many steps after the first non-finite loss
    keep_losses: bool = False                  # BUG knob: metric losses (with graphs) kept in a list
    log_rss: bool = False                      # log the process RSS (rss_mb) every step, as a leaking run does
    stop_at: int | None = None                 # crash: the process dies after this step
    step_offset: int = 0                       # logged step = loop step + offset (Lightning: -1)
    first_step: int = 1                        # a resumed run starts after its checkpoint
    capture: object = None                     # forensics.capture.Capture: the first batches, its checkpoints


def loop_source(f: Fit) -> str:
    """The training loop this run used, as the user's script would spell it (appended to train.py)."""
    ind = "        " if f.accum > 1 else "    "
    lines = ["for step, batch in enumerate(loader, start=1):"]
    if f.accum > 1:
        lines.append(f"    for micro in range({f.accum}):  # gradient accumulation")
    if f.amp_dtype is not None:
        lines += [f"{ind}with torch.autocast('cpu', dtype=torch.float16):", f"{ind}    loss = loss_fn(model, batch)"]
    else:
        lines.append(f"{ind}loss = loss_fn(model, batch)")
    if f.keep_losses:
        lines.append(f"{ind}metric_losses.append(loss_fn(model, batch))  # BUG: a tensor with its graph, never freed")
    if f.backward:
        lines.append(f"{ind}scaler.scale(loss).backward()" if f.scaler is not None else
                     f"{ind}(loss / {f.accum}).backward()" if f.accum > 1 else f"{ind}loss.backward()")
    else:
        lines.append(f"{ind}# BUG: loss.backward() is missing")
    if f.sched_per_micro:
        lines.append(f"{ind}scheduler.step()  # BUG: once per micro-batch")
    if f.scaler is not None:
        lines.append("    scaler.unscale_(optimizer)")
    if f.max_grad_norm is not None:
        lines.append(f"    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), {f.max_grad_norm})")
    lines += ["    scaler.step(optimizer); scaler.update()"] if f.scaler is not None else ["    optimizer.step()"]
    lines.append("    optimizer.zero_grad()")
    if f.sched is not None and not f.sched_per_micro:
        lines.append("    scheduler.step()")
    if f.capture is not None:
        lines.append("    cap.remember(step, batch)  # forensics.capture: the run's first batches")
        if f.capture.every:
            lines.append(f"    if step % {f.capture.every} == 0:")
            lines.append("        cap.checkpoint(step, model, optimizer)")
    return "\n".join("# " + ln for ln in lines)


def fit(ctx: Ctx, model, opt, loss_fn, f: Fit) -> dict:
    """Train; return what the ground truth needs: per-step raw losses, grad norms, the first non-finite
    step and its probe, the checkpoints written."""
    script = ctx.root / "train.py"
    if script.exists() and "# ---- training loop" not in script.read_text():
        with open(script, "a") as fh:
            fh.write("\n\n# ---- training loop (as run; logging, evaluation and checkpointing omitted) ----\n"
                     + loop_source(f) + "\n")
    losses, gnorms, lrs = {}, {}, {}
    first_bad = None
    ring: list[tuple[int, dict, dict]] = []
    kept = []
    nan_step = None
    for step in range(f.first_step, f.steps + 1):
        snapshot = copy.deepcopy((model.state_dict(), opt.state_dict())) if f.window and first_bad is None else None
        step_loss = 0.0
        batches = []
        for micro in range(f.accum):
            batch = f.batch_fn(step if f.accum == 1 else (step - 1) * f.accum + micro + 1)
            batches.append(batch)
            if f.amp_dtype is not None:
                with torch.autocast("cpu", dtype=f.amp_dtype):
                    loss = loss_fn(model, batch)
            else:
                loss = loss_fn(model, batch)
            if f.keep_losses:  # the leak: a metric forward outside no_grad, its graph kept in a list
                kept.append(loss_fn(model, batch))
            step_loss += loss.item() / f.accum
            if f.backward:
                if f.scaler is not None:
                    f.scaler.scale(loss / f.accum).backward()
                else:
                    (loss / f.accum).backward()
            if f.sched_per_micro and f.sched is not None:
                f.sched.step()
        lr = opt.param_groups[0]["lr"]
        if f.scaler is not None:
            f.scaler.unscale_(opt)
        params = [p for p in model.parameters() if p.grad is not None]
        if f.max_grad_norm is not None:
            gn = float(torch.nn.utils.clip_grad_norm_(params, f.max_grad_norm)) if params else 0.0
        else:
            gn = float(torch.norm(torch.stack([p.grad.norm() for p in params]))) if params else 0.0
        grads_bad = any(_nonfinite(p.grad) for p in params)
        extra = f.extra_fn(model, step, batches[0]) if f.extra_fn else {}
        if f.scaler is not None:
            extra["scale"] = f.scaler.get_scale()
            f.scaler.step(opt)
            f.scaler.update()
        else:
            opt.step()
        opt.zero_grad(set_to_none=True)
        if f.sched is not None and not f.sched_per_micro:
            f.sched.step()
        params_bad = any(_nonfinite(p) for p in model.parameters())
        losses[step], gnorms[step], lrs[step] = step_loss, gn, lr
        if f.capture is not None:
            f.capture.remember(step + f.step_offset, batches[0])
            if f.capture.every and step % f.capture.every == 0:
                f.capture.checkpoint(step + f.step_offset, model, opt, f.sched, f.scaler)
        if first_bad is None and f.window and f.scaler is None:
            phase = ("forward" if not math.isfinite(step_loss) else "backward" if grads_bad
                     else "optimizer" if params_bad else None)
            if phase:
                first_bad = {"step": step, "phase_seen": phase}
                probe_model = copy.deepcopy(model)
                probe_model.load_state_dict(snapshot[0])
                found = probe_step(probe_model, batches[0], loss_fn)
                if not found:  # forward and backward finite: the optimizer step made the first non-finite value
                    bad_param = next(n for n, p in model.named_parameters() if _nonfinite(p))
                    found = {"phase": "optimizer", "op": type(opt).__name__ + ".step", "module": bad_param.rsplit(".", 1)[0],
                             "parameter": bad_param}
                first_bad.update(found)
                first_bad["samples"] = culprit_samples(probe_model, batches[0], loss_fn)
        if f.window:
            ring.append((step, batches[0]))
            ring = ring[-f.window:]
            if first_bad is not None and first_bad["step"] == step:
                for s, b in ring:
                    save_batch(ctx, s + f.step_offset, b, f.batch_fmt)
        if step in f.save_batches_at:
            save_batch(ctx, step + f.step_offset, batches[0], f.batch_fmt)
        if f.keep_losses or f.log_rss:
            extra["rss_mb"] = _rss_mb()
        ctx.wall += f.dt(step)
        metrics = {"loss": step_loss, "grad_norm": gn, "lr": lr, **extra}
        for lg in f.loggers:
            lg.train(step, metrics, ctx.wall)
        if f.eval_fn is not None and f.eval_every and step % f.eval_every == 0:
            model.eval()
            with torch.no_grad():
                vm = f.eval_fn(model)
            model.train()
            for lg in f.loggers:
                lg.val(step, vm, ctx.wall)
            losses.setdefault("val", {})[step] = vm
        if f.ckpt is not None and f.ckpt.every and step % f.ckpt.every == 0:
            f.ckpt.save(step, model, opt, f.sched, f.scaler)
        if nan_step is None and not math.isfinite(step_loss):
            nan_step = step
        if nan_step is not None and f.stop_after_nan is not None and step >= nan_step + f.stop_after_nan:
            break
        if f.stop_at is not None and step >= f.stop_at:
            break
    return {"losses": losses, "gnorms": gnorms, "lrs": lrs, "first_bad": first_bad, "nan_step": nan_step,
            "last_step": step}


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096 / 2**20


def replay_truth(ctx: Ctx, res: dict, ckpt: Checkpoints, fmt: str = "pt", offset: int = 0) -> dict:
    """The replay record: the first non-finite step, where it happened, and what a replay starts from.
    Steps are logged steps (loop step + `offset`); `checkpoint_step` is the step in the checkpoint's name."""
    fb = res["first_bad"]
    before = [(s, p) for s, p in ckpt.saved if s < fb["step"]]
    s, p = before[-1]
    extra = {"parameter": fb["parameter"]} if "parameter" in fb else {}
    return {**extra, "first_nonfinite_step": fb["step"] + offset, "phase": fb["phase"], "op": fb["op"], "module": fb["module"],
            "samples": fb["samples"], "checkpoint": str(p.relative_to(ctx.root)), "checkpoint_step": s,
            "batch": f"batches/step_{fb['step'] + offset}.{fmt}"}


# ------------------------------------------------------------------------------ ground-truth helpers

def train_series(res: dict, key: str = "losses") -> dict[int, float]:
    return {s: v for s, v in res[key].items() if s != "val"}


def divergence_onset(losses: dict[int, float], end: int, factor: float = 3.0) -> int:
    """First step after which the loss never falls back below `factor` x the median of the 50 steps
    before it (searched backwards from `end`, the first non-finite step)."""
    steps = [s for s in sorted(losses) if s < end]
    vals = np.array([losses[s] for s in steps])
    onset = steps[-1]
    for i in range(len(steps) - 1, 50, -1):
        base = float(np.median(vals[max(0, i - 80):i - 30]))
        if vals[i - 1] > factor * base or not np.isfinite(vals[i - 1]):
            onset = steps[i - 1]
        else:
            break
    return onset


def gradient_jump(gnorms: dict[int, float], end: int, factor: float = 10.0) -> int:
    """First step whose grad norm exceeds `factor` x the median of all earlier steps' norms."""
    steps = sorted(gnorms)
    for i, s in enumerate(steps[10:], 10):
        if s > end:
            break
        base = float(np.median([gnorms[t] for t in steps[:i]]))
        if not math.isfinite(gnorms[s]) or gnorms[s] > factor * base:
            return s
    return end


def first_nonfinite_ckpt(ckpt: Checkpoints) -> int | None:
    for s, p in ckpt.saved:
        if s >= 0 and p.suffix in (".pt", ".ckpt"):
            obj = torch.load(p, weights_only=True)
            sd = obj.get("model") or obj.get("state_dict")
        elif p.is_dir():
            from safetensors.torch import load_file
            sd = load_file(p / "model.safetensors")
        else:
            from safetensors.torch import load_file
            sd = load_file(p)
        if any(not bool(torch.isfinite(v).all()) for v in sd.values() if v.is_floating_point()):
            return s
    return None


def first_nonfinite(series: dict) -> int | None:
    bad = [s for s, v in series.items() if not math.isfinite(v)]
    return min(bad) if bad else None


def find_spikes(series: dict[int, float], end: int | None = None, factor: float = 8.0, window: int = 10,
                recover: int = 8) -> list[int]:
    """Steps (before `end`) whose value is > `factor` x the median of the `window` points before them and
    that fall back below 2x that median within `recover` points: isolated spikes, not the start of a blow-up."""
    steps = [s for s in sorted(series) if end is None or s < end]
    v = np.array([series[s] for s in steps])
    out = []
    for i in range(window, len(v)):
        base = float(np.median(v[i - window:i]))
        if np.isfinite(v[i]) and v[i] > factor * base and (not out or steps[i] - out[-1] > window):
            after = v[i + 1:i + 1 + recover]
            if len(after) and np.all(np.isfinite(after)) and after.min() < 2 * base:
                out.append(steps[i])
    return out


def checkpoint_update_ratios(ckpt: Checkpoints) -> dict[tuple[int, int], float]:
    """For consecutive finite torch checkpoints a < b: the largest per-tensor ||w_b - w_a|| / ||w_a|| / (b - a)."""
    sds = []
    for s, p in ckpt.saved:
        sd = torch.load(p, weights_only=True)["model"]
        if all(bool(torch.isfinite(v).all()) for v in sd.values()):
            sds.append((s, sd))
    out = {}
    for (a, wa), (b, wb) in zip(sds, sds[1:]):
        out[(a, b)] = max(float((wb[k] - wa[k]).norm() / wa[k].norm()) / (b - a)
                          for k in wa if wa[k].is_floating_point() and float(wa[k].norm()) > 0)
    return out
