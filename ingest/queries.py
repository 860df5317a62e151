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
