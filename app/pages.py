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
from app.data import StoreProblem, query
from forensics.judge import numbers
from forensics.text.render import clean, md

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
    rank = {v: i for i, v in enumerate(VERDICT)}
    if order == "worst first":
        shown = shown.with_columns(pl.col("verdict").replace_strict(rank, default=9).alias("_rank")).sort(
            ["_rank", "n_critical", "n_warning", "name"], descending=[False, True, True, False])
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
        series = query(db, "app_series", run_id)
        aid = run["analysis_id"]
        findings = query(db, "app_findings", aid) if aid is not None else None
        skipped = query(db, "app_skipped", aid) if aid is not None else None
        spikes = query(db, "app_spikes", aid) if aid is not None else None
        first = query(db, "app_first_nonfinite", run_id)
        ckpts = query(db, "app_checkpoints", run_id)
        probes = query(db, "app_probes", run_id)
    except StoreProblem as problem:
        _problem(problem)
        return

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
        _findings(findings, series, probes)
    else:
        _diagnosis(run, findings, skipped, first, series, probes)

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
    st.header("Curves")
    if not logged.height:
        st.caption("These logs print no step: the x axis is each line's ordinal in its log, not a training step.")
    _curves(db, run, drawable, findings, spikes, first, ckpts if logged.height else ckpts.clear(), full)
    if findings is not None:
        _replay_hint(run, findings)
        if skipped is not None and skipped.height:
            with st.expander(f"Could not check ({skipped.height} detectors)", expanded=False):
                st.markdown("These detectors did not run, so their silence is not health:")
                for s in skipped.iter_rows(named=True):
                    st.markdown(f"- **{md(s['kind'])}**: {md(s['reason'])}")


def _diagnosis(run: dict, findings: pl.DataFrame, skipped: pl.DataFrame, first: pl.DataFrame,
               series: pl.DataFrame, probes: pl.DataFrame | None = None) -> None:
    """The stored verdict with its reason, the restriction, the read problems, the stored headline, then findings
    (each with the stored probe checks that explain it)."""
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
    if run["headline_id"] is not None:
        top = findings.filter(pl.col("finding_id") == run["headline_id"])
        st.markdown(f"**Earliest cause** ({charts.severity_label(run['worst'])}): {md(headline_text(run))}")
        top_checks = json.loads(top["checks"][0] or "[]") if top.height else []
        if top_checks:
            st.markdown("Check first: " + "; ".join(md(c) for c in top_checks[:3]) + ".")
    if first.height:
        parts = [f"**{md(r['name'])}** {charts.nonfinite_text(r['value'])} at step {r['step']:,}"
                 for r in first.iter_rows(named=True)]
        st.markdown("First non-finite value per series (earliest first): " + "; ".join(parts) + ".")
    _findings(findings, series, probes)


def _findings(findings: pl.DataFrame, series: pl.DataFrame, probes: pl.DataFrame | None = None) -> None:
    """The findings, grouped by the events the engine stored, each with the stored probe checks that explain it."""
    st.header("Findings")
    if findings.height == 0:
        st.markdown("No detector fired on this run. That is a claim only about the detectors that ran: "
                    "see *Could not check* below the curves.")
        return
    st.caption("Grouped by event: findings that belong to one episode (exploding gradients, then divergence, "
               "then NaN) share an event. Focus a finding to draw every chart over its steps.")
    full = (int(series["first_step"].min() or 0), int(series["last_step"].max() or 0))
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
                _probes_for(f["kind"], probes)


def _probes_for(kind: str, probes: pl.DataFrame | None) -> None:
    """The stored `forensics probe` checks that explain a finding of this kind, beside it (failed ones first)."""
    if probes is None or probes.height == 0:
        return
    rows = [p for p in probes.iter_rows(named=True) if kind in (p["explains"] or [])]
    for p in sorted(rows, key=lambda p: p["status"] != "fail"):
        names = f" · names {', '.join(f'`{md(n)}`' for n in p['names'])}" if p["names"] else ""
        st.markdown(f"<span class='muted'>probe</span> **{md(p['check_name'])}**: {PROBE_STATUS[p['status']]} — "
                    f"{esc(p['summary'])}{names}", unsafe_allow_html=True)


PROBE_STATUS = {"fail": "❌ fail", "pass": "✅ pass", "n/a": "➖ n/a"}


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
        evidence = json.loads(f["evidence"] or "{}")
        if evidence:
            st.markdown("\n".join(f"- {md(k)}: **{md(v)}**" for k, v in numbers.evidence(evidence)))
        causes, checks = json.loads(f["causes"] or "[]"), json.loads(f["checks"] or "[]")
        if causes:
            st.markdown("**Likely causes:** " + "; ".join(md(c) for c in causes) + ".")
        if checks:
            st.markdown("**Check first:** " + "; ".join(md(c) for c in checks) + ".")
        sources = json.loads(f["sources"] or "[]")
        if sources:
            st.caption("Read from: " + "; ".join(", ".join(f"{md(k)} {md(v)}" for k, v in s.items()) for s in sources))


