"""amp_overflow on a loss scale logged from a real GradScaler to real TensorBoard event files."""

import numpy as np
import pytest

from forensics.judge.detectors import AmpOverflow
from tests.paths import REAL_RUNS_TEST
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
    """A healthy fp16 run: the scale halves on a rare overflow (one step in 250, 0.4%; GradScaler's default
    growth_interval of 2000 gives one in ~2000) and grows back every growth_interval steps."""
    steps, scale = _scales(lambda i: i % 250 == 5, n=600)
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


def _fp16_scales(reduction: str, growth_interval: int, n: int = 300) -> tuple[np.ndarray, np.ndarray]:
    """The loss scale of a real GradScaler over a tiny classifier whose forward runs under CPU fp16 autocast, so
    the scaled backward really overflows fp16 when the loss is large (a summed loss is the batch size times
    larger than a mean)."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Linear(16, 5)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu", growth_interval=growth_interval)
    out = []
    with one_torch_thread():
        for _ in range(n):
            x, y = torch.randn(32, 16) * 3, torch.randint(0, 5, (32,))
            with torch.autocast("cpu", dtype=torch.float16):
                logits = model(x)
            loss = torch.nn.functional.cross_entropy(logits.float(), y, reduction=reduction)
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            out.append(scaler.get_scale())
    return np.arange(1, n + 1), np.array(out)


def test_fires_when_a_summed_fp16_loss_keeps_overflowing_at_a_low_scale(tmp_path):
    """Issue 12: a summed loss under fp16 keeps the scale at 1024-2048 (from 65536), halving again each time it
    grows back: a few percent of the optimizer steps skipped, read from a scale logged every 10 steps."""
    steps, scale = _fp16_scales("sum", growth_interval=20)
    run = load_run(write_tb(tmp_path / "r", {"amp/loss_scale": (steps[9::10], scale[9::10])}), tmp_path / "f.duckdb")
    [f] = AmpOverflow().check(run)
    assert 0.01 <= f.evidence["skip_rate_after_calibration"] < 0.1 and f.evidence["max_scale"] <= 8192


def test_mean_fp16_loss_with_default_scaler_is_silent(tmp_path):
    steps, scale = _fp16_scales("mean", growth_interval=2000)
    run = load_run(write_tb(tmp_path / "r", {"amp/loss_scale": (steps, scale)}), tmp_path / "f.duckdb")
    assert list(AmpOverflow().check(run)) == []


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


def _console_run(tmp_path, lines: list[str]):
    root = tmp_path / "r"
    root.mkdir()
    (root / "train.log").write_text("\n".join(lines) + "\n")
    return load_run(root, tmp_path / "f.duckdb")


def test_deepspeed_overflow_lines_become_a_falling_loss_scale(tmp_path):
    """Issue 12 class 5: DeepSpeed prints only its overflows; the scale in `reducing to N` is the series."""
    lines, scale = [], 65536
    for i in range(1, 400):
        if i < 4 or i > 300:  # start-up calibration, then from step 300 every step overflows down to the minimum
            new = max(1, scale // 2)
            lines.append(f"[2023-06-07 22:{i // 60 % 60:02d}:{i % 60:02d},018] [INFO] [loss_scaler.py:181:update_scale] "
                         f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {scale}, reducing to {new}")
            scale = new
        lines.append(f"{{'loss': {2.0 + 0.001 * i:.4f}, 'learning_rate': 0.0001, 'epoch': {i / 400:.2f}}}")
    [f] = AmpOverflow().check(_console_run(tmp_path, lines))
    assert f.evidence["final_scale"] == 1 and f.evidence["max_scale"] == 32768 and f.evidence["decreases"] >= 13


def test_collapsed_scale_on_three_console_lines(tmp_path):
    """arcface prints `Fp16 Grad Scale: 0` (the scale rounded to an integer): the scaler has collapsed."""
    lines = [f"Training: 2023-03-14 09:08:{43 + 5 * k},293-Speed 2178.40 samples/sec   Loss nan   LearningRate "
             f"0.001000   Epoch: 0   Global Step: {20 + 10 * k}   Fp16 Grad Scale:  0   Required: 194 hours"
             for k in range(3)]
    [f] = AmpOverflow().check(_console_run(tmp_path, lines))
    assert f.evidence["min_scale"] == 0 and f.step == 20


def test_few_healthy_scales_are_silent(tmp_path):
    lines = [f"epoch 1 step {s} loss={1.0 / s:.3f} loss_scale={v}" for s, v in ((1, 65536), (2, 65536))]
    assert list(AmpOverflow().check(_console_run(tmp_path, lines))) == []


# Issue 24: short console excerpts. Every fp16 run starts with a few halvings while its dynamic scaler calibrates
# from its start value; halvings that keep coming once training has progressed are the finding.
@pytest.mark.parametrize("name,onset,evidence", [
    # DeepSpeed: OVERFLOW! on the first steps while step_loss=nan: no scale makes a NaN forward finite
    ("log_hallo152", 1, {"halvings_while_loss_nonfinite": 2}),
    # DeepSpeed at tqdm step 378 of 2724, the scale already at 64 and halving to 2 on every step
    ("log_llamaalpaca534", 3, {"decreases_since_onset": 4, "calibration_end": 378.0}),
    # apex after a resume at 12001: a step with a finite grad norm, then seven halvings in ten steps
    ("log_tacotron485", 12002, {"decreases_since_onset": 6, "final_scale": 512.0}),
])
@pytest.mark.needs_shared
def test_overflows_past_calibration_in_real_console_excerpts_fire(tmp_path, name, onset, evidence):
    [f] = AmpOverflow().check(load_run(REAL_RUNS_TEST / name, tmp_path / "f.duckdb"))
    assert f.step == onset and {k: f.evidence[k] for k in evidence} == evidence


@pytest.mark.needs_shared
def test_overflow_that_follows_a_nan_loss_does_not_lead_the_report(tmp_path):
    """log_hallo152's loss is NaN from its first line and DeepSpeed halves the scale beside it: the report leads
    with the NaN, the overflow it caused comes after (it led the report when first found)."""
    from forensics.services.analysis import analyze

    result = analyze(REAL_RUNS_TEST / "log_hallo152", tmp_path / "f.duckdb")
    assert sorted(f.kind for f in result.findings) == ["amp_overflow", "nan_loss"]
    assert result.headline().kind == "nan_loss"


def test_a_resumed_scaler_recalibrating_from_its_start_value_is_silent(tmp_path):
    """A run resumed at step 12000 without the scaler's state: GradScaler starts again at 65536 and its first ten
    steps overflow, then the scale holds. Past step 200, but a fresh scaler's calibration, not skipped training."""
    steps, scale = _scales(lambda i: i < 10, growth_interval=2000)
    run = load_run(write_tb(tmp_path / "r", {"amp/loss_scale": (steps + 12000, scale)}), tmp_path / "f.duckdb")
    assert list(AmpOverflow().check(run)) == []


