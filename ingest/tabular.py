"""Plain metric tables (CSV / TSV, JSONL, Parquet): one row per logged record, numeric columns become series.

Which column is what (first match wins, names compared exactly as written):

- step: `step, global_step, _step, iteration, iter, it, Step`. Without one, step = the record's ordinal
  (its 0-based data-line index, so it stays stable across resumed reads) and `ordinal=True` (DECISIONS §2).
  A row whose step cell is empty gets the same ordinal treatment; it is not dropped.
- wall time: `timestamp, _timestamp, wall_time, time`, read as seconds since the epoch when its values
  look like that (> 1e8; > 1e11 are taken as milliseconds), or parsed as ISO date-times (UTC when no
  offset is given). A `time` column holding durations (e.g. ms per iteration) stays an ordinary series.
- epoch / batch: `epoch` and `batch` / `batch_idx` fill the frame's integer `epoch` / `batch` columns
  where every value is integral, AND stay series of their own (HF and others log fractional epochs;
  keeping the series loses nothing and lets a user plot it).
- every other numeric column is a series named by its header; text columns (a `phase` column, say) are
  skipped. A table written without a header (its first line numbers only) keeps that line as data and names its
  columns only where they prove what they are (`headerless_names`). An empty cell means "not logged on this row" (Lightning writes sparse rows); `nan`, `inf`,
  `-inf`, `Infinity` are kept as such.

Rows that do not fit their header are aligned where that is known (`_aligned`: a trailing separator, a doubled
empty field, rows longer from some line on read by position, a header written again), said in one `realigned`
notice per kind. Damage: a lone row of another width, or a non-numeric cell in a numeric column, is an Issue
with its line number; every other line is kept. CSV and JSONL logs are appended to while a run goes, so
they resume at a byte offset and read complete lines only; Parquet files are written whole, so `start`
is a row index.
"""

from __future__ import annotations

import csv
import io
import math
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ingest.configs import parse_json
from ingest.decoding import wide_text
from ingest.jsonvalues import LongInteger, as_float, describe_number, fits_int64
from ingest.records import Chunk, Issue, scalars_frame
from ingest.reprs import REPR_HINT, cell_float, cell_number

# `""` and `Unnamed: 0`: the row index pandas' `to_csv` writes unnamed (and reads back under that name)
# A counter's column before the row index: nanoGPT's `iter_num`, fairseq's `num_updates`, a self-play loop's
# `global_iter`.
STEP_COLUMNS = ("step", "global_step", "_step", "iteration", "iter", "it", "Step", "global_iter", "global_iteration",
                "iter_num", "num_updates", "train_step", "", "Unnamed: 0")
TIME_COLUMNS = ("timestamp", "_timestamp", "wall_time", "time")
EPOCH_COLUMNS = ("epoch",)
BATCH_COLUMNS = ("batch", "batch_idx")

MAX_LISTED = 20  # garbled lines reported one by one; the rest are summed up in one more Issue
# Series one table may hold: past it, a header of 10**6 columns (19 MB) took 3.4 GB; real logs hold hundreds.
MAX_COLUMNS = 10_000
EPOCH_SECONDS_MIN = 1e8  # 1973-03-03: smaller "time" values are durations, not wall-clock times
EPOCH_MILLIS_MIN = 1e11  # larger values are milliseconds (1e11 s is the year 5138)
# A file unchanged this long is not being written: its last line, newline or not, is whole (`settled_tail`).
SETTLED_SECONDS = 60.0


# ----------------------------------------------------------------------------------------------- CSV


def read_csv(path: Path, start: int = 0) -> Iterator[Chunk]:
    """A CSV (or, by suffix, TSV; by its header, `;`-separated) metric log; `start` is a byte offset, 0 for a first
    read.

    Only complete lines are read: a partial last line (a writer mid-flush) is left for the next ingest, unless
    the file has been still for SETTLED_SECONDS and that line holds every field of the header (`settled_tail`).
    """
    yield from _read_delimited(path, start, _separator(path))


# `;`: Excel's and pandas' CSV where the decimal mark is a comma; `|`: a fixed-width table printed by hand
SEPARATORS = (",", "\t", ";", "|")


def _separator(path: Path) -> str:
    """The suffix's separator (tab for `.tsv`, else comma), or the first of SEPARATORS the header line holds when
    it holds none of that one (`to_csv(sep=";")`, a `.csv` written with tabs)."""
    named = "\t" if path.suffix.lower() == ".tsv" else ","
    try:
        with path.open("rb") as f:
            header = f.readline(1 << 20)
    except OSError:
        return named
    if named.encode() in header:
        return named
    return next((sep for sep in SEPARATORS if sep.encode() in header), named)


def _read_delimited(path: Path, start: int, sep: str) -> Iterator[Chunk]:
    raw = lone_returns_as_newlines(path.read_bytes())
    if (wide := wide_text(path.name, raw, start)) is not None:
        yield wide
        return
    header_end = raw.find(b"\n")
    if not raw.strip():
        yield Chunk(end=start, issues=[Issue(None, "empty", f"{path.name} is empty")])
        return
    if start == 0 and (row := _one_row(path, raw, sep)) is not None:
        yield row
        return
    if header_end < 0:
        return  # not even a complete header line yet
    header = _header_above(raw, header_end, start, sep)
    body_start = max(start, header_end + 1)
    data_line = 2  # the first data line: line 2, under the header
    unnamed = headerless_names(raw, sep, path.stem)
    if unnamed is not None:  # no header: every line is data
        header, body_start, data_line = sep.join(unnamed).encode() + b"\n", start, 1
    body_end = raw.rfind(b"\n") + 1
    body = raw[body_start:body_end]
    if settled_tail(path, raw, body_start, header.count(sep.encode()), sep):
        body, body_end = raw[body_start:] + b"\n", len(raw)
    if body_end <= body_start:
        return
    first_line = raw.count(b"\n", 0, body_start) + 1
    wide, issues = parse_csv_rows(header, body, first_line, sep)
    # Ordinal = 0-based data-line index.
    wide = wide.with_columns((pl.col("__line") - data_line).alias("__ordinal"))
    scalars, more = wide_to_points(long_to_wide(wide))
    yield Chunk(end=body_end, scalars=with_loss_sums(scalars), issues=issues + more)


_LONE_CR = re.compile(rb"\r\r?(?!\n)")


def lone_returns_as_newlines(raw: bytes) -> bytes:
    """`raw` with line ends of `\\r` alone made ones the readers cut at: `\\r` -> `\\n` (Python's csv module with
    `lineterminator="\\r"`, classic Mac files), `\\r\\r` -> `\\r\\n` (a `\\r\\n` written through a text-mode
    handle, then its `\\n` lost). Same length, so byte offsets hold."""
    if b"\r" not in raw:
        return raw
    return _LONE_CR.sub(lambda m: b"\r\n" if len(m.group()) == 2 else b"\n", raw)


HEADLESS_ROWS = 200  # rows of a headerless table its columns are named from (the same on every read)
_NUMBER_CELL = re.compile(r"^\s*[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|inf)\s*$", re.I)


