"""Fleet mode (`forensics analyze ROOT --all --jobs N`, forensics/services/fleet.py): workers ingest into private stores and
the driver appends their tables; the store and the diagnoses equal a sequential analysis of each run, a broken run
is reported while the rest complete, and a second pass stores nothing twice. `--all --ray` on a local Ray
(ray is in the test extra) gives the same diagnoses."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest

from forensics.cli import main
from forensics.services.fleet import Options, store_worker_results, work_on_run
from ingest.store import connect
from tests.paths import REPO

GALLERY = REPO / "sample_runs" / "runs"
# One run of each layout: TensorBoard train/val, HF output dir with checkpoints (ids of checkpoints and deltas
# renumbered), Lightning, W&B, console log, a W&B UI export.
MIXED = ("dist_mismatch_val_norm", "nan_sqrt_norm", "flat_no_backward", "val_noise_tiny_val", "plateau_double_softmax",
         "sampled_wandb_export")


@pytest.fixture(scope="module")
def mixed_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fleet") / "runs"
    for name in MIXED:
        shutil.copytree(GALLERY / name, root / name, symlinks=True, ignore=shutil.ignore_patterns("*.py"))
    broken = root / "broken"
    broken.mkdir()
    (broken / "events.out.tfevents.1.host").write_bytes(b"\x00not an event file" * 8)
    return root


def _store_digest(db: Path) -> dict:
    """What the store holds, without the ids a writer draws from sequences. Values computed from tensors compare
    with NaN's sign dropped: a NaN made by arithmetic (0/0 on x86 gives -nan) takes its sign from the code path
    torch took in that process, which is no evidence; values read from logs keep every bit."""
    with connect(db, write=False) as con:
        q = lambda sql: sorted(con.execute(sql).fetchall(), key=repr)  # noqa: E731
        return {
            "runs": q("SELECT run_id, name, root FROM runs"),
            "sources": q("SELECT run_id, path, format, grp, size_bytes, resume_at, n_points, duplicate_points, status "
                         "FROM sources"),
            "series": q("SELECT run_id, grp, tag, name, role, canonical, ordinal, n_points, n_nonfinite, first_step, "
                        "last_step FROM series"),
            "scalars": q("SELECT r.run_id, r.name, o.path, s.position, s.step, s.value::VARCHAR, s.wall_time, c.epoch, "
                         "c.batch FROM scalars s JOIN series r USING (series_id) JOIN sources o USING (source_id) "
                         "LEFT JOIN point_counters c ON (c.series_id, c.source_id, c.position, c.step) = "
                         "(s.series_id, s.source_id, s.position, s.step)"),
            "configs": q("SELECT c.run_id, o.path, c.name, c.key, c.value FROM configs c JOIN sources o USING (source_id)"),
            "issues": q("SELECT run_id, path, position, kind, detail FROM ingest_issues"),
            "checkpoints": q("SELECT run_id, path, step, format, n_tensors, n_nonfinite, finite, status FROM checkpoints"),
            "tensor_stats": q(f"SELECT t.run_id, c.path, t.tensor, {_nan('t.l2')}, t.n_nan, t.n_inf FROM tensor_stats t "
                              "JOIN checkpoints c USING (ckpt_id)"),
            "tensor_deltas": q(f"SELECT d.run_id, c.path, p.path, d.tensor, {_nan('d.ratio')} FROM tensor_deltas d "
                               "JOIN checkpoints c ON c.ckpt_id = d.ckpt_id JOIN checkpoints p ON p.ckpt_id = d.prev_ckpt_id"),
            "findings": q("SELECT run_id, finding_id, kind, severity, step, step_end, series, summary, evidence, event_id "
                          "FROM findings"),
        }


def _nan(col: str) -> str:
    return f"CASE WHEN isnan({col}) THEN 'nan' ELSE {col}::VARCHAR END"


@pytest.fixture(scope="module")
def sequential(mixed_root, tmp_path_factory):
    db = tmp_path_factory.mktemp("seq") / "f.duckdb"
    return db, _run_cli(mixed_root, db, "--jobs", "1")


def _run_cli(root: Path, db: Path, *extra: str) -> tuple[int, dict]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["analyze", str(root), "--all", "--db", str(db), "--json", *extra])
    return code, json.loads(out.getvalue())


def _analyses(result: dict) -> dict:
    """Each run's error and diagnosis, less the database path, in `db` and in the replay command (the two modes
    are compared on two databases)."""
    return {Path(r["path"]).name: (r["error"], r["analysis"] and _without_db(r["analysis"])) for r in result["runs"]}


def _without_db(analysis: dict) -> dict:
    out = {k: v for k, v in analysis.items() if k != "db"}
    replay = out.get("replay_from")
    if replay and "command" in replay:
        assert replay["command"].endswith(f" --db {analysis['db']}")  # the store the run is in, not a worker's copy
        out["replay_from"] = {**replay, "command": replay["command"].removesuffix(f" --db {analysis['db']}")}
    return out


@pytest.fixture(scope="module")
def parallel(mixed_root, tmp_path_factory):
    db = tmp_path_factory.mktemp("par") / "f.duckdb"
    return db, _run_cli(mixed_root, db, "--jobs", "2")


def test_jobs_2_equals_sequential_exactly(sequential, parallel):
    seq_db, (seq_code, seq) = sequential
    db, (code, par) = parallel
    assert {r["where"] for r in par["runs"]} == {"process"}
    assert _analyses(par) == _analyses(seq)
    assert _store_digest(db) == _store_digest(seq_db)
    assert code == seq_code == 2  # the broken run: the tool could not do all of its job


def test_a_broken_run_is_reported_and_the_rest_complete(sequential):
    _, (code, result) = sequential
    by_name = {Path(r["path"]).name: r for r in result["runs"]}
    assert result["failed"] == 1 and by_name["broken"]["error"] and by_name["broken"]["analysis"] is None
    assert all(by_name[n]["analysis"] is not None for n in MIXED)
    assert "masked_nonfinite" in {f["kind"] for f in by_name["nan_sqrt_norm"]["analysis"]["findings"]}
    assert by_name["nan_sqrt_norm"]["kind"] == "hf_output_dir"


def test_second_pass_reads_only_what_is_new_and_equals_sequential(mixed_root, sequential, parallel):
    """A run is added to the root; the stored runs are ingested by the driver (nothing new) and re-analysed
    by workers reading the store, the new one goes to a worker: the store equals a sequential second pass."""
    seq_db, _ = sequential
    db, _ = parallel
    before = _store_digest(db)
    shutil.copytree(GALLERY / "clip_too_small", mixed_root / "clip_too_small", ignore=shutil.ignore_patterns("*.py"))
    try:
        code, again = _run_cli(mixed_root, db, "--jobs", "2")
        _, seq_again = _run_cli(mixed_root, seq_db, "--jobs", "1")
    finally:
        shutil.rmtree(mixed_root / "clip_too_small")
    after = _store_digest(db)
    where = {Path(r["path"]).name: r["where"] for r in again["runs"]}
    assert where["clip_too_small"] == "process" and where["nan_sqrt_norm"] == "process"
    assert len(after["scalars"]) > len(before["scalars"])
    assert after["tensor_stats"] == before["tensor_stats"]  # no checkpoint read twice
    assert after == _store_digest(seq_db)
    assert _analyses(again) == _analyses(seq_again)


def test_cli_all_text_and_bad_root(mixed_root, tmp_path, capsys):
    db = tmp_path / "f.duckdb"
    assert main(["analyze", str(mixed_root / "plateau_double_softmax"), "--all", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("plateau_double_softmax: ") and "1 of 1 runs analysed" in out
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["analyze", str(empty), "--all", "--db", str(db)]) == 2
    assert "no runs found" in capsys.readouterr().err
    assert main(["analyze", str(mixed_root), "--all", "--jobs", "0"]) == 2


@pytest.mark.slow  # ray.init takes 5-20 s on two shared cores
@pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                    reason="ray is not installed: it is in the test extra (pip install -e '.[test]')")
def test_ray_local_all_equals_sequential(mixed_root, sequential, tmp_path):
    """`analyze ROOT --all --ray` with a local Ray, as a user runs it, on a small root (two runs and the broken
    one): every run's error and diagnosis equal the in-process ones, and the store holds their points."""
    import ray

    root = tmp_path / "runs"
    for name in ("plateau_double_softmax", "dist_mismatch_val_norm", "broken"):
        shutil.copytree(mixed_root / name, root / name, symlinks=True)
    db = tmp_path / "f.duckdb"
    try:
        code, result = _run_cli(root, db, "--ray")
    finally:
        ray.shutdown()
    _, (seq_code, seq) = sequential
    assert code == seq_code == 2  # the broken run, as in-process
    assert {r["where"] for r in result["runs"]} == {"ray"}
    expected = _analyses(seq)
    got = _analyses(result)
    assert set(got) == {"plateau_double_softmax", "dist_mismatch_val_norm", "broken"}
    for name, (error, analysis) in got.items():
        assert (error is None) == (expected[name][0] is None), name
        assert analysis == expected[name][1], name
    assert any(analysis["findings"] for _, analysis in got.values() if analysis)  # something to compare
    two = ("plateau_double_softmax", "dist_mismatch_val_norm")
    got_points, want_points = _points_by_run(_store_digest(db), two), _points_by_run(_store_digest(sequential[0]), two)
    assert got_points == want_points and all(got_points.values())


