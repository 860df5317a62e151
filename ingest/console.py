"""Console logs (`train.log`, `output.log`, `slurm-*.out`, `nohup.out`, ...): steps and metrics from text lines.

Often all a crashed run leaves. A line is read in four passes, each a group of the named patterns in
`PATTERNS` (the one table to extend; each entry carries an example line that tests parse):

1. time     a timestamp becomes the line's wall_time (and is blanked so its digits are not metrics);
2. counter  the global step (`iter N`, `step N/M`, `Iteration N`, `Global Step: N`, `[Iteration N]`,
            `global_step=N`, fairseq's `num_updates=N`), the epoch (`Epoch[e]`, `Epoch e/E`, `Epoch: e`, `epoch=e`) and the batch
            (`Batch[b]`, a tqdm bar's `n/total`);
3. assign   explicit pairs anywhere on the line: `key=value`, `key = value`, `'key': value` and `'key': '1.1'` (a
            printed dict, as HF's Trainer and fairseq's json format print their logs), `name:value` with no
            space (`train loss:1.234`), a box table's row (`|  loss  | -0.016 |`), a sentence with its counters
            inside (`Loss at epoch 0 and iteration 500 is 0.22`), DL4J's `Score at iteration N is X` (its loss),
            and messages whose values have fixed names (loss-scale changes, gradient clipping: `grad_norm`,
            `grad_clip`, `clip_scale`);
4. phrase   what is left is cut into clauses (at `,` `;` `|` brackets, `. `, runs of 2+ spaces, arrows `->` and
            `---` rules) and a clause that reads `Some Words[:| is| was| of] value [unit]` is a metric
            (`Train loss 1.593`, `Loss is Infinity`, `Speed: 2.38 samples/sec`; after prose only where the
            name names a metric: `INFO the training loss is 0.52 at step 40`); any other clause is read part by
            part (`_pairs`: `loss 1.95 mem 2100MB ETA 0:01:02`), a part that fits no pair (a clock, `50/391`, a
            value without a name) costing that part alone, never the line. Such loose pairs count only on
            lines that carry a counter, or when the key names a metric (loss, acc, lr, grad, norm, ppl, ...),
            so a traceback's `line 71` is not a metric.

Units (`_unit_tag`): nothing is converted. A value is stored as printed; a unit other than seconds or a percentage is
kept in its tag (`mem 2100MB` is `mem MB` 2100, `time 52ms` is `time ms` 52, in every pass and in tables), so a
printer that switches units starts another series rather than one series in two scales.

A line of alternating `name<sep>value` (`iteration,1,train_loss,2.31`, any one of `,;|` or tab) reads as `name=value`
pairs; a bare integer opening a line of pairs is its step (`0 train 10.95`); a held-out split's word before a counter
names the line's values (`val step:0  loss: 3.27`: `val loss`).

Evaluation records printed with the training's names (`_State.eval_blocks`): under a line that says an evaluation
begins (Paddle's `Eval begin...`, `Validation:`, `==> Evaluating`, `Test on Epoch 3`) they take the split's name
(`val loss`) until the block ends (a training record's shape, a line that says train, an `Epoch N` line, its end
marker `Eval samples: N`); a record whose own label starts with a split (`Epoch(val) [1][10/50]  loss: X`,
`Test set: Average loss: X`) takes it too.

Before the passes, a progress bar's box characters shown through a Windows console's OEM code page (`━` as `Ôöü`)
read as those characters again (`_oem_bars`, same byte length), and values printed as reprs read as the value (`tensor(0.41, device='cuda:0')`, `loss:[ 0.41]`,
`0.41±0.02`, `9m 2s` as seconds), a name before a list names each element (`TD Error [1.2, 3.4]`: `TD Error_0`,
`TD Error_1`), and a counter glued to the next name is cut from it (`idx: 0loss:`), and a message glued to a value is
cut off (`loss: 1.3988Batch 8: Invalid loss` reads `loss: 1.3988`). After them, values inside a
group labelled as losses are its parts (`[Losses: x 0.27, total 15.1]`: `Losses x`, `Losses total`), and values
listed after a label that names memory and ends in a colon are that memory's (`Memory info of GPU /physical_device:GPU:0:
current: 0.18, peak: 2.55`: `Memory info of GPU current`, `... peak`), counter or not.

Beside the line passes (`_State.tabled`): a row of values under a header row printed earlier with as many fields
(apart by tabs, runs of spaces or `|`) takes its names from the header (`Epoch  gpu_mem  box  obj`, a TSV with
a trailing tab, AllenNLP's `Training | Validation`); a counter's column (`Epoch`, `Batch`, `Iter`) is the row's
counter; a cell holding a list (DeepXDE's `[1.2e-02, 5.6e-01]` under `Train loss`) gives each element
(`Train loss_0`, ...) and, under a loss's column, their sum as the column's value. In a file whose name names a
quantity (`loss.txt`), bare values (`0.693`, `12: 0.693`, one list
`[0.33, 0.13]`) take that name.

Tags keep the writer's spelling (`Train loss`, `IDLoss`, `loss`). Values `nan`, `inf`, `-inf`,
`Infinity`, `NaN` are read as such.

Steps (DECISIONS §2): the line's own global counter when it prints one. A line with no counter at all
(Caffe's `Train net output #0: mbox_loss = inf` under its `Iteration N` line) takes the last global
counter seen earlier in the file, as Caffe's own parse_log.py does, unless it prints the very tags of the
line that printed that counter: then it is a record of its own, not that line's detail (an ordinal log of
`{'loss': ..., 'grad_norm': ...}` lines, one of them annotated `(step 4)` by hand). Otherwise (epoch/batch only, or
nothing) step = the line's ordinal: its 0-based index among the file's line segments, counting `\\r`
(tqdm's in-place updates) as a line break, so it stays stable when a later ingest resumes; `ordinal=True`.
Records that print no counter under an `epoch N` line of its own also keep that epoch as a series `epoch` (one point,
with the first record under the line), so an epoch that falls back in write order (a resume) is seen.
A step printed beside an epoch that starts again as the epoch moves on is the batch within the epoch (the records are
ordinal, with epoch and batch). Where the log's counter (its step, else its epoch) starts again from its first value,
a launch appended to the file begins: a series `launch` marks it (its number, 2, 3, ...), for the judge to tell
launches from a resume. A progress bar redrawn after `\\r` with the values of the record before it counts once.
One launch, one axis: a bar's closing line (`100%|...| 120/120 [..., loss=inf]`) beside records that print a step is
their pass's summary, not a record on line numbers among them; a settings dump printed a `name: value` a line
(`arch: vit_small` over `lr: 0.0005`) gives no points, so a second program's settings are no values at the first one's
last step; a dict under a held-out split's name (`val_metrics={"loss": ...}`) holds that split's values.

Times: ISO `2024-03-26 10:00:00[,.]fff[+zz:zz]` is UTC unless it carries an offset (the writer's zone
is unknown). Stamps without a year or date (glog `I0822 20:54:57.256644`, `[10:00:00]`) take the date
of the last full date seen earlier in the file; before any, they are placed on 1970-01-01 UTC (glog:
1970 with its month and day), so durations between lines are right but the date is not, and one
Issue(kind="assumed_date") says so. A time-of-day going backwards moves the assumed date on one day.

Lines that look like metrics (a number next to a metric-like word) but gave none are counted: one
Issue(kind="unmatched_lines") per read with the count, the first line numbers and the first such line. Binary
junk (control bytes in bulk, NULs aside: `binary_reason`) gives one Issue(kind="not_this_format") with the reason,
unless lines sampled across the file carry metrics; text in GBK (GB18030) or Latin-1 is not junk, nor are NULs (a log
truncated while its writer kept its offset, a crash's block of zeros), escape codes or a few odd bytes. UTF-16 logs
(PowerShell's `>`) are decoded (`utf16_order`). The file is append-only: `start` is a byte offset, and only
complete lines (ending in `\\n` or `\\r`) are read; a partial last line waits for the next ingest, unless the
file has not changed for `IDLE_SECONDS` (a finished run's last print, never ended). A CSV under a log's name
(Keras's `CSVLogger('training.log')`) is read by the CSV reader.

Recognition (`sniff_console`, for files no name claims): lines sampled from a file's head, middle and tail
(`ingest.formats.sample`), not its first kilobytes; a text file not taken is told why (`why_not_console`).
"""

from __future__ import annotations

import math
import re
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from datetime import datetime, timedelta, timezone
from os.path import commonprefix
from pathlib import Path

import numpy as np
import polars as pl

from ingest import announcements, languages
from ingest.plan import CONFIG_NAME as PLAN_CONFIG
from ingest.plan import planned
from ingest.decoding import (LEGACY_ENCODINGS, as_utf8, binary_reason, legacy_encoding, sample,  # noqa: F401 (re-exported)
                             utf16_order)
from ingest.jsonvalues import INT64_MAX
from ingest.records import Chunk, Issue, scalars_frame, texts_frame
from ingest.reprs import NUM, REPR_HINT, SCALAR_REPR, cell_number, repr_number
from ingest.roles import SPLIT_WORDS, role_of, stem_tag, words
from ingest.tabular import with_loss_sums

PAST_64_BITS = INT64_MAX + 1  # a counter printed past what the store holds (its line is skipped, and said)

_NUM_END = r"(?![\w.])"  # a value ends at a non-word character (so `100_adapters` is no value)
# `lr_0`, `current_lr_1`: the LR of one optimizer or parameter group, by its index (Coqui's trainer prints one per
# optimizer, a GAN's generator and discriminator).
METRIC_WORDS = re.compile(
    r"loss|acc|lr(?:_\d+)?\b|learning.?rate|grad|norm|ppl|perplexity|wer|bleu|f1|auc|mse|mae|psnr|reward|entropy|kl\b"
    r"|cost|objective|nll|xent|energy|logprob"
    rf"|{languages.METRIC_WORDS}",  # other languages' words for loss, accuracy, lr (`ingest.languages`)
    re.I)
MEMORY_UNIT = r"[KMGTP]i?B|[kmg]i?b"  # `2100MB`, `12.3GiB`, `812mb` (`_unit_tag`)
_UNIT_BEFORE_KEY = rf"(?:{MEMORY_UNIT}|ms|s|sec)\s"  # the last value's unit (`mem=2100 MB lr=0.1`), not a key's word
RATE_UNITS = (r"(?:ms|s|sec)/(?:it|iter|step|batch)"
              r"|(?:it|iter|iters|samples|tokens|img|imgs|images|ex|examples)/s(?:ec)?")
CHUNK_BYTES = 8 << 20
EPOCH_TAG = "epoch"  # the series an ordinal record's epoch counter is kept as
LAUNCH_TAG = "launch"  # the series that marks where a launch appended to the log begins (`_State.relaunched`)
MAX_LINES_LISTED = 10
MAX_SAMPLE_CHARS = 160


@dataclass(frozen=True)
class LinePattern:
    """One named line shape. `kind` says what its groups mean:

    time:    groups y, mo, d, h, mi, s, frac, tz (year/date groups may be absent);
    ignore:  text blanked before the counters (no groups): it looks like pairs but logs nothing;
    counter: groups step, epoch, batch (any of them);
    assign:  groups key, value, matched anywhere, as many times as they occur; or, for a line whose value
             has no key of its own (`OVERFLOW! ... reducing to 32`), group value alone and the fixed `tag`.
    `expect` is what the parsed `example` must contain (tested): metrics by tag, plus step/epoch/batch.
    """

    name: str
    kind: str
    regex: re.Pattern[str]
    example: str
    expect: dict[str, float] = field(default_factory=dict)
    tag: str | None = None  # the metric's name when the regex has no `key` group
    tags: tuple[tuple[str, str], ...] = ()  # (group, metric's name) for a message that holds several values


# The words of an epoch and of a record's first step in other languages (`Época 3/10`, `Эпоха 2`, `pas 20 | ...`).
_EPOCH_WORDS = rf"(?i:{languages.alternatives(languages.EPOCH_WORDS)})"
_STEP_WORDS = rf"(?i:{languages.alternatives(languages.STEP_WORDS)})"

_COUNTED = r"(?:\x00[\x00\s]*|(?:epoch|iteration|iter|step|batch)\s*\d+\s*)"  # a counter, blanked or not


# Text before which the line holds no number (digits inside a name, `resnet50 INFO:`, are a name's).
_NO_NUMBER_BEFORE = r"^(?:[^\d]|(?<=[A-Za-z_])\d+)*?"

# A held-out split's word just before a counter (`val step:0  loss: 3.27`): the line's tags take it (`val loss`).
_SPLIT_BEFORE = r"(?:\b(?P<split>(?i:val|valid|validation|eval|evaluation|test|dev))\s+)?"


def _p(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, flags)


# A progress bar's body after its percentage: tqdm's pipes (`45%|████▌     | 45/100`), box characters without pipes
# (Ultralytics 8.3+, rich: `20% ━━╸───────── 1/5`), or nothing where a notebook's text output dropped the glyphs
# (`100% 22/22 [00:10<00:00,  2.12it/s]`: the count, then its timing in brackets). The `tqdm_bar` pattern and the
# table reader's bar tail read bars by this.
BAR_GLYPHS = r"\|[^|\n]*\||\s*[\u2500-\u259f]+|\s+(?=\d+/(?:\d+|\?)\s*\[\d)"
# Where such a bar begins, in syntax both `re` and polars' regex read (no look-ahead): the line pre-filters use it.
BAR_OPENS = r"\d%(?:\||\s*[\u2500-\u259f]|\s+\d+/(?:\d+|\?)\s*\[\d)"

