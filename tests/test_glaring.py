"""Effect size first, at any length: each glaring effect an expert names at a glance, written by the real writers
(a console log printed by a small program, Keras' and Lightning's CSVLogger, TensorBoard's SummaryWriter) at 3 to
300 records, is found with its kind and severity; its healthy twin (same length and writer, a loss that falls with
ordinary noise) gets no finding. A healthy log too short to judge is INCONCLUSIVE and says what would decide."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from forensics.cli import main

LENGTHS = (3, 5, 8, 14, 30, 300)
WRITERS = ("console", "keras", "lightning", "tensorboard")
SECONDS = 0.5  # an ordinary step time


def healthy(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """A loss falling from 2.3 towards 0.3 with 2% multiplicative noise, a validation loss a little above it, a
    cosine LR, memory that holds its level, and step times of 0.5 s with 5% jitter."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) / max(n - 1, 1)
    loss = (0.3 + 2.0 * np.exp(-4 * t)) * (1 + rng.normal(0, 0.02, n))
    val = (0.35 + 2.0 * np.exp(-4 * t)) * (1 + rng.normal(0, 0.01, n))
    return {"loss": loss, "val_loss": val, "lr": 1e-3 * (0.55 + 0.45 * np.cos(np.pi * t)),
            "memory": 2000 + rng.normal(0, 5, n), "step_time": SECONDS * (1 + rng.normal(0, 0.05, n))}


