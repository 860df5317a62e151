"""Checkpoints: find them in a run, read per-tensor statistics and scalar state, and the change between them.

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

Safety: torch files are read with `torch.load(weights_only=True)` only. A file that needs full unpickling is
reported with status `needs_pickle` and the globals it asks for, and is read only with `trust_pickle=True`
(the CLI's `--trust-pickle`). Damaged files (zero length, cut off mid-save, not a checkpoint at all) become a
status and an issue; nothing here raises on bad input.

Memory: safetensors are read tensor by tensor, slice by slice (`ingest.tensorstats`); zip-format torch files
are memory-mapped (`mmap=True`), so clean file pages, not anonymous memory, hold the tensors.
"""

from __future__ import annotations

import json
import pickle
import re
import struct
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import polars as pl

from ingest.records import Issue
from ingest.tensorstats import (
    SAFETENSORS_DTYPES,
    TENSOR_STAT_COLUMNS,
    TensorRef,
    delta_norms,
    dtype_name,
    empty_stats,
    is_float_dtype,
    stats_and_delta,
    stats_of,
)

TENSOR_SUFFIXES = (".safetensors", ".pt", ".pth", ".ckpt", ".bin")

# HF Trainer's file names (transformers' trainer.py / modeling_utils.py constants, checked against 4.4x).
HF_MODEL_FILE = re.compile(
    r"^(?:model|pytorch_model|adapter_model)(?:-\d+-of-\d+)?\.(?:safetensors|bin)$"
)
HF_INDEX_FILE = re.compile(r"^(?:model|pytorch_model|adapter_model)\.(?:safetensors|bin)\.index\.json$")
HF_STATE_FILES = {"optimizer.pt": "optimizer", "scheduler.pt": "scheduler", "scaler.pt": "scaler"}
HF_RNG_FILE = re.compile(r"^rng_state(?:_\d+)?\.pth$")
HF_FOLDER = re.compile(r"^checkpoint-(\d+)$")

# Step in a name: the keyword, an optional separator, the number (zero padding allowed).
STEP_IN_NAME = re.compile(r"(?:^|[^a-z])(?:global_step|step|steps|ckpt|checkpoint|iter|iteration)[=_\-]?(\d+)", re.I)
# Step keys in contents, in order of preference (Lightning/HF `global_step`, nanoGPT's `iter_num`).
STEP_KEYS = ("global_step", "step", "iteration", "iter_num", "num_updates", "iter", "steps", "train_step")

MODEL_KEYS = ("state_dict", "model", "model_state_dict", "model_state", "module", "net", "network")
OPTIMIZER_KEYS = ("optimizer", "optimizer_state_dict", "optimizer_state", "optimizer_states", "optim", "opt")
# Lightning 2.x stores the AMP scaler under its precision plugin's class name, 1.x under
# `native_amp_scaling_state`.
SCALER_KEYS = ("scaler", "grad_scaler", "scaler_state_dict", "amp_scaler", "native_amp_scaling_state",
               "MixedPrecision", "MixedPrecisionPlugin", "NativeMixedPrecisionPlugin")
SCHEDULER_KEYS = ("scheduler", "lr_scheduler", "lr_schedulers", "scheduler_state_dict", "sched")
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
            return int(found[-1])
    stem = rel.name.split(".")[0]
    return int(stem) if stem.isdigit() else None


def is_batch_path(rel: PurePosixPath) -> bool:
    """Saved batches (DECISIONS.md §10): tensor files under a `batches/` folder, or named for a batch."""
    if rel.suffix.lower() not in TENSOR_SUFFIXES:
        return False
    return any(p.lower() in ("batches", "batch", "saved_batches") for p in rel.parts[:-1]) or bool(
        re.match(r"^batch(?:es)?[_\-.=]", rel.name, re.I)
    )


def find_checkpoints(root: Path, rel_paths: Iterable[PurePosixPath]) -> list[FoundCheckpoint]:
    """Group a run's files into checkpoints, by name and place only (no I/O; `root` is for the caller's
    convenience and unused). Saved batches and files that are not tensor files are left alone; so is
    HF's `training_args.bin` (a pickled TrainingArguments, not a checkpoint)."""
    del root
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
            step = int(hf_folder[1]) if hf_folder else step_from_name(sorted(claimed)[0])
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


