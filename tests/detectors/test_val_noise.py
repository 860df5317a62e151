"""val_noise on files written by the real writers: TensorBoard (train/ and val/ writers), Lightning's CSVLogger, a
script's Python logging."""

import numpy as np
import pytest

from forensics.judge.detectors import ValNoise
from tests.runwriters import curve, load_run, write_tb



def _val(n: int = 30, every: int = 100, noise: float = 0.005, seed: int = 0, floor: float = 0.35, tau: float = 800):
    rng = np.random.default_rng(seed)
    steps = np.arange(n) * every
    return steps, (floor + 1.95 * np.exp(-steps / tau)) * (1 + rng.normal(0, noise, n))


def _run(tmp_path, val, train=None):
    return load_run(write_tb(tmp_path / "r", {"train/loss": train or curve(n=300, noise=0.03), "val/loss": val}),
                    tmp_path / "f.duckdb")


def test_fires_when_each_evaluation_jumps_by_a_fifth(tmp_path):
    """Validation on 32 samples with random augmentation: each evaluation is ±20% off the curve."""
    [f] = ValNoise().check(_run(tmp_path, _val(noise=0.2)))
    assert f.kind == "val_noise" and f.step == 0 and f.step_end == 2900
    assert f.evidence["val_relative_noise"] > 0.1 and f.evidence["ratio"] > 3


def test_smooth_validation_is_silent(tmp_path):
    assert list(ValNoise().check(_run(tmp_path, _val()))) == []


def test_constant_validation_is_silent(tmp_path):
    """A converged model on a fixed validation set gives the same loss at every evaluation."""
    assert list(ValNoise().check(_run(tmp_path, (np.arange(30) * 100, np.full(30, 0.4123))))) == []


def test_few_evaluations_of_a_fast_falling_curve_are_silent(tmp_path):
    """Ten evaluations while the loss still falls fast: successive differences shrink from -0.5 to -0.05, so
    their spread looks like noise to a rule on first differences; the curve itself is smooth."""
    assert list(ValNoise().check(_run(tmp_path, _val(n=10, every=300, tau=700, noise=0.002)))) == []


def test_a_smoothly_rising_validation_loss_is_not_noise(tmp_path):
    """Overfitting: validation climbs from 1.1 to 2.7 (+140%) with 0.5% noise, while training falls with 3%
    noise; successive differences of the climb are its slope, not noise."""
    steps = np.arange(30) * 400
    rng = np.random.default_rng(2)
    val = (1.1 + 1.6 * (1 - np.exp(-steps / 4000))) * (1 + rng.normal(0, 0.005, 30))
    assert list(ValNoise().check(_run(tmp_path, (steps, val)))) == []


def test_validation_moving_a_few_percent_beside_as_noisy_training_is_silent(tmp_path):
    """A healthy validation loss moving 7.3% of its level between evaluations against training's 6%: noisier than
    training, but under the 8% floor the healthy real runs put it at (healthy validation moves up to ~7%). Silent at
    the default; the old 5% floor called it val_noise."""
    run = _run(tmp_path, _val(noise=0.05, seed=4), train=curve(n=300, noise=0.06))
    [f] = ValNoise(min_noise=0.05).check(run)
    assert 0.05 < f.evidence["val_relative_noise"] < 0.08 and f.evidence["ratio"] >= 1.0
    assert list(ValNoise().check(run)) == []


def test_the_summary_prints_the_true_ratio(tmp_path):
    """Issue 25: a ratio of 1.04 (over the 1.0 threshold) read "1.0× the training loss's": as if at the threshold."""
    from tests.paths import REPO

    [f] = ValNoise().check(load_run(REPO / "sample_runs" / "runs" / "val_noise_tiny_val", tmp_path / "f.duckdb"))
    ratio = f.evidence["ratio"]
    assert 1.0 < ratio < 1.05
    assert f"{ratio:.3g}× the training loss's" in f.summary and "1.0×" not in f.summary


