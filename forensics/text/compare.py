"""`forensics compare` as a person reads it: terminal text and markdown of a `services.compare.Comparison`."""

from __future__ import annotations

import math
from typing import Any

from forensics.judge import numbers
from forensics.text.render import fenced, md
from forensics.text.render import lines as joined


def parting_words(p: Any, sibling: str) -> str:
    """`train/loss leaves healthy_mlp's at step 10 (above: 6.4 vs 1.6, ×4.1; band ×1.5)`, or why it does not."""
    if p is None:
        return "no loss curve in one of the runs: nothing to align"
    if p.step is None:
        over = f" over steps {p.overlap[0]}-{p.overlap[1]}" if p.overlap else ""
        return f"{p.series} and {sibling}'s {p.sibling_series} do not part: {p.note} ({p.aligned_points} aligned points{over})"
    if p.direction == "non-finite":
        return f"{p.series} leaves {sibling}'s at step {p.step}: it turns non-finite while {sibling}'s is finite"
    band = numbers.ratio(p.band) if p.log_scale else f"±{numbers.sig(p.band)}"
    factor = (f", {numbers.ratio(p.value / p.sibling_value)}" if p.log_scale and p.sibling_value else "")
    return (f"{p.series} leaves {sibling}'s at step {p.step} ({p.direction}: {numbers.sig(p.value)} vs "
            f"{numbers.sig(p.sibling_value)}{factor}; noise band {band}), {p.aligned_points} aligned points over steps "
            f"{p.overlap[0]}-{p.overlap[1]}")


def mover_words(m: Any) -> str:
    if m.direction == "non-finite":
        return f"{m.series} at step {m.step} (non-finite)"
    factor = (numbers.ratio(m.value / m.sibling_value) if m.log_scale and m.sibling_value and
              math.isfinite(m.value) else f"{numbers.sig(m.value)} vs {numbers.sig(m.sibling_value)}")
    start = ", apart from the first aligned step" if m.note.startswith("apart from the first") else ""
    return f"{m.series} at step {m.step} ({m.direction}, {factor}{start})"


def _head(c: Any) -> str:
    h = c.headline
    if not h:
        return f"{c.run}: {c.verdict}"
    at = "" if h["step"] is None else (f" at step {h['step']}" if h["step_end"] in (None, h["step"])
                                       else f" at steps {h['step']}-{h['step_end']}")
    return f"{c.run}: {c.verdict}, earliest cause {h['kind']}{at}"


def text(c: Any) -> str:
    out = [_head(c)]
    if c.siblings:
        out += ["", "siblings (best first):"]
        out += [f"  {i}. {s.name}: {s.why}" for i, s in enumerate(c.siblings, 1)]
        out += ["", "where they part: " + parting_words(c.parting, c.sibling.name)]
        if c.movers:
            out.append(f"  moved first, at or before step {c.parting.step}: " + "; ".join(mover_words(m) for m in c.movers))
        if c.settings:
            what = c.headline["kind"] if c.headline else "the diagnosis"
            out += ["", f"settings that differ from {c.sibling.name} (ranked by what {what} implicates):"]
            for s in c.settings[:12]:
                why = f"  [{s.implicated_by} implicates it]" if s.implicated_by else ""
                out.append(f"  {s.rank}. {s.key}: {s.change}{why}")
            if len(c.settings) > 12:
                out.append(f"  ... {len(c.settings) - 12} more (--json lists them all)")
        if c.team:
            out += ["", "what the store's runs say (counts of runs, an association, not a cause):"]
            out += [f"  {t.text}" for t in c.team]
    out += [f"note: {n}" for n in c.notes]
    return joined(out)


def markdown(c: Any) -> str:
    out = [f"# run-forensics compare: {md(c.run)}", "", f"**{md(_head(c))}**", ""]
    if c.siblings:
        out += ["## Siblings", ""] + [f"{i}. **{md(s.name)}**: {md(s.why)}" for i, s in enumerate(c.siblings, 1)]
        out += ["", "## Where they part", "", md(parting_words(c.parting, c.sibling.name)), ""]
        if c.movers:
            out += ["Moved first: " + "; ".join(md(mover_words(m)) for m in c.movers), ""]
        if c.settings:
            out += ["## Settings that differ", "", "| rank | key | change | implicated by |", "|---|---|---|---|"]
            out += [f"| {s.rank} | {md(s.key)} | {md(s.change)} | {f'`{s.implicated_by}`' if s.implicated_by else ''} |" for s in c.settings]
            out.append("")
        if c.team:
            out += ["## What the store's runs say", "", "Counts of runs; an association, not a cause.", ""]
            out += fenced([t.text for t in c.team]) + [""]
    out += [f"- {md(n)}" for n in c.notes]
    return joined(out)