def blow_up(n: int) -> dict[str, np.ndarray]:
    """A loss that falls, then rises by orders of magnitude over its last records (up to 4 of them, ×10⁹ at the
    last), the validation loss blowing up with it."""
    s = healthy(n)
    k = min(4, max(1, n // 2))
    for key in ("loss", "val_loss"):
        s[key][-k:] = s[key][-k - 1] * 10.0 ** (9 * np.arange(1, k + 1) / k)
    return s


def witnessed_rise(n: int) -> dict[str, np.ndarray]:
    """A loss whose last record is ×20 its ordinary level, short of orders of magnitude, the validation loss ending
    on the same ×20: two curves blowing up together."""
    s = healthy(n)
    for key in ("loss", "val_loss"):
        s[key][-1] = 20 * float(np.median(s[key][:-1]))
    return s


def rising(n: int) -> dict[str, np.ndarray]:
    """A loss that rises at every one of its last max(5, n/4) records (×1.5 over them), the validation loss rising
    at each of them too."""
    s = healthy(n)
    k = max(5, n // 4)
    for key in ("loss", "val_loss"):
        base = s[key][-k] if k < n else s[key][0]
        s[key][-k:] = base * np.linspace(1.0, 1.5, k)
    return s


def spike(n: int) -> dict[str, np.ndarray]:
    """One record in the middle ×6 the median of its neighbours, back to the local level at the next one."""
    s = healthy(n)
    i = n // 2
    s["loss"][i] = 6 * float(np.median(np.r_[s["loss"][max(0, i - 3):i], s["loss"][i + 1:i + 4]]))
    return s


def late_rise(n: int) -> dict[str, np.ndarray]:
    """A loss that falls, then rises at each of its last 3 records to ×7 its minimum (the validation loss
    healthy: no second curve to witness it)."""
    s = healthy(n)
    low = float(s["loss"][-4])
    s["loss"][-3:] = low * np.array([4.1, 4.9, 7.0])
    return s


def level_up(n: int) -> dict[str, np.ndarray]:
    """A loss that settles, then sits ×2-×3 above that level for its last third of records to the end (noise
    ±15%, no rise at every record)."""
    s = healthy(n)
    k = max(3, n // 3)
    level = float(np.median(s["loss"][-2 * k:-k]))
    s["loss"][-k:] = level * 2.5 * (1 + np.random.default_rng(2).uniform(-0.15, 0.15, k))
    return s


def constant(value: float):
    def make(n: int) -> dict[str, np.ndarray]:
        s = healthy(n)
        del s["val_loss"]
        s["loss"] = np.full(n, value)
        return s
    make.__name__ = f"constant_{value}"
    return make


def flat_schedule(n: int) -> dict[str, np.ndarray]:
    """A loss that stays within its 1% noise while the LR runs its whole schedule down to 0."""
    s = healthy(n)
    del s["val_loss"]
    s["loss"] = 0.8123 * (1 + np.random.default_rng(1).normal(0, 0.01, n))
    s["lr"] = 1e-3 * np.linspace(1.0, 0.0, n)
    return s


def memory_leak(n: int) -> dict[str, np.ndarray]:
    """Memory in use rising at every record, +8% of its start each."""
    s = healthy(n)
    s["memory"] = 2000 * (1 + 0.08 * np.arange(n)) + np.random.default_rng(2).uniform(0, 1, n)
    return s


def stalls(n: int, seconds: float = SECONDS) -> dict[str, np.ndarray]:
    """Step times of `seconds` with 5% jitter, and max(2, n/10) of them, past the first, ×16 slower."""
    s = healthy(n)
    s["step_time"] = s["step_time"] / SECONDS * seconds
    slow = np.linspace(2, n - 2, max(2, n // 10)).astype(int)
    s["step_time"][slow] = 16 * seconds
    return s


# (effect, the lengths it is defined at, kind, severity). A rise at every record needs 5 records; noise, memory
# that rises at every record and a spread of step times need 5 or more to be told from one odd value (the spread
# needs two slow steps beside an ordinary median, and the first step is start-up: 8).
EFFECTS = [
    (blow_up, LENGTHS, "divergence", "critical"),
    (witnessed_rise, LENGTHS, "divergence", "critical"),
    (constant(1.4267), LENGTHS, "flat_loss", "critical"),
    (constant(0.0), LENGTHS, "flat_loss", "critical"),
    (rising, LENGTHS[1:], "divergence", "critical"),
    (spike, LENGTHS[1:], "loss_spike", "warning"),
    (late_rise, LENGTHS[2:], "divergence", "critical"),
    (level_up, LENGTHS[2:], "divergence", "critical"),
    (flat_schedule, LENGTHS[1:], "flat_loss", "critical"),
    (memory_leak, LENGTHS[1:], "memory_growth", "warning"),
    (stalls, LENGTHS[2:], "throughput_drop", "warning"),
]

# -- the writers ------------------------------------------------------------------------------------------------

PRINTER = r"""
import json, sys
s = json.load(open(sys.argv[1]))
n = len(s["loss"])
for i in range(n):
    parts = [f"Epoch {i + 1}/{n}", f"loss {s['loss'][i]:.4f}"]
    if "val_loss" in s:
        parts.append(f"val_loss {s['val_loss'][i]:.4f}")
    parts.append(f"lr {s['lr'][i]:.3e}")
    parts.append(f"mem {s['memory'][i]:.0f}MB")
    parts.append(f"time {s['step_time'][i]:.3f}s")
    print(" | ".join(parts))
"""


def write_console(root: Path, s: dict[str, np.ndarray]) -> None:
    """What a small training script prints, one line per epoch, captured to train.log."""
    data = root / "series.json"
    data.write_text(json.dumps({k: v.tolist() for k, v in s.items()}))
    with (root / "train.log").open("w") as out:
        subprocess.run([sys.executable, "-c", PRINTER, str(data)], stdout=out, check=True)
    data.unlink()


def _epoch_logs(s: dict[str, np.ndarray], i: int) -> dict[str, float]:
    logs = {"loss": float(s["loss"][i]), "learning_rate": float(s["lr"][i]), "memory_mb": float(s["memory"][i]),
            "epoch_time": float(s["step_time"][i])}
    if "val_loss" in s:
        logs["val_loss"] = float(s["val_loss"][i])
    return logs


def write_keras(root: Path, s: dict[str, np.ndarray]) -> None:
    """Keras' CSVLogger, called as `fit` calls it: a user callback before it adds memory and epoch time."""
    import os

    os.environ.setdefault("KERAS_BACKEND", "torch")
    keras = pytest.importorskip("keras", reason="the test extra installs keras")
    logger = keras.callbacks.CSVLogger(str(root / "training.log"))
    logger.on_train_begin()
    for i in range(len(s["loss"])):
        logger.on_epoch_end(i, _epoch_logs(s, i))
    logger.on_train_end()


def write_lightning(root: Path, s: dict[str, np.ndarray]) -> None:
    """Lightning's CSVLogger, as `self.log(..., on_epoch=True)` reaches it: train and validation rows apart, at the
    step that ends each epoch."""
    pytest.importorskip("lightning", reason="the test extra installs lightning")
    from lightning.pytorch.loggers import CSVLogger

    logger = CSVLogger(str(root))
    per_epoch = 10
    for i in range(len(s["loss"])):
        step = (i + 1) * per_epoch - 1
        logs = _epoch_logs(s, i)
        val = logs.pop("val_loss", None)
        logger.log_metrics({"train_loss": logs["loss"], "lr-Adam": logs["learning_rate"],
                            "memory_mb": logs["memory_mb"], "epoch_time": logs["epoch_time"], "epoch": i}, step=step)
        if val is not None:
            logger.log_metrics({"val_loss": val, "epoch": i}, step=step)
    logger.save()
    logger.finalize("success")


def write_tensorboard(root: Path, s: dict[str, np.ndarray]) -> None:
    """SummaryWriter, every 10 steps, its wall times the step times' running sum."""
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(log_dir=str(root))
    wall = 1.7e9 + np.cumsum(s["step_time"]) * 10
    for i in range(len(s["loss"])):
        step, t = i * 10, float(wall[i])
        w.add_scalar("train/loss", float(s["loss"][i]), global_step=step, walltime=t)
        if "val_loss" in s:
            w.add_scalar("val/loss", float(s["val_loss"][i]), global_step=step, walltime=t)
        w.add_scalar("train/lr", float(s["lr"][i]), global_step=step, walltime=t)
        w.add_scalar("system/memory_allocated_mb", float(s["memory"][i]), global_step=step, walltime=t)
    w.close()


WRITE = {"console": write_console, "keras": write_keras, "lightning": write_lightning, "tensorboard": write_tensorboard}


def analyze(capsys, tmp_path: Path, writer: str, series: dict[str, np.ndarray]) -> dict:
    root = tmp_path / "run"
    root.mkdir()
    WRITE[writer](root, series)
    main(["analyze", str(root), "--db", str(tmp_path / "f.duckdb"), "--json"])
    return json.loads(capsys.readouterr().out)


CASES = [pytest.param(make, n, writer, kind, severity, id=f"{make.__name__}-{n}-{writer}")
         for make, lengths, kind, severity in EFFECTS for n in lengths for writer in WRITERS]


@pytest.mark.slow  # about 200 runs written and analysed
@pytest.mark.parametrize("make, n, writer, kind, severity", CASES)
def test_a_glaring_effect_is_named_at_any_length(capsys, tmp_path, make, n, writer, kind, severity):
    out = analyze(capsys, tmp_path, writer, make(n))
    found = {(f["kind"], f["severity"]) for f in out["findings"]}
    assert (kind, severity) in found, (out["verdict"], out["verdict_reason"], [f["summary"] for f in out["findings"]])
    assert out["verdict"] == ("failed" if severity == "critical" else "suspicious")
    if make.__name__.startswith("constant"):  # it says which: a loss never computed, not one that converged
        [flat] = [f for f in out["findings"] if f["kind"] == "flat_loss"]
        said = flat["summary"]
        assert "exactly" in said and ("not convergence" in said or "nothing was trained" in said), said


@pytest.mark.slow
@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("writer", WRITERS)
def test_the_healthy_twin_gets_no_finding(capsys, tmp_path, n, writer):
    out = analyze(capsys, tmp_path, writer, healthy(n))
    assert out["findings"] == [], [f["summary"] for f in out["findings"]]
    assert out["verdict"] in ("healthy", "inconclusive")
    if out["verdict"] == "inconclusive":  # only for want of points, and then it says what would decide
        assert n < 30 and "what would decide" in out["verdict_reason"], out["verdict_reason"]


@pytest.mark.parametrize("writer", WRITERS)
def test_a_blow_up_is_quoted_to_its_last_record(capsys, tmp_path, writer):
    """The headline quotes the whole effect a user sees: the last value the loss reached and its factor over the
    ordinary level, not the first step of the rise."""
    s = blow_up(8)
    out = analyze(capsys, tmp_path, writer, s)
    [div] = [f for f in out["findings"] if f["kind"] == "divergence"]
    assert f"{s['loss'][-1]:.4g}" in div["summary"] or f"{s['loss'][-1]:.2g}" in div["summary"], div["summary"]


@pytest.mark.parametrize("writer", WRITERS)
def test_step_times_spread_by_milliseconds_are_no_finding(capsys, tmp_path, writer):
    """The same ×16 spread at 10 ms a step loses a fraction of a second in all: no user acts on that."""
    out = analyze(capsys, tmp_path, writer, stalls(14, seconds=0.002))
    assert "throughput_drop" not in {f["kind"] for f in out["findings"]}


def test_a_log_whose_first_launch_is_non_finite_throughout_is_judged_not_crashed(capsys, tmp_path):
    """A launch that printed NaN at every step, then a fresh launch appended to the same log that trains: no finite
    point comes before the first NaN, so every launch's finite part is empty, and every detector still answers."""
    root = tmp_path / "run"
    root.mkdir()
    with (root / "loss_log.txt").open("w") as log:
        for epoch in range(1, 51):
            for step in range(6, 49, 6):
                print(f"Epoch [{epoch}/50], Step [{step}/48], Loss: nan", file=log)
        for epoch in range(1, 6):
            for step in range(6, 37, 6):
                print(f"Epoch [{epoch}/50], Step [{step}/37], Loss: {0.5 / epoch + 0.2:.4f}", file=log)
        for epoch in range(1, 15):
            print(f"Epoch [{epoch}/50], Step [6/7], Loss: {0.9 / epoch + 0.14:.4f}", file=log)
    main(["analyze", str(root), "--db", str(tmp_path / "f.duckdb"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert "nan_loss" in {f["kind"] for f in out["findings"]}


HF_PRINTER = r"""
import json, sys
from transformers import TrainingArguments
from transformers.trainer_callback import ProgressCallback, TrainerControl, TrainerState

losses = json.load(open(sys.argv[1]))
state = TrainerState(max_steps=10 * len(losses), is_world_process_zero=True)
args, control, bar = TrainingArguments(output_dir=sys.argv[2], report_to=[]), TrainerControl(), ProgressCallback()
bar.on_train_begin(args, state, control)
for i, loss in enumerate(losses):  # what Trainer.log hands its callbacks every logging_steps=10
    state.global_step, state.epoch = 10 * (i + 1), (i + 1) / len(losses)
    bar.on_log(args, state, control, logs={"loss": round(loss, 4), "grad_norm": 1.0, "learning_rate": 5e-5,
                                           "epoch": round(state.epoch, 2)})
bar.on_train_end(args, state, control)
"""


def hf_console(tmp_path: Path, losses: list[float]) -> Path:
    """The dicts HF Trainer's ProgressCallback prints, captured to train.log as a user pastes them."""
    pytest.importorskip("transformers", reason="the test extra installs transformers")
    root = tmp_path / "run"
    root.mkdir()
    data = tmp_path / "losses.json"
    data.write_text(json.dumps(losses))
    with (root / "train.log").open("w") as out:
        subprocess.run([sys.executable, "-c", HF_PRINTER, str(data), str(tmp_path / "out")], stdout=out,
                       stderr=subprocess.STDOUT, check=True)
    return root


@pytest.mark.parametrize("losses, kind, severity", [
    ([2.10, 1.85, 1.70, 10.2, 1.62, 1.55], "loss_spike", "warning"),  # one record ×6 its neighbours, back next
    ([15.5, 6.2, 3.1, 2.0, 1.43, 5.82, 7.05, 10.03], "divergence", "critical"),  # ×7 the minimum, rising at each
    ([0.9, 0.6, 0.52, 0.45, 0.41, 0.58, 1.05, 1.3, 1.12, 1.36], "divergence", "critical"),  # ×2-×3 and stays
    ([2.10, 1.85, 1.70, 1.66, 1.62, 1.55], None, None),  # the healthy twin
    ([2.10, 1.85, 1.70, 3.9, 1.62, 1.55], None, None),  # ×2.3: a bump, not glaring
])
def test_short_hf_prints_name_what_glares(capsys, tmp_path, losses, kind, severity):
    """A handful of HF Trainer log dicts: a glaring spike or late rise is named, not 'too short to judge'."""
    root = hf_console(tmp_path, losses)
    main(["analyze", str(root), "--db", str(tmp_path / "f.duckdb"), "--json"])
    out = json.loads(capsys.readouterr().out)
    found = {(f["kind"], f["severity"]) for f in out["findings"]}
    if kind is None:
        assert not found, [f["summary"] for f in out["findings"]]
    else:
        assert (kind, severity) in found, (out["verdict_reason"], [f["summary"] for f in out["findings"]])


def noisy(n: int, seed: int, at: int | None = None) -> dict[str, np.ndarray]:
    """Per-epoch losses with ±40% noise around a slowly falling level; with `at`, that record ×8 the median of its
    3 neighbours on each side, back to the level at the next one."""
    s = healthy(n, seed)
    del s["val_loss"]
    rng = np.random.default_rng(seed)
    s["loss"] = (1.2 - 0.4 * np.arange(n) / (n - 1)) * (1 + rng.uniform(-0.4, 0.4, n))
    if at is not None:
        s["loss"][at] = 8 * float(np.median(np.r_[s["loss"][at - 3:at], s["loss"][at + 1:at + 4]]))
    return s


@pytest.mark.parametrize("writer", ["console", "tensorboard"])
@pytest.mark.parametrize("seed, at", [(1, 11), (27, 37), (0, 8)])  # the first two escape the trailing window
def test_a_glaring_spike_in_wide_noise_is_named_and_the_noise_is_not(capsys, tmp_path, writer, seed, at):
    """48 epochs swinging ±40%: one record ×8 its neighbours is a spike wherever it falls (early, where the
    trailing window is short, too); the same noise without it has none."""
    out = analyze(capsys, tmp_path, writer, noisy(48, seed, at))
    spikes = [f for f in out["findings"] if f["kind"] == "loss_spike"]
    assert [f["step"] for f in spikes] == [at * (10 if writer == "tensorboard" else 1)], \
        [f["summary"] for f in out["findings"]]
    (tmp_path / "run").rename(tmp_path / "spiked")
    (tmp_path / "f.duckdb").unlink()
    twin = analyze(capsys, tmp_path, writer, noisy(48, seed))
    assert not [f for f in twin["findings"] if f["kind"] == "loss_spike"], [f["summary"] for f in twin["findings"]]


def orders_spikes(n: int, twin: bool = False) -> dict[str, np.ndarray]:
    """A loss around 0.08 whose first record and one in the middle are ×10¹⁶ (a one-step fp blow-up printed, then
    back at once); the twin, a loss whose first record is ×10⁴ its second (a large initial loss that falls at once)
    and no later jump."""
    s = healthy(n)
    del s["val_loss"]
    s["loss"] = 0.08 * (1 + np.random.default_rng(3).uniform(-0.3, 0.3, n))
    s["loss"][0] = 7e15 if not twin else 800.0
    if not twin:
        s["loss"][n // 2] = 3e15
    return s


@pytest.mark.parametrize("writer", ["console", "tensorboard"])
@pytest.mark.parametrize("n", [5, 7])
def test_a_jump_by_orders_of_magnitude_is_a_spike_at_any_length(capsys, tmp_path, writer, n):
    """Under the statistical rule's points, beside another such jump that the heavy-tail guard would read as the
    log's own noise: a record three orders of magnitude above both its neighbours is named; a loss that only falls
    from a large first record is not."""
    out = analyze(capsys, tmp_path, writer, orders_spikes(n))
    spikes = [f for f in out["findings"] if f["kind"] == "loss_spike"]
    assert [f["step"] for f in spikes] == [(n // 2) * (10 if writer == "tensorboard" else 1)], \
        [f["summary"] for f in out["findings"]]
    (tmp_path / "run").rename(tmp_path / "spiked")
    (tmp_path / "f.duckdb").unlink()
    twin = analyze(capsys, tmp_path, writer, orders_spikes(n, twin=True))
    assert not [f for f in twin["findings"] if f["kind"] == "loss_spike"], [f["summary"] for f in twin["findings"]]


def zeroed(n: int, twin: bool = False) -> dict[str, np.ndarray]:
    """A loss of 0.23 at its first record and exactly 0 from the next to the end (an emptied loss); the twin, one
    that decays ×10 a record through the printer's last digits before it prints 0."""
    s = healthy(n)
    del s["val_loss"]
    s["loss"] = np.zeros(n)
    if twin:
        s["loss"][:5] = 0.23 * 10.0 ** -np.arange(5)
    else:
        s["loss"][0] = 0.23
    return s


@pytest.mark.parametrize("writer", ["console", "keras"])
def test_a_loss_that_drops_to_exactly_0_in_one_record_is_flat(capsys, tmp_path, writer):
    out = analyze(capsys, tmp_path, writer, zeroed(13))
    flat = [f for f in out["findings"] if f["kind"] == "flat_loss"]
    assert [f["severity"] for f in flat] == ["critical"], [f["summary"] for f in out["findings"]]
    assert "fell to it in one record from 0.23" in flat[0]["summary"], flat[0]["summary"]
    assert "non-finite and the logger dropped them" in flat[0]["summary"]  # the other reading: a filtered NaN
    (tmp_path / "run").rename(tmp_path / "zeroed")
    (tmp_path / "f.duckdb").unlink()
    twin = analyze(capsys, tmp_path, writer, zeroed(13, twin=True))
    assert not [f for f in twin["findings"] if f["kind"] == "flat_loss"], [f["summary"] for f in twin["findings"]]
