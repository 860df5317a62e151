"""Plotly figures for the app, built from frames the store returned: no Streamlit here, and nothing computed
beyond placing what is stored (a finding's steps, a spike, the first NaN) on the chart.

Colours are the Okabe–Ito palette, so train and val read apart under colour blindness; severity is shown by
colour and by an icon and a word, so it reads in grey too.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Iterable
from typing import Any

import numpy as np
import plotly.graph_objects as go
import polars as pl

from forensics.text.render import clean

TRAIN = "#0072B2"      # blue: every train series
VAL = "#E69F00"        # orange: every validation series
OTHERS = ("#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#F0E442")
SPIKE = "#D55E00"      # vermillion triangles
NONFINITE = "#7B0000"  # dark red crosses; the first one a star
SEVERITY = {  # colour, icon, word
    "critical": ("#C0392B", "⛔", "critical"),
    "warning": ("#E6A700", "⚠️", "warning"),
    "info": ("#5B7C99", "ℹ️", "info"),
}
FONT = "Inter, Source Sans Pro, Helvetica, Arial, sans-serif"


def severity_label(severity: str) -> str:
    """`⛔ critical`: the icon and the word, never the colour alone."""
    _, icon, word = SEVERITY.get(severity, ("#777777", "•", severity))
    return f"{icon} {word}"


def colour_of(name: str, split: str | None, role: str | None, index: int) -> str:
    """Validation series orange, training series (and the train loss, however it is named) blue, others by
    their place on the chart."""
    if split == "val" or (role or "").startswith("val_") or name.startswith(("val", "eval", "valid")):
        return VAL
    if split == "train" or role == "train_loss" or name.startswith("train"):
        return TRAIN
    return OTHERS[index % len(OTHERS)]


def wants_log(values: Iterable[float]) -> bool:
    """Log scale when the finite values are all positive and span three orders of magnitude or more."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite or min(finite) <= 0:
        return False
    return max(finite) / min(finite) >= 1e3


def nonfinite_text(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return "+Inf" if value > 0 else "-Inf"


def plain(text: Any) -> str:
    """Text from a file (a series, layer, tensor or run name) as plotly shows it: plotly reads `<br>`, `<a href>`
    and entities in names and titles, so `<`, `>` and `&` are written as entities, control characters as escapes."""
    return html.escape(clean(text), quote=False)


def _base_layout(fig: go.Figure, title: str, height: int) -> None:
    fig.update_layout(
        title={"text": plain(title), "font": {"size": 16}, "x": 0, "xanchor": "left"},
        height=height, margin={"l": 60, "r": 20, "t": 48, "b": 64}, font={"family": FONT, "size": 13},
        plot_bgcolor="white", paper_bgcolor="white", hovermode="closest", dragmode="select",
        # below the plot: above it, the legend would cover the finding labels' band
        legend={"orientation": "h", "yanchor": "top", "y": -0.22, "xanchor": "right", "x": 1},
    )
    fig.update_xaxes(title_text="step", showgrid=True, gridcolor="#EEEEEE", zeroline=False)
    fig.update_yaxes(showgrid=True, gridcolor="#EEEEEE", zeroline=False)


LABEL_ROW, LABEL_ROWS = 15, 3  # finding labels: pixels per row of the band above the plot, rows before they repeat


def add_findings(fig: go.Figure, findings: pl.DataFrame, lo: int, hi: int, focus: int | None = None) -> None:
    """Each finding as a shaded step range in its severity's colour, labelled with icon and kind.

    A one-step finding gets a minimum visible width; the focused finding is shaded more strongly. Shapes and labels
    are added in one layout update (plotly's add_vrect validates the whole layout on each call: 10 findings cost
    the page a fifth of a second)."""
    min_width = max(1.0, (hi - lo) * 0.006)
    shapes, labels = [], []
    for f in findings.iter_rows(named=True):
        if f["step"] is None:
            continue
        start = f["step"]
        end = f["step_end"] if f["step_end"] is not None else start
        if end < lo or start > hi:
            continue
        if end - start < min_width:
            mid = (start + end) / 2
            start, end = mid - min_width / 2, mid + min_width / 2
        colour, icon, _ = SEVERITY.get(f["severity"], ("#777777", "•", ""))
        focused = focus is not None and f["finding_id"] == focus
        shapes.append({"type": "rect", "xref": "x", "yref": "y domain", "x0": start, "x1": end, "y0": 0, "y1": 1,
                       "fillcolor": colour, "opacity": 0.28 if focused else 0.06 if focus is not None else 0.12,
                       "line": {"width": 1 if focused else 0, "color": colour}, "layer": "below",
                       "name": f"finding {f['finding_id']}: {f['kind']}"})
        # the label sits in a band above the plot, not inside it, where the NaN/Inf marks and the first
        # non-finite star are drawn along the top edge; neighbouring labels step up instead of overlapping
        labels.append({"text": f"{icon} {f['kind']}", "xref": "x", "x": start, "xanchor": "left", "yref": "y domain",
                       "y": 1.0, "yanchor": "bottom", "yshift": 2 + LABEL_ROW * (len(labels) % LABEL_ROWS),
                       "showarrow": False, "font": {"size": 11, "color": "#333333"}})
    if shapes:  # room for the label band between the title and the plot
        top = fig.layout.margin.t if fig.layout.margin.t is not None else 48
        fig.update_layout(shapes=[*fig.layout.shapes, *shapes], annotations=[*fig.layout.annotations, *labels],
                          margin={"t": top + LABEL_ROW * min(len(shapes), LABEL_ROWS)})


def add_checkpoints(fig: go.Figure, checkpoints: pl.DataFrame, lo: int, hi: int) -> None:
    """Checkpoints as ticks along the bottom edge: grey when finite, dark red when they hold NaN/Inf."""
    shown = checkpoints.filter(pl.col("step").is_not_null() & pl.col("step").is_between(lo, hi))
    ticks = []
    for c in shown.iter_rows(named=True):
        bad = c["finite"] is False
        ticks.append({"type": "line", "x0": c["step"], "x1": c["step"], "xref": "x", "yref": "paper", "y0": 0,
                      "y1": 0.07, "line": {"color": NONFINITE if bad else "#555555", "width": 3 if bad else 2},
                      "name": f"checkpoint {plain(c['path'])}"})
    if ticks:
        fig.update_layout(shapes=[*fig.layout.shapes, *ticks])
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name="checkpoint (tick)",
                                 marker={"symbol": "line-ns-open", "size": 12, "color": "#555555"}))


