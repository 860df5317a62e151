"""Metric tables recognised by content under names no table format claims, long tables, sums of loss components
and a last line without its newline: files written by pandas and numpy, and real files from the shared corpus."""

import os
import time
from pathlib import Path, PurePosixPath

import numpy as np
import pandas as pd
import polars as pl
import pytest

from ingest.formats import format_for
from ingest.roles import role_of
from ingest.tabular import SETTLED_SECONDS, loss_sums, read_csv, read_table, sniff_table, table_separator
from tests.paths import SHARED

WILD = SHARED / "wild" / "structured"
TAB_TXT = WILD / "m076_spinningup" / "data" / "ppo" / "ppo_s0" / "progress.txt"  # tab-separated, header, .txt
YOLO_TXT = WILD / "m020_yolov5_txt" / "runs" / "train" / "exp2" / "results.txt"  # headerless YOLO rows
YOLO_CSV = WILD / "m018_yolov5" / "runs" / "train" / "exp2" / "results.csv"  # padded header, loss in components
NO_NEWLINE_TSV = WILD / "m029_flair" / "loss.tsv"  # every line but the last ends in a newline


def points(chunks) -> pl.DataFrame:
    frames = [c.scalars for c in chunks if c.scalars is not None]
    return pl.concat(frames) if frames else pl.DataFrame()


def head(path: Path) -> bytes:
    return path.read_bytes()[:4096]


def old(path: Path) -> Path:
    """The file as a finished run leaves it: unchanged for longer than SETTLED_SECONDS."""
    past = time.time() - 10 * SETTLED_SECONDS
    os.utime(path, (past, past))
    return path


@pytest.mark.needs_shared
def test_a_tab_separated_table_named_txt_is_read_by_its_header():
    assert format_for(PurePosixPath("progress.txt"), lambda: head(TAB_TXT)).name == "table"
    frame = points(read_table(TAB_TXT, 0))
    want = pd.read_csv(TAB_TXT, sep="\t")
    loss_v = frame.filter(pl.col("tag") == "LossV").sort("position")
    assert loss_v["value"].to_list() == pytest.approx(want["LossV"].tolist())
    assert loss_v["epoch"].to_list() == want["Epoch"].tolist() or loss_v["step"].to_list() == list(range(len(want)))


def test_numpy_savetxt_one_value_per_line_is_a_series_named_by_the_file(tmp_path):
    values = np.array([3160.74, 1410.9, 1408.7, np.nan, 1232.5])
    path = tmp_path / "train_loss"
    np.savetxt(path, values)
    assert sniff_table(head(path))
    frame = points(read_table(path, 0))
    assert frame["tag"].unique().to_list() == ["train_loss"]
    got = frame.sort("position")["value"].to_numpy()
    assert np.allclose(got, values, equal_nan=True)
    assert frame.sort("position")["step"].to_list() == list(range(len(values)))
    assert role_of("train_loss").role == "train_loss"


def test_numbers_with_no_header_are_columns_by_position_and_no_loss_is_invented(tmp_path):
    path = tmp_path / "log.txt"
    np.savetxt(path, np.array([[16.84, -210.47], [10.07, -158.77], [6.74, -203.33]]), delimiter=",")
    frame = points(read_table(path, 0))
    assert sorted(frame["tag"].unique().to_list()) == ["column 1", "column 2"]
    assert all(role_of(t).role == "other" for t in frame["tag"].unique().to_list())


@pytest.mark.needs_shared
def test_yolo_headerless_results_take_the_documented_columns_and_its_total_is_the_loss():
    assert sniff_table(head(YOLO_TXT))
    frame = points(read_table(YOLO_TXT, 0))
    rows = [line.split() for line in YOLO_TXT.read_text().splitlines() if line.strip()]
    total = frame.filter(pl.col("tag") == "train/total_loss").sort("position")
    assert total["value"].to_list() == [float(r[5]) for r in rows]
    assert total["epoch"].to_list() == [int(r[0].split("/")[0]) for r in rows]
    assert role_of("train/total_loss").canonical
    # the train total is logged: nothing is summed for train; the val losses are components only
    assert [t.split("/")[0] for t in loss_sums(frame["tag"].unique().to_list())] == ["val"]


