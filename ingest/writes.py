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

def insert_replay(con, result: dict) -> int:
    """Store one `forensics replay` result (the documented JSON object); its replay_id."""
    import json
    import math

    def plain(v):  # JSON has no NaN/Inf: write them as strings, as the CLI's --json does
        if isinstance(v, float) and not math.isfinite(v):
            return str(v)
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        return v

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


# -- watch: alerts and run discovery -------------------------------------------------------------------------
