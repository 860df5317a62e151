"""`forensics watch`: a watched root where runs are created, grow (a SummaryWriter still writing, a
trainer_state.json rewritten, a W&B log growing), turn NaN, stall, get damaged and get deleted; driven one pass at a
time (`Watcher.poll_once`, what `--once` runs), never by sleeping. Plus the schema migration that adds its tables."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
import pytest

from forensics.cli import main
from forensics.services.watch import Watcher, WatchSettings
from ingest.errors import SchemaError, StoreLocked
from ingest.schema import SCHEMA_VERSION
from ingest.store import connect
from tests.paths import REPO
from tests.runwriters import curve, hf_history, write_trainer_state

GALLERY = REPO / "sample_runs" / "runs"
WANDB_RUN = next((GALLERY / "nan_log_zero" / "wandb").glob("offline-run-*"))


def _kinds(alerts) -> list[tuple[str, str, str]]:
    return sorted((a.run_name, a.kind, a.severity) for a in alerts)


def _scalars(db: Path, run_name: str) -> tuple[int, int]:
    """(points stored, distinct (series, source, position)): equal when nothing was stored twice."""
    with connect(db, write=False) as con:
        return con.execute(
            "SELECT count(*), count(DISTINCT (s.series_id, s.source_id, s.position)) FROM scalars s "
            "JOIN series USING (series_id) JOIN runs USING (run_id) WHERE runs.name = ?", [run_name]).fetchone()


class LiveTB:
    """A SummaryWriter that stays open between passes, as a training job's does."""

    def __init__(self, path: Path):
        from torch.utils.tensorboard import SummaryWriter

        self.w = SummaryWriter(str(path))
        self.steps, self.values = curve(200, every=1, tau=80)
        self.done = 0

    def write(self, upto: int, nan_from: int | None = None) -> None:
        for i in range(self.done, upto):
            v = float("nan") if nan_from is not None and i >= nan_from else float(self.values[i])
            self.w.add_scalar("train/loss", v, i, walltime=1.7e9 + i)
        self.w.flush()
        self.done = upto


def _hf_state(path: Path, n: int, nan_from: int | None = None) -> None:
    steps, loss = curve(n, every=10)
    loss = np.where(np.arange(n) >= (nan_from if nan_from is not None else n), np.nan, loss)
    write_trainer_state(path, hf_history(steps, loss, np.ones(n)))


