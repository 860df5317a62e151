"""Launcher scripts (`run.sh`, `train.sh`, a Slurm batch file): the settings their training command declares.

A run folder often keeps the script that started it, its settings as a trainer's arguments (`deepspeed train.py
--learning_rate 2e-5 --lr_scheduler_type "cosine" --warmup_ratio 0.03`): what the run was told to do, where no
other file says it (HF's trainer_state.json holds no arguments). Each command that starts a trainer (python,
torchrun, deepspeed, accelerate, ...) is read, its `--key value` and `--key=value` pairs (a flag alone is true)
stored as one config document under the script's name, keys as argparse names them (`--learning-rate` is
`learning_rate`). Commented lines (`# --fsdp ...`, a command left in a comment) are no settings; a setting two
commands give different values is left out (which one the run used is unknown); `$NAME` takes the value the script
assigns to NAME, where it does."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ingest.decoding import decode
from ingest.records import Chunk, Issue

MAX_SCRIPT_BYTES = 1 << 20  # a launcher is a page of text; a larger file is no script to read settings from
# A command that starts a trainer: an interpreter or a distributed launcher, as a word of the command.
_STARTS_TRAINER = re.compile(r"(?:^|[\s;&|/])(?:python[\d.]*|torchrun|deepspeed|accelerate|horovodrun|"
                             r"lightning|composer|fairseq-train|allennlp|tune)(?=\s)")
_ASSIGNMENT = re.compile(r"^\s*(?:export\s+)?([A-Za-z_]\w*)=(\S*)\s*$")
_VARIABLE = re.compile(r"\$\{([A-Za-z_]\w*)\}|\$([A-Za-z_]\w*)")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def read_launcher(path: Path, start: int = 0) -> Iterator[Chunk]:
    """One chunk: the settings of the script's trainer commands as a config document (none where it starts no
    trainer). Always read whole (`start` is ignored)."""
    if path.stat().st_size > MAX_SCRIPT_BYTES:
        yield Chunk(end=1, issues=[Issue(None, "not_this_format", f"{path.name} is too large for a launcher script; "
                                                                  "its settings were not read")])
        return
    settings = declared(decode(path.read_bytes()))
    yield Chunk(end=1, configs={path.name: settings} if settings else {})


def declared(text: str) -> dict[str, Any]:
    """The settings the trainer commands of a script's text declare (see the module's docstring)."""
    variables: dict[str, str] = {}
    found: dict[str, Any] = {}
    conflicting: set[str] = set()
    for line in _commands(text):
        assigned = _ASSIGNMENT.match(line)
        if assigned:
            variables[assigned.group(1)] = assigned.group(2).strip("'\"")
            continue
        if not _STARTS_TRAINER.search(line):
            continue
        for key, value in _pairs(line, variables).items():
            if key in found and found[key] != value:
                conflicting.add(key)
            found.setdefault(key, value)
    return {k: v for k, v in found.items() if k not in conflicting}


def _commands(text: str) -> list[str]:
    """The script's lines with continuations joined and comments dropped: a commented line inside a continued
    command (`# --fsdp "full_shard"`) is left out and the command goes on."""
    out, pending = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("#"):
            if pending and not raw.rstrip().endswith("\\"):
                out.append(pending)
                pending = ""
            continue
        line = re.sub(r"\s#.*$", "", line)
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append(pending + line)
        pending = ""
    if pending:
        out.append(pending)
    return out


def _pairs(command: str, variables: dict[str, str]) -> dict[str, Any]:
    command = _VARIABLE.sub(lambda m: variables.get(m.group(1) or m.group(2), m.group(0)), command)
    try:
        tokens = shlex.split(command, comments=False, posix=True)
    except ValueError:  # an unclosed quote: read the words as they are
        tokens = command.split()
    out: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not token.startswith("--") or len(token) < 3:
            continue
        key, eq, value = token[2:].partition("=")
        if not re.fullmatch(r"[A-Za-z][\w.-]*", key):
            continue
        key = key.replace("-", "_")
        if not eq:
            nxt = tokens[i] if i < len(tokens) else None
            if nxt is None or nxt.startswith("-") and not _NUMBER.fullmatch(nxt) or nxt in (";", "&&", "|", "&"):
                out.setdefault(key, True)
                continue
            value = nxt
            i += 1
        out.setdefault(key, _value(value))
    return out


def _value(text: str) -> Any:
    if _NUMBER.fullmatch(text):
        try:
            return int(text)
        except ValueError:
            return float(text)
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text
