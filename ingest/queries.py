"""Every read of the store that a command or page needs: the CLI, the app, replay and watch query here.

Functions take an open connection (read-only unless a write transaction needs the answer) and return polars
frames or plain values; they write nothing. Sections by consumer: new features add their queries to their
own section here, never beside the feature.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import polars as pl


def _frame(con: Any, sql: str, params: list) -> pl.DataFrame:
    """A small query's result (series list, checkpoint tables) as a polars frame."""
    with warnings.catch_warnings():  # the extra copy DuckDB warns about is negligible for these small tables
        warnings.simplefilter("ignore", UserWarning)
        return pl.from_arrow(con.execute(sql, params).to_arrow_table())


# -- runs and sources (CLI: runs, ingest reports) ------------------------------------------------------------

def list_runs(con: Any) -> list[dict[str, Any]]:
    """What `forensics runs` shows: every run with its sources (format, points, status), series count and
    ingest issues, by name. Plain JSON values."""
    runs = con.execute("SELECT run_id, name, root, last_ingested FROM runs ORDER BY name, run_id").fetchall()
    sources = con.execute(
        "SELECT run_id, path, format, n_points, duplicate_points, status FROM sources ORDER BY run_id, path"
    ).fetchall()
    series = dict(con.execute("SELECT run_id, count(*) FROM series GROUP BY run_id").fetchall())
    issues = con.execute(
        "SELECT run_id, path, position, kind, detail FROM ingest_issues ORDER BY run_id, path, position"
    ).fetchall()
    out = []
    for run_id, name, root, last in runs:
        srcs = [s for s in sources if s[0] == run_id]
        out.append({
            "run": run_id, "name": name, "root": root, "last_ingested": str(last),
            "points": sum(s[3] or 0 for s in srcs), "series": series.get(run_id, 0),
            "sources": [{"path": s[1], "format": s[2], "points": s[3], "duplicate_points": s[4], "status": s[5]}
                        for s in srcs],
            "issues": [{"path": i[1], "position": i[2], "kind": i[3], "detail": i[4]} for i in issues if i[0] == run_id],
        })
    return out


def known_sources(con: Any, run_id: str) -> dict[str, tuple[int, int | None, float | None, str | None, int | None]]:
    """Ingest's resume state: path -> (source_id, size_bytes, mtime, head_hash, resume_at) of a run's sources."""
    return {r[0]: r[1:] for r in con.execute(
        "SELECT path, source_id, size_bytes, mtime, head_hash, resume_at FROM sources WHERE run_id = ?", [run_id]
    ).fetchall()}


def series_rows(con: Any, run_id: str) -> list[tuple[int, str, str, str]]:
    """(series_id, grp, tag, format) of every series of a run, for naming them."""
    return con.execute("SELECT series_id, grp, tag, format FROM series WHERE run_id = ? ORDER BY series_id",
                       [run_id]).fetchall()


# -- checkpoints (CLI: checkpoints) ----------------------------------------------------------------------------

def stored_checkpoints(con: Any, run_id: str) -> dict[str, tuple[int, int | None, str | None, float | None]]:
    """path -> (ckpt_id, size_bytes, status, mtime) of a run's stored checkpoints: what a re-ingest may skip."""
    return {path: (ckpt_id, size, status, mtime) for path, ckpt_id, size, status, mtime in con.execute(
        "SELECT c.path, c.ckpt_id, c.size_bytes, c.status, s.mtime FROM checkpoints c LEFT JOIN sources s "
        "ON s.run_id = c.run_id AND s.path = c.path WHERE c.run_id = ?", [run_id]).fetchall()}


def delta_state(con: Any, run_id: str) -> tuple[list[tuple[int, str, int]], set[tuple[int, int]]]:
    """Readable checkpoints with a step, as (ckpt_id, path, step) by step, and the (ckpt_id, prev_ckpt_id)
    pairs that have deltas stored."""
    ckpts = con.execute(
        "SELECT ckpt_id, path, step FROM checkpoints WHERE run_id = ? AND step IS NOT NULL "
        "AND status IN ('ok', 'partial') ORDER BY step, path", [run_id]).fetchall()
    done = set(con.execute("SELECT DISTINCT ckpt_id, prev_ckpt_id FROM tensor_deltas WHERE run_id = ?",
                           [run_id]).fetchall())
    return ckpts, done


