"""flat_loss on real TensorBoard event files."""

import math

import numpy as np
import pytest

from forensics.judge.detectors import FlatLoss
from tests.paths import REAL_RUNS_TEST
from tests.runwriters import curve, load_run, log_messages, write_tb



def test_fires_on_loss_stuck_at_log_c(tmp_path):
    rng = np.random.default_rng(0)
    steps = np.arange(200) * 10
    loss = math.log(10) + rng.normal(0, 0.02, 200)
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}, config={"num_classes": 10}), tmp_path / "f.duckdb")
    [f] = FlatLoss().check(run)
    assert f.severity == "critical" and abs(f.evidence["relative_change"]) < 0.03
    assert f.evidence["log_classes"] == math.log(10)


def test_learning_run_is_silent(tmp_path):
    run = load_run(write_tb(tmp_path / "r", {"loss": curve()}), tmp_path / "f.duckdb")
    assert list(FlatLoss().check(run)) == []


def test_validation_loss_pinned_while_training_loss_wanders(tmp_path):
    """Issue 12 class 4: val loss pinned at ln 2 for 30 evaluations, train loss wandering 0.61-0.72."""
    rng = np.random.default_rng(3)
    steps = np.arange(1, 79) * 10
    train = np.linspace(0.72, 0.67, steps.size) + rng.normal(0, 0.02, steps.size)  # −7%: not flat, not learning
    train[[25, 51, 77]] = 0.6
    vsteps = np.arange(1, 31) * 26
    val = np.log(2) - np.linspace(0, 7e-4, 30)
    run = load_run(write_tb(tmp_path / "r", {"train_loss": (steps, train), "val_loss": (vsteps, val)}),
                   tmp_path / "f.duckdb")
    [f] = FlatLoss().check(run)
    assert f.series == "val_loss" and abs(f.evidence["relative_change"]) < 0.01


def test_short_loss_pinned_at_one_value_is_flat(tmp_path):
    """Issue 12 class 4: five logged points, the last four exactly log(1000) as float32 (a network giving the
    uniform distribution whatever the batch); too short for the level rule, pinned all the same."""
    steps = np.arange(5) * 20
    loss = np.array([6.91161, *[math.log(1000)] * 4])
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    [f] = FlatLoss().check(run)
    assert f.severity == "critical" and f.evidence["pinned_points"] == 4 and f.evidence["points"] == 5
    assert f.evidence["pinned_value"] == float(np.float32(math.log(1000)))
    assert "pinned" in f.summary


def test_short_learning_curve_with_equal_neighbours_is_silent(tmp_path):
    # Two equal points at the end are a coincidence of printing, not a pinned loss; nor is a value printed
    # to two significant digits (`loss 0.52` on every line of a converged run printed with %.2f).
    steps = np.arange(6) * 20
    falling = np.array([2.3, 1.7, 1.2, 0.9, 0.8125, 0.8125])
    coarse = np.array([0.9, 0.61, 0.52, 0.52, 0.52, 0.52])
    for name, loss in (("falling", falling), ("coarse", coarse)):
        run = load_run(write_tb(tmp_path / name, {"loss": (steps, loss)}), tmp_path / f"{name}.duckdb")
        assert list(FlatLoss().check(run)) == [], name


def test_loss_pinned_after_a_first_logged_zero(tmp_path):
    # A first point of exactly 0 (a placeholder some loops log before the first step) must not break the
    # relative change of a loss pinned afterwards.
    steps = np.arange(5)
    loss = np.array([0.0, *[math.log(10)] * 4])
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    [f] = FlatLoss().check(run)
    assert f.evidence["pinned_points"] == 4 and f.evidence["relative_change"] == "inf"  # evidence keeps JSON-safe text


def test_short_loss_counts_as_checked_only_when_pinned(tmp_path):
    # Under 10 points only the pinned rule can speak; a short curve that is not pinned keeps its "too short"
    # skip, so the verdict does not count the level rule as having run.
    steps = np.arange(5) * 20
    moving = load_run(write_tb(tmp_path / "m", {"loss": (steps, np.array([2.3, 1.9, 1.6, 1.4, 1.3]))}),
                      tmp_path / "m.duckdb")
    pinned = load_run(write_tb(tmp_path / "p", {"loss": (steps, np.array([2.31, *[math.log(10)] * 4]))}),
                      tmp_path / "p.duckdb")
    assert "needs at least 10" in FlatLoss().unavailable(moving)
    assert FlatLoss().unavailable(pinned) is None


@pytest.mark.skipif(not (REAL_RUNS_TEST / "wandb_cifar_alexnet").is_dir(), reason="shared/real_runs_test is not beside the checkout")
@pytest.mark.needs_shared
def test_five_epochs_at_ln_10_in_a_real_wandb_run_are_flat(tmp_path):
    """AlexNet on CIFAR-10 (a real W&B run folder): train loss 2.3149, 2.3036, 2.3030, 2.3029, 2.3028 and val loss
    2.303 at every epoch. Five points are too few for the range rule; at chance (ln 10) they are enough (issue 24,
    class 2), and the finding names k."""
    run = load_run(REAL_RUNS_TEST / "wandb_cifar_alexnet", tmp_path / "f.duckdb")
    assert FlatLoss().unavailable(run) is None
    [f] = FlatLoss().check(run)
    assert (f.severity, f.step, f.step_end, f.evidence["chance_k"]) == ("critical", 0, 4, 10)
    assert "uniformly over 10 classes" in f.summary


def test_short_loss_at_a_clamp_value_is_flat_and_a_loss_that_fell_below_chance_is_not(tmp_path):
    """A loss clamped at -ln(1e-10) = 23.0259 on six records is flat; a loss that had fallen to 0.4 and came back
    to ln 2 learned something first (that is divergence's to judge), and a curve crossing ln 10 on its way down
    is still learning."""
    steps = np.arange(6) * 10
    clamp = np.array([23.02585, 23.02585, 23.02585, 23.02585, 23.02585, 23.02585]) + [0, 1e-5, 0, 2e-5, 0, 1e-5]
    run = load_run(write_tb(tmp_path / "a", {"loss": (steps, clamp)}), tmp_path / "a.duckdb")
    [f] = FlatLoss().check(run)
    assert f.evidence["chance_k"] == 10 ** 10 and "clamped" in f.summary
    back = np.array([0.69, 0.5, 0.4, 0.6931, 0.6932, 0.6931])
    falling = np.array([2.6, 2.45, 2.3026, 2.2, 2.1, 2.0])
    for name, y in (("b", back), ("c", falling)):
        run = load_run(write_tb(tmp_path / name, {"loss": (steps, y)}), tmp_path / f"{name}.duckdb")
        assert list(FlatLoss().check(run)) == [] and FlatLoss().unavailable(run) is not None


def test_a_training_loss_of_exactly_zero_beside_a_pinned_validation_loss_is_flat(tmp_path):
    """Issue 24 class 5: an empty training loop logs its untouched accumulator, 0.0, at every step, and the unchanged
    model evaluates to the same 0.8472 six times. Neither curve moves; a validation loss that falls beside the same
    zeros is a model that did learn: the training loss is still an empty one, said as a warning that names the
    validation loss's fall (the logging is what is broken)."""
    steps, vs = np.arange(0, 300, 10), np.arange(50, 301, 50)
    zeros = (steps, np.zeros(steps.size))
    run = load_run(write_tb(tmp_path / "a", {"train/loss": zeros, "val/loss": (vs, np.full(vs.size, 0.8472))}),
                   tmp_path / "a.duckdb")
    [f] = FlatLoss().check(run)
    assert f.series == "val/loss" and f.evidence["train_all_zero"] and "exactly 0" in f.summary
    falling = (vs, 0.85 * np.exp(-vs / 200))
    run = load_run(write_tb(tmp_path / "b", {"train/loss": zeros, "val/loss": falling}), tmp_path / "b.duckdb")
    [f] = FlatLoss().check(run)
    assert f.series == "train/loss" and f.severity == "warning" and "the validation loss falls" in f.summary


def test_a_loss_exactly_constant_over_the_whole_log_is_an_empty_loss_at_any_length(tmp_path):
    """Three or more points of exactly one value, from the first record: a replaced or never-computed loss. Said as
    such (not "it never moved"), 0 as an empty loop."""
    steps = np.array([1, 2, 3, 4])
    for name, v, words in (("z", 0.0, "never computed"), ("c", 2.3456, "not convergence")):
        run = load_run(write_tb(tmp_path / name, {"loss": (steps[:3], np.full(3, v))}), tmp_path / f"{name}.duckdb")
        assert FlatLoss().unavailable(run) is None
        [f] = FlatLoss().check(run)
        assert f.evidence["constant_value"] == pytest.approx(v) and words in f.summary and f.severity == "critical"
    moving = load_run(write_tb(tmp_path / "m", {"loss": (steps, np.array([2.5, 2.5, 2.4, 2.5]))}),
                      tmp_path / "m.duckdb")
    assert FlatLoss().unavailable(moving) is not None
    setting = load_run(write_tb(tmp_path / "s", {"loss": (steps[:3], np.ones(3))}), tmp_path / "s.duckdb")
    assert FlatLoss().unavailable(setting) is not None  # `LOSS_WEIGHT: 1.0` thrice in a config dump


