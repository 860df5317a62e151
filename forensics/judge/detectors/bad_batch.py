"""bad_batch: a saved batch holds NaN/Inf or extreme outliers, or is on another scale than the run's other batches."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import polars as pl

from forensics.judge import numbers, stats
from forensics.judge.detectors.base import UPSTREAM
from forensics.judge.findings import Finding
from forensics.judge.run import Run


@dataclass(frozen=True)
class BadBatch:
    """A saved batch holds NaN/Inf, samples with extreme outlier norms, or is off the scale of the other batches.

    Detects: per saved batch, tensors with NaN/Inf (`batch_stats.n_nan/n_inf`, critical) or samples
    whose norm lies at robust z ≥ `z` above the batch's median norm (warning; only norms far above the rest, not
    blank samples; batches of at least `min_samples`). Across the
    run's batches (≥ 3), a floating tensor whose RMS per element is more than `fold` times above (or below)
    that of every other batch taken as normal (warning): a whole batch scaled by a unit bug is invisible
    within the batch. Batches saved at a loss spike or from the first non-finite loss on are not taken as
    normal, so a run that saved each spike's batch beside the one before it is judged against the latter.
    One finding per batch: a corrupt sample usually shows in several of its tensors (input and target).
    False alarms: fires on 0 of the 53 healthy runs it could check (at most 5.7% at 95% confidence;
    benchmarks/calibrate.py over the corpus tune + calib parts and shared/real_runs).
    Why: one corrupt sample or batch can spike or poison a step; the indices point at the data to inspect.
    Evidence: batch path and step, the tensors, non-finite counts, sample indices, largest outlier z, the
    scale ratio to the median of the normal batches and how many there were, the loss spike at that step.
    """

    kind: ClassVar[str] = "bad_batch"
    stage: ClassVar[int] = UPSTREAM
    requires: ClassVar[tuple[str, ...]] = ()
    z: float = 10.0
    min_samples: int = 4  # a median and a MAD of fewer sample norms say little
    fold: float = 10.0  # an order of magnitude beyond every normal batch: natural batch-to-batch spread is far less
    spike: stats.SpikeRule = field(default_factory=stats.SpikeRule)  # the analysis's one rule (`--set spike.z=`)

    def unavailable(self, run: Run) -> str | None:
        return None if run.table("batch_stats").height else "no saved batches in this run"

    def check(self, run: Run) -> Iterator[Finding]:
        bs = run.table("batch_stats").join(run.table("batches").select("batch_id", "path"), on="batch_id", how="left")
        scaled = self._off_scale(run, bs)
        for (batch_id,), rows in bs.sort("step", "batch_id", "tensor").group_by("batch_id", maintain_order=True):
            tensors, bad_samples, far_samples, zs, n_nan, n_inf = [], set(), set(), [], 0, 0
            for b in rows.iter_rows(named=True):  # one row per saved tensor, not per point
                nonfinite = (b["n_nan"] or 0) + (b["n_inf"] or 0)
                big = self.outliers(b["sample_norms"])
                if not nonfinite and not big and (batch_id, b["tensor"]) not in scaled:
                    continue
                tensors.append(b["tensor"])
                n_nan, n_inf = n_nan + (b["n_nan"] or 0), n_inf + (b["n_inf"] or 0)
                bad_samples.update(b["nonfinite_samples"] or [])
                far_samples.update(s for s, _ in big)
                zs.extend(z for _, z in big)
            if not tensors:
                continue
            first = rows.row(0, named=True)
            critical = n_nan + n_inf > 0
            ordered = sorted(bad_samples if critical else far_samples)  # the NaN samples first: they poison the step
            off = [scaled[(batch_id, t)] for t in tensors if (batch_id, t) in scaled]
            worst = max(off, key=lambda o: abs(np.log10(o["scale_ratio"])), default=None)
            ev = {"batch": first["path"], "batch_step": first["step"], "tensors": tensors, "n_nan": n_nan,
                  "n_inf": n_inf, "samples": ordered[:20], "max_outlier_z": max(zs) if zs else None,
                  **(worst or {"scale_ratio": None, "normal_batches": None, "loss_spike_step": None})}
            samples = f"{'sample' if len(ordered) == 1 else 'samples'} {numbers.ints(ordered, 5)}"
            if critical:
                what = f"{numbers.count(n_nan + n_inf, 'NaN/Inf value')} in {', '.join(tensors)}, {samples}"
            elif zs:
                what = f"outlier samples (z up to {max(zs):.1f}) in {', '.join(tensors)}, {samples}"
            else:
                what = (f"{worst['tensor']} at {numbers.ratio(worst['scale_ratio'])} the median RMS of the same tensor in "
                        f"{worst['normal_batches']} batches saved at normal steps" + (
                            f", at the loss spike of step {worst['loss_spike_step']}"
                            if worst["loss_spike_step"] is not None else ""))
            yield Finding.of(self, severity="critical" if critical else "warning", step=first["step"], series=None,
                             evidence=ev, sources=tuple({"table": "batch_stats", "path": first["path"], "tensor": t}
                                                        for t in tensors),
                             summary=f"batch {first['path']} (step {first['step']}) holds {what}")

    def outliers(self, norms: list[float] | None) -> list[tuple[int, float]]:
        """(sample, robust z) of the samples whose norm lies `z` or more robust sigmas above the batch's median
        norm (`stats.robust_scale`: from the MAD, else the mean absolute deviation; none when all are equal).
        Ingest stores the norms (`batch_stats.sample_norms`); the judgement is made here."""
        x = np.asarray(norms if norms is not None else [], dtype=float)
        if x.size < self.min_samples:
            return []
        zs = (x - np.median(x)) / stats.robust_scale(x)
        return [(int(i), float(zs[i])) for i in np.flatnonzero(zs >= self.z)]

    def _off_scale(self, run: Run, bs: pl.DataFrame) -> dict[tuple[int, str], dict]:
        """(batch_id, tensor) -> evidence for floating tensors an order of magnitude off the normal batches."""
        floats = bs.filter(pl.col("dtype").str.contains("float") & pl.col("l2").is_not_null())
        if floats.height == 0 or floats["batch_id"].n_unique() < 3:
            return {}
        spikes, onset = _loss_events(run, self.spike)
        out = {}
        for (tensor,), rows in floats.group_by("tensor"):  # one group per tensor name, a handful
            numel = np.array([float(np.prod(s)) if s else 1.0 for s in rows["shape"].to_list()])
            rms = rows["l2"].to_numpy() / np.sqrt(np.maximum(numel, 1.0))
            at = [_spike_at(spikes, s) for s in rows["step"].to_list()]
            event = np.array([a is not None or (s is not None and onset is not None and s >= onset)
                              for a, s in zip(at, rows["step"].to_list())], dtype=bool)
            flags, ratio = stats.fold_outliers(rms, ~event, self.fold)
            for i in np.flatnonzero(flags).tolist():
                out[(int(rows["batch_id"][i]), tensor)] = {
                    "tensor": tensor, "scale_ratio": float(ratio[i]),
                    "normal_batches": int((~event).sum() - (not event[i])), "loss_spike_step": at[i]}
        return out


def _spike_at(spikes: list[tuple[int, int, int]], step: int | None) -> int | None:
    """The peak step of the loss spike whose logged interval (lo, hi] holds `step`, else None."""
    if step is None:
        return None
    return next((peak for lo, hi, peak in spikes if lo < step <= hi), None)


def _loss_events(run: Run, rule: stats.SpikeRule) -> tuple[list[tuple[int, int, int]], int | None]:
    """Loss spike episodes as (previous logged step, last step, peak step), so a batch saved at any step the
    spike's logged points cover is matched, and the first non-finite loss step (None when all are finite)."""
    if not run.has("loss"):
        return [], None
    steps, values = run.arrays("loss")
    bad = ~np.isfinite(values)
    onset = int(steps[np.argmax(bad)]) if bad.any() else None
    found = run.spikes(run.pick("loss"), rule)  # the loss's spikes, computed once per analysis (Run.spikes)
    out = []
    for s in found.iter_rows(named=True):  # one row per spike episode
        k = int(np.searchsorted(steps, s["start_step"]))
        out.append((int(steps[k - 1]) if k > 0 else int(s["start_step"]) - 1, int(s["end_step"]), int(s["step"])))
    return out, onset


def outlier_samples(summary: dict) -> dict:
    """`forensics checkpoints`' saved batches with their outlier samples by this detector's rule and default
    threshold (the store keeps per-sample norms, not a verdict); tensors with neither NaN/Inf nor outlier samples
    are left out."""
    judge = BadBatch()
    for b in summary["batches"]:
        tensors = []
        for t in b["tensors"]:
            far = judge.outliers(t.pop("sample_norms"))
            if t["nonfinite_samples"] or far:
                tensors.append(t | {"outlier_samples": [s for s, _ in far], "outlier_z": [z for _, z in far]})
        b["tensors"] = tensors
    return summary
