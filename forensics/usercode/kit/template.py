"""A fill-in `forensics_entry.py` for a run that has none, built from what the store knows about it: config keys,
the checkpoint's tensor names and shapes, the saved batches' keys and shapes (docs/replay.md). The optimizer and
step_options read the config's own keys (`optim.lr` as `config["optim"]["lr"]`, `max_grad_norm`), where it has them.
It is valid Python whatever the config holds (no learning rate, no optimizer or model section, keys with quotes or
line breaks): everything taken from the run is a comment on one line or a quoted string; its first lines say what
the user must fill in. `missing_entry` is the one error replay and probe raise without an entry point."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from forensics.judge.detectors.frequent_clipping import CLIP_KEYS
from forensics.judge.detectors.lr_schedule_anomaly import ACCUMULATION_KEYS

# Config keys (the last part of a dotted key) that hold the learning rate.
LR_KEYS = ("lr", "learning_rate", "base_lr", "max_lr", "peak_lr")


def entry_path(run: Any, root: Path, entry: str | os.PathLike | None) -> Path:
    """The entry point replay and probe import: `entry`, else the run root's `forensics_entry.py`. Raises
    `missing_entry` (with the template) when it is not a file."""
    from forensics.usercode.kit.entry import ENTRY_NAME

    path = Path(entry).resolve() if entry else root / ENTRY_NAME
    if not path.is_file():
        raise missing_entry(run, path)
    return path


def missing_entry(run: Any, path: Path) -> Exception:
    """The error for a run without an entry point, one text for replay and probe, carrying the template."""
    from ingest.errors import EntryPointError

    return EntryPointError(
        f"no entry point {path} (docs/replay.md, DECISIONS.md §10): fill in the template printed above and save it "
        f"beside the run as forensics_entry.py, or pass --entry FILE.py", template=entry_template(run))


def entry_template(run: Any) -> str:
    keys = sorted(run._configs)
    ts = run.table("tensor_stats")
    params: list[tuple[str, list]] = []
    if ts.height:
        first = ts.filter(ts["ckpt_id"] == ts["ckpt_id"].min())
        first = first.filter(first["kind"].is_in(["param", "buffer"]))
        params = list(zip(first["tensor"].to_list(), first["shape"].to_list()))
    bs = run.table("batch_stats")
    batch: list[tuple[str, list, str]] = []
    if bs.height:
        one = bs.filter(bs["batch_id"] == bs["batch_id"].min())
        batch = list(zip(one["tensor"].to_list(), one["shape"].to_list(), one["dtype"].to_list()))
    lr, clip, accumulation = _access(_key(keys, LR_KEYS)), _access(_key(keys, CLIP_KEYS)), _access(_key(keys, ACCUMULATION_KEYS))
    todo = ["build_model: build the model exactly as training did", "loss_fn: the batch's mean loss",
            "build_optimizer: the run's optimizer" + ("" if lr else " and its learning rate (none in the stored config)")]
    lines = [
        f'"""Replay entry point for run {_text(run.name)} (docs/replay.md). `forensics replay` and `forensics probe` import',
        "this file (running it runs your code) and do the rest: checkpoint choice, state restore, instrumentation.",
        "",
        "Fill in before use (each is marked TODO below):",
        *(f"- {t}" for t in todo),
        '"""',
        "",
        "import torch",
        "",
        _comment("config keys found for this run: " + (", ".join(keys[:40]) + (" ..." if len(keys) > 40 else "")
                                                       if keys else "none")),
    ]
    if params:
        lines.append("# checkpoint tensors (name: shape), in the order saved:")
        lines += [_comment(f"  {n}: {list(s) if s is not None else '?'}") for n, s in params[:60]]
        if len(params) > 60:
            lines.append(f"#   ... {len(params) - 60} more")
    prefix = _common_prefix([n for n, _ in params])
    if prefix:
        lines += ["", f"STATE_DICT_PREFIX = {json.dumps(prefix)}  # stripped from the checkpoint's keys"]
    lines += ["", "", "def build_model(config: dict) -> torch.nn.Module:",
              '    # TODO: build the model exactly as training did, e.g. return MyNet(**config["model"])',
              "    raise NotImplementedError", "", ""]
    if batch:
        lines.append(_comment("saved batch keys (name: shape, dtype): " + "; ".join(
            f"{n}: {list(s) if s is not None else '?'}, {d}" for n, s, d in batch)))
    keys_hint = ", ".join(f"batch[{json.dumps(n)}]" for n, _, _ in batch) or 'batch["x"], batch["y"]'
    lines += ["def loss_fn(model: torch.nn.Module, batch: dict) -> torch.Tensor:",
              _comment(f"TODO: the mean loss of the batch, from {keys_hint}; no casting or moving of inputs", 4),
              "    raise NotImplementedError", "", "",
              "def build_optimizer(model: torch.nn.Module, config: dict) -> torch.optim.Optimizer:",
              "    # TODO: the run's optimizer, parameters in the run's order (optimizer state is index-based)"]
    if lr is None:
        lines.append("    # TODO: no learning rate in the stored config: put the run's here")
    lines += [f"    return torch.optim.AdamW(model.parameters(), lr={lr or '1e-3'})", "", "",
              "def step_options(config: dict) -> dict:",
              "    # max_grad_norm: None = no clip_grad_norm_ call; grad_scaler: GradScaler settings when AMP was used",
              f"    return {{\"max_grad_norm\": {clip or 'None'}, \"grad_accumulation_steps\": {accumulation or '1'}}}", ""]
    return "\n".join(lines)


def _line(text: Any) -> str:
    """Text from the run on one line: control characters (a line break would end a comment) written as escapes."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in str(text))


def _text(value: Any) -> str:
    """Text from the run safe inside the docstring: backslashes and quotes escaped, on one line."""
    return _line(str(value).replace("\\", "\\\\").replace('"', '\\"'))


def _comment(text: str, indent: int = 0) -> str:
    return " " * indent + "# " + _line(text)


def _key(keys: list[str], names: tuple[str, ...]) -> str | None:
    """The dotted config key for the first of `names` found as a key's last part (shortest key first)."""
    for name in names:
        found = sorted((k for k in keys if k.rsplit(".", 1)[-1] == name), key=lambda k: (k.count("."), k))
        if found:
            return found[0]
    return None


def _access(key: str | None) -> str | None:
    """`optim.lr` -> `config["optim"]["lr"]`, each part a Python string literal whatever it holds."""
    return "config" + "".join(f"[{json.dumps(part)}]" for part in key.split(".")) if key else None


def _common_prefix(names: list[str]) -> str:
    for prefix in ("_orig_mod.", "module.", "model."):
        if names and all(n.startswith(prefix) for n in names):
            return prefix
    return ""
