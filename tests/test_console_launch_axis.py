"""One program, one launch, one axis: a console log's records stay on the axis their own counter gives. A settings dump
printed a `name: value` a line (argparse's args sorted by name, a YAML config) gives no points; a progress bar's closing
line beside records that print a step is their pass's summary; a dict under a held-out split's name is that split's.
Each log is written by the real printers (argparse, PyYAML, tqdm, Python's logging) around a real torch loop."""

from __future__ import annotations

import argparse
import io
import json
import logging

import numpy as np
import polars as pl
import pytest

from ingest.console import read_console
from tests.runwriters import load_run, log_messages, logger_writing, sgd_losses

torch = pytest.importorskip("torch")


def _points(path) -> pl.DataFrame:
    return pl.concat([c.scalars for c in read_console(path) if c.scalars is not None and c.scalars.height])


def _program(log, lr: float, epochs: int, per_epoch: int, schedule: bool, seed: int) -> list[tuple[int, float]]:
    """One launch of a training script, as DINO's scripts print it: its arguments a `name: value` a line (sorted by
    name, `print("\\n".join(f"{k}: {v}" ...))`), then `Epoch: [e/E]  [b/N]  loss: x  lr: y` every 10 batches of a
    real loop (a cosine schedule where `schedule`). Returns the (step, lr) each record prints, step = e·N + b."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--arch", default="vit_small")
    parser.add_argument("--data_path", default="tiny-imagenet-200/train/")
    parser.add_argument("--epochs", type=int, default=epochs)
    parser.add_argument("--lr", type=float, default=lr)
    parser.add_argument("--min_lr", type=float, default=1e-6)
    parser.add_argument("--use_fp16", type=bool, default=False)
    parser.add_argument("--weight_decay", type=float, default=0.04)
    args = parser.parse_args([])
    print("\n".join(f"{k}: {v}" for k, v in sorted(vars(args).items())), file=log)
    torch.manual_seed(seed)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs * per_epoch, eta_min=args.min_lr) if schedule else None
    x = torch.randn(64, 4)
    y = x @ torch.tensor([1.0, -2.0, 0.5, 3.0])
    printed = []
    for e in range(epochs):
        for b in range(per_epoch):
            loss = torch.nn.functional.mse_loss(model(x).squeeze(-1), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if b % 10 == 0:
                lr_now = opt.param_groups[0]["lr"]
                print(f"Epoch: [{e}/{epochs}]  [{b:3d}/{per_epoch}]  loss: {loss.item():.6f}  lr: {lr_now:.6f}", file=log)
                printed.append((e * per_epoch + b, float(f"{lr_now:.6f}")))
            if sched is not None:
                sched.step()
    return printed


def test_a_second_programs_settings_dump_is_no_point_on_the_first_programs_axis(tmp_path):
    # A pre-training and then a linear probe appended to one log, each opening with its arguments: the probe's `lr:
    # 0.001` is a setting, not the pre-training's LR at its last step (which made a ×1000 jump of no schedule), and
    # the probe is a launch of its own.
    path = tmp_path / "train.out"
    with path.open("w") as log:
        first = _program(log, lr=5e-4, epochs=3, per_epoch=50, schedule=True, seed=0)
        second = _program(log, lr=1e-3, epochs=2, per_epoch=50, schedule=False, seed=1)
    lr = _points(path).filter(pl.col("tag") == "lr")
    assert not lr["ordinal"].any()  # one axis: no point from a line number among the logged steps
    assert lr["value"].to_list() == [v for _, v in first + second]
    assert sorted(set(_points(path)["tag"].to_list())) == ["launch", "loss", "lr"]  # no `min_lr`, `weight_decay`
    run = load_run(tmp_path, tmp_path / "db.duckdb")
    name = run.pick("lr")
    starts = run.launch_starts(name)
    assert len(starts) == 1
    view = run.series_named(name)
    before = view.filter(pl.col("step") < starts[0])["value"].to_numpy()
    assert np.allclose(before, [v for _, v in first])  # the first program's LR ends on its own schedule's floor


def test_a_yaml_config_echoed_with_comments_gives_no_points(tmp_path):
    yaml = pytest.importorskip("yaml")
    config = {"MODEL": {"NAME": "ssd", "BACKBONE": "vgg"}, "SOLVER": {"LR": 0.0001, "MAX_ITER": 6800, "BATCH_SIZE": 2},
              "OUTPUT_DIR": "outputs"}
    text = yaml.safe_dump(config).replace("BATCH_SIZE: 2", "BATCH_SIZE: 2  # more if the GPU allows")
    records = [f"iter: {i:06d}, lr: 0.00010, total_loss: {3.0 - 0.1 * k:.3f}" for k, i in enumerate(range(10, 110, 10))]
    path = log_messages(tmp_path / "log.txt", ["Running with config:\n" + text] + records)
    points = _points(path)
    assert set(points["tag"].to_list()) == {"lr", "total_loss"}
    assert not points["ordinal"].any()


def test_numbers_printed_a_name_a_line_without_settings_are_still_records(tmp_path):
    # Healthy twin: a loop that prints its epoch's values one per line (all numbers, no word among them) keeps them.
    path = tmp_path / "train.log"
    with path.open("w") as log:
        for e, loss in enumerate([0.9, 0.7, 0.6, 0.55], 1):
            print(f"epoch {e}", file=log)
            print(f"loss: {loss}\naccuracy: {1 - loss / 2}\nval_loss: {loss + 0.05}\nval_accuracy: {0.5}", file=log)
    points = _points(path)
    assert points.filter(pl.col("tag") == "loss")["value"].to_list() == [0.9, 0.7, 0.6, 0.55]
    assert points.filter(pl.col("tag") == "val_loss").height == 4
    # ... and so does one that prints a mode beside measured values (a unit or a clock is no setting's word)
    path = tmp_path / "phases.log"
    with path.open("w") as log:
        for e, loss in enumerate([0.9, 0.7, 0.6], 1):
            print(f"=== epoch {e} ===", file=log)
            print(f"mode: train\nloss: {loss}\nacc: {1 - loss / 2}\ntime: {12.5 + e}s\nelapsed: 0:0{e}:10", file=log)
    assert _points(path).filter(pl.col("tag") == "loss")["value"].to_list() == [0.9, 0.7, 0.6]


def _iterations(log: logging.Logger, n: int, every: int, lr: float) -> list[tuple[int, float, float]]:
    out = []
    for i, loss in enumerate(sgd_losses(n, lr=lr)):
        if i % every == 0:
            log.info(f"iter={i} loss={loss:.6f} lr={lr:g}")
            out.append((i, float(f"{loss:.6f}"), lr))
    return out


def test_a_progress_bars_closing_line_beside_records_with_a_step_is_their_summary(tmp_path):
    # tqdm draws on stderr, unbuffered; the script's logger writes to buffered stdout; both go to one file, so the bar
    # at 120/120 lands before the `iter=` lines it sums up. Its `loss=`, `lr=` are no record at a line number before
    # iteration 0 (which made the loss start at its last value and an LR jump between two axes).
    from tqdm import tqdm

    path = tmp_path / "output.log"
    buffered = io.StringIO()
    with logger_writing(buffered, name="probe") as logger, path.open("w") as f:
        records = _iterations(logger, 120, 10, 1e-3)
        bar = tqdm(total=120, desc="train", file=f, mininterval=0, miniters=1)
        bar.update(120)
        bar.set_postfix(loss=f"{records[-1][1]:.4g}", lr=f"{records[-1][2]:.3g}")
        bar.close()
        f.write(buffered.getvalue())
    loss = _points(path).filter(pl.col("tag") == "loss")
    assert not loss["ordinal"].any()
    assert loss["step"].to_list() == [i for i, _, _ in records]
    assert loss["value"][0] == records[0][1]


def test_a_log_of_progress_bars_alone_keeps_their_closing_lines(tmp_path):
    # Healthy twin: where the bars are the log's only records (a terminal pasted: one closing line per epoch), each
    # closing line is its epoch's record.
    from tqdm import tqdm

    path = tmp_path / "train_log.txt"
    losses = [2.1, 1.7, 1.4, 1.2, 1.1]
    with path.open("w") as f:
        for e, value in enumerate(losses, 1):
            bar = tqdm(total=8, desc=f"epoch {e:03d}/005", file=f, mininterval=1e9)
            bar.update(8)
            bar.set_postfix(loss=value, refresh=False)
            bar.close()
    loss = _points(path).filter(pl.col("tag") == "loss")
    assert loss["value"].to_list()[-1] == losses[-1]
    assert set(losses) <= set(loss["value"].to_list())


def test_a_dict_under_a_held_out_splits_name_is_that_splits(tmp_path):
    # `val_metrics={"loss": ...}` printed by the logger between training records: its loss is the validation loss,
    # never a point of the training loss at the same step (which read the validation's blow-up as training's).
    lines, val = [], []
    for i in range(0, 60, 10):
        lines.append(f"iter={i} loss={2.0 - 0.01 * i:.6f} lr=0.001")
        if i:
            metrics = {"loss": 1.9 - 0.01 * i, "mae": 0.5, "r2": 0.3}
            val.append(metrics["loss"])
            lines.append(f"val_metrics={json.dumps(metrics)} samples=99")
    # (the absl-style prefix DINOv2's logger prints: `I20260319 16:19:51 3457710 dinov2 train.py:425] ...`)
    path = log_messages(tmp_path / "output.log", lines, datefmt="%Y%m%d %H:%M:%S",
                        fmt="%(levelname).1s%(asctime)s %(process)s %(name)s %(filename)s:%(lineno)s] %(message)s")
    points = _points(path)
    assert points.filter(pl.col("tag") == "loss")["value"].to_list() == [2.0 - 0.01 * i for i in range(0, 60, 10)]
    assert points.filter(pl.col("tag") == "val loss")["value"].to_list() == val
    assert {"val mae", "val r2"} <= set(points["tag"].to_list())
    # twin: a training dict, or one under a name of no held-out split, keeps its names
    twin = log_messages(tmp_path / "twin.log", [f"train_metrics={json.dumps({'loss': 1.5 - 0.1 * i})} step={i}"
                                                 for i in range(6)])
    assert "loss" in set(_points(twin)["tag"].to_list())
