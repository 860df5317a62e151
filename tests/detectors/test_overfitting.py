"""overfitting on real TensorBoard event files."""

import numpy as np
import pytest

from forensics.judge.detectors import Overfitting
from tests.runwriters import curve, load_run, write_tb



def _val(rise: bool, seed=0):
    rng = np.random.default_rng(seed)
    steps = np.arange(0, 3000, 100)
    v = 0.6 + 1.7 * np.exp(-steps / 500) + (0.0004 * np.maximum(0, steps - 1200) if rise else 0)
    return steps, v + rng.normal(0, 0.01, steps.size)


def test_fires_at_the_validation_minimum(tmp_path):
    run = load_run(write_tb(tmp_path / "r", {"train/loss": curve(), "val/loss": _val(True)}), tmp_path / "f.duckdb")
    [f] = Overfitting().check(run)
    assert abs(f.step - 1300) <= 0.05 * 3000 and f.evidence["val_rise"] > 0.3


def test_no_rise_is_silent(tmp_path):
    run = load_run(write_tb(tmp_path / "r", {"train/loss": curve(), "val/loss": _val(False)}), tmp_path / "f.duckdb")
    assert list(Overfitting().check(run)) == []


def test_a_training_loss_that_rises_too_is_divergence_not_overfitting(tmp_path):
    """The catalog's overfitting needs a training loss that keeps falling. Here validation goes from ~0.7 to ~40
    while training, after its minimum, climbs ×13: the run diverges (the absolute rises, +13 against +39, would
    pass the half-the-validation-rise rule alone)."""
    steps = np.arange(0, 3000, 10)
    train = 0.6 + 1.7 * np.exp(-steps / 300) + np.where(steps > 1500, (steps - 1500) / 1500 * 13, 0)
    vs, v = steps[::10], 0.6 + 1.7 * np.exp(-steps[::10] / 300) + np.where(steps[::10] > 1500,
                                                                           (steps[::10] - 1500) / 1500 * 39, 0)
    run = load_run(write_tb(tmp_path / "r", {"train/loss": (steps, train), "val/loss": (vs, v)}), tmp_path / "f.duckdb")
    # the relative rule and the falling-training rule decide it: either alone keeps it silent
    assert list(Overfitting(max_train_rise=float("inf"), min_train_fall=-float("inf")).check(run))
    assert list(Overfitting(max_train_rise=float("inf")).check(run)) == []
    assert list(Overfitting().check(run)) == []


def test_a_steady_rise_smaller_than_three_point_sigmas_counts(tmp_path):
    """The validation loss a long MLP run near 0.1 logged (corpus holdout2, healthy_mlp_long_sgd_constant_long_r4:
    14 evaluations while training falls 0.70 -> 0.003): it bottoms at 0.094 and climbs to 0.13-0.23 in noisy steps.
    The rise is under three point sigmas, but the evaluations after the minimum trend up on their own
    (Mann-Kendall p < 0.01) and validation is the smoother of the two: that is overfitting. The same values in
    an order without a trend stay silent. Beside a training loss smoother than it, the point rules leave the jumps
    to val_noise, and the level rule reads it: medians of three evaluations climb +60% from their minimum, many
    times the scatter of such a median."""
    steps = np.arange(178, 2493, 178)
    val = np.array([0.129633, 0.092615, 0.093741, 0.116627, 0.102280, 0.089965, 0.126430, 0.107821, 0.138788,
                    0.122261, 0.134817, 0.166401, 0.227755, 0.132618])
    train = curve(n=250, start=0.7, floor=0.003, tau=300, noise=0.3)  # single batches near 0: ±30%
    run = load_run(write_tb(tmp_path / "a", {"train/loss": train, "val/loss": (steps, val)}), tmp_path / "a.duckdb")
    [f] = Overfitting().check(run)
    assert f.step == 356 and f.evidence["val_rise"] < 3 * f.evidence["val_noise"]
    # the three-sigma rule alone misses it (training falling 0.70 -> 0.003 takes it as memorisation too; the mild-rise
    # rule, whose Kendall tau the healthy pool set at 0.3, reads the same rise, so it is turned off here as well)
    assert list(Overfitting(trend_p=0, memorise_train_left=0, scatter_tau=1.1).check(run)) == []
    untrended = val[[0, 1, 12, 2, 11, 3, 8, 4, 10, 5, 9, 6, 13, 7]]  # the same values, high and low interleaved
    run = load_run(write_tb(tmp_path / "b", {"train/loss": train, "val/loss": (steps, untrended)}), tmp_path / "b.duckdb")
    assert list(Overfitting().check(run)) == []
    smooth_train = curve(n=250, start=0.7, floor=0.003, tau=300, noise=0.005)
    run = load_run(write_tb(tmp_path / "c", {"train/loss": smooth_train, "val/loss": (steps, val)}), tmp_path / "c.duckdb")
    assert list(Overfitting(wide_min_evals=40, scatter_tau=1.1).check(run)) == []  # the level and mild-rise rules off
    [f] = Overfitting().check(run)
    assert f.evidence["smoothed"] and f.evidence["val_rise_relative"] > 0.5


def test_training_after_the_last_evaluation_does_not_make_a_divergence_look_like_overfitting(tmp_path):
    """A corpus run of a real bug (LR far too high, HF Trainer's log): validation rises ×100 from its minimum
    while training climbs toward its blow-up; then HF logs 0.0 for every window of NaN losses. Training is read
    over the validation rise's own span, so the logged 0.0s after the last finite evaluation cannot make it
    "keep falling"."""
    from corpus.build import build_run
    from corpus.spec import all_specs

    [spec] = [s for s in all_specs() if s.name == "nan_lr_regression_60_r7"]
    build_run(spec, tmp_path / spec.name)
    run = load_run(tmp_path / spec.name, tmp_path / "f.duckdb")
    vs, v = run.arrays("val_loss")
    ts, t = run.arrays("loss")
    last = vs[np.isfinite(v)][-1]
    assert np.nanmax(v) > 50 * np.nanmin(v)  # validation does rise, far
    assert (t[ts > last] == 0.0).sum() >= 10  # HF's masked windows after it
    assert list(Overfitting().check(run)) == []


# shared/real_runs/hf_dnabert2 (a DNA classifier's trainer_state.json): 22 training points, 11 evaluations
_DNA_STEPS = np.arange(100, 2300, 100)
_DNA_TRAIN = np.array([0.4605, 0.3215, 0.2989, 0.257, 0.2309, 0.1856, 0.2026, 0.1838, 0.1709, 0.1294, 0.1035, 0.0985,
                       0.1197, 0.0996, 0.0648, 0.0606, 0.0428, 0.0498, 0.0431, 0.0192, 0.0261, 0.0276])
