"""lr_schedule_anomaly on LRs logged from real torch schedulers to real TensorBoard event files."""

import math

import numpy as np
import pytest

from forensics.judge.detectors import LrScheduleAnomaly
from tests.paths import REAL_RUNS
from tests.runwriters import curve, load_run, one_torch_thread, write_tb

N = 1000  # optimizer steps in every run here; the LR is logged every 10


def _lrs(make, n: int = N, every: int = 10, steps_per_log: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The LR a real torch scheduler gives, logged every `every` optimizer steps; `steps_per_log` scheduler
    steps per optimizer step (4 = stepped on every micro-batch under 4-step gradient accumulation)."""
    import torch

    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1e-3)
    sched = make(opt)
    steps, lrs = [], []
    with one_torch_thread():
        for i in range(n):
            if i % every == 0:
                steps.append(i)
                lrs.append(sched.get_last_lr()[0])
            opt.step()
            for _ in range(steps_per_log):
                sched.step()
    return np.array(steps), np.array(lrs)


def _linear_with_warmup(warmup: int, total: int):
    """HF's get_linear_schedule_with_warmup, as a LambdaLR."""
    import torch

    return lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda s: s / max(1, warmup) if s < warmup
                                                         else max(0.0, (total - s) / max(1, total - warmup)))


def _cosine_with_warmup(warmup: int, total: int):
    """HF's get_cosine_schedule_with_warmup, as a LambdaLR."""
    import torch

    def f(s):
        if s < warmup:
            return s / max(1, warmup)
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * (s - warmup) / max(1, total - warmup))))
    return lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, f)


def _run(tmp_path, lr, config=None):
    return load_run(write_tb(tmp_path / "r", {"train/loss": curve(n=100), "lr": lr}, config=config),
                    tmp_path / "f.duckdb")


def test_fires_when_a_micro_batch_stepped_schedule_ends_at_a_quarter(tmp_path):
    lr = _lrs(_linear_with_warmup(20, N), steps_per_log=4)  # stepped 4x per optimizer step: 0 by step ~250
    [f] = LrScheduleAnomaly().check(_run(tmp_path, lr))
    assert f.kind == "lr_schedule_anomaly" and f.step == 250 and f.evidence["floor_lr"] == 0.0
    assert f.evidence["peak_lr"] == pytest.approx(1e-3, rel=0.05) and 0.2 < f.evidence["fraction_of_run"] < 0.3


def test_fires_when_the_configured_scheduler_never_moves_the_lr(tmp_path):
    lr = _lrs(lambda opt: __import__("torch").optim.lr_scheduler.ConstantLR(opt, factor=1.0))
    [f] = LrScheduleAnomaly().check(_run(tmp_path, lr, config={"lr_scheduler_type": "cosine"}))
    assert f.step == 0 and f.evidence["scheduler"] == "cosine" and f.evidence["lr"] == pytest.approx(1e-3)


def test_warmup_then_cosine_to_zero_is_silent(tmp_path):
    lr = _lrs(_cosine_with_warmup(50, N))
    assert list(LrScheduleAnomaly().check(_run(tmp_path, lr, config={"lr_scheduler_type": "cosine"}))) == []


@pytest.mark.parametrize("start,gamma", [(0.04, 0.05), (0.09, 0.1), (0.001, 0.1)])
def test_warmup_then_one_early_step_down_is_a_planned_schedule(tmp_path, start, gamma):
    """A detectron2-style WarmupMultiStep schedule: a linear warmup (its first logged LR a few percent of the peak,
    just below the level the step goes down to), then one step down ×0.1 or ×0.05 at 38% of the run, held to the
    end. A step schedule's milestones are the user's plan: its floor is a level the run trains at, not an LR of
    nothing, and the warmup's start is no floor the schedule decays to."""
    import torch

    def make(opt):
        return torch.optim.lr_scheduler.ChainedScheduler([
            torch.optim.lr_scheduler.LinearLR(opt, start_factor=start, total_iters=N // 4),
            torch.optim.lr_scheduler.MultiStepLR(opt, [3 * N // 8], gamma=gamma)])
    lr = _lrs(make)
    assert lr[1][0] == pytest.approx(1e-3 * start) and lr[1][-1] == pytest.approx(1e-3 * gamma)
    assert list(LrScheduleAnomaly().check(_run(tmp_path, lr))) == []


def test_a_log_that_ends_inside_its_warmup_is_silent(tmp_path):
    """A linear schedule whose warmup is longer than the log so far: the LR rises at every record, its peak the last
    one. Nothing follows the peak, so nothing decays, and a rising LR is no constant one."""
    lr = _lrs(_linear_with_warmup(2 * N, 4 * N))
    assert list(LrScheduleAnomaly().check(_run(tmp_path, lr, config={"lr_scheduler_type": "linear"}))) == []


def test_cyclic_schedule_touching_its_floor_every_cycle_is_silent(tmp_path):
    """CyclicLR returns to base_lr at the end of every cycle, the first after 10% of the run, and the run ends
    at the end of a cycle: a rule "first reaches the floor early and ends there" would fire."""
    import torch

    lr = _lrs(lambda opt: torch.optim.lr_scheduler.CyclicLR(opt, base_lr=1e-5, max_lr=1e-3, step_size_up=50),
              n=N + 1)
    assert lr[1][-1] == lr[1].min()
    assert list(LrScheduleAnomaly().check(_run(tmp_path, lr))) == []


def test_constant_after_an_unlogged_warmup_is_silent(tmp_path):
    """HF `constant_with_warmup` logged after its warmup: constant, as configured."""
    lr = _lrs(lambda opt: __import__("torch").optim.lr_scheduler.ConstantLR(opt, factor=1.0))
    run = _run(tmp_path, lr, config={"lr_scheduler_type": "constant_with_warmup"})
    assert list(LrScheduleAnomaly().check(run)) == []


def test_fires_when_a_configured_cosine_overshoots_its_horizon_and_cycles(tmp_path):
    """HF's cosine schedule stepped per micro-batch (8 per optimizer step) runs past num_training_steps: it hits
    0 an eighth into the run and then climbs back and cycles. The config names a one-way cosine."""
    lr = _lrs(_cosine_with_warmup(20, N), n=N, steps_per_log=8)
    assert lr[1][-1] > lr[1].min()  # it does not end at the floor
    [f] = LrScheduleAnomaly().check(_run(tmp_path, lr, config={"optim": {"scheduler": "cosine"}}))
    assert 100 <= f.step <= 140 and f.evidence["fraction_of_run"] < 0.15 and f.evidence["rises_after_floor"] > 0


def _resumed_without_scheduler(resume_at: int) -> tuple[np.ndarray, np.ndarray]:
    """A cosine schedule (CosineAnnealingLR over N steps) logged every 10 steps; at `resume_at` the process restarts
    from a checkpoint of the weights with a new optimizer and scheduler whose state was not loaded: the LR goes back
    to the start of its schedule while the global step goes on (issue 24 class 3)."""
    import torch

    steps, lrs = [], []
    with one_torch_thread():
        for start, stop in ((0, resume_at), (resume_at, N)):
            opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1e-3)
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=N)
            for i in range(start, stop):
                if i % 10 == 0:
                    steps.append(i)
                    lrs.append(sched.get_last_lr()[0])
                opt.step()
                sched.step()
    return np.array(steps), np.array(lrs)


def test_fires_when_a_resume_restarts_the_schedule_mid_decay(tmp_path):
    from forensics.judge.detectors import ResumedRun

    run = _run(tmp_path, _resumed_without_scheduler(600))
    [f] = LrScheduleAnomaly().check(run)
    assert f.step == 600 and f.evidence["same_lr_step"] < 100 and f.evidence["lr_after"] == pytest.approx(1e-3)
    [r] = ResumedRun().check(run)
    assert r.step == 600 and r.evidence["lr_before"] < 0.5e-3


def test_warm_restarts_from_the_floor_are_no_restart_of_the_schedule(tmp_path):
    """SGDR (CosineAnnealingWarmRestarts) jumps back to its peak by design, from its floor at each cycle's end."""
    import torch

    lr = _lrs(lambda opt: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=200))
    assert np.sum(np.diff(lr[1]) > 0) >= 4  # it does jump back up
    assert LrScheduleAnomaly().restarts(_run(tmp_path, lr)) == []


def test_fires_when_the_lr_is_zero_on_the_first_quarter_of_the_records(tmp_path):
    """A LambdaLR whose warmup multiplier is floor(step / 300): 0 for the first 300 of 1000 steps (an integer
    division where a float one was meant). A real warmup from 0 (HF's linear warmup) is 0 on its first record only."""
    import torch

    lr = _lrs(lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, s // 300)))
    steps, loss = curve(n=100)
    loss = np.where(steps < 300, loss[0], loss[np.searchsorted(steps, np.maximum(steps - 300, 0))])  # waits for the LR
    logs = {"train/loss": (steps, loss), "lr": lr}
    [f] = LrScheduleAnomaly().check(load_run(write_tb(tmp_path / "a", logs), tmp_path / "a.duckdb"))
    assert (f.step, f.step_end, f.evidence["zero_points"]) == (0, 290, 30)
    assert list(LrScheduleAnomaly().check(_run(tmp_path / "b", _lrs(_linear_with_warmup(100, N))))) == []


def test_an_lr_printed_as_zero_on_every_record_of_a_short_log_fires(tmp_path):
    """Two epochs whose progress line prints `LR 0.00000000` (a per-group decay multiplied into the LR at every
    step): 0 on every record is nothing trained, from two records on. An LR that leaves 0 after its first record is a
    warmup, and silent."""
    steps = np.array([100, 200])
    loss = (steps, np.array([0.0029, 0.0037]))
    [f] = LrScheduleAnomaly().check(load_run(write_tb(tmp_path / "a", {"train/loss": loss, "lr": (steps, np.zeros(2))}),
                                             tmp_path / "a.duckdb"))
    assert f.evidence["zero_points"] == 2 and "every one of its 2 records" in f.summary
    warm = (steps, np.array([0.0, 1e-4]))
    assert list(LrScheduleAnomaly().check(load_run(write_tb(tmp_path / "b", {"train/loss": loss, "lr": warm}),
                                                   tmp_path / "b.duckdb"))) == []


@pytest.mark.skipif(not (REAL_RUNS / "wandb_gpt_baseline").is_dir(), reason="shared/real_runs is not beside the checkout")
@pytest.mark.needs_shared
def test_an_lr_logged_as_zero_while_the_loss_falls_is_not_the_optimizers(tmp_path):
    """A real W&B run logs lr 0 on all 105 records of one of its five LR groups (`train/lr_head`) while its loss
    falls from 430 to 2.1: whatever that series is, it is not the LR the optimizer used, and no LR finding is made
    from it. The run's schedule is the group another repeats (`lr_scalar` = `lr_matrix`: `Run.candidates`)."""
    run = load_run(REAL_RUNS / "wandb_gpt_baseline", tmp_path / "f.duckdb")
    assert float(np.max(run.series_named("train/lr_head")["value"].to_numpy())) == 0.0
    assert run.pick("lr") == "train/lr_matrix"
    assert list(LrScheduleAnomaly().check(run)) == []


@pytest.mark.parametrize("accum,every,warmup", [(2, 10, 0), (3, 5, 0), (2, 20, 30), (6, 10, 0)])
def test_fires_when_an_unnamed_cosine_stepped_per_micro_batch_climbs_back(tmp_path, accum, every, warmup):
    """Issue 24 class 8: torch's CosineAnnealingLR (or a warmup + cosine LambdaLR) built for N optimizer steps and
    stepped on each of `accum` micro-batches reaches its floor at N/accum and, periodic, climbs back; no scheduler
    named in the config and the run does not end at the floor, so rule (a) cannot see it."""
    import torch

    def make(opt):
        if not warmup:
            return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=N)
        return torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * s / N)))
    lr = _lrs(make, every=every, steps_per_log=accum)
    [f] = LrScheduleAnomaly().check(_run(tmp_path, lr, config={"gradient_accumulation_steps": accum}))
    assert f.evidence.get("rule") == "past_horizon" or f.evidence["fraction_of_run"] < 0.5
    assert abs(f.step - N / accum) <= 0.1 * N and f.evidence["fraction_of_run"] < 0.5
    if f.evidence.get("rule") == "past_horizon":
        assert f.evidence["matches_accumulation"] and "too fast" in f.summary


