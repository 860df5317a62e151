"""DVCLive's folder (`dvclive/` by default): `metrics.json`, the last value of each metric, beside
`plots/metrics/<name>.tsv`, one table of `step` and the metric per metric (`train/loss` in `plots/metrics/train/`).

The TSVs are the series (`tabular.read_csv` reads each one on its own step column); the summary is stored whole as
a document, never as points that would repeat each series' last value at another step. What no single TSV holds
is a loss logged only in components, one file each (Ultralytics' DVCLive callback writes `train/box_loss.tsv`,
`train/cls_loss.tsv`, `train/dfl_loss.tsv`): the summary's reader adds their sum (`tabular.loss_sums`) on the steps
every component logged. DVCLive before 1.0 wrote the summary as `<dir>.json` beside `<dir>/`.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import polars as pl

from ingest.records import Issue, scalars_frame

PLOTS = ("plots", "metrics")
MAX_TABLES = 2_000  # a DVCLive folder holds tens of metrics; past this, a folder of someone else's TSVs


def plots_beside(summary: Path) -> Path | None:
    """The folder of per-metric TSVs a DVCLive summary stands for, or None when the document is no such summary."""
    for folder in (summary.parent.joinpath(*PLOTS), summary.with_suffix("")):
        if folder != summary and folder.is_dir() and next(folder.rglob("*.tsv"), None) is not None:
            return folder
    return None


def component_sums(plots: Path, start: int = 0) -> tuple[pl.DataFrame | None, int, list[Issue]]:
    """The sum of each loss the folder's TSVs log only in components, one point per step all of them logged, from
    the `start`-th point on (the summary is rewritten whole: `start` counts points already stored); the count of
    points, and what could not be read."""
    from ingest.tabular import loss_sums, read_csv

    tables = sorted(plots.rglob("*.tsv"))[:MAX_TABLES]
    names = {PurePosixPath(p.relative_to(plots).with_suffix("").as_posix()): p for p in tables}
    sums = loss_sums([str(n) for n in names])
    if not sums:
        return None, 0, []
    frames, issues = [], []
    for tag, parts in sums.items():
        series = []
        for part in parts:
            path = names[PurePosixPath(part)]
            chunks = list(read_csv(path, 0))
            issues += [i for c in chunks for i in c.issues if i.kind != "realigned"]
            points = pl.concat([scalars_frame(c.scalars) for c in chunks])
            series.append(points.filter(pl.col("tag") == path.stem).select("step", pl.col("value").alias(part))
                          .unique("step", keep="last", maintain_order=True))
        joined = series[0]
        for other in series[1:]:
            joined = joined.join(other, on="step", how="inner", maintain_order="left")
        frames.append(joined.sort("step").select(pl.lit(tag).alias("tag"), "step",
                                                 pl.sum_horizontal(parts).alias("value")))
    points = pl.concat(frames).with_row_index("position").with_columns(pl.col("position").cast(pl.Int64))
    return scalars_frame(points.slice(start)) if points.height > start else None, points.height, issues
