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

# Memory series that do not measure use: what is free or available falls as use grows; a total or a clock is fixed.
NOT_USE = frozenset({"available", "avail", "free", "total", "clock", "disk", "limit", "reserved_max"})


@dataclass(frozen=True)
class MemoryGrowth:
    """Memory use grows steadily over steps.

    Detects: after skipping the first `warmup` of the points (allocators and caches fill up first), the
    memory series rises by at least `min_growth` of its level with a Mann–Kendall p below `p` and a
    positive Theil–Sen slope, and still grows over the last half of the run (its Theil–Sen slope there
    projects at least `late_share` of the whole growth): caches that fill over the first epoch and then
    hold are not a leak.
    False alarms: fires on 0 of the 35 healthy runs it could check (at most 8.6% at 95% confidence;
    benchmarks/calibrate.py over the corpus tune + calib parts and shared/real_runs).
    At any length (effect size first): a memory series of use (not free, available, total or clock) that rises at
    every one of its records, at least `every_points`, by `min_growth` of its first value, its second half carrying
    `late_share` of that growth, is a leak however few the records (GPU memory +0.03 GB at each of seven
    iterations); a process whose memory jumps while caches fill and then creeps +0.5% is not (two such W&B and
    AllenNLP logs of the wild reading corpus). False alarms: 0 of the 40 healthy real runs (shared
    real_runs, real_runs_test, real_runs_3; no memory series of a healthy run there rises at every record).
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
    every_points: int = 5  # memory rising at every one of 5 records or more, by `min_growth`: a leak at any length

    def unavailable(self, run: Run) -> str | None:
        short = too_short(run, "memory", 10)
        if short and self._every_record(run) is None:
            return short  # under 10 points only memory rising at every record can speak
        return None

    def _every_record(self, run: Run) -> tuple[str, np.ndarray, np.ndarray] | None:
        """The first memory series (by name) that rises at every one of its points, at least `every_points` of
        them, by `min_growth` of its first value: (name, steps, values). Memory that is free or available falls
        as use grows, and a total or a clock is no use: those are not read."""
        from ingest.roles import words

        for name in run.all_of("memory"):
            if set(words(name)) & NOT_USE:
                continue
            f = run.series_named(name)
            st, m = f["step"].to_numpy(), f["value"].fill_null(np.nan).to_numpy()
            ok = np.isfinite(m)
            st, m = st[ok], m[ok]
            half = m.size // 2
            if (m.size >= self.every_points and stats.rising_tail(m) == m.size and m[0] > 0
                    and m[-1] >= (1 + self.min_growth) * m[0]
                    and m[-1] - m[half] >= self.late_share * (m[-1] - m[0])):
                return name, st, m
        return None

    def check(self, run: Run) -> Iterator[Finding]:
        hit = self._every_record(run)
        if hit is not None:
            name, steps, m = hit
            ev = {"start_level": float(m[0]), "end_level": float(m[-1]), "growth": float(m[-1] / m[0] - 1),
                  "points": int(m.size), "rising_at_every_record": True}
            yield Finding.of(self, severity="warning", step=int(steps[0]), step_end=int(steps[-1]), series=name,
                             evidence=ev, sources=({"table": "scalars", "series": name, "step_min": int(steps[0]),
                                                    "step_max": int(steps[-1])},),
                             summary=(f"{name} rises at every one of its {m.size} records, from {m[0]:.4g} at step "
                                      f"{steps[0]} to {m[-1]:.4g} at step {steps[-1]} (+{ev['growth']:.0%}): "
                                      f"something is kept from step to step"))
            return
        if too_short(run, "memory", 10):
            return
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
