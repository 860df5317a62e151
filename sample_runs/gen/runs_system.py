"""Runs whose trouble is in the schedule, the data, mixed precision, the system or the logs themselves."""

from __future__ import annotations

import math

import numpy as np
import torch

from . import data, loggers
from .common import Checkpoints, Ctx, Fit, capture, fit, seed_all
from .runs_curves import cls_setup

LM = '''
def build_model(config):
    torch.manual_seed(config["seed"])
    m = config["model"]
    return TinyTransformer(vocab=m["vocab"], d=m["d"], heads=m["heads"], layers=m["layers"], seq=m["seq"])


def loss_fn(model, batch):
    logits = model(batch["input_ids"])
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten())


def build_optimizer(model, config):
    return torch.optim.AdamW(model.parameters(), lr=config["optim"]["lr"], weight_decay=0.01)


def build_scheduler(optimizer, config):
    # transformers' get_cosine_schedule_with_warmup
    o = config["optim"]

    def f(s):
        if s < o["warmup_steps"]:
            return s / max(1, o["warmup_steps"])
        progress = (s - o["warmup_steps"]) / max(1, config["max_steps"] - o["warmup_steps"])
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * 0.5 * 2.0 * progress)))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, f)
'''


def _lm_setup(ctx, seed, steps, lr=3e-3, warmup=20, fmt="json", extra=None, probe=False):
    seed_all(seed)
    ctx.config = {"seed": seed, "model": {"vocab": 16, "d": 32, "heads": 2, "layers": 2, "seq": 16},
                  "optim": {"lr": lr, "warmup_steps": warmup, "scheduler": "cosine"}, "max_steps": steps,
                  "per_device_train_batch_size": 16, **(extra or {})}
    ctx.write_config(fmt)
    entry = ctx.write_entry("import math\n" + LM, replay=probe)
    toks = data.arithmetic_lm(8192, seed=seed)
    sampler = data.Sampler(8192, 16, seed=seed)
    vt = data.arithmetic_lm(256, seed=seed + 1)

    def batch_fn(step):
        t = toks[sampler.next()]
        return {"input_ids": t[:, :-1].contiguous(), "labels": t[:, 1:].contiguous()}

    def evaluate(m):
        return {"val_loss": float(entry.loss_fn(m, {"input_ids": vt[:, :-1], "labels": vt[:, 1:]}))}
    model = entry.build_model(ctx.config)
    opt = entry.build_optimizer(model, ctx.config)
    return entry, model, opt, entry.build_scheduler(opt, ctx.config), batch_fn, evaluate


def lr_sched_per_microbatch(ctx: Ctx):
    ctx.meta(healthy=False, bug="cosine scheduler stepped every micro-batch under 8-step gradient accumulation",
             logger="hf_trainer", model="transformer", description=(
                 "A custom loop calls scheduler.step() inside the micro-batch loop with gradient accumulation 8: "
                 "the cosine schedule built for 200 optimizer steps runs 8x too fast, reaches 0 at step ~25, then "
                 "(cosine is periodic) climbs again and repeats. A user sees learning_rate in trainer_state.json "
                 "hit its floor after an eighth of the run and oscillate."))
    entry, model, opt, sched, batch_fn, evaluate = _lm_setup(ctx, 301, 200, extra={"gradient_accumulation_steps": 8,
                                                                                  "logging_steps": 5})
    hf = loggers.HFTrainer(ctx.root, logging_steps=5, max_steps=200, steps_per_epoch=64, batch_size=16,
                           eval_steps=50, save_steps=200)
    fit(ctx, model, opt, entry.loss_fn, Fit(steps=200, batch_fn=batch_fn, loggers=[hf], sched=sched, accum=8,
                                            sched_per_micro=True, max_grad_norm=1.0, eval_fn=evaluate, eval_every=50))
    hf.close()
    lr = hf.logged["learning_rate"]
    floor = min(lr, key=lr.get)
    ctx.kind("lr_schedule_anomaly", step=floor, step_end=max(lr), series="learning_rate", primary=True,
             note=f"learning_rate reaches {lr[floor]:.2e} at step {floor} of 200, then rises again (periodic)")