@pytest.mark.parametrize("make", ["cyclic_long", "cyclic_exp", "sgdr_mult", "cosine_once", "onecycle"])
def test_schedules_that_climb_by_design_are_silent(tmp_path, make):
    """With no scheduler named, CyclicLR (it starts at its floor and climbs as long as it falls), SGDR (it jumps
    back), a cosine stepped once per optimizer step and OneCycle stay silent under rule (e)."""
    import torch

    sched = {
        "cyclic_long": lambda o: torch.optim.lr_scheduler.CyclicLR(o, 1e-5, 1e-3, step_size_up=150),
        "cyclic_exp": lambda o: torch.optim.lr_scheduler.CyclicLR(o, 1e-5, 1e-3, step_size_up=100, mode="exp_range",
                                                                  gamma=0.999),
        "sgdr_mult": lambda o: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=150, T_mult=2),
        "cosine_once": lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=N),
        "onecycle": lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=1e-3, total_steps=N + 1),
    }[make]
    lr = _lrs(sched)
    assert list(LrScheduleAnomaly().check(_run(tmp_path, lr))) == []


def test_a_resume_that_rebuilt_a_longer_linear_schedule_is_a_restart(tmp_path):
    """A linear decay over 20000 steps, resumed at step 10000 with max_steps doubled: the rebuilt schedule lands at
    1.4995e-5 from 1.0e-5 (×1.4995, a value the first schedule had at step 5000) and decays over 40000 steps."""
    first = np.arange(10, 10001, 10)
    second = np.arange(10010, 38001, 10)
    lr = np.r_[2e-5 * (1 - first / 20000), 2e-5 * (1 - second / 40000)]
    [f] = LrScheduleAnomaly().check(_run(tmp_path, (np.r_[first, second], lr)))
    assert f.step == 10010 and f.evidence["lr_after"] == pytest.approx(1.4995e-5)



def test_a_resume_that_rebuilt_a_schedule_a_quarter_longer_is_a_restart(tmp_path):
    """The same linear decay resumed at step 10000 with max_steps ×1.25: the rebuilt schedule lands ×1.2 up, on a
    value the first one had at step 8000 (`jump` ×1.1: 0 of the pool's 180 healthy runs with an LR fire at ×1.05).
    Its twin, the decay never resumed, is silent."""
    first = np.arange(10, 10001, 10)
    second = np.arange(10010, 25001, 10)
    lr = np.r_[2e-5 * (1 - first / 20000), 2e-5 * (1 - second / 25000)]
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    [f] = LrScheduleAnomaly().check(_run(tmp_path / "a", (np.r_[first, second], lr)))
    assert f.step == 10010 and 1.15 < f.evidence["lr_after"] / f.evidence["lr_before"] < 1.25
    whole = np.arange(10, 20001, 10)
    assert list(LrScheduleAnomaly().check(_run(tmp_path / "b", (whole, 2e-5 * (1 - whole / 20000))))) == []

def _console_epochs(tmp_path, name: str, make, planned: int, epochs: int, every: int = 1) -> list[str]:
    """The lines of a small training loop over a tiny regression (a real optimizer and torch scheduler, stepped once
    per epoch), printed as `Epoch e/planned - loss: L - lr: X` with six decimals, stopped after `epochs` of the
    `planned` epochs (the user stopped it, or pasted its start); written to tmp_path/name/train.log."""
    import torch

    torch.manual_seed(0)
    x = torch.randn(256, 8)
    y = x @ torch.randn(8, 1) + 0.1 * torch.randn(256, 1)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    sched = make(opt)
    lines = []
    with one_torch_thread():
        for e in range(1, epochs + 1):
            losses = []
            for b in range(0, 256, 32):
                loss = torch.nn.functional.mse_loss(model(x[b:b + 32]), y[b:b + 32])
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
            if e % every == 0:
                lines.append(f"Epoch {e}/{planned} - loss: {np.mean(losses):.4f} - lr: {sched.get_last_lr()[0]:.6f}")
            sched.step()
    root = tmp_path / name
    root.mkdir()
    (root / "train.log").write_text("\n".join(lines) + "\n")
    return lines


def _linear_to_zero(over: int):
    import torch

    return lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda e: max(0.0, 1 - e / over))


def test_fires_when_the_lr_reaches_zero_early_in_the_epochs_the_console_declares(tmp_path):
    """A linear decay built for 10 epochs in a run that prints `Epoch e/100`: 0 from epoch 11, and the log stops at
    epoch 16. Against the log alone the floor comes late (two thirds in); against the declared 100 epochs, at 11%.
    The same decay built for the 100 epochs, stopped at the same epoch, is silent."""
    _console_epochs(tmp_path, "short", _linear_to_zero(10), planned=100, epochs=16)
    [f] = LrScheduleAnomaly().check(load_run(tmp_path / "short", tmp_path / "short.duckdb"))
    assert f.evidence["rule"] == "before_plan" and f.evidence["fraction_of_plan"] == pytest.approx(0.11)
    assert "100 epochs" in f.summary and not f.evidence["plan"]["bound"]
    _console_epochs(tmp_path, "planned", _linear_to_zero(100), planned=100, epochs=16)
    assert list(LrScheduleAnomaly().check(load_run(tmp_path / "planned", tmp_path / "planned.duckdb"))) == []