def _resampled_validation(root, val_size: int):
    """A real torch training of a linear classifier, 20 epochs, the epoch's mean training loss and a validation loss
    on `val_size` examples drawn afresh from a held-out pool at every evaluation, written by SummaryWriter."""
    import torch
    from torch.utils.tensorboard import SummaryWriter

    torch.manual_seed(0)
    x, xv = torch.randn(4096, 16), torch.randn(4096, 16)
    y, yv = ((t[:, :3].sum(1) + 0.5 * torch.randn(4096) > 0).long() for t in (x, xv))
    model = torch.nn.Linear(16, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    w, step = SummaryWriter(log_dir=str(root)), 0
    for _ in range(20):
        losses = []
        for idx in torch.randperm(4096).split(64):
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            losses.append(loss.item())
        w.add_scalar("train/loss", sum(losses) / len(losses), step)
        pick = torch.randint(0, 4096, (val_size,))
        with torch.no_grad():
            w.add_scalar("val/loss", torch.nn.functional.cross_entropy(model(xv[pick]), yv[pick]).item(), step)
    w.close()
    return root


def test_a_tiny_validation_set_resampled_at_every_evaluation_is_val_noise(tmp_path):
    """16 validation examples drawn afresh at each evaluation: validation moves ~20% between evaluations while the
    training mean barely moves. The whole pool of 4096 at every evaluation is smooth, and silent."""
    run = load_run(_resampled_validation(tmp_path / "tiny", 16), tmp_path / "t.duckdb")
    [f] = ValNoise().check(run)
    assert f.evidence["val_relative_noise"] > 0.1 and f.evidence["ratio"] > 10
    run = load_run(_resampled_validation(tmp_path / "whole", 4096), tmp_path / "w.duckdb")
    assert list(ValNoise().check(run)) == []


def test_a_validation_loss_falling_by_orders_of_magnitude_is_not_val_noise(tmp_path):
    """Per-epoch Keras logs: validation falls from 0.7 to 0.002 while each evaluation of a small set jitters by
    ~15% of its level. Near 0 that is a large share of a tiny level, yet beside the curve's own fall it is
    invisible; the training loss, an epoch mean, is smoother still."""
    rng = np.random.default_rng(2)
    epochs = np.arange(100)
    train = (0.7 * np.exp(-epochs / 9) + 1e-4) * (1 + rng.normal(0, 0.01, epochs.size))
    val = (0.7 * np.exp(-epochs / 10) + 0.002) * (1 + rng.normal(0, 0.15, epochs.size))
    run = load_run(write_tb(tmp_path / "r", {"train/loss": (epochs, train), "val/loss": (epochs, val)}),
                   tmp_path / "f.duckdb")
    assert list(ValNoise().check(run)) == []
    [f] = ValNoise(min_share_of_travel=0.0).check(run)  # the share of the travel is what decides
    assert f.evidence["val_noise"] < 0.02 * f.evidence["val_travel"]


def _lightning(root, val: np.ndarray, epoch_train: np.ndarray | None, step_noise: float | None = 0.4, seed: int = 0):
    """Lightning's CSVLogger as `self.log(..., on_step=True, on_epoch=True)` reaches it: `train_loss_step` (single
    batches, ±`step_noise`; none when None) every 10 of an epoch's 100 steps, `train_loss_epoch` (the epoch mean,
    when given) and `val_loss` at the step that ends each epoch."""
    pytest.importorskip("lightning", reason="the test extra installs lightning")
    from lightning.pytorch.loggers import CSVLogger

    rng = np.random.default_rng(seed)
    logger = CSVLogger(str(root))
    for e in range(val.size):
        level = epoch_train[e] if epoch_train is not None else 0.5 + 2 * np.exp(-e / 3)
        for k in range(9, 100, 10) if step_noise is not None else ():
            logger.log_metrics({"train_loss_step": level * (1 + rng.normal(0, step_noise)), "epoch": e},
                               step=e * 100 + k)
        end = {"val_loss": float(val[e]), "epoch": e}
        if epoch_train is not None:
            end["train_loss_epoch"] = float(epoch_train[e])
        logger.log_metrics(end, step=e * 100 + 99)
    logger.save()
    logger.finalize("success")
    return root


def test_validation_is_compared_with_the_training_loss_at_its_own_cadence(tmp_path):
    """Per-epoch validation that jumps ±25% on a curve that has stopped falling, beside single-batch training
    losses that jump ±40% and their smooth epoch mean: validation is the steadier of it and single batches, yet
    ten times noisier than the epoch mean, the training curve at its own cadence. Without the epoch mean, the
    medians of the single batches between evaluations are what it is compared with, and they are noisy too."""
    rng = np.random.default_rng(1)
    epochs = np.arange(14)
    curve_level = 3.5 + 9 * np.exp(-epochs / 1.5)
    val = curve_level * (1 + rng.normal(0, 0.25, epochs.size))
    train = (7 + 40 * np.exp(-epochs / 1.5)) * (1 + rng.normal(0, 0.01, epochs.size))
    run = load_run(_lightning(tmp_path / "a", val, train), tmp_path / "a.duckdb")
    assert run.pick("loss") == "train_loss_step"
    [f] = ValNoise().check(run)
    assert f.evidence["train_series"] == "train_loss_epoch" and f.evidence["train_compared_as"] == "cadence"
    assert f.evidence["ratio"] > 4 and "its best evaluation" in f.summary
    run = load_run(_lightning(tmp_path / "b", val, None), tmp_path / "b.duckdb")
    assert list(ValNoise().check(run)) == []


def test_validation_two_to_three_times_as_noisy_as_the_epoch_training_loss_is_silent(tmp_path):
    """A healthy small model logged per epoch: validation moves ~10% of its level between epochs, 2.6× training's
    epoch mean, both falling. Noisier, but under the 3× the healthy real runs put the bar at; the rule that compared
    it with 1× training called it val_noise. Its twin whose validation moves ~20% (5×) is a validation set too
    small to choose a checkpoint with."""
    found = {}
    for name, noise in (("healthy", 0.1), ("tiny", 0.2)):
        rng = np.random.default_rng(3)
        epochs = np.arange(25)
        train = (0.04 + 0.9 * np.exp(-epochs / 3)) * (1 + rng.normal(0, 0.05, epochs.size))
        val = (0.11 + 0.4 * np.exp(-epochs / 3)) * (1 + rng.normal(0, noise, epochs.size))
        run = load_run(_lightning(tmp_path / name, val, train, step_noise=None), tmp_path / f"{name}.duckdb")
        found[name] = list(ValNoise().check(run))
        if name == "healthy":
            assert list(ValNoise(ratio=1.0).check(run))  # the ratio is what decides
    assert found["healthy"] == []
    [f] = found["tiny"]
    assert f.evidence["ratio"] > 3.5


def test_per_batch_validation_lines_are_not_the_evaluation(tmp_path):
    """A script that logs single-batch losses while training and while validating, then each phase's mean over the
    epoch: the per-batch validation values jump like single training batches do; the evaluation a user reads,
    the epoch's validation mean, is smooth. It is the one judged, and the run is silent."""
    from tests.runwriters import log_messages

    rng = np.random.default_rng(0)
    lines = []
    for e in range(40):
        level = 0.04 + 0.03 * np.exp(-e / 8)
        lines += [f"train --- Current batch:{k * 200}/1600  loss:[ {level * 10 * (1 + rng.normal(0, 0.4)):.8f}]"
                  for k in range(1, 9)]
        lines.append(f"Epoch [{e}]/[39] \t Training Phase Loss: {level * (1 + rng.normal(0, 0.01)):.12f} \t Accuracy: 0.8")
        lines += [f"val --- Current batch:{k * 200}/400  loss:[ {level * 8 * (1 + rng.normal(0, 0.4)):.8f}]"
                  for k in (1, 2)]
        lines.append(f"Epoch [{e}]/[39] \t Validation Phase Loss: {level * 0.8 * (1 + rng.normal(0, 0.02)):.12f} \t "
                     "Accuracy: 0.85")
    (tmp_path / "r").mkdir()
    log_messages(tmp_path / "r" / "train.log", lines, fmt="%(asctime)s %(levelname)s    : %(message)s")
    run = load_run(tmp_path / "r", tmp_path / "f.duckdb")
    # each pass printed batch by batch is one evaluation, the epoch's mean printed after it (ingest's reading)
    assert run.pick("val_loss") == "Validation Phase Loss" and run.finite_points("Validation Phase Loss") == 40
    assert ValNoise()._evaluations(run) == "Validation Phase Loss"
    assert list(ValNoise().check(run)) == []


def test_a_rise_that_decides_the_checkpoint_is_not_noise(tmp_path):
    """HF-style logs: the training loss (means over 100 steps, ±10%) falls 0.7 -> 0.02 while the evaluation loss
    climbs from 0.26 to ~0.65 with ±9% jumps. The jumps never bring a later evaluation back to the first one:
    the rise decides the checkpoint to keep (overfitting's finding), not the noise."""
    from forensics.judge.detectors import Overfitting

    rng = np.random.default_rng(0)
    ts = np.arange(100, 18001, 100)
    train = (0.02 + 0.68 * np.exp(-ts / 1500)) * (1 + rng.normal(0, 0.1, ts.size))
    vs = np.arange(1000, 18001, 1000)
    val = (0.26 + 0.4 * (1 - np.exp(-(vs - 1000) / 6000))) * (1 + rng.normal(0, 0.09, vs.size))
    run = load_run(write_tb(tmp_path / "r", {"train/loss": (ts, train), "eval/loss": (vs, val)}), tmp_path / "f.duckdb")
    assert list(Overfitting().check(run))
    [f] = ValNoise(decided_sigmas=float("inf")).check(run)  # noisier than training: the rise is what silences it
    assert f.evidence["val_rise_after_minimum"] >= 5 * f.evidence["val_noise"]
    assert list(ValNoise().check(run)) == []


def test_a_few_evaluations_swinging_beside_a_smooth_training_loss_are_val_noise(tmp_path):
    """Six epochs printed by a script's logger: validation 6.4, 5.6, 2.9, 3.6, 4.2, 1.9 (round trips of ~20%
    of its level) while the training loss falls smoothly 2.10 -> 1.72. Too few points for second differences, not
    for a user, so the engine judges it although both curves are short; the twin whose validation falls smoothly
    beside the same training loss is silent, and reported as too short to judge (not as free of noise)."""
    from forensics.judge.detectors.base import missing_reason
    from tests.runwriters import log_messages

    train = [2.10, 2.01, 1.93, 1.86, 1.79, 1.72]
    found = {}
    for name, val in (("swings", [6.40, 5.60, 2.90, 3.60, 4.20, 1.90]),
                      ("smooth", [2.40, 2.21, 2.09, 2.01, 1.96, 1.93])):
        (tmp_path / name).mkdir()
        log_messages(tmp_path / name / "train.log", [f"Epoch {e + 1}/6 - loss: {t:.4f} - val_loss: {v:.4f}"
                                                     for e, (t, v) in enumerate(zip(train, val))])
        run = load_run(tmp_path / name, tmp_path / f"{name}.duckdb")
        found[name] = (missing_reason(ValNoise(), run), list(ValNoise().check(run)))
    [f] = found["swings"][1]
    assert f.evidence["val_turns"] == 2 and f.evidence["val_relative_swing"] > 0.15 and f.evidence["ratio"] > 4
    assert found["swings"][0] is None  # judged at 6 points: the swings stand out
    assert found["smooth"][1] == [] and "at least 8" in found["smooth"][0]


def test_validation_jumping_between_epochs_is_val_noise_when_training_is_too_sparse_to_compare(tmp_path):
    """A hundred evaluations jumping ±40% around a falling level, beside a training loss logged 6 times: no
    cadence to compare at, and validation alone shows the noise. Smooth validation beside the same training is
    silent."""
    rng = np.random.default_rng(3)
    vs = np.arange(100) * 3
    level = 700 + 3000 * np.exp(-vs / 60)
    train = (np.arange(1, 7) * 50, np.array([1300, 1100, 900, 700, 520, 400.0]))
    noisy = load_run(write_tb(tmp_path / "n", {"train/loss": train, "val/loss": (vs, level * rng.lognormal(0, 0.4, 100))}),
                     tmp_path / "n.duckdb")
    [f] = ValNoise().check(noisy)
    assert f.evidence["train_compared_as"] == "none" and f.evidence["val_relative_noise"] > 0.25
    smooth = load_run(write_tb(tmp_path / "s", {"train/loss": train, "val/loss": (vs, level * rng.lognormal(0, 0.02, 100))}),
                      tmp_path / "s.duckdb")
    assert list(ValNoise().check(smooth)) == []


def test_isolated_evaluation_jumps_that_come_straight_back_are_val_noise(tmp_path):
    """A smooth test loss beside a smooth training loss, but four single evaluations stand ×3-×6 above their
    neighbours and the next is back: a median noise measure cannot see them, a user can. When training jumps at
    the same evaluations (a restart, a bad batch), the jumps are not the evaluation's and it is silent."""
    steps = np.arange(150) * 2
    train = 0.7 * np.exp(-steps / 150) + 0.1
    val = train * 1.02
    spiky = val.copy()
    for i in (46, 70, 95, 120):
        spiky[i] *= 4.0
    run = load_run(write_tb(tmp_path / "a", {"train/loss": (steps, train), "val/loss": (steps, spiky)}), tmp_path / "a.duckdb")
    [f] = ValNoise().check(run)
    assert [e["step"] for e in f.evidence["excursions"]] == [92, 140, 190, 240]
    assert list(ValNoise(min_excursions=5).check(run)) == []  # the excursion rule is what decides
    shared = train.copy()
    for i in (46, 70, 95, 120):
        shared[i] *= 4.0
    run = load_run(write_tb(tmp_path / "b", {"train/loss": (steps, shared), "val/loss": (steps, spiky)}), tmp_path / "b.duckdb")
    assert list(ValNoise().check(run)) == []


def test_isolated_jumps_in_a_curve_that_falls_by_orders_of_magnitude_are_val_noise(tmp_path):
    """40 epochs: validation sits near 0.3 for a warm-up of five, drops to 0.01 and keeps falling to 0.001, with two
    single evaluations ×100 above their neighbours that come straight back, while training falls smoothly. Beside a
    fall that long, the curve's point noise is invisible (the median noise rule stays silent), but the two jumps show
    on any plot. The same curve without them is silent."""
    rng = np.random.default_rng(7)
    epochs = np.arange(40)
    val = np.where(epochs < 5, 0.29, 0.012 * np.exp(-(epochs - 5) / 8) + 0.0006) * (1 + rng.uniform(-0.3, 0.3, 40))
    train = (0.15 * np.exp(-epochs / 2) + 0.0015) * (1 + rng.uniform(-0.03, 0.03, 40))
    jumps = val.copy()
    jumps[10] *= 120
    jumps[12] *= 90
    found = {}
    for name, v in (("jumps", jumps), ("smooth", val)):
        run = load_run(write_tb(tmp_path / name, {"train/loss": (epochs, train), "val/loss": (epochs, v)}),
                       tmp_path / f"{name}.duckdb")
        found[name] = list(ValNoise().check(run))
    [f] = found["jumps"]
    assert [e["step"] for e in f.evidence["excursions"]] == [10, 12]
    assert found["smooth"] == []


# A user's paste of the validation-loss column of a U-Net's training log, its first 30 epochs (cosmic-cortex/
# pytorch-UNet issue 4, "val_loss very unstable"; the training column was not pasted).
_VAL_COLUMN = "val_loss\n--\n" + "\n".join("""
0.121626744 0.064643869 1.067177767 1.446711094 1.281244414 0.085074004 0.033228467 0.07067455
0.057629818 0.058747965 1.917625544 0.041074573 0.15646584 1.15546266 1.469133962 0.040493928
1.874986998 1.004034303 0.048311408 0.100535154 1.64835466 0.054501295 0.055335191 0.10456412
0.276266118 0.068388779 0.715268846 0.098956134 2.583597354 0.538678182
""".split()) + "\n"


def test_a_validation_column_logged_alone_that_jumps_tenfold_between_epochs_is_val_noise(tmp_path):
    """No training loss at all: validation jumps between ~0.05 and 1-2.6 from epoch to epoch with no trend. That is
    noise whatever training did; judged alone at `_alone`'s bar (the finding says no training loss was logged)."""
    from forensics.judge.detectors.base import missing_reason

    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "val_loss.txt").write_text(_VAL_COLUMN)
    run = load_run(tmp_path / "r", tmp_path / "r.duckdb")
    assert not run.has("loss") and missing_reason(ValNoise(), run) is None
    [f] = ValNoise().check(run)
    assert f.evidence["train_points"] == 0 and "no training loss was logged" in f.summary
    assert list(ValNoise(alone_noise=100.0).check(run)) == []


