"""nonfinite_weights: NaN or Inf inside a checkpoint's tensors."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import polars as pl

from forensics.judge.detectors.base import NONFINITE
from forensics.judge.findings import Finding
from forensics.judge.numbers import count
from forensics.judge.run import Run


def _by_design(ts: pl.DataFrame) -> set[str]:
    """Tensors that hold Inf by design: Inf only (no NaN), present in the earliest checkpoint, and the same in
    every checkpoint (Inf count and the norm of the finite rest), e.g. a causal mask of -inf saved as a buffer.
    Weights that overflowed change between checkpoints and soon hold NaN. Needs two checkpoints with a step to
    tell; a checkpoint without one (`best_model.pth`, a root `model.safetensors`) has no place in that order."""
    model = ts.filter(pl.col("kind").is_in(["param", "buffer"]) & pl.col("step").is_not_null())
    if model.height == 0:
        return set()
    first = model["ckpt_id"].filter(model["step"] == model["step"].min()).unique().to_list()
    per = model.group_by("tensor").agg(
        pl.col("ckpt_id").n_unique().alias("n"), pl.col("ckpt_id").is_in(first).any().alias("in_first"),
        (pl.col("n_nan").max() == 0).alias("no_nan"), pl.col("n_inf").min().alias("inf_min"),
        pl.col("n_inf").max().alias("inf_max"), pl.col("l2").fill_nan(-1.0).n_unique().alias("l2_values"))
    return set(per.filter((pl.col("n") >= 2) & pl.col("in_first") & pl.col("no_nan") & (pl.col("inf_min") > 0)
                          & (pl.col("inf_min") == pl.col("inf_max")) & (pl.col("l2_values") == 1))["tensor"])


@dataclass(frozen=True)
class NonfiniteWeights:
    """NaN or Inf inside a checkpoint's tensors.

    Detects: the first checkpoint (by step) whose model tensors hold NaN or Inf (`tensor_stats.n_nan/n_inf`,
    else `checkpoints.n_nonfinite`), naming the tensors and the last finite checkpoint before it. A tensor
    that holds the same Inf values in every checkpoint from the first (a -inf attention mask buffer) is
    non-finite by design and does not count.
    False alarms: fires on 0 of the 40 healthy runs it could check (at most 7.5% at 95% confidence;
    benchmarks/calibrate.py over the corpus tune + calib parts and shared/real_runs).
    Why: every checkpoint after it is useless; the last finite one is the replay starting point.
    Evidence: checkpoint path and step, tensors with counts, last finite checkpoint.
    """

    kind: ClassVar[str] = "nonfinite_weights"
    stage: ClassVar[int] = NONFINITE
    joins_chain: ClassVar[bool] = True  # one event with the NaN its step range holds
    nonfinite: ClassVar[bool] = True  # a non-finite value: where replay starts
    requires: ClassVar[tuple[str, ...]] = ()

    @staticmethod
    def reach(f: Finding) -> tuple[int, int] | None:
        """The steps in which the weights turned non-finite: after the last finite checkpoint, through this one (a
        NaN loss between them is the same incident, however far from the checkpoint's step)."""
        last = f.evidence.get("last_finite_step")
        return (int(last) + 1, f.step) if last is not None and f.step is not None else None

    def unavailable(self, run: Run) -> str | None:
        ck = run.table("checkpoints")
        return None if ck.height and ck["n_nonfinite"].is_not_null().any() else "no readable checkpoints in this run"

    def check(self, run: Run) -> Iterator[Finding]:
        ck = run.table("checkpoints").filter(pl.col("n_nonfinite").is_not_null())
        ts = run.table("tensor_stats")
        if ts.height:
            model = ts.filter(pl.col("kind").is_in(["param", "buffer"]) & ~pl.col("tensor").is_in(list(_by_design(ts))))
            bad_tensors = model.filter((pl.col("n_nan") + pl.col("n_inf")) > 0)
            counts = bad_tensors.group_by("ckpt_id").agg((pl.col("n_nan") + pl.col("n_inf")).sum().alias("bad"))
            ck = ck.join(counts, on="ckpt_id", how="left").with_columns(pl.col("bad").fill_null(0))
        else:
            bad_tensors = ts
            ck = ck.with_columns(pl.col("n_nonfinite").alias("bad"))
        ck = ck.sort("step", nulls_last=True)
        bad = ck.filter(pl.col("bad") > 0)
        if bad.height == 0:
            return
        first = bad.row(0, named=True)
        names = sorted(bad_tensors.filter(pl.col("ckpt_id") == first["ckpt_id"])["tensor"].to_list()) if ts.height else []
        good = ck.filter((pl.col("bad") == 0) & (pl.col("step") < (first["step"] if first["step"] is not None else 0)))
        ev = {"checkpoint": first["path"], "checkpoint_step": first["step"], "nonfinite_elements": first["bad"],
              "tensors": names[:20], "n_tensors": len(names), "checkpoints_nonfinite": bad.height,
              "last_finite_checkpoint": good["path"][-1] if good.height else None,
              "last_finite_step": good["step"][-1] if good.height else None}
        yield Finding.of(self, severity="critical", step=first["step"], series=None, evidence=ev,
                         sources=({"table": "checkpoints", "path": first["path"]},),
                         summary=(f"checkpoint {first['path']}" + (f" (step {first['step']})" if first["step"] is not None
                                                                   else " (no step: its place in the run is unknown)")
                                  + f" holds {count(first['bad'], 'NaN/Inf value')} in "
                                  f"{count(len(names), 'tensor') if names else 'some tensors'}"
                                  + (f"; last finite: {ev['last_finite_checkpoint']}" if good.height else "")))
