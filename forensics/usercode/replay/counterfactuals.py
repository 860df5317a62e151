"""Counterfactuals: the fix a diagnosis implies, tested over the failing window. Each change is replayed from the
checkpoint the replay started at through the failing step (a divergence is made over many steps: a change applied to
the last step alone starts from weights that already blew up and tests nothing), and each says whether the window
stays finite and how the loss moves.

One small class per change: its `name`, `why_not` (why it cannot apply to this run, None when it can),
`same_as_run` (why it is what the run already did, so the replay is its answer) and `step` (one step of the window
with the change; `culprits` is given at the failing step only, the samples found in its batch). When a change
"fixes" the window without touching what failed it says so: clipping a step whose total norm is inf is finite only
because every gradient was scaled to 0 (the update did nothing). `likely_fix` picks the change that kept the window
finite with the lowest loss at its end, with the evidence.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from forensics.usercode.kit.batches import batch_size, select
from forensics.usercode.kit.restore import State
from forensics.usercode.replay.state import StepOut, restore, run_step

DEFAULT_CLIP = 1.0  # the clipping threshold tried where the run configures none (a common default)


@dataclass(frozen=True)
class Fp32:
    """The forward pass without autocast (float32 throughout)."""

    name: ClassVar[str] = "fp32"

    def why_not(self, st: State, culprits: list[int], batch: dict[str, torch.Tensor], no_divergence: str | None) -> str | None:
        return None

    def same_as_run(self, st: State) -> str | None:
        if not st.options.autocast_dtype:
            return "the run already computes in float32 (no autocast in step_options): same as the replay"
        return None

    def step(self, st: State, batch: dict[str, torch.Tensor], culprits: list[int]) -> StepOut:
        return run_step(st, batch, fp32=True)


@dataclass(frozen=True)
class Clip:
    """clip_grad_norm_ at the run's own threshold (its config's, else DEFAULT_CLIP) before every update."""

    max_norm: float = DEFAULT_CLIP

    @property
    def name(self) -> str:
        return f"clip_{self.max_norm}"

    def why_not(self, st: State, culprits: list[int], batch: dict[str, torch.Tensor], no_divergence: str | None) -> str | None:
        return no_divergence and f"{no_divergence}: no exploding gradient for clipping to hold back"

    def same_as_run(self, st: State) -> str | None:
        if st.options.max_grad_norm is not None and st.options.max_grad_norm <= self.max_norm:
            return f"the run already clips at {st.options.max_grad_norm:g}: same as the replay"
        return None

    def step(self, st: State, batch: dict[str, torch.Tensor], culprits: list[int]) -> StepOut:
        return run_step(st, batch, max_grad_norm=self.max_norm)

    def no_effect(self, outs: list[StepOut]) -> str | None:
        if all(math.isfinite(o.grad_norm) and o.grad_norm <= self.max_norm for o in outs):
            return f"every gradient norm is under {self.max_norm:g}: clipping changes nothing"
        return None


@dataclass(frozen=True)
class LrDiv:
    """The learning rate divided by `factor` on every step of the window (the schedule otherwise as run)."""

    name: ClassVar[str] = "lr_div_10"
    factor: float = 10.0

    def why_not(self, st: State, culprits: list[int], batch: dict[str, torch.Tensor], no_divergence: str | None) -> str | None:
        return no_divergence and f"{no_divergence}: no divergence for a lower LR to prevent"

    def same_as_run(self, st: State) -> str | None:
        return None

    def step(self, st: State, batch: dict[str, torch.Tensor], culprits: list[int]) -> StepOut:
        return run_step(st, batch, lr_scale=1 / self.factor)


# An `eps` this many times below its optimizer's default is taken as (about) zero: Adam's update divides by
# sqrt(v) + eps, which is 0/0 where a gradient is always 0.
EPS_TOO_SMALL = 1e-3


def default_eps(optimizer: torch.optim.Optimizer) -> float | None:
    """The `eps` default of the optimizer's class (Adam's 1e-8), None when it takes none."""
    p = inspect.signature(type(optimizer).__init__).parameters.get("eps")
    return float(p.default) if p is not None and isinstance(p.default, (int, float)) else None


@dataclass(frozen=True)
class SaneEps:
    """The optimizer's `eps` back to its class default, where the run set it to (about) zero."""

    name: ClassVar[str] = "eps_default"

    def why_not(self, st: State, culprits: list[int], batch: dict[str, torch.Tensor], no_divergence: str | None) -> str | None:
        eps = [g["eps"] for g in st.optimizer.param_groups if "eps" in g]
        sane = default_eps(st.optimizer)
        if not eps or sane is None:
            return f"{type(st.optimizer).__name__} has no eps"
        if min(eps) >= sane * EPS_TOO_SMALL:
            return f"eps is {min(eps):g}, not far below {type(st.optimizer).__name__}'s default {sane:g}"
        return None

    def same_as_run(self, st: State) -> str | None:
        return None

    def step(self, st: State, batch: dict[str, torch.Tensor], culprits: list[int]) -> StepOut:
        return run_step(st, batch, hyper={"eps": default_eps(st.optimizer)})


