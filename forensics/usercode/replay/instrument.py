"""The bad step, instrumented: where its first non-finite value appears, in the forward pass, the backward pass
or the optimizer's update.

Forward: a `TorchFunctionMode` sees every torch function the user's code calls (`linear`, `log`, `conv2d`: the
names a user wrote), in order; the first whose output holds NaN/Inf and lies on the autograd path (attention
masks hold -inf on purpose and need no grad) is the culprit. Module forward hooks keep the stack of running modules, and the Python stack trimmed to files outside torch and this package gives file:line. The
culprit call alone is run once more under a `TorchDispatchMode` to name the aten ops it ran (`aten.addmm`).

Backward: `detect_anomaly(check_nan=True)` checks NaN only (pytorch#83537), so instead every node of the
`grad_fn` graph gets a hook; the first node, in execution order, that returns a non-finite gradient from finite
incoming ones is the culprit, named with the forward op and module that created it.

Optimizer: forward and backward finite, then each stage on a copy: a GradScaler's `unscale_`, `clip_grad_norm_`
(a total norm that overflows float32 from finite gradients makes the clip coefficient 0, or NaN against an inf
gradient), then the update: the first parameter it turns non-finite, with the optimizer state at the bad elements
(`exp_avg_sq` = 0 with `eps` = 0).
"""

from __future__ import annotations

import copy
import linecache
import math
import os
import sys
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.weak import WeakIdKeyDictionary

from forensics.usercode.kit.modules import ModuleStack
from forensics.usercode.kit.restore import State
from forensics.usercode.replay.state import autocast, nonfinite, run_step

_TORCH_DIR = os.path.dirname(torch.__file__)
_OUR_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


_SKIP = (_TORCH_DIR, _OUR_DIR, os.path.dirname(os.__file__), "<")


_USER_CODE: dict[Any, bool] = {}  # code object -> whether it is the user's (cached: checked once per function)


def user_line(frame: Any) -> tuple[str | None, int | None]:
    """(file, line) of the innermost frame, from `frame` outwards, in the user's code (not torch, not this
    package, not the standard library). Walks frames directly, with a per-code-object cache: traceback's
    extract_stack reads source lines for every frame, too slow to run for every op."""
    while frame is not None:
        code = frame.f_code
        mine = _USER_CODE.get(code)
        if mine is None:
            mine = _USER_CODE[code] = not os.path.abspath(code.co_filename).startswith(_SKIP)
        if mine:
            return code.co_filename, frame.f_lineno
        frame = frame.f_back
    return None, None


def user_frame() -> tuple[str | None, int | None, str | None]:
    """The caller's innermost user frame: file, line and its source line."""
    f, line = user_line(sys._getframe(1))
    return f, line, (linecache.getline(f, line).strip() or None) if f else None


def _quick_nonfinite(g: Any) -> bool:
    """NaN/Inf anywhere in g: its sum is finite only if every element is (a NaN or Inf always reaches the sum),
    one reduction without the boolean tensor isfinite makes; a non-finite sum (maybe overflow) is checked exactly."""
    if not isinstance(g, torch.Tensor) or not g.is_floating_point():
        return False
    return not bool(torch.isfinite(g.sum())) and nonfinite(g)


