"""Every read of the store that a command or page needs: the CLI, the app, replay and watch query here.

Functions take an open (read-only) connection and return polars frames or plain values; they write nothing.
Sections by consumer: new features add their queries to their own section here, never beside the feature.
"""

from __future__ import annotations

# -- runs and sources (CLI: runs, ingest reports) ------------------------------------------------------------

# -- checkpoints (CLI: checkpoints) ----------------------------------------------------------------------------

# -- analysis (engine input, analyze report) -------------------------------------------------------------------

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
