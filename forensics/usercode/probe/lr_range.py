"""lr_range: Smith's LR range test (2017) from the last finite checkpoint: the run's optimizer, fresh, with its LR
swept exponentially from `LR_MIN` to `LR_MAX` over `STEPS` steps across the saved batches (cycled), the loss
smoothed as fastai's `lr_find` does (EMA, bias-corrected), stopping when it exceeds `EXPLODE` x its best.

Reports where the loss starts to fall (first LR at which the smoothed loss is `FALL` below its start), the LR of
steepest descent, and where the loss explodes, against the run's LR (the restored optimizer's or its schedule's
base LR, whichever is larger, else the largest logged `lr`). Fails when the run's LR is more than `BELOW` x below
where the loss starts to fall, or within `NEAR` x of where it explodes (at that LR a step overshoots: the loss oscillates or diverges). Measured here: on one batch
alone, ten updates keep lowering its loss up to LR 1-10, so no upper limit shows: hence several batches.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from forensics.usercode.probe.context import Context, check_result

LR_MIN, LR_MAX, STEPS = 1e-7, 10.0, 100
BETA = 0.9          # EMA of the loss (fastai uses 0.98 over its longer sweeps)
EXPLODE = 4.0       # smoothed loss above this x its best: the sweep stops
FALL = 0.1          # the smoothed loss 10 % below its start: the loss starts to fall
BELOW = 100.0       # the run's LR more than this x below where the loss falls: too low
SKIP = 10          # the first points of the sweep, left out of the steepest descent
NEAR = 3.0          # the run's LR within this factor of where the loss explodes: too high


def sweep(ctx: Context) -> dict[str, Any]:
    st = ctx.state("last")
    opt = ctx.entry.build_optimizer(st.model, ctx.config) if callable(getattr(ctx.entry, "build_optimizer", None)) \
        else torch.optim.SGD(st.model.parameters(), lr=LR_MIN)
    base = [g["lr"] or 1.0 for g in opt.param_groups]
    ref = max(base)
    steps = ctx.batch_steps()
    batches = [ctx.batch(s) for s in steps]
    lrs, raw, smooth = [], [], []
    avg, best, exploded = 0.0, math.inf, None
    for i in range(STEPS):
        lr = LR_MIN * (LR_MAX / LR_MIN) ** (i / (STEPS - 1))
        for g, b in zip(opt.param_groups, base):
            g["lr"] = lr * b / ref  # the run's ratios between groups kept
        opt.zero_grad(set_to_none=True)
        loss = st.entry.loss_fn(st.model, batches[i % len(batches)])
        value = float(loss.detach())
        lrs.append(lr)
        raw.append(value)
        if not math.isfinite(value):
            exploded = lr
            break
        avg = BETA * avg + (1 - BETA) * value
        s = avg / (1 - BETA ** (i + 1))
        smooth.append(s)
        best = min(best, s)
        if s > EXPLODE * best:
            exploded = lr
            break
        if not loss.requires_grad:
            break
        loss.backward()
        if st.options.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(st.model.parameters(), float(st.options.max_grad_norm))
        opt.step()
    return {"lrs": lrs, "losses": raw, "smoothed": smooth, "batches": steps, "exploded_at": exploded}


def run_lr(ctx: Context) -> tuple[float | None, str]:
    """The LR the run trained at: the restored optimizer's, or its scheduler's base LR when larger (a schedule that
    decayed to ~0 by the last checkpoint is not a run at LR ~0: measured on the gallery's healthy transformer, whose
    cosine schedule ends at 1e-7); else the largest logged `lr`."""
    st = ctx.state("last")
    lrs = [max(g.get("lr") or 0.0, g.get("initial_lr") or 0.0) for g in st.optimizer.param_groups]
    lrs = [lr for lr in lrs if lr]
    if lrs and callable(getattr(ctx.entry, "build_optimizer", None)):
        return max(lrs), f"the optimizer restored from {ctx.row('last')['path']} (its schedule's base LR when larger)"
    name = ctx.run.pick("lr")
    if name:
        v = [x for x in ctx.run.series_named(name)["value"].to_list() if x is not None and math.isfinite(x)]
        if v:
            return float(max(v)), f"the logged '{name}' (its largest value)"
    return None, "none"


def analyse(res: dict[str, Any]) -> dict[str, Any]:
    """Where the smoothed loss starts to fall, falls fastest, and explodes."""
    lrs, sm, explode = res["lrs"], res["smoothed"], res["exploded_at"]
    # the baseline: the mean loss over the first SKIP steps, whose LRs (< 1e-6) leave the model as it was
    start = float(np.mean(res["losses"][:SKIP])) if len(sm) >= SKIP else math.nan
    fall = next((lr for lr, s in list(zip(lrs, sm))[SKIP:] if s <= (1 - FALL) * start), None)
    steepest = None
    upto = len(sm) - 1 if explode is not None else len(sm)  # the exploding point is not a descent
    if upto >= SKIP + 3:  # the EMA's first points are mostly noise (fastai skips 10 too)
        d = np.gradient(np.asarray(sm[:upto]), np.log10(np.asarray(lrs[:upto])))[SKIP:]
        steepest = float(lrs[SKIP + int(np.argmin(d))]) if float(np.min(d)) < 0 else None
    return {"lr_falls": fall, "lr_steepest": steepest, "lr_explodes": explode, "start_loss": start,
            "best_loss": min(sm) if sm else None}


def _x(a: float, b: float) -> str:
    """"10^4 x" for a ratio of 1e4, "30 x" for 30."""
    r = a / b
    return f"10^{round(math.log10(r))}x" if r >= 1000 else f"{r:.3g}x"


def check(ctx: Context, me: Any) -> dict[str, Any]:
    res = sweep(ctx)
    found = analyse(res)
    lr, lr_from = run_lr(ctx)
    ev = {"checkpoint": ctx.row("last")["path"], "run_lr": lr, "run_lr_from": lr_from, **found,
          "steps_run": len(res["lrs"]), "sweep": [LR_MIN, LR_MAX, STEPS], "batches": res["batches"],
          "curve_lr": res["lrs"], "curve_loss": res["losses"], "below": BELOW, "near": NEAR}
    fall, explode, steep = found["lr_falls"], found["lr_explodes"], found["lr_steepest"]
    where = (f"the loss falls from LR {fall:.2g}" if fall else "the loss never falls 10 %") + \
        (f", fastest at {steep:.2g}" if steep else "") + \
        (f", explodes at {explode:.2g}" if explode else f", no explosion up to {LR_MAX:g}")
    if lr is None:
        return check_result(me.name, "n/a", f"{where}; the run's LR is unknown (no optimizer LR, no logged lr)", ev,
                            explains=me.explains)
    names = [f"lr={lr:.3g}"]
    if fall is not None and lr * BELOW < fall:
        return check_result(me.name, "fail", f"the run's LR {lr:.3g} is {_x(fall, lr)} below where the loss starts to "
                            f"fall ({fall:.2g}); {where}", ev, names, ("flat_loss", "plateau", "underfitting"))
    if explode is not None and lr * NEAR > explode:
        return check_result(me.name, "fail", f"the run's LR {lr:.3g} is within {NEAR:g}x of where the loss explodes "
                            f"({explode:.2g}): steps overshoot; {where}", ev, names, ("oscillation", "plateau"))
    return check_result(me.name, "pass", f"the run's LR {lr:.3g} lies in the working range: {where}", ev,
                        explains=me.explains)
