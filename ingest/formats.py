"""The table of log formats: which files each one claims, which reader reads them, how their series group.

A reader is `read(path: Path, start: int) -> Iterator[Chunk]` (see `ingest.records`): pure, streaming,
resuming at `start` (a byte offset for append-only files, an entry index for files rewritten whole).
Readers are named as "module:function" strings so that a format's dependencies are imported only
when a file of that format is found (`import wandb`'s protobufs cost 0.38 s; DECISIONS.md §11).

Order matters: the first format whose `claims` accepts a file reads it.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ingest.decoding import SAMPLE_BYTES, sample  # noqa: F401 (re-exported: readers and discovery sample through here)
from ingest.records import Chunk

Reader = Callable[[Path, int], Iterator[Chunk]]


def parent_group(rel: PurePosixPath) -> str:
    """Series of files in one folder belong together (TensorBoard's run = the event file's folder)."""
    return "" if str(rel.parent) == "." else str(rel.parent)


def file_group(rel: PurePosixPath) -> str:
    """Each file's series stand alone (two CSV logs in one folder are two sources of different series)."""
    return str(rel)


@dataclass(frozen=True)
class Format:
    name: str  # stored in sources.format
    claims: Callable[[PurePosixPath], bool]  # by name and place only: cheap, no I/O
    reader: str  # "module:function"
    group: Callable[[PurePosixPath], str] = parent_group
    # Exact copies of one log (HF's checkpoint-*/trainer_state.json repeating the root log_history) are
    # stored once: points identical in (series, step, value) to ones already stored are dropped (§3).
    dedupe_across_sources: bool = False
    resumable: bool = True  # False: the file is rewritten whole, `start` counts entries, not bytes
    # True: its steps are the writer's own text (a console log's printed counters), not a structured log's
    # record; where a structured source holds the same series, the engine prefers it (DECISIONS §2, §16).
    text: bool = False
    # For files no format claims by name: a look at the file's bytes sampled from its head, middle and tail
    # (`sample`), and its name (e.g. an MLflow metric file named `loss`, a console log named `run1`, bare values in
    # `loss.txt`). Sniffing is tried in FORMATS order, after all name claims.
    sniff: Callable[[bytes, PurePosixPath], bool] | None = None
    # Bump when the reader would parse the same bytes differently (a fixed pattern, a new field): sources a
    # reader of another version parsed are forgotten and read again by the next ingest (`sources.reader_version`).
    version: int = 1

    def load_reader(self) -> Reader:
        module, _, function = self.reader.partition(":")
        return getattr(importlib.import_module(module), function)


# hyp/opt: YOLOv5's hyperparameters and options (train.py saves both); configuration: Unity ML-Agents' run config
CONFIG_NAMES = re.compile(r"^(config|hparams|params|args|training_args|run_config|hyp|opt|configuration"
                          r"|hyperparameters)\.(ya?ml|json)$", re.I)


def _is_config(rel: PurePosixPath) -> bool:
    return bool(CONFIG_NAMES.match(rel.name))


# Arrays and pickles named for what a history is (`history.pkl`, `trainHistoryDict.pickle`, `train_histories.npz`,
# `val_losses.npy`: a word of these, or a name with a metric's role); other arrays and pickles in a run (a dataset's
# samples, weights, a replay buffer, a tokenizer) are no log, and a folder of thousands of them is not read one by one.
HISTORY_WORDS = frozenset({"hist", "history", "histories", "loss", "losses", "metric", "metrics", "log", "logs",
                           "result", "results", "curve", "curves", "stats", "progress", "record", "records"})
SAVED_SUFFIXES = (".npy", ".npz", ".pkl", ".pickle", ".p")


def _is_saved_history(rel: PurePosixPath) -> bool:
    """NumPy's arrays (`.npy`, `.npz`) and pickles named for a history (`ingest.arrays`)."""
    if rel.suffix.lower() not in SAVED_SUFFIXES:
        return False
    from ingest.roles import role_of, words

    return bool(HISTORY_WORDS & set(words(rel.stem))) or role_of(rel.stem).role != "other"


