"""What a console log says in words rather than as a value: a non-finite loss or gradient, a resume from a checkpoint.

Real logs announce these in prose (`nan loss caught, skipping batch`, `Loss is nan, stopping training`, YOLOv5's
`WARNING: non-finite loss, ending training`, Keras' `Batch 5: Invalid loss, terminating training`, TensorFlow's
`Model diverged with loss = NaN.`, `Found inf or nan in gradients, skipping step`; `Resume training from <path> @ 9`,
`Resuming from checkpoint ...`, `=> loaded checkpoint '...' (epoch 9)`, HF's `Continuing training from checkpoint,
will skip to saved global_step`, Lightning's `Restored all states from the checkpoint at ...`, ssd.pytorch's
`Resuming training, loading ./weights/ssd300_VOC_10000.pth...`); and the end of training (`Training complete in 946m
39s`), which a log that trains on after it, its counter going on, shows a resume by. The console reader
stores each such line, as printed, in the `texts` table (tag: its `kind`, at the line's step and byte offset), and
the judge reads what it says with `read` (one grammar for both). A line is no announcement where it states a setting
or an option rather than an event: a help text (`--skip-nan  skip batches with nan loss`), a condition (`stop if the
loss is nan`), code quoted in a traceback, a negation (`no checkpoint found, not resuming`); settings dumps are
blanked by the console reader's `ignore` patterns before this grammar runs.

Each pattern is written in the syntax both Python's `re` and polars' (Rust) engine accept: their union is the
reader's one bulk pass over a chunk's lines, and only the lines it keeps are read here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NONFINITE_LOSS = "announced/nonfinite_loss"  # the training loss turned NaN/Inf (the line says so)
NONFINITE_GRAD = "announced/nonfinite_grad"  # a gradient turned NaN/Inf and its step was skipped
RESUME = "announced/resume"  # training went on from a checkpoint
TRAIN_END = "announced/train_end"  # the training said it was over (records after it are another launch's)
KINDS = (NONFINITE_LOSS, NONFINITE_GRAD, RESUME, TRAIN_END)

MAX_TEXT = 240  # characters of a line kept as its quote (the rest is cut, `...`)

_NF = r"(?:nan|inf|infinite|infinity|non-?finite)"
_NF2 = rf"{_NF}(?:\s*(?:or|and/or|/|and)\s*{_NF})?"


@dataclass(frozen=True)
class Phrase:
    """One way a log announces an event; `example` is a line it reads (tested), `strong` whether the words alone
    say so (a weak one, `loaded checkpoint ... (epoch 9)`, also opens an evaluation: the judge asks the records)."""

    name: str
    kind: str
    regex: str
    example: str
    strong: bool = True
    option: bool = False  # a command line's option: read on a command line, and only where it names a counter


PHRASES: tuple[Phrase, ...] = (
    # `nan loss caught, skipping batch`, `Non-finite loss, ending training`, `Invalid loss, terminating training`
    Phrase("nonfinite_loss_words", NONFINITE_LOSS, rf"(?i)\b{_NF2}\s+(?:training\s+|train\s+)?loss(?:es)?\b"  # `loss: 209.18` after a NaN value is a metric line
           r"(?:\s*[,.;!(\[]|\s*[:=]\s*(?:[^-+.\d\s]|$)|\s+[a-z]|\s*$)",
           "nan loss caught, skipping batch"),
    # Keras' TerminateOnNaN: `Batch 5: Invalid loss, terminating training`
    Phrase("invalid_loss", NONFINITE_LOSS, r"(?i)\binvalid\s+loss\s*,\s*terminating\b",
           "Batch 5: Invalid loss, terminating training"),
    # `Loss is nan, stopping training` (DeiT, MAE, DINO), `loss became inf`, detectron2's `Loss became infinite or NaN`
    Phrase("loss_is_nonfinite", NONFINITE_LOSS,
           rf"(?i)\b(?:training\s+|train\s+|total\s+)?loss(?:es)?\s+(?:value\s+)?(?:is|was|are|were|became|becomes|has\s+become"
           rf"|turned|turns|went|goes|got)\s+(?:to\s+)?{_NF2}\b",
           "Loss is nan, stopping training"),
    # `Detected NaN in loss`, `Encountered inf values in the loss`
    Phrase("nonfinite_in_loss", NONFINITE_LOSS,
           rf"(?i)\b(?:detected|found|encountered|got|caught|saw|observed)\s+(?:an?\s+)?{_NF2}\s+(?:values?\s+)?"
           rf"(?:in|for|from|at)\s+(?:the\s+)?(?:training\s+|train\s+)?loss",
           "Detected NaN in loss"),
    # TensorFlow's NanTensorHook: `Model diverged with loss = NaN.`
    Phrase("model_diverged", NONFINITE_LOSS, rf"(?i)\bmodel\s+diverged\s+with\s+loss\s*=\s*{_NF}\b",
           "ERROR:tensorflow:Model diverged with loss = NaN."),
    # Lightning's EarlyStopping(check_finite=True): `Monitored metric val_loss = nan is not finite. ... Signaling
    # Trainer to stop.` (a loss of any split: the weights it is computed with are no longer finite)
    Phrase("monitored_loss_not_finite", NONFINITE_LOSS,
           rf"(?i)\bmonitored\s+metric\s+\S*loss\S*\s*=\s*{_NF}\s+is\s+not\s+finite",
           "Monitored metric train_loss = nan is not finite. Previous best value was 0.512. Signaling Trainer to stop."),
    # `Found inf or nan in gradients, skipping step`; ESPnet's `The grad norm is nan. Skipping updating the model.`;
    # Megatron's `found NaN in local grad norm ...`; fairseq's `FloatingPointError: gradients are Nan/Inf`
    Phrase("nonfinite_in_grads", NONFINITE_GRAD,
           rf"(?i)\b{_NF2}\s+(?:values?\s+)?(?:found\s+)?in\s+(?:the\s+)?(?:[a-z]+\s+)?(?:grad|grads|gradients?)\b",
           "Found inf or nan in gradients, skipping step"),
    Phrase("grads_are_nonfinite", NONFINITE_GRAD, rf"(?i)\bgrad(?:ient)?s\s+(?:are|were|became)\s+{_NF2}\b",
           "FloatingPointError: gradients are Nan/Inf"),
    Phrase("grad_norm_is_nonfinite", NONFINITE_GRAD,
           rf"(?i)\bgrad(?:ient)?\s*norm\s+(?:is|was|became)\s+{_NF2}\b", "The grad norm is nan. Skipping updating the model."),
    # `Resume training from <path> @ 9`, `Resuming from checkpoint ...`, `[Checkpoint] resumed from X at step N`,
    # `Resumed at step 705000`, MXNet's `Resume training with (gpu(0)) from epoch 149`
    Phrase("resume_from", RESUME, r"(?i)\bresum(?:e|es|ed|ing)\b[^\n]{0,48}?\s(?:from|at)\s+\S",
           "Resume training from runs/fold_0/checkpoint/best_metric.pth @ 9"),
    # A resume that names its checkpoint without a counter (ssd.pytorch: `Resuming training, loading <path>...`)
    Phrase("resume_loading", RESUME,
           r"(?i)\bresum(?:e|es|ed|ing)\s+(?:the\s+)?(?:training|train|run|model)\b\W{0,4}(?:by\s+)?(?:load|restor)(?:e|es|ed|ing)\b",
           "Resuming training, loading ./weights/ssd300_VOC_10000.pth..."),
    # A saved model found and the training carried on from it (`Model found at path <ckpt>, pursuing the training`,
    # `Checkpoint found, continuing training`): the script's own resume logic
    Phrase("found_carrying_on", RESUME,
           r"(?i)\b(?:model|checkpoint|ckpt|weights|snapshot)\b[^\n]{0,16}?\bfound\b[^\n]{0,160}?"
           r"\b(?:pursu|continu|resum)(?:e|es|ed|ing)\s+(?:the\s+)?training\b",
           "Model found at path output_networks/celeba_cropped/celeba_cropped_s0_i16000.pdparams, pursuing the training"),
    # The weights restored for a resume in so many words (PaddleDetection's `Finish resuming model weights: <path>`,
    # where its start from pretrained weights says `Finish loading model weights`)
    Phrase("resuming_weights", RESUME, r"(?i)\bresum(?:e|es|ed|ing)\s+(?:the\s+)?(?:model\s+)?weights\b",
           "[07/01 09:15:48] ppdet.utils.checkpoint INFO: Finish resuming model weights: output/model_final.pdparams"),
    # The same in Chinese, as scripts written in it print it: `从checkpoint恢复训练: <path>` (training resumed from a
    # checkpoint), `断点续训` (training carried on from where it broke off)
    Phrase("resume_words_zh", RESUME, r"恢复训练|断点续训|从\s*(?:checkpoint|ckpt|检查点|断点)\s*(?:处\s*)?恢复",
           "🔄 从checkpoint恢复训练: checkpoints/checkpoint_epoch_11.pt"),
    # mmcv's and mmengine's runners: `resumed epoch 3, iter 120`, `resumed epoch: 3, iter: 120`
    Phrase("resumed_epoch", RESUME, r"(?i)\bresumed\s+epoch\s*:?\s*\d", "resumed epoch: 3, iter: 120"),
    # HF Trainer: `Continuing training from checkpoint, will skip to saved global_step`, `Continuing training from
    # epoch 3`, `Continuing training from global step 1500`
    Phrase("continuing_training", RESUME,
           r"(?i)\bcontinuing\s+training\s+from\s+(?:checkpoint|epoch|global\s+step|step)\b",
           "  Continuing training from checkpoint, will skip to saved global_step"),
    # Lightning's fit from `ckpt_path`: `Restored all states from the checkpoint at ...` (its `Restoring states from
    # the checkpoint path at ...` also precedes a test, so it is read as weak)
    Phrase("restored_states", RESUME, r"(?i)\brestored\s+all\s+states\s+from\s+the\s+checkpoint\b",
           "Restored all states from the checkpoint at lightning_logs/version_0/checkpoints/epoch=9-step=100.ckpt"),
    Phrase("restoring_states", RESUME, r"(?i)\brestoring\s+states\s+from\s+the\s+checkpoint\b",
           "Restoring states from the checkpoint path at lightning_logs/version_0/checkpoints/epoch=9.ckpt",
           strong=False),
    # The optimizer's or scheduler's state loaded (fvcore's and maskrcnn-benchmark's checkpointers: `Loading optimizer
    # from <checkpoint>`): a fine-tuning start loads weights only, so training state loaded is a resume
    Phrase("training_state_loaded", RESUME,
           r"(?i)\b(?:load(?:ing|ed)|restor(?:ing|ed))\s+(?:the\s+)?(?:optimi[sz]er|(?:lr[_ ])?scheduler)(?:'s)?"
           r"(?:\s+state(?:\s+dict)?)?\s+from\b",
           "[05/17 23:19:50 fvcore.common.checkpoint]: Loading optimizer from output/model_0039999.pth ..."),
    # The same said the other way round (`Scheduler state loaded from checkpoint.`, `optimizer state dict restored from
    # <path>`): a script's own resume logic, logged with the logging module
    Phrase("training_state_loaded_from", RESUME,
           r"(?i)\b(?:optimi[sz]er|(?:lr[_ ])?scheduler)(?:'s)?(?:\s+state(?:\s+dict)?)?\s+(?:(?:was|is|has\s+been)\s+)?"
           r"(?:loaded|restored)\s+from\b",
           "2024-11-08 15:49:02,217 - INFO - Scheduler state loaded from checkpoint."),
    # PyTorch's ImageNet example: `=> loaded checkpoint 'checkpoint.pth.tar' (epoch 9)`; `Loading checkpoint from step
    # 5000`: a checkpoint with the counter it was saved at (an evaluation loads one too: weak)
    Phrase("loaded_checkpoint_at", RESUME,
           r"(?i)\b(?:load(?:ed|ing)\s+(?:the\s+|a\s+)?checkpoint|checkpoint\]?\s*loaded)\b[^\n]{0,200}?"
           r"\b(?:epoch|step|global[_ ]step|iter|iteration)\s*[:=]?\s*\d",
           "=> loaded checkpoint 'checkpoint.pth.tar' (epoch 9)", strong=False),
    # A checkpoint file loaded, no counter named (`loading from : .../fold_0/checkpoint_latest.pth`): a resume or a
    # fine-tuning start, so weak (the judge asks whether the records open past the start)
    Phrase("loading_checkpoint_file", RESUME,
           r"(?i)\bload(?:ed|ing)\s+(?:\w+\s+){0,2}?from\s*:?\s*['\"]?[^\s'\"]*(?:checkpoint|ckpt)[^\s'\"]*",
           "loading from : /afs/crc.nd.edu/user/y/ypeng4/data/trained_models/Dataset124_ISIC2018/ISICTrainer__nnUNetPlans__2d/"
           "456329_my_unet_FusedMBConv_16/fold_0/checkpoint_latest.pth", strong=False),
    # A command line echoed into the log that resumes from a checkpoint it names (`python train.py --resume
    # ./result/snapshot_iter_3000`, `--resume_from_checkpoint out/checkpoint-500`): the path must carry the counter it
    # was saved at, so an empty or `auto` resume (a script that always passes the option) says nothing.
    Phrase("resume_option", RESUME,
           r"(?:^|\s)--resume(?:[_-]from(?:[_-]checkpoint)?)?(?:=|\s+)['\"]?[\w./~][^\s'\"]*",
           "% python3 ./train_mnist.py --epoch=10 --resume ./result/snapshot_iter_3000", option=True),
    # The end of training (`Training complete in 946m 39s`, `Training is Done`, `Finished training`), not an epoch's
    # (`Epoch 3 training complete`: a line that names a counter is read as none, `read`)
    Phrase("training_ended", TRAIN_END,
           r"(?i)(?:^|[^\w-])(?:training|train)\s+(?:is\s+|has\s+|was\s+)?(?:complete|completed|finished|done|ended|over)\b"
           r"|\b(?:finished|end\s+of|done)\s+training\b",
           "2018-01-28 02:24:49,751 INFO    : Training complete in 946m 39s"),
    # facebookresearch's svoice/denoiser solvers: `Replaying metrics from previous run`, the epochs before printed again
    Phrase("replaying_metrics", RESUME, r"(?i)\breplaying\s+metrics\s+from\s+(?:the\s+)?previous\s+run\b",
           "[2021-11-11 08:29:13,443][svoice.solver][INFO] - Replaying metrics from previous run"),
)

HINT = "|".join(f"(?:{p.regex})" for p in PHRASES)  # the bulk pass's filter (polars)
_COMPILED = tuple((p, re.compile(p.regex)) for p in PHRASES)

# Words that make a line a statement about a setting, an option or code rather than an event.
_NOT_AN_EVENT = re.compile(
    r"(?:^|\s)--[A-Za-z][\w-]*\b|^\s+-[A-Za-z]"  # a command-line option, or a help text's line
    r"|\b(?:if|whether|unless|assert|raise|print|def|return|lambda)\b[\s(]"  # a condition, code in a traceback
    r"|\b(?:logger|logging|log|warnings|self)\.\w+\(|[{}]"
    r"|\b(?:no|not|without|never|cannot|can't|could\s+not|unable\s+to|failed\s+to|nothing\s+to)\s+(?:\w+\s+){0,2}?"
    r"(?:resum|restor|load|continu)"
    r"|(?:未|没有|无法|不)\s*(?:找到|从|恢复|加载|续训)",  # the same negation in Chinese (`未找到checkpoint`, `无法恢复训练`)
    re.I)
_OPTION_HELP = re.compile(r"^\s+-")  # an indented option: a help text's line, not a command that ran
_HELD_OUT = re.compile(r"(?i)\b(?:val|valid|validation|eval|evaluation|test|dev)[\s_-]*loss")  # not the training's
_ENDS = re.compile(r"(?i)\b(?:stop\w*|end(?:s|ed|ing)?\s+(?:the\s+)?training|terminat\w*|abort\w*|exit\w*|halt\w*"
                   r"|kill\w*|diverged|giving\s+up|quit\w*)\b|\b\w*(?:Error|Exception)\b")
_SKIPS = re.compile(r"(?i)\b(?:skip\w*|ignor\w*|discard\w*|drop\w*|zero(?:ed|ing)?\s+out)\b")
_COUNTER = re.compile(r"(?i)\b(?P<unit>epoch|global[_ ]step|step|iter|iteration)s?\s*[:=#]?\s*(?P<n>\d+)\b(?!\s*%|\s*/)")
_AT = re.compile(r"\s@\s*(?P<n>\d+)\s*$")  # `... @ 9`: the counter, unit unnamed
_PATH_COUNTER = re.compile(r"(?i)(?:(?P<step>checkpoint|ckpt|iter)[-_.]?(?P<n>\d+)\b|(?P<epoch>epoch)[=_-]?(?P<e>\d+))")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass(frozen=True)
class Said:
    """What one announcing line says. `counter` names what `at` counts (`epoch`, `step`, or None when the line gives
    a number without its unit: `@ 9`); `at` is None where the line gives none."""

    kind: str
    phrase: str
    strong: bool
    ends: bool = False  # the line says the training stops (`stopping training`, an error)
    skips: bool = False  # the line says the batch or step was skipped and training went on
    counter: str | None = None
    at: int | None = None


def read(line: str) -> Said | None:
    """What `line` announces, or None (no phrase, or the words state a setting, an option, code or a negation)."""
    text = _ANSI.sub("", line)
    for phrase, rx in _COMPILED:
        m = rx.search(text)
        if m is None or phrase.option and (_OPTION_HELP.match(text) or _resumed_from(m.group())[1] is None):
            continue  # an option's help, or one that names no checkpoint's counter
        if not phrase.option and _NOT_AN_EVENT.search(text) or _HELD_OUT.search(text[max(0, m.start() - 24):m.start() + 4]):
            continue
        if phrase.kind == TRAIN_END:
            if _COUNTER.search(text) or _AT.search(text):
                continue  # one epoch's or step's end, not the training's
            return Said(phrase.kind, phrase.name, phrase.strong)
        if phrase.kind != RESUME:
            return Said(phrase.kind, phrase.name, phrase.strong, ends=bool(_ENDS.search(text)),
                        skips=bool(_SKIPS.search(text)))
        counter, at = _resumed_from(text[m.start():])
        return Said(phrase.kind, phrase.name, phrase.strong, counter=counter, at=at)
    return None


def _resumed_from(text: str) -> tuple[str | None, int | None]:
    """The counter a resume announces it starts from: a named one (`from epoch 149`, `at step 47700`, `(epoch 9)`; the
    step where both are named),
    a bare `@ 9`, or the one in the checkpoint's name (`checkpoint-500`, `model.ckpt-0`, `epoch=9.ckpt`)."""
    named = {("epoch" if m.group("unit").lower() == "epoch" else "step"): int(m.group("n"))
             for m in reversed(list(_COUNTER.finditer(text)))}  # (the first of each unit)
    if named:  # the finer counter where both are named (`with epoch 0 and global step 5`, `epoch=9-step=100.ckpt`)
        return ("step", named["step"]) if "step" in named else ("epoch", named["epoch"])
    m = _AT.search(text)
    if m is not None:
        return None, int(m.group("n"))
    m = None
    for m in _PATH_COUNTER.finditer(text):
        pass  # the last one: the file's own name, not a folder's
    if m is not None:
        return ("epoch", int(m.group("e"))) if m.group("epoch") else ("step", int(m.group("n")))
    return None, None


def quote(line: str) -> str:
    """The line as stored: escape codes for colour taken out, surrounding space stripped, cut at MAX_TEXT."""
    text = _ANSI.sub("", line).strip()
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."
