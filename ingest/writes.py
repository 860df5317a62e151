"""Every write to the store, beside the schema it writes (ingest/schema.py).

Each INSERT names its columns, so a reordered table in schema.py cannot shift values silently. Callers hand
over frames or rows inside a transaction they opened (`ingest.store.connect(db, write=True)` then `BEGIN`);
this module owns the SQL. Sections by feature: new features add their writes to their own section here,
never beside the feature.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from typing import Any

import polars as pl

from ingest.jsonvalues import as_float, fits_int64
from ingest.names import storable
from ingest.records import Issue, texts_frame


def scannable(frame: pl.DataFrame) -> object:
    """`frame` as DuckDB scans it (`con.register(name, scannable(frame))`): through the Arrow PyCapsule interface,
    a new stream over the same buffers for each scan, so pyarrow is never imported (its import was ~5%
    of an ordinary run's first answer, and both polars' `to_arrow()` and DuckDB's scan of a polars frame make a
    pyarrow table).

    DuckDB refuses a stream column of Arrow's null type ("a non-zero null count but no validity bitmap"): a frame
    holding one (a column, a list or a struct field with no value in it) goes through pyarrow as before."""
    if any(_holds_null_type(dtype) for dtype in frame.dtypes):
        return frame.to_arrow()
    return _Stream(frame)


class _Stream:
    def __init__(self, frame: pl.DataFrame) -> None:
        self.frame = frame

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self.frame.__arrow_c_stream__(requested_schema)


def _holds_null_type(dtype: Any) -> bool:
    if dtype == pl.Null:
        return True
    inner = getattr(dtype, "inner", None)
    if inner is not None and _holds_null_type(inner):
        return True
    return any(_holds_null_type(f.dtype) for f in getattr(dtype, "fields", None) or ())


def insert_frame(con: Any, table: str, frame: pl.DataFrame) -> None:
    """Bulk insert through Arrow, by column name: the frame's columns are the ones written."""
    if frame.height == 0:
        return
    con.register("_frame", scannable(frame))
    try:
        cols = ", ".join(frame.columns)
        con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM _frame")
    finally:
        con.unregister("_frame")


def next_id(con: Any, sequence: str) -> int:
    """The next value of one of schema.SEQUENCES."""
    [(value,)] = con.execute(f"SELECT nextval('{sequence}')").fetchall()  # fetchall: no result left open
    return int(value)


# -- runs, sources and points (ingest) --------------------------------------------------------------------

def upsert_run(con: Any, run_id: str, name: str, root: str, *, complete: bool = False) -> None:
    """The run's row, created on its first ingest; later ingests only move `last_ingested`. Every write of an
    ingest marks the run incomplete, its last write (`complete=True`) complete: a run left marked was stopped
    half-way."""
    con.execute(
        "INSERT INTO runs (run_id, name, root, first_ingested, last_ingested, ingest_complete) "
        "VALUES (?, ?, ?, now(), now(), ?) "
        "ON CONFLICT (run_id) DO UPDATE SET last_ingested = now(), ingest_complete = excluded.ingest_complete",
        [run_id, name, root, complete],
    )


def mark_incomplete(con: Any, run_id: str) -> None:
    """A write of an ingest that does not touch the run's row otherwise (forgetting a rewritten log's points)."""
    con.execute("UPDATE runs SET ingest_complete = FALSE WHERE run_id = ?", [run_id])


def delete_run(con: Any, run_id: str) -> None:
    """Every row of a run, where a first ingest read nothing: it leaves no run behind."""
    for table in ("scalars", "point_counters", "histograms"):
        con.execute(f"DELETE FROM {table} WHERE source_id IN (SELECT source_id FROM sources WHERE run_id = ?)",
                    [run_id])
    for table in ("tensor_stats", "tensor_deltas", "checkpoint_values", "checkpoints", "batch_stats", "batches",
                  "texts", "configs", "ingest_issues", "series", "sources", "runs"):
        con.execute(f"DELETE FROM {table} WHERE run_id = ?", [run_id])


