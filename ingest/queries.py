"""Every read of the store that a command or page needs: the CLI, the app, replay and watch query here.

Functions take an open (read-only) connection and return polars frames or plain values; they write nothing.
Sections by consumer: new features add their queries to their own section here, never beside the feature.
"""

from __future__ import annotations

import warnings
from typing import Any

import polars as pl

# -- runs and sources (CLI: runs, ingest reports) ------------------------------------------------------------

# -- checkpoints (CLI: checkpoints) ----------------------------------------------------------------------------

# -- analysis (engine input, analyze report) -------------------------------------------------------------------

# -- app ---------------------------------------------------------------------------------------------------
# What the Streamlit app shows. The app computes no finding: these read what ingest and analyze stored.
# Decimation is M4 (first, min, max, last per pixel column; Jugel et al., VLDB 2014) in SQL over the visible step
# range, plus every spike row and the first point of each non-finite kind per column, so no evidence is dropped.


def _app_frame(con: Any, sql: str, params: list | None = None) -> pl.DataFrame:
    with warnings.catch_warnings():  # DuckDB warns about one extra copy of these small results
        warnings.simplefilter("ignore", UserWarning)
        return pl.from_arrow(con.execute(sql, params or []).to_arrow_table())


def app_has_table(con: Any, table: str) -> bool:
    """Whether `table` exists: a database written before a feature landed lacks its table."""
    row = con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [table]).fetchone()
    return bool(row and row[0])


def app_runs(con: Any) -> pl.DataFrame:
    """Every run with its latest analysis: verdict counts, the headline finding, sources, length, last ingest.

    `verdict` is `not analyzed` for a run that was only ingested. The headline is the earliest finding of the
    worst severity (the report's own rule: causes come before symptoms)."""
    return _app_frame(con, """
        WITH latest AS (
            SELECT run_id, max(analysis_id) AS analysis_id FROM analyses GROUP BY run_id),
        counts AS (
            SELECT f.run_id,
                   count(*) FILTER (WHERE severity = 'critical') AS n_critical,
                   count(*) FILTER (WHERE severity = 'warning') AS n_warning,
                   count(*) FILTER (WHERE severity = 'info') AS n_info
            FROM findings f JOIN latest USING (run_id, analysis_id) GROUP BY f.run_id),
        headline AS (
            SELECT f.run_id, arg_min(f.kind || ': ' || f.summary,
                                     (CASE severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END,
                                      coalesce(f.step, 9223372036854775807), f.finding_id)) AS headline,
                   arg_min(f.severity,
                           (CASE severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END,
                            coalesce(f.step, 9223372036854775807), f.finding_id)) AS worst
            FROM findings f JOIN latest USING (run_id, analysis_id) GROUP BY f.run_id),
        srcs AS (
            SELECT run_id, string_agg(DISTINCT format, ', ' ORDER BY format) AS formats,
                   sum(n_points)::BIGINT AS n_points FROM sources GROUP BY run_id),
        length AS (
            SELECT run_id, max(last_step) AS last_step, count(*) AS n_series FROM series GROUP BY run_id)
        SELECT r.run_id, r.name, r.root, r.last_ingested, latest.analysis_id, a.created AS analyzed,
               CASE WHEN a.analysis_id IS NULL THEN 'not analyzed'
                    WHEN coalesce(c.n_critical, 0) > 0 THEN 'failed'
                    WHEN coalesce(c.n_warning, 0) > 0 THEN 'suspicious'
                    WHEN coalesce(c.n_info, 0) > 0 THEN 'notes'
                    ELSE 'no findings' END AS verdict,
               coalesce(c.n_critical, 0) AS n_critical, coalesce(c.n_warning, 0) AS n_warning,
               coalesce(c.n_info, 0) AS n_info, h.worst, h.headline, s.formats,
               coalesce(s.n_points, 0) AS n_points, l.last_step, coalesce(l.n_series, 0) AS n_series
        FROM runs r
        LEFT JOIN latest USING (run_id)
        LEFT JOIN analyses a ON a.analysis_id = latest.analysis_id
        LEFT JOIN counts c ON c.run_id = r.run_id
        LEFT JOIN headline h ON h.run_id = r.run_id
        LEFT JOIN srcs s ON s.run_id = r.run_id
        LEFT JOIN length l ON l.run_id = r.run_id
        ORDER BY r.name, r.run_id""")


def app_findings(con: Any, analysis_id: int) -> pl.DataFrame:
    """One analysis's findings in the stored order (by step, then severity), evidence etc. as JSON text."""
    return _app_frame(con, """
        SELECT finding_id, kind, severity, step, step_end, series, summary, evidence, causes, checks, sources,
               event_id FROM findings WHERE analysis_id = ? ORDER BY finding_id""", [analysis_id])


