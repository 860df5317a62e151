"""resumed_run on real logs: a restart shown by the epoch its lines print going back on a line axis, a log that opens
on a checkpoint's load at a late epoch, and launches appended to one log or written side by side that are no resume."""

import numpy as np
import pytest

from forensics.judge.detectors import ResumedRun
from tests.runwriters import load_run

# SRN-DeblurNet's per-epoch log (idrpambudi/SRN-Deblur@bb26b392e794d87c6ab8c10c5b1d96e7bab4eef0:checkpoints/log.txt,
# lines 1-12 and 524-536): the file opens at epoch 131 (a checkpoint's), goes back from 137 to 131 and from 652 to 651
SRN_DEBLUR = """\
Epoch 131: average_loss = 0.00484 (17.6 data/s; 119.66 s/epoch), 2019-05-27 22:52:44
Epoch 132: average_loss = 0.00494 (18.6 data/s; 113.13 s/epoch), 2019-05-27 22:54:39
Epoch 133: average_loss = 0.00486 (18.6 data/s; 112.88 s/epoch), 2019-05-27 22:56:32
Epoch 134: average_loss = 0.00487 (18.6 data/s; 112.93 s/epoch), 2019-05-27 22:58:25
Epoch 135: average_loss = 0.00507 (18.6 data/s; 113.13 s/epoch), 2019-05-27 23:00:18
Epoch 136: average_loss = 0.00495 (18.6 data/s; 112.93 s/epoch), 2019-05-27 23:02:13
Epoch 137: average_loss = 0.00484 (18.5 data/s; 113.76 s/epoch), 2019-05-27 23:04:07
Epoch 131: average_loss = 0.00523 (17.2 data/s; 122.11 s/epoch), 2019-05-27 23:06:51
Epoch 132: average_loss = 0.00500 (18.3 data/s; 114.62 s/epoch), 2019-05-27 23:08:47
Epoch 133: average_loss = 0.00510 (18.4 data/s; 114.30 s/epoch), 2019-05-27 23:10:42
Epoch 134: average_loss = 0.00486 (18.4 data/s; 114.57 s/epoch), 2019-05-27 23:12:36
Epoch 135: average_loss = 0.00503 (18.3 data/s; 114.78 s/epoch), 2019-05-27 23:14:31
Epoch 647: average_loss = 0.00334 (18.6 data/s; 113.27 s/epoch), 2019-05-28 15:28:47
Epoch 648: average_loss = 0.00335 (18.6 data/s; 113.25 s/epoch), 2019-05-28 15:30:40
Epoch 649: average_loss = 0.00326 (18.5 data/s; 113.56 s/epoch), 2019-05-28 15:32:34
Epoch 650: average_loss = 0.00321 (18.5 data/s; 113.63 s/epoch), 2019-05-28 15:34:28
Epoch 651: average_loss = 0.00328 (18.6 data/s; 113.10 s/epoch), 2019-05-28 15:36:22
Epoch 652: average_loss = 0.00344 (18.6 data/s; 113.09 s/epoch), 2019-05-28 15:38:15
Epoch 651: average_loss = 0.00330 (17.2 data/s; 122.62 s/epoch), 2019-05-28 15:51:40
Epoch 652: average_loss = 0.00326 (18.9 data/s; 111.54 s/epoch), 2019-05-28 15:53:33
Epoch 653: average_loss = 0.00327 (18.7 data/s; 112.45 s/epoch), 2019-05-28 15:55:25
Epoch 654: average_loss = 0.00343 (18.7 data/s; 112.18 s/epoch), 2019-05-28 15:57:18
Epoch 655: average_loss = 0.00330 (18.7 data/s; 112.31 s/epoch), 2019-05-28 15:59:10
Epoch 656: average_loss = 0.00328 (18.7 data/s; 112.28 s/epoch), 2019-05-28 16:01:04
Epoch 657: average_loss = 0.00335 (18.8 data/s; 112.14 s/epoch), 2019-05-28 16:02:56
"""

# nnU-Net v2's trainer output (Kururu007/U-Net_v2-RMIS-Eva@c6a62db239cc57dd75837f7c9fe2781f40ca057f:
# nnunetv2/run/condor_log/458805-0.out, line 504 and lines 524-580): a checkpoint loaded, then the records open at
# epoch 170 (trailing spaces stripped here)
NNUNET_RESUMED = """\
loading from : /afs/crc.nd.edu/user/y/ypeng4/data/trained_models/Dataset124_ISIC2018/ISICTrainer__nnUNetPlans__2d/456329_my_unet_FusedMBConv_16/fold_0/checkpoint_latest.pth
2023-09-02 00:09:57.111114:
2023-09-02 00:09:57.111795: Epoch 170
2023-09-02 00:09:57.112527: Current learning rate: backbone 0.00047113, others 0.00047113
2023-09-02 00:09:57.113074: start training, 250
==========num_iterations_per_epoch: 250===========
using pin_memory on device 0
2023-09-02 00:11:11.264284: finished training epoch 170
2023-09-02 00:11:11.299542: Using splits from existing split file: /tmp/ypeng4/preprocessed_data/Dataset124_ISIC2018/splits_final.json
2023-09-02 00:11:11.301005: The split file contains 1 splits.
2023-09-02 00:11:11.301871: Desired fold for training: 0
2023-09-02 00:11:11.302444: This split has 1886 training and 808 validation cases.
start computing score....
2023-09-02 00:16:17.827759: dsc: 91.19%
2023-09-02 00:16:17.828927: miou: 83.80%
2023-09-02 00:16:17.829599: acc: 95.58%, sen: 90.82%, spe: 97.18%
2023-09-02 00:16:17.830590: current best miou: 0.8379932158881044 at epoch: 170, (170, 0.8379932158881044, 0.9118567018031047)
2023-09-02 00:16:17.831197: current best dsc: 0.9118567018031047 at epoch: 170, (170, 0.8379932158881044, 0.9118567018031047)
2023-09-02 00:16:19.364852: finished real validation
using pin_memory on device 0
2023-09-02 00:16:24.626007: train_loss -1.4402
2023-09-02 00:16:24.627123: val_loss -1.0063
2023-09-02 00:16:24.628510: Pseudo dice [0.911]
2023-09-02 00:16:24.629294: Epoch time: 387.52 s
2023-09-02 00:16:26.842067:
2023-09-02 00:16:26.843038: Epoch 171
2023-09-02 00:16:26.843707: Current learning rate: backbone 0.00046787, others 0.00046787
2023-09-02 00:16:26.845084: start training, 250
==========num_iterations_per_epoch: 250===========
2023-09-02 00:17:28.933405: finished training epoch 171
2023-09-02 00:17:28.976144: Using splits from existing split file: /tmp/ypeng4/preprocessed_data/Dataset124_ISIC2018/splits_final.json
2023-09-02 00:17:28.978016: The split file contains 1 splits.
2023-09-02 00:17:28.978732: Desired fold for training: 0
2023-09-02 00:17:28.979334: This split has 1886 training and 808 validation cases.
start computing score....
2023-09-02 00:22:44.218337: dsc: 91.26%
2023-09-02 00:22:44.219368: miou: 83.92%
2023-09-02 00:22:44.220083: acc: 95.61%, sen: 91.16%, spe: 97.10%
2023-09-02 00:22:44.220935: current best miou: 0.8391908786172766 at epoch: 171, (171, 0.8391908786172766, 0.912565289849838)
2023-09-02 00:22:44.221577: current best dsc: 0.912565289849838 at epoch: 171, (171, 0.8391908786172766, 0.912565289849838)
2023-09-02 00:22:45.769644: finished real validation
2023-09-02 00:22:50.151964: train_loss -1.4403
2023-09-02 00:22:50.153156: val_loss -1.0341
2023-09-02 00:22:50.154094: Pseudo dice [0.9134]
2023-09-02 00:22:50.154711: Epoch time: 383.31 s
2023-09-02 00:22:51.302532:
2023-09-02 00:22:51.303626: Epoch 172
2023-09-02 00:22:51.304324: Current learning rate: backbone 0.0004646, others 0.0004646
2023-09-02 00:22:51.305421: start training, 250
==========num_iterations_per_epoch: 250===========
2023-09-02 00:23:53.509789: finished training epoch 172
2023-09-02 00:23:53.543998: Using splits from existing split file: /tmp/ypeng4/preprocessed_data/Dataset124_ISIC2018/splits_final.json
2023-09-02 00:23:53.545351: The split file contains 1 splits.
2023-09-02 00:23:53.545907: Desired fold for training: 0
2023-09-02 00:23:53.546377: This split has 1886 training and 808 validation cases.
start computing score....
2023-09-02 00:30:09.544950: dsc: 91.30%
2023-09-02 00:30:09.545851: miou: 83.99%
"""

