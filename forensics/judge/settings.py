"""Detector settings: which detectors run and with what thresholds, as a typed `Selection`.

`selection(only, skip, settings)` parses the command line's words (`--only`, `--skip`, `--set detector.field=value`)
strictly, once: an unknown detector or field, or a detector that would not run, is a one-line error listing the valid
names, and a value keeps its field's type (nanoGPT's configurator is this strict). What a spike is (`--set spike.z=…`)
is a setting of its own, given to every detector that reads spikes and to the engine's spike list. Library functions (`forensics.services.analysis.analyze`, the fleet, watch)
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
from forensics.judge.stats import SpikeRule
from ingest.errors import ForensicsError

SPIKE = "spike"  # `--set spike.z=…`: what a spike is, for every reader of spikes (loss_spike, bad_batch, the spike list)


@dataclass(frozen=True)
class Selection:
    """The detectors an analysis runs: `only` (empty: all), `skip`, thresholds {kind: {field: value}} with each value
    of its field's type, and `spike`, the one spike rule every reader of spikes is given. Kinds are catalog ids."""

    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    thresholds: dict[str, dict[str, Any]] = field(default_factory=dict)
    long_series: int = LONG_SERIES  # series of more points are read reduced (forensics.judge.run)
    spike: SpikeRule = SpikeRule()

    @property
    def restricted(self) -> bool:
        """`--only`/`--skip` left some detectors out."""
        return bool(self.only or self.skip)

    def detectors(self) -> list[Detector]:
        """The detector instances, each with its thresholds, this analysis's spike rule where it reads spikes, and
        the detectors whose rules it reads (`reads`) as this analysis sets them."""
        return [self._built(c) for c in _chosen(self.only, self.skip)]

    def _built(self, cls: type) -> Detector:
        by_kind = {c.kind: c for c in ALL}
        return cls(**self.thresholds.get(cls.kind, {}), **({SPIKE: self.spike} if _reads_spikes(cls) else {}),
                   **{kind: self._built(by_kind[kind]) for kind in reads(cls)})

    def as_json(self) -> dict[str, Any]:
        """The settings as stored with an analysis: {"loss-spike.min-undo": 0.5, "spike.z": 6.0}."""
        out = {f"{kind.replace('_', '-')}.{name}": value for kind, fields in self.thresholds.items()
               for name, value in fields.items()}
        default = SpikeRule()
        out.update({f"{SPIKE}.{f.name}": getattr(self.spike, f.name) for f in dataclasses.fields(SpikeRule)
                    if getattr(self.spike, f.name) != getattr(default, f.name)})
        return out


def selection(only: Sequence[str] = (), skip: Sequence[str] = (), settings: dict[str, str] | None = None) -> Selection:
    """The typed Selection for `--only`, `--skip` and `--set` words; raises ForensicsError (one line) naming the valid
    kinds or fields for an unknown one, a detector that would not run, or the expected type for a value that does
    not parse."""
    only, skip = tuple(_kinds(only)), tuple(_kinds(skip))
    running = {c.kind for c in _chosen(only, skip)}
    by_kind = {c.kind: c for c in ALL}
    stack = list(running)
    while stack:  # a detector whose rules a running one reads is read too, run or not
        for kind in reads(by_kind[stack.pop()]) - running:
            running.add(kind)
            stack.append(kind)
    by_name = {c.kind: c for c in ALL}
    valid = ", ".join(sorted(by_name))
    thresholds: dict[str, dict[str, Any]] = {}
    spike: dict[str, Any] = {}
    for key, raw in (settings or {}).items():
        det, _, fname = key.partition(".")
        det = det.replace("-", "_")
        if det == SPIKE:
            known = {f.name: f for f in dataclasses.fields(SpikeRule)}
            if fname not in known:
                raise ForensicsError(f"--set {key}: the spike rule has no field {fname!r}; fields: {', '.join(known)}")
            spike[fname] = _parse(raw, known[fname].type, key)
            continue
        if det not in by_name:
            raise ForensicsError(f"--set {key}: unknown detector {det!r}; detectors: {valid}, or {SPIKE}")
        known = settable(by_name[det])
        if fname not in known:
            if fname in {f.name for f in dataclasses.fields(SpikeRule)} and _reads_spikes(by_name[det]):
                raise ForensicsError(f"--set {key}: the spike rule is a setting of its own, read by every detector "
                                     f"that reads spikes: --set {SPIKE}.{fname}={raw}")
            raise ForensicsError(f"--set {key}: {det} has no field {fname!r}; fields: {', '.join(known) or 'none'}")
        if det not in running:
            raise ForensicsError(f"--set {key}: {det} does not run in this analysis (--only/--skip), so nothing "
                                 f"would read it")
        thresholds.setdefault(det, {})[fname] = _parse(raw, known[fname].type, key)
    return Selection(only, skip, thresholds, spike=SpikeRule(**spike))


def build_detectors(only: Sequence[str] = (), skip: Sequence[str] = (),
                    settings: dict[str, str] | None = None) -> list[Detector]:
    """Detector instances for these `--only`/`--skip`/`--set` words (`selection(...).detectors()`)."""
    return selection(only, skip, settings).detectors()


def settable(cls: type) -> dict[str, dataclasses.Field]:
    """A detector's fields `--set` can give: its scalar thresholds (the spike rule is set as `spike.FIELD`, and a
    detector it reads as that detector's own fields)."""
    return {f.name: f for f in dataclasses.fields(cls) if f.name != SPIKE and f.name not in reads(cls)}


def reads(cls: type) -> set[str]:
    """The kinds of the other detectors whose rules `cls` reads: its fields named after them (plateau's `flat_loss`),
    each given that detector with this analysis's `--set` values, so a threshold has one setting wherever it is
    read."""
    kinds = {c.kind for c in ALL} - {cls.kind}
    return {f.name for f in dataclasses.fields(cls) if f.name in kinds}


def _reads_spikes(cls: type) -> bool:
    return any(f.name == SPIKE for f in dataclasses.fields(cls))


def _kinds(words: Sequence[str]) -> list[str]:
    kinds = {c.kind for c in ALL}
    out = [w.replace("-", "_") for w in words]
    for w, k in zip(words, out):
        if k not in kinds:
            raise ForensicsError(f"unknown detector {w!r}; detectors: {', '.join(sorted(kinds))}")
    return out


def _chosen(only: Sequence[str], skip: Sequence[str]) -> list[type]:
    return [c for c in ALL if (not only or c.kind in only) and c.kind not in skip]


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
