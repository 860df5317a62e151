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
    if points["wall_time"].null_count():  # no copy of a long series where every point has its stamp
        points = points.filter(pl.col("wall_time").is_not_null())
    s, w = points["step"].to_numpy(), points["wall_time"].to_numpy()
    ds, dw = np.diff(s), np.diff(w)
    ok = (ds > 0) & (dw >= 0)
    if ok.sum() == 0:
        return None
    if ok.all():  # no resume: every interval is kept, as views, in one segment
        dw /= ds
        a, b, r, seg = s[:-1], s[1:], dw, np.zeros(dw.size, dtype=np.int64)
    else:
        seg = np.cumsum(~ok)
        a, b, r, seg = s[:-1][ok], s[1:][ok], dw[ok] / ds[ok], seg[ok]
    keep = r > 0
    if keep.all():
        return a, b, r, seg
    return a[keep], b[keep], r[keep], seg[keep]
