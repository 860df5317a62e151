"""Runs that end in NaN, spikes or divergence: the replayable ones (checkpoints, saved batches, entry point)."""

from __future__ import annotations

import torch

from . import data, loggers
from .common import Checkpoints, Ctx, Fit, fit, replay_truth, seed_all

MLP_REGRESSION = '''
def build_model(config):
    torch.manual_seed(config["seed"])
    m = config["model"]
    return MLP(m["d_in"], m["hidden"], 1, depth=m["depth"], act=m["act"])


def loss_fn(model, batch):
    return torch.nn.functional.mse_loss(model(batch["x"]), batch["y"])


def build_optimizer(model, config):
    return torch.optim.SGD(model.parameters(), lr=config["optim"]["lr"], momentum=config["optim"]["momentum"])


def build_scheduler(optimizer, config):
    warm = config["optim"]["warmup_steps"]
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warm))


def step_options(config):
    return {"max_grad_norm": None, "grad_accumulation_steps": 1}
'''


def nan_lr_too_high(ctx: Ctx):
    """SGD+momentum whose warmup ramps to a learning rate ~10x too high: the loss improves during the first
    steps of warmup, then the gradient norm grows exponentially, the loss diverges, overflows and turns NaN."""
    seed_all(11)
    ctx.meta(healthy=False, bug="learning rate ~10x too high (SGD+momentum, linear warmup to 0.15)", logger="tensorboard",
             model="mlp", description=(
                 "SGD with momentum warms up linearly to lr=0.15, far above the stable rate for this MLP. The loss "
                 "falls for ~30 steps, spikes twice (steps 47 and 63) and recovers, then from step ~70 the gradient norm "
                 "explodes, the loss diverges within a few steps, the "
                 "grad norm overflows to inf and the loss turns NaN. A user sees train/loss shoot up then NaN in "
                 "TensorBoard; checkpoints after the NaN hold non-finite weights."))
    ctx.config = {"seed": 11, "model": {"d_in": 16, "hidden": 64, "depth": 2, "act": "gelu"},
                  "optim": {"lr": 0.15, "momentum": 0.9, "warmup_steps": 200},
                  "data": {"n": 4096, "batch_size": 64}, "max_steps": 600, "save_every": 20}
    ctx.write_config("yaml")
    entry = ctx.write_entry(MLP_REGRESSION, replay=True)
    x, y = data.regression(4096 + 512, 16, seed=11, cond=4.0)
    x, y, xv, yv = x[:4096], y[:4096], x[4096:], y[4096:]
    sampler = data.Sampler(4096, 64, seed=11)

    def batch_fn(step):
        idx = sampler.next()
        return {"x": x[idx], "y": y[idx]}

    model = entry.build_model(ctx.config)
    opt = entry.build_optimizer(model, ctx.config)
    sched = entry.build_scheduler(opt, ctx.config)
    tb = loggers.TensorBoard(ctx.root, {"loss": "loss", "grad_norm": "grad_norm", "lr": "lr"}, subfolders=True,
                             val_tags={"val_loss": "loss"})
    ckpt = Checkpoints(ctx, "torch", every=20, keep=5)
    res = fit(ctx, model, opt, entry.loss_fn, Fit(
        steps=600, batch_fn=batch_fn, loggers=[tb], sched=sched, ckpt=ckpt, window=20, stop_after_nan=15,
        eval_fn=lambda m: {"val_loss": float(torch.nn.functional.mse_loss(m(xv), yv))}, eval_every=25))
    tb.close()
    _truth_nan_lr_too_high(ctx, res, ckpt)
    return res, ckpt


