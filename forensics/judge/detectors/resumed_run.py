"""resumed_run: steps go backwards or repeat: the run was restarted from a checkpoint."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import polars as pl

from forensics.judge import stats
from forensics.judge.detectors.base import UPSTREAM, by_launch, src
from forensics.judge.detectors.lr_schedule_anomaly import LrScheduleAnomaly
from forensics.judge.findings import Finding
from forensics.judge.numbers import count
from forensics.judge.detectors.base import quoted
from forensics.judge.run import TEXT_FORMATS, Run, from_the_start
from ingest.announcements import RESUME, TRAIN_END

# The steps a W&B run refused to store, as `ingest.wandb_files.read_wandb_debug_log` names them.
DROPPED_TAG = "wandb/dropped_history_step"


@dataclass(frozen=True)
class ResumedRun:
    """The run was restarted from a checkpoint.

    Detects: in the loss's points in write order (by wall time where stamped, so several event files of one run
    count; each file in its own order where they were written side by side, `_side_by_side`: a writer per rank), a
    step lower than or equal to the one before (console series: strictly lower; none on an ordinal axis);
    not plain duplicates, not a per-epoch counter (`min_resets` identical resets), not rows repeating the last step,
    not a step back to the start (at or below every step logged before it: a new launch appended to one log, or a
    counter that restarts at every epoch or phase; a resume goes back to a checkpoint's step, one it had passed; read
    before exact copies go, so a launch whose first record copies an earlier launch's, a seeded relaunch, starts
    from the beginning too: this only removes claims).
    Second, `min_refused` or more distinct steps a W&B run refused below one reached step (its debug log).
    Third, a logged epoch that falls back while the steps keep rising (`Run.epoch_resets`); on a line axis (no
    logged step goes on) not one back to the first epochs (`_from_the_start`: a fresh launch appended), and where the
    file has no epoch column, the epoch the loss's own lines print going back the same way (`_printed_epoch_back`).
    None where a launch appended to the log begins (`Run.launch_starts`): a fresh launch starts from the beginning.
    Fourth, an LR that jumps back up mid-decay to an earlier value (lr_schedule_anomaly's rule (c)).
    Fifth, a console line that announces the resume in words (`Resume training from <checkpoint> @ 9`, `Resuming from
    checkpoint ...`, HF's `Continuing training from checkpoint`, Lightning's `Restored all states from the checkpoint`:
    `ingest.announcements`), with training records after it, where the step or epoch it resumes from is not 0 (a
    fresh launch) and the records do not start again from the file's first counter without one; a weak phrase
    (`=> loaded checkpoint ... (epoch 9)`, which an evaluation or a program's next stage prints too) only where the
    counter of the training records goes back across it, or where the log opens with it and its records start at the
    counter it names (or, where it names none, `loading from : .../checkpoint_latest.pth`, at epoch `late_epoch` or
    later). Not where a restart found above is the same one. False alarms from words: 0 of the 116 healthy labelled real runs of the shared sets and the development parts (docs/engine.md).
    Sixth, training records after a line that says the training is over (`Training complete in 946m 39s`), their
    counter going on rather than starting again from the file's first (a fresh launch); none where more than `max_ends`
    such lines have training after them (an epoch's message).
    Seventh, a structured log's LR, positive for `min_lr_points` records, exactly 0 again and then rising while the
    steps go on: a schedule built anew from its warmup (HF Trainer resumed from a checkpoint saved without its
    scheduler); none under a scheduler named cyclic.
    Eighth, a new file of the loss (a new TensorBoard writer) whose first step goes on from the file before it after a
    wall-clock pause, or with a decaying LR jumping back up across it (its scheduler built anew: `_new_writer_goes_on`).
    Ninth, a launch whose counter starts again (`Run.launch_starts`, or a logged counter back to its start that opens
    no launch, `_passes_carried_on`) but whose loss opens where the launch before it ended, a rising one as much as a
    falling one, and not far under it (`max_drop`: a new phase's loss): the weights were loaded
    (`_restored_launches`); every loss series of the file judges it at one
    start, and a lone record whose successor prints the count before it again begins none.
    Tenth, an elapsed-time column of the loss's file that starts again while the training's counter goes on
    (`_clock_restarted`): a new process carried on from a checkpoint.
    At most `max_reported` restarts are reported.
    Why: later findings may refer to either segment; a resume that did not restore optimizer or scheduler
    state changes the curve.
    Evidence: restart step, the step it went back from, overlap in steps, wall-clock gap where known; for
    an epoch reset, the epoch before and after.
    False alarms: 0 of the 171 healthy runs it could check (at most 1.8% at 95% confidence; benchmarks/calibrate.py);
    0 of the 316 healthy runs it could check of the 849 pooled real runs, each field swept alone. The clock (tenth),
    the counter carried on (ninth's `_passes_carried_on`) and the two session-13 phrases: 0 new claims on the 214
    healthy runs of set8-set11 and the shared sets (docs/engine.md). `max_drop`/`drop_sigmas` only remove claims:
    1 false one of set17 gone, no hit lost on the three shared sets and set14/16/17. Short launches read at half their
    records (`short_records`): 0 new claims on the 40 healthy shared runs and the 168 healthy runs of set12-15.
    The nested loop (`_nested_loop`) only removes claims: one false one on a PPO log of set18, no hit lost.
    The LR built anew across a new writer, the line axis asked of the file read, short sessions at their records:
    0 new claims on the 40 healthy shared runs; 1 on the 144 healthy runs of set12-13, set16-19 and set21 (first
    labels), on a log of appended launches whose label allows it; a step written again at three steps or more took
    back the 3 false ones the line axis first made.
    """

    kind: ClassVar[str] = "resumed_run"
    stage: ClassVar[int] = UPSTREAM
    requires: ClassVar[tuple[str, ...]] = ("loss",)
    min_resets: int = 3  # this many identical resets are a per-epoch counter, not restarts (pool: flat at 2-8)
    max_reported: int = 20  # a handful of restarts at most; guard against a garbled order
    min_lr_points: int = 3  # positive LR records before an LR of 0 that starts a schedule again (pool: flat at 1-10)
    max_ends: int = 5  # more `training complete` lines than this with training after them: an epoch's message
    # (pool: flat at 2-20, 1 loses a hit)
    min_refused: int = 5  # distinct W&B steps refused below one reached step (one now and then is a logging slip)
    # (pool: flat at 1-10)
    launch_records: int = 5  # a launch's opening and closing level: the median of this many records (more on long ones)
    # (pool: 3, 8 and 10 each fire on a healthy LoRA log of appended launches; 5 on none)
    loop_passes: int = 5  # counter passes of one length (within `loop_spread`), this many or more, are a loop nested
    loop_spread: float = 0.1  # in one training (`_nested_loop`), not resumes
    short_records: int = 1  # ... a launch shorter than twice that is read at half its records, this many at least
    # (a session of a few epochs: Keras' CSVLogger appending a few a session, staged `fit` calls of 3-5 epochs; its
    # closing level is then read at as many records, not `launch_records` that reach back to its opening; 3 lost a
    # hit of set21, 1 adds no claim on the healthy runs of the shared sets and set12-19)
    min_fall: float = 0.2  # a launch before whose loss fell by this share of its opening level (pool: 0 healthy at
    # 0.05-0.5; 0.3 loses a hit) ...
    max_regain: float = 0.34  # ... and a next launch opening within this share of that fall above where it ended
    # (pool: 0 healthy at 0.1-0.34, 1 at 0.5)
    max_drop: float = 0.34  # ... and not below it by more than this share of that fall and `drop_sigmas` of its
    # point noise: a loss that opens far under where it ended is another phase's (a GAN's discriminator pretrained
    # after its generator), not the curve carried on; a noisy critic loss that opens 6 sigmas on is carried on
    drop_sigmas: float = 20.0
    late_epoch: int = 2  # a log opening on a checkpoint's load whose records start at this epoch or later: resumed
    min_before: int = 3  # a file before a new writer's that logged at least this many intervals
    step_slack: float = 1.5  # a new writer's first step within this many logging intervals of the last file's ...
    pause_intervals: float = 2.0  # ... after a pause longer than this many logging intervals take (pool: `min_before`
    # 1-10, `step_slack` 1-5 and this 1-30 flat)
    clock_fall: float = 0.5  # an elapsed-time column restarting falls to at most half the value before it (a
    # restart falls to about one interval; the pool's restarts fall to 2-37%; a step time's wobble, 99.8 after 100.3,
    # is no restart) ...
    lr_schedule_anomaly: LrScheduleAnomaly = LrScheduleAnomaly()  # its LR restarts, as this analysis sets them

    def check(self, run: Run) -> Iterator[Finding]:
        found = list(self._from_counters(run))
        found += self._new_writer_goes_on(run, found)
        yield from found
        words = list(self._announced(run, found))
        yield from words
        if not found:
            printed = list(self._printed_epoch_back(run, {f.evidence.get("restart_step") for f in words}))
            yield from printed
            found += printed
        ended = list(self._trained_on(run, found + words))
        yield from ended
        restored = list(self._restored_launches(run, found + words + ended))
        yield from restored
        yield from self._clock_restarted(run, found + words + ended + restored)

    def _from_counters(self, run: Run) -> Iterator[Finding]:
        name = run.pick("loss")
        if run.on_line_axis(name):
            # line order is the only order: an epoch going back still shows, in an epoch column or on the loss's lines
            yield from self._epoch_resets(run)  # and the epoch its lines print (`_printed_epoch_back`, after the words)
            return
        console = run.format_of(name) in TEXT_FORMATS
        raw = run.write_order(name, strict=console)  # a series too long to hold whole: the points around its breaks
        if _in_order(raw):  # the usual case: no step goes back in write order, so there is nothing to resolve
            back = np.array([], dtype=np.int64)
        else:
            pts = raw.with_row_index("i")
            if pts["wall_time"].null_count() == 0 and not _side_by_side(run, name):
                pts = pts.sort(["wall_time", "i"])
            every = pts["step"].to_numpy()
            if self._per_epoch_counter(every, np.flatnonzero(np.diff(every) < 0) + 1):
                return  # before copies go: a loss settled to its last digits repeats (step, value) epoch after epoch
            # A counter back to the start, where the first record of the new pass copies an earlier one exactly (a
            # seeded relaunch prints the same first loss), still starts from the beginning: read it before copies go.
            start = int(run.series_named(name)["step"].min()) if run.reduced(name) else None
            raw_back = np.flatnonzero(np.diff(every) < 0 if console else np.diff(every) <= 0) + 1
            fresh_at = raw_back[from_the_start(every, raw_back, start)]
            pts = pts.with_row_index("pos").unique(["step", "value"], keep="first", maintain_order=True)  # exact
            # copies are not a resume
            steps = pts["step"].to_numpy()
            wall = pts["wall_time"].fill_null(np.nan).to_numpy()
            back = np.flatnonzero(np.diff(steps) < 0 if console else np.diff(steps) <= 0) + 1
            # Rows repeated at the step the log ends on (Lightning's test rows, a final evaluation logging the same
            # name) go back nowhere: the log never moves past that step again, so nothing was resumed.
            last = np.maximum.accumulate(steps[::-1])[::-1]  # the highest step from each point on
            back = back[(steps[back] < steps[back - 1]) | (last[back] > steps[back])]
            # A step written again with a new value at `min_resets` or more steps is a writer that logs several
            # values a step (Ultralytics' per-batch losses at their epoch's step), not a resume at each
            again = back[steps[back] == steps[back - 1]]
            if np.unique(steps[again]).size >= self.min_resets:
                back = back[steps[back] < steps[back - 1]]
            # A counter that goes back to (or below) the lowest step logged before it starts from the beginning:
            # a new launch appended to the same log, or a counter that restarts every epoch or phase. A run resumed
            # from a checkpoint goes back to a step it had passed, the checkpoint's.
            # (its write order read around its breaks only, a reduced series starts at its lowest step)
            pos = pts["pos"].to_numpy()
            copied_fresh = np.array([bool(np.any((fresh_at > pos[k - 1]) & (fresh_at <= pos[k]))) for k in back],
                                    dtype=bool)
            back = back[~(from_the_start(steps, back, start) | copied_fresh)]
        if back.size and self._per_epoch_counter(steps, back):
            return
        if back.size == 0:
            found = [*self._refused_by_wandb(run, name), *self._epoch_resets(run)]
            yield from found
            restarts = list(self._scheduler_restarts(run))
            yield from restarts
            if not restarts:
                yield from self._lr_from_zero(run, [f.evidence["restart_step"] for f in found])
            return
        for k in back[: self.max_reported]:
            gap = float(wall[k] - wall[k - 1]) if np.isfinite(wall[k]) and np.isfinite(wall[k - 1]) else None
            ev = {"restart_step": int(steps[k]), "previous_step": int(steps[k - 1]),
                  "overlap_steps": int(steps[k - 1] - steps[k]), "wall_gap_s": gap}
            yield Finding.of(self, severity="info", step=int(steps[k]), step_end=int(steps[k - 1]), series=name,
                             evidence=ev, sources=(src(run, "loss", steps[[k - 1, k]]),),
                             summary=(f"steps go back from {steps[k - 1]} to {steps[k]}: the run was resumed"
                                      + (f" after {gap:.0f} s" if gap is not None else "")))

    def _passes_carried_on(self, run: Run, name: str | None) -> list[int]:
        """The steps where the loss's logged counter starts again (`Run.pass_starts`, back to or below every step
        before it: `_from_counters` reads no resume there) that open no launch (`Run.launch_starts`: not back at the
        untrained level), for `_restored_launches` to judge: a `learn()` called again on the loaded model resets its
        step count. None where the passes are a per-epoch counter's: `min_resets` or more, or two or more that end
        at one step (each epoch climbs to its length)."""
        if name is None:
            return []
        passes = sorted(run.pass_starts(name))[1:]
        if not passes or len(passes) >= 2 * self.min_resets:
            return []
        raw = run.points(name)["step"].to_numpy()  # the written steps, in write order
        ends = raw[np.flatnonzero(np.diff(raw) <= 0)]
        if ends.size >= 2 and np.unique(ends).size == 1:
            return []
        return [p for p in passes if p not in set(run.launch_starts(name))]

    def _clock_restarted(self, run: Run, found: list[Finding]) -> Iterator[Finding]:
        """Tenth: an elapsed-time column of the loss's file (seconds since the process began: Ultralytics' `time`)
        that starts again (`throughput_drop._clock_restarts`, one home: a clock falling at a few points and growing
        between them; to at most `clock_fall` of its value, with `min_before` records from the fall on) while the
        training's counter goes on across the fall (its step, or the file's epoch on a line axis, higher than the
        record's before it): a new process carried on at the epoch the last one reached, from
        its checkpoint. A counter starting again there is a new launch's (the counters' rules judge it)."""
        from forensics.judge.detectors.throughput_drop import _clock_restarts

        name = run.pick("loss")
        if name is None:
            return
        grp = run.meta.filter(pl.col("name") == name)["grp"][0]
        clocks = [c for c in run.all_of("step_time") if run.meta.filter(pl.col("name") == c)["grp"][0] == grp]
        known = {f.evidence.get("restart_step") for f in found}
        epoch = run.pick("epoch")
        if epoch is not None and run.meta.filter(pl.col("name") == epoch)["grp"][0] != grp:
            epoch = None
        ordinal = bool(run.meta.filter(pl.col("name") == name)["ordinal"].fill_null(False)[0])
        if ordinal and epoch is None:
            return  # a line axis with no counter beside it: nothing says the training went on
        starts = set(run.pass_starts(name)) | set(run.launch_starts(name))
        for clock in clocks[:1]:
            starts |= set(run.pass_starts(clock)) | set(run.launch_starts(clock))  # its own axis's, where it has one
            f = run.series_named(clock).filter(pl.col("value").is_finite())
            steps, values = f["step"].to_numpy(), f["value"].to_numpy()
            for k in _clock_restarts(values)[: self.max_reported]:
                step, before = int(steps[k]), int(steps[k - 1])
                epochs = self._epochs_across(run, epoch, before, step) if epoch is not None else None
                if step in starts or step in known or (ordinal and epochs is None) \
                        or values[k] > self.clock_fall * values[k - 1] or k + self.min_before > values.size:
                    continue  # a clock starts again near 0 and runs on; a step time a hair under the one before does not
                ev = {"restart_step": step, "previous_step": before, "overlap_steps": 0, "wall_gap_s": None,
                      "clock": clock, "clock_before": float(values[k - 1]), "clock_after": float(values[k])}
                if epochs is not None:
                    ev |= {"epoch_before": epochs[0], "epoch_after": epochs[1]}
                # a line axis: the epoch it prints; else the file's steps
                at = (lambda s, e: f"epoch {e:g}") if ordinal else (lambda s, e: run.printed_span(clock, s))
                yield Finding.of(self, severity="info", step=step, step_end=before, series=clock, evidence=ev,
                                 sources=(src(run, clock, steps[[k - 1, k]]),),
                                 summary=(f"the elapsed time {clock} starts again, {values[k - 1]:.4g} at "
                                          f"{at(before, epochs and epochs[0])} then {values[k]:.4g} at "
                                          f"{at(step, epochs and epochs[1])}, while the training's counter goes on: "
                                          f"a new process resumed the run from a checkpoint"))

    @staticmethod
    def _epochs_across(run: Run, epoch: str, before: int, step: int) -> tuple[float, float] | None:
        """The file's epoch at `before` and at `step` where it goes on (higher at `step`), else None."""
        pts = run.points(epoch).filter(pl.col("value").is_finite())
        s, e = pts["step"].to_numpy(), pts["value"].to_numpy()
        a, b = np.flatnonzero(s <= before), np.flatnonzero(s <= step)
        if a.size and b.size and b[-1] != a[-1] and e[b[-1]] > e[a[-1]]:
            return float(e[a[-1]]), float(e[b[-1]])
        return None

    def _per_epoch_counter(self, steps: np.ndarray, back: np.ndarray) -> bool:
        """A per-epoch counter: `min_resets` or more steps back (`back`), every one landing on one step after as many
        points."""
        if back.size < self.min_resets or np.unique(steps[back]).size != 1:
            return False
        climbs = np.diff(np.concatenate(([0], back)))
        return bool(climbs.max() <= 1.1 * climbs.min())

    def _new_writer_goes_on(self, run: Run, found: list[Finding]) -> list[Finding]:
        """A new file of the loss (a new TensorBoard writer: a new process) whose first step goes on from the last
        step of the file before it (one that logged `min_before` intervals), within `step_slack` logging intervals,
        after a wall-clock pause of more than `pause_intervals` times the time a logging interval takes: the process
        died and its successor resumed at the checkpoint the last one saved. Nothing steps back, so the counters
        cannot show it."""
        name = run.pick("loss")
        if name is None or run.format_of(name) in TEXT_FORMATS:
            return []
        edges = run.source_edges(name)
        if edges.height < 2:
            return []
        pts = run.points(name).filter(pl.col("wall_time").is_not_null())
        ds, dw = np.diff(pts["step"].to_numpy()), np.diff(pts["wall_time"].to_numpy())
        ok = (ds > 0) & (dw >= 0)
        if ok.sum() < self.min_before:
            return []
        every, per_interval = float(np.median(ds[ok])), float(np.median(dw[ok]))
        known = {f.evidence.get("restart_step") for f in found}
        out = []
        rows = edges.rows(named=True)
        for before, after in zip(rows, rows[1:]):
            if None in (before["last_wall"], after["first_wall"]) or after["first_step"] in known:
                continue
            if before["last_step"] - before["first_step"] < self.min_before * every:
                continue  # a process that died at its first records: the next one starts the run again
            step_on = after["first_step"] - before["last_step"]
            pause = float(after["first_wall"] - before["last_wall"])
            lr_up = self._lr_up_across(run, int(before["last_step"]), int(after["first_step"]))
            if not (0 < step_on <= self.step_slack * every and (lr_up is not None or (
                    pause > self.pause_intervals * max(per_interval, 0.0) and pause > 0))):
                continue
            ev = {"restart_step": int(after["first_step"]), "previous_step": int(before["last_step"]),
                  "overlap_steps": 0, "wall_gap_s": pause, "logging_interval_s": per_interval, "lr_across": lr_up}
            why = (f"after a pause of {pause:.0f} s (a logging interval takes {per_interval:.3g} s)" if lr_up is None
                   else f"its LR {lr_up[1]:.4g} ×{lr_up[1] / lr_up[0]:.3g} the last file's {lr_up[0]:.4g} (the "
                        f"schedule built anew, its state not restored)")
            out.append(Finding.of(self, severity="info", step=int(after["first_step"]),
                                  step_end=int(before["last_step"]), series=name, evidence=ev,
                                  sources=(src(run, "loss", np.asarray([before["last_step"], after["first_step"]])),),
                                  summary=(f"a new log file begins at step {after['first_step']}, going on from step "
                                           f"{before['last_step']} where the one before it ends, {why}: the run "
                                           f"was resumed from a checkpoint by a new process")))
            if len(out) >= self.max_reported:
                break
        return out

    def _lr_up_across(self, run: Run, before: int, after: int) -> tuple[float, float] | None:
        """(LR at `before`, LR at `after`) where the LR of the loss's format, decaying (`lr_schedule_anomaly.min_decay`
        below its peak so far: no warmup's rise), jumps up ×`lr_schedule_anomaly.up` or more from the last record at
        or before `before` to the first at or after `after`; else None."""
        name = run.pick("lr")
        if name is None or run.format_of(name) != run.format_of(run.pick("loss")):
            return None
        f = run.series_named(name).filter(pl.col("value").is_finite())
        s, v = f["step"].to_numpy(), f["value"].to_numpy()
        a, b = np.flatnonzero(s <= before), np.flatnonzero(s >= after)
        if not a.size or not b.size or v[a[-1]] <= 0 or v[b[0]] < self.lr_schedule_anomaly.up * v[a[-1]] \
                or v[a[-1]] > (1 - self.lr_schedule_anomaly.min_decay) * float(np.max(v[a])):
            return None
        return float(v[a[-1]]), float(v[b[0]])

    def _announced(self, run: Run, found: list[Finding]) -> Iterator[Finding]:
        """Resumes a console log announces in words (`Run.announced`): one per run of announcing lines with no
        training record between them, judged against the training-loss records of its file around it (the step
        where a printed counter is the axis, else the epoch printed on the lines)."""
        said = run.announced(RESUME)
        if said.height == 0:
            return
        name = run.pick("loss")
        same_axis = name is not None and run.meta.filter(pl.col("name") == name)["grp"][0]
        known = [(f.evidence.get("restart_step"), f.evidence.get("previous_step")) for f in found]
        reported = 0
        for _, rows in said.group_by(["grp", "before"], maintain_order=True):
            if reported >= self.max_reported:
                return
            r = rows.row(0, named=True)
            what = rows["said"].to_list()
            counters = [(w.counter, w.at) for w in what if w.at is not None]
            if r["after"] == 0 or counters and not any(at for _, at in counters):
                continue  # nothing logged after it, or a start from step or epoch 0: a fresh launch
            # the line nearest the records says where they go on from; a step before an epoch where both are named
            unit, at = next((c for c in counters[::-1] if c[0] == "step" and c[1]),
                            next((c for c in counters[::-1] if c[1]), (None, None)))
            by_step = not r["ordinal"]
            prefix = "step" if by_step else "epoch"
            top, first_after, first = (r[f"top_{prefix}_before"], r[f"first_{prefix}_after"], r[f"first_{prefix}"])
            before = r["before"] > 0
            again = before and top is not None and first_after is not None and first_after <= top
            if before and at is None and first is not None and first_after is not None and first_after <= first:
                continue  # the counter starts again from the file's first value, no counter announced: a relaunch
            # a weak phrase: where the counter goes back across it, or where the log opens with it and its records
            # start at the counter it names (`=> loaded checkpoint (epoch 352)`, then `Epoch: [352/520]`); not where the
            # counter goes on across it (a program's next stage loads its own checkpoint), nor before anything else
            opens_at = not before and at is not None and unit == prefix and first_after in (at, at + 1)
            # one naming no counter (`loading from : .../checkpoint_latest.pth`): where the log opens with it and its
            # records start past the first epochs (`Epoch 170`): a fresh training, or a fine-tuning, starts at 0 or 1
            late = None if before or at is not None else (
                first_after if first_after is not None and prefix == "epoch" else _epoch_at(run, r["grp"], r["first_step_after"]))
            opens_late = late is not None and late >= self.late_epoch
            if not any(w.strong for w in what) and not (again or opens_at or opens_late):
                continue
            if r["grp"] == same_axis and any(
                    a is not None and min(r["step"], r["first_step_after"]) <= a <= max(r["step"], r["first_step_after"])
                    for pair in known for a in pair):
                continue  # the restart the counters show already
            reported += 1
            ev = {"restart_step": int(r["first_step_after"]), "previous_step": int(r["step"]),
                  "overlap_steps": int(top - first_after) if again and by_step else None,
                  "announced": r["text"], "resumed_from": at, "resumed_from_unit": unit if at is not None else None,
                  "counter_before": top if before else None, "counter_after": first_after, "counter": prefix,
                  "printed_again": bool(again), "source": r["grp"], "wall_gap_s": None,
                  "opens_at_epoch": late if opens_late else None}
            where = (f"after {prefix} {top} was logged" if before and top is not None else
                     f"after {count(r['before'], 'training record')}" if before else "before its first training record")
            then = (f"{prefix} {first_after} is logged again after it" if again else
                    f"the records go on from {prefix} {first_after}") if first_after is not None else (
                    f"the records open at epoch {late}" if opens_late else "the records go on")
            yield Finding.of(self, severity="info", step=int(r["step"]), series=name, evidence=ev,
                             sources=({"table": "texts", "source": r["grp"], "step_min": int(r["step"]),
                                       "step_max": int(r["step"])},),
                             summary=(f"the log announces a resume {where}: {quoted(r['text'])}; {then}: the run "
                                      f"was restarted from a checkpoint" + (f" (from {unit} {at})" if at is not None else "")))

    def _nested_loop(self, run: Run, name: str, starts: tuple[int, ...]) -> bool:
        """Whether the counter's passes are a loop nested in one training: `loop_passes` passes or more, every one but
        the last (which a stop may cut) of the same number of records within `loop_spread` (PPO's optimisation epochs
        over each rollout, `epoch 1..10` a hundred times). A resume happens a few times, at uneven points; each pass of
        such a loop opens where the one before closed because it is the same model."""
        steps = run.series_named(name)["step"].to_numpy()
        sizes = np.diff(np.r_[0, np.searchsorted(steps, np.asarray(starts)), steps.size])[:-1]
        sizes = sizes[sizes > 0]
        if sizes.size < self.loop_passes:
            return False
        mid = float(np.median(sizes))
        return bool(mid >= 2 and np.all(np.abs(sizes - mid) <= self.loop_spread * mid))

    def _restored_launches(self, run: Run, found: list[Finding]) -> Iterator[Finding]:
        """A launch start (`Run.launch_starts`) where the counter starts again but the weights were loaded: a
        training-loss series of the loss's file (the judged loss, or a component of it: a GAN's sum hides its
        reconstruction term under an adversarial one that rises) that fell by `min_fall` of its opening level in the
        launch before opens the next within `max_regain` of that fall above where it closed; and none of them opens
        back near its untrained level (a fresh launch), nor stands there in the last records before the start (a
        boundary placed late). Levels are medians over several records (`launch_records`), the next launch's its
        first record where that is higher; an epoch the file prints that goes on across the start is no launch."""
        name = run.pick("loss")
        starts = tuple(sorted(set(run.launch_starts(name)) | set(self._passes_carried_on(run, name))))
        if not starts:
            return
        if self._nested_loop(run, name, starts):
            return
        grp = run.meta.filter(pl.col("name") == name)["grp"][0]
        names = run.meta.filter((pl.col("role") == "train_loss") & (pl.col("grp") == grp))["name"].to_list()
        known = {f.evidence.get("restart_step") for f in found}
        verdicts: dict[int, list[tuple[bool, str, float, float, float, int]]] = {}
        for series in dict.fromkeys([name, *names]):
            pts = run.series_named(series).filter(pl.col("value").is_finite())
            steps, values = pts["step"].to_numpy(), pts["value"].to_numpy()
            cuts = np.searchsorted(steps, np.asarray(run.launch_starts(series) or starts))
            pieces = [p for p in zip(np.split(steps, cuts), np.split(values, cuts)) if p[0].size]
            for (s0, before), (s1, after) in zip(pieces, pieces[1:]):
                # a short launch (a few epochs a session) is read at half its records, no fewer than `short_records`
                k = max(self.launch_records, before.size // 20) if before.size >= 2 * self.launch_records else \
                    before.size // 2
                if k < self.short_records or min(before.min(), after.min()) <= 0:
                    continue
                opened, closed = float(np.median(before[:k])), float(np.median(before[-k:]))
                # its first record and the median of its first records, the one nearer the opening level: a fresh
                # model that moves within a few records still opens at its untrained level, and one noisy record
                # opens no resume. A loss that rose (an agent's objectives chase a moving target) is read mirrored.
                sign = 1.0 if opened >= closed else -1.0
                resumed = sign * max(sign * float(after[0]),
                                     sign * float(np.median(after[: max(self.launch_records, after.size // 20)])))
                fall = sign * (opened - closed)
                if fall < self.min_fall * abs(opened):
                    continue
                # the last records before the start at that level too: a boundary placed late leaves the next
                # launch's untrained first records at the end of the one before
                last = float(np.median(before[-min(k, self.launch_records):]))
                # one launch, one verdict: a series whose own axis puts the start a few lines off (its values printed
                # on the lines under the loss's) is judged at the loss's launch start, so every series has its say
                at = int(np.searchsorted(np.asarray(starts), s1[0], side="right")) - 1
                verdicts.setdefault(int(starts[at]) if at >= 0 else int(s1[0]), []).append((
                    max(sign * resumed, sign * last) <= sign * closed + self.max_regain * fall
                    and not sign * (closed - resumed) > max(self.max_drop * fall, self.drop_sigmas * stats.noise(before)),
                                                            series, opened, closed, resumed, int(s0[-1])))
        first = _printed_epoch(run, name, int(run.series_named(name)["step"][0]))
        for start, said in sorted(verdicts.items()):
            if start in known or not all(v[0] for v in said):
                continue
            at = _printed_epoch(run, name, start)
            if first is not None and at is not None and at > first:
                continue  # the epoch the file prints goes on there: no counter started again, no launch to judge
            _, series, opened, closed, resumed, before = said[0]
            steps = run.series_named(name)["step"].to_numpy()
            k = int(np.searchsorted(steps, start))
            if at is not None and k + 1 < steps.size and (_printed_epoch(run, name, int(steps[k + 1])) or -1) >= (
                    _printed_epoch(run, name, before) or np.inf):
                continue  # the next record prints the epoch of the count before it again: one stray line, no launch
            ev = {"restart_step": start, "previous_step": before, "overlap_steps": None, "wall_gap_s": None,
                  "series_judged": series, "launch_opened": opened, "launch_closed": closed, "next_opened": resumed}
            yield Finding.of(self, severity="info", step=start, step_end=before, series=series, evidence=ev,
                             sources=(src(run, "loss", np.asarray([before, start])),),
                             summary=(f"a new launch begins at {run.printed_span(name, start)} with its counter "
                                      f"started again, but {series} opens at {resumed:.4g} (its first records), where "
                                      f"the launch before it ended ({closed:.4g}, {'down' if closed < opened else 'up'} "
                                      f"from {opened:.4g}), not at the "
                                      f"untrained level: the run was resumed from its saved weights"))

    def _trained_on(self, run: Run, found: list[Finding]) -> Iterator[Finding]:
        """Training that goes on after the log said it was over (`Training complete in 946m 39s`: `ingest.announcements`),
        its counter going on rather than starting again from the file's first (a fresh launch): a later launch that
        took the counter up from a checkpoint. None where more than `max_ends` such lines have training after them (a
        message printed at every epoch's end), nor where a restart found above is the same one."""
        said = run.announced(TRAIN_END)
        if said.height == 0:
            return
        name = run.pick("loss")
        same_axis = name is not None and run.meta.filter(pl.col("name") == name)["grp"][0]
        known = [f.evidence.get("restart_step") for f in found] + [f.evidence.get("previous_step") for f in found]
        ends = said.unique(["grp", "before"], keep="first", maintain_order=True).filter(
            (pl.col("before") > 0) & (pl.col("after") > 0))
        for _, rows in ends.group_by("grp", maintain_order=True):
            if rows.height > self.max_ends:
                continue
            for r in rows.head(self.max_reported).iter_rows(named=True):
                prefix = "epoch" if r["ordinal"] else "step"
                top, first_after, first = (r[f"top_{prefix}_before"], r[f"first_{prefix}_after"], r[f"first_{prefix}"])
                if first_after is None or first is None or first_after <= first:
                    continue  # the counter starts again from the file's first value: a fresh launch
                if r["grp"] == same_axis and any(
                        k is not None and min(r["step"], r["first_step_after"]) <= k <= max(r["step"], r["first_step_after"])
                        for k in known):
                    continue  # the restart the counters or the words show already
                ev = {"restart_step": int(r["first_step_after"]), "previous_step": int(r["step"]), "overlap_steps": None,
                      "announced": r["text"], "counter_before": top, "counter_after": first_after, "counter": prefix,
                      "printed_again": bool(top is not None and first_after <= top), "source": r["grp"],
                      "wall_gap_s": None}
                yield Finding.of(self, severity="info", step=int(r["step"]), series=name, evidence=ev,
                                 sources=({"table": "texts", "source": r["grp"], "step_min": int(r["step"]),
                                           "step_max": int(r["step"])},),
                                 summary=(f"the log says the training is over after {prefix} {top}: {quoted(r['text'])}; "
                                          f"then it trains on from {prefix} {first_after}, not from its first "
                                          f"{prefix} {first}: a later launch resumed from a checkpoint"))

    def _refused_by_wandb(self, run: Run, loss: str) -> Iterator[Finding]:
        """Restarts W&B hid: the steps it refused to store because they were below the step it had reached
        (`wandb/dropped_history_step`, read from the run folder's debug log), `min_refused` or more distinct
        ones below one and the same reached step."""
        refused = run.meta.filter(pl.col("tag") == DROPPED_TAG)
        same_run = refused.filter(pl.col("grp").is_in(run.meta.filter(pl.col("name") == loss)["grp"].implode()))
        if same_run.height == 0:
            return  # no refusals, or another writer's (the loss is TensorBoard's: W&B's history is not its axis)
        pts = run.points(same_run["name"][0]).filter(pl.col("value").is_finite())
        found = 0
        for current, steps in pts.group_by("value", maintain_order=True).agg(pl.col("step").unique().sort()).rows():
            if found >= self.max_reported:
                break
            if len(steps) < self.min_refused:
                continue
            found += 1
            first, reached = int(steps[0]), int(current)
            ev = {"restart_step": first, "previous_step": reached, "overlap_steps": reached - first,
                  "refused_steps": len(steps), "last_refused_step": int(steps[-1]), "wall_gap_s": None}
            yield Finding.of(self, severity="info", step=first, step_end=reached, series=loss, evidence=ev,
                             sources=(src(run, same_run["name"][0], np.asarray([first, steps[-1]])),),
                             summary=(f"W&B refused {len(steps)} logged steps {first}-{steps[-1]} because it had "
                                      f"already reached step {reached}: the run was resumed from an older "
                                      f"checkpoint and logged those steps again, and the history shows only "
                                      f"the first pass"))

    def _scheduler_restarts(self, run: Run) -> Iterator[Finding]:
        """A resume the steps do not show: the LR jumps back up mid-decay to a value its schedule had earlier
        while the steps go on (lr_schedule_anomaly's rule (c), read from there: one judgement, one home)."""
        for r in self.lr_schedule_anomaly.restarts(run)[: self.max_reported]:
            ev = {"restart_step": r["step"], "previous_step": r["previous_step"], "overlap_steps": 0,
                  "lr_before": r["lr_before"], "lr_after": r["lr_after"], "same_lr_step": r["same_lr_step"],
                  "wall_gap_s": None}
            yield Finding.of(self, severity="info", step=r["step"], step_end=r["previous_step"], series=run.pick("lr"),
                             evidence=ev, sources=(src(run, "lr", np.asarray([r["same_lr_step"], r["step"]])),),
                             summary=(f"the LR jumps back to {r['lr_after']:.3g} (its value at step {r['same_lr_step']}) "
                                      f"at step {r['step']} while the steps go on: the run was resumed with the "
                                      f"weights but a fresh scheduler"))

    def _lr_from_zero(self, run: Run, known: list[int]) -> Iterator[Finding]:
        """A resume the steps do not show: the LR, positive for `min_lr_points` records or more, is exactly 0 again and
        then rises while the steps go on: a scheduler built anew starts its warmup from 0 (HF Trainer resumed with a new
        `max_steps`), where a cyclic one restarts at its peak and a decay to 0 stays there. Structured logs only (a
        console's LR printed with few digits shows 0 for a small LR); none under a scheduler named cyclic, nor where a
        restart in `known` (its step: an epoch that falls back) is the same one, nor three or more at one period (a
        schedule rebuilt every epoch, or stepped per micro-batch, cycles; resumes come when a job dies)."""
        from forensics.judge.detectors.lr_schedule_anomaly import _cyclic as cyclic  # one list of cyclic schedulers

        if not run.has("lr") or run.format_of(run.pick("lr")) in TEXT_FORMATS:
            return
        sched = run.config("lr_scheduler_type", "scheduler", "lr_scheduler", "scheduler.name")
        if isinstance(sched, str) and cyclic(sched):
            return
        reported = 0
        for steps, lr in by_launch(run, "lr", *run.arrays("lr")):
            ok = np.isfinite(lr)
            steps, lr = steps[ok], lr[ok]
            if steps.size < 2 * self.min_lr_points or np.any(np.diff(steps) <= 0):
                continue
            positive = np.cumsum(lr > 0)  # positive records up to each point
            # not the run's own start (a warmup from 0), an LR held at 0 for a while, nor a restart an epoch that
            # falls back shows already
            # nor a 0 between two equal values: an LR logged at a micro-step between optimizer steps dips to 0 and
            # comes back where it was, where a schedule built anew starts elsewhere
            starts = [k for k in np.flatnonzero((lr[:-1] == 0) & (lr[1:] > 0))
                      if positive[k] >= self.min_lr_points and lr[k - 1] != 0
                      and not np.isclose(lr[k + 1], lr[k - 1], rtol=1e-6, atol=0.0)
                      and not any(steps[k - 1] <= r <= steps[k + 1] for r in known)]
            gaps = np.diff(steps[starts]) if len(starts) >= 3 else np.array([])
            if gaps.size and gaps.max() <= 1.1 * gaps.min():
                continue  # restarts at a regular period are a schedule's cycle (one per epoch), not resumes
            for k in starts:
                if reported >= self.max_reported:
                    continue
                reported += 1
                before = lr[:k][lr[:k] > 0][-1]
                ev = {"restart_step": int(steps[k]), "previous_step": int(steps[k - 1]), "overlap_steps": 0,
                      "lr_before": float(before), "lr_after": float(lr[k + 1]), "wall_gap_s": None}
                yield Finding.of(self, severity="info", step=int(steps[k]), series=run.pick("lr"), evidence=ev, sources=(src(run, "lr", steps[[k - 1, k]]),),
                                 summary=(f"the LR starts again from 0 at step {steps[k]} (then {lr[k + 1]:.3g}) after "
                                          f"{before:.3g} at step {steps[k - 1]} while the steps go on: the run was "
                                          f"resumed with the weights but a scheduler built anew"))

    def _epoch_resets(self, run: Run) -> Iterator[Finding]:
        """Restarts shown by the epoch falling back while the steps rise (write order, `Run.epoch_resets`). On a line
        axis (no logged step goes on across it) none that falls back to the first epochs, at or below every one
        before it (`_from_the_start`): a fresh launch appended to the log (a Keras CSVLogger in append mode)."""
        if not run.has("epoch"):
            return
        name = run.pick("epoch")
        fresh = run.appended_launches(name)  # an epoch count that starts again with a new launch is no resume
        resets = [r for r in run.epoch_resets() if r[0] not in fresh]
        if resets and bool(run.meta.filter(pl.col("name") == name)["ordinal"][0]):
            pts = run.points(name).filter(pl.col("value").is_finite())
            steps, epochs = pts["step"].to_numpy(), pts["value"].to_numpy()
            at = np.searchsorted(steps, [r[0] for r in resets])
            resets = [r for r, k in zip(resets, at) if not self._from_the_start(epochs, k)]
        for step, before, e_before, e_after in resets[: self.max_reported]:
            ev = {"restart_step": step, "previous_step": before, "overlap_steps": 0,
                  "epoch_before": e_before, "epoch_after": e_after, "wall_gap_s": None}
            yield Finding.of(self, severity="info", step=step, step_end=before, series=name,
                             evidence=ev, sources=(src(run, "epoch", np.asarray([before, step])),),
                             summary=(f"epoch falls back from {e_before:.3g} to {e_after:.3g} at step "
                                      f"{step} while the steps keep rising: the run was restarted from a "
                                      f"checkpoint with a fresh epoch count"))


    def _from_the_start(self, epochs: np.ndarray, k: int) -> bool:
        """Whether epoch `epochs[k]` (write order) goes back to the beginning: at or below every epoch before it, and
        that lowest one a first epoch (below `late_epoch`, or within one stride of the counter: a table printed every
        5 epochs opens at 5); a log whose first epoch is later began at a checkpoint, and a return to it is a second
        resume from that checkpoint."""
        lowest = float(np.min(epochs[:k])) if k > 0 else np.inf
        rises = np.diff(epochs)[np.diff(epochs) > 0]
        stride = float(np.median(rises)) if rises.size else 1.0
        return bool(epochs[k] <= lowest and (lowest < self.late_epoch or lowest <= stride))

    def _printed_epoch_back(self, run: Run, known: set) -> Iterator[Finding]:
        """Restarts on a line axis without an epoch column: the epoch the loss's own lines print (`Epoch 652:
        average_loss = ...`, `Run.counters`) lower than the line's before it, and not back to the beginning
        (`_from_the_start`): a process restarted from an epoch's checkpoint prints that epoch's successors again."""
        name = run.pick("loss")
        if name is None or run.has("epoch") and run.meta.filter(
                pl.col("name") == run.pick("epoch"))["grp"][0] == run.meta.filter(pl.col("name") == name)["grp"][0]:
            return  # an epoch column of the loss's file: `_epoch_resets` reads it
        pts = run.points(name).filter(pl.col("value").is_finite())
        steps = pts["step"].to_list()
        printed = run.counters(name, steps)
        if not printed:
            return  # logged steps, or lines printing no counter
        epochs = np.array([printed.get(s, (None, None))[0] for s in steps], dtype=float)
        if steps == [] or np.isnan(epochs).any():
            return  # not every record prints its epoch: nothing to read the order from
        back = [k for k in np.flatnonzero(np.diff(epochs) < 0) + 1
                if not self._from_the_start(epochs, k) and steps[k] not in known]  # not one the words show
        wall = pts["wall_time"].fill_null(np.nan).to_numpy()
        for k in back[: self.max_reported]:
            gap = float(wall[k] - wall[k - 1]) if np.isfinite(wall[k]) and np.isfinite(wall[k - 1]) else None
            e_before, e_after = int(epochs[k - 1]), int(epochs[k])
            ev = {"restart_step": int(steps[k]), "previous_step": int(steps[k - 1]), "overlap_steps": None,
                  "epoch_before": e_before, "epoch_after": e_after, "wall_gap_s": gap}
            yield Finding.of(self, severity="info", step=int(steps[k]), series=name,
                             evidence=ev, sources=(src(run, "loss", np.asarray([steps[k - 1], steps[k]])),),
                             summary=(f"the epoch the log prints goes back from {e_before} to {e_after}"
                                      + (f" after {gap:.0f} s" if gap is not None else "")
                                      + ": the run was restarted from a checkpoint"))


def _printed_epoch(run: Run, name: str, step: int) -> int | None:
    """The epoch the file prints at `step` of series `name` (`Run.writer_positions`), or None where it prints none."""
    m = re.search(r"\bepoch (\d+)", run.writer_positions(name, [step]).get(step, ""))
    return int(m.group(1)) if m else None


def _side_by_side(run: Run, name: str) -> bool:
    """Whether series `name` was read from several files written at the same time (one begins before the one
    before it ends: a process per rank or per device, each its own TensorBoard writer), not one after another: their
    points interleaved by wall time would step back at every record, so each file is read in its own order."""
    edges = run.source_edges(name)
    if edges.height < 2 or edges["first_wall"].null_count() or edges["last_wall"].null_count():
        return False
    ended = edges["last_wall"].cum_max().to_numpy()[:-1]
    return bool(np.any(edges["first_wall"].to_numpy()[1:] < ended))


def _epoch_at(run: Run, grp: str, step: int | None) -> int | None:
    """The epoch the run's epoch series of file `grp` counts at `step` (its last point at or before it, on the same
    axis), or None where it has none: a log that prints `Epoch 170` on a line of its own above the loss's."""
    name = run.pick("epoch")
    if step is None or name is None or run.meta.filter(pl.col("name") == name)["grp"][0] != grp:
        return None
    pts = run.points(name).filter((pl.col("step") <= step) & pl.col("value").is_finite())
    return int(pts["value"][-1]) if pts.height else None


def _in_order(points: pl.DataFrame) -> bool:
    """Points whose steps rise at every point in write order, and whose wall clock (where every point has one)
    never goes back: the order `check` would sort them into is the write order and no step repeats, so no step
    goes back either. Read without a copy of the series (a long run's loss is millions of points)."""
    steps = points["step"]
    if steps.null_count() or not bool((steps.diff().drop_nulls() > 0).all()):
        return False
    wall = points["wall_time"]
    return wall.null_count() > 0 or bool((wall.diff().drop_nulls() >= 0).all())
