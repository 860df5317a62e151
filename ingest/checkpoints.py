"""Checkpoints: find them in a run, read per-tensor statistics and scalar state, and the change between them.

Pure: this module reads files and returns rows and frames; `ingest.run` stores them through `ingest.writes`.

Layouts (see docs/checkpoints.md):
    hf          a folder `checkpoint-N/` (or any folder holding HF's model file names): `model.safetensors`,
                shards `model-0000x-of-0000y.safetensors` with `model.safetensors.index.json`,
                `pytorch_model.bin` (and its shards), `optimizer.pt`, `scheduler.pt`, `scaler.pt`,
                `rng_state*.pth`; the step comes from its `trainer_state.json` (`global_step`), which is
                not claimed here: the HF log reader still reads it.
    lightning   a `.ckpt` file: `state_dict` (keys carry the LightningModule's attribute prefix, often
                `model.`), `optimizer_states`, `lr_schedulers`, `global_step`, `epoch`.
    torch       a `.pt`/`.pth`/`.bin` file: a bare state_dict, or a dict with model/optimizer/scaler/step.
    safetensors a bare `.safetensors` file; the step from its metadata (`step`, `global_step`).
The step comes from the contents first, then from the name (`step_500`, `ckpt-500`, `epoch=2-step=500`,
`checkpoint-500`, `iter_0000500`). Lightning's `global_step` is recorded as the contents say: Lightning's
checkpoint named step=N holds the state before logged step N (DECISIONS.md §10).

Safety: torch files are read with `torch.load(weights_only=True)` only (`ingest.tensorfiles`). A file that
needs full unpickling is reported with status `needs_pickle` and the globals it asks for, and is read only with `trust_pickle=True`
(the CLI's `--trust-pickle`). Damaged files (zero length, cut off mid-save, not a checkpoint at all) become a
status and an issue; nothing here raises on bad input.

Memory: safetensors are read tensor by tensor, slice by slice (`ingest.tensorstats`); zip-format torch files
are memory-mapped (`mmap=True`), so clean file pages, not anonymous memory, hold the tensors.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import polars as pl

from ingest.configs import parse_json
from ingest.jsonvalues import INT64_MAX, as_float, int64_or_none
from ingest.records import Issue
from ingest.tensorfiles import (
    STEP_IN_NAME,
    TENSOR_SUFFIXES,
    Unreadable,
    first_line,
    is_batch_path,
    load_torch,
    read_safetensors_header,
)
from ingest.tensorstats import (
    TENSOR_STAT_COLUMNS,
    TensorRef,
    delta_norms,
    dtype_name,
    empty_stats,
    is_float_dtype,
    stats_and_delta,
    stats_of,
)

# HF Trainer's file names (transformers' trainer.py / modeling_utils.py constants, checked against 4.4x).
HF_MODEL_FILE = re.compile(
    r"^(?:model|pytorch_model|adapter_model)(?:-\d+-of-\d+)?\.(?:safetensors|bin)$"
)
HF_INDEX_FILE = re.compile(r"^(?:model|pytorch_model|adapter_model)\.(?:safetensors|bin)\.index\.json$")
HF_STATE_FILES = {"optimizer.pt": "optimizer", "scheduler.pt": "scheduler", "scaler.pt": "scaler"}
HF_RNG_FILE = re.compile(r"^rng_state(?:_\d+)?\.pth$")
HF_FOLDER = re.compile(r"^checkpoint-(\d+)$")

# Step keys in contents, in order of preference (Lightning/HF `global_step`, nanoGPT's `iter_num`).
STEP_KEYS = ("global_step", "step", "iteration", "iter_num", "num_updates", "iter", "steps", "train_step")

MODEL_KEYS = ("state_dict", "model", "model_state_dict", "model_state", "module", "net", "network")
OPTIMIZER_KEYS = ("optimizer", "optimizer_state_dict", "optimizer_state", "optimizer_states", "optim", "opt")
# Lightning 2.x stores the AMP scaler under its precision plugin's class name, 1.x under
# `native_amp_scaling_state`.
SCALER_KEYS = ("scaler", "grad_scaler", "scaler_state_dict", "amp_scaler", "native_amp_scaling_state",
               "MixedPrecision", "MixedPrecisionPlugin", "NativeMixedPrecisionPlugin")
SCHEDULER_KEYS = ("scheduler", "lr_scheduler", "lr_schedulers", "scheduler_state_dict", "sched")
RNG_KEYS = ("rng", "rng_state", "rng_states")  # forensics.capture's and common scripts' RNG entry


@dataclass(frozen=True)
class Layout:
    """One way checkpoints are saved: how it is found, where its states are, and what its step number means.

    `step_means` is "after" (the file holds the state after logged step N: a replay starts at N + 1) or
    "before" (the state before logged step N: a replay starts at N). Lightning counts optimizer steps done, and
    logs step N while doing the (N+1)-th, so its `step=N` file is the state before logged step N; a torch dict
    or HF's `checkpoint-N/` is written after step N (DECISIONS.md §10).
    """

    name: str
    step_means: str
    model_keys: tuple[str, ...] = ()           # keys of a dict checkpoint holding the model's state_dict
    optimizer_keys: tuple[str, ...] = ()       # a list value (Lightning's optimizer_states) holds one per optimizer
    scheduler_keys: tuple[str, ...] = ()
    scaler_keys: tuple[str, ...] = ()
    rng_keys: tuple[str, ...] = ()
    files: dict[str, str] = field(default_factory=dict)  # a folder layout's state files: role -> file name


# The one table of checkpoint layouts: ingest (statistics) and replay/probe (restore) read it.
LAYOUTS: dict[str, Layout] = {layout.name: layout for layout in (
    Layout("torch", "after",
           MODEL_KEYS, OPTIMIZER_KEYS, SCHEDULER_KEYS, SCALER_KEYS, RNG_KEYS),
    Layout("hf", "after",
           files={"optimizer": "optimizer.pt", "scheduler": "scheduler.pt", "scaler": "scaler.pt",
                  "rng": "rng_state.pth"}),
    Layout("lightning", "before",
           ("state_dict",), ("optimizer_states",), ("lr_schedulers",), SCALER_KEYS, ()),
    Layout("safetensors", "after"),
)}
# What an entry point's `step_numbering` may say instead of the layout's own meaning (DECISIONS.md §10).
STEP_NUMBERINGS = {"checkpoint_after_step": "after", "checkpoint_before_step": "before",
                   **{name: layout.step_means for name, layout in LAYOUTS.items()}}


def step_means(fmt: str, step_numbering: str | None = None) -> str:
    """"after" or "before": what a checkpoint of layout `fmt` at step N holds, unless the entry point's
    `step_numbering` overrides it. Raises ValueError naming the accepted values for an unknown one."""
    if step_numbering is not None:
        if step_numbering not in STEP_NUMBERINGS:
            raise ValueError(f"unknown step_numbering {step_numbering!r}; accepted: {', '.join(STEP_NUMBERINGS)}")
        return STEP_NUMBERINGS[step_numbering]
    return LAYOUTS[fmt].step_means if fmt in LAYOUTS else "after"


def first_step_after(fmt: str, step: int, step_numbering: str | None = None) -> int:
    """The first logged step a checkpoint of layout `fmt` saved at `step` has not done yet."""
    return step if step_means(fmt, step_numbering) == "before" else step + 1
BUFFER_SUFFIXES = ("running_mean", "running_var", "num_batches_tracked")
# Wrapper prefixes that do not change which parameter a key names: torch.compile's `_orig_mod.`,
# DistributedDataParallel/DataParallel's `module.`.
WRAPPER_PARTS = ("_orig_mod", "module")

STATS_SCHEMA: dict[str, pl.DataType] = {
    "step": pl.Int64,
    "file": pl.Utf8,
    "tensor": pl.Utf8,
    "kind": pl.Utf8,
    "param": pl.Utf8,
    **TENSOR_STAT_COLUMNS,
}
VALUES_SCHEMA: dict[str, pl.DataType] = {"step": pl.Int64, "key": pl.Utf8, "value": pl.Float64}
DELTAS_SCHEMA: dict[str, pl.DataType] = {
    "tensor": pl.Utf8,
    "step": pl.Int64,
    "prev_step": pl.Int64,
    "step_distance": pl.Int64,
    "delta_l2": pl.Float64,
    "ratio": pl.Float64,
}


@dataclass(frozen=True)
class FoundCheckpoint:
    """A checkpoint located by name only. `path` is a folder for the hf layout, else the file.

    `files` are the files it claims (no other format should read them); `aux` are files it reads but does
    not claim (an HF folder's `trainer_state.json`, which the HF log reader also reads).
    """

    path: PurePosixPath
    format: str  # hf, lightning, torch, safetensors
    files: tuple[PurePosixPath, ...]
    aux: tuple[PurePosixPath, ...] = ()
    name_step: int | None = None


@dataclass
class CheckpointRead:
    """What `read_checkpoint` found: the `checkpoints` row, frames for `tensor_stats` and
    `checkpoint_values` (without run_id/ckpt_id), issues as (relative path, Issue), handles on the
    model tensors by normalised name for `tensor_deltas`, and the deltas against a previous checkpoint."""

    row: dict[str, Any]
    stats: pl.DataFrame
    values: pl.DataFrame
    issues: list[tuple[str, Issue]] = field(default_factory=list)
    model: dict[str, TensorRef] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)  # normalised name -> the key as found in this checkpoint
    deltas: pl.DataFrame | None = None  # against `prev`, when read_checkpoint was given one


def step_from_name(rel: PurePosixPath) -> int | None:
    """The step a checkpoint's name gives: the last step pattern in the file name, then its folder's."""
    for part in (rel.name, rel.parent.name):
        found = STEP_IN_NAME.findall(part)
        if found:
            return int64_or_none(int(found[-1]))
    stem = rel.name.split(".")[0]
    return int64_or_none(int(stem)) if stem.isdigit() else None


def find_checkpoints(rel_paths: Iterable[PurePosixPath]) -> list[FoundCheckpoint]:
    """Group a run's files into checkpoints, by name and place only (no I/O). Saved batches and files that
    are not tensor files are left alone; so is HF's `training_args.bin` (a pickled TrainingArguments, not a
    checkpoint)."""
    by_folder: dict[PurePosixPath, list[PurePosixPath]] = {}
    for rel in rel_paths:
        if not is_batch_path(rel):
            by_folder.setdefault(rel.parent, []).append(rel)
    found: list[FoundCheckpoint] = []
    for folder, files in sorted(by_folder.items()):
        names = {f.name: f for f in files}
        hf_model = [f for f in files if HF_MODEL_FILE.match(f.name) or HF_INDEX_FILE.match(f.name)]
        hf_folder = HF_FOLDER.match(folder.name)
        taken: set[PurePosixPath] = set()
        if hf_model or (hf_folder and any(n in names for n in HF_STATE_FILES)):
            claimed = hf_model + [names[n] for n in HF_STATE_FILES if n in names]
            claimed += [f for f in files if HF_RNG_FILE.match(f.name)]
            aux = tuple(names[n] for n in ("trainer_state.json",) if n in names)
            # HF's final save lands in the output folder itself: name it by its model file, not ".".
            path = folder if folder.parts else sorted(claimed)[0]
            step = int64_or_none(int(hf_folder[1])) if hf_folder else step_from_name(sorted(claimed)[0])
            found.append(FoundCheckpoint(path, "hf", tuple(sorted(claimed)), aux, step))
            taken = set(claimed)
        for f in sorted(files):
            if f in taken or f.suffix.lower() not in TENSOR_SUFFIXES:
                continue
            if f.suffix.lower() == ".bin" and not HF_MODEL_FILE.match(f.name):
                continue  # training_args.bin and other pickled objects: not checkpoints
            fmt = {".safetensors": "safetensors", ".ckpt": "lightning"}.get(f.suffix.lower(), "torch")
            found.append(FoundCheckpoint(f, fmt, (f,), (), step_from_name(f)))
    return found


def normalise_name(name: str, strip: str = "") -> str:
    """The parameter a key names, without wrapper prefixes: `_orig_mod.` (torch.compile) anywhere, a leading
    `module.` (DDP), and `strip` (Lightning's attribute prefix, when every key of the state_dict has it)."""
    if strip and name.startswith(strip):
        name = name[len(strip) :]
    parts = name.split(".")
    while len(parts) > 1 and parts[0] in WRAPPER_PARTS:
        parts = parts[1:]
    return ".".join(p for p in parts if p != "_orig_mod")


# ----------------------------------------------------------------------------------------------- interpretation


class _Collector:
    """Accumulates tensors and scalar values of one checkpoint, with their kind and source file."""

    def __init__(self) -> None:
        self.tensors: list[tuple[str, str, str, str | None, TensorRef]] = []  # file, tensor, kind, param, ref
        self.values: list[tuple[str, float]] = []
        self.steps: list[tuple[str, int]] = []
        self.model_names: list[tuple[str, str]] = []  # (key as found, normalised) in state_dict order
        # False once model tensors come from safetensors, whose header is sorted, not in registration order:
        # optimizer state (index-based) can then not be matched to parameters by position.
        self.ordered = True
        self.has_optimizer = self.has_scaler = self.has_rng = False

    def tensor(self, file: str, name: str, kind: str, param: str | None, t: Any) -> None:
        self.tensors.append((file, name, kind, param, TensorRef(dtype_name(t.dtype), tuple(t.shape), tensor=t)))

    def value(self, key: str, v: Any) -> None:
        num = _number(v)
        if num is not None:
            self.values.append((key, num))

    def model(self, file: str, state: dict[str, Any], strip: str = "") -> None:
        import torch

        for key, t in _flatten(state, ""):
            if not isinstance(t, torch.Tensor):
                self.value(key, t)
                continue
            norm = normalise_name(key, strip)
            buffer = key.endswith(BUFFER_SUFFIXES) or not (t.is_floating_point() or t.is_complex())
            self.tensor(file, key, "buffer" if buffer else "param", norm, t)
            self.model_names.append((key, norm))

    def model_refs(self, file: str, refs: dict[str, TensorRef], strip: str = "") -> None:
        self.ordered = False
        for key, ref in refs.items():
            norm = normalise_name(key, strip)
            buffer = key.endswith(BUFFER_SUFFIXES) or not is_float_dtype(ref.dtype)
            self.tensors.append((file, key, "buffer" if buffer else "param", norm, ref))
            self.model_names.append((key, norm))

    def optimizer(self, file: str, state: Any, prefix: str = "optimizer") -> None:
        """A torch optimizer state_dict: {"state": {index: {...}}, "param_groups": [{..., "params": [...]}]}.

        Index-based state is matched to parameter names only when that is certain: the groups carry
        `param_names` (optimizers built from named_parameters), or the model came from a torch state_dict
        (registration order) and every state tensor's shape equals that of the model's float tensor at the
        same position. Otherwise `param` stays NULL.
        """
        import torch

        self.has_optimizer = True
        if not (isinstance(state, dict) and "state" in state and "param_groups" in state):
            self.generic(file, state, prefix, "optimizer")
            return
        groups = state["param_groups"] if isinstance(state["param_groups"], list) else []
        for g, group in enumerate(groups):
            for key, v in _flatten(group, ""):
                if key.split(".")[0] not in ("params", "param_names"):
                    self.value(f"{prefix}.param_groups.{g}.{key}", v)
        names = self._param_names(groups, state["state"])
        for index, entry in (state["state"] or {}).items():
            param = names.get(index)
            for key, v in _flatten(entry, f"{prefix}.state.{index}"):
                if isinstance(v, torch.Tensor) and v.ndim > 0:
                    self.tensor(file, key, "optimizer", param, v)
                else:
                    self.value(key, v)  # per-parameter step counts (Adam's 0-d `step`)

    def _param_names(self, groups: list[Any], state: dict[Any, Any]) -> dict[Any, str]:
        indices = [i for g in groups if isinstance(g, dict) for i in g.get("params", [])]
        named = [n for g in groups if isinstance(g, dict) for n in g.get("param_names", [])]
        if named and len(named) == len(indices):
            return {i: normalise_name(n) for i, n in zip(indices, named, strict=True)}
        if not self.ordered:
            return {}
        params = [(norm, ref) for (_, _, kind, norm, ref) in self.tensors if kind == "param"]
        if len(params) != len(indices):
            return {}
        mapping = dict(zip(indices, params, strict=True))
        for index, entry in state.items():
            shapes = {tuple(v.shape) for v in entry.values() if hasattr(v, "shape") and v.ndim > 0}
            if index not in mapping or any(s != mapping[index][1].shape for s in shapes):
                return {}
        return {i: norm for i, (norm, _) in mapping.items()}

    def generic(self, file: str, obj: Any, prefix: str, kind: str) -> None:
        import torch

        for key, v in _flatten(obj, prefix):
            if isinstance(v, torch.Tensor):
                if v.ndim == 0:  # a scalar fact (nanoGPT's best_val_loss, a 0-d step): a value, not a tensor
                    self.value(key, v)
                else:
                    self.tensor(file, key, kind, None, v)
            else:
                self.value(key, v)

    def step_candidates(self, obj: dict[str, Any], source: str) -> None:
        for key in STEP_KEYS:
            num = _number(obj.get(key))
            if num is not None and num == num and 0 <= num <= INT64_MAX and num == int(num):
                self.steps.append((source, int(num)))


def _number(v: Any) -> float | None:
    """A plain or 0-d tensor number as float; None for anything else (strings, None, big tensors)."""
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, int | float):
        return as_float(v)
    if hasattr(v, "ndim") and getattr(v, "ndim", 1) == 0 and hasattr(v, "item"):
        try:
            return float(v.item())
        except (TypeError, ValueError, RuntimeError):
            return None
    return None


