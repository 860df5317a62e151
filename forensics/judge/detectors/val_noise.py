"""val_noise: the validation loss jumps around much more than training, at the cadence a user reads it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from forensics.judge import numbers, stats
from forensics.judge.detectors.base import SHAPE, finite_part, point, src, too_short
from forensics.judge.findings import Finding
from forensics.judge.run import Run


@dataclass(frozen=True)
class ValNoise:
    """The validation loss jumps around much more than training, measured at the validation's own cadence.

    Detects: the evaluation-level validation loss (`_evaluations`: one mean over the validation set per evaluation,
    what early stopping and checkpoint choice read; not the per-batch values some scripts print while validating)
    moves at least `min_noise` of its level between evaluations around its own trend (`stats.relative_wiggle`),
    with at least `min_sign_changes` of its successive differences flipping sign, and is noisier than training
    (`_compared`): `single_ratio` times training's single logged values, when training is logged between
    evaluations (a validation set no bigger than a batch), or `ratio` times the training loss at the evaluations'
    cadence (the training series whose point count is nearest theirs, an epoch mean; with over `cadence_share`
    times as many points, the medians of its points between evaluations).
    Silent when the training loss ends `max_train_rise` above its smoothed minimum (the swings are divergence's);
    when validation's point noise (`stats.noise`) is under `min_share_of_travel` of the range its smoothed curve
    covers (a loss falling by orders of magnitude ranks its evaluations by the fall); and when validation ends
    `decided_sigmas` point sigmas above its smoothed minimum (the rise decides the checkpoint: overfitting's).
    Why: a tiny validation set (or one resampled at each evaluation), random augmentation at validation, or
    model.eval() missing; the best evaluation is then a lucky draw, and early stopping reads noise.
    Evidence: relative noise of each, their ratio, the training series and how it was compared; the best evaluation
    beside the median of its neighbours (how far below the curve a lucky draw puts the checkpoint a user keeps).
    False alarms: 0 of the 42 healthy real runs it could check (benchmarks/false_alarms.py, eleven development sets).
    """

    kind: ClassVar[str] = "val_noise"
    reads_pairs: ClassVar[bool] = True  # each part of a loss of several parts too (`Run.loss_pairs`)
    stage: ClassVar[int] = SHAPE
    requires: ClassVar[tuple[str, ...]] = ("loss", "val_loss")
    single_ratio: float = 1.0  # validation (a mean over its whole set) noisier than training's single logged values
    ratio: float = 4.0  # at the same cadence, healthy validation moves up to ~3× training's epoch means
    min_noise: float = 0.1  # 10% of the level between evaluations: healthy validation moves up to ~8%
    min_sign_changes: float = 0.45  # share of successive differences flipping sign (white noise: about 2/3)
    max_train_rise: float = 0.5  # training ending 50% above its minimum is diverging: the validation swings
    min_points: int = 8  # second differences and sign changes need this many points of each curve
    min_share_of_travel: float = 0.02  # point noise under 2% of the smoothed curve's range: a smooth curve on a plot
    cadence_share: float = 1.5  # a training series with over 1.5× the evaluations' points is logged between them
    decided_sigmas: float = 5.0  # validation ending 5 noise sigmas above its smoothed minimum: the rise decides
    neighbours: int = 2  # the best evaluation's neighbours on each side, for the level the curve has there

    def unavailable(self, run: Run) -> str | None:
        return too_short(run, "val_loss", self.min_points) or too_short(run, "loss", self.min_points)

    def check(self, run: Run) -> Iterator[Finding]:
        ts, t = finite_part(*run.arrays("loss"))
        if t.size < self.min_points:
            return
        low = float(np.nanmin(stats.rolling_median(t, max(5, t.size // 10))))
        end = stats.head_tail_levels(t)[1]
        if low > 0 and end >= (1 + self.max_train_rise) * low:
            return  # the training loss diverges: validation swinging with it is its symptom, not this
        val_name = self._evaluations(run)
        if val_name is None:
            return
        vs, v = finite_part(*run.arrays(val_name))
        vn, flips = stats.relative_wiggle(v), stats.sign_change_rate(v)
        if not (np.isfinite(vn) and vn >= self.min_noise and flips >= self.min_sign_changes):
            return
        compared = self._compared(run, vs, v, vn)
        if compared is None:
            return
        train_name, train_steps, tn, how = compared
        sigma, travel = stats.noise(v), _travel(v)
        if travel > 0 and sigma < self.min_share_of_travel * travel:
            return  # jumps invisible beside the curve's own fall: large relative to a level that nears 0 only
        w = max(3, v.size // 10) | 1
        smooth = stats.rolling_median(v, w)
        rise = float(np.median(v[-w:]) - np.nanmin(smooth))
        if sigma > 0 and rise >= self.decided_sigmas * sigma:
            return  # the rise after the minimum decides the checkpoint to keep (overfitting's), not the jumps
        best = int(np.argmin(v))
        around = np.r_[v[max(0, best - self.neighbours):best], v[best + 1:best + 1 + self.neighbours]]
        there = float(np.median(around)) if around.size else float("nan")
        ev = {"val_relative_noise": vn, "train_relative_noise": tn, "ratio": vn / tn if tn > 0 else None,
              "val_sign_change_rate": flips, "val_noise": sigma, "val_travel": travel, "val_series": val_name,
              "train_series": train_name, "train_compared_as": how, "val_rise_after_minimum": rise,
              "best_step": int(vs[best]), "best_value": float(v[best]), "best_neighbours_median": there}
        lucky = ""
        if np.isfinite(there) and there > v[best] > 0:
            a, b = max(0, best - self.neighbours), min(v.size - 1, best + self.neighbours)
            lucky = (f"; its best evaluation, {point(vs, v, best)}, sits {1 - v[best] / there:.0%} under the "
                     f"median {there:.4g} of the evaluations beside it (steps {vs[a]}-{vs[b]})")
        yield Finding.of(self, severity="warning", step=int(vs[0]), step_end=int(vs[-1]), series=val_name,
                         evidence=ev, sources=(src(run, val_name, vs), src(run, train_name, train_steps)),
                         summary=(f"validation loss moves {vn:.1%} of its level between evaluations, "
                                  f"{_times(vn, tn)} the training loss's {tn:.1%} ({_WORDS[how](train_name)}){lucky}"))

    def _compared(self, run: Run, vs: np.ndarray, v: np.ndarray,
                  vn: float) -> tuple[str, np.ndarray, float, str] | None:
        """The training comparison validation's noise passes, if any: (series, its steps, its relative noise, how).
        `single`: the training loss logged between evaluations, value by value (`single_ratio`); `cadence`: the
        training loss at the evaluations' cadence (`ratio`)."""
        picked = run.pick("loss")
        ts, t = finite_part(*run.arrays(picked))
        if t.size > self.cadence_share * v.size:
            tn = stats.relative_wiggle(t)
            if np.isfinite(tn) and vn >= self.single_ratio * tn:
                return picked, ts, tn, "single"
        name, ts, tc = self._training_at(run, vs)
        tn = stats.relative_wiggle(tc)
        if np.isfinite(tn) and vn >= self.ratio * tn:
            return name, ts, tn, "cadence" if tc.size == ts.size else "medians"
        return None

    def _evaluations(self, run: Run) -> str | None:
        """The evaluation-level validation series: the run's validation loss, or a sparser validation candidate (at
        least `min_points` finite points, the fewest first) that is smoother than it: a mean over the validation
        set beside the per-batch values a logger printed while validating. A sparser series that is not smoother
        is something else (a count the reader took for a loss) and is not read."""
        picked = run.pick("val_loss")
        mine = stats.relative_wiggle(finite_part(*run.arrays(picked))[1])
        sparser = sorted((run.finite_points(n), n) for n in run.candidates("val_loss")["name"].to_list()
                         if self.min_points <= run.finite_points(n) < run.finite_points(picked))
        for _, name in sparser:
            theirs = stats.relative_wiggle(finite_part(*run.arrays(name))[1])
            if np.isfinite(theirs) and np.isfinite(mine) and theirs < mine:
                return name
        return picked if run.finite_points(picked) >= self.min_points else None

    def _training_at(self, run: Run, vs: np.ndarray) -> tuple[str, np.ndarray, np.ndarray]:
        """The training loss at the evaluations' cadence: the training series with the point count nearest theirs,
        reduced to the median of its points in each interval between evaluations when it has more than
        `cadence_share` times as many."""
        names = run.candidates("loss")["name"].to_list()
        arrays = {n: finite_part(*run.arrays(n)) for n in names}
        name = min(names, key=lambda n: abs(np.log(max(arrays[n][1].size, 1) / vs.size)))
        ts, t = arrays[name]
        if t.size <= self.cadence_share * vs.size:
            return name, ts, t
        slot = np.searchsorted(vs, ts, side="left")  # interval (previous evaluation, this evaluation]
        keep = slot < vs.size
        slot, values = slot[keep], t[keep]
        order = np.argsort(slot, kind="stable")
        slot, values = slot[order], values[order]
        groups = np.split(values, np.flatnonzero(np.diff(slot)) + 1) if values.size else []
        return name, ts, np.asarray([np.median(g) for g in groups], dtype=float)


_WORDS = {"single": lambda name: f"{name}, its single logged values",
          "cadence": lambda name: f"{name}, at about the evaluations' cadence",
          "medians": lambda name: f"medians of {name} between evaluations"}


def _travel(v: np.ndarray) -> float:
    """How far the validation curve moves over the run: the range of its rolling median over a tenth of the
    points (at least 3), which evaluation noise does not widen."""
    smooth = stats.rolling_median(v, max(3, v.size // 10) | 1)
    return float(np.nanmax(smooth) - np.nanmin(smooth))


def _times(vn: float, tn: float) -> str:
    """The true ratio to three figures (`1.04×`, not a rounded `1.0×` beside a 1.0 threshold), or `while` when
    training does not move at all."""
    return f"{numbers.sig(vn / tn, 3)}×" if tn > 0 else "while"