def _points_by_run(digest: dict, names: tuple[str, ...]) -> dict[str, list]:
    """Each named run's scalars rows, less the run id (a hash of the run's path: the copies differ)."""
    name_of = {r[0]: r[1] for r in digest["runs"]}
    return {n: sorted(row[1:] for row in digest["scalars"] if name_of[row[0]] == n) for n in names}


def test_the_writer_stores_many_runs_in_one_transaction_and_a_failed_one_alone(mixed_root, sequential, tmp_path):
    """The single writer appends a batch of workers' results in one transaction; when it fails, each run is
    written in a transaction of its own: the run whose rows cannot be written is reported (to retry), the others
    are stored whole, with the points and findings a sequential analysis stores."""
    import pyarrow as pa

    names = ("plateau_double_softmax", "dist_mismatch_val_norm", "val_noise_tiny_val")
    results = [work_on_run(str((mixed_root / n).resolve()), Options()) for n in names]
    bad = results[1].tables["series"]  # a column the store has not: this run's INSERT fails, and only its
    results[1].tables["series"] = bad.append_column("not_a_column", pa.array([1] * bad.num_rows))
    db = tmp_path / "f.duckdb"
    store_worker_results(db, results, Options())
    assert [r.error is None for r in results] == [True, False, True]
    assert results[1].retry and "not_a_column" in results[1].error and results[1].analysis is None
    assert all(r.tables is None and r.store_seconds > 0 for r in results)
    got, seq = _store_digest(db), _store_digest(sequential[0])
    kept = {names[0], names[2]}
    assert {r[1] for r in got["runs"]} == kept
    run_of = {r[0]: r[1] for r in seq["runs"]}
    for table in ("scalars", "series"):  # each row's first column is its run
        assert got[table] == [row for row in seq[table] if run_of[row[0]] in kept], table
    # as sets: the sequential store may hold a second analysis of each run (the second-pass test), the same rows
    assert set(got["findings"]) == {row for row in seq["findings"] if run_of[row[0]] in kept}


