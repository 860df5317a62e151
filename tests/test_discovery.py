"""Run discovery (ingest/discovery.py) on a root that mixes every layout, each written by its real writer:
SummaryWriter logdirs, a W&B offline run (the gallery's, written by wandb), HF's TrainerState JSON, Lightning's
CSVLogger layout, MLflow's FileStore metric lines, a console log beside checkpoints."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from ingest.discovery import discover, discover_runs
from sample_runs.gen.loggers import LightningCSV
from tests.paths import REAL_RUNS, REPO, SHARED
from tests.runwriters import curve, hf_history, write_tb, write_trainer_state

GALLERY = REPO / "sample_runs" / "runs"
WANDB_RUN = next((GALLERY / "nan_log_zero" / "wandb").glob("offline-run-*"))


def _tb(path: Path, n: int = 5) -> None:
    write_tb(path, {"loss": curve(n)})


def _lightning(root: Path, version: int = 0) -> None:
    """Lightning's CSVLogger files (the gallery's writer) in root/lightning_logs/version_<version>."""
    staging = root.parent / f".staging_{root.name}_{version}"
    logger = LightningCSV(staging, {"lr": 0.1}, {"loss": "train_loss"}, every=1, steps_per_epoch=10)
    for step in range(1, 6):
        logger.train(step, {"loss": 1.0 / step}, 0.0)
    logger.close()
    dest = root / "lightning_logs" / f"version_{version}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    (staging / "lightning_logs" / "version_0").rename(dest)
    shutil.rmtree(staging)


def _mlflow(run: Path) -> None:
    """MLflow FileStore's layout: metrics/<key> lines `f"{timestamp} {value} {step}\\n"`, meta.yaml."""
    (run / "metrics").mkdir(parents=True)
    with open(run / "metrics" / "loss", "a") as f:
        for step in range(5):
            f.write(f"{1628697792090 + step} {1.0 / (step + 1)} {step}\n")
    (run / "meta.yaml").write_text(f"run_id: {run.name}\nstatus: 1\n")


def _hf(path: Path) -> None:
    steps, loss = curve(5)
    write_trainer_state(path, hf_history(steps, loss, np.ones(5)))


