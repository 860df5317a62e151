"""What every probe starts from: the run's entry point and config, its earliest and last finite checkpoints, its
saved batches, fresh states rebuilt from a checkpoint, and one watched call of the loss (what the loss function
received, which op and module made it, the first layer's output, each activation's dead or saturated share).

Checkpoints are read through the one layout table (`ingest.checkpoints.read_states`, torch files with
`weights_only=True`, safetensors for weights) and restored with the kit's `build_state`, the door replay uses too
(`forensics.usercode.kit.restore.restore_checkpoint`, here with the read states cached); nothing here writes into the
run directory.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from forensics.usercode.kit.batches import load_batch, to_device
from forensics.usercode.kit.checkpoints import usable
from forensics.usercode.kit.entry import StepOptions, load_entry, nested_config, read_config
from forensics.usercode.kit.modules import ModuleStack
from forensics.usercode.kit.restore import State, build_state

# Loss functions whose call is watched (torch.nn.functional names; nn.CrossEntropyLoss and friends call these).
CLASSIFICATION_LOSSES = ("cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits")
OTHER_LOSSES = ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div", "poisson_nll_loss",
                "gaussian_nll_loss", "cosine_embedding_loss", "margin_ranking_loss", "hinge_embedding_loss")
LOSSES = CLASSIFICATION_LOSSES + OTHER_LOSSES
ACTIVATIONS = ("relu", "relu_", "tanh", "tanh_", "sigmoid", "sigmoid_")
FIRST_LAYERS = ("linear", "conv1d", "conv2d", "conv3d", "embedding", "bilinear")
# Ops that only reshape or cast: the producer of their output is the producer of their input (the logits a head
# made stay the head's after `.flatten(0, 1)`).
PASS_THROUGH = ("flatten", "view", "reshape", "permute", "transpose", "contiguous", "squeeze", "unsqueeze", "float",
                "to", "type_as", "__getitem__", "view_as", "reshape_as", "clone", "double", "half", "bfloat16")
SATURATED = 0.99  # |tanh| above this, or sigmoid within 0.01 of 0 or 1: the unit passes almost no gradient


def check_result(name: str, status: str, summary: str, evidence: dict | None = None, names: list[str] | None = None,
                 explains: tuple[str, ...] | list[str] = ()) -> dict[str, Any]:
    """One check's answer, the documented shape: status pass / fail / n/a, a sentence with the numbers in it."""
    return {"name": name, "status": status, "summary": summary, "evidence": evidence or {}, "names": names or [],
            "explains": list(explains)}


@dataclass
class Call:
    """One watched loss call: the function, what its input looked like, which op and module produced it, and the
    target (the batch key it is, when it is one)."""

    func: str
    input: torch.Tensor
    target: torch.Tensor | None
    producer: tuple[str, str | None] | None   # (op, module) that made the input; module None: outside the model
    target_key: str | None = None             # the batch entry the target is, or is a view of
    target_shared: bool = False               # that entry (its storage) also feeds the model's forward


@dataclass
class Observation:
    """One forward through `loss_fn`, watched."""

    loss: torch.Tensor
    calls: list[Call] = field(default_factory=list)
    first_layer: dict[str, Any] | None = None  # module, op, output std and |max|
    activations: list[dict[str, Any]] = field(default_factory=list)  # module, op, units, dead / saturated share

    @property
    def loss_call(self) -> Call | None:
        """The watched loss call the loss came from (the last one: an auxiliary loss may come first)."""
        return self.calls[-1] if self.calls else None


class _Watch(TorchFunctionMode):
    """Sees every torch function the user's code calls: records each output's producer (op, module), the loss
    calls, the first layer, and the activations' dead or saturated shares (computed once, without grad)."""

    def __init__(self, stack: ModuleStack, obs: Observation):
        super().__init__()
        self.stack, self.obs = stack, obs
        self.producer: dict[int, tuple[str, str | None]] = {}
        self.alive: list[torch.Tensor] = []  # keeps outputs alive so that no id is reused during the forward

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        module = self.stack.current
        if name in LOSSES and args and isinstance(args[0], torch.Tensor):
            target = args[1] if len(args) > 1 else kwargs.get("target")
            self.obs.calls.append(Call(name, args[0].detach(), target if isinstance(target, torch.Tensor) else None,
                                       self.producer.get(id(args[0]))))
        elif name in FIRST_LAYERS and self.obs.first_layer is None and isinstance(out, torch.Tensor):
            x = out.detach().float()
            self.obs.first_layer = {"module": module, "op": name, "std": float(x.std()) if x.numel() > 1 else 0.0,
                                    "abs_max": float(x.abs().max()) if x.numel() else 0.0}
        elif name in ACTIVATIONS and isinstance(out, torch.Tensor) and out.dim() > 1:
            self.obs.activations.append(_activation(name.rstrip("_"), module, out.detach()))
        if isinstance(out, torch.Tensor):
            made = (name, module if self.stack.names else None)  # None: called outside every module (in loss_fn)
            if name in PASS_THROUGH and args and isinstance(args[0], torch.Tensor):
                made = self.producer.get(id(args[0]), made)
            self.producer[id(out)] = made
            self.alive.append(out)
        return out


def _activation(op: str, module: str, y: torch.Tensor) -> dict[str, Any]:
    """A ReLU's dead share (units, i.e. every position but the batch's, zero for every sample) or a tanh/sigmoid's
    saturated share (outputs within 1 % of a bound)."""
    y = y.float()
    if op == "relu":
        dead = (y <= 0).all(dim=0)
        return {"module": module, "op": op, "units": int(dead.numel()), "dead_fraction": float(dead.float().mean())}
    sat = y.abs() > SATURATED if op == "tanh" else (y < 1 - SATURATED) | (y > SATURATED)
    return {"module": module, "op": op, "units": int(y[0].numel()), "saturated_fraction": float(sat.float().mean())}


