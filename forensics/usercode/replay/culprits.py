"""Culprit samples: the smallest set of samples whose presence makes the step non-finite.

Forward failures: per-sample losses. Backward failures: per-sample gradient norms in one vectorised pass
(`torch.func.vmap(grad(...))` over `functional_call`), falling back to one backward per sample when the model
does not vectorise. When no single sample fails alone but the batch does (samples coupled, e.g. batch norm),
delta debugging (ddmin) shrinks the batch to a 1-minimal failing subset.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from forensics.usercode.kit.batches import batch_size, select
from forensics.usercode.kit.restore import State
from forensics.usercode.replay.state import autocast, nonfinite


def per_sample_losses(st: State, batch: dict[str, torch.Tensor]) -> list[float]:
    """Each sample's own loss (the entry's mean loss over a batch of one), in one pass where vmap works."""
    from torch.func import functional_call, vmap

    model, loss_fn = st.model, st.entry.loss_fn
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}
    n = batch_size(batch)
    keys = [k for k, v in batch.items() if v.dim() > 0 and v.shape[0] == n]

    def one(sample: dict[str, torch.Tensor]) -> torch.Tensor:
        b = {k: v.unsqueeze(0) for k, v in sample.items()}
        return loss_fn(_Functional(model, params, buffers, functional_call), b)

    with torch.no_grad(), autocast(st), _quiet_vmap():
        try:
            out = vmap(one, randomness="same")({k: batch[k] for k in keys})
            return [float(v) for v in out.float()]
        except (RuntimeError, ValueError, NotImplementedError):  # ops vmap cannot batch: one forward per sample
            try:
                return [float(loss_fn(model, select(batch, [i])).float()) for i in range(n)]
            except (RuntimeError, ValueError):  # a model that cannot run one sample (batch norm in train mode)
                return []


@contextmanager
def _quiet_vmap() -> Iterator[None]:
    """Silences vmap's notice that an op has no batching rule and runs one sample at a time ("There is a
    performance drop because we have not yet implemented the batching rule for aten::..."): torch's note to its own
    developers, printed twice per replay on stderr beside our output; the per-sample numbers are the same."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="There is a performance drop because we have not yet implemented")
        yield


class _Functional(torch.nn.Module):
    """A stand-in for the model that `loss_fn` can call like the model, running it with given parameters."""

    def __init__(self, model, params, buffers, functional_call):
        super().__init__()
        object.__setattr__(self, "_m", model)
        object.__setattr__(self, "_pb", {**params, **buffers})
        object.__setattr__(self, "_fc", functional_call)

    def forward(self, *args, **kwargs):
        return self._fc(self._m, self._pb, args, kwargs)

    def __getattr__(self, name):  # a loss_fn reading model.config or similar sees the real model's attribute
        return getattr(object.__getattribute__(self, "_m"), name)


def per_sample_grad_norms(st: State, batch: dict[str, torch.Tensor]) -> tuple[list[float], list[bool], str]:
    """Each sample's gradient norm and whether its gradient is finite, with the method used ("vmap" or "loop")."""
    from torch.func import functional_call, grad, vmap

    model, loss_fn = st.model, st.entry.loss_fn
    params = {k: v.detach() for k, v in model.named_parameters() if v.requires_grad}
    buffers = {k: v.detach() for k, v in model.named_buffers()}
    n = batch_size(batch)
    keys = [k for k, v in batch.items() if v.dim() > 0 and v.shape[0] == n]

    def loss_one(p: dict, sample: dict[str, torch.Tensor]) -> torch.Tensor:
        b = {k: v.unsqueeze(0) for k, v in sample.items()}
        return loss_fn(_Functional(model, p, buffers, functional_call), b)

    try:
        with autocast(st), _quiet_vmap():
            g = vmap(grad(loss_one), in_dims=(None, 0), randomness="same")(params, {k: batch[k] for k in keys})
        flat = torch.cat([v.reshape(n, -1).float() for v in g.values()], dim=1)
        finite = torch.isfinite(flat).all(dim=1)
        norms = torch.linalg.vector_norm(flat, dim=1)
        return [float(x) for x in norms], [bool(x) for x in finite], "vmap"
    except (RuntimeError, ValueError, NotImplementedError):  # ops vmap cannot batch: one backward per sample
        try:
            return _grad_norms_loop(st, batch)
        except (RuntimeError, ValueError):  # a model that cannot run one sample (batch norm in train mode)
            model.zero_grad(set_to_none=True)
            return [], [], "unavailable"


def _grad_norms_loop(st: State, batch: dict[str, torch.Tensor]) -> tuple[list[float], list[bool], str]:
    """One backward per sample: the fallback where vmap cannot batch the model's ops."""
    model, loss_fn, n = st.model, st.entry.loss_fn, batch_size(batch)
    norms, fin = [], []
    for i in range(n):
        model.zero_grad(set_to_none=True)
        with autocast(st):
            loss = loss_fn(model, select(batch, [i]))
        loss.backward()
        gs = [p.grad for p in model.parameters() if p.grad is not None]
        fin.append(not any(nonfinite(x) for x in gs))
        norms.append(float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(x.float()) for x in gs])))
                     if gs else 0.0)
    model.zero_grad(set_to_none=True)
    return norms, fin, "loop"


