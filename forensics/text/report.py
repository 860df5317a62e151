"""The diagnosis as a person reads it: terminal text (verdict first, one finding per line) and markdown."""

from __future__ import annotations

import os
from pathlib import Path

from forensics.judge import catalog, learned, numbers
from forensics.judge.findings import Analysis, Finding, Spike
from forensics.judge.numbers import count
from forensics.text.render import fenced, md
from forensics.text.render import lines as joined
from forensics.text.render import restriction_words, verdict_words
from ingest.errors import ForensicsError


NO_STEP = "no step"  # a finding without a step: run-wide, or from a checkpoint whose step is unknown


def _where(f: Finding) -> str:
    if f.step is None:
        return NO_STEP
    where = f"{f.step}" if f.step_end in (None, f.step) else f"{f.step}-{f.step_end}"
    if f.at:  # an ordinal step: the writer's own counters beside it
        where += f" ({f.at}" + (f" to {f.at_end}" if f.at_end and f.at_end != f.at else "") + ")"
    return where


def _at(run: str, f: Finding) -> str:
    """`run:80` or `run:61-80`; `run (no step)` for a finding without one."""
    return f"{run}:{_where(f)}" if f.step is not None else f"{run} ({NO_STEP})"


def _at_step(f: Finding) -> str:
    """` at step 80`, or ` (no step)`."""
    return f" at step {_where(f)}" if f.step is not None else f" ({NO_STEP})"


def _nonfinite_at(n: dict) -> str:
    return f" ({n['at']})" if n.get("at") else ""


SHOWN_PROBLEMS = 5  # read problems shown in the text report without -v


def verdict(a: Analysis) -> str:
    """`run: FAILED (4 critical, 3 warning)`, `run: INCONCLUSIVE: <why>`, `run: healthy: <what was checked>`."""
    if a.verdict is None:  # an analysis that did not go through forensics.services.analysis.analyze
        return f"{a.run}: {len(a.findings)} findings"
    return f"{a.run}: {verdict_words(a.verdict, a.verdict_reason)}{restriction_words(a.only, a.skip)}"


def problem_line(p: dict) -> str:
    """One read problem: `file at position: kind: detail; kept 104 points`."""
    where = f" at {p['position']}" if p.get("position") is not None else ""
    kept = f"; kept {p['kept']}" if p.get("kept") else ""
    return f"{p['path']}{where}: {p['kind']}: {p['detail']}{kept}"


def probe_line(a: Analysis) -> str | None:
    """The `forensics probe` command, printed under the first finding a probe explains."""
    if not a.probe_command:
        return None
    return f"probe it (runs the run's forensics_entry.py: overfit one batch, LR range, gradient flow, ...): {a.probe_command}"


def replay_lines(a: Analysis) -> list[str]:
    r = a.replay_from
    if not r or learned.replay_fresh(a.answers, r["onset_step"]):  # its answer is shown under the finding
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


def learned_lines(placed: dict) -> list[str]:
    """Under a finding: the stored replay's verdict (where, culprits, the change that fixed it) and the stored
    probe's failed checks, each with when it ran, and a word where the run changed since."""
    out = []
    v = placed.get("replay")
    if v:
        stale = " (the run changed since: replay it again)" if v["changed"] else ""
        out.append(f"replay of step {v['step']} (ran {v['ran']}){stale}: {v['status']}")
        if v["diagnosed"]:
            out.append(f"  first non-finite value: {learned.where_words(v)}")
        if v["culprit_samples"]:
            out.append(f"  culprit samples: {numbers.ints(v['culprit_samples'], 12)}")
        fix = v.get("likely_fix")
        if isinstance(fix, dict) and fix.get("change"):
            out.append(f"  likely fix: {fix['change']}: {fix.get('evidence', '')}".rstrip(": "))
        elif v["fixed_by"]:
            out.append(f"  fixed by: {v['fixed_by']} (the counterfactual that came out finite)")
        if v["changed"] and v.get("command"):
            out.append(f"  replay it again: {v['command']}")
    p = placed.get("probe")
    if p:
        stale = " (the run changed since: probe it again)" if p["changed"] else ""
        for c in p["failed"]:
            names = f" [{', '.join(c['names'])}]" if c["names"] else ""
            out.append(f"probe {c['name']} FAILED (ran {p['ran']}){stale}: {c['summary']}{names}")
    return out


def other_spikes(a: Analysis) -> list[Spike]:
    """Spikes that no finding accounts for (a finding's event holds the others)."""
    events = {f.event for f in a.findings}
    return [s for s in a.spikes if s.event not in events]