# A PSENet progress line (github.com/whai362/PSENet/issues/168): a dice loss at its ceiling, the kernel IoU at 0.5.
_PSE = "({}/125) Batch: {}s | TOTAL: {}min | ETA: {}min | Loss: 1.0000 | Acc_t:  {} | IOU_t:  {} | IOU_k:  0.5000"
DICE_AT_CEILING = [_PSE.format(1, "8.914", 0, 19, "0.1929", "0.1929"), _PSE.format(21, "2.421", 1, 4, "0.1954", "0.1954"),
                   _PSE.format(41, "2.354", 2, 3, "0.1944", "0.1944")]


def test_a_round_loss_repeated_beside_a_pinned_score_is_an_unchanging_output(tmp_path):
    """A loss of exactly 1.0 on every progress line (a dice loss at its bound) beside a score exactly one value on the
    same lines: the model's outputs never change, at any length. The same round loss beside scores that all move
    stays silent (a round constant alone may be a setting read as a loss)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "train.log").write_text("\n".join(DICE_AT_CEILING) + "\n")
    [f] = FlatLoss().check(load_run(tmp_path / "a", tmp_path / "a.duckdb"))
    assert f.severity == "critical" and f.evidence["constant_value"] == 1.0 and f.evidence["points"] == 3
    assert f.evidence["pinned_beside"] == "IOU_k" and f.evidence["pinned_beside_value"] == 0.5
    moving = [line.replace("IOU_k:  0.5000", f"IOU_k:  0.{5000 + 37 * i}") for i, line in enumerate(DICE_AT_CEILING)]
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "train.log").write_text("\n".join(moving) + "\n")
    run = load_run(tmp_path / "b", tmp_path / "b.duckdb")
    assert FlatLoss().unavailable(run) is not None
    alone = load_run(write_tb(tmp_path / "v", {"val/loss": (np.arange(4), np.ones(4))}), tmp_path / "v.duckdb")
    assert list(FlatLoss().check(alone)) == []  # a round validation loss with no training records beside it


def test_an_exactly_zero_loss_beside_a_nan_gradient_norm_is_left_to_masked_nonfinite(tmp_path):
    steps = np.arange(1, 6)
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, np.zeros(5)),
                                             "grad_norm": (steps, np.array([1.0, np.nan, np.nan, np.nan, np.nan]))}),
                   tmp_path / "f.duckdb")
    assert list(FlatLoss().check(run)) == []


def test_an_exactly_zero_loss_beside_a_nan_evaluation_loss_is_left_to_masked_nonfinite(tmp_path):
    """HF Trainer under an fp16 overflow: every logged training loss 0.0 and the evaluation loss NaN (trainer_state
    as TrainerState writes it). The zero is a NaN the logger hid, not an empty loss; a finite evaluation beside it
    leaves the empty loss flat."""
    from tests.runwriters import write_trainer_state

    def history(eval_loss: float) -> list[dict]:
        train = [{"loss": 0.0, "grad_norm": 0.0, "learning_rate": 2e-5, "epoch": s / 100, "step": s}
                 for s in range(10, 130, 10)]
        return train + [{"eval_loss": eval_loss, "epoch": 1.2, "step": 120}]

    hidden = load_run(write_trainer_state(tmp_path / "nan", history(math.nan)), tmp_path / "n.duckdb")
    assert list(FlatLoss().check(hidden)) == []
    empty = load_run(write_trainer_state(tmp_path / "fin", history(1.25)), tmp_path / "f.duckdb")
    [f] = FlatLoss().check(empty)
    assert f.evidence["constant_value"] == 0.0


def test_a_loss_wandering_within_its_noise_over_the_whole_log_is_flat(tmp_path):
    """Forty-seven points wandering ±5% around 0.88 with no trend: the 3% range band misses it, the trend test
    says the wandering is noise. The same wander around a falling level learned, and is silent."""
    rng = np.random.default_rng(5)
    steps = np.arange(1, 48) * 50
    y = 0.88 * (1 + rng.normal(0, 0.05, steps.size))
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, y)}), tmp_path / "f.duckdb")
    [f] = FlatLoss().check(run)
    assert f.evidence["still"] and "within its own noise" in f.summary and "median of steps 50-800 " in f.summary
    falling = y * np.linspace(1.0, 0.8, steps.size)
    run = load_run(write_tb(tmp_path / "d", {"loss": (steps, falling)}), tmp_path / "d.duckdb")
    assert list(FlatLoss().check(run)) == []


def test_a_fall_too_small_to_matter_is_flat_whatever_a_trend_test_says(tmp_path):
    """Effect first: 400 per-step points scattering ±6% that drift down 2.5% over the whole run. The range rule's
    tenths are too noisy to hold within 3%, and on that many points Mann–Kendall calls the drift significant, yet
    the thirds' medians moved under 3%: no learning a user would act on (a warning: the loss does move, only by
    nothing). A fall of 10% with the same scatter learned, and is silent."""
    rng = np.random.default_rng(4)
    steps = np.arange(1, 401) * 10
    noise = 1 + rng.normal(0, 0.06, steps.size)
    y = 2.3 * np.linspace(1.0, 0.975, steps.size) * noise
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, y)}), tmp_path / "f.duckdb")
    [f] = FlatLoss().check(run)
    assert f.evidence["small_fall"] and f.evidence["mk_p"] < 0.05 and f.severity == "warning"
    assert "falls only -" in f.summary and FlatLoss()._flat(*run.arrays("loss")) is None
    run = load_run(write_tb(tmp_path / "d", {"loss": (steps, 2.3 * np.linspace(1.0, 0.9, steps.size) * noise)}),
                   tmp_path / "d.duckdb")
    assert list(FlatLoss().check(run)) == []


def test_a_loss_that_rose_to_its_pin_is_a_collapse_not_a_flat_loss(tmp_path):
    """1.64 then 11.8 and 10.3735 to the end (ln 32000): the model collapsed after one update. It moved; the pin is
    divergence's evidence."""
    steps = np.arange(1, 11)
    y = np.array([1.637, 11.807, 11.605, 10.383] + [10.3735] * 6)
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, y)}), tmp_path / "f.duckdb")
    assert all("pinned_value" not in f.evidence for f in FlatLoss().check(run))


def test_a_still_loss_while_the_gradient_norm_explodes_is_not_flat(tmp_path):
    steps = np.arange(10)
    loss = np.array([11.68, 11.43, 11.32, 11.25, 11.11, 11.24, 11.38, 11.23, 11.39, 11.28])
    g = 3.8e12 * 1.5 ** steps
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss), "grad_norm": (steps, g)}), tmp_path / "f.duckdb")
    assert list(FlatLoss().check(run)) == []
    run = load_run(write_tb(tmp_path / "s", {"loss": (steps, loss)}), tmp_path / "s.duckdb")
    assert len(list(FlatLoss().check(run))) == 1


def test_a_still_loss_in_an_excerpt_from_a_decayed_schedules_end_is_not_flat(tmp_path):
    """A console excerpt that opens two thirds into an epoch while the LR decays to nothing holds its level: the run
    converged as the LR ran out. Under a constant LR the excerpt still hides where its loss began (`unseen_start`);
    the same still loss printed from the run's first step under that constant LR does not move: flat_loss."""
    rng = np.random.default_rng(0)
    for case, (lr_of, opens, expect) in enumerate(((lambda i: 3.1e-7 * (1 - 0.01 * i), 0.66, 0),
                                                   (lambda i: 3e-4, 0.66, 0), (lambda i: 3e-4, 0.0, 1))):
        run_dir = tmp_path / f"run_{case}"
        run_dir.mkdir()
        lines = [str({"loss": f"{0.915 + 0.01 * rng.standard_normal():.4f}", "learning_rate": f"{lr_of(i):.4g}",
                      "epoch": f"{opens + 0.0023 * i:.4f}"}) for i in range(14)]
        (run_dir / "train.log").write_text("\n".join(lines) + "\n")
        found = list(FlatLoss().check(load_run(run_dir, tmp_path / f"{case}.duckdb")))
        assert len(found) == expect, [f.summary for f in found]


def _tiny_training(root, epochs: int, step_called: bool):
    """A real torch training of a small classifier on random batches, per-epoch loss and LR written by
    SummaryWriter under a linear LR schedule that runs out over the log. Without `step_called` the gradients
    are zeroed between backward() and step() (the classic misplaced zero_grad): nothing moves."""
    import torch
    from torch.utils.tensorboard import SummaryWriter

    torch.manual_seed(0)
    x = torch.randn(512, 8)
    labels = (x[:, 0] > 0).long()
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.LinearLR(opt, 1.0, 0.0, total_iters=epochs)
    w = SummaryWriter(log_dir=str(root))
    for epoch in range(1, epochs + 1):
        losses = []
        for _ in range(32):  # an epoch of 32 random batches; the epoch's mean loss is what is logged
            idx = torch.randint(0, 512, (64,))
            loss = torch.nn.functional.cross_entropy(model(x[idx]), labels[idx])
            loss.backward()
            if not step_called:
                opt.zero_grad()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
        w.add_scalar("train/loss", sum(losses) / len(losses), epoch)
        w.add_scalar("lr", opt.param_groups[0]["lr"], epoch)
        sched.step()
    w.close()
    return root


