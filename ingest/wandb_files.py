"""The text files of a W&B run folder and the W&B UI's exports; the binary `run-*.wandb` log is `ingest.wandb`.

Older runs left `wandb-history.jsonl`, `wandb-summary.json`, `wandb-metadata.json` and `files/config.yaml`
beside (or instead of) the binary log; `wandb_export_*.csv` comes from the UI's "download CSV". Documents are
read whole with `configs.read_config`'s parsing; values keep the meaning `ingest.wandb` gives them
(`parse_values`, `media`, `unwrap_config_value`), and the files share their run's group (`wandb_group`).
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

import polars as pl

from ingest.configs import load_document, parse_json, read_config
from ingest.decoding import decode
from ingest.records import Chunk, Issue
from ingest.wandb import RUN_FILE, media, parse_values, unwrap_config_value


def read_wandb_history(path: Path, start: int = 0) -> Iterator[Chunk]:
    """`wandb-history.jsonl` (older runs): one JSON row per line with `_step`, `_timestamp`, `_runtime`.

    `start` and `position` are byte offsets of lines (the file is append-only). A row without `_step` gets
    its line's ordinal among rows, marked `ordinal`. Nested dicts are flattened with "." (W&B's own names);
    W&B histograms become histogram rows; other objects are counted as skipped. A last line without its
    newline is a write in progress: left for the next read.
    """
    raw = path.read_bytes()
    if not raw.strip():
        yield Chunk(end=start, issues=[Issue(None, "empty", f"{path.name} is empty")] if start == 0 else [])
        return
    body = raw[start:]
    cut = body.rfind(b"\n") + 1
    if cut < len(body) and not body[cut:].strip():
        cut = len(body)
    lines: list[str] = []
    offsets: list[int] = []
    pos = start
    for line in body[:cut].split(b"\n"):
        if line.strip():
            lines.append(line.decode("utf-8", errors="replace"))
            offsets.append(pos)
        pos += len(line) + 1
    rows = parse_values(lines)
    tags: list[str] = []
    values: list[Any] = []
    positions: list[int] = []
    steps: list[int] = []
    walls: list[float | None] = []
    ordinals: list[bool] = []
    hist_rows: list[dict[str, Any]] = []
    skipped: Counter[str] = Counter()
    issues: list[Issue] = []
    for i, (row, at) in enumerate(zip(rows, offsets)):
        if not isinstance(row, dict):
            issues.append(Issue(at, "garbled", f"line at byte {at} is not a JSON object; skipped"))
            continue
        step = row.get("_step")
        ordinal = not isinstance(step, int) or isinstance(step, bool)
        if ordinal:
            step = i
        wall = row.get("_timestamp")
        wall = float(wall) if isinstance(wall, (int, float)) and not isinstance(wall, bool) else None
        for tag, value in _flatten_row(row):
            if tag in ("_step", "_timestamp"):
                continue
            if isinstance(value, dict):
                media(tag, value, hist_rows, skipped, step, wall, at)
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                tags.append(tag)
                values.append(float(value))
                positions.append(at)
                steps.append(step)
                walls.append(wall)
                ordinals.append(ordinal)
            else:
                skipped[type(value).__name__ if value is not None else "null"] += 1
    if skipped:
        detail = ", ".join(f"{n} {k}" for k, n in skipped.most_common())
        issues.append(Issue(None, "skipped_values", f"history values that are not scalars, not stored: {detail}"))
    scalars = pl.DataFrame({"tag": tags, "step": steps, "value": values, "position": positions,
                            "wall_time": walls, "ordinal": ordinals},
                           schema={"tag": pl.Utf8, "step": pl.Int64, "value": pl.Float64, "position": pl.Int64,
                                   "wall_time": pl.Float64, "ordinal": pl.Boolean}) if tags else None
    yield Chunk(end=start + cut, scalars=scalars, histograms=pl.DataFrame(hist_rows) if hist_rows else None,
                issues=issues)


def _flatten_row(row: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in row.items():
        tag = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and "_type" not in value:
            yield from _flatten_row(value, tag)
        else:
            yield tag, value


def read_wandb_summary(path: Path, start: int = 0) -> Iterator[Chunk]:
    """`wandb-summary.json`: the run's last values, stored whole as the `wandb_summary` config document. Where the
    run's history is not there (no `run-*.wandb`, no `wandb-history.jsonl`: the summary and `output.log` were all
    that was kept), its numbers are also points, each a last value at the summary's `_step` (W&B's step when it was
    written), so the run's final loss is known; beside a history they would repeat its last points."""
    chunks = list(read_config(path, start, name="wandb_summary"))
    doc = next((c.configs.get("wandb_summary") for c in chunks if c.configs), None)
    if isinstance(doc, dict) and start == 0 and not _history_beside(path):  # points once; the document each time
        chunks[-1].scalars = _summary_points(doc)
    yield from chunks


