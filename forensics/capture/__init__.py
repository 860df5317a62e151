"""Capture what `forensics replay` needs while training, so that the next failed run can be replayed.

Plain PyTorch, two lines:

    cap = Capture("runs/exp1", config=config, every=100, model=model, optimizer=optimizer)   # before the loop
    for step, batch in enumerate(loader, start=1):
        loss = loss_fn(model, batch); loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step(); scheduler.step(); optimizer.zero_grad()
        cap.step(step, batch, loss, grad_norm, model, optimizer, scheduler)   # after the update

It writes the layout replay reads (DECISIONS.md §10), and nothing else:

    config.json                  the config (once, at start)
    checkpoints/step_N.pt        every `every` steps: model, optimizer, scheduler, GradScaler and RNG states
                                 (plain tensors and containers: readable with torch.load(weights_only=True));
                                 checkpoints/step_0.pt, the state at initialisation, when the model is given at
                                 construction (`forensics probe` starts its overfit and initial-loss checks there)
    batches/step_N.pt            the first `first` batches of the run (what `forensics probe` trains and measures
                                 on), and the last `keep` batches (a ring buffer in CPU memory), written when the
                                 loss or gradient norm turns non-finite or spikes (> `spike` x the median of the
                                 last 50)
    forensics_metrics.jsonl      every step's loss and gradient norm at full precision (fidelity's reference)

`keep` defaults to `every`, so the batches since the last checkpoint are always there. The entry point
(`forensics_entry.py`) is the user's own model and loss code; `forensics replay RUN_DIR` prints a fill-in template
when it is missing. The HF Trainer callback (`forensics.capture.hf`) and the Lightning callback
(`forensics.capture.lightning`) write the same layout from inside those libraries.
"""

from __future__ import annotations

import json
import math
import os
import random
from collections import deque
from pathlib import Path
from typing import Any

METRICS_FILE = "forensics_metrics.jsonl"


def rng_state() -> dict[str, Any]:
    """Python, numpy, torch CPU and CUDA RNG states as tensors and plain containers (weights_only-safe)."""
    import numpy as np
    import torch

    name, keys, pos, has_gauss, gauss = np.random.get_state()
    out = {"python": random.getstate(), "numpy": [name, torch.from_numpy(keys.astype(np.int64)), int(pos),
                                                  int(has_gauss), float(gauss)],
           "cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        out["cuda"] = torch.cuda.get_rng_state_all()
    return out


def _to_cpu(x: Any) -> Any:
    import torch

    if isinstance(x, torch.Tensor):
        return x.detach().to("cpu", copy=True)
    if isinstance(x, dict):
        return {k: _to_cpu(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_to_cpu(v) for v in x)
    return x


def _scalar(x: Any) -> float | None:
    if x is None:
        return None
    return float(x.detach().float()) if hasattr(x, "detach") else float(x)


class Capture:
    """Periodic full checkpoints, a ring buffer of the last batches flushed on trouble, and a full-precision
    log of loss and gradient norm. Steps are the numbers the caller passes (logged steps)."""

    def __init__(self, run_dir: str | os.PathLike, config: dict | None = None, every: int = 100,
                 keep: int | None = None, spike: float = 10.0, state_dict_prefix: str = "", model: Any = None,
                 optimizer: Any = None, scheduler: Any = None, scaler: Any = None, first: int = 4):
        self.root = Path(run_dir)
        self.root.mkdir(parents=True, exist_ok=True)
        self.every, self.keep, self.spike, self.first = every, keep or every, spike, first
        self.prefix = state_dict_prefix
        self.ring: deque[tuple[int, dict]] = deque(maxlen=self.keep)
        self.recent: deque[float] = deque(maxlen=50)
        self.flushed: set[int] = set()
        self.tripped = False
        if config is not None:
            (self.root / "config.json").write_text(json.dumps(config, indent=2, default=str) + "\n")
        if model is not None:  # the state at initialisation: probe's overfit and initial-loss checks start here
            self.checkpoint(0, model, optimizer, scheduler, scaler)

    def step(self, step: int, batch: Any, loss: Any = None, grad_norm: Any = None, model: Any = None,
             optimizer: Any = None, scheduler: Any = None, scaler: Any = None) -> None:
        """Record one finished step (call it after the optimizer update)."""
        self.remember(step, batch)
        self.log(step, loss, grad_norm)
        if model is not None and self.every and step % self.every == 0:
            self.checkpoint(step, model, optimizer, scheduler, scaler)

    def remember(self, step: int, batch: Any) -> None:
        """Put the step's batch in the ring buffer (tensors copied to CPU; non-tensor entries dropped)."""
        import torch

        if isinstance(batch, dict):
            kept = {k: _to_cpu(v) for k, v in batch.items() if isinstance(v, torch.Tensor)}
        elif isinstance(batch, (list, tuple)):  # (inputs, targets) tuples become a dict the entry point indexes
            kept = {f"x{i}": _to_cpu(v) for i, v in enumerate(batch) if isinstance(v, torch.Tensor)}
        else:
            kept = {"x0": _to_cpu(batch)}
        self.ring.append((step, kept))
        if len(self.flushed) < self.first and not self.tripped and step not in self.flushed:
            self.flush()  # the run's first batches are always kept: a probe trains and measures on them

    def log(self, step: int, loss: Any, grad_norm: Any) -> None:
        """Append loss and grad norm at full precision; flush the ring on a non-finite value or a spike."""
        lv, gv = _scalar(loss), _scalar(grad_norm)
        row = {"step": step}
        if lv is not None:
            row["loss"] = lv
        if gv is not None:
            row["grad_norm"] = gv
        with open(self.root / METRICS_FILE, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")  # json writes NaN/Infinity tokens, which the JSONL reader keeps
        bad = any(v is not None and not math.isfinite(v) for v in (lv, gv))
        spiking = (lv is not None and math.isfinite(lv) and len(self.recent) >= 10
                   and lv > self.spike * sorted(self.recent)[len(self.recent) // 2])
        if (bad and not self.tripped) or spiking:
            self.flush()
            self.tripped = self.tripped or bad
        if lv is not None and math.isfinite(lv):
            self.recent.append(lv)

    def flush(self) -> list[Path]:
        """Write every batch in the ring buffer not written yet: batches/step_N.pt."""
        import torch

        out = []
        (self.root / "batches").mkdir(exist_ok=True)
        for s, b in self.ring:
            if s in self.flushed:
                continue
            path = self.root / "batches" / f"step_{s}.pt"
            torch.save(b, path)
            self.flushed.add(s)
            out.append(path)
        return out

    def checkpoint(self, step: int, model: Any, optimizer: Any = None, scheduler: Any = None, scaler: Any = None) -> Path:
        """Save model, optimizer, scheduler, scaler and RNG states as checkpoints/step_N.pt (the state after
        step N: a replay starts at step N + 1)."""
        import torch

        obj: dict[str, Any] = {"step": step, "model": _to_cpu(model.state_dict()), "rng": rng_state()}
        if optimizer is not None:
            obj["optimizer"] = _to_cpu(optimizer.state_dict())
        if scheduler is not None:
            obj["scheduler"] = scheduler.state_dict()
        if scaler is not None:
            obj["scaler"] = scaler.state_dict()
        (self.root / "checkpoints").mkdir(exist_ok=True)
        path = self.root / "checkpoints" / f"step_{step}.pt"
        tmp = path.with_suffix(".pt.tmp")
        torch.save(obj, tmp)
        tmp.replace(path)  # a crash mid-save leaves the previous checkpoints intact
        return path
