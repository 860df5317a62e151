"""Checkpoint discovery, statistics, deltas and damage, on files written by safetensors and torch.save."""

from __future__ import annotations

import json
import math
import os
import random
import shutil
from pathlib import Path, PurePosixPath

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import save_file

from ingest.checkpoints import FoundCheckpoint, find_checkpoints, read_checkpoint, step_from_name, tensor_deltas
from ingest.run import ingest_checkpoints
from ingest.store import connect
from ingest.tensorstats import TensorRef, delta_norms, stats_of

REAL_TRAINER_STATE = Path(__file__).resolve().parents[2] / "shared/real_runs/hf_tinyllama/trainer_state.json"
if not REAL_TRAINER_STATE.exists():  # tests run from a worktree two levels below /work, or from the clone
    REAL_TRAINER_STATE = Path("/work/shared/real_runs/hf_tinyllama/trainer_state.json")


# ------------------------------------------------------------------------------------------------ helpers


def naive(t: torch.Tensor) -> dict:
    """The obvious float64 reference: the whole tensor at once, moments over finite elements."""
    x = t.detach().reshape(-1).to(torch.float64)
    fin = x[torch.isfinite(x)]
    return {
        "numel": x.numel(),
        "l2": float(fin.norm()),
        "mean": float(fin.mean()),
        "std": float(fin.std(correction=0)),
        "min": float(fin.min()),
        "max": float(fin.max()),
        "abs_max": float(fin.abs().max()),
        "zero_fraction": float((x == 0).double().mean()),
        "n_nan": int(torch.isnan(x).sum()),
        "n_inf": int(torch.isinf(x).sum()),
    }


def assert_stats(row: dict, t: torch.Tensor) -> None:
    ref = naive(t)
    for key, want in ref.items():
        assert row[key] == pytest.approx(want, rel=1e-9, abs=1e-12), key


def rels(root: Path) -> list[PurePosixPath]:
    return [PurePosixPath(p.relative_to(root).as_posix()) for p in sorted(root.rglob("*")) if p.is_file()]


def query(db: Path, sql: str, params: list | None = None) -> list[tuple]:
    with connect(db, write=False) as con:
        return con.execute(sql, params or []).fetchall()


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 16)
        self.bn = torch.nn.BatchNorm1d(16)
        self.fc2 = torch.nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(torch.relu(self.bn(self.fc1(x))))


def train(steps: int, seed: int = 0, frozen: bool = True):
    """A tiny real model trained with Adam and a GradScaler; fc1.bias frozen (never updated)."""
    torch.manual_seed(seed)
    model = Net()
    if frozen:
        model.fc1.bias.requires_grad_(False)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    sched = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=10)
    snapshots = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(torch.randn(8, 6)), torch.randint(0, 3, (8,)))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        sched.step()
        snapshots.append({k: v.clone() for k, v in model.state_dict().items()})
    return model, opt, scaler, sched, snapshots


# ------------------------------------------------------------------------------------------------ statistics


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16,
                                   torch.float8_e4m3fn, torch.float8_e5m2, torch.int64, torch.uint8, torch.bool])
@pytest.mark.parametrize("slice_elements", [7, 1 << 22])
def test_stats_match_naive_float64(dtype, slice_elements):
    torch.manual_seed(1)
    t = (torch.randn(33, 17) * 5).to(dtype) if dtype.is_floating_point else torch.randint(0, 3, (33, 17)).to(dtype)
    assert_stats(stats_of(TensorRef(str(dtype)[6:], tuple(t.shape), tensor=t), slice_elements), t)


@pytest.mark.parametrize("offset,scale", [(0.0, 1.0), (1.0, 1e-2), (1e8, 1e-3), (-3e4, 1e-9), (1e150, 1e140)])
def test_stats_precise_when_mean_dwarfs_std(offset, scale):
    """Large |mean|/std takes the exact two-pass M2, merged across slices relative to a shift."""
    t = torch.randn(5000, dtype=torch.float64, generator=torch.Generator().manual_seed(2)) * scale + offset
    row = stats_of(TensorRef("float64", (5000,), tensor=t), 333)
    ref = naive(t)
    for key in ("mean", "std", "min", "max", "abs_max"):
        assert row[key] == pytest.approx(ref[key], rel=1e-9), key


def test_stats_of_values_near_float64_max_do_not_raise():
    t = torch.tensor([1e300, -1e300, 1.7e308, 0.0], dtype=torch.float64)
    row = stats_of(TensorRef("float64", (4,), tensor=t))
    assert (row["max"], row["min"], row["zero_fraction"], row["n_inf"]) == (1.7e308, -1e300, 0.25, 0)
    assert row["l2"] == float("inf")  # the true norm exceeds float64: inf says so


@settings(deadline=None, max_examples=30, derandomize=True)
@given(n=st.integers(1, 300), n_nan=st.integers(0, 5), n_inf=st.integers(0, 5), offset=st.floats(-1e6, 1e6),
       slice_elements=st.integers(1, 64))
