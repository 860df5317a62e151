"""The result of one `forensics replay`: what the CLI prints, `--json` writes, the store keeps and the app shows.

One dataclass, read by attribute (forensics.usercode.replay.report renders it); `to_json()` is the documented JSON object
(docs/replay.md), with NaN/Inf as the strings the CLI's --json writes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass
class ReplayResult:
    run: str
    run_id: str
    step: int                                   # the step asked for (or the default: the first non-finite one)
    command: str                                # the command that made it (`~` for the home directory)
    from_checkpoint: str
    checkpoint_step: int
    entry: str
    config: str                                 # where the config came from: config.yaml, store, none
    device: str
    determinism: dict[str, Any]
    restored: list[str]
    notes: list[str]
    replayed_steps: list[int] | None = None      # [first, last]
    fidelity: dict[str, Any] | None = None
    reproduced: bool = False
    status: str | None = None
    bad_step: int | None = None                  # the first replayed step with a non-finite value
    rerun: dict[str, list] | None = None         # the bad step twice from the same state: loss, grad_norm, phase
    first_nonfinite: dict[str, Any] | None = None
    culprit_samples: list[int] = field(default_factory=list)
    culprits: dict[str, Any] | None = None
    counterfactuals: list[dict[str, Any]] = field(default_factory=list)
    likely_fix: dict[str, Any] | None = None     # the change that kept the failing window finite: change, evidence
    spike: dict[str, Any] | None = None          # a finite step: the samples and layers that drive it
    timings_s: dict[str, float] = field(default_factory=dict)
    replay_id: int | None = None

    @property
    def diagnosed(self) -> bool:
        return self.first_nonfinite is not None

    @property
    def phase(self) -> str | None:
        """Where the first non-finite value appeared (forward, backward, optimizer), as located."""
        return (self.first_nonfinite or {}).get("phase")

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ReplayResult:
        """A stored result (the `replays.result` column) back as a ReplayResult; keys it does not know (from
        another version) are left out, ones it lacks take their defaults. Non-finite numbers stay the strings
        JSON holds them as ("nan", "inf"), which the report prints as such."""
        names = {f.name for f in fields(cls)}
        known = {k: v for k, v in doc.items() if k in names}
        for name, empty in (("run", "?"), ("run_id", ""), ("step", None), ("command", ""), ("from_checkpoint", "?"),
                            ("checkpoint_step", None), ("entry", "?"), ("config", "none"), ("device", "?"),
                            ("determinism", {}), ("restored", []), ("notes", [])):
            known.setdefault(name, empty)
        return cls(**known)

    def to_json(self) -> dict[str, Any]:
        from ingest.jsonvalues import plain

        return plain({**asdict(self), "diagnosed": self.diagnosed})
