"""Fidelity stated honestly: where the replayed window blows up, rounding is amplified, and the replay measures by
how much (re-runs with every weight moved one float32 ulp) and holds each logged value to the tolerance that implies;
no value outside its tolerance is called a match, and no line says a bare "ok"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forensics.cli import main
from tests.runwriters import entry_run

torch = pytest.importorskip("torch")

ENTRY = '''
import torch


def build_model(config):
    torch.manual_seed(config["seed"])
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.GELU(), torch.nn.Linear(64, 64), torch.nn.GELU(),
                               torch.nn.Linear(64, 1))


def loss_fn(model, batch):
    return torch.nn.functional.mse_loss(model(batch["x"]), batch["y"])


def build_optimizer(model, config):
    return torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=0.9)
'''


def chaotic_run(root: Path) -> Path:
    """A real run (SummaryWriter logs, torch checkpoint, saved batches) whose LR is too high: the loss wanders, then
    blows up to NaN. Its training loop computed the first layer in float64 (another kernel, as another machine's
    would be): the same model to float32 rounding, so the replay matches the first steps to 1e-5 and then drifts
    as the blow-up amplifies those last bits."""
    from torch.utils.tensorboard import SummaryWriter

    config = {"seed": 0, "lr": 0.2}
    ns, model, opt = entry_run(root, ENTRY, config)
    g = torch.Generator().manual_seed(1)
    w = SummaryWriter(str(root))
    f = torch.nn.functional
    for step in range(1, 66):
        x = torch.randn(64, 16, generator=g)
        batch = {"x": x, "y": torch.sin(x[:, :1] * 2) + x[:, 1:2] ** 2}
        if step == 31:
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": 30},
                       root / "checkpoints" / "step_30.pt")
        if step > 30:
            torch.save(batch, root / "batches" / f"step_{step}.pt")
        h = f.linear(x.double(), model[0].weight.double(), model[0].bias.double()).float()
        loss = f.mse_loss(model[4](model[3](model[2](model[1](h)))), batch["y"])
        opt.zero_grad()
        loss.backward()
        gn = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in model.parameters()]))
        w.add_scalar("train/loss", loss.item(), step)
        w.add_scalar("train/grad_norm", gn.item(), step)
        opt.step()
    w.close()
    return root


def test_a_blowing_up_window_states_its_measured_tolerance(tmp_path, capsys):
    run = chaotic_run(tmp_path / "chaotic")
    db = str(tmp_path / "f.duckdb")
    assert main(["replay", str(run), "--db", db, "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    fid = r["fidelity"]
    spread = fid["spread"]
    assert spread is not None and spread["reruns"] >= 2
    assert spread["amplification_max"] == "inf" or spread["amplification_max"] > 1e3  # rounding amplified
    finite = [c for c in fid["compared"] if c["logged"] not in ("nan", "inf", "-inf")
              and c["replayed"] not in ("nan", "inf", "-inf")]
    assert any(c["logged"] != c["replayed"] for c in finite), "the run's kernel left no trace: the test tests nothing"
    for c in finite:  # a match is within the tolerance it states, and a value outside it is no match
        within = abs(c["logged"] - c["replayed"]) <= (float(c["tolerance"]) if c["tolerance"] != "inf" else 1e300)
        assert c["match"] is within, c
        assert c["within"] in (("exact", "rounding", "spread") if within else ("none",))
    assert fid["faithful"] is all(c["match"] for c in finite)
    assert main(["replay", str(run), "--db", db]) == 0
    text = capsys.readouterr().out
    assert " ok" not in text and "match\n" not in text
    line = next(t for t in text.splitlines() if t.startswith("fidelity: "))
    assert "rounding amplified up to" in line and "float32 ulp" in line


def test_a_value_outside_the_measured_tolerance_is_no_match_however_noisy():
    """Logged 1.71e8, replayed 4.57e7, the perturbed re-run 6.9e7: rounding moves this value by half of itself, yet
    the logged one is outside 4x that spread: it differs (an earlier rule called such a value an uninformative
    match)."""
    from forensics.usercode.replay.fidelity import NOISE_FACTOR, judge_value

    c = judge_value("train/grad_norm", 77, 1.71294e8, 4.57e7, [6.9e7], "the step's own value")
    assert c["rounding_spread"] == pytest.approx(2.33e7)
    assert c["match"] is False and c["within"] == "none"
    assert c["tolerance"] == pytest.approx(NOISE_FACTOR * 2.33e7)
    inside = judge_value("train/grad_norm", 77, 1.71294e8, 4.57e7, [4.57e7 + 3.2e7], "the step's own value")
    assert inside["match"] is True and inside["within"] == "spread" and inside["amplification"] > 1e5


def test_the_fidelity_lines_never_say_ok():
    """The per-value lines say how a value matched and the tolerance it was held to."""
    from forensics.usercode.replay.fidelity import judge_value
    from forensics.usercode.replay.report import value_line

    exact = value_line(judge_value("loss", 3, 2.3098154067993164, 2.3098154067993164, [2.30981564], "the step's own value"))
    spread = value_line(judge_value("loss", 9, 1.71e8, 1.2e8, [1.5e8], "the step's own value"))
    differs = value_line(judge_value("loss", 9, 1.71e8, 1.2e8, [], "the step's own value"))
    assert exact.endswith("equal (tolerance ±2.3e-05)")
    assert "within ±1.2e+08 (the measured rounding spread, amplified" in spread
    assert differs.endswith("DIFFERS (outside ±1.7e+03)")
    assert not any(" ok" in t for t in (exact, spread, differs))