@pytest.mark.needs_shared
def test_a_loss_logged_only_in_components_gets_their_sum_per_record():
    frame = points(read_csv(YOLO_CSV, 0))
    table = pd.read_csv(YOLO_CSV, skipinitialspace=True)
    table.columns = [c.strip() for c in table.columns]
    sums = [t for t in frame["tag"].unique().to_list() if "(sum of" in t]
    assert len(sums) == 2  # train and val
    train = next(t for t in sums if t.startswith("train/"))
    assert role_of(train).role == "train_loss" and role_of(train).canonical
    got = frame.filter(pl.col("tag") == train).sort("position")["value"].to_list()
    want = (table["train/box_loss"] + table["train/obj_loss"] + table["train/cls_loss"]).tolist()
    assert got == pytest.approx(want)


@pytest.mark.parametrize("tags", [
    ["gen/loss", "dis/loss"],  # a GAN's two sides
    ["LossPi", "LossV", "DeltaLossPi"],  # an RL objective's terms, not `<what>_loss` components
    ["loss", "box_loss", "cls_loss"],  # the total is logged
    ["box_loss"],  # one component alone
    ["d_loss", "g_loss"],
])
def test_no_sum_where_the_components_are_not_one_loss(tags):
    assert loss_sums(tags) == {}


def test_pandas_to_csv_unnamed_index_is_the_step_and_components_sum(tmp_path):
    frame = pd.DataFrame({"mse_loss": [0.5, 0.4, 0.3], "kl_loss": [0.2, 0.1, 0.05], "reward": [1.0, 2.0, 3.0]},
                         index=[0, 100, 200])
    path = tmp_path / "history.csv"
    frame.to_csv(path)
    got = points(read_csv(path, 0))
    total = got.filter(pl.col("tag").str.starts_with("loss (sum of")).sort("position")
    assert total["step"].to_list() == [0, 100, 200]
    assert total["value"].to_list() == pytest.approx([0.7, 0.5, 0.35])
    assert "" not in got["tag"].to_list()


def test_a_long_table_is_pivoted_by_metric_name_with_its_text_qualifiers(tmp_path):
    wide = pd.DataFrame({"epoch": [1, 2], "generator.pt": [-8.05, -3.99], "discriminator.pt": [-94.7, -100.3]})
    long = wide.melt(id_vars="epoch", var_name="model", value_name="metric_value").assign(metric_name="train_loss")
    path = tmp_path / "loss"
    long[["epoch", "model", "metric_name", "metric_value"]].to_csv(path, index=False)
    assert format_for(PurePosixPath("loss"), lambda: head(path)).name == "table"
    got = points(read_table(path, 0))
    gen = got.filter(pl.col("tag") == "generator.pt/train_loss").sort("position")
    assert gen["value"].to_list() == [-8.05, -3.99]
    assert gen["epoch"].to_list() == [1, 2]
    assert loss_sums(got["tag"].unique().to_list()) == {}


@pytest.mark.needs_shared
def test_a_settled_last_line_without_newline_is_read_and_a_fresh_one_waits(tmp_path):
    rows = NO_NEWLINE_TSV.read_bytes()
    assert not rows.endswith(b"\n")
    path = tmp_path / "loss.tsv"
    path.write_bytes(rows)
    fresh = points(read_csv(path, 0)).filter(pl.col("tag") == "TRAIN_LOSS")
    settled_chunks = list(read_csv(old(path), 0))
    settled = points(settled_chunks).filter(pl.col("tag") == "TRAIN_LOSS")
    last = float(rows.rsplit(b"\n", 1)[1].split(b"\t")[4])
    assert last not in fresh["value"].to_list()
    assert settled["value"].to_list()[-1] == last and settled.height == fresh.height + 1
    # the writer goes on: the next line starts with its newline, and nothing is read twice
    end = settled_chunks[-1].end
    with path.open("ab") as f:
        f.write(b"\n5\t15:00:00\t0\t0.1000\t0.09\t0.1\t0.9\t0.9\t0.9\t0.1\t0.9\t0.9\t0.9")
    more = points(read_csv(old(path), end)).filter(pl.col("tag") == "TRAIN_LOSS")
    assert more["value"].to_list() == [0.09]


