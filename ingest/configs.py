"""Config files (config.yaml / .json, hparams.yaml, ...): stored whole, flattened to dotted keys by the store."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ingest.records import Chunk, Issue


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
    yield Chunk(end=1, configs={name or path.name: doc})


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
    """A whole YAML or JSON document (by suffix), or the issue that kept it from being read (empty, garbled)."""
    raw = path.read_bytes()
    if not raw.strip():
        return None, Issue(None, "empty", f"{path.name} is empty")
    try:
        return parse_config_text(raw.decode("utf-8", errors="replace"), path.suffix.lower()), None
    except ValueError as exc:
        return None, Issue(None, "garbled", f"{path.name} does not parse: {exc}")


def parse_config_text(text: str, suffix: str) -> Any:
    """Parse YAML or JSON config text; raises ValueError with the parser's message.

    YAML is read with `safe_load` plus a loader that ignores Python object tags, which Lightning's
    hparams.yaml carries (e.g. `!!python/object/apply:...`): their fields are kept as plain data.
    """
    if suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(str(exc)) from None
    import yaml

    try:
        return yaml.load(text, Loader=_PlainLoader)  # noqa: S506 -- _PlainLoader builds only plain data
    except yaml.YAMLError as exc:
        raise ValueError(str(exc).replace("\n", " ")) from None


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
