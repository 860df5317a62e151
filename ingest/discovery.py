"""Run discovery: which folders under a root are training runs, and why (rules in docs/watch.md).

A run is the folder whose files belong to one training run (DECISIONS.md §1): everything below it is that
run's sources. Discovery walks a root top-down and stops at the first folder that is a run, so a run's own
`train/`/`val/` folders, `checkpoint-*/` copies and single `wandb/` run are never split off it. The rules,
tried in this order on each folder (the first that matches names its `kind`):

1. The folder's own name and place say it is one run, as the tool that wrote it names runs:
   `wandb_run`          W&B's run folder, `run-YYYYMMDD_HHMMSS-<id>` or `offline-run-...` (wandb/sdk's
                        `run-{timespec}-{run_id}` naming);
   `lightning_version`  `version_N` holding Lightning's `metrics.csv`, `hparams.yaml`, an event file or
                        `checkpoints/` (CSVLogger / TensorBoardLogger: `<save_dir>/<name>/version_N`);
   `mlflow_run`         `mlruns/<experiment>/<run>` holding `meta.yaml` or `metrics/` (MLflow's FileStore).
2. The folder holds a run's logs itself:
   `hf_output_dir`      `trainer_state.json`, or `checkpoint-N/` folders (HF Trainer's output_dir);
   `tensorboard_logdir_run`  event files, directly or in split folders (`train/`, `val/`, `validation/`,
                        `eval/`, `test/`: one writer per split, as Keras and most scripts do);
   `metrics_table`      Lightning's `metrics.csv` outside a version folder, or a W&B UI export
                        `wandb_export_*.csv`;
   `dvclive_run`        DVCLive's folder (`metrics.json` beside `plots/metrics/`), or a folder holding one;
   `wandb_run`          a loose `run-<id>.wandb` file, or W&B's `wandb-summary.json` (with `output.log` and
                        `config.yaml`, what a run's `files/` keeps), directly or in a `files/` folder;
   `console_and_checkpoints`  a console log (by name: `*.log`, `*.out`, `slurm-*.out`, ...) beside checkpoint
                        files (`*.pt`, `*.pth`, `*.ckpt`, `*.safetensors`), directly or in a `checkpoints/`,
                        `ckpt/`, `weights/` or `models/` folder;
   `console_log`        a console log whose lines, sampled from its head, middle and tail, carry steps and
                        metrics, repeated record lines, a table under its header, or bare values of what its name
                        says (`ingest.console.sniff_console`), so `/var/log` is not a run; besides the names above, a
                        file with no extension or a `.md`/`.txt` one is sniffed too (`stdout` saved by hand, a log
                        pasted into `issue.md`).
3. A tool folder inside it holds exactly one run, so the folder is that run with its other files (configs,
   checkpoints, batches): `wandb/` with one run folder, `lightning_logs/` with one `version_N`, `mlruns/`
   with one run, `runs/` (SummaryWriter's default `runs/<date>_<host>`) with one event-file folder. When a
   tool folder holds two or more, the folder is split: discovery goes on below it.

Otherwise the walk descends. It never follows symlinked folders (W&B's `latest-run` is one), skips hidden
folders and known non-run trees (`.git`, `node_modules`, virtualenvs, `__pycache__`), goes at most
`max_depth` folders below the root and scans at most `max_dirs` folders. Pure: no database, no writes.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ingest import files
from ingest.checkpoints import TENSOR_SUFFIXES
from ingest.wandb import RUN_FILE, RUN_FOLDER

MAX_DEPTH = 8
MAX_DIRS = 200_000
# Never a run, nor above one: what ingest never reads (its visible ones; every hidden folder is skipped) and
# installed packages.
SKIP_DIRS = {name for name in files.SKIP_DIRS if not name.startswith(".")} | {"site-packages", "dist-packages"}
SPLIT_DIRS = {"train", "training", "val", "valid", "validation", "eval", "evaluation", "test"}
CHECKPOINT_DIRS = {"checkpoints", "checkpoint", "ckpt", "ckpts", "weights", "models", "saved_models"}
VERSION_DIR = re.compile(r"^version_\d+$")
HF_CHECKPOINT_DIR = re.compile(r"^checkpoint-\d+$")
LIGHTNING_FILES = {"metrics.csv", "hparams.yaml"}
WANDB_SUMMARY = "wandb-summary.json"
SNIFFED_LOGS = 3  # console logs sampled (`ingest.formats.sample`) per folder before giving up on rule 2's console_log


@dataclass(frozen=True)
class DiscoveredRun:
    """A run found under a root: its folder (absolute), the rule's kind, and why in words."""

    path: Path
    kind: str
    reason: str

    @property
    def name(self) -> str:
        return self.path.name


