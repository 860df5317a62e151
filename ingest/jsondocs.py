"""Whole JSON documents that hold metrics: the shapes training code dumps with `json.dump`, read by their shape.

A JSON-lines log (one object per line) is `tabular.read_jsonl`'s; this reader takes one document, written whole
(and rewritten whole as a run goes), and finds its series by shape, in this order:

- an array of objects, one per report (Chainer's LogReport `result/log`, any list of per-epoch dicts): records,
  with the step, time, epoch and batch columns chosen as for JSON lines (`iteration`, `step`, ...);
- an array of numbers: one series named by the file's stem (`losses.json` = `[0.9, 0.7, ...]`);
- inside an object, at any depth:
  - Sacred's metric entries `{"steps": [...], "values": [...], "timestamps": [...]}`: a series with its steps;
  - lists paired with a `<name>_T` list of the same length (PyMARL's `info.json`: `loss_td` beside `loss_td_T`,
    the environment steps): a series on those steps;
  - sibling lists of numbers with no number beside them in their object (Keras' `History.history` dumped whole,
    `{"train": [...], "val": [...]}`, a history nested under a key): one series each, the list index as an
    ordinal step (DECISIONS §2), when a list's name has a role (`loss`, `val_acc`: lengths may differ, as with a
    validation every few epochs) or several nameless lists share one length;
  - beside numbers (a run's metadata dumped with its history: `img_size`, `test_acc`), only lists named as a loss
    or an accuracy, when two or more of them share one length of 3 or more: a config's `betas: [0.9, 0.999]` or
    `milestones: [30, 60, 90]` beside its numbers stays a setting;
  - gauges `{"value", "min", "max", "count"}` (Unity ML-Agents' `timers.json`): the gauge's last value;
- what is left: a document named for results or metrics (`*_results.json`, `metrics.json`, `scores.json`) whose
  leaves are numbers is one record (HF Trainer's `save_metrics` files), its series named under the document's
  stem (`train_results/train_loss`); any other remainder is a document of settings, stored as the run's config
  (nothing in it is a curve).

Numbers only: strings, booleans and nulls in a series are not points; values encoded as objects (jsonpickle'd
tensors) are counted in one read problem of their series. `start` counts entries already read (the document is
rewritten whole): the records or list positions before it are not read again.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

from ingest.configs import DocumentTooLarge, flatten, parse_json
from ingest.decoding import decode
from ingest.dvclive import component_sums, plots_beside
from ingest.records import Chunk, Issue, scalars_frame
from ingest.reprs import REPR, cell_float, repr_number
from ingest.roles import SPLIT_WORDS, role_of, words
from ingest.tabular import _flat_numbers, _record_points, with_loss_sums

# Names of documents that hold a run's results (HF's train_results.json / eval_results.json / all_results.json,
# `metrics.json`, `scores.json`): their numbers are one record, not settings.
RESULT_NAMES = re.compile(r"(^|[_.\-])(results?|metrics?|scores?|summary|stats|history|losses?)([_.\-]|$)", re.I)
GAUGE_KEYS = {"value", "min", "max", "count"}
MAX_JSON_BYTES = 64 * 2**20
MAX_SETTINGS_LEAVES = 20_000  # a config holds hundreds to a few thousand; COCO's annotations hold millions
PAIR_SUFFIX = "_T"
SACRED_KEYS = {"steps", "values"}
HISTORY_ROLES = {"train_loss", "val_loss", "accuracy", "val_accuracy"}  # curves that make a history beside settings
_COLS = ("tag", "step", "value", "position", "wall_time", "epoch", "batch", "ordinal")
_SCHEMA = {"tag": pl.Utf8, "step": pl.Int64, "value": pl.Float64, "position": pl.Int64, "wall_time": pl.Float64,
           "epoch": pl.Int64, "batch": pl.Int64, "ordinal": pl.Boolean}


def read_json(path: Path, start: int = 0) -> Iterator[Chunk]:
    """The metric series of one JSON document (see the module docstring for the shapes read)."""
    if NOT_LOGS.match(path.name):
        yield Chunk(end=start)  # a model's or tokenizer's file: nothing of the run's training in it
        return
    doc, issue = load_json(path)
    if issue is not None:
        yield Chunk(end=start, issues=[issue])
        return
    if isinstance(doc, dict) and (plots := plots_beside(path)) is not None:
        sums, end, issues = component_sums(plots, start)  # DVCLive's summary: its series are the TSVs beside it
        yield Chunk(end=max(end, start), scalars=sums, configs={path.name: doc}, issues=issues)
        return
    yield read_document(doc, path, start)


def read_document(doc: Any, path: Path, start: int = 0, settings: bool = True) -> Chunk:
    """The series of a document already loaded (`doc`: plain lists, dicts and numbers), by the module docstring's
    shapes, named by `path`; what is left is the run's settings where `settings`, else dropped."""
    cols: dict[str, list[Any]] = {c: [] for c in _COLS}
    issues: list[Issue] = []
    rest: Any = None
    end = start
    if isinstance(doc, list) and doc and all(isinstance(e, dict) for e in doc):
        for index, entry in enumerate(doc):
            if index >= start and (why := _record_points(dict(_flat_numbers(entry)), index, index, cols)):
                issues.append(Issue(index, "out_of_range", f"entry {index}: {why}; skipped"))
        end = len(doc)
    elif isinstance(doc, list):
        numbers = _numbers(doc)
        if numbers is None:
            rest = {"value": doc}
        else:
            end = _add_list(cols, path.stem, numbers, None, start)
    elif isinstance(doc, dict):
        found = _Found(start, path.stem)
        rest = _walk(doc, "", found)
        cols, issues, end = found.cols, found.issues, found.end
        if not cols["tag"] and isinstance(rest, dict) and RESULT_NAMES.search(path.stem):
            # Named under the document (`train_results/train_loss`): a summary of a run whose log holds the same
            # names (HF's trainer_state.json beside its *_results.json) must not share their names.
            record = dict(_flat_numbers(rest, f"{path.stem}/"))
            if record and start == 0:
                if (why := _record_points(record, 0, 0, cols)) is not None:
                    issues = [*issues, Issue(0, "out_of_range", f"{path.name}: {why}; not stored")]
                rest, end = None, 1
    else:
        rest = {"value": doc}
    frame = with_loss_sums(scalars_frame(pl.DataFrame(cols, schema=_SCHEMA))) if cols["tag"] else None
    configs = {}
    if settings and isinstance(rest, dict) and rest:
        leaves = sum(1 for _ in flatten(rest))
        if leaves <= MAX_SETTINGS_LEAVES:
            configs = {path.name: rest}
        else:  # a dataset's annotations, a vocabulary: not the run's settings, and too many rows for the store
            issues = [*issues, Issue(None, "not_settings", f"{path.name}: {leaves:,} values that are no metric "
                                                           f"series, more than the {MAX_SETTINGS_LEAVES:,} settings "
                                                           "a document may hold (a dataset's file?); not stored")]
    return Chunk(end=max(end, start), scalars=frame, configs=configs, issues=issues)