# Per-epoch lines of a classifier's training log on a 1272-image training and a 70-image validation set, which logs
# its validation accuracy and no validation loss (HienNguyenPhan/Azheimer-Prediction, train_log.txt, epochs 1-39).
_ACC_LOG = """
    Epoch 1/200, Train Loss: 1.0591, Val Acc: 0.3286
    Epoch 2/200, Train Loss: 0.9816, Val Acc: 0.4000
    Epoch 3/200, Train Loss: 0.9125, Val Acc: 0.3429
    Epoch 4/200, Train Loss: 0.8503, Val Acc: 0.7286
    Epoch 5/200, Train Loss: 0.7846, Val Acc: 0.6857
    Epoch 6/200, Train Loss: 0.7696, Val Acc: 0.8143
    Epoch 7/200, Train Loss: 0.7314, Val Acc: 0.8286
    Epoch 8/200, Train Loss: 0.7057, Val Acc: 0.4429
    Epoch 9/200, Train Loss: 0.6860, Val Acc: 0.4714
    Epoch 10/200, Train Loss: 0.6853, Val Acc: 0.7714
    Epoch 11/200, Train Loss: 0.6713, Val Acc: 0.5143
    Epoch 12/200, Train Loss: 0.6592, Val Acc: 0.8714
    Epoch 13/200, Train Loss: 0.6358, Val Acc: 0.7000
    Epoch 14/200, Train Loss: 0.6207, Val Acc: 0.7714
    Epoch 15/200, Train Loss: 0.6139, Val Acc: 0.6000
    Epoch 16/200, Train Loss: 0.6096, Val Acc: 0.4429
    Epoch 17/200, Train Loss: 0.5954, Val Acc: 0.8857
    Epoch 18/200, Train Loss: 0.5930, Val Acc: 0.9857
    Epoch 19/200, Train Loss: 0.5965, Val Acc: 1.0000
    Epoch 20/200, Train Loss: 0.5925, Val Acc: 0.9714
    Epoch 21/200, Train Loss: 0.5864, Val Acc: 0.8000
    Epoch 22/200, Train Loss: 0.5861, Val Acc: 0.9286
    Epoch 23/200, Train Loss: 0.5993, Val Acc: 0.9714
    Epoch 24/200, Train Loss: 0.5896, Val Acc: 0.9857
    Epoch 25/200, Train Loss: 0.5863, Val Acc: 0.9286
    Epoch 26/200, Train Loss: 0.5863, Val Acc: 1.0000
    Epoch 27/200, Train Loss: 0.5838, Val Acc: 1.0000
    Epoch 28/200, Train Loss: 0.5932, Val Acc: 1.0000
    Epoch 29/200, Train Loss: 0.5800, Val Acc: 0.9571
    Epoch 30/200, Train Loss: 0.5829, Val Acc: 0.8571
    Epoch 31/200, Train Loss: 0.5912, Val Acc: 0.9429
    Epoch 32/200, Train Loss: 0.5931, Val Acc: 0.9000
    Epoch 33/200, Train Loss: 0.5942, Val Acc: 0.9714
    Epoch 34/200, Train Loss: 0.5859, Val Acc: 0.8714
    Epoch 35/200, Train Loss: 0.5822, Val Acc: 0.7143
    Epoch 36/200, Train Loss: 0.5835, Val Acc: 0.9000
    Epoch 37/200, Train Loss: 0.6042, Val Acc: 0.8286
    Epoch 38/200, Train Loss: 0.6186, Val Acc: 0.5857
    Epoch 39/200, Train Loss: 0.5960, Val Acc: 0.8571
"""


