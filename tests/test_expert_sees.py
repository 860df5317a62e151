"""What an expert sees at a glance, in files the real tools write (Lightning's CSVLogger, SummaryWriter, printed
logs): a held-out pass named by a verb, a validation loss frozen beside a training loss that only scatters, an agent
judged by its reward, a critic that grows while the reward stands, a rise from records that hold no level, an inner
epoch counter, a validation pass that overflows. Each beside its twin, which must not be named."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from forensics.cli import main


def analyze(capsys, root: Path, db: Path) -> dict:
    main(["analyze", str(root), "--db", str(db), "--json"])
    return json.loads(capsys.readouterr().out)


def console(root: Path, lines: list[str]) -> None:
    (root / "train.log").write_text("\n".join(lines) + "\n")


def test_an_epoch_evaluated_with_a_loss_is_its_validation_loss(capsys, tmp_path):
    """`Epoch N trained with loss: X` and `Epoch N evaluated with loss: Y`: the second is the held-out loss, judged
    as validation (here rising from its minimum at epoch 1 while training falls), not a second training loss."""
    root = tmp_path / "run"
    root.mkdir()
    train = 0.02 * 0.6 ** np.arange(12)
    val = np.r_[3.4e-4, 2.4e-4, 2.6e-4 * 1.12 ** np.arange(10)]
    lines = []
    for i in range(12):
        lines.append(f"Epoch {i} trained with loss: {train[i]!r}. The running time is 4073.88.")
        lines.append(f"Epoch {i} evaluated with loss: {val[i]!r}, dice score: 1.1e-05. The running time is 713.2.")
    (root / "train.out").write_text("\n".join(lines) + "\n")
    out = analyze(capsys, root, tmp_path / "f.duckdb")
    series = {f["series"] for f in out["findings"]}
    assert "evaluated with loss" not in {f["series"] for f in out["findings"] if f["kind"] in ("plateau", "flat_loss")}
    assert "overfitting" in {f["kind"] for f in out["findings"]}, ([f["summary"] for f in out["findings"]], series)


def judged(capsys, tmp_path: Path, write, kind: str) -> tuple[dict, list[dict]]:
    """Write a run with `write(root)`, analyse it, and return the output with its findings of `kind`."""
    root = tmp_path / "run"
    root.mkdir()
    write(root)
    out = analyze(capsys, root, tmp_path / "f.duckdb")
    return out, [f for f in out["findings"] if f["kind"] == kind]


def lightning_run(root: Path, train: np.ndarray, val: np.ndarray) -> None:
    """Lightning's CSVLogger as `self.log(on_epoch=True)` reaches it: a train row and a val row per epoch."""
    pytest.importorskip("lightning", reason="the test extra installs lightning")
    from lightning.pytorch.loggers import CSVLogger

    logger = CSVLogger(str(root))
    for i, (t, v) in enumerate(zip(train, val)):
        step = (i + 1) * 42 - 1
        logger.log_metrics({"train_loss": float(t), "epoch": i}, step=step)
        logger.log_metrics({"val_loss": float(v), "epoch": i}, step=step)
    logger.save()
    logger.finalize("success")


@pytest.mark.parametrize("frozen", [True, False])
def test_a_validation_loss_frozen_beside_a_scattering_training_loss_is_flat(capsys, tmp_path, frozen):
    """MSE on unscaled targets (~1e12): the batches scatter ±40% about a 25% drift no noise test can call a fall,
    the validation loss moves 0.01% in 60 epochs.
    Its twin's validation falls 30%: the model moved."""
    rng = np.random.default_rng(3)
    n = 60
    train = 1.3e12 * (1 - 0.25 * np.arange(n) / (n - 1)) * (1 + rng.uniform(-0.4, 0.4, n))  # a drift under its noise
    val = 1.2533e12 * (1 - (1e-4 if frozen else 0.3) * np.arange(n) / (n - 1))
    out, flat = judged(capsys, tmp_path, lambda root: lightning_run(root, train, val), "flat_loss")
    if not frozen:
        assert flat == [], [f["summary"] for f in flat]
        return
    assert [f["severity"] for f in flat] == ["critical"], [f["summary"] for f in out["findings"]]
    assert flat[0]["series"] == "val_loss"
    assert "scatters, never falling beyond its noise" in flat[0]["summary"], flat[0]["summary"]


