"""Small slips a new user met in `analyze`'s words, each on a run written by the real tools: a checkpoint without a
step (`best_model.pth`), one masked step, a checkpoint with more NaN tensors than the evidence lists, code files
beside the logs, and a NaN loss far from the first non-finite checkpoint."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from forensics.cli import main
from tests.runwriters import hf_history, write_tb, write_trainer_state

torch = pytest.importorskip("torch")


def analyze(run, tmp_path, capsys, *extra: str) -> str:
    assert main(["analyze", str(run), "--db", str(tmp_path / "f.duckdb"), *extra]) == 0
    return capsys.readouterr().out


def best_model_run(root):
    """A console log whose loss turns NaN, a finite `best_model.pth` and a non-finite `last_model.pth` (neither
    names its step), the training script and an entry point beside them."""
    root.mkdir()
    (root / "train.log").write_text("".join(f"step {i} loss {2.0 / i ** 0.3 if i < 60 else math.nan:.4f}\n"
                                            for i in range(1, 81)))
    torch.save({"w": torch.tensor([1.0, 2.0])}, root / "best_model.pth")
    torch.save({"w": torch.tensor([1.0, float("nan")])}, root / "last_model.pth")
    (root / "train.py").write_text("print('training')\n")
    (root / "forensics_entry.py").write_text("def build_model(config):\n    raise NotImplementedError\n")
    return root


def test_a_checkpoint_without_a_step_reads_as_such(tmp_path, capsys):
    run = best_model_run(tmp_path / "r")
    text = analyze(run, tmp_path, capsys, "-v")
    markdown = analyze(run, tmp_path, capsys, "--markdown", "-").replace("\\_", "_")
    for out in (text, markdown):
        assert "step None" not in out and "(step none)" not in out.lower()
        assert "r:- " not in out and "at step -" not in out and "| - |" not in out
        assert "holds 1 NaN/Inf value in 1 tensor" in out  # not "1 NaN/Inf values"
        assert "last_model.pth (no step: its place in the run is unknown)" in out
    assert "r (no step) nonfinite_weights [critical" in text
    assert "### `nonfinite_weights` (no step)" in markdown and "| no step | `nonfinite_weights` |" in markdown


def test_no_advice_to_replay_a_run_without_a_checkpoint_to_start_from(tmp_path, capsys):
    run = best_model_run(tmp_path / "r")
    out = json.loads(analyze(run, tmp_path, capsys, "--json"))
    checks = {f["kind"]: " ".join(f["checks"]) for f in out["findings"]}
    assert set(checks) == {"nan_loss", "nonfinite_weights"}
    for kind, said in checks.items():
        assert "replay the step" not in said and "the replay starting point" not in said, kind
    assert "no finite checkpoint before it to replay from" in checks["nan_loss"]
    # a run with a finite checkpoint before the onset keeps the advice
    ok = tmp_path / "ok"
    write_tb(ok, {"train/loss": (np.arange(1, 41), np.r_[np.linspace(2, 1, 30), [np.nan] * 10])})
    (ok / "checkpoints").mkdir()
    torch.save({"model": {"w": torch.ones(3)}, "step": 20}, ok / "checkpoints" / "step_20.pt")
    torch.save({"model": {"w": torch.full((3,), math.nan)}, "step": 40}, ok / "checkpoints" / "step_40.pt")
    out = json.loads(analyze(ok, tmp_path, capsys, "--json"))
    checks = {f["kind"]: " ".join(f["checks"]) for f in out["findings"]}
    assert "replay the step" in checks["nan_loss"] and "the replay starting point" in checks["nonfinite_weights"]


def test_code_beside_the_logs_is_listed_as_code_not_as_unread(tmp_path, capsys):
    run = best_model_run(tmp_path / "r")
    text = analyze(run, tmp_path, capsys, "-v")
    assert not any(line.startswith("not read") and ".py" in line for line in text.splitlines())
    assert "code, not logs (analyze never runs it; forensics replay and probe import forensics_entry.py): " \
           "forensics_entry.py, train.py" in text
    out = json.loads(analyze(run, tmp_path, capsys, "--json"))
    assert out["code_files"] == ["forensics_entry.py", "train.py"] and out["unknown_files"] == []


def test_one_masked_step_is_one_such_step(tmp_path, capsys):
    steps = np.arange(10, 310, 10)
    loss = np.linspace(2.0, 0.5, steps.size)
    norm = np.full(steps.size, 0.8)
    norm[17] = math.nan  # one logged step: a NaN grad norm beside the filter's finite loss, then back
    run = write_trainer_state(tmp_path / "hf", hf_history(steps, loss, norm))
    out = json.loads(analyze(run, tmp_path, capsys, "--json"))
    [f] = [f for f in out["findings"] if f["kind"] == "masked_nonfinite"]
    assert "(1 such step)" in f["summary"] and "such steps" not in f["summary"]


def test_a_tensor_list_cut_short_says_how_many_it_stands_for(tmp_path, capsys):
    run = write_tb(tmp_path / "many", {"train/loss": (np.arange(1, 41), np.r_[np.linspace(2, 1, 30), [np.nan] * 10])})
    (run / "checkpoints").mkdir()
    torch.save({"model": {f"layer{i}.weight": torch.ones(2) for i in range(25)}, "step": 20},
               run / "checkpoints" / "step_20.pt")
    torch.save({"model": {f"layer{i}.weight": torch.full((2,), math.nan) for i in range(25)}, "step": 40},
               run / "checkpoints" / "step_40.pt")
    markdown = analyze(run, tmp_path, capsys, "--markdown", "-")
    line = next(t for t in markdown.splitlines() if t.startswith("Evidence: `checkpoint`"))
    assert "… (25 in all)" in line and "(20 in all)" not in line and "(12 in all)" not in line
    text = analyze(run, tmp_path, capsys, "-v")
    assert "… (25 in all)" in next(t for t in text.splitlines() if "evidence: checkpoint=" in t)


def test_a_nan_loss_and_the_first_nonfinite_checkpoint_after_it_are_one_event(tmp_path, capsys):
    """The loss turns NaN at step 45; checkpoints every 40 steps: 40 finite, 80 non-finite. The weights turned
    non-finite somewhere in 41-80, which holds the NaN onset: one incident, one event (it was two, 35 steps apart)."""
    run = write_tb(tmp_path / "r", {"train/loss": (np.arange(1, 101), np.r_[np.linspace(2, 1, 44), [np.nan] * 56])})
    (run / "checkpoints").mkdir()
    torch.save({"model": {"w": torch.ones(3)}, "step": 40}, run / "checkpoints" / "step_40.pt")
    torch.save({"model": {"w": torch.full((3,), math.nan)}, "step": 80}, run / "checkpoints" / "step_80.pt")
    out = json.loads(analyze(run, tmp_path, capsys, "--json"))
    events = {f["kind"]: f["event"] for f in out["findings"]}
    assert events["nan_loss"] == events["nonfinite_weights"]
    # a checkpoint whose last finite predecessor comes after the onset did not turn non-finite with it
    late = write_tb(tmp_path / "late", {"train/loss": (np.arange(1, 101), np.r_[np.linspace(2, 1, 44), [np.nan] * 56])})
    (late / "checkpoints").mkdir()
    torch.save({"model": {"w": torch.ones(3)}, "step": 60}, late / "checkpoints" / "step_60.pt")
    torch.save({"model": {"w": torch.full((3,), math.nan)}, "step": 90}, late / "checkpoints" / "step_90.pt")
    out = json.loads(analyze(late, tmp_path, capsys, "--json"))
    events = {f["kind"]: f["event"] for f in out["findings"]}
    assert events["nan_loss"] != events["nonfinite_weights"]