PATTERNS: list[LinePattern] = [
    # --- time ---------------------------------------------------------------------------------------
    LinePattern("iso_time", "time", _p(
        r"(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})[ T](?P<h>\d{2}):(?P<mi>\d{2}):(?P<s>\d{2})"
        r"(?:[.,](?P<frac>\d{1,9}))?(?P<tz>Z|[+-]\d{2}:?\d{2}(?!\d))?"),
        "2023-03-22 09:30:39 iter 2920: loss 3.9883, time 1099.34ms, mfu 15.34%",
        {"step": 2920, "loss": 3.9883, "time ms": 1099.34, "mfu": 15.34}),
    LinePattern("glog_time", "time", _p(
        r"^[IWEF](?P<mo>\d{2})(?P<d>\d{2}) (?P<h>\d{2}):(?P<mi>\d{2}):(?P<s>\d{2})\.(?P<frac>\d+)"
        r"\s+\d+\s+[\w.-]+:\d+\]"),
        "I0822 20:54:57.256644 14071 solver.cpp:341]     [0.0] Iteration 2 (20.2241 s), loss = nan",
        {"step": 2, "loss": float("nan")}),
    LinePattern("bracket_time", "time", _p(r"\[(?P<h>\d{2}):(?P<mi>\d{2}):(?P<s>\d{2})(?:[.,](?P<frac>\d+))?\]"),
                "[10:00:00] step 5 loss: 0.25", {"step": 5, "loss": 0.25}),
    # C's ctime / Python's `time.asctime()` (`[ Wed Jun  6 16:01:01 2018 ]`, as st-gcn's print_log stamps its lines):
    # a date in words, so its weekday and month are no metric's name.
    LinePattern("asctime", "time", _p(
        r"\b(?:(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)\s+)?(?P<mo>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\s+"
        r"(?P<d>\d{1,2})\s+(?P<h>\d{2}):(?P<mi>\d{2}):(?P<s>\d{2})(?:[.,](?P<frac>\d{1,9}))?\s+(?P<y>\d{4})\b"),
        "[ Tue Nov 14 17:22:06 2023 ] Eval epoch: 1", {"epoch": 1}),
    # A date and time without separators in the date (`20191107-14:02:11`, `20191107_140211`).
    LinePattern("compact_time", "time", _p(
        r"(?<!\d)(?P<y>\d{4})(?P<mo>\d{2})(?P<d>\d{2})[-_ T](?P<h>\d{2}):?(?P<mi>\d{2}):?(?P<s>\d{2})(?!\d)"),
        "20191107-14:02:11  total_loss: 3.81", {"total_loss": 3.81}),
    # A time of day in a stamp of another form (`[03.24.23|09:56:11]`, `INFO - 09/02/20 14:18:08 - ...`,
    # `06:38:14.898 [main] INFO ...`), not a tqdm bar's elapsed or remaining time (`<`) nor an `eta: 12:34:56`.
    # A duration after its label (`Time: 00:01:02`, `time=0:01:02`, `took 00:00:12`) is no time of day either.
    LinePattern("time_of_day", "time", _p(
        r"(?<![\d:.<])(?<![Ee][Tt][Aa]: )(?<![Ee][Tt][Aa] )(?<![Ee][Tt][Aa][:=])(?<!elapsed: )(?<!left: )"
        r"(?<![Tt]ime: )(?<![Tt]ime:)(?<![Tt]ime=)(?<![Tt]ime )(?<!TIME: )(?<!took )(?<!uration: )"
        r"(?P<h>\d{2}):(?P<mi>\d{2}):(?P<s>\d{2})(?:[.,](?P<frac>\d{1,9}))?(?![\d:<])"),
        "06:38:16.402 [main] INFO LoggingListener - Accuracy at iteration 0 is 0.61",
        {"step": 0, "Accuracy": 0.61}),
    # --- ignored: text that looks like pairs but holds no logged values (blanked before the counters) -----
    # argparse's `Namespace(batch_size=10, lr=0.0005, ...)`, printed at start: the run's arguments, not metrics.
    LinePattern("argparse_namespace", "ignore", _p(r"\bNamespace\([^()]*\)"),
                "Namespace(batch_size=10, cuda=True, gamma=0.1, lr=0.0005, momentum=0.9, resume=None)"),
    # The HF Trainer's banner under `***** Running training *****` (`  Num examples = 64`, `  Num update steps per epoch
    # = 8`, `  Total optimization steps = 24`): the run's sizes, not logged values.
    LinePattern("settings_hf_banner", "ignore", _p(
        r"^\s*(?:Num examples|Num Epochs|Instantaneous batch size per device|Total train batch size\b[^=]*"
        r"|Gradient Accumulation steps|Total optimization steps|Number of trainable parameters|Num update steps per epoch"
        r"|Batch size)\s*=\s*[\d,]+\s*$"),
        "  Num update steps per epoch = 8"),
    # A command-line option's help (`  --stop-on-nan  stop training if the loss is nan`, `  -b N, --batch-size N  ...`):
    # an indented option, its metavar, then its text after a gap. Its words say what the option does, not what happened.
    LinePattern("argparse_help", "ignore", _p(
        r"^\s+--?[A-Za-z][\w-]*(?:[ =][A-Z][A-Z0-9_]*)?(?:,\s*--?[A-Za-z][\w-]*(?:[ =][A-Z][A-Z0-9_]*)?)*"
        r"(?:\s{2,}\S.*)?$"),
        "  --stop-on-nan  stop training if the loss is nan"),
    # A settings object's repr (a dataclass or attrs config printed at start: `TrainConfig(run_name='x', seed=6, ...,
    # model=ModelConfig(d_model=2048, ...))`): a capitalised name called with 4+ `key=value` pairs, one of them text,
    # None, a boolean or a nested object. A logged record is not printed as a constructor call of settings.
    LinePattern("settings_repr", "ignore", _p(
        r"\b[A-Z][A-Za-z0-9_]*\((?=(?:[^=\n]*\w=){4})(?=[^\n]*=(?:'|\"|None\b|True\b|False\b|[A-Z]\w*\())"
        r"\s*[a-z_]\w*=.*$"),
        "INFO TrainConfig(run_name='base-1000', seed=6198, model=ModelConfig(d_model=2048, n_heads=16, clip_qkv=8.0), "
        "max_grad_norm=1.0, output_proj_clip_scale_factor=0.1)"),
    # A dump of settings under their label (YOLOv5's `hyperparameters: lr0=0.01, box=0.05, ...`, `args: {'lr': ...}`,
    # `config: {...}`): the run's settings, not logged values, though their names are those of metrics.
    LinePattern("settings_dump", "ignore", _p(
        r"\b(?i:hyper-?parameters|hyps?|hparams|args|arguments|config|configuration|options|opts?|params|parameters"
        r"|settings|kwargs|cfg)\s*[:=]\s*[{(\[]?\s*['\"]?[A-Za-z_][\w.]*['\"]?\s*[:=].*$"),
        "hyperparameters: lr0=0.01, lrf=0.1, momentum=0.937, box=0.05, cls=0.5, obj=1.0"),
    # A line of settings as `key=value` pairs (Ultralytics' `engine/trainer: agnostic_nms=False, amp=True, ...,
    # batch=8, box=7.5`): four pairs or more, two of them a boolean or None. A logged record holds no such values.
    LinePattern("settings_pairs", "ignore", _p(
        r"^(?=(?:[^=\n]*\w=){4})(?=(?:[^\n]*?\w=(?:True|False|None)\b){2}).*$"),
        "engine/trainer: agnostic_nms=False, amp=True, angle=1.0, batch=8, box=7.5, cache=False, cls=0.5"),
    # A printed dict of settings (`{'config_name': '...', 'epochs': 5, 'group_by_length': False, 'learning_rate': 3e-4,
    # 'save_total_limit': None}`), alone or after a logger's prefix (fairseq's hydra config, `[...][INFO] - {'_name':
    # None, 'common': {...}}`; not after a record, `| 2/10 [..., loss=0.08]{...}`, whose values the whole line would
    # take with it): four items or more, two of them a boolean or None. A logged record holds no such values.
    LinePattern("settings_dict", "ignore", _p(
        r"^[^{'\"|%=\n]*\{(?=(?:[^\n]*?['\"]\s*:\s*(?:True|False|None|true|false|null)\b){2})(?=(?:[^\n]*?['\"]\s*:){4})"
        r".*$"),
        "{'config_name': 'a.yaml', 'epochs': 5, 'group_by_length': False, 'learning_rate': 0.0003, "
        "'save_epoch_adapters': True, 'save_total_limit': None}"),
    # One argument of a settings object printed one per line (HF's `TrainingArguments(` ... `learning_rate=0.0003,` ...
    # `)`, a dataclass's pretty repr): the line is a lone `name=value,`. A logged record is never one such pair.
    LinePattern("settings_line", "ignore", _p(r"^\s*[A-Za-z_]\w*=[^=,\s]*,\s*$"),
                "learning_rate=0.0003,"),
    # Keras' callbacks speak of an epoch by its zero-padded number (`Epoch 00001: val_acc improved from -inf to 0.69,
    # saving model to weights.best.hdf5`, `Epoch 00005: ReduceLROnPlateau reducing learning rate to 0.0001.`): a message
    # about an epoch, 0-based before Keras 2.1, not the `Epoch e/E` counter above the epoch's records.
    LinePattern("keras_callback_epoch", "ignore", _p(r"^\s*Epoch \d{5}:"),
                "Epoch 00000: val_acc improved from -inf to 0.69706, saving model to weights.best.hdf5"),
    # A best value that moved (`Model is improving ppl: 2.44446 --> 1.22345.`, `val_acc improved from -inf to 0.69`):
    # a checkpointer's or early stopper's running best, its old value first (`-inf` before any evaluation), not a
    # record: the evaluation's own lines print the values.
    LinePattern("best_moved", "ignore", _p(
        rf"\b(?i:is improving|improved|improving)\b[^\n]*?{NUM}\s*(?:-{{1,2}}>|→|\bto\b)\s*{NUM}\.?"),
        "[2024-05-08 04:06:55,503 INFO] Model is improving ppl: 2.44446 --> 1.22345."),
    # A file's name (`checkpoints/checkpoint-epoch1-batch200.pth`, `weights.best.hdf5`): its digits are a name's, not
    # a counter or a value.
    LinePattern("file_name", "ignore", _p(
        r"(?<![\w./-])[\w./-]*[\w-]\.(?i:pth|pt|ckpt|bin|safetensors|h\d|hdf\d|pkl|pickle|npz|npy|tar|zip|gz|onnx|pb|mp\d"
        r"|json|yaml|yml|csv|jpg|jpeg|png|wav|model|weights)(?![\w.])"),
        "Checkpoint saved to checkpoints/checkpoint-epoch1-batch200.pth"),
    # The path a save message names with no extension (Keras' ModelCheckpoint to a SavedModel folder, `Epoch 1:
    # val_loss improved from inf to 58.02555, saving model to ckpt/run_mb/01-58.0256`; `Saved checkpoint to
    # out/step_1000`): a path after the message's `to`, its digits a name's. A record's values are never a path.
    LinePattern("saved_to_path", "ignore", _p(
        r"\b(?i:sav(?:e|ed|ing))\b[^\n]{0,40}?\bto\s+['\"]?[\w.~-]*/[^\s,;'\"]*"),
        "Epoch 1: val_loss improved from inf to 58.02555, saving model to ckpt/run_mb/01-58.0256"),
    # A source location in a logger's prefix (`train.py[line:123]`, `train.py:123`, `File "x.py", line 71`): no value.
    # loguru's `module:function:line - ` too (`__main__:train:41 - `).
    LinePattern("source_line", "ignore", _p(
        r"\b[\w.-]+\.py(?:\[line:\d+\]|:\d+\b|\"?, line \d+)|\[line:\s*\d+\]|\b[\w.]+:[\w<>]+:\d+(?=\s+-\s)"),
                "2022-10-16 00:13:52,753 - train.py[line:123] - INFO: start"),
    # torchrun's prefix of each rank's lines (`[rank0]:`, `[default0]:` before torch 2.2): no value.
    LinePattern("rank_prefix", "ignore", _p(r"\[(?:rank|default)\d+\]:?"),
                "[rank0]: step=50, loss=1.95", {"step": 50, "loss": 1.95}),
    # A logging level (`root INFO Loss at step 50: 0.1`): never part of a metric's name.
    LinePattern("log_level", "ignore", _p(r"\b(?:INFO|WARNING|WARN|DEBUG|ERROR|CRITICAL)\b"),
                "2024-11-29 03:20:00,123 root INFO Loss at step 50: 0.1000", {"step": 50, "Loss": 0.1}),
    # --- counters -----------------------------------------------------------------------------------
    # A record printed as a dict or a JSON line (detectron2's metrics.json, a `print(dict)` loop) names its counter as
    # a key: an integer `iteration`, `iter`, `step`, `global_step`, `num_updates` or `_step` is the step (the record
    # order stays the write order, so a counter that goes back still shows); an `epoch` key stays a series of its own.
    # A record on one line only (its `}` after the key): a pretty-printed document's lone `"step": 250,` is no record.
    LinePattern("dict_counter", "counter", _p(
        r"['\"](?:iteration|iter|step|global_step|num_updates|_step)['\"]\s*:\s*(?P<step>\d+)(?![\d.eE])(?=[^\n]*\})"),
        '{"data_time": 0.16, "iteration": 19, "loss_cls": 0.167, "lr": 0.0004, "epoch": 2}',
        {"step": 19, "epoch": 2, "data_time": 0.16, "loss_cls": 0.167, "lr": 0.0004}),
    LinePattern("global_step", "counter", _p(r"\b(?:Global (?:Step|Batch)|global[_ ](?:step|batch))\s*[:=]?\s*(?P<step>\d+)\b", re.I),
                "Loss nan   LearningRate 0.001000   Epoch: 0   Global Step: 20   Fp16 Grad Scale:  0",
                {"step": 20, "epoch": 0, "Loss": float("nan"), "LearningRate": 0.001, "Fp16 Grad Scale": 0}),
    LinePattern("num_updates", "counter", _p(r"\bnum_updates['\"]?\s*[:=]\s*['\"]?(?P<step>\d+)\b"),  # fairseq's update count
                "| epoch 001:    430 / 614 loss=9.997, nll_loss=9.997, ppl=1021.81, wps=1340, ups=3.0, wpb=442, "
                "bsz=18, num_updates=431, lr=0.05, gnorm=11.481, clip=100%, oom=0",
                {"step": 431, "epoch": 1, "loss": 9.997, "nll_loss": 9.997, "ppl": 1021.81,
                 "wps": 1340, "ups": 3.0, "wpb": 442, "bsz": 18, "lr": 0.05, "gnorm": 11.481, "clip": 100, "oom": 0}),
    # A counter's word as a progress bar's description (`Step: 100%|███| 1827/1827`) is no counter: the number is the
    # bar's percentage, the same on every bar's end (the bar's own `n/total` is its batch, `tqdm_bar`).
    LinePattern("iteration", "counter", _p(r"\b(?:Iteration|iteration)\s*[:=]?\s*(?P<step>\d+)\b(?!\s*%)"),
                "Iteration 20 (1.97443 iter/s, 5.06474s/10 iter), loss = nan", {"step": 20, "loss": float("nan")}),
    # Marian's fields (`Ep. 1 : Up. 300 : Sen. 137,255 : Cost nan`): the epoch and the update, its step.
    LinePattern("marian", "counter", _p(r"\bEp\.\s+(?P<epoch>\d+)\s+:\s+Up\.\s+(?P<step>\d+)\b"),
                "[2020-09-05 20:22:04] Ep. 1 : Up. 100 : Sen. 46,750 : Cost 314.00448608 : Time 35.20s",
                {"epoch": 1, "step": 100, "Cost": 314.00448608}),
    # `iter 50/100` is the step of 100 (a count within the epoch turns into the batch where it starts again).
    LinePattern("iter", "counter", _p(rf"{_SPLIT_BEFORE}\b(?:iter|Iter|ITER)\s*[:=]?\s*(?P<step>\d+)(?:\s*/\s*(?P<of>\d+))?\b(?!\.\d|\s*%)"),
                "Iter 25: Train loss 1.593, Learning Rate 7.000e-05, It/sec 0.999, Tokens/sec 387.697",
                {"step": 25, "Train loss": 1.593, "Learning Rate": 7e-05, "It/sec": 0.999, "Tokens/sec": 387.697}),
    # `Epoch [e/E], Step [s/N]` (the PyTorch tutorials' loop): the step within the epoch, so its batch.
    LinePattern("step_bracket_of", "counter", _p(r"\b(?:step|Step|STEP)\s*\[\s*(?P<batch>\d+)\s*/\s*(?P<of>\d+)\s*\]"),
                "Epoch [1/50], Step [6/48], Loss: nan", {"epoch": 1, "batch": 6, "Loss": float("nan")}),
    # tqdm-style `it N |`, `It 300:` (an iteration's short name before a separator): the step, not a metric `it`.
    LinePattern("it", "counter", _p(r"\b(?:it|It|IT)\s*[:=]?\s*(?P<step>\d+)(?:\s*/\s*\d+)?(?=\s*[-|,:\]]|\s+[A-Za-z]|\s*$)"),
                "epoch 2 it 300 | loss 0.3", {"epoch": 2, "step": 300, "loss": 0.3}),
    # A step in another language's word, as a record's first word only (`ingest.languages.STEP_WORDS`: Romanian `pas`
    # is another word elsewhere).
    LinePattern("step_word_first", "counter", _p(
        rf"^[\s\x00]*{_STEP_WORDS}\s*[:=#]?\s*(?P<step>\d+)(?:\s*/\s*(?P<of>\d+))?\b(?!\.\d|\s*%)"),
        "pas    20 | pierdere 3.0124 | lr 8.40e-04 | |g|  0.33 |    3.8s",
        {"step": 20, "pierdere": 3.0124, "lr": 8.4e-4}),
    LinePattern("step", "counter", _p(rf"{_SPLIT_BEFORE}\b(?:step|Step|STEP)\s*[:=#]?\s*(?P<step>\d+)(?:\s*/\s*(?P<of>\d+))?\b(?!\.\d|\s*%)"),
                "step 3000/5000: train loss 4.0390, val loss 4.0427",
                {"step": 3000, "train loss": 4.039, "val loss": 4.0427}),
    # A loop's index printed as `idx: N` (`print(f"idx: {i}loss: {loss}")`): the step.
    LinePattern("index", "counter", _p(r"\b(?:idx|index|Idx|Index|IDX)\s*[:=]\s*(?P<step>\d+)(?!\.\d)"),
                "idx: 0loss: tensor(8.4650, grad_fn=<NegBackward>)", {"step": 0, "loss": 8.465}),
    # An evaluation pass's lines in PyTorch's ImageNet example, DeiT/MAE's MetricLogger and timm: `Test: [b/N]`.
    # Their `Loss`, `Acc@1` are the validation's: the tags take the split's word (`Test Loss`), so they do not
    # join the training's `Loss` (a tag that names a split already keeps its own).
    LinePattern("split_bracket_of", "counter", _p(
        r"\b(?P<split>Test|Val|Valid|Validation|Eval|Evaluation)\s*:\s*\[\s*(?P<batch>\d+)\s*/\s*\d+\s*\]"),
        "Test: [ 10/196]\tTime  0.254 ( 0.400)\tLoss 8.0e-01 (9.0e-01)\tAcc@1  80.00 ( 79.10)",
        {"batch": 10, "Test Time": 0.254, "Test Loss": 0.8, "Test Acc@1": 80.0}),
    # timm's train lines: `Train: e [ b/N (  8%)]  Loss: 6.912 (6.93)  Time: ...`
    LinePattern("timm_train", "counter", _p(r"\bTrain:\s*(?P<epoch>\d+)\s*\[\s*(?P<batch>\d+)\s*/\s*(?P<of>\d+)"),
                "Train: 0 [ 100/1251 (  8%)]  Loss: 6.912 (6.93)  Time: 0.412s,  621.36/s  (0.420s,  609.52/s)  "
                "LR: 1.000e-06  Data: 0.010 (0.015)", {"epoch": 0, "batch": 100, "Loss": 6.912, "LR": 1e-6}),
    # PyTorch's CIFAR-10 tutorial: `[epoch, batch] loss: X` (`print(f'[{epoch + 1}, {i + 1:5d}] loss: ...')`).
    # Also after a logger's prefix (a time, `INFO:root:`), before any other number on the line.
    LinePattern("bracket_pair", "counter", _p(rf"{_NO_NUMBER_BEFORE}\[\s*(?P<epoch>\d+),\s*(?P<batch>\d+)\]"),
                "[1,  2000] loss: 2.183", {"epoch": 1, "batch": 2000, "loss": 2.183}),
    # PyTorch's DCGAN example: `[epoch/epochs][batch/batches]` (`'[%d/%d][%d/%d]\tLoss_D: %.4f\tLoss_G: %.4f'`).
    LinePattern("bracket_fractions", "counter", _p(
        r"\[\s*(?P<epoch>\d+)\s*/\s*\d+\s*\]\s*\[\s*(?P<batch>\d+)\s*/\s*(?P<of>\d+)\s*\]"),
        "[0/5][50/1583]\tLoss_D: 1.9847\tLoss_G: 5.5914\tD(x): 0.6004",
        {"epoch": 0, "batch": 50, "Loss_D": 1.9847, "Loss_G": 5.5914}),
    # PyTorch's ImageNet example and the MetricLogger of MAE/DeiT/LLaMA2-Accessory: `Epoch: [e][b/N]`,
    # `Epoch: [e]  [b/N]` (tab-separated fields, a running average in brackets after each value); `Epoch e [b/N]`.
    LinePattern("epoch_bracket_of", "counter", _p(
        r"\bEpoch:?\s*\[?\s*(?P<epoch>\d+)\s*\]?\s*\[\s*(?P<batch>\d+)\s*/\s*(?P<of>\d+)\s*\]", re.I),
        "Epoch: [11][1/48]\tTime 0.470 (1.206)\tData 0.076 (0.004)\tLoss 3.2168 (37.0903)\t",
        {"epoch": 11, "batch": 1, "Time": 0.47, "Data": 0.076, "Loss": 3.2168}),
    # MXNet's Speedometer: `Epoch[e] Batch [b]`, and since MXNet 1.0 `Epoch[e] Batch [a-b]` (the batches since
    # the last line: b is this line's), then tab-separated `Speed: ... samples/sec` and `name=value` pairs.
    LinePattern("epoch_batch_brackets", "counter", _p(
        r"\bEpoch\s*\[(?P<epoch>\d+)\]\s*Batch\s*\[(?:\d+-)?(?P<batch>\d+)\]", re.I),
                "Epoch[1] Batch[7] Speed: 143.86 samples/sec,  IDLoss=nan,",
                {"epoch": 1, "batch": 7, "Speed": 143.86, "IDLoss": float("nan")}),
    # An ordinal of Chinese and Japanese (`第3轮`, `第 3 个epoch`, `第120步`, `第5次迭代`): the epoch or the step it counts,
    # never a part of the name after it (`第3轮 损失: 0.52` is the loss at epoch 3).
    LinePattern("ordinal_cjk", "counter", _p(
        r"第\s*(?:(?P<epoch>\d+)\s*(?:/\s*\d+\s*)?(?:个|個)?\s*(?:轮|輪|代|回合|(?i:epoch)|エポック)"
        r"|(?P<step>\d+)\s*(?:/\s*\d+\s*)?(?:个|個|次)?\s*(?:步|次迭代|(?i:step|iter(?:ation)?)))"),
        "第3轮 损失: 0.5213, 准确率: 0.81", {"epoch": 3, "损失": 0.5213, "准确率": 0.81}),
    LinePattern("epoch_of", "counter", _p(rf"\b(?:Epoch|{_EPOCH_WORDS})\s*:?\s*\[?\s*(?P<epoch>\d+)\s*/\s*\d+\s*\]?", re.I),
                "Epoch 3/10 - loss: 0.52 - accuracy: 0.81", {"epoch": 3, "loss": 0.52, "accuracy": 0.81}),
    # Not a count per epoch (HF's `Num update steps per epoch = 8`): a rate, not the epoch.
    LinePattern("epoch", "counter", _p(rf"(?<![Pp]er )\b(?:Epoch|epoch|EPOCH|{_EPOCH_WORDS})\s*[:=\[]?\s*(?P<epoch>\d+)\]?(?!\d|\.\d|\s*%)"),
                "Epoch: 2 | batch_loss: 0.75", {"epoch": 2, "batch_loss": 0.75}),
    LinePattern("batch", "counter", _p(rf"{_SPLIT_BEFORE}\b(?:Batch|batch)\s*[:=\[]?\s*(?P<batch>\d+)\]?(?:\s*/\s*(?P<of>\d+))?(?![\d.]|\s*%)"),
                "epoch 1 batch 300/938 loss 0.31", {"epoch": 1, "batch": 300, "loss": 0.31}),
    # A count of batches before its word (word_language_model's `|   200/ 2983 batches |`): the batch. Without it, two
    # records of the same values (a loss that stays nan) differ only before their metrics, as another rank's copy would.
    LinePattern("batches_of", "counter", _p(r"\b(?P<batch>\d+)\s*/\s*(?P<of>\d+)\s+(?:batches|Batches)\b"),
                "| epoch   1 |   200/ 2983 batches | lr 20.0000 | ms/batch 11.61 | loss   nan | ppl      nan",
                {"epoch": 1, "batch": 200, "lr": 20.0, "ms/batch": 11.61, "loss": float("nan"), "ppl": float("nan")}),
    # A count of epochs or steps done, after the word that says so (Torch7 scripts' `Loss after 1 epochs: 0.034`,
    # `loss after 500 steps: 0.2`): the counter, not the loss (`key_at_counter_is` reads the value after it).
    LinePattern("after_n", "counter", _p(
        r"(?<=\bafter )(?:(?P<epoch>\d+)\s+(?i:epochs?)|(?P<step>\d+)\s+(?i:steps?|iterations?|iters?))\b"),
        "Loss after 1 epochs: 0.034\t", {"epoch": 1, "Loss": 0.034}),
    # Keras' progress bar: `N/M [=====>....] - ETA: ... - loss: X` (its epoch is on the `Epoch e/E` line above).
    LinePattern("keras_bar", "counter", _p(r"^\s*(?P<batch>\d+)/\d+\s*\[[=>.]*\]"),
                "50000/50000 [==============================] - 678s - loss: 1.7646 - acc: 0.3460 - val_loss: 1.3379",
                {"batch": 50000, "loss": 1.7646, "acc": 0.346, "val_loss": 1.3379}),
    # A counter printed between a loss's name and its value (tacotron2's `Train loss {iteration} {loss:.6f}`,
    # `Validation loss {iteration}: {loss:9f}`): a counter and a metric in one match.
    LinePattern("loss_step_value", "counter", _p(
        rf"\b(?P<key>[A-Za-z][A-Za-z ]*?[Ll]oss)\s+(?P<step>\d+):?\s+(?P<value>{NUM}){_NUM_END}"),
        " **Train loss 12002 4.972964** Grad Norm inf 1.78s/it",
        {"step": 12002, "Train loss": 4.972964, "Grad Norm": float("inf"), "s/it": 1.78}),
    # darknet's `%d: %f, %f avg loss, %f rate, ...`: the iteration, then the batch's value unnamed beside its running
    # average, which names them both (`avg loss`): the first is the loss.
    LinePattern("value_beside_average", "counter", _p(
        rf"^\s*(?P<step>\d+):\s*(?P<value>{NUM}),\s*{NUM}\s+(?:avg|average|mean)\s+(?P<key>[A-Za-z]\w*){_NUM_END}"),
        " 1: 364.146759, 364.146759 avg loss, 0.000000 rate, 0.641364 seconds, 48 images, -1.000000 hours left",
        {"step": 1, "loss": 364.146759}),
    # A line that opens with a bare integer and holds only `name value` pairs after it (build-nanoGPT's
    # `f"{step} train {loss:.6f}"`, `12 loss 0.31 acc 0.9`): the integer is the step.
    # Two such integers (`'%d %d Loss=%.3f Time=%.3f' % (epoch, i, ...)`): the epoch, then the step (the batch where it
    # starts again with each epoch).
    LinePattern("leading_counter", "counter", _p(
        rf"^\s*(?:(?P<epoch>\d+)\s+)?(?P<step>\d+):?\s+(?=(?:[A-Za-z][\w./-]*\s*[:=]?\s*{NUM}{_NUM_END}[,;]?\s*)+$)"),
        "0 train 10.955003", {"step": 0, "train": 10.955003}),
    # A count of a total in brackets before any other number on the line (after its prefix and counters):
    # `(50/391) loss: 1.95`, `Epoch 1/50 (50/391) ...`, the MNIST example's `[3200/60000 (5%)]`: the batch.
    LinePattern("fraction_first", "counter", _p(
        rf"{_NO_NUMBER_BEFORE}[(\[]\s*(?P<batch>\d+)\s*/\s*\d+\s*(?:\(\s*\d+(?:\.\d+)?%\s*\)\s*)?[)\]]"),
        "(50/391) loss: 1.95 lr: 0.001", {"batch": 50, "loss": 1.95, "lr": 0.001}),
    # A progress bar (`BAR_GLYPHS`): tqdm's, Ultralytics' box characters, a notebook's bar without its glyphs.
    LinePattern("tqdm_bar", "counter", _p(
        rf"\d+%(?:{BAR_GLYPHS})\s*(?P<batch>\d+)/(?:\d+|\?)"),
                "100%|██████████| 50/50 [00:01<00:00, 42.1it/s, loss=0.123, lr=1e-3]",
                {"batch": 50, "loss": 0.123, "lr": 1e-3}),
    # A bar of no known total after its description (`desc=f"Loss: {x}"`, tqdm over an iterator of no length prints
    # `Loss: 0.5213: : 11it [00:06,  1.59it/s]`): the count is the bar's, no record's value; the description's value
    # ends at its colon (`_DESCRIPTION_END`).
    LinePattern("tqdm_count", "counter", _p(r"\s:\s(?P<batch>\d+)it(?=\s\[\d)"),
                "Loss: 0.5212869264862754: : 11it [00:06,  1.59it/s]", {"batch": 11, "Loss": 0.5212869264862754}),
    # --- fixed tags: lines whose value has no key of its own (run before the pairs, so `epoch= 2.68` in
    # `time this epoch= 2.68` is not read as an epoch counter's value) --------------------------------
    LinePattern("loss_scale_reduced", "assign", _p(
        rf"(?i:overflow)(?:!| detected\.).*?Attempted loss scale:\s*{NUM},\s*reducing to\s*(?P<value>{NUM}){_NUM_END}"),
        "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 64, reducing to 32",
        {"loss_scale": 32}, tag="loss_scale"),
    LinePattern("loss_scale_kept", "assign", _p(
        rf"OVERFLOW!.*?Attempted loss scale:\s*(?P<value>{NUM}),\s*but hysteresis"),
        "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, but hysteresis is 2. "
        "Reducing hysteresis to 1", {"loss_scale": 65536}, tag="loss_scale"),
    LinePattern("loss_scale_set", "assign", _p(  # fairseq; apex (`loss scaler 0` is the scaler's index)
        rf"\b(?:loss scaler\s+\d+\s+)?(?:setting|reducing)(?: dynamic)? loss scale (?:from\s*{NUM}\s*)?to:?\s*(?P<value>{NUM}){_NUM_END}", re.I),
        "| WARNING | fairseq.trainer | NOTE: overflow detected, setting loss scale to: 0.0625",
        {"loss_scale": 0.0625}, tag="loss_scale"),
    # DeepSpeed before 0.4 (`fp16 dynamic loss scale overflow! ... reducing to`, above), ColossalAI's
    # `Overflow occurs, the loss scale is adjusted to 32768.0`, and the like: `loss scale ... <verb> to X`.
    LinePattern("loss_scale_changed", "assign", _p(
        rf"\bloss[ _]scale(?: is| has been)? (?:adjusted|reduced|decreased|lowered|halved|changed|updated) to:?"
        rf"\s*(?P<value>{NUM}){_NUM_END}", re.I),
        "Overflow occurs, the loss scale is adjusted to 32768.0", {"loss_scale": 32768.0}, tag="loss_scale"),
    # A clipping message with the norm it clipped and the threshold (Caffe's `Gradient clipping: scaling down
    # gradients (L2 norm 5120.3 > 35) by scale factor 0.0068`; `clipping gradient norm 12.5 to 1.0`): evidence of the
    # gradients where no loss is printed. Printed on clipped steps only: the norm is the norm before clipping.
    LinePattern("grad_clipping", "assign", _p(
        rf"(?i:gradient clipping|clipping gradients?|clip(?:ped|ping)? grad(?:ient)?s?)\b[^\n]{{0,80}}?"
        rf"(?:(?:L\d )?norm[:=]?\s*(?P<norm>{NUM})\s*(?:>|to|exceeds|above)\s*(?:max(?:_norm)?[:=]?\s*)?"
        rf"(?P<threshold>{NUM}))(?:\)?\s*(?:by )?(?:scale )?factor[:=]?\s*(?P<factor>{NUM}))?{_NUM_END}"),
        "Gradient clipping: scaling down gradients (L2 norm 5120.3 > 35) by scale factor 0.0068",
        {"grad_norm": 5120.3, "grad_clip": 35, "clip_scale": 0.0068},
        tags=(("norm", "grad_norm"), ("threshold", "grad_clip"), ("factor", "clip_scale"))),
    # DL4J's ScoreIterationListener: `Score at iteration N is X`, X the model's score, which DL4J defines as the loss
    # (plus regularisation). This sentence only: a bare `score` elsewhere is often a metric or a reward.
    LinePattern("dl4j_score", "assign", _p(rf"\bScore at {_COUNTED}is\s*(?P<value>{NUM}){_NUM_END}"),
                "06:38:16.402 [main] INFO ScoreIterationListener - Score at iteration 0 is 1.6235184989295723",
                {"step": 0, "loss": 1.6235184989295723}, tag="loss"),
    LinePattern("epoch_time", "assign", _p(
        rf"\b(?:time|took)\s+(?:this|per|for this|of this)\s+epoch\s*[=:]?\s*(?P<value>{NUM}){_NUM_END}", re.I),
        "epoch 3, loss=0.52, time this epoch= 2.68", {"epoch": 3, "loss": 0.52, "epoch_time": 2.68}, tag="epoch_time"),
    # A rate printed with its unit and no name of its own (`2.51s/it`, `0.35 sec/step`; not a tqdm bar's own):
    # the unit is its tag. A value after `key:`, `key=` or a word (not a value: `inf 1.78s/it`) is that key's
    # (`Speed: 512 samples/sec`, insightface's `-Speed 2074.94 samples/sec` are Speed).
    LinePattern("bare_rate", "assign", _p(
        rf"(?<![\w.:=])(?<![:=]\s)(?:(?<![A-Za-z]\s)|(?<=(?i:nan|inf)\s))(?<![A-Za-z:=]\s\s)(?<![:=]\s\s\s)"
        rf"(?P<value>{NUM})\s?(?P<key>{RATE_UNITS})(?![\w/])"),
        "Train loss 12005 5.318559 Grad Norm inf 1.75s/it", {"step": 12005, "Train loss": 5.318559, "s/it": 1.75}),
    # --- explicit pairs -----------------------------------------------------------------------------
    # Not after `-`: `--lr=5e-4` on a command line is an argument, not a logged value.
    # A unit may follow the value (`memory=2100MB`, `mem=2100 MB`); a unit word is never the first word of a key, nor
    # a value word (`loss: nan lr=1e-4`: the nan is the loss's).
    LinePattern("key_equals_value", "assign", _p(
        rf"(?<![\w.-])(?P<key>(?:(?!{_UNIT_BEFORE_KEY}|(?i:nan|inf(?:inity)?)\s)[A-Za-z]+ (?=[A-Za-z_][\w./-]*\s*=))?"
        rf"[A-Za-z_][\w./-]*)\s*=\s*"
        rf"(?P<value>{NUM})(?P<unit>(?:{MEMORY_UNIT}|ms|s|%|\s(?:{MEMORY_UNIT}|ms|%))(?![\w.])(?!\s*[=:]))?{_NUM_END}"),
                "Iteration 10, lr = 0.001, m = 0.9, wd = 0.0005, gs = 6.21, mem=2100 MB",
                {"step": 10, "lr": 0.001, "m": 0.9, "wd": 0.0005, "gs": 6.21, "mem MB": 2100}),
    # Quotes as Python prints them, or made typographic by an editor or an issue tracker (`‘loss’: 1.453`); the
    # value quoted too where the writer printed strings (fairseq's json log format, transformers 5's console).
    LinePattern("dict_item", "assign", _p(
        rf"['\"\u2018\u2019\u201c\u201d](?P<key>[^'\"\u2018\u2019\u201c\u201d]+)['\"\u2018\u2019\u201c\u201d]\s*:\s*"
        rf"(?P<quote>['\"])?(?P<value>{NUM})(?(quote)['\"]){_NUM_END}"),
                "{'loss': 0.6931, 'grad_norm': inf, 'learning_rate': 5e-05, 'epoch': 0.27}",
                {"loss": 0.6931, "grad_norm": float("inf"), "learning_rate": 5e-05, "epoch": 0.27}),
    # A name qualified in parentheses (`Loss(train): 6.55, Loss(val): 6.49`, `Acc (test) = 0.91`): the split or the
    # kind a hand-written print puts after the name, kept in the tag as printed. Not a call (`f(x) = 1`: a one-letter
    # name), nor a settings repr's arguments (blanked before).
    LinePattern("qualified_name", "assign", _p(
        r"(?<![\w.-])(?P<key>[A-Za-z][A-Za-z_]+ ?\([A-Za-z][\w ]{0,20}\))\s*[:=]\s*"
        rf"(?P<value>{NUM}){_NUM_END}"),
        "[Prompt]Epoch:0, Current step: 1000, Loss(train): 6.551672, Loss(val): 6.492640, alpha:0.030000",
        {"step": 1000, "Loss(train)": 6.551672, "Loss(val)": 6.49264, "alpha": 0.03}),
    # `name:value` with no space (modded-nanogpt's `step:1/20000 train_loss:6.9319 train_time:132ms`, `train loss:1.2`):
    # a unit may be glued on. Not a device (`cuda:0`), a port, a URL or a quoted string's inside.
    LinePattern("key_colon_value", "assign", _p(
        rf"(?<![\w.:/'\"-])(?P<key>(?!(?:cuda|cpu|gpu|npu|xpu|mps|localhost|port|rank)\b)"
        rf"(?:(?!{_UNIT_BEFORE_KEY})[A-Za-z][A-Za-z0-9]* ){{0,3}}[A-Za-z_][\w./@#-]*)"
        r"(?<!\.[A-Za-z])(?<!\.[A-Za-z]{2})(?<!\.[A-Za-z]{3})(?<!\.[A-Za-z]{4}):"  # not a source file's line
        rf"(?P<value>{NUM})(?P<unit>ms|s|%|[KMGT]i?B|\s(?:[KMGT]i?B|%)(?!\w)(?!\s*[=:]))?(?![\w.'\":]|/\d)", re.I),
        "step:1/20000 train_loss:6.9319 train_time:132ms step_avg:131.94ms",
        {"step": 1, "train_loss": 6.9319, "train_time ms": 132, "step_avg ms": 131.94}),
    # `name - value` pairs a progress bar's postfix lists after its rate (segmentation_models_pytorch's epoch runner:
    # `[00:55<00:00,  7.67it/s, bce_dice_loss - 1.606, iou_score - 0.2795]`): each after `, `, before `,` or `]`.
    LinePattern("postfix_dash", "assign", _p(
        rf"(?<=, )(?P<key>[A-Za-z_][\w./@]*) - (?P<value>{NUM})(?=\s*[,\]]|\s*$)"),
        "train: 100%|████| 396/396 [00:55<00:00,  7.67it/s, bce_dice_loss - 1.606, iou_score - 0.2795]",
        {"batch": 396, "bce_dice_loss": 1.606, "iou_score": 0.2795}),
    # A postfix key that carries its own colon (`set_postfix(ordered_dict={"loss: ": loss})` prints `loss: =6.78`):
    # the key before the colon, each after `, `, before `,` or `]`.
    LinePattern("postfix_colon_equals", "assign", _p(
        rf"(?<=, )(?P<key>[A-Za-z_][\w./@]*(?: [A-Za-z_][\w./@]*)?):\s?=\s?(?P<value>{NUM})(?=\s*[,\]]|\s*$)"),
        "100%|████| 625/625 [03:20<00:00,  3.12it/s, epoch=4, loss: =6.78, img shape: =torch.Size([80, 3]), LR=0.00012]",
        {"batch": 625, "epoch": 4, "loss": 6.78, "LR": 0.00012}),
    # A row of a two-column box table (stable-baselines3's logger: `|    loss    | -0.016   |`), after a logger's prefix
    # or a counter or not (`INFO - | loss | 0.52 |`).
    LinePattern("pipe_row", "assign", _p(
        rf"^(?:[^|]*\s)?\|\s*(?P<key>[A-Za-z][\w./ -]*?)\s*\|\s*(?P<value>{NUM})\s*\|\s*$"),
        "|    loss                 | -0.016      |", {"loss": -0.016}),
    # A sentence that names its counters between the name and the value: `Score at iteration 0 is 1.62`,
    # `Loss at epoch 0 and iteration 500 is 0.219`, `loss for step 3: 0.5` (the counters are blanked by then).
    LinePattern("key_at_counter_is", "assign", _p(
        rf"(?P<key>[A-Za-z][A-Za-z_ ]*?)\s+(?:at|for|in|of|after)\s+{_COUNTED}(?:(?:and|,)\s*{_COUNTED})*"
        rf"(?:\bis\b|:|=)\s*(?P<value>{NUM}){_NUM_END}"),
        "NCE Loss at epoch 0 and iteration 500 is 0.9422569870948792",
        {"epoch": 0, "step": 500, "NCE Loss": 0.9422569870948792}),
]

# Loose `Words value` clauses (pass 4): up to four words (`Acc@1` is one), an optional `:` / `is` / `=`, the value,
# then an optional unit glued to it (`ms`, `%`, `s`) and up to two unit words (`samples/sec`, `GB`); a value glued to
# the name's last letter or digit is part of the name (`mAP50`, `mAP50-95` in a header are names), and a value word
# is a whole word (`Inference` is no `inf`). Prose may come
# before the name (`INFO the training loss is 0.52`: read only where the name names a metric); an article is never
# part of a name, and a verb or `of` may join name and value (`loss was 0.44`, `a loss of 0.3`).
_ARTICLE = r"(?!(?i:the|a|an|our|my|this|its)\s)"
_CONNECTOR = r"(?::|\b(?:is|was|of|equals)\b|=)?"
PHRASE = re.compile(
    rf"^(?P<lead>(?:[^\s\d]+\s+)*?){_ARTICLE}(?P<key>[A-Za-z][\w/%.@+-]*(?: {_ARTICLE}[A-Za-z][\w/%.@+-]*){{0,3}}?)\s*"
    rf"{_CONNECTOR}\s*(?<![\w-])(?P<value>{NUM})(?!(?<=[A-Za-z])[A-Za-z])"
    r"(?P<unit>[A-Za-z%/]+)?(?:\s+(?P<unit2>[A-Za-z%/]+))?(?:\s+[A-Za-z%/]+)?$")
# A value printed as a word (`nan`, `inf`): never a label's end, nor the first word of a name.
_VALUE_WORD = re.compile(r"(?i:nan|inf(?:inity)?)(?![\w.])")
_LABEL_END = re.compile(rf":\s+(?=[A-Za-z])(?!{_VALUE_WORD.pattern})")  # `loss: nan` is a value, no label

# Units a value may be printed with, glued (`2100MB`, `52ms`, `0.52s`, `12.3K`) or after a space (`2100 MB`, `87.5 %`).
# Nothing is converted: a value is stored as printed, and its unit, where it is not seconds or a percentage (what a
# bare time or share means), is kept in its tag (`mem 2100MB` is `mem MB` 2100, `time 52ms` is `time ms` 52), so values
# printed in two units never share a series. A scale letter alone (`3.2G`) is a unit only of a memory's value.
_UNIT_GLUED = rf"{MEMORY_UNIT}|ms|us|µs|ns|secs?|s|min|h|%|[KMGT]"
_UNIT_WORDS = re.compile(rf"(?:{MEMORY_UNIT}|ms|us|µs|ns|secs?|s|min|mins|h|hrs?|%)")
_PLAIN_UNITS = {"s", "sec", "secs", "%"}
_SCALES = {"K", "M", "G", "T"}


