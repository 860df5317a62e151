"""Losses printed in shapes the reader once missed, read from real logs: SSD's one-letter localization and
confidence terms (`L: ... C: ...`), summed into the loss the trainer steps on, and never a price bar's `O H L C`;
nolearn's epoch table, whose `Train / Val` column is a name; Torch7 DCGAN's `Err_G` and `Err_D`, a GAN's two losses.
And values that are no loss, once taken as one: an agent's rewards in a file named for them, a policy's KL beside its
episode reward.

Each fixture is a few lines of a public log, quoted byte for byte; the source is in the comment above it."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from ingest.console import read_console, sniff_console
from ingest.roles import role_of
from ingest.tabular import loss_sums

# An SSD-family trainer (`print(... ' || L: %.4f C: %.4f||' % (loss_l.item(), loss_c.item()) ...)`, then
# `loss = loss_l + loss_c; loss.backward()`), whose loss was nan from its first iteration.
# Source: https://github.com/lzx1413/PytorchSSD/issues/109
SSD_TERMS = """\
Training FSSD_vgg on VOC0712
Epoch:1 || epochiter: 0/15|| Totel iter 0 || L: nan C: nan||Batch time: 5.3048 sec. ||LR: 0.00001000
Epoch:1 || epochiter: 10/15|| Totel iter 10 || L: nan C: nan||Batch time: 0.4946 sec. ||LR: 0.00001000
Epoch:2 || epochiter: 5/15|| Totel iter 20 || L: nan C: nan||Batch time: 0.4915 sec. ||LR: 0.00001000
Epoch:3 || epochiter: 0/15|| Totel iter 30 || L: nan C: nan||Batch time: 1.7345 sec. ||LR: 0.00001000
Epoch:3 || epochiter: 10/15|| Totel iter 40 || L: nan C: nan||Batch time: 0.5051 sec. ||LR: 0.00001000
"""


def _frame(tmp_path: Path, text: str, name: str = "train.log") -> pl.DataFrame:
    (tmp_path / name).write_text(text)
    return pl.concat([c.scalars for c in read_console(tmp_path / name) if c.scalars is not None])


def _by_role(frame: pl.DataFrame, role: str) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for tag, value in zip(frame["tag"].cast(pl.Utf8), frame["value"]):
        if role_of(tag).role == role:
            out.setdefault(tag, []).append(value)
    return out


def test_ssd_one_letter_terms_are_summed_into_the_training_loss(tmp_path):
    """`L` and `C` are SSD's localization and confidence losses; the trainer steps on their sum, so the sum is the
    run's training loss (nan here from the first iteration, as each term is), and the terms stay as printed."""
    frame = _frame(tmp_path, SSD_TERMS)
    [(tag, values)] = _by_role(frame, "train_loss").items()
    assert tag == "loss (sum of L, C)" and role_of(tag).canonical and len(values) == 5
    assert all(v != v for v in values)  # nan
    assert {"L", "C"} <= set(frame["tag"].cast(pl.Utf8)) and role_of("L").role == role_of("C").role == "other"


def test_one_letter_terms_stay_narrow():
    """Only the pair, as whole names: a price bar's `O: H: L: C:` (a candlestick printer:
    `"O: %.4f H: %.4f L: %.4f C: %.4f"`) is no loss, a lone `L` none, and a log that names its loss keeps it."""
    assert loss_sums(["L", "C", "Batch time", "LR"]) == {"loss (sum of L, C)": ["L", "C"]}
    assert loss_sums(["O", "H", "L", "C", "V"]) == {}
    assert loss_sums(["L", "lr"]) == {} and loss_sums(["C", "acc"]) == {}
    assert loss_sums(["loss", "L", "C"]) == {}


# nolearn's NeuralNet (Lasagne) verbose table, 2015 layout: `|` between the columns, a ratio column `Train / Val`, an
# NLL gone negative and nan in the first epochs. Source: https://github.com/dnouri/nolearn/issues/35
NOLEARN_TABLE = """\
 Epoch  |  Train loss  |  Valid loss  |  Train / Val  |  Valid acc  |  Dur
--------|--------------|--------------|---------------|-------------|-------
     1  |         nan  |         nan  |          nan  |     47.83%  |  0.6s
     2  |         nan  |   -4.046479  |          nan  |     52.17%  |  0.6s
     3  |   -4.317877  |   -4.494806  |     0.960637  |     52.17%  |  0.6s
     4  |   -4.617792  |   -4.706948  |     0.981059  |     52.17%  |  0.6s
     5  |   -4.800839  |   -4.868985  |     0.986004  |     52.17%  |  0.6s
"""


