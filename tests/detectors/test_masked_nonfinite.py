"""masked_nonfinite on HF trainer_state.json written the way HF's `logging_nan_inf_filter` (on by default) fills it."""

import math

import numpy as np
import pytest

from forensics.judge.detectors import MaskedNonfinite
from tests.paths import REAL_RUNS_TEST
from tests.runwriters import hf_history, load_run, one_torch_thread, write_tb, write_trainer_state


def _hf_logs(step_loss: np.ndarray, step_norm: np.ndarray, every: int = 10):
    """What HF Trainer logs every `every` steps from per-step losses and grad norms: a NaN/Inf step loss is
    replaced by the running average of the window (tr_loss / (1 + steps since the last log)), so a window of
    only NaN steps logs 0.0; grad_norm is the last step's norm, NaN as it came."""
    steps, loss, norm = [], [], []
    tr_loss, last_logged = 0.0, 0
    for i in range(1, step_loss.size + 1):
        x = step_loss[i - 1]
        tr_loss += tr_loss / (1 + i - 1 - last_logged) if not math.isfinite(x) else x
        if i % every == 0:
            steps.append(i)
            loss.append(round(tr_loss / (i - last_logged), 4))
            norm.append(step_norm[i - 1])
            tr_loss, last_logged = 0.0, i
    return np.array(steps), np.array(loss), np.array(norm)


def _per_step(n=1000, nan_from=None, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    loss = (0.3 + 2.0 * np.exp(-t / 300)) * (1 + rng.normal(0, 0.05, n))
    norm = np.exp(rng.normal(0, 0.2, n))
    if nan_from is not None:  # the weights turned NaN: every later loss and norm is NaN
        loss[nan_from:] = np.nan
        norm[nan_from:] = np.nan
    return loss, norm


def test_fires_at_the_first_nan_grad_norm_behind_finite_and_zero_losses(tmp_path):
    steps, loss, norm = _hf_logs(*_per_step(nan_from=604))
    assert np.isfinite(loss).all() and (loss == 0.0).any()  # the filter hid every NaN loss
    run = load_run(write_trainer_state(tmp_path / "r", hf_history(steps, loss, norm)), tmp_path / "f.duckdb")
    [f] = MaskedNonfinite().check(run)
    assert f.kind == "masked_nonfinite" and f.severity == "critical" and f.step == 610
    assert f.evidence["grad_norm_there"] == "nan" and f.evidence["last_step_masked"] == 1000
    assert f.evidence["steps_masked"] == 40


def test_healthy_hf_run_is_silent(tmp_path):
    steps, loss, norm = _hf_logs(*_per_step())
    run = load_run(write_trainer_state(tmp_path / "r", hf_history(steps, loss, norm)), tmp_path / "f.duckdb")
    assert list(MaskedNonfinite().check(run)) == []


def test_a_lone_nonfinite_norm_without_a_loss_scale_is_a_warning(tmp_path):
    """Under fp16 a logged step can carry an Inf grad norm: GradScaler skipped that step and training went on
    with finite norms. Without the loss scale in the logs that looks the same as a NaN the loss filter hid and
    the weights survived, so it is a warning that names both readings, never critical (issue 24: the real
    runs labelled so, shared/real_runs_test/hf_dat55_nan_gn and log_timemoe71)."""
    loss, norm = _per_step(seed=1)
    norm[[199, 579]] = np.inf  # logged steps 200 and 580 overflowed; the scaler skipped them
    steps, loss, norm = _hf_logs(loss, norm)
    run = load_run(write_trainer_state(tmp_path / "r", hf_history(steps, loss, norm)), tmp_path / "f.duckdb")
    [f] = MaskedNonfinite().check(run)
    assert (f.severity, f.step, f.evidence["steps_masked"], f.evidence["norm_came_back"]) == ("warning", 200, 2, True)


@pytest.mark.skipif(not (REAL_RUNS_TEST / "log_timemoe71").is_dir(), reason="shared/real_runs_test is not beside the checkout")
@pytest.mark.needs_shared
def test_nan_norms_that_come_back_in_a_real_hf_log_are_a_warning(tmp_path):
    """Time-MoE's HF Trainer lines: grad_norm nan on two of nine records while the loss reads 0.147 and 0.182."""
    run = load_run(REAL_RUNS_TEST / "log_timemoe71", tmp_path / "f.duckdb")
    [f] = MaskedNonfinite().check(run)
    assert (f.severity, f.evidence["steps_masked"], f.evidence["loss_there"]) == ("warning", 2, 0.1474)


def _fp16_steps(n: int, growth_interval: int = 2000) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Steps 1..n of a tiny classifier under CPU fp16 autocast with a real GradScaler and a summed loss (large
    enough to overflow fp16 at a high scale): the loss, the grad norm unscaled before the step (Inf on a step
    the scaler skips) and the scale after its update, as a training loop logs them."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Linear(16, 5)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu", growth_interval=growth_interval)
    loss_, norm_, scale_ = [], [], []
    with one_torch_thread():
        for _ in range(n):
            x, y = torch.randn(32, 16) * 3, torch.randint(0, 5, (32,))
            with torch.autocast("cpu", dtype=torch.float16):
                logits = model(x)
            loss = torch.nn.functional.cross_entropy(logits.float(), y, reduction="sum")
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            norm_.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))))
            scaler.step(opt)
            scaler.update()
            loss_.append(float(loss.detach()))
            scale_.append(scaler.get_scale())
    return np.arange(1, n + 1), np.array(loss_), np.array(norm_), np.array(scale_)