def _truth_nan_lr_too_high(ctx, res, ckpt):
    from .common import (checkpoint_update_ratios, divergence_onset, find_spikes, first_nonfinite_ckpt,
                         gradient_jump, train_series)
    losses, gn = train_series(res), train_series(res, "gnorms")
    nan = res["nan_step"]
    ctx.truth["nan_onset"] = nan
    div = divergence_onset(losses, nan)
    spikes = find_spikes(losses, div)
    for st in spikes:
        ctx.truth["spikes"].append({"series": "train/loss", "step": st})
    for st in find_spikes(gn, div):
        ctx.truth["spikes"].append({"series": "train/grad_norm", "step": st})
    if spikes:
        ctx.kind("loss_spike", step=spikes[0], step_end=spikes[-1], series="train/loss",
                 note=f"a warning spike at {spikes} (recovers) before the divergence")
    ctx.kind("exploding_gradients", step=gradient_jump(gn, nan), step_end=nan, series="train/grad_norm",
             note="grad norm grows by orders of magnitude over a few steps; its norm overflows to inf one step before NaN")
    ctx.kind("divergence", step=div, step_end=nan - 1, series="train/loss",
             note="loss rises geometrically once the warmup LR passes the stability limit", primary=True)
    ctx.kind("nan_loss", step=nan, series="train/loss", note="weights overflow; forward yields inf - inf = NaN")
    ratios = checkpoint_update_ratios(ckpt)
    big = {k: v for k, v in ratios.items() if v > 0.1}
    if big:
        (a, b), r = min(big.items())
        ctx.kind("update_ratio_anomaly", step=a, step_end=b,
                 note=f"max over tensors of ||w_{b} - w_{a}|| / ||w_{a}|| / {b - a} steps = {r:.2f} > 0.1 "
                      f"(consecutive finite checkpoints)")
    assert first_nonfinite_ckpt(ckpt) is not None
    ctx.kind("nonfinite_weights", step=first_nonfinite_ckpt(ckpt), note="checkpoints after the NaN hold NaN/inf")
    ctx.truth["replay"] = replay_truth(ctx, res, ckpt)


LOG_ZERO = '''
def build_model(config):
    torch.manual_seed(config["seed"])
    m = config["model"]
    return MLP(m["d_in"], m["hidden"], m["classes"], depth=m["depth"],
               head=LogSoftmaxByHand(m["hidden"], m["classes"]))


def loss_fn(model, batch):
    # the head returns log(softmax(z)) computed by hand; nll_loss expects log-probabilities
    return torch.nn.functional.nll_loss(model(batch["x"]), batch["y"])


def build_optimizer(model, config):
    return torch.optim.Adam(model.parameters(), lr=config["optim"]["lr"])


def step_options(config):
    return {"max_grad_norm": None, "grad_accumulation_steps": 1}
'''


def nan_log_zero(ctx: Ctx):
    """log(softmax(z)) by hand: with a few mislabelled samples the net grows confident enough that a true
    class's probability underflows to 0, log(0) = -inf, and the loss is inf, then NaN."""
    from .common import first_nonfinite, first_nonfinite_ckpt
    seed_all(21)
    ctx.meta(healthy=False, bug="log(softmax(z)) computed by hand instead of log_softmax: log(0) = -inf",
             logger="wandb", model="mlp", description=(
                 "The classifier's head returns torch.log(torch.softmax(z)). Training with Adam goes well, but the "
                 "data holds a few mislabelled samples; the net grows so confident that their true-class "
                 "probability underflows to exactly 0 in float32, log(0) = -inf, and the loss becomes inf and then "
                 "NaN. A user sees a healthy-looking W&B loss curve that suddenly turns NaN with no warning in the "
                 "gradient norm."))
    n, d, c = 2048, 20, 6
    ctx.config = {"seed": 21, "model": {"d_in": d, "hidden": 128, "depth": 2, "classes": c},
                  "optim": {"lr": 0.004}, "data": {"n": n, "batch_size": 32, "label_noise": 0.03, "standardise": False},
                  "max_steps": 3000, "save_every": 100, "num_classes": c}
    ctx.write_config("yaml")
    entry = ctx.write_entry(LOG_ZERO, replay=True)
    x, y = data.teacher_classification(n, d, c, seed=21, noise=0.03)
    x = x * 10.0  # raw features, never standardised
    sampler = data.Sampler(n, 32, seed=21)

    def batch_fn(step):
        idx = sampler.next()
        return {"x": x[idx], "y": y[idx], "index": idx}

    model = entry.build_model(ctx.config)
    opt = entry.build_optimizer(model, ctx.config)
    wb = loggers.Wandb(ctx.root, "nanlogzero", ctx.config,
                       {"loss": "train/loss", "grad_norm": "train/grad_norm", "lr": "train/lr"}, every=5)
    # Model and Adam state together (checkpoints/step_N.pt): a replay restores the optimizer's moments.
    ckpt = Checkpoints(ctx, "torch", every=100, keep=5)
    res = fit(ctx, model, opt, entry.loss_fn, Fit(steps=3000, batch_fn=batch_fn, loggers=[wb], ckpt=ckpt,
                                                  window=100, stop_after_nan=60, batch_fmt="safetensors"))
    wb.close()
    nan = first_nonfinite(wb.logged["train/loss"])
    ctx.truth["nan_onset"] = nan
    ctx.kind("nan_loss", step=nan, series="train/loss", primary=True,
             note=f"raw first non-finite step {res['first_bad']['step']}; logged every 5 steps")
    ctx.kind("nonfinite_weights", step=first_nonfinite_ckpt(ckpt), note="checkpoints/step_N.pt after the NaN")
    ctx.truth["replay"] = replay_truth(ctx, res, ckpt, fmt="safetensors")
    return res, ckpt


