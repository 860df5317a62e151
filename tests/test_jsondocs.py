"""Whole JSON documents of metrics, read by shape: real files from the shared corpus of metric files."""

import json
import math
from pathlib import Path, PurePosixPath

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.formats import format_for
from ingest.jsondocs import read_json, sniff_json_document
from ingest.roles import role_of
from tests.paths import SHARED

WILD = SHARED / "wild" / "structured"
LOG_REPORT = WILD / "m074_chainer_logreport" / "result" / "log"  # Chainer LogReport: one JSON array of reports
PAIRED_LISTS = WILD / "m032_sacred_pymarl" / "1" / "info.json"  # PyMARL: `loss_td` beside `loss_td_T`
GAUGES = WILD / "m033_mlagents" / "run_logs" / "timers.json"  # ML-Agents: {"gauges": {name: {value,min,max,count}}}
HISTORY = WILD / "m071_keras_history_json" / "training_history.json"  # Keras History.history dumped whole
SPLIT_LISTS = WILD / "m070_custom_json" / "losses.json"  # {"train": [...], "val": [...]}
NESTED_HISTORY = WILD / "m041_custom_json_keras" / "training_statistics.json"  # a history under a key + settings
HF_RESULTS = WILD / "m035_hf_results" / "train_results.json"  # HF Trainer.save_metrics("train", ...)
JSON_LINES = WILD / "m024_detectron2" / "output" / "metrics.json"  # JSON lines: not a document


def points(path: Path) -> pl.DataFrame:
    chunks = list(read_json(path))
    frames = [c.scalars for c in chunks if c.scalars is not None]
    return pl.concat(frames) if frames else pl.DataFrame()


def series(frame: pl.DataFrame, tag: str) -> pl.DataFrame:
    return frame.filter(pl.col("tag") == tag).sort("position")


@pytest.mark.needs_shared
def test_an_array_of_reports_is_read_as_records_on_their_iteration():
    doc = json.loads(LOG_REPORT.read_text())
    frame = points(LOG_REPORT)
    gen = series(frame, "gen/loss")
    assert gen["value"].to_list() == [r["gen/loss"] for r in doc]
    assert gen["step"].to_list() == [r["iteration"] for r in doc]
    assert not gen["ordinal"].any()
    assert "iteration" not in frame["tag"].to_list()


@pytest.mark.needs_shared
def test_lists_paired_with_a_steps_list_take_those_steps_and_encoded_values_are_counted():
    doc = json.loads(PAIRED_LISTS.read_text())
    chunk = next(read_json(PAIRED_LISTS))
    loss = series(chunk.scalars, "loss_td")
    assert loss["value"].to_list() == doc["loss_td"]
    assert loss["step"].to_list() == doc["loss_td_T"]
    assert "loss_td_T" not in chunk.scalars["tag"].to_list()
    # the grad norms are jsonpickled tensors: not numbers, said once, not read as points
    assert "grad_norm" not in chunk.scalars["tag"].to_list()
    assert any("grad_norm" in i.detail and i.kind == "unread_values" for i in chunk.issues)


@pytest.mark.needs_shared
def test_a_gauge_is_its_last_value_and_the_timer_tree_is_kept_as_settings():
    doc = json.loads(GAUGES.read_text())
    chunk = next(read_json(GAUGES))
    for name, gauge in doc["gauges"].items():
        assert series(chunk.scalars, f"gauges/{name}")["value"].to_list() == [gauge["value"]]
    assert chunk.configs["timers.json"]["name"] == doc["name"]


@pytest.mark.parametrize("path", [HISTORY, SPLIT_LISTS, NESTED_HISTORY])
@pytest.mark.needs_shared
def test_a_history_of_lists_is_one_series_per_list_on_the_list_index(path):
    frame = points(path)
    doc = json.loads(path.read_text())
    history = doc.get("training_history", doc)
    losses = frame.filter(pl.col("tag").map_elements(lambda t: role_of(t).role == "train_loss", return_dtype=pl.Boolean)
                          & pl.col("tag").map_elements(lambda t: role_of(t).canonical, return_dtype=pl.Boolean))
    want = history.get("loss", history.get("train"))
    assert sorted(losses["value"].to_list()) == sorted(want)
    assert losses.sort("position")["step"].to_list() == list(range(len(want)))
    assert losses["ordinal"].all()


