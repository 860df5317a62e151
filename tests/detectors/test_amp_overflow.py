"""amp_overflow on a loss scale logged from a real GradScaler to real TensorBoard event files."""

import numpy as np

from forensics.detectors import AmpOverflow
from tests.runwriters import load_run, one_torch_thread, write_tb



def _scales(overflow, n: int = 300, growth_interval: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """The loss scale after each step of a real torch.amp.GradScaler training a tiny model; `overflow(i)`
    says whether step i's loss overflows (the scaled gradients are Inf, so the step is skipped)."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", growth_interval=growth_interval)
    out = []
    with one_torch_thread():
        for i in range(n):
            loss = model(torch.randn(8, 4)).pow(2).mean() * (float("inf") if overflow(i) else 1.0)
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            out.append(scaler.get_scale())
    return np.arange(n), np.array(out)


def test_fires_when_every_step_overflows_from_step_200(tmp_path):
    steps, scale = _scales(lambda i: i >= 200 or i % 37 == 5)
    run = load_run(write_tb(tmp_path / "r", {"amp/loss_scale": (steps, scale)}), tmp_path / "f.duckdb")
    [f] = AmpOverflow().check(run)
    # the onset is the first halving after the scale last grew: the rare overflow at 190 or the collapse at 200
    assert f.kind == "amp_overflow" and f.step in (190, 200) and f.step_end == 299
    assert f.evidence["decreases_since_onset"] >= 100 and f.evidence["final_scale"] < 1


def test_occasional_overflow_with_growth_back_is_silent(tmp_path):
    """A healthy fp16 run: the scale halves on a rare overflow and grows back every growth_interval steps."""
    steps, scale = _scales(lambda i: i % 37 == 5)
    run = load_run(write_tb(tmp_path / "r", {"amp/loss_scale": (steps, scale)}), tmp_path / "f.duckdb")
    assert list(AmpOverflow().check(run)) == []


def test_calibration_drop_at_the_start_that_holds_is_silent(tmp_path):
    """The first ten steps overflow (65536 -> 64, more halvings than the threshold), then the scale holds for
    the rest of the run: GradScaler calibrating, not a scale that keeps falling."""
    steps, scale = _scales(lambda i: i < 10, growth_interval=2000)
    assert scale[-1] <= scale.max() / 2 ** 8  # a rule on max/final alone would fire
    run = load_run(write_tb(tmp_path / "r", {"amp/loss_scale": (steps, scale)}), tmp_path / "f.duckdb")
    assert list(AmpOverflow().check(run)) == []


def test_fires_when_a_quarter_of_the_steps_overflow_at_a_steady_scale(tmp_path):
    """After calibrating, the scale neither collapses nor recovers: it halves on every fourth step and grows back
    between (growth_interval 2), so a quarter of the optimizer steps are skipped."""
    steps, scale = _scales(lambda i: i < 8 or i % 4 == 0, growth_interval=2)
    run = load_run(write_tb(tmp_path / "r", {"amp/loss_scale": (steps, scale)}), tmp_path / "f.duckdb")
    [f] = AmpOverflow().check(run)
    assert 0.2 < f.evidence["skip_rate_after_calibration"] < 0.3 and f.step <= 12


def _scaler_checkpoints(root, overflow, n: int = 200, every: int = 40):
    """torch.save a real GradScaler's state (with the model's) every `every` steps, as a training loop does."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", growth_interval=20)
    root.mkdir(parents=True)
    with one_torch_thread():
        for i in range(1, n + 1):
            loss = model(torch.randn(8, 4)).pow(2).mean() * (float("inf") if overflow(i) else 1.0)
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            if i % every == 0:
                torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                            "scaler": scaler.state_dict(), "step": i}, root / f"ckpt_{i}.pt")
    return root


def test_fires_from_gradscaler_state_in_checkpoints_without_a_logged_scale(tmp_path):
    """Issue 5: amp_overflow from scaler state. Every step from 60 on overflows: the saved scale collapses."""
    root = _scaler_checkpoints(tmp_path / "r", lambda i: i >= 60)
    run = load_run(root, tmp_path / "f.duckdb")
    assert not run.has("loss_scale")
    [f] = AmpOverflow().check(run)
    assert f.series == "scaler.scale" and f.evidence["source"] == "GradScaler state in checkpoints"
    assert f.step == 80 and f.step_end == 200 and f.evidence["final_scale"] < 1e-20


def test_healthy_gradscaler_state_in_checkpoints_is_silent(tmp_path):
    root = _scaler_checkpoints(tmp_path / "r", lambda i: i % 37 == 5)
    run = load_run(root, tmp_path / "f.duckdb")
    assert list(AmpOverflow().check(run)) == []
