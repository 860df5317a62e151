"""A loss that does not move, as an expert reads it at a glance in a short excerpt, written by the real writers
(TensorBoard's SummaryWriter, Keras' CSVLogger): identical to its fifth digit on every record, exactly 0 in both
splits, sitting at ln 2 on every record, and a level held over an excerpt from well into training (a stall whose
fall is not in the log: plateau, not a loss that never moved). Each beside a twin that differs only in the effect."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from forensics.cli import main


def tensorboard(root: Path, steps: np.ndarray, loss: np.ndarray, lr: np.ndarray | None = None) -> None:
    """SummaryWriter's scalars at `steps`, one second apart."""
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(log_dir=str(root))
    for i, step in enumerate(steps):
        w.add_scalar("train/loss", float(loss[i]), global_step=int(step), walltime=1.7e9 + i)
        if lr is not None:
            w.add_scalar("train/lr", float(lr[i]), global_step=int(step), walltime=1.7e9 + i)
    w.close()


def keras_csv(root: Path, rows: list[dict[str, float]]) -> None:
    """Keras' CSVLogger, called as `fit` calls it at each epoch's end."""
    os.environ.setdefault("KERAS_BACKEND", "torch")
    keras = pytest.importorskip("keras", reason="the test extra installs keras")
    logger = keras.callbacks.CSVLogger(str(root / "training.log"))
    logger.on_train_begin()
    for i, logs in enumerate(rows):
        logger.on_epoch_end(i, logs)
    logger.on_train_end()


def analyze(capsys, tmp_path: Path, name: str, write) -> dict:
    root = tmp_path / name
    root.mkdir()
    write(root)
    main(["analyze", str(root), "--db", str(tmp_path / f"{name}.duckdb"), "--json"])
    return json.loads(capsys.readouterr().out)


def kinds(out: dict) -> dict[str, str]:
    return {f["kind"]: f["severity"] for f in out["findings"]}


def test_a_loss_identical_to_its_fifth_digit_on_three_records_is_flat(capsys, tmp_path):
    """Three records 50 steps apart agreeing to 1e-5 of their level: no minibatch loss repeats itself so; the same
    level with 1% noise is too short to judge."""
    steps = np.array([700, 750, 800])
    out = analyze(capsys, tmp_path, "same", lambda r: tensorboard(r, steps, np.array([1535.6199, 1535.6196, 1535.6337])))
    assert kinds(out).get("flat_loss") == "critical", [f["summary"] for f in out["findings"]]
    [flat] = [f for f in out["findings"] if f["kind"] == "flat_loss"]
    assert "1535.6199 at step 700" in flat["summary"] and "not convergence" in flat["summary"], flat["summary"]
    twin = analyze(capsys, tmp_path, "noisy", lambda r: tensorboard(r, steps, np.array([1535.6, 1551.2, 1520.3])))
    assert "flat_loss" not in kinds(twin), [f["summary"] for f in twin["findings"]]


def test_a_loss_exactly_0_in_both_splits_is_flat_under_the_constant_rules_length(capsys, tmp_path):
    """Two epochs, fewer than a constant loss needs, of training and validation loss exactly 0 beside an accuracy
    of 0: the loss was never computed; the same zeros beside an accuracy of 1 may be a model that fits its data."""
    epochs = 2
    zero = [{"loss": 0.0, "accuracy": 0.0, "val_loss": 0.0, "val_accuracy": 0.0}] * epochs
    out = analyze(capsys, tmp_path, "zero", lambda r: keras_csv(r, zero))
    assert kinds(out).get("flat_loss") == "critical", (out["verdict_reason"], [f["summary"] for f in out["findings"]])
    fit = [{"loss": 0.0, "accuracy": 1.0, "val_loss": 0.0, "val_accuracy": 1.0}] * epochs
    twin = analyze(capsys, tmp_path, "fit", lambda r: keras_csv(r, fit))
    assert "flat_loss" not in kinds(twin), [f["summary"] for f in twin["findings"]]