def test_nan_inf_counts_exact_and_moments_of_the_rest(n, n_nan, n_inf, offset, slice_elements):
    g = torch.Generator().manual_seed(n)
    t = torch.randn(n, generator=g, dtype=torch.float64) + offset
    idx = torch.randperm(n, generator=g)
    k_nan, k_inf = min(n_nan, n), min(n_inf, max(n - n_nan, 0))
    t[idx[:k_nan]] = float("nan")
    t[idx[k_nan : k_nan + k_inf]] = float("inf")
    row = stats_of(TensorRef("float64", (n,), tensor=t), slice_elements)
    assert (row["n_nan"], row["n_inf"]) == (k_nan, k_inf)
    if k_nan + k_inf < n:
        assert_stats(row, t)
    else:
        assert np.isnan(row["l2"]) and np.isnan(row["mean"])


def test_strided_tensor_streams_in_row_blocks_and_deltas_align(tmp_path):
    """torch.save keeps a transposed view's strides; slices come in row blocks, still aligned for deltas."""
    base = torch.randn(40, 30, dtype=torch.float64)
    strided = base.t()  # 30 x 40, not contiguous
    ref = TensorRef("float64", tuple(strided.shape), tensor=strided)
    assert not strided.is_contiguous() and len(list(ref.slices(100))) == 15  # 2 rows of 40 per slice
    assert_stats(stats_of(ref, 100), strided)
    other = TensorRef("float64", tuple(strided.shape), tensor=strided.contiguous() + 1.0)
    delta, norm = delta_norms(ref, other, 7)
    assert delta == pytest.approx(1200**0.5, rel=1e-12)
    assert norm == pytest.approx(float(base.norm()), rel=1e-12)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float8_e4m3fn, torch.float8_e5m2,
                                   torch.int8, torch.complex64])
def test_file_backed_slices_equal_tensor(tmp_path, dtype):
    """A safetensors tensor read in slices by byte range gives the statistics of the tensor itself."""
    t = (torch.randn(1000, 3) * 4).to(dtype) if dtype != torch.complex64 else torch.randn(1000, 3, dtype=dtype)
    t[7] = 0
    if dtype.is_floating_point:
        t[5, 1] = float("nan")
    save_file({"w": t}, tmp_path / "m.safetensors")
    read = read_checkpoint(tmp_path, find_checkpoints(rels(tmp_path))[0])
    assert read.model["w"].path is not None  # read from the file, not through a loaded tensor
    want = torch.view_as_real(t) if t.is_complex() else t
    assert_stats(read.stats.row(0, named=True) | {"numel": want.numel()}, want)
    assert_stats(stats_of(read.model["w"], 13) | {"numel": want.numel()}, want)  # 13-element slices
    assert read.row["n_nonfinite"] == (1 if dtype.is_floating_point else 0)


# ------------------------------------------------------------------------------------------------ layouts


def test_bare_safetensors_step_from_metadata(tmp_path):
    tensors = {"a.weight": torch.randn(4, 5), "a.bias": torch.zeros(4)}
    save_file(tensors, tmp_path / "weights.safetensors", metadata={"step": "500"})
    [found] = find_checkpoints(rels(tmp_path))
    assert found.format == "safetensors"
    read = read_checkpoint(tmp_path, found)
    assert (read.row["step"], read.row["step_from"], read.row["status"]) == (500, "contents", "ok")
    assert read.row["finite"] is True and read.row["n_nonfinite"] == 0
    for row in read.stats.iter_rows(named=True):
        assert row["kind"] == "param" and row["file"] == "weights.safetensors"
        assert_stats(row, tensors[row["tensor"]])
    assert read.stats.filter(tensor="a.bias")["zero_fraction"][0] == 1.0


@pytest.mark.parametrize("name", ["step_500.pt", "ckpt-500.pt", "epoch=2-step=500.ckpt", "iter_0000500.pt",
                                  "checkpoint-500/model.safetensors", "500.pth", "model_step500.safetensors"])
def test_step_from_each_name_pattern(name):
    assert step_from_name(PurePosixPath(name)) == 500


def test_step_from_name_when_contents_have_none(tmp_path):
    _, _, _, _, snaps = train(1)
    torch.save(snaps[0], tmp_path / "iter_0000500.pt")
    read = read_checkpoint(tmp_path, find_checkpoints(rels(tmp_path))[0])
    assert (read.row["step"], read.row["step_from"], read.row["format"]) == (500, "name", "torch")
    assert set(read.stats["tensor"]) == set(snaps[0])
    assert read.stats.filter(tensor="bn.num_batches_tracked")["kind"][0] == "buffer"