def test_gradscaler_start_up_overflows_hide_nothing(tmp_path):
    """A real GradScaler starts at 65536 and halves on each overflowing step: the first steps log a non-finite
    grad norm beside a finite loss, several in a row. The logged loss scale falls at each of them: the scaler
    skipped those steps, nothing is hidden."""
    steps, loss, norms, scale = _fp16_steps(60)
    assert (~np.isfinite(norms[:3])).all()  # the start-up calibration: overflowing steps in a row
    run = load_run(write_tb(tmp_path / "r", {"train/loss": (steps, loss), "train/grad_norm": (steps, norms),
                                             "train/loss_scale": (steps, scale)}), tmp_path / "f.duckdb")
    assert list(MaskedNonfinite().check(run)) == []


def test_overflow_streaks_that_recover_under_a_logged_scale_hide_nothing(tmp_path):
    """A real GradScaler that grows after every good step (growth_interval=1) overflows every other step; logged
    every 5 steps, three Inf norms in a row appear with no visible fall of the scale. The scaler skipped those
    steps and the norm comes back: with the loss scale logged that is not a hidden NaN; without it, it is."""
    steps, loss, norms, scale = (a[4::5] for a in _fp16_steps(300, growth_interval=1))
    bad = ~np.isfinite(norms)
    assert any(bad[i:i + 3].all() for i in range(bad.size - 3)) and np.isfinite(norms[-5:]).any()
    logged = {"train/loss": (steps, loss), "train/grad_norm": (steps, norms)}
    with_scale = load_run(write_tb(tmp_path / "a", {**logged, "train/loss_scale": (steps, scale)}), tmp_path / "a.duckdb")
    assert list(MaskedNonfinite().check(with_scale)) == []
    without = load_run(write_tb(tmp_path / "b", logged), tmp_path / "b.duckdb")
    assert list(MaskedNonfinite().check(without))


def test_one_overflow_on_the_last_logged_step_under_a_scale_hides_nothing(tmp_path):
    """The run stops right after a logged step the scaler skipped: the last logged norm is Inf, alone. Under a
    logged loss scale that is one skipped step, not a NaN that poisoned the weights: a streak reaching the end
    needs `min_streak` points there as well."""
    steps, loss, norms, scale = (a[4::5] for a in _fp16_steps(300, growth_interval=1))
    bad = ~np.isfinite(norms)
    end = next(i for i in range(1, bad.size) if bad[i] and not bad[i - 1])  # a lone Inf after a finite norm
    steps, loss, norms, scale = steps[:end + 1], loss[:end + 1], norms[:end + 1], scale[:end + 1]
    logged = {"train/loss": (steps, loss), "train/grad_norm": (steps, norms)}
    with_scale = load_run(write_tb(tmp_path / "a", {**logged, "train/loss_scale": (steps, scale)}), tmp_path / "a.duckdb")
    assert list(MaskedNonfinite().check(with_scale)) == []
    without = load_run(write_tb(tmp_path / "b", logged), tmp_path / "b.duckdb")  # no scaler in sight: it may hide a NaN
    [f] = MaskedNonfinite().check(without)
    assert f.step_end == int(steps[end]) and f.severity == "critical"


