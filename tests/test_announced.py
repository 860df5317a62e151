"""What a console log announces in words (`ingest.announcements`): the grammar on its own, then logs printed by small
real training programs (a torch loop that prints these messages as a user's script does, the HF Trainer's own resume
message) read through the real ingest path, and the detectors that own each event kind."""

from __future__ import annotations

import argparse
import logging

import numpy as np
import polars as pl
import pytest

from forensics.judge.detectors import MaskedNonfinite, NanLoss, ResumedRun
from ingest import announcements
from ingest.announcements import NONFINITE_GRAD, NONFINITE_LOSS, PHRASES, RESUME, TRAIN_END, read
from tests.paths import SHARED
from tests.runwriters import hf_console, load_run

torch = pytest.importorskip("torch")


# -- the grammar -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("phrase", PHRASES, ids=lambda p: p.name)
def test_each_phrase_reads_its_example_and_the_bulk_filter_keeps_it(phrase):
    said = read(phrase.example)
    assert said is not None and said.kind == phrase.kind and said.phrase == phrase.name
    assert pl.Series([phrase.example]).str.contains(announcements.HINT).item()


@pytest.mark.parametrize("line, kind, ends, skips", [
    ("nan loss caught... printing graph and stopping", NONFINITE_LOSS, True, False),
    ("WARNING: non-finite loss, ending training  tensor([nan, nan, nan], device='cuda:0')", NONFINITE_LOSS, True, False),
    ("loss became inf", NONFINITE_LOSS, False, False),
    ("FloatingPointError: Loss became infinite or NaN at iteration=5!", NONFINITE_LOSS, True, False),
    ("Found inf or nan in gradients, skipping step", NONFINITE_GRAD, False, True),
])
def test_what_a_nonfinite_line_says_of_the_run(line, kind, ends, skips):
    said = read(line)
    assert (said.kind, said.ends, said.skips) == (kind, ends, skips)


@pytest.mark.parametrize("line, counter, at", [
    ("Resume training with (gpu(0),gpu(1)) from epoch 149", "epoch", 149),
    ("Resuming from ./checkpoints/checkpoint_0705000.pt", "step", 705000),
    ("[Checkpoint] resumed from ./checkpoints/latest.pt at step 47700", "step", 47700),
    ("Resume training from runs/fold_0/checkpoint/0.8354_best_metric.pth @ 9", None, 9),
    ("  Resuming training from checkpoint with epoch 0 and global step 5", "step", 5),  # the finer counter
    ("Resume Training from : /models/model.ckpt-0", "step", 0),
    ("🔄 从checkpoint恢复训练: checkpoints/checkpoint_epoch_11.pt", "epoch", 11),  # the same said in Chinese
])
def test_the_counter_a_resume_starts_from(line, counter, at):
    said = read(line)
    assert said.kind == RESUME and (said.counter, said.at) == (counter, at)


def _help_text() -> str:
    """argparse's own help of a training script's options that name the events."""
    p = argparse.ArgumentParser(prog="train.py")
    p.add_argument("--resume", metavar="PATH", help="resume from checkpoint")
    p.add_argument("--skip-nan-loss", action="store_true", help="skip batches with nan loss instead of stopping")
    p.add_argument("--stop-on-nan", action="store_true", help="stop training if the loss is nan")
    return p.format_help()


def test_settings_help_text_code_and_negations_announce_nothing():
    yaml = pytest.importorskip("yaml")
    settings = {"nan_to_num": True, "skip_nan": True, "resume_from_checkpoint": None, "detect_anomaly": False}
    lines = [*_help_text().splitlines(), *yaml.safe_dump(settings).splitlines(),
             str(argparse.Namespace(resume="ckpt.pth", skip_nan_loss=True, lr=0.1)),
             "    raise FloatingPointError(f\"Loss became infinite or NaN at iteration={self.iter}!\")",
             "=> no checkpoint found at 'ckpt.pth', not resuming", "No checkpoint found, not resuming training",
             "no model found at path ckpt.pth, starting the training from scratch", "val loss is nan",
             "Warning: NaN or Inf found in input tensor.", "Loading checkpoint shards: 100%|##| 2/2 [00:01<00:00]",
             "未找到checkpoint，从头开始训练", "无法恢复训练: checkpoints/last.pt"]  # not found, training from scratch
    assert [line for line in lines if read(line)] == []


