"""The axis rule (DECISIONS §16, issue 12 class 3): which series of a role detectors may read."""

import numpy as np
import polars as pl

from forensics.judge.run import META_SCHEMA, cut_lines, usable_series
from tests.runwriters import curve, load_run, log_messages, write_tb


def _meta(rows: list[dict]) -> pl.DataFrame:
    base = {"series_id": 0, "grp": "", "tag": "", "name": "", "role": "train_loss", "split": None, "layer": None,
            "canonical": True, "ordinal": False, "n_points": 10, "n_nonfinite": 0, "format": "tensorboard"}
    return pl.DataFrame([{**base, "series_id": i, **r} for i, r in enumerate(rows)], schema=META_SCHEMA)


def test_console_copy_drops_out_beside_a_structured_series():
    meta = _meta([{"name": "train_loss", "format": "wandb", "n_points": 158},
                  {"name": "Loss", "format": "console", "ordinal": True, "n_points": 5000}])
    assert usable_series(meta, "train_loss")["name"].to_list() == ["train_loss"]


def test_ordinal_axis_drops_out_beside_logged_steps_of_the_same_role():
    meta = _meta([{"name": "loss", "format": "console", "ordinal": True, "n_points": 900},
                  {"name": "train loss", "format": "console", "ordinal": False, "n_points": 30}])
    assert usable_series(meta, "train_loss")["name"].to_list() == ["train loss"]


def test_a_role_only_the_console_has_is_kept():
    meta = _meta([{"name": "loss", "format": "wandb"},
                  {"name": "loss_scale", "role": "loss_scale", "format": "console", "ordinal": True}])
    assert usable_series(meta, "loss_scale")["name"].to_list() == ["loss_scale"]
    assert usable_series(meta, "train_loss")["name"].to_list() == ["loss"]


def test_console_log_beside_tensorboard_does_not_become_the_loss(tmp_path):
    steps, loss = curve(n=50)
    root = write_tb(tmp_path / "r", {"loss": (steps, loss)})
    # a console log of the same run, printed every batch with no step: more points, ordinal steps
    lines = [f"epoch {e} | Loss: {v:.4f}" for e in range(5) for v in np.linspace(3.0, 0.1, 200)]
    (root / "train.log").write_text("\n".join(lines) + "\n")
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.pick("loss") == "loss" and run.format_of(run.pick("loss")) == "tensorboard"
    assert run.last_step() == int(steps[-1])


def test_a_summary_s_one_last_value_displaces_no_console_curve():
    meta = _meta([{"name": "loss", "format": "wandb_summary", "n_points": 1},
                  {"name": "loss", "format": "console", "n_points": 400}])
    assert sorted(usable_series(meta, "train_loss")["n_points"].to_list()) == [1, 400]


def _epoch_log(root, epochs):
    """A console log written by Python's logging: `Epoch: E, Step: S, loss: V` with a batch counter S that starts
    again at 0 every epoch (no global step printed)."""
    root.mkdir(parents=True)
    log_messages(root / "train.log", (f"Epoch: {e}, Step: {k * 200}, loss: {v:.5f}"
                                      for e, values in enumerate(epochs, 1) for k, v in enumerate(values)),
                 "%(asctime)s : %(message)s")
    return root


def test_a_counter_that_starts_again_every_epoch_is_read_pass_after_pass(tmp_path, capsys):
    """Epochs of 30, 30, 26 and 5 batches, each counting from step 0: one row per step (the last written wins, as a
    resume overwrites) would make one curve out of the last epoch's steps filled in by earlier ones. The passes
    follow one another instead, and a finding says where it is in the writer's words. A ×100 excursion in the third
    epoch that the loss comes back from is a spike, never a divergence."""
    import json

    from forensics.cli import main

    rng = np.random.default_rng(3)
    lengths, level = (30, 30, 26, 5), [0.7, 0.3, 0.15, 0.1]
    epochs = [lv * (1 + rng.normal(0, 0.05, n)) for lv, n in zip(level, lengths)]
    epochs[2][10] = 19.5  # one display far above, then back
    root = _epoch_log(tmp_path / "r", epochs)
    run = load_run(root, tmp_path / "f.duckdb")
    s, v = run.arrays("loss")
    assert s.size == sum(lengths) and np.all(np.diff(s) > 0)  # one pass after another, never overwritten
    assert np.allclose(v, np.concatenate(epochs), rtol=1e-4)
    assert run.writer_positions(run.pick("loss"), [int(s[30])]) == {int(s[30]): "epoch 2, batch 0"}
    capsys.readouterr()
    main(["analyze", str(root), "--db", str(tmp_path / "a.duckdb"), "--json"])
    found = {f["kind"]: f for f in json.loads(capsys.readouterr().out)["findings"]}
    assert "divergence" not in found and "resumed_run" not in found
    assert found["loss_spike"]["at"] == "epoch 3, batch 2000"  # the reader keeps the batch within its epoch