def test_nan_norms_on_steps_where_the_lr_did_not_advance_are_skipped_fp16_steps(tmp_path):
    """HF fp16 with warmup: grad_norm NaN at steps 1, 2 and 6, and the logged LR does not advance on exactly those
    steps (0.0, 0.0, then 1.983e-4 twice): the scaler skipped three optimizer steps while calibrating, the loss there
    is real. The same NaN norms beside an LR that advances at every step stay a warning, and so does one held LR
    past the scaler's start-up (HF's Trainer filters a NaN step loss out of what it logs: nothing tells the two)."""
    steps = np.arange(1, 41)
    loss = 4.3 * np.exp(-steps / 15) + 0.5
    grad = np.ones(steps.size)
    grad[[0, 1, 5]] = np.nan
    lr = np.r_[0.0, 0.0, 1e-4, 2e-4, 1.983e-4, 1.983e-4, 2e-4 - 1.7e-6 * np.arange(2, 36)]
    hist = [{"loss": float(v), "grad_norm": float(g), "learning_rate": float(r), "epoch": round(int(s) / 40, 4),
             "step": int(s)} for s, v, g, r in zip(steps, loss, grad, lr)]
    run = load_run(write_trainer_state(tmp_path / "a", hist), tmp_path / "a.duckdb")
    assert list(MaskedNonfinite().check(run)) == []
    moving = [dict(h, learning_rate=2e-4 - 1e-6 * i) for i, h in enumerate(hist)]
    run = load_run(write_trainer_state(tmp_path / "b", moving), tmp_path / "b.duckdb")
    [f] = MaskedNonfinite().check(run)
    assert f.severity == "warning" and f.evidence["steps_masked"] == 3
    late = [dict(h) for h in moving]
    late[30]["grad_norm"], late[30]["learning_rate"] = float("nan"), late[29]["learning_rate"]
    late = [dict(h, grad_norm=1.0) if h["step"] in (1, 2, 6) else h for h in late]
    run = load_run(write_trainer_state(tmp_path / "c", late), tmp_path / "c.duckdb")
    [f] = MaskedNonfinite().check(run)
    assert f.step == 31 and f.evidence["steps_masked"] == 1


def _without_norm(history: list[dict]) -> list[dict]:
    return [{k: v for k, v in e.items() if k != "grad_norm"} for e in history]


def test_a_zeroed_training_loss_beside_a_nan_evaluation_is_a_hidden_nan(tmp_path):
    """No grad norm logged (older HF versions): a window of only NaN steps logs a training loss of 0.0 and the
    evaluation after it is NaN. The first NaN evaluation in the zeroed stretch is where the logs hide the NaN."""
    steps, loss, norm = _hf_logs(*_per_step(n=400, nan_from=195))
    history = _without_norm(hf_history(steps, loss, norm))
    history += [{"eval_loss": float("nan") if s >= 200 else 0.9, "epoch": round(s / 1000, 4), "step": s}
                for s in (100, 200, 300, 400)]
    history.sort(key=lambda e: (e["step"], "eval_loss" in e))
    run = load_run(write_trainer_state(tmp_path / "r", history), tmp_path / "f.duckdb")
    [f] = MaskedNonfinite().check(run)
    assert f.severity == "critical" and f.step == 300 and f.evidence["zero_loss_from"] == 210
    assert "exactly 0.0" in f.summary


def test_a_loss_that_learned_to_zero_beside_finite_evaluations_hides_nothing(tmp_path):
    steps, loss, norm = _hf_logs(*_per_step(n=400))
    history = _without_norm(hf_history(steps, loss, norm))
    history += [{"eval_loss": 0.9, "epoch": round(s / 1000, 4), "step": s} for s in (100, 200, 300, 400)]
    history.sort(key=lambda e: (e["step"], "eval_loss" in e))
    run = load_run(write_trainer_state(tmp_path / "r", history), tmp_path / "f.duckdb")
    assert list(MaskedNonfinite().check(run)) == []