# -- logs printed by real training loops ---------------------------------------------------------------------

def _regression(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 4, generator=g)
    return x, x @ torch.tensor([1.0, -2.0, 0.5, 3.0]) + 0.1 * torch.randn(64, generator=g)


def _train(log, model, opt, steps, *, first=0, poisoned=(), nan_message=None, stop=False, epoch=0):
    """A user's loop: one batch a step, its loss printed as `epoch E step S loss V`; a batch in `poisoned` gets a NaN
    input (a corrupt sample), and the loop prints `nan_message` and skips it (or stops, with `stop`)."""
    x, y = _regression()
    for s in range(first, first + steps):
        xb, yb = x[(s * 8) % 64:(s * 8) % 64 + 8].clone(), y[(s * 8) % 64:(s * 8) % 64 + 8]
        if s in poisoned:
            xb[0, 0] = float("nan")
        loss = torch.nn.functional.mse_loss(model(xb).squeeze(-1), yb)
        if not torch.isfinite(loss):
            print(nan_message, file=log)
            if stop:
                return
            continue
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"epoch {epoch} step {s} loss {loss.item():.4f}", file=log)


def _model():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    return model, torch.optim.SGD(model.parameters(), lr=0.05)


def test_a_nan_the_loop_skips_and_survives_is_masked_not_a_nan_loss(tmp_path):
    (tmp_path / "r").mkdir()
    with open(tmp_path / "r" / "train.log", "w") as log:
        _train(log, *_model(), 40, poisoned=(12, 13, 30), nan_message="nan loss caught, skipping batch")
    run = load_run(tmp_path / "r", tmp_path / "f.duckdb")
    assert np.isfinite(run.arrays("loss")[1]).all()  # the logged curve never shows the NaN
    assert list(NanLoss().check(run)) == []
    [f] = MaskedNonfinite().check(run)
    assert f.severity == "warning" and f.evidence["steps_masked"] == 3
    assert f.step == 11 and f.step_end == 29  # each after the record before it: the skipped step prints none
    assert f.evidence["announced"] == "nan loss caught, skipping batch" and '"nan loss caught, skipping batch"' in f.summary


def test_a_nan_that_stops_the_loop_is_a_critical_nan_loss(tmp_path):
    (tmp_path / "r").mkdir()
    with open(tmp_path / "r" / "train.log", "w") as log:
        _train(log, *_model(), 40, poisoned=(25,), nan_message="Loss is nan, stopping training", stop=True)
    run = load_run(tmp_path / "r", tmp_path / "f.duckdb")
    assert list(MaskedNonfinite().check(run)) == []
    [f] = NanLoss().check(run)
    assert f.severity == "critical" and f.step == 24 and f.evidence["announced"] == "Loss is nan, stopping training"
    assert f.evidence["last_finite_step"] == 24


def test_skip_lines_the_log_ends_on_are_a_nan_loss(tmp_path):
    """The loop says it skips, but no finite loss is logged after: the run ended on the NaN."""
    (tmp_path / "r").mkdir()
    with open(tmp_path / "r" / "train.log", "w") as log:
        _train(log, *_model(), 20)
        _train(log, *_model(), 3, first=20, poisoned=(20, 21, 22), nan_message="nan loss caught, skipping batch")
    run = load_run(tmp_path / "r", tmp_path / "f.duckdb")
    [f] = NanLoss().check(run)
    assert f.severity == "critical" and f.step == 19 and f.evidence["announcing_lines"] == 3
    assert list(MaskedNonfinite().check(run)) == []


