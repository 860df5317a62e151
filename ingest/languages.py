"""The words of other languages a training loop prints, as the English words the readers know.

Users print their loops in their own words (`pas 0 | pierdere 3.67`, `Época 3/10 - Pérdida: 0.51`, `Эпоха 2, Потеря:
0.41`, `검증 세트 정확도: 0.85`). The names of series become roles through `ingest.roles.words`, which reads these words
as their English ones (`pierdere` -> loss, `validare` -> val); the console reader takes its metric words and the words
of its epoch and step counters from here too. One home: a word added here is read everywhere.

Only the words a loop prints for its quantities (loss, accuracy, learning rate, the train/validation/test split) and its
counters (epoch, step), and none that is another word in an English log. A word of a Latin script is kept folded (lower
case, accents off: `pérdida` and `perdida` are one word); the console's patterns take it printed either way.
"""

from __future__ import annotations

import re
import unicodedata

# word (folded) -> the English word `ingest.roles` reads. Words apart by spaces (Latin and Cyrillic scripts).
WORDS = {
    # loss
    "perdida": "loss", "perdidas": "loss", "perda": "loss", "perdas": "loss", "perte": "loss", "pertes": "loss",
    "perdita": "loss", "verlust": "loss", "pierdere": "loss", "kayip": "loss", "kerugian": "loss",
    "потеря": "loss", "потери": "loss", "потерь": "loss",
    # accuracy (not Spanish/Portuguese `precisión`, `precisão`: folded, one is the English precision, a score of its own)
    "exactitud": "accuracy", "acuracia": "accuracy", "exactitude": "accuracy", "genauigkeit": "accuracy",
    "acuratezza": "accuracy", "acuratete": "accuracy", "dokladnosc": "accuracy", "dogruluk": "accuracy",
    "akurasi": "accuracy", "точность": "accuracy", "точности": "accuracy",
    # learning rate, as its two words (`tasa de aprendizaje`, `rata de invatare`) or one (`Lernrate`)
    "lernrate": "lr", "aprendizaje": "learning", "aprendizado": "learning", "aprendizagem": "learning",
    "apprendimento": "learning", "invatare": "learning", "tasa": "rate", "taxa": "rate", "tasso": "rate",
    "rata": "rate",
    # the splits
    "entrenamiento": "train", "treino": "train", "treinamento": "train", "entrainement": "train",
    "addestramento": "train", "antrenare": "train", "trening": "train", "egitim": "train", "pelatihan": "train",
    "обучение": "train", "обучения": "train",
    "validacion": "val", "validacao": "val", "validierung": "val", "validare": "val", "validazione": "val",
    "walidacja": "val", "dogrulama": "val", "validasi": "val", "валидация": "val", "валидации": "val",
    "prueba": "test", "teste": "test", "тест": "test",
}
# Terms of scripts written without spaces between words (Chinese, Japanese; Korean glues its particles on), read inside
# a name (`当前损失值` -> loss). Longest first: `学习率` before a term without its `率`.
TERMS = (("学习率", "lr"), ("学習率", "lr"), ("학습률", "lr"), ("准确率", "accuracy"), ("正确率", "accuracy"),
         ("準確率", "accuracy"), ("정확도", "accuracy"), ("精度", "accuracy"), ("损失", "loss"), ("損失", "loss"),
         ("손실", "loss"), ("验证", "val"), ("驗證", "val"), ("検証", "val"), ("검증", "val"), ("测试", "test"),
         ("テスト", "test"), ("테스트", "test"), ("训练", "train"), ("訓練", "train"), ("学習", "train"),
         ("학습", "train"))
# The words of an epoch counter (`Época 3/10`, `Эпоха 2`), read as `epoch` is; and of a step, read only as a record's
# first word (`pas 20 | pierdere 3.01`): Romanian `pas`, Portuguese `passo` are other words elsewhere.
EPOCH_WORDS = ("epoca", "epoche", "epoka", "эпоха", "эпохи", "에포크", "에폭", "エポック")
STEP_WORDS = ("pas", "paso", "passo", "schritt", "krok", "adim", "langkah", "шаг", "итерация", "iteracion",
              "iteracao", "iterazione")

_UNACCENTED = str.maketrans({"ł": "l", "Ł": "L", "ı": "i", "đ": "d", "Đ": "D", "ø": "o", "Ø": "O"})


def fold(text: str) -> str:
    """`text` with its Latin letters' accents taken off (`Pérdida` -> `Perdida`, `Kayıp` -> `Kayip`); other scripts
    as they are (a Cyrillic `й` keeps its breve: a letter of its own)."""
    if text.isascii():
        return text
    out = []
    for c in unicodedata.normalize("NFD", text.translate(_UNACCENTED)):
        if unicodedata.combining(c) and out and out[-1].isascii():
            continue
        out.append(c)
    return unicodedata.normalize("NFC", "".join(out))


# An epoch's word names the epoch's series too (`Época: 3` in a printed dict); a step's word never: only its place makes it
# a counter.
_ENGLISH = {**WORDS, **dict.fromkeys(EPOCH_WORDS, "epoch")}


def english(word: str) -> str:
    """The English word a lower-case, folded word stands for, or the word itself."""
    return _ENGLISH.get(word, word)


def _printed(word: str) -> str:
    """A regex alternative that finds a folded word as printed, its accents on or off (`perdida` finds `Pérdida`)."""
    return "".join(f"[{c}{_ACCENTED[c]}]" if c in _ACCENTED else re.escape(c) for c in word)


# The accented forms of each plain letter the words above are printed with.
_ACCENTED = {"a": "áàâãäăą", "c": "çć", "e": "éèêëę", "i": "íìîïı", "n": "ñń", "o": "óòôõöø", "s": "śşș", "t": "ţț",
             "u": "úùûü", "g": "ğ", "l": "ł", "z": "źż"}


def alternatives(words) -> str:
    """One regex alternation (no flags; wrap it in `(?i:...)`) of `words` as printed, longest first."""
    return "|".join(_printed(w) for w in sorted(words, key=len, reverse=True))


# The words that name a metric, as printed: the console reader's METRIC_WORDS take them (a word of a spaced script as a
# word's start: `perte` is no part of `Experte`).
METRIC_WORDS = r"\b(?:" + alternatives(w for w, e in WORDS.items() if e in ("loss", "accuracy", "lr")) + ")|" + "|".join(
    t for t, e in TERMS if e in ("loss", "accuracy", "lr"))