# A Keras CSVLogger in append mode (Farru049/Handwritten-Digit-Recognition@fc62544131320d95a0776537847ec313736d769b:
# training_log.csv, whole): epochs 0-4, then a fresh launch from epoch 0 at the untrained loss
KERAS_TWO_LAUNCHES = """\
epoch,accuracy,loss,val_accuracy,val_loss

0,0.9276833534240723,0.25464263558387756,0.9527000188827515,0.1515832096338272

1,0.9663500189781189,0.11305326223373413,0.9696000218391418,0.09849796444177628

2,0.9759666919708252,0.07812996208667755,0.9721999764442444,0.08969626575708389

3,0.9821833372116089,0.0578271746635437,0.9753999710083008,0.0805041715502739

4,0.9860333204269409,0.04552476480603218,0.9768999814987183,0.07377747446298599

0,0.9250333309173584,0.2629197835922241,0.9587000012397766,0.14240649342536926

1,0.9646333456039429,0.11847326904535294,0.9708999991416931,0.09215246886014938

2,0.9756666421890259,0.08059009909629822,0.9708999991416931,0.09422511607408524

3,0.9817666411399841,0.06015295907855034,0.9768999814987183,0.07522919028997421

4,0.9851666688919067,0.046555157750844955,0.9763000011444092,0.07206366956233978

5,0.9884666800498962,0.03669566661119461,0.9758999943733215,0.07657496631145477

6,0.9910666942596436,0.029482632875442505,0.9794999957084656,0.06570135802030563

7,0.9926833510398865,0.023807277902960777,0.9772999882698059,0.07882910221815109

8,0.9940000176429749,0.020064976066350937,0.9800999760627747,0.073245108127594

9,0.9946833252906799,0.016976894810795784,0.9796000123023987,0.07221856713294983

"""


def _run(tmp_path, name, text):
    root = tmp_path / "r"
    root.mkdir()
    (root / name).write_text(text)
    return load_run(root, tmp_path / "f.duckdb")


def test_the_epoch_printed_going_back_on_a_line_axis_is_a_restart(tmp_path):
    """The reader puts a counter that goes back on a line axis: the epochs the lines print still show the restart,
    both the one back to the file's first epoch (131: itself a checkpoint's, not a fresh start) and a later one."""
    found = list(ResumedRun().check(_run(tmp_path, "log.txt", SRN_DEBLUR)))
    assert [(f.evidence["epoch_before"], f.evidence["epoch_after"]) for f in found] == [(137, 131), (652, 651)]
    assert found[1].evidence["wall_gap_s"] == 805


def test_a_log_opening_on_a_checkpoint_load_at_a_late_epoch_is_a_resume(tmp_path):
    [f] = ResumedRun().check(_run(tmp_path, "458805-0.out", NNUNET_RESUMED))
    assert f.evidence["opens_at_epoch"] == 170 and "checkpoint_latest.pth" in f.evidence["announced"]
    assert "the records open at epoch 170" in f.summary


def test_a_checkpoint_load_before_the_first_epochs_is_no_resume(tmp_path):
    """The same lines with the epochs counted from 1: a fine-tuning start loads a checkpoint too."""
    text = NNUNET_RESUMED
    for e in (170, 171, 172):
        text = text.replace(f"Epoch {e}\n", f"Epoch {e - 170}\n").replace(f"epoch {e}\n", f"epoch {e - 170}\n")
    assert list(ResumedRun().check(_run(tmp_path, "458805-0.out", text))) == []


def test_an_epoch_column_back_to_its_first_epoch_is_a_fresh_launch(tmp_path):
    """A CSVLogger appending a second launch: its epoch column starts again at 0 and its loss at the untrained level.
    No logged step goes on across it (the rows are the axis), so nothing says the run was resumed."""
    assert list(ResumedRun().check(_run(tmp_path, "training_log.csv", KERAS_TWO_LAUNCHES))) == []


# Three runs of one GPT-2 fine-tune pasted one after another (jlin816/jax-sandbox@3f026d855059571d280a0a09a84e9e0126ace456:
# README.md, lines 1-29): each block counts its steps from 0 again, and the second and third open at the same loss
SEEDED_BLOCKS = """\
## Torch, GPU:
```
step 0 | elapsed 0.14m | loss: 4.12 | val: 3.53
step 100 | elapsed 0.90m | loss: 3.16 | val: 2.97
step 200 | elapsed 1.67m | loss: 3.25 | val: 2.93
step 300 | elapsed 2.43m | loss: 3.21 | val: 2.91
step 400 | elapsed 3.20m | loss: 3.02 | val: 2.88
step 500 | elapsed 3.97m | loss: 3.21 | val: 2.87
```

## Jax, GPU, no jit:
(TODO: these #s don't include eval time)
```
step 0 | elapsed 0.25m | loss: 4.01
step 100 | elapsed 2.10m | loss: 3.87
step 200 | elapsed 3.95m | loss: 3.88
step 300 | elapsed 5.84m | loss: 3.98
step 400 | elapsed 7.68m | loss: 3.91
step 500 | elapsed 9.52m | loss: 3.92
```

## Jax, GPU, jit train step:
(Note first step is slower than torch because of jit!)
```
step 0 | elapsed 0.49m | loss: 4.01 | val: 3.52
step 100 | elapsed 1.11m | loss: 3.07 | val: 2.96
step 200 | elapsed 1.72m | loss: 3.08 | val: 2.92
step 300 | elapsed 2.34m | loss: 3.16 | val: 2.89
step 400 | elapsed 2.97m | loss: 3.07 | val: 2.88
step 500 | elapsed 3.59m | loss: 3.01 | val: 2.87
```
"""


def test_a_fresh_launch_opening_at_an_earlier_launchs_first_loss_starts_from_the_beginning(tmp_path):
    """Launches counted from step 0 again, the third opening at the very loss the second opened at (4.01 at step 0):
    that record is no copy to drop before the order is read, so the counter still goes back to the start (a fresh
    launch), not from 500 to 100 (a resume). A resume that repeats a passed step with the values it logged before is
    still one once its new values begin."""
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    assert list(ResumedRun().check(_run(tmp_path / "a", "README.md", SEEDED_BLOCKS))) == []
    resumed = SEEDED_BLOCKS.replace("step 0 | elapsed 0.49m | loss: 4.01", "step 300 | elapsed 5.84m | loss: 3.98", 1)
    resumed = resumed.replace("step 100 | elapsed 1.11m", "step 400 | elapsed 1.11m").replace(
        "step 200 | elapsed 1.72m", "step 500 | elapsed 1.72m").replace("step 300 | elapsed 2.34m", "step 600 | elapsed 2.34m")
    resumed = resumed.replace("step 400 | elapsed 2.97m", "step 700 | elapsed 2.97m").replace(
        "step 500 | elapsed 3.59m", "step 800 | elapsed 3.59m")
    [f] = ResumedRun().check(_run(tmp_path / "b", "README.md", resumed))
    assert (f.evidence["previous_step"], f.evidence["restart_step"]) == (500, 400)


