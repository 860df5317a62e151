"""overfit_one_batch: from the earliest checkpoint (step 0 when saved), train up to `STEPS` steps on one saved
batch with the run's optimizer at its base LR, and, when that does not memorise it, with Adam at 1e-3 as a
control. Passes when the loss falls to `FRACTION` of its start or under `FLOOR`, or is on its way there after
`STEPS` steps: below `NEAR` of its start and still falling by a quarter or more over the last quarter of the steps (a
descent under way; Adam at 1e-3 takes about 200 steps to memorise 32 samples of the tests' MLP, the gallery's healthy
CNN at SGD 0.02 about 400: 1.41 -> 0.96 at step 150, 0.42 at step 200, 0.011 at step 400).

A model that cannot memorise one batch with either optimizer has a bug in its objective, architecture or
gradients, not a hyperparameter (Karpathy's recipe, the debugging guides). When only the control memorises it,
the model is fine and the run's optimizer settings are what fails: the check passes and says so (lr_range
answers which LR works).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from forensics.usercode.probe.context import Context, check_result

STEPS = 200
FRACTION = 0.01
FLOOR = 1e-3
CONTROL_LR = 1e-3
NEAR = 0.5          # "on its way": below half of the start ...
STILL = 0.75        # ... and the last quarter of the steps lowered it by a quarter or more


def train(ctx: Context, control: bool, batch: dict[str, torch.Tensor]) -> dict[str, Any]:
    """Losses of up to STEPS updates on `batch` (stopping at the target or a non-finite loss), as the run steps:
    its clipping, no scheduler (the base LR throughout, warmup or not)."""
    st = ctx.state("first")
    if control:
        opt = torch.optim.Adam([p for p in st.model.parameters() if p.requires_grad], lr=CONTROL_LR)
        how = f"Adam at lr {CONTROL_LR:g}"
    else:
        opt = st.optimizer
        for g in opt.param_groups:  # a scheduler's warmup may hold the LR at 0 at step 0: use its base LR
            g["lr"] = max(g["lr"], g.get("initial_lr", 0.0))
        how = f"the run's {type(opt).__name__} at lr {max(g['lr'] for g in opt.param_groups):.3g}"
    losses: list[float] = []
    target = None
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        loss = st.entry.loss_fn(st.model, batch)
        value = float(loss.detach())
        losses.append(value)
        if target is None:
            target = max(FRACTION * abs(value), FLOOR)
        if not math.isfinite(value) or value <= target or not loss.requires_grad:
            break
        loss.backward()
        if st.options.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(st.model.parameters(), float(st.options.max_grad_norm))
        opt.step()
    best = min((v for v in losses if math.isfinite(v)), default=float("nan"))
    quarter = losses[-(len(losses) // 4 + 1)]
    falling = len(losses) == STEPS and best <= NEAR * abs(losses[0]) and losses[-1] <= STILL * quarter
    return {"optimizer": how, "start": losses[0], "best": best, "final": losses[-1], "steps": len(losses),
            "target": target, "memorised": bool(target is not None and best <= target) or falling,
            "still_falling": falling, "diverged": not math.isfinite(losses[-1])}


def check(ctx: Context, me: Any) -> dict[str, Any]:
    step = min(ctx.batch_steps(), key=lambda s: abs(s - int(ctx.row("first")["step"]) - 1))
    batch = ctx.batch(step)
    run = train(ctx, False, batch)
    ev: dict[str, Any] = {"checkpoint": ctx.row("first")["path"], "batch_step": step, "max_steps": STEPS,
                          "fraction": FRACTION, "floor": FLOOR, "run_optimizer": run}
    said = (f"{run['optimizer']}: loss {run['start']:.4g} -> {run['best']:.4g} in {run['steps']} steps"
            + (" (diverged)" if run["diverged"] else "") + (", still falling" if run["still_falling"] else ""))
    if run["memorised"]:
        return check_result(me.name, "pass", f"memorised one batch: {said}", ev, explains=me.explains)
    control = train(ctx, True, batch)
    ev["control"] = control
    said_c = f"{control['optimizer']}: loss {control['start']:.4g} -> {control['best']:.4g} in {control['steps']} steps"
    if control["memorised"]:
        return check_result(me.name, "pass", f"the model can memorise one batch ({said_c}), but not with the run's "
                            f"settings ({said}): the optimizer's settings, not the model, fail (see lr_range, "
                            f"gradient_flow)", ev,
                            explains=me.explains)
    target = f"{FRACTION:.0%} of the start or {FLOOR:g}"
    return check_result(me.name, "fail", f"cannot memorise one batch of {len(next(iter(batch.values())))} samples "
                        f"(target {target}): {said}; {said_c}: a bug in the objective, architecture or gradients",
                        ev, [], me.explains)