@pytest.mark.parametrize("held, fires", [(False, False), (True, True)])
def test_one_nonfinite_norm_that_comes_back_beside_a_moving_loss_is_a_skipped_step(tmp_path, held, fires):
    """mmengine's training lines (`Epoch(train) [e][i/290] ... grad_norm: nan  loss: 209.18`), which filter nothing
    out of the loss they print: one NaN norm among 100 lines, the loss finite and moving beside it and the norm
    back on the next line, is a step an fp16 scaler skipped, not a loss the log hides. The same line beside a loss
    repeated exactly from the line before (a value held in place of the NaN) is masking."""
    from tests.runwriters import log_messages

    loss, norm = _per_step(n=100, seed=1)
    norm[57] = np.nan
    if held:
        loss[57] = loss[56]
    lines = [f"Epoch(train)  [{1 + i // 10}][{10 * (i % 10 + 1):3d}/100]  lr: 1.0000e-03  grad_norm: {g:.4f}  "
             f"loss: {v:.4f}" for i, (g, v) in enumerate(zip(norm, np.round(loss, 4)))]
    root = tmp_path / "r"
    root.mkdir()
    log_messages(root / "train.log", lines, fmt="%(asctime)s - mmengine - INFO - %(message)s")
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.has("grad_norm") and run.format_of(run.pick("loss")) != "hf_trainer_state"
    found = list(MaskedNonfinite().check(run))
    assert bool(found) == fires, [f.summary for f in found]
    if fires:
        assert (found[0].severity, found[0].evidence["steps_masked"]) == ("warning", 1)


def _megatron(tmp_path, norms, skipped):
    """Megatron-DeepSpeed's iteration lines, which print no loss on these records: `grad norm: nan` beside the
    optimizer's own `number of skipped iterations` counter."""
    from tests.runwriters import log_messages

    lines = [f" iteration {5426 + i:8d}/  250000 | consumed samples: {43408 + 8 * i:12d} | elapsed time per iteration "
             f"(ms): 4247.9 | learning rate: 2.999E-04 | global batch size:     8 | loss scale: 1.0 | grad norm: {g} | "
             f"number of skipped iterations: {k:3d} | number of nan iterations: {k:3d} |"
             for i, (g, k) in enumerate(zip(norms, skipped))]
    root = tmp_path / "run"
    root.mkdir()
    log_messages(root / "train.log", lines, fmt="%(message)s")
    return load_run(root, tmp_path / "f.duckdb")


@pytest.mark.parametrize("norms, skipped, fires", [
    (["nan"] * 4, [0] * 4, True),  # the NaN gradients were applied: nothing skipped them
    (["nan"] * 4, [1] * 4, False),  # the optimizer skipped each: amp_overflow's story, nothing hidden
    (["1.234", "1.198", "1.305", "1.221"], [0] * 4, False),
])
def test_a_nan_grad_norm_on_every_record_that_no_skip_counter_counts_needs_no_loss(tmp_path, norms, skipped, fires):
    run = _megatron(tmp_path, norms, skipped)
    assert not run.has("loss") and MaskedNonfinite().unavailable(run) is None
    found = list(MaskedNonfinite().check(run))
    assert bool(found) == fires, [f.summary for f in found]
    if fires:
        assert found[0].severity == "critical" and found[0].evidence["steps_masked"] == 4


@pytest.mark.parametrize("rise, fires", [(1.5, True), (20.0, False)])
def test_a_nan_norm_on_the_last_record_beside_a_loss_that_rose_a_little_is_masking(tmp_path, rise, fires):
    """HF's lines end on `grad_norm: nan` while the loss beside it reads a little above every earlier one (the
    filter's running average over a window holding a few large losses before the NaN): the log hides the NaN. A
    loss twenty times everything before shows the blow-up itself: divergence's, nothing hidden."""
    steps, loss, norm = _hf_logs(*_per_step())
    norm[-1] = np.nan
    loss[-1] = rise * loss[:-1].max()
    run = load_run(write_trainer_state(tmp_path / "r", hf_history(steps, loss, norm)), tmp_path / "f.duckdb")
    found = list(MaskedNonfinite().check(run))
    assert bool(found) == fires, [f.summary for f in found]
    if fires:
        assert (found[0].severity, found[0].step, found[0].evidence["steps_masked"]) == ("critical", 1000, 1)