def test_calibration_halvings_with_a_nan_loss_fire_and_with_a_finite_loss_do_not(tmp_path):
    """The same five start-up halvings of a real GradScaler: beside a finite loss they are calibration; beside a
    loss that is NaN at those steps they are a scaler chasing an overflow no scale can cure."""
    steps, scale = _scales(lambda i: i < 5, n=40, growth_interval=2000)
    finite = np.linspace(2.3, 1.0, steps.size)
    run = load_run(write_tb(tmp_path / "a", {"amp/loss_scale": (steps, scale), "train/loss": (steps, finite)}),
                   tmp_path / "a.duckdb")
    assert list(AmpOverflow().check(run)) == []
    nan = np.where(steps < 5, np.nan, finite)
    run = load_run(write_tb(tmp_path / "b", {"amp/loss_scale": (steps, scale), "train/loss": (steps, nan)}),
                   tmp_path / "b.duckdb")
    [f] = AmpOverflow().check(run)
    assert f.step == 1 and f.evidence["halvings_while_loss_nonfinite"] == 4


def _skips_per_interval(overflow, n: int, every: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Megatron's `number of skipped iterations` per log interval, counted from a real GradScaler: a step is skipped
    where its scale halved."""
    steps, scale = _scales(overflow, n=n, growth_interval=2000)
    skipped = np.concatenate([[scale[0] < 65536.0], np.diff(scale) < 0])
    ends = np.arange(every, n + 1, every)
    return ends, np.array([skipped[e - every:e].sum() for e in ends], dtype=float)


def test_a_logged_skipped_step_count_past_calibration_fires(tmp_path):
    """Only the count is logged (the scale itself is not): five skipped steps at start-up are calibration; two in
    every hundred steps from step 600 on are training being skipped."""
    ends, skips = _skips_per_interval(lambda i: i < 5 or (i >= 600 and i % 50 == 7), n=1200)
    run = load_run(write_tb(tmp_path / "a", {"train/skipped_iterations": (ends, skips)}), tmp_path / "a.duckdb")
    [f] = AmpOverflow().check(run)
    assert f.step == 700 and f.evidence["skipped_steps"] == 12 and f.evidence["counter"] == "per log interval"
    ends, skips = _skips_per_interval(lambda i: i < 5 or i == 900, n=1200)
    run = load_run(write_tb(tmp_path / "b", {"train/skipped_iterations": (ends, skips)}), tmp_path / "b.duckdb")
    assert AmpOverflow().unavailable(run) is None and list(AmpOverflow().check(run)) == []


def test_one_line_of_a_scale_between_zero_and_one_is_no_collapsed_scaler(tmp_path):
    """A bf16 run's log prints `clipping enabled (window=5, scale=0.1)` once: one point of a 'scale' below 1 is no
    scaler pinned at its floor. A scale of 0 is collapsed on one line, and two lines below 1 are a scaler."""
    for name, steps, values, fires in (("a", [0], [0.1], False), ("b", [0], [0.0], True),
                                       ("c", [10, 20], [1.5e-5, 7.6e-6], True)):
        run = load_run(write_tb(tmp_path / name, {"loss_scale": (np.array(steps), np.array(values))}),
                       tmp_path / f"{name}.duckdb")
        assert bool(list(AmpOverflow().check(run))) == fires, name


def test_a_sub_unit_scale_seen_at_one_step_only_is_no_collapsed_scaler(tmp_path):
    """`scale=0.1` printed by two modules at start-up (a clipping setting, not a loss scale) is one observation:
    nothing pinned the scaler. A scale below 1 on lines of several steps still is one."""
    start = ["step 0 | loss 2.000 | lr 0.0003", "INFO Enabling output projection gradient clipping (window=5, scale=0.1)",
             "INFO Output projection gradient clipping enabled (window=5, scale=0.1, threshold=rolling_avg*0.1)"]
    steps = [f"step {i} | loss {2.0 - 0.01 * i:.3f} | lr 0.0003" for i in range(1, 40)]
    once = tmp_path / "once"
    once.mkdir()
    (once / "train.log").write_text("\n".join(start + steps) + "\n")
    assert list(AmpOverflow().check(load_run(once, tmp_path / "once.duckdb"))) == []
    pinned = tmp_path / "pinned"
    pinned.mkdir()
    (pinned / "train.log").write_text("\n".join(f"step {i} | loss {2.0 - 0.01 * i:.3f} | scale 0.5" for i in range(1, 40))
                                      + "\n")
    [f] = AmpOverflow().check(load_run(pinned, tmp_path / "pinned.duckdb"))
    assert f.evidence["max_scale"] == 0.5


@pytest.mark.parametrize("launches", [2, 4])
def test_a_setting_named_scale_printed_once_per_launch_is_no_loss_scale(tmp_path, launches):
    """A trainer that prints its arguments at every launch (`... mosaic=1.0, scale=0.5, shear=0.0 ...`, an
    augmentation's scale), several launches appended to one log: a constant 'scale' below 1 on a line per launch,
    while the loss falls in each. No step overflows where the loss falls: no collapsed scaler."""
    lines = []
    for k in range(launches):
        lines.append(f"engine/trainer: task=detect, mode=train, epochs=40, lr0=0.01, mosaic=1.0, scale=0.5, "
                     f"shear=0.0, seed={k}")
        lines += [f"epoch {e} step {e * 50} loss {1.85 * 0.97 ** e:.4f}" for e in range(1, 41)]
    root = tmp_path / "r"
    root.mkdir()
    (root / "train.log").write_text("\n".join(lines) + "\n")
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.has("loss_scale") and run.points(run.pick("loss_scale")).height == launches
    assert list(AmpOverflow().check(run)) == []


def _floored_scaler_log(overflow, n: int, min_scale: float = 1.0) -> list[str]:
    """The console lines of a training loop with a real GradScaler whose scale the script keeps at or above
    `min_scale` (DeepSpeed's and Megatron's `min_loss_scale`), printed as `step i loss v loss_scale s`;
    `overflow(i)` says whether step i's gradients are Inf."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", growth_interval=2000)
    lines = []
    with one_torch_thread():
        for i in range(1, n + 1):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            opt.zero_grad()
            scaler.scale(loss * (float("inf") if overflow(i) else 1.0)).backward()
            scaler.step(opt)
            scaler.update()
            if scaler.get_scale() < min_scale:
                scaler.update(float(min_scale))
            lines.append(f"step {i} loss {loss.item():.4f} loss_scale {scaler.get_scale():g}")
    return lines


def test_a_scale_halving_to_its_floor_and_pinned_there_fires(tmp_path):
    """Every step overflows: the scale halves on every line from 65536 to the scaler's floor of 1 and stays there.
    The scale never goes below 1 and the log does not end falling, yet no step trains."""
    [f] = AmpOverflow().check(_console_run(tmp_path, _floored_scaler_log(lambda i: True, 40)))
    assert f.evidence["floor"] == 1 and f.evidence["pinned_since_step"] == 16 and f.evidence["max_scale"] == 32768


def test_a_scale_pinned_at_a_configured_floor_fires_and_calibration_above_it_does_not(tmp_path):
    """A configured `min_loss_scale` of 128 is the floor: pinned there on every line fires; a scaler that calibrates
    from 65536 to 512 on its first steps and holds is healthy."""
    for name, overflow, fires in (("pinned", lambda i: i > 5, True), ("held", lambda i: i < 8, False)):
        root = tmp_path / name
        root.mkdir()
        (root / "train.log").write_text("\n".join(_floored_scaler_log(overflow, 60, min_scale=128)) + "\n")
        (root / "config.json").write_text('{"fp16": {"min_loss_scale": 128}}')
        found = list(AmpOverflow().check(load_run(root, tmp_path / f"{name}.duckdb")))
        assert [f.evidence["floor"] for f in found] == ([128] if fires else []), name


def _hf_fp16(skip_every: int | None, lr_held_on_skip: bool, constant_lr: bool = False, nan_loss: bool = False):
    """HF Trainer's per-step history (logging_steps=1) of an fp16 run: a linear LR decay that the Trainer steps only
    when the optimizer ran, grad_norm NaN on the steps GradScaler skipped."""
    hist, lr = [], 3e-4
    for step in range(1, 601):
        skipped = skip_every is not None and step > 50 and step % skip_every == 0
        if not (skipped and lr_held_on_skip) and not constant_lr:
            lr -= 3e-4 / 700
        loss = float("nan") if skipped and nan_loss else round(1.2 * 0.999 ** step + 0.05, 4)
        hist.append({"loss": loss, "grad_norm": float("nan") if skipped else 0.8,
                     "learning_rate": lr, "epoch": round(step / 600, 4), "step": step})
    return hist


@pytest.mark.parametrize("skip_every, held, constant, nan_loss, fires", [
    (10, True, False, False, True),  # a tenth of the steps skipped: the LR stays put on each
    (10, False, False, False, False),  # the LR advances on the NaN steps too: the optimizer ran, no skip to read
    (10, True, True, False, False),  # a constant LR says nothing about which steps ran
    (10, True, False, True, False),  # the loss is NaN on those steps too: nan_loss's story, not a skip that saved it
    (None, True, False, False, False),
])
def test_nan_grad_norms_on_which_the_lr_stays_put_are_skipped_fp16_steps(tmp_path, skip_every, held, constant,
                                                                         nan_loss, fires):
    from tests.runwriters import write_trainer_state

    history = _hf_fp16(skip_every, held, constant, nan_loss)
    run = load_run(write_trainer_state(tmp_path / "r", history), tmp_path / "f.duckdb")
    assert not run.has("loss_scale") and AmpOverflow().unavailable(run) is None
    found = list(AmpOverflow().check(run))
    assert bool(found) == fires, [f.summary for f in found]
    if fires:
        assert found[0].evidence["skipped_steps"] == 55 and found[0].step == 60


def _printed_scaler_log(overflow, n: int, init_scale: float, growth_interval: int, falls: bool) -> list[str]:
    """Console lines `step i loss v loss_scale s` of a real GradScaler (no minimum, as fairseq's reaches 1e-4)
    fitting a linear target, so the loss falls (`falls`) or a fixed batch whose loss the script prints flat;
    `overflow(i)` says whether step i's gradients are Inf."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.005)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale, growth_interval=growth_interval)
    w = torch.tensor([[1.0, -2.0, 0.5, 3.0]])
    lines = []
    with one_torch_thread():
        for i in range(1, n + 1):
            x = torch.randn(64, 4)
            loss = (model(x) - x @ w.T - 0.3 * torch.randn(64, 1)).pow(2).mean()
            opt.zero_grad()
            scaler.scale(loss * (float("inf") if overflow(i) else 1.0)).backward()
            scaler.step(opt)
            scaler.update()
            shown = loss.item() if falls else 2.0 + 0.01 * np.sin(i)
            lines.append(f"step {i} loss {shown:.4f} loss_scale {scaler.get_scale():g}")
    return lines


def test_a_dynamic_scaler_running_below_one_that_grows_back_is_silent(tmp_path):
    """A fairseq-style scaler: a few overflows take it from 2 to 1/4, where it halves on a rare overflow (one step in
    150) and grows back every 100 clean steps, the loss falling throughout. Halvings below 1 are its normal working."""
    lines = _printed_scaler_log(lambda i: i in (3, 4, 5) or i % 150 == 0, 560, 2.0, 100, falls=True)
    scales = [float(x.rsplit(" ", 1)[1]) for x in lines]
    assert min(scales) < 1 and scales[-1] > min(scales)
    assert list(AmpOverflow().check(_console_run(tmp_path, lines))) == []


@pytest.mark.parametrize("falls", [True, False])
def test_a_long_fall_of_the_scale_is_overflow_only_where_the_loss_stops(tmp_path, falls):
    """The scale halves on one step in 150 (under the skip rate) and never grows back: 2^7 to 2^-9 over 2400 steps.
    While the loss keeps falling its steps are taken (silent); with the loss flat the fall is the finding."""
    lines = _printed_scaler_log(lambda i: i % 150 == 0, 2400, 128.0, 10**6, falls=falls)
    found = list(AmpOverflow().check(_console_run(tmp_path, lines)))
    assert [f.kind for f in found] == ([] if falls else ["amp_overflow"])


def test_an_averaged_scale_that_is_no_power_of_two_says_nothing_of_skips(tmp_path):
    """MAE logs the mean of the dynamic scale over each epoch: a healthy scaler (overflow one step in 30, growth
    every 20) averaged over 50-step epochs wobbles up and down, which read as halvings would be half the steps."""
    steps, scale = _scales(lambda i: i % 30 == 7, n=2000, growth_interval=20)
    means = scale.reshape(40, 50).mean(axis=1)
    assert np.sum(np.diff(means) < 0) >= 10
    run = load_run(write_tb(tmp_path / "r", {"train_loss_scale": (np.arange(40), means)}), tmp_path / "f.duckdb")
    assert list(AmpOverflow().check(run)) == []


def _excerpt_of_a_scaler_log(overflow, first: int, last: int, init_scale: float = 4096.0) -> list[str]:
    """Lines `step i loss v loss_scale s` of a real GradScaler (growth interval past the run: the scale only falls),
    steps `first`..`last` of them: a short excerpt, all of it before any horizon a start-up could be told by."""
    return _printed_scaler_log(overflow, last, init_scale, 10**6, falls=True)[first - 1:]


def test_a_log_that_ends_on_halvings_at_consecutive_steps_fires(tmp_path):
    """The scale settled long ago halves at each of the last four steps the excerpt shows: every step the log ends on
    overflowed and was skipped. The excerpt is too short and too early for the skip-rate rule."""
    lines = _excerpt_of_a_scaler_log(lambda i: i >= 77, 60, 80)
    [f] = AmpOverflow().check(_console_run(tmp_path, lines))
    assert f.evidence["halvings_at_the_end"] == 4 and f.evidence["final_scale"] == 256 and f.step == 77


def test_halvings_steps_apart_at_the_end_of_a_log_are_a_working_scaler(tmp_path):
    """Three overflows spread over the excerpt's last steps, the steps between them taken: the healthy twin."""
    lines = _excerpt_of_a_scaler_log(lambda i: i in (66, 72, 78), 60, 80)
    assert list(AmpOverflow().check(_console_run(tmp_path, lines))) == []


def test_start_up_halvings_followed_by_training_at_their_scale_are_silent(tmp_path):
    """A fresh scaler halves on its first steps, then trains at the scale it reached: nothing the log ends on."""
    lines = _excerpt_of_a_scaler_log(lambda i: i <= 6, 1, 40, init_scale=65536.0)
    assert list(AmpOverflow().check(_console_run(tmp_path, lines))) == []


def test_overflow_lines_between_progress_bar_records_at_consecutive_steps_fire(tmp_path):
    """DeepSpeed prints a line per skipped step only; a tqdm bar prints the optimizer step it is at. The bar's count
    moving by one between the last overflow lines, and the log ending there, is overflow at every step."""
    import io

    from tqdm import tqdm

    out = io.StringIO()
    lines, scale = [], 4096
    bar = tqdm(total=3200, file=out, ascii=True, dynamic_ncols=False, ncols=100, mininterval=0)
    for step in range(1, 80):
        bar.set_description(f"[losses/total_loss: {0.8 if step > 76 else 0.3 + 0.001 * step:.2f}]")
        bar.update(1)
        if step in (67, 76, 77, 78):
            lines.append(out.getvalue().split("\r")[-1])
            lines.append(f"[2023-02-21 22:13:{step % 60:02d},188] [INFO] [stage_1_and_2.py:1762:step] [deepspeed] "
                         f"OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {scale}, reducing to {scale // 2}")
            scale //= 2
    lines.append(out.getvalue().split("\r")[-1])
    bar.close()
    [f] = AmpOverflow().check(_console_run(tmp_path, lines))
    assert f.evidence["halvings_at_the_end"] == 3 and f.evidence["final_scale"] == 256