def _history_beside(summary: Path) -> bool:
    """Whether the run folder of a `wandb-summary.json` (its folder, or the one above `files/`) holds its history."""
    folders = [summary.parent] + ([summary.parent.parent] if summary.parent.name == "files" else [])
    return any(RUN_FILE.match(p.name) or p.name == "wandb-history.jsonl" for f in folders for p in _files(f))


def _files(folder: Path) -> list[Path]:
    try:
        return [p for p in folder.iterdir() if p.is_file()]
    except OSError:
        return []


def _summary_points(doc: dict[str, Any]) -> pl.DataFrame | None:
    """The summary's numbers (nested keys joined with ".", W&B's own names; `_`-keys are W&B's bookkeeping) as one
    point each at `_step`, or at 0 marked ordinal when there is none."""
    step = doc.get("_step")
    logged = isinstance(step, int) and not isinstance(step, bool)
    wall = doc.get("_timestamp")
    wall = float(wall) if isinstance(wall, (int, float)) and not isinstance(wall, bool) else None
    values = [(tag, float(v)) for tag, v in _flatten_row({k: v for k, v in doc.items() if not k.startswith("_")})
              if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not values:
        return None
    return pl.DataFrame({"tag": [t for t, _ in values], "step": [step if logged else 0] * len(values),
                         "value": [v for _, v in values], "position": list(range(len(values))),
                         "wall_time": [wall] * len(values), "ordinal": [not logged] * len(values)},
                        schema={"tag": pl.Utf8, "step": pl.Int64, "value": pl.Float64, "position": pl.Int64,
                                "wall_time": pl.Float64, "ordinal": pl.Boolean})


def read_wandb_metadata(path: Path, start: int = 0) -> Iterator[Chunk]:
    """`wandb-metadata.json`: program, args, host, GPU, python version: the `wandb_metadata` document."""
    yield from read_config(path, start, name="wandb_metadata")


def read_wandb_config(path: Path, start: int = 0) -> Iterator[Chunk]:
    """A W&B run folder's `config.yaml` (`key: {desc:, value:}`): unwrapped, `_wandb` and `wandb_version` dropped.
    Read whole every time, as every config is (`configs.read_config`)."""
    doc, issue = load_document(path)
    if issue is None and not isinstance(doc, dict):
        issue = Issue(None, "garbled", f"{path.name} is not a mapping of config keys")
    if issue is not None:
        yield Chunk(end=1, issues=[issue])
        return
    out = {k: unwrap_config_value(v) for k, v in doc.items() if k not in ("_wandb", "wandb_version")}
    yield Chunk(end=1, configs={"wandb_config": out})


# -- the client's debug log -------------------------------------------------------------------------------

DROPPED_TAG = "wandb/dropped_history_step"
# wandb-core's JSON log line for a refused record (its terminal warning, "Tried to log to step N that is less than
# the current step M", goes to the console, and so to `files/output.log`, which is the console reader's).
_DROPPED_MARK = b"ignoring partial history record"


def read_wandb_debug_log(path: Path, start: int = 0) -> Iterator[Chunk]:
    """A W&B run folder's `logs/debug-internal.log`: only the history records W&B refused to store.

    W&B keeps one increasing step per run: a `wandb.log(..., step=s)` with s below the step it has reached is
    dropped, and wandb-core logs `"handler: ignoring partial history record","step":s,"current":c`. A process
    resumed from an older checkpoint into the same W&B run logs its repeated steps this way, and the history
    then shows no repeat at all. Each distinct (step, current) becomes a point of the series
    `wandb/dropped_history_step`: step = the refused step, value = the step W&B had reached, wall_time the
    line's time. The rest of the file is the client's own chatter and is not read.
    `start` and `position` are byte offsets of lines (the file is append-only); a last line without its
    newline is left for the next read.
    """
    with open(path, "rb") as f:
        f.seek(start)
        body = f.read()
    cut = body.rfind(b"\n") + 1
    rows: dict[tuple[int, int], tuple[int, float | None]] = {}
    issues: list[Issue] = []
    pos = start
    for line in body[:cut].split(b"\n"):
        at, pos = pos, pos + len(line) + 1
        if _DROPPED_MARK not in line:
            continue
        try:
            rec = parse_json(line)
            step, current = int(rec["step"]), int(rec["current"])
        except (ValueError, KeyError, TypeError):
            issues.append(Issue(at, "garbled", f"{path.name}: a refused-record line without its step and current"))
            continue
        rows.setdefault((step, current), (at, _iso_seconds(rec.get("time"))))
    frame = None
    if rows:
        keys = list(rows)
        frame = pl.DataFrame({"tag": [DROPPED_TAG] * len(keys), "step": [k[0] for k in keys],
                              "value": [float(k[1]) for k in keys], "position": [rows[k][0] for k in keys],
                              "wall_time": [rows[k][1] for k in keys]},
                             schema={"tag": pl.Utf8, "step": pl.Int64, "value": pl.Float64, "position": pl.Int64,
                                     "wall_time": pl.Float64})
    yield Chunk(end=start + cut, scalars=frame, issues=issues)


def _iso_seconds(stamp: Any) -> float | None:
    """Seconds since the epoch of wandb-core's RFC 3339 `time` (nanoseconds cut to what `fromisoformat` takes)."""
    if not isinstance(stamp, str):
        return None
    m = re.match(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})?$", stamp)
    if m is None:
        return None
    zone = m.group(3) or "Z"
    when = datetime.fromisoformat(m.group(1) + ("+00:00" if zone == "Z" else zone))
    return when.timestamp() + (float("0." + m.group(2)) if m.group(2) else 0.0)


