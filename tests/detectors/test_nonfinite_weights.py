"""nonfinite_weights on checkpoints saved with torch.save and safetensors by a real (tiny) training loop."""

import numpy as np
import pytest

from forensics.judge.detectors import NonfiniteWeights
from tests.runwriters import load_run, one_torch_thread


def _train(root, blowup_at: int | None = None, steps: int = 40, every: int = 10, fmt: str = "pt",
           mask: bool = False) -> list[float]:
    """Fit a tiny MLP with SGD at LR 1e-4 (0.05 from step `blowup_at` on, which diverges), saving the model and optimizer every `every` steps as
    `checkpoints/step_N.pt` (torch.save of a dict, as most loops do) or `step_N.safetensors` (model only).
    `mask` registers an attention-style buffer of -inf above the diagonal, saved with the weights."""
    import torch
    from safetensors.torch import save_file

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    if mask:
        model.register_buffer("causal_mask", torch.full((4, 4), float("-inf")).triu(1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(64, 8) * 10
    y = x.sum(dim=1, keepdim=True)
    (root / "checkpoints").mkdir(parents=True, exist_ok=True)
    losses = []
    with one_torch_thread():
        for step in range(1, steps + 1):
            if step == blowup_at:
                opt.param_groups[0]["lr"] = 0.05
            opt.zero_grad()
            loss = (model(x) - y).pow(2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            if step % every == 0:
                if fmt == "pt":
                    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step},
                               root / "checkpoints" / f"step_{step}.pt")
                else:
                    save_file({k: v.contiguous() for k, v in model.state_dict().items()},
                              root / "checkpoints" / f"step_{step}.safetensors", metadata={"step": str(step)})
    return losses


@pytest.mark.parametrize("fmt", ["pt", "safetensors"])
def test_fires_at_the_first_checkpoint_with_nan_weights(tmp_path, fmt):
    losses = _train(tmp_path / "r", blowup_at=21, fmt=fmt)  # the weights overflow to Inf, then NaN
    assert np.isfinite(losses[:21]).all() and not np.isfinite(losses[29])  # NaN by the save at step 30
    [f] = NonfiniteWeights().check(load_run(tmp_path / "r", tmp_path / "f.duckdb"))
    assert f.kind == "nonfinite_weights" and f.severity == "critical" and f.step == 30
    assert f.evidence["last_finite_step"] == 20 and f.evidence["checkpoints_nonfinite"] == 2
    assert f.evidence["n_tensors"] == 4 and f.evidence["tensors"] == ["0.bias", "0.weight", "2.bias", "2.weight"]


def test_healthy_checkpoints_are_silent(tmp_path):
    _train(tmp_path / "r")
    assert list(NonfiniteWeights().check(load_run(tmp_path / "r", tmp_path / "f.duckdb"))) == []


def test_a_constant_minus_inf_mask_buffer_is_not_a_nonfinite_weight(tmp_path):
    """A causal mask of -inf registered as a (persistent) buffer is saved with every checkpoint, unchanged from
    the first: non-finite by design, not weights that blew up."""
    _train(tmp_path / "r", mask=True)
    assert list(NonfiniteWeights().check(load_run(tmp_path / "r", tmp_path / "f.duckdb"))) == []


@pytest.mark.parametrize("name", ["best_model.pth", "model.pt", "model.safetensors", "checkpoints/best.ckpt"])
@pytest.mark.parametrize("finite", [True, False])
def test_a_checkpoint_without_a_step_is_checked_not_a_crash(tmp_path, capsys, name, finite):
    """Issue 26 item 4: a run whose only checkpoint has no step (`best_model.pth` beside a console log, a root
    `model.safetensors`, Lightning's `best.ckpt` without `global_step`) crashed analyze with a TypeError."""
    import torch
    from safetensors.torch import save_file

    from forensics.cli import main

    root = tmp_path / "r"
    root.mkdir()
    (root / "train.log").write_text("".join(f"step {i} loss {2.0 / (i + 1):.4f}\n" for i in range(1, 60)))
    weights = {"w": torch.tensor([1.0, 2.0, 1.0 if finite else float("nan")])}
    path = root / name
    path.parent.mkdir(exist_ok=True)
    if name.endswith(".safetensors"):
        save_file(weights, str(path))
    else:
        torch.save({"state_dict": weights} if name.endswith(".ckpt") else weights, path)
    assert main(["analyze", str(root), "--db", str(tmp_path / "f.duckdb"), "--json"]) == 0
    import json

    found = [f for f in json.loads(capsys.readouterr().out)["findings"] if f["kind"] == "nonfinite_weights"]
    assert [f["evidence"]["checkpoint"] for f in found] == ([] if finite else [name])