REWARDS = r"""
import sys
import numpy as np
rng = np.random.default_rng(0)
learns = sys.argv[1] == "learns"
for episode in range(3000):
    skill = episode / 3000 if learns else 0.0
    predator = rng.gamma(2.0, 300.0) * (1 + 3 * skill)
    prey = rng.gamma(2.0, 200.0)
    print(f"Episode {episode}, Predator Reward: {predator:.0f}, Prey Reward: {prey:.0f}, "
          f"Total Reward: {predator + prey:.0f}")
"""


@pytest.mark.parametrize("learns", [False, True])
def test_an_agent_that_prints_only_its_reward_is_judged_by_it(capsys, tmp_path, learns):
    """A tabular agent's episode rewards, no loss printed: over 3,000 episodes a reward that does not rise is flat
    (a trend test calls any drift significant there; the gain is a sliver of the episodes' spread); its twin's
    reward grows ×4 and is no finding. The verdict says the run was judged by its reward."""
    root = tmp_path / "run"
    root.mkdir()
    with (root / "train_log.txt").open("w") as out:
        subprocess.run([sys.executable, "-c", REWARDS, "learns" if learns else "flat"], stdout=out, check=True)
    out = analyze(capsys, root, tmp_path / "f.duckdb")
    flat = [f for f in out["findings"] if f["kind"] == "flat_loss"]
    assert "logs its reward" in out["verdict_reason"] or "logs no loss" in out["verdict_reason"], out["verdict_reason"]
    if learns:
        assert flat == [], [f["summary"] for f in flat]
    else:
        assert [f["severity"] for f in flat] == ["warning"], [f["summary"] for f in out["findings"]]
        assert "the agent is not learning" in flat[0]["summary"]


@pytest.mark.parametrize("reward_rises", [False, True])
def test_a_critic_that_grows_while_the_reward_stands_diverges(capsys, tmp_path, reward_rises):
    """An agent's SummaryWriter: the value loss grows ×8 over 60 updates. With the reward standing still it is a
    diverging critic (the returns it regresses on did not grow), no reward stall on top; with the reward rising ×5 the
    growing value loss follows the returns and is no finding."""
    from torch.utils.tensorboard import SummaryWriter

    rng = np.random.default_rng(5)
    n = 60
    root = tmp_path / "run"
    w = SummaryWriter(log_dir=str(root))
    for i in range(n):
        step = (i + 1) * 2048
        reward = -100.0 * (1 - 0.8 * i / n if reward_rises else 1.0) * (1 + rng.normal(0, 0.05))
        w.add_scalar("rollout/ep_rew_mean", reward, step)
        w.add_scalar("train/value_loss", 600.0 * 8 ** (i / (n - 1)) * (1 + rng.normal(0, 0.1)), step)
        w.add_scalar("train/policy_gradient_loss", rng.normal(0, 0.01), step)
    w.close()
    out = analyze(capsys, root, tmp_path / "f.duckdb")
    kinds = {f["kind"] for f in out["findings"]}
    if reward_rises:
        assert not kinds & {"divergence", "flat_loss"}, [f["summary"] for f in out["findings"]]
        return
    [div] = [f for f in out["findings"] if f["kind"] == "divergence"]
    assert div["series"] == "train/value_loss" and "critic diverges" in div["summary"], div["summary"]
    assert "flat_loss" not in kinds, [f["summary"] for f in out["findings"]]


@pytest.mark.parametrize("tight", [False, True])
def test_a_rise_from_records_that_hold_no_level_is_no_divergence(capsys, tmp_path, tight):
    """A loss that falls from 0.6, then prints ten records near 0 spanning ×20 of their median (an fp32 cross-entropy
    underflowing on easy batches), then six at 0.09-0.12, still far under where it began: no level to rise from, no
    divergence. Its twin's ten records hold a level (±5%): the rise ×900 over it, held, is one."""
    rng = np.random.default_rng(2)
    fall = list(0.6 * 0.5 ** np.arange(8))
    near_zero = list(1e-4 * (1 + rng.uniform(-0.05, 0.05, 10)) if tight else
                     [2e-5, 3e-4, 1e-4, 2e-3, 5e-5, 1.9e-4, 4e-5, 1.5e-3, 9e-5, 2e-4])
    tail = [0.09, 0.11, 0.1, 0.12, 0.095, 0.105]
    losses = fall + near_zero + tail
    root = tmp_path / "run"
    root.mkdir()
    console(root, [f"step {10 * (i + 1)} loss {x:.6g}" for i, x in enumerate(losses)])
    out = analyze(capsys, root, tmp_path / "f.duckdb")
    div = [f for f in out["findings"] if f["kind"] == "divergence"]
    if tight:
        assert div, [f["summary"] for f in out["findings"]]
    else:
        assert div == [], [f["summary"] for f in div]


