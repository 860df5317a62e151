"""bad_batch on batches saved with torch.save and safetensors (dicts with a leading batch dimension,
`batches/step_N.*`, DECISIONS.md §10)."""

import numpy as np
import pytest

from forensics.judge.detectors import BadBatch
from tests.runwriters import curve, load_run, write_tb



def _batch(seed: int, n: int = 32):
    import torch

    g = torch.Generator().manual_seed(seed)
    return {"input": torch.randn(n, 3, 8, 8, generator=g), "target": torch.randn(n, 4, generator=g),
            "labels": torch.randint(0, 10, (n,), generator=g)}


def _save(root, step: int, batch: dict, fmt: str):
    import torch
    from safetensors.torch import save_file

    (root / "batches").mkdir(parents=True, exist_ok=True)
    if fmt == "pt":
        torch.save(batch, root / "batches" / f"step_{step}.pt")
    else:
        save_file(batch, root / "batches" / f"step_{step}.safetensors")


def _run(tmp_path, edit=None, fmt="pt"):
    root = write_tb(tmp_path / "r", {"train/loss": curve(n=40)})
    for step in (100, 200, 300):
        b = _batch(step)
        if edit is not None:
            edit(step, b)
        _save(root, step, b, fmt)
    return load_run(root, tmp_path / "f.duckdb")


@pytest.mark.parametrize("fmt", ["pt", "safetensors"])
def test_fires_once_on_the_batch_with_a_corrupt_sample(tmp_path, fmt):
    def corrupt(step, b):
        if step == 200:  # sample 5 is corrupt: NaN pixels and an Inf regression target
            b["input"][5, 0, 2, 2] = float("nan")
            b["target"][5, 1] = float("inf")
    [f] = BadBatch().check(_run(tmp_path, corrupt, fmt))
    assert f.kind == "bad_batch" and f.severity == "critical" and f.step == 200
    assert f.evidence["samples"] == [5] and f.evidence["n_nan"] == 1 and f.evidence["n_inf"] == 1
    assert sorted(f.evidence["tensors"]) == ["input", "target"] and f.evidence["batch"].endswith(f"step_200.{fmt}")


def test_fires_on_an_extreme_outlier_sample(tmp_path):
    def outlier(step, b):
        if step == 300:
            b["input"][11] *= 1000.0  # an unnormalised image among normalised ones
    [f] = BadBatch().check(_run(tmp_path, outlier))
    assert f.severity == "warning" and f.step == 300 and f.evidence["samples"] == [11]
    assert f.evidence["max_outlier_z"] > 100


def test_healthy_batches_are_silent(tmp_path):
    assert list(BadBatch().check(_run(tmp_path))) == []


def test_natural_spread_of_sample_norms_is_silent(tmp_path):
    """Images with random brightness (log-normal gain, sigma 0.5): per-sample norms spread widely, a few land
    past the ingest's 6-sigma outlier mark, but none is extreme."""
    def brightness(step, b):
        gain = np.random.default_rng(step).lognormal(0, 0.5, 32).astype(np.float32)
        b["input"] *= __import__("torch").from_numpy(gain).view(32, 1, 1, 1)
    assert list(BadBatch().check(_run(tmp_path, brightness))) == []


def _spiky_run(tmp_path, saved: dict[int, float], spikes=(300, 620, 910), n_steps=1000):
    """A loss logged every step with transient spikes at `spikes`; batches saved at `saved` steps, each batch's
    floating inputs multiplied by its factor (a unit bug in one shard multiplies a whole batch)."""
    steps, loss = curve(n=n_steps, every=1, tau=300.0)
    for s in spikes:
        loss[s] *= 30.0
    root = write_tb(tmp_path / "r", {"train/loss": (steps, loss)})
    for step, factor in saved.items():
        b = _batch(step)
        b["input"] *= factor
        _save(root, step, b, "pt")
    return load_run(root, tmp_path / "f.duckdb")


