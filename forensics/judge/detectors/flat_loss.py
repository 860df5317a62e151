"""flat_loss: the loss does not move from the start."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from forensics.judge import stats
from forensics.judge.detectors.base import (EPISODE_WORDS, SHAPE, by_launch, class_count, critic_grows, epoch_view, finite_part, head_tail_of,
                                            loss_is_perplexity, opens_late, reinforcement_learning, reward_series, rl_reason, src,
                                            steps_open_late, too_short)
from forensics.judge.findings import Finding
from forensics.judge.run import Run
from ingest.roles import AGGREGATE_WORDS, SCORE_WORDS, SETTING_WORDS, SPLIT_WORDS, role_of, words

# A held-out score by its name (an accuracy, AUC, F1, mAP: `ingest.roles.SCORE_WORDS`), with the accuracy's short
# form some scripts print (`valid_ac`): what `_score_frozen` reads.
FROZEN_SCORE_WORDS = SCORE_WORDS | {"ac"}


@dataclass(frozen=True)
class FlatLoss:
    """The loss does not move from the start, within its noise. Each finding says which: an empty or replaced loss,
    pinned at chance (ln C and C), or not moving beyond its noise (across the LR schedule where one is logged).

    Detects: effect size first, at any length. A training loss exactly one value on `constant_points` points or more (a
    round one, under `min_digits` digits, only beside a term or score pinned on the same records: `pinned_beside`), or
    exactly 0 on `pinned_share` of them to the end, never above `zero_ceiling` or entered in one record from
    `zero_jump` or more, is an empty or replaced loss (a warning when
    validation falls; masked_nonfinite's beside a non-finite grad norm). At chance from the start (`_chance_start`):
    first and last levels within `chance_band` of ln C, C declared by the config (`base.class_count`), named by an
    accuracy at 1/C, or matched by every printed value (`4.600` is ln 100 to the printer's rounding), over
    `min_points` points, `chance_epochs` epochs or one value throughout. Pinned: the last `min_repeats` points and
    `pinned_share` of all one non-zero value of `min_digits` significant digits or more, not fallen to from its first
    value (`stats.learned`: fell, then froze, is plateau's, `fell_then_froze`, DECISIONS §17). At chance at the end: the
    last `min_repeats` points within `chance_rel_tol` of ln k (`stats.chance_level`), never `chance_floor` below.
    At chance over most of the run, whatever the first window (`_chance_most`): window means near ln C.
    Within its noise, from `min_points` on: the last `edge`'s median within `rel_tol` of the first's and the smoothed
    curve never `rel_tol` below it, or its last third's median within `still_tol` of its first third's (`still_edge`:
    a tenth's median of a per-step loss is as noisy as the band) with no trend (Mann–Kendall p ≥ `still_p`) or, whatever
    the trend test says, a fall under `rel_tol` (`small_fall`, a warning: on many points a 1% drift is significant). Under
    `min_points`, from `schedule_points`: every point within `still_tol` of the first while the LR runs its schedule
    out (to `schedule_end` of its peak), from `constant_points` every point within `held_tol` of the first in a log
    that shows the run's start (`_held_short`, a warning), or, over `chance_epochs` epochs, a loss that ends no lower and an accuracy
    no higher than they began (a warning). When the training loss does not fall by `max_train_drop`, a validation
    loss flat or pinned by the same rules is the evidence (flat under a falling training loss: distribution_mismatch).
    At any length too: a loss within `identical_tol` of its median on every one of `constant_points` records or more
    (identical to its fifth digit: as constant as one value repeated); training and validation loss both exactly 0
    on every record, no accuracy at `accuracy_fit` beside them (`_zero_both`); every one of `min_points` points
    within `ln2_band` of ln 2, in an excerpt too, no other class count declared (`_at_ln2`). A validation loss of
    `schedule_points` evaluations spanning under `val_still_tol` of its level beside a standing training loss. A level held within
    its noise over an excerpt whose step axis opens well into training (`base.steps_open_late`) is plateau's
    (`held_excerpt`): the fall before it is not in the log. From `min_points` on, a loss whose LR schedule runs out
    (`schedule_end`) with the thirds' medians within `still_tol` and no trend,
    however wide its noise (`_still_over_schedule`; a warning when the noise cannot resolve `still_tol`). Every
    held-out score exactly 0 at each of `zero_score_evals` evaluations beside a loss within `still_tol` of its first
    value (`_scores_zero`, a warning): the model finds nothing, at any length.
    A term of the loss one value to the last digit on every record beside a gradient norm exactly 0 (`_no_gradient`):
    no gradient reaches the parameters, at any length. A held-out score (accuracy, AUC) one value of `min_digits`
    significant digits on every one of `frozen_score_evals` evaluations while the training loss moves (`_score_frozen`,
    a warning): the model's answers never change, at any length. Where the writer logged an epoch aggregate beside per-step
    losses, the shape is the epoch means' (`base.epoch_view`): per-step values carry the batch order.
    Not flat (`_stayed`): a loss that fell at once from its first point or learned (`stats.learned`: plateau's, also
    when it fell onto ln k, DECISIONS §17), whose smoothed curve left its start by `excursion` and came back, or fell
    `learned_fall` below its first value by `fell_sigmas` noise sigmas (`_fell_from_first`: a smooth fall over the
    first records, then a creep back; the training loss then stands no more for its validation loss), or whose noise
    cannot resolve `still_tol` (`resolve_sigmas`); nor one whose LR still warms up, an excerpt from a
    decayed schedule's end, a loss still while the gradient norm grows `exploding_growth` ×, one that rose to its pin
    from half of it, or a later launch that resumes below where the log began.
    In a reinforcement-learning run only its reward speaks (`_reward_still`): one value on `reward_share` of its
    records and of its last third (the agent is scored alike whatever it does; its losses are never judged here), or,
    in a log that holds its start, a reward that ends no higher than it began with no upward trend (`_reward_stands`),
    unless the agent got worse (`_reward_lost`: a reward on a falling trend, or one that learned and gave it back, is
    divergence's, never "not learning").
    Why: nothing is being learned: backward or optimizer.step not running, frozen parameters, LR ≈ 0.
    Evidence: first and last levels, relative change, smoothed minimum, Theil–Sen slope, Mann–Kendall p, ln C, C and
    where C came from, the median LR when an LR series exists.
    False alarms: 0 of the 228 healthy runs of the 849-run pool it could check. 0 of the 136 healthy real runs of the eleven labelled development sets (benchmarks/false_alarms.py;
    4 on 2 of them before the noise, excursion and launch guards); 0 of the 521 healthy generated runs before them.
    The frozen term and the epoch means: 0 of the 179 healthy runs of the fifteen labelled sets. At chance over most
    of the run (`_chance_most`): 0 of the 252 healthy runs of the nineteen label files.
    A round loss beside a pinned term or score (`pinned_beside`): 0 of the 40 healthy runs of the three shared sets
    and 0 of the 191 healthy restored runs (set12-set17); 0 new claims on the 171 unlabelled wild runs.
    A short log held within 1% (`_held_short`): max |y - y0| / |y0| on the 154 healthy runs with a loss (set8-10, the
    three shared sets): lowest 0.19% (a 4-point excerpt, `unseen_start` keeps it), then 1.7%, 2.3%, 3.8%; 0 claims.
    Within-noise rules are silent on an excerpt from well into training, LR logged or not (`unseen_start`; on a
    validation loss beside a standing training loss too: the run's start is not in the log), and a
    range-flat loss moving at nearly every record (`_steady`) is a warning.
    The thirds' medians (`still_edge`), on the 214 healthy runs of set8-11 and the three shared sets: of the 19 whose
    loss (10+ points) shows no trend, the change is 0%, 0.02%, 4.8% on three that allow flat_loss, 1.9% on one the
    fall-at-once guard keeps, then 6.4%, 6.8%, 7.3%, 7.4%, 10%: 0 claims. An RL reward (`_reward_still`): 0 claims.
    A fall under 3% whatever its trend (`small_fall`), on the 174 healthy runs of set8-11 and the shared sets: the
    thirds fall under 3% with no guard on 3, all already claimed and allowing flat_loss (0.0%, 0.27% twice); 0 new.
    The smooth fall from the first value (`_fell_from_first`) only removes claims: on the 259 runs of the shared sets
    and set12-15 labelled healthy, flat or plateau, one (a false critical); `fell_sigmas` 5 or 3 also a flat launch's.
    Validation frozen beside scattering batches and an agent judged by its reward alone (2 Dec 2026): 0 of the 40
    healthy shared runs, 0 new claims on the 168 healthy restored runs of set12-13 and set16-19 (consensus labels).
    A reward that got worse is no stall (`_reward_lost`): only removes claims (3 false ones on the 285 restored runs
    of set12-13, 16-19 and 21-22, all three labelled divergence or allowing it).
    """

    kind: ClassVar[str] = "flat_loss"
    stage: ClassVar[int] = SHAPE
    reads_curve: ClassVar[bool] = True  # judges the shape of the training-loss curve
    reads_shape: ClassVar[bool] = True  # reads the epoch aggregate where one is logged (`base.epoch_view`)
    # the training loss; without one, a validation loss judged as validation (`_validation_alone`)
    requires: ClassVar[tuple[str, ...]] = ()
    reads_validation_alone: ClassVar[bool] = True
    reads_loss_level: ClassVar[bool] = True  # not on a GAN's adversarial losses (base.adversarial_loss)
    judges_rl: ClassVar[bool] = True  # in an RL run, only a reward that never moves (`_reward_still`)
    rel_tol: float = 0.03  # a 3% move over a whole run is below what a user calls learning (healthy pool: 0 of 228
    # at 0.02 and 0.03; 0.04 a warning on 1, 0.05 a critical on it)
    edge: float = 0.1  # first/last fraction of the points whose medians are compared
    smooth: float = 0.1  # rolling-median window for the "never fell" check, as a fraction of the points
    min_points: int = 10  # fewer points cannot tell a flat curve from a short one (healthy pool: 0 of 228 at 10 and
    # 12; 7, 8 and 9 a critical on 1)
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
    still_edge: float = 1 / 3  # ... where it began and ends: the medians of its first and last third (a tenth's median
    # of a per-step loss scattering ±13% misses by 5% on its own)
    # (healthy pool: 0 of 228 from 0.03 to 0.07; 0.1 criticals on 2)
    exploding_growth: float = 10.0  # a loss that sits still while the gradient norm grows ×10 is exploding_gradients'
    schedule_points: int = 5  # under `min_points`, a loss this long that stays within `still_tol` of its first ...
    schedule_end: float = 0.25  # ... while the LR falls to a quarter of its peak (a schedule run out) never moved
    resolve_sigmas: float = 1.0  # "within its noise" only where this many standard errors of the start-to-end
    # change fit inside `still_tol` of the level: a loss whose batches scatter ±30% cannot be told flat in 10 points
    # (healthy pool: 0 of 228 checked from 0.75 to 2.0; 0.5 a critical on 1)
    excursion: float = 0.2  # a smoothed curve that left its start by this share and came back moved in between
    # ... or fell `learned_fall` below its first value by this many noise sigmas (a smooth fall over the first tenth of
    # the records, then a creep back: it moved; 0 of the 168 healthy runs of the shared sets and set12-15 affected)
    fell_sigmas: float = 10.0
    chance_band: float = 0.03  # from the start: its first and last levels within this share of ln C ...
    chance_epochs: int = 3  # ... over `min_points` points, this many epochs, or one printed value throughout
    accuracy_tol: float = 0.1  # an accuracy whose median is within this share of 1/C says C (0.5 for ln 2)
    chance_windows: int = 10  # over most of the run: window means (this many windows) ...
    chance_from: float = 0.2  # ... from this share of the run on ...
    window_band: float = 0.02  # ... each no more than 2% of ln C below it (or two standard errors of the mean) ...
    chance_above: float = 0.1  # ... and no more than 10% above it: no better than a uniform guess
    binary_points: int = 20  # without a declared C or an accuracy, ln 2 (a binary or pairwise loss) from 20 points
    zero_ceiling: float = 1e-4  # a loss exactly 0 on most points and never above this was never a signal ...
    steady_tau: float = 0.9  # a range-flat loss moving at nearly every record (|Kendall τ| ≥ 0.9) is a warning
    zero_jump: float = 1e-2  # ... nor one that fell to exactly 0 in one record from this or more and stayed there
    val_still_tol: float = 1e-3  # a validation loss of 5-9 evaluations spanning less than this share of its level
    # beside a standing training loss (pool of 978: no healthy run under 2e-3; 7 labelled flat under 1e-3)
    ln2_band: float = 0.01  # every point within 1% of ln 2 (pool of 978: no healthy run's loss within 3% on 8+ points)
    accuracy_fit: float = 0.9  # a loss exactly 0 in both splits beside an accuracy this high may be a model that fits
    identical_tol: float = 1e-4  # every record within this share of the median is as constant as one value repeated
    # (pool of 978: no healthy run's loss within 1e-3 on 3+ points; the flat ones within 1e-4 are all labelled flat)
    held_tol: float = 0.01  # a log of 3-9 points from its start, every one within 1% of the first: never moved
    # (154 healthy runs with a loss: the closest short log from its start moves 2.3% (7 points); an excerpt, 0.2%)
    reward_share: float = 0.75  # an RL reward one value on 3/4 of its records, and of its last third, never moved
    reward_min_points: int = 10  # an RL reward that does not improve: from 10 records, ...
    reward_many: int = 1000  # ... or, over this many episodes or more, where any drift is "significant", a last-third
    # median above the first's by under `reward_gain_iqr` of the first third's interquartile range: the spread of one
    # policy's episodes dwarfs what it gained
    reward_gain_iqr: float = 0.05
    reward_fall_z: float = 3.0  # a reward on a falling trend this strong (Mann–Kendall z −3) ... (`_reward_lost`)
    reward_peak_iqr: float = 2.0  # ... or whose best tenth stood 2 first-third IQRs above that third's upper quartile
    reward_given_back: float = 0.5  # ... and gave back half its gain: the agent got worse, it did not stand still
    reward_rise_z: float = 1.0  # ... no upward trend (Mann–Kendall z under 1: a rise no test would call one) and
    # its last third's median no higher than its first third's: on the pool's 19 RL runs the healthy ones rise at
    # z 2.2 and more, the one that stands is labelled flat (docs/engine.md)
    # (the 8 healthy RL runs of 10+ rewards in set8-11: the most frequent value's share at most 0.13)
    frozen_records: int = 5  # a tail identical to its fifth digit over this many records after a fall (pool of 978:
    # healthy runs at 3 and 4 with no fall to a plateau allowed, none at 5 that plateau is not allowed on)
    frozen_score_evals: int = 5  # a held-out score one value to its last digit on every one of 5+ evaluations while
    # the training loss moves (`_score_frozen`; healthy pool: 0 of the 104 with such a score; one at 4 evaluations)
    # A loss of `min_points`+ over an LR schedule run out (`schedule_end`), thirds within `still_tol`, no trend, whatever
    # its noise resolves (`_still_over_schedule`; healthy pool: 0 of the 77 with 10+ points and a spent schedule)
    zero_score_evals: int = 3  # every held-out score exactly 0 at each of 3+ evaluations, the loss within `still_tol`
    # of its first value (`_scores_zero`; healthy pool: 0 of the 130 with a held-out score; one at 2 evaluations)
    held_intervals: float = 20.0  # a held level is plateau's where the step axis opens more than this many logging
    # intervals in: an axis composed from 1-based epochs (`[1][50/500]`) opens one epoch in, 10 intervals at 50 a line

    def unavailable(self, run: Run) -> str | None:
        rl = reinforcement_learning(run)
        if rl is not None:
            return None if self._reward_verdict(run) is not None else rl_reason(rl)
        run = epoch_view(run)  # the epoch means' shape where the writer logged them beside per-step values
        if not run.has("loss"):
            return None if self._validation_alone(run) is not None else run.missing_message("loss")
        # Under `min_points` only the rules that need no trend can speak (pinned, constant, at chance, a schedule
        # run out, a validation loss pinned beside a standing training loss): the detector counts as run (for
        # the verdict and `-v`) only when one does, so a short log that shows none stays "too short".
        short = too_short(run, "loss", self.min_points)
        if short and next(iter(self.check(run)), None) is None:
            return short
        return None

    def _reward_verdict(self, run: Run) -> Finding | None:
        still = self._reward_still(run)
        if still is not None:
            return still
        rl = reinforcement_learning(run)
        if rl is not None and critic_grows(run, rl) is not None:
            return None  # a reward that stands beside a critic that grows is divergence's (`_critic_diverges`)
        return self._reward_stands(run)

    def _reward_course(self, run: Run) -> dict | None:
        """The reward an RL run logs (`base.reward_series`), as the reward rules read it: in a log that holds its start,
        the last launch of a log that appends several, `reward_min_points` records or more of two values or more; its
        name, steps and values, its thirds' medians, its first third's quartiles and its Mann–Kendall trend. None
        otherwise (rewards alone on line numbers, an excerpt from well into training)."""
        name = reward_series(run)
        if name is None:
            return None
        steps, r = finite_part(*run.arrays(name))
        starts = run.launch_starts(name)
        if starts:  # launches appended to one log: the last one is the agent the log ends on
            cut = int(np.searchsorted(steps, starts[-1]))
            steps, r = steps[cut:], r[cut:]
        ordinal = run.on_line_axis(name)
        if ordinal and not run.has("loss") and not self._one_pass_of_episodes(run):
            return None  # rewards alone on line numbers: without a counter that never goes back, launches hide
        if r.size < self.reward_min_points or np.unique(r).size < 2 \
                or not ordinal and steps[-1] > 0 and steps[0] > 0.1 * steps[-1]:
            return None  # a reward of one value is `_reward_still`'s; an excerpt from well into training is no run
        k = r.size // 3
        q1, q3 = np.percentile(r[:k], [25, 75])
        return {"name": name, "steps": steps, "r": r, "first": float(np.median(r[:k])),
                "last": float(np.median(r[-k:])), "q1": float(q1), "q3": float(q3),
                "trend": stats.mann_kendall(r, steps)}

    def _reward_lost(self, run: Run) -> dict | None:
        """Whether the agent got worse (`_reward_course`): its reward on a falling trend (Mann–Kendall z
        −`reward_fall_z` or under) whose last third ends below its first third's lower quartile by the first third's
        interquartile range, or a reward that learned (its best stretch, the median of a tenth of its records, stood
        `reward_peak_iqr` interquartile ranges above its first third's upper quartile) and gave back `reward_given_back`
        of that gain by its last third. The evidence (name, levels, where the best stretch stood), or None: a reward
        that never improved and never fell is `_reward_stands`'s."""
        c = self._reward_course(run)
        if c is None:
            return None
        r, steps, first, last = c["r"], c["steps"], c["first"], c["last"]
        spread = c["q3"] - c["q1"]
        if spread <= 0:
            spread = float(np.subtract(*np.percentile(r, [75, 25])))
        w = max(3, r.size // 10)
        best = np.median(np.lib.stride_tricks.sliding_window_view(r, w), axis=1)  # each stretch of w records
        b = int(np.argmax(best))
        peak, peak_step = float(best[b]), int(steps[b + w - 1])
        ev = {"reward_series": c["name"], "first_third_median": first, "last_third_median": last,
              "first_third_iqr": c["q3"] - c["q1"], "mann_kendall_z": float(c["trend"].z),
              "best_stretch_median": peak, "best_stretch_step": peak_step, "best_stretch_records": w,
              "points": int(r.size), "first_step": int(steps[0]), "last_step": int(steps[-1]),
              "first_level": float(r[0]), "last_level": float(r[-1])}
        learned = spread > 0 and peak >= c["q3"] + self.reward_peak_iqr * spread
        if learned and last <= peak - self.reward_given_back * (peak - first):
            return ev | {"collapsed": True}
        if c["trend"].z <= -self.reward_fall_z and spread > 0 and last < c["q1"] - spread:
            return ev | {"collapsed": False}
        return None

    def _reward_stands(self, run: Run) -> Finding | None:
        """In an RL run whose log holds its start (`_reward_course`), the finding when its reward does not improve
        over `reward_min_points` records or more: no upward
        trend (Mann–Kendall z under `reward_rise_z`) and its last third's median no higher than its first third's, or,
        over `reward_many` records or more, a gain under `reward_gain_iqr` of its first third's interquartile range. The agent ends where it began: nothing is learned
        (an LR too small to move the policy, a reward no action changes). Not where the agent got worse
        (`_reward_lost`: divergence's). A warning; None otherwise."""
        c = self._reward_course(run)
        if c is None or self._reward_lost(run) is not None:
            return None
        name, steps, r, first, last, trend = c["name"], c["steps"], c["r"], c["first"], c["last"], c["trend"]
        q1, q3 = c["q1"], c["q3"]
        sliver = r.size >= self.reward_many and last - first <= self.reward_gain_iqr * (q3 - q1)
        if (trend.z >= self.reward_rise_z or last > first) and not sliver:
            return None  # it rose (by a trend test, or its medians), by more than a sliver over thousands of episodes
        trend_words = (f"no upward trend (Mann–Kendall z {trend.z:.2f})" if trend.z < self.reward_rise_z and last <= first
                       else f"a gain of {last - first:.4g}, under {self.reward_gain_iqr:.0%} of the spread of its first "
                            f"third's episodes (interquartile range {q3 - q1:.4g})")
        ev = {"reward_series": name, "first_third_median": first, "last_third_median": last,
              "mann_kendall_z": float(trend.z), "first_third_iqr": float(q3 - q1), "points": int(r.size), "reward_low": float(r.min()),
              "reward_high": float(r.max()), "first_level": float(r[0]), "last_level": float(r[-1])}
        return Finding.of(self, severity="warning", step=int(steps[0]), step_end=int(steps[-1]), series=name,
                          evidence=ev, sources=(src(run, name, steps),),
                          summary=(f"{'the reward' if name.lower() == 'reward' else f'the reward {name}'} does not "
                                   f"improve over its {r.size} records (steps "
                                   f"{steps[0]}-{steps[-1]}): {shortest(r[0])} at the first, {shortest(r[-1])} at the "
                                   f"last, the median of its last third {last:.4g} against {first:.4g} for its first, "
                                   f"{trend_words}: the agent is not learning (an LR "
                                   f"too small to move the policy, a reward no action changes)"))

    @staticmethod
    def _one_pass_of_episodes(run: Run) -> bool:
        """Whether the run logs an episode counter (`base.EPISODE_WORDS`) that never goes back: one agent's episodes
        in order, no launch appended under it."""
        for name in run.meta["name"].to_list():
            if set(words(name)) & EPISODE_WORDS:
                e = finite_part(*run.arrays(name))[1]
                if e.size >= 2 and bool(np.all(np.diff(e) > 0)):
                    return True
        return False

    def _reward_still(self, run: Run) -> Finding | None:
        """In an RL run, the finding when its reward (`base.reward_series`) is one value on `reward_share` of its
        records or more, over its last third as over the whole log, from `min_points` records: the agent is scored
        the same whatever it does (a GRPO group scored alike has zero advantage, so zero gradient), and nothing is
        learned. Critical when every record is that value, else a warning. None otherwise."""
        name = reward_series(run)
        if name is None:
            return None
        steps, r = finite_part(*run.arrays(name))
        if r.size < self.min_points:
            return None
        values, counts = np.unique(r, return_counts=True)
        mode = float(values[int(np.argmax(counts))])
        share, late = float(counts.max()) / r.size, float(np.mean(r[-max(self.min_repeats, r.size // 3):] == mode))
        if share < self.reward_share or late < self.reward_share:
            return None
        ev = {"reward_series": name, "reward_value": mode, "reward_share": share, "reward_late_share": late,
              "reward_low": float(r.min()), "reward_high": float(r.max()), "points": int(r.size),
              "first_level": float(r[0]), "last_level": float(r[-1])}
        return Finding.of(self, severity="critical" if share == 1.0 else "warning", step=int(steps[0]),
                          step_end=int(steps[-1]), series=name, evidence=ev, sources=(src(run, name, steps),),
                          summary=(f"the reward {name} is exactly {shortest(mode)} at {share:.0%} of its {r.size} "
                                   f"records (steps {steps[0]}-{steps[-1]}; {late:.0%} of its last third), between "
                                   f"{shortest(ev['reward_low'])} and {shortest(ev['reward_high'])}: the agent is "
                                   f"scored the same whatever it does, so there is nothing to learn from (a reward "
                                   f"function that never fires, a task too hard or misparsed outputs)"))

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
        if reinforcement_learning(run) is not None:  # an agent's losses chase moving targets: only its reward speaks
            found = self._reward_verdict(run)
            if found is not None:
                yield found
            return
        run = epoch_view(run)
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
        # a converged stretch at a schedule's end is not a loss that never moved, nor one whose LR still warms up
        excerpt = decayed_tail(run, steps)
        decayed = excerpt or warming_up(run, steps)
        unseen = decayed or unseen_start(run, steps)  # nor a level held in an excerpt whose start is not in it
        held = unseen or steps_open_late(run, steps, intervals=self.held_intervals)  # a level held from well into training: plateau's (`held_excerpt`)
        # at chance from its first record says most (ln C, and why C); an exact constant says more still (below);
        # a perplexity has no log-level to sit at
        ppl = loss_is_perplexity(run)
        role, ev = "loss", ((None if decayed or ppl else self._chance_start(run, steps, y))
                            or (None if excerpt or ppl else self._chance_most(run, steps, y))
                            or (None if ppl else self._at_ln2(run, y))
                            or (None if held else self._flat(steps, y)) or self._pinned(y)
                            or (None if held else self._still(steps, y)))
        exact = self._constant(run, y) if ev is not None else None
        if exact is not None:  # one value to the last digit at every point says which: never computed, not converged
            ev = self._beside_validation(run, exact)
        chance = self._chance_role(run) if ev is None and not ppl else None
        if chance is not None:
            role, ev = chance
            steps, y = finite_part(*run.arrays(role))
        if ev is None and not decayed:
            ev = self._over_schedule(run, steps, y, whole=not held)  # after chance: ln k says more than "it did not move"
        if ev is None and run.has("val_loss") and self._train_stands(y):
            head, tail = stats.head_tail_levels(y, self.edge)
            steps, y = finite_part(*run.arrays("val_loss"))
            role, ev = "val_loss", ((None if unseen else self._flat(steps, y)) or self._pinned(y)
                                    or (None if held else self._val_still(y)))
            if ev is not None:
                ev["train_relative_change"] = (tail - head) / abs(head) if head else 0.0
                ev["train_all_zero"] = head == 0 and tail == 0
        if ev is None and run.has("val_loss") and not held and self._train_within_noise(y):
            head, tail = stats.head_tail_levels(y, self.edge)
            vsteps, v = finite_part(*run.arrays("val_loss"))
            still = self._val_still(v) if v.size >= self.min_points else None
            if still is not None:  # validation frozen over a whole run beside a training loss that only scatters
                role, steps, y, ev = "val_loss", vsteps, v, still
                ev["train_relative_change"] = (tail - head) / abs(head) if head else 0.0
                ev["train_all_zero"] = False
                ev["train_within_noise"] = True
        if ev is None:
            steps, y = finite_part(*run.arrays("loss"))
            role, ev = "loss", self._constant(run, y)
            if ev is not None:
                ev = self._beside_validation(run, ev)
        if ev is None:
            ev = self._zero_both(run, y)  # training and validation loss both exactly 0, at any length
        if ev is None:
            ev = self._no_gradient(run, y)  # a component frozen to the last digit beside a gradient norm of 0
        if ev is None and not held:
            ev = self._held_short(run, steps, y)  # a short log from its start held within 1%: what the rules above did not say
        if ev is None and not unseen:
            ev = self._no_progress(run, steps, y)  # the weakest evidence: a short log's two curves, neither improving
        if ev is None:
            frozen = self._score_frozen(run, steps, y)  # the loss moves, the model's answers on held-out data never do
            if frozen is None:
                frozen = self._scores_zero(run, steps, y)  # the loss does not move, every held-out score is 0
            if frozen is not None:
                yield frozen
            yield from self._empty_terms(run)
            yield from self._flat_launches(run)
            return
        classes = class_count(run)
        if classes is not None and classes[1] not in ("vocab_size", "n_vocab", "ntokens"):
            ev["log_classes"] = math.log(classes[0])
        if run.has("lr"):
            ev["lr_median"] = stats.level(run.arrays("lr")[1])
        what = ("loss" if role == "loss" else "validation loss (training loss is exactly 0: nothing was trained)"
                if ev.get("train_all_zero") else "validation loss (the training loss scatters, never falling beyond "
                "its noise)" if ev.get("train_within_noise") else "validation loss (training loss does not fall either)")
        # the model trains, two short curves say it does not, or a small move is steady (`_steady`)
        weak = ("val_first" in ev or "no_progress" in ev or "held_short" in ev or "small_fall" in ev
                or "noise_bound" in ev or self._steady(ev))
        summary = self._summary(what, ev, steps, y)
        yield Finding.of(self, severity="warning" if weak else "critical", step=int(steps[0]),
                         step_end=int(steps[-1]), series=run.pick(role), evidence=ev, sources=(src(run, role, steps),),
                         summary=summary)

    def _score_frozen(self, run: Run, ts: np.ndarray, y: np.ndarray) -> Finding | None:
        """A held-out score (a validation or test series, or one of no split, named by `FROZEN_SCORE_WORDS`; not a
        running best or a setting) exactly one value on every one of `frozen_score_evals` evaluations or more, that
        value neither 0 nor a bound (1, 100) and printed to `min_digits` significant digits or more, while the
        training loss beside it is finite and not one value. The weights change at every step, yet the model's
        answers on the held-out set do not: a classifier that answers one class (its accuracy is that class's
        share), or an evaluation that never reads the trained weights. At any length: a warning."""
        if y.size < 2 or np.all(y == y[0]) or not np.all(np.isfinite(run.arrays("loss")[1])):
            return None  # one training value: `_constant`'s; a loss gone non-finite froze everything after it
        for name in self._held_out_scores(run):
            steps, v = finite_part(*run.arrays(name))
            value = float(v[0]) if v.size else 0.0
            if (v.size < self.frozen_score_evals or not np.all(v == value) or value <= 0 or value in (1.0, 100.0)
                    or significant_digits(value) < self.min_digits):
                continue
            ev = {"score_series": name, "score_value": value, "evaluations": int(v.size),
                  "significant_digits": significant_digits(value), "train_first": float(y[0]),
                  "train_last": float(y[-1]), "train_first_step": int(ts[0]), "train_last_step": int(ts[-1])}
            return Finding.of(self, severity="warning", step=int(steps[0]), step_end=int(steps[-1]), series=name,
                              evidence=ev, sources=(src(run, name, steps), src(run, "loss")),
                              summary=(f"{name} is exactly {shortest(value)} at every one of its {v.size} "
                                       f"evaluations ({run.printed_span(name, int(steps[0]), int(steps[-1]))}) while the "
                                       f"training loss moves, {shortest(float(y[0]))} at "
                                       f"{run.printed_span(run.pick('loss'), int(ts[0]))} and {shortest(float(y[-1]))} "
                                       f"at {run.printed_span(run.pick('loss'), int(ts[-1]))}: the model's answers on held-out data never change (a classifier "
                                       f"that answers one class, or an evaluation that does not read the trained "
                                       f"weights)"))
        return None

    @staticmethod
    def _held_out_scores(run: Run) -> list[str]:
        """The held-out scores of `run`: a validation accuracy, or a validation, test or split-less series named by
        `FROZEN_SCORE_WORDS`, neither a running best nor a setting."""
        out = []
        m = run.meta.filter(run.meta["role"].is_in(["val_accuracy", "other"]))
        for name, role in m.select("name", "role").iter_rows():
            low = name.lower()
            ws = set(words(name)) | set(re.findall(r"[a-z0-9]+", low)) | set(re.findall(r"[a-z]+", low))
            if ws & (AGGREGATE_WORDS | SETTING_WORDS) or role == "other" and (
                    not ws & FROZEN_SCORE_WORDS or role_of(name).split not in ("val", "test", None)):
                continue
            out.append(name)
        return out

    def _scores_zero(self, run: Run, ts: np.ndarray, y: np.ndarray) -> Finding | None:
        """Every held-out score (`_held_out_scores`: precision, recall, mAP, accuracy) exactly 0 at every one of
        `zero_score_evals` evaluations or more, none ever above it, while the training loss beside it (finite, not one
        value) ends within `still_tol` of its first value and never learned (`stats.learned`): the model finds
        nothing on held-out data and its loss does not move, however few the records. A warning."""
        if (y.size < self.constant_points or np.all(y == y[0]) or not np.all(np.isfinite(run.arrays("loss")[1]))
                or not abs(float(y[0])) > 1e-12):
            return None
        first, last = float(y[0]), float(y[-1])
        if abs(last - first) > self.still_tol * abs(first) or stats.learned(y, last, self.learned_fall):
            return None
        names, evals = [], []
        for name in self._held_out_scores(run):
            v = finite_part(*run.arrays(name))[1]
            if v.size == 0:
                continue
            if np.any(v != 0):
                return None  # one held-out score is not 0: the model finds something
            names.append(name)
            evals.append(int(v.size))
        if not names or min(evals) < self.zero_score_evals:
            return None
        steps = finite_part(*run.arrays(names[0]))[0]
        ev = {"score_series": names, "score_value": 0.0, "evaluations": min(evals), "first_level": first,
              "last_level": last, "relative_change": (last - first) / abs(first), "points": int(y.size),
              "train_first_step": int(ts[0]), "train_last_step": int(ts[-1]), "scores_zero": True}
        loss = run.pick("loss")
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        return Finding.of(self, severity="warning", step=int(ts[0]), step_end=int(ts[-1]), series=loss, evidence=ev,
                          sources=(src(run, "loss", ts), src(run, names[0], steps)),
                          summary=(f"every held-out score ({shown}) is exactly 0 at each of its "
                                   f"{min(evals)}{'' if min(evals) == max(evals) else ' or more'} evaluations "
                                   f"while the loss does not move: {shortest(first)} at "
                                   f"{run.printed_span(loss, int(ts[0]))}, {shortest(last)} at "
                                   f"{run.printed_span(loss, int(ts[-1]))} ({(last - first) / abs(first):+.1%}): the "
                                   f"model finds nothing on held-out data"))

    def held_excerpt(self, run: Run) -> tuple[np.ndarray, np.ndarray, dict] | None:
        """Where this detector claims nothing and the loss holds its level within its noise (the range or trend rule)
        over an excerpt whose step axis opens well into training (`steps_open_late`): the fall before it is not in
        the log, so a level held there is a stall, plateau's to claim, not a loss that never moved. Not on an
        excerpt whose epochs say more of the run lies before it (`unseen_start`), a decayed schedule's end, a warmup,
        nor a loss still while the gradient norm explodes. (steps, loss, evidence) or None."""
        view = epoch_view(run)
        if not view.has("loss"):
            return None
        steps, y = finite_part(*view.arrays("loss"))
        if (not steps_open_late(view, steps, intervals=self.held_intervals) or decayed_tail(view, steps) or warming_up(view, steps)
                or unseen_start(view, steps) or self._gradients_explode(view)
                or next(iter(self.check(run)), None) is not None):
            return None
        ev = self._flat(steps, y) or self._still(steps, y)
        return (steps, y, ev) if ev is not None else None

    def _flat_launches(self, run: Run) -> Iterator[Finding]:
        """Where several launches are appended to one log and the whole log is not flat, each launch judged on its
        own (`base.by_launch`) by the range, pinned and trend rules: a launch that never moved is flat even when a
        later one trains (a warning then: the last launch learned; critical when the log ends on it). Not a launch
        stopped while its LR still warmed up (it rose at every record): too early to say."""
        pieces = by_launch(run, "loss", *finite_part(*run.arrays("loss")))
        if len(pieces) < 2:
            return
        for k, (steps, y) in enumerate(pieces, 1):
            if warming_up(run, steps):
                continue  # stopped while its LR was still warming up: too early to say it never moved
            if k > 1 and stats.learned(np.r_[pieces[0][1][:stats.START_POINTS], y], stats.start_level(y),
                                       self.learned_fall):
                continue  # it resumes well below where the log began: trained weights holding their level
            ev = self._flat(steps, y) or self._pinned(y) or self._still(steps, y)
            if ev is None:
                continue
            ev |= {"launch": k, "launches": len(pieces)}
            last = k == len(pieces)
            yield Finding.of(self, severity="critical" if last else "warning", step=int(steps[0]),
                             step_end=int(steps[-1]), series=run.pick("loss"), evidence=ev,
                             sources=(src(run, "loss", steps),),
                             summary=self._summary(f"loss of launch {k} of the {len(pieces)} appended to this log",
                                                   ev, steps, y)
                             + ("" if last else "; a later launch trains"))

    def _summary(self, what: str, ev: dict, steps: np.ndarray, y: np.ndarray) -> str:
        if "zero_points" in ev:
            return (f"{what} is exactly 0.0 at {ev['zero_points']} of its {ev['points']} points (steps {steps[0]}-"
                    f"{steps[-1]}, to the end) and "
                    + (f"fell to it in one record from {shortest(ev['dropped_from'])}" if "dropped_from" in ev
                       else f"never above {ev['max_value']:.3g} from its first record") + ": there is "
                    "nothing to learn from (an empty or degenerate loss: targets the model is given, outputs saturated "
                    "at once), not convergence"
                    + ("; or every step's loss was non-finite and the logger dropped them (HF's Trainer logs 0.0 "
                       "then): log the gradient norm to tell" if "dropped_from" in ev else ""))
        if "val_zero_points" in ev:
            acc = ev["accuracy_median"]
            at = (f"at its one point (step {steps[0]})" if ev["points"] == 1 else
                  f"at every one of its {ev['points']} points (steps {steps[0]}-{steps[-1]})")
            return (f"{what} is exactly 0.0 {at} and the validation loss is exactly 0.0 at every one of its "
                    f"{ev['val_zero_points']} points"
                    + (f", beside an accuracy of {acc:.3g}" if acc is not None else "")
                    + ": no model fits held-out data to the last digit; the loss was never computed (empty batches, "
                    "misread labels), not convergence")
        if "val_spread" in ev:
            return (f"{what} spans {ev['val_spread']:.2%} of its level over all {ev['points']} evaluations: "
                    f"{shortest(ev['first_level'])} at step {steps[0]}, {shortest(ev['last_level'])} at step "
                    f"{steps[-1]} ({ev['relative_change']:+.2%}), while the training loss moves "
                    f"{ev['train_relative_change']:+.1%}: the model does not move (an LR far too small, frozen weights)")
        if "identical_spread" in ev:
            return (f"{what} agrees with itself to within {ev['identical_spread']:.1g} of its level at every one of its "
                    f"{ev['points']} points: {shortest(ev['first_level'])} at step {steps[0]}, "
                    f"{shortest(ev['last_level'])} at step {steps[-1]}, between {shortest(ev['identical_low'])} and "
                    f"{shortest(ev['identical_high'])}: minibatch noise never repeats a loss to its fifth digit; an "
                    f"empty or replaced loss, or a model whose output no longer depends on its input, not convergence")
        if "constant_value" in ev:
            v = ev["constant_value"]
            return (f"{what} is exactly {shortest(v)} at every one of its {ev['points']} points (steps {steps[0]}-{steps[-1]})"
                    + (" and " if "pinned_beside" in ev else ": ")
                    + ("nothing was trained, or the loss was never computed (an empty loop, a placeholder)"
                       if v == 0 else
                       f"{ev['pinned_beside']} is exactly {shortest(ev['pinned_beside_value'])} on the same records: "
                       f"the model's outputs never change (a loss at its bound, a dice loss of 1: nothing predicted, "
                       f"or targets it never sees), not convergence" if "pinned_beside" in ev else
                       "an empty or replaced loss (a constant, a placeholder), not convergence")
                    + (f"; the validation loss falls ({ev['val_first']:.4g} → {ev['val_last']:.4g}), so the model "
                       f"trains and the logged training loss is what is empty" if "val_first" in ev else ""))
        if "small_fall" in ev:
            k = ev["edge_points"]
            return (f"{what} falls only {ev['relative_change']:+.1%} over all {ev['points']} points, steps {steps[0]}-"
                    f"{steps[-1]}: median of steps {steps[0]}-{steps[k - 1]} {ev['first_level']:.4g}, of steps "
                    f"{steps[-k]}-{steps[-1]} {ev['last_level']:.4g}; a drift a trend test finds (Mann–Kendall "
                    f"p={ev['mk_p']:.2g}) but no learning a user would act on: it never made progress")
        if "still" in ev:
            k = ev["edge_points"]
            return (f"{what} stays within its own noise over all {ev['points']} points, steps {steps[0]}-{steps[-1]}: "
                    f"median of steps {steps[0]}-{steps[k - 1]} {ev['first_level']:.4g}, of steps {steps[-k]}-"
                    f"{steps[-1]} {ev['last_level']:.4g} ({ev['relative_change']:+.1%}), no trend (Mann–Kendall "
                    f"p={ev['mk_p']:.2g})" + (f", while the LR ran its schedule from {ev['lr_peak']:.3g} down to "
                                               f"{ev['lr_last']:.3g}: the whole schedule moved nothing"
                                               + (f" (its noise leaves a move of ±{ev['noise_bound']:.0%} unresolved)"
                                                  if "noise_bound" in ev else "")
                                               if "over_schedule" in ev else "; it never learned"))
        if "frozen_component" in ev:
            return (f"{what} goes from {ev['first_level']:.4g} to {ev['last_level']:.4g} ({ev['relative_change']:+.1%}) "
                    f"over steps {steps[0]}-{steps[-1]}, its term {ev['frozen_component']} is exactly "
                    f"{shortest(ev['frozen_value'])} on every one of its {ev['frozen_points']} records, and the gradient "
                    f"norm is exactly 0 on {ev['zero_grad_records']} of its {ev['grad_records']} finite records: no "
                    f"gradient reaches the parameters, nothing is being trained")
        if "no_progress" in ev:
            k = self.min_repeats
            return (f"{what} goes from median {ev['first_level']:.4g} of steps {steps[0]}-{steps[k - 1]} to median "
                    f"{ev['last_level']:.4g} of steps {steps[-k]}-{steps[-1]} ({ev['relative_change']:+.1%}) over "
                    f"{ev['epochs']} epochs while {ev['accuracy_series']} goes from median {ev['accuracy_first']:.3g} of "
                    f"its first {k} records to {ev['accuracy_last']:.3g} of its last {k}: neither improved, nothing is "
                    f"being learned")
        if "held_short" in ev:
            return (f"{what} stays within {ev['max_deviation']:.2%} of its first value {shortest(ev['first_level'])} "
                    f"at every one of its {ev['points']} points, steps {steps[0]}-{steps[-1]} (last "
                    f"{shortest(ev['last_level'])}, {ev['relative_change']:+.2%}): from its start it never moved (an LR "
                    f"far too small, frozen weights, a loss not wired to the parameters); a short log, so a warning")
        if "over_schedule" in ev:
            return (f"{what} at step {steps[-1]} is {ev['last_level']:.4g}, its first value {ev['first_level']:.4g} "
                    f"(step {steps[0]}) within {ev['max_deviation']:.1%} at every one of its {ev['points']} points, "
                    f"while the LR ran its schedule from {ev['lr_peak']:.3g} down to {ev['lr_last']:.3g}: "
                    f"the whole schedule moved nothing")
        if "chance_from_start" in ev:
            k, src_ = ev["chance_k"], ev["chance_source"]
            why = ("its accuracy, median " + f"{ev['accuracy_median']:.3g}, is 1/{k}" if src_ == "accuracy" else
                   f"to the printer's rounding (±{ev['printed_resolution']:.2g})" if src_ == "printed" else
                   f"{k} outcomes the value names" if src_ == "value" else f"{src_} = {k} in the config")
            span = f" ({ev['epochs']} epochs)" if (ev.get("epochs") or 0) > 1 else ""
            held = (f"every one of its {ev['points']} points{span}" if ev["smoothed_over"] == 1 else
                    f"its rolling median over {ev['smoothed_over']} points, across all {ev['points']}{span},")
            return (f"{what} sits at ln {k} = {ev['log_k']:.4g} from its first record: {ev['first_level']:.4g} at step "
                    f"{steps[0]}, {ev['last_level']:.4g} at step {steps[-1]}, {held} within {ev['max_deviation']:.1%} "
                    f"of it ({why}): the model predicts uniformly over {k} classes and never learned")
        if "ln2_deviation" in ev:
            return (f"{what} sits at ln 2 = {ev['log_k']:.4g} at every one of its {ev['points']} points: "
                    f"{shortest(ev['first_level'])} at step {steps[0]}, {shortest(ev['last_level'])} at step "
                    f"{steps[-1]}, between {shortest(ev['low'])} and {shortest(ev['high'])} (within "
                    f"{ev['ln2_deviation']:.1%} of it): a binary or pairwise loss's uniform guess, held at every "
                    f"record; the model never left chance")
        if "chance_most" in ev:
            k, src_ = ev["chance_k"], ev["chance_source"]
            why = (f"its accuracy, median {ev['accuracy_median']:.3g}, is 1/{k}" if src_ == "accuracy" else
                   "ln 2 is a binary or pairwise loss's uniform guess" if src_ == "binary" else
                   f"{src_} = {k} in the config")
            return (f"{what} sits at ln {k} = {ev['log_k']:.4g} from step {ev['from_step']} to the end: the means of "
                    f"its last {ev['windows_at_chance']} of {ev['windows']} windows lie between "
                    f"{ev['window_means_low']:.4g} and {ev['window_means_high']:.4g}, within their noise of it ({why}; "
                    f"first value {ev['first_level']:.4g} at step {steps[0]}): the model predicts uniformly over {k} "
                    f"classes and never learned" + ("; the LR is still warming up" if ev["lr_warming_up"] else ""))
        if "chance_k" in ev:
            k = ev["chance_k"]
            what_k = (f"the log of a probability clamped at 1/{k:.0e}" if k >= 10 ** 7 else
                      f"the model predicts uniformly over {k} classes")
            return (f"{what} sits at {ev['last_level']:.5g} = ln {k} on its last {ev['chance_points']} points (steps "
                    f"{steps[-ev['chance_points']]}-{steps[-1]}) and never fell below it: {what_k}")
        if "pinned_value" in ev:
            return (f"{what} is pinned at {shortest(ev['pinned_value'])} on {ev['pinned_points']} of its {ev['points']} "
                    f"points (steps {steps[0]}-{steps[-1]}), to the end: it no longer depends on the batch")
        (_, head), (_, tail) = head_tail_of(steps, y, self.edge)
        if self._steady(ev):
            return (f"{what} moves only {head} → {tail} ({ev['relative_change']:+.1%}) over steps {steps[0]}-"
                    f"{steps[-1]}, steadily (Kendall τ {ev['mk_tau']:+.2f}): a move this small is as good as none, "
                    f"unless the level sits just above the loss's floor (a summed or offset loss)")
        return (f"{what} stays at {head} → {tail} ({ev['relative_change']:+.1%}) over steps {steps[0]}-{steps[-1]}: "
                f"it never moved")

    def _steady(self, ev: dict) -> bool:
        """Whether a range-flat loss moves at nearly every record (Kendall τ at `steady_tau` or beyond): a move far
        beyond its own noise, so the claim rests on the level alone, and a summed or offset loss (its floor far
        from 0) moves little in relative terms while it learns. A warning, not a critical."""
        return abs(ev.get("mk_tau", 0.0)) >= self.steady_tau

    def _constant(self, run: Run, y: np.ndarray) -> dict | None:
        """The evidence when the training loss is exactly one value (0 included) on every one of its points, at
        least `constant_points`, else None. Minibatch noise never repeats a value to the last digit on every record
        from the start: the loss is empty (0) or replaced by a constant. A non-zero value needs `min_digits`
        significant digits, as the pinned rule: `LOSS_WEIGHT: 1.0` printed three times in a config dump is no loss. A loss
        of exactly 0 beside a non-finite gradient norm or validation loss is a NaN the logger hid (`masked_nonfinite`:
        fp16 overflow zeroes HF's logged loss while its evaluation turns NaN), not this. A loss exactly 0 on
        `pinned_share` of its points and its last `min_repeats`, never above `zero_ceiling` from its first record
        or entered in one record from `zero_jump` or more (`_dropped_to_zero`), is as empty: the few points off zero
        are float dust, or the loss before it was emptied."""
        zero = bool(y.size >= self.constant_points and np.mean(y == 0) >= self.pinned_share
                    and np.all(y[-self.min_repeats:] == 0)
                    and (float(np.max(np.abs(y))) <= self.zero_ceiling or self._dropped_to_zero(y)))
        if y.size < self.constant_points or not (np.all(y == y[0]) or zero or self.identical(y)):
            return None
        if zero and not np.all(y == 0):
            if any(run.has(r) and not np.all(np.isfinite(run.arrays(r)[1])) for r in ("grad_norm", "val_loss")):
                return None
            ev = {"first_level": float(y[0]), "last_level": 0.0, "relative_change": -1.0, "constant_value": 0.0,
                  "points": int(y.size), "zero_points": int(np.sum(y == 0)), "max_value": float(np.max(np.abs(y)))}
            if ev["max_value"] > self.zero_ceiling:
                ev["dropped_from"] = float(y[np.flatnonzero(y != 0)[-1]])
            return ev
        beside = None
        if y[0] != 0 and significant_digits(float(y[0])) < self.min_digits:
            beside = self.pinned_beside(run) if np.all(y == y[0]) else None
            if beside is None:
                return None  # a round constant (1.0, 0.25) on a few lines is as likely a setting read as a loss
        if y[0] == 0 and any(run.has(r) and not np.all(np.isfinite(run.arrays(r)[1])) for r in ("grad_norm", "val_loss")):
            return None
        v = float(y[0])
        ev = {"first_level": v, "last_level": v, "relative_change": 0.0, "constant_value": v, "points": int(y.size)}
        if beside is not None:
            ev |= {"pinned_beside": beside[0], "pinned_beside_value": beside[1]}
        if not np.all(y == y[0]):  # identical to the printer's leading digits, not to the last one
            lo, hi = float(np.min(y)), float(np.max(y))
            ev |= {"last_level": float(y[-1]), "relative_change": (float(y[-1]) - v) / abs(v), "identical_low": lo,
                   "identical_high": hi, "identical_spread": (hi - lo) / abs(float(np.median(y)))}
        return ev

    def pinned_beside(self, run: Run) -> tuple[str, float] | None:
        """(name, value) of another series the loss's own records print, a term of the loss or a score (an accuracy,
        an IoU: `_held_out_scores`), exactly one value on every one of those records, `constant_points` at least; else
        None. A round loss (1.0, a dice loss at its ceiling) repeated on its own may be a setting read as a loss;
        repeated on progress lines whose other quantities are pinned too, the model's outputs do not change (a dice
        loss of 1 beside an IoU of 0.5: every pixel predicted background)."""
        if not run.has("loss"):
            return None  # a validation loss judged alone (`_validation_alone`): no training records to pin beside
        name = run.pick("loss")
        steps = finite_part(*run.arrays("loss"))[0]
        others = [n for n in (run.all_of("train_loss") + run.all_of("accuracy") + self._held_out_scores(run))
                  if n != name and run.format_of(n) == run.format_of(name)]
        for other in dict.fromkeys(others):
            f = run.series_named(other)
            at = f.filter(f["step"].is_in(steps.tolist()))["value"].fill_null(np.nan).to_numpy()
            if at.size >= self.constant_points and at.size == steps.size and np.all(at == at[0]):
                return other, float(at[0])
        return None

    def identical(self, y: np.ndarray) -> bool:
        """Whether every value lies within `identical_tol` of their median, a non-zero one: the loss agrees with itself
        to its fourth or fifth significant digit on every record, which minibatch noise never does."""
        mid = float(np.median(y))
        return bool(mid != 0 and float(np.max(y) - np.min(y)) <= self.identical_tol * abs(mid))

    def _zero_both(self, run: Run, y: np.ndarray) -> dict | None:
        """The evidence, at any length, when the training loss and the validation loss are exactly 0 on every one of
        their records: no model fits held-out data to the last digit, so nothing was computed (empty batches,
        misread labels). Not beside a non-finite gradient norm (a NaN the logger zeroed: masked_nonfinite's) nor an
        accuracy at `accuracy_fit` or above (a model that fits its data). Else None."""
        if not (y.size and np.all(y == 0) and run.has("val_loss")):
            return None
        v = run.arrays("val_loss")[1]
        if not (v.size and np.all(v == 0)):
            return None
        if run.has("grad_norm") and not np.all(np.isfinite(run.arrays("grad_norm")[1])):
            return None
        acc = accuracy_level(run)
        if acc is not None and acc >= self.accuracy_fit:
            return None
        return {"first_level": 0.0, "last_level": 0.0, "relative_change": 0.0, "constant_value": 0.0,
                "points": int(y.size), "val_zero_points": int(v.size), "accuracy_median": acc}

    def _dropped_to_zero(self, y: np.ndarray) -> bool:
        """Whether the loss fell to exactly 0 in one record from `zero_jump` or more and stayed there to the end: a
        loss that learns decays through the printer's last digits before it prints 0; one that is 0 from the next
        record on was emptied (a mask, an empty target), not learned."""
        nonzero = np.flatnonzero(y != 0)
        return bool(nonzero.size) and abs(float(y[nonzero[-1]])) >= self.zero_jump

    def _empty_terms(self, run: Run) -> Iterator[Finding]:
        """A term of the training loss exactly 0 on every one of its records (`constant_points` at least) whose
        held-out twin (the same name without the split's words) is non-zero on most of its own: the training data
        never held what the term measures (no boxes, no masks), while the held-out data does. A warning, naming the
        term: the other terms train. A term 0 in both splits is a head the task does not use (a one-class detector's
        class loss), not this."""
        held = {tuple(w for w in words(n) if w not in SPLIT_WORDS): n for n in run.all_of("val_loss")}
        for name in run.all_of("train_loss"):
            twin = held.get(tuple(w for w in words(name) if w not in SPLIT_WORDS))
            if twin is None:
                continue
            f = run.series_named(name)
            steps, y = f["step"].to_numpy(), f["value"].fill_null(np.nan).to_numpy()
            v = run.series_named(twin)["value"].fill_null(np.nan).to_numpy()
            v = v[np.isfinite(v)]
            if y.size < self.constant_points or not np.all(y == 0) or v.size == 0 or np.mean(v != 0) < self.pinned_share:
                continue
            ev = {"first_level": 0.0, "last_level": 0.0, "relative_change": 0.0, "constant_value": 0.0,
                  "points": int(y.size), "empty_term": name, "held_out_twin": twin,
                  "held_out_median": float(np.median(v))}
            yield Finding.of(self, severity="warning", step=int(steps[0]), step_end=int(steps[-1]), series=name,
                             evidence=ev, sources=(src(run, name, steps),),
                             summary=(f"the training loss term {name!r} is exactly 0 at every one of its {y.size} "
                                      f"points (steps {steps[0]}-{steps[-1]}) while its held-out twin {twin!r} is not "
                                      f"(median {ev['held_out_median']:.4g}): that term never trained; the training "
                                      f"data holds none of what it measures"))
            return

    def _no_gradient(self, run: Run, y: np.ndarray) -> dict | None:
        """The evidence, at any length, that no gradient reaches the parameters: the gradient norm exactly 0 on
        `pinned_share` of its finite records (`constant_points` at least), a component of the loss exactly one value
        of `min_digits` significant digits on every one of its records (`constant_points` at least), and the loss
        itself not learning (`stats.learned`). Minibatch noise moves every term a model computes from its inputs; a
        term frozen to the last digit beside a zero gradient is a loss nothing is trained on. Else None."""
        if not run.has("grad_norm") or y.size < self.constant_points or stats.learned(y, stats.level(y[-3:])):
            return None
        g = run.arrays("grad_norm")[1]
        g = g[np.isfinite(g)]
        if g.size < self.constant_points or np.mean(g == 0) < self.pinned_share:
            return None
        picked = run.pick("loss")
        for name in run.all_of("train_loss"):
            v = run.series_named(name)["value"].fill_null(np.nan).to_numpy()
            if (name != picked and v.size >= self.constant_points and np.all(v == v[0]) and v[0] != 0
                    and significant_digits(float(v[0])) >= self.min_digits):
                return {"first_level": float(y[0]), "last_level": float(y[-1]),
                        "relative_change": (float(y[-1]) - float(y[0])) / abs(float(y[0])) if y[0] else 0.0,
                        "points": int(y.size), "frozen_component": name, "frozen_value": float(v[0]),
                        "frozen_points": int(v.size), "zero_grad_records": int(np.sum(g == 0)),
                        "grad_records": int(g.size)}
        return None

    def _beside_validation(self, run: Run, ev: dict) -> dict:
        """A constant loss's evidence with the validation loss's first and last values when it learns (`stats.learned`):
        the model trains, and what is empty is the logged training loss (a warning then)."""
        if run.has("val_loss"):
            vv = finite_part(*run.arrays("val_loss"))[1]
            if vv.size >= self.min_repeats and stats.learned(vv, stats.head_tail_levels(vv, self.edge)[1]):
                ev["val_first"], ev["val_last"] = float(vv[0]), float(vv[-1])
        return ev

    def _still(self, steps: np.ndarray, y: np.ndarray) -> dict | None:
        """The evidence when the loss does not move beyond its own noise over the whole log: at least `min_points`,
        its last third's median within `still_tol` of its first third's, no fall from its first points
        (`stats.learned`), and either no trend (Mann–Kendall p ≥ `still_p`) or a fall of the thirds' medians under
        `rel_tol` (`small_fall`: effect first; on hundreds of points a trend test finds a 1% drift significant, and a
        1% fall over a whole run is still no learning a user would act on). Else None. The range rule's 3% band
        misses a loss that wanders ±5% around one level; the trend test is what says the wandering is noise."""
        if y.size < self.min_points:
            return None
        head, tail = stats.head_tail_levels(y, self.still_edge)
        if not (math.isfinite(head) and abs(head) > 1e-12) or abs(tail - head) > self.still_tol * abs(head):
            return None
        if stats.learned(y, tail, self.learned_fall) or not self._stayed(y, head):
            return None
        rel = (tail - head) / abs(head)
        trend = stats.mann_kendall(y, steps)
        small = -self.rel_tol <= rel <= 0.0
        if trend.p < self.still_p and not small:
            return None
        slope, _ = stats.theil_sen(steps, y)
        k = min(y.size, max(3, int(round(y.size * self.still_edge))))  # the points each median is over (head_tail_levels)
        ev = {"first_level": head, "last_level": tail, "relative_change": rel,
              "slope_per_step": slope, "mk_p": trend.p, "points": int(y.size), "still": True, "edge_points": k}
        if trend.p < self.still_p:
            ev |= {"small_fall": True, "mk_tau": trend.tau}
        return ev

    def _held_short(self, run: Run, steps: np.ndarray, y: np.ndarray) -> dict | None:
        """The evidence when a log too short for the trend test (`constant_points` to `min_points` points) that shows
        the run's start (`shows_start`) holds every point within `held_tol` of its first one, not all equal (an exact
        constant is `_constant`'s to judge), else None: a loss that moves less than 1% from its first epoch on did not
        learn, however few the records; a healthy first few epochs fall by more. A warning: a few points say less
        than a trend."""
        if not (self.constant_points <= y.size < self.min_points) or y[0] == 0 or np.all(y == y[0]):
            return None
        if not shows_start(run, steps):
            return None
        first = float(y[0])
        dev = float(np.max(np.abs(y - first))) / abs(first)
        if dev > self.held_tol:
            return None
        return {"first_level": first, "last_level": float(y[-1]), "relative_change": (float(y[-1]) - first) / abs(first),
                "max_deviation": dev, "held_short": True, "points": int(y.size)}

    def _over_schedule(self, run: Run, steps: np.ndarray, y: np.ndarray, whole: bool = True) -> dict | None:
        """The evidence when a log too short for the trend test (`schedule_points` to `min_points` points) spans an
        LR schedule run out (the loss's own source logs an LR that falls to `schedule_end` of its peak by the last
        loss step) and every point stays within `still_tol` of the first one, none learned: the whole schedule
        moved nothing. Without the LR a few flat points may be a log cut short; with it the run had its chance.
        From `min_points` on, in a log that holds its start (`whole`), the same schedule run out with the medians
        of the first and last third within `still_tol`, no trend (Mann–Kendall p ≥ `still_p`), no fall from the
        first points: per-step noise too wide to resolve `still_tol` (`_stayed`) no longer excuses a loss the whole
        schedule did not move (`_still_over_schedule`)."""
        if y.size >= self.min_points and whole and run.has("lr"):
            return self._still_over_schedule(run, steps, y)
        if not (self.schedule_points <= y.size < self.min_points) or not run.has("lr"):
            return None
        if run.format_of(run.pick("lr")) != run.format_of(run.pick("loss")):
            return None
        ls, lr = finite_part(*run.arrays("lr"))
        lr = lr[(ls >= steps[0]) & (ls <= steps[-1])]
        first = float(y[0])
        if lr.size < 2 or not lr.max() > 0 or lr[-1] > self.schedule_end * lr.max() or not abs(first) > 1e-12:
            return None
        if float(np.max(np.abs(y - first))) > self.still_tol * abs(first) or stats.learned(y, float(y[-1])):
            return None
        return {"first_level": first, "last_level": float(y[-1]), "relative_change": (float(y[-1]) - first) / abs(first),
                "max_deviation": float(np.max(np.abs(y - first))) / abs(first), "lr_peak": float(lr.max()),
                "lr_last": float(lr[-1]), "points": int(y.size), "over_schedule": True}

    def _schedule_spent(self, run: Run, steps: np.ndarray) -> tuple[float, float] | None:
        """(peak, last) of the LR the loss's own source logs over the loss's steps, where it falls to `schedule_end` of
        its peak or lower by the last loss step: the schedule ran out. Else None."""
        if run.format_of(run.pick("lr")) != run.format_of(run.pick("loss")):
            return None
        ls, lr = finite_part(*run.arrays("lr"))
        lr = lr[(ls >= steps[0]) & (ls <= steps[-1])]
        if lr.size < 2 or not lr.max() > 0 or lr[-1] > self.schedule_end * lr.max():
            return None
        return float(lr.max()), float(lr[-1])

    def _still_over_schedule(self, run: Run, steps: np.ndarray, y: np.ndarray) -> dict | None:
        """See `_over_schedule`: `min_points` or more, the LR schedule spent, the thirds' medians within `still_tol`,
        no trend, not learned and no fall at its first point. Else None."""
        spent = self._schedule_spent(run, steps)
        if spent is None:
            return None
        head, tail = stats.head_tail_levels(y, self.still_edge)
        if not (math.isfinite(head) and abs(head) > 1e-12) or abs(tail - head) > self.still_tol * abs(head):
            return None
        trend = stats.mann_kendall(y, steps)
        if trend.p < self.still_p or stats.learned(y, tail, self.learned_fall) or self._fell_at_once(y):
            return None
        k = min(y.size, max(3, int(round(y.size * self.still_edge))))
        ev = {"first_level": head, "last_level": tail, "relative_change": (tail - head) / abs(head),
              "mk_p": trend.p, "points": int(y.size), "still": True, "edge_points": k, "lr_peak": spent[0],
              "lr_last": spent[1], "over_schedule": True}
        bound = self.resolve_sigmas * stats.noise(y) * math.sqrt(12.0 / y.size) / abs(head)
        if bound > self.still_tol:  # the noise cannot resolve `still_tol`: a warning that says so
            ev["noise_bound"] = bound
        return ev

    def _no_progress(self, run: Run, steps: np.ndarray, y: np.ndarray) -> dict | None:
        """The evidence when a log too short for the trend test (`schedule_points` to `min_points` points) spans
        `chance_epochs` epochs or more and neither curve improved: the loss ends at or above `still_tol` under its
        start (medians of the first and last `min_repeats` points), and the logged accuracy ends
        no higher than it began. Two curves agreeing over several epochs that nothing improved; one alone, over a
        few noisy points, says too little. Else None."""
        if not (self.schedule_points <= y.size < self.min_points) or (epochs_spanned(run, steps) or 0) < self.chance_epochs:
            return None
        role = next((r for r in ("accuracy", "val_accuracy") if run.has(r)), None)
        if role is None:
            return None
        a = finite_part(*run.arrays(role))[1]
        if a.size < 2 * self.min_repeats:
            return None
        head, tail = stats.start_level(y, self.min_repeats), float(np.median(y[-self.min_repeats:]))
        acc_head, acc_tail = stats.start_level(a, self.min_repeats), float(np.median(a[-self.min_repeats:]))
        if not head > 0 or tail < (1 - self.still_tol) * head or tail > (1 + self.excursion) * head:
            return None  # it fell (or blew up: divergence's)
        if acc_tail > acc_head:
            return None
        return {"first_level": head, "last_level": tail, "relative_change": (tail - head) / head, "no_progress": True,
                "accuracy_series": run.pick(role), "accuracy_first": acc_head, "accuracy_last": acc_tail,
                "epochs": epochs_spanned(run, steps), "points": int(y.size)}

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
        """The evidence when `y` is pinned (`pin`) and did not fall from its first value to the pin (`stats.learned`),
        else None: a loss that fell and then froze is plateau's (`fell_then_froze`), DECISIONS §17."""
        ev = self.pin(y)
        return None if ev is None or stats.learned(y, ev["pinned_value"], self.learned_fall, points=1) else ev

    def fell_then_froze(self, y: np.ndarray) -> dict | None:
        """The one home of "the loss fell, then froze": where it fell from its first value by `learned_fall` (and
        `stats.LEARNED_SIGMAS`: the one boundary, `stats.learned`) to a tail that is pinned (`pin`: one value to the
        last digit) or identical to its fifth digit over its last `frozen_records` or more (`frozen_tail`): it
        learned, then stopped. Plateau's to claim, at any length; a freeze reached with no fall is this detector's.
        The pin's evidence with `frozen_points` (the tail's length) and `exact`, else None."""
        ev = self.pin(y)
        if ev is not None:
            k = int(np.argmin((y == ev["pinned_value"])[::-1])) if ev["pinned_points"] < y.size else y.size
            ev |= {"frozen_points": k, "exact": True}
        else:
            k = self.frozen_tail(y)
            if k == 0 or k == y.size:
                return None
            level = float(np.median(y[-k:]))
            ev = {"first_level": float(y[0]), "last_level": float(y[-1]),
                  "relative_change": (level - float(y[0])) / abs(float(y[0])) if y[0] else math.inf,
                  "pinned_value": level, "pinned_points": k, "significant_digits": significant_digits(level),
                  "points": int(y.size), "frozen_points": k, "exact": False}
        return ev if stats.learned(y, ev["pinned_value"], self.learned_fall, points=1) else None

    def frozen_tail(self, y: np.ndarray) -> int:
        """How many of the last records of `y` are identical to their fifth digit (`identical`), `frozen_records` or
        more and printed finely enough to show that digit (`0.0002` at 4 decimals shows nothing so small), else 0: a
        fixed held-out set scores the same only when the weights no longer change, and batches of different data
        give the same loss to the fifth digit only when the model's output no longer depends on them."""
        k = 0
        for j in range(self.frozen_records, y.size + 1):
            if not self.identical(y[-j:]):
                break
            k = j
        if k and float(np.max(stats.printed_resolution(y[-k:]))) > self.identical_tol * abs(float(np.median(y[-k:]))):
            return 0
        return k

    def pin(self, y: np.ndarray) -> dict | None:
        """The evidence when `y` ends pinned at one value: its last `min_repeats` points and `pinned_share` of all of
        them one non-zero value of `min_digits` significant digits or more (minibatch noise never repeats a loss to
        its fourth digit), not risen to it from half of it or less (a collapse: divergence's). Else None."""
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

    def _val_still(self, v: np.ndarray) -> dict | None:
        """The evidence when a validation loss of `schedule_points` evaluations or more (fewer than the range rule
        needs) spans less than `val_still_tol` of its level across all of them: beside a training loss that does
        not fall, the model did not move (an LR far too small). Else None."""
        if v.size < self.schedule_points:
            return None
        mid = float(np.median(v))
        spread = float(np.max(v) - np.min(v))
        if mid == 0 or spread > self.val_still_tol * abs(mid) or significant_digits(float(v[0])) < self.min_digits:
            return None  # a value printed to fewer digits (0.2) cannot show it stayed within 0.1%
        first, last = float(v[0]), float(v[-1])
        return {"first_level": first, "last_level": last, "relative_change": (last - first) / abs(first),
                "val_spread": spread / abs(mid), "points": int(v.size)}

    def _train_within_noise(self, y: np.ndarray) -> bool:
        """A training loss that moved by `max_train_drop` or more between its first and last tenths, yet never
        learned (`stats.learned`: a fall beyond its noise), nor fell at once or smoothly from its first value: its
        batches scatter, the model may not move. Beside it a validation loss of `min_points` evaluations spanning
        under `val_still_tol` of its level (`_val_still`) is a model whose answers never changed (MSE on unscaled
        targets, an LR far too small); the healthy pool's validation losses all span 2e-3 or more."""
        if y.size < self.min_points or self._train_stands(y) or self._fell_at_once(y) or self._fell_from_first(y):
            return False
        return not stats.learned(y, stats.head_tail_levels(y, self.edge)[1], self.learned_fall)

    def _train_stands(self, y: np.ndarray) -> bool:
        """The training loss does not fall by `max_train_drop` (head to tail levels), or is exactly 0 throughout
        (an empty training loop's accumulator: nothing was trained). One that fell at once from its first point
        (`_fell_at_once`) or smoothly from it, far beyond its noise (`_fell_from_first`), trained."""
        if y.size and np.all(y == 0):
            return True
        if self._fell_at_once(y) or self._fell_from_first(y):
            return False
        head, tail = stats.head_tail_levels(y, self.edge)
        return math.isfinite(head) and head != 0 and (tail - head) / abs(head) > -self.max_train_drop

    def _chance(self, y: np.ndarray, extra: tuple[int, ...] = ()) -> dict | None:
        """The evidence when `y` ends at a chance level ln k (`stats.chance_level`) on its last `min_repeats`
        points and never fell more than `chance_floor` below it (it learned nothing), else None."""
        if y.size < self.min_repeats:
            return None
        k = stats.chance_level(y[-self.min_repeats:], self.chance_rel_tol, extra=extra)
        if (k is None or float(np.min(y)) < math.log(k) * (1 - self.chance_floor) or self._fell_at_once(y)
                or stats.learned(y, float(y[-1]), self.learned_fall)):
            return None  # below chance it learned something; fallen to it from above, it is plateau's (§17)
        first, last = float(y[0]), float(y[-1])
        return {"first_level": first, "last_level": last, "relative_change": (last - first) / abs(first),
                "chance_k": k, "log_k": math.log(k), "chance_points": self.min_repeats, "points": int(y.size)}

    def _stayed(self, y: np.ndarray, head: float) -> bool:
        """Whether a curve stayed where it began, as far as its noise can tell: it did not fall at once from its
        first point (`_fell_at_once`), its smoothed curve never left `excursion` of its start level in between (a
        fall and a rise back is divergence's), and `resolve_sigmas` standard errors of the change a straight line
        fitted over its n points would show (σ·√(12/n), σ the point-to-point noise) fit inside `still_tol` of the
        level: ten points scattered ±30% cannot be told flat from a 10% fall."""
        if self._fell_at_once(y):
            return False
        smooth = stats.rolling_median(y, max(5, int(y.size * self.smooth)))
        if float(np.nanmax(np.abs(smooth - head))) > self.excursion * abs(head):
            return False
        if self._fell_from_first(y):
            return False
        error = stats.noise(y) * math.sqrt(12.0 / y.size)
        return bool(self.resolve_sigmas * error <= self.still_tol * abs(head))

    def _fell_from_first(self, y: np.ndarray) -> bool:
        """Whether the smoothed curve fell `learned_fall` below the first value, by `fell_sigmas` point-to-point
        noise sigmas: a smooth fall over the first records, then a creep back, moved (a first tenth's median hides
        the fall), whatever the levels at its two ends."""
        if y.size < self.min_points:
            return False
        smooth = stats.rolling_median(y, max(5, int(y.size * self.smooth)))
        return stats.learned(y, float(np.nanmin(smooth)), self.learned_fall, self.fell_sigmas, points=1)

    def _fell_at_once(self, y: np.ndarray) -> bool:
        """Whether the first point stands above the median of the next `min_repeats` by `learned_fall` of it and
        `stats.LEARNED_SIGMAS` point-to-point noise sigmas: the loss moved at once (a first epoch's mean that
        includes the fall), then sat; what it fell to is plateau's, not a loss that never moved."""
        if y.size <= self.min_repeats:
            return False
        rest = float(np.median(y[1:1 + self.min_repeats]))
        drop = float(y[0]) - rest
        sigma = stats.noise(y)
        return bool(rest != 0 and drop >= self.learned_fall * abs(rest)
                    and (not sigma > 0 or drop >= stats.LEARNED_SIGMAS * sigma))

    def _chance_start(self, run: Run, steps: np.ndarray, y: np.ndarray) -> dict | None:
        """The evidence when the loss sits at a chance level ln C from its first record to its last: its first
        and last levels within `chance_band` of ln C, its smoothed curve never `chance_floor` away, over at least
        `schedule_points` points and either `min_points` of them, `chance_epochs` epochs, or one value printed
        throughout. C is the class count the config declares (`base.class_count`), else the one the accuracy
        names (median within `accuracy_tol` of 1/C), else the k whose ln k every point matches to its printed
        digits (`stats.chance_level`): `4.600` at every step is ln 100. An accuracy well above 1/C says the
        level is no chance level. Else None."""
        if y.size < self.schedule_points or self._fell_at_once(y):
            return None
        constant = bool(np.all(y == y[0]))
        epochs = epochs_spanned(run, steps)
        if not (constant or y.size >= self.min_points or (epochs or 0) >= self.chance_epochs):
            return None
        acc = accuracy_level(run)
        declared = class_count(run)
        candidates = []
        if declared is not None:
            candidates.append((declared[0], declared[1]))
        if acc is not None and acc > 0 and round(1 / acc) >= 2 and abs(acc * round(1 / acc) - 1) <= self.accuracy_tol:
            candidates.append((int(round(1 / acc)), "accuracy"))
        printed = float(np.max(stats.printed_resolution(y)))
        k = stats.chance_level(y, self.chance_rel_tol, extra=(declared[0],) if declared else (), resolution=printed)
        if k is not None:
            candidates.append((k, "printed" if printed > self.chance_rel_tol * math.log(k) else "value"))
        head, tail = stats.start_level(y), float(np.median(y[-self.min_repeats:]))
        window = max(3, int(y.size * self.smooth)) if y.size >= self.min_points else 1
        smooth = stats.rolling_median(y, window) if window > 1 else y
        for c, source in candidates:
            log_c = math.log(c)
            if acc is not None and acc * c > 1 + 5 * self.accuracy_tol:
                continue  # the model predicts better than chance: this is no chance level
            near = self.chance_band * log_c + (printed if source == "printed" else 0.0)
            if abs(head - log_c) > near or abs(tail - log_c) > near:
                continue
            if float(np.nanmax(np.abs(smooth - log_c))) > max(self.chance_floor * log_c, near):
                continue
            first, last = float(y[0]), float(y[-1])
            return {"first_level": first, "last_level": last, "relative_change": (last - first) / abs(first),
                    "chance_k": int(c), "log_k": log_c, "chance_from_start": True, "chance_source": source,
                    "max_deviation": float(np.nanmax(np.abs(smooth - log_c))) / log_c, "smoothed_over": window,
                    "accuracy_median": acc,
                    "epochs": epochs, "printed_resolution": printed, "points": int(y.size)}
        return None

    def _chance_most(self, run: Run, steps: np.ndarray, y: np.ndarray) -> dict | None:
        """The evidence when the loss sits at ln C over most of the run, whatever its first window did: split into
        `chance_windows` windows (one point each in a shorter log), every window from `chance_from` of the run on
        has a mean near ln C (`_near_chance`), and so do the pooled points of the later half of those windows (a slow fall in wide per-step noise shows there). C is declared by the
        config or named by an accuracy at 1/C (`_candidates`), else 2 from `binary_points` points (a binary or
        pairwise loss: ln 2, the fewest classes, is no level a loss wanders around by chance for most of a run); an
        accuracy well above 1/C vetoes it. A per-step loss
        that scatters ±50% around ln 2 has a noisy first window and noisy edges; its window means say it never
        left chance. From `min_points` points. Else None."""
        if y.size < self.min_points:
            return None
        acc = accuracy_level(run)
        windows = np.array_split(y, min(self.chance_windows, y.size))
        for c, source in self._candidates(run, acc) + ([(2, "binary")] if y.size >= self.binary_points else []):
            log_c = math.log(c)
            if acc is not None and acc * c > 1 + 5 * self.accuracy_tol:
                continue  # the model predicts better than chance: this is no chance level
            # with no class count from the run, every window: a loss that fell onto 0.69 is no binary guess
            late = windows[0 if source == "binary" else int(math.ceil(self.chance_from * len(windows))):]
            means = np.array([float(np.mean(w)) for w in late])
            errors = np.array([float(np.std(w)) / math.sqrt(w.size) if w.size > 1 else 0.0 for w in late])
            end = np.concatenate(late[len(late) // 2:])  # the run's end, pooled: a slow fall shows there
            if not (self._near_chance(means, errors, log_c)
                    and self._near_chance(np.array([np.mean(end)]), np.array([np.std(end) / math.sqrt(end.size)]),
                                          log_c)):
                continue
            first, last = float(y[0]), float(y[-1])
            return {"first_level": first, "last_level": last, "relative_change": (last - first) / abs(first),
                    "chance_k": int(c), "log_k": log_c, "chance_most": True, "chance_source": source,
                    "accuracy_median": acc, "windows": len(windows), "windows_at_chance": len(late),
                    "window_means_low": float(means.min()), "window_means_high": float(means.max()),
                    "from_step": int(steps[y.size - sum(w.size for w in late)]),
                    "lr_warming_up": warming_up(run, steps), "points": int(y.size)}
        return None

    def _at_ln2(self, run: Run, y: np.ndarray) -> dict | None:
        """The evidence when every one of at least `min_points` points lies within `ln2_band` of ln 2, in an excerpt
        too: a binary or pairwise loss's uniform guess, held to its third digit at every record, is no level a
        learning model passes through that slowly. Not where the config declares another class count or an
        accuracy is well above 1/2. Else None."""
        if y.size < self.min_points:
            return None
        declared = class_count(run)
        acc = accuracy_level(run)
        if (declared is not None and declared[0] != 2) or (acc is not None and acc * 2 > 1 + 5 * self.accuracy_tol):
            return None
        log2 = math.log(2)
        dev = float(np.max(np.abs(y - log2))) / log2
        if dev > self.ln2_band:
            return None
        first, last = float(y[0]), float(y[-1])
        return {"first_level": first, "last_level": last, "relative_change": (last - first) / abs(first),
                "chance_k": 2, "log_k": log2, "ln2_deviation": dev, "low": float(np.min(y)), "high": float(np.max(y)),
                "accuracy_median": acc, "points": int(y.size)}

    def _near_chance(self, means: np.ndarray, errors: np.ndarray, log_c: float) -> bool:
        """Every mean within two of its standard errors of ln C, or within `window_band` of it below (a model that
        learned anything sits below a uniform guess's loss) and `chance_above` above (no better than the guess)."""
        low = np.maximum(self.window_band * log_c, 2 * errors)
        high = np.maximum(self.chance_above * log_c, 2 * errors)
        return bool(np.all((means >= log_c - low) & (means <= log_c + high)))

    def _candidates(self, run: Run, acc: float | None) -> list[tuple[int, str]]:
        """The class counts a chance level may be taken from: the one the config declares, then the one an accuracy
        names (its median within `accuracy_tol` of 1/C)."""
        declared = class_count(run)
        out = [(declared[0], declared[1])] if declared is not None else []
        if acc is not None and acc > 0 and round(1 / acc) >= 2 and abs(acc * round(1 / acc) - 1) <= self.accuracy_tol:
            out.append((int(round(1 / acc)), "accuracy"))
        return out

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
        if stats.learned(y, tail, self.learned_fall) or not self._stayed(y, head):
            return None  # it fell from its first points, then stalled: plateau's (the same boundary), not never moved
        slope, _ = stats.theil_sen(steps, y)
        trend = stats.mann_kendall(y, steps)
        return {"first_level": head, "last_level": tail, "relative_change": rel, "min_smoothed": low,
                "slope_per_step": slope, "mk_p": trend.p, "mk_tau": trend.tau, "points": int(y.size)}


def shortest(x: float) -> str:
    """`x` as written at its shortest: a float32 (TensorBoard's scalars) at its own, `1.4267`, not 1.4266999959945679."""
    single = np.float32(x)
    return repr(float(str(single))) if float(single) == x else repr(float(x))


def significant_digits(x: float) -> int:
    """Significant digits of `x` as written at its shortest (`6.90776` → 6, `0.0012` → 2, `100.0` → 1); a
    float32 (TensorBoard's scalars) at its own shortest, so float32(0.01) is `0.01`, not 0.009999999776."""
    single = np.float32(x)
    text = repr(abs(float(x))) if float(single) != x else np.format_float_positional(abs(single), unique=True)
    mantissa = text.split("e")[0].replace(".", "")
    return len(mantissa.strip("0"))



def warming_up(run: Run, steps: np.ndarray) -> bool:
    """Whether the LR logged across `steps` never falls, ends above where it began and still rises over its last
    third of records: a log stopped while its warmup still ran, too early to say the loss never moved (a warmup
    that reached its peak and held it for a third of the log is over)."""
    if not run.has("lr") or steps.size == 0:
        return False
    ls, lr = finite_part(*run.arrays("lr"))
    at = lr[(ls >= steps[0]) & (ls <= steps[-1])]
    return bool(at.size >= 2 and at[-1] > at[0] and np.all(np.diff(at) >= 0)
                and at[-1] > at[-max(2, at.size // 3)])


def shows_start(run: Run, steps: np.ndarray) -> bool:
    """Whether the loss over `steps` shows where the run began: its first printed epoch (else a logged epoch series)
    is the first (0 or 1), or, with no epoch, the axis is a logged step (how far in it opens is `steps_open_late`'s to
    say, as for every within-noise rule). An ordinal axis with no epoch says nothing of where the run began (an
    excerpt pasted from epoch 17 reads the same)."""
    printed = [e for e, _ in run.counters(run.pick("loss"), [int(s) for s in steps]).values() if e is not None]
    if printed:
        return min(printed) <= 1
    if run.has("epoch") and steps.size:
        es, e = finite_part(*run.arrays("epoch"))
        e = e[(es >= steps[0]) & (es <= steps[-1])]
        if e.size:
            return bool(e[0] < 2)
    return not run.on_line_axis(run.pick("loss"))


def epochs_spanned(run: Run, steps: np.ndarray) -> int | None:
    """How many epochs the loss's points span: from the counters its lines print (`Epoch 3/30`), else from a
    logged epoch series over its steps; None when neither says."""
    printed = {e for e, _ in run.counters(run.pick("loss"), [int(s) for s in steps]).values() if e is not None}
    if printed:
        return int(max(printed) - min(printed) + 1)
    if run.has("epoch") and steps.size:
        es, e = finite_part(*run.arrays("epoch"))
        e = e[(es >= steps[0]) & (es <= steps[-1])]
        if e.size:
            return int(math.floor(float(e.max())) - math.floor(float(e.min())) + 1)
    return None


def accuracy_level(run: Run) -> float | None:
    """The median of the training accuracy, else of the validation accuracy, as a share (a percentage read as one);
    None without one."""
    for role in ("accuracy", "val_accuracy"):
        if run.has(role):
            a = run.arrays(role)[1]
            a = a[np.isfinite(a)]
            if a.size:
                level = float(np.median(a))
                return level / 100 if 1 < level <= 100 else level
    return None


def decayed_tail(run: Run, steps: np.ndarray, fall: float = 0.05) -> bool:
    """Whether the log is an excerpt from the end of a schedule: it opens well into training (`opens_late`) and
    the LR falls across it by `fall` or more. A loss that holds its level there has converged as the LR ran out; it
    says nothing of a loss that never moved (a stuck loss in an excerpt under a constant LR is still judged)."""
    if not run.has("lr"):
        return False
    lr = run.arrays("lr")[1]
    lr = lr[np.isfinite(lr)]
    if lr.size < 2 or not (lr[0] > 0 and lr[-1] <= (1 - fall) * lr[0]):
        return False
    return opens_late(run, steps)


def unseen_start(run: Run, steps: np.ndarray, share: float = 0.5) -> bool:
    """Whether the log is an excerpt that opens later than it lasts, by its epochs (`opens_late` at `share`: more of
    the run lies before it than in it): where the loss began is not in it, so a level held over it within its noise
    cannot be told from a converged one, whatever LR it prints (a constant LR says nothing of where the loss
    started; 0 of the 849 pooled runs change without the LR exception it had). An excerpt that shows more than it
    hides still shows a loss that did not move. The pinned, constant and chance rules still speak: their levels say
    it at any point."""
    return opens_late(run, steps, share, by_step=False)