# Keras' CSVLogger(append=True) over sessions of a few epochs each (FarrisFoo/ai-mini-project@
# 559f1fea071541e71acc44f67e937291aef3de3a:training_log_mobilenetv3_small.csv, lines 1-28): two sessions of 8 epochs
# from the untrained loss (3.45, 3.42), then sessions that open at 2.21 where the second closed (2.08)
SHORT_SESSIONS = """\
epoch,accuracy,loss,val_accuracy,val_loss
0,0.1104019284248352,3.4500441551208496,0.11538461595773697,2.5983595848083496
1,0.1464550644159317,3.0021846294403076,0.12019230425357819,2.5013911724090576
2,0.1649128794670105,2.7246978282928467,0.12019230425357819,2.5020055770874023
3,0.18112817406654358,2.5198886394500732,0.12019230425357819,2.514129161834717
4,0.20113852620124817,2.333451271057129,0.12019230425357819,2.532609224319458
5,0.22425392270088196,2.257047176361084,0.12019230425357819,2.678778648376465
6,0.2399516999721527,2.1814026832580566,0.12019230425357819,2.863826274871826
7,0.25478696823120117,2.130399465560913,0.12019230425357819,2.6794514656066895
0,0.1081593930721283,3.4248220920562744,0.11538461595773697,2.6626787185668945
1,0.15473520755767822,2.8724799156188965,0.12019230425357819,2.8613977432250977
2,0.18285320699214935,2.5609054565429688,0.12019230425357819,2.6529853343963623
3,0.20355355739593506,2.3582849502563477,0.12019230425357819,2.652064085006714
4,0.23891668021678925,2.2212212085723877,0.12019230425357819,2.592953681945801
5,0.24874936044216156,2.159512996673584,0.12019230425357819,2.7090089321136475
6,0.2622045874595642,2.1011788845062256,0.12019230425357819,2.735464334487915
7,0.2701397240161896,2.080573320388794,0.12019230425357819,2.8128762245178223
0,0.200966015458107,2.210188627243042,0.12019230425357819,2.3409957885742188
0,0.20510609447956085,2.2174928188323975,0.10496795177459717,2.7546730041503906
1,0.27272728085517883,2.0669949054718018,0.12019230425357819,2.368494749069214
2,0.312747985124588,1.979730248451233,0.10096153616905212,2.352169990539551
3,0.3358633816242218,1.9213266372680664,0.10256410390138626,2.4870660305023193
4,0.3598412871360779,1.8600796461105347,0.11538461595773697,2.7319247722625732
5,0.3774366080760956,1.8117190599441528,0.12019230425357819,3.119290828704834
6,0.3855442404747009,1.7663573026657104,0.08493589609861374,2.5824220180511475
7,0.41366222500801086,1.7033257484436035,0.08573717623949051,2.561964511871338
8,0.4300500154495239,1.651687741279602,0.12019230425357819,4.568061828613281
9,0.4473003149032593,1.5870457887649536,0.08814102411270142,19.29291534423828
"""


def test_a_session_of_a_few_epochs_that_opens_where_the_last_closed_is_resumed_from_its_weights(tmp_path):
    """Launches of eight records each are read at half their records (too short for five at each end): the third
    opens at 2.21 after the second fell 3.42 -> 2.08, the weights loaded; the second, back at 3.42, was a fresh start.
    With the third opening at the untrained level too, nothing was resumed."""
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    [f] = ResumedRun().check(_run(tmp_path / "a", "training_log.csv", SHORT_SESSIONS))
    assert f.step == 16 and f.evidence["next_opened"] == pytest.approx(2.210188627243042)
    assert f.evidence["launch_opened"] > 2.5 and f.evidence["launch_closed"] < 2.2
    rows = SHORT_SESSIONS.splitlines(True)
    fresh = rows[:17] + [r.replace(r.split(",")[2], str(float(r.split(",")[2]) + 1.25), 1) for r in rows[17:]]
    assert list(ResumedRun().check(_run(tmp_path / "b", "training_log.csv", "".join(fresh)))) == []


def test_two_processes_writing_side_by_side_are_no_resume(tmp_path):
    """Two ranks, each its own SummaryWriter, logging the same steps at the same time: read by wall time their points
    interleave and every step repeats; each file in its own order goes back nowhere. One process that starts after
    the other ended, back at a step it had passed, is still a resume."""
    from torch.utils.tensorboard import SummaryWriter

    rng = np.random.default_rng(0)
    t0 = 1.7e9
    root = tmp_path / "ranks"
    for rank in range(2):
        w = SummaryWriter(log_dir=str(root), filename_suffix=f".{rank}")
        for s in range(1, 21):
            w.add_scalar("Loss/train", 1.0 + rng.normal(0, 0.04), global_step=s, walltime=t0 + 90.0 * s + 0.1 * rank)
        w.close()
    assert len(list(root.glob("events.out.tfevents.*"))) == 2
    assert list(ResumedRun().check(load_run(root, tmp_path / "f.duckdb"))) == []
    later = tmp_path / "later"
    for first, t in ((1, t0), (11, t0 + 90.0 * 21 + 600)):
        w = SummaryWriter(log_dir=str(later), filename_suffix=f".{first}")
        for s in range(first, first + 20):
            w.add_scalar("Loss/train", 1.0 + rng.normal(0, 0.04), global_step=s, walltime=t + 90.0 * (s - first))
        w.close()
    [f] = ResumedRun().check(load_run(later, tmp_path / "g.duckdb"))
    assert (f.step, f.step_end) == (11, 20)


# pytorch-CycleGAN-and-pix2pix's loss_log.txt (mdellaiera/NUS_Deep_Learning_Assignment@
# 22cd92bfb6289077b1e7d5f34e9e02e626a2b8ba:loss_log.txt, lines 1-20 and 138-146): one record in epoch 11 prints
# `epoch: 1` (a stray line), and the next goes on at epoch 11 (trailing spaces stripped here)
CYCLEGAN_STRAY_LINE = """\
================ Training Loss (Sat Apr 26 20:14:10 2025) ================
(epoch: 1, iters: 100, time: 0.060, data: 0.156) D_A: 0.605 G_A: 0.671 cycle_A: 2.924 idt_A: 0.663 D_B: 0.725 G_B: 1.032 cycle_B: 1.376 idt_B: 1.400
(epoch: 1, iters: 200, time: 0.060, data: 0.002) D_A: 0.434 G_A: 0.481 cycle_A: 3.651 idt_A: 0.460 D_B: 0.459 G_B: 0.369 cycle_B: 0.907 idt_B: 1.814
(epoch: 1, iters: 300, time: 0.060, data: 0.002) D_A: 0.265 G_A: 0.249 cycle_A: 2.677 idt_A: 1.000 D_B: 0.290 G_B: 0.312 cycle_B: 1.984 idt_B: 1.206
(epoch: 1, iters: 400, time: 0.092, data: 0.002) D_A: 0.235 G_A: 0.328 cycle_A: 2.033 idt_A: 0.697 D_B: 0.288 G_B: 0.422 cycle_B: 1.396 idt_B: 0.947
(epoch: 1, iters: 500, time: 0.060, data: 0.002) D_A: 0.215 G_A: 0.276 cycle_A: 3.845 idt_A: 1.014 D_B: 0.255 G_B: 0.327 cycle_B: 2.110 idt_B: 1.783
(epoch: 1, iters: 600, time: 0.060, data: 0.002) D_A: 0.224 G_A: 0.422 cycle_A: 2.533 idt_A: 0.700 D_B: 0.223 G_B: 0.357 cycle_B: 1.506 idt_B: 1.155
(epoch: 1, iters: 700, time: 0.060, data: 0.002) D_A: 0.304 G_A: 0.506 cycle_A: 2.538 idt_A: 1.241 D_B: 0.251 G_B: 0.377 cycle_B: 2.453 idt_B: 1.069
(epoch: 1, iters: 800, time: 0.060, data: 0.002) D_A: 0.223 G_A: 0.562 cycle_A: 3.236 idt_A: 0.901 D_B: 0.231 G_B: 0.328 cycle_B: 1.769 idt_B: 1.454
(epoch: 1, iters: 900, time: 0.060, data: 0.002) D_A: 0.184 G_A: 0.335 cycle_A: 1.809 idt_A: 0.889 D_B: 0.229 G_B: 0.388 cycle_B: 1.599 idt_B: 0.786
(epoch: 1, iters: 1000, time: 0.060, data: 0.002) D_A: 0.320 G_A: 0.514 cycle_A: 1.876 idt_A: 1.104 D_B: 0.231 G_B: 0.375 cycle_B: 2.111 idt_B: 0.944
(epoch: 1, iters: 1100, time: 0.060, data: 0.003) D_A: 0.181 G_A: 0.519 cycle_A: 1.998 idt_A: 0.881 D_B: 0.238 G_B: 0.405 cycle_B: 1.738 idt_B: 0.980
(epoch: 1, iters: 1200, time: 0.060, data: 0.002) D_A: 0.173 G_A: 0.402 cycle_A: 2.068 idt_A: 0.823 D_B: 0.274 G_B: 0.384 cycle_B: 1.660 idt_B: 1.078
(epoch: 1, iters: 1300, time: 0.060, data: 0.002) D_A: 0.169 G_A: 0.558 cycle_A: 2.129 idt_A: 0.608 D_B: 0.215 G_B: 0.355 cycle_B: 1.340 idt_B: 1.020
(epoch: 1, iters: 1400, time: 0.060, data: 0.002) D_A: 0.344 G_A: 0.827 cycle_A: 2.040 idt_A: 0.543 D_B: 0.185 G_B: 0.375 cycle_B: 1.168 idt_B: 1.017
(epoch: 2, iters: 100, time: 0.060, data: 0.002) D_A: 0.184 G_A: 0.360 cycle_A: 1.723 idt_A: 0.575 D_B: 0.224 G_B: 0.355 cycle_B: 1.288 idt_B: 0.791
(epoch: 2, iters: 200, time: 0.060, data: 0.002) D_A: 0.159 G_A: 0.385 cycle_A: 1.933 idt_A: 0.778 D_B: 0.224 G_B: 0.410 cycle_B: 1.633 idt_B: 0.936
(epoch: 2, iters: 300, time: 0.060, data: 0.002) D_A: 0.277 G_A: 0.641 cycle_A: 3.583 idt_A: 0.786 D_B: 0.221 G_B: 0.385 cycle_B: 1.524 idt_B: 1.602
(epoch: 2, iters: 400, time: 0.060, data: 0.002) D_A: 0.196 G_A: 0.488 cycle_A: 2.068 idt_A: 0.910 D_B: 0.185 G_B: 0.387 cycle_B: 1.856 idt_B: 0.950
(epoch: 2, iters: 500, time: 0.060, data: 0.002) D_A: 0.128 G_A: 0.349 cycle_A: 1.527 idt_A: 0.931 D_B: 0.244 G_B: 0.324 cycle_B: 1.750 idt_B: 0.627
(epoch: 10, iters: 1100, time: 0.060, data: 0.002) D_A: 0.168 G_A: 0.507 cycle_A: 1.733 idt_A: 0.804 D_B: 0.096 G_B: 0.527 cycle_B: 1.639 idt_B: 0.762
(epoch: 10, iters: 1200, time: 0.060, data: 0.002) D_A: 0.173 G_A: 0.424 cycle_A: 1.245 idt_A: 0.411 D_B: 0.088 G_B: 0.409 cycle_B: 0.755 idt_B: 0.595
(epoch: 10, iters: 1300, time: 0.060, data: 0.002) D_A: 0.232 G_A: 0.394 cycle_A: 1.188 idt_A: 0.701 D_B: 0.232 G_B: 0.692 cycle_B: 1.517 idt_B: 0.477
(epoch: 10, iters: 1400, time: 0.113, data: 0.002) D_A: 0.211 G_A: 0.376 cycle_A: 1.636 idt_A: 0.614 D_B: 0.197 G_B: 0.673 cycle_B: 1.426 idt_B: 0.733
(epoch: 11, iters: 100, time: 0.060, data: 0.002) D_A: 0.202 G_A: 0.234 cycle_A: 1.391 idt_A: 0.799 D_B: 0.195 G_B: 0.475 cycle_B: 1.509 idt_B: 0.545
(epoch: 1, iters: 200, time: 0.060, data: 0.002) D_A: 0.177 G_A: 0.472 cycle_A: 1.638 idt_A: 0.396 D_B: 0.134 G_B: 0.657 cycle_B: 0.711 idt_B: 0.657
(epoch: 11, iters: 300, time: 0.060, data: 0.002) D_A: 0.194 G_A: 0.447 cycle_A: 1.244 idt_A: 0.671 D_B: 0.183 G_B: 0.550 cycle_B: 1.149 idt_B: 0.510
(epoch: 11, iters: 400, time: 0.060, data: 0.002) D_A: 0.201 G_A: 0.518 cycle_A: 1.257 idt_A: 0.525 D_B: 0.114 G_B: 0.356 cycle_B: 1.030 idt_B: 0.568
(epoch: 11, iters: 500, time: 0.060, data: 0.002) D_A: 0.218 G_A: 0.867 cycle_A: 1.116 idt_A: 0.514 D_B: 0.151 G_B: 0.276 cycle_B: 1.007 idt_B: 0.456
"""


