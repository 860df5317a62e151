"""memory_growth: memory use grows steadily over steps."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from forensics.judge import stats
from forensics.judge.detectors.base import UPSTREAM, head_tail_of, src, too_short
from forensics.judge.findings import Finding
from forensics.judge.run import Run
import numpy as np


@dataclass(frozen=True)
class MemoryGrowth:
    """Memory use grows steadily over steps.

    Detects: after skipping the first `warmup` of the points (allocators and caches fill up first), the
    memory series rises by at least `min_growth` of its level with a Mann–Kendall p below `p` and a
    positive Theil–Sen slope, and still grows over the last half of the run (its Theil–Sen slope there
    projects at least `late_share` of the whole growth): caches that fill over the first epoch and then
    hold are not a leak.
    False alarms: fires on 0 of the 35 healthy runs it could check (at most 8.6% at 95% confidence;
    benchmarks/calibrate.py over the corpus tune + calib parts and shared/real_runs, Nov 2026).
    Why: a leak (loss tensors kept instead of loss.item(), growing caches) ends in an out-of-memory crash.
    Evidence: start and end level, growth, slope per step, p.
    """

    kind: ClassVar[str] = "memory_growth"
    stage: ClassVar[int] = UPSTREAM
    requires: ClassVar[tuple[str, ...]] = ("memory",)
    warmup: float = 0.1
    min_growth: float = 0.2
    p: float = 1e-3
    late_share: float = 0.25

    def unavailable(self, run: Run) -> str | None:
        return too_short(run, "memory", 10)

    def check(self, run: Run) -> Iterator[Finding]:
        steps, m = run.arrays("memory")
        k = int(m.size * self.warmup)
        steps, m = steps[k:], m[k:]
        head, tail = stats.head_tail_levels(m)
        trend = stats.mann_kendall(m, steps)
        slope, _ = stats.theil_sen(steps, m)
        if not (head > 0 and tail - head >= self.min_growth * head and trend.p < self.p and slope > 0):
            return
        half = m.size // 2
        late_slope, _ = stats.theil_sen(steps[half:], m[half:])
        late = late_slope * float(steps[-1] - steps[half]) if m.size - half >= 2 else 0.0
        if not late >= self.late_share * (tail - head):
            return
        ev = {"start_level": head, "end_level": tail, "growth": (tail - head) / head, "slope_per_step": slope,
              "mk_p": trend.p, "late_growth_share": late / (tail - head)}
        yield Finding.of(self, severity="warning", step=int(steps[0]), step_end=int(steps[-1]),
                         series=run.pick("memory"), evidence=ev, sources=(src(run, "memory", steps),),
                         summary=_grows(steps, m, trend.p))


def _grows(steps: np.ndarray, m: np.ndarray, p: float) -> str:
    """The sentence, with the medians of the first and last tenth named as such (`head_tail_of`)."""
    (head, head_text), (tail, tail_text) = head_tail_of(steps, m)
    return (f"memory grows from the {head_text} to the {tail_text} (+{(tail - head) / head:.0%}) over steps "
            f"{steps[0]}-{steps[-1]} (Mann–Kendall p={p:.1g})")