def lr_sched_never_stepped(ctx: Ctx):
    ctx.meta(healthy=False, bug="scheduler created but scheduler.step() never called", logger="lightning_csv",
             model="mlp", description=(
                 "config.yaml asks for 10 warmup steps and cosine decay; the hand-written loop builds the "
                 "scheduler but never steps it, so the LR sits at warmup's first value (lr x 1/10) for the whole "
                 "run. A user sees lr-Adam flat in metrics.csv and slower training than expected."))
    entry, model, opt, batch_fn, evaluate, spe, _ = cls_setup(ctx, 302, steps=600, lr=3e-3, extra_cfg={
        "scheduler": {"name": "cosine", "warmup_steps": 10}})
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 10) * 0.5 * (1 + math.cos(math.pi * s / 600)))
    pl = loggers.LightningCSV(ctx.root, ctx.config, {"loss": "train_loss", "lr": "lr-Adam", "val_loss": "val_loss"},
                              every=10, steps_per_epoch=spe)
    fit(ctx, model, opt, entry.loss_fn, Fit(steps=600, batch_fn=batch_fn, loggers=[pl], eval_fn=evaluate,
                                            eval_every=spe))  # BUG: sched never passed / stepped
    del sched
    pl.close()
    lr = pl.logged["lr-Adam"]
    assert len(set(lr.values())) == 1
    ctx.kind("lr_schedule_anomaly", step=min(lr), step_end=max(lr), series="lr-Adam", primary=True,
             note=f"lr constant at {lr[min(lr)]:.1e} although config.yaml configures warmup + cosine")


def spike_corrupt_batches(ctx: Ctx):
    ctx.meta(healthy=False, bug="three corrupt batches (inputs x1000, a unit bug in one shard) under clipping",
             logger="tensorboard", model="mlp", description=(
                 "One data shard stores its features in the wrong unit (x1000). Each time a batch from it is "
                 "drawn (steps 300, 620, 910) the loss and the pre-clip gradient norm spike by orders of "
                 "magnitude; clipping at 1.0 keeps the update bounded and the loss recovers within a few steps. "
                 "A user sees three isolated spikes; batches/step_N.pt holds the x1000 inputs."))
    spikes = (300, 620, 910)
    entry, model, opt, batch_fn0, evaluate, spe, _ = cls_setup(ctx, 303, steps=1200, lr=1e-3, bs=64,
                                                               extra_cfg={"max_grad_norm": 1.0})

    def batch_fn(step):
        b = batch_fn0(step)
        if step in spikes:
            b = dict(b, x=b["x"] * 1000.0)
        return b
    tb = loggers.TensorBoard(ctx.root, {"loss": "train/loss", "grad_norm": "train/grad_norm_preclip", "lr": "train/lr"})
    fit(ctx, model, opt, entry.loss_fn, Fit(steps=1200, batch_fn=batch_fn, loggers=[tb], max_grad_norm=1.0,
                                            save_batches_at=tuple(s + d for s in spikes for d in (-1, 0))))
    tb.close()
    L = tb.logged["train/loss"]
    from .common import find_spikes
    assert find_spikes(L) == list(spikes), find_spikes(L)
    for s in spikes:
        base = np.median([L[t] for t in range(s - 10, s)])
        assert L[s] > 10 * base, (s, L[s], base)
        ctx.truth["spikes"] += [{"series": "train/loss", "step": s}, {"series": "train/grad_norm_preclip", "step": s}]
    ctx.kind("loss_spike", step=spikes[0], step_end=spikes[-1], series="train/loss", primary=True,
             note=f"spikes at {list(spikes)}: each recovers within a few steps")
    ctx.kind("bad_batch", step=spikes[0], step_end=spikes[-1],
             note="batches/step_{300,620,910}.pt: every sample x1000 (|x| ~ 1e3); step_{299,619,909}.pt are normal")


