"""A fill-in `forensics_entry.py` for a run that has none, built from what the store knows about it: config keys,
the checkpoint's tensor names and shapes, the saved batches' keys and shapes (DECISIONS.md §10)."""

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
        f'"""Replay entry point for run {run.name} (DECISIONS.md §10). Fill in the TODOs; `forensics replay` imports',
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
    keys_hint = ", ".join(f'batch["{n}"]' for n, _, _ in batch) or 'batch["x"], batch["y"]'
    lines += ["def loss_fn(model: torch.nn.Module, batch: dict) -> torch.Tensor:",
              f"    # TODO: the mean loss of the batch, from {keys_hint}; no casting or moving of inputs",
              "    raise NotImplementedError", "", "",
              "def build_optimizer(model: torch.nn.Module, config: dict) -> torch.optim.Optimizer:",
              "    # TODO: the run's optimizer, parameters in the run's order (optimizer state is index-based)",
              "    return torch.optim.AdamW(model.parameters(), lr=config.get(\"lr\", 1e-3))", "", "",
              "def step_options(config: dict) -> dict:",
              "    # max_grad_norm: None = no clip_grad_norm_ call; grad_scaler: GradScaler settings when AMP was used",
              "    return {\"max_grad_norm\": None, \"grad_accumulation_steps\": 1}", ""]
    return "\n".join(lines)


def _common_prefix(names: list[str]) -> str:
    for prefix in ("_orig_mod.", "module.", "model."):
        if names and all(n.startswith(prefix) for n in names):
            return prefix
    return ""
