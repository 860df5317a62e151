"""Lightning's CSVLogger `metrics.csv`: sparse rows of `epoch`, `step` and every logged metric.

Checked against lightning's `_ExperimentWriter` (fabric/loggers/csv_logs.py, 2.x): each `log_metrics`
call is one row with `step` added, and `save()` writes the union of all keys seen so far as the header
through `csv.DictWriter`, so a metric's empty cell means "not logged on this row". `step` is Lightning's
0-based global step and is stored as is (DECISIONS §2). Older versions rewrite the whole file on each
save, newer ones append and rewrite only when a new key appears; either way the header can change under
us, so the file is treated as rewritten whole: `start` is the first data-row index not yet read and
`position` is the row's line number. `hparams.yaml` beside it is read by `ingest.configs`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl

from ingest.decoding import wide_text
from ingest.records import Chunk, Issue
from ingest.tabular import STEP_COLUMNS, parse_csv_rows, wide_to_points


def read_metrics_csv(path: Path, start: int = 0) -> Iterator[Chunk]:
    """All rows from data-row index `start` on, including a last line cut short (it becomes an Issue)."""
    raw = path.read_bytes()
    if (wide := wide_text(path.name, raw, start)) is not None:
        yield wide
        return
    if not raw.strip():
        yield Chunk(end=start, issues=[Issue(None, "empty", f"{path.name} is empty")])
        return
    header_end = raw.find(b"\n")
    if header_end < 0:
        yield Chunk(end=start, issues=[Issue(1, "truncated", "metrics.csv holds only part of its header line")])
        return
    wide, issues = parse_csv_rows(raw[: header_end + 1], raw[header_end + 1 :], 2)
    # Data-row index: what `start` counts. Rows are counted as parsed (blank and garbled lines are not rows).
    wide = wide.with_columns(pl.int_range(0, wide.height, dtype=pl.Int64).alias("__row"))
    n_rows = wide.height
    wide = wide.filter(pl.col("__row") >= start)
    if not any(c in wide.columns for c in STEP_COLUMNS if c):  # another counter's column is the step (`tabular`)
        issues.append(Issue(1, "no_step", "metrics.csv has no `step` column; steps are the rows' ordinals"))
    wide = wide.with_columns(pl.col("__row").alias("__ordinal"))
    scalars, more = wide_to_points(wide)
    yield Chunk(end=max(n_rows, start), scalars=_eval_batches_at_their_step(wide, scalars), issues=issues + more)


def _eval_batches_at_their_step(wide: pl.DataFrame, scalars: pl.DataFrame) -> pl.DataFrame:
    """Metrics logged per batch in validation or test (`self.log(..., on_step=True)` in `validation_step`) are
    written by `update_eval_step_metrics` with `step` = the evaluation's own batch count (0, 1, ... again at each
    evaluation), and no `epoch` (only rows logged at the global step get one). On the global-step axis those
    points would land at the run's first steps, once per evaluation. Such a row (no epoch, only val/test
    metrics) keeps its logged count as the point's `batch` and takes the global step the evaluation ran at: the
    step of the next row that has an epoch (the evaluation's end row is logged at the global step), else the last
    one before it."""
    from ingest.roles import role_of

    if "epoch" not in wide.columns or "step" not in wide.columns or scalars.is_empty():
        return scalars
    metrics = [c for c in wide.columns if not c.startswith("__") and c not in ("epoch", "step")]
    held_out = [c for c in metrics if role_of(c).split in ("val", "test")]
    if not held_out:
        return scalars

    def present(c: str) -> pl.Expr:
        return pl.col(c).is_not_null() & (pl.col(c).cast(pl.Utf8).str.strip_chars() != "")

    others = [c for c in metrics if c not in held_out]
    is_eval = ~present("epoch") & pl.any_horizontal([present(c) for c in held_out])
    if others:
        is_eval = is_eval & ~pl.any_horizontal([present(c) for c in others])
    rows = wide.select(pl.col("__line"), is_eval.alias("eval"),
                       pl.when(~is_eval).then(pl.col("step").cast(pl.Utf8).str.strip_chars()
                                              .cast(pl.Float64, strict=False)).alias("at"))
    if not rows["eval"].any():
        return scalars
    rows = rows.with_columns(pl.col("at").backward_fill().fill_null(strategy="forward").cast(pl.Int64))
    eval_rows = rows.filter(pl.col("eval") & pl.col("at").is_not_null()).select(
        pl.col("__line").alias("position"), pl.col("at"))
    joined = scalars.join(eval_rows, on="position", how="left", maintain_order="left")
    return joined.with_columns(
        pl.when(pl.col("at").is_not_null()).then(pl.col("step")).otherwise(pl.col("batch")).alias("batch"),
        pl.coalesce("at", "step").alias("step")).drop("at").select(scalars.columns)
