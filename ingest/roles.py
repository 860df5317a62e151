"""Normalised roles for series names from the many naming conventions in the wild.

`loss`, `train/loss`, `Loss/train`, `train_loss_epoch`, `eval_loss`, `val/loss`, `grad_norm`,
`learning_rate`, `lr-AdamW`, `grad_norm/fc1.weight`, ... each map to a role the detectors ask for.
A name is split into lower-case words; the split (train/val/test) and the quantity are read from the words,
and for per-layer statistics whatever is left of the name is the layer.

Roles: train_loss, val_loss, accuracy, val_accuracy, grad_norm, layer_grad_norm, weight_norm,
layer_weight_norm, update_ratio, lr, loss_scale, skipped_steps, memory, throughput, step_time, epoch, dead_fraction,
saturated_fraction, clip_rate, clip_threshold, launch, other.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import PurePath

from ingest.languages import TERMS, english, fold

_WORD = re.compile(r"[a-z]+|[0-9]+|[^\W\d_a-zA-Z]+")  # a word of another script too (`整体测试集上的Loss`: a qualifier)
_SEPARATORS = re.compile(r"[/|:]")
_DECIMAL = re.compile(r"\d+\.\d+")
# A rate written as its unit (`s/it`, `ms/batch`, `sec/step`, `it/s`, `samples/sec`): time per step, or steps
# (samples, tokens) per second. The console reader names a value printed with such a unit and no key by its unit.
_TIME_PER_STEP = re.compile(r"^(?:.*\W)?(?:ms|s|sec|secs|seconds?)\s*/\s*(?:it|iter|iters|iteration|step|batch|update)$", re.I)
_PER_SECOND = re.compile(
    r"^(?:.*\W)?(?:it|its|iters?|steps?|batch(?:es)?|samples?|tokens?|toks?|imgs?|images?|words?|wps|ex|examples?)"
    r"\s*/\s*(?:s|sec|second)$", re.I)
# Words that name a loss without the word `loss`: cross-entropy (`CrossEntropy`, `Train-CrossEntropy`,
# `xent`), negative log-likelihood, and a loss word with a one- or two-letter qualifier glued on (`closs`,
# LLaMA2-Accessory's; `dloss`): the qualifier makes it a component, not the run's main loss.
_GLUED_LOSS = re.compile(r"^[a-z]{1,2}loss$")
_SUM_OF = re.compile(r"\s*\(sum of [^)]*\)$")

SPLIT_WORDS = {
    "train": "train", "training": "train", "trn": "train",
    "val": "val", "valid": "val", "validation": "val", "eval": "val", "evaluation": "val", "dev": "val",
    "cv": "val",  # a speech toolkit's held-out pass (Kaldi, ESPnet, WeNet: `CV Batch 4/0 loss 28.5`, `cv_loss`)
    "vali": "val",  # Time-Series-Library's `Vali Loss` (and the forecasting repos built on it)
    "test": "test", "testing": "test",
    "validating": "val", "evaluating": "val",  # a line that says what it is doing (`validating ... loss: 0.07`)
    # a federated loop's server evaluates the aggregated model, it trains nothing (`server stats: [loss: 1.92`,
    # Flower's `losses_centralized`): its loss is a held-out one
    "server": "val", "centralized": "val",
}
# What an epoch did (`Epoch 3 trained with loss: 0.02`, `Epoch 3 evaluated with loss: 0.0003`): the split of the
# quantity it names, never a quantity alone (`trained=0.000, tested=0.000` counts trials, not losses).
SPLIT_PARTICIPLES = {"trained": "train", "evaluated": "val", "validated": "val", "tested": "test"}
SPLIT_WORDS |= SPLIT_PARTICIPLES
# Words of a clipping threshold's name beside `clip` (`grad_clip`, `clip_threshold`, `max_grad_clip`).
CLIP_THRESHOLD_WORDS = {"clip", "grad", "grads", "gradient", "gradients", "threshold", "thresh", "max"}
# Words that say when a gradient norm was taken around clipping (`train/grad_norm_preclip`,
# `grad_norm_before_clip`): a qualifier, not a layer. Before clipping is the norm clip_grad_norm_ returns (the
# run's gradient norm); after it, a value capped at max_norm.
CLIP_WORDS = {"clip", "clipping", "preclip", "pre", "before", "unclipped", "raw", "after", "post", "postclip",
              "clipped"}
AFTER_CLIP_WORDS = {"after", "post", "postclip", "clipped"}
# Namespaces a logger puts statistics under (`optimizer/grad_norm`, `metrics/grad_norm`): not layers either.
NAMESPACE_WORDS = {"optimizer", "optim", "metrics", "stats"}
# Words that make a norm a statistic of norms (across layers, or over a logging window: `max_grad_norm`,
# `grad_norm/std`) or name the clipping threshold HF's TrainingArguments calls `max_grad_norm`: neither a layer
# nor the run's gradient norm, so such a series is `other` (its numbers stay in the store and the app).
AGGREGATE_WORDS = {"max", "min", "maximum", "minimum", "std", "stdev", "var", "variance", "median", "p50", "p90",
                   "p95", "p99"}
# Words that qualify a statistic without naming a layer (`train_loss_epoch`, `loss/avg`, ...).
NEUTRAL_WORDS = {"step", "epoch", "avg", "mean", "total", "global", "overall", "running", "smoothed", "ema",
                 "value", "s", "per", "batch", "iter", "sum", "all", "of", "history"}


@dataclass(frozen=True)
class Role:
    role: str
    split: str | None = None
    layer: str | None = None
    canonical: bool = False  # the run's main series of this role (`loss`, not `recon_loss`)


_GLUED_LOSS = re.compile(r"(?<=[A-Za-z0-9])(?=loss(?![a-z]))")  # `Totalloss`, `CTCloss`: a loss glued to its name


def words(name: str) -> list[str]:
    """Lower-case words of a name, with camelCase split (`memoryAllocated` -> memory, allocated;
    `IDLoss` -> id, loss), a lower-case `loss` glued to the word before it cut off (`Totalloss` -> total, loss), and
    the words of other languages read as their English words (`ingest.languages`: `当前损失值` -> loss, `Pérdida` ->
    loss, `validare` -> val)."""
    if not name.isascii():
        for term, word in TERMS:
            name = name.replace(term, f" {word} ")
        name = fold(name)
    name = _GLUED_LOSS.sub(" ", name)
    spaced = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name))
    return [english(w) for w in _WORD.findall(spaced.lower())]


@functools.lru_cache(maxsize=8192)  # a console reader asks once per name per line
def role_of(name: str) -> Role:
    """The role of a series from its name (as shown: TensorBoard sub-folder + tag)."""
    if name.endswith(("__MIN", "__MAX")):
        return Role("other")  # W&B UI exports' companions of a down-sampled column: extremes, not the series
    w = words(_SUM_OF.sub("", name))  # `train/loss (sum of box_loss, cls_loss)`: the sum a table reader made
    # A name with a train word and a val/test word (`training_history/val_loss`) names the held-out split
    splits = [SPLIT_WORDS[x] for x in w if x in SPLIT_WORDS]
    split = next((s for s in splits if s != "train"), splits[0] if splits else None)
    rest = ["loss" if x == "losses" else x for x in w if x not in SPLIT_WORDS]  # `Losses x`: a part of the loss
    ws = set(rest)
    is_val = split in ("val", "test")

    def layer() -> str | None:
        # Per-layer series put the layer in its own path segment: `grad_norm/fc1.weight`, `activations/fc1/dead_fraction`.
        segments = [s for s in _SEPARATORS.split(name) if s]
        for s in segments:
            # `grad_2.0_norm_total`: a decimal number is the norm's order, not a layer (`0.weight` is one)
            seg_words = set(words(_DECIMAL.sub(" ", s)))
            if seg_words and not seg_words <= (QUANTITY_WORDS | NEUTRAL_WORDS | CLIP_WORDS | NAMESPACE_WORDS
                                                | AGGREGATE_WORDS | set(SPLIT_WORDS)):
                return s
        return None

    scale_loss = len(rest) > 2 and rest[-1] == "loss" and "scale" in rest[1:-1]  # YOLO's `BoxScaleLoss`: a loss term
    if not scale_loss and ("scale" in ws and ("loss" in ws or "grad" in ws or "scaler" in ws or ws & SCALER_WORDS
                                              or ws == {"scale"}) or "scaler" in ws):
        # a scaler's setting (`min_loss_scale`, `loss_scale_window`, `initial_loss_scale`) is no scale it reached
        return Role("other" if ws & (AGGREGATE_WORDS | SCALER_SETTING_WORDS) else "loss_scale", split)
    if ws & {"skipped", "skip"} and ws & {"iterations", "iteration", "iters", "iter", "steps", "step", "updates"}:
        # Megatron's `number of skipped iterations: 3` (per log interval): optimizer steps an fp16 overflow skipped
        return Role("skipped_steps", split)
    if _names_loss(name, ws) and ws & (AGGREGATE_WORDS | SETTING_WORDS):
        # `min_loss`, `best_loss` (a running extreme), `LOSS_WEIGHT`, `FOCAL_LOSS_GAMMA`, `l1_w` (a config's
        # setting, printed in its dump): numbers about a loss, not the loss
        return Role("other", split)
    if "cost" in ws and ws & PIPELINE_WORDS:
        # PaddlePaddle's `batch_cost`, `reader_cost`, `data_cost` (`avg_batch_cost: 0.89 s`): the seconds a batch or
        # its data loading took, no loss (a log whose only loss-like value is a batch's cost has it taken by
        # `loss_by_elimination`)
        return Role("other", split)
    if _PRINTED_LOSS.match(name) or ws & LOSS_NAMES and not ws & ({"time", "mem", "memory"} | TIME_UNITS | MEMORY_UNITS) \
            and not _MEMORY_UNIT_LAST.search(name) or {"smooth", "l"} <= ws \
            or {"td", "error"} <= ws:
        # names a loss without the word: an objective's own name (`cost`, `objective`, `energy`),
        # a loss function's (`SmoothL1`, `huber`, `bce`, `ctc`, `focal`), BasicSR's `l_pix`, a critic's `TD Error`;
        # not a duration (MXNet's `Time cost=140.9`) nor memory (`GPU_mem cost 3806 MB`)
        return Role("val_loss" if is_val else "train_loss", split, canonical=False)
    if ws & {"loss", "losses"} or "nll" in ws or {"cross", "entropy"} <= ws or ws & {"xent", "crossentropy", "logloss"}:
        extra = ws - {"loss", "losses", "cross", "entropy", "xent", "crossentropy"} - NEUTRAL_WORDS
        # a held-out loss per evaluation batch (Lightning's `val_loss_step`) is not the run's validation loss
        return Role("val_loss" if is_val else "train_loss", split, canonical=not extra and not (is_val and "step" in ws))
    if any(_GLUED_LOSS.match(x) for x in ws):
        return Role("val_loss" if is_val else "train_loss", split)
    if ws & {"acc", "accuracy", "top1", "top"}:
        return Role("val_accuracy" if is_val else "accuracy", split, canonical=True)
    if "lr" in ws or {"learning", "rate"} <= ws:
        return Role("lr", split, canonical=True)
    if ws & {"dead"} and ws & {"fraction", "frac", "ratio", "rate"}:
        return Role("dead_fraction", split, layer=layer())
    if ws & {"saturated", "saturation"}:
        return Role("saturated_fraction", split, layer=layer())
    if ws & {"grad", "grads", "gradient", "gradients"} and ws & {"norm", "norms", "l2"} or ws & {"gradnorm", "gnorm"} \
            or ws == {"total", "norm"}:  # clip_grad_norm_'s return value, logged under its own name
        lay = layer()
        if ws & AGGREGATE_WORDS and lay is None:
            return Role("other", split)
        return Role("layer_grad_norm" if lay else "grad_norm", split, layer=lay,
                    canonical=lay is None and not ws & AFTER_CLIP_WORDS)
    if ws & {"update", "updates"} and ws & {"ratio", "ratios"}:
        return Role("update_ratio", split, layer=layer())
    if ws & {"weight", "weights", "param", "params", "parameter", "parameters"} and ws & {"norm", "norms", "l2"}:
        lay = layer()
        if ws & AGGREGATE_WORDS and lay is None:
            return Role("other", split)
        return Role("layer_weight_norm" if lay else "weight_norm", split, layer=lay, canonical=lay is None)
    if _TIME_PER_STEP.match(name):
        return Role("step_time", split)
    if _PER_SECOND.match(name):
        return Role("throughput", split)
    if ws & {"memory", "mem", "rss", "vram"} or (ws & MEMORY_UNITS or _MEMORY_UNIT_LAST.search(name)) \
            and not ws & QUANTITY_WORDS:
        # memory said to be in use (procps free's `used`, nvidia-smi's `memory.used`) before the host's total or free
        return Role("memory", split, canonical=bool(ws & {"used", "usage"}))
    if ws & {"throughput", "samples", "tokens", "it"} and ws & {"per", "second", "sec", "s", "throughput"} \
            or ws == {"speed"}:  # MXNet's Speedometer: `Speed: 512 samples/sec`
        return Role("throughput", split)
    if {"step", "time"} <= ws or {"iter", "time"} <= ws or {"batch", "time"} <= ws or {"epoch", "time"} <= ws \
            or "dt" in ws and ws <= {"dt", "iter", "step", "batch"} | TIME_UNITS \
            or "time" in ws and ws <= {"time"} | TIME_UNITS or "itime" in ws and ws <= {"itime"} | TIME_UNITS:
        # a bare `Time` column (PyTorch's ImageNet example and its descendants: deepspeech.pytorch, MAE, timm's
        # `Time`; nanoGPT's `time 1099.34ms`) is the time of the step it is printed on; a clock that only grows
        # (elapsed time under the same name) is told apart by its values, where step times are read; `itime` is
        # the iteration's time beside its data-read `rtime` (PIPs)
        return Role("step_time", split)
    if rest == ["epoch"]:
        return Role("epoch", split)
    if name == "launch":  # the console reader's mark of a launch appended to its log (`ingest.console.LAUNCH_TAG`)
        return Role("launch", split)
    if not rest and len(splits) == 1 and not set(w) & SPLIT_PARTICIPLES.keys():
        # a value named by its split alone (build-nanoGPT's `N train X`, `N val X`): the split's loss, the quantity
        # a split stands for when nothing else is named
        return Role("val_loss" if is_val else "train_loss", split, canonical=False)
    if set() < ws - NEUTRAL_WORDS <= DETECTION_LOSS_WORDS or _GAN_LOSS.match(name) \
            or splits and len(rest) == 1 and rest[0] in GAN_NETWORK_WORDS:
        # a detector's loss components printed without the word (`box`, `obj`, `cls`, `dfl` columns), and a GAN's
        # per-network losses (`D_A`, `G_A`, `d_real`, `g_adv`, `errD`, `d`, `gen`; under a split's name, `train_G`,
        # `val_D`, `G_train`): each a part of the training loss
        return Role("val_loss" if is_val else "train_loss", split, canonical=False)
    if {"clip"} < ws - NEUTRAL_WORDS <= CLIP_THRESHOLD_WORDS:
        # `grad_clip`, `clip_threshold`: the norm gradients are clipped to, logged beside the norm it clipped (Caffe's
        # `Gradient clipping: scaling down gradients (L2 norm 5120.3 > 35)`, read as `grad_norm` and `grad_clip`)
        return Role("clip_threshold", split, canonical=True)
    if ws - NEUTRAL_WORDS == {"clip"} or ws & {"clip", "clipped"} and ws & {"pct", "percent", "percentage"}:
        # fairseq's `clip`: the percentage of updates whose gradient norm was clipped (`clip=100%`); a bare
        # `grad_clip` is a threshold, and PPO's `clip_fraction` counts clipped policy ratios: neither is this
        return Role("clip_rate", split, canonical=True)
    return Role("other", split)


# A loss named in none of the ways above, as a formula writes it: the letter L alone or with a subscript (`L`, `Le`,
# `L_rec`), the error E alone, or a term that is a loss by what it measures (`rec`, `kl`, `mse`, a batch's `cost`).
# And a value under the training split's name whose quantity no role knows (`Train_rf`). Read as the training loss
# only where a log names no loss at all and one such value is printed on every training record
# (`ingest.run.loss_by_elimination`): alone, such a name says too little.
LOSS_TERMS = {"rec", "recon", "reconstruction", "kl", "kld", "mse", "mae", "rmse", "ce", "bce", "nll", "xent", "obj",
              "cost"}
# Words of a score that is higher when the model is better (an evaluation's accuracy, AUC, mAP, F1, Dice): on a
# held-out split, the curve a user reads where no held-out loss is logged.
SCORE_WORDS = {"acc", "accuracy", "top1", "f1", "auc", "bleu", "rouge", "map", "iou", "miou", "precision", "recall",
               "psnr", "ssim", "dice"}
# What an agent's logger reports beside its losses: the episode reward or return (`EpRewMean`, `ep_rew_mean`,
# `mean 100 episode reward`, `AverageReturn`), never a loss.
REWARD_WORDS = frozenset({"reward", "rewards", "rew"})
RETURN_WORDS = frozenset({"return", "returns"})
# Words of a reinforcement-learning objective's name (`policy_loss`, `pg_loss`, `loss_pol_surr`, `vf_loss`,
# `value loss`, `SurrogateLoss`, `actor_loss`, `critic_loss`, `q_loss`, `qf1_loss`, `TD error`, `entropy loss`).
RL_OBJECTIVE_WORDS = frozenset({"policy", "pol", "pg", "surr", "surrogate", "actor", "vf", "value", "critic", "q",
                                "qf", "td", "entropy", "ent"})
POLICY_WORDS = frozenset({"policy", "pol", "pg", "surr", "surrogate", "actor"})
VALUE_WORDS = frozenset({"vf", "value", "critic", "q", "qf", "td"})
# A KL divergence's words: a VAE's loss term, but beside an agent's reward the size of a policy update (TRPO's, ACKTR's,
# PPO's KL between the old and the new policy), which a trust region holds near its target: no loss.
KL_WORDS = frozenset({"kl", "kld"})
# Words of a score, a count or a duration: a value named by one is no loss, whatever else its name says.
NOT_LOSS_WORDS = SCORE_WORDS - {"acc", "accuracy", "top1"} | {
    "score", "reward", "return", "ppl", "perplexity", "wer", "cer", "samples", "examples", "tokens", "size", "count",
    "n", "num", "images", "id", "seed", "gpu", "rank", "time", "eta", "elapsed", "speed"}


def loss_like(name: str) -> bool:
    """Whether a series the roles call `other` may be a training loss by its name (see LOSS_TERMS)."""
    r = role_of(name)
    if r.role != "other" or r.split in ("val", "test"):
        return False
    rest = [x for x in words(name) if x not in SPLIT_WORDS and x not in NEUTRAL_WORDS and not x.isdigit()]
    if not rest or (set(rest) | set(re.findall(r"[a-z0-9]+", name.lower()))) & NOT_LOSS_WORDS:  # `f1` is one word here
        return False
    # `L`, `Le`, `L_rec`; and `E` alone, the error a formula minimises (DyNet's trainers print `E = 0.74376`)
    letter = rest[0] == "l" or len(rest[0]) == 2 and rest[0][0] == "l" and len(rest) == 1 or rest == ["e"]
    return letter or bool(set(rest) & LOSS_TERMS) or r.split == "train"


RECONSTRUCTION_WORDS = frozenset({"rec", "recon", "reconstruction"})


def objective_among(names: list[str]) -> str | None:
    """Of several names that may each be the loss (`loss_like`) in a log that names none, the one that is its
    objective where their names say so: a bare `L` beside its terms `L_<term>` (ℒ = ℒ_crf + ℒ_selection, printed as
    `L: 2011.79, L_crf: 43.19, L_selection: 1968.59`), or a lone reconstruction term beside a KL (a VAE's data term;
    the KL is the regulariser, rising as the posterior learns). None otherwise: which one is minimised is a guess."""
    ws = {n: [w for w in words(n) if w not in NEUTRAL_WORDS and w not in SPLIT_WORDS] for n in names}
    bare = [n for n in names if ws[n] == ["l"]]
    if len(bare) == 1 and len(names) > 1 and all(ws[n][:1] == ["l"] and len(ws[n]) > 1 for n in names if n != bare[0]):
        return bare[0]
    recon = [n for n in names if ws[n] and set(ws[n]) <= RECONSTRUCTION_WORDS]
    if len(recon) == 1 and len(names) > 1 and all(ws[n] and set(ws[n]) <= KL_WORDS for n in names if n != recon[0]):
        return recon[0]
    return None


# Words of a perplexity (`ppl`, `perplexity=`, `train_perplexity`, `Validation-perplexity`): e to the cross-entropy, the
# objective a language-model or seq2seq trainer prints in place of its loss, on a scale of its own (1 is a loss of 0).
PERPLEXITY_WORDS = {"perplexity", "ppl"}
# Words that name a loss function (`train_mse_step`, `val_mae`, `l1`): a training series so named is the loss a run
# that names no loss minimises. Not a score computed from it (`rmse`), nor one of another kind (accuracy, F1, AUC).
LOSS_FUNCTION_WORDS = {"mse", "mae", "l1", "l2", "nll", "bce", "ce", "xent", "crossentropy", "huber", "smoothl1"}


def _named_only_by(name: str, vocabulary: set[str]) -> bool:
    """Whether a name's words, less its split's and neutral ones (`train_`, `_step`), are all of `vocabulary`; a word
    with its digits (`l1`) counts whole."""
    for ws in (words(name), re.findall(r"[a-z0-9]+", name.lower())):
        rest = {x for x in ws if x not in SPLIT_WORDS and x not in NEUTRAL_WORDS}
        if rest and rest <= vocabulary:
            return True
    return False


def is_perplexity(name: str) -> bool:
    """Whether a series is a perplexity (`ppl`, `train_perplexity`, `Validation-perplexity`), e^loss: taken as the
    training loss where a run prints no loss (`ingest.run.loss_named_otherwise`), it is never compared with a log-level
    (ln C, a loss of exactly 0); its ln is the loss."""
    return _named_only_by(name, PERPLEXITY_WORDS)


def names_loss_function(name: str) -> bool:
    """Whether a series is named by a loss function alone (`train_mse_step`, `mae`), split and neutral words aside."""
    return _named_only_by(name, LOSS_FUNCTION_WORDS)


# Parts of a training step whose `cost` is a duration, not the objective (`batch_cost`, `reader_cost`, `data_cost`).
PIPELINE_WORDS = {"batch", "reader", "data"}
LOSS_NAMES = {"cost", "objective", "energy", "smoothl1", "huber", "bce", "ctc", "focal"}
# BasicSR's `l_pix`, `l_g_gan`. Not `score`: DL4J's score is its loss, but an agent's score is its reward.
_PRINTED_LOSS = re.compile(r"^l_[a-z]\w*$")
# Words that make a loss-named number a setting of the loss, not its value (`loss_weight`, `FOCAL_LOSS_GAMMA`).
# Mixed precision's words beside `scale` (`amp/scale`, `fp16_scale`, DeepSpeed's `cur_scale`), and the words of a
# dynamic loss scaler's settings (DeepSpeed's `loss_scale_window`, `initial_scale_power`, `hysteresis`).
SCALER_WORDS = {"amp", "fp", "half", "cur", "current", "dynamic"}
SCALER_SETTING_WORDS = {"window", "initial", "init", "power", "hysteresis", "growth", "backoff", "interval"}
SETTING_WORDS = {"weight", "weights", "w", "coef", "coeff", "coefficient", "beta", "alpha", "gamma", "lambda", "type",
                 "freq", "power", "factor", "num", "threshold", "thresh", "eps", "temperature", "margin", "best"}
DETECTION_LOSS_WORDS = {"box", "obj", "cls", "dfl", "giou", "ciou", "objectness", "kpt"}
# A GAN's network named by its letter or short name, alone or with a qualifier (`D_A`, `d_real`, `G_l1`, `errD`, `gen`);
# Torch7's dcgan.torch prints its two BCE errors as `Err_G` and `Err_D`.
GAN_NETWORK_WORDS = {"g", "d", "gen", "disc", "generator", "discriminator", "critic"}
_GAN_LOSS = re.compile(r"^(?:[DdGg](?:_[A-Za-z][A-Za-z0-9]*)?|[Ee]rr_?[DG]|(?:gen|disc|netD|netG)(?:_[A-Za-z0-9]+)?)$")


def _names_loss(name: str, ws: set[str]) -> bool:
    return bool("loss" in ws or "nll" in ws or ws & LOSS_NAMES or _PRINTED_LOSS.match(name) or _GAN_LOSS.match(name))


# A value the console reader read with a memory unit and no quantity word in its key (`current 0.3 GB`,
# `peak 2.1 GB`) carries the unit in its tag (`current GB`).
TIME_UNITS = {"ms", "s", "sec", "secs", "second", "seconds"}
MEMORY_UNITS = {"kb", "mb", "gb", "tb", "kib", "mib", "gib", "tib"}
_MEMORY_UNIT_LAST = re.compile(r"(?:^|[\s_(])[KMGTP]i?B\)?$|(?:^|[\s_(])[kmg]i?b\)?$")  # `peak GiB`: words() splits GiB
QUANTITY_WORDS = {
    "loss", "losses", "acc", "accuracy", "lr", "learning", "rate", "grad", "grads", "gradient", "gradients", "norm",
    "norms",
    "l2", "weight", "weights", "param", "params", "parameter", "parameters", "update", "updates", "ratio", "ratios",
    "dead", "fraction", "frac", "saturated", "saturation", "activation", "activations", "act", "gradnorm", "gnorm",
}


def stem_tag(path: PurePath) -> str | None:
    """The name bare values take: the file's own name where it names a quantity (`loss.txt`, `train_loss.log`), or
    an agent's reward or return (`reward_log.txt`: its values are that, not the loss a file named for nothing holds)."""
    stem = path.name.split(".")[0]
    named = any(w not in SPLIT_WORDS for w in words(stem))  # `train.log` names a split, not a quantity
    return stem if named and (role_of(stem).role != "other" or set(words(stem)) & (REWARD_WORDS | RETURN_WORDS)) \
        else None
