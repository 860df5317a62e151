"""Runs whose bug shows in per-layer statistics, clipping, schedules, checkpoints or the loss scale."""

from __future__ import annotations

import numpy as np

from . import data, loggers
from .common import Checkpoints, Ctx, Fit, capture, fit, seed_all
from .runs_curves import cls_setup, is_flat, rel_change
from .stats import layer_stats


def maybe_flat(ctx: Ctx, series: dict, tag: str):
    """Label flat_loss as a consequence when the loss really did not move (`is_flat`)."""
    r = rel_change(series)
    if is_flat(series):
        ctx.kind("flat_loss", step=min(series), step_end=max(series), series=tag, note=f"relative change {r:+.3f}")


def _median(series: dict) -> float:
    return float(np.median(list(series.values())))


# vanishing_deep_sigmoid and dead_relu_bias_init capture the step-0 checkpoint only: a second one would let the
# checkpoint detectors compare the two (the stalled early layers read as frozen_parameters), so the run's
# analysis would change; the probe's checks from "the last checkpoint" then start from step 0 too.
def vanishing_deep_sigmoid(ctx: Ctx):
    ctx.meta(healthy=False, bug="10-layer sigmoid MLP without normalisation or residuals", logger="tensorboard",
             model="mlp", description=(
                 "A 10-layer MLP with sigmoid activations: each layer multiplies the backward signal by at most "
                 "0.25, so the first layer's gradient norm is orders of magnitude below the last's and the early "
                 "layers barely train. A user sees grad_norm/body.fc1 ~1e-9 against ~1e-1 for the head, and a loss "
                 "that barely moves."))
    entry, model, opt, batch_fn, evaluate, spe, _ = cls_setup(ctx, 201, depth=10, act="sigmoid", hidden=32,
                                                              steps=600, lr=1e-3, probe=True, opt=(
        '    return torch.optim.SGD(model.parameters(), lr=o["lr"] * 100, momentum=0.9)'))
    layers = [f"body.fc{i}" for i in range(1, 11)] + ["head"]
    tags = {"loss": "train/loss", "grad_norm": "train/grad_norm", **{f"grad_norm/{n}": f"grad_norm/{n}" for n in layers}}
    tb = loggers.TensorBoard(ctx.root, tags, every=10)
    fit(ctx, model, opt, entry.loss_fn, Fit(steps=600, batch_fn=batch_fn, loggers=[tb],
                                            extra_fn=layer_stats(model, layers=layers, what=("grad",)),
                                            capture=capture(ctx, model, opt)))  # step 0 only (see below)
    tb.close()
    first, last = _median(tb.logged["grad_norm/body.fc1"]), _median(tb.logged["grad_norm/body.fc10"])
    assert first < 1e-3 * last, (first, last)
    ctx.kind("vanishing_gradients", step=10, step_end=600, series="grad_norm/body.fc1", primary=True,
             note=f"median grad norm fc1 {first:.1e} vs fc10 {last:.1e}")
    maybe_flat(ctx, tb.logged["train/loss"], "train/loss")
    return tb


def saturated_tanh_unscaled(ctx: Ctx):
    ctx.meta(healthy=False, bug="raw inputs (scale ~40) into a tanh MLP: activations pinned at +-1", logger="tensorboard",
             model="mlp", description=(
                 "Features are fed unnormalised (scale ~40) into a tanh MLP: almost every first-layer unit sits at "
                 "+1 or -1, its gradient is ~0, and learning crawls. A user sees "
                 "activations/body.act1/saturated_fraction near 0.9 and a loss that improves slowly."))
    entry, model, opt, batch_fn, evaluate, spe, _ = cls_setup(ctx, 202, act="tanh", steps=500, lr=1e-3, x_scale=40.0,
                                                              extra_cfg={"standardise_inputs": False}, probe=True)
    acts = {"body.act1": "tanh", "body.act2": "tanh"}
    tags = {"loss": "loss", "lr": "lr", **{f"activations/{n}/saturated_fraction": f"activations/{n}/saturated_fraction"
                                             for n in acts}}
    tb = loggers.TensorBoard(ctx.root, tags, every=10)
    fit(ctx, model, opt, entry.loss_fn, Fit(steps=500, batch_fn=batch_fn, loggers=[tb],
                                            extra_fn=layer_stats(model, acts=acts, every=10),
                                            capture=capture(ctx, model, opt, every=500)))
    tb.close()
    sat = _median(tb.logged["activations/body.act1/saturated_fraction"])
    assert sat > 0.5, sat
    ctx.kind("saturated_activation", step=10, step_end=500, series="activations/body.act1/saturated_fraction",
             primary=True, note=f"median saturated fraction {sat:.2f}")
    maybe_flat(ctx, tb.logged["loss"], "loss")


