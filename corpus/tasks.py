"""Families: a model and its data, built from the gallery's building blocks (sample_runs/gen: models, data)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F

from sample_runs.gen import data, models
from sample_runs.gen.common import seed_all

from .models import GRUClassifier, ModularMLP


@dataclass
class Task:
    model: torch.nn.Module
    loss_fn: Callable            # (model, batch) -> mean loss
    batch_fn: Callable           # step -> batch dict
    evaluate: Callable           # model -> {"val_loss", ...}
    steps_per_epoch: int
    classes: int | None          # C of a C-class cross-entropy (None: regression)
    input_key: str = "x"
    config: dict = field(default_factory=dict)
    val: tuple = ()              # (xv, yv)


def _ce(model, batch):
    return F.cross_entropy(model(batch["x"]), batch["y"])


def _lm_loss(model, batch):
    return F.cross_entropy(model(batch["x"]).flatten(0, 1), batch["y"].flatten())


def _mse(model, batch):
    return F.mse_loss(model(batch["x"]), batch["y"])


_PRETRAINED: dict[tuple, dict] = {}


def pretrained_body(d: int, hidden: int, seed: int = 1234) -> dict:
    """A tiny MLP pre-trained (deterministically, seed 1234, 300 Adam steps) on a 5-class teacher task; its body is
    the start of every fine-tune. Cached per process, recomputed identically in each."""
    key = (d, hidden, seed)
    if key not in _PRETRAINED:
        g = torch.random.get_rng_state()
        torch.manual_seed(seed)
        x, y = data.teacher_classification(8192, d, 5, seed=seed)
        m = models.MLP(d, hidden, 5, depth=2, act="gelu")
        opt = torch.optim.Adam(m.parameters(), lr=2e-3)
        s = data.Sampler(len(x), 64, seed=seed)
        for _ in range(300):
            i = s.next()
            loss = F.cross_entropy(m(x[i]), y[i])
            opt.zero_grad()
            loss.backward()
            opt.step()
        _PRETRAINED[key] = {k: v.clone() for k, v in m.body.state_dict().items()}
        torch.random.set_rng_state(g)
    return _PRETRAINED[key]


def make_task(family: str, seed: int, *, n_train: int | None = None, n_val: int | None = None, depth: int = 2,
              act: str = "relu", hidden: int = 64, x_scale: float = 1.0, dropout: float = 0.0,
              classes: int | None = None, loss: str = "", bs: int | None = None) -> Task:
    """Build the family's model and data. Knobs let a bug change the setup (the data size, the depth, ...)."""
    seed_all(seed)
    if family in ("mlp", "mlp_long", "finetune"):
        d = 16
        c = classes or (2 if family == "mlp_long" else (5, 10)[seed % 2])
        n, nv = n_train or 4096, n_val or 512
        sharp = 0.5 if family == "mlp_long" else 1.0
        x, y = data.teacher_classification(n + nv, d, c, seed=seed, sharp=sharp)
        if family == "finetune":
            x, y = data.teacher_classification(n + nv, d, c, seed=seed + 1)
        x = x * x_scale
        model = models.MLP(d, hidden, c, depth=depth, act=act if family != "finetune" else "gelu")
        if dropout:
            model.body = torch.nn.Sequential(*[m for layer in model.body for m in
                                               ((layer, torch.nn.Dropout(dropout)) if isinstance(layer, torch.nn.Linear) else (layer,))])
        if family == "finetune":
            model.body.load_state_dict(pretrained_body(d, hidden))
        batch_size = 32
        cfg = {"model": {"kind": "mlp", "d_in": d, "hidden": hidden, "depth": depth, "act": act}, "num_classes": c}
        lf = _ce
    elif family == "cnn":
        n, nv = n_train or 1024, n_val or 256
        x, y = data.bar_images(n + nv, seed=seed)
        x = x * x_scale
        c = 4
        model = models.SmallCNN(n_classes=4, width=8)
        batch_size, lf = 32, _ce
        cfg = {"model": {"kind": "cnn", "width": 8}, "num_classes": 4}
    elif family in ("lstm", "gru"):
        n, nv = n_train or 2048, n_val or 256
        x, y = data.count_sequences(n + nv, seed=seed)
        c = 2
        model = (models.LSTMClassifier if family == "lstm" else GRUClassifier)(vocab=6, d=16, hidden=32, n_classes=2)
        batch_size, lf = 32, _ce
        cfg = {"model": {"kind": family, "hidden": 32}, "num_classes": 2}
    elif family in ("transformer", "lm_bigvocab"):
        vocab = 16 if family == "transformer" else 2048
        n, nv = n_train or 4096, n_val or 256
        toks = data.arithmetic_lm(n + nv, seed=seed, vocab=vocab)
        x, y = toks[:, :-1].contiguous(), toks[:, 1:].contiguous()
        c = vocab
        model = models.TinyTransformer(vocab=vocab, d=32, heads=2, layers=2 if vocab == 16 else 1, seq=16)
        batch_size, lf = 16, _lm_loss
        cfg = {"model": {"kind": "transformer", "vocab": vocab, "d": 32, "seq": 16}, "vocab_size": vocab}
    elif family == "regression":
        n, nv = n_train or 4096, n_val or 512
        x, y = data.regression(n + nv, 16, seed=seed)
        y = y * 0.05  # tiny targets: MSE from ~1e-2 down to ~1e-5
        c = None
        model = models.MLP(16, hidden, 1, depth=depth, act="gelu")
        batch_size, lf = 32, _mse
        cfg = {"model": {"kind": "mlp", "d_in": 16, "hidden": hidden, "depth": depth}, "target_scale": 0.05}
    elif family == "modular":
        p = 31
        a, b = torch.meshgrid(torch.arange(p), torch.arange(p), indexing="ij")
        x = torch.stack([a.flatten(), b.flatten()], 1)
        y = (x[:, 0] + x[:, 1]) % p
        perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
        x, y = x[perm], y[perm]
        n = len(x) // 2
        nv = len(x) - n
        c = p
        model = ModularMLP(p, 64)
        batch_size, lf = n, _ce  # full batch
        cfg = {"model": {"kind": "modular_mlp", "p": p, "d": 64}, "num_classes": p, "train_fraction": 0.5}
    else:
        raise ValueError(family)
    if loss == "double_softmax":
        def lf(model, batch):  # BUG: CrossEntropyLoss applies log_softmax again
            return F.cross_entropy(torch.softmax(model(batch["x"]), -1), batch["y"])
    if loss == "log_softmax_by_hand":
        def lf(model, batch):  # BUG: log(softmax(z)) is -inf once a probability underflows
            return F.nll_loss(torch.log(torch.softmax(model(batch["x"]), -1)), batch["y"])
    bs = bs or batch_size
    xt, yt, xv, yv = x[:n], y[:n], x[n:n + nv], y[n:n + nv]
    sampler = data.Sampler(n, bs, seed=seed)

    def batch_fn(step):
        idx = sampler.next()
        return {"x": xt[idx], "y": yt[idx], "index": idx}

    def evaluate(m, xv=xv, yv=yv):
        out = {"val_loss": float(lf(m, {"x": xv, "y": yv}))}
        if c is not None and family not in ("transformer", "lm_bigvocab"):
            out["val_acc"] = float((m(xv).argmax(-1) == yv).float().mean())
        if family == "modular":
            out["train_acc"] = float((m(xt).argmax(-1) == yt).float().mean())
        return out

    cfg.update({"seed": seed, "data": {"n_train": n, "n_val": nv, "batch_size": bs}})
    return Task(model, lf, batch_fn, evaluate, max(1, n // bs), c, config=cfg, val=(xv, yv))


def log_c(task: Task) -> float | None:
    return math.log(task.classes) if task.classes else None