@pytest.mark.parametrize("epochs", [5, 8])
def test_a_short_loss_that_does_not_move_over_a_whole_lr_schedule_is_flat(tmp_path, epochs):
    """Effect size first, under the trend test's 10 points: a real training whose misplaced zero_grad leaves the
    weights where they were logs a loss that stays within its batch noise while the LR runs its schedule out; the
    finding says the loss at the last step equals its first within that spread. The same training with the
    step in place learns, and is silent."""
    run = load_run(_tiny_training(tmp_path / "stuck", epochs, step_called=False), tmp_path / "s.duckdb")
    assert FlatLoss().unavailable(run) is None
    [f] = FlatLoss().check(run)
    assert f.evidence["over_schedule"] and f.evidence["lr_last"] <= 0.25 * f.evidence["lr_peak"]
    assert f"at step {epochs} is" in f.summary and "its first value" in f.summary
    run = load_run(_tiny_training(tmp_path / "ok", epochs, step_called=True), tmp_path / "o.duckdb")
    assert list(FlatLoss().check(run)) == []


def _epoch_means(root, epochs: int, lr: float):
    """A real torch training of a small classifier, each epoch's mean loss over 1024 random batches written by
    SummaryWriter (no LR logged). At `lr` 0 the weights never move and the epoch means differ by batch noise alone."""
    import torch
    from torch.utils.tensorboard import SummaryWriter

    torch.manual_seed(0)
    x = torch.randn(512, 8)
    labels = (x[:, 0] > 0).long()
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    w = SummaryWriter(log_dir=str(root))
    for epoch in range(1, epochs + 1):
        losses = []
        for _ in range(1024):
            idx = torch.randint(0, 512, (64,))
            loss = torch.nn.functional.cross_entropy(model(x[idx]), labels[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        w.add_scalar("train/loss", sum(losses) / len(losses), epoch)
    w.close()
    return root


@pytest.mark.parametrize("epochs", [3, 4])
def test_a_short_log_held_within_one_percent_of_its_first_value_is_flat(tmp_path, epochs):
    """Effect size first, under the trend test's 10 points and with no LR logged: a real training whose weights never
    move (LR 0) logs epoch means within 1% of the first; a warning that quotes the deviation. The same training at LR
    0.1 falls by far more from its first epoch on, and is silent."""
    run = load_run(_epoch_means(tmp_path / "stuck", epochs, 0.0), tmp_path / "s.duckdb")
    assert FlatLoss().unavailable(run) is None
    [f] = FlatLoss().check(run)
    assert f.severity == "warning" and f.evidence["held_short"] and f.evidence["max_deviation"] <= 0.01
    assert f.evidence["points"] == epochs and "within" in f.summary
    run = load_run(_epoch_means(tmp_path / "ok", epochs, 0.1), tmp_path / "o.duckdb")
    assert list(FlatLoss().check(run)) == []


def _keras_epochs(path, loss, acc):
    """A Keras `fit(verbose=2)` transcript: one `Epoch i/30` header and one end-of-epoch line per epoch."""
    lines = []
    for i, (v, a) in enumerate(zip(loss, acc), 1):
        lines += [f"Epoch {i}/30", f"200/200 - 4880s - loss: {v:.4f} - accuracy: {a:.4f} - lr: 0.0100"]
    path.mkdir()
    (path / "train.log").write_text("\n".join(lines) + "\n")
    return path


def test_a_short_log_at_chance_from_its_first_epoch_with_accuracy_at_one_over_c_is_flat(tmp_path):
    """Seven epochs of a binary classifier whose loss sits at ln 2 from the first epoch (±2%) while its accuracy
    sits at 1/2: too short for a trend, glaring all the same; the finding quotes ln 2 and the accuracy. The same
    log whose loss falls from ln 2 as its accuracy climbs learned, and is silent."""
    acc = [0.4938, 0.4938, 0.5194, 0.5612, 0.5494, 0.5013, 0.5156]
    stuck = [0.7078, 0.6959, 0.6947, 0.6857, 0.6896, 0.6957, 0.6945]
    run = load_run(_keras_epochs(tmp_path / "stuck", stuck, acc), tmp_path / "s.duckdb")
    assert FlatLoss().unavailable(run) is None
    [f] = FlatLoss().check(run)
    assert f.severity == "critical" and f.evidence["chance_k"] == 2 and f.evidence["chance_source"] == "accuracy"
    assert "ln 2 = 0.6931" in f.summary and "0.7078 at step" in f.summary
    learning = [0.6931, 0.66, 0.62, 0.58, 0.55, 0.52, 0.50]
    rising = [0.52, 0.58, 0.63, 0.68, 0.71, 0.74, 0.76]
    run = load_run(_keras_epochs(tmp_path / "ok", learning, rising), tmp_path / "o.duckdb")
    assert list(FlatLoss().check(run)) == []


def _progress_bar(path, losses):
    """Lightning's progress bar as a console captures it: one tqdm line per step, the loss in its postfix."""
    from tqdm import tqdm

    path.mkdir()
    with open(path / "train.log", "w") as out:
        bar = tqdm(total=704, file=out, desc="Epoch 0", ascii=False, mininterval=0, miniters=1)
        bar.update(99)
        for v in losses:
            bar.set_postfix_str(f"v_num=11, train_loss={v:.3f}", refresh=False)
            bar.update(1)
            out.write("\n")
        bar.close()
    return path


def test_a_loss_printed_at_ln_100_on_every_step_is_flat_to_the_printers_rounding(tmp_path):
    """`train_loss=4.600` on every line of a short progress-bar log: constant only to the printer's 3 decimals,
    and at ln 100 = 4.605 to that rounding: a uniform prediction over 100 classes. The same bar whose printed
    loss moves is silent."""
    run = load_run(_progress_bar(tmp_path / "stuck", [4.6] * 7), tmp_path / "s.duckdb")
    [f] = FlatLoss().check(run)
    assert f.severity == "critical" and f.evidence["chance_k"] == 100 and f.evidence["chance_source"] == "printed"
    assert "ln 100 = 4.605" in f.summary
    run = load_run(_progress_bar(tmp_path / "ok", [4.6, 4.583, 4.571, 4.552, 4.530, 4.511, 4.498]), tmp_path / "o.duckdb")
    assert list(FlatLoss().check(run)) == []


def test_a_loss_exactly_zero_on_most_points_and_dust_on_the_rest_is_empty(tmp_path):
    """A loss of exactly 0.0 at most of its records and under 1e-4 at the few others from its first record: there
    was never anything to learn from. A loss that fell from ln 2 to exactly 0 (memorised) learned: not this."""
    steps = np.arange(1, 64) * 50 - 1
    dust = np.r_[1.17e-05, 3.2e-06, 1.9e-06, 4e-06, 0.0, 7e-06, 0.0, 1e-06, np.zeros(55)]
    run = load_run(write_tb(tmp_path / "r", {"train_loss": (steps, dust)}), tmp_path / "f.duckdb")
    [f] = FlatLoss().check(run)
    assert f.severity == "critical" and f.evidence["zero_points"] == 57 and f.evidence["points"] == 63
    assert "exactly 0.0 at 57 of its 63 points" in f.summary
    fell = np.r_[np.log(2) * np.exp(-np.arange(20) / 3.0), np.zeros(43)]
    run = load_run(write_tb(tmp_path / "m", {"train_loss": (steps, fell)}), tmp_path / "m.duckdb")
    assert list(FlatLoss().check(run)) == []


def test_a_validation_loss_identical_at_every_short_evaluation_beside_a_standing_training_loss_is_flat(tmp_path):
    """Eight epochs: the test loss the same to every printed digit at each, the training loss within 0.6%: the
    model's outputs never change. With a test loss that moves as the training loss falls, silent."""
    def write(root, train, test):
        root.mkdir()
        log_messages(root / "train.log", [f"Epoch {i} Train Loss {a:.6f} Test loss={b!r} Accuracy=0.65"
                                           for i, (a, b) in enumerate(zip(train, test), 1)])
        return root

    train = [0.954454, 0.951169, 0.951169, 0.948682, 0.951169, 0.948682, 0.948682, 0.951169]
    run = load_run(write(tmp_path / "stuck", train, [0.90144944190979] * 8), tmp_path / "s.duckdb")
    assert FlatLoss().unavailable(run) is None  # checked, though the training loss is under the trend's 10 points
    [f] = FlatLoss().check(run)
    assert f.severity == "critical" and f.evidence["pinned_points"] == 8
    falling = [0.95, 0.88, 0.8, 0.74, 0.69, 0.65, 0.62, 0.6]
    run = load_run(write(tmp_path / "ok", falling, [0.9, 0.85, 0.8, 0.76, 0.73, 0.71, 0.7, 0.69]), tmp_path / "o.duckdb")
    assert list(FlatLoss().check(run)) == []


def test_a_loss_that_fell_at_its_first_epoch_then_sat_is_not_flat(tmp_path):
    """A first epoch's mean twice the rest (the fall is inside it), then 48 epochs within 2%: it moved at once,
    and what it fell to is plateau's. The same 49 epochs without the first one's fall never moved: flat."""
    rng = np.random.default_rng(4)
    sat = 0.3295 * (1 - np.linspace(0, 0.017, 49)) * (1 + rng.normal(0, 2e-4, 49))
    fell = np.r_[0.681, sat]
    run = load_run(write_tb(tmp_path / "r", {"loss": (np.arange(50), fell)}), tmp_path / "f.duckdb")
    assert list(FlatLoss().check(run)) == []
    run = load_run(write_tb(tmp_path / "s", {"loss": (np.arange(49), sat)}), tmp_path / "s.duckdb")
    assert len(list(FlatLoss().check(run))) == 1


def test_a_loss_that_fell_far_and_climbed_back_to_its_start_moved(tmp_path):
    """A loss that falls to a quarter of its start mid-run and climbs back to where it began ends level with its
    start, yet it moved (divergence's): not flat. Its start and end alone, without the excursion, are."""
    rng = np.random.default_rng(6)
    t = np.linspace(0, 1, 41)
    y = 8600 * (1 - 0.75 * np.sin(np.pi * t) ** 2) * (1 + rng.normal(0, 0.02, 41))
    run = load_run(write_tb(tmp_path / "r", {"loss": (np.arange(41) * 50, y)}), tmp_path / "f.duckdb")
    assert list(FlatLoss().check(run)) == []
    still = 8600 * (1 + rng.normal(0, 0.02, 41))
    run = load_run(write_tb(tmp_path / "s", {"loss": (np.arange(41) * 50, still)}), tmp_path / "s.duckdb")
    assert len(list(FlatLoss().check(run))) == 1


@pytest.mark.parametrize("scatter, expect", [(0.3, 0), (0.01, 1)])
def test_a_loss_is_flat_within_its_noise_only_where_the_noise_can_tell(tmp_path, scatter, expect):
    """Eleven per-batch losses scattered ±30% around one level cannot be told from a 10% fall: no claim. The same
    level scattered ±1% can: flat."""
    y = 7.2 * (1 + np.random.default_rng(9).normal(0, scatter, 11))
    run = load_run(write_tb(tmp_path / "r", {"loss": (np.arange(11) * 2, y)}), tmp_path / "f.duckdb")
    assert len(list(FlatLoss().check(run))) == expect


@pytest.mark.parametrize("warming, expect", [(True, 0), (False, 1)])
def test_a_log_stopped_while_its_lr_still_warms_up_is_too_early_to_call_flat(tmp_path, warming, expect):
    """Ten steps of a language model at ln of its vocabulary while the LR still climbs at every step: the start
    every run has, too early to say it never moved. The same ten steps at a constant LR are flat."""
    steps = np.arange(10)
    y = 10.826 - 0.0045 * steps
    lr = 5.02e-7 * (steps + 1) if warming else np.full(10, 5e-4)
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, y), "lr": (steps, lr)}), tmp_path / "f.duckdb")
    assert len(list(FlatLoss().check(run))) == expect