def test_a_cut_line_is_not_taken_for_a_settled_one(tmp_path):
    path = tmp_path / "log.csv"
    path.write_bytes(b"step,loss,acc\n0,1.0,0.1\n1,0.9")  # two fields of three: cut mid-record
    got = points(read_csv(old(path), 0))
    assert got.filter(pl.col("tag") == "loss")["value"].to_list() == [1.0]


@pytest.mark.needs_shared
def test_yolos_hyperparameters_and_options_are_the_runs_settings():
    import yaml

    from ingest.configs import read_config

    for name in ("hyp.yaml", "opt.yaml"):
        path = YOLO_CSV.parent / name
        assert format_for(PurePosixPath(f"runs/train/exp2/{name}")).name == "config"
        [chunk] = list(read_config(path))
        assert chunk.configs[name] == yaml.safe_load(path.read_text())


DVCLIVE = WILD / "m015_dvclive_lightning"  # DVCLive: one TSV per metric under plots/metrics/<its name>.tsv


def _stored_names(run: Path, tmp_path: Path) -> dict[str, tuple[str, str | None]]:
    import duckdb

    from forensics.cli import main

    db = tmp_path / "f.duckdb"
    assert main(["ingest", str(run), "--db", str(db), "--quiet"]) == 0
    with duckdb.connect(str(db), read_only=True) as con:
        return {name: (role, split) for name, role, split in con.execute("SELECT name, role, split FROM series").fetchall()}


def test_files_that_each_hold_one_metric_are_named_by_their_folders_as_event_files_are(tmp_path):
    """One metric per file, named like the file, in folders that name its split (a logger that writes
    `<name>.tsv` under the metric's path): `val/loss` is the validation loss, not a second training loss."""
    run = tmp_path / "run"
    for path, values in {"train/loss": [2.0, 1.5, 1.0], "val/loss": [2.2, 1.9, 1.8], "val/acc": [0.1, 0.4, 0.5],
                         "lr": [0.1, 0.1, 0.01]}.items():
        out = run / "plots" / f"{path}.tsv"
        out.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame({"step": range(3), path.rsplit("/", 1)[-1]: values}).to_csv(out, sep="\t", index=False)
    names = _stored_names(run, tmp_path)
    assert names == {"train/loss": ("train_loss", "train"), "val/loss": ("val_loss", "val"),
                     "val/acc": ("val_accuracy", "val"), "lr": ("lr", None)}


def test_numpy_savetxt_files_side_by_side_keep_their_own_names(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    np.savetxt(run / "train_loss", [0.9, 0.5, 0.3])
    np.savetxt(run / "val_loss", [1.0, 0.8, 0.7])
    assert _stored_names(run, tmp_path) == {"train_loss": ("train_loss", "train"), "val_loss": ("val_loss", "val")}


@pytest.mark.needs_shared
def test_dvclive_metric_files_are_named_by_their_path_under_plots_metrics(tmp_path):
    names = _stored_names(DVCLIVE, tmp_path)
    held_out = {n for n, (role, _) in names.items() if n.startswith(("val/", "test/")) and "loss" in n}
    assert held_out and all(names[n][0] == "val_loss" for n in held_out)
    assert names["train/total_loss"] == ("train_loss", "train") and names["train/lr"] == ("lr", "train")


def test_catboost_train_dir_learn_logloss_is_the_training_loss_and_test_the_held_out_one(tmp_path):
    """CatBoost's train_dir: learn_error.tsv and test_error.tsv hold the same column names (`iter`, `Logloss`),
    and so do its learn/ and test/ event files; the test file's columns are the held-out split's."""
    catboost = pytest.importorskip("catboost")
    import duckdb

    from forensics.cli import main

    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 4))
    y = (x[:, 0] + 0.5 * rng.normal(size=400) > 0).astype(int)
    run = tmp_path / "catboost_info"
    model = catboost.CatBoostClassifier(iterations=30, train_dir=str(run), verbose=False, random_seed=0,
                                        thread_count=1)
    model.fit(x[:300], y[:300], eval_set=(x[300:], y[300:]))
    evals = model.get_evals_result()
    db = tmp_path / "f.duckdb"
    assert main(["ingest", str(run), "--db", str(db), "--quiet"]) == 0
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT s.format, s.name, s.role, list(p.value ORDER BY p.step) FROM series s "
                           "JOIN scalars p USING (series_id) WHERE s.name LIKE '%Logloss' "
                           "GROUP BY ALL").fetchall()
    by_role = {}
    for fmt, name, role, values in rows:
        by_role.setdefault(role, []).append((fmt, name))
        want = evals["validation" if role == "val_loss" else "learn"]["Logloss"]
        assert values == pytest.approx(want, rel=1e-6), name
    assert sorted(f for f, _ in by_role["train_loss"]) == ["csv", "tensorboard"]
    assert sorted(f for f, _ in by_role["val_loss"]) == ["csv", "tensorboard"]