def spikes_line(spikes: list[Spike]) -> str:
    by_series: dict[str, list[int]] = {}
    for s in spikes:
        by_series.setdefault(s.series, []).append(s.step)
    parts = "; ".join(f"{name} at {'step' if len(steps) == 1 else 'steps'} "
                      f"{', '.join(map(str, steps[:8]))}{', ...' if len(steps) > 8 else ''}"
                      for name, steps in by_series.items())
    return (f"other spikes ({count(len(spikes), 'point')} far above the local level that came straight back; "
            f"not findings on their own): {parts}")


def skipped_summary(a: Analysis) -> str:
    """One line: how many checks could not run, in the user's terms."""
    not_yet = [s for s in a.skipped if s.kind in catalog.NOT_YET_DETECTED]
    lacking = [s for s in a.skipped if s.kind not in catalog.NOT_YET_DETECTED]
    ran = len(a.checked.get("detectors_run", []))
    parts = []
    if lacking:
        parts.append(f"{len(lacking)} of {count(ran + len(lacking), 'detector')} lacked what they need "
                     f"(a series the run did not log, too few points, a setting not in its config)")
    if not_yet:
        parts.append(f"{len(not_yet)} not detected yet ({', '.join(s.kind for s in not_yet)})")
    return "could not check: " + "; ".join(parts) + "; -v lists why"


def text(a: Analysis, verbose: bool = False) -> str:
    """Verdict, read problems, the headline (the earliest cause of the worst event) with its checks, then one
    line per finding `run:step kind: summary`, non-finite onsets, replay starting point, spikes no finding
    accounts for, one line of what could not be checked (all of it with `verbose`), and the database used."""
    lines = [verdict(a)]
    if a.read_problems:
        shown = a.read_problems if verbose else a.read_problems[:SHOWN_PROBLEMS]
        lines.append("read with problems:" if len(shown) > 1 else "read with problems: " + problem_line(shown[0]))
        if len(shown) > 1:
            lines.extend("  " + problem_line(p) for p in shown)
        if len(a.read_problems) > len(shown):
            lines.append(f"  ... {len(a.read_problems) - len(shown)} more (-v lists them all)")
    if verbose and a.lines_read:
        lines.append("console lines read:")
        lines.extend(f"  {r['detail']}" for r in a.lines_read)
    if a.unknown_files and (verbose or a.verdict == "inconclusive"):
        lines.append(f"not read ({count(len(a.unknown_files), 'file')} no reader knows): "
                     + ", ".join(a.unknown_files[:5]) + (", ..." if len(a.unknown_files) > 5 else ""))
    if a.code_files and verbose:
        lines.append("code, not logs (analyze never runs it; forensics replay and probe import forensics_entry.py): "
                     + ", ".join(a.code_files[:5]) + (", ..." if len(a.code_files) > 5 else ""))
    head = a.headline()
    if head is not None:
        lines.append(f"earliest cause: {_at(a.run, head)} {head.kind}: {head.summary}")
        lines.append("  check first: " + "; ".join(a.check_first()))
    if a.sibling:
        lines.append(a.sibling)
    if a.findings:
        lines.append("")
        lines.append("findings (by step; e = event):")
        probe = probe_line(a)
        placed = a.learned()
        for i, f in enumerate(a.findings):
            lines.append(f"{_at(a.run, f)} {f.kind} [{f.severity}, e{f.event}]: {f.summary}")
            lines.extend("    " + x for x in learned_lines(placed.get(i, {})))
            if verbose:
                lines.append("    evidence: " + "; ".join(f"{k}={v}" for k, v in numbers.evidence(f.evidence)))
            if probe and f.kind in a.probed:
                lines.append("    " + probe)
                probe = None  # once, under the first finding a probe explains
    if a.nonfinite:
        lines.append("")
        lines.append("first non-finite value per series (earliest first):")
        lines.extend(f"  {n['series']}: {n['value']} at step {n['step']}{_nonfinite_at(n)}" for n in a.nonfinite)
    rl = replay_lines(a)
    if rl:
        lines.append("")
        lines.extend(rl)
    spikes = other_spikes(a)
    if spikes:
        lines.append("")
        lines.append(spikes_line(spikes))
    if a.skipped:
        lines.append("")
        if verbose:
            lines.append("could not check:")
            lines.extend(f"  {s.kind}: {s.reason}" for s in a.skipped)
        else:
            lines.append(skipped_summary(a))
    if a.db:
        lines.append(f"database: {numbers.home(a.db)}")
    return joined(lines)