@pytest.fixture
def watched(tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    db = tmp_path / "store" / "f.duckdb"
    db.parent.mkdir()  # a --db goes in a folder that exists
    log: list[str] = []
    w = Watcher([root], db, WatchSettings(events=False), log=log.append)  # stalls need 300 s: none in these tests
    return root, db, w, log


def test_runs_created_grown_turned_nan_and_deleted(watched):
    root, db, w, log = watched
    tb = LiveTB(root / "tb_job")
    tb.write(60)
    _hf_state(root / "hf_job", 30)
    first = w.poll_once()
    assert first.runs == 2 and first.analysed == 2 and first.failed == 0
    assert not [a for a in first.alerts if a.kind == "nan_loss"]

    # Both grow; the TensorBoard run turns NaN at step 100 while its writer is still open.
    tb.write(120, nan_from=100)
    _hf_state(root / "hf_job", 60)
    second = w.poll_once()
    assert second.changed == 2
    nan = [a for a in second.alerts if a.kind == "nan_loss"]
    assert [(a.run_name, a.severity, a.step) for a in nan] == [("tb_job", "critical", 100)]
    assert nan[0].message.startswith("tb_job: nan_loss at step 100 (critical) — ")

    # Nothing changed: nothing read, analysed or alerted again.
    third = w.poll_once()
    assert (third.changed, third.analysed, third.alerts) == (0, 0, [])

    # The HF run's trainer_state.json is rewritten with a NaN tail: one new alert for it, none repeated.
    _hf_state(root / "hf_job", 80, nan_from=70)
    fourth = w.poll_once()
    assert [(a.run_name, a.kind, a.step) for a in fourth.alerts if a.kind == "nan_loss"] == [("hf_job", "nan_loss", 700)]
    assert not [a for a in fourth.alerts if a.run_name == "tb_job"]

    # Every point once, and the store's alerts are the ones printed.
    tb.w.close()
    n, distinct = _scalars(db, "tb_job")
    assert n == distinct == 120
    with connect(db, write=False) as con:
        stored = con.execute("SELECT run_name, kind, severity, message FROM alerts ORDER BY alert_id").fetchall()
    printed = first.alerts + second.alerts + fourth.alerts
    assert [(a.run_name, a.kind, a.severity, a.message) for a in printed] == stored

    # Deleted: one info alert, no crash, and it is not alerted again.
    shutil.rmtree(root / "tb_job")
    fifth = w.poll_once()
    assert _kinds(fifth.alerts) == [("tb_job", "deleted", "info")]
    assert w.poll_once().alerts == []
    with connect(db, write=False) as con:
        assert con.execute("SELECT state FROM watched_runs WHERE path LIKE '%tb_job'").fetchone()[0] == "gone"


def test_wandb_log_growing_mid_record_is_not_damage_but_a_stuck_tail_is(watched):
    root, db, w, log = watched
    full = (WANDB_RUN / next(p.name for p in WANDB_RUN.iterdir() if p.suffix == ".wandb")).read_bytes()
    for job in ("growing", "stuck"):
        shutil.copytree(WANDB_RUN, root / job / "wandb" / WANDB_RUN.name)
    logs = {job: next((root / job / "wandb" / WANDB_RUN.name).glob("*.wandb")) for job in ("growing", "stuck")}
    cut = len(full) // 2 + 13  # inside a record
    for path in logs.values():
        path.write_bytes(full[:cut])

    first = w.poll_once()
    assert first.analysed == 2
    assert not [a for a in first.alerts if a.kind == "truncated"]  # might still be being written

    with open(logs["growing"], "ab") as f:  # the writer goes on
        f.write(full[cut:])
    second = w.poll_once()
    assert _kinds(a for a in second.alerts if a.kind == "truncated") == [("stuck", "truncated", "warning")]
    assert "has not grown since the last pass" in next(a.message for a in second.alerts if a.kind == "truncated")
    # The grown log was read on from where it stopped and its NaN found; the stuck one is not alerted again.
    assert ("growing", "nan_loss", "critical") in _kinds(second.alerts)
    assert w.poll_once().alerts == []
    n, distinct = _scalars(db, "growing")
    assert n == distinct > 0


def test_a_run_that_stops_growing_is_stalled_once_and_an_old_run_never(watched, tmp_path):
    root, db, _, log = watched
    w = Watcher([root], db, WatchSettings(stall_factor=5, min_stall_s=0, events=False), log=log.append)
    tb = LiveTB(root / "live_job")
    event = None
    t0 = time.time() - 10_000
    for k in range(4):  # the job grows every 60 s (file mtimes set as a writer would leave them)
        tb.write(30 * (k + 1))
        event = event or next((root / "live_job").glob("events.out.tfevents.*"))
        os.utime(event, (t0 + 60 * k, t0 + 60 * k))
        assert not [a for a in w.poll_once(now=t0 + 60 * k + 5).alerts if a.kind == "stalled"]
    tb.w.close()
    shutil.copytree(GALLERY / "clip_too_small", root / "old_job", ignore=shutil.ignore_patterns("*.py"))
    for p in (root / "old_job").iterdir():
        os.utime(p, (t0 - 86_400, t0 - 86_400))  # finished a day before the watch started

    quiet = w.poll_once(now=t0 + 180 + 200)  # 200 s without growth; usual 60 s × 5 = 300 s: not yet
    assert not [a for a in quiet.alerts if a.kind == "stalled"]
    late = w.poll_once(now=t0 + 180 + 400)
    stalled = [a for a in late.alerts if a.kind == "stalled"]
    assert [(a.run_name, a.severity) for a in stalled] == [("live_job", "warning")]
    assert stalled[0].detail["usual_interval_s"] == 60 and stalled[0].detail["limit_s"] == 300
    assert not [a for a in w.poll_once(now=t0 + 180 + 900).alerts if a.kind == "stalled"]


def test_unreadable_run_is_alerted_once_and_the_rest_are_read(watched):
    root, db, w, log = watched
    (root / "broken").mkdir()
    (root / "broken" / "events.out.tfevents.1.host").write_bytes(b"\x00garbage, not a record" * 10)
    shutil.copytree(GALLERY / "clip_too_small", root / "fine", ignore=shutil.ignore_patterns("*.py"))
    first = w.poll_once()
    assert (first.analysed, first.failed) == (1, 1)
    assert [(a.run_name, a.kind) for a in first.alerts if a.origin == "watch"] == [("broken", "unreadable")]
    assert any("broken: could not analyse" in m for m in log)
    again = w.poll_once()
    assert (again.changed, again.alerts) == (0, [])


def test_a_restarted_watch_remembers_runs_and_alerts(watched):
    root, db, w, log = watched
    shutil.copytree(GALLERY / "nan_lr_too_high", root / "job", ignore=shutil.ignore_patterns("*.py"))
    assert [a for a in w.poll_once().alerts if a.kind == "nan_loss"]
    fresh = Watcher([root], db, WatchSettings(events=False))
    r = fresh.poll_once()
    assert (r.runs, r.changed, r.alerts) == (1, 0, [])


def test_watch_once_cli_prints_json_lines_and_exits_0(tmp_path, capsys):
    root = tmp_path / "runs"
    shutil.copytree(GALLERY / "nan_lr_too_high", root / "job", ignore=shutil.ignore_patterns("*.py"))
    db = tmp_path / "f.duckdb"
    assert main(["watch", str(root), "--db", str(db), "--once", "--json", "--no-events"]) == 0
    out = capsys.readouterr()
    lines = [json.loads(line) for line in out.out.splitlines()]
    assert {"nan_loss", "exploding_gradients"} <= {a["kind"] for a in lines}
    assert all(a["run"] == "job" and a["origin"] == "finding" for a in lines)
    assert "1 run, 1 changed, 1 analysed" in out.err
    assert main(["watch", str(tmp_path / "nope"), "--db", str(db), "--once"]) == 2
    assert "not a folder" in capsys.readouterr().err


def test_sigterm_finishes_and_exits_cleanly_while_the_store_stays_readable(tmp_path):
    root = tmp_path / "runs"
    shutil.copytree(GALLERY / "clip_too_small", root / "job", ignore=shutil.ignore_patterns("*.py"))
    db = tmp_path / "f.duckdb"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "forensics.cli", "watch", str(root), "--db", str(db),
                             "--interval", "0.5", "--no-events"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if db.exists():
                try:  # between passes the watch holds no connection: a reader (the app) gets in
                    with connect(db, write=False, wait_s=2) as con:
                        if con.execute("SELECT count(*) FROM watched_runs").fetchone()[0] == 1:
                            break
                except (SchemaError, StoreLocked):  # not yet made, or mid-pass: a loaded machine's pass outlasts 2 s
                    pass
            time.sleep(0.2)
        else:
            pytest.fail("the watch stored nothing within 120 s")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "SIGTERM: finishing the current write" in err and "Traceback" not in err


def test_an_older_database_gets_the_watch_tables_on_its_first_write(tmp_path):
    db = tmp_path / "old.duckdb"
    with connect(db, write=True):
        pass
    con = duckdb.connect(str(db))
    con.execute("DROP TABLE alerts")
    con.execute("DROP TABLE watched_runs")
    con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")  # the version before the watch
    con.close()
    import ingest.store

    ingest.store._SCHEMA_READY.clear()  # as a new process would
    with pytest.raises(SchemaError, match="upgrades it in place"):
        with connect(db, write=False):
            pass
    with connect(db, write=True) as con:
        assert con.execute("SELECT count(*) FROM alerts").fetchone()[0] == 0
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)