def late_excerpt(level: float, start: int = 34300, n: int = 16) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`n` records every 100 steps from `start`, within ±0.3% of `level`, under a linearly decaying LR."""
    steps = start + 100 * np.arange(n)
    loss = level * (1 + np.random.default_rng(5).uniform(-0.003, 0.003, n))
    return steps, loss, 4.5e-5 - 5e-8 * np.arange(n)


def test_a_loss_at_ln2_on_every_record_is_flat_in_an_excerpt(capsys, tmp_path):
    """An excerpt from well into training whose every record lies within 0.3% of ln 2 under a decaying LR: a binary
    loss's uniform guess; the same excerpt 5% above ln 2 is no chance level (a held level: plateau's at most)."""
    out = analyze(capsys, tmp_path, "chance", lambda r: tensorboard(r, *late_excerpt(np.log(2))))
    assert kinds(out).get("flat_loss") == "critical", (out["verdict_reason"], [f["summary"] for f in out["findings"]])
    assert "ln 2" in next(f["summary"] for f in out["findings"] if f["kind"] == "flat_loss")
    twin = analyze(capsys, tmp_path, "above", lambda r: tensorboard(r, *late_excerpt(1.05 * np.log(2))))
    assert "flat_loss" not in kinds(twin), [f["summary"] for f in twin["findings"]]


def test_a_level_held_over_an_excerpt_from_well_into_training_is_a_plateau(capsys, tmp_path):
    """14 records within ±0.5% of 1.83 from step 43392 under a constant LR: the fall before the excerpt is not in
    the log, so it is a stall (plateau, a warning), not a loss that never moved; the same records from step 0 are."""
    def write(start: int):
        steps = start + 50 * np.arange(14)
        loss = 1.83 * (1 + np.random.default_rng(7).uniform(-0.005, 0.005, 14))
        return lambda r: tensorboard(r, steps, loss, np.full(14, 1e-4))

    out = analyze(capsys, tmp_path, "excerpt", write(43392))
    assert kinds(out) == {"plateau": "warning"}, [f["summary"] for f in out["findings"]]
    [stall] = out["findings"]
    assert "opens at step 43392" in stall["summary"], stall["summary"]
    whole = analyze(capsys, tmp_path, "whole", write(0))
    assert kinds(whole).get("flat_loss") == "critical", [f["summary"] for f in whole["findings"]]
    assert "plateau" not in kinds(whole), [f["summary"] for f in whole["findings"]]


def lightning_csv(root: Path, train: list[float], val: list[float], per_epoch: int) -> None:
    """Lightning's CSVLogger as `self.log` reaches it: train_loss at every step, val_loss at each epoch's end."""
    pytest.importorskip("lightning", reason="the test extra installs lightning")
    from lightning.pytorch.loggers import CSVLogger

    logger = CSVLogger(str(root))
    for step, loss in enumerate(train):
        logger.log_metrics({"train_loss": loss, "epoch": step // per_epoch}, step=step)
        if (step + 1) % per_epoch == 0:
            logger.log_metrics({"val_loss": val[step // per_epoch], "epoch": step // per_epoch}, step=step)
    logger.save()
    logger.finalize("success")


def test_a_validation_loss_that_does_not_move_beside_a_standing_training_loss_is_flat(capsys, tmp_path):
    """Five epochs of five steps: per-step training losses scattering ±15% around 950 with no trend, and a
    validation loss moving 0.07% over its five evaluations: the model does not move. The same validation loss
    falling 3% an epoch is a model that learns under noisy batches."""
    train = list(950 * (1 + np.random.default_rng(3).uniform(-0.15, 0.15, 25)))
    out = analyze(capsys, tmp_path, "still", lambda r: lightning_csv(
        r, train, [681.578, 681.45, 681.323, 681.195, 681.068], 5))
    assert kinds(out).get("flat_loss") == "critical", (out["verdict_reason"], [f["summary"] for f in out["findings"]])
    assert "681.578 at step 4" in next(f["summary"] for f in out["findings"] if f["kind"] == "flat_loss")
    twin = analyze(capsys, tmp_path, "falls", lambda r: lightning_csv(r, train, [681.6, 661.2, 641.3, 622.1, 603.4], 5))
    assert "flat_loss" not in kinds(twin), [f["summary"] for f in twin["findings"]]


def test_a_validation_loss_identical_over_its_last_evaluations_is_a_plateau(capsys, tmp_path):
    """Twenty epochs whose validation loss falls, then scores 0.062759 ± 2e-6 at each of its last nine: the
    weights stopped changing. The twin keeps falling 0.5% an epoch over those nine."""
    rng = np.random.default_rng(4)
    fall = list(0.0628 + 0.08 * np.exp(-np.arange(11) / 2))
    frozen = fall + list(0.062759 + rng.uniform(-2e-6, 2e-6, 9))
    slow = fall + list(fall[-1] * 0.995 ** np.arange(1, 10))
    loss = list(0.06 + 0.2 * np.exp(-np.arange(20) / 3) * (1 + rng.uniform(-0.02, 0.02, 20)))

    def rows(val):
        return [{"loss": loss[i], "val_loss": val[i]} for i in range(20)]

    out = analyze(capsys, tmp_path, "frozen", lambda r: keras_csv(r, rows(frozen)))
    stall = [f for f in out["findings"] if f["kind"] == "plateau"]
    assert stall and "identical to its fifth digit at its last 9 evaluations" in stall[0]["summary"], \
        [f["summary"] for f in out["findings"]]
    twin = analyze(capsys, tmp_path, "slow", lambda r: keras_csv(r, rows(slow)))
    assert not [f for f in twin["findings"] if "identical" in f["summary"]], [f["summary"] for f in twin["findings"]]
