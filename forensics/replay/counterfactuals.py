"""Counterfactuals: the bad step re-run with one change at a time, each from the same saved state.

fp32 (no autocast), clip_1.0 (clip the gradient norm at 1.0), lr_div_10 (this step's learning rate / 10),
drop_culprits (the culprit samples removed from the batch). Each reports whether the step stays finite, and the
loss and gradient norm it gives; a change that cannot apply says why instead of pretending.
"""

from __future__ import annotations

from typing import Any

import torch

from forensics.replay.state import State, StepOut, batch_size, restore, run_step, select

CHANGES = ("fp32", "clip_1.0", "lr_div_10", "drop_culprits")


def try_changes(st: State, snap: dict, batch: dict[str, torch.Tensor], culprits: list[int],
                baseline: StepOut | None = None) -> list[dict[str, Any]]:
    """Each change from the same snapshot. A change that is what the run already did (fp32 without autocast,
    clipping at 1.0 where the run clips at 1.0 or less) is not re-run: it reports `baseline`, the replayed step."""
    out = []
    n = batch_size(batch)
    for change in CHANGES:
        row: dict[str, Any] = {"change": change}
        b, how = batch, change
        same = None
        if change == "fp32" and not st.options.autocast_dtype:
            same = "the run already computes in float32 (no autocast in step_options): same as the replay"
        if change == "clip_1.0" and st.options.max_grad_norm is not None and st.options.max_grad_norm <= 1.0:
            same = f"the run already clips at {st.options.max_grad_norm}: same as the replay"
        if same is not None:
            row["note"] = same
            if baseline is not None:
                out.append({**row, "finite": baseline.finite, "loss": baseline.loss, "grad_norm": baseline.grad_norm,
                            "applicable": True, "phase": baseline.phase, "rerun": False})
                continue
        if change == "drop_culprits":
            if not culprits or len(culprits) >= n:
                out.append({**row, "finite": None, "loss": None, "grad_norm": None, "applicable": False,
                            "note": "no culprit samples to drop" if not culprits else "every sample is a culprit"})
                continue
            keep = [i for i in range(n) if i not in set(culprits)]
            b, how = select(batch, keep), None
            row["n_samples"] = len(keep)
        restore(st, snap)
        res = run_step(st, b, change=how)
        row.update({"finite": res.finite, "loss": res.loss, "grad_norm": res.grad_norm, "applicable": True,
                    "phase": res.phase})
        out.append(row)
    restore(st, snap)
    return out
