"""gradient_flow: one backward pass on a saved batch from the last finite checkpoint; per parameter, whether its
gradient is None (not connected to the loss: a `.detach()`, an unused branch), exactly zero, `requires_grad=False`
(frozen), or whether it is missing from the optimizer's parameter groups (never updated); per layer, the share
of dead ReLU units and saturated tanh/sigmoid outputs, against the dead_relu and saturated_activation detectors'
thresholds (one judgement, one home); the first layer's gradient norm against the last one's, against the
vanishing_gradients detector's ratio. With two checkpoints, a parameter that gets a non-zero gradient and is in the
optimizer but holds exactly the same values in the earliest and the last checkpoint was never updated by the run:
its loop skipped `backward()` or `optimizer.step()`, its optimizer held other tensors (a head replaced after the
optimizer was built), or every update fell below float precision. The probe's own backward cannot see a missing `backward()` in the run's loop; the
checkpoints can. Named by parameter and module.
"""

from __future__ import annotations

from typing import Any


from forensics.judge.detectors.dead_relu import DeadRelu
from forensics.judge.detectors.saturated_activation import SaturatedActivation
from forensics.judge.detectors.vanishing_gradients import VanishingGradients
from forensics.usercode.probe.context import Context, check_result, observe

# what each problem explains
PROBLEM_EXPLAINS = {"frozen": ("flat_loss", "plateau", "frozen_parameters"),
                    "not_in_optimizer": ("flat_loss", "plateau", "frozen_parameters"),
                    "not_connected": ("flat_loss", "plateau", "vanishing_gradients", "frozen_parameters"),
                    "zero_grad": ("flat_loss", "vanishing_gradients"),
                    "never_updated": ("flat_loss", "plateau", "frozen_parameters"),
                    "vanishing": ("vanishing_gradients", "flat_loss", "plateau", "underfitting"),
                    "dead_relu": ("dead_relu", "vanishing_gradients", "plateau"),
                    "saturated": ("saturated_activation", "vanishing_gradients", "plateau")}
WORDS = {"frozen": "requires_grad=False", "not_in_optimizer": "not in the optimizer's parameter groups",
         "not_connected": "gradient None (not connected to the loss)", "zero_grad": "gradient exactly zero",
         "never_updated": "never updated by the run (a non-zero gradient, in the optimizer, yet the same values in "
                          "the earliest and the last checkpoint: the loop skips backward() or optimizer.step(), its "
                          "optimizer steps other tensors, or every update is below float precision)"}


def _short(names: list[str], shown: int = 4) -> str:
    return ", ".join(names[:shown]) + (f", ... ({len(names)} in all)" if len(names) > shown else "")


def unchanged(ctx: Context) -> set[str] | None:
    """Parameters whose values are identical in the earliest and the last checkpoint (None: only one checkpoint)."""
    if ctx.row("first")["path"] == ctx.row("last")["path"]:
        return None
    a, b = ctx.state("first").model.named_parameters(), dict(ctx.state("last").model.named_parameters())
    return {n for n, p in a if n in b and p.shape == b[n].shape and bool((p.detach() == b[n].detach()).all())}


def vanishing(norms: dict[str, float], ratio: float) -> dict[str, Any] | None:
    """The first layer's gradient norm against the last one's (layers: modules holding a weight matrix, in the
    model's order), as the vanishing_gradients detector compares logged per-layer norms."""
    layers = [n.rsplit(".", 1)[0] for n in norms if n.endswith("weight") and norms[n] > 0]
    if len(layers) < 2:
        return None
    a, b = norms[layers[0] + ".weight"], norms[layers[-1] + ".weight"]
    if a > ratio * b:
        return None
    return {"first_layer": layers[0], "last_layer": layers[-1], "first_norm": a, "last_norm": b, "ratio": a / b,
            "threshold": ratio}


def check(ctx: Context, me: Any) -> dict[str, Any]:
    st = ctx.state("last")
    step = ctx.batch_near("last")
    st.optimizer.zero_grad(set_to_none=True)
    obs = observe(st, ctx.batch(step))
    if not obs.loss.requires_grad:
        return check_result(me.name, "fail", f"the loss does not require grad: no parameter is connected to it "
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
    same = unchanged(ctx)
    if same:
        found["never_updated"] = [n for n, p in st.model.named_parameters()
                                  if n in same and p.requires_grad and id(p) in in_opt and norms.get(n, 0.0) > 0]
    st.optimizer.zero_grad(set_to_none=True)
    vanish = vanishing(norms, VanishingGradients().ratio)
    dead_at, sat_at = DeadRelu().threshold, SaturatedActivation().threshold
    layers = obs.activations
    dead = [a for a in layers if a.get("dead_fraction", 0.0) > dead_at]
    sat = [a for a in layers if a.get("saturated_fraction", 0.0) > sat_at]
    found = {k: v for k, v in found.items() if v}
    ev = {"checkpoint": ctx.row("last")["path"], "batch_step": step, "loss": float(obs.loss.detach()),
          "parameters": sum(1 for _ in st.model.parameters()), **found, "grad_norms": norms, "layers": layers,
          "dead_threshold": dead_at, "saturated_threshold": sat_at, "vanishing": vanish,
          "compared_checkpoints": None if same is None else [ctx.row("first")["path"], ctx.row("last")["path"]]}
    parts = [f"{len(v)} parameter(s) {WORDS[k]}: {_short(v)}" for k, v in found.items()]
    parts += [f"{a['module'] or a['op']} ({a['op']}): {a['dead_fraction']:.0%} of {a['units']} units dead" for a in dead]
    parts += [f"{a['module'] or a['op']} ({a['op']}): {a['saturated_fraction']:.0%} of outputs saturated" for a in sat]
    if vanish:
        parts.append(f"the first layer {vanish['first_layer']}'s gradient norm {vanish['first_norm']:.3g} is "
                     f"{vanish['ratio']:.2g} x the last layer {vanish['last_layer']}'s {vanish['last_norm']:.3g} "
                     f"(vanishing below {vanish['threshold']:g})")
    if not parts:
        worst = max((a.get("dead_fraction", a.get("saturated_fraction", 0.0)) for a in layers), default=0.0)
        return check_result(me.name, "pass", f"every one of {ev['parameters']} parameters gets a non-zero gradient and "
                            f"is in the optimizer; {len(layers)} activation layer(s), worst dead/saturated share "
                            f"{worst:.0%}", ev, explains=me.explains)
    names = sorted({n for v in found.values() for n in v} | {a["module"] for a in dead + sat if a["module"]}
                   | ({vanish["first_layer"], vanish["last_layer"]} if vanish else set()))
    explains = sorted({k for p in list(found) + (["dead_relu"] if dead else []) + (["saturated"] if sat else [])
                       + (["vanishing"] if vanish else []) for k in PROBLEM_EXPLAINS[p]})
    return check_result(me.name, "fail", "; ".join(parts), ev, names, explains)
