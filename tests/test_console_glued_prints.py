"""Prints glued to a progress bar, and logs of one named quantity a line, as their printers wrote them: a logger's
record printed after a bar's cursor-up escape is its own record (not the bar's `Validation:`), a one-letter held-out
prefix that mirrors the line's names is the validation's, a log whose records sit far apart between thousands of bar
redraws is still a training log, and a log of an agent's mean reward alone is read, not refused; a
progress bar's `name - value` postfix pairs are read."""

from __future__ import annotations

import pytest

from ingest.decoding import SAMPLE_BYTES
from tests.runwriters import load_run

# A Lightning run's console output (rich logging under tqdm's validation bar): each epoch's record follows the bar's
# `\r...]` and its cursor-up escape on the same line, and prints each validation value beside its training value
# under a `v_` prefix. Source: MukundShankar-dev/TMR@8e3801100626bfb33b6cbefadca2ea04007c70e9:train.out, lines 28-34.
TMR_EPOCHS = b"".join([
    b'\rValidation: |          | 0/? [00:00<?, ?it/s]\x1b[A[\x1b[37m12/09/24 14:03:31\x1b[0m] \x1b[34mINFO\x1b[0m   Epoch 0: v_recons 4.545e-01  recons 4.626e-01  v_loss 4.591e+00  loss 5.362e+00  v_latent 1.066e+00  latent 1.139e+00  v_kl 5.804e+00  kl 5.591e+00  v_dtw 7.405e-02  dtw 8.616e-02  v_t2m/len 1368  v_t2m/R01 1.32%  v_t2m/R02 3.0%  v_t2m/R03 5.55%  v_t2m/R05 7.96%  v_t2m/R10 14.77%  v_t2m/MedR 65.0%  v_m2t/len 1368  v_m2t/R01 2.26%  v_m2t/R02 3.79%  v_m2t/R03 5.4%  v_m2t/R05 8.85%  v_m2t/R10 15.85%  v_m2t/MedR 68.5%\x1b[0m\n'
    b'\n'
    b'\rValidation: |          | 0/? [00:00<?, ?it/s]\x1b[A[\x1b[37m12/09/24 14:07:00\x1b[0m] \x1b[34mINFO\x1b[0m   Epoch 1: v_recons 4.458e-01  recons 4.412e-01  v_loss 4.035e+00  loss 4.258e+00  v_latent 9.824e-01  latent 1.039e+00  v_kl 5.983e+01  kl 2.255e+01  v_dtw 6.306e-02  dtw 6.908e-02  v_t2m/len 1368  v_t2m/R01 3.28%  v_t2m/R02 6.28%  v_t2m/R03 8.4%  v_t2m/R05 13.38%  v_t2m/R10 24.2%  v_t2m/MedR 38.0%  v_m2t/len 1368  v_m2t/R01 4.67%  v_m2t/R02 7.38%  v_m2t/R03 10.38%  v_m2t/R05 15.35%  v_m2t/R10 22.51%  v_m2t/MedR 43.0%\x1b[0m\n'
    b'\n'
    b'\rValidation: |          | 0/? [00:00<?, ?it/s]\x1b[A[\x1b[37m12/09/24 14:10:32\x1b[0m] \x1b[34mINFO\x1b[0m   Epoch 2: v_recons 4.421e-01  recons 4.341e-01  v_loss 3.944e+00  loss 3.883e+00  v_latent 9.584e-01  latent 9.755e-01  v_kl 1.539e+02  kl 1.468e+02  v_dtw 6.454e-02  dtw 6.420e-02  v_t2m/len 1368  v_t2m/R01 3.73%  v_t2m/R02 7.38%  v_t2m/R03 10.75%  v_t2m/R05 16.29%  v_t2m/R10 26.23%  v_t2m/MedR 37.0%  v_m2t/len 1368  v_m2t/R01 4.3%  v_m2t/R02 7.96%  v_m2t/R03 10.89%  v_m2t/R05 16.37%  v_m2t/R10 26.82%  v_m2t/MedR 38.0%\x1b[0m\n'
    b'\n'
    b'\rValidation: |          | 0/? [00:00<?, ?it/s]\x1b[A[\x1b[37m12/09/24 14:14:03\x1b[0m] \x1b[34mINFO\x1b[0m   Epoch 3: v_recons 4.354e-01  recons 4.281e-01  v_loss 3.568e+00  loss 3.603e+00  v_latent 9.166e-01  latent 9.382e-01  v_kl 1.811e+02  kl 2.332e+02  v_dtw 5.716e-02  dtw 6.163e-02  v_t2m/len 1368  v_t2m/R01 4.61%  v_t2m/R02 7.75%  v_t2m/R03 11.18%  v_t2m/R05 17.69%  v_t2m/R10 30.26%  v_t2m/MedR 26.0%  v_m2t/len 1368  v_m2t/R01 5.26%  v_m2t/R02 9.72%  v_m2t/R03 13.44%  v_m2t/R05 20.46%  v_m2t/R10 30.4%  v_m2t/MedR 30.0%\x1b[0m\n'
])