def tensor_stats(t: torch.Tensor) -> dict[str, Any]:
    """Counts and range of one tensor: what an op received."""
    out: dict[str, Any] = {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", "")}
    if not t.is_floating_point() or t.numel() == 0:
        return out
    x = t.detach().float()
    fin = x[torch.isfinite(x)]
    out.update({"n_nan": int(torch.isnan(x).sum()), "n_inf": int(torch.isinf(x).sum()),
                "n_zero": int((x == 0).sum()),
                "min": float(fin.min()) if fin.numel() else None, "max": float(fin.max()) if fin.numel() else None,
                "abs_max": float(fin.abs().max()) if fin.numel() else None})
    return out


def _tensors(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for v in x for t in _tensors(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _tensors(v)]
    return []


class _AtenOps(TorchDispatchMode):
    """The aten ops each torch call dispatches to (`linear` -> `aten.addmm`): names only, no checks, so cheap."""

    def __init__(self):
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


def _aten_ops_of(func, name: str, args: tuple, kwargs: dict) -> list[str]:
    """The aten ops one torch call dispatches to, by calling it once more under a dispatch mode (no grad, RNG
    forked). Only for the culprit call, so the whole forward pays nothing; in-place calls are not repeated."""
    if name.endswith("_"):
        return []
    aten = _AtenOps()
    with torch.no_grad(), torch.random.fork_rng(devices=[]), aten:
        func(*args, **kwargs)
    return list(dict.fromkeys(aten.ops))


class _Recorder(TorchFunctionMode):
    """Remembers who made each tensor (op, module) and the first non-finite output on the autograd path;
    with `owners`, also which op and module created each autograd node (for the backward pass)."""

    def __init__(self, modules: ModuleStack, owners: dict | None = None):
        super().__init__()
        self.modules, self.owners = modules, owners
        self.made = WeakIdKeyDictionary()
        self.hit: dict[str, Any] | None = None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = getattr(func, "__name__", str(func))
        if name.startswith("__") or name in ("dim", "size", "numel", "is_floating_point"):
            return out
        outs = _tensors(out)
        where = self.modules.current
        for o in outs:
            self.made[o] = (name, where)
            if self.owners is not None and o.grad_fn is not None and o.grad_fn not in self.owners:
                self.owners[o.grad_fn] = (name, where, *user_line(sys._getframe(1)))
        if self.hit is None and any(nonfinite(o) and o.requires_grad for o in outs):
            f, line, src = user_frame()
            inputs = {}
            for i, t in enumerate(_tensors((args, kwargs))):
                st = tensor_stats(t)
                made = self.made.get(t)
                st["from"] = ("input" if made is None else f"parameter {made[1]}" if made[0] == "parameter"
                              else f"{made[1]}.{made[0]}" if made[1] else made[0])
                inputs[f"arg{i}"] = st
            self.hit = {"phase": "forward", "op": name, "module": where, "file": f, "line": line, "source": src,
                        "aten_ops": _aten_ops_of(func, name, args, kwargs),
                        "inputs": inputs, "output": tensor_stats(outs[0])}
        return out


def recorded_forward(st: State, batch: dict[str, torch.Tensor], owners: dict | None = None
                     ) -> tuple[dict | None, torch.Tensor]:
    """The forward pass under the recorder: the first non-finite op (or None) and the loss; with `owners`, it
    also maps each autograd node to the op and module that made it (for the backward pass)."""

    mods = ModuleStack(st.model)
    rec = _Recorder(mods, owners)
    for name, p in st.model.named_parameters():
        rec.made[p] = ("parameter", name)
    st.optimizer.zero_grad(set_to_none=True)
    try:
        with autocast(st), rec:
            loss = st.entry.loss_fn(st.model, batch)
    finally:
        mods.close()
    return rec.hit, loss


def first_nonfinite_forward(st: State, batch: dict[str, torch.Tensor]) -> tuple[dict | None, torch.Tensor]:
    """Run the forward pass recording ops; the first non-finite op (or None) and the loss."""
    return recorded_forward(st, batch)


def first_nonfinite_backward(st: State, batch: dict[str, torch.Tensor], loss: torch.Tensor | None = None,
                             owners: dict | None = None) -> dict | None:
    """Backward with a hook on every node of the graph: the first node returning a non-finite gradient (NaN
    or Inf) from finite incoming gradients. Without `loss`, a recorded forward pass makes one (and `owners`)."""
    if loss is None:
        owners = {}
        _, loss = recorded_forward(st, batch, owners)
    owners = owners if owners is not None else {}
    hits: list[dict] = []
    seen, todo, handles = set(), [loss.grad_fn], []
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        todo.extend(n for n, _ in node.next_functions)

        def hook(grad_inputs, grad_outputs, node=node):
            if hits:
                return
            if any(_quick_nonfinite(g) for g in grad_inputs) and not any(nonfinite(g) for g in grad_outputs):
                bad = next(g for g in grad_inputs if nonfinite(g))
                op, module, f, line = owners.get(node, ("", "", None, None))
                src = (linecache.getline(f, line).strip() or None) if f else None
                hits.append({"phase": "backward", "op": type(node).__name__, "module": module,
                             "forward_op": op or None, "file": f, "line": line, "source": src,
                             "inputs": {"incoming_grad": tensor_stats(next((g for g in grad_outputs if g is not None),
                                                                           torch.empty(0)))},
                             "output": tensor_stats(bad)})
        handles.append(node.register_hook(hook))
    try:
        loss.backward()
    finally:
        for h in handles:
            h.remove()
    if not hits:  # hooks saw nothing: fall back to the first parameter with a non-finite gradient
        bad = [n for n, p in st.model.named_parameters() if p.grad is not None and nonfinite(p.grad)]
        if bad:
            hits.append({"phase": "backward", "op": "AccumulateGrad", "module": bad[0].rpartition(".")[0],
                         "parameter": bad[0], "file": None, "line": None, "inputs": {}})
    st.optimizer.zero_grad(set_to_none=True)
    return hits[0] if hits else None


def first_nonfinite_update(st: State, batch: dict[str, torch.Tensor]) -> dict | None:
    """The step on a copy of model and optimizer; the first parameter the update made non-finite and the
    optimizer state at its bad elements."""
    twin = _twin(st)
    model, opt = twin.model, twin.optimizer
    before = {n: bool(torch.isfinite(p).all()) for n, p in model.named_parameters()}
    out = run_step(twin, batch)
    if out.stage in ("unscale_", "clip_grad_norm_"):
        return _before_the_update(st, batch, out.stage)
    if out.params_finite:
        return None
    index = {id(p): n for n, p in model.named_parameters()}
    for group in opt.param_groups:
        for p in group["params"]:
            name = index.get(id(p))
            if name is None or not before[name] or not nonfinite(p):
                continue
            bad = ~torch.isfinite(p.detach())
            state = {}
            for k, v in opt.state.get(p, {}).items():
                if isinstance(v, torch.Tensor) and v.shape == p.shape:
                    vals = v.detach()[bad].float()
                    state[k] = {"at_bad_elements_min": float(vals.min()), "at_bad_elements_max": float(vals.max()),
                                "zeros_at_bad_elements": int((vals == 0).sum())}
            hyper = {k: v for k, v in group.items() if k != "params" and isinstance(v, (int, float, bool)) or k == "betas"}
            return {"phase": "optimizer", "op": f"{type(opt).__name__}.step", "module": name.rpartition(".")[0],
                    "parameter": name, "file": None, "line": None,
                    "inputs": {"n_bad_elements": int(bad.sum()), "state": state,
                               "hyperparameters": {k: (list(v) if isinstance(v, tuple) else v) for k, v in hyper.items()}}}
    return None


def _twin(st: State) -> State:
    model, opt, sched, scaler = copy.deepcopy((st.model, st.optimizer, st.scheduler, st.scaler))
    return State(st.entry, st.config, st.options, model, opt, sched, scaler, st.device, st.restored, st.notes)


def _before_the_update(st: State, batch: dict[str, torch.Tensor], stage: str) -> dict:
    """The optimizer phase's first stages, redone on a copy: the gradients `unscale_` made non-finite, or the
    total norm `clip_grad_norm_` overflowed (float32: a sum of squares past 3.4e38 from finite gradients of ~1e19),
    with the parameters whose gradient norms drive it and what the clip coefficient did to the gradients."""
    twin = _twin(st)
    twin.optimizer.zero_grad(set_to_none=True)
    with autocast(twin, fp32=False):
        loss = twin.entry.loss_fn(twin.model, batch)
    (twin.scaler.scale(loss) if twin.scaler is not None else loss).backward()
    named = [(n, p) for n, p in twin.model.named_parameters() if p.grad is not None]
    if stage == "unscale_":
        scale = twin.scaler.get_scale()
        twin.scaler.unscale_(twin.optimizer)
        name = next(n for n, p in named if nonfinite(p.grad))
        return {"phase": "optimizer", "op": "GradScaler.unscale_", "module": name.rpartition(".")[0],
                "parameter": name, "file": None, "line": None,
                "inputs": {"scale": scale, "gradient": tensor_stats(dict(named)[name].grad)}}
    if twin.scaler is not None:
        twin.scaler.unscale_(twin.optimizer)
    norms = {n: float(torch.linalg.vector_norm(p.grad.detach())) for n, p in named}  # as clip_grad_norm_ computes them
    total = float(torch.linalg.vector_norm(torch.tensor(list(norms.values()))))
    first = next((n for n, v in norms.items() if not math.isfinite(v)), max(norms, key=norms.get))
    max_norm = float(twin.options.max_grad_norm)
    torch.nn.utils.clip_grad_norm_([p for _, p in named], max_norm)
    after = torch.cat([p.grad.detach().flatten().float() for _, p in named])
    n_nan, n_zero = int(torch.isnan(after).sum()), int((after == 0).sum())
    largest = sorted(norms.items(), key=lambda kv: -kv[1] if math.isfinite(kv[1]) else -math.inf)[:3]
    effect = ("every gradient scaled to 0: the update does nothing" if n_zero == after.numel() else
              f"{n_nan:,} of {after.numel():,} gradient elements NaN, {n_zero:,} zero")
    return {"phase": "optimizer", "op": "clip_grad_norm_", "module": first.rpartition(".")[0], "parameter": first,
            "file": None, "line": None,
            "inputs": {"total_norm": {"value": total, "max_norm": max_norm, "clip_coef": max_norm / (total + 1e-6),
                                      "from": "finite gradients" if all(not nonfinite(p.grad) for _, p in named)
                                      else "non-finite gradients"},
                       "largest_parameter_norms": {n: v for n, v in largest},
                       "gradients_after_clipping": {"effect": effect}}}


def locate(st: State, batch: dict[str, torch.Tensor], phase: str) -> dict | None:
    """The first non-finite value of the step, searched from the forward pass on (the state is left as found:
    the forward and backward passes change no weights, the update runs on a copy)."""
    owners: dict = {}
    hit, loss = recorded_forward(st, batch, owners)  # one forward serves both passes
    if hit is not None:
        return hit
    hit = first_nonfinite_backward(st, batch, loss, owners)
    if hit is not None:
        return hit
    return first_nonfinite_update(st, batch)