def test_torch_dict_with_model_optimizer_scaler_step(tmp_path):
    model, opt, scaler, sched, _ = train(2)
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scaler": scaler.state_dict(),
                "scheduler": sched.state_dict(), "step": 7}, tmp_path / "ckpt-9.pt")
    read = read_checkpoint(tmp_path, find_checkpoints(rels(tmp_path))[0])
    row = read.row
    assert (row["step"], row["step_from"], row["status"]) == (7, "contents", "ok")  # contents beat the name
    assert row["has_optimizer"] and row["has_scaler"] and not row["has_rng"]
    values = dict(zip(read.values["key"], read.values["value"], strict=True))
    assert values["optimizer.param_groups.0.lr"] == pytest.approx(opt.param_groups[0]["lr"])
    assert values["optimizer.param_groups.0.betas.1"] == 0.999
    assert values["scaler.scale"] == scaler.get_scale() and values["scaler._growth_tracker"] == 2
    assert values["optimizer.state.0.step"] == 2.0
    assert values["scheduler.last_epoch"] == 2
    # Adam's moments, matched to their parameters by position and shape (fc1.bias is frozen: no state).
    opt_rows = read.stats.filter(kind="optimizer")
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert set(opt_rows["param"]) == set(trainable)
    state = opt.state_dict()["state"]
    names = [n for n, _ in model.named_parameters()]
    for r in opt_rows.iter_rows(named=True):
        index, key = int(r["tensor"].split(".")[2]), r["tensor"].split(".")[3]
        assert r["param"] == names[index]
        assert_stats(r, state[index][key])


def test_nanogpt_checkpoint(tmp_path):
    """nanoGPT's train.py: a torch.compile'd model's state_dict, optimizer, iter_num, a 0-d best_val_loss."""
    model, opt, *_ = train(2)
    compiled = {f"_orig_mod.{k}": v for k, v in model.state_dict().items()}
    torch.save({"model": compiled, "optimizer": opt.state_dict(), "model_args": {"n_layer": 2, "bias": True},
                "iter_num": 2000, "best_val_loss": torch.tensor(1.25), "config": {"learning_rate": 6e-4}},
               tmp_path / "ckpt.pt")
    torch.save(opt.state_dict(), tmp_path / "optim_only.pt")
    reads = {f.path.name: read_checkpoint(tmp_path, f) for f in find_checkpoints(rels(tmp_path))}
    read = reads["ckpt.pt"]
    assert (read.row["step"], read.row["status"]) == (2000, "ok")
    values = dict(zip(read.values["key"], read.values["value"], strict=True))
    assert values["best_val_loss"] == 1.25 and values["config.learning_rate"] == 6e-4
    assert set(read.model) == set(model.state_dict())  # `_orig_mod.` stripped for matching
    assert set(read.stats.filter(pl_kind("param"))["tensor"]) == {f"_orig_mod.{n}" for n, _ in model.named_parameters()}
    only = reads["optim_only.pt"]
    assert only.row["has_optimizer"] and set(only.stats["kind"]) == {"optimizer"}


@pytest.mark.needs_shared
def test_hf_checkpoint_folder(tmp_path):
    """checkpoint-N/ as HF's Trainer writes it; rng_state.pth needs numpy globals that weights_only refuses."""
    model, opt, scaler, sched, _ = train(2)
    ck = tmp_path / "out" / "checkpoint-2800"
    ck.mkdir(parents=True)
    save_file(model.state_dict(), ck / "model.safetensors", metadata={"format": "pt"})
    torch.save(opt.state_dict(), ck / "optimizer.pt")
    torch.save(sched.state_dict(), ck / "scheduler.pt")
    torch.save(scaler.state_dict(), ck / "scaler.pt")
    torch.save({"python": random.getstate(), "numpy": np.random.get_state(), "cpu": torch.random.get_rng_state()},
               ck / "rng_state.pth")
    shutil.copy(REAL_TRAINER_STATE, ck / "trainer_state.json")  # a real one: global_step 2800
    (ck / "config.json").write_text(json.dumps({"model_type": "net"}))
    (ck / "training_args.bin").write_bytes(b"\x80\x04not ours")
    with pytest.raises(Exception, match="numpy"):  # the premise: weights_only cannot read HF's rng_state.pth
        torch.load(ck / "rng_state.pth", weights_only=True)

    [found] = find_checkpoints(rels(tmp_path))
    assert (found.format, found.path, found.name_step) == ("hf", PurePosixPath("out/checkpoint-2800"), 2800)
    assert {f.name for f in found.files} == {"model.safetensors", "optimizer.pt", "scheduler.pt", "scaler.pt",
                                             "rng_state.pth"}
    assert [f.name for f in found.aux] == ["trainer_state.json"]  # read, not claimed: the log reader reads it too
    read = read_checkpoint(tmp_path, found)
    row = read.row
    assert (row["step"], row["step_from"], row["status"]) == (2800, "contents", "ok")
    assert row["has_rng"] and row["has_optimizer"] and row["has_scaler"] and row["finite"]
    assert not read.issues
    assert set(read.stats.filter(pl_kind("param"))["file"]) == {"out/checkpoint-2800/model.safetensors"}
    # safetensors sorts its header, so optimizer indices cannot be matched to names by position: left NULL.
    opt_rows = read.stats.filter(pl_kind("optimizer"))
    assert opt_rows.height == 10 and opt_rows["param"].is_null().all()
    values = dict(zip(read.values["key"], read.values["value"], strict=True))
    assert values["scheduler._last_lr.0"] == pytest.approx(sched.get_last_lr()[0])
    assert values["scaler.scale"] == 1024.0
    assert row["size_bytes"] == sum((ck / n).stat().st_size for n in
                                    ("model.safetensors", "optimizer.pt", "scheduler.pt", "scaler.pt", "rng_state.pth"))


