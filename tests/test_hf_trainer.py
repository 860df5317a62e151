"""HF Trainer's trainer_state.json: real files, HF's exact writer, damage, and the format table entry."""

import json
import math
from pathlib import PurePosixPath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest import hf_trainer
from ingest.formats import format_for
from ingest.hf_trainer import read_trainer_state, read_training_args
from tests.writers import TrainerState

from tests.paths import REAL_RUNS

REAL = REAL_RUNS
REAL_FILES = sorted(REAL.glob("hf_*/trainer_state.json"))


def _diverging_state() -> TrainerState:
    history = []
    for step in range(10, 110, 10):
        loss = 2.0 / step if step < 70 else (float("inf") if step == 70 else float("nan"))
        history.append({"epoch": step / 120, "grad_norm": 1.5 if step < 60 else float("nan"),
                        "learning_rate": 5e-5, "loss": loss, "step": step})
    history.append({"epoch": 0.5, "eval_loss": float("nan"), "eval_runtime": 1.25, "step": 60})
    return TrainerState(epoch=100 / 120, global_step=100, max_steps=1200, logging_steps=10, save_steps=50,
                        train_batch_size=8, num_train_epochs=10, total_flos=1.5e12, log_history=history,
                        stateful_callbacks={"TrainerControl": {"args": {"should_save": True}, "attributes": {}}})


def test_hf_written_state_keeps_nan_inf_steps_and_config(tmp_path):
    path = tmp_path / "trainer_state.json"
    _diverging_state().save_to_json(path)
    assert "NaN" in path.read_text() and "Infinity" in path.read_text()  # HF's tokens, really written
    [chunk] = list(read_trainer_state(path, 0))
    frame = chunk.scalars
    loss = frame.filter(frame["tag"] == "loss").sort("step")
    assert loss["step"].to_list() == list(range(10, 110, 10))
    assert loss["value"][6] == math.inf and math.isnan(loss["value"][7])
    assert loss["position"].to_list() == list(range(10))
    epoch = frame.filter(frame["tag"] == "epoch")
    assert epoch["value"][0] == pytest.approx(10 / 120)  # fractional epoch kept as its own series
    assert frame["epoch"].null_count() == frame.height and frame["wall_time"].null_count() == frame.height
    assert not frame["ordinal"].any()
    eval_loss = frame.filter(frame["tag"] == "eval_loss")
    assert eval_loss["step"].to_list() == [60] and math.isnan(eval_loss["value"][0])
    config = chunk.configs["trainer_state"]
    assert config["global_step"] == 100 and config["logging_steps"] == 10 and "log_history" not in config
    assert chunk.end == 11 and chunk.issues == []


def test_resume_reads_only_new_entries(tmp_path):
    path = tmp_path / "trainer_state.json"
    state = _diverging_state()
    state.save_to_json(path)
    [first] = list(read_trainer_state(path, 0))
    state.log_history.append({"epoch": 0.9, "loss": 9.5, "step": 110})
    state.save_to_json(path)  # HF rewrites the whole file
    [second] = list(read_trainer_state(path, first.end))
    assert second.scalars.filter(second.scalars["tag"] == "loss")["step"].to_list() == [110]
    assert set(second.scalars["position"].to_list()) == {11}
    assert second.end == 12


def test_truncated_state_keeps_complete_entries(tmp_path):
    path = tmp_path / "trainer_state.json"
    _diverging_state().save_to_json(path)
    text = path.read_text()
    cut = text.index('"step": 50')  # mid-entry 5 (0-based 4)
    path.write_text(text[:cut])
    [chunk] = list(read_trainer_state(path, 0))
    assert [i.kind for i in chunk.issues] == ["truncated"]
    assert sorted(set(chunk.scalars["step"].to_list())) == [10, 20, 30, 40]


@pytest.mark.parametrize("content", [b"", b"   \n", b"{\"log_history\": 3}", b"\x00\x01garbage"])
def test_empty_or_garbled_state_is_an_issue(tmp_path, content):
    path = tmp_path / "trainer_state.json"
    path.write_bytes(content)
    chunks = list(read_trainer_state(path, 0))
    assert chunks and chunks[0].issues
    assert chunks[0].scalars is None or chunks[0].scalars.height == 0


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.parent.name)
@pytest.mark.needs_shared
def test_real_trainer_states_read(path):
    doc = json.loads(path.read_text())
    [chunk] = list(read_trainer_state(path, 0))
    assert chunk.issues == [] and chunk.end == len(doc["log_history"])
    frame = chunk.scalars
    expected = sum(1 for e in doc["log_history"] for k, v in e.items()
                   if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool))
    assert frame.height == expected
    first = doc["log_history"][0]
    assert frame["step"][0] == first["step"]
    assert chunk.configs["trainer_state"]["global_step"] == doc["global_step"]


