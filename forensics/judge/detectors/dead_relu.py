"""dead_relu: a large fraction of a ReLU layer's units output zero, from logged per-layer statistics."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from forensics.judge.detectors.base import UPSTREAM, layer_fraction_findings, layer_stats_missing
from forensics.judge.findings import Finding
from forensics.judge.run import Run


@dataclass(frozen=True)
class DeadRelu:
    """A large fraction of a ReLU layer's units output zero for every sample.

    Detects: logged per-layer dead-unit fractions (series like `activations/<layer>/dead_fraction`) whose
    level over the last `tail` of the run is at least `threshold`. Computing them from a checkpoint and
    a saved batch waits for replay; until then runs without such logs are reported as skipped.
    False alarms: fires on 0 of the 5 healthy runs it could check (at most 60% at 95% confidence;
    benchmarks/calibrate.py over the corpus tune + calib parts and shared/real_runs).
    Why: dead units never recover and waste capacity; often an LR or init problem.
    Evidence: layers with their dead fraction, steps covered.
    """

    kind: ClassVar[str] = "dead_relu"
    stage: ClassVar[int] = UPSTREAM
    requires: ClassVar[tuple[str, ...]] = ()
    threshold: float = 0.5  # the catalog's "a large fraction (> 0.5)": most of the layer
    tail: float = 0.2  # the last fifth of the run: where the layer ended up, not its start

    def unavailable(self, run: Run) -> str | None:
        return layer_stats_missing(run, "dead_fraction")

    def check(self, run: Run) -> Iterator[Finding]:
        yield from layer_fraction_findings(self, run, "dead_fraction", "dead units")