# An ML-Agents PPO run's output as a user pasted it: the mean reward, one a line, with the thread's elisions.
# Source: https://github.com/Unity-Technologies/ml-agents/issues/101
MLAGENTS_REWARD = """Mean Reward: 2.3333333333333335
Mean Reward: 4.128571428571429
Mean Reward: 5.371428571428571
Mean Reward: 6.475
Mean Reward: 8.014285714285714

.
. Time passes
.

Mean Reward: 69.94166666666666
Mean Reward: 69.85714285714286
Mean Reward: 70.27857142857142
Mean Reward: 70.71666666666667
Mean Reward: 69.35714285714286

.
. Time passes
.

Mean Reward: 56.66428571428571
Mean Reward: 52.91428571428571
Mean Reward: 53.65
Mean Reward: 48.16428571428571
Mean Reward: 41.714285714285715

.
. Time passes
.

Mean Reward: 8.728571428571428
Mean Reward: 7.508333333333334
Mean Reward: 7.921428571428572
Mean Reward: 7.428571428571429
Mean Reward: 6.725

.
. Time passes
.

Mean Reward: 0.17857142857142858
Mean Reward: 0.175
Mean Reward: 0.37142857142857144
Mean Reward: 0.2
"""


def _series(run, tag):
    return run.series(tag)["value"].to_list()


def test_a_record_after_a_bars_cursor_up_escape_is_its_own_and_v_names_the_validation(tmp_path):
    """The record is no `Validation ...` series (the bar's name), `loss` is the training loss and `v_loss` the
    validation loss, each with the values printed for epochs 0-3."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "train.out").write_bytes(TMR_EPOCHS)
    run = load_run(tmp_path / "run", tmp_path / "f.duckdb")
    meta = {r["tag"]: r for r in run.meta.to_dicts()}
    assert not [t for t in meta if t.lower().startswith("validation")], sorted(meta)
    assert meta["loss"]["role"] == "train_loss"
    assert _series(run, "loss") == [5.362, 4.258, 3.883, 3.603]
    held = [t for t, r in meta.items() if r["role"] == "val_loss" and r["split"] == "val"]
    assert len(held) == 1, meta.get("v_loss")
    held = held[0]
    assert _series(run, held) == [4.591, 4.035, 3.944, 3.568]


def test_records_far_apart_between_bar_redraws_are_a_training_log(tmp_path):
    """tqdm redraws its bar thousands of times between two record lines: the file is still read as a training log
    and its records' losses are the training loss."""
    tqdm = pytest.importorskip("tqdm").tqdm
    (tmp_path / "run").mkdir()
    with open(tmp_path / "run" / "log_train.txt", "w") as log:
        for epoch in range(3):
            for i in tqdm(range(1200), desc="Train", file=log, mininterval=0, miniters=1, ascii=False):
                if i and i % 500 == 0:
                    log.write("\n")
                    print(f"Epoch: {epoch}; step: {i}; loss: {6.9 - epoch - i / 1000:.4f}; acc: 0.1", file=log)
            print(f"Train process of epoch: {epoch} is done; ", file=log)
    assert (tmp_path / "run" / "log_train.txt").stat().st_size > 3 * SAMPLE_BYTES  # sampled, not read whole
    run = load_run(tmp_path / "run", tmp_path / "f.duckdb")
    assert _series(run, "loss") == [6.4, 5.9, 5.4, 4.9, 4.4, 3.9]