def test_ids_that_are_not_contiguous_are_looked_up(tmp_path):
    """append_run_tables renumbers by offset when both numberings are contiguous, else through a lookup table:
    drop one series from a worker's export so its ids have a gap, and every point still lands on its series."""
    import pyarrow.compute as pc

    from ingest.queries import export_run_tables
    from ingest.run import ingest_run
    from ingest.writes import append_run_tables

    private = tmp_path / "private.duckdb"
    ingest_run(GALLERY / "dist_mismatch_val_norm", private, progress=None)
    with connect(private, write=False) as con:
        tables = export_run_tables(con)
        expected = sorted(con.execute("SELECT r.name, count(*), sum(s.value) FROM scalars s JOIN series r "
                                      "USING (series_id) WHERE r.series_id <> 2 GROUP BY 1").fetchall())
    tables["series"] = tables["series"].filter(pc.not_equal(tables["series"]["series_id"], 2))
    tables["scalars"] = tables["scalars"].filter(pc.not_equal(tables["scalars"]["series_id"], 2))
    store = tmp_path / "store.duckdb"
    with connect(store, write=True) as con:
        con.execute("SELECT nextval('series_id_seq') FROM range(5)")  # the store has numbered series before
        append_run_tables(con, tables)
        got = sorted(con.execute("SELECT r.name, count(*), sum(s.value) FROM scalars s JOIN series r "
                                 "USING (series_id) GROUP BY 1").fetchall())
        assert con.execute("SELECT min(series_id) FROM series").fetchone()[0] == 6
    assert got == expected and len(got) >= 2


