"""A read-only view of one ingested run for detectors: series by role or name, configs, checkpoint and batch tables.

Detectors never see SQL or files: they ask `run.series("loss")` and get a polars frame of
(step, value, wall_time), one row per logged step, sorted by step. A logical name resolves through
`ROLES` to the series' role set by ingest; where several series share a role, a curve wins over its echo (a
one- or two-point summary beside it: `echoes`), then the run's canonical one (`loss`, not `recon_loss`), then the
one with the most points (the loss in TensorBoard over the same
loss in a console log), ties broken by name, so the choice is deterministic and `run.pick(...)` says
which one was read.

A series longer than `long_series` points (the analysis' `Selection.long_series`, `LONG_SERIES` here
by default) is never held whole: it is read *reduced*, M4 in DuckDB (`ingest.queries.series_reduced`: per bucket the
first, lowest, highest and last point with their real steps, stamps and exact values, and the first point of each
non-finite kind), so an analysis holds at most ~`long_series / 2` points of it whatever its length. Detectors
read it through the same `series`/`arrays`/`spikes`/`points`; `run.reduced(name)` says when they do. What must stay
exact comes from the store instead: the point count (`finite_points`), the first non-finite step (kept by M4), and
the places its steps go back in write order (`write_order`, for resumed_run).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from forensics.judge.stats import SpikeRule
from ingest.announcements import read as read_announcement
from ingest.formats import FORMATS
from ingest.roles import SPLIT_WORDS, words

# A series of more points than this is read reduced (M4 in the store, a few points per bucket: below), so an
# analysis holds a bounded number of points whatever the length of a run. Above every series of every
# real run, corpus and gallery run we judge on (the largest: 63,000 points, in shared/real_runs_test; the corpus
# trains 2,500 steps at most), so their findings are those of the whole series.
LONG_SERIES = 1_000_000

# Logical names detectors use -> the role ingest stored in series.role.
ROLES: dict[str, str] = {
    "loss": "train_loss", "train_loss": "train_loss", "val_loss": "val_loss", "accuracy": "accuracy",
    "val_accuracy": "val_accuracy", "grad_norm": "grad_norm", "layer_grad_norm": "layer_grad_norm",
    "weight_norm": "weight_norm", "layer_weight_norm": "layer_weight_norm", "lr": "lr",
    "loss_scale": "loss_scale", "skipped_steps": "skipped_steps", "memory": "memory", "throughput": "throughput", "step_time": "step_time",
    "epoch": "epoch", "dead_fraction": "dead_fraction", "saturated_fraction": "saturated_fraction",
    "update_ratio": "update_ratio", "clip_rate": "clip_rate", "clip_threshold": "clip_threshold",
}

META_SCHEMA = {"series_id": pl.Int64, "grp": pl.Utf8, "tag": pl.Utf8, "name": pl.Utf8, "role": pl.Utf8,
               "split": pl.Utf8, "layer": pl.Utf8, "canonical": pl.Boolean, "ordinal": pl.Boolean, "n_points": pl.Int64,
               "n_nonfinite": pl.Int64, "format": pl.Utf8}


# Formats whose steps are the writer's own text, not a structured log's record (DECISIONS §2, §16): each format
# says so on its row.
TEXT_FORMATS = frozenset(f.name for f in FORMATS if f.text)


def usable_series(meta: pl.DataFrame, role: str) -> pl.DataFrame:
    """The series of `role` a detector may read, by the axis rule of DECISIONS §16 (a pure function of the
    run's series list, META_SCHEMA rows):

    1. a console log beside a structured log (W&B, TensorBoard, trainer_state, metrics.csv, MLflow) only fills
       what the structured log lacks: when a structured series of this role holds a curve (two points or more,
       and no echo: `echoes`), console series of it drop out (the same metric from two sources is one series,
       the structured one); a summary's one last value (W&B's wandb-summary.json kept without its history)
       displaces no console curve;
    2. an ordinal axis (line counters, DECISIONS §2) never shares a role with logged steps: when a series of
       this role has logged steps and is no echo, ordinal ones drop out.
    What is left keeps its own axis; a role only the console log has (a loss scale, a step time) is kept.
    """
    m = meta.filter(pl.col("role") == role)
    if m.height < 2:
        return m
    curve = ~echoes(m)
    text = m["format"].is_in(list(TEXT_FORMATS)).fill_null(False)
    if bool((~text & (m["n_points"].fill_null(0) > 1) & curve).any()):
        m, curve = m.filter(~text), curve.filter(~text)
    ordinal = m["ordinal"].fill_null(False)
    if bool((~ordinal & curve).any()):
        m = m.filter(~ordinal)
    return m


# A series of a role holding fewer than ECHO_POINTS points while another of the same role holds ECHO_SHARE times
# as many or more is an echo of that curve (a one-line summary, a per-evaluation `train loss` beside the per-step
# loss): it never stands for the role in place of the curve.
ECHO_POINTS = 10
ECHO_SHARE = 5


def echoes(m: pl.DataFrame) -> pl.Series:
    """For rows of one role (META_SCHEMA), whether each is an echo of a longer series of the role (ECHO_POINTS)."""
    n = m["n_points"].fill_null(0)
    return (n < ECHO_POINTS) & (n * ECHO_SHARE <= (n.max() or 0))


def fresh_starts(steps: np.ndarray) -> np.ndarray:
    """Where a step counter, in write order, starts again from the beginning: indices whose step is below the one
    before and at or below every step logged before it (a counter that restarts at every epoch or phase, or a new
    launch appended to the same log). A run resumed from a checkpoint goes back to a step it had passed instead."""
    steps = np.asarray(steps)
    if steps.size < 2:
        return np.array([], dtype=np.int64)
    back = np.flatnonzero(np.diff(steps) < 0) + 1
    return back[from_the_start(steps, back)]


def from_the_start(steps: np.ndarray, back: np.ndarray, start: float | None = None) -> np.ndarray:
    """For indices `back` where `steps` (write order) go back: whether each goes back to the beginning, at or
    below every step before it (and at or below `start`, where given: the lowest step of a series whose write order
    is read around its breaks only)."""
    lowest = np.minimum.accumulate(np.asarray(steps))
    if start is not None:
        lowest = np.minimum(lowest, start)
    return np.asarray(steps)[back] <= lowest[np.asarray(back) - 1]


def copied(steps: list, values: list) -> list[bool]:
    """Per point in write order, whether it is a copy of one written before: the same step and value as the point
    right before it (a line printed twice), or as an earlier point whose neighbour is copied too (a stretch of the log
    written again). A lone point equal to another pass's (a value printed with few digits) is its own record."""
    pairs = list(zip(steps, values))
    seen: dict[tuple, list[int]] = {}
    out = [False] * len(pairs)
    for i, p in enumerate(pairs):
        earlier = seen.setdefault(p, [])
        out[i] = bool(earlier) and (earlier[-1] == i - 1 or any(
            (j > 0 and pairs[i - 1] == pairs[j - 1]) or (i + 1 < len(pairs) and pairs[i + 1] == pairs[j + 1])
            for j in earlier))
        earlier.append(i)
    return out