def _unit_tag(key: str, unit: str | None) -> str | None:
    """The tag of `key`'s value printed with `unit`, where the unit is kept in it (`mem MB`); None where the key alone
    is the tag (no unit, seconds, a percentage, a unit the key already names: `mem_mb 2100MB`)."""
    unit = (unit or "").strip()
    if not unit or unit.lower() in _PLAIN_UNITS or not _UNIT_WORDS.fullmatch(unit) and unit not in _SCALES:
        return None
    if unit in _SCALES and role_of(key).role != "memory":
        return None
    if unit.lower() in (w.lower() for w in re.findall(r"[A-Za-zµ]+", key)):
        return None
    return f"{key} {unit}"


# A clause the phrase does not take whole (`loss 1.95 mem 2100MB ETA 0:01:02`), read part by part: each
# `name [:|=|is] value [unit]` is a pair, its name the words just before it (up to four, none of them an article or a
# preposition: prose before a pair is not its name). A part that fits no pair (a clock, a count of a total `50/391`, a
# number glued to a word, a command line's flag, a value without a name) is skipped alone: it costs that part, never
# the clause.
_TOKEN = re.compile(
    r"(?P<skip>\d+(?::\d\d)+(?:[.,]\d+)?(?![\w:])|[-+]?\d[\d.]*\s*/\s*\d[\d.]*)"
    rf"|(?P<value>{NUM})(?P<unit>\s?%|(?:{_UNIT_GLUED})(?![\w.%:]))?(?![\w.%:])"  # `.95:` is a label's
    r"|(?P<word>[^\W\d][\w./@%+-]*|\d+[A-Za-z]+_[\w./@%+-]*(?![\w.]))"  # also `3d_train`: a name opened by a count
    # (and a name in another script: `当前损失值：10.11`, read by its words, `ingest.roles.CJK_TERMS`)
    r"|(?P<junk>[-+]?\.?\d\S*|--[A-Za-z][\w.-]*)"  # a number glued to a word; a command line's `--lr=5e-4`
    r"|(?P<sep>[:=])"
    r"|\S")
_NO_NAME_WORDS = {"the", "a", "an", "our", "my", "this", "its", "at", "in", "on", "for", "to", "with", "and", "by",
                  "from", "after", "per", "than", "took", "takes", "saved", "saving"}
_CONNECTORS = {"is", "was", "of", "equals"}
MAX_NAME_WORDS = 4


def _pairs(clause: str) -> tuple[list[tuple[int, int, int, int, str | None]], bool]:
    """(key start, key end, value start, value end, unit) of each pair in `clause`, read part by part, and whether
    every part of the clause belongs to a pair (prose between them does not: `Product Build 20200624 for Intel`)."""
    tokens = [(_kind(t), t) for t in _TOKEN.finditer(clause)]
    pairs: list[tuple[int, int, int, int, str | None]] = []
    name: list[re.Match[str]] = []  # the words since the last value, a label's colon or a part that fits nothing
    whole = True
    counted: set[int] = set()  # the nouns of `of 8 batches: 0.93`, a count's, not a name's
    for i, (kind, token) in enumerate(tokens):
        before = tokens[i - 1][0] if i else None
        after = tokens[i + 1][0] if i + 1 < len(tokens) else None
        if i in counted:
            continue
        if (kind == "value" and name and name[-1].group().lower() == "of"
                and [k for k, _ in tokens[i + 1:i + 4]] == ["word", "sep", "value"]):
            counted.add(i + 1)  # `loss of 8 batches: 0.93`: 8 counts what the loss is a mean of; 0.93 is its value
            continue
        if kind == "word":
            word = token.group()
            if before == "value" and _UNIT_WORDS.fullmatch(word) and after not in ("value", "sep"):
                # `2100 MB`: the value's unit, not the next pair's name
                if pairs and pairs[-1][3] == tokens[i - 1][1].end("value") and pairs[-1][4] is None:
                    pairs[-1] = (*pairs[-1][:4], word)
            elif word.lower() in _NO_NAME_WORDS:
                name, whole = [], False
            else:
                name.append(token)
        elif kind == "sep":
            if after != "value":
                name, whole = [], whole and not name  # a label's colon (`Train: loss 0.3`): the name begins after it
        elif kind == "value" and name:
            while name and name[-1].group().lower() in _CONNECTORS:
                name.pop()  # `loss is 0.5`
            cut = max((j + 1 for j, w in enumerate(name) if w.group().lower() in _CONNECTORS), default=0)
            whole = whole and cut == 0 and len(name) <= MAX_NAME_WORDS
            name = name[cut:][-MAX_NAME_WORDS:]
            if name:
                pairs.append((name[0].start(), name[-1].end(), *token.span("value"), token.group("unit")))
            name = []
        else:  # a value without a name, or a part that fits no pair
            name, whole = [], False
    return pairs, whole and not name


def _names_quantity(key: str) -> bool:
    """A short name the role table knows (`loss`, `train loss`, `mem`): on a line without a counter, only such a name
    is read from a clause that also holds prose (METRIC_WORDS alone finds `wer` in `were`, `norm` in `normal`)."""
    return len(key.split()) <= 2 and role_of(key).role != "other"


def _kind(token: re.Match[str]) -> str:
    return "value" if token.group("value") is not None else token.lastgroup or "other"


# arrows, `---` rules; a tab before a name (`pump<TAB>AUC: 81.2<TAB>pAUC: 71.2`: fields of a tab-separated line). A
# period after a word a name is made of (`val. loss`, `Avg. Loss`, `Test. Acc.`) abbreviates that word: it ends no
# clause, so the name keeps its split or qualifier (a key's name is its words, punctuation aside).
_ABBREVIATED = ("val", "valid", "eval", "test", "train", "tr", "avg", "ave", "tot", "mean")
_NOT_ABBREVIATION = "".join(rf"(?<!\b(?i:{w}))" for w in _ABBREVIATED)
# ` : ` before the next `Name value` pair parts fields too (Marian's `Cost 314.00 : Time 35.20s : ...`); not before a value
# (`loss : 0.5` is one pair).
CLAUSE_SPLIT = re.compile(r"[,;|()\[\]{}\x00]|" + _NOT_ABBREVIATION + r"\.\s|\s{2,}|\s-\s|\s?[-=~]+>\s?|\s-{2,}\s"
                          rf"|\t(?=[A-Za-z])(?!{_VALUE_WORD.pattern})"  # a tab before a name (`loss\tnan` is one pair)
                          r"|\s:\s(?=[A-Za-z][\w.]*\s+[-+]?\.?\d)")
# `Scale:  0`, and a padded value after its name (`loss  7.63`, word_language_model's `{:5.2f}`): one clause.
# The value may be a non-finite one padded to the column's width (`'loss {:5.2f}'` prints `loss   nan`). A name padded
# before its colon (`LOSS     :  24.57`, names aligned in a column) is one clause too.
_PADDED_VALUE = r"[-+]?\.?\d|[-+]?(?:[Nn]a[Nn]|NAN|[Ii]nf(?:inity)?|INF)(?![\w.])"
_WIDE_SEPARATOR = re.compile(rf"([:=])\s{{2,}}|(?:(?<=[A-Za-z])|(?<=@\d))\s{{2,}}(?={_PADDED_VALUE})"  # `Acc@1   0.39`
                             rf"|(?<=[A-Za-z])\s{{2,}}(?=[:=]\s*(?:{_PADDED_VALUE}))")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
LOOKS_LIKE_METRIC = re.compile(
    rf"(?:{METRIC_WORDS.pattern})\w*\W{{0,4}}(?:{NUM})|(?:{NUM})\W{{0,3}}(?:{METRIC_WORDS.pattern})", re.I)

_TIME = [p for p in PATTERNS if p.kind == "time"]
_IGNORED = [p for p in PATTERNS if p.kind == "ignore"]
_SETTINGS = [p for p in _IGNORED if p.name.startswith(("argparse", "settings"))]  # text that holds settings, not events
_COUNTERS = [p for p in PATTERNS if p.kind == "counter"]
_ASSIGN = [p for p in PATTERNS if p.kind == "assign"]


@dataclass
class ParsedLine:
    """What one line says: metrics by tag, its counters, and its time of day/date as found."""

    metrics: dict[str, float]
    step: int | None = None
    epoch: int | None = None
    batch: int | None = None
    time: dict[str, str] | None = None  # the time pattern's groups
    time_kind: str | None = None
    per_epoch: int | None = None  # the total printed against the batch or step (`[100/500]`: 500)


def parse_line(line: str) -> ParsedLine:
    """Parse one line (no line break) with the pattern table; pure, used by the reader and the tests."""
    metrics, counters, time, time_kind, _, _ = _parse(line)
    return ParsedLine(metrics, counters.get("step"), counters.get("epoch"), counters.get("batch"), time, time_kind,
                      counters.get("of"))


# Speed (see benchmarks/bench_ingest_console.py). Running the table costs ~35 us a line, and the
# unmatched-line check ~70 us more; a log of millions of lines repeats a few hundred line shapes. Every
# regex here treats the ten ASCII digits alike (each is \d and \w, none is named), so two lines that
# differ only in their digits match at the same places, take the same branches and blank the same
# spans: only the numbers read from those places differ. So a line is traced once per *template* (the
# line with every ASCII digit made `0`) into a `_Shape` of spans, and the spans are read off each line.
# One pattern does name a digit, METRIC_WORDS's `f1`: lines holding `f1`/`F1` are traced themselves.
# tests/test_console.py checks that no other digit is named, and that reading equals the table applied
# line by line.
_DIGIT_WORDS = ("f1", "F1")
_ZEROS = bytes.maketrans(b"123456789", b"000000000")
_SHAPES_CACHED = 1 << 14


@dataclass(frozen=True)
class _Shape:
    """Where the parts of a line are, as [start, end) spans into the (ANSI-free) line.

    `metrics` lists (key start, key end, value start, value end, key) in the order the passes met them
    (the first of a repeated key wins, as in `dict.setdefault`); `key` is None unless the key runs through
    a span an earlier pass blanked (`'a 10:00:00 b': 1`): then it is that blanked text, not the line's own,
    and the shape is not `exact`: it holds for this line only. A fixed-tag pattern's `key` is its tag. `looks` is LOOKS_LIKE_METRIC on a line that
    gave no metric.
    """

    time_kind: str | None
    time: tuple[tuple[str, int, int], ...]
    counters: tuple[tuple[str, int, int], ...]
    metrics: tuple[tuple[int, int, int, int, str | None], ...]
    looks: bool
    exact: bool
    # Pairs taken only where the line repeats, and only on a record line: one its pairs span at least half of
    # (`B: 5.495 | C: 3.668 | T: 17.647`), not prose that holds a number or two (`Tried to allocate 20.00 MiB
    # (GPU 0; ...)`, `[W reducer.cpp:1300] Warning: ... rank 0`), however often it repeats.
    loose: tuple[tuple[int, int, int, int, str | None], ...] = ()
    patterns: tuple[str, ...] = ()  # names of the patterns that took parts of the line (`phrase` for pass 4)
    prefix: str | None = None  # a split word the line's tags take (`Test: [10/196] ... Loss 0.8`: `Test Loss`)

    @property
    def idle(self) -> bool:
        """A line of this shape changes nothing: no point, no time, no step or epoch, nothing to count."""
        return not (self.metrics or self.time_kind or self.looks or any(c[0] in ("step", "epoch") for c in self.counters))


def _parse(line: str, shape: _Shape | None = None, repeated: bool = False) -> tuple[
        dict[str, float], dict[str, int], dict[str, str] | None, str | None, bool, tuple[str, ...]]:
    """(metrics, counters by name, time groups, time pattern's name, looks like a metric, the patterns that took
    its parts) of one line.

    `shape`, where the caller has it, is the exact shape of `line`'s template (no ANSI escape, no `f1`).
    `repeated`: the line's shape recurs in its file (a record line), so its loose `name value` pairs count
    even without a counter or a metric word, where it holds two pairs or more (`T: 17.6 | B: 3.2`; a
    traceback's lone `line 71` stays out).
    """
    text = line
    if shape is None:
        text = ANSI.sub("", line) if "\x1b" in line else line
        text = _normalise(text)
        if _DIGIT_WORDS[0] in text or _DIGIT_WORDS[1] in text:
            shape = _trace(text)
        else:
            # bytes.translate is ~15x faster than str.translate on non-ASCII text (tqdm bars); UTF-8 keeps
            # ASCII digits as single bytes, so the byte template decodes to the text template.
            shape = _cached_shape(text.encode("utf-8", "surrogatepass").translate(_ZEROS).decode(
                "utf-8", "surrogatepass"))
            if not shape.exact:
                shape = _trace(text)
    metrics: dict[str, float] = {}
    pairs, patterns = shape.metrics, shape.patterns
    if repeated and shape.loose and len(shape.metrics) + len(shape.loose) >= 2:
        pairs, patterns = pairs + shape.loose, patterns + ("repeated_line",)
    for ks, ke, vs, ve, key in pairs:
        tag = text[ks:ke] if key is None else key
        if shape.prefix is not None and not _names_split(tag):
            tag = f"{shape.prefix} {tag}"
        metrics.setdefault(tag, _float(text[vs:ve]))
    metrics = _mirrored_held_out(metrics)
    counters = {name: _count(text[s:e]) for name, s, e in shape.counters}
    time = {name: text[s:e] for name, s, e in shape.time} if shape.time_kind else None
    if metrics:
        looks = False
    elif text is line:
        looks = shape.looks
    else:  # the check reads the line as written, escape codes and all
        looks = _looks_like_metric(line)
    return metrics, counters, time, shape.time_kind, looks, patterns


# A one-letter held-out prefix that mirrors the line's other names (`v_loss 4.03  loss 4.25  v_kl 59.8  kl 22.5`):
# `v_` names the validation pass's copy of each. Two names mirrored at least, so that a reinforcement learner's
# value loss (`v_loss` beside `pi_loss` and `loss`) stays a loss of its own.
def _mirrored_held_out(metrics: dict[str, float]) -> dict[str, float]:
    """`metrics` with each `v_X` that mirrors an `X` on the same line named `val X`, where two or more do."""
    mirrored = {t for t in metrics if t[:2] == "v_" and t[2:] in metrics}
    if len(mirrored) < 2:
        return metrics
    return {(f"val {t[2:]}" if t in mirrored else t): v for t, v in metrics.items()}


def _float(text: str) -> float:
    """A value as NUM reads it; a non-finite one may carry a `.0` (a bar's `nan.0`)."""
    try:
        return float(text)
    except ValueError:
        return float(text[:-2])


def _looks_like_metric(line: str) -> bool:
    """LOOKS_LIKE_METRIC outside the line's time and the spans the table ignores (a settings dump is no unread metric)."""
    for pattern in _TIME:
        match = pattern.regex.search(line)
        if match:
            line = _blank(line, match.span())
            break
    for pattern in _IGNORED:
        for match in list(pattern.regex.finditer(line)):
            line = _blank(line, match.span())
    return LOOKS_LIKE_METRIC.search(line) is not None


# Full-width punctuation of CJK text (`训练次数：100, Loss：1.98`) as its ASCII form, padded to the same bytes so that
# every offset stays the file's.
_HALFWIDTH = {"：": b":  ", "，": b",  ", "＝": b"=  ", "；": b";  "}


def _halfwidth(data: bytes) -> bytes:
    """`data` with full-width colons, commas, equals and semicolons read as ASCII (`_HALFWIDTH`), same length."""
    if b"\xef\xbc" not in data:
        return data
    for wide, narrow in _HALFWIDTH.items():
        data = data.replace(wide.encode(), narrow)
    return data


# Control characters a syslog daemon escaped as `#` and three octal digits (rsyslog's default, and so the logs of
# services that ship stdout through it: SageMaker's CloudWatch streams): `#015` a carriage return, `#033` an escape,
# `#011` a tab. Taken back, right-aligned in blanks so every offset stays the file's (`#015` -> `   \r`), in a text
# that holds two or more of them: a lone `#015` may be an issue number.
_SYSLOG_CONTROL = re.compile(rb"#0(?:15|33|11)(?!\d)")
_SYSLOG_CHAR = {b"#015": b"   \r", b"#033": b"   \x1b", b"#011": b"   \t"}


def _syslog_controls(data: bytes) -> bytes:
    """`data` with syslog's `#ooo` escapes of control characters taken back (`_SYSLOG_CONTROL`), same length."""
    if data.count(b"#0") < 2 or len(_SYSLOG_CONTROL.findall(data, 0, 1 << 20)) < 2:
        return data
    return _SYSLOG_CONTROL.sub(lambda m: _SYSLOG_CHAR[m.group()], data)


# A progress bar's UTF-8 box characters shown through a Windows console's OEM code page (cp437/cp850) and saved
# again as UTF-8 or UTF-16: `━` (e2 94 81) reads `Ôöü`, `█` (e2 96 88) `Ôûê`. Two or more in a row are a bar.
_OEM_BAR = re.compile(rb"(?:(?:\xc3\x94|\xce\x93)\xc3[\xb6\xb2\xbb](?:[\xc2-\xcf][\x80-\xbf]|\xe2[\x80-\x97][\x80-\xbf])){2,}")


def _oem_bar(match: re.Match[bytes]) -> bytes:
    text = match.group().decode("utf-8")
    for page in ("cp850", "cp437"):
        try:
            bar = text.encode(page).decode("utf-8")
        except UnicodeError:
            continue
        if all("\u2500" <= c <= "\u259f" for c in bar):
            raw = bar.encode("utf-8")
            return raw + b" " * (len(match.group()) - len(raw))
    return match.group()


def _oem_bars(data: bytes) -> bytes:
    """`data` with progress bars shown through an OEM code page (`_OEM_BAR`) read as the box characters they were,
    padded with spaces to the same length."""
    if b"\xc3\x94\xc3" not in data and b"\xce\x93\xc3" not in data:
        return data
    return _OEM_BAR.sub(_oem_bar, data)


# A key in typographic quotes (`“loss”：2.29`, as an input method or an issue tracker prints a dict) as Python
# prints it (`"loss":`), padded before to the same bytes; several records printed on one line (`{...}，{...}`, each
# with its own counter) are cut apart: the separator's first byte becomes a `\r`, a line segment's end, as a redrawn
# bar's. Both keep every byte offset the file's.
_CURLY_KEY = re.compile(rb"(?:\xe2\x80[\x98\x99\x9c\x9d])([A-Za-z_][\w./-]*)(?:\xe2\x80[\x98\x99\x9c\x9d])[ \t]*:")
_RECORD_COUNTER = rb"""['"](?:iteration|iter|step|global_step|num_updates|_step|epoch)['"][ \t]*:"""
_NEXT_RECORD = re.compile(rb"\}([ \t]*,[ \t]*|[ \t]+)(?=\{[^{}\r\n]*" + _RECORD_COUNTER + rb")")
# A terminal's cursor moved up a line (`ESC[A`, `ESC[2F`: tqdm's bars over other prints) in the middle of a line:
# what follows is printed on another screen line, another record (a logger's line after an evaluation bar's redraw
# does not take the bar's `Validation:` as its split). Its first byte becomes a `\r`, the rest blanks.
_CURSOR_UP = re.compile(rb"(?<=[^\r\n])\x1b\[\d*[AF]")


def _as_printed(data: bytes) -> bytes:
    """`data` as its printer put it on screen, same length: syslog's escapes taken back, an OEM code page's bar
    characters and full-width punctuation read as ASCII, several records on one line cut apart. The one view of a
    log's bytes that its sniff and its reader both parse."""
    return _records_apart(_halfwidth(_oem_bars(_syslog_controls(data))))


def _records_apart(data: bytes) -> bytes:
    """`data` with typographic quotes around keys made ASCII and several counted records on a line cut apart
    (`_CURLY_KEY`, `_NEXT_RECORD`, `_CURSOR_UP`, `_redraws_apart`), same length."""
    if b"\xe2\x80" in data:
        data = _CURLY_KEY.sub(lambda m: b" " * (len(m.group()) - len(m.group(1)) - 3) + b'"' + m.group(1) + b'":', data)
    if b"}" in data and b"{" in data:
        data = _NEXT_RECORD.sub(lambda m: b"}\r" + m.group(1)[1:], data)
    if b"\x1b" in data:
        data = _CURSOR_UP.sub(lambda m: b"\r" + b" " * (len(m.group()) - 1), data)
    if _TWO_BARS.search(data):
        data = _redraws_apart(data)
    return _flattened_apart(data)


# A log whose line breaks were lost (a web page or a chat that joined its lines with blanks): one long line holds many
# records, each opening as the line opens (`INFO:tensorflow:global step 272: loss = .. INFO:tensorflow:global step
# 273: loss = ..`, glog's `I0621 16:14:39.49 ..` prefix). The line's opening (its words up to the first number, a
# letter among them, and the next `FLATTENED_SHAPE_BYTES` bytes, each number in them any number) found again after a
# blank twice or more marks where each record began: that blank becomes a `\r`, a line segment's end. A line that
# says its opening once or twice is left whole, as is one that opens with a number (a table's row), and names that
# share a numbered prefix (`DS1-loss: .. | DS1-TER: ..`) are one record's: what follows the prefix differs.
_OPENING = re.compile(rb"[ \t]*([^\d\r\n]{1,40}?)\d")
FLATTENED_MIN_BYTES = 120  # a line this long or longer may hold several records
FLATTENED_MIN_AGAIN = 2  # the opening found again this many times: three records or more on the line
FLATTENED_SHAPE_BYTES = 8  # the bytes after the opening's words that each record repeats, numbers aside
# A counter word after a blank (`.. val_acc: 0.8412 Epoch 27/30 - 67s ..`): where a record begins in a line that
# opens mid-record
_COUNTER_OPENING = re.compile(rb"(?<=[ \t])(?i:epoch|step|iteration|iter|batch)[ \t]*\d")


def _flattened_apart(data: bytes) -> bytes:
    out = None
    for line in re.finditer(rb"[^\r\n]+", data):  # `{120,}` would retry at every byte of each shorter line
        if line.end() - line.start() < FLATTENED_MIN_BYTES:
            continue
        text = line.group()
        cuts = _flattened_cuts(text)
        if not cuts:
            continue
        out = out if out is not None else bytearray(data)
        for at in cuts:
            out[line.start() + at] = 13
    return bytes(out) if out is not None else data


def _flattened_cuts(text: bytes) -> list[int]:
    """Where the records of a line whose line breaks were lost begin (the blank before each), [] where it holds one:
    the line's own opening found again (`_OPENING`), else, for an excerpt that opens mid-record (`- 67s - loss: ..
    Epoch 27/30 - 67s - loss: ..`), its first counter word (`_COUNTER_OPENING`) and the bytes after it found again."""
    head = _OPENING.match(text)
    # the opening's words are counted before its shape is matched: most long lines (a bar's redraw, a config dump)
    # say them once, and a pattern built for each such line cost a quarter of a large log's read
    words = head.group(1).lstrip() if head is not None else b""
    if re.search(rb"[A-Za-z]", words) and text.count(words) > FLATTENED_MIN_AGAIN:
        cuts = _again(text, head.start(1), head.end() - 1)
        if len(cuts) >= FLATTENED_MIN_AGAIN:
            return cuts
    counter = _COUNTER_OPENING.search(text)
    if counter is None or text.count(counter.group()[:-1]) <= FLATTENED_MIN_AGAIN:
        return []
    cuts = _again(text, counter.start(), counter.end() - 1)
    return [counter.start() - 1, *cuts] if len(cuts) >= FLATTENED_MIN_AGAIN else []


def _again(text: bytes, start: int, digit: int) -> list[int]:
    """The blanks before each later place where `text[start:]`'s opening (its words up to the number at `digit` and
    `FLATTENED_SHAPE_BYTES` bytes from there, numbers aside) stands again."""
    opening = text[start:digit + FLATTENED_SHAPE_BYTES]
    shape = b"".join(rb"\d+" if part.isdigit() else re.escape(part) for part in re.split(rb"(\d+)", opening) if part)
    return [m.start() for m in re.compile(rb"[ \t]" + shape).finditer(text, digit + 1)]


# A progress bar's redraws pasted without the `\r` between them (`Epoch: 0.0001 - loss: 133.07 - acc: 0.51:   0%| |
# 1/42622.979999Epoch: 0.0002 - loss: 132.77 ...`): each redraw opens with the same words glued to the bar before it
# (its last digit or bracket); the byte before each becomes a `\r` (a bar's last digit: no value of a record).
_TWO_BARS = re.compile(rb"%\|[^\r\n]*%\|")
_GLUED_LEAD = re.compile(rb"(?<=[\d\]])[A-Z][A-Za-z_]*(?: [A-Za-z_]+)?[:=] ")


def _redraws_apart(data: bytes) -> bytes:
    out = bytearray(data)
    for line in re.finditer(rb"[^\r\n]+", data):
        text = line.group()
        if text.count(b"%|") < 2:
            continue
        leads = [m.group() for m in _GLUED_LEAD.finditer(text)]
        lead = max(set(leads), key=leads.count) if leads else None
        if lead is None or leads.count(lead) < 2:
            continue
        for again in _GLUED_LEAD.finditer(text):
            if again.group() == lead:
                out[line.start() + again.start() - 1] = 13
    return bytes(out)


# Values printed as reprs (`tensor(0.4128, device='cuda:0')`, `tensor(8.46, grad_fn=<NegBackward>)`, a one-element
# list `[ 0.4127735]`, `0.41±0.02`, `<1.574>`, `{1.90}`, a count `{1/300}`) read as the value alone; a counter glued to the next name (`idx: 0loss: 8.46`) is
# cut from it. Lines that hold one are parsed on their own (`_candidate_lines`: `_REPR_HINT`, a polars regex).
# not an integer
_FLOAT = r"[-+]?(?:\d*\.\d+(?:[eE][-+]?\d+)?|\d+\.(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|(?i:nan|inf(?:inity)?))"
_REPR = re.compile(rf"{SCALAR_REPR}"  # a tensor's or a NumPy scalar's repr (`ingest.reprs`)
                   rf"|(?P<lpre>[A-Za-z_]\s?[:=]?\s?)\[\s*(?P<l>{_FLOAT})\s*\]|(?P<pm>{NUM})\s*(?:±|\+/?-)\s*{NUM}(?P<pmu>%?)"
                   rf"|<\s*(?P<a>{NUM})\s*>"  # a value in angle brackets (`Loss: <1.574>`, as PL/Python prints it)
                   r"|\{\s*(?P<c>\d+\s*/\s*\d+)\s*\}")  # a count against its total in literal braces (`{1/300}`)
_GLUED = re.compile(r"(?<=\d)(?=[A-Za-z_]{3,}\s*[:=])")
# A value glued to a capitalised word (`loss: 1.3988Batch 8: Invalid loss`, `loss: nanEpoch 2/10`): another print
# with no line break before it. The number is the record's value; the message after it is cut off, since its counters
# (`Batch 8`, `Epoch 2/10`) are not this record's. Not a name's own digits (`resnet50Block`), not a date (`12Nov2023`).
_GLUED_MESSAGE = re.compile(
    r"(?<![\w.])((?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[Nn]a[Nn]|[Ii]nf)[A-Z][a-z]{2,}\b.*$")
_REPR_HINTS = [
    r"[A-Za-z]\s*:?\s*\[\s*[-+]?\.?\d[\d.eE+-]*(?:\s*,\s*|\s+)[-+]?\.?\d",  # a named list
    REPR_HINT, r"\{\s*\d+\s*/\s*\d+\s*\}", "±", r"\+/?-\s*\d", r"<\s*[-+]?\.?\d[\d.eE+-]*\s*>",
    rf"[A-Za-z_]\s?[:=]?\s?\[\s*{_FLOAT}\s*\]",  # a one-element list after a name
    r"\d[A-Za-z_]{3,}\s*[:=]",  # a glued counter
    r"(?:\d|[Nn]a[Nn]|[Ii]nf)[A-Z][a-z]{2}",  # a value glued to the next message
    r"\dm\s*\d+(?:\.\d+)?s\b",  # a duration
    r"[A-Za-z],?\s*[-=~]+>\s*[-+]?\.?\d",  # a legend's values after its arrow
    r"(?:^|[^\d:.,]|[A-Za-z_]:)\d{1,3},\d\d\d",  # thousands, not a stamp's milliseconds (`13:37,195`)
]
_REPR_HINT = "|".join(_REPR_HINTS)
_NEEDS_NORMAL = re.compile(_REPR_HINT)


