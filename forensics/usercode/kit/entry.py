"""The user's entry point (DECISIONS.md §10), the run's saved config, and what the entry point says the training
step did around `loss_fn`. Importing the entry point runs the user's code and writes no `__pycache__` into the run
directory."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ingest.errors import EntryPointError

ENTRY_NAME = "forensics_entry.py"
CODE_SUFFIXES = (".py",)  # the run's code (its entry point, its training script): not logs, never run by analyze


def is_code(path: str) -> bool:
    return path.endswith(CODE_SUFFIXES)


def read_config(root: Path, store_config: dict[str, Any] | None = None) -> tuple[dict, str]:
    """The run's saved config and where it came from: the root's config file as ingest reads it
    (`ingest.configs.root_config`), else the config the store read elsewhere (W&B, Lightning's hparams.yaml), as
    a nested dict. ({}, "none") when there is none; a root config that does not parse falls back to the store's."""
    from ingest.configs import root_config

    doc, name, issue = root_config(root)
    if doc is not None:
        return doc, name
    if store_config:
        return store_config, "store" + (f" ({name} unreadable: {issue.detail})" if issue else "")
    if issue is not None:
        raise EntryPointError(f"{name} at the run root cannot be read ({issue.detail}) and the store holds no "
                              f"other config; fix the file (see docs/replay.md)")
    return {}, "none"


def load_entry(path: Path) -> Any:
    """Import the user's entry point (this runs their code: `forensics replay` is the opt-in)."""
    if not path.is_file():
        raise EntryPointError(f"no entry point at {path}")
    spec = importlib.util.spec_from_file_location(f"forensics_entry_{abs(hash(str(path)))}", path)
    mod = importlib.util.module_from_spec(spec)
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no __pycache__ inside the run directory
    try:
        spec.loader.exec_module(mod)
    except Exception as exc:
        raise EntryPointError(f"importing {path} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.dont_write_bytecode = saved
    missing = [f for f in ("build_model", "loss_fn") if not callable(getattr(mod, f, None))]
    if missing:
        raise EntryPointError(f"{path} defines no {' or '.join(missing)} (docs/replay.md: the entry point needs build_model "
                              f"and loss_fn; build_optimizer, build_scheduler, step_options are optional)")
    return mod


@dataclass(frozen=True)
class StepOptions:
    """What the run's step did around `loss_fn` (the entry point's `step_options`)."""

    max_grad_norm: float | None = None
    grad_accumulation_steps: int = 1
    grad_scaler: dict | None = None
    autocast_dtype: str | None = None          # "float16" / "bfloat16" when the forward ran under autocast
    step_numbering: str | None = None          # overrides the checkpoint layout's (ingest.checkpoints.STEP_NUMBERINGS)

    @classmethod
    def from_entry(cls, entry: Any, config: dict) -> StepOptions:
        from ingest.checkpoints import STEP_NUMBERINGS

        raw = dict(entry.step_options(config)) if callable(getattr(entry, "step_options", None)) else {}
        gs = raw.get("grad_scaler")
        numbering = raw.get("step_numbering")
        if numbering is not None and numbering not in STEP_NUMBERINGS:
            raise EntryPointError(f"step_options: unknown step_numbering {numbering!r}; accepted: "
                                  f"{', '.join(STEP_NUMBERINGS)} (or leave it out: the checkpoint's layout says "
                                  f"what its step means; see docs/replay.md)")
        return cls(max_grad_norm=raw.get("max_grad_norm"),
                   grad_accumulation_steps=int(raw.get("grad_accumulation_steps") or 1),
                   grad_scaler=(gs if isinstance(gs, dict) else {}) if gs else None,
                   autocast_dtype=raw.get("autocast_dtype"), step_numbering=numbering)


def nested_config(flat: dict[str, Any]) -> dict[str, Any]:
    """The store's dotted config keys as a nested dict (a fallback when the run root holds no config file)."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        node = out
        parts = key.split(".")
        for p in parts[:-1]:
            nxt = node.setdefault(p, {})
            if not isinstance(nxt, dict):
                break
            node = nxt
        else:
            node.setdefault(parts[-1], value)
    return out
