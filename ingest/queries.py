"""Every read of the store that a command or page needs: the CLI, the app, replay and watch query here.

Functions take an open connection (read-only unless a write transaction needs the answer) and return polars
frames or plain values; they write nothing. Sections by consumer: new features add their queries to their
own section here, never beside the feature.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import numpy as np
import polars as pl


def _frame(con: Any, sql: str, params: list) -> pl.DataFrame:
    """A query's result (series list, checkpoint tables) as a polars frame. polars reads the relation's Arrow C
    stream itself: no copy, and no pyarrow import (`to_arrow_table()` is a pyarrow table)."""
    con.complete()  # a relation may not start while an earlier execute()'s rows are unread (fetchone leaves them)
    return pl.DataFrame(con.sql(sql, params=params))


# -- runs and sources (CLI: runs, ingest reports) ------------------------------------------------------------

def list_runs(con: Any) -> list[dict[str, Any]]:
    """What `forensics runs` shows: every run with its latest analysis (`latest_verdicts`, None if never analysed),
    how `forensics watch` found it (None if it did not), whether its last ingest finished, its sources (format,
    points, status), series count and ingest issues, by name. Plain JSON values."""
    runs = con.execute("SELECT run_id, name, root, last_ingested, ingest_complete FROM runs ORDER BY name, run_id"
                       ).fetchall()
    sources = con.execute(
        "SELECT run_id, path, format, n_points, duplicate_points, status FROM sources ORDER BY run_id, path"
    ).fetchall()
    series = dict(con.execute("SELECT run_id, count(*) FROM series GROUP BY run_id").fetchall())
    issues = con.execute(
        "SELECT run_id, path, position, kind, detail FROM ingest_issues ORDER BY run_id, path, position"
    ).fetchall()
    analyses = latest_verdicts(con)
    found = {w["run_id"]: {"kind": w["kind"], "reason": w["reason"], "state": w["state"],
                           "watch_root": w["watch_root"]} for w in watched_runs(con)}
    out = []
    for run_id, name, root, last, complete in runs:
        srcs = [s for s in sources if s[0] == run_id]
        out.append({
            "analysis": analyses.get(run_id), "found_by_watch": found.get(run_id),
            "run": run_id, "name": name, "root": root, "last_ingested": str(last),
            "ingest_complete": complete is not False,
            "points": sum(s[3] or 0 for s in srcs), "series": series.get(run_id, 0),
            "sources": [{"path": s[1], "format": s[2], "points": s[3], "duplicate_points": s[4], "status": s[5]}
                        for s in srcs],
            "issues": [{"path": i[1], "position": i[2], "kind": i[3], "detail": i[4]} for i in issues if i[0] == run_id],
        })
    return out


def ingest_complete(con: Any, run_id: str) -> bool | None:
    """Whether the run's last ingest finished: False after one stopped half-way, None for a run not stored (or
    stored before schema 8)."""
    row = con.execute("SELECT ingest_complete FROM runs WHERE run_id = ?", [run_id]).fetchone()
    return None if row is None else row[0]


# The verdict column of a run's latest analysis (`a`), with the two states that are not the engine's verdict.
_VERDICT_SQL = ("CASE WHEN a.analysis_id IS NULL THEN 'not analyzed' WHEN a.verdict IS NULL THEN 'older analysis' "
                "ELSE a.verdict END")


def latest_verdicts(con: Any, run_ids: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """run_id -> its latest analysis's stored judgement: analysis_id, created, verdict (or `older analysis`),
    verdict_reason, headline (kind, severity, step, step_end, event, summary; None without findings), only/skip,
    read_problems. Runs never analysed are absent. What `forensics runs`, watch and `analyze --all` print."""
    rows = con.execute(f"""
        WITH latest AS (SELECT run_id, max(analysis_id) AS analysis_id FROM analyses GROUP BY run_id)
        SELECT a.run_id, a.analysis_id, a.created, {_VERDICT_SQL}, a.verdict_reason, a.only_kinds, a.skip_kinds,
               a.read_problems, h.finding_id, h.kind, h.severity, h.step, h.step_end, h.event_id, h.summary
        FROM latest JOIN analyses a USING (analysis_id)
        LEFT JOIN findings h ON h.analysis_id = a.analysis_id AND h.finding_id = a.headline_id
        WHERE ? IS NULL OR list_contains(?, a.run_id)""", [run_ids, run_ids]).fetchall()
    out = {}
    for (run_id, aid, created, verdict, reason, only, skip, problems, fid, kind, severity, step, step_end, event,
         summary) in rows:
        out[run_id] = {
            "analysis_id": aid, "analyzed": str(created), "verdict": verdict, "verdict_reason": reason,
            "headline": None if fid is None else {"finding": fid, "kind": kind, "severity": severity, "step": step,
                                                  "step_end": step_end, "event": event, "summary": summary},
            "only": json.loads(only) if only else [], "skip": json.loads(skip) if skip else [],
            "read_problems": json.loads(problems) if problems else []}
    return out


def known_sources(con: Any, run_id: str) -> dict[str, tuple]:
    """Ingest's resume state: path -> (source_id, size_bytes, mtime, head_hash, resume_at, format,
    reader_version) of a run's sources."""
    return {r[0]: r[1:] for r in con.execute(
        "SELECT path, source_id, size_bytes, mtime, head_hash, resume_at, format, reader_version FROM sources "
        "WHERE run_id = ?", [run_id]).fetchall()}


def source_points(con: Any, source_id: int) -> int:
    """How many points one source holds in the store."""
    return con.execute("SELECT count(*) FROM scalars WHERE source_id = ?", [source_id]).fetchone()[0]


def issues_of_kind(con: Any, run_ids: list[str], kind: str) -> list[tuple[str, str, str]]:
    """(run_id, path, detail) of the runs' stored ingest issues of one kind."""
    return con.execute("SELECT run_id, path, detail FROM ingest_issues WHERE kind = ? AND list_contains(?, run_id) "
                       "ORDER BY run_id, path", [kind, run_ids]).fetchall()


def series_rows(con: Any, run_id: str) -> list[tuple[int, str, str, str]]:
    """(series_id, grp, tag, format) of every series of a run, for naming them."""
    return con.execute("SELECT series_id, grp, tag, format FROM series WHERE run_id = ? ORDER BY series_id",
                       [run_id]).fetchall()