@dataclass
class Discovery:
    """What one walk found: runs sorted by path, folders scanned, folders it could not read (path, error),
    and whether a limit (depth or folder count) stopped it."""

    root: Path
    runs: list[DiscoveredRun] = field(default_factory=list)
    dirs_scanned: int = 0
    errors: list[tuple[str, str]] = field(default_factory=list)
    truncated: bool = False
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (folder, why): files, but not a run


@dataclass(frozen=True)
class _Entry:
    name: str
    is_dir: bool
    is_file: bool


def _list(path: Path) -> list[_Entry] | None:
    """The folder's entries without following symlinks; None when it cannot be read."""
    try:
        with os.scandir(path) as it:
            return [_Entry(e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False)) for e in it]
    except OSError:
        return None


def _is_event_file(name: str) -> bool:
    return name.startswith("events.out.tfevents")


def _is_tensor_file(name: str) -> bool:
    lower = name.lower()
    return lower.endswith(TENSOR_SUFFIXES) and lower != "training_args.bin"


def _is_console_log(name: str) -> bool:
    from ingest.console import claims_console

    return claims_console(PurePosixPath(name))


def _has_events(path: Path) -> bool:
    entries = _list(path)
    return bool(entries) and any(e.is_file and _is_event_file(e.name) for e in entries)


def _has_tensor_files(path: Path) -> bool:
    entries = _list(path)
    return bool(entries) and any(e.is_file and _is_tensor_file(e.name) for e in entries)


def _sniffs_as_console(path: Path) -> bool:
    from ingest.console import sniff_console
    from ingest.formats import sample

    return sniff_console(sample(path), path.name)


def _own_kind(path: Path, entries: list[_Entry]) -> tuple[str, str] | None:
    """Rule 1: the folder's name and place."""
    name = path.name
    files = {e.name for e in entries if e.is_file}
    dirs = {e.name for e in entries if e.is_dir}
    if RUN_FOLDER.match(name):
        return "wandb_run", f"W&B run folder {name}"
    if VERSION_DIR.match(name):
        held = sorted(files & LIGHTNING_FILES) + (["checkpoints/"] if "checkpoints" in dirs else [])
        held += ["event files"] if any(_is_event_file(f) for f in files) else []
        if held:
            return "lightning_version", f"Lightning version folder holding {', '.join(held)}"
    if path.parent.parent.name == "mlruns" and ("meta.yaml" in files or "metrics" in dirs):
        return "mlflow_run", f"MLflow run mlruns/{path.parent.name}/{name}"
    return None