def test_nan_alert_names_the_last_finite_checkpoint(tmp_path):
    root = tmp_path / "runs"
    shutil.copytree(GALLERY / "nan_lr_too_high", root / "run-42", ignore=shutil.ignore_patterns("*.py"))
    w = Watcher([root], tmp_path / "f.duckdb", WatchSettings(events=False))
    [nan] = [a for a in w.poll_once().alerts if a.kind == "nan_loss"]
    assert nan.message == "run-42: nan_loss at step 80 (critical) — last finite checkpoint step 60"
    assert nan.detail["replay_from"]["checkpoint"]["step"] == 60 and math.isfinite(nan.detail["evidence"]["last_finite_value"])



def test_runs_lists_how_the_watch_found_each_run(tmp_path, capsys):
    root = tmp_path / "runs"
    shutil.copytree(GALLERY / "healthy_cnn", root / "cnn", ignore=shutil.ignore_patterns("*.py"))
    db = tmp_path / "f.duckdb"
    Watcher([root], db, WatchSettings(events=False)).poll_once()
    assert main(["runs", "--db", str(db), "--json"]) == 0
    [run] = json.loads(capsys.readouterr().out)["runs"]
    assert run["found_by_watch"]["kind"] == "lightning_version"
    assert "lightning_logs/ folder holds one run (version_0)" in run["found_by_watch"]["reason"]
    assert main(["runs", "--db", str(db)]) == 0
    assert "found by watch as lightning_version" in capsys.readouterr().out


