"""The text the commands print, beside the diagnosis's own (report.py): ingest, runs, checkpoints, `analyze --all`.

Each function takes what a library call returned and gives back lines; `cli.py` only prints them. Every value that
came from a file (a run's or a file's name, a tag, a detail) goes through `clean`, so a name holding a newline or a
terminal escape cannot forge a line or retitle the terminal.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from forensics.judge import numbers

# C0 and C1 controls, DEL, lone surrogates (a non-UTF-8 byte kept by surrogateescape) and the bidirectional
# overrides that reorder what a terminal shows.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\x1b"}


def _escape(m: re.Match) -> str:
    c = m.group()
    o = ord(c)
    if c in _NAMED:
        return _NAMED[c]
    if 0xDC80 <= o <= 0xDCFF:  # surrogateescape's stand-in for the byte o - 0xDC00
        return f"\\x{o - 0xDC00:02x}"
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


def clean(text: Any) -> str:
    """`text` with every control character written as an escape (`\\n`, `\\x1b`, `\\x07`, `\\u202e`): one line
    that shows what the file held and does nothing to the terminal."""
    return _UNSAFE.sub(_escape, str(text))


def md(text: Any) -> str:
    """Text from a file made inert in markdown, the one policy for every face that writes markdown (the report's
    `--markdown`, probe's and replay's, the app's pages): control characters written as escapes (a newline cannot
    start a heading or a list), then no emphasis, links, LaTeX, code spans, table pipes or headings, and no HTML
    (`<` becomes `&lt;`), so a series name or a path shows as it is and does nothing."""
    out = clean(text)
    for ch in "\\*_[]$`#|~!":
        out = out.replace(ch, "\\" + ch)
    return out.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def fenced(items: list[str]) -> list[str]:
    """`items` as a markdown code block whose fence is longer than any run of backticks in them (CommonMark), so
    a line from a file cannot close it."""
    longest = max((len(m) for x in items for m in re.findall(r"`+", str(x))), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, *items, fence]


def lines(items: list[str]) -> str:
    """Our lines, each cleaned of control characters, joined by newlines (ours are the only ones)."""
    return "\n".join(clean(x) for x in items)


class ProgressBars:
    """Draws ingest's progress callback as one tqdm bar per stage on stderr, only when stderr is a terminal
    (tqdm's `disable=None`). Call `close()` when the work is done."""

    def __init__(self, name: str, enabled: bool = True) -> None:
        self.name, self.enabled = clean(name), enabled
        self.stage: str | None = None
        self.bar = None

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        if stage != self.stage:
            from tqdm import tqdm

            self.close()
            self.stage = stage
            self.bar = tqdm(total=total, desc=f"{stage} {self.name}", unit="B", unit_scale=True, disable=None,
                            file=sys.stderr, leave=False)
        self.bar.n = min(done, total)
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self) -> ProgressBars:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# -- ingest ---------------------------------------------------------------------------------------------------

def ingest_text(reports: list, failed: list[dict], n_dirs: int, db: str) -> tuple[str, str]:
    """(stdout, stderr) of `forensics ingest`: one line per run read, its problems and unread files on stderr."""
    out: list[str] = []
    err: list[str] = []
    for r in reports:
        by_format: dict[str, int] = {}
        for s in r.sources:
            # Checkpoints and batches hold tensors, not points: count them.
            key = {"checkpoint": "checkpoints", "batch": "saved batches"}.get(s.format, s.format)
            by_format[key] = by_format.get(key, 0) + (1 if s.format in ("checkpoint", "batch") else s.points)
        formats = ", ".join(f"{n} {fmt}" for fmt, n in sorted(by_format.items())) or "nothing new"
        out.append(f"{r.name} ({r.run_id}): {r.points:,} new points from {numbers.count(len(r.sources), 'file')} "
                   f"[{formats}] in {r.seconds:.2f}s")
        if r.issues:
            err.append(f"  warning: {numbers.count(len(r.issues), 'problem')}; good records were kept:")
            for path, issue in r.issues[:20]:
                where = f" at {issue.position}" if issue.position is not None else ""
                err.append(f"    {path}{where}: {issue.kind}: {issue.detail}")
            if len(r.issues) > 20:
                err.append(f"    ... {len(r.issues) - 20} more (forensics runs --json lists them all)")
        if r.unknown:
            shown = ", ".join(r.unknown[:5]) + (f", ... ({len(r.unknown)} in all)" if len(r.unknown) > 5 else "")
            err.append(f"  not read (no reader for these files): {shown}")
    if failed:
        out.append(f"{len(reports)} of {n_dirs} directories read; not read: {', '.join(f['path'] for f in failed)}")
    out.append(f"database: {numbers.home(db)}")
    return lines(out), lines(err)


# -- runs -----------------------------------------------------------------------------------------------------