def _is_trainer_state(rel: PurePosixPath) -> bool:
    return rel.name == "trainer_state.json"


def _trainer_state_group(rel: PurePosixPath) -> str:
    # The root copy and every checkpoint-*/ copy are one log (DECISIONS §3): one group, deduplicated.
    return "trainer_state"


def _is_training_args(rel: PurePosixPath) -> bool:
    return rel.name == "training_args.bin"


def _is_lightning_csv(rel: PurePosixPath) -> bool:
    return rel.name == "metrics.csv"


_VERSION_DIR = re.compile(r"^version_\d+$")


def _lightning_group(rel: PurePosixPath) -> str:
    # `<save_dir>/<name>/version_N/metrics.csv`: each relaunch or resume writes the next version, so the versions
    # side by side are one log of one run (DECISIONS §1): one group, a resume's re-logged steps kept beside the
    # first pass's (§3).
    if _VERSION_DIR.match(rel.parent.name):
        return parent_group(rel.parent)
    return parent_group(rel)


# Names the W&B reader owns (wandb_export_*.csv, wandb-history.jsonl): the generic tables leave them.
_WANDB_TABLES = re.compile(r"^(wandb_export_.*\.csv|wandb-history\.jsonl)$", re.I)


def _table_claim(*suffixes: str) -> Callable[[PurePosixPath], bool]:
    def claims(rel: PurePosixPath) -> bool:
        return rel.suffix.lower() in suffixes and not _WANDB_TABLES.match(rel.name)

    return claims


def _mlflow_group(rel: PurePosixPath) -> str:
    from ingest.mlflow import run_group  # cheap module; imported here to keep this table's imports minimal

    return run_group(rel)


def _claims_mlflow(rel: PurePosixPath) -> bool:
    from ingest.mlflow import claims_mlflow

    return claims_mlflow(rel)


def _claims_console(rel: PurePosixPath) -> bool:
    from ingest.console import claims_console

    return claims_console(rel)


def _sniff_mlflow(head: bytes, rel: PurePosixPath) -> bool:
    from ingest.mlflow import sniff_metric_file

    return sniff_metric_file(head)


def _sniff_json_document(sampled: bytes, rel: PurePosixPath) -> bool:
    from ingest.jsondocs import sniff_json_document

    return sniff_json_document(sampled[:SAMPLE_BYTES])  # a document is known by its head


def _sniff_table(sampled: bytes, rel: PurePosixPath) -> bool:
    from ingest.tabular import sniff_table

    return sniff_table(sampled[:SAMPLE_BYTES])  # a table by its header and first rows


def _sniff_console(head: bytes, rel: PurePosixPath) -> bool:
    from ingest.console import sniff_console

    return sniff_console(head, rel.name)


# W&B: the group helpers live beside the readers but import nothing heavy (wandb's protobufs load lazily).
from ingest.wandb import RUN_FILE, in_run_folder, wandb_group  # noqa: E402


def _is_wandb_log(rel: PurePosixPath) -> bool:
    return bool(RUN_FILE.match(rel.name))


def _is_wandb_config(rel: PurePosixPath) -> bool:
    return rel.name == "config.yaml" and in_run_folder(rel)


def _is_wandb_debug_log(rel: PurePosixPath) -> bool:
    return rel.name == "debug-internal.log" and in_run_folder(rel)


def _is_wandb_export(rel: PurePosixPath) -> bool:
    return rel.name.startswith("wandb_export_") and rel.suffix.lower() == ".csv"


def _sniff_wandb_log(head: bytes, rel: PurePosixPath) -> bool:
    return head[:4] == b":W&B" and head[4:6] == b"\xe1\xbe"


def _is_tensorboard(rel: PurePosixPath) -> bool:
    # TF, torch.utils.tensorboard and tensorboardX all name files events.out.tfevents.<time>.<host>[.<pid>.<n>][.v2]
    return rel.name.startswith("events.out.tfevents")


