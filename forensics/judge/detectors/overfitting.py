"""overfitting: training loss keeps falling while validation loss passes its minimum and rises."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

import numpy as np

from forensics.judge import stats
from forensics.judge.numbers import ratio
from forensics.judge.detectors.base import (SHAPE, by_launch, finite_part, held_out_score, level_of, point, src,
                                            too_short)
from forensics.judge.detectors.val_noise import ValNoise
from forensics.judge.findings import Finding
from forensics.judge.run import Run


def _last_launch(run: Run, role: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) of `role` in the last launch appended to its log (`base.by_launch`) that logged more than one
    record (a launch that stops at its first record shows no curve), before its first non-finite value: a launch
    that ended in NaN hides none of the launches after it."""
    pieces = by_launch(run, role, *run.arrays(role))
    return finite_part(*next((p for p in reversed(pieces) if p[0].size > 1), pieces[-1]))


@dataclass(frozen=True)
class Overfitting:
    """Validation loss passes its minimum and rises while training loss keeps falling.

    Detects: the minimum of the smoothed validation loss (rolling median of `smooth_points`) is followed by at least
    `min_after` of the validation steps, over which validation rises by at least `min_rise` of its minimum and
    `noise_k` noise sigmas, held by at least `min_evals_above` evaluations after the minimum (each `min_rise` above
    it) and trending up after it, or, without a trend, held to the end (`_held`: a jump that settles, or eases back
    from a far higher peak, beside a training loss that ends lower than at the crossover), while the training loss
    does not rise (by `max_train_share` of the validation rise or `max_train_rise` of its own level: divergence;
    read over the rise and from its median up to the minimum, so that a jump both share just after it counts).
    From `min_points` evaluations.
    A smaller rise counts when the evaluations after the minimum trend up (Mann–Kendall p < `trend_p` over
    `trend_points`, a rise of `trend_noise_k` sigmas), or rise `memorise_noise_k` sigmas while training falls to
    under `memorise_train_left` of its level at the crossover (memorisation); neither when validation is noisier
    than training by val_noise's bar (`_noisier`: that curve is val_noise's). Wherever the minimum lies, training
    must fall by `min_train_fall` over the rise (its robust slope, or its level at the end against the crossover:
    a fall in one step between two excerpts is a fall; standing still, it is a mismatch between the two sets, or a
    model that learns nothing while its validation loss wanders), or have fallen to `memorised` of its first value
    or to 0: a memorised training loss is a finished fall, not training that stands still.
    Under heavy evaluation noise, at any length from `wide_min_evals` evaluations, the level is read instead of the
    points (`_wide`): rolling medians over `wide_share` of them (at least `wide_min_window`), their rise judged
    against the scatter of such a median, not of one evaluation. At any length from
    `every_min_evals` evaluations, a rise an expert names at a glance counts on its own (`_every`): validation
    rises at every evaluation after its minimum to the last (`every_share` of them or more), by `every_min_rise`
    of it and `noise_k` times its relative point noise, while training at those evaluations falls at each (or sits
    at its floor, `memorised` of its first value), by `min_train_fall` in all.
    A mild rise is sized against the curve's own scatter, not its level (`_scatter`): after the raw minimum,
    evaluations ordered upward, ending `scatter_sigmas` point sigmas measured after the minimum above it, while
    training falls and the gap widens. A few evaluations (under `wide_min_evals`) whose first is the lowest and every
    later one `first_min_rise` above it, beside a falling training loss (`_first`): the turn at the first
    evaluation, which no smoothed minimum places. Where only a validation loss was logged, a U (`_val_only`) is read as
    overfitting that says the training loss was not logged.
    Of launches appended to one log, the last one is read (`base.by_launch`): no minimum of another launch's;
    where it shows no turn, each earlier launch on its own (`_earlier_launches`): on the 632 pool runs, 3 labelled
    runs found and no claim on a healthy one (docs/engine.md).
    Why: the model memorises; the checkpoint at the crossover is the one to keep.
    Evidence: crossover step (validation minimum), minimum, final validation level, rise, train slope after.
    False alarms: 0 of the 153 healthy real runs it checks in the pool of 978 labelled real runs (27 label files;
    benchmarks/calibrate.py --pool), with its fields set from that healthy curve (docs/engine.md); 1 of corpus/'s
    55 generated healthy holdout runs; 0 of the 81 healthy runs of set8-set11 and the shared sets it judges with the
    turn left out of `_every`'s noise and the U read from its peak (0 before). The memorised gap (`_gap`): 0 of the
    40 healthy shared runs and of the 99 healthy runs of set14/16/17 (2 shared ones before its share and score gates).
    The three-evaluation reading and the training tolerance of `_every`: 0 new claims on the 40 healthy shared runs
    and on the healthy runs of set12-15 and set16-18 (the engine's scoring, consensus labels).
    Four rises in a row at any length, one uptick allowed (`every_run`, `every_upticks`): 0 new claims on the 40
    healthy shared runs and the 144 healthy runs of set12-13, set16-19 and set21 (first labels).
    """

    kind: ClassVar[str] = "overfitting"
    reads_pairs: ClassVar[bool] = True  # each part of a loss of several parts too (`Run.loss_pairs`)
    reads_shape: ClassVar[bool] = True  # reads the epoch aggregate where one is logged (`base.epoch_view`)
    stage: ClassVar[int] = SHAPE
    requires: ClassVar[tuple[str, ...]] = ("val_loss",)  # the training loss, where logged (`_val_only` if not)
    reads_validation_alone: ClassVar[bool] = True
    # Healthy pool (849 labelled real runs, 127 healthy ones this detector checks; benchmarks/calibrate.py --pool):
    # each comment's figure is that field swept alone, the others at their defaults (docs/engine.md, overfitting).
    smooth_points: int = 3  # the minimum of a 3-point rolling median: one low evaluation is not the crossover
    min_after: float = 0.1  # the rise spans at least 10% of the evaluated steps (0-0.3: no healthy run, no change)
    min_rise: float = 0.05  # validation 5% above its minimum: 0 healthy from 0.04 to 0.15, 1 at 0.02-0.035, 2 at 0.01
    noise_k: float = 3.0  # and three noise sigmas above it: 0 healthy from 2.5 up, 1 at 2.25, 2 at 1-2
    max_train_share: float = 0.5  # a training loss rising by half the validation rise or more: divergence
    max_train_rise: float = 0.2  # ... or rising by a fifth of its own level: diverging, not overfitting
    min_points: int = 5  # evaluations needed to place a minimum with points after it
    min_evals_above: int = 3  # evaluations after the minimum `min_rise` above it: the rise persists (0 healthy at 1-5)
    trend_p: float = 0.01  # 0 healthy at 0.001-0.5; from 0.2 a false claim on a labelled run
    trend_points: int = 8
    trend_noise_k: float = 1.0
    memorise_train_left: float = 0.5  # the model memorises: training falls to under half its level at the crossover
    memorise_noise_k: float = 1.0  # as `trend_noise_k`: the second witness is training, not the rise
    min_train_fall: float = 0.05  # training falls 5% over the rise (standing still: a mismatch, or no learning);
    # 0 healthy at 0-0.2, false claims on labelled runs under 0.03, hits lost from 0.1
    start_points: int = stats.START_POINTS  # the initial level: the median of the first this many points
    wide_min_evals: int = 8  # under heavy evaluation noise, from 8 evaluations: medians over ...
    wide_share: float = 0.1  # ... a tenth of them, ...
    wide_min_window: int = 3  # ... and at least 3: one lucky evaluation is not the level
    wide_trend_p: float = 0.1  # the evaluations after the minimum trend up (their level rose `noise_k` errors too);
    # 0 healthy at 0.01-0.3, the same hits from 0.05 to 0.3 (2 fewer at 0.02): the middle of that stretch
    every_min_evals: int = 3  # the minimum and two evaluations rising after it: a user sees the turn
    every_min_rise: float = 0.05  # ... ending 5% above the minimum: 0 healthy at 0.02-0.2; under 0.04 a labelled
    # run of a shared set gets a false claim; from 0.1 to 0.05 no claim changes on the 629 pool runs (docs/engine.md)
    every_share: float = 1 / 3  # ... and a third of the evaluations or more: the run's turn, not a blip at its end;
    every_run: int = 4  # or this many rises in a row, whatever the run's length: no blip rises four times
    every_upticks: int = 1  # training may rise at this many of those evaluations where it ends at its lowest (a
    # smoothed epoch loss that ticks up once as validation turns)
    every_train_errors: float = 2.0  # training's medians between evaluations may rise within two standard errors of
    # such a median (1.25 σ/√n of its points): per-step noise, not a rise (0 healthy fired on the shared sets and
    # set12-15 by this and the three-evaluation rule together)
    every_last_min_rise: float = 0.1  # a run of `every_min_evals` evaluations whose minimum is the middle one: its
    # last 10% above it (the healthy three-evaluation runs of the shared sets and set12-15 end +0.8-1.8%: 0 fired)
    memorised: float = 0.01  # a training loss at 1% of its first value or less fell: it cannot fall further
    scatter_min_evals: int = 3  # the mild rise: evaluations after the raw minimum, at least ...
    scatter_share: float = 0.25  # ... and a quarter of all evaluations: the run's turn, not its last blip
    scatter_tau: float = 0.3  # Kendall's tau over them: later evaluations ordered upward more often than not;
    # 0 healthy at 0.2-0.7, two more hits (two runs of two sets) at 0.2-0.3 than at 0.5, one false claim
    scatter_sigmas: float = 3.0  # the median of the last two `scatter_sigmas` point sigmas (after the minimum) above it
    # (0.5-5: no healthy run, no change: the give-back and 1% floors decide on the pool)
    scatter_min_rise: float = 0.01  # ... and 1% of it: under that no user would change the checkpoint they keep
    scatter_gap_growth: float = 0.5  # the gap between validation and training widens by half of itself
    scatter_give_back: float = 0.1  # the rise undoes a tenth of validation's fall to its minimum, or more: 0 healthy
    # at 0.05-0.3, 1 (a shared set's) under 0.05; a hit lost from 0.2
    first_min_rise: float = 0.1  # the first evaluation the best, every later one 10% above it or more (`_first`)
    val_only_min_evals: int = 6  # a validation-only U: from 6 evaluations, ...
    val_only_fall: float = 0.1  # ... a fall of 10% to the minimum, ...
    val_only_rise: float = 0.2  # ... then a rise of 20% of it, ...
    val_only_share: float = 1 / 3  # ... over a third of the evaluations or more, ...
    val_only_tau: float = 0.6  # ... ordered upward (Kendall's tau)
    gap_flat: float = 0.05  # the memorised gap (`_gap`): validation never again 5% better than an evaluation ...
    gap_after: int = 3  # ... with 3 evaluations or more after it, ...
    gap_train_fall: float = 3.0  # ... over which training falls ×3 or more, ...
    gap_ratio: float = 10.0  # ... ending ×10 under validation at each of the last `gap_after` evaluations, ...
    gap_val_share: float = 0.2  # ... validation stalled at a fifth of the first training loss (untrained) or more
    val_noise: ValNoise = ValNoise()  # val_noise's bar for a noisier validation curve, as this analysis sets it
    # The launch read: None for the last one appended to the log (`_last_launch`); (first step, next launch's first
    # step) for an earlier one, which `check` reads when the last says nothing (`_earlier_launches`).
    launch: tuple[float, float] | None = None

    def held_out_turn(self, steps: np.ndarray, values: np.ndarray) -> int | None:
        """`held_out_rose` with this detector's scatter margins: where another detector asks "did the held-out curve
        rise beyond its scatter", it asks with overfitting's settings."""
        return held_out_rose(steps, values, self.scatter_min_evals, self.scatter_sigmas, self.scatter_min_rise)

    def _steady_rise(self, v: np.ndarray, vs: np.ndarray, imin: int, rise: float, noise: float) -> bool:
        """A rise smaller than `noise_k` point sigmas still counts when the evaluations after the minimum
        (the minimum itself left out: every later point is above it by construction) trend up on their own:
        Mann–Kendall p < `trend_p` over at least `trend_points` of them, and the rise is `trend_noise_k` sigmas."""
        after, steps = v[imin + 1:], vs[imin + 1:]
        if self.trend_p <= 0 or after.size < self.trend_points or rise < self.trend_noise_k * noise:
            return False
        t = stats.mann_kendall(after, steps)
        return t.z > 0 and t.p < self.trend_p

    def _held(self, v: np.ndarray, imin: int, lo: float, noise: float) -> bool:
        """The rise holds without a trend: each of the last third of the evaluations after the minimum (at least
        `min_evals_above`) stands `min_rise` of it and `noise_k` point sigmas above it. A validation loss that jumps
        up after its minimum and settles there (or eases back from a far higher peak) never returns."""
        k = max(self.min_evals_above, (v.size - imin - 1) // 3)
        tail = v[imin + 1:][-k:]
        if tail.size < k:
            return False
        return bool(np.min(tail) - lo >= max(self.min_rise * abs(lo), self.noise_k * noise))

    def _memorises(self, train_after: np.ndarray, rise: float, noise: float) -> bool:
        """A rise smaller than `noise_k` point sigmas still counts when training collapses meanwhile: the median
        of its last three points over the rise's span (of its last half, from four points) is under
        `memorise_train_left` of the median of its first three, and validation rose `memorise_noise_k` sigmas."""
        if self.memorise_train_left <= 0 or train_after.size < 4 or rise < self.memorise_noise_k * noise:
            return False
        k = min(3, train_after.size // 2)  # under six points, the halves: no point is both start and end
        start, end = float(np.median(train_after[:k])), float(np.median(train_after[-k:]))
        return start > 0 and end < self.memorise_train_left * start

    def unavailable(self, run: Run) -> str | None:
        return too_short(run, "val_loss", min(self.min_points, self.every_min_evals))

    def check(self, run: Run) -> Iterator[Finding]:
        if not run.has("loss"):
            found = self._val_only(run)
            yield from [found] if found is not None else []
            return
        found = self._routes(run)
        if not found and self.launch is None:
            found = self._earlier_launches(run)
        yield from found

    def _routes(self, run: Run) -> list[Finding]:
        found = list(self._narrow(run))
        for route in (self._wide, self._every, self._first, self._scatter, self._gap):
            if not found:
                found = [f for f in [route(run)] if f is not None]
        return found

    def _launch(self, run: Run, role: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of `role` in the launch this reading is of: the last (`_last_launch`), or the points
        between `launch`'s steps, before their first non-finite value."""
        if self.launch is None:
            return _last_launch(run, role)
        steps, values = run.arrays(role)
        inside = (steps >= self.launch[0]) & (steps < self.launch[1])
        return finite_part(steps[inside], values[inside])

    def _earlier_launches(self, run: Run) -> list[Finding]:
        """Where launches appended to one log (several models trained one after another, a script run again) end in
        one that shows nothing, each earlier launch read on its own, the latest first: a model that overfit is
        overfitting whatever was run after it. The launches are the training loss's (`Run.launch_starts`, on the
        step axis both curves share); the finding names the launch it was read in."""
        starts = run.launch_starts(run.pick("loss"))
        if not starts:
            return []
        bounds = [-np.inf, *starts, np.inf]
        for k in range(len(bounds) - 2, 0, -1):
            lo, hi = bounds[k - 1], bounds[k]
            one = dataclasses.replace(self, launch=(lo, hi))
            vs, _ = one._launch(run, "val_loss")
            if vs.size < min(self.min_points, self.every_min_evals):
                continue
            found = one._routes(run)
            if found:
                f = found[0]
                # a cross-validation's folds are its launches: named as folds, not as launches appended to a log
                folds = set(starts) <= set(run.fold_starts(run.pick("loss")))
                span = f"one fold of the cross-validation's {len(bounds) - 1}" if folds else \
                    f"launch {k} of {len(bounds) - 1} appended to the log"
                return [dataclasses.replace(f, evidence={**f.evidence, "launch": k, "launches": len(bounds) - 1},
                                            summary=f"{f.summary} (in {span}; the last shows no turn)")]
        return []

    def _scatter(self, run: Run) -> Finding | None:
        """The mild rise, sized against the validation curve's own scatter rather than its level: after the raw
        minimum come `scatter_min_evals` evaluations and `scatter_share` of all, ordered upward (Kendall's tau
        `scatter_tau`), whose last two end `scatter_sigmas` point sigmas above the minimum (the sigma measured after
        it, on successive differences: the trend and an early transient do not inflate it) and `scatter_min_rise`
        of it, undoing `scatter_give_back` of validation's fall from its first evaluation; meanwhile training falls
        `min_train_fall` and the gap between the two widens `scatter_gap_growth` of itself. A fine-tune's evaluation loss 1-7% above its best at each later evaluation while training falls."""
        vs, v = self._launch(run, "val_loss")
        imin = int(np.argmin(v)) if v.size else 0
        after = v[imin + 1:]
        if after.size < max(self.scatter_min_evals, self.scatter_share * v.size):
            return None
        lo, final = float(v[imin]), float(np.median(v[-2:]))
        sigma = stats.noise(v[imin:])
        tau = stats.mann_kendall(after).tau
        fall = float(v[0]) - lo  # what validation had gained since its first evaluation
        if not (lo > 0 and tau >= self.scatter_tau and final >= (1 + self.scatter_min_rise) * lo
                and np.isfinite(sigma) and final - lo >= self.scatter_sigmas * sigma
                and final - lo >= self.scatter_give_back * fall):
            return None  # a rise that undoes 1-3% of a long fall leaves the checkpoint choice as it was
        ts, tv = self._launch(run, "loss")
        train = _between(ts, tv, vs[imin - 1] if imin > 0 else -np.inf, vs[imin:])
        t0, t1 = train[0], float(np.median(train[-2:]))
        if not (np.isfinite(t0) and np.isfinite(t1) and t1 <= (1 - self.min_train_fall) * t0):
            return None  # training must keep falling: a shared rise is divergence, a standstill a mismatch
        gap0, gap1 = lo - t0, final - t1
        if gap1 - gap0 < self.scatter_gap_growth * abs(gap0):
            return None
        rel = (final - lo) / lo
        ev = {"crossover_step": int(vs[imin]), "val_min": lo, "val_final": final, "val_rise": final - lo,
              "val_rise_relative": rel, "val_noise_after_min": sigma, "kendall_tau": tau,
              "evaluations_after": int(after.size), "train_at_crossover": t0, "train_final": t1,
              "gap_at_crossover": gap0, "gap_final": gap1, "best_checkpoint_step": int(vs[imin])}
        return Finding.of(self, severity="warning", step=int(vs[imin]), step_end=int(vs[-1]),
                          series=run.pick("val_loss"), evidence=ev,
                          sources=(src(run, "val_loss", vs[imin:]), src(run, "loss", ts[(ts <= vs[-1])])),
                          summary=(f"{'mild ' if rel < self.min_rise * 2 else ''}overfitting: validation loss bottoms "
                                   f"at {point(vs, v, imin, say=_said(run))} (the best checkpoint) and rises at most "
                                   f"of the {after.size} evaluations after it, to a median {final:.4g} of the last two "
                                   f"(+{rel:.1%}, {(final - lo) / sigma:.0f}× its point scatter there), while the "
                                   f"training loss's medians between evaluations fall {t0:.4g} → {t1:.4g} and the gap "
                                   f"widens {gap0:.3g} → {gap1:.3g}"))

    def _gap(self, run: Run) -> Finding | None:
        """Memorisation beside a validation loss that stopped improving, flat or rising (`_gap`): from an evaluation
        that no later one betters by `gap_flat` (`gap_after` evaluations or more after it), the training loss (its
        median between evaluations; validation's relative point noise there under `gap_flat`) falls `gap_train_fall` × while it ends `gap_ratio` × under validation at each of
        the last `gap_after` evaluations, validation stalled at `gap_val_share` of the first training loss or more
        (a validation loss at 7% of it is a trained model; the gap is training reaching 0), after validation improved
        `gap_flat` on its first evaluation at least once (flat from the start: a mismatch, not memorisation). A classifier whose training loss falls 0.125 -> 0.013 while its validation
        loss sits at 0.78-0.81: no rise to place a crossover, but the model is learning its training set by heart.
        None while a held-out score (`base.held_out_score`) still trends up there (Mann–Kendall p < `trend_p`)."""
        vs, v = self._launch(run, "val_loss")
        if v.size < self.gap_after + 2 or not np.all(v > 0):
            return None
        later_min = np.minimum.accumulate(v[::-1])[::-1]  # the best evaluation from each one on
        still = np.flatnonzero(later_min[1:] >= (1 - self.gap_flat) * v[:-1])
        j = int(still[0]) if still.size else v.size
        if j == 0:
            return None  # never `gap_flat` better than its first evaluation: no generalisation was lost, none gained
            # (validation flat from the start beside a falling training loss is distribution_mismatch's picture)
        wiggle = stats.relative_wiggle(v[j:])
        if v.size - 1 - j < self.gap_after or not wiggle <= self.gap_flat:
            return None  # a validation loss swinging more than the 5% bar between evaluations shows no stall
        ts, tv = self._launch(run, "loss")
        train = _between(ts, tv, vs[j - 1] if j > 0 else -np.inf, vs[j:])
        tail = train[-self.gap_after:]
        if not (tv.size and float(v[j]) >= self.gap_val_share * float(tv[0])):
            return None  # validation already near a trained level: the gap is the training loss reaching 0, no loss
        if not (np.all(np.isfinite(train)) and np.all(train > 0) and train[0] >= self.gap_train_fall * train[-1]
                and np.all(v[-self.gap_after:] >= self.gap_ratio * tail)):
            return None
        score = held_out_score(run)
        if score is not None:  # a held-out accuracy still rising there: the model still generalises better
            ss, sv = finite_part(*run.arrays(score))
            sv = sv[(ss >= vs[j]) & (ss <= vs[-1])]
            trend = stats.mann_kendall(sv)
            if sv.size >= self.gap_after and sv[-1] > sv[0] and trend.z > 0 and trend.p < self.trend_p:
                return None
        ratio_end = float(np.min(v[-self.gap_after:] / tail))
        ev = {"crossover_step": int(vs[j]), "val_at_crossover": float(v[j]), "val_best_after": float(later_min[j + 1]),
              "val_final": float(v[-1]), "train_at_crossover": float(train[0]), "train_final": float(train[-1]),
              "train_fall_factor": float(train[0] / train[-1]), "gap_ratio_min": ratio_end,
              "evaluations_after": int(v.size - 1 - j), "best_checkpoint_step": int(vs[j])}
        return Finding.of(self, severity="warning", step=int(vs[j]), step_end=int(vs[-1]),
                          series=run.pick("val_loss"), evidence=ev,
                          sources=(src(run, "val_loss", vs[j:]), src(run, "loss", ts[(ts <= vs[-1])])),
                          summary=(f"validation loss stops improving at {point(vs, v, j, say=_said(run))}: none of "
                                   f"the {v.size - 1 - j} evaluations after it is {self.gap_flat:.0%} better (best "
                                   f"{later_min[j + 1]:.4g}, last {point(vs, v, v.size - 1, say=_said(run))}), while "
                                   f"the training loss falls {train[0]:.4g} → {train[-1]:.4g} "
                                   f"({ratio(train[0] / train[-1])}) and ends {ratio(ratio_end)} under it or more at "
                                   f"each of the last {self.gap_after}: the model memorises its training set"))

    def _first(self, run: Run) -> Finding | None:
        """The turn at the first evaluation, which a 3-point smoothed minimum never places there: from `min_points`
        evaluations and under `wide_min_evals` (a few epochs, too few for a level), the first is the lowest and every later one stands `first_min_rise` above it, their median by
        `noise_k` times the curve's relative point noise, while training falls `min_train_fall` from its level at the
        first evaluation (the median of its points up to it) to the median of its last three. A fine-tune whose
        evaluation loss is best after one epoch and never comes back while training keeps falling."""
        vs, v = self._launch(run, "val_loss")
        if not self.min_points <= v.size < self.wide_min_evals or int(np.argmin(v)) != 0:
            return None  # from `wide_min_evals` on, the level rules read where the curve goes after its first jump
        lo, after = float(v[0]), v[1:]
        rise = float(np.median(after)) - lo
        wiggle = stats.relative_wiggle(v)
        if not (lo > 0 and np.min(after) >= (1 + self.first_min_rise) * lo) or (
                np.isfinite(wiggle) and rise < self.noise_k * wiggle * lo):
            return None
        ts, tv = self._launch(run, "loss")
        upto = ts <= vs[-1]
        if upto.sum() < 2:
            return None
        t0, t1 = float(_between(ts, tv, -np.inf, vs[:1])[0]), float(np.median(tv[upto][-3:]))
        if not (np.isfinite(t0) and t0 > 0 and t1 <= (1 - self.min_train_fall) * t0):
            return None  # training must fall: a shared rise is divergence, a standstill a mismatch
        ev = {"crossover_step": int(vs[0]), "val_min": lo, "val_final": float(v[-1]), "val_rise": rise,
              "val_rise_relative": rise / lo, "val_lowest_after": float(np.min(after)),
              "evaluations_after": int(after.size), "train_at_crossover": t0, "train_final": t1,
              "best_checkpoint_step": int(vs[0])}
        return Finding.of(self, severity="warning", step=int(vs[0]), step_end=int(vs[-1]),
                          series=run.pick("val_loss"), evidence=ev,
                          sources=(src(run, "val_loss", vs), src(run, "loss", ts[upto])),
                          summary=(f"validation loss is lowest at its first evaluation, "
                                   f"{point(vs, v, 0, say=_said(run))} (the best checkpoint), and each of the "
                                   f"{after.size} after it stands {np.min(after) / lo - 1:.0%} above it or more "
                                   f"(median {lo + rise:.4g}, +{rise / lo:.0%}), while the training loss falls "
                                   f"{t0:.4g} → {t1:.4g}"))

    def _val_only(self, run: Run) -> Finding | None:
        """Only a validation loss was logged: a U an expert reads as overfitting on its own, at the price of naming
        the doubt. From `val_only_min_evals` evaluations, it falls `val_only_fall` to its minimum from its highest
        evaluation before it (an early jump and its way back down are the U's left arm too), then rises
        `val_only_rise` of the minimum over `val_only_share` of the evaluations or more, ordered upward (Kendall's
        tau `val_only_tau`) and ending `noise_k` point sigmas (after the minimum) above it."""
        vs, v = self._launch(run, "val_loss")
        if v.size < self.val_only_min_evals:
            return None
        imin = int(np.argmin(v))
        after = v[imin + 1:]
        ipeak = int(np.argmax(v[:imin + 1]))  # the U's left arm: from its highest evaluation before the minimum
        start = float(v[ipeak])
        lo = float(v[imin])
        if not (lo > 0 and start >= (1 + self.val_only_fall) * lo
                and after.size >= max(self.scatter_min_evals, self.val_only_share * v.size)):
            return None
        final = float(np.median(v[-3:]))
        sigma = stats.noise(v[imin:])
        tau = stats.mann_kendall(after).tau
        if not (final >= (1 + self.val_only_rise) * lo and tau >= self.val_only_tau
                and np.isfinite(sigma) and final - lo >= self.noise_k * sigma):
            return None
        rel = (final - lo) / lo
        ev = {"crossover_step": int(vs[imin]), "val_start": start, "val_min": lo, "val_final": final,
              "val_rise": final - lo, "val_rise_relative": rel, "val_noise_after_min": sigma, "kendall_tau": tau,
              "evaluations_after": int(after.size), "training_loss_logged": False}
        return Finding.of(self, severity="warning", step=int(vs[imin]), step_end=int(vs[-1]),
                          series=run.pick("val_loss"), evidence=ev, sources=(src(run, "val_loss", vs),),
                          summary=(f"validation loss falls from {point(vs, v, ipeak, say=_said(run))} to "
                                   f"{point(vs, v, imin, say=_said(run))} (the best checkpoint) and rises over the "
                                   f"{after.size} evaluations after it, to a median {final:.4g} of the last three "
                                   f"(+{rel:.0%}); "
                                   f"the training loss was not logged, so this reads as overfitting only if it kept "
                                   f"falling (a shared rise would be divergence)"))

    def _every(self, run: Run) -> Finding | None:
        """The short rise (`every_min_evals` evaluations and up): the lowest evaluation is followed by a rise at
        every evaluation to the last, ending `every_min_rise` above it, while the training loss at those
        evaluations (the median of its points in the interval that ends at each) falls at each (a rise within
        `every_train_errors` standard errors of such a median is per-step noise) and by `min_train_fall` in all; a run of no more evaluations than that, its minimum the middle one, by
        `every_last_min_rise` at its last (the run ended: no next evaluation decides). Three epochs of a fine-tune whose evaluation loss
        climbs +13%, +47% while its training loss halves are read so; the three-evaluation rule needs five."""
        vs, v = self._launch(run, "val_loss")
        if v.size < self.every_min_evals:
            return None
        k = stats.rising_tail(v)
        need = min(self.every_min_evals, v.size - 1)  # a run of three evaluations has one after a middle minimum
        if k < need or k - 1 < min(self.every_run, self.every_share * (v.size - 1)) or np.argmin(v) != v.size - k:
            return None  # two evaluations up at the end of a long run: a user waits for the next one
        lo, last = float(v[-k]), float(v[-1])
        if k < self.every_min_evals and not (last >= (1 + self.every_last_min_rise) * lo and self.launch is None
                                             and run.arrays("val_loss")[0][-1] == vs[-1]):
            return None  # one rise, the run's last evaluation (none after it, finite or not): only a large one
        # NaN under 4 points: three evaluations are all there is to read. The bend at the minimum is the turn itself,
        # not a jump between evaluations: on a handful of them it would be most of the "noise" the rise is held to
        wiggle = stats.relative_wiggle(v, skip=v.size - k)
        if not (lo > 0 and last >= (1 + self.every_min_rise) * lo) or (
                np.isfinite(wiggle) and last - lo < self.noise_k * wiggle * lo):
            return None  # a rise within the curve's own jumps between evaluations is not a turn
        ts, tv = self._launch(run, "loss")
        span = vs[-k:]
        bounds = np.r_[vs[-k - 1] if v.size > k else -np.inf, span]
        train, counts, errors = [], [], []
        for start, s in zip(bounds[:-1], bounds[1:]):
            inside = tv[(ts > start) & (ts <= s)]
            train.append(float(np.median(inside)) if inside.size else np.nan)
            counts.append(inside.size)
            # a median of n noisy points is known to ~1.25 σ/√n: a rise within `every_train_errors` of those is none
            errors.append(self.every_train_errors * 1.2533 * stats.noise(inside) / np.sqrt(inside.size)
                          if inside.size >= 3 and np.ptp(inside) > 0 else 0.0)  # a value printed alike: no noise
        train = np.asarray(train)
        how = "" if max(counts) == 1 else ", medians between evaluations"
        floor = self.memorised * float(tv[0]) if tv.size else 0.0  # a memorised loss stays at its floor
        falls = (np.diff(train) < np.asarray(errors[1:])) | (train[1:] <= floor)
        lowest = k - 1 >= self.every_run and train[-1] <= np.min(train)  # a long rise beside training at its lowest
        if not (np.all(np.isfinite(train)) and np.sum(~falls) <= (self.every_upticks if lowest else 0)
                and train[-1] <= (1 - self.min_train_fall) * train[0]):
            return None  # training must fall at each evaluation: a shared rise is divergence, a standstill a mismatch
        ups = int(np.sum(~falls))
        fell = ("at each" if np.all(np.diff(train) < 0) else "in all, at none up beyond its noise" if ups == 0 else
                f"to its lowest, up at {ups} of the {k - 1} evaluations")
        ev = {"crossover_step": int(vs[-k]), "val_min": lo, "val_final": last, "val_rise": last - lo,
              "val_rise_relative": (last - lo) / lo, "rising_evaluations": k - 1,
              "train_at_crossover": float(train[0]), "train_final": float(train[-1])}
        return Finding.of(self, severity="warning", step=int(vs[-k]), step_end=int(vs[-1]),
                          series=run.pick("val_loss"), evidence=ev,
                          sources=(src(run, "val_loss", span), src(run, "loss", ts[(ts <= span[-1])])),
                          summary=(f"validation loss bottoms at {point(vs, v, v.size - k, say=_said(run))} and rises "
                                   f"{f'at every one of the {k - 1} evaluations' if k > 2 else 'at the one evaluation'}"
                                   f" after it, to "
                                   f"{point(vs, v, v.size - 1, say=_said(run))} "
                                   f"(+{(last - lo) / lo:.0%}), while training loss falls "
                                   f"{fell} ({train[0]:.4g} → {train[-1]:.4g}{how})"))

    def _wide(self, run: Run) -> Finding | None:
        """Overfitting under heavy evaluation noise: on `wide_min_evals` evaluations or more, the rolling median over
        `wide_share` of them (`wide_min_window` at least) has its minimum, then the evaluations after it trend up
        (Mann–Kendall p < `wide_trend_p`) to a median of the last window `min_rise` above that minimum and `noise_k`
        standard errors of a window median (point noise / √window), while training falls over the same span. A tiny validation set jumps ×3 between
        epochs; its 3-point minimum is a lucky dip near the end, while its medians over 30 epochs climb +60%."""
        vs, v = self._launch(run, "val_loss")
        if v.size < self.wide_min_evals:
            return None
        w = max(self.wide_min_window, int(v.size * self.wide_share))
        sm = stats.rolling_median(v, w)
        imin = int(np.nanargmin(sm))
        lo, final = float(sm[imin]), float(np.median(v[-w:]))
        rise = final - lo
        sigma = stats.noise(v)
        if not (lo > 0 and rise >= self.min_rise * lo and np.isfinite(sigma)
                and rise >= self.noise_k * sigma / np.sqrt(w) and v.size - imin >= max(self.trend_points, w)):
            return None
        trend = stats.mann_kendall(v[imin:], vs[imin:])
        if not (trend.z > 0 and trend.p < self.wide_trend_p):
            return None
        ts, tv = self._launch(run, "loss")
        after = (ts >= vs[imin]) & (ts <= vs[-1])
        if after.sum() < 6:
            return None
        t_start, t_end = stats.start_level(tv[after], self.start_points), float(np.median(tv[after][-3:]))
        t_trend = stats.mann_kendall(tv[after], ts[after])
        if not (t_end < t_start and t_trend.z < 0 and t_trend.p < self.trend_p):
            return None  # training must keep falling: a shared rise is divergence, a standstill a mismatch
        ev = {"crossover_step": int(vs[imin]), "val_min": lo, "val_final": final, "val_rise": rise,
              "val_rise_relative": rise / lo, "val_noise": sigma, "mk_p": trend.p, "window": w,
              "train_start_after": t_start, "train_end_after": t_end, "smoothed": True}
        return Finding.of(self, severity="warning", step=int(vs[imin]), step_end=int(vs[-1]),
                          series=run.pick("val_loss"), evidence=ev,
                          sources=(src(run, "val_loss", vs), src(run, "loss", ts[after])),
                          summary=(f"validation loss, median of {w} evaluations, bottoms at {lo:.4g} around "
                                   f"{_said(run)(vs[imin])} and rises to {final:.4g} over its last {w} (+{rise / lo:.0%}; "
                                   f"Mann–Kendall p={trend.p:.1g} under evaluation noise of {sigma:.3g}) while "
                                   f"training falls {t_start:.4g} → {t_end:.4g}"))

    def _narrow(self, run: Run) -> Iterator[Finding]:
        """The rule of the docstring's first paragraphs, on the 3-point smoothed validation minimum."""
        vs, v = self._launch(run, "val_loss")
        if v.size < self.min_points:
            return
        sm = stats.rolling_median(v, self.smooth_points)
        imin = int(np.nanargmin(sm))
        span = vs[-1] - vs[0]
        if span <= 0 or (vs[-1] - vs[imin]) < self.min_after * span or v.size - imin < 2:
            return
        lo = float(sm[imin])
        final = float(np.median(v[-max(1, (v.size - imin) // 3):]))
        rise = final - lo
        sigma = stats.noise(v)
        trend = stats.mann_kendall(v[imin:], vs[imin:])
        noise = sigma if np.isfinite(sigma) else 0.0
        held = trend.z <= 0 and self._held(v, imin, lo, noise)  # no trend: the rise must hold to the end
        if not (rise >= self.min_rise * abs(lo) and (trend.z > 0 or held)):
            return
        if np.sum(v[imin + 1:] >= lo + self.min_rise * abs(lo)) < self.min_evals_above:
            return  # one or two evaluations up at the end: a user waits for the next before stopping the run
        ts, tv = self._launch(run, "loss")
        # Training over the validation rise's own span: what training did after the last finite evaluation
        # (a NaN, a masked 0.0) says nothing about the steps where validation rose.
        after = (ts >= vs[imin]) & (ts <= vs[-1])
        if after.sum() < 2:
            return
        # A rise under `noise_k` sigmas needs a second witness (its own trend, or training collapsing), and never
        # on a validation loss noisier than training: a validation set that small is val_noise's finding.
        if rise < self.noise_k * noise and (_noisier(v, tv, self.val_noise) or not (
                self._steady_rise(v, vs, imin, rise, noise) or self._memorises(tv[after], rise, noise))):
            return
        slope, _ = stats.theil_sen(ts[after], tv[after])
        train_change = slope * (ts[after][-1] - ts[after][0])
        train_level = stats.start_level(tv[after], self.start_points)
        if train_change > self.max_train_share * rise or (
                train_level > 0 and train_change > self.max_train_rise * train_level):
            return  # both rise: that is divergence, not overfitting
        # ... also when training jumps right at the crossover (a slope and a level read after it start above the
        # jump): its median up to the lowest evaluation against its median up to the last one
        levels = _between(ts, tv, vs[imin - 1] if imin > 0 else -np.inf, vs[imin:])
        cross, shared = float(levels[0]), float(levels[-1] - levels[0])
        if cross > 0 and (shared > self.max_train_share * rise or shared > self.max_train_rise * cross):
            return
        fell = train_level > 0 and float(np.median(tv[after][-3:])) <= (1 - self.min_train_fall) * train_level
        if held and not fell:
            return  # a held rise counts beside a training loss that ends lower than at the crossover only
        if (train_level > 0 and train_change > -self.min_train_fall * train_level and not fell
                and not _memorised(tv[ts <= vs[-1]], self.memorised)):
            return  # training stands still: validation worse from its first evaluations is a mismatch, later noise
        ev = {"crossover_step": int(vs[imin]), "val_min": lo, "val_final": final, "val_rise": rise,
              "val_rise_relative": rise / abs(lo) if lo else None, "val_noise": sigma, "mk_p": trend.p,
              "train_slope_after": slope, "train_change_after": train_change,
              "train_left_after": (float(np.median(tv[after][-3:])) / train_level) if train_level > 0 else None}
        yield Finding.of(self, severity="warning", step=int(vs[imin]), step_end=int(vs[-1]),
                         series=run.pick("val_loss"), evidence=ev,
                         sources=(src(run, "val_loss", vs), src(run, "loss", ts[after])),
                         summary=self._summary(vs, v, imin, train_change, ts, tv, run,
                                               by_level=fell and train_change > -self.min_train_fall * train_level))

    def _summary(self, vs: np.ndarray, v: np.ndarray, imin: int, train_change: float, ts: np.ndarray,
                 tv: np.ndarray, run: Run, by_level: bool = False) -> str:
        """The sentence, with the levels as the file shows them: the lowest evaluation's value (the median of the
        evaluations the smoothed minimum is the median of, when smoothed) and the median of the last third."""
        w = self.smooth_points // 2
        said = _said(run)
        lo, lo_text = level_of(vs, v, imin - w, imin + w, say=said)
        final, final_text = level_of(vs, v, v.size - max(1, (v.size - imin) // 3), v.size - 1, say=said)
        where = f"at {lo_text}" if w == 0 else f"at {said(vs[imin])}, {lo_text},"
        upto = tv[ts <= vs[-1]]
        train = (f"while training loss has fallen from {point(ts, tv, 0, say=_said(run, 'loss'))} to {float(np.median(upto[-3:])):.4g} "
                 f"(memorised: it cannot fall further)" if _memorised(upto, self.memorised) else
                 _level_fall(ts, tv, vs[imin], vs[-1], run) if by_level else
                 f"while training loss changes by {train_change:+.3g}")
        return f"validation loss bottoms {where} and rises to {final_text} (+{(final - lo) / abs(lo) if lo else 0:.0%}) {train}"


def held_out_rose(steps: np.ndarray, values: np.ndarray, min_evals: int, sigmas: float, min_rise: float) -> int | None:
    """The step of the held-out curve's minimum when it rose after it beyond its own scatter: `min_evals`
    evaluations after the raw minimum, the median of the last two `sigmas` point sigmas (measured after the
    minimum, on successive differences) and `min_rise` of it above it (overfitting's `_scatter` margins, read from
    its fields). None otherwise. A stall of the training loss
    while this holds is the model memorising (overfitting's reading), not learning that stopped."""
    fin = np.isfinite(values)
    steps, values = steps[fin], values[fin]
    if values.size < min_evals + 1:
        return None
    imin = int(np.argmin(values))
    lo, final, sigma = float(values[imin]), float(np.median(values[-2:])), stats.noise(values[imin:])
    if values.size - 1 - imin < min_evals or not (lo > 0 and np.isfinite(sigma)):
        return None
    return int(steps[imin]) if final - lo >= max(sigmas * sigma, min_rise * lo) else None


def _level_fall(ts: np.ndarray, tv: np.ndarray, first: float, last: float, run: Run) -> str:
    """Training's fall over the rise told by its levels (where its robust slope sees none: a fall in one step), as
    the medians of its first and last three points there, with their steps as the file shows them."""
    at = np.flatnonzero((ts >= first) & (ts <= last))
    head, tail = at[:3], at[-3:]
    said = _said(run, "loss")
    _, start = level_of(ts, tv, int(head[0]), int(head[-1]), say=said)
    _, end = level_of(ts, tv, int(tail[0]), int(tail[-1]), say=said)
    return f"while training loss falls from {start} to {end}"


def _between(ts: np.ndarray, tv: np.ndarray, first: float, marks: np.ndarray) -> np.ndarray:
    """The training loss at each evaluation in `marks`: the median of its points in the interval that ends there
    (after the evaluation before, `first` for the first), or its point nearest the evaluation where it logged none
    there (a training loss logged more sparsely than the evaluations)."""
    bounds = np.r_[first, marks]
    out = []
    for start, end in zip(bounds[:-1], bounds[1:]):
        inside = tv[(ts > start) & (ts <= end)]
        out.append(float(np.median(inside)) if inside.size else
                   float(tv[np.argmin(np.abs(ts - end))]) if tv.size else np.nan)
    return np.asarray(out)


def _said(run: Run, role: str = "val_loss") -> Callable[..., str]:
    """Steps of `role`'s series as the file shows them (`Run.printed_span`)."""
    return partial(run.printed_span, run.pick(role))


def _memorised(train: np.ndarray, share: float) -> bool:
    """A training loss that ends (the median of its last three points) at `share` of its first logged value or
    below, or at exactly 0: it fell as far as it can, and a flat stretch there is a finished fall, not training
    that stands still."""
    if train.size < 2 or share <= 0:
        return False  # (a share of 0 turns the rule off)
    end = float(np.median(train[-3:]))
    return bool(end == 0 or (train[0] > 0 and end <= share * float(train[0])))


def _noisier(val: np.ndarray, train: np.ndarray, noise: ValNoise) -> bool:
    """Validation noisier than training by val_noise's measure (`stats.relative_wiggle`) and bar: its `single_ratio`
    against a training loss logged between evaluations, its `ratio` against one at their cadence. Noisier by less,
    val_noise does not claim the curve, and its rise is judged here."""
    bar = noise.single_ratio if train.size > noise.cadence_share * val.size else noise.ratio
    vn, tn = stats.relative_wiggle(val), stats.relative_wiggle(train)
    return bool(np.isfinite(vn) and np.isfinite(tn) and vn >= bar * tn)
