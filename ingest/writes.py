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
