"""vanishing_gradients on per-layer gradient norms of real tiny networks, logged to real TensorBoard event files."""

import numpy as np

from forensics.judge.detectors import VanishingGradients
from tests.runwriters import load_run, one_torch_thread, write_tb



def _layer_norms(depth: int, act: str, steps: int = 30, freeze_first: bool = False) -> dict:
    """Train an MLP of `depth` hidden layers for a few SGD steps and log every parameter's gradient norm as
    `grad_norm/<name>` (a frozen parameter has no gradient: logged as 0.0, as a loop over parameters does)."""
    import torch

    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(32, 32), torch.nn.Sigmoid() if act == "sigmoid" else torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(32, 10))
    if freeze_first:
        model[0].requires_grad_(False)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    x, y = torch.randn(256, 32), torch.randint(0, 10, (256,))
    out: dict = {}
    with one_torch_thread():
        for step in range(steps):
            i = torch.randint(0, 256, (32,))
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x[i]), y[i]).backward()
            for name, p in model.named_parameters():
                out.setdefault(f"grad_norm/{name}", ([], []))
                out[f"grad_norm/{name}"][0].append(step)
                out[f"grad_norm/{name}"][1].append(0.0 if p.grad is None else float(p.grad.norm()))
            opt.step()
    return {k: (np.array(s), np.array(v)) for k, (s, v) in out.items()}


def test_fires_on_a_deep_sigmoid_network(tmp_path):
    run = load_run(write_tb(tmp_path / "r", _layer_norms(12, "sigmoid")), tmp_path / "f.duckdb")
    [f] = VanishingGradients().check(run)
    assert f.kind == "vanishing_gradients" and f.step == 0 and f.step_end == 29
    # natural order: layer 24 (the head) is after layer 2, not before it as in string order
    assert f.evidence["first_layer"].startswith("0.") and f.evidence["last_layer"].startswith("24.")
    assert f.evidence["ratio"] < 1e-6 and f.evidence["layers"] == 26


def test_shallow_relu_network_is_silent(tmp_path):
    run = load_run(write_tb(tmp_path / "r", _layer_norms(2, "relu")), tmp_path / "f.duckdb")
    assert list(VanishingGradients().check(run)) == []


def test_a_frozen_first_layer_is_not_a_vanishing_gradient(tmp_path):
    """The first layer is frozen (requires_grad=False): its logged norm is exactly 0 at every step. That is
    frozen parameters, not gradients that shrink through depth; the layers that train are healthy."""
    run = load_run(write_tb(tmp_path / "r", _layer_norms(2, "relu", freeze_first=True)), tmp_path / "f.duckdb")
    assert list(VanishingGradients().check(run)) == []


def test_an_agents_per_network_norms_are_not_layers(tmp_path):
    """An RL agent's norms, one per network (a world model's ×10⁴ an actor's), beside its episode reward: not the
    layers of one network, so not compared. The same norms without the agent's series are compared."""
    steps = np.arange(0, 300, 10)
    norms = {"grad_norm/actor": (steps, np.full(steps.size, 0.1)), "grad_norm/model": (steps, np.full(steps.size, 3e3))}
    agent = norms | {"train/episode_reward": (steps, np.linspace(10, 300, steps.size)),
                     "train/actor_loss": (steps, np.linspace(-1, -5, steps.size)),
                     "train/value_loss": (steps, np.linspace(5, 2, steps.size))}
    run = load_run(write_tb(tmp_path / "agent", agent), tmp_path / "a.duckdb")
    assert len(run.all_of("layer_grad_norm")) == 2
    assert "reinforcement-learning" in VanishingGradients().unavailable(run)
    plain = load_run(write_tb(tmp_path / "plain", norms | {"train/loss": agent["train/value_loss"]}), tmp_path / "p.duckdb")
    assert VanishingGradients().unavailable(plain) is None and list(VanishingGradients().check(plain))