@pytest.mark.needs_shared
def test_real_file_count():
    assert len(REAL_FILES) == 7, f"all seven hf_* real runs must be found under {REAL}"


@pytest.mark.needs_shared
def test_real_star_last_loss_and_string_fields_skipped():
    path = REAL / "hf_star" / "trainer_state.json"
    [chunk] = list(read_trainer_state(path, 0))
    loss = chunk.scalars.filter(chunk.scalars["tag"] == "loss")
    assert loss["step"][-1] == 40000 and loss["value"][-1] == pytest.approx(3.755987548828125)
    assert "remaining_time" not in set(chunk.scalars["tag"].to_list())


def test_training_args_that_are_no_pickle_are_settings_unread_never_lost_evidence(tmp_path):
    from ingest.records import lossy

    path = tmp_path / "training_args.bin"
    path.write_bytes(b"\x80\x04not really")
    [chunk] = list(read_training_args(path, 0))
    assert chunk.issues[0].kind == "settings_unread" and chunk.scalars is None and not chunk.configs
    assert not lossy("settings_unread")


class _Runs:
    """A pickled object whose loading would run a command and open a file, were its globals imported."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.marker}",))


class _Opens:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_a_hostile_pickle_runs_nothing_and_reads_as_records(tmp_path):
    import pickle

    ran, opened = tmp_path / "ran", tmp_path / "opened"
    path = tmp_path / "training_args.bin"
    path.write_bytes(pickle.dumps({"max_grad_norm": 1.0, "evil": _Runs(ran), "file": _Opens(opened)}))
    [chunk] = list(read_training_args(path, 0))
    doc = chunk.configs["training_args.bin"]
    assert not ran.exists() and not opened.exists()
    assert doc["max_grad_norm"] == 1.0
    assert doc["evil"]["class"] in ("posix.system", "os.system", "nt.system")
    assert doc["file"]["class"] == "io.open" or doc["file"]["class"].endswith(".open")


@pytest.fixture(scope="module")
def hf_output(tmp_path_factory):
    """A real HF Trainer output folder: a tiny BERT classifier (3 named labels, vocab 50) built locally, trained 8
    steps with checkpoints every 4, its metrics, state and model saved as Trainer saves them."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers", reason="the test extra installs transformers")
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

    out = tmp_path_factory.mktemp("hf") / "out"
    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32, num_labels=3,
                        id2label={0: "neg", 1: "neu", 2: "pos"}, label2id={"neg": 0, "neu": 1, "pos": 2})
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    data = [{"input_ids": torch.randint(0, 50, (8,), generator=g), "labels": i % 3} for i in range(64)]
    args = TrainingArguments(output_dir=str(out), max_steps=8, per_device_train_batch_size=8, learning_rate=3e-4,
                             warmup_steps=2, logging_steps=1, save_steps=4, report_to=[], use_cpu=True,
                             max_grad_norm=0.5, disable_tqdm=True)
    trainer = Trainer(model=BertForSequenceClassification(config), args=args, train_dataset=data)
    result = trainer.train()
    trainer.save_metrics("train", result.metrics)
    trainer.save_model()
    trainer.save_state()
    assert transformers.__version__ and (out / "training_args.bin").is_file()
    return out, args


def test_training_args_written_by_trainer_are_read_as_settings(hf_output):
    out, args = hf_output
    for path in [out / "training_args.bin", *sorted(out.glob("checkpoint-*/training_args.bin"))]:
        [chunk] = list(read_training_args(path, 0))
        doc = chunk.configs["training_args.bin"]
        assert not chunk.issues
        assert (doc["max_grad_norm"], doc["learning_rate"], doc["warmup_steps"], doc["fp16"]) == (
            args.max_grad_norm, args.learning_rate, args.warmup_steps, args.fp16)
        assert doc["lr_scheduler_type"] == "linear"  # an Enum member, as its value