def _pick(series: pl.DataFrame, role: str) -> dict | None:
    """The series of `role` to draw: the canonical one first (callers pass logged-step series only)."""
    rows = series.filter(pl.col("role") == role).sort("canonical", descending=True)
    return rows.row(0, named=True) if rows.height else None


def chart_lines(db: Path, series_rows: list[dict], lo: int, hi: int, analysis_id: int | None,
                spikes: pl.DataFrame | None, first: pl.DataFrame) -> list[dict]:
    """For each series: its decimated points over [lo, hi], its spikes there and its first non-finite point."""
    out = []
    for i, s in enumerate(series_rows):
        points = query(db, "app_m4", s["series_id"], lo, hi, PIXELS, analysis_id, s["name"])
        sp = None
        if spikes is not None:
            sp = spikes.filter((pl.col("series") == s["name"]) & pl.col("step").is_between(lo, hi))
        f = first.filter(pl.col("series_id") == s["series_id"])
        out.append({"name": s["name"], "colour": charts.colour_of(s["name"], s["split"], s["role"], i), "points": points,
                    "spikes": sp, "first": f.row(0, named=True) if f.height else None})
    return out


def _curves(db: Path, run: dict, series: pl.DataFrame, findings: pl.DataFrame | None, spikes: pl.DataFrame | None,
            first: pl.DataFrame, ckpts: pl.DataFrame, full: tuple[int, int]) -> None:
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
        _draw_group(db, title, rows, lo, hi, aid, findings, spikes, first, ckpts, focus, full)
    for f in _wall_clock_findings(findings):  # a throughput_drop is judged on step times: show them under it
        rows = series.filter(pl.col("name") == f["series"])
        if rows.height == 0:
            continue
        s = rows.row(0, named=True)
        evidence = _decode(f.get("evidence") or "{}")
        buckets = evidence.get("reduced_to_buckets") if isinstance(evidence, dict) else None  # the view it judged
        line = {"name": f"{s['name']} · seconds per step", "colour": charts.OTHERS[0], "spikes": None, "first": None,
                "points": query(db, "app_step_time", s["series_id"], lo, hi, PIXELS, buckets)}
        if line["points"].height == 0:
            continue
        shown = findings.filter(pl.col("finding_id") == f["finding_id"])
        fig = charts.series_figure(f"Step time (Δwall time / Δstep of {s['name']})", [line], lo, hi, findings=shown,
                                   checkpoints=ckpts, focus=focus)
        event = st.plotly_chart(fig, key=f"chart_step_time_{f['finding_id']}", on_select="rerun",
                                selection_mode=("box",), config={"displaylogo": False})
        _apply_box(event, full)


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


def _draw_group(db: Path, title: str, rows: list[dict], lo: int, hi: int, aid: int | None,
                findings: pl.DataFrame | None, spikes: pl.DataFrame | None, first: pl.DataFrame, ckpts: pl.DataFrame,
                focus: int | None, full: tuple[int, int]) -> None:
    """One chart of a group of series, with the findings on them shaded; a box selected on it sets the steps."""
    names = {r["name"] for r in rows}
    shown = None
    if findings is not None:
        shown = findings.filter(pl.col("series").is_in(list(names)) | pl.col("series").is_null()
                                | (pl.col("finding_id") == (focus if focus is not None else -1))
                                | pl.lit(title == "Loss"))
    lines = chart_lines(db, rows, lo, hi, aid, spikes, first)
    fig = charts.series_figure(title, lines, lo, hi, findings=shown, checkpoints=ckpts, focus=focus)
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