def test_fires_on_whole_batches_scaled_at_loss_spikes_beside_normal_ones(tmp_path):
    """Regression (spike_corrupt_batches): each spike's batch is x1000 in every sample and saved beside the
    normal batch before it; within a batch nothing stands out, and half the saved batches are corrupt."""
    saved = {299: 1.0, 300: 1000.0, 619: 1.0, 620: 1000.0, 909: 1.0, 910: 1000.0}
    found = list(BadBatch().check(_spiky_run(tmp_path, saved)))
    assert [f.step for f in found] == [300, 620, 910]
    for f in found:
        assert f.severity == "warning" and f.evidence["tensors"] == ["input"]
        assert f.evidence["scale_ratio"] == pytest.approx(1000.0, rel=0.2) and f.evidence["normal_batches"] == 3
        assert f.evidence["loss_spike_step"] == f.step


def test_fires_on_one_blank_batch_among_normal_ones_without_a_spike(tmp_path):
    saved = {100: 1.0, 200: 1.0, 300: 1e-4, 400: 1.0, 500: 1.0}  # a loader that returned near-blank images
    [f] = BadBatch().check(_spiky_run(tmp_path, saved, spikes=()))
    assert f.step == 300 and f.evidence["scale_ratio"] < 1e-3 and f.evidence["loss_spike_step"] is None


def test_naturally_varying_batches_and_sizes_are_silent(tmp_path):
    """Batch-level brightness varying ×0.5-×2, a smaller last batch, and integer tensors (labels, data-set
    indices from a sequential sampler: batch 0 holds 0-31, the last 4000+) that differ by far more than ×10."""
    import torch

    root = write_tb(tmp_path / "r", {"train/loss": curve(n=40)})
    gains = [0.5, 1.0, 2.0, 0.7, 1.4]
    for k, (step, gain) in enumerate(zip((100, 200, 300, 400, 500), gains)):
        b = _batch(step, n=32 if k < 4 else 5)
        b["input"] *= gain
        b["index"] = torch.arange(32 * k * 30, 32 * k * 30 + b["labels"].numel())
        _save(root, step, b, "pt")
    assert list(BadBatch().check(load_run(root, tmp_path / "f.duckdb"))) == []


def test_too_few_batches_for_a_comparison_are_silent(tmp_path):
    assert list(BadBatch().check(_spiky_run(tmp_path, {299: 1.0, 300: 1000.0}))) == []


def test_a_real_loop_that_saves_its_last_batches_names_the_one_that_turned_the_loss_nan(tmp_path, capsys):
    """A training loop over a DataLoader whose data set holds one sample with a NaN pixel, saving every step's batch
    with torch.save (`batches/step_N.pt`) and logging the loss with SummaryWriter: the loss turns NaN at the step
    that draws that sample, and of the several batches saved around it, bad_batch names that one, with its row."""
    import json

    import torch
    from torch.utils.tensorboard import SummaryWriter

    from forensics.cli import main
    from tests.runwriters import one_torch_thread

    torch.manual_seed(0)
    x, y = torch.randn(96, 8), torch.randint(0, 3, (96,))
    x[53, 2] = float("nan")  # drawn in the 7th batch of 8 (rows 48-55), at its row 5
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    root = tmp_path / "run"
    (root / "batches").mkdir(parents=True)
    w = SummaryWriter(log_dir=str(root))
    with one_torch_thread():
        for step, (xb, yb) in enumerate(loader):
            torch.save({"input": xb, "labels": yb}, root / "batches" / f"step_{step}.pt")
            loss = torch.nn.functional.cross_entropy(model(xb), yb)
            w.add_scalar("train/loss", loss.item(), global_step=step, walltime=1.7e9 + step)
            opt.zero_grad()
            loss.backward()
            opt.step()
    w.close()
    main(["analyze", str(root), "--db", str(tmp_path / "f.duckdb"), "--json"])
    out = json.loads(capsys.readouterr().out)
    bad = [f for f in out["findings"] if f["kind"] == "bad_batch"]
    assert [(f["step"], f["severity"]) for f in bad] == [(6, "critical")], [f["summary"] for f in out["findings"]]
    assert "step_6.pt" in bad[0]["summary"] and "nan_loss" in {f["kind"] for f in out["findings"]}
