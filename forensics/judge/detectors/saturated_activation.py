"""saturated_activation: sigmoid/tanh outputs pinned near their bounds, from logged per-layer statistics."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from forensics.judge.detectors.base import UPSTREAM, layer_fraction_findings, layer_stats_missing
from forensics.judge.findings import Finding
from forensics.judge.run import Run


@dataclass(frozen=True)
class SaturatedActivation:
    """Sigmoid/tanh outputs pinned near their bounds.

    Detects: logged per-layer saturated fractions (series like `activations/<layer>/saturated_fraction`)
    at least `threshold` over the last `tail` of the run. Without such logs it is skipped (replay will
    compute it from a checkpoint and a batch).
    False alarms: no healthy corpus run logs what it reads (benchmarks/calibrate.py), so its
    thresholds rest on the effect sizes above, not on a measured rate.
    Why: saturated units pass no gradient (vanishing gradients).
    Evidence: layers with their saturated fraction.
    """

    kind: ClassVar[str] = "saturated_activation"
    stage: ClassVar[int] = UPSTREAM
    requires: ClassVar[tuple[str, ...]] = ()
    threshold: float = 0.5  # the catalog's "a large fraction (> 0.5)": most of the layer
    tail: float = 0.2  # the last fifth of the run: where the layer ended up, not its start

    def unavailable(self, run: Run) -> str | None:
        return layer_stats_missing(run, "saturated_fraction")

    def check(self, run: Run) -> Iterator[Finding]:
        yield from layer_fraction_findings(self, run, "saturated_fraction", "saturated outputs")