def _flatten(obj: Any, prefix: str) -> Iterable[tuple[str, Any]]:
    """(dotted path, leaf) for nested dicts, lists and tuples."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            yield from _flatten(v, f"{prefix}.{i}" if prefix else str(i))
    else:
        yield prefix, obj


def _is_state_dict(obj: Any) -> bool:
    import torch

    return isinstance(obj, dict) and bool(obj) and all(isinstance(v, torch.Tensor) for v in obj.values())


def _interpret_torch(c: _Collector, file: str, obj: Any, fmt: str) -> None:
    """Sort a loaded torch object's entries into model / optimizer / scaler / scheduler / step / other."""
    import torch

    if isinstance(obj, torch.Tensor):
        c.tensor(file, "tensor", "other", None, obj)
        return
    if not isinstance(obj, dict):
        c.generic(file, obj, "", "other")
        return
    if _is_state_dict(obj):
        c.model(file, obj)
        return
    if "state" in obj and "param_groups" in obj:  # an optimizer's state_dict saved on its own
        c.optimizer(file, obj)
        return
    c.step_candidates(obj, "contents")
    model_key = next((k for k in MODEL_KEYS if isinstance(obj.get(k), dict)), None)
    for key, v in obj.items():
        k = str(key)
        if k == model_key:
            strip = _common_prefix(v) if fmt == "lightning" else ""
            c.model(file, v, strip)
        elif k in OPTIMIZER_KEYS:
            if isinstance(v, list):  # Lightning: one state_dict per optimizer
                for i, opt in enumerate(v):
                    c.optimizer(file, opt, "optimizer" if len(v) == 1 else f"optimizer.{i}")
            else:
                c.optimizer(file, v)
        elif k in SCALER_KEYS:
            c.has_scaler = True
            c.generic(file, v, "scaler", "scaler")
        elif k in SCHEDULER_KEYS:
            c.generic(file, v, "scheduler", "other")
        elif "rng" in k.lower():
            c.has_rng = True
        elif k in ("callbacks", "loops", "hyper_parameters", "hparams_name", "datamodule_hyper_parameters"):
            continue  # Lightning bookkeeping and configs: no tensors worth statistics, many counters
        else:
            c.generic(file, v, k, "other")


