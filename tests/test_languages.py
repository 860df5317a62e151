"""Training logs printed in other languages read as the same logs printed in English (`ingest.languages`).

Each excerpt is a real print (its source in a comment): the words a loop prints for its loss, accuracy, splits and
counters are read as their English words, where names become roles and where the console reader looks for a metric
word or a counter.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from ingest.console import parse_line, read_console
from ingest.languages import fold
from ingest.roles import role_of


def _read(tmp_path: Path, text: str) -> pl.DataFrame:
    path = tmp_path / "train.log"
    path.write_text(text, encoding="utf-8")
    return pl.concat([c.scalars for c in read_console(path) if c.scalars is not None and c.scalars.height],
                     how="diagonal_relaxed")


# MihaelaBogdan/resonance-lm@7b0b1898feb8ebcbe2db9b5d217ca92503aaa06f:checkpoints/train.log (Romanian: `pas` step,
# `pierdere` loss, `validare` the validation pass's loss)
ROMANIAN = """\
pas     0 | pierdere 3.6770 | lr 4.00e-05 | |g|  2.90 |    0.2s
pas    20 | pierdere 3.0124 | lr 8.40e-04 | |g|  0.33 |    3.8s
pas    40 | pierdere 2.1932 | lr 1.64e-03 | |g|  0.95 |    7.0s
pas    60 | pierdere 1.5980 | lr 2.44e-03 | |g|  1.56 |   10.2s
pas    80 | pierdere 1.0522 | lr 3.24e-03 | |g|  2.34 |   13.5s
pas   100 | pierdere 0.7467 | lr 4.00e-03 | |g|  1.98 |   16.7s
pas   120 | pierdere 0.5676 | lr 4.00e-03 | |g|  1.59 |   20.0s
        -> validare 0.5589 nats = 0.8064 biti/caracter
pas   140 | pierdere 0.5133 | lr 4.00e-03 | |g|  1.63 |   23.5s
pas   160 | pierdere 0.4584 | lr 3.99e-03 | |g|  0.78 |   26.8s
pas   180 | pierdere 0.4374 | lr 3.99e-03 | |g|  0.70 |   30.0s
pas   200 | pierdere 0.4266 | lr 3.98e-03 | |g|  0.71 |   33.2s
pas   220 | pierdere 0.4109 | lr 3.98e-03 | |g|  0.59 |   36.5s
pas   240 | pierdere 0.3873 | lr 3.97e-03 | |g|  0.49 |   39.7s
        -> validare 0.4031 nats = 0.5816 biti/caracter
pas   260 | pierdere 0.4027 | lr 3.96e-03 | |g|  0.51 |   43.3s
pas   280 | pierdere 0.4106 | lr 3.95e-03 | |g|  0.66 |   46.5s
pas   300 | pierdere 0.3974 | lr 3.94e-03 | |g|  0.42 |   49.8s
pas   320 | pierdere 0.3937 | lr 3.92e-03 | |g|  0.41 |   53.0s
pas   340 | pierdere 0.4029 | lr 3.91e-03 | |g|  0.47 |   56.2s
pas   360 | pierdere 0.3772 | lr 3.89e-03 | |g|  0.34 |   59.5s
        -> validare 0.3939 nats = 0.5683 biti/caracter