def pl_kind(kind):
    import polars as pl

    return pl.col("kind") == kind


def test_sharded_safetensors_with_hf_index(tmp_path):
    model, *_ = train(1)
    sd = model.state_dict()
    names = list(sd)
    ck = tmp_path / "checkpoint-10"
    ck.mkdir()
    shards = {"model-00001-of-00002.safetensors": names[:3], "model-00002-of-00002.safetensors": names[3:]}
    for file, keys in shards.items():
        save_file({k: sd[k] for k in keys}, ck / file, metadata={"format": "pt"})
    index = {"metadata": {"total_size": sum(v.numel() * v.element_size() for v in sd.values())},
             "weight_map": {k: f for f, keys in shards.items() for k in keys}}
    (ck / "model.safetensors.index.json").write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    [found] = find_checkpoints(rels(tmp_path))
    assert len(found.files) == 3 and found.name_step == 10
    read = read_checkpoint(tmp_path, found)
    assert read.row["status"] == "ok" and set(read.stats["tensor"]) == set(names)
    for r in read.stats.iter_rows(named=True):
        assert_stats(r, sd[r["tensor"]])
    (ck / "model-00002-of-00002.safetensors").unlink()
    [found] = find_checkpoints(rels(tmp_path))
    read = read_checkpoint(tmp_path, found)
    assert [i.kind for _, i in read.issues] == ["missing_shard"]
    assert set(read.stats["tensor"]) == set(names[:3])


def test_lightning_ckpt(tmp_path):
    """A .ckpt as Lightning's CheckpointConnector.dump_checkpoint writes it (keys carry `model.`)."""
    model, opt, scaler, sched, _ = train(3)
    ckpt = {
        "epoch": 0,
        "global_step": 3,
        "pytorch-lightning_version": "2.4.0",
        "state_dict": {f"model.{k}": v for k, v in model.state_dict().items()},
        "loops": {"fit_loop": {"state_dict": {}, "epoch_progress": {"total": {"ready": 1, "completed": 0}}}},
        "callbacks": {"ModelCheckpoint{'monitor': None}": {"best_model_score": None, "best_model_path": ""}},
        "optimizer_states": [opt.state_dict()],
        "lr_schedulers": [sched.state_dict()],
        "MixedPrecision": scaler.state_dict(),
        "hparams_name": "kwargs",
        "hyper_parameters": {"lr": 0.01},
    }
    torch.save(ckpt, tmp_path / "epoch=0-step=3.ckpt")
    [found] = find_checkpoints(rels(tmp_path))
    assert found.format == "lightning"
    read = read_checkpoint(tmp_path, found)
    assert (read.row["step"], read.row["step_from"], read.row["status"]) == (3, "contents", "ok")
    params = read.stats.filter(pl_kind("param"))
    assert params["tensor"][0].startswith("model.")  # stored as found
    assert set(read.model) == set(model.state_dict())  # matched by the name without Lightning's prefix
    opt_params = set(read.stats.filter(pl_kind("optimizer"))["param"])
    assert opt_params == {n for n, p in model.named_parameters() if p.requires_grad}
    values = dict(zip(read.values["key"], read.values["value"], strict=True))
    assert values["global_step"] == 3 and values["optimizer.param_groups.0.lr"] == pytest.approx(opt.param_groups[0]["lr"])
    assert read.row["has_scaler"] and values["scaler.scale"] == 1024.0


# ------------------------------------------------------------------------------------------------ deltas


def test_deltas_equal_norm_of_difference_and_frozen_is_zero(tmp_path):
    *_, snaps = train(5)
    save_file(snaps[1], tmp_path / "step_2.safetensors")
    # A later checkpoint saved from a torch.compile'd model: keys gain `_orig_mod.`, still the same parameters.
    torch.save({"model": {f"_orig_mod.{k}": v for k, v in snaps[4].items()}, "step": 5}, tmp_path / "step_5.pt")
    a, b = (read_checkpoint(tmp_path, f) for f in find_checkpoints(rels(tmp_path)))
    assert (a.row["step"], b.row["step"]) == (2, 5)
    rows = tensor_deltas(a, b).iter_rows(named=True)
    # Named as found in the newer checkpoint (joins tensor_stats there), matched through the prefix.
    deltas = {r["tensor"].removeprefix("_orig_mod."): r for r in rows if r["tensor"].startswith("_orig_mod.")}
    floats = {k for k, v in snaps[1].items() if v.is_floating_point()}
    assert set(deltas) == floats
    for name in floats:
        want = float((snaps[4][name].double() - snaps[1][name].double()).norm())
        assert deltas[name]["delta_l2"] == pytest.approx(want, rel=1e-12)
        assert deltas[name]["ratio"] == pytest.approx(want / float(snaps[1][name].double().norm()), rel=1e-12)
        assert deltas[name]["step_distance"] == 3
    assert deltas["fc1.bias"]["delta_l2"] == 0.0 and deltas["fc1.bias"]["ratio"] == 0.0
    assert deltas["fc1.weight"]["delta_l2"] > 0