def stored_batches(con: Any, run_id: str) -> dict[str, tuple[int, str | None, int | None, float | None]]:
    """path -> (batch_id, status, size_bytes, mtime) of a run's stored saved batches."""
    return {p: (i, st, size, mtime) for p, i, st, size, mtime in con.execute(
        "SELECT b.path, b.batch_id, b.status, s.size_bytes, s.mtime FROM batches b LEFT JOIN sources s "
        "ON s.run_id = b.run_id AND s.path = b.path WHERE b.run_id = ?", [run_id]).fetchall()}


def checkpoint_summary(con: Any, run_id: str, top: int = 5) -> dict[str, Any]:
    """What `forensics checkpoints` shows, from the store: every checkpoint (by step) with its non-finite
    tensors, for each consecutive pair the `top` parameters by ‖Δw‖/‖w‖ and the frozen ones (Δ = 0;
    buffers left out), and the saved batches with each tensor's NaN/Inf samples and per-sample norms (which
    samples are outliers is the bad_batch detector's call, made by the caller). Plain JSON values."""
    cols = ["ckpt_id", "path", "step", "step_from", "format", "size_bytes", "n_tensors", "n_nonfinite", "finite",
            "has_optimizer", "has_scaler", "has_rng", "status", "detail"]
    ckpts = [dict(zip(cols, r, strict=True)) for r in con.execute(
        f"SELECT {', '.join(cols)} FROM checkpoints WHERE run_id = ? ORDER BY step NULLS LAST, path", [run_id]
    ).fetchall()]
    bad = con.execute(
        "SELECT ckpt_id, tensor, kind, n_nan, n_inf FROM tensor_stats WHERE run_id = ? AND n_nan + n_inf > 0 "
        "ORDER BY ckpt_id, n_nan + n_inf DESC, tensor", [run_id]
    ).fetchall()
    for c in ckpts:
        # `kind` (param, buffer, optimizer, ...): n_nonfinite counts model tensors' values only.
        c["nonfinite_tensors"] = [{"tensor": t, "kind": kd, "n_nan": n, "n_inf": i}
                                  for k, t, kd, n, i in bad if k == c["ckpt_id"]]
    by_id = {c["ckpt_id"]: c for c in ckpts}
    # Parameters only: running statistics (buffers) move with the data, not with the optimizer.
    deltas = con.execute(
        "SELECT d.ckpt_id, d.prev_ckpt_id, d.tensor, d.delta_l2, d.ratio, d.step_distance FROM tensor_deltas d "
        "WHERE d.run_id = ? AND EXISTS (SELECT 1 FROM tensor_stats t WHERE t.run_id = d.run_id AND "
        "t.ckpt_id = d.ckpt_id AND t.tensor = d.tensor AND t.kind = 'param') "
        "ORDER BY d.step, isnan(d.ratio), d.ratio DESC, d.tensor", [run_id]
    ).fetchall()
    movers: dict[tuple[int, int], dict[str, Any]] = {}
    for cur, prev, tensor, delta, ratio, distance in deltas:
        pair = movers.get((prev, cur))
        if pair is None:
            pair = movers[(prev, cur)] = {
                "prev_step": by_id[prev]["step"], "step": by_id[cur]["step"], "step_distance": distance,
                "prev_path": by_id[prev]["path"], "path": by_id[cur]["path"], "top": [], "frozen": [],
            }
        if delta == 0:
            pair["frozen"].append(tensor)
        elif len(pair["top"]) < top:
            pair["top"].append({"tensor": tensor, "delta_l2": delta, "ratio": ratio})
    bcols = ["path", "step", "format", "n_samples", "n_nonfinite", "status", "detail"]
    batches = [dict(zip(bcols, r[1:], strict=True)) | {"batch_id": r[0]} for r in con.execute(
        f"SELECT batch_id, {', '.join(bcols)} FROM batches WHERE run_id = ? ORDER BY step NULLS LAST, path", [run_id]
    ).fetchall()]
    per_tensor = con.execute(
        "SELECT batch_id, tensor, nonfinite_samples, sample_norms FROM batch_stats WHERE run_id = ? "
        "ORDER BY batch_id, tensor", [run_id]
    ).fetchall()
    for b in batches:
        b["tensors"] = [{"tensor": t, "nonfinite_samples": nf, "sample_norms": norms}
                        for i, t, nf, norms in per_tensor if i == b["batch_id"]]
    for item in (*ckpts, *batches):
        item.pop("ckpt_id", None)
        item.pop("batch_id", None)
    return {"checkpoints": ckpts, "deltas": list(movers.values()), "batches": batches}


# -- analysis (engine input, analyze report) -------------------------------------------------------------------

SERIES_META_COLUMNS = ("series_id", "grp", "tag", "name", "role", "split", "layer", "canonical", "ordinal", "n_points",
                       "n_nonfinite", "format")
