"""loss_spike: isolated jumps of the training loss far above its local level."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import ClassVar

import dataclasses
import math

import numpy as np
import polars as pl

from forensics.judge import stats
from forensics.judge.detectors.base import (MECHANISM, POLICY_WORDS, VALUE_WORDS, reinforcement_learning, src,
                                            too_short)
from forensics.judge.detectors.masked_nonfinite import zeroed
from forensics.judge.detectors.nan_loss import stays_nonfinite
from forensics.judge.findings import Finding, plain
from forensics.judge.numbers import count, ratio
from forensics.judge.stats import SpikeRule
from forensics.judge.run import Run


@dataclass(frozen=True)
class LossSpike:
    """The loss jumps far above its recent level and comes back.

    Detects: a step whose loss is at least `z` robust sigmas (of the trailing `window` points, on a log scale for a
    positive loss) and `min_ratio` of its level above the trailing median, back within `recover` points (else a level
    shift: divergence); past `max_spikes`, only those `crowd_z_factor` × the crowd's median z (`stats.SpikeRule`,
    shared with the engine's spike list and bad_batch). A non-finite loss of at most `recover` points between finite
    ones of the same launch is a spike of unbounded height, from `min_points_nonfinite` points, unless the loss stays
    non-finite in the end (`nan_loss.stays_nonfinite`: its blips are that NaN's story).
    A finite spike must also undo at least `min_undo` of the progress made by then (from the start level), unless it
    stands `orders` × its positive trailing level (a log that began orders of magnitude higher hides no such jump,
    a level printed as 0 gives no ratio); where the `max_window` points before it hold an excursion of ×`heavy`
    (heavy-tailed noise) it must rise `min_over_max` × above the largest one, unless it undoes `undo_always` of the
    progress. An unstable stretch of several peaks that comes back is one spike at its highest, up to `max_episode`
    points and `episode_share` of the series. Where a
    step counter starts again (launches appended to one log, `Run.series_named`), a pass that begins at up to
    `relaunch` × the log's first loss is a new launch starting from its initial loss, not a spike; where the reader
    marked a launch (`Run.launch_starts`), neither is a jump at its start nor one within `relaunch` × its first loss
    read against the launch before.
    Effect size first, at any length (from `glaring_points` points, where the statistical rule cannot see or misses
    it): a positive loss at least `glaring` × the median of its `glaring_span` neighbours on each side and
    as far above the line through their logs (their trend) as `glaring_spread` × their largest distance from it, the
    next point back within ×2 of that median, with a point before it (the log's second record only `glaring` × its
    one predecessor too: a high first record is the untrained level), the same undo, heavy-tail (against the log's other records over their neighbours' median, before or
    after it, within `max_window`) and launch guards. A point `orders` × both its neighbours is one from three points,
    under the undo and launch guards alone: no batch noise rises three orders of magnitude for one record; two (`orders_back`)
    where it also stands above every record before it, the untrained level included.
    One-record jumps under `heavy` × their level, `tail_crowd` or more of them within ×`tail_alike` of one another's
    height, are the batches' own tail (a long per-step log shows a hard batch now and then), not spikes.
    A long log (`long_log` points or more) is judged against its own scatter, the 99th percentile of each point over
    its trailing median: its spikes (no crowd limit) stand `tail_margin` times as far out on a log scale, and the undo
    share guards only those under `low_level` of the start. There, where no spike is told, `recurrent` or more jumps
    of ×`recurrent_ratio` beyond that scatter that come back are one finding, whatever each undoes. In an RL run only
    a value objective's blow-ups are read (`_value_blowups`).
    A bump, where no spike was found: a positive loss that rises from its level (the median of up to five points
    ending at the last one within ×`bump_back` of the running minimum) to `min_ratio` above it (×2) and comes back
    within ×`bump_back` of it, staying under ×1.5 of it to the end, the whole excursion at most `bump_share` of the
    log and from `min_points` points, within one launch, while the validation loss climbs ×`bump_val` above its last evaluation before
    and is back within ×1.15 of it at its last, and the LR does not rise over it (a warm restart). Without that
    witness, a bump of ×`glaring` its level (knocked back that far, the loss relearns over tens of records) that
    undoes `min_undo` of the progress made, higher than the log's own excursions elsewhere (the glaring spike's
    heavy-tail guard): its size alone names it.
    A logged 0.0 that hides a NaN (`masked_nonfinite.zeroed`) is that NaN: a jump followed by it never came back
    (divergence's), and it is no NaN the log shows between finite losses.
    Why: spikes usually come before divergence; the first one is often the earliest cause (a bad batch).
    Evidence: step, loss, trailing median (of logs, on a positive loss) and sigma, z, ratio to the median, window
    and the plain median of its logged values (what the summary quotes), recovery length, the start level and the
    share of the progress undone.
    False alarms: 0 of the 171 healthy runs it could check (at most 1.8% at 95% confidence; benchmarks/calibrate.py);
    the glaring rule: 0 of the 92 healthy real runs of the dev sets (largest healthy ×2.6; benchmarks/false_alarms.py);
    with the batches' tail set aside, and the bump: 0 of the 120 healthy real runs of the eleven development sets.
    The second record's spike: 0 new claims on the 40 healthy shared runs and the 99 healthy runs of set14/16/17.
    Two orders above both neighbours and every record before (`orders_back`): 0 new claims on the 40 healthy shared
    runs and the 292 healthy runs of set12-18. A loss of both signs sized against its median magnitude
    (`_signed_glaring`): 0 new claims on the 40 healthy shared runs and the 144 healthy runs of set12-21 (first labels).
    The bump by its size alone: 0 new claims on the 40 healthy shared runs and the 119 healthy restored runs of
    set12-13, 16-19 and 21-22 (first labels).
    """

    kind: ClassVar[str] = "loss_spike"
    stage: ClassVar[int] = MECHANISM
    reads_curve: ClassVar[bool] = True  # judges the shape of the training-loss curve
    judges_rl: ClassVar[bool] = True  # in an RL run, only a value objective's blow-ups (`_value_blowups`)
    reads_parts: ClassVar[bool] = True  # each part of a loss logged only as parts (`Run.loss_parts`)
    requires: ClassVar[tuple[str, ...]] = ("loss",)
    spike: SpikeRule = field(default_factory=SpikeRule)  # what a spike is: the analysis's one rule (`--set spike.z=`)
    min_points: int = 10  # the statistical rule needs a baseline window's worth of points
    min_points_nonfinite: int = 3  # a finite point, the blip, a finite point
    min_undo: float = 0.6  # a finite spike throws the run back more than half the way it came
    max_window: int = 100  # where the points before it hold an excursion ...
    heavy: float = 3.0  # ... of ×3 above their local level (heavy-tailed noise), the spike ...
    min_over_max: float = 5.0  # ... rises ×5 above the largest such excursion
    undo_always: float = 1.0  # a spike that undoes all the progress made is one whatever the noise
    start_points: int = stats.START_POINTS  # the initial level: the median of the first this many points
    relaunch: float = 1.5  # a pass of a restarting counter that begins within ×1.5 of the first loss: a new launch
    glaring_points: int = 5  # a glaring spike speaks from this many points, one or more on each side of it
    glaring: float = 5.0  # a point ×5 the median of its neighbours ...
    glaring_spread: float = 3.0  # ... and 3 × their spread above their trend (log scale): far outside it ...
    glaring_span: int = 3  # ... neighbours: up to this many points on each side
    orders: float = 1e3  # a point three orders of magnitude above both its neighbours is a spike whatever the noise
    orders_back: float = 1e2  # ... two, where it also stands above every record before it (the untrained level)
    bump_back: float = 1.3  # a bump: from a level (the last point within ×1.3 of the running minimum) ...
    bump_share: float = 1 / 3  # ... up to ×2 that level and back within ×1.3 of it, over at most a third of the log ...
    bump_val: float = 1.3  # ... while the validation loss rises ×1.3 over its last evaluation before and comes back
    tail_crowd: int = 3  # this many one-record jumps under ×`heavy` ...
    tail_alike: float = 1.5  # ... each within ×1.5 of another's height: the batches' own tail, not events
    long_log: int = 1000  # from this many points a log's own scatter is measured: its 99th percentile excursion ...
    tail_margin: float = 2.0  # ... a spike stands twice as far out on a log scale (×1.2 scatter: ×1.44; ×2.15: ×4.6)
    low_level: float = 0.05  # in a long log, a spike that undoes little and peaks under 5% of the start is no event
    recurrent: int = 3  # this many jumps ...
    recurrent_ratio: float = 3.0  # ... each ×3 its trailing median and back: recurrent spikes, whatever they undo
    blowup: float = 100.0  # an RL value objective ×100 its median and back under ×10 at the next log, `recurrent` times

    def unavailable(self, run: Run) -> str | None:
        return too_short(run, "loss", self.min_points_nonfinite)

    def _relaunched(self, s: dict, launches: np.ndarray, steps: np.ndarray, values: np.ndarray) -> bool:
        """Whether a spike episode is a launch appended to the log starting again (`Run.launch_starts`): it begins
        where a launch does, or its trailing window reaches back into the launch before and it stands no higher than
        `relaunch` × the new launch's first loss (the new launch's own descent, read against the last one's level)."""
        if s["start_step"] in launches:
            return True
        crossed = launches[(launches > s["window_start"]) & (launches <= s["start_step"])]
        if crossed.size == 0:
            return False
        at = values[(steps >= crossed[-1]) & np.isfinite(values)]
        return bool(at.size) and s["value"] <= self.relaunch * float(at[0])

    def _glaring(self, values: np.ndarray) -> list[dict]:
        """The glaring single-point spikes of the docstring, by effect size alone: index, value, the neighbours'
        median and highest value, the window's first and last index."""
        y = np.asarray(values, dtype=float)
        if y.size < 3 or not np.all(np.isfinite(y)):
            return []
        if not np.all(y > 0):
            return self._signed_glaring(y)
        spans = [self._neighbours(i, y.size) for i in range(y.size)]
        medians = np.array([float(np.median(y[at])) for at in spans])
        ratios = y / medians  # each point over its neighbours' median: the log's own excursions
        out = []
        for i in range(1, y.size - 1):
            at, med = spans[i], float(medians[i])
            hit = {"index": i, "median": med, "highest": float(np.max(y[at])), "first": int(at[0]), "last": int(at[-1])}
            beside = max(y[i - 1], y[i + 1])
            # orders of magnitude above both neighbours, or two and above every record before it (all the progress
            # undone, the untrained level passed): no noise reaches that
            if y[i] >= self.orders * beside or (y[i] >= self.orders_back * beside and y[i] > float(np.max(y[:i]))):
                out.append(hit | {"log_excess": math.log(y[i] / beside), "log_spread": 0.0})
                continue
            # the log's second record: only with its one predecessor as far under it (a high first record is the
            # untrained level, not a level the second jumped from)
            if (i < 2 and not y[i] >= self.glaring * y[i - 1]) or y.size < self.glaring_points or not (
                    y[i] >= self.glaring * med and y[i + 1] <= 2 * med):
                continue
            others = np.r_[ratios[max(0, i - self.max_window):i], ratios[i + 1:i + 1 + self.max_window]]
            if others.max() >= self.heavy and ratios[i] < self.min_over_max * others.max():
                continue  # heavy-tailed noise: no higher than the log's own excursions, before or after it
            # their spread around their own trend (a line through their logs: a run that learns falls steeply)
            slope, icpt = np.polyfit(at, np.log(y[at]), 1)
            spread = float(np.max(np.abs(np.log(y[at]) - (slope * at + icpt))))
            excess = math.log(y[i]) - (slope * i + icpt)
            if excess >= self.glaring_spread * spread and excess >= math.log(self.glaring):
                out.append(hit | {"log_excess": excess, "log_spread": spread})
        return out

    def _neighbours(self, i: int, n: int) -> np.ndarray:
        """The indices of point `i`'s neighbours in a log of `n` points: up to `glaring_span` on each side."""
        return np.r_[np.arange(max(0, i - self.glaring_span), i), np.arange(i + 1, min(n, i + self.glaring_span + 1))]

    def _signed_glaring(self, y: np.ndarray) -> list[dict]:
        """`_glaring` for a loss that reaches 0 or below (a sum of terms, a negative log-likelihood's bound), where a
        ratio to a neighbour near 0 means nothing: a record `orders_back` × the log's median magnitude, above every
        record before it, between neighbours back within `glaring` × that magnitude."""
        scale = float(np.median(np.abs(y)))
        out = []
        for i in range(1, y.size - 1 if scale > 0 else 1):
            if y[i] >= self.orders_back * scale and y[i] > float(np.max(y[:i])) \
                    and max(abs(y[i - 1]), abs(y[i + 1])) <= self.glaring * scale:
                at = self._neighbours(i, y.size)
                out.append({"index": i, "median": float(np.median(y[at])), "highest": float(np.max(y[at])),
                            "first": int(at[0]), "last": int(at[-1]), "log_excess": math.log(y[i] / scale),
                            "log_spread": 0.0, "scale": scale})
        return out

    def check(self, run: Run) -> Iterator[Finding]:
        rl = reinforcement_learning(run)
        if rl is not None:
            yield from self._value_blowups(run, rl.objectives)
            return
        steps, logged = run.arrays("loss")
        hidden = zeroed(run)  # a 0.0 that hides a NaN is no level a spike came back to
        values = np.where(hidden, np.nan, logged) if hidden.any() else logged
        glaring = list(self._glaring_findings(run, steps, values))
        yield from glaring
        spiked = bool(glaring)
        if int(np.isfinite(values).sum()) >= self.min_points:
            found = run.spikes(run.pick("loss"), self.spike)  # shared with the engine's spike list
            positive = bool(np.all(values[np.isfinite(values)] > 0))
            excursion = np.full(values.size, np.nan)  # each point over its trailing local level
            if positive:
                with np.errstate(divide="ignore", invalid="ignore"):
                    logs = np.where(np.isfinite(values), np.log(np.where(values > 0, values, 1.0)), np.nan)
                level, _ = stats.rolling_baseline(logs, self.spike.window)
                excursion = np.exp(logs - level)
            scatter = self._scatter(excursion) if positive else None
            if scatter is not None:  # a long log: its spikes are those beyond its own scatter, not a crowd's z
                ok = np.isfinite(values)
                raw = stats.spikes(steps[ok], values[ok], dataclasses.replace(self.spike, max_spikes=int(ok.sum())))
                found = raw.filter(pl.col("value") >= scatter ** self.tail_margin * pl.col("baseline"))
            start = stats.start_level(values, self.start_points)
            reference = np.isfinite(values)  # the points a spike is compared with: not other spikes
            if hidden.any():  # the first record after the spike a hidden NaN: it never came back
                after = [int(np.searchsorted(steps, b, side="right")) for b in found["end_step"]]
                found = found.filter(pl.Series([i >= steps.size or not hidden[i] for i in after], dtype=pl.Boolean))
            for a, b in zip(found["start_step"], found["end_step"]):
                reference &= ~((steps >= a) & (steps <= b))
            passes = run.pass_starts(run.pick("loss"))
            first = float(values[np.isfinite(values)][0])  # the loss the log began with: where a new launch starts
            launches = np.asarray(run.launch_starts(run.pick("loss")), dtype=np.int64)
            kept = []
            for s in found.iter_rows(named=True):  # one row per spike episode
                if s["start_step"] in passes and s["value"] <= self.relaunch * max(first, start):
                    continue  # a counter that starts again at the loss the log began with: a new launch, no spike
                if self._relaunched(s, launches, steps, values):
                    continue
                progress = start - s["baseline"]
                s["start_level"] = start
                s["undone"] = (s["value"] - s["baseline"]) / progress if progress > 0 else None
                orders = s["baseline"] > 0 and s["ratio"] >= self.orders  # over a level printed as 0: no ratio
                if s["undone"] is not None and s["undone"] < self.min_undo and not orders \
                        and (scatter is None or s["value"] < self.low_level * start):
                    continue  # the noise's tail near zero (a long log's scatter measures it, but not at a few % of
                    # the start: there a jump undoes nothing a user would act on)
                before = excursion[(steps < s["start_step"]) & reference & np.isfinite(excursion)][-self.max_window:]
                s["recent_max_excursion"] = float(before.max()) if before.size else None
                if (s["recent_max_excursion"] is not None and s["recent_max_excursion"] >= self.heavy
                        and s["ratio"] < self.min_over_max * s["recent_max_excursion"]
                        and (s["undone"] is None or s["undone"] < self.undo_always)):
                    continue  # heavy-tailed noise: no higher than its own recent extremes
                # The sentence quotes the plain median of the window's logged values (the baseline itself is a
                # median of logs: between two middle values it is their geometric mean, not what a user computes).
                window = values[(steps >= s["window_start"]) & (steps <= s["window_end"]) & np.isfinite(values)]
                median = float(np.median(window)) if window.size else s["baseline"]
                s["window_median"] = median
                if scatter is not None and s["value"] < scatter ** self.tail_margin * median:
                    continue  # within a long per-batch log's own scatter
                kept.append(s)
            told = list(self._told(run, self._beyond_the_tail(kept)))
            if not told:
                told = list(self._recurrent(run, steps, values, scatter, set(passes) | set(launches.tolist())))
            spiked = spiked or bool(told)
            yield from told
            if not spiked and not found.height:
                bump = self._bump(run, steps, values)
                if bump is not None:
                    yield bump
        starts = np.asarray(run.launch_starts(run.pick("loss")), dtype=np.int64)
        name = run.pick("loss")
        died = stays_nonfinite(logged)  # a NaN the loss never recovers from: its blips are nan_loss's one story
        for a, b in stats.runs_of(~np.isfinite(logged)):  # NaNs logged as such: a hidden one is masked_nonfinite's
            if died or a == 0 or b == values.size - 1 or b - a + 1 > self.spike.recover or hidden[a - 1] or hidden[b + 1]:
                continue  # at the start, to the end (nan_loss), too long to be a blip, or beside a hidden NaN
            if np.any((starts > steps[a - 1]) & (starts <= steps[b + 1])):
                continue  # one launch ends or begins non-finite: the finite value after it is another launch's
            ev = {"step": int(steps[a]), "value": plain(values[a]), "end_step": int(steps[b]),
                  "previous_value": float(values[a - 1]), "next_value": float(values[b + 1]),
                  "nonfinite_points": int(b - a + 1)}
            yield Finding.of(self, severity="warning", step=int(steps[a]), step_end=int(steps[b]),
                             series=run.pick("loss"), evidence=ev, sources=(src(run, "loss", steps[a - 1:b + 2]),),
                             summary=(f"loss is {ev['value']} at {run.printed_span(name, steps[a])} between {values[a - 1]:.4g} and "
                                      f"{values[b + 1]:.4g}: a non-finite spike that recovers"))

    def _value_blowups(self, run: Run, objectives: tuple[str, ...]) -> Iterator[Finding]:
        """An RL run's losses chase moving targets and need not fall, but a value objective (a regression toward
        returns) that jumps ×`blowup` its median and is back under ×10 of it at the next log, `recurrent` times or
        more, is blowing up on some batches (exploding returns, a bad target): what an expert flags in any agent.
        An agent's only loss, no policy objective named, is a value objective too (a Q-learner's TD loss), unless it
        goes negative: a regression toward returns is a squared or absolute error, never below 0, where a policy
        objective (a GRPO or policy-gradient loss logged as plain `loss`) swings around 0 and its |median| is no level."""
        from ingest.roles import words

        value = [n for n in objectives if set(words(n)) & VALUE_WORDS]
        if not value and len(objectives) == 1 and not set(words(objectives[0])) & POLICY_WORDS:
            value = list(objectives)
        for name in value:
            f = run.series_named(name)
            s, y = f["step"].to_numpy(), f["value"].fill_null(np.nan).to_numpy()
            ok = np.isfinite(y)
            if np.any(y[ok] < 0):
                continue  # below 0: no regression error (a policy objective), its blow-ups have no level to read
            s, y = s[ok], y[ok]
            if y.size < self.min_points or float(np.median(y)) <= 0:
                continue
            med = float(np.median(y))
            hits = [i for i in range(y.size - 1) if y[i] >= self.blowup * med and y[i + 1] < 10 * med]
            if len(hits) < self.recurrent:
                continue
            top = max(hits, key=lambda i: y[i])
            ev = {"step": int(s[hits[0]]), "spikes": len(hits), "steps": [int(s[i]) for i in hits][:20],
                  "values": [float(y[i]) for i in hits][:20], "median": med, "highest": float(y[top]),
                  "highest_step": int(s[top]), "objective": name, "reinforcement_learning": True}
            yield Finding.of(self, severity="warning", step=int(s[hits[0]]), step_end=int(s[hits[-1]]), series=name,
                             evidence=ev, sources=(src(run, name, s[hits]),),
                             summary=(f"{name} jumps to ×{y[hits].min() / med:.0f}-×{y[top] / med:.0f} its median "
                                      f"{med:.4g} at {count(len(hits), 'log')} from step {s[hits[0]]} to "
                                      f"{s[hits[-1]]} (highest {y[top]:.4g} at step {s[top]}), each back under ×10 "
                                      f"at the next log: the value objective blows up again and again"))
            return

    def _scatter(self, excursion: np.ndarray) -> float | None:
        """A long log's own scatter: the 99th percentile of each point over its trailing level (`long_log` points or
        more), or None for a shorter one, whose tail is too few points to measure."""
        ex = excursion[np.isfinite(excursion)]
        return float(np.quantile(ex, 0.99)) if ex.size >= self.long_log else None

    def _recurrent(self, run: Run, steps: np.ndarray, values: np.ndarray, scatter: float | None,
                   starts: set[int]) -> Iterator[Finding]:
        """Recurrent spikes, in a long log (`long_log` points): `recurrent` or more jumps of ×`recurrent_ratio` their
        trailing median (and beyond the log's own scatter by `tail_margin` on a log scale, in a log where ×3 jumps are
        rarer than one record in a hundred, each above `low_level` of the start) that come back (`stats.spikes`, no crowd limit), none at a launch's
        start. Each alone may undo little of a long descent; together they are what a user sees in the curve."""
        ok = np.isfinite(values) & (values > 0)
        if ok.sum() < self.min_points or not np.all(values[np.isfinite(values)] > 0) \
                or scatter is None or scatter >= self.recurrent_ratio:
            # a short log's tail is unmeasured; a long one whose every hundredth record jumps ×3 has such jumps for
            # its noise (heavy-tailed batches)
            return
        raw = stats.spikes(steps[ok], values[ok], dataclasses.replace(self.spike, max_spikes=int(ok.sum())))
        floor = max(self.recurrent_ratio, scatter ** self.tail_margin if scatter is not None else 0.0)
        start = stats.start_level(values, self.start_points)  # jumps under `low_level` of it undo nothing a user sees
        hits = [s for s in raw.iter_rows(named=True) if s["value"] >= floor * s["baseline"]
                and s["value"] >= self.low_level * start and s["start_step"] not in starts]
        if len(hits) < self.recurrent:
            return
        heights = np.array([s["value"] / s["baseline"] for s in hits])
        top = hits[int(np.argmax(heights))]
        ev = {"step": hits[0]["step"], "spikes": len(hits), "steps": [s["step"] for s in hits][:20],
              "ratios": [round(float(h), 2) for h in heights][:20], "median_ratio": float(np.median(heights)),
              "highest_step": top["step"], "highest_value": top["value"], "highest_median": top["baseline"],
              "scatter_q99": scatter, "recurrent": True}
        yield Finding.of(self, severity="warning", step=hits[0]["step"], step_end=hits[-1]["end_step"],
                         series=run.pick("loss"), evidence=ev,
                         sources=(src(run, "loss", [hits[0]["window_start"], hits[-1]["end_step"]]),),
                         summary=(f"loss jumps to ×{heights.min():.1f}-×{heights.max():.1f} its trailing median at "
                                  f"{count(len(hits), 'record')} from step {hits[0]['step']} to {hits[-1]['step']} "
                                  f"(highest {top['value']:.4g} at step {top['step']} over {top['baseline']:.4g}), "
                                  f"each back within {count(self.spike.recover, 'point')}: recurrent spikes"
                                  + (f", beyond the log's own scatter (99% of its records within ×{scatter:.2g} of "
                                     f"their level)" if scatter is not None else "")))

    def _bump(self, run: Run, steps: np.ndarray, values: np.ndarray) -> Finding | None:
        """The bump of the docstring: the highest rise above the running minimum that comes back, with the
        validation loss rising and falling beside it."""
        keep = np.isfinite(values)
        s, y = steps[keep], values[keep]
        n = y.size
        if n < self.min_points or not np.all(y > 0):
            return None
        low = np.minimum.accumulate(y)
        p = 1 + int(np.argmax(y[1:] / low[:-1]))  # the highest point over the lowest one before it
        near = np.flatnonzero(y[:p] <= self.bump_back * low[p - 1])
        a = int(near[-1])
        level = float(np.median(y[max(0, a - 4):a + 1]))
        back = np.flatnonzero(y[p:] <= self.bump_back * level)
        if not (y[p] >= (1 + self.spike.min_ratio) * level and back.size):
            return None
        b = p + int(back[0])
        if b - a > self.bump_share * n or np.any(y[b:] > 1.5 * level):
            return None
        starts = np.asarray(run.launch_starts(run.pick("loss")), dtype=np.int64)
        if np.any((starts > s[a]) & (starts <= s[b])):
            return None  # a launch starting again: its own descent, not a bump of the one before
        if run.has("lr"):
            ls, lv = run.arrays("lr")
            over = lv[np.isfinite(lv) & (ls >= s[max(0, a - 4)]) & (ls <= s[b])]  # from the level's first point
            if over.size and float(np.max(over)) > 1.5 * float(over[0]):
                return None  # the LR rose over it: a warm restart, the schedule's own doing
        ev = {"step": int(s[p]), "value": float(y[p]), "end_step": int(s[b]), "start_step": int(s[a]),
              "window_median": level, "ratio": float(y[p]) / level, "back_value": float(y[b]),
              "recovery_points": int(b - p), "episode_points": int(b - a), "bump": True}
        at = (lambda *steps: run.printed_span(run.pick("loss"), *steps))  # noqa: E731 - the file's steps
        said = (f"loss climbs from median {level:.4g} of {at(s[max(0, a - 4)], s[a])} to {y[p]:.4g} at {at(s[p])} "
                f"({ratio(y[p] / level)}) and is back to {y[b]:.4g} at {at(s[b])}, {count(b - a, 'record')} in all")
        witness = self._bump_witness(run, s[a], s[b])
        if witness is not None:
            vs, wit = witness
            return Finding.of(self, severity="warning", step=int(s[p]), step_end=int(s[b]), series=run.pick("loss"),
                              evidence=ev | wit, sources=(src(run, "loss", s[max(0, a - 4):b + 1]),
                                                          src(run, "val_loss", vs)),
                              summary=(f"{said}; the validation loss rises with it, {wit['val_before']:.4g} at step "
                                       f"{wit['val_before_step']} to {wit['val_peak']:.4g} at step "
                                       f"{wit['val_peak_step']}, and comes back to {wit['val_last']:.4g} at step "
                                       f"{wit['val_last_step']}: an unstable stretch that recovered"))
        # by its size alone: ×`glaring` its level, undoing `min_undo` of the progress made, higher than the log's
        # own excursions elsewhere (the heavy-tail guard of the glaring spike)
        start = stats.start_level(y, self.start_points)
        undone = (y[p] - level) / (start - level) if start > level else None
        if y[p] < self.glaring * level or (undone is not None and undone < self.min_undo):
            return None
        level_at, _ = stats.rolling_baseline(np.log(y), self.spike.window)
        excursion = np.exp(np.log(y) - level_at)  # each point over its trailing level
        others = np.r_[excursion[:a], excursion[b + 1:]]
        others = others[np.isfinite(others)]
        worst = float(np.max(others)) if others.size else 1.0
        if worst >= self.heavy and y[p] / level < self.min_over_max * worst:
            return None
        return Finding.of(self, severity="warning", step=int(s[p]), step_end=int(s[b]), series=run.pick("loss"),
                          evidence=ev | {"start_level": start, "undone": undone, "largest_other_excursion": worst},
                          sources=(src(run, "loss", s[max(0, a - 4):b + 1]),),
                          summary=(f"{said}: an unstable stretch that recovered, "
                                   f"{'higher than the log began' if undone is None or undone >= 1 else 'undoing ' + format(undone, '.0%') + ' of the progress made'}"))

    def _bump_witness(self, run: Run, first: int, last: int) -> tuple[np.ndarray, dict] | None:
        """The validation loss's rise and return over a bump from step `first` to `last`: its steps and evidence,
        or None where it does not climb ×`bump_val` over its last evaluation before and end back within ×1.15."""
        if not run.has("val_loss"):
            return None
        vs, vv = run.arrays("val_loss")
        ok = np.isfinite(vv)
        vs, vv = vs[ok], vv[ok]
        before, during = vv[vs <= first], vv[(vs > first) & (vs <= last)]
        if not (before.size and during.size and vv[-1] > 0 and vs[-1] >= last
                and during.max() >= self.bump_val * before[-1] and vv[-1] <= 1.15 * before[-1]):
            return None
        return vs, {"witness": run.pick("val_loss"), "val_before": float(before[-1]),
                    "val_before_step": int(vs[vs <= first][-1]), "val_peak": float(during.max()),
                    "val_peak_step": int(vs[(vs > first) & (vs <= last)][int(np.argmax(during))]),
                    "val_last": float(vv[-1]), "val_last_step": int(vs[-1])}

    def _beyond_the_tail(self, spikes: list[dict]) -> list[dict]:
        """The spikes a user would act on: one-record jumps under `heavy` × their level, `tail_crowd` or more of them
        within ×`tail_alike` of one another's height, are the batches' own tail (a hard batch now and then, as a long
        per-step log shows them), not events; every other spike stays."""
        def height(s: dict) -> float | None:  # a one-record jump's height over its level, when under `heavy`
            h = s["value"] / s["window_median"] if s["window_median"] > 0 else math.inf
            return h if s["end_step"] == s["step"] and h < self.heavy else None

        heights = np.array([h for h in map(height, spikes) if h is not None])

        def crowded(s: dict) -> bool:
            h = height(s)
            return h is not None and int(np.sum((heights <= h * self.tail_alike)
                                                & (heights >= h / self.tail_alike))) >= self.tail_crowd

        return [s for s in spikes if not crowded(s)]

    def _told(self, run: Run, spikes: list[dict]) -> Iterator[Finding]:
        name = run.pick("loss")
        for s in spikes:
            median = s["window_median"]
            yield Finding.of(self, severity="warning", step=s["step"], step_end=s["end_step"],
                             series=run.pick("loss"), evidence=s,
                             sources=(src(run, "loss", [s["window_start"], s["end_step"]]),),
                             summary=(f"loss {s['value']:.4g} at {run.printed_span(name, s['step'])} is {s['z']:.1f} "
                                      f"robust sigmas above the median {median:.4g} of "
                                      f"{run.printed_span(name, s['window_start'], s['window_end'])} "
                                      f"({ratio(s['value'] / median) if median else ratio(s['ratio'])}), "
                                      f"back within {count(s['recovery_points'], 'point')}"
                                      + (f" of the episode's end ({run.printed_span(name, s['start_step'], s['end_step'])})"
                                         if s["end_step"] > s["step"] else "")))

    def _glaring_findings(self, run: Run, steps: np.ndarray, values: np.ndarray) -> Iterator[Finding]:
        """The glaring spikes the statistical rule does not report (too few points for it, or a noise model its
        short window misjudges), under the same undo and launch guards."""
        hits = self._glaring(values)
        if not hits:
            return
        found = (run.spikes(run.pick("loss"), self.spike) if int(np.isfinite(values).sum()) >= self.min_points
                 else None)
        taken = set() if found is None else {int(x) for x in found["step"]}
        start = stats.start_level(values, self.start_points)
        passes = set(run.pass_starts(run.pick("loss")))
        launches = set(run.launch_starts(run.pick("loss")))
        name = run.pick("loss")
        for h in hits:
            i = h["index"]
            step, value = int(steps[i]), float(values[i])
            if step in taken or step in passes or step in launches or int(steps[i + 1]) in passes | launches:
                continue
            progress = start - h["median"]
            undone = (value - h["median"]) / progress if progress > 0 else None
            if undone is not None and undone < self.min_undo:
                continue
            signed = "scale" in h  # a loss that reaches 0 or below: sized against its median magnitude
            ev = {"step": step, "value": value, "window_median": h["median"], "neighbour_max": h["highest"],
                  "ratio": value / h.get("scale", h["median"]), "window_start": int(steps[h["first"]]),
                  "window_end": int(steps[h["last"]]), "next_value": float(values[i + 1]), "start_level": start,
                  "undone": undone, "recovery_points": 1, "glaring": True, "log_excess": h["log_excess"],
                  "log_spread": h["log_spread"]}
            yield Finding.of(self, severity="warning", step=step, step_end=step, series=run.pick("loss"),
                             evidence=ev, sources=(src(run, "loss", steps[h["first"]:h["last"] + 1]),),
                             summary=(f"loss {value:.4g} at {run.printed_span(name, step)} is "
                                      + (f"{ratio(value / h['scale'])} the log's median magnitude {h['scale']:.4g} "
                                         f"(a loss that takes both signs), the median of its neighbours "
                                         f"{h['median']:.4g} " if signed else
                                         f"{ratio(value / h['median'])} the median {h['median']:.4g} of its neighbours ")
                                      + f"({run.printed_span(name, ev['window_start'], ev['window_end'])}, highest "
                                      f"{h['highest']:.4g}), back to {values[i + 1]:.4g} at "
                                      f"{run.printed_span(name, steps[i + 1])}"))