def test_a_log_of_the_mean_reward_alone_is_read(tmp_path):
    """No loss, no step: one named quantity a line. Read as a series, so the run is judged (there is no loss to
    judge), not refused as an unknown file."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "output.txt").write_text(MLAGENTS_REWARD)
    run = load_run(tmp_path / "run", tmp_path / "f.duckdb")
    values = _series(run, "Mean Reward")
    assert values[0] == pytest.approx(2.3333333333333335) and values[-1] == 0.2
    assert len(values) == 24


# A C++ (libtorch) linear regression whose loss explodes and turns `-nan`, as the user pasted it: one `Loss: X` a line,
# no counter. Source: https://github.com/krshrimali/Linear-Regression-using-PyTorch-CPP/issues/11
LIBTORCH_BLOWUP = """Loss: 644.398
Loss: 1.49074e+07
Loss: 1.02868e+38
Loss: -nan
Loss: -nan
Loss: -nan
Loss: -nan
"""


def test_one_name_a_line_that_turns_nan_is_a_loss_not_a_settings_dump(tmp_path):
    """Four `Loss: -nan` lines under three finite ones are no settings dump (one name on every line, and `nan` is a
    value, not a setting's word): the finite values that exploded stay, the evidence of the divergence."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "output.txt").write_text(LIBTORCH_BLOWUP)
    run = load_run(tmp_path / "run", tmp_path / "f.duckdb")
    values = _series(run, "Loss")
    assert values[:3] == [644.398, 1.49074e07, 1.02868e38] and len(values) == 7



# segmentation_models_pytorch's epoch runner under tqdm (`bce_dice_loss - 1.606` in the bar's postfix), each epoch's
# train and valid bars, as a user pasted them. Source: https://github.com/silverbulletmdc/PVEN/issues/23
SMP_EPOCHS = """Epoch: 0
train: 100%|████| 396/396 [00:55<00:00,  7.67it/s, bce_dice_loss - 1.606, iou_score - 0.2795]
valid: 100%|█████| 500/500 [00:09<00:00, 52.51it/s, bce_dice_loss - 1.519, iou_score - 0.434]
Model saved!

Epoch: 1
train: 100%|████| 396/396 [00:56<00:00,  7.62it/s, bce_dice_loss - 1.581, iou_score - 0.3631]
valid: 100%|████| 500/500 [00:09<00:00, 52.48it/s, bce_dice_loss - 1.502, iou_score - 0.5235]
Model saved!

Epoch: 2
train: 100%|████| 396/396 [00:56<00:00,  7.61it/s, bce_dice_loss - 1.572, iou_score - 0.4105]
valid: 100%|████| 500/500 [00:09<00:00, 52.79it/s, bce_dice_loss - 1.493, iou_score - 0.5486]
Model saved!

"""


def test_name_dash_value_pairs_in_a_bars_postfix_are_read(tmp_path):
    """The train bar's pairs are the training loss and score, the valid bar's the validation's, one an epoch."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "train.log").write_text(SMP_EPOCHS)
    run = load_run(tmp_path / "run", tmp_path / "f.duckdb")
    meta = {r["tag"]: r for r in run.meta.to_dicts()}
    assert meta["bce_dice_loss"]["role"] == "train_loss"
    assert _series(run, "bce_dice_loss") == [1.606, 1.581, 1.572]
    assert meta["valid bce_dice_loss"]["split"] == "val"
    assert _series(run, "valid bce_dice_loss") == [1.519, 1.502, 1.493]


def test_a_tab_separated_table_of_tensor_reprs_is_read_by_its_header(tmp_path):
    """A loop that writes each epoch's tensors into a tab-separated log under its header (`epoch loss acc lr`):
    Python prints each cell as the tensor's repr (`tensor(2.3145)`, `tensor(0.98, grad_fn=<...>)`), which holds
    the column's value."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(64, 4), torch.randint(0, 3, (64,))
    losses = []
    (tmp_path / "run" / "results").mkdir(parents=True)
    with open(tmp_path / "run" / "results" / "train.log", "w") as log:
        print("epoch\tloss\tacc\tlr", file=log)
        for epoch in range(2, 8):
            out = model(x)
            loss = torch.nn.functional.cross_entropy(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            acc = (out.argmax(1) == y).float().mean()
            print("\t".join(str(v) for v in (epoch, loss, acc, opt.param_groups[0]["lr"])), file=log)
            losses.append(float(f"{loss.item():.4f}"))
    assert "tensor(" in (tmp_path / "run" / "results" / "train.log").read_text()
    run = load_run(tmp_path / "run", tmp_path / "f.duckdb")
    assert _series(run, "loss") == losses


# A Keras-era loop's tqdm description (`Epoch: <fraction> - loss: X - acc: Y`), one redraw per batch, pasted into an
# issue without the `\r` between the redraws (and a value wrapped across the paste's line break, `100.` / `883`).
# Source: https://github.com/danielegrattarola/twitter-sentiment-cnn/issues/9
GLUED_REDRAWS = """Epoch: 7.038456719825784e-05 - loss: 133.074 - acc: 0.51:   0%| | 1/42622.979999Epoch: 0.00014076913439651568 - loss: 132.773 - acc: 0.51:   0%| | 2/42622.97999Epoch: 0.00021115370159477352 - loss: 119.407 - acc: 0.46:   0%| | 3/42622.97999Epoch: 0.00028153826879303136 - loss: 106.877 - acc: 0.49:   0%| | 4/42622.97999Epoch: 0.0003519228359912892 - loss: 122.571 - acc: 0.57:   0%| | 5/42622.979999Epoch: 0.00042230740318954704 - loss: 105.927 - acc: 0.51:   0%| | 6/42622.97999Epoch: 0.0004926919703878049 - loss: 104.487 - acc: 0.48:   0%| | 7/42622.979999Epoch: 0.0005630765375860627 - loss: 109.863 - acc: 0.52:   0%| | 8/42622.979999Epoch: 0.0006334611047843205 - loss: 92.069 - acc: 0.54:   0%| | 9/42622.9799999Epoch: 0.0007038456719825784 - loss: 101.371 - acc: 0.49:   0%| | 10/42622.97999Epoch: 0.0007742302391808363 - loss: 89.7704 - acc: 0.54:   0%| | 11/42622.97999Epoch: 0.0008446148063790941 - loss: 98.222 - acc: 0.5:   0%| | 12/42622.9799999Epoch: 0.000914999373577352 - loss: 100.
883 - acc: 0.46:   0%| | 13/42622.979999Epoch: 0.0009853839407756098 - loss: 108.835 - acc: 0.43:   0%| | 14/42622.97999Epoch: 0.0010557685079738677 - loss: 92.1828 - acc: 0.5:   0%| | 15/42622.979999Epoch: 0.0011261530751721254 - loss: 110.24 - acc: 0.46:   0%| | 16/42622.979999Epoch: 0.0011965376423703834 - loss: 104.441 - acc: 0.45:   0%| | 17/42622.97999
"""


def test_bar_redraws_pasted_without_their_carriage_returns_are_one_record_each(tmp_path):
    """Each redraw's loss is a record (17 batches), not only the first of each pasted line."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "output.txt").write_text(GLUED_REDRAWS)
    run = load_run(tmp_path / "run", tmp_path / "f.duckdb")
    values = _series(run, "loss")
    assert len(values) == 17 and values[0] == 133.074 and values[-1] == 104.441


def test_a_description_before_a_bar_of_no_known_total_is_the_records_value(tmp_path):
    """tqdm over an iterator of no length prints `Loss: 0.5213: : 11it [00:06,  1.59it/s]`: the description's value
    is the loss (the count `11it` is the bar's), every epoch's last description among the records."""
    tqdm = pytest.importorskip("tqdm").tqdm
    (tmp_path / "run").mkdir()
    finals = []
    with open(tmp_path / "run" / "train.log", "w") as log:
        for epoch in range(4):
            bar = tqdm(iter(range(11)), file=log, mininterval=0, miniters=1)
            running = 0.0
            for i, _ in enumerate(bar):
                running += 0.7 - 0.05 * epoch + 0.01 * (i % 3)
                bar.set_description(f"Loss: {running / (i + 1)}")
            bar.close()
            finals.append(running / 11)
    assert ": : 11it [" in (tmp_path / "run" / "train.log").read_text()
    run = load_run(tmp_path / "run", tmp_path / "f.duckdb")
    values = _series(run, "Loss")
    assert all(any(abs(v - f) < 1e-12 for v in values) for f in finals), (finals, values)


# Marian's training log (` : `-parted fields: epoch, update, sentences, cost, time, speed, gradient norm) under fp16,
# its cost turning nan at update 300, as the user pasted it. Source: https://github.com/marian-nmt/marian-dev/issues/699
MARIAN_FP16 = """[2020-09-05 20:21:44] [memory] Reserving 230 MB, device gpu4
[2020-09-05 20:22:04] Ep. 1 : Up. 100 : Sen. 46,750 : Cost 314.00448608 : Time 35.20s : 5532.88 words/s : gNorm 20126.2366
[2020-09-05 20:22:24] Ep. 1 : Up. 200 : Sen. 86,994 : Cost 211.39459229 : Time 20.37s : 3498.78 words/s : gNorm 35733.1837
[2020-09-05 20:22:42] Ep. 1 : Up. 300 : Sen. 137,255 : Cost nan : Time 17.18s : nan words/s : gNorm 41172.8250
[2020-09-05 20:22:59] Ep. 1 : Up. 400 : Sen. 184,785 : Cost nan : Time 17.13s : nan words/s : gNorm 40407.7559
"""


def test_colon_parted_fields_are_read_with_their_update_as_the_step(tmp_path):
    """`Cost` is the training loss and `Up.` its step: the nan at update 300 is found after 211.39 at update 200."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "train.log").write_text(MARIAN_FP16)
    run = load_run(tmp_path / "run", tmp_path / "f.duckdb")
    points = run.series_named("Cost")
    assert points["step"].to_list() == [100, 200, 300, 400]
    values = points["value"].to_list()
    assert values[:2] == [314.00448608, 211.39459229] and all(v != v for v in values[2:])


# PyTorch Lightning's bar under mpirun, as a SageMaker job's log stream keeps it: syslog wrote each carriage return
# as `#015` and each escape as `#033`. Source: https://github.com/aws-samples/sagemaker-distributed-training-workshop/issues/6
SYSLOG_ESCAPED_BAR = (
    b"[1,mpirank:0,algo-1]<stdout>:#015Epoch 0:  50% 1/2 [00:00<00:00,  6.54it/s, loss=2.29, v_num=0]\n"
    b"[1,mpirank:0,algo-1]<stdout>:\n"
    b"[1,mpirank:0,algo-1]<stdout>:#015Validation: 0it [00:00, ?it/s]#033[A\n"
    b"[1,mpirank:0,algo-1]<stdout>:\n"
    b"[1,mpirank:0,algo-1]<stdout>:#015Validation:   0% 0/1 [00:00<?, ?it/s]#033[A\n"
    b"[1,mpirank:0,algo-1]<stdout>:#015Validation DataLoader 0:   0% 0/1 [00:00<?, ?it/s]#033[A\n"
    b"[1,mpirank:0,algo-1]<stdout>:\n"
    b"[1,mpirank:0,algo-1]<stdout>:#015Validation DataLoader 0: 100% 1/1 [00:00<00:00, 1113.73it/s]#033[A\n"
    b"[1,mpirank:0,algo-1]<stdout>:#015Epoch 0: 100% 2/2 [00:00<00:00, 12.33it/s, loss=2.29, v_num=0]\n"
    b"[1,mpirank:0,algo-1]<stdout>:#015Epoch 0: 100% 2/2 [00:00<00:00, 12.33it/s, loss=2.29, v_num=0]\n"
    b"[1,mpirank:0,algo-1]<stdout>:#015Epoch 0: 100% 2/2 [00:00<00:00, 12.10it/s, loss=2.29, v_num=0, val_acc=0.166]\n"
    b"[1,mpirank:0,algo-1]<stdout>:#015                                                            #033[A\n"
    b"[1,mpirank:0,algo-1]<stdout>:#015Epoch 0: 100% 2/2 [00:00<00:00, 12.05it/s, loss=2.29, v_num=0, val_acc=0.166]\n"
)


def test_control_characters_a_syslog_escaped_are_taken_back(tmp_path):
    """`#015` is the bar's carriage return and `#033[A` its cursor-up: the log is read, its loss and val_acc found."""
    from ingest.console import sniff_console

    assert sniff_console(SYSLOG_ESCAPED_BAR, "output.txt")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "output.txt").write_bytes(SYSLOG_ESCAPED_BAR)
    run = load_run(tmp_path / "run", tmp_path / "f.duckdb")
    assert set(run.series_named("loss")["value"].to_list()) == {2.29}
    assert run.series_named("val_acc")["value"].to_list()[-1] == 0.166


def test_a_postfix_key_that_carries_its_own_colon_is_read_by_the_key(tmp_path):
    """tqdm's `set_postfix(ordered_dict=...)` with a key that ends in a colon (a DDPM trainer's `"loss: "`, printed
    `loss: =6.78`, as in https://github.com/zoubohao/DenoisingDiffusionProbabilityModel-ddpm-/issues/5): the key before
    the colon names the value, one an epoch, beside the plain `epoch=` and `LR=` pairs."""
    from collections import OrderedDict

    from tqdm import tqdm

    (tmp_path / "run").mkdir()
    losses = [6.78, 8.38, 6.01, 9.78, 5.5]
    with open(tmp_path / "run" / "train.log", "w") as f:
        for epoch, loss in enumerate(losses):
            bar = tqdm(range(3), file=f, mininterval=0, miniters=1, dynamic_ncols=False, ncols=160)
            for _ in bar:
                bar.set_postfix(ordered_dict=OrderedDict(
                    [("epoch", epoch), ("loss: ", loss), ("img shape: ", (80, 3, 32, 32)), ("LR", 1e-4 * (epoch + 1))]))
            bar.close()
            f.write("\n")
    run = load_run(tmp_path / "run", tmp_path / "f.duckdb")
    assert run.pick("loss") == "loss"
    assert sorted(set(_series(run, "loss"))) == sorted(set(losses))