def load_json(path: Path) -> tuple[Any, Issue | None]:
    """The document as JSON whatever the file's suffix (a LogReport file is named `log`), held to the limits every
    document is held to; or the issue that kept it from being read."""
    try:
        size = path.stat().st_size
        if size > MAX_JSON_BYTES:
            # metric documents are small (a 10k-epoch history is a few MB); this is a dataset's or a model's file
            return None, Issue(None, "not_settings", f"{path.name} holds {size:,} bytes, over the "
                                                     f"{MAX_JSON_BYTES:,} a JSON document of metrics may hold; not read")
        raw = path.read_bytes()
    except OSError as exc:
        return None, Issue(None, "unreadable", f"{path.name} cannot be read ({exc.strerror or exc})")
    if not raw.strip():
        return None, Issue(None, "empty", f"{path.name} is empty")
    try:
        return parse_json(raw), None
    except DocumentTooLarge as exc:
        return None, Issue(None, "too_large", f"{path.name}: {exc}; not read")
    except ValueError as exc:
        return None, Issue(None, "garbled", f"{path.name} does not parse as JSON: {str(exc)[:120]}")


class _Found:
    """Series found while walking a document: columns of points, read problems, the next entry to read."""

    def __init__(self, start: int, stem: str) -> None:
        self.start = start
        self.stem = stem
        self.end = start
        self.cols: dict[str, list[Any]] = {c: [] for c in _COLS}
        self.issues: list[Issue] = []

    def add(self, tag: str, values: list[Any], steps: list[Any] | None) -> None:
        numbers = _numbers(values) or [None] * len(values)
        if set(words(tag)) <= SPLIT_WORDS.keys():
            tag = f"{self.stem}/{tag}"  # `{"train": [...], "val": [...]}` in losses.json: the file names the quantity
        skipped = sum(1 for v in values if isinstance(v, (dict, list)) or isinstance(v, str) and cell_float(v) is None)
        if skipped:
            self.issues.append(Issue(None, "unread_values", f"{tag}: {skipped} of {len(values)} values are not "
                                                            "numbers (encoded objects or text); skipped"))
        self.end = max(self.end, _add_list(self.cols, tag, numbers, steps, self.start))


