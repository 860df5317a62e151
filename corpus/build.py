"""Train one corpus run from its RunSpec: the family's task, the optimizer and schedule, the bug, the loggers;
then measure its labels from what the writers wrote (corpus/label.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import torch
import yaml

from sample_runs.gen.common import Checkpoints, Ctx, Fit, fit
from sample_runs.gen.loggers import wandb_export
from sample_runs.gen.stats import layer_stats

from . import label
from .logs import LoggerSet
from .spec import RunSpec
from .tasks import make_task

BASE_LR = {"sgd": 0.05, "adam": 1e-3, "adamw": 1e-3, "adafactor": 1e-2}


def make_optimizer(name: str, params, lr: float, weight_decay: float = 0.0):
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=weight_decay)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay or 0.01)
    if name == "adafactor":
        return torch.optim.Adafactor(params, lr=lr, weight_decay=weight_decay)
    raise ValueError(name)


def make_schedule(name: str, opt, steps: int, lr: float):
    """Schedules as the common libraries define them (LambdaLR factors; OneCycleLR itself)."""
    if name == "constant":
        return None
    if name == "warmup_cosine":  # transformers' get_cosine_schedule_with_warmup: to 0 at the end
        w = max(1, steps // 20)
        return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: s / w if s < w else
                                                 max(0.0, 0.5 * (1 + math.cos(math.pi * (s - w) / max(1, steps - w)))))
    if name == "linear":  # get_linear_schedule_with_warmup, no warmup
        return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, (steps - s) / steps))
    if name == "step":
        return torch.optim.lr_scheduler.MultiStepLR(opt, [steps // 2, 3 * steps // 4], gamma=0.1)
    if name == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps + 1,
                                                   cycle_momentum=not isinstance(opt, torch.optim.Adafactor))
    raise ValueError(name)


def _every(spec: RunSpec, rng: np.random.Generator) -> int:
    if spec.points:
        return max(1, spec.steps // spec.points)
    return int(rng.choice([1, 1, 2, 5, 10]))


def build_run(spec: RunSpec, root: Path) -> dict:
    """Train the run into `root` and return its labels (also written to root/labels.json)."""
    root.mkdir(parents=True, exist_ok=True)
    ctx = Ctx(spec.name, root)
    rng = np.random.default_rng(spec.seed)
    bug, mag, fam = spec.bug, spec.mag, spec.family
    steps = spec.steps
    knobs = {}
    if bug == "overfitting_tiny_train":
        knobs = {"n_train": int(mag), "n_val": 1024, "hidden": 256}
    elif bug == "underfitting_linear":
        knobs = {"depth": 0}
    elif bug == "underfitting_dropout":
        knobs = {"dropout": mag}
    elif bug == "val_noise_tiny_val":
        knobs = {"n_val": 512}
    elif bug == "vanishing_deep_sigmoid":
        knobs = {"depth": int(mag), "act": "sigmoid", "hidden": 32}
    elif bug == "saturated_tanh":
        knobs = {"act": "tanh", "x_scale": mag}
    elif bug == "oscillation_high_lr":
        knobs = {"act": "tanh", "n_train": 1024}
    elif bug == "plateau_double_softmax":
        knobs = {"loss": "double_softmax"}
    elif bug == "log_zero":
        knobs = {"loss": "log_softmax_by_hand"}
    elif bug == "amp_overflow":
        knobs = {"x_scale": 30.0}
    elif bug == "memory_growth":
        knobs = {"hidden": 512, "bs": 512}
    elif fam == "mlp" and spec.bug == "none" and spec.seed % 3 == 0:
        knobs = {"act": "gelu"}
    task = make_task(fam, spec.seed, **knobs)
    model = task.model
    lr = BASE_LR[spec.optimizer] * (3 if fam in ("transformer", "lm_bigvocab") and spec.optimizer != "adafactor" else 1)
    if fam == "finetune":
        lr *= 0.5
    if fam in ("lstm", "gru") and spec.optimizer == "sgd":
        lr = 0.5
    if fam == "modular":
        lr = 3e-3
    wd = 0.0
    facts: dict = {}           # what the bug did, for the labeller (never a label by itself)
    fit_kw: dict = {}
    extra_tags: tuple[str, ...] = ()
    stats_layers: list[str] = []
    stats_acts: dict[str, str] = {}
    stats_what: tuple = ()
    every_stats = 1
    # calib replica 3 of a healthy recipe is instrumented (issue 12's false-alarm budget needs healthy runs
    # that log per-layer norms, unit statistics, memory, a loss scale and saved batches)
    instrumented = bug == "none" and spec.replica == 3

    # ---- the bug, before the optimizer exists
    if bug in ("nan_lr", "log_zero", "exploding_guard"):  # a learning rate `mag` times the family's working one
        lr *= mag
    elif bug == "initial_loss_bad_init":
        torch.nn.init.normal_(model.head.weight, std=mag)
    elif bug == "dead_relu_bias":
        for m in model.body:
            if isinstance(m, torch.nn.Linear):
                torch.nn.init.constant_(m.bias, mag)
                m.weight.data.mul_(0.5)
        stats_acts = {"body.act1": "relu", "body.act2": "relu"}
    elif bug == "saturated_tanh":
        stats_acts = {"body.act1": "tanh", "body.act2": "tanh"}
    elif bug == "vanishing_deep_sigmoid":
        stats_layers = ["body.fc1", f"body.fc{int(mag) // 2}", "head"]
        stats_what = ("grad",)
    elif instrumented and fam in ("mlp", "mlp_long", "finetune"):  # per-layer grad norms and unit statistics
        stats_layers, stats_what = ["body.fc1", "body.fc2", "head"], ("grad",)
        act = "gelu" if fam == "finetune" else knobs.get("act", "relu")
        if act in ("relu", "tanh"):
            stats_acts = {"body.act1": act, "body.act2": act}
    elif bug == "update_ratio_tiny_lr":
        lr = mag
        stats_layers, stats_what, every_stats = ["body.fc1", "body.fc2", "head"], ("update",), 1
    elif bug in ("weight_growth_no_wd", "weight_collapse_wd"):
        stats_layers, stats_what = ["body.fc1", "body.fc2", "head"], ("weight",)
        if bug == "weight_growth_no_wd":
            lr = mag
        else:
            wd = mag
            lr = 0.05
    elif bug == "exploding_rnn":
        rnn = getattr(model, "lstm", None) or getattr(model, "gru")
        with torch.no_grad():
            rnn.weight_hh_l0.mul_(mag)
        lr = 0.5
    elif bug == "oscillation_high_lr":
        lr = mag
    elif bug == "frozen_layer":
        first = model.features.conv1 if fam == "cnn" else model.body.fc1
        for p in first.parameters():
            p.requires_grad = False  # BUG: frozen for a warm-up phase, never unfrozen
        facts["frozen"] = "features.conv1" if fam == "cnn" else "body.fc1"
    elif bug == "flat_frozen_all":  # a 'pretrained' backbone, frozen
        for p in (model.features if fam == "cnn" else model.body).parameters():
            p.requires_grad = False
    elif bug == "grokking":
        wd = 1.0
    params = [p for p in model.parameters() if p.requires_grad] or list(model.parameters())
    opt = make_optimizer(spec.optimizer, params, lr, wd)
    if bug == "grokking":  # the grokking papers' AdamW: beta2 0.98, weight decay 1
        opt = torch.optim.AdamW(params, lr=lr, weight_decay=wd, betas=(0.9, 0.98))
    if bug == "flat_frozen_all":  # BUG: the head is replaced after the optimizer was built: it steps the old head
        model.head = torch.nn.Linear(model.head.in_features, model.head.out_features)
    sched = make_schedule(spec.schedule, opt, steps, lr)
    if bug == "flat_lr_zero":  # BUG: lr_lambda returns the step's *decay* (s/steps) with warmup 0 -> factor 0
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.0)
    elif bug == "plateau_lr_drop":  # BUG: milestones in epochs given as steps: the LR drops x mag at 8% of the run
        sched = torch.optim.lr_scheduler.MultiStepLR(opt, [steps // 12], gamma=mag)
    elif bug in ("nan_lr", "exploding_guard"):  # warmup over half the run to an LR `mag` x too high
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, s / (steps / 2)))
    elif bug == "divergence_lr_ramp":  # BUG: an LR range test left on: the LR grows x mag per step
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(mag ** s, 1e4))
        fit_kw["max_grad_norm"] = 5.0
    elif bug == "lr_sched_never_stepped":
        fit_kw["sched"] = None
        facts["configured_schedule"] = spec.schedule
    elif bug == "lr_sched_per_micro":
        fit_kw.update(accum=int(mag), sched_per_micro=True)
    fit_kw.setdefault("sched", sched)

    # ---- the bug in the loop or the data
    batch_fn = task.batch_fn
    if bug == "clip_too_small":
        fit_kw["max_grad_norm"] = mag
        facts["max_grad_norm"] = mag
    elif spec.bug == "none" and spec.seed % 2 == 0:  # HF's default 1.0 on some runs, a looser 5.0 on others
        fit_kw["max_grad_norm"] = 1.0 if spec.seed % 4 == 0 else 5.0
    if bug == "flat_no_backward":
        fit_kw["backward"] = False
    if bug in ("nan_input", "spike_batches", "spike_one_of_many"):
        inner = batch_fn
        rng_b = np.random.default_rng(spec.seed + 1)
        if bug == "nan_input":
            bad = {int(steps * rng_b.uniform(0.35, 0.6))}
        elif bug == "spike_batches":
            bad = set(int(s) for s in np.sort(rng_b.choice(np.arange(steps // 5, steps - 20), 3, replace=False)))
        else:
            bad = {int(steps * rng_b.uniform(0.4, 0.6))}
        facts["bad_steps"] = sorted(bad)

        def batch_fn(step, inner=inner, bad=bad):
            b = inner(step)
            if step in bad:
                b = dict(b)
                x = b["x"].clone().float() if b["x"].is_floating_point() else b["x"]
                if bug == "nan_input":
                    x[0].view(-1)[0] = float("nan")  # one corrupt sample
                else:
                    x[: max(1, len(x) // 4)] *= mag  # a shard with a unit bug
                b["x"] = x
            return b
        if bug == "nan_input":
            fit_kw.update(window=4, stop_after_nan=20)
        else:
            fit_kw["max_grad_norm"] = 1.0
            saved = set()
            for s in bad:
                saved |= {s - 1, s}
            if bug == "spike_one_of_many":  # several saved batches, one culprit
                saved |= {s + k for s in bad for k in (-6, -3, 3, 6)}
            fit_kw["save_batches_at"] = tuple(sorted(saved))
    if bug == "nan_lr" or bug == "log_zero":
        fit_kw.update(window=4, stop_after_nan=30)
    if bug == "exploding_guard":
        fit_kw.update(stop_after_nan=0)
    evaluate = task.evaluate
    if bug == "dist_mismatch_val_zero":  # BUG: val columns not mapped, every feature filled with the train mean (0)
        xv, yv = task.val
        evaluate = lambda m: task.evaluate(m, torch.zeros_like(xv), yv)  # noqa: E731
    elif bug == "dist_mismatch_val_shift":  # BUG: val images not normalised like train (scaled by mag, shifted)
        xv, yv = task.val
        evaluate = lambda m: task.evaluate(m, xv * mag + 1.0, yv)  # noqa: E731
    elif bug == "val_noise_tiny_val":  # BUG: limit_val_batches-style: each evaluation sees `mag` random samples
        xv, yv = task.val
        g_val = torch.Generator().manual_seed(spec.seed + 2)

        def evaluate(m):
            idx = torch.randperm(len(xv), generator=g_val)[:int(mag)]
            return task.evaluate(m, xv[idx], yv[idx])
    if bug == "amp_overflow":
        fit_kw.update(scaler=torch.amp.GradScaler("cpu", init_scale=65536.0, growth_interval=int(mag)),
                      amp_dtype=torch.float16)
        extra_tags += ("scale",)
        loss_fn = task.loss_fn

        def amp_loss(m, b):  # BUG: sum-reduced loss over the batch under fp16
            return torch.nn.functional.cross_entropy(m(b["x"]).float(), b["y"], reduction="sum")
        task.loss_fn = amp_loss
        del loss_fn
    if bug == "memory_growth":
        fit_kw["keep_losses"] = True
        extra_tags += ("rss_mb",)
    if instrumented:  # a healthy run that logs what the memory, batch and loss-scale detectors read
        fit_kw["log_rss"] = True
        extra_tags += ("rss_mb",)
        fit_kw.setdefault("save_batches_at", tuple(int(steps * f) for f in (0.3, 0.5, 0.7)))
        if fam in ("mlp", "mlp_long", "finetune"):  # fp16 autocast with the default scaler and a mean loss
            fit_kw.update(scaler=torch.amp.GradScaler("cpu"), amp_dtype=torch.float16)
            extra_tags += ("scale",)
    if bug == "throughput_stalls":
        jit = rng.normal(0, 0.004, steps + 2)
        period = int(mag)
        fit_kw["dt"] = lambda s: (6.0 if s % period == 0 else 0.08) + jit[s]
        facts["stall_period"] = period
    elif bug == "throughput_slowdown":
        jit = rng.normal(0, 0.003, steps + 2)
        fit_kw["dt"] = lambda s: (0.06 * (mag if s > steps // 2 else 1.0)) + jit[s]
        facts["slowdown_at"] = steps // 2
    else:
        jit = rng.normal(0, 0.002, steps + 2)
        base = float(rng.uniform(0.03, 0.2))
        fit_kw["dt"] = lambda s: base + abs(jit[s])

    if stats_layers or stats_acts:
        fit_kw["extra_fn"] = layer_stats(model, acts=stats_acts or None, layers=stats_layers, what=stats_what,
                                         every=every_stats)
        extra_tags += tuple(
            [f"activations/{n}/{'dead' if k == 'relu' else 'saturated'}_fraction" for n, k in stats_acts.items()]
            + [f"{w}/{n}" for n in stats_layers for w in
               {"grad": ["grad_norm"], "weight": ["weight_norm"], "update": ["update_ratio"]}[stats_what[0]]])

    # ---- config, loggers, eval, checkpoints
    every = _every(spec, rng)
    if bug == "grokking":
        every = 20
    if bug in ("lr_sched_per_micro",):
        every = max(1, steps // 100)
    eval_every = max(every, steps // int(rng.integers(8, 21)))
    if spec.flavour == "short":
        eval_every = steps // spec.points
    if bug in ("val_noise_tiny_val", "overfitting_tiny_train", "dist_mismatch_val_zero", "dist_mismatch_val_shift",
               "underfitting_linear", "underfitting_dropout", "grokking"):
        eval_every = max(every, steps // 25)
    config = {**task.config, "optimizer": spec.optimizer, "lr": lr, "weight_decay": wd, "scheduler": spec.schedule,
              "max_steps": steps, "logging_steps": every, "eval_steps": eval_every,
              "max_grad_norm": fit_kw.get("max_grad_norm"), "gradient_accumulation_steps": fit_kw.get("accum", 1)}
    if bug == "amp_overflow":
        config.update(amp="fp16", loss_reduction="sum", grad_scaler={"init_scale": 65536.0, "growth_interval": int(mag)})
    ctx.config = config
    if "hf" in spec.loggers:
        (root / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    else:
        (root / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    if bug == "sampled_export":
        return _sampled_export(spec, ctx, task, opt, steps)
    logs = LoggerSet(spec.loggers, root, seed=spec.seed, every=every, steps=steps, spe=task.steps_per_epoch,
                     config=config, extra_tags=extra_tags, opt_name=type(opt).__name__, eval_every=eval_every)
    ckpt = None
    layout = {"hf": "hf", "lightning": "lightning"}.get(spec.loggers[0], "torch")
    if bug in ("nan_lr", "nan_input", "log_zero", "frozen_layer", "resumed_older_ckpt", "resumed_epoch_reset") \
            or spec.flavour == "resumed" or (bug == "none" and spec.seed % 5 == 0):
        hf = logs.primary if layout == "hf" else None
        ckpt = Checkpoints(ctx, layout, every=max(1, steps // 8), keep=5, hf=hf, steps_per_epoch=task.steps_per_epoch)
    off = -1 if spec.loggers[0] == "lightning" else 0
    fit_kw["step_offset"] = off  # saved batches are named by the primary writer's logged step
    writers = logs.writers if bug != "exploding_guard" else [LossGuard(logs.writers, 1e4)]
    f = Fit(steps=steps, batch_fn=batch_fn, loggers=writers, eval_fn=evaluate, eval_every=eval_every,
            ckpt=ckpt, **fit_kw)
    if spec.flavour == "resumed" or bug in ("resumed_older_ckpt", "resumed_epoch_reset"):
        _resumed(spec, ctx, task, model, opt, f, logs, ckpt, facts)
    else:
        fit(ctx, model, opt, task.loss_fn, f)
    if bug in ("spike_batches", "spike_one_of_many", "nan_input"):  # the saved batches, by logged step
        facts["saved_batches"] = sorted(int(p.stem.split("_")[1]) for p in (root / "batches").glob("step_*"))
    logs.close()
    for link in root.rglob("*"):  # no links out of the run (W&B's debug logs)
        if link.is_symlink():
            link.unlink()
    facts["ckpt"] = [(s, str(p.relative_to(root))) for s, p in ckpt.saved] if ckpt else []
    facts.update(step_offset=off, classes=task.classes, max_grad_norm=fit_kw.get("max_grad_norm"))
    measured = label.Measured.of(logs)
    labels = label.label_run(spec, measured, facts, root)
    labels["measured"] = {**measured.to_json(), "facts": facts}
    (root / "labels.json").write_text(json.dumps(labels, indent=1, allow_nan=False) + "\n")
    return labels


def relabel(spec: RunSpec, root: Path) -> dict:
    """Re-apply the labelling rules to a generated run from what its labels.json saved (no training)."""
    old = json.loads((root / "labels.json").read_text())
    if "measured" not in old:
        return old  # sampled_log: labelled at generation from the export itself
    m = old["measured"]
    facts = dict(m["facts"])
    facts["ckpt"] = [tuple(x) for x in facts.get("ckpt", [])]
    labels = label.label_run(spec, label.Measured.from_json(m), facts, root)
    labels["measured"] = m
    (root / "labels.json").write_text(json.dumps(labels, indent=1, allow_nan=False) + "\n")
    return labels


class LossGuard:
    """The script's guard `if loss > limit: raise RuntimeError("loss exploded")`: the job dies, and nothing after
    that step reaches the logs (training goes on in memory only until the loop's NaN stop)."""

    def __init__(self, writers, limit: float):
        self.writers, self.limit, self.dead = writers, limit, False

    def train(self, step, metrics, wall):
        if not self.dead and not (abs(metrics["loss"]) < self.limit):
            self.dead = True
        if not self.dead:
            for w in self.writers:
                w.train(step, metrics, wall)

    def val(self, step, metrics, wall):
        if not self.dead:
            for w in self.writers:
                w.val(step, metrics, wall)


def _resumed(spec, ctx, task, model, opt, f: Fit, logs, ckpt, facts):
    """A crash, then a resume from a checkpoint: exact (healthy flavour: the last checkpoint, the data order
    restored), from an older checkpoint with a fresh sampler (steps repeat), or an HF resume whose epoch counter
    restarts at 0 while the step keeps rising."""
    steps = f.steps
    crash = steps // 2 if spec.flavour == "resumed" else int(steps * 0.6)
    every_ck = ckpt.every
    if spec.flavour == "resumed":
        crash = (crash // every_ck) * every_ck  # crashed right after a checkpoint: nothing repeats
    f1 = Fit(**{**f.__dict__, "stop_at": crash})
    res = fit(ctx, model, opt, task.loss_fn, f1)
    ctx.wall += 900.0 + 600.0 * (spec.seed % 3)  # the restart's gap
    if spec.bug == "resumed_older_ckpt":
        back = [s for s, _ in ckpt.saved if s < crash - every_ck]
        start = back[-1]
        state = torch.load(ctx.root / dict(ckpt.saved)[start], weights_only=True)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        # the data loader's position is not restored: the sampler goes on, so the repeated steps see new batches
        facts["resume"] = {"from": start, "crash": crash}
    else:
        start = crash
        facts["resume"] = {"from": start, "crash": crash}
    if spec.bug == "resumed_epoch_reset":
        hf = logs.primary
        hf.spe = 10 ** 9  # the resumed Trainer counts epochs from 0 again (a new dataset object, steps continue)
        facts["resume"]["epoch_reset"] = True
    for w in logs.writers:  # the resumed process opens new event files beside the first ones
        if hasattr(w, "w_train"):
            from torch.utils.tensorboard import SummaryWriter
            same = w.w_train is w.w_val
            dirs = (w.w_train.log_dir, w.w_val.log_dir)
            w.w_train.close()
            w.w_val.close()
            w.w_train = SummaryWriter(dirs[0])
            w.w_val = w.w_train if same else SummaryWriter(dirs[1])
    if ckpt is not None:  # the resumed process writes its checkpoints again from `start` on
        ckpt.saved = [(s, p) for s, p in ckpt.saved if s <= start]
    f2 = Fit(**{**f.__dict__, "first_step": start + 1})
    res2 = fit(ctx, model, opt, task.loss_fn, f2)
    for k in ("losses", "gnorms", "lrs"):
        res[k] = {**res[k], **res2[k]}
    res["last_step"] = res2["last_step"]
    return res


def _sampled_export(spec, ctx, task, opt, steps):
    """Only a W&B UI export: train healthily, write the chart's CSV as W&B's UI exports it (300 sampled rows with
    __MIN/__MAX), nothing else."""
    res = fit(ctx, task.model, opt, task.loss_fn, Fit(steps=steps, batch_fn=task.batch_fn))
    losses = {s: v for s, v in res["losses"].items() if s != "val"}
    g = np.random.default_rng(spec.seed)
    picked = sorted(int(s) for s in g.choice(np.arange(1, steps + 1), 300, replace=False))
    run = f"corpus-{spec.seed}"
    wandb_export(ctx.root / "wandb_export_2025-11-13T10_15_02.481+01_00.csv", run, losses, picked)
    gaps = np.diff(picked)
    labels = label.base(spec)
    labels["kinds"].append(label.entry("sampled_log", picked[0], picked[-1], f"{run} - train/loss", {
        "rows": len(picked), "steps_covered": steps, "gap_min": int(gaps.min()), "gap_max": int(gaps.max())},
        f"{len(picked)} rows for steps 1-{steps}, irregular gaps {gaps.min()}-{gaps.max()}"))
    labels["healthy"] = False
    (ctx.root / "labels.json").write_text(json.dumps(labels, indent=1, allow_nan=False) + "\n")
    return labels
