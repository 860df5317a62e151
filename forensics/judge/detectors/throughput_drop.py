"""throughput_drop: step time jumps or degrades (stalls, slowdowns, recurring pauses), from wall-clock stamps."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import numpy as np
import polars as pl

from forensics.judge import stats
from forensics.judge.detectors.base import MECHANISM, reinforcement_learning
from forensics.judge.findings import Finding
from forensics.judge.run import Run, usable_series
from ingest.roles import words
from ingest.steptime import LENGTH_WORDS, record_lengths, record_work, seconds_per_step


class PerStep(NamedTuple):
    """What `ThroughputDrop._per_step` read: the intervals, one shape whatever measured them."""
    start: np.ndarray  # interval start steps
    end: np.ndarray  # interval end steps (a logged step time's point: its own step, both)
    seconds: np.ndarray  # seconds per step
    segment: np.ndarray  # no change point is read across a resume or a launch start
    name: str  # the series read
    how: str  # what measured it (wall stamps, a logged step time, a rate)
    launch: np.ndarray  # the launch each interval belongs to: judged against its own launch's pace
    span: np.ndarray  # steps each interval covers (1 for a logged step-time point)
    priced: dict  # how wall-stamp intervals were priced (`_work_intervals`), for the app to draw the same ones


def _logged(s, e, r, seg, name, how, launch) -> PerStep:
    """A `PerStep` of logged values (a step time or a rate), each point one step of its own."""
    return PerStep(s, e, r, seg, name, how, launch, np.maximum(e - s, 1).astype(float), {})


@dataclass(frozen=True)
class ThroughputDrop:
    """Step time jumps or degrades: a sustained slowdown, or stalls that keep coming back.

    Detects: seconds per step between consecutive logged points of the loss (Δwall_time / Δstep within one segment:
    a resume's intervals are dropped; on a line axis, the steps a printed counter or a record's own length says it
    covers, `_record_work`), or a logged step-time series (seconds; milliseconds where its name says `ms`),
    from `min_logged` points. (1) Slowdown: the change point of log step time splits it into a faster part and one
    `slowdown` × slower, each of at least `min_points` intervals and `min_share` of them, nearly all (`separation`)
    of the slower part above the faster part's median. (2) Stalls: at least `min_stalls` intervals `stall` × the
    median and `z` robust sigmas above it, away from evaluation and checkpoint steps, costing `min_lost` of the wall
    time and `stall_seconds` in all: stalls of a few times the step are worth a change only when they cost minutes.
    Both need the step `min_added` seconds longer. The log that ends slower is read in the launch it ends in: one
    launch's pace is never compared with another's.
    Effect size first, at any length from `spread_points` intervals: `min_stalls_spread` or more intervals past the
    first `spread` × the median, each a pause of `min_pause` seconds or more, costing `min_seconds` and `min_lost` of
    the time; or one interval `long` × the median or slower holding a pause of an `hour` or more (and `min_lost` of
    the time): hours lost at once, which a log of a dozen lines shows as well as a long one; or one interval
    `spread` × the median holding `one_share` of the time, where the records are not each an evaluation's: the stall
    an excerpt of a few steps shows. Every interval is judged against the median of its own launch (`_own_pace`).
    Pauses at evaluation and checkpoint steps, or on an epoch's first printed line, are no stall, unless those come
    at most intervals (then they are the run's rhythm, in the median).
    A logged throughput (samples/s, it/s, tokens/s) is judged as a step time, 1/x, where no step time or wall
    stamps speak; a rate has no seconds to price, so only its change over time does (the slowdown rule, and a log
    that ends on `end_points` records ×`end_factor` slower than the steady ones before, at any length). A printed
    per-iteration time stands for the iterations between prints (`_per_print`): a slow one costs its excess over one
    iteration, the iterations counted by a batch counter or by a count printed as a value (`iters: 400`). An
    epoch's first batch is the loader's start; slow intervals in every fifth of the run (`pace_share` of each) are
    its pace, not a drop. Steps are priced in one place, `ingest.steptime.seconds_per_step`, which the app's
    step-time chart draws too; an RL run's episodes whose lengths are not printed are not priced at all.
    Why: dataloader stalls, checkpointing, host–device copies, memory pressure: the run took longer than
    it needed to, and a slowdown that grows often precedes an out-of-memory crash.
    Evidence: step ranges, median seconds per step before and after, or the stall steps, how many, their
    median length, the time they cost; the series whose stamps were read.
    False alarms: 0 of the 47 healthy runs it could check (benchmarks/calibrate.py); 0 of the 40 healthy real runs;
    0 of the 136 healthy labelled runs of the development sets (23 it could check) and no false finding on a labelled
    one, with `stall_seconds`, `min_pause` and the hour rule (docs/engine.md); 0 of the 39 healthy runs it judges of
    the 179 of every labelled development set with the rate, pricing and pace rules (before: 1, and 1 labelled).
    Pooled (849 real runs, 328 healthy), each field swept alone: 0 of the 86 healthy runs it could check (71 before
    `min_logged` was loosened), 11 of 20 found, 1 false claim on a labelled run. Pooled with set8 (978 runs): 1 of
    the 108 healthy runs it judges (4 before the clock, own-pace and one-stall rules), 16 of 25 found, 3 false claims
    (7 before).
    The training phase's times (`_training_phase`) only remove claims: 1 false one of set14 gone, no hit lost.
    """

    kind: ClassVar[str] = "throughput_drop"
    stage: ClassVar[int] = MECHANISM
    requires: ClassVar[tuple[str, ...]] = ()
    slowdown: float = 1.5  # pooled healthy runs fired on: 0 of 71 from 1.3 up, 2 at 1.2; 1.3 and 2 lose a hit
    min_points: int = 5  # 0 of 71 healthy at 2-10; 8 loses a hit
    min_share: float = 0.1  # 0 of 71 healthy at 0.1-0.3; 1 at 0.05 (a fast first stretch read as the baseline)
    separation: float = 0.8  # 0 of 71 healthy, the same findings, at 0.5-0.95
    stall: float = 3.0  # 0 of 71 healthy at 1.5-10; 2 or less adds false claims on labelled runs
    z: float = 6.0  # 0 of 71 healthy at 2-10; 4 or less adds a false claim on a labelled run
    min_stalls: int = 3  # 0 of 71 healthy at 2-10, 1 at 1
    min_lost: float = 0.1  # 0 of 71 healthy at 0.02 up, 1 at 0.01; 0.05 adds 3 false claims, 0.2 loses 3 hits
    min_intervals: int = 20  # wall-stamp intervals to judge a trend: 0 of 71 healthy (0 of 73 at 10, 84 at 5; 40 loses a
    # hit); kept: at 10 the stall rule reads a healthy log's first launch, slowing ×8, across 17 intervals
    min_added: float = 0.001  # seconds a slowdown or stall adds per step: sub-millisecond steps are no concern (flat at 0-0.1)
    min_logged: int = 8  # a logged step time measures every step it is printed for: 8 points judge a trend (0 of
    # 86 healthy at 8, 0 of 104 at 5, 0 of 71 at 12; 20 loses 2 hits)
    min_seconds: float = 5.0  # steps spread ×`spread` cost at least this many seconds in all: 0.3 s lost is noise
    # (0 of 71 healthy, the same findings, at 0.5-60 s)
    stall_seconds: float = 300.0  # stalls of ×`stall` cost five minutes or more: a minute lost in a run is no change
    # (0 of 71 healthy at 10-1800 s; 60 s or less adds a false claim on a labelled run)
    spread: float = 10.0  # effect size first: steps ×10 the median or slower (0 of 71 healthy at 3-50; 5 or less adds
    # 3 false claims on labelled runs, 20 loses a hit) ...
    min_stalls_spread: int = 2  # ... at least two of them (one is a hiccup: 1 fires on a healthy run) ...
    spread_points: int = 5  # ... from five step times on (0 of 71 healthy at 3-12; 8 loses 3 hits)
    min_pause: float = 1.0  # ... each a pause of a second or more: a fraction of a second is no stall anyone sees
    # (0 of 71 healthy at 0.3-10 s, 1 at 0.1 s)
    long: float = 2.0  # an hour lost: an interval ×2 the median step or slower (0 of 71 healthy at 1.5-10; 3 loses a hit)
    hour: float = 3600.0  # ... holding a pause of an hour or more (and `min_lost` of the time), at any length (0 of 71
    # healthy from 1800 s up, 1 at 1200 s, 2 at 600 s; 1800 s adds a false claim on a labelled run)
    end_factor: float = 2.0  # the log ends on steps ×2 the median of the steady ones before them or slower (0 of 71
    # healthy at 1.3-5; 1.5 or less adds false claims on labelled runs, 3 loses a hit) ...
    end_points: int = 2  # ... two or more of them (one is a hiccup; 0 of 71 healthy at 1-5, 3 loses a hit)
    one_share: float = 0.5  # one interval ×`spread` that holds half the time the log covers or more: a stall a
    # short excerpt shows at once (its other steps at their pace)
    pace_share: float = 0.15  # slow intervals this share of every fifth of the run are its pace, not a stall (flat
    # at 0.05-0.4)

    def _per_step(self, run: Run) -> PerStep | None:
        """The run's step times (`PerStep`) or None: a logged step-time series, else the training loss's wall
        stamps priced by the work each record says it did (`_work_intervals`), else a logged rate. A new segment
        starts after each resume (a step or clock going back) and at each launch start, so no change point is read
        across one; each interval is judged against its own launch's pace (`_own_pace`)."""
        train = run.meta.filter(~pl.col("split").is_in(["val", "test"]).fill_null(False))
        st = usable_series(train, "step_time").sort("n_points", descending=True)
        if st.height:
            name = st["name"][0]
            f = run.series_named(name).filter(pl.col("value").is_finite() & (pl.col("value") >= 0))
            f = _training_phase(run, f)
            s, v = f["step"].to_numpy(), f["value"].to_numpy() * _seconds_per_unit(name)
            # elapsed time under a step-time name (`train/time_ms`), a clock that starts again with each launch or
            # pass: its differences within each are the steps
            starts = np.searchsorted(s, np.asarray(sorted(set(run.pass_starts(name)) | set(run.launch_starts(name))),
                                                   dtype=np.int64))
            cuts = np.union1d(starts, _clock_restarts(v))
            pieces = [p for p in np.split(np.arange(s.size), cuts) if p.size >= 2]
            piece = np.concatenate([np.full(p.size - 1, k) for k, p in enumerate(pieces)]) if pieces else None
            if sum(p.size - 1 for p in pieces) >= 2 and all(_is_clock(v[p]) or p.size == 2 and v[p[1]] > v[p[0]]
                                                            for p in pieces):
                return _logged(np.concatenate([s[p][:-1] for p in pieces]), np.concatenate([s[p][1:] for p in pieces]),
                               np.concatenate([np.diff(v[p]) / np.diff(s[p]) for p in pieces]),
                               piece, name, "differences of the elapsed time logged", piece)
            launch = _launch_of(run, name, s)
            return _logged(s, s, v, launch, name, "logged step time", launch)
        name = run.pick("loss")
        got = None if name is None else _work_intervals(run, name)
        if got is not None and got.start.size >= self.min_intervals:
            return got
        rate = self._rate(run, train)
        if rate is not None:
            return rate
        return got

    def _rate(self, run: Run, train: pl.DataFrame) -> tuple | None:
        """A logged throughput (samples/s, it/s, tokens/s) judged as a step time: 1/x, one point per printed line
        (a line a writer printed twice, with its counters, is one measurement)."""
        tp = usable_series(train, "throughput").sort("n_points", descending=True)
        if not tp.height:
            return None
        name = tp["name"][0]
        f = run.series_named(name).filter(pl.col("value").is_finite() & (pl.col("value") > 0))
        s, v = f["step"].to_numpy(), f["value"].to_numpy()
        printed = run.counters(name, s.tolist())
        at = [printed.get(int(x)) for x in s]
        keep = np.array([i == 0 or at[i] is None or at[i] != at[i - 1] or v[i] != v[i - 1] for i in range(s.size)],
                        dtype=bool)
        s, v = s[keep], v[keep]
        launch = _launch_of(run, name, s)
        return _logged(s, s, 1.0 / v, launch, name, RATE, launch) if s.size else None

    def _per_print(self, run: Run, name: str, steps: np.ndarray) -> int:
        """Iterations between two printed lines of a logged step time on a line axis (`Epoch: [3][1000/2502] Time
        0.98`: the batch counter moves by 1000): the printed time is one iteration's, and each line stands for
        that many; on a logged step axis (`e·N + i` read from that line), the steps between two prints. Where the
        line prints its iteration count as a value of its own (`(epoch: 3, iters: 400, time: 0.09)`: a series named
        as a counter, `_printed_count`), that count's advance. 1 where no counter is printed."""
        printed = run.counters(name, steps.tolist())
        if not printed:
            moves = np.diff(steps)
            moves = moves[moves > 0]
            return max(1, int(np.median(moves))) if moves.size else 1
        at = [printed.get(int(x), (None, None)) for x in steps]
        moves = [b[1] - a[1] for a, b in zip(at, at[1:])
                 if a[1] is not None and b[1] is not None and a[0] == b[0] and b[1] > a[1]]
        if not moves:
            moves = self._printed_count(run, steps)
        return max(1, int(np.median(moves))) if len(moves) else 1

    def _printed_count(self, run: Run, steps: np.ndarray) -> list[int]:
        """The advances between consecutive records at `steps` (a line axis) of an iteration count printed as a
        value beside the step time (a series named `iters`, `iteration`, `batch`: `COUNT_WORDS`), whole numbers
        that rise at most records (an epoch's count starts again at each epoch: those falls are no advance); empty
        where none is printed."""
        for other in run.meta.filter(pl.col("ordinal").fill_null(False))["name"].to_list():
            if not set(words(other)) or not set(words(other)) <= COUNT_WORDS:
                continue
            f = run.series_named(other)
            got = dict(zip(f["step"].to_list(), f["value"].to_list()))
            v = np.array([got.get(int(s), np.nan) for s in steps], dtype=float)
            if v.size < 3 or not np.all(np.isfinite(v)) or np.any(v != np.round(v)):
                continue
            d = np.diff(v)
            if np.mean(d > 0) >= 0.5:
                return [int(x) for x in d[d > 0]]
        return []

    def _enough(self, how: str) -> int:
        return self.min_intervals if how.startswith("wall_time") else self.min_logged

    def unavailable(self, run: Run) -> str | None:
        got = self._per_step(run)
        n = 0 if got is None else int(np.sum(got[2] > 0))
        if got is not None and n >= self.spread_points and n < self._enough(got[5]) \
                and (self._ends_slow(got[0], got[1], got[2], got[5]) or (got[5] != RATE and (
                    self._spread(run, got) or self._spread(run, got, self.long, self.hour, 1, self.hour)
                    or self._spread(run, got, stalls=1, share=self.one_share)))):
            return None  # under the counts the trend rules need, only a glaring effect can speak
        if got is None or n < self._enough(got[5]):
            return (f"needs wall-clock stamps on {self.min_intervals}+ logged steps of the loss (or a step-time "
                    f"series of {self.min_logged}+ points); found {n} usable intervals")
        return None

    def _quiet_steps(self, run: Run, name: str | None = None) -> np.ndarray:
        """Steps where a validation series or a checkpoint was written, or, on series `name`'s lines, the first step
        of an epoch the writer printed (`Epoch: [353/520] Iter:[0/495], Time: 4.31`: the data loader's workers start
        again): pauses there are expected."""
        val = run.meta.filter(pl.col("split").is_in(["val", "test"]).fill_null(False)
                              | pl.col("role").is_in(["val_loss", "val_accuracy"]))["name"].to_list()
        steps = [run.series_named(n)["step"].to_numpy() for n in val]
        ck = run.table("checkpoints")
        if ck.height and "step" in ck.columns:
            steps.append(ck["step"].drop_nulls().to_numpy())
        if name is not None:
            at = run.series_named(name)["step"].to_numpy()
            printed = run.counters(name, at.tolist(), logged=True)  # an epoch printed beside a logged step too
            epoch = [printed.get(int(s), (None, None))[0] for s in at]
            batch = [printed.get(int(s), (None, None))[1] for s in at]
            first = min((b for b in batch if b is not None), default=None)
            steps.append(np.array([at[i] for i in range(1, at.size)
                                   if epoch[i] is not None and epoch[i - 1] is not None and epoch[i] != epoch[i - 1]],
                                  dtype=np.int64))
            if first is not None and len({e for e in epoch if e is not None}) > 1:  # the epoch's first batch, printed
                steps.append(np.array([at[i] for i in range(at.size) if batch[i] == first], dtype=np.int64))
        return np.unique(np.concatenate(steps)) if steps else np.array([], dtype=np.int64)

    def _at_eval_period(self, run: Run, stalls: np.ndarray) -> bool:
        """Stalls, three or more, at every multiple of one step period in a run that evaluates (a validation series
        logged at all): the evaluation every `eval_interval` steps, whose lines the log does not always hold
        (nanoGPT prints `step 0: ... val loss` once and pauses at every multiple of 250 after), not a drop. A stall at
        the log's last step is that rhythm's final evaluation (nanoGPT's and HF's evaluation at the end of training)."""
        last = run.last_step()
        if stalls.size > 3 and last is not None and stalls[-1] >= last:
            stalls = stalls[:-1]
        if stalls.size < 3 or not run.meta.filter(pl.col("role").is_in(["val_loss", "val_accuracy"])).height:
            return False
        period = int(np.median(np.diff(stalls)))
        return period > 1 and bool(np.all(stalls % period == 0)) \
            and bool(np.all(np.diff(stalls) % period == 0))

    def _away_from_pauses(self, run: Run, a: np.ndarray, b: np.ndarray, name: str) -> tuple[np.ndarray, str]:
        """Which intervals [a, b] hold no evaluation or checkpoint step (`_quiet_steps`), and the words that say so.
        Where those touch most intervals (a validation loss logged on every record) they are the run's ordinary
        rhythm, already in the median: they explain no one slow interval, and every interval counts."""
        quiet = self._quiet_steps(run, name)
        if not quiet.size:
            return np.ones(a.size, dtype=bool), "none at an evaluation or checkpoint"
        away = np.searchsorted(quiet, b, side="right") <= np.searchsorted(quiet, a, side="left")
        if away.mean() >= 0.5:
            return away, "none at an evaluation or checkpoint"
        return np.ones(a.size, dtype=bool), EVERY_INTERVAL

    def check(self, run: Run) -> Iterator[Finding]:
        got = self._per_step(run)
        if got is None:
            return
        a, b, r, seg, name, how, launch, span = got[:8]
        keep = r > 0
        if not keep.all():
            a, b, r, seg, launch, span = a[keep], b[keep], r[keep], seg[keep], launch[keep], span[keep]
        src = (_source(got, a, b),)
        if r.size >= self._enough(how):
            lr = np.log(r)
            pace = _own_pace(r, launch)
            per = self._per_print(run, name, a) if how == "logged step time" else 1
            found = [*self._slowdown(a, b, r, lr, seg, name, how, src),
                     *([] if how == RATE else self._stalls(run, a, b, r, lr, span, pace, name, how, src, per))]
            if found:
                yield from found
                return
        ordinal = run.on_line_axis(name)
        last = seg == seg[-1]  # the launch (or resumed segment) the log ends in, against its own steady pace
        if ordinal and how.startswith("wall_time"):  # line numbers are no steps: one record is one unit of progress
            ends = self._ends_slow(a[last], a[last] + 1, (r * span)[last], how)
        else:
            ends = self._ends_slow(a[last], b[last], r[last], how)
        if ends is not None:
            yield Finding.of(self, severity="warning", step=ends["onset_step"], step_end=ends["end_step"], series=name,
                             evidence=ends | {"measured_from": how}, sources=src,
                             summary=(f"the log ends slower: its last {ends['intervals_after']} "
                                      + ("rates" if how == RATE else "step times")
                                      + f" run ×{ends['factor']:.2g} or more the median of the "
                                      f"{ends['intervals_before']} before them"
                                      + (f" ({ends['rate_before']:.4g} → {ends['rate_last']:.4g} {name})"
                                         if how == RATE else f", costing {ends['seconds_lost']:.3g} s")))
            return
        if how == RATE:
            return  # a rate's pauses have no seconds to price: only its change over time speaks
        # Effect size first, at any length: a few steps ×`spread` slower, too few for the stall rule
        spread = self._spread(run, got) if r.size >= self.spread_points else None
        if spread is None and r.size >= self.spread_points:
            spread = self._spread(run, got, self.long, self.hour, 1, self.hour) \
                or self._spread(run, got, stalls=1, share=self.one_share)
        if spread is not None:
            yield Finding.of(self, severity="warning", step=spread["first_slow_step"],
                             step_end=spread["last_slow_step"], series=name, evidence=spread | {"measured_from": how},
                             sources=src,
                             summary=(f"step times spread ×{spread['spread']:.3g}: {spread['slow']} of "
                                      f"{spread['intervals']} run at {spread['seconds_per_step_slow']:.3g} s per "
                                      f"step or more against a median of {spread['seconds_per_step_median']:.3g} s, "
                                      f"costing {spread['seconds_lost']:.3g} s"
                                      + (f" ({spread['seconds_lost'] / 3600:.2g} hours, " if spread['seconds_lost'] >= 3600 else " (")
                                      + f"{spread['fraction_of_time_lost']:.0%} "
                                      f"of the time); {spread['pauses']}"))

    def _spread(self, run: Run, got: tuple, factor: float | None = None, seconds: float | None = None,
                stalls: int | None = None, pause: float | None = None, share: float | None = None) -> dict | None:
        """Step times spread ×`spread`: past the first interval (start-up: compilation, caches) and away from
        evaluation and checkpoint steps, at least `min_stalls_spread` intervals run `spread` × the median or slower,
        costing `min_seconds` or more in all and `min_lost` of the time. None otherwise. With `factor`, `seconds`,
        `stalls` and `pause` (the hour rule: one interval ×`long` holding a pause of an `hour`), the same reading of a
        smaller effect that costs an hour at once; with `stalls` 1 and `share` (the one-stall rule), one interval
        ×`spread` that holds `one_share` of the excerpt's time."""
        factor = self.spread if factor is None else factor
        seconds = self.min_seconds if seconds is None else seconds
        stalls = self.min_stalls_spread if stalls is None else stalls
        pause = self.min_pause if pause is None else pause
        a, b, r, launch, span = got.start, got.end, got.seconds, got.launch, got.span
        keep = r > 0
        a, b, r, launch, span = a[keep][1:], b[keep][1:], r[keep][1:], launch[keep][1:], span[keep][1:]
        if r.size < self.spread_points - 1:
            return None
        pace = _own_pace(r, launch)
        away, note = self._away_from_pauses(run, a, b, got[4])
        slow = (r >= factor * pace) & away & ((r - pace) * span >= pause)
        lost = float(np.sum((r[slow] - pace[slow]) * span[slow]))
        per = self._per_print(run, got[4], a) if got[5] == "logged step time" else 1
        total = float(np.sum(r * span) + np.sum(pace) * (per - 1))
        if share is not None and note == EVERY_INTERVAL:
            return None  # one slow record among records that each evaluate: an evaluation that did more, no stall
        share = self.min_lost if share is None else share
        if int(slow.sum()) < stalls or lost < max(seconds, share * total) or self._at_eval_period(run, b[slow]):
            return None
        return {"spread": float(np.max(r[slow] / pace[slow])), "slow": int(slow.sum()), "intervals": int(r.size),
                "seconds_per_step_slow": float(r[slow].min()), "seconds_per_step_median": float(np.median(pace[slow])),
                "seconds_lost": lost, "fraction_of_time_lost": lost / total, "first_slow_step": int(a[slow][0]), "last_slow_step": int(b[slow][-1]),
                "pauses": note}

    def _pace(self, far: np.ndarray, away: np.ndarray) -> bool:
        """Slow intervals in every fifth of the run, each fifth holding `pace_share` of them or more: a bimodal
        pace the run kept from start to end (a loader that keeps up on some batches only), not a drop."""
        fifths = [(f[w].mean() if w.any() else 0.0) for f, w in zip(np.array_split(far, 5), np.array_split(away, 5))]
        return far.size >= 5 * self.min_stalls and min(fifths) >= self.pace_share

    def _ends_slow(self, a, b, r, how) -> dict | None:
        """Effect size at any length: the log ends on `end_points` or more intervals each ×`end_factor` the median
        of the `spread_points`+ steady ones before them (within ×`slowdown` of their median). A step time also
        needs `min_seconds` lost; a rate has no seconds to price, its fall is what a user reads."""
        if r.size < self.spread_points + self.end_points:
            return None
        base = float(np.median(r[:-self.end_points]))
        n = 0
        while n < r.size - self.spread_points and r[r.size - 1 - n] >= self.end_factor * base:
            n += 1
        head = r[:r.size - n]
        if n < self.end_points or head.size < self.spread_points:
            return None
        base = float(np.median(head))
        if not np.all((head[1:] <= self.slowdown * base) & (head[1:] >= base / self.slowdown)):
            return None
        tail = r[r.size - n:]
        span = np.maximum(b[r.size - n:] - a[r.size - n:], 1)
        lost = float(np.sum((tail - base) * span))
        if how != RATE and lost < self.min_seconds:
            return None
        ev = {"onset_step": int(a[r.size - n]), "end_step": int(b[-1]), "intervals_before": int(head.size),
              "intervals_after": n, "factor": float(tail.min() / base), "seconds_per_step_before": base,
              "seconds_per_step_last": float(tail[-1])}
        if how == RATE:
            return ev | {"rate_before": 1 / base, "rate_last": float(1 / tail[-1])}
        return ev | {"seconds_lost": lost}

    def _slowdown(self, a, b, r, lr, seg, name, how, src) -> Iterator[Finding]:
        k, gain = stats.change_point(lr)
        if k < 0 or len(set(seg[max(k - 2, 0):k + 2].tolist())) > 1:
            # no split, or one within a record of a resume or launch start (a launch's last interval holds its end:
            # a checkpoint, a shutdown): a restarted job on other hardware, another launch's pace, is no drop
            return
        before, after = float(np.median(r[:k])), float(np.median(r[k:]))
        n_after = r.size - k
        sep = float(np.mean(r[k:] > before))
        if after < self.slowdown * before or min(k, n_after) < max(self.min_points, self.min_share * r.size) \
                or sep < self.separation or (how != RATE and after - before < self.min_added):
            return
        ev = {"onset_step": int(a[k]), "end_step": int(b[-1]), "seconds_per_step_before": before,
              "seconds_per_step_after": after, "factor": after / before, "intervals_after": int(n_after),
              "fraction_after_above_before_median": sep, "explained_variance": gain, "measured_from": how}
        yield Finding.of(self, severity="warning", step=int(a[k]), step_end=int(b[-1]), series=name, evidence=ev,
                         sources=src, summary=(f"{name} falls from a median {1 / before:.4g} to a median {1 / after:.4g} "
                                               f"(×{after / before:.2g} slower) from step {a[k]} to the end" if how == RATE else
                                               f"steps slow down from a median {before:.3g} s to a median {after:.3g} s per step "
                                               f"(×{after / before:.2g}) from step {a[k]} to the end"))

    def _stalls(self, run, a, b, r, lr, span, pace, name, how, src, per: int = 1) -> Iterator[Finding]:
        """`per`: iterations each logged step time stands for (`_per_print`); a slow one costs its excess over one
        iteration, and the run's time counts every iteration at the median pace. `pace`: each interval's launch's
        median (`_own_pace`)."""
        sigma = stats.robust_scale(lr - np.log(pace))
        cut = max(np.log(self.stall), self.z * sigma)
        away, note = self._away_from_pauses(run, a, b, name)
        far = (lr - np.log(pace) >= cut) & away  # an evaluation's pause is no stall
        idx = np.flatnonzero(far)
        total = float(np.sum(r * span) + np.sum(pace) * (per - 1))
        lost = float(np.sum((r[idx] - pace[idx]) * span[idx]))
        base = float(np.median(pace[idx])) if idx.size else float(np.median(pace))
        if idx.size < self.min_stalls or total <= 0 or lost < max(self.min_lost * total, self.stall_seconds) \
                or float(np.median(r[idx])) - base < self.min_added or self._pace(far, away) \
                or self._at_eval_period(run, b[idx]):
            return
        stall_steps = b[idx]
        ev = {"first_stall_step": int(stall_steps[0]), "last_stall_step": int(stall_steps[-1]),
              "stalls": int(idx.size), "stall_steps": [int(s) for s in stall_steps[:20]],
              "median_interval_step": float(np.median(np.diff(stall_steps))) if idx.size > 1 else None,
              "seconds_per_step_baseline": base, "seconds_per_step_in_stalls": float(np.median(r[idx])),
              "seconds_lost": lost, "fraction_of_time_lost": lost / total, "measured_from": how, "pauses": note}
        yield Finding.of(self, severity="warning", step=int(a[idx[0]]), step_end=int(stall_steps[-1]), series=name,
                         evidence=ev, sources=src,
                         summary=(f"{idx.size} stalls between steps {stall_steps[0]} and {stall_steps[-1]} run at "
                                  f"a median {ev['seconds_per_step_in_stalls']:.3g} s per step against a median {base:.3g} s, costing "
                                  f"{lost:.3g} s ({lost / total:.0%} of the time); {note}"))


RATE = "logged throughput, as 1/x"
COUNT_WORDS = frozenset({"iter", "iters", "iteration", "iterations", "batch", "batches"})  # a count printed as a value
EVERY_INTERVAL = "evaluations come with every interval, the fast ones too"


def _training_phase(run: Run, points: pl.DataFrame) -> pl.DataFrame:
    """A step time printed on the training loss's records and on other lines too (`epoch 3 training [time: 1.82s,
    train loss: ...]` then `epoch 3 evaluating [time: 0.07s, ...]`): the times of the training records only. The
    other lines time another phase; read as one series, the phases alternate ×25 and look like stalls. Unchanged
    where every time, or none, shares a step with the training loss."""
    loss = run.pick("loss")
    if loss is None or points.height < 4:
        return points
    on = points.filter(pl.col("step").is_in(run.series_named(loss)["step"].implode()))
    return on if 2 <= on.height < points.height else points


def _source(got: PerStep, a: np.ndarray, b: np.ndarray) -> dict:
    """The rows a finding read: for wall stamps, with how they were priced (`PerStep.priced`), so that the app's
    step-time chart (`queries.app_step_time`) draws the very intervals judged."""
    wall = not got.how.startswith("logged")
    return {"table": "scalars", "series": got.name, "column": "wall_time" if wall else "value",
            "step_min": int(a[0]), "step_max": int(b[-1]), **(got.priced if wall else {})}


def _work_intervals(run: Run, name: str) -> PerStep | None:
    """Seconds per step of series `name` from its wall stamps (`ingest.steptime.seconds_per_step`, the app chart's
    too), each interval priced by the steps of work its records say they did (`_record_work`) and none across a
    launch start (`_launch_edges`); None where nothing can be priced. On an RL run, records on a line axis with no
    length printed are episodes of unknown length: an episode that lasts longer as the agent survives longer is no
    slower step, so their seconds are none (None)."""
    points = run.points(name)
    work, priced = _record_work(run, name, points)
    ordinal = run.on_line_axis(name)
    if work is None and ordinal and reinforcement_learning(run) is not None:
        return None
    edges, on_clock = _launch_edges(run, name)
    got = seconds_per_step(points, work, edges, on_clock)
    if got is None:
        return None
    return PerStep(got.start, got.end, got.seconds, got.segment, name, "wall_time / step between logged points",
                   got.launch, got.span, {"priced_by": priced, "launch_edges": edges,
                                          "edges_on": "wall_time" if on_clock else "step"})


def _record_work(run: Run, name: str, points: pl.DataFrame) -> tuple[tuple[np.ndarray, np.ndarray] | None, str | None]:
    """`ingest.steptime.record_work` for series `name`'s records on an ordinal axis (DECISIONS §2), from the length
    each line prints (an RL episode's `Steps: 8019`, `record_lengths`) or its printed counters; and what priced
    them (`lengths:SERIES_ID`, `counters`), the app's way to the same pricing. (None, None) on a logged step axis."""
    row = run.meta.filter(pl.col("name") == name)
    if not row.height or not bool(row["ordinal"].fill_null(False)[0]):
        return None, None
    steps = points["step"].to_list()
    for other, sid in run.meta.filter(pl.col("ordinal").fill_null(False) & (pl.col("name") != name)).select(
            "name", "series_id").iter_rows():
        if not set(words(other)) <= LENGTH_WORDS:
            continue
        f = run.series_named(other)
        lengths = record_lengths({other: dict(zip(f["step"].to_list(), f["value"].to_list()))}, steps)
        if lengths is not None:
            return record_work([], lengths), f"lengths:{int(sid)}"
    printed = run.counters(name, steps)
    work = record_work([printed.get(int(s), (None, None)) if s is not None else (None, None) for s in steps])
    return work, None if work is None else "counters"


def _launch_edges(run: Run, name: str) -> tuple[list[float], bool]:
    """Where each launch after the first begins (`Run.launch_starts`), as the wall times of those records where
    every one has a stamp (True), else as steps (False): a counter that starts again repeats its steps, the clock
    does not."""
    starts = run.launch_starts(name)
    if not starts:
        return [], True
    walls = run.series_named(name).filter(pl.col("step").is_in(list(starts)))["wall_time"]
    if walls.len() == len(starts) and not walls.null_count():
        return sorted(float(w) for w in walls.to_list()), True
    return [float(x) for x in starts], False


def _own_pace(r: np.ndarray, launch: np.ndarray) -> np.ndarray:
    """Each interval's baseline: the median seconds per step of the launch it belongs to. Launches appended to one
    log (another configuration, another machine) keep their own pace: a launch ×4 slower than the next is no stall."""
    pace = np.empty_like(r, dtype=float)
    for k in np.unique(launch):
        pace[launch == k] = float(np.median(r[launch == k]))
    return pace


def _launch_of(run: Run, name: str, steps: np.ndarray) -> np.ndarray:
    """The launch each of `steps` of series `name` belongs to (0, 1, ...; `Run.launch_starts`): one launch's pace is
    never compared with another's (another configuration, another machine)."""
    return np.searchsorted(np.asarray(run.launch_starts(name), dtype=np.int64), steps, side="right")


def _is_clock(values: np.ndarray) -> bool:
    """Values that never fall and grow at most logged points: elapsed time, not time per step (a clock printed to
    0.1 min repeats itself between steps shorter than that). Measured step times scatter (the deepspeech.pytorch
    slowdown falls at 4 of its 16 steps); a clock, even an excerpt of one that grows ×1.2, never does. A smooth ramp
    of step times read this way is missed, never a false slowdown."""
    d = np.diff(values)
    return values.size >= 3 and bool(np.all(d >= 0)) and float(np.mean(d > 0)) >= 0.5


def _clock_restarts(values: np.ndarray) -> np.ndarray:
    """Where an elapsed-time column starts again (a resume or relaunch that resets the clock, Ultralytics'
    cumulative `time` after a restart): the points it falls at, when it falls at `CLOCK_RESTARTS` of its intervals
    or fewer and grows between them. Step times that scatter fall at many points: none."""
    d = np.diff(values)
    falls = np.flatnonzero(d < 0) + 1
    if not falls.size or falls.size > max(1, CLOCK_RESTARTS * d.size):
        return np.array([], dtype=np.int64)
    pieces = [p for p in np.split(values, falls) if p.size >= 3]
    return falls if pieces and all(_is_clock(p) for p in pieces) else np.array([], dtype=np.int64)


CLOCK_RESTARTS = 0.02  # a clock restarts at a resume or relaunch: a few in a log, never one interval in fifty


def _seconds_per_unit(name: str) -> float:
    """Seconds in one unit of a step-time series, by the unit its name carries (`time_ms`, `ms/batch`: 1e-3)."""
    from ingest.roles import words

    return 1e-3 if "ms" in words(name) else 1.0
