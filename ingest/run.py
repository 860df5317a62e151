"""Ingest one run directory: find its files, read each from where the last ingest stopped, write in bulk.

The walk claims each file for one format (`ingest.formats`), reads it with that format's pure reader from
its resume position, buffers the chunks, and writes them in short write transactions of about a million
points each (DECISIONS.md §5: no connection is held for the whole ingest). After the writes, every series of
the run gets its display name, role and counts refreshed.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import numpy as np
import polars as pl

from ingest.batches import FoundBatch, find_batches, ingest_batches
from ingest.checkpoints import FoundCheckpoint, checkpoint_size, find_checkpoints, ingest_checkpoints
from ingest.configs import flatten
from ingest.errors import MissingDependency, UnreadableRun
from ingest.formats import Format, format_for
from ingest.records import Chunk, Issue, histograms_frame, scalars_frame, texts_frame
from ingest.roles import role_of
from ingest.store import connect

FLUSH_POINTS = 2_000_000  # about 100 MB of points: bounded memory, few transactions
HEAD_BYTES = 4096
# Folders that are never part of a run's evidence (and can be huge).
SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", "node_modules", ".ipynb_checkpoints", ".hypothesis"}


def run_id_for(root: Path) -> str:
    """Stable short id for a run: a hash of its resolved path (DECISIONS.md §1)."""
    return hashlib.sha1(str(root.resolve()).encode()).hexdigest()[:10]


@dataclass
class SourceReport:
    path: str
    format: str
    points: int = 0
    issues: list[Issue] = field(default_factory=list)
    status: str = "ok"


@dataclass
class IngestReport:
    run_id: str
    name: str
    root: str
    sources: list[SourceReport] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def points(self) -> int:
        return sum(s.points for s in self.sources)

    @property
    def issues(self) -> list[tuple[str, Issue]]:
        return [(s.path, i) for s in self.sources for i in s.issues]

    def to_json(self) -> dict:
        return {
            "run": self.run_id, "name": self.name, "root": self.root, "points": self.points,
            "seconds": round(self.seconds, 3),
            "sources": [{"path": s.path, "format": s.format, "points": s.points, "status": s.status} for s in self.sources],
            "issues": [{"path": p, "position": i.position, "kind": i.kind, "detail": i.detail} for p, i in self.issues],
            "unknown_files": self.unknown,
        }


def walk(root: Path) -> list[PurePosixPath]:
    """Every regular file below `root`, relative, sorted; symlinked folders are not followed."""
    found: list[PurePosixPath] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        rel_dir = Path(dirpath).relative_to(root)
        for name in sorted(filenames):
            if (Path(dirpath) / name).is_file():
                found.append(PurePosixPath(rel_dir.as_posix()) / name if str(rel_dir) != "." else PurePosixPath(name))
    return found


def _head(path: Path) -> bytes:
    try:
        with path.open("rb") as f:
            return f.read(HEAD_BYTES)
    except OSError:
        return b""


def _head_hash(path: Path) -> str:
    return hashlib.sha1(_head(path)).hexdigest()[:16]


@dataclass
class _Pending:
    """A source's chunks read in this ingest, not yet written."""

    rel: str
    fmt: Format
    grp: str
    size: int
    mtime: float
    head_hash: str
    source_id: int | None
    chunks: list[Chunk] = field(default_factory=list)
    end: int = 0
    report: SourceReport | None = None

    @property
    def n_points(self) -> int:
        return sum(len(c.scalars) for c in self.chunks if c.scalars is not None)


