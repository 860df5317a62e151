"""output_head: what the loss function receives, seen by watching the loss call itself (not by reading source).

Fails when `cross_entropy` gets probabilities (a softmax before CrossEntropyLoss: the loss cannot go below
log(1 + (C-1)/e) and its gradients shrink), when `nll_loss` gets probabilities or raw logits instead of
log-probabilities, or when `binary_cross_entropy_with_logits` gets values that are all in [0, 1] (a sigmoid
before it). Log-probabilities fed to `cross_entropy` are reported but pass: log_softmax of log-probabilities
is the identity, so the loss and its gradients are unchanged.
"""

from __future__ import annotations

from typing import Any

import torch

from forensics.usercode.probe.context import CLASSIFICATION_LOSSES, LOSSES, Context, check_result

TOLERANCE = 1e-3  # rows summing to 1 within this, or log-rows' logsumexp within it of 0


def describe(x: torch.Tensor, class_dim: int) -> dict[str, Any]:
    """Range of the loss input and whether its rows along the class dimension are probabilities or log-probs."""
    x = x.float()
    out: dict[str, Any] = {"shape": list(x.shape), "min": float(x.min()), "max": float(x.max())}
    if x.dim() > class_dim and x.shape[class_dim] > 1:
        sums = x.sum(dim=class_dim)
        lse = torch.logsumexp(x, dim=class_dim)
        out["row_sum_max_error"] = float((sums - 1).abs().max())
        out["row_logsumexp_max_error"] = float(lse.abs().max())
    return out


def kind_of(func: str, stats: dict[str, Any]) -> str:
    """"probabilities", "log-probabilities", "in [0, 1]" or "raw scores" (logits)."""
    in_unit = stats["min"] >= 0 and stats["max"] <= 1
    if in_unit and stats.get("row_sum_max_error", 1.0) <= TOLERANCE:
        return "probabilities"
    if stats["max"] <= 0 and stats.get("row_logsumexp_max_error", 1.0) <= TOLERANCE:
        return "log-probabilities"
    return "in [0, 1]" if in_unit else "raw scores"


# (loss function, what it received) -> the problem; anything else passes
PROBLEMS = {
    ("cross_entropy", "probabilities"): "probabilities (a softmax before the loss, which applies log_softmax itself)",
    ("nll_loss", "probabilities"): "probabilities, not log-probabilities (a log is missing)",
    ("nll_loss", "raw scores"): "raw scores, not log-probabilities (log_softmax is missing)",
    ("nll_loss", "in [0, 1]"): "values in [0, 1], not log-probabilities (log_softmax is missing)",
    ("binary_cross_entropy_with_logits", "probabilities"): "values in [0, 1] (a sigmoid before the loss, which "
                                                           "applies it itself)",
    ("binary_cross_entropy_with_logits", "in [0, 1]"): "values in [0, 1] (a sigmoid before the loss, which applies "
                                                       "it itself)",
}


def check(ctx: Context, me: Any) -> dict[str, Any]:
    obs = ctx.observation("first")
    call = obs.loss_call
    if call is None:
        return check_result(me.name, "n/a", f"loss_fn called none of the watched loss functions ({', '.join(LOSSES[:6])}, "
                            f"...): what the loss receives cannot be judged", explains=me.explains)
    if call.func not in CLASSIFICATION_LOSSES:
        return check_result(me.name, "n/a", f"the loss is {call.func}, not a classification loss: no output head "
                            f"convention to check", {"loss": call.func}, explains=me.explains)
    class_dim = 1 if call.func in ("cross_entropy", "nll_loss") and call.input.dim() > 1 else call.input.dim() - 1
    stats = describe(call.input, class_dim)
    if call.func.startswith("binary"):
        stats.pop("row_sum_max_error", None)  # per-element probabilities: rows need not sum to 1
        stats.pop("row_logsumexp_max_error", None)
    got = kind_of(call.func, stats)
    op, module = call.producer or (None, None)
    where = module or ("the model's own forward" if module == "" else "loss_fn, outside the model")
    made_by = f"{op} in {where}" if op else "an op outside the watched forward"
    ev = {"loss": call.func, "received": got, "producer_op": op, "producer_module": module, **stats}
    problem = PROBLEMS.get((call.func, got))
    if problem:
        names = [module] if module else [op] if op else []  # a softmax called in loss_fn: the op is the name
        return check_result(me.name, "fail", f"{call.func} receives {problem}: made by {made_by}; inputs range "
                            f"[{stats['min']:.3g}, {stats['max']:.3g}]", ev, names, me.explains)
    note = (" (log_softmax twice is harmless: the loss is unchanged)"
            if (call.func, got) == ("cross_entropy", "log-probabilities") else "")
    return check_result(me.name, "pass", f"{call.func} receives {got} from {made_by}{note}", ev, explains=me.explains)