VERDICT_LABELS = {"failed": "FAILED", "suspicious": "suspicious", "inconclusive": "INCONCLUSIVE",
                  "healthy": "healthy", "older analysis": "re-analyse"}


def verdict_words(verdict: str | None, reason: str | None) -> str:
    """`FAILED (4 critical)`, `INCONCLUSIVE: <why>`, `healthy: <what was checked>`: the stored verdict in words."""
    if verdict is None:
        return "not analysed"
    if verdict == "older analysis":
        return "re-analyse: analysed by an older version, which stored no verdict"
    label = VERDICT_LABELS.get(verdict, verdict)
    if verdict in ("failed", "suspicious"):
        return f"{label} ({reason})"
    return f"{label}: {reason}"


def restriction_words(only: list[str], skip: list[str]) -> str:
    """` [only nan_loss, divergence]` or ` [skipping plateau]` for an analysis restricted by --only/--skip."""
    return (f" [only {', '.join(only)}]" if only else "") + (f" [skipping {', '.join(skip)}]" if skip else "")


def headline_words(head: dict | None) -> str:
    """` — earliest cause: dead_relu at step 120 (e2)`: the stored headline (the earliest cause of the worst event,
    which need not be the first event), or nothing."""
    if head is None:
        return ""
    at = f" at step {head['step']}" if head.get("step") is not None else ""
    event = f" (e{head['event']})" if head.get("event") is not None else ""
    return f" — earliest cause: {head['kind']}{at}{event}"


def runs_text(runs: list[dict], db: str, short_path) -> str:
    """`forensics runs`: one row per run (id, name, points, series, problems, sources), then its stored verdict
    and headline."""
    if not runs:
        return clean(f"no runs in {db}; add one with `forensics ingest RUN_DIR`")
    # Two runs with one folder name (`version_0` of two experiments) are told apart by their path.
    seen: dict[str, int] = {}
    for r in runs:
        seen[r["name"]] = seen.get(r["name"], 0) + 1
    shown = {r["run"]: clean(r["name"] if seen[r["name"]] == 1 else short_path(r["root"])) for r in runs}
    width = max(28, *(len(v) for v in shown.values()))
    out = [f"{'id':<10}  {'run':<{width}} {'points':>12}  {'series':>6}  {'problems':>8}  sources"]
    for r in runs:
        formats: dict[str, int] = {}
        for s in r["sources"]:
            formats[s["format"]] = formats.get(s["format"], 0) + 1
        kinds = ", ".join(f"{n} {f}" for f, n in sorted(formats.items()))
        problems = sum(1 for i in r["issues"] if i["kind"] != "unknown_file")
        out.append(f"{r['run']:<10}  {shown[r['run']]:<{width}} {r['points']:>12,}  {r['series']:>6}  "
                   f"{problems:>8}  {len(r['sources'])} ({clean(kinds)})")
        a = r.get("analysis")
        if a is None:
            out.append(f"{'':12}not analysed: `forensics analyze {r['root']}` gives its diagnosis")
        else:
            out.append(f"{'':12}{verdict_words(a['verdict'], a['verdict_reason'])}"
                       f"{restriction_words(a['only'], a['skip'])}{headline_words(a['headline'])}")
        if r.get("ingest_complete") is False:
            out.append(f"{'':12}ingest did not finish (stopped or locked out): `forensics ingest` it again to read "
                       "the rest")
        if r.get("found_by_watch"):
            w = r["found_by_watch"]
            out.append(f"{'':12}found by watch as {w['kind']}: {w['reason']} ({w['state']})")
    out.append(f"database: {numbers.home(db)}")
    return lines(out)


# -- analyze ROOT --all ---------------------------------------------------------------------------------------

def fleet_text(out, verbose: bool) -> str:
    """`analyze ROOT --all`: one line per run (its path below the root, then its stored verdict and headline, or
    why it could not be analysed), then how many were analysed, how, and where. `out` is a fleet.RootAnalysis."""
    lines_out: list[str] = []
    for rel, r, stored in out.rows():
        if r.error is not None:
            lines_out.append(f"{rel}: could not analyse: {r.error}")
            if verbose and r.trace:
                lines_out.extend(r.trace.rstrip("\n").split("\n"))
        elif stored is None:
            lines_out.append(f"{rel}: analysed, but its analysis is not in the store")
        else:
            lines_out.append(f"{rel}: {verdict_words(stored['verdict'], stored['verdict_reason'])}"
                             f"{headline_words(stored['headline'])}")
    for path, why in out.found.left_out:
        lines_out.append(f"{_below(out.found.root, path)}: not a run: {why}")
    workers = f"{out.jobs} Ray" if out.ray else f"{out.jobs} process{'es' * (out.jobs > 1)}"
    left = (f"; {numbers.count(len(out.found.left_out), 'folder')} with files left out, not runs (named above)"
            if out.found.left_out else "")
    lines_out.append(f"{len(out.results) - len(out.failed)} of {len(out.found.runs)} runs analysed in "
                     f"{out.seconds:.1f}s ({workers}){left}; database: {numbers.home(out.db)}")
    return lines(lines_out)