@pytest.mark.parametrize("updates", [30, 2])
def test_an_inner_epoch_counter_is_no_resume(capsys, tmp_path, updates):
    """PPO's optimisation epochs over each rollout, `Epoch 1..10` printed thirty times, the critic loss falling 30% in
    each pass and the next opening where it closed: one training, no resume. Two passes of 40 epochs, the second
    opening where the first closed, are a resume."""
    rng = np.random.default_rng(4)
    lines, level = [], 1.0
    per = 10 if updates > 2 else 40
    for u in range(updates):
        for e in range(1, per + 1):
            critic = level * (1 - 0.3 * (e - 1) / (per - 1)) if updates > 2 else level * 0.98 ** (u * per + e)
            lines.append(f"Epoch {e}: Actor loss: {rng.normal(0, 0.01):.4f}, Critic loss: "
                         f"{critic * (1 + rng.normal(0, 0.01)):.4g}")
        level *= 0.7 * 1.08
        if updates > 2:
            lines.append(f"Episode {u + 1} Reward: {rng.normal(0, 50):.2f}")
    out, resumed = judged(capsys, tmp_path, lambda root: console(root, lines), "resumed_run")
    if updates > 2:
        assert resumed == [], [f["summary"] for f in resumed]
    else:
        assert resumed, [f["summary"] for f in out["findings"]]



@pytest.mark.parametrize("overflows", [True, False])
def test_a_validation_loss_non_finite_between_finite_ones_is_named(capsys, tmp_path, overflows):
    """A detector fine-tune under AMP: the validation pass overflows at its first evaluations (inf, NaN), then reads
    finite while training is finite throughout. Named at any length, a warning; the twin with every evaluation
    finite gets no such finding."""
    n = 20
    train = 6.3 * 0.95 ** np.arange(n)
    val = 6.0 * 0.95 ** np.arange(n)
    if overflows:
        val[:3] = [np.inf, np.nan, np.inf]
    out, noisy = judged(capsys, tmp_path, lambda root: lightning_run(root, train, val), "val_noise")
    if not overflows:
        assert noisy == [], [f["summary"] for f in noisy]
        return
    assert [f["severity"] for f in noisy] == ["warning"], [f["summary"] for f in out["findings"]]
    assert "non-finite at 3 of its 20 evaluations" in noisy[0]["summary"], noisy[0]["summary"]


@pytest.mark.parametrize("chaotic", [True, False])
def test_a_cluster_of_glaring_validation_jumps_is_named(capsys, tmp_path, chaotic):
    """A detector trained from scratch: its validation loss reads ×5 to ×25 its level at several early evaluations,
    side by side (no single neighbour to measure each against), then settles and falls with training. Named (a
    warning); its twin without the jumps is not."""
    n = 60
    train = 4.0 * 0.97 ** np.arange(n)
    val = 4.2 * 0.97 ** np.arange(n)
    if chaotic:
        val[5:12] = [9.0, 19.3, 65.2, 22.8, 5.1, 28.5, 113.5]
    out, noisy = judged(capsys, tmp_path, lambda root: lightning_run(root, train, val), "val_noise")
    if not chaotic:
        assert noisy == [], [f["summary"] for f in noisy]
        return
    assert [f["severity"] for f in noisy] == ["warning"], [f["summary"] for f in out["findings"]]
    assert "× its median" in noisy[0]["summary"] and "113.5" in noisy[0]["summary"], noisy[0]["summary"]