def _common_prefix(state: dict[str, Any]) -> str:
    """Lightning's attribute prefix (e.g. `model.`) when every key of the state_dict starts with it."""
    firsts = {str(k).split(".", 1)[0] for k in state}
    if len(firsts) == 1 and all("." in str(k) for k in state):
        return firsts.pop() + "."
    return ""


# ----------------------------------------------------------------------------------------------- reading


def read_checkpoint(
    root: Path,
    found: FoundCheckpoint,
    trust_pickle: bool = False,
    stats: bool = True,
    prev: CheckpointRead | None = None,
) -> CheckpointRead:
    """Read one checkpoint: its row, tensor statistics, scalar values and issues. Never raises on bad input.

    `stats=False` opens the tensors only (for deltas against a checkpoint stored by an earlier ingest).
    With `prev` (the checkpoint before it, still open), `deltas` against it are computed in the same pass
    that computes the statistics, so each tensor of this checkpoint is read once.
    """
    c = _Collector()
    issues: list[tuple[str, Issue]] = []
    failed: list[tuple[str, str, str]] = []  # (file, kind, reason) of what could not be read
    name_step = found.name_step
    # Model files first: optimizer state is matched to the parameters they name.
    for rel in sorted(found.files, key=lambda r: (not HF_MODEL_FILE.match(r.name), str(r))):
        path = root / rel
        name = rel.name
        try:
            if found.format == "hf" and HF_RNG_FILE.match(name):
                # HF saves python/numpy/torch RNG states; numpy's need globals weights_only refuses. Presence
                # is what matters to a replay, so the file is not unpickled at all.
                c.has_rng = path.stat().st_size > 0
                continue
            if found.format == "hf" and HF_INDEX_FILE.match(name):
                issues += [(str(rel), i) for i in _check_index(root, rel, found.files)]
                continue
            if rel.suffix == ".safetensors":
                metadata, refs, file_issues = read_safetensors_header(path)
                issues += [(str(rel), i) for i in file_issues]
                if file_issues:
                    failed.append((str(rel), "partial", "; ".join(i.detail for i in file_issues)))
                c.model_refs(str(rel), refs)
                for key in STEP_KEYS:
                    if str(metadata.get(key, "")).isdigit() and int64_or_none(int(metadata[key])) is not None:
                        c.steps.append(("contents", int(metadata[key])))
                        break
                continue
            obj, note = load_torch(path, trust_pickle)
            if note is not None:
                issues.append((str(rel), note))
            role = HF_STATE_FILES.get(name) if found.format == "hf" else None
            if role == "optimizer":
                c.optimizer(str(rel), obj)
            elif role == "scaler":
                c.has_scaler = True
                c.generic(str(rel), obj, "scaler", "scaler")
            elif role == "scheduler":
                c.generic(str(rel), obj, "scheduler", "other")
            else:
                _interpret_torch(c, str(rel), obj, found.format)
        except Unreadable as exc:
            issues.append((str(rel), Issue(None, exc.kind, str(exc))))
            failed.append((str(rel), exc.kind, str(exc)))
        except OSError as exc:
            issues.append((str(rel), Issue(None, "unreadable", first_line(exc))))
            failed.append((str(rel), "unreadable", first_line(exc)))
    for rel in found.aux:  # trainer_state.json: the step HF's Trainer was at when it saved
        try:
            state = parse_json((root / rel).read_bytes())
            if isinstance(state, dict):
                c.step_candidates(state, "contents")
        except (OSError, ValueError) as exc:  # unreadable, not JSON, not UTF-8, past the document limits
            issues.append((str(rel), Issue(None, "garbled", f"trainer_state.json unreadable: {exc}")))
    step, step_from = (c.steps[0][1], "contents") if c.steps else (name_step, "name" if name_step is not None else None)

    rows: list[dict[str, Any]] = []
    model: dict[str, TensorRef] = {}
    keys: dict[str, str] = {}
    pair = prev is not None and stats and step is not None and prev.row["step"] is not None
    delta_rows: list[dict[str, Any]] = []
    for file, tensor, kind, param, ref in c.tensors:
        row = {"step": step, "file": file, "tensor": tensor, "kind": kind, "param": param}
        name = param or tensor
        if not ref.readable:
            issues.append((file, Issue(None, "unsupported_dtype", f"tensor {tensor!r} has dtype {ref.dtype}")))
            row.update(empty_stats(ref))
        elif not stats:
            row.update(empty_stats(ref))
        else:
            old = prev.model.get(name) if pair and kind in ("param", "buffer") else None
            try:
                measured, delta = _measure(ref, old)
            except (EOFError, OSError, RuntimeError) as exc:
                issues.append((file, Issue(None, "truncated", f"tensor {tensor!r}: {first_line(exc)}")))
                failed.append((file, "partial", f"tensor {tensor!r}: {first_line(exc)}"))
                continue  # no row: the tensor's bytes are not all there
            row.update(measured)
            if delta is not None:
                delta_rows.append(_delta_row(tensor, step, prev.row["step"], *delta))
        rows.append(row)
        if kind in ("param", "buffer") and ref.readable:
            model[name] = ref
            keys[name] = tensor
    stats_frame = pl.DataFrame(rows, schema=STATS_SCHEMA) if rows else pl.DataFrame(schema=STATS_SCHEMA)
    values_frame = pl.DataFrame(
        {"step": [step] * len(c.values), "key": [k for k, _ in c.values], "value": [v for _, v in c.values]},
        schema=VALUES_SCHEMA,
    )
    model_rows = stats_frame.filter(pl.col("kind").is_in(["param", "buffer"]))
    n_nonfinite = int((model_rows["n_nan"].fill_null(0) + model_rows["n_inf"].fill_null(0)).sum())
    status, detail = _status(failed, bool(rows or c.values))
    size = sum((root / f).stat().st_size for f in found.files if (root / f).exists())
    row = {
        "path": str(found.path),
        "step": step,
        "step_from": step_from,
        "format": found.format,
        "size_bytes": size,
        "n_tensors": len(rows),
        "n_nonfinite": n_nonfinite if stats and model_rows.height else None,
        "finite": (n_nonfinite == 0) if stats and model_rows.height else None,
        "has_optimizer": c.has_optimizer,
        "has_scaler": c.has_scaler,
        "has_rng": c.has_rng,
        "status": status,
        "detail": detail,
    }
    deltas = pl.DataFrame(delta_rows, schema=DELTAS_SCHEMA) if delta_rows else pl.DataFrame(schema=DELTAS_SCHEMA)
    return CheckpointRead(row, stats_frame, values_frame, issues, model, keys, deltas if pair else None)