# A name before a list of values (`TD Error [2354.3, 1952.9]`, a numpy array's `[101.   9.]`, per-group `lr: [0.1,
# 0.01]`): each value is the name's element (`TD Error_0: 2354.3, TD Error_1: 1952.9`). Not a logger's name or level
# (`INFO:root:[1, 50] loss ...`, `INFO     [1, 50]`: its epoch and batch).
_NAMED_LIST = re.compile(rf"(?P<key>(?<![\w.:-])(?!(?:INFO|WARNING|WARN|DEBUG|ERROR|CRITICAL)\b)[A-Za-z][\w.-]*(?: [A-Za-z][\w.-]*)?)\s*:?\s*"
                         rf"\[\s*(?P<items>{NUM}(?:(?:\s*,\s*|\s+){NUM}){{1,7}})\s*,?\s*\]")


# A name, its record's counters in brackets and the legend that names them, then its value (`Loss [1, 100](epoch,
# minibatch):  11.68`): the bracket is the record's epoch and batch, not the name's list (`[1, 100] Loss: 11.68`).
_COUNTER_WORD = r"(?:epoch|ep|iter|iteration|step|batch|mini-?batch)"
_LEGENDED_PAIR = re.compile(rf"(?P<key>(?<![\w.:-])[A-Za-z][\w.-]*)\s*(?P<pair>\[\s*\d+\s*,\s*\d+\s*\])\s*"
                            rf"\(\s*{_COUNTER_WORD}\s*,\s*{_COUNTER_WORD}\s*\)\s*:", re.I)


def _named_list(match: re.Match[str]) -> str:
    key = match.group("key")
    return ", ".join(f"{key}_{i}: {v}" for i, v in enumerate(_LIST_ITEM.findall(match.group("items")))) + ","


# A legend of names, an arrow, then their values in the legend's order (`train, round, loss, acc, auc ===> 003, 0.82,
# 0.39, 0.38,`): each value is its name's (`loss 0.82`); a first name left over is the record's label (its split).
_LEGEND = re.compile(rf"(?P<names>(?<![\w.])[A-Za-z][\w./-]*(?:\s*,\s*[A-Za-z][\w./-]*)+)\s*,?\s*[-=~]+>\s*"
                     rf"(?P<values>{NUM}(?:\s*,\s*{NUM})+)\s*,?")


def _legend(match: re.Match[str]) -> str:
    names = re.split(r"\s*,\s*", match.group("names"))
    values = _LIST_ITEM.findall(match.group("values"))
    label = f"{names.pop(0)}: " if len(names) == len(values) + 1 else ""
    if len(names) != len(values):
        return match.group()
    return label + ", ".join(f"{n} {v}" for n, v in zip(names, values)) + ","


# A duration in hours, minutes and seconds (`9m 2s`, `1h 3m 2.5s`): its seconds (`542s`).
_DURATION = re.compile(r"\b(?:(?P<h>\d+)h\s*)?(?P<m>\d+)m\s*(?P<s>\d+(?:\.\d+)?)s\b")


def _seconds(match: re.Match[str]) -> str:
    total = int(match.group("h") or 0) * 3600 + int(match.group("m")) * 60 + float(match.group("s"))
    return f"{total:g}s"


# A count printed with thousands separators (`iter: 121,400`, `PV:10,434,100`, f"{n:,}"): one number.
_THOUSANDS = re.compile(r"(?<![\w.])(?<!\d:)(?<!\d,)\d{1,3}(?:,\d{3})+(?!\d|,\d|\.\d)")


def _normalise(text: str) -> str:
    if not _NEEDS_NORMAL.search(text):
        return text
    text = _DURATION.sub(_seconds, text)
    text = _THOUSANDS.sub(lambda m: m.group().replace(",", ""), text)
    text = _LEGENDED_PAIR.sub(r"\g<pair> \g<key>:", text)
    text = _NAMED_LIST.sub(_named_list, text)
    text = _LEGEND.sub(_legend, text)
    text = _REPR.sub(_repr_value, text)
    if "[" in text:  # a repr inside a one-element list (`loss[tensor(0.41)]`): the list is read once the repr is
        text = _REPR.sub(_repr_value, text)
    return _GLUED_MESSAGE.sub(r"\1", _GLUED.sub(" ", text))


def _repr_value(m: re.Match[str]) -> str:
    """The value a `_REPR` match stands for, as text (`tensor(0.41, device='cuda:0')` -> `0.41`)."""
    # `loss[2.28]`: the name keeps a space before its value (glued, `loss2.28` would read as a name `loss2.`)
    return repr_number(m) or m.group("a") or m.group("c") \
        or m.group("l") and f"{m.group('lpre').rstrip()} {m.group('l')}" or m.group("pm") + m.group("pmu")


@lru_cache(maxsize=4096)
def _names_split(tag: str) -> bool:
    return any(w in SPLIT_WORDS for w in words(tag))


@lru_cache(maxsize=_SHAPES_CACHED)
def _cached_shape(template: str) -> _Shape:
    return _trace(template)


# A line of `name<sep>value` pairs and nothing else, one separator throughout (a key-value CSV:
# `iteration,1,train_loss,2.31,train_accuracy,0.05`; `loss;0.5;acc;0.9`; a table row of name and value cells,
# `| epoch | 3 | loss | 0.52 |`, after a logger's prefix or not): each name's separator reads as `=`.
_KV_NAME = r"[A-Za-z_][\w./@-]*"
_ALTERNATING = {
    sep: re.compile(rf"^\s*{lead}{name}{gap}{sep}\s*{NUM}(?:\s*{sep}\s*{name}{gap}{sep}\s*{NUM})+\s*{sep}?\s*$")
    for sep, lead, name, gap in ((",", "", _KV_NAME, ""), (";", "", _KV_NAME, ""), ("\t", "", _KV_NAME, ""),
                                 (r"\|", r"(?:[^|]*\|\s*)?", rf"{_KV_NAME}(?: {_KV_NAME}){{0,3}}", r"[ \t]*"))}
_KV_SEP = re.compile(rf"(?<=[\w.@-])(?:[,;\t]|[ \t]*\|)(?=\s*{NUM})")


def _as_assignments(text: str) -> str:
    """`text` with each name's separator made `=` where the line is alternating `name<sep>value` pairs (same length)."""
    if any(pattern.match(text) for pattern in _ALTERNATING.values()):
        return _KV_SEP.sub(lambda m: m.group()[:-1] + "=", text)  # the same length: offsets stay the line's
    return text


def _uncased_letter(c: str) -> bool:
    """A letter of a script without case (Chinese, Japanese, Thai, Arabic, ...): never a Latin name's own letter."""
    return c.isalpha() and not c.isupper() and not c.islower()


def _glued_words(line: str, parts: list) -> list:
    """Keys glued to the letters of a script without case before them (`整体测试集上的Loss: 230`, the whole test set's
    loss): the whole word names the value, not its ASCII end (which would join the training's `Loss`)."""
    out = []
    for ks, ke, vs, ve, key in parts:
        start = ks
        while start > 0 and _uncased_letter(line[start - 1]):
            start -= 1
        out.append((start, ke, vs, ve, key if key is None or start == ks else line[start:ks] + key))
    return out


# A clock printed after a key that names an estimate (`etc:Tue Sep 17 14:40:36 2019`, `ETA: 2024-01-02 10:00:00`,
# `finishes at 14:02`, `remaining: 01:02:03`): when the run expects to end, not when the line was written. The stamp may
# open with a weekday, a month and a day (`Tue Sep 17`).
_ESTIMATE_BEFORE = re.compile(
    r"\b(?i:eta|etc|estimated(?: time)?|finish(?:es|ed)?(?: at)?|end(?:s)? at|remaining|left)\s*[:=]?\s*"
    r"(?:[A-Z][a-z]{2},?\s+){0,2}(?:\d{1,2},?\s+)?$")
_YEAR_AFTER = re.compile(r"\s+\d{4}\b")


# A description's value before tqdm's `: ` and its (blanked) bar (`desc=f"Loss: {loss:.4f}"` prints `Loss: 0.9741:
# 1%|...`): the value ends at the colon. Only a decimal apart from what is before it: `mAP@.5:.95: 100%|` is a header,
# `Epoch 1: 50%|` a counter's.
_DESCRIPTION_END = re.compile(
    r"(?<=\s)([-+]?(?:\d*\.\d+(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|[Nn]a[Nn]|[Ii]nf(?:inity)?)):(?=\s*\x00)")
# A decimal that ends its line with a colon (a format string's `"%s %f:"`, `chamfer_dist 1.6065:`) ends there too:
# nothing follows that the colon could label. `Epoch 3:` (an integer) stays a header's.
_LINE_END_COLON = re.compile(
    r"(?<=\s)([-+]?(?:\d*\.\d+(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|[Nn]a[Nn]|[Ii]nf(?:inity)?)):(?=\s*$)")


def _trace(text: str) -> _Shape:
    """Run the four passes over one ANSI-free line, noting where each part was found."""
    line = text
    text = _as_assignments(text)
    blanked: list[tuple[int, int]] = []
    time: tuple[tuple[str, int, int], ...] = ()
    time_kind = None
    for pattern in _TIME:
        match = None
        for found in pattern.regex.finditer(text):
            estimate = _ESTIMATE_BEFORE.search(text, 0, found.start())
            if estimate:  # a forecast's clock, its date words and year with it: neither the line's time nor values
                year = _YEAR_AFTER.match(text, found.end())
                text = _blank(text, (estimate.start(), year.end() if year else found.end()), blanked)
                continue
            match = found
            break
        if match:
            time = tuple((k, *match.span(k)) for k, v in match.groupdict().items() if v is not None)
            time_kind = pattern.name
            text = _blank(text, match.span(), blanked)
            break
    for pattern in _IGNORED:
        for match in list(pattern.regex.finditer(text)):
            text = _blank(text, match.span(), blanked)
    unignored = text  # what may look like a metric: not a settings dump's names and values
    counters: dict[str, tuple[int, int]] = {}
    metrics: list[tuple[int, int, int, int, str | None]] = []
    exact = True
    prefix: str | None = None
    covered = 0  # characters the pairs span (key to value), for `record`
    taken: list[str] = [time_kind] if time_kind else []  # the patterns this line's parts came from
    for pattern in _COUNTERS:
        for match in pattern.regex.finditer(text):
            groups = match.groupdict()
            found = [name for name in ("step", "epoch", "batch", "of") if groups.get(name) is not None]
            took = [name for name in found if name not in counters]
            if "of" in took and not {"step", "batch"} & set(took):
                took.remove("of")  # a total belongs to the count printed against it, never to another's
            for name in took:
                counters[name] = match.span(name)
            if groups.get("value") is not None:  # a counter printed inside a metric (`Train loss 12001 0.166`)
                covered += match.end() - match.start()
                ks, ke = _stripped(text, *match.span("key"))
                key = text[ks:ke] if any(s < ke and ks < e for s, e in blanked) else None
                exact = exact and key is None
                metrics.append((ks, ke, *match.span("value"), key))
            if groups.get("split") is not None and prefix is None:
                prefix = groups["split"]
            if found:
                taken.append(pattern.name)
                # A second counter of a kind already taken is still a counter, not a metric's text: litgpt's
                # `iter 76 step 38: loss 10.8259` (micro-batch and optimizer step) keeps the first and must
                # not leave `step 38: loss 10.8259` to the phrase pass, which reads no key there.
                text = _blank(text, match.span(), blanked)
            if took:
                break
    bar = "tqdm_bar" in taken or "tqdm_count" in taken
    if bar:  # the `: ` tqdm puts between a description and its bar ends a value, names nothing
        text = _DESCRIPTION_END.sub(lambda m: m.group(1) + " ", text)
    text = _LINE_END_COLON.sub(lambda m: m.group(1) + " ", text)
    for pattern in _ASSIGN:
        if pattern.name == "bare_rate" and bar:
            continue  # a bar's own rate: often a data-loading bar's (`Map: 55%|...| 942.92 examples/s`)
        for match in list(pattern.regex.finditer(text)):
            covered += match.end() - match.start()
            if not taken or taken[-1] != pattern.name:
                taken.append(pattern.name)
            if pattern.tag is not None:  # a fixed tag: the key is the pattern's, never the line's text
                metrics.append((*match.span("value"), *match.span("value"), pattern.tag))
                text = _blank(text, match.span(), blanked)
                continue
            if pattern.tags:  # a message of several values, each under the pattern's name for it
                metrics.extend((*match.span(g), *match.span(g), tag) for g, tag in pattern.tags
                               if match.group(g) is not None)
                text = _blank(text, match.span(), blanked)
                continue
            ks, ke = _stripped(text, *match.span("key"))
            key = text[ks:ke] if any(s < ke and ks < e for s, e in blanked) else None
            exact = exact and key is None
            if key is None and match.groupdict().get("unit"):  # `mem:2100MB`: the unit kept in the tag
                key = _unit_tag(text[ks:ke], match.group("unit"))
                exact = exact and not (key and any(c.isdigit() for c in key))
            metrics.append((ks, ke, *match.span("value"), key))
            text = _blank(text, match.span(), blanked)
    counted = bool(counters)
    # `Scale:  0` is one clause, not two: the wide gap after `:` shrinks to one space. Spans found in the
    # shrunk text are moved back by what was cut before them (keys and values hold no `:` or `=`).
    cuts: list[tuple[int, int]] = []  # (position in the shrunk text from which, characters cut so far)
    cut = 0
    for match in _WIDE_SEPARATOR.finditer(text):
        start, end = match.span()
        kept = len(match.group(1) or "") + 1  # the `:` or `=`, if any, and one space
        since = start - cut + kept  # where the text after this gap begins, in the shrunk text
        cut += end - start - kept
        cuts.append((since, cut))
    shrunk = _WIDE_SEPARATOR.sub(lambda m: (m.group(1) or "") + " ", text)
    loose: list[tuple[int, int, int, int, str | None]] = []
    begin = 0
    for match in [*CLAUSE_SPLIT.finditer(shrunk), None]:
        end = match.start() if match else len(shrunk)
        piece, offset = shrunk[begin:end], begin
        begin = match.end() if match else end
        clause = piece.strip()
        offset += len(piece) - len(piece.lstrip())
        rest = clause.lstrip("-:>#*")
        offset += len(clause) - len(rest)
        rest = rest.rstrip(".")
        clause = rest.strip()
        offset += len(rest) - len(rest.lstrip())
        if not clause or not any(c.isdigit() or c in "nNiI" for c in clause):
            continue
        found = PHRASE.match(clause)
        if found and found.group("lead") and not METRIC_WORDS.search(found.group("key")):
            found = None  # prose before a pair (`INFO the training loss is 0.52`) only before a metric's name
        if found and any(_VALUE_WORD.fullmatch(w) for w in found.group("key").split()):
            found = None  # `loss: nan acc: 0.5`, `loss nan acc 0.5`: the nan is the pair before's value, never a name's
        if not found and ": " in clause:
            # `Train: loss: 0.3`, `GPU /physical_device:GPU:0: current: 0.18`: a label before the pair, ending in a colon
            # (the label is the text before the pair: `_quantity_labelled`).
            for cut in _LABEL_END.finditer(clause):
                found = PHRASE.match(clause[cut.end():])
                if found:
                    clause, offset = clause[cut.end():], offset + cut.end()
                    break
        # `Train Acc 10.144 Train Loss 2.315 mem 2100MB`: a clause of several pairs, read part by part.
        pairs, whole = ([(*_stripped(clause, *found.span("key")), *found.span("value"), found.group("unit") or found.group(
            "unit2"))], True) if found else _pairs(clause)
        for ks, ke, vs, ve, unit in pairs:
            covered += ve - ks
            # A phrase's key never holds blanked text: clauses end at the NUL a blank starts with.
            spans = tuple(_unshrink(offset + p, cuts) for p in (ks, ke, vs, ve))
            key = clause[ks:ke]
            tag = _unit_tag(key, unit)  # `current 0.3 GB`, nanoGPT's `time 1099.34ms`: the unit says what it is
            exact = exact and not (tag and any(c.isdigit() for c in key))  # a template's key holds zeros
            if counted or METRIC_WORDS.search(key) and (whole or _names_quantity(key)):
                metrics.append((*spans, tag))
                if taken[-1:] != ["phrase"]:
                    taken.append("phrase")
            elif whole:  # no counter, no metric's name: pairs only, not prose that holds a number or two
                loose.append((*spans, tag))
    if metrics or loose:
        labelled = _quantity_labelled(line, text, metrics + loose)
        if labelled is not None:
            metrics, loose = labelled, []
            taken.append("quantity_label")
    if (metrics or loose) and _GROUP_LABEL.search(line):
        metrics, loose = _grouped(line, metrics), _grouped(line, loose)
        exact = exact and not any(key is not None and any(c.isdigit() for c in key) for *_, key in metrics + loose)
    if (metrics or loose) and _SPLIT_GROUP.search(line):
        metrics, loose = _split_grouped(line, metrics), _split_grouped(line, loose)
        exact = exact and not any(key is not None and any(c.isdigit() for c in key) for *_, key in metrics + loose)
    if (metrics or loose) and not line.isascii():
        metrics, loose = _glued_words(line, metrics), _glued_words(line, loose)
    looks = not metrics and LOOKS_LIKE_METRIC.search(unignored) is not None
    record = 2 * covered >= sum(not c.isspace() for c in line)
    if prefix is None and (metrics or loose):
        prefix = _line_split(unignored)
    if prefix is None and len(metrics) > 1:
        prefix = _first_name_split(line, metrics)
    return _Shape(time_kind, time, tuple((k, *span) for k, span in counters.items()), tuple(metrics), looks, exact,
                  tuple(loose) if record else (), tuple(taken), prefix)


# What stands before a log line's message: blanked stamps and levels, punctuation, bracketed fields (`[train]`,
# `[\x00   ]`), a logger's name glued to a colon (`INFO:root:`) or before ` - ` and a blanked level, and a stamp the
# reader did not blank (`2023.01.18 17:14:14`: digits and a date's or clock's punctuation only).
# A held-out split's word in another language (`Validación - Pérdida: 0.41`) too (`ingest.languages`).
_HELD_OUT = "(?i:" + "|".join(sorted((w for w, s in SPLIT_WORDS.items() if s != "train"), key=len, reverse=True)) + "|" \
    + languages.alternatives(w for w, e in languages.WORDS.items() if e in ("val", "test")) + ")"
_MESSAGE_LEAD = re.compile(
    rf"(?:[\s\x00>*#|:=~.,-]+|\[[^\]\n]*\]|(?!{_HELD_OUT}:)[A-Za-z_][\w.]*:(?=[A-Za-z_])|[\w.]+\s+-\s+(?=\x00)"
    rf"|\d[\d.:/-]*[.:/-]\d+(?=\s))*")
_SPLIT_WORD_FIRST = re.compile(rf"{_HELD_OUT}(?=[\s|:(\[,.]|$)")
_BRACKETED_SPLIT = re.compile(rf"\[\s*({_HELD_OUT})\s*\]")
# a field of its own between bars (`Epoch 0 | Validation | Elapsed ...`), a label: no value after it (`loss|0.3|val|0.2`
# names a value `val`)
_PIPED_SPLIT = re.compile(rf"\|\s*({_HELD_OUT})\s*\|(?!\s*[-+.\d])")


def _line_split(text: str) -> str | None:
    """The held-out split a line's message begins with (`Valid | Epoch 1 | Loss 0.22`, `validation(4992) loss=3.8`,
    `INFO:root:Validation loss: 0.3`, `validating ... loss: 0.07`), or that a bracketed field before it is
    (`[valid] loss 0.3`), or that stands as a field of its own between bars (Mozilla DeepSpeech's `Epoch 0 |
    Validation | Elapsed Time: 0:00:11 | Steps: 31 | Loss: 12.449680`): every value on the line is that split's. A
    split word inside a name (`val_acc` on a Keras training line) or later in the line names its own value only.
    None for any other line."""
    lead = _MESSAGE_LEAD.match(text)
    first = _SPLIT_WORD_FIRST.match(text, lead.end())
    if first is not None:
        return first.group()
    bracketed = _BRACKETED_SPLIT.search(text, 0, lead.end()) or _PIPED_SPLIT.search(text)
    return bracketed.group(1) if bracketed else None


def _first_name_split(line: str, metrics: list[tuple[int, int, int, int, str | None]]) -> str | None:
    """The held-out split a record's first name begins with as a word of its own, where names after it say no split
    (`Epoch: [12/30], test accuracy: 0.67, loss: 0.49`: the test pass's loss): its bare names are that split's
    values. None where a name says train, where the first name is bare (a Keras line's `loss ... val_loss`) or an
    identifier (`val_loss: 0.3, loss: 0.2`: each names its own), or where a bare name would take a quantity a
    held-out name on the line already has."""
    keys = [key if key is not None else line[ks:ke] for ks, ke, _, _, key in sorted(metrics)]
    head = keys[0].split()
    split = SPLIT_WORDS.get(head[0].lower()) if len(head) > 1 else None
    if split in (None, "train") or any(SPLIT_WORDS.get(w) == "train" for k in keys for w in words(k)):
        return None
    bare = [k for k in keys[1:] if not _names_split(k)]
    held = {role_of(k).role for k in keys if _names_split(k)}
    if not bare or any(role_of(f"{head[0]} {k}").role in held for k in bare):
        return None
    return head[0]


# A group of values under a label that names them losses (`[Losses: x 0.27, y 0.25, total 15.1, recall: 0.1]`,
# spaCy's `Losses {'ner': 172.9}`): each value in it whose name says nothing of its own is that loss's part
# (`Losses x`, `Losses ner`); one that names a quantity (`recall`, `precision`, `acc`) keeps its name.
_GROUP_LABEL = re.compile(r"\b(?P<label>[A-Za-z_]*?(?:[Ll]oss(?:es)?|LOSS(?:ES)?))\s*(?::\s*(?!(?i:nan|inf))(?=[A-Za-z'\"\[{(])|(?=[\[{(]))")
_GROUP_END = re.compile(r"[\]})]|$")
_OWN_NAMES = re.compile(r"(?i)recall|precision|acc|f1|map|ap\b|iou|lr|time|speed|eta|mem")


# Values listed under a label that names their quantity (`Memory info of GPU /physical_device:GPU:0: current: 0.18, peak:
# 2.55`, `GPU memory: allocated: 1.2, reserved: 3.4`): each value whose own name says nothing (`current`, `peak`,
# `available`) is that quantity's (`Memory info of GPU current`), and counts without a counter or a metric word. The
# label is the text before the line's first pair, ending in a colon; its words are kept, a device's path or index
# (`/physical_device:GPU:0`, `cuda:0`) and counters (blanked by then) dropped. Memory only: the quantity a label
# names over values that say nothing of themselves in the logs met.
_LABEL_WORD = re.compile(r"[A-Za-z][A-Za-z_-]*")
MAX_LABEL_WORDS = 6


def _quantity_labelled(line: str, text: str, parts: list[tuple[int, int, int, int, str | None]]) -> list[
        tuple[int, int, int, int, str | None]] | None:
    head = text[:min(ks for ks, *_ in parts)].rsplit("\x00", 1)[-1].rstrip()
    if not head.endswith(":"):
        return None
    kept = [w for w in (t.rstrip(":") for t in head.split()) if _LABEL_WORD.fullmatch(w)]
    if not kept or len(kept) > MAX_LABEL_WORDS:
        return None
    label = " ".join(kept)
    if role_of(label).role != "memory":
        return None
    out = []
    for ks, ke, vs, ve, key in sorted(parts):
        name = line[ks:ke]
        if role_of(name).role == "other" and not any(c.isdigit() for c in name):
            key = f"{label} {name}"
        out.append((ks, ke, vs, ve, key))
    return out


def _grouped(line: str, parts: list[tuple[int, int, int, int, str | None]]) -> list[tuple[int, int, int, int, str | None]]:
    groups = []
    for match in _GROUP_LABEL.finditer(line):
        opened = line[match.end():match.end() + 1] in "[{("
        end = _GROUP_END.search(line, match.end() + (1 if opened else 0))
        groups.append((match.group("label"), match.end(), end.start() if end else len(line)))
    out = []
    for ks, ke, vs, ve, key in parts:
        name = line[ks:ke] if key is None else key
        label = next((g for g, start, end in groups if start <= ks and ve <= end), None)
        if label is not None and role_of(name).role == "other" and not _OWN_NAMES.search(name):
            key = f"{label} {name}"
        out.append((ks, ke, vs, ve, key))
    return out


# A dict of values under a name that begins with a held-out split (`val_metrics={"loss": 1.2, "mae": 3.4}`,
# `eval_results: {...}`): each value in it is that split's (`val loss`), never the training's of the same name.
_SPLIT_GROUP = re.compile(rf"(?<![\w.])(?P<split>{_HELD_OUT})_[A-Za-z]\w*\s*[:=]\s*(?=\{{)")


def _split_grouped(line: str, parts: list[tuple[int, int, int, int, str | None]]) -> list[
        tuple[int, int, int, int, str | None]]:
    groups = [(m.group("split"), m.end(), line.find("}", m.end())) for m in _SPLIT_GROUP.finditer(line)]
    out = []
    for ks, ke, vs, ve, key in parts:
        name = line[ks:ke] if key is None else key
        split = next((g for g, start, end in groups if start <= ks and ve <= end), None)
        if split is not None and not _names_split(name):
            key = f"{split} {name}"
        out.append((ks, ke, vs, ve, key))
    return out


def _stripped(text: str, start: int, end: int) -> tuple[int, int]:
    """The span of `text[start:end].strip()`."""
    part = text[start:end]
    kept = part.strip()
    lead = len(part) - len(part.lstrip()) if kept else 0
    return start + lead, start + lead + len(kept)


def _unshrink(position: int, cuts: list[tuple[int, int]]) -> int:
    moved = 0
    for since, cut in cuts:
        if position < since:
            break
        moved = cut
    return position + moved


def _blank(text: str, span: tuple[int, int], blanked: list[tuple[int, int]] | None = None) -> str:
    # A NUL keeps clause boundaries where a pattern was taken out (it is a clause separator).
    if blanked is not None:
        blanked.append(span)
    return text[: span[0]] + "\x00" + " " * (span[1] - span[0] - 1) + text[span[1] :]


# ------------------------------------------------------------------------------------------- reader


def read_console(path: Path, start: int = 0) -> Iterator[Chunk]:
    """Points from byte `start` on, one chunk per ~8 MiB of complete lines."""
    with path.open("rb") as f:
        if _is_csv(f.read(4096)):
            # a CSV under a log's name (Keras's own example: `CSVLogger('training.log')`): the CSV reader's
            from ingest.tabular import read_csv

            yield from read_csv(path, start)
            return
        f.seek(0)
        head = f.read(4096)
        order = utf16_order(head)
        if order is not None:
            yield from _read_utf16(path, start, order)
            return
        legacy = legacy_encoding(head)
        if legacy is not None:
            yield from _read_legacy(path, start, legacy)
            return
        why = binary_reason(head) if start == 0 else None
        if why is not None and not _prints_metrics(path):
            # Nothing is consumed: a log whose first bytes only looked binary (a short head, a multi-byte
            # character cut by the flush) is judged again from its start once it grows, never read from mid-line.
            yield Chunk(end=0, issues=[Issue(0, "not_this_format",
                                             f"{path.name} holds binary data, not a text log ({why}); skipped")])
            return
        state = _State.resume(f, start)
        state.start = start
        state.stem_tag, state.held_stem, state.file_name = stem_tag(path), _held_stem(path), path.name
        idle = _idle(path)
        f.seek(start)
        offset = start
        pending = b""
        while True:
            block = f.read(CHUNK_BYTES)
            data = pending + block
            cut = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
            if cut == 0 and block:
                pending = data
                continue
            unended = 0
            if not block and idle and cut < len(data) and not _is_binary(data[cut:]):
                # the last print of a finished run, never ended by a line break: read it now
                data, cut, unended = data + b"\n", len(data) + 1, 1
            complete, pending = data[:cut], data[cut:]
            if complete:
                # the file's last line is in this chunk: a finished file read to its end
                ends = idle and not pending and (not block or len(block) < CHUNK_BYTES)
                frame = with_loss_sums(state.parse(complete, offset, file_end=ends))
                offset += len(complete) - unended
                last = not block
                plan = planned(complete)  # the length the run declares, for the schedule's detector
                yield Chunk(end=offset, scalars=frame, texts=state.said_frame(),
                            issues=state.issues(path.name) if last else [],
                            configs={PLAN_CONFIG: plan} if plan else {})
                if last:
                    return
            if not block:
                yield Chunk(end=offset, issues=state.issues(path.name))
                return


def _prints_metrics(path: Path) -> bool:
    """Whether lines sampled across a file whose head looks binary carry metrics (a log a crash wrote junk into): such
    a file is read, and its junk gives nothing."""
    data = b"\n".join(line for line in sample(path).splitlines() if binary_reason(line) is None)
    return prints_a_loss(data) or sniff_console(data)


