"""MLflow's file store (`mlruns/<experiment>/<run>/`): metric files, params, tags and the run's meta.yaml.

Checked against mlflow's `FileStore` (mlflow/store/tracking/file_store.py, 2.x):
- `metrics/<key>`: one line per `log_metric`, appended as `f"{timestamp} {value} {step}\n"` with the
  timestamp in milliseconds since the epoch and the value as Python prints a float (`nan`, `inf`,
  `-inf` included). MLflow before 1.0 wrote `timestamp value` without a step; such lines get step =
  the line's ordinal. A key holding `/` is a nested folder under `metrics/`; the tag is the path below
  `metrics/` (`train/loss`). A metric file found on its own (no `metrics/` folder above it) is
  recognised by its line shape and named by its file name.
- `params/<key>` and `tags/<key>`: one value per file, written whole (no newline) -> configs
  `mlflow_params` / `mlflow_tags`; a param that reads as a number is stored as that number.
- `meta.yaml`: run name, status, start and end times -> config `mlflow_meta`.

Metric files are append-only, so `start` is a byte offset and only complete lines are read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import polars as pl

from ingest.decoding import decode
from ingest.records import Chunk, Issue, scalars_frame

# `<ms> <value> <step>` (or `<ms> <value>` before MLflow 1.0). Values as Python's repr of a float.
_NUMBER = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|inf|infinity)"
METRIC_LINE = re.compile(rf"^(\d{{9,14}}) ({_NUMBER})(?: (-?\d+))?$", re.I)
SNIFF_LINE = re.compile(rb"^\d{9,14} [-+0-9.eEnaifNIty]+(?: -?\d+)?\r?$")

MAX_LISTED = 20


def sniff_metric_file(head: bytes) -> bool:
    """True when every complete line of the file's first bytes has the MLflow metric-line shape."""
    lines = head.split(b"\n")
    complete = lines[:-1] if len(lines) > 1 else []
    return bool(complete) and all(SNIFF_LINE.match(line) for line in complete if line)


def metric_tag(path: Path) -> str:
    """The metric key: the path below the nearest `metrics/` folder, else the file's name."""
    parts = path.parts
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] == "metrics":
            return "/".join(parts[i + 1 :])
    return path.name


def run_group(rel: PurePosixPath) -> str:
    """The MLflow run folder: what is above `metrics/`, `params/`, `tags/` (or holds meta.yaml)."""
    parts = rel.parts
    for i, part in enumerate(parts[:-1]):
        if part in ("metrics", "params", "tags") and _is_run_layout(parts[:i]):
            return "/".join(parts[:i])
    return "" if str(rel.parent) == "." else str(rel.parent)


def _is_run_layout(prefix: tuple[str, ...]) -> bool:
    # mlruns/<exp>/<run>/, or a run folder given as the run directory itself (prefix empty).
    return len(prefix) == 0 or (len(prefix) >= 3 and prefix[-3] == "mlruns")


def claims_mlflow(rel: PurePosixPath) -> bool:
    """Files of a run inside `mlruns/`: `<exp>/<run>/{metrics,params,tags}/...` and `<exp>/<run>/meta.yaml`."""
    parts = rel.parts
    if "mlruns" not in parts:
        return False
    i = len(parts) - 1 - parts[::-1].index("mlruns")
    below = parts[i + 1 :]
    if len(below) == 3 and below[2] == "meta.yaml":
        return True
    return len(below) >= 4 and below[2] in ("metrics", "params", "tags")


def read_mlflow(path: Path, start: int = 0) -> Iterator[Chunk]:
    """Dispatch on where the file sits in the run folder: metric, param, tag, or meta.yaml."""
    parts = path.parts
    kind = next((p for p in reversed(parts[:-1]) if p in ("metrics", "params", "tags")), None)
    if path.name == "meta.yaml" and kind is None:
        yield from _read_meta(path, start)
    elif kind in ("params", "tags"):
        yield from _read_value_file(path, start, kind)
    else:
        yield from read_metric_file(path, start)


def read_metric_file(path: Path, start: int = 0) -> Iterator[Chunk]:
    """One MLflow metric's history from byte `start` on; garbled lines are Issues, the rest is kept."""
    raw = path.read_bytes()
    if not raw.strip():
        yield Chunk(end=start, issues=[Issue(None, "empty", f"metric file {path.name} is empty")])
        return
    body_end = raw.rfind(b"\n") + 1
    if body_end <= start:
        return
    tag = metric_tag(path)
    line_no = raw.count(b"\n", 0, start) + 1
    steps: list[int] = []
    values: list[float] = []
    times: list[float] = []
    positions: list[int] = []
    ordinal: list[bool] = []
    bad: list[int] = []
    for line in raw[start:body_end].split(b"\n")[:-1]:
        here, line_no = line_no, line_no + 1
        text = line.decode("utf-8", errors="replace").strip()
        if not text:
            continue
        match = METRIC_LINE.match(text)
        if match is None:
            bad.append(here)
            continue
        ms, value, step = match.groups()
        steps.append(int(step) if step is not None else here - 1)
        ordinal.append(step is None)
        values.append(float(value))
        times.append(int(ms) / 1000.0)
        positions.append(here)
    frame = pl.DataFrame(
        {"tag": [tag] * len(values), "step": steps, "value": values, "position": positions,
         "wall_time": times, "ordinal": ordinal},
        schema={"tag": pl.Utf8, "step": pl.Int64, "value": pl.Float64, "position": pl.Int64,
                "wall_time": pl.Float64, "ordinal": pl.Boolean})
    issues = [Issue(n, "garbled", f"line {n} is not `<timestamp_ms> <value> <step>`; skipped")
              for n in bad[:MAX_LISTED]]
    if len(bad) > MAX_LISTED:
        issues.append(Issue(bad[MAX_LISTED], "garbled", f"{len(bad) - MAX_LISTED} more garbled lines skipped"))
    yield Chunk(end=body_end, scalars=scalars_frame(frame), issues=issues)


def _read_value_file(path: Path, start: int, kind: str) -> Iterator[Chunk]:
    if start > 0:
        return
    parts = path.parts
    i = len(parts) - 1 - parts[::-1].index(kind)
    key = "/".join(parts[i + 1 :])
    text = decode(path.read_bytes())
    value: Any = _number_or_text(text) if kind == "params" else text
    yield Chunk(end=1, configs={f"mlflow_{kind}": {key: value}})


def _number_or_text(text: str) -> Any:
    """MLflow params are strings; `0.001` or `32` are stored as numbers so that they can be compared."""
    stripped = text.strip()
    for cast in (int, float):
        try:
            return cast(stripped)
        except ValueError:
            continue
    return text


def _read_meta(path: Path, start: int) -> Iterator[Chunk]:
    if start > 0:
        return
    from ingest.configs import parse_config_text

    try:
        doc = parse_config_text(decode(path.read_bytes()), ".yaml")
    except ValueError as exc:
        yield Chunk(end=1, issues=[Issue(None, "garbled", f"meta.yaml does not parse: {exc}")])
        return
    if not isinstance(doc, dict):
        yield Chunk(end=1, issues=[Issue(None, "not_this_format", "meta.yaml is not a mapping")])
        return
    yield Chunk(end=1, configs={"mlflow_meta": doc})