def headerless_names(raw: bytes, sep: str, stem: str) -> list[str] | None:
    """Column names of a table written without a header (its first line is numbers only), else None.

    A number is no column's name, so such a first line is data. The columns say what they are only where a
    relation between them does, and none is guessed from its position or range: a first column of whole numbers
    that never decrease is the step; a column that is exactly exp of another (perplexity = exp(cross-entropy), as
    language-model scripts print `step,loss,perplexity,lr`) names that other the loss (`val loss` in a file named
    for a held-out split) and itself `perplexity`. Every other column is `column N`."""
    lines = [line for line in raw.split(b"\n", HEADLESS_ROWS + 1)[:HEADLESS_ROWS] if line.strip()]
    if not lines:
        return None
    rows = [line.decode("utf-8", errors="replace").split(sep) for line in lines]
    width = len(rows[0])
    if width < 2 or not all(_NUMBER_CELL.match(c) for c in rows[0]):
        return None
    if [c.strip() for c in rows[0]] in ([str(i) for i in range(width)], [str(i + 1) for i in range(width)]):
        return None  # column indices as names (pandas' `to_csv` of a frame with default columns): a header
    names = [f"column {i + 1}" for i in range(width)]
    rows = [r for r in rows if len(r) == width and all(_NUMBER_CELL.match(c) for c in r)]
    cols = np.array([[float(c) for c in r] for r in rows]).T
    first = cols[0]
    if np.all(np.isfinite(first)) and np.all(first == np.round(first)) and np.all(np.diff(first) >= 0):
        names[0] = "step"
    elif _counts_again(first):
        names[0] = "epoch"  # launches appended to one per-epoch table: the rows go on, the counter starts again
    if len(rows) >= 3:
        with np.errstate(over="ignore", invalid="ignore"):
            for a, b in ((a, b) for a in range(width) for b in range(width) if a != b and names[a] != "step"):
                x, y = cols[a], cols[b]
                if np.all(np.isfinite(x)) and len(np.unique(x)) >= 3 and np.all(x >= 0) \
                        and np.allclose(np.exp(x), y, rtol=1e-4, atol=0):
                    from ingest.roles import SPLIT_WORDS, words

                    held = next((w for w in words(stem) if SPLIT_WORDS.get(w) in ("val", "test")), None)
                    names[a], names[b] = f"{held} loss" if held else "loss", "perplexity"
                    break
    return names


def _counts_again(first: np.ndarray) -> bool:
    """A column that counts whole numbers up by one a row and, where it falls, starts again at (or below) the value it
    first held, at least twice over: a per-epoch table that launches appended to, one row an epoch."""
    if first.size < 6 or not (np.all(np.isfinite(first)) and np.all(first == np.round(first))):
        return False
    d = np.diff(first)
    falls = np.flatnonzero(d < 0)
    return bool(falls.size) and bool(np.all(d[d >= 0] == 1)) and bool(np.all(first[falls + 1] <= first[0])) \
        and bool(np.all(np.diff(np.concatenate(([-1], falls, [first.size - 1]))) >= 3))


def _header_above(raw: bytes, header_end: int, start: int, sep: str) -> bytes:
    """The header line the rows from `start` on are read under: the first line, or the last time it was written
    again before `start` (a resumed read of a file whose header was rewritten as a new section). A header written
    again is found by the first line's first name; one that starts with another name is read as a row."""
    header = raw[: header_end + 1]
    first = header.split(sep.encode(), 1)[0].strip()
    at = raw.rfind(b"\n" + first + sep.encode(), header_end, start) if first else -1
    if at < 0:
        return header
    end = raw.find(b"\n", at + 1)
    line = raw[at + 1: end + 1]
    row = next(csv.reader(io.StringIO(line.decode("utf-8", errors="replace")), delimiter=sep), [])
    return line if _is_header_row(row) else header


MIN_ROW_VALUES = 3  # values a file of one row must hold to be a series along it (fewer are a record's fields)


def _one_row(path: Path, raw: bytes, sep: str) -> Chunk | None:
    """A file of one line of numbers and nothing else, whose name says what they are (`losses.csv` holding
    `,0.72,0.39,0.33,...`, a list written with pandas' `to_csv(header=False)` of one row): one series along the row,
    its steps the values' positions (ordinals), named by the file (`ingest.console`'s name for bare values). A first
    cell left empty (the frame's unnamed index) is no value. Read once the file is finished (ended by a line break,
    or still for SETTLED_SECONDS), since a writer may add a second row."""
    from ingest.roles import stem_tag

    text = raw.strip()
    if b"\n" in text or not (raw.endswith(b"\n") or _still(path)):
        return None
    cells = text.decode("utf-8", errors="replace").split(sep)
    if cells and not cells[0].strip():
        cells = cells[1:]
    tag = stem_tag(path)
    if tag is None or len(cells) < MIN_ROW_VALUES or not all(_NUMBER_CELL.match(c) for c in cells):
        return None
    values = [float(c) for c in cells]
    frame = pl.DataFrame({"tag": [tag] * len(values), "step": list(range(len(values))), "value": values,
                          "position": list(range(len(values))), "ordinal": [True] * len(values)},
                         schema_overrides={"step": pl.Int64, "position": pl.Int64, "value": pl.Float64})
    return Chunk(end=len(raw), scalars=scalars_frame(frame),
                 issues=[Issue(None, "no_step", f"{path.name}: one row of {len(values)} values, read as {tag} along "
                                                f"it; steps are the values' positions")])


def settled_tail(path: Path, raw: bytes, start: int, separators: int, sep: str) -> bool:
    """Whether the last line of `raw`, which has no newline, is a whole record to read now: the file has not
    changed for SETTLED_SECONDS (a writer mid-flush finishes its line in far less) and the line holds at least as
    many separators as the header. Some writers end every line but the last (Flair's `loss.tsv` writes `\\n` before
    each row), so a finished run's last record is such a line. A line read this way is part of what was read:
    a later ingest goes on after it."""
    cut = raw.rfind(b"\n") + 1
    tail = raw[max(cut, start):]
    if not tail.strip() or tail.count(sep.encode()) < separators or cut < start:
        return False
    return _still(path)


def _still(path: Path) -> bool:
    """Whether the file has not changed for SETTLED_SECONDS."""
    try:
        return time.time() - path.stat().st_mtime >= SETTLED_SECONDS
    except OSError:
        return False


def parse_csv_rows(header: bytes, body: bytes, first_line: int, sep: str = ",") -> tuple[pl.DataFrame, list[Issue]]:
    """Parse `body` (whole lines of a CSV whose header line is `header`) into all-text columns.

    Returns the frame (one column per header name, plus `__line`: the 1-based line number of each row)
    and the issues for rows that could not be used. Fast path: polars, when every line has exactly the
    header's field count and nothing is quoted (checked with numpy); otherwise Python's csv module, which
    can name each bad line.
    """
    header, body, issues = _cut_columns(header, body, sep)
    names = _header_names(header, sep)
    if not names:
        return _empty_wide(), [Issue(first_line - 1, "garbled", "CSV header line has no column names")]
    fast = _polars_rows(header, body, first_line, sep, len(names))
    if fast is not None:
        return fast, issues
    frame, more = _python_rows(names, body, first_line, sep)
    return frame, issues + more