def _log_kind(path: Path, entries: list[_Entry]) -> tuple[str, str] | None:
    """Rule 2: the folder holds a run's logs itself."""
    files = sorted(e.name for e in entries if e.is_file)
    dirs = sorted(e.name for e in entries if e.is_dir)
    hf_dirs = [d for d in dirs if HF_CHECKPOINT_DIR.match(d)]
    if "trainer_state.json" in files or hf_dirs:
        what = ["trainer_state.json"] if "trainer_state.json" in files else []
        what += [f"{len(hf_dirs)} checkpoint-N/ folders"] if hf_dirs else []
        return "hf_output_dir", f"HF Trainer output dir holding {' and '.join(what)}"
    if any(_is_event_file(f) for f in files):
        return "tensorboard_logdir_run", "holds TensorBoard event files"
    splits = [d for d in dirs if d.lower() in SPLIT_DIRS and _has_events(path / d)]
    if splits:
        return "tensorboard_logdir_run", f"holds TensorBoard event files in {', '.join(s + '/' for s in splits)}"
    tables = [f for f in files if f == "metrics.csv" or (f.startswith("wandb_export_") and f.endswith(".csv"))]
    if tables:
        return "metrics_table", f"holds {tables[0]}"
    loose = [f for f in files if RUN_FILE.match(f)]
    if loose:
        return "wandb_run", f"holds the W&B run log {loose[0]}"
    dvclive = [d for d in dirs if _is_dvclive_dir(path / d)] + (["."] if _is_dvclive_dir(path) else [])
    if dvclive:
        where = "it is" if dvclive[0] == "." else f"its {dvclive[0]}/ folder is"
        return "dvclive_run", f"{where} DVCLive's (metrics.json beside plots/metrics/)"
    if WANDB_SUMMARY in files:
        return "wandb_run", f"holds W&B's {WANDB_SUMMARY} (a run's files kept without its history)"
    if "files" in dirs and (path / "files" / WANDB_SUMMARY).is_file():
        return "wandb_run", f"its files/ folder holds W&B's {WANDB_SUMMARY} (a run's files kept without its history)"
    logs = [f for f in files if _is_console_log(f)]
    if logs:  # a console log beside checkpoints needs no sniffing: its name says what it is
        ckpt = [f for f in files if _is_tensor_file(f)]
        ckpt_dirs = [d for d in dirs if d.lower() in CHECKPOINT_DIRS and _has_tensor_files(path / d)]
        if ckpt or ckpt_dirs:
            where = ckpt[0] if ckpt else f"{ckpt_dirs[0]}/"
            return "console_and_checkpoints", f"holds the console log {logs[0]} and checkpoints ({where})"
    # Logs under names no reader claims (no extension, `.md`, `.txt`) are recognised by their content.
    unnamed = [f for f in files if f not in logs and _may_be_text_log(f)]
    sniffed = next((f for f in logs[:SNIFFED_LOGS] + unnamed[:SNIFFED_LOGS] if _sniffs_as_console(path / f)), None)
    if sniffed:
        return "console_log", f"holds the console log {sniffed}, whose lines carry steps and metrics"
    named = next((f for f in logs[:SNIFFED_LOGS] if _prints_a_loss(path / f)), None)
    if named:  # a log by its name that prints a loss, however few lines (a crash after three batches)
        return "console_log", f"holds the console log {named}, which prints a loss"
    return None


def _is_dvclive_dir(path: Path) -> bool:
    """DVCLive's folder (`dvclive/` unless `Live(dir=...)` names another): its summary beside its per-metric TSVs."""
    return (path / "metrics.json").is_file() and (path / "plots" / "metrics").is_dir()


def _prints_a_loss(path: Path) -> bool:
    from ingest.console import prints_a_loss
    from ingest.formats import sample

    return prints_a_loss(sample(path))


def _may_be_text_log(name: str) -> bool:
    from ingest.formats import may_be_text_log

    return may_be_text_log(PurePosixPath(name))


def _tool_folder_units(path: Path, tool: str) -> list[str]:
    """The runs a tool folder holds, as paths relative to the tool folder."""
    entries = _list(path) or []
    dirs = sorted(e.name for e in entries if e.is_dir and not e.name.startswith("."))
    if tool == "wandb":
        return [d for d in dirs if RUN_FOLDER.match(d)]
    if tool == "lightning_logs":
        return [d for d in dirs if VERSION_DIR.match(d)]
    if tool == "runs":
        return [d for d in dirs if _has_events(path / d)]
    if tool == "mlruns":
        units = []
        for exp in dirs:
            if exp == "models":  # the model registry, not an experiment
                continue
            for e in _list(path / exp) or []:
                inner = _list(path / exp / e.name) if e.is_dir else None
                if inner and _own_kind(path / exp / e.name, inner):
                    units.append(f"{exp}/{e.name}")
        return units
    return []