# A run's checkpoint and batch tables, handed to detectors whole (they are small: one row per tensor).
RUN_TABLES = ("checkpoints", "tensor_stats", "tensor_deltas", "checkpoint_values", "batches", "batch_stats")


def run_row(con: Any, run_id: str) -> tuple[str, str] | None:
    """(name, root) of a run, or None when the store has no such run."""
    return con.execute("SELECT name, root FROM runs WHERE run_id = ?", [run_id]).fetchone()


def series_meta(con: Any, run_id: str) -> pl.DataFrame:
    """One row per series of a run (SERIES_META_COLUMNS), by series id."""
    return _frame(con, f"SELECT {', '.join(SERIES_META_COLUMNS)} FROM series WHERE run_id = ? ORDER BY series_id",
                  [run_id])


def run_configs(con: Any, run_id: str) -> dict[str, Any]:
    """Every config value of a run, dotted key -> value; where sources disagree, the first source's wins."""
    configs: dict[str, Any] = {}
    for key, value in con.execute("SELECT key, value FROM configs WHERE run_id = ? ORDER BY source_id",
                                  [run_id]).fetchall():
        try:
            configs.setdefault(key, json.loads(value) if value is not None else None)
        except json.JSONDecodeError:
            configs.setdefault(key, value)
    return configs


def run_tables(con: Any, run_id: str) -> dict[str, pl.DataFrame]:
    """The run's rows of each of RUN_TABLES."""
    return {t: _frame(con, f"SELECT * FROM {t} WHERE run_id = ?", [run_id]) for t in RUN_TABLES}


def series_points(con: Any, series_id: int) -> pl.DataFrame:
    """(step, value, wall_time) of one series in write order (source, position), so that a resumed run's
    newer segment comes last. Relation API, not execute(): a zero-copy Arrow hand-off for series of millions
    of points. `series_id` is an int from our own table, safe to inline."""
    return pl.from_arrow(con.sql(f"""SELECT step, value, wall_time FROM scalars WHERE series_id = {int(series_id)}
                                     ORDER BY source_id, position""").to_arrow_table())

# Issue kinds that are not problems of a file we read: files no reader knows are listed apart.
NOT_A_READ_PROBLEM = ("unknown_file",)


def read_problems(con, run_id: str) -> list[dict]:
    """Every problem met while reading the run's files, by path then position: path, position (byte offset or
    line, None for a whole file), kind, detail, `kept`: what the store holds from that file ("1,204 points",
    "12 tensors", "nothing"), and `format` (the reader's, or checkpoint/batch)."""
    rows = con.execute(
        """SELECT i.path, i.position, i.kind, i.detail, coalesce(s.format, CASE WHEN c.path IS NOT NULL THEN 'checkpoint'
                  WHEN b.path IS NOT NULL THEN 'batch' END), s.n_points, s.status,
                  c.n_tensors, c.status, b.n_samples, b.status
           FROM ingest_issues i
           LEFT JOIN sources s ON s.run_id = i.run_id AND s.path = i.path
           LEFT JOIN checkpoints c ON c.run_id = i.run_id AND (c.path = i.path OR starts_with(i.path, c.path || '/'))
           LEFT JOIN batches b ON b.run_id = i.run_id AND b.path = i.path
           WHERE i.run_id = ? AND NOT list_contains(?, i.kind)
           ORDER BY i.path, i.position NULLS FIRST, i.kind""", [run_id, list(NOT_A_READ_PROBLEM)]).fetchall()
    out = []
    for path, position, kind, detail, fmt, points, status, tensors, ck_status, samples, b_status in rows:
        if ck_status is not None:
            kept = _count(tensors, "tensor") if tensors and ck_status not in ("unreadable", "needs_pickle") else "nothing"
        elif b_status is not None:
            kept = _count(samples, "sample") if samples and b_status not in ("unreadable", "needs_pickle") else "nothing"
        elif status is not None:
            kept = _count(points, "point") if points else "nothing"
        else:
            kept = None
        out.append({"path": path, "position": position, "kind": kind, "detail": detail, "kept": kept, "format": fmt})
    return out


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def unknown_files(con, run_id: str) -> list[str]:
    """Files of the run that no reader knows, by path."""
    return [r[0] for r in con.execute(
        "SELECT DISTINCT path FROM ingest_issues WHERE run_id = ? AND list_contains(?, kind) ORDER BY path",
        [run_id, list(NOT_A_READ_PROBLEM)]).fetchall()]

# -- app ---------------------------------------------------------------------------------------------------

# -- replay ------------------------------------------------------------------------------------------------

# -- watch -------------------------------------------------------------------------------------------------