def _cut_columns(header: bytes, body: bytes, sep: str) -> tuple[bytes, bytes, list[Issue]]:
    """Header and lines cut to their first MAX_COLUMNS fields when the header holds more, with the issue saying
    so; the cut is made on the bytes, before any parsing (a 19 MB file of 10**6 columns took 3.4 GB parsed whole).
    A separator inside a quoted cell past the cut may shift what is kept of that line; its cells are then
    checked as any others are."""
    s = sep.encode()
    n = header.count(s) + 1
    if n <= MAX_COLUMNS:
        return header, body, []

    def cut(line: bytes) -> bytes:
        return s.join(line.split(s, MAX_COLUMNS)[:MAX_COLUMNS])
    lines = body.split(b"\n")
    return cut(header.rstrip(b"\r\n")) + b"\n", b"\n".join(cut(line) if line else line for line in lines), [
        Issue(1, "too_large", f"{n:,} columns, more than the {MAX_COLUMNS:,} series a table may hold; "
              f"kept the first {MAX_COLUMNS:,}")]


def _header_names(header: bytes, sep: str) -> list[str]:
    text = header.decode("utf-8", errors="replace").lstrip("\ufeff")
    return _unique_names(next(csv.reader(io.StringIO(text), delimiter=sep), []))


def _polars_rows(header: bytes, body: bytes, first_line: int, sep: str, n_cols: int) -> pl.DataFrame | None:
    if b'"' in body or b'"' in header or b"=" in body:
        return None  # quoting, or cells that name their own values (`_named_values`): the careful path
    first = header.split(sep.encode(), 1)[0].strip()
    if first and (body.startswith(first + sep.encode()) or body.find(b"\n" + first + sep.encode()) >= 0):
        return None  # the header again, perhaps with other columns: the careful path reads it as a new section
    arr = np.frombuffer(body, dtype=np.uint8)
    ends = np.flatnonzero(arr == 10)
    if len(ends) == 0 or ends[-1] != len(arr) - 1:
        ends = np.append(ends, len(arr))  # last line without its newline (a whole-file read)
    seps = np.flatnonzero(arr == ord(sep))
    per_line = np.diff(np.concatenate(([0], np.searchsorted(seps, ends))))
    if not np.all(per_line == n_cols - 1):
        return None  # a ragged or blank line: let the careful path name it
    try:
        frame = pl.read_csv(header + body, separator=sep, infer_schema=False, has_header=True,
                            new_columns=_header_names(header, sep))
    except pl.exceptions.PolarsError:
        return None
    if frame.height != len(ends):
        return None
    return frame.with_columns(pl.int_range(first_line, first_line + frame.height, dtype=pl.Int64).alias("__line"))


def _python_rows(names: list[str], body: bytes, first_line: int, sep: str) -> tuple[pl.DataFrame, list[Issue]]:
    """Rows by Python's csv module, each aligned to the header above it (`_aligned`): a header written again
    (another launch appended, a column added) starts a new section under its own names, and a row as wide as an
    earlier header, not the current one, is read under that earlier one (two tables written in turn)."""
    text = body.decode("utf-8", errors="replace")
    order = list(names)
    sections: list[tuple[list[str], list[tuple[int, list[str]]]]] = [(names, [])]
    bad: list[tuple[int, str]] = []
    headers: list[int] = []
    named: list[tuple[int, dict[str, str]]] = []
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=sep)
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:  # e.g. a NUL byte or an unterminated quote
            bad.append((first_line + reader.line_num - 1, f"unreadable CSV line: {exc}"))
            continue
        line = first_line + reader.line_num - 1
        if not row or (len(row) == 1 and not row[0].strip()):
            continue  # blank line
        if (pairs := _named_values(row)) is not None:
            named.append((line, pairs))
            continue
        if _is_header_row(row) and (len(row) != len(sections[-1][0]) or {c.strip() for c in row} & set(order)):
            # a row of text as wide as the header and sharing none of its names is a row of text, not a header
            again = _unique_names(row)
            headers.append(line)
            order += [n for n in again if n not in order]
            sections.append((again, []))
            continue
        # Under the last header of its width when the current one is not (two tables written in turn, rllab's and
        # OptionGAN's progress.csv); else under the current one, aligned by `_aligned`.
        width = len(row)
        under = next((sec for sec in reversed(sections) if len(sec[0]) == width), sections[-1]) \
            if len(sections[-1][0]) != width else sections[-1]
        under[1].append((line, row))
    if named:  # a section of their own: their names are no header the rows around them are read under
        keys = list(dict.fromkeys(k for _, pairs in named for k in pairs))
        sections.append((keys, [(line, [pairs.get(k, "") for k in keys]) for line, pairs in named]))
    notes = [(headers[0], f"{len(headers)} more header lines ({_line_span(headers)}): each row is read under the last "
                          "header of its width")] if headers else []
    columns: dict[str, list[str | None]] = {}
    lines: list[int] = []
    for header, rows in sections:
        aligned, more, skipped = _aligned(header, rows)
        notes += more
        bad += skipped
        for name in aligned:
            if name not in order:
                order.append(name)
        n_before = len(lines)
        for name, cells in aligned.items():
            columns.setdefault(name, [None] * n_before).extend(cells)
        gone = {at for at, _ in skipped}
        lines += [line for line, _ in rows if line not in gone]
        for cells in columns.values():
            cells.extend([None] * (len(lines) - len(cells)))
    frame = pl.DataFrame({name: pl.Series(name, columns.get(name, [None] * len(lines)), dtype=pl.Utf8)
                          for name in order})
    frame = frame.with_columns(pl.Series("__line", lines, dtype=pl.Int64))
    realigned = [Issue(line, "realigned", why) for line, why in notes[:MAX_LISTED]]
    return frame, _line_issues(sorted(bad), "garbled") + realigned


_LETTER = re.compile(r"[A-Za-z]")
_PAIR = re.compile(r"^\s*([A-Za-z_][\w./@-]*)\s*=\s*(\S+)\s*$")


def _named_values(row: list[str]) -> dict[str, str] | None:
    """The `name=value` cells of a row that names its own values (a summary a script writes between a table's rows,
    `Epoch 3 Summary,train_loss=0.72,val_loss=1.87`): two or more such cells with numbers, the rest text without
    a number (a label); else None."""
    pairs = [_PAIR.match(c) for c in row]
    found = {m.group(1): m.group(2) for m in pairs if m is not None and _is_number(m.group(2))}
    rest = [c for c, m in zip(row, pairs, strict=True) if m is None]
    if len(found) < 2 or any(_is_number(c) for c in rest):
        return None
    return found


def _is_header_row(row: list[str]) -> bool:
    """A row of names: two or more cells, each with a letter and none a number (a table's header written again;
    not a row of array reprs, `[0.27 0.73]`)."""
    cells = [c.strip() for c in row]
    return len(cells) >= 2 and all(_LETTER.search(c) and not _is_number(c) for c in cells)


def _unique_names(row: list[str]) -> list[str]:
    names, seen = [], {}
    for name in (n.strip() for n in row):
        seen[name] = seen.get(name, 0) + 1
        names.append(name if seen[name] == 1 else f"{name}.{seen[name] - 1}")
    return names