TOOL_FOLDERS = {"wandb": "wandb_run", "lightning_logs": "lightning_version", "mlruns": "mlflow_run",
                "runs": "tensorboard_logdir_run"}


def _lifted_kind(path: Path, entries: list[_Entry]) -> tuple[str, str] | None | bool:
    """Rule 3: a tool folder holding exactly one run makes this folder that run. Returns False when a tool
    folder holds several (the folder must be split), None when no tool folder decides."""
    found: list[tuple[str, str]] = []
    for e in entries:
        if not e.is_dir or e.name not in TOOL_FOLDERS:
            continue
        units = _tool_folder_units(path / e.name, e.name)
        if len(units) > 1:
            return False
        if len(units) == 1:
            found.append((TOOL_FOLDERS[e.name], f"its {e.name}/ folder holds one run ({units[0]})"))
    if not found:
        return None
    return found[0][0], "; ".join(r for _, r in found)


def classify(path: Path, entries: list[_Entry] | None = None) -> DiscoveredRun | None:
    """The folder as one run, with the rule that makes it one; None when it is not a run by itself."""
    path = Path(path)
    entries = _list(path) if entries is None else entries
    if entries is None:
        return None
    for rule in (_own_kind, _log_kind):
        hit = rule(path, entries)
        if hit:
            return DiscoveredRun(path, *hit)
    lifted = _lifted_kind(path, entries)
    if lifted:
        return DiscoveredRun(path, *lifted)
    return None


def _why_not_a_run(files: list[str]) -> str:
    """Why a folder of files is no run: none of them is a log, metrics file, checkpoint or saved batch (the first few
    named, so a user sees whether one of them was meant to be)."""
    shown = ", ".join(sorted(files)[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    which = "its one file is not" if len(files) == 1 else f"none of its {len(files)} files is"
    return f"{which} a training log, metrics file or checkpoint ({shown})"


def discover(root: Path, *, max_depth: int = MAX_DEPTH, max_dirs: int = MAX_DIRS) -> Discovery:
    """Walk `root` top-down and return every run under it (the root itself when it is one run)."""
    root = Path(root).expanduser().resolve()
    out = Discovery(root)
    seen: set[tuple[int, int]] = set()  # (device, inode): a bind mount looping back is walked once
    stack: list[tuple[Path, int]] = [(root, 0)]
    while stack:
        path, depth = stack.pop()
        if out.dirs_scanned >= max_dirs:
            out.truncated = True
            break
        try:
            st = path.stat()
        except OSError as exc:
            out.errors.append((str(path), exc.strerror or str(exc)))
            continue
        if (st.st_dev, st.st_ino) in seen:
            continue
        seen.add((st.st_dev, st.st_ino))
        entries = _list(path)
        out.dirs_scanned += 1
        if entries is None:
            out.errors.append((str(path), "cannot list this folder (permission denied or gone)"))
            continue
        run = classify(path, entries)
        if run is not None:
            out.runs.append(run)
            continue
        children = [e.name for e in entries
                    if e.is_dir and not e.name.startswith(".") and e.name not in SKIP_DIRS]
        files = [e.name for e in entries if e.is_file and not e.name.startswith(".")]
        if not children and files and path != root:
            out.left_out.append((str(path), _why_not_a_run(files)))
        if depth >= max_depth:
            out.truncated = out.truncated or bool(children)  # runs deeper than this are not looked for
            continue
        stack.extend((path / c, depth + 1) for c in sorted(children, reverse=True))
    out.runs.sort(key=lambda r: str(r.path))
    return out


def discover_runs(root: Path) -> list[DiscoveredRun]:
    """Every run under `root`, sorted by path (see the module docstring for the rules)."""
    return discover(root).runs