def test_a_pass_whose_write_fails_loses_no_alert(watched, monkeypatch):
    """A full disk or a locked store at the pass's write: the pass fails, the next one records and prints its
    alerts (the run is not read again)."""
    import ingest.writes

    root, db, w, log = watched
    shutil.copytree(GALLERY / "nan_lr_too_high", root / "job", ignore=shutil.ignore_patterns("*.py"))
    real = ingest.writes.insert_alerts

    def full_disk(con, rows):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ingest.writes, "insert_alerts", full_disk)
    with pytest.raises(OSError):
        w.poll_once()
    monkeypatch.setattr(ingest.writes, "insert_alerts", real)
    printed = []
    w.emit = printed.append
    again = w.poll_once()
    assert again.changed == 0 and "nan_loss" in {a.kind for a in printed}
    with connect(db, write=False) as con:
        assert con.execute("SELECT count(*) FROM alerts WHERE kind = 'nan_loss'").fetchone()[0] == 1
    assert w.poll_once().alerts == []


@pytest.mark.skipif(importlib.util.find_spec("watchdog") is None, reason="watchdog is not installed (the watch extra)")
def test_file_events_wake_the_loop_before_the_interval(tmp_path):
    """With watchdog, a NaN flushed into a watched run is alerted long before the next poll would come (the
    interval here is 10 minutes); the loop stops cleanly when asked."""
    import threading

    root = tmp_path / "runs"
    tb = LiveTB(root / "job")
    tb.write(60)
    got: dict[str, float] = {}
    w = Watcher([root], tmp_path / "f.duckdb", WatchSettings(interval=600),
                emit=lambda a: got.setdefault(a.kind, time.monotonic()))
    passes = threading.Semaphore(0)
    thread = threading.Thread(target=w.run_forever, kwargs={"on_pass": lambda r: passes.release()}, daemon=True)
    thread.start()
    try:
        assert passes.acquire(timeout=120), "the first pass did not finish"
        tb.write(80, nan_from=70)
        t0 = time.monotonic()
        assert passes.acquire(timeout=120), "no pass after the file changed: file events did not wake the loop"
        assert "nan_loss" in got and got["nan_loss"] - t0 < 120
    finally:
        w.stop.set()
        thread.join(30)
        tb.w.close()
    assert not thread.is_alive()