def record_coverage(con: Any, run_id: str, series_ids: list[int], peers: list[int]) -> list[tuple[int, str, int, int, bool]]:
    """(series_id, group, its records, the records of its group that print one of `peers`, whether its finite values
    are all whole numbers) for each of `series_ids` with points: is a value printed on every record of its kind?"""
    return con.execute(
        """WITH pts AS (SELECT s.series_id, s.grp, c.source_id, c.position, c.value
                        FROM series s JOIN scalars c USING (series_id)
                        WHERE s.run_id = ? AND list_contains(?, s.series_id)),
                groups AS (SELECT grp, count(DISTINCT (source_id, position)) AS records FROM pts GROUP BY grp)
           SELECT p.series_id, p.grp, count(DISTINCT (p.source_id, p.position)), any_value(g.records),
                  coalesce(bool_and(NOT isfinite(p.value) OR p.value = round(p.value)), true)
           FROM pts p JOIN groups g USING (grp) WHERE list_contains(?, p.series_id)
           GROUP BY p.series_id, p.grp ORDER BY p.series_id""", [run_id, peers, series_ids]).fetchall()


def value_ranges(con: Any, run_id: str, series_ids: list[int]) -> dict[int, tuple[int, float, float, bool]]:
    """{series_id: (points, lowest and highest finite value (None without one), whether it has finite values and they
    are all whole numbers)} of each of `series_ids` with points."""
    return {row[0]: tuple(row[1:]) for row in con.execute(
        """SELECT s.series_id, count(*), min(c.value) FILTER (WHERE isfinite(c.value)),
                  max(c.value) FILTER (WHERE isfinite(c.value)),
                  coalesce(bool_and(c.value = round(c.value)) FILTER (WHERE isfinite(c.value)), false)
           FROM series s JOIN scalars c USING (series_id)
           WHERE s.run_id = ? AND list_contains(?, s.series_id)
           GROUP BY s.series_id""", [run_id, series_ids]).fetchall()}


def counting(con: Any, run_id: str, series_ids: list[int]) -> set[int]:
    """Those of `series_ids` whose values, two or more, are whole numbers that never fall in the order written: a
    counter's (`Train 8000`), not a quantity measured."""
    return {sid for (sid,) in con.execute(
        """SELECT series_id FROM (
               SELECT c.series_id, c.value,
                      lag(c.value) OVER (PARTITION BY c.series_id ORDER BY c.source_id, c.position) AS before
               FROM series s JOIN scalars c USING (series_id)
               WHERE s.run_id = ? AND list_contains(?, s.series_id))
           GROUP BY series_id
           HAVING count(*) >= 2 AND bool_and(isfinite(value) AND value = round(value))
                  AND bool_and(before IS NULL OR value >= before)""", [run_id, series_ids]).fetchall()}


def source_path_of_group(con: Any, run_id: str, grp: str) -> str | None:
    """The path of a source of the series group `grp` (the file, for a console log's group)."""
    rows = con.execute("SELECT path FROM sources WHERE run_id = ? AND grp = ? ORDER BY path LIMIT 1", [run_id, grp]).fetchall()
    return rows[0][0] if rows else None


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


# The biggest movers between consecutive checkpoints, one ranking for the CLI and the app: model parameters only
# (running statistics move with the data, not the optimizer); first the tensors holding NaN/Inf in the newer
# checkpoint (their Δ is NaN), then by the RMS of the update, ‖Δw‖/√n, a measure defined at zero: ‖Δw‖/‖w‖ is
# infinite for every zero-initialised bias, which then filled the list and pushed out the one NaN tensor.
MOVERS_SQL = """
    SELECT d.ckpt_id, d.prev_ckpt_id, d.step, d.prev_step, d.step_distance, d.tensor, d.delta_l2,
           CASE WHEN isfinite(d.ratio) THEN d.ratio END AS ratio,
           d.delta_l2 / sqrt(greatest(t.numel, 1)) AS rms, t.n_nan + t.n_inf AS n_nonfinite,
           row_number() OVER (PARTITION BY d.ckpt_id, d.prev_ckpt_id
                              ORDER BY t.n_nan + t.n_inf DESC, isnan(d.delta_l2) DESC,
                                       d.delta_l2 / sqrt(greatest(t.numel, 1)) DESC NULLS LAST, d.tensor) AS k
    FROM tensor_deltas d JOIN tensor_stats t
      ON t.run_id = d.run_id AND t.ckpt_id = d.ckpt_id AND t.tensor = d.tensor AND t.kind = 'param'
    WHERE d.run_id = ?"""