def dead_relu_bias_init(ctx: Ctx):
    ctx.meta(healthy=False, bug="ReLU layers initialised with bias -2 ('sparse' init copied from a paper)",
             logger="tensorboard", model="mlp", description=(
                 "The hidden layers' biases start at -2: most ReLU units output 0 for every input and, with no "
                 "gradient, never recover. A user sees activations/body.act2/dead_fraction near 1.0 and a loss "
                 "that never moves from log(5)."))
    entry, model, opt, batch_fn, evaluate, spe, _ = cls_setup(ctx, 203, steps=600, lr=1e-3, hidden=64, probe=True, init=(
        "    for layer in (model.body.fc1, model.body.fc2):\n        torch.nn.init.constant_(layer.bias, -2.0)"))
    acts = {"body.act1": "relu", "body.act2": "relu"}
    tags = {"loss": "train/loss", **{f"activations/{n}/dead_fraction": f"activations/{n}/dead_fraction" for n in acts}}
    tb = loggers.TensorBoard(ctx.root, tags, every=20)
    fit(ctx, model, opt, entry.loss_fn, Fit(steps=600, batch_fn=batch_fn, loggers=[tb],
                                            extra_fn=layer_stats(model, acts=acts, every=20),
                                            capture=capture(ctx, model, opt)))  # step 0 only (see below)
    tb.close()
    dead = _median(tb.logged["activations/body.act2/dead_fraction"])
    assert dead > 0.5, dead
    ctx.kind("dead_relu", step=20, step_end=600, series="activations/body.act2/dead_fraction", primary=True,
             note=f"median dead fraction body.act2 {dead:.2f}, body.act1 {_median(tb.logged['activations/body.act1/dead_fraction']):.2f}")
    maybe_flat(ctx, tb.logged["train/loss"], "train/loss")
    return tb


LSTM = '''
def build_model(config):
    torch.manual_seed(config["seed"])
    return LSTMClassifier(vocab=6, d=16, hidden=config["model"]["hidden"], n_classes=2)


def loss_fn(model, batch):
    return torch.nn.functional.cross_entropy(model(batch["tokens"]), batch["label"])


def build_optimizer(model, config):
    return torch.optim.Adam(model.parameters(), lr=config["optim"]["lr"])


def step_options(config):
    return {"max_grad_norm": config["max_grad_norm"], "grad_accumulation_steps": 1}
'''


def clip_too_small(ctx: Ctx):
    ctx.meta(healthy=False, bug="max_grad_norm = 0.002 (meant 2.0): every step is clipped", logger="tensorboard",
             model="lstm", description=(
                 "An LSTM classifier clips gradients to norm 0.002: the pre-clip norm (logged as train/grad_norm) "
                 "is above the threshold on every step, so every SGD update is at most lr x 0.002 long and the loss "
                 "barely moves from log(2). A user sees train/grad_norm always far above max_grad_norm in config.yaml."))
    seed_all(204)
    ctx.config = {"seed": 204, "model": {"hidden": 32}, "optim": {"lr": 1e-3, "name": "sgd"}, "max_grad_norm": 0.002,
                  "max_steps": 500, "batch_size": 32}
    ctx.write_config("yaml")
    entry = ctx.write_entry(LSTM.replace("torch.optim.Adam(model.parameters(), lr=config[\"optim\"][\"lr\"])",
                                         "torch.optim.SGD(model.parameters(), lr=0.5)"), replay=False)
    x, y = data.count_sequences(4096, seed=204)
    sampler = data.Sampler(4096, 32, seed=204)
    model = entry.build_model(ctx.config)
    opt = entry.build_optimizer(model, ctx.config)
    tb = loggers.TensorBoard(ctx.root, {"loss": "train/loss", "grad_norm": "train/grad_norm", "lr": "train/lr"}, every=5)
    fit(ctx, model, opt, entry.loss_fn, Fit(steps=500, batch_fn=lambda s: (lambda i: {"tokens": x[i], "label": y[i]})(sampler.next()),
                                            loggers=[tb], max_grad_norm=0.002))
    tb.close()
    g = tb.logged["train/grad_norm"]
    rate = np.mean([v > 0.002 for v in g.values()])
    assert rate > 0.9, rate
    ctx.kind("frequent_clipping", step=min(g), step_end=max(g), series="train/grad_norm", primary=True,
             note=f"{rate:.0%} of logged steps have pre-clip norm > max_grad_norm 0.002 (median {_median(g):.3f})")
    maybe_flat(ctx, tb.logged["train/loss"], "train/loss")