def test_a_held_out_accuracy_bouncing_beside_a_smooth_training_loss_is_val_noise(tmp_path):
    """No held-out loss is logged, only the validation accuracy, which jumps 0.33-1.0 between epochs while the
    training loss falls smoothly: the held-out curve a user reads is that score, judged at the loss's bars."""
    from forensics.judge.detectors.base import missing_reason

    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "train_log.txt").write_text(_ACC_LOG.strip() + "\n")
    run = load_run(tmp_path / "r", tmp_path / "r.duckdb")
    assert not run.has("val_loss") and missing_reason(ValNoise(), run) is None
    [f] = ValNoise().check(run)
    assert f.series == "Val Acc" and f.evidence["ratio"] > 3 and "no held-out loss" in f.summary
    assert f.evidence["best_value"] == 1.0
    assert list(ValNoise(min_noise=0.2, traded_share=1.0).check(run)) == []  # a 20% floor not traded down


def test_a_smoothly_rising_held_out_accuracy_is_silent(tmp_path):
    """A validation accuracy that climbs smoothly to its ceiling beside a falling training loss: no noise."""
    epochs = np.arange(30)
    acc = 0.95 - 0.6 * np.exp(-epochs / 6) + np.random.default_rng(1).normal(0, 0.004, epochs.size)
    run = load_run(write_tb(tmp_path / "r", {"train/loss": (epochs, 0.1 + 2 * np.exp(-epochs / 6)),
                                             "val/accuracy": (epochs, acc)}), tmp_path / "f.duckdb")
    assert not run.has("val_loss")
    assert list(ValNoise().check(run)) == []