def test_an_lr_printed_as_zero_from_the_second_of_three_epochs_of_a_planned_run_fires(tmp_path):
    """`lr: 0.000000` from the second record on, at epoch 2 of a declared 50: nothing trains for the rest of the
    run. The same three records with no declared length are too few to judge, and the finding says nothing then."""
    lines = _console_epochs(tmp_path, "planned", _linear_to_zero(1), planned=50, epochs=3)
    assert [line.endswith("lr: 0.000000") for line in lines] == [False, True, True]
    [f] = LrScheduleAnomaly().check(load_run(tmp_path / "planned", tmp_path / "planned.duckdb"))
    assert f.step == 1 and f.evidence["floor_lr"] == 0 and "50 epochs" in f.summary
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "train.log").write_text("\n".join(line.replace("/50", "") for line in lines) + "\n")
    assert list(LrScheduleAnomaly().check(load_run(bare, tmp_path / "bare.duckdb"))) == []


def test_fires_when_an_iteration_counter_declares_a_plan_the_floor_comes_long_before(tmp_path):
    """`[iter i/10000]` lines every 10 iterations of a linear decay built for 200 (the scheduler's length set in the
    wrong unit) and printed to iteration 300: the floor at iteration 200 is 2% of the declared plan, read from the
    counter's total (the counter is the step, so the fraction is exact, not a bound)."""
    import torch

    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=3e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1 - s / 200))
    lines = []
    for i in range(1, 301):
        opt.step()
        sched.step()
        if i % 10 == 0:
            lines.append(f"[iter {i}/10000] loss {3.0 - 0.002 * min(i, 200):.4f} LR {sched.get_last_lr()[0]:.8f}")
    root = tmp_path / "r"
    root.mkdir()
    (root / "train.log").write_text("\n".join(lines) + "\n")
    [f] = LrScheduleAnomaly().check(load_run(root, tmp_path / "f.duckdb"))
    assert not f.evidence["plan"]["bound"] and f.evidence["plan"]["fraction"] == pytest.approx(0.02)
    assert "at step 200" in f.summary and "2% into it" in f.summary


def test_without_a_declared_plan_the_finding_says_it_judged_the_log_length(tmp_path):
    lr = _lrs(_linear_with_warmup(20, N), steps_per_log=4)
    [f] = LrScheduleAnomaly().check(_run(tmp_path, lr))
    assert f.evidence["plan"] is None and "declares no planned length" in f.summary


def _hf_run(out, total_steps: int, stop_at: int):
    """A real HF Trainer training a tiny BERT classifier for 4 epochs of 8 steps (max_steps 32 in its state), with a
    linear schedule with warmup built for `total_steps` and passed to the Trainer, stopped by a callback at
    `stop_at` (a run the user stopped); its trainer_state.json saved as Trainer saves it."""
    import torch
    from transformers import (BertConfig, BertForSequenceClassification, Trainer, TrainerCallback,
                              TrainingArguments, get_linear_schedule_with_warmup)

    class Stop(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            control.should_training_stop = state.global_step >= stop_at

    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32, num_labels=2)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    data = [{"input_ids": torch.randint(0, 50, (8,), generator=g), "labels": i % 2} for i in range(64)]
    model = BertForSequenceClassification(config)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    args = TrainingArguments(output_dir=str(out), num_train_epochs=4, per_device_train_batch_size=8,
                             logging_steps=1, save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True)
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[Stop()],
                      optimizers=(opt, get_linear_schedule_with_warmup(opt, 2, total_steps)))
    with one_torch_thread():
        trainer.train()
    trainer.save_state()
    return out


def test_hf_trainer_schedule_built_for_one_epoch_of_four_fires_against_max_steps(tmp_path):
    """The schedule is built for one epoch's 8 steps while the Trainer plans 32 (`max_steps` in trainer_state.json);
    stopped at step 14 the LR has been logged as 0 since step 9: 64% into the log, 28% into the plan. Built for
    the 32 steps it is silent, stopped at the same step."""
    pytest.importorskip("transformers", reason="the test extra installs transformers")
    short = _hf_run(tmp_path / "short", total_steps=8, stop_at=14)
    [f] = LrScheduleAnomaly().check(load_run(short, tmp_path / "short.duckdb"))
    assert f.step == 9 and f.evidence["fraction_of_plan"] == pytest.approx(9 / 32) and "32 steps (max_steps)" in f.summary
    planned = _hf_run(tmp_path / "planned", total_steps=32, stop_at=14)
    assert list(LrScheduleAnomaly().check(load_run(planned, tmp_path / "planned.duckdb"))) == []


@pytest.mark.parametrize("make,fires", [
    (_linear_to_zero(14), True),  # a linear decay built for 14 epochs of the 1200 printed: stopped before it ends
    (_linear_to_zero(1200), False),  # the same decay built for the planned 1200
    ("exponential", False),  # ×0.9 per epoch: falls fast but never reaches 0, and is no straight line
])
def test_a_straight_line_decay_is_extrapolated_to_zero_against_the_declared_epochs(tmp_path, make, fires):
    """A run killed after 10 of its `Epoch e/1200` epochs: the LR has not reached its floor yet, but it falls on a
    straight line that reaches 0 at epoch 14, 1% into the plan."""
    import torch

    if make == "exponential":
        make = lambda opt: torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)  # noqa: E731
    _console_epochs(tmp_path, "r", make, planned=1200, epochs=10)
    found = list(LrScheduleAnomaly().check(load_run(tmp_path / "r", tmp_path / "f.duckdb")))
    assert [f.evidence.get("rule") for f in found] == (["line_to_zero"] if fires else [])
    if fires:
        assert found[0].evidence["zero_at"] == pytest.approx(15, abs=1) and "1200 epochs" in found[0].summary


def test_an_lr_on_line_ordinals_is_judged_on_its_own_axis_not_the_logged_steps_beside_it(tmp_path):
    """The loss in TensorBoard at steps 0-8650, the LR only in the console log, one line per 100 steps without a
    step counter (its axis is the line's ordinal, 0-86): a warmup, then a cosine to 0 on its last line. Read against
    the TensorBoard steps, the floor at ordinal 86 would sit at 1% of the run."""
    steps = np.arange(0, 8660, 10)
    root = write_tb(tmp_path / "r", {"train/loss": (steps, 2.0 * np.exp(-steps / 3000) + 0.1)})
    x = np.arange(0, 8660, 100)
    lr = np.where(x < 1000, 5e-5 * x / 1000, 2.5e-5 * (1 + np.cos(np.pi * (x - 1000) / 7600)))
    lr[-1] = 0.0
    (root / "train.log").write_text("\n".join(f"lr: {v:.3e}" for v in lr) + "\n")
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.meta.filter(run.meta["role"] == "lr")["ordinal"][0]
    assert list(LrScheduleAnomaly().check(run)) == []


@pytest.mark.parametrize("named,driven,fires", [
    ("cosine", "constant_after_warmup", True),  # the dump names cosine, another scheduler holds the LR at its peak
    ("cosine", "cosine", False),  # the cosine it names, really stepped
    ("multistep", "constant_after_warmup", False),  # a step schedule holds its LR until a milestone by design
])
def test_an_lr_held_at_its_peak_after_warmup_under_a_named_decaying_scheduler(tmp_path, named, driven, fires):
    """A script prints its arguments (`lr_scheduler_type: cosine`, as HF's TrainingArguments dump does), then HF-style
    log dicts of the LR a real torch scheduler gives over 60 logged steps: a 4-record warmup, then either held at the
    peak (the scheduler that drives the optimizer is not the one named) or a cosine decay."""
    import torch

    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1e-4)
    warm = 40

    def factor(s):
        if s < warm:
            return (s + 1) / warm
        return 1.0 if driven == "constant_after_warmup" else 0.5 * (1 + math.cos(math.pi * (s - warm) / (600 - warm)))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    lines = [f"INFO - __main__ -   lr_scheduler_type: {named}", "INFO - __main__ -   num_train_epochs: 3.0"]
    for s in range(1, 601):
        opt.step()
        sched.step()
        if s % 10 == 0:
            lines.append(f"INFO - __main__ -   {{'loss': {1.5 - s / 1000:.4f}, 'learning_rate': "
                         f"{sched.get_last_lr()[0]!r}, 'epoch': {3 * s / 600:.2f}}}")
    root = tmp_path / "r"
    root.mkdir()
    (root / "train.log").write_text("\n".join(lines) + "\n")
    found = list(LrScheduleAnomaly().check(load_run(root, tmp_path / "f.duckdb")))
    assert [f.evidence.get("rule") for f in found] == (["held_after_warmup"] if fires else [])
    if fires:
        assert found[0].evidence["held_points"] >= 50 and "names a cosine scheduler" in found[0].summary


def _warmup_then_cosine(warmup: int, warmup_total: int):
    """A LambdaLR warmup over `warmup_total` steps handing over to CosineAnnealingLR at step `warmup` (SequentialLR):
    with `warmup_total` = `warmup` it ends at the base LR; computed for a longer horizon, it ends below it and the
    cosine starts at the base LR."""
    import torch

    def make(opt):
        warm = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: s / warmup_total)
        cos = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=N - warmup)
        return torch.optim.lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[warmup])
    return make