def series_figure(title: str, lines: list[dict[str, Any]], lo: int, hi: int, *, findings: pl.DataFrame | None = None,
                  checkpoints: pl.DataFrame | None = None, focus: int | None = None, height: int = 340) -> go.Figure:
    """One chart of one or more series over steps [lo, hi].

    Each entry of `lines`: name, colour, points (app_m4's frame: step, value, what), spikes (rows of the spikes
    table for this series: step, value, z), first (the series' first non-finite point: step, value, or None).
    Finite points draw the line (broken where a value is non-finite); spikes are triangles; non-finite points
    are crosses along the top of the plot, the series' first one a star with its step written beside it."""
    fig = go.Figure()
    _base_layout(fig, title, height)
    finite = pl.concat([line["points"].select("value") for line in lines]).filter(pl.col("value").is_finite())
    positive = finite.filter(pl.col("value") > 0)
    log = (finite.height > 0 and positive.height == finite.height
           and wants_log([positive["value"].min(), positive["value"].max()]))
    top = _top_of([finite["value"].min(), finite["value"].max()] if finite.height else [], log)
    for line in lines:
        pts: pl.DataFrame = line["points"]
        name, colour = plain(line["name"]), line["colour"]
        ordered = pts.unique(subset=["step", "value"], keep="first", maintain_order=True).sort("step")
        # numpy arrays travel to the browser as typed arrays; NaN breaks the line where a value is non-finite
        xs = ordered["step"].to_numpy()
        ys = ordered["value"].to_numpy().copy()
        ys[~np.isfinite(ys)] = np.nan
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="lines+markers" if ordered.height <= 60 else "lines",
            name=name, connectgaps=False, marker={"size": 5},
            line={"color": colour, "width": 1.6}, hovertemplate="step %{x}<br>%{y:.4g}<extra>" + name + "</extra>"))
        spikes = line.get("spikes")
        if spikes is not None and spikes.height:
            fig.add_trace(go.Scatter(
                x=spikes["step"].to_list(), y=spikes["value"].to_list(), mode="markers", name=f"{name} · spikes",
                marker={"symbol": "triangle-up", "size": 11, "color": SPIKE, "line": {"color": "white", "width": 1}},
                customdata=spikes["z"].to_list(),
                hovertemplate="spike at step %{x}<br>value %{y:.4g}<br>z %{customdata:.1f}<extra>" + name + "</extra>"))
        bad = ordered.filter(~pl.col("value").is_finite())
        if bad.height and top is not None:
            texts = [nonfinite_text(v) for v in bad["value"].to_list()]
            fig.add_trace(go.Scatter(
                x=bad["step"].to_list(), y=[top] * bad.height, mode="markers", name=f"{name} · non-finite",
                marker={"symbol": "x-thin-open", "size": 9, "color": NONFINITE, "line": {"width": 2}},
                text=texts, hovertemplate="%{text} at step %{x}<extra>" + name + "</extra>"))
        first = line.get("first")
        if first is not None and lo <= first["step"] <= hi and top is not None:
            label = f"first {nonfinite_text(first['value'])} at step {first['step']}"
            fig.add_trace(go.Scatter(
                x=[first["step"]], y=[top], mode="markers+text", name=f"{name} · first non-finite",
                marker={"symbol": "star", "size": 16, "color": NONFINITE, "line": {"color": "white", "width": 1}},
                text=[label], textfont={"color": NONFINITE, "size": 12},
                textposition="middle right" if first["step"] < lo + 0.4 * (hi - lo) else "middle left",
                hovertemplate=label + "<extra>" + name + "</extra>"))
    if findings is not None:
        add_findings(fig, findings, lo, hi, focus)
    if checkpoints is not None:
        add_checkpoints(fig, checkpoints, lo, hi)
    pad = max(1.0, (hi - lo) * 0.01)
    fig.update_xaxes(range=[lo - pad, hi + pad])
    if log:
        fig.update_yaxes(type="log", exponentformat="power")
    elif finite.height and finite["value"].min() == finite["value"].max():
        # A constant (an LR that never moved) would sit on plotly's default -1..1 axis, reading as 0.
        v = float(finite["value"][0])
        half = abs(v) * 0.5 or 1.0
        fig.update_yaxes(range=[v - half, v + half * 1.3], exponentformat="SI")
    return fig