def test_launches_appended_to_one_log_are_no_spikes(tmp_path, capsys):
    """Three launches of one script appended to one log, each counting from step 0 and starting again at the loss a
    fresh model has: where each begins, the loss jumps back up ×15 and falls again. A new launch, not a spike, a
    divergence or a resume."""
    import json

    from forensics.cli import main

    rng = np.random.default_rng(4)
    launches = [6.1 * np.exp(-np.arange(n) / 4) + 0.35 + rng.normal(0, 0.01, n) for n in (30, 30, 40)]
    root = _epoch_log(tmp_path / "r", launches)
    main(["analyze", str(root), "--db", str(tmp_path / "a.duckdb"), "--json"])
    kinds = {f["kind"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert not kinds & {"loss_spike", "divergence", "resumed_run"}


def _launches_log(root, launches, warmup=3):
    """A script run several times, each launch appending to one log through Python's logging (a new FileHandler
    on the same file): an `Epoch e/N` line, then `loss: V, lr: X` per display, the epoch counting from 1 again and
    the LR warming up again at every launch (over `warmup` displays). `launches`: per launch, a list of epochs' loss
    values."""
    import logging

    root.mkdir(parents=True, exist_ok=True)
    for i, epochs in enumerate(launches):
        logger = logging.getLogger(f"launches.{root.name}.{i}")
        handler = logging.FileHandler(root / "train.log")  # mode "a": each launch adds to the file
        handler.setFormatter(logging.Formatter("%(asctime)s - %(levelname)s - %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        j = 0  # displays so far in this launch
        for e, values in enumerate(epochs, 1):
            logger.info(f"Epoch {e}/{len(epochs)}")
            for v in values:
                lr = 0.01 * (j + 1) / warmup if j < warmup else 0.01 * 0.99 ** (j - warmup)  # warmup, then a decay
                logger.info(f"loss: {v:.5f}, lr: {lr:.6f}")
                j += 1
        handler.close()
        logger.removeHandler(handler)
    return root


def _launch(rng, n_epochs, per_epoch=20, start=2.3, tau=40.0, noise=0.01):
    """One launch's loss, epoch by epoch: `start` × exp(-t/tau) above 0.3, with Gaussian noise."""
    t = np.arange(n_epochs * per_epoch)
    y = start * np.exp(-t / tau) + 0.3 + rng.normal(0, noise, t.size)
    return [y[e * per_epoch:(e + 1) * per_epoch] for e in range(n_epochs)]


def _findings(root, tmp_path, capsys):
    import json

    from forensics.cli import main

    capsys.readouterr()
    main(["analyze", str(root), "--db", str(tmp_path / "a.duckdb"), "--json"])
    return json.loads(capsys.readouterr().out)["findings"]


def test_launches_that_start_from_the_beginning_are_no_resume(tmp_path, capsys):
    """Three launches appended to one log, each starting again at epoch 1 with its LR warming up again: the epoch
    falling back and the scheduler starting again are fresh launches, not a resume from a checkpoint."""
    rng = np.random.default_rng(6)
    root = _launches_log(tmp_path / "r", [_launch(rng, 4), _launch(rng, 2), _launch(rng, 3)])
    run = load_run(root, tmp_path / "f.duckdb")
    assert len(run.launch_starts(run.pick("loss"))) == 2  # the reader's marks, on the loss's axis
    assert len(run.launch_starts(run.pick("lr"))) == 2
    kinds = {f["kind"] for f in _findings(root, tmp_path, capsys)}
    assert not kinds & {"resumed_run", "lr_schedule_anomaly", "divergence", "loss_spike"}


def test_a_launch_that_opens_where_the_last_one_ended_is_a_resume(tmp_path, capsys):
    """Two launches appended to one log, the epoch counting from 1 again, but the second one's loss opening where the
    first one's ended (its weights loaded from the checkpoint the first saved), not at a fresh model's level: a
    resume with the counter started again, reported where the second launch begins."""
    rng = np.random.default_rng(7)
    first = _launch(rng, 4)
    t = np.arange(3 * 20) + 4 * 20  # the second launch goes on along the first one's curve
    second = 2.3 * np.exp(-t / 40.0) + 0.3 + rng.normal(0, 0.01, t.size)
    root = _launches_log(tmp_path / "r", [first, [second[e * 20:(e + 1) * 20] for e in range(3)]])
    run = load_run(root, tmp_path / "f.duckdb")
    (start,) = run.launch_starts(run.pick("loss"))
    found = [f for f in _findings(root, tmp_path, capsys) if f["kind"] == "resumed_run"]
    assert [f["step"] for f in found] == [start]
    assert "opens at" in found[0]["summary"]


def _appended_table(path, launches):
    """A script that appends `f"{epoch},{loss:.4f}"` to a file named for its loss at every epoch, with no header, each
    launch counting its epochs from 1 again."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for values in launches:
        with path.open("a") as f:  # a launch opens the file for appending, as the script does
            for e, v in enumerate(values, 1):
                f.write(f"{e},{v:.4f}\n")
    return path.parent


def test_a_headerless_table_whose_counter_starts_again_is_read_launch_by_launch(tmp_path, capsys):
    """A headerless per-epoch table two launches appended to: the first column counts 1..23, then 1..60 again. It is
    the epoch, not the loss; the second launch opening where the first ended is a resume, and no curve (no
    divergence) is read from the counter."""
    t = np.arange(23 + 60)
    loss = 2.5 * np.exp(-t / 15) + 3.4 + np.random.default_rng(8).normal(0, 0.003, t.size)
    root = _appended_table(tmp_path / "r" / "loss_log.txt", [loss[:23], loss[23:]])
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.pick("loss") == "loss_log" and run.pick("epoch") == "epoch"
    assert len(run.launch_starts("loss_log")) == 1
    kinds = {f["kind"] for f in _findings(root, tmp_path, capsys)}
    assert "resumed_run" in kinds and "divergence" not in kinds


def test_flat_first_launches_are_flat_although_a_later_one_trains(tmp_path, capsys):
    """Two launches whose loss does not move beyond its noise, then two that train: the whole log falls, yet the
    first launches never moved: flat_loss for each of them (a warning: a later launch trains), none for the others,
    and the jumps back to the initial loss at each launch are no spike or divergence."""
    rng = np.random.default_rng(5)
    flat = [_launch(rng, n, start=3.8, tau=1e9) for n in (3, 2)]
    learn = [_launch(rng, n, start=3.8, tau=30) for n in (3, 4)]
    root = _launches_log(tmp_path / "r", [*flat, *learn])
    found = _findings(root, tmp_path, capsys)
    flat_found = [f for f in found if f["kind"] == "flat_loss"]
    assert [f["evidence"]["launch"] for f in flat_found] == [1, 2]
    assert all(f["severity"] == "warning" and "launch" in f["summary"] for f in flat_found)
    assert not {f["kind"] for f in found} & {"divergence", "loss_spike", "resumed_run"}


def test_a_new_launch_that_does_not_move_is_flat_not_a_divergence(tmp_path, capsys):
    """A launch that trains, then one that starts again at the initial loss and stays there: read across the
    boundary it would be a rise from the first launch's minimum; judged on its own, the last launch never moved."""
    rng = np.random.default_rng(6)
    root = _launches_log(tmp_path / "r", [_launch(rng, 4), _launch(rng, 2, per_epoch=15, tau=1e9)])
    found = {f["kind"]: f for f in _findings(root, tmp_path, capsys)}
    assert "divergence" not in found and "resumed_run" not in found
    assert found["flat_loss"]["severity"] == "critical" and found["flat_loss"]["evidence"]["launch"] == 2


def test_a_launch_stopped_while_its_lr_warms_up_is_not_flat(tmp_path, capsys):
    """A first launch stopped after one epoch of a long warmup, its loss still at the initial level while the LR
    rose at every record, then a launch that trains: too early to call the first one flat."""
    rng = np.random.default_rng(5)
    first = _launch(rng, 2, per_epoch=8, start=3.8, tau=1e9)
    root = _launches_log(tmp_path / "r", [first, _launch(rng, 3, start=3.8, tau=30)], warmup=30)
    kinds = {f["kind"] for f in _findings(root, tmp_path, capsys)}
    assert "flat_loss" not in kinds


def test_a_new_launch_starting_again_at_the_initial_loss_is_no_spike(tmp_path, capsys):
    """A launch that trains, then one that starts again at the initial loss and falls back within a few displays:
    read against the first launch's level, the new launch's first points are a ×3 jump that comes back; they are
    where a fresh model starts, not a spike (nor a resume: the epoch counts from 1 again)."""
    rng = np.random.default_rng(5)
    root = _launches_log(tmp_path / "r", [_launch(rng, 4), _launch(rng, 3, tau=2)])
    kinds = {f["kind"] for f in _findings(root, tmp_path, capsys)}
    assert not kinds & {"loss_spike", "divergence", "resumed_run", "lr_schedule_anomaly"}


def _json_log(path, records):
    """Records written as DETR's and detectron2's loggers write them: `json.dumps(record)` a line, appended."""
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    return path.parent


def _fit(rng, n, start, floor=1.6, tau=15.0):
    t = np.arange(n)
    return floor + (start - floor) * np.exp(-t / tau) + rng.normal(0, 0.01, n)


def test_an_epoch_counter_reset_on_a_rising_row_axis_is_a_launch_start(tmp_path, capsys):
    """Two trainings appended to one per-epoch JSON log (rows go on, the epoch goes back to 0 and the loss back to its
    untrained level): every detector reads the reset as a launch start, so the second training's first epochs are no
    spike over the first one's end; and, no logged step going on across it, it is a fresh launch, no resume (the
    catalog's resumed_run: restarted from a checkpoint)."""
    rng = np.random.default_rng(3)
    records = [{"train_loss": float(v), "test_loss": float(v) + 0.1, "epoch": e, "n_parameters": 897}
               for a in (_fit(rng, 60, 12.0), _fit(rng, 80, 11.5)) for e, v in enumerate(a)]
    root = _json_log(tmp_path / "r" / "log.txt", records)
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.launch_starts(run.pick("loss")) == (int(run.series(run.pick("loss"))["step"][60]),)
    kinds = [f["kind"] for f in _findings(root, tmp_path, capsys)]
    assert "loss_spike" not in kinds and "resumed_run" not in kinds


def test_a_number_quoted_beside_the_epoch_is_no_reset(tmp_path, capsys):
    """A per-epoch summary that quotes the best epoch so far beside the current one (`> Epoch 5: ... | Best so far:
    epoch 4`), under a first line that names another epoch: the counter never falls back from a value it counted up
    to and went on below, so there is no restart and no launch."""
    rng = np.random.default_rng(4)
    loss = _fit(rng, 40, 5.6, floor=0.1, tau=5.0)
    lines = ["Start from epoch 0"]
    for e, v in enumerate(loss):
        best = e if e % 3 else max(0, e - 1)
        lines += [f"train: {{'epoch': {e}, 'time_epoch': 1400.5, 'loss': {v:.6f}, 'lr': 2e-05}}",
                  f"> Epoch {e}: took 1431.3s (avg 1506.0s) | Best so far: epoch {best}\ttrain_loss: {v:.4f}"]
    root = tmp_path / "r"
    root.mkdir()
    log_messages(root / "logging.log", lines, fmt="%(message)s")
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.epoch_resets() == [] and run.launch_starts(run.pick("loss")) == ()
    assert "resumed_run" not in {f["kind"] for f in _findings(root, tmp_path, capsys)}


def test_one_launchs_pace_is_not_compared_with_anothers(tmp_path, capsys):
    """Launches appended to one metrics log (the iteration back at its first value), each at its own steady pace (a
    second configuration twice as slow): no slowdown, no launch read as another's drop."""
    rng = np.random.default_rng(5)
    records = []
    for pace, n in ((40.0, 120), (76.0, 150)):
        for i, v in enumerate(_fit(rng, n, 4.0, floor=0.5, tau=30.0)):
            records.append({"iteration": 19 + 20 * i, "total_loss": float(v), "lr": 5e-4,
                            "time": float(pace * (1 + rng.normal(0, 0.05))), "data_time": 0.01})
    root = _json_log(tmp_path / "r" / "metrics.json", records)
    run = load_run(root, tmp_path / "f.duckdb")
    assert len(run.launch_starts(run.pick("loss"))) == 1
    assert "throughput_drop" not in {f["kind"] for f in _findings(root, tmp_path, capsys)}


def test_the_pause_between_launches_on_one_step_axis_is_no_stall(tmp_path, capsys):
    """Five trainings of a sweep written by one SummaryWriter on a step axis that goes on, the epoch starting again
    from 0 at each, each at a steady 10 s a step, with an hour between one launch's end and the next one's start
    (a new process loading its model): the hour holds no steps, so there is no stall and no throughput drop."""
    from torch.utils.tensorboard import SummaryWriter

    rng = np.random.default_rng(9)
    root = tmp_path / "r"
    writer = SummaryWriter(str(root))
    step, clock = 0, 1.6e9
    for _ in range(5):
        for i, v in enumerate(_fit(rng, 30, 8.0, floor=1.0, tau=8.0)):
            writer.add_scalar("train/loss", float(v), step, walltime=clock)
            writer.add_scalar("train/epoch", i / 30, step, walltime=clock)
            step, clock = step + 1, clock + 10.0 * (1 + rng.normal(0, 0.03))
        clock += 3600.0
    writer.close()
    run = load_run(root, tmp_path / "f.duckdb")
    assert len(run.launch_starts(run.pick("loss"))) == 4
    assert "throughput_drop" not in {f["kind"] for f in _findings(root, tmp_path, capsys)}


def test_an_elapsed_time_that_starts_again_with_each_launch_is_a_clock(tmp_path, capsys):
    """Launches appended to one log, each printing the seconds elapsed since it began (`Time: 41.1s`) at a steady
    pace of its own: within each launch the time grows at every record, a clock whose differences are the step times,
    not step times that slow down."""
    rng = np.random.default_rng(7)
    lines = []
    for n, pace in ((17, 2.4), (20, 3.8), (23, 3.8)):  # a later configuration slower: another launch, no drop
        clock = np.cumsum(pace + rng.normal(0, 0.1, n))
        lines += [f"STEP {i + 1} | Train Loss: {5.6 + rng.normal(0, 0.02):.4f} | Time: {t:.1f}s" for i, t in enumerate(clock)]
        lines += ["Training finished.", "=" * 40, "Loading data...", "Building model...", "Model params: 1.2M",
                  "Starting training..."]
    root = tmp_path / "r"
    root.mkdir()
    log_messages(root / "train.log", lines, fmt="%(message)s")
    assert "throughput_drop" not in {f["kind"] for f in _findings(root, tmp_path, capsys)}


def test_a_training_started_again_after_its_first_two_epochs_is_a_reset(tmp_path):
    """A per-epoch JSON log whose first two epochs are logged twice (a launch stopped after epoch 1, then started
    again from epoch 0) before it runs on: the epoch falls back from a value it counted up to and counts up again."""
    rng = np.random.default_rng(8)
    loss = _fit(rng, 60, 4.2, floor=3.0, tau=20.0)
    records = [{"train_loss": float(v), "epoch": e} for e, v in [(0, loss[0]), (1, loss[1]), *enumerate(loss)]]
    run = load_run(_json_log(tmp_path / "r" / "log.txt", records), tmp_path / "f.duckdb")
    assert [r[2:] for r in run.epoch_resets()] == [(1.0, 0.0)]


def _iteration_log(path, steps, loss, cut_every=None):
    """A training loop printing `Global Iter: N training loss: V` to its log, and, where `cut_every` is given, another
    process appending its own lines to the same file (a framework's device banner): every `cut_every`-th record, that
    line lands between the writes of the loop's line, which is cut in two after a few digits of its counter."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as loop, path.open("a") as other:
        for k, (s, v) in enumerate(zip(steps, loss)):
            line = f"Global Iter: {s} training loss: {v:.5f}\n"
            if cut_every and k and k % cut_every == 0:
                loop.write(line[:len("Global Iter: ") + 3])
                loop.flush()
                other.write("2017-06-23 07:00:45.358990: I tensorflow/core/common_runtime/gpu/gpu_device.cc:977] "
                            "Creating TensorFlow device (/gpu:0)\n")
                other.flush()
                loop.write(line[len("Global Iter: ") + 3:])
            else:
                loop.write(line)
            loop.flush()
    return path.parent


def test_a_line_cut_by_another_writer_is_no_resume(tmp_path, capsys):
    """A loop whose log lines are cut by a second process writing to the same file: the cut line reads as one record
    at a step far below the one before, the next record going on past it. The counter never went back: no resume, no
    launch, the curve one pass in step order. Its twin, a loop resumed from a checkpoint (the step goes back and
    goes on from there), is still a resume."""
    rng = np.random.default_rng(11)
    steps = 1_000_000 + 100 * np.arange(300)
    loss = _fit(rng, 300, 4.0, floor=1.2, tau=60.0)
    root = _iteration_log(tmp_path / "r" / "training_output.txt", steps, loss, cut_every=70)
    run = load_run(root, tmp_path / "f.duckdb")
    s, _ = run.arrays("loss")
    assert run.launch_starts(run.pick("loss")) == () and np.all(np.diff(s) > 0) and s[0] == steps[0]
    assert "resumed_run" not in {f["kind"] for f in _findings(root, tmp_path, capsys)}

    twin = np.concatenate([steps[:200], steps[150:250]])  # back 50 records, from the checkpoint, and on from there
    root = _iteration_log(tmp_path / "t" / "training_output.txt", twin, _fit(rng, 300, 4.0, floor=1.2, tau=60.0))
    found = [f for f in _findings(root, tmp_path / "t", capsys) if f["kind"] == "resumed_run"]
    assert found and "go back" in found[0]["summary"]


def _trainer_log(root, launches, rng):
    """An SSD-style trainer's log through Python's logging, one launch after another appended to it: `Start training`,
    then `iter: 000010, lr: ..., total_loss: V (mean), time: T (mean)` every 10 iterations, the iteration counting
    from 10 again at each launch. `launches`: per launch, its per-record step times."""
    lines = []
    for times in launches:
        lines.append("SSD.trainer INFO: Start training ...")
        loss = _fit(rng, len(times), 16.0, floor=6.0, tau=40.0)
        for i, (t, v) in enumerate(zip(times, loss), 1):
            lines.append(f"SSD.trainer INFO: iter: {10 * i:06d}, lr: 0.00010, total_loss: {v:.3f} ({v:.3f}), "
                         f"time: {t:.3f} ({t:.3f}), eta: 0:20:00")
    root.mkdir(parents=True)
    log_messages(root / "log.txt", lines)
    return root


def test_a_slower_launch_after_a_slow_last_record_is_no_drop(tmp_path, capsys):
    """Two launches appended to one log, the first at 0.17 s an iteration with a slow last record (the iteration that
    saved its checkpoint), the second, another configuration, at 0.67 s throughout: the change point of the whole log
    falls one record before the second launch: another launch's pace, no drop. Its twin, one launch that slows
    from 0.17 s to 0.67 s midway, is a drop."""
    rng = np.random.default_rng(12)
    pace = lambda s, n: s * (1 + rng.normal(0, 0.02, n))  # noqa: E731
    first = np.append(pace(0.17, 120), 0.40)
    root = _trainer_log(tmp_path / "r", [first, pace(0.67, 60)], rng)
    run = load_run(root, tmp_path / "f.duckdb")
    assert len(run.launch_starts(run.pick("loss"))) == 1
    assert "throughput_drop" not in {f["kind"] for f in _findings(root, tmp_path, capsys)}

    root = _trainer_log(tmp_path / "t" / "r", [np.concatenate([first[:-1], pace(0.67, 60)])], rng)
    assert "throughput_drop" in {f["kind"] for f in _findings(root, tmp_path / "t", capsys)}


def test_cut_lines_are_the_excursions_the_counter_goes_on_past():
    """One record (or two at that step) below the counter, the next going on past it: cut. A resume goes on from the
    lower step, a launch from the first one, a counter that starts again every epoch back to its first value: kept."""
    cut = lambda steps: np.flatnonzero(cut_lines(np.array(steps))).tolist()  # noqa: E731
    assert cut([100, 200, 300, 3, 400, 500]) == [3]
    assert cut([100, 200, 300, 30, 30, 400]) == [3, 4]
    assert cut([100, 200, 300, 150, 250, 350]) == []  # resumed from 150
    assert cut([100, 200, 300, 100, 200, 300]) == []  # a launch appended
    assert cut([0, 50, 100, 0, 50, 100, 0, 50]) == []  # a per-epoch counter
    assert cut([100, 200, 300, 300, 400]) == []  # a step written twice goes nowhere back