def test_one_stray_record_back_at_the_first_epoch_is_no_launch_to_judge(tmp_path):
    """The reader marks a launch where the counter falls back to its first epoch; the record after it prints the
    epoch of the count before it again, so no launch began there, and its level says nothing of loaded weights."""
    assert list(ResumedRun().check(_run(tmp_path, "loss_log.txt", CYCLEGAN_STRAY_LINE))) == []


# A PINN's training log (weishanlee/PINN-Euler-Bernoulli-Beam@f40d1a9a21d2b588d203ee275cd0f3c34050094e:
# output/train_log.txt, lines 62-90, 315-345, 415-427 and 476-500): Adam epochs, an L-BFGS phase whose per-term losses
# hold at their last digits, then a fresh launch with more harmonics from `Epoch 0/2000` at the untrained loss
PINN_FRESH_LAUNCH = """\
Epoch 0/2000, Loss: 1.035755e+05, L2 Error: 9.579395030e-01, Time: 0.41s
  PDE Loss: 1.830336e-08, IC Loss: 4.645410e-01, IC_V Loss: 1.065706e+00, BC Loss: 4.643070e-12
New best model saved with error: 9.579395030e-01
Epoch 20/2000, Loss: 3.399227e+04, L2 Error: 7.612331621e-01, Time: 4.41s
  PDE Loss: 2.404491e-02, IC Loss: 2.877595e-01, IC_V Loss: 7.427685e-02, BC Loss: 3.056709e-05
New best model saved with error: 7.612331621e-01
Epoch 40/2000, Loss: 1.866920e+04, L2 Error: 5.720403760e-01, Time: 8.29s
  PDE Loss: 1.289921e-02, IC Loss: 1.630071e-01, IC_V Loss: 3.095891e-02, BC Loss: 1.055322e-06
New best model saved with error: 5.720403760e-01
Epoch 60/2000, Loss: 1.459160e+04, L2 Error: 4.095654979e-01, Time: 12.34s
  PDE Loss: 2.612506e-03, IC Loss: 8.430655e-02, IC_V Loss: 1.118878e-01, BC Loss: 3.333435e-08
New best model saved with error: 4.095654979e-01
Epoch 80/2000, Loss: 6.117000e+03, L2 Error: 3.009838998e-01, Time: 16.07s
  PDE Loss: 1.503869e-02, IC Loss: 4.390935e-02, IC_V Loss: 2.698198e-02, BC Loss: 2.405552e-07
New best model saved with error: 3.009838998e-01
Epoch 100/2000, Loss: 3.006575e+03, L2 Error: 1.945896812e-01, Time: 19.93s
  PDE Loss: 5.158945e-03, IC Loss: 1.885298e-02, IC_V Loss: 1.916617e-02, BC Loss: 2.520580e-07
New best model saved with error: 1.945896812e-01
Epoch 120/2000, Loss: 3.726546e+03, L2 Error: 1.019538380e-01, Time: 23.66s
  PDE Loss: 1.736358e-03, IC Loss: 5.208353e-03, IC_V Loss: 6.100645e-02, BC Loss: 4.294012e-08
New best model saved with error: 1.019538380e-01
Epoch 140/2000, Loss: 1.980286e+03, L2 Error: 4.925496206e-02, Time: 27.37s
  PDE Loss: 3.650982e-04, IC Loss: 1.230742e-03, IC_V Loss: 3.560433e-02, BC Loss: 4.833446e-10
New best model saved with error: 4.925496206e-02
Epoch 160/2000, Loss: 1.891953e+03, L2 Error: 1.596803007e-02, Time: 31.12s
  PDE Loss: 5.006866e-05, IC Loss: 1.324515e-04, IC_V Loss: 3.616270e-02, BC Loss: 4.707852e-13
New best model saved with error: 1.596803007e-02
Epoch 180/2000, Loss: 6.608123e+02, L2 Error: 4.536121949e-03, Time: 34.82s
  PDE Loss: 2.780885e-06, IC Loss: 1.057381e-05, IC_V Loss: 1.270505e-02, BC Loss: 3.786790e-13
Epoch 1960/2000, Loss: 5.421461e+02, L2 Error: 9.990472381e-04, Time: 368.91s
  PDE Loss: 1.000196e-10, IC Loss: 1.566183e-13, IC_V Loss: 1.044133e-02, BC Loss: 3.875359e-13
Epoch 1980/2000, Loss: 6.807574e+01, L2 Error: 9.723373576e-04, Time: 372.63s
  PDE Loss: 8.730221e-11, IC Loss: 1.030131e-11, IC_V Loss: 1.311088e-03, BC Loss: 3.867842e-13
Epoch 2000/2000, Loss: 6.171631e+01, L2 Error: 9.515043031e-04, Time: 376.51s
  PDE Loss: 9.869251e-11, IC Loss: 1.020497e-11, IC_V Loss: 1.188610e-03, BC Loss: 3.887509e-13
Training data saved to results_ultra_5/training_data.csv
Best L2 error: 5.4171320447e-04
Training completed. Final L2 error: 5.417132045e-04

Phase 2: L-BFGS refinement (5 harmonics)
Refining with L-BFGS for 5000 iterations...
GPU Memory Status:
  Total: 23.47 GB
  Target limit (80%): 22.29 GB
  Currently allocated: 0.00 GB
  Available for training: 22.29 GB
  Estimated requirement: 0.03 GB
✓ Memory feasible for harmonic 5
L-BFGS using batch size: 5000 for harmonic 5
Initial L-BFGS L2 error: 5.417132045e-04
Loaded best model from Adam phase
L-BFGS iteration 0/5000, L2 error: 9.585407267e-07
  PDE Loss: 9.020455e-11, IC Loss: 8.325451e-14, IC_V Loss: 1.162499e-08, BC Loss: 3.866635e-13
New best model saved with error: 9.585407267e-07
L-BFGS iteration 10/5000, L2 error: 4.757086243e-07
  PDE Loss: 8.929701e-11, IC Loss: 8.325451e-14, IC_V Loss: 3.566442e-16, BC Loss: 3.866643e-13
New best model saved with error: 4.757086243e-07
L-BFGS iteration 20/5000, L2 error: 4.757086243e-07
  PDE Loss: 8.631991e-11, IC Loss: 8.325451e-14, IC_V Loss: 5.019512e-16, BC Loss: 3.866643e-13
L-BFGS iteration 30/5000, L2 error: 4.757086243e-07
L-BFGS iteration 380/5000, L2 error: 4.757447530e-07
  PDE Loss: 8.768088e-11, IC Loss: 8.325451e-14, IC_V Loss: 1.276952e-17, BC Loss: 3.866643e-13
L-BFGS iteration 390/5000, L2 error: 4.757447530e-07
  PDE Loss: 8.957388e-11, IC Loss: 8.325451e-14, IC_V Loss: 1.276952e-17, BC Loss: 3.866643e-13
L-BFGS iteration 400/5000, L2 error: 4.757447530e-07
  PDE Loss: 8.876565e-11, IC Loss: 8.325451e-14, IC_V Loss: 1.276952e-17, BC Loss: 3.866643e-13
L-BFGS iteration 410/5000, L2 error: 4.757447530e-07
  PDE Loss: 9.142136e-11, IC Loss: 8.325451e-14, IC_V Loss: 1.276952e-17, BC Loss: 3.866643e-13
L-BFGS iteration 420/5000, L2 error: 4.757447530e-07
  PDE Loss: 9.043291e-11, IC Loss: 8.325451e-14, IC_V Loss: 1.276952e-17, BC Loss: 3.866643e-13

======================================================================
=== Training started at 2025-07-04 13:05:15.801065 ===
Epoch 0/2000, Loss: 2.266728e+06, L2 Error: 9.580249176e-01, Time: 0.40s
  PDE Loss: 1.713125e-06, IC Loss: 4.649164e-01, IC_V Loss: 4.116655e+01, BC Loss: 4.793921e-11
New best model saved with error: 9.580249176e-01
Epoch 20/2000, Loss: 1.353331e+05, L2 Error: 7.491857962e-01, Time: 5.66s
  PDE Loss: 2.307744e-03, IC Loss: 2.857529e-01, IC_V Loss: 1.941361e+00, BC Loss: 3.099528e-08
New best model saved with error: 7.491857962e-01
Epoch 40/2000, Loss: 3.662590e+04, L2 Error: 5.170825369e-01, Time: 10.84s
  PDE Loss: 8.878591e-04, IC Loss: 1.381073e-01, IC_V Loss: 4.037966e-01, BC Loss: 3.261424e-06
New best model saved with error: 5.170825369e-01
Epoch 60/2000, Loss: 4.296493e+04, L2 Error: 2.923435512e-01, Time: 16.02s
  PDE Loss: 2.393682e-03, IC Loss: 4.441176e-02, IC_V Loss: 7.085983e-01, BC Loss: 9.802461e-06
New best model saved with error: 2.923435512e-01
Epoch 80/2000, Loss: 1.946377e+04, L2 Error: 1.565081647e-01, Time: 21.19s
  PDE Loss: 2.906284e-03, IC Loss: 1.239830e-02, IC_V Loss: 3.360906e-01, BC Loss: 7.820827e-07
New best model saved with error: 1.565081647e-01
Epoch 100/2000, Loss: 1.397323e+04, L2 Error: 7.702879898e-02, Time: 26.51s
  PDE Loss: 1.267347e-03, IC Loss: 2.962195e-03, IC_V Loss: 2.533186e-01, BC Loss: 3.143802e-06
New best model saved with error: 7.702879898e-02
Epoch 120/2000, Loss: 1.132670e+04, L2 Error: 3.182243492e-02, Time: 31.69s
  PDE Loss: 3.442067e-04, IC Loss: 5.047530e-04, IC_V Loss: 2.092736e-01, BC Loss: 5.350797e-07
New best model saved with error: 3.182243492e-02
Epoch 140/2000, Loss: 1.057943e+04, L2 Error: 1.001304181e-02, Time: 36.87s
  PDE Loss: 7.067861e-05, IC Loss: 4.957110e-05, IC_V Loss: 1.963613e-01, BC Loss: 2.160585e-07
New best model saved with error: 1.001304181e-02
Epoch 160/2000, Loss: 1.011373e+04, L2 Error: 1.900686043e-03, Time: 42.04s
"""