# A Keras CSVLogger file of a time-series forecaster (Batu-end/4cast2, training_log.csv, all 24 epochs).
_KERAS_CSV = """epoch,loss,val_loss
0,0.00315470271743834,0.20279990136623383
1,0.0008770562126301229,0.17009752988815308
2,0.0006420596037060022,0.17797324061393738
3,0.00044589967001229525,0.10835093259811401
4,0.0004767656500916928,0.0796661525964737
5,0.0003408266929909587,0.03752674534916878
6,0.0004032753931824118,0.014736387878656387
7,0.00039031446794979274,0.003160980064421892
8,0.0004658485122490674,0.01351558230817318
9,0.00028476829174906015,0.005686772987246513
10,0.0002724284422583878,0.007068389095366001
11,0.00023486455029342324,0.009058283641934395
12,0.0004380251048132777,0.00530198123306036
13,0.0002860903041437268,0.0008970497292466462
14,0.0002302711218362674,0.0036171197425574064
15,0.00019170140149071813,0.0014742015628144145
16,0.0001683202717686072,0.0017363628139719367
17,0.00016377602878492326,0.003498982870951295
18,0.00017007379210554063,0.001380119938403368
19,0.00017964794824365526,0.002760697854682803
20,0.00019506616808939725,0.001644132542423904
21,0.0001944225950865075,0.0020985850133001804
22,0.00019446000806055963,0.005759951192885637
23,0.00022182428801897913,0.005217141006141901
"""