@pytest.mark.parametrize("warmup_total,fires", [(200, True), (100, False)])
def test_fires_when_a_warmup_computed_for_another_horizon_hands_over_at_half_the_lr(tmp_path, warmup_total, fires):
    """A warmup computed for twice its length ends near half the base LR and the cosine after it doubles the LR in one
    logged interval; the same warmup computed for its own length ends at the base LR and is silent."""
    lr = _lrs(_warmup_then_cosine(100, warmup_total))
    found = list(LrScheduleAnomaly().check(_run(tmp_path, lr)))
    if not fires:
        assert found == []
        return
    [f] = found
    # logged every 10 steps: the last warmup record is step 90's 90/200 of the base LR
    assert f.evidence["rule"] == "jump" and f.step == 100 and f.evidence["ratio"] == pytest.approx(200 / 90, rel=1e-3)
    assert f.evidence["lr_before"] == pytest.approx(4.5e-4, rel=1e-3) and "×2.2" in f.summary


def test_fires_when_an_lr_held_at_zero_leaps_to_its_peak(tmp_path):
    """A LambdaLR that holds the LR at 0 for the first 200 of 1000 steps (fewer than a quarter of the records, so
    not the LR-0 rule) and then sets it to its peak in one step, a cosine after."""
    import torch

    lr = _lrs(lambda opt: torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.0 if s < 200 else 0.5 * (1 + math.cos(math.pi * (s - 200) / (N - 200)))))
    [f] = LrScheduleAnomaly().check(_run(tmp_path, lr))
    assert f.evidence["rule"] == "jump" and f.step == 200 and f.evidence["lr_before"] == 0.0
    assert f.evidence["ratio"] is None and "×" not in f.summary


@pytest.mark.parametrize("make", ["multistep", "sgdr", "sgdr_mult", "exponential", "plateau_like", "cyclic",
                                  "onecycle", "linear_warmup_cosine"])
def test_standard_schedules_make_no_jump(tmp_path, make):
    """Step decays drop, SGDR jumps back to the peak it had, cyclic and one-cycle schedules climb point by point, a
    warmup ends at its base LR: none is a jump of rule (h)."""
    import torch

    lrs = torch.optim.lr_scheduler
    sched = {
        "multistep": lambda o: lrs.MultiStepLR(o, [300, 600, 900], gamma=0.1),
        "sgdr": lambda o: lrs.CosineAnnealingWarmRestarts(o, T_0=200),
        "sgdr_mult": lambda o: lrs.CosineAnnealingWarmRestarts(o, T_0=100, T_mult=2),
        "exponential": lambda o: lrs.ExponentialLR(o, gamma=0.997),
        "plateau_like": lambda o: lrs.StepLR(o, 250, gamma=0.5),
        "cyclic": lambda o: lrs.CyclicLR(o, 1e-5, 1e-3, step_size_up=100),
        "onecycle": lambda o: lrs.OneCycleLR(o, max_lr=1e-3, total_steps=N + 1),
        "linear_warmup_cosine": _warmup_then_cosine(100, 100),
    }[make]
    assert LrScheduleAnomaly().jumps(_run(tmp_path, _lrs(sched))) == []


def _console_lr(tmp_path, name: str, factor, epochs: int, decimals: int) -> None:
    """A real loop over a tiny regression with SGD and a LambdaLR stepped once per epoch, printing
    `Epoch e/epochs - loss: L - lr: X` with `decimals` decimals to tmp_path/name/train.log."""
    import torch

    torch.manual_seed(0)
    x = torch.randn(128, 8)
    y = x @ torch.randn(8, 1)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    lines = []
    with one_torch_thread():
        for e in range(1, epochs + 1):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            lines.append(f"Epoch {e}/{epochs} - loss: {loss.item():.4f} - lr: {sched.get_last_lr()[0]:.{decimals}f}")
            sched.step()
    (tmp_path / name).mkdir()
    (tmp_path / name / "train.log").write_text("\n".join(lines) + "\n")


def test_a_printed_lr_is_judged_within_its_rounding(tmp_path):
    """A linear warmup from 0 over 30 epochs printed with 4 decimals moves 0.0000 → 0.0001 → 0.0002 in steps of
    the last digit: no jump. The same warmup computed for 60 epochs and cut at epoch 30 to the base LR, printed
    the same way, jumps 0.0005 → 0.0010: a jump however it was rounded."""
    _console_lr(tmp_path, "rounded", lambda e: min(1.0, e / 30), epochs=60, decimals=4)
    run = load_run(tmp_path / "rounded", tmp_path / "rounded.duckdb")
    assert 0.0 in run.arrays("lr")[1] and 1e-4 in run.arrays("lr")[1]
    assert list(LrScheduleAnomaly().check(run)) == []
    _console_lr(tmp_path, "cut", lambda e: e / 60 if e < 30 else 1.0, epochs=60, decimals=4)
    [f] = LrScheduleAnomaly().check(load_run(tmp_path / "cut", tmp_path / "cut.duckdb"))
    assert f.evidence["rule"] == "jump" and (f.evidence["lr_before"], f.evidence["lr_after"]) == (0.0005, 0.001)


def test_fires_when_a_step_schedule_steps_up_mid_run(tmp_path):
    """StepLR with gamma 2 (a factor meant to divide) doubles the LR every 400 steps: the first leap fires; the same
    StepLR with gamma 0.5 halves it and is silent."""
    import torch

    up = _lrs(lambda opt: torch.optim.lr_scheduler.StepLR(opt, 400, gamma=2.0))
    [f] = LrScheduleAnomaly().check(_run(tmp_path / "up", up))
    assert f.evidence["rule"] == "jump" and f.step == 400 and f.evidence["ratio"] == pytest.approx(2.0)
    down = _lrs(lambda opt: torch.optim.lr_scheduler.StepLR(opt, 400, gamma=0.5))
    assert list(LrScheduleAnomaly().check(_run(tmp_path / "down", down))) == []


def test_a_log_warmup_from_zero_with_steps_skipped_on_overflow_is_no_jump(tmp_path):
    """DeepSpeed's log warmup from 0 under fp16: the scheduler is not stepped on an overflowed step, so the LR repeats
    0 and then its first value off 0, the warmup climbing on after it: a warmup, silent. The rise off 0 is ×inf with
    a flat interval on each side; the warmup beyond the repeat is what tells it from a leap."""
    import torch

    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, math.log(s + 1) / math.log(1000)))
    overflowed = {0, 2, 7}
    steps, lrs = [], []
    with one_torch_thread():
        for i in range(60):
            steps.append(i)
            lrs.append(sched.get_last_lr()[0])
            if i not in overflowed:
                opt.step()
                sched.step()
    assert lrs[:4] == [0.0, 0.0, lrs[2], lrs[2]] and lrs[2] > 0
    assert LrScheduleAnomaly().jumps(_run(tmp_path, (np.array(steps), np.array(lrs)))) == []


def _trainer_state_lr(tmp_path, lr, max_steps: int):
    """An HF trainer_state.json logging the LR of `lr` (steps, values) every 25 steps, `max_steps` declared."""
    from tests.writers import TrainerState

    steps, values = lr
    loss = curve(n=steps.size)[1]
    history = [{"loss": float(y), "learning_rate": float(v), "epoch": round(int(s) / max_steps, 4), "step": int(s)}
               for s, v, y in zip(steps, values, loss)]
    root = tmp_path / "r"
    root.mkdir()
    TrainerState(global_step=int(steps[-1]), max_steps=max_steps, logging_steps=25, num_train_epochs=1,
                 log_history=history).save_to_json(root / "trainer_state.json")
    return load_run(root, tmp_path / "f.duckdb")


def _logged_from_step_25(lr):
    steps, values = lr
    return steps[1:], values[1:]  # HF logs after the first logging interval, not at step 0


def test_fires_when_the_warmup_outlasts_the_run(tmp_path):
    # HF's linear schedule with warmup_steps 500 in a run of max_steps 400: the LR rises to the last record
    lr = _logged_from_step_25(_lrs(_linear_with_warmup(500, 400), n=401, every=25))
    [f] = LrScheduleAnomaly().check(_trainer_state_lr(tmp_path, lr, max_steps=400))
    assert f.evidence["rule"] == "warmup_to_the_end" and f.step == 25 and f.step_end == 400
    assert "warmup never ended" in f.summary and "400 steps (max_steps)" in f.summary


def test_a_warmup_that_ends_before_the_run_does_is_silent(tmp_path):
    lr = _logged_from_step_25(_lrs(_linear_with_warmup(100, 400), n=401, every=25))
    assert list(LrScheduleAnomaly().check(_trainer_state_lr(tmp_path, lr, max_steps=400))) == []


def test_a_log_that_stops_inside_its_warmup_early_in_its_plan_is_silent(tmp_path):
    # the same rising LR, from a run that declares 4000 steps: an unfinished run's warmup, not one that never ended
    lr = _logged_from_step_25(_lrs(_linear_with_warmup(500, 4000), n=401, every=25))
    assert list(LrScheduleAnomaly().check(_trainer_state_lr(tmp_path, lr, max_steps=4000))) == []