def test_training_args_in_the_legacy_torch_format_are_read(hf_output, tmp_path):
    import torch

    _, args = hf_output
    path = tmp_path / "training_args.bin"
    torch.save(args, path, _use_new_zipfile_serialization=False)
    [chunk] = list(read_training_args(path, 0))
    assert chunk.configs["training_args.bin"]["max_grad_norm"] == args.max_grad_norm


def test_a_real_hf_output_folder_is_judged_not_inconclusive_and_its_class_count_is_the_heads(hf_output, tmp_path):
    from forensics.cli import main

    out, _ = hf_output
    db = tmp_path / "f.duckdb"
    assert main(["analyze", str(out), "--db", str(db), "--json"]) in (0, 1)
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        kinds = {k for (k,) in con.execute("SELECT DISTINCT kind FROM ingest_issues").fetchall()}
        verdict = con.execute("SELECT verdict FROM analyses").fetchone()
        configs = dict(con.execute("SELECT key, value FROM configs WHERE key IN ('num_labels', 'max_grad_norm')")
                       .fetchall())
    finally:
        con.close()
    assert "needs_pickle" not in kinds and "settings_unread" not in kinds
    assert verdict is not None and verdict[0] != "inconclusive"
    assert float(configs["max_grad_norm"]) == 0.5 and int(configs["num_labels"]) == 3


def test_format_table_claims_every_copy_in_one_group():
    root = format_for(PurePosixPath("trainer_state.json"))
    copy = format_for(PurePosixPath("checkpoint-500/trainer_state.json"))
    assert root.name == copy.name == "hf_trainer_state"
    assert root.group(PurePosixPath("trainer_state.json")) == copy.group(PurePosixPath("checkpoint-500/trainer_state.json"))
    assert root.dedupe_across_sources and not root.resumable
    assert format_for(PurePosixPath("checkpoint-500/training_args.bin")).name == "hf_training_args"


# -- long files: read entry by entry, in chunks ------------------------------------------------------------


def _long_state(n: int) -> TrainerState:
    history = [{"epoch": i / 50, "grad_norm": 0.5 + i % 7, "learning_rate": 1e-4, "loss": 3.0 - i / n, "step": i}
               for i in range(1, n + 1)]
    history[n // 2]["loss"] = float("nan")
    return TrainerState(global_step=n, max_steps=n, logging_steps=1, log_history=history)


def _expected(doc: dict, start: int = 0) -> list[tuple]:
    return [(k, e["step"], v, i) for i, e in enumerate(doc["log_history"][start:], start)
            for k, v in e.items() if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool)]


def _rows(chunks) -> list[tuple]:
    return [(t, s, v, p) for c in chunks if c.scalars is not None
            for t, s, v, p in c.scalars.select("tag", "step", "value", "position").iter_rows()]


def _same(a: list[tuple], b: list[tuple]) -> bool:
    return len(a) == len(b) and all(x[:2] == y[:2] and x[3] == y[3] and (x[2] == y[2] or (math.isnan(x[2])
                                    and math.isnan(y[2]))) for x, y in zip(a, b))


@pytest.mark.parametrize("start", [0, 23, 70])
def test_long_state_read_in_chunks_equals_the_whole_document(tmp_path, monkeypatch, start):
    monkeypatch.setattr(hf_trainer, "CHUNK_ENTRIES", 7)  # 70 entries: 10 chunks (a real file: 50,000 per chunk)
    path = tmp_path / "trainer_state.json"
    _long_state(70).save_to_json(path)
    doc = json.loads(path.read_text())
    chunks = list(read_trainer_state(path, start))
    assert _same(_rows(chunks), _expected(doc, start))
    ends = [c.end for c in chunks]
    assert ends == sorted(ends) and ends[-1] == 70 and all(c.issues == [] for c in chunks)
    assert (chunks[-1].configs.get("trainer_state", {}).get("global_step") == 70) == (start < 70)
    assert all(not c.configs for c in chunks[:-1])  # the fields once, with the last chunk


@settings(deadline=None, max_examples=60)
@given(cut=st.integers(0, 4_000))
def test_a_state_cut_anywhere_keeps_exactly_the_entries_complete_before_the_cut(tmp_path_factory, cut):
    path = tmp_path_factory.mktemp("cut") / "trainer_state.json"
    _long_state(12).save_to_json(path)
    text = path.read_text()
    cut = min(cut, len(text) - 2)
    path.write_text(text[:cut])
    whole = json.loads(text)
    complete = 0  # entries whose closing brace lies before the cut
    decoder, pos = json.JSONDecoder(), text.index("[", text.index('"log_history"')) + 1
    for _ in whole["log_history"]:
        pos = text.index("{", pos)
        _, pos = decoder.raw_decode(text, pos)
        complete += pos <= cut
    chunks = list(read_trainer_state(path, 0))
    issues = [i for c in chunks for i in c.issues]
    assert len(issues) == 1 and issues[0].kind in ("truncated", "garbled", "empty", "not_this_format")
    head = {"log_history": whole["log_history"][:complete]}
    assert _same(_rows(chunks), _expected(head))
    assert not any(c.configs for c in chunks)  # a damaged file's fields are not kept


