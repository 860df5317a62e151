"""Numbers as a person reads them in a finding's summary: `×1.4e11`, `×8.7`, `550 times`, `1 point`, `3 points`;
and paths below the home folder as `~/...`, as the README shows them.

Python's `:.2g` writes `5.5e+02` and `:.2f` writes `139003454611.55`; neither is how anyone says a ratio. Summaries
keep their full precision in the evidence; these are for the sentence.
"""

from __future__ import annotations

import math
import os
import shlex
from pathlib import Path


def sig(x: float, digits: int = 2) -> str:
    """`x` to `digits` significant figures, plainly where that is short (`8.7`, `550`, `0.052`), else with a
    compact exponent (`1.4e11`, `3e-07` -> `3e-7`); `inf`, `nan` as such."""
    if not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if x == 0:
        return "0"
    if 1e-3 <= abs(x) < 10 ** max(digits, 4):
        rounded = float(f"{x:.{digits}g}")
        return f"{rounded:.0f}" if rounded.is_integer() else f"{rounded:g}"
    mantissa, exponent = f"{x:.{digits - 1}e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def ratio(x: float) -> str:
    """A growth factor: `×1.4e11`, `×11`, `×8.7`, `×0.52`."""
    return "×" + sig(x)


def times(x: float) -> str:
    """A multiple in prose, before a quantity: `550 times`, `1.4e11 times`."""
    return f"{sig(x)} times"


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`1 point`, `3 points`, `1,204 points`; `plural` for irregular nouns."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def size(n: int | None, unknown: str = "-") -> str:
    """Bytes as `512 B`, `1.2 MB`, `2.1 GB` (decimal units); `unknown` when the size is not known."""
    if n is None:
        return unknown
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} TB"


def ints(values: list[int], shown: int = 8) -> str:
    """The first `shown` of `values`, then how many there are in all: `3, 7, 11, … (40 in all)`."""
    more = f", … ({len(values)} in all)" if len(values) > shown else ""
    return ", ".join(str(v) for v in values[:shown]) + more


def shown(value: object, items: int = 12, total: int | None = None) -> str:
    """An evidence value as a person reads it, never a Python repr: `none` (not `None`), `yes`/`no`, floats to
    four figures, lists as `5.99, 6.01, … (40 in all)` (not `['5.99', ...]`), an empty list as `none`. `total`: how
    many the list stands for when it holds only the first of them."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return sig(value, 4)
    if isinstance(value, (list, tuple)):
        if not value:
            return "none"
        total = max(total or 0, len(value))
        more = f", … ({total} in all)" if total > min(len(value), items) else ""
        return ", ".join(shown(v, items) for v in value[:items]) + more
    if isinstance(value, dict):
        return ", ".join(f"{k} {shown(v, items)}" for k, v in value.items()) or "none"
    return str(value) if str(value) else "(empty)"


def evidence(ev: dict[str, object]) -> list[tuple[str, str]]:
    """A finding's evidence as (key, shown value): a list cut short in the evidence (`tensors`, the first 20) is
    shown with the count of its `n_` key (`n_tensors`), so it is never labelled as all of them."""
    return [(k, shown(v, total=ev.get(f"n_{k}") if isinstance(ev.get(f"n_{k}"), int) else None))
            for k, v in ev.items()]


def home(path: str | os.PathLike) -> str:
    """`~/.cache/run-forensics/forensics.duckdb` for a path below the user's home folder, else the path as given.
    JSON output keeps full paths; this is for lines a person reads."""
    text = str(path)
    try:
        rest = Path(text).relative_to(Path.home())
    except ValueError:
        return text
    return "~" if str(rest) == "." else f"~/{rest}"


def shell_path(path: str | os.PathLike) -> str:
    """A path for a command line a user copies: quoted where needed, `~/` left outside the quotes so the shell
    still expands it."""
    text = home(path)
    if text.startswith("~/"):
        return "~/" + shlex.quote(text[2:])
    return shlex.quote(text)