SQRT_NORM = '''
PAD = 15


def build_model(config):
    torch.manual_seed(config["seed"])
    m = config["model"]
    return TinyTransformer(vocab=m["vocab"], d=m["d"], heads=m["heads"], layers=m["layers"], seq=m["seq"],
                           norm="custom", pad_idx=PAD)


def loss_fn(model, batch):
    logits = model(batch["input_ids"])
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=PAD)


def build_optimizer(model, config):
    return torch.optim.AdamW(model.parameters(), lr=config["optim"]["lr"], weight_decay=0.0)


def build_scheduler(optimizer, config):
    o = config["optim"]
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / o["warmup_steps"]) * max(0.0, 1 - s / config["max_steps"]))


def step_options(config):
    return {"max_grad_norm": 1.0, "grad_accumulation_steps": 1}
'''


def nan_sqrt_norm(ctx: Ctx):
    """A hand-written norm with eps outside the sqrt meets an all-padding position: the forward is finite,
    d sqrt/du at 0 is inf and the backward yields NaN; HF's logging_nan_inf_filter hides it in `loss`."""
    from .common import first_nonfinite_ckpt
    seed_all(31)
    ctx.meta(healthy=False, bug="custom RMS norm with eps outside the sqrt; zero rows at padded positions",
             logger="hf_trainer", model="transformer", description=(
                 "A tiny causal transformer uses a hand-written norm x / (sqrt(mean x^2) + eps). Padded positions "
                 "embed to all-zero rows (padding_idx, no position); the forward stays finite but sqrt's gradient "
                 "at 0 is infinite, so the first batch with padding (step 141) yields NaN gradients; clipping "
                 "spreads the NaN to every weight. HF's logging_nan_inf_filter (on by default) replaces the NaN "
                 "step losses, so trainer_state.json shows a finite loss, then loss 0.0, next to grad_norm NaN; "
                 "eval_loss turns NaN. A user sees a loss that 'converged to 0'."))
    n, seq, vocab, pad = 4096, 16, 16, 15
    ctx.config = {"seed": 31, "model": {"vocab": vocab, "d": 32, "heads": 2, "layers": 2, "seq": seq},
                  "optim": {"lr": 0.002, "warmup_steps": 30}, "max_steps": 300, "per_device_train_batch_size": 16,
                  "logging_steps": 10, "eval_steps": 50, "save_steps": 40, "max_grad_norm": 1.0,
                  "logging_nan_inf_filter": True, "pad_token_id": pad}
    ctx.write_config("json")
    entry = ctx.write_entry(SQRT_NORM, replay=True)
    toks = data.arithmetic_lm(n, seed=31, seq=seq, vocab=vocab, pad=pad)
    sampler = data.Sampler(n, 16, seed=31)
    bad_step, bad_rows = 141, (3, 11)

    def batch_fn(step):
        idx = sampler.next()
        t = toks[idx].clone()
        if step == bad_step:  # the only batch with short sequences: padded at the end
            for r in bad_rows:
                t[r, 10:] = pad
        return {"input_ids": t[:, :-1].contiguous(), "labels": t[:, 1:].contiguous(), "index": idx}

    vt = data.arithmetic_lm(256, seed=32, seq=seq, vocab=vocab, pad=pad)
    model = entry.build_model(ctx.config)
    opt = entry.build_optimizer(model, ctx.config)
    sched = entry.build_scheduler(opt, ctx.config)
    hf = loggers.HFTrainer(ctx.root, logging_steps=10, max_steps=300, steps_per_epoch=n // 16, batch_size=16,
                           eval_steps=50, save_steps=40)
    ckpt = Checkpoints(ctx, "hf", every=40, keep=5, hf=hf)
    res = fit(ctx, model, opt, entry.loss_fn, Fit(
        steps=300, batch_fn=batch_fn, loggers=[hf], sched=sched, ckpt=ckpt, max_grad_norm=1.0, window=40,
        batch_fmt="safetensors", eval_every=50,
        eval_fn=lambda m: {"val_loss": float(entry.loss_fn(m, {"input_ids": vt[:, :-1], "labels": vt[:, 1:]}))}))
    hf.close()
    logged = hf.logged
    masked = min(s for s, v in logged["grad_norm"].items() if v != v)
    zero = min(s for s, v in logged["loss"].items() if v == 0.0)
    ctx.kind("masked_nonfinite", step=masked, series="grad_norm", primary=True,
             note=f"grad_norm NaN while loss is finite (filtered running average); loss exactly 0.0 from step {zero}")
    ctx.kind("nonfinite_weights", step=first_nonfinite_ckpt(ckpt), note="checkpoint-N/model.safetensors after step 141")
    ctx.truth["replay"] = replay_truth(ctx, res, ckpt, fmt="safetensors")
    ctx.truth["replay"]["note"] = "samples = the padded rows; the logged loss never shows NaN (masked)"
    return res, ckpt