pas   380 | pierdere 0.3856 | lr 3.88e-03 | |g|  0.33 |   63.0s
"""


def test_a_romanian_log_reads_its_loss_at_its_steps_and_its_validation_as_validation(tmp_path: Path) -> None:
    frame = _read(tmp_path, ROMANIAN)
    assert "pas" not in frame["tag"].to_list()  # the step is the record's counter, no metric
    loss = frame.filter(pl.col("tag") == "pierdere").sort("step")
    assert role_of("pierdere").role == "train_loss" and role_of("pierdere").canonical
    assert loss["step"].to_list() == list(range(0, 400, 20))
    assert loss["value"][0] == 3.677 and not loss["ordinal"].any()
    val = frame.filter(pl.col("tag") == "validare")
    assert role_of("validare").role == "val_loss"
    assert val["step"].to_list() == [120, 240, 360] and val["value"].to_list() == [0.5589, 0.4031, 0.3939]


def test_a_step_word_of_another_language_is_a_step_only_as_a_records_first_word() -> None:
    assert parse_line("pas    20 | pierdere 3.0124").step == 20
    assert parse_line("loss 0.52 pas 3").step is None  # Romanian `pas` is another word elsewhere
    assert role_of("pas").role == "other"


# laendoor/unq-ia-cats-dogs@c0f496137c169c943641be37830b637fa57246b1:output/dataset.1500_epoch.200_padding.edge.md
# (Spanish: `entrenamiento` training, `validación` validation, `exactitud` accuracy)
SPANISH = "20% Epoch 40: loss entrenamiento=0.0085, loss validación=0.0093, exactitud=49.3333%"


def test_spanish_splits_and_accuracy() -> None:
    parsed = parse_line(SPANISH)
    assert parsed.epoch == 40
    roles = {tag: role_of(tag).role for tag in parsed.metrics}
    assert roles == {"loss entrenamiento": "train_loss", "loss validación": "val_loss", "exactitud": "accuracy"}


@pytest.mark.parametrize(("line", "epoch", "tag", "role"), [
    # pypi-data/pypi-mirror-305@bdfa215cd6ca6e3e4293a29d78ed22998a043344:packages/neural-network-kkp/
    # neural_network_kkp-0.0.7.9.tar.gz/neural_network_kkp-0.0.7.9/neural_network_kpp/train.py
    # (`print(f"Эпоха {epoch + 1}/{epochs}, Потеря: {loss_value:.4f}")`, Russian)
    ("Эпоха 3/10, Потеря: 0.4123", 3, "Потеря", "train_loss"),
    # rzepeeek/projekt_mn@fc9163e34549b717d2748ceed7da0efcffbc2cf3:ModelTraining_Custom.py
    # (`print(f"Epoka {epoch+1}/15 - Loss: ..., Acc: ...%")`, Polish: the loss in English, the epoch not)
    ("Epoka 3/15 - Loss: 0.4123, Acc: 81.20%", 3, "Loss", "train_loss"),
    # public code index, file 17516306753 (German: `print(f'Epoche {epoch + 1}/{epochen}, Verlust: {...:.6f}')`)
    ("Epoche 10/100, Verlust: 0.012345", 10, "Verlust", "train_loss"),
    # public code index, file 15009078035 (Spanish: `print(f"Época [{epoch+1}/{num_epochs}], Pérdida: {...:.6f}")`)
    ("Época [3/10], Pérdida: 0.512300", 3, "Pérdida", "train_loss"),
    # public code index, file 48432608480 (Spanish: `print(f"Época {epoch+1}/{epochs} - Pérdida: {total_loss:.4f}")`)
    ("Época 3/10 - Pérdida: 0.5123", 3, "Pérdida", "train_loss"),
    # public code index, file 4719388810 (Portuguese Keras callback: `print(f"🔁 Época {epoch + 1}: perda = {...}")`)
    ("🔁 Época 3: perda = 0.51234", 3, "perda", "train_loss"),
])
def test_an_epoch_and_a_loss_printed_in_another_language(line: str, epoch: int, tag: str, role: str) -> None:
    parsed = parse_line(line)
    assert parsed.epoch == epoch
    assert tag in parsed.metrics and role_of(tag).role == role


def test_a_held_out_split_named_in_another_language_names_the_values_after_it() -> None:
    # public code index, file 58036840895 (Spanish: `print(f"Validación - Pérdida: {val_loss:.4f}, Precisión: ...")`)
    parsed = parse_line("Validación - Pérdida: 0.4123, Precisión: 0.8100")
    assert [role_of(t).role for t in parsed.metrics] == ["val_loss"]


def test_korean_accuracy_of_the_validation_set() -> None:
    # measic/gptidy-development:Evaluation/all_cells/5211.py
    # (`print(epoch, "배치 데이터 정확도:", acc_batch, "검증 세트 정확도:", acc_valid)`: batch data / validation set accuracy)
    assert role_of("배치 데이터 정확도").role == "accuracy"
    assert role_of("검증 세트 정확도").role == "val_accuracy"
    assert role_of("손실").role == "train_loss" and role_of("에포크").role == "epoch"


def test_a_word_is_read_with_its_accents_or_without() -> None:
    assert fold("Pérdida Validação Kayıp dokładność") == "Perdida Validacao Kayip dokladnosc"
    assert role_of("Perdida") == role_of("Pérdida") == role_of("PÉRDIDA")
    assert role_of("Kayıp").role == "train_loss" and role_of("Época").role == "epoch"
