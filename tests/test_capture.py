"""forensics.capture in a plain PyTorch loop: train until a real NaN, then `forensics replay` names the op,
the module and the sample, from what the helper wrote (and nothing written by hand)."""

from __future__ import annotations

import json

import pytest

from forensics.cli import main

torch = pytest.importorskip("torch")

ENTRY = '''
import torch
from torch import nn


class LogSoftmaxByHand(nn.Module):
    def forward(self, z):
        return torch.log(torch.softmax(z, dim=-1))


def build_model(config):
    torch.manual_seed(config["seed"])
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3), LogSoftmaxByHand())


def loss_fn(model, batch):
    return nn.functional.nll_loss(model(batch["x"]), batch["y"])


def build_optimizer(model, config):
    return torch.optim.AdamW(model.parameters(), lr=config["lr"])


def build_scheduler(optimizer, config):
    return torch.optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.9)


def step_options(config):
    return {"max_grad_norm": 1.0, "grad_accumulation_steps": 1}
'''

BAD_STEP, BAD_ROW = 27, 5


def train(root, ns):
    """The user's loop with the two capture lines; the data set holds one sample of enormous scale."""
    from forensics.capture import Capture

    config = {"seed": 0, "lr": 0.01}
    model, g = ns["build_model"](config), torch.Generator().manual_seed(1)
    opt = ns["build_optimizer"](model, config)
    sched = ns["build_scheduler"](opt, config)
    cap = Capture(root, config=config, every=10)                        # capture line 1
    for step in range(1, 40):
        batch = {"x": torch.randn(16, 8, generator=g), "y": torch.randint(0, 3, (16,), generator=g)}
        if step == BAD_STEP:
            batch["x"][BAD_ROW] *= 1e6  # a corrupt record: its logits are so large that softmax gives exact zeros
        loss = ns["loss_fn"](model, batch)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        cap.step(step, batch, loss, gn, model, opt, sched)              # capture line 2
        if not (torch.isfinite(loss) and torch.isfinite(gn)):
            break
    return step


def test_plain_capture_then_replay_names_op_module_and_sample(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "forensics_entry.py").write_text(ENTRY)
    ns: dict = {}
    exec(ENTRY, ns)
    last = train(run, ns)
    assert last == BAD_STEP
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step_10.pt", "step_20.pt"]
    assert (run / "batches" / f"step_{BAD_STEP}.pt").is_file() and (run / "batches" / "step_21.pt").is_file()
    ck = torch.load(run / "checkpoints" / "step_20.pt", weights_only=True)  # safe to read: no pickled objects
    assert {"model", "optimizer", "scheduler", "rng", "step"} <= set(ck)
    code = main(["replay", str(run), "--db", str(tmp_path / "f.duckdb"), "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    r = json.loads(out.out)
    assert r["from_checkpoint"] == "checkpoints/step_20.pt" and set(r["restored"]) >= {"model", "optimizer", "scheduler", "rng"}
    assert r["fidelity"]["faithful"] and r["fidelity"]["verified"] and not r["fidelity"]["within_rounding_noise"]
    assert r["reproduced"] and r["bad_step"] == BAD_STEP
    hit = r["first_nonfinite"]
    assert (hit["phase"], hit["op"], hit["module"]) == ("forward", "log", "3")
    assert hit["file"].endswith("forensics_entry.py") and "torch.log(torch.softmax" in hit["source"]
    assert r["culprit_samples"] == [BAD_ROW]
    assert next(c for c in r["counterfactuals"] if c["change"] == "drop_culprits")["finite"] is True


BN_ENTRY = '''
import torch
from torch import nn


def build_model(config):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 12), nn.BatchNorm1d(12), nn.ReLU(), nn.Linear(12, 1))


def loss_fn(model, batch):
    return nn.functional.mse_loss(model(batch["x"]), batch["y"])


def build_optimizer(model, config):
    return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
'''


def test_batch_norm_couples_samples_and_bisection_finds_the_culprit(tmp_path, capsys):
    """One sample with an Inf feature makes batch norm's statistics, hence every row, NaN: no per-sample pass
    can run batch norm on one sample, so culprits come from removing samples until the step is finite."""
    from forensics.capture import Capture

    run = tmp_path / "bn"
    run.mkdir()
    (run / "forensics_entry.py").write_text(BN_ENTRY)
    ns: dict = {}
    exec(BN_ENTRY, ns)
    model = ns["build_model"]({})
    opt = ns["build_optimizer"](model, {})
    cap = Capture(run, config={}, every=5)
    g = torch.Generator().manual_seed(2)
    for step in range(1, 13):
        batch = {"x": torch.randn(12, 6, generator=g), "y": torch.randn(12, 1, generator=g)}
        if step == 8:
            batch["x"][9, 2] = float("inf")
        loss = ns["loss_fn"](model, batch)
        loss.backward()
        gn = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in model.parameters()]))
        opt.step()
        opt.zero_grad()
        cap.step(step, batch, loss, gn, model, opt)
        if not torch.isfinite(loss):
            break
    code = main(["replay", str(run), "--db", str(tmp_path / "f.duckdb"), "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    r = json.loads(out.out)
    assert r["fidelity"]["faithful"] and r["reproduced"] and r["bad_step"] == 8
    assert r["first_nonfinite"]["phase"] == "forward" and r["first_nonfinite"]["module"] == "0"
    assert r["culprit_samples"] == [9] and r["culprits"]["method"] == "bisection"


def test_minimal_removal_finds_several_culprits_in_few_tests():
    from forensics.usercode.replay.culprits import minimal_removal

    calls = []

    def finite_without(removed):
        calls.append(removed)
        return {3, 17, 40} <= removed

    assert minimal_removal(64, finite_without) == [3, 17, 40]
    assert len(calls) < 40  # far fewer than one re-run per sample
