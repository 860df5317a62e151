"""HF Trainer's `trainer_state.json`: `log_history` entries become points, the other fields a config.

Checked against transformers' `TrainerState.save_to_json` (trainer_callback.py, 4.x):
`json.dumps(dataclasses.asdict(state), indent=2, sort_keys=True)`, so non-finite floats appear as the
bare tokens `NaN`, `Infinity`, `-Infinity`, which Python's json module reads back as such. Each
`log_history` entry is one `on_log` / `on_evaluate` dict with `step` added: `step` is the step, every
other number is a series named by its key (loss, grad_norm, learning_rate, eval_loss, epoch, ...).
HF's `epoch` is fractional (0.27 = a quarter into the first epoch), so it stays its own series and the
frame's integer `epoch` column is left null. Strings (`remaining_time: "59h:30m"`) and booleans are
not series and are skipped. The entries carry no time, so `wall_time` is null.

The file is rewritten whole at every save and copied into each `checkpoint-*` folder, so `start` is
the first `log_history` index not yet read, `position` is the entry index, and every copy shares one
group (`trainer_state`) so the store keeps one copy of each point (DECISIONS §3).

`training_args.bin` beside it is a pickle of TrainingArguments: read as settings by an unpickler that imports and
calls nothing (`inert_unpickle`), so its fields are the run's config.
"""

from __future__ import annotations

import io
import json
import math
import pickle
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import polars as pl

from ingest.configs import MAX_DEPTH, DocumentTooLarge, check_document, parse_json
from ingest.decoding import decode
from ingest.jsonvalues import LongInteger, as_float, describe_number, fits_int64, parse_int
from ingest.records import Chunk, Issue, scalars_frame

CONFIG_NAME = "trainer_state"


# log_history entries per chunk: a long run's file (a million steps logged one by one is ~150 MB) is read entry by
# entry, so memory holds the text and one chunk's entries, never the whole document as Python objects (a 95 MB
# file parsed whole peaked at 1.35 GB, and past 5M values it was refused as too large).
CHUNK_ENTRIES = 50_000
_SPACE = re.compile(r"[ \t\n\r]*")


class _TooDeep(Exception):
    """A value nested past the limit a document may have, passed over whole: the cursor stands after it, so the
    values after it are read (one log_history entry skipped, never the entries after it)."""


class _Skipped:
    """A log_history entry that was not read, in the entries' order, with why (`_Cursor.items`)."""

    def __init__(self, why: str):
        self.why = why


class _Damage(Exception):
    """Where the document stops parsing: a JSONDecodeError's position and message, or a value too deep."""

    def __init__(self, pos: int, lineno: int, msg: str, kind: str | None = None):
        super().__init__(msg)
        self.pos, self.lineno, self.msg, self.kind = pos, lineno, msg, kind


def read_trainer_state(path: Path, start: int = 0) -> Iterator[Chunk]:
    """Entries from `log_history[start]` on, plus the top-level fields as config `trainer_state`.

    The top-level object is read member by member and `log_history` entry by entry (`json.JSONDecoder.raw_decode`,
    the parser of `json.loads`), in chunks of CHUNK_ENTRIES entries. A file that does not parse whole (cut off
    mid-write) keeps every complete `log_history` entry before the damage, with one Issue saying where it stopped.
    An entry or field nested past the limit a document may have is skipped alone, named in an Issue.
    """
    text = decode(path.read_bytes())  # UTF-8 with or without a BOM, UTF-16, UTF-32
    if not text.strip():
        yield Chunk(end=start, issues=[Issue(None, "empty", "trainer_state.json is empty")])
        return
    doc = _Cursor(text)
    if not doc.at("{"):
        yield from _whole(text, start)
        return
    config: dict[str, Any] = {}
    issues: list[Issue] = []
    entries: list[tuple[int, Any]] = []
    seen = -1  # log_history entries found; -1 until the key is met
    try:
        for key in doc.members():
            if key != "log_history" or not doc.at("["):
                try:
                    value = doc.value()
                    if key == "log_history":  # not a list: said below, not kept as a field
                        continue
                    check_document(value)
                    config[key] = value
                except (DocumentTooLarge, _TooDeep) as exc:
                    issues.append(Issue(None, "too_large", f"trainer_state.json: `{key}` {exc}; not read"))
                continue
            seen = 0
            for index, entry in doc.items():
                seen = index + 1
                if index < start:
                    continue
                if isinstance(entry, _Skipped):
                    issues.append(Issue(index, "too_large", f"log_history[{index}] {entry.why}; the entry is "
                                                            "skipped, the entries after it are read"))
                else:
                    entries.append((index, entry))
                if len(entries) >= CHUNK_ENTRIES:
                    yield Chunk(end=seen, scalars=_points(entries, issues), issues=issues)
                    entries, issues = [], []
    except _Damage as damage:
        kept = (f"kept the {seen} complete log_history entries before it" if seen >= 0
                else "no log_history found before the damage; nothing kept")
        kind = damage.kind or ("truncated" if damage.pos >= len(text.rstrip()) - 1 else "garbled")
        issues.append(Issue(damage.lineno, kind,
                            f"trainer_state.json does not parse at line {damage.lineno} ({damage.msg}); {kept}"))
        if seen < 0:
            yield Chunk(end=start, issues=issues)
            return
        config = {}  # a damaged file's top-level fields are not kept: only its complete entries
    if seen < 0:
        issues.append(Issue(None, "not_this_format", "no `log_history` list in trainer_state.json"))
        seen = 0
    configs = {CONFIG_NAME: config} if config and (start == 0 or seen > start) else {}
    yield Chunk(end=max(seen, start), scalars=_points(entries, issues) if entries else None, configs=configs,
                issues=issues)


