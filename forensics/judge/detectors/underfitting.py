"""underfitting: train and validation loss both stall high, close to each other."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar

import math
import re

import numpy as np
import polars as pl

from forensics.judge import stats
from forensics.judge.detectors.base import (LABEL_MAPS, SHAPE, class_count, finite_part, head_tail_of, held_out_score,
                                           level_of, point, pretrained_key, score_scale, src, too_short,
                                           unsplit_score)
from ingest.roles import words
from forensics.judge.detectors.oscillation import Oscillation
from forensics.judge.findings import Finding
from forensics.judge.run import Run


# A task metric that rises as the model learns (an accuracy, an F1, an AUC), by its name: the loss may be a poor
# surrogate of it, and a model whose metric climbs on train and evaluation data alike is learning, whatever the loss.
TASK_METRIC = re.compile(r"(?:^|[^a-z])(f1|acc|accuracy|auc)(?:$|[^a-z])", re.IGNORECASE)
EVAL_SPLITS = frozenset({"val", "test", "eval", "valid", "validation"})
# Scores whose usable level is no share of their scale (BLEU 18 of 100 can be a good translation, PSNR is in dB):
# never read as "low" against `low_score`.
UNBOUNDED_SCORES = frozenset({"bleu", "rouge", "psnr", "perplexity", "ppl"})


@dataclass(frozen=True)
class Underfitting:
    """Train and validation loss both stall high, close to each other.

    Detects: the training loss fell at least `min_drop` of its initial level and ends high: at
    least `min_level_log_c` × log C where the config names the class count, else `min_level` of its initial level
    (skipped for a fine-tune: `PRETRAINED_KEYS` or an HF `trainer_state.json`, with no class count); the validation
    loss ends within `max_gap` of it; neither still falls (the trend over the last `late` projects less than
    `max_progress` of its drop, or `noise_sigmas` noise sigmas); and both stalled early, within that band of their
    final level from `max_stall_start` of their steps on.
    Near chance (both at least `near_chance` × log C) the training curve's early stall is enough: a validation loss
    still creeping down counts while its late pace, kept for another run, leaves it above `min_level_log_c` × log C.
    A loss that never fell (no `min_drop` from its first points, no late trend beyond its noise) with validation
    beside it, also flat, is underfitting too: flat_loss says the loss did not move, this that validation agrees.
    An accuracy within `acc_band` of its final level since `acc_pinned_from` of the run replaces the stall gates.
    A fine-tune that names no class count has no reference for a high loss; its held-out score is one: never above
    `low_score` of its scale (mAP50 0.15) while the validation loss stopped improving (`_low_score_stall`).
    Under `min_train_points` (from `short_points`), no trend can be tested: the stall must show outright, the last
    half of both curves within `held_band` of their medians after the training loss fell (`_short_stall`).
    Away from chance, a training loss whose Theil–Sen trend from its stall start on still falls beyond `max_progress`
    of its drop and `trend_sigmas` of the trend's uncertainty (σ·√(12/n)) has not stalled there: a noise band
    wider than the fall, not a stall.
    The initial level is the first value on a sparse series (under `sparse_points`) or where the first logging
    interval holds `first_share` of the fall, else the median of the first `start_points` (`_initial`). Never while
    a task metric (`TASK_METRIC`: accuracy, F1, AUC) rises `metric_gain` on training and evaluation data alike (the
    loss is a poor surrogate), nor, away from chance and with no pinned accuracy, while validation sets a new best
    at most of its last `best_evals` evaluations (a sign test: still improving, at any pace).
    A training loss that turns non-finite is a run that died, not one that stalled; a stall whose validation loss
    bounces is oscillation's (`Oscillation.bouncing_weights`). Plateau reads the train curve alone; this one says
    validation agrees, so more capacity (not regularisation) is the lever.
    Why: the model cannot fit even the training data: too little capacity, LR too small, too much
    regularisation, too short training.
    Evidence: the reference (log C or initial loss) and its source, initial, final train and val levels,
    final train level as a fraction of the reference and of the initial, the train–val gap, the late
    progress of each curve, the fraction of each curve's steps before it reached its stall level.
    False alarms: 0 of the 69 healthy real runs it checks in the pool of 849 labelled real runs (25 label files;
    benchmarks/calibrate.py --pool); no field's healthy curve asked for a change (docs/engine.md). The low-score rule:
    0 of the 40 healthy shared runs and 0 of the 191 restored healthy runs (set12-set17).
    """

    kind: ClassVar[str] = "underfitting"
    reads_shape: ClassVar[bool] = True  # reads the epoch aggregate where one is logged (`base.epoch_view`)
    stage: ClassVar[int] = SHAPE
    requires: ClassVar[tuple[str, ...]] = ("loss", "val_loss")
    reads_loss_level: ClassVar[bool] = True  # not on a GAN's adversarial losses (base.adversarial_loss)
    # Healthy pool (849 labelled real runs, 69 healthy ones this detector checks; benchmarks/calibrate.py --pool):
    # no field swept alone makes it fire on more than 1 of them (docs/engine.md, underfitting); the figures below.
    min_level: float = 0.3  # from scratch: still 30% of the initial loss is high (0 healthy at 0.05-0.5; a false
    # claim at 0.05)
    min_drop: float = stats.LEARNED_FALL  # it learned something (less is flat_loss): the boundary stats.learned draws
    max_gap: float = 0.25  # validation within 25% of train: they agree (a larger gap is over- or mis-fitting);
    # 0 healthy at 0.1-1, the same hits from 0.1 to 0.5, 2 false claims at 1
    late: float = 0.3  # the last 30% of each curve is where "still falling" is read (0 healthy at 0.2-0.4; a hit
    # and 2 false claims more at 0.2, 2 false at 0.4)
    max_progress: float = 0.1  # falling less than 10% of its drop so far over that stretch: stalled
    min_level_log_c: float = 0.4  # the model removed less than 60% of a uniform guess's loss
    near_chance: float = 0.8  # both losses within a fifth of a uniform guess's: no better than chance
    max_stall_start: float = 0.5  # "most of the run at the stall level" (0 healthy at 0.3-0.6, 1 at 0.7; a false
    # claim from 0.6)
    min_train_points: int = 20  # a stall and a late trend need this many training points
    min_val_points: int = 4  # and this many evaluations
    noise_sigmas: float = 2.0  # late progress below this many noise sigmas is no progress (0 healthy at 1-5; a
    # hit lost at 1, a false claim from 3)
    max_smooth: int = 9  # the stall check's rolling median spans a tenth of the points, at most this many
    low_score: float = 0.2  # a fine-tune's held-out score (mAP, accuracy, F1) never above a fifth of its scale
    acc_band: float = 0.01  # an accuracy within one point of its final level ...
    acc_pinned_from: float = 0.1  # ... from a tenth of the run on: the predictions stopped changing
    start_points: int = stats.START_POINTS  # the initial level: the median of the first this many points
    fall_p: float = 0.01  # a late stretch trending down at Mann–Kendall p below this still falls ...
    min_pace: float = 0.02  # ... when another run at its pace would take 2% off its level: not stalled (0 healthy
    # at 0.01-0.03, 1 from 0.05)
    trend_points: int = 8  # the late stretch needs this many points for that test
    trend_sigmas: float = 2.0  # a stall's fall beyond this many sigmas of its trend's uncertainty is still falling
    # (0 healthy at 0.5-4, 1 at 8)
    sparse_points: int = 30  # under this many training points (per-epoch means), the first is the initial level ...
    first_share: float = 0.5  # ... as it is when the first logging interval holds half the fall or more
    best_evals: int = 5  # validation setting a new best at most of its last (up to) 5 evaluations ...
    min_best_evals: int = 3  # ... at least 3 of them: still improving, not stalled (a sign test)
    metric_gain: float = 0.1  # a task metric up 10 points on train and evaluation data alike: the model learns
    below_chance: float = 0.9  # a flat level under this share of ln C (C declared) is a learned one, not chance
    short_points: int = 5  # a log of 5 to `min_train_points` points (per-epoch means) has no trend to test, ...
    held_points: int = stats.HELD_POINTS  # ... but the last half of its training and validation points ...
    held_band: float = stats.HELD_BAND  # ... all within 2% of their medians after a fall show the stall outright
    oscillation: Oscillation = Oscillation()  # oscillation's bouncing weights, as this analysis sets them

    def unavailable(self, run: Run) -> str | None:
        short = too_short(run, "loss", self.min_train_points) or too_short(run, "val_loss", self.min_val_points)
        if short and next(iter(self.check(run)), None) is not None:
            return None  # a short log whose few points show the stall outright (`_short_stall`)
        if short or class_count(run) is not None:
            return short
        why = self._fine_tune(run)
        if why and self._low_score(run) is None:
            return (f"{why} and the config names no class count: the initial loss of a fine-tune is no reference "
                    "for 'high' (set num_classes or vocab_size in the run's config to check it against log C)")
        return None

    @staticmethod
    def _fine_tune(run: Run) -> str | None:
        """Why the run looks like a fine-tune of pretrained weights, or None."""
        key = pretrained_key(run)
        if key:
            return f"the config names pretrained weights ({key})"
        if run.format_of(run.pick("loss") or "") == "hf_trainer_state":
            return "the training loss comes from an HF trainer_state.json (the HF Trainer fine-tunes pretrained models)"
        return None

    def _low_score(self, run: Run) -> dict | None:
        """Evidence that the held-out score a user reads (`base.held_out_score`: a validation accuracy, mAP, F1,
        Dice) never rose above `low_score` of its scale (`base.score_scale`) over at least `min_val_points`
        evaluations, else None: a fine-tune that ends there is far from a usable model, whatever its first loss."""
        name = held_out_score(run) or unsplit_score(run)
        if name is None or set(words(name)) & UNBOUNDED_SCORES:
            return None
        steps, a = finite_part(*run.arrays(name))
        scale = score_scale(a)
        if a.size < self.min_val_points or float(np.max(a)) > self.low_score * scale:
            return None
        best = int(np.argmax(a))
        return {"score_series": name, "score_best": float(a[best]), "score_best_step": int(steps[best]),
                "score_last": float(a[-1]), "score_scale": scale}

    def _low_score_stall(self, run: Run, ts: np.ndarray, t: np.ndarray, vs: np.ndarray,
                         v: np.ndarray) -> Iterator[Finding]:
        """A fine-tune that names no class count, whose held-out score stays low (`_low_score`) while its validation
        loss has stopped improving: no new best at most of its last `best_evals` evaluations and a late fall within
        its allowance (`_late_progress`). The training loss may still creep down: the model it makes is unusable."""
        low = self._low_score(run)
        if low is None:
            return
        v_head = stats.start_level(v, self.start_points) if v.size >= 10 else float(v[0])
        v_end = stats.head_tail_levels(v, min_points=2)[1]
        v_fall, v_allow = self._late_progress(vs, v, max(v_head - v_end, 0.0))
        k = min(self.best_evals, v.size - 1)
        if k < self.min_best_evals or 2 * stats.new_bests(v, k) > k or v_fall > v_allow:
            return  # validation still improves: train longer before judging
        (_, t_first), (_, t_text) = head_tail_of(ts, t)
        v_text = head_tail_of(vs, v, min_points=2)[1][1]
        ev = {**low, "train_first": float(t[0]), "train_final": stats.head_tail_levels(t)[1], "val_final": v_end,
              "val_late_fall": v_fall, "val_allowance": v_allow, "val_new_bests": stats.new_bests(v, k),
              "val_recent_evals": k, "low_score": self.low_score}
        name = low["score_series"]
        steps, a = finite_part(*run.arrays(name))
        best_text = point(steps, a, int(np.argmax(a)))
        yield Finding.of(self, severity="warning", step=int(vs[0]), step_end=int(max(ts[-1], vs[-1])),
                         series=name, evidence=ev,
                         sources=(src(run, "loss", ts), src(run, "val_loss", vs), {"table": "scalars", "series": name}),
                         summary=(f"{name} never rises above {best_text} (under {self.low_score:.0%} of its scale) "
                                  f"while the validation loss has stopped improving at {v_text} (train {t_first} → "
                                  f"{t_text}): the fine-tuned model stays far from usable"))

    def _pinned_accuracy(self, run: Run) -> dict | None:
        """Evidence that an accuracy series (train or validation, not zero throughout) has stayed within
        `acc_band` of its final level (a fraction, or percentage points on a 0-100 scale) from `acc_pinned_from`
        of its steps on, over at least `min_val_points` points, else None."""
        for name in run.all_of("accuracy") + run.all_of("val_accuracy"):
            steps, a = finite_part(*run.arrays(name))
            if a.size < self.min_val_points or not np.any(a != 0):
                continue
            band = self.acc_band * (100.0 if float(np.max(np.abs(a))) > 1.5 else 1.0)
            end = float(np.median(a[-3:]))
            out = np.flatnonzero(np.abs(a - end) > band)
            i = int(out[-1]) + 1 if out.size else 0
            since = float((steps[min(i, a.size - 1)] - steps[0]) / max(steps[-1] - steps[0], 1))
            if i < a.size and since <= self.acc_pinned_from:
                return {"accuracy_series": name, "accuracy_level": end, "accuracy_since": since,
                        "accuracy_band": band}
        return None

    def _initial(self, ts: np.ndarray, t: np.ndarray) -> tuple[float, str]:
        """The training loss's initial level and how the file shows it: its first value on a sparse series (under
        `sparse_points`: each point a mean already) or where the first logging interval holds `first_share` of the
        whole fall (the median of the first few would start the curve after most of its fall), else the median of
        the first `start_points`."""
        first, end = float(t[0]), stats.head_tail_levels(t)[1]
        if t.size < self.sparse_points or (t.size > 1 and first - float(t[1]) >= self.first_share * (first - end) > 0):
            return first, point(ts, t, 0)
        return level_of(ts, t, 0, self.start_points - 1)

    def _metric_learns(self, run: Run) -> dict | None:
        """{series: gain} when a task metric (`TASK_METRIC`, by name) rises `metric_gain` from its first value to the
        median of its last three (in points on a 0-100 scale) both in a training series and in an evaluation one
        (`EVAL_SPLITS`), else None: a model that gets better at its task on both sets is no underfit model."""
        gains: dict[str, float] = {}
        for row in run.meta.filter(pl.col("role").is_in(["accuracy", "val_accuracy", "other"])).iter_rows(named=True):
            if not TASK_METRIC.search(row["name"]):
                continue
            _, a = finite_part(*run.arrays(row["name"]))
            if a.size < self.min_val_points:
                continue
            scale = 100.0 if float(np.max(np.abs(a))) > 1.5 else 1.0
            gains[row["name"]] = (float(np.median(a[-3:])) - float(a[0])) / scale
        evaluated = {n for n in gains if n in set(run.all_of("val_accuracy")) or _eval_split(run, n)}
        train = [g for n, g in gains.items() if n not in evaluated]
        held_out = [g for n, g in gains.items() if n in evaluated]
        if train and held_out and max(train) >= self.metric_gain and max(held_out) >= self.metric_gain:
            return gains
        return None

    def _stall_start(self, steps: np.ndarray, y: np.ndarray, end: float, band: float) -> float:
        """Fraction of the curve's step span before its smoothed values stay within `band` of `end` for good."""
        smooth = stats.rolling_median(y, max(1, min(self.max_smooth, y.size // 10)) | 1)
        out = np.flatnonzero(smooth > end + band)
        if out.size == 0:
            return 0.0
        i = min(out[-1] + 1, y.size - 1)
        return float((steps[i] - steps[0]) / max(steps[-1] - steps[0], 1))

    def _falls_through(self, steps: np.ndarray, y: np.ndarray, start: float, drop: float) -> bool:
        """Whether the curve keeps falling from `start` (a fraction of its step span) to the end: its Theil–Sen trend
        there projects a fall beyond `max_progress` of its drop and beyond `trend_sigmas` of the trend's own
        uncertainty over those points (a line fitted to n points of noise σ moves σ·√(12/n) across them)."""
        keep = steps >= steps[0] + start * (steps[-1] - steps[0])
        if keep.sum() < 3:
            return False
        slope, _ = stats.theil_sen(steps[keep], y[keep])
        fall = -slope * (steps[keep][-1] - steps[keep][0])
        sigma = float(np.nan_to_num(stats.noise(y)))
        return bool(fall > max(self.max_progress * drop, self.trend_sigmas * sigma * np.sqrt(12 / keep.sum())))

    def _late_progress(self, steps: np.ndarray, y: np.ndarray, drop: float) -> tuple[float, float]:
        """(fall projected by the Theil–Sen trend over the last `late` of the steps, the allowance it is compared
        to: `max_progress` of the curve's own drop so far, or two noise sigmas, whichever is larger)."""
        late = steps >= steps[0] + (1 - self.late) * (steps[-1] - steps[0])
        if late.sum() < 3:
            late[-3:] = True
        slope, _ = stats.theil_sen(steps[late], y[late])
        noise = stats.noise(y)
        allowance = max(self.max_progress * drop, self.noise_sigmas * np.nan_to_num(noise))
        return -slope * (steps[late][-1] - steps[late][0]), allowance

    def _still_falling(self, steps: np.ndarray, y: np.ndarray, end: float) -> float | None:
        """The share of `end` the curve would lose over another run of its length at its late pace (Theil–Sen over
        the last `late` of the steps), when that stretch falls beyond its noise (Mann–Kendall p < `fall_p`) by at
        least `min_pace`; else None."""
        late = steps >= steps[0] + (1 - self.late) * (steps[-1] - steps[0])
        if late.sum() < self.trend_points or not end > 0:
            return None
        trend = stats.mann_kendall(y[late], steps[late])
        slope, _ = stats.theil_sen(steps[late], y[late])
        pace = -slope * (steps[-1] - steps[0]) / end
        return float(pace) if trend.z < 0 and trend.p < self.fall_p and pace >= self.min_pace else None

    def _never_fell(self, run: Run, ts: np.ndarray, t: np.ndarray, vs: np.ndarray, v: np.ndarray,
                    gap: float) -> Iterator[Finding]:
        """Train and validation together at the level they started from: neither learned from its first points
        (`stats.learned`), neither trends down beyond its noise late, and validation agrees with train (the
        caller's gap check). A from-scratch run only (a fine-tune's first loss is no reference for "high"), below a
        uniform guess's loss where the class count is known (at it, nothing trains: flat_loss's), and not an exact
        constant (flat_loss's empty loss, not a model that cannot fit)."""
        tail = stats.head_tail_levels(t)[1]
        rise, z = stats.fall_from_start(t, tail)  # negative when it rose
        if np.unique(t).size < 3 or stats.learned(t, tail) or not (rise > -self.min_drop or z > -stats.LEARNED_SIGMAS):
            return  # an exact constant (flat_loss's empty loss), a fall (learned), or a rise beyond its noise
        found = class_count(run)
        if self._fine_tune(run) is not None and found is None:
            return
        if found is not None and tail < self.min_level_log_c * math.log(found[0]):
            return  # low against a uniform guess from the first log on: it learned before the log began
        if found is not None and tail >= self.near_chance * math.log(found[0]):
            return  # at a uniform guess's loss: nothing was learned at all (no backward, all frozen): flat_loss's
        if v.size >= 3 and stats.learned(v, stats.head_tail_levels(v, min_points=2)[1]):
            return
        t_fall, t_allow = self._late_progress(ts, t, 0.0)
        v_fall, v_allow = self._late_progress(vs, v, 0.0)
        if t_fall > t_allow or v_fall > v_allow:
            return
        (_, t_first), (_, t_text) = head_tail_of(ts, t)
        (_, v_first), (_, v_text) = head_tail_of(vs, v, min_points=2)
        ev = {"never_fell": True, "train_final": stats.head_tail_levels(t)[1],
              "val_final": stats.head_tail_levels(v, min_points=2)[1], "train_val_gap": gap,
              "train_late_fall": t_fall, "val_late_fall": v_fall, "train_points": int(t.size),
              "val_points": int(v.size)}
        yield Finding.of(self, severity="warning", step=int(min(ts[0], vs[0])), step_end=int(max(ts[-1], vs[-1])),
                         series=run.pick("val_loss"), evidence=ev,
                         sources=(src(run, "loss", ts), src(run, "val_loss", vs)),
                         summary=(f"train and validation loss sit together where they started: train {t_first} → "
                                  f"{t_text}, validation {v_first} → {v_text} ({gap:+.0%} from train), neither "
                                  f"falling beyond its noise over steps {min(ts[0], vs[0])}-{max(ts[-1], vs[-1])}: "
                                  f"the model fits the training data no better than the validation data, and "
                                  f"neither better than at its first log"))

    def _short_stall(self, run: Run, ts: np.ndarray, t: np.ndarray, vs: np.ndarray, v: np.ndarray) -> Finding | None:
        """A log too short for the trend tests (`short_points` to `min_train_points` training points): the training
        loss fell `min_drop` from its first value (a per-epoch mean), then the last half of its points (`held_points`
        at least) and of the validation loss's all lie within `held_band` of their medians, within `max_gap` of each other and high
        (`min_level_log_c` × ln C where the config names C, else `min_level` of the first value; not for a
        fine-tune that names no C): a stall the few points show outright, with validation agreeing. Else None."""
        if not self.short_points <= t.size < self.min_train_points or v.size < self.held_points:
            return None
        (t_end, t_spread, k), (v_end, v_spread, kv) = (stats.held_tail(x, self.held_points) for x in (t, v))
        head, held = float(t[0]), max(t_spread, v_spread)
        if t.size <= k or not (head > 0 and t_end > 0 and v_end > 0) or head - t_end < self.min_drop * head:
            return None  # no fall from its first value: flat_loss's, if anything
        gap = (v_end - t_end) / t_end
        if held > self.held_band or abs(gap) > self.max_gap:
            return None
        found = class_count(run)
        if found is not None:
            reference, min_level, ref_text = math.log(found[0]), self.min_level_log_c, f"ln {found[0]}"
        elif self._fine_tune(run) is None:
            reference, min_level, ref_text = head, self.min_level, "first value"
        else:
            return None
        if t_end / reference < min_level:
            return None
        ev = {"reference": reference, "reference_source": ref_text, "fraction_of_reference": t_end / reference,
              "initial_level": head, "train_final": t_end, "val_final": v_end, "train_val_gap": gap,
              "held_points": k, "held_spread": held, "train_points": int(t.size), "val_points": int(v.size),
              "short_log": True}
        t_text, v_text = level_of(ts, t, t.size - k, t.size - 1)[1], level_of(vs, v, v.size - kv, v.size - 1)[1]
        return Finding.of(self, severity="warning", step=int(ts[-k]), step_end=int(max(ts[-1], vs[-1])),
                          series=run.pick("val_loss"), evidence=ev,
                          sources=(src(run, "loss", ts), src(run, "val_loss", vs)),
                          summary=(f"train and validation loss stall high together: train falls from {head:.4g} to "
                                   f"{t_text} ({t_end / reference:.0%} of its {ref_text}), validation {v_text} "
                                   f"({gap:+.0%} from train), both within {held:.1%} of those levels over their last "
                                   f"{k} and {kv} points"))

    def restates(self, finding: Finding, findings: Sequence[Finding]) -> bool:
        """Training and validation losses that sit where they started (`never_fell`) beside a training loss that
        never moved (flat_loss) are flat_loss's observation told twice, unless the flat level lies well below the
        chance level the run declares: a classifier that learned what it could before its first record and then
        stood still also underfits, a second fact."""
        def learned(f: Finding) -> bool:
            chance, level = f.evidence.get("log_classes"), f.evidence.get("last_level")
            return chance is not None and level is not None and level < self.below_chance * chance

        flat = [f for f in findings if f.kind == "flat_loss" and not f.evidence.get("training_loss_missing")]
        return bool(finding.evidence.get("never_fell")) and bool(flat) and not any(learned(f) for f in flat)

    def check(self, run: Run) -> Iterator[Finding]:
        all_steps, all_values = run.arrays("loss")
        ts, t = finite_part(all_steps, all_values)
        if ts.size < all_steps.size:
            return  # the run died (nan_loss): the level it held before is no verdict on its capacity
        vs, v = finite_part(*run.arrays("val_loss"))
        if v.size < self.min_val_points:
            return
        if t.size < self.min_train_points:
            short = self._short_stall(run, ts, t, vs, v)
            if short is not None and self._metric_learns(run) is None:
                yield short
            return
        if self._metric_learns(run) is not None:
            return  # the loss is a poor surrogate: the task metric climbs on both sets
        head, head_text = self._initial(ts, t)
        t_end, v_end = stats.head_tail_levels(t)[1], stats.head_tail_levels(v, min_points=2)[1]
        if not (head > 0 and t_end > 0 and v_end > 0):
            return
        found = class_count(run)
        if found is None and self._fine_tune(run) is not None:
            yield from self._low_score_stall(run, ts, t, vs, v)  # no reference for a high loss: the score is one
            return
        fraction, gap = t_end / head, (v_end - t_end) / t_end
        if abs(gap) > self.max_gap:
            return
        if fraction > 1 - self.min_drop:
            yield from self._never_fell(run, ts, t, vs, v, gap)
            return
        if found is not None:
            reference, source, min_level = math.log(found[0]), (f"log({found[1]} = {found[0]})" if found[1] not in LABEL_MAPS
                                                        else f"log({found[0]} labels)"), self.min_level_log_c
        else:
            reference, source, min_level = head, "initial loss", self.min_level
        if t_end / reference < min_level:
            return
        v_head = stats.start_level(v, self.start_points) if v.size >= 10 else float(v[0])
        t_fall, t_allow = self._late_progress(ts, t, head - t_end)
        v_fall, v_allow = self._late_progress(vs, v, max(v_head - v_end, 0.0))
        # Near chance, a validation loss that still creeps down is stuck too while its late pace, kept for
        # another run's length, would leave it high (dropout 0.9: 1.59 -> 1.49 at log(5) = 1.61).
        chance = found is not None and min(t_end, v_end) >= self.near_chance * reference
        v_projected = v_end - v_fall / self.late
        pinned = self._pinned_accuracy(run)
        k = min(self.best_evals, v.size - 1)
        if pinned is None and not chance and k >= self.min_best_evals and 2 * stats.new_bests(v, k) > k:
            return  # away from chance, validation still setting new bests is no stall, at any pace
        if pinned is None and (t_fall > t_allow or not (v_fall <= v_allow or (chance and v_projected >= min_level * reference))):
            return  # still learning: train longer first
        # A loss still falling beyond its noise is not stalled, however small its late fall beside its early drop
        # (a language model's long tail); near chance only while another run at its pace would leave it high.
        t_pace, v_pace = self._still_falling(ts, t, t_end), self._still_falling(vs, v, v_end)
        if pinned is None and any(pace is not None and not (chance and end * (1 - pace) >= min_level * reference)
                                  for pace, end in ((t_pace, t_end), (v_pace, v_end))):
            return
        t_start = self._stall_start(ts, t, t_end, t_allow)
        v_start = self._stall_start(vs, v, v_end, v_allow)
        if pinned is None and (t_start > self.max_stall_start or (v_start > self.max_stall_start and not chance)):
            return  # converged slowly over the whole run: not stuck early at a high level
        if pinned is None and not chance and self._falls_through(ts, t, t_start, head - t_end):
            return  # the "stall" is the noise band of a loss still falling through it: not stalled
        if any(f.evidence.get("rule") == "bouncing_weights" for f in self.oscillation.check(run)):
            return  # the weights bounce around the level: oscillation's finding, the LR is the lever
        ev = {"reference": reference, "reference_source": source, "fraction_of_reference": t_end / reference,
              "train_stall_start": t_start, "val_stall_start": v_start, "initial_level": head, "train_final": t_end,
              "val_final": v_end, "fraction_of_initial": fraction, "near_chance": chance,
              "val_projected_one_more_run": v_projected,
              "val_fraction_of_initial": v_end / head, "train_val_gap": gap, "train_late_fall": t_fall,
              "val_late_fall": v_fall, "train_late_pace": t_pace, "val_late_pace": v_pace, "val_points": int(v.size)}
        # the levels as the file shows them: the medians of the last tenth, with their steps
        t_text, v_text = head_tail_of(ts, t)[1][1], head_tail_of(vs, v, min_points=2)[1][1]
        ref_text = (f"{source} {reference:.4g}" if found is not None else
                    f"initial {head_text}")
        if pinned is not None:
            ev.update(pinned)
            yield Finding.of(self, severity="warning", step=int(vs[0]), step_end=int(max(ts[-1], vs[-1])),
                             series=run.pick("val_loss"), evidence=ev,
                             sources=(src(run, "loss", ts), src(run, "val_loss", vs),
                                      {"table": "scalars", "series": pinned["accuracy_series"]}),
                             summary=(f"train and validation loss stay high together: train {t_text} "
                                      f"({t_end / reference:.0%} of the {ref_text}), validation "
                                      f"{v_text} ({gap:+.0%} from train), while {pinned['accuracy_series']} has "
                                      f"stayed at {pinned['accuracy_level']:.4g} since {pinned['accuracy_since']:.0%} "
                                      f"of the run: the loss creeps down, the predictions do not change"))
            return
        yield Finding.of(self, severity="warning", step=int(vs[0]), step_end=int(max(ts[-1], vs[-1])),
                         series=run.pick("val_loss"), evidence=ev,
                         sources=(src(run, "loss", ts), src(run, "val_loss", vs)),
                         summary=(f"train and validation loss both stall high: train {t_text} "
                                  f"({t_end / reference:.0%} of the {ref_text}), validation {v_text} "
                                  f"({gap:+.0%} from train), " + (
                                      f"at that level from {max(t_start, v_start):.0%} of the run"
                                      if max(t_start, v_start) <= self.max_stall_start else
                                      f"train at that level from {t_start:.0%} of the run; validation falls "
                                      f"{v_fall:.3g} late, so another run at that pace leaves it at {v_projected:.4g}")))


def _eval_split(run: Run, name: str) -> bool:
    """Whether the series holds evaluation data: its split, or the first word of its name (`test f1`, `val_acc`)."""
    row = run.meta.filter(pl.col("name") == name)
    split = row["split"][0] if row.height else None
    first = re.split(r"[^a-z]+", name.lower().strip())[0]
    return (split or "") in EVAL_SPLITS or first in EVAL_SPLITS