def _epochs(log, model, opt, epochs, ckpt_dir=None):
    """A user's epoch loop: `Epoch: E | Train_loss: V` per epoch, a checkpoint saved after each with torch.save."""
    x, y = _regression()
    for e in epochs:
        loss = torch.nn.functional.mse_loss(model(x).squeeze(-1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"Epoch: {e} | Train_loss: {loss.item():.5f}", file=log)
        if ckpt_dir is not None:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": e}, ckpt_dir / f"epoch_{e}.pth")


def test_a_resume_announced_in_words_with_the_epochs_printed_again(tmp_path):
    root = tmp_path / "r"
    (root / "ckpt").mkdir(parents=True)
    with open(root / "train.log", "w") as log:
        _epochs(log, *_model(), range(1, 7), root / "ckpt")
    model, opt = _model()
    state = torch.load(root / "ckpt" / "epoch_3.pth")
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    with open(root / "train.log", "a") as log:  # the second launch appends to the same log
        print(f"Resume training from {root / 'ckpt' / 'epoch_3.pth'} @ {state['epoch']}", file=log)
        _epochs(log, model, opt, range(4, 9))
    run = load_run(root, tmp_path / "f.duckdb")
    words = [f for f in ResumedRun().check(run) if "announced" in f.evidence]
    [f] = words
    assert f.evidence["printed_again"] and (f.evidence["counter_before"], f.evidence["counter_after"]) == (6, 4)
    assert f.evidence["resumed_from"] == 3 and "Resume training from" in f.summary


def test_a_relaunch_from_the_start_without_words_or_from_step_0_is_no_announced_resume(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    with open(root / "train.log", "w") as log:
        _epochs(log, *_model(), range(1, 6))
        print("Resume training from /models/model.ckpt-0", file=log)  # TF's initial checkpoint: a fresh start
        _epochs(log, *_model(), range(1, 6))
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.announced(RESUME).height == 1
    assert [f for f in ResumedRun().check(run) if "announced" in f.evidence] == []


def _launches_after_the_end(tmp_path, resume: bool):
    """Two launches of one script logging through Python's logging to one file, each ending with `Training complete in
    ...`; the second loads the first's last checkpoint and goes on from the epoch after it (`resume`), or starts over."""
    root = tmp_path / "r"
    (root / "ckpt").mkdir(parents=True)
    log = logging.getLogger("train")
    handler = logging.FileHandler(root / "train.log")  # appends, as a script launched again does
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s : %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        for launch in (0, 1):
            model, opt = _model()
            first = 0
            if launch and resume:
                state = torch.load(root / "ckpt" / "last.pth")
                model.load_state_dict(state["model"])
                opt.load_state_dict(state["opt"])
                first = state["epoch"] + 1
            x, y = _regression()
            for e in range(first, first + 6):
                for b in range(1, 5):
                    loss = torch.nn.functional.mse_loss(model(x[b * 8:b * 8 + 8]).squeeze(-1), y[b * 8:b * 8 + 8])
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    log.info(f"train --- Current batch:{b}/4  loss:[ {loss.item():.8f}]")
                log.info(f"Epoch [{e}]/[{first + 5}] \t Training Phase Loss: {loss.item():.6f}")
                torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": e}, root / "ckpt" / "last.pth")
            log.info("Training complete in 0m 1s")
    finally:
        handler.close()
        log.removeHandler(handler)
    return load_run(root, tmp_path / "f.duckdb")


def test_training_that_goes_on_after_the_log_said_it_was_complete_is_a_resume(tmp_path):
    """The second launch resumed from the first's checkpoint: its epochs go on (6, 7, ...) after `Training complete`."""
    run = _launches_after_the_end(tmp_path, resume=True)
    [f] = [f for f in ResumedRun().check(run) if "announced" in f.evidence]
    assert f.evidence["announced"].endswith("Training complete in 0m 1s")
    assert (f.evidence["counter_before"], f.evidence["counter_after"], f.evidence["counter"]) == (5, 6, "epoch")


def test_a_launch_that_starts_over_after_the_log_said_it_was_complete_is_no_resume(tmp_path):
    run = _launches_after_the_end(tmp_path, resume=False)
    assert run.announced(TRAIN_END).height == 2
    assert list(ResumedRun().check(run)) == []


def test_an_epochs_end_is_not_the_trainings():
    assert read("Epoch 3 training complete, validating") is None
    assert read("2018-01-28 14:41:52,125 INFO    : Training complete in 266m 34s").kind == TRAIN_END


def test_a_resume_that_names_its_checkpoint_without_a_counter(tmp_path):
    """ssd.pytorch's `Resuming training, loading <path>...` before the first record, whose iterations go on from the
    checkpoint's: a resume (the counter is read from the records, the line gives none)."""
    root = tmp_path / "r"
    root.mkdir()
    model, opt = _model()
    with open(root / "train.log", "w") as log:
        _train(log, model, opt, 30)
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, root / "ssd300_VOC_30.pth")
    (root / "train.log").unlink()  # the first launch's log is not kept: this log opens with the resume
    model, opt = _model()
    state = torch.load(root / "ssd300_VOC_30.pth")
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    with open(root / "train.log", "w") as log:
        print(f"Resuming training, loading {root / 'ssd300_VOC_30.pth'}...", file=log)
        _train(log, model, opt, 30, first=30)
    run = load_run(root, tmp_path / "f.duckdb")
    [f] = ResumedRun().check(run)
    assert f.evidence["counter_before"] is None and f.evidence["counter_after"] == 30 and f.evidence["resumed_from"] is None


def test_a_log_that_opens_loading_the_optimizers_state_with_its_counter_started_again(tmp_path):
    """A checkpointer's `Loading optimizer from <checkpoint>` before the first record, the counter starting again
    from 0 (the iteration was not restored): loading the optimizer's state is a resume, never a fresh start or a
    fine-tuning from weights alone; a log that loads the model's weights only announces nothing."""
    root = tmp_path / "r"
    root.mkdir()
    model, opt = _model()
    with open(root / "train.log", "w") as log:
        _train(log, model, opt, 30)
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, root / "model_0000029.pth")
    for what, found in (("model", 0), ("optimizer", 1)):
        model, opt = _model()
        state = torch.load(root / "model_0000029.pth")
        model.load_state_dict(state["model"])
        with open(root / "train.log", "w") as log:
            print(f"[Checkpointer] Loading from {root / 'model_0000029.pth'} ...", file=log)
            if what == "optimizer":
                opt.load_state_dict(state["optimizer"])
                print(f"Loading optimizer from {root / 'model_0000029.pth'} ...", file=log)
            _train(log, model, opt, 30)
        run = load_run(root, tmp_path / f"{what}.duckdb")
        assert len([f for f in ResumedRun().check(run) if "announced" in f.evidence]) == found