def ingest_run(root: Path | str, db: Path, *, progress: bool = True, trust_pickle: bool = False) -> IngestReport:
    """Read everything new under `root` into the store at `db`; return what was read and skipped.

    Checkpoints and saved batches are found first (by name) and their tensor files kept from the log formats;
    `trust_pickle` lets a checkpoint that needs full unpickling be read (the CLI's --trust-pickle).

    Raises UnreadableRun when `root` is no directory, holds no files, or nothing in it could be read.
    """
    started = time.monotonic()
    root = Path(root).expanduser()
    if not root.is_dir():
        raise UnreadableRun(f"{root} is not a directory; point forensics at a training run's folder")
    root = root.resolve()
    run_id = run_id_for(root)
    report = IngestReport(run_id=run_id, name=root.name, root=str(root))
    files = walk(root)
    if not files:
        raise UnreadableRun(f"{root} is empty: no logs, checkpoints or configs to read")

    with connect(db, write=True) as con:
        con.execute(
            "INSERT INTO runs VALUES (?, ?, ?, now(), now()) ON CONFLICT (run_id) DO UPDATE SET last_ingested = now()",
            [run_id, root.name, str(root)],
        )
        known = {
            r[0]: r[1:]
            for r in con.execute(
                "SELECT path, source_id, size_bytes, mtime, head_hash, resume_at FROM sources WHERE run_id = ?", [run_id]
            ).fetchall()
        }

    # Tensor files first: checkpoints and batches claim them before any log format sees them. An HF folder's
    # trainer_state.json is not claimed (the HF log reader reads it; the checkpoint only takes its step).
    batches = find_batches(root, files)
    checkpoints = find_checkpoints(root, files)
    tensor_files = {b.path for b in batches} | {p for c in checkpoints for p in c.files}
    claimed: list[tuple[PurePosixPath, Format]] = []
    for rel in files:
        if rel in tensor_files:
            continue
        fmt = format_for(rel, lambda rel=rel: _head(root / rel))
        if fmt is None:
            report.unknown.append(str(rel))
        else:
            claimed.append((rel, fmt))

    total_bytes = sum((root / rel).stat().st_size for rel, _ in claimed)
    bar = _progress(total_bytes, f"ingest {root.name}", progress)
    pending: list[_Pending] = []
    for rel, fmt in claimed:
        path = root / rel
        stat = path.stat()
        head_hash = _head_hash(path)
        prior = known.get(str(rel))
        start = 0
        source_id = None
        if prior is not None:
            source_id, size, mtime, old_hash, resume_at = prior
            unchanged = size == stat.st_size and mtime == stat.st_mtime and old_hash == head_hash
            if unchanged and (not fmt.resumable or resume_at >= stat.st_size):
                bar.update(stat.st_size)
                continue
            rewritten = old_hash != head_hash or (fmt.resumable and stat.st_size < (resume_at or 0))
            start = 0 if rewritten and fmt.resumable else (resume_at or 0)
        item = _Pending(str(rel), fmt, fmt.group(rel), stat.st_size, stat.st_mtime, head_hash, source_id,
                        end=start, report=SourceReport(str(rel), fmt.name))
        report.sources.append(item.report)
        pending.append(item)
        done_before = start if fmt.resumable else 0
        try:
            for chunk in fmt.load_reader()(path, start):
                item.chunks.append(chunk)
                item.end = chunk.end
                item.report.issues.extend(chunk.issues)
                if fmt.resumable:
                    bar.update(max(0, chunk.end - done_before))
                    done_before = chunk.end
                if sum(p.n_points for p in pending) >= FLUSH_POINTS:
                    _flush(db, run_id, pending)
                    pending = [item]  # keep the current source's row for its later chunks
        except MissingDependency as exc:
            # One format's optional package is missing: say so for its files and read the rest of the run.
            item.chunks.append(Chunk(end=start, issues=[Issue(None, "missing_dependency", str(exc))]))
            item.report.issues.extend(item.chunks[-1].issues)
        if not fmt.resumable:
            bar.update(stat.st_size)
    _flush(db, run_id, pending)
    bar.close()
    if checkpoints or batches:
        _ingest_tensors(db, run_id, root, checkpoints, batches, report, trust_pickle, progress)

    with connect(db, write=True) as con:
        refresh_series(con, run_id)
        _insert_issues(con, run_id, [(u, None, "unknown_file", "no reader knows this file") for u in report.unknown])
    report.seconds = time.monotonic() - started
    if not report.sources and report.unknown and not known:
        raise UnreadableRun(
            f"nothing in {root} is a format forensics reads ({len(report.unknown)} unknown files, e.g. "
            f"{', '.join(report.unknown[:3])}); see `forensics ingest --help` for the formats"
        )
    if report.sources and all(s.status == "unreadable" for s in report.sources) and not known:
        raise UnreadableRun(
            f"no file in {root} could be read: "
            + "; ".join(f"{s.path}: {s.issues[0].detail}" for s in report.sources[:3] if s.issues)
        )
    return report