def _read_utf16(path: Path, start: int, order: str) -> Iterator[Chunk]:
    """A UTF-16 log (`utf16_order`): its complete lines from byte `start` decoded and read as the UTF-8 ones are, each
    record's position mapped back to its byte offset in the file (so a later ingest resumes where this one ended)."""
    raw = path.read_bytes()
    begin = max(start, 2 if raw[:2] in (b"\xff\xfe", b"\xfe\xff") else 0)
    units = raw[begin: len(raw) - (len(raw) - begin) % 2]

    def offsets(done: str, data: bytes) -> tuple[np.ndarray, int]:
        # UTF-8 byte -> UTF-16 code units before it (a character of 4 UTF-8 bytes is two units)
        codes = np.frombuffer(data, np.uint8)
        width = np.where((codes & 0xC0) == 0x80, 0, np.where(codes >= 0xF0, 2, 1))
        return begin + 2 * np.concatenate(([0], np.cumsum(width))), begin + len(done.encode(order))

    prefix = as_utf8(raw[:begin]) if begin > 2 else b""
    yield _read_decoded(path, start, prefix, units.decode(order, errors="replace"), offsets)


def _read_legacy(path: Path, start: int, codec: str) -> Iterator[Chunk]:
    """A log in a legacy encoding (`legacy_encoding`: a Chinese Windows console's GBK): its complete lines from byte
    `start` decoded and read as the UTF-8 ones are (its names too: `当前损失值：10.11`), each record's position mapped
    back to its byte offset in the file."""

    def offsets(done: str, data: bytes) -> tuple[np.ndarray, int]:
        return start + legacy_offsets(done, data, codec), start + len(done.encode(codec, errors="replace"))

    yield _read_decoded(path, start, b"", path.read_bytes()[start:].decode(codec, errors="replace"), offsets)


def legacy_offsets(done: str, data: bytes, codec: str) -> np.ndarray:
    """For each byte of `data` (`done` in UTF-8, perhaps with a line break added) and its end, the bytes `done` takes
    before it in `codec`: ASCII is one byte in both, another character its own width in `codec` (counted once per
    distinct character, so a long log costs numpy passes, not a Python step per character)."""
    points = np.frombuffer(done.encode("utf-32-le"), "<u4")
    utf8_width = 1 + (points >= 0x80) + (points >= 0x800) + (points >= 0x10000)
    width = np.ones(points.size, np.int64)
    wide = points >= 0x80
    if wide.any():
        seen = np.zeros(int(points.max()) + 1, bool)
        seen[points[wide]] = True
        table = np.ones(seen.size, np.int64)
        distinct = np.flatnonzero(seen)
        table[distinct] = [len(chr(c).encode(codec, errors="replace")) for c in distinct.tolist()]
        width[wide] = table[points[wide]]
    grow = np.ones(len(data), np.int64)  # a byte past `done` (the line break added after an unended last line) is one
    if points.size:
        grow[: int(utf8_width.sum())] = 0
        grow[np.concatenate(([0], np.cumsum(utf8_width)[:-1])).astype(np.int64)] = width
    return np.concatenate(([0], np.cumsum(grow)))


def _read_decoded(path: Path, start: int, prefix: bytes, text: str, offsets) -> Chunk:
    """The complete lines of `text` (a file's bytes from `start`, decoded; a finished run's last print unended too)
    read as UTF-8 lines are, after the UTF-8 `prefix` of what came before; `offsets(done, data)` gives each UTF-8
    byte's offset in the file and the end of what was read, so the records keep the file's positions."""
    import io

    cut = max(text.rfind("\n"), text.rfind("\r")) + 1
    if cut < len(text) and _idle(path):
        cut = len(text)  # a finished run's last print, never ended by a line break
    done = text[:cut]
    data = done.encode("utf-8")
    if data and not data.endswith((b"\n", b"\r")):
        data += b"\n"
    state = _State.resume(io.BytesIO(prefix), len(prefix))
    state.start, state.stem_tag, state.held_stem = start, stem_tag(path), _held_stem(path)
    state.file_name = path.name
    frame = state.parse(data, 0, file_end=_idle(path)) if data else None
    said = state.said_frame()
    at, end = offsets(done, data)
    if frame is not None and frame.height:
        frame = with_loss_sums(frame.with_columns(pl.Series(at[frame["position"].to_numpy()]).alias("position")))
    if said is not None:
        said = said.with_columns(pl.Series(at[said["position"].to_numpy()]).alias("position"))
    return Chunk(end=end, scalars=frame, texts=said, issues=state.issues(path.name))


_CSV_NAME = re.compile(r"^\s*[A-Za-z_][\w ./@%()\[\]-]*\s*$")
_CSV_VALUE = re.compile(rf"^\s*(?:{NUM}|NA|)\s*$")  # NA: Keras' CSVLogger for a key not logged that epoch


def _is_csv(head: bytes) -> bool:
    """A header of two or more names apart by commas, then rows of values (numbers or empty), the first as many as
    the names, later ones perhaps more (Keras' CSVLogger appending a fit that logs more metrics)."""
    lines = head.decode("utf-8", errors="replace").splitlines()[:-1] if b"\n" in head or b"\r" in head else []
    lines = [line for line in lines if line.strip()]
    if len(lines) < 2:
        return False
    names = lines[0].split(",")
    if len(names) < 2 or not all(_CSV_NAME.match(n) for n in names):
        return False
    widths = [len(row.split(",")) for row in lines[1:]]
    return widths[0] == len(names) and min(widths) >= len(names) and all(
        _CSV_VALUE.match(v) for row in lines[1:] for v in row.split(","))


IDLE_SECONDS = 60.0  # a log unchanged this long is finished: its last line, even without a line break, is read


def _idle(path: Path) -> bool:
    import time

    try:
        return time.time() - path.stat().st_mtime > IDLE_SECONDS
    except OSError:
        return False


def _held_stem(path: Path) -> str | None:
    """The held-out split a file's name names (`validation_log.txt`: `validation`), else None."""
    return next((w for w in words(path.name.split(".")[0]) if SPLIT_WORDS.get(w) in ("val", "test")), None)


def _is_binary(head: bytes) -> bool:
    return binary_reason(head) is not None


# A line can yield something (a point, a step or date later lines use, an unmatched-line count) only if
# `_CANDIDATE` or both `_METRIC_WORD` and `_NUMBER` find something in it: a superset of what the table
# reads, written for polars' (Rust) regex engine. Rust's \d and \s are Unicode like Python's, except that
# Python's \s also takes \x1c-\x1f (added) and Python's re.I also folds \u0130 and \u0131 onto `i`
# (lines holding them, \u017f or \u212a are kept, as are lines with ANSI escapes: those are taken out
# before the table runs). Each part names the patterns it stands for.
_NUMBER_START = r"[-+]{0,2}[\d.nNiI]"  # where NUM can begin (a sign, a digit, `.5`, nan, inf)
_GAP = r"[\s\x1c-\x1f]*"
_CANDIDATE = "|".join([
    # every counter pattern that can stand without a metric word (a counter also lets loose phrases count)
    r"(?i:step|iter|epoch|batch|idx|index|it\s*[:=]?\s*\d)|\[\s*\d+,\s*\d+\]|Train:\s*\d",
    rf"{_EPOCH_WORDS}|^[\s\x1c-\x1f]*{_STEP_WORDS}",  # the counters of other languages (`ingest.languages`)
    BAR_OPENS,
    r"[(\[]\s*\d+\s*/",  # fraction_first, bracket_fractions
    r"\d\d:\d\d:\d\d",  # every time pattern
    rf"[\d.nNfF]\s?(?:{RATE_UNITS})",  # bare_rate (a number ends in a digit, `.`, nan or inf)
    rf"={_GAP}{_NUMBER_START}",  # key_equals_value (and `key = value` phrases)
    rf"[A-Za-z_]:{_NUMBER_START}",  # key_colon_value
    rf"['\"\x{{2018}}\x{{2019}}\x{{201c}}\x{{201d}}]{_GAP}:{_GAP}{_NUMBER_START}",  # dict_item
    r"[\x1b\x{130}\x{131}\x{17f}\x{212a}]",
    r"^[\s\x1c-\x1f]*\d+:?[\s\x1c-\x1f]+[A-Za-z]",  # leading_counter
    rf"^[\s\x1c-\x1f]*[A-Za-z_][\w./@-]*[,;\t|]{_GAP}{_NUMBER_START}",  # a key-value CSV (`_as_assignments`)
    rf"^\s*\|\s*[A-Za-z][\w./ -]*?\s*\|{_GAP}{_NUMBER_START}",  # a box table's row (`pipe_row`), whatever its key
])
# METRIC_WORDS (for phrases on counter-less lines, and LOOKS_LIKE_METRIC, which both need a number too).
# Its `lr\b` may stand before a phrase's value (`lr5`, `lrnan`: the key is `lr`), so any next character
# but a letter or `_` is let through, and n, N, i, I, and `_` before a digit (`lr_0`, an optimizer's index). `mem`:
# values under a label naming memory (`_quantity_labelled`).
_METRIC_WORD = (r"(?i:loss|acc|learning|grad|norm|ppl|perplexity|wer|bleu|f1|auc|mse|mae|psnr|reward|entropy"
                r"|cost|objective|nll|xent|energy|logprob|mem)"
                rf"|{languages.METRIC_WORDS}"  # other languages' (`ingest.languages`)
                r"|(?i:lr|kl)(?:[^A-Za-z_]|$|[nNiI])|(?i:lr)_\d")
_NUMBER = r"\d|(?i:nan|inf)"
# Lines of tables and bare values (`_State.table_row`, `note_header`, `_bare_values`), which need no key of their
# own: two or more values or names apart by tabs, runs of spaces or `|` at the line's end, a line that is one value
# (`0.693`, `12: 0.693`), or a list of values (`[0.33, 0.13]`).
_VALUE_TEXT = r"(?:\d+(?::\d\d)+|[-+]?(?:\d[\d.]*|\.\d+)(?:[eE][-+]?\d+)?(?:/\d+)?[A-Za-z%]{0,3}|N/?A|(?i:nan|inf))"
_NAME_TEXT_RS = r"(?:[A-Za-z]|\d+[A-Za-z]+[_ -][A-Za-z])[\w./@%()\[\]:-]*(?: (?:/ )?(?:[A-Za-z]|\([A-Za-z])[\w./@%()\[\]:-]*){0,3}"
# An epoch's elapsed time after a row typed with single blanks (fastai v1's `(00:13)`: `_SPACED_ROW`)
_ELAPSED_CELL = r" \(?\d{1,3}:\d\d(?::\d\d)?\)?"
_TABLE_LINE = "|".join([
    rf"{_VALUE_TEXT}(?:(?:\t+|\s{{2,}}|\s*\|\s*){_VALUE_TEXT})+[\s|]*(?::?\s*\d*{BAR_OPENS}.*)?"
    r"(?:#[^\d#]\D*|(?:\t|\s\s|\|)\s*\**[A-Za-z]\D*)?\s*$",  # a bar may follow, a comment (`_ROW_COMMENT`), a note
    rf"^[^\t|]*?{_NAME_TEXT_RS}(?:(?:\t+|\s{{2,}}|\s*\|\s*){_NAME_TEXT_RS})+[\s|]*$",
    r"^\s*(?:\d+\s*[:,]\s*)?(?:[-+]?(?:\d[\d.]*|\.\d+)(?:[eE][-+]?\d+)?|(?i:[-+]?(?:nan|inf(?:inity)?)))\s*$",
    r"^\s*\[\s*[-+]?\.?\d",
    # a row whose cells hold lists of values (`0  [1.18e-02, 1.29e-02]  [1.2e-02, 1.3e-02]  []`: `_CELL_LIST`)
    rf"^\s*{_VALUE_TEXT}(?:(?:\t+|\s{{2,}})(?:{_VALUE_TEXT}|\[[-+\d.eE,\s]*\]))*(?:\t+|\s{{2,}})\[[-+\d.eE,\s]*\]",
    # a row of numbers apart by commas or single spaces (`0, 44.74,50.90`; `_State.counted_values`)
    r"^\s*[-+]?[\d.]+(?:[eE][-+]?\d+)?(?:(?:\s*,\s*|\s+)(?:[-+]?[\d.]+(?:[eE][-+]?\d+)?|(?i:nan|inf))){1,7}\s*,?"
    rf"(?:{_ELAPSED_CELL})?\s*$",
    # a model card's row whose training loss the trainer left unlogged (`No log 1.0 20 3.4065`: `_spaced_header`)
    r"^\s*No log(?: [-+]?[\d.]+(?:[eE][-+]?\d+)?)+\s*$",
])
# Caffe's per-output line under its `Iteration N, loss = X` line: that iteration's detail even where it names the
# iteration line's own tag (a net whose loss layer is called `loss`: the raw loss beside the smoothed one).
_NET_OUTPUT = re.compile(r"\bnet output #\d+:")
# A `name value` pair (`T: 17.6`, `B 3.2`) for the repeated-line rule; lines without one never repeat.
_PAIR = r"[A-Za-z][\w%)\]]*\s*[:=]?\s*[-+]?\.?\d"
_NOT_LETTERS = re.compile(r"[^A-Za-z]+")
_NONFINITE_WORD = r"(?i)\b(?:nan|inf(?:inity)?)\b"  # a value word an outline leaves out with the digits
REPEATS = 3  # a line shape seen this often in a file is a record line (see `_candidate_lines`)
RECENT_RECORDS = 16  # records a copy by another rank is looked for among (`_State.copied_record`)
HEADER_LINES = 5  # lines of other output between a launch's last record and the next launch's first `Epoch 1` line
# A record that prints the file's first epoch again right after one at that epoch, in a file whose epoch counter ran
# past it before, begins a launch when the clock moved on this many times the median interval between the file's
# records before it (a launch of one record, then the next one hours or days later); per-iteration lines, ranks
# and progress bars print one epoch many times seconds apart. RECENT_GAPS: the intervals that median is taken over.
RELAUNCH_GAP = 100.0
RECENT_GAPS = 256
MAX_OUTLINES = 4096  # repeated outlines remembered per file (a bound on memory, not on reading)


def outline(text: str) -> str:
    """A line's outline: its ASCII letters alone (`B: 5.495 | C: 3.668 | T: 17.647` -> `BCT`), so record lines
    whose numbers differ in width or padding share one (one cheap polars pass per chunk)."""
    return _NOT_LETTERS.sub("", text)


def _line_strings(data: bytes, ends: np.ndarray) -> pl.Series:
    """One string per line segment of `data` (each ending at `ends`), line break included (no pattern can use it),
    without copying the bytes. Bytes that are not UTF-8 are replaced: UTF-8 decoding recovers at every ASCII byte,
    so decoding the block at once gives each line the text it would get alone, and `\r`, `\n` stay where they
    were: the n-th segment stays the n-th."""
    import pyarrow as pa

    try:
        data.decode("utf-8")
        text, bounds = data, ends
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace").encode("utf-8")
        bounds = _segments(text)[2]
    offsets = np.concatenate(([0], bounds)).astype(np.int64)
    return pl.Series(pa.LargeStringArray.from_buffers(len(bounds), pa.py_buffer(offsets), pa.py_buffer(text)))


MIN_TERMINAL_WIDTH = 60  # narrower than any terminal a log is copied from
# A line that begins with a metric's name, a split or a counter is a line of its own (`val loss 0.4` after a line that
# ends in a unit), not the rest of a word a terminal cut.
_OWN_LINE_START = rf"^(?:(?i:{METRIC_WORDS.pattern})|(?i:train|val|valid|test|eval|epoch|step|iter|batch)\b)"


def _unwrapped(lines: pl.Series) -> pl.Series:
    """`lines` with each line a terminal wrapped at its width joined again (`... Attempted loss sc` + `ale: 4096.0`):
    the wrapped line has the file's greatest width, ends inside a word and is followed by one that starts inside it (a
    lower-case letter, not a metric's name: `_OWN_LINE_START`), and at least half the lines of that width are so
    followed (a file copied from a terminal); the continuation is left empty, so every line keeps its number and
    offset."""
    text = lines.str.strip_chars_end("\r\n")
    width = text.str.len_chars().to_numpy()
    if width.size < 2 or width.max() < MIN_TERMINAL_WIDTH:
        return lines
    full = np.flatnonzero(width[:-1] == width.max())
    if full.size < 2:
        return lines
    ends_word = text.gather(full).str.contains(r"(?:^|[^\dA-Za-z])[A-Za-z]+$").to_numpy()  # not a unit (`12.3s`)
    goes_on = (text.gather(full + 1).str.contains(r"^[a-z]")
               & ~text.gather(full + 1).str.contains(_OWN_LINE_START)).to_numpy()
    newline = lines.gather(full).str.ends_with("\n").to_numpy()
    cut = full[ends_word & goes_on & newline]
    if 2 * cut.size < full.size:
        return lines
    out = lines.to_list()
    for k in reversed(cut.tolist()):
        out[k], out[k + 1] = out[k].rstrip("\r\n") + out[k + 1], ""
    return pl.Series(out, dtype=pl.Utf8)


def _candidate_lines(data: bytes, known: dict[str, int] | None = None, numbered: bool = False) -> tuple[
        np.ndarray, np.ndarray, np.ndarray, list[str], list[_Shape | None], list[bool]]:
    """Cut `data` (complete lines) into line segments and pick those that can change anything.

    Returns every segment's start (byte offset in `data`) and its count of `\\n` before it, the indices
    of the picked segments, their text (decoded with replacement, line break removed), their shape
    where it is known (None: `_parse` works it out) and whether each repeats. Picked: what the pre-filter
    keeps, less the lines whose template's shape is idle (a tqdm bar with no postfix, a stamped line
    without metrics is not), plus the repeated lines that hold `name value` pairs.

    A line that holds a `name value` pair (`_PAIR`) repeats when its `outline` is seen `REPEATS` times or more
    in `data` and earlier in the file: `known` counts the outlines seen before `data` and is updated. With `numbered`
    (a file of unnamed values, `_State.unnamed_rows`), every line that holds a digit, nan or inf is picked too.
    """
    starts, line_nos, ends = _segments(data)
    lines = _unwrapped(_line_strings(data, ends))
    blocky = lines.str.contains(_SPLIT_HINT)  # openers and ends of evaluation blocks (`_State.eval_blocks`)
    keep = lines.str.contains(_CANDIDATE) | (lines.str.contains(_METRIC_WORD) & lines.str.contains(_NUMBER)) | blocky
    tabular_lines = lines.str.contains(_TABLE_LINE)
    if numbered:
        tabular_lines = tabular_lines | lines.str.contains(_NUMBER)
    keep = keep | tabular_lines
    tabular = tabular_lines.to_numpy()
    paired = lines.str.contains(_PAIR)
    # a value printed as nan or inf is a number, not a word: a record's outline stays one when its loss turns nan
    outlines = lines.filter(paired).str.replace_all(_NONFINITE_WORD, "").str.replace_all(_NOT_LETTERS.pattern, "")
    known = {} if known is None else known
    for name, n in outlines.value_counts().iter_rows():
        if name in known or len(known) < MAX_OUTLINES:
            known[name] = known.get(name, 0) + n
    recurring = [name for name, n in known.items() if n >= REPEATS]
    repeated = paired.to_numpy().copy()
    repeated[repeated] = outlines.is_in(pl.Series(recurring, dtype=pl.Utf8).implode()).to_numpy()
    candidates = np.flatnonzero(keep.to_numpy() | repeated)
    picked = lines.gather(candidates).str.strip_chars_end("\r\n")
    rep = repeated[candidates]
    # Templates, as `_parse` makes them, in bulk; each new one is traced once (lines with ANSI escapes
    # or `f1` are left to `_parse`).
    # (each alternative of the hint on its own: polars' engine runs their union several times slower)
    own = picked.str.contains(r"\x1b|f1|F1")
    for hint in _REPR_HINTS:
        own = own | picked.str.contains(hint)
    own = own.to_numpy()
    templates = picked.str.replace_all("[1-9]", "0")
    shapes = {t: _cached_shape(t) for t in templates.filter(~own).unique().to_list()}
    busy = [t for t, shape in shapes.items() if not shape.idle]
    loose = [t for t, shape in shapes.items() if shape.loose]
    keep = own | tabular[candidates] | blocky.to_numpy()[candidates] | templates.is_in(pl.Series(busy, dtype=pl.Utf8).implode()).to_numpy() \
        | (rep & templates.is_in(pl.Series(loose, dtype=pl.Utf8).implode()).to_numpy())
    candidates = candidates[keep]
    shown = [None if o or not shapes[t].exact else shapes[t]
             for o, t in zip(own[keep].tolist(), templates.filter(keep).to_list())]
    return starts, line_nos, candidates, picked.filter(keep).to_list(), shown, rep[keep].tolist()


def _announcing(data: bytes, starts: np.ndarray) -> dict[int, tuple[str, announcements.Said]]:
    """{index of the line segment in `data`: (its text, what it announces)} for the lines that announce an event in
    words (`ingest.announcements`): one polars pass of its phrases over every line, then each line it keeps read
    with a settings dump's text blanked first (the `ignore` patterns that hold settings), so a dump announces nothing."""
    lines = _line_strings(data, np.append(starts[1:], len(data)).astype(np.int64))
    hits = np.flatnonzero(lines.str.contains(announcements.HINT).to_numpy())
    out = {}
    for k, line in zip(hits.tolist(), lines.gather(hits).str.strip_chars_end("\r\n").to_list()):
        bare = line
        for p in _SETTINGS:
            bare = p.regex.sub(" ", bare)
        what = announcements.read(bare)
        if what is not None:
            out[k] = (line, what)
    return out


