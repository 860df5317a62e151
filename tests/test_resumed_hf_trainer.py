"""resumed_run on runs whose steps do not go back: an HF Trainer resumed from a checkpoint saved without its optimizer
and scheduler (`save_only_model=True`) keeps its step counter but builds its LR schedule anew, from 0 (written by the
real transformers Trainer)."""

from __future__ import annotations

import pytest

from forensics.judge.detectors import ResumedRun
from tests.runwriters import hf_toy, load_run, one_torch_thread

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _trainer(out, max_steps: int):
    torch.manual_seed(0)
    args = transformers.TrainingArguments(
        output_dir=str(out), max_steps=max_steps, save_steps=10, logging_steps=1, per_device_train_batch_size=8,
        learning_rate=0.01, warmup_steps=1, report_to=[], disable_tqdm=True, use_cpu=True, save_only_model=True)
    data, model = hf_toy()
    return transformers.Trainer(model=model, args=args, train_dataset=data)


def test_an_hf_run_resumed_with_a_schedule_built_anew_from_0(tmp_path):
    with one_torch_thread():
        _trainer(tmp_path / "out", 10).train()
        _trainer(tmp_path / "out", 20).train(resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-10"))
    run = load_run(tmp_path / "out" / "checkpoint-20", tmp_path / "f.duckdb")
    [f] = ResumedRun().check(run)
    assert f.step == 11 and f.evidence["lr_after"] == pytest.approx(0.01) and "from 0" in f.summary


def test_one_hf_run_whose_warmup_starts_from_0_is_no_resume(tmp_path):
    with one_torch_thread():
        _trainer(tmp_path / "out", 20).train()
    run = load_run(tmp_path / "out" / "checkpoint-20", tmp_path / "f.duckdb")
    assert list(ResumedRun().check(run)) == []