@pytest.mark.parametrize("deep", [
    '{"loss": ' + "[" * 5000 + "]" * 5000 + ', "step": 99}',  # past the parser's recursion
    '{"loss": ' + "[" * 150 + "]" * 150 + ', "step": 99}',  # parsed, past the 100 levels a document may have
    '{"loss": ' + "[{\"a]}\\\"\": " * 3000 + "0" + "}]" * 3000 + ', "step": 99}',  # brackets inside strings
])
def test_a_deep_entry_is_skipped_alone_and_the_entries_after_it_are_read(tmp_path, deep):
    """A log_history entry nested past the limit stopped the reading there: the well-formed entries after it were
    lost (and the file's fields). Now that entry alone is skipped and named; the others, before and after it, and
    the fields are read as if it were not there."""
    path = tmp_path / "trainer_state.json"
    _long_state(5).save_to_json(path)
    text = path.read_text()
    at = text.index("{", text.index('"log_history"'))
    at = text.index("{", at + 1)  # before the second entry
    path.write_text(text[:at] + deep + ",\n" + text[at:])
    [chunk] = list(read_trainer_state(path, 0))
    assert [(i.position, i.kind) for i in chunk.issues] == [(1, "too_large")]
    assert "log_history[1]" in chunk.issues[0].detail and "deeper" in chunk.issues[0].detail
    assert chunk.end == 6 and set(chunk.scalars["position"].to_list()) == {0, 2, 3, 4, 5}
    plain = tmp_path / "plain" / "trainer_state.json"
    plain.parent.mkdir()
    _long_state(5).save_to_json(plain)
    [expected] = list(read_trainer_state(plain, 0))
    moved = [(t, s, v, p - (p > 1)) for t, s, v, p in _rows([chunk])]  # the positions as if it were not there
    assert _same(moved, _rows([expected])) and moved
    assert chunk.configs == expected.configs and chunk.configs
    [again] = list(read_trainer_state(path, 2))  # a resume past it does not name it again
    assert again.issues == [] and set(again.scalars["position"].to_list()) == {2, 3, 4, 5}


def test_a_deep_value_that_never_closes_is_the_files_damage(tmp_path):
    path = tmp_path / "trainer_state.json"
    _long_state(3).save_to_json(path)
    text = path.read_text()
    at = text.index("{", text.index("{", text.index('"log_history"')) + 1)
    path.write_text(text[:at] + '{"loss": ' + "[" * 5000 + ' "a]]]')
    [chunk] = list(read_trainer_state(path, 0))
    assert [i.kind for i in chunk.issues] == ["too_large"] and "kept the 1 complete" in chunk.issues[0].detail
    assert set(chunk.scalars["position"].to_list()) == {0}


def test_a_classifiers_config_gives_its_label_count_and_a_language_models_does_not(tmp_path):
    pytest.importorskip("transformers", reason="the test extra installs transformers")
    from transformers import GPT2Config

    from ingest.configs import read_config

    classifier = GPT2Config(vocab_size=50, n_layer=1, num_labels=4, architectures=["GPT2ForSequenceClassification"])
    classifier.save_pretrained(tmp_path / "clf")
    doc = json.loads((tmp_path / "clf" / "config.json").read_text())
    assert "num_labels" not in doc and len(doc["id2label"]) == 4  # the premise: save_pretrained writes id2label only
    [chunk] = list(read_config(tmp_path / "clf" / "config.json"))
    assert chunk.configs["config.json"]["num_labels"] == 4
    lm = GPT2Config(vocab_size=50, n_layer=1, architectures=["GPT2LMHeadModel"])
    lm.id2label = {i: f"LABEL_{i}" for i in range(3)}  # HF's default names, not the head's classes
    lm.save_pretrained(tmp_path / "lm")
    assert "id2label" in json.loads((tmp_path / "lm" / "config.json").read_text())  # the premise
    [chunk] = list(read_config(tmp_path / "lm" / "config.json"))
    assert "num_labels" not in chunk.configs["config.json"]


