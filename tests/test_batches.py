"""Saved batches: NaN/Inf sample positions, robust-z outlier samples, label ranges, damage."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import duckdb
import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from forensics.judge.detectors.bad_batch import BadBatch
from ingest.batches import FoundBatch, find_batches, per_sample, read_batch
from ingest.run import ingest_batches


def rels(root: Path) -> list[PurePosixPath]:
    return [PurePosixPath(p.relative_to(root).as_posix()) for p in sorted(root.rglob("*")) if p.is_file()]


def make_batch(n: int = 32, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {
        "input": torch.randn(n, 3, 8, generator=g),
        "labels": torch.randint(0, 10, (n,), generator=g),
        "mask": torch.ones(n, 8, dtype=torch.bool),
        "ids": ["a"] * n,  # not a tensor: ignored
        "epoch": 3,
    }


class Odd:
    """An object in a batch file: loading it needs full unpickling."""


def reference_norms(x: torch.Tensor) -> np.ndarray:
    """Per-sample L2 norms over finite entries, with numpy."""
    return np.sqrt((np.nan_to_num(x.double().numpy(), nan=0, posinf=0, neginf=0) ** 2).reshape(len(x), -1).sum(1))


def reference_z(x: torch.Tensor) -> np.ndarray:
    """Robust z of per-sample norms with numpy: (norm − median) / (1.4826 · MAD)."""
    norms = reference_norms(x)
    med = np.median(norms)
    return (norms - med) / (1.4826 * np.median(np.abs(norms - med)))


@pytest.mark.parametrize("fmt", ["pt", "safetensors"])
def test_nan_samples_outliers_and_label_range(tmp_path, fmt):
    batch = make_batch()
    batch["labels"][4], batch["labels"][9] = 0, 9  # the range is exactly [0, 9]
    batch["input"][3, 1, 2] = float("nan")
    batch["input"][7, 0, 0] = float("inf")
    batch["input"][7, 2, 5] = float("nan")
    batch["input"][20] *= 1000.0
    (tmp_path / "batches").mkdir()
    if fmt == "pt":
        torch.save(batch, tmp_path / "batches" / "step_500.pt")
    else:
        save_file({k: v for k, v in batch.items() if isinstance(v, torch.Tensor)},
                  tmp_path / "batches" / "step_500.safetensors")
    [found] = find_batches(rels(tmp_path))
    assert found.step == 500
    read = read_batch(tmp_path, found)
    assert read.row["status"] == "ok" and read.row["n_samples"] == 32 and read.row["n_nonfinite"] == 3
    rows = {r["tensor"]: r for r in read.stats.iter_rows(named=True)}
    assert set(rows) == {"input", "labels", "mask"}  # non-tensor entries ignored
    x = rows["input"]
    assert x["nonfinite_samples"] == [3, 7] and (x["n_nan"], x["n_inf"]) == (2, 1)
    np.testing.assert_allclose(x["sample_norms"], reference_norms(batch["input"]), rtol=1e-12)
    [(sample, z)] = BadBatch().outliers(x["sample_norms"])  # the judgement is the detector's, from stored norms
    assert sample == 20 and z == pytest.approx(reference_z(batch["input"])[20], rel=1e-9) and z > 100
    assert (rows["labels"]["min"], rows["labels"]["max"]) == (0, 9)
    assert rows["labels"]["sample_norms"] is None  # labels are categories, not magnitudes
    assert x["shape"] == [32, 3, 8] and x["dtype"] == "float32"


def test_healthy_batch_flags_nothing():
    t = torch.randn(256, 16, generator=torch.Generator().manual_seed(3))
    nonfinite, norms = per_sample(t)
    assert nonfinite == [] and BadBatch().outliers(norms) == []
    assert np.abs(reference_z(t)).max() < BadBatch.z  # the premise: no sample of a Gaussian batch is that far


def test_constant_norms_use_mean_deviation_fallback():
    t = torch.ones(20, 4)
    t[2] *= 50  # more than half the norms equal: MAD is 0
    _, norms = per_sample(t)
    [(sample, z)] = BadBatch().outliers(norms)
    assert sample == 2 and z == pytest.approx((100 - 2) / (1.2533 * 98 / 20))
    assert BadBatch().outliers([2.0] * 20) == []  # all equal: nothing stands out


def test_a_lower_threshold_needs_no_reingest():
    """Issue 11: the outlier threshold lives on the detector (`--set bad-batch.z=...`), not in ingest."""
    t = torch.randn(64, 8, generator=torch.Generator().manual_seed(5))
    t[9] *= 2.0
    _, norms = per_sample(t)
    z9 = reference_z(t)[9]
    assert 2 < z9 < BadBatch.z
    assert BadBatch().outliers(norms) == []
    assert [s for s, _ in BadBatch(z=z9 - 0.01).outliers(norms)] == [9]
    assert BadBatch(min_samples=65).outliers(norms) == []


def test_tuple_batch_and_bare_tensor(tmp_path):
    torch.save((torch.randn(4, 2), torch.tensor([0, 1, 1, 0])), tmp_path / "batch_12.pt")
    [found] = find_batches(rels(tmp_path))
    read = read_batch(tmp_path, found)
    assert found.step == 12 and list(read.stats["tensor"]) == ["0", "1"]


def test_damaged_batches_reported_run_goes_on(tmp_path):
    run, db = tmp_path / "run", tmp_path / "f.duckdb"
    (run / "batches").mkdir(parents=True)
    torch.save(make_batch(), run / "batches" / "step_1.pt")
    raw = (run / "batches" / "step_1.pt").read_bytes()
    (run / "batches" / "step_2.pt").write_bytes(raw[:100])
    (run / "batches" / "step_3.safetensors").write_bytes(b"")
    torch.save({"x": torch.zeros(2), "meta": Odd()}, run / "batches" / "step_4.pt")
    written = ingest_batches(db, "r1", run, find_batches(rels(run)))
    assert {r["path"]: r["status"] for r in written} == {
        "batches/step_1.pt": "ok", "batches/step_2.pt": "unreadable",
        "batches/step_3.safetensors": "unreadable", "batches/step_4.pt": "needs_pickle"}
    con = duckdb.connect(str(db), read_only=True)
    kinds = dict(con.execute("SELECT path, kind FROM ingest_issues").fetchall())
    assert kinds == {"batches/step_2.pt": "truncated", "batches/step_3.safetensors": "empty",
                     "batches/step_4.pt": "needs_pickle"}
    assert con.execute("SELECT count(*) FROM batch_stats").fetchone()[0] == 3
    stored = con.execute("SELECT step, n_samples FROM batches WHERE status = 'ok'").fetchall()
    assert stored == [(1, 32)]
    con.close()
    assert ingest_batches(db, "r1", run, find_batches(rels(run))) == []  # nothing twice


def test_find_batches_by_folder_or_name():
    paths = [PurePosixPath(p) for p in ("batches/step_5.pt", "out/batches/00042.safetensors", "batch-7.pt",
                                        "step_5.pt", "checkpoint-5/model.safetensors", "batches/notes.txt")]
    assert find_batches(paths) == [
        FoundBatch(PurePosixPath("batch-7.pt"), "torch", 7),
        FoundBatch(PurePosixPath("batches/step_5.pt"), "torch", 5),
        FoundBatch(PurePosixPath("out/batches/00042.safetensors"), "safetensors", 42),
    ]


def test_many_small_batches_are_stored_in_few_transactions_and_a_changed_one_replaces_its_copy(tmp_path, monkeypatch):
    """Each small batch cost ~80 ms to ingest, nearly all of it its own transaction (a connection opened and closed,
    a commit): 100 batches of 4 KB took 9 s beside 2.5 s for the run's logs. Batches are read in groups and a
    group is written in one transaction; what is stored is what one transaction per batch stored (ids in file
    order), and a batch rewritten later replaces its copy."""
    import os

    import ingest.run
    from ingest import store
    from ingest.store import connect

    run, db = tmp_path / "run", tmp_path / "f.duckdb"
    (run / "batches").mkdir(parents=True)
    for step in range(1, 41):
        save_file({"x": torch.randn(8, 4), "y": torch.arange(8)}, str(run / "batches" / f"step_{step}.safetensors"))
    torch.save(make_batch(8), run / "batches" / "step_41.pt")
    (run / "batches" / "step_42.pt").write_bytes((run / "batches" / "step_41.pt").read_bytes()[:100])  # cut off
    opened = []
    real_open = store._open
    monkeypatch.setattr(store, "_open", lambda db, write, deadline: opened.append(write) or real_open(db, write, deadline))
    monkeypatch.setattr(ingest.run, "BATCH_GROUP_FILES", 16, raising=False)
    written = ingest_batches(db, "r1", run, find_batches(rels(run)))
    assert len(written) == 42 and len(opened) == 1 + 3  # what is stored, then 3 groups (16, 16, 10)
    with connect(db, write=False) as con:
        rows = con.execute("SELECT batch_id, step, status FROM batches ORDER BY batch_id").fetchall()
        assert [s for _, s, _ in rows] == [b.step for b in find_batches(rels(run))]  # ids in file order
        assert dict((s, st) for _, s, st in rows)[42] == "unreadable"
        assert [i for i, _, _ in rows] == [r["batch_id"] for r in written]
        assert con.execute("SELECT count(*) FROM batch_stats").fetchone()[0] == 40 * 2 + 3  # make_batch: input, labels, mask
        assert con.execute("SELECT count(*) FROM sources WHERE format = 'batch'").fetchone()[0] == 42
        [(path, kind)] = con.execute("SELECT path, kind FROM ingest_issues").fetchall()
    assert path == "batches/step_42.pt"
    save_file({"x": torch.full((3, 4), float("nan"))}, str(run / "batches" / "step_7.safetensors"))
    os.utime(run / "batches" / "step_7.safetensors", (1, 1))
    [again] = ingest_batches(db, "r1", run, find_batches(rels(run)))
    assert again["path"] == "batches/step_7.safetensors" and again["n_nonfinite"] == 12
    with connect(db, write=False) as con:
        assert con.execute("SELECT count(*) FROM batches").fetchone()[0] == 42
        assert con.execute("SELECT count(*), sum(n_nan) FROM batch_stats WHERE batch_id = ?",
                           [again["batch_id"]]).fetchone() == (1, 12)
        assert con.execute("SELECT count(*) FROM batch_stats").fetchone()[0] == 39 * 2 + 3 + 1
