"""initial_loss_mismatch on real TensorBoard event files with a config naming the class count."""

import math

import numpy as np
import pytest

from forensics.judge.detectors import InitialLossMismatch
from forensics.judge.detectors.base import missing_reason
from tests.runwriters import curve, load_run, write_tb



def test_fires_when_the_first_loss_is_far_above_log_c(tmp_path):
    steps, loss = curve(start=20.0, floor=0.3)
    run = load_run(write_tb(tmp_path / "r", {"train/loss": (steps, loss)}, config={"num_classes": 10}),
                   tmp_path / "f.duckdb")
    [f] = InitialLossMismatch().check(run)
    assert f.kind == "initial_loss_mismatch" and f.step == 0
    assert f.evidence["classes"] == 10 and f.evidence["direction"] == "high"
    assert math.isclose(f.evidence["ratio"], loss[0] / math.log(10), rel_tol=1e-6)


def test_fires_low_only_at_the_first_step_without_pretrained_weights(tmp_path):
    steps, loss = curve(start=0.3, floor=0.05)  # far below log(10) = 2.3 at step 0: labels leak
    run = load_run(write_tb(tmp_path / "a", {"loss": (steps, loss)}, config={"num_classes": 10}), tmp_path / "a.duckdb")
    [f] = InitialLossMismatch().check(run)
    assert f.evidence["direction"] == "low" and f.step == 0
    tuned = load_run(write_tb(tmp_path / "b", {"loss": (steps, loss)},
                              config={"num_classes": 10, "model_name_or_path": "bert-base-uncased"}), tmp_path / "b.duckdb")
    assert list(InitialLossMismatch().check(tuned)) == []  # a fine-tuned model rightly starts low
    late = load_run(write_tb(tmp_path / "c", {"loss": (steps + 500, loss)}, config={"num_classes": 10}),
                    tmp_path / "c.duckdb")
    assert list(InitialLossMismatch().check(late)) == []  # a mean over 500 steps may just be learning


def test_loss_near_log_c_is_silent_and_unknown_c_is_skipped(tmp_path):
    steps, loss = curve(start=math.log(10) * 1.05, floor=0.3)
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}, config={"num_classes": 10}), tmp_path / "f.duckdb")
    assert list(InitialLossMismatch().check(run)) == []
    bare = load_run(write_tb(tmp_path / "s", {"loss": (steps, np.asarray(loss) * 10)}), tmp_path / "s.duckdb")
    assert "class count" in missing_reason(InitialLossMismatch(), bare)


def test_a_first_window_mean_of_a_climbing_loss_says_nothing_of_init(tmp_path):
    """Logged every 10 steps, the first point is a mean over steps 1-10. With an LR too high the loss climbs
    from log(C) inside that window and goes on climbing: 5× log(C) at step 10 is growth, not the loss at init.
    The same mean followed by a falling loss (a bad final-layer init) still counts: its mean understates init."""
    steps = np.arange(10, 310, 10)
    rng = np.random.default_rng(0)
    climbing = 5 * math.log(10) * np.exp(steps / 150) * (1 + rng.normal(0, 0.1, steps.size))
    run = load_run(write_tb(tmp_path / "a", {"loss": (steps, climbing)}, config={"num_classes": 10}), tmp_path / "a.duckdb")
    assert list(InitialLossMismatch().check(run)) == []
    _, falling = curve(start=5 * math.log(10), floor=0.3, n=steps.size)
    run = load_run(write_tb(tmp_path / "b", {"loss": (steps, falling)}, config={"num_classes": 10}), tmp_path / "b.duckdb")
    [f] = InitialLossMismatch().check(run)
    assert f.step == 10 and f.evidence["first_value_may_be_window_mean"]


