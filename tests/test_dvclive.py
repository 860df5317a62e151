"""DVCLive folders written by the real `dvclive.Live`: the per-metric TSVs are the series, `metrics.json` is their
last values (a document, not points), and a loss logged only in components, one TSV each, gets its sum."""

from __future__ import annotations

import os

import duckdb
import pytest

from ingest.run import ingest_run

dvclive = pytest.importorskip("dvclive", reason="the test extra installs dvclive")


def _write(root, metrics):
    """Log `metrics(epoch) -> {name: value}` for 4 epochs with DVCLive, as a training loop calls it."""
    cwd = os.getcwd()
    os.chdir(root)  # DVCLive writes its dvc.yaml where it runs
    try:
        with dvclive.Live(save_dvc_exp=False) as live:
            live.log_param("lr", 0.1)
            for epoch in range(4):
                for name, value in metrics(epoch).items():
                    live.log_metric(name, value)
                live.next_step()
    finally:
        os.chdir(cwd)


def _series(db, run_id):
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT series_id, grp, name, role FROM series WHERE run_id = ?", [run_id]).fetchall()
        points = {name: con.execute("SELECT step, value FROM scalars WHERE series_id = ? ORDER BY step",
                                    [sid]).fetchall() for sid, _, name, _ in rows}
        configs = {k for (k,) in con.execute("SELECT DISTINCT name FROM configs WHERE run_id = ?", [run_id]).fetchall()}
    finally:
        con.close()
    return {name: (grp, role) for _, grp, name, role in rows}, points, configs


def test_the_tsvs_are_the_series_and_the_summary_no_point(tmp_path):
    _write(tmp_path, lambda e: {"train/loss": 2.0 / (e + 1), "eval/loss": 2.5 / (e + 1), "acc": 0.5 + e / 10})
    report = ingest_run(tmp_path, tmp_path / "f.duckdb")
    series, points, configs = _series(tmp_path / "f.duckdb", report.run_id)
    assert [n for n, (_, role) in series.items() if role == "train_loss"] == ["train/loss"]
    assert points["train/loss"] == [(0, 2.0), (1, 1.0), (2, pytest.approx(2 / 3)), (3, 0.5)]
    assert not [n for n, (grp, _) in series.items() if grp.endswith("metrics.json")]  # its last values: no points
    assert "metrics.json" in configs


def test_a_loss_logged_in_components_one_tsv_each_gets_its_sum(tmp_path):
    _write(tmp_path, lambda e: {"train/box_loss": 1.0 - e / 10, "train/cls_loss": 2.0 - e / 10,
                                "val/box_loss": 1.5, "val/cls_loss": 1.0, "metrics/mAP50": 0.1 * e})
    report = ingest_run(tmp_path, tmp_path / "f.duckdb")
    series, points, _ = _series(tmp_path / "f.duckdb", report.run_id)
    total = "train/loss (sum of box_loss, cls_loss)"
    assert series[total][1] == "train_loss"
    assert points[total] == [(e, pytest.approx(3.0 - e / 5)) for e in range(4)]
    assert points["val/loss (sum of box_loss, cls_loss)"] == [(e, 2.5) for e in range(4)]
    assert points["train/box_loss"] == [(e, pytest.approx(1.0 - e / 10)) for e in range(4)]  # components as logged


def test_a_folder_holding_dvclive_s_folder_is_one_run(tmp_path):
    from ingest.discovery import discover_runs

    project = tmp_path / "root" / "project"
    project.mkdir(parents=True)
    _write(project, lambda e: {"train/loss": 1.0 / (e + 1)})
    [run] = discover_runs(tmp_path / "root")
    assert (run.path.name, run.kind) == ("project", "dvclive_run")