def _ingest_tensors(db: Path, run_id: str, root: Path, checkpoints: list[FoundCheckpoint], batches: list[FoundBatch],
                    report: IngestReport, trust_pickle: bool, progress: bool) -> None:
    """Checkpoints (statistics, values, deltas) and saved batches; each is written in its own transaction."""
    bar = _progress(sum(checkpoint_size(root, c) for c in checkpoints), f"checkpoints {root.name}", progress)
    written = ingest_checkpoints(db, run_id, root, checkpoints, trust_pickle, on_read=lambda _, n: bar.update(n))
    bar.close()
    written += ingest_batches(db, run_id, root, batches, trust_pickle)
    for row in written:
        kind = "checkpoint" if "ckpt_id" in row else "batch"
        report.sources.append(SourceReport(row["path"], kind, 0, [i for _, i in row["issues"]], row["status"]))


def _progress(total: int, desc: str, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="B", unit_scale=True, disable=None if enabled else True,
                file=sys.stderr, leave=False)


def _flush(db: Path, run_id: str, pending: list[_Pending]) -> None:
    """Write the buffered chunks of `pending` sources in one transaction, then forget the chunks."""
    if not pending:
        return
    with connect(db, write=True) as con:
        con.execute("BEGIN")
        for item in pending:
            if item.source_id is None:
                item.source_id = con.execute(
                    "INSERT INTO sources (source_id, run_id, path, format, grp) "
                    "VALUES (nextval('source_id_seq'), ?, ?, ?, ?) RETURNING source_id",
                    [run_id, item.rel, item.fmt.name, item.grp],
                ).fetchone()[0]
            scalars = [scalars_frame(c.scalars) for c in item.chunks if c.scalars is not None and len(c.scalars)]
            hist = [histograms_frame(c.histograms) for c in item.chunks if c.histograms is not None and len(c.histograms)]
            series_ids = _series_ids(con, run_id, item.grp, item.fmt.name, scalars, hist)
            # Tags become series ids chunk by chunk: chunks may carry different Enum tag types.
            frame = pl.concat([_with_series(f, series_ids) for f in scalars]) if scalars else None
            written, dropped = _insert_scalars(con, item, frame)
            if hist:
                _insert_histograms(con, item.source_id, pl.concat([_with_series(h, series_ids) for h in hist]))
            _insert_texts(con, run_id, item.source_id, [c.texts for c in item.chunks if c.texts is not None])
            _insert_configs(con, run_id, item.source_id, item.chunks, whole=not item.fmt.resumable)
            _insert_issues(con, run_id, [(item.rel, i.position, i.kind, i.detail) for c in item.chunks for i in c.issues])
            item.report.points += written
            item.report.status = _source_status(item.report.points, dropped, item.report.issues)
            con.execute(
                "UPDATE sources SET size_bytes = ?, mtime = ?, head_hash = ?, resume_at = ?, "
                "n_points = n_points + ?, duplicate_points = duplicate_points + ?, status = ? WHERE source_id = ?",
                [item.size, item.mtime, item.head_hash, item.end, written, dropped,
                 item.report.status,
                 item.source_id],
            )
            item.chunks = []
        con.execute("COMMIT")


def _tags(frames: list[pl.DataFrame]) -> set[str]:
    return {t for f in frames for t in f["tag"].unique().cast(pl.Utf8).to_list()}


UNREADABLE_KINDS = ("empty", "not_this_format", "unreadable", "garbled", "missing_dependency")


def _source_status(points: int, dropped: int, issues: list[Issue]) -> str:
    """ok; partial (some records skipped); duplicate (every point a copy of another source's); unreadable."""
    if points == 0 and dropped > 0:
        return "duplicate"
    if points == 0 and any(i.kind in UNREADABLE_KINDS for i in issues):
        return "unreadable"
    return "partial" if issues else "ok"


def _series_ids(con, run_id: str, grp: str, fmt: str, scalars: list[pl.DataFrame],
                hists: list[pl.DataFrame]) -> dict[str, int]:
    """Series ids for every tag in the frames, creating the series that are new. Names and roles are provisional
    until `refresh_series` sees the whole run."""
    tags = sorted(_tags(scalars) | _tags(hists))
    if not tags:
        return {}
    ordinal = _tags([f.filter(pl.col("ordinal").fill_null(False)).select("tag") for f in scalars])
    existing = dict(con.execute(
        "SELECT tag, series_id FROM series WHERE run_id = ? AND grp = ? AND list_contains(?, tag)",
        [run_id, grp, tags]).fetchall())
    for tag in tags:
        if tag in existing:
            continue
        r = role_of(tag)
        existing[tag] = con.execute(
            "INSERT INTO series (series_id, run_id, grp, tag, format, name, role, split, layer, canonical, ordinal) "
            "VALUES (nextval('series_id_seq'), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING series_id",
            [run_id, grp, tag, fmt, tag, r.role, r.split, r.layer, r.canonical, tag in ordinal],
        ).fetchone()[0]
    if ordinal:
        con.execute("UPDATE series SET ordinal = TRUE WHERE run_id = ? AND grp = ? AND list_contains(?, tag)",
                    [run_id, grp, sorted(ordinal)])
    return existing


