"""What a reader returns: frames of points plus the issues it met, in chunks, and where to go on next time.

Every reader is pure: it reads one file (from a resume position) and yields `Chunk`s; it never touches the
database. `ingest.run` buffers chunks and writes them through `ingest.writes`. Column names and types are
fixed here so that every reader agrees.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

# Required columns first; the optional ones are filled with nulls by `conform`.
SCALAR_COLUMNS: dict[str, pl.DataType] = {
    "tag": pl.Utf8,  # or pl.Categorical, kept as such: a compiled reader's interned tags map to series cheaply
    "step": pl.Int64,
    "value": pl.Float64,
    "position": pl.Int64,  # byte offset of the record, or line / entry index
    "wall_time": pl.Float64,  # optional: seconds since the epoch
    "epoch": pl.Int64,  # optional
    "batch": pl.Int64,  # optional
    "ordinal": pl.Boolean,  # optional: True when `step` is the record's ordinal, not a logged step
}
SCALAR_REQUIRED = ("tag", "step", "value", "position")

HISTOGRAM_COLUMNS: dict[str, pl.DataType] = {
    "tag": pl.Utf8,
    "step": pl.Int64,
    "position": pl.Int64,
    "wall_time": pl.Float64,
    "bucket_limits": pl.List(pl.Float64),
    "bucket_counts": pl.List(pl.Float64),
    "min": pl.Float64,
    "max": pl.Float64,
    "num": pl.Float64,
    "sum": pl.Float64,
    "sum_squares": pl.Float64,
    "mean": pl.Float64,  # derived by the reader from sum/num
    "std": pl.Float64,  # derived from sum_squares
    "zero_fraction": pl.Float64,  # mass of the bucket holding 0, over num
}
HISTOGRAM_REQUIRED = ("tag", "step", "position", "bucket_limits", "bucket_counts")

TEXT_COLUMNS: dict[str, pl.DataType] = {
    "tag": pl.Utf8,
    "step": pl.Int64,
    "position": pl.Int64,
    "wall_time": pl.Float64,
    "text": pl.Utf8,
}
TEXT_REQUIRED = ("tag", "position", "text")


@dataclass(frozen=True)
class Issue:
    """Something a reader skipped or could not make sense of. `position` is a byte offset or a line number."""

    position: int | None
    kind: str  # a key of READ_PROBLEMS
    detail: str


# Every kind of read problem a reader may store, once: whether it lost evidence (`lossy`: what could not be read may
# hold the failure, so a run with nothing else found is inconclusive) and what it means. A reader that stores a kind
# missing here fails tests/test_records.py.
READ_PROBLEMS: dict[str, tuple[bool, str]] = {  # kind: (lossy, meaning)
    "truncated": (True, "the file ends inside a record (an append-only log's last record is the one in flight)"),
    "crc_mismatch": (True, "a record fails its checksum; skipped to the next"),
    "bad_length": (True, "a record's length field does not fit; skipped to the next"),
    "garbled": (True, "a record, line or cell does not parse; skipped"),
    "unreadable": (True, "the file or folder cannot be opened or read"),
    "not_this_format": (True, "named like a format it does not hold"),
    "lfs_pointer": (True, "a Git LFS pointer checked out in place of the file: its content is on the LFS server"),
    "too_large": (True, "over a size or column limit; not read"),
    "too_many_series": (True, "a file naming more distinct series than a run logs; the points of the rest skipped"),
    "wide_text": (True, "a log of lines written as UTF-16 or UTF-32 text, which its reader does not read; not read"),
    "missing_dependency": (True, "the reader's package or compiled core is not installed"),
    "needs_pickle": (True, "readable only by unpickling, which runs code: read with --trust-pickle"),
    "missing_shard": (True, "a sharded checkpoint names a shard that is not there"),
    "no_tensors": (True, "a batch or checkpoint file holds no tensors"),
    "unsupported_dtype": (True, "a tensor's dtype this reader cannot decode"),
    "out_of_range": (True, "a number past what the store holds (a step past 64 bits: its record skipped; an "
                           "integer past float64: stored as ±inf; a position past 64 bits: stored as none)"),
    "empty": (False, "the file is empty"),
    "deleted": (False, "the file is gone since it was read; what was read is kept"),
    "rewritten": (False, "the file was rewritten since the last ingest; read again from the start"),
    "outside_run": (False, "a link to a file outside the run folder; not followed"),
    "unknown_file": (False, "no reader knows this file"),
    "unread_text": (False, "a text file of the run no reader took, with why (what its sampled lines hold)"),
    "realigned": (False, "table rows with more or fewer fields than their header, or a header written again, read by "
                         "the rule named (an empty field dropped, unnamed extra columns, missing cells not logged)"),
    "no_step": (False, "no step column; steps are the rows' ordinals"),
    "skipped_values": (False, "values that are not scalars; not stored"),
    "lines_read": (False, "how many lines of a console log gave metrics"),
    "unmatched_lines": (False, "lines that look like metrics but no pattern read"),
    "no_loss_named": (False, "a text log read whole in which no series is named as a training loss; what it prints "
                             "instead is said (or that none of its lines gave a value)"),
    "assumed_date": (False, "time stamps without a date were placed on an assumed date"),
    "untrusted_pickle_read": (False, "a pickle was unpickled because --trust-pickle was given"),
    "settings_unread": (False, "a settings file (training_args.bin) that could not be read; the logs are read"),
    "not_settings": (False, "a JSON document with no metrics and too many values to be settings (a data set's?)"),
    "loss_by_elimination": (False, "no series is named as the training loss; the one loss-like value printed on "
                                   "every training record, or the one column of unnamed values a user would read as "
                                   "the loss, was taken as it (its name is said: check it)"),
    "unread_values": (False, "values in a metrics document that are not numbers (objects, text); skipped"),
}


def lossy(kind: str) -> bool:
    """Whether a read problem of `kind` lost evidence (an unknown kind is taken as lossy: nothing vouches for it)."""
    return READ_PROBLEMS.get(kind, (True, ""))[0]


@dataclass
class Chunk:
    """One piece of a file's content. `end` is where a later ingest resumes once this chunk is stored.

    `configs` maps a document name to its (nested) content.
    """

    end: int
    scalars: pl.DataFrame | None = None
    histograms: pl.DataFrame | None = None
    texts: pl.DataFrame | None = None
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    issues: list[Issue] = field(default_factory=list)


def conform(frame: pl.DataFrame | None, columns: dict[str, pl.DataType], required: tuple[str, ...]) -> pl.DataFrame:
    """Cast `frame` to the fixed column set: required columns must be present, optional ones become nulls."""
    if frame is None:
        return pl.DataFrame(schema=columns)
    if list(frame.schema) == list(columns) and all(_conformed(frame.schema[n], t) for n, t in columns.items()):
        return frame  # already conformed (the store conforms what a reader conformed): no pass over 10M rows
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise ValueError(f"reader frame lacks required columns {missing}; has {frame.columns}")
    return frame.select(
        _keep_or_cast(frame, name, dtype) if name in frame.columns else pl.lit(None, dtype=dtype).alias(name)
        for name, dtype in columns.items()
    )


def _conformed(have: pl.DataType, want: pl.DataType) -> bool:
    return have == want or (want == pl.Utf8 and isinstance(have, (pl.Enum, pl.Categorical)))


def _keep_or_cast(frame: pl.DataFrame, name: str, dtype: pl.DataType) -> pl.Expr:
    # A text column may come as a Categorical (tags interned by a compiled reader): keep it so.
    if dtype == pl.Utf8 and isinstance(frame.schema[name], (pl.Enum, pl.Categorical)):
        return pl.col(name)
    return pl.col(name).cast(dtype)


def scalars_frame(frame: pl.DataFrame | None) -> pl.DataFrame:
    return conform(frame, SCALAR_COLUMNS, SCALAR_REQUIRED)


def histograms_frame(frame: pl.DataFrame | None) -> pl.DataFrame:
    return conform(frame, HISTOGRAM_COLUMNS, HISTOGRAM_REQUIRED)


def texts_frame(frame: pl.DataFrame | None) -> pl.DataFrame:
    return conform(frame, TEXT_COLUMNS, TEXT_REQUIRED)