def test_a_launch_that_resumes_below_where_the_log_began_holds_trained_weights(tmp_path):
    """Two launches appended to one log, the second counting its steps from 1 again: when it sits at the level the
    first one reached, well below where the log began, it resumed trained weights (silent); when it sits at the
    log's first level it never moved (flat, the log ends on it)."""
    rng = np.random.default_rng(8)
    first = 2.3 * np.exp(-np.arange(30) / 8) + 0.9
    for level, expect in ((0.92, 0), (3.2, 1)):
        second = level * (1 + rng.normal(0, 0.005, 30))
        lines = [f"step {i} loss {v:.4f}" for part in (first, second) for i, v in enumerate(part, 1)]
        root = tmp_path / f"r{expect}"
        root.mkdir()
        log_messages(root / "train.log", lines)
        found = list(FlatLoss().check(load_run(root, tmp_path / f"{expect}.duckdb")))
        assert len(found) == expect, [f.summary for f in found]
        assert all(f.evidence.get("launches") == 2 for f in found)


def test_a_short_log_whose_loss_and_accuracy_both_fail_to_improve_over_epochs_is_flat(tmp_path):
    """Six epochs whose loss ends a little above where it began while the accuracy ends below: two curves agreeing
    that nothing improved, under the trend test's 10 points (a warning: the weakest evidence). The same loss beside
    an accuracy that climbs says the model learns: silent."""
    loss = [0.912, 0.951, 0.933, 0.944, 0.962, 0.948]
    run = load_run(_keras_epochs(tmp_path / "stuck", loss, [0.31, 0.30, 0.29, 0.30, 0.28, 0.29]), tmp_path / "s.duckdb")
    [f] = FlatLoss().check(run)
    assert f.severity == "warning" and f.evidence["no_progress"] and f.evidence["epochs"] == 6
    assert "neither improved" in f.summary
    run = load_run(_keras_epochs(tmp_path / "ok", loss, [0.31, 0.35, 0.40, 0.46, 0.50, 0.55]), tmp_path / "o.duckdb")
    assert list(FlatLoss().check(run)) == []


def test_a_term_frozen_to_the_last_digit_beside_a_zero_gradient_is_flat_at_any_length(tmp_path):
    """Four records of an mmengine-style log: the total loss moves +0.2% with its batches, its term loss_dfl is
    66.5625 on every record and the gradient norm is exactly 0.0000: no gradient reaches the parameters. The same
    records with a gradient norm of ~12 are too few to call."""
    from forensics.judge.detectors import FlatLoss

    total = [208.4161, 208.5272, 209.1800, 208.8468]
    cls = [85.0224, 84.8246, 85.1599, 85.0197]
    for name, grad in (("zero", [0.0] * 4), ("live", [12.31, 11.87, 12.95, 12.02])):
        root = tmp_path / name
        root.mkdir()
        log_messages(root / "train.log", [
            f"Epoch(train)  [17][{50 * (i + 1)}/290]  lr: 1.7030e-03  grad_norm: {g:.4f}  loss: {t:.4f}  "
            f"loss_cls: {c:.4f}  loss_bbox: {t - c - 66.5625:.4f}  loss_dfl: 66.5625"
            for i, (t, c, g) in enumerate(zip(total, cls, grad))])
        found = list(FlatLoss().check(load_run(root, tmp_path / f"{name}.duckdb")))
        if name == "zero":
            [f] = found
            assert f.evidence["frozen_component"] == "loss_dfl" and "exactly 66.5625" in f.summary
        else:
            assert found == []


def test_flat_and_oscillation_read_the_epoch_means_beside_a_per_step_loss(tmp_path):
    """Lightning's TensorBoard tags: `train_loss_step` cycles through the same four batch losses every epoch (the data
    order: ±12%, autocorrelation at the lag of one epoch) while `train_loss_epoch` stands at 2.688e8 to five digits
    for 37 epochs. The shape is the epoch means': flat, and no oscillation."""
    from forensics.judge.detectors import FlatLoss, Oscillation

    batches = np.array([289062912.0, 288432992.0, 254839312.0, 211432752.0])
    per_step = np.tile(batches, 37) - 16.0 * np.arange(148)
    epoch = np.array([per_step[4 * e:4 * e + 4].mean() for e in range(37)])
    run = load_run(write_tb(tmp_path / "r", {"train_loss_step": (np.arange(148), per_step),
                                             "train_loss_epoch": (np.arange(37) * 4 + 3, epoch)}), tmp_path / "f.duckdb")
    [f] = FlatLoss().check(run)
    assert f.series == "train_loss_epoch"
    assert list(Oscillation().check(run)) == []


def test_a_per_step_loss_around_ln2_with_an_accuracy_at_one_half_is_at_chance_whatever_its_first_window(tmp_path):
    """A pairwise loss logged per step: single values scatter 0.3-1.2 around ln 2, the first window high, the accuracy
    at 0.5: the window means over the run never leave ln 2 beyond their own noise."""
    rng = np.random.default_rng(4)
    steps = np.arange(200)
    loss = math.log(2) * (1 + rng.normal(0, 0.3, 200))
    loss[:20] += 0.15
    acc = rng.choice([0.25, 0.5, 0.75], 200)
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss), "accuracy": (steps, acc)}), tmp_path / "f.duckdb")
    [f] = FlatLoss().check(run)
    assert f.evidence["chance_most"] and f.evidence["chance_k"] == 2 and f.severity == "critical"
    assert "ln 2" in f.summary


def test_a_binary_loss_that_slowly_learns_in_wide_per_step_noise_is_not_at_chance(tmp_path):
    """The healthy twin: the same per-step scatter around a loss that falls from ln 2 to 0.58 over the run."""
    rng = np.random.default_rng(4)
    steps = np.arange(200)
    loss = np.linspace(math.log(2), 0.58, 200) * (1 + rng.normal(0, 0.3, 200))
    acc = np.linspace(0.5, 0.7, 200)
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss), "accuracy": (steps, acc)}), tmp_path / "f.duckdb")
    assert [f for f in FlatLoss().check(run) if f.evidence.get("chance_most")] == []


def test_a_loss_near_ln2_for_the_whole_log_is_at_chance_without_a_class_count(tmp_path):
    """21 printed batch losses, 0.67-0.95, median 0.715, no class count nor accuracy: a binary guess's loss from the
    first record to the last."""
    loss = [0.8453, 0.706, 0.7176, 0.7719, 0.7318, 0.7629, 0.6901, 0.7032, 0.746, 0.9501, 0.7171, 0.7121, 0.700,
            0.717, 0.715, 0.694, 0.7056, 0.6715, 0.7135, 0.7463, 0.6967]
    (tmp_path / "r").mkdir()
    path = log_messages(tmp_path / "r" / "train.log", [f"batch step: {i + 5} loss: {v}" for i, v in enumerate(loss)])
    run = load_run(path.parent, tmp_path / "f.duckdb")
    [f] = FlatLoss().check(run)
    assert f.evidence["chance_source"] == "binary" and f.evidence["windows_at_chance"] == f.evidence["windows"]


