"""A Hugging Face model card's training results copied from its page as plain text: a header typed with single
blanks whose names run to two words (`Training Loss Epoch Step Validation Loss`) above rows of numbers apart by single
blanks, `No log` where the trainer logged no training loss, is read as the table it is; a line of words that is no
such header stays prose."""

from __future__ import annotations

import numpy as np

from ingest.console import _spaced_header
from tests.runwriters import load_run

# Source: https://fxis.ai/edu/how-to-fine-tune-the-gpt-2-model-a-comprehensive-guide/ (a GPT-2 fine-tune's card table)
CARD = """Training Loss Epoch Step Validation Loss
1.2978 1.0 6621 1.2262
1.0378 2.0 13242 1.0048
0.9537 3.0 19863 0.9414
"""
# Source: https://huggingface.co/Jjzzzz/distilgpt2-finetuned-stories (a card whose training loss was never logged)
CARD_NO_LOG = """Training Loss Epoch Step Validation Loss
No log 1.0 20 3.4065
No log 2.0 40 3.3288
No log 3.0 60 3.3089
"""


def _run(tmp_path, name, text):
    root = tmp_path / name
    root.mkdir()
    (root / "log.txt").write_text(text)
    return load_run(root, tmp_path / f"{name}.duckdb")


def test_a_card_table_typed_with_single_blanks_gives_its_training_and_validation_loss_by_step(tmp_path):
    run = _run(tmp_path, "card", CARD)
    steps, loss = run.arrays("loss")
    assert steps.tolist() == [6621, 13242, 19863] and loss.tolist() == [1.2978, 1.0378, 0.9537]
    vsteps, val = run.arrays("val_loss")
    assert vsteps.tolist() == [6621, 13242, 19863] and val.tolist() == [1.2262, 1.0048, 0.9414]


def test_a_card_row_whose_training_loss_was_not_logged_keeps_its_validation_loss(tmp_path):
    run = _run(tmp_path, "no_log", CARD_NO_LOG)
    assert not run.has("loss") or not np.isfinite(run.arrays("loss")[1]).any()
    steps, val = run.arrays("val_loss")
    assert steps.tolist() == [20, 40, 60] and val.tolist() == [3.4065, 3.3288, 3.3089]


def test_only_a_header_over_an_epoch_or_step_column_with_a_name_of_two_words_is_one():
    assert _spaced_header("Training Loss Epoch Step Validation Loss Accuracy F1") == (
        "Training Loss", "Epoch", "Step", "Validation Loss", "Accuracy", "F1")
    assert _spaced_header("Epoch Step Loss") is None  # no name of two words: a sentence as well as a header
    assert _spaced_header("Training finished after the last epoch") is None  # a sentence: words not capitalised