BIG = "1" + "0" * 4999  # more digits than Python's int() converts by default (4,300)


@pytest.mark.parametrize("step", [str(2**63), str(2**64), str(-(2**63) - 1), BIG])
def test_a_step_past_64_bits_skips_its_entry_and_names_it(tmp_path, step):
    """A step of 2**63, 2**64 or 5,000 digits raised (the frame's Int64 overflowed, or int() refused the digits):
    the run failed and, under watch, the good logs beside it were never stored."""
    path = tmp_path / "trainer_state.json"
    path.write_text('{"global_step": 3, "log_history": [{"step": 1, "loss": 1.0}, {"step": %s, "loss": 0.5}, '
                    '{"step": 3, "loss": 0.25}]}' % step)
    [chunk] = list(read_trainer_state(path, 0))
    assert chunk.scalars.sort("step")["step"].to_list() == [1, 3]
    [issue] = chunk.issues
    assert issue.kind == "out_of_range" and issue.position == 1
    assert (step if len(step) < 30 else "5,000 digits") in issue.detail


@pytest.mark.parametrize("value, stored", [(str(10**400), math.inf), ("-" + str(10**400), -math.inf), (BIG, math.inf),
                                           (str(2**64), float(2**64))])
def test_an_integer_value_past_float64_is_stored_as_inf_and_named(tmp_path, value, stored):
    """An integer grad_norm of 10**400 raised OverflowError in float(); one of 5,000 digits, ValueError in the
    parser. It is the ±inf it rounds to (as the literal 1e400 is read), and a read problem names it."""
    path = tmp_path / "trainer_state.json"
    path.write_text('{"log_history": [{"step": 1, "loss": 1.0, "grad_norm": %s}, {"step": 2, "loss": 0.5}]}' % value)
    [chunk] = list(read_trainer_state(path, 0))
    rows = chunk.scalars.filter(chunk.scalars["tag"] == "grad_norm")
    assert rows["value"].to_list() == [stored] and rows["step"].to_list() == [1]
    assert [i.kind for i in chunk.issues] == (["out_of_range"] if math.isinf(stored) else [])
    assert len(chunk.scalars) == 3


def test_a_run_with_numbers_past_the_store_is_analysed_with_the_logs_beside_it(tmp_path, capsys):
    """Through the CLI: a trainer_state.json holding a 2**64 step and a 10**400 grad norm beside a good
    TensorBoard log: rc 0, the TensorBoard points stored, both numbers named, and a config value past float64
    kept with its digits."""
    import shutil

    from forensics.cli import main
    from ingest.store import connect
    from tests.paths import REPO

    run = tmp_path / "run"
    shutil.copytree(REPO / "sample_runs" / "runs" / "healthy_mlp" / "train", run / "train")
    (run / "trainer_state.json").write_text(
        '{"max_steps": %d, "log_history": [{"step": %d, "loss": 1.0}, {"step": 2, "loss": 0.5, "grad_norm": %d}]}'
        % (10**400, 2**64, 10**400))
    db = tmp_path / "f.duckdb"
    assert main(["analyze", str(run), "--db", str(db)]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    with connect(db, write=False) as con:
        issues = con.execute("SELECT kind, position FROM ingest_issues WHERE path = 'trainer_state.json' "
                             "ORDER BY position").fetchall()
        tb = con.execute("SELECT count(*) FROM scalars JOIN sources USING (source_id) "
                         "WHERE format = 'tensorboard'").fetchone()[0]
        config = con.execute("SELECT value, value_num FROM configs WHERE key = 'max_steps'").fetchone()
    assert issues == [("out_of_range", 0), ("out_of_range", 1)] and tb > 0
    assert config == (str(10**400), math.inf)


def test_a_number_past_the_store_in_an_early_chunk_is_named_too(tmp_path, monkeypatch):
    monkeypatch.setattr(hf_trainer, "CHUNK_ENTRIES", 2)
    path = tmp_path / "trainer_state.json"
    path.write_text('{"log_history": [{"step": %d, "loss": 1.0}, {"step": 2, "loss": 0.5}, {"step": 3, "loss": 0.4}]}'
                    % 2**64)
    chunks = list(read_trainer_state(path, 0))
    assert len(chunks) == 2 and [i.position for c in chunks for i in c.issues] == [0]