_DNA_VAL = np.array([0.3139, 0.2554, 0.2665, 0.2317, 0.3033, 0.2723, 0.2541, 0.2833, 0.2941, 0.2944, 0.2878])


def test_a_small_rise_while_training_collapses_is_overfitting(tmp_path):
    """Validation bottoms (3-point median 0.2554) and ends at 0.294, +15% but only 1.7 point sigmas of a noisy
    11-point curve, with no trend of its own after the minimum; meanwhile training falls to an eighth of its level
    at the crossover: the model memorises, and that is what makes the small rise a crossover. The same validation
    beside a training loss that stays at its level is silent, and so is it beside a training loss smoother than
    itself (a validation set too small to trust is val_noise's finding)."""
    from tests.runwriters import hf_history, write_trainer_state

    def run_with(train, name):
        history = hf_history(_DNA_STEPS, train, np.ones(train.size), per_epoch=460)
        history += [{"eval_loss": float(v), "epoch": round(int(s) / 460, 4), "step": int(s)}
                    for s, v in zip(_DNA_STEPS[1::2], _DNA_VAL)]
        history.sort(key=lambda e: e["step"])
        return load_run(write_trainer_state(tmp_path / name, history), tmp_path / f"{name}.duckdb")

    run = run_with(_DNA_TRAIN, "memorises")
    [f] = Overfitting().check(run)
    assert f.step == 600 and f.evidence["val_rise"] < 2 * f.evidence["val_noise"]
    assert list(Overfitting(memorise_train_left=0).check(run)) == []  # the memorisation rule is what decides
    rng = np.random.default_rng(3)
    level = np.where(_DNA_STEPS < 600, _DNA_TRAIN, 0.2309 * (1 + rng.normal(0, 0.12, _DNA_STEPS.size)))
    assert list(Overfitting().check(run_with(level, "stays"))) == []
    smooth = 0.02 + 0.45 * np.exp(-_DNA_STEPS / 500)  # falls as far, without the minibatch noise
    assert list(Overfitting().check(run_with(smooth, "smooth"))) == []


def test_validation_rising_from_its_first_evaluation_beside_a_flat_training_loss_is_no_overfitting(tmp_path):
    """Issue 24 class 6: validation worsens from its first evaluation (0.9 -> 1.3) while training stands at 0.8:
    nothing is memorised, the two sets disagree from the start. The same validation beside a training loss that
    keeps falling is overfitting."""
    rng = np.random.default_rng(2)
    steps = np.arange(0, 3000, 10)
    vs = np.arange(100, 3001, 100)
    val = 0.9 + 0.4 * (vs - 100) / 2900 + rng.normal(0, 0.01, vs.size)
    flat = 0.8 * (1 + rng.normal(0, 0.02, steps.size))
    run = load_run(write_tb(tmp_path / "r", {"train/loss": (steps, flat), "val/loss": (vs, val)}), tmp_path / "f.duckdb")
    assert list(Overfitting(min_train_fall=0.0).check(run))  # the training rule is what decides
    assert list(Overfitting().check(run)) == []
    falling = 0.8 * np.exp(-steps / 1500) * (1 + rng.normal(0, 0.02, steps.size))
    run = load_run(write_tb(tmp_path / "s", {"train/loss": (steps, falling), "val/loss": (vs, val)}), tmp_path / "g.duckdb")
    [f] = Overfitting().check(run)
    assert f.step == 100


def test_overfitting_under_heavy_evaluation_noise_is_read_from_medians(tmp_path):
    """A six-class classifier on a tiny validation set, 300 epochs: validation jumps ±40% between epochs, its median
    climbs 0.97 -> 1.6 after epoch 80 while training keeps falling, and a lucky dip near the end is its lowest point.
    The same noise around a flat validation level is silent."""
    rng = np.random.default_rng(21)
    ep = np.arange(1, 301) * 3
    train = 0.55 + 1.2 * np.exp(-ep / 200) + rng.normal(0, 0.01, ep.size)
    level = np.where(ep < 240, 1.2 - 0.23 * ep / 240, 0.97 + 0.63 * (ep - 240) / (ep[-1] - 240))
    val = level * np.exp(rng.normal(0, 0.35, ep.size))
    val[-10] = 0.5
    run = load_run(write_tb(tmp_path / "a", {"train/loss": (ep, train), "val/loss": (ep, val)}), tmp_path / "a.duckdb")
    [f] = Overfitting().check(run)
    assert f.evidence["smoothed"] and 150 <= f.step <= 400 and f.evidence["val_rise_relative"] > 0.3
    flat = 1.0 * np.exp(rng.normal(0, 0.35, ep.size))
    run = load_run(write_tb(tmp_path / "b", {"train/loss": (ep, train), "val/loss": (ep, flat)}), tmp_path / "b.duckdb")
    assert list(Overfitting().check(run)) == []


def _late_turn(up: int, seed: int = 0):
    """Twelve evaluations falling to a floor, the last `up` of them rising 15% above it; training keeps falling."""
    rng = np.random.default_rng(seed)
    steps = np.arange(1, 13) * 200
    v = 1.4 + 0.8 * np.exp(-steps / 500) + rng.normal(0, 0.004, steps.size)
    v[steps.size - up:] = 1.4 * (1.15 + rng.normal(0, 0.004, up))
    return steps, v


def test_one_or_two_evaluations_up_at_the_end_are_not_overfitting(tmp_path):
    """A user waits for the next evaluation before stopping the run; three up in a row is a rise that holds."""
    train = curve(n=240, every=10, floor=0.4)
    run = load_run(write_tb(tmp_path / "a", {"train/loss": train, "val/loss": _late_turn(2)}), tmp_path / "a.duckdb")
    assert list(Overfitting().check(run)) == []
    assert len(list(Overfitting(min_evals_above=2).check(run))) == 1  # the persistence is what decides
    run = load_run(write_tb(tmp_path / "b", {"train/loss": train, "val/loss": _late_turn(3)}), tmp_path / "b.duckdb")
    [f] = Overfitting().check(run)
    assert f.evidence["val_rise_relative"] > 0.05