@pytest.mark.skipif(os.geteuid() == 0, reason="root lists folders whatever their permissions")
def test_all_names_the_folders_it_could_not_list(tmp_path, capsys):
    """Issue 26: `analyze ROOT --all` left out folders it could not list without a word (watch names them)."""
    root = tmp_path / "runs"
    shutil.copytree(GALLERY / "healthy_mlp", root / "mlp", ignore=shutil.ignore_patterns("*.py"))
    locked = root / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        code = main(["analyze", str(root), "--all", "--db", str(tmp_path / "f.duckdb"), "--json"])
    finally:
        locked.chmod(0o755)
    out = capsys.readouterr()
    assert code == 0
    assert f"cannot list {locked}" in out.err
    assert json.loads(out.out)["not_listed"][0]["path"] == str(locked)


def test_all_names_each_folder_of_files_it_left_out_and_why(tmp_path, capsys):
    """`--all` counted only the runs it took: a folder of files that is no run was left out without a word. Each
    is named with why, in the text and in --json; a folder of folders (a parent) is not."""
    root = tmp_path / "runs"
    shutil.copytree(GALLERY / "healthy_mlp", root / "group" / "mlp", ignore=shutil.ignore_patterns("*.py"))
    (root / "notes").mkdir()
    (root / "notes" / "README.md").write_text("# what we tried\n")
    (root / "plots").mkdir()
    for name in ("a.png", "b.png", "c.png", "d.png"):
        (root / "plots" / name).write_bytes(b"\x89PNG\r\n\x1a\n")
    db = str(tmp_path / "f.duckdb")
    assert main(["analyze", str(root), "--all", "--db", db]) == 0
    text = capsys.readouterr().out.splitlines()
    assert "notes: not a run: its one file is not a training log, metrics file or checkpoint (README.md)" in text
    assert ("plots: not a run: none of its 4 files is a training log, metrics file or checkpoint (a.png, b.png, c.png "
            "and 1 more)") in text
    assert not any(line.startswith("group:") for line in text)
    assert "2 folders with files left out, not runs (named above)" in text[-1]
    assert main(["analyze", str(root), "--all", "--db", db, "--json"]) == 0
    left = json.loads(capsys.readouterr().out)["left_out"]
    assert [Path(x["path"]).name for x in left] == ["notes", "plots"]


def test_workers_copy_one_empty_store_made_by_the_driver_and_it_is_removed(mixed_root, tmp_path, monkeypatch):
    """Each worker's private store starts as a copy of one schema-only store (not a schema created per run); the
    copy's folder is the driver's scratch, gone when the runs are written, and largest runs go first."""
    import tempfile

    from forensics.services import fleet

    made, order = [], []
    real_empty, real_largest = fleet.empty_store, fleet._largest_first
    monkeypatch.setattr(fleet, "empty_store", lambda folder: made.append(real_empty(folder)) or made[-1])
    monkeypatch.setattr(fleet, "_largest_first", lambda paths: order.extend(real_largest(paths)) or list(order))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    paths = [str(mixed_root / n) for n in ("flat_no_backward", "nan_sqrt_norm")]
    results = fleet.analyze_runs(paths, tmp_path / "f.duckdb", Options(), jobs=2)
    assert [r.error for r in results] == [None, None] and all(r.analysis is not None for r in results)
    assert len(made) == 1 and not made[0].exists()
    assert [p.name for p in scratch.iterdir() if not p.name.startswith("pymp-")] == []  # pymp-: multiprocessing's

    def size(p):
        return sum(f.stat().st_size for f in Path(p).rglob("*") if f.is_file() and not f.is_symlink())
    assert [size(p) for p in order] == sorted((size(p) for p in paths), reverse=True)