def checkpoint_summary(con: Any, run_id: str, top: int = 5) -> dict[str, Any]:
    """What `forensics checkpoints` shows, from the store: every checkpoint (by step) with its non-finite
    tensors, for each consecutive pair the `top` parameters by ‖Δw‖/‖w‖ and the frozen ones (Δ = 0;
    buffers left out), and the saved batches with each tensor's NaN/Inf samples and per-sample norms (which
    samples are outliers is the bad_batch detector's call, made by the caller). Plain JSON values."""
    cols = ["ckpt_id", "path", "step", "step_from", "format", "size_bytes", "n_tensors", "n_nonfinite", "finite",
            "has_optimizer", "has_scaler", "has_rng", "status", "detail"]
    # A checkpoint whose file is gone since it was read shows as `deleted` (its stored statistics stay).
    deleted = ("CASE WHEN EXISTS (SELECT 1 FROM ingest_issues i WHERE i.run_id = c.run_id AND i.path = c.path "
               "AND i.kind = 'deleted') THEN 'deleted' ELSE c.status END AS status")
    ckpts = [dict(zip(cols, r, strict=True)) for r in con.execute(
        f"SELECT {', '.join(deleted if c == 'status' else f'c.{c}' for c in cols)} FROM checkpoints c "
        "WHERE c.run_id = ? ORDER BY c.step NULLS LAST, c.path", [run_id]).fetchall()]
    bad = con.execute(
        "SELECT ckpt_id, tensor, kind, n_nan, n_inf FROM tensor_stats WHERE run_id = ? AND n_nan + n_inf > 0 "
        "ORDER BY ckpt_id, n_nan + n_inf DESC, tensor", [run_id]
    ).fetchall()
    for c in ckpts:
        # `kind` (param, buffer, optimizer, ...): n_nonfinite counts model tensors' values only.
        c["nonfinite_tensors"] = [{"tensor": t, "kind": kd, "n_nan": n, "n_inf": i}
                                  for k, t, kd, n, i in bad if k == c["ckpt_id"]]
    by_id = {c["ckpt_id"]: c for c in ckpts}
    deltas = con.execute(f"SELECT ckpt_id, prev_ckpt_id, tensor, delta_l2, ratio, rms, n_nonfinite, step_distance "
                         f"FROM ({MOVERS_SQL}) ORDER BY step, k", [run_id]).fetchall()
    movers: dict[tuple[int, int], dict[str, Any]] = {}
    for cur, prev, tensor, delta, ratio, rms, n_bad, distance in deltas:
        pair = movers.get((prev, cur))
        if pair is None:
            pair = movers[(prev, cur)] = {
                "prev_step": by_id[prev]["step"], "step": by_id[cur]["step"], "step_distance": distance,
                "prev_path": by_id[prev]["path"], "path": by_id[cur]["path"], "top": [], "frozen": [],
            }
        if delta == 0:
            pair["frozen"].append(tensor)
        elif len(pair["top"]) < top:
            pair["top"].append({"tensor": tensor, "delta_l2": delta, "ratio": ratio, "rms": rms,
                                "n_nonfinite": n_bad})
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
    return pl.DataFrame(con.sql(f"""SELECT step, value, wall_time FROM scalars WHERE series_id = {int(series_id)}
                                    ORDER BY source_id, position"""))


def training_opens(con: Any, series_id: int, loss_id: int) -> int | None:
    """The first step of series `series_id` written at or after the first point of series `loss_id` in a file both
    were read from (its last step + 1 where none is); None where they share no file."""
    got = con.execute("""WITH l AS (SELECT source_id, min(position) AS p FROM scalars WHERE series_id = ?
                                    GROUP BY source_id)
                         SELECT coalesce(min(s.step) FILTER (WHERE s.position >= l.p), max(s.step) + 1), count(*)
                         FROM scalars s JOIN l USING (source_id) WHERE s.series_id = ?""",
                      [int(loss_id), int(series_id)]).fetchall()
    return None if not got or not got[0][1] else int(got[0][0])


def source_edges(con: Any, series_id: int) -> pl.DataFrame:
    """Per file a series was read from (several TensorBoard event files of one run), its first and last point:
    source, first_step, first_wall, last_step, last_wall, in the order the files began (first stamp, then file)."""
    return _frame(con, """SELECT source_id AS source, arg_min(step, position) AS first_step,
                                 arg_min(wall_time, position) AS first_wall, arg_max(step, position) AS last_step,
                                 arg_max(wall_time, position) AS last_wall
                          FROM scalars WHERE series_id = ? GROUP BY source_id ORDER BY first_wall, source_id""",
                  [int(series_id)])

# Columns of a long series reduced per query: each query's aggregate states (a few arg_min/arg_max per column) stay
# well inside the read connection's memory limit (125,000 columns in one query needed more than its 64 MB; each of
# DuckDB's threads holds its own states, so a machine of many cores needs more).
REDUCE_COLUMNS_PER_QUERY = 20_000