def test_jumps_of_several_fold_after_a_long_fall_are_val_noise(tmp_path):
    """Validation falls 0.2 → 0.003 in seven epochs, then jumps ×2-×6 from epoch to epoch while training moves a
    few percent. Its point noise is under 2% of the fall's range (the share that hides jitter on a long fall), but
    moves of 60% of the level show on the log plot such a fall is read on: `alone_noise` lifts that bar."""
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "training_log.csv").write_text(_KERAS_CSV)
    run = load_run(tmp_path / "r", tmp_path / "r.duckdb")
    [f] = ValNoise().check(run)
    assert f.evidence["val_noise"] < 0.02 * f.evidence["val_travel"] and f.evidence["val_relative_noise"] > 0.2
    assert list(ValNoise(alone_noise=1.0).check(run)) == []


# A recogniser's tab-separated epoch log, all 40 epochs (github.com/Lenjis/ID-recognition@49d86ad, loss_log.txt):
# the epoch-mean training loss falls smoothly; the test loss stops improving near epoch 24 and zig-zags 2.3-2.8.
_SMOOTH_TRAINING_JAGGED_TEST = """\
Epoch	Loss_train	Loss_test
1	30.569239	23.926319
2	21.787340	13.060445
3	15.441550	8.818279
4	11.913350	7.145820
5	9.905758	6.374915
6	8.431729	5.628594
7	7.414464	4.713030
8	6.580054	4.350363
9	5.917904	4.253021
10	5.358939	3.821667
11	4.894938	3.547065
12	4.593996	3.361372
13	4.318012	3.440682
14	4.092549	3.140835
15	3.823833	3.367057
16	3.672769	2.945547
17	3.490554	3.004166
18	3.267280	2.611323
19	3.238449	2.834324
20	3.028590	2.766626
21	2.915810	2.926442
22	2.841129	2.758814
23	2.660184	2.844247
24	2.625887	2.631807
25	2.511692	2.681672
26	2.482675	2.485210
27	2.375044	2.496949
28	2.265751	2.543002
29	2.200598	2.715727
30	2.205859	2.564321
31	2.220987	2.483019
32	2.071525	2.371297
33	2.007520	2.639311
34	1.949089	2.364629
35	1.940597	2.692185
36	1.841891	2.692493
37	1.842458	2.499855
38	1.797131	2.467502
39	1.762347	2.790946
40	1.750498	2.316208
"""