def _below(root, path: str) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return path


# -- checkpoints ----------------------------------------------------------------------------------------------

def _mover(m: dict) -> str:
    """One mover: a tensor holding NaN/Inf as such; else the update's RMS, with ‖Δw‖/‖w‖ ("from 0" where ‖w‖ was 0)."""
    if m["n_nonfinite"]:
        return f"{m['tensor']} NaN/Inf ({m['n_nonfinite']:,} values)"
    relative = f"{m['ratio']:.2e}" if m["ratio"] is not None else "from 0"
    return f"{m['tensor']} {m['rms']:.2e} ({relative})"


def checkpoints_text(name: str, run_id: str, summary: dict, top: int) -> str:
    """`forensics checkpoints`: the checkpoints by step, what moved between them, the saved batches' bad samples."""
    ckpts, batches = summary["checkpoints"], summary["batches"]
    out = [f"{name} ({run_id}): {numbers.count(len(ckpts), 'checkpoint')}, "
           f"{numbers.count(len(batches), 'saved batch', 'saved batches')}"]
    if ckpts:
        out.append(f"  {'step':>8}  {'from':<8} {'format':<11} {'size':>9}  {'finite':<6} {'status':<12} path")
    for c in ckpts:
        step = "?" if c["step"] is None else str(c["step"])
        finite = "-" if c["finite"] is None else "yes" if c["finite"] else "NO"
        out.append(f"  {step:>8}  {c['step_from'] or '-':<8} {c['format']:<11} "
                   f"{numbers.size(c['size_bytes']):>9}  {finite:<6} {c['status']:<12} {c['path']}")
        if c["nonfinite_tensors"]:
            out.append(f"  {'':>8}  {_nonfinite_line(c)}")
        if c["status"] != "ok" and c["detail"]:
            out.append(f"  {'':>8}  {c['detail']}")
    if summary["deltas"] and top > 0:
        out.append("biggest movers between consecutive checkpoints (model parameters; NaN/Inf first, then by the "
                   "update's RMS ‖Δw‖/√n, with ‖Δw‖/‖w‖):")
    elif any(d["frozen"] for d in summary["deltas"]):
        out.append("parameters unchanged between consecutive checkpoints (--top 0: movers not listed):")
    for d in summary["deltas"]:
        if top > 0:
            movers = ", ".join(_mover(m) for m in d["top"]) or "no parameter moved"
            out.append(f"  {d['prev_step']} → {d['step']} ({numbers.count(d['step_distance'], 'step')}): {movers}")
        elif d["frozen"]:
            out.append(f"  {d['prev_step']} → {d['step']} ({numbers.count(d['step_distance'], 'step')}):")
        if d["frozen"]:
            more = f" and {len(d['frozen']) - 8} more" if len(d["frozen"]) > 8 else ""
            out.append(f"    unchanged: {', '.join(d['frozen'][:8])}{more}")
    for b in batches:
        step = "?" if b["step"] is None else str(b["step"])
        flags = []
        for t in b["tensors"]:
            if t["nonfinite_samples"]:
                flags.append(f"{t['tensor']}: NaN/Inf in samples {numbers.ints(t['nonfinite_samples'])}")
            if t["outlier_samples"]:
                flags.append(f"{t['tensor']}: outlier samples {numbers.ints(t['outlier_samples'])}")
        line = f"  batch step {step}: {b['path']} {numbers.count(b['n_samples'] or 0, 'sample')}, {b['status']}"
        out.append(line + "".join(f"; {f}" for f in flags))
    return lines(out)


def _nonfinite_line(c: dict) -> str:
    """Model values as `analyze` counts them (nonfinite_weights), optimizer and other state apart."""
    model = [t for t in c["nonfinite_tensors"] if t["kind"] in ("param", "buffer")]
    other = [t for t in c["nonfinite_tensors"] if t["kind"] not in ("param", "buffer")]
    values = f"{c['n_nonfinite']:,} NaN/Inf " + ("value" if c["n_nonfinite"] == 1 else "values")
    line = f"{values} in {len(model)} model " + ("tensor" if len(model) == 1 else "tensors")
    if model:
        line += " (" + ", ".join(t["tensor"] for t in model[:4]) + (", ...)" if len(model) > 4 else ")")
    if other:
        kinds = sorted({t["kind"] for t in other})
        line += f"; NaN/Inf also in {len(other)} {'/'.join(kinds)} " + ("tensor" if len(other) == 1 else "tensors")
    return line


def short_path(path: str) -> str:
    """A run's root, relative to the working folder when it is below it."""
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path
