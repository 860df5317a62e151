"""resumed_run on real TensorBoard logs of a restarted process: a second SummaryWriter (a new event file) that
starts again from the last checkpoint's step, later in wall time, with different values."""

import numpy as np

from forensics.judge.detectors import ResumedRun
from tests.runwriters import curve, load_run

T0 = 1.7e9  # wall-clock seconds of the first step


def _segment(root, steps, values, wall):
    """One process's log: its own SummaryWriter, so its own event file, with explicit wall times."""
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(log_dir=str(root))
    for s, v, t in zip(steps.tolist(), values.tolist(), wall.tolist()):
        w.add_scalar("train/loss", v, global_step=int(s), walltime=t)
    w.close()


def test_fires_where_the_restarted_process_goes_back_to_its_checkpoint(tmp_path):
    steps, loss = curve(n=300, every=10)
    root = tmp_path / "r"
    # the first process logs steps 0..1990 at 2 s per logged step, then dies; the last checkpoint was step 1500
    _segment(root, steps[:200], loss[:200], T0 + 2.0 * np.arange(200))
    # 20 minutes later a new process resumes from step 1500: same steps, different values (new data order)
    rng = np.random.default_rng(1)
    again = steps[150:]
    _segment(root, again, loss[150:] * (1 + rng.normal(0, 0.05, again.size)),
             T0 + 2.0 * 199 + 1200 + 2.0 * np.arange(again.size))
    assert len(list(root.glob("events.out.tfevents.*"))) == 2
    [f] = ResumedRun().check(load_run(root, tmp_path / "f.duckdb"))
    assert f.kind == "resumed_run" and f.step == 1500 and f.step_end == 1990
    assert f.evidence["overlap_steps"] == 490 and f.evidence["wall_gap_s"] == 1200


def test_one_process_with_an_evaluation_pause_is_silent(tmp_path):
    """A long pause (evaluation, checkpointing) with the steps going on is no resume."""
    steps, loss = curve(n=300, every=10)
    wall = T0 + 2.0 * np.arange(300) + np.where(np.arange(300) >= 150, 900.0, 0.0)
    _segment(tmp_path / "r", steps, loss, wall)
    assert list(ResumedRun().check(load_run(tmp_path / "r", tmp_path / "f.duckdb"))) == []


def test_a_copy_of_the_log_is_not_a_resume(tmp_path):
    """The same steps logged twice with the same values (a log copied beside itself) repeat nothing new."""
    steps, loss = curve(n=100, every=10)
    root = tmp_path / "r"
    _segment(root, steps, loss, T0 + 2.0 * np.arange(100))
    _segment(root, steps, loss, T0 + 2.0 * np.arange(100) + 5000)
    assert list(ResumedRun().check(load_run(root, tmp_path / "f.duckdb"))) == []


def test_rows_repeated_at_the_last_step_are_no_resume(tmp_path):
    """Issue 24 class 3: a final evaluation (or Lightning's test loop) logs the training loss's name again at the
    step the run ended on: 'steps go back from 990 to 990' was a false finding. A restart that logs on past that
    step is still one."""
    steps, loss = curve(n=100, every=10)
    root = tmp_path / "r"
    _segment(root, steps, loss, T0 + 2.0 * np.arange(100))
    _segment(root, np.array([990, 990]), np.array([0.71, 0.69]), T0 + 2.0 * 100 + np.array([30.0, 31.0]))
    assert list(ResumedRun().check(load_run(root, tmp_path / "f.duckdb"))) == []
    resumed = tmp_path / "s"  # a process resumed from the checkpoint of the last step, and logging on from it
    _segment(resumed, steps, loss, T0 + 2.0 * np.arange(100))
    _segment(resumed, np.array([990, 1000, 1010]), np.array([0.3, 0.29, 0.28]), T0 + 2.0 * 100 + np.array([60.0, 62, 64]))
    [f] = ResumedRun().check(load_run(resumed, tmp_path / "g.duckdb"))
    assert (f.step, f.step_end) == (990, 990)


def test_a_step_counter_reset_every_epoch_is_not_a_resume(tmp_path):
    """`writer.add_scalar("train/loss", loss, batch_idx)`: the step restarts at 0 every epoch in one process.
    Steps go back four times, but always to 0 after the same number of batches: no restart happened."""
    steps, loss = curve(n=500, every=1)
    _segment(tmp_path / "r", steps % 100, loss, T0 + 0.5 * np.arange(500))
    assert list(ResumedRun().check(load_run(tmp_path / "r", tmp_path / "f.duckdb"))) == []


