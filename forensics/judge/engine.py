"""The engine: run every detector over a `Run`, tie findings and spikes into events, list what could not run.

`analyze_run(run, detectors)` is pure (a Run in, an `Analysis` out); `store_analysis(con, analysis)` hands
it to `ingest.writes.insert_analysis`, which writes the `analyses`, `findings`, `spikes` and `skipped` tables
in one transaction. Detector instances come from `forensics.judge.settings.build_detectors`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from forensics import __version__

from forensics.judge import catalog, stats
from forensics.judge.detectors import ALL, CHAIN_KINDS, REACH
from forensics.judge.detectors.base import Detector, epoch_view, gan_pair, missing_reason, reinforcement_learning
from forensics.judge.findings import Analysis, Finding, Skip, Spike
from forensics.judge.run import Run
from forensics.judge.verdict import headline_index
from ingest import writes

# True in tests (and under `FORENSICS_STRICT=1`, which the CLI reads): a detector that raises fails instead of
# becoming a skipped check.
STRICT = False

# Roles whose series get a spike list (the catalog's "spike timesteps for every series where it finds them":
# the series where a spike means something — losses and gradient norms).
SPIKE_ROLES = ("train_loss", "val_loss", "grad_norm", "layer_grad_norm")


def analyze_run(run: Run, detectors: Sequence[Detector] | None = None,
                spike: stats.SpikeRule = stats.SpikeRule()) -> Analysis:
    """Run `detectors` (default: all, with default thresholds) over `run` and tie the results into events.
    `spike` is what a spike is in this analysis, for the spike list; the detectors that read spikes were given
    the same rule when they were built (`Selection.detectors`)."""
    detectors = list(detectors) if detectors is not None else [c() for c in ALL]
    out = Analysis(run=run.name, run_id=run.run_id)
    findings: list[Finding] = []
    shape = epoch_view(run)  # what a detector of the curve's shape reads (`reads_shape`): the epoch aggregate
    for d in detectors:
        seen = shape if getattr(d, "reads_shape", False) else run
        reason = missing_reason(d, seen)
        if reason is not None:
            out.skipped.append(Skip(d.kind, reason))
            continue
        try:
            findings.extend(_checked(d, seen))
        except Exception as e:  # one detector's bug costs its own kind, never the diagnosis (STRICT raises)
            if STRICT:
                raise
            out.skipped.append(Skip(d.kind, f"the detector stopped on this run ({type(e).__name__}: {e}), so this "
                                            "kind was not judged; a bug in run-forensics, worth reporting"))
    out.skipped.extend(Skip(k, f"not yet detected: {why}") for k, why in catalog.NOT_YET_DETECTED.items())
    findings = drop_restated(findings, detectors)
    spikes = series_spikes(run, spike)
    findings.sort(key=Finding.sort_key)
    out.findings, out.spikes = tie_events(run, findings, spikes)
    if bool(run.meta["ordinal"].fill_null(False).any()) or run.composed():  # say where steps are in the writer's words
        out.findings = [f.with_positions(run.writer_positions(f.series, [f.step, f.step_end]))
                        for f in out.findings]
    out.headline_index = headline_index(out.findings)
    out.nonfinite = run.first_nonfinite()
    out.checked = {"series": {r: run.pick(r) for r in ("loss", "val_loss", "grad_norm", "lr") if run.has(r)},
                   "detectors_run": sorted({d.kind for d in detectors} - {s.kind for s in out.skipped}),
                   "n_series": run.meta.height}
    rl = reinforcement_learning(run)
    if rl is not None:  # the verdict says which curves were judged, and why the losses were not as a training loss
        out.checked["reinforcement_learning"] = {"evidence": rl.evidence, "objectives": list(rl.objectives)}
    gan = gan_pair(run) if rl is None else None
    if gan is not None:  # the same for a GAN's two losses, judged as a pair (detectors.adversarial)
        out.checked["gan_pair"] = {"generator": gan.generator, "discriminator": gan.discriminator}
    reduced = {n: r for n in run.meta["name"].to_list() if (r := run.reduced(n))}
    if reduced:  # what a reader of these findings must know: the statistics saw M4 buckets of these series
        out.checked["reduced"] = reduced
        out.findings = [f.with_reduction(reduced[f.series]) if f.series in reduced else f for f in out.findings]
    return out


def drop_restated(findings: list[Finding], detectors: Sequence[Detector]) -> list[Finding]:
    """The findings less those that say again what another finding already says: one observation, one kind. Each
    detector decides for its own findings: `restates(finding, findings)` where it defines one, else whether a kind
    it `yields_to` fired."""
    fired = {f.kind for f in findings}
    by_kind = {d.kind: d for d in detectors}

    def restated(f: Finding) -> bool:
        d = by_kind.get(f.kind)
        own = getattr(d, "restates", None)
        return own(f, findings) if own is not None else bool(set(getattr(d, "yields_to", ())) & fired)

    return [f for f in findings if not restated(f)]


def _checked(d: Detector, run: Run) -> list[Finding]:
    """The findings of `d` on `run`; for a detector that reads a training and a validation loss side by side
    (`reads_pairs`), on the picked pair, else on the first part of a loss of several parts that shows one
    (`Run.loss_pairs`: the pathology may sit in one part while the total and the other parts look sound); for one
    that reads single records (`reads_parts`), on the picked loss, else on the first other part of a loss logged only
    as parts that shows one (`Run.loss_parts`)."""
    views = [run.paired(train, val) for train, val in run.loss_pairs()[1:]] if getattr(d, "reads_pairs", False) else \
        [run.part(train) for train in run.loss_parts()[1:]] if getattr(d, "reads_parts", False) else []
    found = list(d.check(run))
    for view in views:
        if found:
            break
        found = list(d.check(view))
    return found


def series_spikes(run: Run, rule: stats.SpikeRule = stats.SpikeRule()) -> list[Spike]:
    """Spike timesteps of every loss and gradient-norm series, under the analysis's spike rule."""
    out = []
    for name in [n for role in SPIKE_ROLES for n in run.all_of(role)]:
        found = run.spikes(name, rule)
        out.extend(Spike(name, r["step"], r["value"], r["baseline"], r["z"]) for r in found.iter_rows(named=True))
    return sorted(out, key=lambda s: (s.step, s.series))


