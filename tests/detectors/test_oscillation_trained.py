"""oscillation against underfitting on runs trained here on the CPU (issue 24 class 8) and logged with the real
SummaryWriter: an LR too high holds the loss around a level while the weights bounce, and a fixed validation
set's loss goes up and down with them; a model too small stalls with settled weights, its validation loss
smooth. The first is oscillation (not underfitting), the second underfitting (not oscillation)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from forensics.judge.detectors import Oscillation, Underfitting
from tests.paths import REPO
from tests.runwriters import load_run, one_torch_thread


def _train(root, *, seed, opt, lr, classes, hidden, steps=400, every=1, batch=32, d=16):
    """An MLP on a linear teacher's labels, minibatch training loss every `every` steps and the loss of a fixed
    512-sample validation set every 20, through torch.utils.tensorboard.SummaryWriter."""
    import torch
    from torch.utils.tensorboard import SummaryWriter

    torch.manual_seed(seed)

    def split(n, part):
        g = torch.Generator().manual_seed(seed)
        teacher = torch.randn(d, classes, generator=g)
        g.manual_seed(seed * 1000 + part + 1)
        x = torch.randn(n, d, generator=g)
        return x, (x @ teacher + 0.5 * torch.randn(n, classes, generator=g)).argmax(1)

    (x, y), (xv, yv) = split(2048, 0), split(512, 1)
    g = torch.Generator().manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(d, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, classes))
    optim = (torch.optim.SGD if opt == "sgd" else torch.optim.Adam)(model.parameters(), lr=lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    w = SummaryWriter(str(root))
    for s in range(1, steps + 1):
        i = torch.randint(0, x.shape[0], (batch,), generator=g)
        loss = loss_fn(model(x[i]), y[i])
        optim.zero_grad()
        loss.backward()
        optim.step()
        if s % every == 0:
            w.add_scalar("train/loss", loss.item(), s, walltime=1e9 + 0.01 * s)
        if s % 20 == 0:
            with torch.no_grad():
                w.add_scalar("val/loss", loss_fn(model(xv), yv).item(), s, walltime=1e9 + 0.01 * s)
    w.close()
    (root / "config.json").write_text(json.dumps({"optimizer": opt, "lr": lr, "num_classes": classes}))
    return root


CASES = {  # name: (training, oscillates)
    "adam_lr1_near_chance": (dict(seed=12, opt="adam", lr=1.0, classes=10, hidden=32), True),
    "adam_lr0.5_8_classes": (dict(seed=13, opt="adam", lr=0.5, classes=8, hidden=16, batch=64), True),
    "sgd_lr5_logged_every_5": (dict(seed=1, opt="sgd", lr=5.0, classes=4, hidden=32, steps=1000, every=5), True),
    "tiny_capacity": (dict(seed=15, opt="adam", lr=3e-3, classes=8, hidden=1, steps=600), False),
    "healthy_adam": (dict(seed=6, opt="adam", lr=1e-3, classes=4, hidden=32, steps=600), False),
}


def _train_all(base: str) -> None:
    with one_torch_thread():
        for name, (kw, _) in CASES.items():
            _train(Path(base) / name, **kw)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The runs are trained in a child whose ATen kernels are the portable ones (ATEN_CPU_CAPABILITY=default): an
    LR high enough to oscillate makes training chaotic, and AVX2 and AVX-512 kernels round differently enough to
    land the same seed on another curve. The curves are then the same on every machine."""
    base = tmp_path_factory.mktemp("trained")
    subprocess.run([sys.executable, "-c", f"from tests.detectors.test_oscillation_trained import _train_all; "
                    f"_train_all({str(base)!r})"], cwd=REPO, check=True, timeout=600,
                   env={**os.environ, "ATEN_CPU_CAPABILITY": "default"})
    return {name: load_run(base / name, base / f"{name}.duckdb") for name in CASES}


@pytest.mark.parametrize("name", CASES)
def test_oscillation_is_told_from_underfitting(runs, name):
    run, oscillates = runs[name], CASES[name][1]
    found = list(Oscillation().check(run))
    assert bool(found) == oscillates, [f.summary for f in found]
    if oscillates:
        assert found[0].evidence["val_sign_change_rate"] >= 0.35 if found[0].evidence["rule"] == "bouncing_weights" else True
        assert list(Underfitting().check(run)) == []


def test_tiny_capacity_stays_underfitting(runs):
    [f] = Underfitting().check(runs["tiny_capacity"])
    assert f.evidence["fraction_of_reference"] > 0.4
