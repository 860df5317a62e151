"""initial_loss_mismatch: the first loss is far from log(C) for a C-class cross-entropy."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import polars as pl

from forensics.judge.detectors.base import (CLASS_KEYS, SHAPE, class_count, class_source, loss_is_perplexity, pretrained_key, src,
                                            update_at)
from forensics.judge.findings import Finding
from forensics.judge.numbers import times
from forensics.judge.run import Run
from ingest.roles import words

# Tags by which a writer shows it averages its classification cross-entropy over the batch (detectron2's
# FastRCNNOutputLayers logs these beside `loss_cls`), and the name of that component.
MEAN_REDUCED_SIGNS = frozenset({"fast_rcnn/cls_accuracy", "fast_rcnn/fg_cls_accuracy"})
MEAN_REDUCED_CE = frozenset({"loss_cls"})
# A loss that is a weighted sum of a detector's terms (box regression, objectness, class) has no uniform-guess
# reference: a config weighting such terms (`lambda_box`, `obj_weight`), naming anchors, or a logged part of the loss
# naming one (`box_loss`, `loss_giou`), or a loss the reader summed from parts, shows it.
DETECTION_TERMS = frozenset({"box", "bbox", "boxes", "obj", "noobj", "objectness", "giou", "iou", "dfl", "coord",
                             "rpn"})
TERM_WEIGHTS = frozenset({"lambda", "weight", "coef", "coeff", "gain"})
ANCHORS = frozenset({"anchor", "anchors"})


@dataclass(frozen=True)
class InitialLossMismatch:
    """The first logged loss is far from log(C), the cross-entropy of a uniform guess over C classes.

    Detects: the earliest finite loss is at least `high` × log(C), or at most `low` × log(C), logged early (at step
    ≤ `max_low_step` or within the first `early_share` of the run; on the high side at any step when the loss falls
    after it: a logged value of a falling loss is at most its start). C comes from the config (`CLASS_KEYS`,
    `base.class_count`); without it the detector is skipped. The low side needs the first point at step
    ≤ `max_low_step` and no pretrained weights named (`PRETRAINED_KEYS`): a first value may be a window mean (HF's
    `logging_steps`). The high side reads a window mean only while the loss does not grow after it (the median of
    the next `window_after` points at most `max_rise_after` × the first).
    Why: a model at init should be unsure; far above means confidently wrong logits (double softmax, bad
    final-layer init, a loss summed instead of averaged), far below means labels leak into the inputs.
    Where a counter logged beside the loss counts updates (a W&B row per epoch holding `iteration`), steps are
    read in it (`base.update_at`).
    Evidence: first step and loss, whether it is a window mean (HF's Trainer, or a config naming `logging_steps`),
    C and the key it came from, log(C), ratio, the thresholds; where the config names a batch size, the ratio a
    loss summed over the batch would have per sample.
    Without C: a classification cross-entropy component of a writer known to average it (`MEAN_REDUCED_SIGNS`)
    whose first value, logged early, exceeds log(`max_classes`): no plausible class count allows it. Sum-reduced
    losses (YOLO-style `loss_cls` of 85) are why the writer must be known.
    False alarms: 1 of the 353 healthy runs it could check (0.28%; a disputed label, docs/engine.md); the high side
    at any step: 0 of the 252 healthy runs of the nineteen label files.
    """

    kind: ClassVar[str] = "initial_loss_mismatch"
    stage: ClassVar[int] = SHAPE
    requires: ClassVar[tuple[str, ...]] = ("loss",)
    reads_loss_level: ClassVar[bool] = True  # not on a GAN's adversarial losses (base.adversarial_loss)
    high: float = 2.0  # healthy pool: 0 of 15 checked at 2.0 and 3.0; 1.5 fires on 1
    low: float = 0.3  # healthy pool: 0 of 15 from 0.2 to 0.5
    max_low_step: int = 1
    window_after: int = 5
    max_rise_after: float = 1.2
    early_share: float = 0.05  # the first record within the first 5% of the run speaks of its start
    max_classes: int = 262_144  # without a class count: more classes than any classifier's (ln = 12.5)

    def unavailable(self, run: Run) -> str | None:
        if loss_is_perplexity(run):
            return "the training loss is a perplexity (e^loss): log(C) is no reference for its start"
        if class_count(run) is None and self._mean_reduced_ce(run) is None:
            return (f"no class count in the run's config (looked for {', '.join(CLASS_KEYS[:4])}, HF's id2label, "
                    f"vocab_size, ...)")
        if class_count(run) is not None and self._mean_reduced_ce(run) is None and (sign := composite_loss(run)):
            return f"the loss is a sum of detection terms ({sign}): log(C) is no reference for its start"
        return None

    def _mean_reduced_ce(self, run: Run) -> str | None:
        """The classification cross-entropy component of a writer known to average it over the batch (detectron2's
        `loss_cls` beside its `fast_rcnn/cls_accuracy`): its name, or None."""
        tags = set(run.meta["tag"].to_list())
        if not tags & MEAN_REDUCED_SIGNS:
            return None
        named = run.meta.filter(pl.col("tag").is_in(list(MEAN_REDUCED_CE)) & ~pl.col("ordinal").fill_null(False))
        return named["name"][0] if named.height else None

    def _beyond_any_class_count(self, run: Run) -> Iterator[Finding]:
        """Without a class count: a mean-reduced classification cross-entropy whose first value, logged early,
        exceeds log(`max_classes`): no class count a classifier plausibly has allows it at a sane init."""
        name = self._mean_reduced_ce(run)
        if name is None:
            return
        pts = run.series_named(name).filter(pl.col("value").is_finite())
        if pts.height == 0:
            return
        step, first, last = int(pts["step"][0]), float(pts["value"][0]), int(pts["step"][-1])
        bound = math.log(self.max_classes)
        if first <= bound or step > self.early_share * max(last, 1):
            return
        ev = {"first_step": step, "first_loss": first, "classes": None, "log_max_classes": bound,
              "max_classes": self.max_classes, "ratio": first / bound, "direction": "high", "series": name}
        yield Finding.of(self, severity="warning", step=step, series=name, evidence=ev,
                         sources=(src(run, name, np.asarray([step])),),
                         summary=(f"first {name} {first:.4g} at step {step} is {times(first / bound)} "
                                  f"log({self.max_classes:,}) = {bound:.3g}: a cross-entropy averaged over the batch "
                                  f"cannot start that high for any plausible class count (confidently wrong logits "
                                  f"at init)"))

    def check(self, run: Run) -> Iterator[Finding]:
        found = class_count(run)
        if found is None:
            yield from self._beyond_any_class_count(run)
            return
        steps, y = run.arrays("loss")
        ok = np.flatnonzero(np.isfinite(y))
        if ok.size == 0:
            return
        c, key = found
        step, first = int(steps[ok[0]]), float(y[ok[0]])
        # The first logged value speaks of the loss at init only when it comes early in the run: HF logs the mean
        # of the first `logging_steps`, and a first record half-way through says nothing of the start.
        # Where the writer's step counts log calls and a counter beside it counts updates (a W&B row per epoch
        # holding `iteration`), "early" is read in updates.
        series = run.pick("loss")
        update, final = update_at(run, series, step), update_at(run, series, int(steps[ok[-1]]))
        at = step if update is None else update
        last = max(float(steps[ok[-1]] if final is None else final), run.config_number("max_steps") or 0.0)
        early = at <= self.max_low_step or at <= self.early_share * last
        log_c = math.log(c)
        ratio = first / log_c
        pretrained = pretrained_key(run)
        too_low = ratio <= self.low and at <= self.max_low_step and pretrained is None
        after = y[ok[1:1 + self.window_after]]
        grew = at > self.max_low_step and after.size > 0 and float(np.median(after)) > self.max_rise_after * first
        # On the high side a late first record still speaks: the loss fell to it from its start (it falls on after
        # it), so the start was at least that high.
        fell_to = bool(float(y[ok[-1]]) < first) and not grew
        if not ((ratio >= self.high and not grew and (early or fell_to)) or (too_low and early)):
            return
        logging = run.config_number("logging_steps")
        mean = at > 1 and (run.format_of(run.pick("loss")) == "hf_trainer_state"
                             or (logging is not None and step <= logging))
        ev = {"first_step": step, "first_loss": first, "classes": c, "classes_key": key, "log_classes": log_c,
              "ratio": ratio, "high": self.high, "low": self.low, "direction": "high" if ratio >= self.high else "low",
              "first_update": update, "first_value_may_be_window_mean": at > 1, "first_value_is_window_mean": mean,
              "early_share": self.early_share, "run_last_step": last, "pretrained_key": pretrained,
              "logged_early": early}
        batch = run.config_number("batch_size", "per_device_train_batch_size", "train_batch_size")
        if batch and batch > 1 and ratio >= self.high:  # a loss summed over the batch, not averaged, looks like this
            ev["ratio_if_summed_over_batch"] = first / (batch * log_c)
        what = (f"first logged loss {first:.4g} at step {step} (the mean of steps 1-{step}, as HF's Trainer logs it)"
                if mean else f"first loss {first:.4g} at step {step}") + (
            f" (update {update}, as the run's counter logs it)" if update not in (None, step) else "") + (
            f", {at / last:.0%} into the run (the loss falls after it: it started at least this high)"
            if not early else "")
        yield Finding.of(self, severity="warning", step=step, series=run.pick("loss"), evidence=ev,
                         sources=(src(run, "loss", steps[ok[:1]]),),
                         summary=(f"{what} is {times(ratio)} log({c}) = {log_c:.3g}, the loss of a uniform guess "
                                  f"({class_source(found)})"))


def composite_loss(run: Run) -> str | None:
    """What shows the run's loss is a weighted sum of detection terms (box, objectness, class), or None: a config
    key weighting such a term or naming anchors, a logged part naming one, or a loss the reader summed from parts."""
    for key in run.config_keys():
        ws = set(words(key))
        if ws & ANCHORS or (ws & TERM_WEIGHTS and ws & DETECTION_TERMS):
            return f"{key} in the config"
    for name in run.names():
        ws = set(words(name))
        if "loss" in ws and ws & DETECTION_TERMS or "sum of" in name:
            return f"series {name}"
    return None