def tie_events(run: Run, findings: list[Finding], spikes: list[Spike]) -> tuple[list[Finding], list[Spike]]:
    """Give findings and spikes of one event one id (DECISIONS.md §8).

    Two items belong together when an edge of one (its step or step_end) lies within `tol` steps of an edge
    of the other: a loss spike and a grad-norm spike at one step; exploding gradients ending where the loss
    turns NaN; a divergence whose end meets the NaN onset. Findings of `CHAIN_KINDS` also join when their
    ranges overlap, and take in every spike or one-step finding inside their range (a loss spike in the
    middle of a divergence is part of it); a chain finding whose cause may lie further back (its class's `reach`:
    non-finite weights since the last finite checkpoint) joins another chain finding in that range. `tol` is two logging intervals of the loss (or
    of the grad norm). Run-wide findings (no step) are events of their own.
    """
    role = "loss" if run.has("loss") else ("grad_norm" if run.has("grad_norm") else None)
    tol = 2 * stats.cadence(run.arrays(role)[0]) if role else 1.0
    items: list[tuple[float, float]] = []
    for f in findings:
        items.append((f.step, f.step_end if f.step_end is not None else f.step) if f.step is not None else (math.nan, math.nan))
    items.extend((s.step, s.step) for s in spikes)
    n = len(items)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    edges = np.array([[a, b] for a, b in items], dtype=float).reshape(-1, 2)
    chain = np.array([f.kind in CHAIN_KINDS for f in findings] + [False] * len(spikes))
    reach = edges.copy()  # where a chain finding's cause may lie (REACH): wider than its steps, for chain joins only
    for i, f in enumerate(findings):
        wide = REACH[f.kind](f) if f.kind in REACH else None
        if wide is not None:
            reach[i] = wide
    for i in range(n):  # O(items²); items are findings and spikes, a few hundred at most, not data points
        if math.isnan(edges[i, 0]):
            continue
        d = np.abs(edges[:, :, None] - edges[i][None, None, :]).min(axis=(1, 2))
        close = d <= tol
        if chain[i]:  # chain kinds join when their ranges overlap, and a spike (any one-step item) inside one joins it
            overlap = (edges[:, 0] <= edges[i, 1] + tol) & (edges[:, 1] >= edges[i, 0] - tol)
            close |= overlap & (chain | (edges[:, 0] == edges[:, 1]))
            close |= chain & (reach[:, 0] <= reach[i, 1] + tol) & (reach[:, 1] >= reach[i, 0] - tol)
        for j in np.flatnonzero(close):
            parent[find(int(j))] = find(i)
    # Events are numbered from 1 in step order, the findings' events first: a report that lists findings shows
    # e1, e2, ... without gaps left by events of spikes alone.
    ids: dict[int, int] = {}
    nf = len(findings)
    order = sorted(range(n), key=lambda i: (i >= nf, math.isnan(edges[i, 0]),
                                            edges[i, 0] if not math.isnan(edges[i, 0]) else 0))
    for i in order:
        ids.setdefault(find(i), len(ids) + 1)
    return ([f.with_event(ids[find(i)]) for i, f in enumerate(findings)],
            [dataclasses.replace(s, event=ids[find(nf + k)]) for k, s in enumerate(spikes)])


def store_analysis(con: Any, analysis: Analysis, settings: dict[str, str] | None = None, *,
                   transaction: bool = True) -> int:
    """Write one analysis in one transaction (`transaction=False`: in the caller's): its verdict, reason, headline, restriction, read problems, then
    findings (by step then severity, with their event ids), spikes and skips; its id. What is stored here is what
    the app, `forensics runs`, watch and `analyze --all` show: none of them judges again."""
    aid = writes.insert_analysis(
        con, analysis.run_id, engine_version=__version__, settings=settings or {},
        verdict={"healthy": analysis.healthy, "verdict": analysis.verdict, "verdict_reason": analysis.verdict_reason,
                 "headline_id": analysis.headline_index, "only_kinds": list(analysis.only),
                 "skip_kinds": list(analysis.skip), "read_problems": analysis.read_problems,
                 "unknown_files": list(analysis.unknown_files)},
        findings=[{"finding_id": i, "kind": f.kind, "severity": f.severity, "step": f.step, "step_end": f.step_end,
                   "series": f.series, "summary": f.summary, "evidence": f.evidence, "causes": list(f.causes),
                   "checks": list(f.checks), "sources": list(f.sources), "event_id": f.event}
                  for i, f in enumerate(analysis.findings)],
        spikes=[{"series": s.series, "step": s.step, "value": s.value, "baseline": s.baseline, "z": s.z,
                 "event_id": s.event} for s in analysis.spikes],
        skipped=[(s.kind, s.reason) for s in analysis.skipped], transaction=transaction)
    analysis.analysis_id = aid
    return aid