def test_a_launch_is_judged_once_with_every_loss_series_having_its_say(tmp_path):
    """The per-term losses are printed on the line under each record, so their own axis puts the launch's start a
    few lines off the total loss's; judged at one start, the total loss opening at 2.3e6 (untrained) outvotes a term
    that held at its last value across the boundary."""
    assert list(ResumedRun().check(_run(tmp_path, "train_log.txt", PINN_FRESH_LAUNCH))) == []


# A results table a user pasted (https://github.com/ugent-korea/pytorch-unet-segmentation/issues/9, its first 12
# lines): a row every 5 epochs, and a second launch appended from epoch 5 again
UNET_TABLE_TWO_LAUNCHES = """\
epoch | train loss | train acc | val loss | val acc
-- | -- | -- | -- | --
5 | 0.67102405 | 0.517094212 | 0.671831974 | 0.57318449
10 | 0.657895587 | 0.516574831 | 0.671152884 | 0.57318449
5 | 0.66738898 | 0.514784695 | 0.670679085 | 0.57318449
10 | 0.67900444 | 0.513565095 | 0.705055777 | 0.57318449
15 | 0.655899852 | 0.512481248 | 0.670035407 | 0.57318449
20 | 0.648986213 | 0.510373986 | 0.667965434 | 0.57318449
25 | 0.645135407 | 0.514023395 | 0.67702325 | 0.57318449
30 | 0.661403127 | 0.508261723 | 0.687130248 | 0.57318449
35 | 0.656906943 | 0.509798793 | 0.664739843 | 0.57318449
40 | 0.645580226 | 0.514279096 | 0.66250075 | 0.57318449
"""


def test_an_epoch_printed_every_few_back_to_its_first_is_a_fresh_launch(tmp_path):
    """The table opens at epoch 5, one stride of its counter: a return there starts from the beginning."""
    assert list(ResumedRun().check(_run(tmp_path, "results.md", UNET_TABLE_TWO_LAUNCHES))) == []