def _epochs(tmp_path, name: str, train: list[float], val: list[float], per_epoch: int = 22741):
    """HF Trainer's trainer_state.json of a fine-tune logging once per epoch: one training-loss row and one
    evaluation row at each epoch's last step."""
    from tests.runwriters import write_trainer_state

    history = []
    for e, (t, v) in enumerate(zip(train, val), start=1):
        step = e * per_epoch
        history += [{"loss": t, "grad_norm": 1.0, "learning_rate": 2e-5 * (1 - e / len(train)), "epoch": float(e),
                     "step": step},
                    {"eval_loss": v, "eval_runtime": 60.0, "epoch": float(e), "step": step}]
    return load_run(write_trainer_state(tmp_path / name, history), tmp_path / f"{name}.duckdb")


def test_a_rise_at_every_evaluation_of_a_short_run_is_overfitting(tmp_path):
    """Three epochs of a fine-tune: evaluation loss 0.255 -> 0.288 -> 0.375 (+47%) while the training loss halves.
    An expert names it at a glance; the three-evaluation rule needs five evaluations. The same evaluations beside a
    training loss that rises too are not overfitting, and neither is a validation loss that ends 3% up."""
    run = _epochs(tmp_path, "a", [0.308, 0.201, 0.1416], [0.2548, 0.2881, 0.3752])
    [f] = Overfitting().check(run)
    assert f.step == 22741 and f.evidence["rising_evaluations"] == 2
    assert "0.2548 at step 22741" in f.summary and "0.3752 at step 68223" in f.summary
    assert list(Overfitting(every_min_evals=99).check(run)) == []  # the short-rise rule is what decides
    assert list(Overfitting().check(_epochs(tmp_path, "b", [0.308, 0.35, 0.41], [0.2548, 0.2881, 0.3752]))) == []
    assert list(Overfitting().check(_epochs(tmp_path, "c", [0.308, 0.201, 0.1416], [0.2548, 0.2551, 0.2625]))) == []


def test_three_epochs_whose_last_evaluation_jumps_past_the_middle_one_are_overfitting(tmp_path):
    """A three-epoch classifier fine-tune (HF Trainer, one record each per epoch): evaluation loss 0.8079, 0.8074,
    0.9018 (+11.7% at the last) while training falls 0.828 -> 0.715 -> 0.619; the Trainer's best checkpoint is the
    second. The run ended: no next evaluation decides, and a rise that large is read at once. Its twins ending +2.6%
    (where healthy three-epoch fine-tunes end) or with training rising are silent."""
    train = [0.8278, 0.7153, 0.6191]
    run = _epochs(tmp_path, "a", train, [0.8079, 0.8074, 0.9018], per_epoch=14146)
    [f] = Overfitting().check(run)
    assert f.step == 28292 and f.evidence["rising_evaluations"] == 1 and f.evidence["val_final"] == 0.9018
    assert list(Overfitting(every_last_min_rise=0.2).check(run)) == []
    assert list(Overfitting().check(_epochs(tmp_path, "b", train, [0.8079, 0.8074, 0.8283]))) == []
    assert list(Overfitting().check(_epochs(tmp_path, "c", [0.8278, 0.7153, 0.7391], [0.8079, 0.8074, 0.9018]))) == []


def test_seven_epochs_that_turn_at_the_fourth_are_overfitting(tmp_path):
    """A small CNN stopped early: validation falls to 0.457 at its fourth epoch, then rises at each of the three left
    (+17% at the end), the training loss falling at every epoch. A healthy twin whose validation keeps falling with
    one last evaluation up is silent."""
    train = [0.6313, 0.5261, 0.4494, 0.3707, 0.2874, 0.2194, 0.1583]
    run = _epochs(tmp_path, "a", train, [0.5626, 0.5231, 0.4952, 0.4569, 0.4685, 0.4984, 0.5339], per_epoch=100)
    [f] = Overfitting().check(run)
    assert f.step == 400 and f.evidence["rising_evaluations"] == 3
    healthy = _epochs(tmp_path, "b", train, [0.5626, 0.5231, 0.4952, 0.4569, 0.4385, 0.4184, 0.4339], per_epoch=100)
    assert list(Overfitting().check(healthy)) == []


def test_validation_rising_from_its_first_evaluation_beside_a_memorised_training_loss_is_overfitting(tmp_path):
    """A recogniser on a few thousand images, logged every 20k iterations: training loss 0.30 at the first record,
    then 0.00001 and 0.00000 at every later one (the set is memorised), while validation is lowest at its first
    evaluation and climbs +16% over 14, with dips. A training loss at exactly 0 fell as far as it can: it is no
    training that stands still. The twin whose training loss stays at 0.30 is the mismatch picture, not overfitting."""
    from tests.runwriters import log_messages

    val = [1.49355, 1.58368, 1.6, 1.65532, 1.64012, 1.63281, 1.67418, 1.70298, 1.697, 1.71944, 1.74045, 1.728,
           1.73621, 1.73893]
    memorised = [0.30092, 0.00001, 0.00001] + [0.0] * 11
    found = {}
    for name, train in (("memorised", memorised), ("stands", [0.30092 + 0.001 * (i % 2) for i in range(14)])):
        (tmp_path / name).mkdir()
        log_messages(tmp_path / name / "log_train.txt",
                     [f"[{20000 * (i + 1)}/300000] Train loss: {t:.5f}, Valid loss: {v:.5f}, Elapsed_time: {1650 * (i + 1)}"
                      for i, (t, v) in enumerate(zip(train, val))])
        found[name] = list(Overfitting().check(load_run(tmp_path / name, tmp_path / f"{name}.duckdb")))
    [f] = found["memorised"]
    assert f.evidence["val_rise_relative"] > 0.1 and "memorised" in f.summary and "0.3009" in f.summary
    assert found["stands"] == []
    again = load_run(tmp_path / "memorised", tmp_path / "again.duckdb")
    # without the memorised rule, training's level at the end against the crossover (0.30 -> 0) says it fell too
    assert list(Overfitting(memorised=0.0, wide_min_evals=40).check(again))


