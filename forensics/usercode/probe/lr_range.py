"""lr_range: Smith's LR range test (2017) from the last finite checkpoint: the run's optimizer, fresh, with its LR
swept exponentially from `LR_MIN` to `LR_MAX` over `STEPS` steps across the saved batches (cycled), the loss
smoothed as fastai's `lr_find` does (EMA, bias-corrected), stopping when it exceeds `EXPLODE` x its best.

Read as the LR-finder literature reads the curve (Smith 2017; fastai's `lr_find`): the loss starts to fall where
the smoothed loss is first `START_FALL` below its small-LR level, it is lowest at the loss-minimum LR (fastai
suggests a tenth of it), and it explodes where it leaves `EXPLODE` x its best. Against the run's LR (the restored
optimizer's or its schedule's base LR, whichever is larger, else the largest logged `lr`): too low when `BELOW` x
(an order of magnitude) or more below where the loss starts to fall; too high when above the loss-minimum LR, or
within `NEAR` x of where the loss explodes (at that LR a step overshoots: the loss oscillates or diverges). A sweep
whose smoothed loss never falls `FALL` below its start found no working range at all: a failed sweep, which says
nothing of the run's LR (n/a), never a pass. Measured here: on one batch alone, ten updates keep lowering its loss
up to LR 1-10, so no upper limit shows: hence several batches. A 10 % fall accumulates over many steps of the
sweep, so the LR where it is reached lies well above where the fall begins (×4-30 on the tests' and the gallery's
runs); the start of the fall is the 2 % point.
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
FALL = 0.1          # the smoothed loss 10 % below its start: the sweep found a working range
START_FALL = 0.02   # the smoothed loss 2 % below its start: the loss starts to fall
BELOW = 10.0        # the run's LR this x (an order of magnitude) or more below where the loss starts to fall: too low
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
    """Where the smoothed loss starts to fall, is 10 % down, falls fastest, is lowest, and explodes."""
    lrs, sm, explode = res["lrs"], res["smoothed"], res["exploded_at"]
    # the baseline: the mean loss over the first SKIP steps, whose LRs (< 1e-6) leave the model as it was
    start = float(np.mean(res["losses"][:SKIP])) if len(sm) >= SKIP else math.nan
    late = list(zip(lrs, sm))[SKIP:]
    starts = next((lr for lr, s in late if s <= (1 - START_FALL) * start), None)
    fall = next((lr for lr, s in late if s <= (1 - FALL) * start), None)
    steepest = lowest = None
    upto = len(sm) - 1 if explode is not None else len(sm)  # the exploding point is not a descent
    if upto >= SKIP + 3:  # the EMA's first points are mostly noise (fastai skips 10 too)
        d = np.gradient(np.asarray(sm[:upto]), np.log10(np.asarray(lrs[:upto])))[SKIP:]
        steepest = float(lrs[SKIP + int(np.argmin(d))]) if float(np.min(d)) < 0 else None
    if upto > 0:
        lowest = float(lrs[int(np.argmin(sm[:upto]))])
    return {"lr_starts_to_fall": starts, "lr_falls": fall, "lr_steepest": steepest, "lr_min_loss": lowest,
            "lr_explodes": explode, "start_loss": start, "best_loss": min(sm) if sm else None}


def _num(x: float | None) -> str:
    return "none" if x is None else f"{x:.4g}"


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
          "curve_lr": res["lrs"], "curve_loss": res["losses"], "below": BELOW, "near": NEAR,
          "start_fall": START_FALL, "fall": FALL}
    status, summary, explains = judge(found, lr, me.explains)
    return check_result(me.name, status, summary, ev, [f"lr={lr:.3g}"] if status == "fail" else None, explains)


def judge(found: dict[str, Any], lr: float | None,
          explains: tuple[str, ...]) -> tuple[str, str, tuple[str, ...]]:
    """(status, summary, the kinds it explains) for a run at `lr` against the sweep's points (`analyse`); a pass or
    an n/a explains the check's own kinds (`explains`: its class's)."""
    starts, fall, explode = found["lr_starts_to_fall"], found["lr_falls"], found["lr_explodes"]
    steep, lowest = found["lr_steepest"], found["lr_min_loss"]
    where = (f"the loss starts to fall at LR {starts:.2g}" if starts else "") + \
        (f", is {FALL:.0%} down at {fall:.2g}" if fall else "") + \
        (f", falls fastest at {steep:.2g}" if steep else "") + \
        (f", is lowest at {lowest:.2g}" if lowest else "") + \
        (f", explodes at {explode:.2g}" if explode else f", no explosion up to {LR_MAX:g}")
    if fall is None:
        return ("n/a", f"the sweep failed: its smoothed loss never fell {FALL:.0%} below its start "
                f"({_num(found['start_loss'])}; lowest {_num(found['best_loss'])}) at any LR from {LR_MIN:g} to {LR_MAX:g}, "
                f"so it shows no working range to judge the run's LR against ({where.lstrip(', ')})", explains)
    if lr is None:
        return "n/a", f"{where.lstrip(', ')}; the run's LR is unknown (no optimizer LR, no logged lr)", explains
    if starts is not None and lr * BELOW <= starts:
        return ("fail", f"the run's LR {lr:.3g} is {_x(starts, lr)} below where the loss starts to fall ({starts:.2g}): "
                f"too low; {where}", ("flat_loss", "plateau", "underfitting"))
    if lowest is not None and lr > lowest:
        return ("fail", f"the run's LR {lr:.3g} is above the LR where the sweep's loss is lowest ({lowest:.2g}): too "
                f"high, the loss rises from there; {where}", ("oscillation", "plateau"))
    if explode is not None and lr * NEAR > explode:
        return ("fail", f"the run's LR {lr:.3g} is within {NEAR:g}x of where the loss explodes ({explode:.2g}): "
                f"steps overshoot; {where}", ("oscillation", "plateau"))
    return "pass", f"the run's LR {lr:.3g} lies in the working range: {where.lstrip(', ')}", explains
