"""memory_growth: memory use grows steadily over steps."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from forensics.judge import stats
from forensics.judge.detectors.base import UPSTREAM, by_launch, head_tail_of, src, too_short
from forensics.judge.findings import Finding
from forensics.judge.run import Run
import numpy as np

# Memory series that do not measure use: what is free or available falls as use grows; a total or a clock is fixed; the
# kernel's page cache and shared memory (procps free's `buff/cache`, `shared`) fill as data files are read.
NOT_USE = frozenset({"available", "avail", "free", "total", "clock", "disk", "limit", "reserved_max", "buff", "buffers",
                     "cache", "shared"})


@dataclass(frozen=True)
class MemoryGrowth:
    """Memory use grows steadily over steps.

    Detects: after skipping the first `warmup` of the points, the memory series rises by at least `min_growth` of its
    level (Mann–Kendall p < `p`, positive Theil–Sen slope) and its last half still projects `late_share` of the
    growth: caches that fill and then hold are not a leak. Each launch appended to the log on its own (`by_launch`):
    launches of other configs hold other amounts. Effect size first: a series of memory in use rising at
    each of its records, `every_points` or more, by `min_growth`, its second half carrying `late_share` of it.
    Memory a console log prints above its first training record is set-up (weights loading), not training: read from
    `Run.training_opens` on.
    Why: a leak (loss tensors kept instead of loss.item(), growing caches) ends in an out-of-memory crash.
    Evidence: start and end level, growth, slope per step, p.
    False alarms: 0 of the 35 healthy runs it could check (benchmarks/calibrate.py); 0 of the 40 healthy real runs;
    0 of the 22 healthy runs it could check of the 849 pooled real runs (328 healthy), each field swept alone.
    """

    kind: ClassVar[str] = "memory_growth"
    stage: ClassVar[int] = UPSTREAM
    requires: ClassVar[tuple[str, ...]] = ("memory",)
    warmup: float = 0.1  # pooled healthy runs fired on: 0 of 22 at any warmup from 0 to 0.3
    min_growth: float = 0.2  # 0 of 22 healthy from 0.2 up; 1 at 0.1 (memory +10-20% over a console log), 2 at 0.02
    p: float = 1e-2  # 0 of 22 healthy at any p from 1e-6 to 0.05: `min_growth` decides, the trend test only guards it
    late_share: float = 0.25  # 0 of 22 healthy at any share from 0 to 0.6; at 0.6 both leaks found are lost
    every_points: int = 5  # memory rising at every one of 5 records or more, by `min_growth`: a leak at any length
    # (0 of 22 healthy at 3-10; at 3-4 a false claim on a W&B sweep's memory, at 8 a leak of 7 records is lost)

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
            st, m = _in_training(run, name, f["step"].to_numpy(), f["value"].fill_null(np.nan).to_numpy())
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
        steps, m = _in_training(run, run.pick("memory"), *run.arrays("memory"))
        for steps, m in by_launch(run, "memory", steps, m):  # a launch's memory is its own config's
            found = self._trend(run, steps, m)
            if found is not None:
                yield found
                return

    def _trend(self, run: Run, steps: np.ndarray, m: np.ndarray) -> Finding | None:
        """The trend rule on one launch's memory (`steps`, `m`), or None."""
        if m.size < 10:
            return None
        k = int(m.size * self.warmup)
        steps, m = steps[k:], m[k:]
        head, tail = stats.head_tail_levels(m)
        trend = stats.mann_kendall(m, steps)
        slope, _ = stats.theil_sen(steps, m)
        if not (head > 0 and tail - head >= self.min_growth * head and trend.p < self.p and slope > 0):
            return None
        half = m.size // 2
        late_slope, _ = stats.theil_sen(steps[half:], m[half:])
        late = late_slope * float(steps[-1] - steps[half]) if m.size - half >= 2 else 0.0
        if not late >= self.late_share * (tail - head):
            return None
        ev = {"start_level": head, "end_level": tail, "growth": (tail - head) / head, "slope_per_step": slope,
              "mk_p": trend.p, "late_growth_share": late / (tail - head)}
        return Finding.of(self, severity="warning", step=int(steps[0]), step_end=int(steps[-1]),
                          series=run.pick("memory"), evidence=ev, sources=(src(run, "memory", steps),),
                          summary=_grows(steps, m, trend.p))


def _grows(steps: np.ndarray, m: np.ndarray, p: float) -> str:
    """The sentence, with the medians of the first and last tenth named as such (`head_tail_of`)."""
    (head, head_text), (tail, tail_text) = head_tail_of(steps, m)
    return (f"memory grows from the {head_text} to the {tail_text} (+{(tail - head) / head:.0%}) over steps "
            f"{steps[0]}-{steps[-1]} (Mann–Kendall p={p:.1g})")


def _in_training(run: Run, name: str | None, steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Memory series `name`'s points from where training opens (`Run.training_opens`): what a console log prints
    above its first training record is set-up (weights loading), not training."""
    opens = run.training_opens(name)
    if opens is None:
        return steps, values
    keep = steps >= opens
    return steps[keep], values[keep]