@dataclass(frozen=True)
class DropCulprits:
    """The culprit samples removed from the failing step's batch (the steps before it as run)."""

    name: ClassVar[str] = "drop_culprits"
    failing_step_only: ClassVar[bool] = True  # the steps before are the replay's own: it starts from its snapshot

    def why_not(self, st: State, culprits: list[int], batch: dict[str, torch.Tensor], no_divergence: str | None) -> str | None:
        if not culprits:
            return "no culprit samples to drop"
        if len(culprits) >= batch_size(batch):
            return "every sample is a culprit"
        return None

    def same_as_run(self, st: State) -> str | None:
        return None

    def step(self, st: State, batch: dict[str, torch.Tensor], culprits: list[int]) -> StepOut:
        if not culprits:
            return run_step(st, batch)
        drop = set(culprits)
        return run_step(st, select(batch, [i for i in range(batch_size(batch)) if i not in drop]))


def changes_for(clip_threshold: float | None) -> tuple[Any, ...]:
    """The counterfactuals of one replay, clipping at the run's own threshold where it has one."""
    return (Fp32(), Clip(clip_threshold or DEFAULT_CLIP), LrDiv(), SaneEps(), DropCulprits())


def not_diverging(baseline: dict[int, StepOut]) -> str | None:
    """Why the replayed window is no divergence (its loss and gradient norm never grow fidelity.BLOWUP times), or
    None when it is one: lr/10 and clipping are the fixes a divergence implies."""
    from forensics.usercode.replay.fidelity import BLOWUP, blowing_up

    if blowing_up(baseline):
        return None
    first, last = min(baseline), max(baseline)
    span = f"step {first}" if first == last else f"steps {first}-{last}"
    return f"{span} do not blow up (loss and gradient norm within {BLOWUP:g}x of their first values)"


def try_changes(st: State, start: dict, steps: list[int], load: Callable[[int], dict[str, torch.Tensor]],
                culprits: list[int], baseline: dict[int, StepOut], phase: str | None = None,
                changes: tuple[Any, ...] = changes_for(None), failing: dict | None = None) -> list[dict[str, Any]]:
    """Each change replayed over `steps` (the window: the first step after the checkpoint through the failing step)
    from the snapshot `start`, as JSON rows; a change that acts at the failing step only starts from `failing`, the
    snapshot before it, where given (the steps before are the replay's own). `baseline` is the replay's own window
    (its failing step the re-run): a change that is what the run already did is not re-run but reports it. `phase`
    is where the replay located the failing step's first non-finite value: a change that fails there the way the
    replay did reports that phase too. A change stops at the first step it leaves non-finite."""
    rows = []
    last = steps[-1]
    bad_batch = load(last)
    no_divergence = not_diverging(baseline)
    for cf in changes:
        row: dict[str, Any] = {"change": cf.name, "window": [steps[0], last]}
        why_not = cf.why_not(st, culprits, bad_batch, no_divergence)
        if why_not is not None:
            rows.append({**row, "applicable": False, "finite": None, "loss": None, "grad_norm": None, "note": why_not})
            continue
        notes = []
        same = cf.same_as_run(st)
        if same is not None:
            outs = [(s, baseline[s]) for s in steps]
            row["rerun"] = False
            notes.append(same)
        else:
            shortcut = getattr(cf, "failing_step_only", False) and failing is not None
            restore(st, failing if shortcut else start)
            outs = [(s, baseline[s]) for s in steps[:-1]] if shortcut else []
            for s in steps[len(outs):]:
                out = cf.step(st, bad_batch if s == last else load(s), culprits if s == last else [])
                outs.append((s, out))
                if not stays_finite(out):
                    break
            no_effect = getattr(cf, "no_effect", None)
            idle = no_effect([o for _, o in outs]) if no_effect else None
            if idle:
                notes.append(idle)
        end_step, end = outs[-1]
        why_vacuous = vacuous([o for _, o in outs], baseline[last] if end_step == last and same is None else None)
        if why_vacuous:
            notes.append(why_vacuous)
        finite = end_step == last and all(stays_finite(o) for _, o in outs)
        if isinstance(cf, DropCulprits):
            row["n_samples"] = batch_size(bad_batch) - len(set(culprits))
        same_failure = end.phase is not None and end.phase == baseline[last].phase and end.stage == baseline[last].stage
        row.update({"applicable": True, "finite": finite, "loss": end.loss, "grad_norm": end.grad_norm,
                    "phase": None if finite else phase if same_failure and end_step == last and phase else end.phase,
                    "failed_at": None if finite else end_step, "loss_start": outs[0][1].loss,
                    "vacuous": bool(notes) and same is None})
        if notes:
            row["note"] = "; ".join(notes)
        rows.append(row)
    restore(st, start)
    return rows


