"""Runs trained here, each with one silent bug, for `forensics probe`: a tiny MLP classifier on a teacher's labels,
trained for a few dozen CPU steps by the user's loop with forensics.capture's two lines (step-0 checkpoint, the
first batches, periodic checkpoints). The bug lives in the run's own entry point, switched by its config, or in
its data loop, as it would in a user's script."""

from __future__ import annotations

from pathlib import Path

import torch

ENTRY = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, config):
        super().__init__()
        act = nn.Tanh if config.get("act") == "tanh" else nn.ReLU
        self.body = nn.Sequential(nn.Linear(8, 32), act(), nn.Linear(32, 32), act())
        self.head = nn.Linear(32, 3)
        self.softmax = nn.Softmax(dim=-1) if config.get("softmax_head") else None
        self.detach = bool(config.get("detach"))

    def forward(self, x):
        h = self.body(x)
        if self.detach:
            h = h.detach()
        z = self.head(h)
        return self.softmax(z) if self.softmax is not None else z


def build_model(config):
    torch.manual_seed(config.get("seed", 0))
    model = Net(config)
    if config.get("relu_bias") is not None:
        with torch.no_grad():
            for m in model.body:
                if isinstance(m, nn.Linear):
                    m.bias.fill_(config["relu_bias"])
    if config.get("head_scale"):
        with torch.no_grad():
            model.head.weight.mul_(config["head_scale"])
    if config.get("frozen_body"):
        for p in model.body.parameters():
            p.requires_grad_(False)
    return model


def loss_fn(model, batch):
    return nn.functional.cross_entropy(model(batch["x"]), batch["y"])


def build_optimizer(model, config):
    params = model.head.parameters() if config.get("head_only_in_optimizer") else model.parameters()
    if config["optimizer"] == "sgd":
        return torch.optim.SGD(params, lr=config["lr"], momentum=config.get("momentum", 0.0))
    return torch.optim.Adam(params, lr=config["lr"])
'''

HEALTHY = {"optimizer": "adam", "lr": 1e-2}

# name -> (config changes, data changes): one silent bug each, plus healthy controls
RUNS = {
    "healthy_adam": ({}, {}),
    "healthy_sgd_tanh": ({"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "act": "tanh"}, {}),
    "softmax_before_ce": ({"softmax_head": True}, {}),
    "detach_before_head": ({"detach": True}, {}),
    "frozen_body": ({"frozen_body": True}, {}),
    "body_not_in_optimizer": ({"head_only_in_optimizer": True}, {}),
    "lr_1e-7": ({"lr": 1e-7}, {}),
    "sgd_lr_oscillating": ({"optimizer": "sgd", "lr": 0.5, "momentum": 0.9}, {}),
    "targets_shuffled": ({}, {"shuffle_targets": True}),
    "relu_bias_negative": ({"relu_bias": -10.0}, {}),
    "inputs_x1000_tanh": ({"act": "tanh"}, {"input_scale": 1000.0}),
    "head_init_large": ({"head_scale": 300.0}, {}),
}

STEPS, EVERY, BATCH = 60, 20, 32


def teacher_data(n: int = 1024, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and the labels a fixed random linear teacher gives them: learnable, three classes."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    w = torch.randn(8, 3, generator=g)
    return x, (x @ w).argmax(dim=1)


def train_run(root: Path, name: str) -> Path:
    """Train `name`'s run into root/name with forensics.capture; the run directory it wrote."""
    from forensics.capture import Capture

    changes, data = RUNS[name]
    config = {**HEALTHY, **changes}
    run = root / name
    run.mkdir(parents=True)
    (run / "forensics_entry.py").write_text(ENTRY)
    ns: dict = {}
    exec(ENTRY, ns)
    model = ns["build_model"](config)
    opt = ns["build_optimizer"](model, config)
    cap = Capture(run, config=config, every=EVERY, model=model, optimizer=opt)       # capture line 1
    x_all, y_all = teacher_data()
    g = torch.Generator().manual_seed(1)
    for step in range(1, STEPS + 1):
        idx = torch.randint(0, len(x_all), (BATCH,), generator=g)
        x, y = x_all[idx] * data.get("input_scale", 1.0), y_all[idx]
        if data.get("shuffle_targets"):  # the loader's bug: labels shuffled apart from their inputs
            y = y[torch.randperm(BATCH, generator=g)]
        batch = {"x": x, "y": y}
        loss = ns["loss_fn"](model, batch)
        loss.backward()
        params = [p for p in model.parameters() if p.grad is not None]
        gn = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params])) if params else torch.tensor(0.0)
        opt.step()
        opt.zero_grad()
        cap.step(step, batch, loss, gn, model, opt)                                 # capture line 2
    return run
