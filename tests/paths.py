"""Where the shared real logs are: `../shared` beside the checkout (as CI has it), or $FORENSICS_SHARED."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("FORENSICS_SHARED") or REPO.parent / "shared")
REAL_RUNS = SHARED / "real_runs"
REAL_RUNS_TEST = SHARED / "real_runs_test"
REAL_RUNS_3 = SHARED / "real_runs_3"
