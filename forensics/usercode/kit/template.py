"""A fill-in `forensics_entry.py` for a run that has none, built from what the store knows about it: config keys,
the checkpoint's tensor names and shapes, the saved batches' keys and shapes (docs/replay.md). The optimizer and
step_options read the config's own keys (`optim.lr` as `config["optim"]["lr"]`, `max_grad_norm`), where it has them."""

from __future__ import annotations

from typing import Any


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
    lines = [
        f'"""Replay entry point for run {run.name} (docs/replay.md). Fill in the TODOs; `forensics replay` imports',
        'this file (running it runs your code) and does the rest: checkpoint choice, state restore, instrumentation."""',
        "",
        "import torch",
        "",
        "# config keys found for this run: " + (", ".join(keys[:40]) + (" ..." if len(keys) > 40 else "") if keys else "none"),
    ]
    if params:
        lines.append("# checkpoint tensors (name: shape), in the order saved:")
        lines += [f"#   {n}: {list(s) if s is not None else '?'}" for n, s in params[:60]]
        if len(params) > 60:
            lines.append(f"#   ... {len(params) - 60} more")
    prefix = _common_prefix([n for n, _ in params])
    if prefix:
        lines += ["", f'STATE_DICT_PREFIX = "{prefix}"  # stripped from the checkpoint\'s keys']
    lines += ["", "", "def build_model(config: dict) -> torch.nn.Module:",
              "    # TODO: build the model exactly as training did, e.g. return MyNet(**config[\"model\"])",
              "    raise NotImplementedError", "", ""]
    if batch:
        lines.append("# saved batch keys (name: shape, dtype): " + "; ".join(
            f"{n}: {list(s) if s is not None else '?'}, {d}" for n, s, d in batch))
    lr = _access(_key(keys, LR_KEYS)) or "1e-3  # TODO: no learning rate in the stored config"
    clip = _access(_key(keys, CLIP_KEYS)) or "None"
    accumulation = _access(_key(keys, ACCUMULATION_KEYS)) or "1"
    keys_hint = ", ".join(f'batch["{n}"]' for n, _, _ in batch) or 'batch["x"], batch["y"]'
    lines += ["def loss_fn(model: torch.nn.Module, batch: dict) -> torch.Tensor:",
              f"    # TODO: the mean loss of the batch, from {keys_hint}; no casting or moving of inputs",
              "    raise NotImplementedError", "", "",
              "def build_optimizer(model: torch.nn.Module, config: dict) -> torch.optim.Optimizer:",
              "    # TODO: the run's optimizer, parameters in the run's order (optimizer state is index-based)",
              f"    return torch.optim.AdamW(model.parameters(), lr={lr})", "", "",
              "def step_options(config: dict) -> dict:",
              "    # max_grad_norm: None = no clip_grad_norm_ call; grad_scaler: GradScaler settings when AMP was used",
              f"    return {{\"max_grad_norm\": {clip}, \"grad_accumulation_steps\": {accumulation}}}", ""]
    return "\n".join(lines)


# Config keys (the last part of a dotted key) that hold the learning rate, the clipping norm, the accumulation.
LR_KEYS = ("lr", "learning_rate", "base_lr", "max_lr", "peak_lr")
CLIP_KEYS = ("max_grad_norm", "grad_clip", "clip_grad_norm", "gradient_clip_val", "clip_grad", "max_norm")
ACCUMULATION_KEYS = ("grad_accumulation_steps", "gradient_accumulation_steps", "accumulate_grad_batches",
                     "grad_accum_steps")


def _key(keys: list[str], names: tuple[str, ...]) -> str | None:
    """The dotted config key for the first of `names` found as a key's last part (shortest key first)."""
    for name in names:
        found = sorted((k for k in keys if k.rsplit(".", 1)[-1] == name), key=lambda k: (k.count("."), k))
        if found:
            return found[0]
    return None


def _access(key: str | None) -> str | None:
    """`optim.lr` -> `config["optim"]["lr"]`."""
    return "config" + "".join(f"[{part!r}]".replace("'", '"') for part in key.split(".")) if key else None


def _common_prefix(names: list[str]) -> str:
    for prefix in ("_orig_mod.", "module.", "model."):
        if names and all(n.startswith(prefix) for n in names):
            return prefix
    return ""
