"""The run's plan as a console log prints it: its length beside its counters (`Epoch 3/100`, `[iter 50/10000]`,
`step 3000/5000`, a `Steps:` progress bar's `1/2000`) and the LR scheduler its argument dump names: stored as a config
so that the detectors can judge a schedule against what the run declares, not only against the log."""

from __future__ import annotations

import re
from typing import Any

# A counter and its total, the counter's word naming what is counted (an unlabelled progress bar's `45/100` may
# count the batches of one epoch, so it declares no plan).
_EPOCHS = re.compile(rb"\bepoch\s*[:=#]?\s*\[?\s*(\d{1,6})\s*/\s*(\d{1,6})\b(?!\.\d)", re.I)
_STEPS = re.compile(rb"\b(?:iter|iters|iteration|iterations|it|step|steps|global[_ ]step|update|updates)\s*[:=#]?"
                    rb"\s*\[?\s*(\d{1,9})\s*/\s*(\d{1,9})\b(?!\.\d)", re.I)
_STEPS_BAR = re.compile(rb"\b(?:steps?|iters?|iterations?)\s*:\s*\d+%\|[^|\n]*\|\s*(\d{1,9})\s*/\s*(\d{1,9})\b", re.I)
# The scheduler a training script's argument dump names (HF's `lr_scheduler_type: cosine`,
# `lr_scheduler_type=SchedulerType.COSINE`, `--lr_scheduler_type cosine`).
_SCHEDULER = re.compile(rb"\blr_scheduler_type\b['\"]?\s*(?:[:=]|\s)\s*['\"]?(?:SchedulerType\.)?([A-Za-z_]+)", re.I)
# The time a trainer's log line says is left (`eta: 5:17:38`, `eta: 1 day, 2:03:04`: mmcv, detectron2): the last one
# printed says how much of the plan the log did not reach (DETR's MetricLogger prints its epoch's: less, never more).
_ETA = re.compile(rb"\beta\s*[:=]?\s*(?:(\d{1,4})\s*days?,\s*)?(\d{1,3}):(\d{2}):(\d{2})\b", re.I)
CONFIG_NAME = "console plan"


def planned(text: bytes) -> dict[str, Any]:
    """{"planned_epochs": E, "epochs_reached": e, "planned_steps": N, "steps_reached": n} from the counters with a
    total printed in `text` (the total the last such counter prints, and the largest count printed against it: the
    plan of the launch the log ends in, where a relaunch printed another total than the launch it replaced), the
    seconds the last
    printed `eta` says were left (`eta_left_s`), and the `lr_scheduler_type` an argument dump names; empty when
    none is."""
    out: dict[str, Any] = {}
    epoch_lines = {_line_of(text, m.start()) for m in _EPOCHS.finditer(text)}
    for what, patterns in (("epochs", (_EPOCHS,)), ("steps", (_STEPS, _STEPS_BAR))):
        # a step total on a line that counts epochs too (`Epoch [1/5], Step [100/600]`) counts one epoch's steps
        pairs = sorted((m.start(), int(m.group(1)), int(m.group(2))) for p in patterns for m in p.finditer(text)
                       if what == "epochs" or _line_of(text, m.start()) not in epoch_lines)
        pairs = [(n, total) for _, n, total in pairs if 2 <= total and n <= total]
        if pairs:
            total = pairs[-1][1]
            out[f"planned_{what}"] = total
            out[f"{what}_reached"] = max(n for n, t in pairs if t == total)
    left = None
    for left in _ETA.finditer(text):
        pass
    if left is not None:
        days, h, m, sec = (int(g or 0) for g in left.groups())
        out["eta_left_s"] = ((days * 24 + h) * 60 + m) * 60 + sec
    named = _SCHEDULER.search(text)
    if named:
        out["lr_scheduler_type"] = named.group(1).decode().lower()
    return out


def _line_of(text: bytes, at: int) -> int:
    """Where the line holding byte `at` begins."""
    return max(text.rfind(b"\n", 0, at), text.rfind(b"\r", 0, at)) + 1