def stays_finite(res: StepOut) -> bool:
    """Loss, gradients and weights finite after the changed step (a total norm of inf that clipping turned into
    zero gradients leaves the weights finite: `vacuous` says why that is no fix)."""
    return res.finite or (res.zeroed and res.loss_finite and res.params_finite)


def vacuous(outs: list[StepOut], baseline: StepOut | None) -> str | None:
    """Why a change's window says nothing about the failure, or None: a step whose gradients were all scaled to 0
    (its update did nothing), or, for a failure in the forward or backward pass, the replay's very loss and gradient
    norm at the failing step (`baseline`, None when the change did not reach that step or is the run's own: the
    change does not act before the failure)."""
    zeroed = [o for o in outs if o.zeroed and stays_finite(o)]
    if zeroed:
        return (f"finite because every gradient was scaled to 0 (total norm {zeroed[0].grad_norm:g}): the update did "
                f"nothing, which is no fix")
    if baseline is None or baseline.phase not in ("forward", "backward"):
        return None  # the loss and gradient norm come before the update: equal ones say nothing about it
    res = outs[-1]
    same = all(a == b or (a != a and b != b) for a, b in ((res.loss, baseline.loss), (res.grad_norm, baseline.grad_norm)))
    if same and res.finite == baseline.finite and res.phase == baseline.phase:
        return "the same loss and gradient norm as the replay: this change does not touch what failed"
    return None


def likely_fix(rows: list[dict[str, Any]], baseline: dict[int, StepOut]) -> dict[str, Any] | None:
    """The change that kept the whole window finite with the lowest loss at its end (a change that is the run's own,
    or that is finite only vacuously, is no fix), with its evidence against the run's own window; None when none
    did."""
    fixes = [r for r in rows if r.get("applicable") and r["finite"] and r.get("rerun", True) and not r.get("vacuous")
             and math.isfinite(r["loss"])]
    if not fixes:
        return None
    best = min(fixes, key=lambda r: r["loss"])
    first, last = best["window"]
    ran = sorted((s, o) for s, o in baseline.items() if first <= s <= last)
    bad = next((s for s, o in ran if not stays_finite(o)), None)
    before = [(s, o.loss) for s, o in ran if (bad is None or s < bad) and math.isfinite(o.loss)]
    as_run = "as run" + (f", {_move(before[0][1], before[0][0], before[-1][1], before[-1][0])}" if before else "")
    as_run += f", non-finite at step {bad}" if bad is not None else ""
    span = f"step {first}" if first == last else f"steps {first}-{last}"
    return {"change": best["change"], "window": [first, last], "loss_start": best["loss_start"], "loss_end": best["loss"],
            "evidence": (f"{best['change']} keeps {span} finite: {_move(best['loss_start'], first, best['loss'], last)} "
                         f"({as_run})")}


def _move(a: float, first: int, b: float, last: int) -> str:
    """`loss 2.31 at step 61 → 0.562 at step 80`, or `loss 2.96 at step 1` for one step."""
    if first == last:
        return f"loss {_g(b)} at step {last}"
    return f"loss {_g(a)} at step {first} → {_g(b)} at step {last}"


def _g(v: float) -> str:
    return f"{v:.4g}"
