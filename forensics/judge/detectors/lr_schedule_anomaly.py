"""lr_schedule_anomaly: the logged LR reaches its floor far too early, stays constant under a configured scheduler, or jumps."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import polars as pl

from forensics.judge import stats
from forensics.judge.detectors.base import UPSTREAM, by_launch, loss_falls, src
from forensics.judge.findings import Finding
from forensics.judge.run import TEXT_FORMATS, Run
from ingest.roles import words

# Config keys for gradient accumulation steps (the replay template reads the same names).
ACCUMULATION_KEYS = ("grad_accumulation_steps", "gradient_accumulation_steps", "accumulate_grad_batches",
                     "grad_accum_steps")
CONSTANT_SCHEDULES = {"none", "null", "", "fixed"}
# Config keys that declare the run's planned length, in optimizer steps or in epochs (HF's trainer_state `max_steps`
# and TrainingArguments' `num_train_epochs`, Lightning's `max_epochs`, the usual script arguments), after what a console
# log prints beside its counters (`Epoch 3/100`, `[iter 50/10000]`: ingest.plan). HF's `max_steps` of -1 means unset.
STEP_PLAN_KEYS = ("planned_steps", "max_steps", "total_steps", "num_training_steps", "train_steps", "max_iters",
                  "max_iter", "total_iters", "num_steps", "n_steps", "iterations")
EPOCH_PLAN_KEYS = ("planned_epochs", "num_train_epochs", "max_epochs", "epochs", "num_epochs", "n_epochs", "nb_epochs",
                   "epoch_num", "total_epochs")


def _may_hold_constant(name: str) -> bool:
    """Schedulers under which a constant logged LR is expected: constant ones (HF `constant_with_warmup` once
    the warmup is over or unlogged) and plateau-driven ones that only move when the metric stalls."""
    n = name.lower().replace("-", "_")
    return n in CONSTANT_SCHEDULES or "constant" in n or "plateau" in n


def _continuous(name: str) -> bool:
    """Schedulers that move the LR at every step once a warmup is over (cosine, linear, polynomial, exponential,
    inverse square root, one-cycle); not a step schedule, which holds the LR between its milestones, nor a
    warmup-stable-decay one, which holds it on purpose."""
    n = name.lower()
    return not any(w in n for w in ("step", "stable")) and any(
        w in n for w in ("cos", "linear", "poly", "exp", "inverse", "sqrt", "onecycle", "one_cycle"))


def _cyclic(name: str) -> bool:
    """Schedulers that return to their floor and rise again by design (SGDR, CyclicLR, one-cycle variants)."""
    n = name.lower()
    return any(w in n for w in ("restart", "cycl", "sgdr", "triangular", "polynomial_decay_with_cycles"))


@dataclass(frozen=True)
class LrScheduleAnomaly:
    """The logged LR does not follow a sane schedule.

    Detects: (a) a decaying LR (floor after the peak ≤ `decay` × peak) that reaches its floor (within `near` of the range) before
    `early` of the run and stays there, or, where the config names a one-way schedule, first reaches it then;
    (b) an LR constant to 1e-9 while the config names a scheduler that should move it, or, under a scheduler that
    moves it at every step (`_continuous`), at its peak on every record of the log's final stretch, `held_points` records and half the log or more;
    (c) a decaying LR (`min_decay` below its peak, above `mid` of it) that jumps ×`jump` back up to within `match`
    of a value it had earlier (`stats.lr_restarts`), no cyclic scheduler named: a resume with a fresh scheduler;
    (d) an LR of exactly 0 on the first `zero_points` records and `zero_share` of them, or on every one of
    `all_zero_points` or more, unless the loss falls meanwhile (then the logged LR is not the optimizer's), nor where
    a printed LR is 0 on every one of fewer than `zero_points` records no declared plan places (an LR below the digits
    printed: a warmup's first records as well as a stuck LR);
    (e) with no scheduler named, a decay to its floor before `early` of the run that climbs back smoothly to
    `min_return` of the peak, no single rise over `max_rise_share` of the climb (a periodic schedule run past its
    horizon, e.g. stepped every micro-batch under gradient accumulation);
    (f) a decaying LR (as (a)) that sits at its floor from before `early` of the run's declared plan to the last record
    (`plan`: HF's `max_steps`, a config's epochs, a console's `Epoch 3/100`; a step plan read on the trainer's global
    step where the LR's file logs one, `trainer_steps`), on 3 records or more where the floor is 0 as printed; where no plan is declared, (a) judges against the log's own length and the finding says so;
    (g) an LR that falls in a straight line at every record after its peak (`line_points`, `line_fit`), by `min_decay`
    of it, whose line reaches 0 before `early` of the declared plan (a run stopped before the schedule's end shows it).
    (h) an LR that rises ×`up` in one logged interval, the intervals beside it moving it by `calm` of that or less,
    to a level it never had (within `match_up`), its printed rounding allowed for: a warmup that ends at half its
    peak and doubles, an LR at 0 that leaps to its peak, a mid-run leap (`stats.lr_jumps`); no cyclic scheduler named,
    nor a jump that lands below a peak the LR goes on rising to within the first `warm_share` of its records, or by a
    next rise of the same size (a warmup stepped per epoch, `_warmup_step`), nor one its launch logs fewer than
    `settled` records after.
    (i) an LR that rises at every record, ×`warm_rise` or more, to a last record at `ended` of the declared plan or
    later: a warmup longer than the run, which never trains at its LR nor decays (`_warmup_to_the_end`).
    Rules (a), (b), (e), (f), (g), (i) read each launch appended to the log on its own (`base.by_launch`), and quote
    the steps the file prints (`Run.printed_step`); the declared plan is the last launch's, an earlier one is judged
    against its own length.
    Why: a schedule that ends early stalls training (see plateau); one that never moves is not running.
    Evidence: peak and floor LR, step reaching the floor vs the run's last step, configured scheduler.
    False alarms: 0 of the 169 healthy runs it could check (benchmarks/calibrate.py); 0 of the 24 healthy real runs it
    could check (of 40), at `decay` 0.1 and 0.01 alike. Rules (b) after a warmup, (f) and (g): 0 of the 116 healthy
    labelled runs of the development sets (docs/engine.md). Rule (h): 0 of their 56 healthy runs with an LR, at ×1.2
    to ×2. Pooled (849 real runs, 328 healthy), each field swept alone: 0 of the 180 healthy runs it could check;
    `min_decay`, `mid`, `match`, `all_zero_points`, `min_return`, `max_rise_share`, `held_points`, `line_points`,
    `match_up`, `warm_rise` and `ended` fire on none anywhere in their range (docs/engine.md).
    """

    kind: ClassVar[str] = "lr_schedule_anomaly"
    stage: ClassVar[int] = UPSTREAM
    requires: ClassVar[tuple[str, ...]] = ("lr",)
    early: float = 0.5  # pooled healthy runs fired on: 0 of 180 at 0.2-0.6, 3 at 0.7; 0.6 adds a false claim
    decay: float = 0.01  # a floor at 1% of the peak or below: nothing trains there (a step schedule's ×0.1 is planned)
    # (0 of 180 healthy at 0.001-0.03, 2 at 0.1)
    near: float = 0.02  # "at the floor": within this fraction of the peak-to-floor range (0 of 180 healthy at 0.005-0.05, 6 at 0.1)
    jump: float = 1.1  # (c) a decaying LR that jumps ×1.1 or more back up (0 of 180 healthy at 1.05-3; 1.5 loses a hit) ...
    min_decay: float = 0.1  # ... after decaying 10% below its peak ...
    mid: float = 0.1  # ... but not below 10% of it (SGDR restarts from its cycle's end, near 0) ...
    match: float = 0.01  # ... to within 1% of a value its schedule had earlier
    zero_points: int = 5  # (d) an LR of exactly 0 on the first 5 records or more (0 of 180 healthy at 2-10; 3 finds one
    # more and claims one falsely, a printed LR below its digits) ...
    zero_share: float = 0.25  # ... and on a quarter of them (a warmup from 0 is 0 on its first record only)
    all_zero_points: int = 2  # (d) ... or 0 on every one of 2 records or more, however short the log
    start_points: int = stats.START_POINTS  # the initial level: the median of the first this many points
    min_return: float = 0.5  # (e) after its floor the LR climbs back to half its peak or more ...
    max_rise_share: float = 0.5  # ... in steps none of which is half the climb (not a warm restart's jump)
    held_points: int = 10  # (b) after a warmup: at its peak on the last 10 records and half of them, or more
    line_points: int = 4  # (g) a straight-line fall over 4 records or more ...
    line_fit: float = 0.02  # ... no record off the line by 2% of the fall (printed LRs round to a few digits; 0 of 180
    # healthy at 0.005-0.05, 1 at 0.1)
    up: float = 1.5  # (h) an LR that rises ×1.5 or more in one logged interval (1 of 180 healthy at 1.2, 2 loses a hit) ...
    calm: float = 0.2  # ... the intervals beside it moving it by a fifth of that rise or less (per step) ...
    match_up: float = 0.05  # ... to no value within 5% of one logged before it (a restart's, rule (c)'s)
    warm_share: float = 0.1  # (h) a jump on the way to a peak reached within the first 10% of the records: warmup
    # (0 of 180 healthy at 0.05-0.3, 1 at 0.02)
    settled: int = 3  # (h) the LR logged on 3 records or more after the jump, in its launch (a launch that ends on
    # the jump's first records stops inside its warmup)
    warm_rise: float = 2.0  # (i) an LR that rises ×2 or more, at every record, to its last ...
    ended: float = 0.9  # ... which lies at 90% of the declared plan or later: a warmup that never ended

    def restarts(self, run: Run) -> list[dict]:
        """Rule (c)'s jumps (`stats.lr_restarts`) on the run's LR, none under a cyclic scheduler; resumed_run
        reads them too (a scheduler that started again is a resume that did not restore its state). Each launch
        appended to the log is read on its own (`base.by_launch`)."""
        if not run.has("lr"):
            return []
        sched = run.config("lr_scheduler_type", "scheduler", "lr_scheduler", "scheduler.name")
        if isinstance(sched, str) and _cyclic(sched):
            return []
        # each launch appended to the log on its own: a fresh launch's schedule starting again is no resume
        return [r for steps, lr in by_launch(run, "lr", *run.arrays("lr"))
                for r in stats.lr_restarts(steps, lr, self.jump, self.min_decay, self.mid, self.match)]

    def jumps(self, run: Run) -> list[dict]:
        """Rule (h)'s jumps (`stats.lr_jumps`) on each launch's LR, none under a cyclic scheduler; a console's
        printed LR judged within its rounding."""
        if not run.has("lr"):
            return []
        sched = run.config("lr_scheduler_type", "scheduler", "lr_scheduler", "scheduler.name")
        if isinstance(sched, str) and _cyclic(sched):
            return []
        printed = run.format_of(run.pick("lr")) in TEXT_FORMATS  # a console's LR is held to the digits it prints
        # the LR seen settled after the jump: a launch that stops on its first records at the new level (a warmup
        # stepped per epoch, cut short by a crash) shows no schedule handing over, as a log that stops in its warmup
        return [j for steps, lr in by_launch(run, "lr", *run.arrays("lr"))
                for j in stats.lr_jumps(steps, lr, self.up, self.calm, self.match_up, rounded=printed)
                if not self._warmup_step(steps, lr, j) and np.sum(steps > j["step"]) >= self.settled]

    def _warmup_step(self, steps: np.ndarray, lr: np.ndarray, j: dict) -> bool:
        """Whether jump `j` is a step of a warmup: it lands below the launch's peak, which the LR goes on rising to
        without falling, and reaches within its first `warm_share` records or by a next rise of the same size (to
        2 × `match_up` of it: a linear warmup stepped per epoch, one step of a staircase however long the warmup); a
        jump that lands at the peak (a warmup handing over at the wrong value), or a step schedule that multiplies
        the LR up at each milestone, is none."""
        ok = np.isfinite(lr)
        s, v = steps[ok], lr[ok]
        if v.size == 0:
            return False
        top = int(np.argmax(v))
        at = int(np.searchsorted(s, j["step"]))
        climb = v[at:top + 1]
        rise = j["lr_after"] - j["lr_before"]
        steps_up = np.diff(climb)
        steps_up = steps_up[steps_up > self.match_up * climb[:-1]]
        # the climb goes on by a step as large (a linear warmup stepped per epoch), not by a growing one (×2 each)
        stair = steps_up.size > 0 and abs(steps_up[0] - rise) <= self.match_up * 2 * rise
        return bool(at < top and (top <= self.warm_share * v.size or stair)
                    and j["lr_after"] < (1 - self.match_up) * v[top]
                    and np.all(np.diff(climb) >= -self.match_up * climb[:-1]))

    def check(self, run: Run) -> Iterator[Finding]:
        name = run.pick("lr")
        for r in self.restarts(run)[:1]:
            at, same = run.printed_step(name, r["step"]), run.printed_step(name, r["same_lr_step"])
            yield Finding.of(self, severity="warning", step=r["step"], step_end=r["step"], series=name,
                             evidence=r, sources=(src(run, "lr", np.asarray([r["same_lr_step"], r["step"]])),),
                             summary=(f"LR jumps back up from {r['lr_before']:.3g} to {r['lr_after']:.3g} at step "
                                      f"{at} in the middle of its decay, the value it had at step {same}: the "
                                      f"scheduler started again (a resume that did not restore its state?)"))
            return
        steps, lr = run.arrays("lr")
        ok = np.isfinite(lr)
        if ok.sum() < min(5, self.all_zero_points):
            return
        steps, lr = steps[ok], lr[ok]
        zero = int(np.argmax(lr != 0)) if np.any(lr != 0) else lr.size  # leading records at exactly 0
        every = zero == lr.size >= self.all_zero_points  # 0 on every record, however few: nothing ever trained
        if every and run.format_of(name) in TEXT_FORMATS and lr.size < self.zero_points:
            # A printed 0 is an LR below the digits printed: on a few records no declared plan places, as well a
            # warmup's first records as an LR stuck at 0
            every = planned_fraction(run, steps, zero - 1) is not None
        if (every or zero >= self.zero_points and zero >= self.zero_share * lr.size) \
                and not loss_falls(run, self.zero_share, steps[zero - 1], start_points=self.start_points):
            ev = {"zero_points": zero, "points": int(lr.size), "first_step": int(steps[0]),
                  "last_zero_step": int(steps[zero - 1]), "lr_after": float(lr[zero]) if zero < lr.size else None}
            yield Finding.of(self, severity="warning", step=int(steps[0]), step_end=int(steps[zero - 1]),
                             series=name, evidence=ev, sources=(src(run, "lr", steps[:zero]),),
                             summary=((f"LR is 0 on every one of its {zero} records" if every else
                                       f"LR is 0 on the first {zero} of {lr.size} records")
                                      + f" (steps {run.printed_step(name, steps[0])}-"
                                        f"{run.printed_step(name, steps[zero - 1])}): nothing moves the weights while "
                                        f"it is (a warmup or scheduler stuck at 0, or an LR printed with too few "
                                        f"decimals)"))
            return
        for j in self.jumps(run)[:1]:
            before, after = run.printed_step(name, j["previous_step"]), run.printed_step(name, j["step"])
            yield Finding.of(self, severity="warning", step=j["step"], step_end=j["step"], series=name,
                             evidence={**j, "rule": "jump"},
                             sources=(src(run, "lr", np.asarray([j["previous_step"], j["step"]])),),
                             summary=(f"LR jumps from {j['lr_before']:.3g} at step {before} to "
                                      f"{j['lr_after']:.3g} at step {after}"
                                      + (f" (×{j['ratio']:.2g})" if j["ratio"] else "")
                                      + " in one logged interval, the intervals beside it moving it far less: no "
                                        "standard schedule does that (a warmup computed for another length, or two "
                                        "schedulers handing over at the wrong value?)"))
            return
        if lr.size < 5:
            yield from self._zero_before_plan(run, steps, lr)
            return
        # the run's length on the LR's own axis: line ordinals are never compared with logged steps (DECISIONS §16)
        ordinal = bool(run.meta.filter(pl.col("name") == name)["ordinal"][0])
        last = int(steps[-1]) if ordinal else max(int(run.last_step() or steps[-1]), int(steps[-1]))
        # each launch appended to the log judged on its own, against its own last LR record (other series' steps
        # are composed on their own axes): a fresh launch's warmup is no schedule run past its horizon
        pieces = [(s, v) for s, v in by_launch(run, "lr", steps, lr) if v.size >= 5]
        for k, (s, v) in enumerate(pieces):
            found = list(self._shape(run, s, v, last if len(pieces) == 1 else int(s[-1]), len(pieces) > 1,
                                     planned=k == len(pieces) - 1))
            if found:
                yield from found
                return

    def _shape(self, run: Run, steps: np.ndarray, lr: np.ndarray, last: int, launch: bool,
               planned: bool = True) -> Iterator[Finding]:
        """Rules (a), (b), (e), (f), (g), (i) on one launch's LR records (`launch`: one of several appended to the
        log, its steps quoted as the file prints them). The plan a run declares is the plan of the launch its log
        ends in (a console's last printed total, the config a resumed trainer wrote last): an earlier launch
        (`planned` False) is judged against its own length only, never against another launch's plan."""
        name = run.pick("lr")
        at_step = (lambda i: run.printed_step(name, steps[min(i, lr.size - 1)]))  # noqa: E731 - the file's step
        of_launch = " (in one of the launches appended to the log)" if launch else ""
        first = int(steps[0])
        peak, floor = _peak_and_floor(lr)
        # The first time at the peak: a cycling schedule's later peaks may be a rounding error higher.
        ipeak = int(np.argmax(lr >= peak - self.near * (peak - floor)))
        sched = run.config("lr_scheduler_type", "scheduler", "lr_scheduler", "scheduler.name")
        one_way = isinstance(sched, str) and not _may_hold_constant(sched) and not _cyclic(sched)
        at_floor = lr <= floor + self.near * (peak - floor)  # a logged trough may miss the exact minimum
        if peak > 0 and floor <= self.decay * peak and (one_way or at_floor[-1]):
            if one_way:  # the first time after the peak
                at = ipeak + 1 + int(np.argmax(at_floor[ipeak + 1:])) if at_floor[ipeak + 1:].any() else lr.size - 1
            else:  # the start of the final stretch at the floor
                above = np.flatnonzero(~at_floor)
                at = max(int(above[-1]) + 1 if above.size else 0, ipeak + 1)
            reach = int(steps[min(at, lr.size - 1)])
            plan = planned_fraction(run, steps, min(at, lr.size - 1)) if at_floor[-1] and planned else None
            if plan is not None and plan["fraction"] < self.early and last > first \
                    and (reach - first) / (last - first) >= self.early:
                yield self._before_plan(run, steps, lr, at, peak, floor, sched, plan)
                return
            if last > first and (reach - first) / (last - first) < self.early:
                rises = int(np.sum(np.diff(lr[at:]) > 0)) if at < lr.size else 0
                ev = {"peak_lr": peak, "floor_lr": floor, "floor_step": reach, "last_step": last,
                      "fraction_of_run": (reach - first) / (last - first), "scheduler": sched,
                      "rises_after_floor": rises, "plan": plan}
                yield Finding.of(self, severity="warning", step=reach, step_end=last, series=name,
                                 evidence=ev, sources=(src(run, "lr", steps),),
                                 summary=(f"LR decays from {peak:.3g} to its floor, "
                                          f"{_at_floor(lr, at, floor, at_step(at))}, "
                                          f"{ev['fraction_of_run']:.0%} into a run of {(last - first) if launch else last} steps{of_launch}" + (
                                              f" ({'at most ' if plan['bound'] else ''}{plan['fraction']:.0%} of {plan['said']})" if plan else
                                              " (the run declares no planned length: judged against the log's)")))
                return
        if not (isinstance(sched, str) and _cyclic(sched)):
            back = self._past_horizon(run, steps, lr, first, last)
            if back:
                f = int(np.searchsorted(steps, back["floor_step"]))
                r = int(np.searchsorted(steps, back["return_step"]))
                yield Finding.of(self, severity="warning", step=back["floor_step"], step_end=back["return_step"],
                                 series=name, evidence=back, sources=(src(run, "lr", steps),),
                                 summary=(f"LR decays from {peak:.3g} to its floor, "
                                          f"{_at_floor(lr, f, floor, at_step(f))}, "
                                          f"{back['fraction_of_run']:.0%} into a run of {(last - first) if launch else last} "
                                          f"steps{of_launch}, then climbs back to {back['return_lr']:.3g} at step "
                                          f"{at_step(r)}: the schedule ran past its horizon" + (
                                              f", {back['accumulation']}× too fast (stepped every micro-batch under "
                                              f"gradient accumulation {back['accumulation']}?)"
                                              if back.get("matches_accumulation") else "")))
                return
        line = self._line_to_zero(run, steps, lr) if planned else None
        if line is not None:
            shown = {"step": lambda x: at_step(int(np.searchsorted(steps, x)))}.get(line["unit"], lambda x: f"{x:g}")
            yield Finding.of(self, severity="warning", step=line["from_step"], step_end=int(steps[-1]),
                             series=name, evidence=line, sources=(src(run, "lr", steps),),
                             summary=(f"LR falls in a straight line from {line['lr_from']:.4g} at {line['unit']} "
                                      f"{shown(line['from'])} to {line['lr_to']:.4g} at {line['unit']} "
                                      f"{shown(line['to'])} ({line['per_unit']:.3g} per {line['unit']}): at that pace "
                                      f"it reaches 0 at {line['unit']} {line['zero_at']:.0f}, "
                                      f"{line['fraction_of_plan']:.0%} into the {line['plan']} the run declares; the "
                                      f"schedule was computed for a much shorter run"))
            return
        if isinstance(sched, str) and not _may_hold_constant(sched) and lr.size >= 10 \
                and peak - float(lr.min()) <= 1e-9 * max(abs(peak), 1e-300):
            ev = {"lr": peak, "scheduler": sched, "points": int(lr.size)}
            yield Finding.of(self, severity="warning", step=first, step_end=int(steps[-1]), series=name,
                             evidence=ev, sources=(src(run, "lr", steps),),
                             summary=f"LR stays at {peak:.3g} over {lr.size} points although the config names a {sched} scheduler")
            return
        # (b) after a warmup: at its peak on every record of the log's final stretch
        off = np.flatnonzero(np.abs(lr - peak) > 1e-9 * abs(peak))
        start = int(off[-1]) + 1 if off.size else 0
        held = lr.size - start
        if one_way and _continuous(sched) and off.size and held >= max(self.held_points, lr.size / 2):
            ev = {"lr": peak, "scheduler": sched, "points": int(lr.size), "held_points": int(held),
                  "held_from_step": int(steps[start]), "rule": "held_after_warmup"}
            yield Finding.of(self, severity="warning", step=int(steps[start]), step_end=int(steps[-1]),
                             series=name, evidence=ev, sources=(src(run, "lr", steps[start:]),),
                             summary=(f"LR reaches {peak:.3g} at step {at_step(start)} and stays exactly there on "
                                      f"all {held} records to the last (step {at_step(lr.size - 1)}), although the "
                                      f"run names a {sched} scheduler, which would have moved it: another scheduler "
                                      f"drives the optimizer (a DeepSpeed config's own?), or none is stepped"))
            return
        if planned:
            yield from self._warmup_to_the_end(run, steps, lr, at_step)

    def _before_plan(self, run: Run, steps: np.ndarray, lr: np.ndarray, at: int, peak: float, floor: float,
                     sched, plan: dict) -> Finding:
        """Rule (f)'s finding: the LR at its floor from `at` to the last record, `plan["fraction"]` into the plan."""
        at = min(at, lr.size - 1)
        ev = {"peak_lr": peak, "floor_lr": floor, "floor_step": int(steps[at]), "last_step": int(steps[-1]),
              "fraction_of_plan": plan["fraction"], "scheduler": sched, "plan": plan, "rule": "before_plan"}
        return Finding.of(self, severity="warning", step=int(steps[at]), step_end=int(steps[-1]),
                          series=run.pick("lr"), evidence=ev, sources=(src(run, "lr", steps),),
                          summary=(f"LR decays from {peak:.3g} to its floor, "
                                   f"{_at_floor(lr, at, floor, run.printed_step(run.pick('lr'), steps[at]))}, and "
                                   f"stays there to the last record; the run declares {plan['said']}, and the floor "
                                   f"comes {'at most ' if plan['bound'] else ''}{plan['fraction']:.0%} into it: the "
                                   f"schedule was computed for a shorter run (scheduler stepped every micro-batch, or "
                                   f"its length set in other units?)"))

    def _zero_before_plan(self, run: Run, steps: np.ndarray, lr: np.ndarray) -> Iterator[Finding]:
        """Rule (f) on a log of 3-4 records: an LR printed as 0 from its second record on, early in a declared plan,
        the loss not falling meanwhile (where it falls, the printed 0 is a value rounded away)."""
        if lr.size < 3 or lr[0] <= 0 or np.any(lr[1:] != 0):
            return
        plan = planned_fraction(run, steps, 1)
        if plan is None or plan["fraction"] >= self.early or loss_falls(run, self.zero_share, steps[-1], steps[1]):
            return
        yield self._before_plan(run, steps, lr, 1, float(lr[0]), 0.0,
                                run.config("lr_scheduler_type", "scheduler", "lr_scheduler", "scheduler.name"), plan)

    def _warmup_to_the_end(self, run: Run, steps: np.ndarray, lr: np.ndarray, at_step) -> Iterator[Finding]:
        """Rule (i): an LR that rises at every record, ×`warm_rise` or more, up to its last record, which lies at the
        end of the plan the run declares (`ended` of it or more, `plan_reached`): the warmup never ended, so the run
        neither trained at the LR it sets nor decayed (a warmup set longer than the run). A log that stops in its
        warmup before its plan's end (an excerpt, a crash) shows the same rise and says nothing."""
        if lr.size < self.line_points + 1 or np.any(np.diff(lr) <= 0) or lr[-1] < self.warm_rise * lr[0]:
            return
        plan = plan_reached(run, steps)
        if plan is None or plan["fraction"] < self.ended:
            return
        set_lr = run.config_number("learning_rate", "lr")
        warmup = run.config_number("warmup_steps", "num_warmup_steps", "warmup_iters")
        ev = {"rule": "warmup_to_the_end", "lr_first": float(lr[0]), "lr_last": float(lr[-1]), "points": int(lr.size),
              "plan": plan, "learning_rate": set_lr, "warmup_steps": warmup}
        said = ""
        if set_lr is not None and set_lr > lr[-1] * 1.01:
            said = f"; the config sets learning_rate {set_lr:g}, which it never reaches"
            if warmup is not None and plan.get("steps") and warmup >= plan["steps"]:
                said += f", behind warmup_steps {warmup:g} for a run of {plan['steps']:g}"
        yield Finding.of(self, severity="warning", step=int(steps[0]), step_end=int(steps[-1]), series=run.pick("lr"),
                         evidence=ev, sources=(src(run, "lr", steps),),
                         summary=(f"LR rises at every one of its {lr.size} records, from {lr[0]:.3g} at step "
                                  f"{at_step(0)} to {lr[-1]:.3g} at step {at_step(lr.size - 1)}, the end of the "
                                  f"{plan['said']} the run declares: its warmup never ended, so the run never "
                                  f"trained at a settled LR nor decayed{said}"))

    def _line_to_zero(self, run: Run, steps: np.ndarray, lr: np.ndarray) -> dict | None:
        """Rule (g)'s evidence: after its peak the LR falls at every record, on a straight line (no point off it by
        more than `line_fit` of the fall, its two halves' slopes within `line_fit` × 5 of each other: not an
        exponential or step decay), by `min_decay` of the peak or more and not yet to 0, and the line reaches 0
        before `early` of the declared plan (`plan_axis`); else None."""
        axis = plan_axis(run, steps)
        if axis is None:
            return None
        x, total, said, unit = axis
        i = int(np.argmax(lr))
        xs, ys = x[i:], lr[i:]
        if ys.size < self.line_points or ys[-1] <= 0 or np.any(np.diff(ys) >= 0) or np.any(np.diff(xs) <= 0) \
                or ys[-1] > (1 - self.min_decay) * ys[0]:
            return None
        slope, icpt = np.polyfit(xs, ys, 1)
        fall = float(ys[0] - ys[-1])
        half = ys.size // 2
        s1, s2 = (np.polyfit(xs[a:b], ys[a:b], 1)[0] for a, b in ((0, half + 1), (half, ys.size)))
        if slope >= 0 or np.max(np.abs(ys - (slope * xs + icpt))) > self.line_fit * fall \
                or abs(s2 / s1 - 1) > 5 * self.line_fit:
            return None
        zero = float(-icpt / slope)
        if zero / total >= self.early:
            return None
        return {"rule": "line_to_zero", "from_step": int(steps[i]), "from": float(xs[0]), "to": float(xs[-1]),
                "lr_from": float(ys[0]), "lr_to": float(ys[-1]), "per_unit": float(-slope), "unit": unit,
                "zero_at": zero, "plan_length": total, "plan": said, "fraction_of_plan": zero / total}

    def _past_horizon(self, run: Run, steps: np.ndarray, lr: np.ndarray, first: int, last: int) -> dict | None:
        """Rule (e)'s evidence: a decay from the peak to the floor before `early` of the run, then a smooth climb
        back to `min_return` of the peak; else None."""
        if lr.size < 10 or last <= first:
            return None
        peak, floor = _peak_and_floor(lr)
        if not (peak > 0 and floor <= self.decay * peak):
            return None
        ipeak = int(np.argmax(lr >= peak - self.near * (peak - floor)))
        at_floor = lr <= floor + self.near * (peak - floor)
        if not at_floor[ipeak + 1:].any():
            return None
        f = ipeak + 1 + int(np.argmax(at_floor[ipeak + 1:]))
        fraction = (steps[f] - first) / (last - first)
        if fraction >= self.early or (steps[ipeak] - first) >= 0.5 * (steps[f] - steps[ipeak]):
            return None  # late, or climbed to the peak as long as it fell (a cyclic schedule's ramp)
        up = np.flatnonzero(lr[f:] >= self.min_return * peak)
        if up.size == 0:
            return None
        r = f + int(up[0])
        rises = np.diff(lr[f:r + 1])
        if rises.size < 3 or float(rises.max()) > self.max_rise_share * (lr[r] - lr[f]):
            return None  # a warm restart jumps back in one step
        ev = {"peak_lr": peak, "floor_lr": floor, "peak_step": int(steps[ipeak]), "floor_step": int(steps[f]),
              "last_step": last, "fraction_of_run": float(fraction), "return_step": int(steps[r]),
              "return_lr": float(lr[r]), "rule": "past_horizon"}
        accum = run.config_number(*ACCUMULATION_KEYS)
        if accum and accum > 1:
            ev["accumulation"] = int(accum)
            ev["matches_accumulation"] = bool(abs(fraction * accum - 1) <= 0.2)
        return ev


def planned_fraction(run: Run, steps: np.ndarray, at: int) -> dict | None:
    """How far into the run's declared plan the LR record `at` lies: {"fraction", "said" (the plan in words),
    "bound" (True where only an upper bound is known: the furthest counter the log printed, for a point with no
    counter of its own)}; None where the run declares no plan, or one the log has already passed (a plan the log
    outruns is not this run's). Steps are placed on a step plan where the LR's axis is logged steps, epochs on an
    epoch plan from the counter printed on the point's line or the logged epoch series."""
    name = run.pick("lr")
    ordinal = bool(run.meta.filter(pl.col("name") == name)["ordinal"][0])
    declared = _declared(run, STEP_PLAN_KEYS)
    if declared:
        total, key = declared
        steps = trainer_steps(run, steps)
        reached = run.config_number("steps_reached")
        if not ordinal and steps[-1] < total:
            return _plan(float(steps[at]) / total, f"{total:g} steps ({key})", False)
        if ordinal and reached is not None and reached < total:
            return _plan(reached / total, f"{total:g} steps ({key}), the log printing {reached:g} of them", True)
    declared = _declared(run, EPOCH_PLAN_KEYS)
    if not declared:
        return None
    epochs, key = declared
    if ordinal:
        printed = run.counters(name, [int(steps[at])]).get(int(steps[at]), (None, None))[0]
        reached = run.config_number("epochs_reached")
        done, bound = (printed, False) if printed is not None else (reached, True)
    elif run.has("epoch"):
        es, ev = run.arrays("epoch")
        keep = np.isfinite(ev)
        done = float(np.interp(steps[at], es[keep], ev[keep])) if keep.any() and es[keep][-1] >= steps[at] else None
        bound = False
    else:
        return None
    if done is None or done >= epochs:
        return None
    return _plan(float(done) / epochs, f"{epochs:g} epochs ({key})", bound)


def plan_reached(run: Run, steps: np.ndarray) -> dict | None:
    """How far into the run's declared plan the last LR record lies, where it lies within it (a log that ends at its
    plan's end reaches 1.0): {"fraction", "said", "steps" (the planned steps, where a step plan is declared)}; None
    where no plan is declared, the records cannot be placed on it, or the log outruns it (not this run's plan)."""
    name = run.pick("lr")
    ordinal = bool(run.meta.filter(pl.col("name") == name)["ordinal"][0])
    declared = _declared(run, STEP_PLAN_KEYS)
    if declared and not ordinal:
        total, key = declared
        fraction = float(trainer_steps(run, steps)[-1]) / total
        return {"fraction": fraction, "said": f"{total:g} steps ({key})", "steps": total} if fraction <= 1 else None
    declared = _declared(run, EPOCH_PLAN_KEYS)
    if not declared:
        return None
    epochs, key = declared
    if ordinal:
        done = run.counters(name, [int(steps[-1])]).get(int(steps[-1]), (None, None))[0]
    elif run.has("epoch"):
        es, ev = run.arrays("epoch")
        keep = np.isfinite(ev)
        done = float(np.interp(steps[-1], es[keep], ev[keep])) if keep.any() else None
    else:
        return None
    if done is None or done > epochs:
        return None
    return {"fraction": float(done) / epochs, "said": f"{epochs:g} epochs ({key})", "steps": None}


def plan_axis(run: Run, steps: np.ndarray) -> tuple[np.ndarray, float, str, str] | None:
    """Each LR record's place in the run's declared plan, in the plan's unit: (positions, planned length, the plan in
    words, "step" or "epoch"); None where no plan is declared or the records cannot be placed on it (logged steps on
    a step plan; on an epoch plan the epoch printed on each record's line, or the logged epoch series)."""
    name = run.pick("lr")
    ordinal = bool(run.meta.filter(pl.col("name") == name)["ordinal"][0])
    declared = _declared(run, STEP_PLAN_KEYS)
    on_plan = trainer_steps(run, steps) if declared and not ordinal else steps
    if declared and not ordinal and on_plan[-1] < declared[0]:
        return on_plan.astype(float), declared[0], f"{declared[0]:g} steps ({declared[1]})", "step"
    declared = _declared(run, EPOCH_PLAN_KEYS)
    if not declared:
        return None
    epochs, key = declared
    if ordinal:
        printed = run.counters(name, steps.tolist())
        x = [printed.get(int(s), (None, None))[0] for s in steps]
        if any(e is None for e in x):
            return None
        x = np.asarray(x, dtype=float)
    elif run.has("epoch"):
        es, ev = run.arrays("epoch")
        keep = np.isfinite(ev)
        if not keep.any() or es[keep][-1] < steps[-1]:
            return None
        x = np.interp(steps, es[keep], ev[keep])
    else:
        return None
    return (x, epochs, f"{epochs:g} epochs ({key})", "epoch") if x[-1] < epochs else None


def trainer_steps(run: Run, steps: np.ndarray) -> np.ndarray:
    """The LR records' `steps` as the trainer's optimizer steps, the counter a step plan (`max_steps`) counts: where the
    LR's file also logs a global step (HF's `train/global_step` beside W&B's own history index `_step`, one row per
    logging call; an evaluation's row repeats the training row's global step), its value at each record; `steps`
    themselves otherwise."""
    name = run.pick("lr")
    row = run.meta.filter(pl.col("name") == name)
    if row.height == 0:
        return steps
    for other in run.meta.filter((pl.col("grp") == row["grp"][0]) & ~pl.col("ordinal").fill_null(False)
                                 & (pl.col("name") != name))["name"].to_list():
        if words(other)[-2:] != ["global", "step"]:
            continue
        pts = run.points(other).filter(pl.col("value").is_finite())
        s, v = pts["step"].to_numpy(), pts["value"].to_numpy()
        if s.size < 2 or np.any(np.diff(s) <= 0) or np.any(np.diff(v) < 0) or v[-1] <= v[0] or s[0] > steps[0] \
                or s[-1] < steps[-1]:
            continue  # not one counter that rises with the records (rows at one step may repeat it) and covers them
        return np.interp(steps, s, v)
    return steps


def _declared(run: Run, keys: tuple[str, ...]) -> tuple[float, str] | None:
    """(the planned length, where it was read) from the first of `keys` the config sets to 2 or more (HF writes -1
    for an unset `max_steps`); a console's counters (ingest.plan) are named as such."""
    for k in keys:
        v = run.config_number(k)
        if v is not None and v >= 2:
            return v, {"planned_steps": "the total its step counter prints",
                       "planned_epochs": "the total its epoch counter prints"}.get(k, k)
    return None


def _plan(fraction: float, said: str, bound: bool) -> dict:
    return {"fraction": float(fraction), "said": said, "bound": bound}


def _peak_and_floor(lr: np.ndarray) -> tuple[float, float]:
    """The LR's peak and the lowest value it falls to after it: a warmup's start is below the peak but is no floor
    the schedule decays to."""
    ipeak = int(np.argmax(lr))
    return float(lr[ipeak]), float(lr[ipeak:].min())


def _at_floor(lr: np.ndarray, at: int, floor: float, step: int) -> str:
    """`0 at step 25`: the logged LR where it reached its floor (`step`, as the file shows it), with the floor itself
    when that point is only near it (`3e-07 at step 25, lowest 1e-07`)."""
    at = min(at, lr.size - 1)
    return f"{lr[at]:.3g} at step {step}" + (f", lowest {floor:.3g}" if lr[at] != floor else "")
