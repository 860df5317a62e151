"""What replay and probe learned, placed under the findings they explain: one rule for the report and the app.

The store keeps each answer (`ingest.queries.stored_answers`); this module says which finding each explains, what
of it a report shows (the replay's verdict and the change that fixed it, the probe's failed checks), whether the
report should still ask to run them, and what the headline's "check first" names once they have run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

ONSET_KINDS = ("nan_loss", "masked_nonfinite")  # the findings a replay of the non-finite onset explains


def replay_verdict(doc: dict[str, Any]) -> dict[str, Any]:
    """A stored replay as the report carries it: when it ran, whether the run changed since, its status, where the
    first non-finite value appeared (phase, op, module, file:line, parameter), the culprit samples, the change that
    fixed it (`likely_fix`, else the first counterfactual that came out finite and not vacuously) and the command."""
    hit = doc.get("first_nonfinite") or {}
    fixed = next((cf for cf in doc.get("counterfactuals") or [] if cf.get("applicable", True) and cf.get("finite")
                  and not cf.get("vacuous") and cf.get("rerun", True)), None)
    culprits = doc.get("culprits") or {}
    return {"replay_id": doc.get("replay_id"), "ran": doc.get("ran"), "changed": bool(doc.get("changed")),
            "step": doc.get("step"), "bad_step": doc.get("bad_step"), "status": doc.get("status"),
            "diagnosed": bool(hit), "faithful": (doc.get("fidelity") or {}).get("faithful"),
            "phase": hit.get("phase"), "op": hit.get("op"), "module": hit.get("module"), "file": hit.get("file"),
            "line": hit.get("line"), "parameter": hit.get("parameter"),
            "culprit_samples": list(culprits.get("samples") or doc.get("culprit_samples") or []),
            "fixed_by": fixed.get("change") if fixed else None, "likely_fix": doc.get("likely_fix"),
            "command": doc.get("command")}


def probe_verdict(probe: dict[str, Any]) -> dict[str, Any]:
    """A stored probe as the report carries it: when it ran, whether the run changed since, its counts and its
    failed checks (name, summary, names, explains)."""
    checks = probe.get("checks") or []
    return {"probe_id": probe.get("probe_id"), "ran": probe.get("ran"), "changed": bool(probe.get("changed")),
            "counts": {s: sum(c["status"] == s for c in checks) for s in ("fail", "pass", "n/a")},
            "failed": [{k: c[k] for k in ("name", "summary", "names", "explains")} for c in checks
                       if c["status"] == "fail"]}


def _covers(f: dict[str, Any], step: int | None) -> bool:
    if step is None or f.get("step") is None:
        return False
    end = f["step_end"] if f.get("step_end") is not None else f["step"]
    return f["step"] <= step <= end


def replay_finding(findings: Sequence[dict[str, Any]], replay: dict[str, Any]) -> int | None:
    """The index of the finding a replay explains: the non-finite onset at its step (or its first bad step), else
    the finding of the shortest span holding that step; None when no finding holds it."""
    steps = [replay.get("step"), replay.get("bad_step")]
    onset = [i for i, f in enumerate(findings) if f["kind"] in ONSET_KINDS and any(f.get("step") == s for s in steps)]
    if onset:
        return onset[0]
    holding = [i for i, f in enumerate(findings) if any(_covers(f, s) for s in steps)]
    return min(holding, key=lambda i: (findings[i].get("step_end") or findings[i]["step"]) - findings[i]["step"],
               default=None)


def place(findings: Sequence[dict[str, Any]], answers: dict[str, Any] | None) -> dict[int, dict[str, Any]]:
    """{finding index: {"replay": verdict, "probe": {"ran", "changed", "failed": [checks]}}}: each stored replay
    under the finding it explains, each failed probe check under the first finding of a kind it explains.
    `findings` are dicts with kind, step, step_end (a report's findings, in its order)."""
    out: dict[int, dict[str, Any]] = {}
    if not answers:
        return out
    for r in answers.get("replays") or []:
        i = replay_finding(findings, r)
        if i is not None and "replay" not in out.get(i, {}):
            out.setdefault(i, {})["replay"] = replay_verdict(r)
    if answers.get("probe"):
        p = probe_verdict(answers["probe"])
        for c in p["failed"]:
            i = next((i for i, f in enumerate(findings) if f["kind"] in c["explains"]), None)
            if i is not None:
                placed = out.setdefault(i, {}).setdefault("probe", {"ran": p["ran"], "changed": p["changed"],
                                                                     "failed": []})
                placed["failed"].append(c)
    return out


def replay_fresh(answers: dict[str, Any] | None, step: int | None) -> bool:
    """Whether a replay of `step` is stored and the run has not changed since: the report stops asking for one."""
    return any(r.get("step") == step and not r.get("changed") for r in (answers or {}).get("replays") or [])


def probe_fresh(answers: dict[str, Any] | None) -> bool:
    """Whether a probe is stored and the run has not changed since: the report stops asking for one."""
    p = (answers or {}).get("probe")
    return bool(p) and not p.get("changed")


def where_words(v: dict[str, Any]) -> str:
    """`forward: log in (top level) at train.py:31 (parameter head.weight)`: where the replay saw the first
    non-finite value."""
    at = f" at {v['file']}:{v['line']}" if v.get("file") else ""
    param = f" (parameter {v['parameter']})" if v.get("parameter") else ""
    return f"{v['phase']}: {v['op']} in {v['module'] or '(top level)'}{at}{param}"


def check_first(findings: Sequence[dict[str, Any]], head: int | None, placed: dict[int, dict[str, Any]],
                checks: Sequence[str] = ()) -> list[str]:
    """The headline's "check first": led, once an answer is stored for its event (the headline finding or one
    sharing its event) and the run has not changed since, by the op the replay found and its likely fix, else by
    the failed probe check that explains it; then the catalog's `checks`, less those asking for that answer."""
    if head is None:
        return list(checks)
    event = findings[head].get("event")
    mine = [head] + [i for i, f in enumerate(findings) if i != head and event is not None and f.get("event") == event]
    for i in mine:
        v = placed.get(i, {}).get("replay")
        if v and v["diagnosed"] and not v["changed"]:
            where = (f"{v['op']} in {v['module'] or '(top level)'}" + (f" at {v['file']}:{v['line']}" if v.get("file")
                                                                      else "")
                     + f", where replay found the first non-finite value ({v['phase']} pass, step "
                     f"{v['bad_step'] if v.get('bad_step') is not None else v['step']})")
            fix = v.get("likely_fix")
            lead = [f"{fix['change']}, the likely fix replay found ({fix.get('evidence') or 'the window stays finite'})"
                    ] if isinstance(fix, dict) and fix.get("change") else []
            return [where] + lead + [c for c in checks if "replay" not in c]
    for i in mine:
        p = placed.get(i, {}).get("probe")
        if p and not p["changed"] and p["failed"]:
            c = p["failed"][0]
            return [f"{c['summary']} (probe {c['name']} failed)"] + [x for x in checks if "probe" not in x]
    return list(checks)
