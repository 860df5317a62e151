"""amp_overflow: the mixed-precision loss scale keeps falling (logged, or read from GradScaler state in checkpoints)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import polars as pl

from forensics.judge import stats
from forensics.judge.detectors.base import UPSTREAM, announced_at, loss_falls, quoted, src
from forensics.judge.findings import Finding
from forensics.judge.numbers import count
from forensics.judge.run import ROLES, Run
from ingest.announcements import NONFINITE_GRAD


@dataclass(frozen=True)
class AmpOverflow:
    """The mixed-precision loss scale keeps falling.

    Detects: a loss-scale series that ends at most 2^-`min_halvings` of its maximum and still falls over the second
    half (its last value 2^-`late_halvings` of that half's maximum) while no training loss falls by `late_fall`
    there, or collapses to `collapse` or 0 (a scale under `floor` that never moves on `min_skips` points or more,
    the loss not falling by `min_fall` meanwhile), or falls to its floor (`floor`, or the configured
    `min_loss_scale`) and sits there without growing on its last `min_skips` records or more (`_pinned_at`), the
    loss not falling by `late_fall` meanwhile (halvings below 1 that grow back are a dynamic scaler's working), or
    keeps overflowing (not read from a scale that is no power of two: an average over steps): after start-up calibration at least `max_skip_rate` of the steps halve it, on
    `min_skips` halvings or more (a logged count of skipped steps makes the same rate). Calibration ends at the first
    growth, the first step with a finite grad norm, or past step `horizon`, unless the log starts at a fresh scaler's
    value (`fresh_scale`). Halvings beside a non-finite training loss (`min_nonfinite_skips`) count at any point.
    Without a logged scale, the scaler state saved in checkpoints is the series (falling and floor rules only).
    Where neither says so, steps a console log announces it skipped for non-finite gradients (`Found inf or nan in
    gradients, skipping step`, one per line) make the same skip rate, on a logged step axis. Where no scale is
    logged, records whose grad norm is NaN/Inf and whose LR did not advance, in a run whose LR advances on its
    finite-norm records, are skipped steps too (`_from_held_lr`). Effect size first, at any length: a log that ends on
    `min_skips` or more halvings at consecutive optimizer steps skipped every step it ends on (`_ends_overflowing`).
    False alarms from words:
    0 of the 116 healthy labelled real runs of the shared sets and the development parts (docs/engine.md).
    Why: persistent fp16 overflow means skipped optimizer steps and, eventually, a useless scale.
    Evidence: max, final and min scale, number of decreases, onset (first decrease after the last increase, or
    after calibration), where calibration ended and on which axis, halvings beside a non-finite loss, and where
    the scale was read (`source`).
    False alarms: 0 of the 14 healthy runs it could check (benchmarks/calibrate.py); 0 of the 40 healthy real runs;
    with the floor rule, 0 of the 116 healthy labelled runs of the development sets (docs/engine.md); the ending rule:
    0 of the 305 healthy runs of every labelled set (12 of them log a scale; 32 runs of the 792 do). Pooled (849 real
    runs, 328 healthy): 0 of the 60 healthy runs it could check, 16 of 16 found, at every field's value.
    """

    kind: ClassVar[str] = "amp_overflow"
    stage: ClassVar[int] = UPSTREAM
    joins_chain: ClassVar[bool] = True  # one event with the NaN its step range holds
    requires: ClassVar[tuple[str, ...]] = ()  # a logged loss_scale series, or scaler state in checkpoints
    min_halvings: int = 8  # 65536 → 256: far past the few halvings of start-up calibration (pool: flat at 3-12)
    late_halvings: int = 4  # ... and still falling ×16 in the second half (pool: flat at 1-6)
    floor: float = 1.0  # a scaler's lowest scale where none is configured (DeepSpeed's `min_loss_scale` default)
    # (pool: the one value that keeps both: 2 fires on 2 healthy console logs, one Megatron; 0.5 loses 2 of 16 found)
    collapse: float = 1e-4  # fairseq's default minimum: a dynamic scaler works between 1/4 and 1 (fairseq, fp16 CTC)
    # and grows back; at 1e-4 or below it has collapsed whatever the loss does (0, a denormal)
    late_fall: float = 0.05  # a loss still falling by 5% while the scale falls is taking its steps (pool: 0.1 adds
    # false claims on 2 fairseq pretraining logs whose scale runs low while the loss falls 5-10%)
    max_skip_rate: float = 0.01  # a step in a hundred: 10-20× a healthy scaler's one overflow per growth interval
    # (pool: 0 false from 0.01 to 0.05; 1 at 0.005, 2 at 0.001, all on fairseq pretraining logs, no hit gained)
    min_skips: int = 3  # ... on at least three skipped steps: one or two halvings in a short excerpt are a healthy scaler's
    # (pool: 0 healthy at 1-3, the 12 healthy runs that log a scale cannot tell them apart; 5 loses 2 of 16 found)
    horizon: int = 200  # past step 200 no healthy scaler is still calibrating (2^32 to 1: 64 skipped steps at most)
    # (pool: flat at 50-1000, as are `fresh_scale` 16-65536, `min_fall` 0.05-0.5 and `moving_share` 0.2-0.9)
    fresh_scale: float = 2.0**7  # the smallest start value of a dynamic scaler (fairseq's 128; 2^16 torch, apex, DeepSpeed)
    min_nonfinite_skips: int = 2  # halvings beside a NaN/Inf loss: the scaler chases an overflow it cannot cure
    # (pool: 0 healthy at 1-5; 3 loses one found)
    min_fall: float = 0.25  # a loss that falls by a quarter under a constant scale is taking its steps
    moving_share: float = 0.5  # an LR that advances on half the records with a finite norm is stepped per step

    def unavailable(self, run: Run) -> str | None:
        if run.has("loss_scale") or run.has("skipped_steps") or _checkpoint_scales(run)[0].size \
                or run.announced(NONFINITE_GRAD).height or (run.has("grad_norm") and run.has("lr")):
            return None
        return (run.missing_message("loss_scale") + "; no skipped-step count is logged and no checkpoint holds "
                "GradScaler state either")

    def check(self, run: Run) -> Iterator[Finding]:
        found = list(self._from_scale(run)) or list(self._ends_overflowing(run))
        if not found and run.has("skipped_steps"):
            found = list(self._from_skip_counts(run))
        found = found or list(self._from_announced_skips(run))
        yield from found if found or run.has("loss_scale") else self._from_held_lr(run)

    def _ends_overflowing(self, run: Run) -> Iterator[Finding]:
        """Effect size first, at any length: the log ends on `min_skips` or more halvings at consecutive optimizer
        steps (the progress printed on or before each moving by one, or no training record between them), with no step
        after the last but the one under way: every step the log ends on overflowed, so none was taken. A scaler's
        start-up halvings are followed by training at the scale they reach; halvings steps apart are a working one."""
        name = run.pick("loss_scale")
        if name is None:
            return
        steps, s = _scale_points(run, name)
        ok = np.isfinite(s)
        steps, s = steps[ok], s[ok]
        at = _progress_at(run, name, steps)
        if at is None:
            return
        # halving records (a scale half the record's before it or less) back from the last, each at the step before
        # the next one's: an overflow-only log's every line is one, a per-step log's every fall
        halvings = 0
        while halvings < s.size - 1 and 0 < s[-halvings - 1] <= s[-halvings - 2] / 2 \
                and (halvings == 0 or at["next"](-halvings - 1, -halvings)):
            halvings += 1
        if halvings < self.min_skips or not at["ends"]:
            return
        first = s.size - halvings - 1
        ev = {"max_scale": float(s[first]), "final_scale": float(s[-1]), "min_scale": float(s.min()),
              "decreases": int(np.sum(np.diff(s) < 0)), "halvings_at_the_end": halvings,
              "onset_step": int(steps[first + 1]), "consecutive_by": at["how"], "source": "logged loss scale"}
        yield Finding.of(self, severity="warning", step=int(steps[first + 1]), step_end=int(steps[-1]), series=name,
                         evidence=ev, sources=(src(run, "loss_scale", steps[first:]),),
                         summary=(f"the log ends on {halvings} halvings of the loss scale at consecutive optimizer "
                                  f"steps, from {s[first]:g} to {s[-1]:g} at step {steps[-1]}: every step it ends on "
                                  f"overflowed in fp16 and was skipped, none taken"))

    def _loss_falls(self, run: Run, name: str | None, since: float, until: float) -> bool:
        """Whether a training loss falls by `late_fall` between steps `since` and `until` of the scale's axis: any
        series of the loss role logged on the scale's kind of axis (fairseq's per-epoch `train_loss` beside its
        per-epoch `train_loss_scale`, the per-update loss on another axis), or the run's loss beside checkpoints."""
        if name is None:
            return loss_falls(run, self.late_fall, until, since)
        ordinal = run.meta.filter(pl.col("name") == name)["ordinal"][0]
        beside = run.meta.filter((pl.col("role") == ROLES["loss"]) & (pl.col("ordinal") == ordinal))["name"]
        for loss in beside.to_list():
            pts = run.series_named(loss)
            s, y = pts["step"].to_numpy(), pts["value"].fill_null(np.nan).to_numpy()
            y = y[(s >= since) & (s <= until) & np.isfinite(y)]
            if y.size < 6:
                continue
            head, tail = stats.start_level(y, stats.START_POINTS), float(np.median(y[-3:]))
            if head > 0 and (head - tail) / head >= self.late_fall:
                return True
        return False

    def _from_held_lr(self, run: Run) -> Iterator[Finding]:
        """Without a scale: optimizer steps the scaler skipped, read from the LR and the grad norm logged on each
        record. A trainer that steps its scheduler only when the optimizer ran (HF Trainer, DeepSpeed) leaves the LR
        where it was on a skipped step: an LR that advances on most records whose norm is finite (`moving_share`) and
        stays put on most whose norm is NaN/Inf, on `min_skips` such records and `max_skip_rate` of the records after
        the first finite norm (start-up calibration), is fp16 skipping steps, whether or not fp16 is declared."""
        lr, norm = run.pick("lr"), run.pick("grad_norm")
        if lr is None or norm is None or len(set(run.meta.filter(pl.col("name").is_in([lr, norm]))["ordinal"])) != 1:
            return
        both = run.series("lr").select("step", pl.col("value").alias("lr")).join(
            run.series("grad_norm").select("step", pl.col("value").alias("norm")), on="step").sort("step")
        lv, gv = both["lr"].fill_null(np.nan).to_numpy(), both["norm"].fill_null(np.nan).to_numpy()
        bad = ~np.isfinite(gv)
        if not (~bad).any():
            return
        start = int(np.argmax(~bad))  # calibration ends at the first step with a finite norm
        held = np.r_[False, lv[1:] == lv[:-1]] & np.isfinite(lv)
        bad, held, steps = bad[start + 1:], held[start + 1:], both["step"].to_numpy()[start + 1:]
        if run.has("loss"):  # a step whose loss is non-finite too is the NaN's (nan_loss), not a skip that saved it
            keep = ~np.isin(steps, run.series("loss").filter(~pl.col("value").is_finite())["step"].to_numpy())
            bad, held, steps = bad[keep], held[keep], steps[keep]
        skipped = bad & held
        n_skip, n_bad, n_fine = int(skipped.sum()), int(bad.sum()), int((~bad).sum())
        if n_skip < self.min_skips or n_skip < self.max_skip_rate * bad.size or n_skip < self.moving_share * n_bad \
                or n_fine == 0 or float(np.mean(~held[~bad])) < self.moving_share:
            return
        onset = int(steps[int(np.argmax(skipped))])
        fp16 = run.config("fp16", "mixed_precision", "precision")
        ev = {"skipped_steps": n_skip, "records": int(bad.size), "skip_rate_after_calibration": n_skip / bad.size,
              "onset_step": onset, "lr_advances_on_finite_norm": float(np.mean(~held[~bad])),
              "lr_held_on_nonfinite_norm": n_skip / n_bad, "precision_declared": fp16,
              "source": "grad norm and LR per record"}
        yield Finding.of(self, severity="warning", step=onset, step_end=int(steps[-1]), series=norm, evidence=ev,
                         sources=(src(run, "grad_norm", steps[skipped]), src(run, "lr", steps[skipped])),
                         summary=(f"grad norm is non-finite on {count(n_bad, 'record')} from step {onset}, and the "
                                  f"LR stays where it was on {n_skip:,} of them ({n_skip / bad.size:.1%} of the records) "
                                  f"while it advances on {ev['lr_advances_on_finite_norm']:.0%} of those with a "
                                  f"finite norm: optimizer steps skipped for fp16 overflow, where a healthy scaler "
                                  f"skips about one per growth interval (2000 steps by default)"))

    def _from_announced_skips(self, run: Run) -> Iterator[Finding]:
        """Steps a console log says it skipped for non-finite gradients (`Found inf or nan in gradients, skipping
        step`: `Run.announced`), one per line, past `horizon` (start-up calibration is over there) as a skip rate over
        the steps its training records reach; on a logged step axis only (calibration cannot be placed otherwise)."""
        said = run.announced(NONFINITE_GRAD)
        if said.height == 0 or bool(said["ordinal"].any()):
            return
        steps = said["step"].to_numpy()
        late = said.filter(pl.col("step") > self.horizon)
        reached = max(int(steps.max()), int(said["top_step_before"].max() or 0), int(said["first_step_after"].max() or 0))
        span = float(max(reached - self.horizon, 1))
        if late.height < self.min_skips or late.height / span < self.max_skip_rate:
            return
        first = late.row(0, named=True)
        ev = {"skipped_steps": late.height, "steps_spanned": span, "skip_rate_after_calibration": late.height / span,
              "onset_step": int(first["step"]), "calibration_end": float(self.horizon), "announced": first["text"],
              "source": first["grp"], "loss_scale_logged": run.has("loss_scale")}
        if run.has("loss_scale"):
            scale = run.arrays("loss_scale")[1]
            scale = scale[np.isfinite(scale)]
            if scale.size:
                ev |= {"max_scale": float(scale.max()), "final_scale": float(scale[-1])}
        fell = (f"; the loss scale fell from {ev['max_scale']:g} to {ev['final_scale']:g}"
                if ev.get("max_scale", 0) > ev.get("final_scale", 0) else "")
        yield Finding.of(self, severity="warning", step=ev["onset_step"], step_end=reached, series=run.pick("loss"),
                         evidence=ev, sources=({"table": "texts", "source": first["grp"], "step_min": ev["onset_step"],
                                                "step_max": int(late["step"].max())},),
                         summary=(f"the log announces {count(late.height, 'skipped step')} for non-finite gradients "
                                  f"({quoted(first['text'])}, first {announced_at(first)}) since training passed step "
                                  f"{self.horizon}, past start-up calibration: {late.height / span:.1%} of the {span:g} "
                                  f"steps{fell}, where a healthy fp16 scaler skips about one per growth interval "
                                  f"(2000 steps by default)"))

    def _from_skip_counts(self, run: Run) -> Iterator[Finding]:
        """A logged count of skipped optimizer steps where the scale itself says nothing (Megatron prints
        `number of skipped iterations: N` per log interval beside a `loss scale` that grows back between): the
        steps it counts past `horizon` (start-up calibration is over there) as a skip rate."""
        name = run.pick("skipped_steps")
        if run.meta.filter(pl.col("name") == name)["ordinal"][0]:
            return  # no logged step: calibration cannot be placed
        steps, n = run.arrays("skipped_steps")
        ok = np.isfinite(n) & (n >= 0)
        steps, n = steps[ok], n[ok]
        cumulative = n.size > 1 and bool(np.all(np.diff(n) >= 0))  # a running total: its increments are the skips
        counts = np.diff(n, prepend=0.0) if cumulative else n
        late = np.flatnonzero(steps > self.horizon)
        if late.size == 0:
            return
        i0 = int(late[0])
        start = steps[i0 - 1] if i0 > 0 else steps[0] - (np.median(np.diff(steps)) if steps.size > 1 else 1)
        skipped, span = float(counts[i0:].sum()), float(max(steps[-1] - max(start, 0), 1))
        if skipped < self.min_skips or skipped / span < self.max_skip_rate:
            return
        onset = int(steps[i0 + int(np.flatnonzero(counts[i0:] > 0)[0])])
        ev = {"skipped_steps": skipped, "steps_spanned": span, "skip_rate_after_calibration": skipped / span,
              "onset_step": onset, "calibration_end": float(self.horizon),
              "counter": "running total" if cumulative else "per log interval", "source": "logged skipped-step count"}
        yield Finding.of(self, severity="warning", step=onset, step_end=int(steps[-1]), series=name, evidence=ev,
                         sources=(src(run, "skipped_steps", steps),), summary=(
                             f"{skipped:g} optimizer steps skipped ({name}) in the {span:g} steps since training "
                             f"passed step {self.horizon}, past start-up calibration: {skipped / span:.1%} of steps, "
                             f"where a healthy fp16 scaler skips about one per growth interval (2000 steps by "
                             f"default)"))

    def _from_scale(self, run: Run) -> Iterator[Finding]:
        logged = run.has("loss_scale")
        name = run.pick("loss_scale") if logged else None
        steps, s = _scale_points(run, name) if logged else _checkpoint_scales(run)
        ok = np.isfinite(s)
        steps, s = steps[ok], s[ok]
        opens = run.training_opens(name) if logged else None
        if opens is not None and s.size and np.all(steps < opens) and np.unique(s).size == 1:
            return  # one value printed only above the first training record is a setting (a configuration's
            # `"loss_scale": 0`, dynamic scaling), not a scaler's state; halvings there are overflows all the same
        if s.size == 0 or (s.size < 3 and not np.any(s < self.floor)) or (np.unique(steps).size == 1 and np.all(s)):
            # a scale below the floor is evidence at any count (`Fp16 Grad Scale: 0` on three lines), a collapsed 0
            # even on one line; a scale between 0 and 1 seen at one step only (a line, or two modules printing one
            # setting at start-up) is no scaler pinned anywhere (`scale=0.1` in a message about some other scaling)
            return
        top, final, low = float(s.max()), float(s[-1]), float(s.min())
        if top == low > 0 and (s.size < self.min_skips or loss_falls(run, self.min_fall, steps[-1], steps[0])):
            # a scale that never moves, between 0 and the floor, is a collapsed scaler only where it is logged
            # through training (not a setting printed once per launch: an augmentation's `scale=0.5`) and the loss
            # does not fall meanwhile (where every step overflows, no step is taken)
            return
        # the second half of the run by steps, not points: an overflow-only log (DeepSpeed prints a line per
        # skipped step) crowds its points where the scale falls
        late = steps >= steps[0] + (steps[-1] - steps[0]) / 2
        late_top = float(s[late].max())
        # halvings are a dynamic scaler's normal working: a long fall is overflow only where the loss stops with it
        falling = final <= top / 2 ** self.min_halvings and final <= late_top / 2 ** self.late_halvings \
            and not self._loss_falls(run, name, steps[late][0], steps[-1])
        # a scale that is no power of two is an average over steps (MAE's per-epoch mean): its wobble says nothing
        # of how many steps were skipped, only a collapse reads from it
        averaged = float(np.mean(_power_of_two(s[s > 0]))) < 0.5 if np.any(s > 0) else False
        d = np.diff(s)
        down = np.flatnonzero(d < 0) + 1
        ups = np.flatnonzero(d > 0) + 1
        progress = _progress(run, name, steps) if logged else None
        axis = steps.astype(float) if progress is None else progress
        # Start-up calibration (halvings from the scaler's start value before any step succeeds) ends at the first
        # growth, at the first step logged with a finite gradient norm, or once training is past its first
        # `horizon` steps; a log that starts past them at a fresh scaler's value is a resume recalibrating.
        ends = [(int(ups[0]), "the scale first grew")] if ups.size else []
        if progress is not None and not (axis[0] > self.horizon and s[0] >= self.fresh_scale):
            ends += [(int(i), f"training passed step {self.horizon}") for i in np.flatnonzero(axis > self.horizon)[:1]]
        if logged:
            ends += [(i, "a step logged a finite gradient norm") for i in _after_finite_step(run, name, steps)]
        cal_end, since = min(ends) if ends else (None, "")
        settled = down[down >= cal_end] if cal_end is not None else down[:0]  # halvings after calibration
        span = float(axis[-1] - axis[cal_end]) if cal_end is not None else 0.0
        skip_rate = settled.size / max(span, 1.0) if logged and settled.size else 0.0
        skipping = skip_rate >= self.max_skip_rate and settled.size >= self.min_skips and not averaged
        sick = _halvings_on_nonfinite_loss(run, name, steps, down) if logged else 0
        configured = run.config_number(*MIN_SCALE_KEYS)
        floor = self.floor if configured is None else configured
        pinned_at = _pinned_at(s, floor, self.min_skips)
        collapsed = low <= self.collapse or top == low < self.floor
        pinned = pinned_at is not None and not collapsed and not falling \
            and not self._loss_falls(run, name, steps[pinned_at], steps[-1])
        if not (falling or collapsed or pinned or skipping or sick >= self.min_nonfinite_skips):
            return
        if falling or collapsed or pinned:  # the fall that matters starts after the scale last grew
            after = down[down > ups[-1]] if ups.size else down
        else:
            after = settled if skipping else down
        onset = int(steps[after[0]]) if after.size else (int(steps[down[0]]) if down.size else int(steps[0]))
        ev = {"max_scale": top, "final_scale": final, "min_scale": low, "decreases": int(down.size),
              "decreases_since_onset": int(after.size), "onset_step": onset,
              "first_decrease_step": int(steps[down[0]]) if down.size else None,
              "skip_rate_after_calibration": skip_rate if logged else None,
              "calibration_end": float(axis[cal_end]) if cal_end is not None else None,
              "progress_read_from": ("logged step" if progress is None or not run.meta.filter(
                  pl.col("name") == name)["ordinal"][0] else "the counter printed on each line") if logged else None,
              "halvings_while_loss_nonfinite": sick if logged else None,
              "source": "logged loss scale" if logged else "GradScaler state in checkpoints"}
        where = (src(run, "loss_scale", steps) if logged else
                 {"table": "checkpoint_values", "key": SCALE_KEY, "step_min": int(steps[0]), "step_max": int(steps[-1])})
        if pinned:
            at = int(pinned_at)
            ev["pinned_since_step"], ev["floor"] = int(steps[at]), floor
            summary = (f"loss scale falls from {top:g} to {low:g} ({count(int(down.size), 'decrease')}, "
                       f"{top / low:g}× down) and sits at or below {floor:g}, the scaler's floor, without growing "
                       f"back from step {steps[at]} to the last record (step {steps[-1]}, "
                       f"{count(s.size - at, 'record')}): fp16 overflowed at every scale it tried, so steps keep "
                       f"being skipped")
        elif top == low:  # pinned below the floor from the first point
            summary = (f"loss scale is {top:g} at all {s.size} logged points (below {self.floor:g}): the fp16 "
                       f"scaler has collapsed and every step overflows")
        elif not falling and not collapsed and not skipping:  # every halving comes with a non-finite loss
            ev["follows"] = "nan_loss"  # the overflow is the NaN loss's consequence: the headline leads with the NaN
            summary = (f"loss scale halves {count(sick, 'time')} (from {top:g} to {final:g}) while the training "
                       f"loss is non-finite: no loss scale makes those gradients finite, so every step is skipped "
                       f"and the scale falls toward its floor")
        elif not falling and not collapsed:  # it keeps overflowing at a steady level
            summary = (f"loss scale halves {count(settled.size, 'time')} in the {span:g} steps since {since}, past "
                       f"start-up calibration (between {low:g} and {top:g}, ending at {final:g}): at least "
                       f"{skip_rate:.1%} of optimizer "
                       f"steps skipped, where a healthy scaler skips about one per growth interval (2000 steps by "
                       f"default)")
        else:
            summary = (f"loss scale falls from {top:g} to {final:g} (min {low:g}, {down.size} decreases) "
                       f"from step {onset}; " + (f"{skip_rate:.0%} of steps after calibration overflowed: "
                                                 if logged else
                                                 f"read from GradScaler state in {count(s.size, 'checkpoint')}: ")
                       + "fp16 overflows keep skipping steps")
        yield Finding.of(self, severity="warning", step=onset, step_end=int(steps[-1]),
                         series=name if logged else SCALE_KEY, evidence=ev, sources=(where,),
                         summary=summary)


# Config keys of a dynamic scaler's lowest scale (DeepSpeed's `fp16.min_loss_scale`, fairseq's and Megatron's
# `--min-loss-scale`): a scale pinned there can fall no further, however often fp16 overflows.
MIN_SCALE_KEYS = ("min_loss_scale", "min_scale")


def _pinned_at(s: np.ndarray, floor: float, min_records: int) -> int | None:
    """The index from which the scale sits at or below `floor` (the scaler's configured minimum, else 1) to the end
    of the log, on `min_records` records or more, never growing there and ending at its lowest value, having fallen
    there from a higher value (a scale at 1 from its first record is a bf16 run's constant); else None. A scaler that
    grows back, or ends above a minimum it reached before, is working, however low it runs."""
    low = float(s.min())
    if low > floor or s[-1] != low or s.size < min_records + 1:
        return None
    at = s.size - 1
    while at > 0 and s[at - 1] <= floor and s[at - 1] >= s[at]:
        at -= 1
    if s.size - at < min_records or not np.any(s[:at + 1] > low):
        return None
    return at


def _power_of_two(s: np.ndarray) -> np.ndarray:
    """Which values are powers of two, as a dynamic scaler's scale always is (a printed value rounded to a few
    digits still is: 0.000122070 for 2^-13)."""
    e = np.log2(s)
    return np.abs(e - np.round(e)) < 1e-4


SCALE_KEY = "scaler.scale"  # GradScaler.state_dict()["scale"] as ingest/checkpoints.py stores it


def _scale_points(run: Run, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, scale) of the logged loss scale, every record in write order: an overflow-only log (apex prints
    `Gradient overflow. Skipping step` for each skipped step) has several halvings under one logged step, and
    each is a skipped step. A series whose steps go back (a resume) is read one point per step instead."""
    pts = run.points(name)
    steps = pts["step"].to_numpy()
    if steps.size > 1 and bool(np.any(np.diff(steps) < 0)):
        pts = run.series_named(name)
        steps = pts["step"].to_numpy()
    return steps, pts["value"].fill_null(np.nan).to_numpy().astype(float)


def _progress(run: Run, name: str, steps: np.ndarray) -> np.ndarray | None:
    """Each point's place in training: its logged step, or on an ordinal axis (a console line with no global
    step, DECISIONS §2) the progress bar's count printed on its line (tqdm's `n` of `n/total`: optimizer steps
    done) when every point has one and no epoch restarts it. None when unknown."""
    row = run.meta.filter(pl.col("name") == name)
    if not row["ordinal"][0]:
        return steps.astype(float)
    printed = run.counters(name, steps.tolist())
    got = [printed.get(int(x), (None, None)) for x in steps]
    if all(epoch is None and batch is not None for epoch, batch in got):
        return np.array([batch for _, batch in got], dtype=float)
    return None


def _progress_at(run: Run, name: str, steps: np.ndarray) -> dict | None:
    """How to tell whether two records of the loss scale `name` are consecutive optimizer steps, and whether the log
    ends with them: {"next": (i, j) -> bool, "ends": bool, "how"}. On logged steps, the steps themselves; on a console
    log's line axis, the progress counter printed on the record's line or, where it prints none (DeepSpeed's and
    fairseq's overflow lines), on the last training record before it; two records with no training record between
    them follow each other. None where the training loss lies on another kind of axis."""
    loss = run.pick("loss")
    ordinal = bool(run.meta.filter(pl.col("name") == name)["ordinal"][0])
    if not ordinal:
        last = run.last_step()
        return {"next": lambda i, j: steps[j] - steps[i] == 1, "ends": last is None or last - steps[-1] <= 1,
                "how": "the logged steps"}
    if loss is not None and not bool(run.meta.filter(pl.col("name") == loss)["ordinal"][0]):
        return None
    lsteps = run.series_named(loss)["step"].to_numpy() if loss is not None else np.array([], dtype=np.int64)
    own = run.counters(name, steps.tolist())
    printed = run.counters(loss, lsteps.tolist()) if loss is not None else {}

    def progress(k: int) -> int | None:
        batch = own.get(int(steps[k]), (None, None))[1]
        if batch is not None:
            return batch
        before = lsteps[lsteps < steps[k]]
        return printed.get(int(before[-1]), (None, None))[1] if before.size else None

    def follows(i: int, j: int) -> bool:
        between = (lsteps > steps[i]) & (lsteps < steps[j])
        if not between.any():
            return True
        a, b = progress(i), progress(j)
        return a is not None and b is not None and b - a == 1

    after = lsteps[lsteps > steps[-1]]
    last = progress(-1)
    ends = after.size == 0 or (last is not None and all(
        (c := printed.get(int(x), (None, None))[1]) is not None and c - last <= 1 for x in after))
    return {"next": follows, "ends": ends, "how": "the progress counter printed on or before each line, or no training "
                                                    "record between them"}


def _after_finite_step(run: Run, name: str, steps: np.ndarray) -> list[int]:
    """[the first index of the scale logged at or after a step whose gradient norm is finite], or []: a finite norm
    is a step that did not overflow, so the scale had settled (read on the scale's own kind of axis)."""
    norm = run.pick("grad_norm")
    if norm is None or len(set(run.meta.filter(pl.col("name").is_in([name, norm]))["ordinal"].to_list())) != 1:
        return []
    g = run.points(norm).filter(pl.col("value").is_finite() & (pl.col("step") >= int(steps[0])))["step"]
    return [int(np.searchsorted(steps, g.min(), side="left"))] if g.len() and g.min() <= steps[-1] else []


def _halvings_on_nonfinite_loss(run: Run, name: str, steps: np.ndarray, down: np.ndarray) -> int:
    """How many halvings fall in a stretch where every training-loss point is NaN/Inf (at least one point there),
    the loss read on the scale's own kind of axis (two ordinal axes of one console log, or two logged ones)."""
    loss = run.pick("loss")
    if loss is None or down.size == 0:
        return 0
    ordinal = run.meta.filter(pl.col("name").is_in([name, loss]))["ordinal"].to_list()
    if len(set(ordinal)) != 1:
        return 0
    pts = run.points(loss)
    lo, hi = steps[down[0]], steps[down[-1]]
    inside = pts.filter((pl.col("step") >= lo) & (pl.col("step") <= hi))["value"].fill_null(np.nan).to_numpy()
    return int(down.size) if inside.size and not np.isfinite(inside).any() else 0


def _checkpoint_scales(run: Run) -> tuple[np.ndarray, np.ndarray]:
    """(steps, scale) of the GradScaler state saved in the run's checkpoints, by step."""
    values = run.table("checkpoint_values")
    if values.is_empty():
        return np.array([], dtype=np.int64), np.array([])
    rows = values.filter((values["key"] == SCALE_KEY) & values["step"].is_not_null()).sort("step")
    return rows["step"].to_numpy(), rows["value"].to_numpy().astype(float)
