"""`forensics watch`: diagnose every new or growing run under a team's runs folders, and alert on what changed.

One pass (`Watcher.poll_once`, what `--once` runs and the loop repeats):

1. discover the runs under every root (`ingest.discovery`: rules in docs/watch.md);
2. fingerprint each run: one listing per folder and one stat per file, hashed with every file's size and
   mtime. Network filesystems send no inotify events, so polling is the ground truth; watchdog's observer,
   where installed and the filesystem supports it, only wakes the loop early;
3. ingest and analyse only the runs whose fingerprint changed (ingest itself reads only appended bytes and
   new files), in this process or `--jobs N` workers (`forensics.services.fleet`);
4. alert: each kind of alert is one policy, a small function over the pass's report and what the watch
   remembers (`POLICIES`, as detectors work over a Run): a run deleted, a run that failed to read, a finding
   kind the run had not been alerted for or a worse severity, an INCONCLUSIVE verdict, a file whose tail ends
   inside a record and has not grown by the next pass (a tail still being written is not damage), a log
   rewritten, a run that stopped growing for longer than its usual interval × `stall_factor` (once). Each alert
   is one row in `alerts` and one printed line (or JSON line);
5. record the runs' state in `watched_runs`, in one short write transaction (the app can read meanwhile).

Nothing here prints: the CLI passes `emit` (alerts, stdout) and `log` (service messages, stderr).
"""

from __future__ import annotations

import hashlib
import json
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from datetime import datetime
from pathlib import Path
from typing import Any

from forensics.judge.detectors import NONFINITE_KINDS
from forensics.judge.findings import RANK, Analysis
from forensics.services.fleet import Options, RunResult, analyze_runs

ALERT_SEVERITIES = ("critical", "warning")  # findings of these severities are alerted; info is stored only


@dataclass
class Alert:
    """One thing the watch reports: a finding (origin "finding") or the service's own (origin "watch")."""

    run_id: str
    run_name: str
    path: str
    origin: str
    kind: str
    severity: str
    message: str
    step: int | None = None
    analysis_id: int | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "run_name": self.run_name, "origin": self.origin, "kind": self.kind,
                "severity": self.severity, "step": self.step, "analysis_id": self.analysis_id,
                "message": self.message, "detail": json.dumps(self.detail, default=str)}

    def as_dict(self) -> dict[str, Any]:
        return {"run": self.run_name, "run_id": self.run_id, "path": self.path, "origin": self.origin,
                "kind": self.kind, "severity": self.severity, "step": self.step, "message": self.message,
                "detail": self.detail}


@dataclass
class RunState:
    """What the watch remembers of one run between passes (a few hundred bytes: memory stays bounded)."""

    run_id: str
    path: str
    watch_root: str
    kind: str
    reason: str
    first_seen: datetime | None = None
    fingerprint: str | None = None
    last_growth: float | None = None  # newest mtime of its files
    n_files: int = 0
    n_bytes: int = 0
    state: str = "active"  # active, stalled, gone, error
    detail: str | None = None
    live: bool = False  # seen growing within its stall threshold during this watch: only a live run can stall
    # Its contents as last looked at (files, bytes), or None before the first look: a fresh mtime is not growth
    # (a finished run copied into a root has new mtimes), more files or bytes than last time is.
    looked: tuple[int, int] | None = None
    grown: bool = False  # its contents grew between two looks of this watch
    growths: deque = field(default_factory=lambda: deque(maxlen=16))  # newest mtimes at each growth seen
    logged_interval: float | None = None  # median seconds between logged loss points (from the store)
    dirty: bool = True  # its watched_runs row needs writing
    next_fingerprint: str | None = None  # this pass's, stored once the run was read (a failed read is retried)

    @property
    def name(self) -> str:
        return Path(self.path).name

    def row(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "path": self.path, "watch_root": self.watch_root, "kind": self.kind,
                "reason": self.reason, "first_seen": self.first_seen or datetime.now(),
                "last_checked": datetime.now(), "last_growth": self.last_growth, "fingerprint": self.fingerprint,
                "n_files": self.n_files, "n_bytes": self.n_bytes, "state": self.state, "detail": self.detail}


@dataclass
class WatchSettings:
    interval: float = 30.0  # seconds between passes
    jobs: int = 1
    stall_factor: float = 10.0  # stalled after this many usual intervals without growth
    min_stall_s: float = 300.0  # and never before this many seconds (writers buffer: SummaryWriter flushes every 120 s)
    events: bool = True  # let watchdog's file events wake the loop early, where installed
    options: Options = field(default_factory=Options)