def _with_series(frame: pl.DataFrame, series_ids: dict[str, int]) -> pl.DataFrame:
    """Replace the tag column by series ids. A Categorical tag column maps through its codes: one lookup per
    distinct tag, not a string compare per point."""
    tags = frame["tag"]
    if isinstance(tags.dtype, pl.Categorical):
        present = tags.unique()
        codes = present.to_physical().to_numpy()
        lookup = np.zeros(int(codes.max()) + 1, dtype=np.int32)
        lookup[codes] = [series_ids[t] for t in present.cast(pl.Utf8).to_list()]
        ids = pl.Series("series_id", lookup[tags.to_physical().to_numpy()])
    else:
        ids = tags.replace_strict(series_ids, return_dtype=pl.Int32).alias("series_id")
    return frame.drop("tag").with_columns(ids)


def _insert_scalars(con, item: _Pending, frame: pl.DataFrame | None) -> tuple[int, int]:
    """Insert points and add them to their series' counts; for formats whose files are copies of one log,
    drop exact (series, step, value) copies first."""
    if frame is None or frame.is_empty():
        return 0, 0
    new = frame.with_columns(pl.lit(item.source_id, dtype=pl.Int32).alias("source_id"))
    dropped = 0
    if item.fmt.dedupe_across_sources:
        before = len(new)
        new = new.unique(subset=["series_id", "step", "value"], keep="first", maintain_order=True)
        con.register("_new_points", new)
        new = con.sql(
            "SELECT n.* FROM _new_points n WHERE NOT EXISTS (SELECT 1 FROM scalars s "
            "WHERE s.series_id = n.series_id AND s.step = n.step AND s.value IS NOT DISTINCT FROM n.value)").pl()
        con.unregister("_new_points")
        dropped = before - len(new)
    con.register("_new_points", new)
    con.execute(
        "INSERT INTO scalars (series_id, source_id, position, step, value, wall_time, epoch, batch) "
        "SELECT series_id, source_id, position, step, value, wall_time, epoch, batch FROM _new_points")
    con.unregister("_new_points")
    counts = new.group_by("series_id").agg(
        pl.len().alias("n"), (~pl.col("value").is_finite()).sum().alias("bad"),
        pl.col("step").min().alias("lo"), pl.col("step").max().alias("hi"))
    con.register("_counts", counts)
    con.execute(
        """UPDATE series SET n_points = n_points + c.n, n_nonfinite = n_nonfinite + c.bad,
                  first_step = least(coalesce(first_step, c.lo), c.lo), last_step = greatest(coalesce(last_step, c.hi), c.hi)
           FROM _counts c WHERE series.series_id = c.series_id""")
    con.unregister("_counts")
    return len(new), dropped


def _insert_histograms(con, source_id: int, hframe: pl.DataFrame) -> None:
    new = hframe.with_columns(pl.lit(source_id, dtype=pl.Int32).alias("source_id"))
    con.register("_new_hist", new)
    con.execute(
        "INSERT INTO histograms SELECT series_id, source_id, position, step, wall_time, bucket_limits, "
        "bucket_counts, min, max, num, sum, sum_squares, mean, std, zero_fraction FROM _new_hist")
    con.unregister("_new_hist")


def _insert_texts(con, run_id: str, source_id: int, frames: list[pl.DataFrame]) -> None:
    frames = [texts_frame(f) for f in frames if len(f)]
    if not frames:
        return
    new = pl.concat(frames).with_columns(pl.lit(run_id).alias("run_id"), pl.lit(source_id).alias("source_id"))
    con.register("_new_text", new)
    con.execute("INSERT INTO texts SELECT run_id, source_id, position, tag, step, wall_time, text FROM _new_text")
    con.unregister("_new_text")


