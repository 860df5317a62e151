"""Histories saved by NumPy (`np.save`, `np.savez`) and by pickle (a Keras History, a dict of lists), as
`ingest.arrays` reads them: every value exact, NaN kept, arrays that are no series skipped and said so, and a
pickle's globals never imported or called."""

import math
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from ingest.arrays import read_arrays
from tests.runwriters import load_run


def _issues(path: Path) -> list[str]:
    return [i.detail for c in read_arrays(path, 0) for i in c.issues]


def test_a_saved_loss_array_is_its_series_with_nan_kept(tmp_path):
    root = tmp_path / "run"
    root.mkdir()
    losses = np.array([2.31, 1.94, 1.52, np.nan, np.nan], dtype=np.float32)
    np.save(root / "train_losses.npy", losses)
    np.save(root / "labels.npy", np.arange(500) % 10)  # a name no history or metric has: not claimed
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.pick("loss") == "train_losses"
    steps, values = run.arrays("loss")
    assert steps.tolist() == [0, 1, 2, 3, 4]
    assert values[:3].tolist() == losses[:3].astype(float).tolist() and np.isnan(values[3:]).all()
    assert "labels" not in run.names()


def test_an_npz_of_a_history_keeps_its_curves_and_steps_and_skips_other_arrays(tmp_path):
    """`np.savez` of a training loss per step, a validation loss as `[[step, value], ...]` every 100 steps, and the
    weights and a batch saved beside them: two series, the others named as skipped."""
    root = tmp_path / "run"
    root.mkdir()
    train = np.linspace(3.0, 0.5, 300).reshape(-1, 1)  # a column, as `np.array(losses)[:, None]` saves it
    val = np.column_stack([np.arange(0, 300, 100), [3.1, 1.2, 0.9]])
    np.savez(root / "train_histories.npz", losses_node=train, val_loss=val, weights=np.ones((16, 16)),
             batch=np.zeros((8, 3, 4, 4)))
    run = load_run(root, tmp_path / "f.duckdb")
    steps, values = run.arrays("loss")
    assert steps.size == 300 and values[0] == 3.0 and values[-1] == 0.5
    vsteps, vvalues = run.arrays("val_loss")
    assert vsteps.tolist() == [0, 100, 200] and vvalues.tolist() == [3.1, 1.2, 0.9]
    skipped = _issues(root / "train_histories.npz")
    assert any("`weights` has shape (16, 16)" in m for m in skipped)
    assert any("`batch` has shape (8, 3, 4, 4)" in m for m in skipped)


def test_an_array_of_python_objects_is_refused_not_unpickled(tmp_path):
    path = tmp_path / "losses.npy"
    np.save(path, np.array([{"loss": 1.0}, {"loss": 0.5}], dtype=object), allow_pickle=True)
    [chunk] = list(read_arrays(path, 0))
    assert chunk.scalars is None and "holds Python objects" in chunk.issues[0].detail


def test_a_cut_array_is_a_read_problem_not_a_traceback(tmp_path):
    path = tmp_path / "loss.npy"
    np.save(path, np.linspace(1, 0, 1000))
    path.write_bytes(path.read_bytes()[:900])
    [chunk] = list(read_arrays(path, 0))
    assert chunk.scalars is None and "ends before its 1,000 values" in chunk.issues[0].detail


def test_a_pickled_keras_history_is_read_with_its_model_and_numpy_scalars_inert(tmp_path):
    """Keras' own History, pickled whole after `fit` (its model inside), and its `history` dict pickled alone
    with NumPy scalars in it, as `pickle.dump(history.history, f)` writes them from TF's float32 logs."""
    os.environ.setdefault("KERAS_BACKEND", "torch")
    keras = pytest.importorskip("keras", reason="the test extra installs keras")
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    x = np.random.default_rng(0).random((32, 3), dtype=np.float32)
    history = model.fit(x, x[:, :1], epochs=3, validation_split=0.25, verbose=0)
    root = tmp_path / "run"
    (root / "models").mkdir(parents=True)
    with (root / "models" / "model_history.pkl").open("wb") as f:
        pickle.dump(history, f)
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.arrays("loss")[1].tolist() == history.history["loss"]
    assert run.arrays("val_loss")[1].tolist() == history.history["val_loss"]

    scalars = {"loss": [np.float32(4.7124), np.float32("nan")], "val_loss": [np.float64(4.5453), np.float64("inf")]}
    other = tmp_path / "other"
    other.mkdir()
    with (other / "trainHistoryDict.pickle").open("wb") as f:
        pickle.dump(scalars, f)
    run = load_run(other, tmp_path / "g.duckdb")
    loss = run.arrays("loss")[1]
    assert loss[0] == float(np.float32(4.7124)) and math.isnan(loss[1])
    assert run.arrays("val_loss")[1].tolist() == [4.5453, math.inf]


class _Payload:
    def __reduce__(self):
        return (os.system, (f"touch {_MARKER}",))


_MARKER = Path("/tmp") / f"forensics-arrays-{os.getpid()}"


def test_a_pickle_that_would_run_code_runs_nothing(tmp_path):
    path = tmp_path / "history.pkl"
    with path.open("wb") as f:
        pickle.dump({"loss": [1.0, 0.5, 0.25], "hook": _Payload()}, f)
    [chunk] = list(read_arrays(path, 0))
    assert not _MARKER.exists()
    assert chunk.scalars is not None and chunk.scalars["value"].to_list() == [1.0, 0.5, 0.25]


def test_an_array_or_pickle_named_for_no_history_is_not_claimed():
    from pathlib import PurePosixPath

    from ingest.formats import format_for

    assert format_for(PurePosixPath("cache/dataset.pkl")) is None
    assert format_for(PurePosixPath("vocab.pickle")) is None
    assert format_for(PurePosixPath("data/img_0001.npy")) is None
    assert format_for(PurePosixPath("out/trainHistoryDict.pkl")).name == "arrays"
    assert format_for(PurePosixPath("val_acc.npy")).name == "arrays"