@pytest.mark.parametrize("counter", [False, True])
def test_numbers_with_no_header_in_a_file_named_for_the_loss_name_its_first_column_not_a_counter(tmp_path, counter):
    """`f.write(f"{loss},{reward}\\n")` into loss_log.txt: the file names the first column (as a one-column file is
    named by its file); an episode index before it is a counter, not the loss."""
    rows = np.array([[16.84, -210.47], [10.07, -158.77], [6.74, -203.33], [6.67, -190.0]])
    if counter:
        rows = np.column_stack([np.arange(1, 5), rows])
    path = tmp_path / "loss_log.txt"
    np.savetxt(path, rows, delimiter=",", fmt="%g")
    frame = points(read_table(path, 0))
    loss = frame.filter(pl.col("tag") == "loss_log")
    assert loss["value"].to_list() == [16.84, 10.07, 6.74, 6.67] and role_of("loss_log").role == "train_loss"
    assert sorted(frame["tag"].unique().to_list()) == (["column 1", "column 3", "loss_log"] if counter
                                                       else ["column 2", "loss_log"])


CYCLEGAN_LOG = WILD / "m030_cyclegan" / "loss_log.txt"  # `(epoch: E, iters: I, ...) D_A: x G_A: y cycle_A: ...`


@pytest.mark.parametrize(("tags", "parts"), [
    (["D_A", "G_A", "cycle_A", "idt_A", "D_B", "G_B", "cycle_B", "idt_B", "iters", "time"],
     ["G_A", "cycle_A", "idt_A", "G_B", "cycle_B", "idt_B"]),  # CycleGAN: both generators and their terms
    (["G_GAN", "G_L1", "D_real", "D_fake"], ["G_GAN", "G_L1"]),  # pix2pix
    (["G", "G_A", "D_A", "cycle_A"], None),  # the generator's total is printed
    (["G_A", "G_B"], None),  # no discriminator: not one GAN's two sides
    (["D_A", "G_A"], None),  # one generator term: it is the objective
])
def test_a_gans_generator_objective_printed_in_terms_is_their_sum(tags, parts):
    assert loss_sums(tags) == ({f"loss (sum of {', '.join(parts)})": parts} if parts else {})


@pytest.mark.needs_shared
def test_a_cyclegan_loss_log_gets_the_generators_objective_per_line():
    import re

    from ingest.console import read_console

    frame = points(read_console(CYCLEGAN_LOG, 0))
    [total] = [t for t in frame["tag"].unique().to_list() if t.startswith("loss (sum of G_A")]
    assert role_of(total).role == "train_loss" and role_of(total).canonical  # the run's loss, not D_A
    want = []
    for line in CYCLEGAN_LOG.read_text().splitlines():
        terms = dict(re.findall(r"(\w+): ([-\d.]+)", line.partition(")")[2]))
        if terms:
            want.append(sum(float(terms[k]) for k in ("G_A", "G_B", "cycle_A", "cycle_B", "idt_A", "idt_B")))
    assert frame.filter(pl.col("tag") == total).sort("position")["value"].to_list() == pytest.approx(want)


