"""`forensics compare` on real runs: a sweep trained here with SummaryWriter (one MLP, three LRs, two seeds, the
highest LR diverging) and the gallery; Fisher's exact test against scipy's; the kinds that implicate settings."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from forensics.cli import main
from forensics.judge import catalog
from forensics.services.analysis import analyze
from forensics.services.compare import IMPLICATES, compare, fisher_exact, part
from ingest.store import connect
from tests.paths import REPO
from tests.runwriters import log_messages
from tests.sweeps import SWEEP_LRS, SWEEP_SEEDS, sweep_name, train_sweep

GALLERY = REPO / "sample_runs" / "runs"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("sweep")
    runs = train_sweep(root / "runs")
    db = root / "sweep.duckdb"
    for run in runs.values():
        analyze(run, db)
    return root / "runs", db


def _compare(db: Path, run, others=None):
    with connect(db, write=False) as con:
        return compare(con, run, others)


def test_the_diverging_run_of_a_sweep_is_put_beside_a_healthy_run_of_its_config(sweep):
    runs, db = sweep
    bad = runs / sweep_name(max(SWEEP_LRS), 0)
    c = _compare(db, bad)
    assert c.verdict == "failed"
    best = c.sibling
    assert best.verdict == "healthy" and best.values_differ == ["optim.lr"]  # same seed, the nearest LR
    assert best.name == sweep_name(sorted(SWEEP_LRS)[-2], 0)
    assert c.parting.step is not None and c.parting.direction == "above"
    assert c.parting.step < 150  # before the end of the run, where the losses stay apart
    assert c.movers and c.movers[0].series == "lr" and c.movers[0].step <= c.parting.step
    assert c.settings[0].key == "optim.lr" and c.settings[0].implicated_by == c.headline["kind"]
    [lr] = [t for t in c.team if t.key == "optim.lr"]
    failing = lr.groups[0]
    assert failing["label"].startswith("≥") and failing["failed"] == failing["runs"] == len(SWEEP_SEEDS)
    assert lr.groups[1] == {"label": lr.groups[1]["label"], "failed": 0, "runs": 4}
    assert lr.p is not None and lr.runs == 6


def test_two_seeds_of_one_healthy_config_never_part(sweep):
    runs, db = sweep
    for lr in sorted(SWEEP_LRS)[:2]:
        c = _compare(db, runs / sweep_name(lr, 0), [runs / sweep_name(lr, 1)])
        assert c.sibling.name == sweep_name(lr, 1)
        assert c.parting.step is None, c.parting


def test_a_sibling_on_another_cadence_with_holes_is_aligned_by_step():
    """A sampled export (every 7th step, a stretch missing) of the same healthy curve does not part from it; the
    same curve that blows up after step 300 parts there, not before."""
    rng = np.random.default_rng(0)
    steps = np.arange(1, 601)
    healthy = 2.3 * np.exp(-steps / 200) + 0.3 + 0.05 * rng.standard_normal(steps.size)
    sampled = (steps % 7 == 0) & ~((steps > 200) & (steps < 260))
    assert part(steps, healthy, steps[sampled], healthy[sampled]).step is None
    bad = healthy.copy()
    bad[300:] *= np.exp((steps[300:] - 300) / 40)
    bad[450:] = np.nan
    p = part(steps, bad, steps[sampled], healthy[sampled])
    assert p.direction == "above" and 300 < p.step < 360


def test_the_gallery_failure_is_compared_with_a_healthy_run_of_the_same_model(tmp_path, capsys):
    db = tmp_path / "g.duckdb"
    for name in ("nan_lr_too_high", "healthy_mlp", "healthy_cnn", "healthy_transformer", "oscillation_sgd_high_lr"):
        analyze(GALLERY / name, db)
    assert main(["compare", str(GALLERY / "nan_lr_too_high"), "--db", str(db), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["siblings"][0]["name"] == "healthy_mlp" and out["siblings"][0]["verdict"] == "healthy"
    diverged = out["headline"]
    assert diverged["kind"] == "divergence"
    parted = out["parting"]["step"]
    assert parted is not None and parted <= diverged["step_end"]  # within the divergence, before the NaN
    assert out["settings"][0]["key"] == "optim.lr"
    assert main(["compare", "nan_lr_too_high", "--db", str(db)]) == 0
    text = capsys.readouterr().out
    assert f"at step {parted}" in text and "1. optim.lr: 0.15 vs 0.001" in text


def test_a_run_not_in_the_store_says_how_to_add_it(tmp_path, capsys):
    db = tmp_path / "e.duckdb"
    analyze(GALLERY / "healthy_mlp", db)
    assert main(["compare", str(GALLERY / "nan_lr_too_high"), "--db", str(db)]) == 2
    assert "forensics analyze" in capsys.readouterr().err


@pytest.mark.parametrize("table", [(2, 0, 0, 4), (1, 3, 4, 1), (0, 5, 5, 0), (3, 3, 3, 3), (1, 0, 0, 30),
                                   (7, 1, 0, 12), (0, 0, 2, 3)])
def test_fisher_exact_matches_scipy(table):
    scipy_stats = pytest.importorskip("scipy.stats")
    a, b, c, d = table
    expected = scipy_stats.fisher_exact([[a, b], [c, d]]).pvalue
    assert math.isclose(fisher_exact(a, b, c, d), expected, rel_tol=1e-9, abs_tol=1e-12)


def test_every_implicating_kind_is_a_catalog_id():
    assert set(IMPLICATES) <= {e.kind for e in catalog.ENTRIES}


@pytest.mark.needs_shared
def test_versions_of_a_real_lightning_project_part_on_the_loss_their_diagnosis_reads(tmp_path):
    """Five logged versions of one real project (Lightning's TensorBoard logger, hparams in the event files): the
    overfitting version is put beside the healthy one and parts from it on the validation loss once it rises
    (labelled from step ~1065); the diverged version ranks the LR first among the settings."""
    from tests.paths import REAL_RUNS

    labels = json.loads((REAL_RUNS / "labels.json").read_text())
    versions = sorted(p for p in REAL_RUNS.glob("tb_dlgn_v*") if p.is_dir())
    db = tmp_path / "versions.duckdb"
    for v in versions:
        analyze(v, db)
    kinds = {v.name: labels[v.name]["pathologies"] for v in versions}
    [over] = [v for v in versions if kinds[v.name] == ["overfitting"] and "val_rise_start" in labels[v.name]["key_steps"]]
    [healthy] = [v for v in versions if kinds[v.name] == ["healthy"]]
    [diverged] = [v for v in versions if kinds[v.name] == ["divergence"]]
    c = _compare(db, over)
    assert c.sibling.name == healthy.name
    keys = labels[over.name]["key_steps"]
    assert c.parting.series.startswith("val") and c.parting.direction == "above"
    assert keys["val_loss_min"] < c.parting.step <= keys["val_rise_start"] + 100
    d = _compare(db, diverged)
    assert d.sibling.name == healthy.name and d.settings[0].key == "lr"


def test_a_resumed_sibling_is_read_as_one_row_per_step(tmp_path):
    """A sibling resumed from an earlier step (a second SummaryWriter rewrites steps 600-990 after a crash at 990)
    is aligned on its last-written values: two seeds of one healthy config still do not part."""
    from torch.utils.tensorboard import SummaryWriter

    from tests.runwriters import curve, write_tb

    config = {"optim": {"lr": 0.01}, "model": {"hidden": 32}}
    write_tb(tmp_path / "a", {"train/loss": curve(n=150, seed=1)}, config)
    steps, values = curve(n=150, seed=2)
    for i, (lo, hi) in enumerate(((0, 100), (60, 150))):  # crashed at step 990, resumed from the step-600 checkpoint
        w = SummaryWriter(log_dir=str(tmp_path / "b"), filename_suffix=f".{i}")
        for s, v in zip(steps[lo:hi], values[lo:hi] * (1.0 + 0.01 * i)):
            w.add_scalar("train/loss", float(v), int(s))
        w.close()
    (tmp_path / "b" / "config.json").write_text(json.dumps({**config, "seed": 2}))
    db = tmp_path / "r.duckdb"
    for run in ("a", "b"):
        analyze(tmp_path / run, db)
    c = _compare(db, tmp_path / "a", [tmp_path / "b"])
    assert c.parting.step is None and c.parting.aligned_points == 150


def test_analyze_of_a_failed_run_names_its_closest_run_that_worked(sweep, capsys):
    runs, db = sweep
    assert main(["analyze", str(runs / sweep_name(max(SWEEP_LRS), 0)), "--db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    [line] = [x for x in lines if x.startswith("closest run that worked")]
    assert sweep_name(sorted(SWEEP_LRS)[-2], 0) in line and "the losses part at step" in line
    assert main(["analyze", str(runs / sweep_name(min(SWEEP_LRS), 0)), "--db", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sibling"] is None  # a healthy run needs no sibling


def _print_log(folder: Path, losses: list[float]) -> Path:
    """A console log as a user's script prints it: Python logging to a file, one line per step."""
    folder.mkdir(parents=True)
    log_messages(folder / "train.log", (f"step {i * 10} loss {v:.4f}" for i, v in enumerate(losses)))
    return folder


def test_a_config_less_run_of_another_folder_is_no_sibling(tmp_path, capsys):
    """Two console logs of unrelated projects stored in one database look alike (one loss series, no config):
    the failed one names no closest run that worked until a healthy run sits in its own folder."""
    rng = np.random.default_rng(3)
    falling = [float(2.3 * math.exp(-i / 40) + 0.2 + 0.02 * rng.standard_normal()) for i in range(120)]
    exploding = falling[:60] + [falling[59] * 10 ** (i / 6) for i in range(1, 61)]
    db = tmp_path / "store.duckdb"
    bad = _print_log(tmp_path / "project_a" / "run_1", exploding)
    analyze(_print_log(tmp_path / "project_b" / "run_1", falling), db)
    assert main(["analyze", str(bad), "--db", str(db), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "failed" and out["sibling"] is None
    analyze(_print_log(tmp_path / "project_a" / "run_0", falling), db)
    assert main(["analyze", str(bad), "--db", str(db), "--json"]) == 0
    assert "run_0" in json.loads(capsys.readouterr().out)["sibling"]