# ----------------------------------------------------------------------------------------------- file reading


class _Unreadable(Exception):
    """A file could not be read; `kind` is the ingest_issues kind, the message the reason."""

    def __init__(self, kind: str, detail: str):
        super().__init__(detail)
        self.kind = kind


def read_safetensors_header(path: Path) -> tuple[dict[str, str], dict[str, TensorRef], list[Issue]]:
    """The metadata and a `TensorRef` per tensor of a safetensors file, from its header alone.

    Format (huggingface/safetensors README): 8-byte little-endian header length N, N bytes of JSON
    {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}}, then the data, offsets
    relative to its start. A file cut off mid-save keeps every tensor whose bytes are all present; the
    others become `truncated` issues. Raises `_Unreadable` when not even the header can be read.
    """
    size = path.stat().st_size
    if size == 0:
        raise _Unreadable("empty", "file is empty (0 bytes)")
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise _Unreadable("truncated", f"file is {size} bytes, shorter than the 8-byte header length")
        (n,) = struct.unpack("<Q", head)
        if n > size - 8:
            kind = "truncated" if n < 100 << 20 else "not_this_format"
            raise _Unreadable(kind, f"header of {n} bytes does not fit in a {size}-byte file")
        try:
            header = json.loads(f.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise _Unreadable("not_this_format", f"safetensors header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise _Unreadable("not_this_format", "safetensors header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    start = 8 + n
    refs: dict[str, TensorRef] = {}
    issues: list[Issue] = []
    for name, info in header.items():
        try:
            begin, end = (int(x) for x in info["data_offsets"])
            shape = tuple(int(s) for s in info["shape"])
            dtype = SAFETENSORS_DTYPES.get(info["dtype"], info["dtype"])
        except (KeyError, TypeError, ValueError) as exc:
            issues.append(Issue(None, "garbled", f"tensor {name!r}: header entry unreadable ({exc})"))
            continue
        if start + end > size:
            issues.append(Issue(start + begin, "truncated", f"tensor {name!r} ends at byte {start + end}, "
                                f"past the end of the {size}-byte file (cut off mid-save?)"))  # fmt: skip
            continue
        refs[name] = TensorRef(dtype=dtype, shape=shape, path=path, offset=start + begin, nbytes=end - begin)
    return {str(k): str(v) for k, v in metadata.items()}, refs, issues


def load_torch(path: Path, trust_pickle: bool = False) -> tuple[Any, Issue | None]:
    """`torch.load` a file safely: (object, None), or raises `_Unreadable`.

    Zip-format files (torch ≥ 1.6) are memory-mapped; legacy ones are read into memory. With
    `weights_only=True`, a file that names other globals (a pickled nn.Module, numpy arrays) raises
    `_Unreadable('needs_pickle', …)` naming them, unless `trust_pickle`; then it is fully unpickled and an
    `untrusted_pickle_read` issue records that.
    """
    import torch

    size = path.stat().st_size
    if size == 0:
        raise _Unreadable("empty", "file is empty (0 bytes)")
    with open(path, "rb") as f:
        magic = f.read(4)
    is_zip = magic == b"PK\x03\x04"
    if not is_zip and magic[:1] != b"\x80":  # neither a zip archive nor a pickle (protocol ≥ 2)
        raise _Unreadable("not_this_format", f"not a torch file (starts with {magic!r})")
    if is_zip and not zipfile.is_zipfile(path):
        raise _Unreadable("truncated", "zip archive has no central directory: cut off mid-save?")
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=is_zip), None
    except pickle.UnpicklingError as exc:
        refused = _unsafe_globals(path) if is_zip else []
        if not trust_pickle:
            names = ", ".join(refused) or _refused_global(str(exc))
            raise _Unreadable(
                "needs_pickle",
                f"needs full unpickling (globals: {names}); read it with --trust-pickle only if you trust it",
            ) from None
    except (RuntimeError, EOFError, ValueError, OSError, zipfile.BadZipFile) as exc:
        raise _Unreadable("truncated" if isinstance(exc, EOFError) else "unreadable", _first_line(exc)) from None
    try:
        obj = torch.load(path, map_location="cpu", weights_only=False, mmap=is_zip)  # noqa: S614 -- opted in
    except (RuntimeError, EOFError, ValueError, OSError, pickle.UnpicklingError, AttributeError, ImportError) as exc:
        raise _Unreadable("unreadable", f"full unpickling failed too: {_first_line(exc)}") from None
    if isinstance(obj, torch.nn.Module):
        obj = obj.state_dict()
    note = f"read with full unpickling (--trust-pickle): {', '.join(refused) or 'globals unknown'}"
    return obj, Issue(None, "untrusted_pickle_read", note)


def _unsafe_globals(path: Path) -> list[str]:
    import torch

    try:
        return list(torch.serialization.get_unsafe_globals_in_checkpoint(path))
    except (RuntimeError, ValueError, pickle.UnpicklingError):
        return []


def _refused_global(message: str) -> str:
    m = re.search(r"Unsupported global: GLOBAL (\S+)", message)
    return m[1] if m else "unknown"


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"


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
            if num is not None and num == int(num) and num >= 0:
                self.steps.append((source, int(num)))


def _number(v: Any) -> float | None:
    """A plain or 0-d tensor number as float; None for anything else (strings, None, big tensors)."""
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, int | float):
        return float(v)
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
                    if str(metadata.get(key, "")).isdigit():
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
        except _Unreadable as exc:
            issues.append((str(rel), Issue(None, exc.kind, str(exc))))
            failed.append((str(rel), exc.kind, str(exc)))
        except OSError as exc:
            issues.append((str(rel), Issue(None, "unreadable", _first_line(exc))))
            failed.append((str(rel), "unreadable", _first_line(exc)))
    for rel in found.aux:  # trainer_state.json: the step HF's Trainer was at when it saved
        try:
            state = json.loads((root / rel).read_text(encoding="utf-8"))
            if isinstance(state, dict):
                c.step_candidates(state, "contents")
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
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
                issues.append((file, Issue(None, "truncated", f"tensor {tensor!r}: {_first_line(exc)}")))
                failed.append((file, "partial", f"tensor {tensor!r}: {_first_line(exc)}"))
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
        index = json.loads((root / rel).read_text(encoding="utf-8"))
        shards = set(index["weight_map"].values())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
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
            "delta_l2": delta, "ratio": ratio}  # fmt: skip