def test_a_rise_at_every_evaluation_beside_a_training_loss_at_its_floor_is_overfitting(tmp_path):
    """Validation lowest at its first evaluation and higher at each of the four after it (+30% in all) while training
    falls 99.99% to 0.00001 as printed and stays there: training at its floor cannot fall at each evaluation, and
    need not."""
    ts = np.arange(10, 501, 10)
    train = np.maximum(0.8 * np.exp(-ts / 8), 1e-5)
    vs = np.arange(100, 501, 100)
    val = np.array([1.0, 1.08, 1.15, 1.22, 1.30])
    run = load_run(write_tb(tmp_path / "r", {"train/loss": (ts, train), "val/loss": (vs, val)}), tmp_path / "f.duckdb")
    [f] = Overfitting().check(run)
    assert f.step == 100 and f.evidence["val_rise_relative"] > 0.2
    assert list(Overfitting(memorised=0.0, gap_ratio=np.inf).check(run)) == []  # read as training standing still,
    # it was a mismatch (the memorised gap, `_gap`, off too: it reads the same fall as memorisation)


def _lora(tmp_path, name: str, evals: list[float]):
    """HF Trainer's trainer_state.json of a LoRA fine-tune: the training loss every 10 steps (falling, with batch
    noise) and an evaluation every 50 steps."""
    from tests.runwriters import write_trainer_state

    rng = np.random.default_rng(1)
    history = []
    for step in range(10, 50 * len(evals) + 1, 10):
        loss = 1.75 + 0.5 * np.exp(-step / 60) - 0.3 * step / (50 * len(evals)) + rng.normal(0, 0.02)
        history.append({"loss": float(loss), "grad_norm": 1.0, "learning_rate": 1e-4, "epoch": step / 100, "step": step})
        if step % 50 == 0:
            history.append({"eval_loss": evals[step // 50 - 1], "eval_runtime": 9.0, "epoch": step / 100, "step": step})
    return load_run(write_trainer_state(tmp_path / name, history), tmp_path / f"{name}.duckdb")


def test_a_small_rise_at_most_evaluations_after_the_minimum_is_mild_overfitting(tmp_path):
    """A fine-tune's evaluation loss falls to 1.776 at its 7th evaluation, then sits 1-2% above it at each of the
    four after it, rising, while training falls and the gap widens: the rise is small against the level (under the
    5% rule) but large against the curve's own scatter after the minimum. Its healthy twin, rising 0.3% after a long
    fall (a tenth of a percent a time), leaves the checkpoint choice as it was and is silent."""
    run = _lora(tmp_path, "a", [2.04, 1.92, 1.85, 1.81, 1.79, 1.781, 1.776, 1.786, 1.795, 1.805, 1.815])
    [f] = Overfitting().check(run)
    assert f.step == 350 and f.evidence["kendall_tau"] == 1.0 and 0.01 < f.evidence["val_rise_relative"] < 0.02
    assert "mild overfitting" in f.summary and "1.776 at step 350 (the best checkpoint)" in f.summary
    assert list(Overfitting(scatter_tau=1.1).check(run)) == []  # the scatter rule is what decides
    twin = _lora(tmp_path, "b", [2.04, 1.92, 1.85, 1.81, 1.79, 1.781, 1.776, 1.777, 1.778, 1.780, 1.782])
    assert list(Overfitting().check(twin)) == []


def test_a_validation_only_u_is_overfitting_that_names_the_missing_training_loss(tmp_path):
    """Only the validation loss was logged: it falls 1.30 -> 1.08 over 8 epochs, then climbs to 1.50 over 40.
    Read as overfitting, saying the training loss was not logged. A validation loss that falls and settles is
    silent."""
    steps = np.arange(48) * 600
    rng = np.random.default_rng(2)
    u = np.r_[np.linspace(1.30, 1.08, 8), np.linspace(1.09, 1.50, 40)] + rng.normal(0, 0.005, 48)
    run = load_run(write_tb(tmp_path / "u", {"val/loss": (steps, u)}), tmp_path / "u.duckdb")
    assert not run.has("loss")
    [f] = Overfitting().check(run)
    assert f.evidence["training_loss_logged"] is False and "not logged" in f.summary and f.step <= 8 * 600
    settles = np.r_[np.linspace(1.30, 1.08, 8), np.full(40, 1.08)] + rng.normal(0, 0.005, 48)
    run = load_run(write_tb(tmp_path / "s", {"val/loss": (steps, settles)}), tmp_path / "s.duckdb")
    assert list(Overfitting().check(run)) == []


def _noisy_epochs(rise: bool, seed: int = 0):
    """16 epochs of a small validation set: evaluations ±20% around their level, which falls to its best at epoch 6
    and (with `rise`) climbs half again by the end, while the epoch mean of training falls smoothly 0.6 -> 0.16."""
    rng = np.random.default_rng(seed)
    epochs = np.arange(16)
    level = 0.45 - 0.07 * np.minimum(epochs, 6) / 6 + (0.2 * np.maximum(0, epochs - 6) / 9 if rise else 0)
    val = level * (1 + rng.uniform(-0.2, 0.2, epochs.size))
    train = 0.16 + 0.44 * np.exp(-epochs / 5)
    steps = (epochs + 1) * 228
    return {"train/loss": (steps, train), "val/loss": (steps, val)}


def test_a_noisy_validation_level_that_rises_counts_at_any_length(tmp_path):
    """Sixteen evaluations jumping ±20% around their level: no single evaluation stands three point sigmas above the
    best one, but the median of three evaluations does, against the scatter of such a median, and the evaluations
    after it trend up while training falls. The same noise around a level that stays put is silent."""
    for seed in (0, 1):  # draws where no evaluation stands out on its own (others the point rules read too)
        run = load_run(write_tb(tmp_path / f"r{seed}", _noisy_epochs(True, seed)), tmp_path / f"r{seed}.duckdb")
        [f] = Overfitting().check(run)
        assert f.evidence["smoothed"] and f.evidence["window"] == 3 and f.evidence["val_rise_relative"] > 0.2
        assert list(Overfitting(wide_min_evals=40).check(run)) == []  # the point-by-point rules miss it
        flat = load_run(write_tb(tmp_path / f"f{seed}", _noisy_epochs(False, seed)), tmp_path / f"f{seed}.duckdb")
        assert list(Overfitting().check(flat)) == []


def test_validation_rising_beside_a_training_loss_that_stands_still_is_not_overfitting(tmp_path):
    """32 epochs of a training loss that never moves from 0.10 (±3% between epochs) while validation dips a hundredfold
    for a third of the run and comes back: a validation loss that wanders while nothing is learned, not a model
    that memorises its training set (the catalog's overfitting needs training to keep falling), wherever the
    validation minimum lies. The twin whose training loss halves over the same epochs is overfitting."""
    rng = np.random.default_rng(5)
    epochs = np.arange(32)
    val = np.where((epochs >= 12) & (epochs < 22), 0.0007, 0.105) * (1 + rng.uniform(-0.03, 0.03, 32))
    flat = 0.10 * (1 + rng.uniform(-0.03, 0.03, 32))
    falling = 0.10 * np.exp(-epochs / 46) * (1 + rng.uniform(-0.01, 0.01, 32))
    found = {}
    for name, train in (("stands", flat), ("falls", falling)):
        run = load_run(write_tb(tmp_path / name, {"train/loss": (epochs, train), "val/loss": (epochs, val)}),
                       tmp_path / f"{name}.duckdb")
        found[name] = list(Overfitting().check(run))
    assert found["stands"] == []
    [f] = found["falls"]
    assert 12 <= f.step < 22 and f.evidence["val_rise_relative"] > 10


def test_a_validation_loss_that_jumps_after_its_first_evaluation_and_stays_up_is_overfitting(tmp_path):
    """20 epochs: validation is lowest at its first evaluation, jumps +40% by the fifth and eases back to settle +20%
    above that minimum (no upward trend after it: the later evaluations fall from the peak), while training falls
    a hundredfold. The rise holds at every evaluation of the last third. The twin whose training loss climbs with
    validation and comes back only part way is a shared rise, not overfitting."""
    rng = np.random.default_rng(3)
    epochs = np.arange(20)
    val = 0.13 * (1 + 0.2 * (1 - np.exp(-epochs / 1.5)) + 0.2 * np.exp(-((epochs - 4) / 2.0) ** 2))
    val = val * (1 + rng.uniform(-0.005, 0.005, 20))
    falls = 0.09 * np.exp(-epochs / 4)
    rises = 0.09 * (1 + 0.6 * np.exp(-((epochs - 8) / 6.0) ** 2) + 0.01 * epochs)
    found = {}
    for name, train in (("falls", falls), ("rises", rises)):
        run = load_run(write_tb(tmp_path / name, {"train/loss": (epochs, train), "val/loss": (epochs, val)}),
                       tmp_path / f"{name}.duckdb")
        found[name] = list(Overfitting().check(run))
    [f] = found["falls"]
    assert f.step <= 1 and f.evidence["val_rise_relative"] > 0.1
    assert found["rises"] == []


def test_a_short_run_whose_training_loss_collapses_beside_a_jittery_validation_rise_is_overfitting(tmp_path):
    """12 epochs: validation falls to its best at the seventh and then jitters ±6% around a level that climbs +25%,
    while training falls to a fifth of its level at the minimum over the five epochs after it. Validation moves
    more than training between epochs, but by less than val_noise's bar: the rise is read here, with training's
    collapse as its second witness. The same jitter around a level that stays at the minimum is silent."""
    epochs = np.arange(12)
    train = 1.6 * np.exp(-epochs / 2.6) * (1 + np.random.default_rng(0).uniform(-0.06, 0.06, 12))
    jitter = np.array([0, 0, 0, 0, 0, 0, 0, 1, -1, 1, -1, 1]) * 0.02
    falls = 0.3 + 0.62 * np.exp(-epochs / 1.3)
    climbs = np.where(epochs > 6, 0.3 + 0.015 * (epochs - 6), falls) + jitter
    stays = np.where(epochs > 6, 0.305, falls) + jitter
    found = {}
    for name, val in (("climbs", climbs), ("stays", stays)):
        run = load_run(write_tb(tmp_path / name, {"train/loss": (epochs, train), "val/loss": (epochs, val)}),
                       tmp_path / f"{name}.duckdb")
        found[name] = list(Overfitting().check(run))
    [f] = found["climbs"]
    assert 5 <= f.step <= 8 and f.evidence["val_rise_relative"] > 0.1
    assert found["stays"] == []


def test_a_training_loss_that_falls_in_one_step_over_the_rise_has_not_stood_still(tmp_path):
    """Two excerpts of one epoch table joined (epochs missing between them): training sits at 1.07 to the end of the
    first and at 0.93 in the second (-13%, in one step), validation at 1.14 then 1.6 (+40%). A robust slope over the
    rise sees a flat training loss; the levels before and after say it fell. The twin whose training stays at 1.07
    in the second excerpt stands still: not overfitting."""
    rng = np.random.default_rng(4)
    epochs = np.arange(32)
    second = epochs >= 13
    val = np.where(second, 1.6, 1.14 + 0.6 * np.exp(-epochs)) * (1 + rng.uniform(-0.02, 0.02, 32))
    found = {}
    for name, late in (("steps", 0.93), ("stands", 1.068)):
        train = np.where(second, late, 1.065 + 0.9 * np.exp(-epochs)) * (1 + rng.uniform(-0.003, 0.003, 32))
        run = load_run(write_tb(tmp_path / name, {"train/loss": (epochs, train), "val/loss": (epochs, val)}),
                       tmp_path / f"{name}.duckdb")
        found[name] = list(Overfitting().check(run))
    [f] = found["steps"]
    assert f.step < 13 and f.evidence["val_rise_relative"] > 0.3
    assert "while training loss falls from median" in f.summary  # its levels, not a slope of about 0
    assert found["stands"] == []


# A plain print loop's log of a PE-binary malware classifier, whole (0x13enny/MalConv@5eb49a2282e31afc05ada03370bd27562fb7ea77:
# large_set.log; the confusion-count lines between epochs left out): validation is best at its first epoch.
_FIRST_BEST_CONSOLE = """\
[ (0 ) Loss:  0.164, train_Acc: 0.93622, valid_Loss: 0.116, valid_Acc: 0.95735]
[ (1 ) Loss:  0.076, train_Acc: 0.97296, valid_Loss: 0.158, valid_Acc: 0.95272]
[ (2 ) Loss:  0.044, train_Acc: 0.98510, valid_Loss: 0.158, valid_Acc: 0.95562]
[ (3 ) Loss:  0.033, train_Acc: 0.98944, valid_Loss: 0.134, valid_Acc: 0.96485]
[ (4 ) Loss:  0.029, train_Acc: 0.99141, valid_Loss: 0.148, valid_Acc: 0.96397]
"""

# Lightning's CSVLogger metrics.csv of a contrastive model, whole (SalomePx/Task1_EncodingSpectra@
# cf88f4eb049532cd735468bfc61267ba0d128882:lightning_logs/version_0/metrics.csv).
_FIRST_BEST_CSV = """\
epoch,step,train_loss,val_loss
0,49,5.523136138916016,
0,99,5.463061332702637,
0,149,5.382023811340332,
0,199,5.265576362609863,
0,205,,5.9492387771606445
1,249,5.144331932067871,
1,299,5.1001996994018555,
1,349,5.048835754394531,
1,399,4.847430229187012,
1,411,,7.767054080963135
2,449,4.809619903564453,
2,499,4.725043296813965,
2,549,4.711485385894775,
2,599,4.600438117980957,
2,617,,7.62987756729126
3,649,4.555685043334961,
3,699,4.655116081237793,
3,749,4.631749153137207,
3,799,4.643665313720703,
3,823,,7.265039920806885
4,849,4.671597003936768,
4,899,4.605194091796875,
4,949,4.4837422370910645,
4,999,4.404697895050049,
4,1029,,7.429126262664795
5,1049,4.427552223205566,
5,1099,4.530991554260254,
5,1149,4.406466484069824,
5,1199,4.492673873901367,
5,1235,,7.214898109436035
"""


def test_a_few_evaluations_best_at_the_first_and_never_back_are_overfitting(tmp_path):
    """Five and six evaluations whose first is the lowest and every later one 15-30% above it while training keeps
    falling: the turn is at the first evaluation, where a 3-point smoothed minimum cannot place it. Without the
    first-evaluation rule (a rise bar no curve meets) both are silent."""
    for name, file, text in (("console", "train.log", _FIRST_BEST_CONSOLE), ("csv", "metrics.csv", _FIRST_BEST_CSV)):
        (tmp_path / name).mkdir()
        (tmp_path / name / file).write_text(text)
        run = load_run(tmp_path / name, tmp_path / f"{name}.duckdb")
        [f] = Overfitting().check(run)
        assert f.evidence["crossover_step"] == run.arrays("val_loss")[0][0], name
        assert f.evidence["val_lowest_after"] >= 1.1 * f.evidence["val_min"]
        assert list(Overfitting(first_min_rise=10.0).check(run)) == [], name


# An autoencoder's epochs appended to one log after a classifier stage (1726251215/Representation-Learning@
# 7cf6293ad61fb0eed4fdda9cfb165f6684fb717c:log/log.txt, lines 425-444 and 477-516, their trailing blanks cut): the continued training jumps ×9
# at its second epoch, validation with it, and both ease back a little.
_SHARED_JUMP = """\
[Train] Epoch: 74, Loss:0.000026
[Val] Epoch: 74, Loss:0.000029
[Train] Epoch: 75, Loss:0.000026
[Val] Epoch: 75, Loss:0.000029
[Train] Epoch: 76, Loss:0.000026
[Val] Epoch: 76, Loss:0.000029
[Train] Epoch: 77, Loss:0.000026
[Val] Epoch: 77, Loss:0.000029
[Train] Epoch: 78, Loss:0.000026
[Val] Epoch: 78, Loss:0.000029
[Train] Epoch: 79, Loss:0.000026
[Val] Epoch: 79, Loss:0.000029
[Train Classifier] Epoch: 0, Accuracy:52.335000
[Val Classifier] Epoch: 0, Accuracy:78.360000
[Train Classifier] Epoch: 1, Accuracy:81.485000
[Val Classifier] Epoch: 1, Accuracy:84.730000
[Train Classifier] Epoch: 2, Accuracy:85.063333
[Val Classifier] Epoch: 2, Accuracy:87.480000
[Train Classifier] Epoch: 3, Accuracy:87.008333
[Val Classifier] Epoch: 3, Accuracy:88.320000
""" + "".join(f"[Train] Epoch: {e}, Loss:{t}\n[Val] Epoch: {e}, Loss:{v}\n" for e, t, v in (
    (80, "0.000954", "0.000943"), (81, "0.008593", "0.008745"), (82, "0.008515", "0.008643"),
    (83, "0.008470", "0.008584"), (84, "0.008480", "0.008700"), (85, "0.006797", "0.007073"),
    (86, "0.006756", "0.007068"), (87, "0.006757", "0.007030"), (88, "0.006740", "0.007024"),
    (89, "0.006742", "0.006988"), (90, "0.006728", "0.007013"), (91, "0.006729", "0.006971"),
    (92, "0.006720", "0.006987"), (93, "0.006708", "0.007010"), (94, "0.006706", "0.006957"),
    (95, "0.006695", "0.006999"), (96, "0.006684", "0.006982"), (97, "0.006695", "0.007009"),
    (98, "0.006684", "0.006942"), (99, "0.006673", "0.006949")))


def test_a_jump_training_shares_right_after_the_validation_minimum_is_not_overfitting(tmp_path):
    """Validation's lowest evaluation is the last before training jumps ×9 with it: read after the crossover,
    training only eases back (its slope falls), but its level up to the minimum against its level at the end rose
    sevenfold. That is the run diverging, not overfitting."""
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "log.txt").write_text(_SHARED_JUMP)
    run = load_run(tmp_path / "r", tmp_path / "r.duckdb")
    assert list(Overfitting().check(run)) == []
    # the rule that reads training's level from the crossover decides it: with divergence's margins off, it fires
    assert list(Overfitting(max_train_rise=float("inf"), max_train_share=float("inf")).check(run))


def test_a_turn_on_a_few_evaluations_is_not_its_own_noise(tmp_path):
    """The last fold of a 5-epoch k-fold log (https://github.com/LakshyaMalhotra/seti-breakthrough-listen,
    outputs/train.log at 9c0c194d92f4cca313ed26fff6d07883c6451bcf): validation 0.0735, 0.0698, 0.0694 (best),
    0.0823, 0.0868 while training falls 0.1227 -> 0.0291. On five evaluations the bend at the minimum was most of
    the jumps the rise was held to; the bend is the turn, not noise."""
    run = _epochs(tmp_path, "a", [0.1227, 0.0665, 0.0503, 0.0382, 0.0291], [0.0735, 0.0698, 0.0694, 0.0823, 0.0868])
    [f] = Overfitting().check(run)
    assert f.step == 3 * 22741 and f.evidence["rising_evaluations"] == 2


def test_a_validation_only_u_after_an_early_jump_is_overfitting(tmp_path):
    """A Lightning metrics.csv with only a validation loss (https://github.com/StevenFroelichBMRN/oligogym-bench,
    lightning_logs/version_111 at aaa6394f281411da70cd598206c7f09b897794a8): 0.832, a jump to 2.01, back down to
    0.783 (best), then up at four of the next five to 1.074. The U's left arm starts at its highest evaluation
    before the minimum, not at its first."""
    steps = np.array([3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43])
    val = np.array([0.8318, 2.0125, 1.9427, 1.3561, 0.9183, 0.7825, 0.8099, 0.8981, 1.027, 1.0861, 1.0742])
    run = load_run(write_tb(tmp_path / "u", {"val/loss": (steps, val)}), tmp_path / "u.duckdb")
    [f] = Overfitting().check(run)
    assert f.step == 23 and "2.013 at step 7" in f.summary and "not logged" in f.summary


# A small character-level transformer's own CSV log, evaluated every 500 steps at a constant LR. Source:
# mannkenn/tiny-transformer@c891d35978d1ed61fb00d0b1cd56a9278d644eaf:results/baseline_20260423_204805/train_log.csv
_EVERY_500 = """\
step,train_loss,val_loss,lr,elapsed_time,tokens_per_sec
0,3.7405,3.7688,0.0003,0.4215,38870.5490
500,1.7939,1.9217,0.0003,0.0610,287523.7777
1000,1.4477,1.6383,0.0003,0.0556,287052.1923
1500,1.3118,1.5600,0.0003,0.0569,288035.4830
2000,1.2279,1.5079,0.0003,0.0578,287346.1435
2500,1.1517,1.4986,0.0003,0.0597,285859.5444
3000,1.0929,1.5084,0.0003,0.0571,288070.1365
3500,1.0297,1.5094,0.0003,0.0528,286851.4298
4000,0.9680,1.5449,0.0003,0.0574,287325.7791
4500,0.9054,1.5846,0.0003,0.0555,286658.2421
4999,0.8362,1.6111,0.0003,0.0531,287478.6120
"""


def test_validation_up_at_each_of_five_evaluations_by_seven_percent_is_overfitting(tmp_path):
    """The validation minimum 1.4986 at step 2500, then up at every evaluation to 1.6111 (+7.5%) while training
    falls at each: a user keeps the checkpoint at 2500. Under a 5% rise the short-rise rule stays silent."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "train_log.csv").write_text(_EVERY_500)
    run = load_run(tmp_path / "run", tmp_path / "f.duckdb")
    [f] = Overfitting().check(run)
    assert f.step == 2500 and f.evidence["rising_evaluations"] == 5
    assert "1.499 at step 2500" in f.summary and "1.611 at step 4999" in f.summary
    assert list(Overfitting(every_min_rise=0.08).check(run)) == []


# Two trainings of one classifier appended to one CSV by its script (the epoch column starts again at 1). Source:
# zhewei-0130/imagenet_dynamic_conv@68dff83fefaead55e440a25437d279581fc6645a:logs/train_log.csv
_TWO_TRAININGS = """\
epoch,train_loss,train_acc,val_loss,val_acc
1,3.213103480264356,0.14517629070526544,2.751593510309855,0.24791666666666667
2,2.533569294253403,0.2850577616673518,2.2835129578908284,0.32708333333333334
3,2.053073996844588,0.3988021858838425,2.732235066095988,0.2625
4,1.6776778859704236,0.4968521850105486,1.7698544224103292,0.47708333333333336
5,1.3919393633458879,0.5721035310269125,1.6138222893079122,0.5208333333333334
6,1.1357206988057564,0.6409214859420811,1.852609670162201,0.5125
7,0.8802696546260126,0.7131502543994428,1.5155648569266,0.5604166666666667
8,0.6462591087173608,0.7825018295499638,1.6998991668224335,0.54375
9,0.4497491743278178,0.8476388937237891,1.970758306980133,0.5354166666666667
10,0.3322328715563995,0.8890347572033185,1.8908541090786457,0.575
1,3.7499329798025216,0.05459534160382462,3.443698040644328,0.07916666666666666
2,3.168035705984693,0.15153508389791254,2.8978978315989177,0.21875
3,2.7263979690131546,0.24363358366242438,2.5315471490224204,0.2916666666666667
4,2.3086645864609094,0.3368390732006692,2.0723317225774127,0.4
5,1.9661523704278223,0.42226895331553344,1.9187418460845946,0.46458333333333335
6,1.6639168541379623,0.49803322820183965,1.9874525646368661,0.4875
7,1.3734368713833336,0.5712159789831365,1.7351830720901489,0.5020833333333333
8,1.073832554399154,0.6557060340367645,1.8154082934061686,0.5104166666666666
9,0.7939626942866375,0.7400479822703357,2.0812151034673056,0.48125
10,0.5645790163572537,0.8125849436364311,2.030229200174411,0.49166666666666664
"""


def test_an_earlier_launch_that_overfits_is_read_where_the_last_shows_no_turn(tmp_path):
    """The first training's validation loss bottoms at 1.516 at its seventh epoch and ends 25% above it while its
    training loss keeps falling; the second's rise is not one the rules name. The finding is the first launch's and
    says so; read alone, the last launch says nothing."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "train_log.csv").write_text(_TWO_TRAININGS)
    run = load_run(tmp_path / "run", tmp_path / "f.duckdb")
    assert run.launch_starts(run.pick("loss"))
    assert list(Overfitting()._routes(run)) == []  # the last launch alone
    [f] = Overfitting().check(run)
    assert f.evidence["launch"] == 1 and f.evidence["launches"] == 2
    assert f.evidence["val_min"] == 1.5155648569266 and "launch 1 of 2" in f.summary


# An Ultralytics classifier's results.csv as written (github.com/5PCD3/Weather-Prediction-Using-YOLOV8@90fc693,
# runs/classify/train/results.csv).
MEMORISED_BESIDE_A_FLAT_VALIDATION = """\
                  epoch,             train/loss,  metrics/accuracy_top1,  metrics/accuracy_top5,               val/loss,                 lr/pg0,                 lr/pg1,                 lr/pg2
                      1,                 1.1726,                0.77358,                      1,                 1.1014,             0.00023359,             0.00023359,             0.00023359
                      2,                 0.3397,                0.94717,                      1,                0.84484,             0.00044825,             0.00044825,             0.00044825
                      3,                 0.1254,                0.97736,                      1,                0.79245,             0.00063934,             0.00063934,             0.00063934
                      4,                 0.0859,                0.96604,                      1,                0.81121,             0.00060797,             0.00060797,             0.00060797
                      5,                0.04208,                0.95472,                      1,                0.80059,             0.00060797,             0.00060797,             0.00060797
                      6,                0.06284,                0.97358,                      1,                0.78648,             0.00057263,             0.00057263,             0.00057263
                      7,                0.02983,                0.95472,                      1,                0.80053,             0.00053728,             0.00053728,             0.00053728
                      8,                0.05469,                0.96226,                      1,                0.79828,             0.00050194,             0.00050194,             0.00050194
                      9,                0.05127,                0.96604,                      1,                0.78649,              0.0004666,              0.0004666,              0.0004666
                     10,                0.02771,                0.96226,                      1,                0.79349,             0.00043126,             0.00043126,             0.00043126
                     11,                0.02395,                0.95849,                      1,                0.79484,             0.00039591,             0.00039591,             0.00039591
                     12,                0.02575,                0.94717,                      1,                0.79144,             0.00036057,             0.00036057,             0.00036057
                     13,                0.02356,                0.95472,                      1,                 0.7972,             0.00032523,             0.00032523,             0.00032523
                     14,                0.01205,                0.95849,                      1,                0.79217,             0.00028988,             0.00028988,             0.00028988
                     15,                0.02239,                0.96226,                      1,                0.78524,             0.00025454,             0.00025454,             0.00025454
                     16,                 0.0135,                0.95849,                      1,                0.78568,              0.0002192,              0.0002192,              0.0002192
                     17,                0.00614,                0.96604,                      1,                0.78591,             0.00018385,             0.00018385,             0.00018385
                     18,                0.00678,                0.96604,                      1,                0.78237,             0.00014851,             0.00014851,             0.00014851
                     19,                0.00795,                0.96604,                      1,                0.78316,             0.00011317,             0.00011317,             0.00011317
                     20,                0.01334,                0.96226,                      1,                0.79244,             7.7826e-05,             7.7826e-05,             7.7826e-05
"""


def _memorised_rewritten(root, change) -> None:
    """The memorised YOLO results.csv written again by csv.DictWriter under `root`, `change(i, row)` applied to each row."""
    import csv

    rows = list(csv.DictReader(MEMORISED_BESIDE_A_FLAT_VALIDATION.splitlines(), skipinitialspace=True))
    root.mkdir()
    with open(root / "results.csv", "w", newline="") as out:
        w = csv.DictWriter(out, fieldnames=[n.strip() for n in rows[0]])
        w.writeheader()
        for i, r in enumerate(rows):
            r = {k.strip(): v.strip() for k, v in r.items()}
            change(i, r)
            w.writerow(r)


def test_a_training_loss_that_falls_tenfold_under_a_flat_validation_loss_is_overfitting(tmp_path):
    """Validation stops improving at its third evaluation (0.792; none after it is 5% better) while training falls
    0.125 -> 0.013 and ends ×59 under it: no rise places a crossover, but the model learns its training set by heart.
    The same file whose training loss only halves over those epochs is silent."""
    root = tmp_path / "r"
    root.mkdir()
    (root / "results.csv").write_text(MEMORISED_BESIDE_A_FLAT_VALIDATION)
    [f] = Overfitting().check(load_run(root, tmp_path / "f.duckdb"))
    assert f.evidence["val_at_crossover"] == 0.79245 and f.evidence["gap_ratio_min"] > 10 and f.evidence["train_fall_factor"] > 3
    _memorised_rewritten(tmp_path / "h", lambda i, r: r.update({"train/loss": f"{0.2 - 0.005 * i:.4f}"}) if i >= 2 else None)
    assert list(Overfitting().check(load_run(tmp_path / "h", tmp_path / "h.duckdb"))) == []


def test_a_validation_loss_flat_from_its_first_evaluation_beside_memorised_training_is_no_overfitting(tmp_path):
    """The memorised gap needs validation to have improved once: the same file whose validation never gets 5% under
    its first evaluation (0.786 at the first epoch, 0.782-0.811 after it) while training falls ×100 learned nothing
    it could lose: a held-out set that does not match training (distribution_mismatch's picture), not memorisation."""
    _memorised_rewritten(tmp_path / "r", lambda i, r: r.update({"val/loss": {0: "0.78600", 1: "0.80100"}.get(i, r["val/loss"])}))
    assert list(Overfitting().check(load_run(tmp_path / "r", tmp_path / "f.duckdb"))) == []


def _per_step_lightning(root, epoch_levels: list[float], val: list[float], seed: int = 0):
    """Lightning's CSVLogger as `self.log("train_loss", ..., on_step=True)` and `self.log("val_loss", ...)` reach it:
    single-batch training losses (±15% around each epoch's level) every 10 steps of 450 a epoch, the validation loss
    at each epoch's last step; no epoch mean."""
    pytest.importorskip("lightning", reason="the test extra installs lightning")
    from lightning.pytorch.loggers import CSVLogger

    rng = np.random.default_rng(seed)
    logger = CSVLogger(str(root))
    for e, (level, v) in enumerate(zip(epoch_levels, val)):
        for k in range(9, 450, 10):
            logger.log_metrics({"train_loss": level * (1 + rng.normal(0, 0.15)), "epoch": e}, step=e * 450 + k)
        logger.log_metrics({"val_loss": v, "epoch": e}, step=e * 450 + 449)
    logger.save()
    logger.finalize("success")
    return root


def test_a_rise_at_every_evaluation_beside_per_step_training_within_its_noise_is_overfitting(tmp_path):
    """Five epochs of a recommender: validation flat for three (0.2346, 0.2351, 0.2339), then up at each of the last
    two (+8%) while the single-batch training loss falls 0.32 -> 0.178 but holds for one epoch (0.200 -> 0.2005):
    the median of 45 noisy batches moves more than that by chance, so training did not rise there. A training loss
    that climbs back (0.200 -> 0.24) beside the same validation is silent."""
    val = [0.2346, 0.2351, 0.2339, 0.2414, 0.2522]
    run = load_run(_per_step_lightning(tmp_path / "a", [0.32, 0.21, 0.200, 0.2005, 0.178], val, seed=2),
                   tmp_path / "a.duckdb")  # this draw's medians: 0.1953 -> 0.1963 -> 0.1835
    [f] = Overfitting().check(run)
    assert f.evidence["rising_evaluations"] == 2 and f.evidence["val_final"] == 0.2522
    assert list(Overfitting(every_train_errors=0.0).check(run)) == []  # strictly falling medians: the tolerance decides
    back = load_run(_per_step_lightning(tmp_path / "b", [0.32, 0.21, 0.200, 0.24, 0.178], val, seed=2),
                    tmp_path / "b.duckdb")
    assert list(Overfitting().check(back)) == []