def observe(st: State, batch: dict[str, torch.Tensor]) -> Observation:
    """Call `loss_fn` once under the watch; the loss keeps its graph (a caller may call backward)."""
    obs = Observation(loss=torch.tensor(float("nan")))
    stack = ModuleStack(st.model)
    fed: set[int] = set()  # storages of the tensors the model's forward received

    def inputs(module, args, kwargs):
        fed.update(_storage(t) for t in (*args, *kwargs.values()) if isinstance(t, torch.Tensor))

    hook = st.model.register_forward_pre_hook(inputs, with_kwargs=True)
    try:
        with _Watch(stack, obs):
            obs.loss = st.entry.loss_fn(st.model, batch)
    finally:
        stack.close()
        hook.remove()
    for c in obs.calls:
        c.target_key = _batch_key(c.target, batch)
        c.target_shared = c.target_key is not None and _storage(batch[c.target_key]) in fed
    return obs


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _batch_key(t: torch.Tensor | None, batch: dict[str, torch.Tensor]) -> str | None:
    """The batch entry a tensor is, or is a view of (same storage: `labels.flatten()`, `tokens[:, 1:]`)."""
    if t is None:
        return None
    for k, v in batch.items():
        if t is v:
            return k
    return next((k for k, v in batch.items() if _storage(t) == _storage(v)), None)


@dataclass
class Context:
    """The run's ingredients, loaded once and shared by the checks."""

    run: Any
    root: Path
    entry: Any
    config: dict
    options: StepOptions
    device: torch.device
    rows: list[dict]                          # usable checkpoints (finite, with a step), by step
    batch_paths: dict[int, str]
    notes: list[str] = field(default_factory=list)
    _saved: dict[str, Any] = field(default_factory=dict)   # path -> ingest.checkpoints.States, read once
    _batches: dict[int, dict[str, torch.Tensor]] = field(default_factory=dict)
    _observed: dict[str, Observation] = field(default_factory=dict)

    @classmethod
    def open(cls, run: Any, root: Path, entry_path: Path, device_name: str) -> Context:
        from forensics.usercode.kit.device import choose_device
        from ingest.errors import CheckpointMismatch, MissingBatch

        config, _ = read_config(root, nested_config(run._configs))
        entry = load_entry(entry_path)
        ck = run.table("checkpoints")
        rows = sorted(usable(ck.to_dicts() if ck.height else []), key=lambda r: r["step"])
        if not rows:
            raise CheckpointMismatch(f"run {run.name} has no finite checkpoint with a step: a probe needs the run's "
                                     f"weights (forensics.capture saves them, step 0 included)")
        b = run.table("batches")
        paths = {int(s): p for s, p in zip(b["step"].to_list(), b["path"].to_list()) if s is not None} if b.height else {}
        if not paths:
            raise MissingBatch(f"run {run.name} has no saved batch: a probe needs one (forensics.capture saves the "
                               f"first batches of a run)")
        ctx = cls(run, root, entry, config, StepOptions.from_entry(entry, config), choose_device(device_name), rows, paths)
        if rows[0]["step"] != 0:
            ctx.notes.append(f"no step-0 checkpoint: the earliest is {rows[0]['path']} (step {rows[0]['step']})")
        return ctx

    # -- checkpoints and states

    def row(self, which: str) -> dict:
        """"first": the earliest finite checkpoint (step 0 when saved); "last": the last finite one."""
        return self.rows[0] if which == "first" else self.rows[-1]

    def checkpoints(self) -> dict[str, Any]:
        return {w: {"path": self.row(w)["path"], "step": int(self.row(w)["step"])} for w in ("first", "last")}

    def state(self, which: str) -> State:
        """A fresh model, optimizer and scheduler with the checkpoint's states (replay's order, DECISIONS.md §10)."""
        r = self.row(which)
        from ingest.checkpoints import read_states

        if r["path"] not in self._saved:
            self._saved[r["path"]] = read_states(self.root, r["path"], r["format"])
        # a deep copy: the optimizer's state tensors would otherwise alias the cached checkpoint's
        return build_state(self.entry, self.config, copy.deepcopy(self._saved[r["path"]]), self.device)

    def initial(self) -> bool:
        return int(self.rows[0]["step"]) == 0

    # -- batches

    def batch_steps(self) -> list[int]:
        return sorted(self.batch_paths)

    def batch_near(self, which: str) -> int:
        """The saved batch to use with a checkpoint: the first saved after it (the step it would train on next),
        else the last saved before it."""
        step = int(self.row(which)["step"])
        after = [s for s in self.batch_steps() if s > step]
        return after[0] if after else self.batch_steps()[-1]

    def batch(self, step: int) -> dict[str, torch.Tensor]:
        if step not in self._batches:
            self._batches[step] = load_batch(self.root, self.batch_paths[step])
        return to_device(self._batches[step], self.device)

    # -- the watched loss call

    def observation(self, which: str) -> Observation:
        """One watched forward (no grad) on the checkpoint's batch; cached per checkpoint."""
        if which not in self._observed:
            st = self.state(which)
            with torch.no_grad():
                self._observed[which] = observe(st, self.batch(self.batch_near(which)))
        return self._observed[which]


def finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)
