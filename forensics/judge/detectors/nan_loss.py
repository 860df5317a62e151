"""nan_loss: the training loss becomes NaN or ±Inf."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from forensics.judge.detectors.base import NONFINITE, src
from forensics.judge.findings import Finding
from forensics.judge.run import Run


@dataclass(frozen=True)
class NanLoss:
    """The training loss becomes NaN or ±Inf.

    Detects: the first logged step whose loss is not finite (the onset, exact to the logged step).
    False alarms: fires on 0 of the 171 healthy runs it could check (at most 1.8% at 95% confidence;
    benchmarks/calibrate.py over the corpus tune + calib parts and shared/real_runs).
    Why: the first non-finite value is where the run died; every later value is a symptom.
    Evidence: onset step and value, last finite step and value, how much of the rest is non-finite, and the
    gradient norm at the last finite step against its earlier median where a grad-norm series exists.
    A loss that turns finite again right after is still reported, as a warning, with `stays_nonfinite` false.
    """

    kind: ClassVar[str] = "nan_loss"
    stage: ClassVar[int] = NONFINITE
    joins_chain: ClassVar[bool] = True  # one event with the NaN its step range holds
    nonfinite: ClassVar[bool] = True  # a non-finite value: where replay starts
    requires: ClassVar[tuple[str, ...]] = ("loss",)
    stays_fraction: float = 0.5  # non-finite share of the points after the onset that counts as "stays so"

    def check(self, run: Run) -> Iterator[Finding]:
        steps, values = run.arrays("loss")
        bad = ~np.isfinite(values)
        if not bad.any():
            return
        i = int(np.argmax(bad))
        after = float(bad[i + 1:].mean()) if i + 1 < bad.size else 1.0  # the points after the onset
        stays = bool(bad[-1]) or after >= self.stays_fraction
        ev = {"onset_step": int(steps[i]), "onset_value": values[i], "nonfinite_points": int(bad.sum()),
              "nonfinite_fraction_after": after, "stays_nonfinite": stays,
              "last_finite_step": int(steps[i - 1]) if i > 0 else None,
              "last_finite_value": float(values[i - 1]) if i > 0 else None}
        sources = [src(run, "loss", steps)]
        if run.has("grad_norm") and i > 0:
            gs, gv = run.arrays("grad_norm")
            before = gv[(gs < steps[i]) & np.isfinite(gv)]
            if before.size >= 2:
                ev.update(grad_norm_before=float(before[-1]), grad_norm_median=float(np.median(before)))
                sources.append(src(run, "grad_norm", gs[gs < steps[i]]))
        first = "at the first logged step" if i == 0 else f"after {ev['last_finite_value']:.4g} at step {ev['last_finite_step']}"
        how = "and stays non-finite" if stays else f"then turns finite again ({after:.0%} non-finite after)"
        yield Finding.of(self, severity="critical" if stays else "warning", step=int(steps[i]),
                         series=run.pick("loss"), evidence=ev, sources=tuple(sources),
                         summary=f"loss is {ev['onset_value']} from step {steps[i]} {first} {how}")