def _segments(data: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start, count of `\\n` before, and end of each line segment, cut as `[^\\r\\n]*(\\r\\n|\\r|\\n)` cuts."""
    raw = np.frombuffer(data, np.uint8)
    newline = np.flatnonzero(raw == 10)
    ends = newline
    cr = np.flatnonzero(raw == 13)
    if len(cr):
        after = np.minimum(cr + 1, len(raw) - 1)
        lone = cr[(cr + 1 == len(raw)) | (raw[after] != 10)]  # `\r\n` is one break, at its `\n`
        ends = np.sort(np.concatenate((newline, lone)))
    ends = ends + 1
    starts = np.concatenate(([0], ends[:-1]))
    line_nos = np.searchsorted(newline, starts)
    return starts, line_nos, ends


@dataclass
class _State:
    """What the reader carries from line to line: ordinals, line numbers, the last step and date."""

    segment: int = 0  # 0-based index of the next line segment (\r counts as a break)
    line_no: int = 1  # 1-based number of the next \n-terminated line
    last_step: int | None = None
    step_tags: frozenset[str] = frozenset()  # the tags of the line that printed `last_step`
    date: datetime | None = None  # midnight UTC of the last full date seen
    last_tod: float | None = None  # the last time of day (s) placed on an assumed date
    assumed: int | None = None  # line number of the first stamp whose date was assumed
    unmatched: list[int] = field(default_factory=list)
    names_read: set[str] = field(default_factory=set)  # every series name the file gave points to (`issues`)
    n_unmatched: int = 0
    far: list[int] = field(default_factory=list)  # lines whose counter is past 64 bits: skipped
    unmatched_sample: str | None = None  # the first of them, as printed
    outlines: dict[str, int] = field(default_factory=dict)  # lines seen per outline (`_candidate_lines`)
    # The epoch of the last line that printed an epoch and nothing else (`Epoch 3/10` above Keras' bar,
    # `epoch 3` above `loss: 0.52`): the epoch of the record lines under it that print none of their own.
    header_epoch: int | None = None
    epoch_kept: bool = True  # whether `header_epoch` went into the `epoch` series already (once per `epoch N` line)
    taken: dict[str, int] = field(default_factory=dict)  # lines each pattern took parts of (`-v`)
    history_echoes: set[str] = field(default_factory=set)  # names the lines printed: a printed history's echo of them
    n_history_echoes: int = 0  # points of a printed history that repeat series the lines print (kept from the lines)
    start: int = 0  # the byte this read began at
    recent: list[tuple[tuple, str, float | None]] = field(default_factory=list)  # last records, lines, times
    n_copies: int = 0  # records printed again under another prefix (other ranks), skipped
    headers: dict[int, tuple[str, ...]] = field(default_factory=dict)  # table headers by their count of fields
    cut_row: bool = False  # the line being read is a finished file's last (`table_row`: a row cut off there)
    spaced: bool = False  # a header typed with single blanks was seen (`_spaced_header`): rows may be so typed too
    stem_tag: str | None = None  # the tag of bare values (the file's name says what they are: `loss.txt`)
    file_name: str = ""  # the file's name, which names its unnamed values' series (`output.txt[1]`, `unnamed_rows`)
    unnamed: int | None = None  # the width of the file's rows of unnamed values, once `unnamed_rows` found them
    unnamed_checked: bool = False  # whether `unnamed_rows` looked at the file's first lines
    counted_tag: str | None = None  # the tag of `N: value` lines in a file whose name says nothing (`counted_values`)
    # rows of numbers: their width, counter column and epoch column, if any (`counted_values`)
    row_counter: tuple[int, int, int | None] | None = None
    row_widths: set[int] = field(default_factory=set)  # other widths of such rows, their counter first (`counted_rows`)
    held_stem: str | None = None  # the held-out split the file's name names (`validation_log.txt`): its rows' loss's
    settings_padded: bool = False  # names padded before their colon hold settings in this file (`_PADDED_WORD`)
    redrawn: tuple[int, dict, int | None] | None = None  # the last record's segment, metrics and epoch (`_redraw`)
    n_redraws: int = 0  # bar redraws that repeated the record before them, kept once
    n_settings: int = 0  # lines of a settings dump whose numbers were read as settings (`_settings_blanked`)
    n_summaries: int = 0  # progress bars' closing lines beside records with a logged step (`without_summaries`)
    epoch_step: tuple[int, int, int] | None = None  # the last epoch printed beside a step: its highest, lowest step
    steps_in_epoch: bool = False  # the file's step counter starts again with each epoch (`note_epoch_steps`)
    epoch_heard: int | None = None  # `header_epoch` as the first pass over a chunk left it (`note_epoch_steps`)
    counted: dict[str, tuple[float, float]] = field(default_factory=dict)  # lowest and last step or epoch (`relaunched`)
    launches: int = 1  # launches met so far in the file
    peaks: dict[str, float] = field(default_factory=dict)  # the highest step or epoch so far (`relaunched`)
    gaps: deque = field(default_factory=lambda: deque(maxlen=RECENT_GAPS))  # seconds between the last stamped records
    last_wall: float | None = None  # the clock of the last stamped record (`relaunched`)
    relaunch_heard: bool = False  # an `Epoch N` line went back to the file's first epoch: the next record begins a launch
    epoch_seen: bool = False  # an epoch was printed so far (`batch_step`)
    batch_counts: bool = False  # the file's bare batch count is its step (`batch_step`)
    epoch_recorded: bool = False  # a record was read under the last `Epoch N` line (`note_header_epoch`)
    record_line: int = 0  # the line number of the last record read
    block: _Block | None = None  # the evaluation block open at the end of the last chunk (`eval_blocks`)
    headed: bool = False  # the log heads its training records with a bare `Training:` line (`eval_blocks`)
    train_shapes: dict[str, None] = field(default_factory=dict)  # outlines of training records seen (`eval_blocks`)
    train_step: int | None = None  # the step the last training record printed (`eval_blocks`)
    train_of: int | None = None  # the total its step was printed against (`step 10/88`)
    said: list[dict] = field(default_factory=list)  # lines that announce an event in words (`announced`), not yet handed

    @classmethod
    def resume(cls, f, start: int) -> _State:
        """Counts before `start` (line numbers, ordinals) and the last counter and date seen there."""
        state = cls()
        if start == 0:
            return state
        f.seek(0)
        prefix = _as_printed(f.read(start))
        state.line_no = prefix.count(b"\n") + 1
        state.segment = prefix.count(b"\n") + prefix.count(b"\r") - prefix.count(b"\r\n")
        # The last step and date are looked for in the last 64 KiB only: enough for any log's cadence.
        tail_bytes = prefix[-(64 << 10) :]
        tail = tail_bytes.decode("utf-8", errors="replace")
        cut = max(tail_bytes.rfind(b"\n"), tail_bytes.rfind(b"\r")) + 1
        if cut:
            _candidate_lines(tail_bytes[:cut], state.outlines)
        epoch_seen = False
        for line in reversed(re.split(r"\r\n|\r|\n", tail)):
            parsed = parse_line(line)
            if not epoch_seen and parsed.epoch is not None:
                epoch_seen = True
                state.header_epoch = None if parsed.metrics else parsed.epoch
            if state.last_step is None and parsed.step is not None:
                state.last_step, state.step_tags = parsed.step, frozenset(parsed.metrics)
            if state.date is None and parsed.time and "y" in parsed.time:
                t = parsed.time
                state.date = datetime(int(t["y"]), _month(t["mo"]), int(t["d"]), tzinfo=timezone.utc)
            if state.last_step is not None and state.date is not None and epoch_seen:
                break
        return state

    def parse(self, data: bytes, offset: int, file_end: bool = False) -> pl.DataFrame:
        """Points of the complete lines in `data`, which starts at byte `offset` of the file; `file_end`: its last
        line is a finished file's last (a table's row cut off there keeps its cells: `table_row`).

        Lines are cut where the old per-line loop cut them (`\\r\\n`, `\\r`, `\\n`), with numpy over the
        bytes; one polars pass over all of them keeps the few that could yield anything (`_CANDIDATE`),
        and only those become Python strings and are parsed.
        """
        tags: list[str] = []
        values: list[float] = []
        # One row per line that gave points, repeated for each of its points at the end.
        rows: dict[str, list] = {k: [] for k in ("step", "position", "wall_time", "epoch", "batch", "ordinal")}
        counts: list[int] = []
        data, settings = _settings_blanked(_as_printed(data))
        self.n_settings += settings
        data, histories = _histories_taken(data, offset)
        self.settings_padded = self.settings_padded or len(_PADDED_WORD.findall(data)) >= REPEATS
        if self.settings_padded:
            data = _PADDED_COLON.sub(lambda m: m.group(1) + b";", data)  # (a settings dump's: no pair)
        self.counted_values(data)
        self.unnamed_rows(data)
        # {a line's start in `data`: (the counter above it, its value)}; in a file of unnamed values, every one is read
        lone = {} if self.unnamed else self.lone_values(data)
        starts, line_nos, candidates, texts, shapes, repeated = _candidate_lines(data, self.outlines, bool(self.unnamed))
        segment, line_no0, step_before = self.segment, self.line_no, self.last_step
        said = _announcing(data, starts)  # {segment in data: (line, what it announces)}
        self.segment += len(starts)
        self.line_no += data.count(b"\n")
        parsed = []
        closing: list[int] = []  # records read from a progress bar's closing line (`without_summaries`)
        header = self.epoch_heard
        tail = max(data.rfind(b"\n", 0, len(data) - 1), data.rfind(b"\r", 0, len(data) - 1)) + 1 if file_end else -1
        for k, start, line_no, text, shape, rep in zip(candidates.tolist(), starts[candidates].tolist(),
                                                       line_nos[candidates].tolist(), texts, shapes, repeated):
            if not text.strip():
                continue
            metrics, counters, time, _, looks, patterns = _parse(text, shape, rep)
            self.cut_row = start == tail
            metrics, counters, looks, patterns, listed = self.tabled(text, metrics, counters, looks, patterns)
            self.cut_row = False
            metrics = total_of_terms(metrics)
            if start in lone:
                metrics, looks, listed = {}, False, [lone[start]]
            if "epoch" in counters and not listed:  # as `header_epoch` follows it below
                header = None if metrics else counters["epoch"]
            self.note_epoch_steps(metrics, counters, header)
            parsed.append((k, start, line_no, text, metrics, counters, time, looks, patterns, listed))
        self.epoch_heard = header
        parsed = _eval_passes(parsed)
        splits = self.eval_blocks(parsed)
        for split, (k, start, line_no, text, metrics, counters, time, looks, patterns, listed) in zip(splits, parsed):
            line_no += line_no0
            if split is not None:
                # (a learning rate printed in the block is the optimizer's, no split's)
                metrics = {t if _names_split(t) or role_of(t).role == "lr" else f"{split} {t}": v
                           for t, v in metrics.items()}
            if self.steps_in_epoch and "step" in counters and ("epoch" in counters or self.header_epoch is not None):
                # a step that starts again with each epoch is the batch within it (DECISIONS §2: no global counter)
                counters = {**counters, "batch": counters.get("batch", counters["step"])}
                del counters["step"]
            wall_time = self._wall_time(time, line_no) if time else None
            if any(c == PAST_64_BITS for c in counters.values()) or any(n == PAST_64_BITS for n, _ in listed or ()):
                self.far.append(line_no)  # a step the store cannot hold: the line is skipped, and said
                continue
            if listed:  # bare values: one per line (`N: value` or `value`), or a list printed on one line
                for i, (n, value) in enumerate(listed):
                    ordinal = n is None
                    step = segment + k if ordinal and len(listed) == 1 else i if ordinal else n
                    tags.append(self.stem_tag or self.counted_tag)
                    values.append(value)
                    counts.append(1)
                    for col, v in (("step", step), ("position", offset + start), ("wall_time", wall_time),
                                   ("epoch", None), ("batch", None), ("ordinal", ordinal)):
                        rows[col].append(v)
                self.taken["bare_values"] = self.taken.get("bare_values", 0) + 1
                continue
            step = counters.get("step")
            epoch, batch = counters.get("epoch"), counters.get("batch")
            held_out = split is not None or bool(metrics) and all(_names_split(t) for t in metrics)
            if epoch is not None:
                self.epoch_seen = True
            counts_batches = False  # the step is a bare count of batches, which marks no launch
            if step is None and batch is not None and metrics and not held_out:
                step = self.batch_step(counters, patterns)
                counts_batches = step is not None and "of" not in counters
            if metrics or counters:
                for name in patterns:
                    self.taken[name] = self.taken.get(name, 0) + 1
            if not metrics:
                if looks and k not in said:  # (an announcing line was read: as words, `announced`)
                    self.n_unmatched += 1
                    if len(self.unmatched) < MAX_LINES_LISTED:
                        self.unmatched.append(line_no)
                    if self.unmatched_sample is None:
                        self.unmatched_sample = text.strip()[:MAX_SAMPLE_CHARS]
                if step is not None and split is None:
                    self.last_step, self.step_tags = step, frozenset()
                if epoch is not None:
                    self.header_epoch, self.epoch_kept = epoch, False
                    self.note_header_epoch(epoch, line_no)
                    if step is None and not self.step_tags:
                        # a step printed on a line of its own before this epoch (a setting's echo, `Save step: 1000`)
                        # is no counter of the records under it
                        self.last_step = None
                continue
            if epoch is not None:
                self.header_epoch = None  # this log prints the epoch on its record lines
            if step is not None:
                is_ordinal = False
                if split is None:  # an evaluation loop's own counter is not the training's step
                    self.last_step, self.step_tags = step, frozenset(metrics)
            elif self.last_step is not None and (frozenset(metrics) != self.step_tags or _NET_OUTPUT.search(text)) and (
                    epoch is None and batch is None and EPOCH_TAG not in metrics or held_out
                    or batch is None and any(_names_split(t) for t in metrics)):
                # a line with no global counter of its own (Caffe's outputs under `Iteration N`; an evaluation's
                # `Test: [10/196]` batches and summary; an epoch's summary, `| end of epoch 3 | valid loss 5.35`) is
                # read at the training step logged last
                step, is_ordinal = self.last_step, False
            else:
                step, is_ordinal = segment + k, True
            if self.copied_record(metrics, (None if is_ordinal else step, epoch, self.header_epoch, batch), text,
                                  wall_time):
                continue
            if self.redraw(segment + k, metrics, epoch, k > 0 and start > 0 and data[start - 1] == 13):
                continue
            if is_ordinal and epoch is None and batch is None and self.header_epoch is not None \
                    and not self.epoch_kept and EPOCH_TAG not in metrics:
                # Records that print no counter under an `epoch N` line of its own are ordered by their lines alone;
                # that epoch is the only counter they have, so it is kept as a series too: an epoch that falls back
                # (a resume from a checkpoint, the records of epochs already logged printed again) shows.
                metrics = {**metrics, EPOCH_TAG: float(self.header_epoch)}
                self.epoch_kept = True  # once per `epoch N` line, with the first record under it
            launch = None if split is not None else self.relaunched(
                None if is_ordinal or counts_batches else step, epoch if epoch is not None else self.header_epoch,
                metrics.get(EPOCH_TAG) if is_ordinal else None, line_no, wall_time, epoch is not None)
            if launch is not None:
                metrics = {**metrics, LAUNCH_TAG: float(launch)}
            tags.extend(metrics)
            values.extend(metrics.values())
            counts.append(len(metrics))
            rows["step"].append(step)
            rows["position"].append(offset + start)
            rows["wall_time"].append(wall_time)
            rows["epoch"].append(epoch if epoch is not None else self.header_epoch)
            rows["batch"].append(batch)
            rows["ordinal"].append(is_ordinal)
            if is_ordinal and "tqdm_bar" in patterns and _closing_bar(text):
                closing.append(len(counts) - 1)
            self.record_line = line_no
        per_line = pl.DataFrame(rows, schema={"step": pl.Int64, "position": pl.Int64, "wall_time": pl.Float64,
                                              "epoch": pl.Int64, "batch": pl.Int64, "ordinal": pl.Boolean})
        self.announced(said, offset, starts, segment, step_before, per_line)
        per_point = per_line[np.repeat(np.arange(len(counts)), counts)].with_columns(
            pl.Series("tag", tags, pl.Utf8), pl.Series("value", values, pl.Float64))
        if closing:
            per_point = self.without_summaries(per_point, closing, counts)
        if histories is not None:
            # a series the log's own lines print too is the history's copy of their records: kept once, from the lines
            # (DECISIONS §3), and counted
            echo = pl.col("tag").is_in(list(set(per_point["tag"].to_list()) | self.history_echoes))
            self.n_history_echoes += histories.filter(echo).height
            self.taken["printed_history"] = self.taken.get("printed_history", 0) + histories["position"].n_unique()
            per_point = pl.concat([per_point, histories.filter(~echo).select(per_point.columns)])
        self.history_echoes.update(tags)
        self.names_read.update(per_point["tag"].unique().to_list())
        return scalars_frame(per_point)

    def without_summaries(self, points: pl.DataFrame, closing: list[int], counts: list[int]) -> pl.DataFrame:
        """`points` without the records of progress bars' closing lines (`_closing_bar`, rows `closing` of the
        chunk's records, `counts` points each) whose every value the chunk's records with a logged step also print:
        the bar's end summary of its pass (its postfix repeats the pass's last values, and a buffered bar is often
        written before the lines it sums up), not a record on their axis between line numbers and steps. A log whose
        bars are its only records keeps them all."""
        stepped = set(points.filter(~pl.col("ordinal"))["tag"].to_list())
        if not stepped:
            return points
        row = np.repeat(np.arange(len(counts)), counts)
        tags: dict[int, set[str]] = {}
        for i, tag in zip(row[np.isin(row, closing)].tolist(), points["tag"].filter(pl.Series(np.isin(row, closing)))):
            tags.setdefault(i, set()).add(tag)
        drop = [i for i, named in tags.items() if named - {LAUNCH_TAG, EPOCH_TAG} <= stepped]
        if not drop:
            return points
        self.n_summaries += len(drop)
        return points.filter(~pl.Series(np.isin(row, drop)))

    def announced(self, said: dict[int, tuple[str, announcements.Said]], offset: int, starts: np.ndarray, segment: int,
                  step_before: int | None, records: pl.DataFrame) -> None:
        """Keep the lines that announce an event in words (`_announcing`), as printed, at their step: the counter the
        line prints itself (for a non-finite value: `... at iteration=5`), else the step of the last record before it
        (on the ordinal axis, the line's own ordinal), else the last step seen before this chunk."""
        at = records["position"].to_numpy()
        for k, (line, what) in said.items():
            position = offset + int(starts[k])
            own = parse_line(line).step if what.kind != announcements.RESUME else None
            i = int(np.searchsorted(at, position)) - 1
            if own is not None:
                step = own
            elif i >= 0:
                step = segment + k if records["ordinal"][i] else int(records["step"][i])
            else:
                step = step_before if step_before is not None else segment + k
            self.said.append({"tag": what.kind, "step": step, "position": position, "wall_time": None,
                              "text": announcements.quote(line)})

    def said_frame(self) -> pl.DataFrame | None:
        """The announcing lines kept since the last call (`announced`), as `texts` rows; None when there are none."""
        if not self.said:
            return None
        out, self.said = texts_frame(pl.DataFrame(self.said, schema={
            "tag": pl.Utf8, "step": pl.Int64, "position": pl.Int64, "wall_time": pl.Float64, "text": pl.Utf8})), []
        return out

    def eval_blocks(self, parsed: list[tuple]) -> list[str | None]:
        """The split each parsed line's metrics belong to where an evaluation block holds them, else None.

        Many printers label an evaluation only by a line above its records, which print the training's names
        (Paddle's `Eval begin...` over `step 10/88 - loss: X`, `Validation:` or `==> Evaluating` over `loss: X`,
        `Test on Epoch 3` over `mAP: X`). A block opens at a line that says an evaluation begins (`_block_line`)
        once training records were seen; its records take the split's name (`val loss`) until it ends: at a record
        of a training record's shape, a record with a step after records of the block that print none, a line that
        says train, an `Epoch N` line, or its end marker (`Eval samples: N`). Records of the very shape the training printed just after the opener are the block's only where the
        block then ends by a marker or such a line, not by training records or another opener, or where they print
        again the step of the training record before the opener (`step 100, loss X` under `Evaluation:` after the
        training's `step 100, loss Y`: the model evaluated at that step). A record of the training's shape counted
        against another total (`step 1/9` after the training's `step 10/99`) is the block's. A record whose own
        label names a held-out split before its values (`Epoch(val) [1][10/50]  loss: X`) is that split's anywhere.
        In a log that heads its training with a bare `Training:` line, a bare `Validation:` heads a block that holds
        every record below it, of any shape, up to the next header, marker or `Epoch N` line."""
        splits: list[str | None] = [None] * len(parsed)
        block = self.block
        for i, (_, _, _, text, metrics, counters, _, _, _, listed) in enumerate(parsed):
            if listed is not None:
                continue
            kind, split = _block_line(text, metrics)
            own = _labelled_split(text, metrics) if metrics and kind is None else None
            if own is not None:  # a record labelled by its own line (`Epoch(val) [1][10/50] loss: X`): not the training's
                splits[i] = own
                continue
            shape = outline(text)
            of = counters.get("of")
            # the training's shape counted against another total (`step 1/9` under `step 10/99`) is not the training's
            train_shaped = shape in self.train_shapes and (of is None or self.train_of is None or of == self.train_of)
            bare = not metrics and kind is not None and _bare_header(text)
            if bare and kind == "train":
                self.headed = True
            if block is not None and block.headed:
                if kind is not None or not metrics and "epoch" in counters:
                    block = None  # the next header, a marker or an `Epoch N` line
                elif metrics:
                    splits[i] = block.split
                    continue
                else:
                    continue
            if block is not None:
                ends = kind in ("train", "close", "count") or not metrics and "epoch" in counters and kind != "open"
                if ends or kind == "open":
                    if ends:  # a marker closes the block: records of the training's shape in it were the evaluation's
                        for j in block.pending:
                            splits[j] = block.split
                    block = None
                    if kind == "count":
                        continue
                elif metrics and block.weak and "epoch" in counters:
                    block = None  # a record that counts epochs after a mere count of samples: the training's
                elif metrics and "step" in counters and block.records and not block.stepped:
                    block = None  # a record with a step after evaluation records that print none: the training's
                elif metrics and train_shaped and not block.pending and block.at_step is not None \
                        and counters.get("step") == block.at_step:
                    splits[i] = block.split  # the step the training record before the opener printed: evaluated there
                    block.records += 1
                    block.stepped = True
                    continue
                elif metrics and train_shaped:
                    if block.weak or not (block.records == len(block.pending) and block.shape in (None, shape)):
                        block = None  # training records again (those held pending stay the training's)
                    else:
                        block.shape = shape
                        block.pending.append(i)
                        block.records += 1
                        block.stepped = block.stepped or "step" in counters
                        continue
                elif metrics:
                    for j in block.pending:
                        splits[j] = block.split
                    block.pending = []
                    block.records += 1
                    block.stepped = block.stepped or "step" in counters
                    splits[i] = block.split
                    continue
                else:
                    continue
            if kind == "open" and bare and self.headed:
                block = _Block(split, headed=True)
            elif kind in ("open", "count") and self.train_shapes:
                block = _Block(split, weak=kind == "count", at_step=self.train_step)
            elif metrics and kind not in ("close", "count"):
                self.train_step, self.train_of = counters.get("step"), of
                self.train_shapes[shape] = None
                if len(self.train_shapes) > MAX_HEADERS * 8:
                    del self.train_shapes[next(iter(self.train_shapes))]
        if block is not None:
            block.pending = []  # not closed in this chunk: held records stay the training's
        self.block = block
        return splits

    def counted_values(self, data: bytes) -> None:
        """Take `N: value` lines (`243413: nan`, WaveGlow's `print(f"{iteration}: {loss}")`) as the loss at step N in a
        file whose name says nothing of them, where `data` holds `REPEATS` or more of them, N rising on each and the
        values not all integers (a count per class, `0: 5923`, is no loss); a training log's one unnamed number per
        step is its loss."""
        if self.counted_tag:
            return
        self.counted_rows(data)
        if self.stem_tag:
            return  # bare values of a file that names them: `_bare_values`, or its rows of numbers (`counted_rows`)
        if self.counted_tag or not _COUNTED_HINT.search(b"\n" + data):
            return
        found = _COUNTED_LINE.findall(data)
        if len(found) < REPEATS:
            return
        steps = [int(n) for n, _ in found]
        values = [_float(v.decode()) for _, v in found]
        if all(b > a for a, b in zip(steps, steps[1:])) and not all(math.isfinite(v) and v == int(v) for v in values):
            self.counted_tag = COUNTED_TAG

    def unnamed_rows(self, data: bytes) -> None:
        """Note the width of a file's rows of unnamed values (`unnamed_width`), judged once, on its first lines, in a file
        whose name says nothing of its values and whose lines no counter column or `N: value` reading took."""
        if self.unnamed_checked:
            return
        self.unnamed_checked = True
        if self.stem_tag or self.counted_tag or not self.file_name:
            return
        head = data[:UNNAMED_HEAD_BYTES]
        self.unnamed = unnamed_width(re.split(r"\r\n|\r|\n", head.decode("utf-8", errors="replace"))[:-1])

    def counted_rows(self, data: bytes) -> None:
        """Take rows of numbers only (`0, 44.74,50.90`: a header never printed) as records where `ROW_REPEATS` or more
        of one width hold a counter, whole numbers counting up (starting again at most at their first value: a new
        epoch or launch), as their first or last column, or as their second after an epoch's (whole numbers that never
        go down: `0, 4, 16.56, ...` is epoch 0, batch 4), and values not all whole numbers beside it, and they are most
        of the lines that hold a number (the log's records, not a printout among them). The first column
        that is not the counter is the loss, as a training log's one unnamed number per step is (`counted_values`);
        the others are `column N` by position: nothing names them. In a file named for a held-out split
        (`validation_log.txt`) it is that split's loss; in a file whose name says what its values are (`losses.txt`),
        the first column is that."""
        every = rows = [_ROW_SPLIT.split(m.group(1).decode().strip()) for m in _NUMBER_ROW.finditer(data)]
        if len(rows) < ROW_REPEATS or 2 * len(rows) < len(_LINE_WITH_DIGIT.findall(data)):
            return  # rows among records named otherwise are a printout (a schedule, a matrix), not the log's records
        width = Counter(len(r) for r in rows).most_common(1)[0][0]
        rows = [r for r in rows if len(r) == width]
        if len(rows) < ROW_REPEATS:
            return
        epochs = None
        if width > 3 and all(_WHOLE.fullmatch(r[0]) for r in rows):
            firsts = [int(r[0]) for r in rows]
            epochs = 0 if all(b >= a for a, b in zip(firsts, firsts[1:])) else None
        for at in (0, width - 1) + ((1,) if epochs is not None else ()):
            if not all(_WHOLE.fullmatch(r[at]) for r in rows):
                continue
            counts = [int(r[at]) for r in rows]
            rises = sum(b > a for a, b in zip(counts, counts[1:]))
            again = all(b > a or b <= counts[0] for a, b in zip(counts, counts[1:]))
            epoch_at = epochs if at == 1 else None
            others = [r[i] for r in rows for i in range(width) if i not in (at, epoch_at)]
            if again and rises >= len(rows) // 2 and not all(_WHOLE.fullmatch(v) for v in others):
                self.counted_tag = self.stem_tag or (f"{self.held_stem} {COUNTED_TAG}" if self.held_stem
                                                     else COUNTED_TAG)
                self.row_counter = (width, at, epoch_at)
                if at == 0 and epoch_at is None:
                    self.row_widths = _other_widths(every, width)
                return

    def counted_row(self, text: str) -> tuple[dict[str, float], dict[str, int]] | None:
        """The metrics and counter of a row of numbers as `counted_rows` named its columns; None for another line."""
        if self.row_counter is None:
            return None
        found = _NUMBER_ROW.fullmatch(text.strip().encode())
        width, at, epoch_at = self.row_counter
        fields = _ROW_SPLIT.split(found.group(1).decode().strip()) if found else []
        other = len(fields) in self.row_widths  # a launch that prints a column more or less, its counter first
        if len(fields) != width and not other or not _WHOLE.fullmatch(fields[at]) \
                or epoch_at is not None and not _WHOLE.fullmatch(fields[epoch_at]):
            return None
        values = [(i, _float(v)) for i, v in enumerate(fields) if i not in (at, epoch_at)]
        column = "column {} of " + str(len(fields)) if other else "column {}"  # where a column sits says less there
        metrics = {self.counted_tag if k == 0 else column.format(i + 1): v for k, (i, v) in enumerate(values)}
        if epoch_at is not None:  # the counter beside an epoch's column counts within the epoch: the batch
            return metrics, {"epoch": _count(fields[epoch_at]), "batch": _count(fields[at])}
        # a counter under `Epoch N` lines counts within the epoch: the batch
        counter = "batch" if self.header_epoch is not None else "step"
        return metrics, {counter: _count(fields[at])}

    def lone_values(self, data: bytes) -> dict[int, tuple[int, float]]:
        """Lines that hold one number alone right under a line that holds one integer in words (`第100次循环`, `loop
        100`), seen `REPEATS` times or more in `data` with the same words, the integer rising on each and the numbers
        not all integers: each number is the loss at its counter (`_State.counted_values`'s reading, the counter on
        its own line)."""
        if not _LONE_HINT.search(data):
            return {}
        by_words: dict[tuple[bytes, bytes], list[re.Match[bytes]]] = {}
        for m in _LONE_UNDER_COUNTER.finditer(data):
            if (m.group(1) + m.group(3)).strip():
                by_words.setdefault((m.group(1).strip(), m.group(3).strip()), []).append(m)
        out = {}
        for found in by_words.values():
            steps = [int(m.group(2)) for m in found]
            values = [_float(m.group(5).decode()) for m in found]
            if len(found) >= REPEATS and all(b > a for a, b in zip(steps, steps[1:])) \
                    and not all(math.isfinite(v) and v == int(v) for v in values):
                out.update({m.start(4): (n, v) for m, n, v in zip(found, steps, values)})
        if out and not self.stem_tag:
            self.counted_tag = COUNTED_TAG
        return out

    def tabled(self, text: str, metrics: dict[str, float], counters: dict[str, int], looks: bool,
               patterns: tuple[str, ...]) -> tuple[dict[str, float], dict[str, int], bool, tuple[str, ...],
                                                   list[tuple[int | None, float]] | None]:
        """A line as a row of a table seen before (its values named by the header) or as bare values, else as the
        table parsed it (and remembered as a header, when it is one)."""
        listed = None
        # a header printed above the rows names them: rows of numbers are headerless (`counted_row`) only where no
        # header of their width was seen (an integer epoch column under `Epoch  lr  loss` made the lr the loss)
        if self.headers and self.row_counter is not None and (row := self.table_row(text)) is not None:
            return row[0], {**counters, **row[1]}, False, ("header_table",), None
        if (counted := self.counted_row(text)) is not None:
            return counted[0], counted[1], False, ("counted_row",), None
        if self.unnamed and not self.headers and not metrics and (found := _unnamed_values(text)) and len(found[1]) == self.unnamed:
            values = {unnamed_tag(self.file_name, i): _float(v) for i, v in enumerate(found[1], 1)}
            return values, {**counters, **found[0]}, False, ("unnamed_values",), None
        if self.headers or self.stem_tag or self.counted_tag:
            row = self.table_row(text)
            if row is not None:
                return row[0], {**counters, **row[1]}, False, ("header_table",), None
            if self.stem_tag:
                listed = _bare_values(text)
            elif self.counted_tag:
                bare = _BARE.match(text)
                if bare and bare.group("n") is not None:
                    listed = [(_count(bare.group("n")), _float(bare.group("value")))]
        if not metrics and listed is None and self.note_header(text):
            looks = False  # a table's header (`2d_loss  3d_loss`): it names the rows below and holds no value
        return metrics, counters, looks, patterns, listed

    def note_header(self, text: str) -> bool:
        """Remember a table's header row (`Epoch\tLR\tTrain Loss`, `  Epoch   gpu_mem   box   obj`): two or more
        names, apart by tabs, runs of spaces or `|`, after at most one field of prefix (a time, a logger); or names
        apart by commas alone, inside a banner of `*`, `=` or `#` (`****loss,acc,val_loss****` above tab-separated
        rows of values). Whether the line was one."""
        if "\t" not in text and "  " not in text and "|" not in text:
            spaced = _spaced_header(text)
            if spaced is not None:
                self.headers[len(spaced)], self.spaced = spaced, True
                self.headers = dict(list(self.headers.items())[-MAX_HEADERS:])
                return True
            banner = _COMMA_HEADER.fullmatch(text.strip())
            if banner is None:
                return False  # one field: no table
            fields = banner.group("names").split(",")
            if all(_NAME_FIELD.fullmatch(f) and not _VALUE_FIELD.fullmatch(f) for f in fields) \
                    and len(fields) <= MAX_COLUMNS:
                self.headers[len(fields)] = tuple(fields)
                self.headers = dict(list(self.headers.items())[-MAX_HEADERS:])
                return True
            return False
        fields = _fields(text)
        names = 0
        for f in reversed(fields):
            if not _NAME_FIELD.fullmatch(f) or _VALUE_FIELD.fullmatch(f):
                break
            names += 1
        if names >= 2 and len(fields) - names <= 1 and len(fields) <= MAX_COLUMNS:
            self.headers[len(fields)] = tuple(fields[-names:])
            self.headers = dict(list(self.headers.items())[-MAX_HEADERS:])
            return True
        return False

    def table_row(self, text: str) -> tuple[dict[str, float], dict[str, int]] | None:
        """Metrics and counters of a row of numbers under a remembered header with as many fields: each value
        takes its column's name (a counter's column, `Epoch` `Batch` `Iter`, is the row's counter; `0/29` reads 0).
        A row whose one prefix field ends in a name (`... - loss  |  -137.6  |  -146.7` under `Training | Validation`)
        names each value `<name> <column>`. A comment after the row (`0.0727  0.9781  # unexpected accuracy`, added
        by hand) is no field. A row labelled in its first field (`Mem:  65  1  19` under procps free's `total  used
        free`, whose header leaves the label's column blank) names each value `<label> <column>` too."""
        fields = _fields(_ROW_COMMENT.sub("", text))
        if self.spaced and len(fields) == 1 and (spaced := _SPACED_ROW.fullmatch(text.strip())):
            # a row typed as its header was, `No log` an empty cell; an elapsed time after it is no cell
            fields = _NO_LOG.sub("N/A", text.strip()[:spaced.start("time")] if spaced["time"] else text.strip()).split()
        if "(" in text:  # a cell printed as a scalar's repr (`tensor(3.3929, device='cuda:0')`) holds its value
            fields = [cell_number(f) or f for f in fields]
        names = self.headers.get(len(fields))
        if names is None and len(fields) > 2 and _ROW_NAME.fullmatch(fields[0]):
            names = self.headers.get(len(fields) - 1)
        if names is None and len(fields) > 2 and not re.search(r"\d", fields[-1]) and not _VALUE_FIELD.fullmatch(fields[-1]):
            # words after the row's cells (`0.0798  0.1843  best val`: a note a user added to a table pasted by hand)
            # are no cells of it
            kept = fields[:-1]
            while len(kept) > 2 and not re.search(r"\d", kept[-1]) and not _VALUE_FIELD.fullmatch(kept[-1]):
                kept = kept[:-1]
            names = self.headers.get(len(kept))
            fields = kept if names is not None else fields
        if names is None and self.cut_row and len(fields) >= 3:
            # a finished file's last line, a row short of its header's cells (cut off mid-print by a crash, or an
            # excerpt pasted short): its cells are the first columns of the widest header that has no prefix field;
            # its last cell, where the cut fell, may hold part of a number (`-5` of `-5.72`): not read
            wider = [h for n, h in self.headers.items() if n > len(fields) and len(h) == n]
            names = max(reversed(wider), key=len)[:len(fields) - 1] if wider else None
            fields = fields[:-1] if wider else fields
        if names is None:
            return None
        found = [_VALUE_FIELD.fullmatch(f) or _CELL_LIST.fullmatch(f) for f in fields[-len(names):]]
        if not all(found):
            return None
        label = None
        if len(fields) > len(names):
            named = _ROW_LABEL.search(fields[0])
            label = named.group(1) if named else None
        metrics: dict[str, float] = {}
        counters: dict[str, int] = {}
        losses = any(role_of(n).role == "train_loss" for n in names)
        for name, match in zip(names, found):
            if match.re is _CELL_LIST:
                metrics.update(_cell_terms(f"{label} {name}" if label else name, match.group("items")))
                continue
            if match.group("value") is None:
                continue  # `N/A`: no value in this column
            counter = COUNTER_COLUMNS.get(name.lower())
            if counter is not None and label is None:
                value = float(match.group("value"))
                counters.setdefault(counter, int(value) if math.isfinite(value) and abs(value) <= INT64_MAX else PAST_64_BITS)
                continue
            if losses and name.lower() in TOTAL_COLUMNS:
                name = f"{name} loss"  # a table of loss components: its `total` is the loss they sum to
            name = _unit_tag(name, match.group("unit")) or name  # `2100MB` under `mem`: `mem MB`
            metrics.setdefault(f"{label} {name}" if label else name, _float(match.group("value")))
        return metrics, counters

    def batch_step(self, counters: dict[str, int], patterns: tuple[str, ...]) -> int | None:
        """The global step a record's batch counter stands for, None where it stands for none (the record's ordinal
        is its step then, DECISIONS §2). Where the line prints the batches per epoch beside the epoch (`Epoch: [3][100/500]`,
        `Epoch [2/50], Step [6/48]`, or under an `Epoch 3/10` line): epoch × batches per epoch + batch, so a batch
        that goes back within or across epochs (a resume) shows. Where the log counts batches by that word, against
        no total and under no epoch anywhere before (`batch: 120, loss: 3.2`): the count of the run's batches, from
        then on in the file; such a count that starts again marks no launch (it may start again at every epoch: the
        judge composes its passes)."""
        epoch = counters.get("epoch", self.header_epoch)
        batch, per_epoch = counters["batch"], counters.get("of")
        if epoch is not None and per_epoch:
            step = epoch * per_epoch + batch
            return step if step <= INT64_MAX else None
        if per_epoch is None and "batch" in patterns and (self.batch_counts or epoch is None and not self.epoch_seen):
            self.batch_counts = True  # for the whole file: one axis, whatever the lines print later
            return batch
        return None

    def note_header_epoch(self, epoch: int, line_no: int) -> None:
        """Note an `Epoch N` line that prints nothing else (Keras' `Epoch 1/100` above its records): where the file's
        records count by epoch and this goes back to its first epoch after higher ones, the next record begins a
        launch; so does the first epoch's line printed again after records under it and `HEADER_LINES` lines of other
        output (a launch aborted in its first epoch, then the next one's model summary; not the same epoch's evaluation
        bar right under its records). An aborted launch may leave no record of its later epochs, only their lines."""
        if "step" in self.counted:
            return
        first, last = self.counted.get("epoch", (epoch, epoch))
        self.counted["epoch"] = (min(first, epoch), epoch)
        again = self.epoch_recorded and epoch == last and line_no - self.record_line > HEADER_LINES
        self.relaunch_heard = self.relaunch_heard or epoch <= first and (first < last or again)
        self.epoch_recorded = False

    def relaunched(self, step: int | None, epoch: int | None, logged_epoch: float | None = None,
                   line_no: int = 0, wall_time: float | None = None, printed_epoch: bool = False) -> int | None:
        """The number of the launch a record begins (2, 3, ...), where the log's counter starts again from its lowest
        value so far (a launch's first; an earlier launch may have begun higher): several launches appended to one file (`>>`, a script run again), each counting from the start; a
        resume from a checkpoint goes back to a later value and begins none. None for any other record. The record's
        logged step is its counter, else its epoch, else the epoch it logs as a value (HF's `'epoch': 0.27` on records
        with no counter), which begins a launch only after `HEADER_LINES` lines of other output (a second run appended
        after the first's `train_runtime` summary and its own settings dump; records that go back with nothing between
        them are the log's own). A record that prints the first epoch (`printed_epoch`; an `Epoch N` line's above records
        has `note_header_epoch`) right after one at that epoch begins a launch where the counter ran past it earlier in
        the file and the clock moved on `RELAUNCH_GAP` × the median interval between the records before (`long_gap`)."""
        gap = self.clock_gap(wall_time)
        kind, value = ("step", step) if step is not None else ("epoch", epoch) if epoch is not None else (
            ("logged epoch", logged_epoch) if logged_epoch is not None and math.isfinite(logged_epoch) else (None, None))
        if kind is None:
            return None
        first, last = self.counted.get(kind, (value, value))  # the lowest value so far, and the one before
        self.counted[kind] = (min(first, value), value)
        heard, self.relaunch_heard = self.relaunch_heard, False
        self.epoch_recorded = self.epoch_recorded or kind == "epoch"
        if kind == "logged epoch" and line_no - self.record_line <= HEADER_LINES:
            return None
        peak = self.peaks.get(kind, value)
        self.peaks[kind] = max(peak, value)
        if value <= first < last or heard and kind == "epoch" and value <= first \
                or printed_epoch and kind == "epoch" and value == first == last < peak and self.long_gap(gap):
            self.launches += 1
            return self.launches
        return None

    def clock_gap(self, wall_time: float | None) -> float | None:
        """Seconds since the last stamped record, for a record stamped `wall_time` (None without a stamp or one before
        it); kept among the last `RECENT_GAPS` intervals, after the ones before it."""
        if wall_time is None or not math.isfinite(wall_time):
            return None
        last, self.last_wall = self.last_wall, wall_time
        if last is None:
            return None
        self.gaps.append(wall_time - last)
        return wall_time - last

    def long_gap(self, gap: float | None) -> bool:
        """Whether an interval of `gap` seconds (the last `clock_gap`) is `RELAUNCH_GAP` × the median of the
        positive intervals noted before it or longer (three or more of them: records stamped alike, two lines of one
        step, say nothing of the pace)."""
        before = [g for g in list(self.gaps)[:-1] if g > 0]
        return gap is not None and len(before) >= 3 and gap >= RELAUNCH_GAP * float(np.median(before))

    def note_epoch_steps(self, metrics: dict[str, float], counters: dict[str, int], header: int | None) -> None:
        """Note a record that prints a step under an epoch (its own, or an `Epoch N` line's above it): where the epoch
        moves on and the step falls back to where the epoch before began, the step is counted within the epoch (PaddleVideo's `epoch:[ 2/25 ] train
        step:0`, Paddle's `Epoch 2/10` over `step 10/614 - loss: ...`), for the whole file from its start."""
        epoch = counters.get("epoch", header)
        if not metrics or epoch is None or "step" not in counters:
            return
        step = counters["step"]
        last = self.epoch_step  # (epoch, its highest step, its lowest step)
        if last is not None and epoch > last[0] and step <= last[2]:
            # back to where the epoch before began, or the same step again (a record a epoch at `iter 1000 / 1221`):
            # a counter within the epoch; a global step never repeats as the epoch moves on
            self.steps_in_epoch = True
        if last is not None and last[0] == epoch:
            self.epoch_step = (epoch, max(step, last[1]), min(step, last[2]))
        else:  # a resume goes back to a step in the middle of the epoch before: no per-epoch counter
            self.epoch_step = (epoch, step, step)

    def redraw(self, index: int, metrics: dict[str, float], epoch: int | None, after_cr: bool) -> bool:
        """Whether a line is a progress bar's redraw (after a `\\r`, right after the last record's line) that repeats
        that record's values and epoch: the bar drawn again with nothing new (tqdm's and Ultralytics' last refresh
        of an epoch repeats the one before it). Kept once."""
        repeated = after_cr and self.redrawn is not None and self.redrawn[0] == index - 1 \
            and self.redrawn[1] == metrics and self.redrawn[2] == epoch
        self.redrawn = (index, metrics, epoch)
        self.n_redraws += repeated
        return repeated

    def copied_record(self, metrics: dict[str, float], counters: tuple, text: str, wall_time: float | None) -> bool:
        """Whether the line repeats one of the last `RECENT_RECORDS` records (the same values, logged step, epoch
        and batch) under another prefix and at the same time (within a second, or both unstamped): the same
        record printed by another node or rank (LlamaFactory on 4 nodes prints each `{'loss': ...}` line 4 times,
        each behind its node's address; torchrun's `[rank1]:`). Kept once. A line repeated exactly, prefix and
        all, or a second later, is a record of its own (a loss stuck at 0.0 prints the same line)."""
        record = (tuple((t, repr(v)) for t, v in metrics.items()), counters)
        copied = any(r == record and t != text and _same_but_prefix(t, text, metrics) and (
            w is None and wall_time is None or w is not None and wall_time is not None and abs(w - wall_time) <= 1)
                     for r, t, w in self.recent)
        self.recent.append((record, text, wall_time))
        del self.recent[:-RECENT_RECORDS]
        self.n_copies += copied
        return copied

    def _wall_time(self, t: dict[str, str], line_no: int) -> float | None:
        frac = float("0." + t["frac"]) if t.get("frac") else 0.0
        tod = int(t["h"]) * 3600 + int(t["mi"]) * 60 + int(t["s"]) + frac
        if "y" in t:
            midnight = _midnight(t["y"], t["mo"], t["d"])
            if midnight is None:
                return None
            self.date, self.last_tod = midnight[0], None
            return midnight[1] + tod - _offset_seconds(t.get("tz"))
        if self.assumed is None and self.date is None:
            self.assumed = line_no
        base = self.date or datetime(1970, 1, 1, tzinfo=timezone.utc)
        if "mo" in t:  # glog: month and day, no year
            try:
                base = base.replace(month=int(t["mo"]), day=int(t["d"]))
            except ValueError:
                return None
        elif self.last_tod is not None and tod < self.last_tod - 60:
            base = base + timedelta(days=1)  # a time of day going backwards: past midnight
            self.date = base
        self.last_tod = tod
        return base.timestamp() + tod

    def issues(self, name: str) -> list[Issue]:
        """What this read met, at its end: unmatched lines, assumed dates, and (kind `lines_read`, not a problem:
        `forensics analyze -v` shows it) how many lines each pattern took parts of and how many none took."""
        out: list[Issue] = []
        if self.taken or self.n_unmatched:
            took = ", ".join(f"{k} {n:,}" for k, n in sorted(self.taken.items(), key=lambda kv: (-kv[1], kv[0])))
            out.append(Issue(self.start, "lines_read",
                             f"{name} from byte {self.start:,}: lines each pattern took: {took or 'none'}; "
                             f"{self.n_unmatched:,} lines look like metrics but no pattern took them"
                             + (f"; {self.n_copies:,} records printed again under another prefix (another node "
                                f"or rank) kept once" if self.n_copies else "")
                             + (f"; {self.n_redraws:,} bar redraws repeating the record before them kept once"
                                if self.n_redraws else "")
                             + (f"; {self.n_settings:,} numbers of a settings dump (`name: value` a line) read as "
                                f"settings, not records" if self.n_settings else "")
                             + (f"; {self.n_summaries:,} progress bars' closing lines read as their pass's summary "
                                f"beside records that print a step, not as records" if self.n_summaries else "")
                             + (f"; {self.n_history_echoes:,} points of a printed history repeating series the lines "
                                f"print kept once, from the lines" if self.n_history_echoes else "")))
            self.taken, self.n_copies, self.n_redraws, self.n_settings, self.n_summaries = {}, 0, 0, 0, 0
            self.n_history_echoes = 0
        if self.n_unmatched:
            lines = ", ".join(map(str, self.unmatched))
            more = " ..." if self.n_unmatched > len(self.unmatched) else ""
            sample = f"; the first reads: {self.unmatched_sample!r}" if self.unmatched_sample else ""
            out.append(Issue(self.unmatched[0], "unmatched_lines",
                             f"{self.n_unmatched} lines of {name} look like metrics but nothing was read from them "
                             f"(lines {lines}{more}){sample}"))
        if self.far:
            lines = ", ".join(map(str, self.far[:MAX_LINES_LISTED])) + (" ..." if len(self.far) > MAX_LINES_LISTED else "")
            out.append(Issue(self.far[0], "out_of_range", f"{len(self.far)} lines of {name} print a counter past 64 "
                                                          f"bits (lines {lines}); skipped"))
            self.far = []
        if self.start == 0 and not any(role_of(t).role == "train_loss" for t in self.names_read):
            out.append(Issue(None, "no_loss_named", _no_loss_named(name, self.names_read, self.line_no - 1)))
        if self.assumed is not None:
            out.append(Issue(self.assumed, "assumed_date",
                             f"{name} stamps lines without a full date (first at line {self.assumed}); their "
                             f"wall_time is placed on 1970-01-01 UTC: durations hold, dates do not"))
            self.assumed = None
        self.unmatched, self.n_unmatched, self.unmatched_sample = [], 0, None
        return out


def _no_loss_named(name: str, names: set[str], lines: int) -> str:
    """What a text log read whole printed, where none of its series is named as a training loss: its names (losses
    of a held-out split first, then the others, at most eight), or that none of its lines gave a value."""
    if not names:
        return (f"{name}: none of its {lines:,} lines holds a name and a number a training record would "
                f"(`loss: 0.52`, `loss=0.52`, a table under a header): nothing was read from it")
    shown = sorted(names, key=lambda t: (role_of(t).role != "val_loss", role_of(t).role == "other", t))
    more = f" and {len(shown) - 8} more" if len(shown) > 8 else ""
    return f"{name} names no training loss: it prints {', '.join(shown[:8])}{more}"


# Tables printed with one header row, and bare values (`note_header`, `table_row`, `_bare_values`).
_TQDM_TAIL = re.compile(rf":?\s*\d*{BAR_OPENS}.*$")
_BAR_CLOSED = re.compile(rf"\b100%(?:{BAR_GLYPHS})\s*(\d+)/(\d+)\b")


def _closing_bar(text: str) -> bool:
    """Whether a line is a progress bar's closing line: at 100%, its count at its total (`100%|███| 120/120 [...]`)."""
    bar = _BAR_CLOSED.search(text)
    return bar is not None and bar.group(1) == bar.group(2)


_FIELD_SPLIT = re.compile(r"\t+|\s{2,}|\s*\|\s*")
# A name begins with a letter, or with a count glued to a word before its next word (`2d_loss`, `3d_loss`): the
# polars mirror `_NAME_TEXT_RS` spells the lookahead as the letter it looks for. A ratio's name spaces its slash
# (nolearn's `Train / Val` column); a word of a name may be a qualifier in parentheses (`train/loss (avg)`).
_NAME_TEXT = r"(?:[A-Za-z]|\d+[A-Za-z]+[_ -](?=[A-Za-z]))[\w./@%()\[\]:-]*(?: (?:/ )?(?:[A-Za-z]|\((?=[A-Za-z]))[\w./@%()\[\]:-]*){0,3}"
_NAME_FIELD = re.compile(_NAME_TEXT)
# A header of names apart by commas only, set off by a banner of `*`, `=` or `#` on both sides (a user's print of
# the columns it writes below, `*******train_loss,train_acc,valid_loss**********`).
_COMMA_HEADER = re.compile(r"[*=#]{2,}\s*(?P<names>[A-Za-z_][\w.]*(?:,[A-Za-z_][\w.]*)+)\s*[*=#]{2,}")
# A cell is a value (`12.3GiB`), or holds none: `N/A`, `None`, dashes, a duration on a clock (fastprogress's `time`
# column, `00:03`, `1:02:03`), which is not a number (its seconds are not stored as the column's value).
_VALUE_FIELD = re.compile(rf"(?P<value>{NUM})(?:/\d+)?(?P<unit>[A-Za-z%]{{0,3}})|N/?A|None|-+|\d+(?::\d\d)+")
# A cell that holds a list of values (DeepXDE's `Train loss` column, `[1.18e-02, 1.29e-02, 5.61e-01]`: one per term of
# the loss), or an empty one (`[]`: no value).
_CELL_LIST = re.compile(rf"\[\s*(?P<items>(?:{NUM}(?:\s*,\s*{NUM})*)?)\s*,?\s*\]")
_ROW_LABEL = re.compile(r"(?:^|\s)([A-Za-z][\w./@-]*):?$")
_ROW_NAME = re.compile(r"[A-Za-z][\w./@-]*:")  # a row's own label before its values (`Mem:`)
_ROW_COMMENT = re.compile(r"\s#(?![\d#])\D*$")  # `  # unexpected accuracy` (not Caffe's `output #0`)
COUNTER_COLUMNS = {"epoch": "epoch", "ep": "epoch", "batch": "batch", "iter": "step", "iters": "step",
                   "iteration": "step", "it": "step", "step": "step", "steps": "step"}
TOTAL_COLUMNS = {"total", "sum", "all", "overall"}
MAX_COLUMNS = 40
MAX_HEADERS = 8
# A table's header typed with single blanks (a Hugging Face model card's training results copied from its page:
# `Training Loss Epoch Step Validation Loss` above `1.2978 1.0 6621 1.2262`): its names of two or more words are a
# split's or a setting's word before another (`Validation Loss`, `Learning Rate`, `Gen Len`) or a quantity's word after
# one (`... Loss`, `... Time`). Taken only where every word is capitalised (the card's title case, not a sentence), an
# `Epoch` or `Step` column stands alone and a name was joined; its rows are numbers, or the trainer's `No log` for an
# empty cell, apart by single blanks.
_SPACED_LEAD = frozenset({"training", "train", "validation", "valid", "val", "eval", "evaluation", "test", "learning",
                          "grad", "gen", "mean", "overall", "exact", "matthews", "combined", "model", "total",
                          "average", "avg"})
_SPACED_TAIL = frozenset({"loss", "rate", "norm", "len", "time", "score", "match", "correlation"})
_SPACED_ROW = re.compile(rf"(?:(?:{NUM}|No log) )+(?:{NUM}|No log)(?P<time>{_ELAPSED_CELL})?")
# fastai v1's `fit` table pasted from a page (`epoch train_loss valid_loss error_rate` above `1 1.513021 1.041628
# 0.507326 (00:13)`): snake_case names apart by single blanks, a counter's among them and a loss's; each row may end
# in the epoch's elapsed time, a cell the header does not name
_SNAKE_NAME = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")
_NO_LOG = re.compile(r"\bNo log\b")


def _spaced_header(text: str) -> tuple[str, ...] | None:
    """The names of a table header typed with single blanks (`_SPACED_LEAD`), None where the line is none."""
    words = text.split()
    if 3 <= len(words) <= MAX_COLUMNS and all(_SNAKE_NAME.fullmatch(w) for w in words) \
            and any(w in COUNTER_COLUMNS for w in words) and any("_" in w and "loss" in w for w in words):
        return tuple(words)
    if not 3 <= len(words) <= MAX_COLUMNS or not all(re.fullmatch(r"[A-Z][A-Za-z0-9]*", w) for w in words):
        return None
    names: list[str] = []
    join = False
    for w in words:
        if names and (join or w.lower() in _SPACED_TAIL and names[-1].lower() not in COUNTER_COLUMNS):
            names[-1] += f" {w}"
        else:
            names.append(w)
        join = w.lower() in _SPACED_LEAD
    counted = any(n.lower() in ("epoch", "step") for n in names)
    return tuple(names) if counted and len(names) < len(words) else None
# A value alone on its line, or after its counter: `12: 0.693`, `12\t0.693`, and a counter under its word
# (`epoch1\t0.2549`, `Epoch 3: 0.41`, a loop that writes `"epoch%d\t%f"`); the file's name says what the value is.
_BARE = re.compile(rf"^\s*(?:(?i:epoch|iter|iteration|step|batch)?[ \t]*(?P<n>\d+)\s*(?:[:,]|\t)\s*)?(?P<value>{NUM})\s*$")
# A line of values nothing names, in a file whose name says nothing of them either (`output.txt`, `train.log`): one
# float per line (`print(loss.item())`), two or more apart by spaces (`2.411124 0.109375`), a printed tensor once
# `_normalise`d (`tensor(3.2207, device='cuda:0')`), a value before Torch7's xlua bar (`12.24....... 128/50000 ...]
# ETA: 1m`), or a logger's prefix and a counter before values apart by commas (`INFO:name, <time>, epoch, 0040, a, b`).
# Where such lines are nearly all of a file's lines (`unnamed_width`), each value is stored as `<file>[<column>]`,
# role `other`; `ingest.run.loss_by_elimination` may then take one as the training loss, and says so.
MAX_UNNAMED_COLUMNS = 4
_LONE_NUMBER = re.compile(rf"(?<![\w.]){NUM}{_NUM_END}")  # a number of its own (`Epoch 0`), not a name's (`f1`)
UNNAMED_SHARE = 0.9  # the share of a file's lines (of text) its rows of unnamed values must be
_UNNAMED_LEAD = (r"(?:(?:INFO|WARNING|WARN|DEBUG|ERROR|CRITICAL):?[\w.-]*\s*,\s*)?"
                 r"(?:\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?\s*,\s*)?")
_XLUA_BAR = r"\.{3,}(?:[^\n]*?\d+/\d+[^\n]*\]\s*ETA:.*)?"
_UNNAMED_ROW = re.compile(
    rf"^\s*{_UNNAMED_LEAD}(?:(?P<counter>(?i:epoch|iter|iteration|step|batch))\s*,?\s*(?P<n>\d+)\s*,\s*"
    rf"(?P<listed>{NUM}(?:\s*,\s*{NUM}){{0,{MAX_UNNAMED_COLUMNS - 1}}})"
    rf"|(?P<spaced>{NUM}(?:[ \t]+{NUM}){{0,{MAX_UNNAMED_COLUMNS - 1}}}))\s*(?:{_XLUA_BAR})?\s*$")


# The PyTorch tutorials' print of an average loss (`'%s (%d %d%%) %.4f' % (timeSince(start), iter, percent, loss)`):
# the time since the start (and, in the translation tutorial, the time left), the iteration and its share of the
# run, then the value alone: `0m 24s (5000 6%) 3.5270`, `0m 24s (- 6m 5s) (5 6%) 1.53`; or the iteration first,
# the value followed by the sample it printed (`5000 5% (0m 10s) 2.2208 Bazovsky / Polish ✗ (Czech)`).
_CLOCK_MS = r"\d+m\s?\d+s"
_TIMED_ROW = re.compile(rf"^\s*{_UNNAMED_LEAD}(?:{_CLOCK_MS}(?:\s+\(-\s*{_CLOCK_MS}\))?\s+\((?P<n>\d+)\s+\d+%\)"
                        rf"|(?P<n_first>\d+)\s+\d+%\s+\({_CLOCK_MS}\))\s+(?P<value>{NUM})(?:\s+\D.*)?$")


def _unnamed_values(text: str) -> tuple[dict[str, int], list[str]] | None:
    """The counter and the values, as printed, of a line of unnamed values (`_UNNAMED_ROW`, `_TIMED_ROW`); None for
    another line."""
    if not (any(c.isdigit() for c in text) or "nan" in text.lower()):
        return None
    if (timed := _TIMED_ROW.match(text)) is not None:
        return {"step": _count(timed.group("n") or timed.group("n_first"))}, [timed.group("value")]
    found = _UNNAMED_ROW.match(_normalise(text))
    if found is None:
        return None
    if found.group("listed") is not None:
        counter = COUNTER_COLUMNS.get(found.group("counter").lower(), "step")
        return {counter: _count(found.group("n"))}, re.split(r"\s*,\s*", found.group("listed").strip())
    return {}, found.group("spaced").split()


def unnamed_tag(file_name: str, column: int) -> str:
    """The name a column of unnamed values is stored under: `<file>[<column>]` (`output.txt[1]`)."""
    return f"{file_name}[{column}]"


def unnamed_column(file_name: str, tag: str) -> int | None:
    """The column of a tag `unnamed_tag` built for `file_name`; None for any other tag."""
    inner = tag[len(file_name) + 1:-1] if tag.startswith(f"{file_name}[") and tag.endswith("]") else ""
    return int(inner) if inner.isdigit() else None


def unnamed_width(texts: list[str]) -> int | None:
    """How many values each line of a file of unnamed values holds, where `texts` (its lines of text) are that: at
    least `ROW_REPEATS` rows of one width (at most `MAX_UNNAMED_COLUMNS`), `UNNAMED_SHARE` of the lines or more (a
    README is not), not all whole numbers (a list of ids or counts is no log), and no first line of words, as many as
    the columns or more, and no number: a header that names them (Torch7's optim.Logger, a results table). Else None."""
    texts = [t for t in texts if t.strip()]
    rows = [v for v in map(_unnamed_values, texts) if v is not None]
    if len(rows) < ROW_REPEATS or len(rows) < UNNAMED_SHARE * len(texts):
        return None
    width = Counter(len(values) for _, values in rows).most_common(1)[0][0]
    same = [values for _, values in rows if len(values) == width]
    if len(same) < UNNAMED_SHARE * len(texts) or all(_WHOLE.fullmatch(v) for values in same for v in values):
        return None
    if not _LONE_NUMBER.search(texts[0]) and len(_LABEL_WORD.findall(texts[0])) >= width:
        return None  # a header names the columns (`epoch loss acc`, `% mean class accuracy`): a table's, not unnamed
    return width


# Names padded before their colon are a settings dump where the file gives some of them words, not numbers
# (`Mode         : full`, `optimizer      :<TAB>adam`): there, none of them is read (their numbers are settings too).
# A logging level padded to its column (`INFO    : message`, `%(levelname)-8s:`) is a message's lead, not a setting.
_LOG_LEVEL = rb"(?!(?i:info|debug|warn|warning|error|critical|notice|trace)[ \t])"
_PADDED_WORD = re.compile(rb"(?<![\w.])" + _LOG_LEVEL + rb"[A-Za-z_][\w.]*[ \t]{2,}:[ \t]*(?![-+]?(?:\.?\d|(?i:nan|inf)))[^\s\d]")
_PADDED_COLON = re.compile(rb"(?<![\w.])((?!(?i:epoch|iter|iteration|step|batch)[ \t])" + _LOG_LEVEL
                           + rb"[A-Za-z_][\w.]*[ \t]{2,}):")  # not a counter, not a logging level
# A settings dump printed one `name: value` a line (DINO's `print(args)` sorted by name, a YAML config echoed at start,
# `arch: vit_small` over `lr: 0.0005`): a run of `DUMP_LINES` or more such lines (and YAML's `section:` and `- item`
# lines, a comment after a value), `DUMP_WORDS` of them or more holding a word, a path, a boolean or nothing (a number
# with a unit or a clock is no word: `time: 12.3s`), no other pair on a line, no record counter among the names and no
# name on half the lines (a dump names each setting once).
# Its numbers are the run's settings, not records: a second program's settings echoed after the first one's records
# are no points at the first one's last step (`_settings_blanked`).
DUMP_LINES = 4
DUMP_WORDS = 2
_DUMP_LINE = re.compile(rb"^[ \t]*(?:-[ \t]+[^\r\n]*|(?P<key>[A-Za-z_][\w.-]*)[ \t]*:(?:[ \t]+(?P<value>[^\r\n]*))?)\r?$",
                        re.M)
_DUMP_NUMBER = re.compile(rb"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)")
_ANOTHER_PAIR = re.compile(rb"[A-Za-z_]\w*[ \t]*[:=][ \t]*[-+]?\.?\d")  # `loss: 0.5, acc: 0.3`: a record's pairs
_MEASURED = re.compile(rb"[-+]?\.?\d")  # a value with a unit or a clock (`12.3s`, `85%`, `0:01:02`): a record's, no word
_DUMP_COMMENT = re.compile(rb"\s+#.*$")  # YAML's comment after a value (`BATCH_SIZE: 2  # more if memory allows`)
_RECORD_COUNTERS = {b"epoch", b"step", b"iter", b"iteration", b"global_step", b"batch"}


# A dict of lists printed on one line (`print(history.history)`: `{'loss': [0.69, 0.52], 'val_loss': [0.71, 0.60]}`,
# its quotes perhaps made typographic by the page it was pasted from: `{‘loss’: [...]}`), from its brace to the line's
# last one.
_QUOTE = rb"(?:['\"]|\xe2\x80[\x98\x99\x9c\x9d])"
_PRINTED_HISTORY = re.compile(rb"\{\s*" + _QUOTE + rb"[^'\"\r\n\xe2]{1,200}" + _QUOTE + rb"\s*:\s*\[[^\r\n]*\}")


def _histories_taken(data: bytes, offset: int) -> tuple[bytes, pl.DataFrame | None]:
    """`data` with the printed histories in it (`_PRINTED_HISTORY`, read as a JSON document's history is:
    `ingest.jsondocs.printed_history`) blanked in place, and their points (the list index the epoch, an ordinal step;
    the position the line's), or None where there are none."""
    from ingest.jsondocs import printed_history

    if b"[" not in data:
        return data, None
    out, frames = None, []
    for m in _PRINTED_HISTORY.finditer(data):
        cols = printed_history(m.group().decode("utf-8", "replace"))
        if cols is None:
            continue
        out = out if out is not None else bytearray(data)
        out[m.start():m.end()] = b" " * (m.end() - m.start())
        frames.append(pl.DataFrame({**cols, "position": [offset + m.start()] * len(cols["tag"])},
                                   schema={"tag": pl.Utf8, "step": pl.Int64, "value": pl.Float64,
                                           "position": pl.Int64, "wall_time": pl.Float64, "epoch": pl.Int64,
                                           "batch": pl.Int64, "ordinal": pl.Boolean}))
    return (bytes(out), pl.concat(frames)) if frames else (data, None)


def _settings_blanked(data: bytes) -> tuple[bytes, int]:
    """`data` with the numbers of its settings dumps (`DUMP_LINES`) blanked in place (spaces: every position stays), and
    how many lines were blanked."""
    runs: list[list[re.Match[bytes]]] = []
    for m in _DUMP_LINE.finditer(data):
        if m.group("value") and _ANOTHER_PAIR.search(m.group("value")):
            continue  # a record's line (`Epoch: [0/3]  loss: 2.3`) ends a dump
        if runs and data[runs[-1][-1].end():m.start()] in (b"\n", b"\r\n"):
            runs[-1].append(m)
        else:
            runs.append([m])
    out, n = bytearray(data), 0
    for run in runs:
        if len(run) < DUMP_LINES or any(m.group("key") and m.group("key").lower() in _RECORD_COUNTERS for m in run):
            continue
        keys = [m.group("key") for m in run if m.group("key")]
        if keys and 2 * max(keys.count(k) for k in set(keys)) >= len(keys):
            continue  # one name on half its lines or more (`Loss: 644.398` ... `Loss: -nan`): one quantity's records
        values = [_DUMP_COMMENT.sub(b"", m.group("value") or b"").strip() for m in run]
        numbers = [m for m, v in zip(run, values) if m.group("key") and _DUMP_NUMBER.fullmatch(v)]
        worded = sum(not m.group("key") or not _DUMP_NUMBER.fullmatch(v) and not _MEASURED.match(v)
                     for m, v in zip(run, values))
        if worded < DUMP_WORDS or not numbers:
            continue
        for m in numbers:
            end = m.end() - (data[m.end() - 1:m.end()] == b"\r")
            out[m.start():end] = b" " * (end - m.start())
            n += 1
    return (bytes(out), n) if n else (data, 0)


_COUNTED_LINE = re.compile(rb"^[ \t]*(\d{1,18})[ \t]*:[ \t]*(" + NUM.encode() + rb")[ \t]*\r?$", re.M)
_LONE_UNDER_COUNTER = re.compile(rb"^([^\d\r\n]*?)(\d{1,18})([^\d\r\n]*?)\r?\n()[ \t]*(" + NUM.encode()
                                 + rb")[ \t]*\r?$", re.M)
# (one search each, cheap, before the line-by-line ones: a literal `\n` lets the engine skip ahead)
_COUNTED_HINT = re.compile(rb"\n[ \t]*\d{1,18}[ \t]*:[ \t]*(?:" + NUM.encode() + rb")[ \t]*\r?$", re.M)
_LONE_HINT = re.compile(rb"\n[ \t]*(?:" + NUM.encode() + rb")[ \t]*\r?$", re.M)
COUNTED_TAG = "loss"  # what `N: value` lines of a file whose name says nothing are (`_State.counted_values`)
# A row of numbers only, apart by commas or one space (`f.write(f"{epoch}, {loss},{acc}\\n")`, `print(loss, batch_idx)`);
# columns padded to a width are a printed table (sklearn's classification_report), named by its header or not at all.
_NUMBER_ROW = re.compile(rb"^[ \t]*(" + NUM.encode() + rb"(?:(?:[ \t]*,[ \t]*|[ \t])" + NUM.encode()
                         + rb"){1,7})[ \t]*,?[ \t]*\r?$", re.M)
_ROW_SPLIT = re.compile(r"\s*,\s*|\s+")
_LINE_WITH_DIGIT = re.compile(rb"^[^\n\d]*\d", re.M)
_WHOLE = re.compile(r"[-+]?\d+")
ROW_REPEATS = 6  # rows of numbers a chunk must hold before its columns are named
UNNAMED_HEAD_BYTES = 64 << 10  # the first lines a file of unnamed values is judged on (`_State.unnamed_rows`)
_LIST = re.compile(rf"^\s*\[\s*{NUM}(?:\s*,\s*{NUM})+\s*,?\s*\]\s*$")
_LIST_ITEM = re.compile(NUM)


@dataclass
class _Block:
    """An evaluation block being read (`_State.eval_blocks`)."""

    split: str  # the name its records take (`val`, `test`)
    headed: bool = False  # opened by a bare header (`Validation:`) in a log that heads its training too (`Training:`):
    # every record up to the next header or `Epoch N` line is the block's, whatever its shape
    weak: bool = False  # opened by a count of samples (`Evaluating 500 samples`): a training shape, or a record that
    # counts epochs, ends it (`Test set: 172 samples` in a data summary is no evaluation)
    shape: str | None = None  # the outline of its records, where they have the training's
    at_step: int | None = None  # the step of the last training record before its opener: the step it evaluates
    records: int = 0
    stepped: bool = False  # whether a record of it printed a step counter
    pending: list[int] = field(default_factory=list)  # records of the training's shape, held until a marker


# Words of lines that open, or close, an evaluation block (`_block_line`): the split (as `SPLIT_WORDS` and its
# verbs), and what may stand beside it in a line that only announces the block or its end.
_EVAL_VERBS = {"evaluating": "eval", "evaluate": "eval", "validating": "val", "validate": "val", "inference": "eval"}
_OPEN_WORDS = {"begin", "begins", "beginning", "start", "starts", "starting", "started", "run", "running", "now", "on",
               "the", "set", "subset", "split", "phase", "mode", "loop", "model", "results", "result", "metrics",
               "epoch", "step", "iter", "iteration", "round", "for", "of", "at", "after", "with", "performing", "do",
               "doing", "in", "progress", "data", "dataset", "samples", "sample", "examples", "images", "batches",
               "num", "number", "cross"}  # `Cross validation...`
_CLOSE_WORDS = {"samples", "examples", "images", "instances", "batches", "num", "number", "total", "done",
                "finished", "end", "ended", "complete", "completed", "over", "of", "evaluated", "time", "s"}
_COUNT_WORDS = {"samples", "sample", "examples", "images", "instances", "batches", "num", "number", "total"}
# Python logging's default prefix `LEVEL:logger:` names the logger (`INFO:mi-test:loss=...`: an experiment called
# `mi-test`), not the split of the values after it; a logger named by a split word alone (`INFO:test:`) still is one.
_LEVEL_AND_LOGGER = rf"\b(?:INFO|WARNING|WARN|DEBUG|ERROR|CRITICAL):(?!{_HELD_OUT}:)[\w.-]+:(?!\s)|"
_LOG_PREFIX = re.compile(_LEVEL_AND_LOGGER
                         + r"\[[^\]]*\]|\([^)]*\)|[\w.-]+\.py\b|\b(?:INFO|WARNING|WARN|DEBUG|ERROR|CRITICAL)\b")
_SECTION_KEY = re.compile(r"^\s*(?:[A-Z_]+|[a-z_]+):\s*$")  # a config dump's section (yacs' `TEST:`), not a header
# A setting whose value is a split's name, as a dump writes it (YAML's indented `  mode: val`, `split = "test"`,
# `--phase=train`, `'mode': 'val',`): it says which split a dataset entry is, not that an evaluation begins. A line at
# the margin that prints `Phase: val` stays a header.
_SPLIT_SETTING = re.compile(r"^(?:\s+(?:-\s+)?|--|\s*['\"])[A-Za-z_][\w.-]*['\"]?\s*[:=]\s*['\"]?[A-Za-z]+['\"]?,?\s*$"
                            r"|^\s*[A-Za-z_][\w.-]*\s*=\s*['\"]?[A-Za-z]+['\"]?,?\s*$|^\s+-\s+['\"]?[A-Za-z]+['\"]?\s*$")
_SOURCE_OR_LEVEL = re.compile(_LEVEL_AND_LOGGER + r"[\w.-]+\.py\b|\b(?:INFO|WARNING|WARN|DEBUG|ERROR|CRITICAL)\b")
_CLAUSE_AFTER_PREFIX = re.compile(r"\s-\s|>>\s|\s\|\s")  # `name - INFO - text`, `trainer.py:41 >> text`
_SPLIT_HINT = r"(?i:eval|\bval|test|train|inference)"  # lines `_block_line` reads, digits or not


_FRACTION = re.compile(r"(?<![\w/.:])\d+\s*/\s*\d+(?![\w/.:])")  # a batch's place in a pass (`1/3`, `[100/196]`)


def _held_out(metrics: dict[str, float]) -> bool:
    return bool(metrics) and all(role_of(t).split in ("val", "test") for t in metrics)


def _base(tag: str) -> str:
    """A tag without the split word a line's label put before it (`Test Acc@1` -> `Acc@1`)."""
    first, _, rest = tag.partition(" ")
    return rest if rest and first.lower() in SPLIT_WORDS else tag


def _eval_passes(parsed: list[tuple]) -> list[tuple]:
    """The records of `parsed` with each evaluation pass printed batch by batch made one evaluation.

    A pass is two or more records in a row whose values are all a held-out split's, under one epoch, each printing its
    batch's place (`Test: [100/196] ... Loss 2.23 (1.61)`, `Valid | Epoch 1 | 2/3 | Loss 0.22`): each batch's value is
    no evaluation of its own. The evaluation is the summary printed right after the batches (a record of a held-out
    value without a batch's place: `Valid Summary | ...`, `Epoch [0] Validation Phase Loss: 0.06`; or a starred
    ` * Acc@1 62.6 Acc@5 85.6` with the batches' names, which takes their split), and for what the summary does not
    print (no value of the same name or role), the pass's last running average where printed (`(1.61)`), else the
    mean of its printed batches. A run of held-out records without a batch's place (one evaluation per epoch, printed
    back to back) is left as it is."""
    out: list[tuple] = []
    i = 0
    while i < len(parsed):
        j = i
        while j < len(parsed) and _batch_of_pass(parsed[j], parsed[i]):
            j += 1
        if j - i < 2:
            out.append(parsed[i])
            i += 1
            continue
        last = parsed[j - 1]
        names = {_base(t): t for t in last[4]}
        summary = _summary_of_pass(parsed[j] if j < len(parsed) else None, parsed[i], names)
        covered = {_base(t) for t in summary[4]} | {role_of(t).role for t in summary[4]} if summary else set()
        kept = {t: _running_average(last[3], _base(t), [r[4][t] for r in parsed[i:j] if t in r[4]])
                for t in last[4] if _base(t) not in covered and role_of(t).role not in covered}
        if kept:
            out.append((*last[:4], kept, *last[5:]))
        if summary is not None:
            out.append(summary)
            j += 1
        i = j
    return out


def _summary_of_pass(record: tuple | None, first: tuple, names: dict[str, str]) -> tuple | None:
    """`record` as the summary of the pass `first` opens (`_eval_passes`), or None where it is none."""
    if record is None or record[9] is not None or not record[4]:
        return None
    _, _, _, text, metrics, counters, *_ = record
    if text.lstrip().startswith("*") and not counters and set(metrics) <= set(names):
        return (*record[:4], {names[t]: v for t, v in metrics.items()}, *record[5:])  # ` * Acc@1 ...`: the pass's
    epochs = (counters.get("epoch"), first[5].get("epoch"))
    held = any(role_of(t).split in ("val", "test") for t in metrics)
    return record if held and not _FRACTION.search(text) and (None in epochs or epochs[0] == epochs[1]) else None


def _batch_of_pass(record: tuple, first: tuple) -> bool:
    """Whether a parsed record is a batch line of the evaluation pass `first` opens (`_eval_passes`)."""
    _, _, _, text, metrics, counters, _, _, _, listed = record
    return listed is None and _held_out(metrics) and counters.get("epoch") == first[5].get("epoch") \
        and ("batch" in counters or _FRACTION.search(text) is not None)


def _running_average(text: str, name: str, values: list[float]) -> float:
    """The running average printed after the last batch's value in brackets (`Loss 2.2271e+00 (1.6076e+00)`: 1.6076),
    else the mean of the values the pass printed."""
    found = re.search(rf"{re.escape(name)}\s*[:=]?\s*{NUM}\s*\(\s*({NUM})\s*\)", text)
    return _float(found.group(1)) if found else float(np.mean(values))


def _block_line(text: str, metrics: dict[str, float]) -> tuple[str | None, str | None]:
    """What a line says of evaluation blocks: ("open", split) where it announces one (`Eval begin...`,
    `***** Running Evaluation *****`, `Test on Epoch 3`), ("close", split) at its end (`Evaluation done`), ("count",
    split) where it counts its samples (`Eval samples: 11219`, `Evaluating 500 samples`: an end marker, or an opener
    where no block is open), ("train", None) where it says train and no held-out split, else (None, None). Only the
    line's last clause after a logger's prefix counts."""
    if not re.search(_SPLIT_HINT, text) or not metrics and _SPLIT_SETTING.match(text):
        return None, None
    clause = next((c for c in reversed(_CLAUSE_AFTER_PREFIX.split(_LOG_PREFIX.sub(" ", text)))
                   if re.search("[A-Za-z]", c)), "")
    ws = [w for w in words(clause) if not w.isdigit()]
    held = [SPLIT_WORDS.get(w) or SPLIT_WORDS.get(_EVAL_VERBS.get(w, "")) for w in ws]
    split = next((s for s in held if s not in (None, "train")), None)
    if split is not None:
        rest = {w for w, s in zip(ws, held) if s is None}
        if "train" in held or len(metrics) > 1:
            return None, None
        if rest & _COUNT_WORDS and (metrics or re.search(r"\d", clause)) and rest <= _CLOSE_WORDS | _OPEN_WORDS:
            return "count", split  # a count of its samples: the block's end marker, or its opener where none is open
        if not metrics and rest and rest <= _CLOSE_WORDS - _COUNT_WORDS:
            return "close", split
        if not metrics and rest <= _OPEN_WORDS and not _SECTION_KEY.match(clause):
            return "open", split
        return None, None
    return ("train", None) if "train" in held else (None, None)


def _bare_header(text: str) -> bool:
    """A line that names a split and nothing else (`Training:`, `Validation:`, `Evaluating...`): a block's header."""
    ws = [w for w in words(_LOG_PREFIX.sub(" ", text)) if not w.isdigit()]
    return bool(ws) and all(w in SPLIT_WORDS or w in _EVAL_VERBS for w in ws) and text.rstrip().endswith((":", "..."))


_SPLIT_ABBREVIATED = re.compile(rf"({'|'.join(w for w in _ABBREVIATED if w in SPLIT_WORDS)})\.\s", re.I)


def _labelled_split(text: str, metrics: dict[str, float]) -> str | None:
    """The held-out split a record line's own label names before its first value (`Test set: Average loss: X`,
    mmengine's `Epoch(val) [1][10/50]  loss: X`) in its first two words, where it names no train split; None
    otherwise. Only the label's last clause after a logger's prefix counts (`[valid][INFO] - ...` names its tags
    itself). A split abbreviated at the head of the first name (`Test. Acc.: 97.4% | Loss: 0.08`) labels the line
    as the word alone would (`Test Acc.: ...` is one name, `CLAUSE_SPLIT`'s abbreviation); a split word written apart
    at the head of the first name (`test accuracy: 0.67, loss: 0.49`) is `_first_name_split`'s."""
    first = next(iter(metrics))
    abbreviated = _SPLIT_ABBREVIATED.match(first)
    if abbreviated:
        split = SPLIT_WORDS.get(abbreviated.group(1).lower())
        return split if split != "train" else None
    at = text.find(first)
    if at <= 0 or not re.search(_SPLIT_HINT, text[:at]):
        return None
    head = _SOURCE_OR_LEVEL.sub(" ", text[:at])
    clause = next((c for c in reversed(_CLAUSE_AFTER_PREFIX.split(head)) if re.search("[A-Za-z]", c)), "")
    held = [SPLIT_WORDS.get(w) or SPLIT_WORDS.get(_EVAL_VERBS.get(w, "")) for w in words(clause) if not w.isdigit()]
    split = next((s for s in held[:2] if s not in (None, "train")), None)  # a label, not prose (`on the test images`)
    return None if "train" in held else split


def _other_widths(rows: list[list[str]], width: int) -> set[int]:
    """Widths besides `width` of rows of numbers whose first column counts as `counted_rows` reads a counter (whole
    numbers counting up, starting again at most at their first value) beside values not all whole, `ROW_REPEATS` or
    more of each: the same records with a column more or fewer (a launch appended to the log that prints another
    set of metrics, `epoch, loss, ppl, acc` then `epoch, loss, acc`). Their first other column is the loss too."""
    out = set()
    for w, n in Counter(len(r) for r in rows).items():
        if w == width or w < 2 or n < ROW_REPEATS:
            continue
        some = [r for r in rows if len(r) == w]
        if not all(_WHOLE.fullmatch(r[0]) for r in some) or all(_WHOLE.fullmatch(r[1]) for r in some):
            continue
        counts = [int(r[0]) for r in some]
        if all(b > a or b <= counts[0] for a, b in zip(counts, counts[1:])) \
                and sum(b > a for a, b in zip(counts, counts[1:])) >= len(some) // 2:
            out.add(w)
    return out


def total_of_terms(metrics: dict[str, float]) -> dict[str, float]:
    """A record of a loss's terms with their sum under a bare total's name (`cls: 2.02, reg: 8.01, d0.cls: 1.77,
    trans_loss: 0.37, total: 51.77`, a map detector's mmcv hook): the total is the loss they sum to, named so
    (`total loss`), as a table's `total` column beside loss columns is. Only where two or more of the record's other
    names are loss terms, none is the loss itself, and the total holds a fraction (a count of samples is no sum)."""
    total = next((k for k in metrics if k.lower() in TOTAL_COLUMNS), None)
    if total is None or not math.isfinite(metrics[total]) or metrics[total] == int(metrics[total]):
        return metrics
    terms = [role_of(k) for k in metrics if k != total]
    if sum(r.role == "train_loss" for r in terms) < 2 or any(r.role == "train_loss" and r.canonical for r in terms):
        return metrics
    return {(f"{k} loss" if k == total else k): v for k, v in metrics.items()}


def _fields(text: str) -> list[str]:
    """A table line's cells; a cell set in Markdown's bold or italics (`**0.1843**`, `_0.07_`: a table pasted into an
    issue or a pull request, its best values marked) holds what is inside the marks."""
    text = _TQDM_TAIL.sub("", ANSI.sub("", text) if "\x1b" in text else text).strip(" \t|\r\n")
    return [_EMPHASIS.sub(r"\2", f) for f in _FIELD_SPLIT.split(text) if f]


_EMPHASIS = re.compile(r"^(\*{1,2}|__)(?=\S)(.+?)(?<=\S)\1$")


def _cell_terms(name: str, items: str) -> dict[str, float]:
    """The values of a table cell that holds a list: each the column's element (`Train loss_0`, as a name before a
    list names its elements); under a loss's column their sum is the column's value too, the loss the terms add up
    to (DeepXDE prints a list of its loss terms a row and their sum as `train loss:` under `Best model at step N`).
    An empty list holds no value."""
    values = [_float(v) for v in _LIST_ITEM.findall(items)]
    out = {f"{name}_{i}": v for i, v in enumerate(values)}
    if len(values) > 1 and role_of(name).role in ("train_loss", "val_loss"):
        out[name] = float(f"{math.fsum(values):.12g}")  # to the terms' digits, not the float sum's dust
    elif len(values) == 1:
        out = {name: values[0]}
    return out


def _count(digits: str) -> int:
    """A printed counter as an int, or PAST_64_BITS where the store could not hold it (never `int()` of thousands of
    digits, which Python refuses)."""
    value = int(digits) if len(digits.lstrip("+-")) <= 19 else PAST_64_BITS
    return value if abs(value) <= INT64_MAX else PAST_64_BITS


def _bare_values(text: str) -> list[tuple[int | None, float]] | None:
    """(counter or None, value) of a line that is only a value (`0.693`, `12: 0.693`) or a list of values."""
    bare = _BARE.match(text)
    if bare:
        n = bare.group("n")
        return [(_count(n) if n is not None else None, _float(bare.group("value")))]
    if _LIST.match(text):
        return [(None, _float(v)) for v in _LIST_ITEM.findall(text)]
    return None


def _same_but_prefix(a: str, b: str, metrics: dict[str, float]) -> bool:
    """Whether two lines differ only before their first metric (`node-1: {'loss': 0.5}`, `node-2: {'loss': 0.5}`),
    not in text between or after the values (`Step [6/48], Loss: nan` and `Step [12/48], Loss: nan` are two), nor
    in a count against a total before them (`[episode 50/100] => loss:nan` and `[episode 100/100] => loss:nan` are
    two: a node's name is never counted against a total), nor in a number a word names (`epoch 1[5000] loss: nan`
    and `epoch 1[5500] loss: nan` are two), nor only in their time of day (one logger's two records, stamped a
    millisecond apart)."""
    first = min((i for i in (a.find(t.split()[-1]) for t in metrics) if i >= 0), default=-1)
    if first < 0 or not b.endswith(a[first:]):
        return False
    head_a, head_b = a[:first], b[:len(b) - len(a) + first]
    if _CLOCK.sub("", head_a) == _CLOCK.sub("", head_b):
        return False  # apart only in their time of day (`11:00:00,123`, `11:00:00,124`): one writer's two records
    lead = len(commonprefix([head_a, head_b]))
    if any(_COUNT_OF_TOTAL.match(head, lead) for head in (head_a, head_b)):
        return False
    at_number = all(head[lead:lead + 1].isdigit() for head in (head_a, head_b))
    before = head_a[:lead].rstrip("0123456789")  # the text before the number where the heads part
    return not (at_number and _NAMED_NUMBER.search(before) and not _NODE_NAME.search(before))


_COUNT_OF_TOTAL = re.compile(r"\d*\s*/\s*\d")  # where two heads part: a number counted against a total (`50/100`)
# where two heads part at a number: one a word names (`Sample: 4`, `epoch 1[5000]`) counts records; a node's or
# rank's number stands at the line's start, in an address or host name (`10.0.0.7:`, `gpu-3`), or behind a rank word
_NAMED_NUMBER = re.compile(r"[A-Za-z][\w@]*\s*[:=#]?\s*\[?$|\d\s*\[$")
_NODE_NAME = re.compile(
    r"(?i)(?:rank|node|worker|gpu|device|host|proc|process|default|machine)[\s_:=#-]*\[?$|[.\-_]$")
_CLOCK = re.compile(r"\d{1,2}:\d\d:\d\d(?:[.,]\d+)?")  # a time of day in a line's stamp


_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}