def test_help_and_settings_printed_beside_a_healthy_loop_announce_nothing(tmp_path):
    yaml = pytest.importorskip("yaml")
    (tmp_path / "r").mkdir()
    with open(tmp_path / "r" / "train.log", "w") as log:
        print(_help_text(), file=log)
        print(argparse.Namespace(resume=None, skip_nan_loss=True, lr=0.05), file=log)
        print(yaml.safe_dump({"nan_to_num": True, "skip_nan": True, "resume_from_checkpoint": None}), file=log)
        _train(log, *_model(), 40)
    run = load_run(tmp_path / "r", tmp_path / "f.duckdb")
    assert run.announced(NONFINITE_LOSS).height == run.announced(RESUME).height == 0
    assert [f for d in (NanLoss(), MaskedNonfinite(), ResumedRun()) for f in d.check(run)] == []  # no NaN read either


def test_the_hf_trainers_own_resume_message_is_read(tmp_path):
    """transformers' Trainer resumed from its own checkpoint, its console (the logger at INFO, its printed logs) kept
    as a user's `> train.log` keeps it: the resume line it prints is read as one, with the step it resumes from."""
    transformers = pytest.importorskip("transformers")
    from torch.utils.data import Dataset

    class Pairs(Dataset):
        def __init__(self):
            self.x, self.y = _regression()

        def __len__(self):
            return 64

        def __getitem__(self, i):
            return {"x": self.x[i], "labels": self.y[i]}

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 1)

        def forward(self, x, labels=None):
            out = self.lin(x).squeeze(-1)
            return {"loss": torch.nn.functional.mse_loss(out, labels), "logits": out}

    def trainer():
        torch.manual_seed(0)
        args = transformers.TrainingArguments(
            output_dir=str(tmp_path / "out"), max_steps=10, save_steps=5, logging_steps=1, per_device_train_batch_size=8,
            learning_rate=0.01, report_to=[], disable_tqdm=True, use_cpu=True)
        return transformers.Trainer(model=Tiny(), args=args, train_dataset=Pairs())

    root = tmp_path / "r"
    root.mkdir()
    with hf_console(root / "train.log"):
        trainer().train()
        trainer().train(resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-5"))
    run = load_run(root, tmp_path / "f.duckdb")
    said = run.announced(RESUME)
    assert said.height >= 1 and any(w.at == 5 and w.counter == "step" for w in said["said"])
    assert [f for f in ResumedRun().check(run)]


# -- real logs ----------------------------------------------------------------------------------------------------


def _skipping_loop(log, steps, skipped, said="Found inf or nan in gradients, skipping step", stop=False, every=10):
    """A user's loop that checks its gradients before stepping (as an fp16 loop under a GradScaler does) and says
    `said` when they are not finite: a batch in `skipped` carries an Inf input, so its gradients are Inf. It skips the
    step, or with `stop` ends the loop there. Records every `every` steps."""
    model, opt = _model()
    x, y = _regression()
    for s in range(steps):
        xb, yb = x[(s * 8) % 64:(s * 8) % 64 + 8].clone(), y[(s * 8) % 64:(s * 8) % 64 + 8]
        if s in skipped:
            xb[0, 0] = float("inf")
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(xb).squeeze(-1), yb)
        loss.backward()
        if not all(torch.isfinite(p.grad).all() for p in model.parameters()):
            print(said, file=log)
            if stop:
                break
            continue
        opt.step()
        if s % every == 0:
            print(f"step {s} loss {loss.item():.4f}", file=log)