# ----------------------------------------------------------------------------------------------- writing


def checkpoint_size(root: Path, found: FoundCheckpoint) -> int:
    """Bytes of the files a checkpoint claims (those still present)."""
    return sum((root / p).stat().st_size for p in found.files if (root / p).exists())


def _mtime(root: Path, files: Iterable[PurePosixPath]) -> float | None:
    """The newest modification time among `files`: Lightning's last.ckpt is rewritten at the same size."""
    times = [(root / p).stat().st_mtime for p in files if (root / p).exists()]
    return max(times) if times else None


def ingest_checkpoints(
    db: Path,
    run_id: str,
    root: Path,
    found: list[FoundCheckpoint],
    trust_pickle: bool = False,
    on_read: Callable[[FoundCheckpoint, int], None] | None = None,
) -> list[dict[str, Any]]:
    """Read and store every new or changed checkpoint of a run, then the deltas between consecutive ones.

    Each checkpoint is read with no connection open and written in its own short write transaction
    (DECISIONS.md §5: a 10 GB checkpoint must not hold the database lock while it is read). A checkpoint
    already stored with the same size and mtime is not read again, unless it was refused for pickle and
    `trust_pickle` is now given. Deltas are computed for consecutive readable pairs (by step) that have none
    yet, with at most two checkpoints open at once, in the same pass as the statistics where the order is
    known from the names; deltas of pairs no longer consecutive are removed.
    `on_read(found, size_bytes)` is called after each checkpoint (read or skipped), for progress. Returns
    the `checkpoints` rows written, with their issues under "issues" as (path, Issue) pairs.
    """
    from ingest.store import connect

    with connect(db, write=True) as con:
        stored = {
            path: (ckpt_id, size, status, mtime)
            for path, ckpt_id, size, status, mtime in con.execute(
                "SELECT c.path, c.ckpt_id, c.size_bytes, c.status, s.mtime FROM checkpoints c LEFT JOIN sources s "
                "ON s.run_id = c.run_id AND s.path = c.path WHERE c.run_id = ?",
                [run_id],
            ).fetchall()
        }
    written = []
    # In name order (which is step order in every layout above), each checkpoint's deltas against the one
    # before are computed while its statistics are: its tensors are read once, the previous one's again.
    # Pairs this misses or gets wrong (contents steps out of name order) are settled by _store_deltas.
    prev: tuple[int, CheckpointRead] | None = None
    for f in sorted(found, key=lambda f: (f.name_step is None, f.name_step or 0, str(f.path))):
        size, mtime = checkpoint_size(root, f), _mtime(root, f.files)
        old = stored.get(str(f.path))
        if old and (old[1], old[3]) == (size, mtime) and not (trust_pickle and old[2] == "needs_pickle"):
            prev = None  # stored earlier, not open: _store_deltas pairs it
            if on_read:
                on_read(f, size)
            continue
        read = read_checkpoint(root, f, trust_pickle, prev=prev[1] if prev else None)
        with connect(db, write=True) as con:
            con.execute("BEGIN")
            if old:
                _delete_checkpoint(con, run_id, old[0])
            [(ckpt_id,)] = con.execute("SELECT nextval('ckpt_id_seq')").fetchall()
            ids = {"run_id": pl.lit(run_id), "ckpt_id": pl.lit(ckpt_id, dtype=pl.Int32)}
            _insert(con, "checkpoints", pl.DataFrame([{"ckpt_id": ckpt_id, "run_id": run_id, **read.row}]))
            _insert(con, "tensor_stats", read.stats.with_columns(**ids))
            _insert(con, "checkpoint_values", read.values.with_columns(**ids))
            register_source(con, run_id, str(f.path), "checkpoint", size, mtime, read.row["status"], read.row["detail"])
            insert_issues(con, run_id, read.issues)
            if prev is not None and read.deltas is not None:
                _insert(con, "tensor_deltas", read.deltas.with_columns(
                    **ids, prev_ckpt_id=pl.lit(prev[0], dtype=pl.Int32)))  # fmt: skip
            con.execute("COMMIT")
        written.append({"ckpt_id": ckpt_id, **read.row, "issues": read.issues})
        if read.row["status"] in ("ok", "partial") and read.row["step"] is not None and read.model:
            if prev is not None:
                prev[1].model.clear()  # at most the previous checkpoint stays open
            prev = (ckpt_id, read)
        else:
            read.model.clear()
        if on_read:
            on_read(f, size)
    _store_deltas(db, run_id, root, {str(f.path): f for f in found}, trust_pickle)
    return written


