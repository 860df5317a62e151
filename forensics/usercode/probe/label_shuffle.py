"""label_shuffle: from the last finite checkpoint, the loss with the targets permuted within the batch against the
loss with the true pairing. A trained model whose loss is no better on the true pairing than on a random one
makes predictions that do not depend on which input goes with which label: a data-pipeline misalignment
(targets shuffled, sorted or offset independently of the inputs).

Needs the target to come from a batch entry of its own (the loss call's target, watched, or a view of it such as
`labels.flatten()`); a target sliced from an entry the model also reads (a language model's shifted tokens) cannot
be permuted apart from the inputs: n/a. So is a run whose only checkpoint is the state at initialisation; a model
whose weights barely moved since the earliest checkpoint has learned nothing to align, and one whose outputs are the
same for every sample (dead layers) does not look at its inputs at all: n/a (see overfit_one_batch, lr_range,
gradient_flow).
"""

from __future__ import annotations

from typing import Any

import torch

from forensics.usercode.probe.context import Context, check_result

PERMUTATIONS = 5
MIN_GAP = 0.1       # the true pairing's loss must be at least 10 % below the permuted one's
MIN_MOVED = 1e-3    # ||w_last - w_first|| / ||w_first|| below this: the model has not trained


def moved(ctx: Context) -> float | None:
    """How far the weights moved between the earliest and the last checkpoint, relative to the earliest."""
    if ctx.row("first")["path"] == ctx.row("last")["path"]:
        return None
    a, b = ctx.state("first").model.state_dict(), ctx.state("last").model.state_dict()
    keys = [k for k in a if a[k].is_floating_point()]
    diff = sum(float((b[k].float() - a[k].float()).pow(2).sum()) for k in keys) ** 0.5
    base = sum(float(a[k].float().pow(2).sum()) for k in keys) ** 0.5
    return diff / base if base else None


def check(ctx: Context, me: Any) -> dict[str, Any]:
    obs = ctx.observation("last")
    call = obs.loss_call
    if call is None or call.target is None:
        return check_result(me.name, "n/a", "no watched loss call with a target tensor: nothing to permute",
                            explains=me.explains)
    if call.target_key is None or call.target_shared:
        why = (f"taken from batch entry {call.target_key!r}, which also feeds the model (a language model's shifted "
               f"tokens)" if call.target_shared else "not a batch entry (made inside loss_fn)")
        return check_result(me.name, "n/a", f"{call.func}'s target is {why}: it cannot be permuted apart from the inputs",
                            {"loss": call.func, "target_key": call.target_key}, explains=me.explains)
    out = call.input.float()
    if out.dim() > 0 and out.shape[0] > 1 and float((out - out[0]).abs().max()) <= 1e-6 * (1 + float(out.abs().max())):
        return check_result(me.name, "n/a", f"the model's outputs ({call.func}'s input) are the same for every sample of "
                            f"the batch: they do not depend on the inputs at all, so the pairing cannot show (see "
                            f"gradient_flow)", {"loss": call.func, "target_key": call.target_key}, explains=me.explains)
    if ctx.initial() and ctx.row("last")["path"] == ctx.row("first")["path"]:
        return check_result(me.name, "n/a", f"the only checkpoint, {ctx.row('last')['path']}, is the state at "
                            f"initialisation: an untrained model's predictions ignore the labels whatever the pairing "
                            f"(measured: +0.5 % on a correctly paired gallery run)", {"weights_moved": None},
                            explains=me.explains)
    rel = moved(ctx)
    if rel is not None and rel < MIN_MOVED:
        return check_result(me.name, "n/a", f"the weights moved by {rel:.2g} of their norm between "
                            f"{ctx.row('first')['path']} and {ctx.row('last')['path']}: the model has not trained, so "
                            f"the pairing cannot show (see overfit_one_batch, lr_range)", {"weights_moved": rel},
                            explains=me.explains)
    st = ctx.state("last")
    step = ctx.batch_near("last")
    batch = ctx.batch(step)
    key = call.target_key
    n = batch[key].shape[0]
    if n < 2:
        return check_result(me.name, "n/a", f"the saved batch of step {step} holds one sample: nothing to permute",
                            explains=me.explains)
    gen = torch.Generator().manual_seed(0)
    losses = []
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        for i in range(PERMUTATIONS + 1):
            torch.manual_seed(0)  # the same dropout masks for the true and the permuted pairings
            b = dict(batch)
            if i:
                perm = torch.randperm(n, generator=gen).to(batch[key].device)
                b[key] = batch[key].index_select(0, perm)
            losses.append(float(st.entry.loss_fn(st.model, b)))
    true, permuted = losses[0], sum(losses[1:]) / PERMUTATIONS
    gap = (permuted - true) / abs(permuted) if permuted else 0.0
    ev = {"checkpoint": ctx.row("last")["path"], "batch_step": step, "target_key": key, "loss_true": true,
          "loss_permuted_mean": permuted, "loss_permuted": losses[1:], "gap": gap, "min_gap": MIN_GAP,
          "weights_moved": rel}
    said = (f"loss {true:.4g} with the true pairing vs {permuted:.4g} with '{key}' permuted within the batch "
            f"(mean of {PERMUTATIONS}): {gap:+.1%}")
    if gap < MIN_GAP:
        return check_result(me.name, "fail", f"{said}: the model's predictions do not depend on which input goes with "
                            f"which label; check that '{key}' is shuffled together with the inputs", ev, [key],
                            me.explains)
    return check_result(me.name, "pass", said, ev, explains=me.explains)