def test_an_epoch_table_with_a_ratio_column_is_read_under_its_header(tmp_path):
    """`Train / Val` is one column's name (spaces around its slash), so the line is the table's header: each row is
    an epoch's record, its loss negative or nan as printed. A file named `output.txt` is recognised by it."""
    assert sniff_console(NOLEARN_TABLE.encode(), "output.txt")
    frame = _frame(tmp_path, NOLEARN_TABLE, "output.txt")
    [(tag, values)] = _by_role(frame, "train_loss").items()
    assert tag == "Train loss" and str(values[:2]) == "[nan, nan]" and values[2:] == [-4.317877, -4.617792, -4.800839]
    assert _by_role(frame, "val_loss")["Valid loss"][1:] == [-4.046479, -4.494806, -4.706948, -4.868985]
    assert _by_role(frame, "val_accuracy") == {"Valid acc": [47.83, 52.17, 52.17, 52.17, 52.17]}
    assert frame.filter(pl.col("tag").cast(pl.Utf8) == "Train / Val")["value"].to_list()[2:] == [0.960637, 0.981059,
                                                                                               0.986004]


# Torch7's dcgan.torch, one line per batch: the generator's and the discriminator's BCE errors, no single loss.
# Source: https://github.com/soumith/dcgan.torch/issues/9
DCGAN_TORCH = (
    "Epoch: [1][     222 /      237]\t Time: 0.324  DataTime: 0.226    Err_G: 2.5104  Err_D: 1.0969\t\n"
    "Epoch: [1][     223 /      237]\t Time: 0.208  DataTime: 0.109    Err_G: 0.4232  Err_D: 1.2928\t\n"
    "Epoch: [1][     224 /      237]\t Time: 0.126  DataTime: 0.000    Err_G: 5.4721  Err_D: 1.0547\t\n"
    "Epoch: [1][     225 /      237]\t Time: 0.127  DataTime: 0.000    Err_G: 3.1029  Err_D: 0.1474\t\n"
    "Epoch: [1][     226 /      237]\t Time: 0.126  DataTime: 0.002    Err_G: 1.5863  Err_D: 0.3131\t\n"
    "Epoch: [1][     227 /      237]\t Time: 0.126  DataTime: 0.000    Err_G: 1.5024  Err_D: 0.4932\t\n"
)


def test_a_gans_err_g_and_err_d_are_its_two_losses(tmp_path):
    """`Err_G` and `Err_D` are the generator's and the discriminator's losses, read as `errG`/`errD` are: training
    losses of the two sides, which the engine judges as a pair."""
    from forensics.judge.detectors.base import gan_pair
    from tests.runwriters import load_run

    frame = _frame(tmp_path, DCGAN_TORCH)
    losses = _by_role(frame, "train_loss")
    assert losses["Err_G"] == [2.5104, 0.4232, 5.4721, 3.1029, 1.5863, 1.5024] and len(losses["Err_D"]) == 6
    assert set(losses) == {"Err_G", "Err_D"}
    run = load_run(tmp_path, tmp_path / "f.duckdb")
    assert gan_pair(run) is not None and (gan_pair(run).generator, gan_pair(run).discriminator) == ("Err_G", "Err_D")


# A stable-baselines3 callback's `timesteps,mean_reward` lines, no header, appended by four launches.
# Source: JayFu007/Pybullet_HumanoidRL@44c47dfad068325b04eba3f753641163cac215eb:reward_log.txt
REWARD_ROWS = """\
10000,-6103.409748733573
10000,-6065.416518632516
10000,-271.8632511136159
10000,-11.296791991444813
20000,-11.905548277226584
30000,-11.543688003062806
40000,-11.645166650359291
50000,-11.430093395466827
"""


def test_rows_in_a_file_named_for_rewards_are_rewards_not_a_loss(tmp_path):
    """Rows of a counter and a value with no header are a file's records, the value a loss where the file's name says
    nothing; a file named for an agent's reward holds rewards: its values take the file's name, no loss role."""
    frame = _frame(tmp_path, REWARD_ROWS, "reward_log.txt")
    assert _by_role(frame, "train_loss") == {}
    assert frame.filter(pl.col("tag").cast(pl.Utf8) == "reward_log")["value"].to_list()[:2] == [-6103.409748733573,
                                                                                              -6065.416518632516]