def test_workers_die_with_a_killed_driver_and_leave_no_folder(mixed_root, tmp_path):
    """kill -9 of `analyze ROOT --all --jobs 2` left both workers, the forkserver and the resource tracker alive
    and idle for ever (the workers wait on a queue only the dead driver fed), and their folders in /dev/shm."""
    import signal
    import subprocess
    import sys
    import time

    import psutil

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "forensics", "analyze", str(mixed_root), "--all", "--jobs", "2",
                             "--db", str(tmp_path / "f.duckdb")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    driver = psutil.Process(proc.pid)
    family: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                family = driver.children(recursive=True)
            except psutil.NoSuchProcess:
                break
            workers = [p for p in family if p.ppid() != proc.pid]  # forked by the forkserver
            if len(workers) >= 2:
                break
            time.sleep(0.05)
        assert proc.poll() is None and len(family) >= 4, "the driver finished before its workers were seen"
        family = driver.children(recursive=True)
        folders = [f"forensics-worker-{p.pid}-" for p in family]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        gone, alive = psutil.wait_procs(family, timeout=30)
        assert alive == [], f"left running after the driver's death: {[p.cmdline()[-1][:60] for p in alive]}"
        left = [e for e in os.listdir("/dev/shm") if e.startswith(tuple(folders))] if os.path.isdir("/dev/shm") else []
        assert left == []
    finally:
        for p in family:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass


def test_a_start_removes_the_folders_of_owners_that_are_gone(mixed_root, tmp_path, monkeypatch):
    """A worker killed on its own (out of memory) leaves its private store behind: the next start removes every
    fleet folder whose owner process is gone, and keeps those of live owners and of other names."""
    import subprocess
    import sys
    import tempfile

    from forensics.services import fleet

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.setattr(fleet, "_scratch_parent", lambda: str(scratch))
    monkeypatch.setattr(fleet, "_swept", False)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    for name in (f"forensics-worker-{dead}-x1", f"forensics-fleet-{dead}-x2", f"forensics-worker-{os.getpid()}-x3",
                 "forensics-worker-unowned", "other-folder"):
        (scratch / name).mkdir()
        (scratch / name / "run.duckdb").write_bytes(b"x")
    code = main(["analyze", str(mixed_root), "--all", "--db", str(tmp_path / "f.duckdb"), "--json", "--jobs", "2"])
    assert code == 2  # the broken run
    assert sorted(p.name for p in scratch.iterdir() if not p.name.startswith("pymp-")) == [
        f"forensics-worker-{os.getpid()}-x3", "forensics-worker-unowned", "other-folder"]


def test_a_run_another_process_stored_meanwhile_is_analysed_from_the_store(mixed_root, sequential, tmp_path,
                                                                           monkeypatch):
    """`--all` beside a running watch: a worker read a run into its private store while another process (a watch
    on the same store) stored it; the driver cannot append the worker's copy (its points would be there twice),
    and said "could not be analysed ... stored by another process meanwhile", exit 2, for a run that was analysed.
    Now such a run is analysed from the store: every run has its diagnosis, exit 0, each point stored once."""
    import subprocess
    import sys

    from forensics.services import fleet

    names = ("plateau_double_softmax", "dist_mismatch_val_norm")
    root = tmp_path / "runs"
    for name in names:
        shutil.copytree(mixed_root / name, root / name, symlinks=True)
    db = tmp_path / "f.duckdb"
    real, calls = fleet.store_worker_results, []

    def another_process_first(db_, results, options):
        if not calls:  # the other process stores the first run the workers finished, before this driver writes
            subprocess.run([sys.executable, "-m", "forensics", "analyze", results[0].path, "--db", str(db_)],
                           check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO)
        calls.append([r.path for r in results])
        return real(db_, results, options)

    monkeypatch.setattr(fleet, "store_worker_results", another_process_first)
    code, result = _run_cli(root, db, "--jobs", "2")
    assert calls, "no worker's results were written"
    assert result["failed"] == 0 and [r["error"] for r in result["runs"]] == [None, None]
    assert code == 0
    expected = _analyses(sequential[1][1])
    for name, (error, analysis) in _analyses(result).items():
        assert analysis == expected[name][1], name
    got, want = _points_by_run(_store_digest(db), names), _points_by_run(_store_digest(sequential[0]), names)
    assert got == want and all(got.values())  # the run the other process stored: its points once