def _store_deltas(db: Path, run_id: str, root: Path, found: dict[str, FoundCheckpoint], trust_pickle: bool) -> None:
    """Deltas for each consecutive pair of readable checkpoints (by step) that has none stored yet."""
    from ingest.store import connect

    with connect(db, write=True) as con:
        ckpts = con.execute(
            "SELECT ckpt_id, path, step FROM checkpoints WHERE run_id = ? AND step IS NOT NULL "
            "AND status IN ('ok', 'partial') ORDER BY step, path",
            [run_id],
        ).fetchall()
        done = set(con.execute("SELECT DISTINCT ckpt_id, prev_ckpt_id FROM tensor_deltas WHERE run_id = ?",
                               [run_id]).fetchall())  # fmt: skip
    pairs = [(cur[0], prev[0], prev[1], cur[1]) for prev, cur in zip(ckpts, ckpts[1:], strict=False)]
    stale = done - {(cur, prev) for cur, prev, _, _ in pairs}  # no longer neighbours: one came between
    if stale:
        with connect(db, write=True) as con:
            for cur, prev in stale:
                con.execute("DELETE FROM tensor_deltas WHERE run_id = ? AND ckpt_id = ? AND prev_ckpt_id = ?",
                            [run_id, cur, prev])  # fmt: skip
    opened: dict[int, CheckpointRead] = {}
    for cur_id, prev_id, prev_path, cur_path in pairs:
        if (cur_id, prev_id) in done or prev_path not in found or cur_path not in found:
            continue  # stored already, or a file gone since: its stored rows stay as evidence
        for ckpt_id, path in ((prev_id, prev_path), (cur_id, cur_path)):
            if ckpt_id not in opened:
                opened[ckpt_id] = read_checkpoint(root, found[path], trust_pickle, stats=False)
        frame = tensor_deltas(opened[prev_id], opened[cur_id])
        for old in [i for i in opened if i != cur_id]:
            del opened[old]  # only the next pair's first checkpoint stays open
        ids = {"run_id": pl.lit(run_id), "ckpt_id": pl.lit(cur_id, dtype=pl.Int32),
               "prev_ckpt_id": pl.lit(prev_id, dtype=pl.Int32)}  # fmt: skip
        with connect(db, write=True) as con:
            con.execute("BEGIN")
            _insert(con, "tensor_deltas", frame.with_columns(**ids))
            con.execute("COMMIT")