def test_validation_moving_a_few_percent_beside_a_much_smoother_training_loss_is_val_noise(tmp_path):
    """Validation moving 6.7% of its level between epochs (under the 8% floor) beside an epoch training loss moving
    1.3% (×5): the two witnesses traded, the smaller swing counts where it stands out further. Its twin whose test
    loss falls 1% an epoch over its second half (20% in all, its jumps under a fifth of that) shows its trend: silent."""
    root = tmp_path / "r"
    root.mkdir()
    (root / "loss_log.txt").write_text(_SMOOTH_TRAINING_JAGGED_TEST)
    run = load_run(root, tmp_path / "r.duckdb")
    [f] = ValNoise().check(run)
    assert 0.04 < f.evidence["val_relative_noise"] < 0.08 and f.evidence["ratio"] > 5
    assert list(ValNoise(traded_share=1.0).check(run)) == []  # under the 8% floor, untraded: silent
    lines = _SMOOTH_TRAINING_JAGGED_TEST.splitlines()
    falling = [lines[0]] + [f"{e}\t{tr}\t{float(te) * (1 - 0.01 * max(0, int(e) - 20)):.6f}"
                            for e, tr, te in (ln.split("\t") for ln in lines[1:])]  # -1% an epoch from epoch 21
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "loss_log.txt").write_text("\n".join(falling) + "\n")
    twin = load_run(tmp_path / "t", tmp_path / "t.duckdb")
    assert list(ValNoise().check(twin)) == [] and list(ValNoise(hidden_trend=0.0).check(twin))