def _aligned(names: list[str], rows: list[tuple[int, list[str]]]) -> tuple[
        dict[str, list[str | None]], list[tuple[int, str]], list[tuple[int, str]]]:
    """The cells of one section's rows as columns under `names`, a note per kind of row that needed aligning, and
    the rows that could not be aligned.

    Rows with fewer fields than the header miss their last cells (not logged on that row), unless only one row
    is short: a line cut off, skipped as damage. Rows with more: when the extra fields are empty at the end of every
    such row, a trailing separator; when every row of the section
    holds the same extra field count and exactly one field position is empty in all of them, a separator written
    twice there (old Flair's `loss.tsv`), dropped. Otherwise which field a name belongs to is unknown (Keras'
    CSVLogger appending a fit that logs more metrics writes them in sorted order under the old header): when every
    row from the first long one on is long, their fields are columns with no name, `column N` by position, so no
    value is read under another's name. A long row among rows of the header's width is damage: skipped."""
    n = len(names)
    long = [row for _, row in rows if len(row) > n]
    drop: set[int] = set()
    by_width = {len(row) for row in long}
    if len(by_width) == 1:
        width = by_width.pop()
        empty = [i for i in range(width) if all(not row[i].strip() for row in long)]
        if set(range(n, width)) <= set(empty):
            drop = set(range(n, width))
        elif width == n + 1 and len(long) == len(rows) and len(empty) == 1:
            drop = set(empty)
    kept = [(line, row, [c for i, c in enumerate(row) if i not in drop] if len(row) > n else row)
            for line, row in rows]
    longer = [len(cells) > n for _, _, cells in kept]
    damaged = longer if any(longer) and not all(longer[longer.index(True):]) else [False] * len(kept)
    shorter = [len(row) < n for _, row, _ in kept]
    if sum(shorter) == 1:  # one short row: a line cut off (its last cell may be cut too), not a habit of the writer
        damaged = [d or s for d, s in zip(damaged, shorter)]
    bad = [(line, f"{len(row)} fields where the header has {n}") for (line, row, _), d in zip(kept, damaged) if d]
    kept = [k for k, d in zip(kept, damaged) if not d]
    width = max((len(cells) for _, _, cells in kept), default=n)
    unnamed = [f"column {i + 1}" for i in range(width)] if width > n else []
    columns: dict[str, list[str | None]] = {name: [] for name in names + [u for u in unnamed if u not in names]}
    odd: dict[str, list[int]] = {}
    for line, row, cells in kept:
        under = names
        if len(row) != n:
            if len(cells) < n:
                why = "the missing cells read as not logged"
            elif len(cells) == n:
                why = f"the empty field {', '.join(str(i + 1) for i in sorted(drop))} dropped to align them"
            else:
                under = unnamed
                why = "which field is which name is unknown: read as columns with no name, `column N` by position"
            odd.setdefault(f"{len(row)} fields where the header has {n}; {why}", []).append(line)
        for name in columns:
            columns[name].append(None)
        for name, cell in zip(under, cells):
            columns[name][-1] = cell if cell != "" else None
    notes = [(at[0], f"{len(at)} rows ({_line_span(at)}): {why}") for why, at in odd.items()]
    return columns, notes, bad


def _line_span(lines: list[int]) -> str:
    return f"line {lines[0]}" if len(lines) == 1 else f"lines {lines[0]}..{lines[-1]}"


def _empty_wide() -> pl.DataFrame:
    return pl.DataFrame(schema={"__line": pl.Int64})


def _line_issues(bad: list[tuple[int, str]], kind: str) -> list[Issue]:
    issues = [Issue(line, kind, f"line {line}: {why}; line skipped") for line, why in bad[:MAX_LISTED]]
    if len(bad) > MAX_LISTED:
        rest = [line for line, _ in bad[MAX_LISTED:]]
        issues.append(Issue(rest[0], kind, f"{len(rest)} more such lines skipped (lines {rest[0]}..{rest[-1]})"))
    return issues


# ------------------------------------------------------------------------------- wide rows -> points

# A long (tidy) table holds one point per row: the metric's name in one column, its value in another, e.g.
# `epoch,model,metric_name,metric_value`. Names compared exactly as written.
LONG_NAME_COLUMNS = ("metric_name", "metric", "name", "key", "tag", "variable")
LONG_VALUE_COLUMNS = ("metric_value", "value")


# Words that make a `*_loss` series no part of a sum: one side of a GAN (its losses pull against each other), a
# change between updates, a statistic over a window.
NOT_SUMMED = {"d", "g", "dis", "disc", "discriminator", "gen", "generator", "critic", "adv", "adversarial", "delta",
              "min", "max", "std", "var", "median"}


def loss_sums(tags: list[str]) -> dict[str, list[str]]:
    """The loss a table logs only in components, per split: {sum tag: component tags}.

    A table whose loss series are all components named `<what>_loss` (YOLO's `train/box_loss`, `train/cls_loss`,
    `train/dfl_loss`; `mse_loss`, `kl_loss`), with no total among them, trained on their sum: the sum is the run's
    loss, named `<prefix>loss (sum of ...)`. No sum where a total is logged, where any loss series of the split is
    not such a component (`LossPi`, `loss_cls`, a GAN's `gen/loss` beside `dis/loss`), where one is an agent's
    objective (`Policy_Loss`, an actor's -Q, beside a representation loss: `roles.RL_OBJECTIVE_WORDS`), or for a
    lone component."""
    from ingest.roles import RL_OBJECTIVE_WORDS, role_of, words

    by_role: dict[str, list[str]] = {}
    refused: set[str] = set()
    for tag in tags:
        r = role_of(tag)
        if r.role not in ("train_loss", "val_loss") or r.layer:
            continue
        w = words(tag)
        if r.canonical or w[-1:] != ["loss"] or set(w) & (NOT_SUMMED | RL_OBJECTIVE_WORDS):
            refused.add(r.role)
        by_role.setdefault(r.role, []).append(tag)
    out = {}
    for role, parts in by_role.items():
        if role in refused or len(parts) < 2:
            continue
        prefix = _common_prefix(parts)
        out[f"{prefix}loss (sum of {', '.join(p[len(prefix):] for p in parts)})"] = parts
    return out or head_sums(tags) or generator_sum(tags) or letter_sums(tags)


# A detector with several heads logs each loss term per head, the term then the head's qualifier (YOLOv10's one-to-many
# and one-to-one heads: `train/box_om`, `train/cls_om`, `train/dfl_om`, `train/box_oo`, `train/cls_oo`, `train/dfl_oo`).
_HEAD_TERM = re.compile(r"^(?P<prefix>.*?)(?P<term>[A-Za-z]+)_(?P<head>[A-Za-z0-9]+)$")


def head_sums(tags: list[str]) -> dict[str, list[str]]:
    """{`<prefix>loss (sum of box_om, ...)`: terms} for a table that logs its loss only as detection terms
    (`box`, `cls`, `dfl`, ... : `roles.DETECTION_LOSS_WORDS`) qualified by a head: under one prefix (`train/`,
    `val/`), two or more terms each logged for every one of the same heads, and no loss series of another name
    under that prefix. The training loss is the sum of every term of every head."""
    from ingest.roles import DETECTION_LOSS_WORDS, role_of

    grids: dict[str, dict[tuple[str, str], str]] = {}
    for tag in tags:
        if (m := _HEAD_TERM.match(tag)) and m["term"].lower() in DETECTION_LOSS_WORDS and role_of(tag).role == "other" \
                and role_of(m["head"]).role == "other":
            grids.setdefault(m["prefix"], {})[(m["term"], m["head"])] = tag
    out = {}
    for prefix, grid in grids.items():
        terms = {t for t, _ in grid}
        heads = {h for _, h in grid}
        others = [t for t in tags if t.startswith(prefix) and t not in grid.values()
                  and role_of(t).role in ("train_loss", "val_loss")]
        if len(terms) >= 2 and len(grid) == len(terms) * len(heads) and not others:
            parts = list(grid.values())
            out[f"{prefix}loss (sum of {', '.join(p[len(prefix):] for p in parts)})"] = parts
    return out