# Ultralytics' results.csv (AGullander/PTI-Vision-@bf1a8d172ad421fcedbea771c6315076aa099c82:runs/detect/train2/results.csv,
# the header and lines 50-62): its cumulative `time` column starts again after epoch 55 (the training resumed from
# last.pt by a new process) while the epoch column goes on
ULTRALYTICS_RESUMED = """\
epoch,time,train/box_loss,train/cls_loss,train/dfl_loss,metrics/precision(B),metrics/recall(B),metrics/mAP50(B),metrics/mAP50-95(B),val/box_loss,val/cls_loss,val/dfl_loss,lr/pg0,lr/pg1,lr/pg2
49,32526.2,1.71275,2.59208,1.47755,0.36275,0.13733,0.13809,0.07151,2.4774,3.50153,1.97546,0.000189052,0.000189052,0.000189052
50,33153.2,1.73166,2.63902,1.49965,0.23351,0.18457,0.13975,0.07505,2.50321,3.57435,2.00272,0.00018647,0.00018647,0.00018647
51,33784,1.73467,2.67076,1.48299,0.25888,0.23368,0.16826,0.08118,2.53044,3.48973,2.01293,0.000183887,0.000183887,0.000183887
52,34417.7,1.71274,2.5714,1.49905,0.33864,0.20082,0.14435,0.07205,2.54986,3.53272,2.04795,0.000181305,0.000181305,0.000181305
53,35047,1.71862,2.58975,1.47842,0.32327,0.21148,0.1502,0.07735,2.53248,3.56703,2.04076,0.000178723,0.000178723,0.000178723
54,35683.8,1.76092,2.56493,1.51354,0.26824,0.22187,0.12909,0.06707,2.5084,3.46672,2.00311,0.000176141,0.000176141,0.000176141
55,36315.4,1.71964,2.6012,1.49302,0.48003,0.15424,0.13856,0.07239,2.51433,3.4704,1.97317,0.000173559,0.000173559,0.000173559
56,841.388,1.63234,5.02347,1.42202,0.00391,0.16229,0.01471,0.00597,2.49872,4.54567,1.82835,0.000170976,0.000170976,0.000170976
57,1587.58,1.67672,3.79037,1.45124,0.8167,0.07951,0.03057,0.01423,2.50901,4.01718,1.85075,0.000168394,0.000168394,0.000168394
58,2299.18,1.7184,3.49363,1.46736,0.78206,0.07578,0.05445,0.02864,2.4935,3.90392,1.91012,0.000165812,0.000165812,0.000165812
59,3078.41,1.67348,3.32669,1.45708,0.84209,0.0425,0.06368,0.03202,2.49356,3.72088,1.95192,0.000163229,0.000163229,0.000163229
60,3774.16,1.67155,3.17993,1.46054,0.65119,0.08635,0.08273,0.04137,2.4688,3.64319,1.96308,0.000160647,0.000160647,0.000160647
61,4434.07,1.71683,3.09169,1.50866,0.4641,0.10993,0.07779,0.04298,2.48217,3.57788,1.97005,0.000158065,0.000158065,0.000158065
"""


def test_an_elapsed_time_column_that_starts_again_while_the_epochs_go_on_is_a_resume(tmp_path):
    """The clock of a new process with the epoch counted on: the run carried on from its checkpoint. The same rows
    before the fall say nothing, and with the epochs counted from 1 again after it they are a fresh launch's, which the
    clock alone does not call a resume."""
    [f] = ResumedRun().check(_run(tmp_path, "results.csv", ULTRALYTICS_RESUMED))
    assert (f.evidence["epoch_before"], f.evidence["epoch_after"]) == (55, 56) and f.evidence["clock"] == "time"
    assert "36315.4" not in f.summary and "3.632e+04 at epoch 55 then 841.4 at epoch 56" in f.summary
    rows = ULTRALYTICS_RESUMED.splitlines(keepends=True)
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    assert list(ResumedRun().check(_run(tmp_path / "a", "results.csv", "".join(rows[:8])))) == []
    fresh = rows[:8] + [f"{int(r.split(',')[0]) - 55}{r[r.index(','):]}" for r in rows[8:]]
    assert all(f.kind != "resumed_run" or "elapsed time" not in f.summary
               for f in ResumedRun().check(_run(tmp_path / "b", "results.csv", "".join(fresh))))


# Stable-Baselines3's TensorBoard scalars of an off-policy agent (DonWick32/AIML-Project@951561d2359f3bb663faa144b0d563f6a25b59d2:
# logs/4, its third event file): `learn()` called again on the loaded model counts its steps from the start (5000,
# then 152) while both objectives go on where they were; written here again with torch's SummaryWriter
SB3_STEPS = [
    160, 320, 473, 500, 644, 801, 961, 1000, 1121, 1270, 1418, 1500, 1580, 1740, 1900, 2000, 2064, 2224, 2384,
    2500, 2548, 2708, 2868, 3000, 3032, 3192, 3347, 3500, 3676, 3833, 3989, 4000, 4151, 4311, 4464, 4500, 4628,
    4788, 4948, 5000, 152, 274, 434, 484, 588, 745, 905, 984, 1032, 1120, 1208, 1312, 1410, 1484, 1508, 1596,
    1676, 1764, 1844, 1932, 1984]
SB3_ACTOR = [
    1.0138, 1.6066, 1.9974, 2.0824, 2.6157, 3.2403, 3.7256, 3.9149, 4.2929, 4.857, 5.2855, 5.6612, 5.9229,
    6.657, 7.3768, 7.6606, 7.9041, 8.5395, 9.0996, 9.7113, 9.6419, 10.5932, 11.2453, 11.5621, 11.7966, 12.4861,
    12.7557, 13.4744, 13.9254, 14.3021, 14.8101, 14.8547, 15.185, 15.7272, 15.8779, 15.9675, 16.1334, 16.3945,
    16.5397, 16.683, 16.7195, 16.7649, 16.9388, 17.0804, 16.785, 16.9034, 17.0375, 16.9308, 16.7793, 17.0257,
    16.7231, 16.5867, 16.3287, 15.9914, 16.2844, 16.0459, 15.8684, 15.7621, 15.3408, 14.8635, 15.0152]
SB3_CRITIC = [
    0.4131, 0.1426, 0.0557, 0.1002, 0.1014, 0.0768, 0.1901, 0.1162, 0.1314, 0.2136, 0.1349, 0.1434, 0.142,
    0.1578, 0.1791, 0.2957, 0.2799, 0.2795, 0.3364, 0.3845, 0.4556, 0.5121, 0.4494, 0.5529, 0.5494, 0.4881,
    0.7489, 0.5651, 0.5425, 0.8664, 0.7312, 0.6799, 0.7825, 0.9507, 1.0527, 1.0186, 1.1369, 1.1819, 1.257,
    1.4647, 1.5723, 1.7395, 1.9381, 2.0207, 2.173, 2.005, 2.5606, 2.4828, 2.6253, 2.0921, 2.3589, 2.4149,
    2.3157, 3.2956, 2.6481, 2.5077, 2.841, 2.1237, 2.6154, 3.0395, 3.6151]


def test_a_counter_started_again_with_the_losses_carried_on_is_a_resume(tmp_path):
    """The steps go back to below the first one logged (the counters' rule reads that as a new launch), but the
    losses open where they had got to, a rising objective as much as a falling one: the weights were loaded. The
    same steps with the losses opening at their first values are a fresh launch."""
    from tests.runwriters import write_tb

    series = {"train/actor_loss": (SB3_STEPS, SB3_ACTOR), "train/critic_loss": (SB3_STEPS, SB3_CRITIC)}
    [f] = ResumedRun().check(load_run(write_tb(tmp_path / "a", series), tmp_path / "a.duckdb"))
    assert f.evidence["series_judged"] == "train/actor_loss" and "step 152 of pass 2" in f.summary
    assert "up from" in f.summary
    k = SB3_STEPS.index(152)
    fresh = {n: (s, v[:k] + v[:len(v) - k]) for n, (s, v) in series.items()}
    assert list(ResumedRun().check(load_run(write_tb(tmp_path / "b", fresh), tmp_path / "b.duckdb"))) == []


# PGAN-Paddle's console log (AIforMS/PGAN-Paddle@01a77577e40b469c4090daf6c3247133a0e0b688:logs/train_log.txt, lines
# 156-180): a relaunch finds the last saved model and carries the training on from it, its `[scale : iteration]`
# counter going on (the reader puts these records on a line axis)
PGAN_CARRIED_ON = """\
[0 :  14900] loss G : 4.769 loss D : 4.214
[0 :  15000] loss G : 5.212 loss D : -0.242
[0 :  15100] loss G : 3.996 loss D : 6.882
[0 :  15200] loss G : 1.653 loss D : 3.842
[0 :  15300] loss G : 2.508 loss D : 0.444
[0 :  15400] loss G : 6.726 loss D : 1.430
[0 :  15500] loss G : 3.109 loss D : 1.109
[0 :  15600] loss G : -0.331 loss D : 3.675
[0 :  15700] loss G : 3.071 loss D : 2.341
[0 :  15800] loss G : 1.555 loss D : 1.177
[0 :  15900] loss G : 4.105 loss D : 8.970
[0 :  16000] loss G : 2.279 loss D : 0.506

Running PGAN
size 10
202599 images found
202599 images detected
Model found at path output_networks/celeba_cropped/celeba_cropped_s0_i16000.pdparams, pursuing the training
Average network found !
size (4, 4)
202599 images found
[0 :  16100] loss G : 904.903 loss D : 1026678.154
[0 :  16200] loss G : 1435.918 loss D : 412579.357
[0 :  16300] loss G : 1694.270 loss D : 269323.346
[0 :  16400] loss G : 1851.192 loss D : 207163.545
"""


