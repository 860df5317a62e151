"""Replay's two gaps found on held-out runs (issue 27): a step whose gradients are finite after backward but whose
`clip_grad_norm_` total norm overflows float32 is named where it happens (the optimizer phase's clipping stage), and
a counterfactual that "fixes" the step only because clipping scaled every gradient to 0 says so."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from forensics.cli import main
from tests.runwriters import entry_run

torch = pytest.importorskip("torch")

ENTRY = '''
import torch


def build_model(config):
    torch.manual_seed(config["seed"])
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 1))


def loss_fn(model, batch):
    return torch.nn.functional.l1_loss(model(batch["x"]), batch["y"])


def build_optimizer(model, config):
    return torch.optim.SGD(model.parameters(), lr=config["optim"]["lr"])


def step_options(config):
    return {"max_grad_norm": config["max_grad_norm"]}
'''


def overflow_run(root: Path) -> Path:
    """A real run (TensorBoard logs, torch checkpoint, saved batches) whose step 7 batch arrives unscaled (×1e20):
    the loss (~1e20) and every gradient (~1e19) stay finite, but clip_grad_norm_'s sum of squares passes float32's
    3.4e38, so the total norm it returns, and the run logs, is inf, and the clip coefficient 5/inf zeroes every
    gradient."""
    from torch.utils.tensorboard import SummaryWriter

    config = {"seed": 1, "optim": {"lr": 0.05}, "max_grad_norm": 5.0}
    ns, model, opt = entry_run(root, ENTRY, config)
    g = torch.Generator().manual_seed(0)
    w = SummaryWriter(str(root))
    for step in range(1, 10):
        batch = {"x": torch.randn(16, 4, generator=g), "y": torch.randn(16, 1, generator=g)}
        if step == 7:
            batch["x"] = batch["x"] * 1e20
        if step == 5:
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": 4},
                       root / "checkpoints" / "step_4.pt")
        if step >= 5:
            torch.save(batch, root / "batches" / f"step_{step}.pt")
        loss = ns["loss_fn"](model, batch)
        loss.backward()
        assert all(bool(torch.isfinite(p.grad).all()) for p in model.parameters())
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), config["max_grad_norm"])
        w.add_scalar("loss", loss.item(), step)
        w.add_scalar("grad_norm", gn.item(), step)
        opt.step()
        opt.zero_grad()
    w.close()
    return root


def replay_json(run: Path, tmp_path: Path, capsys) -> dict:
    code = main(["replay", str(run), "--db", str(tmp_path / "f.duckdb"), "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def test_clip_norm_overflow_is_named_in_the_optimizer_phase(tmp_path, capsys):
    run = overflow_run(tmp_path / "overflow")
    r = replay_json(run, tmp_path, capsys)
    assert r["step"] == 7 and r["bad_step"] == 7
    assert r["fidelity"]["faithful"] is True and r["reproduced"] is True
    hit = r["first_nonfinite"]
    assert (hit["phase"], hit["op"]) == ("optimizer", "clip_grad_norm_")
    assert hit["parameter"] in {"0.weight", "0.bias", "1.weight", "1.bias"}
    assert hit["module"] == hit["parameter"].rpartition(".")[0]
    total = hit["inputs"]["total_norm"]
    assert total["value"] == "inf" and total["from"] == "finite gradients" and total["clip_coef"] == 0
    assert "every gradient scaled to 0" in hit["inputs"]["gradients_after_clipping"]["effect"]
    assert "optimizer" in r["status"]


def test_counterfactual_that_only_zeroes_the_gradients_says_so(tmp_path, capsys):
    run = overflow_run(tmp_path / "overflow")
    r = replay_json(run, tmp_path, capsys)
    changes = {c["change"]: c for c in r["counterfactuals"]}
    clip = changes["clip_5.0"]  # clipping at the run's own threshold (its config's max_grad_norm): the run itself
    assert clip["rerun"] is False and "the run already clips at 5" in clip["note"]
    assert clip["finite"] is True and clip["grad_norm"] == "inf"
    assert "every gradient was scaled to 0" in clip["note"]
    assert r["likely_fix"] is None or r["likely_fix"]["change"] != "clip_5.0"  # a vacuous finite is no fix
    for c in r["counterfactuals"]:  # a change that fails as the replay did names the replay's phase
        if c.get("applicable") and not c["finite"]:
            assert c["phase"] == r["first_nonfinite"]["phase"]


def test_clip_stage_is_checked_in_a_plain_step():
    """run_step's stages: finite gradients in, an inf total norm out, every gradient zeroed: the optimizer phase."""
    from forensics.usercode.kit.entry import StepOptions
    from forensics.usercode.kit.restore import State
    from forensics.usercode.replay.state import run_step

    class Entry:
        @staticmethod
        def loss_fn(model, batch):
            return torch.nn.functional.l1_loss(model(batch["x"]), batch["y"])

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    st = State(Entry, {}, StepOptions(max_grad_norm=5.0), model, opt, None, None, torch.device("cpu"), [], [])
    before = [p.detach().clone() for p in model.parameters()]
    out = run_step(st, {"x": torch.randn(16, 4) * 1e20, "y": torch.zeros(16, 1)})
    assert math.isfinite(out.loss) and out.grads_finite and out.params_finite
    assert (out.phase, out.stage, out.zeroed, out.finite) == ("optimizer", "clip_grad_norm_", True, False)
    assert all(torch.equal(a, p) for a, p in zip(before, model.parameters()))  # the update did nothing
