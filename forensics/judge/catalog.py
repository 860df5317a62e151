"""The pathology catalog (../shared/CATALOG.md) as data: each id with its one-line summary, likely causes and first checks.

This is the one vocabulary of the engine, the JSON output, the database and the app. `NOT_YET_DETECTED` is
the one place that lists catalog kinds no detector covers yet, with why (DECISIONS.md §7): `forensics rules`
shows them as such, and `tests/test_catalog.py` checks that detectors plus this list cover the catalog exactly.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    kind: str
    group: str  # curve, gradient, data, logging
    summary: str  # what it is, one line
    causes: tuple[str, ...]  # likely causes, most common first
    checks: tuple[str, ...]  # what a user should check first


def _e(kind: str, group: str, summary: str, causes: tuple[str, ...], checks: tuple[str, ...]) -> Entry:
    return Entry(kind, group, summary, causes, checks)


ENTRIES: tuple[Entry, ...] = (
    _e("nan_loss", "curve", "the training loss becomes NaN or ±Inf and stays so",
       ("LR too high", "exploding gradients", "log/sqrt/division of 0 in the loss", "fp16 overflow",
        "NaN in the data or weights (when it happens at the first step)"),
       ("the last finite checkpoint and the batch of the NaN step (replay the step)",
        "grad norm and loss just before the onset", "the data of that step")),
    _e("loss_spike", "curve", "a sudden jump of the loss far above its local level that recovers within a few steps",
       ("bad batch (outliers, corrupt or mislabelled samples)", "LR near instability", "no gradient clipping"),
       ("the samples of the spike step's batch", "gradient clipping", "the LR at the spike")),
    _e("divergence", "curve", "the loss rises and does not come back (may end in nan_loss)",
       ("LR too high", "exploding gradients", "missing warmup"),
       ("the LR schedule around the onset", "the grad norm around the onset", "warmup")),
    _e("flat_loss", "curve", "the loss does not move from the start (within noise)",
       ("backward() not called", "zero_grad at the wrong place", "parameters frozen or not in the optimizer",
        "LR ≈ 0", "labels wrong"),
       ("that optimizer.step() and backward() run", "which parameters have requires_grad and are in the optimizer",
        "the logged LR", "the labels")),
    _e("plateau", "curve", "the loss falls, then stalls well above its floor",
       ("LR too small", "model capacity", "scheduler decayed too early"),
       ("the LR at the plateau", "the scheduler", "a larger model or longer warm phase")),
    _e("oscillation", "curve", "the loss swings up and down without settling, with a weak trend",
       ("LR too high without diverging",),
       ("reduce the LR ×3", "add warmup")),
    _e("overfitting", "curve", "training loss keeps falling while validation loss passes its minimum and rises",
       ("too little regularisation", "too many epochs for the data"),
       ("early stopping at the crossover", "weight decay, dropout, augmentation")),
    _e("distribution_mismatch", "curve", "training loss falls but validation loss is flat from the start",
       ("preprocessing applied to train but not val", "different normalisation or tokenisation"),
       ("the validation pipeline against the training one",)),
    _e("underfitting", "curve", "train and val both stall high together, close to each other",
       ("too little capacity", "LR", "too much regularisation", "too short training"),
       ("model size", "LR", "regularisation", "train longer")),
    _e("val_noise", "curve", "the validation metric jumps around much more than training",
       ("validation set too small", "random augmentation on validation", "model.eval() missing"),
       ("the validation set size", "the validation transforms", "model.eval() before validation")),
    _e("initial_loss_mismatch", "curve", "the first loss is far from log(C) for a C-class cross-entropy",
       ("softmax before CrossEntropyLoss (double softmax)", "bad final-layer init", "label leakage"),
       ("the loss function's input (logits, not probabilities)", "the final layer's init")),
    _e("grokking", "curve", "train accuracy/loss saturates long before validation suddenly improves",
       ("informational: delayed generalisation",),
       ("keep training", "weight decay")),
    _e("exploding_gradients", "gradient", "the gradient norm jumps by orders of magnitude or grows exponentially",
       ("no gradient clipping", "LR too high", "missing normalisation", "broken residual paths"),
       ("gradient clipping", "the LR", "normalisation layers", "residual paths")),
    _e("vanishing_gradients", "gradient",
       "early layers' gradient norms are orders of magnitude below later layers', or the global norm collapses to 0",
       ("saturating activations (sigmoid/tanh)", "init", "missing residual connections or normalisation"),
       ("activations", "init", "residual connections", "normalisation")),
    _e("frequent_clipping", "gradient", "the pre-clip gradient norm exceeds the clip threshold on most steps",
       ("LR too high", "batch too small", "loss-scale problem"),
       ("the LR", "the batch size", "the clip threshold (a healthy clip rate is a few percent)")),
    _e("update_ratio_anomaly", "gradient", "‖Δw‖/‖w‖ per step outside about [1e-4, 1e-1]",
       ("LR per parameter group too small or too large", "frozen layers", "scheduler"),
       ("the LR of each parameter group", "the scheduler")),
    _e("weight_norm_growth", "gradient", "parameter norms grow without bound",
       ("missing weight decay", "feedback in the architecture", "LR"),
       ("weight decay", "the LR")),
    _e("weight_collapse", "gradient", "parameter norms collapse toward 0",
       ("too much weight decay", "dead units"),
       ("weight decay", "activations")),
    _e("frozen_parameters", "gradient", "parameters never change across checkpoints although the run trains",
       ("requires_grad=False left on", "parameters not passed to the optimizer"),
       ("requires_grad of the named parameters", "the optimizer's parameter groups")),
    _e("nonfinite_weights", "gradient", "NaN or Inf inside a checkpoint's tensors",
       ("a non-finite update (see nan_loss, exploding_gradients)",),
       ("the last finite checkpoint: the replay starting point",)),
    _e("dead_relu", "gradient", "a large fraction (> 0.5) of a ReLU layer's units are zero for every sample",
       ("LR too high", "init", "ReLU without normalisation"),
       ("the LR", "init", "LeakyReLU/GELU", "normalisation")),
    _e("saturated_activation", "gradient", "sigmoid/tanh outputs pinned near their bounds",
       ("missing normalisation", "init"),
       ("normalisation", "init")),
    _e("lr_schedule_anomaly", "gradient", "the logged LR does not follow a sane schedule",
       ("scheduler.step() placement (every micro-batch under gradient accumulation)", "scheduler not stepped",
        "no warmup", "LR jumps"),
       ("scheduler.step() placement", "gradient accumulation steps", "the scheduler's configured length")),
    _e("amp_overflow", "gradient", "the mixed-precision loss scale keeps falling or many optimizer steps are skipped",
       ("fp16 overflow in activations or loss", "input scale"),
       ("bf16 instead of fp16", "softmax/loss in fp32", "the input scale")),
    _e("bad_batch", "data", "a saved batch holds NaN/Inf or extreme outliers",
       ("the data pipeline for those samples",),
       ("the named samples", "the data pipeline")),
    _e("throughput_drop", "data", "step time jumps or degrades: stalls, slowdowns, periodic pauses",
       ("dataloader stalls", "checkpointing", "host-to-device copies", "memory pressure"),
       ("the dataloader (workers, I/O)", "checkpoint frequency", "memory")),
    _e("memory_growth", "data", "memory use grows steadily over steps",
       ("storing loss tensors instead of loss.item()", "growing caches"),
       ("tensors kept across steps (loss.item())", "caches")),
    _e("masked_nonfinite", "logging", "the logs hide non-finite values (e.g. HF's logging_nan_inf_filter)",
       ("HF Trainer's logging_nan_inf_filter replacing NaN/Inf losses", "loss logged as 0.0 next to a NaN grad norm"),
       ("treat the first such step as the NaN onset and replay it", "logging_nan_inf_filter=False")),
    _e("resumed_run", "logging", "the run was restarted from a checkpoint: steps go backwards or repeat",
       ("a restart from a checkpoint",),
       ("which segment the other findings refer to", "whether the resume restored optimizer and scheduler state")),
    _e("sampled_log", "logging", "the series is a down-sampled export, so spikes and the exact NaN step may be missing",
       ("a UI CSV export", "a reservoir-sampled reader"),
       ("ingest the raw event files or the run directory instead",)),
)

BY_KIND: dict[str, Entry] = {e.kind: e for e in ENTRIES}
KINDS: tuple[str, ...] = tuple(BY_KIND)

# Catalog kinds no detector covers yet, and why (DECISIONS.md §7: listed here, never a stub detector).
NOT_YET_DETECTED: dict[str, str] = {
}

# Computing these from a checkpoint plus a saved batch needs running the model, which analyze never does
# (DECISIONS.md §7); replay runs the model but does not compute these per-layer statistics yet.
NEEDS_REPLAY = ("computing it from a checkpoint and a saved batch means running the model, which analyze never "
                "does")


# First checks that send the user to `forensics replay`, and what each says instead where the run has no finite
# checkpoint a replay could start from (forensics.services.analysis applies it: the advice follows the checkpoints).
WITHOUT_CHECKPOINT: dict[str, str] = {
    "the last finite checkpoint and the batch of the NaN step (replay the step)":
        "the batch of the NaN step (no finite checkpoint before it to replay from: save checkpoints with optimizer "
        "state next time)",
    "the last finite checkpoint: the replay starting point":
        "no finite checkpoint with a known step comes before it: save checkpoints with their step and optimizer "
        "state next time, so a replay can start from one",
    "treat the first such step as the NaN onset and replay it":
        "treat the first such step as the NaN onset (no finite checkpoint before it to replay from)",
}


def without_replay(checks: tuple[str, ...]) -> tuple[str, ...]:
    """`checks` with the advice to replay replaced by what to do without a checkpoint to replay from."""
    return tuple(WITHOUT_CHECKPOINT.get(c, c) for c in checks)


def entry(kind: str) -> Entry:
    """The catalog entry of `kind`; KeyError names the valid kinds."""
    try:
        return BY_KIND[kind]
    except KeyError:
        raise KeyError(f"{kind!r} is not a catalog kind; kinds: {', '.join(KINDS)}") from None