CNN_BAD_SAMPLE = '''
STATE_DICT_PREFIX = "model."


def build_model(config):
    torch.manual_seed(config["seed"])
    return SmallCNN(n_classes=config["model"]["classes"], width=config["model"]["width"])


def loss_fn(model, batch):
    return torch.nn.functional.cross_entropy(model(batch["image"]), batch["label"])


def build_optimizer(model, config):
    return torch.optim.SGD(model.parameters(), lr=config["optim"]["lr"], momentum=0.9)


def step_options(config):
    # Lightning: a checkpoint named step=N holds the state before logged (0-based) step N
    return {"max_grad_norm": None, "grad_accumulation_steps": 1, "step_numbering": "checkpoint_before_step"}
'''


def nan_bad_sample(ctx: Ctx):
    """One corrupt image (a NaN pixel) in the data set: the loss is NaN the first time it is drawn and the
    update spreads NaN into every weight."""
    from .common import first_nonfinite, first_nonfinite_ckpt
    seed_all(41)
    ctx.meta(healthy=False, bug="one corrupt sample (NaN pixel) in the training data", logger="lightning_csv",
             model="cnn", description=(
                 "A small CNN trains well until the one corrupt image in the data set (a NaN pixel from a bad "
                 "decode) is drawn; conv1's output is NaN, the loss is NaN, and the SGD update turns every weight "
                 "NaN, so the loss stays NaN. A user sees train_loss_step become NaN in metrics.csv with no "
                 "instability before it; the saved batch holds the NaN sample."))
    n, bs = 1024, 32  # n: samples per Lightning "epoch" (limit_train_batches = 32)
    ctx.config = {"seed": 41, "model": {"classes": 4, "width": 8}, "optim": {"lr": 0.05},
                  "data": {"streamed": True, "batch_size": bs, "limit_train_batches": n // bs},
                  "max_epochs": 12, "log_every_n_steps": 5, "num_classes": 4}
    ctx.write_config("yaml")
    entry = ctx.write_entry(CNN_BAD_SAMPLE, replay=True)
    # a streamed data set (an IterableDataset over shards): every sample is drawn once, in order
    steps = 300
    x, y = data.bar_images(steps * bs, seed=41)
    bad_idx = (230 - 1) * bs + 7  # the corrupt record: drawn at (1-based) step 230, row 7
    x[bad_idx, 0, 5, 6] = float("nan")

    def batch_fn(step):
        idx = torch.arange((step - 1) * bs, step * bs)
        return {"image": x[idx], "label": y[idx], "index": idx}

    model = entry.build_model(ctx.config)
    opt = entry.build_optimizer(model, ctx.config)
    spe = n // bs
    pl = loggers.LightningCSV(ctx.root, ctx.config, {"loss": "train_loss_step", "val_loss": "val_loss",
                                                     "val_acc": "val_acc"}, every=5, steps_per_epoch=spe)
    xv, yv = data.bar_images(256, seed=42)
    ckpt = Checkpoints(ctx, "lightning", every=spe, keep=5, steps_per_epoch=spe)

    def evaluate(m):
        out = m(xv)
        return {"val_loss": float(torch.nn.functional.cross_entropy(out, yv)),
                "val_acc": float((out.argmax(1) == yv).float().mean())}

    res = fit(ctx, model, opt, entry.loss_fn, Fit(
        steps=steps, batch_fn=batch_fn, loggers=[pl], ckpt=ckpt, window=spe, step_offset=-1,
        eval_fn=evaluate, eval_every=spe, stop_after_nan=70))
    pl.close()
    nan = first_nonfinite(pl.logged["train_loss_step"])
    ctx.truth["nan_onset"] = nan
    fb = res["first_bad"]
    ctx.kind("nan_loss", step=nan, series="train_loss_step", primary=True, note="stays NaN: the update spread NaN into the weights")
    ctx.kind("bad_batch", step=fb["step"] - 1, series=None,
             note=f"batches/step_{fb['step'] - 1}.pt row {fb['samples']} (data set index {bad_idx}) holds a NaN pixel")
    ctx.kind("nonfinite_weights", step=first_nonfinite_ckpt(ckpt), note="first epoch=E-step=N.ckpt after the NaN (step = global_step)")
    ctx.truth["replay"] = replay_truth(ctx, res, ckpt, offset=-1)
    return res, ckpt


EPS_ZERO = '''
PAD = 15


def build_model(config):
    torch.manual_seed(config["seed"])
    m = config["model"]
    return TinyTransformer(vocab=m["vocab"], d=m["d"], heads=m["heads"], layers=m["layers"], seq=m["seq"], pad_idx=PAD)


def loss_fn(model, batch):
    logits = model(batch["input_ids"])
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=PAD)


def build_optimizer(model, config):
    # eps=0 "to match the reference implementation": Adam's update m / (sqrt(v) + eps) is 0/0 for any
    # parameter whose gradient has always been exactly zero (the padding row of the embedding)
    return torch.optim.Adam(model.parameters(), lr=config["optim"]["lr"], eps=config["optim"]["eps"])


def step_options(config):
    return {"max_grad_norm": None, "grad_accumulation_steps": 1}
'''


def nan_adam_eps_zero(ctx: Ctx):
    """Adam with eps=0: the padding embedding row (its gradient is always exactly 0) becomes NaN in the very
    first optimizer step, silently; the loss turns NaN only when padding first appears, much later."""
    from .common import first_nonfinite, first_nonfinite_ckpt
    seed_all(51)
    ctx.meta(healthy=False, bug="Adam(eps=0): 0/0 in the update of a parameter whose gradient is always 0",
             logger="tensorboard", model="transformer", description=(
                 "Adam is built with eps=0. The embedding's padding row (padding_idx) always gets an exactly-zero "
                 "gradient, so its update m / sqrt(v) is 0/0 = NaN in the very first optimizer step. Nothing shows "
                 "until the first batch with padded sequences (step 150): the NaN row reaches the loss and the "
                 "loss is NaN from then on. Every checkpoint after step 0 already holds the NaN row. A user sees "
                 "a healthy curve that turns NaN at step 150, while the cause is at step 1."))
    n, seq, vocab, pad = 4096, 16, 16, 15
    ctx.config = {"seed": 51, "model": {"vocab": vocab, "d": 32, "heads": 2, "layers": 2, "seq": seq},
                  "optim": {"lr": 0.002, "eps": 0.0}, "max_steps": 200, "batch_size": 16, "pad_token_id": pad,
                  "save_every": 50}
    ctx.write_config("yaml")
    entry = ctx.write_entry(EPS_ZERO, replay=True)
    toks = data.arithmetic_lm(n, seed=51, seq=seq, vocab=vocab, pad=pad)
    sampler = data.Sampler(n, 16, seed=51)
    pad_from = 150

    def batch_fn(step):
        t = toks[sampler.next()].clone()
        if step >= pad_from:  # from here the loader mixes in shorter sequences, padded at the end
            t[::4, 12:] = pad
        return {"input_ids": t[:, :-1].contiguous(), "labels": t[:, 1:].contiguous()}

    model = entry.build_model(ctx.config)
    opt = entry.build_optimizer(model, ctx.config)
    tb = loggers.TensorBoard(ctx.root, {"loss": "train_loss", "grad_norm": "grad_norm"}, every=2)
    ckpt = Checkpoints(ctx, "torch", every=50, keep=5)
    ckpt.save(0, model, opt)  # the script saves the initial weights
    res = fit(ctx, model, opt, entry.loss_fn, Fit(steps=200, batch_fn=batch_fn, loggers=[tb], ckpt=ckpt, window=1))
    tb.close()
    nan = first_nonfinite(tb.logged["train_loss"])
    fb = res["first_bad"]
    assert fb["step"] == 1 and fb["phase"] == "optimizer" and nan >= pad_from, (fb, nan)
    ctx.truth["nan_onset"] = nan
    ctx.kind("nonfinite_weights", step=first_nonfinite_ckpt(ckpt), primary=True,
             note=f"{fb['parameter']} row {pad} is NaN in every checkpoint after step 0 (since optimizer step 1)")
    ctx.kind("nan_loss", step=nan, series="train_loss", note=f"the loss turns NaN when padding first appears (step {pad_from})")
    ctx.truth["replay"] = replay_truth(ctx, res, ckpt)
    ctx.truth["replay"]["note"] = "forward and backward are finite; the first NaN is written by Adam's update (0/0)"
    return res, ckpt
