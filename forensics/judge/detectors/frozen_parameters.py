"""frozen_parameters: parameters that never change across checkpoints although others do."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import polars as pl

from forensics.judge.detectors.base import UPSTREAM
from forensics.judge.findings import Finding
from forensics.judge.run import Run


def _mask() -> pl.Expr:
    """Tensors that are masks by design: Inf inside, or every value 0 or 1 (for values in [0, 1], E[x²] = E[x]
    exactly when each is 0 or 1; E[x²] = std² + mean², population std)."""
    zero_one = ((pl.col("min") >= 0) & (pl.col("max") <= 1) & (pl.col("numel") > 1)
                & ((pl.col("std") ** 2 + pl.col("mean") ** 2 - pl.col("mean")).abs() <= 1e-9))
    return (pl.col("n_inf") > 0) | zero_one.fill_null(False)


@dataclass(frozen=True)
class FrozenParameters:
    """Parameters never change across checkpoints although the run trains.

    Detects: parameter tensors whose ‖Δw‖ is exactly 0 between every pair of consecutive checkpoints
    (`tensor_deltas`) while at least one other parameter changed. A state_dict cannot tell buffers from
    parameters, so constants by design are left out: tensors of only 0s and 1s (causal masks such as nanoGPT's
    `attn.bias`) and tensors holding Inf (-inf masks); one-element tensors (GPT-2's `masked_bias`) are listed
    but never fire alone.
    False alarms: fires on 0 of the 40 healthy runs it could check (at most 7.5% at 95% confidence;
    benchmarks/calibrate.py over the corpus tune + calib parts and shared/real_runs).
    Why: requires_grad=False left on, or parameters not passed to the optimizer.
    Evidence: parameter names, how many, checkpoint steps compared.
    """

    kind: ClassVar[str] = "frozen_parameters"
    stage: ClassVar[int] = UPSTREAM
    requires: ClassVar[tuple[str, ...]] = ()
    max_names: int = 20

    def unavailable(self, run: Run) -> str | None:
        return None if run.table("tensor_deltas").height else "needs two or more checkpoints (no tensor deltas stored)"

    def check(self, run: Run) -> Iterator[Finding]:
        d = run.table("tensor_deltas")
        ts = run.table("tensor_stats")
        if ts.height:
            params = ts.filter(pl.col("kind") == "param").group_by("tensor").agg(
                pl.col("numel").max(), _mask().any().alias("mask"))
            d = d.join(params.filter(~pl.col("mask")), on="tensor")
            scalars = set(params.filter(pl.col("numel") <= 1)["tensor"])
        else:
            scalars = set()
        per = d.group_by("tensor").agg(pl.col("delta_l2").max().alias("max_delta"), pl.len().alias("pairs"),
                                       pl.col("prev_step").min(), pl.col("step").max())
        frozen = per.filter(pl.col("max_delta") == 0).sort("tensor")
        if frozen.height == 0 or per.filter(pl.col("max_delta") > 0).height == 0:
            return
        if set(frozen["tensor"]) <= scalars:
            return  # one-element constants alone (a scale, GPT-2's masked_bias): too little to claim
        names = frozen["tensor"].to_list()
        first, last = int(per["prev_step"].min()), int(per["step"].max())
        ev = {"parameters": names[:self.max_names], "n_frozen": len(names), "n_parameters": per.height,
              "first_step": first, "last_step": last}
        yield Finding.of(self, severity="warning", step=first, step_end=last, series=None, evidence=ev,
                         sources=({"table": "tensor_deltas", "step_min": first, "step_max": last},),
                         summary=(f"{len(names)} of {per.height} parameters never change between checkpoints "
                                  f"{first}-{last} ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"))