def markdown(a: Analysis) -> str:
    """The same diagnosis as markdown, to paste into an issue tracker."""
    out = [f"# run-forensics diagnosis: {md(a.run)}", "", f"**{md(verdict(a))}**", ""]
    if a.read_problems:
        out += ["## Read with problems", "", "| file | position | kind | detail | kept |", "|---|---|---|---|---|"]
        out += [f"| {md(p['path'])} | {'' if p['position'] is None else p['position']} | {p['kind']} | "
                f"{md(p['detail'])} | {md(p['kept'] or '')} |" for p in a.read_problems]
        out.append("")
    head = a.headline()
    if head is not None:
        out += [f"**Earliest cause:** `{head.kind}`{_at_step(head)}: {md(head.summary)}", "",
                "Check first: " + "; ".join(md(c) for c in a.check_first()), ""]
    if a.sibling:
        out += [md(a.sibling), ""]
    if a.findings:
        out += ["| step | kind | severity | event | summary |", "|---|---|---|---|---|"]
        out += [f"| {_where(f)} | `{f.kind}` | {f.severity} | {f.event} | {md(f.summary)} |"
                for f in a.findings]
        out.append("")
        probe = probe_line(a)
        placed = a.learned()
        for i, f in enumerate(a.findings):
            out += [f"### `{f.kind}`{_at_step(f)}", "", md(f.summary), "",
                    "Evidence: " + "; ".join(f"`{k}`={md(v)}" for k, v in numbers.evidence(f.evidence)), "",
                    "Likely causes: " + "; ".join(f.causes), "", "Check first: " + "; ".join(f.checks), ""]
            found = learned_lines(placed.get(i, {}))
            if found:
                out += ["What replay and probe found:", "", *fenced(found), ""]
            if probe and f.kind in a.probed:
                out += [f"Probe it: `{a.probe_command}` (runs the run's forensics_entry.py)", ""]
                probe = None
    if a.nonfinite:
        out += ["## First non-finite value per series", ""]
        out += [f"- {md(n['series'])}: {n['value']} at step {n['step']}{md(_nonfinite_at(n))}" for n in a.nonfinite]
        out.append("")
    rl = replay_lines(a)
    if rl:
        out += ["## Replay starting point", "", *fenced(rl), ""]
    spikes = other_spikes(a)
    if spikes:
        out += [spikes_line(spikes), ""]
    if a.skipped:
        out += ["## Could not check", ""] + [f"- `{s.kind}`: {md(s.reason)}" for s in a.skipped] + [""]
    return joined(out)


def markdown_target(target: Path | None, run_dir: Path) -> Path | str | None:
    """Where `--markdown` goes: None, "-" (stdout), or a file path checked before any work is done: never inside
    the run directory, not a folder, in a folder that exists and can be written."""
    if target is None:
        return None
    if str(target) == "-":
        return "-"
    if target.resolve().is_relative_to(run_dir.resolve()):
        raise ForensicsError(f"--markdown {target} is inside the run directory, which is never written to")
    parent = target.resolve().parent
    if target.is_dir():
        raise ForensicsError(f"--markdown {target} is a directory; name a file, e.g. {target / 'diagnosis.md'}")
    if not parent.is_dir():
        raise ForensicsError(f"--markdown {target}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise ForensicsError(f"--markdown {target}: not writable")
    return target


def rules_json(detected: dict[str, type]) -> dict:
    """`forensics rules --json`: every catalog kind, whether it is detected, its fields and defaults, and the spike
    rule's fields (`--set spike.FIELD`, read by every detector that reads spikes)."""
    import dataclasses

    from forensics.judge.settings import settable
    from forensics.judge.stats import SpikeRule

    return {"rules": [
        {"kind": e.kind, "summary": e.summary, "detected": e.kind in detected,
         "not_yet_reason": catalog.NOT_YET_DETECTED.get(e.kind),
         "fields": {n: f.default for n, f in settable(detected[e.kind]).items()} if e.kind in detected else {},
         "causes": list(e.causes), "checks": list(e.checks)} for e in catalog.ENTRIES],
        "spike": {f.name: f.default for f in dataclasses.fields(SpikeRule)}}


def rules_text(detected: dict[str, type]) -> str:
    """Every catalog kind with its one-line summary, whether a detector covers it, and its thresholds."""
    import dataclasses

    from forensics.judge.settings import settable
    from forensics.judge.stats import SpikeRule

    lines = [f"{'kind':<24} {'status':<13} summary"]
    for e in catalog.ENTRIES:
        cls = detected.get(e.kind)
        if cls is not None:
            fields = ", ".join(f"{n}={f.default}" for n, f in settable(cls).items())
            lines.append(f"{e.kind:<24} detected      {e.summary}")
            if fields:
                lines.append(f"{'':<24} --set {e.kind.replace('_', '-')}.FIELD: {fields}")
        else:
            why = catalog.NOT_YET_DETECTED.get(e.kind, "no detector")
            lines.append(f"{e.kind:<24} NOT YET       {e.summary} ({why})")
    spike = ", ".join(f"{f.name}={f.default}" for f in dataclasses.fields(SpikeRule))
    lines.append(f"{'spike':<24} a setting    what a spike is, for loss_spike, bad_batch and the spike list")
    lines.append(f"{'':<24} --set spike.FIELD: {spike}")
    return "\n".join(lines)