def claim_source(con: Any, run_id: str, path: str, fmt: str, grp: str) -> int:
    """The `sources` row of a log file, created if new; its id. Idempotent: a concurrent ingest of the same
    run that created the row first is not an error (two ingests of one new run)."""
    made = con.execute(
        "INSERT INTO sources (source_id, run_id, path, format, grp) VALUES (nextval('source_id_seq'), ?, ?, ?, ?) "
        "ON CONFLICT (run_id, path) DO NOTHING RETURNING source_id",
        [run_id, path, fmt, grp],
    ).fetchall()
    if not made:
        made = con.execute("SELECT source_id FROM sources WHERE run_id = ? AND path = ?", [run_id, path]).fetchall()
    return int(made[0][0])


def update_source(con: Any, source_id: int, *, size: int, mtime: float, head_hash: str, resume_at: int,
                  points: int, dropped: int, status: str, fmt: str, grp: str, reader_version: int) -> None:
    """After a source's chunks are written: where the next ingest goes on, its counts and status, and which
    format, and which version of its reader, parsed it."""
    con.execute(
        "UPDATE sources SET size_bytes = ?, mtime = ?, head_hash = ?, resume_at = ?, "
        "n_points = n_points + ?, duplicate_points = duplicate_points + ?, status = ?, format = ?, grp = ?, "
        "reader_version = ? WHERE source_id = ?",
        [size, mtime, head_hash, resume_at, points, dropped, status, fmt, grp, reader_version, source_id],
    )


def forget_sources(con: Any, run_id: str, sources: dict[str, int]) -> None:
    """Drop what earlier ingests read from `sources` (path -> source_id), so that the next read starts from
    nothing: their points, histograms, texts, config values and issues. The rows stay (their ids are kept) with
    their resume state cleared; the run's series are recounted, and series left with no data are dropped."""
    ids, paths = list(sources.values()), list(sources)
    for table in ("scalars", "point_counters", "histograms", "texts", "configs"):
        con.execute(f"DELETE FROM {table} WHERE list_contains(?, source_id)", [ids])
    con.execute("DELETE FROM ingest_issues WHERE run_id = ? AND list_contains(?, path)", [run_id, paths])
    con.execute("UPDATE sources SET size_bytes = NULL, mtime = NULL, head_hash = NULL, resume_at = 0, n_points = 0, "
                "duplicate_points = 0, status = NULL, detail = NULL, reader_version = NULL "
                "WHERE list_contains(?, source_id)", [ids])
    con.execute(
        """UPDATE series SET n_points = coalesce(c.n, 0), n_nonfinite = coalesce(c.bad, 0), first_step = c.lo,
                  last_step = c.hi
           FROM (SELECT r.series_id, count(p.step) AS n, count(p.step) FILTER (WHERE NOT isfinite(p.value)) AS bad,
                        min(p.step) AS lo, max(p.step) AS hi
                 FROM series r LEFT JOIN scalars p ON p.series_id = r.series_id WHERE r.run_id = ?
                 GROUP BY r.series_id) c
           WHERE series.series_id = c.series_id""", [run_id])
    con.execute("DELETE FROM series WHERE run_id = ? AND n_points = 0 AND series_id NOT IN "
                "(SELECT DISTINCT series_id FROM histograms)", [run_id])


def register_sources(con: Any, run_id: str, rows: Sequence[tuple[str, str, int, float | None, str, str | None]]) -> None:
    """`register_source` for many (path, format, size, mtime, status, detail) rows in one statement."""
    if not rows:
        return
    frame = pl.DataFrame(rows, schema={"path": pl.Utf8, "format": pl.Utf8, "size_bytes": pl.Int64,
                                       "mtime": pl.Float64, "status": pl.Utf8, "detail": pl.Utf8}, orient="row")
    con.register("_new_sources", scannable(frame.unique("path", keep="last", maintain_order=True)))
    try:
        con.execute(
            "INSERT INTO sources (source_id, run_id, path, format, grp, size_bytes, mtime, status, detail) "
            "SELECT nextval('source_id_seq'), ?, path, format, '', size_bytes, mtime, status, detail FROM _new_sources "
            "ON CONFLICT (run_id, path) DO UPDATE SET size_bytes = excluded.size_bytes, mtime = excluded.mtime, "
            "status = excluded.status, detail = excluded.detail", [run_id])
    finally:
        con.unregister("_new_sources")