class _Cursor:
    """A position in a JSON text, read a value at a time with `json.JSONDecoder.raw_decode`: the members of an
    object, the items of an array, each value decoded alone, so a long array is never held whole."""

    _decoder = json.JSONDecoder(parse_int=parse_int)  # an integer of 5,000 digits is a number, not a crash

    def __init__(self, text: str):
        self.text = text
        self.pos = _SPACE.match(text).end()

    def at(self, char: str) -> bool:
        return self.text.startswith(char, self.pos)

    def _skip(self, char: str | None = None) -> None:
        self.pos = _SPACE.match(self.text, self.pos + (1 if char else 0)).end()

    def value(self) -> Any:
        try:
            value, self.pos = self._decoder.raw_decode(self.text, self.pos)
        except json.JSONDecodeError as exc:
            raise _Damage(exc.pos, exc.lineno, exc.msg) from None
        except RecursionError:  # a value nested past any limit: passed over unparsed
            self._pass_over()
            raise _TooDeep(f"nested deeper than the {MAX_DEPTH} levels a document may have") from None
        self._skip()
        return value

    def _pass_over(self) -> None:
        """Move past the array or object opening here by its brackets alone (strings skipped whole), as a
        parser that never recurses: how a value too deep for `raw_decode` is skipped. A value that never
        closes, or closes with the wrong bracket, is the document's damage."""
        closers, pos, text = [], self.pos, self.text
        while True:
            m = _NESTED_TOKEN.search(text, pos)
            if m is None:
                self.pos = len(text)
                raise self.damage("a value nested past the limit is cut off before it closes", "too_large")
            token, pos = m.group(), m.end()
            if token in "[{":
                closers.append("]" if token == "[" else "}")
            elif token in "]}":
                if not closers or closers.pop() != token:
                    self.pos = m.start()
                    raise self.damage(f"a value nested past the limit closes with an unexpected {token!r}")
                if not closers:
                    self.pos = pos
                    self._skip()
                    return
            elif not token.endswith('"') or len(token) < 2 or _escaped(token):  # a string cut off by the end
                self.pos = len(text)
                raise self.damage("a value nested past the limit is cut off inside a string", "too_large")

    def members(self) -> Iterator[str]:
        """Each key of the object opening here, with the cursor at its value; the caller reads the value."""
        self._skip("{")
        if self.at("}"):
            return
        while True:
            try:
                key = self.value()
            except _TooDeep:
                key = None
            if not isinstance(key, str):
                raise self.damage("Expecting property name enclosed in double quotes")
            if not self.at(":"):
                raise self.damage("Expecting ':' delimiter")
            self._skip(":")
            yield key
            if self.at(","):
                self._skip(",")
            elif self.at("}"):
                self._skip("}")
                return
            else:
                raise self.damage("Expecting ',' delimiter")

    def items(self) -> Iterator[tuple[int, Any]]:
        """(index, value) for each value of the array opening here; the cursor ends after the array."""
        self._skip("[")
        if self.at("]"):
            self._skip("]")
            return
        index = 0
        while True:
            try:
                entry = self.value()
                if isinstance(entry, (dict, list)) and any(isinstance(v, (dict, list)) for v in
                                                           (entry.values() if isinstance(entry, dict) else entry)):
                    check_document(entry)
            except (DocumentTooLarge, _TooDeep) as exc:
                entry = _Skipped(exc)
            yield index, entry
            index += 1
            if self.at(","):
                self._skip(",")
            elif self.at("]"):
                self._skip("]")
                return
            else:
                raise self.damage("Expecting ',' delimiter")

    def damage(self, msg: str, kind: str | None = None) -> _Damage:
        return _Damage(self.pos, self.text.count("\n", 0, self.pos) + 1, msg, kind)