def _month(text: str) -> int:
    """A month printed as a number (`06`) or as its name (`Jun`)."""
    return _MONTHS.get(text) or int(text)


@lru_cache(maxsize=1024)
def _midnight(year: str, month: str, day: str) -> tuple[datetime, float] | None:
    """Midnight UTC of a date, and its timestamp; None for a date that does not exist (`2024-02-30`)."""
    try:
        midnight = datetime(int(year), _month(month), int(day), tzinfo=timezone.utc)
    except ValueError:
        return None
    return midnight, midnight.timestamp()


def _offset_seconds(tz: str | None) -> float:
    if not tz or tz == "Z":
        return 0.0
    sign = -1 if tz[0] == "-" else 1
    digits = tz[1:].replace(":", "")
    return sign * (int(digits[:2]) * 3600 + int(digits[2:4]) * 60)


# ------------------------------------------------------------------------------------------- claims

CONSOLE_NAMES = re.compile(
    r"^(?:.*\.log|.*\.out|.*\.err|nohup\.out|slurm-.*\.out|stdout.*|stderr.*|console.*\.txt|train.*\.txt|log\.txt)$",
    re.I)
# W&B's own debug logs are the client's, not the training script's output.
NOT_CONSOLE = re.compile(r"^debug(?:-internal|-core|-cli\..*)?\.log$", re.I)


