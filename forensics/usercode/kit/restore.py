"""Model, optimizer, scheduler and scaler rebuilt by the entry point, with a checkpoint's states loaded in
DECISIONS.md §10's order: what replay and probe start from. Checkpoints are untrusted: read through the one layout
table (`ingest.checkpoints.read_states`: torch files with `weights_only=True`, weights preferably from safetensors)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from forensics.usercode.kit.entry import StepOptions
from forensics.usercode.kit.rng import set_rng
from ingest.checkpoints import States, strip_prefix
from ingest.errors import CheckpointMismatch


@dataclass
class State:
    """Model, optimizer, scheduler and scaler rebuilt by the entry point, with the checkpoint's states loaded."""

    entry: Any
    config: dict
    options: StepOptions
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: Any
    scaler: Any
    device: torch.device
    restored: list[str]
    notes: list[str]


def restore_checkpoint(entry: Any, config: dict, root: Path, rel: str, fmt: str, device: torch.device) -> State:
    """The entry point's model, optimizer, scheduler and scaler with checkpoint `rel` (of layout `fmt`, as the
    store found it) loaded into them: what replay and probe start from. Raises CheckpointMismatch when the
    checkpoint cannot be read with weights_only=True or does not fit the entry point's model."""
    from ingest.checkpoints import read_states

    return build_state(entry, config, read_states(root, rel, fmt), device)


def build_state(entry: Any, config: dict, saved: States, device: torch.device) -> State:
    """§10's order: build model, optimizer, scheduler; then load their saved states; then the RNG."""
    options = StepOptions.from_entry(entry, config)
    model = entry.build_model(config)
    model.train()  # the tool, not the entry point, sets train mode
    restored, notes = ["model"], list(saved.notes)
    wanted = set(model.state_dict())
    state = strip_prefix(saved.model, wanted, getattr(entry, "STATE_DICT_PREFIX", None))  # torch.compile's _orig_mod. too
    missing, unexpected = sorted(wanted - set(state)), sorted(set(state) - wanted)
    if missing or unexpected:
        raise CheckpointMismatch(
            f"{saved.path} does not fit the entry point's model: missing {missing[:5]}{'...' if len(missing) > 5 else ''}, "
            f"unexpected {unexpected[:5]}{'...' if len(unexpected) > 5 else ''}")
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        raise CheckpointMismatch(f"{saved.path} does not fit the entry point's model: {str(exc).splitlines()[-1].strip()}") from None
    model.to(device)
    if callable(getattr(entry, "build_optimizer", None)):
        optimizer = entry.build_optimizer(model, config)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
        notes.append("entry point has no build_optimizer: the update is not replayed (SGD lr=0)")
    scheduler = entry.build_scheduler(optimizer, config) if callable(getattr(entry, "build_scheduler", None)) else None
    scaler = None
    if options.grad_scaler is not None:
        scaler = torch.amp.GradScaler(device.type, **{k: v for k, v in options.grad_scaler.items()
                                                      if k in ("init_scale", "growth_factor", "backoff_factor",
                                                               "growth_interval", "enabled")})
    if saved.optimizer is not None:
        try:
            optimizer.load_state_dict(saved.optimizer)
        except (ValueError, KeyError, RuntimeError) as exc:
            raise CheckpointMismatch(f"{saved.path}: optimizer state does not fit build_optimizer's optimizer ({exc}); "
                                     f"build_optimizer must list parameters in the run's order") from None
        restored.append("optimizer")
    else:
        notes.append(f"{saved.path} holds no optimizer state: {type(optimizer).__name__} starts from empty state, "
                     f"so later steps are not the run's")
    if scheduler is not None:
        if saved.scheduler is not None:
            scheduler.load_state_dict(saved.scheduler)
            restored.append("scheduler")
        else:
            notes.append(f"{saved.path} holds no scheduler state")
    if scaler is not None:
        if saved.scaler is not None:
            scaler.load_state_dict(saved.scaler)
            restored.append("scaler")
        else:
            notes.append(f"{saved.path} holds no GradScaler state: the scale starts at its initial value")
    if saved.rng is not None:
        set_rng(saved.rng)
        restored.append("rng")
    return State(entry, config, options, model, optimizer, scheduler, scaler, device, restored, notes)