@pytest.mark.needs_shared
def test_settings_beside_a_history_are_kept_as_the_document_and_not_made_series():
    chunk = next(read_json(NESTED_HISTORY))
    doc = json.loads(NESTED_HISTORY.read_text())
    assert chunk.configs["training_statistics.json"]["model_info"]["num_classes"] == doc["model_info"]["num_classes"]
    assert not any(t.startswith("model_info") for t in chunk.scalars["tag"].to_list())


@pytest.mark.needs_shared
def test_a_results_document_is_one_record():
    doc = json.loads(HF_RESULTS.read_text())
    frame = points(HF_RESULTS)
    # named under the document: HF's trainer_state.json beside it logs `train_loss` too
    assert series(frame, "train_results/train_loss")["value"].to_list() == [doc["train_loss"]]
    assert role_of("train_results/train_loss").role == "train_loss"
    assert not role_of("train_results/train_loss").canonical


@pytest.mark.needs_shared
def test_documents_are_sniffed_and_json_lines_are_left_to_the_line_readers():
    for path in (LOG_REPORT, PAIRED_LISTS, GAUGES, HISTORY, SPLIT_LISTS, HF_RESULTS):
        assert sniff_json_document(path.read_bytes()[:4096]), path
        assert format_for(PurePosixPath(path.name), lambda p=path: p.read_bytes()[:4096]).name == "json"
    assert not sniff_json_document(JSON_LINES.read_bytes()[:4096])
    assert not sniff_json_document(b"epoch loss\n1 0.5\n")
    # a console log that opens with its config dumped as JSON, then prints its training lines
    config = json.dumps({"lr": 0.1, "layers": [64, 64]}, indent=2).encode()
    assert not sniff_json_document(config + b"\nepoch 1 loss 0.52\nepoch 2 loss 0.41\n")
    # a document longer than the head: the head ends inside it
    assert sniff_json_document(HISTORY.read_bytes()[:200], cut=True)


def test_a_file_that_does_not_parse_is_a_read_problem_not_an_error(tmp_path):
    bad = tmp_path / "history.json"
    bad.write_text('{"loss": [1.0, 0.5,')
    chunk = next(read_json(bad))
    assert chunk.scalars is None and chunk.issues[0].kind == "garbled"


def test_a_large_document_with_no_series_is_not_stored_as_settings_nor_lost_evidence(tmp_path):
    from ingest.records import lossy

    path = tmp_path / "instances_val.json"  # shaped as COCO's annotations: lists of objects, no metric series
    doc = {"images": [{"id": i, "width": 640, "height": 480} for i in range(10_000)],
           "annotations": [{"id": i, "image_id": i, "bbox": [1, 2, 3, 4]} for i in range(10_000)]}
    path.write_text(json.dumps(doc))
    [chunk] = list(read_json(path))
    assert chunk.scalars is None and not chunk.configs
    assert [i.kind for i in chunk.issues] == ["not_settings"] and not lossy("not_settings")


finite_or_not = st.floats(allow_nan=True, allow_infinity=True, width=64)


@settings(deadline=None, max_examples=40)
@given(names=st.lists(st.sampled_from(["loss", "val_loss", "accuracy", "val_accuracy", "lr", "mse_loss"]),
                      min_size=1, max_size=4, unique=True),
       n=st.integers(2, 30), data=st.data())
def test_any_history_dumped_by_json_comes_back_exact(tmp_path_factory, names, n, data):
    history = {k: data.draw(st.lists(finite_or_not, min_size=n, max_size=n)) for k in names}
    path = tmp_path_factory.mktemp("h") / "history.json"
    path.write_text(json.dumps(history))  # Python's json writes NaN / Infinity tokens, as Keras users' dumps do
    frame = points(path)
    for key, values in history.items():
        got = series(frame, key)
        assert got["step"].to_list() == list(range(n))
        assert [(math.isnan(a) and math.isnan(b)) or a == b for a, b in zip(got["value"].to_list(), values)] == [True] * n


def test_a_history_validated_every_few_epochs_keeps_lists_of_different_lengths(tmp_path):
    path = tmp_path / "history.json"
    path.write_text(json.dumps({"loss": [1.0, 0.8, 0.7, 0.6], "val_loss": [0.9, 0.75], "betas": [0.9, 0.99]}))
    frame = points(path)
    assert series(frame, "loss")["value"].to_list() == [1.0, 0.8, 0.7, 0.6]
    assert series(frame, "val_loss")["value"].to_list() == [0.9, 0.75]