FORMATS: list[Format] = [
    # `start` is a byte offset: event files are append-only; train/ and val/ folders are separate series.
    Format("tensorboard", _is_tensorboard, "ingest.tensorboard:read_events", group=parent_group, resumable=True),
    # W&B before the generic config/CSV/JSONL formats: their files' names would match those too.
    Format("wandb", _is_wandb_log, "ingest.wandb:read_wandb", group=wandb_group, sniff=_sniff_wandb_log),
    Format("wandb_history", lambda rel: rel.name == "wandb-history.jsonl", "ingest.wandb_files:read_wandb_history",
           group=wandb_group, dedupe_across_sources=True),
    Format("wandb_summary", lambda rel: rel.name == "wandb-summary.json", "ingest.wandb_files:read_wandb_summary",
           group=wandb_group, resumable=False),
    Format("wandb_metadata", lambda rel: rel.name == "wandb-metadata.json", "ingest.wandb_files:read_wandb_metadata",
           group=wandb_group, resumable=False),
    Format("wandb_config", _is_wandb_config, "ingest.wandb_files:read_wandb_config", group=wandb_group,
           resumable=False),
    # The client's debug log: only the history records W&B refused (steps logged below its current step).
    Format("wandb_debug", _is_wandb_debug_log, "ingest.wandb_files:read_wandb_debug_log", group=wandb_group),
    # UI exports are down-sampled: the engine flags them `sampled_log` by this format's name.
    Format("wandb_export", _is_wandb_export, "ingest.wandb_files:read_wandb_export", group=file_group, resumable=False),
    Format("config", _is_config, "ingest.configs:read_config", group=file_group, resumable=False),
    # A launcher script (`run.sh`): the settings its trainer commands declare, as a config document.
    Format("launcher", lambda rel: rel.suffix.lower() in (".sh", ".bash", ".slurm", ".sbatch"),
           "ingest.launchers:read_launcher", group=file_group, resumable=False),
    Format("hf_trainer_state", _is_trainer_state, "ingest.hf_trainer:read_trainer_state",
           group=_trainer_state_group, dedupe_across_sources=True, resumable=False),
    Format("hf_training_args", _is_training_args, "ingest.hf_trainer:read_training_args", resumable=False),
    # version 2: a cell that is a scalar's repr (`tensor(0.41)`, `np.float32(0.41)`) is its number (`ingest.reprs`)
    # version 4: the metrics.csv of every version_N/ folder beside it are one group (one log, resumed)
    Format("lightning_csv", _is_lightning_csv, "ingest.lightning:read_metrics_csv", group=_lightning_group,
           resumable=False, version=4),
    # mlruns/<exp>/<run>/{metrics,params,tags}/..., meta.yaml; a bare metric file is recognised by sniffing.
    Format("mlflow", _claims_mlflow, "ingest.mlflow:read_mlflow", group=_mlflow_group, sniff=_sniff_mlflow),
    # version 2: a first line of numbers only is data, not a header (`column N`; the loss where another column is its exp)
    # version 3: a header parted by `|` and by none of `,`, tab, `;` parts its table by `|` (a table printed by hand)
    # version 4 (csv, and version 2 of jsonl, parquet): a cell that is a scalar's repr (`tensor(0.41, device=...)`,
    # `np.float32(0.41)`) is its number (`ingest.reprs`); a detector's loss terms per head (`train/box_om`,
    # `train/box_oo`) get their sum (`ingest.tabular.head_sums`)
    # version 5 (csv, 3 of jsonl, parquet, lightning_csv, json, 4 of table): a cell that is a value in literal braces
    # (`{0.41}`) or a one-element tuple (`(0.41,)`) is its number (`ingest.reprs`)
    # version 6 (csv, 4 of jsonl, parquet, json, 5 of table, 31 of console): a loss printed only as SSD's one-letter
    # terms (`L`, `C`) gets their sum (`ingest.tabular.letter_sums`)
    # version 7 (csv): a file of one row of values whose name says what they are (`losses.csv`) is a series along it
    Format("csv", _table_claim(".csv", ".tsv"), "ingest.tabular:read_csv", group=file_group, version=7),
    Format("jsonl", _table_claim(".jsonl", ".ndjson"), "ingest.tabular:read_jsonl", group=file_group, version=4),
    Format("parquet", _table_claim(".parquet"), "ingest.tabular:read_parquet", group=file_group,
           resumable=False, version=4),
    # NumPy's .npy / .npz arrays and pickles named for a history, read as a JSON document's lists (`ingest.arrays`).
    Format("arrays", _is_saved_history, "ingest.arrays:read_arrays", group=file_group,
           resumable=False),
    # A whole JSON document (not JSON lines) of metrics, under any name: recognised by its first bytes.
    # version 2: a list of scalars' reprs as text (`"tensor(0.41)"`) is a series of their numbers; lists named as a
    # loss or an accuracy beside numbers (a run's metadata dumped with its history) are a history
    Format("json", lambda rel: False, "ingest.jsondocs:read_json", group=file_group, resumable=False,
           sniff=_sniff_json_document, version=4),
    # A metric table under a name no format claims (`progress.txt`, a CSV with no extension, numpy.savetxt's
    # one number per line, YOLO's headerless results.txt): recognised by its first lines.
    # version 2: a headerless table in a file named for a quantity (`loss_log.txt`) names its first non-counter column
    # version 3: as csv's version 4
    Format("table", lambda rel: False, "ingest.tabular:read_table", group=file_group, sniff=_sniff_table, version=5),
    # version 2: counters inside metrics, bare rates, repeated record lines, header epochs
    # version 3: a step time printed in milliseconds keeps its unit in the tag (`time 1099.34ms` -> `time ms`)
    # version 4: a loss printed only in components gets their sum, as in tables (`ingest.tabular.loss_sums`)
    # version 5: lines that announce a non-finite loss or a resume in words go to `texts` (`ingest.announcements`)
    # version 6: a line read part by part (one unknown part costs that part), units other than s and % stay in the
    # tag (`mem 2100MB` -> `mem MB`), and the length the log declares (`Epoch 3/100`) kept as `console plan`
    # version 7: full-width punctuation read as ASCII, hasktorch's 0-d tensors, no epoch from `steps per epoch = 8`, no
    # clock from a duration (`Time: 00:01:02`), argparse help and HF's banner blanked; a `Training complete` line kept
    # version 8: `nan` / `inf` printed as a pair's value (`total_loss: nan obj_cls: 2.1`) stays that pair's value
    # version 9: a line whose message begins with a held-out split (`Valid | Epoch 1 | Loss 0.2`) gives it all its
    # values; an evaluation printed batch by batch (`Test: [100/196] ... Loss x (avg)`, then ` * Acc@1`) is one
    # version 10: the step is the counter a line prints (`Epoch: [e][i/N]` as e·N+i, `Global Batch N`, a dict's
    # `iteration`), a clock after an estimate's key no line time, a settings dump's `name=value,` lines no points
    # version 11: `N: value` lines and lone numbers under a counter line as the loss, a name padded before its colon,
    # typographic-quoted keys, several counted records on one line, a tab before a name ends a clause, `logprob`
    # version 12: a message glued to a value cut off (`loss: 1.39Batch 8: ...`), a tqdm description's `: ` before the bar,
    # `time.asctime()` stamps (`Tue Nov 14 17:22:06 2023`) as times, a table cell on a clock (`00:03`) holds no value
    # version 13: a printed dict of settings after a logger's prefix (fairseq's hydra config) gives no points
    # version 14: ... not after a record glued before it (a tqdm bar's postfix), whose values stay
    # version 15: a period abbreviating a word of a name (`val. loss`, `Test. Acc.`) ends no clause
    # version 16: rows of numbers beside a counter column and no header (`0, 44.74,50.90`) are records, the loss first
    # version 17: one axis per launch: a settings dump printed a `name: value` a line gives no points (its numbers are
    # settings, not records at the last step), a progress bar's closing line beside records that print a step is
    # their pass's summary, not a record, and a dict under a held-out split's name (`val_metrics={...}`) is that split's
    # version 18: a comma list of names inside a banner (`****loss,acc,val_loss****`) heads the rows of values below
    # version 19: a log in GBK read in its encoding, names in Chinese read by their words (`当前损失值`), logging's
    # `LEVEL:name:` prefix names no split, `epoch1<TAB>0.25` in a file named for its values; an LR by its optimizer's
    # index (`current_lr_0`) is read; a record of the training's shape under an evaluation's opener at the step just
    # trained is the evaluation's; a held-out split word at the head of a record's first name (`test accuracy: X,
    # loss: Y`) labels the record; rows of a counter and a value with no header are read in a file named for its
    # values (`losses.txt`: `0 233.26`); a best value that moved (`Model is improving acc: -inf --> 44.6.`) is no record
    # version 20: values nothing names, in a file whose name says nothing of them, are `<file>[<column>]`
    # (`ingest.console.unnamed_width`): one float per line, unnamed columns, printed tensors, a value before a bar; a
    # table cell holding a list (`[1.2e-02, 5.6e-01]` under `Train loss`) gives each element and, under a loss's
    # column, their sum; a bar's box characters shown through an OEM code page (`Ôöü`) read as a bar
    # `CV` is a held-out split; a bracketed pair its legend names (`Loss [1, 100](epoch, minibatch): X`) is the
    # record's epoch and batch
    # version 21: a record of the training's shape counted against another total under an evaluation's opener
    # (`step 1/9` after the training's `step 10/99`) is the evaluation's; lines that differ before their values in a
    # count against a total (`episode 50/100`, `episode 100/100`) are two records, not one printed by two ranks; a
    # bar whose glyphs a notebook dropped (`100% 63/63 [00:18<00:00, 3.35it/s]`) is a bar; a value glued to a name
    # (`mAP50`, `mAP50-95` in a header) is part of the name, and a value word a whole word (`Inference` is no `inf`);
    # two lines apart only in the time of day of their stamp are two records of one logger, not a rank's copy
    # version 22: lines that differ before their values in a number a word names (`epoch 1[5000]`, `Sample: 4`) are two
    # records, not one printed by two ranks; a record line whose values turned nan keeps the shape of its finite ones
    # version 23: a print after a bar's cursor-up escape is its own record; `v_X` beside `X` (twice or more) is the
    # validation's `X`; a bar's redraws pasted without their `\r` are one record each; a table cell's tensor repr;
    # a description's value before a bar of no known total (`Loss: 0.52: : 11it [...]`)
    # version 24: ` : ` before the next `Name value` pair parts fields (Marian), `Ep. N : Up. M` its epoch and step
    # version 25: NumPy 2's and TF's scalar reprs (`np.float32(0.41)`, `tf.Tensor(0.41, shape=(), ...)`) and a
    # one-element `tensor([0.41])` are their numbers (`ingest.reprs`); a detector's loss terms per head get their sum;
    # a header's name may begin with a count (`2d_loss  3d_loss`), and a header line is no unmatched line
    # version 27: a record at the file's first epoch right after another at it begins a launch where the counter ran
    # past it before and the clock moved on far beyond the log's own intervals (`console.RELAUNCH_GAP`);
    # version 28: an epoch printed before an ellipsis (`Meta epoch 0...`) is that epoch (a fraction's point is none)
    # version 29: a value or a count printed inside literal braces (`loss : {1.90}`, `epoch: {1/300}`) or a one-element
    # tuple (`(0.51,)`) is the number inside (`ingest.reprs`)
    # version 30: a dict of lists printed on one line (`print(history.history)`) is a history, as in a JSON document
    # (`ingest.jsondocs.printed_history`), less the series the log's own lines print
    # version 31: as csv's version 6; a table header's ratio column spaced around its slash (`Train / Val`) is a name;
    # `Err_G` / `Err_D` (Torch7 DCGAN) are a GAN's two losses, as `errG` / `errD` are; a box table's row is read
    # whatever its key (`| EpRewMean | -8.5 |`); rows in a file named for an agent's reward (`reward_log.txt`) are that;
    # headerless rows of an epoch and a batch column before their values (`0, 4, 16.56, ...`) are records
    # version 32: a decimal that ends its line with a colon (`chamfer_dist 1.6065:`) is a value; `name[v]` glued keeps
    # its name whole; `nan` is never a word of a name (`loss\tnan`, `loss: nan lr=1e-4`); `| name | v |` cells after a
    # prefix, and rows of name and value cells alternating (`| step | 20 | loss | 0.52 |`), are pairs
    # version 33: the path a save message names (`saving model to ckpt/run/01-58.0256`) holds no value
    # version 34: a record that logs its own epoch (HF's `'epoch': 0.27`) takes no step from another printer's line
    # (DeepSpeed's one `step=0, skipped=0` at set-up); a name qualified in parentheses (`Loss(train): 6.55`) is a key
    # version 35: the PyTorch tutorials' unnamed average loss after a clock and `(iteration percent%)`
    # (`0m 24s (5000 6%) 3.5270`) is an unnamed value on that iteration
    Format("console", _claims_console, "ingest.console:read_console", group=file_group, sniff=_sniff_console,
           text=True, version=35),
]


