"""amp_overflow: the mixed-precision loss scale keeps falling (logged, or read from GradScaler state in checkpoints)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from forensics.detectors.base import src
from forensics.findings import Finding
from forensics.numbers import count
from forensics.run import Run


@dataclass(frozen=True)
class AmpOverflow:
    """The mixed-precision loss scale keeps falling.

    Detects: a logged loss-scale series that ends at most 2^-`min_halvings` of its maximum and is still
    falling over the second half of the run (its last value at most 2^-`late_halvings` of the second half's
    maximum), or that falls below `floor`, or that keeps overflowing: after the first growth (the end of
    the start-up calibration) at least `max_skip_rate` of the steps halve it (each halving is a skipped
    optimizer step; a healthy scaler overflows about once per growth_interval, 2000 steps by default; a
    scale logged every k steps shows at most one halving per k steps, so the rate read is a lower bound).
    Calibration (issue 12): no healthy run of the TUNE part, the gallery or shared/real_runs logs a loss
    scale, so the skip-rate threshold rests on the scalers' defaults (0.05-0.1% of steps skipped when
    healthy); the summed-loss fp16 runs skip at least 1.9% (a scale pinned at 512-1024, logged every 10
    steps) and 5.4%. GradScaler starts at 65536; each overflow halves it and skips the
    step, `growth_interval` clean steps double it. A calibration drop in the first steps that then holds is
    healthy, and so is a scale that halves and grows back.
    Without a logged scale, the GradScaler state saved in checkpoints (`scaler.scale`) is the series: a few
    points, so only the falling and floor rules apply there (a skip rate needs every step). A scale below
    `floor` is evidence even on one or two points (a console log printing `Fp16 Grad Scale: 0`).
    False alarms: fires on 0 of the 14 healthy runs it could check (at most 21% at 95% confidence;
    benchmarks/calibrate.py over the corpus tune + calib parts and shared/real_runs, Nov 2026).
    Why: persistent fp16 overflow means skipped optimizer steps and, eventually, a useless scale.
    Evidence: max, final and min scale, number of decreases, onset (first decrease after the last increase),
    and where the scale was read (`source`).
    """

    kind: ClassVar[str] = "amp_overflow"
    requires: ClassVar[tuple[str, ...]] = ()  # a logged loss_scale series, or scaler state in checkpoints
    min_halvings: int = 8  # 65536 → 256: far past the few halvings of start-up calibration
    late_halvings: int = 4  # ... and still falling ×16 in the second half
    floor: float = 1.0  # below 1 the scale shrinks gradients: no fp16 run is healthy there (0 = collapsed)
    # A healthy scaler overflows about once per growth interval: PyTorch's GradScaler default of 2000 steps is
    # 0.05% of steps skipped, DeepSpeed's loss_scale_window of 1000 0.1%; 1% is 10-20x that, a step in a hundred.
    max_skip_rate: float = 0.01

    def unavailable(self, run: Run) -> str | None:
        if run.has("loss_scale") or _checkpoint_scales(run)[0].size:
            return None
        return run.missing_message("loss_scale") + "; no checkpoint holds GradScaler state either"

    def check(self, run: Run) -> Iterator[Finding]:
        logged = run.has("loss_scale")
        steps, s = run.arrays("loss_scale") if logged else _checkpoint_scales(run)
        ok = np.isfinite(s)
        steps, s = steps[ok], s[ok]
        if s.size == 0 or (s.size < 3 and not np.any(s < self.floor)):
            return  # a scale below the floor is evidence at any count (`Fp16 Grad Scale: 0` on three lines)
        top, final, low = float(s.max()), float(s[-1]), float(s.min())
        # the second half of the run by steps, not points: an overflow-only log (DeepSpeed prints a line per
        # skipped step) crowds its points where the scale falls
        late_top = float(s[steps >= steps[0] + (steps[-1] - steps[0]) / 2].max())
        falling = final <= top / 2 ** self.min_halvings and final <= late_top / 2 ** self.late_halvings
        d = np.diff(s)
        down = np.flatnonzero(d < 0) + 1
        ups = np.flatnonzero(d > 0) + 1
        settled = down[down > ups[0]] if ups.size else down[:0]  # halvings after calibration
        span = float(steps[-1] - steps[ups[0]]) if ups.size else 0.0
        skip_rate = settled.size / span if span > 0 and logged else 0.0
        if not (falling or low < self.floor or skip_rate >= self.max_skip_rate):
            return
        if not falling and low >= self.floor:  # it keeps overflowing at a steady level: date it from calibration
            ups = ups[:1]
        # The fall that matters starts after the scale last grew (a healthy scale halves and grows back).
        after = down[down > ups[-1]] if ups.size else down
        onset = int(steps[after[0]]) if after.size else (int(steps[down[0]]) if down.size else int(steps[0]))
        ev = {"max_scale": top, "final_scale": final, "min_scale": low, "decreases": int(down.size),
              "decreases_since_onset": int(after.size), "onset_step": onset,
              "first_decrease_step": int(steps[down[0]]) if down.size else None,
              "skip_rate_after_calibration": skip_rate if logged else None,
              "source": "logged loss scale" if logged else "GradScaler state in checkpoints"}
        where = (src(run, "loss_scale", steps) if logged else
                 {"table": "checkpoint_values", "key": SCALE_KEY, "step_min": int(steps[0]), "step_max": int(steps[-1])})
        if top == low:  # pinned below the floor from the first point
            summary = (f"loss scale is {top:g} at all {s.size} logged points (below {self.floor:g}): the fp16 "
                       f"scaler has collapsed and every step overflows")
        elif not falling and low >= self.floor:  # it keeps overflowing at a steady level
            summary = (f"loss scale halves {count(settled.size, 'time')} in the {span:g} steps after calibration (between "
                       f"{low:g} and {top:g}, ending at {final:g}): at least {skip_rate:.1%} of optimizer steps "
                       f"skipped, where a healthy scaler skips about one per growth interval (2000 steps by default)")
        else:
            summary = (f"loss scale falls from {top:g} to {final:g} (min {low:g}, {down.size} decreases) "
                       f"from step {onset}; " + (f"{skip_rate:.0%} of steps after calibration overflowed: "
                                                 if logged else
                                                 f"read from GradScaler state in {count(s.size, 'checkpoint')}: ")
                       + "fp16 overflows keep skipping steps")
        yield Finding.of(self, severity="warning", step=onset, step_end=int(steps[-1]),
                         series=run.pick("loss_scale") if logged else SCALE_KEY, evidence=ev, sources=(where,),
                         summary=summary)


SCALE_KEY = "scaler.scale"  # GradScaler.state_dict()["scale"] as ingest/checkpoints.py stores it


def _checkpoint_scales(run: Run) -> tuple[np.ndarray, np.ndarray]:
    """(steps, scale) of the GradScaler state saved in the run's checkpoints, by step."""
    values = run.table("checkpoint_values")
    if values.is_empty():
        return np.array([], dtype=np.int64), np.array([])
    rows = values.filter((values["key"] == SCALE_KEY) & values["step"].is_not_null()).sort("step")
    return rows["step"].to_numpy(), rows["value"].to_numpy().astype(float)