def test_a_printed_lr_at_zero_on_the_few_records_of_a_log_stopped_in_warmup_is_silent(tmp_path):
    """A MetricLogger-style progress line printing the LR with 4 decimals (`lr: 0.0000 (0.0000)`) on the 3 records a
    run wrote before it stopped: a warmup's LR below the digits printed, not an LR stuck at 0. The same 0 printed on
    every record of a longer log, no plan declared, still fires."""
    from tests.runwriters import log_messages

    def write(name: str, n: int):
        root = tmp_path / name
        root.mkdir()
        log_messages(root / "train.log", [
            f"Training  [{10 * (i + 4):>7}/5000000]  eta: 195 days, 10:45:44  lr: 0.0000 (0.0000)  wd: 0.0400 (0.0400)"
            f"  total_loss: {10.5 - 0.01 * i:.4f} ({10.5 - 0.005 * i:.4f})  time: 1.2 data: 0.01" for i in range(n)])
        return load_run(root, tmp_path / f"{name}.duckdb")

    assert list(LrScheduleAnomaly().check(write("short", 3))) == []
    [f] = LrScheduleAnomaly().check(write("long", 8))
    assert "every one of its 8 records" in f.summary


def test_a_warmup_stepped_per_epoch_is_no_jump(tmp_path):
    """A warmup the scheduler steps once per epoch (×34, then ×2 to the peak at epoch 4 of 60), the LR logged at every
    batch, then a cosine decay: each jump lands below the peak the LR goes on rising to early in the run (a jump that
    lands at the peak, a warmup handing over at the wrong value, still fires: the tests above)."""
    import torch

    def factor(e):
        return [0.01, 0.34, 0.67][e] if e < 3 else 0.5 * (1 + math.cos(math.pi * (e - 3) / 57))

    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=5e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    steps, lrs = [], []
    for e in range(60):
        for b in range(50):
            steps.append(e * 50 + b)
            lrs.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    steps, lrs = np.array(steps), np.array(lrs)
    loss = curve(n=steps.size, every=1, tau=1500.0)
    run = load_run(write_tb(tmp_path / "a", {"train/loss": loss, "lr": (steps, lrs)}), tmp_path / "a.duckdb")
    assert list(LrScheduleAnomaly().check(run)) == []
    # its steps up are equal (a linear warmup stepped per epoch): a staircase, whatever share of the run it takes
    assert list(LrScheduleAnomaly(warm_share=0.0).check(run)) == []