# A GAN's losses printed per network and per direction or kind: `D_A G_A cycle_A idt_A D_B G_B cycle_B idt_B`
# (CycleGAN: the generators' objective sums G_A, G_B, cycle_A, cycle_B, idt_A, idt_B), `G_GAN G_L1 D_real D_fake`
# (pix2pix: G_GAN + G_L1). The discriminator's terms are trained apart.
_NETWORK_TERM = re.compile(r"^([DG])_([A-Za-z][A-Za-z0-9]*)$")
GENERATOR_TOTALS = {"G", "loss_G", "G_loss", "errG", "Err_G", "lossG", "g_loss", "loss_g", "G_total"}


def generator_sum(tags: list[str]) -> dict[str, list[str]]:
    """{`loss (sum of G_A, ...)`: terms} for a GAN that prints its generator's objective only in terms: the
    `G_<q>` terms and every other term qualified as one of them is (`cycle_A` beside `G_A`), not the
    discriminator's `D_<q>`; nothing where a total is printed, no discriminator term is, or the generator has one
    term. The sum is the run's canonical loss: the objective the script minimises, not one network's term."""
    nets = {t: m.groups() for t in tags if (m := _NETWORK_TERM.match(t))}
    generator = {t for t, (net, _) in nets.items() if net == "G"}
    if not generator or len(generator) == len(nets) or GENERATOR_TOTALS & set(tags):
        return {}
    qualifiers = {q for t, (_, q) in nets.items() if t in generator}
    parts = [t for t in tags if t in generator or t not in nets and t.rpartition("_")[0]
             and t.rpartition("_")[2] in qualifiers]
    return {f"loss (sum of {', '.join(parts)})": parts} if len(parts) >= 2 else {}


# SSD-family trainers (RFBNet, PytorchSSD, FaceBoxes, ...) print their two loss terms by a letter each:
# `|| L: %.4f C: %.4f||` % (loss_l, loss_c), the localization and the confidence loss, and step on their sum. The same
# two letters beside `O` and `H` are a price bar's open, high, low and close, no loss.
LETTER_TERMS = ("L", "C")
NOT_LETTER_TERMS = {"O", "H"}


def letter_sums(tags: list[str]) -> dict[str, list[str]]:
    """{`loss (sum of L, C)`: [`L`, `C`]} for a log that prints its loss only as SSD's one-letter localization and
    confidence terms: both letters as whole names, no series named as a loss, and no price bar's other letters."""
    from ingest.roles import role_of

    names = set(tags)
    if not set(LETTER_TERMS) <= names or names & NOT_LETTER_TERMS \
            or any(role_of(t).role in ("train_loss", "val_loss") for t in tags):
        return {}
    return {f"loss (sum of {', '.join(LETTER_TERMS)})": list(LETTER_TERMS)}


def _common_prefix(tags: list[str]) -> str:
    """The path segments (`train/`) all tags share."""
    first = tags[0].rpartition("/")[0]
    return first + "/" if first and all(t.startswith(first + "/") for t in tags) else ""