def test_watch_with_two_jobs_alerts_as_one_process_does(tmp_path):
    """--jobs 2: new runs go to workers, grown ones are ingested by the watch and analysed by workers reading the
    store; the alerts and the points stored are those of one process."""
    out = {}
    for jobs in (1, 2):
        root = tmp_path / f"runs{jobs}"
        for name in ("clip_too_small", "plateau_double_softmax"):
            shutil.copytree(GALLERY / name, root / name, ignore=shutil.ignore_patterns("*.py"))
        db = tmp_path / f"f{jobs}.duckdb"
        w = Watcher([root], db, WatchSettings(jobs=jobs, events=False))
        first = w.poll_once()
        with open(root / "plateau_double_softmax" / "train.log", "a") as f:
            f.writelines(f"[2026-01-01 00:00:00] step {s}/9999 | loss nan | lr 1.000e-03\n" for s in range(5000, 5010))
        with open(root / "clip_too_small" / "config.yaml", "a") as f:
            f.write("note: edited while the watch runs\n")  # both runs changed: the workers' pool analyses them
        second = w.poll_once()
        assert second.changed == 2
        with connect(db, write=False) as con:
            points = con.execute("SELECT count(*), count(DISTINCT (series_id, source_id, position)) FROM scalars").fetchone()
        out[jobs] = ([(a.run_name, a.kind, a.severity, a.step) for a in first.alerts],
                     [(a.run_name, a.kind, a.severity, a.step) for a in second.alerts], points)
    assert out[1] == out[2]
    assert ("plateau_double_softmax", "nan_loss", "critical", 5000) in out[2][1]
    assert out[2][2][0] == out[2][2][1]


