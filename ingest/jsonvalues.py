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


# What a store column holds: BIGINT steps and positions, DOUBLE values. A reader meets numbers past both (a step
# of 2**64, an integer grad norm of 10**400, an offset of 2**63 in a hostile header); these name and convert them.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class LongInteger(float):
    """An integer literal with more digits than Python converts to an int (`sys.get_int_max_str_digits()`,
    4,300 by default, a guard against quadratic conversion): kept as the float it rounds to (±inf past 1e308),
    with its number of digits, so a reader can say what it was."""

    digits: int = 0


def parse_int(literal: str) -> int | float:
    """`parse_int` for `json.loads` / `json.JSONDecoder`: an int, or a `LongInteger` where `int()` refuses."""
    try:
        return int(literal)
    except ValueError:  # past the digit limit
        number = LongInteger(literal)
        number.digits = len(literal.lstrip("-"))
        return number


def fits_int64(value: int) -> bool:
    return INT64_MIN <= value <= INT64_MAX


def as_float(value: int | float) -> float:
    """The float a number rounds to, ±inf for an integer past float64's range (where `float()` raises)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def describe_number(value: int | float) -> str:
    """A number for a message: itself when short, else its sign and its count of digits."""
    if isinstance(value, LongInteger):
        return f"an integer of {value.digits:,} digits"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return f"an integer of {math.floor(math.log10(abs(value))) + 1:,} digits"
    return repr(value)


def int64_or_none(value: int) -> int | None:
    """A step or position as a BIGINT column holds it: itself, or None past 64 bits (a file named `step_2**64`:
    its step unknown, the name still says it)."""
    return value if fits_int64(value) else None
