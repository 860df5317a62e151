"""underfitting on real TensorBoard event files."""

import numpy as np
import pytest

from forensics.judge.detectors import Underfitting
from tests.paths import REAL_RUNS_TEST
from tests.runwriters import curve, load_run, write_tb



def _val(floor: float, start: float = 1.6, seed: int = 1):
    rng = np.random.default_rng(seed)
    steps = np.arange(100, 3001, 100)
    return steps, (floor + (start - floor) * np.exp(-steps / 400)) * (1 + rng.normal(0, 0.005, steps.size))


def test_fires_where_train_and_val_stall_high_together(tmp_path):
    train = curve(n=300, start=1.7, floor=0.7, tau=400)  # stalls at ~41% of the initial loss
    run = load_run(write_tb(tmp_path / "r", {"train/loss": train, "val/loss": _val(0.72)}), tmp_path / "f.duckdb")
    [f] = Underfitting().check(run)
    assert f.kind == "underfitting" and f.step == 100
    assert 0.38 < f.evidence["fraction_of_initial"] < 0.45
    assert abs(f.evidence["train_val_gap"]) < 0.1


def test_a_converged_run_with_a_generalisation_gap_is_silent(tmp_path):
    train = curve(n=300, start=1.7, floor=0.1, tau=400)
    run = load_run(write_tb(tmp_path / "r", {"train/loss": train, "val/loss": _val(0.3)}), tmp_path / "f.duckdb")
    assert list(Underfitting().check(run)) == []


def test_curves_still_falling_are_silent(tmp_path):
    """Both high and close, but still learning at the end: train longer, not an underfit model yet."""
    train = curve(n=300, start=1.7, floor=0.2, tau=3000)
    steps = np.arange(100, 3001, 100)
    val = (0.2 + 1.5 * np.exp(-steps / 3000)) * 1.02
    run = load_run(write_tb(tmp_path / "r", {"train/loss": train, "val/loss": (steps, val)}), tmp_path / "f.duckdb")
    assert list(Underfitting().check(run)) == []


def _fine_tune_shape():
    """A fine-tune's curves: train 2.1 → ~1.04 nats/token, eval 1.6 → ~1.12, both levelling off at the end
    (half of the first logged loss, which is no distance from initialisation for pretrained weights)."""
    steps = np.arange(15, 2800, 15)
    rng = np.random.default_rng(3)
    train = (1.0 + 1.1 * np.exp(-steps / 450)) * (1 + rng.normal(0, 0.015, steps.size))
    ev = np.arange(200, 2801, 200)
    return steps, train, ev, 1.12 + 0.55 * np.exp(-(ev - 200) / 550)


def test_an_hf_fine_tune_without_class_count_is_skipped_not_flagged(tmp_path):
    from forensics.judge.detectors.base import missing_reason
    from tests.runwriters import hf_history, write_trainer_state

    steps, train, ev, val = _fine_tune_shape()
    history = hf_history(steps, train, np.full(steps.size, 1.0), per_epoch=2800)
    history += [{"epoch": round(int(s) / 2800, 4), "eval_loss": float(v), "eval_runtime": 3.1, "step": int(s)}
                for s, v in zip(ev, val)]
    history.sort(key=lambda e: e["step"])
    run = load_run(write_trainer_state(tmp_path / "r", history), tmp_path / "f.duckdb")
    assert "trainer_state" in (missing_reason(Underfitting(), run) or "")
    assert list(Underfitting().check(run)) == []


def test_pretrained_weights_in_the_config_need_log_c(tmp_path):
    """The same fine-tune logged with SummaryWriter: skipped with model_name_or_path alone; with a vocabulary of
    32000 its ~1.04 nats are 10% of log C: silent."""
    from forensics.judge.detectors.base import missing_reason

    steps, train, ev, val = _fine_tune_shape()
    series = {"train/loss": (steps, train), "eval/loss": (ev, val)}
    cfg = {"model_name_or_path": "TinyLlama/TinyLlama-1.1B"}
    run = load_run(write_tb(tmp_path / "a", series, config=cfg), tmp_path / "a.duckdb")
    assert "pretrained" in (missing_reason(Underfitting(), run) or "")
    run = load_run(write_tb(tmp_path / "b", series, config={**cfg, "vocab_size": 32000}), tmp_path / "b.duckdb")
    assert missing_reason(Underfitting(), run) is None and list(Underfitting().check(run)) == []


