"""A probe result as a person reads it (terminal text, markdown) and as scripts read it (JSON without NaN).

Text that came from the user's files (module, parameter and batch-key names, paths) is escaped: control characters
in the text (`forensics.text.render.lines`), markdown syntax in the markdown.
"""

from __future__ import annotations

from typing import Any

from forensics.judge.numbers import count, ints
from forensics.text.render import lines as joined
from forensics.text.render import md
from ingest.jsonvalues import plain

# Evidence too long for a line of text (curves, per-parameter lists): in --json and the store only.
LONG = ("curve_lr", "curve_loss", "grad_norms", "layers", "inputs", "loss_permuted")
STATUS = {"pass": "pass", "fail": "FAIL", "n/a": "n/a "}


def as_json(r: dict[str, Any]) -> dict[str, Any]:
    """The documented object: run, entry, from_checkpoint, device, checks, timings_s (and batches, notes)."""
    keep = ("run", "entry", "from_checkpoint", "device", "threads", "threads_from", "batches", "notes", "checks", "timings_s", "probe_id")
    return plain({k: r[k] for k in keep if k in r})


def counts(r: dict[str, Any]) -> str:
    n = {s: sum(c["status"] == s for c in r["checks"]) for s in ("fail", "pass", "n/a")}
    return f"{n['fail']} failed, {n['pass']} passed, {n['n/a']} not applicable"


def text(r: dict[str, Any]) -> str:
    ck = r["from_checkpoint"]
    out = [f"{r['run']}: probe: {counts(r)}",
           f"  entry point: {r['entry']} (your code was run); device {r['device']}"
           + (f", {count(r['threads'], 'thread')} ({r['threads_from']})" if "threads" in r else ""),
           f"  checkpoints: earliest {ck['first']['path']} (step {ck['first']['step']}), "
           f"last finite {ck['last']['path']} (step {ck['last']['step']}); batches of steps {ints(r['batches'])}"]
    out += [f"  note: {n}" for n in r["notes"]]
    for c in r["checks"]:
        out.append(f"{STATUS[c['status']]} {c['name']}: {c['summary']}")
        if c["status"] == "fail":
            if c["names"]:
                out.append(f"       names: {', '.join(c['names'])}")
            out.append(f"       explains: {', '.join(c['explains'])}")
    t = r["timings_s"]
    out.append(f"time: {t['total']:.2f} s (" + ", ".join(f"{k} {v:.2f}" for k, v in t.items() if k != "total") + ")")
    return joined(out)


def markdown(r: dict[str, Any]) -> str:
    ck = r["from_checkpoint"]
    out = [f"# run-forensics probe: {md(r['run'])}", "", f"**{counts(r)}**", "",
           f"Entry point {md(r['entry'])} (its code was run), device {r['device']}; earliest checkpoint "
           f"{md(ck['first']['path'])} (step {ck['first']['step']}), last finite {md(ck['last']['path'])} "
           f"(step {ck['last']['step']}).", "",
           "| check | status | summary | names | explains |", "|---|---|---|---|---|"]
    for c in r["checks"]:
        out.append(f"| `{c['name']}` | {c['status']} | {md(c['summary'])} | "
                   f"{', '.join(md(n) for n in c['names'])} | {', '.join(c['explains'])} |")
    out += ["", *(f"- note: {md(n)}" for n in r["notes"])]
    return "\n".join(out) + "\n"
