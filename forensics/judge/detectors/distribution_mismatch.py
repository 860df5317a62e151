"""distribution_mismatch: training loss falls but validation loss is flat from the start."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from forensics.judge import stats
from forensics.judge.detectors.base import UPSTREAM, class_count, finite_part, head_tail_of, point, src, too_short
from forensics.judge.findings import Finding
from forensics.judge.run import Run


@dataclass(frozen=True)
class DistributionMismatch:
    """Training loss falls but validation loss is flat from the start.

    Detects: training loss falls by at least `min_train_drop` (first vs last tenth, relative) over the steps
    validation covers (from its first evaluation on: a first evaluation after an epoch of fast training
    sees both curves flat from there) while the validation loss stays within `max_val_change` of its first level: it never falls below it by more
    (smoothed minimum and last level alike), and does not end above it by more (that is overfitting).
    Glaring, from `glaring_points` points (`_glaring`): training falls `glaring_train_fall` while validation stands
    `glaring_gap`× above it at every evaluation from the first; or validation exactly constant while training falls.
    False alarms: 0 of the 99 healthy real runs it checks in the pool of 849 labelled real runs (25 label files;
    benchmarks/calibrate.py --pool), with its fields set from that healthy curve (docs/engine.md).
    Why: train and validation data are not prepared the same way (normalisation, tokenisation).
    Evidence: relative change of train and of validation, their levels.
    """

    kind: ClassVar[str] = "distribution_mismatch"
    stage: ClassVar[int] = UPSTREAM
    requires: ClassVar[tuple[str, ...]] = ("loss", "val_loss")
    # a training loss that never moved makes the validation loss constant too (the model is): flat_loss says it
    yields_to: ClassVar[tuple[str, ...]] = ("flat_loss",)
    # Healthy pool (849 labelled real runs, 99 healthy ones this detector checks; benchmarks/calibrate.py --pool):
    # each comment's figure is that field swept alone, the others at their defaults (docs/engine.md).
    min_train_drop: float = 0.6  # training falls 60%: 0 healthy from 0.15 up (1 at 0.1); under 0.5 a noisy
    # validation beside a slower fall is claimed, and the hits stay the same from 0.5 to 0.8
    max_val_change: float = 0.05  # validation within 5% of its first level: 0 healthy at 0.02-0.08, 1 at 0.1, 7 at 0.3
    min_val_vs_start: float = 0.5  # an untrained level: this share of training's start or of log(C), the higher
    # (0 healthy at 0.1-0.9; a false claim at 0.1)
    start_points: int = stats.START_POINTS  # the initial level: the median of the first this many points
    glaring_points: int = 4  # at any length from 4 evaluations and 4 training points: ...
    glaring_train_fall: float = 0.3  # ... training falls 30% while validation stands (0 healthy at 0.2-0.95; one
    # more hit at 0.2-0.4 than from 0.5) ...
    glaring_gap: float = 10.0  # ... 10× above it at every evaluation from the first, never halving (0 healthy at
    # 3-20; false claims under 5, a hit lost at 20) ...
    constant_fall: float = stats.LEARNED_FALL  # ... or validation exactly constant while training falls 5%

    def unavailable(self, run: Run) -> str | None:
        short = too_short(run, "val_loss", 4) or too_short(run, "loss", 10)
        return short if short is None or self._glaring(run) is None else None

    def _glaring(self, run: Run) -> dict | None:
        """The mismatch an expert names from a few epochs: training falls `glaring_train_fall` from its first value
        while validation stands `glaring_gap`× above training (at the last training point up to each evaluation) at
        every evaluation from the first, never below half its first value nor twice training's first value:
        validation never saw what training learned. Or validation exactly constant (every printed digit) at every evaluation while training
        falls `constant_fall`: the validation loss does not depend on the model (a margin every sample meets,
        a degenerate set). From `glaring_points` evaluations and training points. Evidence, else None."""
        if not (run.has("loss") and run.has("val_loss")):
            return None
        ts, t = finite_part(*run.arrays("loss"))
        vs, v = finite_part(*run.arrays("val_loss"))
        if v.size < self.glaring_points or t.size < self.glaring_points or not t[0] > 0:
            return None
        fall = 1 - float(t[-1]) / float(t[0])
        if np.ptp(v) == 0 and v[0] != 0 and fall >= self.constant_fall:
            return {"rule": "constant", "train_first": float(t[0]), "train_last": float(t[-1]), "train_drop": fall,
                    "val_constant": float(v[0]), "val_points": int(v.size)}
        at = np.searchsorted(ts, vs, side="right") - 1  # the last training point at or before each evaluation
        if fall < self.glaring_train_fall or at[0] < 0 or np.min(v) < max(0.5 * v[0], 2 * t[0]):
            return None  # validation fell with training, or came near where training started: overfitting's
        ratio = v / np.maximum(t[at], np.finfo(float).tiny)
        if not np.all(ratio >= self.glaring_gap):
            return None
        return {"rule": "gap", "train_first": float(t[0]), "train_last": float(t[-1]), "train_drop": fall,
                "val_first": float(v[0]), "val_last": float(v[-1]), "val_min": float(np.min(v)),
                "min_ratio": float(np.min(ratio)), "val_points": int(v.size)}

    def check(self, run: Run) -> Iterator[Finding]:
        ts, t = finite_part(*run.arrays("loss"))
        vs, v = finite_part(*run.arrays("val_loss"))
        glaring = self._glaring(run)
        if glaring is not None:
            yield self._glaring_finding(run, glaring, ts, t, vs, v)
            return
        if v.size < 4:
            return
        ts, t = ts[ts >= vs[0]], t[ts >= vs[0]]  # compare like with like: the steps validation covers
        if t.size < 10:
            return
        th, tt = stats.head_tail_levels(t)
        vh = float(v[0]) if v.size < 10 else stats.head_tail_levels(v)[0]
        vt = stats.head_tail_levels(v)[1]
        vmin = float(np.nanmin(stats.rolling_median(v, 3)))
        if not (th > 0 and vh > 0):
            return
        train_drop = (th - tt) / th
        val_change = (vh - min(vt, vmin)) / vh  # how far it ever fell
        val_rise = (vt - vh) / vh  # a rising validation loss is overfitting, not a flat one
        if train_drop < self.min_train_drop or val_change > self.max_val_change or val_rise > self.max_val_change:
            return
        _, all_t = finite_part(*run.arrays("loss"))
        start = stats.start_level(all_t, self.start_points)
        classes = class_count(run)
        untrained = max(start, math.log(classes[0]) if classes and classes[0] > 1 else 0.0)
        if untrained > 0 and vt < self.min_val_vs_start * untrained:
            return  # validation already learnt before its first evaluation: it settled, it was not flat
        ev = {"train_first": th, "train_last": tt, "train_drop": train_drop, "val_first": vh, "val_last": vt,
              "val_min": vmin, "val_drop": val_change, "train_start": start, "untrained_level": untrained}
        yield Finding.of(self, severity="warning", step=int(vs[0]), step_end=int(vs[-1]), series=run.pick("val_loss"),
                         evidence=ev, sources=(src(run, "loss", ts), src(run, "val_loss", vs)),
                         summary=_summary(ts, t, vs, v, train_drop))


    def _glaring_finding(self, run: Run, ev: dict, ts: np.ndarray, t: np.ndarray, vs: np.ndarray,
                         v: np.ndarray) -> Finding:
        train = f"training loss falls {ev['train_drop']:.0%} ({point(ts, t, 0)} → {point(ts, t, t.size - 1)})"
        if ev["rule"] == "constant":
            text = (f"{train} while validation loss is exactly {ev['val_constant']:.6g} at all {v.size} evaluations: "
                    f"it does not depend on the model (a margin every sample meets, or a degenerate set)")
        else:
            text = (f"{train} while validation loss stays {ev['min_ratio']:.0f}× above it or more at every one of its "
                    f"{v.size} evaluations from the first ({point(vs, v, 0)} → {point(vs, v, v.size - 1)}): "
                    f"validation never saw what training learned")
        return Finding.of(self, severity="warning", step=int(vs[0]), step_end=int(vs[-1]), series=run.pick("val_loss"),
                          evidence=ev, sources=(src(run, "loss", ts), src(run, "val_loss", vs)), summary=text)


def _summary(ts: np.ndarray, t: np.ndarray, vs: np.ndarray, v: np.ndarray, train_drop: float) -> str:
    """The sentence, each level named as the file shows it: the medians of the first and last tenth (the first
    evaluation itself when there are under 10)."""
    (_, th), (_, tt) = head_tail_of(ts, t)
    (_, vh), (_, vt) = head_tail_of(vs, v)
    if v.size < 10:
        vh = point(vs, v, 0)
    return (f"training loss falls {train_drop:.0%} ({th} → {tt}) while validation loss stays at {vh} → {vt} "
            f"from the start")