def claims_console(rel) -> bool:
    return bool(CONSOLE_NAMES.match(rel.name)) and not NOT_CONSOLE.match(rel.name)



def _sniff(sample: bytes, name: str = "") -> tuple[bool, str]:
    """Whether a text file's sampled lines are a training log, and what they hold, in words."""
    if not sample:
        return False, "it is empty"
    sample = as_utf8(sample)
    why = binary_reason(sample[:4096])
    if why is not None:
        return False, f"it holds binary data, not text ({why})"
    sample = _as_printed(sample)
    lines = re.split(r"\r\n|\r|\n", sample.decode("utf-8", errors="replace"))
    state = _State(stem_tag=stem_tag(Path(name)) if name else None, held_stem=_held_stem(Path(name)) if name else None)
    state.counted_values(sample)  # rows of numbers with a counter column (a header never printed) are records
    counted = named = bare = tabled = 0
    records: dict[str, int] = {}
    seen: dict[str, None] = {}  # the names read, in order, for the message
    texts = [line for line in lines if line.strip()]
    for line in texts:
        metrics, counters, _, _, looks, _ = _parse(line)
        metrics, counters, _, patterns, listed = state.tabled(line, metrics, counters, looks, ())
        seen.update(dict.fromkeys(metrics))
        if listed or not metrics and _bare_values(line):
            bare += 1
            continue
        if patterns == ("header_table",) and metrics:
            tabled += 1
        if metrics and counters.keys() & {"step", "epoch", "batch"}:
            counted += 1
        if any(role_of(tag).role != "other" or METRIC_WORDS.search(tag) for tag in metrics):
            named += 1  # a loss, an lr, ...; or a quantity a metric's word names (`Mean Reward: 2.33`, one a line)
            key = "named " + outline(line)
            records[key] = records.get(key, 0) + 1
        elif len(_parse(line, repeated=True)[0]) >= 2:
            records[outline(line)] = records.get(outline(line), 0) + 1
        if counted >= 2 or tabled >= 2 or max(records.values(), default=0) >= REPEATS:
            return True, "its lines carry metrics"
    if bare and bare >= UNNAMED_SHARE * len(texts) and state.stem_tag:
        return True, f"its lines are values of {state.stem_tag}"
    if not state.stem_tag and (width := unnamed_width(texts)):
        return True, f"its lines are rows of {width} unnamed value{'s' if width > 1 else ''}"
    sampled = f"{len(texts):,} sampled lines"
    if not texts:
        return False, "it holds no text lines"
    if bare:
        return False, (f"{bare:,} of its {sampled} are bare values, too few to be a series"
                       if state.stem_tag else "its lines are bare values, but its name does not say of what")
    if counted or named or records:
        return False, (f"of its {sampled}, {counted} carry a metric with a step or epoch and {named} a named "
                       f"quantity (loss, accuracy, lr, ...): too few for a training log{_printed_names(seen)}")
    return False, f"none of its {sampled} carries a metric (a number named as a loss, accuracy, lr, ... or under a step)"


MAX_NAMES_SAID = 6


def _printed_names(seen: dict[str, None]) -> str:
    """`; no loss-like series: it prints acc, lr` where none of the names read is a loss's (what a user looks for
    first when a log is refused), or `; it prints loss, acc` where one is."""
    if not seen:
        return ""
    names = ", ".join(list(seen)[:MAX_NAMES_SAID]) + (", ..." if len(seen) > MAX_NAMES_SAID else "")
    if any(role_of(tag).role in ("train_loss", "val_loss") for tag in seen):
        return f"; it prints {names}"
    return f"; no loss-like series: it prints {names}"


def sniff_console(head: bytes, name: str = "") -> bool:
    """A text file whose lines (sampled across it by `ingest.formats.sample`) are a training log: two lines that
    yield metrics with a step, epoch or batch; `REPEATS` lines of one outline with a named quantity
    (`train_mean loss: 2.27`, `idx: 0loss: 8.46`); two rows of a table under its header; `REPEATS` record lines of one outline that yield
    two metrics or more each (`[  1]    1440 || B: 5.495 | C: 3.668 | T: 17.647`); in a file whose name says what
    they are (`loss.txt`), bare values; or, in any other, rows of values nothing names (`unnamed_width`)."""
    return _sniff(head, name)[0]


def why_not_console(sample: bytes, name: str) -> str:
    """Why a text file is not read as a training log, in words (for `-v` and the read problems)."""
    taken, why = _sniff(sample, name)
    return "read as a console log" if taken else f"not read as a training log: {why}"


def prints_a_loss(sample: bytes) -> bool:
    """Whether any sampled line of a text file yields a training or validation loss (`loss: inf`): for a file whose
    name already says it is a training log (`train.log`), one such line makes it a run, however short (a crash
    after three batches); a file of any other name needs `sniff_console`'s stronger evidence."""
    sample = as_utf8(sample)
    if not sample or _is_binary(sample[:4096]):
        return False
    sample = _as_printed(sample)
    for line in re.split(r"\r\n|\r|\n", sample.decode("utf-8", errors="replace")):
        if line.strip() and any(role_of(tag).role in ("train_loss", "val_loss") for tag in _parse(line)[0]):
            return True
    return False