@dataclass
class Stored:
    """What the store says of a pass's runs, read in one connection: the latest verdict of each run analysed, the
    tails cut off at the changed runs' last ingest (run, file, position, issue, size) and their logs rewritten
    (run, file, issue), and the median seconds between logged loss points of each run read since it last changed
    that this watch has not seen grow often enough (0 where none is logged)."""

    verdicts: dict[str, dict] = field(default_factory=dict)
    tails: list[tuple] = field(default_factory=list)
    rewrites: list[tuple] = field(default_factory=list)
    intervals: dict[str, float] = field(default_factory=dict)


@dataclass
class PassReport:
    """One pass: what it found, read and analysed (what the alert policies read, as detectors read a Run), its
    alerts, and the file-system calls it cost."""

    runs: int = 0
    changed: int = 0
    analysed: int = 0
    failed: int = 0
    alerts: list[Alert] = field(default_factory=list)
    listings: int = 0  # folders listed (discovery + fingerprints)
    stats: int = 0  # files stat'ed
    seconds: float = 0.0
    now: float = 0.0  # seconds since the epoch, when the pass began
    settings: WatchSettings = field(default_factory=WatchSettings)
    found_runs: list[RunState] = field(default_factory=list)  # every run under the roots
    changed_runs: list[RunState] = field(default_factory=list)  # runs whose fingerprint changed: read again
    analyses: list[tuple[RunState, Analysis]] = field(default_factory=list)  # changed runs analysed
    failures: list[tuple[RunState, RunResult]] = field(default_factory=list)  # runs that failed anew (not as before)
    went: list[RunState] = field(default_factory=list)  # runs no longer found: deleted, or now part of another
    read_stored: Callable[[], Stored] = field(default=Stored, repr=False)

    @cached_property
    def stored(self) -> Stored:
        """What the store says of this pass's runs (`Stored`), read on first use: after the policies that need
        only the pass, so a read that fails (a locked store) leaves their alerts to be recorded next pass."""
        return self.read_stored()


@dataclass
class Memory:
    """What the watch remembers between passes, which the alert policies consult and update so that each alert is
    said once: each run's state, the worst severity alerted per (run, kind), the tails suspected or alerted, the
    rewritten logs alerted. A few hundred bytes per run: memory stays bounded."""

    runs: dict[str, RunState] = field(default_factory=dict)
    alerted: dict[tuple[str, str], str] = field(default_factory=dict)  # (run_id, kind) -> worst severity alerted
    # (run, file, byte position or None for a tensor file) -> (its size when suspected, or -1 once alerted; detail)
    suspect_tails: dict[tuple[str, str, int | None], tuple[int, str]] = field(default_factory=dict)
    rewrites: set[tuple[str, str, str]] = field(default_factory=set)  # (run, file, issue) of rewritten logs alerted


