"""gradient_flow: one backward pass on a saved batch from the last finite checkpoint; per parameter, whether its
gradient is None (not connected to the loss: a `.detach()`, an unused branch), exactly zero, `requires_grad=False`
(frozen), or whether it is missing from the optimizer's parameter groups (never updated); per layer, the share
of dead ReLU units and saturated tanh/sigmoid outputs, against the dead_relu and saturated_activation detectors'
thresholds (one judgement, one home). Named by parameter and module.
"""

from __future__ import annotations

from typing import Any


from forensics.detectors.dead_relu import DeadRelu
from forensics.detectors.saturated_activation import SaturatedActivation
from forensics.probe.context import Context, check_result, observe

NAME = "gradient_flow"
EXPLAINS = ("flat_loss", "plateau", "underfitting", "vanishing_gradients", "dead_relu", "saturated_activation",
            "frozen_parameters")
# what each problem explains
PROBLEM_EXPLAINS = {"frozen": ("flat_loss", "plateau", "frozen_parameters"),
                    "not_in_optimizer": ("flat_loss", "plateau", "frozen_parameters"),
                    "not_connected": ("flat_loss", "plateau", "vanishing_gradients", "frozen_parameters"),
                    "zero_grad": ("flat_loss", "vanishing_gradients"),
                    "dead_relu": ("dead_relu", "vanishing_gradients", "plateau"),
                    "saturated": ("saturated_activation", "vanishing_gradients", "plateau")}
WORDS = {"frozen": "requires_grad=False", "not_in_optimizer": "not in the optimizer's parameter groups",
         "not_connected": "gradient None (not connected to the loss)", "zero_grad": "gradient exactly zero"}


def _short(names: list[str], shown: int = 4) -> str:
    return ", ".join(names[:shown]) + (f", ... ({len(names)} in all)" if len(names) > shown else "")


def check(ctx: Context) -> dict[str, Any]:
    st = ctx.state("last")
    step = ctx.batch_near("last")
    st.optimizer.zero_grad(set_to_none=True)
    obs = observe(st, ctx.batch(step))
    if not obs.loss.requires_grad:
        return check_result(NAME, "fail", f"the loss does not require grad: no parameter is connected to it "
                            f"(loss {float(obs.loss):.4g})", {"batch_step": step},
                            [n for n, _ in st.model.named_parameters()], PROBLEM_EXPLAINS["not_connected"])
    obs.loss.backward()
    in_opt = {id(p) for g in st.optimizer.param_groups for p in g["params"]}
    found: dict[str, list[str]] = {k: [] for k in WORDS}
    norms = {}
    for name, p in st.model.named_parameters():
        if not p.requires_grad:
            found["frozen"].append(name)
        elif p.grad is None:
            found["not_connected"].append(name)
        elif not bool(p.grad.any()):
            found["zero_grad"].append(name)
        if p.requires_grad and id(p) not in in_opt:
            found["not_in_optimizer"].append(name)
        if p.grad is not None:
            norms[name] = float(p.grad.detach().float().norm())
    st.optimizer.zero_grad(set_to_none=True)
    dead_at, sat_at = DeadRelu().threshold, SaturatedActivation().threshold
    layers = obs.activations
    dead = [a for a in layers if a.get("dead_fraction", 0.0) > dead_at]
    sat = [a for a in layers if a.get("saturated_fraction", 0.0) > sat_at]
    found = {k: v for k, v in found.items() if v}
    ev = {"checkpoint": ctx.row("last")["path"], "batch_step": step, "loss": float(obs.loss.detach()),
          "parameters": sum(1 for _ in st.model.parameters()), **found, "grad_norms": norms, "layers": layers,
          "dead_threshold": dead_at, "saturated_threshold": sat_at}
    parts = [f"{len(v)} parameter(s) {WORDS[k]}: {_short(v)}" for k, v in found.items()]
    parts += [f"{a['module'] or a['op']} ({a['op']}): {a['dead_fraction']:.0%} of {a['units']} units dead" for a in dead]
    parts += [f"{a['module'] or a['op']} ({a['op']}): {a['saturated_fraction']:.0%} of outputs saturated" for a in sat]
    if not parts:
        worst = max((a.get("dead_fraction", a.get("saturated_fraction", 0.0)) for a in layers), default=0.0)
        return check_result(NAME, "pass", f"every one of {ev['parameters']} parameters gets a non-zero gradient and "
                            f"is in the optimizer; {len(layers)} activation layer(s), worst dead/saturated share "
                            f"{worst:.0%}", ev, explains=EXPLAINS)
    names = sorted({n for v in found.values() for n in v} | {a["module"] for a in dead + sat if a["module"]})
    explains = sorted({k for p in list(found) + (["dead_relu"] if dead else []) + (["saturated"] if sat else [])
                       for k in PROBLEM_EXPLAINS[p]})
    return check_result(NAME, "fail", "; ".join(parts), ev, names, explains)
