"""weight_norm_growth: parameter norms grow without bound."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from forensics.judge import curves, stats
from forensics.judge.detectors.base import UPSTREAM, curve_ends
from forensics.judge.findings import Finding
from forensics.judge.run import Run


@dataclass(frozen=True)
class WeightNormGrowth:
    """Parameter norms grow without bound.

    Detects: a weight-norm curve (logged `weight_norm` or per-layer series, else the global and per-tensor
    norms across three or more checkpoints) that ends at least `factor` × its initial level with a
    significant rising trend (Mann–Kendall p < `p`) over the whole curve and over its last half, which
    still holds at least `late_share` of the log-growth: growth that keeps its pace, where healthy
    training moves away from init and then levels off. A curve of fewer than 8 points (a few checkpoints)
    must instead rise at every point, by `factor_few`, and with its last rise per step at least `pace_few` of
    its first (growth that slows down is moving away from init, which alone can reach ×3 with few points).
    A logged curve that has at least tripled also counts when its late log-share is small (fast growth from
    a small init, then a steady linear climb: ×5.7 with 17% of the log-growth in the second half) if its
    final pace (the last quarter's Theil–Sen slope over the curve's step span, relative to the final level)
    is at least `min_pace`: it would still add that share over another run of the same length.
    Calibration: no healthy run of the TUNE part, the gallery or shared/real_runs logs weight
    norms; on their checkpoint norms (3-5 points) the largest factor is 3.08 (the gallery's healthy_cnn head,
    final pace 0.21, its second half +12%) and the largest final pace 0.53 (a positional embedding that grew
    ×1.58); the no-weight-decay run grows ×5.7 at a final pace of 0.56.
    One finding for the run, naming every curve that grows.
    False alarms: fires on 0 of the 41 healthy runs it could check (at most 7.3% at 95% confidence;
    benchmarks/calibrate.py over the corpus tune + calib parts and shared/real_runs).
    Why: without weight decay (or with feedback in the architecture) logits and activations keep growing
    until softmax saturates or fp16 overflows.
    Evidence: the fastest-growing curve's initial and final norm, factor, trend p, late share, final pace; all
    curves that grow.
    """

    kind: ClassVar[str] = "weight_norm_growth"
    stage: ClassVar[int] = UPSTREAM
    requires: ClassVar[tuple[str, ...]] = ()
    factor: float = 1.5
    factor_few: float = 3.0  # for curves of fewer than 8 points (a few checkpoints), where no trend test holds
    pace_few: float = 0.8  # ... whose last rise per step must keep this share of the first one's
    p: float = 1e-3
    late_share: float = 0.3
    factor_strong: float = 3.0  # a curve that tripled ...
    min_pace: float = 0.3  # ... and at its final pace would add this share of its level over another run
    start_points: int = stats.START_POINTS  # the initial level: the median of the first this many points

    def unavailable(self, run: Run) -> str | None:
        if not curves.norm_curves(run):
            return "needs weight-norm series (weight_norm, weight_norm/<layer>) or three or more checkpoints"
        return None

    def check(self, run: Run) -> Iterator[Finding]:
        grow = [ch for c in curves.norm_curves(run)
                if (ch := curves.norm_change(c, start_points=self.start_points)) is not None
                and curves.trending(ch, +1, self.p)
                and ((ch["factor"] >= self.factor and (ch["late_share"] >= self.late_share or (
                    ch["factor"] >= self.factor_strong and ch["final_pace"] >= self.min_pace)))
                     if ch["points"] >= 8 else
                     ch["late_share"] >= self.late_share and ch["factor"] >= self.factor_few
                     and ch["pace_kept"] >= self.pace_few)]
        if not grow:
            return
        top = max(grow, key=lambda ch: ch["factor"])
        ev = {**top, "curves_growing": [ch["series"] for ch in grow][:20], "n_growing": len(grow)}
        yield Finding.of(self, severity="warning", step=top["first_step"], step_end=top["last_step"],
                         series=top["series"], evidence=ev, sources=tuple({"series": ch["series"]} for ch in grow[:20]),
                         summary=(f"{top['series']} grows ×{top['factor']:.3g} ({_ends(run, top, self.start_points)}) "
                                  f"over steps {top['first_step']}-{top['last_step']} and is still rising"
                                  + (f"; {len(grow) - 1} more curves grow too" if len(grow) > 1 else "")))


def _ends(run: Run, ch: dict, start_points: int) -> str:
    """`median 7.384 of steps 25-75 → median 18.35 of steps 1350-1500`: the curve's levels as the file shows them."""
    c = next(c for c in curves.norm_curves(run) if c.name == ch["series"])
    head, tail = curve_ends(c.steps, c.values, start_points, checkpoints=c.source.get("table") == "tensor_stats",
                            first_point=ch.get("initial_from") == "first point")
    return f"{head} → {tail}"
