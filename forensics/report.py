"""The diagnosis as a person reads it: terminal text (verdict first, one finding per line) and markdown."""

from __future__ import annotations

from forensics import catalog
from forensics.findings import Analysis, Finding


def _where(f: Finding) -> str:
    if f.step is None:
        return "-"
    return f"{f.step}" if f.step_end in (None, f.step) else f"{f.step}-{f.step_end}"


def verdict(a: Analysis) -> str:
    if a.healthy:
        ran = len(a.checked.get("detectors_run", []))
        return f"{a.run}: healthy: no finding from {ran} detectors ({len(a.skipped)} could not run, listed below)"
    counts = {s: sum(f.severity == s for f in a.findings) for s in ("critical", "warning", "info")}
    parts = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    return f"{a.run}: {'FAILED' if counts['critical'] else 'suspicious' if counts['warning'] else 'notes'} ({parts})"


def replay_lines(a: Analysis) -> list[str]:
    r = a.replay_from
    if not r:
        return []
    ck = r.get("checkpoint")
    b = r.get("batch")
    out = [f"replay starting point for the non-finite onset at step {r['onset_step']}:",
           f"  last finite checkpoint: {ck['path']} (step {ck['step']})" if ck else
           "  last finite checkpoint: none saved before the onset",
           f"  batch of step {b['step']}: {b['path']}" if b else f"  batch: {r.get('batch_note', 'none saved')}"]
    if r.get("command"):
        out.append(f"  replay it (runs the run's forensics_entry.py): {r['command']}")
    return out


def text(a: Analysis, verbose: bool = False) -> str:
    """Verdict, the headline (earliest finding of the worst severity) with evidence and checks, then one line
    per finding `run:step kind: summary`, non-finite onsets, replay starting point, and what was skipped."""
    lines = [verdict(a)]
    head = a.headline()
    if head is not None:
        lines.append(f"first {head.severity}: {a.run}:{_where(head)} {head.kind}: {head.summary}")
        lines.append("  check first: " + "; ".join(head.checks))
    if a.findings:
        lines.append("")
        lines.append("findings (by step; e = event):")
        for f in a.findings:
            lines.append(f"{a.run}:{_where(f)} {f.kind} [{f.severity}, e{f.event}]: {f.summary}")
            if verbose:
                lines.append("    evidence: " + ", ".join(f"{k}={v}" for k, v in f.evidence.items()))
    if a.nonfinite:
        lines.append("")
        lines.append("first non-finite value per series (earliest first):")
        lines.extend(f"  {n['series']}: {n['value']} at step {n['step']}" for n in a.nonfinite)
    rl = replay_lines(a)
    if rl:
        lines.append("")
        lines.extend(rl)
    if a.spikes:
        lines.append("")
        lines.append(f"spikes: {len(a.spikes)} (" + ", ".join(f"{s.series}@{s.step}" for s in a.spikes[:8])
                     + (", ..." if len(a.spikes) > 8 else "") + ")")
    if a.skipped:
        lines.append("")
        lines.append("could not check:")
        lines.extend(f"  {s.kind}: {s.reason}" for s in a.skipped)
    return "\n".join(lines)


def markdown(a: Analysis) -> str:
    """The same diagnosis as markdown, to paste into an issue tracker."""
    out = [f"# run-forensics diagnosis: `{a.run}`", "", f"**{verdict(a)}**", ""]
    head = a.headline()
    if head is not None:
        out += [f"**First {head.severity}:** `{head.kind}` at step {_where(head)}: {head.summary}", ""]
    if a.findings:
        out += ["| step | kind | severity | event | summary |", "|---|---|---|---|---|"]
        out += [f"| {_where(f)} | `{f.kind}` | {f.severity} | {f.event} | {f.summary.replace('|', '/')} |"
                for f in a.findings]
        out.append("")
        for f in a.findings:
            out += [f"### `{f.kind}` at step {_where(f)}", "", f.summary, "",
                    "Evidence: " + ", ".join(f"`{k}`={v}" for k, v in f.evidence.items()), "",
                    "Likely causes: " + "; ".join(f.causes), "", "Check first: " + "; ".join(f.checks), ""]
    if a.nonfinite:
        out += ["## First non-finite value per series", ""]
        out += [f"- `{n['series']}`: {n['value']} at step {n['step']}" for n in a.nonfinite]
        out.append("")
    rl = replay_lines(a)
    if rl:
        out += ["## Replay starting point", "", "```", *rl, "```", ""]
    if a.skipped:
        out += ["## Could not check", ""] + [f"- `{s.kind}`: {s.reason}" for s in a.skipped] + [""]
    return "\n".join(out)


def rules_text(detected: dict[str, type]) -> str:
    """Every catalog kind with its one-line summary, whether a detector covers it, and its thresholds."""
    import dataclasses

    lines = []
    for e in catalog.ENTRIES:
        cls = detected.get(e.kind)
        if cls is not None:
            fields = ", ".join(f"{f.name}={f.default}" for f in dataclasses.fields(cls))
            lines.append(f"{e.kind:<24} detected      {e.summary}")
            if fields:
                lines.append(f"{'':<24} --set {e.kind.replace('_', '-')}.FIELD: {fields}")
        else:
            why = catalog.NOT_YET_DETECTED.get(e.kind, "no detector")
            lines.append(f"{e.kind:<24} NOT YET       {e.summary} ({why})")
    return "\n".join(lines)
