"""The app's five pages. Each reads the store through `app.data.query` and draws with `app.charts`.

Nothing here computes a finding: the verdict, findings, spikes and skips are the stored analysis's; the app
only places them (a finding's steps on a chart, a spike as a marker) and decimates curves to the chart's width.
"""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path
from typing import Any

import polars as pl
import streamlit as st

from app import charts
from app.data import StoreProblem, compared, query, stamp
from forensics.judge import learned, numbers
from forensics.judge.findings import Spike
from forensics.text import report
from forensics.text.render import clean, md
from forensics.usercode.kit.entry import is_code

PIXELS = 1600  # pixel columns per chart for M4: at most ~4 points per column, whatever the series' length

VERDICT = {  # the stored verdict (forensics/judge/verdict.py) -> icon, word, badge colour: reads in grey
    "failed": ("⛔", "failed", "critical"),
    "suspicious": ("⚠️", "suspicious", "warning"),
    "inconclusive": ("❔", "INCONCLUSIVE", "info"),
    "healthy": ("✅", "healthy", "ok"),
    "older analysis": ("○", "analysed by an older version", "none"),
    "not analyzed": ("○", "not analyzed", "none"),
}

INCOMPLETE = {True: "", False: " · <b>ingest did not finish</b>"}  # runs.ingest_complete
CSS = """
<style>
  .sev {padding: 1px 9px; border-radius: 10px; font-size: 0.82em; font-weight: 600; white-space: nowrap;}
  .sev-critical {background: #FADBD8; color: #922B21; border: 1px solid #E6B0AA;}
  .sev-warning {background: #FCF3CF; color: #7D6608; border: 1px solid #F7DC6F;}
  .sev-info {background: #E8EEF4; color: #34495E; border: 1px solid #AEB6BF;}
  .sev-ok {background: #D5F5E3; color: #1E8449; border: 1px solid #A9DFBF;}
  .sev-none {background: #F2F3F4; color: #566573; border: 1px solid #D5D8DC;}
  .muted {color: #6C757D; font-size: 0.9em;}
  .finding-summary {margin: 2px 0 4px 0; line-height: 1.45;}
  div[data-testid="stMetricValue"] {font-size: 1.6rem;}
</style>
"""


def esc(text: Any) -> str:
    """Text from a file inside an HTML block of ours, where markdown escapes would show literally."""
    return html.escape(clean(text))


def badge(level: str, text: str) -> str:
    return f"<span class='sev sev-{level}'>{text}</span>"


def restriction(run: dict) -> str:
    """`only nan_loss, divergence checked` for an analysis restricted by `--only`/`--skip`, else ''."""
    only, skip = json.loads(run["only_kinds"] or "[]"), json.loads(run["skip_kinds"] or "[]")
    if only:
        return f"only {', '.join(only)} checked"
    return f"{', '.join(skip)} skipped" if skip else ""


def headline_text(run: dict) -> str:
    """The stored headline as the CLI shows it: `dead_relu at step 120 (event 2): <summary>`."""
    at = f" at {steps_text(run['headline_step'], run['headline_step_end'])}" if run["headline_step"] is not None else ""
    event = f" (event {run['headline_event']})" if run["headline_event"] is not None else ""
    return f"{run['headline_kind']}{at}{event}: {run['headline_summary']}"


def steps_text(step: int | None, step_end: int | None) -> str:
    if step is None:
        return "whole run"
    if step_end is None or step_end == step:
        return f"step {step:,}"
    return f"steps {step:,}–{step_end:,}"


def _run_row(runs: pl.DataFrame, run_id: str) -> dict[str, Any]:
    return runs.filter(pl.col("run_id") == run_id).row(0, named=True)


def _problem(problem: StoreProblem) -> None:
    st.error(f"The database cannot be read: {problem}")
    st.caption("Reload the page to try again; nothing was written.")


# -- Runs ---------------------------------------------------------------------------------------------------

def _open(run_id: str) -> None:
    st.session_state.run = run_id
    st.session_state.page = "Run report"


def worst_first(runs: pl.DataFrame) -> pl.DataFrame:
    """Runs in the Runs page's default order, which the sidebar's run select follows too: failed first, then
    suspicious, inconclusive, healthy, not analysed; within one verdict the most critical, then warning findings."""
    rank = {v: i for i, v in enumerate(VERDICT)}
    return runs.with_columns(pl.col("verdict").replace_strict(rank, default=9).alias("_rank")).sort(
        ["_rank", "n_critical", "n_warning", "name"], descending=[False, True, True, False]).drop("_rank")