def frozen_layer(ctx: Ctx):
    ctx.meta(healthy=False, bug="conv1 left frozen after a warm-up phase (requires_grad never restored)",
             logger="console", model="cnn", description=(
                 "A CNN's first conv layer was frozen for a 'linear probe' phase and never unfrozen. The rest "
                 "trains and the loss falls, but features.conv1.weight/bias are bit-identical in every saved "
                 "weights/step_N.safetensors. A user sees nothing wrong in train.log."))
    seed_all(205)
    ctx.config = {"seed": 205, "model": {"classes": 4, "width": 8}, "optim": {"lr": 0.003}, "max_steps": 400,
                  "batch_size": 32, "freeze_conv1_steps": 0}
    ctx.write_config("yaml")
    entry = ctx.write_entry('''
def build_model(config):
    torch.manual_seed(config["seed"])
    model = SmallCNN(n_classes=config["model"]["classes"], width=config["model"]["width"])
    model.features.conv1.requires_grad_(False)  # linear-probe phase; the unfreeze callback never ran
    return model


def loss_fn(model, batch):
    return torch.nn.functional.cross_entropy(model(batch["image"]), batch["label"])


def build_optimizer(model, config):
    return torch.optim.Adam(model.parameters(), lr=config["optim"]["lr"])
''', replay=False)
    x, y = data.bar_images(2048, seed=205)
    sampler = data.Sampler(2048, 32, seed=205)
    model = entry.build_model(ctx.config)
    opt = entry.build_optimizer(model, ctx.config)
    con = loggers.Console(ctx.root, every=10, total=400)
    ckpt = Checkpoints(ctx, "safetensors", every=100, keep=4)
    fit(ctx, model, opt, entry.loss_fn, Fit(steps=400, batch_fn=lambda s: (lambda i: {"image": x[i], "label": y[i]})(sampler.next()),
                                            loggers=[con], ckpt=ckpt))
    con.close()
    s = con.logged["loss"]
    assert rel_change(s) > 0.3, rel_change(s)
    ctx.kind("frozen_parameters", step=100, step_end=400, primary=True,
             note="features.conv1.weight and .bias identical in weights/step_{100,200,300,400}.safetensors; the rest changes")


def weight_growth_no_wd(ctx: Ctx):
    ctx.meta(healthy=False, bug="no weight decay on separable data with a large Adam LR", logger="tensorboard",
             model="mlp", description=(
                 "Adam at lr=0.01 without weight decay on nearly separable data: cross-entropy keeps rewarding "
                 "larger logits, and Adam's steps have constant size, so every layer's weight norm grows "
                 "steadily for the whole run. A user sees weight_norm/<layer> rising without bound."))
    entry, model, opt, batch_fn, evaluate, spe, _ = cls_setup(ctx, 206, steps=1500, lr=0.01, classes=3,
                                                              extra_cfg={"weight_decay": 0.0})
    layers = ["body.fc1", "body.fc2", "head"]
    tb = loggers.TensorBoard(ctx.root, {"loss": "train/loss", **{f"weight_norm/{n}": f"weight_norm/{n}" for n in layers}},
                             every=25)
    fit(ctx, model, opt, entry.loss_fn, Fit(steps=1500, batch_fn=batch_fn, loggers=[tb],
                                            extra_fn=layer_stats(model, layers=layers, what=("weight",), every=25)))
    tb.close()
    w = tb.logged["weight_norm/body.fc1"]
    f = w[max(w)] / w[min(w)]
    vals = [w[k] for k in sorted(w)]
    assert f > 1.5 and np.corrcoef(np.arange(len(vals)), vals)[0, 1] > 0.9, (f, vals)
    ctx.kind("weight_norm_growth", step=min(w), step_end=max(w), series="weight_norm/body.fc1", primary=True,
             note=f"fc1 weight norm x{f:.1f} ({w[min(w)]:.1f} -> {w[max(w)]:.1f}), still rising")


def weight_collapse_wd(ctx: Ctx):
    ctx.meta(healthy=False, bug="weight_decay=0.1 with SGD (meant 1e-4)", logger="tensorboard", model="mlp",
             description=(
                 "SGD with weight_decay=0.1 pulls every weight toward 0 faster than the gradient can push: "
                 "weight norms collapse toward 0 and the loss stays near log(C). A user "
                 "sees weight_norm/<layer> shrinking to ~0 and a loss that never improves."))
    entry, model, opt, batch_fn, evaluate, spe, _ = cls_setup(ctx, 207, steps=800, lr=0.05, extra_cfg={"weight_decay": 0.1},
        opt='    return torch.optim.SGD(model.parameters(), lr=o["lr"], momentum=0.9, weight_decay=0.1)')
    layers = ["body.fc1", "body.fc2", "head"]
    tb = loggers.TensorBoard(ctx.root, {"loss": "train/loss", **{f"weight_norm/{n}": f"weight_norm/{n}" for n in layers}},
                             every=20)
    fit(ctx, model, opt, entry.loss_fn, Fit(steps=800, batch_fn=batch_fn, loggers=[tb],
                                            extra_fn=layer_stats(model, layers=layers, what=("weight",), every=20)))
    tb.close()
    w = tb.logged["weight_norm/body.fc1"]
    f = w[min(w)] / w[max(w)]
    assert f > 5, f

    ctx.kind("weight_collapse", step=min(w), step_end=max(w), series="weight_norm/body.fc1", primary=True,
             note=f"fc1 weight norm / {f:.3g} ({w[min(w)]:.2f} -> {w[max(w)]:.3g})")
    maybe_flat(ctx, tb.logged["train/loss"], "train/loss")
    return tb
