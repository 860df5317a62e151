"""Robust and trend statistics for detectors, in numpy and polars (no scipy on the analyze path).

Every function takes plain float arrays (NaN allowed where said) and is vectorised: no Python loop per
data point. Trend tests work on a *bucketed* series when it is long (`bucket`), so Theil–Sen and
Mann–Kendall cost O(m²) in the number of buckets m (≤ 256 by default), not O(n²) in points
(DECISIONS.md §11). `tests/test_stats.py` checks each one against scipy's version as the slow reference.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import polars as pl


# A curve's initial level is the median of its first START_POINTS points: one noisy first point cannot set it, and a
# fast early drop does not hide in it. Detectors that read a start level carry it as `start_points` (--set reaches it).
START_POINTS = 3
MAD_TO_SIGMA = 1.4826  # MAD of a normal sample times this estimates its standard deviation


def start_level(values: np.ndarray, points: int = START_POINTS) -> float:
    """A curve's initial level: the median of its first `points` finite values (NaN when it has none)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)][:max(1, points)]
    return float(np.median(v)) if v.size else math.nan


# The one boundary between flat_loss ("it never learned": the loss stays where it started) and plateau ("it learned,
# then stopped"): a loss that fell LEARNED_FALL of its initial level, by LEARNED_SIGMAS noise sigmas of that level or
# more, learned something (a 7% fall in the first 25 of 500 steps, then a stall, is a plateau).
LEARNED_FALL = 0.05
LEARNED_SIGMAS = 3.0


def fall_from_start(values: np.ndarray, level: float, points: int = START_POINTS) -> tuple[float, float]:
    """How far a curve fell from its initial level (`start_level`) to `level`: as a share of the initial level's
    magnitude, and in noise sigmas of a median of `points` points (`noise` / √points; inf when the noise is 0 and
    it fell). Negative when it rose; (NaN, NaN) when the initial level is 0 or unknown."""
    head = start_level(values, points)
    if not math.isfinite(head) or head == 0 or not math.isfinite(level):
        return math.nan, math.nan
    drop = head - level
    sigma = noise(values) / math.sqrt(max(1, points))
    z = drop / sigma if sigma > 0 else (math.inf if drop > 0 else -math.inf if drop < 0 else 0.0)
    return drop / abs(head), z


def learned(values: np.ndarray, level: float, min_fall: float = LEARNED_FALL, min_sigmas: float = LEARNED_SIGMAS,
            points: int = START_POINTS) -> bool:
    """Whether a curve fell from its initial level to `level` by `min_fall` of it and by `min_sigmas` noise
    sigmas (`fall_from_start`): it learned something. False for a curve that stayed or rose, or has no level."""
    rel, z = fall_from_start(values, level, points)
    return bool(rel >= min_fall and z >= min_sigmas)


# A log too short for a trend test (per-epoch means, 5 to 19 points) shows a stall only outright: the last half of
# its points (HELD_POINTS at least) within HELD_BAND of their median (over the 52 labelled runs of 5-19 points: on
# the last 4 points alone, 2 healthy runs of 17 and 19 points; on the last half, none).
HELD_POINTS = 4
HELD_BAND = 0.02