def _measure(ref: TensorRef, old: TensorRef | None) -> tuple[dict[str, Any], tuple[float, float] | None]:
    """Statistics of `ref`, and (‖ref − old‖, ‖old‖) in the same pass when `old` is comparable. Raises
    EOFError/OSError/RuntimeError when `ref`'s own bytes cannot be read (a damaged `old` only loses the delta)."""
    if old is not None and _comparable(old, ref):
        try:
            row, delta, norm = stats_and_delta(ref, old)
            return row, (delta, norm)
        except (EOFError, OSError, RuntimeError):
            pass  # either side may be cut off: the statistics alone tell whether it is this one
    return stats_of(ref), None


def _status(failed: list[tuple[str, str, str]], anything: bool) -> tuple[str, str | None]:
    """ok / partial / unreadable / needs_pickle, with the failing files and reasons named."""
    if not failed:
        return "ok", None
    detail = "; ".join(f"{f}: {reason}" for f, _, reason in failed)
    if not anything:
        return ("needs_pickle" if all(k == "needs_pickle" for _, k, _ in failed) else "unreadable"), detail
    return "partial", detail


def _check_index(root: Path, rel: PurePosixPath, claimed: tuple[PurePosixPath, ...]) -> list[Issue]:
    """HF's shard index {"metadata": {"total_size": N}, "weight_map": {tensor: file}}: every shard present?"""
    try:
        index = parse_json((root / rel).read_bytes())
        shards = set(index["weight_map"].values())
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return [Issue(None, "garbled", f"shard index unreadable: {exc}")]
    present = {f.name for f in claimed}
    missing = sorted(shards - present)
    return [Issue(None, "missing_shard", f"shard {s} listed in {rel.name} is missing") for s in missing]