def runs_page(db: Path, runs: pl.DataFrame, run_id: str) -> None:
    st.title("Runs")
    counts = runs.group_by("verdict").len()
    by = dict(zip(counts["verdict"].to_list(), counts["len"].to_list()))
    parts = [f"{by[v]} {VERDICT[v][1]}" for v in VERDICT if by.get(v)]
    st.markdown(f"{runs.height} run{'s' if runs.height != 1 else ''} in this database: " + ", ".join(parts) + ".")

    left, middle, right = st.columns([3, 3, 2])
    text = left.text_input("Filter by name or finding", placeholder="e.g. nan, lr, divergence")
    verdicts = middle.multiselect("Verdict", [VERDICT[v][1] for v in VERDICT], placeholder="any verdict")
    order = right.selectbox("Sort by", ["worst first", "name", "last ingested", "length"])
    shown = runs
    if text:  # the name, the headline, or any finding kind of the run (`exploding` finds exploding_gradients)
        needle = text.lower()
        try:
            kinds = query(db, "app_run_kinds")
        except StoreProblem:
            kinds = pl.DataFrame(schema={"run_id": pl.Utf8, "kinds": pl.Utf8})
        shown = shown.join(kinds, on="run_id", how="left")
        shown = shown.filter(pl.col("name").str.to_lowercase().str.contains(needle, literal=True)
                             | pl.col("headline").fill_null("").str.to_lowercase().str.contains(needle, literal=True)
                             | pl.col("kinds").fill_null("").str.contains(needle, literal=True)).drop("kinds")
    if verdicts:
        keep = [v for v in VERDICT if VERDICT[v][1] in verdicts]
        shown = shown.filter(pl.col("verdict").is_in(keep))
    if order == "worst first":
        shown = worst_first(shown)
    elif order == "last ingested":
        shown = shown.sort("last_ingested", descending=True)
    elif order == "length":
        shown = shown.sort("last_step", descending=True, nulls_last=True)
    if shown.height == 0:
        st.info("No run matches the filter.")
    for r in shown.iter_rows(named=True):
        icon, word, level = VERDICT[r["verdict"]]
        with st.container(border=True):
            a, b, c = st.columns([5, 3, 1.3], vertical_alignment="center")
            counts_text = ", ".join(f"{r[k]} {w}" for k, w in (("n_critical", "critical"), ("n_warning", "warning"),
                                                                ("n_info", "info")) if r[k])
            a.markdown(f"{badge(level, icon + ' ' + word)} &nbsp; **{md(r['name'])}**"
                       + (f" <span class='muted'>({counts_text})</span>" if counts_text else "")
                       + (f" <span class='muted'>{esc(restriction(r))}</span>" if restriction(r) else ""),
                       unsafe_allow_html=True)
            if r["headline"]:
                a.markdown(f"<div class='muted'>first: {charts.severity_label(r['worst'])} · "
                           f"{esc(headline_text(r))}</div>", unsafe_allow_html=True)
            if r["verdict"] in ("inconclusive", "healthy") and r["verdict_reason"]:
                a.markdown(f"<div class='muted'>{esc(r['verdict_reason'])}</div>", unsafe_allow_html=True)
            if r["n_read_problems"]:
                a.markdown(f"<div class='muted'>{r['n_read_problems']} read problem"
                           f"{'s' if r['n_read_problems'] != 1 else ''} (listed in the report)</div>",
                           unsafe_allow_html=True)
            if r["verdict"] in ("not analyzed", "older analysis"):
                a.markdown(f"<div class='muted'>{word}: <code>forensics analyze {esc(r['root'])}</code> gives its "
                           "diagnosis</div>", unsafe_allow_html=True)
            last = "?" if r["last_step"] is None else f"{r['last_step']:,}"
            when = r["last_ingested"].strftime("%Y-%m-%d %H:%M") if r["last_ingested"] else "?"
            b.markdown(f"<div class='muted'>last step {last} · {r['n_points']:,} points · {r['n_series']} series<br>"
                       f"{esc(r['formats'] or 'no sources')}<br>ingested {when}{INCOMPLETE[r['ingest_complete']]}"
                       "</div>", unsafe_allow_html=True)
            c.button("Open report", key=f"open_{r['run_id']}", on_click=_open, args=(r["run_id"],),
                     width="stretch")


# -- Run report ---------------------------------------------------------------------------------------------