def test_steps_skipped_for_nonfinite_gradients_past_calibration_are_an_amp_overflow(tmp_path):
    from forensics.judge.detectors import AmpOverflow

    (tmp_path / "r").mkdir()
    with open(tmp_path / "r" / "train.log", "w") as log:
        _skipping_loop(log, 600, skipped=set(range(305, 600, 20)))
    run = load_run(tmp_path / "r", tmp_path / "f.duckdb")
    [f] = AmpOverflow().check(run)
    assert f.evidence["skipped_steps"] == 15 and f.step == 300 and "Found inf or nan in gradients" in f.summary


def test_steps_skipped_during_start_up_calibration_are_no_overflow(tmp_path):
    from forensics.judge.detectors import AmpOverflow

    (tmp_path / "r").mkdir()
    with open(tmp_path / "r" / "train.log", "w") as log:
        _skipping_loop(log, 600, skipped={1, 2, 3, 4, 5})
    run = load_run(tmp_path / "r", tmp_path / "f.duckdb")
    assert run.announced(NONFINITE_GRAD).height == 5
    assert list(AmpOverflow().check(run)) == []


@pytest.mark.needs_shared
def test_an_mxnet_log_of_appended_launches_each_announcing_its_resume(tmp_path):
    """Launches appended to one MXNet log, each opening with `Resume training with (gpu(0)) from epoch N`: a launch that
    resumes from an epoch the log had passed prints it again, and the finding quotes its line."""
    run = load_run(SHARED / "wild" / "console" / "c003_mxnet", tmp_path / "f.duckdb")
    words = [f for f in ResumedRun().check(run) if "announced" in f.evidence]
    back = [f for f in words if f.evidence["printed_again"]]
    assert back and all(f.evidence["counter_after"] <= f.evidence["counter_before"] for f in back)
    assert any(f.evidence["resumed_from"] == f.evidence["counter_after"] == 83 for f in back)
    assert all(f.evidence["announced"].startswith("Resume training with (gpu(0") for f in words)