@pytest.mark.parametrize("held, severity", [(False, "warning"), (True, "critical")])
def test_a_brief_nan_norm_streak_the_raw_log_ends_on_beside_a_moving_loss_is_no_critical(tmp_path, held, severity):
    """mmengine's lines print the raw loss: had the weights gone NaN, the loss beside the last two `grad_norm: nan`
    lines would be NaN too. A loss that still moves there (falling, as it did before) says a step an fp16 scaler
    skipped or a NaN the log stops before showing: a warning naming both. The same lines with the last loss held
    exactly at the value before it (written in place of the NaN) hide it: critical."""
    from tests.runwriters import log_messages

    loss, norm = _per_step(n=60, seed=2)
    norm[-2:] = np.nan
    loss = np.round(loss, 4)
    if held:
        loss[-1], norm[-1] = loss[-2], np.inf  # (an Inf norm: a line otherwise identical would be a reprint)
    lines = [f"Epoch(train)  [1][{10 * (i + 1):4d}/735]  lr: 1.9870e-04  grad_norm: {g:.4f}  loss: {v:.4f}"
             for i, (g, v) in enumerate(zip(norm, loss))]
    root = tmp_path / "r"
    root.mkdir()
    log_messages(root / "train.log", lines, fmt="%(asctime)s - mmengine - INFO - %(message)s")
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.format_of(run.pick("loss")) != "hf_trainer_state"
    [f] = MaskedNonfinite().check(run)
    assert (f.severity, f.evidence["steps_masked"], f.evidence["norm_came_back"]) == (severity, 2, False)


def _dpo_history(nan_from: int | None, recover: bool = False) -> list[dict]:
    """A DPO fine-tune's log as TRL's trainer writes it through HF's: per record the loss and what it computed from
    the policy's outputs (log-probs, logits, rewards). From `nan_from` the outputs are NaN: HF's filter keeps the
    logged loss finite (the window's running average, 0.0 once a whole window was NaN)."""
    out = []
    for i, s in enumerate(range(10, 210, 10)):
        bad = nan_from is not None and s >= nan_from and not (recover and s >= nan_from + 30)
        out.append({"loss": 0.0 if bad else round(0.69 - 0.002 * i, 4), "learning_rate": 5e-7,
                    "logps/chosen": math.nan if bad else -120.5 + i, "logps/rejected": math.nan if bad else -121.0,
                    "rewards/margins": math.nan if bad else 0.01 * i, "epoch": round(s / 200, 4), "step": s})
    return out


@pytest.mark.parametrize(("nan_from", "recover", "fires"), [(150, False, True), (None, False, False),
                                                             (100, True, False)])
def test_outputs_nan_to_the_end_beside_a_finite_loss_are_hidden(tmp_path, nan_from, recover, fires):
    run = load_run(write_trainer_state(tmp_path / "r", _dpo_history(nan_from, recover)), tmp_path / "f.duckdb")
    found = list(MaskedNonfinite().check(run))
    assert bool(found) == fires
    if fires:
        [f] = found
        assert f.severity == "critical" and f.step == nan_from and f.evidence["any_loss_exactly_zero"]
        assert f.evidence["nonfinite_series"] == ["logps/chosen", "logps/rejected", "rewards/margins"]
        assert list(MaskedNonfinite(min_outputs=4).check(run)) == []  # one series alone may be a misread


def _sweep_csv(path, nan_from: int | None) -> None:
    """A sweep script's per-record CSV as `csv.DictWriter` writes it: the loss falls as the model learns, and two
    statistics of an optimizer (the update norms of a method) are NaN where the script did not compute them."""
    import csv

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, ["step", "train_loss", "test_loss", "update_norm", "max_abs_update"])
        w.writeheader()
        for i in range(20):
            off = nan_from is None or i >= nan_from
            w.writerow({"step": 100 * i, "train_loss": 5.2 * 0.8 ** i, "test_loss": 5.3 * 0.85 ** i,
                        "update_norm": math.nan if off else 0.08 + 0.001 * i,
                        "max_abs_update": math.nan if off else 0.006 + 0.0001 * i})


@pytest.mark.parametrize(("nan_from", "fires"), [(None, False), (12, True)])
def test_statistics_never_computed_beside_a_learning_loss_hide_nothing(tmp_path, nan_from, fires):
    """NaN from the first record to the last beside a loss that learns: never computed, not outputs turned NaN; the
    same statistics finite first and NaN from some record to the end still are."""
    _sweep_csv(tmp_path / "r" / "metrics.csv", nan_from)
    run = load_run(tmp_path / "r", tmp_path / "f.duckdb")
    found = list(MaskedNonfinite().check(run))
    assert bool(found) == fires
    if fires:
        assert found[0].step == 1200 and found[0].evidence["nonfinite_series"] == ["max_abs_update", "update_norm"]