def _hf_wandb_rows(tmp_path, monkeypatch, run_id: str, evaluate: bool):
    """An HF Trainer's W&B history written by wandb offline: a linear decay to 0 at `max_steps` 760, the loss and
    LR logged every 30 steps with `train/global_step` beside them, and with `evaluate` an evaluation's row after
    each, repeating that global step."""
    wandb = pytest.importorskip("wandb", reason="wandb writes the run under test")
    for k, v in {"WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path), "WANDB_SILENT": "true"}.items():
        monkeypatch.setenv(k, v)
    total, every = 760, 30
    lr = _lrs(_linear_with_warmup(0, total), n=total, every=every)[1]
    run = wandb.init(project="forensics-test", id=run_id,
                     config={"max_steps": total, "learning_rate": 1e-3, "lr_scheduler_type": "linear"})
    losses = curve(n=lr.size, every=every)[1]
    for k, (rate, loss) in enumerate(zip(lr.tolist()[1:], losses.tolist()[1:]), start=1):
        run.log({"train/loss": loss, "train/learning_rate": rate, "train/global_step": k * every})
        if evaluate:
            run.log({"eval/loss": loss * 1.1, "train/global_step": k * every})
    run.finish()
    wandb.teardown()
    return load_run(tmp_path, tmp_path / "f.duckdb")


def test_an_lr_on_wandb_history_rows_is_placed_on_the_trainer_s_global_step(tmp_path, monkeypatch):
    """HF's W&B callback logs `train/learning_rate` with `train/global_step` beside it; the history's own step is
    one row per logging call (0-24 for 760 steps logged every 30). A linear decay to 0 at the plan's end is on plan
    when read on the trainer's steps; read on the rows it would reach 0 at 3% of `max_steps`."""
    loaded = _hf_wandb_rows(tmp_path, monkeypatch, "hfrows1", evaluate=False)
    assert loaded.arrays("lr")[0][-1] < 30  # the history's rows
    assert list(LrScheduleAnomaly().check(loaded)) == []


def test_an_lr_on_wandb_rows_with_evaluations_between_is_placed_on_the_global_step(tmp_path, monkeypatch):
    """The same callback with evaluation on: each evaluation is a row of its own that repeats the training row's
    `train/global_step`, so the counter holds still for a row. It is still the trainer's step: the decay to 0 at
    the plan's end is on plan (read on the rows, it would reach 0 at 6% of `max_steps`)."""
    loaded = _hf_wandb_rows(tmp_path, monkeypatch, "hfrows2", evaluate=True)
    assert loaded.arrays("lr")[0][-1] < 60  # the history's rows
    assert list(LrScheduleAnomaly().check(loaded)) == []


# Ultralytics YOLOv8's results.csv of a 10-epoch detection run, three parameter groups (`lr/pg0` the biases, warmed
# down from `warmup_bias_lr` 0.1 while the weights' groups warm up from 0), from
# Abdelrhman941/Vehicle-Detection-Project@b91f41397077414c57b23a8fa5fd8ed86880f4f5:runs/detect/train/results.csv.
YOLO_GROUPS = """epoch,time,train/box_loss,train/cls_loss,train/dfl_loss,metrics/precision(B),metrics/recall(B),metrics/mAP50(B),metrics/mAP50-95(B),val/box_loss,val/cls_loss,val/dfl_loss,lr/pg0,lr/pg1,lr/pg2
1,229.676,1.24622,1.77697,1.02019,0.03033,0.87407,0.71064,0.3826,1.52762,2.80995,1.16523,0.0679706,0.000323529,0.000323529
2,438.374,1.16875,0.90802,1.02492,0.77595,0.79829,0.83503,0.51443,1.29523,1.34573,1.06667,0.0349115,0.000597745,0.000597745
3,644.314,1.12436,0.80359,1.01597,0.83622,0.86766,0.91531,0.62912,1.12127,0.85555,0.99919,0.00179235,0.000811961,0.000811961
4,851.382,1.09282,0.74699,0.9928,0.83734,0.90103,0.93555,0.65988,1.06593,0.71737,0.99368,0.00073,0.00073,0.00073
5,1056.58,1.07436,0.7146,0.98646,0.89149,0.8826,0.94939,0.68181,1.03503,0.67373,0.96906,0.00064,0.00064,0.00064
6,1254.28,1.05145,0.68467,0.98084,0.89816,0.91303,0.95833,0.68453,1.03488,0.66051,0.96649,0.00055,0.00055,0.00055
7,1453.09,1.03733,0.65926,0.96941,0.88108,0.90932,0.9544,0.68909,1.03214,0.62914,0.97273,0.00046,0.00046,0.00046
8,1658.78,1.01656,0.6218,0.96168,0.924,0.90288,0.96483,0.70135,1.023,0.61262,0.96345,0.00037,0.00037,0.00037
9,1861.84,1.00144,0.61767,0.95804,0.87869,0.93535,0.96059,0.70554,1.01314,0.58508,0.96536,0.00028,0.00028,0.00028
10,2065.59,0.98665,0.58885,0.95359,0.88912,0.92424,0.96498,0.71047,0.994,0.57178,0.95534,0.00019,0.00019,0.00019
"""


def test_the_schedule_is_the_parameter_group_the_others_repeat_not_the_bias_groups_warmup(tmp_path):
    """Regression (false lr_schedule_anomaly on a healthy run): the bias group falls ×90 over the 3 warmup epochs
    toward the base LR while the two weight groups rise to it, then all three decay together; read alone, the bias
    group "reaches its floor at 33% of the run". The run's schedule is the one its groups share."""
    root = tmp_path / "run"
    root.mkdir()
    (root / "results.csv").write_text(YOLO_GROUPS)
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.pick("lr") in ("lr/pg1", "lr/pg2")
    assert list(LrScheduleAnomaly().check(run)) == []


# A segmentation trainer's log of three launches appended to one file, each printing its own iteration total: one of
# 1,000 iterations whose polynomial decay reaches its floor at its own last iteration, a 50-iteration try, and a
# resume of a 50,000-iteration plan (TRAIN lines 69-219 every tenth and the last five, 368-372 and 582-591 of
# zlwangustc/encnet_reprod@38e20821258accec0b73c1a5383f1e95cb88ea67:log/workerlog.0).
RELAUNCHED = """2021-10-08 23:18:55 [INFO]	[TRAIN] epoch: 1, iter: 10/1000, loss: 2.0655, lr: 0.009919, batch_cost: 0.3893, reader_cost: 0.02874, ips: 10.2750 samples/sec | ETA 00:06:25
2021-10-08 23:19:14 [INFO]	[TRAIN] epoch: 2, iter: 110/1000, loss: 0.2399, lr: 0.009013, batch_cost: 0.1837, reader_cost: 0.00005, ips: 21.7747 samples/sec | ETA 00:02:43
2021-10-08 23:19:32 [INFO]	[TRAIN] epoch: 4, iter: 210/1000, loss: 0.1507, lr: 0.008098, batch_cost: 0.1844, reader_cost: 0.00005, ips: 21.6912 samples/sec | ETA 00:02:25
2021-10-08 23:19:51 [INFO]	[TRAIN] epoch: 5, iter: 310/1000, loss: 0.1354, lr: 0.007170, batch_cost: 0.1850, reader_cost: 0.00005, ips: 21.6216 samples/sec | ETA 00:02:07
2021-10-08 23:20:09 [INFO]	[TRAIN] epoch: 7, iter: 410/1000, loss: 0.1498, lr: 0.006229, batch_cost: 0.1850, reader_cost: 0.00005, ips: 21.6209 samples/sec | ETA 00:01:49
2021-10-08 23:20:31 [INFO]	[TRAIN] epoch: 8, iter: 510/1000, loss: 0.1443, lr: 0.005272, batch_cost: 0.1943, reader_cost: 0.00007, ips: 20.5893 samples/sec | ETA 00:01:35
2021-10-08 23:20:49 [INFO]	[TRAIN] epoch: 10, iter: 610/1000, loss: 0.1326, lr: 0.004295, batch_cost: 0.1866, reader_cost: 0.00005, ips: 21.4312 samples/sec | ETA 00:01:12
2021-10-08 23:21:08 [INFO]	[TRAIN] epoch: 11, iter: 710/1000, loss: 0.1165, lr: 0.003292, batch_cost: 0.1865, reader_cost: 0.00005, ips: 21.4507 samples/sec | ETA 00:00:54
2021-10-08 23:21:27 [INFO]	[TRAIN] epoch: 13, iter: 810/1000, loss: 0.1289, lr: 0.002254, batch_cost: 0.1860, reader_cost: 0.00005, ips: 21.5094 samples/sec | ETA 00:00:35
2021-10-08 23:21:45 [INFO]	[TRAIN] epoch: 14, iter: 910/1000, loss: 0.0987, lr: 0.001156, batch_cost: 0.1862, reader_cost: 0.00005, ips: 21.4861 samples/sec | ETA 00:00:16
2021-10-08 23:21:55 [INFO]	[TRAIN] epoch: 15, iter: 960/1000, loss: 0.1170, lr: 0.000564, batch_cost: 0.1851, reader_cost: 0.00005, ips: 21.6113 samples/sec | ETA 00:00:07
2021-10-08 23:21:56 [INFO]	[TRAIN] epoch: 15, iter: 970/1000, loss: 0.1063, lr: 0.000439, batch_cost: 0.1864, reader_cost: 0.00005, ips: 21.4649 samples/sec | ETA 00:00:05
2021-10-08 23:21:58 [INFO]	[TRAIN] epoch: 15, iter: 980/1000, loss: 0.1109, lr: 0.000309, batch_cost: 0.1858, reader_cost: 0.00005, ips: 21.5318 samples/sec | ETA 00:00:03
2021-10-08 23:22:00 [INFO]	[TRAIN] epoch: 15, iter: 990/1000, loss: 0.1074, lr: 0.000173, batch_cost: 0.1839, reader_cost: 0.00005, ips: 21.7567 samples/sec | ETA 00:00:01
2021-10-08 23:22:02 [INFO]	[TRAIN] epoch: 16, iter: 1000/1000, loss: 0.1045, lr: 0.000020, batch_cost: 0.1925, reader_cost: 0.00578, ips: 20.7753 samples/sec | ETA 00:00:00
2021-10-17 20:26:54 [INFO]	[TRAIN] epoch: 1, iter: 10/50, loss: 5.2658, lr: 0.083644, batch_cost: 1.5577, reader_cost: 0.05241, ips: 2.5679 samples/sec | ETA 00:01:02
2021-10-17 20:27:08 [INFO]	[TRAIN] epoch: 1, iter: 20/50, loss: 2.8692, lr: 0.065036, batch_cost: 1.4013, reader_cost: 0.00009, ips: 2.8546 samples/sec | ETA 00:00:42
2021-10-17 20:27:23 [INFO]	[TRAIN] epoch: 1, iter: 30/50, loss: 3.5522, lr: 0.045806, batch_cost: 1.4093, reader_cost: 0.00009, ips: 2.8383 samples/sec | ETA 00:00:28
2021-10-17 20:27:37 [INFO]	[TRAIN] epoch: 2, iter: 40/50, loss: 3.2286, lr: 0.025596, batch_cost: 1.4704, reader_cost: 0.05213, ips: 2.7204 samples/sec | ETA 00:00:14
2021-10-17 20:27:51 [INFO]	[TRAIN] epoch: 2, iter: 50/50, loss: 3.4435, lr: 0.002958, batch_cost: 1.4171, reader_cost: 0.00010, ips: 2.8228 samples/sec | ETA 00:00:00
2021-10-18 07:38:57 [INFO]	[TRAIN] epoch: 27, iter: 10010/50000, loss: 1.0093, lr: 0.081789, batch_cost: 1.3930, reader_cost: 0.05172, ips: 2.8714 samples/sec | ETA 15:28:27
2021-10-18 07:39:10 [INFO]	[TRAIN] epoch: 27, iter: 10020/50000, loss: 0.9377, lr: 0.081770, batch_cost: 1.2491, reader_cost: 0.00012, ips: 3.2024 samples/sec | ETA 13:52:17
2021-10-18 07:39:22 [INFO]	[TRAIN] epoch: 27, iter: 10030/50000, loss: 0.9787, lr: 0.081752, batch_cost: 1.2569, reader_cost: 0.00011, ips: 3.1824 samples/sec | ETA 13:57:19
2021-10-18 07:39:35 [INFO]	[TRAIN] epoch: 27, iter: 10040/50000, loss: 1.1352, lr: 0.081733, batch_cost: 1.2643, reader_cost: 0.00012, ips: 3.1638 samples/sec | ETA 14:02:01
2021-10-18 07:39:47 [INFO]	[TRAIN] epoch: 28, iter: 10050/50000, loss: 1.1044, lr: 0.081715, batch_cost: 1.2688, reader_cost: 0.00012, ips: 3.1525 samples/sec | ETA 14:04:49
2021-10-18 07:40:00 [INFO]	[TRAIN] epoch: 28, iter: 10060/50000, loss: 1.3014, lr: 0.081697, batch_cost: 1.2757, reader_cost: 0.00010, ips: 3.1355 samples/sec | ETA 14:09:12
2021-10-18 07:40:13 [INFO]	[TRAIN] epoch: 28, iter: 10070/50000, loss: 1.1329, lr: 0.081678, batch_cost: 1.2810, reader_cost: 0.00015, ips: 3.1225 samples/sec | ETA 14:12:30
2021-10-18 07:40:26 [INFO]	[TRAIN] epoch: 28, iter: 10080/50000, loss: 0.8802, lr: 0.081660, batch_cost: 1.2788, reader_cost: 0.00011, ips: 3.1279 samples/sec | ETA 14:10:50
2021-10-18 07:40:39 [INFO]	[TRAIN] epoch: 28, iter: 10090/50000, loss: 1.1855, lr: 0.081641, batch_cost: 1.2853, reader_cost: 0.00015, ips: 3.1122 samples/sec | ETA 14:14:55
2021-10-18 07:40:51 [INFO]	[TRAIN] epoch: 28, iter: 10100/50000, loss: 1.0893, lr: 0.081623, batch_cost: 1.2866, reader_cost: 0.00010, ips: 3.1090 samples/sec | ETA 14:15:35
"""


def test_an_earlier_launch_is_judged_against_its_own_length_not_the_plan_a_later_launch_prints(tmp_path):
    """A launch whose schedule reaches its floor at its own end, followed by a relaunch that prints a longer plan:
    the plan a log declares is the plan of the launch it ends in, never an earlier launch's yardstick."""
    root = tmp_path / "relaunched"
    root.mkdir()
    (root / "workerlog.0").write_text(RELAUNCHED)
    assert list(LrScheduleAnomaly().check(load_run(root, tmp_path / "f.duckdb"))) == []


# The same trainer's log where a launch printing a 160,000-iteration plan stopped after one line and a relaunch ran
# its 16,000 iterations to the end, its decay reaching its floor there (TRAIN lines 94, then 95-1953 every hundredth
# and 1983-1987 of Sunting78/PP-Industry@891730bc0f32e8a207a46d88a72c85c9ba28857c:log/workerlog.0).
REPLANNED = """2023-03-06 19:38:19 [INFO]	[TRAIN] epoch: 1, iter: 10/160000, loss: 0.7563, lr: 0.009999, batch_cost: 0.4588, reader_cost: 0.07643, ips: 17.4365 samples/sec | ETA 20:23:24
2023-03-06 19:38:22 [INFO]	[TRAIN] epoch: 2, iter: 20/160000, loss: 0.8728, lr: 0.009999, batch_cost: 0.2704, reader_cost: 0.03712, ips: 29.5812 samples/sec | ETA 12:01:05
2023-03-06 19:44:15 [INFO]	[TRAIN] epoch: 39, iter: 660/16000, loss: 0.3246, lr: 0.009629, batch_cost: 0.2241, reader_cost: 0.00037, ips: 35.7061 samples/sec | ETA 00:57:16
2023-03-06 19:49:20 [INFO]	[TRAIN] epoch: 98, iter: 1660/16000, loss: 0.2716, lr: 0.009062, batch_cost: 0.2251, reader_cost: 0.00029, ips: 35.5402 samples/sec | ETA 00:53:47
2023-03-06 19:54:15 [INFO]	[TRAIN] epoch: 157, iter: 2660/16000, loss: 0.2564, lr: 0.008491, batch_cost: 0.3516, reader_cost: 0.05658, ips: 22.7555 samples/sec | ETA 01:18:09
2023-03-06 19:59:21 [INFO]	[TRAIN] epoch: 216, iter: 3660/16000, loss: 0.2545, lr: 0.007916, batch_cost: 0.3123, reader_cost: 0.05713, ips: 25.6186 samples/sec | ETA 01:04:13
2023-03-06 20:03:43 [INFO]	[TRAIN] epoch: 275, iter: 4660/16000, loss: 0.2861, lr: 0.007336, batch_cost: 0.2534, reader_cost: 0.05100, ips: 31.5714 samples/sec | ETA 00:47:53
2023-03-06 20:07:38 [INFO]	[TRAIN] epoch: 333, iter: 5660/16000, loss: 0.2589, lr: 0.006751, batch_cost: 0.1904, reader_cost: 0.00029, ips: 42.0269 samples/sec | ETA 00:32:48
2023-03-06 20:11:31 [INFO]	[TRAIN] epoch: 392, iter: 6660/16000, loss: 0.2922, lr: 0.006161, batch_cost: 0.1923, reader_cost: 0.00030, ips: 41.6074 samples/sec | ETA 00:29:55
2023-03-06 20:15:27 [INFO]	[TRAIN] epoch: 451, iter: 7660/16000, loss: 0.2740, lr: 0.005564, batch_cost: 0.2629, reader_cost: 0.04472, ips: 30.4252 samples/sec | ETA 00:36:32
2023-03-06 20:19:21 [INFO]	[TRAIN] epoch: 510, iter: 8660/16000, loss: 0.3281, lr: 0.004960, batch_cost: 0.2793, reader_cost: 0.05387, ips: 28.6420 samples/sec | ETA 00:34:10
2023-03-06 20:23:16 [INFO]	[TRAIN] epoch: 569, iter: 9660/16000, loss: 0.2366, lr: 0.004347, batch_cost: 0.2555, reader_cost: 0.05806, ips: 31.3102 samples/sec | ETA 00:26:59
2023-03-06 20:27:15 [INFO]	[TRAIN] epoch: 628, iter: 10660/16000, loss: 0.1491, lr: 0.003725, batch_cost: 0.2544, reader_cost: 0.05118, ips: 31.4410 samples/sec | ETA 00:22:38
2023-03-06 20:31:15 [INFO]	[TRAIN] epoch: 686, iter: 11660/16000, loss: 0.2113, lr: 0.003091, batch_cost: 0.1918, reader_cost: 0.00035, ips: 41.7048 samples/sec | ETA 00:13:52
2023-03-06 20:35:19 [INFO]	[TRAIN] epoch: 745, iter: 12660/16000, loss: 0.3391, lr: 0.002442, batch_cost: 0.1877, reader_cost: 0.00026, ips: 42.6317 samples/sec | ETA 00:10:26
2023-03-06 20:39:13 [INFO]	[TRAIN] epoch: 804, iter: 13660/16000, loss: 0.1998, lr: 0.001773, batch_cost: 0.2625, reader_cost: 0.05265, ips: 30.4796 samples/sec | ETA 00:10:14
2023-03-06 20:43:12 [INFO]	[TRAIN] epoch: 863, iter: 14660/16000, loss: 0.2318, lr: 0.001074, batch_cost: 0.2477, reader_cost: 0.04850, ips: 32.3003 samples/sec | ETA 00:05:31
2023-03-06 20:47:15 [INFO]	[TRAIN] epoch: 922, iter: 15660/16000, loss: 0.1618, lr: 0.000313, batch_cost: 0.2587, reader_cost: 0.05655, ips: 30.9292 samples/sec | ETA 00:01:27
2023-03-06 20:48:23 [INFO]	[TRAIN] epoch: 939, iter: 15960/16000, loss: 0.2454, lr: 0.000047, batch_cost: 0.1822, reader_cost: 0.00026, ips: 43.9008 samples/sec | ETA 00:00:07
2023-03-06 20:48:26 [INFO]	[TRAIN] epoch: 940, iter: 15970/16000, loss: 0.1467, lr: 0.000036, batch_cost: 0.2406, reader_cost: 0.04142, ips: 33.2563 samples/sec | ETA 00:00:07
2023-03-06 20:48:28 [INFO]	[TRAIN] epoch: 940, iter: 15980/16000, loss: 0.1595, lr: 0.000025, batch_cost: 0.1884, reader_cost: 0.00028, ips: 42.4641 samples/sec | ETA 00:00:03
2023-03-06 20:48:30 [INFO]	[TRAIN] epoch: 941, iter: 15990/16000, loss: 0.1734, lr: 0.000014, batch_cost: 0.2485, reader_cost: 0.04640, ips: 32.1876 samples/sec | ETA 00:00:02
2023-03-06 20:48:33 [INFO]	[TRAIN] epoch: 942, iter: 16000/16000, loss: 0.2076, lr: 0.000002, batch_cost: 0.2498, reader_cost: 0.04117, ips: 32.0206 samples/sec | ETA 00:00:00
"""


def test_a_relaunch_that_prints_a_shorter_plan_is_judged_against_it(tmp_path):
    """The plan is the total the log's last counter prints: a relaunch that planned 16,000 iterations and reached
    them is no schedule that ended 10% into an abandoned launch's 160,000."""
    root = tmp_path / "replanned"
    root.mkdir()
    (root / "workerlog.0").write_text(REPLANNED)
    assert list(LrScheduleAnomaly().check(load_run(root, tmp_path / "f.duckdb"))) == []


# A re-identification baseline's log, every line of epochs 1-2 and the first of each of epochs 3-20: a linear warmup
# stepped once per epoch over its first ten epochs (6e-05, 6.54e-04, 1.25e-03, ... 6e-03), then held (lines 150-172
# and the first `Base Lr` line of each epoch up to line 373 of
# ZhuangLii/naic2020_reid@59d738e4037d2be1e39377a8b63c38faeb616648:log/train_log.txt).
STAIRS = """2020-09-18 08:48:10,315 reid_baseline.train INFO: Epoch[1] Iteration[50/593] Loss: 4.046, Acc: 0.000, Base Lr: 6.00e-05
2020-09-18 08:48:45,168 reid_baseline.train INFO: Epoch[1] Iteration[100/593] Loss: 3.649, Acc: 0.000, Base Lr: 6.00e-05
2020-09-18 08:49:19,833 reid_baseline.train INFO: Epoch[1] Iteration[150/593] Loss: 3.421, Acc: 0.000, Base Lr: 6.00e-05
2020-09-18 08:49:54,718 reid_baseline.train INFO: Epoch[1] Iteration[200/593] Loss: 3.276, Acc: 0.000, Base Lr: 6.00e-05
2020-09-18 08:50:29,695 reid_baseline.train INFO: Epoch[1] Iteration[250/593] Loss: 3.171, Acc: 0.000, Base Lr: 6.00e-05
2020-09-18 08:51:04,433 reid_baseline.train INFO: Epoch[1] Iteration[300/593] Loss: 3.087, Acc: 0.000, Base Lr: 6.00e-05
2020-09-18 08:51:39,017 reid_baseline.train INFO: Epoch[1] Iteration[350/593] Loss: 3.021, Acc: 0.000, Base Lr: 6.00e-05
2020-09-18 08:52:13,600 reid_baseline.train INFO: Epoch[1] Iteration[400/593] Loss: 2.967, Acc: 0.000, Base Lr: 6.00e-05
2020-09-18 08:52:48,336 reid_baseline.train INFO: Epoch[1] Iteration[450/593] Loss: 2.923, Acc: 0.000, Base Lr: 6.00e-05
2020-09-18 08:53:22,629 reid_baseline.train INFO: Epoch[1] Iteration[500/593] Loss: 2.885, Acc: 0.000, Base Lr: 6.00e-05
2020-09-18 08:53:57,308 reid_baseline.train INFO: Epoch[1] Iteration[550/593] Loss: 2.850, Acc: 0.000, Base Lr: 6.00e-05
2020-09-18 08:54:37,239 reid_baseline.train INFO: Epoch[2] Iteration[50/593] Loss: 2.404, Acc: 0.000, Base Lr: 6.54e-04
2020-09-18 08:55:11,718 reid_baseline.train INFO: Epoch[2] Iteration[100/593] Loss: 2.360, Acc: 0.000, Base Lr: 6.54e-04
2020-09-18 08:55:46,216 reid_baseline.train INFO: Epoch[2] Iteration[150/593] Loss: 2.334, Acc: 0.000, Base Lr: 6.54e-04
2020-09-18 08:56:21,035 reid_baseline.train INFO: Epoch[2] Iteration[200/593] Loss: 2.317, Acc: 0.000, Base Lr: 6.54e-04
2020-09-18 08:56:55,617 reid_baseline.train INFO: Epoch[2] Iteration[250/593] Loss: 2.300, Acc: 0.000, Base Lr: 6.54e-04
2020-09-18 08:57:30,432 reid_baseline.train INFO: Epoch[2] Iteration[300/593] Loss: 2.283, Acc: 0.000, Base Lr: 6.54e-04
2020-09-18 08:58:05,145 reid_baseline.train INFO: Epoch[2] Iteration[350/593] Loss: 2.261, Acc: 0.000, Base Lr: 6.54e-04
2020-09-18 08:58:40,017 reid_baseline.train INFO: Epoch[2] Iteration[400/593] Loss: 2.230, Acc: 0.000, Base Lr: 6.54e-04
2020-09-18 08:59:14,717 reid_baseline.train INFO: Epoch[2] Iteration[450/593] Loss: 2.185, Acc: 0.000, Base Lr: 6.54e-04
2020-09-18 08:59:49,489 reid_baseline.train INFO: Epoch[2] Iteration[500/593] Loss: 2.127, Acc: 0.000, Base Lr: 6.54e-04
2020-09-18 09:00:24,346 reid_baseline.train INFO: Epoch[2] Iteration[550/593] Loss: 2.058, Acc: 0.001, Base Lr: 6.54e-04
2020-09-18 09:01:04,819 reid_baseline.train INFO: Epoch[3] Iteration[50/593] Loss: 2.109, Acc: 0.000, Base Lr: 1.25e-03
2020-09-18 09:07:31,656 reid_baseline.train INFO: Epoch[4] Iteration[50/593] Loss: 1.835, Acc: 0.002, Base Lr: 1.84e-03
2020-09-18 09:13:57,117 reid_baseline.train INFO: Epoch[5] Iteration[50/593] Loss: 1.577, Acc: 0.003, Base Lr: 2.44e-03
2020-09-18 09:20:24,175 reid_baseline.train INFO: Epoch[6] Iteration[50/593] Loss: 1.424, Acc: 0.008, Base Lr: 3.03e-03
2020-09-18 09:26:50,338 reid_baseline.train INFO: Epoch[7] Iteration[50/593] Loss: 1.298, Acc: 0.025, Base Lr: 3.62e-03
2020-09-18 09:33:17,438 reid_baseline.train INFO: Epoch[8] Iteration[50/593] Loss: 1.243, Acc: 0.036, Base Lr: 4.22e-03
2020-09-18 09:39:44,519 reid_baseline.train INFO: Epoch[9] Iteration[50/593] Loss: 1.148, Acc: 0.061, Base Lr: 4.81e-03
2020-09-18 09:46:08,661 reid_baseline.train INFO: Epoch[10] Iteration[50/593] Loss: 1.111, Acc: 0.070, Base Lr: 5.41e-03
2020-09-18 09:52:35,817 reid_baseline.train INFO: Epoch[11] Iteration[50/593] Loss: 1.073, Acc: 0.081, Base Lr: 6.00e-03
2020-09-18 09:58:57,336 reid_baseline.train INFO: Epoch[12] Iteration[50/593] Loss: 1.060, Acc: 0.084, Base Lr: 6.00e-03
2020-09-18 10:05:20,816 reid_baseline.train INFO: Epoch[13] Iteration[50/593] Loss: 0.983, Acc: 0.126, Base Lr: 6.00e-03
2020-09-18 10:11:48,715 reid_baseline.train INFO: Epoch[14] Iteration[50/593] Loss: 0.937, Acc: 0.144, Base Lr: 6.00e-03
2020-09-18 10:18:12,648 reid_baseline.train INFO: Epoch[15] Iteration[50/593] Loss: 0.969, Acc: 0.136, Base Lr: 6.00e-03
2020-09-18 10:24:34,770 reid_baseline.train INFO: Epoch[16] Iteration[50/593] Loss: 0.901, Acc: 0.153, Base Lr: 6.00e-03
2020-09-18 10:30:54,917 reid_baseline.train INFO: Epoch[17] Iteration[50/593] Loss: 0.882, Acc: 0.163, Base Lr: 6.00e-03
2020-09-18 10:37:18,318 reid_baseline.train INFO: Epoch[18] Iteration[50/593] Loss: 0.833, Acc: 0.186, Base Lr: 6.00e-03
2020-09-18 10:43:42,616 reid_baseline.train INFO: Epoch[19] Iteration[50/593] Loss: 0.804, Acc: 0.196, Base Lr: 6.00e-03
2020-09-18 10:50:07,751 reid_baseline.train INFO: Epoch[20] Iteration[50/593] Loss: 0.800, Acc: 0.196, Base Lr: 6.00e-03
"""


def test_a_linear_warmup_stepped_per_epoch_is_no_jump_however_long_it_lasts(tmp_path):
    """Each epoch's step up is as large as the one before: a staircase to the peak (at 85% of the records here),
    not a jump a schedule makes by mistake."""
    root = tmp_path / "stairs"
    root.mkdir()
    (root / "train_log.txt").write_text(STAIRS)
    assert LrScheduleAnomaly().jumps(load_run(root, tmp_path / "f.duckdb")) == []


# A distillation run's timm log, one launch of a script relaunched many times: epoch 0 at the warmup's first LR, then
# two records of epoch 1 one warmup step up, the launch stopping there (its loss turned nan) (lines 5082-5097 of
# Becai/Cumulative-Feature-Fusion@83295473cb84cfc73cdd899f963092b31a335812:train.log).
WARMUP_CUT_SHORT = r"""Learnable parameters
Student: 11.23M
Extra: 1.51M
-------------------------------
2024-04-12 17:21:14,329 -                train: [    INFO] - AMP not enabled. Training in float32.
2024-04-12 17:21:14,330 -                train: [    INFO] - Scheduled epochs: 300
2024-04-12 17:21:25,611 -                train: [    INFO] - Train: 0 [   0/390 (  0%)]  Loss: 12.49 (12.5)  Loss_gt: 4.633 (4.63)  Loss_cff: 7.857 (7.86) LR: 1.000e-04
2024-04-12 17:24:43,453 -                train: [    INFO] - Train: 0 [ 200/390 ( 51%)]  Loss: 9.962 (10.4)  Loss_gt: 4.614 (4.62)  Loss_cff: 5.348 (5.81) LR: 1.000e-04
2024-04-12 17:27:57,746 -                train: [    INFO] - Train: 0 [ 389/390 (100%)]  Loss: 10.05 (10.1)  Loss_gt: 4.561 (4.61)  Loss_cff: 5.488 (5.53) LR: 1.000e-04
2024-04-12 17:27:59,719 -                train: [    INFO] - Test: [   0/78]  Time: 1.972 (1.972)  Loss:  4.5490 (4.5490)  Acc@1:  4.6875 ( 4.6875)  Acc@5: 14.8438 (14.8438)
2024-04-12 17:28:34,854 -                train: [    INFO] - Test: [  78/78]  Time: 0.303 (0.470)  Loss:  4.5322 (4.5743)  Acc@1:  6.2500 ( 1.9700)  Acc@5: 12.5000 ( 8.0500)
2024-04-12 17:28:35,007 - timm.utils.checkpoint_saver: [    INFO] - Current checkpoints:
 ('./output/train\\20240412-172114-resnet18-224\\checkpoint\\checkpoint-0.pth.tar', 1.97)

2024-04-12 17:28:36,524 -                train: [    INFO] - Train: 1 [   0/390 (  0%)]  Loss: 9.200 (9.20)  Loss_gt: 4.558 (4.56)  Loss_cff: 4.642 (4.64) LR: 3.340e-02
2024-04-12 17:32:57,501 -                train: [    INFO] - Train: 1 [ 200/390 ( 51%)]  Loss: nan (nan)  Loss_gt: nan (nan)  Loss_cff: nan (nan) LR: 3.340e-02
"""


def test_a_launch_that_stops_on_the_first_records_after_a_jump_shows_no_hand_over(tmp_path):
    """A warmup stepped per epoch whose launch ends one record after its first step up: the log stopped inside its
    warmup, and says nothing of a schedule handing over at the wrong value."""
    root = tmp_path / "cut"
    root.mkdir()
    (root / "train.log").write_text(WARMUP_CUT_SHORT)
    run = load_run(root, tmp_path / "f.duckdb")
    assert LrScheduleAnomaly().jumps(run) == []
    assert [j["step"] for j in LrScheduleAnomaly(settled=1).jumps(run)] == [390]  # the rule's doing
