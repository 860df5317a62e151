"""val_noise: the validation loss jumps around much more than training."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from forensics.judge import numbers, stats
from forensics.judge.detectors.base import SHAPE, finite_part, src, too_short
from forensics.judge.findings import Finding
from forensics.judge.run import Run


@dataclass(frozen=True)
class ValNoise:
    """The validation loss jumps around much more than training.

    Detects: the point-to-point noise of validation around its own trend (`stats.relative_wiggle`) is at least `ratio`
    times that of the training loss and at least `min_noise`, and at least `min_sign_changes` of its successive
    differences flip sign. Validation is an average over many batches, so it should be the smoother of the two.
    Silent when the training loss ends `max_train_rise` above its smoothed minimum: the swings are divergence's; and
    when validation's point noise (`stats.noise`) is under `min_share_of_travel` of the range its smoothed curve covers:
    a loss falling by orders of magnitude moves a large share of its tiny final level between epochs, yet plotted
    it is smooth (the per-epoch mean training loss of Keras or Lightning is smoother still).
    Why: a tiny validation set, random augmentation at validation, or model.eval() missing.
    Evidence: relative noise of each, their ratio.
    False alarms: 1 of the 38 healthy real runs it could check (benchmarks/false_alarms.py, nine development sets).
    """

    kind: ClassVar[str] = "val_noise"
    stage: ClassVar[int] = SHAPE
    requires: ClassVar[tuple[str, ...]] = ("loss", "val_loss")
    ratio: float = 1.0  # validation (an average over many batches) noisier than single-batch training
    min_noise: float = 0.1  # 10% of the level between evaluations: healthy validation moves up to ~8%
    min_sign_changes: float = 0.45  # share of successive differences flipping sign (white noise: about 2/3)
    max_train_rise: float = 0.5  # training ending 50% above its minimum is diverging: the validation swings
    min_points: int = 8  # second differences and sign changes need this many points of each curve
    min_share_of_travel: float = 0.02  # point noise under 2% of the smoothed curve's range: a smooth curve on a plot

    def unavailable(self, run: Run) -> str | None:
        return too_short(run, "val_loss", self.min_points) or too_short(run, "loss", self.min_points)

    def check(self, run: Run) -> Iterator[Finding]:
        ts, t = finite_part(*run.arrays("loss"))
        vs, v = finite_part(*run.arrays("val_loss"))
        if t.size < self.min_points or v.size < self.min_points:
            return
        low = float(np.nanmin(stats.rolling_median(t, max(5, t.size // 10))))
        end = stats.head_tail_levels(t)[1]
        if low > 0 and end >= (1 + self.max_train_rise) * low:
            return  # the training loss diverges: validation swinging with it is its symptom, not this
        tn, vn = stats.relative_wiggle(t), stats.relative_wiggle(v)
        if not (np.isfinite(tn) and np.isfinite(vn)):
            return
        flips = stats.sign_change_rate(v)
        if not (vn >= self.min_noise and vn >= self.ratio * tn and flips >= self.min_sign_changes):
            return
        sigma, travel = stats.noise(v), _travel(v)
        if travel > 0 and sigma < self.min_share_of_travel * travel:
            return  # jumps invisible beside the curve's own fall: large relative to a level that nears 0 only
        ev = {"val_relative_noise": vn, "train_relative_noise": tn, "ratio": vn / tn if tn > 0 else None,
              "val_sign_change_rate": flips, "val_noise": sigma, "val_travel": travel}
        yield Finding.of(self, severity="warning", step=int(vs[0]), step_end=int(vs[-1]), series=run.pick("val_loss"),
                         evidence=ev, sources=(src(run, "val_loss", vs), src(run, "loss", ts)),
                         summary=(f"validation loss moves {vn:.1%} of its level between evaluations, "
                                  f"{_times(vn, tn)} the training loss's {tn:.1%}"))


def _travel(v: np.ndarray) -> float:
    """How far the validation curve moves over the run: the range of its rolling median over a tenth of the
    points (at least 3), which evaluation noise does not widen."""
    smooth = stats.rolling_median(v, max(3, v.size // 10) | 1)
    return float(np.nanmax(smooth) - np.nanmin(smooth))


def _times(vn: float, tn: float) -> str:
    """The true ratio to three figures (`1.04×`, not a rounded `1.0×` beside a 1.0 threshold), or `while` when
    training does not move at all."""
    return f"{numbers.sig(vn / tn, 3)}×" if tn > 0 else "while"