# openai/baselines' ACKTR: `logger.dump_tabular` box rows per iteration (pasted without their dashed borders), and
# the KL controller's message. Source: https://github.com/openai/baselines/issues/127
ACKTR_TABLES = """\
Iteration 3025
kl just right!

| EVAfter   | 0.984      |
| EVBefore  | 0.976      |
| EpLenMean | 200        |
| EpRewMean | -8.5       |
| EpRewSEM  | 0.82       |
| KL        | 0.00148061 |

Iteration 3026\x20
kl too low

| EVAfter   | 0.984       |
| EVBefore  | 0.98        |
| EpLenMean | 200         |
| EpRewMean | -7.31       |
| EpRewSEM  | 0.613       |
| KL        | 0.000913428 |

Iteration 3027
kl just right!

| EVAfter   | 0.98     |
| EVBefore  | 0.976    |
| EpLenMean | 200      |
| EpRewMean | -8.92    |
| EpRewSEM  | 0.937    |
| KL        | nan      |
"""


def test_a_policys_kl_beside_its_episode_reward_is_no_loss(tmp_path):
    """Every row of the box table is read, whatever its key (`EpRewMean` names no metric word); with an agent's
    reward printed, the table's `KL` is the policy update's size, not a loss taken by elimination."""
    from tests.runwriters import load_run

    frame = _frame(tmp_path, ACKTR_TABLES)
    assert frame.filter(pl.col("tag").cast(pl.Utf8) == "EpRewMean")["value"].to_list() == [-8.5, -7.31, -8.92]
    run = load_run(tmp_path, tmp_path / "f.duckdb")
    assert run.all_of("train_loss") == [] and "KL" in run.meta["name"].to_list()


# A notebook's `write_log` rows: epoch, batch, the total loss, its three parts and a constant, no header; a second
# launch appended starts its batches at 0 again. Source: etzhao/nnhands@466e8a8fe204b82425bd081ddd9fcc7392bc1cd6:trainlog.txt
EPOCH_BATCH_ROWS = """\
0, 0, 16.489322662353516, 10.823126792907715, 3.7017102241516113, 1.964484453201294, 0
0, 1, 16.61670684814453, 10.82392406463623, 3.82879376411438, 1.9639886617660522, 0
0, 2, 16.581279754638672, 10.823217391967773, 3.7935826778411865, 1.964479684829712, 0
0, 3, 16.606958389282227, 10.822346687316895, 3.82025146484375, 1.9643605947494507, 0
0, 4, 16.564041137695312, 10.820180892944336, 3.77917218208313, 1.9646881818771362, 0
0, 0, 16.378597259521484, 10.822908401489258, 3.5920894145965576, 1.9636001586914062, 0
0, 1, 16.560152053833008, 10.822806358337402, 3.775047779083252, 1.9622982740402222, 0
0, 2, 16.597206115722656, 10.823121070861816, 3.810713291168213, 1.963370680809021, 0
"""


def test_headerless_rows_of_an_epoch_and_a_batch_column_are_records(tmp_path):
    """Two whole-number columns first, the epoch (never going down) and the batch counting up (again from 0 at a
    relaunch): the row's counters; the first value after them is the loss, as in rows with one counter."""
    frame = _frame(tmp_path, EPOCH_BATCH_ROWS, "trainlog.txt")
    loss = frame.filter(pl.col("tag").cast(pl.Utf8) == "loss")
    assert loss["value"].to_list()[:2] == [16.489322662353516, 16.61670684814453] and loss.height == 8
    assert loss["batch"].to_list() == [0, 1, 2, 3, 4, 0, 1, 2] and set(loss["epoch"]) == {0}
    assert "column 1" not in set(frame["tag"].cast(pl.Utf8)) and "column 2" not in set(frame["tag"].cast(pl.Utf8))