def series_reduced(con: Any, series_id: int, buckets: int) -> pl.DataFrame:
    """(step, value, wall_time) of a long series reduced to `m4_sql`'s points over its whole step range in
    `buckets` columns (at most ~7 points a column, by step): the engine's bounded view of a series too long to
    hold whole (forensics.judge.run). Steps, stamps and values are real points', exact. The columns are reduced
    REDUCE_COLUMNS_PER_QUERY at a time (step ranges DuckDB prunes by its zone maps), so memory stays bounded
    whatever the length."""
    (lo, hi), = con.execute("SELECT first_step, last_step FROM series WHERE series_id = ?", [int(series_id)]).fetchall()
    schema = {"step": pl.Int64, "value": pl.Float64, "wall_time": pl.Float64}
    if lo is None:
        return pl.DataFrame(schema=schema)
    per_column = max(1, -(-(hi - lo + 1) // max(1, int(buckets))))
    span = per_column * REDUCE_COLUMNS_PER_QUERY
    parts = [pl.DataFrame(con.sql(m4_sql(series_id, start, min(hi, start + span - 1), 0, wall_time=True,
                                         per_column=per_column) + """
        SELECT step, value, wall_time FROM m4 UNION ALL SELECT step, value, wall_time FROM nonfinite
        ORDER BY step, isfinite(value)""")).cast(schema) for start in range(lo, hi + 1, span)]
    # One row per step: a point kept twice (a tied minimum whose stamp came from its twin) is kept once.
    return pl.concat(parts).unique("step", keep="first", maintain_order=True)


def write_order_breaks(con: Any, series_id: int, strict: bool, limit: int = 1000) -> pl.DataFrame:
    """The points of a series, in write order (source, position), around each place its steps go back (a step
    at or below the one before; with `strict`, only below) or its wall clock goes back: each such point and the
    one before it, at most `limit` places, plus the series' last written point; (step, value, wall_time). What
    `resumed_run` reads from a series too long to hold whole.

    The usual series has no such place: that is checked streaming, a batch at a time in the table's own order,
    which is the write order wherever (source, position) never goes back in it (a run ingested once). Only a
    series that fails that check is sorted into write order by DuckDB (bounded by its memory limit, spilling)."""
    import numpy as np

    sid = int(series_id)
    last = None
    clean = True
    cur = con.cursor()  # its own cursor: a stream left unfinished (a break found) must not block the connection
    try:
        reader = cur.sql(f"SELECT source_id, position, step, value, wall_time FROM scalars WHERE series_id = {sid}"
                         ).to_arrow_reader(1 << 20)
        for batch in reader:
            b = pl.from_arrow(batch)
            if last is not None:
                b = pl.concat([last, b])
            src, pos = b["source_id"].to_numpy(), b["position"].to_numpy()
            steps, wall = b["step"].to_numpy(), b["wall_time"].fill_null(np.nan).to_numpy()
            ordered = (src[1:] > src[:-1]) | ((src[1:] == src[:-1]) & (pos[1:] >= pos[:-1]))
            with np.errstate(invalid="ignore"):  # a NULL stamp (NaN here) never counts as going back
                back = (steps[1:] < steps[:-1]) if strict else (steps[1:] <= steps[:-1])
                back |= wall[1:] < wall[:-1]
            if not ordered.all() or back.any() or b["step"].null_count():
                clean = False
                break
            last = b.tail(1)
    finally:
        cur.close()
    if clean:
        empty = pl.DataFrame(schema={"step": pl.Int64, "value": pl.Float64, "wall_time": pl.Float64})
        return empty if last is None else last.select("step", "value", "wall_time")
    back = "<" if strict else "<="
    return pl.DataFrame(con.sql(f"""
        WITH o AS (
            SELECT step, value, wall_time, source_id, position,
                   lag(step) OVER w AS p_step, lag(value) OVER w AS p_value, lag(wall_time) OVER w AS p_wall,
                   lag(source_id) OVER w AS p_source, lag(position) OVER w AS p_position
            FROM scalars WHERE series_id = {sid} WINDOW w AS (ORDER BY source_id, position)),
        breaks AS (
            SELECT * FROM o WHERE step {back} p_step OR wall_time < p_wall
            ORDER BY source_id, position LIMIT {int(limit)}),
        kept AS (
            SELECT step, value, wall_time, source_id, position FROM breaks
            UNION SELECT p_step, p_value, p_wall, p_source, p_position FROM breaks
            UNION (SELECT step, value, wall_time, source_id, position FROM scalars WHERE series_id = {sid}
                   ORDER BY source_id DESC, position DESC LIMIT 1))
        SELECT step, value, wall_time FROM kept ORDER BY source_id, position"""))


def point_counters(con: Any, series_id: int, steps: list[int]) -> dict[int, tuple[int | None, int | None]]:
    """step -> (epoch, batch) the writer printed on the line of each of `steps` (first in write order), for an
    ordinal series whose steps are line ordinals (DECISIONS §2)."""
    rows = con.execute("SELECT s.step, c.epoch, c.batch FROM scalars s LEFT JOIN point_counters c "
                       "ON c.series_id = s.series_id AND c.source_id = s.source_id AND c.position = s.position "
                       "AND c.step = s.step WHERE s.series_id = ? AND list_contains(?, s.step) "
                       "ORDER BY s.source_id, s.position", [int(series_id), [int(x) for x in steps]]).fetchall()
    out: dict[int, tuple[int | None, int | None]] = {}
    for step, epoch, batch in rows:
        out.setdefault(int(step), (epoch, batch))
    return out


def announced(con: Any, run_id: str, prefix: str) -> pl.DataFrame:
    """The lines of the run's console logs that announce an event in words (`texts` rows whose tag starts with
    `prefix`: `ingest.announcements`), in write order, each with what the training-loss records of its own file
    show around it: `grp`, `tag`, `step`, `position`, `text`; `before` and `after` (how many record lines hold a
    training loss before and after it), `finite_after` (how many of those after hold a finite one), `top_step_before`
    and `top_epoch_before` (the highest step and epoch printed before it), `first_step_after` and `first_epoch_after`
    (those of the first record after it), `first_step`, `first_epoch` (those of the file's first record), `ordinal`
    (whether those records' steps are line ordinals, not a printed counter: DECISIONS §2). One pass
    over the file's loss records in write order (windows), whatever the number of announcing lines."""
    return _frame(con, """
        WITH said AS (
            SELECT t.source_id, t.position, t.tag, t.step, t.text, s.grp FROM texts t
            JOIN sources s ON s.source_id = t.source_id
            WHERE t.run_id = ? AND s.format = 'console' AND starts_with(t.tag, ?)),
        records AS (
            SELECT v.source_id, v.position, min(v.step) AS step, max(c.epoch) AS epoch,
                   bool_or(isfinite(v.value)) AS finite, bool_or(e.ordinal) AS ordinal
            FROM scalars v JOIN series e ON e.series_id = v.series_id
            LEFT JOIN point_counters c ON c.series_id = v.series_id AND c.source_id = v.source_id
                 AND c.position = v.position AND c.step = v.step
            WHERE e.run_id = ? AND e.role = 'train_loss' AND v.source_id IN (SELECT source_id FROM said)
            GROUP BY v.source_id, v.position),
        stream AS (
            SELECT source_id, position, 1 AS rec, step, epoch, finite::INTEGER AS fin, ordinal, NULL AS tag,
                   NULL AS said_step, NULL AS text, NULL AS grp FROM records
            UNION ALL
            SELECT source_id, position, 0, NULL, NULL, 0, NULL, tag, step, text, grp FROM said),
        placed AS (
            SELECT *,
                sum(rec) OVER back AS before, max(step) OVER back AS top_step_before, max(epoch) OVER back AS top_epoch_before,
                sum(rec) OVER ahead AS after, sum(fin) OVER ahead AS finite_after,
                first(step IGNORE NULLS) OVER ahead AS first_step_after, first(epoch IGNORE NULLS) OVER ahead AS first_epoch_after,
                first(step IGNORE NULLS) OVER whole AS first_step, first(epoch IGNORE NULLS) OVER whole AS first_epoch,
                bool_or(ordinal) OVER whole AS any_ordinal
            FROM stream
            WINDOW back AS (PARTITION BY source_id ORDER BY position, rec DESC ROWS UNBOUNDED PRECEDING),
                   ahead AS (PARTITION BY source_id ORDER BY position, rec DESC ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING),
                   whole AS (PARTITION BY source_id ORDER BY position, rec DESC
                             ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING))
        SELECT grp, tag, said_step AS step, position, text, before::BIGINT AS before, after::BIGINT AS after,
               finite_after::BIGINT AS finite_after, top_step_before, top_epoch_before, first_step_after,
               first_epoch_after, first_step, first_epoch, coalesce(any_ordinal, false) AS ordinal
        FROM placed WHERE rec = 0 ORDER BY source_id, position""", [run_id, prefix, run_id])

# Issue kinds that are not problems of a file we read: files no reader knows are listed apart.
NOT_A_READ_PROBLEM = ("unknown_file", "lines_read")  # a file no reader knows; a console reader's line tally


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
        "SELECT DISTINCT path FROM ingest_issues WHERE run_id = ? AND kind = 'unknown_file' ORDER BY path",
        [run_id]).fetchall()]