def test_a_metric_file_at_the_runs_root_beside_one_in_a_folder_keeps_its_name(tmp_path):
    run = tmp_path / "run"
    (run / "val").mkdir(parents=True)
    np.savetxt(run / "train_loss", [0.9, 0.5, 0.3])
    np.savetxt(run / "val" / "val_loss", [1.0, 0.8, 0.7])
    assert _stored_names(run, tmp_path) == {"train_loss": ("train_loss", "train"),
                                            "val/val_loss": ("val_loss", "val")}


def test_a_table_whose_rows_end_with_a_separator_is_known_by_its_content(tmp_path):
    path = tmp_path / "progress.txt"
    with open(path, "w") as f:  # `f.write(f"{k}\t")` per value: every line ends with a tab
        f.write("Epoch\tLossPi\tLossV\n")
        for epoch in range(5):
            f.write(f"{epoch}\t{0.1 * epoch}\t{1.0 / (epoch + 1)}\t\n")
    head = path.read_bytes()
    assert table_separator(head) == "\t"
    frame = pl.concat([c.scalars for c in read_table(path, 0)])
    assert frame.filter(pl.col("tag") == "LossV")["value"].to_list() == [1.0, 0.5, 1 / 3, 0.25, 0.2]


# A seq2seq chatbot's two hand-written CSV logs read as console logs (AotY/Pytorch-NCM, log/train.log and
# log/valid.log, their first five rows): one file per split, the same columns in each.
_TRAIN_LOG = "epoch,loss,ppl,accuracy\n0, 6.33676, 564.96506,15.328\n1, 5.11334, 166.22518,25.221\n" \
             "2, 4.66369, 106.02700,28.432\n3, 4.27933, 72.19183,31.926\n4, 3.92497, 50.65141,34.842\n"
_VALID_LOG = "epoch,loss,ppl,accuracy\n0, 5.62476, 277.20576,23.177\n1, 5.37899, 216.80341,27.273\n" \
             "2, 5.23581, 187.88176,28.372\n3, 5.15563, 173.40447,29.071\n4, 5.11374, 166.29092,30.070\n"


def test_a_console_log_named_for_a_held_out_split_beside_the_training_one_is_that_splits(tmp_path):
    """`valid.log` beside `train.log`, the same quantities in each: the valid file's loss is the held-out loss, not a
    second training loss. Alone, a console log named `test.log` is a whole run's output and keeps its names."""
    run = tmp_path / "pair"
    run.mkdir()
    (run / "train.log").write_text(_TRAIN_LOG)
    (run / "valid.log").write_text(_VALID_LOG)
    names = _stored_names(run, tmp_path)
    assert names["loss"][0] == "train_loss" and names["valid/loss"][0] == "val_loss"
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "test.log").write_text(_TRAIN_LOG)
    (tmp_path / "a").mkdir()
    assert _stored_names(alone, tmp_path / "a")["loss"][0] == "train_loss"


def test_a_gan_table_names_its_networks_by_a_letter_under_the_split(tmp_path):
    # a restoration GAN's epoch CSV (csv.DictWriter, one row per epoch): the generator's and the discriminator's
    # losses are `train_G` and `train_D` beside the generator's loss terms; the networks' losses are the training
    # losses, a term (`train_L1`) is not the run's loss
    import csv

    run = tmp_path / "gan"
    (run / "logs").mkdir(parents=True)
    fields = ["epoch", "lr_g", "lr_d", "train_G", "train_D", "train_L1", "train_VGG", "val_PSNR", "val_SSIM"]
    with open(run / "logs" / "train_log.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for epoch in range(1, 9):
            writer.writerow({"epoch": epoch, "lr_g": 1e-4, "lr_d": 1e-4, "train_G": 4.88 / epoch,
                             "train_D": 0.36 - 0.01 * epoch, "train_L1": 1.41 / epoch, "train_VGG": 1.95 / epoch,
                             "val_PSNR": 18.6 + epoch, "val_SSIM": 0.53 + 0.02 * epoch})
    names = _stored_names(run, tmp_path)
    assert names["train_G"] == ("train_loss", "train") and names["train_D"] == ("train_loss", "train")
    assert names["train_L1"][0] != "train_loss"