# A tqdm bar's description redrawn with `\r` only: the objective `L` and its two terms.
# Source: WindChimeRan/OpenJERE@25ad1fc25feab69c35f59f13e6c7164b6b3748e5:nohup.out
LOSS_AND_ITS_TERMS = (
    "\r  0%|          | 0/1419 [00:00<?, ?it/s]"
    "\rL: 2011.79, L_crf: 43.19, L_selection: 1968.59, epoch: 0/50::   0%|          | 0/1419 [00:03<?, ?it/s]"
    "\rL: 2011.79, L_crf: 43.19, L_selection: 1968.59, epoch: 0/50::   0%|          | 1/1419 [00:03<1:18:31,  3.32s/it]"
    "\rL: 1924.60, L_crf: 49.78, L_selection: 1874.82, epoch: 0/50::   0%|          | 1/1419 [00:04<1:18:31,  3.32s/it]"
    "\rL: 1924.60, L_crf: 49.78, L_selection: 1874.82, epoch: 0/50::   0%|          | 2/1419 [00:04<59:52,  2.54s/it]  "
    "\rL: 1716.66, L_crf: 51.46, L_selection: 1665.19, epoch: 0/50::   0%|          | 2/1419 [00:04<59:52,  2.54s/it]"
    "\rL: 1716.66, L_crf: 51.46, L_selection: 1665.19, epoch: 0/50::   0%|          | 3/1419 [00:04<45:46,  1.94s/it]"
    "\rL: 1392.41, L_crf: 48.31, L_selection: 1344.10, epoch: 0/50::   0%|          | 3/1419 [00:05<45:46,  1.94s/it]"
    "\rL: 1392.41, L_crf: 48.31, L_selection: 1344.10, epoch: 0/50::   0%|          | 4/1419 [00:05<36:22,  1.54s/it]"
    "\rL: 1161.53, L_crf: 48.25, L_selection: 1113.28, epoch: 0/50::   0%|          | 4/1419 [00:05<36:22,  1.54s/it]"
    "\rL: 1161.53, L_crf: 48.25, L_selection: 1113.28, epoch: 0/50::   0%|          | 5/1419 [00:05<28:01,  1.19s/it]\r"
)

# A VAE's epoch lines: reconstruction, KL and a physics term under its weight, no total.
# Source: dexma001/PVTVAE@9e4a7061d200471530f70a0d60db2f907dcdcf31:checkpoints/log.txt
RECON_AND_KL = """\
Epoch [1/100] Recon: 0.1283 | KL: 39.7717 | Phys: 0.0000 (\u03bb=0.000)
Epoch [2/100] Recon: 0.0384 | KL: 8.0062 | Phys: 0.0000 (\u03bb=0.000)
Epoch [3/100] Recon: 0.0325 | KL: 4.3375 | Phys: 0.0000 (\u03bb=0.000)
Epoch [4/100] Recon: 0.0256 | KL: 2.5900 | Phys: 0.0000 (\u03bb=0.000)
Epoch [5/100] Recon: 0.0206 | KL: 1.6794 | Phys: 0.0000 (\u03bb=0.000)
Epoch [6/100] Recon: 0.0179 | KL: 1.1802 | Phys: 0.0000 (\u03bb=0.000)
"""


def test_among_loss_like_names_the_objective_is_taken_where_its_name_says_so(tmp_path):
    """A log that names no loss: of `L`, `L_crf`, `L_selection` the bare `L` is the objective its terms sum to; of a
    VAE's `Recon` and `KL` the reconstruction is. The store's issue says which was taken and beside what."""
    from ingest.roles import objective_among
    from tests.runwriters import load_run

    for i, (text, loss, first) in enumerate([(LOSS_AND_ITS_TERMS, "L", 2011.79), (RECON_AND_KL, "Recon", 0.1283)]):
        root = tmp_path / f"r{i}"
        root.mkdir()
        (root / "train.log").write_text(text, encoding="utf-8")
        run = load_run(root, tmp_path / f"r{i}.duckdb")
        assert run.all_of("train_loss") == [loss] and run.arrays("train_loss")[1][0] == first
    assert objective_among(["L", "L_crf", "L_selection"]) == "L" and objective_among(["Recon", "KL"]) == "Recon"
    assert objective_among(["L", "C"]) is None and objective_among(["Recon", "KL", "mse"]) is None
    assert objective_among(["L_a", "L_b"]) is None and objective_among(["Recon", "Recon_b", "KL"]) is None