def register_source(con: Any, run_id: str, path: str, fmt: str, size: int, mtime: float | None, status: str,
                    detail: str | None) -> None:
    """A `sources` row for a checkpoint (its folder, for the hf layout) or a saved batch, so that
    `forensics runs` lists it beside the logs, and a later ingest sees whether it changed (size, mtime).
    Its data lives in the checkpoint/batch tables."""
    con.execute(
        "INSERT INTO sources (source_id, run_id, path, format, grp, size_bytes, mtime, status, detail) "
        "VALUES (nextval('source_id_seq'), ?, ?, ?, '', ?, ?, ?, ?) ON CONFLICT (run_id, path) DO UPDATE SET "
        "size_bytes = excluded.size_bytes, mtime = excluded.mtime, status = excluded.status, "
        "detail = excluded.detail",
        [run_id, path, fmt, size, mtime, status, detail],
    )


def series_ids(con: Any, run_id: str, grp: str, fmt: str, tags: Sequence[str], ordinal: set[str],
               role_of: Any) -> dict[str, int]:
    """Series ids for `tags` of one group, creating the series that are new (`role_of(tag)` gives their
    provisional role: `refresh_series` settles names and roles once the whole run is known). Tags in
    `ordinal` are marked as ordinal-stepped. Idempotent under a concurrent ingest of the same run."""
    if not tags:
        return {}
    lookup = ("SELECT tag, series_id FROM series WHERE run_id = ? AND grp = ? AND list_contains(?, tag)",
              [run_id, grp, list(tags)])
    existing = dict(con.execute(*lookup).fetchall())
    new = [t for t in tags if t not in existing]
    if new:  # one statement for all new tags: a statement per tag costs ~5 ms each with ON CONFLICT
        roles = [role_of(t) for t in new]
        frame = pl.DataFrame({"tag": new, "role": [r.role for r in roles], "split": [r.split for r in roles],
                              "layer": [r.layer for r in roles], "canonical": [r.canonical for r in roles],
                              "ordinal": [t in ordinal for t in new]},
                             schema={"tag": pl.Utf8, "role": pl.Utf8, "split": pl.Utf8, "layer": pl.Utf8,
                                     "canonical": pl.Boolean, "ordinal": pl.Boolean})
        con.register("_new_series", scannable(frame))
        try:
            con.execute(
                "INSERT INTO series (series_id, run_id, grp, tag, format, name, role, split, layer, canonical, ordinal) "
                "SELECT nextval('series_id_seq'), ?, ?, tag, ?, tag, role, split, layer, canonical, ordinal "
                "FROM _new_series ON CONFLICT (run_id, grp, tag) DO NOTHING", [run_id, grp, fmt])
        finally:
            con.unregister("_new_series")
        existing = dict(con.execute(*lookup).fetchall())
    if ordinal:
        con.execute("UPDATE series SET ordinal = TRUE WHERE run_id = ? AND grp = ? AND list_contains(?, tag)",
                    [run_id, grp, sorted(ordinal)])
    return existing


def insert_scalars(con: Any, source_id: int, frame: pl.DataFrame | None, *, dedupe: bool) -> tuple[int, int]:
    """Insert points (a frame with series_id in place of tag) and add them to their series' counts; the epoch
    and batch of the points that have them go to `point_counters`.

    With `dedupe` (formats whose files are copies of one log, DECISIONS.md §3), exact (series, step, value)
    copies, within the frame or already stored, are dropped first. Returns (written, dropped)."""
    if frame is None or frame.is_empty():
        return 0, 0
    new = frame.with_columns(pl.lit(source_id, dtype=pl.Int32).alias("source_id"))
    dropped = 0
    if dedupe:
        before = len(new)
        new = new.unique(subset=["series_id", "step", "value"], keep="first", maintain_order=True)
        con.register("_new_points", scannable(new))
        new = pl.DataFrame(con.sql(
            "SELECT n.* FROM _new_points n WHERE NOT EXISTS (SELECT 1 FROM scalars s "
            "WHERE s.series_id = n.series_id AND s.step = n.step AND s.value IS NOT DISTINCT FROM n.value)"))
        con.unregister("_new_points")
        dropped = before - len(new)
    con.register("_new_points", scannable(new))
    con.execute(
        "INSERT INTO scalars (series_id, source_id, position, step, value, wall_time) "
        "SELECT series_id, source_id, position, step, value, wall_time FROM _new_points")
    if len(new) > min(new["epoch"].null_count(), new["batch"].null_count()):  # null counts are free in polars
        con.execute(
            "INSERT INTO point_counters (series_id, source_id, position, step, epoch, batch) "
            "SELECT series_id, source_id, position, step, epoch, batch FROM _new_points "
            "WHERE epoch IS NOT NULL OR batch IS NOT NULL")
    # The counts are aggregated by DuckDB from the same registered frame (a polars group_by of 10M rows cost more).
    con.execute(
        """UPDATE series SET n_points = n_points + c.n, n_nonfinite = n_nonfinite + c.bad,
                  first_step = least(coalesce(first_step, c.lo), c.lo), last_step = greatest(coalesce(last_step, c.hi), c.hi)
           FROM (SELECT series_id, count(*) AS n, count(*) FILTER (WHERE NOT isfinite(value)) AS bad,
                        min(step) AS lo, max(step) AS hi FROM _new_points GROUP BY series_id) c
           WHERE series.series_id = c.series_id""")
    con.unregister("_new_points")
    return len(new), dropped


