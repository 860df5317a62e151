"""Runs whose bug shows in the curves, the gradients or the weights (no NaN)."""

from __future__ import annotations

import math

import numpy as np
import torch

from . import data, loggers
from .common import Ctx, Fit, capture, fit, seed_all
from .stats import layer_stats

CLS = '''
def build_model(config):
    torch.manual_seed(config["seed"])
    m = config["model"]
    model = MLP(m["d_in"], m["hidden"], m["classes"], depth=m["depth"], act=m["act"])
{INIT}
    return model


def loss_fn(model, batch):
{LOSS}


def build_optimizer(model, config):
    o = config["optim"]
{OPT}
'''
CE = '    return torch.nn.functional.cross_entropy(model(batch["x"]), batch["y"])'
ADAM = '    return torch.optim.Adam(model.parameters(), lr=o["lr"])'


def cls_setup(ctx: Ctx, seed: int, *, d=16, hidden=64, depth=2, act="relu", classes=5, lr=1e-3, n=4096,
              n_val=512, bs=32, noise=0.0, init="", loss=CE, opt=ADAM, steps=500, extra_cfg=None, fmt="yaml",
              x_scale=1.0, sharp=1.0, probe=False):
    """A classifier on teacher-labelled data: returns (entry, model, opt, batch_fn, evaluate, steps/epoch).
    With `probe`, the run ships its entry point (forensics_entry.py) for `forensics probe`."""
    seed_all(seed)
    ctx.config = {"seed": seed, "model": {"d_in": d, "hidden": hidden, "depth": depth, "act": act, "classes": classes},
                  "optim": {"lr": lr}, "data": {"n_train": n, "n_val": n_val, "batch_size": bs, "label_noise": noise},
                  "max_steps": steps, "num_classes": classes, **(extra_cfg or {})}
    ctx.write_config(fmt)
    entry = ctx.write_entry(CLS.replace("{INIT}", init or "    pass").replace("{LOSS}", loss).replace("{OPT}", opt),
                            replay=probe)
    x, y = data.teacher_classification(n + n_val, d, classes, seed=seed, noise=noise, sharp=sharp)
    x = x * x_scale
    xt, yt, xv, yv = x[:n], y[:n], x[n:], y[n:]
    sampler = data.Sampler(n, bs, seed=seed)

    def batch_fn(step):
        idx = sampler.next()
        return {"x": xt[idx], "y": yt[idx], "index": idx}

    def evaluate(m, xv=xv, yv=yv):
        out = m(xv)
        return {"val_loss": float(entry.loss_fn(m, {"x": xv, "y": yv})),
                "val_acc": float((out.argmax(-1) == yv).float().mean())}

    model = entry.build_model(ctx.config)
    return entry, model, entry.build_optimizer(model, ctx.config), batch_fn, evaluate, max(1, n // bs), (xt, yt, xv, yv)


def is_flat(series: dict, tol: float = 0.03) -> bool:
    """The loss did not move from the start: the medians of its first and last tenth differ by < `tol`
    (relative), and its running median (window n/20) never fell more than `tol` below the start."""
    v = np.array([series[s] for s in sorted(series)])
    k = max(3, len(v) // 10)
    first, last = np.median(v[:k]), np.median(v[-k:])
    w = max(3, len(v) // 20)
    low = min(np.median(v[i:i + w]) for i in range(len(v) - w + 1))
    return abs(last - first) / abs(first) < tol and (first - low) / abs(first) < tol


def rel_change(series: dict, head: int | None = None) -> float:
    """(first - last) / first, with first/last = medians of the first and last quarter of the points
    (or of `head` points), so batch noise does not count as movement."""
    v = [series[s] for s in sorted(series)]
    h = head or max(1, len(v) // 4)
    a, b = np.median(v[:h]), np.median(v[-h:])
    return float((a - b) / abs(a))


# ------------------------------------------------------------------------------------------------ runs

def flat_no_backward(ctx: Ctx):
    ctx.meta(healthy=False, bug="loss.backward() never called", logger="lightning_csv", model="mlp", description=(
        "A refactor of the training step dropped loss.backward(): zero_grad() and optimizer.step() still run, "
        "but no gradient ever exists, so nothing learns. A user sees train_loss_step wobble around its initial "
        "value (about log 5 = 1.61) for the whole run and val_loss not move."))
    entry, model, opt, batch_fn, evaluate, spe, _ = cls_setup(ctx, 101, steps=400, bs=64, lr=3e-3, probe=True)
    pl = loggers.LightningCSV(ctx.root, ctx.config, {"loss": "train_loss_step", "val_loss": "val_loss",
                                                     "val_acc": "val_acc"}, every=10, steps_per_epoch=spe)
    fit(ctx, model, opt, entry.loss_fn, Fit(steps=400, batch_fn=batch_fn, loggers=[pl], backward=False,
                                            eval_fn=evaluate, eval_every=spe, capture=capture(ctx, model, opt, every=400)))
    pl.close()
    s = pl.logged["train_loss_step"]
    assert is_flat(s), rel_change(s)
    ctx.kind("flat_loss", step=min(s), step_end=max(s), series="train_loss_step", primary=True,
             note=f"relative change first->last {rel_change(s):+.3f}")


def flat_all_frozen(ctx: Ctx):
    ctx.meta(healthy=False, bug="every parameter frozen: the optimizer holds the replaced head's old parameters",
             logger="tensorboard", model="mlp", description=(
                 "Transfer-learning code freezes the backbone (requires_grad=False), builds the optimizer, and only "
                 "then replaces the head with a fresh nn.Linear: the optimizer steps the old head's parameters, "
                 "the new head gets gradients that are never applied. Nothing changes: the loss is flat and every "
                 "checkpoint holds identical tensors. A user sees Loss/train flat at its initial value."))
    entry, model, opt, batch_fn, evaluate, spe, _ = cls_setup(ctx, 102, steps=300, lr=1e-3, probe=True, init=(
        "    for p in model.body.parameters():\n        p.requires_grad = False  # 'pretrained' backbone"),
        opt=ADAM + """


def replace_head(model):
    # a fresh task head; the script calls this AFTER build_optimizer (the bug): the optimizer keeps
    # stepping the old head, whose parameters no longer take part in the forward pass
    model.head = torch.nn.Linear(model.head.in_features, model.head.out_features)""")
    entry.replace_head(model)  # BUG: called after build_optimizer, so opt holds the old head
    tb = loggers.TensorBoard(ctx.root, {"loss": "Loss/train", "lr": "LR"}, every=5, val_tags={"val_loss": "Loss/val"})
    fit(ctx, model, opt, entry.loss_fn, Fit(steps=300, batch_fn=batch_fn, loggers=[tb], eval_fn=evaluate,
                                            eval_every=50, capture=capture(ctx, model, opt, every=100)))
    tb.close()
    s = tb.logged["Loss/train"]
    # frozen_parameters means "some parameters never change although the run trains"; here nothing trains,
    # so the finding is flat_loss (whose first check is exactly this), with the identical checkpoints as evidence
    assert is_flat(s)
    ctx.kind("flat_loss", step=min(s), step_end=max(s), series="Loss/train", primary=True,
             note=f"relative change {rel_change(s):+.3f}; all tensors identical in checkpoints/step_{{0,100,200,300}}.pt")


def plateau_double_softmax(ctx: Ctx):
    ctx.meta(healthy=False, bug="softmax applied before CrossEntropyLoss (double softmax)", logger="console",
             model="mlp", description=(
                 "The model ends in nn.Softmax and the loss is nn.CrossEntropyLoss, which applies log_softmax "
                 "again. Probabilities in [0, 1] as logits cap how low the loss can go (log(1 + (C-1)/e) = 0.90 "
                 "for C = 5), and gradients are small: the loss falls a little, then stalls far above the floor a "
                 "correct model reaches. A user sees the loss in train.log stuck near 1.0."))
    entry, model, opt, batch_fn, evaluate, spe, _ = cls_setup(ctx, 103, steps=1500, lr=3e-3, probe=True, loss=(
        '    probs = torch.softmax(model(batch["x"]), dim=-1)  # BUG: CrossEntropyLoss applies log_softmax itself\n'
        '    return torch.nn.functional.cross_entropy(probs, batch["y"])'))
    con = loggers.Console(ctx.root, every=25, total=1500)
    fit(ctx, model, opt, entry.loss_fn, Fit(steps=1500, batch_fn=batch_fn, loggers=[con],
                                            capture=capture(ctx, model, opt, every=1500)))
    con.close()
    s = con.logged["loss"]
    v = np.array([s[k] for k in sorted(s)])
    steps = sorted(s)
    start = next(st for st, val in zip(steps, v) if val < v[-20:].mean() + 0.02)
    ctx.kind("plateau", step=start, step_end=steps[-1], series="loss", primary=True,
             note=f"stalls at {v[-20:].mean():.3f} (initial {v[0]:.3f}; a correct model reaches < 0.3)")
    ctx.truth["console_format"] = "[YYYY-mm-dd HH:MM:SS] step N/TOTAL | loss L | lr LR"


def oscillation_sgd_high_lr(ctx: Ctx):
    ctx.meta(healthy=False, bug="SGD+momentum at lr=2.5 (tuned for a different loss scale): unstable but bounded",
             logger="tensorboard", model="mlp", description=(
                 "SGD with momentum 0.9 at lr=2.5 on a tanh MLP (a stable rate is ~0.1): tanh keeps the weights from "
                 "blowing up, so instead of diverging the loss swings between ~0.3 and ~2.4 for the whole run "
                 "without settling. A user sees a thick, saw-toothed train/loss band that never trends down."))
    entry, model, opt, batch_fn, evaluate, spe, _ = cls_setup(ctx, 104, steps=1000, lr=2.5, act="tanh", n=1024,
                                                              bs=256, noise=0.2, opt=(
        '    return torch.optim.SGD(model.parameters(), lr=o["lr"], momentum=0.9)'))
    tb = loggers.TensorBoard(ctx.root, {"loss": "train/loss", "grad_norm": "train/grad_norm", "lr": "train/lr"}, every=1)
    fit(ctx, model, opt, entry.loss_fn, Fit(steps=1000, batch_fn=batch_fn, loggers=[tb]))
    tb.close()
    s = tb.logged["train/loss"]
    v = np.array([s[k] for k in sorted(s)][200:])
    d = np.diff(v)
    lo, hi = np.percentile(v, [5, 95])
    assert hi > 2 * lo, (lo, hi)
    ctx.kind("oscillation", step=200, step_end=1000, series="train/loss", primary=True,
             note=f"5-95% range {lo:.2f}-{hi:.2f} around median {np.median(v):.2f}; std of successive differences "
                  f"{d.std():.2f}; sign-change rate {np.mean(np.sign(d[1:]) != np.sign(d[:-1])):.2f}")


def overfit_tiny_train(ctx: Ctx):
    ctx.meta(healthy=False, bug="128 training samples (10% noisy labels) for a 256-wide MLP, no regularisation",
             logger="lightning_csv", model="mlp", description=(
                 "A wide MLP trained on 128 samples memorises them: train loss falls toward 0 while val_loss "
                 "reaches its minimum early and then climbs. A user sees the classic widening gap in metrics.csv."))
    entry, model, opt, batch_fn, evaluate, spe, _ = cls_setup(ctx, 105, n=128, n_val=1024, bs=16, hidden=256,
                                                              noise=0.1, lr=2e-3, steps=1000)
    pl = loggers.LightningCSV(ctx.root, ctx.config, {"loss": "train_loss", "val_loss": "val_loss", "val_acc": "val_acc"},
                              every=8, steps_per_epoch=spe)
    fit(ctx, model, opt, entry.loss_fn, Fit(steps=1000, batch_fn=batch_fn, loggers=[pl], eval_fn=evaluate,
                                            eval_every=spe))
    pl.close()
    v = pl.logged["val_loss"]
    cross = min(v, key=v.get)
    last = max(v)
    assert v[last] > 1.3 * v[cross], (v[cross], v[last])
    ctx.kind("overfitting", step=cross, step_end=last, series="val_loss", primary=True,
             note=f"val_loss minimum {v[cross]:.3f} at step {cross} (the crossover), {v[last]:.3f} at the end")
    ctx.truth["crossover"] = cross


def dist_mismatch_val_norm(ctx: Ctx):
    ctx.meta(healthy=False, bug="validation preprocessed differently (feature columns not mapped, filled with the train mean)", logger="tensorboard",
             model="mlp", description=(
                 "The validation file names its feature columns differently, so the validation preprocessing "
                 "maps none of them and fills every feature with the training mean: the model sees the same "
                 "input for every validation sample. Train loss falls normally; val loss stays near log(5) and "
                 "flat from the first evaluation. A user sees train/ and val/ loss curves that never meet."))
    entry, model, opt, batch_fn, evaluate, spe, (xt, yt, xv, yv) = cls_setup(ctx, 106, steps=800, lr=2e-3,
                                                                             extra_cfg={"val_transform": None})
    # the validation CSV names its columns differently; the loader's column mapping finds none of them and
    # fills every feature with its training mean (0 after standardisation): predictions ignore the input
    xv_raw = torch.zeros_like(xv)
    tb = loggers.TensorBoard(ctx.root, {"loss": "loss", "lr": "lr"}, every=10, subfolders=True,
                             val_tags={"val_loss": "loss", "val_acc": "accuracy"})
    fit(ctx, model, opt, entry.loss_fn, Fit(steps=800, batch_fn=batch_fn, loggers=[tb], eval_every=40,
                                            eval_fn=lambda m: evaluate(m, xv_raw, yv)))
    tb.close()
    tr, va = tb.logged["train/loss"], tb.logged["val/loss"]
    ctx.kind("distribution_mismatch", step=min(va), step_end=max(va), series="val/loss", primary=True,
             note=f"train relative change {rel_change(tr):+.2f}, val {rel_change(va):+.2f}")


def initial_loss_bad_init(ctx: Ctx):
    ctx.meta(healthy=False, bug="final layer initialised with std 8 (custom init)", logger="wandb", model="mlp",
             description=(
                 "A custom init draws the classifier head's weights from N(0, 8^2): the first logits are huge and "
                 "confidently wrong, so the first loss is ~16 instead of log(10) = 2.30. Training recovers slowly. "
                 "A user sees train/loss start an order of magnitude above log(C)."))
    entry, model, opt, batch_fn, evaluate, spe, _ = cls_setup(ctx, 107, classes=10, steps=600, lr=1e-3, probe=True, init=(
        "    torch.nn.init.normal_(model.head.weight, std=8.0)  # BUG: meant 'std=1/sqrt(fan_in)'"))
    wb = loggers.Wandb(ctx.root, "badinit", ctx.config, {"loss": "train/loss", "lr": "train/lr",
                                                        "val_loss": "val/loss", "val_acc": "val/acc"}, every=1)
    fit(ctx, model, opt, entry.loss_fn, Fit(steps=600, batch_fn=batch_fn, loggers=[wb], eval_fn=evaluate,
                                            eval_every=50, capture=capture(ctx, model, opt, every=600)))
    wb.close()
    s = wb.logged["train/loss"]
    first = s[min(s)]
    assert first > 3 * math.log(10), first
    ctx.kind("initial_loss_mismatch", step=min(s), series="train/loss", primary=True,
             note=f"first logged loss {first:.2f} vs log(10) = {math.log(10):.2f}; num_classes in config.yaml")


def underfit_linear(ctx: Ctx):
    ctx.meta(healthy=False, bug="model too small: a linear classifier for a nonlinear task (depth 0)",
             logger="hf_trainer", model="mlp", description=(
                 "The config sets depth: 0, so the 'MLP' is a single linear layer on data labelled by a nonlinear "
                 "teacher. Train and eval loss fall a little, then both stall high and close together. A user sees "
                 "loss and eval_loss flat near 0.8, about half the initial loss, in trainer_state.json."))
    entry, model, opt, batch_fn, evaluate, spe, _ = cls_setup(ctx, 108, depth=0, steps=1500, lr=1e-2, noise=0.05,
                                                              fmt="json", d=8, sharp=4.0, probe=True,
                                                              extra_cfg={"logging_steps": 20})
    hf = loggers.HFTrainer(ctx.root, logging_steps=20, max_steps=1500, steps_per_epoch=spe, batch_size=32,
                           eval_steps=100, save_steps=500)
    fit(ctx, model, opt, entry.loss_fn, Fit(steps=1500, batch_fn=batch_fn, loggers=[hf], eval_fn=evaluate,
                                            eval_every=100, capture=capture(ctx, model, opt, every=1500)))
    hf.close()
    tr, va = hf.logged["loss"], hf.logged["eval_loss"]
    ctx.kind("underfitting", step=min(va), step_end=max(va), series="eval_loss", primary=True,
             note=f"final train {tr[max(tr)]:.3f} / eval {va[max(va)]:.3f} of initial {tr[min(tr)]:.3f}")
    v = np.array([tr[k] for k in sorted(tr)])
    start = next(st for st, val in zip(sorted(tr), v) if val < v[-10:].mean() + 0.03)
    del start  # the train-loss stall is part of underfitting (train and val together), not a separate plateau


def val_noise_tiny_val(ctx: Ctx):
    ctx.meta(healthy=False, bug="validation set of 12 samples", logger="wandb", model="mlp", description=(
        "The validation split is 12 samples (a slicing bug: val = data[-12:]). Training is healthy, but every "
        "evaluation's loss jumps by a large fraction of its level. A user sees a jagged val/loss next to a smooth "
        "train/loss and cannot pick a checkpoint."))
    entry, model, opt, batch_fn, evaluate, spe, (xt, yt, xv, yv) = cls_setup(ctx, 109, steps=1000, lr=2e-3,
                                                                             noise=0.1, n_val=12, bs=64)
    wb = loggers.Wandb(ctx.root, "tinyval", ctx.config, {"loss": "loss", "val_loss": "val_loss",
                                                        "val_acc": "val_accuracy"}, every=10)
    g = torch.Generator().manual_seed(9)

    def noisy_eval(m):  # random augmentation left on at eval time, on 12 samples
        return evaluate(m, xv + 0.5 * torch.randn(xv.shape, generator=g), yv)

    fit(ctx, model, opt, entry.loss_fn, Fit(steps=1000, batch_fn=batch_fn, loggers=[wb], eval_fn=noisy_eval,
                                            eval_every=20))
    wb.close()
    tr, va = wb.logged["loss"], wb.logged["val_loss"]
    dt = np.abs(np.diff([tr[k] for k in sorted(tr)])).mean()
    dv = np.abs(np.diff([va[k] for k in sorted(va)])).mean()
    ctx.kind("val_noise", step=min(va), step_end=max(va), series="val_loss", primary=True,
             note=f"mean |diff| val {dv:.3f} vs train {dt:.3f}")


def update_ratio_lr_too_small(ctx: Ctx):
    ctx.meta(healthy=False, bug="learning rate 1e-6 (a typo for 1e-3)", logger="tensorboard", model="mlp",
             description=(
                 "Adam at lr=1e-6: every update is about a millionth of the weights (update_ratio/<layer> ~5e-6, "
                 "far below the healthy ~1e-3), and the loss barely moves over 800 steps. A user sees a flat "
                 "loss and tiny logged update ratios."))
    entry, model, opt, batch_fn, evaluate, spe, _ = cls_setup(ctx, 110, steps=800, lr=1e-6, probe=True)
    layers = ["body.fc1", "body.fc2", "head"]
    tb = loggers.TensorBoard(ctx.root, {"loss": "train/loss", "lr": "train/lr", "grad_norm": "train/grad_norm",
                                        **{f"update_ratio/{n}": f"update_ratio/{n}" for n in layers}}, every=10)
    # step 0 only: a second checkpoint would let the checkpoint detectors measure the (tiny) update ratio again
    fit(ctx, model, opt, entry.loss_fn, Fit(steps=800, batch_fn=batch_fn, loggers=[tb],
                                            extra_fn=layer_stats(model, layers=layers, what=("update",)),
                                            capture=capture(ctx, model, opt)))
    tb.close()
    r = tb.logged["update_ratio/body.fc1"]
    med = float(np.median(list(r.values())))
    assert med < 1e-4, med
    ctx.kind("update_ratio_anomaly", step=min(r), step_end=max(r), series="update_ratio/body.fc1", primary=True,
             note=f"median update ratio {med:.1e} (healthy ~1e-3)")
    s = tb.logged["train/loss"]
    assert is_flat(s)
    ctx.kind("flat_loss", step=min(s), step_end=max(s), series="train/loss", note=f"relative change {rel_change(s):+.3f}")