def test_a_first_record_late_in_the_run_speaks_only_of_a_high_start(tmp_path):
    """A first value logged 1000 steps into a 10,900-step run (a mean over a tenth of it, as HF logs with
    logging_steps=1000) is no loss at init when it is low: the model may have learned. When it is high and the loss
    falls after it, the start was at least that high (a logged value of a falling loss is at most its start)."""
    _, falling = curve(start=5 * math.log(10), floor=0.3, n=100, tau=3000)
    late = np.arange(1, 101) * 100 + 900  # steps 1000, 1100, ..., 10,900
    run = load_run(write_tb(tmp_path / "a", {"loss": (late, falling)}, config={"num_classes": 10}), tmp_path / "a.duckdb")
    [f] = InitialLossMismatch().check(run)
    assert f.step == 1000 and f.evidence["direction"] == "high" and not f.evidence["logged_early"]
    assert "into the run" in f.summary
    _, low = curve(start=0.3, floor=0.05, n=100, tau=3000)
    run = load_run(write_tb(tmp_path / "c", {"loss": (late, low)}, config={"num_classes": 10}), tmp_path / "c.duckdb")
    assert list(InitialLossMismatch().check(run)) == []
    early = np.arange(1, 101) * 100  # steps 100, 200, ..., 10,000
    run = load_run(write_tb(tmp_path / "b", {"loss": (early, falling)}, config={"num_classes": 10}), tmp_path / "b.duckdb")
    [f] = InitialLossMismatch().check(run)
    assert f.step == 100 and f.evidence["run_last_step"] == 10_000 and f.evidence["logged_early"]


def test_hf_trainer_s_first_record_is_called_a_mean(tmp_path):
    """HF's Trainer logs the mean of the first `logging_steps` steps: the summary says so."""
    from tests.runwriters import hf_history, write_trainer_state

    steps = np.arange(10, 1010, 10)
    _, falling = curve(start=5 * math.log(10), floor=0.3, n=steps.size)
    run = load_run(write_trainer_state(tmp_path / "r", hf_history(steps, falling, np.ones(steps.size)),
                                       config={"num_classes": 10}), tmp_path / "f.duckdb")
    [f] = InitialLossMismatch().check(run)
    assert f.step == 10 and f.evidence["first_value_is_window_mean"]
    assert "the mean of steps 1-10" in f.summary and f"{falling[0]:.4g} at step 10" in f.summary


def test_the_class_count_comes_from_the_labels_a_classifier_declares_before_its_vocabulary(tmp_path):
    """HF's config.json of a classifier names its labels (`id2label`) and often a tokenizer's `vocab_size` too: the
    softmax the loss reads is over the labels. HF writes a two-entry map of default names into every config, a
    language model's too: beside a language-model head that map is not a class count, the vocabulary is."""
    from forensics.judge.detectors.base import class_count

    labels = {str(i): name for i, name in enumerate(["AK", "BCC", "BKL", "DF", "MEL", "NV", "SCC", "VASC"])}
    steps, loss = curve(start=2.5 * math.log(8), floor=0.3)  # 2.5 x log(8), but 0.5 x log(30522)
    config = {"architectures": ["BertForSequenceClassification"], "id2label": labels, "vocab_size": 30522}
    run = load_run(write_tb(tmp_path / "a", {"loss": (steps, loss)}, config=config), tmp_path / "a.duckdb")
    count, source = class_count(run)  # the config reader may already have derived num_labels from id2label
    assert count == 8 and source in ("id2label", "num_labels")
    [f] = InitialLossMismatch().check(run)
    assert f.evidence["classes"] == 8 and f.evidence["classes_key"] in ("id2label", "num_labels") and "8" in f.summary
    lm = {"architectures": ["GPT2LMHeadModel"], "id2label": {"0": "LABEL_0", "1": "LABEL_1"}, "vocab_size": 50257}
    run = load_run(write_tb(tmp_path / "b", {"loss": (steps, loss)}, config=lm), tmp_path / "b.duckdb")
    assert class_count(run) == (50257, "vocab_size")
    binary = {"architectures": ["BertForSequenceClassification"], "id2label": {"0": "LABEL_0", "1": "LABEL_1"},
              "vocab_size": 30522}
    run = load_run(write_tb(tmp_path / "c", {"loss": (steps, loss)}, config=binary), tmp_path / "c.duckdb")
    assert class_count(run) in ((2, "id2label"), (2, "num_labels"))


def _wandb_epochs(root, loss, counter, monkeypatch):
    """A real offline W&B run logged once per epoch (its `_step` counts epochs), with the update counter the user
    logs beside the loss (`iteration`) where `counter` says so; the config names a vocabulary of 50,257."""
    import pytest

    wandb = pytest.importorskip("wandb", reason="wandb writes the run under test")
    for k, v in {"WANDB_MODE": "offline", "WANDB_DIR": str(root), "WANDB_SILENT": "true"}.items():
        monkeypatch.setenv(k, v)
    run = wandb.init(project="forensics-test", id=root.name, config={"vocab_size": 50257})
    for epoch, v in enumerate(loss.tolist()):
        run.log({"train/loss": v, **({"iteration": 469 * (epoch + 1)} if counter else {})})
    run.finish()
    wandb.teardown()
    return root