# -- UI exports ---------------------------------------------------------------------------------------------

EXPORT_COLUMN = re.compile(r"^(?P<run>.+?) - (?P<metric>.+)$")


def read_wandb_export(path: Path, start: int = 0) -> Iterator[Chunk]:
    """A W&B UI export (`wandb_export_*.csv`): a `Step` column and `<run name> - <metric>` columns.

    The run name is removed from the tag; `__MIN` / `__MAX` companions (the extremes of each down-sampled
    bucket) are kept as their own tags `<metric>__MIN` / `<metric>__MAX`. Empty cells are no point.
    When the export holds several runs, the run name stays in the tag (the whole column name), so that
    their series stay apart.
    `start` counts data rows (the file is written whole); `position` is the data row's index.
    """
    rows = list(csv.reader(io.StringIO(decode(path.read_bytes()), newline="")))  # a BOM (Excel's) is no header
    if not rows:
        yield Chunk(end=start, issues=[Issue(None, "empty", f"{path.name} is empty")] if start == 0 else [])
        return
    header, body = rows[0], rows[1:]
    step_col = next((i for i, h in enumerate(header) if h.strip() in ("Step", "_step", "step")), None)
    if step_col is None:
        yield Chunk(end=start, issues=[Issue(0, "not_this_format", f"{path.name}: no Step column in the header "
                                                                    f"{header[:6]}")])
        return
    columns: dict[str, list[tuple[int, str]]] = {}
    for i, name in enumerate(header):
        if i == step_col:
            continue
        m = EXPORT_COLUMN.match(name)
        run, metric = (m.group("run"), m.group("metric")) if m else ("", name)
        columns.setdefault(run, []).append((i, metric))
    if len(columns) > 1:  # several runs in one export: keep each column's whole name as its tag
        columns = {run: [(i, header[i]) for i, _ in cols] for run, cols in columns.items()}
    issues: list[Issue] = []
    per_run: dict[str, dict[str, list]] = {run: {"tag": [], "step": [], "value": [], "position": []}
                                           for run in columns}
    for r, row in enumerate(body[start:], start=start):
        try:
            step = int(row[step_col])
        except (ValueError, IndexError):
            issues.append(Issue(r + 1, "garbled", f"row {r + 1}: step {row[step_col:step_col + 1]} is not an integer"))
            continue
        for run, cols in columns.items():
            acc = per_run[run]
            for i, metric in cols:
                cell = row[i].strip() if i < len(row) else ""
                if not cell:
                    continue
                try:
                    value = float(cell)
                except ValueError:
                    issues.append(Issue(r + 1, "garbled", f"row {r + 1}, {header[i]!r}: {cell!r} is not a number"))
                    continue
                acc["tag"].append(metric)
                acc["step"].append(step)
                acc["value"].append(value)
                acc["position"].append(r)
    schema = {"tag": pl.Utf8, "step": pl.Int64, "value": pl.Float64, "position": pl.Int64}
    frames = [pl.DataFrame(acc, schema=schema) for acc in per_run.values() if acc["tag"]]
    scalars = pl.concat(frames) if frames else None
    yield Chunk(end=len(body), scalars=scalars, issues=issues)


def wandb_own_link(rel: PurePosixPath, target: Path) -> bool:
    """Whether a link in a run folder is the one W&B makes itself: `logs/debug-core.log` -> the wandb-core service's
    log in the user's cache (`~/.cache/wandb/logs/core-debug-<time>.log`, SDK 0.17+). It is the tool's log of its
    own service, shared by every run of that machine, not this run's evidence: not followed, and not a read problem."""
    return rel.name == "debug-core.log" and rel.parent.name == "logs" and target.name.startswith("core-debug")