def test_counters_that_start_again_from_the_beginning_are_not_resumes(tmp_path):
    """A per-epoch batch counter whose epochs differ in length (several networks trained one after another, each
    with its own loader), and several launches appended to one console log: each time the step goes back to the
    start (at or below every step logged before), not to a checkpoint's step. A launch that goes back to a step in
    the middle of what was logged is still a resume."""
    import logging

    def log(root, segments):
        root.mkdir()
        logger = logging.getLogger(f"train.{root.name}")
        handler = logging.FileHandler(root / "train.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        for epoch, (steps, loss) in enumerate(segments, 1):
            for s, v in zip(steps.tolist(), loss.tolist()):
                logger.info(f"Epoch: {epoch}, Step: {s}, loss: {v:.5f}")
        handler.close()
        logger.removeHandler(handler)
        return root

    steps, loss = curve(n=300, every=200)
    per_epoch = [(steps[a:b] - steps[a], loss[a:b]) for a, b in ((0, 30), (30, 60), (60, 86), (86, 112), (112, 117))]
    run = load_run(log(tmp_path / "epochs", per_epoch), tmp_path / "e.duckdb")
    assert list(ResumedRun().check(run)) == []
    launches = [(steps[:120], loss[:120]), (steps[:40], loss[:40] * 1.1), (steps[:200], loss[:200] * 0.9)]
    run = load_run(log(tmp_path / "launches", launches), tmp_path / "l.duckdb")
    assert list(ResumedRun().check(run)) == []
    resumed = [(steps[:120], loss[:120]), (steps[90:], loss[90:] * 0.95)]  # back to step 18000, a checkpoint's
    [f] = ResumedRun().check(load_run(log(tmp_path / "resumed", resumed), tmp_path / "r.duckdb"))
    assert (f.step, f.step_end) == (int(steps[90]), int(steps[119]))


def test_epoch_falling_back_while_steps_rise_is_a_restart(tmp_path):
    """Issue 12 class 6: an HF trainer_state whose step climbs while its epoch returns to 0 three times."""
    from tests.runwriters import hf_history, write_trainer_state

    steps, loss = curve(n=400, every=10)
    history = hf_history(steps, loss, np.ones(steps.size))
    for e, s in zip(history, steps):  # each of four processes counted its epochs from 0 again
        e["epoch"] = round((int(s) % 1000) / 500, 4)
    run = load_run(write_trainer_state(tmp_path / "r", history), tmp_path / "f.duckdb")
    found = list(ResumedRun().check(run))
    assert [f.step for f in found] == [1000, 2000, 3000]
    assert all(f.evidence["epoch_after"] == 0 for f in found)


def test_console_dict_lines_without_a_step_are_no_restart(tmp_path):
    """HF's printed dict lines carry no step: a line inherits the last counter, or its ordinal; no resume."""
    root = tmp_path / "r"
    root.mkdir()
    lines = []
    for k in range(1, 6):
        lines.append(f"step {k * 4}: saving checkpoint")
        lines += [f"{{'loss': {2.0 / (k + i):.4f}, 'learning_rate': 5e-05, 'epoch': {k / 10 + i / 100:.2f}}}"
                  for i in range(3)]
    (root / "train.log").write_text("\n".join(lines) + "\n")
    assert list(ResumedRun().check(load_run(root, tmp_path / "f.duckdb"))) == []


def _wandb_run(root, passes, monkeypatch):
    """A real offline W&B run written by wandb itself: each pass logs `train/loss` at its explicit steps into
    the same run (a process resumed into the same run id, as `wandb.init(resume="allow")` does)."""
    import pytest

    wandb = pytest.importorskip("wandb", reason="wandb writes the run under test")
    for k, v in {"WANDB_MODE": "offline", "WANDB_DIR": str(root), "WANDB_SILENT": "true"}.items():
        monkeypatch.setenv(k, v)
    run = wandb.init(project="forensics-test", id="resumed1")
    for steps, loss in passes:
        for s, v in zip(steps.tolist(), loss.tolist()):
            run.log({"train/loss": v}, step=int(s))
    run.finish()
    wandb.teardown()  # the service has written every record and its debug log when it exits
    return root


def test_wandb_run_resumed_from_an_older_checkpoint_is_found_in_the_steps_wandb_refused(tmp_path, monkeypatch):
    """W&B keeps one increasing step: the repeated steps of a resume from an older checkpoint are refused, so the
    history shows one clean pass; wandb-core's debug log names every refused step and the step it had reached."""
    steps, loss = curve(n=120, every=1)
    crash, ckpt = 90, 60  # the first process logs steps 0-90 and dies; the last checkpoint it reached was 60
    root = _wandb_run(tmp_path / "r", [(steps[:crash + 1], loss[:crash + 1]),
                                       (steps[ckpt + 1:], loss[ckpt + 1:] * 1.01)], monkeypatch)
    run = load_run(root, tmp_path / "f.duckdb")
    s, _ = run.arrays("loss")
    assert np.all(np.diff(s) > 0) and s[-1] == steps[-1]  # the history itself never goes back
    [f] = ResumedRun().check(run)
    assert f.step == ckpt + 1 and f.step_end == crash
    assert f.evidence["refused_steps"] == crash - ckpt - 1 and f.evidence["last_refused_step"] == crash - 1
    assert "refused" in f.summary


def test_wandb_evaluations_logged_one_step_late_are_no_resume(tmp_path, monkeypatch):
    """A step refused now and then (an evaluation logged with the step just passed) is a logging slip."""
    steps, loss = curve(n=120, every=1)
    late = steps[20::20] - 1  # after step s is logged, s - 1 is logged again: refused each time
    passes = [(steps[:21], loss[:21])]
    for a, b in zip(range(20, 120, 20), range(40, 140, 20)):
        passes += [(late[a // 20 - 1:a // 20], loss[:1]), (steps[a + 1:b + 1], loss[a + 1:b + 1])]
    root = _wandb_run(tmp_path / "r", passes, monkeypatch)
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.has("wandb/dropped_history_step")  # W&B did refuse them: the reader saw it
    assert list(ResumedRun().check(run)) == []


def test_an_lr_from_zero_at_one_period_is_a_schedule_s_cycle_not_resumes(tmp_path):
    """trainer_state entries whose LR warms up from 0 again every 45 steps (a schedule rebuilt each epoch, or stepped
    per micro-batch): four restarts at one period are the schedule's cycle. The same restarts at uneven steps, as a
    job that died and was resumed with a new scheduler leaves them, are resumes."""
    from tests.runwriters import hf_history, write_trainer_state

    steps = np.arange(5, 205, 5)

    def history(starts):
        h = hf_history(steps, np.linspace(2.0, 0.5, steps.size), np.ones(steps.size))
        last = 0
        for e in h:
            last = max([s for s in starts if s <= e["step"]], default=0)
            e["learning_rate"] = 0.0 if e["step"] == last else 3.5e-4 * min(1.0, (e["step"] - last) / 20)
        return h

    periodic = load_run(write_trainer_state(tmp_path / "p", history([25, 70, 115, 160])), tmp_path / "p.duckdb")
    assert [f for f in ResumedRun().check(periodic) if "from 0" in f.summary] == []
    uneven = load_run(write_trainer_state(tmp_path / "u", history([60, 85, 160])), tmp_path / "u.duckdb")
    assert sorted(f.step for f in ResumedRun().check(uneven) if "from 0" in f.summary) == [60, 85, 160]
    dip = history([60, 85, 160])
    for e in dip:
        if e["step"] == 120:
            e["learning_rate"] = 0.0  # a 0 between two equal values: logged between optimizer steps, no new schedule
    dipped = load_run(write_trainer_state(tmp_path / "d", dip), tmp_path / "d.duckdb")
    assert sorted(f.step for f in ResumedRun().check(dipped) if "from 0" in f.summary) == [60, 85, 160]


def test_a_new_writer_that_goes_on_from_the_last_step_after_a_pause_is_a_resume(tmp_path):
    """Two SummaryWriters (two event files): the first logs steps 0..990 at 2 s a logged step, the second goes on
    from step 1000. Ten minutes between them is a process that died and one that resumed from its last
    checkpoint; the second writer opened at the usual pace (a writer rolled within one process) is no resume."""
    steps, loss = curve(n=200, every=10)
    for name, pause, fires in (("resumed", 600.0, True), ("rolled", 2.0, False)):
        root = tmp_path / name
        _segment(root, steps[:100], loss[:100], T0 + 2.0 * np.arange(100))
        _segment(root, steps[100:], loss[100:], T0 + 198.0 + pause + 2.0 * np.arange(100))
        found = list(ResumedRun().check(load_run(root, tmp_path / f"{name}.duckdb")))
        assert bool(found) == fires, [f.summary for f in found]
        if fires:
            assert (found[0].step, found[0].step_end, round(found[0].evidence["wall_gap_s"])) == (1000, 990, 600)


def test_a_batch_counter_under_a_loss_settled_to_its_last_digits_is_no_resume(tmp_path):
    """A CSV of `epoch,step,train_loss` where `step` is the batch index within the epoch (0..750 every 50), written by
    csv.writer, the loss settled so that late epochs repeat their (step, value) rows digit for digit: the counter
    starts again at every epoch; dropping the repeated rows must not turn it into a step going back mid-epoch."""
    import csv

    root = tmp_path / "r"
    root.mkdir()
    with open(root / "train_log.csv", "w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["epoch", "step", "train_loss"])
        for e in range(1, 21):
            for i, b in enumerate(range(0, 800, 50)):
                level = 0.0625 + 0.2 * np.exp(-e) + 0.004 * np.sin(i)
                out.writerow([e, b, f"{level:.4f}"])  # identical from the epoch where exp(-e) drops below 1e-4 on
    run = load_run(root, tmp_path / "f.duckdb")
    assert list(ResumedRun().check(run)) == []