def _replay_hint(run: dict, findings: pl.DataFrame) -> None:
    onset = findings.filter(pl.col("kind").is_in(["nan_loss", "masked_nonfinite"]) & pl.col("step").is_not_null())
    if onset.height:
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
            st.plotly_chart(charts.heatmap_figure(f"Per-layer {quantity}", cells, colour_title="log10"),
                            key=f"heat_{quantity}", config={"displaylogo": False})
    if ratios.height:
        st.markdown("How far each tensor moved between consecutive checkpoints, relative to its size "
                    "(‖Δw‖/‖w‖; about 1e-3 per step is typical for Adam, much larger means the step size "
                    "overwhelms the weights, near zero means the layer is frozen).")
        st.plotly_chart(charts.heatmap_figure("Update ratio between checkpoints", ratios, colour_title="log10"),
                        key="heat_ratio", config={"displaylogo": False})


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
            fig = charts.movers_figure(f"step {p['prev_step']} → {p['step']} ({p['step_distance']} steps)", part)
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
    from forensics.usercode.replay import report
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
        rows = [("Fidelity", report.fidelity_line(res)), ("Reproduced", report.reproduced_line(res)),
                ("First non-finite value", report.where_line(res)), ("Culprit samples", report.culprits_line(res))]
        for label, text in rows:
            if text:
                st.markdown(f"**{label}**: {md(text)}")
        hit = res.first_nonfinite or {}
        if hit.get("source"):
            st.code(str(hit["source"]), language="python")
        if res.counterfactuals:
            st.markdown(f"**Counterfactuals** ({md(report.counterfactuals_window(res))}):\n"
                        + "\n".join(f"- `{esc(change)}` {md(text)}" for change, text in report.counterfactual_lines(res)))
            fix = report.likely_fix_line(res)
            if fix:
                st.markdown(f"**{md(fix.partition(': ')[0].capitalize())}**: {md(fix.partition(': ')[2])}")
        if res.notes:
            st.caption(" · ".join(md(n) for n in res.notes))


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
    st.title("Compare runs")
    names = dict(zip(runs["run_id"].to_list(), runs["name"].to_list()))
    others = [i for i in names if i != run_id]
    try:
        sibling = closest_healthy_sibling(runs, run_id, query(db, "app_configs", list(names)))
    except StoreProblem:
        sibling = None
    default = [run_id] + ([sibling] if sibling else others[:1])
    chosen = st.multiselect("Runs", list(names), default=default, format_func=names.__getitem__,
                            help="a failed run against its healthy sibling, aligned by step")
    if len(chosen) < 2:
        st.info("Choose two or more runs to overlay." if len(names) > 1 else
                "The database holds one run; ingest a sibling run to compare against.")
        if not chosen:
            return
    try:
        per_run = {r: query(db, "app_series", r).filter(~pl.col("ordinal")) for r in chosen}
        configs = query(db, "app_configs", list(chosen))
        firsts = {r: query(db, "app_first_nonfinite", r) for r in chosen}
    except StoreProblem as problem:
        _problem(problem)
        return
    roles = [role for role in ROLE_TITLES if all(_pick(s, role) for s in per_run.values())]
    if not roles:
        st.info("These runs share no series role (train loss, validation loss, gradient norm, ...) to overlay.")
    else:
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
        st.plotly_chart(fig, key="compare_chart", config={"displaylogo": False})
    _config_differences(configs, chosen, names)


def closest_healthy_sibling(runs: pl.DataFrame, run_id: str, configs: pl.DataFrame) -> str | None:
    """The run to compare `run_id` against by default (docs/app.md): a healthy run (its stored verdict) with the same
    config keys and the fewest differing values; else the healthy run with the fewest differing keys and values;
    None when no other run is healthy. Ties go to the name that sorts first."""
    healthy = runs.filter((pl.col("verdict") == "healthy") & (pl.col("run_id") != run_id))
    if healthy.height == 0:
        return None
    conf = {r: dict(zip(g["key"].to_list(), g["value"].to_list()))
            for (r,), g in configs.group_by("run_id")} if configs.height else {}
    mine = conf.get(run_id, {})

    def distance(other: str) -> tuple[int, int]:
        theirs = conf.get(other, {})
        keys = set(mine) | set(theirs)
        return (len(set(mine) ^ set(theirs)), sum(mine.get(k) != theirs.get(k) for k in keys))

    return min(healthy.sort("name")["run_id"].to_list(), key=distance)


def _config_differences(configs: pl.DataFrame, chosen: list[str], names: dict[str, str]) -> None:
    st.subheader("Config differences")
    if configs.height == 0:
        st.markdown("None of these runs has a stored config.")
        return
    table = configs.group_by("key", "run_id").agg(pl.col("value").first()).pivot(
        on="run_id", index="key", values="value")
    cols = [r for r in chosen if r in table.columns]
    for r in chosen:
        if r not in table.columns:
            table = table.with_columns(pl.lit(None, dtype=pl.Utf8).alias(r))
            cols.append(r)
    differ = table.filter(pl.concat_list([pl.col(c).fill_null("(absent)") for c in chosen]).list.n_unique() > 1)
    same = table.height - differ.height
    if differ.height == 0:
        st.markdown(f"All {table.height} config values are the same in these runs.")
        return
    st.markdown(f"{differ.height} of {table.height} config values differ ({same} are the same):")
    shown = differ.sort("key").select("key", *[pl.col(r).fill_null("—").alias(names[r]) for r in chosen])
    st.dataframe(shown, hide_index=True, width="stretch")
