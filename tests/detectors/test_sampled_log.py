"""sampled_log on W&B UI exports (`wandb_export_*.csv`, as the chart's "Download CSV" writes them: every cell
quoted, a `Step` column, `<run> - <metric>` with its `__MIN`/`__MAX` companions) and real TensorBoard files."""

import csv

import numpy as np

from forensics.judge.detectors import SampledLog
from tests.runwriters import curve, load_run, write_tb

RUN = "lucky-sun-12"


def _export(root, steps, values, bucket: int):
    """The UI's bucketed export: one row per `bucket` consecutive points, at the bucket's first step, with the
    bucket's mean and its extremes in the companions."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / "wandb_export_2025-03-15T17_09_08.233+01_00.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, quoting=csv.QUOTE_ALL)
        w.writerow(["Step", f"{RUN} - train/loss", f"{RUN} - train/loss__MIN", f"{RUN} - train/loss__MAX"])
        for i in range(0, len(steps), bucket):
            b = values[i:i + bucket]
            w.writerow([int(steps[i]), repr(float(np.mean(b))), repr(float(np.min(b))), repr(float(np.max(b)))])
    return root


def test_fires_on_a_bucketed_ui_export(tmp_path):
    steps, loss = curve(n=10000, every=1)
    loss[4321] = 40.0  # the spike is inside a bucket: its mean hides it
    run = load_run(_export(tmp_path / "r", steps, loss, bucket=20), tmp_path / "f.duckdb")
    [f] = SampledLog().check(run)
    assert f.kind == "sampled_log" and f.series == "train/loss" and f.step is None
    assert f.evidence["format"] == "wandb_export" and f.evidence["points"] == 500
    assert f.evidence["steps_covered"] == 9981


def test_every_logged_point_in_event_files_is_silent(tmp_path):
    run = load_run(write_tb(tmp_path / "r", {"train/loss": curve(n=500, every=10)}), tmp_path / "f.duckdb")
    assert list(SampledLog().check(run)) == []


def test_a_complete_export_of_a_short_run_is_silent(tmp_path):
    """A short run fits the chart: each row is one logged point (min = max = value), nothing was sampled away."""
    steps, loss = curve(n=300, every=10)
    run = load_run(_export(tmp_path / "r", steps, loss, bucket=1), tmp_path / "f.duckdb")
    assert list(SampledLog().check(run)) == []


def _console_epochs(root, redraws, batches: bool) -> None:
    """A console log of one summary line per epoch (`Epoch e/E Train Loss: X | Val Loss: Y`) under a tqdm bar redrawn
    a varying number of times (`\\r` between redraws), as `print` after `tqdm(...)` leaves it; with `batches`, lines
    `Epoch e/E batch b/N loss X` at irregular batches instead."""
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    with open(root / "train.log", "w") as f:
        for e, n in enumerate(redraws, 1):
            f.write("".join(f"Epoch {e}/400 train: {k:3d}%|##        | {k}/100 [00:01<00:00, 42.1it/s]\r"
                            for k in range(n)) + "\n")
            if batches:
                for b in sorted(rng.choice(np.arange(1, 1000), 6, replace=False)):
                    f.write(f"Epoch {e}/400 batch {b}/1000 loss {1 / (e + b / 1000):.4f}\n")
            else:
                f.write(f"[Model] Epoch {e}/400 Train Loss: {1 / e:.4f} | Val Loss: {1.1 / e:.4f}\n")


def test_a_summary_per_epoch_between_progress_bars_is_no_sample(tmp_path):
    redraws = np.random.default_rng(1).integers(50, 500, 60)
    _console_epochs(tmp_path / "e", redraws, batches=False)
    assert list(SampledLog().check(load_run(tmp_path / "e", tmp_path / "e.duckdb"))) == []
    # batches printed at irregular counts within each epoch are read as what they are
    _console_epochs(tmp_path / "b", redraws[:10], batches=True)
    assert [f.kind for f in SampledLog().check(load_run(tmp_path / "b", tmp_path / "b.duckdb"))] == ["sampled_log"]