CUT_POINTS = 3  # a cut line leaves a point or two (its metrics) at the broken step, never a stretch


def cut_lines(steps: np.ndarray) -> np.ndarray:
    """Per point in write order, whether it was read from a cut line: a step that goes back, held by one point (or a
    few at that one step), after which the counter goes on past the step before it. Another writer's output broke
    the line (`Iter: 175` + a timestamp, the rest of `1757500` on the next line): the counter never went back, so
    this is neither a resume nor a launch. A resume or a new launch goes on from the lower step."""
    steps = np.asarray(steps)
    out = np.zeros(steps.size, dtype=bool)
    for i in np.flatnonzero(np.diff(steps) < 0) + 1:
        j = i
        while j < steps.size and steps[j] == steps[i] and j - i < CUT_POINTS:
            j += 1
        if j < steps.size and steps[j] > steps[i - 1] and not out[i - 1]:
            out[i:j] = True
    return out


def composed_steps(steps: np.ndarray) -> np.ndarray:
    """Steps in write order with each pass that starts again from the beginning (`fresh_starts`) placed after the
    one before: its steps shifted to begin one logging interval (its own median spacing) past the highest step
    so far. Per-epoch batch counters of equal epochs come out as the global step."""
    steps = np.asarray(steps, dtype=np.int64)
    bounds = [0, *fresh_starts(steps).tolist(), steps.size]
    out = steps.copy()
    top = None
    for a, b in zip(bounds[:-1], bounds[1:]):
        seg = steps[a:b]
        gaps = np.diff(seg)
        gap = int(np.median(gaps[gaps > 0])) if np.any(gaps > 0) else 1
        if top is not None:
            out[a:b] = seg - seg.min() + top + gap
        top = int(out[a:b].max())
    return out


# A number of epochs, steps or updates this large is a writer's stand-in for "no limit" (HF writes sys.maxsize as
# `num_train_epochs` when `max_steps` bounds an iterable dataset): no run is planned that long.
LENGTH_SENTINEL = 1e9
LENGTH_WORDS = frozenset({"epoch", "epochs", "step", "steps", "iter", "iters", "iteration", "iterations", "update",
                          "updates"})


def sentinel(key: str, value: float) -> bool:
    """Whether a config number is a length-of-training sentinel (`LENGTH_SENTINEL`), not a plan."""
    return abs(value) >= LENGTH_SENTINEL and bool(LENGTH_WORDS & set(words(key.rpartition(".")[2])))


# Words of a held-out error that falls as the model learns (`Test_RMSE`, `val_mae`, `eval_wer`, `valid_error`): where
# no validation loss is logged, such a series is the held-out curve (`held_out_errors`). A task score that rises as
# the model learns (accuracy, F1, BLEU) is not: it would read upside down.
HELD_OUT_ERROR_WORDS = frozenset({"rmse", "mae", "mse", "error", "err", "cer", "wer", "mape", "smape", "nrmse"})
NOT_THE_CURVE_WORDS = frozenset({"best", "min", "max", "std", "count", "num", "n"})  # a running best, a count


def held_out_errors(meta: pl.DataFrame) -> pl.DataFrame:
    """Rows of a held-out split's lower-is-better error (HELD_OUT_ERROR_WORDS), with role val_loss, by the axis rule
    (`usable_series`): the held-out curve of a run that logs no validation loss."""
    def error(name: str) -> bool:
        ws = set(words(name))
        return bool(ws & HELD_OUT_ERROR_WORDS) and not ws & NOT_THE_CURVE_WORDS

    rows = meta.filter((pl.col("role") == "other") & pl.col("split").is_in(["val", "test"]))
    rows = rows.filter(pl.col("name").map_elements(error, return_dtype=pl.Boolean)) if rows.height else rows
    return usable_series(rows.with_columns(pl.lit("val_loss").alias("role")), "val_loss")


def _unsplit(name: str) -> tuple[str, ...]:
    """A series name's words without a split's (`val/obj_loss` and `train/obj_loss`: obj, loss)."""
    return tuple(w for w in words(name) if w not in SPLIT_WORDS)


# The tags under which the console reader keeps the lines that announce an event in words (`ingest.announcements`).
ANNOUNCED = "announced/"


# The role of the series a console reader writes where a launch appended to the log begins (its number: 2, 3, ...).
LAUNCH_ROLE = "launch"

# A pass of a counter that starts again whose first record gives back this share of the fall from the series'
# opening level (the median of its first FRESH_RECORDS records) is a fresh launch (`Run._fresh_passes`).
FRESH_REGAIN = 0.5
FRESH_RECORDS = 3

# An epoch counter that falls back this far while the steps rise starts a launch (HF logs fractional epochs).
EPOCH_DROP = 0.5

# A series that counts a cross-validation's folds: `Fold`, `fold_idx`, `cv_fold` (`Run.fold_starts`).
FOLD_WORD = "fold"
FOLD_OTHER_WORDS = frozenset({"k", "cv", "idx", "id", "index", "num", "no", "n", "current", "nr"})


