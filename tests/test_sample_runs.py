"""Check sample_runs/ground_truth.json against the committed run files, read with the writers' own tools.

Nothing here uses this project's readers: TensorBoard events through EventAccumulator, trainer_state.json
and metrics.csv through json/csv, W&B's .wandb through a minimal record-log scan (wandb 0.31 ships no Python
reader), checkpoints with safetensors / torch.load(weights_only=True). NaN runs are re-executed from the last
finite checkpoint and the saved batches, and the first non-finite step is probed under anomaly detection.
"""

from __future__ import annotations

import csv
import functools
import importlib.util
import json
import math
import struct
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent / "sample_runs"
TRUTH = json.loads((ROOT / "ground_truth.json").read_text())["runs"]
# ../shared beside the clone (DECISIONS.md §14); a worktree sits one level deeper (wt/<name>)
_REPO = Path(__file__).resolve().parent.parent
SHARED = next((p for p in (_REPO.parent / "shared", _REPO.parent.parent / "shared") if p.is_dir()),
              _REPO.parent / "shared")
CATALOG = SHARED / "CATALOG.md"
NAN_RUNS = [n for n, t in TRUTH.items() if t["replay"]]


# ------------------------------------------------------------------------------------------- readers

def tb_scalars(folder: Path) -> dict[str, dict[int, float]]:
    """tag -> {step: value} from every event file directly in `folder` (last write wins for a step)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    out: dict[str, dict[int, float]] = {}
    for f in sorted(folder.glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(f), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            out.setdefault(tag, {}).update({e.step: e.value for e in acc.Scalars(tag)})
    return out


def wandb_history(run_dir: Path) -> dict[str, dict[int, float]]:
    """Scan W&B's record log (LevelDB-style: 7-byte header ':W&B' + magic + version, 32 KiB blocks of records
    crc32c(4) length(2) type(1); checked against wandb 0.31) and decode HistoryRecords with wandb's protos."""
    from wandb.proto import wandb_internal_pb2 as pb
    path = next(run_dir.glob("wandb/*run-*/run-*.wandb"))
    buf = path.read_bytes()
    pos, block, data, out = 7, 32768, b"", {}
    while pos + 7 <= len(buf):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", buf[pos:pos + 7])
        data += buf[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # FULL or LAST
            rec = pb.Record()
            rec.ParseFromString(data)
            data = b""
            if rec.WhichOneof("record_type") == "history":
                items = {(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in rec.history.item}
                for k, v in items.items():
                    if k != "_step" and (isinstance(v, (int, float)) or v in ("NaN", "Infinity", "-Infinity")):
                        out.setdefault(k, {})[int(items["_step"])] = float(v)
    return out


def hf_history(run_dir: Path) -> dict[str, dict[int, float]]:
    out: dict[str, dict[int, float]] = {}
    for e in json.loads((run_dir / "trainer_state.json").read_text())["log_history"]:
        for k, v in e.items():
            if k not in ("step", "epoch"):
                out.setdefault(k, {})[e["step"]] = float(v)
    return out


def lightning_history(run_dir: Path) -> dict[str, dict[int, float]]:
    out: dict[str, dict[int, float]] = {}
    with open(run_dir / "lightning_logs" / "version_0" / "metrics.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            for k, v in row.items():
                if k not in ("step", "epoch") and v != "":
                    out.setdefault(k, {})[int(row["step"])] = float(v)
    return out


def console_history(run_dir: Path) -> dict[str, dict[int, float]]:
    out: dict[str, dict[int, float]] = {"loss": {}}
    for line in (run_dir / "train.log").read_text().splitlines():
        if "] step " in line:
            step = int(line.split("] step ")[1].split("/")[0])
            out["loss"][step] = float(line.split("| loss ")[1].split(" ")[0])
    return out


@functools.lru_cache(maxsize=None)
def series(name: str) -> dict[str, dict[int, float]]:
    """Every logged series of a run, keyed as ground_truth.json names them."""
    run, logger = ROOT / "runs" / name, TRUTH[name]["logger"]
    if logger == "tensorboard":
        out = tb_scalars(run)
        for sub in ("train", "val"):
            if (run / sub).is_dir():
                out.update({f"{sub}/{k}": v for k, v in tb_scalars(run / sub).items()})
        return out
    if logger == "wandb_export":
        f = next(run.glob("wandb_export_*.csv"))
        with open(f, newline="") as fh:
            rows = list(csv.DictReader(fh))
        return {k: {int(r["Step"]): float(r[k]) for r in rows} for k in rows[0] if k != "Step"}
    return {"wandb": wandb_history, "hf_trainer": hf_history, "lightning_csv": lightning_history,
            "console": console_history}[logger](run)


# --------------------------------------------------------------------------------------------- tests

@pytest.mark.needs_shared
def test_kinds_are_catalog_ids_and_every_producible_kind_is_covered():
    text = CATALOG.read_text()
    ids = {line.split("`")[1] for line in text.splitlines() if line.startswith("| `")}
    used = {k["kind"] for t in TRUTH.values() for k in t["kinds"]}
    assert used <= ids, used - ids
    assert ids - used <= {"grokking"}, ids - used
    assert sum(t["healthy"] for t in TRUTH.values()) >= 3
    for name, t in TRUTH.items():
        assert t["healthy"] == (t["kinds"] == []), name
        assert not t["kinds"] or sum(k["primary"] for k in t["kinds"]) == 1, name


@pytest.mark.parametrize("name", sorted(TRUTH))
def test_labelled_series_exist_and_steps_are_logged(name):
    s = series(name)
    for k in TRUTH[name]["kinds"]:
        if k["series"] is not None:
            assert k["series"] in s, (k, sorted(s))
            if k["step"] is not None and k["kind"] not in ("resumed_run",):
                assert min(s[k["series"]]) <= k["step"] <= max(s[k["series"]]), k


@pytest.mark.parametrize("name", sorted(TRUTH))
def test_nan_onset_is_the_first_nonfinite_logged_loss(name):
    t, s = TRUTH[name], series(name)
    loss_tags = [k["series"] for k in t["kinds"] if k["kind"] == "nan_loss"]
    if t["nan_onset"] is None:
        for tag in s:  # no loss series of a run without a nan_onset holds a non-finite value
            if "loss" in tag and not tag.startswith("eval"):
                assert all(math.isfinite(v) for v in s[tag].values()), tag
        return
    ser = s[loss_tags[0]]
    assert min(st for st, v in ser.items() if not math.isfinite(v)) == t["nan_onset"]
    after = [v for st, v in ser.items() if st >= t["nan_onset"]]
    assert not any(math.isfinite(v) for v in after), "nan_loss means it stays non-finite"


@pytest.mark.parametrize("name", [n for n, t in TRUTH.items() if t["spikes"]])
def test_spikes_stand_far_above_their_neighbours(name):
    s = series(name)
    for sp in TRUTH[name]["spikes"]:
        ser = s[sp["series"]]
        steps = sorted(ser)
        i = steps.index(sp["step"])
        before = [ser[x] for x in steps[max(0, i - 10):i]]
        after = [ser[x] for x in steps[i + 1:i + 9]]
        assert ser[sp["step"]] > 8 * np.median(before), sp  # far above the local level ...
        assert min(after) < 2 * np.median(before), sp        # ... and it recovers


def test_overfitting_crossover_is_the_val_minimum():
    for name, t in TRUTH.items():
        for k in t["kinds"]:
            if k["kind"] == "overfitting":
                v = series(name)[k["series"]]
                assert min(v, key=v.get) == k["step"] == t["crossover"]
                assert v[max(v)] > 1.2 * v[k["step"]]


def test_masked_nonfinite_shows_nan_grad_norm_next_to_finite_loss():
    for name, t in TRUTH.items():
        for k in t["kinds"]:
            if k["kind"] == "masked_nonfinite":
                s = series(name)
                g, loss = s["grad_norm"], s["loss"]
                assert math.isnan(g[k["step"]]) and math.isfinite(loss[k["step"]])
                assert all(math.isfinite(x) for st, x in g.items() if st < k["step"])
                assert any(x == 0.0 for x in loss.values())


def _load_state(run: Path, rel: str) -> dict:
    import torch
    from safetensors.torch import load_file
    p = run / rel
    if p.is_dir():
        return {"model": load_file(p / "model.safetensors"),
                "optimizer": torch.load(p / "optimizer.pt", weights_only=True),
                "scheduler": torch.load(p / "scheduler.pt", weights_only=True) if (p / "scheduler.pt").exists() else None}
    if p.suffix == ".safetensors":
        return {"model": load_file(p), "optimizer": None, "scheduler": None}
    obj = torch.load(p, weights_only=True)
    if "state_dict" in obj:  # Lightning
        return {"model": {k.removeprefix("model."): v for k, v in obj["state_dict"].items()},
                "optimizer": obj["optimizer_states"][0],
                "scheduler": obj["lr_schedulers"][0] if obj["lr_schedulers"] else None}
    return {"model": obj["model"], "optimizer": obj["optimizer"], "scheduler": obj.get("scheduler")}


def _load_batch(path: Path) -> dict:
    import torch
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file
        return load_file(path)
    return torch.load(path, weights_only=True)


def _nonfinite(t) -> bool:
    import torch
    return not bool(torch.isfinite(t).all())


@pytest.mark.slow
@pytest.mark.parametrize("name", NAN_RUNS)
def test_replay_reproduces_the_first_nonfinite_step(name):
    """Restore the last finite checkpoint, re-run the saved batches up to the NaN step with the run's own
    entry point, then probe that step: phase, op (forward: the module whose output first goes non-finite;
    backward: what detect_anomaly reports), module and culprit samples."""
    import torch
    run, r = ROOT / "runs" / name, TRUTH[name]["replay"]
    spec = importlib.util.spec_from_file_location(f"entry_{name}", run / "forensics_entry.py")
    entry = importlib.util.module_from_spec(spec)
    sys.dont_write_bytecode, saved = True, sys.dont_write_bytecode  # leave no __pycache__ in the run
    try:
        spec.loader.exec_module(entry)
    finally:
        sys.dont_write_bytecode = saved
    import yaml
    cfg_path = run / "config.yaml" if (run / "config.yaml").exists() else run / "config.json"
    config = yaml.safe_load(cfg_path.read_text())
    opts = entry.step_options(config)
    torch.manual_seed(0)
    model = entry.build_model(config)
    opt = entry.build_optimizer(model, config)
    sched = entry.build_scheduler(opt, config) if hasattr(entry, "build_scheduler") else None
    state = _load_state(run, r["checkpoint"])
    model.load_state_dict(state["model"])
    if state["optimizer"] is not None:
        opt.load_state_dict(state["optimizer"])
    if sched is not None and state["scheduler"] is not None:
        sched.load_state_dict(state["scheduler"])
    model.train()
    first = r["checkpoint_step"] if opts.get("step_numbering") == "checkpoint_before_step" else r["checkpoint_step"] + 1
    ext = Path(r["batch"]).suffix
    for step in range(first, r["first_nonfinite_step"]):
        batch = _load_batch(run / "batches" / f"step_{step}{ext}")
        loss = entry.loss_fn(model, batch)
        assert math.isfinite(loss.item()), step
        loss.backward()
        if opts.get("max_grad_norm") is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), opts["max_grad_norm"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        if sched is not None:
            sched.step()
    batch = _load_batch(run / r["batch"])
    for p in model.parameters():
        assert not _nonfinite(p), "weights went non-finite before the recorded step"
    # forward: the innermost module whose output first goes non-finite
    order = []
    hooks = [m.register_forward_hook(lambda mod, i, o, n=n: order.append(n) if isinstance(o, torch.Tensor)
                                     and o.requires_grad and _nonfinite(o) else None)
             for n, m in model.named_modules() if n]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.autograd.detect_anomaly(check_nan=True):
            loss = entry.loss_fn(model, batch)
            for h in hooks:
                h.remove()
            if r["phase"] == "forward":
                # the first non-finite value is a module output (the loss itself may stay finite: log(0) = -inf
                # for a non-target class is finite after nll_loss, and NaN only in its backward)
                if r["module"]:
                    assert order and order[0] == r["module"], order
                else:  # computed outside any module (the loss itself overflowed)
                    assert not order and not math.isfinite(loss.item())
            elif r["phase"] == "backward":
                assert not order and math.isfinite(loss.item())
                with pytest.raises(RuntimeError, match=f"Function '{r['op']}' returned nan"):
                    loss.backward()
            else:  # optimizer: forward and backward finite, the update writes the first non-finite value
                assert not order and math.isfinite(loss.item())
                loss.backward()
                assert not any(_nonfinite(p.grad) for p in model.parameters() if p.grad is not None)
    if r["phase"] == "optimizer":
        assert r["op"] == f"{type(opt).__name__}.step"
        if opts.get("max_grad_norm") is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), opts["max_grad_norm"])
        opt.step()
        bad = [n for n, p in model.named_parameters() if _nonfinite(p)]
        assert bad and bad[0] == r["parameter"] and r["parameter"].rsplit(".", 1)[0] == r["module"], bad
    # culprit samples: exactly these rows make the step non-finite on their own
    bad = []
    n = batch[next(iter(batch))].shape[0]
    for i in range(n):
        model.zero_grad(set_to_none=True)
        loss = entry.loss_fn(model, {k: v[i:i + 1] for k, v in batch.items()})
        loss.backward()
        if _nonfinite(loss.detach()) or any(_nonfinite(p.grad) for p in model.parameters() if p.grad is not None):
            bad.append(i)
    assert bad == r["samples"]


@pytest.mark.parametrize("name", [n for n, t in TRUTH.items() if any(k["kind"] == "nonfinite_weights" for k in t["kinds"])])
def test_nonfinite_weights_first_appear_at_the_labelled_checkpoint(name):
    run = ROOT / "runs" / name
    k = next(k for k in TRUTH[name]["kinds"] if k["kind"] == "nonfinite_weights")
    cands = [p for p in run.rglob("*") if (p.suffix in (".pt", ".ckpt", ".safetensors") or p.name.startswith("checkpoint-"))
             and "batches" not in p.parts and p.parent.name not in {c for c in ()}]
    found = {}
    for p in cands:
        if p.is_file() and p.parent.name.startswith("checkpoint-"):
            continue
        if p.is_dir() and not p.name.startswith("checkpoint-"):
            continue
        step = int(p.stem.split("step=")[-1] if "step=" in p.stem else p.name.split("-")[-1] if p.is_dir() else p.stem.split("_")[-1])
        sd = _load_state(run, str(p.relative_to(run)))["model"]
        found[step] = any(_nonfinite(v) for v in sd.values() if v.is_floating_point())
    assert found[k["step"]] and not any(bad for s, bad in found.items() if s < k["step"]), found


def test_frozen_parameters_are_bit_identical_across_checkpoints():
    import torch
    from safetensors.torch import load_file
    ck = [load_file(p) for p in sorted((ROOT / "runs" / "frozen_layer" / "weights").glob("*.safetensors"))]
    assert len(ck) >= 2
    for key in ck[0]:
        same = all(torch.equal(ck[0][key], c[key]) for c in ck[1:])
        assert same == key.startswith("features.conv1."), key
    all_frozen = [torch.load(p, weights_only=True)["model"] for p in sorted((ROOT / "runs" / "flat_all_frozen" / "checkpoints").glob("*.pt"))]
    assert len(all_frozen) >= 2 and all(torch.equal(all_frozen[0][k], c[k]) for c in all_frozen[1:] for k in c)


def test_bad_batches_hold_the_outliers():
    import torch
    run = ROOT / "runs" / "spike_corrupt_batches"
    for step in (300, 620, 910):
        assert _load_batch(run / "batches" / f"step_{step}.pt")["x"].abs().max() > 500
        assert _load_batch(run / "batches" / f"step_{step - 1}.pt")["x"].abs().max() < 20
    r = TRUTH["nan_bad_sample"]["replay"]
    b = _load_batch(ROOT / "runs" / "nan_bad_sample" / r["batch"])["image"]
    rows = [i for i in range(b.shape[0]) if not bool(torch.isfinite(b[i]).all())]
    assert rows == r["samples"]


def test_resumed_run_repeats_steps_and_its_damage_is_real():
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    run, t = ROOT / "runs" / "resumed_after_crash", TRUTH["resumed_after_crash"]
    files = sorted(run.glob("events.out.tfevents.*"))
    assert len(files) == 2
    steps = []
    for f in files:
        acc = EventAccumulator(str(f), size_guidance={"scalars": 0})
        acc.Reload()
        steps.append({e.step: e.wall_time for e in acc.Scalars("train/loss")})
    overlap = set(steps[0]) & set(steps[1])
    assert min(overlap) == 405 and max(overlap) >= 595  # logged every 5 steps: 405..600 (600's record is cut)
    assert min(steps[1].values()) - max(steps[0].values()) > 1000
    import torch
    with pytest.raises(Exception):  # any unpickling/zip error proves the file is cut
        torch.load(run / "checkpoints" / "step_600.pt", weights_only=True)
    assert {d["kind"] for d in t["damage"]} == {"truncated_record", "truncated_checkpoint"}


def test_throughput_stalls_are_in_the_wall_clock():
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    f = next((ROOT / "runs" / "throughput_stalls").glob("events.out.tfevents.*"))
    acc = EventAccumulator(str(f), size_guidance={"scalars": 0})
    acc.Reload()
    ev = acc.Scalars("train/loss")
    dt = {b.step: (b.wall_time - a.wall_time) / (b.step - a.step) for a, b in zip(ev, ev[1:])}
    slow = sorted(s for s, v in dt.items() if v > 0.5)
    assert slow == list(range(100, 1001, 100))


def test_lr_and_scale_series_show_the_labelled_anomaly():
    s = series("lr_sched_per_microbatch")["learning_rate"]
    k = TRUTH["lr_sched_per_microbatch"]["kinds"][0]
    assert s[k["step"]] < 1e-6 and max(v for st, v in s.items() if st > k["step"]) > 1e-3
    sc = series("amp_fp16_overflow")["train/loss_scale"]
    vals = [sc[x] for x in sorted(sc)]
    drops = sum(b < a for a, b in zip(vals, vals[1:]))
    k = TRUTH["amp_fp16_overflow"]["kinds"][0]
    assert vals[-1] < vals[0] / 16 and drops >= 20 and f"{drops} decreases" in k["note"]


@pytest.mark.needs_shared
def test_trainer_state_has_the_field_set_of_real_hf_files():
    real = CATALOG.parent / "real_runs" / "hf_tinyllama" / "trainer_state.json"
    want = set(json.loads(real.read_text()))
    for name, t in TRUTH.items():
        if t["logger"] == "hf_trainer":
            text = (ROOT / "runs" / name / "trainer_state.json").read_text()
            assert set(json.loads(text)) == want, name
            assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"  # save_to_json's layout


def test_masked_run_evaluates_to_nan_after_the_hidden_onset():
    s = series("nan_sqrt_norm")
    assert math.isfinite(s["eval_loss"][100]) and all(math.isnan(v) for st, v in s["eval_loss"].items() if st >= 150)
    assert TRUTH["nan_sqrt_norm"]["nan_onset"] is None