def _delete_checkpoint(con: Any, run_id: str, ckpt_id: int) -> None:
    for table in ("tensor_stats", "checkpoint_values", "tensor_deltas"):
        con.execute(f"DELETE FROM {table} WHERE run_id = ? AND ckpt_id = ?", [run_id, ckpt_id])
    con.execute("DELETE FROM tensor_deltas WHERE run_id = ? AND prev_ckpt_id = ?", [run_id, ckpt_id])
    con.execute("DELETE FROM checkpoints WHERE run_id = ? AND ckpt_id = ?", [run_id, ckpt_id])


def _insert(con: Any, table: str, frame: pl.DataFrame) -> None:
    """Bulk insert through Arrow, by column name."""
    if frame.height == 0:
        return
    con.register("_frame", frame.to_arrow())
    try:
        cols = ", ".join(frame.columns)
        con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM _frame")
    finally:
        con.unregister("_frame")


def register_source(
    con: Any, run_id: str, path: str, fmt: str, size: int, mtime: float | None, status: str, detail: str | None
) -> None:
    """A `sources` row for a checkpoint (its folder, for the hf layout) or a saved batch, so that
    `forensics runs` lists it beside the logs, and a later ingest sees whether it changed (size, mtime).
    Its data lives in the checkpoint/batch tables."""
    con.execute(
        "INSERT INTO sources (source_id, run_id, path, format, grp, size_bytes, mtime, status, detail) "
        "VALUES (nextval('source_id_seq'), ?, ?, ?, '', ?, ?, ?, ?) ON CONFLICT (run_id, path) DO UPDATE SET "
        "size_bytes = excluded.size_bytes, mtime = excluded.mtime, status = excluded.status, "
        "detail = excluded.detail",
        [run_id, path, fmt, size, mtime, status, detail],
    )


def insert_issues(con: Any, run_id: str, issues: list[tuple[str, Issue]]) -> None:
    """Rows of `ingest_issues` for (relative path, Issue) pairs; one already recorded is not added again."""
    if not issues:
        return
    frame = pl.DataFrame(
        {
            "path": [p for p, _ in issues],
            "position": [i.position for _, i in issues],
            "kind": [i.kind for _, i in issues],
            "detail": [i.detail for _, i in issues],
        },
        schema={"path": pl.Utf8, "position": pl.Int64, "kind": pl.Utf8, "detail": pl.Utf8},
    ).unique(maintain_order=True)
    con.register("_issues", frame.to_arrow())
    try:
        con.execute(
            "INSERT INTO ingest_issues SELECT ?, now(), n.path, n.position, n.kind, n.detail FROM _issues n "
            "WHERE NOT EXISTS (SELECT 1 FROM ingest_issues i WHERE i.run_id = ? AND i.path = n.path "
            "AND i.position IS NOT DISTINCT FROM n.position AND i.kind = n.kind)",
            [run_id, run_id],
        )
    finally:
        con.unregister("_issues")


# ----------------------------------------------------------------------------------------------- reporting


