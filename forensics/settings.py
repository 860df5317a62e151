"""Detector settings from the command line: `--only`, `--skip` and `--set detector.field=value`, parsed strictly.

An unknown detector or field is an error listing the valid names, and a value keeps its field's type
(nanoGPT's configurator is this strict). The CLI builds detector instances here and hands them to the engine.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from forensics.detectors import ALL
from forensics.detectors.base import Detector
from ingest.errors import ForensicsError


def build_detectors(only: Sequence[str] = (), skip: Sequence[str] = (),
                    settings: dict[str, str] | None = None) -> list[Detector]:
    """Detector instances for this analysis. `only`/`skip` take kinds; `settings` maps "detector.field" to
    a string value parsed to the field's type. Unknown kinds, detectors or fields raise ForensicsError
    listing the valid names."""
    by_name = {c.kind: c for c in ALL}
    valid = ", ".join(sorted(by_name))
    for k in [*only, *skip]:
        if k.replace("-", "_") not in by_name:
            raise ForensicsError(f"unknown detector {k!r}; detectors: {valid}")
    chosen = [c for c in ALL if (not only or c.kind in {k.replace("-", "_") for k in only})
              and c.kind not in {k.replace("-", "_") for k in skip}]
    fields: dict[str, dict[str, Any]] = {c.kind: {} for c in ALL}
    for key, raw in (settings or {}).items():
        det, _, fname = key.partition(".")
        det = det.replace("-", "_")
        if det not in by_name:
            raise ForensicsError(f"--set {key}: unknown detector {det!r}; detectors: {valid}")
        known = {f.name: f for f in dataclasses.fields(by_name[det])}
        if fname not in known:
            raise ForensicsError(f"--set {key}: {det} has no field {fname!r}; fields: {', '.join(known) or 'none'}")
        fields[det][fname] = _parse(raw, known[fname].type, key)
    return [c(**fields[c.kind]) for c in chosen]


def _parse(raw: str, typ: Any, key: str) -> Any:
    name = typ if isinstance(typ, str) else getattr(typ, "__name__", str(typ))
    try:
        if name == "bool":
            if raw.lower() not in ("true", "false", "1", "0"):
                raise ValueError(raw)
            return raw.lower() in ("true", "1")
        if name == "int":
            return int(raw)
        if name == "float":
            return float(raw)
    except ValueError:
        raise ForensicsError(f"--set {key}={raw}: expected a {name}") from None
    return raw
