"""Values as JSON can hold them, for the store's JSON columns and every `--json`: the one rule, shared by ingest,
the engine and replay."""

from __future__ import annotations

import math
from typing import Any


def plain(value: Any) -> Any:
    """A JSON-safe copy: numpy scalars to Python, non-finite floats to the strings "nan", "inf", "-inf"
    (JSON has no NaN, and a NaN is evidence that must survive)."""
    if hasattr(value, "item") and not isinstance(value, (list, dict, str)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value