def lines_read(con, run_id: str) -> list[dict]:
    """Per read of a console log: path, the byte it began at, and how many lines each pattern took (`-v`)."""
    return [{"path": path, "position": position, "detail": detail} for path, position, detail in con.execute(
        "SELECT path, position, detail FROM ingest_issues WHERE run_id = ? AND kind = 'lines_read' "
        "ORDER BY path, position", [run_id]).fetchall()]

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
    """Every run with its latest analysis as the engine stored it: verdict, reason, headline finding (the earliest
    cause, chosen once by the engine), the `--only`/`--skip` restriction, read problems (JSON), finding counts,
    sources, length, last ingest.

    `verdict` is `not analyzed` for a run that was only ingested and `older analysis` for one analysed before
    verdicts were stored (schema 5): the app asks for a new analysis rather than judge it."""
    return _app_frame(con, f"""
        WITH latest AS (
            SELECT run_id, max(analysis_id) AS analysis_id FROM analyses GROUP BY run_id),
        counts AS (
            SELECT f.run_id,
                   count(*) FILTER (WHERE severity = 'critical') AS n_critical,
                   count(*) FILTER (WHERE severity = 'warning') AS n_warning,
                   count(*) FILTER (WHERE severity = 'info') AS n_info
            FROM findings f JOIN latest USING (run_id, analysis_id) GROUP BY f.run_id),
        srcs AS (
            SELECT run_id, string_agg(DISTINCT format, ', ' ORDER BY format) AS formats,
                   sum(n_points)::BIGINT AS n_points FROM sources GROUP BY run_id),
        length AS (
            SELECT run_id, max(last_step) AS last_step, count(*) AS n_series FROM series GROUP BY run_id)
        SELECT r.run_id, r.name, r.root, r.last_ingested, r.ingest_complete IS NOT FALSE AS ingest_complete,
               latest.analysis_id, a.created AS analyzed,
               {_VERDICT_SQL} AS verdict, a.verdict_reason, a.only_kinds, a.skip_kinds, a.read_problems,
               coalesce(json_array_length(a.read_problems), 0)::INTEGER AS n_read_problems,
               coalesce(c.n_critical, 0) AS n_critical, coalesce(c.n_warning, 0) AS n_warning,
               coalesce(c.n_info, 0) AS n_info, a.headline_id, h.severity AS worst, h.kind AS headline_kind,
               h.step AS headline_step, h.step_end AS headline_step_end, h.event_id AS headline_event,
               h.summary AS headline_summary, h.checks AS headline_checks,
               h.kind || ': ' || h.summary AS headline, s.formats,
               coalesce(s.n_points, 0) AS n_points, l.last_step, coalesce(l.n_series, 0) AS n_series
        FROM runs r
        LEFT JOIN latest USING (run_id)
        LEFT JOIN analyses a ON a.analysis_id = latest.analysis_id
        LEFT JOIN findings h ON h.analysis_id = a.analysis_id AND h.finding_id = a.headline_id
        LEFT JOIN counts c ON c.run_id = r.run_id
        LEFT JOIN srcs s ON s.run_id = r.run_id
        LEFT JOIN length l ON l.run_id = r.run_id
        ORDER BY r.name, r.run_id""")