def test_a_loss_that_fell_onto_ln2_is_not_a_binary_guess(tmp_path):
    """No class count: a loss that fell from 3 to 0.69 in its first tenth and holds there learned (plateau's)."""
    rng = np.random.default_rng(5)
    steps = np.arange(100) * 10
    loss = (math.log(2) + 2.3 * np.exp(-np.arange(100) / 3)) * (1 + rng.normal(0, 0.01, 100))
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    assert [f for f in FlatLoss().check(run) if f.evidence.get("chance_most")] == []


def test_a_term_exactly_0_in_training_beside_a_nonzero_held_out_twin_is_an_empty_term(tmp_path):
    """A segmenter's mask term exactly 0 at every epoch in training while its validation twin is not (the training
    labels hold no masks) and the class term trains: a warning naming the term. Its twin, the term 0 in both splits
    (a head the task does not use), is silent."""
    from forensics.judge.detectors import FlatLoss
    from tests.runwriters import load_run, write_tb

    steps = np.arange(50)
    cls = 113 * np.exp(-steps / 3) + 0.03
    val_seg = 3.49 + 0.01 * np.sin(steps)

    def series(val_seg):
        return {"train/seg_loss": (steps, np.zeros(50)), "train/cls_loss": (steps, cls),
                "val/seg_loss": (steps, val_seg), "val/cls_loss": (steps, 4.1 + 0.04 * steps)}

    run = load_run(write_tb(tmp_path / "empty", series(val_seg)), tmp_path / "e.duckdb")
    found = [f for f in FlatLoss().check(run) if "empty_term" in f.evidence]
    assert [(f.severity, f.series, f.evidence["held_out_twin"]) for f in found] == \
        [("warning", "train/seg_loss", "val/seg_loss")]
    twin = load_run(write_tb(tmp_path / "unused", series(np.zeros(50))), tmp_path / "u.duckdb")
    assert not [f for f in FlatLoss().check(twin) if "empty_term" in f.evidence]


@pytest.mark.parametrize("epochs, lr, expect", [([18] * 14, "", 0), ([18] * 14, " lr=0.001", 0), ([1] * 14, "", 1),
                                               ([1] * 14, " lr=0.001", 1), (list(range(6, 20)), "", 1)])
def test_a_level_held_in_an_excerpt_from_late_in_training_is_not_flat(tmp_path, epochs, lr, expect):
    """Fourteen losses scattered ±1.5% around 0.63, printed by Python's logging with their epoch of 20, with no LR or
    a constant one. Fourteen records of epoch 18 are an excerpt that hides more of the run than it shows: a level
    held there cannot be told from a converged one, whatever LR is printed beside it. The same lines from epoch 1, or
    one per epoch from epoch 6 to 19 (more shown than hidden), are a loss that never moved."""
    rng = np.random.default_rng(3)
    lines = [f"[Train Epoch: {e}/20] [{100 * i}/6034 images] loss={0.63 * (1 + 0.015 * rng.standard_normal()):.6f}{lr}"
             for i, e in enumerate(epochs, 1)]
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    run = load_run(log_messages(run_dir / "train.log", lines).parent, tmp_path / "f.duckdb")
    found = list(FlatLoss().check(run))
    assert len(found) == expect, [f.summary for f in found]


def test_a_small_fall_at_nearly_every_record_is_a_warning_not_a_loss_that_never_moved(tmp_path):
    """A summed negative log-likelihood near 1000 falling 1.3% at nearly every record is range-flat (under 3% of its
    level), but it moves far beyond its own noise: a warning. The same level scattered with no trend is critical."""
    rng = np.random.default_rng(1)
    steps = np.arange(1, 240) * 50
    slow = 995 + 13 * np.exp(-steps / 3000) + rng.normal(0, 0.01, steps.size)
    run = load_run(write_tb(tmp_path / "r", {"train_loss": (steps, slow)}), tmp_path / "f.duckdb")
    [f] = FlatLoss().check(run)
    assert f.severity == "warning" and f.evidence["mk_tau"] < -0.9 and "steadily" in f.summary
    still = 995 + rng.normal(0, 2.0, steps.size)
    run = load_run(write_tb(tmp_path / "s", {"train_loss": (steps, still)}), tmp_path / "s.duckdb")
    [f] = FlatLoss().check(run)
    assert f.severity == "critical" and abs(f.evidence["mk_tau"]) < 0.9


def test_a_log_from_the_first_epoch_on_a_step_axis_composed_from_epoch_and_batch_is_no_excerpt(tmp_path):
    """mmdetection's `Epoch [1][50/500]` lines, no LR printed, a loss scattered ±1.5% around 0.63 over the first
    epoch and the first line of the second: the reader composes the step from the 1-based epoch and the batch, so
    the axis opens past half its last step. The log opens at epoch 1, no excerpt: a loss that never moved."""
    rng = np.random.default_rng(3)
    lines = [f"Epoch [{e}][{b}/500]\ttime: 0.335, loss: {0.63 * (1 + 0.015 * rng.standard_normal()):.4f}"
             for e, b in [(1, b) for b in range(50, 501, 50)] + [(2, 50)]]
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    run = load_run(log_messages(run_dir / "train.log", lines).parent, tmp_path / "f.duckdb")
    steps = run.arrays("loss")[0]
    assert steps[0] > steps[-1] / 2  # an axis that, read alone, looks like a late excerpt
    [f] = FlatLoss().check(run)
    assert f.severity == "critical", f.summary


@pytest.mark.parametrize("first, expect", [(110, 0), (1, 1)])
def test_a_validation_loss_held_in_an_excerpt_from_late_in_training_is_not_flat(tmp_path, first, expect):
    """Keras' progress bar over fourteen epochs of 150, no LR printed: the training loss stands within 2% and the
    validation loss beside it within 1.5%. From epoch 110 the log is a converged tail whose start is not in it: the
    validation loss holding its level there says nothing of a model that never learned. From epoch 1, it does."""
    train = [0.1390, 0.1386, 0.1380, 0.1380, 0.1370, 0.1374, 0.1388, 0.1381, 0.1397, 0.1374, 0.1368, 0.1358, 0.1384,
             0.1355]
    val = [0.1953, 0.1951, 0.1954, 0.1953, 0.1957, 0.1959, 0.1957, 0.1955, 0.1955, 0.1975, 0.1972, 0.1976, 0.1974,
           0.1984]
    lines = []
    for e, (a, b) in enumerate(zip(train, val), first):
        lines += [f"Epoch {e}/150", f"500/500 [==============================] - 1486s - loss: {a:.4f} - val_loss: {b:.4f}"]
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    (run_dir / "train.log").write_text("\n".join(lines) + "\n")
    found = list(FlatLoss().check(load_run(run_dir, tmp_path / "f.duckdb")))
    assert len(found) == expect, [f.summary for f in found]


def test_a_per_step_loss_scattering_wide_around_one_level_is_flat_though_its_first_and_last_tenths_differ(tmp_path):
    """170 per-batch losses scattering ±13% around 90 with no trend: the medians of the first and last tenth (17
    points each) differ by 10% by chance alone, those of the first and last third by 2%: within its noise, it never
    moved. The same scatter over a loss that halves learned."""
    steps = np.arange(170)
    y = 90 * (1 + np.random.default_rng(28).normal(0, 0.13, steps.size))
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, y)}), tmp_path / "f.duckdb")
    [f] = FlatLoss().check(run)
    assert f.severity == "critical" and f.evidence["still"] and f.evidence["edge_points"] == 57
    falling = y * np.linspace(1.0, 0.5, steps.size)
    run = load_run(write_tb(tmp_path / "d", {"loss": (steps, falling)}), tmp_path / "d.duckdb")
    assert list(FlatLoss().check(run)) == []


def test_a_loss_that_fell_from_its_first_value_then_froze_to_the_last_digit_is_plateaus(tmp_path):
    """34.65 at the first record, then 3.6976 at every one after: the loss learned, then stopped (DECISIONS §17:
    plateau). The same pin from a first value beside it never moved: flat_loss."""
    from forensics.judge.detectors import Plateau

    steps = np.arange(10)
    fell = np.array([34.6456] + [3.6976] * 9)
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, fell)}), tmp_path / "f.duckdb")
    assert list(FlatLoss().check(run)) == []
    [p] = Plateau().check(run)
    assert p.evidence["frozen"] and p.evidence["level"] == pytest.approx(3.6976) and p.step == 1
    still = np.array([3.6981] + [3.6976] * 9)
    run = load_run(write_tb(tmp_path / "s", {"loss": (steps, still)}), tmp_path / "s.duckdb")
    [f] = FlatLoss().check(run)
    assert f.kind == "flat_loss" and f.evidence["last_level"] == pytest.approx(3.6976)
    assert list(Plateau().check(run)) == []


def _grpo_history(rewards: np.ndarray) -> list[dict]:
    """A GRPO trainer's log entries as TRL writes them into trainer_state.json: a surrogate loss near 0 (the
    advantage of a group scored alike is 0), the group reward, its spread and the share of groups scored alike."""
    rng = np.random.default_rng(3)
    return [{"loss": float(rng.normal(1e-5, 2e-6)), "grad_norm": float(rng.uniform(5e-4, 2e-3)),
             "learning_rate": 5e-6 * (1 - i / rewards.size), "reward": float(r), "reward_std": 0.25 * bool(r),
             "frac_reward_zero_std": 1.0 - 0.25 * bool(r), "epoch": round(i / rewards.size, 4), "step": i + 1}
            for i, r in enumerate(rewards)]