def test_log_c_is_the_reference_where_the_config_names_c(tmp_path):
    """One early-stalling shape at 0.7: 64% of log 3 is underfitting; 7% of log 32000 is a low loss."""
    train = curve(n=300, start=1.7, floor=0.7, tau=400)
    series = {"train/loss": train, "val/loss": _val(0.72)}
    run = load_run(write_tb(tmp_path / "a", series, config={"num_classes": 3}), tmp_path / "a.duckdb")
    [f] = Underfitting().check(run)
    assert f.evidence["reference_source"] == "log(num_classes = 3)"
    assert 0.6 < f.evidence["fraction_of_reference"] < 0.7 and f.evidence["train_stall_start"] < 0.5
    run = load_run(write_tb(tmp_path / "b", series, config={"vocab_size": 32000}), tmp_path / "b.duckdb")
    assert list(Underfitting().check(run)) == []


def test_a_slow_approach_over_the_whole_run_is_not_a_stall(tmp_path):
    """From scratch, no config, high and close at the end, barely falling late, but it took the whole run to get
    there: converging, not stuck early."""
    steps = np.arange(0, 3000, 10)
    rng = np.random.default_rng(5)
    train = (0.7 + 1.0 * (1 - steps / 3000) ** 3) * (1 + rng.normal(0, 0.01, steps.size))
    ev = np.arange(100, 3001, 100)
    val = 0.72 + 1.0 * (1 - ev / 3000) ** 3
    run = load_run(write_tb(tmp_path / "r", {"train/loss": (steps, train), "val/loss": (ev, val)}), tmp_path / "f.duckdb")
    assert list(Underfitting().check(run)) == []
    fast = load_run(write_tb(tmp_path / "s", {"train/loss": curve(n=300, start=1.7, floor=0.7, tau=400),
                                              "val/loss": _val(0.72)}), tmp_path / "s.duckdb")
    assert [f.kind for f in Underfitting().check(fast)] == ["underfitting"]


def _creeping_run(tmp_path, train_floor: float, train_drop: float, val_start: float):
    """A 5-class run whose training loss falls by `train_drop` to `train_floor` early and stays, while validation
    creeps down by 0.10 from `val_start` over the whole run."""
    rng = np.random.default_rng(2)
    steps = np.arange(1, 401) * 2
    train = (train_floor + train_drop * np.exp(-steps / 40)) * (1 + rng.normal(0, 0.03, steps.size))
    vsteps = np.arange(1, 26) * 32
    val = val_start - 0.10 * vsteps / 800
    return load_run(write_tb(tmp_path / "r", {"train/loss": (steps, train), "val/loss": (vsteps, val)},
                             config={"num_classes": 5}), tmp_path / "f.duckdb")


def test_fires_near_chance_while_validation_still_creeps(tmp_path):
    """Dropout 0.9 (issue 12): train falls from 2.0 to ~1.55 early and stays; validation (dropout off) creeps
    from 1.59 to 1.49 over the whole run: both at ~0.95 log(5), and another run at that pace stays high."""
    run = _creeping_run(tmp_path, train_floor=1.55, train_drop=0.45, val_start=1.59)
    [f] = Underfitting().check(run)
    assert f.evidence["near_chance"] and f.evidence["fraction_of_reference"] > 0.9
    assert f.evidence["val_projected_one_more_run"] > 0.4 * np.log(5)


def test_slow_creep_well_below_chance_is_silent(tmp_path):
    """The same shapes at 0.6 log(5): not near chance, so validation still falling means still learning."""
    run = _creeping_run(tmp_path, train_floor=0.97, train_drop=0.9, val_start=1.05)
    assert list(Underfitting().check(run)) == []


