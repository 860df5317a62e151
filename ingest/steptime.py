"""Seconds per step from a series' wall-clock stamps: the one derivation the throughput_drop detector judges and the
app's step-time chart draws, so the chart shows the intervals the detector saw."""

from __future__ import annotations

import numpy as np
import polars as pl


def seconds_per_step(points: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(interval start steps, end steps, seconds per step, segment id) between consecutive stamped points of one
    series, `points` (step, wall_time) in write order; None when no interval has its step and clock going forward.

    Δwall_time / Δstep within one segment of the run: an interval whose step goes back (or stays) or whose clock
    runs backwards is a resume (resumed_run's story, not a slow step), dropped, and a new segment starts after it,
    so no change point is read across one. Intervals of zero seconds (two points written with one stamp) are
    left out after the segments are cut: they measure nothing."""
    got = stamped_intervals(points)
    return None if got is None else got[:4]


def stamped_intervals(points: pl.DataFrame) -> tuple[np.ndarray, ...] | None:
    """`seconds_per_step`'s intervals with the wall time each starts and ends at: where a counter starts again
    (launches appended to one log), the clock tells which launch an interval belongs to when its steps cannot."""
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