@pytest.mark.needs_shared
def test_a_log_that_opens_with_its_resume_from_a_numbered_checkpoint(tmp_path):
    """`Resuming from ./checkpoints/checkpoint_0705000.pt` before the first record, whose steps start there: the step
    read from the checkpoint's name is where the records go on from."""
    run = load_run(SHARED / "wild" / "console" / "c036_plainprint", tmp_path / "f.duckdb")
    first = next(f for f in ResumedRun().check(run) if "announced" in f.evidence)
    assert first.evidence["counter_before"] is None and first.evidence["resumed_from"] == 705000
    assert first.evidence["counter_after"] == 705000 and first.evidence["counter"] == "step"


@pytest.mark.needs_shared
@pytest.mark.parametrize("run_dir", ["real_runs_test/log_factseg6", "wild/console/c074_allennlp"])
def test_a_writers_warning_about_nan_in_its_input_announces_nothing(tmp_path, run_dir):
    """tensorboardX's `NaN or Inf found in input tensor.` (a histogram's input, not the loss) and apex's `Gradient
    overflow. Skipping step, ... reducing loss scale` (read as the loss scale it sets) are no announcement."""
    run = load_run(SHARED / run_dir, tmp_path / "f.duckdb")
    assert all(run.announced(kind).height == 0 for kind in announcements.KINDS)


def test_nonfinite_gradients_that_stop_the_loop_are_a_nan_loss(tmp_path):
    """A loop that raises on non-finite gradients (fairseq's `FloatingPointError: gradients are Nan/Inf`) ends the run
    there; the same words with the loop going on are skipped steps (amp_overflow's), not a NaN the run ended on."""
    (tmp_path / "r").mkdir()
    with open(tmp_path / "r" / "train.log", "w") as log:
        _skipping_loop(log, 30, {17}, said="FloatingPointError: gradients are Nan/Inf", stop=True, every=1)
    run = load_run(tmp_path / "r", tmp_path / "f.duckdb")
    [f] = NanLoss().check(run)
    assert f.severity == "critical" and f.step == 16 and "non-finite gradient" in f.summary
    assert list(MaskedNonfinite().check(run)) == []


def test_a_checkpoint_loaded_between_stages_of_one_program_is_no_resume_unless_epochs_come_again(tmp_path):
    """`Loaded checkpoint from epoch N` (a weak phrase: a program's next stage, an evaluation load it too) is a resume
    only where the epochs printed after it go back to ones already logged."""
    for again in (False, True):
        root = tmp_path / f"r{again}"
        (root / "ckpt").mkdir(parents=True)
        model, opt = _model()
        with open(root / "train.log", "w") as log:
            _epochs(log, model, opt, range(1, 6), root / "ckpt")
            back = 3 if again else 5
            state = torch.load(root / "ckpt" / f"epoch_{back}.pth")
            model.load_state_dict(state["model"])
            print(f"Loaded checkpoint from epoch {state['epoch']}", file=log)
            _epochs(log, model, opt, range(back + 1, back + 5))
        run = load_run(root, tmp_path / f"f{again}.duckdb")
        assert run.announced(RESUME).height == 1
        words = [f for f in ResumedRun().check(run) if "announced" in f.evidence]
        assert len(words) == int(again)


