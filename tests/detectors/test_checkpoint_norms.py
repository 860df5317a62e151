"""weight_norm_growth, weight_collapse and update_ratio_anomaly from checkpoints (safetensors.torch.save_file,
torch.save) ingested through the real checkpoint reader: norms from tensor_stats, ratios from tensor_deltas."""

import pytest

from forensics.judge.detectors import UpdateRatioAnomaly, WeightCollapse, WeightNormGrowth
from tests.runwriters import curve, load_run, write_tb

pytest.importorskip("ingest.checkpoints", reason="the checkpoint reader (ingest/checkpoints.py) is not on this branch yet")


def _run(tmp_path, scales, every=100, fmt="safetensors", seed=0):
    """A run whose checkpoint k holds fc1 = base·scales[k] plus a small step of noise, and a steady head."""
    import torch

    root = tmp_path / "r"
    n = len(scales)
    write_tb(root, {"train/loss": curve(n=n * 10, every=every // 10)})
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(64, 32, generator=g)
    head = torch.randn(10, 64, generator=g)
    (root / "checkpoints").mkdir()
    for k, s in enumerate(scales):
        step = (k + 1) * every
        sd = {"fc1.weight": base * float(s), "fc1.bias": torch.zeros(64) + 0.01 * k,
              "head.weight": head + 1e-3 * k * torch.ones_like(head)}
        if fmt == "safetensors":
            from safetensors.torch import save_file
            save_file({k_: v.contiguous() for k_, v in sd.items()}, str(root / "checkpoints" / f"step_{step}.safetensors"))
        else:
            torch.save({"model": sd, "step": step}, root / "checkpoints" / f"step_{step}.pt")
    return load_run(root, tmp_path / "f.duckdb")


def test_checkpoint_norm_growth(tmp_path):
    run = _run(tmp_path, [1.0, 2.0, 3.0, 4.0, 5.0])
    [f] = WeightNormGrowth().check(run)
    assert f.step == 100 and f.evidence["factor"] > 3 and "fc1.weight" in f.series
    assert list(WeightCollapse().check(run)) == []
    early = _run(tmp_path / "b", [1.0, 1.5, 1.65, 1.7])  # away from init, then slowing: too few points to call
    assert list(WeightNormGrowth().check(early)) == []


def test_checkpoint_norm_collapse(tmp_path):
    run = _run(tmp_path, [1.0, 0.3, 0.1, 0.03, 0.01], fmt="torch")
    [f] = WeightCollapse().check(run)
    assert f.step == 100 and f.evidence["shrink_factor"] > 10 and "fc1.weight" in f.series


def test_checkpoint_update_ratio_too_large(tmp_path):
    """fc1 changes by ~60% of its norm over 100 steps: at least 6e-3 per step (r/d) and at most 6e-2 (r/√d)."""
    run = _run(tmp_path, [1.0, 1.6, 2.2, 2.8, 3.4])
    assert list(UpdateRatioAnomaly().check(run)) == []  # r/d ≈ 6e-3 per step is below 1e-1: not unstable
    fast = _run(tmp_path / "b", [1.0, 30.0, 900.0])  # ×30 per checkpoint: r/d ≈ 0.29 per step
    [f] = UpdateRatioAnomaly().check(fast)
    assert f.evidence["direction"] == "too_large" and f.evidence["peak_layer"] == "fc1.weight"
    assert f.evidence["measured_from"] == "tensor_deltas" and f.evidence["peak_ratio"] > 0.1
    assert (f.step, f.step_end) == (100, 300)  # one episode over both pairs, from the earlier checkpoint


def test_steady_checkpoints_are_silent(tmp_path):
    run = _run(tmp_path, [1.0, 1.02, 1.03, 1.035, 1.04])
    for d in (WeightNormGrowth(), WeightCollapse(), UpdateRatioAnomaly()):
        assert list(d.check(run)) == [], d.kind