@pytest.mark.parametrize("back", [True, False])
def test_a_counter_column_named_global_iter_is_the_step(capsys, tmp_path, back):
    """A self-play loop's metrics CSV (`csv.DictWriter`) counts its iterations in `global_iter`: that column is the
    step, so a relaunch that goes back from iteration 22 to 17 is a resume. Its twin counts on to 28: none."""
    import csv

    rng = np.random.default_rng(5)
    iters = list(range(1, 23)) + (list(range(17, 23)) if back else list(range(23, 29)))

    def write(root: Path) -> None:
        (root / "logs").mkdir()
        with open(root / "logs" / "metrics.csv", "w", newline="") as f:
            w = csv.DictWriter(f, ["timestamp", "global_iter", "train_loss", "policy_loss", "value_loss", "lr_used"])
            w.writeheader()
            for k, it in enumerate(iters):
                loss = 1.6 - 0.004 * k + rng.normal(0, 0.03)
                w.writerow({"timestamp": f"2026-04-{25 + k // 20:02d}T{k % 20:02d}:09:11", "global_iter": it,
                            "train_loss": f"{loss:.4f}", "policy_loss": f"{loss - 0.13:.4f}",
                            "value_loss": "0.1282", "lr_used": "0.0003"})

    out, resumed = judged(capsys, tmp_path, write, "resumed_run")
    if not back:
        assert resumed == [], [f["summary"] for f in resumed]
        return
    assert resumed and "from 22 to 17" in resumed[0]["summary"], [f["summary"] for f in out["findings"]]


# YOLOv5's results.csv row, as its `print_results`/callbacks write it: `'%20.5g,' * n`, the header `'%20s,' * n`
YOLO_COLUMNS = ["epoch", "train/box_loss", "train/obj_loss", "train/cls_loss", "metrics/mAP_0.5", "val/box_loss",
                "x/lr0"]


@pytest.mark.parametrize("overlap", [True, False])
def test_a_resume_in_event_files_beside_their_results_csv(capsys, tmp_path, overlap):
    """A detector trained in two sessions on two hosts: two SummaryWriters, the second starting again at epoch 20
    after the first reached 30, a day later; results.csv beside them holds the same columns under the same names.
    The event files are the series, and their step going back is a resume. Its twin's second session goes on at 31."""
    from torch.utils.tensorboard import SummaryWriter

    def write(root: Path) -> None:
        rows = []
        for session, epochs in enumerate([range(0, 31), range(20 if overlap else 31, 46)]):
            w = SummaryWriter(log_dir=str(root), filename_suffix=f".host{session}")
            for e in epochs:
                box = 3.2 * 0.97 ** e * (1.01 if session else 1.0)
                vals = [box, 0.8 * box, 0.5 * box, min(0.6, 0.02 * e), 1.1 * box, 0.01 * 0.98 ** e]
                for name, v in zip(YOLO_COLUMNS[1:], vals):
                    w.add_scalar(name, v, e, walltime=1.72e9 + session * 86400 + e * 150)
                rows.append([e] + vals)
            w.close()
        n = len(YOLO_COLUMNS)
        text = ("%20s," * n % tuple(YOLO_COLUMNS)).rstrip(",") + "\n"
        text += "".join(("%20.5g," * n % tuple(r)).rstrip(",") + "\n" for r in rows)
        (root / "results.csv").write_text(text)

    out, resumed = judged(capsys, tmp_path, write, "resumed_run")
    if not overlap:
        assert not [f for f in resumed if "go back" in f["summary"]], [f["summary"] for f in resumed]
        return
    assert any("steps go back from 30 to 20" in f["summary"] for f in resumed), [f["summary"] for f in out["findings"]]


@pytest.mark.parametrize("carried", [True, False])
def test_a_staged_fit_of_three_epochs_carried_on_is_a_resume(capsys, tmp_path, carried):
    """Keras' CSVLogger(append=True) over staged `fit` calls: three epochs from the untrained loss (71 -> 16), then a
    second `fit` that opens at 10, under where the first closed: the weights went on. Short sessions are read at
    as many records as they hold. Its twin's second session opens back at the untrained level: a fresh start."""
    import os

    os.environ.setdefault("KERAS_BACKEND", "torch")
    keras = pytest.importorskip("keras", reason="the test extra installs keras")
    sessions = [[71.23, 33.14, 15.99], [10.32 if carried else 70.4, 7.08, 4.73, 3.81, 3.58]]

    def write(root: Path) -> None:
        for losses in sessions:
            logger = keras.callbacks.CSVLogger(str(root / "training.log"), append=True)
            logger.on_train_begin()
            for e, loss in enumerate(losses):
                logger.on_epoch_end(e, {"loss": loss, "val_loss": 1.05 * loss})
            logger.on_train_end()

    out, resumed = judged(capsys, tmp_path, write, "resumed_run")
    if not carried:
        assert resumed == [], [f["summary"] for f in resumed]
        return
    assert resumed and "resumed from its saved weights" in resumed[0]["summary"], [f["summary"] for f in out["findings"]]


