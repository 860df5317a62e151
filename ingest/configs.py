"""Config files (config.yaml / .json, hparams.yaml, ...): stored whole, flattened to dotted keys by the store."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ingest.decoding import decode
from ingest.jsonvalues import parse_int
from ingest.records import Chunk, Issue

# Limits every structured document (YAML, JSON, a safetensors header) is held to, so that a small hostile file
# cannot take memory or the stack without limit: ten lines of YAML aliases expand to 9**9 leaves, and
# 100k nested brackets overflow any recursive reader. Real configs are a few levels deep with a few thousand keys;
# HF's trainer_state.json of a 100k-step run holds about a million values.
MAX_DOCUMENT_BYTES = 256 * 2**20
MAX_DEPTH = 100
MAX_NODES = 5_000_000  # values and containers, each alias counted every time it is used


def read_config(path: Path, start: int = 0, *, name: str | None = None) -> Iterator[Chunk]:
    """One chunk holding the whole document, stored under `name` (default: the file's name); a file that
    does not parse is an issue, not an error. A document that is not a mapping is stored as `{"value": ...}`.

    A config is always read whole (`start` is ignored): ingest calls this only when the file changed, and
    the document replaces its earlier rows.
    """
    doc, issue = load_document(path)
    if issue is not None:
        yield Chunk(end=1, issues=[issue])
        return
    if not isinstance(doc, dict):
        doc = {"value": doc}
    yield Chunk(end=1, configs={name or path.name: with_label_count(doc)})


_DEFAULT_LABEL = re.compile(r"^LABEL_\d+$")


def with_label_count(doc: dict[str, Any]) -> dict[str, Any]:
    """An HF model config with its class count: `save_pretrained` writes `id2label` but not `num_labels` (a
    property of PretrainedConfig, `len(id2label)`), so a classifier's config says its label count only through
    `id2label`, beside a `vocab_size` that is the tokenizer's, not the head's. `num_labels` is added where
    `id2label` names a classifier's labels: the architecture is a classification head, or the labels are not the
    `LABEL_i` defaults every config carries."""
    labels = doc.get("id2label")
    if "num_labels" in doc or not isinstance(labels, dict) or len(labels) < 1:
        return doc
    heads = doc.get("architectures")
    classifier = isinstance(heads, list) and any(isinstance(h, str) and "Classification" in h for h in heads)
    named = not all(isinstance(v, str) and _DEFAULT_LABEL.match(v) for v in labels.values())
    return {**doc, "num_labels": len(labels)} if classifier or named else doc


# The run's own config at its root (DECISIONS.md §10: HF's root config.json, not a checkpoint's model config).
ROOT_CONFIG_NAMES = ("config.yaml", "config.yml", "config.json")


def root_config(root: Path) -> tuple[dict[str, Any] | None, str | None, Issue | None]:
    """The run root's config document read as ingest reads it (Python tags kept as plain data): (document,
    file name, None); (None, file name, issue) when it does not parse or is not a mapping; (None, None, None)
    when the root has none."""
    for name in ROOT_CONFIG_NAMES:
        path = root / name
        if path.is_file():
            doc, issue = load_document(path)
            if issue is None and not isinstance(doc, dict):
                issue = Issue(None, "garbled", f"{name} holds a {type(doc).__name__}, not a mapping of settings")
            return (doc if issue is None else None), name, issue
    return None, None, None


def load_document(path: Path) -> tuple[Any, Issue | None]:
    """A whole YAML or JSON document (by suffix), or the issue that kept it from being read (empty, garbled,
    past the limits above)."""
    try:
        size = path.stat().st_size
        if size > MAX_DOCUMENT_BYTES:
            return None, Issue(None, "too_large", f"{path.name} holds {size:,} bytes, over the "
                                                  f"{MAX_DOCUMENT_BYTES:,} a config document may hold; not read")
        raw = path.read_bytes()
    except OSError as exc:  # replay and probe read the root config through here too, outside ingest's walk
        return None, Issue(None, "unreadable", f"{path.name} cannot be read ({exc.strerror or exc})")
    if not raw.strip():
        return None, Issue(None, "empty", f"{path.name} is empty")
    try:
        return parse_config_text(decode(raw), path.suffix.lower()), None
    except DocumentTooLarge as exc:
        return None, Issue(None, "too_large", f"{path.name}: {exc}; not read")
    except ValueError as exc:
        return None, Issue(None, "garbled", f"{path.name} does not parse: {exc}")


class DocumentTooLarge(ValueError):
    """A document nested deeper than MAX_DEPTH or holding more than MAX_NODES values once aliases are expanded."""


def parse_config_text(text: str, suffix: str) -> Any:
    """Parse YAML or JSON config text; raises ValueError with the parser's message, DocumentTooLarge past the
    limits above.

    YAML is read with `safe_load` plus a loader that ignores Python object tags, which Lightning's
    hparams.yaml carries (e.g. `!!python/object/apply:...`): their fields are kept as plain data.
    """
    if suffix == ".json":
        return parse_json(text)
    import yaml

    try:
        doc = yaml.load(text, Loader=_PlainLoader)  # noqa: S506 -- _PlainLoader builds only plain data
    except RecursionError:
        raise DocumentTooLarge(f"nested deeper than the {MAX_DEPTH} levels a document may have") from None
    except yaml.YAMLError as exc:
        raise ValueError(str(exc).replace("\n", " ")) from None
    check_document(doc)
    return doc


def parse_json(text: str | bytes) -> Any:
    """`json.loads` held to the limits above (NaN / Infinity tokens read as Python writes them); raises
    ValueError (a JSONDecodeError, with its position) or DocumentTooLarge."""
    try:
        doc = json.loads(text, parse_int=parse_int)  # an integer past the digit limit is a LongInteger, not an error
    except RecursionError:
        raise DocumentTooLarge(f"nested deeper than the {MAX_DEPTH} levels a document may have") from None
    check_document(doc)
    return doc


def check_document(doc: Any) -> None:
    """Raise DocumentTooLarge if `doc` nests deeper than MAX_DEPTH or expands to more than MAX_NODES values.

    YAML aliases make a document a graph: each shared list is built once, but every later walk (flattening to
    dotted keys, JSON for the store) visits it once per use. So sizes are counted per use, memoised per object,
    which measures a 9**9 expansion without making it. A cycle (`a: &a [*a]`) counts as too deep."""
    memo: dict[int, tuple[int, int]] = {}  # id -> (values, levels below)

    def measure(value: Any, depth: int) -> tuple[int, int]:
        if not isinstance(value, (dict, list)):
            return 1, 0
        if depth >= MAX_DEPTH:
            raise DocumentTooLarge(f"nested deeper than the {MAX_DEPTH} levels a document may have")
        if id(value) not in memo:
            total, height = 1, 0
            for child in value.values() if isinstance(value, dict) else value:
                n, h = measure(child, depth + 1)
                total, height = total + n, max(height, h + 1)
                if total > MAX_NODES:
                    raise DocumentTooLarge(f"holds more than {MAX_NODES:,} values (a YAML alias counts at each use)")
            memo[id(value)] = (total, height)
        total, height = memo[id(value)]
        if depth + height > MAX_DEPTH:
            raise DocumentTooLarge(f"nested deeper than the {MAX_DEPTH} levels a document may have")
        return total, height

    measure(doc, 0)


def flatten(doc: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Yield (dotted key, leaf value) pairs; lists of scalars stay whole, lists of dicts are indexed."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from flatten(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(doc, list) and any(isinstance(v, (dict, list)) for v in doc):
        for i, value in enumerate(doc):
            yield from flatten(value, f"{prefix}.{i}" if prefix else str(i))
    else:
        yield prefix, doc


def _plain_loader():
    import yaml

    class PlainLoader(yaml.SafeLoader):
        """SafeLoader that turns any `!python/...` tagged node into its plain mapping/sequence/scalar."""

    def construct_plain(loader, tag_suffix, node):
        if isinstance(node, yaml.MappingNode):
            return loader.construct_mapping(node, deep=True)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node, deep=True)
        return loader.construct_scalar(node)

    PlainLoader.add_multi_constructor("tag:yaml.org,2002:python/", construct_plain)
    PlainLoader.add_multi_constructor("!", construct_plain)
    return PlainLoader


class _LazyLoader:
    """Builds the YAML loader class on first use, so `import yaml` stays off the import path."""

    _cls = None

    def __new__(cls, stream):
        if cls._cls is None:
            cls._cls = _plain_loader()
        return cls._cls(stream)


_PlainLoader = _LazyLoader