def tensor_deltas(prev: CheckpointRead, cur: CheckpointRead) -> pl.DataFrame:
    """Per model tensor present in both (matched by normalised name, same shape, float dtype):
    ‖w_cur − w_prev‖₂, that over ‖w_prev‖₂, and the step distance. A frozen tensor has delta 0;
    ratio is 0 when both delta and ‖w_prev‖ are 0, +inf when only ‖w_prev‖ is. `tensor` is the key as found
    in `cur`, so a row joins `tensor_stats` on (ckpt_id, tensor); `tensor_stats.param` is the shared name."""
    rows = []
    for name, ref in cur.model.items():
        old = prev.model.get(name)
        if old is None or not _comparable(old, ref):
            continue
        try:
            delta, norm = delta_norms(old, ref)
        except (EOFError, OSError, RuntimeError):
            continue  # a tensor cut off mid-save: its read already reported it
        rows.append(_delta_row(cur.keys.get(name, name), cur.row["step"], prev.row["step"], delta, norm))
    return pl.DataFrame(rows, schema=DELTAS_SCHEMA) if rows else pl.DataFrame(schema=DELTAS_SCHEMA)


def _comparable(old: TensorRef, ref: TensorRef) -> bool:
    return old.shape == ref.shape and is_float_dtype(ref.dtype) and is_float_dtype(old.dtype) and old.readable