@pytest.mark.skipif(not (REAL_RUNS_TEST / "log_mt_en2zh").is_dir(), reason="shared/real_runs_test is not beside the checkout")
@pytest.mark.needs_shared
def test_accuracy_pinned_while_both_losses_creep_down_together_in_a_real_log(tmp_path):
    """A translation model's per-epoch console log (52 epochs): train and validation loss fall together 11.2 -> 8.7,
    slowly to the end, while token accuracy sits at 0.066-0.068 from epoch 1 (the majority token's rate). The
    loss alone looks like slow convergence; the pinned accuracy says the predictions never changed (issue 24,
    class 5)."""
    run = load_run(REAL_RUNS_TEST / "log_mt_en2zh", tmp_path / "f.duckdb")
    [f] = Underfitting().check(run)
    assert f.evidence["accuracy_series"] == "Token Acc" and f.evidence["accuracy_since"] < 0.05
    assert abs(f.evidence["train_val_gap"]) < 0.01


def test_the_same_losses_with_accuracy_still_rising_are_silent(tmp_path):
    """Losses that creep down together from 11.2 to 8.7 while the accuracy keeps rising: converging slowly."""
    steps = np.arange(52) * 7 + 16
    train = 8.5 + 2.7 * np.exp(-steps / 150)
    acc = 0.05 + 0.3 * (1 - np.exp(-steps / 150))
    logs = {"train/loss": (steps, train), "val/loss": (steps, train * 1.001), "train/accuracy": (steps, acc)}
    run = load_run(write_tb(tmp_path / "r", logs), tmp_path / "f.duckdb")
    assert list(Underfitting().check(run)) == []
    pinned = np.where(steps > 16, 0.066, 0.049)  # the same losses beside an accuracy that stopped at once
    run = load_run(write_tb(tmp_path / "p", {**logs, "train/accuracy": (steps, pinned)}), tmp_path / "p.duckdb")
    [f] = Underfitting().check(run)
    assert f.evidence["accuracy_level"] == pytest.approx(0.066)


def test_a_stall_that_ends_in_nan_is_the_nans_not_underfitting(tmp_path):
    """The same stalled curves, the training loss then NaN on its last records: the run died, nothing says how
    far it would have gone."""
    steps, y = curve(n=300, start=1.7, floor=0.7, tau=400)
    y = y.copy()
    y[-6:] = np.nan
    run = load_run(write_tb(tmp_path / "r", {"train/loss": (steps, y), "val/loss": _val(0.72)}), tmp_path / "f.duckdb")
    assert list(Underfitting().check(run)) == []