# fastai v1's `fit` table as a page shows it (its cells apart by single blanks, each row's elapsed time after it)
FASTAI_V1 = """Total time: 06:39
epoch train_loss valid_loss error_rate
""" + "".join(f"{e} {t:.6f} {v:.6f} {r:.6f} (00:{9 + e % 4:02d})\n" for e, t, v, r in zip(
    range(1, 20),
    [1.513, 1.290, 1.186, 1.117, 1.023, 0.951, 0.916, 0.839, 0.750, 0.679, 0.615, 0.559, 0.518, 0.476, 0.437,
     0.457, 0.421, 0.396, 0.373],
    [1.042, 0.995, 0.936, 0.838, 0.735, 0.627, 0.559, 0.504, 0.433, 0.368, 0.327, 0.299, 0.267, 0.258, 0.2273,
     0.2366, 0.2402, 0.2555, 0.2635],
    np.linspace(0.5, 0.08, 19)))


@pytest.mark.parametrize("turns", [True, False])
def test_four_rises_in_a_row_after_the_minimum_are_overfitting_at_any_length(capsys, tmp_path, turns):
    """fastai v1's table, read from its single-blank cells: validation bottoms at epoch 15 and rises at each of the
    four epochs after it (+16%) while training falls to its lowest, one uptick on the way: overfitting, quoted at the
    epochs the table prints. Its twin's validation keeps falling."""
    text = FASTAI_V1 if turns else FASTAI_V1.replace("0.2366", "0.2206").replace("0.2402", "0.2181").replace(
        "0.2555", "0.2150").replace("0.2635", "0.2102")
    out, over = judged(capsys, tmp_path, lambda root: (root / "log.txt").write_text(text), "overfitting")
    if not turns:
        assert over == [], [f["summary"] for f in over]
        return
    assert over, [f["summary"] for f in out["findings"]]
    assert "0.2273 at epoch 15" in over[0]["summary"] and "0.2635 at epoch 19" in over[0]["summary"], over[0]["summary"]


@pytest.mark.parametrize("spiked", [True, False])
def test_a_spike_in_a_loss_that_takes_both_signs_is_named(capsys, tmp_path, spiked):
    """A loss of several terms that goes below 0 as it trains (1.6, -0.18, ...): one epoch reads 54.6, a hundred
    times the log's magnitude, and the next is back. No ratio to a neighbour near 0 can size it; the log's median
    magnitude does. Its twin has no such epoch."""
    loss = list(np.r_[1.598, -0.181, 54.559 if spiked else -0.05, 0.085, np.linspace(-0.03, -0.42, 46)])
    lines = [f"train/Loss: {v!r}, train/x_mse: 0.99\n[Epoch {e}]: Valid Loss: {-0.02 - 0.005 * e:.3f}"
             for e, v in enumerate(loss)]
    out, spikes = judged(capsys, tmp_path, lambda root: console(root, lines), "loss_spike")
    if not spiked:
        assert spikes == [], [f["summary"] for f in spikes]
        return
    assert spikes and "54.56" in spikes[0]["summary"] and "median magnitude" in spikes[0]["summary"], \
        [f["summary"] for f in out["findings"]]


@pytest.mark.parametrize("rebuilt", [True, False])
def test_a_new_writer_going_on_with_its_lr_back_up_is_a_resume(capsys, tmp_path, rebuilt):
    """A detector extended past its plan: a second SummaryWriter goes on at epoch 25 right after the first stopped at
    24 (no pause to speak of), its LR back at 0.01 from 0.00089: the scheduler was built anew, so the run was
    resumed by a new process. Its twin's LR goes on decaying across the files: one run, nothing to say."""
    from torch.utils.tensorboard import SummaryWriter

    def write(root: Path) -> None:
        lr = np.r_[np.linspace(0.0092, 0.00089, 25), np.linspace(0.0038, 0.0006, 15)]
        if rebuilt:
            lr[25] = 0.01  # the warmup's LR of a scheduler built anew, at the new process's first epoch
        else:
            lr[25:] = np.linspace(0.00085, 0.0006, 15)
        for session, epochs in enumerate([range(0, 25), range(25, 40)]):
            w = SummaryWriter(log_dir=str(root), filename_suffix=f".s{session}")
            for e in epochs:
                w.add_scalar("train/box_loss", 0.11 * 0.98 ** e, e, walltime=1.7473e9 + e * 3070 + session * 800)
                w.add_scalar("x/lr0", float(lr[e]), e, walltime=1.7473e9 + e * 3070 + session * 800)
            w.close()

    out, resumed = judged(capsys, tmp_path, write, "resumed_run")
    if not rebuilt:
        assert resumed == [], [f["summary"] for f in resumed]
        return
    assert resumed and "its LR 0.01" in resumed[0]["summary"], [f["summary"] for f in out["findings"]]


