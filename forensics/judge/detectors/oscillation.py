"""oscillation: the loss swings up and down without settling."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from forensics.judge import stats
from forensics.judge.detectors.base import (MECHANISM, by_launch, class_count, epoch_view, finite_part, level_of,
                                            point, src, too_short)
from forensics.judge.findings import Finding
from forensics.judge.run import Run


@dataclass(frozen=True)
class Oscillation:
    """The loss swings up and down without settling, with a weak trend.

    Detects: in the second half of the finite loss, around its Theil–Sen line, at least `min_crossings` swings from
    below −½ sigma to above +½ sigma, a weak trend (under `max_trend` amplitudes, |Kendall τ| ≤ `max_tau`), and one of:
    structured swings: sigma ≥ `min_amplitude` of the level and an autocorrelation over lags 1..`max_lag` of at least
    `min_autocorr` (and 4/√n) in magnitude (minibatch noise is independent from batch to batch), at a lag that is no
    whole number of epochs (the same batches in the same order each epoch: `_epoch_period`);
    unsettled swings: robust sigma ≥ `min_amplitude` of the level, on a level `min_above` × its reference (log C,
    else the start), with a sigma of at least `min_unsettled` × the run's whole progress, or a loss that never fell
    (`stats.learned`, from its first points or its first tenth, nor a Mann–Kendall fall at p < `fall_p` over the
    launch: a single-batch spread that wide hides a real fall from a median of three points), still within
    `around` × its start, whose upper quartile over that half is `min_factor` × its lower one (a factor, not noise),
    beside no validation loss falling over that half at p < `fall_p` (`min_val_points` evaluations: still learning);
    a level between the two moved up and stayed (a changed objective, a step up), and is no swinging;
    bouncing weights: the training loss swinging across its trend `min_bounce_crossings` times (a validation loss
    that bounces beside one that never swings below its trend is val_noise's), the validation loss over that half (`min_val_points`
    evaluations), not climbing over it (Mann–Kendall p < `fall_p`: memorising, overfitting's), reverses at `min_val_flips` of its steps by a median step of `min_val_step` of its level, training
    being the noisier of the two, at a training level of at least `min_bounce_level` of its reference.
    rebounds (first, over the whole last launch): a smooth loss (`max_turns`) climbing back `min_rebound` × from a
    trough over `rebound_records` rises and falling again, `min_rebounds` times (`_rebounds`).
    Where the writer logged an epoch aggregate beside per-step losses, the shape is the epoch means' (`epoch_view`).
    Why: an LR too high without diverging keeps the loss bouncing instead of converging.
    Evidence: amplitude relative to level, the strongest autocorrelation and its lag, lag-1
    autocorrelation of the residual and of the differences, sign-change rate of differences, crossings, the
    robust sigma and the run's progress, and which rule held (`structured` or `unsettled`).
    False alarms: 0 of the 72 healthy real runs it could check (benchmarks/false_alarms.py, eleven development sets).
    1 of the 87 of the fifteen labelled sets (validation lines read into the training loss: a reading question).
    rebounds: 0 of the 40 healthy shared runs and 0 of the 191 restored healthy runs (set12-set17).
    """

    kind: ClassVar[str] = "oscillation"
    stage: ClassVar[int] = MECHANISM
    reads_curve: ClassVar[bool] = True  # judges the shape of the training-loss curve
    reads_shape: ClassVar[bool] = True  # reads the epoch aggregate where one is logged (`base.epoch_view`)
    requires: ClassVar[tuple[str, ...]] = ("loss",)
    reads_loss_level: ClassVar[bool] = True  # not on a GAN's adversarial losses (base.adversarial_loss)
    min_amplitude: float = 0.1  # healthy pool: 0 of 162 from 0.05 to 0.3
    min_autocorr: float = 0.5  # half the residual variance repeats at some lag: structure, not noise
    max_lag: int = 8
    min_crossings: int = 6
    max_trend: float = 2.0
    max_tau: float = 0.3  # |Kendall tau| of the half against step: above it the trend is not weak
    min_above: float = 3.0  # unstructured swings count on a loss this far above a uniform guess's (or its start)
    min_unsettled: float = 1.0  # ... and with a sigma at least the run's whole progress
    min_val_points: int = 8  # evaluations over the training half, for the bouncing-weights rule
    min_val_flips: float = 0.35  # a third of the validation steps reverse (settled weights: ~0; white noise: 2/3)
    min_val_step: float = 0.04  # and its median step is 4% of its level (settled weights: < 1%; mismatch: 2.3%)
    min_bounce_level: float = 0.25  # and the loss stays at a quarter of its reference or more (not converged)
    min_bounce_crossings: int = 2  # and the training loss itself swings (LR too high: 4-53; pool false claim: 0)
    min_factor: float = 1.5  # a loss whose upper quartile is 1.5× its lower one, around the level it started at ...
    around: float = 1.5  # ... its median there within ×1.5 of its start
    fall_p: float = 0.01  # ... and no fall over the whole launch at Mann–Kendall p below this (a falling loss learns)
    min_rebound: float = 3.0  # a smooth loss climbing back ×3 from a trough ...
    rebound_records: int = 3  # ... over 3 consecutive rises, then falling again ...
    min_rebounds: int = 2  # ... twice or more: overshooting, not a bump
    max_turns: float = 0.25  # smooth: its steps change direction at under a quarter of records (batch noise: 2/3)
    min_points: int = 24  # the second half's swings, crossings and autocorrelation need this many points in all
    # (healthy pool: 0 of 162 checked at 24; 0 of 205 at 12)

    def unavailable(self, run: Run) -> str | None:
        run = epoch_view(run)  # the epoch means' shape where the writer logged them beside per-step values
        return too_short(run, "loss", self.min_points)

    def check(self, run: Run) -> Iterator[Finding]:
        run = epoch_view(run)
        steps, y = by_launch(run, "loss", *finite_part(*run.arrays("loss")))[-1]  # the last launch, on its own
        keep = np.isfinite(y)
        steps, y = steps[keep], y[keep]
        if y.size < self.min_points:
            return
        rebound = self._rebounds(run, steps, y)
        if rebound is not None:
            yield rebound
            return
        x, seg = steps[y.size // 2:].astype(float), y[y.size // 2:]
        slope, icpt = stats.theil_sen(x, seg)
        resid = seg - (slope * x + icpt)
        lvl = abs(stats.level(seg))
        amp = float(np.std(resid))
        acf = stats.autocorr(resid, self.max_lag)
        lag = int(np.nanargmax(np.abs(acf))) + 1 if np.isfinite(acf).any() else 1
        r = float(acf[lag - 1])
        crossings = stats.swings(resid, 0.5 * amp)
        trend = abs(slope * (x[-1] - x[0]))
        tau = stats.mann_kendall(seg, x).tau
        structured = (abs(r) >= max(self.min_autocorr, 4.0 / np.sqrt(seg.size))  # 4 sigmas of white noise's r
                      and amp >= self.min_amplitude * lvl and crossings >= self.min_crossings
                      and not _epoch_period(run, steps[y.size // 2:], lag))
        sigma = stats.MAD_TO_SIGMA * stats.mad(resid)
        start = float(np.median(y[:max(3, y.size // 10)]))
        progress = max(start - lvl, 0.0)  # a loss that rose made none
        classes = class_count(run)
        reference = math.log(classes[0]) if classes else start
        unsettled = (sigma >= self.min_amplitude * lvl and lvl >= self.min_above * reference
                     and sigma >= self.min_unsettled * progress
                     and stats.swings(resid, 0.5 * sigma) >= self.min_crossings)  # a band the tails do not widen
        if not (lvl > 0 and abs(tau) <= self.max_tau and trend <= self.max_trend * amp):
            return
        q1, q3 = np.percentile(seg, [25, 75])
        around = (not stats.learned(y, lvl) and not _falls(steps, y, lvl, self.fall_p) and q1 > 0
                  and lvl <= self.around * start
                  and q3 >= self.min_factor * q1 and stats.swings(resid, 0.5 * sigma) >= self.min_crossings)
        # ... unless the validation loss over that half keeps falling: the weights still improve, and the training
        # spread is batch noise (heavy-tailed single-batch losses of a model that started near its floor)
        around = around and not self._validation_falls(run, x[0])
        unsettled = unsettled or around  # swings by a factor around the level it started at: no progress at all
        high = lvl >= self.min_bounce_level * reference
        bounce = None if structured or unsettled or not high or crossings < self.min_bounce_crossings \
            else self.bouncing_weights(run, x[0], seg)
        if not (structured or unsettled or bounce):
            return
        crossings = crossings if structured or bounce else stats.swings(resid, 0.5 * sigma)
        r1 = float(acf[0])
        rule = "structured" if structured else "unsettled" if unsettled else "bouncing_weights"
        ev = {"rule": rule, **(bounce or {}),
              "relative_amplitude": amp / lvl, "amplitude": amp, "level": lvl, "robust_sigma": sigma,
              "start_level": start, "progress": progress, "reference": reference,
              "reference_source": f"log({classes[0]})" if classes else "start level", "autocorr": r, "autocorr_lag": lag,
              "lag1_autocorr": r1, "diff_lag1_autocorr": stats.lag1_autocorr(np.diff(seg)),
              "sign_change_rate": stats.sign_change_rate(seg), "zero_crossings": crossings, "kendall_tau": tau,
              "trend_over_window": trend, "window_start": int(x[0]), "window_end": int(x[-1])}
        start_text = level_of(steps, y, 0, max(3, y.size // 10) - 1, ".3g")[1]  # the start as the file shows it
        yield Finding.of(self, severity="warning", step=int(x[0]), step_end=int(x[-1]), series=run.pick("loss"),
                         evidence=ev, sources=(src(run, "loss", steps),),
                         summary=(f"loss swings by ±{amp:.3g} ({amp / lvl:.0%} of its median {lvl:.3g} there) around a weak "
                                  f"trend over steps {int(x[0])}-{int(x[-1])}, {crossings} crossings, " + (
                                      f"autocorrelation {r:.2f} at lag {lag} (white noise: ~0)"
                                      if rule == "structured" else
                                      f"and the validation loss moves {bounce['val_median_step']:.1%} of its level "
                                      f"between evaluations, reversing at {bounce['val_sign_change_rate']:.0%} of "
                                      f"them: the weights do not settle" if rule == "bouncing_weights" else
                                      f"and does not settle: the level is {lvl / reference:.1f}× "
                                      + (f"log({classes[0]}) = {reference:.3g}, a uniform guess's loss" if classes
                                         else f"its start ({start_text})") + (
                                          f", no lower than its start ({start_text})" if progress == 0 else
                                          f", and the swings' robust sigma {sigma:.3g} is at least the run's whole "
                                          f"progress ({progress:.3g} below its start ({start_text}))"))))

    def _rebounds(self, run: Run, steps: np.ndarray, y: np.ndarray) -> Finding | None:
        """A smooth loss (its steps change direction at under `max_turns` of records: no batch noise) that climbs
        back from a trough by `min_rebound` × or more over `rebound_records` rises, then falls again, at least
        `min_rebounds` times (`stats.rebounds`): it overshoots its minimum instead of settling (an LR too high for a
        full-batch or epoch-mean curve). Else None."""
        turns = stats.sign_change_rate(y)
        found = stats.rebounds(y, self.min_rebound, self.rebound_records)
        if len(found) < self.min_rebounds or not turns <= self.max_turns:
            return None
        said = [f"{point(steps, y, a)} to {point(steps, y, b)} (×{y[b] / y[a]:.3g})" for a, b in found]
        ev = {"rule": "rebounds", "rebounds": len(found), "sign_change_rate": turns,
              "troughs": [int(steps[a]) for a, _ in found], "peaks": [int(steps[b]) for _, b in found],
              "factors": [float(y[b] / y[a]) for a, b in found], "min_rebound": self.min_rebound}
        return Finding.of(self, severity="warning", step=int(steps[found[0][0]]), step_end=int(steps[found[-1][1]]),
                          series=run.pick("loss"), evidence=ev, sources=(src(run, "loss", steps),),
                          summary=(f"loss climbs back {len(found)} times after falling: from " + "; from ".join(said)
                                   + f", on a smooth curve (its steps change direction at {turns:.0%} of records; "
                                   f"batch noise: ~67%): it overshoots its minimum instead of settling"))

    def _validation_falls(self, run: Run, start: float) -> bool:
        """The validation loss from step `start` on (`min_val_points` evaluations or more) falls, at Mann–Kendall
        p < `fall_p`: the model is still learning, whatever its training loss's spread."""
        if run.pick("val_loss") is None:
            return False
        vs, v = finite_part(*run.arrays("val_loss"))
        keep = vs >= start
        if int(keep.sum()) < self.min_val_points:
            return False
        trend = stats.mann_kendall(v[keep], vs[keep].astype(float))
        return bool(trend.z < 0 and trend.p < self.fall_p)

    def bouncing_weights(self, run: Run, start: float, train: np.ndarray) -> dict | None:
        """Evidence that the validation loss from step `start` on goes up and down as settled weights cannot
        make it, with `train` (the training loss over the same stretch) the noisier of the two; else None."""
        if run.pick("val_loss") is None:
            return None
        vs, v = finite_part(*run.arrays("val_loss"))
        vs, v = vs[vs >= start], v[vs >= start]
        if v.size < self.min_val_points or not np.all(v > 0):
            return None
        rise = stats.mann_kendall(v, vs)
        if rise.z > 0 and rise.p < self.fall_p:
            return None  # a validation loss climbing over that half is memorising (overfitting's), its steps a drift
        flips = stats.sign_change_rate(v)
        step = float(np.median(np.abs(np.diff(v)))) / stats.level(v)
        vn, tn = stats.relative_wiggle(v), stats.relative_wiggle(train)
        if not (flips >= self.min_val_flips and step >= self.min_val_step and np.isfinite(vn) and tn > vn):
            return None
        return {"val_points": int(v.size), "val_sign_change_rate": flips, "val_median_step": step,
                "val_relative_noise": vn, "train_relative_noise": tn}


def _epoch_period(run: Run, steps: np.ndarray, lag: int) -> bool:
    """Whether `lag` (in loss records) is a whole number of epochs, the loss logged the same number of records per
    epoch (`steps` against the run's epoch counter): the same batches in the same order every epoch repeat their
    losses at that lag. Batch order, not a loss that swings."""
    if not run.has("epoch") or steps.size < 2 * lag:
        return False
    es, ev = run.arrays("epoch")
    keep = np.isfinite(ev)
    es, ev = es[keep], ev[keep]
    if es.size < 2:
        return False
    at = ev[np.clip(np.searchsorted(es, steps, side="right") - 1, 0, es.size - 1)]
    _, counts = np.unique(np.floor(at), return_counts=True)
    full = counts[1:-1] if counts.size > 2 else counts
    per = int(np.median(full))
    return per >= 2 and bool(np.all(full == per)) and lag % per == 0


def _falls(steps: np.ndarray, y: np.ndarray, level: float, p: float) -> bool:
    """The curve learned, however wide its spread: it trends down over all its points (Mann–Kendall p < `p`), or
    fell to `level` from the median of its first tenth (`stats.learned`), a start a wide spread cannot hide."""
    trend = stats.mann_kendall(y, steps)
    return bool(trend.z < 0 and trend.p < p) or stats.learned(y, level, points=max(stats.START_POINTS, y.size // 10))