def held_tail(values: np.ndarray, points: int = HELD_POINTS) -> tuple[float, float, int]:
    """(median, largest deviation from it as a share of its magnitude, count) of the last half of `values`,
    `points` at least; the deviation is inf at a median of 0."""
    v = np.asarray(values, dtype=float)
    k = min(v.size, max(points, -(-v.size // 2)))
    level = float(np.median(v[-k:]))
    spread = float(np.max(np.abs(v[-k:] - level))) / abs(level) if level else math.inf
    return level, spread, k


# Losses a model reaches by predicting one constant, fixed by the targets alone, beside cross-entropy's ln k
# (`chance_level`): MSE 0.25 is that of predicting 0.5 for balanced {0, 1} targets (a fair coin's variance), MSE 1.0
# that of predicting the mean of standardised targets (or 0 for ±1 targets).
CONSTANT_PREDICTOR_MSE = (0.25, 1.0)


def constant_predictor_level(level: float, low: float, rel_tol: float = 0.005) -> float | None:
    """The value of `CONSTANT_PREDICTOR_MSE` that a curve settled at: its final `level` within `rel_tol` of it,
    and its (smoothed) minimum `low` never more than `rel_tol` below it, so the model never beat a constant
    prediction; else None."""
    for c in CONSTANT_PREDICTOR_MSE:
        if abs(level - c) <= rel_tol * c and low >= c * (1 - rel_tol):
            return c
    return None


def finite(values: np.ndarray) -> np.ndarray:
    """Boolean mask of the finite entries (NaN, +Inf and -Inf are False)."""
    return np.isfinite(np.asarray(values, dtype=float))


def mad(values: np.ndarray) -> float:
    """Median absolute deviation from the median, ignoring non-finite values; NaN when none is finite.

    Unscaled (multiply by `MAD_TO_SIGMA` for a normal-consistent sigma), as scipy's
    `median_abs_deviation(..., nan_policy="omit")`.
    """
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return math.nan
    return float(np.median(np.abs(x - np.median(x))))


def robust_scale(values: np.ndarray, level: float | None = None) -> float:
    """A noise scale that is never 0 for a non-constant signal: sigma from the MAD, else from the mean
    absolute deviation, else a tiny fraction of the level (so a constant series gives huge z, not a
    division by zero)."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return math.nan
    med = float(np.median(x))
    s = MAD_TO_SIGMA * float(np.median(np.abs(x - med)))
    if s > 0:
        return s
    s = 1.2533 * float(np.mean(np.abs(x - med)))  # mean abs dev -> sigma for a normal sample
    if s > 0:
        return s
    ref = abs(level if level is not None else med)
    return max(ref * 1e-9, 1e-300)


def bucket(steps: np.ndarray, values: np.ndarray, max_buckets: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Medians of (step, value) in up to `max_buckets` consecutive equal-count buckets of finite points.

    Short series (n ≤ max_buckets) come back unchanged (finite points only), so the trend statistics
    below are exact there. Buckets are taken in point order, so steps must be sorted.
    """
    x = np.asarray(steps, dtype=float)
    y = np.asarray(values, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    n = x.size
    if n <= max_buckets:
        return x, y
    ids = (np.arange(n) * max_buckets) // n
    frame = pl.DataFrame({"b": ids, "x": x, "y": y}).group_by("b", maintain_order=True).agg(
        pl.col("x").median(), pl.col("y").median())
    return frame["x"].to_numpy(), frame["y"].to_numpy()


def _pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    i, j = np.triu_indices(n, k=1)
    return i, j


def theil_sen(steps: np.ndarray, values: np.ndarray, max_buckets: int = 256) -> tuple[float, float]:
    """Theil–Sen slope and intercept (median of pairwise slopes; intercept = median(y) − slope·median(x)).

    Exact (scipy.stats.theilslopes' slope and intercept) for up to `max_buckets` finite points; on longer
    series it is computed on bucket medians. Returns (NaN, NaN) with fewer than two distinct steps.
    """
    x, y = bucket(steps, values, max_buckets)
    if x.size < 2:
        return math.nan, math.nan
    i, j = _pairs(x.size)
    dx = x[j] - x[i]
    ok = dx != 0
    if not ok.any():
        return math.nan, math.nan
    slope = float(np.median((y[j] - y[i])[ok] / dx[ok]))
    return slope, float(np.median(y) - slope * np.median(x))


@dataclass(frozen=True)
class Trend:
    """Mann–Kendall test of a monotone trend: S, its normal z (continuity-corrected), two-sided p,
    Kendall's tau-b against the step order, and the number of (bucketed) points used."""

    s: float
    z: float
    p: float
    tau: float
    n: int


def mann_kendall(values: np.ndarray, steps: np.ndarray | None = None, max_buckets: int = 256) -> Trend:
    """Mann–Kendall trend test of the values in step order, with the tie correction of the variance.

    Non-finite values are dropped; long series are bucketed first (see `bucket`). With fewer than 3
    points there is no test: p = 1, z = 0.
    """
    y = np.asarray(values, dtype=float)
    x = np.arange(y.size, dtype=float) if steps is None else np.asarray(steps, dtype=float)
    x, y = bucket(x, y, max_buckets)
    n = y.size
    if n < 3:
        return Trend(0.0, 0.0, 1.0, 0.0, n)
    i, j = _pairs(n)
    s = float(np.sign(y[j] - y[i]).sum())
    _, counts = np.unique(y, return_counts=True)
    var = (n * (n - 1) * (2 * n + 5) - float(np.sum(counts * (counts - 1) * (2 * counts + 5)))) / 18.0
    n0 = n * (n - 1) / 2
    ties = float(np.sum(counts * (counts - 1) / 2))
    denom = math.sqrt(n0 * (n0 - ties)) if n0 > ties else 0.0
    tau = s / denom if denom > 0 else 0.0
    if var <= 0:
        return Trend(s, 0.0, 1.0, tau, n)
    z = (s - math.copysign(1.0, s)) / math.sqrt(var) if s != 0 else 0.0
    if n <= EXACT_MK_MAX_N and counts.size == n:  # small sample, no ties: the exact null distribution of S
        return Trend(s, z, kendall_exact_p(n, s), tau, n)
    return Trend(s, z, math.erfc(abs(z) / math.sqrt(2.0)), tau, n)


# Up to this many points (without ties) Mann–Kendall's p comes from the exact permutation distribution of S:
# the normal approximation is off by up to ×3 in the tail at n = 5 (Kendall 1975, table A), and a per-epoch
# log of 5–15 points is exactly where a small-sample decision matters.
EXACT_MK_MAX_N = 20


def kendall_exact_p(n: int, s: float) -> float:
    """Two-sided exact p of Mann–Kendall's S for n distinct values: S = n(n−1)/2 − 2·inversions, and the number
    of inversions of a uniformly random permutation has the Mahonian distribution (built here by the
    recurrence I(n, k) = Σ_{j<n} I(n−1, k−j)). p = P(|S'| ≥ |S|) under H0, capped at 1."""
    n0 = n * (n - 1) // 2
    counts = np.zeros(n0 + 1)
    counts[0] = 1.0
    for m in range(2, n + 1):  # add the m-th element: it creates 0..m-1 new inversions
        nxt = np.zeros_like(counts)
        for j in range(m):
            nxt[j:] += counts[:counts.size - j]
        counts = nxt
    probs = counts / counts.sum()
    inv = (n0 - abs(s)) / 2  # inversions of an ordering with this |S| (fewest for a rising one)
    tail = float(probs[: int(math.floor(inv + 1e-9)) + 1].sum())  # P(S' ≥ |S|) = P(inversions ≤ inv)
    return min(1.0, 2.0 * tail)


@dataclass(frozen=True)
class RankSum:
    """Mann–Whitney U test of `b` against `a`: U of b (pairs where b's value is higher, ties count ½), its
    continuity-corrected normal z (positive when b sits higher), two-sided p, and the common-language effect
    size U / (n_a·n_b) (the chance that a point of b is above a point of a: 0.5 for no shift, 1 when every
    point of b is above every point of a)."""

    u: float
    z: float
    p: float
    effect: float


def mann_whitney(a: np.ndarray, b: np.ndarray) -> RankSum:
    """Mann–Whitney U test of two samples (finite values only), with the tie correction of the variance and
    a continuity correction, as scipy.stats.mannwhitneyu(b, a, method="asymptotic"). Distribution-free, so a
    level shift in heavy-tailed noise is judged on ranks, not on a variance the tails would inflate. With an
    empty sample or no spread at all: z = 0, p = 1."""
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    x, y = x[np.isfinite(x)], y[np.isfinite(y)]
    na, nb = x.size, y.size
    if na == 0 or nb == 0:
        return RankSum(0.0, 0.0, 1.0, 0.5)
    both = np.concatenate([x, y])
    ranks = pl.Series(both).rank("average").to_numpy()
    u = float(ranks[na:].sum() - nb * (nb + 1) / 2)
    n = na + nb
    _, counts = np.unique(both, return_counts=True)
    var = na * nb / 12.0 * ((n + 1) - float(np.sum(counts ** 3 - counts)) / (n * (n - 1)))
    effect = u / (na * nb)
    if var <= 0:
        return RankSum(u, 0.0, 1.0, effect)
    d = u - na * nb / 2.0
    z = (d - math.copysign(0.5, d)) / math.sqrt(var) if d != 0 else 0.0
    return RankSum(u, z, min(1.0, math.erfc(abs(z) / math.sqrt(2.0))), effect)


def rolling_baseline(values: np.ndarray, window: int, min_periods: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Trailing robust baseline of each point from the `window` points *before* it (the point itself is
    excluded, so a spike does not raise its own baseline).

    Returns (median, sigma): the rolling median, and a rolling point-to-point noise sigma: the median
    absolute successive difference among those points times MAD_TO_SIGMA/√2 (σ for white noise, as
    `noise`). Differences, not deviations from a lagging median, so a fast fall in the window (warm-up,
    the first steps of a run) is not counted as noise and cannot hide a spike right after it.
    Non-finite points are ignored; NaN where fewer than `min_periods` finite points precede.
    """
    y = np.asarray(values, dtype=float)
    mp = min_periods if min_periods is not None else max(3, window // 4)
    s = pl.Series("y", np.where(np.isfinite(y), y, np.nan), nan_to_null=True)
    # each intermediate is dropped once read: on a series of millions of points every one is 8 bytes a point
    med = s.rolling_median(window_size=window, min_samples=mp).shift(1).fill_null(np.nan).to_numpy()
    step = s.diff().abs()  # null next to a non-finite point
    del s
    sig = step.rolling_median(window_size=max(window - 1, 1), min_samples=max(mp - 1, 1)).shift(1)
    del step
    sig = sig * (MAD_TO_SIGMA / math.sqrt(2.0))
    return med, sig.fill_null(np.nan).to_numpy()


def rolling_median(values: np.ndarray, window: int) -> np.ndarray:
    """Centred rolling median over finite values (edges use the points available).

    Windows wider than 64 points are computed on block medians (blocks of window/8 points, a centred
    median of 9 blocks, repeated back to the points): a smoothing of the same width at a fraction of the
    cost on series of millions of points; exact for windows up to 64.
    """
    y = np.where(np.isfinite(values), values, np.nan)
    w = max(1, int(window))
    if w > 64 and y.size > 4 * w:
        b = w // 8
        nb = -(-y.size // b)
        padded = np.full(nb * b, np.nan)
        padded[:y.size] = y
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN blocks are NaN, as intended
            blocks = np.nanmedian(padded.reshape(nb, b), axis=1)
        return np.repeat(rolling_median(blocks, 9), b)[:y.size]
    s = pl.Series("y", y, nan_to_null=True)
    return s.rolling_median(window_size=w, min_samples=1, center=True).fill_null(np.nan).to_numpy()


def change_point(values: np.ndarray) -> tuple[int, float]:
    """The single split of `values` into two segments of constant mean that minimises the squared error.

    Returns (k, gain): the second segment starts at index k (1 ≤ k ≤ n−1), gain is the fraction of the
    total sum of squares the split explains (0–1). (-1, 0) for fewer than 4 finite points.
    """
    y = np.asarray(values, dtype=float)
    finite = np.isfinite(y)
    if not finite.all():
        y = y[finite]
    n = y.size
    if n < 4:
        return -1, 0.0
    c1 = np.cumsum(y)
    c2 = np.cumsum(y * y)
    # sse[k-1] = (c2[k-1] - c1[k-1]² / k) + ((c2[-1] - c2[k-1]) - (c1[-1] - c1[k-1])² / (n - k)) for k = 1..n-1,
    # the same operations in the same order, in place: a series of millions of points holds 5 arrays, not 12
    k = np.arange(1, n, dtype=float)  # exact below 2**53
    head1, head2 = c1[:-1], c2[:-1]  # views: c1[k - 1], c2[k - 1]
    sse = np.square(head1)
    sse /= k
    np.subtract(head2, sse, out=sse)  # left
    right = np.subtract(c1[-1], head1)
    np.square(right, out=right)
    np.subtract(n, k, out=k)
    right /= k
    np.subtract(c2[-1], head2, out=k)
    np.subtract(k, right, out=right)
    sse += right
    del k, right
    total = c2[-1] - c1[-1] ** 2 / n
    best = int(np.argmin(sse))
    gain = 0.0 if total <= 0 else float(1.0 - sse[best] / total)
    return best + 1, gain


def lag1_autocorr(values: np.ndarray) -> float:
    """Lag-1 autocorrelation of the finite values (NaN for fewer than 3 or a constant series)."""
    y = np.asarray(values, dtype=float)
    y = y[np.isfinite(y)]
    if y.size < 3:
        return math.nan
    d = y - y.mean()
    den = float(np.dot(d, d))
    return math.nan if den == 0 else float(np.dot(d[:-1], d[1:]) / den)


def autocorr(values: np.ndarray, max_lag: int) -> np.ndarray:
    """Sample autocorrelation of the finite values at lags 1..`max_lag` (the standard biased estimator:
    lag-k cross products over the total sum of squares, so lag 1 equals `lag1_autocorr`).

    Entry k−1 is lag k. Lags ≥ the number of points are NaN; all NaN for a constant series or fewer than 3
    points. Periodic swings of period p show as a peak at lag p even where lag 1 is near 0 (period 4).
    """
    y = np.asarray(values, dtype=float)
    y = y[np.isfinite(y)]
    out = np.full(max(0, int(max_lag)), math.nan)
    if y.size < 3 or out.size == 0:
        return out
    d = y - y.mean()
    den = float(np.dot(d, d))
    if den == 0:
        return out
    n = min(out.size, y.size - 1)
    # one FFT instead of max_lag dot products: zero-padded to 2n, so the circular correlation is linear
    size = 1 << int(2 * y.size - 1).bit_length()
    f = np.fft.rfft(d, size)
    acov = np.fft.irfft(f * np.conj(f), size)[1: n + 1]
    out[:n] = acov / den
    return out


def sign_change_rate(values: np.ndarray) -> float:
    """Fraction of successive differences whose sign flips (zero differences skipped); NaN if < 2 left."""
    y = np.asarray(values, dtype=float)
    d = np.diff(y[np.isfinite(y)])
    d = d[d != 0]
    if d.size < 2:
        return math.nan
    return float(np.mean(np.sign(d[1:]) != np.sign(d[:-1])))


def runs_of(mask: np.ndarray) -> list[tuple[int, int]]:
    """(start, end) index pairs, end inclusive, of each run of True in `mask`."""
    m = np.asarray(mask, dtype=bool)
    if m.size == 0:
        return []
    edges = np.diff(np.concatenate(([0], m.astype(np.int8), [0])))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1) - 1
    return list(zip(starts.tolist(), ends.tolist()))


def level(values: np.ndarray) -> float:
    """Median of the finite values (NaN when none)."""
    y = np.asarray(values, dtype=float)
    y = y[np.isfinite(y)]
    return float(np.median(y)) if y.size else math.nan


def head_tail_levels(values: np.ndarray, fraction: float = 0.1, min_points: int = 3) -> tuple[float, float]:
    """Medians of the first and last `fraction` of the finite values (at least `min_points` each)."""
    y = np.asarray(values, dtype=float)
    y = y[np.isfinite(y)]
    if y.size == 0:
        return math.nan, math.nan
    k = min(y.size, max(min_points, int(round(y.size * fraction))))
    return float(np.median(y[:k])), float(np.median(y[-k:]))


def lr_restarts(steps: np.ndarray, lr: np.ndarray, jump: float = 1.5, min_decay: float = 0.1, mid: float = 0.1,
                match: float = 0.01) -> list[dict]:
    """Points where a decaying LR jumps back up to a value its schedule had earlier: the scheduler started again
    from an earlier state (a resume that restored the weights but not the scheduler) while the steps go on.

    A jump is a point at least `jump` × the one before it, after the first peak, where the LR was still falling
    into it (a cyclic schedule climbs point by point) and had decayed at least `min_decay` below that peak but
    not below `mid` of it (mid-decay: a warm restart of SGDR jumps from the end of its cycle, near 0), to a value
    within
    `match` (relative) of an LR logged before the jump. Each: step, step before, LR before and after, the step
    where the schedule last had that value. Steps must rise (a console counter going back is another signal)."""
    ok = np.isfinite(lr)
    s, v = np.asarray(steps)[ok], np.asarray(lr, dtype=float)[ok]
    if v.size < 5 or np.any(np.diff(s) <= 0):
        return []
    peak = float(v.max())
    if not peak > 0:
        return []
    ipeak = int(np.argmax(v >= (1 - match) * peak))
    out = []
    for j in range(ipeak + 2, v.size):
        before, now = v[j - 1], v[j]
        if not (before > 0 and now >= jump * before and before <= (1 - min_decay) * v[ipeak] and before <= v[j - 2]
                and before >= mid * peak):
            continue
        earlier = np.flatnonzero(np.abs(v[:j - 1] - now) <= match * now)
        if earlier.size:
            out.append({"step": int(s[j]), "previous_step": int(s[j - 1]), "lr_before": float(before),
                        "lr_after": float(now), "same_lr_step": int(s[earlier[-1]])})
    return out


def printed_resolution(values: np.ndarray) -> np.ndarray:
    """Half the last printed digit of each value: a log that prints 4 decimals (`0.0001`) or 3 significant digits
    (`1.23e-05`) holds each value only to that; 0 where the values carry more digits than a writer prints (a float
    from TensorBoard or trainer_state.json). The coarsest rounding every finite value fits is assumed."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    out = np.zeros(np.shape(values))
    if v.size == 0:
        return out
    for d in range(1, 9):  # fixed decimals
        scaled = v * 10.0 ** d
        if np.all(np.abs(scaled - np.round(scaled)) <= 1e-4 * np.maximum(1.0, np.abs(scaled) * 1e-3)):
            return out + 0.5 * 10.0 ** -d
    nz = v[v != 0]
    if nz.size == 0:
        return out
    for sig in range(1, 6):  # significant digits
        e = np.floor(np.log10(np.abs(nz)))
        scaled = nz / 10.0 ** (e - sig + 1)
        if np.all(np.abs(scaled - np.round(scaled)) <= 1e-4):
            a = np.abs(np.nan_to_num(np.asarray(values, dtype=float), posinf=0.0, neginf=0.0))
            with np.errstate(divide="ignore"):
                return np.where(a > 0, 0.5 * 10.0 ** (np.floor(np.log10(np.where(a > 0, a, 1.0))) - sig + 1), 0.0)
    return out


def lr_jumps(steps: np.ndarray, lr: np.ndarray, jump: float = 1.5, calm: float = 0.2,
             match: float = 0.05, rounded: bool = False, near: int = 3) -> list[dict]:
    """Points where the LR rises ×`jump` or more in one logged interval while the `near` intervals on either side
    move it by `calm` of that rise or less each (per step where the steps are uneven; several, as a step skipped on
    overflow repeats the LR): a discontinuity no standard schedule has (a warmup ends at the peak it climbs to; a
    step decay drops). A rise from 0 counts where it lands at half the LR's maximum or more (a warmup from 0 takes
    its first step off it). A rise that lands within `match` of a value
    logged before it is a schedule starting again (a warm restart, a resume: `lr_restarts`), not this. Rounding
    is allowed for where the values were `rounded` (printed): the rise must hold with each value anywhere within
    its printed resolution (`printed_resolution`: `0.0001` → `0.0002` is no jump). Each: step, step before, LR
    before and after, ratio."""
    ok = np.isfinite(lr)
    s, v = np.asarray(steps, dtype=float)[ok], np.asarray(lr, dtype=float)[ok]
    if v.size < 4 or np.any(np.diff(s) <= 0):
        return []
    half = printed_resolution(v) if rounded else np.zeros(v.size)
    rate = np.diff(v) / np.diff(s)
    out = []
    for j in range(2, v.size - 1):  # the interval (j-1, j), with one interval on each side
        low, high = v[j] - half[j], v[j - 1] + half[j - 1]
        rise = v[j] - v[j - 1]
        if rise <= 0 or low <= 0 or low < jump * high:
            continue
        beside = np.r_[rate[max(0, j - 1 - near):j - 1], rate[j:j + near]]
        if np.max(np.abs(beside)) > calm * rate[j - 1]:
            continue
        if v[j - 1] == 0 and v[j] < 0.5 * v.max():
            continue  # a warmup's first step off 0, not a leap to the LR the run trains at
        earlier = v[:j]
        if np.any(np.abs(earlier - v[j]) <= match * v[j]):
            continue
        out.append({"step": int(s[j]), "previous_step": int(s[j - 1]), "lr_before": float(v[j - 1]),
                    "lr_after": float(v[j]), "ratio": float(v[j] / v[j - 1]) if v[j - 1] > 0 else None,
                    "earlier_max": float(earlier.max())})
    return out


def chance_counts(extra: tuple[int, ...] = ()) -> np.ndarray:
    """The whole numbers k whose ln k a loss sits at when the model predicts uniformly (cross-entropy over k
    outcomes) or a probability is clamped at 1/k: every k from 2 to 1000, powers of 2 (vocabularies of 2^m
    tokens), thousands up to 10^6 (32,000 and 50,000 token vocabularies), powers of 10 up to 10^16 (clamps such
    as log(p + 1e-10): 23.0259), and `extra` (a class count from the run's config)."""
    ks = np.concatenate([np.arange(2, 1001), 2 ** np.arange(10, 31), np.arange(1, 1001) * 1000,
                         10 ** np.arange(3, 17, dtype=np.int64), np.asarray(extra, dtype=np.int64)])
    return np.unique(ks[ks >= 2])


def chance_level(values: np.ndarray, rel_tol: float = 3e-4, gap_share: float = 0.02,
                 extra: tuple[int, ...] = (), resolution: float = 0.0) -> int | None:
    """The k of `chance_counts` whose ln k every one of `values` (finite, the last few points of a loss) lies
    within tolerance of, or None. The tolerance is `rel_tol` of ln k and at most `gap_share` of the distance
    from ln k to the nearest other candidate, so that a match names one k: ln 10 = 2.302585 takes 2.3029
    (0.0003 away), and a loss of 5.0 matches nothing unless pinned within 1e-5 of ln 148. A value printed with
    few digits (`resolution`, half its last printed digit: `printed_resolution`) holds ln k only to that: `4.6`
    is ln 95 to ln 105, and the roundest of those (100: the fewest significant digits, then the nearest) is named."""
    v = np.asarray(values, dtype=float)
    if v.size == 0 or not np.all(np.isfinite(v)) or np.any(v <= 0):
        return None
    ks = chance_counts(extra)
    logs = np.log(ks.astype(float))
    if resolution > 0:
        near = np.flatnonzero((logs >= v.max() - 2 * resolution) & (logs <= v.min() + 2 * resolution))
        # only the ln k within reach of every value are compared with each (a whole curve of 600k points against
        # 2,029 candidates would take gigabytes)
        fits = near[np.all(np.abs(v[:, None] - logs[None, near]) <= resolution, axis=0)]
        if fits.size:  # a class count the run declares first, then the roundest, then the nearest
            mid = float(np.median(v))
            return int(min(ks[fits], key=lambda k: (int(k) not in extra, len(str(int(k)).rstrip("0")),
                                                    abs(math.log(k) - mid))))
    i = int(np.argmin(np.abs(logs - float(np.median(v)))))
    gaps = np.diff(logs)
    gap = min(gaps[i - 1] if i > 0 else np.inf, gaps[i] if i < gaps.size else np.inf)
    tol = min(rel_tol * logs[i], gap_share * gap)
    return int(ks[i]) if bool(np.all(np.abs(v - logs[i]) <= tol)) else None


@dataclass(frozen=True)
class SpikeRule:
    """The one definition of a spike's thresholds, a setting of its own (`--set spike.z=…`): every detector that reads
    spikes (loss_spike, bad_batch) is given it, and the engine's spike list uses it.

    Calibration: the noise model is the series' own, on a log scale where the series is
    positive (a loss near zero is right-skewed: at 0.004, 0.07 is ordinary minibatch noise, ×16 yet a few log
    sigmas), so z is the jump in log-noise sigmas; a series that yields more than `max_spikes` spikes has
    tails its noise model does not describe, and only spikes `crowd_z_factor` times the median z of the
    crowd stand out from it.
    """

    window: int = 30  # trailing points of the baseline
    # z in log-noise sigmas: the largest z of any healthy loss or grad-norm series in the gallery and the
    # labelled real runs is 4.8 (hf_tinyllama's grad norm, ×1.48); the gallery's true warning spikes before a
    # divergence (nan_lr_too_high, ×9 and ×11 on a noisy SGD loss) stand at 5.2 and 5.8.
    z: float = 5.0
    min_ratio: float = 1.0  # and the value at least doubles its level: the effect a user acts on
    recover: int = 5  # points after the spike within which it must come back
    max_spikes: int = 8  # more spikes than this in one series are its noise's tail, not bad batches
    crowd_z_factor: float = 2.0  # in such a crowd, a spike must be this many times the crowd's median z
    # An episode of several peaks that comes back in the end is one spike when it spans at most this many points
    # (half the baseline window: the level it comes back to was set by calm points, not by it) ...
    max_episode: int = 15
    episode_share: float = 0.05  # ... and at most this share of the series (short relative to the run)


def resolution(values: np.ndarray) -> float:
    """The step a printed series moves in: the smallest positive gap between its distinct finite values, when
    they sit on a decimal grid coarser than float32 (0 for a series logged at full precision)."""
    u = np.unique(np.asarray(values, dtype=float))
    u = u[np.isfinite(u)]
    if u.size < 2:
        return 0.0
    gap = float(np.min(np.diff(u)))
    scale = float(np.max(np.abs(u)))
    return gap if gap > 1e-6 * scale else 0.0  # float32 carries ~7 digits: a gap above that is the print's


def spikes(steps: np.ndarray, values: np.ndarray, rule: SpikeRule = SpikeRule(), direction: int = 1) -> pl.DataFrame:
    """Isolated jumps of a series far from its trailing robust baseline that come back within `rule.recover` points.

    A strictly positive series is read on a log scale (jumps are ratios, noise is relative), others as they
    are. The baseline is the median of the `window` points before (or of their last third, when that is higher
    in the spike's direction: the local level of a climbing series), sigma their point-to-point noise
    (`rolling_baseline`). A point is a spike candidate when (value − baseline)/sigma ≥ z (sign flipped for
    `direction=-1`) and the jump is at least `min_ratio` of the baseline's magnitude (so a near-noiseless
    series does not turn every wiggle into a spike). An episode of consecutive candidates is one spike at
    its peak, and counts only when sudden (its first point rises at least half its jump above the point
    before it: the elevated shoulder after a spike is not a new one) and when it recovers: some finite point
    within `recover` points after it is back within half the jump of the baseline and within the larger of
    z sigmas and the baseline's own magnitude (×2 on the log scale) of it, and none of the rest of those
    points rises past half the jump again (isolated; but see episodes below). Otherwise it is a level shift, the start of a blow-up
    (a point inside a divergence that ends in NaN), or one peak of many (a noisy climb, an oscillation), not
    a spike. An episode whose series re-rises past half the height within `recover` points of coming back goes on
    to that point, and is one spike (at its highest point) if it comes back in the end within `max_episode`
    points and `episode_share` of the series; candidates inside a longer stretch start no episode of their own.
    More than `max_spikes` spikes: see SpikeRule. Columns: step, value, baseline (in the series'
    units), sigma (log units on the log scale), z, ratio, start_step, end_step, recovery_points,
    window_start, window_end, log_scale.
    """
    window, z, min_ratio, recover = rule.window, rule.z, rule.min_ratio, rule.recover
    x = np.asarray(steps)
    raw = np.asarray(values, dtype=float)
    empty = pl.DataFrame(schema={"step": pl.Int64, "value": pl.Float64, "baseline": pl.Float64, "sigma": pl.Float64,
                                 "z": pl.Float64, "ratio": pl.Float64, "start_step": pl.Int64, "end_step": pl.Int64,
                                 "recovery_points": pl.Int64, "window_start": pl.Int64, "window_end": pl.Int64,
                                 "log_scale": pl.Boolean})
    if raw.size < 8:
        return empty
    fin = raw[np.isfinite(raw)]
    log_scale = bool(fin.size and np.all(fin > 0))
    res = resolution(fin)
    del fin  # each full-length array below is freed once read: a long series' loss is millions of points
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(np.isfinite(raw), np.log(np.where(raw > 0, raw, 1.0)), np.nan) if log_scale else raw
    med, sig = rolling_baseline(y, window)
    # The local level is the higher of the window's median and that of its last third: while the level
    # climbs (an LR warm-up passing the stability limit) the long median lags behind it, and a point that
    # is only high against the lagging median is not a jump above its local level.
    short = max(5, window // 3)
    recent, _ = rolling_baseline(y, short)
    use_recent = np.isfinite(recent) & (direction * (recent - med) > 0)
    med = np.where(use_recent, recent, med)
    del recent
    floor = np.maximum(sig, 1e-12 * np.abs(med) + 1e-300)
    del sig
    # A value printed with few decimals moves in steps of the print's resolution (a loss of 0.0001 logged as
    # `0.0001`/`0.0002` has a MAD of 0): noise is at least half that step, so one step is not a 10^12-sigma spike.
    if res > 0:
        half = 0.5 * (np.log1p(res / np.exp(med)) if log_scale else np.full_like(med, res))
        floor = np.maximum(floor, np.where(np.isfinite(half), half, 0.0))
        del half
    jump = direction * (y - med)
    zz = jump / floor
    big = jump >= (math.log1p(min_ratio) if log_scale else min_ratio * np.abs(med))
    cand = np.isfinite(zz) & (zz >= z) & big
    if not cand.any():
        return empty
    # Hold the baseline of an episode at its first point: inside a multi-point spike, later points'
    # trailing windows already contain the spike.
    rows = []
    widest = max(recover, min(rule.max_episode, int(rule.episode_share * y.size)))
    done, stretch = -1, False  # the last point of the previous episode, and whether it was a stretch of many peaks
    for a, b in runs_of(cand):  # loop per spike episode, not per point
        if a <= done or (stretch and a <= done + recover):  # inside the last episode, or the stretch goes on
            done = max(done, b) if stretch else done
            continue
        stretch = False
        # Sudden: a point on the elevated shoulder after a spike is far above the baseline without jumping.
        if a > 0 and np.isfinite(y[a - 1]) and direction * (y[a] - y[a - 1]) < 0.5 * jump[a]:
            continue
        base = med[a]
        height = direction * (y[a + int(np.argmax(jump[a: b + 1]))] - base)
        # Back means near the old level: half-way down is not enough after a ×700 jump (a point 10× its
        # baseline is still far off it), so the tolerance is also capped by the baseline's noise band and its
        # own magnitude (back below 2× a positive level).
        tol = min(0.5 * height, max(z * floor[a], math.log(2.0) if log_scale else abs(base)))
        # Once back, the series does not rise past half the height again within `recover` points, or the
        # episode goes on: an unstable stretch throws several peaks before it settles (a loss at ×1.8, ×2.8,
        # ×2 over a dozen points, then back at its level). The episode is a spike if it comes back in the end
        # and spans at most `widest` points; else it is a noisy climb or an oscillation (many peaks), not a spike.
        e, back = b, np.empty(0, dtype=int)
        while e - a < widest or e == b:
            after = y[e + 1: e + 1 + recover]
            back = np.flatnonzero(np.isfinite(after) & (direction * (after - base) <= tol))
            again = np.flatnonzero(np.isfinite(after) & (direction * (after - base) > 0.5 * height))
            again = again[again > back[0]] if back.size else again
            if back.size == 0 or again.size == 0:
                break
            e, back = e + 1 + int(again[-1]), np.empty(0, dtype=int)
        if back.size == 0:  # never back, or peaks for more than `widest` points: its later peaks are part of it
            done, stretch = (e, True) if e > b else (done, False)
            continue
        done = e
        seg = slice(a, e + 1)
        peak = a + int(np.nanargmax(np.where(np.isfinite(jump[seg]), jump[seg], -np.inf)))
        w0 = max(0, a - (short if use_recent[a] else window))  # the points the baseline is the median of
        level = float(np.exp(base)) if log_scale else float(base)
        rows.append({"step": int(x[peak]), "value": float(raw[peak]), "baseline": level,
                     "sigma": float(floor[a]), "z": float(direction * (y[peak] - base) / floor[a]),
                     "ratio": float(raw[peak] / level) if level != 0 else math.inf,
                     "start_step": int(x[a]), "end_step": int(x[e]), "recovery_points": int(back[0] + 1),
                     "window_start": int(x[w0]), "window_end": int(x[a - 1]) if a > 0 else int(x[0]),
                     "log_scale": log_scale})
    if len(rows) > rule.max_spikes:  # a crowd: the noise's own tail; keep what stands out from it
        cut = rule.crowd_z_factor * float(np.median([r["z"] for r in rows]))
        rows = [r for r in rows if r["z"] >= cut]
    return pl.DataFrame(rows, schema=empty.schema) if rows else empty


def fold_outliers(values: np.ndarray, reference: np.ndarray, fold: float) -> tuple[np.ndarray, np.ndarray]:
    """Which positive magnitudes lie more than `fold` times beyond *every* reference value but their own.

    `values` are per-item magnitudes (e.g. the RMS of one tensor in each saved batch), `reference` a boolean
    mask of the items taken as normal. Item i is flagged when it is above `fold` × the largest, or below
    1/`fold` × the smallest, reference value other than itself; at least two such values are needed (else
    False). Comparing with the extremes, not a robust z, needs no spread estimate from a handful of items
    and cannot flag an item that is merely the largest of a naturally wide spread. Returns (flags, ratio to
    the median of the other reference values; NaN where there are fewer than two or that median is 0).
    """
    v = np.asarray(values, dtype=float)
    ref = np.asarray(reference, dtype=bool) & np.isfinite(v)
    flags = np.zeros(v.size, dtype=bool)
    ratio = np.full(v.size, math.nan)
    for i in range(v.size):  # one iteration per item (a few saved batches), not per data point
        others = v[ref & (np.arange(v.size) != i)]
        if others.size < 2 or not np.isfinite(v[i]):
            continue
        med = float(np.median(others))
        ratio[i] = v[i] / med if med > 0 else math.nan
        flags[i] = v[i] > fold * others.max() or v[i] * fold < others.min()
    return flags, ratio


def cadence(steps: np.ndarray) -> float:
    """The logging interval: median positive difference between successive distinct steps (1 when unknown)."""
    d = np.diff(np.unique(np.asarray(steps)))
    return float(np.median(d)) if d.size else 1.0


def noise(values: np.ndarray) -> float:
    """Point-to-point noise sigma: robust scale of successive differences over √2 (trend-insensitive)."""
    y = np.asarray(values, dtype=float)
    y = y[np.isfinite(y)]
    if y.size < 3:
        return math.nan
    return robust_scale(np.diff(y)) / math.sqrt(2.0)


def relative_wiggle(values: np.ndarray, skip: int | None = None) -> float:
    """Point-to-point noise relative to the local level, blind to a smooth trend: robust scale of the second
    differences y[i+1] − 2·y[i] + y[i−1], each divided by |y[i]|, over √6 (white noise of relative sigma s gives
    s; a straight or slowly curving trend gives ~0, where first differences would count its slope as noise).
    `skip` leaves out the second difference centred on that index (a curve's turn: its bend is signal, not noise).
    NaN with fewer than 4 finite values or a zero level."""
    y = np.asarray(values, dtype=float)
    keep = np.isfinite(y)
    y = y[keep]
    if y.size < 4 or np.any(y[1:-1] == 0):
        return math.nan
    d2 = (y[2:] - 2 * y[1:-1] + y[:-2]) / np.abs(y[1:-1])
    if skip is not None and keep[skip]:
        at = int(np.sum(keep[:skip])) - 1  # the second difference centred on `skip`, among the finite values
        if 0 <= at < d2.size:
            d2 = np.delete(d2, at)
            if d2.size < 2:
                return math.nan  # one bend left is no scale: as few points as three
    return robust_scale(d2) / math.sqrt(6.0)


def swings(values: np.ndarray, band: float) -> int:
    """How many times `values` crosses from below −band to above +band or back (hysteresis crossings), so
    that noise around zero does not count; NaN entries are ignored."""
    y = np.asarray(values, dtype=float)
    state = np.where(y > band, 1, np.where(y < -band, -1, 0))
    state = state[state != 0]
    return int(np.sum(state[1:] != state[:-1])) if state.size > 1 else 0


def rebounds(values: np.ndarray, factor: float, min_records: int) -> list[tuple[int, int]]:
    """(trough, peak) index pairs of each climb back: `min_records` or more consecutive rises from a trough (the first
    point, or one after a fall) to a peak at least `factor` × the trough, the peak followed by a fall (a curve ending
    on its climb is rising, not rebounding). Positive values only; a NaN ends a climb."""
    y = np.asarray(values, dtype=float)
    up = np.diff(y) > 0
    found = []
    for a, b in runs_of(up):  # rises a..b: y[a] -> y[b + 1]
        trough, peak = a, b + 1
        if (b - a + 1 >= min_records and peak + 1 < y.size and y[peak + 1] < y[peak] and y[trough] > 0
                and y[peak] >= factor * y[trough]):
            found.append((trough, peak))
    return found


def blow_up_at_end(values: np.ndarray, factor: float, max_tail: int = 3) -> tuple[float, int] | None:
    """(factor, k) when a positive curve ends on a blow-up: its last k points (k ≤ `max_tail`, the most that fit)
    all stand above every earlier point and at least `factor` × the median of the earlier points; the factor is the
    last point over that median. None otherwise (or with fewer than two finite points). The median, not the
    minimum, is the reference: a loss near 0 whose heavy-tailed minibatch noise dips to 1e-4 is 100× below its
    ordinary points without anything blowing up."""
    y = np.asarray(values, dtype=float)
    y = y[np.isfinite(y)]
    if y.size < 2 or not np.all(y > 0):
        return None
    hit = None
    for k in range(1, min(max_tail, y.size - 1) + 1):
        before, end = y[:-k], y[-k:]
        ref = float(np.median(before))
        if float(np.min(end)) > float(np.max(before)) and float(np.min(end)) >= factor * ref:
            hit = float(y[-1]) / ref, k
    return hit

def rising_tail(values: np.ndarray) -> int:
    """How many of the last points rise at every point (each strictly above the one before it), counting the
    point the rise starts from: 1 for a curve whose last point is not above the one before."""
    y = np.asarray(values, dtype=float)
    k = 1
    while k < y.size and np.isfinite(y[-k]) and np.isfinite(y[-k - 1]) and y[-k] > y[-k - 1]:
        k += 1
    return k


def new_bests(values: np.ndarray, last: int) -> int:
    """How many of the last `last` values set a new best (lower than every value before them). Under a stationary
    curve the i-th value is a record with probability 1/i, so records at most of the last evaluations of a long
    run are a sign test that it still improves, at any number of points."""
    y = np.asarray(values, dtype=float)
    y = y[np.isfinite(y)]
    if y.size < 2:
        return 0
    best = np.minimum.accumulate(y)
    records = y[1:] < best[:-1]
    return int(np.sum(records[-last:]))