@pytest.mark.parametrize("height", [17.0, 2.5])
def test_a_loss_knocked_far_above_its_level_that_relearns_is_a_spike(capsys, tmp_path, height):
    """A representation loss written by `csv.DictWriter`, one row per update, no validation: from a level of about
    0.155 it jumps over five rows to ×17 its level, higher than it began, and takes some thirty rows to learn its way
    back. Too long an excursion for a spike that recovers within a few points, too short and complete for a
    divergence: the size alone names it. Its twin's excursion reaches ×2.5: an unstable stretch no user acts on
    without a second curve."""
    import csv

    rng = np.random.default_rng(5)
    y = np.r_[np.geomspace(2.37, 0.16, 80), 0.155 * (1 + 0.06 * rng.standard_normal(120))]
    rise = 0.155 * np.geomspace(1.1, height, 5)
    fall = 0.155 * np.geomspace(height * 0.45, 1.15, 30)
    y = np.r_[y, rise, fall, 0.15 * (1 + 0.06 * rng.standard_normal(200))]

    def write(root: Path) -> None:
        with open(root / "log.csv", "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=["MVMAE_Loss"])
            w.writeheader()
            w.writerows({"MVMAE_Loss": float(v)} for v in y)

    out, spikes = judged(capsys, tmp_path, write, "loss_spike")
    if height < 5:
        assert spikes == [], [f["summary"] for f in spikes]
        return
    assert spikes and "recovered" in spikes[0]["summary"], [f["summary"] for f in out["findings"]]
    peak = int(np.argmax(y))
    assert f"{y[peak]:.4g} at step {peak}" in spikes[0]["summary"], spikes[0]["summary"]


@pytest.mark.parametrize("course", ["collapses", "falls", "holds", "stands"])
def test_an_agent_whose_reward_gets_worse_diverges(capsys, tmp_path, course):
    """An agent's SummaryWriter, as Stable-Baselines3 writes it. A reward that climbs from random play (0.7) to about
    100 when exploration ends and then falls back to 0-5, or one that falls on a trend from -1.4e5 to -1.9e5, is an
    agent getting worse: a collapse, never "not learning". Its twins: a reward that climbs and holds (healthy), and
    one that stands where it began (the agent is not learning: flat_loss, no divergence)."""
    from torch.utils.tensorboard import SummaryWriter

    rng = np.random.default_rng(11)
    n = 120
    t = np.arange(n) / (n - 1)
    reward = {"collapses": np.where(t < 0.5, 0.7 + 200 * np.clip(t - 0.25, 0, None), 0.7 + 50 * np.exp(-(t - 0.5) * 30)),
              "falls": -1.4e5 - 0.5e5 * t,
              "holds": 0.7 + 100 * np.clip(t * 2, 0, 1),
              "stands": np.full(n, -5.8)}[course] * (1 + rng.normal(0, 0.03, n)) + rng.normal(0, 0.2, n)
    root = tmp_path / "run"
    w = SummaryWriter(log_dir=str(root))
    for i in range(n):
        step = (i + 1) * 512
        w.add_scalar("rollout/ep_rew_mean", float(reward[i]), step)
        w.add_scalar("train/loss", float(abs(rng.normal(1.0, 0.3))), step)
        w.add_scalar("train/exploration_rate", max(0.05, 1 - 2 * i / n), step)
    w.close()
    out = analyze(capsys, root, tmp_path / "f.duckdb")
    div = [f for f in out["findings"] if f["kind"] == "divergence"]
    flat = [f for f in out["findings"] if f["kind"] == "flat_loss"]
    if course in ("holds", "stands"):
        assert div == [], [f["summary"] for f in div]
        assert bool(flat) == (course == "stands"), [f["summary"] for f in out["findings"]]
        return
    assert flat == [], [f["summary"] for f in flat]
    assert div and div[0]["series"] == "rollout/ep_rew_mean", [f["summary"] for f in out["findings"]]
    assert ("learned and lost it" if course == "collapses" else "gets worse as it trains") in div[0]["summary"]


@pytest.mark.parametrize("bounded", [False, True])
def test_a_loss_that_falls_without_bound_below_zero_diverges(capsys, tmp_path, bounded):
    """A loss written by Lightning's CSVLogger that falls on a straight line from a few hundred below 0 to tens of
    thousands below, as fast over its last third as over the whole run: an objective unbounded below (a learned
    variance collapsing to 0, a sign flipped), not a model that learns. Its twin falls from -5 towards -15 and levels
    off, as a bounded negative loss (a negative SI-SDR, a log-likelihood) does."""
    pytest.importorskip("lightning", reason="the test extra installs lightning")
    from lightning.pytorch.loggers import CSVLogger

    rng = np.random.default_rng(2)
    n = 150
    steps = 9 + 10 * np.arange(n)
    loss = (-15 + 10 * np.exp(-np.arange(n) / 25) if bounded else -400 - 30.0 * (steps - 9))
    loss = loss * (1 + rng.normal(0, 0.01, n))
    root = tmp_path / "run"
    logger = CSVLogger(str(root))
    for s, v in zip(steps, loss):
        logger.log_metrics({"train_loss": float(v), "epoch": int(s // 100)}, step=int(s))
    logger.save()
    logger.finalize("success")
    out = analyze(capsys, root, tmp_path / "f.duckdb")
    div = [f for f in out["findings"] if f["kind"] == "divergence"]
    if bounded:
        assert div == [], [f["summary"] for f in div]
        return
    assert div and "without bound below 0" in div[0]["summary"], [f["summary"] for f in out["findings"]]
    assert f"{loss[0]:.4g} at step 9" in div[0]["summary"], div[0]["summary"]


@pytest.mark.parametrize("folds", [1, 4])
def test_each_fold_of_a_cross_validation_is_a_training_of_its_own(capsys, tmp_path, folds):
    """A k-fold cross-validation printed to one log by a real torch loop, each fold in two phases whose epoch counts
    start again (`[Fold k] Head E1/4: train_loss=... val_loss=...`, then `[Fold k] Finetune E1/8: ...`): every fold
    trains a fresh model, so its first epoch's mean loss stands far above where the fold before ended. Only the fold
    counter tells; that opening is no loss spike and no divergence, and a healthy cross-validation draws no
    finding. Its twin prints one fold only."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    x = torch.randn(400, 8)
    y = x @ torch.randn(8, 1) * 30 + 100 + torch.randn(400, 1)
    parts = torch.arange(400) % 4
    lines = []
    for k in range(folds):
        body, head = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU()), torch.nn.Linear(16, 1)
        train, val = parts != k, parts == k
        lines.append(f"=== Training fold {k} ===")
        for phase, epochs, params in (("Head", 4, head.parameters()), ("Finetune", 8, [*body.parameters(),
                                                                                       *head.parameters()])):
            opt = torch.optim.Adam(params, lr=0.05)
            for epoch in range(1, epochs + 1):
                total = 0.0
                for i in range(0, int(train.sum()), 30):
                    xb, yb = x[train][i:i + 30], y[train][i:i + 30]
                    loss = torch.nn.functional.mse_loss(head(body(xb)), yb)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    total += loss.item() * len(xb)
                with torch.no_grad():
                    v = torch.nn.functional.mse_loss(head(body(x[val])), y[val]).item()
                lines.append(f"[Fold {k}] {phase} E{epoch}/{epochs}: train_loss={total / int(train.sum()):.4f} "
                             f"val_loss={v:.4f}")
    root = tmp_path / "run"
    root.mkdir()
    (root / "train_log.txt").write_text("\n".join(lines) + "\n")
    out = analyze(capsys, root, tmp_path / "f.duckdb")
    wrong = [f for f in out["findings"] if f["kind"] in ("loss_spike", "divergence", "resumed_run")]
    assert wrong == [], [f["summary"] for f in wrong]
    assert out["lines_read"] and not out["read_problems"], out["lines_read"]


@pytest.mark.parametrize("noisy", [False, True])
def test_a_percent_accuracy_saved_under_a_loss_name_is_no_divergence(capsys, tmp_path, noisy):
    """A real torch loop's history saved as Python lists (`str(list)` to .txt), the training accuracy in percent
    under the file name `loss_history.txt`: it climbs ever more slowly to exactly 100, an accuracy's ceiling, so it
    is a score under a loss's name, not a loss rising (before: a critical divergence, and a "grokking" of a loss
    saturated at its first value). Its twin's labels are 5% flipped: the accuracy never reaches 100, and the curve
    keeps the reading a rising loss gets."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    x = torch.randn(600, 4)
    x = x[(x[:, 0] + 0.5 * x[:, 1]).abs() > 0.3][:384]  # a margin: separable, so 100% can be reached
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    if noisy:
        y[torch.randperm(256)[:13]] ^= 1
    model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.005)
    acc, test_loss = [], []
    for _ in range(60):
        for i in range(0, 256, 32):
            loss = torch.nn.functional.cross_entropy(model(x[i:i + 32]), y[i:i + 32])
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            acc.append(100.0 * float((model(x[:256]).argmax(1) == y[:256]).float().mean()))
            test_loss.append(float(torch.nn.functional.cross_entropy(model(x[256:]), y[256:])))
    assert (max(acc) == 100.0) != noisy
    root = tmp_path / "run"
    root.mkdir()
    (root / "loss_history.txt").write_text(str(acc))
    (root / "loss_test_history.txt").write_text(str(test_loss))
    out = analyze(capsys, root, tmp_path / "f.duckdb")
    kinds = {f["kind"] for f in out["findings"]}
    if noisy:
        assert "divergence" in kinds, [f["summary"] for f in out["findings"]]
    else:
        assert not kinds & {"divergence", "grokking"}, [f["summary"] for f in out["findings"]]


SETUP_PRINTER = r"""
import json, logging, sys
from transformers import TrainingArguments
from transformers.trainer_callback import ProgressCallback, TrainerControl, TrainerState

during = sys.argv[2] == "during"
logging.basicConfig(stream=sys.stdout, level=logging.INFO,
                    format="[%(asctime)s] [%(levelname)s] [%(filename)s:%(lineno)d:%(funcName)s] %(message)s")
log = logging.getLogger("DeepSpeed")

def see_memory_usage(used):  # DeepSpeed's utils.see_memory_usage, as ZeRO-3 prints it while the weights load
    log.info(f"CPU Virtual Memory:  used = {used:.2f} GB, percent = {used / 20:.1f}%")

if not during:
    for used in (197.58, 197.59, 467.34, 733.8, 1014.2, 1274.55):
        see_memory_usage(used)
log.info("[Rank 0] step=0, skipped=0, lr=[0.0, 0.0], mom=[(0.9, 0.999), (0.9, 0.999)]")
log.info("DeepSpeedEngine configuration:")
print(json.dumps({"fp16": {"enabled": "auto", "loss_scale": 0, "loss_scale_window": 1000, "min_loss_scale": 1},
                  "zero_optimization": {"stage": 3}}, indent=4))
print("\n".join(f"  weight {i} loaded" for i in range(120)))  # the set-up output between it and training
state = TrainerState(max_steps=400, is_world_process_zero=True)
args, control, bar = TrainingArguments(output_dir=sys.argv[1], report_to=[]), TrainerControl(), ProgressCallback()
bar.on_train_begin(args, state, control)
for i in range(20):
    if during:
        see_memory_usage(197.58 * 1.1 ** i)
    state.global_step, state.epoch = 20 * (i + 1), (i + 1) / 20
    bar.on_log(args, state, control, logs={"loss": round(1.5 * 0.97 ** i, 4), "grad_norm": 1.0,
                                           "learning_rate": 5e-5, "epoch": round(state.epoch, 2)})
bar.on_train_end(args, state, control)
"""


@pytest.mark.parametrize("during", [False, True])
def test_what_a_log_prints_before_training_is_set_up(capsys, tmp_path, during):
    """A DeepSpeed launch prints its memory while the weights load (rising ×6), a `step=0` line and its
    configuration (`"loss_scale": 0`: dynamic scaling) before HF Trainer's first record: set-up, not training. The
    memory and the scale are judged from training on, whatever step the records are read at (here the reader places
    them under that `step=0`). The twin prints the same memory rising through training: a leak."""
    pytest.importorskip("transformers", reason="the test extra installs transformers")

    def write(root: Path) -> None:
        with (root / "train.log").open("w") as out:
            subprocess.run([sys.executable, "-c", SETUP_PRINTER, str(tmp_path / "out"), "during" if during else "before"],
                           stdout=out, stderr=subprocess.STDOUT, check=True)

    out, grown = judged(capsys, tmp_path, write, "memory_growth")
    kinds = {f["kind"] for f in out["findings"]}
    assert "amp_overflow" not in kinds, [f["summary"] for f in out["findings"]]
    assert bool(grown) == during, [f["summary"] for f in out["findings"]]