# A file Git LFS keeps on its server is checked out as a pointer when LFS is not installed or the clone skipped it:
# three text lines (`version https://git-lfs.github.com/spec/v1`, `oid sha256:<hash>`, `size <bytes>`), whatever
# the file's name (an event file, a metrics.jsonl, a checkpoint). The spec allows only these keys, sorted.
_LFS_POINTER = re.compile(rb"\Aversion https://git-lfs\.github\.com/spec/v\d+\r?\n(?:[a-z0-9.\-]+ [^\r\n]*\r?\n)*?"
                          rb"size (\d+)\r?\n")
LFS_POINTER_MAX = 1024  # pointers are ~130 bytes; the spec caps them below 1024


def lfs_pointer(head: bytes) -> int | None:
    """The size of the file a Git LFS pointer stands for, when `head` (a file's first bytes) is one; else None."""
    if len(head) >= LFS_POINTER_MAX or not head.startswith(b"version https://git-lfs"):
        return None
    found = _LFS_POINTER.match(head)
    return int(found.group(1)) if found else None


def format_for(rel: PurePosixPath, head: Callable[[], bytes] | None = None) -> Format | None:
    """The format that reads this file, or None for a file no reader knows.

    `head` returns the file's bytes as `sample` takes them; it is called only when no format claims the file by
    name.
    """
    claimed = next((f for f in FORMATS if f.claims(rel)), None)
    if claimed is not None or head is None:
        return claimed
    sniffers = [f for f in FORMATS if f.sniff is not None]
    if not sniffers:
        return None
    first = head()
    return next((f for f in sniffers if f.sniff(first, rel)), None)


# Names a run's printed output is saved under (`train.log`, `nohup.out`, `log_train.txt`, `stdout`, a log pasted in
# `issue.md`): a text file of these that no reader takes is a read problem, with the reason.
TEXT_LOG_SUFFIXES = ("", ".md", ".txt", ".text", ".log", ".out", ".err")


# Text files a tool writes about itself beside a run, never the run's printed output: W&B's own debug logs and its
# copy of the environment's packages, pip's requirements lists.
TOOL_TEXT = re.compile(r"(?:^|/)(?:wandb/(?:.*/)?debug(?:-internal|-core)?\.log|(?:.*/)?requirements[\w.-]*\.txt)$", re.I)


def may_be_text_log(rel: PurePosixPath) -> bool:
    suffix = rel.suffix.lower()
    return (not rel.name.startswith(".") and (suffix in TEXT_LOG_SUFFIXES or not suffix[1:].isalpha())
            and not TOOL_TEXT.search(rel.as_posix()))


def why_unread(rel: PurePosixPath, data: bytes) -> str:
    """Why no format took a file: for a text file, what its sampled lines hold (`ingest.console.why_not_console`)."""
    from ingest.console import why_not_console

    return why_not_console(data, rel.name)