def checkpoint_summary(con: Any, run_id: str, top: int = 5) -> dict[str, Any]:
    """What `forensics checkpoints` shows, from the store: every checkpoint (by step) with its non-finite
    tensors, for each consecutive pair the `top` parameters by ‖Δw‖/‖w‖ and the frozen ones (Δ = 0;
    buffers left out), and the saved batches with their NaN/Inf and outlier samples. Plain JSON values."""
    cols = ["ckpt_id", "path", "step", "step_from", "format", "size_bytes", "n_tensors", "n_nonfinite", "finite",
            "has_optimizer", "has_scaler", "has_rng", "status", "detail"]  # fmt: skip
    ckpts = [dict(zip(cols, r, strict=True)) for r in con.execute(
        f"SELECT {', '.join(cols)} FROM checkpoints WHERE run_id = ? ORDER BY step NULLS LAST, path", [run_id]
    ).fetchall()]  # fmt: skip
    bad = con.execute(
        "SELECT ckpt_id, tensor, kind, n_nan, n_inf FROM tensor_stats WHERE run_id = ? AND n_nan + n_inf > 0 "
        "ORDER BY ckpt_id, n_nan + n_inf DESC, tensor", [run_id]
    ).fetchall()  # fmt: skip
    for c in ckpts:
        # `kind` (param, buffer, optimizer, ...): n_nonfinite counts model tensors' values only.
        c["nonfinite_tensors"] = [{"tensor": t, "kind": kd, "n_nan": n, "n_inf": i}
                                  for k, t, kd, n, i in bad if k == c["ckpt_id"]]
    by_id = {c["ckpt_id"]: c for c in ckpts}
    # Parameters only: running statistics (buffers) move with the data, not with the optimizer.
    deltas = con.execute(
        "SELECT d.ckpt_id, d.prev_ckpt_id, d.tensor, d.delta_l2, d.ratio, d.step_distance FROM tensor_deltas d "
        "WHERE d.run_id = ? AND EXISTS (SELECT 1 FROM tensor_stats t WHERE t.run_id = d.run_id AND "
        "t.ckpt_id = d.ckpt_id AND t.tensor = d.tensor AND t.kind = 'param') "
        "ORDER BY d.step, isnan(d.ratio), d.ratio DESC, d.tensor", [run_id]
    ).fetchall()  # fmt: skip
    movers: dict[tuple[int, int], dict[str, Any]] = {}
    for cur, prev, tensor, delta, ratio, distance in deltas:
        pair = movers.get((prev, cur))
        if pair is None:
            pair = movers[(prev, cur)] = {
                "prev_step": by_id[prev]["step"], "step": by_id[cur]["step"], "step_distance": distance,
                "prev_path": by_id[prev]["path"], "path": by_id[cur]["path"], "top": [], "frozen": [],
            }  # fmt: skip
        if delta == 0:
            pair["frozen"].append(tensor)
        elif len(pair["top"]) < top:
            pair["top"].append({"tensor": tensor, "delta_l2": delta, "ratio": ratio})
    bcols = ["path", "step", "format", "n_samples", "n_nonfinite", "status", "detail"]
    batches = [dict(zip(bcols, r[1:], strict=True)) | {"batch_id": r[0]} for r in con.execute(
        f"SELECT batch_id, {', '.join(bcols)} FROM batches WHERE run_id = ? ORDER BY step NULLS LAST, path", [run_id]
    ).fetchall()]  # fmt: skip
    flagged = con.execute(
        "SELECT batch_id, tensor, nonfinite_samples, outlier_samples, outlier_z FROM batch_stats WHERE run_id = ? "
        "AND (len(nonfinite_samples) > 0 OR len(outlier_samples) > 0) ORDER BY batch_id, tensor", [run_id]
    ).fetchall()  # fmt: skip
    for b in batches:
        b["tensors"] = [{"tensor": t, "nonfinite_samples": nf, "outlier_samples": o, "outlier_z": z}
                        for i, t, nf, o, z in flagged if i == b["batch_id"]]  # fmt: skip
    for item in (*ckpts, *batches):
        item.pop("ckpt_id", None)
        item.pop("batch_id", None)
    return {"checkpoints": ckpts, "deltas": list(movers.values()), "batches": batches}
