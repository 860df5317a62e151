"""grokking: training saturates long before validation suddenly improves."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from forensics.judge import stats
from forensics.judge.detectors.base import SHAPE, finite_part, saturates_at_one, score_scale, src
from forensics.judge.findings import Finding
from forensics.judge.run import Run


@dataclass(frozen=True)
class Grokking:
    """Training saturates long before validation suddenly improves.

    Detects: on accuracies where both are logged (else the training loss and the validation accuracy, else losses),
    each curve smoothed (centred rolling median of `smooth` of its points) and read as progress from its first to its
    best level. Training saturates when its progress reaches `train_done` (or, a training loss beside a validation
    accuracy, at `saturated_loss`); by then validation has made at most `val_before` of its progress, stays so for
    `min_flat_evals` evaluations, and gains at least `min_gain` afterwards (an accuracy's gain on its 0-1 scale, a
    percentage read as one: `base.score_scale`); its jump (`val_before` to `val_after`) starts `min_delay` × the
    saturation step after saturation and takes at most `max_jump` of the run. None where the "training loss" is a
    score under a loss's name (`base.saturates_at_one`): it would read as saturated at its first value.
    Why: informational: the model memorised first and generalised much later; keep training, weight decay.
    Evidence: train saturation step, val jump start and end steps, the levels at each, which metric.
    False alarms: 0 of the 104 healthy runs of the 849-run pool it could check; no labelled instance there. Gains on
    the 0-1 scale: 0 of the 40 healthy shared runs and 0 of the 191 restored healthy runs (was 1: a percentage).
    """

    kind: ClassVar[str] = "grokking"
    stage: ClassVar[int] = SHAPE
    requires: ClassVar[tuple[str, ...]] = ()  # train and val accuracy, or train and val loss
    smooth: float = 0.05  # smoothing window, as a fraction of the points
    train_done: float = 0.95  # training has made 95% of its progress: saturated
    val_before: float = 0.2  # validation has made at most this much of its progress at saturation
    val_after: float = 0.8  # ... and the jump ends when it has made this much
    min_gain: float = 0.3  # validation gains 30 accuracy points (or 30% of its loss) after saturation
    min_delay: float = 1.0  # the jump starts at least one saturation time after saturation: "long before"
    max_jump: float = 0.5  # the jump takes at most half the run: not a climb spread over all of it
    min_points: int = 10  # per curve
    saturated_loss: float = 0.1  # beside a validation accuracy: a training loss of 0.1 nats is memorised
    min_flat_evals: int = 3  # evaluations between saturation and the jump that show validation still flat

    def _pair(self, run: Run) -> tuple[str, str, int, int] | None:
        """(train role, val role, train sign, val sign): +1 for accuracies (higher is better), −1 for losses.
        Without a training accuracy, the training loss saturates and the validation accuracy jumps (a run that logs
        its training loss and its validation accuracy; the validation loss of a memorising model first rises, its
        accuracy is the generalisation's own measure)."""
        if run.has("accuracy") and run.has("val_accuracy"):
            return "accuracy", "val_accuracy", 1, 1
        if run.has("loss") and run.has("val_accuracy"):
            return "loss", "val_accuracy", -1, 1
        if run.has("loss") and run.has("val_loss"):
            return "loss", "val_loss", -1, -1
        return None

    def unavailable(self, run: Run) -> str | None:
        pair = self._pair(run)
        if pair is None:
            return "needs train and validation accuracy, or train and validation loss"
        for role in pair[:2]:
            n = finite_part(*run.arrays(role))[1].size  # the curve it judges: the points before its first non-finite
            if n < self.min_points:
                return (f"series {run.pick(role)} has {n} finite points before its first non-finite value; this "
                        f"detector needs at least {self.min_points}")
        return None

    def _progress(self, role: str, run: Run, sign: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        steps, y = finite_part(*run.arrays(role))
        sm = sign * stats.rolling_median(y, max(3, int(y.size * self.smooth)))
        start, best = float(sm[0]), float(np.nanmax(sm))
        # A curve already at its best when first logged (train accuracy 1.0 at the first evaluation) is
        # saturated from its first point.
        prog = (sm - start) / (best - start) if best > start else np.ones_like(sm)
        return steps, sign * sm, prog

    def check(self, run: Run) -> Iterator[Finding]:
        pair = self._pair(run)
        if pair is None:
            return
        train_role, val_role, train_sign, sign = pair
        if train_sign < 0 and saturates_at_one(run.arrays(train_role)[1]):
            return  # a score under a loss's name (`base.saturates_at_one`): it never "saturates" at its first value
        ts, tsm, tp = self._progress(train_role, run, train_sign)
        vs, vsm, vp = self._progress(val_role, run, sign)
        if ts.size < self.min_points or vs.size < self.min_points:
            return
        done = np.flatnonzero(tp >= self.train_done)
        if train_sign < 0 and sign > 0:  # a cross-entropy this low is a memorised training set, however it falls on
            done = np.union1d(done, np.flatnonzero(tsm <= self.saturated_loss))
        if done.size == 0:
            return
        t_sat = int(ts[done[0]])
        at_sat = int(np.searchsorted(vs, t_sat, side="right")) - 1
        if at_sat < 0 or vp[at_sat] > self.val_before:
            return
        start = at_sat + int(np.argmax(vp[at_sat:] > self.val_before))
        if start - at_sat < self.min_flat_evals:
            return  # the flat stretch after saturation must be seen, not inferred from sparse evaluations
        ends = np.flatnonzero(vp[start:] >= self.val_after)
        if ends.size == 0:
            return
        end = start + int(ends[0])
        level_sat, level_best = float(vsm[at_sat]), float(vsm[np.argmax(vp)])
        # an accuracy's gain in its own 0-1 units (a percentage read as one: 93 -> 100 is 7 points, not 7)
        gain = sign * (level_best - level_sat) / (score_scale(vsm) if sign > 0 else max(abs(level_sat), 1e-12))
        span = float(max(ts[-1], vs[-1]) - min(ts[0], vs[0]))
        delay = float(vs[start] - t_sat)
        if not (gain >= self.min_gain and delay >= self.min_delay * max(t_sat - min(ts[0], vs[0]), 1)
                and (vs[end] - vs[start]) <= self.max_jump * span):
            return
        what = "accuracy" if sign > 0 else "loss"
        t_what = "accuracy" if train_sign > 0 else "loss"
        ev = {"metric": what, "train_metric": t_what, "train_saturation_step": t_sat, "train_level_at_saturation": float(tsm[done[0]]),
              "val_level_at_saturation": level_sat, "val_jump_start_step": int(vs[start]),
              "val_jump_end_step": int(vs[end]), "val_best_level": level_best, "val_gain": gain,
              "delay_steps": delay}
        yield Finding.of(self, severity="info", step=int(vs[start]), step_end=int(vs[end]),
                         series=run.pick(val_role), evidence=ev,
                         sources=(src(run, train_role, ts), src(run, val_role, vs)),
                         summary=(f"training {t_what} saturates at step {t_sat} (smoothed {float(tsm[done[0]]):.4g}) "
                                  f"while validation {what} stays at a smoothed {level_sat:.4g}; validation then jumps "
                                  f"between steps {vs[start]} and {vs[end]} to a smoothed {level_best:.4g}"))