def test_an_rl_reward_one_value_on_nearly_every_record_is_flat_and_a_rising_one_is_not(tmp_path):
    """An RL run's losses chase moving targets and are not judged; its reward is. Exactly 0 on 85 of 100 records,
    its last third too: the agent is scored alike whatever it does, nothing is learned (a warning: not every
    record). A reward that starts at 0 and rises learned: silent."""
    from tests.runwriters import write_trainer_state

    rewards = np.zeros(100)
    rewards[::7] = 0.0625
    run = load_run(write_trainer_state(tmp_path / "r", _grpo_history(rewards)), tmp_path / "f.duckdb")
    [f] = FlatLoss().check(run)
    assert f.severity == "warning" and f.series == "reward" and f.evidence["reward_value"] == 0.0
    assert f.evidence["reward_share"] == pytest.approx(85 / 100)
    rising = np.where(np.arange(100) < 40, 0.0, np.linspace(0, 0.8, 100))
    run = load_run(write_trainer_state(tmp_path / "d", _grpo_history(rising)), tmp_path / "d.duckdb")
    assert list(FlatLoss().check(run)) == []


# TRL's GRPOTrainer printing its log dicts under nohup: 100 steps logged every 10, the loss 0.0 at each (beta x KL, by
# construction), the reward never rising. Source: LIU-Hao-2002/GRPO_project@0983847ee400603cbf7402314a94e1caa816bb02:
# logs/nohup.out, lines 25-34.
GRPO_LOG = """\
{'loss': 0.0, 'grad_norm': 0.0001810328394640237, 'learning_rate': 4.877641290737883e-07, 'completion_length': 386.55, 'rewards/format_reward_func': 0.1, 'rewards/equation_reward_func': 0.0, 'reward': 0.1, 'reward_std': 0.1414213538169861, 'kl': 0.00035761669278144836, 'epoch': 2.5}
{'loss': 0.0, 'grad_norm': 0.20586903393268585, 'learning_rate': 4.5225424859373684e-07, 'completion_length': 382.2, 'rewards/format_reward_func': 0.5, 'rewards/equation_reward_func': 0.0, 'reward': 0.5, 'reward_std': 0.42426406145095824, 'kl': 0.0005637383350403979, 'epoch': 5.0}
{'loss': 0.0, 'grad_norm': 0.21534258127212524, 'learning_rate': 3.9694631307311825e-07, 'completion_length': 433.4, 'rewards/format_reward_func': 0.4, 'rewards/equation_reward_func': 0.0, 'reward': 0.4, 'reward_std': 0.2828427076339722, 'kl': 0.0005828175460919737, 'epoch': 7.5}
{'loss': 0.0, 'grad_norm': 1.664099545450881e-05, 'learning_rate': 3.272542485937368e-07, 'completion_length': 329.1, 'rewards/format_reward_func': 0.35, 'rewards/equation_reward_func': 0.0, 'reward': 0.35, 'reward_std': 0.3535533845424652, 'kl': 0.0005529642367037013, 'epoch': 10.0}
{'loss': 0.0, 'grad_norm': 0.1860731840133667, 'learning_rate': 2.5e-07, 'completion_length': 346.2, 'rewards/format_reward_func': 0.55, 'rewards/equation_reward_func': 0.0, 'reward': 0.55, 'reward_std': 0.49497473835945127, 'kl': 0.000541963946307078, 'epoch': 12.5}
{'loss': 0.0, 'grad_norm': 3.4347816836088896e-05, 'learning_rate': 1.7274575140626315e-07, 'completion_length': 442.35, 'rewards/format_reward_func': 0.35, 'rewards/equation_reward_func': 0.0, 'reward': 0.35, 'reward_std': 0.3535533845424652, 'kl': 0.0005315755086485296, 'epoch': 15.0}
{'loss': 0.0, 'grad_norm': 0.19414924085140228, 'learning_rate': 1.0305368692688174e-07, 'completion_length': 337.3, 'rewards/format_reward_func': 0.4, 'rewards/equation_reward_func': 0.0, 'reward': 0.4, 'reward_std': 0.42426406145095824, 'kl': 0.0004842475726036355, 'epoch': 17.5}
{'loss': 0.0, 'grad_norm': 0.15461957454681396, 'learning_rate': 4.774575140626316e-08, 'completion_length': 430.0, 'rewards/format_reward_func': 0.35, 'rewards/equation_reward_func': 0.0, 'reward': 0.35, 'reward_std': 0.3535533845424652, 'kl': 0.0005884776415769011, 'epoch': 20.0}
{'loss': 0.0, 'grad_norm': 1.8376074876869097e-05, 'learning_rate': 1.2235870926211616e-08, 'completion_length': 363.75, 'rewards/format_reward_func': 0.4, 'rewards/equation_reward_func': 0.0, 'reward': 0.4, 'reward_std': 0.42426406145095824, 'kl': 0.000555477401940152, 'epoch': 22.5}
{'loss': 0.0, 'grad_norm': 0.21216867864131927, 'learning_rate': 0.0, 'completion_length': 375.7, 'rewards/format_reward_func': 0.35, 'rewards/equation_reward_func': 0.0, 'reward': 0.35, 'reward_std': 0.3535533845424652, 'kl': 0.0005078203976154327, 'epoch': 25.0}
"""


def test_a_reward_that_ends_no_higher_than_it_began_is_an_agent_that_does_not_learn(tmp_path):
    """An RL run's losses are not judged as a falling loss; its reward is: 0.1, 0.5, 0.4 ... 0.35 over ten records,
    its last third's median (0.35) under its first third's (0.4), no upward trend. A warning that names the reward;
    where a trend is asked for at z -1 (the reward fell at least that much) it stays silent."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "nohup.out").write_text(GRPO_LOG)
    run = load_run(tmp_path / "run", tmp_path / "f.duckdb")
    [f] = FlatLoss().check(run)
    assert f.severity == "warning" and f.evidence["reward_series"] == "reward" and f.evidence["points"] == 10
    assert f.evidence["first_level"] == 0.1 and f.evidence["last_level"] == 0.35
    assert "the reward does not improve over its 10 records" in f.summary
    assert list(FlatLoss(reward_rise_z=-1.0).check(run)) == []


# A fine-tune's epoch table as printed (google-research/bert issue 855): train_loss, train_acc, valid_loss, valid_ac.
FROZEN_SCORE_LOG = """\
Epoch: 01 | Epoch Time: 0m 57s
*******train_loss,train_acc,valid_loss,valid_ac**********
5.200893470219204	2.790178544819355	4.977107011354887	3.6057692021131516
Epoch: 02 | Epoch Time: 0m 57s
*******train_loss,train_acc,valid_loss,valid_ac**********
5.085730476038797	2.287946455180645	4.954357807452862	3.6057692021131516
Epoch: 03 | Epoch Time: 0m 58s
*******train_loss,train_acc,valid_loss,valid_ac**********
5.019492668764932	2.901785634458065	4.961122549497164	3.6057692021131516
Epoch: 04 | Epoch Time: 0m 58s
*******train_loss,train_acc,valid_loss,valid_ac**********
5.0052995937211175	3.57142873108387	4.9535566843473	3.6057692021131516
Epoch: 05 | Epoch Time: 0m 58s
*******train_loss,train_acc,valid_loss,valid_ac**********
5.003523528575897	3.23660708963871	4.9652618261484	3.6057692021131516
Epoch: 06 | Epoch Time: 0m 58s
*******train_loss,train_acc,valid_loss,valid_ac**********
5.010107040405273	3.29241082072258	4.96296108686007	3.6057692021131516
Epoch: 07 | Epoch Time: 0m 58s
*******train_loss,train_acc,valid_loss,valid_ac**********
5.028377030576978	2.678571455180645	4.94510478239793	3.6057692021131516
"""

# A recommender's log as printed (Oneflow-Inc/models pull 385): the training loss and an AUC at each step.
FROZEN_AUC_LOG = """\
Rank[0], Step 70, AUC 0.60486, Eval_time 0.02 s, AUC_time 0.00 s, Eval_samples 640, GPU_Memory 4238 MiB, Host_Memory 29851 MiB, 2022-09-07 07:53:43
Rank[0], Step 71, Loss 3.0717, Latency 17.930 ms, Throughput 3569.4, 2022-09-07 07:53:43
Rank[0], Step 71, AUC 0.60486, Eval_time 0.02 s, AUC_time 0.00 s, Eval_samples 640, GPU_Memory 4238 MiB, Host_Memory 29851 MiB, 2022-09-07 07:53:43
Rank[0], Step 72, Loss 2.9696, Latency 18.266 ms, Throughput 3503.8, 2022-09-07 07:53:43
Rank[0], Step 72, AUC 0.60486, Eval_time 0.02 s, AUC_time 0.00 s, Eval_samples 640, GPU_Memory 4238 MiB, Host_Memory 29851 MiB, 2022-09-07 07:53:44
Rank[0], Step 73, Loss 2.9164, Latency 18.047 ms, Throughput 3546.3, 2022-09-07 07:53:44
Rank[0], Step 73, AUC 0.60486, Eval_time 0.02 s, AUC_time 0.00 s, Eval_samples 640, GPU_Memory 4238 MiB, Host_Memory 29851 MiB, 2022-09-07 07:53:44
Rank[0], Step 74, Loss 3.2112, Latency 18.301 ms, Throughput 3497.2, 2022-09-07 07:53:44
Rank[0], Step 74, AUC 0.60486, Eval_time 0.02 s, AUC_time 0.00 s, Eval_samples 640, GPU_Memory 4238 MiB, Host_Memory 29851 MiB, 2022-09-07 07:53:44
Rank[0], Step 75, Loss 2.9350, Latency 18.151 ms, Throughput 3525.9, 2022-09-07 07:53:44
Rank[0], Step 75, AUC 0.60486, Eval_time 0.02 s, AUC_time 0.00 s, Eval_samples 640, GPU_Memory 4238 MiB, Host_Memory 29851 MiB, 2022-09-07 07:53:44
"""

# A healthy short run as printed (mikekestemont/DeepScript issue 3): Keras `fit` once per outer epoch, then the
# validation accuracy on a 14-sample dev set; it changes once, then repeats.
MOVED_SCORE_LOG = """\
Epoch 1/1
360/360 [==============================] - 11s 31ms/step - loss: 1.1237 - accuracy: 0.5167
  curr val acc: 0.5714285714285714
    -> saving model
