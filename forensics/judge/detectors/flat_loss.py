"""flat_loss: the loss does not move from the start."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from forensics.judge import stats
from forensics.judge.detectors.base import SHAPE, class_count, finite_part, head_tail_of, src, too_short
from forensics.judge.findings import Finding
from forensics.judge.run import Run


@dataclass(frozen=True)
class FlatLoss:
    """The loss does not move from the start, within its noise.

    Detects: the median of the last `edge` of the loss is within `rel_tol` of the first `edge`'s median
    (relative to the first), and the smoothed curve (rolling median over `smooth` of the points, at least
    5, so that isolated dips do not count) never fell more than `rel_tol` below the start either (a loss
    that fell and came back is divergence, not this). When the training loss is not flat by that rule but
    does not fall by `max_train_drop` either, a validation loss flat by the same rule is the evidence (a
    validation loss pinned at ln 2 for 30 evaluations while the training loss wanders); a training loss of exactly 0
    at every point (an empty training loop) counts as not falling, and the validation loss is read by the range
    and the pinned rules. A validation loss
    that is flat while the training loss falls is `distribution_mismatch`, not this.
    A loss pinned at one value is flat at any length: when the last `min_repeats` points and at least
    `pinned_share` of all of them are one and the same non-zero value, printed to `min_digits` significant
    digits or more, the loss does not depend on the batch any more (Caffe printing `loss = 6.90776` = ln 1000
    on every iteration, litgpt `loss 10.8259` = ln 50257 on 23 lines): minibatch noise never repeats a
    value to that many digits, so four logged points are enough.
    A loss at chance is flat at any length too: when its last `min_repeats` points all lie within
    `chance_rel_tol` of ln k for a whole k (`stats.chance_level`: ln 2 = 0.6931, ln 10 = 2.3026, ln 32000 =
    10.37, a clamp's −ln 1e-10 = 23.03) and no point was ever `chance_floor` below it, the model predicts
    uniformly over k outcomes and never learned anything (AlexNet on CIFAR-10 at 2.3030, 2.3029, 2.3028 over
    five epochs); the training loss is read first, then the validation loss. Minibatch noise does not hold three
    points within 0.03% of one value, and a loss that fell below chance and came back is not flat.
    False alarms (range rule): fires on 0 of the 521 healthy runs it could check (at most 0.6% at 95% confidence;
    benchmarks/calibrate.py over the corpus tune, calib and holdout-holdout6 parts and shared/real_runs)
    `min_digits` 3 and `pinned_share` 0.3 fire on none either.
    fires on 0 of the 102 healthy runs it could check (corpus calib 83, shared/real_runs 5,
    shared/real_runs_test 14; benchmarks/calibrate.py), and makes no false finding on a labelled run of
    either shared set (a kind its label allows aside).
    The range rule leaves a loss that fell from its first points to plateau: when `stats.learned` (the one
    boundary between the two: a fall of `learned_fall` = 5% below the median of the first three points, and 3
    noise sigmas of it) says it fell, it learned and then stopped, which a first-tenth median can hide (2.815 ->
    2.611 in the first 25 of 500 steps, then flat: shared/real_runs_test/log_tfplateau_q4). Fires on 0 of the 101
    healthy runs it could check with the boundary as without it (corpus calib, both shared sets;
    benchmarks/calibrate.py), and keeps 6/6 on the shared sets' flat_loss runs and the generated
    corpus's tune part (no backward, all frozen, an LR of 0, LR 1e-6/1e-7).
    Effect size first, at any length: a training loss exactly one value on every one of its points (at least
    `constant_points`; 0, or a value of `min_digits` significant digits) is an empty or replaced loss, said as such (not convergence), unless a gradient
    norm beside it is non-finite (`masked_nonfinite`'s); when the validation loss falls beside it the model trains
    and the finding is a warning about the log. A loss that does not move beyond its own noise, from `min_points`
    on (no trend at Mann–Kendall p ≥ `still_p`, last level within `still_tol` of the first, never learned), is flat
    where the 3% band misses its wander. Neither fires while the gradient norm grows `exploding_growth` × with a
    rising trend (the loss sits still because the gradients blow up), and a loss that rose to its pin from half of
    it or less collapsed (divergence's), it did not stay. False alarms: 0 of the 36 healthy real runs with a loss
    (shared real_runs, real_runs_test, real_runs_3; none of them is both unlearned and 10 points long).
    Why: nothing is being learned: backward or optimizer.step not running, frozen parameters, LR ≈ 0.
    Evidence: first and last levels, relative change, smoothed minimum, Theil–Sen slope, Mann–Kendall p,
    log(C) when the config names a class count, the median LR when an LR series exists.
    """

    kind: ClassVar[str] = "flat_loss"
    stage: ClassVar[int] = SHAPE
    reads_curve: ClassVar[bool] = True  # judges the shape of the training-loss curve
    # the training loss; without one, a validation loss judged as validation (`_validation_alone`)
    requires: ClassVar[tuple[str, ...]] = ()
    reads_validation_alone: ClassVar[bool] = True
    reads_loss_level: ClassVar[bool] = True  # not on a GAN's adversarial losses (base.adversarial_loss)
    rel_tol: float = 0.03  # a 3% move over a whole run is below what a user calls learning
    edge: float = 0.1  # first/last fraction of the points whose medians are compared
    smooth: float = 0.1  # rolling-median window for the "never fell" check, as a fraction of the points
    min_points: int = 10  # fewer points cannot tell a flat curve from a short one
    max_train_drop: float = 0.1  # the validation loss speaks only when the training loss fell less than this
    min_repeats: int = 3  # a value repeated on the last this many points ...
    pinned_share: float = 0.5  # ... and on at least this share of all of them ...
    min_digits: int = 4  # ... printed to at least this many significant digits is a pinned loss
    chance_rel_tol: float = 3e-4  # the last `min_repeats` points within this share of ln k (stats.chance_level)
    chance_floor: float = 0.05  # ... and no point ever this share below ln k: it never learned anything
    learned_fall: float = stats.LEARNED_FALL  # a loss that fell this much from its first points learned (plateau's)
    constant_points: int = 3  # a loss exactly one value on every one of this many points or more was never computed
    still_p: float = 0.05  # a loss with no trend (Mann–Kendall p at least this) over at least `min_points` ...
    still_tol: float = 0.05  # ... that ends within 5% of where it began and never learned: still within its noise
    exploding_growth: float = 10.0  # a loss that sits still while the gradient norm grows ×10 is exploding_gradients'

    def unavailable(self, run: Run) -> str | None:
        if not run.has("loss"):
            return None if self._validation_alone(run) is not None else run.missing_message("loss")
        # Under `min_points` only the pinned rule can speak: the detector counts as run (for the verdict and
        # `-v`) only when it does, so a short log that is not pinned stays "too short" as before.
        short = too_short(run, "loss", self.min_points)
        y = finite_part(*run.arrays("loss"))[1]
        if short and self._pinned(y) is None and self._chance_role(run) is None and self._constant(run, y) is None:
            return short
        return None

    def _chance_role(self, run: Run) -> tuple[str, dict] | None:
        """The role and evidence of a loss pinned at chance by `_chance` (the training loss, else the validation
        loss), or None."""
        found = class_count(run)
        extra = (found[0],) if found else ()
        for role in ("loss", "val_loss"):
            if role == "val_loss" and run.has("loss") and not self._train_stands(finite_part(*run.arrays("loss"))[1]):
                return None  # training falls while validation sits at chance: distribution_mismatch
            if run.has(role):
                ev = self._chance(finite_part(*run.arrays(role))[1], extra)
                if ev is not None:
                    return role, ev
        return None

    def _validation_alone(self, run: Run) -> tuple[np.ndarray, dict] | None:
        """Where no training loss was read, the validation loss judged as validation: flat by the range rule, pinned,
        exactly constant or at chance, it never learned (a validation loss does not hide a learning model). (steps,
        evidence) or None."""
        if not run.has("val_loss"):
            return None
        steps, y = finite_part(*run.arrays("val_loss"))
        found = class_count(run)
        ev = (self._flat(steps, y) or self._pinned(y) or self._constant(run, y)
              or self._chance(y, (found[0],) if found else ()))
        return (steps, ev) if ev is not None else None

    def check(self, run: Run) -> Iterator[Finding]:
        if not run.has("loss"):
            alone = self._validation_alone(run)
            if alone is not None:
                steps, ev = alone
                ev["training_loss_missing"] = True
                yield Finding.of(self, severity="critical", step=int(steps[0]), step_end=int(steps[-1]),
                                 series=run.pick("val_loss"), evidence=ev, sources=(src(run, "val_loss", steps),),
                                 summary=self._summary("validation loss (no training loss was read: judged as "
                                                       "validation)", ev, steps,
                                                       finite_part(*run.arrays("val_loss"))[1]))
            return
        steps, y = finite_part(*run.arrays("loss"))
        if self._gradients_explode(run):
            return
        role, ev = "loss", self._flat(steps, y) or self._pinned(y) or self._still(steps, y)
        chance = self._chance_role(run) if ev is None else None
        if chance is not None:
            role, ev = chance
            steps, y = finite_part(*run.arrays(role))
        if ev is None and run.has("val_loss") and self._train_stands(y):
            head, tail = stats.head_tail_levels(y, self.edge)
            steps, y = finite_part(*run.arrays("val_loss"))
            role, ev = "val_loss", self._flat(steps, y) or self._pinned(y)
            if ev is not None:
                ev["train_relative_change"] = (tail - head) / abs(head) if head else 0.0
                ev["train_all_zero"] = head == 0 and tail == 0
        if ev is None:
            steps, y = finite_part(*run.arrays("loss"))
            role, ev = "loss", self._constant(run, y)
            if ev is not None and run.has("val_loss"):
                vv = finite_part(*run.arrays("val_loss"))[1]
                if vv.size >= self.min_repeats and stats.learned(vv, stats.head_tail_levels(vv, self.edge)[1]):
                    ev["val_first"], ev["val_last"] = float(vv[0]), float(vv[-1])  # the model trains; the log is empty
        if ev is None:
            return
        classes = class_count(run)
        if classes is not None and classes[1] not in ("vocab_size", "n_vocab", "ntokens"):
            ev["log_classes"] = math.log(classes[0])
        if run.has("lr"):
            ev["lr_median"] = stats.level(run.arrays("lr")[1])
        what = ("loss" if role == "loss" else "validation loss (training loss is exactly 0: nothing was trained)"
                if ev.get("train_all_zero") else "validation loss (training loss does not fall either)")
        yield Finding.of(self, severity="warning" if "val_first" in ev else "critical", step=int(steps[0]),
                         step_end=int(steps[-1]), series=run.pick(role), evidence=ev, sources=(src(run, role, steps),),
                         summary=self._summary(what, ev, steps, y))

    def _summary(self, what: str, ev: dict, steps: np.ndarray, y: np.ndarray) -> str:
        if "constant_value" in ev:
            v = ev["constant_value"]
            return (f"{what} is exactly {v!r} at every one of its {ev['points']} points (steps {steps[0]}-{steps[-1]}): "
                    + ("nothing was trained, or the loss was never computed (an empty loop, a placeholder)"
                       if v == 0 else "an empty or replaced loss (a constant, a placeholder), not convergence")
                    + (f"; the validation loss falls ({ev['val_first']:.4g} → {ev['val_last']:.4g}), so the model "
                       f"trains and the logged training loss is what is empty" if "val_first" in ev else ""))
        if "still" in ev:
            k = ev["edge_points"]
            return (f"{what} stays within its own noise over all {ev['points']} points, steps {steps[0]}-{steps[-1]}: "
                    f"median of steps {steps[0]}-{steps[k - 1]} {ev['first_level']:.4g}, of steps {steps[-k]}-"
                    f"{steps[-1]} {ev['last_level']:.4g} ({ev['relative_change']:+.1%}), no trend (Mann–Kendall "
                    f"p={ev['mk_p']:.2g}); it never learned")
        if "chance_k" in ev:
            k = ev["chance_k"]
            what_k = (f"the log of a probability clamped at 1/{k:.0e}" if k >= 10 ** 7 else
                      f"the model predicts uniformly over {k} classes")
            return (f"{what} sits at {ev['last_level']:.5g} = ln {k} on its last {ev['chance_points']} points (steps "
                    f"{steps[-ev['chance_points']]}-{steps[-1]}) and never fell below it: {what_k}")
        if "pinned_value" in ev:
            return (f"{what} is pinned at {ev['pinned_value']!r} on {ev['pinned_points']} of its {ev['points']} "
                    f"points (steps {steps[0]}-{steps[-1]}), to the end: it no longer depends on the batch")
        (_, head), (_, tail) = head_tail_of(steps, y, self.edge)
        return (f"{what} stays at {head} → {tail} ({ev['relative_change']:+.1%}) over steps {steps[0]}-{steps[-1]}: "
                f"it never moved")

    def _constant(self, run: Run, y: np.ndarray) -> dict | None:
        """The evidence when the training loss is exactly one value (0 included) on every one of its points, at
        least `constant_points`, else None. Minibatch noise never repeats a value to the last digit on every record
        from the start: the loss is empty (0) or replaced by a constant. A non-zero value needs `min_digits`
        significant digits, as the pinned rule: `LOSS_WEIGHT: 1.0` printed three times in a config dump is no loss. A loss of exactly 0 beside a non-finite
        gradient norm is a NaN the logger hid (`masked_nonfinite`), not this."""
        if y.size < self.constant_points or not np.all(y == y[0]):
            return None
        if y[0] != 0 and significant_digits(float(y[0])) < self.min_digits:
            return None  # a round constant (1.0, 0.25) on a few lines is as likely a setting read as a loss
        if run.has("grad_norm") and not np.all(np.isfinite(run.arrays("grad_norm")[1])):
            return None
        v = float(y[0])
        return {"first_level": v, "last_level": v, "relative_change": 0.0, "constant_value": v, "points": int(y.size)}

    def _still(self, steps: np.ndarray, y: np.ndarray) -> dict | None:
        """The evidence when the loss does not move beyond its own noise over the whole log: at least `min_points`,
        no trend (Mann–Kendall p ≥ `still_p`), its last points' median within `still_tol` of its first points', and
        no fall from its first points (`stats.learned`), else None. The range rule's 3% band misses a loss that
        wanders ±5% around one level; the trend test is what says the wandering is noise."""
        if y.size < self.min_points:
            return None
        head, tail = stats.head_tail_levels(y, self.edge)
        if not (math.isfinite(head) and abs(head) > 1e-12) or abs(tail - head) > self.still_tol * abs(head):
            return None
        if stats.learned(y, tail, self.learned_fall):
            return None
        trend = stats.mann_kendall(y, steps)
        if trend.p < self.still_p:
            return None
        slope, _ = stats.theil_sen(steps, y)
        k = min(y.size, max(3, int(round(y.size * self.edge))))  # the points each median is over (head_tail_levels)
        return {"first_level": head, "last_level": tail, "relative_change": (tail - head) / abs(head),
                "slope_per_step": slope, "mk_p": trend.p, "points": int(y.size), "still": True, "edge_points": k}

    def _gradients_explode(self, run: Run) -> bool:
        """The gradient norm grows
        `exploding_growth` × from its first to its last point with a rising trend: a loss that sits still while the
        gradients blow up is not a loss that nothing trains (`exploding_gradients` says what it is)."""
        if not run.has("grad_norm"):
            return False
        gs, g = finite_part(*run.arrays("grad_norm"))
        if g.size < 3 or not g[0] > 0:
            return False
        return bool(g[-1] >= self.exploding_growth * g[0] and stats.mann_kendall(g, gs).z > 0
                    and stats.mann_kendall(g, gs).p < self.still_p)

    def _pinned(self, y: np.ndarray) -> dict | None:
        """The evidence when `y` ends pinned at one value by the rule above, else None."""
        if y.size <= self.min_repeats:
            return None
        value = float(y[-1])
        same = y == value
        if value == 0 or not same[-self.min_repeats:].all() or same.mean() < self.pinned_share:
            return None
        digits = significant_digits(value)
        if digits < self.min_digits:
            return None
        if float(np.min(y)) > 0 and float(np.min(y)) * 2 <= value:
            return None  # it rose to its pin from half of it or less: a collapse (divergence's), not a loss that never moved
        first = float(y[0])
        rel = (value - first) / abs(first) if first else math.inf
        return {"first_level": first, "last_level": value, "relative_change": rel,
                "pinned_value": value, "pinned_points": int(same.sum()), "significant_digits": digits,
                "points": int(y.size)}

    def _train_stands(self, y: np.ndarray) -> bool:
        """The training loss does not fall by `max_train_drop` (head to tail levels), or is exactly 0 throughout
        (an empty training loop's accumulator: nothing was trained)."""
        if y.size and np.all(y == 0):
            return True
        head, tail = stats.head_tail_levels(y, self.edge)
        return math.isfinite(head) and head != 0 and (tail - head) / abs(head) > -self.max_train_drop

    def _chance(self, y: np.ndarray, extra: tuple[int, ...] = ()) -> dict | None:
        """The evidence when `y` ends at a chance level ln k (`stats.chance_level`) on its last `min_repeats`
        points and never fell more than `chance_floor` below it (it learned nothing), else None."""
        if y.size < self.min_repeats:
            return None
        k = stats.chance_level(y[-self.min_repeats:], self.chance_rel_tol, extra=extra)
        if k is None or float(np.min(y)) < math.log(k) * (1 - self.chance_floor):
            return None
        first, last = float(y[0]), float(y[-1])
        return {"first_level": first, "last_level": last, "relative_change": (last - first) / abs(first),
                "chance_k": k, "log_k": math.log(k), "chance_points": self.min_repeats, "points": int(y.size)}

    def _flat(self, steps: np.ndarray, y: np.ndarray) -> dict | None:
        """The evidence when `y` is flat by the rule above, else None."""
        if y.size < self.min_points:
            return None
        head, tail = stats.head_tail_levels(y, self.edge)
        if not math.isfinite(head) or abs(head) < 1e-12:
            return None
        rel = (tail - head) / abs(head)
        low = float(np.nanmin(stats.rolling_median(y, max(5, int(y.size * self.smooth)))))
        if abs(rel) > self.rel_tol or (head - low) / abs(head) > self.rel_tol:
            return None
        if stats.learned(y, tail, self.learned_fall):
            return None  # it fell from its first points, then stalled: plateau's (the same boundary), not never moved
        slope, _ = stats.theil_sen(steps, y)
        return {"first_level": head, "last_level": tail, "relative_change": rel, "min_smoothed": low,
                "slope_per_step": slope, "mk_p": stats.mann_kendall(y, steps).p, "points": int(y.size)}


def significant_digits(x: float) -> int:
    """Significant digits of `x` as written at its shortest (`6.90776` → 6, `0.0012` → 2, `100.0` → 1); a
    float32 (TensorBoard's scalars) at its own shortest, so float32(0.01) is `0.01`, not 0.009999999776."""
    single = np.float32(x)
    text = repr(abs(float(x))) if float(single) != x else np.format_float_positional(abs(single), unique=True)
    mantissa = text.split("e")[0].replace(".", "")
    return len(mantissa.strip("0"))