def app_step_time(con: Any, series_id: int, lo: int, hi: int, pixels: int, buckets: int | None = None,
                  source: dict | None = None) -> pl.DataFrame:
    """Seconds per step of one series as throughput_drop judged them (`ingest.steptime.seconds_per_step` over its
    points in write order, or over the reduced view the analysis read when `buckets`, the finding's
    `reduced_to_buckets`, is given), priced as the finding's wall-clock `source` says (`priced_by`: the printed
    counters or a record-length series; `launch_edges`), each interval drawn at its end step, over steps [lo, hi],
    M4-decimated to about `pixels` columns as `app_m4` is: per column the first, lowest, highest and last value, so
    every stall stays. step, value, what ('m4')."""
    from ingest.steptime import record_work, seconds_per_step

    if hi < lo:
        lo, hi = hi, lo
    lo, hi = int(lo), int(hi)
    per_column = max(1, -(-(hi - lo + 1) // max(1, int(pixels))))
    schema = {"step": pl.Int64, "value": pl.Float64, "what": pl.String}
    points = series_reduced(con, series_id, int(buckets)) if buckets else series_points(con, series_id)
    source = source or {}
    priced, work = source.get("priced_by"), None
    if priced == "counters":
        steps = points["step"].to_list()
        printed = point_counters(con, series_id, [s for s in steps if s is not None])
        work = record_work([printed.get(int(s), (None, None)) if s is not None else (None, None) for s in steps])
    elif isinstance(priced, str) and priced.startswith("lengths:"):
        lengths = series_points(con, int(priced.split(":", 1)[1]))
        said = dict(zip(lengths["step"].to_list(), lengths["value"].to_list()))
        work = record_work([], np.array([said.get(s, np.nan) for s in points["step"].to_list()], dtype=float))
    got = seconds_per_step(points, work, source.get("launch_edges"), source.get("edges_on") != "step")
    if got is None:
        return pl.DataFrame(schema=schema)
    pts = (pl.DataFrame({"step": got[1], "value": got[2]}, schema={"step": pl.Int64, "value": pl.Float64})
           .filter(pl.col("step").is_between(lo, hi)).sort("step", maintain_order=True)
           .with_columns(((pl.col("step") - lo) // per_column).alias("col")))
    point = pl.struct("step", "value")
    kept = pts.group_by("col").agg(point.first().alias("first"), point.get(pl.col("value").arg_min()).alias("min"),
                                   point.get(pl.col("value").arg_max()).alias("max"), point.last().alias("last"))
    return (pl.concat([kept.select(pl.col(c).struct.unnest()) for c in ("first", "min", "max", "last")])
            .unique().sort("step", "value").with_columns(pl.lit("m4").alias("what")).cast(schema))


def app_run_kinds(con: Any) -> pl.DataFrame:
    """(run_id, kinds): the finding kinds of each run's latest analysis, space-separated, for the Runs filter."""
    return _app_frame(con, """
        SELECT f.run_id, string_agg(DISTINCT f.kind, ' ' ORDER BY f.kind) AS kinds
        FROM findings f JOIN (SELECT run_id, max(analysis_id) AS analysis_id FROM analyses GROUP BY run_id)
             USING (run_id, analysis_id)
        GROUP BY f.run_id""")


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


def m4_sql(series_id: int, lo: int, hi: int, columns: int, wall_time: bool = False, per_column: int | None = None,
           source_id: int | None = None) -> str:
    """The one M4 decimation (Jugel et al., VLDB 2014) of a series, as SQL the app's charts and the engine's reduced
    view of a long series both select from: over steps [lo, hi] cut into columns of `ceil((hi - lo + 1) / columns)`
    consecutive steps, per column the first, minimum, maximum and last finite point with their real steps and exact
    values (`what` 'm4'), and the first point of each non-finite kind (NaN, +Inf, -Inf; 'nonfinite'), so a spike
    keeps its peak and the first NaN its step whatever the length. At most 7 rows per column, by step; NULL values
    dropped. `wall_time` adds each kept point's wall-clock stamp (where a column's min or max value is tied, step
    and stamp may come from two points of that value). `per_column`, when given, is the column width in steps
    (`columns` is then ignored). `source_id`, when given, keeps that file's points only (one pass of a resumed run).
    DuckDB aggregates it streaming, within the connection's memory limit."""
    lo, hi, series_id = int(lo), int(hi), int(series_id)
    of_source = f" AND source_id = {int(source_id)}" if source_id is not None else ""
    per_column = int(per_column) if per_column else max(1, -(-(hi - lo + 1) // max(1, int(columns))))
    if wall_time:
        wall = {k: f", arg_{f}(wall_time, {by}) AS w_{k}" for k, f, by in (
            ("first", "min", "step"), ("last", "max", "step"), ("min", "min", "value"),
            ("max", "max", "value"))}
        w = {k: f", w_{k} AS wall_time" for k in wall}
        w_nonfinite = ", arg_min(wall_time, step) AS wall_time"
    else:
        wall, w, w_nonfinite = dict.fromkeys(("first", "last", "min", "max"), ""), \
            dict.fromkeys(("first", "last", "min", "max"), ""), ""
    # The integers are written into the SQL, not bound: with constants DuckDB knows the column number's range
    # and groups with a perfect hash, 2-3x faster than binding them (measured: benchmarks/bench_app_decimation.py).
    return f"""
        WITH pts AS (
            SELECT step, value, wall_time, (step - {lo}) // {per_column} AS col
            FROM scalars WHERE series_id = {series_id}{of_source} AND step BETWEEN {lo} AND {hi}
                               AND value IS NOT NULL),
        fin AS (
            SELECT col, min(step) AS s_first, arg_min(value, step) AS v_first{wall["first"]},
                   max(step) AS s_last, arg_max(value, step) AS v_last{wall["last"]},
                   arg_min(step, value) AS s_min, min(value) AS v_min{wall["min"]},
                   arg_max(step, value) AS s_max, max(value) AS v_max{wall["max"]}
            FROM pts WHERE isfinite(value) GROUP BY col),
        m4 AS (
            SELECT s_first AS step, v_first AS value{w["first"]} FROM fin
            UNION SELECT s_min, v_min{w["min"]} FROM fin
            UNION SELECT s_max, v_max{w["max"]} FROM fin
            UNION SELECT s_last, v_last{w["last"]} FROM fin),
        nonfinite AS (
            SELECT min(step) AS step, any_value(value) AS value{w_nonfinite} FROM pts WHERE NOT isfinite(value)
            GROUP BY col, CASE WHEN isnan(value) THEN 0 WHEN value > 0 THEN 1 ELSE 2 END)"""


def app_m4(con: Any, series_id: int, lo: int, hi: int, pixels: int, analysis_id: int | None = None,
           series_name: str | None = None, source_id: int | None = None) -> pl.DataFrame:
    """The points of one series to draw over steps [lo, hi] at about `pixels` columns, without losing evidence.

    `m4_sql`'s points (per column the first, minimum, maximum and last finite point, and the first point of each
    non-finite kind), plus every spike row of `analysis_id` for `series_name` in the range. Returns step, value,
    what (`m4`, `nonfinite`, `spike`), sorted by step: at most about 7 rows per column plus the spikes, whatever
    the series' length. NULL values are not drawn. `source_id`: one file's points (a pass of a resumed run)."""
    if hi < lo:
        lo, hi = hi, lo
    lo, hi = int(lo), int(hi)
    return _app_frame(con, m4_sql(series_id, lo, hi, pixels, source_id=source_id) + f""",
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
    """For each consecutive checkpoint pair, the `top` movers as `forensics checkpoints` ranks them (MOVERS_SQL):
    tensors holding NaN/Inf first, then by the update's RMS; `ratio` is ‖Δw‖/‖w‖, NULL where ‖w‖ was 0."""
    return _app_frame(con, f"""
        SELECT step, prev_step, step_distance, tensor, delta_l2, ratio, rms, n_nonfinite FROM ({MOVERS_SQL})
        WHERE k <= ? AND delta_l2 IS DISTINCT FROM 0 ORDER BY step, k""", [run_id, top])


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
    """‖Δw‖/‖w‖ of every tensor between consecutive checkpoints: layer, prev_step, step, step_distance, value
    (a heatmap's cells, each over its own interval)."""
    return _app_frame(con, """
        SELECT tensor AS layer, prev_step, step, step_distance, ratio AS value FROM tensor_deltas WHERE run_id = ?
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


def app_probes(con: Any, run_id: str) -> pl.DataFrame | None:
    """The checks of the run's latest `forensics probe`, in output order; None when the database has no `probes`
    table yet."""
    if not app_has_table(con, "probes"):
        return None
    return _app_frame(con, """
        SELECT probe_id, created, check_name, status, summary, names, explains, evidence, from_checkpoint
        FROM probes WHERE run_id = ? AND probe_id = (SELECT max(probe_id) FROM probes WHERE run_id = ?)
        ORDER BY position""", [run_id, run_id])


def stored_answers(con: Any, run_id: str) -> dict[str, Any]:
    """What `forensics replay` and `forensics probe` learned about the run, as the report and the app both show it:
    {"replays": the newest replay of each step asked for (newest first), "probe": the checks of the latest probe or
    None}. Each carries `ran` (when, ISO) and `changed`: a file of the run was written after it ran (a source's
    recorded mtime is later), so its answer may be out of date. Empty in a store made before these tables."""
    import json

    # A source written after the answer: `created` is local wall time (DuckDB's now() cast to TIMESTAMP), read back
    # as such; mtime is seconds since the epoch.
    changed = ("EXISTS (SELECT 1 FROM sources s WHERE s.run_id = t.run_id "
               "AND s.mtime > epoch(t.created::TIMESTAMPTZ))")
    out: dict[str, Any] = {"replays": [], "probe": None}
    if app_has_table(con, "replays"):
        rows = con.execute(f"""
            SELECT replay_id, strftime(created, '%Y-%m-%dT%H:%M:%S'), {changed}, result FROM replays t
            WHERE run_id = ? QUALIFY row_number() OVER (PARTITION BY step ORDER BY replay_id DESC) = 1
            ORDER BY replay_id DESC""", [run_id]).fetchall()
        for rid, ran, moved, result in rows:
            doc = json.loads(result) if result else {}
            out["replays"].append({**(doc if isinstance(doc, dict) else {}), "replay_id": rid, "ran": ran,
                                   "changed": bool(moved)})
    if app_has_table(con, "probes"):
        rows = con.execute(f"""
            SELECT probe_id, strftime(created, '%Y-%m-%dT%H:%M:%S'), {changed}, check_name, status, summary, names,
                   explains FROM probes t
            WHERE run_id = ? AND probe_id = (SELECT max(probe_id) FROM probes WHERE run_id = ?)
            ORDER BY position""", [run_id, run_id]).fetchall()
        if rows:
            out["probe"] = {"probe_id": rows[0][0], "ran": rows[0][1], "changed": bool(rows[0][2]),
                            "checks": [{"name": r[3], "status": r[4], "summary": r[5], "names": list(r[6] or []),
                                        "explains": list(r[7] or [])} for r in rows]}
    return out


def app_passes(con: Any, run_id: str) -> pl.DataFrame:
    """The passes of a resumed run: for each series whose points come from two or more files whose step ranges
    overlap (a run resumed from an earlier checkpoint logs those steps again), one row per file by its first step:
    series_id, source_id, path, first_step, last_step, pass (1, 2, ...). Empty for a run logged in one pass."""
    return _app_frame(con, """
        WITH per AS (
            SELECT p.series_id, p.source_id, min(p.step) AS first_step, max(p.step) AS last_step
            FROM scalars p JOIN series r USING (series_id) WHERE r.run_id = ? AND p.step IS NOT NULL
            GROUP BY p.series_id, p.source_id),
        ordered AS (
            SELECT *, row_number() OVER (PARTITION BY series_id ORDER BY first_step, source_id) AS pass,
                   max(last_step) OVER (PARTITION BY series_id ORDER BY first_step, source_id
                                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_last
            FROM per),
        resumed AS (SELECT DISTINCT series_id FROM ordered WHERE first_step <= before_last)
        SELECT o.series_id, o.source_id, s.path, o.first_step, o.last_step, o.pass
        FROM ordered o JOIN resumed USING (series_id) JOIN sources s USING (source_id)
        ORDER BY o.series_id, o.pass""", [run_id])


def app_report(con: Any, run_id: str, analysis_id: int | None) -> dict[str, Any]:
    """Everything the app's Run report reads, on one connection (each page visit opened seven): series, findings,
    skipped, spikes (None when not analysed), first non-finite points, checkpoints, stored answers, unknown files,
    the passes of a resumed run."""
    analysed = analysis_id is not None
    return {"series": app_series(con, run_id), "findings": app_findings(con, analysis_id) if analysed else None,
            "skipped": app_skipped(con, analysis_id) if analysed else None,
            "spikes": app_spikes(con, analysis_id) if analysed else None,
            "first": app_first_nonfinite(con, run_id), "ckpts": app_checkpoints(con, run_id),
            "answers": stored_answers(con, run_id), "unknown": unknown_files(con, run_id),
            "passes": app_passes(con, run_id)}


def app_configs(con: Any, run_ids: list[str]) -> pl.DataFrame:
    """Config values of several runs: run_id, document, key, value (JSON text)."""
    return _app_frame(con, """
        SELECT run_id, name AS document, key, value FROM configs WHERE run_id IN (SELECT unnest(?))
        ORDER BY key, run_id""", [run_ids])


def app_batches(con: Any, run_id: str) -> pl.DataFrame:
    """Saved batches with the samples that hold NaN/Inf (which samples are outliers is the bad_batch detector's
    judgement, stored as its finding, not here)."""
    return _app_frame(con, """
        SELECT b.step, b.path, b.n_samples, b.status, s.tensor, s.nonfinite_samples
        FROM batches b LEFT JOIN batch_stats s USING (batch_id) WHERE b.run_id = ?
        ORDER BY b.step, s.tensor""", [run_id])


# -- replay ------------------------------------------------------------------------------------------------

NOT_COPIED = frozenset({"meta", "analyses", "findings", "spikes", "skipped", "watched_runs", "alerts"})


def export_run_tables(con) -> dict:
    """Every ingest table of a private store holding one run (a fleet worker's), as Arrow tables."""
    import warnings

    from ingest.schema import TABLES

    with warnings.catch_warnings():  # DuckDB warns of the copy DB-API Arrow output makes: wanted, it outlives con
        warnings.simplefilter("ignore", UserWarning)
        return {name: con.execute(f"SELECT * FROM {name}").to_arrow_table()
                for name in TABLES if name not in NOT_COPIED}


def known_run_ids(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT run_id FROM runs").fetchall()}


def watched_runs(con) -> list[dict]:
    """Every run the watch has found, as dicts keyed like the table."""
    cur = con.execute("SELECT * FROM watched_runs ORDER BY path")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def alerted_severities(con) -> dict[tuple[str, str], str]:
    """(run_id, kind) -> the worst severity already alerted, so a finding is alerted once per severity rise."""
    rows = con.execute(
        "SELECT run_id, kind, min(CASE severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END) "
        "FROM alerts GROUP BY run_id, kind").fetchall()
    return {(r, k): ("critical", "warning", "info")[rank] for r, k, rank in rows}


def truncated_tails(con, run_ids: list[str] | None = None) -> list[tuple[str, str, int | None, str, int]]:
    """(run, path, position, detail, size at the last ingest) of every file whose end was cut off and is still
    where the reading stopped: a log whose tail ends inside a record, a checkpoint or saved batch cut off
    mid-save (position None). `watch` alerts one that has not changed by its next pass, whichever process
    ran that pass (`--once` from cron)."""
    return con.execute(
        "SELECT i.run_id, i.path, i.position, i.detail, s.size_bytes FROM ingest_issues i "
        "JOIN sources s ON s.run_id = i.run_id AND s.path = i.path "
        "WHERE i.kind = 'truncated' AND (? IS NULL OR list_contains(?, i.run_id)) AND ("
        # a log: still where the reading stopped (a tail read past since is history, not a suspect)
        " (i.position IS NOT NULL AND s.resume_at = i.position AND s.size_bytes > s.resume_at)"
        # a tensor file: still the damaged one (a rewritten checkpoint is read anew and its status changes)
        " OR (i.position IS NULL AND s.format IN ('checkpoint', 'batch') AND s.status IN ('unreadable', 'partial')))"
        " ORDER BY i.run_id, i.path",
        [run_ids, run_ids]).fetchall()


def alerts(con, run_id: str | None = None) -> list[dict]:
    sql = "SELECT * FROM alerts" + (" WHERE run_id = ?" if run_id else "") + " ORDER BY alert_id"
    cur = con.execute(sql, [run_id] if run_id else [])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def logging_intervals_s(con, run_ids: list[str]) -> dict[str, float]:
    """Per run: the median wall-clock seconds between consecutive points of its training loss (the canonical
    one, else the longest), over its last 200 points. Runs that log no wall time are absent. One query for all."""
    rows = con.execute(
        """WITH s AS (SELECT run_id, series_id, row_number() OVER (PARTITION BY run_id
                                                ORDER BY canonical DESC, n_points DESC, series_id) AS k
                      FROM series WHERE role = 'train_loss' AND list_contains(?, run_id)),
                p AS (SELECT s.run_id, x.wall_time, row_number() OVER (PARTITION BY s.run_id
                                                ORDER BY x.step DESC, x.position DESC) AS i
                      FROM scalars x JOIN s ON x.series_id = s.series_id WHERE s.k = 1 AND x.wall_time IS NOT NULL),
                d AS (SELECT run_id, wall_time - lead(wall_time) OVER (PARTITION BY run_id ORDER BY i) AS gap
                      FROM p WHERE i <= 200)
           SELECT run_id, median(gap) FROM d WHERE gap > 0 GROUP BY run_id""", [run_ids]).fetchall()
    return {r: float(g) for r, g in rows if g is not None}


# -- compare (CLI: compare; app: Compare; analyze's sibling line) ---------------------------------------------

def compare_runs(con: Any) -> pl.DataFrame:
    """Every run with its latest analysis as `forensics compare` weighs it: run_id, name, root, verdict (as
    `app_runs`), headline kind, series and step, the finding kinds (space-separated) with their critical count and the
    earliest critical step, and the formats of its scalar series (space-separated)."""
    return _frame(con, f"""
        WITH latest AS (SELECT run_id, max(analysis_id) AS analysis_id FROM analyses GROUP BY run_id),
        f AS (SELECT f.run_id, string_agg(DISTINCT f.kind, ' ' ORDER BY f.kind) AS kinds,
                     count(*) FILTER (WHERE severity = 'critical') AS n_critical,
                     count(*) FILTER (WHERE severity IN ('critical', 'warning')) AS n_findings,
                     min(step) FILTER (WHERE severity = 'critical') AS first_critical
              FROM findings f JOIN latest USING (run_id, analysis_id) GROUP BY f.run_id),
        fmt AS (SELECT run_id, string_agg(DISTINCT format, ' ' ORDER BY format) AS formats FROM series
                GROUP BY run_id)
        SELECT r.run_id, r.name, r.root, {_VERDICT_SQL} AS verdict, h.kind AS headline_kind,
               h.series AS headline_series, h.step AS headline_step, h.step_end AS headline_step_end, coalesce(f.kinds, '') AS kinds,
               coalesce(f.n_critical, 0) AS n_critical, coalesce(f.n_findings, 0) AS n_findings,
               f.first_critical, coalesce(fmt.formats, '') AS formats
        FROM runs r LEFT JOIN latest USING (run_id)
        LEFT JOIN analyses a ON a.analysis_id = latest.analysis_id
        LEFT JOIN findings h ON h.analysis_id = a.analysis_id AND h.finding_id = a.headline_id
        LEFT JOIN f ON f.run_id = r.run_id LEFT JOIN fmt ON fmt.run_id = r.run_id
        ORDER BY r.name, r.run_id""", [])


def compare_configs(con: Any) -> dict[str, dict[str, Any]]:
    """Every run's config values, run_id -> {dotted key -> value}, as `run_configs` reads one run's (the first
    source's value where sources disagree)."""
    out: dict[str, dict[str, Any]] = {}
    for run_id, key, value in con.execute("SELECT run_id, key, value FROM configs ORDER BY run_id, source_id"
                                          ).fetchall():
        try:
            out.setdefault(run_id, {}).setdefault(key, json.loads(value) if value is not None else None)
        except json.JSONDecodeError:
            out.setdefault(run_id, {}).setdefault(key, value)
    return out


def compare_series(con: Any) -> pl.DataFrame:
    """Every run's series names and roles (run_id, name, role, ordinal), for telling runs that log alike. (These
    read through `_frame`, not `_app_frame`: analyze asks for them, and pyarrow's import costs it 0.08 s.)"""
    return _frame(con, "SELECT run_id, name, role, ordinal FROM series ORDER BY run_id, name", [])