def _tiny_classifier(root, informative: bool):
    """A real torch training of a linear classifier over 12 epochs, the batch loss every 16 steps (as Lightning logs
    `train_loss` on its logging steps) and a validation loss each epoch written by SummaryWriter. Without
    `informative` the labels do not depend on the inputs: what the model can learn (the class balance) it learns
    before the first log."""
    import torch
    from torch.utils.tensorboard import SummaryWriter

    torch.manual_seed(1)
    x, xv = torch.randn(4096, 16), torch.randn(1024, 16)
    if informative:
        y, yv = (x[:, :3].sum(1) > 0.8).long(), (xv[:, :3].sum(1) > 0.8).long()
    else:  # one class in five, drawn regardless of the inputs: the class balance is all there is to learn
        y, yv = (torch.rand(4096) < 0.2).long(), (torch.rand(1024) < 0.2).long()
    model = torch.nn.Linear(16, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    w = SummaryWriter(log_dir=str(root))
    step = 0
    for _ in range(12):
        for idx in torch.randperm(4096).split(128):
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step % 16 == 0:
                w.add_scalar("train/loss", loss.item(), step)
        with torch.no_grad():
            w.add_scalar("val/loss", torch.nn.functional.cross_entropy(model(xv), yv).item(), step)
    w.close()
    return root


def test_train_and_validation_that_never_fell_from_where_they_started_are_underfitting(tmp_path):
    """Labels the inputs cannot predict (one in five, at random): the first log is already at the class-balance
    level (0.5, below a uniform guess's ln 2), and train and validation sit there together to the end. The catalog's underfitting (train and validation stall high, close)
    holds with no fall before the stall; the finding says they sit where they started. Informative labels learn."""
    run = load_run(_tiny_classifier(tmp_path / "noise", informative=False), tmp_path / "n.duckdb")
    [f] = Underfitting().check(run)
    assert f.evidence["never_fell"] and abs(f.evidence["train_val_gap"]) < 0.25
    assert "where they started" in f.summary
    run = load_run(_tiny_classifier(tmp_path / "signal", informative=True), tmp_path / "s.duckdb")
    assert list(Underfitting().check(run)) == []


def _pretraining_shape(seed: int = 0):
    """A language model trained from scratch: a power law from ~8 nats at the first log to under 3, train and
    validation together (fresh text every step), still falling at the end at a few % of its level per run."""
    rng = np.random.default_rng(seed)
    steps = np.arange(250, 100_001, 250)
    loss = 2.6 + 8.2 * (1 + steps / 300) ** -0.6
    return (steps, loss * (1 + rng.normal(0, 0.005, steps.size))), (steps, loss * (1 + rng.normal(0, 0.005, steps.size)))


@pytest.mark.parametrize("seed", range(2))
def test_a_long_tail_still_falling_beyond_its_noise_is_not_a_stall(tmp_path, seed):
    """Its late fall is small beside its early drop, yet beyond its noise: a loss still falling is not stalled."""
    train, val = _pretraining_shape(seed)
    run = load_run(write_tb(tmp_path / "r", {"train/loss": train, "val/loss": val}), tmp_path / "f.duckdb")
    assert list(Underfitting().check(run)) == []
    [f] = Underfitting(min_pace=1.0).check(run)  # the pace is what decides
    assert f.evidence["fraction_of_initial"] > 0.3



@pytest.mark.parametrize("seed", range(4))
def test_a_noisy_loss_falling_through_its_noise_band_is_not_a_stall(tmp_path, seed):
    """Single-batch losses spread ±9% around a level that falls 15% over the first 70% of the run and then holds (a
    multi-label fine-tune whose first loss is already low), validation printed per batch beside it: the noise band
    holds the smoothed curve from early on, so it reads as "at that level from a sixth of the run", but the trend
    from there falls beyond its own uncertainty (σ·√(12/n)): it was still falling, and it settled late."""
    rng = np.random.default_rng(seed)
    steps = np.arange(8, 748)
    x = (steps - steps[0]) / (steps[-1] - steps[0])
    train = 0.164 * (1 - 0.15 * np.minimum(x / 0.7, 1)) * (1 + rng.normal(0, 0.09, steps.size))
    per_batch = rng.normal(0, 0.3, 9)  # the same nine validation batches every epoch
    vsteps = (np.arange(72, 751, 75)[:, None] + np.arange(9)[None, :]).ravel()
    val = (0.15 * (1 + per_batch)[None, :] * (1 + rng.normal(0, 0.02, (10, 9)))).ravel()
    run = load_run(write_tb(tmp_path / "r", {"train/loss": (steps, train), "val/loss": (vsteps, val)}),
                   tmp_path / "f.duckdb")
    assert list(Underfitting().check(run)) == []
    [f] = Underfitting(trend_sigmas=1e3).check(run)  # without the trend across the stall it reads as stalled early
    assert "stall high" in f.summary


def _sparse(first: float | None = None, seed: int = 1):
    """21 evaluations of a language model's train and validation loss (every 250 steps, each a mean): a fast
    fall, then slower; validation 0.03 above train early, near 1.56 late."""
    steps = np.arange(0, 5001, 250)
    train = 1.45 + 1.7 * np.exp(-steps / 700)
    if first is not None:
        train[0] = first
    val = 1.56 + np.random.default_rng(seed).normal(0, 0.004, steps.size)
    val[:8] = train[:8] + 0.03
    return steps, train, val


def test_a_sparse_series_is_high_against_its_first_value_not_the_median_of_its_first_three(tmp_path):
    """The first evaluation at initialisation (12.5 = ln V), the next already 3.1: the first interval holds most of
    the fall. Against the median of the first three (3.1) a final 1.45 is "49% of the initial": high; against the
    first value, 12%: it learned. The same curve without that first value is judged against its own start."""
    steps, train, val = _sparse(first=12.52)
    run = load_run(write_tb(tmp_path / "a", {"train/loss": (steps, train), "val/loss": (steps, val)}), tmp_path / "a.duckdb")
    assert list(Underfitting(sparse_points=0, first_share=2.0).check(run))  # the median of three says "high"
    assert list(Underfitting().check(run)) == []
    steps, train, val = _sparse()
    run = load_run(write_tb(tmp_path / "b", {"train/loss": (steps, train), "val/loss": (steps, val)}), tmp_path / "b.duckdb")
    [f] = Underfitting().check(run)
    assert "initial 3.15 at step 0" in f.summary


def test_a_validation_loss_setting_new_bests_at_its_last_evaluations_is_no_underfitting(tmp_path):
    """The same stall at 46% of the initial loss, but validation sets a new best at each of its last five
    evaluations (by 0.1% each: under every pace rule). A sign test, not a size, says it still improves."""
    steps, train, val = _sparse()
    val[-5:] = np.min(val[:-5]) - 0.001 * np.arange(1, 6)
    run = load_run(write_tb(tmp_path / "r", {"train/loss": (steps, train), "val/loss": (steps, val)}), tmp_path / "f.duckdb")
    assert list(Underfitting(best_evals=0).check(run))
    assert list(Underfitting().check(run)) == []


def test_a_loss_that_never_moves_while_f1_climbs_on_both_sets_is_no_underfitting(tmp_path):
    """A ranking model's per-epoch log: train and test loss sit at their first level (a poor surrogate), while F1
    climbs 30 points on train and on test. The model learns its task. The twin whose F1 stays put underfits."""
    from tests.runwriters import log_messages

    found = {}
    for name, gain in (("learns", 0.3), ("stuck", 0.0)):
        (tmp_path / name).mkdir()
        lines = []
        for e in range(60):
            lines += [f"Epoch: {e} | Epoch Time: 29.04 s",
                      f"\tTrain: loss = {6.13 + 0.01 * np.sin(e) if e else 6.353:.4f} | "
                      f"f1 = {0.50 + gain * min(e, 30) / 30 + 0.005 * np.cos(e):.4f}",
                      f"\t Test: loss = {6.25 + 0.01 * np.cos(e):.4f} | "
                      f"f1 = {0.59 + gain * min(e, 30) / 30 + 0.005 * np.sin(e):.4f}"]
        log_messages(tmp_path / name / "train.log", lines)
        found[name] = list(Underfitting().check(load_run(tmp_path / name, tmp_path / f"{name}.duckdb")))
    assert found["learns"] == [] and len(found["stuck"]) == 1


# Keras' CSVLogger file of a two-phase image classifier's second phase (epochs 10-17, 5 balanced classes), from
# https://github.com/ADITHYADEV2005/Aionos-Diagonostic (training_log.csv at a04c6c8d): the loss falls from its first
# epoch, then training and validation sit within 1% of 1.77 and 1.68 for the last four epochs.
_KERAS_CSV = """\
epoch,accuracy,learning_rate,loss,val_accuracy,val_loss
10,0.19972164928913116,9.999999747378752e-06,2.016969919204712,0.20000000298023224,3.9119229316711426
11,0.21224774420261383,9.999999747378752e-06,1.8340498208999634,0.20000000298023224,2.2220468521118164
12,0.19554628431797028,9.999999747378752e-06,1.8326226472854614,0.20000000298023224,1.8102974891662598
13,0.21781489253044128,9.999999747378752e-06,1.7790746688842773,0.20000000298023224,1.6552305221557617
14,0.21224774420261383,1.9999999949504854e-06,1.7718408107757568,0.20000000298023224,1.679437279701233
15,0.2101600617170334,1.9999999949504854e-06,1.7634447813034058,0.20000000298023224,1.6792703866958618
16,0.20737648010253906,1.9999999949504854e-06,1.7700392007827759,0.20000000298023224,1.666100025177002
17,0.2059846967458725,1.9999999949504854e-06,1.7618118524551392,0.20000000298023224,1.696900486946106
"""


def test_a_short_log_whose_last_points_hold_high_together_underfits(tmp_path):
    """Eight per-epoch records, too few for the trend tests: after a 12% fall, both losses' last four points lie
    within 2% of their medians, 5% apart and at 88% of the first value: the stall is shown outright. The same
    eight epochs still falling on both sides are silent."""
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    (run_dir / "training_log.csv").write_text(_KERAS_CSV)
    [f] = Underfitting().check(load_run(run_dir, tmp_path / "f.duckdb"))
    assert f.evidence["short_log"] and f.evidence["held_spread"] < 0.02 and f.evidence["train_points"] == 8
    steps = np.arange(8)
    falling = 2.0 * 0.9 ** steps
    run = load_run(write_tb(tmp_path / "t", {"loss": (steps, falling), "val_loss": (steps, 1.05 * falling)}),
                   tmp_path / "t.duckdb")
    assert list(Underfitting().check(run)) == []


def _yolo_run(root, map50_best: float, val_still_falls: bool = False, epochs: int = 100):
    """An Ultralytics detection fine-tune as it writes itself: `results.csv` (its header, one row per epoch) and
    `args.yaml` naming pretrained weights and no class count. Train loss sum 9.3 → 7.1 still creeping down, the
    validation loss levelling off at 7.8 from about epoch 60 (or still falling), mAP50 rising to `map50_best`."""
    import csv

    rng = np.random.default_rng(5)
    e = np.arange(1, epochs + 1)
    train = 7.0 + 2.3 * np.exp(-e / 12) - 0.002 * e
    val = 7.75 + 1.25 * (np.exp(-e / 15) if not val_still_falls else np.exp(-e / 200) - np.exp(-epochs / 200))
    val = val + rng.normal(0, 0.01, e.size)
    map50 = map50_best * (1 - np.exp(-e / 15))
    header = ["epoch", "time", "train/box_loss", "train/cls_loss", "train/dfl_loss", "metrics/precision(B)",
              "metrics/recall(B)", "metrics/mAP50(B)", "metrics/mAP50-95(B)", "val/box_loss", "val/cls_loss",
              "val/dfl_loss", "lr/pg0", "lr/pg1", "lr/pg2"]
    root.mkdir(parents=True)
    with open(root / "results.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=header)
        w.writeheader()
        for i, n in enumerate(e):
            w.writerow({"epoch": int(n), "time": round(90.0 * n, 3), "train/box_loss": round(0.3 * train[i], 5),
                        "train/cls_loss": round(0.45 * train[i], 5), "train/dfl_loss": round(0.25 * train[i], 5),
                        "metrics/precision(B)": round(1.5 * map50[i], 5), "metrics/recall(B)": round(map50[i], 5),
                        "metrics/mAP50(B)": round(map50[i], 5), "metrics/mAP50-95(B)": round(0.4 * map50[i], 5),
                        "val/box_loss": round(0.3 * val[i], 5), "val/cls_loss": round(0.45 * val[i], 5),
                        "val/dfl_loss": round(0.25 * val[i], 5), "lr/pg0": 0.001, "lr/pg1": 0.001, "lr/pg2": 0.001})
    (root / "args.yaml").write_text("task: detect\nmode: train\nmodel: yolov8n.pt\ndata: data.yaml\nepochs: "
                                    f"{epochs}\npretrained: true\noptimizer: auto\n")
    return root


def test_a_fine_tuned_detector_whose_map_stays_low_while_validation_stalls_underfits(tmp_path):
    run = load_run(_yolo_run(tmp_path / "r", 0.035), tmp_path / "f.duckdb")
    [f] = Underfitting().check(run)
    assert f.series == "metrics/mAP50(B)" and f.evidence["score_best"] <= 0.035
    assert f.evidence["val_new_bests"] * 2 <= f.evidence["val_recent_evals"]


def test_the_same_fine_tune_with_a_usable_map_or_a_validation_loss_still_falling_is_silent(tmp_path):
    from forensics.judge.detectors.base import missing_reason

    run = load_run(_yolo_run(tmp_path / "a", 0.6), tmp_path / "a.duckdb")
    assert "pretrained" in (missing_reason(Underfitting(), run) or "") and list(Underfitting().check(run)) == []
    run = load_run(_yolo_run(tmp_path / "b", 0.035, val_still_falls=True), tmp_path / "b.duckdb")
    assert list(Underfitting().check(run)) == []
