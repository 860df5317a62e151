"""throughput_drop from the wall-clock stamps SummaryWriter writes (add_scalar(walltime=...))."""

import numpy as np
import pytest

from forensics.judge.detectors import ThroughputDrop
from tests.pasted import POINTNETLK_EPOCHS
from tests.runwriters import curve, load_run, logger_writing, write_tb
from tests.test_console_misreadings import WENET_CV  # WeNet's per-rank lines and its CV pass, one real excerpt



def _write(root, dt, every=5, n=1000, val_every=None):
    """A loss logged every `every` steps whose wall time advances by dt(step) seconds per step."""
    from torch.utils.tensorboard import SummaryWriter

    steps, loss = curve(n=n // every + 1, every=every)
    clock = 1.7e9 + np.cumsum([dt(s) for s in range(n + 1)])
    w = SummaryWriter(log_dir=str(root))
    for s, v in zip(steps.tolist(), loss.tolist()):
        w.add_scalar("train/loss", v, global_step=s, walltime=float(clock[s]))
        if val_every and s % val_every == 0 and s > 0:
            w.add_scalar("val/loss", v * 1.1, global_step=s, walltime=float(clock[s]))
    w.close()
    return root


def test_recurring_stalls_fire(tmp_path):
    jitter = np.random.default_rng(0).normal(0, 0.004, 1001)
    run = load_run(_write(tmp_path / "r", lambda s: (40.0 if s % 100 == 0 else 0.08) + jitter[s]), tmp_path / "f.duckdb")
    [f] = ThroughputDrop().check(run)
    assert f.kind == "throughput_drop" and f.evidence["stalls"] == 10 and f.evidence["seconds_lost"] > 300
    assert f.evidence["first_stall_step"] == 100 and f.evidence["last_stall_step"] == 1000
    assert 0.07 < f.evidence["seconds_per_step_baseline"] < 0.09


def test_stretches_of_slower_steps_that_cost_a_minute_in_all_are_silent(tmp_path):
    """Two stretches of a few hundred steps running ×4 slower (an epoch or two whose images came from disk), in a run
    of three minutes: a minute and a half lost in all; no user changes a loader for that."""
    jitter = np.random.default_rng(0).normal(0, 0.004, 1001)
    slow = lambda s: 200 <= s < 350 or 600 <= s < 750  # noqa: E731
    run = load_run(_write(tmp_path / "r", lambda s: (0.35 if slow(s) else 0.08) + jitter[s]), tmp_path / "f.duckdb")
    assert list(ThroughputDrop().check(run)) == []
    assert list(ThroughputDrop(stall_seconds=5.0).check(run))  # the floor is what decides


def test_sustained_slowdown_fires_at_its_onset(tmp_path):
    jitter = np.random.default_rng(1).normal(0, 0.002, 1001)
    run = load_run(_write(tmp_path / "r", lambda s: (0.1 if s < 600 else 0.25) + jitter[s]), tmp_path / "f.duckdb")
    [f] = ThroughputDrop().check(run)
    assert abs(f.step - 600) <= 5 and 2.2 < f.evidence["factor"] < 2.8


def test_pauses_at_evaluation_steps_and_steady_runs_are_silent(tmp_path):
    jitter = np.random.default_rng(2).normal(0, 0.004, 1001)
    evals = _write(tmp_path / "a", lambda s: (40.0 if s % 100 == 0 else 0.08) + jitter[s], val_every=100)
    assert list(ThroughputDrop().check(load_run(evals, tmp_path / "a.duckdb"))) == []
    steady = _write(tmp_path / "b", lambda s: 0.08 + jitter[s])
    assert list(ThroughputDrop().check(load_run(steady, tmp_path / "b.duckdb"))) == []


def test_sub_millisecond_steps_slowing_down_are_below_the_floor(tmp_path):
    """Issue 24 class 6: a toy CPU run whose steps go from 0.4 ms to 0.7 ms (×1.7) halfway: the user loses nothing
    they would act on. The same ×1.7 at 40 ms -> 70 ms per step is a slowdown."""
    jitter = np.random.default_rng(3).normal(0, 0.00002, 1001)
    run = load_run(_write(tmp_path / "r", lambda s: (0.0004 if s < 500 else 0.0007) + jitter[s]), tmp_path / "f.duckdb")
    assert list(ThroughputDrop(min_added=0.0).check(run))  # the floor is what decides
    assert list(ThroughputDrop().check(run)) == []
    run = load_run(_write(tmp_path / "s", lambda s: (0.04 if s < 500 else 0.07) + 50 * jitter[s]), tmp_path / "g.duckdb")
    [f] = ThroughputDrop().check(run)
    assert abs(f.step - 500) <= 5


def test_a_logged_time_column_that_rises_within_an_excerpt_is_a_slowdown(tmp_path):
    """Issue 24: deepspeech.pytorch prints `Time 0.470 (1.206)` per batch (the ImageNet example's AverageMeter);
    over 17 batches of one epoch the step time climbs from ~0.4 s to ~0.93 s while the data time stays 0.002 s."""
    from tests.paths import REAL_RUNS_TEST
    run = load_run(REAL_RUNS_TEST / "log_deepspeech127", tmp_path / "f.duckdb")
    assert run.pick("step_time") == "Time"
    [f] = ThroughputDrop().check(run)
    assert f.evidence["measured_from"] == "logged step time" and 1.5 < f.evidence["factor"] < 2.5
    assert 4 <= f.step - 11 * 48 <= 9  # batch 4-9 of epoch 11, printed `[11][i/48]`: the step e·N + i


def test_an_elapsed_clock_under_a_step_time_name_is_read_by_its_differences(tmp_path):
    """`train/time_ms` as some scripts log it is the time since the start (it only grows): read as step times it
    would be one long 'slowdown'; its differences are the steady 50 ms steps they are."""
    steps = np.arange(10, 410, 10)
    clock = 50.0 * steps + np.random.default_rng(4).normal(0, 2, steps.size).cumsum().clip(0)
    clock = np.maximum.accumulate(clock) + np.arange(steps.size) * 1e-3
    run = load_run(write_tb(tmp_path / "r", {"train/time_ms": (steps, clock), "train/loss": curve(n=40)}),
                   tmp_path / "f.duckdb")
    assert run.pick("step_time") == "train/time_ms"
    assert clock[-1] > 30 * clock[0]  # read as step times, a ×30 'slowdown'
    assert list(ThroughputDrop().check(run)) == []


def test_a_short_steady_logged_step_time_is_silent(tmp_path):
    steps = np.arange(12)
    times = 0.4 + np.random.default_rng(5).normal(0, 0.02, steps.size)
    run = load_run(write_tb(tmp_path / "r", {"batch_time": (steps, times), "loss": curve(n=12, every=1)}),
                   tmp_path / "f.duckdb")
    assert ThroughputDrop().unavailable(run) is None and list(ThroughputDrop().check(run)) == []


@pytest.mark.parametrize("name,series", [
    # nanoGPT prints `time 1099.34ms` per iteration: read as `time ms`, in seconds, steady (~1.1 s)
    ("log_nanogpt215", "time ms"),
    # W&B `train/time_ms` is the elapsed time: its differences are ~75 ms steps after one 47 ms first step, which is
    # no baseline to drop from
    ("wandb_gpt_baseline", "train/time_ms"),
])
def test_real_step_times_in_milliseconds_are_steady(tmp_path, name, series):
    from tests.paths import REAL_RUNS
    run = load_run(REAL_RUNS / name, tmp_path / "f.duckdb")
    assert run.pick("step_time") == series and ThroughputDrop().unavailable(run) is None
    assert list(ThroughputDrop().check(run)) == []


def test_step_times_spread_tenfold_on_a_short_log_fire_when_they_cost_seconds(tmp_path):
    """Eight batch times of a short excerpt, two of them ×15 the 0.4 s median (a loader waiting on a remote shard):
    too few points for the trend rules, glaring, 11 s lost. The same spread on 10 ms steps loses 0.3 s: noise. A
    slow first step is start-up (compilation, caches), not a stall."""
    steps = np.arange(8)
    loss = curve(n=8, every=1)
    for name, times, fires in (("a", [0.4, 0.41, 6.0, 0.39, 0.4, 6.2, 0.4, 0.41], True),
                               ("b", [0.01, 0.0101, 0.15, 0.0099, 0.01, 0.155, 0.01, 0.0101], False),
                               ("c", [9.0, 0.41, 0.4, 0.39, 0.4, 0.42, 0.4, 0.41], False)):
        run = load_run(write_tb(tmp_path / name, {"batch_time": (steps, np.array(times)), "loss": loss}),
                       tmp_path / f"{name}.duckdb")
        found = list(ThroughputDrop().check(run))
        assert bool(found) == fires, name
        if fires:
            assert found[0].evidence["slow"] == 2 and found[0].evidence["seconds_lost"] > 10


@pytest.mark.parametrize("slow_at, fires", [(0, False), (20, True)])
def test_the_first_iteration_of_each_epoch_is_its_start_up_not_a_stall(tmp_path, slow_at, fires):
    """A segmentation trainer's console lines, `Epoch: [e/N] Iter:[i/M], Time: t, lr: ..., Loss: ...`, printed
    every 10 iterations by a small program: the first line of each epoch takes ×50 the others (the data loader's
    workers start again). Those are the epoch's start-up; the same slow lines in the middle of each epoch are
    stalls."""
    import subprocess
    import sys

    program = (
        "import math\n"
        "for e in range(30):\n"
        "    for i in range(0, 100, 10):\n"
        f"        t = 30.0 if i == {slow_at} else 0.6 + 0.05 * math.sin(e * 10 + i)\n"
        "        loss = 1.5 * math.exp(-(e * 100 + i) / 2000) + 0.3\n"
        "        print(f'Epoch: [{e}/30] Iter:[{i}/100], Time: {t:.2f}, lr: [0.01], Loss: {loss:.6f}')\n")
    root = tmp_path / "run"
    root.mkdir()
    with (root / "train.log").open("w") as out:
        subprocess.run([sys.executable, "-c", program], stdout=out, check=True)
    found = list(ThroughputDrop().check(load_run(root, tmp_path / "f.duckdb")))
    assert bool(found) == fires, [f.summary for f in found]


def test_pauses_of_a_fraction_of_a_second_are_no_stall_however_they_add_up(tmp_path):
    """A small tabular model logging every step at 18 ms, a quarter-second pause every 7 steps (its data loader
    starting each epoch again): ×14 the step, six seconds in all, more than half the run; no pause anyone sees."""
    jitter = np.random.default_rng(4).normal(0, 0.001, 1001)
    run = load_run(_write(tmp_path / "r", lambda s: (0.25 if s % 7 == 0 else 0.018) + jitter[s], every=1, n=180),
                   tmp_path / "f.duckdb")
    assert list(ThroughputDrop().check(run)) == []
    assert list(ThroughputDrop(min_pause=0.1).check(run))  # the pause's length is what decides


@pytest.mark.parametrize("scale, fires", [(1.0, True), (0.01, False)])
def test_one_interval_that_holds_an_hour_long_stall_fires_at_any_length(tmp_path, scale, fires):
    """A segmentation trainer logs every 10 epochs through Python logging with its elapsed time
    (`Epoch 20, Time 28029.8s, Loss 0.4754, LR 0.2000`): 10 epochs take ~8100 s, one stretch 18955 s, ×2.3 slower,
    three hours lost at once, on a log of 12 lines, too few for the trend rules. The same log at a hundredth of the
    time loses under two minutes: no finding."""
    from tests.runwriters import log_messages

    per_ten = [4093 * 2, 8134, 18955, 8104, 8170, 8186, 8229, 8233, 8058, 8056, 8122, 8054]
    clock = np.cumsum(per_ten) * scale
    lines = [f"Epoch {5 if i == 0 else 10 * i}, Time {t:.1f}s, Loss {0.57 - 0.01 * i:.4f}, LR 0.2000"
             for i, t in enumerate(clock)]
    root = tmp_path / "run"
    root.mkdir()
    log_messages(root / "train.log", lines)
    found = list(ThroughputDrop().check(load_run(root, tmp_path / "f.duckdb")))
    assert bool(found) == fires, [f.summary for f in found]
    if fires:
        assert found[0].evidence["slow"] == 1 and found[0].evidence["seconds_lost"] > 3600
        assert "hours" in found[0].summary


def _printed(tmp_path, program: str):
    """The console log a small training script prints (its own print calls, as a pasted log carries them)."""
    import subprocess
    import sys

    root = tmp_path / "run"
    root.mkdir()
    with (root / "train.log").open("w") as out:
        subprocess.run([sys.executable, "-c", program], stdout=out, check=True)
    return load_run(root, tmp_path / "f.duckdb")


@pytest.mark.parametrize("last, fires", [("[46.5, 23.5]", True), ("[95.0, 46.5]", False), ("[94.0, 96.0]", False)])
def test_a_logged_samples_per_second_that_the_log_ends_far_below_is_a_drop(tmp_path, last, fires):
    """MXNet's Speedometer line, `Epoch[e] Batch [b]\tSpeed: 95.71 samples/sec\tTrain-CrossEntropy=...`, each line
    printed twice (one per metric): a throughput read as 1/x. Eight prints at ~95 samples/s, the last two ×2 and ×4
    slower, is a drop at any length; one slow print at the end is a hiccup."""
    program = (
        f"speeds = [95.7, 94.5, 94.3, 90.3, 89.8, 98.0] + {last}\n"
        "for i, v in enumerate(speeds):\n"
        "    e, b = i // 5, 20 * (i % 5 + 1)\n"
        "    print(f'Epoch[{e}] Batch [{b}]\\tSpeed: {v:.2f} samples/sec\\tTrain-CrossEntropy={3.0 / (i + 1):.6f}')\n"
        "    print(f'Epoch[{e}] Batch [{b}]\\tSpeed: {v:.2f} samples/sec\\tTrain-SmoothL1={0.7 / (i + 1):.6f}')\n")
    found = list(ThroughputDrop().check(_printed(tmp_path, program)))
    assert bool(found) == fires, [f.summary for f in found]
    if fires:
        assert found[0].evidence["intervals_after"] == 2 and found[0].evidence["rate_last"] == pytest.approx(23.5)


@pytest.mark.parametrize("slow_from, fires", [(0, False), (60, True)])
def test_slow_prints_in_every_stretch_of_the_run_are_its_pace_not_a_drop(tmp_path, slow_from, fires):
    """An ImageNet-style `Epoch: [e][i/2000]\tTime 0.137 (0.60)\tData ...` line every 100 iterations, a quarter of
    them ×20 slower (a loader that keeps up on some batches only), and a ×60 first iteration of each epoch (its
    workers start). From the first epoch to the last, that is the run's pace; every iteration ×3 slower from epoch
    60 on is a drop. A printed time is one iteration's: a slow print costs its excess over one iteration, not 100."""
    program = (
        "import random\n"
        "random.seed(0)\n"
        "for e in range(100):\n"
        "    for i in range(0, 2000, 100):\n"
        "        slow = random.random() < 0.25\n"
        f"        t = 8.0 if i == 0 else (2.8 if slow and {slow_from} == 0 else 0.137 + 0.01 * random.random())\n"
        f"        t = t if e < {slow_from} or {slow_from} == 0 or i == 0 else 3 * t\n"
        "        print(f'Epoch: [{e}][{i:4d}/2000]\\tTime {t:6.3f} ({t:6.3f})\\tLoss {2.0 - e / 100:.4e}')\n")
    found = list(ThroughputDrop().check(_printed(tmp_path, program)))
    assert bool(found) == fires, [f.summary for f in found]


def test_records_at_an_even_pace_among_other_lines_are_no_slowdown(tmp_path):
    """A BYOL script printing `[epoch:e/1200] [loss:...] [lr:...] [Time:[date]]` every 147 s, with a `==> Saving`
    line after each of the first five epochs only: on a line axis the first records lie two lines apart and the
    rest one, but every epoch took the same time."""
    import datetime

    t0 = datetime.datetime(2022, 8, 28, 0, 11, 31)
    program = "\n".join(
        [f"print('[epoch:{e}/1200] [loss:{0.2 / e:.6f}] [lr:{0.0093 - 0.0007 * e:.6f}] "
         f"[Time:[{(t0 + datetime.timedelta(seconds=147 * (e - 1))).strftime('%Y-%m-%d %H:%M:%S')}]]')"
         + ("\nprint('==> Saving ./result/{e}.pt...')" if e <= 5 else "") for e in range(1, 11)])
    found = list(ThroughputDrop().check(_printed(tmp_path, program)))
    assert found == [], [f.summary for f in found]


@pytest.mark.parametrize("final_eval", [False, True])
@pytest.mark.parametrize("evaluates", [True, False])
def test_pauses_at_every_multiple_of_an_eval_interval_are_evaluations(tmp_path, evaluates, final_eval):
    """nanoGPT prints `iter N: loss L, time T ms` and pauses for its evaluation at every multiple of eval_interval
    (250), its one `step 0: train loss, val loss` line the only evaluation in the file: the pauses are evaluations,
    also where the last iteration, off the period, pauses for the final evaluation (`last_step`). The same pauses in
    a run that never evaluates are stalls."""
    lines = ["step 0: train loss 10.9536, val loss 10.9510"] if evaluates else []
    end = 5020 if final_eval else 5010
    for i in range(10, end, 10):
        t = 36000.0 if i % 250 == 0 or final_eval and i == end - 10 else 561.0 + (i % 7)
        lines.append(f"iter {i}: loss {10 * np.exp(-i / 2000) + 3:.4f}, time {t:.2f}ms")
    root = tmp_path / "r"
    root.mkdir()
    (root / "train.log").write_text("\n".join(lines) + "\n")
    found = list(ThroughputDrop().check(load_run(root, tmp_path / "f.duckdb")))
    assert [f.kind for f in found] == ([] if evaluates else ["throughput_drop"])


def _epoch_log(path, launches: list[list[float]]):
    """Python logging's lines of an epoch loop (`Epoch [e/50], Train Loss: .., Val Loss: ..`), one launch after
    another appended to one file, each epoch taking the seconds given; the clock the logger stamps is the loop's."""
    import logging

    clock = [1.7e9]
    factory = logging.getLogRecordFactory()

    def stamped(*args, **kwargs):
        record = factory(*args, **kwargs)
        record.created, record.msecs = clock[0], 0.0
        return record

    logging.setLogRecordFactory(stamped)
    try:
        with logger_writing(path, "%(asctime)s - INFO - %(message)s", name="epochs") as logger:
            for seconds in launches:
                clock[0] += 3600.0  # the next launch starts an hour later
                for e, took in enumerate(seconds, start=1):
                    clock[0] += took
                    loss = 1.9 * np.exp(-e / 8) + 0.5
                    logger.info(f"Epoch [{e}/50], Train Loss: {loss:.4f}, Val Loss: {loss * 0.9:.4f}")
    finally:
        logging.setLogRecordFactory(factory)


@pytest.mark.parametrize("last_ends_slow", [True, False])
def test_the_launch_a_log_ends_in_is_judged_against_its_own_pace(tmp_path, last_ends_slow):
    """Two launches appended to one log, the first slowing down ×8 half-way through: the second ends on epochs ×4-×11
    slower than its own first ones, a drop whatever the first launch did; ending at its own pace, it is silent."""
    first = [110.0, 90.0, 100.0, 110.0, 250.0, 730.0, 1000.0, 1080.0, 1520.0]
    second = [140.0, 135.0, 132.0, 148.0, 146.0, 150.0] + ([560.0, 950.0, 1210.0, 1610.0] if last_ends_slow
                                                           else [141.0, 139.0, 145.0, 138.0])
    root = tmp_path / "r"
    root.mkdir()
    _epoch_log(root / "training.log", [first, second])
    found = list(ThroughputDrop().check(load_run(root, tmp_path / "f.duckdb")))
    assert bool(found) == last_ends_slow, [f.summary for f in found]
    if last_ends_slow:
        assert found[0].evidence["intervals_after"] == 4 and found[0].evidence["seconds_per_step_last"] == 1610.0


def test_stalls_on_a_logged_step_time_of_nine_records_fire(tmp_path):
    """Nine logged epoch times of ~60 s, three of them ×4 (a loader that stalls: 540 s lost, half the time): too few
    for a ×10 spread, judged by the stall rule from 8 records (`min_logged`: 0 of the pool's 86 healthy runs it then
    checks fire). Its twin, nine epochs within 5% of each other, is silent."""
    steps = np.arange(1, 10)
    loss = (steps, np.linspace(2.0, 1.2, 9))
    stalled = np.array([61.0, 59.0, 240.0, 60.5, 242.0, 58.5, 61.5, 238.0, 60.0])
    run = load_run(write_tb(tmp_path / "a", {"batch_time": (steps, stalled), "loss": loss}), tmp_path / "a.duckdb")
    [f] = ThroughputDrop().check(run)
    assert f.evidence["stalls"] == 3 and f.evidence["seconds_lost"] > 500
    steady = np.array([61.0, 59.0, 60.0, 60.5, 62.0, 58.5, 61.5, 59.5, 60.0])
    twin = load_run(write_tb(tmp_path / "b", {"batch_time": (steps, steady), "loss": loss}), tmp_path / "b.duckdb")
    assert list(ThroughputDrop().check(twin)) == []


@pytest.mark.parametrize("restart", [True, False])
def test_an_elapsed_time_column_that_starts_again_at_a_resume_is_a_clock(tmp_path, restart):
    """An Ultralytics-style results.csv whose cumulative `time` column (seconds since the start, printed to 0.1 s
    and repeating itself where a step is shorter) starts again where the training was resumed: its differences are
    the steady ~110 s epochs; read as step times it would be a ×8 'slowdown'."""
    import csv

    rng = np.random.default_rng(2)
    took = 110.0 + rng.normal(0, 2, 60)
    clock = np.round(np.cumsum(took), 1)
    if restart:
        clock[3:] = np.round(np.cumsum(took[3:]) + 30.0, 1)  # resumed after epoch 3: the clock starts again
    root = tmp_path / "r"
    root.mkdir()
    with open(root / "results.csv", "w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["epoch", "time", "train/box_loss", "val/box_loss"])
        for e in range(60):
            loss = 1.0 * np.exp(-e / 30) + 0.4
            out.writerow([e + 1, f"{clock[e]:.1f}", f"{loss:.5f}", f"{loss * 1.1:.5f}"])
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.pick("step_time") == "time"
    assert list(ThroughputDrop().check(run)) == []


def test_a_clock_printed_coarser_than_a_step_is_read_by_its_differences(tmp_path):
    """A per-iteration line `| time=0.1m` (elapsed minutes to one decimal, 0.06 min an iteration: the value repeats
    at a third of the lines), an aborted launch of 8 iterations before the one that runs: a clock, never a step
    time growing ×1000."""
    root = tmp_path / "r"
    root.mkdir()
    lines = []
    for n in (8, 400):
        for i in range(1, n + 1):
            lines.append(f"[it {i:04d}] step={1024 * i} | EpRew={np.log(i):.1f} | PiLoss=0.0{20 + i % 7} | "
                         f"time={0.064 * i:.1f}m")
    (root / "train_log.txt").write_text("\n".join(lines) + "\n")
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.pick("step_time") == "time"
    assert list(ThroughputDrop().check(run)) == []


def test_appended_launches_at_their_own_paces_are_no_stalls(tmp_path):
    """Three launches appended to one log, the first at 9 s an epoch, the next two at 2-3 s (another machine): read
    against the median of the whole log, each of the first launch's epochs is a ×4 stall; against its own launch's
    pace none is. A launch with ×20 stalls of its own still fires."""
    slow, fast = [9.0] * 60, [[2.0, 3.0, 2.0] * 20 for _ in range(2)]  # the logger stamps whole seconds
    root = tmp_path / "a"
    root.mkdir()
    _epoch_log(root / "training.log", [slow, *fast])
    assert list(ThroughputDrop().check(load_run(root, tmp_path / "a.duckdb"))) == []
    stalled = [*fast[1][:20], 60.0, *fast[1][21:40], 55.0, *fast[1][41:50], 70.0, *fast[1][51:]]
    root = tmp_path / "b"
    root.mkdir()
    _epoch_log(root / "training.log", [slow, fast[0], stalled])
    [f] = ThroughputDrop().check(load_run(root, tmp_path / "b.duckdb"))
    assert f.evidence["seconds_per_step_median"] < 3


@pytest.mark.parametrize("stall, evaluates, fires", [(12.9, False, True), (2.5, False, False), (12.9, True, False)])
def test_one_stall_that_holds_most_of_a_short_excerpt_fires(tmp_path, stall, evaluates, fires):
    """Six printed batches of a detector at ~0.6 s (`time: 0.5427 - data_time: 0.0067`), one of them waiting 12.9 s
    on its data: ×20 the median, four fifths of the excerpt's time, the stall the excerpt was pasted for. A ×4
    batch holds too little of the time to tell from a hiccup; where every record is an epoch with its evaluation,
    one slow one is an evaluation that did more (a full test, a checkpoint), no stall."""
    steps = np.arange(71, 77)
    times = np.array([0.5427, 0.6647, 0.6349, stall, 0.4807, 0.5490])
    series = {"time": (steps, times), "total_loss": (steps, np.linspace(.23, .26, 6))}
    if evaluates:
        series["val/loss"] = (steps, np.linspace(.25, .28, 6))
    run = load_run(write_tb(tmp_path / "r", series), tmp_path / "f.duckdb")
    found = list(ThroughputDrop().check(run))
    assert bool(found) == fires, [f.summary for f in found]
    if fires:
        assert found[0].evidence["slow"] == 1 and found[0].evidence["seconds_per_step_slow"] == pytest.approx(stall)


def _real_log(tmp_path, name: str, text: str):
    root = tmp_path / "run"
    root.mkdir()
    (root / name).write_text(text, encoding="utf-8")
    return load_run(root, tmp_path / "f.duckdb")


# musubi-tuner's tqdm bar as a user pasted it, with the lines of steps 40-72 left out of the paste
# (https://github.com/kohya-ss/musubi-tuner/issues/477); each step's bar is printed twice (before and after its
# `avr_loss` is updated), the `[hh:mm:ss]` stamp the capture's.
MUSUBI_EXCERPT = """[08:03:35] [STDERR] steps:  38%|███▊      | 36/96 [13:09<21:55, 21.93s/it, avr_loss=0.0796]INFO:musubi_tuner.dataset.image_video_dataset:epoch is incremented. current_epoch: 6, epoch: 7
[08:03:35] [STDERR] INFO:musubi_tuner.dataset.image_video_dataset:epoch is incremented. current_epoch: 6, epoch: 7
[08:03:35] [STDERR] INFO:musubi_tuner.dataset.image_video_dataset:epoch is incremented. current_epoch: 6, epoch: 7
[08:03:44] [STDERR] INFO:musubi_tuner.dataset.image_video_dataset:epoch is incremented. current_epoch: 6, epoch: 7
[08:03:44] [STDERR] INFO:musubi_tuner.dataset.image_video_dataset:epoch is incremented. current_epoch: 6, epoch: 7
[08:03:44] [STDERR] INFO:musubi_tuner.dataset.image_video_dataset:epoch is incremented. current_epoch: 6, epoch: 7
[08:03:44] [STDERR]
[08:03:59] [STDERR] steps:  39%|███▊      | 37/96 [13:19<21:14, 21.61s/it, avr_loss=0.0796]
[08:03:59] [STDERR] steps:  39%|███▊      | 37/96 [13:19<21:14, 21.61s/it, avr_loss=0.0853]
[08:04:19] [STDERR] steps:  40%|███▉      | 38/96 [13:34<20:43, 21.45s/it, avr_loss=0.0853]
[08:04:19] [STDERR] steps:  40%|███▉      | 38/96 [13:34<20:43, 21.45s/it, avr_loss=0.0806]
[08:04:59] [STDERR] steps:  41%|████      | 39/96 [13:54<20:19, 21.40s/it, avr_loss=0.0806]
[08:16:19] [STDERR] steps:  76%|███████▌  | 73/96 [25:54<08:09, 21.29s/it, avr_loss=0.0886]
[08:16:59] [STDERR] steps:  76%|███████▌  | 73/96 [25:54<08:09, 21.29s/it, avr_loss=0.0922]
[08:16:59] [STDERR] steps:  77%|███████▋  | 74/96 [26:34<07:53, 21.54s/it, avr_loss=0.0922]
[08:17:14] [STDERR] steps:  77%|███████▋  | 74/96 [26:34<07:53, 21.54s/it, avr_loss=0.0855]
[08:17:14] [STDERR] steps:  78%|███████▊  | 75/96 [26:49<07:30, 21.46s/it, avr_loss=0.0855]
[08:17:34] [STDERR] steps:  78%|███████▊  | 75/96 [26:49<07:30, 21.46s/it, avr_loss=0.0919]
[08:17:34] [STDERR] steps:  79%|███████▉  | 76/96 [27:09<07:08, 21.44s/it, avr_loss=0.0919]
[08:18:14] [STDERR] steps:  79%|███████▉  | 76/96 [27:09<07:08, 21.44s/it, avr_loss=0.0761]
[08:18:14] [STDERR] steps:  80%|████████  | 77/96 [27:49<06:51, 21.68s/it, avr_loss=0.0761]
[08:18:33] [STDERR] steps:  80%|████████  | 77/96 [27:49<06:51, 21.68s/it, avr_loss=0.0773]
[08:18:33] [STDERR] steps:  81%|████████▏ | 78/96 [28:08<06:29, 21.65s/it, avr_loss=0.0773]
[08:18:34] [STDERR] steps:  81%|████████▏ | 78/96 [28:08<06:29, 21.65s/it, avr_loss=0.0744]INFO:musubi_tuner.dataset.image_video_dataset:epoch is incremented. current_epoch: 13, epoch: 14
[08:18:34] [STDERR] INFO:musubi_tuner.dataset.image_video_dataset:epoch is incremented. current_epoch: 13, epoch: 14
"""


def test_an_excerpt_whose_bar_skips_steps_prices_the_interval_by_the_steps_the_counter_moved(tmp_path):
    """Regression (false throughput_drop on a pasted excerpt): the interval from step 39 to step 73 holds 34 steps the
    paste left out, no step of 680 s (a gap of the log is no interval: `ingest.steptime.GAP`), and a bar redrawn
    for the same step adds no step of its own."""
    run = _real_log(tmp_path, "train.log", MUSUBI_EXCERPT)
    got = ThroughputDrop()._per_step(run)
    assert got is not None and float(np.max(got.seconds)) < 50 and 34 not in got.span.tolist()
    assert list(ThroughputDrop().check(run)) == []


def test_one_step_printed_once_per_rank_is_no_interval_of_its_own(tmp_path):
    """Regression (false throughput_drop): three ranks printing `Batch 4/203700` a few seconds apart are one step
    seen three times, not three steps of 0.2 s against which the next print looks ×600 slower."""
    assert list(ThroughputDrop().check(_real_log(tmp_path, "train.log", WENET_CV))) == []


# A DQN agent's log, one line per episode with the episode's own length in `Steps` (lines 470-515 of
# HettyPatel/SuperMarioBrosRL-AI@dfdf9bb01994f6c2a3f7860a931466a6ecbe0c92:training_log.log).
MARIO_EPISODES = """2024-05-24 00:27:28,264 - Level: SuperMarioBros-1-1-v0, Episode: 468, Total Reward: 170.0, Average Loss: 4.3587, Steps: 442, In-Game Time Left: 378
2024-05-24 00:27:32,760 - Level: SuperMarioBros-1-1-v0, Episode: 469, Total Reward: 130.0, Average Loss: 4.4450, Steps: 120, In-Game Time Left: 394
2024-05-24 00:27:37,182 - Level: SuperMarioBros-1-1-v0, Episode: 470, Total Reward: 130.0, Average Loss: 3.9133, Steps: 120, In-Game Time Left: 394
2024-05-24 00:27:41,639 - Level: SuperMarioBros-1-1-v0, Episode: 471, Total Reward: 130.0, Average Loss: 5.3369, Steps: 120, In-Game Time Left: 394
2024-05-24 00:27:46,094 - Level: SuperMarioBros-1-1-v0, Episode: 472, Total Reward: 128.0, Average Loss: 4.6542, Steps: 120, In-Game Time Left: 394
2024-05-24 00:27:50,533 - Level: SuperMarioBros-1-1-v0, Episode: 473, Total Reward: 130.0, Average Loss: 4.7733, Steps: 120, In-Game Time Left: 394
2024-05-24 00:27:54,953 - Level: SuperMarioBros-1-1-v0, Episode: 474, Total Reward: 130.0, Average Loss: 5.4864, Steps: 120, In-Game Time Left: 394
2024-05-24 00:27:59,432 - Level: SuperMarioBros-1-1-v0, Episode: 475, Total Reward: 130.0, Average Loss: 4.5294, Steps: 120, In-Game Time Left: 394
2024-05-24 00:28:03,909 - Level: SuperMarioBros-1-1-v0, Episode: 476, Total Reward: 130.0, Average Loss: 5.2952, Steps: 120, In-Game Time Left: 394
2024-05-24 00:28:08,368 - Level: SuperMarioBros-1-1-v0, Episode: 477, Total Reward: 130.0, Average Loss: 4.6718, Steps: 120, In-Game Time Left: 394
2024-05-24 00:28:12,755 - Level: SuperMarioBros-1-1-v0, Episode: 478, Total Reward: 133.0, Average Loss: 6.0204, Steps: 114, In-Game Time Left: 395
2024-05-24 00:28:17,172 - Level: SuperMarioBros-1-1-v0, Episode: 479, Total Reward: 132.0, Average Loss: 3.5434, Steps: 120, In-Game Time Left: 394
2024-05-24 00:28:50,918 - Level: SuperMarioBros-1-1-v0, Episode: 480, Total Reward: -280.0, Average Loss: 4.9904, Steps: 902, In-Game Time Left: 355
2024-05-24 00:28:55,395 - Level: SuperMarioBros-1-1-v0, Episode: 481, Total Reward: 130.0, Average Loss: 4.4898, Steps: 120, In-Game Time Left: 394
2024-05-24 00:28:59,820 - Level: SuperMarioBros-1-1-v0, Episode: 482, Total Reward: 130.0, Average Loss: 4.5903, Steps: 120, In-Game Time Left: 394
2024-05-24 00:29:29,893 - Level: SuperMarioBros-1-1-v0, Episode: 483, Total Reward: -5.0, Average Loss: 5.1116, Steps: 808, In-Game Time Left: 360
2024-05-24 00:29:34,388 - Level: SuperMarioBros-1-1-v0, Episode: 484, Total Reward: 130.0, Average Loss: 3.4627, Steps: 120, In-Game Time Left: 394
2024-05-24 00:29:38,697 - Level: SuperMarioBros-1-1-v0, Episode: 485, Total Reward: 134.0, Average Loss: 4.2907, Steps: 116, In-Game Time Left: 395
2024-05-24 00:29:43,249 - Level: SuperMarioBros-1-1-v0, Episode: 486, Total Reward: 130.0, Average Loss: 5.5474, Steps: 120, In-Game Time Left: 394
2024-05-24 00:29:48,054 - Level: SuperMarioBros-1-1-v0, Episode: 487, Total Reward: 130.0, Average Loss: 5.2254, Steps: 120, In-Game Time Left: 394
2024-05-24 00:30:00,563 - Level: SuperMarioBros-1-1-v0, Episode: 488, Total Reward: 316.0, Average Loss: 4.1802, Steps: 314, In-Game Time Left: 385
2024-05-24 00:30:05,404 - Level: SuperMarioBros-1-1-v0, Episode: 489, Total Reward: 130.0, Average Loss: 4.4386, Steps: 120, In-Game Time Left: 394
2024-05-24 00:30:10,198 - Level: SuperMarioBros-1-1-v0, Episode: 490, Total Reward: 130.0, Average Loss: 4.6725, Steps: 120, In-Game Time Left: 394
2024-05-24 00:30:15,802 - Level: SuperMarioBros-1-1-v0, Episode: 491, Total Reward: 106.0, Average Loss: 4.2301, Steps: 138, In-Game Time Left: 394
2024-05-24 00:30:39,923 - Level: SuperMarioBros-1-1-v0, Episode: 492, Total Reward: 5.0, Average Loss: 4.7811, Steps: 604, In-Game Time Left: 370
2024-05-24 00:30:44,703 - Level: SuperMarioBros-1-1-v0, Episode: 493, Total Reward: 130.0, Average Loss: 5.6564, Steps: 120, In-Game Time Left: 394
2024-05-24 00:30:49,499 - Level: SuperMarioBros-1-1-v0, Episode: 494, Total Reward: 130.0, Average Loss: 5.6123, Steps: 120, In-Game Time Left: 394
2024-05-24 00:31:03,177 - Level: SuperMarioBros-1-1-v0, Episode: 495, Total Reward: 265.0, Average Loss: 5.0851, Steps: 342, In-Game Time Left: 383
2024-05-24 00:31:08,616 - Level: SuperMarioBros-1-1-v0, Episode: 496, Total Reward: 102.0, Average Loss: 5.2146, Steps: 136, In-Game Time Left: 394
2024-05-24 00:31:13,540 - Level: SuperMarioBros-1-1-v0, Episode: 497, Total Reward: 130.0, Average Loss: 4.8418, Steps: 118, In-Game Time Left: 395
2024-05-24 00:31:18,310 - Level: SuperMarioBros-1-1-v0, Episode: 498, Total Reward: 130.0, Average Loss: 4.7952, Steps: 120, In-Game Time Left: 394
2024-05-24 00:31:23,092 - Level: SuperMarioBros-1-1-v0, Episode: 499, Total Reward: 130.0, Average Loss: 4.1380, Steps: 120, In-Game Time Left: 394
2024-05-24 00:31:43,500 - Level: SuperMarioBros-1-2-v0, Episode: 0, Total Reward: -342.0, Average Loss: 236.2132, Steps: 910, In-Game Time Left: 355
2024-05-24 00:32:58,093 - Level: SuperMarioBros-1-2-v0, Episode: 1, Total Reward: -2223.0, Average Loss: 2546.4410, Steps: 2876, In-Game Time Left: 257
2024-05-24 00:35:39,973 - Level: SuperMarioBros-1-2-v0, Episode: 2, Total Reward: -5130.0, Average Loss: 6249.6106, Steps: 5664, In-Game Time Left: 117
2024-05-24 00:35:49,455 - Level: SuperMarioBros-1-2-v0, Episode: 3, Total Reward: -355.0, Average Loss: 10384.5636, Steps: 322, In-Game Time Left: 384
2024-05-24 00:35:54,667 - Level: SuperMarioBros-1-2-v0, Episode: 4, Total Reward: -104.0, Average Loss: 10823.3570, Steps: 172, In-Game Time Left: 392
2024-05-24 00:36:04,868 - Level: SuperMarioBros-1-2-v0, Episode: 5, Total Reward: -399.0, Average Loss: 14192.7432, Steps: 348, In-Game Time Left: 383
2024-05-24 00:36:08,837 - Level: SuperMarioBros-1-2-v0, Episode: 6, Total Reward: -42.0, Average Loss: 13975.5000, Steps: 136, In-Game Time Left: 394
2024-05-24 00:40:02,965 - Level: SuperMarioBros-1-2-v0, Episode: 7, Total Reward: -8092.0, Average Loss: 15332.6963, Steps: 8020, In-Game Time Left: 0
2024-05-24 00:43:57,609 - Level: SuperMarioBros-1-2-v0, Episode: 8, Total Reward: -8189.0, Average Loss: 52049.3920, Steps: 8020, In-Game Time Left: 0
2024-05-24 00:44:02,263 - Level: SuperMarioBros-1-2-v0, Episode: 9, Total Reward: -84.0, Average Loss: 167578.4922, Steps: 160, In-Game Time Left: 393
2024-05-24 00:46:03,705 - Level: SuperMarioBros-1-2-v0, Episode: 10, Total Reward: -3674.0, Average Loss: 199124.0007, Steps: 4144, In-Game Time Left: 193
2024-05-24 00:46:08,183 - Level: SuperMarioBros-1-2-v0, Episode: 11, Total Reward: -70.0, Average Loss: 304690.5377, Steps: 152, In-Game Time Left: 393
2024-05-24 00:46:16,950 - Level: SuperMarioBros-1-2-v0, Episode: 12, Total Reward: -313.0, Average Loss: 209794.9284, Steps: 298, In-Game Time Left: 386
2024-05-24 00:46:50,063 - Level: SuperMarioBros-1-2-v0, Episode: 13, Total Reward: -589.0, Average Loss: 116801.2049, Steps: 1136, In-Game Time Left: 344
"""


def test_episodes_of_different_lengths_are_priced_by_the_steps_each_prints(tmp_path):
    """Regression (false throughput_drop): an episode of 8020 environment steps takes 50 times as long as one of
    120; per step every episode runs at the same pace."""
    run = _real_log(tmp_path, "training_log.log", MARIO_EPISODES)
    got = ThroughputDrop()._per_step(run)
    assert got is not None and float(np.max(got[2]) / np.median(got[2])) < 3
    assert list(ThroughputDrop().check(run)) == []


# A TensorFlow LSTM's `{train:epochE,stepS,train_loss: X}` lines around four epoch changes (lines 346-356, 746-756,
# 1096-1106 and 1346-1356 of BadUncleBoy/Alternator_analysis@4b147531b289e50fda08943d97723e017a7ab19b:log/train_log.txt).
LSTM_EPOCHS = """2019-11-27 17:20:13,824-lstm_logger-{train:epoch7,step347,train_loss: 68.2300033569336}
2019-11-27 17:20:13,856-lstm_logger-{train:epoch7,step348,train_loss: 127.17493438720703}
2019-11-27 17:20:13,871-lstm_logger-{train:epoch7,step349,train_loss: 102.51449584960938}
2019-11-27 17:20:13,903-lstm_logger-{train:epoch7,step350,train_loss: 63.00575256347656}
2019-11-27 17:20:13,934-lstm_logger-{train:epoch7,step351,train_loss: 68.57713317871094}
2019-11-27 17:20:18,464-lstm_logger-{train:epoch8,step352,train_loss: 31.503482818603516}
2019-11-27 17:20:18,480-lstm_logger-{train:epoch8,step353,train_loss: 69.0481185913086}
2019-11-27 17:20:18,495-lstm_logger-{train:epoch8,step354,train_loss: 53.88412857055664}
2019-11-27 17:20:18,495-lstm_logger-{train:epoch8,step355,train_loss: 62.77098846435547}
2019-11-27 17:20:18,511-lstm_logger-{train:epoch8,step356,train_loss: 62.30406951904297}
2019-11-27 17:20:18,527-lstm_logger-{train:epoch8,step357,train_loss: 53.38208770751953}
2019-11-27 17:20:28,103-lstm_logger-{train:epoch15,step747,train_loss: 33.245887756347656}
2019-11-27 17:20:28,103-lstm_logger-{train:epoch15,step748,train_loss: 20.349748611450195}
2019-11-27 17:20:28,119-lstm_logger-{train:epoch15,step749,train_loss: 30.70975112915039}
2019-11-27 17:20:28,134-lstm_logger-{train:epoch15,step750,train_loss: 100.20439147949219}
2019-11-27 17:20:28,134-lstm_logger-{train:epoch15,step751,train_loss: 6.323446273803711}
2019-11-27 17:20:31,181-lstm_logger-{train:epoch16,step752,train_loss: 55.57889175415039}
2019-11-27 17:20:31,197-lstm_logger-{train:epoch16,step753,train_loss: 48.549930572509766}
2019-11-27 17:20:31,197-lstm_logger-{train:epoch16,step754,train_loss: 2.2880733013153076}
2019-11-27 17:20:31,213-lstm_logger-{train:epoch16,step755,train_loss: 102.87018585205078}
2019-11-27 17:20:31,228-lstm_logger-{train:epoch16,step756,train_loss: 38.29499053955078}
2019-11-27 17:20:31,228-lstm_logger-{train:epoch16,step757,train_loss: 30.33405113220215}
2019-11-27 17:20:39,862-lstm_logger-{train:epoch22,step1097,train_loss: 20.677595138549805}
2019-11-27 17:20:39,878-lstm_logger-{train:epoch22,step1098,train_loss: 0.402362585067749}
2019-11-27 17:20:39,894-lstm_logger-{train:epoch22,step1099,train_loss: 22.068300247192383}
2019-11-27 17:20:39,894-lstm_logger-{train:epoch22,step1100,train_loss: 95.67237091064453}
2019-11-27 17:20:39,909-lstm_logger-{train:epoch22,step1101,train_loss: 15.593231201171875}
2019-11-27 17:20:43,471-lstm_logger-{train:epoch23,step1102,train_loss: 102.83732604980469}
2019-11-27 17:20:43,487-lstm_logger-{train:epoch23,step1103,train_loss: 184.1632080078125}
2019-11-27 17:20:43,487-lstm_logger-{train:epoch23,step1104,train_loss: 36.072853088378906}
2019-11-27 17:20:43,503-lstm_logger-{train:epoch23,step1105,train_loss: 100.03150939941406}
2019-11-27 17:20:43,503-lstm_logger-{train:epoch23,step1106,train_loss: 102.77439880371094}
2019-11-27 17:20:43,518-lstm_logger-{train:epoch23,step1107,train_loss: 4.79465389251709}
2019-11-27 17:20:49,595-lstm_logger-{train:epoch27,step1347,train_loss: 31.940080642700195}
2019-11-27 17:20:49,610-lstm_logger-{train:epoch27,step1348,train_loss: 122.95104217529297}
2019-11-27 17:20:49,626-lstm_logger-{train:epoch27,step1349,train_loss: 12.392266273498535}
2019-11-27 17:20:49,642-lstm_logger-{train:epoch27,step1350,train_loss: 68.23092651367188}
2019-11-27 17:20:49,657-lstm_logger-{train:epoch27,step1351,train_loss: 4.099521160125732}
2019-11-27 17:20:54,079-lstm_logger-{train:epoch28,step1352,train_loss: 1.3807228803634644}
2019-11-27 17:20:54,095-lstm_logger-{train:epoch28,step1353,train_loss: 8.372756958007812}
2019-11-27 17:20:54,110-lstm_logger-{train:epoch28,step1354,train_loss: 102.89791870117188}
2019-11-27 17:20:54,126-lstm_logger-{train:epoch28,step1355,train_loss: 126.49378204345703}
2019-11-27 17:20:54,126-lstm_logger-{train:epoch28,step1356,train_loss: 172.42979431152344}
2019-11-27 17:20:54,142-lstm_logger-{train:epoch28,step1357,train_loss: 32.544795989990234}
"""


def test_pauses_on_an_epochs_first_line_are_no_stall_on_a_logged_step_axis_too(tmp_path):
    """Regression (false throughput_drop): the seconds between an epoch's last step and the next epoch's first
    (its shuffle, its evaluation) are the epoch's rhythm, on a log that prints its own global step as well as on
    one counted by lines."""
    assert list(ThroughputDrop().check(_real_log(tmp_path, "train_log.txt", LSTM_EPOCHS))) == []


# An image-translation GAN's `loss_log.txt`, printed every 100 images: `time` is one iteration's compute time per
# image at the print, slower where the print coincides with saving images (lines 1703-1742 of
# VV-A-VV/pytorch-CycleGAN-and-pix2pix@97af9504aa1046927c17f12382625f864f931371:loss_log.txt).
PRINTED_EVERY_100 = """(epoch: 116, iters: 920, time: 0.094, data: 0.002) D_A: 0.066 G_A: 0.852 cycle_A: 1.033 idt_A: 0.020 D_B: 0.104 G_B: 0.574 cycle_B: 0.101 idt_B: 0.330
(epoch: 116, iters: 1020, time: 1.457, data: 0.002) D_A: 0.090 G_A: 0.561 cycle_A: 0.577 idt_A: 0.051 D_B: 0.072 G_B: 0.257 cycle_B: 0.162 idt_B: 0.349
(epoch: 116, iters: 1120, time: 0.092, data: 0.002) D_A: 0.141 G_A: 0.714 cycle_A: 0.760 idt_A: 0.531 D_B: 0.144 G_B: 0.426 cycle_B: 0.464 idt_B: 0.286
(epoch: 116, iters: 1220, time: 0.103, data: 0.002) D_A: 0.168 G_A: 0.437 cycle_A: 0.935 idt_A: 0.133 D_B: 0.167 G_B: 0.337 cycle_B: 0.155 idt_B: 0.598
(epoch: 116, iters: 1320, time: 0.095, data: 0.001) D_A: 0.107 G_A: 0.715 cycle_A: 0.815 idt_A: 0.017 D_B: 0.060 G_B: 0.463 cycle_B: 0.087 idt_B: 0.238
(epoch: 116, iters: 1420, time: 0.637, data: 0.002) D_A: 0.082 G_A: 0.541 cycle_A: 0.494 idt_A: 0.220 D_B: 0.116 G_B: 0.523 cycle_B: 0.558 idt_B: 0.218
(epoch: 117, iters: 68, time: 0.096, data: 0.002) D_A: 0.158 G_A: 0.274 cycle_A: 1.043 idt_A: 0.002 D_B: 0.109 G_B: 0.979 cycle_B: 0.005 idt_B: 0.369
(epoch: 117, iters: 168, time: 0.102, data: 0.002) D_A: 0.219 G_A: 0.788 cycle_A: 0.754 idt_A: 0.080 D_B: 0.134 G_B: 0.530 cycle_B: 0.185 idt_B: 0.278
(epoch: 117, iters: 268, time: 0.105, data: 0.002) D_A: 0.411 G_A: 0.762 cycle_A: 1.066 idt_A: 0.177 D_B: 0.212 G_B: 0.190 cycle_B: 0.353 idt_B: 0.322
(epoch: 117, iters: 368, time: 1.470, data: 0.002) D_A: 0.173 G_A: 0.254 cycle_A: 0.587 idt_A: 0.184 D_B: 0.097 G_B: 0.512 cycle_B: 0.667 idt_B: 0.393
(epoch: 117, iters: 468, time: 0.092, data: 0.002) D_A: 0.043 G_A: 0.530 cycle_A: 0.833 idt_A: 0.182 D_B: 0.135 G_B: 0.308 cycle_B: 0.711 idt_B: 0.218
(epoch: 117, iters: 568, time: 0.096, data: 0.002) D_A: 0.077 G_A: 0.319 cycle_A: 0.536 idt_A: 0.143 D_B: 0.113 G_B: 0.541 cycle_B: 0.320 idt_B: 0.243
(epoch: 117, iters: 668, time: 0.095, data: 0.003) D_A: 0.150 G_A: 0.523 cycle_A: 0.844 idt_A: 0.230 D_B: 0.100 G_B: 0.430 cycle_B: 0.255 idt_B: 0.391
(epoch: 117, iters: 768, time: 0.479, data: 0.002) D_A: 0.110 G_A: 0.909 cycle_A: 0.760 idt_A: 0.076 D_B: 0.201 G_B: 0.239 cycle_B: 0.254 idt_B: 0.267
(epoch: 117, iters: 868, time: 0.095, data: 0.002) D_A: 0.228 G_A: 0.394 cycle_A: 1.442 idt_A: 0.030 D_B: 0.057 G_B: 0.846 cycle_B: 0.174 idt_B: 0.508
(epoch: 117, iters: 968, time: 0.104, data: 0.002) D_A: 0.091 G_A: 0.741 cycle_A: 0.682 idt_A: 0.160 D_B: 0.080 G_B: 0.546 cycle_B: 0.526 idt_B: 0.367
(epoch: 117, iters: 1068, time: 0.090, data: 0.003) D_A: 0.138 G_A: 0.398 cycle_A: 0.712 idt_A: 0.058 D_B: 0.118 G_B: 0.743 cycle_B: 0.321 idt_B: 0.220
(epoch: 117, iters: 1168, time: 0.415, data: 0.002) D_A: 0.099 G_A: 0.818 cycle_A: 0.856 idt_A: 0.025 D_B: 0.125 G_B: 0.357 cycle_B: 0.116 idt_B: 0.262
(epoch: 117, iters: 1268, time: 0.094, data: 0.002) D_A: 0.224 G_A: 0.833 cycle_A: 0.851 idt_A: 0.252 D_B: 0.099 G_B: 0.618 cycle_B: 0.705 idt_B: 0.311
(epoch: 117, iters: 1368, time: 0.100, data: 0.002) D_A: 0.082 G_A: 0.733 cycle_A: 1.075 idt_A: 0.176 D_B: 0.181 G_B: 0.463 cycle_B: 0.608 idt_B: 0.421
(epoch: 118, iters: 16, time: 0.101, data: 0.001) D_A: 0.142 G_A: 0.405 cycle_A: 0.895 idt_A: 0.148 D_B: 0.098 G_B: 0.201 cycle_B: 0.568 idt_B: 0.299
(epoch: 118, iters: 116, time: 1.571, data: 0.002) D_A: 0.080 G_A: 0.539 cycle_A: 0.652 idt_A: 0.294 D_B: 0.140 G_B: 0.287 cycle_B: 0.527 idt_B: 0.265
(epoch: 118, iters: 216, time: 0.101, data: 0.002) D_A: 0.077 G_A: 0.752 cycle_A: 0.992 idt_A: 0.134 D_B: 0.109 G_B: 0.387 cycle_B: 0.378 idt_B: 0.327
(epoch: 118, iters: 316, time: 0.102, data: 0.003) D_A: 0.108 G_A: 0.310 cycle_A: 0.726 idt_A: 0.145 D_B: 0.058 G_B: 0.419 cycle_B: 0.427 idt_B: 0.236
(epoch: 118, iters: 416, time: 0.092, data: 0.002) D_A: 0.112 G_A: 0.556 cycle_A: 0.879 idt_A: 0.139 D_B: 0.064 G_B: 0.370 cycle_B: 0.334 idt_B: 0.903
(epoch: 118, iters: 516, time: 0.497, data: 0.001) D_A: 0.081 G_A: 0.685 cycle_A: 1.814 idt_A: 0.167 D_B: 0.132 G_B: 0.651 cycle_B: 0.194 idt_B: 0.601
(epoch: 118, iters: 616, time: 0.104, data: 0.002) D_A: 0.301 G_A: 0.729 cycle_A: 0.648 idt_A: 0.058 D_B: 0.101 G_B: 0.529 cycle_B: 0.054 idt_B: 0.215
(epoch: 118, iters: 716, time: 0.086, data: 0.002) D_A: 0.077 G_A: 0.509 cycle_A: 0.555 idt_A: 0.140 D_B: 0.137 G_B: 0.481 cycle_B: 0.820 idt_B: 0.583
(epoch: 118, iters: 816, time: 0.095, data: 0.011) D_A: 0.036 G_A: 0.842 cycle_A: 0.707 idt_A: 0.048 D_B: 0.117 G_B: 0.244 cycle_B: 0.130 idt_B: 0.217
(epoch: 118, iters: 916, time: 0.458, data: 0.003) D_A: 0.314 G_A: 0.776 cycle_A: 0.808 idt_A: 0.054 D_B: 0.096 G_B: 0.455 cycle_B: 0.217 idt_B: 0.261
(epoch: 118, iters: 1016, time: 0.101, data: 0.002) D_A: 0.105 G_A: 0.502 cycle_A: 0.987 idt_A: 0.301 D_B: 0.071 G_B: 0.554 cycle_B: 0.525 idt_B: 0.435
(epoch: 118, iters: 1116, time: 0.091, data: 0.003) D_A: 0.067 G_A: 0.585 cycle_A: 0.761 idt_A: 0.088 D_B: 0.119 G_B: 0.505 cycle_B: 0.291 idt_B: 0.293
(epoch: 118, iters: 1216, time: 0.092, data: 0.001) D_A: 0.149 G_A: 0.449 cycle_A: 0.957 idt_A: 0.194 D_B: 0.205 G_B: 0.186 cycle_B: 0.526 idt_B: 0.174
(epoch: 118, iters: 1316, time: 0.483, data: 0.004) D_A: 0.079 G_A: 0.756 cycle_A: 0.833 idt_A: 0.110 D_B: 0.183 G_B: 0.228 cycle_B: 0.305 idt_B: 0.273
(epoch: 118, iters: 1416, time: 0.099, data: 0.002) D_A: 0.112 G_A: 0.518 cycle_A: 1.011 idt_A: 0.162 D_B: 0.117 G_B: 0.253 cycle_B: 0.438 idt_B: 0.435
(epoch: 119, iters: 64, time: 0.085, data: 0.002) D_A: 0.151 G_A: 0.372 cycle_A: 0.821 idt_A: 0.115 D_B: 0.161 G_B: 0.240 cycle_B: 0.437 idt_B: 0.319
(epoch: 119, iters: 164, time: 0.101, data: 0.002) D_A: 0.041 G_A: 0.465 cycle_A: 1.083 idt_A: 0.416 D_B: 0.147 G_B: 0.315 cycle_B: 1.203 idt_B: 0.460
(epoch: 119, iters: 264, time: 1.496, data: 0.002) D_A: 0.059 G_A: 0.479 cycle_A: 1.171 idt_A: 0.336 D_B: 0.076 G_B: 0.512 cycle_B: 0.744 idt_B: 0.300
(epoch: 119, iters: 364, time: 0.095, data: 0.002) D_A: 0.045 G_A: 0.254 cycle_A: 0.594 idt_A: 0.190 D_B: 0.160 G_B: 0.769 cycle_B: 0.676 idt_B: 0.198
(epoch: 119, iters: 464, time: 0.095, data: 0.002) D_A: 0.166 G_A: 0.745 cycle_A: 0.572 idt_A: 0.059 D_B: 0.225 G_B: 0.645 cycle_B: 0.229 idt_B: 0.182
"""


def test_a_printed_step_time_stands_for_the_iterations_its_count_value_advances(tmp_path):
    """The iteration count is printed as a value of its own (`iters: 400`), not a counter the reader takes: it
    still says each line stands for 100 iterations, so four slow prints cost seconds of a run of minutes, no drop."""
    root = tmp_path / "gan"
    root.mkdir()
    (root / "loss_log.txt").write_text(PRINTED_EVERY_100)
    run = load_run(root, tmp_path / "f.duckdb")
    d = ThroughputDrop()
    assert d._per_print(run, "time", d._per_step(run).start) == 100
    assert list(d.check(run)) == []


# A DQN agent's log, one line per episode with a running step count and the wall clock (lines 11-38 of
# isaacbilsel/PyBoy-RL@3086cbccddae5d782a27c24c83c2907e8da05711:logs/train_log.txt).
EPISODES_UNPRICED = """Episode 0 - Steps this episode 1806 - Epsilon 1 - Learning Rate 0.000199959505426457 - Cummulative Reward -54545.0 - Max Length 3 - Mean Loss 1.38 - Mean Q Value -293.411 - Time Delta 17.004 - Time 2025-05-07T05:02:47
Episode 1 - Steps this episode 5510 - Epsilon 1 - Learning Rate 0.00019973425505971857 - Cummulative Reward -28240.0 - Max Length 3 - Mean Loss 1.042 - Mean Q Value -223.098 - Time Delta 53.394 - Time 2025-05-07T05:03:40
Episode 2 - Steps this episode 9207 - Epsilon 1 - Learning Rate 0.00019936503810839696 - Cummulative Reward -19438.333 - Max Length 3 - Mean Loss 0.825 - Mean Q Value -181.546 - Time Delta 56.287 - Time 2025-05-07T05:04:36
Episode 3 - Steps this episode 11429 - Epsilon 1 - Learning Rate 0.00019907022748237582 - Cummulative Reward -16622.5 - Max Length 3 - Mean Loss 0.694 - Mean Q Value -154.505 - Time Delta 36.97 - Time 2025-05-07T05:05:13
Episode 4 - Steps this episode 12031 - Epsilon 1 - Learning Rate 0.0001989297736700223 - Cummulative Reward -14776.0 - Max Length 3 - Mean Loss 0.606 - Mean Q Value -136.327 - Time Delta 12.171 - Time 2025-05-07T05:05:25
Episode 5 - Steps this episode 12778 - Epsilon 1 - Learning Rate 0.00019886264655216723 - Cummulative Reward -13555.0 - Max Length 3 - Mean Loss 0.544 - Mean Q Value -123.563 - Time Delta 11.515 - Time 2025-05-07T05:05:37
Episode 6 - Steps this episode 14460 - Epsilon 1 - Learning Rate 0.00019874187880085655 - Cummulative Reward -12690.0 - Max Length 3 - Mean Loss 0.5 - Mean Q Value -114.635 - Time Delta 24.674 - Time 2025-05-07T05:06:02
Episode 7 - Steps this episode 16064 - Epsilon 1 - Learning Rate 0.00019857872836271734 - Cummulative Reward -12021.25 - Max Length 3 - Mean Loss 0.465 - Mean Q Value -107.602 - Time Delta 25.049 - Time 2025-05-07T05:06:27
Episode 8 - Steps this episode 18364 - Epsilon 1 - Learning Rate 0.00019838506516267488 - Cummulative Reward -11506.667 - Max Length 3 - Mean Loss 0.437 - Mean Q Value -102.056 - Time Delta 34.886 - Time 2025-05-07T05:07:02
Episode 9 - Steps this episode 19683 - Epsilon 1 - Learning Rate 0.0001982055508753693 - Cummulative Reward -11100.5 - Max Length 3 - Mean Loss 0.412 - Mean Q Value -97.0 - Time Delta 22.553 - Time 2025-05-07T05:07:24
Episode 10 - Steps this episode 20744 - Epsilon 1 - Learning Rate 0.0001980877018028475 - Cummulative Reward -10780.455 - Max Length 3 - Mean Loss 0.392 - Mean Q Value -92.698 - Time Delta 17.187 - Time 2025-05-07T05:07:41
Episode 11 - Steps this episode 22853 - Epsilon 1 - Learning Rate 0.00019793088519400877 - Cummulative Reward -10497.917 - Max Length 3 - Mean Loss 0.373 - Mean Q Value -88.883 - Time Delta 31.901 - Time 2025-05-07T05:08:13
Episode 12 - Steps this episode 25268 - Epsilon 1 - Learning Rate 0.00019770715459116402 - Cummulative Reward -10251.538 - Max Length 3 - Mean Loss 0.356 - Mean Q Value -85.354 - Time Delta 38.587 - Time 2025-05-07T05:08:52
Episode 13 - Steps this episode 28350 - Epsilon 1 - Learning Rate 0.00019743555078429774 - Cummulative Reward -10054.286 - Max Length 3 - Mean Loss 0.34 - Mean Q Value -81.95 - Time Delta 48.157 - Time 2025-05-07T05:09:40
Episode 14 - Steps this episode 29796 - Epsilon 1 - Learning Rate 0.00019721206617568683 - Cummulative Reward -9864.0 - Max Length 3 - Mean Loss 0.325 - Mean Q Value -78.649 - Time Delta 26.032 - Time 2025-05-07T05:10:06
Episode 15 - Steps this episode 32219 - Epsilon 1 - Learning Rate 0.00019702151113379352 - Cummulative Reward -9703.438 - Max Length 3 - Mean Loss 0.312 - Mean Q Value -75.806 - Time Delta 37.337 - Time 2025-05-07T05:10:43
Episode 16 - Steps this episode 34287 - Epsilon 1 - Learning Rate 0.0001968004259679426 - Cummulative Reward -9564.118 - Max Length 3 - Mean Loss 0.301 - Mean Q Value -73.333 - Time Delta 34.374 - Time 2025-05-07T05:11:18
Episode 17 - Steps this episode 36387 - Epsilon 1 - Learning Rate 0.00019659536853116238 - Cummulative Reward -9438.056 - Max Length 3 - Mean Loss 0.29 - Mean Q Value -70.991 - Time Delta 34.001 - Time 2025-05-07T05:11:52
Episode 18 - Steps this episode 38647 - Epsilon 1 - Learning Rate 0.00019638124667711794 - Cummulative Reward -9332.895 - Max Length 3 - Mean Loss 0.279 - Mean Q Value -68.574 - Time Delta 36.594 - Time 2025-05-07T05:12:28
Episode 19 - Steps this episode 41929 - Epsilon 1 - Learning Rate 0.00019610940926370206 - Cummulative Reward -9292.5 - Max Length 3 - Mean Loss 0.27 - Mean Q Value -66.4 - Time Delta 51.978 - Time 2025-05-07T05:13:20
Episode 20 - Steps this episode 44382 - Epsilon 1 - Learning Rate 0.00019582838001100755 - Cummulative Reward -9202.143 - Max Length 3 - Mean Loss 0.261 - Mean Q Value -64.348 - Time Delta 41.721 - Time 2025-05-07T05:14:02
Episode 21 - Steps this episode 47025 - Epsilon 1 - Learning Rate 0.0001955790063904934 - Cummulative Reward -9128.409 - Max Length 3 - Mean Loss 0.253 - Mean Q Value -62.471 - Time Delta 44.346 - Time 2025-05-07T05:14:46
Episode 22 - Steps this episode 48937 - Epsilon 1 - Learning Rate 0.00019535645944622205 - Cummulative Reward -9048.696 - Max Length 3 - Mean Loss 0.246 - Mean Q Value -60.75 - Time Delta 34.735 - Time 2025-05-07T05:15:21
Episode 23 - Steps this episode 51042 - Epsilon 1 - Learning Rate 0.00019516037264454252 - Cummulative Reward -8971.667 - Max Length 3 - Mean Loss 0.238 - Mean Q Value -59.058 - Time Delta 36.592 - Time 2025-05-07T05:15:58
Episode 24 - Steps this episode 54186 - Epsilon 1 - Learning Rate 0.00019490440355107505 - Cummulative Reward -8656.6 - Max Length 3 - Mean Loss 0.232 - Mean Q Value -57.464 - Time Delta 53.693 - Time 2025-05-07T05:16:51
Episode 25 - Steps this episode 57264 - Epsilon 1 - Learning Rate 0.00019460146436310505 - Cummulative Reward -8365.385 - Max Length 3 - Mean Loss 0.225 - Mean Q Value -55.853 - Time Delta 55.412 - Time 2025-05-07T05:17:47
Episode 26 - Steps this episode 60408 - Epsilon 1 - Learning Rate 0.00019429899769466484 - Cummulative Reward -8075.0 - Max Length 3 - Mean Loss 0.22 - Mean Q Value -54.447 - Time Delta 55.322 - Time 2025-05-07T05:18:42
Episode 27 - Steps this episode 63531 - Epsilon 1 - Learning Rate 0.00019399481759504536 - Cummulative Reward -7818.571 - Max Length 3 - Mean Loss 0.214 - Mean Q Value -53.088 - Time Delta 55.639 - Time 2025-05-07T05:19:38
"""


def test_an_rl_run_s_episodes_of_unread_length_are_no_steps_to_time(tmp_path):
    """Episodes last longer as the agent survives longer: seconds per episode rising is no slower step, and where
    no length of each episode is read its records cannot be priced."""
    root = tmp_path / "dqn"
    root.mkdir()
    (root / "train_log.txt").write_text(EPISODES_UNPRICED)
    run = load_run(root, tmp_path / "f.duckdb")
    assert ThroughputDrop()._per_step(run) is None and list(ThroughputDrop().check(run)) == []




def test_an_epoch_counter_that_skips_37_epochs_is_a_gap_of_the_log_not_a_stall(tmp_path):
    """One line per epoch, the epoch counter printed and no batch: each line stands for the epochs its counter
    advances, and an interval across which it jumps ×5 its usual advance or more holds lines the log does not have
    (a paste that leaves a stretch out, a run down and resumed further on): no measured pace, no hour-long stall."""
    run = _real_log(tmp_path, "train.log", POINTNETLK_EPOCHS)
    got = ThroughputDrop()._per_step(run)
    assert got is not None and got.span.max() == 1 and float(np.max(got.seconds)) < 200
    assert list(ThroughputDrop().check(run)) == []


# RecBole's logger as printed (github.com/nuster1128/RecBole-MetaRec/issues/6): each epoch's training line and its
# evaluation line both carry a `time:`.
TRAINING_AND_EVALUATING_TIMES = """\
27 Nov 14:49    INFO  epoch 0 training [time: 24.48s, train loss: 1.3043]
27 Nov 14:49    INFO  epoch 0 evaluating [time: 0.07s, valid_score: 0.428900]
27 Nov 14:49    INFO  valid result:
auc : 0.4289
27 Nov 14:49    INFO  Saving current: saved\\MWUF-Nov-27-2022_14-49-09.pth
27 Nov 14:49    INFO  epoch 1 training [time: 1.82s, train loss: 1.3043]
27 Nov 14:49    INFO  epoch 1 evaluating [time: 0.07s, valid_score: 0.428900]
27 Nov 14:49    INFO  valid result:
auc : 0.4289
27 Nov 14:49    INFO  Saving current: saved\\MWUF-Nov-27-2022_14-49-09.pth
27 Nov 14:49    INFO  epoch 2 training [time: 1.96s, train loss: 1.3043]
27 Nov 14:49    INFO  epoch 2 evaluating [time: 0.07s, valid_score: 0.428900]
27 Nov 14:49    INFO  valid result:
auc : 0.4289
27 Nov 14:49    INFO  Saving current: saved\\MWUF-Nov-27-2022_14-49-09.pth
27 Nov 14:49    INFO  epoch 3 training [time: 1.81s, train loss: 1.3043]
27 Nov 14:49    INFO  epoch 3 evaluating [time: 0.07s, valid_score: 0.428900]
27 Nov 14:49    INFO  valid result:
auc : 0.4289
27 Nov 14:49    INFO  Saving current: saved\\MWUF-Nov-27-2022_14-49-09.pth
27 Nov 14:49    INFO  epoch 4 training [time: 1.82s, train loss: 1.3043]
27 Nov 14:49    INFO  epoch 4 evaluating [time: 0.06s, valid_score: 0.428900]
27 Nov 14:49    INFO  valid result:
auc : 0.4289
"""


def test_evaluation_times_printed_beside_training_times_are_no_stalls(tmp_path):
    """`epoch N training [time: 1.82s, ...]` and `epoch N evaluating [time: 0.07s, ...]`: one name, two phases, ×25
    apart at every other record. The training records' own times (1.81-1.96 s after a 24 s first epoch) are steady:
    no throughput_drop (read as one series, 4 of 9 intervals ran ×28 the median)."""
    root = tmp_path / "r"
    root.mkdir()
    (root / "log.txt").write_text(TRAINING_AND_EVALUATING_TIMES)
    assert list(ThroughputDrop().check(load_run(root, tmp_path / "f.duckdb"))) == []
