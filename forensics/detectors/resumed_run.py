"""resumed_run: steps go backwards or repeat: the run was restarted from a checkpoint."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from forensics.detectors.base import src
from forensics.findings import Finding
from forensics.run import Run


@dataclass(frozen=True)
class ResumedRun:
    """The run was restarted from a checkpoint.

    Detects: in the loss series' points in write order (by wall time where the writer stamps it), a step
    lower than or equal to the one before: a restart. Several files are ordered by wall time, so two event
    files of one resumed TensorBoard run count; plain duplicates with equal values (copies) do not. A step
    counter that resets every epoch (the batch index logged as the step: `min_resets` or more jumps, all back
    to the same step after climbs of equal length) is no restart and is not reported.
    Why: later findings may refer to either segment; a resume that did not restore optimizer or scheduler
    state changes the curve.
    Evidence: restart step, the step it went back from, overlap in steps, wall-clock gap where known.
    """

    kind: ClassVar[str] = "resumed_run"
    requires: ClassVar[tuple[str, ...]] = ("loss",)
    min_resets: int = 3

    def check(self, run: Run) -> Iterator[Finding]:
        name = run.pick("loss")
        pts = run.points(name).with_row_index("i")
        if pts["wall_time"].null_count() == 0:
            pts = pts.sort(["wall_time", "i"])
        pts = pts.unique(["step", "value"], keep="first", maintain_order=True)  # exact copies are not a resume
        steps = pts["step"].to_numpy()
        wall = pts["wall_time"].fill_null(np.nan).to_numpy()
        back = np.flatnonzero(np.diff(steps) <= 0) + 1
        if back.size >= self.min_resets and np.unique(steps[back]).size == 1:
            climbs = np.diff(np.concatenate(([0], back)))
            if climbs.max() <= 1.1 * climbs.min():
                return  # a per-epoch counter: every "restart" lands on one step after as many points
        for k in back[:20]:  # a handful of restarts at most; guard against a garbled order
            gap = float(wall[k] - wall[k - 1]) if np.isfinite(wall[k]) and np.isfinite(wall[k - 1]) else None
            ev = {"restart_step": int(steps[k]), "previous_step": int(steps[k - 1]),
                  "overlap_steps": int(steps[k - 1] - steps[k]), "wall_gap_s": gap}
            yield Finding.of(self, severity="info", step=int(steps[k]), step_end=int(steps[k - 1]), series=name,
                             evidence=ev, sources=(src(run, "loss", steps[[k - 1, k]]),),
                             summary=(f"steps go back from {steps[k - 1]} to {steps[k]}: the run was resumed"
                                      + (f" after {gap:.0f} s" if gap is not None else "")))
