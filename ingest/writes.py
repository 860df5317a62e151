"""Every write to the store, beside the schema it writes (ingest/schema.py).

Each INSERT names its columns, so a reordered table in schema.py cannot shift values silently. Callers hand
over frames or rows; this module owns the SQL. Sections by feature: new features add their writes to their
own section here, never beside the feature.
"""

from __future__ import annotations

# -- runs, sources and points (ingest) --------------------------------------------------------------------

# -- checkpoints and batches --------------------------------------------------------------------------------

# -- analyses, findings, spikes, skipped (engine) -------------------------------------------------------

# -- replays ------------------------------------------------------------------------------------------------

# -- watch: alerts and run discovery -------------------------------------------------------------------------

WATCHED_RUN_COLUMNS = ("run_id", "path", "watch_root", "kind", "reason", "first_seen", "last_checked", "last_growth",
                       "fingerprint", "n_files", "n_bytes", "state", "detail")
ALERT_COLUMNS = ("run_id", "run_name", "origin", "kind", "severity", "step", "analysis_id", "message", "detail")


def upsert_watched_runs(con, rows: list[dict]) -> None:
    """Insert or update `watched_runs` rows (dicts keyed by WATCHED_RUN_COLUMNS; first_seen is kept)."""
    if not rows:
        return
    import polars as pl

    frame = pl.DataFrame([{c: r.get(c) for c in WATCHED_RUN_COLUMNS} for r in rows], schema={
        "run_id": pl.Utf8, "path": pl.Utf8, "watch_root": pl.Utf8, "kind": pl.Utf8, "reason": pl.Utf8,
        "first_seen": pl.Datetime, "last_checked": pl.Datetime, "last_growth": pl.Float64, "fingerprint": pl.Utf8,
        "n_files": pl.Int64, "n_bytes": pl.Int64, "state": pl.Utf8, "detail": pl.Utf8})
    cols = ", ".join(WATCHED_RUN_COLUMNS)
    updates = ", ".join(f"{c} = excluded.{c}" for c in WATCHED_RUN_COLUMNS if c not in ("run_id", "first_seen"))
    con.register("_watched", frame)
    con.execute(f"INSERT INTO watched_runs ({cols}) SELECT {cols} FROM _watched "
                f"ON CONFLICT (run_id) DO UPDATE SET {updates}")
    con.unregister("_watched")


def insert_alerts(con, rows: list[dict]) -> list[int]:
    """Append alerts (dicts keyed by ALERT_COLUMNS), stamped now; their ids, in order."""
    ids = []
    for r in rows:
        ids.append(con.execute(
            f"INSERT INTO alerts (alert_id, created, {', '.join(ALERT_COLUMNS)}) "
            f"VALUES (nextval('alert_id_seq'), now(), {', '.join('?' for _ in ALERT_COLUMNS)}) RETURNING alert_id",
            [r.get(c) for c in ALERT_COLUMNS]).fetchone()[0])
    return ids


def _key_columns() -> dict[str, tuple[str, str]]:
    """Id column -> (its sequence, the table it is the primary key of), read off ingest.schema."""
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