def test_statistics_are_the_same_bits_whatever_torch_thread_count():
    """`--jobs 2` stored other last bits of l2 and of delta ratios than one process did (CI, on the gallery's
    healthy_mlp): a forked worker runs torch on 1 thread, the driver on 2, and a parallel sum's order follows
    the thread count. The statistics run on one thread, and the caller's count is given back."""
    g = torch.Generator().manual_seed(0)
    old, new = (torch.randn(3_000_000, generator=g, dtype=torch.float32) for _ in range(2))
    ref, prev = (TensorRef("float32", (t.numel(),), tensor=t) for t in (new, old))
    seen, before = [], torch.get_num_threads()
    try:
        for threads in (1, 2, 4):
            torch.set_num_threads(threads)
            seen.append((stats_of(ref), delta_norms(prev, ref), torch.get_num_threads()))
    finally:
        torch.set_num_threads(before)
    assert [s[:2] for s in seen] == [seen[0][:2]] * 3
    assert [s[2] for s in seen] == [1, 2, 4]


def test_lightning_deltas_join_tensor_stats_by_key_as_found(tmp_path):
    *_, snaps = train(3)
    run, db = tmp_path / "run", tmp_path / "f.duckdb"
    run.mkdir()
    for step in (1, 3):
        torch.save({"epoch": 0, "global_step": step, "pytorch-lightning_version": "2.4.0",
                    "state_dict": {f"model.{k}": v for k, v in snaps[step - 1].items()}},
                   run / f"epoch=0-step={step}.ckpt")
    ingest_checkpoints(db, "r1", run, find_checkpoints(rels(run)))
    joined = query(db, "SELECT d.tensor, t.param, d.delta_l2 FROM tensor_deltas d JOIN tensor_stats t "
                       "ON t.ckpt_id = d.ckpt_id AND t.tensor = d.tensor ORDER BY d.tensor")
    assert len(joined) == len(snaps[0]) - 1 and all(t == f"model.{p}" for t, p, _ in joined)
    assert dict((p, d) for _, p, d in joined)["fc1.bias"] == 0.0


def test_deltas_in_the_statistics_pass_equal_separate_ones(tmp_path):
    *_, snaps = train(3)
    save_file(snaps[0], tmp_path / "step_1.safetensors")
    torch.save(snaps[2], tmp_path / "step_3.pt")
    f1, f3 = find_checkpoints(rels(tmp_path))
    a = read_checkpoint(tmp_path, f1)
    fused = read_checkpoint(tmp_path, f3, prev=a)
    separate = tensor_deltas(a, read_checkpoint(tmp_path, f3))
    assert fused.deltas.height == len(snaps[0]) - 1  # every float tensor (num_batches_tracked is an integer)
    assert fused.deltas.sort("tensor").equals(separate.sort("tensor"))
    assert fused.stats.equals(read_checkpoint(tmp_path, f3).stats)


def test_contents_steps_out_of_name_order_still_pair_consecutive_steps(tmp_path):
    """Names give no step and sort against the contents' order: the pairs follow the steps."""
    *_, snaps = train(3)
    run, db = tmp_path / "run", tmp_path / "f.duckdb"
    run.mkdir()
    save_file(snaps[2], run / "a.safetensors", metadata={"step": "30"})
    save_file(snaps[0], run / "b.safetensors", metadata={"step": "10"})
    save_file(snaps[1], run / "c.safetensors", metadata={"step": "20"})
    ingest_checkpoints(db, "r1", run, find_checkpoints(rels(run)))
    assert query(db, "SELECT DISTINCT prev_step, step FROM tensor_deltas ORDER BY step") == [(10, 20), (20, 30)]
    [(got,)] = query(db, "SELECT delta_l2 FROM tensor_deltas WHERE tensor = 'fc1.weight' AND step = 30")
    assert got == pytest.approx(float((snaps[2]["fc1.weight"].double() - snaps[1]["fc1.weight"].double()).norm()))


# ------------------------------------------------------------------------------------------------ safety, damage


def test_whole_module_needs_pickle_unless_trusted(tmp_path):
    model, *_ = train(1)
    torch.save(model, tmp_path / "model.pt")
    [found] = find_checkpoints(rels(tmp_path))
    refused = read_checkpoint(tmp_path, found)
    assert refused.row["status"] == "needs_pickle" and refused.stats.height == 0
    assert "test_checkpoints.Net" in refused.row["detail"] and "--trust-pickle" in refused.row["detail"]
    assert [i.kind for _, i in refused.issues] == ["needs_pickle"]
    trusted = read_checkpoint(tmp_path, found, trust_pickle=True)
    assert trusted.row["status"] == "ok" and set(trusted.stats["tensor"]) == set(model.state_dict())
    assert [i.kind for _, i in trusted.issues] == ["untrusted_pickle_read"]