def fingerprint(path: Path, counts: PassReport) -> tuple[str, float | None, int, int]:
    """(hash of every file's path, size and mtime; newest mtime; files; bytes) of a run's folder: the files ingest
    reads (`ingest.files.walk`'s walk and rule, a file link inside the run by its target's size and mtime).
    Raises OSError when the run's folder itself cannot be listed."""
    from ingest.files import folders, is_read

    h = hashlib.blake2b(digest_size=16)
    newest, n_files, n_bytes = None, 0, 0
    root = path.resolve()

    listed = 0

    def unlisted(exc: OSError) -> None:
        if not listed:
            raise exc  # the run's folder itself; a sub-folder deleted or locked mid-walk: its files count as gone

    for _, entries in folders(root, unlisted):
        listed += 1
        counts.listings += 1
        for e in entries:
            if not is_read(e, root, follow_links=False):
                continue
            try:
                st = e.stat()
            except OSError:
                continue
            counts.stats += 1
            h.update(f"{e.path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))  # names need not be UTF-8
            n_files, n_bytes = n_files + 1, n_bytes + st.st_size
            newest = max(newest or 0.0, st.st_mtime_ns / 1e9)
    return h.hexdigest(), newest, n_files, n_bytes


# -- alert policies: each reads one pass (and what the watch remembers) and says what to alert ------------------


def deleted(p: PassReport, m: Memory) -> list[Alert]:
    """A run whose folder went away (info; its stored data is kept). Said once: the run is forgotten after."""
    return [Alert(st.run_id, st.name, st.path, "watch", "deleted", "info",
                  f"{st.name}: deleted ({st.path}); its stored data is kept", detail={"path": st.path})
            for st in p.went if st.detail == "deleted"]


def unreadable(p: PassReport, m: Memory) -> list[Alert]:
    """A run that could not be read, once until it changes. A failure that is the service's (a locked store, a
    failed write, a crashed worker: `retry`) is not the run's, and is not alerted."""
    return [Alert(st.run_id, st.name, st.path, "watch", "unreadable", "warning",
                  f"{st.name}: could not be read — {res.error}", detail={"error": res.error})
            for st, res in p.failures if not res.retry]


def new_findings(p: PassReport, m: Memory) -> list[Alert]:
    """A finding kind the run was not alerted for, or a worse severity (critical and warning; info is stored
    only): the earliest finding of each kind at its worst severity. A non-finite kind at the NaN onset names the
    replay's starting checkpoint; the others give the finding's summary."""
    out = []
    for st, analysis in p.analyses:
        seen: set[str] = set()
        for f in analysis.findings:
            if f.severity not in ALERT_SEVERITIES or f.kind in seen:
                continue
            before = m.alerted.get((st.run_id, f.kind))
            worst = min((g.severity for g in analysis.findings if g.kind == f.kind), key=RANK.__getitem__)
            if f.severity != worst:
                continue
            seen.add(f.kind)
            if before is not None and RANK[before] <= RANK[f.severity]:
                continue
            where = f" at step {f.step:,}" if f.step is not None else ""
            tail = f.summary
            ck = (analysis.replay_from or {}).get("checkpoint")
            if f.kind in NONFINITE_KINDS and analysis.replay_from and analysis.replay_from.get("onset_step") == f.step:
                tail = f"last finite checkpoint step {ck['step']:,}" if ck else "no finite checkpoint saved before it"
            out.append(Alert(st.run_id, st.name, st.path, "finding", f.kind, f.severity,
                             f"{st.name}: {f.kind}{where} ({f.severity}) — {tail}", step=f.step,
                             analysis_id=analysis.analysis_id,
                             detail={"summary": f.summary, "step_end": f.step_end, "series": f.series,
                                     "evidence": f.evidence, "replay_from": analysis.replay_from}))
    return out


def inconclusive(p: PassReport, m: Memory) -> list[Alert]:
    """A run whose stored verdict is INCONCLUSIVE (a reader missing, no training loss, a damaged file): no finding
    says so, and a silent watch would read as health. Said once per run, with the stored reason."""
    out = []
    for st, _ in p.analyses:
        v = p.stored.verdicts.get(st.run_id)
        if v is None or v["verdict"] != "inconclusive" or (st.run_id, "inconclusive") in m.alerted:
            continue
        out.append(Alert(st.run_id, st.name, st.path, "watch", "inconclusive", "warning",
                         f"{st.name}: INCONCLUSIVE — {v['verdict_reason']}", analysis_id=v["analysis_id"],
                         detail={"reason": v["verdict_reason"], "read_problems": v["read_problems"][:20]}))
    return out


def truncated(p: PassReport, m: Memory) -> list[Alert]:
    """A file that ends inside a record (or a checkpoint or saved batch cut off mid-save): suspect when first
    stored so, damage when it has not changed by the next pass (the writer stopped mid-record), forgotten when it
    grew (it was still being written). Tails cut off at this pass's ingests become suspects."""
    out = []
    for key, (size, detail) in list(m.suspect_tails.items()):
        if size < 0:
            continue  # already alerted
        run_id, rel, position = key
        st = m.runs.get(run_id)
        if st is None or st.state == "gone":
            del m.suspect_tails[key]
            continue
        try:
            now_size = (Path(st.path) / rel).stat().st_size
        except OSError:
            del m.suspect_tails[key]
            continue
        if now_size != size:
            del m.suspect_tails[key]  # it grew (or was rewritten): the next ingest reads on from there
            continue
        m.suspect_tails[key] = (-1, detail)
        if position is not None:
            message = (f"{st.name}: {rel} ends inside a record at byte {position:,} and has not grown since the "
                       f"last pass — kept everything before it")
        else:  # a checkpoint or saved batch cut off mid-save
            message = f"{st.name}: {rel} is cut off ({detail}) and has not changed since the last pass"
        out.append(Alert(run_id, st.name, st.path, "watch", "truncated", "warning", message,
                         detail={"path": rel, "position": position, "issue": detail}))
    if p.changed_runs:
        for run_id, rel, position, detail, size in p.stored.tails:
            m.suspect_tails.setdefault((run_id, rel, position), (int(size or 0), detail))
    return out


def rewritten(p: PassReport, m: Memory) -> list[Alert]:
    """A log rewritten under a running job (cut shorter, or replaced): ingest forgot its old points and read it
    again; said once per rewrite."""
    if not p.changed_runs:
        return []
    out = []
    for run_id, rel, detail in p.stored.rewrites:
        if (run_id, rel, detail) in m.rewrites or run_id not in m.runs:
            continue
        m.rewrites.add((run_id, rel, detail))
        st = m.runs[run_id]
        out.append(Alert(run_id, st.name, st.path, "watch", "rewritten", "warning", f"{st.name}: {detail}",
                         detail={"path": rel, "issue": detail}))
    return out


def stalled(p: PassReport, m: Memory) -> list[Alert]:
    """A run that stopped growing for longer than its usual interval × `stall_factor`, and at least `min_stall_s`.
    Only a run seen growing within its limit can stall (a run that finished before the watch started is not a dead
    job), and it is alerted once, until it grows again."""
    logged = p.stored.intervals if p.found_runs else {}
    out = []
    for st in p.found_runs:
        if st.run_id in logged:
            st.logged_interval = logged[st.run_id]  # remembered until the run is read again
        if st.last_growth is None or st.state in ("gone", "error"):
            continue
        limit, usual = stall_limit(st, p.settings)
        if limit is None:
            continue
        quiet = p.now - st.last_growth
        if quiet <= limit:
            st.live = st.live or st.grown  # recent mtimes without new contents: a copy, not a job
            continue
        if not st.live or st.state == "stalled":
            continue  # finished before the watch saw it grow, or already alerted
        st.state, st.detail, st.dirty = "stalled", f"no growth for {quiet:.0f} s", True
        out.append(Alert(st.run_id, st.name, st.path, "watch", "stalled", "warning",
                         f"{st.name}: stalled — no new data for {_duration(quiet)}, its usual interval is "
                         f"{_duration(usual)} (limit {_duration(limit)}); a dead job?",
                         detail={"quiet_s": round(quiet, 1), "usual_interval_s": usual, "limit_s": limit,
                                 "last_growth": st.last_growth}))
    return out


def stall_limit(st: RunState, settings: WatchSettings) -> tuple[float | None, float | None]:
    """The run's usual interval between growths (seen by this watch, else its logged wall-clock interval) times
    the factor, never under min_stall_s; (None, None) while the interval is unknown."""
    gaps = [b - a for a, b in zip(st.growths, list(st.growths)[1:]) if b > a]
    usual = statistics.median(gaps) if len(gaps) >= 2 else (st.logged_interval or None)
    if usual is None:
        return None, None
    return max(settings.stall_factor * usual, settings.min_stall_s), usual


# Every alert of a pass, in this order. Those that read only the pass come first: the store is read (once) by the
# first that needs it, and an alert made before a read that fails is kept for the next pass.
POLICIES: tuple[Callable[[PassReport, Memory], list[Alert]], ...] = (
    deleted, unreadable, new_findings, inconclusive, truncated, rewritten, stalled)


class Watcher:
    """The watch service: what it remembers (`memory`) and its single pass, whose alerts the policies (`POLICIES`)
    decide. `emit` receives each alert after it is stored; `log` receives one-line service messages (a run that
    could not be read, a root that is gone)."""

    def __init__(self, roots: list[Path], db: Path, settings: WatchSettings | None = None,
                 emit: Callable[[Alert], None] = lambda a: None, log: Callable[[str], None] = lambda m: None):
        self.roots = [Path(r).expanduser().resolve() for r in roots]
        self.db = Path(db)
        self.settings = settings or WatchSettings()
        self.emit, self.log = emit, log
        self.memory = Memory()
        self.logged_errors: dict[str, str] = {}  # last message logged per root or run: said once, not every pass
        self.stop = threading.Event()
        self.unrecorded: list[Alert] = []  # alerts of a pass whose write failed: recorded by the next pass
        self._loaded = False

    # -- state -------------------------------------------------------------------------------------------
    def load(self) -> None:
        """What earlier watches stored: each run's fingerprint and state, and the alerts already given."""
        from ingest import queries
        from ingest.store import connect

        self._loaded = True
        if not self.db.exists():
            return
        m = self.memory
        with connect(self.db, write=True) as con:  # write: an older schema gets the watch's tables added
            rows = queries.watched_runs(con)
            m.alerted = queries.alerted_severities(con)
            for a in queries.alerts(con):
                if a["kind"] == "truncated" and a["detail"]:
                    d = json.loads(a["detail"])
                    m.suspect_tails[(a["run_id"], d["path"], d["position"])] = (-1, "alerted")
                elif a["kind"] == "rewritten" and a["detail"]:
                    d = json.loads(a["detail"])
                    m.rewrites.add((a["run_id"], d["path"], d["issue"]))
            # Tails cut off at the last ingest, suspects until a pass finds them unchanged: from the store, so a
            # `--once` pass from cron alerts what the previous one suspected.
            for run_id, rel, position, detail, size in queries.truncated_tails(con):
                m.suspect_tails.setdefault((run_id, rel, position), (int(size or 0), detail))
        for r in rows:
            if r["state"] == "gone":
                continue
            m.runs[r["run_id"]] = RunState(
                r["run_id"], r["path"], r["watch_root"], r["kind"], r["reason"], first_seen=r["first_seen"],
                fingerprint=r["fingerprint"], last_growth=r["last_growth"], n_files=r["n_files"] or 0,
                n_bytes=r["n_bytes"] or 0, state=r["state"] or "active", detail=r["detail"], dirty=False,
                looked=(r["n_files"] or 0, r["n_bytes"] or 0))

    # -- one pass ----------------------------------------------------------------------------------------
    def poll_once(self, now: float | None = None) -> PassReport:
        """Discover, fingerprint, ingest and analyse what changed, alert (`POLICIES`), record. `now` (seconds
        since the epoch) is for tests that age a run without sleeping."""
        if not self._loaded:
            self.load()
        started = time.monotonic()
        report = PassReport(now=time.time() if now is None else now, settings=self.settings)
        found = self._discover(report)
        report.runs = len(found)
        report.found_runs = [self._look(run_id, root, r, report) for run_id, (root, r) in found.items()]
        report.changed = len(report.changed_runs)
        for res in self._analyse(report.changed_runs):
            self._took(self.memory.runs[res.run_id or _id_of(res.path)], res, report)
        report.went = self._went(found)
        report.read_stored = lambda: self._read_stored(report)
        # Alerts gather in `unrecorded` (extended in place) until the pass's write commits: a pass that fails
        # halfway (a locked store, a full disk) leaves them for the next pass, which records and prints them.
        alerts = self.unrecorded
        for policy in POLICIES:
            alerts += policy(report, self.memory)
        self._record(alerts)
        report.alerts = alerts
        report.seconds = time.monotonic() - started
        return report

    def _discover(self, report: PassReport) -> dict[str, tuple[Path, Any]]:
        """run id -> (its root, the discovered run) of every run under the roots."""
        from ingest.discovery import discover
        from ingest.run import run_id_for

        found: dict[str, tuple[Path, Any]] = {}
        for root in self.roots:
            if not root.is_dir():
                self._log_once(str(root), f"{root}: not a folder (deleted or unmounted?); skipped this pass")
                continue
            d = discover(root)
            report.listings += d.dirs_scanned
            for path, err in d.errors:
                self._log_once(path, f"{path}: cannot list ({err}); skipped")
            for r in d.runs:
                found.setdefault(run_id_for(r.path), (root, r))
        return found

    def _look(self, run_id: str, root: Path, r: Any, report: PassReport) -> RunState:
        """The run's state after a look at its files (fingerprint, growth); it goes to `changed_runs` when its
        fingerprint changed. A folder that cannot be listed is said once and left as it was."""
        st = self.memory.runs.get(run_id)
        if st is None or st.state == "gone":
            st = RunState(run_id, str(r.path), str(root), r.kind, r.reason, first_seen=datetime.now())
            self.memory.runs[run_id] = st
        elif (st.kind, st.reason) != (r.kind, r.reason):
            st.kind, st.reason, st.dirty = r.kind, r.reason, True
        st.path = str(r.path)  # the store keeps a non-UTF-8 name escaped; read from the name on disk
        try:
            fp, newest, n_files, n_bytes = fingerprint(r.path, report)
        except OSError as exc:
            self._log_once(run_id, f"{st.name}: cannot read {r.path} ({exc.strerror or exc}); skipped")
            return st
        if st.looked is not None and (n_files > st.looked[0] or n_bytes > st.looked[1]):
            st.grown = True
        st.looked = (n_files, n_bytes)
        if newest is not None and (st.last_growth is None or newest > st.last_growth):
            st.growths.append(newest)
            if st.state == "stalled":
                st.state, st.detail = "active", None
                self.log(f"{st.name}: growing again")
            st.last_growth, st.dirty = newest, True
        if fp != st.fingerprint:
            st.n_files, st.n_bytes = n_files, n_bytes
            report.changed_runs.append(st)
            st.next_fingerprint = fp
        return st

    def _analyse(self, changed: list[RunState]) -> list[RunResult]:
        if not changed:
            return []
        from ingest.queries import known_run_ids
        from ingest.store import connect

        known: set[str] = set()
        if self.db.exists():
            with connect(self.db, write=False) as con:
                known = known_run_ids(con)
        return analyze_runs([st.path for st in changed], self.db, self.settings.options, jobs=self.settings.jobs,
                            known=known, should_stop=self.stop.is_set)

    def _took(self, st: RunState, res: RunResult, report: PassReport) -> None:
        """A run's analysis, or its failure, in its state: a run analysed keeps its new fingerprint; one that
        cannot be read is tried again once it changes, one whose failure is the service's next pass."""
        st.dirty = True
        if res.error is None:
            report.analysed += 1
            st.fingerprint, st.logged_interval = st.next_fingerprint, None
            if st.state == "error":
                st.state, st.detail = "active", None
            self.logged_errors.pop(st.run_id, None)
            report.analyses.append((st, res.analysis))
            return
        report.failed += 1
        if not res.retry:
            st.fingerprint = st.next_fingerprint
        if st.state == "error" and st.detail == res.error:
            return
        st.state, st.detail = "error", res.error
        self.log(f"{st.name}: could not analyse ({res.error}); " +
                 ("will try again next pass" if res.retry else "will try again when it changes"))
        report.failures.append((st, res))

    def _went(self, found: dict[str, Any]) -> list[RunState]:
        """Runs remembered but not found this pass, marked gone: deleted, or now part of another run (said on the
        log, no alert)."""
        out = []
        for st in self.memory.runs.values():
            if st.run_id in found or st.state == "gone":
                continue
            if Path(st.path).exists() and any(Path(st.path).is_relative_to(r) for r in self.roots):
                st.state, st.detail, st.dirty = "gone", "no longer a run by itself under the roots", True
                self.log(f"{st.name}: {st.path} is no longer a run by itself (now part of another?); not watched")
            else:
                st.state, st.detail, st.dirty = "gone", "deleted", True
            out.append(st)
        return out

    def _read_stored(self, report: PassReport) -> Stored:
        """`Stored` for this pass's runs, in one read connection; none opened when nothing is asked (an idle pass)."""
        analysed = [st.run_id for st, _ in report.analyses]
        changed = [st.run_id for st in report.changed_runs] if self.db.exists() else []
        need = [st.run_id for st in report.found_runs if st.logged_interval is None and st.fingerprint is not None
                and len(st.growths) < 3] if self.db.exists() else []
        out = Stored()
        if not (analysed or changed or need):
            return out
        from ingest import queries
        from ingest.store import connect

        with connect(self.db, write=False) as con:
            if analysed:
                out.verdicts = queries.latest_verdicts(con, analysed)
            if changed:
                out.tails = queries.truncated_tails(con, changed)
                out.rewrites = queries.issues_of_kind(con, changed, "rewritten")
            if need:
                found = queries.logging_intervals_s(con, need)
                out.intervals = {run_id: found.get(run_id, 0.0) for run_id in need}
        return out

    # -- recording ---------------------------------------------------------------------------------------
    def _record(self, alerts: list[Alert]) -> None:
        """One write transaction for the pass: changed watched_runs rows and the alerts; then emit them."""
        runs = self.memory.runs
        dirty = [st for st in runs.values() if st.dirty]
        if not dirty and not alerts:
            self.unrecorded = []
            return
        from ingest.store import connect
        from ingest.writes import insert_alerts, upsert_watched_runs

        try:
            with connect(self.db, write=True) as con:
                con.execute("BEGIN")
                try:
                    upsert_watched_runs(con, [st.row() for st in dirty])
                    insert_alerts(con, [a.row() for a in alerts])
                    con.execute("COMMIT")
                except BaseException:
                    con.execute("ROLLBACK")
                    raise
        except BaseException:
            self.unrecorded = alerts  # nothing is lost: the next pass records (and prints) them
            raise
        self.unrecorded = []
        for a in alerts:
            if a.origin == "finding" or a.kind == "inconclusive":
                self.memory.alerted[(a.run_id, a.kind)] = a.severity
        for st in dirty:
            st.dirty = False
        for st in [s for s in runs.values() if s.state == "gone"]:
            del runs[st.run_id]  # forgotten in memory; its row says it went
        for a in alerts:
            self.emit(a)

    def _log_once(self, key: str, message: str) -> None:
        if self.logged_errors.get(key) != message:
            self.logged_errors[key] = message
            self.log(message)

    # -- the loop ----------------------------------------------------------------------------------------
    def run_forever(self, on_pass: Callable[[PassReport], None] = lambda r: None) -> None:
        """Pass after pass until `stop` is set (by SIGINT/SIGTERM in the CLI): the current run's write
        finishes first. A watchdog observer, where installed, wakes the loop as soon as a file changes."""
        wake = threading.Event()
        observer = self._observer(wake)
        try:
            while not self.stop.is_set():
                try:
                    on_pass(self.poll_once())
                except Exception as exc:  # noqa: BLE001 - the service outlives a failed pass (a locked store, a
                    # full disk): its alerts are kept for the next pass, which tries again
                    first = (str(exc).strip().splitlines() or [""])[0]
                    self.log(f"pass failed ({type(exc).__name__}: {first}); trying again in {self.settings.interval:g}s")
                wake.clear()
                deadline = time.monotonic() + self.settings.interval
                while not self.stop.is_set() and time.monotonic() < deadline:
                    if wake.wait(min(1.0, max(0.0, deadline - time.monotonic()))):
                        time.sleep(1.0)  # let a burst of writes land before the pass
                        break
        finally:
            if observer is not None:
                observer.stop()
                observer.join(timeout=5)

    def _observer(self, wake: threading.Event):
        if not self.settings.events:
            return None
        try:
            from watchdog.events import FileSystemEventHandler
            from watchdog.observers import Observer
        except ImportError:
            return None

        class Wake(FileSystemEventHandler):
            def on_any_event(self, event):
                if not event.is_directory or event.event_type in ("created", "deleted", "moved"):
                    wake.set()

        observer = Observer()
        try:
            for root in self.roots:
                if root.is_dir():
                    observer.schedule(Wake(), str(root), recursive=True)
            observer.start()
        except OSError as exc:  # inotify watch limit on a big tree, a filesystem without events: poll only
            self.log(f"file events unavailable ({exc}); polling every {self.settings.interval:g} s")
            return None
        return observer


def _id_of(path: str) -> str:
    from ingest.run import run_id_for

    return run_id_for(Path(path))


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def serve(roots: list[Path], db: Path, settings: WatchSettings, *, emit: Callable[[Alert], None],
          log: Callable[[str], None], once: bool = False) -> None:
    """`forensics watch`: one pass (`once`, for cron and CI) or passes until SIGINT/SIGTERM, which finish the
    current write and return. `emit` takes each alert, `log` each service message."""
    import signal

    from forensics.judge.numbers import count, home
    from ingest.errors import ForensicsError

    missing = [str(r) for r in roots if not Path(r).is_dir()]
    if missing:
        raise ForensicsError(f"not a folder: {', '.join(missing)}; watch takes folders holding runs")
    if settings.interval <= 0:
        raise ForensicsError(f"--interval must be positive (got {settings.interval:g})")
    watcher = Watcher(roots, db, settings, emit=emit, log=log)

    def stop(signum, frame) -> None:
        log(f"{signal.Signals(signum).name}: finishing the current write, then exiting")
        watcher.stop.set()

    old = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        if once:
            r = watcher.poll_once()
            log(f"{count(r.runs, 'run')}, {r.changed} changed, {r.analysed} analysed, {r.failed} failed, "
                f"{count(len(r.alerts), 'alert')} in {r.seconds:.1f}s; database: {home(db)}")
        else:
            log(f"watching {', '.join(str(r) for r in watcher.roots)} every {settings.interval:g}s; "
                f"database: {home(db)}")
            watcher.run_forever()
            log("stopped")
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
