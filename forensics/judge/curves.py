"""Curves built from a run for the weight-norm and update-ratio detectors: weight-norm curves (logged, or across
checkpoints) and update ratios (logged, or between checkpoints).

They take a `Run` and return plain arrays or frames; the statistics they use are `forensics.judge.stats`'s. They live
apart from `stats.py` so that statistics need no `Run` and `run.py` can use statistics (no import cycle).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from forensics.judge import stats
from forensics.judge.run import Run


@dataclass(frozen=True)
class NormCurve:
    """One weight-norm curve: a logged series, or a norm per checkpoint step from `tensor_stats`."""

    name: str  # series name, "checkpoints: global", or "checkpoints: <tensor>"
    layer: str | None  # None for the whole model
    steps: np.ndarray
    values: np.ndarray
    source: dict


def norm_curves(run: Run) -> list[NormCurve]:
    """Every weight-norm curve of the run: the logged global series and per-layer series, else the global norm
    across checkpoints (√Σ l2² of the parameters, the same set at every checkpoint) and each parameter tensor of
    two or more dimensions (biases and norm gains start at 0 or 1, so their ratios say little)."""
    out = []
    for role in ("weight_norm", "layer_weight_norm"):
        for name in run.all_of(role):
            f = run.series_named(name).filter(pl.col("value").is_finite())
            out.append(NormCurve(name, run.layer_of(name) or (None if role == "weight_norm" else name),
                                 f["step"].to_numpy(), f["value"].to_numpy(),
                                 {"table": "scalars", "series": name}))
    ts = run.table("tensor_stats")
    if out or not ts.height:
        return out
    p = ts.filter((pl.col("kind") == "param") & pl.col("step").is_not_null() & pl.col("l2").is_finite())
    if p.select(pl.col("step").n_unique()).item() < 3:
        return out
    common = p.group_by("tensor").agg(pl.col("step").n_unique().alias("n")).filter(
        pl.col("n") == p.select(pl.col("step").n_unique()).item())["tensor"]
    p = p.filter(pl.col("tensor").is_in(common.implode()))
    g = p.group_by("step").agg((pl.col("l2") ** 2).sum().sqrt().alias("norm")).sort("step")
    src = {"table": "tensor_stats", "kind": "param"}
    out.append(NormCurve("checkpoints: global", None, g["step"].to_numpy(), g["norm"].to_numpy(), src))
    multi = p.filter(pl.col("shape").list.len() >= 2) if "shape" in p.columns else p
    for (tensor,), f in multi.sort("step").group_by("tensor", maintain_order=True):
        out.append(NormCurve(f"checkpoints: {tensor}", tensor, f["step"].to_numpy(), f["l2"].to_numpy(),
                             {**src, "tensor": tensor}))
    return out


def norm_change(c: NormCurve, late: float = 0.5, start_points: int = stats.START_POINTS) -> dict | None:
    """Initial level (median of the first `start_points` points; the first of a curve under 10 points), final level
    (last tenth; the last point), their ratio, the
    Mann–Kendall trend of the whole curve and of its last `late`, the share of the log-change that
    happens in that last part (near 0: it saturated; about `late` or more: it keeps going), and the final
    pace (the last quarter's Theil–Sen slope × the curve's step span / the final level). None for a
    curve too short to judge (< 3 points) or one that starts or ends at 0."""
    s, v = c.steps, c.values
    if v.size < 3:
        return None
    # A short curve (a few checkpoints) holds exact norms, not noisy logs: its first and last points are the levels.
    head = stats.start_level(v, start_points) if v.size >= 10 else float(v[0])
    tail = stats.head_tail_levels(v)[1] if v.size >= 10 else float(v[-1])
    if not (head > 0 and tail > 0):
        return None
    k = min(int(v.size * (1 - late)), v.size - 3) if v.size >= 10 else (v.size - 1) // 2
    mid = float(np.median(v[max(0, k - 1):k + 2])) if v.size >= 10 else float(v[k])
    total = math.log(tail / head)
    # The final pace: the Theil–Sen slope over the last quarter of the steps, as the share of the final level it
    # would add over another span of the curve's length (near 0 once it levels off; ~1 for growth from near 0
    # that keeps a constant pace).
    q = s >= s[0] + 0.75 * (s[-1] - s[0])
    q[-2:] = True
    q_slope, _ = stats.theil_sen(s[q], v[q])
    span = float(s[-1] - s[0])
    return {"series": c.name, "layer": c.layer, "first_step": int(s[0]), "last_step": int(s[-1]),
            "initial": head, "final": tail, "factor": tail / head, "points": int(v.size),
            "mk_p": stats.mann_kendall(v, s).p, "mk_z": stats.mann_kendall(v, s).z,
            "late_mk_p": stats.mann_kendall(v[k:], s[k:]).p, "late_mk_z": stats.mann_kendall(v[k:], s[k:]).z,
            "late_share": math.log(tail / mid) / total if total != 0 and mid > 0 else 0.0,
            "final_pace": q_slope * span / tail if math.isfinite(q_slope) and span > 0 else 0.0,
            "monotone": bool(np.all(np.diff(v) > 0) or np.all(np.diff(v) < 0)),
            "pace_kept": float((v[-1] - v[-2]) / (s[-1] - s[-2]) / ((v[1] - v[0]) / (s[1] - s[0])))
            if v[1] != v[0] and s[1] != s[0] and s[-1] != s[-2] else 0.0}


def trending(ch: dict, sign: int, p: float, late: bool = True) -> bool:
    """A monotone trend of this sign: Mann–Kendall p below `p` over the curve (and in its last part when
    `late`), or, for a handful of checkpoints too few for the test, every step in that direction."""
    if ch["points"] < 8:
        return ch["monotone"] and sign * ch["mk_z"] > 0
    whole = ch["mk_p"] < p and sign * ch["mk_z"] > 0
    return whole and (not late or (ch["late_mk_p"] < p and sign * ch["late_mk_z"] > 0))


def logged_ratios(run: Run) -> pl.DataFrame:
    """Logged update-ratio series as (layer, step, low, high): the per-step ratio, twice (a logged value is one
    step's ratio). A series whose finite values are all negative is taken as log10 of the ratio (as in
    Karpathy's makemore notebooks); layers logged as exactly 0 throughout are frozen, not slow, and left out."""
    frames = []
    for name in run.all_of("update_ratio"):
        f = run.series_named(name).filter(pl.col("value").is_finite())
        v = f["value"].to_numpy()
        if v.size == 0:
            continue
        if np.all(v < 0):
            v = 10.0 ** v
        if not np.any(v > 0):
            continue
        frames.append(pl.DataFrame({"layer": name, "step": f["step"], "low": v, "high": v}))
    return pl.concat(frames) if frames else pl.DataFrame(schema={"layer": pl.Utf8, "step": pl.Int64,
                                                                 "low": pl.Float64, "high": pl.Float64})


def checkpoint_ratios(run: Run) -> pl.DataFrame:
    """Per-step update ratios between consecutive checkpoints, per parameter tensor of two or more dimensions
    (a bias or norm gain near 0 or 1 makes the ratio meaningless), as (layer, step, prev_step, low, high).

    A checkpoint pair `d` steps apart gives the ratio r = ‖w_t − w_{t−d}‖/‖w_{t−d}‖ of d updates summed. If
    every update pointed the same way, the per-step ratio would be r/d (`low`: by the triangle inequality the
    mean per-step ratio is at least this, give or take the change of ‖w‖); if they were independent, r/√d
    (`high`, a random walk). The true value lies between for all but anti-correlated updates, so a claim of
    "too large" uses `low` and a claim of "too small" uses `high`. Tensors that never change are
    frozen_parameters, not this, and are left out.
    """
    d = run.table("tensor_deltas")
    empty = pl.DataFrame(schema={"layer": pl.Utf8, "step": pl.Int64, "prev_step": pl.Int64, "low": pl.Float64,
                                 "high": pl.Float64})
    if not d.height:
        return empty
    d = d.filter((pl.col("step_distance") > 0) & pl.col("ratio").is_finite())
    ts = run.table("tensor_stats")
    if ts.height:
        params = ts.filter(pl.col("kind") == "param")
        if "shape" in params.columns:
            params = params.filter(pl.col("shape").list.len() >= 2)
        d = d.join(params.select("tensor").unique(), on="tensor")
    moving = d.group_by("tensor").agg((pl.col("ratio") > 0).any().alias("moves")).filter(pl.col("moves"))
    d = d.join(moving.select("tensor"), on="tensor")
    dist = pl.col("step_distance").cast(pl.Float64)
    return d.select(pl.col("tensor").alias("layer"), "step", "prev_step", (pl.col("ratio") / dist).alias("low"),
                    (pl.col("ratio") / dist.sqrt()).alias("high")).sort("step", "layer")
