"""MLflow's file store: metric files as FileStore appends them, params/tags/meta.yaml, the bare real file.

mlflow itself is not installed (and not needed, DECISIONS §13); files are written with the exact
format string of mlflow's FileStore._log_run_metric: f"{metric.timestamp} {metric.value} {metric.step}\\n"
(timestamp in ms; value as Python's str of a float), and params with FileStore's write_to (no newline).
"""

import math
from pathlib import Path, PurePosixPath

import pytest
import yaml

from ingest.formats import format_for
from ingest.mlflow import read_mlflow, sniff_metric_file

from tests.paths import REAL_RUNS

REAL_LOSS = REAL_RUNS / "mlflow_swahili_stt" / "loss"


def _log_metric(run: Path, key: str, value: float, step: int, timestamp: int) -> None:
    path = run / "metrics" / key
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(f"{timestamp} {value} {step}\n")


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "mlruns" / "1" / "ed05f9cd599442fe9a0c9222184710b8"
    for step, value in enumerate([2.5, 1.25, float("inf"), float("nan")]):
        _log_metric(run, "train/loss", value, step, 1628697792090 + 1000 * step)
    (run / "params").mkdir(parents=True)
    (run / "params" / "learning_rate").write_text("0.001")
    (run / "params" / "optimizer").write_text("adamw")
    (run / "tags").mkdir()
    (run / "tags" / "mlflow.runName").write_text("swahili-stt")
    (run / "meta.yaml").write_text(yaml.safe_dump({"run_id": run.name, "status": 3, "start_time": 1628697790000,
                                                   "end_time": None, "lifecycle_stage": "active"}))
    return run


def test_nested_metric_key_values_times(tmp_path):
    run = _run(tmp_path)
    [chunk] = list(read_mlflow(run / "metrics" / "train" / "loss", 0))
    frame = chunk.scalars
    assert set(frame["tag"].to_list()) == {"train/loss"}
    assert frame["step"].to_list() == [0, 1, 2, 3]
    assert frame["value"][2] == math.inf and math.isnan(frame["value"][3])
    assert frame["wall_time"][1] == 1628697793.090
    assert chunk.issues == [] and chunk.end == (run / "metrics" / "train" / "loss").stat().st_size


def test_params_tags_meta_become_configs(tmp_path):
    run = _run(tmp_path)
    [params] = list(read_mlflow(run / "params" / "learning_rate", 0))
    assert params.configs == {"mlflow_params": {"learning_rate": 0.001}}
    [text] = list(read_mlflow(run / "params" / "optimizer", 0))
    assert text.configs == {"mlflow_params": {"optimizer": "adamw"}}
    [tags] = list(read_mlflow(run / "tags" / "mlflow.runName", 0))
    assert tags.configs == {"mlflow_tags": {"mlflow.runName": "swahili-stt"}}
    [meta] = list(read_mlflow(run / "meta.yaml", 0))
    assert meta.configs["mlflow_meta"]["status"] == 3


def test_appended_lines_resume_and_garbled_line(tmp_path):
    run = _run(tmp_path)
    path = run / "metrics" / "train" / "loss"
    [first] = list(read_mlflow(path, 0))
    with open(path, "a") as f:
        f.write("garbage line\n")
    _log_metric(run, "train/loss", 0.5, 4, 1628697800000)
    with open(path, "a") as f:
        f.write("1628697801000 0.4")  # a partial line: left for the next ingest
    [second] = list(read_mlflow(path, first.end))
    assert second.scalars["step"].to_list() == [4] and second.scalars["position"].to_list() == [6]
    assert [(i.kind, i.position) for i in second.issues] == [("garbled", 5)]
    assert second.end == path.stat().st_size - len("1628697801000 0.4")


def test_empty_metric_file(tmp_path):
    path = tmp_path / "mlruns" / "0" / "abc" / "metrics" / "loss"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    [chunk] = list(read_mlflow(path, 0))
    assert chunk.issues[0].kind == "empty"


@pytest.mark.needs_shared
def test_real_bare_metric_file_is_sniffed_and_read():
    head = REAL_LOSS.read_bytes()[:4096]
    fmt = format_for(PurePosixPath("loss"), lambda: head)
    assert fmt is not None and fmt.name == "mlflow"
    [chunk] = list(fmt.load_reader()(REAL_LOSS, 0))
    frame = chunk.scalars
    assert frame["tag"].unique().to_list() == ["loss"]
    assert frame["step"].to_list() == list(range(10))
    assert frame["value"][0] == 332.6841735839844 and frame["value"][-1] == 234.7978057861328
    assert frame["wall_time"][0] == 1628697792.090


def test_sniff_rejects_other_text():
    assert not sniff_metric_file(b"epoch 1 loss 0.5\nepoch 2 loss 0.4\n")
    assert not sniff_metric_file(b"1628697792090 0.5 0")  # no complete line yet


def test_format_table_and_group(tmp_path):
    rel = PurePosixPath("mlruns/1/ed05/metrics/train/loss")
    fmt = format_for(rel)
    assert fmt.name == "mlflow" and fmt.resumable
    assert fmt.group(rel) == "mlruns/1/ed05" == fmt.group(PurePosixPath("mlruns/1/ed05/params/lr"))
    assert format_for(PurePosixPath("mlruns/1/ed05/meta.yaml")).name == "mlflow"
