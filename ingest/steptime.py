"""Seconds per step from a series' wall-clock stamps and the work each record says it did: the one pricing of steps
that the throughput_drop detector judges and the app's step-time chart draws, so the chart shows the intervals the
detector saw."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import polars as pl

from ingest.roles import words

# A record's own length, by the words of the series that prints it beside the loss (an RL episode's `Steps: 8019`)
LENGTH_WORDS = frozenset({"steps", "length", "len", "timesteps", "episode", "ep"})
# An interval whose records' counter moves this many times its usual advance or more holds lines the log does not
# have (an excerpt that leaves out a stretch, a run down and resumed further on): its time is no pace of its steps
GAP = 5.0


class StepTimes(NamedTuple):
    """Intervals between consecutive stamped records of one series, one shape whatever priced them."""
    start: np.ndarray  # the step each interval starts at (as the series shows it)
    end: np.ndarray  # the step it ends at
    seconds: np.ndarray  # seconds per step of work
    segment: np.ndarray  # a new segment after each resume and at each launch: no change point is read across one
    launch: np.ndarray  # the launch each interval belongs to (0, 1, ...): its pace is that launch's own
    span: np.ndarray  # the steps of work the interval covers


def seconds_per_step(points: pl.DataFrame, work: tuple[np.ndarray, np.ndarray] | None = None,
                     launch_edges: list[float] | None = None, edges_on_clock: bool = True) -> StepTimes | None:
    """The step times of one series, `points` (step, wall_time) in write order; None when no interval has its step
    and clock going forward.

    Δwall_time over the steps of work between consecutive records, within one segment: an interval whose step goes
    back (or stays) or whose clock runs backwards is a resume (resumed_run's story, not a slow step), dropped, and a
    new segment starts after it; intervals of zero seconds (two points written with one stamp) measure nothing.
    `work` (`record_work`: which records begin a step of their own, and the steps of work done up to each) prices
    a record by what its line says it did, not by its line number. An interval that spans one of `launch_edges`
    (where each launch after the first begins: wall times with `edges_on_clock`, else steps) holds the time between
    two launches, not steps: dropped. The clock tells which launch an interval belongs to where a counter that
    starts again repeats its steps."""
    if work is not None:
        points = points.filter(pl.Series(work[0]))
    got = stamped_intervals(points)
    if got is None:
        return None
    a, b, r, seg, wa, wb = got
    launch = np.zeros(r.size, dtype=np.int64)
    if launch_edges:
        edges = np.sort(np.asarray(launch_edges, dtype=float))
        at_a, at_b = (wa, wb) if edges_on_clock else (a, b)
        launch = np.searchsorted(edges, at_b, side="right")
        keep = np.searchsorted(edges, at_a, side="right") == launch
        a, b, r, seg, launch = a[keep], b[keep], r[keep], (seg * (edges.size + 1) + launch)[keep], launch[keep]
    if work is None:
        return StepTimes(a, b, r, seg, launch, np.maximum(b - a, 1).astype(float))
    at = dict(zip(points["step"].to_list(), work[1].tolist()))
    span = np.array([at[int(y)] - at[int(x)] for x, y in zip(a, b)], dtype=float)
    keep = span < GAP * np.median(span) if span.size else np.ones(0, dtype=bool)  # no gap of the log read as steps
    return StepTimes(a[keep], b[keep], (r * np.maximum(b - a, 1) / span)[keep], seg[keep], launch[keep], span[keep])


def record_work(counters: list[tuple[int | None, int | None]],
                lengths: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """Which records of an ordinal series (DECISIONS §2) begin a step of their own, and the steps of work done up to
    each, from the (epoch, batch) each record's line prints (`counters`, in write order) or the length each record
    says it covered (`lengths`, `record_lengths`): a record is one unit unless its line says more. The printed batch
    counter's advance within an epoch (an excerpt whose elided lines hide dozens of steps between two records). A
    record that prints the counter of the one before is that step printed again (a line per rank, a progress bar
    redrawn): its time belongs to the next step. Records that print an epoch and no batch, one per epoch: the
    epoch counter's advance (a log of one line per epoch whose excerpt skips epochs). None where records are the unit
    (no counter on most lines)."""
    if lengths is not None:
        return np.ones(len(lengths), dtype=bool), np.cumsum(lengths)
    if sum(c[1] is not None for c in counters) < 0.9 * len(counters):
        epochs = [c[0] for c in counters]
        if not epochs or sum(e is not None for e in epochs) < 0.9 * len(epochs) \
                or len(set(epochs)) < 0.9 * len(epochs):
            return None
        moves = [1.0] + [float(e1 - e0) if e0 is not None and e1 is not None and e1 > e0 else 1.0
                         for e0, e1 in zip(epochs, epochs[1:])]
        return np.ones(len(epochs), dtype=bool), np.cumsum(moves) - 1.0
    keep, work, last = np.ones(len(counters), dtype=bool), np.zeros(len(counters)), 0
    for i in range(1, len(counters)):
        (e0, b0), (e1, b1) = counters[last], counters[i]
        same = b0 is not None and b1 is not None and (e0 is None or e1 is None or e0 == e1)
        if same and b1 == b0:
            keep[i] = False
            continue
        work[i] = work[last] + (b1 - b0 if same and b1 > b0 else 1)
        last = i
    return keep, work[keep]


def record_lengths(others: dict[str, dict[int, float]], steps: list) -> np.ndarray | None:
    """The steps each record (at `steps`) says it covered, printed on its line beside the loss (an RL episode's
    `Steps: 8019`, `length`): from the first of `others` (name -> {step: value}, the run's other series on the same
    line axis) named by `LENGTH_WORDS`, a positive whole number on every record that is no counter (it falls as
    often as it rises). None where no such series is printed."""
    for name, got in others.items():
        said = set(words(name))
        if not said <= LENGTH_WORDS or not said & LENGTH_WORDS - {"episode", "ep"}:
            continue
        v = np.array([got.get(s, np.nan) for s in steps], dtype=float)
        if v.size < 3 or not np.all(np.isfinite(v)) or np.any(v <= 0) or np.any(v != np.round(v)):
            continue
        if np.mean(np.diff(v) < 0) >= 0.25:
            return v
    return None


def stamped_intervals(points: pl.DataFrame) -> tuple[np.ndarray, ...] | None:
    """(start steps, end steps, seconds per step, segment, start wall time, end wall time) between consecutive
    stamped points, Δwall_time / Δstep, within segments cut at each resume (`seconds_per_step`)."""
    if points["wall_time"].null_count():  # no copy of a long series where every point has its stamp
        points = points.filter(pl.col("wall_time").is_not_null())
    s, w = points["step"].to_numpy(), points["wall_time"].to_numpy()
    ds, dw = np.diff(s), np.diff(w)
    ok = (ds > 0) & (dw >= 0)
    if ok.sum() == 0:
        return None
    seg = np.cumsum(~ok)
    a, b, r, seg, wa, wb = s[:-1][ok], s[1:][ok], dw[ok] / ds[ok], seg[ok], w[:-1][ok], w[1:][ok]
    keep = r > 0
    return a[keep], b[keep], r[keep], seg[keep], wa[keep], wb[keep]