augmenting train!
   > 0
Epoch 1/1
360/360 [==============================] - 11s 31ms/step - loss: 1.0820 - accuracy: 0.5111
  curr val acc: 0.35714285714285715
augmenting train!
   > 0
Epoch 1/1
360/360 [==============================] - 11s 31ms/step - loss: 1.0603 - accuracy: 0.5389
  curr val acc: 0.35714285714285715
augmenting train!
   > 0
Epoch 1/1
360/360 [==============================] - 11s 31ms/step - loss: 1.0549 - accuracy: 0.5556
  curr val acc: 0.35714285714285715
augmenting train!
   > 0
Epoch 1/1
360/360 [==============================] - 11s 31ms/step - loss: 1.0464 - accuracy: 0.5417
  curr val acc: 0.35714285714285715
"""


@pytest.mark.parametrize("text, name, value, evaluations", [(FROZEN_SCORE_LOG, "valid_ac", 3.6057692021131516, 7),
                                                             (FROZEN_AUC_LOG, "AUC", 0.60486, 6)])
def test_a_held_out_score_identical_at_every_evaluation_while_the_loss_moves_is_flat(tmp_path, text, name, value,
                                                                                     evaluations):
    """A held-out score the same to its last printed digit at every one of 5+ evaluations while the training loss
    beside it moves: the model's answers on held-out data never change (one class answered). Too short for the
    trend rules, the log is judged by this alone."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "train.log").write_text(text)
    run = load_run(tmp_path / "run", tmp_path / "f.duckdb")
    assert FlatLoss().unavailable(run) is None
    [f] = FlatLoss().check(run)
    assert f.severity == "warning" and f.evidence["score_series"] == name
    assert f.evidence["score_value"] == value and f.evidence["evaluations"] == evaluations
    assert f"{name} is exactly {value!r} at every one of its {evaluations} evaluations" in f.summary
    assert list(FlatLoss(frozen_score_evals=evaluations + 1).check(run)) == []


def test_a_short_held_out_score_that_moved_once_then_repeats_is_not_frozen(tmp_path):
    """A healthy run's validation accuracy on a tiny dev set: 0.571 at the first epoch, then one value at the four
    after it, beside a slowly falling training loss. Not identical at every evaluation: silent, and still too
    short for the trend rules."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "output.txt").write_text(MOVED_SCORE_LOG)
    run = load_run(tmp_path / "run", tmp_path / "f.duckdb")
    assert list(FlatLoss().check(run)) == []
    assert FlatLoss().unavailable(run) is not None


# An Ultralytics YOLOv8 `results.csv` as the trainer wrote it, stopped after 4 of 100 epochs
# (AlexanderHargrave/CrackingCandyCrush@d621dcc20201764ebc132ff5c279b8c154e14173:runs/detect/train/results.csv).
YOLO_NOTHING_FOUND = """\
epoch,time,train/box_loss,train/cls_loss,train/dfl_loss,metrics/precision(B),metrics/recall(B),metrics/mAP50(B),metrics/mAP50-95(B),val/box_loss,val/cls_loss,val/dfl_loss,lr/pg0,lr/pg1,lr/pg2
1,3.034,1.84939,4.04557,1.66262,0,0,0,0,1.05256,4.13232,0.9931,0,0,0
2,6.162,1.91823,4.11133,1.39312,0,0,0,0,1.03467,4.13322,0.98571,1.41485e-05,1.41485e-05,1.41485e-05
3,9.102,1.71842,4.07727,1.46494,0,0,0,0,0.99828,4.13079,0.97236,2.80141e-05,2.80141e-05,2.80141e-05
4,12.343,2.07457,4.1148,1.30462,0,0,0,0,0.96,4.12627,0.95413,4.15968e-05,4.15968e-05,4.15968e-05
"""

# A healthy Ultralytics run's first 4 epochs, as written (the file's first five lines;
# AbdulWahid-1/Public_Wildfire_Smoke_Segmenter@63f1b47107efb50d0638e18c106a24e10f0a6627:runs/detect/train/results.csv).
YOLO_FINDS = """\
epoch,time,train/box_loss,train/cls_loss,train/dfl_loss,metrics/precision(B),metrics/recall(B),metrics/mAP50(B),metrics/mAP50-95(B),val/box_loss,val/cls_loss,val/dfl_loss,lr/pg0,lr/pg1,lr/pg2
1,439.634,1.9819,2.88793,1.82889,0.24127,0.25305,0.15592,0.05739,2.21744,2.98478,2.02982,0.000554861,0.000554861,0.000554861
2,900.323,1.9649,2.32964,1.81031,0.23317,0.25085,0.15693,0.05354,2.43878,2.852,2.27075,0.00107388,0.00107388,0.00107388
3,1354.75,1.93449,2.23365,1.80287,0.35998,0.38169,0.29874,0.12096,2.06244,2.17832,1.82794,0.00155623,0.00155623,0.00155623
4,1842.3,1.91405,2.13205,1.75502,0.38319,0.38853,0.31959,0.13236,2.06161,2.1307,1.84943,0.00150197,0.00150197,0.00150197
"""


def _results_csv(tmp_path, name: str, text: str):
    (tmp_path / name).mkdir()
    (tmp_path / name / "results.csv").write_text(text)
    return load_run(tmp_path / name, tmp_path / f"{name}.duckdb")


def test_every_held_out_score_exactly_0_while_the_loss_does_not_move_is_flat_at_any_length(tmp_path):
    """Four epochs of a detector: the summed training loss 7.56 → 7.49 (-0.8%), and precision, recall and both mAPs
    exactly 0 at every evaluation. Too short for the trend rules; the held-out scores say the model finds nothing."""
    run = _results_csv(tmp_path, "nothing", YOLO_NOTHING_FOUND)
    assert FlatLoss().unavailable(run) is None
    [f] = FlatLoss().check(run)
    assert f.severity == "warning" and f.evidence["scores_zero"] and f.evidence["evaluations"] == 4
    assert "metrics/mAP50(B)" in f.evidence["score_series"]
    assert "is exactly 0 at each of its 4 evaluations" in f.summary and "7.55758 at" in f.summary
    assert list(FlatLoss(zero_score_evals=5).check(run)) == []


def test_held_out_scores_above_0_beside_a_short_loss_are_not_flat(tmp_path):
    """A healthy detector's first four epochs: its summed loss falls 9%, its scores are small but not 0 from the
    first evaluation. Silent, and still silent with the loss's tolerance widened past that fall: the scores decide."""
    run = _results_csv(tmp_path, "finds", YOLO_FINDS)
    assert list(FlatLoss().check(run)) == []
    assert list(FlatLoss(still_tol=0.2).check(run)) == []


