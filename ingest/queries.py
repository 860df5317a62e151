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

def replays(con, run_id: str):
    """Every stored replay of a run, newest first (an empty frame on a store from before the replays table)."""
    import polars as pl

    cols = ("replay_id, run_id, created, step, bad_step, from_checkpoint, entry, device, faithful, reproduced, "
            "status, phase, op, module, file, line, culprit_samples, result")
    exists = con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'replays'").fetchall()[0][0]
    if not exists:
        return pl.DataFrame()
    rel = con.sql(f"SELECT {cols} FROM replays WHERE run_id = $run_id ORDER BY replay_id DESC", params={"run_id": run_id})
    return pl.from_arrow(rel.to_arrow_table())


# -- watch -------------------------------------------------------------------------------------------------