def app_skipped(con: Any, analysis_id: int) -> pl.DataFrame:
    """Detectors that could not run in one analysis, and why."""
    return _app_frame(con, "SELECT kind, reason FROM skipped WHERE analysis_id = ? ORDER BY kind", [analysis_id])


def app_spikes(con: Any, analysis_id: int) -> pl.DataFrame:
    """Spike rows of one analysis: series name, step, value, baseline, z, event."""
    return _app_frame(con, """
        SELECT series, step, value, baseline, z, event_id FROM spikes WHERE analysis_id = ?
        ORDER BY series, step""", [analysis_id])


def app_series(con: Any, run_id: str) -> pl.DataFrame:
    """Every series of a run: id, name, role, split, layer, canonical, point counts, step range."""
    return _app_frame(con, """
        SELECT series_id, name, grp, tag, role, split, layer, canonical, ordinal, n_points, n_nonfinite,
               first_step, last_step FROM series WHERE run_id = ? ORDER BY name""", [run_id])


def app_first_nonfinite(con: Any, run_id: str) -> pl.DataFrame:
    """The first non-finite point of every series that has one: series_id, name, step, value (NaN or ±Inf).

    Only series whose `n_nonfinite` is positive are scanned."""
    return _app_frame(con, """
        SELECT r.series_id, r.name, arg_min(s.step, (s.step, s.position)) AS step,
               arg_min(s.value, (s.step, s.position)) AS value
        FROM scalars s JOIN series r USING (series_id)
        WHERE r.run_id = ? AND r.n_nonfinite > 0 AND NOT isfinite(s.value)
        GROUP BY r.series_id, r.name ORDER BY step, r.name""", [run_id])


