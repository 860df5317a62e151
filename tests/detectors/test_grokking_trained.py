"""grokking on modular addition trained here on the CPU (issue 24 class 8), logged with the real SummaryWriter:
the training loss (no training accuracy logged) reaches ~0 long before the validation accuracy jumps."""

import pytest

from forensics.judge.detectors import Grokking
from tests.runwriters import load_run, one_torch_thread


def _train(root, *, seed, steps, weight_decay, every=50, p=23, fraction=0.5, lr=3e-3):
    """An embedding + MLP on (a + b) mod p, full batch, AdamW; training loss and validation loss and accuracy
    every `every` steps."""
    import torch
    from torch.utils.tensorboard import SummaryWriter

    torch.manual_seed(seed)
    a, b = (t.flatten() for t in torch.meshgrid(torch.arange(p), torch.arange(p), indexing="ij"))
    y = (a + b) % p
    perm = torch.randperm(p * p)
    train, val = perm[:int(fraction * p * p)], perm[int(fraction * p * p):]
    emb = torch.nn.Embedding(p, 32)
    mlp = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, p))
    opt = torch.optim.AdamW([*emb.parameters(), *mlp.parameters()], lr=lr, weight_decay=weight_decay)
    loss_fn = torch.nn.CrossEntropyLoss()

    def logits(idx):
        return mlp(torch.cat([emb(a[idx]), emb(b[idx])], 1))
    w = SummaryWriter(str(root))
    with one_torch_thread():
        _fit(w, steps, every, logits, loss_fn, opt, train, val, y)
    w.close()
    return root


def _fit(w, steps, every, logits, loss_fn, opt, train, val, y):
    import torch

    for s in range(1, steps + 1):
        loss = loss_fn(logits(train), y[train])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if s % every == 0:
            with torch.no_grad():
                out = logits(val)
                clock = 1e9 + 0.01 * s
                w.add_scalar("train/loss", loss.item(), s, walltime=clock)
                w.add_scalar("val/loss", loss_fn(out, y[val]).item(), s, walltime=clock)
                w.add_scalar("val/acc", (out.argmax(1) == y[val]).float().mean().item(), s, walltime=clock)


@pytest.fixture(scope="module")
def grokked(tmp_path_factory):
    base = tmp_path_factory.mktemp("grok")
    return load_run(_train(base / "r", seed=1, steps=8000, weight_decay=2.0), base / "f.duckdb")


def test_training_loss_near_zero_long_before_validation_accuracy_jumps_is_grokking(grokked):
    [f] = Grokking().check(grokked)
    ev = f.evidence
    assert ev["train_metric"] == "loss" and ev["metric"] == "accuracy"
    assert ev["train_level_at_saturation"] <= 0.1 and ev["val_level_at_saturation"] < 0.1
    assert ev["val_best_level"] > 0.8 and ev["delay_steps"] >= ev["train_saturation_step"]


def test_memorising_without_generalising_is_no_grokking(tmp_path):
    """Without weight decay the same model memorises and its validation accuracy never jumps."""
    run = load_run(_train(tmp_path / "r", seed=1, steps=3000, weight_decay=0.0), tmp_path / "f.duckdb")
    assert list(Grokking().check(run)) == []