def _delta_row(name: str, step: int | None, prev_step: int | None, delta: float, norm: float) -> dict[str, Any]:
    distance = step - prev_step if step is not None and prev_step is not None else None
    ratio = delta / norm if norm > 0 else (0.0 if delta == 0 else float("inf"))
    return {"tensor": name, "step": step, "prev_step": prev_step, "step_distance": distance,
            "delta_l2": delta, "ratio": ratio}


# ----------------------------------------------------------------------------------------------- states, for a restore


@dataclass
class States:
    """The states one checkpoint holds, loaded (None where it did not save them), and what was missing.
    `model` is the state_dict as saved: wrapper prefixes are the restorer's to strip (`strip_prefix`)."""

    path: str
    layout: str
    model: dict[str, Any]
    optimizer: dict | None = None
    scheduler: dict | None = None
    scaler: dict | None = None
    rng: dict | None = None
    notes: list[str] = field(default_factory=list)


def read_states(root: Path, rel: str, fmt: str) -> States:
    """Load checkpoint `rel` (a path inside `root`, of layout `fmt` as the store found it) for a restore: the model,
    optimizer, scheduler, scaler and RNG states where `LAYOUTS[fmt]` says they are. Torch files with
    `weights_only=True` only (checkpoints are untrusted); raises `CheckpointMismatch` naming the file when one
    cannot be read that way or holds no model state. Imports torch."""
    from ingest.errors import CheckpointMismatch
    from ingest.tensorfiles import load_safetensors

    path = root / rel
    if fmt == "safetensors" or (path.is_file() and path.suffix == ".safetensors"):
        return States(rel, "safetensors", load_safetensors(path), notes=["weights only: no optimizer, scheduler or RNG state saved"])
    if path.is_dir():
        layout = LAYOUTS["hf"]
        weights = [f for f in ("model.safetensors", "pytorch_model.bin") if (path / f).is_file()]
        if not weights:
            raise CheckpointMismatch(f"{rel} holds no model.safetensors or pytorch_model.bin (sharded weights are not "
                                     f"restored yet)")
        model = load_safetensors(path / weights[0]) if weights[0].endswith(".safetensors") else _load(path / weights[0], rel)
        out = States(rel, "hf", model)
        for role, name in layout.files.items():
            if not (path / name).is_file():
                continue
            if role == "rng":
                out.rng = _load_rng(path / name)
                if out.rng is None:
                    out.notes.append(f"{name} could not be read safely: RNG not restored")
            else:
                setattr(out, role, _load(path / name, f"{rel}/{name}"))
        return out
    layout = LAYOUTS.get(fmt, LAYOUTS["torch"])
    obj = _load(path, rel)
    if not isinstance(obj, dict):
        raise CheckpointMismatch(f"{rel} holds a {type(obj).__name__}, not a dict of states")
    if _is_state_dict(obj):
        return States(rel, layout.name, obj, notes=["a bare state_dict: no optimizer, scheduler or RNG state saved"])
    model = next((obj[k] for k in layout.model_keys if isinstance(obj.get(k), dict)), None)
    if model is None:
        raise CheckpointMismatch(f"{rel} has no model state under any of {', '.join(layout.model_keys)} "
                                 f"(keys: {', '.join(map(str, list(obj)[:8]))})")
    out = States(rel, layout.name, model)
    for role, keys in (("optimizer", layout.optimizer_keys), ("scheduler", layout.scheduler_keys),
                       ("scaler", layout.scaler_keys), ("rng", layout.rng_keys)):
        key = next((k for k in keys if obj.get(k) is not None), None)
        if key is None:
            continue
        value = obj[key]
        if isinstance(value, list):  # Lightning: one state per optimizer / scheduler
            if len(value) > 1:
                out.notes.append(f"{rel} holds {len(value)} {role} states under {key}: the first is restored")
            value = value[0] if value else None
        if role == "scheduler" and isinstance(value, dict) and "scheduler" in value and "interval" in value:
            value = value["scheduler"]  # Lightning 1.x wrapped each scheduler's state with its config
        setattr(out, role, value)
    return out


