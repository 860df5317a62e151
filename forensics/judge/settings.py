"""Detector settings: which detectors run and with what thresholds, as a typed `Selection`.

`selection(only, skip, settings)` parses the command line's words (`--only`, `--skip`, `--set detector.field=value`)
strictly, once: an unknown detector or field is an error listing the valid names, and a value keeps its field's
type (nanoGPT's configurator is this strict). Library functions (`forensics.services.analysis.analyze`, the fleet, watch)
take the `Selection`, never the strings; `Selection.detectors()` builds the instances the engine runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from dataclasses import dataclass, field

from forensics.judge.detectors import ALL
from forensics.judge.detectors.base import Detector
from forensics.judge.run import LONG_SERIES
from ingest.errors import ForensicsError



@dataclass(frozen=True)
class Selection:
    """The detectors an analysis runs: `only` (empty: all), `skip`, and thresholds {kind: {field: value}} with
    each value of its field's type. Kinds are catalog ids (`loss_spike`)."""

    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    thresholds: dict[str, dict[str, Any]] = field(default_factory=dict)
    long_series: int = LONG_SERIES  # series of more points are read reduced (forensics.judge.run)

    @property
    def restricted(self) -> bool:
        """`--only`/`--skip` left some detectors out."""
        return bool(self.only or self.skip)

    def detectors(self) -> list[Detector]:
        return [c(**self.thresholds.get(c.kind, {})) for c in ALL
                if (not self.only or c.kind in self.only) and c.kind not in self.skip]

    def as_json(self) -> dict[str, Any]:
        """The thresholds as stored with an analysis: {"loss-spike.z": 6.0}."""
        return {f"{kind.replace('_', '-')}.{name}": value for kind, fields in self.thresholds.items()
                for name, value in fields.items()}


def selection(only: Sequence[str] = (), skip: Sequence[str] = (), settings: dict[str, str] | None = None) -> Selection:
    """The typed Selection for `--only`, `--skip` and `--set` words; raises ForensicsError naming the valid kinds
    or fields for an unknown one, or the expected type for a value that does not parse."""
    build_detectors(only, skip, settings)  # the strict checks
    by_name = {c.kind: c for c in ALL}
    thresholds: dict[str, dict[str, Any]] = {}
    for key, raw in (settings or {}).items():
        det, _, fname = key.partition(".")
        det = det.replace("-", "_")
        known = {f.name: f for f in dataclasses.fields(by_name[det])}
        thresholds.setdefault(det, {})[fname] = _parse(raw, known[fname].type, key)
    return Selection(tuple(k.replace("-", "_") for k in only), tuple(k.replace("-", "_") for k in skip), thresholds)


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
