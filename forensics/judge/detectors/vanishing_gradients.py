"""vanishing_gradients: early layers' gradient norms are orders of magnitude below later layers'."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from forensics.judge import catalog, stats
from forensics.judge.detectors.base import UPSTREAM, reinforcement_learning
from forensics.judge.findings import Finding
from forensics.judge.numbers import times
from forensics.judge.run import Run


def _layer_order(name: str) -> tuple:
    """Natural order of layer names: `layers.2` before `layers.10`."""
    return tuple(int(t) if t.isdigit() else t for t in re.findall(r"\d+|\D+", name))


@dataclass(frozen=True)
class VanishingGradients:
    """Early layers' gradient norms are orders of magnitude below later layers'.

    Detects: from logged per-layer gradient norms (role layer_grad_norm), the median norm of the first
    layer (natural name order) is at most `ratio` times that of the last one. Layers whose norm is exactly 0
    at every logged step have no gradient at all (frozen, or not in the graph: frozen_parameters' business)
    and are left out of the comparison. Not in a reinforcement-learning run (`base.reinforcement_learning`): an
    agent logs one norm per network (actor, critic, world model), not per layer. Without per-layer logs it is
    skipped: computing them from a checkpoint and a batch waits for replay.
    False alarms: fires on 0 of the 13 healthy runs it could check (at most 23% at 95% confidence;
    benchmarks/calibrate.py over the corpus tune + calib parts and shared/real_runs).
    Why: early layers stop learning (saturating activations, init, no residual paths or normalisation).
    Evidence: first and last layer, their median norms, ratio, layer count.
    """

    kind: ClassVar[str] = "vanishing_gradients"
    stage: ClassVar[int] = UPSTREAM
    requires: ClassVar[tuple[str, ...]] = ()
    ratio: float = 1e-3

    def unavailable(self, run: Run) -> str | None:
        rl = reinforcement_learning(run)
        if rl is not None and len(run.all_of("layer_grad_norm")) >= 2:
            return (f"a reinforcement-learning run (it logs {rl.evidence}): its gradient norms are one per network "
                    f"(actor, critic, world model), whose scales differ by design, not the layers of one network")
        if len(run.all_of("layer_grad_norm")) >= 2:
            return None
        return f"the logs have no per-layer gradient norms; {catalog.NEEDS_REPLAY}"

    def check(self, run: Run) -> Iterator[Finding]:
        names = sorted(run.all_of("layer_grad_norm"), key=lambda n: _layer_order(run.layer_of(n) or n))
        values = {n: run.series_named(n)["value"].fill_null(np.nan).to_numpy() for n in names}
        names = [n for n in names if np.any(np.isfinite(values[n]) & (values[n] != 0))]
        if len(names) < 2:
            return
        levels = {n: stats.level(values[n]) for n in names}
        first, last = names[0], names[-1]
        a, b = levels[first], levels[last]
        if not (np.isfinite(a) and np.isfinite(b) and b > 0 and a <= self.ratio * b):
            return
        steps = run.series_named(first)["step"]
        ev = {"first_layer": run.layer_of(first) or first, "last_layer": run.layer_of(last) or last,
              "first_norm": a, "last_norm": b, "ratio": a / b, "layers": len(names)}
        yield Finding.of(self, severity="warning", step=int(steps[0]), step_end=int(steps[-1]), series=first,
                         evidence=ev, sources=tuple({"table": "scalars", "series": n} for n in (first, last)),
                         summary=(f"gradient norm of the first layer {ev['first_layer']} (median {a:.3g} over its "
                                  f"points) is {times(a / b)} that of the last layer {ev['last_layer']} (median {b:.3g})"))
