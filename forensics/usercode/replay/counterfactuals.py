"""Counterfactuals: the bad step re-run with one change at a time, each from the same saved state.

One small class per change: its `name`, `why_not` (why it cannot apply to this step, None when it can),
`same_as_run` (why it is what the run already did, so the replayed step is its answer) and `step` (how it changes
the step). Each outcome says whether the step stays finite, with the loss and gradient norm it gives; and when a
change "fixes" the step without touching what failed, it says so: clipping at 1.0 a step whose total norm is inf
is finite only because every gradient was scaled to 0 (the update did nothing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from forensics.usercode.kit.batches import batch_size, select
from forensics.usercode.kit.restore import State
from forensics.usercode.replay.state import StepOut, restore, run_step


@dataclass(frozen=True)
class Fp32:
    """The forward pass without autocast (float32 throughout)."""

    name: ClassVar[str] = "fp32"

    def why_not(self, st: State, batch: dict[str, torch.Tensor], culprits: list[int]) -> str | None:
        return None

    def same_as_run(self, st: State) -> str | None:
        if not st.options.autocast_dtype:
            return "the run already computes in float32 (no autocast in step_options): same as the replay"
        return None

    def step(self, st: State, batch: dict[str, torch.Tensor], culprits: list[int]) -> StepOut:
        return run_step(st, batch, fp32=True)


@dataclass(frozen=True)
class Clip:
    """clip_grad_norm_ at `max_norm` before the update."""

    name: ClassVar[str] = "clip_1.0"
    max_norm: float = 1.0

    def why_not(self, st: State, batch: dict[str, torch.Tensor], culprits: list[int]) -> str | None:
        return None

    def same_as_run(self, st: State) -> str | None:
        if st.options.max_grad_norm is not None and st.options.max_grad_norm <= self.max_norm:
            return f"the run already clips at {st.options.max_grad_norm:g}: same as the replay"
        return None

    def step(self, st: State, batch: dict[str, torch.Tensor], culprits: list[int]) -> StepOut:
        return run_step(st, batch, max_grad_norm=self.max_norm)

    def no_effect(self, res: StepOut) -> str | None:
        if math.isfinite(res.grad_norm) and res.grad_norm <= self.max_norm:
            return f"the gradient norm {res.grad_norm:.3g} is under {self.max_norm:g}: clipping changes nothing"
        return None


@dataclass(frozen=True)
class LrDiv:
    """This step's learning rate divided by `factor`."""

    name: ClassVar[str] = "lr_div_10"
    factor: float = 10.0

    def why_not(self, st: State, batch: dict[str, torch.Tensor], culprits: list[int]) -> str | None:
        return None

    def same_as_run(self, st: State) -> str | None:
        return None

    def step(self, st: State, batch: dict[str, torch.Tensor], culprits: list[int]) -> StepOut:
        return run_step(st, batch, lr_scale=1 / self.factor)


@dataclass(frozen=True)
class DropCulprits:
    """The culprit samples removed from the batch."""

    name: ClassVar[str] = "drop_culprits"

    def why_not(self, st: State, batch: dict[str, torch.Tensor], culprits: list[int]) -> str | None:
        if not culprits:
            return "no culprit samples to drop"
        if len(culprits) >= batch_size(batch):
            return "every sample is a culprit"
        return None

    def same_as_run(self, st: State) -> str | None:
        return None

    def step(self, st: State, batch: dict[str, torch.Tensor], culprits: list[int]) -> StepOut:
        drop = set(culprits)
        return run_step(st, select(batch, [i for i in range(batch_size(batch)) if i not in drop]))


COUNTERFACTUALS = (Fp32(), Clip(), LrDiv(), DropCulprits())


def try_changes(st: State, snap: dict, batch: dict[str, torch.Tensor], culprits: list[int], baseline: StepOut,
                phase: str | None = None) -> list[dict[str, Any]]:
    """Each counterfactual from the same snapshot, as JSON rows. A change that is what the run already did is not
    re-run: it reports `baseline`, the replayed step. `phase` is where the replay located the step's first
    non-finite value: a change that fails the way the replay did reports that phase too, so they agree."""
    rows = []
    n = batch_size(batch)
    for cf in COUNTERFACTUALS:
        row: dict[str, Any] = {"change": cf.name}
        why_not = cf.why_not(st, batch, culprits)
        if why_not is not None:
            rows.append({**row, "applicable": False, "finite": None, "loss": None, "grad_norm": None, "note": why_not})
            continue
        same = cf.same_as_run(st)
        if same is not None:
            res, row["rerun"], row["note"] = baseline, False, same
        else:
            restore(st, snap)
            res = cf.step(st, batch, culprits)
            no_effect = getattr(cf, "no_effect", None)
            row["note"] = (no_effect(res) if no_effect else None) or vacuous(res, baseline)
        if isinstance(cf, DropCulprits):
            row["n_samples"] = n - len(set(culprits))
        same_failure = res.phase is not None and res.phase == baseline.phase and res.stage == baseline.stage
        row.update({"applicable": True, "finite": stays_finite(res), "loss": res.loss, "grad_norm": res.grad_norm,
                    "phase": None if stays_finite(res) else phase if same_failure and phase else res.phase})
        if row["note"] is None:
            del row["note"]
        rows.append(row)
    restore(st, snap)
    return rows


def stays_finite(res: StepOut) -> bool:
    """Loss, gradients and weights finite after the changed step (a total norm of inf that clipping turned into
    zero gradients leaves the weights finite: `vacuous` says why that is no fix)."""
    return res.finite or (res.zeroed and res.loss_finite and res.params_finite)


def vacuous(res: StepOut, baseline: StepOut) -> str | None:
    """Why a change's outcome says nothing about the failure, or None: a finite step whose gradients were all
    scaled to 0 (the update did nothing), or, for a failure in the forward or backward pass, the replay's very
    loss and gradient norm (the change does not act before the failure)."""
    if res.zeroed and stays_finite(res):
        return (f"finite because every gradient was scaled to 0 (total norm {res.grad_norm:g}): the update did "
                f"nothing, which is no fix")
    if baseline.phase not in ("forward", "backward"):
        return None  # the loss and gradient norm come before the update: equal ones say nothing about it
    same = all(a == b or (a != a and b != b) for a, b in ((res.loss, baseline.loss), (res.grad_norm, baseline.grad_norm)))
    if same and res.finite == baseline.finite and res.phase == baseline.phase:
        return "the same loss and gradient norm as the replay: this change does not touch what failed"
    return None
