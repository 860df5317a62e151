"""Lightning's CSVLogger metrics.csv: real files, Lightning's exact writer, damage, hparams.yaml beside it."""

import argparse
import csv
import math
from pathlib import Path, PurePosixPath

import polars as pl
import pytest
import yaml

from ingest.configs import read_config
from ingest.formats import format_for
from ingest.lightning import read_metrics_csv

from tests.paths import REAL_RUNS

REAL = REAL_RUNS
REAL_FILES = sorted(REAL.glob("pl_*/metrics.csv"))


class ExperimentWriter:
    """What lightning's `_ExperimentWriter` does (fabric/loggers/csv_logs.py): rows of logged dicts with
    `step` added, saved through csv.DictWriter over the sorted union of keys, the whole file at once."""

    def __init__(self, path: Path):
        self.path, self.metrics = path, []

    def log_metrics(self, metrics: dict, step: int) -> None:
        self.metrics.append({**metrics, "step": step})

    def save(self) -> None:
        keys = sorted({k for m in self.metrics for k in m})
        with open(self.path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=keys)
            writer.writeheader()
            writer.writerows(self.metrics)


def _diverging_run(path: Path) -> ExperimentWriter:
    writer = ExperimentWriter(path)
    for step in range(0, 100):
        loss = 1.0 / (step + 1) if step < 80 else (float("inf") if step == 80 else float("nan"))
        writer.log_metrics({"train_loss_step": loss, "epoch": step // 25}, step)
        if step % 25 == 24:
            writer.log_metrics({"val_loss": 0.5 if step < 80 else float("nan"), "epoch": step // 25}, step)
    writer.save()
    return writer


def test_lightning_written_csv_sparse_rows_and_nonfinite(tmp_path):
    path = tmp_path / "metrics.csv"
    _diverging_run(path)
    assert "nan" in path.read_text() and "inf" in path.read_text()  # Python's float repr, as written
    [chunk] = list(read_metrics_csv(path, 0))
    frame = chunk.scalars
    loss = frame.filter(frame["tag"] == "train_loss_step")
    assert loss["step"].to_list() == list(range(100))  # Lightning's own 0-based step, as logged
    assert loss["value"][80] == math.inf and math.isnan(loss["value"][99])
    val = frame.filter(frame["tag"] == "val_loss")
    assert val["step"].to_list() == [24, 49, 74, 99] and math.isnan(val["value"][3])
    assert val["position"][0] == 27  # header is line 1, val row for step 24 is the 26th data row
    assert frame.filter(frame["tag"] == "train_loss_step")["epoch"][30] == 1
    assert not frame["ordinal"].any() and chunk.issues == []
    assert chunk.end == 104


def test_rewritten_file_resumes_at_row_index(tmp_path):
    path = tmp_path / "metrics.csv"
    writer = _diverging_run(path)
    [first] = list(read_metrics_csv(path, 0))
    writer.log_metrics({"train_loss_step": 7.0, "lr": 0.1}, 100)  # a new key: Lightning rewrites the header
    writer.save()
    [second] = list(read_metrics_csv(path, first.end))
    assert sorted(second.scalars["tag"].to_list()) == ["lr", "train_loss_step"]
    assert set(second.scalars["step"].to_list()) == {100} and second.end == 105


def test_garbled_middle_line_keeps_the_rest(tmp_path):
    path = tmp_path / "metrics.csv"
    _diverging_run(path)
    lines = path.read_text().splitlines(keepends=True)
    lines[10] = "0.5,garbage\n"
    assert lines[20] == "0,19,0.05,\n"
    lines[20] = "0,19,1.2.3,\n"  # a non-number in a numeric column
    path.write_text("".join(lines))
    [chunk] = list(read_metrics_csv(path, 0))
    assert [(i.kind, i.position) for i in chunk.issues] == [("garbled", 11), ("garbled", 21)]
    steps = chunk.scalars.filter(chunk.scalars["tag"] == "train_loss_step")["step"].to_list()
    assert len(steps) == 98 and 9 not in steps and 19 not in steps and {8, 10, 18, 20} <= set(steps)
    assert 19 in chunk.scalars.filter(chunk.scalars["tag"] == "epoch")["step"].to_list()  # rest of line 21 kept


def test_cut_off_last_line_is_an_issue(tmp_path):
    path = tmp_path / "metrics.csv"
    _diverging_run(path)
    raw = path.read_bytes()
    path.write_bytes(raw[: raw.rfind(b",")])
    [chunk] = list(read_metrics_csv(path, 0))
    assert [(i.kind, i.position) for i in chunk.issues] == [("garbled", 105)]
    assert chunk.scalars.filter(chunk.scalars["tag"] == "train_loss_step").height == 100
    assert chunk.scalars.filter(chunk.scalars["tag"] == "val_loss")["step"].to_list() == [24, 49, 74]


@pytest.mark.parametrize("content", [b"", b"epoch,step,lo"])
def test_empty_or_header_only(tmp_path, content):
    path = tmp_path / "metrics.csv"
    path.write_bytes(content)
    [chunk] = list(read_metrics_csv(path, 0))
    assert chunk.issues and (chunk.scalars is None or chunk.scalars.height == 0)


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.parent.name)
@pytest.mark.needs_shared
def test_real_metrics_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    [chunk] = list(read_metrics_csv(path, 0))
    assert chunk.issues == [] and chunk.end == len(rows)
    frame = chunk.scalars
    n_cells = sum(1 for r in rows for k, v in r.items() if k != "step" and v != "")
    assert frame.height == n_cells  # every logged cell, nothing invented
    assert frame["step"][0] == int(rows[0]["step"]) and frame["step"][-1] == int(rows[-1]["step"])


@pytest.mark.needs_shared
def test_real_slm_v0_values():
    [chunk] = list(read_metrics_csv(REAL / "pl_slm_v0" / "metrics.csv", 0))
    val = chunk.scalars.filter(chunk.scalars["tag"] == "val_loss")
    assert val.height == 10 and val["step"][-1] == 140739
    assert val["value"][-1] == pytest.approx(3.570486068725586)


def test_hparams_yaml_with_python_tags_reads_as_plain_data(tmp_path):
    # Lightning's save_hparams_to_yaml dumps values with yaml.dump: a Namespace becomes a python tag.
    path = tmp_path / "hparams.yaml"
    path.write_text(yaml.dump({"lr": 0.001, "args": argparse.Namespace(batch_size=32, optimizer="adam")}))
    assert "!!python/object" in path.read_text()
    [chunk] = list(read_config(path, 0))
    doc = chunk.configs["hparams.yaml"]
    assert doc["lr"] == 0.001 and doc["args"]["batch_size"] == 32


def test_format_table():
    fmt = format_for(PurePosixPath("lightning_logs/version_3/metrics.csv"))
    assert fmt.name == "lightning_csv" and not fmt.resumable
    assert fmt.group(PurePosixPath("lightning_logs/version_3/metrics.csv")) == "lightning_logs"  # versions: one log
    assert fmt.group(PurePosixPath("logs/metrics.csv")) == "logs"
    assert format_for(PurePosixPath("lightning_logs/version_3/hparams.yaml")).name == "config"


def test_validation_logged_per_batch_sits_at_the_step_its_evaluation_ran_with_its_batch_count(tmp_path):
    torch = pytest.importorskip("torch")
    lightning = pytest.importorskip("lightning", reason="the test extra installs lightning")
    from lightning.pytorch.loggers import CSVLogger

    from ingest.roles import role_of

    class Net(lightning.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, _):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.layer(x), y)
            self.log("train_loss", loss, on_step=True, on_epoch=True)
            return loss

        def validation_step(self, batch, _):
            x, y = batch
            self.log("val_loss", torch.nn.functional.mse_loss(self.layer(x), y), on_step=True, on_epoch=True)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    trainer = lightning.Trainer(max_epochs=3, logger=CSVLogger(tmp_path), log_every_n_steps=2, accelerator="cpu",
                                enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False,
                                num_sanity_val_steps=0)
    trainer.fit(Net(), loader, loader)
    [path] = tmp_path.glob("lightning_logs/version_*/metrics.csv")
    rows = list(csv.DictReader(path.open()))
    logged = [int(r["step"]) for r in rows if r["val_loss_step"]]
    assert max(logged) < 3 * 8 and not all(r["epoch"] for r in rows if r["val_loss_step"])  # the premise
    [chunk] = list(read_metrics_csv(path, 0))
    per_batch = chunk.scalars.filter(pl.col("tag") == "val_loss_step").sort("position")
    per_epoch = chunk.scalars.filter(pl.col("tag") == "val_loss_epoch").sort("position")
    assert per_batch["batch"].to_list() == logged  # the count Lightning wrote, kept
    # Lightning's 0-based step of each epoch's last batch: 7, 15, 23
    assert set(per_batch["step"].to_list()) == set(per_epoch["step"].to_list()) == {7, 15, 23}
    assert per_batch.filter(pl.col("step") == 7).height == 8  # one evaluation of 8 batches, after step 7
    assert not role_of("val_loss_step").canonical and role_of("val_loss_epoch").canonical


# Source: PhatLeBao-Phat/Allocate-UK-Metropolitan-Crime@8817c866a8a4b9eb34431f4f07e0d01de74f2ac0:
# lightning_logs/version_0/metrics.csv (its last ten rows) and lightning_logs/version_1/metrics.csv (whole): a second
# launch restored from version_0's epoch=92 checkpoint and logged steps 4699-4999 again into the next version folder.
RESUMED_VERSIONS = {
    "version_0": """train_loss,epoch,step
4.018406867980957,90,4549
3.960930109024048,91,4599
3.8657398223876953,92,4649
3.8807973861694336,93,4699
4.112982273101807,94,4749
4.058821678161621,95,4799
4.052424430847168,96,4849
4.072790145874023,97,4899
4.089257717132568,98,4949
3.9847164154052734,99,4999
""",
    "version_1": """train_loss,epoch,step
3.9928596019744873,93,4699
3.8662283420562744,94,4749
3.892486572265625,95,4799
3.833913564682007,96,4849
3.9413652420043945,97,4899
4.08787727355957,98,4949
3.9038174152374268,99,4999
""",
}


def test_version_folders_given_as_one_run_are_its_sources_and_a_later_one_is_its_resume(tmp_path, capsys):
    import json

    import duckdb

    from forensics.cli import main

    root = tmp_path / "forecast"
    for version, text in RESUMED_VERSIONS.items():
        (root / "lightning_logs" / version).mkdir(parents=True)
        (root / "lightning_logs" / version / "metrics.csv").write_text(text)
    db = tmp_path / "f.duckdb"
    assert main(["analyze", str(root), "--db", str(db), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "resumed_run" in {f["kind"] for f in out["findings"]}
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT p.step, p.value FROM scalars p JOIN series s USING (series_id) "
                           "WHERE s.role = 'train_loss' ORDER BY p.source_id, p.position").fetchall()
    assert len(rows) == 17 and [v for s, v in rows if s == 4999] == [3.9847164154052734, 3.9038174152374268]
    # `--all` still splits a folder into the runs discovery finds: each version folder on its own
    assert main(["ingest", str(root), "--all", "--db", str(tmp_path / "all.duckdb"), "--quiet", "--json"]) == 0
    assert sorted(r["name"] for r in json.loads(capsys.readouterr().out)["runs"]) == ["version_0", "version_1"]