def _walk(node: dict, prefix: str, found: _Found) -> dict | None:
    """Take the series out of `node` into `found`; return what is left (settings), None when nothing is."""
    rest: dict[str, Any] = {}
    lists = {k: v for k, v in node.items() if isinstance(v, list) and _numbers(v) is not None}
    paired = {k for k, v in node.items() if isinstance(v, list) and k + PAIR_SUFFIX in lists
              and len(v) == len(lists[k + PAIR_SUFFIX])}
    for key in paired:
        found.add(prefix + key, node[key], lists[key + PAIR_SUFFIX])
    loose = {k: v for k, v in lists.items() if k not in paired and k.removesuffix(PAIR_SUFFIX) not in paired}
    has_numbers = any(_is_number(v) for v in node.values())
    lengths = {len(v) for v in loose.values()}
    # Lists with a metric's name may differ in length (a validation every few epochs); nameless ones count as a
    # history when they are several of one length (a config's `betas` or `milestones` sit beside numbers or alone).
    named = any(role_of(prefix + k).role != "other" for k in loose)
    table = not has_numbers and bool(loose) and (named or len(loose) >= 2 and len(lengths) == 1 and lengths != {1})
    # Beside numbers (a run's metadata and its test score dumped with its history), only the curves of a loss or
    # an accuracy, two or more of one length of 3 or more; the numbers and other lists there stay settings.
    curves = {k for k in loose if role_of(prefix + k).role in HISTORY_ROLES}
    per_length = Counter(len(loose[k]) for k in curves)
    history = curves if has_numbers and any(n >= 2 and length >= 3 for length, n in per_length.items()) else set()
    for key, value in node.items():
        if key in paired or key.removesuffix(PAIR_SUFFIX) in paired and key.endswith(PAIR_SUFFIX):
            continue
        if table and key in loose or key in history:
            found.add(prefix + key, value, None)
        elif isinstance(value, dict) and SACRED_KEYS <= value.keys() and isinstance(value["values"], list):
            steps = value["steps"] if isinstance(value["steps"], list) and len(value["steps"]) == len(
                value["values"]) else None
            found.add(prefix + key, value["values"], steps)
        elif isinstance(value, dict) and value.keys() == GAUGE_KEYS and _is_number(value["value"]):
            found.add(prefix + key, [value["value"]], None)
        elif isinstance(value, dict):
            inner = _walk(value, f"{prefix}{key}/", found)
            if inner:
                rest[key] = inner
        else:
            rest[key] = value
    return rest or None


MAX_PRINTED_HISTORY = 2**20  # characters: a 10k-epoch history of four metrics printed on one line is ~800k
_QUOTES = str.maketrans("\u2018\u2019\u201c\u201d", "''\"\"")  # typographic quotes a web page put in a pasted print
_NONFINITE_WORD = re.compile(r"(?<![\w'\".])(-?(?:nan|inf))(?![\w'\"])")


