"""The planned length a console log prints beside its counters, kept as a config (ingest.plan)."""

import duckdb

from ingest.run import ingest_run


def _configs(tmp_path, lines: list[str]) -> dict:
    root = tmp_path / "r"
    root.mkdir()
    (root / "train.log").write_text("\n".join(lines) + "\n")
    db = tmp_path / "f.duckdb"
    ingest_run(root, db)
    con = duckdb.connect(str(db), read_only=True)
    return {k: float(v) for k, v in con.execute("SELECT key, value FROM configs WHERE name = 'console plan'").fetchall()}


def test_an_epoch_total_is_the_plan_and_a_step_total_beside_it_counts_one_epoch(tmp_path):
    """PyTorch tutorials print `Epoch [e/5], Step [s/600]`: 5 epochs planned, 600 steps in each, not in the run."""
    lines = [f"Epoch [{e}/5], Step [{s}/600], Loss: {1.0 / (e * s):.4f}" for e in (1, 2) for s in (100, 200, 600)]
    assert _configs(tmp_path, lines) == {"planned_epochs": 5, "epochs_reached": 2}


def test_an_iteration_total_is_the_plan_and_an_unlabelled_bar_is_not(tmp_path):
    lines = [f"[iter {i}/10000] loss {3 - i / 1000:.3f}" for i in range(10, 60, 10)]
    lines += [f" 45%|####      | {b}/100 [00:01<00:01, 42.1it/s, loss=0.5]" for b in (45, 46)]
    assert _configs(tmp_path, lines) == {"planned_steps": 10000, "steps_reached": 50}


def test_the_last_eta_printed_is_the_time_left_of_the_plan(tmp_path):
    """mmcv's TextLoggerHook prints `eta: str(timedelta)`, a day and more as `1 day, 2:03:04`: the last one is what
    the log left of its plan. A word ending in `eta` (`theta: 0:01:00`) is none."""
    lines = [f"Epoch [1][{i}/5455]\tlr: 1.000e-02, eta: 1 day, 2:0{i // 50}:04, time: 0.330, loss: 1.2"
             for i in (50, 100, 150)] + ["theta: 0:01:00"]
    assert _configs(tmp_path, lines) == {"eta_left_s": 93_784}



def test_a_relaunch_that_prints_another_total_declares_its_own_plan(tmp_path):
    """A launch that printed a 160,000-iteration plan, stopped after a line, and the relaunch that planned 16,000 and
    reached them (TRAIN lines 94-95 and 1987 of
    Sunting78/PP-Industry@891730bc0f32e8a207a46d88a72c85c9ba28857c:log/workerlog.0): the plan is the last one printed."""
    lines = ['2023-03-06 19:38:19 [INFO]\t[TRAIN] epoch: 1, iter: 10/160000, loss: 0.7563, lr: 0.009999, batch_cost: 0.4588, reader_cost: 0.07643, ips: 17.4365 samples/sec | ETA 20:23:24', '2023-03-06 19:38:22 [INFO]\t[TRAIN] epoch: 2, iter: 20/160000, loss: 0.8728, lr: 0.009999, batch_cost: 0.2704, reader_cost: 0.03712, ips: 29.5812 samples/sec | ETA 12:01:05', '2023-03-06 20:48:33 [INFO]\t[TRAIN] epoch: 942, iter: 16000/16000, loss: 0.2076, lr: 0.000002, batch_cost: 0.2498, reader_cost: 0.04117, ips: 32.0206 samples/sec | ETA 00:00:00']
    assert _configs(tmp_path, lines) == {"planned_steps": 16000, "steps_reached": 16000, "eta_left_s": 0}