def test_nonfinite_weights_counted_exactly(tmp_path):
    *_, snaps = train(1)
    sd = snaps[0]
    sd["fc2.weight"][0, :3] = float("nan")
    sd["fc2.weight"][1, 0] = float("-inf")
    save_file(sd, tmp_path / "step_1.safetensors")
    read = read_checkpoint(tmp_path, find_checkpoints(rels(tmp_path))[0])
    row = read.stats.filter(tensor="fc2.weight").row(0, named=True)
    assert (row["n_nan"], row["n_inf"]) == (3, 1)
    assert_stats(row, sd["fc2.weight"])
    assert read.row["n_nonfinite"] == 4 and read.row["finite"] is False


def test_damaged_checkpoints_are_reported_and_the_run_still_ingests(tmp_path):
    """A crash mid-save: truncated safetensors keeps the tensors before the cut; the rest of the run ingests."""
    *_, snaps = train(3)
    run = tmp_path / "run"
    run.mkdir()
    save_file(snaps[0], run / "step_1.safetensors")
    save_file(snaps[2], run / "step_3.safetensors")
    save_file(snaps[1], tmp_path / "whole.safetensors")
    raw = (tmp_path / "whole.safetensors").read_bytes()
    (run / "step_2.safetensors").write_bytes(raw[: len(raw) - 30])  # cut inside the last tensor
    torch.save(snaps[1], tmp_path / "full.pt")
    raw = (tmp_path / "full.pt").read_bytes()
    (run / "step_4.pt").write_bytes(raw[: len(raw) // 2])
    (run / "step_5.pt").write_bytes(b"")
    (run / "step_6.pt").write_text("this is a log line, not a checkpoint\n")
    (run / "step_7.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ")

    db = tmp_path / "f.duckdb"
    written = ingest_checkpoints(db, "r1", run, find_checkpoints(rels(run)))
    status = {r["path"]: r["status"] for r in written}
    assert status == {"step_1.safetensors": "ok", "step_2.safetensors": "partial", "step_3.safetensors": "ok",
                      "step_4.pt": "unreadable", "step_5.pt": "unreadable", "step_6.pt": "unreadable",
                      "step_7.safetensors": "unreadable"}
    issues = dict(query(db, "SELECT path, kind FROM ingest_issues"))
    assert issues == {"step_2.safetensors": "truncated", "step_4.pt": "truncated", "step_5.pt": "empty",
                      "step_6.pt": "not_this_format", "step_7.safetensors": "not_this_format"}
    # Every tensor of step_2 but the one cut off is there; the good checkpoints are complete.
    n = dict(query(db, "SELECT c.path, count(*) FROM tensor_stats t JOIN checkpoints c USING (ckpt_id) "
                       "GROUP BY c.path"))
    assert n == {"step_1.safetensors": len(snaps[0]), "step_3.safetensors": len(snaps[0]),
                 "step_2.safetensors": len(snaps[0]) - 1}
    # Deltas skip the unreadable ones: 1 -> 2 (partial) -> 3.
    assert query(db, "SELECT DISTINCT prev_step, step FROM tensor_deltas ORDER BY step") == [(1, 2), (2, 3)]
    assert dict(query(db, "SELECT path, format FROM sources"))["step_4.pt"] == "checkpoint"


def test_ingest_stores_frames_and_deltas_and_reingest_adds_nothing(tmp_path):
    *_, snaps = train(4)
    run, db = tmp_path / "run", tmp_path / "f.duckdb"
    run.mkdir()
    for step in (1, 2, 4):
        save_file(snaps[step - 1], run / f"step_{step}.safetensors", metadata={"step": str(step)})
    found = find_checkpoints(rels(run))
    assert len(ingest_checkpoints(db, "r1", run, found)) == 3
    pairs = query(db, "SELECT DISTINCT prev_step, step, step_distance FROM tensor_deltas ORDER BY step")
    assert pairs == [(1, 2, 1), (2, 4, 2)]
    [(got,)] = query(db, "SELECT delta_l2 FROM tensor_deltas WHERE tensor = 'fc2.weight' AND step = 4")
    want = float((snaps[3]["fc2.weight"].double() - snaps[1]["fc2.weight"].double()).norm())
    assert got == pytest.approx(want, rel=1e-12)
    assert query(db, "SELECT max(delta_l2) FROM tensor_deltas WHERE tensor = 'fc1.bias'") == [(0.0,)]
    counts = [query(db, f"SELECT count(*) FROM {t}") for t in ("tensor_stats", "tensor_deltas", "checkpoint_values")]
    assert ingest_checkpoints(db, "r1", run, found) == []
    assert [query(db, f"SELECT count(*) FROM {t}") for t in ("tensor_stats", "tensor_deltas",
                                                             "checkpoint_values")] == counts
    # A new checkpoint later in the run: read, and its delta against the stored step 4 computed.
    save_file(snaps[3], run / "step_9.safetensors", metadata={"step": "9"})
    assert [r["step"] for r in ingest_checkpoints(db, "r1", run, find_checkpoints(rels(run)))] == [9]
    assert query(db, "SELECT max(delta_l2), count(*) > 0 FROM tensor_deltas WHERE step = 9") == [(0.0, True)]
    # One checkpoint rewritten in place at the same size (as Lightning's last.ckpt is), one arriving between
    # two stored ones: the first is read again, the pair (2, 4) gives way to (2, 3) and (3, 4).
    save_file(snaps[0], run / "step_4.safetensors", metadata={"step": "4"})
    os.utime(run / "step_4.safetensors", (1e9, 1e9))
    save_file(snaps[2], run / "step_3.safetensors", metadata={"step": "3"})
    again = ingest_checkpoints(db, "r1", run, find_checkpoints(rels(run)))
    assert sorted(r["step"] for r in again) == [3, 4]
    pairs = query(db, "SELECT DISTINCT prev_step, step FROM tensor_deltas ORDER BY step")
    assert pairs == [(1, 2), (2, 3), (3, 4), (4, 9)]
    [(got,)] = query(db, "SELECT delta_l2 FROM tensor_deltas WHERE tensor = 'fc2.weight' AND step = 4")
    want = float((snaps[0]["fc2.weight"].double() - snaps[2]["fc2.weight"].double()).norm())
    assert got == pytest.approx(want, rel=1e-12)
    assert query(db, "SELECT count(*) FROM checkpoints") == [(5,)]


def test_hf_final_save_in_the_output_folder_is_named_by_its_model_file():
    paths = [PurePosixPath(p) for p in ("model.safetensors", "trainer_state.json", "config.json",
                                        "step_300/model-00001-of-00002.safetensors", "batches/model.safetensors")]
    root_ckpt, folder_ckpt = find_checkpoints(paths)
    assert (root_ckpt.path, root_ckpt.format, root_ckpt.aux) == (PurePosixPath("model.safetensors"), "hf",
                                                                (PurePosixPath("trainer_state.json"),))
    assert (folder_ckpt.path, folder_ckpt.name_step) == (PurePosixPath("step_300"), 300)


def test_batches_and_non_tensor_files_are_not_checkpoints():
    paths = [PurePosixPath(p) for p in ("batches/step_5.pt", "batch_5.safetensors", "train.log", "checkpoint-5/"
             "trainer_state.json", "out/training_args.bin", "events.out.tfevents.1.host")]
    assert find_checkpoints(paths) == []


def test_found_checkpoint_is_hashable_and_plain():
    f = FoundCheckpoint(PurePosixPath("a.pt"), "torch", (PurePosixPath("a.pt"),))
    assert {f: 1}[f] == 1


# ------------------------------------------------------------------------------------------------ run ingest, CLI


def hf_run(tmp_path: Path) -> Path:
    """An HF Trainer output folder: two checkpoints (the second with a NaN weight), logs, a saved batch,
    a checkpoint cut off mid-save, and a pickled module."""
    from tests.writers import TrainerState

    model, opt, scaler, sched, snaps = train(4)
    run = tmp_path / "hf_run"
    for step, sd in ((2, snaps[1]), (4, {k: v.clone() for k, v in snaps[3].items()})):
        ck = run / f"checkpoint-{step}"
        ck.mkdir(parents=True)
        if step == 4:
            sd["fc2.weight"][0, 0] = float("nan")
        save_file(sd, ck / "model.safetensors", metadata={"format": "pt"})
        torch.save(opt.state_dict(), ck / "optimizer.pt")
        torch.save(sched.state_dict(), ck / "scheduler.pt")
        torch.save({"python": random.getstate(), "numpy": np.random.get_state(),
                    "cpu": torch.random.get_rng_state()}, ck / "rng_state.pth")
        log = [{"loss": 1.0 / s, "grad_norm": 0.5, "learning_rate": 1e-2, "epoch": s / 10, "step": s}
               for s in range(1, step + 1)]
        TrainerState(global_step=step, max_steps=4, log_history=log).save_to_json(ck / "trainer_state.json")
    (run / "batches").mkdir()
    batch = {"input_ids": torch.randint(0, 50, (8, 5)), "x": torch.randn(8, 4)}
    batch["x"][6, 1] = float("inf")
    torch.save(batch, run / "batches" / "step_4.pt")
    torch.save(model, run / "whole_model.pt")
    (run / "last.safetensors").write_bytes((run / "checkpoint-2" / "model.safetensors").read_bytes()[:200])
    return run


def test_run_ingest_and_checkpoints_command(tmp_path, capsys):
    from forensics.cli import main

    run, db = hf_run(tmp_path), tmp_path / "f.duckdb"
    assert main(["ingest", str(run), "--db", str(db), "--quiet", "--json"]) == 0
    sources = {s["path"]: s["format"] for s in json.loads(capsys.readouterr().out)["runs"][0]["sources"]}
    # trainer_state.json still goes to the HF log reader; tensor files go to checkpoints and batches only.
    assert sources["checkpoint-2/trainer_state.json"] == "hf_trainer_state"
    assert sources["checkpoint-2"] == sources["whole_model.pt"] == "checkpoint"
    assert sources["batches/step_4.pt"] == "batch"
    assert not any(p.endswith((".safetensors", ".pt", ".pth")) and "/" in p and not p.startswith("batches")
                   for p in sources)
    assert query(db, "SELECT count(*) FROM scalars") != [(0,)]
    assert query(db, "SELECT count(*) FROM ingest_issues WHERE kind = 'unknown_file'") == [(0,)]

    assert main(["checkpoints", str(run), "--db", str(db), "--quiet", "--json", "--top", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    by_path = {c["path"]: c for c in out["checkpoints"]}
    assert [(c["path"], c["step"]) for c in out["checkpoints"][:2]] == [("checkpoint-2", 2), ("checkpoint-4", 4)]
    assert by_path["checkpoint-2"]["finite"] is True and by_path["checkpoint-4"]["finite"] is False
    assert by_path["checkpoint-4"]["nonfinite_tensors"] == [{"tensor": "fc2.weight", "kind": "param", "n_nan": 1,
                                                             "n_inf": 0}]
    assert by_path["whole_model.pt"]["status"] == "needs_pickle"
    assert by_path["last.safetensors"]["status"] == "unreadable"
    [pair] = out["deltas"]
    assert (pair["prev_step"], pair["step"], pair["step_distance"]) == (2, 4, 2)
    assert len(pair["top"]) == 2 and (pair["top"][0]["tensor"], pair["top"][0]["n_nonfinite"]) == ("fc2.weight", 1)
    assert "fc1.bias" in pair["frozen"]
    [b] = out["batches"]
    assert b["step"] == 4 and b["tensors"] == [{"tensor": "x", "nonfinite_samples": [6], "outlier_samples": [],
                                                "outlier_z": []}]

    assert main(["checkpoints", str(run), "--db", str(db), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "1 NaN/Inf value in 1 model tensor (fc2.weight)" in text and "2 → 4 (2 steps)" in text and "needs_pickle" in text
    # Opting in reads the pickled module; nothing else is read again.
    assert main(["checkpoints", str(run), "--db", str(db), "--quiet", "--json", "--trust-pickle"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {c["path"]: c["status"] for c in out["checkpoints"]}["whole_model.pt"] == "ok"
    assert query(db, "SELECT count(*) FROM checkpoints") == [(4,)]


def test_movers_list_nonfinite_tensors_first_and_zero_initialised_biases_do_not_fill_the_list(tmp_path, capsys):
    """Issue 25: ‖Δw‖/‖w‖ is inf for a tensor that starts at 0, so nan_adam_eps_zero's zero-initialised biases
    filled the movers and its one NaN tensor (embed.weight) was missing. NaN/Inf tensors come first, as such, and
    the rest rank by the update's RMS (defined at zero)."""
    from forensics.cli import main
    from tests.paths import REPO

    run = tmp_path / "nan_adam_eps_zero"
    shutil.copytree(REPO / "sample_runs" / "runs" / "nan_adam_eps_zero", run)
    assert main(["checkpoints", str(run), "--db", str(tmp_path / "f.duckdb"), "--quiet", "--json", "--top", "5"]) == 0
    first = json.loads(capsys.readouterr().out)["deltas"][0]
    top = first["top"]
    assert (top[0]["tensor"], top[0]["n_nonfinite"]) == ("embed.weight", 32)
    rest = [m for m in top if not m["n_nonfinite"]]
    assert rest and all(math.isfinite(m["rms"]) for m in rest)
    assert [m["rms"] for m in rest] == sorted((m["rms"] for m in rest), reverse=True)
    assert not all(m["ratio"] is None for m in rest), "zero-initialised tensors fill the list"


def test_an_offset_past_64_bits_is_stored_with_its_detail_and_the_run_completes(tmp_path, capsys):
    """A safetensors entry at offset 2**63 raised while storing its read problem (the position overflowed the
    BIGINT column) and left the run incomplete; the problem is stored with no position and the offset in its
    detail, the rest of the file is read. A checkpoint named with a step past 64 bits has no step."""
    import struct

    from forensics.cli import main

    run = tmp_path / "run"
    run.mkdir()
    (run / "train.log").write_text("".join(f"step {i} loss {1 / i}\n" for i in range(1, 40)))
    header = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [2**63, 2**63 + 16]},
                         "b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    (run / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 4)
    save_file({"w": torch.ones(2)}, str(run / f"step_{2**64}.safetensors"))
    db = tmp_path / "f.duckdb"
    assert main(["analyze", str(run), "--db", str(db)]) == 0
    assert "Traceback" not in capsys.readouterr().err
    with connect(db, write=False) as con:
        [(position, kind, detail)] = con.execute("SELECT position, kind, detail FROM ingest_issues "
                                                 "WHERE path = 'model.safetensors'").fetchall()
        complete = con.execute("SELECT ingest_complete FROM runs").fetchone()[0]
        steps = dict(con.execute("SELECT path, step FROM checkpoints").fetchall())
    assert position is None and kind == "truncated" and f"position {2**63 + 8 + len(header)}" in detail
    assert complete
    assert steps == {"model.safetensors": None, f"step_{2**64}.safetensors": None}
    assert step_from_name(PurePosixPath(f"checkpoint-{2**63}/model.safetensors")) is None