def _is_fold_counter(name: str) -> bool:
    ws = set(words(name))
    return FOLD_WORD in ws and ws <= FOLD_OTHER_WORDS | {FOLD_WORD}


# A long series is reduced to `long_series // BUCKET_SHARE` buckets of ~4 points each (first, min, max, last): at most
# half as many points as the shortest series that is reduced (125,000 buckets at LONG_SERIES), so a
# statistic over it costs no more than over a series read whole, whatever the length of the series.
BUCKET_SHARE = 8


@dataclass(frozen=True)
class Run:
    """One run, read-only, built with `Run.from_store(con, run_id)`. Frames are loaded once per series and
    cached; a series longer than `long_series` points is loaded reduced (module docstring)."""

    run_id: str
    name: str
    root: str | None
    meta: pl.DataFrame  # one row per series: META_SCHEMA
    _load: Any = field(repr=False)  # series_id -> raw points frame (step, value, wall_time), in write order
    _configs: dict[str, Any] = field(default_factory=dict)  # dotted key -> value
    _tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    _cache: dict[int, pl.DataFrame] = field(default_factory=dict, repr=False)
    _steps_cache: dict[str, pl.DataFrame] = field(default_factory=dict, repr=False)
    # series name -> {composed step: (pass, the step the file shows)} for a counter that starts again (series_named)
    _passes: dict[str, dict[int, tuple[int, int]]] = field(default_factory=dict, repr=False)
    _pass_starts: dict[str, frozenset[int]] = field(default_factory=dict, repr=False)
    _spikes_cache: dict[tuple[str, SpikeRule], pl.DataFrame] = field(default_factory=dict, repr=False)
    _candidates_cache: dict[str, tuple[pl.DataFrame, pl.DataFrame]] = field(default_factory=dict, repr=False)
    _launch_cache: dict[str, tuple[int, ...]] = field(default_factory=dict, repr=False)
    # (series_id, steps) -> {step: (epoch, batch)} the writer printed on those lines (ordinal series only)
    _counters: Any = field(default=None, repr=False)
    # Series of more points than this are read reduced (module docstring); None: every series whole.
    long_series: int | None = None
    # (series_id, buckets) -> the reduced frame; (series_id, strict) -> the points around write-order breaks
    _reduce: Any = field(default=None, repr=False)
    _breaks: Any = field(default=None, repr=False)
    # () -> the console lines that announce an event in words, with the records around each (`announced`)
    _announced: Any = field(default=None, repr=False)
    _source_edges: Any = field(default=None, repr=False)  # series_id -> each source file's first and last point
    _opens: Any = field(default=None, repr=False)  # (series_id, loss series_id) -> `queries.training_opens`
    _announced_cache: dict[str, pl.DataFrame] = field(default_factory=dict, repr=False)

    # --- building ---------------------------------------------------------------------------------
    @classmethod
    def from_store(cls, con: Any, run_id: str, long_series: int | None = None, *, tables: bool = True) -> Run:
        """Read the run's series list, configs and checkpoint/batch tables (not with `tables=False`: a reader of
        curves only) from an open DuckDB connection (the queries live in `ingest.queries`); points are read per
        series, on first use, a series of more than `long_series` points reduced (default `LONG_SERIES` here)."""
        from ingest import queries

        row = queries.run_row(con, run_id)
        if row is None:
            from ingest.errors import ForensicsError
            raise ForensicsError(f"no run {run_id!r} in the database; run `forensics runs` to list them")
        meta = queries.series_meta(con, run_id)
        return cls(run_id, row[0], row[1], meta.cast({k: v for k, v in META_SCHEMA.items() if k in meta.columns}),
                   lambda series_id: queries.series_points(con, series_id), queries.run_configs(con, run_id),
                   queries.run_tables(con, run_id) if tables else {},
                   _counters=lambda series_id, steps: queries.point_counters(con, series_id, steps),
                   long_series=LONG_SERIES if long_series is None else long_series,
                   _reduce=lambda series_id, buckets: queries.series_reduced(con, series_id, buckets),
                   _breaks=lambda series_id, strict: queries.write_order_breaks(con, series_id, strict),
                   _announced=lambda: queries.announced(con, run_id, ANNOUNCED),
                   _source_edges=lambda series_id: queries.source_edges(con, series_id),
                   _opens=lambda series_id, loss_id: queries.training_opens(con, series_id, loss_id))

    def reduced(self, name: str | None) -> dict[str, int] | None:
        """For a series read reduced (longer than `long_series` points): {"n_points": its stored points,
        "buckets": how many M4 buckets its view has}; None for a series read whole, or none at all."""
        if name is None or self.long_series is None or self._reduce is None:
            return None
        row = self.meta.filter(pl.col("name") == name)
        if row.height == 0 or (row["n_points"][0] or 0) <= self.long_series:
            return None
        return {"n_points": int(row["n_points"][0]), "buckets": max(1, self.long_series // BUCKET_SHARE)}

    def on_line_axis(self, name: str | None) -> bool:
        """Whether the series `points(name)` reads is on an ordinal axis (a line count, DECISIONS §2): the first
        stored series of that name, as `points` reads it, not another file's copy under the same name (a YOLO
        `results.csv` beside the TensorBoard files that hold its columns)."""
        row = self.meta.filter(pl.col("name") == name)
        return bool(row.height and row["ordinal"].fill_null(False)[0])

    def training_opens(self, name: str | None) -> int | None:
        """The step of series `name` where training opens in a console log: its first point written at or after the
        training loss's first record in that file (its last step + 1 where it has none); None where `name` is no
        console log's or shares no file with that loss. What a log prints above its first training record is set-up,
        not training: the memory DeepSpeed reports while the weights load, a configuration dump's `"loss_scale": 0`
        (dynamic scaling). Instrument series are judged from here on (memory_growth, amp_overflow)."""
        loss = self.pick("loss")
        if name is None or loss is None or loss == name or self._opens is None \
                or self.format_of(name) not in TEXT_FORMATS:
            return None
        ids = [self.meta.filter(pl.col("name") == n)["series_id"] for n in (name, loss)]
        if not all(i.len() for i in ids):
            return None
        return self._opens(int(ids[0][0]), int(ids[1][0]))

    def finite_points(self, role_or_name: str) -> int:
        """How many finite points `series(role_or_name)` has: counted from the store for a reduced series (its
        view holds a few per bucket), from the frame otherwise."""
        name = self.pick(role_or_name)
        if self.reduced(name):
            row = self.meta.filter(pl.col("name") == name)
            return int(row["n_points"][0]) - int(row["n_nonfinite"][0] or 0)
        return int(np.isfinite(self.arrays(role_or_name)[1]).sum())

    def write_order(self, name: str, strict: bool = False) -> pl.DataFrame:
        """The points of `name` in write order, for a reader of restarts (resumed_run): every point of a series
        read whole; of a reduced one, only each point whose step goes back (at or below the one before; with
        `strict` below) or whose clock does, the point before it, and the last point written, from the store.
        Columns step, value, wall_time."""
        if self.reduced(name):
            return self._breaks(int(self.meta.filter(pl.col("name") == name)["series_id"][0]), strict)
        return self.points(name)

    def source_edges(self, name: str | None) -> pl.DataFrame:
        """Per file series `name` was read from, its first and last point (source, first_step, first_wall,
        last_step, last_wall), in the order the files began; empty where unknown."""
        row = self.meta.filter(pl.col("name") == name) if name is not None else self.meta.clear()
        if row.height == 0 or self._source_edges is None:
            return pl.DataFrame()
        return self._source_edges(int(row["series_id"][0]))

    def writer_positions(self, series: str | None, steps: list[int | None]) -> dict[int, str]:
        """Where each of `steps` is in the writer's own words, for a series on an ordinal axis whose lines print
        an epoch and a batch but no global step (`Epoch[1] Batch[7]`, DECISIONS §2): {6: "epoch 1, batch 7"}; for a
        counter that starts again (`series_named` composed its passes), the pass and the step its line shows
        ("pass 9, step 1800"). Empty for a series with logged steps (its steps are the writer's already) or lines
        without counters."""
        if series in self._passes:  # a counter that starts again: the pass and the step its line shows
            known = self._passes[series]
            return {int(s): f"pass {known[int(s)][0]}, step {known[int(s)][1]}" for s in steps
                    if s is not None and int(s) in known}
        out = {}
        for step, (epoch, batch) in self.counters(series, steps).items():
            words = [f"{k} {v}" for k, v in (("epoch", epoch), ("batch", batch)) if v is not None]
            if words:
                out[step] = ", ".join(words)
        return out

    def printed_step(self, series: str | None, step: int) -> int:
        """The step the file shows for `step` of `series`: its pass's own counter where `series_named` composed passes
        that count again from the beginning (a summary quotes the file's numbers); `step` itself otherwise."""
        known = self._passes.get(series or "", {})
        return known[int(step)][1] if int(step) in known else int(step)

    def printed_span(self, series: str | None, first: int, last: int | None = None) -> str:
        """Steps `first`-`last` (or `first` alone) of `series` in the file's words, for a summary to quote: "step
        74", "steps 48-97"; where `series_named` composed passes, the steps the file shows and their pass ("step 74 of
        pass 4", "steps 40-97 of pass 3", "pass 3, step 40 to pass 4, step 20" across a pass start)."""
        known = self._passes.get(series or "", {})
        a, b = known.get(int(first)), known.get(int(last)) if last is not None else None
        if a is None and self.on_line_axis(series):  # a line count is no step the file shows: its counters are
            said = self.writer_positions(series, [int(first)] + ([int(last)] if last is not None else []))
            if int(first) in said and (last is None or last == first):
                return said[int(first)]
            if int(first) in said and int(last) in said:
                return f"{said[int(first)]} to {said[int(last)]}"
        if a is None:
            return f"step {first}" if last is None or last == first else f"steps {first}-{last}"
        if last is None or last == first:
            return f"step {a[1]} of pass {a[0]}"
        if b is None:
            return f"pass {a[0]}, step {a[1]} to step {last}"
        if a[0] == b[0]:
            return f"steps {a[1]}-{b[1]} of pass {a[0]}"
        return f"pass {a[0]}, step {a[1]} to pass {b[0]}, step {b[1]}"

    def pass_starts(self, name: str) -> frozenset[int]:
        """The (composed) steps where each pass of a counter that starts again begins (`series_named`); empty for
        a series counted once."""
        self.series_named(name)
        if name in self._pass_starts:
            return self._pass_starts[name]
        # A series the reader put on an ordinal axis, keeping the writer's counters (DECISIONS §2): a pass begins
        # where the counter the writer printed goes back to its first value.
        steps = self.series_named(name)["step"].to_list()
        printed = self.counters(name, steps)  # {} without a query for a series on a logged axis
        batches = [printed.get(s, (None, None))[1] for s in steps]
        if not printed or any(b is None for b in batches):
            return frozenset()
        # the counter goes back: one printed at the same value on every record (Keras' full-epoch bar) starts none
        return frozenset(s for s, b, prev in zip(steps[1:], batches[1:], batches) if b <= batches[0] and b < prev)

    def launch_starts(self, name: str | None) -> tuple[int, ...]:
        """The steps of series `name`, as `series_named` shows them, where each launch after the first begins: where
        the reader marked a log's counter starting again from its first value (`appended_launches`: several launches
        of one script appended to one log), and where the run's epoch counter falls back while the steps go on
        (`epoch_resets`: a training started again on a step axis that does not), where a pass of a counter that starts
        again opens back at the untrained level (`_fresh_passes`), in a file whose epoch never moves, where a
        record reopens at it (`_fresh_records`), and where a cross-validation's fold counter moves on (`fold_starts`).
        No curve reads across a launch
        start: the one home of that segmentation (detectors split with `base.by_launch`). Empty for a log of one
        launch."""
        if name is None:
            return ()
        if name not in self._launch_cache:
            self._launch_cache[name] = self._launch_starts(name)
        return self._launch_cache[name]

    def _launch_starts(self, name: str) -> tuple[int, ...]:
        return tuple(sorted(set(self.appended_launches(name)) | set(self._epoch_reset_starts(name))
                            | set(self._fresh_passes(name)) | set(self._fresh_records(name))
                            | set(self.fold_starts(name))))

    def fold_starts(self, name: str) -> list[int]:
        """The steps of series `name` where the fold counter its file logs beside it (`_is_fold_counter`: `Fold`,
        `fold_idx`, `cv_fold`) takes a new value: a cross-validation trains each fold's model of its own, a launch
        of its own whatever the epoch counter does (it may restart at every phase of a fold, or not be read at all).
        Read on one axis only: both series of one file, the counter's steps rising. No finding changed on the 40
        healthy shared runs nor the 77 healthy restored runs of set18-19 and 21-22; one k-fold log read right."""
        row = self.meta.filter(pl.col("name") == name)
        if row.height == 0:
            return []
        grp, ordinal = row["grp"][0], bool(row["ordinal"][0])
        folds = [n for n, o in self.meta.filter(pl.col("grp") == grp).select("name", "ordinal").iter_rows()
                 if n != name and bool(o) == ordinal and _is_fold_counter(n)]
        if not folds:
            return []
        pts = self.series_named(folds[0]).filter(pl.col("value").is_finite())
        fold_steps, fold = pts["step"].to_numpy(), pts["value"].to_numpy()
        if fold.size < 2 or np.any(np.diff(fold_steps) <= 0):
            return []
        changes = fold_steps[1:][np.diff(fold) != 0]
        steps = self.series_named(name)["step"].to_numpy()
        at = np.searchsorted(steps, changes)
        return sorted({int(steps[i]) for i in at if 0 < i < steps.size})

    def _fresh_records(self, name: str) -> list[int]:
        """The steps of series `name` where a launch begins in a file whose epoch counter never moves (Keras'
        `CSVLogger(append=True)` over a loop of `fit(epochs=1)`: every row is epoch 0, so no counter starts again):
        the row where the training loss of its file reopens at or above the highest of its first `FRESH_RECORDS`
        records, above each of the `FRESH_RECORDS` rows before it, after those had fallen below the opening level (a
        new model from its untrained level, not the last one's noise). Empty where the counter moves."""
        loss, epoch = self.pick("loss"), self.pick("epoch")
        if loss is None or epoch is None:
            return []
        grp = self.meta.filter(pl.col("name").is_in([name, loss, epoch])).select("name", "grp", "ordinal")
        if grp["grp"].n_unique() != 1 or grp.height != len({name, loss, epoch}) or not grp["ordinal"].all():
            return []
        k = FRESH_RECORDS
        counter = self.series_named(epoch)["value"].to_numpy()
        if counter.size < 3 * k or not np.all(counter == counter[0]):
            return []
        pts = self.series_named(loss).filter(pl.col("value").is_finite())
        steps, values = pts["step"].to_numpy(), pts["value"].to_numpy()
        out, last = [], 0
        for i in range(2 * k, steps.size):
            before = values[i - k:i]
            if i - last >= k and values[i] >= values[:k].max() and values[i] > before.max() \
                    and np.median(before) < np.median(values[:k]):
                out.append(int(steps[i]))
                last = i
        if not out or name == loss:
            return out
        own = self.series_named(name)["step"].to_numpy()
        at = np.searchsorted(own, out)
        return sorted({int(own[i]) for i in at if 0 < i < own.size})

    def _fresh_passes(self, name: str) -> list[int]:
        """The steps of series `name` where a pass of its logged counter starting again from its first value
        (`series_named`'s passes: a new writer of the same run, a launch appended to a log) opens back at the
        untrained level: its first record gives back `FRESH_REGAIN` or more of the fall from the series' opening
        level (median of its first `FRESH_RECORDS` records) to where the pass before closed. A new model, not the
        last one's rise; a counter that restarts every epoch opens near where the epoch before closed."""
        self.series_named(name)
        if name not in self._passes:
            return []
        pts = self.series_named(name).filter(pl.col("value").is_finite())
        steps, values = pts["step"].to_numpy(), pts["value"].to_numpy()
        k = FRESH_RECORDS
        out = []
        for c in sorted(self._pass_starts[name]):
            i = int(np.searchsorted(steps, c))
            if i < 2 * k or i >= steps.size or steps[i] != c:
                continue
            opened, closed = float(np.median(values[:k])), float(np.median(values[i - k:i]))
            if opened > closed and values[i] >= closed + FRESH_REGAIN * (opened - closed):
                out.append(int(c))
        return out

    def epoch_resets(self) -> list[tuple[int, int, float, float]]:
        """Where the run's epoch counter falls back by `EPOCH_DROP` or more while the steps keep rising, in write
        order: (step, step before, epoch before, epoch after) per reset; from a value it counted up to, and not going
        above it next. A training started again (appended, a
        fold of a cross-validation, a resume with a fresh epoch count) whose step axis goes on: resumed_run reports
        these, and every detector reads them as launch starts (`launch_starts`)."""
        name = self.pick("epoch")
        loss = self.pick("loss")
        if name is None or loss is None or self.format_of(name) != self.format_of(loss):
            return []  # another source's axis
        pts = self.points(name).filter(pl.col("value").is_finite())
        steps, epoch = pts["step"].to_numpy(), pts["value"].to_numpy()
        if steps.size < 3 or np.any(np.diff(steps) < 0):
            return []
        drops = np.flatnonzero(np.diff(epoch) <= -EPOCH_DROP) + 1
        rises = np.diff(epoch)[np.diff(epoch) > 0]
        stride = max(1.0, 2 * float(np.median(rises))) if rises.size else 1.0  # how far the counter moves at once
        # A counter falls back from a value it counted up to (not a stray number on one record: a config's count,
        # a "best epoch" quoted beside the current one), and goes on from where it fell, not above the value it left.
        counted = [k for k in drops if k >= 2 and epoch[k - 1] - epoch[k - 2] <= stride
                   and k + 1 < epoch.size and epoch[k + 1] <= epoch[k - 1]]
        return [(int(steps[k]), int(steps[k - 1]), float(epoch[k - 1]), float(epoch[k])) for k in counted]

    def _epoch_reset_starts(self, name: str) -> list[int]:
        """The steps of series `name` where an epoch reset (`epoch_resets`) of its own file begins a launch: its
        first step at or after the reset's; none for a series whose steps start again (its passes are its launches)."""
        row = self.meta.filter(pl.col("name") == name)
        epoch = self.pick("epoch")
        if row.height == 0 or epoch is None or name == epoch:
            return []
        if self.meta.filter(pl.col("name") == epoch)["grp"][0] != row["grp"][0]:
            return []
        resets = [r for r in self.epoch_resets() if r[0] not in set(self.appended_launches(epoch))]
        steps = self.series_named(name)["step"].to_numpy()
        if not resets or name in self._passes or steps.size < 2:
            return []
        at = np.searchsorted(steps, [r[0] for r in resets])
        return sorted({int(steps[i]) for i in at if 0 < i < steps.size})

    def appended_launches(self, name: str | None) -> tuple[int, ...]:
        """The launch starts of `launch_starts` the reader marked: a log's counter starting again from its first
        value (launches appended to one log); no epoch reset."""
        if name is None:
            return ()
        if "\0" + name not in self._launch_cache:
            self._launch_cache["\0" + name] = self._appended_launches(name)
        return self._launch_cache["\0" + name]

    def _appended_launches(self, name: str) -> tuple[int, ...]:
        row = self.meta.filter(pl.col("name") == name)
        if row.height == 0:
            return ()
        marks = self.meta.filter((pl.col("role") == LAUNCH_ROLE) & (pl.col("grp") == row["grp"][0]))
        if marks.height == 0:
            return ()
        mark = self.points(marks["name"][0]).filter(pl.col("value").is_finite())
        view = self.series_named(name)
        steps, wall = view["step"].to_numpy(), view["wall_time"].fill_null(np.nan).to_numpy()
        if steps.size < 2 or mark.height == 0:
            return ()
        mark_steps, mark_wall = mark["step"].to_numpy(), mark["wall_time"].fill_null(np.nan).to_numpy()
        if bool(row["ordinal"][0]) and bool(marks["ordinal"][0]):
            # One line axis for the file: a launch begins at the series' first line at or after the mark's.
            at = np.searchsorted(steps, mark_steps)
            return tuple(sorted({int(steps[i]) for i in at if 0 < i < steps.size}))
        if name in self._passes:
            # Logged steps that start again: each mark, in write order, is the next pass that begins at or after it
            # (its logged step, and its clock where both are stamped; a per-epoch counter's passes fall between).
            starts = sorted(self._pass_starts[name])[1:]
            out, k = [], 0
            for m_step, m_wall in zip(mark_steps, mark_wall):
                while k < len(starts):
                    c = starts[k]
                    k += 1
                    w = wall[np.searchsorted(steps, c)]
                    if self._passes[name][c][1] >= m_step and not (np.isfinite(w) and np.isfinite(m_wall) and w < m_wall):
                        out.append(c)
                        break
            return tuple(out)
        # A series whose own steps never start again (logged in one launch's lines, or with a global counter): by clock.
        at = [int(np.searchsorted(wall, w)) for w in mark_wall if np.isfinite(w) and np.all(np.diff(wall) >= 0)]
        return tuple(sorted({int(steps[i]) for i in at if 0 < i < steps.size}))

    def announced(self, kind: str) -> pl.DataFrame:
        """The lines of the run's console logs that announce `kind` in words (`ingest.announcements`: a non-finite
        loss, a resume), in write order, with the training-loss records of their own file around each
        (`ingest.queries.announced` names the columns) and what each line says (`said`: `announcements.Said`).
        Empty where none does, or for a run not read from a store."""
        if "all" not in self._announced_cache:
            frame = self._announced() if self._announced is not None else pl.DataFrame()
            if frame.height:
                frame = frame.with_columns(pl.Series("said", [read_announcement(t) for t in frame["text"]],
                                                     dtype=pl.Object))
            self._announced_cache["all"] = frame
        frame = self._announced_cache["all"]
        return frame.filter(pl.col("tag") == kind) if frame.height else frame

    def composed(self) -> bool:
        """Whether a series read so far counts its steps again from the beginning (`series_named` composed it)."""
        return bool(self._passes)

    def counters(self, series: str | None, steps: list[int | None],
                 logged: bool = False) -> dict[int, tuple[int | None, int | None]]:
        """step -> (epoch, batch) the writer printed on the line of each of `steps`, for a series on an ordinal
        axis (DECISIONS §2), and with `logged` on a logged step axis too (the epoch a line prints beside its step);
        empty otherwise, or for a series unknown."""
        if series is None or self._counters is None:
            return {}
        row = self.meta.filter(pl.col("name") == series)
        if row.height == 0 or not (row["ordinal"][0] or logged):
            return {}
        return self._counters(int(row["series_id"][0]), sorted({int(s) for s in steps if s is not None}))

    # --- series -----------------------------------------------------------------------------------
    def candidates(self, role_or_name: str) -> pl.DataFrame:
        """Series rows matching a logical name (by role) or an exact series name or tag, best first.

        By role, the axis rule (`usable_series`, DECISIONS §16) applies first: a console copy never stands
        beside a structured log's series of the same role, and an ordinal axis never beside a logged one.
        Cached per name for this series list: the detectors ask ~100 times per analysis, each a few polars
        queries (~0.5 ms each on a handful of rows: 5% of an ordinary run's first answer)."""
        hit = self._candidates_cache.get(role_or_name)
        if hit is None or hit[0] is not self.meta:
            role = ROLES.get(role_or_name)
            m = usable_series(self.meta, role) if role else self.meta.filter(
                (pl.col("name") == role_or_name) | (pl.col("tag") == role_or_name))
            if role == "val_loss" and m.height == 0:
                m = held_out_errors(self.meta)
            m = m.with_columns(echoes(m).alias("_echo"))  # a curve first, whatever its name (`echoes`)
            m = m.sort(["_echo", "canonical", "n_points", "name"], descending=[False, True, True, False],
                       nulls_last=True).drop("_echo")
            hit = self._candidates_cache[role_or_name] = (self.meta, self._shared_group_first(m) if role == "lr" else m)
        return hit[1]

    def _shared_group_first(self, m: pl.DataFrame) -> pl.DataFrame:
        """Of an optimizer's parameter groups logged side by side (`lr/pg0`, `lr/pg1`, `lr/pg2`), the one whose
        values most of the others repeat first: the schedule the run follows. A group of its own (a bias group
        warmed down from its own start value while the weights' groups warm up) goes after; by name where none
        repeats another."""
        if m.height < 3:
            return m
        tied = m.filter((pl.col("n_points") == m["n_points"][0]) & pl.col("canonical").eq_missing(m["canonical"][0]))
        if tied.height < 3:
            return m
        values = [tuple(self.series_named(n)["value"].to_list()) for n in tied["name"].to_list()]
        shared = [sum(v == w for w in values) - 1 for v in values]
        best = tied["name"][int(np.argmax(shared))]
        if best == m["name"][0]:
            return m
        return pl.concat([m.filter(pl.col("name") == best), m.filter(pl.col("name") != best)])

    def pick(self, role_or_name: str) -> str | None:
        """The name of the series `series(role_or_name)` reads, or None when the run has none."""
        c = self.candidates(role_or_name)
        return c["name"][0] if c.height else None

    def has(self, role_or_name: str) -> bool:
        return self.candidates(role_or_name).height > 0

    def points(self, series_name: str) -> pl.DataFrame:
        """Every stored point of one series in write order, duplicates and resumes included, a cut line's left out
        (`cut_lines`); for a reduced series (`reduced`), its M4 points by step (`write_order` has its write order's
        breaks)."""
        c = self.meta.filter(pl.col("name") == series_name)
        if c.height == 0:
            raise KeyError(self.missing_message(series_name))
        sid = int(c["series_id"][0])
        if sid not in self._cache:
            reduced = self.reduced(series_name)
            frame = self._reduce(sid, reduced["buckets"]) if reduced else self._load(sid)
            if not reduced and frame.height > 2 and frame["step"].null_count() == 0 and c["role"][0] != LAUNCH_ROLE:
                # a cut line is no point of the series' time; a launch mark is kept wherever it stands
                frame = frame.filter(~pl.Series(cut_lines(frame["step"].to_numpy())))
            self._cache[sid] = frame
        return self._cache[sid]

    def series(self, role_or_name: str) -> pl.DataFrame:
        """(step, value, wall_time) of the chosen series, one row per step (the last written wins, as a
        resumed run overwrites), sorted by step. KeyError names the series present when there is none."""
        name = self.pick(role_or_name)
        if name is None:
            raise KeyError(self.missing_message(role_or_name))
        return self.series_named(name)

    def series_named(self, name: str) -> pl.DataFrame:
        """One row per step of the series `name` (the last written wins, as a resume overwrites), sorted by step;
        cached. A counter that starts again from the beginning (`fresh_starts`: one per epoch, or launches appended
        to one log) is no resume: its passes follow one another (`composed_steps`), so the view is the curve in the
        order it was written, not one pass's steps filled in from another's."""
        if name not in self._steps_cache:
            raw = self.points(name)
            steps = raw["step"].to_numpy()
            if steps.size < 2 or bool(np.all(steps[1:] > steps[:-1])):  # the usual case: nothing to resolve
                self._steps_cache[name] = raw
                return raw
            if not self.reduced(name) and raw["step"].null_count() == 0:
                once = raw.filter(~pl.Series(copied(raw["step"].to_list(), raw["value"].to_list())))  # no pass
                logged = once["step"].to_numpy()
                if fresh_starts(logged).size:
                    composed = composed_steps(logged)
                    passes = np.cumsum(np.isin(np.arange(logged.size), fresh_starts(logged))) + 1
                    self._passes[name] = {int(c): (int(k), int(x)) for c, k, x in zip(composed, passes, logged)}
                    self._pass_starts[name] = frozenset(int(c) for c in composed[[0, *fresh_starts(logged)]])
                    raw = once.with_columns(pl.Series("step", composed))
            self._steps_cache[name] = raw.unique("step", keep="last", maintain_order=True).sort("step")
        return self._steps_cache[name]

    def arrays(self, role_or_name: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of `series(role_or_name)` as numpy arrays (int64, float64; NaN/Inf kept)."""
        f = self.series(role_or_name)
        return f["step"].to_numpy(), f["value"].fill_null(np.nan).to_numpy()

    def spikes(self, name: str, rule: SpikeRule) -> pl.DataFrame:
        """`stats.spikes` of the series `name` (one row per step) under `rule`, computed once per analysis: the
        loss-spike detector and the engine's spike list read the same spikes of the same loss, and on a long
        series each computation holds a dozen arrays of its length."""
        from forensics.judge import stats

        key = (name, rule)
        if key not in self._spikes_cache:
            f = self.series_named(name)
            self._spikes_cache[key] = stats.spikes(f["step"].to_numpy(), f["value"].fill_null(np.nan).to_numpy(), rule)
        return self._spikes_cache[key]

    def last_step(self) -> int | None:
        """The largest logged step of any series (the run's length in its own numbering)."""
        steps = [self.series_named(n)["step"].max()
                 for role in ("train_loss", "val_loss", "grad_norm", "lr") for n in self.all_of(role)]
        steps = [s for s in steps if s is not None]
        return max(steps) if steps else None

    def first_nonfinite(self) -> list[dict[str, Any]]:
        """The first non-finite step of every series that has one, earliest first (the first NaN is the
        one that matters): series, step, value ("nan", "inf", "-inf")."""
        out = []
        for name in self.meta.filter(pl.col("n_nonfinite") > 0)["name"].to_list():
            f = self.series_named(name).filter(~pl.col("value").is_finite())
            if f.height:
                v = f["value"][0]
                step = int(f["step"][0])
                out.append({"series": name, "step": step,
                            "value": "nan" if v is None or math.isnan(v) else ("inf" if v > 0 else "-inf")})
                at = self.writer_positions(name, [step]).get(step)
                if at:
                    out[-1]["at"] = at
        return sorted(out, key=lambda r: (r["step"], r["series"]))

    def loss_pairs(self) -> list[tuple[str, str]]:
        """(training, validation) loss series that measure the same thing, for the rules that read the two side by
        side: the picked pair first, then, where the run logs its loss only as parts (no series of the whole, as in
        `loss_parts`), each other part with its held-out twin (`train/obj_loss` with `val/obj_loss`: one name once
        the split's words are taken out), leaving out a part logged as exactly 0 throughout (a head the task does
        not use, such as a one-class detector's class loss). Empty without both losses."""
        train, val = self.pick("loss"), self.pick("val_loss")
        if train is None or val is None:
            return []
        out = [(train, val)]
        if self.candidates("loss")["canonical"].fill_null(False)[0]:
            return out  # the whole loss is logged: it is the loss, its parts are not judged one by one
        trains: dict[tuple[str, ...], str] = {}
        for name in self.candidates("loss")["name"].to_list():
            trains.setdefault(_unsplit(name), name)
        for name in self.candidates("val_loss")["name"].to_list():
            twin = trains.get(_unsplit(name))
            if twin is not None and twin != train and name != val and (twin, name) not in out \
                    and not self._all_zero(twin) and not self._all_zero(name):
                out.append((twin, name))
        return out

    def loss_parts(self) -> list[str]:
        """The training-loss series a rule of single records reads one by one: the picked one; where the run logs its
        loss only as parts (no series of the whole: `Losses Yaw`, `Losses Pitch`, `train/box_loss`), each other part
        logged on as many records too, since picking one part by its name would be arbitrary."""
        c = self.candidates("loss")
        if c.height == 0:
            return []
        first = c.row(0, named=True)
        out = [first["name"]]
        if not first["canonical"]:
            out += [n for n in dict.fromkeys(c.filter(~pl.col("canonical").fill_null(False)
                                                      & (pl.col("n_points") == first["n_points"]))["name"].to_list())
                    if n != first["name"]]
        return out

    def part(self, train: str) -> Run:
        """The run with `loss` read as the series `train` (one of `loss_parts`)."""
        return dataclasses.replace(self, meta=self.meta.filter((pl.col("role") != "train_loss")
                                                               | (pl.col("name") == train)))

    def paired(self, train: str, val: str) -> Run:
        """The run with `loss` and `val_loss` read as the series `train` and `val` (one of `loss_pairs`)."""
        keep = ~pl.col("role").is_in(["train_loss", "val_loss"]) | pl.col("name").is_in([train, val])
        return dataclasses.replace(self, meta=self.meta.filter(keep))

    def _all_zero(self, name: str) -> bool:
        v = self.series_named(name)["value"].fill_null(np.nan).to_numpy()
        return bool(v.size) and bool(np.all(v == 0))

    def all_of(self, role: str) -> list[str]:
        """Names of every usable series with this role (e.g. each layer's gradient norm), by name."""
        return sorted(usable_series(self.meta, role)["name"].to_list())

    def names(self) -> list[str]:
        return sorted(self.meta["name"].to_list())

    def missing_message(self, role_or_name: str) -> str:
        role = ROLES.get(role_or_name)
        what = f"no series with role {role}" if role else f"no series {role_or_name!r}"
        present = ", ".join(self.names()[:12]) or "none"
        more = f" (+{len(self.names()) - 12} more)" if len(self.names()) > 12 else ""
        return f"{what} in run {self.name}; series present: {present}{more}"

    def layer_of(self, name: str) -> str | None:
        m = self.meta.filter(pl.col("name") == name)
        return m["layer"][0] if m.height else None

    def format_of(self, name: str) -> str | None:
        m = self.meta.filter(pl.col("name") == name)
        return m["format"][0] if m.height else None

    # --- configs and tables -----------------------------------------------------------------------
    def config(self, *keys: str, default: Any = None) -> Any:
        """The first config value found for any of `keys`, tried in order: an exact dotted key first, then
        any key ending in `.key`. `default` when none is set (or set to null)."""
        for key in keys:
            if self._configs.get(key) is not None:
                return self._configs[key]
            for k, v in self._configs.items():
                if k.endswith("." + key) and v is not None:
                    return v
        return default

    def config_keys(self) -> list[str]:
        """Every config key the run holds, dotted (`loss.lambda_box`)."""
        return list(self._configs)

    def config_group(self, key: str) -> dict[str, Any]:
        """The entries of a mapping in the config (`id2label` -> {"0": "neg", "1": "pos"}), stored flattened as
        `key.<entry>` at the top level or below any prefix (`model.id2label.0`): the first such mapping found,
        entry -> value; empty when there is none."""
        found: dict[str, dict[str, Any]] = {}
        for k, v in self._configs.items():
            head, sep, entry = k.rpartition(".")
            if sep and (head == key or head.endswith("." + key)):
                found.setdefault(head, {})[entry] = v
        return next(iter(found.values()), {})

    def config_number(self, *keys: str) -> float | None:
        """The first of `keys` set to a number (`config`'s order); a length of training at or above
        `LENGTH_SENTINEL` (`sentinel`) is no plan but "unbounded", so the next key is read instead."""
        for key in keys:
            v = self.config(key)
            try:
                f = float(v)
            except (TypeError, ValueError, OverflowError):  # an integer past any float (a hostile config) is no number
                continue
            if not math.isnan(f) and not sentinel(key, f):
                return f
        return None

    def table(self, name: str) -> pl.DataFrame:
        """One of the checkpoint/batch tables for this run (empty frame when the run has none)."""
        return self._tables.get(name, pl.DataFrame())
