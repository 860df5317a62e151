"""loss_spike: isolated jumps of the training loss far above its local level."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from forensics import stats
from forensics.detectors.base import src, too_short
from forensics.findings import Finding
from forensics.numbers import count, ratio
from forensics.run import Run


@dataclass(frozen=True)
class LossSpike:
    """The loss jumps far above its recent level and comes back.

    Detects: a step whose loss is at least `z` robust sigmas (MAD of the trailing `window` points) and
    `min_ratio` of its level above the trailing median, and that recovers within `recover` points (else
    it is a level shift: see divergence). Scale-free: sigma and level are the series' own.
    Why: spikes usually come before divergence; the first one is often the earliest cause (a bad batch).
    Evidence: step, loss, trailing median and sigma, z, ratio to the median, window, recovery length.
    """

    kind: ClassVar[str] = "loss_spike"
    requires: ClassVar[tuple[str, ...]] = ("loss",)
    window: int = 30  # trailing points of the baseline
    z: float = 8.0  # robust z threshold
    min_ratio: float = 0.25  # the jump must also be this fraction of the local level
    recover: int = 5  # points after the spike within which it must come back

    def unavailable(self, run: Run) -> str | None:
        return too_short(run, "loss", 10)

    def check(self, run: Run) -> Iterator[Finding]:
        steps, values = run.arrays("loss")
        found = stats.spikes(steps, values, self.window, self.z, self.min_ratio, self.recover)
        for s in found.iter_rows(named=True):  # one row per spike episode
            yield Finding.of(self, severity="warning", step=s["step"], step_end=s["end_step"],
                             series=run.pick("loss"), evidence=s,
                             sources=(src(run, "loss", [s["window_start"], s["end_step"]]),),
                             summary=(f"loss {s['value']:.4g} is {s['z']:.1f} robust sigmas above the median "
                                      f"{s['baseline']:.4g} of steps {s['window_start']}-{s['window_end']} "
                                      f"({ratio(s['ratio'])}), back within {count(s['recovery_points'], 'point')}"))