def test_watch_once_from_cron_alerts_a_stuck_tail_and_a_cut_checkpoint_on_its_next_run(tmp_path, capsys):
    """Issue 25: `watch --once` never raised the "truncated" alert: the suspicion lived in memory between passes,
    and each --once is a new process. It lives in the store now; a checkpoint cut off mid-save is alerted too."""
    root = tmp_path / "runs"
    shutil.copytree(WANDB_RUN, root / "stuck" / "wandb" / WANDB_RUN.name)
    log = next((root / "stuck" / "wandb" / WANDB_RUN.name).glob("*.wandb"))
    log.write_bytes(log.read_bytes()[: log.stat().st_size // 2 + 13])  # inside a record
    shutil.copytree(GALLERY / "nan_lr_too_high", root / "ckpt_job", ignore=shutil.ignore_patterns("*.py"))
    ckpt = root / "ckpt_job" / "checkpoints" / "step_80.pt"
    ckpt.write_bytes(ckpt.read_bytes()[: ckpt.stat().st_size // 2])
    db = tmp_path / "f.duckdb"
    once = ["watch", str(root), "--db", str(db), "--once", "--json", "--no-events"]

    assert main(once) == 0
    first = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert not [a for a in first if a["kind"] == "truncated"]  # might still be being written
    assert main(once) == 0
    second = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    truncated = sorted((a["run"], a["detail"]["path"]) for a in second if a["kind"] == "truncated")
    assert truncated == [("ckpt_job", "checkpoints/step_80.pt"), ("stuck", str(log.relative_to(root / "stuck")))]
    assert main(once) == 0
    assert not [line for line in capsys.readouterr().out.splitlines() if '"truncated"' in line]  # once only


def test_finished_runs_copied_into_the_root_never_stall(watched, tmp_path):
    """Issue 26: 140 "stalled" alerts for finished runs copied into a watched root: a copy's files all have fresh
    mtimes, which the watch took for growth. Growth is more contents between two looks, not a newer mtime."""
    root, db, _, log = watched
    w = Watcher([root], db, WatchSettings(stall_factor=5, min_stall_s=300, events=False), log=log.append)
    copied = time.time()
    for name in ("clip_too_small", "healthy_mlp"):
        shutil.copytree(GALLERY / name, root / name, ignore=shutil.ignore_patterns("*.py"))
        for p in (root / name).rglob("*"):
            os.utime(p, (copied, copied))  # `cp -r` without -p: every file new
    assert not [a for a in w.poll_once(now=copied + 5).alerts if a.kind == "stalled"]
    later = w.poll_once(now=copied + 5000)
    assert not [a for a in later.alerts if a.kind == "stalled"]
    assert {st.state for st in w.memory.runs.values()} == {"active"}


def test_a_log_rewritten_shorter_is_alerted_once_and_its_old_points_forgotten(watched):
    """Issue 26 item 3: an event file cut shorter under a watched run was read again from byte 0 with its old
    points kept; now the old points go, and the watch says so once."""
    root, db, w, log = watched
    tb = LiveTB(root / "tb_job")
    tb.write(200)
    tb.w.close()
    assert w.poll_once().analysed == 1
    [path] = (root / "tb_job").glob("events.out.tfevents.*")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    second = w.poll_once()
    assert [(a.run_name, a.kind) for a in second.alerts if a.origin == "watch"] == [("tb_job", "rewritten")]
    n, distinct = _scalars(db, "tb_job")
    assert n == distinct < 200
    assert [a for a in w.poll_once().alerts if a.kind == "rewritten"] == []


def test_the_watch_looks_at_exactly_the_files_ingest_reads(tmp_path):
    """One walk (ingest.files): the fingerprint hashes the files ingest reads, so a change in a folder ingest never
    reads (`.git/`, a virtualenv) is no change, and a change to a file a link inside the run points at is one."""
    from forensics.services.watch import PassReport, fingerprint
    from ingest.files import walk

    run = tmp_path / "run"
    for rel in ("train.log", "logs/metrics.csv", "ckpt/a/b.pt", ".git/objects/x", "node_modules/m/index.js",
                "data/real.log", ".hydra/config.yaml"):
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        (run / rel).write_text(rel)
    (run / "latest.log").symlink_to(run / "data" / "real.log")
    (tmp_path / "elsewhere.txt").write_text("not the run's")
    (run / "outside.txt").symlink_to(tmp_path / "elsewhere.txt")
    (run / "linked_dir").symlink_to(run / "logs", target_is_directory=True)
    root = run.resolve()
    assert [str(p) for p in walk(root)] == ["latest.log", "train.log", ".hydra/config.yaml", "ckpt/a/b.pt",
                                            "data/real.log", "logs/metrics.csv"]

    def look() -> tuple[str, int]:
        fp, _, n_files, _ = fingerprint(run, PassReport())
        return fp, n_files

    before = look()
    assert before[1] == len(walk(root))
    (run / ".git" / "objects" / "x").write_text("a commit later")
    (run / "node_modules" / "m" / "index.js").write_text("reinstalled")
    (tmp_path / "elsewhere.txt").write_text("changed, and not read")
    assert look() == before
    with open(run / "data" / "real.log", "a") as f:
        f.write("one more line")
    assert look()[0] != before[0]


def test_the_walk_goes_in_os_walks_order(tmp_path):
    """Ingest's order of files is os.walk's (a folder's files by name, then its sub-folders by name, depth first):
    the order sources are read and stored in, which a new walk must not change."""
    from ingest.files import SKIP_DIRS, walk

    for rel in ("b.txt", "a/z.txt", "a/b/c.txt", "a.b/x", "A/y", "a/_/k", "__pycache__/p.pyc", "z/.hidden"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    expected = []
    for folder, dirnames, filenames in os.walk(tmp_path):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        expected += [os.path.relpath(os.path.join(folder, f), tmp_path) for f in sorted(filenames)]
    assert [str(p) for p in walk(tmp_path.resolve())] == expected
    assert expected[0] == "b.txt" and "__pycache__/p.pyc" not in expected


def test_a_pass_whose_store_read_fails_keeps_the_alerts_made_before_it(watched, monkeypatch):
    """The store is read once per pass, by the first policy that needs it (POLICIES: those that need only the pass
    come first): when that read fails (a locked store), the finding alerts already made are recorded and printed by
    the next pass, though the run is not read again."""
    import ingest.queries

    root, db, w, log = watched
    shutil.copytree(GALLERY / "nan_lr_too_high", root / "job", ignore=shutil.ignore_patterns("*.py"))
    real = ingest.queries.latest_verdicts

    def locked(con, run_ids):
        raise OSError("the store is locked")

    monkeypatch.setattr(ingest.queries, "latest_verdicts", locked)
    with pytest.raises(OSError):
        w.poll_once()
    monkeypatch.setattr(ingest.queries, "latest_verdicts", real)
    printed = []
    w.emit = printed.append
    again = w.poll_once()
    assert again.changed == 0 and "nan_loss" in {a.kind for a in printed}
    assert w.poll_once().alerts == []


def test_a_young_run_is_not_inconclusive_until_it_has_the_points_to_judge(watched):
    """A run that has just started has too few points for the detectors: it is young, not inconclusive, and the
    watch says nothing of it while it grows; once its log is long enough it is judged like any other. A run
    inconclusive for another reason (no training loss) is still alerted at once."""
    root, db, w, log = watched
    tb = LiveTB(root / "young")
    tb.write(2)
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(root / "no_loss")) as other:  # a run that logs no loss at all
        for i in range(40):
            other.add_scalar("train/accuracy", 0.5 + 0.01 * i, i, walltime=1.7e9 + i)
    first = w.poll_once()
    assert [a.run_name for a in first.alerts if a.kind == "inconclusive"] == ["no_loss"]
    tb.write(4)
    assert not [a for a in w.poll_once().alerts if a.kind == "inconclusive"]
    tb.write(120)
    third = w.poll_once()
    assert not [a for a in third.alerts if a.kind == "inconclusive"]
    with connect(db, write=False) as con:
        verdicts = dict(con.execute("SELECT r.name, a.verdict FROM analyses a JOIN runs r USING (run_id) "
                                    "WHERE a.analysis_id = (SELECT max(analysis_id) FROM analyses b "
                                    "WHERE b.run_id = a.run_id)").fetchall())
    assert verdicts["young"] != "inconclusive"


def test_a_watch_beside_another_takes_a_run_the_other_stored_meanwhile(tmp_path, monkeypatch):
    """Two watches on one store: this one's worker read a run into its private store while the other watch stored
    it; this watch logged "could not analyse (the run was stored by another process meanwhile)" and judged the
    run only on a later pass. Now the run is analysed from the store in the same pass: its alerts come, once."""
    from forensics.services import fleet

    root = tmp_path / "runs"
    for name in ("clip_too_small", "plateau_double_softmax"):
        shutil.copytree(GALLERY / name, root / name, ignore=shutil.ignore_patterns("*.py"))
    db = tmp_path / "f.duckdb"
    real, calls = fleet.store_worker_results, []

    def the_other_watch_first(db_, results, options):
        if not calls:
            subprocess.run([sys.executable, "-m", "forensics", "watch", str(results[0].path), "--once", "--db",
                            str(db_)], check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)},
                           cwd=REPO)
        calls.append(results[0].path)
        return real(db_, results, options)

    monkeypatch.setattr(fleet, "store_worker_results", the_other_watch_first)
    log: list[str] = []
    w = Watcher([root], db, WatchSettings(jobs=2, events=False), log=log.append)
    report = w.poll_once()
    assert calls
    assert (report.analysed, report.failed) == (2, 0)
    assert not [line for line in log if "could not analyse" in line]
    assert {a.run_name for a in report.alerts} == {"clip_too_small", "plateau_double_softmax"}
    with connect(db, write=False) as con:
        points = con.execute("SELECT count(*), count(DISTINCT (series_id, source_id, position)) FROM scalars").fetchone()
    assert points[0] == points[1] > 0