def insert_histograms(con: Any, source_id: int, frame: pl.DataFrame) -> None:
    """Histogram rows (a frame with series_id in place of tag)."""
    new = frame.with_columns(pl.lit(source_id, dtype=pl.Int32).alias("source_id"))
    con.register("_new_hist", scannable(new))
    con.execute(
        "INSERT INTO histograms (series_id, source_id, position, step, wall_time, bucket_limits, bucket_counts, "
        "min, max, num, sum, sum_squares, mean, std, zero_fraction) "
        "SELECT series_id, source_id, position, step, wall_time, bucket_limits, "
        "bucket_counts, min, max, num, sum, sum_squares, mean, std, zero_fraction FROM _new_hist")
    con.unregister("_new_hist")


def insert_texts(con: Any, run_id: str, source_id: int, frames: list[pl.DataFrame]) -> None:
    frames = [texts_frame(f) for f in frames if len(f)]
    if not frames:
        return
    new = pl.concat(frames).with_columns(pl.lit(run_id).alias("run_id"), pl.lit(source_id).alias("source_id"))
    con.register("_new_text", scannable(new))
    con.execute("INSERT INTO texts (run_id, source_id, position, tag, step, wall_time, text) "
                "SELECT run_id, source_id, position, tag, step, wall_time, text FROM _new_text")
    con.unregister("_new_text")


def _json_value(value: Any) -> tuple[str, float | None]:
    if isinstance(value, bool) or value is None:
        return json.dumps(value), None
    if isinstance(value, (int, float)):
        # json.dumps writes NaN/Infinity as Python's json does: readable back by json.loads. An integer past
        # float64 keeps its digits in the text and ±inf as its number.
        return json.dumps(value), as_float(value)
    try:
        return json.dumps(value), None
    except TypeError:
        return json.dumps(str(value)), None


def replace_configs(con: Any, run_id: str, source_id: int, keys: Iterable[tuple[str, str, Any]], *,
                    whole: bool) -> None:
    """Store config values, (document name, dotted key, value) each. A file read whole (`whole`: config.yaml,
    trainer_state.json) replaces its documents, so a key removed from the file goes too; an append-only log
    (a .wandb whose summary is updated as the run goes) replaces only the keys it sends again."""
    latest = {(name, key): _json_value(value) for name, key, value in keys}
    if not latest:
        return
    frame = pl.DataFrame(
        [(run_id, source_id, name, key, text, number) for (name, key), (text, number) in latest.items()],
        schema={"run_id": pl.Utf8, "source_id": pl.Int32, "name": pl.Utf8, "key": pl.Utf8, "value": pl.Utf8,
                "value_num": pl.Float64}, orient="row")
    con.register("_new_cfg", scannable(frame))
    same_key = "" if whole else " AND c.key = n.key"
    con.execute("DELETE FROM configs c USING _new_cfg n WHERE c.run_id = n.run_id AND c.source_id = n.source_id "
                "AND c.name = n.name" + same_key)
    con.execute("INSERT INTO configs (run_id, source_id, name, key, value, value_num) "
                "SELECT run_id, source_id, name, key, value, value_num FROM _new_cfg")
    con.unregister("_new_cfg")