def test_a_log_that_opens_with_a_loaded_checkpoint_and_its_epoch_resumes_there(tmp_path):
    """PyTorch's ImageNet example resumed: `=> loaded checkpoint '...' (epoch 3)`, then training from epoch 3. The same
    line before an evaluation only (no training record after it) is no resume."""
    root = tmp_path / "r"
    (root / "ckpt").mkdir(parents=True)
    model, opt = _model()
    with open(tmp_path / "first.log", "w") as log:
        _epochs(log, model, opt, range(0, 3), root / "ckpt")
    state = torch.load(root / "ckpt" / "epoch_2.pth")
    model.load_state_dict(state["model"])
    with open(root / "train.log", "w") as log:
        print(f"=> loaded checkpoint '{root / 'ckpt' / 'epoch_2.pth'}' (epoch {state['epoch'] + 1})", file=log)
        _epochs(log, model, opt, range(3, 7))
    [f] = [f for f in ResumedRun().check(load_run(root, tmp_path / "f.duckdb")) if "announced" in f.evidence]
    assert f.evidence["resumed_from"] == f.evidence["counter_after"] == 3 and f.evidence["counter_before"] is None

    evaluation = tmp_path / "e"  # a run folder holding the training's log and, beside it, an evaluation's
    evaluation.mkdir()
    (evaluation / "train.log").write_text((tmp_path / "first.log").read_text())
    with open(evaluation / "eval.log", "w") as log:
        print(f"=> loaded checkpoint '{root / 'ckpt' / 'epoch_2.pth'}' (epoch 3)", file=log)
        x, y = _regression()
        for b in range(8):
            loss = torch.nn.functional.mse_loss(model(x[b * 8:b * 8 + 8]).squeeze(-1), y[b * 8:b * 8 + 8])
            print(f"Test: [{b}/8]\tLoss {loss.item():.4f}", file=log)
    run = load_run(evaluation, tmp_path / "g.duckdb")
    assert run.announced(RESUME).height == 1
    assert [f for f in ResumedRun().check(run) if "announced" in f.evidence] == []


def test_a_script_that_logs_its_scheduler_state_loaded_and_trains_on_is_a_resume(tmp_path):
    """A script's own resume logic, logged with the logging module: `Scheduler state loaded from checkpoint.`, then
    the records go on from the checkpoint's step (nothing steps back, so only the words show it). The same log
    without that line is one process's training and says nothing."""
    from tests.runwriters import log_messages

    def launch(model, opt, sched, steps):
        x, y = _regression()
        out = []
        for s in steps:
            loss = torch.nn.functional.mse_loss(model(x[(s * 8) % 64:(s * 8) % 64 + 8]).squeeze(-1),
                                                y[(s * 8) % 64:(s * 8) % 64 + 8])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            out.append(f"Epoch 1, Global Batch {s}, Training Loss: {loss.item():.4f}")
        return out

    for said, found in ((True, 1), (False, 0)):
        root = tmp_path / f"r{int(said)}"
        root.mkdir()
        model, opt = _model()
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)
        log_messages(root / "training.log", ["No checkpoint found. Starting from scratch."]
                     + launch(model, opt, sched, range(1, 31)))
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict()},
                   tmp_path / "checkpoint.pth")
        model, opt = _model()
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)
        state = torch.load(tmp_path / "checkpoint.pth")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        log_messages(root / "training.log", (["Scheduler state loaded from checkpoint."] if said else [])
                     + launch(model, opt, sched, range(31, 61)))
        run = load_run(root, tmp_path / f"f{int(said)}.duckdb")
        words = [f for f in ResumedRun().check(run) if "announced" in f.evidence]
        assert len(words) == found, [f.summary for f in ResumedRun().check(run)]