def _load(path: Path, rel: str) -> Any:
    from ingest.errors import CheckpointMismatch

    try:
        obj, _ = load_torch(path, trust_pickle=False)
    except (Unreadable, OSError) as exc:
        raise CheckpointMismatch(f"cannot read {rel} with weights_only=True: {first_line(exc)}") from None
    return obj


def _load_rng(path: Path) -> dict | None:
    """HF's rng_state.pth holds numpy's state (an array): allow exactly numpy's reconstruct globals."""
    import pickle
    import zipfile

    import numpy as np
    from numpy._core.multiarray import _reconstruct
    from torch.serialization import safe_globals

    from ingest.tensorfiles import torch_load

    try:
        with safe_globals([_reconstruct, np.ndarray, np.dtype, type(np.dtype("uint32"))]):
            return torch_load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, OSError, zipfile.BadZipFile):
        return None  # an RNG state we cannot read safely is reported as not restored


def strip_prefix(state: dict[str, Any], wanted: set[str], declared: str | None = None) -> dict[str, Any]:
    """`state` with a wrapper prefix dropped when that makes its keys those of `wanted`: the entry point's
    declared one, torch.compile's `_orig_mod.` and DDP's `module.` (WRAPPER_PARTS), then a prefix every key
    shares (Lightning's LightningModule attribute, e.g. `model.`)."""
    for prefix in [declared or "", *(p + "." for p in WRAPPER_PARTS), None]:
        prefix = _common_prefix(state) if prefix is None else prefix
        if prefix and set(state) != wanted and all(str(k).startswith(prefix) for k in state):
            state = {k[len(prefix):]: v for k, v in state.items()}
    return state