# What a value passed over by its brackets is made of: a bracket, a string (to its closing quote, or to the end of
# the text when it has none), or a run of anything else.
_NESTED_TOKEN = re.compile(r'[\[\]{}]|"[^"\\]*(?:\\.[^"\\]*)*"?')


def _escaped(token: str) -> bool:
    """True when a string token's last quote is escaped (the string never closed)."""
    tail = len(token) - 1 - len(token[:-1].rstrip("\\"))
    return tail % 2 == 1


def _whole(text: str, start: int) -> Iterator[Chunk]:
    """A document that is not a JSON object: parsed whole only to say what it is."""
    try:
        doc = parse_json(text)
    except DocumentTooLarge as exc:
        yield Chunk(end=start, issues=[Issue(None, "too_large", f"trainer_state.json: {exc}; not read")])
        return
    except json.JSONDecodeError as exc:
        yield Chunk(end=start, issues=[Issue(exc.lineno, "garbled", f"trainer_state.json does not parse at line "
                                                                    f"{exc.lineno} ({exc.msg}); nothing kept")])
        return
    del doc
    yield Chunk(end=start, issues=[Issue(None, "not_this_format", "not a JSON object")])


def _points(entries: list[tuple[int, Any]], issues: list[Issue]) -> pl.DataFrame:
    """The entries' numbers as points. A step past 64 bits skips its entry, an integer value past float64 is
    stored as the ±inf it rounds to; each is named in `issues`."""
    tags: list[str] = []
    steps: list[int] = []
    values: list[float] = []
    positions: list[int] = []
    ordinal: list[bool] = []
    for index, entry in entries:
        if not isinstance(entry, dict):
            continue
        step = entry.get("step")
        logged = isinstance(step, int) and not isinstance(step, bool)
        if (logged and not fits_int64(step)) or isinstance(step, LongInteger):
            issues.append(Issue(index, "out_of_range", f"log_history[{index}]: step {describe_number(step)} does "
                                                       f"not fit a 64-bit step; the entry is skipped"))
            continue
        for key, value in entry.items():
            if key == "step" or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            number = as_float(value)
            if isinstance(value, LongInteger) or (isinstance(value, int) and math.isinf(number)):
                issues.append(Issue(index, "out_of_range", f"log_history[{index}]: {key} is "
                                    f"{describe_number(value)}, past float64: stored as {number}"))
            tags.append(key)
            steps.append(step if logged else index)
            values.append(number)
            positions.append(index)
            ordinal.append(not logged)
    return scalars_frame(pl.DataFrame(
        {"tag": tags, "step": steps, "value": values, "position": positions, "ordinal": ordinal},
        schema={"tag": pl.Utf8, "step": pl.Int64, "value": pl.Float64, "position": pl.Int64,
                "ordinal": pl.Boolean}))


def read_training_args(path: Path, start: int = 0) -> Iterator[Chunk]:
    """`training_args.bin` (torch.save of TrainingArguments) as the run's settings, read by `inert_unpickle`:
    `max_grad_norm`, `learning_rate`, the warmup, `fp16`, ... A file that cannot be read so loses settings, not
    training evidence: its read problem is `settings_unread`, which no verdict counts as lost evidence."""
    if start > 0:
        return
    try:
        doc = plain_settings(load_torch_pickle(path))
    except (OSError, ValueError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile, RecursionError,
            MemoryError, KeyError, IndexError, TypeError, AttributeError) as exc:
        yield Chunk(end=1, issues=[Issue(None, "settings_unread", f"training_args.bin could not be read as a "
                                                                  f"pickle of settings ({exc.__class__.__name__}: "
                                                                  f"{str(exc)[:120]}); the run's logs are read")])
        return
    if not isinstance(doc, dict):
        yield Chunk(end=1, issues=[Issue(None, "settings_unread", f"training_args.bin holds a {type(doc).__name__}, "
                                                                  "not the fields of TrainingArguments")])
        return
    yield Chunk(end=1, configs={path.name: doc})