# A map-detection trainer's mmcv TextLoggerHook lines: per-decoder-layer terms (`cls`, `reg`, `d0.cls`, ...), a
# `trans_loss`, and their sum printed as `total`. Source: a StreamMapNet issue's pasted log (three iterations).
MMCV_TERMS_AND_TOTAL = """\
2024-09-10 10:11:04,258 - mmdet - INFO - Iter [100/15000]       lr: 4.653e-05, eta: 2:21:23, time: 0.569, data_time: 0.015, memory: 10185, cls: 2.0250, reg: 8.0096, d0.cls: 1.7710, d0.reg: 5.4187, d1.cls: 1.8796, d1.reg: 5.7607, d2.cls: 1.9309, d2.reg: 6.3147, d3.cls: 1.9443, d3.reg: 6.8999, d4.cls: 1.9833, d4.reg: 7.4638, trans_loss: 0.3656, total: 51.7671, grad_norm: 117.7429
2024-09-10 10:12:00,385 - mmdet - INFO - Iter [200/15000]       lr: 5.984e-05, eta: 2:19:26, time: 0.561, data_time: 0.011, memory: 10187, cls: 1.8068, reg: 3.9424, d0.cls: 1.7532, d0.reg: 3.1035, d1.cls: 1.7710, d1.reg: 3.2074, d2.cls: 1.7839, d2.reg: 3.3318, d3.cls: 1.8029, d3.reg: 3.4483, d4.cls: 1.7943, d4.reg: 3.6625, trans_loss: 0.2620, total: 31.6701, grad_norm: 79.9597
2024-09-10 10:12:56,791 - mmdet - INFO - Iter [300/15000]       lr: 7.313e-05, eta: 2:18:23, time: 0.564, data_time: 0.010, memory: 10187, cls: 1.8157, reg: 4.1265, d0.cls: 1.7351, d0.reg: 3.0604, d1.cls: 1.7727, d1.reg: 3.3041, d2.cls: 1.7666, d2.reg: 3.4419, d3.cls: 1.7788, d3.reg: 3.6435, d4.cls: 1.7911, d4.reg: 3.9292, trans_loss: 0.1339, total: 32.2995, grad_norm: 94.7493
"""


def test_a_records_total_beside_its_loss_terms_is_the_loss(tmp_path):
    losses = _by_role(_frame(tmp_path, MMCV_TERMS_AND_TOTAL), "train_loss")
    assert losses["total loss"] == [51.7671, 31.6701, 32.2995]
    assert role_of("total loss").canonical


def test_a_total_that_counts_or_stands_beside_the_loss_itself_stays_a_total(tmp_path):
    # a count of samples (an integer) and a total beside a bare `loss` are not renamed
    text = ("Iter [100/500] cls: 0.52, reg: 0.31, total: 1280\n"
            "Iter [100/500] loss: 0.83, cls: 0.52, reg: 0.31, total: 0.8312\n")
    losses = _by_role(_frame(tmp_path, text), "train_loss")
    assert "total loss" not in losses


# A classifier's `print('%d, %.5f, %.5f,%.3f' % (epoch, loss, ppl, acc))` appended to by later launches that dropped
# the perplexity (`epoch, loss, acc`): rows of two widths, the counter first in both, no header ever printed.
# Source: HamSade/BERT-classifier@3d34d60 log/train.log (the first launch's first rows, then a later launch's).
ROWS_OF_TWO_WIDTHS = (
    [f"{e}, {v:.5f}, 26881171418161356094253400435962903554686976.00000,{49.857 + e / 100:.3f}"
     for e, v in enumerate([33490.73988, 33392.62555, 33317.53914, 33310.12614, 33309.83959, 33308.1, 33307.5])]
    + [f"{e}, {v:.5f}, {50.1 + e:.3f}" for e, v in enumerate([83.10231, 60.00124, 41.2239, 30.10003, 22.5, 15.1,
                                                                 11.02, 9.5, 8.33144])]
)


def test_headerless_rows_that_drop_a_column_in_a_later_launch_keep_their_loss(tmp_path):
    frame = _frame(tmp_path, "\n".join(ROWS_OF_TWO_WIDTHS) + "\n", name="train.log")
    losses = _by_role(frame, "train_loss")
    assert list(losses) == ["loss"]
    assert losses["loss"][0] == 33490.73988 and losses["loss"][-1] == 8.33144 and len(losses["loss"]) == 16
