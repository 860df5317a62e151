"""The process's random number generators (Python, numpy, torch's CPU and CUDA ones), read and set: a checkpoint's
saved states are set before a replayed step, and replay and probe give the caller's back when they return."""

from __future__ import annotations

import random

import torch


def set_rng(rng: dict) -> None:
    import numpy as np
    if rng.get("python") is not None:
        random.setstate(rng["python"])
    if rng.get("numpy") is not None:
        state = rng["numpy"]
        if isinstance(state, list):  # forensics.capture stores numpy's keys as a tensor (weights_only-safe)
            state = (state[0], np.asarray(state[1], dtype=np.int64).astype(np.uint32), *state[2:])
        np.random.set_state(tuple(state))
    if rng.get("cpu") is not None:
        torch.set_rng_state(rng["cpu"])
    cuda = rng.get("cuda")
    if cuda is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda) if isinstance(cuda, (list, tuple)) else torch.cuda.set_rng_state(cuda)


def get_rng() -> dict:
    import numpy as np
    out = {"python": random.getstate(), "numpy": np.random.get_state(), "cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        out["cuda"] = torch.cuda.get_rng_state_all()
    return out