def _focus(finding_id: int, lo: int, hi: int, full: tuple[int, int]) -> None:
    """Focus every chart on a finding's steps, with as much context again on each side."""
    pad = max(5, (hi - lo) // 2)
    st.session_state.focus = finding_id
    st.session_state.view = (max(full[0], lo - pad), min(full[1], hi + pad))
    st.session_state.scroll_to_curves = st.session_state.get("scroll_to_curves_n", 0) + 1
    st.query_params["finding"] = str(finding_id)  # a link to this page opens this finding


def _show_all(full: tuple[int, int]) -> None:
    st.session_state.focus = None
    st.session_state.view = full
    if "finding" in st.query_params:
        del st.query_params["finding"]


def _focus_from_link(run_id: str, findings: pl.DataFrame | None, full: tuple[int, int]) -> None:
    """`?finding=ID` in the URL focuses that finding once, as its Focus button would."""
    wanted = st.query_params.get("finding")
    if findings is None or not wanted or st.session_state.get("finding_from_link") == (run_id, wanted):
        return
    st.session_state.finding_from_link = (run_id, wanted)
    number = link_number(wanted)  # anything else (`²`, 5000 digits, `-1`) falls back to the whole run
    match = findings.filter(pl.col("finding_id") == number) if number is not None else findings.clear()
    if match.height and match["step"][0] is not None:
        f = match.row(0, named=True)
        _focus(f["finding_id"], f["step"], f["step_end"] if f["step_end"] is not None else f["step"], full)


def link_number(text: str | None) -> int | None:
    """A page parameter meant as a small id (`?finding=3`): ASCII digits only, at most 9 of them, else None."""
    return int(text) if text and re.fullmatch(r"[0-9]{1,9}", text) else None


def _reset_view_for(run_id: str, full: tuple[int, int]) -> None:
    """The steps shown: all of them for a newly chosen run, and still all of them when the run has grown."""
    if st.session_state.get("view_run") != run_id or "view" not in st.session_state:
        st.session_state.view_run = run_id
        st.session_state.view = full
        st.session_state.focus = None
    elif st.session_state.view == st.session_state.get("view_full"):
        st.session_state.view = full
    st.session_state.view_full = full
    if "pending_view" in st.session_state:  # a box selected on a chart in the last run
        st.session_state.view = st.session_state.pop("pending_view")
        st.session_state.focus = None
        if "finding" in st.query_params:
            del st.query_params["finding"]
    lo, hi = st.session_state.view
    st.session_state.view = (max(full[0], min(lo, full[1])), min(full[1], max(hi, full[0])))


def report_page(db: Path, runs: pl.DataFrame, run_id: str) -> None:
    run = _run_row(runs, run_id)
    try:
        tables = query(db, "app_report", run_id, run["analysis_id"])
    except StoreProblem as problem:
        _problem(problem)
        return
    series, findings, skipped, spikes = tables["series"], tables["findings"], tables["skipped"], tables["spikes"]
    first, ckpts, answers = tables["first"], tables["ckpts"], tables["answers"]

    st.title(md(run["name"]))
    when = run["last_ingested"].strftime("%Y-%m-%d %H:%M") if run["last_ingested"] else "?"
    st.markdown(f"<div class='muted'>{esc(run['root'])} · {esc(run['formats'] or 'no sources')} · "
                f"{run['n_series']} series, {run['n_points']:,} points · ingested {when}"
                f"{INCOMPLETE[run['ingest_complete']]}</div>", unsafe_allow_html=True)
    if not run["ingest_complete"]:
        st.warning("The last ingest of this run did not finish (it was stopped, or locked out of the database): "
                   "what is shown is part of the run. `forensics ingest` of its folder reads the rest.")

    if findings is None:
        st.info(f"This run was ingested but not analysed yet. **forensics analyze {md(run['root'])} --db {md(db)}** "
                "stores its diagnosis; reload this page after.")
    elif run["verdict"] == "older analysis":
        st.info(f"This run was analysed by an older version, which stored no verdict. **forensics analyze "
                f"{md(run['root'])} --db {md(db)}** stores one; reload this page after.")
        _findings(findings, series, spikes, answers)
    else:
        _diagnosis(run, findings, skipped, first, series, spikes, answers, tables["unknown"])
        code = [u for u in tables["unknown"] if is_code(u)]
        if code:
            st.caption(f"Code, not logs (analyze never runs it; forensics replay and probe import forensics_entry.py): "
                       f"{md(', '.join(code[:5]))}{', ...' if len(code) > 5 else ''}")

    drawable = series.filter(pl.col("first_step").is_not_null())
    logged = drawable.filter(~pl.col("ordinal"))
    # Ordinal axes (console lines without a step) never share a chart with logged steps (DECISIONS §16):
    # they are drawn only when the run has no logged step at all.
    drawable = logged if logged.height else drawable
    if drawable.height == 0:
        st.info("This run has no series to draw.")
        return
    full = (int(drawable["first_step"].min()), int(drawable["last_step"].max()))
    _reset_view_for(run_id, full)
    _focus_from_link(run_id, findings, full)
    st.header("Curves", anchor="curves")
    _scroll_to_curves()
    if not logged.height:
        st.caption("These logs print no step: the x axis is each line's ordinal in its log, not a training step.")
    if tables["passes"].height:
        st.caption("This run was resumed over steps it had already logged: each pass is drawn as its own line, "
                   "named by the file that holds it.")
    _curves(db, run, drawable, findings, spikes, first, ckpts if logged.height else ckpts.clear(), full,
            tables["passes"])
    if findings is not None:
        _replay_hint(run, findings, answers)
        if skipped is not None and skipped.height:
            with st.expander(f"Could not check ({skipped.height} detectors)", expanded=False):
                st.markdown("These detectors did not run, so their silence is not health:")
                for s in skipped.iter_rows(named=True):
                    st.markdown(f"- **{md(s['kind'])}**: {md(s['reason'])}")


def _placed(findings: pl.DataFrame, answers: dict | None) -> tuple[list[dict], dict[int, dict]]:
    """The findings as forensics/judge/learned.py reads them, and {finding_id: the stored answers it explains}."""
    rows = [{**f, "event": f["event_id"]} for f in findings.iter_rows(named=True)]
    placed = learned.place(rows, answers)
    return rows, {rows[i]["finding_id"]: v for i, v in placed.items()}


def _diagnosis(run: dict, findings: pl.DataFrame, skipped: pl.DataFrame, first: pl.DataFrame,
               series: pl.DataFrame, spikes: pl.DataFrame | None = None, answers: dict | None = None,
               unknown: list[str] | None = None) -> None:
    """The stored verdict with its reason, the restriction, the read problems and the files not read, the stored
    headline with what to check first (led by a stored replay or probe answer), then findings (each with the stored
    answers that explain it)."""
    icon, word, level = VERDICT[run["verdict"]]
    counts = ", ".join(f"{run[k]} {w}" for k, w in (("n_critical", "critical"), ("n_warning", "warning"),
                                                     ("n_info", "info")) if run[k])
    checked = f" {skipped.height} detectors could not check (listed below the curves)." if skipped.height else ""
    only = f" Restricted analysis: {md(restriction(run))}." if restriction(run) else ""
    verdict = (f"{icon} **{word if word.isupper() else word.capitalize()}**"
               + (f" ({counts})" if counts and run["verdict"] in ("failed", "suspicious") else "")
               + (f": {md(run['verdict_reason'])}" if run["verdict"] in ("inconclusive", "healthy") else "")
               + "." + only + checked)
    {"critical": st.error, "warning": st.warning, "info": st.info}.get(level, st.success)(verdict)
    problems = json.loads(run["read_problems"] or "[]")
    if problems:
        with st.expander(f"Read with problems ({len(problems)})", expanded=run["verdict"] == "inconclusive"):
            for p in problems:
                where = f" at {p['position']}" if p.get("position") is not None else ""
                kept = f"; kept {p['kept']}" if p.get("kept") else ""
                st.markdown(f"- {md(p['path'])}{md(where)}: **{md(p['kind'])}**: {md(p['detail'])}{md(kept)}")
    unknown = [u for u in unknown or [] if not is_code(u)]  # the run's code is listed apart, as the CLI lists it
    if unknown:
        with st.expander(f"Not read ({len(unknown)} file{'s' if len(unknown) != 1 else ''} no reader knows)",
                         expanded=run["verdict"] == "inconclusive"):
            st.markdown("\n".join(f"- {md(u)}" for u in unknown))
    if run["headline_id"] is not None:
        rows, _ = _placed(findings, answers)
        head = next((i for i, f in enumerate(rows) if f["finding_id"] == run["headline_id"]), None)
        st.markdown(f"**Earliest cause** ({charts.severity_label(run['worst'])}): {md(headline_text(run))}")
        top_checks = json.loads(rows[head]["checks"] or "[]") if head is not None else []
        checks = learned.check_first(rows, head, learned.place(rows, answers), top_checks[:3])
        if checks:
            st.markdown("Check first: " + "; ".join(md(c) for c in checks) + ".")
    if first.height:
        parts = [f"**{md(r['name'])}** {charts.nonfinite_text(r['value'])} at step {r['step']:,}"
                 for r in first.iter_rows(named=True)]
        st.markdown("First non-finite value per series (earliest first): " + "; ".join(parts) + ".")
    _findings(findings, series, spikes, answers)


def _findings(findings: pl.DataFrame, series: pl.DataFrame, spikes: pl.DataFrame | None = None,
              answers: dict | None = None) -> None:
    """The findings, grouped by the events the engine stored, each with the stored replay and probe answers that
    explain it, then the spikes no finding accounts for."""
    st.header("Findings", anchor="findings")
    if findings.height == 0:
        st.markdown("No detector fired on this run. That is a claim only about the detectors that ran: "
                    "see *Could not check* below the curves.")
        return
    st.caption("Grouped by event: findings that belong to one episode (exploding gradients, then divergence, "
               "then NaN) share an event. Focus a finding to draw every chart over its steps.")
    full = (int(series["first_step"].min() or 0), int(series["last_step"].max() or 0))
    _, placed = _placed(findings, answers)
    events = (findings.with_columns(pl.col("event_id").fill_null(-1 - pl.col("finding_id")))
              .group_by("event_id", maintain_order=True)
              .agg(pl.col("step").min().alias("start"), pl.col("step_end").max().alias("end"),
                   pl.col("step").max().alias("last"))
              .sort("start", nulls_last=True))
    for e in events.iter_rows(named=True):
        group = findings.filter(pl.col("event_id").fill_null(-1 - pl.col("finding_id")) == e["event_id"])
        end = max(v for v in (e["end"], e["last"], e["start"]) if v is not None) if e["start"] is not None else None
        title = f"Event {e['event_id']}" if e["event_id"] >= 0 else "Finding"
        with st.container(border=True):
            st.markdown(f"**{title}** · {steps_text(e['start'], end)} · {group.height} "
                        f"finding{'s' if group.height != 1 else ''}")
            for f in group.iter_rows(named=True):
                _finding(f, full)
                found = report.learned_lines(placed.get(f["finding_id"], {}))
                if found:
                    st.markdown("\n".join(("- " if not x.startswith(" ") else "  - ") + md(x.strip()) for x in found))
    if spikes is not None and spikes.height:
        events_seen = set(findings["event_id"].drop_nulls().to_list())
        other = [Spike(r["series"], r["step"], r["value"], r["baseline"], r["z"], r["event_id"])
                 for r in spikes.iter_rows(named=True) if r["event_id"] not in events_seen]
        if other:
            st.markdown(md(report.spikes_line(other)))


def _finding(f: dict, full: tuple[int, int]) -> None:
    _, icon, word = charts.SEVERITY.get(f["severity"], ("#777", "•", f["severity"]))
    left, right = st.columns([6, 1.2], vertical_alignment="top")
    where = steps_text(f["step"], f["step_end"]) + (f" · `{f['series']}`" if f["series"] else "")
    left.markdown(f"{badge(f['severity'], icon + ' ' + word)} &nbsp; **{md(f['kind'])}** "
                  f"<span class='muted'>· {where}</span>"
                  f"<div class='finding-summary'>{esc(f['summary'])}</div>", unsafe_allow_html=True)
    if f["step"] is not None:
        hi = f["step_end"] if f["step_end"] is not None else f["step"]
        right.button("Focus charts", key=f"focus_{f['finding_id']}", on_click=_focus,
                     args=(f["finding_id"], f["step"], hi, full), width="stretch",
                     help=f"draw every chart over {steps_text(f['step'], f['step_end'])}")
    with left.expander("Evidence, causes, first checks"):
        # one element, not four: a report holds many findings, and each element costs the browser a render
        evidence = json.loads(f["evidence"] or "{}")
        causes, checks = json.loads(f["causes"] or "[]"), json.loads(f["checks"] or "[]")
        sources = json.loads(f["sources"] or "[]")
        parts = ["\n".join(f"- {md(k)}: **{md(v)}**" for k, v in numbers.evidence(evidence))] if evidence else []
        if causes:
            parts.append("**Likely causes:** " + "; ".join(md(c) for c in causes) + ".")
        if checks:
            parts.append("**Check first:** " + "; ".join(md(c) for c in checks) + ".")
        if sources:
            parts.append("<span class='muted'>Read from: " + "; ".join(", ".join(f"{md(k)} {md(v)}" for k, v in s.items())
                                                                    for s in sources) + "</span>")
        if parts:
            st.markdown("\n\n".join(parts), unsafe_allow_html=True)


def _pick(series: pl.DataFrame, role: str) -> dict | None:
    """The series of `role` to draw: the canonical one first (callers pass logged-step series only)."""
    rows = series.filter(pl.col("role") == role).sort("canonical", descending=True)
    return rows.row(0, named=True) if rows.height else None


def chart_lines(db: Path, series_rows: list[dict], lo: int, hi: int, analysis_id: int | None,
                spikes: pl.DataFrame | None, first: pl.DataFrame, passes: pl.DataFrame | None = None) -> list[dict]:
    """For each series: its decimated points over [lo, hi], its spikes there and its first non-finite point. A
    series a resumed run logged twice over the same steps (`passes`, app_passes) is drawn as one line per pass,
    named by its file, so the curve does not double back on itself; its markers go with the first pass."""
    out = []
    for i, s in enumerate(series_rows):
        sp = None
        if spikes is not None:
            sp = spikes.filter((pl.col("series") == s["name"]) & pl.col("step").is_between(lo, hi))
        f = first.filter(pl.col("series_id") == s["series_id"])
        colour = charts.colour_of(s["name"], s["split"], s["role"], i)
        mine = passes.filter(pl.col("series_id") == s["series_id"]) if passes is not None else None
        if mine is None or mine.height < 2:
            points = query(db, "app_m4", s["series_id"], lo, hi, PIXELS, analysis_id, s["name"])
            out.append({"name": s["name"], "colour": colour, "points": points, "spikes": sp,
                        "first": f.row(0, named=True) if f.height else None})
            continue
        for k, p in enumerate(mine.iter_rows(named=True)):
            points = query(db, "app_m4", s["series_id"], lo, hi, PIXELS, analysis_id, s["name"], p["source_id"])
            out.append({"name": f"{s['name']} · pass {p['pass']} ({Path(p['path']).name}, steps "
                                f"{p['first_step']:,}–{p['last_step']:,})",
                        "colour": colour if k == 0 else charts.OTHERS[(i + k) % len(charts.OTHERS)], "points": points,
                        "spikes": sp if k == 0 else None, "first": (f.row(0, named=True) if f.height else None)
                        if k == 0 else None})
    return out


def _curves(db: Path, run: dict, series: pl.DataFrame, findings: pl.DataFrame | None, spikes: pl.DataFrame | None,
            first: pl.DataFrame, ckpts: pl.DataFrame, full: tuple[int, int], passes: pl.DataFrame | None = None) -> None:
    lo, hi = st.session_state.view
    left, right = st.columns([5, 1.2], vertical_alignment="bottom")
    if full[1] > full[0]:
        left.slider("Steps shown", min_value=full[0], max_value=full[1], key="view",
                    help="Drag, or select a box on any chart: every chart is re-queried for the steps shown.")
    right.button("Show all steps", on_click=_show_all, args=(full,), width="stretch")
    lo, hi = st.session_state.view
    focus = st.session_state.get("focus")
    st.caption(f"Steps {lo:,}–{hi:,}. Each curve keeps, per pixel column, its first, lowest, highest and last "
               "point, every spike and every NaN/Inf: nothing the analysis saw is thinned away. ▲ spike · "
               "✕ NaN/Inf · ★ first non-finite · ticks along the bottom: checkpoints · shading: findings.")

    groups = []
    loss = [r for r in (_pick(series, "train_loss"), _pick(series, "val_loss")) if r]
    if loss:
        groups.append(("Loss", loss))
    for title, role in (("Gradient norm", "grad_norm"), ("Learning rate", "lr"), ("Loss scale", "loss_scale")):
        r = _pick(series, role)
        if r:
            groups.append((title, [r]))
    drawn = {r["name"] for _, rows in groups for r in rows}
    others = [n for n in series["name"].to_list() if n not in drawn]
    if others:
        extra = st.multiselect("More series", others, placeholder="add any other series of this run")
        for name in extra:
            groups.append((name, [series.filter(pl.col("name") == name).row(0, named=True)]))

    aid = run["analysis_id"]
    for title, rows in groups:
        _draw_group(db, title, rows, lo, hi, aid, findings, spikes, first, ckpts, focus, full, passes)
    for f in _wall_clock_findings(findings):  # a throughput_drop is judged on step times: show them under it
        rows = series.filter(pl.col("name") == f["series"])
        if rows.height == 0:
            continue
        s = rows.row(0, named=True)
        evidence = _decode(f.get("evidence") or "{}")
        buckets = evidence.get("reduced_to_buckets") if isinstance(evidence, dict) else None  # the view it judged
        priced = next(x for x in _decode(f.get("sources") or "[]") if x.get("column") == "wall_time")
        line = {"name": f"{s['name']} · seconds per step", "colour": charts.OTHERS[0], "spikes": None, "first": None,
                "points": query(db, "app_step_time", s["series_id"], lo, hi, PIXELS, buckets, priced)}
        if line["points"].height == 0:
            continue
        shown = findings.filter(pl.col("finding_id") == f["finding_id"])
        fig = charts.series_figure(f"Step time (Δwall time / Δstep of {s['name']})", [line], lo, hi, findings=shown,
                                   checkpoints=ckpts, focus=focus)
        event = st.plotly_chart(fig, key=f"chart_step_time_{f['finding_id']}", on_select="rerun",
                                selection_mode=("box",), config={"displaylogo": False})
        _apply_box(event, full)


def _scroll_to_curves() -> None:
    """After a Focus click, bring the charts it redrew into view (the button sits far below them, in the findings).
    Streamlit has no scroll call: a zero-height component's script scrolls its parent page (same origin)."""
    n = st.session_state.pop("scroll_to_curves", None)
    if n is None:
        return
    st.session_state.scroll_to_curves_n = n
    import streamlit.components.v1 as components

    components.html(f"""<script>/* focus {n} */
        const el = window.parent.document.getElementById('curves');
        if (el) el.scrollIntoView({{block: 'start'}});</script>""", height=0)


def _wall_clock_findings(findings: pl.DataFrame | None) -> list[dict]:
    """Findings whose sources are a series' wall-clock stamps (throughput_drop's), one per series."""
    if findings is None or findings.height == 0:
        return []
    out, seen = [], set()
    for f in findings.iter_rows(named=True):
        sources = _decode(f.get("sources") or "[]")
        if f["series"] and f["series"] not in seen and isinstance(sources, list) and any(
                isinstance(x, dict) and x.get("column") == "wall_time" for x in sources):
            seen.add(f["series"])
            out.append(f)
    return out


@st.cache_resource(max_entries=256, show_spinner=False)
def _figure(key: tuple, _build: Any) -> Any:
    """A chart built once per database state and view (`key`): a page redrawn, or visited again, sends the same
    figure without building it (plotly validates every property it is given: a tenth of a second a chart).
    Streamlit only reads the figure (`to_dict`), so sessions can share it."""
    return _build()


def _draw_group(db: Path, title: str, rows: list[dict], lo: int, hi: int, aid: int | None,
                findings: pl.DataFrame | None, spikes: pl.DataFrame | None, first: pl.DataFrame, ckpts: pl.DataFrame,
                focus: int | None, full: tuple[int, int], passes: pl.DataFrame | None = None) -> None:
    """One chart of a group of series, with the findings on them shaded; a box selected on it sets the steps."""
    names = {r["name"] for r in rows}
    shown = None
    if findings is not None:
        shown = findings.filter(pl.col("series").is_in(list(names)) | pl.col("series").is_null()
                                | (pl.col("finding_id") == (focus if focus is not None else -1))
                                | pl.lit(title == "Loss"))
    key = (str(db), stamp(db), aid, title, tuple(r["series_id"] for r in rows), lo, hi, focus, ckpts.height,
           findings is None)
    fig = _figure(key, lambda: charts.series_figure(title, chart_lines(db, rows, lo, hi, aid, spikes, first, passes),
                                                    lo, hi, findings=shown, checkpoints=ckpts, focus=focus))
    event = st.plotly_chart(fig, key=f"chart_{title}", on_select="rerun", selection_mode=("box",),
                            config={"displaylogo": False})
    _apply_box(event, full)


def _apply_box(event: Any, full: tuple[int, int]) -> None:
    """A box selected on a chart becomes the steps shown (re-queried at full detail on the next run)."""
    try:
        boxes = event.selection.box
    except AttributeError:
        return
    if not boxes:
        return
    xs = boxes[0].get("x") or []
    if len(xs) < 2:
        return
    new = (max(full[0], math.floor(min(xs))), min(full[1], math.ceil(max(xs))))
    if new[1] > new[0] and new != st.session_state.get("last_box"):
        st.session_state.last_box = new
        st.session_state.pending_view = new
        st.rerun()


def _replay_hint(run: dict, findings: pl.DataFrame, answers: dict | None = None) -> None:
    """The replay command for the non-finite onset, unless a replay of it is stored since the run last changed."""
    onset = findings.filter(pl.col("kind").is_in(learned.ONSET_KINDS) & pl.col("step").is_not_null())
    if onset.height and not learned.replay_fresh(answers, onset["step"][0]):
        step = onset["step"][0]
        st.markdown("**Replay the first non-finite step** to see the op, module and samples behind it:")
        st.code(f"forensics replay {run['root']} --step {step}", language="bash")


# -- Layers -------------------------------------------------------------------------------------------------

def layers_page(db: Path, runs: pl.DataFrame, run_id: str) -> None:
    run = _run_row(runs, run_id)
    st.title(f"Layers · {md(run['name'])}")
    try:
        norms = query(db, "app_layer_norms", run_id)
        ratios = query(db, "app_update_ratios", run_id)
    except StoreProblem as problem:
        _problem(problem)
        return
    if norms.height == 0 and ratios.height == 0:
        st.info("No per-layer numbers for this run: its logs hold no per-layer gradient or weight norms and no "
                "checkpoint was read. Log them per layer (e.g. `grad_norm/<layer>`), or keep checkpoints: "
                "`forensics ingest` reads their tensor statistics.")
        return
    if norms.height:
        origin = norms["origin"][0]
        st.markdown("Each row is a layer, each column a stretch of steps; colour is log10 of the norm, so a "
                    "layer that vanishes or explodes stands out as a band. ✕ marks a NaN or Inf. "
                    + ("From the logged per-layer norms (each cell the largest value in its steps)."
                       if origin == "logs" else "From the checkpoints' tensor statistics (L2 of each parameter)."))
        for quantity in sorted(set(norms["quantity"].to_list())):
            cells = norms.filter(pl.col("quantity") == quantity)
            fig = _figure((str(db), stamp(db), run_id, "heat", quantity),
                          lambda: charts.heatmap_figure(f"Per-layer {quantity}", cells, colour_title="log10"))
            st.plotly_chart(fig, key=f"heat_{quantity}", config={"displaylogo": False})
    if ratios.height:
        st.markdown("How far each tensor moved per step between consecutive checkpoints, relative to its size: "
                    "‖Δw‖/‖w‖ between two checkpoints divided by the steps between them, each cell drawn over "
                    "those steps (about 1e-3 per step is typical for Adam, much larger means the step size "
                    "overwhelms the weights, near zero means the layer is frozen).")
        fig = _figure((str(db), stamp(db), run_id, "heat_ratio"),
                      lambda: charts.interval_heatmap_figure("Update ratio per step, between checkpoints", ratios))
        st.plotly_chart(fig, key="heat_ratio", config={"displaylogo": False})


# -- Checkpoints and replays ----------------------------------------------------------------------------------

def checkpoints_page(db: Path, runs: pl.DataFrame, run_id: str) -> None:
    run = _run_row(runs, run_id)
    st.title(f"Checkpoints and replays · {md(run['name'])}")
    try:
        ckpts = query(db, "app_checkpoints", run_id)
        movers = query(db, "app_movers", run_id, 5)
        batches = query(db, "app_batches", run_id)
        replays = query(db, "app_replays", run_id)
    except StoreProblem as problem:
        _problem(problem)
        return

    st.header("Checkpoints")
    if ckpts.height == 0:
        st.markdown("No checkpoint was found in this run's folder.")
    else:
        bad = ckpts.filter(pl.col("finite").not_())
        good_before = ckpts.filter(pl.col("finite"))
        sentence = f"{ckpts.height} checkpoint{'s' if ckpts.height != 1 else ''}"
        if bad.height:
            first_bad = bad.row(0, named=True)
            last_good = good_before.filter(pl.col("step") < (first_bad["step"] or 0))
            sentence += (f"; the first holding NaN/Inf is **{md(first_bad['path'])}** (step {first_bad['step']})"
                         + (f", the last finite before it **{md(last_good['path'][-1])}** (step {last_good['step'][-1]})"
                            if last_good.height else ""))
        else:
            sentence += ", all finite where read."
        st.markdown(sentence)
        for c in ckpts.iter_rows(named=True):
            if c["finite"] is None:
                flag = badge("none", "○ not read")
            elif c["finite"]:
                flag = badge("ok", "✅ finite")
            else:
                flag = badge("critical", f"⛔ {c['n_nonfinite']:,} NaN/Inf")
            held = ", ".join(w for w, k in (("optimizer", "has_optimizer"), ("GradScaler", "has_scaler")) if c[k])
            step = "?" if c["step"] is None else f"{c['step']:,}"
            st.markdown(f"{flag} &nbsp; step **{step}** · <code>{esc(c['path'])}</code> · {esc(c['format'])} · "
                        f"{numbers.size(c['size_bytes'], 'size unknown')}"
                        + (f" · with {held}" if held else "")
                        + (f" · <span class='muted'>{esc(c['status'])}: {esc(c['detail'])}</span>"
                           if c["status"] != "ok" and c["detail"] else ""),
                        unsafe_allow_html=True)
    if movers.height:
        st.subheader("Biggest movers between consecutive checkpoints")
        pairs = movers.select("prev_step", "step", "step_distance").unique(maintain_order=True)
        cols = st.columns(2)
        for i, p in enumerate(pairs.iter_rows(named=True)):
            part = movers.filter((pl.col("step") == p["step"]) & (pl.col("prev_step") == p["prev_step"]))
            fig = _figure((str(db), stamp(db), run_id, "movers", p["prev_step"], p["step"]), lambda: charts.movers_figure(
                f"step {p['prev_step']} → {p['step']} ({p['step_distance']} steps)", part))
            cols[i % 2].plotly_chart(fig, key=f"movers_{p['prev_step']}_{p['step']}", config={"displaylogo": False})
    flagged = batches.filter(pl.col("nonfinite_samples").list.len() > 0)
    if batches.height:
        n = batches["path"].n_unique()
        st.subheader("Saved batches")
        st.markdown(f"{n} saved batch{'es' if n != 1 else ''}; "
                    + ("none holds NaN/Inf samples" if flagged.height == 0 else "samples holding NaN/Inf:")
                    + " (outlier samples, where any, are in the bad_batch finding of the run report).")
        for b in flagged.iter_rows(named=True):
            bits = []
            if b["nonfinite_samples"]:
                bits.append(f"NaN/Inf in samples {numbers.ints(b['nonfinite_samples'])}")
            st.markdown(f"- step {b['step']}: {md(b['path'])} {md(b['tensor'])}: " + "; ".join(bits))

    st.header("Replays")
    if replays is None or replays.height == 0:
        why = ("this database has no replay results yet" if replays is None
               else "no replay of this run is stored yet")
        st.markdown(f"Nothing to show: {why}. A replay re-runs one step from the last finite checkpoint under "
                    "anomaly detection and names the operation, module and samples behind a NaN. Produce one with:")
        runs_findings = run["analysis_id"]
        step = "N"
        if runs_findings is not None:
            try:
                fs = query(db, "app_findings", runs_findings)
            except StoreProblem:
                fs = None
            if fs is not None:
                onset = fs.filter(pl.col("kind").is_in(["nan_loss", "masked_nonfinite"]) & pl.col("step").is_not_null())
                if onset.height:
                    step = str(onset["step"][0])
        st.code(f"forensics replay {run['root']} --step {step}", language="bash")
        return
    for r in replays.iter_rows(named=True):
        _replay(run, r)


def _replay(run: dict, r: dict[str, Any]) -> None:
    """One stored replay as `forensics replay` prints it: verdict, the command that made it, fidelity, whether the
    failure came back, where the first non-finite value appeared, culprit samples, counterfactuals."""
    from forensics.usercode.replay import report as replay_report
    from forensics.usercode.replay.result import ReplayResult

    doc = _decode(r.get("result"))
    res = ReplayResult.from_json(doc if isinstance(doc, dict) else {})
    if res.step is None:
        res.step = r.get("step")
    when = r.get("created")
    with st.container(border=True):
        st.markdown(f"**Replay of step {md(res.step)}** from <code>{esc(res.from_checkpoint)}</code>"
                    + (f" <span class='muted'>· {esc(when.strftime('%Y-%m-%d %H:%M'))}</span>"
                       if hasattr(when, "strftime") else ""), unsafe_allow_html=True)
        if res.status:
            st.markdown(md(res.status))
        st.code(res.command or f"forensics replay {run['root']} --step {res.step}", language="bash")
        restored = (f"{res.from_checkpoint} (step {res.checkpoint_step}; restored: {', '.join(res.restored)})"
                    if res.restored else None)
        rows = [("Entry point", f"{res.entry} (the run's code, as replay ran it)" if res.entry != "?" else None),
                ("Restored", restored),
                ("Fidelity", replay_report.fidelity_line(res)), ("Reproduced", replay_report.reproduced_line(res)),
                ("First non-finite value", replay_report.where_line(res)), ("Culprit samples", replay_report.culprits_line(res))]
        for label, text in rows:
            if text:
                st.markdown(f"**{label}**: {md(text)}")
        hit = res.first_nonfinite or {}
        if hit.get("source"):
            st.code(str(hit["source"]), language="python")
        if res.counterfactuals:
            st.markdown(f"**Counterfactuals** ({md(replay_report.counterfactuals_window(res))}):\n"
                        + "\n".join(f"- `{esc(change)}` {md(text)}" for change, text in replay_report.counterfactual_lines(res)))
            fix = replay_report.likely_fix_line(res)
            if fix:
                st.markdown(f"**{md(fix.partition(': ')[0].capitalize())}**: {md(fix.partition(': ')[2])}")
        if res.notes:
            st.caption(" · ".join(md(n) for n in res.notes))
        try:
            whole = replay_report.text(res)
        except (KeyError, TypeError, IndexError):  # a result stored by another version, without a field it needs
            whole = None
        if whole:
            with st.expander("The whole replay, as `forensics replay` printed it: entry point, restored state, every "
                             "fidelity value"):
                st.code(clean(whole), language=None)


def _decode(v: Any) -> Any:
    if isinstance(v, str) and v[:1] in "[{":
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


# -- Compare ------------------------------------------------------------------------------------------------

ROLE_TITLES = {"train_loss": "train loss", "val_loss": "validation loss", "grad_norm": "gradient norm",
               "lr": "learning rate", "loss_scale": "loss scale", "accuracy": "accuracy",
               "val_accuracy": "validation accuracy"}


def compare_page(db: Path, runs: pl.DataFrame, run_id: str) -> None:
    """`forensics compare` of the chosen run (its own result, forensics.services.compare): the siblings chosen and
    why, the two runs' curves with the step where they part, what moved first, the ranked settings, the team table."""
    from forensics.text import compare as words

    st.title("Compare runs")
    names = dict(zip(runs["run_id"].to_list(), runs["name"].to_list()))
    try:
        chosen = compared(db, run_id)
    except StoreProblem as problem:
        st.info(f"Nothing to compare: {problem}")
        return
    sibling_ids = [s.run_id for s in chosen.siblings]
    pickable = sibling_ids + [r for r in names if r != run_id and r not in sibling_ids]
    if not pickable:
        st.info("The database holds one run; ingest a sibling run to compare against.")
        return
    other = st.selectbox("Compare with", pickable, format_func=lambda r: names[r] + (
        " (chosen sibling)" if sibling_ids and r == sibling_ids[0] else " (sibling)" if r in sibling_ids else ""),
        help="the store's runs that worked, with the same writer and model shape, nearest config first")
    c = chosen if sibling_ids and other == sibling_ids[0] else compared(db, run_id, (other,))
    st.markdown(md(words.text(c).split("\n")[0]))
    if chosen.siblings:
        st.subheader("Siblings")
        st.dataframe(pl.DataFrame({"run": [s.name for s in chosen.siblings], "verdict": [s.verdict for s in chosen.siblings],
                                   "why": [s.why for s in chosen.siblings]}), hide_index=True, width="stretch")
    try:
        per_run = {r: query(db, "app_series", r).filter(~pl.col("ordinal")) for r in (run_id, other)}
        firsts = {r: query(db, "app_first_nonfinite", r) for r in (run_id, other)}
    except StoreProblem as problem:
        _problem(problem)
        return
    roles = [role for role in ROLE_TITLES if all(_pick(s, role) for s in per_run.values())]
    st.subheader("Where they part")
    st.markdown(md(words.parting_words(c.parting, names[other])))
    if c.movers:
        st.markdown(md(f"Moved first, at or before step {c.parting.step}: " + "; ".join(words.mover_words(m) for m in c.movers)))
    if roles:
        role = st.selectbox("Series", roles, format_func=ROLE_TITLES.__getitem__)
        rows = {r: _pick(s, role) for r, s in per_run.items()}
        lo = min(x["first_step"] for x in rows.values() if x["first_step"] is not None)
        hi = max(x["last_step"] for x in rows.values() if x["last_step"] is not None)
        lines = []
        for i, (r, s) in enumerate(rows.items()):
            aid = _run_row(runs, r)["analysis_id"]
            spikes = query(db, "app_spikes", aid) if aid is not None else None
            line = chart_lines(db, [s], lo, hi, aid, spikes, firsts[r])[0]
            line["name"] = names[r]
            line["colour"] = (charts.TRAIN, charts.VAL, *charts.OTHERS)[i % (2 + len(charts.OTHERS))]
            lines.append(line)
        fig = charts.series_figure(f"{ROLE_TITLES[role]}, aligned by step", lines, lo, hi)
        if c.parting is not None and c.parting.step is not None:
            fig.add_vline(x=c.parting.step, line_dash="dash", line_color="#922B21",
                          annotation_text=f"part at step {c.parting.step}", annotation_position="top left")
        st.plotly_chart(fig, key="compare_chart", config={"displaylogo": False})
    else:
        st.info("These runs share no series role (train loss, validation loss, gradient norm, ...) to overlay.")
    _settings(c, names[other])
    for note in c.notes:
        st.caption(md(note))


def _settings(c: Any, other: str) -> None:
    st.subheader("Settings that differ")
    what = c.headline["kind"] if c.headline else "the diagnosis"
    if not c.settings:
        st.markdown("No config value differs between these runs (or neither has a stored config).")
    else:
        st.markdown(md(f"{len(c.settings)} config values differ from {other}, ranked by what {what} implicates:"))
        st.dataframe(pl.DataFrame({"rank": [s.rank for s in c.settings], "key": [s.key for s in c.settings],
                                   "change": [s.change for s in c.settings],
                                   "implicated by": [s.implicated_by or "" for s in c.settings]}),
                     hide_index=True, width="stretch")
    if c.team:
        st.subheader("What the store's runs say")
        st.caption("Counts of runs with each value and how they ended: an association in this store, not a cause.")
        st.dataframe(pl.DataFrame({"key": [t.key for t in c.team], "runs": [t.runs for t in c.team],
                                   "p (Fisher exact)": [t.p for t in c.team], "how they ended": [t.text for t in c.team]}),
                     hide_index=True, width="stretch")
