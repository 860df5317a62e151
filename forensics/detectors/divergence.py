"""divergence: the loss rises from its minimum and does not come back."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from forensics import stats
from forensics.detectors.base import finite_part, src, too_short
from forensics.findings import Finding
from forensics.numbers import ratio
from forensics.run import Run


@dataclass(frozen=True)
class Divergence:
    """The loss rises and does not come back.

    Detects: on the finite part of the loss (before any NaN), the smoothed minimum (centred rolling median
    over `smooth` of the points) is followed by a rise to the end of at least `min_growth` of the minimum's
    magnitude and `min_recovered` of the earlier drop, with a Mann–Kendall test of the points after the
    minimum significant at `p` (waived when the loss then turns non-finite).
    Why: a loss that climbs back is unstable training; it usually ends in NaN.
    Evidence: onset step (the minimum), minimum, final level, growth factor, Theil–Sen slope after onset, p.
    """

    kind: ClassVar[str] = "divergence"
    requires: ClassVar[tuple[str, ...]] = ("loss",)
    smooth: float = 0.04  # smoothing window as a fraction of the points
    min_growth: float = 0.5  # final − min ≥ this × |min|
    min_recovered: float = 0.3  # final − min ≥ this × (initial − min): it gave back a good part of its progress
    p: float = 0.01
    min_points_after: int = 5

    def unavailable(self, run: Run) -> str | None:
        return too_short(run, "loss", 12)

    def check(self, run: Run) -> Iterator[Finding]:
        all_steps, all_values = run.arrays("loss")
        steps, y = finite_part(all_steps, all_values)
        nan_follows = steps.size < all_steps.size
        keep = np.isfinite(y)
        steps, y = steps[keep], y[keep]
        n = y.size
        if n < 12:
            return
        sm = stats.rolling_median(y, max(3, int(n * self.smooth)))
        imin = int(np.nanargmin(sm))
        after = y[imin:]
        if after.size < self.min_points_after and not (nan_follows and after.size >= 2):
            return
        lo = float(sm[imin])
        head, _ = stats.head_tail_levels(y)
        final = float(np.median(y[-max(2, min(after.size // 4, n // 20)):]))
        rise = final - lo
        trend = stats.mann_kendall(after, steps[imin:])
        significant = trend.z > 0 and (trend.p < self.p or nan_follows)
        if not (rise > 0 and rise >= self.min_growth * abs(lo) and rise >= self.min_recovered * (head - lo)
                and significant):
            return
        slope, _ = stats.theil_sen(steps[imin:], after)
        growth = final / lo if lo > 0 else math.inf
        ev = {"onset_step": int(steps[imin]), "min_level": lo, "initial_level": head, "final_level": final,
              "growth_factor": growth, "slope_per_step": slope, "mk_p": trend.p, "ends_nonfinite": nan_follows,
              "last_finite_step": int(steps[-1])}
        tail = " and then turns non-finite" if nan_follows else ""
        yield Finding.of(self, severity="critical", step=int(steps[imin]), step_end=int(steps[-1]),
                         series=run.pick("loss"), evidence=ev, sources=(src(run, "loss", steps),),
                         summary=(f"loss rises from its minimum {lo:.4g} at step {steps[imin]} to {final:.4g} "
                                  f"by step {steps[-1]} ({ratio(growth)}, Mann–Kendall p={trend.p:.1g}){tail}"))