def test_a_relaunch_that_finds_its_saved_model_and_carries_the_training_on_is_a_resume(tmp_path):
    [f] = ResumedRun().check(_run(tmp_path, "train_log.txt", PGAN_CARRIED_ON))
    assert "pursuing the training" in f.evidence["announced"]


# PaddleDetection's worker log (OrionZJ/Fabric-Defect-Detection@7df581993bbdaeca2c7f321023fd32b14d63ed16:
# log/workerlog.0, line 1610, a relaunch killed at its first record, and lines 1684-1694): the next launch restores
# the last weights for a resume, in its own words, and its records go on at epoch 80
PPDET_RESUMED = """\
/opt/conda/envs/python35-paddle120-env/lib/python3.9/site-packages/matplotlib/__init__.py:107: DeprecationWarning: Using or importing the ABCs from 'collections' instead of from 'collections.abc' is deprecated since Python 3.3, and in 3.10 it will stop working
[07/01 09:15:47] ppdet.utils.checkpoint INFO: Exchange model and ema_model to load:
[07/01 09:15:48] ppdet.utils.checkpoint INFO: Loading ema_model weights from /home/aistudio/work/PaddleDetection/output/ppyoloe_plus_sod_crn_l_80e_coco/model_final.pdparams
[07/01 09:15:48] ppdet.utils.checkpoint INFO: Loading model weights from /home/aistudio/work/PaddleDetection/output/ppyoloe_plus_sod_crn_l_80e_coco/model_final.pdema
[07/01 09:15:48] ppdet.utils.checkpoint INFO: Finish resuming model weights: /home/aistudio/work/PaddleDetection/output/ppyoloe_plus_sod_crn_l_80e_coco/model_final.pdparams
[07/01 09:15:53] ppdet.engine INFO: Epoch: [80] [  0/268] learning_rate: 0.000019 loss: 2.192461 loss_cls: 1.064502 loss_iou: 0.257794 loss_dfl: 0.966947 loss_l1: 1.338266 eta: 2 days, 15:58:28 batch_cost: 3.9062 data_cost: 0.7001 ips: 4.0961 images/s
[07/01 09:18:43] ppdet.engine INFO: Epoch: [80] [100/268] learning_rate: 0.000018 loss: 2.134000 loss_cls: 1.063576 loss_iou: 0.252868 loss_dfl: 0.852158 loss_l1: 1.264329 eta: 1 day, 2:14:35 batch_cost: 1.5821 data_cost: 1.1403 ips: 10.1133 images/s
[07/01 09:21:35] ppdet.engine INFO: Epoch: [80] [200/268] learning_rate: 0.000017 loss: 2.131614 loss_cls: 1.046822 loss_iou: 0.256871 loss_dfl: 0.855077 loss_l1: 1.220016 eta: 1 day, 2:13:26 batch_cost: 1.6082 data_cost: 1.1712 ips: 9.9490 images/s
[07/01 09:23:32] ppdet.engine INFO: Epoch: [81] [  0/268] learning_rate: 0.000016 loss: 2.079685 loss_cls: 1.041540 loss_iou: 0.249810 loss_dfl: 0.834815 loss_l1: 1.260300 eta: 1 day, 2:11:31 batch_cost: 1.6126 data_cost: 1.1857 ips: 9.9217 images/s
[07/01 09:26:22] ppdet.engine INFO: Epoch: [81] [100/268] learning_rate: 0.000016 loss: 2.115310 loss_cls: 1.041033 loss_iou: 0.249278 loss_dfl: 0.848056 loss_l1: 1.142648 eta: 1 day, 2:05:52 batch_cost: 1.5953 data_cost: 1.1586 ips: 10.0294 images/s
[07/01 09:29:15] ppdet.engine INFO: Epoch: [81] [200/268] learning_rate: 0.000015 loss: 2.125827 loss_cls: 1.046196 loss_iou: 0.251990 loss_dfl: 0.843607 loss_l1: 1.219424 eta: 1 day, 2:06:27 batch_cost: 1.6192 data_cost: 1.2036 ips: 9.8816 images/s
[07/01 09:31:09] ppdet.engine INFO: Epoch: [82] [  0/268] learning_rate: 0.000014 loss: 2.122164 loss_cls: 1.048753 loss_iou: 0.255140 loss_dfl: 0.843055 loss_l1: 1.207334 eta: 1 day, 1:58:08 batch_cost: 1.5829 data_cost: 1.1521 ips: 10.1081 images/s
"""


def test_weights_restored_for_a_resume_in_so_many_words_are_a_resume(tmp_path):
    [f] = ResumedRun().check(_run(tmp_path, "workerlog.0", PPDET_RESUMED))
    assert "Finish resuming model weights" in f.evidence["announced"]


# A constrained-PPO console log (520yrn/dyna-cppo@6cbe17280fc3402b20d854ed6d6d8ab826dcb5ac:logs/train_log.txt, lines
# 1-20): a launch aborted after 8 iterations, then a fresh one from `[it 0001]`, its `time=` clock starting again
CPPO_RELAUNCHED = """\
[it 0001] step=1024 | EpRew=-0.0 EpCost=0.0 | Vr=0.092 Vc=0.162 | PiLoss=0.020 Track=0.020 MeanRatio=1.000 LB%=0.0% | time=0.1m
[it 0002] step=2048 | EpRew=-0.7 EpCost=0.0 | Vr=0.097 Vc=0.127 | PiLoss=0.021 Track=0.021 MeanRatio=1.000 LB%=0.0% | time=0.1m
[it 0003] step=3072 | EpRew=1.1 EpCost=0.0 | Vr=0.101 Vc=0.130 | PiLoss=0.020 Track=0.020 MeanRatio=1.000 LB%=0.0% | time=0.2m
[it 0004] step=4096 | EpRew=0.1 EpCost=0.0 | Vr=0.080 Vc=0.107 | PiLoss=0.023 Track=0.023 MeanRatio=1.000 LB%=0.0% | time=0.2m
[it 0005] step=5120 | EpRew=0.8 EpCost=365.0 | Vr=0.077 Vc=47.459 | PiLoss=0.020 Track=0.020 MeanRatio=1.000 LB%=0.0% | time=0.3m
[it 0006] step=6144 | EpRew=0.2 EpCost=0.0 | Vr=0.078 Vc=0.090 | PiLoss=0.025 Track=0.025 MeanRatio=1.000 LB%=0.0% | time=0.4m
[it 0007] step=7168 | EpRew=-0.5 EpCost=0.0 | Vr=0.070 Vc=0.068 | PiLoss=0.026 Track=0.026 MeanRatio=1.000 LB%=0.0% | time=0.4m
[it 0008] step=8192 | EpRew=1.0 EpCost=0.0 | Vr=0.067 Vc=0.050 | PiLoss=0.030 Track=0.030 MeanRatio=1.000 LB%=0.0% | time=0.5m
[it 0001] step=1024 | EpRew=-0.0 EpCost=0.0 | Vr=0.092 Vc=0.162 | PiLoss=0.020 Track=0.020 MeanRatio=1.000 LB%=0.0% | time=0.1m
[it 0002] step=2048 | EpRew=-0.7 EpCost=0.0 | Vr=0.097 Vc=0.127 | PiLoss=0.021 Track=0.021 MeanRatio=1.000 LB%=0.0% | time=0.2m
[it 0003] step=3072 | EpRew=1.1 EpCost=0.0 | Vr=0.101 Vc=0.130 | PiLoss=0.020 Track=0.020 MeanRatio=1.000 LB%=0.0% | time=0.2m
[it 0004] step=4096 | EpRew=0.1 EpCost=0.0 | Vr=0.080 Vc=0.107 | PiLoss=0.023 Track=0.023 MeanRatio=1.000 LB%=0.0% | time=0.3m
[it 0005] step=5120 | EpRew=0.8 EpCost=365.0 | Vr=0.077 Vc=47.459 | PiLoss=0.020 Track=0.020 MeanRatio=1.000 LB%=0.0% | time=0.3m
[it 0006] step=6144 | EpRew=0.2 EpCost=0.0 | Vr=0.078 Vc=0.090 | PiLoss=0.025 Track=0.025 MeanRatio=1.000 LB%=0.0% | time=0.4m
[it 0007] step=7168 | EpRew=-0.5 EpCost=0.0 | Vr=0.070 Vc=0.068 | PiLoss=0.026 Track=0.026 MeanRatio=1.000 LB%=0.0% | time=0.4m
[it 0008] step=8192 | EpRew=1.0 EpCost=0.0 | Vr=0.067 Vc=0.050 | PiLoss=0.030 Track=0.030 MeanRatio=1.000 LB%=0.0% | time=0.5m
[it 0009] step=9216 | EpRew=-0.6 EpCost=389.0 | Vr=0.055 Vc=46.227 | PiLoss=0.020 Track=0.020 MeanRatio=1.000 LB%=0.0% | time=0.6m
[it 0010] step=10240 | EpRew=0.3 EpCost=405.0 | Vr=0.046 Vc=52.608 | PiLoss=0.020 Track=0.020 MeanRatio=1.000 LB%=0.0% | time=0.6m
[it 0011] step=11264 | EpRew=-0.7 EpCost=72.0 | Vr=0.054 Vc=7.674 | PiLoss=0.025 Track=0.025 MeanRatio=1.000 LB%=0.0% | time=0.7m
[it 0012] step=12288 | EpRew=1.8 EpCost=0.0 | Vr=0.043 Vc=0.039 | PiLoss=0.041 Track=0.041 MeanRatio=1.000 LB%=0.0% | time=0.7m
"""