def amp_fp16_overflow(ctx: Ctx):
    ctx.meta(healthy=False, bug="fp16 autocast, a sum-reduced loss and growth_interval=3: overflow on a large share of steps",
             logger="tensorboard", model="mlp", description=(
                 "Mixed precision (fp16 autocast, GradScaler) with loss reduction='sum' over a batch of 256 and "
                 "unnormalised inputs: the scaled gradients overflow fp16, the scale falls from 65536 to the "
                 "hundreds, and because growth_interval=3 it doubles again every 3 good steps and overflows again: "
                 "a large share of optimizer steps is skipped for the whole run. A user sees train/loss_scale "
                 "saw-toothing and a loss that improves slowly."))
    entry, model, opt, batch_fn, evaluate, spe, _ = cls_setup(ctx, 304, steps=300, lr=1e-3, bs=256, x_scale=30.0,
        loss='    return torch.nn.functional.cross_entropy(model(batch["x"]).float(), batch["y"], reduction="sum")',
        extra_cfg={"amp": "fp16", "loss_reduction": "sum", "grad_scaler": {"init_scale": 65536.0, "growth_interval": 3}})
    scaler = torch.amp.GradScaler("cpu", init_scale=65536.0, growth_interval=3)
    tb = loggers.TensorBoard(ctx.root, {"loss": "train/loss", "scale": "train/loss_scale", "lr": "train/lr"}, every=1)
    fit(ctx, model, opt, entry.loss_fn, Fit(steps=300, batch_fn=batch_fn, loggers=[tb], scaler=scaler,
                                            amp_dtype=torch.float16))
    tb.close()
    sc = tb.logged["train/loss_scale"]
    vals = [sc[k] for k in sorted(sc)]
    drops = int(np.sum(np.diff(vals) < 0))
    assert drops >= 50, drops
    ctx.kind("amp_overflow", step=min(sc), step_end=max(sc), series="train/loss_scale", primary=True,
             note=f"scale {vals[0]:.0f} -> {vals[-1]:.3g}, {drops} decreases = {drops} skipped optimizer steps of {len(vals)}")
    s = tb.logged["train/loss"]
    first = s[min(s)]
    assert first / 256 > 1.5 * math.log(5), first
    ctx.kind("initial_loss_mismatch", step=min(s), series="train/loss",
             note=f"first loss {first:.0f}: summed over 256 samples, and even per sample ({first / 256:.2f}) far above "
                  f"log(5) = {math.log(5):.2f}, because the unnormalised inputs make the first logits large")


def throughput_stalls(ctx: Ctx):
    ctx.meta(healthy=False, bug="data loader with 1 worker re-opening a remote shard every 100 steps",
             logger="tensorboard", model="mlp", description=(
                 "Training is numerically healthy, but every 100th step waits ~6 s for the data loader to open "
                 "the next shard (normal steps take ~0.08 s). The stall is visible only in the events' wall-clock "
                 "stamps. Those stamps are simulated (the gallery trains in milliseconds) and written with "
                 "SummaryWriter.add_scalar(walltime=...). A user sees a wall-time plot with steps."))
    entry, model, opt, batch_fn, evaluate, spe, _ = cls_setup(ctx, 305, steps=1000, lr=1e-3,
                                                              extra_cfg={"num_workers": 1, "shard_size_steps": 100})
    g = np.random.default_rng(305)
    jitter = g.normal(0, 0.004, 1001)
    tb = loggers.TensorBoard(ctx.root, {"loss": "train/loss", "lr": "train/lr"}, every=5)
    fit(ctx, model, opt, entry.loss_fn, Fit(steps=1000, batch_fn=batch_fn, loggers=[tb],
                                            dt=lambda s: (6.0 if s % 100 == 0 else 0.08) + jitter[s]))
    tb.close()
    ctx.kind("throughput_drop", step=100, step_end=1000, series="train/loss", primary=True,
             note="a ~6 s stall at every 100th step (steps 100, 200, ..., 1000) vs ~0.08 s per normal step; wall_time only")


def memory_growth_loss_list(ctx: Ctx):
    ctx.meta(healthy=False, bug="running-metric losses kept as tensors (with graphs) in a list", logger="tensorboard",
             model="mlp", description=(
                 "For an epoch-average 'train loss' metric the loop recomputes the loss outside torch.no_grad() "
                 "and keeps it with `metric_losses.append(loss)` (the tensor, not loss.item()); that graph is never "
                 "backpropagated, so its saved activations stay in memory. The process RSS (logged as sys/rss_mb from "
                 "/proc/self/statm) grows linearly by ~2 MB per step. A user sees memory climb until an OOM."))
    entry, model, opt, batch_fn, evaluate, spe, _ = cls_setup(ctx, 306, steps=200, lr=1e-3, bs=512, hidden=512,
                                                              d=64, n=8192)
    tb = loggers.TensorBoard(ctx.root, {"loss": "train/loss", "rss_mb": "sys/rss_mb"}, every=5)
    fit(ctx, model, opt, entry.loss_fn, Fit(steps=200, batch_fn=batch_fn, loggers=[tb], keep_losses=True))
    tb.close()
    m = tb.logged["sys/rss_mb"]
    grow = m[max(m)] - m[min(m)]
    assert grow > 300, grow
    ctx.kind("memory_growth", step=min(m), step_end=max(m), series="sys/rss_mb", primary=True,
             note=f"RSS +{grow:.0f} MB over {max(m) - min(m)} steps (measured: the values vary by ~10 % between regenerations)")