def with_loss_sums(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` (long points of one table) with the sum series of `loss_sums` added: one point per record (position)
    that logged every component; a NaN component makes a NaN sum, as it made the run's loss."""
    if frame.is_empty():
        return frame
    sums = loss_sums(frame["tag"].cast(pl.Utf8).unique(maintain_order=True).to_list())
    if not sums:
        return frame
    added = []
    for tag, parts in sums.items():
        rows = (frame.filter(pl.col("tag").cast(pl.Utf8).is_in(parts))
                .group_by("position", maintain_order=True)
                .agg(pl.col("value").sum(), pl.len().alias("__n"),
                     *(pl.col(c).first() for c in frame.columns if c not in ("tag", "value", "position")))
                .filter(pl.col("__n") == len(parts)).drop("__n")
                .with_columns(pl.lit(tag).alias("tag")))
        added.append(rows.select(frame.columns))
    base = frame.with_columns(pl.col("tag").cast(pl.Utf8))
    return scalars_frame(pl.concat([base, *added]).sort("position", maintain_order=True))


def long_to_wide(wide: pl.DataFrame) -> pl.DataFrame:
    """A long table as the wide table `wide_to_points` reads: one column per metric name, prefixed by the row's
    other text cells (`generator.pt/train_mean_loss`: the model a row is about is part of what it measures).
    Any other table is returned as it is."""
    name = next((c for c in LONG_NAME_COLUMNS if c in wide.columns and wide.schema[c] == pl.Utf8), None)
    value = next((c for c in LONG_VALUE_COLUMNS if c in wide.columns), None)
    if name is None or value is None:
        return wide
    values, _ = _as_float(wide[value])
    if values is None or _as_float(wide[name])[0] is not None:
        return wide
    special = set(STEP_COLUMNS + TIME_COLUMNS + EPOCH_COLUMNS + BATCH_COLUMNS)
    qualifiers = [c for c in wide.columns if not c.startswith("__") and c not in (name, value)
                  and c not in special and _as_float(wide[c])[0] is None]
    tag = pl.concat_str([pl.col(c).fill_null("") for c in qualifiers] + [pl.col(name).fill_null("")],
                        separator="/") if qualifiers else pl.col(name).fill_null("")
    tags = wide.select(tag.alias("t"))["t"]
    keep = [c for c in wide.columns if c not in qualifiers and c not in (name, value)]
    columns = {t: pl.Series(t, values).zip_with(tags == t, pl.Series([None] * wide.height, dtype=pl.Float64))
               for t in tags.unique(maintain_order=True).to_list() if t not in keep}
    return wide.select(keep).with_columns(**columns)


def wide_to_points(wide: pl.DataFrame, *, position: str = "__line") -> tuple[pl.DataFrame, list[Issue]]:
    """Turn a wide table (one row per record) into the long scalars frame, choosing the special columns.

    `wide` holds the table's own columns (text or numeric) plus `position` (line number or row index)
    and `__ordinal` (the record's ordinal). Columns whose names start with `__` are ours, not the log's.
    """
    own = [c for c in wide.columns if not c.startswith("__")]
    issues: list[Issue] = []
    if len(own) > MAX_COLUMNS:
        issues.append(Issue(None, "too_large", f"{len(own):,} columns, more than the {MAX_COLUMNS:,} series a table "
                            f"may hold; kept the first {MAX_COLUMNS:,} (and any step, time, epoch or batch column)"))
        special = set(STEP_COLUMNS + TIME_COLUMNS + EPOCH_COLUMNS + BATCH_COLUMNS)
        own = own[:MAX_COLUMNS] + [c for c in own[MAX_COLUMNS:] if c in special]
    bad_cells: list[tuple[int, str]] = []
    positions = wide[position]
    numeric = _numeric_columns(wide, own)
    for name, (parsed, bad) in list(numeric.items()):
        numeric[name] = parsed
        if bad is not None and bad.any():
            for pos, cell in zip(positions.filter(bad).to_list(), wide[name].filter(bad).to_list()):
                bad_cells.append((pos, f"column {name!r} holds {cell!r}, not a number"))
    if bad_cells:
        bad_cells.sort()
        issues += [Issue(p, "garbled", f"line {p}: {why}; cell skipped") for p, why in bad_cells[:MAX_LISTED]]
        if len(bad_cells) > MAX_LISTED:
            issues.append(Issue(bad_cells[MAX_LISTED][0], "garbled",
                                f"{len(bad_cells) - MAX_LISTED} more non-numeric cells in numeric columns"))

    step_name = next((c for c in STEP_COLUMNS if c in numeric), None)
    ordinal = wide["__ordinal"].cast(pl.Int64)
    far = pl.Series([False] * wide.height, dtype=pl.Boolean)  # rows whose step the store cannot hold: skipped
    if step_name is None:
        step = ordinal
        is_ordinal = pl.Series([True] * wide.height, dtype=pl.Boolean)
    else:
        far = (numeric[step_name].is_finite() & (numeric[step_name].abs() >= 2.0**63)).fill_null(False)
        if far.any():
            lines = positions.filter(far).to_list()
            listed = ", ".join(map(str, lines[:MAX_LISTED])) + (" ..." if len(lines) > MAX_LISTED else "")
            issues.append(Issue(lines[0], "out_of_range", f"{len(lines)} rows whose {step_name!r} is past 64 bits "
                                                          f"(lines {listed}); skipped"))
        logged = _as_int(numeric.pop(step_name))
        step = logged.fill_null(ordinal)
        is_ordinal = logged.is_null()
    wall_time, time_name = _wall_time(wide, numeric)
    if time_name is not None:
        numeric.pop(time_name, None)
    epoch = _integral_column(numeric, EPOCH_COLUMNS)
    batch = _integral_column(numeric, BATCH_COLUMNS)

    if not numeric:
        return scalars_frame(None), issues
    base = pl.DataFrame({
        "position": positions.cast(pl.Int64), "step": step.cast(pl.Int64), "wall_time": wall_time,
        "epoch": epoch, "batch": batch, "ordinal": is_ordinal, "__far": far,
    })
    # Columns are renamed while unpivoting: a log may well have a column named `value` or `position`.
    names = {f"__m{i}": name for i, name in enumerate(numeric)}
    values = pl.DataFrame([s.alias(key) for key, s in zip(names, numeric.values())])
    long = (
        pl.concat([base, values], how="horizontal")
        .unpivot(on=list(names), index=list(base.columns), variable_name="tag", value_name="value")
        .filter(pl.col("value").is_not_null() & ~pl.col("__far"))  # null = not logged on this row; NaN stays
        .drop("__far")
        .with_columns(pl.col("tag").replace_strict(names, return_dtype=pl.Utf8))
        .sort("position", maintain_order=True)
    )
    return scalars_frame(long), issues


def _numeric_columns(wide: pl.DataFrame, names: list[str]) -> dict[str, tuple[pl.Series, pl.Series | None]]:
    """The numeric columns among `names`, in order: name -> (values as Float64, mask of non-empty cells that did
    not parse). Text columns are parsed in one pass over the table, not one select per column: a header of 10**6
    columns took 6 minutes one column at a time. The rule per column is `_as_float`'s."""
    schema = wide.schema  # built anew on each access: once, not once per column
    text = [n for n in names if schema[n] == pl.Utf8]
    counted: dict[str, tuple[int, int]] = {}
    parsed_all = pl.DataFrame()
    if text:
        stripped = _repr_cells(wide.select(_cells(pl.col(text))))
        parsed_all = stripped.select(pl.all().cast(pl.Float64, strict=False))
        present = stripped.select((pl.all().is_not_null() & (pl.all() != "")).sum()).row(0)
        parsed = parsed_all.select(pl.all().is_not_null().sum()).row(0)
        counted = {n: (int(p), int(q)) for n, p, q in zip(text, present, parsed)}
    out: dict[str, tuple[pl.Series, pl.Series | None]] = {}
    for name in names:
        if name not in counted:
            values, bad = _as_float(wide[name])
            if values is not None:
                out[name] = (values, bad)
            continue
        n_present, n_parsed = counted[name]
        if n_parsed == 0 or 2 * n_parsed < n_present:
            continue
        values = parsed_all[name]
        bad = None
        if n_parsed < n_present:
            cells = _cells(wide[name])
            bad = cells.is_not_null() & (cells != "") & values.is_null()
        out[name] = (values, bad)
    return out


# Cells that say "not logged" in words: Keras' CSVLogger writes NA for a key an epoch did not log (a validation
# every few epochs), R and spreadsheets NA or N/A, Python's str() None.
MISSING_WORDS = ("NA", "N/A", "None", "null")


def _cells(cells: pl.Expr | pl.Series) -> pl.Expr | pl.Series:
    """Cells stripped, with MISSING_WORDS as empty: not logged on that row, like an empty cell."""
    return cells.str.strip_chars().replace({word: "" for word in MISSING_WORDS})


def _repr_cells(cells: pl.DataFrame) -> pl.DataFrame:
    """Text columns with each cell that is a scalar's repr (`tensor(3.13, device='cuda:0')`, `np.float32(0.51)`,
    as pandas' `to_csv` writes a column of tensors) as the number it stands for (`ingest.reprs`); other cells as
    they are."""
    hinted = cells.select(pl.all().str.contains(REPR_HINT).any()).row(0) if cells.width else ()
    reprs = [name for name, found in zip(cells.columns, hinted) if found]
    if not reprs:
        return cells
    return cells.with_columns(pl.Series(name, [None if c is None else cell_number(c) or c for c in cells[name].to_list()],
                                        dtype=pl.Utf8) for name in reprs)


def _as_float(col: pl.Series) -> tuple[pl.Series | None, pl.Series | None]:
    """(values as Float64, mask of non-empty cells that did not parse), or (None, None) for a text column.

    A text column is one where fewer than half of the non-empty cells parse as numbers.
    """
    if col.dtype == pl.Boolean:
        return None, None
    if col.dtype.is_numeric():
        return col.cast(pl.Float64), None
    if col.dtype == pl.Datetime or col.dtype == pl.Date:
        return None, None
    if col.dtype != pl.Utf8:
        return None, None
    text = _repr_cells(_cells(col).to_frame()).to_series()
    parsed = text.cast(pl.Float64, strict=False)
    present = text.is_not_null() & (text != "")
    n_present = int(present.sum())
    n_parsed = int(parsed.is_not_null().sum())
    if n_parsed == 0 or 2 * n_parsed < n_present:
        return None, None
    return parsed, present & parsed.is_null()


def _as_int(values: pl.Series) -> pl.Series:
    """Integral float values as Int64; anything else (fractional, NaN, inf, past 64 bits) becomes null."""
    ok = values.is_finite() & (values == values.round(0)) & (values.abs() < 2.0**63)
    return pl.select(pl.when(ok).then(values).otherwise(None).cast(pl.Int64)).to_series()


def _integral_column(numeric: dict[str, pl.Series], names: tuple[str, ...]) -> pl.Series | None:
    """The first of `names` as Int64 when all its logged values are whole numbers (it stays a series too)."""
    for name in names:
        if name in numeric:
            values = numeric[name]
            as_int = _as_int(values)
            if as_int.null_count() == values.null_count():
                return as_int
            return None
    return None


def _wall_time(wide: pl.DataFrame, numeric: dict[str, pl.Series]) -> tuple[pl.Series | None, str | None]:
    """Seconds since the epoch from the first time column that holds wall-clock times, and its name."""
    for name in TIME_COLUMNS:
        if name not in wide.columns:
            continue
        if name in numeric:
            values = numeric[name]
            finite = values.filter(values.is_finite())
            if finite.len() == 0 or float(finite.min()) < EPOCH_SECONDS_MIN:
                continue  # durations, not times of day
            if float(finite.median()) > EPOCH_MILLIS_MIN:
                values = values / 1000.0
            return values, name
        col = wide[name]
        if col.dtype == pl.Datetime:
            return _datetime_seconds(col), name
        if col.dtype == pl.Utf8:
            parsed = col.str.strip_chars().str.to_datetime(strict=False, time_zone="UTC")
            if parsed.is_not_null().sum() * 2 >= col.is_not_null().sum() > 0:
                return _datetime_seconds(parsed), name
    return None, None


def _datetime_seconds(col: pl.Series) -> pl.Series:
    if col.dtype.time_zone is None:  # naive: taken as UTC, the writer's zone is unknown
        col = col.dt.replace_time_zone("UTC")
    return col.dt.epoch("us").cast(pl.Float64) / 1e6


# --------------------------------------------------------------------------------------------- JSONL


def read_jsonl(path: Path, start: int = 0) -> Iterator[Chunk]:
    """A JSON-lines metric log (`metrics.jsonl`, ...): one object per line; `start` is a byte offset.

    Python's json reads the `NaN` / `Infinity` tokens Python writers emit (polars' reader does not), so
    lines are parsed one by one. Nested objects are flattened with `/` (`{"train": {"loss": 1}}` gives
    the tag `train/loss`); strings, booleans and lists are skipped. Only complete lines are read.
    """
    raw = path.read_bytes()
    if (wide := wide_text(path.name, raw, start)) is not None:
        yield wide
        return
    if not raw.strip():
        yield Chunk(end=start, issues=[Issue(None, "empty", f"{path.name} is empty")])
        return
    body_end = raw.rfind(b"\n") + 1
    if body_end <= start:
        return
    line_no = raw.count(b"\n", 0, start) + 1
    cols: dict[str, list[Any]] = {k: [] for k in ("tag", "step", "value", "position", "wall_time", "epoch", "batch",
                                                  "ordinal")}
    bad: list[tuple[int, str]] = []
    far: list[tuple[int, str]] = []
    rounded: list[Issue] = []
    for line in raw[start:body_end].split(b"\n")[:-1]:
        here, line_no = line_no, line_no + 1
        if not line.strip():
            continue
        try:
            record = parse_json(line)
        except ValueError as exc:  # not JSON, not UTF-8, or nested past the document limits
            bad.append((here, f"not JSON ({exc.__class__.__name__}: {str(exc)[:80]})"))
            continue
        if not isinstance(record, dict):
            bad.append((here, f"a JSON {type(record).__name__}, not an object"))
            continue
        past: list[str] = []
        if (why := _record_points(dict(_flat_numbers(record, past=past)), here, here - 1, cols)) is not None:
            far.append((here, why))
        elif past and len(rounded) < MAX_LISTED:
            rounded.append(Issue(here, "out_of_range", f"line {here}: {', '.join(past)} past float64, stored as inf"))
    frame = scalars_frame(pl.DataFrame(cols, schema={"tag": pl.Utf8, "step": pl.Int64, "value": pl.Float64,
                                                     "position": pl.Int64, "wall_time": pl.Float64,
                                                     "epoch": pl.Int64, "batch": pl.Int64,
                                                     "ordinal": pl.Boolean}))
    yield Chunk(end=body_end, scalars=with_loss_sums(frame),
                issues=_line_issues(bad, "garbled") + _line_issues(far, "out_of_range") + rounded)


def _flat_numbers(record: dict, prefix: str = "", past: list[str] | None = None) -> Iterator[tuple[str, float]]:
    """A record's numbers under dotted/slashed names. An integer past float64 is the ±inf it rounds to, as the
    store holds it; its name and size go to `past` where the caller keeps them."""
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _flat_numbers(value, name + "/", past)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            number = as_float(value)
            if past is not None and math.isinf(number) and (isinstance(value, int) or isinstance(value, LongInteger)):
                past.append(f"{name} {describe_number(value)}")
            yield name, number
        elif isinstance(value, str) and (number := cell_float(value)) is not None:
            yield name, number  # a scalar's repr written as text (`"tensor(0.41)"`): the number it stands for


def _record_points(numbers: dict[str, float], position: int, ordinal: int, cols: dict[str, list]) -> str | None:
    """Append one record's points to the column lists, choosing step, wall time, epoch and batch. Returns why the
    record was skipped (a step past what the store holds), or None."""
    step_name = next((c for c in STEP_COLUMNS if c in numbers and _whole(numbers[c])), None)
    if step_name is not None and not fits_int64(int(numbers[step_name])):
        return f"its {step_name} {describe_number(int(numbers[step_name]))} is past 64 bits"
    step = int(numbers.pop(step_name)) if step_name else ordinal
    wall_time = None
    for name in TIME_COLUMNS:
        value = numbers.get(name)
        if value is not None and math.isfinite(value) and value >= EPOCH_SECONDS_MIN:
            wall_time = value / 1000.0 if value > EPOCH_MILLIS_MIN else value
            del numbers[name]
            break
    epoch = next((int(numbers[c]) for c in EPOCH_COLUMNS if c in numbers and _counter(numbers[c])), None)
    batch = next((int(numbers[c]) for c in BATCH_COLUMNS if c in numbers and _counter(numbers[c])), None)
    for tag, value in numbers.items():
        cols["tag"].append(tag)
        cols["step"].append(step)
        cols["value"].append(value)
        cols["position"].append(position)
        cols["wall_time"].append(wall_time)
        cols["epoch"].append(epoch)
        cols["batch"].append(batch)
        cols["ordinal"].append(step_name is None)


def _whole(value: float) -> bool:
    return math.isfinite(value) and value == int(value)


def _counter(value: float) -> bool:
    return _whole(value) and fits_int64(int(value))


# ------------------------------------------------------------------------------------------- Parquet


def read_parquet(path: Path, start: int = 0) -> Iterator[Chunk]:
    """A Parquet metric table, written whole: `start` is the first row index not yet read.

    Position and ordinal are the row index. A file that Parquet cannot read (cut short, not Parquet)
    is one Issue.
    """
    try:
        frame = pl.read_parquet(path)
    except (pl.exceptions.PolarsError, OSError) as exc:
        yield Chunk(end=start, issues=[Issue(None, "garbled", f"not a readable Parquet file: {str(exc)[:200]}")])
        return
    if frame.height <= start:
        return
    rows = frame.slice(start)
    index = pl.int_range(start, frame.height, dtype=pl.Int64, eager=True)
    rows = rows.with_columns(index.alias("__row"), index.alias("__ordinal"))
    scalars, issues = wide_to_points(rows, position="__row")
    yield Chunk(end=frame.height, scalars=with_loss_sums(scalars), issues=issues)


# --------------------------------------------------------------------------- tables under any name


def _head_lines(head: bytes) -> list[str]:
    """The complete lines of a file's first bytes (the last one may be cut), without blank ones."""
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    lines = text.split("\n")
    if len(lines) > 1:
        lines = lines[:-1]
    return [line.rstrip("\r") for line in lines if line.strip()]


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def table_separator(head: bytes) -> str | None:
    """The separator of a metric table with one header row, recognised by its first bytes whatever the file's name
    (Spinning Up's `progress.txt`, a CSV with no extension): tab or comma, the header's fields names (not all
    numbers), and every following line as many fields (give or take an empty last one), mostly numbers. None when
    the head is no such table."""
    lines = _head_lines(head)
    if len(lines) < 2:
        return None
    for sep in ("\t", ","):
        header = lines[0].split(sep)
        if len(header) < 2 or all(_is_number(c) for c in header if c.strip()):
            continue
        rows = [line.split(sep) for line in lines[1:]]
        if any(len(r) != len(header) and not _trailing_separator(r, header) for r in rows):
            continue
        cells = [c.strip() for r in rows for c in r if c.strip()]
        if cells and sum(_is_number(c) for c in cells) * 2 >= len(cells):
            return sep
    return None


def _trailing_separator(row: list[str], header: list[str]) -> bool:
    """Whether a row's fields differ from its header's only by an empty last field on one of them."""
    longer, shorter = (row, header) if len(row) > len(header) else (header, row)
    return len(longer) == len(shorter) + 1 and not longer[-1].strip()


def headerless_separator(head: bytes) -> str | None:
    """The separator of a table of numbers with no header row (numpy.savetxt of a 2-D array, `f.write(f"{a},{b}\\n")`):
    every line the same count of fields, every field a number. Its columns are named by position: nothing says
    what they hold."""
    lines = _head_lines(head)
    if len(lines) < 2:
        return None
    for sep in ("\t", ","):
        rows = [line.split(sep) for line in lines]
        if len(rows[0]) >= 2 and all(len(r) == len(rows[0]) and all(_is_number(c) for c in r) for r in rows):
            return sep
    return None


def single_values(head: bytes) -> bool:
    """Whether a file's first bytes are numbers one per line with no header (numpy.savetxt of a 1-D array)."""
    lines = _head_lines(head)
    return len(lines) >= 2 and all(_is_number(line.strip()) and " " not in line.strip() for line in lines)


# YOLOv5's (and YOLOv3's, YOLOv7's) results.txt: one headerless row per epoch, `%10s` x 2 then `%10.4g` x 13:
# epoch/last epoch, GPU memory, the mean train losses (box, objectness, class, their total), targets in the last
# batch, image size, then test's precision, recall, mAP@.5, mAP@.5:.95 and its val losses (box, obj, cls). YOLOv3
# puts F1 where v5 has mAP@.5:.95. Named as YOLOv5's later results.csv names them.
YOLO_TXT_COLUMNS = ("epoch", "gpu_mem GB", "train/box_loss", "train/obj_loss", "train/cls_loss", "train/total_loss",
                    "targets", "img_size", "metrics/precision", "metrics/recall", "metrics/mAP_0.5",
                    "metrics/mAP_0.5:0.95", "val/box_loss", "val/obj_loss", "val/cls_loss")
_YOLO_ROW = re.compile(r"^\s*(\d+)/\d+\s+([\d.]+)([KMG]?)\s+(\S+(?:\s+\S+){12})\s*$")


def yolo_results_rows(head: bytes) -> bool:
    """Whether a file's first bytes are rows of YOLO's headerless results.txt (see YOLO_TXT_COLUMNS)."""
    lines = _head_lines(head)
    return bool(lines) and all(_YOLO_ROW.match(line) for line in lines)


def sniff_table(head: bytes) -> bool:
    """A metric table under a name no table format claims: with a header row, one number per line, YOLO's
    headerless results.txt, or numbers with no header."""
    return (table_separator(head) is not None or single_values(head) or yolo_results_rows(head)
            or headerless_separator(head) is not None)


def read_table(path: Path, start: int = 0) -> Iterator[Chunk]:
    """A table `sniff_table` recognised, by the shape it recognised; `start` is a byte offset."""
    with path.open("rb") as f:
        head = f.read(4096)
    sep = table_separator(head)
    if sep is not None:
        yield from _read_delimited(path, start, sep)
    elif yolo_results_rows(head):
        yield from _read_rows(path, start, _yolo_row)
    elif (bare := headerless_separator(head)) is not None:
        names = _headerless_names(head, bare, _file_quantity(path))
        yield from _read_rows(path, start, lambda line: list(zip(names, map(float, line.split(bare)), strict=True)))
    else:
        yield from _read_rows(path, start, lambda line: [(_file_quantity(path), float(line))])


def _file_quantity(path: Path) -> str:
    """What a file of bare numbers holds, as its name says (`train_loss`, `loss_log.txt`)."""
    return path.name if "." not in path.name[1:] else path.stem


def _headerless_names(head: bytes, sep: str, quantity: str) -> list[str]:
    """Columns of numbers with no header are named by position, except that a file named for a quantity with a
    role (`loss_log.txt` holding `f"{loss},{reward}"` per episode) names its first column that is not a counter
    (whole numbers counting up: an epoch or episode index), as a one-column file is named by its file. A counter
    that starts again (`_counts_again`: launches appended to the file) is the epoch."""
    from ingest.roles import role_of

    rows = [[float(c) for c in line.split(sep)] for line in _head_lines(head)]
    names = [f"column {i}" for i in range(1, len(rows[0]) + 1)]
    if role_of(quantity).role == "other":
        return names
    for i in range(len(names)):
        column = [r[i] for r in rows]
        if _counts_again(np.asarray(column)):
            names[i] = "epoch"  # its rows go on, so the engine reads each start as a launch's (`Run.epoch_resets`)
            continue
        counts = all(v == int(v) for v in column) and all(b > a for a, b in zip(column, column[1:]))
        if not counts:
            names[i] = quantity
            break
    return names


def _yolo_row(line: str) -> list[tuple[str, float]]:
    m = _YOLO_ROW.match(line)
    if m is None:
        raise ValueError("not a row of YOLO's results.txt")
    epoch, mem, unit, rest = m.groups()
    gigabytes = float(mem) * {"": 1e-9, "K": 1e-6, "M": 1e-3, "G": 1.0}[unit]
    values = [float(epoch), gigabytes] + [float(v) for v in rest.split()]
    return list(zip(YOLO_TXT_COLUMNS, values, strict=True))


def _read_rows(path: Path, start: int, parse) -> Iterator[Chunk]:
    """A headerless table read line by line with `parse(line) -> [(tag, value)]`; the line's 0-based index is the
    step (an ordinal, DECISIONS §2) unless a tag is `epoch`. Lines that do not parse are issues."""
    raw = path.read_bytes()
    if (wide := wide_text(path.name, raw, start)) is not None:
        yield wide
        return
    end = raw.rfind(b"\n") + 1
    if end >= start and raw[end:].strip() and _still(path):
        end = len(raw)  # a last line with no newline in a file no longer written: a whole row (a cut one is an issue)
    if end <= start:
        return
    line_no = raw.count(b"\n", 0, start) + 1
    cols: dict[str, list[Any]] = {k: [] for k in ("tag", "step", "value", "position", "wall_time", "epoch", "batch",
                                                  "ordinal")}
    bad: list[tuple[int, str]] = []
    for line in raw[start:end].decode("utf-8", errors="replace").split("\n"):
        here, line_no = line_no, line_no + 1
        if not line.strip():
            continue
        try:
            record = dict(parse(line.rstrip("\r")))
        except ValueError as exc:
            bad.append((here, f"not a row of this table ({exc})"))
            continue
        _record_points(record, here, here - 1, cols)
    frame = scalars_frame(pl.DataFrame(cols, schema={"tag": pl.Utf8, "step": pl.Int64, "value": pl.Float64,
                                                     "position": pl.Int64, "wall_time": pl.Float64,
                                                     "epoch": pl.Int64, "batch": pl.Int64,
                                                     "ordinal": pl.Boolean}))
    yield Chunk(end=end, scalars=frame, issues=_line_issues(bad, "garbled"))