def minimal_removal(n: int, finite_without: Callable[[set[int]], bool]) -> list[int]:
    """The smallest set of rows whose removal makes the step finite, by adaptive group testing (halving):
    about 2 log2(n) re-runs per culprit. Removal, not presence, so coupled samples (batch norm, which cannot
    run on one sample) are judged inside a full-size batch. Removing every row counts as finite."""

    def ok(removed: set[int]) -> bool:
        return len(removed) >= n or finite_without(removed)

    def search(cands: list[int], base: set[int]) -> list[int]:
        if len(cands) == 1:
            return cands
        a, b = cands[: len(cands) // 2], cands[len(cands) // 2:]
        if ok(base | set(a)):
            return search(a, base)
        if ok(base | set(b)):
            return search(b, base)
        in_a = search(a, base | set(b))
        return in_a + search(b, base | set(in_a))

    return sorted(search(list(range(n)), set()))


def find_culprits(st: State, batch: dict[str, torch.Tensor], phase: str) -> dict[str, Any]:
    """The culprit samples for a forward or backward failure, with how they were found and their statistics
    against the rest of the batch. An optimizer-phase failure has no culprit samples."""
    n = batch_size(batch)
    if phase == "optimizer":
        return {"samples": [], "method": "none", "note": "forward and backward are finite: no sample is to blame"}
    # a backward failure has a finite batch loss: go straight to per-sample gradients
    losses = per_sample_losses(st, batch) if phase == "forward" else []
    bad = [i for i, v in enumerate(losses) if not math.isfinite(v)]
    method, per_sample = "per_sample_loss", {"loss": losses}
    if not bad and phase in ("forward", "backward"):  # finite losses: the samples whose own gradient is not
        norms, fin, how = per_sample_grad_norms(st, batch)
        bad = [i for i, ok in enumerate(fin) if not ok]
        method, per_sample["grad_norm"] = f"per_sample_grad_norm_{how}", norms
    if not bad:  # no sample fails alone: coupled samples (batch statistics): remove samples until it is finite
        bad = minimal_removal(n, lambda out: not _step_fails(st, select(batch, [i for i in range(n) if i not in out])))
        method = "bisection"
    return {"samples": bad, "method": method, "per_sample": per_sample, "stats": sample_stats(batch, bad)}


def _step_fails(st: State, batch: dict[str, torch.Tensor]) -> bool:
    """Whether the forward or backward pass on these samples gives a non-finite loss or gradient."""
    st.optimizer.zero_grad(set_to_none=True)
    with autocast(st):
        loss = st.entry.loss_fn(st.model, batch)
    if nonfinite(loss.detach()):
        return True
    loss.backward()
    bad = any(nonfinite(p.grad) for p in st.model.parameters() if p.grad is not None)
    st.optimizer.zero_grad(set_to_none=True)
    return bad


def sample_stats(batch: dict[str, torch.Tensor], rows: list[int]) -> dict[str, Any]:
    """Per input tensor: the culprits' NaN/Inf counts and largest |value| against the median of the rest."""
    n = batch_size(batch)
    rest = [i for i in range(n) if i not in set(rows)]
    out = {}
    for k, v in batch.items():
        if v.dim() == 0 or v.shape[0] != n or not rows:
            continue
        x = v.detach().reshape(n, -1)
        entry: dict[str, Any] = {}
        if x.is_floating_point():
            xf = x.float()
            absmax = torch.nan_to_num(xf, nan=0.0, posinf=0.0, neginf=0.0).abs().max(dim=1).values
            entry["culprit_nonfinite"] = [int((~torch.isfinite(xf[i])).sum()) for i in rows[:16]]
            entry["culprit_abs_max"] = [float(absmax[i]) for i in rows[:16]]
            entry["rest_abs_max_median"] = float(absmax[rest].median()) if rest else None
        else:
            entry["culprit_values"] = [x[i].tolist()[:32] for i in rows[:4]]
        out[k] = entry
    return out


def spike_drivers(st: State, batch: dict[str, torch.Tensor], top: int = 5) -> dict[str, Any]:
    """For a finite step (a loss spike, exploding gradients): the samples with the largest losses and
    gradient norms against the batch median, and the layers holding most of the gradient norm."""
    losses = per_sample_losses(st, batch)
    norms, _, how = per_sample_grad_norms(st, batch)
    st.optimizer.zero_grad(set_to_none=True)
    with autocast(st):
        loss = st.entry.loss_fn(st.model, batch)
    loss.backward()
    layers = {n: float(torch.linalg.vector_norm(p.grad.float())) for n, p in st.model.named_parameters()
              if p.grad is not None}
    st.optimizer.zero_grad(set_to_none=True)
    total = math.sqrt(sum(v * v for v in layers.values())) or 1.0

    def ranked(values: list[float]) -> list[dict[str, Any]]:
        if not values:
            return []
        med = sorted(values)[len(values) // 2]
        order = sorted(range(len(values)), key=lambda i: -values[i] if math.isfinite(values[i]) else -math.inf)
        return [{"sample": i, "value": values[i], "x_median": values[i] / med if med else None} for i in order[:top]]

    return {"loss": float(loss.detach()), "grad_norm": total,
            "samples_by_loss": ranked(losses), "samples_by_grad_norm": ranked(norms), "grad_norm_method": how,
            "layers_by_grad_norm": [{"parameter": n, "grad_norm": v, "share_of_squared_norm": (v / total) ** 2}
                                    for n, v in sorted(layers.items(), key=lambda kv: -kv[1])[:top]]}
