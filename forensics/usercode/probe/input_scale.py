"""input_scale: the saved batch's input statistics (mean, std, |max| per floating-point entry and per feature) and
the first layer's pre-activation range, from the step-0 (else earliest) checkpoint.

Fails when a floating-point input is far from standardised (its std or |mean| above `MAX_SCALE`: pixels in 0-255,
raw physical units, a wrong multiplier) or when the first layer's outputs have a std above `MAX_SCALE` (a tanh or
sigmoid after it saturates: tanh(10) = 1 - 4e-9). Integer inputs (token ids, labels) have no scale to judge.
"""

from __future__ import annotations

from typing import Any

import torch

from forensics.usercode.probe.context import Context, check_result

MAX_SCALE = 10.0


def entry_stats(x: torch.Tensor) -> dict[str, Any]:
    """Mean, std and |max| of one batch entry, and the largest per-feature |mean| and std (features: the last
    dimension for 2-D entries, the channel dimension 1 for larger ones)."""
    x = x.detach().float()
    feat_dim = 1 if x.dim() > 2 else x.dim() - 1
    per = x.transpose(0, feat_dim).reshape(x.shape[feat_dim], -1) if x.dim() > 1 else x.reshape(1, -1)
    return {"shape": list(x.shape), "mean": float(x.mean()), "std": float(x.std()) if x.numel() > 1 else 0.0,
            "abs_max": float(x.abs().max()), "feature_abs_mean_max": float(per.mean(dim=1).abs().max()),
            "feature_std_max": float(per.std(dim=1).max()) if per.shape[1] > 1 else 0.0}


def check(ctx: Context, me: Any) -> dict[str, Any]:
    step = ctx.batch_near("first")
    batch = ctx.batch(step)
    obs = ctx.observation("first")
    targets = {c.target_key for c in obs.calls if c.target_key and not c.target_shared}
    inputs = {k: entry_stats(v) for k, v in batch.items() if v.is_floating_point() and k not in targets and v.numel()}
    first = obs.first_layer
    ev: dict[str, Any] = {"batch_step": step, "inputs": inputs, "first_layer": first, "max_scale": MAX_SCALE}
    if not inputs and first is None:
        return check_result(me.name, "n/a", "no floating-point input and no linear, conv or embedding layer seen: "
                            "nothing to measure", ev, explains=me.explains)
    bad = {k: s for k, s in inputs.items() if s["std"] > MAX_SCALE or abs(s["mean"]) > MAX_SCALE}
    wide = first is not None and first["std"] > MAX_SCALE
    names = sorted(bad) + ([first["module"]] if wide and first["module"] else [])
    parts = [f"input {k}: mean {s['mean']:.3g}, std {s['std']:.3g}, |max| {s['abs_max']:.3g}" for k, s in bad.items()]
    if wide:
        parts.append(f"first layer {first['module'] or first['op']} ({first['op']}) outputs std {first['std']:.3g}, "
                     f"|max| {first['abs_max']:.3g}: a tanh or sigmoid after it saturates")
    if parts:
        return check_result(me.name, "fail", "; ".join(parts) + f" (above {MAX_SCALE:g}: standardise the inputs)",
                            ev, names, me.explains)
    shown = ", ".join(f"{k} std {s['std']:.3g}" for k, s in inputs.items()) or "integer inputs only"
    fl = f"; first layer {first['module'] or first['op']} outputs std {first['std']:.3g}" if first else ""
    return check_result(me.name, "pass", f"inputs are standardised ({shown}){fl}", ev, explains=me.explains)
