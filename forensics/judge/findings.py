"""What the engine claims: findings with their evidence, spikes, and detectors that could not run (skips)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from forensics.judge import catalog
from ingest.jsonvalues import plain

SEVERITIES = ("critical", "warning", "info")
RANK = {s: i for i, s in enumerate(SEVERITIES)}  # lower is more severe


@dataclass(frozen=True)
class Finding:
    """One claim about a run: a catalog `kind` at a step (range), with the numbers that made it fire.

    `step`/`step_end` are logged steps (or None for run-wide findings); `series` the series name it was
    read from; `evidence` a flat dict of plain values; `sources` the rows used; `event` the id shared by
    findings of one event (set by the engine, DECISIONS.md §8).
    """

    kind: str
    severity: str
    step: int | None
    step_end: int | None
    series: str | None
    summary: str
    evidence: dict[str, Any]
    causes: tuple[str, ...]
    checks: tuple[str, ...]
    sources: tuple[dict[str, Any], ...] = ()
    event: int | None = None
    # `step` and `step_end` in the writer's words where the series' steps are line ordinals (Run.writer_positions)
    at: str | None = None
    at_end: str | None = None

    @classmethod
    def of(cls, detector: Any, *, severity: str, summary: str, step: int | None = None,
           step_end: int | None = None, series: str | None = None, evidence: dict[str, Any] | None = None,
           sources: tuple[dict[str, Any], ...] = ()) -> Finding:
        """A finding of `detector`'s kind, with causes and checks from the catalog."""
        if severity not in RANK:
            raise ValueError(f"severity {severity!r} is not one of {SEVERITIES}")
        e = catalog.entry(detector.kind)
        return cls(detector.kind, severity, None if step is None else int(step),
                   None if step_end is None else int(step_end), series, summary, plain(evidence or {}),
                   e.causes, e.checks, tuple(plain(s) for s in sources))

    def with_event(self, event: int) -> Finding:
        return replace(self, event=event)

    def with_reduction(self, reduced: dict[str, int]) -> Finding:
        """The finding of a series read reduced (`Run.reduced`: {"n_points", "buckets"}), saying so in its
        evidence and summary: its statistics saw M4 buckets, not every point."""
        ev = {**self.evidence, "series_points": reduced["n_points"], "reduced_to_buckets": reduced["buckets"]}
        return replace(self, evidence=ev, summary=(f"{self.summary} (computed on {reduced['buckets']:,} M4 buckets "
                                                   f"of the series' {reduced['n_points']:,} points)"))

    def with_positions(self, positions: dict[int, str]) -> Finding:
        """The finding with `at`/`at_end` from {step: the writer's words for it}."""
        at = positions.get(self.step) if self.step is not None else None
        at_end = positions.get(self.step_end) if self.step_end is not None else None
        return replace(self, at=at, at_end=at_end) if at or at_end else self

    def sort_key(self) -> tuple:
        """By step (run-wide findings last), then severity, then kind."""
        return (self.step is None, self.step if self.step is not None else 0, RANK[self.severity], self.kind)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "severity": self.severity, "step": self.step, "step_end": self.step_end,
                "series": self.series, "summary": self.summary, "evidence": self.evidence,
                "causes": list(self.causes), "checks": list(self.checks), "event": self.event,
                **({"at": self.at, "at_end": self.at_end} if self.at or self.at_end else {})}


@dataclass(frozen=True)
class Spike:
    """A spike timestep of one series: value, local baseline (trailing median) and robust z."""

    series: str
    step: int
    value: float
    baseline: float
    z: float
    event: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return plain({"series": self.series, "step": self.step, "value": self.value, "baseline": self.baseline,
                      "z": self.z, "event": self.event})


@dataclass(frozen=True)
class Skip:
    """A detector that could not run, and why: "could not check" must never look like "nothing found"."""

    kind: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "reason": self.reason}