def _json_value(value) -> tuple[str, float | None]:
    if isinstance(value, bool) or value is None:
        return json.dumps(value), None
    if isinstance(value, (int, float)):
        number = float(value)
        # json.dumps writes NaN/Infinity as Python's json does: readable back by json.loads.
        return json.dumps(value), number
    try:
        return json.dumps(value), None
    except TypeError:
        return json.dumps(str(value)), None


def _insert_configs(con, run_id: str, source_id: int, chunks: list[Chunk], *, whole: bool) -> None:
    """Store config documents key by key. A file read whole (`whole`: config.yaml, trainer_state.json) replaces
    its documents, so a key removed from the file goes too; an append-only log (a .wandb whose summary is
    updated as the run goes) replaces only the keys it sends again."""
    latest: dict[tuple[str, str], tuple[str, float | None]] = {}
    for chunk in chunks:
        for name, doc in chunk.configs.items():
            for key, value in flatten(doc):
                latest[(name, key)] = _json_value(value)
    if not latest:
        return
    frame = pl.DataFrame(
        [(run_id, source_id, name, key, text, number) for (name, key), (text, number) in latest.items()],
        schema={"run_id": pl.Utf8, "source_id": pl.Int32, "name": pl.Utf8, "key": pl.Utf8, "value": pl.Utf8,
                "value_num": pl.Float64}, orient="row")
    con.register("_new_cfg", frame)
    same_key = "" if whole else " AND c.key = n.key"
    con.execute("DELETE FROM configs c USING _new_cfg n WHERE c.run_id = n.run_id AND c.source_id = n.source_id "
                "AND c.name = n.name" + same_key)
    con.execute("INSERT INTO configs SELECT * FROM _new_cfg")
    con.unregister("_new_cfg")


def _insert_issues(con, run_id: str, rows: list[tuple[str, int | None, str, str]]) -> None:
    """Record (path, position, kind, detail) rows, each once: a truncated tail met again by a later ingest
    is the same issue, not a new one."""
    if not rows:
        return
    frame = pl.DataFrame(rows, schema={"path": pl.Utf8, "position": pl.Int64, "kind": pl.Utf8, "detail": pl.Utf8},
                         orient="row").unique(maintain_order=True)
    con.register("_new_issues", frame)
    con.execute(
        "INSERT INTO ingest_issues SELECT ?, now(), n.path, n.position, n.kind, n.detail FROM _new_issues n "
        "WHERE NOT EXISTS (SELECT 1 FROM ingest_issues i WHERE i.run_id = ? AND i.path = n.path "
        "AND i.position IS NOT DISTINCT FROM n.position AND i.kind = n.kind)", [run_id, run_id])
    con.unregister("_new_issues")


def refresh_series(con, run_id: str) -> None:
    """Give every series of the run its display name and role, now that all its sources are known.

    TensorBoard shows each event file's folder, relative to the log folder, as a run: `train/loss` and
    `val/loss`. So a TensorBoard series is named by its folder relative to the folders of all the run's
    event files (nothing when there is only one), then its tag.
    """
    rows = con.execute("SELECT series_id, grp, tag, format FROM series WHERE run_id = ?", [run_id]).fetchall()
    tb_groups = sorted({grp for _, grp, _, fmt in rows if fmt == "tensorboard"})
    common = os.path.commonpath(tb_groups) if len(tb_groups) > 1 and all(tb_groups) else None
    updates = []
    for series_id, grp, tag, fmt in rows:
        name = tag
        if fmt == "tensorboard" and len(tb_groups) > 1:
            prefix = os.path.relpath(grp or ".", common or ".") if grp else ""
            name = tag if prefix in ("", ".") else f"{prefix}/{tag}"
        r = role_of(name)
        updates.append((series_id, name, r.role, r.split, r.layer, r.canonical))
    if updates:
        # Explicit types: with over 100 series, polars would infer `split` from rows that are all None.
        frame = pl.DataFrame(updates, schema={"series_id": pl.Int64, "name": pl.Utf8, "role": pl.Utf8, "split": pl.Utf8,
                                              "layer": pl.Utf8, "canonical": pl.Boolean}, orient="row")
        con.register("_names", frame)
        con.execute("UPDATE series SET name = n.name, role = n.role, split = n.split, layer = n.layer, "
                    "canonical = n.canonical FROM _names n WHERE series.series_id = n.series_id")
        con.unregister("_names")