def _top_of(finite: list[float], log: bool) -> float | None:
    """Where non-finite markers sit: a little above the highest finite value in view."""
    if not finite:
        return 1.0
    high, low = max(finite), min(finite)
    if log:
        return high * 3
    return high + 0.08 * ((high - low) or abs(high) or 1.0)


def natural(name: str) -> list:
    """Sort key that puts body.fc2 before body.fc10: layers in depth order."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def heatmap_figure(title: str, cells: pl.DataFrame, *, colour_title: str, height: int | None = None) -> go.Figure:
    """Layers (rows) by steps (columns), coloured by log10 of the value; NaN/Inf cells crossed in dark red.

    `cells`: layer, step, value."""
    layers = sorted(set(cells["layer"].to_list()), key=natural)
    steps = sorted(set(cells["step"].to_list()))
    index = {(r["layer"], r["step"]): r["value"] for r in cells.iter_rows(named=True)}
    z, bad_x, bad_y = [], [], []
    for layer in layers:
        row = []
        for step in steps:
            v = index.get((layer, step))
            if v is not None and not math.isfinite(v):
                bad_x.append(step)
                bad_y.append(plain(layer))
                row.append(None)
            elif v is None or v <= 0:
                row.append(None)
            else:
                row.append(math.log10(v))
        z.append(row)
    fig = go.Figure(go.Heatmap(
        x=steps, y=[plain(layer) for layer in layers], z=z, colorscale="Viridis", name=plain(title),
        colorbar={"title": {"text": colour_title}}, hoverongaps=False,
        hovertemplate="%{y}<br>step %{x}<br>log10 = %{z:.2f}<extra></extra>"))
    if bad_x:
        fig.add_trace(go.Scatter(x=bad_x, y=bad_y, mode="markers", name="NaN/Inf",
                                 marker={"symbol": "x", "size": 12, "color": NONFINITE},
                                 hovertemplate="%{y}<br>step %{x}: NaN/Inf<extra></extra>"))
    _base_layout(fig, title, height or max(260, 60 + 26 * len(layers)))
    fig.update_layout(dragmode="zoom", showlegend=bool(bad_x))
    fig.update_yaxes(showgrid=False, automargin=True, autorange="reversed")  # the first layer on top
    fig.update_xaxes(showgrid=False)
    return fig


def interval_heatmap_figure(title: str, cells: pl.DataFrame) -> go.Figure:
    """Layers (rows) by checkpoint intervals (columns): each cell spans the steps between its two checkpoints and
    is coloured by log10 of ‖Δw‖/‖w‖ divided by the steps between them (the per-step ratio if every update
    pointed the same way, the lower bound update_ratio_anomaly judges "too large" by). NaN/Inf cells crossed.

    `cells`: layer, prev_step, step, step_distance, value (‖Δw‖/‖w‖ over the interval)."""
    cells = cells.filter(pl.col("prev_step").is_not_null() & pl.col("step").is_not_null()
                         & (pl.col("step") > pl.col("prev_step")))
    layers = sorted(set(cells["layer"].to_list()), key=natural)
    edges = sorted(set(cells["prev_step"].to_list()) | set(cells["step"].to_list()))
    at = {e: i for i, e in enumerate(edges)}
    z = [[None] * max(len(edges) - 1, 1) for _ in layers]
    hover = [[""] * max(len(edges) - 1, 1) for _ in layers]
    row_of = {layer: i for i, layer in enumerate(layers)}
    bad_x, bad_y = [], []
    for c in cells.iter_rows(named=True):
        r, v, d = row_of[c["layer"]], c["value"], c["step_distance"] or (c["step"] - c["prev_step"])
        if v is not None and not math.isfinite(v):
            bad_x.append((c["prev_step"] + c["step"]) / 2)
            bad_y.append(plain(c["layer"]))
            continue
        for col in range(at[c["prev_step"]], at[c["step"]]):
            if v is not None and v > 0:
                z[r][col] = math.log10(v / d)
                hover[r][col] = (f"steps {c['prev_step']}–{c['step']}: {v / d:.3g} per step "
                                 f"(‖Δw‖/‖w‖ {v:.3g} over {d} steps)")
    fig = go.Figure(go.Heatmap(
        x=edges, y=[plain(layer) for layer in layers], z=z, colorscale="Viridis", name=plain(title),
        colorbar={"title": {"text": "log10 ‖Δw‖/‖w‖<br>per step"}}, hoverongaps=False, customdata=hover,
        hovertemplate="%{y}<br>%{customdata}<extra></extra>"))
    if bad_x:
        fig.add_trace(go.Scatter(x=bad_x, y=bad_y, mode="markers", name="NaN/Inf",
                                 marker={"symbol": "x", "size": 12, "color": NONFINITE},
                                 hovertemplate="%{y}: NaN/Inf<extra></extra>"))
    _base_layout(fig, title, max(260, 60 + 26 * len(layers)))
    fig.update_layout(dragmode="zoom", showlegend=bool(bad_x))
    fig.update_yaxes(showgrid=False, automargin=True, autorange="reversed")
    fig.update_xaxes(showgrid=False, title_text="step (each cell spans the steps between two checkpoints)",
                     tickvals=edges)
    return fig


def movers_figure(title: str, movers: pl.DataFrame) -> go.Figure:
    """Horizontal bars: the tensors that moved most between two checkpoints, as the store ranks them (NaN/Inf
    first, then the update's RMS ‖Δw‖/√n). Bars start at 0 on a linear axis, so their lengths compare as the
    values do (on a log axis a bar starts at the axis' edge and its length means nothing); each is labelled with
    its value. A tensor holding NaN/Inf is a labelled dark-red bar across the chart; a zero-initialised tensor is
    an ordinary bar (its ‖Δw‖/‖w‖ is undefined, not NaN)."""
    finite = [v for v in movers["rms"].to_list() if v is not None and math.isfinite(v) and v > 0]
    cap = max(finite) * 1.15 if finite else 1.0
    xs, colours, texts, hovers = [], [], [], []
    for rms, ratio, bad in zip(movers["rms"].to_list(), movers["ratio"].to_list(), movers["n_nonfinite"].to_list()):
        if bad or rms is None or not math.isfinite(rms):
            xs.append(cap)
            colours.append(NONFINITE)
            texts.append(f"NaN/Inf ({bad:,})" if bad else "NaN/Inf")
            hovers.append("holds NaN/Inf")
        else:
            xs.append(rms)
            colours.append(TRAIN)
            texts.append(f"{rms:.3g}")
            hovers.append(f"RMS Δw {rms:.3g}, ‖Δw‖/‖w‖ " + (f"{ratio:.3g}" if ratio is not None else "undefined (‖w‖ was 0)"))
    fig = go.Figure(go.Bar(x=xs, y=[plain(t) for t in movers["tensor"].to_list()], orientation="h", marker_color=colours, text=texts,
                           textposition="auto", name=title, customdata=hovers,
                           hovertemplate="%{y}<br>%{customdata}<extra></extra>"))
    _base_layout(fig, title, 60 + 30 * max(movers.height, 2))
    fig.update_layout(dragmode="zoom", showlegend=False, margin={"t": 36})
    fig.update_xaxes(type="linear", range=[0, cap], rangemode="tozero", title_text="RMS of the update ‖Δw‖/√n")
    fig.update_yaxes(autorange="reversed", automargin=True)
    return fig