@dataclass
class Analysis:
    """Everything one analysis of a run produced, in the order a report shows it."""

    run: str
    run_id: str
    findings: list[Finding] = field(default_factory=list)
    spikes: list[Spike] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    nonfinite: list[dict[str, Any]] = field(default_factory=list)  # first non-finite step per series
    replay_from: dict[str, Any] | None = None  # last finite checkpoint and batch before the NaN onset
    probe_command: str | None = None  # `forensics probe RUN_DIR`, when the run has an entry point and a saved batch
    probed: frozenset[str] = frozenset()  # with probe_command: the kinds of this run's findings a probe explains
    checked: dict[str, Any] = field(default_factory=dict)  # series present, detectors run
    analysis_id: int | None = None
    # Set by `forensics.services.analysis.analyze` (forensics/judge/verdict.py): failed, suspicious, inconclusive or healthy.
    verdict: str | None = None
    # The verdict is inconclusive only for want of points: a run still being written will decide (watch waits).
    short_log: bool = False
    verdict_reason: str = ""
    read_problems: list[dict[str, Any]] = field(default_factory=list)  # path, position, kind, detail, kept
    unknown_files: list[str] = field(default_factory=list)  # files no reader knows
    code_files: list[str] = field(default_factory=list)  # the run's code: no log, read by replay and probe, never run here
    lines_read: list[dict[str, Any]] = field(default_factory=list)  # console logs: lines each pattern took
    db: str | None = None
    # The earliest cause (forensics/judge/verdict.py's rule), chosen once by the engine: an index into `findings`.
    headline_index: int | None = None
    # `--only`/`--skip`: an analysis restricted to some detectors is stored and shown as such.
    only: list[str] = field(default_factory=list)
    skip: list[str] = field(default_factory=list)
    # A failed run's closest run that worked in the store and where their losses part (`forensics compare`), one line.
    sibling: str | None = None
    # What `forensics replay` and `probe` stored for this run (ingest.queries.stored_answers), placed under the
    # findings they explain by forensics/judge/learned.py.
    answers: dict[str, Any] | None = None

    @property
    def healthy(self) -> bool:
        """"I read this run and found nothing": the verdict is healthy (without a verdict yet: no finding)."""
        return self.verdict == "healthy" if self.verdict is not None else not self.findings

    def worst(self) -> str | None:
        return min((f.severity for f in self.findings), key=RANK.__getitem__, default=None)

    @property
    def restricted(self) -> bool:
        return bool(self.only or self.skip)

    def headline(self) -> Finding | None:
        """The earliest cause in the chain of the worst finding's event, as the engine chose it
        (rule in forensics/judge/verdict.py); None when there is no finding."""
        return self.findings[self.headline_index] if self.headline_index is not None else None

    def learned(self) -> dict[int, dict[str, Any]]:
        """{finding index: {"replay": ..., "probe": ...}}: the stored answers under the findings they explain."""
        from forensics.judge import learned

        return learned.place([f.as_dict() for f in self.findings], self.answers)

    def answers_dict(self) -> dict[str, Any] | None:
        """Every stored replay and the latest probe, as the report carries them (each with `ran` and `changed`)."""
        from forensics.judge import learned

        if self.answers is None:
            return None
        p = self.answers.get("probe")
        return plain({"replays": [learned.replay_verdict(r) for r in self.answers.get("replays") or []],
                      "probe": learned.probe_verdict(p) if p else None})

    def check_first(self) -> list[str]:
        """The headline's checks, led by what a stored replay or probe found about its event."""
        from forensics.judge import learned

        head = self.headline()
        if head is None:
            return []
        return learned.check_first([f.as_dict() for f in self.findings], self.headline_index, self.learned(),
                                   head.checks)

    def headline_dict(self) -> dict[str, Any] | None:
        """The headline as `--json` carries it: the finding's kind, severity, steps, summary, event id and what to
        check first."""
        head = self.headline()
        if head is None:
            return None
        return {"finding": self.headline_index, "kind": head.kind, "severity": head.severity, "step": head.step,
                "step_end": head.step_end, "event": head.event, "summary": head.summary,
                "check_first": self.check_first(),
                **({"at": head.at, "at_end": head.at_end} if head.at or head.at_end else {})}

    def as_dict(self) -> dict[str, Any]:
        """The documented JSON object (`forensics analyze --json`): verdict and its reason, the headline (the
        earliest-cause finding, with its event id), the `--only`/`--skip` restriction, read problems, findings,
        spikes, skips, plus `nonfinite`, `replay_from`, `probe_command`, `checked`; each finding a stored replay or
        probe explains carries it (`replay`, `probe`), and `answers` holds them all (ingest.queries.stored_answers)."""
        placed = self.learned()
        return {"run": self.run, "verdict": self.verdict, "verdict_reason": self.verdict_reason,
                "healthy": self.healthy, "headline": self.headline_dict(),
                "restricted": {"only": list(self.only), "skip": list(self.skip)} if self.restricted else None,
                "read_problems": plain(self.read_problems),
                "unknown_files": list(self.unknown_files), "code_files": list(self.code_files),
                "lines_read": plain(self.lines_read), "db": self.db,
                "findings": [{**f.as_dict(), **placed.get(i, {})} for i, f in enumerate(self.findings)],
                "spikes": [s.as_dict() for s in self.spikes], "skipped": [s.as_dict() for s in self.skipped],
                "nonfinite": plain(self.nonfinite), "replay_from": plain(self.replay_from),
                "probe_command": self.probe_command, "sibling": self.sibling, "answers": self.answers_dict(),
                "checked": plain(self.checked)}