def test_settings_with_short_lists_beside_numbers_are_not_series(tmp_path):
    path = tmp_path / "training_options.json"
    path.write_text(json.dumps({"lr": 0.1, "milestones": [30, 60], "optimizer": {"betas": [0.9, 0.99], "eps": 1e-8}}))
    [chunk] = list(read_json(path))
    assert chunk.scalars is None and chunk.configs["training_options.json"]["milestones"] == [30, 60]


def test_a_list_of_tensor_reprs_is_a_series_of_their_numbers(tmp_path):
    # `json.dump` of the losses as text (`str(loss)` of each tensor, as a script that cannot dump tensors writes them)
    torch = pytest.importorskip("torch")
    weights = torch.tensor([0.5, -1.0], requires_grad=True)
    losses = [torch.nn.functional.mse_loss(weights * k, torch.zeros(2)) for k in (1, 2, 3)]
    path = tmp_path / "history.json"
    with path.open("w") as f:
        json.dump({"loss": [str(v) for v in losses], "val_loss": [str(v.detach()) for v in losses]}, f)
    assert "grad_fn=<MseLossBackward0>" in path.read_text()
    [chunk] = list(read_json(path))
    assert series(chunk.scalars, "loss")["value"].to_list() == pytest.approx([float(v) for v in losses], rel=1e-4)
    assert series(chunk.scalars, "val_loss").height == 3 and not chunk.issues


# A history dumped with the run's metadata and its test score beside the per-epoch lists (each list cut to its first
# five epochs here). source: DrunkMacintosh/EFFICIENTNET_B0-for-emotion-recognition-of-FER-2013-dataset@ffdffd9993e284655ae632fa1128d82d052cf00b:training_history.json
HISTORY_WITH_METADATA = {
    "timestamp": "2026-04-18T17:21:59", "backbone": "EfficientNet-B0", "img_size": 112,
    "classes": ["Happy", "Neutral", "Sad"], "phase_starts": [0, 15, 40],
    "phase_labels": ["Head only", "Fine-tune 30", "Fine-tune 60"],
    "train_loss": [0.5373139245360191, 0.49584389200095574, 0.5012755962818681, 0.502299625538835, 0.4998992810107633],
    "train_acc": [35.575473729543496, 38.88350559862187, 38.9911714039621, 38.434000861326446, 39.045004306632215],
    "val_loss": [0.5182594384333884, 0.49211097179457197, 0.4705862102582473, 0.4585837763409282, 0.453719788743544],
    "val_acc": [33.38178294573643, 36.31298449612403, 39.365310077519375, 40.74612403100775, 41.981589147286826],
    "test_acc": 77.6542402441683,
}


def test_loss_and_accuracy_lists_beside_run_metadata_are_a_history(tmp_path):
    path = tmp_path / "training_history.json"
    with path.open("w") as f:
        json.dump(HISTORY_WITH_METADATA, f, indent=2)
    [chunk] = list(read_json(path))
    frame = chunk.scalars
    assert series(frame, "train_loss")["value"].to_list() == HISTORY_WITH_METADATA["train_loss"]
    assert series(frame, "train_loss")["step"].to_list() == [0, 1, 2, 3, 4]
    assert set(frame["tag"].unique().to_list()) == {"train_loss", "train_acc", "val_loss", "val_acc"}
    settings_ = chunk.configs["training_history.json"]
    assert settings_["img_size"] == 112 and settings_["phase_starts"] == [0, 15, 40] and "train_loss" not in settings_


def test_a_schedule_s_lists_beside_its_numbers_stay_settings(tmp_path):
    # a config's step lists (`lr_steps`, `milestones`) beside its numbers, three entries long, are settings; one
    # loss list alone beside numbers is no history either
    path = tmp_path / "train_config.json"
    with path.open("w") as f:
        json.dump({"lr": 0.1, "epochs": 100, "lr_steps": [30, 60, 90], "milestones": [30, 60, 90],
                   "loss_weights": [1.0, 0.5, 0.25], "val_loss": [0.9, 0.8, 0.7]}, f)
    [chunk] = list(read_json(path))
    assert chunk.scalars is None and chunk.configs["train_config.json"]["lr_steps"] == [30, 60, 90]

