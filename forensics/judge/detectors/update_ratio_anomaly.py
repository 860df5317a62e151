"""update_ratio_anomaly: ‖Δw‖/‖w‖ per step outside about [1e-4, 1e-1], per layer."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import polars as pl

from forensics.judge import curves
from forensics.judge.detectors.base import UPSTREAM
from forensics.judge.findings import Finding
from forensics.judge.numbers import count
from forensics.judge.run import Run


@dataclass(frozen=True)
class UpdateRatioAnomaly:
    """The per-step update ratio ‖Δw‖/‖w‖ of a layer sits outside [`low`, `high`].

    Detects: from logged update-ratio series (per layer or global), else from `tensor_deltas` between
    checkpoints (per-step estimates as in `curves.checkpoint_ratios`): (1) too large: points where a layer's
    ratio exceeds `high`, grouped into episodes (flagged points of any layer with at most `gap_points`
    unflagged logged steps between them are one episode), one finding per episode; (2) too small: layers whose median ratio over the run is below
    `low` (glacial learning is a run-long state: an LR decayed to 0 at the very end is a schedule, not
    this), one finding for the run. Frozen layers (ratio exactly 0) are frozen_parameters.
    False alarms: fires on 0 of the 40 healthy runs it could check (at most 7.5% at 95% confidence;
    benchmarks/calibrate.py over the corpus tune + calib parts and shared/real_runs). None of the 328 healthy runs of
    the 849 pooled real runs logs an update ratio or two checkpoints it could read, so `low` and `high` rest on the
    corpus and the literature's ~1e-3 per step, not on real health.
    Why: about 1e-3 per step is healthy for Adam-like training; far above, updates overwrite the weights
    (instability), far below, nothing is learned (LR of that parameter group too small, a scheduler gone wrong).
    Evidence: the layers, their ratio (peak or median), the bound crossed, the step range, the source.
    """

    kind: ClassVar[str] = "update_ratio_anomaly"
    stage: ClassVar[int] = UPSTREAM
    requires: ClassVar[tuple[str, ...]] = ()
    low: float = 1e-4
    high: float = 1e-1
    gap_points: int = 2

    def _ratios(self, run: Run) -> tuple[pl.DataFrame, str]:
        logged = curves.logged_ratios(run)
        return (logged, "logged update_ratio series") if logged.height else (curves.checkpoint_ratios(run), "tensor_deltas")

    def unavailable(self, run: Run) -> str | None:
        if not self._ratios(run)[0].height:
            return "needs update-ratio series (update_ratio/<layer>) or two or more checkpoints with changing parameters"
        return None

    def check(self, run: Run) -> Iterator[Finding]:
        r, how = self._ratios(run)
        if not r.height:
            return
        table = "scalars" if how.startswith("logged") else "tensor_deltas"
        slow = r.group_by("layer").agg(pl.col("high").median().alias("median"), pl.col("step").min().alias("first"),
                                       pl.col("step").max().alias("last"), pl.len().alias("n")
                                       ).filter(pl.col("median") < self.low).sort("median")
        if slow.height:
            first, last = int(slow["first"].min()), int(slow["last"].max())
            ev = {"direction": "too_small", "bound": self.low, "layers": slow["layer"].to_list()[:20],
                  "n_layers": slow.height, "n_layers_checked": r["layer"].n_unique(),
                  "lowest_median": float(slow["median"][0]), "lowest_layer": slow["layer"][0], "measured_from": how}
            yield Finding.of(self, severity="warning", step=first, step_end=last, series=slow["layer"][0], evidence=ev,
                             sources=({"table": table, "step_min": first, "step_max": last},),
                             summary=(f"{slow.height} of {count(ev['n_layers_checked'], 'layer')} "
                                      f"{'updates' if slow.height == 1 else 'update'} by a median "
                                      f"{ev['lowest_median']:.2g} of their norm per step or less (below {self.low:g}): "
                                      f"{slow['layer'][0]} is the slowest"))
        big = r.filter(pl.col("low") > self.high).sort("step")
        if not big.height:
            return
        grid = np.unique(r["step"].to_numpy())  # every step with a ratio, of any layer
        pos = np.searchsorted(grid, big["step"].to_numpy())
        starts = np.flatnonzero(np.concatenate(([True], np.diff(pos) > self.gap_points + 1)))
        for a, b in zip(starts, np.append(starts[1:], pos.size)):
            ep = big.slice(int(a), int(b - a))
            worst = ep.sort("low", descending=True).row(0, named=True)
            layers = ep["layer"].unique(maintain_order=True).to_list()
            ev = {"direction": "too_large", "bound": self.high, "layers": layers[:20], "n_layers": len(layers),
                  "peak_ratio": worst["low"], "peak_layer": worst["layer"], "peak_step": int(worst["step"]),
                  "points": ep.height, "measured_from": how}
            # For checkpoint pairs the episode starts at the earlier checkpoint of its first pair.
            s0 = int(ep["prev_step" if "prev_step" in ep.columns else "step"].min())
            s1 = int(ep["step"].max())
            yield Finding.of(self, severity="warning", step=s0, step_end=s1, series=worst["layer"], evidence=ev,
                             sources=({"table": table, "step_min": s0, "step_max": s1},),
                             summary=(f"{count(len(layers), 'layer')} {'updates' if len(layers) == 1 else 'update'} by more than {self.high:g} of their norm per "
                                      f"step over steps {s0}-{s1}; {worst['layer']} peaks at {worst['low']:.3g}"))
