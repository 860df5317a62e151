"""val_noise: the validation loss jumps around much more than training, at the cadence a user reads it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from forensics.judge import numbers, stats
from forensics.judge.detectors.base import SHAPE, by_launch, finite_part, held_out_score, point, src, too_short
from forensics.judge.findings import Finding
from forensics.judge.run import Run


@dataclass(frozen=True)
class ValNoise:
    """The validation loss jumps around much more than training, measured at the validation's own cadence.

    Detects: the evaluation-level validation loss (`_evaluations`: one mean over the validation set per evaluation,
    what early stopping and checkpoint choice read; not the per-batch values some scripts print while validating)
    moves at least `min_noise` of its level between evaluations around its own trend (`stats.relative_wiggle`), or
    down to `traded_share` of it where it stands out further over training (`_stands_out`, `hidden_trend`),
    with at least `min_sign_changes` of its successive differences flipping sign, and is noisier than training
    (`_compared`): `single_ratio` times training's single logged values, when training is logged between
    evaluations (a validation set no bigger than a batch), or `ratio` times the training loss at the evaluations'
    cadence (the training series whose point count is nearest theirs, an epoch mean; with over `cadence_share`
    times as many points, the medians of its points between evaluations).
    Silent when the training loss ends `max_train_rise` above its smoothed minimum (the swings are divergence's);
    when validation's point noise (`stats.noise`) is under `min_share_of_travel` of the range its smoothed curve
    covers (a loss falling by orders of magnitude ranks its evaluations by the fall), unless it moves `alone_noise`
    of its level (×2 jumps show on the log plot such a fall is read on); and when validation ends
    `decided_sigmas` point sigmas above its smoothed minimum (the rise decides the checkpoint: overfitting's).
    Under `min_points` of either curve: round trips of validation on 3 evaluations or more against training's moves
    (`_few`), or, beside a training loss too sparse to compare or none at all, validation alone at a higher bar
    (`_alone`).
    Of launches appended to one log, the last is read (`base.by_launch`). Where no held-out loss is logged, the
    held-out score a user reads instead (`_score`: an accuracy, AUC, mAP; `base.held_out_score`) at the same bars,
    compared with a training score where one is logged, else with the training loss.
    A smooth curve with isolated jumps that come straight back, at three evaluations or more (`_excursions`), also
    where the point noise is under `min_share_of_travel` of a long fall: a jump ×100 above its neighbours shows on
    any plot.
    Why: a tiny validation set (or one resampled at each evaluation), random augmentation at validation, or
    model.eval() missing; the best evaluation is then a lucky draw, and early stopping reads noise.
    Evidence: relative noise of each, their ratio, the training series and how it was compared; the best evaluation
    beside the median of its neighbours (how far below the curve a lucky draw puts the checkpoint a user keeps).
    False alarms: 0 of the 115 healthy real runs it checks in the pool of 849 labelled real runs (25 label files;
    benchmarks/calibrate.py --pool), with its fields set from that healthy curve (docs/engine.md); the held-out
    score and the lifted travel bar: 4 of the 214 healthy runs of set8-set11 and the shared sets claimed before
    and after, 3 allowed by their label (healthy scores move 0.1-3.6% of their level, the two labelled 12.8-13.7%).
    The noise traded for the ratio (`_stands_out`): 0 of the 40 healthy shared runs; 0 new claims on the healthy runs
    of set12-15 not allowing val_noise; 1 of the 124 healthy runs of set16-18 (a YOLO results.csv).
    Non-finite evaluations and glaring excursions (2 Dec 2026): 0 of the 40 healthy shared runs; of the 168 healthy
    restored runs (set12-13, set16-19, consensus labels) one new claim, on a run whose label allows val_noise.
    """

    kind: ClassVar[str] = "val_noise"
    reads_pairs: ClassVar[bool] = True  # each part of a loss of several parts too (`Run.loss_pairs`)
    stage: ClassVar[int] = SHAPE
    requires: ClassVar[tuple[str, ...]] = ()  # the validation loss (`unavailable`), else a held-out score (`_score`)
    reads_validation_alone: ClassVar[bool] = True
    # Healthy pool (849 labelled real runs, 115 healthy ones this detector checks; benchmarks/calibrate.py --pool):
    # each comment's figure is that field swept alone, the others at their defaults (docs/engine.md, val_noise).
    single_ratio: float = 1.0  # validation (a mean over its whole set) noisier than training's single logged values
    # (0 healthy at 0.7-2, 1 at 0.5)
    ratio: float = 3.0  # ... or than training at the evaluations' cadence (epoch means, medians between
    # evaluations), and than training's moves where both are short (`_few`): 0 healthy from 3.0 up, 1 at 2.25-2.75
    min_noise: float = 0.08  # 8% of the level between evaluations: 0 healthy at 0.07-0.15, 1 at 0.02-0.06, 3 at
    # 0.01; the same hits from 0.07 to 0.09 (2 fewer at 0.1): the middle of that stretch
    traded_share: float = 0.5  # the two witnesses traded (`_stands_out`): validation's noise down to half of
    # `min_noise` where its ratio to training rises as much (noise × ratio ≥ `min_noise` × `ratio`); the ratio is
    # not traded down (healthy real runs move 18% at 2.1×): 0 of the 40 healthy shared runs, 0 new claims on the
    # 168 healthy runs of set12-15 (3 where the label allows val_noise), 1 of the 124 of set16-18
    hidden_trend: float = 0.2  # traded only: the second half's point noise a fifth of its smoothed curve's travel
    # or more, the small jumps hide where the curve goes (a healthy set12-15 run at 0.07 beside a fall is silent)
    min_sign_changes: float = 0.45  # share of successive differences flipping sign (white noise: about 2/3); 0
    # healthy at 0.2-0.55, hits lost above 0.5
    max_train_rise: float = 0.5  # training ending 50% above its minimum is diverging: the validation swings
    min_points: int = 8  # second differences and sign changes need this many points of each curve
    min_share_of_travel: float = 0.02  # point noise under 2% of the smoothed curve's range: a smooth curve on a plot;
    # 0 healthy at 0.01-0.05, 1 under 0.01
    cadence_share: float = 1.5  # a training series with over 1.5× the evaluations' points is logged between them
    decided_sigmas: float = 5.0  # validation ending 5 noise sigmas above its smoothed minimum: the rise decides
    # (0 healthy at 3-1000; from 8 up a claim on a run labelled overfitting)
    neighbours: int = 2  # the best evaluation's neighbours on each side, for the level the curve has there
    few_min_points: int = 3  # below `min_points` of either curve (`_few`): from 3 evaluations, ...
    few_min_swing: float = 0.05  # ... round trips of 5% of the level, `ratio` × training's moves at the
    # evaluations' cadence (0 healthy at 0.02-0.3; one more hit at 0.02-0.1 than at 0.15)
    alone_noise: float = 0.2  # training too sparse to compare: validation alone, at 2.5× `min_noise` (0 healthy
    # at 0.1-0.3, a false claim at 0.05) ...
    alone_sign_changes: float = 0.5  # ... flipping direction at half its moves or more
    excursion_fold: float = 2.0  # an isolated evaluation 2× the median of its neighbours (0 healthy at 1.6-3, 1
    # at 1.5) ...
    excursion_back: float = 1.5  # ... with the next one back within 1.5× of it ...
    excursion_window: int = 3  # (neighbours on each side) ...
    glaring_fold: float = 5.0  # ... or, side by side, ×5 the run's median (`_glaring_excursions`)
    min_excursions: int = 2  # ... twice or more, training at those evaluations without one (0 healthy at 2-4, 2 at 1)

    def unavailable(self, run: Run) -> str | None:
        """From `few_min_points` evaluations; where both curves are shorter than `min_points`, neither has the moves
        the other is measured against (a 5-point log is too short for noise, not free of it), unless validation's
        round trips stand out at a glance (`_few`): effect size decides first, at any length. Without a validation
        loss, a held-out score (`base.held_out_score`) of `min_points` beside a training loss of as many."""
        if not run.has("val_loss"):
            name = held_out_score(run)
            if name is None:
                return run.missing_message("val_loss")
            return too_short(run, name, self.min_points) or (
                run.missing_message("loss") if not run.has("loss") else too_short(run, "loss", self.min_points))
        if not run.has("loss"):
            return too_short(run, "val_loss", self.min_points)
        if self._nonfinite_evaluations(run) is not None:
            return None
        short = too_short(run, "val_loss", self.few_min_points) or too_short(run, "loss", self.few_min_points)
        if short:
            return short
        both = too_short(run, "loss", self.min_points) and too_short(run, "val_loss", self.min_points)
        if both and self._few(run, *finite_part(*run.arrays("loss"))) is None:
            return both
        return None

    def check(self, run: Run) -> Iterator[Finding]:
        if not run.has("val_loss"):
            found = self._score(run)
            yield from [found] if found is not None else []
            return
        if not run.has("loss"):
            if run.has("epoch") and np.ptp(finite_part(*run.arrays("epoch"))[1]) == 0:
                return  # every point at one epoch: the batches of one evaluation, not evaluations
            found = self._alone(run, np.empty(0))
            yield from [found] if found is not None else []
            return
        found = self._nonfinite_evaluations(run)
        if found is not None:
            yield found
            return
        ts, t = finite_part(*run.arrays("loss"))
        if t.size < self.min_points or run.finite_points("val_loss") < self.min_points:
            found = self._alone(run, t) if t.size < self.min_points <= run.finite_points("val_loss") else None
            found = found or self._few(run, ts, t)
            yield from [found] if found is not None else []
            return
        if self._training_diverges(t):
            return  # validation swinging with a diverging training loss is its symptom, not this
        val_name = self._evaluations(run)
        if val_name is None:
            return
        vs, v = finite_part(*run.arrays(val_name))
        pieces = by_launch(run, val_name, vs, v)
        if len(pieces) > 1:  # launches appended to one log: the last one, no fresh start read as a jump
            vs, v = next((p for p in reversed(pieces) if p[0].size > 1), pieces[-1])
            if v.size < self.min_points:
                return
        vn, flips = stats.relative_wiggle(v), stats.sign_change_rate(v)
        if not (np.isfinite(vn) and vn >= self.traded_share * self.min_noise and flips >= self.min_sign_changes):
            found = self._excursions(run, val_name, vs, v)
            yield from [found] if found is not None else []
            return
        found = None
        if _travel(v) > 0 and stats.noise(v) < self.min_share_of_travel * _travel(v):
            # jumps invisible beside the curve's own fall (large relative to a level that nears 0 only), but not an
            # isolated evaluation standing a multiple above its neighbours: that one shows on any plot
            found = self._excursions(run, val_name, vs, v)
        found = found or self._judged(run, val_name, vs, v, vn, flips)
        if found is None and vn < self.min_noise:
            found = self._excursions(run, val_name, vs, v)  # under `min_noise` and not traded: as before, jumps
        yield from [found] if found is not None else []

    def _nonfinite_evaluations(self, run: Run) -> Finding | None:
        """The validation loss non-finite (NaN, ±inf) at evaluations that finite ones follow, while the training loss
        beside it is finite at every record: the evaluation pass overflows where training does not (half precision
        in eval, a degenerate batch), and what early stopping and the checkpoint choice read there is no number. At
        any length, a warning; a run whose validation stays non-finite to its end is nan_loss's question."""
        if not (run.has("loss") and run.has("val_loss")):
            return None
        t = run.arrays("loss")[1]
        vs, v = run.arrays("val_loss")
        bad = ~np.isfinite(v)
        if t.size == 0 or not np.all(np.isfinite(t)) or not bad.any() or not np.isfinite(v[-1]):
            return None
        name = run.pick("val_loss")
        at = vs[bad]
        shown = ", ".join(f"{'nan' if np.isnan(x) else 'inf' if x > 0 else '-inf'} at "
                          f"{run.printed_span(name, int(s))}" for s, x in zip(at[:4], v[bad][:4]))
        ev = {"nonfinite_evaluations": int(bad.sum()), "evaluations": int(v.size), "first_nonfinite_step": int(at[0]),
              "last_nonfinite_step": int(at[-1]), "final_level": float(v[-1]), "training_finite": True}
        return Finding.of(self, severity="warning", step=int(at[0]), step_end=int(at[-1]), series=name, evidence=ev,
                          sources=(src(run, "val_loss", at),),
                          summary=(f"{name} is non-finite at {bad.sum()} of its {v.size} evaluations ({shown}"
                                   f"{' ...' if at.size > 4 else ''}) and finite again after, ending at "
                                   f"{float(v[-1]):.4g}, "
                                   f"while the training loss is finite at every record: the evaluation overflows "
                                   f"where training does not (half precision in eval, a degenerate batch), and "
                                   f"early stopping reads no number there"))

    def _training_diverges(self, t: np.ndarray) -> bool:
        """Whether the training loss `t` ends `max_train_rise` above its smoothed minimum: diverging."""
        low = float(np.nanmin(stats.rolling_median(t, max(5, t.size // 10))))
        return low > 0 and stats.head_tail_levels(t)[1] >= (1 + self.max_train_rise) * low

    def _score(self, run: Run) -> Finding | None:
        """No held-out loss logged: the held-out score a user reads instead (`base.held_out_score`: an accuracy, an
        AUC, a mAP), judged as the loss is, at the same bars, its worse direction down (an accuracy bouncing
        0.33-1.0 between epochs on a 70-image validation set, beside a training loss that falls smoothly)."""
        name = held_out_score(run)
        if name is None or not run.has("loss"):
            return None
        ts, t = finite_part(*run.arrays("loss"))
        vs, v = finite_part(*run.arrays(name))
        if t.size < self.min_points or v.size < self.min_points:
            return None
        if self._training_diverges(t):
            return None  # the held-out swings are the diverging training loss's symptom
        vn, flips = stats.relative_wiggle(v), stats.sign_change_rate(v)
        if not (np.isfinite(vn) and vn >= self.traded_share * self.min_noise and flips >= self.min_sign_changes):
            return None
        # a training score of its kind, where logged, is the curve it is compared with (a batch's accuracy is as
        # noisy on both sides: sampling, not the held-out set); where its noise cannot be measured, no comparison
        train_role = "accuracy" if run.has("accuracy") else "loss"
        if train_role == "accuracy" and not np.isfinite(stats.relative_wiggle(finite_part(*run.arrays("accuracy"))[1])):
            return None  # batches scoring 0: a training score too noisy to measure the held-out one against
        return self._judged(run, name, vs, v, vn, flips, worse=-1.0, train_role=train_role)

    def _judged(self, run: Run, val_name: str, vs: np.ndarray, v: np.ndarray, vn: float, flips: float,
                worse: float = 1.0, train_role: str = "loss") -> Finding | None:
        """The held-out curve `v` (a loss, or a score read with `worse` −1: lower is worse) noisy enough on its own,
        judged against training (`_compared`), the travel of its smoothed curve (a long fall hides jumps under
        `min_share_of_travel` of it, unless they are `alone_noise` of the level: on the log plot such a fall is read
        on, jumps ×2 show), where it passed only by the trade (`_stands_out`) the trend of its second half (point
        noise under `hidden_trend` of the distance its smoothed curve travels there: a curve still falling at its
        end, its small jumps smaller than the fall) and a decided rise (overfitting's)."""
        compared = self._compared(run, vs, v, vn, train_role)
        if compared is None:
            return None
        train_name, train_steps, tn, how = compared
        v = worse * v  # oriented so that up is worse: a loss, or a score turned over
        sigma, travel = stats.noise(v), _travel(v)
        if travel > 0 and sigma < self.min_share_of_travel * travel and not (
                vn >= self.alone_noise and flips >= self.alone_sign_changes):
            return None
        traded = how != "single" and not (vn >= self.min_noise and vn >= self.ratio * tn)
        late = v[v.size // 2:]
        if traded and late.size >= 4 and _travel(late) > 0 and stats.noise(late) < self.hidden_trend * _travel(late):
            return None  # small jumps, and where a checkpoint is chosen the trend outruns them: no lucky draw
        w = max(3, v.size // 10) | 1
        smooth = stats.rolling_median(v, w)
        rise = float(np.median(v[-w:]) - np.nanmin(smooth))
        if sigma > 0 and rise >= self.decided_sigmas * sigma:
            return None  # the rise after the minimum decides the checkpoint to keep (overfitting's), not the jumps
        best = int(np.argmin(v))
        v = worse * v
        around = np.r_[v[max(0, best - self.neighbours):best], v[best + 1:best + 1 + self.neighbours]]
        there = float(np.median(around)) if around.size else float("nan")
        ev = {"val_relative_noise": vn, "train_relative_noise": tn, "ratio": vn / tn if tn > 0 else None,
              "val_sign_change_rate": flips, "val_noise": sigma, "val_travel": travel, "val_series": val_name,
              "train_series": train_name, "train_compared_as": how, "val_rise_after_minimum": rise,
              "best_step": int(vs[best]), "best_value": float(v[best]), "best_neighbours_median": there}
        lucky = ""
        if np.isfinite(there) and there > 0 and v[best] > 0 and worse * (there - v[best]) > 0:
            a, b = max(0, best - self.neighbours), min(v.size - 1, best + self.neighbours)
            lucky = (f"; its best evaluation, {point(vs, v, best)}, sits {abs(1 - v[best] / there):.0%} "
                     f"{'under' if worse > 0 else 'over'} the median {there:.4g} of the evaluations beside it "
                     f"(steps {vs[a]}-{vs[b]})")
        what = "validation loss" if worse > 0 else f"held-out {val_name} (no held-out loss logged)"
        return Finding.of(self, severity="warning", step=int(vs[0]), step_end=int(vs[-1]), series=val_name,
                          evidence=ev, sources=(src(run, val_name, vs), src(run, train_name, train_steps)),
                          summary=(f"{what} moves {vn:.1%} of its level between evaluations, "
                                   f"{_times(vn, tn)} the training {'loss' if train_role == 'loss' else 'score'}'s "
                                   f"{tn:.1%} ({_WORDS[how](train_name)}){lucky}"))

    def _excursions(self, run: Run, name: str, vs: np.ndarray, v: np.ndarray) -> Finding | None:
        """Isolated jumps in an otherwise smooth validation curve, which a median noise measure does not see: at
        `min_excursions` evaluations or more, validation stands `excursion_fold` × the median of its
        `excursion_window` neighbours on each side and the next evaluation is back within `excursion_back` × of it,
        while training between the evaluations beside it stays under `excursion_fold` × its median around them (the
        evaluation, not the model, moved; a restart or a bad batch moves both)."""
        if v.size < 2 * self.excursion_window + 1 or np.any(v <= 0):
            return None
        train_name = run.pick("loss")
        ts, t = finite_part(*run.arrays(train_name))
        hits = []
        w = self.excursion_window
        for i in range(1, v.size - 1):
            local = float(np.median(np.r_[v[max(0, i - w):i], v[i + 1:i + 1 + w]]))
            if not (v[i] >= self.excursion_fold * local and v[i + 1] <= self.excursion_back * local):
                continue
            near = t[(ts > vs[i - 1]) & (ts <= vs[i + 1])]
            around = t[(ts > vs[max(0, i - 1 - w)]) & (ts <= vs[min(v.size - 1, i + 1 + w)])]
            if near.size and around.size and float(near.max()) >= self.excursion_fold * float(np.median(around)):
                continue  # training jumped there too: a shared event (a bad batch, a restart), not the evaluation
            hits.append(i)
        glaring = False
        if len(hits) < self.min_excursions:
            hits, glaring = self._glaring_excursions(vs, v, ts, t), True
        if len(hits) < self.min_excursions:
            return None
        ev = {"excursions": [{"step": int(vs[i]), "value": float(v[i])} for i in hits], "val_series": name,
              "train_series": train_name, "train_compared_as": "around each excursion"}
        shown = ", ".join(point(vs, v, i) for i in hits[:6]) + (", …" if len(hits) > 6 else "")
        return Finding.of(self, severity="warning", step=int(vs[hits[0]]), step_end=int(vs[hits[-1]]),
                          series=name, evidence=ev, sources=(src(run, name, vs), src(run, train_name, ts)),
                          summary=(f"validation loss jumps to {self.glaring_fold:g}× its median "
                                   f"({float(np.median(v)):.4g}) or more at {len(hits)} evaluations ({shown}) and comes "
                                   f"back, while the training loss shows no jump there: evaluations a checkpoint "
                                   f"choice could land on" if glaring else
                                   f"validation loss jumps to {self.excursion_fold:g}× its neighbours or more and "
                                   f"back at {len(hits)} evaluations ({shown}) while the training loss shows no "
                                   f"jump there: single evaluations a checkpoint choice could land on"))

    def _glaring_excursions(self, vs: np.ndarray, v: np.ndarray, ts: np.ndarray, t: np.ndarray) -> list[int]:
        """Evaluations `glaring_fold` × the validation loss's median over the run or more, each `excursion_fold` × the
        lowest of the `excursion_window` before it (a jump up, not the early fall), side by side or apart, in a curve
        that ends back within `excursion_back` × that median, while training around each stays under
        `excursion_fold` × its median there: a cluster of jumps one neighbour cannot be measured against (a detector
        from scratch whose class loss reads 9, 19, 65, 23, 5, 28, 114 at its early evaluations, then settles at 2-5)."""
        level = float(np.median(v))
        if level <= 0 or float(v[-1]) > self.excursion_back * level:
            return []
        w, hits = self.excursion_window, []
        for i in np.flatnonzero(v >= self.glaring_fold * level):
            if i == 0 or v[i] < self.excursion_fold * float(np.min(v[max(0, i - w):i])):
                continue  # no jump up to it: the curve's own early fall from its untrained level
            around = t[(ts > vs[max(0, i - 1 - w)]) & (ts <= vs[min(v.size - 1, i + 1 + w)])]
            near = t[(ts > vs[i - 1]) & (ts <= vs[min(v.size - 1, i + 1)])]
            if near.size and around.size and float(near.max()) >= self.excursion_fold * float(np.median(around)):
                continue  # training jumped there too
            hits.append(int(i))
        return hits

    def _alone(self, run: Run, t: np.ndarray) -> Finding | None:
        """Training logged too sparsely to measure its noise at the evaluations' cadence (under `min_points`),
        validation at `min_points` or more: validation judged alone, at the higher bar of `alone_noise` relative
        point noise (`stats.relative_wiggle`) with `alone_sign_changes` of its moves flipping direction. A curve
        jumping ×2-×5 between epochs is noise whatever the training loss did between its few logged points, or
        where none was logged (a pasted validation column; not points all logged at one epoch, which are the
        batches of one evaluation)."""
        vs, v = finite_part(*run.arrays("val_loss"))
        vn, flips = stats.relative_wiggle(v), stats.sign_change_rate(v)
        if not (np.isfinite(vn) and vn >= self.alone_noise and flips >= self.alone_sign_changes):
            return None
        ev = {"val_relative_noise": vn, "val_sign_change_rate": flips, "val_points": int(v.size),
              "train_points": int(t.size), "val_series": run.pick("val_loss"), "train_compared_as": "none"}
        return Finding.of(self, severity="warning", step=int(vs[0]), step_end=int(vs[-1]),
                          series=run.pick("val_loss"), evidence=ev, sources=(src(run, "val_loss", vs),),
                          summary=(f"validation loss moves {vn:.0%} of its level between evaluations, changing "
                                   f"direction at {flips:.0%} of them, over {v.size} evaluations ("
                                   f"{_sparse(t.size)}); its best "
                                   f"evaluation, {point(vs, v, int(np.argmin(v)))}, is as much a draw as a checkpoint"))

    def _few(self, run: Run, ts: np.ndarray, t: np.ndarray) -> Finding | None:
        """Too few points of either curve for second differences and sign rates: the same judgement on round trips.
        Validation (from `few_min_points` evaluations) turns back at least once and every turn is a round trip: the
        smaller of the moves into and out of it is `few_min_swing` of the level there (median over the turns), at
        least `ratio` times training's median move between evaluations (relative to its level; the medians of
        its points between evaluations where it is logged more often). A tiny validation set read once an epoch
        swings ±30-50% while training falls smoothly; a user sees it at three evaluations."""
        vs, v = finite_part(*run.arrays("val_loss"))
        if v.size < self.few_min_points or t.size < self.few_min_points or np.any(v <= 0):
            return None
        low = float(np.nanmin(t))
        if low > 0 and stats.head_tail_levels(t)[1] >= (1 + self.max_train_rise) * low:
            return None  # the training loss diverges: validation swinging with it is its symptom, not this
        d = np.diff(v)
        turns = np.flatnonzero(np.sign(d[:-1]) * np.sign(d[1:]) < 0)
        if turns.size == 0 or turns.size < self.min_sign_changes * (d.size - 1):
            return None
        swing = float(np.median(np.minimum(np.abs(d[turns]), np.abs(d[turns + 1])) / v[turns + 1]))
        name, train_steps, tc = self._training_at(run, vs)
        tc = tc[np.isfinite(tc)]
        if tc.size < 2 or swing < self.few_min_swing:
            return None
        tn = float(np.median(np.abs(np.diff(tc))) / np.median(np.abs(tc))) if np.median(np.abs(tc)) > 0 else np.inf
        if swing < self.ratio * tn:
            return None
        how = "cadence" if tc.size == train_steps.size else "medians"
        ev = {"val_relative_swing": swing, "train_relative_move": tn, "ratio": swing / tn if tn > 0 else None,
              "val_turns": int(turns.size), "val_points": int(v.size), "val_series": run.pick("val_loss"),
              "train_series": name, "train_compared_as": how, "best_step": int(vs[np.argmin(v)]),
              "best_value": float(np.min(v))}
        values = ", ".join(f"{x:.4g}" for x in v[:8]) + (", …" if v.size > 8 else "")
        return Finding.of(self, severity="warning", step=int(vs[0]), step_end=int(vs[-1]),
                          series=run.pick("val_loss"), evidence=ev,
                          sources=(src(run, "val_loss", vs), src(run, name, train_steps)),
                          summary=(f"validation loss swings {swing:.0%} of its level and back at its turns "
                                   f"({values}: {turns.size} turn{'s' if turns.size > 1 else ''} in {v.size} "
                                   f"evaluations), {_times(swing, tn)} the training loss's {tn:.1%} between them "
                                   f"({_WORDS[how](name)}); its best evaluation is as much a draw as a checkpoint"))

    def _compared(self, run: Run, vs: np.ndarray, v: np.ndarray, vn: float,
                  train_role: str = "loss") -> tuple[str, np.ndarray, float, str] | None:
        """The training comparison validation's noise passes, if any: (series, its steps, its relative noise, how).
        `single`: the training loss logged between evaluations, value by value (`single_ratio`); `cadence`: the
        training loss at the evaluations' cadence (`ratio`). `train_role` is the training curve compared with (a
        training accuracy beside a held-out score: like with like)."""
        picked = run.pick(train_role)
        ts, t = finite_part(*run.arrays(picked))
        if t.size > self.cadence_share * v.size and vn >= self.min_noise:
            tn = stats.relative_wiggle(t)
            if np.isfinite(tn) and vn >= self.single_ratio * tn:
                return picked, ts, tn, "single"
        name, ts, tc = self._training_at(run, vs, train_role)
        tn = stats.relative_wiggle(tc)
        if np.isfinite(tn) and self._stands_out(vn, tn):
            return name, ts, tn, "cadence" if tc.size == ts.size else "medians"
        return None

    def _stands_out(self, vn: float, tn: float) -> bool:
        """Validation's relative noise `vn` against training's `tn` at the evaluations' cadence, two witnesses of one
        effect traded against each other: the swing's size down to `traded_share` of `min_noise` where its excess
        over training rises as much above `ratio` (noise × ratio ≥ `min_noise` × `ratio`); the ratio is never traded
        under `ratio` (healthy real runs move 18% at 2.1× a noisy training loss). Validation moving 4-7% between
        evaluations beside an epoch loss moving 1% or less (×5-×14: a model changing smoothly, a held-out set
        drawing its verdict from a few cases) changes the checkpoint a user keeps as much as 8% at ×3 does."""
        if not (np.isfinite(vn) and vn >= self.traded_share * self.min_noise):
            return False
        if tn <= 0:
            return vn >= self.min_noise
        r = vn / tn
        return r >= self.ratio and vn * r >= self.min_noise * self.ratio

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

    def _training_at(self, run: Run, vs: np.ndarray, role: str = "loss") -> tuple[str, np.ndarray, np.ndarray]:
        """The training loss at the evaluations' cadence: the training series with the point count nearest theirs,
        reduced to the median of its points in each interval between evaluations when it has more than
        `cadence_share` times as many."""
        names = run.candidates(role)["name"].to_list()
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


def _sparse(n: int) -> str:
    """Why validation is judged alone: the training loss logged too sparsely, or not at all."""
    return (f"the training loss has {n} points, too few to compare at that cadence" if n else
            "no training loss was logged to compare it with")


def _travel(v: np.ndarray) -> float:
    """How far the validation curve moves over the run: the range of its rolling median over a tenth of the
    points (at least 3), which evaluation noise does not widen."""
    smooth = stats.rolling_median(v, max(3, v.size // 10) | 1)
    return float(np.nanmax(smooth) - np.nanmin(smooth))


def _times(vn: float, tn: float) -> str:
    """The true ratio to three figures (`1.04×`, not a rounded `1.0×` beside a 1.0 threshold), or `while` when
    training does not move at all."""
    return f"{numbers.sig(vn / tn, 3)}×" if tn > 0 else "while"