@pytest.fixture(scope="module")
def mixed_root(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A team's runs folder with every layout; returns the root and the expected {relative path: kind}."""
    root = tmp_path_factory.mktemp("team")
    expected: dict[str, str] = {}
    # A TensorBoard logdir whose sub-folders are runs; one of them writes train/ and val/ (one run).
    _tb(root / "tb_logs" / "run_a")
    _tb(root / "tb_logs" / "run_b" / "train")
    _tb(root / "tb_logs" / "run_b" / "val")
    expected |= {"tb_logs/run_a": "tensorboard_logdir_run", "tb_logs/run_b": "tensorboard_logdir_run"}
    # A project whose wandb/ folder holds two runs: each is a run (latest-run is a symlink, not followed).
    for run_id in ("aaaa1111", "bbbb2222"):
        shutil.copytree(WANDB_RUN, root / "proj" / "wandb" / f"offline-run-20261123_071839-{run_id}")
    (root / "proj" / "wandb" / "latest-run").symlink_to(root / "proj" / "wandb" / "offline-run-20261123_071839-aaaa1111")
    expected |= {f"proj/wandb/offline-run-20261123_071839-{i}": "wandb_run" for i in ("aaaa1111", "bbbb2222")}
    # A job folder with one W&B run plus its checkpoints: the job folder is the run.
    shutil.copytree(WANDB_RUN, root / "job7" / "wandb" / WANDB_RUN.name)
    (root / "job7" / "checkpoints").mkdir()
    shutil.copy(next((GALLERY / "nan_log_zero" / "checkpoints").glob("step_*.pt")), root / "job7" / "checkpoints")
    expected["job7"] = "wandb_run"
    # HF output dirs: trainer_state.json at the root; another with only checkpoint-N/ folders so far.
    _hf(root / "hf" / "bert_out")
    _hf(root / "hf" / "gpt_out" / "checkpoint-500")
    expected |= {"hf/bert_out": "hf_output_dir", "hf/gpt_out": "hf_output_dir"}
    # Lightning: one version under a project folder (the folder is the run); two versions side by side (split).
    _lightning(root / "pl_single")
    _lightning(root / "pl_multi", version=0)
    _lightning(root / "pl_multi", version=1)
    expected |= {"pl_single": "lightning_version", "pl_multi/lightning_logs/version_0": "lightning_version",
                 "pl_multi/lightning_logs/version_1": "lightning_version"}
    # MLflow file store: two runs in one experiment.
    for run_hex in ("ed05f9cd", "aa11bb22"):
        _mlflow(root / "mlflow_proj" / "mlruns" / "1" / run_hex)
    expected |= {f"mlflow_proj/mlruns/1/{h}": "mlflow_run" for h in ("ed05f9cd", "aa11bb22")}
    # A console log beside checkpoints.
    shutil.copytree(GALLERY / "frozen_layer", root / "slurm" / "job_99", ignore=shutil.ignore_patterns("*.py"))
    expected["slurm/job_99"] = "console_and_checkpoints"
    # Not runs: a dataset folder, hidden folders, a plain text log with no metrics, a symlink loop.
    (root / "data" / "images").mkdir(parents=True)
    (root / "data" / "images" / "cat.txt").write_text("meow")
    _tb(root / ".cache" / "hidden_run")
    (root / "notes").mkdir()
    (root / "notes" / "server.log").write_text("service started\nservice stopped\n")
    (root / "data" / "loop").symlink_to(root)
    return root, expected


def test_mixed_root_finds_each_run_once_with_its_kind(mixed_root):
    root, expected = mixed_root
    found = {str(r.path.relative_to(root.resolve())): r.kind for r in discover_runs(root)}
    assert found == expected


def test_reasons_say_why(mixed_root):
    root, _ = mixed_root
    by_path = {str(r.path.relative_to(root.resolve())): r.reason for r in discover_runs(root)}
    assert "train/, val/" in by_path["tb_logs/run_b"]
    assert "wandb/ folder holds one run" in by_path["job7"]
    assert "checkpoint-N/" in by_path["hf/gpt_out"]
    assert "train.log" in by_path["slurm/job_99"] and "weights/" in by_path["slurm/job_99"]


def test_a_run_given_as_root_is_that_one_run(mixed_root):
    root, _ = mixed_root
    run = root / "tb_logs" / "run_b"
    assert [r.path for r in discover_runs(run)] == [run.resolve()]
    assert [r.path for r in discover_runs(root / "job7")] == [(root / "job7").resolve()]
    assert len(discover_runs(root / "pl_multi")) == 2  # two Lightning versions: two runs


def test_gallery_is_33_runs_named_by_their_folders():
    runs = discover_runs(GALLERY)
    assert sorted(r.name for r in runs) == sorted(p.name for p in GALLERY.iterdir() if p.is_dir())
    assert all([x.path for x in discover_runs(GALLERY / r.name)] == [(GALLERY / r.name).resolve()] for r in runs)


@pytest.mark.needs_shared
def test_real_runs_each_one_run():
    runs = discover_runs(REAL_RUNS)
    assert sorted(r.name for r in runs) == sorted(p.name for p in REAL_RUNS.iterdir() if p.is_dir())


def test_system_folders_are_not_runs(tmp_path):
    logs = tmp_path / "var_log"
    logs.mkdir()
    (logs / "syslog.log").write_text("Nov 25 03:00:01 host CRON[1]: (root) CMD (run-parts)\n" * 50)
    (logs / "dpkg.log").write_text("2026-11-25 03:00:00 status installed libc6:amd64 2.36\n" * 50)
    assert discover_runs(logs) == []


def test_depth_and_folder_limits_are_reported(tmp_path):
    deep = tmp_path / "a" / "b" / "c" / "d"
    _tb(deep / "run")
    assert discover(tmp_path, max_depth=2).truncated and discover(tmp_path, max_depth=2).runs == []
    assert [r.name for r in discover(tmp_path).runs] == ["run"]
    assert discover(tmp_path, max_dirs=2).truncated


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads folders whatever their permissions")
def test_unreadable_folder_is_reported_and_the_rest_found(tmp_path):
    _tb(tmp_path / "ok_run")
    locked = tmp_path / "locked"
    _tb(locked / "hidden_run")
    locked.chmod(0)
    try:
        d = discover(tmp_path)
    finally:
        locked.chmod(0o755)
    assert [r.name for r in d.runs] == ["ok_run"]
    assert [p for p, _ in d.errors] == [str(locked)]


def test_ten_thousand_runs_walk_is_one_listing_per_run(tmp_path):
    """Bounded walking: runs are not descended into, so a root of N event-file runs costs about N listings."""
    one = tmp_path / "template"
    _tb(one)
    event = next(one.iterdir())
    root = tmp_path / "root"
    for i in range(300):
        (root / f"user{i % 3}" / f"run_{i}").mkdir(parents=True)
        os.link(event, root / f"user{i % 3}" / f"run_{i}" / event.name)
    d = discover(root)
    assert len(d.runs) == 300
    assert d.dirs_scanned == 1 + 3 + 300


@pytest.mark.parametrize("name", ["stdout", "train.md", "run.txt", "train.log.1"])
@pytest.mark.needs_shared
def test_a_log_under_a_name_no_reader_claims_is_found_by_its_content(tmp_path, name):
    # a real log (tacotron2's lines, from a GitHub issue) saved as `stdout`, pasted into a `.md`, rotated
    run = tmp_path / "job"
    run.mkdir()
    (run / name).write_bytes((REAL_RUNS.parent / "real_runs_test" / "log_tacotron485" / "train.log").read_bytes())
    (run / "README").write_text("Notes: lr 1e-3, batch 32, 2 GPUs.\n")
    runs = discover_runs(tmp_path)
    assert [(r.name, r.kind) for r in runs] == [("job", "console_log")] and name in runs[0].reason


def test_a_short_log_named_as_a_training_log_that_prints_a_loss_is_a_run(tmp_path):
    """A Keras run that died after three batches leaves a `train.log` of four lines (`loss: inf`): `analyze DIR`
    calls it failed, so `--all` and watch must take it too. A log of that name that prints no loss is no run."""
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    (crashed / "train.log").write_text(
        "Epoch 1/10\n"
        "  3/234 [..............................] - ETA: 33:37:24 - loss: 44.4110Batch 3: Invalid loss, terminating\n"
        "  4/234 [..............................] - ETA: 25:09:00 - loss: inf \n")
    quiet = tmp_path / "quiet"
    quiet.mkdir()
    (quiet / "train.log").write_text("starting\nloading data from /data/x\ndone\n")
    assert [r.path.name for r in discover_runs(tmp_path)] == ["crashed"]


def _writers(root: Path, subdirs: list[str]) -> None:
    """One process opening one SummaryWriter per sub-folder at its start (one per network), as GAN scripts do."""
    from torch.utils.tensorboard import SummaryWriter

    writers = [SummaryWriter(str(root / d)) for d in subdirs]
    for step in range(3):
        for i, w in enumerate(writers):
            w.add_scalar("loss", 1.0 / (step + 1 + i), step)
    for w in writers:
        w.close()


def test_writers_other_processes_began_in_sibling_folders_stay_runs_of_their_own(tmp_path):
    import subprocess
    import sys

    for d in ("seed0", "seed1"):  # two launches: two processes, two pids
        subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                        "from tests.test_discovery import _writers; _writers(Path(sys.argv[1]), [sys.argv[2]])",
                        str(tmp_path / "sweep"), d], check=True, cwd=REPO)
    assert [r.path.name for r in discover_runs(tmp_path)] == ["seed0", "seed1"]


@pytest.mark.needs_shared
def test_w_and_b_files_kept_without_their_history_are_one_run(tmp_path):
    """W&B's `files/` kept alone (summary, config, a console of progress bars): the folder above is the run, whether
    or not the console is recognised, so the summary and `output.log` are read together."""
    kept = SHARED / "wild" / "structured" / "m022_wandb"
    shutil.copytree(kept, tmp_path / "run")
    (tmp_path / "run" / "files" / "output.log").write_text("\x1b[2K\n")  # nothing a console reader takes
    [run] = discover_runs(tmp_path)
    assert (run.path.name, run.kind) == ("run", "wandb_run") and "wandb-summary.json" in run.reason