def insert_issues(con: Any, run_id: str, issues: Iterable[tuple[str, Issue]]) -> None:
    """Rows of `ingest_issues` for (relative path, Issue) pairs, each once: a truncated tail met again by a
    later ingest is the same issue, not a new one."""
    issues = [(p, _storable_position(i)) for p, i in issues]
    if not issues:
        return
    frame = pl.DataFrame(
        {"path": [storable(p) for p, _ in issues], "position": [i.position for _, i in issues],
         "kind": [i.kind for _, i in issues], "detail": [storable(i.detail) for _, i in issues]},  # a detail may quote a name
        schema={"path": pl.Utf8, "position": pl.Int64, "kind": pl.Utf8, "detail": pl.Utf8},
    ).unique(maintain_order=True)
    con.register("_new_issues", scannable(frame))
    try:
        con.execute(
            "INSERT INTO ingest_issues (run_id, ingest_time, path, position, kind, detail) "
            "SELECT ?, now(), n.path, n.position, n.kind, n.detail FROM _new_issues n "
            "WHERE NOT EXISTS (SELECT 1 FROM ingest_issues i WHERE i.run_id = ? AND i.path = n.path "
            "AND i.position IS NOT DISTINCT FROM n.position AND i.kind = n.kind)",
            [run_id, run_id])
    finally:
        con.unregister("_new_issues")


def replace_issues(con: Any, run_id: str, kind: str, issues: Iterable[tuple[str, Issue]]) -> None:
    """The run's issues of `kind` become `issues`: for a kind settled anew over the whole run at each ingest."""
    con.execute("DELETE FROM ingest_issues WHERE run_id = ? AND kind = ?", [run_id, kind])
    insert_issues(con, run_id, issues)


def _storable_position(issue: Issue) -> Issue:
    """An issue whose position does not fit the BIGINT column (an offset of 2**63 in a hostile header) is stored
    with no position and the position in its detail: the problem is kept, not the write lost."""
    if issue.position is None or fits_int64(issue.position):
        return issue
    return Issue(None, issue.kind, f"{issue.detail} (at position {issue.position}, past what the store holds)")


def mark_deleted(con: Any, run_id: str, gone: list[str], present: list[str]) -> None:
    """Stored sources whose files are gone get a `deleted` issue (their stored data stays: it is evidence);
    one that is back loses it."""
    con.execute("DELETE FROM ingest_issues WHERE run_id = ? AND kind = 'deleted' AND list_contains(?, path)",
                [run_id, present])
    insert_issues(con, run_id, [(p, Issue(None, "deleted", "the file is gone since it was read; what was read "
                                          "from it is kept")) for p in gone])


def update_series_names(con: Any, rows: list[tuple[int, str, str, str | None, str | None, bool]]) -> None:
    """(series_id, name, role, split, layer, canonical) for series whose display name and role are settled."""
    if not rows:
        return
    frame = pl.DataFrame(rows, schema={"series_id": pl.Int64, "name": pl.Utf8, "role": pl.Utf8, "split": pl.Utf8,
                                       "layer": pl.Utf8, "canonical": pl.Boolean}, orient="row")
    con.register("_names", scannable(frame))
    con.execute("UPDATE series SET name = n.name, role = n.role, split = n.split, layer = n.layer, "
                "canonical = n.canonical FROM _names n WHERE series.series_id = n.series_id")
    con.unregister("_names")


# -- checkpoints and batches --------------------------------------------------------------------------------

def insert_checkpoint(con: Any, run_id: str, row: dict[str, Any], stats: pl.DataFrame, values: pl.DataFrame) -> int:
    """A checkpoint's row, its per-tensor statistics and its scalar values; its new id."""
    ckpt_id = next_id(con, "ckpt_id_seq")
    ids = {"run_id": pl.lit(run_id), "ckpt_id": pl.lit(ckpt_id, dtype=pl.Int32)}
    insert_frame(con, "checkpoints", pl.DataFrame([{"ckpt_id": ckpt_id, "run_id": run_id, **row}]))
    insert_frame(con, "tensor_stats", stats.with_columns(**ids))
    insert_frame(con, "checkpoint_values", values.with_columns(**ids))
    return ckpt_id


def insert_deltas(con: Any, run_id: str, ckpt_id: int, prev_ckpt_id: int, deltas: pl.DataFrame) -> None:
    insert_frame(con, "tensor_deltas", deltas.with_columns(
        run_id=pl.lit(run_id), ckpt_id=pl.lit(ckpt_id, dtype=pl.Int32), prev_ckpt_id=pl.lit(prev_ckpt_id, dtype=pl.Int32)))