def printed_history(text: str, prefix: str = "") -> dict[str, list[Any]] | None:
    """The series of a dict of lists printed as Python on one line (`print(history.history)`: `{'loss': [0.69, 0.52],
    'val_loss': [...]}`), found as in a JSON document (`_walk`: the list index is the epoch, an ordinal step), named
    under `prefix`: columns as `_add_list` makes them, or None when `text` (the braces and what is inside them) is no
    such dict. Parsed by `ast.literal_eval` alone, and only up to `MAX_PRINTED_HISTORY` characters; `nan`, `inf` and
    scalars' reprs (`np.float32(0.5)`) inside are their numbers, typographic quotes plain ones."""
    import ast

    if len(text) > MAX_PRINTED_HISTORY:
        return None
    text = _NONFINITE_WORD.sub(r"'\1'", REPR.sub(lambda m: repr_number(m) or m.group(), text.translate(_QUOTES)))
    try:
        doc = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if not isinstance(doc, dict) or not all(isinstance(k, str) for k in doc):
        return None
    doc = {k: [float(x) if isinstance(x, str) and _NONFINITE_WORD.fullmatch(x) else x for x in v]
           if isinstance(v, list) else v for k, v in doc.items()}
    found = _Found(0, prefix.rstrip("/") or "history")
    _walk(doc, prefix, found)
    return found.cols if found.cols["tag"] else None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _numbers(values: list[Any]) -> list[float | None] | None:
    """The list as numbers (None where an entry is not one; a scalar's repr written as text, `"tensor(0.41)"`, is
    the number it stands for), or None when no entry is a number."""
    out = [float(v) if _is_number(v) else cell_float(v) for v in values]
    return out if any(v is not None for v in out) else None


def _add_list(cols: dict[str, list[Any]], tag: str, values: list[float | None], steps: list[Any] | None,
              start: int) -> int:
    """Append one series' points from position `start` on; returns the list's length (the next entry)."""
    for index, value in enumerate(values):
        if index < start or value is None:
            continue
        step = steps[index] if steps is not None else None
        logged = _is_number(step) and math.isfinite(step) and step == int(step)
        cols["tag"].append(tag)
        cols["step"].append(int(step) if logged else index)
        cols["value"].append(value)
        cols["position"].append(index)
        cols["wall_time"].append(None)
        cols["epoch"].append(None)
        cols["batch"].append(None)
        cols["ordinal"].append(not logged)
    return len(values)



# Files of a model or tokenizer that are JSON but no log (HF's tokenizer.json holds a vocabulary of 50k numbers).
NOT_LOGS = re.compile(r"^(tokenizer.*|vocab.*|special_tokens_map|added_tokens|.*\.index|merges|preprocessor_config"
                      r"|generation_config|adapter_config)\.json$", re.I)


def sniff_json_document(head: bytes, *, cut: bool | None = None) -> bool:
    """Whether a file's first bytes are one JSON document (an array or an object, pretty-printed or not) and
    nothing else: not JSON lines (a whole object, then more: the JSON-lines readers take those), not a console
    log that opens with a JSON dump of its config and goes on in text. A document longer than the head is one
    whose only fault is that the head ends inside it. `cut`: whether `head` stops before the file's end (by
    default, when it is 4096 bytes long)."""
    text = decode(head).lstrip("\ufeff \t\r\n")  # UTF-8 with or without a BOM, UTF-16, UTF-32
    if text[:1] not in ("[", "{"):
        return False
    cut = len(head) >= 4096 if cut is None else cut
    try:
        _, end = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError as exc:
        # cut inside the document: the parser runs out of text (at the end, or in a string the cut left open)
        return cut and (exc.pos >= len(text.rstrip()) - 1 or exc.msg.startswith("Unterminated string"))
    except RecursionError:
        return False
    return not text[end:].strip()
