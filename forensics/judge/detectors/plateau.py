"""plateau: the loss falls, then stalls well above its floor."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

import math

import numpy as np
import polars as pl

from forensics.judge import stats
from forensics.judge.detectors.overfitting import Overfitting
from forensics.judge.detectors.base import (SHAPE, by_launch, class_count, class_source, finite_part, head_tail_of,
                                            level_of, loss_is_perplexity, src, too_short)
from forensics.judge.detectors.flat_loss import FlatLoss, shortest
from forensics.judge.detectors.resumed_run import ResumedRun
from forensics.judge.findings import Finding
from forensics.judge.run import Run


LR_ROUNDING = 1e-3  # LRs are logged as float32 or printed to 4 significant digits: ratios of them carry this error


@dataclass(frozen=True)
class Plateau:
    """The loss falls, then stalls well above its floor until the end.

    Detects: the smoothed loss (centred rolling median over `smooth` of the points) enters a band of ±`band`
    (at least `noise_k` noise sigmas) around its final level and stays there for at least `min_length` of the
    points, but for brief excursions (`max_outside` of the points, none `far` bands away), after falling at least
    `min_drop` of the initial level (and `min_drop_sigmas` of its noise: `stats.learned`, the boundary with
    flat_loss), while the final level is still at least `min_level` of the initial one (plus `head_sigmas` standard
    errors of its median: a noisy start drawn low makes no plateau); the trend inside the
    plateau projects less than `max_progress` of the earlier drop (or two noise sigmas, a noisy loss), and no fall
    beyond `trend_sigmas` sigmas of that trend at `max_pace` or more of the pace before the stall (still learning,
    at the pace it learned), nor a fall the trend allows (its fall plus `trend_sigmas` sigmas) at that pace: over a
    few noisy points a stall must be shown, not a fall merely unshown. From `min_points` points.
    A lower plateau counts when the LR's median over it is `lr_fall` × below its peak before it (an LR dropped to ~0).
    A stall that held until a restart (`ResumedRun`), judged on the segment before it, counts at any level when the
    loss after the restart falls `later_fall` below it: the floor was lower, the run was stopped on a plateau. So
    does a last launch's stall that an earlier launch appended to the same log beat by `later_fall`, from an initial
    loss within `same_start` of the last one's (`_other_launch_floor`, on `min_points` points or more).
    Of launches appended to one log, the last one is the curve the log ends on (`base.by_launch`).
    A short log (`short_points` to `min_points` points) needs a final level of `short_min_level` of the initial one.
    A stall within `constant_tol` of a constant predictor's loss (`stats.CONSTANT_PREDICTOR_MSE`) counts at any level.
    Held, at any level: a loss that fell `min_drop` (and `min_drop_sigmas`) from its first logged value, entered
    the band by `1 - held_length` of the points and whose Theil–Sen trend over the rest moves less than `held_move`
    of its level, the validation loss (where logged in the stall) falling less than `val_fall` over it: most of the
    run bought nothing, whatever the floor; a first value within `far` bands of the held level is one of its
    excursions, no fall to it (a noisy single-batch first record). From `short_points` to `min_points` points, only
    at `short_min_level` of the first value or higher (a fall within the first two epoch means hides from a median of
    three; 0 of the 40 healthy shared runs and of the 191 healthy restored runs of set12-set17).
    At chance level, at any level and from `short_points` points: a loss whose first logged value lies `min_drop`
    (and `min_drop_sigmas` noise sigmas) above ln C, whose smoothed curve then sits within `chance_band` of ln C for
    `min_length` of the points to the end, C the class count the config declares (`base.class_count`); without
    one, within `chance_rel_tol` of a ln k of `stats.chance_level` (a loss pinned at 0.6931 is a coin's).
    No plateau while the validation loss still falls by `val_fall` over it (`val_points` evaluations), or steadily
    by `val_steady_fall` (Mann–Kendall p < `val_steady_p`, τ ≤ −`val_steady_tau`): dropout, not a stall; unless it
    then froze (`_frozen_validation`), which is the finding.
    Glaring, at any length (`_glaring`): a first value `glaring_fall` above the last `glaring_points` points or more,
    all within `glaring_band` of their median, at chance (ln C declared, or an accuracy unchanged at every
    evaluation at 1/C, C the count whose ln C the loss sits at). Frozen, at any length and level (`_froze`): a loss that
    fell from its first value and then froze, pinned to the last digit or identical to its fifth over its last records (`FlatLoss.fell_then_froze`,
    the shape's one home: the boundary is flat_loss's pin and `stats.learned`, so the two never both claim it, §17).
    In an excerpt from well into training (`FlatLoss.held_excerpt`), a level held within its noise, at flat_loss's
    `min_points`: the fall before it is not in the log (a warning). A validation loss
    identical to its fifth digit over its last `FlatLoss.frozen_records` or more after a fall (`_frozen_validation`):
    the weights stopped.
    No plateau while the validation loss rose after its minimum beyond its own scatter (`_memorising`: overfitting's).
    No stall or held plateau on a log that stops at `plan_reached` of the plan its trainer printed or less (the last
    `eta` left against the time the last launch covers, `_short_of_plan`): "to the end" needs the end.
    No plateau of any rule while the run still learns (`_still_learning`): its LR still warms up, its validation
    loss sets a new best at most of its last evaluations (a sign test), by `val_steady_fall` over the stall or more.
    The first LR cut bought nothing (`_after_cut`), at `min_level` or higher: the first record of the LR `cut` × below
    the one before, from which to the end (`min_length` of the points or more) the loss stays within `cut_gain` of its
    level just before it; it says more than the stall alone, so it is read first.
    Why: learning stopped early: LR too small, a scheduler that decayed too soon, too little capacity.
    Evidence: plateau start step, level, fraction of the initial loss, length, slope inside it, LR fall.
    False alarms: 1 of the 176 healthy runs of the 849-run pool it could check (3 before `min_level` 0.6 and
    `held_move` 0.02); the glaring and chance rules on none; the frozen training loss and an earlier launch's floor
    on none of the 214 healthy runs of set8-set11 and the shared sets (1 claim, a step schedule's tail, before and after).
    The first LR cut and the new bests' size: 0 of the 168 healthy runs of the shared sets and set12-15 (healthy
    losses gain 19% or more after a first cut that leaves 35% of the run; later cuts of a converged run, 3%).
    """

    kind: ClassVar[str] = "plateau"
    stage: ClassVar[int] = SHAPE
    reads_curve: ClassVar[bool] = True  # judges the shape of the training-loss curve
    reads_shape: ClassVar[bool] = True  # reads the epoch aggregate where one is logged (`base.epoch_view`)
    requires: ClassVar[tuple[str, ...]] = ("loss",)
    reads_loss_level: ClassVar[bool] = True  # not on a GAN's adversarial losses (base.adversarial_loss)
    smooth: float = 0.05
    band: float = 0.03
    min_length: float = 0.35
    min_drop: float = stats.LEARNED_FALL  # the fall that makes it a plateau, not flat_loss (stats.learned)
    # "well above its floor": 0.6 of the initial loss. Healthy pool (176 runs checked): 0.5 and 0.55 fire on 3, 0.6
    # on 2, 0.7 and 0.8 on 1; 0.65 and up lose a shared set's labelled stall, so 0.6, with `held_move` (docs/engine.md)
    min_level: float = 0.6
    max_progress: float = 0.1
    noise_k: float = 3.0  # band at least this many noise sigmas of the smoothed curve
    lr_fall: float = 1000.0  # at any level when the LR's median over the plateau is ×1000 below its peak before it
    min_points: int = 20  # the band and the trend inside the plateau need this many points
    short_points: int = 10  # a short log (per-epoch: 10-19 points) ...
    short_min_level: float = 0.75  # ... stalls at this share of its initial loss or more: the larger effect only
    max_outside: float = 0.1  # brief excursions of the smoothed curve out of the band inside a plateau
    far: float = 2.0  # ... but none this many bands away
    min_drop_sigmas: float = stats.LEARNED_SIGMAS  # ... in noise sigmas of the initial level (a median of 3)
    constant_tol: float = 0.005  # a stall within 0.5% of a constant prediction's loss: the targets' mean learned
    val_fall: float = 0.05  # a validation loss still falling 5% over the plateau, on ...
    val_points: int = 3  # ... at least this many evaluations in it, means the model is still learning
    val_steady_fall: float = 0.01  # ... or by 1% when it falls steadily: Mann–Kendall p below this ...
    val_steady_p: float = 0.01
    val_steady_tau: float = 0.7  # ... and Kendall τ at or below minus this (nearly every evaluation lower)
    start_points: int = stats.START_POINTS  # the initial level: the median of the first this many points
    trend_sigmas: float = 2.0  # a fall inside the stall within this many sigmas of its fitted trend is noise
    max_pace: float = 0.25  # ... beyond it, a stall falling at a quarter of the pace before it or more still learns
    later_fall: float = 0.2  # a stall the loss beats by 20% after a restart was not its floor, at any level
    same_start: float = 0.25  # an earlier launch within 25% of the last one's initial loss: the same model and data
    # (pool, 25 logs with earlier launches of 20+ points: restarts of one model mostly within 0.9-1.1 of the last
    # start; a smoke test on another data set at 0.16, where the rule without this bar claimed a healthy resume)
    head_sigmas: float = 2.0  # the level rule holds against the initial level plus two of its standard errors
    held_length: float = 0.85  # a stall from 15% of the points to the end ...
    # ... moving less than 2% of its level over it: the run stopped learning, at any level (healthy pool, 176
    # checked: 0.015 to 0.025 fire on 1, 0.03 and 0.05 on 2)
    held_move: float = 0.02
    chance_band: float = 0.02  # a stall within 2% of ln C, C declared in the config: a uniform guess's loss
    chance_rel_tol: float = 1e-3  # without a declared C: within 0.1% of a ln k (stats.chance_level), 0.6931 ± 0.0007
    glaring_points: int = 3  # at any length: the last 3 points or more within ±1% of their median ...
    glaring_band: float = 0.01
    glaring_fall: float = 0.3  # ... after a first value 30% above them, at chance (ln C declared, or an accuracy
    # unchanged at 1/C, C read from the loss: a uniform guess's loss is ln C and its accuracy 1/C)
    # The first LR cut bought nothing, at `min_level` or higher: the first record of the LR `cut` × or more below the
    # one before (a step schedule, ReduceLROnPlateau, newbob; a smooth decay moves a few % a record) after which the
    # loss ends within `cut_gain` of its level just before it, over `min_length` of the points or more (healthy runs
    # of the shared and restored sets 12-15 with such a cut: the loss gains 19% after it at the least)
    cut: float = 1.5
    cut_gain: float = 0.03
    plan_reached: float = 0.25  # a log whose last launch covers a quarter of its printed plan or less has no end
    best_evals: int = 5  # a validation loss setting a new best at most of its last (up to) 5 evaluations ...
    min_best_evals: int = 3  # ... and at least 3 of them in the stall: still improving (a sign test)
    flat_loss: FlatLoss = FlatLoss()  # flat_loss's rules (held excerpts, identical values), as this analysis sets them
    resumed_run: ResumedRun = ResumedRun()  # the restarts resumed_run finds, likewise
    overfitting: Overfitting = Overfitting()  # and overfitting's margins for a held-out rise

    def _lr_fall(self, run: Run, start_step: int) -> float | None:
        """Peak LR up to `start_step` over the median LR from it to the end (None without an LR series on the
        loss's source). The median over the plateau, not the LR at its first step: a loss that has nearly settled
        enters the band a few points before the LR drop that freezes it there."""
        if not run.has("lr") or run.format_of(run.pick("lr")) != run.format_of(run.pick("loss")):
            return None
        s, lr = run.arrays("lr")
        ok = np.isfinite(lr)
        before, during = lr[ok & (s <= start_step)], lr[ok & (s >= start_step)]
        if before.size < 2 or during.size < 1 or not before.max() > 0:
            return None
        now = float(np.median(during))
        return float(before.max()) / now if now > 0 else float("inf")

    def _entry(self, dev: np.ndarray, band: float) -> int:
        """Where the smoothed curve enters the band around the final level for good: the first point inside it
        after the last one `far` × band away, from which at most `max_outside` of the points stray outside the
        band (a rolling median of noisy points, and its shrinking window at the end, makes brief excursions)."""
        out = dev > band
        far = np.flatnonzero(dev > self.far * band)
        first = int(far[-1]) + 1 if far.size else 0
        after = np.cumsum(out[::-1])[::-1]  # points outside from i to the end
        ok = ~out & (after <= self.max_outside * (dev.size - np.arange(dev.size)))
        ok[:first] = False
        return int(np.argmax(ok)) if ok.any() else dev.size

    def unavailable(self, run: Run) -> str | None:
        # Under `min_points` only a stall high above the initial loss can speak: the detector counts as run (for
        # the verdict and `-v`) only when it finds one, so a short log without it stays "too short".
        short = too_short(run, "loss", self.min_points)
        if (short and self._stall(run) is None and self._chance(run) is None and self._glaring(run) is None
                and self._froze(run) is None and self.flat_loss.held_excerpt(run) is None
                and self._frozen_validation(run) is None and self._held(run) is None
                and self._after_cut(run) is None):
            return short
        return None

    def _chance(self, run: Run) -> dict | None:
        """The plateau's evidence when the loss (its last launch) fell from its first logged value to the chance
        level ln k and sits there to the end, else None (the rule in the class docstring). The first value, not a
        median of the first few: a per-epoch log's first point is already a mean, and a fall within one noisy point
        is held to that point's noise."""
        steps, y = _last_launch(run)
        if y.size < self.short_points:
            return None
        n_tail = max(3, int(np.ceil(self.min_length * y.size)))
        w = max(3, int(y.size * self.smooth))
        sm = stats.rolling_median(y, w)
        found = class_count(run)
        if found is not None:
            k, tol = found[0], self.chance_band
        elif loss_is_perplexity(run):
            return None
        else:
            k, tol = stats.chance_level(sm[-n_tail:], self.chance_rel_tol), self.chance_rel_tol
            if k is None:
                return None
        log_k = math.log(k)
        near = np.abs(sm - log_k) <= tol * log_k
        start = int(np.flatnonzero(~near)[-1]) + 1 if not near.all() else 0
        if (y.size - start) < n_tail or start == 0:
            return None  # not at chance for `min_length` of the points, or at it from the first point (flat_loss's)
        if not stats.learned(y, log_k, self.min_drop, self.min_drop_sigmas, points=1):
            return None  # it started at chance: never moved (flat_loss's), not fell and stalled
        tail = float(np.median(y[-n_tail:]))
        head = float(y[0])
        return {"plateau_start_step": int(steps[start]), "level": tail, "initial_level": head,
                "fraction_of_initial": tail / head, "length_fraction": (y.size - start) / y.size,
                "chance_k": k, "chance_level": log_k, "chance_source": class_source(found) if found else None,
                "points": int(y.size)}

    def _stall(self, run: Run, segment: tuple[np.ndarray, np.ndarray] | None = None,
               floor: float | None = None) -> dict | None:
        """The plateau's evidence, or None: on the loss (its last launch, `_last_launch`), or on `segment` (steps,
        values) with `floor`, the lowest level the run reached after it, standing in for the level rule when it is
        `later_fall` below."""
        steps, y = segment if segment is not None else _last_launch(run)
        if y.size < self.min_points and not (self.short_points and y.size >= self.short_points):
            return None
        min_level = self.min_level if y.size >= self.min_points else self.short_min_level
        # The final level: the median over the last `min_length` of the points, the shortest plateau there is
        # (a last tenth's median wanders with the noise, and one bump of the smoothed curve then ends the band).
        tail = float(np.median(y[-max(3, int(np.ceil(self.min_length * y.size))):]))
        head = stats.start_level(y, self.start_points)  # the initial level: a fast early drop must not hide in a 10% median
        if not head > 0:
            return None
        w = max(3, int(y.size * self.smooth))
        sm = stats.rolling_median(y, w)
        # The band is relative to the level, widened to the noise a median of w points still carries.
        sigma = stats.noise(y)
        band = max(self.band * abs(tail), self.noise_k * sigma / np.sqrt(w))
        start = self._entry(np.abs(sm - tail), band)
        if start == 0 and abs(head - tail) > band:
            # The fall was quicker than the smoothing window (a few % of the points) and the smoothed curve starts
            # inside the band: the plateau starts where the points themselves enter it.
            start = int(np.argmax(np.abs(y - tail) <= band))
        length = (y.size - start) / y.size
        drop = head - tail
        if start == 0 or length < self.min_length:
            return None
        if not stats.learned(y, tail, self.min_drop, self.min_drop_sigmas, self.start_points):
            return None  # it did not fall (or only within the noise of its initial level): flat_loss's, if anything
        lr_fall = self._lr_fall(run, steps[start])
        # ×1e-3 logged as float32 reads 999.99994: an LR's own rounding must not undo a fall of three decades
        lr_explains = lr_fall is not None and lr_fall >= self.lr_fall * (1 - LR_ROUNDING) and y.size >= self.min_points
        constant = stats.constant_predictor_level(tail, float(np.nanmin(sm)), self.constant_tol)
        beaten = floor is not None and floor <= (1 - self.later_fall) * tail
        # "High" against the initial level as high as its noise allows: a median of a few single-batch losses
        # spread ±30% can start low by chance, and a tail that is "60% of its start" then only reflects the draw.
        head_high = head + self.head_sigmas * sigma / np.sqrt(self.start_points)
        if tail < min_level * head_high and not lr_explains and constant is None and not beaten:
            return None  # low already, and no LR collapse or constant prediction to explain a stall: converged
        slope, _ = stats.theil_sen(steps[start:], y[start:])
        change = -slope * (steps[-1] - steps[start])
        progress = change / drop
        if change > max(self.max_progress * drop, 2 * sigma):
            return None
        # A fall within one point's noise can still be beyond the trend's own uncertainty over the stall's points (a
        # line fitted to n points of noise σ moves σ·√(12/n) across them): a noisy loss that keeps falling at the
        # pace it fell before the "stall" is still learning. A slow crawl after a fast fall stays a plateau.
        pace = progress * (steps[start] - steps[0]) / max(steps[-1] - steps[start], 1)
        if (change > max(self.max_progress * drop, self.trend_sigmas * sigma * np.sqrt(12 / (y.size - start)))
                and pace >= self.max_pace):
            return None
        # A stall is shown, not a fall merely unshown: over a few noisy points the fall the trend allows (its fall
        # plus `trend_sigmas` of its uncertainty) may still be learning at `max_pace` of the earlier pace.
        allowed = change + self.trend_sigmas * sigma * np.sqrt(12 / (y.size - start))
        pace_allowed = allowed / drop * (steps[start] - steps[0]) / max(steps[-1] - steps[start], 1)
        if allowed > self.max_progress * drop and pace_allowed >= self.max_pace:
            return None
        ev = {"plateau_start_step": int(steps[start]), "level": tail, "initial_level": head,
              "fraction_of_initial": tail / head, "length_fraction": length, "slope_per_step": slope,
              "progress_in_plateau": progress, "band": band, "lr_fall_at_start": lr_fall,
              "points": int(y.size), "min_level": min_level, "constant_predictor_level": constant,
              "pace_in_plateau": pace}
        if beaten:
            ev.update(segment_end_step=int(steps[-1]), later_floor=floor)
        return ev

    def _other_launch_floor(self, run: Run) -> float | None:
        """The lowest level (rolling median) an earlier launch appended to the same log reached on `min_points`
        points or more, starting from the last launch's initial level (within `same_start` of it), or None: the
        same model started afresh on the same data went lower, so a stall `later_fall` above that was not its
        floor. A launch that starts elsewhere trains another task or another loss (a smoke test on a small set)."""
        *pieces, (_, last) = by_launch(run, "loss", *finite_part(*run.arrays("loss")))
        head = stats.start_level(last, self.start_points)
        floors = [float(np.nanmin(stats.rolling_median(y, max(3, int(y.size * self.smooth)))))
                  for _, y in pieces if y.size >= self.min_points
                  and abs(stats.start_level(y, self.start_points) - head) <= self.same_start * abs(head)]
        return min(floors) if floors else None

    def _before_restart(self, run: Run) -> dict | None:
        """A stall that a restart ended: the segment before each restart `ResumedRun` finds (the steps or the
        epoch going back), judged as a run of its own, whose level the loss after the restart beats by
        `later_fall` (its rolling median's minimum there): the stall was not the run's floor, and it held until
        the run was stopped and resumed. The plateau's evidence with the restart, or None."""
        steps, y = finite_part(*run.arrays("loss"))
        if not steps.size:
            return None  # non-finite from its first point: nothing before a restart to judge
        restarts = sorted({f.evidence["restart_step"] for f in self.resumed_run.check(run)
                           if f.evidence.get("overlap_steps") == 0})  # a segment is a stretch of rising steps
        edges = [int(steps[0])] + restarts
        for lo, hi in zip(edges, edges[1:]):
            seg, after = (steps >= lo) & (steps < hi), steps >= hi
            if seg.sum() < self.min_points or after.sum() < self.short_points:
                continue
            later = y[after]
            floor = float(np.nanmin(stats.rolling_median(later, max(3, int(later.size * self.smooth)))))
            ev = self._stall(run, (steps[seg], y[seg]), floor)
            if ev is not None and "later_floor" in ev and ev["level"] > 0:  # a loss of exactly 0 is no level
                ev["restart_step"] = hi
                return ev
        return None


    def _restart_finding(self, run: Run, ev: dict) -> Finding:
        steps, y = finite_part(*run.arrays("loss"))
        seg = np.flatnonzero(steps < ev["restart_step"])
        n = seg.size
        tail, tail_text = level_of(steps, y, n - max(3, int(np.ceil(self.min_length * n))), n - 1)
        head, head_text = level_of(steps, y, 0, self.start_points - 1)
        share = f"{tail / head:.0%} of " if head else ""  # a level of exactly 0 has no share to quote
        lower = f", {1 - ev['later_floor'] / tail:.0%} lower" if tail else ""
        return Finding.of(self, severity="warning", step=ev["plateau_start_step"], step_end=ev["segment_end_step"],
                          series=run.pick("loss"), evidence=ev, sources=(src(run, "loss", steps[seg]),),
                          summary=(f"loss stalls at {tail_text} ({share}its start, {head_text}) from step "
                                   f"{ev['plateau_start_step']} until the run was restarted at step "
                                   f"{ev['restart_step']} ({ev['length_fraction']:.0%} of that segment's points); "
                                   f"after the restart it falls to {ev['later_floor']:.4g} (rolling median){lower}: "
                                   f"the stall was not the run's floor"))

    def _val_improves(self, run: Run, start: int, end: int | None = None) -> float | None:
        """The validation loss's relative fall over the plateau (from the median of its first two evaluations
        from `start` on to that of its last two) when it is at least `val_fall` and its Theil–Sen trend points
        down over at least `val_points` evaluations, else None. Validation on another axis is not compared."""
        if not run.has("val_loss") or run.format_of(run.pick("val_loss")) != run.format_of(run.pick("loss")):
            return None
        vs, v = finite_part(*run.arrays("val_loss"))
        keep = (vs >= start) & (vs < end if end is not None else True)
        vs, v = vs[keep], v[keep]
        if v.size < self.val_points:
            return None
        first, last = float(np.median(v[:2])), float(np.median(v[-2:]))
        fall = (first - last) / abs(first) if first else 0.0
        slope, _ = stats.theil_sen(vs, v)
        if fall >= self.val_fall and slope < 0:
            return fall
        # a smaller fall that is steady, evaluation after evaluation, is learning too (beyond its own noise)
        trend = stats.mann_kendall(v, vs)
        steady = fall >= self.val_steady_fall and trend.p < self.val_steady_p and trend.tau <= -self.val_steady_tau
        return fall if steady else None

    def _still_learning(self, run: Run, start: int, end: int | None = None) -> str | None:
        """Why the run is still learning over the stall from step `start` (to `end`), or None: its LR still warms
        up (the LR's last value in the stall is its peak, above its value at the stall's start); its validation
        loss sets a new best at most of its last `best_evals` evaluations (`min_best_evals` of them in the stall),
        falling `val_steady_fall` or more from its first evaluation in the stall (new bests by a hair are a stall)."""
        fmt = run.format_of(run.pick("loss"))
        if run.has("lr") and run.format_of(run.pick("lr")) == fmt:
            s, lr = finite_part(*run.arrays("lr"))
            keep = (s >= start) & (s <= end if end is not None else True)
            during, upto = lr[keep], lr[s <= (end if end is not None else np.inf)]
            if (during.size >= 2 and during[-1] >= float(upto.max()) * (1 - LR_ROUNDING)
                    and during[-1] > during[0] * (1 + LR_ROUNDING)):
                return f"the LR still warms up ({during[0]:.3g} → {during[-1]:.3g} over the stall)"
        if run.has("val_loss") and run.format_of(run.pick("val_loss")) == fmt:
            vs, v = finite_part(*run.arrays("val_loss"))
            if end is not None:
                vs, v = vs[vs < end], v[vs < end]
            k = min(self.best_evals, int(np.sum(vs >= start)), v.size - 1)
            if k >= self.min_best_evals:  # validation is the witness where the run evaluates
                bests = stats.new_bests(v, k)
                # new bests by a hair are no learning a user would wait for: the fall over the stall's evaluations
                # must reach `val_steady_fall` too (a 0.4% fall over three new bests after an LR cut is a stall)
                inside = v[vs >= start]
                fall = (inside[0] - inside.min()) / abs(inside[0]) if inside[0] else 0.0
                return (f"the validation loss sets a new best at {bests} of its last {k} evaluations"
                        if 2 * bests > k and fall >= self.val_steady_fall else None)
        return None

    def check(self, run: Run) -> Iterator[Finding]:
        found = list(self._found(run))
        for f in found:
            if self._still_learning(run, f.step, f.evidence.get("restart_step")) is None and not self._memorising(run, f):
                yield f

    def _memorising(self, run: Run, f: Finding) -> bool:
        """The validation loss (on the training loss's axis) rose after its minimum, beyond its own scatter, before
        the stall's end: training flat while validation climbs is the model memorising (overfitting's), not a
        plateau. Not for a stall judged before a restart (validation then spans two launches)."""
        if f.evidence.get("restart_step") is not None or not run.has("val_loss") or (
                run.format_of(run.pick("val_loss")) != run.format_of(run.pick("loss"))):
            return False
        vs, v = finite_part(*run.arrays("val_loss"))
        turn = self.overfitting.held_out_turn(vs, v)
        return turn is not None and turn < (f.step_end if f.step_end is not None else vs[-1])

    def _short_of_plan(self, run: Run) -> bool:
        """Whether the log stops well short of the plan its trainer printed: the last `eta` says more than
        `1 / plan_reached - 1` × the time the loss's last launch covers was left. A stall "to the end" of a log that
        reached `plan_reached` of its plan or less says nothing of the run's end (an interrupted launch)."""
        left = run.config_number("eta_left_s")
        if left is None:
            return False
        steps, _ = _last_launch(run)
        f = run.series_named(run.pick("loss"))
        wall = f.filter(pl.col("step").is_between(int(steps[0]), int(steps[-1])))["wall_time"].drop_nulls()
        if wall.len() < 2:
            return False
        covered = float(wall.max()) - float(wall.min())
        return covered > 0 and covered / (covered + left) <= self.plan_reached

    def _found(self, run: Run) -> Iterator[Finding]:
        chance = self._chance(run)
        if chance is not None:
            yield self._chance_finding(run, chance)
            return
        glaring = self._glaring(run)
        if glaring is not None:
            yield self._glaring_finding(run, glaring)
            return
        short = self._short_of_plan(run)
        cut = None if short else self._after_cut(run)
        if cut is not None and self._val_improves(run, cut["plateau_start_step"]) is None:
            yield self._cut_finding(run, cut)  # the stall's cause in the log: it says more than the stall alone
            return
        ev = None if short else self._stall(run, floor=self._other_launch_floor(run))
        if ev is None:
            froze = self._froze(run)
            if froze is not None:
                yield self._glaring_finding(run, froze)
                return
            frozen = self._frozen_validation(run)
            if frozen is not None:
                yield frozen
                return
            excerpt = None if short else self.flat_loss.held_excerpt(run)
            if excerpt is not None:
                yield self._excerpt_finding(run, *excerpt)
                return
            held = None if short else self._held(run)
            if held is not None:
                yield self._held_finding(run, held)
                return
            ev = self._before_restart(run)
            if ev is not None and self._val_improves(run, ev["plateau_start_step"], ev["restart_step"]) is None:
                yield self._restart_finding(run, ev)
            return
        if self._val_improves(run, ev["plateau_start_step"]) is not None:
            # training stalls while validation keeps improving (dropout, augmentation): no plateau, unless the
            # validation loss then froze: a fixed held-out set scored identically says the weights stopped
            froze = self._froze(run)
            frozen = self._glaring_finding(run, froze) if froze is not None else self._frozen_validation(run)
            if frozen is not None:
                yield frozen
            return
        steps, y = _last_launch(run)
        length = ev["length_fraction"]
        # the levels as the file shows them: the medians `_stall` took, with their steps in the file's words
        say = partial(run.printed_span, run.pick("loss"))
        tail, tail_text = level_of(steps, y, y.size - max(3, int(np.ceil(self.min_length * y.size))), y.size - 1,
                                   say=say)
        head, head_text = level_of(steps, y, 0, self.start_points - 1, say=say)
        constant = ("" if ev["constant_predictor_level"] is None else
                    f", the MSE of a constant prediction ({ev['constant_predictor_level']:g}), never beaten")
        if "later_floor" in ev:
            constant += (f"; an earlier launch appended to this log reached {ev['later_floor']:.4g} (rolling median), "
                         f"{1 - ev['later_floor'] / tail:.0%} lower: the stall is not the model's floor")
        yield self._warning(run, ev, steps, (f"loss stalls at {tail_text} ({tail / head:.0%} of its start, {head_text}) "
                                             f"from {say(ev['plateau_start_step'])} to the end ({length:.0%} of the "
                                             f"points){constant}"))

    def _frozen_validation(self, run: Run) -> Finding | None:
        """The validation loss identical to its fifth digit over its last evaluations (`FlatLoss.frozen_tail`) after
        falling `min_drop` from its first: a fixed held-out set scored the same says the weights stopped. A warning.
        The training loss's freeze after a fall is `FlatLoss.fell_then_froze`'s (`_froze`), its one home."""
        if not run.has("val_loss"):
            return None
        vs, v = finite_part(*run.arrays("val_loss"))
        k = self.flat_loss.frozen_tail(v)
        if k == 0 or k == v.size or float(v[0]) - float(np.median(v[-k:])) < self.min_drop * abs(float(v[0])):
            return None
        level = float(np.median(v[-k:]))
        ev = {"frozen_evals": k, "evals": int(v.size), "frozen_level": level, "first_level": float(v[0]),
              "plateau_start_step": int(vs[-k]), "fraction_of_initial": level / float(v[0]), "frozen_role": "val_loss"}
        return Finding.of(self, severity="warning", step=int(vs[-k]), step_end=int(vs[-1]),
                          series=run.pick("val_loss"), evidence=ev, sources=(src(run, "val_loss", vs[-k:]),),
                          summary=(f"validation loss is identical to its fifth digit at its last {k} evaluations, "
                                   f"steps {vs[-k]}-{vs[-1]} ({shortest(float(v[-k]))} → {shortest(float(v[-1]))}), "
                                   f"after falling from {shortest(float(v[0]))} at step {vs[0]}: the weights no "
                                   f"longer change; learning stopped at step {vs[-k]} (a decayed LR, dead units)"))

    def _excerpt_finding(self, run: Run, steps: np.ndarray, y: np.ndarray, ev: dict) -> Finding:
        """A level held within its noise over an excerpt that opens well into training (`FlatLoss.held_excerpt`):
        the fall before it is not in the log, so it is a stall, not a loss that never moved."""
        (_, head), (_, tail) = head_tail_of(steps, y, self.flat_loss.edge)
        ev = ev | {"excerpt_from_step": int(steps[0])}
        return Finding.of(self, severity="warning", step=int(steps[0]), step_end=int(steps[-1]),
                          series=run.pick("loss"), evidence=ev, sources=(src(run, "loss", steps),),
                          summary=(f"loss holds its level over steps {steps[0]}-{steps[-1]}, {head} → {tail} "
                                   f"({ev['relative_change']:+.1%}, within its noise), in an excerpt that opens at "
                                   f"step {steps[0]}: the fall before it is not in the log; training has stalled at "
                                   f"this level"))

    def _held(self, run: Run) -> dict | None:
        """The plateau's evidence when the loss (its last launch) fell from its first logged value and then held
        its level for `held_length` of the points to the end, moving less than `held_move` of it (the rule in the
        class docstring), else None."""
        steps, y = _last_launch(run)
        if y.size < self.short_points:
            return None
        n_tail = max(3, int(np.ceil(self.min_length * y.size)))
        tail = float(np.median(y[-n_tail:]))
        if not tail > 0:
            return None  # a loss of 0 (an empty accumulator) is flat_loss's
        if y.size < self.min_points and tail < self.short_min_level * float(y[0]):
            return None  # a short log's held level counts only high above its start: the larger effect only
        w = max(3, int(y.size * self.smooth))
        sm = stats.rolling_median(y, w)
        band = max(self.band * tail, self.noise_k * stats.noise(y) / np.sqrt(w))
        start = self._entry(np.abs(sm - tail), band)
        if start == 0 and abs(y[0] - tail) > band:
            start = int(np.argmax(np.abs(y - tail) <= band))  # a fall quicker than the smoothing window
        length = (y.size - start) / y.size
        if start == 0 or length < self.held_length:
            return None
        if not stats.learned(y, tail, self.min_drop, self.min_drop_sigmas, points=1):
            return None
        if y[0] - tail <= self.far * band:
            return None  # a first value within the excursions the held stretch itself allows is no fall to it
        slope, _ = stats.theil_sen(steps[start:], y[start:])
        move = float(-slope * (steps[-1] - steps[start]) / tail)
        if abs(move) >= self.held_move:
            return None
        val = self._val_fall(run, int(steps[start]))
        if val is not None and val >= self.val_fall:
            return None  # validation still improves over the stall: still learning
        return {"plateau_start_step": int(steps[start]), "level": tail, "initial_level": float(y[0]),
                "fraction_of_initial": tail / float(y[0]), "length_fraction": length, "move_in_plateau": move,
                "slope_per_step": float(slope), "val_fall_in_plateau": val, "band": band, "points": int(y.size)}

    def _after_cut(self, run: Run) -> dict | None:
        """The plateau's evidence when the first LR cut (the first record of the LR `cut` × or more below the one
        before, on the loss's source) bought nothing: from it to the end (`min_length` of the points or more) the
        loss (its last launch) ends within `cut_gain` of its level just before it (medians of `smooth` of the
        points), at `min_level` of its initial level or higher, after a fall from it (`stats.learned`). Else None.
        The scheduler cut the LR where the loss stalled, and the stall held: it cut too early, or the LR was never
        the limit."""
        if not run.has("lr") or run.format_of(run.pick("lr")) != run.format_of(run.pick("loss")):
            return None
        steps, y = _last_launch(run)
        if y.size < self.short_points:
            return None
        ls, lr = finite_part(*run.arrays("lr"))
        keep = (ls >= steps[0]) & (ls <= steps[-1]) & (lr > 0)
        ls, lr = ls[keep], lr[keep]
        k = max(3, int(y.size * self.smooth))
        head = stats.start_level(y, self.start_points)
        end = float(np.median(y[-k:]))
        if not head > 0 or end < self.min_level * head or not stats.learned(
                y, end, self.min_drop, self.min_drop_sigmas, self.start_points):
            return None  # low already (a converged run's last cuts gain little), or it never fell: flat_loss's
        cuts = np.flatnonzero(lr[1:] * self.cut <= lr[:-1]) + 1
        if not cuts.size:
            return None
        # The first cut only: a scheduler that cuts again once the loss has settled (ReduceLROnPlateau on a converged
        # run, its last cuts gaining 3%) answers a stall, it did not make one; a first cut gains 19% or more there.
        i = int(cuts[0])
        before, after = y[steps < ls[i]], y[steps >= ls[i]]
        if after.size < self.min_length * y.size or before.size < k:
            return None
        level = float(np.median(before[-k:]))
        gain = (level - end) / abs(level)
        if abs(gain) >= self.cut_gain:
            return None
        return {"plateau_start_step": int(ls[i]), "level": end, "level_before_cut": level,
                "initial_level": head, "fraction_of_initial": end / head, "gain_after_cut": gain,
                "lr_before_cut": float(lr[i - 1]), "lr_after_cut": float(lr[i]), "cuts_after": int(cuts.size),
                "lr_at_end": float(lr[-1]), "length_fraction": after.size / y.size, "points": int(y.size)}

    def _cut_finding(self, run: Run, ev: dict) -> Finding:
        steps, y = _last_launch(run)
        say = partial(run.printed_span, run.pick("loss"))
        k = max(3, int(y.size * self.smooth))
        before = int(np.sum(steps < ev["plateau_start_step"]))
        _, level_text = level_of(steps, y, before - k, before - 1, say=say)
        _, end_text = level_of(steps, y, y.size - k, y.size - 1, say=say)
        more = (f", and {ev['cuts_after'] - 1} more cut{'s' if ev['cuts_after'] > 2 else ''} to "
                f"{shortest(ev['lr_at_end'])}" if ev["cuts_after"] > 1 else "")
        return self._warning(run, ev, steps, (
            f"at {say(ev['plateau_start_step'])} the LR is cut from {shortest(ev['lr_before_cut'])} to "
            f"{shortest(ev['lr_after_cut'])}{more}, and the loss stops there: {level_text} before the cut, "
            f"{end_text} at the end ({-ev['gain_after_cut']:+.1%} over {ev['length_fraction']:.0%} of the points), "
            f"{ev['fraction_of_initial']:.0%} of its start: the cut bought nothing (cut too early, or the LR was "
            f"not what held it)"))

    def _val_fall(self, run: Run, start: int) -> float | None:
        """The validation loss's relative fall from the median of its first two evaluations from `start` on to that
        of its last two (at least `val_points` of them, on the loss's source), else None."""
        if not run.has("val_loss") or run.format_of(run.pick("val_loss")) != run.format_of(run.pick("loss")):
            return None
        vs, v = finite_part(*run.arrays("val_loss"))
        v = v[vs >= start]
        if v.size < self.val_points:
            return None
        first, last = float(np.median(v[:2])), float(np.median(v[-2:]))
        return (first - last) / abs(first) if first else None

    def _held_finding(self, run: Run, ev: dict) -> Finding:
        steps, y = _last_launch(run)
        n = max(3, int(np.ceil(self.min_length * y.size)))
        say = partial(run.printed_span, run.pick("loss"))  # the file's steps, where its counter starts again
        _, tail_text = level_of(steps, y, y.size - n, y.size - 1, say=say)
        val = ("" if ev["val_fall_in_plateau"] is None else
               f", the validation loss {-ev['val_fall_in_plateau']:+.1%} over it")
        return Finding.of(self, severity="warning", step=ev["plateau_start_step"], step_end=int(steps[-1]),
                          series=run.pick("loss"), evidence=ev, sources=(src(run, "loss", steps),),
                          summary=(f"loss falls from {shortest(float(y[0]))} at {say(steps[0])} to {tail_text} and "
                                   f"holds it from {say(ev['plateau_start_step'])} to the end ({math.floor(ev['length_fraction'] * 100)}% of "
                                   f"the points), its trend moving {-ev['move_in_plateau']:+.1%} over them{val}: the run "
                                   f"stopped learning early and the rest of it bought nothing"))

    def _froze(self, run: Run) -> dict | None:
        """The plateau's evidence, at any length and level, where the loss (its last launch) fell and then froze
        (`FlatLoss.fell_then_froze`, the shape's one home): the weights stopped. Else None."""
        steps, y = _last_launch(run)
        frozen = self.flat_loss.fell_then_froze(y)
        if frozen is None:
            return None
        k = frozen["frozen_points"]
        return {"plateau_start_step": int(steps[-k]), "level": frozen["pinned_value"], "initial_level": float(y[0]),
                "fraction_of_initial": frozen["pinned_value"] / float(y[0]), "length_fraction": k / y.size,
                "points": int(y.size), "flat_points": k, "frozen": True,
                "significant_digits": frozen["significant_digits"], "exact": frozen["exact"]}

    def _glaring(self, run: Run) -> dict | None:
        """The plateau's evidence at any length when the loss (its last launch) fell from its first value by
        `glaring_fall` and its last `glaring_points` points or more lie within `glaring_band` of their median, at
        chance: within `chance_band` of ln C where the config declares C, or beside an accuracy (train or
        validation, on the loss's source) unchanged at every evaluation at 1/C, C the class count whose ln C the
        loss sits at (a uniform guess's accuracy and loss agree). A few pasted records show that at a glance."""
        steps, y = _last_launch(run)
        if y.size < self.glaring_points + 1:
            return None
        level = float(np.median(y[-self.glaring_points:]))
        inside = np.abs(y - level) <= self.glaring_band * abs(level)
        k = int(np.argmin(inside[::-1])) if not inside.all() else y.size
        if k < self.glaring_points or k == y.size or not level > 0 or y[0] < (1 + self.glaring_fall) * level:
            return None  # not flat at the end, flat from the first point (flat_loss's), or no large fall before
        ev = {"plateau_start_step": int(steps[-k]), "level": level, "initial_level": float(y[0]),
              "fraction_of_initial": level / float(y[0]), "length_fraction": k / y.size, "points": int(y.size),
              "flat_points": k}
        found = class_count(run)
        if found is not None:
            if abs(level - math.log(found[0])) <= self.chance_band * math.log(found[0]):
                return {**ev, "chance_k": found[0], "chance_level": math.log(found[0]),
                        "chance_source": class_source(found)}
            return None
        if loss_is_perplexity(run):
            return None  # a perplexity is no log-level: -ln(accuracy) is not its chance level
        fmt = run.format_of(run.pick("loss"))
        for name in run.all_of("accuracy") + run.all_of("val_accuracy"):
            if run.format_of(name) != fmt:
                continue
            _, a = finite_part(*run.arrays(name))
            if a.size < 2 or np.ptp(a) != 0:
                continue  # an accuracy that moved learned something
            acc = float(a[0]) / (100.0 if a[0] > 1.5 else 1.0)
            if 0 < acc < 1 and abs(level + math.log(acc)) <= self.chance_band * level:
                return {**ev, "chance_k": round(1 / acc), "chance_level": -math.log(acc), "chance_source": None,
                        "accuracy_series": name, "accuracy": float(a[0]), "accuracy_points": int(a.size)}
        return None

    def _glaring_finding(self, run: Run, ev: dict) -> Finding:
        steps, y = _last_launch(run)
        say = partial(run.printed_span, run.pick("loss"))  # the file's steps, where its counter starts again
        k = ev["flat_points"]
        _, tail_text = level_of(steps, y, y.size - k, y.size - 1, say=say)
        spread = float(np.max(np.abs(y[-k:] - ev["level"]))) / ev["level"]
        if ev.get("frozen"):
            return self._warning(run, ev, steps, (
                f"loss falls from {shortest(float(y[0]))} at {say(steps[0])} to {shortest(ev['level'])} and is "
                + ("exactly that value" if ev["exact"] else "identical to its fifth digit")
                + f" at each of its last {k} points ({say(steps[-k], steps[-1])}): minibatch noise never repeats a "
                + (f"loss to {ev['significant_digits']} significant digits" if ev["exact"] else "loss so closely")
                + "; it learned, then stopped (frozen weights, dead units, an LR that fell to 0)"))
        witness = (f"an accuracy of {ev['accuracy']:.4g} unchanged at all {ev['accuracy_points']} evaluations of "
                   f"{ev['accuracy_series']}, 1/{ev['chance_k']}, beside ln {ev['chance_k']} = "
                   f"{ev['chance_level']:.4g}" if "accuracy_series" in ev else
                   f"ln {ev['chance_k']} = {ev['chance_level']:.4g}; {ev['chance_source']}")
        return self._warning(run, ev, steps, (
            f"loss falls from {y[0]:.4g} at {say(steps[0])} to {tail_text} and stays within ±{spread:.1%} of it over "
            f"its last {k} points, at chance level ({witness}): the model predicts no better than a uniform guess"))

    def _chance_finding(self, run: Run, ev: dict) -> Finding:
        steps, y = _last_launch(run)
        say = partial(run.printed_span, run.pick("loss"))
        n = max(3, int(np.ceil(self.min_length * y.size)))
        _, tail_text = level_of(steps, y, y.size - n, y.size - 1, say=say)
        declared = f"; {ev['chance_source']}" if ev["chance_source"] else ""
        return self._warning(run, ev, steps, (
            f"loss falls from {y[0]:.4g} at {say(steps[0])} to chance level and sits there from "
            f"{say(ev['plateau_start_step'])} to the end ({ev['length_fraction']:.0%} of the points): {tail_text}, at "
            f"ln {ev['chance_k']} = {ev['chance_level']:.4g}, the loss of a uniform guess over {ev['chance_k']} "
            f"classes{declared}: the model predicts no better than chance"))

    def _warning(self, run: Run, ev: dict, steps: np.ndarray, summary: str) -> Finding:
        """A plateau warning over the last launch's loss from the evidence's start to the end."""
        return Finding.of(self, severity="warning", step=ev["plateau_start_step"], step_end=int(steps[-1]),
                          series=run.pick("loss"), evidence=ev, sources=(src(run, "loss", steps),), summary=summary)


def _last_launch(run: Run) -> tuple[np.ndarray, np.ndarray]:
    """The finite loss of the last launch appended to the log (the whole log for one launch): a stall is read on
    the curve the log ends on, never from a level an earlier launch reached."""
    return by_launch(run, "loss", *finite_part(*run.arrays("loss")))[-1]