def delete_checkpoint(con: Any, run_id: str, ckpt_id: int) -> None:
    """A checkpoint and everything derived from it (its deltas in either role), before it is stored anew."""
    for table in ("tensor_stats", "checkpoint_values", "tensor_deltas"):
        con.execute(f"DELETE FROM {table} WHERE run_id = ? AND ckpt_id = ?", [run_id, ckpt_id])
    con.execute("DELETE FROM tensor_deltas WHERE run_id = ? AND prev_ckpt_id = ?", [run_id, ckpt_id])
    con.execute("DELETE FROM checkpoints WHERE run_id = ? AND ckpt_id = ?", [run_id, ckpt_id])


def delete_deltas(con: Any, run_id: str, pairs: Iterable[tuple[int, int]]) -> None:
    """Deltas of (ckpt_id, prev_ckpt_id) pairs that are no longer consecutive."""
    for cur, prev in pairs:
        con.execute("DELETE FROM tensor_deltas WHERE run_id = ? AND ckpt_id = ? AND prev_ckpt_id = ?", [run_id, cur, prev])


def insert_batches(con: Any, run_id: str, reads: Sequence[tuple[dict[str, Any], pl.DataFrame]]) -> list[int]:
    """Many saved batches (their rows and per-tensor statistics) in two statements; their new ids, in order."""
    if not reads:
        return []
    ids = [int(i) for (i,) in con.execute("SELECT nextval('batch_id_seq') FROM range(?)", [len(reads)]).fetchall()]
    insert_frame(con, "batches", pl.DataFrame([{"batch_id": i, "run_id": run_id, **row} for i, (row, _) in
                                               zip(ids, reads)]))
    stats = [s.with_columns(run_id=pl.lit(run_id), batch_id=pl.lit(i, dtype=pl.Int32))
             for i, (_, s) in zip(ids, reads) if s.height]
    if stats:
        insert_frame(con, "batch_stats", pl.concat(stats, how="vertical_relaxed"))
    return ids


def delete_batches(con: Any, run_id: str, batch_ids: Sequence[int]) -> None:
    con.execute("DELETE FROM batch_stats WHERE run_id = ? AND list_contains(?, batch_id)", [run_id, list(batch_ids)])
    con.execute("DELETE FROM batches WHERE run_id = ? AND list_contains(?, batch_id)", [run_id, list(batch_ids)])


# -- analyses, findings, spikes, skipped (engine) -------------------------------------------------------

FINDING_COLUMNS = ("finding_id", "kind", "severity", "step", "step_end", "series", "summary", "evidence", "causes",
                   "checks", "sources", "event_id")


# The judgement of one analysis, stored once (schema.py's `analyses`): JSON-valued columns are lists or dicts.
VERDICT_COLUMNS = ("healthy", "verdict", "verdict_reason", "headline_id", "only_kinds", "skip_kinds", "read_problems",
                   "unknown_files")
_VERDICT_JSON = ("only_kinds", "skip_kinds", "read_problems", "unknown_files")


def insert_analysis(con: Any, run_id: str, *, engine_version: str, settings: dict[str, str],
                    verdict: dict[str, Any], findings: list[dict[str, Any]], spikes: list[dict[str, Any]],
                    skipped: list[tuple[str, str]], transaction: bool = True) -> int:
    """One analysis in one transaction (`transaction=False`: in the caller's, which fleet mode's writer holds
    for many runs at once): its row with the verdict (a dict with VERDICT_COLUMNS), findings (dicts
    with FINDING_COLUMNS; evidence, causes, checks and sources as plain values, stored as JSON), spikes (series,
    step, value, baseline, z, event_id) and skipped detectors (kind, reason). Returns the analysis id."""
    from ingest.jsonvalues import plain

    if transaction:
        con.execute("BEGIN TRANSACTION")
    try:
        aid = next_id(con, "analysis_id_seq")
        con.execute(
            f"INSERT INTO analyses (analysis_id, run_id, created, engine_version, settings, {', '.join(VERDICT_COLUMNS)}) "
            f"VALUES (?, ?, now(), ?, ?, {', '.join('?' * len(VERDICT_COLUMNS))})",
            [aid, run_id, engine_version, json.dumps(settings),
             *(json.dumps(plain(verdict[c])) if c in _VERDICT_JSON else verdict[c] for c in VERDICT_COLUMNS)])
        if findings:
            con.executemany(
                f"INSERT INTO findings (analysis_id, run_id, {', '.join(FINDING_COLUMNS)}) "
                f"VALUES ({', '.join('?' * (len(FINDING_COLUMNS) + 2))})",
                [[aid, run_id, *(_json_cell(c, f[c]) for c in FINDING_COLUMNS)] for f in findings])
        if spikes:
            con.executemany(
                "INSERT INTO spikes (analysis_id, run_id, series, step, value, baseline, z, event_id) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [[aid, run_id, s["series"], s["step"], s["value"], s["baseline"], s["z"], s["event_id"]]
                 for s in spikes])
        if skipped:
            con.executemany("INSERT INTO skipped (analysis_id, run_id, kind, reason) VALUES (?, ?, ?, ?)",
                            [[aid, run_id, kind, reason] for kind, reason in skipped])
        if transaction:
            con.execute("COMMIT")
    except BaseException:
        if transaction:
            con.execute("ROLLBACK")
        raise
    return aid


