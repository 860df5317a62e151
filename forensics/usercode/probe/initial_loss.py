"""initial_loss: the loss at the step-0 checkpoint against -log(1/C), the loss of a uniform guess over C classes.

C comes from the loss input's width (the class dimension `cross_entropy`/`nll_loss` received) or, for binary
losses, 2 per element; the config's class count is shown beside it. The thresholds are the
initial_loss_mismatch detector's (one judgement, one home): at least `high` x log(C) or at most `low` x log(C).
Measured at step 0 itself, so none of the detector's caveats about logging windows applies.
"""

from __future__ import annotations

import math
from typing import Any

from forensics.judge.detectors.initial_loss_mismatch import InitialLossMismatch
from forensics.usercode.probe.context import CLASSIFICATION_LOSSES, Context, check_result



def check(ctx: Context, me: Any) -> dict[str, Any]:
    from forensics.judge.detectors.base import class_count

    if not ctx.initial():
        return check_result(me.name, "n/a", f"no step-0 checkpoint (the earliest is step {ctx.row('first')['step']}): the "
                            f"loss at initialisation cannot be measured; forensics.capture saves one",
                            explains=me.explains)
    obs = ctx.observation("first")
    call = obs.loss_call
    if call is None or call.func not in CLASSIFICATION_LOSSES:
        what = call.func if call else "no watched loss function"
        return check_result(me.name, "n/a", f"the loss is {what}, not a classification loss: no log(C) to compare with",
                            explains=me.explains)
    loss = float(obs.loss)
    if call.func.startswith("binary"):
        c, source = 2, f"{call.func}: two outcomes per element"
    else:
        c = int(call.input.shape[1] if call.input.dim() > 1 else call.input.shape[0])
        source = f"the width of {call.func}'s input"
    configured = class_count(ctx.run)
    rule = InitialLossMismatch()
    log_c = math.log(c)
    ratio = loss / log_c
    ev = {"loss": loss, "classes": c, "classes_from": source, "log_classes": log_c, "ratio": ratio,
          "high": rule.high, "low": rule.low, "config_classes": configured[0] if configured else None,
          "checkpoint": ctx.row("first")["path"], "batch_step": ctx.batch_near("first")}
    op, module = call.producer or (None, None)
    names = [module] if module else []
    said = f"step-0 loss {loss:.4g} is {ratio:.2f} x log({c}) = {log_c:.3g}"
    if not math.isfinite(loss):
        return check_result(me.name, "fail", f"step-0 loss is {loss}: non-finite at initialisation", ev, names, me.explains)
    if ratio >= rule.high:
        return check_result(me.name, "fail", f"{said}: confidently wrong at initialisation (the output layer "
                            f"{module or 'of the model'} gives large logits: init scale, double softmax, a summed loss)",
                            ev, names, me.explains)
    if ratio <= rule.low:
        return check_result(me.name, "fail", f"{said}: far below a uniform guess at initialisation (labels leak into "
                            f"the inputs, or the weights are not fresh)", ev, names, me.explains)
    return check_result(me.name, "pass", f"{said}, within [{rule.low}, {rule.high}] x", ev, explains=me.explains)
