"""HF Trainer's `trainer_state.json`: `log_history` entries become points, the other fields a config.

Checked against transformers' `TrainerState.save_to_json` (trainer_callback.py, 4.x):
`json.dumps(dataclasses.asdict(state), indent=2, sort_keys=True)`, so non-finite floats appear as the
bare tokens `NaN`, `Infinity`, `-Infinity`, which Python's json module reads back as such. Each
`log_history` entry is one `on_log` / `on_evaluate` dict with `step` added: `step` is the step, every
other number is a series named by its key (loss, grad_norm, learning_rate, eval_loss, epoch, ...).
HF's `epoch` is fractional (0.27 = a quarter into the first epoch), so it stays its own series and the
frame's integer `epoch` column is left null. Strings (`remaining_time: "59h:30m"`) and booleans are
not series and are skipped. The entries carry no time, so `wall_time` is null.

The file is rewritten whole at every save and copied into each `checkpoint-*` folder, so `start` is
the first `log_history` index not yet read, `position` is the entry index, and every copy shares one
group (`trainer_state`) so the store keeps one copy of each point (DECISIONS §3).

`training_args.bin` beside it is a pickle of TrainingArguments: never unpickled, only listed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

from ingest.configs import DocumentTooLarge, parse_json
from ingest.records import Chunk, Issue, scalars_frame

GROUP = "trainer_state"
CONFIG_NAME = "trainer_state"


def read_trainer_state(path: Path, start: int = 0) -> Iterator[Chunk]:
    """Entries from `log_history[start]` on, plus the top-level fields as config `trainer_state`.

    A file that does not parse whole (cut off mid-write) keeps every complete `log_history` entry
    before the damage, with one Issue saying where it stopped.
    """
    raw = path.read_bytes()
    if not raw.strip():
        yield Chunk(end=start, issues=[Issue(None, "empty", "trainer_state.json is empty")])
        return
    text = raw.decode("utf-8", errors="replace")
    issues: list[Issue] = []
    try:
        doc = parse_json(text)
    except DocumentTooLarge as exc:
        yield Chunk(end=start, issues=[Issue(None, "too_large", f"trainer_state.json: {exc}; not read")])
        return
    except json.JSONDecodeError as exc:
        doc, reason = _salvage(text)
        issues.append(Issue(exc.lineno, "truncated" if exc.pos >= len(text.rstrip()) - 1 else "garbled",
                            f"trainer_state.json does not parse at line {exc.lineno} ({exc.msg}); "
                            f"{reason}"))
    if not isinstance(doc, dict):
        yield Chunk(end=start, issues=issues or [Issue(None, "not_this_format", "not a JSON object")])
        return
    history = doc.get("log_history")
    if not isinstance(history, list):
        issues.append(Issue(None, "not_this_format", "no `log_history` list in trainer_state.json"))
        history = []
    config = {k: v for k, v in doc.items() if k != "log_history"}
    frame = _points(history, start)
    configs = {CONFIG_NAME: config} if config and (start == 0 or len(history) > start) else {}
    yield Chunk(end=max(len(history), start), scalars=frame, configs=configs, issues=issues)


def _points(history: list[Any], start: int) -> pl.DataFrame:
    tags: list[str] = []
    steps: list[int] = []
    values: list[float] = []
    positions: list[int] = []
    ordinal: list[bool] = []
    for index in range(start, len(history)):
        entry = history[index]
        if not isinstance(entry, dict):
            continue
        step = entry.get("step")
        logged = isinstance(step, int) and not isinstance(step, bool)
        for key, value in entry.items():
            if key == "step" or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            tags.append(key)
            steps.append(step if logged else index)
            values.append(float(value))
            positions.append(index)
            ordinal.append(not logged)
    return scalars_frame(pl.DataFrame(
        {"tag": tags, "step": steps, "value": values, "position": positions, "ordinal": ordinal},
        schema={"tag": pl.Utf8, "step": pl.Int64, "value": pl.Float64, "position": pl.Int64,
                "ordinal": pl.Boolean}))


def _salvage(text: str) -> tuple[dict[str, Any] | None, str]:
    """The complete `log_history` entries of a damaged file, one JSON value at a time."""
    key = text.find('"log_history"')
    bracket = text.find("[", key) if key >= 0 else -1
    if bracket < 0:
        return None, "no log_history found before the damage; nothing kept"
    decoder = json.JSONDecoder()
    entries: list[Any] = []
    pos = bracket + 1
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            break
        try:
            value, pos = decoder.raw_decode(text, pos)
        except (json.JSONDecodeError, RecursionError):  # the damage, or an entry nested past any limit
            break
        entries.append(value)
    return {"log_history": entries}, f"kept the {len(entries)} complete log_history entries before it"


def read_training_args(path: Path, start: int = 0) -> Iterator[Chunk]:
    """`training_args.bin` is a pickle (torch.save of TrainingArguments): listed, never unpickled."""
    if start > 0:
        return
    yield Chunk(end=1, issues=[Issue(None, "needs_pickle",
                                     "training_args.bin is a pickled TrainingArguments; not read, since "
                                     "unpickling runs code. The run's trainer_state.json and config.json "
                                     "hold what the analysis needs")])