def _json_cell(column: str, value: Any) -> Any:
    return json.dumps(value) if column in ("evidence", "causes", "checks", "sources") else value


# -- replays ------------------------------------------------------------------------------------------------

def insert_replay(con, result: dict) -> int:
    """Store one `forensics replay` result (the documented JSON object); its replay_id."""
    import json

    from ingest.jsonvalues import plain  # JSON has no NaN/Inf: the strings the CLI's --json writes

    rid = con.execute("SELECT nextval('replay_id_seq')").fetchone()[0]
    hit = result.get("first_nonfinite") or {}
    fid = result.get("fidelity") or {}
    con.execute(
        """INSERT INTO replays (replay_id, run_id, created, step, bad_step, from_checkpoint, entry, device, faithful,
                                reproduced, status, phase, op, module, file, line, culprit_samples, result)
           VALUES (?, ?, now(), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        [rid, result["run_id"], result["step"], result.get("bad_step"), result.get("from_checkpoint"),
         result.get("entry"), result.get("device"), fid.get("faithful"), result.get("reproduced"),
         result.get("status"), hit.get("phase"), hit.get("op"), hit.get("module"), hit.get("file"), hit.get("line"),
         list(result.get("culprit_samples") or []), json.dumps(plain({**result, "replay_id": int(rid)}))])
    return int(rid)


# -- probes -------------------------------------------------------------------------------------------------

def insert_probe(con, result: dict) -> int:
    """Store one `forensics probe` result, a row per check; its probe_id."""
    import json

    from ingest.jsonvalues import plain

    pid = con.execute("SELECT nextval('probe_id_seq')").fetchone()[0]
    times = result.get("timings_s") or {}
    con.executemany(
        """INSERT INTO probes (probe_id, run_id, created, position, check_name, status, summary, names, explains,
                               evidence, from_checkpoint, entry, device, seconds)
           VALUES (?, ?, now(), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        [[pid, result["run_id"], i, c["name"], c["status"], c["summary"], list(c["names"]), list(c["explains"]),
          json.dumps(plain(c["evidence"])), json.dumps(plain(result.get("from_checkpoint"))), result.get("entry"),
          result.get("device"), times.get(c["name"])] for i, c in enumerate(result["checks"])])
    return int(pid)


# -- watch: alerts and run discovery -------------------------------------------------------------------------

WATCHED_RUN_COLUMNS = ("run_id", "path", "watch_root", "kind", "reason", "first_seen", "last_checked", "last_growth",
                       "fingerprint", "n_files", "n_bytes", "state", "detail")
ALERT_COLUMNS = ("run_id", "run_name", "origin", "kind", "severity", "step", "analysis_id", "message", "detail")


def upsert_watched_runs(con, rows: list[dict]) -> None:
    """Insert or update `watched_runs` rows (dicts keyed by WATCHED_RUN_COLUMNS; first_seen is kept)."""
    if not rows:
        return
    import polars as pl

    frame = pl.DataFrame([{c: _text(r.get(c)) for c in WATCHED_RUN_COLUMNS} for r in rows], schema={
        "run_id": pl.Utf8, "path": pl.Utf8, "watch_root": pl.Utf8, "kind": pl.Utf8, "reason": pl.Utf8,
        "first_seen": pl.Datetime, "last_checked": pl.Datetime, "last_growth": pl.Float64, "fingerprint": pl.Utf8,
        "n_files": pl.Int64, "n_bytes": pl.Int64, "state": pl.Utf8, "detail": pl.Utf8})
    cols = ", ".join(WATCHED_RUN_COLUMNS)
    updates = ", ".join(f"{c} = excluded.{c}" for c in WATCHED_RUN_COLUMNS if c not in ("run_id", "first_seen"))
    con.register("_watched", scannable(frame))
    con.execute(f"INSERT INTO watched_runs ({cols}) SELECT {cols} FROM _watched "
                f"ON CONFLICT (run_id) DO UPDATE SET {updates}")
    con.unregister("_watched")


def _text(value: Any) -> Any:
    """A string as the store can hold it: a name that is not UTF-8 with its bad bytes as `\\xNN`."""
    return storable(value) if isinstance(value, str) else value


def insert_alerts(con, rows: list[dict]) -> list[int]:
    """Append alerts (dicts keyed by ALERT_COLUMNS), stamped now; their ids, in order."""
    ids = []
    for r in rows:
        ids.append(con.execute(
            f"INSERT INTO alerts (alert_id, created, {', '.join(ALERT_COLUMNS)}) "
            f"VALUES (nextval('alert_id_seq'), now(), {', '.join('?' for _ in ALERT_COLUMNS)}) RETURNING alert_id",
            [_text(r.get(c)) for c in ALERT_COLUMNS]).fetchone()[0])
    return ids


@functools.cache
def _key_columns() -> dict[str, tuple[str, str]]:
    """Id column -> (its sequence, the table it is the primary key of), read off ingest.schema (once: fleet mode's
    writer appends one run after another)."""
    import re

    from ingest.schema import SEQUENCES, TABLES

    out = {}
    for seq in SEQUENCES:
        key = seq.removesuffix("_seq")
        owner = next((t for t, ddl in TABLES.items() if re.search(rf"\b{key} INTEGER PRIMARY KEY", ddl)), None)
        if owner is not None:
            out[key] = (seq, owner)
    return out


def append_run_tables(con, tables: dict) -> None:
    """Append one run's rows, exported from a private store by `queries.export_run_tables`, to this store.

    Fleet mode's single writer (docs/watch.md): a worker ingests a run into its own database and hands back
    every table as Arrow; here each id the worker drew from a sequence (source_id, series_id, ckpt_id,
    batch_id) is given a fresh id from this store's sequence, in the worker's order, and every column holding
    that id (`series_id`, `prev_ckpt_id`, ...) is rewritten in the bulk INSERT ... SELECT (an offset where both
    numberings are contiguous, as they are with one writer; a lookup otherwise). The rows go from
    Arrow to DuckDB untouched otherwise (a NaN keeps its bits). Generic over ingest.schema.TABLES: a table
    added there is copied too. The caller holds the transaction.
    """
    import pyarrow as pa

    # key -> SQL that turns the worker's id in column {c} into this store's: an offset when both id ranges are
    # contiguous (a fresh private store numbers from 1, this store's sequence hands out a run), else a lookup.
    remap: dict[str, str] = {}
    views: list[str] = []
    for key, (seq, owner) in _key_columns().items():
        if owner not in tables or tables[owner].num_rows == 0:
            continue
        old = sorted(tables[owner].column(key).to_pylist())
        new = sorted(r[0] for r in con.execute(f"SELECT nextval('{seq}') FROM range(?)", [len(old)]).fetchall())
        if old == list(range(old[0], old[0] + len(old))) and new == list(range(new[0], new[0] + len(new))):
            remap[key] = f"({{c}} + {new[0] - old[0]})"
        else:
            view = f"_map_{key}"
            con.register(view, pa.table({"old": pa.array(old, pa.int64()), "new": pa.array(new, pa.int64())}))
            views.append(view)
            remap[key] = f"(SELECT m.new FROM {view} m WHERE m.old = {{c}})"
    try:
        for name, table in tables.items():
            if table.num_rows == 0:
                continue
            select = []
            for c in table.column_names:
                key = next((k for k in remap if c == k or c.endswith("_" + k)), None)
                select.append(remap[key].format(c=f't."{c}"') if key else f't."{c}"')
            cols = ", ".join(f'"{c}"' for c in table.column_names)
            con.register("_copied", table)
            con.execute(f"INSERT INTO {name} ({cols}) SELECT {', '.join(select)} FROM _copied t")
            con.unregister("_copied")
    finally:
        for view in views:
            con.unregister(view)