def resumed_after_crash(ctx: Ctx):
    ctx.meta(healthy=False, bug="crash at step 600 while saving; resumed from step 400 without the data-loader state",
             logger="tensorboard", model="mlp", description=(
                 "The job was killed at step 600 while writing checkpoints/step_600.pt (left half-written) and "
                 "while TensorBoard's last event was being flushed (its last record is cut). The user resumed "
                 "from checkpoints/step_400.pt after a 40-minute gap; the sampler restarted with a new seed, so "
                 "steps 401-600 appear twice with different values, in two event files. A user sees a loss curve "
                 "that doubles back on itself."))
    entry, model, opt, batch_fn, evaluate, spe, (xt, yt, xv, yv) = cls_setup(ctx, 307, steps=900, lr=1e-3)
    tags = {"loss": "train/loss", "lr": "train/lr", "grad_norm": "train/grad_norm"}
    tb = loggers.TensorBoard(ctx.root, tags, every=5, val_tags={"val_loss": "val/loss"})
    ckpt = Checkpoints(ctx, "torch", every=200, keep=5)
    fit(ctx, model, opt, entry.loss_fn, Fit(steps=900, batch_fn=batch_fn, loggers=[tb], ckpt=ckpt, stop_at=600,
                                            eval_fn=evaluate, eval_every=100))
    tb.close()
    first_events = sorted(ctx.root.glob("events.out.tfevents.*"))[0]
    size = first_events.stat().st_size
    with open(first_events, "r+b") as fh:
        fh.truncate(size - 9)
    half = ctx.root / "checkpoints" / "step_600.pt"
    blob = half.read_bytes()
    half.write_bytes(blob[: len(blob) // 2])
    # the resume: a new process, 40 minutes later, loads step_400 and a freshly seeded sampler
    ctx.wall += 2400.0
    state = torch.load(ctx.root / "checkpoints" / "step_400.pt", weights_only=True)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    sampler = data.Sampler(len(xt), 32, seed=308)
    tb2 = loggers.TensorBoard(ctx.root, tags, every=5, val_tags={"val_loss": "val/loss"})
    ckpt.every = 0
    fit(ctx, model, opt, entry.loss_fn, Fit(steps=900, first_step=401, loggers=[tb2], eval_fn=evaluate, eval_every=100,
                                            batch_fn=lambda s: (lambda i: {"x": xt[i], "y": yt[i]})(sampler.next())))
    tb2.close()
    ctx.kind("resumed_run", step=401, step_end=600, series="train/loss", primary=True,
             note="steps 401-600 logged twice (two event files, different values); 2400 s wall-clock gap before step 401 of the second file")
    ctx.truth["damage"] = [
        {"path": first_events.name, "kind": "truncated_record", "detail": f"last 9 bytes cut (file was {size} bytes)"},
        {"path": "checkpoints/step_600.pt", "kind": "truncated_checkpoint", "detail": f"first {len(blob) // 2} of {len(blob)} bytes"}]


def sampled_wandb_export(ctx: Ctx):
    ctx.meta(healthy=False, bug="only a W&B UI CSV export, down-sampled to 300 of 3000 steps", logger="wandb_export",
             model="mlp", description=(
                 "The user attached the CSV they downloaded from a W&B chart: 300 irregularly spaced points of a "
                 "3000-step run, with the UI's __MIN/__MAX columns. The training itself was healthy; the log "
                 "cannot show exact spike or NaN steps. A user sees a smooth curve and must not trust single steps."))
    entry, model, opt, batch_fn, evaluate, spe, _ = cls_setup(ctx, 309, steps=3000, lr=1e-3, bs=64)
    res = fit(ctx, model, opt, entry.loss_fn, Fit(steps=3000, batch_fn=batch_fn))
    losses = {s: v for s, v in res["losses"].items() if s != "val"}
    g = np.random.default_rng(309)
    steps = sorted(int(s) for s in g.choice(np.arange(1, 3001), 300, replace=False))
    run = "misty-forest-12"
    loggers.wandb_export(ctx.root / "wandb_export_2025-11-13T10_15_02.481+01_00.csv", run, losses, steps)
    ctx.kind("sampled_log", step=steps[0], step_end=steps[-1], series=f"{run} - train/loss", primary=True,
             note=f"300 rows for steps 1-3000, irregular spacing (gaps {min(np.diff(steps))}-{max(np.diff(steps))})")


def healthy_mlp(ctx: Ctx):
    ctx.meta(healthy=True, bug="none", logger="tensorboard", model="mlp", description=(
        "A correctly configured MLP classifier (Adam 1e-3, 4096 samples, clean labels): train and val loss "
        "fall together and flatten. A user sees nothing to fix."))
    entry, model, opt, batch_fn, evaluate, spe, _ = cls_setup(ctx, 401, steps=1200, lr=1e-3, n=8192, probe=True)
    tb = loggers.TensorBoard(ctx.root, {"loss": "loss", "grad_norm": "grad_norm", "lr": "lr"}, every=10,
                             subfolders=True, val_tags={"val_loss": "loss", "val_acc": "accuracy"})
    fit(ctx, model, opt, entry.loss_fn, Fit(steps=1200, batch_fn=batch_fn, loggers=[tb], eval_fn=evaluate,
                                            eval_every=100, capture=capture(ctx, model, opt, every=400)))
    tb.close()
    v = tb.logged["val/loss"]
    assert min(v, key=v.get) >= 1000, v


def healthy_cnn(ctx: Ctx):
    ctx.meta(healthy=True, bug="none", logger="lightning_csv", model="cnn", description=(
        "A small CNN on procedurally drawn bar images, SGD with momentum: the loss falls steadily, val accuracy "
        "reaches ~100%. A user sees a textbook run."))
    seed_all(402)
    ctx.config = {"seed": 402, "model": {"classes": 4, "width": 8}, "optim": {"lr": 0.02}, "max_steps": 480,
                  "batch_size": 32, "log_every_n_steps": 20}
    ctx.write_config("yaml")
    entry = ctx.write_entry('''
def build_model(config):
    torch.manual_seed(config["seed"])
    return SmallCNN(n_classes=config["model"]["classes"], width=config["model"]["width"])


def loss_fn(model, batch):
    return torch.nn.functional.cross_entropy(model(batch["image"]), batch["label"])


def build_optimizer(model, config):
    return torch.optim.SGD(model.parameters(), lr=config["optim"]["lr"], momentum=0.9)
''', replay=True)
    x, y = data.bar_images(4096, seed=402)
    xv, yv = data.bar_images(512, seed=403)
    sampler = data.Sampler(4096, 32, seed=402)
    model = entry.build_model(ctx.config)
    opt = entry.build_optimizer(model, ctx.config)
    pl = loggers.LightningCSV(ctx.root, ctx.config, {"loss": "train_loss_step", "val_loss": "val_loss", "val_acc": "val_acc"},
                              every=20, steps_per_epoch=128)
    ckpt = Checkpoints(ctx, "lightning", every=128, keep=3, steps_per_epoch=128)

    def evaluate(m):
        out = m(xv)
        return {"val_loss": float(torch.nn.functional.cross_entropy(out, yv)), "val_acc": float((out.argmax(1) == yv).float().mean())}
    fit(ctx, model, opt, entry.loss_fn, Fit(steps=480, batch_fn=lambda s: (lambda i: {"image": x[i], "label": y[i]})(sampler.next()),
                                            loggers=[pl], ckpt=ckpt, eval_fn=evaluate, eval_every=64,
                                            capture=capture(ctx, model, opt)))
    pl.close()


def healthy_transformer(ctx: Ctx):
    ctx.meta(healthy=True, bug="none", logger="hf_trainer", model="transformer", description=(
        "A tiny causal transformer on an arithmetic-sequence language, AdamW with linear warmup and cosine decay "
        "(HF-style): the loss falls smoothly, the LR warms up then decays (a schedule, not a pathology). A user "
        "sees a healthy trainer_state.json."))
    entry, model, opt, sched, batch_fn, evaluate = _lm_setup(ctx, 404, 300, lr=3e-3, warmup=30,
                                                             extra={"logging_steps": 10, "max_grad_norm": 1.0}, probe=True)
    hf = loggers.HFTrainer(ctx.root, logging_steps=10, max_steps=300, steps_per_epoch=512, batch_size=16,
                           eval_steps=100, save_steps=100)
    ckpt = Checkpoints(ctx, "hf", every=100, keep=2, hf=hf)
    fit(ctx, model, opt, entry.loss_fn, Fit(steps=300, batch_fn=batch_fn, loggers=[hf], sched=sched, ckpt=ckpt,
                                            max_grad_norm=1.0, eval_fn=evaluate, eval_every=100,
                                            capture=capture(ctx, model, opt, sched)))
    hf.close()