# HF Trainer log_history entries (step, loss, learning_rate, grad_norm, epoch), a LoRA fine-tune of 60 steps whose
# linear schedule runs out (Artaccann/OSOL_backend@2ee7c2ab98272d54ac4a4973d283a252d2988017:outputs/trainer_state.json).
LORA_SCHEDULE_STILL = [
    (1, 0.7747, 0.0, 0.20433159172534943, 8e-05), (2, 0.839, 4e-05, 0.2122717648744583, 0.00016),
    (3, 1.0758, 8e-05, 0.25381404161453247, 0.00024), (4, 0.8919, 0.00012, 0.20973287522792816, 0.00032),
    (5, 0.7575, 0.00016, 0.18391942977905273, 0.0004), (6, 0.9373, 0.0002, 0.2080235779285431, 0.00048),
    (7, 0.6192, 0.00019636363636363636, 0.14907974004745483, 0.00056),
    (8, 0.9986, 0.00019272727272727274, 0.19817879796028137, 0.00064),
    (9, 0.8596, 0.0001890909090909091, 0.1355312168598175, 0.00072),
    (10, 0.7613, 0.00018545454545454545, 0.17098936438560486, 0.0008),
    (11, 0.8842, 0.00018181818181818183, 0.14256058633327484, 0.00088),
    (12, 1.0942, 0.0001781818181818182, 0.17233604192733765, 0.00096),
    (13, 0.954, 0.00017454545454545454, 0.20557226240634918, 0.00104),
    (14, 0.6416, 0.0001709090909090909, 0.1405242532491684, 0.00112),
    (15, 0.8773, 0.00016727272727272728, 0.15859927237033844, 0.0012),
    (16, 0.6391, 0.00016363636363636366, 0.17663510143756866, 0.00128),
    (17, 1.0032, 0.00016, 0.17703670263290405, 0.00136),
    (18, 0.8272, 0.00015636363636363637, 0.19158263504505157, 0.00144),
    (19, 0.7694, 0.00015272727272727275, 0.14632749557495117, 0.00152),
    (20, 0.9345, 0.0001490909090909091, 0.2029329389333725, 0.0016),
    (21, 0.9027, 0.00014545454545454546, 0.16592198610305786, 0.00168),
    (22, 0.857, 0.00014181818181818184, 0.15489737689495087, 0.00176),
    (23, 1.0363, 0.0001381818181818182, 0.1312248259782791, 0.00184),
    (24, 0.8846, 0.00013454545454545455, 0.21672165393829346, 0.00192),
    (25, 0.6418, 0.00013090909090909093, 0.1634986251592636, 0.002),
    (26, 0.8272, 0.00012727272727272728, 0.1775561422109604, 0.00208),
    (27, 0.8292, 0.00012363636363636364, 0.21372003853321075, 0.00216),
    (28, 0.7877, 0.00012, 0.208965003490448, 0.00224),
    (29, 1.0866, 0.00011636363636363636, 0.1758505403995514, 0.00232),
    (30, 1.036, 0.00011272727272727272, 0.17396751046180725, 0.0024),
    (31, 0.708, 0.00010909090909090909, 0.21014969050884247, 0.00248),
    (32, 0.5418, 0.00010545454545454545, 0.14205017685890198, 0.00256),
    (33, 0.6553, 0.00010181818181818181, 0.2080063372850418, 0.00264),
    (34, 0.5803, 9.818181818181818e-05, 0.15632915496826172, 0.00272),
    (35, 0.7623, 9.454545454545455e-05, 0.17542311549186707, 0.0028),
    (36, 1.0035, 9.090909090909092e-05, 0.18490585684776306, 0.00288),
    (37, 0.901, 8.727272727272727e-05, 0.2018655687570572, 0.00296),
    (38, 0.7173, 8.363636363636364e-05, 0.15413452684879303, 0.00304),
    (39, 0.7794, 8e-05, 0.16898858547210693, 0.00312),
    (40, 1.0003, 7.636363636363637e-05, 0.17043080925941467, 0.0032),
    (41, 0.7459, 7.272727272727273e-05, 0.18269474804401398, 0.00328),
    (42, 1.0079, 6.90909090909091e-05, 0.18996332585811615, 0.00336),
    (43, 0.7711, 6.545454545454546e-05, 0.159293070435524, 0.00344),
    (44, 0.8151, 6.181818181818182e-05, 0.1823977530002594, 0.00352),
    (45, 0.7628, 5.818181818181818e-05, 0.1885136514902115, 0.0036),
    (46, 0.8636, 5.4545454545454546e-05, 0.19405531883239746, 0.00368),
    (47, 0.7876, 5.090909090909091e-05, 0.21118508279323578, 0.00376),
    (48, 0.6528, 4.7272727272727275e-05, 0.15167373418807983, 0.00384),
    (49, 1.0168, 4.3636363636363636e-05, 0.2552920877933502, 0.00392),
    (50, 1.0324, 4e-05, 0.15772703289985657, 0.004),
    (51, 0.4573, 3.6363636363636364e-05, 0.12787394225597382, 0.00408),
    (52, 0.9078, 3.272727272727273e-05, 0.14768052101135254, 0.00416),
    (53, 1.3177, 2.909090909090909e-05, 0.798293948173523, 0.00424),
    (54, 0.7083, 2.5454545454545454e-05, 0.196310356259346, 0.00432),
    (55, 1.0616, 2.1818181818181818e-05, 0.2360592931509018, 0.0044),
    (56, 1.1254, 1.8181818181818182e-05, 0.1530216932296753, 0.00448),
    (57, 0.7252, 1.4545454545454545e-05, 0.13527268171310425, 0.00456),
    (58, 0.8366, 1.0909090909090909e-05, 0.15090928971767426, 0.00464),
    (59, 0.7567, 7.272727272727272e-06, 0.15624146163463593, 0.00472),
    (60, 0.9246, 3.636363636363636e-06, 0.18371014297008514, 0.0048),
]

# The same writer, a healthy LoRA fine-tune of 250 steps under a linear schedule run out to 0
# (One-eyed-warrior/lora-finetuning@cc870af9441cb3815e934d5a5f6e08cae43eee69:trainer_state.json).
LORA_SCHEDULE_LEARNS = [
    (10, 2.3136, 8e-05, 0.8103469014167786, 0.04), (20, 1.831, 0.00016, 0.5616092085838318, 0.08),
    (30, 1.4647, 0.00019555555555555556, 0.2978419363498688, 0.12),
    (40, 1.3932, 0.0001866666666666667, 0.30459222197532654, 0.16),
    (50, 1.3816, 0.00017777777777777779, 0.2766367197036743, 0.2),
    (60, 1.3809, 0.00016888888888888889, 0.31277772784233093, 0.24),
    (70, 1.3865, 0.00016, 0.29635027050971985, 0.28), (80, 1.2992, 0.0001511111111111111, 0.2840806543827057, 0.32),
    (90, 1.3517, 0.00014222222222222224, 0.29472434520721436, 0.36),
    (100, 1.3532, 0.00013333333333333334, 0.2759789824485779, 0.4),
    (110, 1.2893, 0.00012444444444444444, 0.24423250555992126, 0.44),
    (120, 1.3359, 0.00011555555555555555, 0.29686439037323, 0.48),
    (130, 1.3203, 0.00010666666666666667, 0.27509060502052307, 0.52),
    (140, 1.2782, 9.777777777777778e-05, 0.28742656111717224, 0.56),
    (150, 1.3275, 8.888888888888889e-05, 0.3086911141872406, 0.6), (160, 1.2634, 8e-05, 0.25337299704551697, 0.64),
    (170, 1.3276, 7.111111111111112e-05, 0.2784254550933838, 0.68),
    (180, 1.2977, 6.222222222222222e-05, 0.28765884041786194, 0.72),
    (190, 1.265, 5.333333333333333e-05, 0.29155972599983215, 0.76),
    (200, 1.2969, 4.4444444444444447e-05, 0.2914190888404846, 0.8),
    (210, 1.2624, 3.555555555555556e-05, 0.2861250340938568, 0.84),
    (220, 1.3307, 2.6666666666666667e-05, 0.2943790853023529, 0.88),
    (230, 1.3437, 1.777777777777778e-05, 0.31870919466018677, 0.92),
    (240, 1.3125, 8.88888888888889e-06, 0.30558088421821594, 0.96), (250, 1.2819, 0.0, 0.28666526079177856, 1.0),
]


def _trainer_state(tmp_path, name: str, rows):
    from tests.runwriters import write_trainer_state

    history = [{"epoch": e, "grad_norm": g, "learning_rate": lr, "loss": loss, "step": step}
               for step, loss, lr, g, e in rows]
    return load_run(write_trainer_state(tmp_path / name, history), tmp_path / f"{name}.duckdb")


def test_a_noisy_loss_that_a_whole_lr_schedule_does_not_move_is_flat(tmp_path):
    """Sixty per-step losses scattering 0.54-1.09 while the LR warms up to 2e-4 and decays to 3.6e-6: the first
    third's median 0.868, the last's 0.826, no trend. Per-step noise this wide cannot resolve a 5% move, which kept
    the trend rule silent; but the whole schedule was spent and the loss ends where it began: a warning that says
    what the noise leaves open."""
    run = _trainer_state(tmp_path, "still", LORA_SCHEDULE_STILL)
    [f] = FlatLoss().check(run)
    assert f.severity == "warning" and f.evidence["over_schedule"] and f.evidence["noise_bound"] > 0.05
    assert "while the LR ran its schedule from 0.0002 down to 3.64e-06" in f.summary
    assert list(FlatLoss(schedule_end=0.01).check(run)) == []


def test_a_loss_that_falls_over_a_whole_lr_schedule_is_not_flat(tmp_path):
    """A healthy LoRA fine-tune under the same kind of schedule: 2.31 → 1.28. Silent."""
    run = _trainer_state(tmp_path, "learns", LORA_SCHEDULE_LEARNS)
    assert list(FlatLoss().check(run)) == []


def test_a_smooth_fall_over_the_first_records_then_a_creep_back_moved(tmp_path):
    """An epoch-mean loss falling 6% over its first 8 of 78 records, far beyond its 0.05% noise (4.26 → 3.99), then
    creeping back to 4.09 beside a validation loss of the same shape: the medians of its first and last tenths
    differ by 1% only, yet it moved (plateau's or divergence's question, never "it never moved"). A loss as noisy
    as that fall stays flat."""
    rng = np.random.default_rng(3)
    steps = np.arange(78)
    shape = np.where(steps < 8, 4.26 - 0.27 * (1 - np.exp(-steps / 2.5)) / (1 - np.exp(-7 / 2.5)),
                     3.99 + 0.1 * (steps - 8) / 70)
    loss = shape * (1 + rng.normal(0, 0.0005, steps.size))
    val = (shape - 0.08) * (1 + rng.normal(0, 0.0005, steps.size))
    run = load_run(write_tb(tmp_path / "a", {"train/loss": (steps, loss), "val/loss": (steps, val)}),
                   tmp_path / "a.duckdb")
    assert list(FlatLoss().check(run)) == []
    noisy = 4.1 * (1 + rng.normal(0, 0.04, steps.size))
    run = load_run(write_tb(tmp_path / "b", {"train/loss": (steps, noisy)}), tmp_path / "b.duckdb")
    assert [f.kind for f in FlatLoss().check(run)] == ["flat_loss"]
