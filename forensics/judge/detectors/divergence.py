"""divergence: the loss rises from its minimum and does not come back."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import polars as pl

from forensics.judge import stats
from forensics.judge.detectors.adversarial import discriminator_wins
from forensics.judge.detectors.flat_loss import FlatLoss
from forensics.judge.detectors.base import (MECHANISM, by_launch, class_count, finite_part, gan_pair, level_of, point,
                                            reinforcement_learning, saturates_at_one, src, too_short, critic_grows)
from forensics.judge.detectors.masked_nonfinite import zeroed
from forensics.judge.findings import Finding
from forensics.judge.numbers import ratio
from forensics.judge.run import Run
from ingest.roles import words


# A loss weight or coefficient (`kl_weight`, `beta`, `anneal`): one logged from 0 and rising makes the total rise.
RAMP_WORDS = frozenset({"weight", "beta", "coef", "coeff", "anneal", "annealing", "lambda"})


def _unmasked(run: Run) -> tuple[np.ndarray, np.ndarray]:
    """The training loss with every 0.0 that hides a NaN (`masked_nonfinite.zeroed`) read as the NaN it was: a
    blow-up followed by such zeros ends in the NaN, it did not come back."""
    steps, values = run.arrays("loss")
    hidden = zeroed(run)
    return steps, (np.where(hidden, np.nan, values) if hidden.any() else values)


@dataclass(frozen=True)
class Divergence:
    """The loss rises and does not come back, or is already blown up when the log starts.

    Detects: on the finite part of the loss (before any NaN), a rise from the smoothed minimum (centred rolling
    median over `smooth` of the points) to the end of at least `min_growth` of the minimum's magnitude and
    `min_recovered` of the earlier drop, from `min_points` points, that is real by one of: a Mann–Kendall trend
    after the minimum at `p` (over `min_points_after` points); a NaN after it, or a last point `end_jump` × every
    point since the minimum (the log ends on a blow-up); a step up of `step_sigmas` log-scale noise sigmas that
    holds above its midpoint; or a tail above the minimum's points by Mann–Whitney at `p`.
    In a log of up to `short_max` points: a jump to `short_jump` × a positive minimum that `min_jump_points` later
    points hold; otherwise the rise must also be `short_sigmas` × its point noise, and a rise too short for the
    trend test counts when the validation loss ends `witness_growth` above its minimum over `witness_points`.
    A slow drift: a rise of `drift_growth` with Kendall τ ≥ `drift_tau` over `drift_points` points and `drift_share`
    of the log. A loss above `blown_level` at every point blew up before the log began, where something beside its
    scale says so (`_blown_shows`: a NaN after it, a rising trend, a classifier's loss). In a reinforcement-learning
    run (`base.reinforcement_learning`) only an objective above `rl_blown` at every record (`_rl_blown`): an agent's
    losses chase moving targets, so their rise, fall or swings are never read as divergence; its reward is, where
    the agent gets worse (`_reward_lost`).
    Effect size first, at any length: a log whose last points are `glaring` × the median of the rest
    (`witnessed_glaring` × with a validation blow-up too), or a loss rising at each of its last `rising_points` by
    `rising_growth` while the validation loss rises at each of its last `val_rising_points` by `val_rising_growth`.
    A late rise: a positive loss rising at each of its last `late_rise_points` records or more to `late_rise` × its
    (smoothed) minimum, above every point since it (with log-scale point noise of `wide_spread`, above every point
    past the first three), giving back `min_recovered` of its earlier drop; or rising at each of its last
    `climb_points` records or more by `climb_rise` × where that climb began, to the highest point of the log.
    The same late climb not at every record, with the gradient norm climbing too: its last `late_rise_points` records
    or more all above every point between the (smoothed) minimum and them, the last one their highest and
    `late_rise` × the minimum, while the gradient norm ends at its highest, `grad_climb` × its median before the climb.
    A level that moved up, in a log of up to `short_max` points: its last `level_up_points` records or more, their
    median `level_up` × the median of as many records before them and every one above all of those, giving back
    `min_recovered` of the earlier drop.
    A rise held against the run's own scatter, at any length (`_held_rise`): its last `held_points` records or more
    each `held_rise` × the highest of the level before them (`held_ref_points` to `held_ref_max` records), the rise
    `held_sigmas` × that level's scatter (`held_max_scatter` at most: a level), at no LR that jumps back up (a warm restart). A warmup blow-up: a loss
    climbing at its last records to `warmup_blow_up` × its minimum, its highest, while the LR rises `lr_climb` ×.
    A cross-entropy on its log scale (a perplexity logged as its exponential) that gives back `given_back` of its
    fall, its last `given_back_points` records above the fall's midpoint or an accuracy falling with it.
    A rise into the NaN: a loss that stays non-finite to the end once it turns so, every finite point since it first
    stood `dies_high` × its (smoothed) minimum held there (`min_jump_points` or more).
    A step up that holds: every point over the last `step_share` of the log or more above every point from the
    (smoothed) minimum to the step, the step `step_sigmas` × the log-scale noise after it and `min_recovered` of the
    earlier drop, with every evaluation since above every evaluation before (the validation loss stepped up too)
    and no LR rise at the step (a scheduled restart).
    A climb under a rising LR: the (smoothed) loss climbs to `lr_climb` × its minimum while the logged LR rises
    `lr_climb` × (a warmup to a peak too high), and every evaluation after the validation minimum, which comes before
    that peak, stands `lr_climb_val` × above it (at least `min_jump_points` of them): the model got worse and stayed so.
    With log-scale point noise of `wide_spread` or more, the tail must also stand above the points before the minimum.
    A minimum no deeper under the opening level than the points' chance low, and an end no higher above it (within
    `lucky_reach` × σ·√(2 ln n) on the log scale: `_lucky_dip`), is the scatter of a loss that never moved.
    Blown up from the start (`_above_start`): a loss that never fell, `above_start` × its untrained level (its first
    value, or log C: `_reference`) at `above_share` of its later records (`above_points` at least) and over its last
    quarter, not falling there, with no loss weight ramping up from 0 (`RAMP_WORDS`). Never better than its start
    (`_never_better`): a positive loss whose every later record stands above its first (`never_points` at least),
    its last quarter's median `never_better` × that first value, the rise `short_sigmas` × its log-scale point noise,
    not falling over its later records, or falling but still `never_orders` × that first value and more than the
    logging interval explains (a blow-up at the first steps that the log never comes back from).
    Unbounded below (`_runs_below`): a loss below 0 over its whole last third, fallen `below_growth` × the magnitude
    of its first records, still falling there at `below_keep` of its whole-run pace: it runs away, it does not converge.
    The share of a fall given back is read on a log scale once the loss fell more than a decade (`gave_back`); a
    rise that only the log scale makes, under an LR that restarts (`_lr_restarts`), is a warm restart's.
    None after a fall of more than a decade where the rise is under `tiny_rise` of the first value
    (`_near_zero_wander`): a converged loss wandering ×4-×8 over a minimum near 0. None at a floor (`_at_floor`):
    every point under `floor_share` of the untrained level and the end no higher than the points before the lowest
    dip, the "rise" is the floor's own scatter (the validation rise is overfitting's).
    A validation rise under a falling training loss is `overfitting`: the validation loss is only ever a witness.
    A logged 0.0 that hides a NaN (`masked_nonfinite.zeroed`) is read as that NaN: a blow-up before it ends in it.
    A GAN's pair (`base.gan_pair`), where the discriminator does not win: either loss ending on a blow-up `glaring` ×
    the median of its earlier points and × its first value (`_pair_blown`), before any NaN.
    A rise into a NaN spans `into_nan_moves` typical moves (`_rises_into_nan`); a swing within the noise is nan_loss's.
    None on a "loss" that saturates at 1 like a score (`base.saturates_at_one`: an MRR column headed "loss").
    A warning, not critical, where an accuracy improves across the rise (`_contradicted`): the objective grew, the
    model did not get worse.
    Launches appended to one log are judged one by one (`base.by_launch`).
    Why: a loss that climbs back is unstable training; it usually ends in NaN.
    Evidence: onset step (the minimum), minimum, final level, growth factor, Theil–Sen slope after onset, p,
    Kendall τ and whether it is a drift, the levels the summary quotes and the lowest logged point after the onset,
    and the validation witness (its minimum, step, final level) when it took one.
    False alarms: 0 of the 406 healthy runs it could check (benchmarks/calibrate.py); 0 of the 36 real ones with a loss;
    the critic beside a standing reward: 0 of the 40 healthy shared runs and of the 168 healthy restored runs of
    set12-13 and set16-19; the held rise's level (`held_max_scatter`) only removes claims (one false critical gone);
    the late rise and the moved level: 0 of the 92 healthy real runs of the dev sets, even at ×1.5 and ×1.3; the
    rise into the NaN, the held step, the climb under a rising LR and beside the gradient norm: 0 of the 136
    healthy real runs of the eleven development sets; the held rise, the warmup blow-up and the share given back:
    0 of the 179 healthy runs of the fifteen labelled sets; the rise from the start, the log-scale share, the floor
    and the held rise at ×1.4: 0 of the 252 healthy runs of the nineteen label files; never better than its start
    and the climb to the log's highest: 0 of the 291 (339) healthy pool runs with 10 (5) records (docs/engine.md).
    The into-NaN moves and the score at 1 only remove claims: 2 false criticals of set17 gone, no hit lost there or on
    the three shared sets and set14/16. The GAN pair's blow-up: 0 new claims on the 40 healthy shared runs and the
    292 healthy runs of set12-18. An agent's reward that gets worse (`_reward_lost`): 0 new claims on the 40 healthy
    shared runs and the 119 healthy restored runs of set12-13, 16-19 and 21-22 (first labels); 3 runs named right.
    A percentage at exactly 100 read as a score (`saturates_at_one`) only removes claims: a critical one on a
    healthy run of set23 gone. Unbounded below: 0 new claims on the 40 healthy shared runs and the 77 healthy restored runs of set18-19 and
    21-22; 1 run named right.
    """

    kind: ClassVar[str] = "divergence"
    stage: ClassVar[int] = MECHANISM
    reads_curve: ClassVar[bool] = True  # judges the shape of the training-loss curve
    reads_shape: ClassVar[bool] = True  # reads the epoch aggregate where one is logged (`base.epoch_view`)
    joins_chain: ClassVar[bool] = True  # one event with the NaN its step range holds
    # the training loss; without one, a validation loss judged as validation (`_validation_alone`)
    requires: ClassVar[tuple[str, ...]] = ()
    reads_validation_alone: ClassVar[bool] = True
    reads_loss_level: ClassVar[bool] = True  # not on a GAN's adversarial losses (base.adversarial_loss)
    judges_gan_pair: ClassVar[bool] = True  # a GAN's two losses, as a pair: the discriminator wins (detectors.adversarial)
    judges_rl: ClassVar[bool] = True  # in an RL run: an objective blown up past any reward scale (`_rl_blown`), a
    # critic that grows while the reward stands (`_critic_diverges`), a reward that gets worse (`_reward_lost`)
    smooth: float = 0.04  # smoothing window as a fraction of the points
    min_growth: float = 0.5  # final − min ≥ this × |min|: a user acts on a loss half again above its best
    min_recovered: float = 0.3  # final − min ≥ this × (initial − min): it gave back a good part of its progress
    p: float = 0.01  # Mann–Kendall p after the minimum; exact for short logs
    min_points_after: int = 5  # a trend needs this many points after the minimum (unless NaN follows)
    min_points: int = 3  # fewer finite points cannot separate a rise from one noisy value
    short_jump: float = 3.0  # a jump of ×3 over the minimum that every later point holds: divergence at any length
    min_jump_points: int = 2  # ... shown by at least this many points (one is where the log ends: `end_jump`)
    short_max: int = 20  # ... in a log of at most this many points (longer ones have the trend tests)
    step_sigmas: float = 8.0  # a step up that stays: rise ≥ this × the log-scale noise after it
    min_step_after: int = 3  # ... and stays for at least this many points
    blown_level: float = 1e8  # no mean-reduced loss of a live model sits above this at every logged point
    rl_blown: float = 1e12  # an RL objective this high at every record (healthy agents of the pool: 445 at most)
    end_jump: float = 5.0  # a last point this many times everything since the minimum: the log ends on a blow-up
    short_sigmas: float = 5.0  # in a log of ≤ `short_max` points the rise is ≥ this × the noise after the minimum
    spread_sigmas: float = 2.0  # in a longer log, by the trend or level-shift test, ≥ this × that noise
    wide_spread: float = 0.3  # points swinging ×1.35 point to point (log noise 0.3) must rise above the level before the minimum
    drift_growth: float = 0.1  # a slow drift: a rise of +10% of the minimum ...
    drift_tau: float = 0.7  # ... near-monotone (Kendall's τ of the points after the minimum) ...
    drift_points: int = 8  # ... over at least this many points ...
    drift_share: float = 0.25  # ... and this share of the log
    witness_growth: float = 0.2  # a short log's rise shown by the validation loss too: it ends ×1.2 its minimum ...
    witness_points: int = 3  # ... over at least this many evaluations since the training minimum
    glaring: float = 100.0  # a log that ends on its last points ×100 the median of the rest: a blow-up, at any length
    witnessed_glaring: float = 10.0  # ... ×10 when the validation loss ends on a ×10 blow-up too
    rising_points: int = 5  # a loss that rises at every one of its last 5 points or more ...
    rising_growth: float = 0.1  # ... by 10% of where that rise began ...
    val_rising_points: int = 3  # ... while the validation loss rises at every one of its last 3 evaluations ...
    val_rising_growth: float = 0.05  # ... by 5%: two curves climbing together is no noise
    late_rise_points: int = 3  # a loss rising at each of its last 3 records or more ...
    late_rise: float = 5.0  # ... to ×5 its (smoothed) minimum: no noise ends on such a climb
    climb_points: int = 5  # ... or at each of its last 5 records (the first of them counted) ...
    climb_rise: float = 1.5  # ... ×1.5 in all, to the highest of the log (healthy pool: 0 of 339, none at ×1.2)
    level_up_points: int = 3  # a short log whose last 3 records or more ...
    level_up: float = 2.0  # ... all sit ×2 the level of as many records before them: the loss moved up and stayed
    climbs_on: float = 2.0  # a jump whose last point is ×2 the jump's first: the summary quotes where it ends
    dies_high: float = 2.0  # a loss that stays non-finite to the end after every point since it first stood ×2 ...
    # ... its minimum (`min_jump_points` of them) held there: the rise that ended in the NaN, at any length
    step_share: float = 0.25  # a step up held by every point over the last quarter of the log or more ...
    grad_climb: float = 2.0  # a late climb shown by a gradient norm ×2 its level before the climb, at its highest
    lr_climb: float = 2.0  # a loss climbing ×2 its (smoothed) minimum while the LR rises ×2 (a warmup too high) ...
    lr_climb_val: float = 1.5  # ... beside a validation loss ×1.5 its minimum at every evaluation since
    held_rise: float = 1.4  # the last `held_points` records or more each ×1.4 the highest of the level before ...
    held_points: int = 2
    held_ref_points: int = 3  # ... a level of 3 records or more (up to `held_ref_max`) ...
    held_ref_max: int = 10
    flat_loss: FlatLoss = FlatLoss()  # whether an agent's reward stands (`_critic_diverges`), as this analysis sets it
    held_max_scatter: float = 1.0  # ... a level whose range is its median or less: records that span ×10 around a
    # median near 0 (exact zeros between real losses, an fp32 cross-entropy underflowing) hold no level to rise from
    held_sigmas: float = 10.0  # ... the rise 10 × that level's own scatter (its range over its median): glaring
    warmup_blow_up: float = 4.0  # a loss climbing at its last records to ×4 its minimum while the LR rises ×2
    given_back: float = 0.5  # a log-scale loss (a perplexity's log) ending half its fall back above its minimum ...
    given_back_points: int = 3  # ... its last 3 records above the fall's midpoint, or an accuracy falling with it
    below_growth: float = 4.0  # a loss that falls below 0 by 4 × its first records' magnitude ...
    below_keep: float = 0.5  # ... still falling over its last third at half its average pace or more: unbounded below
    above_start: float = 3.0  # a loss ×3 its untrained level (its first value, log C) ...
    above_share: float = 0.8  # ... at 80% of its later records or more ...
    above_points: int = 5  # ... 5 at least: it blew up from the start and never fell
    floor_share: float = 0.02  # a loss under 2% of its untrained level at every point sits at its floor
    never_better: float = 1.4  # a loss never better than its first record, its last quarter ×1.4 that record ...
    never_points: int = 10  # ... from 10 records (healthy pool: 0 of 291, none above ×1.02)
    never_orders: float = 1e3  # ... or its last quarter three orders of magnitude above it, falling or not, and more
    # than the logging interval (in steps) × it: no first record logged too low by that interval explains it (pool:
    # 0 new claims on the 152 healthy runs of the shared and development sets)
    tiny_rise: float = 0.05  # after a fall of decades, a rise under 5% of the first value is no divergence
    # (pool: 2 false claims, ×3.8 and ×8 over a minimum near 0, at 2% and 0.3%; the nearest hit at 91%)
    lucky_reach: float = 1.0  # a dip and an end within this × σ·√(2 ln n) of the opening level (`_lucky_dip`)
    into_nan_moves: float = 2.0  # a rise into a NaN spans 2 typical point-to-point moves or more (`_rises_into_nan`)

    def unavailable(self, run: Run) -> str | None:
        if not run.has("loss"):
            return None if self._validation_alone(run) is not None else run.missing_message("loss")
        # Under `min_points` only a blow-up the log ends on can speak (at two points): the detector counts as run
        # (for the verdict) only when it does, so a short log that did not blow up stays "too short".
        short = too_short(run, "loss", self.min_points)
        if short and self._glaring(run, *self._alive(*_unmasked(run))[:2]) is None:
            return short
        return None

    @staticmethod
    def _alive(all_steps: np.ndarray, all_values: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
        """The finite part of the loss (steps, values) and whether a non-finite value follows it."""
        steps, y = finite_part(all_steps, all_values)
        keep = np.isfinite(y)
        return steps[keep], y[keep], steps.size < all_steps.size

    def check(self, run: Run) -> Iterator[Finding]:
        pair = gan_pair(run)
        if pair is not None:  # a GAN's losses are read as a pair, never as a training loss
            wins = list(discriminator_wins(self, run, pair))
            yield from wins or self._pair_blown(run, pair)
            return
        rl = reinforcement_learning(run)
        if rl is not None:  # an agent's objectives need not fall: only a level none of them reaches alive
            blown = list(self._rl_blown(run, rl.objectives)) or list(self._critic_diverges(run, rl))
            yield from blown or self._reward_lost(run)
            return
        if not run.has("loss"):
            alone = self._validation_alone(run)
            if alone is not None:
                yield alone
            return
        all_steps, all_values = _unmasked(run)  # read once: the hidden-NaN test reads three series
        steps, y, nan_follows = self._alive(all_steps, all_values)
        if not nan_follows and saturates_at_one(y):
            return  # a score's learning curve under a loss's name: higher is better, its rise is the model learning
        dies = nan_follows and not np.any(np.isfinite(all_values[steps.size:]))  # non-finite to the end
        n = y.size
        if n >= self.min_points and float(np.min(y)) > self.blown_level and self._blown_shows(run, steps, y, nan_follows):
            yield self._blown(run, steps, y)
            return
        # Each launch appended to the log on its own (`base.by_launch`): a new launch starting again from the
        # initial loss is no rise from the last one's minimum. Only the last one can end on a NaN.
        pieces = by_launch(run, "loss", steps, y)
        for k, (steps, y) in enumerate(pieces, 1):
            yield from self._judge(run, steps, y, nan_follows and k == len(pieces), dies and k == len(pieces))

    def _judge(self, run: Run, steps: np.ndarray, y: np.ndarray, nan_follows: bool,
               dies: bool = False) -> Iterator[Finding]:
        """The rules of the docstring on one launch's finite loss."""
        n = y.size
        # The trend tests first (their onset is the minimum the rise starts from); where they cannot speak, the
        # effect-size rules: a blow-up the log ends on, a rise at every point beside a rising validation loss.
        found = list(self._trend(run, steps, y, nan_follows)) if n >= self.min_points else []
        if not found:
            glaring = self._glaring(run, steps, y)
            if glaring is not None:
                found = [self._glaring_finding(run, steps, y, glaring, nan_follows)]
        if not found and n >= self.min_points:
            found = [f for f in [self._rising(run, steps, y, nan_follows)] if f is not None]
        if not found and n >= self.min_points:
            found = [f for f in [self._late_rise(run, steps, y, nan_follows)] if f is not None]
        if not found and n > self.late_rise_points:
            found = [f for f in [self._grad_climb(run, steps, y, nan_follows)] if f is not None]
        if not found and self.min_points <= n <= self.short_max:
            found = [f for f in [self._level_up(run, steps, y, nan_follows)] if f is not None]
        if not found and n >= self.held_ref_points + self.held_points:
            found = [f for f in [self._held_rise(run, steps, y, nan_follows)] if f is not None]
        if not found and n >= self.min_points:
            found = [f for f in [self._warmup_blow_up(run, steps, y, nan_follows)] if f is not None]
        if not found and n >= self.min_points:
            found = [f for f in [self._gives_back(run, steps, y, nan_follows)] if f is not None]
        if not found and dies and n >= 2:
            found = [f for f in [self._dies_high(run, steps, y)] if f is not None]
        if not found and n >= 2 * self.min_step_after:
            found = [f for f in [self._step_up(run, steps, y, nan_follows)] if f is not None]
        if not found and n >= 2 * self.min_points_after:
            found = [f for f in [self._lr_climb(run, steps, y, nan_follows)] if f is not None]
        if not found and n > self.above_points:
            found = [f for f in [self._above_start(run, steps, y, nan_follows)] if f is not None]
        if not found and n >= self.min_points:
            found = [f for f in [self._runs_below(run, steps, y)] if f is not None]
        if found and not nan_follows and self._at_floor(run, y):
            return  # a trained loss wandering at its floor: the "rise" is its own scatter
        if not nan_follows:  # a converged loss wandering near 0 after a fall of decades: a rise of a few % of its start
            found = [f for f in found if not self._near_zero_wander(y, f)]
        for f in found:
            yield self._contradicted(run, f) if not nan_follows else f

    def _pair_blown(self, run: Run, pair) -> Iterator[Finding]:
        """A GAN whose generator or discriminator loss blows up by orders of magnitude where the log ends, whatever
        the game's balance: its last points (finite, before any NaN) `glaring` × the median of its earlier ones
        (`stats.blow_up_at_end`) and `glaring` × its first value too (an adversarial loss near 0 whose last batch
        costs ×100 its median has not left its starting scale). One finding, on the side that blew up first."""
        for name in (pair.generator, pair.discriminator):
            f = run.series_named(name)
            all_steps, all_values = f["step"].to_numpy(), f["value"].fill_null(np.nan).to_numpy()
            steps, y = finite_part(all_steps, all_values)
            hit = stats.blow_up_at_end(y, self.glaring)
            if hit is None or not float(y[-1]) >= self.glaring * float(y[0]) > 0:
                continue
            factor, k = hit
            ref = float(np.median(y[:-k]))
            onset = int(steps[-k - 1])
            dies = steps.size < all_steps.size
            ev = {"shape": "blown_up", "generator": pair.generator, "discriminator": pair.discriminator,
                  "series_judged": name, "onset_step": onset, "reference_level": ref, "initial_level": float(y[0]),
                  "final_level": float(y[-1]), "growth_factor": factor, "blow_up_points": k,
                  "last_finite_step": int(steps[-1]), "ends_nonfinite": dies}
            yield Finding.of(self, severity="critical", step=onset, step_end=int(steps[-1]), series=name, evidence=ev,
                             sources=(src(run, name, steps),),
                             summary=(f"{name} blows up where the log ends: {y[-1]:.4g} at "
                                      f"{run.printed_span(name, steps[-1])}, {ratio(factor)} the median {ref:.4g} of "
                                      f"its {y.size - k} earlier points and {ratio(float(y[-1]) / float(y[0]))} its "
                                      f"first value {y[0]:.4g} at {run.printed_span(name, steps[0])}" + (" and then turns non-finite" if dies else "")
                                      + ": the adversarial game has diverged"))
            return

    def _contradicted(self, run: Run, finding: Finding) -> Finding:
        """The finding as a warning where an accuracy improves across the rise: a trend up (Mann–Kendall at `p`)
        over `min_points_after` records or more from the onset, ending above its value there. The model got
        better while the objective grew (a regulariser's weight ramped up, a term rescaled): the curve alone says
        divergence, the model does not, so it is no critical."""
        onset, end = finding.step, finding.step_end
        for role in ("val_accuracy", "accuracy"):
            if onset is None or not run.has(role):
                continue
            s, v = finite_part(*run.arrays(role))
            keep = np.isfinite(v) & (s >= onset) & (s <= (end if end is not None else s.max(initial=onset)))
            s, v = s[keep], v[keep]
            if v.size < self.min_points_after or float(v[-1]) <= float(v[0]):
                continue
            trend = stats.mann_kendall(v, s)
            if trend.z > 0 and trend.p < self.p:
                name = run.pick(role)
                return dataclasses.replace(finding, severity="warning", evidence=finding.evidence | {
                    "accuracy_improves": name, "accuracy_at_onset": float(v[0]), "accuracy_last": float(v[-1]),
                    "accuracy_trend_p": trend.p}, sources=(*finding.sources, src(run, role, s)),
                    summary=(f"{finding.summary}; yet {name} improves over the same steps, {v[0]:.4g} at step "
                             f"{s[0]} to {v[-1]:.4g} at step {s[-1]} (Mann–Kendall p={trend.p:.1g}): the objective "
                             f"grew while the model got better (a growing loss term?), so not critical"))
        return finding

    def _trend(self, run: Run, steps: np.ndarray, y: np.ndarray, nan_follows: bool) -> Iterator[Finding]:
        """The rise from the smoothed minimum, by the trend, step, level-shift and witness tests (docstring)."""
        n = y.size
        sm = stats.rolling_median(y, max(3, int(n * self.smooth))) if n >= 12 else y
        imin = int(np.nanargmin(sm))
        after = y[imin:]
        lo = float(sm[imin])
        head, _ = stats.head_tail_levels(y)
        held = self._held_jump(after, lo) if n <= self.short_max and not np.any(y[:imin] >= self.short_jump * lo) else None
        if held is not None:
            yield self._jump(run, steps, y, imin, lo, held, nan_follows)
            return
        if after.size < 2 or (after.size < self.min_points_after and not nan_follows
                              and after.size < self.min_step_after + 1):
            return
        # The final level: the last finite value when the loss then dies (its level at death), else a tail median.
        tail_n = max(2, min(after.size // 4, n // 20))
        # A log that ends on a blow-up (the job died there: a loss guard, an OOM, a kill) ends like one that
        # turns non-finite: its last point `end_jump` × above everything since the minimum.
        ends_blown = (self.end_jump > 0 and after.size >= 3 and lo > 0
                      and float(y[-1]) >= self.end_jump * max(float(np.max(after[:-1])), lo))
        if ends_blown and np.all(y > 0) and stats.noise(np.log(y[:-1])) >= self.wide_spread:
            ends_blown = float(y[-1]) > float(np.max(y[:-1]))  # in wide single-batch noise: above every point logged
        final = float(y[-1]) if nan_follows or ends_blown else float(np.median(y[-tail_n:]))
        rise = final - lo
        # A loss that goes negative (a log-likelihood, an ELBO, a contrastive or GAN loss) has no ratio to its
        # minimum: its own scale is the fall it made before the minimum, so the rise is judged against that.
        scale = abs(lo) if lo > 0 else head - lo
        if not (rise > 0 and gave_back(head, lo, final) >= self.min_recovered):
            return
        if rise < self.min_recovered * (head - lo) and self._lr_restarts(run, int(steps[imin]), int(steps[-1])):
            return  # given back on the log scale only, under an LR that restarts: a warm restart's rise is by design
        grows = rise >= self.min_growth * scale
        # A slow drift: smaller than `min_growth`, but near-monotone over many points and a good part of the log.
        drifts = (not grows and rise >= self.drift_growth * scale
                  and after.size >= max(self.drift_points, self.drift_share * n))
        if not (grows or drifts):
            return
        trend = stats.mann_kendall(after, steps[imin:])
        drifts = drifts and trend.p < self.p and trend.tau >= self.drift_tau
        if not (grows or drifts):
            return
        # In a short log the trend test sees a handful of points: the rise must also stand out of their noise.
        # In a longer one the rise must still clear the points' own spread: single-batch losses that swing ×2-×3
        # from display to display make a "rise" of ×2 from a lucky minimum to the tail's median (the smoothed
        # minimum of n such points sits σ·√(2 ln n) below their level).
        clear = (self._stands_out(after, lo, final, self.spread_sigmas) if n > self.short_max
                 else self._stands_out(after, lo, final))
        into_nan = nan_follows and self._rises_into_nan(after, lo, final)
        significant = trend.z > 0 and ((trend.p < self.p and after.size >= self.min_points_after and clear)
                                       or (grows and (into_nan or ends_blown or self._stays_up(after, lo, final))))
        w = max(3, int(n * self.smooth)) // 2
        at_min = y[max(0, imin - w): imin + w + 1]  # the points the smoothed minimum is the median of
        shift = stats.mann_whitney(at_min, y[-tail_n:])
        stays = (grows and shift.z > 0 and shift.p < self.p and not nan_follows and n >= 12
                 and min(tail_n, at_min.size) >= self.min_points_after and (clear or n <= self.short_max))
        if (significant or stays) and not (nan_follows or ends_blown) and (
                self._wide_spread(y, imin, after) or self._lucky_dip(y, head, lo, final)):
            significant = stays = False  # a rise out of a lucky dip in single-batch noise: the level did not move
        witness = (self._witness(run, steps[imin], after, lo, final)
                   if grows and n <= self.short_max and not (significant or stays) else None)
        if not (significant or stays or witness):
            return
        slope, _ = stats.theil_sen(steps[imin:], after)
        growth = final / lo if lo > 0 else None
        ev = {"onset_step": int(steps[imin]), "min_level": lo, "initial_level": head, "final_level": final,
              "growth_factor": growth, "slope_per_step": slope, "mk_p": trend.p, "ends_nonfinite": nan_follows,
              "last_finite_step": int(steps[-1]), "points_after_onset": int(after.size), "ends_on_blow_up": ends_blown,
              "tail_points": int(tail_n), "level_shift_p": shift.p, "level_shift_effect": shift.effect,
              "kendall_tau": trend.tau, "drift": drifts} | (witness or {})
        tail = (" and then turns non-finite" if nan_follows else
                " where the log ends, on its highest point since the minimum" if ends_blown else "")
        # The sentence quotes the file: the minimum's level as the median of the points it is the median of (one
        # point's logged value below 12 points), the end as its last point or the median of the tail.
        lo_q, lo_text, low_note = _minimum(steps, y, imin, w if n >= 12 else 0)
        fin_q, fin_text = (level_of(steps, y, n - 1, n - 1) if nan_follows or ends_blown
                           else level_of(steps, y, n - tail_n, n - 1))
        j = max(0, imin - (w if n >= 12 else 0))
        j += int(np.argmin(y[j:]))  # the lowest logged point from the minimum's window on
        ev |= {"quoted_min_level": lo_q, "quoted_final_level": fin_q, "lowest_logged": float(y[j]),
               "lowest_logged_step": int(steps[j])}
        growth_q = fin_q / lo_q if lo_q > 0 else None
        if drifts:
            lr = self._lr_over(run, int(steps[imin]), int(steps[-1]))
            ev |= lr or {}
            how = (f"{(fin_q - lo_q) / (abs(lo_q) if lo_q > 0 else head - lo_q):+.0%} of its "
                   f"{'minimum' if lo > 0 else 'earlier fall'}, a steady climb: "
                   f"Kendall τ={trend.tau:.2f} over {after.size} points, Mann–Kendall p={trend.p:.1g}"
                   + (f", while the LR falls from {lr['lr_at_onset']:.2g} to {lr['lr_at_end']:.2g}" if lr else ""))
        elif significant:
            how = f"{_effect(growth_q, fin_q - lo_q, head - lo_q)}, Mann–Kendall p={trend.p:.1g}"
        elif stays:
            how = (f"{_effect(growth_q, fin_q - lo_q, head - lo_q)}, and stays there: the last {tail_n} points sit "
                   f"above the minimum's, Mann–Whitney p={shift.p:.1g}")
        else:
            how = (f"{_effect(growth_q, fin_q - lo_q, head - lo_q)}; the validation loss rises with it, from "
                   f"{witness['val_min']:.4g} at step {witness['val_min_step']} to median {witness['val_final']:.4g} "
                   f"of steps {witness['val_tail_step']}-{witness['val_last_step']} ({ratio(witness['val_growth'])}), "
                   f"every evaluation since step {steps[imin]} above {witness['val_lowest_since']:.4g}")
        yield Finding.of(self, severity="critical", step=int(steps[imin]), step_end=int(steps[-1]),
                         series=run.pick("loss"), evidence=ev, summary=(
                             f"loss rises from {lo_text} to {fin_text} ({how}{low_note}){tail}"),
                         sources=(src(run, "loss", steps),) + (
                             (src(run, "val_loss", [witness["val_min_step"], witness["val_last_step"]]),)
                             if witness and not (significant or stays) else ()))

    def _validation_alone(self, run: Run) -> Finding | None:
        """Where no training loss was read, the validation loss judged as validation: only a blow-up its log ends
        on (`glaring` × the median of its earlier evaluations) is divergence there. A validation loss that rises
        less may be overfitting as well: without the training loss nothing tells them apart."""
        if not run.has("val_loss"):
            return None
        vs, vv = finite_part(*run.arrays("val_loss"))
        hit = stats.blow_up_at_end(vv, self.glaring)
        if hit is None:
            return None
        ref = float(np.median(vv[:-hit[1]]))
        onset = int(vs[-hit[1] - 1])
        ev = {"onset_step": onset, "reference_level": ref, "final_level": float(vv[-1]), "growth_factor": hit[0],
              "blow_up_factor": hit[0], "blow_up_points": hit[1], "training_loss_missing": True,
              "last_finite_step": int(vs[-1]), "points": int(vv.size)}
        return Finding.of(self, severity="critical", step=onset, step_end=int(vs[-1]), series=run.pick("val_loss"),
                          evidence=ev, sources=(src(run, "val_loss", vs),),
                          summary=(f"validation loss blows up where the log ends: {vv[-1]:.4g} at step {vs[-1]}, "
                                   f"{ratio(hit[0])} the median {ref:.4g} of its earlier evaluations (no training "
                                   f"loss was read: judged as validation)"))

    def _glaring(self, run: Run, steps: np.ndarray, y: np.ndarray) -> dict | None:
        """A blow-up the log ends on, by its effect size alone (`stats.blow_up_at_end`): the last points `glaring` ×
        the median of the earlier ones, or `witnessed_glaring` × when the validation loss ends on such a blow-up too.
        No trend test: a loss ×100 its own ordinary level where the log stops needs none. None otherwise."""
        hit = stats.blow_up_at_end(y, self.witnessed_glaring)
        if hit is None:
            return None
        ev = {"blow_up_factor": hit[0], "blow_up_points": hit[1]}
        if hit[0] >= self.glaring:
            return ev
        if run.has("val_loss"):
            vs, vv = finite_part(*run.arrays("val_loss"))
            vhit = stats.blow_up_at_end(vv, self.witnessed_glaring)
            if vhit is not None:
                return ev | {"witness": run.pick("val_loss"), "val_blow_up_factor": vhit[0],
                             "val_last_step": int(vs[-1]), "val_final": float(vv[-1])}
        return None

    def _glaring_finding(self, run: Run, steps: np.ndarray, y: np.ndarray, ev: dict, nan_follows: bool) -> Finding:
        ref = float(np.median(y[:-ev["blow_up_points"]]))
        # the rise starts after the last point still near the ordinary level (within ×2 of its median)
        near = np.flatnonzero(y[:-ev["blow_up_points"]] <= 2 * ref)
        k = y.size - 1 - int(near[-1]) if near.size else ev["blow_up_points"]
        ev = ev | {"blow_up_points": k}
        onset = int(steps[-k - 1])
        ev = ev | {"onset_step": onset, "reference_level": ref, "min_level": float(np.min(y[:-k])),
                   "initial_level": float(y[0]), "final_level": float(y[-1]), "growth_factor": ev["blow_up_factor"],
                   "ends_nonfinite": nan_follows, "last_finite_step": int(steps[-1]), "points": int(y.size)}
        val = (f"; the validation loss ends on a blow-up too, {ev['val_final']:.4g} at step {ev['val_last_step']} "
               f"({ratio(ev['val_blow_up_factor'])} the median of its earlier evaluations)" if "witness" in ev else "")
        return Finding.of(self, severity="critical", step=onset, step_end=int(steps[-1]), series=run.pick("loss"),
                          evidence=ev, sources=(src(run, "loss", steps),) + (
                              (src(run, "val_loss"),) if "witness" in ev else ()),
                          summary=(f"loss blows up where the log ends: {y[-1]:.4g} at step {steps[-1]}, "
                                   f"{ratio(ev['blow_up_factor'])} the median {ref:.4g} of its "
                                   f"{y.size - k} earlier points (last ordinary value {y[-k - 1]:.4g} at step {onset})"
                                   f"{val}" + (" and then turns non-finite" if nan_follows else "")))

    def _rising(self, run: Run, steps: np.ndarray, y: np.ndarray, nan_follows: bool) -> Finding | None:
        """A loss that rises at every one of its last `rising_points` points or more, by `rising_growth` of where
        the rise began, while the validation loss rises at every one of its last `val_rising_points` evaluations by
        `val_rising_growth`: a handful of epochs getting worse together, too few for a trend test to speak."""
        k = stats.rising_tail(y)
        if k < self.rising_points or not y[-k] > 0 or y[-1] < (1 + self.rising_growth) * y[-k]:
            return None
        if not run.has("val_loss"):
            return None
        vs, vv = finite_part(*run.arrays("val_loss"))
        vk = stats.rising_tail(vv)
        if vk < self.val_rising_points or not vv[-vk] > 0 or vv[-1] < (1 + self.val_rising_growth) * vv[-vk]:
            return None
        start = y.size - k
        ev = {"onset_step": int(steps[start]), "min_level": float(y[start]), "initial_level": float(y[0]),
              "final_level": float(y[-1]), "growth_factor": float(y[-1] / y[start]), "rising_points": int(k),
              "witness": run.pick("val_loss"), "val_start": float(vv[-vk]), "val_start_step": int(vs[-vk]),
              "val_final": float(vv[-1]), "val_last_step": int(vs[-1]), "val_rising_points": int(vk),
              "ends_nonfinite": nan_follows, "last_finite_step": int(steps[-1])}
        return Finding.of(self, severity="critical", step=int(steps[start]), step_end=int(steps[-1]),
                          series=run.pick("loss"), evidence=ev,
                          sources=(src(run, "loss", steps[start:]), src(run, "val_loss", vs[-vk:])),
                          summary=(f"loss rises at every one of its last {k} points, from {y[start]:.4g} at step "
                                   f"{steps[start]} to {y[-1]:.4g} at step {steps[-1]} ({ratio(y[-1] / y[start])}), "
                                   f"and the validation loss rises at every one of its last {vk} evaluations, "
                                   f"{vv[-vk]:.4g} at step {vs[-vk]} to {vv[-1]:.4g} at step {vs[-1]}"
                                   + (" and then turns non-finite" if nan_follows else "")))

    def _late_rise(self, run: Run, steps: np.ndarray, y: np.ndarray, nan_follows: bool) -> Finding | None:
        """The late rise of the docstring, by its effect alone: no trend test, no second curve."""
        n = y.size
        k = stats.rising_tail(y)  # counts the point the rise starts from
        if k - 1 < self.late_rise_points or not np.all(y > 0):
            return None
        sm = stats.rolling_median(y, max(3, int(n * self.smooth))) if n >= 12 else y
        imin = int(np.nanargmin(sm[:n - k + 1]))
        lo, head = float(sm[imin]), float(y[0])
        # ×`late_rise` over 3 records or more; or ×`climb_rise` over `climb_points` or more, to the log's highest
        climbs = k >= self.climb_points and y[-1] >= self.climb_rise * y[-k] and y[-1] >= np.max(y)
        if not ((y[-1] >= self.late_rise * lo or climbs) and y[-1] > np.max(y[imin:-1])
                and gave_back(head, lo, float(y[-1])) >= self.min_recovered):
            return None
        if stats.noise(np.log(y[:-1])) >= self.wide_spread and not y[-1] > np.max(y[stats.START_POINTS:-1]):
            return None  # in wide single-batch noise a lucky dip and three rises are no climb: above every point
        w = max(3, int(n * self.smooth)) // 2 if n >= 12 else 0
        lo_q, lo_text, low_note = _minimum(steps, y, imin, w)
        start = n - k
        ev = {"onset_step": int(steps[imin]), "min_level": lo_q, "initial_level": head, "final_level": float(y[-1]),
              "growth_factor": float(y[-1]) / lo_q, "rising_points": int(k - 1), "rise_start_step": int(steps[start]),
              "ends_nonfinite": nan_follows, "last_finite_step": int(steps[-1]), "points": int(n)}
        return Finding.of(self, severity="critical", step=int(steps[imin]), step_end=int(steps[-1]),
                          series=run.pick("loss"), evidence=ev, sources=(src(run, "loss", steps[imin:]),),
                          summary=(f"loss rises from {lo_text} to {y[-1]:.4g} at step {steps[-1]} "
                                   f"({ratio(y[-1] / lo_q)}), climbing at each of its last {k - 1} records"
                                   f"{low_note}" + (" and then turns non-finite" if nan_follows else "")))

    def _grad_climb(self, run: Run, steps: np.ndarray, y: np.ndarray, nan_follows: bool) -> Finding | None:
        """The late climb shown by the gradient norm (docstring): the longest such tail."""
        n = y.size
        if not np.all(y > 0) or not run.has("grad_norm"):
            return None
        sm = stats.rolling_median(y, max(3, int(n * self.smooth))) if n >= 12 else y
        gs, gv = finite_part(*run.arrays("grad_norm"))
        # where a tail starts that stands above the point before it, ends on its highest and ×`late_rise` a minimum
        floor = np.minimum.accumulate(y[::-1])[::-1]
        top = np.maximum.accumulate(y[::-1])[::-1]
        low = np.fmin.accumulate(sm)
        starts = np.flatnonzero((floor[1:] > y[:-1]) & (top[1:] <= y[-1]) & (y[-1] >= self.late_rise * low[:-1])) + 1
        for start in starts[starts <= n - self.late_rise_points][:64]:  # the longest tail first
            m = n - int(start)
            imin = int(np.nanargmin(sm[:start]))
            lo = float(sm[imin])
            if not (floor[start] > y[imin:start].max() and gave_back(float(y[0]), lo, float(y[-1])) >= self.min_recovered):
                continue
            before, during = gv[(gs >= steps[imin]) & (gs < steps[start])], gv[gs >= steps[start]]
            if not (before.size and during.size and during[-1] >= during.max() and during[-1] > before.max()
                    and during[-1] >= self.grad_climb * float(np.median(before))):
                return None  # the longest such climb decides
            w = max(3, int(n * self.smooth)) // 2 if n >= 12 else 0
            lo_q, lo_text, low_note = _minimum(steps, y, imin, w)
            g0 = float(np.median(before))
            ev = {"onset_step": int(steps[imin]), "min_level": lo_q, "initial_level": float(y[0]),
                  "final_level": float(y[-1]), "growth_factor": float(y[-1]) / lo_q, "climb_points": int(m),
                  "rise_start_step": int(steps[start]), "witness": run.pick("grad_norm"), "grad_norm_before": g0,
                  "grad_norm_final": float(during[-1]), "grad_norm_growth": float(during[-1]) / g0,
                  "ends_nonfinite": nan_follows, "last_finite_step": int(steps[-1]), "points": int(n)}
            return Finding.of(self, severity="critical", step=int(steps[imin]), step_end=int(steps[-1]),
                              series=run.pick("loss"), evidence=ev,
                              sources=(src(run, "loss", steps[imin:]), src(run, "grad_norm", gs[gs >= steps[imin]])),
                              summary=(f"loss rises from {lo_text} to {y[-1]:.4g} at step {steps[-1]} "
                                       f"({ratio(y[-1] / lo_q)}), its last {m} records all above every point before "
                                       f"them since the minimum{low_note}; the gradient norm climbs with it, from "
                                       f"median {g0:.4g} to {during[-1]:.4g} at step {gs[gs >= steps[start]][-1]} "
                                       f"({ratio(during[-1] / g0)})" + (" and then turns non-finite" if nan_follows else "")))
        return None

    def _level_up(self, run: Run, steps: np.ndarray, y: np.ndarray, nan_follows: bool) -> Finding | None:
        """The moved-up level of the docstring (the longest such tail), by its effect alone."""
        n = y.size
        if not np.all(y > 0):
            return None
        for m in range(n // 2, self.level_up_points - 1, -1):
            tail, before = y[n - m:], y[n - 2 * m:n - m]
            level, high = float(np.median(before)), float(np.median(tail))
            if not (high >= self.level_up * level and tail.min() > before.max()
                    and gave_back(float(y[0]), level, high) >= self.min_recovered):
                continue
            a, b = n - 2 * m, n - m
            ev = {"onset_step": int(steps[b - 1]), "min_level": level, "initial_level": float(y[0]),
                  "final_level": high, "growth_factor": high / level, "level_up_points": int(m),
                  "lowest_after": float(tail.min()), "highest_before": float(before.max()),
                  "ends_nonfinite": nan_follows, "last_finite_step": int(steps[-1]), "points": int(n)}
            return Finding.of(self, severity="critical", step=int(steps[b - 1]), step_end=int(steps[-1]),
                              series=run.pick("loss"), evidence=ev, sources=(src(run, "loss", steps[a:]),),
                              summary=(f"loss moves up and stays: its last {m} records (steps {steps[b]}-"
                                       f"{steps[-1]}), median {high:.4g}, are {ratio(high / level)} the median "
                                       f"{level:.4g} of steps {steps[a]}-{steps[b - 1]}, every one of them above the "
                                       f"highest of those ({before.max():.4g}); lowest since {tail.min():.4g}"
                                       + (" and then turns non-finite" if nan_follows else "")))
        return None

    def _held_rise(self, run: Run, steps: np.ndarray, y: np.ndarray, nan_follows: bool) -> Finding | None:
        """The rise held against the points' own scatter (docstring): the longest tail of `held_points` records or
        more, every one `held_rise` × the highest of the level before it (its last `held_ref_points` to
        `held_ref_max` records, any climbing records between them and the tail above that level), the rise
        `held_sigmas` × that level's scatter. Not a rise at an LR that jumps back up (a warm restart)."""
        n = y.size
        if not np.all(y > 0):
            return None
        floor = np.minimum.accumulate(y[::-1])[::-1]  # the lowest point from each index to the end
        low = np.minimum.accumulate(y)  # the lowest point up to each index
        # a tail can only stand ×`held_rise` over a level before it that stands at least as high as the lowest point
        tails = [m for m in range(n - self.held_ref_points, self.held_points - 1, -1)
                 if floor[n - m] >= self.held_rise * low[n - m - 1]][:64]  # the longest first
        for m in tails:
            tail = y[n - m:]
            for gap in range(0, min(m, self.held_ref_max, n - m - self.held_ref_points) + 1):  # climbing records between
                b = n - m - gap
                ref = y[max(0, b - self.held_ref_max):b]
                top, mid = float(ref.max()), float(np.median(ref))
                scatter = (top - float(ref.min())) / mid
                if not (tail.min() >= self.held_rise * top and np.all(y[b:n - m] > top)
                        and tail.min() / mid - 1 >= self.held_sigmas * scatter and scatter <= self.held_max_scatter):
                    continue
                if self._lr_restarts(run, int(steps[b - 1]), int(steps[-1])):
                    return None
                a = b - ref.size
                ev = {"onset_step": int(steps[b - 1]), "min_level": mid, "initial_level": float(y[0]),
                      "final_level": float(y[-1]), "growth_factor": float(tail.min()) / mid, "held_points": int(m),
                      "level_points": int(ref.size), "level_scatter": scatter, "highest_before": top,
                      "lowest_after": float(tail.min()), "ends_nonfinite": nan_follows,
                      "last_finite_step": int(steps[-1]), "points": int(n)}
                return Finding.of(self, severity="critical", step=int(steps[b - 1]), step_end=int(steps[-1]),
                                  series=run.pick("loss"), evidence=ev, sources=(src(run, "loss", steps[a:]),),
                                  summary=(f"loss moves up and stays: its last {m} records (steps {steps[n - m]}-"
                                           f"{steps[-1]}) are all {tail.min():.4g} or above, {ratio(tail.min() / top)} "
                                           f"the highest ({top:.4g}) of the {ref.size} records before the rise (steps "
                                           f"{steps[a]}-{steps[b - 1]}, median {mid:.4g}), which scattered only "
                                           f"{scatter:.1%}: a rise {(tail.min() / mid - 1) / max(scatter, 1e-12):.0f} "
                                           f"× the run's own noise" + (" and then turns non-finite" if nan_follows else "")))
        return None

    @staticmethod
    def _reference(run: Run, first: float) -> float:
        """What an untrained model's loss is: the first logged value, or log C where the run declares a class count
        (log 2, the fewest classes, where it only logs an accuracy), the higher."""
        found = class_count(run)
        chance = (math.log(found[0]) if found else
                  math.log(2) if run.has("accuracy") or run.has("val_accuracy") else 0.0)
        return max(first, chance)

    def _at_floor(self, run: Run, y: np.ndarray) -> bool:
        """Every point under `floor_share` of the untrained level (`_reference`) and the last `min_step_after`
        points no higher than the highest point before the minimum: a trained loss wandering at its floor, its
        "rise" from its lowest dip within its own scatter."""
        if not (np.all(y >= 0) and y.size > self.min_step_after):
            return False
        ref = self._reference(run, float(y[0]))
        imin = int(np.argmin(y))
        return bool(float(np.max(y)) < self.floor_share * ref and imin > 0
                    and float(np.median(y[-self.min_step_after:])) <= float(np.max(y[:imin])))

    def _near_zero_wander(self, y: np.ndarray, finding: Finding) -> bool:
        """A positive loss that fell more than a decade, from its first value `y[0]` to the finding's minimum, and
        rises from there by less than `tiny_rise` of that first value: ×4-×8 over a minimum near 0 (0.014 → 0.05
        after starting at 1.7) is what a converged fine-tune's loss does, tiny next to what it learned."""
        lo, end = finding.evidence.get("min_level"), finding.evidence.get("final_level")
        first = float(y[0])
        return bool(lo is not None and end is not None and lo > 0 and first >= 10 * lo
                    and end - lo < self.tiny_rise * first)

    def _above_start(self, run: Run, steps: np.ndarray, y: np.ndarray, nan_follows: bool) -> Finding | None:
        """A loss that never fell and stands `above_start` × its untrained level (`_reference`) at `above_share` of
        its later records or more (`above_points` at least) and over its last quarter, that quarter not below half
        the level of the later records' first quarter (they do not fall: a first value logged too low, as a
        running sum over one batch divided by the interval, is followed by a falling loss). Or never better than its
        first value (`_never_better`). Not while a loss weight ramps up from 0 (`_weight_ramp`: the total grows by
        design)."""
        if not np.all(y > 0):
            return None
        first, later = float(y[0]), y[1:]
        ref = self._reference(run, first)
        q = max(2, later.size // 4)
        high = later >= self.above_start * ref
        end, head = float(np.median(later[-q:])), float(np.median(later[:q]))
        if not (later.size >= self.above_points and high.mean() >= self.above_share
                and end >= self.above_start * ref and end >= 0.5 * head):
            return None if self._weight_ramp(run) else self._never_better(run, steps, y, nan_follows)
        if self._weight_ramp(run):
            return None
        ev = {"onset_step": int(steps[0]), "min_level": first, "initial_level": first, "reference_level": ref,
              "final_level": float(y[-1]), "growth_factor": end / ref, "points_above": int(high.sum()),
              "ends_nonfinite": nan_follows, "last_finite_step": int(steps[-1]), "points": int(y.size)}
        ref_text = (f"its first value {point(steps, y, 0)}" if ref == first else
                    f"a uniform guess's loss {ref:.4g} (its first value {point(steps, y, 0)})")
        return Finding.of(self, severity="critical", step=int(steps[0]), step_end=int(steps[-1]),
                          series=run.pick("loss"), evidence=ev, sources=(src(run, "loss", steps),),
                          summary=(f"loss never falls below {ref_text} and stands {ratio(self.above_start)} above it "
                                   f"or more at {high.sum()} of its {later.size} later records, median "
                                   f"{end:.4g} over its last {q} ({ratio(end / ref)}): it blew up from the start"
                                   + (" and then turns non-finite" if nan_follows else "")))

    def _runs_below(self, run: Run, steps: np.ndarray, y: np.ndarray) -> Finding | None:
        """An objective unbounded below: a loss whose last third is below 0 at every record, that has fallen by
        `below_growth` × the magnitude of its first tenth (three records at least), and whose last third still falls
        (Mann–Kendall p under `p`) at `below_keep` of its whole-run pace or more (Theil–Sen): no floor in sight. A loss
        bounded below levels off as it converges; one that falls on a straight line to ever larger negative values is
        running away (a learned variance collapsing to 0 in a likelihood, a term's sign flipped). A warning."""
        n = y.size
        k, third = max(3, n // 10), max(3, n // 3)
        head, tail = float(np.median(y[:k])), float(np.median(y[-k:]))
        if not (np.all(y[-third:] < 0) and head - tail >= self.below_growth * abs(head) > 0):
            return None
        pace, late = stats.theil_sen(steps, y)[0], stats.theil_sen(steps[-third:], y[-third:])[0]
        trend = stats.mann_kendall(y[-third:], steps[-third:])
        if not (pace < 0 and late <= self.below_keep * pace and trend.z < 0 and trend.p < self.p):
            return None
        ev = {"onset_step": int(steps[0]), "initial_level": float(y[0]), "final_level": float(y[-1]),
              "first_tenth_median": head, "last_tenth_median": tail, "slope": pace, "late_slope": late,
              "mann_kendall_p": float(trend.p), "points": int(n), "min_level": float(np.min(y)),
              "unbounded_below": True}
        at = (lambda i: point(steps, y, i))  # noqa: E731 - the file's values at their steps
        return Finding.of(self, severity="warning", step=int(steps[0]), step_end=int(steps[-1]),
                          series=run.pick("loss"), evidence=ev, sources=(src(run, "loss", steps),),
                          summary=(f"loss falls without bound below 0: {at(0)} to {at(n - 1)}, still falling over "
                                   f"its last third at {late / pace:.0%} of its whole-run pace ({late:.3g} a step "
                                   f"against {pace:.3g}); a loss bounded below levels off, this one runs away (a "
                                   f"learned variance collapsing to 0, a term whose sign is flipped)"))

    def _never_better(self, run: Run, steps: np.ndarray, y: np.ndarray, nan_follows: bool) -> Finding | None:
        """A positive loss never better than its first record: every later one above it (`never_points` records at
        least), the median of its last quarter `never_better` × it and not below half the later records' first
        quarter (as `_above_start`: a first record logged too low is followed by a falling loss) unless `never_orders`
        × it and more than the logging interval × it (a blow-up no low first record explains), that rise
        `short_sigmas` × the log-scale point noise (a first record that was a lucky low of a noisy excerpt rises
        less: its level never moved)."""
        first, later = float(y[0]), y[1:]
        if y.size < self.never_points or not np.all(later > first):
            return None
        q = max(2, later.size // 4)
        end, head = float(np.median(later[-q:])), float(np.median(later[:q]))
        sigma = stats.noise(np.log(y))
        clears_noise = not sigma > 0 or math.log(end / first) >= self.short_sigmas * sigma
        # A first record logged too low is at most the logging interval × under the loss it opens: a loss that
        # ends orders of magnitude above it, further than that interval explains, blew up whether or not it falls
        # back part of the way.
        blown = end >= max(self.never_orders, float(np.median(np.diff(steps)))) * first
        if not (end >= self.never_better * first and (end >= 0.5 * head or blown) and clears_noise):
            return None
        top = int(np.argmax(y))
        _, end_text = level_of(steps, y, y.size - q, y.size - 1)
        ev = {"onset_step": int(steps[0]), "min_level": first, "initial_level": first, "reference_level": first,
              "final_level": float(y[-1]), "growth_factor": end / first, "lowest_later": float(later.min()),
              "highest": float(y[top]), "highest_step": int(steps[top]), "tail_points": int(q),
              "ends_nonfinite": nan_follows, "last_finite_step": int(steps[-1]), "points": int(y.size)}
        lo = int(np.argmin(later)) + 1
        return Finding.of(self, severity="critical", step=int(steps[0]), step_end=int(steps[-1]),
                          series=run.pick("loss"), evidence=ev, sources=(src(run, "loss", steps),),
                          summary=(f"loss is never better than its first value {point(steps, y, 0)}: all {later.size} "
                                   f"later records stand above it (lowest {point(steps, y, lo)}), it climbs to "
                                   f"{point(steps, y, top)} and ends at the {end_text} ({ratio(end / first)})"
                                   + (" and then turns non-finite" if nan_follows else "")))

    @staticmethod
    def _weight_ramp(run: Run) -> bool:
        """A loss weight or coefficient (`RAMP_WORDS` in its name) logged from 0 and rising: an annealed term (a KL
        warm-up) whose total rises by design."""
        for name in run.names():
            if not RAMP_WORDS & set(words(name)):
                continue
            _, v = finite_part(*run.arrays(name))
            if v.size >= 2 and v[0] == 0 and v[-1] > 0:
                return True
        return False

    def _lr_restarts(self, run: Run, start: int, end: int) -> bool:
        """The logged LR jumps back up within steps `start`-`end` (×2 or more over the point before, which had
        decayed below an earlier LR): a warm restart or a rebuilt schedule, whose loss rises by design."""
        if not run.has("lr"):
            return False
        ls, lv = run.arrays("lr")
        keep = np.isfinite(lv) & (ls >= start) & (ls <= end)
        before = np.max(lv[np.isfinite(lv) & (ls < start)], initial=0.0)
        lv = lv[keep]
        high = np.maximum.accumulate(np.r_[before, lv])[:-1]  # the highest LR before each point
        # ×2 over the point before, that one below an earlier LR: it had decayed and came back (no warmup from 0)
        return bool(lv.size >= 2 and np.any((lv[1:] >= 2 * lv[:-1]) & (lv[1:] > 0) & (lv[:-1] < high[:-1])))

    def _warmup_blow_up(self, run: Run, steps: np.ndarray, y: np.ndarray, nan_follows: bool) -> Finding | None:
        """A loss that climbs at each of its last `held_points` records to `warmup_blow_up` × its minimum, its
        highest point, while the logged LR rises `lr_climb` × from the minimum to the end: an LR warmed up past what
        the model can take, at any length."""
        n = y.size
        if not (np.all(y > 0) and run.has("lr")) or stats.rising_tail(y) <= self.held_points:
            return None
        imin = int(np.argmin(y))
        lo = float(y[imin])
        if not (imin < n - self.held_points and y[-1] >= self.warmup_blow_up * lo and y[-1] >= y.max()):
            return None
        ls, lv = run.arrays("lr")
        keep = np.isfinite(lv)
        ls, lv = ls[keep], lv[keep]
        at_min, at_end = lv[ls <= steps[imin]], lv[ls <= steps[-1]]
        if not (at_min.size and at_min[-1] > 0 and at_end[-1] >= self.lr_climb * at_min[-1]
                and np.all(np.diff(lv[(ls >= steps[imin]) & (ls <= steps[-1])]) >= 0)):
            return None
        ev = {"onset_step": int(steps[imin]), "min_level": lo, "initial_level": float(y[0]), "final_level": float(y[-1]),
              "growth_factor": float(y[-1]) / lo, "lr_at_onset": float(at_min[-1]), "lr_at_end": float(at_end[-1]),
              "ends_nonfinite": nan_follows, "last_finite_step": int(steps[-1]), "points": int(n)}
        return Finding.of(self, severity="critical", step=int(steps[imin]), step_end=int(steps[-1]),
                          series=run.pick("loss"), evidence=ev,
                          sources=(src(run, "loss", steps[imin:]), src(run, "lr", [steps[imin], steps[-1]])),
                          summary=(f"loss climbs from its minimum {point(steps, y, imin)} to {y[-1]:.4g} at step "
                                   f"{steps[-1]} ({ratio(y[-1] / lo)}), rising at each of its last "
                                   f"{stats.rising_tail(y) - 1} records, while the LR rises from {at_min[-1]:.3g} to "
                                   f"{at_end[-1]:.3g} ({ratio(at_end[-1] / at_min[-1])}): the LR warmed up past what "
                                   f"the model can take" + (" and then turns non-finite" if nan_follows else "")))

    def _gives_back(self, run: Run, steps: np.ndarray, y: np.ndarray, nan_follows: bool) -> Finding | None:
        """A cross-entropy read on its log scale (`_perplexity` is its exponential) that gives back `given_back` of
        its fall: (end − minimum) / (start − minimum), its last `given_back_points` records above the fall's
        midpoint or an accuracy ending below both its first record and its value at the loss's minimum. A ratio to
        the minimum says little there: a rise from 7.7 back to 10 nats is ×1.3, and ×10 in perplexity. From 12
        points on, levels, not single records: the start the median of the first points, the minimum the smoothed
        curve's, the end the median of the last twentieth (single-batch losses swing by more than half a fall)."""
        ppl = _perplexity(run, steps, y)
        if ppl is None or not np.all(y > 0):
            return None
        n = y.size
        w = max(3, int(n * self.smooth)) // 2 if n >= 12 else 0
        sm = stats.rolling_median(y, 2 * w + 1) if w else y
        imin = int(np.argmin(sm))
        k = max(self.given_back_points, n // 20) if w else 1
        first, first_text = level_of(steps, y, 0, stats.START_POINTS - 1) if w else (float(y[0]), point(steps, y, 0))
        lo, lo_text, _ = _minimum(steps, y, imin, w)
        last, last_text = level_of(steps, y, n - k, n - 1)
        if not (first > lo and imin < n - k and (last - lo) >= self.given_back * (first - lo)):
            return None
        mid = lo + (first - lo) / 2
        held = n - imin - 1 >= self.given_back_points and bool(np.all(sm[-self.given_back_points:] > mid))
        acc = None
        if run.has("accuracy"):
            a_s, a_v = finite_part(*run.arrays("accuracy"))
            at_min = a_v[a_s <= steps[imin]]
            if a_v.size >= 3 and at_min.size and a_s[-1] > steps[imin] and a_v[-1] < min(a_v[0], at_min[-1]):
                acc = {"accuracy": run.pick("accuracy"), "accuracy_first": float(a_v[0]),
                       "accuracy_at_min": float(at_min[-1]), "accuracy_last": float(a_v[-1]),
                       "accuracy_last_step": int(a_s[-1])}
        if not (held or acc):
            return None
        share = (last - lo) / (first - lo)
        ev = {"onset_step": int(steps[imin]), "min_level": lo, "initial_level": first, "final_level": last,
              "growth_factor": last / lo, "given_back": share, "perplexity": ppl["name"],
              "perplexity_min": ppl["at_min"], "perplexity_last": ppl["last"], "ends_nonfinite": nan_follows,
              "last_finite_step": int(steps[-1]), "points": int(n)} | (acc or {})
        witness = (f"; {acc['accuracy']} falls with it, from {acc['accuracy_at_min']:.4g} at the minimum to "
                   f"{acc['accuracy_last']:.4g} at step {acc['accuracy_last_step']}, below its first "
                   f"{acc['accuracy_first']:.4g}" if acc else
                   f"; it stays above the fall's midpoint {mid:.4g} to the end")
        return Finding.of(self, severity="critical", step=int(steps[imin]), step_end=int(steps[-1]),
                          series=run.pick("loss"), evidence=ev, sources=(src(run, "loss", steps),),
                          summary=(f"loss falls from {first_text} to {lo_text.rstrip(',')} and "
                                   f"climbs back to {last_text}, giving back {share:.0%} of its fall "
                                   f"({ppl['name']} {ppl['at_min']:.4g} → {ppl['last']:.4g}, "
                                   f"{ratio(ppl['last'] / ppl['at_min'])}){witness}"
                                   + (" and then turns non-finite" if nan_follows else "")))

    def _dies_high(self, run: Run, steps: np.ndarray, y: np.ndarray) -> Finding | None:
        """The rise into the NaN of the docstring: the loss stood `dies_high` × its minimum at every finite point
        from some point on, and then turned non-finite for good."""
        n = y.size
        sm = stats.rolling_median(y, max(3, int(n * self.smooth))) if n >= 12 else y
        imin = int(np.nanargmin(sm))
        lo, head = float(sm[imin]), float(y[0])
        j = self._held_jump(y[imin:], lo, self.dies_high)
        if j is None or gave_back(head, lo, float(np.median(y[imin + j:]))) < self.min_recovered:
            return None
        held = y[imin + j:]
        low = float(np.min(held))
        w = max(3, int(n * self.smooth)) // 2 if n >= 12 else 0
        lo_q, lo_text, low_note = _minimum(steps, y, imin, w)
        all_steps, all_values = run.arrays("loss")
        dead = int(all_steps[np.flatnonzero(~np.isfinite(all_values) & (all_steps > steps[-1]))[0]])
        ev = {"onset_step": int(steps[imin]), "min_level": lo_q, "initial_level": head, "final_level": float(y[-1]),
              "growth_factor": low / lo_q, "jump_step": int(steps[imin + j]), "points_held": int(held.size),
              "lowest_after_jump": low, "ends_nonfinite": True, "last_finite_step": int(steps[-1]),
              "first_nonfinite_step": dead, "points": int(n)}
        return Finding.of(self, severity="critical", step=int(steps[imin]), step_end=dead, series=run.pick("loss"),
                          evidence=ev, sources=(src(run, "loss", all_steps[all_steps >= steps[imin]]),),
                          summary=(f"loss rises from {lo_text} to {y[imin + j]:.4g} at step {steps[imin + j]} and "
                                   f"stays there, all {held.size} points to step {steps[-1]} at {low:.4g} or above "
                                   f"({ratio(low / lo_q)} the minimum{low_note}), then turns non-finite at step "
                                   f"{dead} and stays so: it diverged into the NaN"))

    def _step_up(self, run: Run, steps: np.ndarray, y: np.ndarray, nan_follows: bool) -> Finding | None:
        """The held step of the docstring: the earliest point from which every later point stands above every
        point between the (smoothed) minimum and it, shown by the validation loss too."""
        n = y.size
        if not np.all(y > 0) or not run.has("val_loss"):
            return None
        sm = stats.rolling_median(y, max(3, int(n * self.smooth))) if n >= 12 else y
        imin = int(np.nanargmin(sm))
        lo = float(sm[imin])
        head, _ = stats.head_tail_levels(y)
        floor = np.minimum.accumulate(y[::-1])[::-1]  # the lowest point from each index to the end
        peak = np.maximum.accumulate(y[imin:])  # the highest point from the minimum to each index
        k = next((imin + i for i in range(1, y.size - imin) if floor[imin + i] > peak[i - 1]), None)
        if k is None or n - k < max(self.min_step_after, self.step_share * n):
            return None
        rest = y[k:]
        high = float(np.median(rest))
        if not (gave_back(head, lo, high) >= self.min_recovered
                and math.log(high / lo) >= self.step_sigmas * max(stats.noise(np.log(rest)), 1e-12)):
            return None
        if run.has("lr"):
            ls, lv = run.arrays("lr")
            near = np.isfinite(lv) & (ls >= steps[k - 1]) & (ls <= steps[k])
            before = lv[np.isfinite(lv) & (ls < steps[k - 1])]
            if near.any() and before.size and float(np.max(lv[near])) >= 1.5 * float(before[-1]):
                return None  # the LR rose at the step: a scheduled restart or warmup, not the loss breaking away
        vs, vv = finite_part(*run.arrays("val_loss"))
        v_before, v_after = vv[vs < steps[k]], vv[vs >= steps[k]]
        if v_before.size == 0 or v_after.size < self.witness_points or not v_after.min() > v_before.max():
            return None
        w = max(3, int(n * self.smooth)) // 2 if n >= 12 else 0
        lo_q, lo_text, low_note = _minimum(steps, y, imin, w)
        ev = {"onset_step": int(steps[imin]), "min_level": lo_q, "initial_level": head, "final_level": high,
              "growth_factor": high / lo_q, "jump_step": int(steps[k]), "points_held": int(rest.size),
              "lowest_after_jump": float(rest.min()), "highest_before_jump": float(y[imin:k].max()),
              "witness": run.pick("val_loss"), "val_highest_before": float(v_before.max()),
              "val_lowest_after": float(v_after.min()), "val_points_after": int(v_after.size),
              "ends_nonfinite": nan_follows, "last_finite_step": int(steps[-1]), "points": int(n)}
        return Finding.of(self, severity="critical", step=int(steps[imin]), step_end=int(steps[-1]),
                          series=run.pick("loss"), evidence=ev,
                          sources=(src(run, "loss", steps[imin:]), src(run, "val_loss", vs)),
                          summary=(f"loss steps up from {lo_text} at step {steps[k]} and never comes back: all "
                                   f"{rest.size} points since, median {high:.4g} ({ratio(high / lo_q)}), stay above "
                                   f"{y[imin:k].max():.4g}, the highest point between the minimum and the step"
                                   f"{low_note}; the validation loss steps up too, all {v_after.size} evaluations "
                                   f"since at {v_after.min():.4g} or above, over its {v_before.max():.4g} before"
                                   + (" and then turns non-finite" if nan_follows else "")))

    def _lr_climb(self, run: Run, steps: np.ndarray, y: np.ndarray, nan_follows: bool) -> Finding | None:
        """The climb under a rising LR of the docstring, with the validation loss as its witness."""
        n = y.size
        if not np.all(y > 0) or not (run.has("lr") and run.has("val_loss")):
            return None
        w = max(3, int(n * self.smooth))
        sm = stats.rolling_median(y, w) if n >= 12 else y
        imin = int(np.nanargmin(sm))
        ipk = imin + int(np.nanargmax(sm[imin:]))
        lo, peak = float(sm[imin]), float(sm[ipk])
        if not peak >= self.lr_climb * lo:
            return None
        ls, lv = run.arrays("lr")
        keep = np.isfinite(lv)
        ls, lv = ls[keep], lv[keep]
        at_min, at_peak = lv[ls <= steps[imin]], lv[ls <= steps[ipk]]
        if not (at_min.size and at_min[-1] > 0 and at_peak[-1] >= self.lr_climb * at_min[-1]):
            return None
        vs, vv = finite_part(*run.arrays("val_loss"))
        if vv.size < self.min_jump_points + 1:
            return None
        j = int(np.argmin(vv))
        since = vv[j + 1:]
        if not (vv[j] > 0 and vs[j] <= steps[ipk] and since.size >= self.min_jump_points
                and since.min() >= self.lr_climb_val * vv[j]):
            return None
        h = w // 2 if n >= 12 else 0
        lo_q, lo_text = level_of(steps, y, imin - h, imin + h)
        pk_q, pk_text = level_of(steps, y, ipk - h, ipk + h)
        ev = {"onset_step": int(steps[imin]), "min_level": lo_q, "initial_level": float(y[0]), "final_level": float(y[-1]),
              "peak_level": pk_q, "peak_step": int(steps[ipk]), "growth_factor": pk_q / lo_q,
              "lr_at_onset": float(at_min[-1]), "lr_at_peak": float(at_peak[-1]), "witness": run.pick("val_loss"),
              "val_min": float(vv[j]), "val_min_step": int(vs[j]), "val_lowest_since": float(since.min()),
              "val_points_since": int(since.size), "ends_nonfinite": nan_follows, "last_finite_step": int(steps[-1]),
              "points": int(n)}
        return Finding.of(self, severity="critical", step=int(steps[imin]), step_end=int(steps[-1]),
                          series=run.pick("loss"), evidence=ev,
                          sources=(src(run, "loss", steps[imin:]), src(run, "lr", [steps[imin], steps[ipk]]),
                                   src(run, "val_loss", vs[j:])),
                          summary=(f"loss climbs from its lowest level, the {lo_text}, to {pk_text} "
                                   f"({ratio(pk_q / lo_q)}) while the LR rises from {at_min[-1]:.3g} to "
                                   f"{at_peak[-1]:.3g} ({ratio(at_peak[-1] / at_min[-1])}); the validation loss never "
                                   f"comes back: all {since.size} evaluations after its minimum {vv[j]:.4g} at step "
                                   f"{vs[j]} stand at {since.min():.4g} or above ({ratio(since.min() / vv[j])})"
                                   + (" and then turns non-finite" if nan_follows else "")))

    @staticmethod
    def _lr_over(run: Run, start: int, end: int) -> dict | None:
        """The logged LR at the first and last of its points within steps `start`-`end` when it falls over them (a
        loss that climbs while the LR decays is no LR noise), else None."""
        if not run.has("lr"):
            return None
        ls, lv = run.arrays("lr")
        keep = (ls >= start) & (ls <= end) & np.isfinite(lv)
        if keep.sum() < 2 or not lv[keep][-1] < lv[keep][0]:
            return None
        return {"lr_at_onset": float(lv[keep][0]), "lr_at_end": float(lv[keep][-1])}

    def _wide_spread(self, y: np.ndarray, imin: int, after: np.ndarray) -> bool:
        """The points swing wide (log-scale point noise of at least `wide_spread` over the log: single-batch
        losses printed per display) and the points after the minimum do not sit above as many points before it
        (a Mann–Whitney test at `p`): the "rise" is a lucky dip followed by ordinary points, not a new level."""
        if not np.all(y > 0) or imin == 0:
            return False
        sigma = stats.noise(np.log(y))
        if not (math.isfinite(sigma) and sigma >= self.wide_spread):
            return False
        before = y[max(0, imin - max(after.size, self.min_points_after)):imin]
        shift = stats.mann_whitney(before, after)
        return not (shift.z > 0 and shift.p < self.p)

    def _lucky_dip(self, y: np.ndarray, head: float, lo: float, final: float) -> bool:
        """A positive loss whose (smoothed) minimum sits under its opening level `head`, and whose end sits above it,
        each by no more than `lucky_reach` × the lowest its points' noise reaches by chance, σ·√(2 ln n) on the log
        scale (σ the point-to-point noise, n the points): it never fell and never rose, the "rise" is the return
        from a dip of its scatter to the level it held all along (a flat loss, flat_loss's)."""
        if not (lo > 0 and head > 0 and final > 0 and np.all(y > 0) and y.size >= 3):
            return False
        sigma = stats.noise(np.log(y))
        reach = self.lucky_reach * sigma * math.sqrt(2 * math.log(y.size))
        return bool(math.isfinite(reach) and math.log(head / lo) <= reach and math.log(final / head) <= reach)

    def _stands_out(self, after: np.ndarray, lo: float, final: float, sigmas: float | None = None) -> bool:
        """The rise from `lo` to `final` is at least `sigmas` (default `short_sigmas`, the effect size a spike must
        have: `SpikeRule.z`) × the point-to-point noise of the points after the minimum (on a log scale for a
        positive loss)."""
        sigmas = self.short_sigmas if sigmas is None else sigmas
        if lo > 0 and final > 0 and np.all(after > 0):
            rise, sigma = math.log(final / lo), stats.noise(np.log(after))
        else:
            rise, sigma = final - lo, stats.noise(after)
        return not math.isfinite(sigma) or rise >= sigmas * sigma

    def _rises_into_nan(self, after: np.ndarray, lo: float, final: float) -> bool:
        """The rise before a NaN is one: at least `into_nan_moves` × the typical move between the points after the
        minimum (the median |difference|). A loss that swings ±10% from record to record and then turns inf has no
        rise of its own; its NaN is nan_loss's story, not a divergence beside it."""
        moves = np.abs(np.diff(after))
        return moves.size == 0 or final - lo >= self.into_nan_moves * float(np.median(moves))

    def _witness(self, run: Run, onset: int, after: np.ndarray, lo: float, final: float) -> dict | None:
        """A second, independent curve that shows the rise: the validation loss stands `witness_growth` × above
        its own positive minimum at the end, and every evaluation from the training minimum `onset` on (at least
        `witness_points`) sits above the midpoint of that rise; the training rise itself holds (after its first
        point above its midpoint, at least `min_step_after` points, none back below it). None otherwise."""
        mid = lo + (final - lo) / 2
        above = np.flatnonzero(after > mid)
        if (above.size == 0 or after.size - above[0] < self.min_step_after or np.any(after[above[0]:] < mid)
                or not run.has("val_loss")):
            return None
        vs, vv = run.arrays("val_loss")
        keep = np.isfinite(vv)
        vs, vv = vs[keep], vv[keep]
        if vv.size < self.witness_points + 1:
            return None
        j = int(np.argmin(vv))
        k = max(2, vv.size // 4)
        v0, v_end = float(vv[j]), float(np.median(vv[-k:]))
        since = vv[vs >= max(int(vs[j]) + 1, onset)]
        if not (v0 > 0 and v_end >= (1 + self.witness_growth) * v0 and since.size >= self.witness_points
                and np.all(since > v0 + (v_end - v0) / 2)):
            return None
        return {"witness": run.pick("val_loss"), "val_min": v0, "val_min_step": int(vs[j]),
                "val_last_step": int(vs[-1]), "val_final": v_end, "val_tail_step": int(vs[-k]),
                "val_growth": v_end / v0, "val_lowest_since": float(since.min()), "val_points_since": int(since.size)}

    def _held_jump(self, after: np.ndarray, lo: float, factor: float | None = None) -> int | None:
        """Where the loss first stands `factor` (default `short_jump`) × above a positive minimum `lo`, when every
        point from there to the end (at least `min_jump_points` of them) stays that high, else None."""
        factor = self.short_jump if factor is None else factor
        if not lo > 0:
            return None
        up = np.flatnonzero(after >= factor * lo)
        if up.size == 0 or after.size - up[0] < self.min_jump_points or np.any(after[up[0]:] < factor * lo):
            return None
        return int(up[0])

    def _jump(self, run: Run, steps: np.ndarray, y: np.ndarray, imin: int, lo: float, j: int,
              nan_follows: bool) -> Finding:
        held = y[imin + j:]
        low = float(np.min(held))
        lo_q, lo_text, _ = _minimum(steps, y, imin, max(3, int(y.size * self.smooth)) // 2 if y.size >= 12 else 0)
        ev = {"onset_step": int(steps[imin]), "min_level": lo, "initial_level": float(y[0]),
              "final_level": float(y[-1]), "growth_factor": low / lo, "jump_step": int(steps[imin + j]),
              "points_held": int(held.size), "lowest_after_jump": low, "short_jump": self.short_jump,
              "ends_nonfinite": nan_follows, "last_finite_step": int(steps[-1]), "points": int(y.size),
              "final_factor": float(y[-1]) / lo}
        # the whole effect a user sees: where the loss ends when it climbs on past the jump (×2 or more above it)
        climbs = float(y[-1]) >= self.climbs_on * float(y[imin + j])
        return Finding.of(self, severity="critical", step=int(steps[imin]), step_end=int(steps[-1]),
                          series=run.pick("loss"), evidence=ev, sources=(src(run, "loss", steps),),
                          summary=(f"loss jumps from {lo_text} to {y[imin + j]:.4g} at step {steps[imin + j]}"
                                   + (f" and climbs on to {y[-1]:.4g} at step {steps[-1]} ({ratio(y[-1] / lo_q)} the "
                                      f"minimum), never back below {low:.4g}" if climbs else
                                      f" and never comes back: all {held.size} points since stay at {low:.4g} or "
                                      f"above ({ratio(low / lo_q)} the minimum)")
                                   + (" and then turns non-finite" if nan_follows else "")))

    def _stays_up(self, after: np.ndarray, lo: float, final: float) -> bool:
        """A step up that stays: after the first point above the rise's midpoint, at least `min_step_after`
        points, none back below the midpoint, and the rise ≥ `step_sigmas` × their log-scale noise."""
        if lo <= 0 or final <= 0:
            return False
        mid = lo + (final - lo) / 2
        above = np.flatnonzero(after > mid)
        if above.size == 0:
            return False
        rest = after[above[0]:]
        if rest.size < self.min_step_after or np.any(rest < mid):
            return False
        sigma = stats.noise(np.log(rest))
        return math.isfinite(sigma) and math.log(final / lo) >= self.step_sigmas * max(sigma, 1e-12)

    def _blown_shows(self, run: Run, steps: np.ndarray, y: np.ndarray, nan_follows: bool) -> bool:
        """A level above `blown_level` is a blow-up only with evidence that does not rest on the loss's scale (an
        unnormalised regression loss sits at 1e9 and trains): a non-finite value after it, a rising trend of the
        loss or of its gradient norm (Mann–Kendall at `p`), or a classifier (a declared class count, a logged
        accuracy), whose cross-entropy sits near ln C when sane. A loss that does not move beyond its own noise has
        not blown up: flat and diverged exclude each other."""
        if nan_follows or class_count(run) is not None or run.has("accuracy") or run.has("val_accuracy"):
            return True
        rising = [(steps, y)] + ([finite_part(*run.arrays("grad_norm"))] if run.has("grad_norm") else [])
        return any(v.size >= self.min_points and (t := stats.mann_kendall(v, s)).z > 0 and t.p < self.p
                   for s, v in rising)

    def _critic_diverges(self, run: Run, rl) -> Iterator[Finding]:
        """In a reinforcement-learning run, a value loss that grows `base.RL_VALUE_GROWTH` × on a trend
        (`base.critic_grows`) while the reward does not improve (`FlatLoss._reward_stands`): the returns it regresses
        on did not grow, so the critic diverges (unnormalised rewards, a value LR too high). A warning."""
        grows = critic_grows(run, rl)
        stands = self.flat_loss._reward_stands(run) if grows else None
        if stands is None:
            return
        ev = {**grows, **{k: v for k, v in stands.evidence.items() if k.startswith(("reward", "first_third", "last_third"))},
              "reinforcement_learning": True}
        name, reward = grows["value_series"], stands.evidence["reward_series"]
        reward = "reward" if reward.lower() == "reward" else f"reward {reward}"
        yield Finding.of(self, severity="warning", step=grows["first_step"], step_end=grows["last_step"],
                         series=name, evidence=ev, sources=(src(run, name),),
                         summary=(f"{name} grows {ratio(grows['value_growth'])} over the run (median of its first "
                                  f"{grows['edge_records']} records {grows['value_head']:.4g}, of its last "
                                  f"{grows['value_tail']:.4g}; Mann–Kendall p {grows['mann_kendall_p']:.2g}) while the "
                                  f"{reward} does not improve (the median of its last "
                                  f"third {stands.evidence['last_third_median']:.4g} against "
                                  f"{stands.evidence['first_third_median']:.4g}): the critic diverges from returns "
                                  f"that did not grow (unnormalised rewards, a value LR too high)"))

    def _reward_lost(self, run: Run) -> Iterator[Finding]:
        """In a reinforcement-learning run, a reward that got worse (`FlatLoss._reward_lost`): on a falling trend
        ending below where it began, or learned and gave back half its gain. The agent's policy collapsed (an LR or
        clip range too large, exploration ended on a policy that cannot hold, value targets that blew up). A warning."""
        ev = self.flat_loss._reward_lost(run)
        if ev is None:
            return
        name = ev["reward_series"]
        reward = "the reward" if name.lower() == "reward" else f"the reward {name}"
        at = (lambda step: run.printed_span(name, step))  # noqa: E731 - the file's steps
        how = (f"rises from a median {ev['first_third_median']:.4g} over its first third to a median "
               f"{ev['best_stretch_median']:.4g} over its best {ev['best_stretch_records']} records (to "
               f"{at(ev['best_stretch_step'])}), then falls back to a median {ev['last_third_median']:.4g} over its "
               f"last third: the agent learned and lost it"
               if ev["collapsed"] else
               f"falls over its {ev['points']} records ({ev['first_level']:.4g} at {at(ev['first_step'])}, "
               f"{ev['last_level']:.4g} at {at(ev['last_step'])}; the median of its last third "
               f"{ev['last_third_median']:.4g} against {ev['first_third_median']:.4g} for its first, Mann–Kendall z "
               f"{ev['mann_kendall_z']:.2f}): the agent gets worse as it trains")
        yield Finding.of(self, severity="warning", step=ev["best_stretch_step"] if ev["collapsed"] else ev["first_step"],
                         step_end=ev["last_step"], series=name, evidence=ev | {"reinforcement_learning": True},
                         sources=(src(run, name),),
                         summary=f"{reward} {how} (a policy that collapsed: an LR or clip range too large, "
                                 f"exploration ended on a policy that cannot hold, value targets that blew up)")

    def _rl_blown(self, run: Run, objectives: tuple[str, ...]) -> Iterator[Finding]:
        """In a reinforcement-learning run, an objective above `rl_blown` in magnitude at every one of its
        `min_points` or more finite records: a value regression that far off is a value estimate blown up by orders
        of magnitude past any reward scale, not a target that moved. Its rise, fall or swings are not judged."""
        trained = set(run.meta.filter(pl.col("role") == "train_loss")["name"].to_list())
        for name in (n for n in objectives if n in trained):
            f = run.series_named(name)
            steps, y, _ = self._alive(f["step"].to_numpy(), f["value"].fill_null(np.nan).to_numpy())
            if y.size < self.min_points or float(np.min(np.abs(y))) <= self.rl_blown:
                continue
            ev = {"onset_step": int(steps[0]), "min_level": float(np.min(np.abs(y))), "initial_level": float(y[0]),
                  "final_level": float(y[-1]), "highest": float(np.max(np.abs(y))), "rl_blown": self.rl_blown,
                  "points": int(y.size), "objective": name, "reinforcement_learning": True}
            yield Finding.of(self, severity="critical", step=int(steps[0]), step_end=int(steps[-1]), series=name,
                             evidence=ev, sources=(src(run, name, steps),),
                             summary=(f"{name} is above {self.rl_blown:.0e} at every one of its {y.size} records "
                                      f"({y[0]:.4g} at {run.printed_span(name, steps[0])} to {y[-1]:.4g} at "
                                      f"{run.printed_span(name, steps[-1])}, highest {ev['highest']:.4g}): an agent's "
                                      f"objective that far off has blown up by orders of magnitude past any reward "
                                      f"scale"))
            return

    def _blown(self, run: Run, steps: np.ndarray, y: np.ndarray) -> Finding:
        lo = float(np.min(y))
        ev = {"onset_step": int(steps[0]), "min_level": lo, "initial_level": float(y[0]),
              "final_level": float(y[-1]), "blown_level": self.blown_level, "points": int(y.size),
              "ends_nonfinite": False, "last_finite_step": int(steps[-1])}
        return Finding.of(self, severity="critical", step=int(steps[0]), step_end=int(steps[-1]),
                          series=run.pick("loss"), evidence=ev, sources=(src(run, "loss", steps),),
                          summary=(f"loss is above {self.blown_level:.0e} at every logged point (from {y[0]:.4g} at "
                                   f"step {steps[0]}, lowest {lo:.4g}): it had blown up before the log began"))


def _perplexity(run: Run, steps: np.ndarray, y: np.ndarray) -> dict | None:
    """The run's perplexity beside its loss, where one is logged as exp(loss) (within 1% at every step they share,
    three at least): the loss is then a cross-entropy, a log scale. Its name, value at the loss's minimum and last
    value, else None."""
    imin = int(np.argmin(y))
    for name in run.names():
        if not {"ppl", "perplexity"} & set(words(name)):
            continue
        ps, pv = run.arrays(name)
        common, i, j = np.intersect1d(steps, ps, return_indices=True)
        if common.size < 3 or not np.all(np.isfinite(pv[j])):
            continue
        if np.allclose(np.exp(y[i]), pv[j], rtol=0.01) and steps[imin] in common and steps[-1] in common:
            return {"name": name, "at_min": float(pv[ps == steps[imin]][0]), "last": float(pv[ps == steps[-1]][0])}
    return None


def _minimum(steps: np.ndarray, y: np.ndarray, i: int, w: int) -> tuple[float, str, str]:
    """The minimum a rise starts from, as the file shows it: (level, phrase, note). Unsmoothed (`w` 0), point `i`'s
    logged value, "its minimum 0.166 at step 3"; else the median of the points `i`±`w` the smoothed minimum is the
    median of, "its lowest level, the median 0.7287 of steps 32-34,", and a note naming the lowest logged point from there
    on when it is lower ("; lowest logged 0.5999 at step 46")."""
    if w <= 0:
        return float(y[i]), f"its minimum {point(steps, y, i)}", ""
    level, text = level_of(steps, y, i - w, i + w)
    j = max(0, i - w) + int(np.argmin(y[max(0, i - w):]))
    note = f"; lowest logged {point(steps, y, j)}" if y[j] < level else ""
    return level, f"its lowest level, the {text},", note


def gave_back(start: float, lo: float, end: float) -> float:
    """The share of its fall from `start` to its minimum `lo` that a loss ending at `end` gave back: on a log scale
    once it fell more than a decade (`start` ≥ 10 × a positive `lo`: a loss back from 0.06 to 0.55 after falling
    from 2.6 gave back 59% of what it learned, not the 20% a linear scale says), in linear units otherwise;
    infinite where it never fell."""
    if not start > lo:
        return math.inf
    if lo > 0 and end > 0 and start >= 10 * lo:
        return math.log(end / lo) / math.log(start / lo)
    return (end - lo) / (start - lo)


def _effect(growth: float | None, rise: float, drop: float) -> str:
    """The rise as a factor of a positive minimum (`×3.7`), else, for a loss at or below zero where a ratio means
    nothing, as a difference against the fall before it (`+146.8, 99% of its earlier fall`)."""
    if growth is not None:
        return ratio(growth)
    share = f", {rise / drop:.0%} of its earlier fall" if drop > 0 else ""
    return f"{rise:+.4g}{share}"
