"""The detector contract: a frozen dataclass with a catalog `kind`, the series it `requires`, typed thresholds, and
`check(run) -> Iterator[Finding]`; optionally `unavailable(run) -> str | None` for reasons beyond a missing series."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import ClassVar, Protocol

import numpy as np
import polars as pl

from forensics.judge import catalog, numbers, stats
from forensics.judge.findings import Finding
from forensics.judge.run import Run
from ingest.announcements import NONFINITE_GRAD, NONFINITE_LOSS
from ingest.roles import (AGGREGATE_WORDS, POLICY_WORDS, RETURN_WORDS, REWARD_WORDS, SCORE_WORDS, SETTING_WORDS,
                          VALUE_WORDS, is_perplexity, words)


# Where a kind sits in the chain from cause to symptom, each detector's `stage` (lower comes first; the verdict's
# headline rule reads it). Upstream: settings, data and the state of the weights; then the mechanism by which a run
# breaks; then what the loss curve and the checkpoints show; last the non-finite values everything ends in.
UPSTREAM, MECHANISM, SHAPE, NONFINITE = 0, 1, 2, 3


class Detector(Protocol):
    """What the engine, the verdict and watch know of a detector, all read from its class (never a list kept
    elsewhere): `kind` (the catalog id), `requires` (logical series), `stage` (above); and, where true,
    `reads_curve` (judges the shape of the training-loss curve: a run none of these could read is not judged),
    `joins_chain` (a finding whose step range holds a NaN is one event with it; `reach(finding)`, where defined, the
    wider range of steps its cause lies in, over which it joins other chain findings), `nonfinite` (a non-finite value:
    the step replay starts from), `reads_loss_level` (not on a GAN's adversarial losses), `reads_validation_alone`
    (where no training loss was read, judges the validation loss as validation), `judges_gan_pair` (where a GAN logs
    both its losses, reads them as a pair: `detectors.adversarial`), `yields_to` (kinds that, when they fire, already
    say what this one would: one stall is reported once, by the engine's `drop_restated`; `restates(finding,
    findings)` where the answer depends on the findings' evidence), `reads_shape` (judges the
    trend or level of the training-loss curve: the engine hands it `epoch_view`, the epoch aggregate where one is
    logged beside per-step values; spike, noise and pace detectors read the per-step series), `reads_pairs` (reads a
    training and a validation loss side by side: the engine also hands it each part of a loss of several parts,
    `Run.loss_pairs`), `reads_parts` (reads single records of the training loss: also each part of a loss logged only
    as parts, `Run.loss_parts`)."""

    kind: ClassVar[str]
    requires: ClassVar[tuple[str, ...]]
    stage: ClassVar[int]

    def check(self, run: Run) -> Iterator[Finding]: ...


def missing_reason(detector: Detector, run: Run) -> str | None:
    """Why `detector` cannot run on `run` (a required series is missing, the training loss is adversarial and
    the detector reads its level, or its own `unavailable`), else None."""
    for need in detector.requires:
        if not run.has(need):
            return run.missing_message(need)
    if getattr(detector, "reads_loss_level", False) or getattr(detector, "reads_curve", False):
        rl = reinforcement_learning(run)
        if rl is not None and not getattr(detector, "judges_rl", False):
            return rl_reason(rl)
    gan = gan_pair(run) if getattr(detector, "reads_loss_level", False) or getattr(detector, "reads_curve", False) \
        else None
    if gan is not None and not getattr(detector, "judges_gan_pair", False):
        return (f"a GAN run (it logs {gan.generator} and {gan.discriminator}): its losses are the two sides of an "
                f"adversarial game, not a training loss that should fall, so their level and shape are judged as a "
                f"pair (divergence: the discriminator wins), not one by one; non-finite values in them still are")
    if getattr(detector, "reads_loss_level", False) and gan is None:
        why = adversarial_loss(run)
        if why:
            return why
    own = getattr(detector, "unavailable", None)
    return own(run) if own is not None else None


# One side of a GAN: `Generator loss`, `Loss_D`, `disc_loss`, `critic_loss`, `g_loss`, `loss_G_GAN`. Not `adv_loss`:
# adversarial *training* (PGD, FGSM) gives that name to its loss on perturbed samples, which falls like any other.
ADVERSARIAL_WORDS = frozenset({"generator", "discriminator", "gen", "disc", "critic", "gan"})


def adversarial_loss(run: Run) -> str | None:
    """A skip reason when the training loss the detectors would read is one side of an adversarial game (a GAN's
    generator, discriminator or critic loss, and no plain loss beside it). Those losses hold an equilibrium by
    design (a discriminator near 2·ln 2, a generator near its own level): a flat, stalled, rising or swinging
    level is how a GAN trains, not a finding, so the detectors that judge the loss's level (`reads_loss_level`)
    do not read it. Non-finite values and spikes in it are still evidence, and are still read."""
    from ingest.roles import NEUTRAL_WORDS, SPLIT_WORDS, words

    name = run.pick("loss")
    if name is None:
        return None
    rest = set(words(name)) - {"loss", "losses"} - NEUTRAL_WORDS - set(SPLIT_WORDS)
    if rest & ADVERSARIAL_WORDS or rest in ({"g"}, {"d"}):
        return (f"the training loss, {name}, is one side of an adversarial game (a GAN's generator or "
                f"discriminator): its level holds an equilibrium by design, so its level is not judged")
    return None


# A side of the game by the words of its series' name, once `loss`, a split and neutral words are set aside:
# `Loss_G`, `g_loss`, `errG`, `gen_loss`, `Generator loss`, `loss_G_GAN`, `netG`; `Loss_D`, `d_loss`, `errD`,
# `disc_loss`, `loss_dis`, `Discriminator loss`, `loss_D_real`. A critic is no discriminator here: actor-critic RL uses the word.
GENERATOR_WORDS = frozenset({"g", "gen", "generator"})
DISCRIMINATOR_WORDS = frozenset({"d", "dis", "disc", "discriminator"})
@dataclass(frozen=True)
class GanPair:
    generator: str  # the generator's loss series
    discriminator: str  # the discriminator's loss series


def gan_pair(run: Run) -> GanPair | None:
    """The generator's and the discriminator's training-loss series where the run logs both, else None. Of several
    series of one side (`loss_G_GAN`, `loss_G_L1`), the one whose name says least besides the side (the side's
    total), then the one with the most points."""
    from ingest.roles import NEUTRAL_WORDS, SPLIT_WORDS, words

    sides: dict[str, list[tuple[int, int, str]]] = {"g": [], "d": []}
    # the usable series only (`Run.all_of`): a console copy beside a structured log's pair is not a third side
    rows = run.meta.filter(pl.col("name").is_in(run.all_of("train_loss"))).select("name", "n_points").iter_rows()
    for name, n in rows:
        ws = [w for w in words(name) if w not in {"loss", "losses", "err", "net"} | NEUTRAL_WORDS | set(SPLIT_WORDS)]
        side = [s for s, names in (("g", GENERATOR_WORDS), ("d", DISCRIMINATOR_WORDS)) if set(ws) & names]
        if len(side) == 1:
            sides[side[0]].append((len(ws), -(n or 0), name))
    if not sides["g"] or not sides["d"]:
        return None
    return GanPair(min(sides["g"])[2], min(sides["d"])[2])


# What an agent's logger reports beside its losses: the episode reward or return (`ingest.roles.REWARD_WORDS`,
# `RETURN_WORDS`; `Environment/Cumulative Reward`) and the episode length (`EpLenMean`).
EPISODE_WORDS = frozenset({"episode", "episodes", "ep"})
# A preference pair's implicit rewards (DPO's `rewards/chosen`, `rewards/margins`): a supervised loss's statistics.
PREFERENCE_WORDS = frozenset({"chosen", "rejected", "margin", "margins", "accuracies"})


@dataclass(frozen=True)
class RlRun:
    evidence: str  # the series that makes it an RL run (an episode reward, or the policy and value losses)
    objectives: tuple[str, ...]  # its training-loss series


def rl_reason(rl: RlRun) -> str:
    """Why the detectors that judge a training loss's level or shape leave an RL run's losses."""
    if not rl.objectives:
        return (f"a reinforcement-learning run that logs its reward ({rl.evidence}) and no loss: only the reward is "
                f"judged")
    return (f"a reinforcement-learning run (it logs {rl.evidence}): its losses ({_listed(rl.objectives)}) are "
            f"objectives against moving targets, not expected to fall, so their level and shape are not "
            f"judged; non-finite values in them still are")


# A reward's statistics beside it (`reward_std`, `frac_reward_zero_std`, `min_reward`): not the reward itself.
REWARD_STAT_WORDS = frozenset({"std", "frac", "zero", "min", "max", "var", "stddev", "median"})


def reward_series(run: Run) -> str | None:
    """The reward an RL run logs (`reward`, `ep_rew_mean`, `rewards/mean`, `Environment/Cumulative Reward`): of the
    series a reward or return word names, none of a statistic beside it (`REWARD_STAT_WORDS`), the one whose name says
    least, then the one with the most points; None without one."""
    from ingest.roles import words

    rows = [(len(words(name)), -(n or 0), name) for name, n in run.meta.select("name", "n_points").iter_rows()
            if set(words(name)) & (REWARD_WORDS | RETURN_WORDS) and not set(words(name)) & (PREFERENCE_WORDS
                                                                                          | REWARD_STAT_WORDS)]
    return min(rows)[2] if rows else None


def reinforcement_learning(run: Run) -> RlRun | None:
    """The run is a reinforcement-learning run, from the names of the series it logs, or None: an episode reward
    (not a preference pair's), or an episode return or length beside a policy or value objective, or a policy
    objective beside a value objective. An RL loss (policy gradient surrogate, value regression toward returns that
    grow, entropy bonus, TD error) chases targets that move with the policy: it is not expected to fall, and a flat,
    rising or swinging one is how an agent trains. The detectors that judge the training loss's level or shape do
    not read it; non-finite values and the mechanism detectors still do. Taken for none of the 123 labelled real runs
    of the three shared sets, none of which logs a reward (docs/engine.md)."""
    from ingest.roles import words

    losses, rewards, episodes, policy, value = [], [], [], [], []
    for name, role in run.meta.select("name", "role").iter_rows():
        ws = set(words(name))
        if role in ("train_loss", "val_loss"):
            losses.append(name)
            policy += [name] if ws & POLICY_WORDS else []
            value += [name] if ws & VALUE_WORDS else []
        elif ws & REWARD_WORDS and not ws & PREFERENCE_WORDS:
            rewards.append(name)
        elif ws & RETURN_WORDS or ws & EPISODE_WORDS:
            episodes.append(name)
    if not losses and not rewards:
        return None  # an agent that prints only its episode rewards (tabular Q-learning, evolution strategies) is one
    evidence = (rewards[0] if rewards else episodes[0] if episodes and (policy or value) else
                f"{policy[0]} and {value[0]}" if policy and value else None)
    named = list(dict.fromkeys(policy + value + losses))  # the policy's and the value's first, each name once
    return RlRun(evidence, tuple(named)) if evidence else None


# An agent's value (critic) loss that grows this many times from its first records to its last, on a trend, while
# its reward does not improve (`FlatLoss._reward_stands`): the critic diverges; a healthy value loss grows with the
# returns it regresses on, and those did not grow.
RL_VALUE_GROWTH = 4.0
RL_VALUE_POINTS = 10


def critic_grows(run: Run, rl: RlRun) -> dict | None:
    """The evidence of the first value objective of `rl` (a name with `VALUE_WORDS`) that is positive on
    `RL_VALUE_POINTS` finite records or more, whose last tenth's median (three records at least) is `RL_VALUE_GROWTH`
    × its first tenth's, with a rising Mann–Kendall trend (p < 0.01); None otherwise. Whether the reward improved is
    the caller's question."""
    for name in rl.objectives:
        if not set(words(name)) & VALUE_WORDS:
            continue
        steps, y = finite_part(*run.arrays(name))
        if y.size < RL_VALUE_POINTS or not np.all(y > 0):
            continue
        k = max(3, y.size // 10)
        head, tail = float(np.median(y[:k])), float(np.median(y[-k:]))
        trend = stats.mann_kendall(y, steps)
        if tail >= RL_VALUE_GROWTH * head and trend.z > 0 and trend.p < 0.01:
            return {"value_series": name, "value_head": head, "value_tail": tail, "value_growth": tail / head,
                    "value_points": int(y.size), "mann_kendall_p": float(trend.p), "first_step": int(steps[0]),
                    "last_step": int(steps[-1]), "edge_records": int(k)}
    return None


def _listed(names: tuple[str, ...], shown: int = 3) -> str:
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def finite_part(steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Points before the first non-finite value, finite ones only (what a curve looked like while alive)."""
    bad = ~np.isfinite(values)
    end = int(np.argmax(bad)) if bad.any() else values.size
    return steps[:end], values[:end]


def by_launch(run: Run, role: str, steps: np.ndarray, values: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """(steps, values) of `role`'s series cut where each launch appended to its log begins (`Run.launch_starts`):
    each launch judged on its own, no curve read across a fresh start. One piece for a log of one launch, or for
    points that hold none of a launch (a finite part cut at a NaN before any point): never an empty list."""
    starts = run.launch_starts(run.pick(role))
    if not starts:
        return [(steps, values)]
    cuts = np.searchsorted(steps, np.asarray(starts))
    return [(s, v) for s, v in zip(np.split(steps, cuts), np.split(values, cuts)) if s.size] or [(steps, values)]


def epoch_view(run: Run) -> Run:
    """The run with its training loss read as the epoch aggregate the writer logged beside a per-step loss
    (Lightning's `train_loss_epoch` beside `train_loss_step`): the shape of a curve (flat, oscillating) is the
    epoch means', per-step values carry the batch order and batch noise, not the dynamics. The run itself when
    it logged no such pair."""
    picked = run.pick("loss")
    if picked is None or "epoch" in words(picked):
        return run
    m = run.candidates("loss")
    epochs = m.filter(pl.col("name").map_elements(lambda n: "epoch" in words(n), return_dtype=pl.Boolean)
                      & (pl.col("n_points") >= 2))
    if epochs.height == 0:
        return run
    per_step = m.filter(pl.col("name") != epochs["name"][0])["name"].to_list()
    return dataclasses.replace(run, meta=run.meta.filter(~pl.col("name").is_in(per_step)))


def held_out_score(run: Run) -> str | None:
    """The held-out curve a user reads where no held-out loss is logged: a validation or test series of a score that
    is higher when the model is better (its accuracy, or a name with a word of `ingest.roles.SCORE_WORDS`: AUC, mAP,
    F1, Dice), not a running best or a setting (`Best AUC`), with positive values; of several, the one with the most
    finite points (the evaluations, not a final test), then the shortest name (`bbox_mAP` before `bbox_mAP_50`)."""
    m = run.meta.filter((pl.col("role") == "val_accuracy")
                        | (pl.col("role") == "other") & pl.col("split").is_in(["val", "test"]))
    found = []
    for name, role in m.select("name", "role").iter_rows():
        low = name.lower()  # `bbox_mAP`, `mAP50(B)`, `val_f1`: the score's word whole, as loss_like reads it
        ws = set(words(name)) | set(re.findall(r"[a-z0-9]+", low)) | set(re.findall(r"[a-z]+", low))
        if role != "val_accuracy" and not ws & SCORE_WORDS or ws & (AGGREGATE_WORDS | SETTING_WORDS):
            continue
        values = run.arrays(name)[1]
        values = values[np.isfinite(values)]
        if values.size and np.all(values > 0):
            found.append((-values.size, len(name), name))
    return min(found)[2] if found else None


def saturates_at_one(values: np.ndarray, closed: float = 0.9, tau: float = 0.8, points: int = 8) -> bool:
    """Whether a curve rises the way a score does (an accuracy, a ranking metric such as MRR or Hits@k, an AUC):
    every value within [0, 1], rising nearly at every record (Kendall's tau `tau` or more, from `points` records),
    closing `closed` of its first distance to 1 by its end (the median of its last three), and more in its first
    half than in its second (a saturating approach, not an acceleration). A loss that climbs does so away from its
    floor and faster as it goes; one that creeps up to exactly 1 ever more slowly is a score printed under a loss's
    name (a table whose header calls its training metric "loss"), to be judged as higher-is-better, if at all.
    In percent likewise: values within [0, 100] whose highest is exactly 100 (every sample right), read over 100."""
    y = np.asarray(values, dtype=float)
    y = y[np.isfinite(y)]
    if y.size and float(np.max(y)) == 100.0 and float(np.min(y)) >= 0:
        y = y / 100.0  # a percentage that reaches 100: an accuracy's own ceiling, no loss has one
    if y.size < points or not (np.all(y >= 0) and np.all(y <= 1)) or y[0] >= 1:
        return False
    end = float(np.median(y[-3:]))
    half = y.size // 2
    if 1 - end > (1 - closed) * (1 - float(y[0])) or not y[half] - y[0] > y[-1] - y[half]:
        return False
    return stats.mann_kendall(y).tau >= tau


def score_scale(values: np.ndarray) -> float:
    """100 for a score logged in percent (an accuracy of 93.06, any finite value above 1.5), else 1: divide by it
    to read a gain in the score's own 0-1 units. An all-NaN or empty series reads as a fraction."""
    finite = values[np.isfinite(values)]
    return 100.0 if finite.size and float(np.max(np.abs(finite))) > 1.5 else 1.0


def unsplit_score(run: Run) -> str | None:
    """`held_out_score` where the writer names no split: the series of no split read as evaluations (YOLO's
    `metrics/mAP50(B)` are computed on the validation set; a training score that stays low says as much)."""
    meta = run.meta.with_columns(pl.col("split").fill_null("val"))
    return held_out_score(dataclasses.replace(run, meta=meta))


def placeholder_nans(run: Run, name: str, steps: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Which NaN points of the series `name` (its `steps`, `values`) are a table's empty cells, not measurements:
    the rows of one printed table (a DataFrame of training and validation records, `Step  Train loss  Valid loss`)
    fill one column each and print NaN in the other. A NaN is a placeholder where another series of the same file
    is finite at that step and NaN (printed, not absent) wherever this one is finite, on 2 or more rows each way,
    no step NaN in both: the two columns take turns. A loss that dies of NaN never takes turns (once NaN, it stays).
    False alarms removed: a NaN-placeholder table's critical nan_loss; 0 of the 40 healthy shared runs changed."""
    nan = np.isnan(values)
    mask = np.zeros(values.size, dtype=bool)
    row = run.meta.filter(pl.col("name") == name)
    if not nan.any() or row.height == 0 or nan.all():
        return mask
    partners = run.meta.filter((pl.col("grp") == row["grp"][0]) & (pl.col("name") != name)
                               & (pl.col("n_nonfinite").fill_null(0) >= 2))  # a partner prints NaN cells too
    for other in partners["name"].to_list():
        o = run.series_named(other)
        their_steps, their_values = o["step"].to_numpy(), o["value"].fill_null(np.nan).to_numpy()
        if their_steps.size == 0:
            continue
        at = np.clip(np.searchsorted(their_steps, steps), 0, their_steps.size - 1)
        present = their_steps[at] == steps
        theirs = present & np.isfinite(their_values[at])
        their_nan = present & np.isnan(their_values[at])
        turns_theirs, turns_mine = nan & theirs, np.isfinite(values) & their_nan
        if (turns_theirs.sum() >= 2 and turns_mine.sum() >= 2 and not (nan & their_nan).any()
                and turns_theirs.sum() == nan.sum()):
            return turns_theirs
    return mask


def loss_falls(run: Run, share: float, until: float, since: float | None = None,
               start_points: int = stats.START_POINTS) -> bool:
    """Whether the training loss falls by `share` or more of its first level between steps `since` and `until`
    (its initial level the median of its first `start_points` there, its last the median of its last 3; 6 finite
    points at least). A loss that falls is a run whose optimizer steps are taken: a logged setting that says none
    are (an LR of 0, a loss scale at which every step overflows) is not what the optimizer used."""
    if not run.has("loss"):
        return False
    s, y = run.arrays("loss")
    keep = (s <= until) & np.isfinite(y) & (s >= since if since is not None else True)
    y = y[keep]
    if y.size < 6:
        return False
    head, tail = stats.start_level(y, start_points), float(np.median(y[-3:]))
    return head > 0 and (head - tail) / head >= share


def too_short(run: Run, role: str, minimum: int) -> str | None:
    """A skip reason when the finite part of `role`'s series has fewer than `minimum` points."""
    steps, values = run.arrays(role)
    n = int(np.isfinite(values).sum())
    if n < minimum:
        return f"series {run.pick(role)} has {n} finite points; this detector needs at least {minimum}"
    return None


def src(run: Run, role: str, steps: np.ndarray | None = None) -> dict:
    """A `sources` entry: the series read and the step range used."""
    entry = {"table": "scalars", "series": run.pick(role)}
    if steps is not None and len(steps):
        entry.update(step_min=int(np.min(steps)), step_max=int(np.max(steps)))
    return entry


# Config keys that name the number of classes of the loss's softmax, most specific first: what a classifier
# declares (its class count, its labels) before any vocabulary size.
CLASS_KEYS = ("num_classes", "n_classes", "nb_classes", "num_labels", "n_labels", "id2label", "label2id", "classes",
              "vocab_size", "n_vocab", "ntokens")
LABEL_MAPS = ("id2label", "label2id")  # HF's label maps: their entries are the classes
# Config keys that say the model starts from trained weights: its first loss is not the loss at init.
PRETRAINED_KEYS = ("_name_or_path", "model_name_or_path", "pretrained_model_name_or_path", "init_from",
                   "pretrained", "resume_from_checkpoint", "load_from", "checkpoint_path", "finetune")
# An HF architecture with a classification head (`ViTForImageClassification`, `BertForSequenceClassification`).
CLASSIFIER_HEAD = re.compile(r"Classification|Classifier")
HF_DEFAULT_LABEL = re.compile(r"LABEL_\d+")


def class_count(run: Run) -> tuple[int, str] | None:
    """(C, config key) for the loss's softmax width, from the run's config, or None: a declared class count
    (`num_classes`, HF's `num_labels`), then the labels a classifier declares (HF's `id2label`/`label2id`), before
    any vocabulary size. HF writes a two-entry map of its default names (`LABEL_0`, `LABEL_1`) into every model's
    config, a language model's too: such a map counts only beside a classification head in `architectures`.
    None where the training loss is a perplexity (`loss_is_perplexity`): e^loss has no ln C to be compared with."""
    if loss_is_perplexity(run):
        return None
    for key in CLASS_KEYS:
        if key in LABEL_MAPS:
            labels = run.config_group(key)
            names = [str(n) for n in (labels.values() if key == "id2label" else labels)]
            default = len(names) == 2 and all(HF_DEFAULT_LABEL.fullmatch(n) for n in names)
            heads = run.config("architectures")
            heads = " ".join(str(h) for h in (heads if isinstance(heads, list) else [heads] if heads else []))
            if len(labels) >= 2 and not (default and not CLASSIFIER_HEAD.search(heads)):
                return len(labels), key
            continue
        c = run.config_number(key)
        if c is not None and c >= 2 and float(c).is_integer():
            return int(c), key
    return None


def loss_is_perplexity(run: Run) -> bool:
    """Whether the run's training loss is a perplexity (`ingest.roles.is_perplexity`: a run that prints no loss but
    `ppl`), e^loss: a level read against a log-level (ln C, a chance level ln k, a loss of 0) is never read on it."""
    name = run.pick("loss")
    return name is not None and is_perplexity(name)


def class_source(found: tuple[int, str]) -> str:
    """Where a class count came from, for a summary: `num_classes = 10 in the config`, `8 labels in its id2label`."""
    c, key = found
    return f"{c} labels in its {key}" if key in LABEL_MAPS else f"{key} = {c} in the config"


# A counter a writer logs beside its metrics in the same rows (W&B's `iteration`, HF's `train/global_step`,
# Lightning's `trainer/global_step`): where the writer's own step counts log calls (W&B's `_step`), it counts updates.
_COUNTER_WORDS = frozenset({"global", "step", "steps", "iteration", "iterations", "iter", "iters", "update",
                            "updates", "num", "trainer", "train", "optimizer"})
_COUNTING_WORDS = frozenset({"step", "steps", "iteration", "iterations", "iter", "iters", "update", "updates"})


def update_at(run: Run, series: str | None, step: int) -> int | None:
    """The update count a counter logged in the same source as `series` holds at its record `step`, or None where
    no such counter is logged (then the writer's step is the only count there is)."""
    row = run.meta.filter(pl.col("name") == series)
    if series is None or row.height == 0:
        return None
    beside = run.meta.filter((pl.col("grp") == row["grp"][0]) & (pl.col("role") == "other")
                             & (pl.col("name") != series))
    for name, tag in zip(beside["name"], beside["tag"]):
        ws = set(words(tag or name))
        if not ws or not ws <= _COUNTER_WORDS or not ws & _COUNTING_WORDS:
            continue
        f = run.series_named(name)
        at = f.filter(pl.col("step") == step)["value"]
        v = f["value"].fill_null(np.nan).to_numpy()
        if at.len() and np.all(np.isfinite(v)) and np.all(v == np.round(v)) and np.all(np.diff(v) >= 0):
            return int(at[0])
    return None


def pretrained_key(run: Run) -> str | None:
    """The config key that says the model starts from trained weights, or None."""
    return next((k for k in PRETRAINED_KEYS if run.config(k) not in (None, False, "", "scratch")), None)


def layers_over(run: Run, role: str, threshold: float, tail: float) -> list[dict]:
    """Layers whose logged fraction (`dead_fraction`, `saturated_fraction`), as the median of the last `tail` of
    its points, is ≥ threshold: series, layer, fraction, step range."""
    out = []
    for name in run.all_of(role):
        f = run.series_named(name)
        v = f["value"].fill_null(np.nan).to_numpy()
        if np.nanmax(np.abs(v), initial=0.0) > 1:
            continue  # no fraction: a count or a percentage named like one (`'saturated': 2` in a printed dict)
        _, end = stats.head_tail_levels(v, tail)
        if np.isfinite(end) and end >= threshold:
            out.append({"series": name, "layer": run.layer_of(name), "fraction": float(end),
                        "step": int(f["step"][0]), "step_end": int(f["step"][-1])})
    return out


def layer_stats_missing(run: Run, role: str) -> str | None:
    """The skip reason of a per-layer activation detector whose logs lack `role`, else None."""
    if run.all_of(role):
        return None
    return f"the logs have no per-layer {role} series; {catalog.NEEDS_REPLAY}"


def layer_fraction_findings(detector, run: Run, role: str, what: str) -> Iterator[Finding]:
    """One finding listing every layer whose logged `role` fraction ends at or above the detector's threshold
    (dead_relu and saturated_activation share it)."""
    hits = layers_over(run, role, detector.threshold, detector.tail)
    if not hits:
        return
    worst = max(hits, key=lambda h: h["fraction"])
    yield Finding.of(detector, severity="warning", step=min(h["step"] for h in hits),
                     step_end=max(h["step_end"] for h in hits), series=worst["series"],
                     evidence={"layers": [h["layer"] or h["series"] for h in hits],
                               "fractions": [h["fraction"] for h in hits], "threshold": detector.threshold},
                     sources=tuple({"table": "scalars", "series": h["series"]} for h in hits),
                     summary=(f"{numbers.count(len(hits), 'layer')} {'ends' if len(hits) == 1 else 'end'} with "
                              f"≥{detector.threshold:.0%} {what}; worst "
                              f"{worst['layer'] or worst['series']} at {worst['fraction']:.0%} (the median of its last "
                              f"{detector.tail:.0%} of points)"))


# -- the numbers a summary quotes --------------------------------------------------------------------------------
# A summary quotes what a user can find in their own log: a point's logged value with its step (`0.5999 at step 46`),
# or a level over several points called what it is, with the steps it is the median of (`median 0.7287 of steps
# 32-34`). A detector's smoothed or windowed statistics stay in its evidence. tests/test_summary_numbers.py checks
# every such phrase on the gallery against the stored values.

def level_of(steps: np.ndarray, values: np.ndarray, a: int, b: int, fmt: str = ".4g",
             say: Callable[..., str] | None = None) -> tuple[float, str]:
    """The level of points `a`..`b` (indices, inclusive) and how a summary says it: one point's logged value
    (`0.5999 at step 46`), else the median of the finite values among them (`median 0.7287 of steps 32-34`).
    NaN and `nan` when none is finite. `say` words steps as the file shows them (`Run.printed_span`, bound to a
    series), where its counter starts again."""
    say = say or _steps_said
    a, b = max(0, int(a)), min(len(values) - 1, int(b))
    seg = np.asarray(values[a:b + 1], dtype=float)
    fin = seg[np.isfinite(seg)]
    if fin.size == 0:
        return math.nan, f"nan at {say(steps[a])}"
    if b == a:
        return float(seg[0]), f"{float(seg[0]):{fmt}} at {say(steps[a])}"
    v = float(np.median(fin))
    return v, f"median {v:{fmt}} of {say(steps[a], steps[b])}"


def _steps_said(first: int, last: int | None = None) -> str:
    return f"step {first}" if last is None else f"steps {first}-{last}"


def point(steps: np.ndarray, values: np.ndarray, i: int, fmt: str = ".4g", say: Callable[..., str] | None = None) -> str:
    """`0.5999 at step 46`: the logged value of point `i` with its step (`say`: as in `level_of`)."""
    return f"{float(values[i]):{fmt}} at {(say or _steps_said)(steps[i])}"


def head_tail_of(steps: np.ndarray, values: np.ndarray, fraction: float = 0.1, min_points: int = 3,
                 fmt: str = ".4g") -> tuple[tuple[float, str], tuple[float, str]]:
    """`stats.head_tail_levels` with the phrases that say them: the medians of the first and last `fraction` of
    the finite points (at least `min_points` each), as `median 1.625 of steps 10-80` (`level_of`)."""
    keep = np.isfinite(np.asarray(values, dtype=float))
    s, v = np.asarray(steps)[keep], np.asarray(values, dtype=float)[keep]
    if v.size == 0:
        return (math.nan, "nan"), (math.nan, "nan")
    k = min(v.size, max(min_points, int(round(v.size * fraction))))
    return level_of(s, v, 0, k - 1, fmt), level_of(s, v, v.size - k, v.size - 1, fmt)


def curve_ends(steps: np.ndarray, values: np.ndarray, start_points: int, checkpoints: bool = False,
               first_point: bool = False) -> tuple[str, str]:
    """How a summary says a norm curve's initial and final levels as `curves.norm_change` takes them: from 10
    points on, the median of the first `start_points` and of the last tenth; below, the first and last points
    (`first_point`: the first point whatever the length). A curve of checkpoint norms says `checkpoint step`."""
    n = len(values)
    if n >= 10 and not first_point:
        head = level_of(steps, values, 0, start_points - 1)[1]
    else:
        head = point(steps, values, 0)
    k = min(n, max(3, int(round(n * 0.1))))
    tail = level_of(steps, values, n - k, n - 1)[1] if n >= 10 else point(steps, values, n - 1)
    if checkpoints:
        head, tail = (t.replace(" step", " checkpoint step") for t in (head, tail))
    return head, tail


# -- what a console log announces in words (`Run.announced`, `ingest.announcements`) ------------------------------

def announced_nonfinite(run: Run) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The console lines that announce a non-finite training loss in words (`nan loss caught, skipping batch`, `Loss is
    nan, stopping training`), split into (those the run ended on, those the training skipped and survived): the one
    home of that judgement (nan_loss reads the first, masked_nonfinite the second). A line ends the run where it says
    the training stops, or where its file logs no finite training loss after it (no training record at all in the
    file: unless the line says the batch was skipped). A line about non-finite gradients counts only where it says
    the training stops (`FloatingPointError: gradients are Nan/Inf`; the steps skipped for them are amp_overflow's).
    Both empty where the logged loss itself holds a non-finite value: nan_loss reads that value."""
    parts = [f for f in (run.announced(NONFINITE_LOSS), run.announced(NONFINITE_GRAD)) if f.height]
    if not parts or (run.has("loss") and not np.isfinite(run.arrays("loss")[1]).all()):
        none = run.announced(NONFINITE_LOSS).clear()
        return none, none
    said = pl.concat(parts).sort("grp", "position")
    what = said["said"].to_list()
    says_ends = np.array([w.ends for w in what])
    loss_line = np.array([w.kind == NONFINITE_LOSS for w in what])
    records = (said["before"] + said["after"]).to_numpy() > 0
    fin = said["finite_after"].to_numpy() > 0
    ends = says_ends | loss_line & ((records & ~fin) | (~records & ~np.array([w.skips for w in what])))
    return said.filter(pl.Series(ends)), said.filter(pl.Series(~ends & loss_line))


def announced_at(row: dict) -> str:
    """Where an announcing line stands (`Run.announced` row): `at step S` where S is its own (a printed counter, or
    its line's ordinal), `after step S` where it took the step of the record before it."""
    inherited = not row["ordinal"] and row["before"] > 0 and row["step"] == row["top_step_before"]
    return f"{'after' if inherited else 'at'} step {row['step']}"


def quoted(text: str) -> str:
    """A line from a log as a finding's summary quotes it (the faces escape what it holds)."""
    return f'"{text}"'


def opens_late(run: Run, steps: np.ndarray, share: float = 0.1, by_step: bool = True) -> bool:
    """Whether the loss over `steps` opens well into training, an excerpt whose start is not in the log: its first
    epoch (printed on its lines, else a logged epoch series), or with `by_step` on a logged step axis its first step,
    is more than `share` of its last and two logging intervals (at least one epoch) from 0. A step axis a reader
    composed from 1-based epochs and batches opens at one epoch's length: only an epoch says where a log opens."""
    printed = sorted(e for e, _ in run.counters(run.pick("loss"), [int(s) for s in steps]).values() if e is not None)
    if printed:
        e = np.asarray(printed, dtype=float)
        return bool(e[0] > share * e[-1] and _opens_late(e, floor=1.0))
    if run.has("epoch"):
        e = run.arrays("epoch")[1]
        e = e[np.isfinite(e)]
        if e.size >= 2 and e[-1] > 0 and e[0] > share * e[-1] and _opens_late(e):
            return True
    return by_step and steps_open_late(run, steps, share)


def steps_open_late(run: Run, steps: np.ndarray, share: float = 0.1, intervals: float = 2.0) -> bool:
    """Whether the loss's own step axis opens more than `share` of its last step and `intervals` logging intervals
    from 0, whatever its epochs say; a step axis a reader composed from ordinals (epochs and batches) is no
    evidence."""
    ordinal = run.on_line_axis(run.pick("loss"))
    return bool(not ordinal and steps.size >= 2 and steps[-1] > 0 and steps[0] > share * steps[-1]
                and _opens_late(steps, intervals))


def _opens_late(axis: np.ndarray, intervals: float = 2.0, floor: float = 0.0) -> bool:
    """Whether an axis opens more than `intervals` of its own logging intervals (at least `floor`) after 0: a short
    log whose first record is its first logging step (step 10 of 80, epoch 1 of 8) is a whole run, not an excerpt."""
    gap = float(np.median(np.diff(axis))) if axis.size >= 2 else 0.0
    return bool(axis[0] > intervals * max(gap, floor))
