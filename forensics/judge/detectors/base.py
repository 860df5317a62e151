"""The detector contract: a frozen dataclass with a catalog `kind`, the series it `requires`, typed thresholds, and
`check(run) -> Iterator[Finding]`; optionally `unavailable(run) -> str | None` for reasons beyond a missing series."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar, Protocol

import numpy as np

from forensics.judge import catalog, numbers, stats
from forensics.judge.findings import Finding
from forensics.judge.run import Run


# Where a kind sits in the chain from cause to symptom, each detector's `stage` (lower comes first; the verdict's
# headline rule reads it). Upstream: settings, data and the state of the weights; then the mechanism by which a run
# breaks; then what the loss curve and the checkpoints show; last the non-finite values everything ends in.
UPSTREAM, MECHANISM, SHAPE, NONFINITE = 0, 1, 2, 3


class Detector(Protocol):
    """What the engine, the verdict and watch know of a detector, all read from its class (never a list kept
    elsewhere): `kind` (the catalog id), `requires` (logical series), `stage` (above); and, where true,
    `reads_curve` (judges the shape of the training-loss curve: a run none of these could read is not judged),
    `joins_chain` (a finding whose step range holds a NaN is one event with it), `nonfinite` (a non-finite value:
    the step replay starts from), `reads_loss_level` (not on a GAN's adversarial losses)."""

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
    if getattr(detector, "reads_loss_level", False):
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


def finite_part(steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Points before the first non-finite value, finite ones only (what a curve looked like while alive)."""
    bad = ~np.isfinite(values)
    end = int(np.argmax(bad)) if bad.any() else values.size
    return steps[:end], values[:end]


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


# Config keys that name the number of classes of the loss's softmax, most specific first.
CLASS_KEYS = ("num_classes", "n_classes", "num_labels", "n_labels", "nb_classes", "classes", "vocab_size",
              "n_vocab", "ntokens")
# Config keys that say the model starts from trained weights: its first loss is not the loss at init.
PRETRAINED_KEYS = ("_name_or_path", "model_name_or_path", "pretrained_model_name_or_path", "init_from",
                   "pretrained", "resume_from_checkpoint", "load_from", "checkpoint_path", "finetune")


def class_count(run: Run) -> tuple[int, str] | None:
    """(C, config key) for the loss's softmax width, from the run's config, or None."""
    for key in CLASS_KEYS:
        c = run.config_number(key)
        if c is not None and c >= 2 and float(c).is_integer():
            return int(c), key
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
                              f"{worst['layer'] or worst['series']} at {worst['fraction']:.0%}"))
