"""Every read of the store that a command or page needs: the CLI, the app, replay and watch query here.

Functions take an open (read-only) connection and return polars frames or plain values; they write nothing.
Sections by consumer: new features add their queries to their own section here, never beside the feature.
"""

from __future__ import annotations

# -- runs and sources (CLI: runs, ingest reports) ------------------------------------------------------------

# -- checkpoints (CLI: checkpoints) ----------------------------------------------------------------------------

# -- analysis (engine input, analyze report) -------------------------------------------------------------------

# -- app ---------------------------------------------------------------------------------------------------

# -- replay ------------------------------------------------------------------------------------------------

# -- watch -------------------------------------------------------------------------------------------------

# Tables a fleet worker hands back: everything ingest writes. The engine's tables are written by the driver
# (store_analysis) and the watch's own by the watch; meta is the store's.
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


def analysed_run_ids(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT DISTINCT run_id FROM analyses").fetchall()}


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