def test_a_clock_that_starts_again_with_the_counter_is_a_fresh_launch_not_a_resume(tmp_path):
    assert list(ResumedRun().check(_run(tmp_path, "train_log.txt", CPPO_RELAUNCHED))) == []


# MindYOLO's console log as posted in mindspore-lab/mindyolo issue 370 (its 12 lines): a step time that rose
# steadily for four records and then dips a hair (100.32 ms, 99.82 ms) looks like a clock for a moment
MINDYOLO_STEP_TIMES = """\
2024-10-18 10:02:11,121 [INFO] Epoch 1/500, Step 720/1516, step time: 89.81 ms
2024-10-18 10:02:12,027 [INFO] Epoch 1/500, Step 730/1516, imgsize (640, 640), loss: 9.3012, lbox: 4.3068, lcls: 3.1446, dfl: 1.8499, cur_lr: 0.08410950005054474
2024-10-18 10:02:12,029 [INFO] Epoch 1/500, Step 730/1516, step time: 90.65 ms
2024-10-18 10:02:12,962 [INFO] Epoch 1/500, Step 740/1516, imgsize (640, 640), loss: 9.7858, lbox: 4.7739, lcls: 3.2009, dfl: 1.8110, cur_lr: 0.08389182388782501
2024-10-18 10:02:12,963 [INFO] Epoch 1/500, Step 740/1516, step time: 93.32 ms
2024-10-18 10:02:13,913 [INFO] Epoch 1/500, Step 750/1516, imgsize (640, 640), loss: 9.0520, lbox: 4.3822, lcls: 3.0225, dfl: 1.6473, cur_lr: 0.08367414027452469
2024-10-18 10:02:13,918 [INFO] Epoch 1/500, Step 750/1516, step time: 95.26 ms
2024-10-18 10:02:14,921 [INFO] Epoch 1/500, Step 760/1516, imgsize (640, 640), loss: 9.2176, lbox: 4.2728, lcls: 3.2465, dfl: 1.6983, cur_lr: 0.08345646411180496
2024-10-18 10:02:14,923 [INFO] Epoch 1/500, Step 760/1516, step time: 100.32 ms
2024-10-18 10:02:15,919 [INFO] Epoch 1/500, Step 770/1516, imgsize (640, 640), loss: 9.7566, lbox: 4.7477, lcls: 3.0362, dfl: 1.9726, cur_lr: 0.08323878794908524
2024-10-18 10:02:15,923 [INFO] Epoch 1/500, Step 770/1516, step time: 99.82 ms
2024-10-18 10:02:16,906 [INFO] Epoch 1/500
"""


def test_a_step_time_a_hair_under_the_one_before_is_no_clock_starting_again(tmp_path):
    assert list(ResumedRun().check(_run(tmp_path, "train.log", MINDYOLO_STEP_TIMES))) == []


# A SeqGAN trainer's log as printed (github.com/X-czh/SeqGAN-PyTorch@e53b9b2, experiment.log): the
# generator's MLE pre-training (G-Steps 0-17), then the discriminator's pre-training, whose epoch counter starts again.
GENERATOR_THEN_DISCRIMINATOR = """\
G-Step 0
Epoch 0, train loss: 1.95778
eval loss: 3.18820

G-Step 1
Epoch 0, train loss: 1.50074
eval loss: 2.57729

G-Step 2
Epoch 0, train loss: 1.35728
eval loss: 2.26309

G-Step 3
Epoch 0, train loss: 1.28384
eval loss: 2.12456

G-Step 4
Epoch 0, train loss: 1.24565
eval loss: 2.01085

G-Step 5
Epoch 0, train loss: 1.21686
eval loss: 1.86459

G-Step 6
Epoch 0, train loss: 1.18300
eval loss: 1.80417

G-Step 7
Epoch 0, train loss: 1.15361
eval loss: 1.70990

G-Step 8
Epoch 0, train loss: 1.12995
eval loss: 1.63818

G-Step 9
Epoch 0, train loss: 1.10801
eval loss: 1.60416

G-Step 10
Epoch 0, train loss: 1.09192
eval loss: 1.54670

G-Step 11
Epoch 0, train loss: 1.07958
eval loss: 1.53503

G-Step 12
Epoch 0, train loss: 1.06872
eval loss: 1.48851

G-Step 13
Epoch 0, train loss: 1.06266
eval loss: 1.49841

G-Step 14
Epoch 0, train loss: 1.05296
eval loss: 1.42393

G-Step 15
Epoch 0, train loss: 1.04644
eval loss: 1.42307

G-Step 16
Epoch 0, train loss: 1.04078
eval loss: 1.47327

G-Step 17
Epoch 0, train loss: 1.03412
eval loss: 1.45094

#####################################################


#####################################################
Start pre-training discriminator...
#####################################################

D-Step 0
Epoch 0, train loss: 0.70015, train acc: 0.507
Epoch 1, train loss: 0.69971, train acc: 0.508
Epoch 2, train loss: 0.69748, train acc: 0.511
eval loss: 0.69997, eval acc: 0.498

D-Step 1
Epoch 0, train loss: 0.69881, train acc: 0.508
Epoch 1, train loss: 0.69754, train acc: 0.512
Epoch 2, train loss: 0.69720, train acc: 0.513
eval loss: 0.69818, eval acc: 0.510

D-Step 2
Epoch 0, train loss: 0.69719, train acc: 0.512
Epoch 1, train loss: 0.69603, train acc: 0.519
Epoch 2, train loss: 0.69635, train acc: 0.512
eval loss: 0.69664, eval acc: 0.512

D-Step 3
Epoch 0, train loss: 0.69465, train acc: 0.515
Epoch 1, train loss: 0.69580, train acc: 0.513
Epoch 2, train loss: 0.69621, train acc: 0.508
eval loss: 0.69404, eval acc: 0.516

"""


def test_a_new_phase_whose_loss_opens_far_under_where_the_last_ended_is_no_resume(tmp_path):
    """A counter that starts again over a loss that opens at 0.70 (a discriminator at chance, ln 2) where the
    generator's had fallen to 1.01 with a point noise of 0.002: a drop of a hundred sigmas and more than a third of
    the fall is another model's loss in a new phase, not the generator's curve carried on from a checkpoint. Let
    through (`max_drop` and `drop_sigmas` off), the same log reads as a resume."""
    root = tmp_path / "r"
    root.mkdir()
    (root / "experiment.log").write_text(GENERATOR_THEN_DISCRIMINATOR)
    run = load_run(root, tmp_path / "f.duckdb")
    assert list(ResumedRun().check(run)) == []
    [f] = ResumedRun(max_drop=1e9, drop_sigmas=1e9).check(run)
    assert f.evidence["next_opened"] < 0.71 < 1.0 < f.evidence["launch_closed"]