# -- a pickle read without running it ------------------------------------------------------------------------
# A pickle names the globals (classes, functions) its objects are built with, and loading it imports and calls
# them: that is how a pickle runs code. `inert_unpickle` imports nothing: every global becomes an `_Inert`
# record of its name, and calling or building one records what it was given. So reading a hostile pickle builds
# only lists, dicts, numbers, strings and these records.

TORCH_MAGIC = 0x1950A86A20F9469CFC6C  # the legacy (non-zip) torch.save format opens with this number
MAX_PICKLE_BYTES = 64 * 2**20
MAX_SETTINGS_NODES = 1_000_000


class _Inert:
    """A global named by a pickle, as a record: `name` is `module.qualname`; an instance keeps the arguments it was
    called (REDUCE) or created (NEWOBJ) with and the state it was built (BUILD) with. A record called in turn
    (`getattr(module, name)(...)`, as Keras pickles its objects) gives another record, of those arguments. Nothing
    of it runs."""

    __slots__ = ("args", "state")
    name = "?"

    def __new__(cls, *args: Any, **kwargs: Any) -> _Inert:
        obj = object.__new__(cls)
        obj.args, obj.state = args + ((kwargs,) if kwargs else ()), None
        return obj

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def __call__(self, *args: Any, **kwargs: Any) -> _Inert:
        return type(self)(*args, **kwargs)


class _InertUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> type:
        return type("inert", (_Inert,), {"__slots__": (), "name": f"{module}.{name}"})

    def persistent_load(self, pid: Any) -> Any:
        return type("inert", (_Inert,), {"__slots__": (), "name": "persistent"})(pid)


def inert_unpickle(data: bytes | BinaryIO) -> Any:
    """One pickle's object, with every global an inert record (never imported, never called)."""
    return _InertUnpickler(io.BytesIO(data) if isinstance(data, bytes) else data).load()


def load_torch_pickle(path: Path) -> Any:
    """The object `torch.save` wrote, read with `inert_unpickle`: the zip format's `*/data.pkl` (torch >= 1.6), or
    the legacy stream (magic number, protocol, system info, then the object)."""
    if path.stat().st_size > MAX_PICKLE_BYTES:
        raise ValueError(f"{path.stat().st_size:,} bytes, more than the {MAX_PICKLE_BYTES:,} a pickle of settings "
                         "may hold")
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            name = next((n for n in z.namelist() if n.endswith("data.pkl")), None)
            if name is None:
                raise ValueError("a zip without the data.pkl torch.save writes")
            return inert_unpickle(z.read(name))
    with path.open("rb") as f:
        first = inert_unpickle(f)
        if first != TORCH_MAGIC:
            return first
        inert_unpickle(f)  # protocol version
        inert_unpickle(f)  # system info
        return inert_unpickle(f)


def plain_settings(obj: Any) -> Any:
    """An unpickled object as plain data: a record built with a state (a dataclass such as TrainingArguments, built
    by `copyreg` or NEWOBJ) becomes its fields; a class called with one plain argument (an Enum member) that
    argument; a global itself its name; any other record its name and arguments (`torch.device('cpu')`)."""
    count = [0]

    def plain(value: Any, depth: int) -> Any:
        count[0] += 1
        if depth > MAX_DEPTH or count[0] > MAX_SETTINGS_NODES:
            raise ValueError("nested too deep or too large for a document of settings")
        if isinstance(value, type) and issubclass(value, _Inert):
            return value.name
        if isinstance(value, _Inert):
            if isinstance(value.state, dict):
                return plain(value.state, depth + 1)
            if isinstance(value.state, tuple) and len(value.state) == 2 and isinstance(value.state[0], dict):
                return plain(value.state[0], depth + 1)  # (state, slot state)
            if value.state is None and len(value.args) == 1 and not isinstance(value.args[0], (_Inert, type)) \
                    and type(value).name.rpartition(".")[2][:1].isupper():
                return plain(value.args[0], depth + 1)  # a class called with its value: an Enum member
            return {"class": type(value).name, "args": [plain(a, depth + 1) for a in value.args]}
        if isinstance(value, dict):
            return {str(plain(k, depth + 1)): plain(v, depth + 1) for k, v in value.items()}
        if isinstance(value, (list, tuple, set, frozenset)):
            return [plain(v, depth + 1) for v in value]
        if isinstance(value, (bytes, bytearray)):
            return f"<{len(value)} bytes>"
        return value

    return plain(obj, 0)