def app_m4(con: Any, series_id: int, lo: int, hi: int, pixels: int, analysis_id: int | None = None,
           series_name: str | None = None) -> pl.DataFrame:
    """The points of one series to draw over steps [lo, hi] at about `pixels` columns, without losing evidence.

    A column is `ceil((hi - lo + 1) / pixels)` consecutive steps. Per column: the first, minimum, maximum and
    last finite point (M4), and the first point of each non-finite kind (NaN, +Inf, -Inf); plus every spike
    row of `analysis_id` for `series_name` in the range. Returns step, value, what (`m4`, `nonfinite`,
    `spike`), sorted by step: at most about 7 rows per column plus the spikes, whatever the series' length.
    NULL values are not drawn."""
    if hi < lo:
        lo, hi = hi, lo
    lo, hi, series_id = int(lo), int(hi), int(series_id)
    per_column = max(1, -(-(hi - lo + 1) // max(1, int(pixels))))
    # The integers are written into the SQL, not bound: with constants DuckDB knows the column number's range
    # and groups with a perfect hash, 2-3x faster than binding them (measured: benchmarks/bench_app_decimation.py).
    return _app_frame(con, f"""
        WITH pts AS (
            SELECT step, value, (step - {lo}) // {per_column} AS col
            FROM scalars WHERE series_id = {series_id} AND step BETWEEN {lo} AND {hi} AND value IS NOT NULL),
        fin AS (
            SELECT col, min(step) AS s_first, arg_min(value, step) AS v_first,
                   max(step) AS s_last, arg_max(value, step) AS v_last,
                   arg_min(step, value) AS s_min, min(value) AS v_min,
                   arg_max(step, value) AS s_max, max(value) AS v_max
            FROM pts WHERE isfinite(value) GROUP BY col),
        m4 AS (
            SELECT s_first AS step, v_first AS value FROM fin
            UNION SELECT s_min, v_min FROM fin
            UNION SELECT s_max, v_max FROM fin
            UNION SELECT s_last, v_last FROM fin),
        nonfinite AS (
            SELECT min(step) AS step, any_value(value) AS value FROM pts WHERE NOT isfinite(value)
            GROUP BY col, CASE WHEN isnan(value) THEN 0 WHEN value > 0 THEN 1 ELSE 2 END),
        spiked AS (
            SELECT step, value FROM spikes
            WHERE analysis_id = $aid AND series = $name AND step BETWEEN {lo} AND {hi})
        SELECT step, value, 'm4' AS what FROM m4
        UNION ALL SELECT step, value, 'nonfinite' FROM nonfinite
        UNION ALL SELECT step, value, 'spike' FROM spiked
        ORDER BY step, what""", {"aid": analysis_id, "name": series_name})


def app_checkpoints(con: Any, run_id: str) -> pl.DataFrame:
    """A run's checkpoints by step: path, format, size, finite or not, what they hold, read status."""
    return _app_frame(con, """
        SELECT ckpt_id, path, step, step_from, format, size_bytes, n_tensors, n_nonfinite, finite,
               has_optimizer, has_scaler, status, detail FROM checkpoints WHERE run_id = ?
        ORDER BY step NULLS LAST, path""", [run_id])


def app_movers(con: Any, run_id: str, top: int = 5) -> pl.DataFrame:
    """For each consecutive checkpoint pair, the `top` tensors with the largest ‖Δw‖/‖w‖ (NaN ratios first)."""
    return _app_frame(con, """
        SELECT step, prev_step, step_distance, tensor, delta_l2, ratio FROM (
            SELECT *, row_number() OVER (PARTITION BY ckpt_id
                                         ORDER BY isnan(ratio) DESC, ratio DESC NULLS LAST) AS k
            FROM tensor_deltas WHERE run_id = ?)
        WHERE k <= ? ORDER BY step, k""", [run_id, top])


def app_layer_norms(con: Any, run_id: str, columns: int = 200) -> pl.DataFrame:
    """Per-layer norms over steps for a heatmap: layer, quantity, step (a column's first step), value.

    From the logs (roles layer_grad_norm, layer_weight_norm) when present, at most `columns` step columns
    per layer, each holding the column's largest |value| (an exploding layer stays visible) or NaN when
    the column holds a non-finite value; else from checkpoint statistics (each parameter's L2 per
    checkpoint)."""
    logged = _app_frame(con, """
        WITH s AS (
            SELECT r.layer, CASE r.role WHEN 'layer_grad_norm' THEN 'gradient norm' ELSE 'weight norm' END
                   AS quantity, p.step, p.value, r.first_step, r.last_step
            FROM scalars p JOIN series r USING (series_id)
            WHERE r.run_id = ? AND r.role IN ('layer_grad_norm', 'layer_weight_norm') AND p.value IS NOT NULL),
        b AS (
            SELECT layer, quantity, step, value,
                   CAST(floor((step - min(step) OVER ()) * ?::DOUBLE
                        / (max(step) OVER () - min(step) OVER () + 1)) AS BIGINT) AS col FROM s)
        SELECT layer, quantity, min(step) AS step,
               CASE WHEN bool_and(isfinite(value)) THEN max(abs(value)) ELSE 'NaN'::DOUBLE END AS value,
               'logs' AS origin
        FROM b GROUP BY layer, quantity, col ORDER BY quantity, layer, step""", [run_id, columns])
    if logged.height:
        return logged
    return _app_frame(con, """
        SELECT coalesce(param, tensor) AS layer, 'weight norm' AS quantity, step, l2 AS value,
               'checkpoints' AS origin
        FROM tensor_stats WHERE run_id = ? AND kind = 'param' AND step IS NOT NULL
        ORDER BY layer, step""", [run_id])


def app_update_ratios(con: Any, run_id: str) -> pl.DataFrame:
    """‖Δw‖/‖w‖ of every tensor between consecutive checkpoints: layer, step, value (a heatmap's cells)."""
    return _app_frame(con, """
        SELECT tensor AS layer, step, ratio AS value FROM tensor_deltas WHERE run_id = ?
        ORDER BY tensor, step""", [run_id])


def app_replays(con: Any, run_id: str) -> pl.DataFrame | None:
    """The run's stored replays, newest last; None when the database has no `replays` table yet."""
    if not app_has_table(con, "replays"):
        return None
    cols = [r[0] for r in con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'replays'").fetchall()]
    if "run_id" not in cols:
        return None
    return _app_frame(con, "SELECT * FROM replays WHERE run_id = ?", [run_id])


def app_configs(con: Any, run_ids: list[str]) -> pl.DataFrame:
    """Config values of several runs: run_id, document, key, value (JSON text)."""
    return _app_frame(con, """
        SELECT run_id, name AS document, key, value FROM configs WHERE run_id IN (SELECT unnest(?))
        ORDER BY key, run_id""", [run_ids])


def app_batches(con: Any, run_id: str) -> pl.DataFrame:
    """Saved batches with the samples that hold NaN/Inf or outliers."""
    return _app_frame(con, """
        SELECT b.step, b.path, b.n_samples, b.status, s.tensor, s.nonfinite_samples, s.outlier_samples
        FROM batches b LEFT JOIN batch_stats s USING (batch_id) WHERE b.run_id = ?
        ORDER BY b.step, s.tensor""", [run_id])


# -- replay ------------------------------------------------------------------------------------------------

# -- watch -------------------------------------------------------------------------------------------------
