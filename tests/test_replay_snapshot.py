"""Replay's snapshot of a training state (model, optimizer, scheduler, RNG): a copy that later steps cannot touch,
restored bit for bit, made without `copy.deepcopy`'s per-tensor cost (forensics/usercode/replay/state.py `_copied`)."""

from __future__ import annotations

import copy
import random

import pytest

torch = pytest.importorskip("torch", reason="replay needs torch")

from forensics.usercode.replay.state import _copied  # noqa: E402


def _trained():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 1))
    model[2].weight = torch.nn.Parameter(torch.randn(1, 8))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(2):
        model(torch.randn(16, 4)).pow(2).mean().backward()
        opt.step()
        sched.step()
        opt.zero_grad()
    return model, opt, sched


def test_copy_is_deep_equal_and_independent():
    model, opt, sched = _trained()
    state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
             "rng": {"python": random.getstate(), "cpu": torch.get_rng_state()}}
    reference = copy.deepcopy(state)
    snap = _copied(state, {})

    assert snap["model"]._metadata == state["model"]._metadata  # load_state_dict reads module versions from it
    assert list(snap["model"]) == list(state["model"])
    for k, v in state["model"].items():
        assert torch.equal(snap["model"][k], v) and snap["model"][k].data_ptr() != v.data_ptr()
    exp_avg = opt.state_dict()["state"][0]["exp_avg"]
    assert torch.equal(snap["optimizer"]["state"][0]["exp_avg"], exp_avg)
    assert snap["optimizer"]["param_groups"] == state["optimizer"]["param_groups"]
    assert snap["scheduler"] == state["scheduler"] and snap["rng"]["python"] == state["rng"]["python"]

    # training on changes the live state, never the snapshot
    model(torch.randn(16, 4)).pow(2).mean().backward()
    opt.step()
    for k, v in reference["model"].items():
        assert torch.equal(snap["model"][k], v), k
    assert torch.equal(snap["optimizer"]["state"][0]["exp_avg"], reference["optimizer"]["state"][0]["exp_avg"])


def test_shared_tensors_stay_shared_and_gradients_flags_kept():
    w = torch.randn(3, requires_grad=True)
    tree = {"a": w, "b": [w, (w, 1.5)], "c": torch.randn(2)}
    out = _copied(tree, {})
    assert out["a"] is out["b"][0] is out["b"][1][0]  # as deepcopy keeps one copy of one tensor
    assert out["a"] is not w and out["a"].requires_grad and not out["c"].requires_grad
    assert isinstance(out["b"][1], tuple) and out["b"][1][1] == 1.5


def test_restored_state_replays_the_same_step_bit_for_bit():
    model, opt, _ = _trained()
    snap = _copied({"model": model.state_dict(), "optimizer": opt.state_dict()}, {})
    x = torch.randn(16, 4)

    def step():
        model(x).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
        return [p.detach().clone() for p in model.parameters()]

    first = step()
    restored = _copied(snap, {})
    model.load_state_dict(restored["model"])
    opt.load_state_dict(restored["optimizer"])
    again = step()
    assert all(torch.equal(a, b) for a, b in zip(first, again))