def test_a_first_record_an_epoch_of_updates_in_is_no_loss_at_init(tmp_path, monkeypatch):
    """A W&B row per epoch: `_step` 0 holds the mean of the first 469 updates. With the counter logged beside it,
    a first loss far below log(vocabulary) is learning, not labels leaking; without it, step 0 is all there is."""
    loss = np.array([1.53, 1.2, 1.0, 0.9, 0.85, 0.8, 0.78])
    counted = load_run(_wandb_epochs(tmp_path / "counted", loss, True, monkeypatch), tmp_path / "a.duckdb")
    assert list(InitialLossMismatch().check(counted)) == []
    bare = load_run(_wandb_epochs(tmp_path / "bare", loss, False, monkeypatch), tmp_path / "b.duckdb")
    [f] = InitialLossMismatch().check(bare)
    assert f.evidence["direction"] == "low" and f.evidence["first_update"] is None and f.step == 0


@pytest.mark.parametrize("first_cls, signed, fires", [(55.1, True, True), (0.69, True, False), (55.1, False, False)])
def test_a_mean_reduced_classification_loss_above_any_class_count_needs_no_class_count(tmp_path, first_cls, signed,
                                                                                     fires):
    """detectron2's TensorBoard scalars every 20 iterations (`loss_cls` beside `fast_rcnn/cls_accuracy`), no class
    count in the folder: a first `loss_cls` of 55 exceeds log(C) for any C a classifier has, where the writer is
    known to average it over the batch. A writer not known to (a sum over anchors) says nothing."""
    steps = np.arange(19, 1800, 20)
    decay = np.exp(-np.arange(steps.size) / 10)
    cls = 0.3 + (first_cls - 0.3) * decay
    series = {"loss_cls": (steps, cls), "loss_box_reg": (steps, 0.5 + decay), "total_loss": (steps, cls + 0.5 + decay)}
    if signed:
        series["fast_rcnn/cls_accuracy"] = (steps, 0.9 + 0.05 * (1 - decay))
    run = load_run(write_tb(tmp_path / "r", series), tmp_path / "f.duckdb")
    found = list(InitialLossMismatch().check(run))
    assert bool(found) == fires, [f.summary for f in found]
    if fires:
        assert found[0].step == 19 and found[0].evidence["first_loss"] == pytest.approx(55.1)


def test_a_loss_summing_detection_terms_has_no_uniform_guess_reference(tmp_path):
    """A YOLO-style loss adds box regression, objectness and class terms, each weighted: its start is many times
    log(C) in a healthy run. A config weighting such terms (or naming anchors), or a logged part naming one, says the
    loss is such a sum; the classifier with the same start and a config naming its class count and optimiser fires."""
    steps, loss = curve(start=15 * math.log(20), floor=2.0)
    weighted = {"num_classes": 20, "loss": {"lambda_box": 10, "lambda_obj": 1, "lambda_class": 1}, "lr": 1e-3}
    run = load_run(write_tb(tmp_path / "a", {"train/loss": (steps, loss)}, config=weighted), tmp_path / "a.duckdb")
    assert "sum of detection terms" in missing_reason(InitialLossMismatch(), run)
    parts = {"train/loss": (steps, loss), "train/box_loss": (steps, loss * 0.6)}
    run = load_run(write_tb(tmp_path / "b", parts, config={"num_classes": 20}), tmp_path / "b.duckdb")
    assert "train/box_loss" in missing_reason(InitialLossMismatch(), run)
    anchors = {"num_classes": 20, "model": {"anchors": "10,13, 16,30, 33,23"}}
    run = load_run(write_tb(tmp_path / "c", {"train/loss": (steps, loss)}, config=anchors), tmp_path / "c.duckdb")
    assert "anchors" in missing_reason(InitialLossMismatch(), run)
    classifier = {"num_classes": 20, "lr": 1e-3, "weight_decay": 5e-4}
    run = load_run(write_tb(tmp_path / "d", {"train/loss": (steps, loss)}, config=classifier), tmp_path / "d.duckdb")
    assert missing_reason(InitialLossMismatch(), run) is None
    [f] = InitialLossMismatch().check(run)
    assert f.evidence["direction"] == "high"
