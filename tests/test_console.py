"""Console logs: the pattern table's examples, the real logs' values, tqdm, damage, resume."""

import math
import re
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path, PurePosixPath

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ingest.console as C
from ingest.console import PATTERNS, ParsedLine, parse_line, read_console
from ingest.formats import format_for
from ingest.records import Chunk, Issue, scalars_frame

from tests.paths import REAL_RUNS

REAL = REAL_RUNS


def _read(path: Path, start: int = 0):
    chunks = list(read_console(path, start))
    frames = [c.scalars for c in chunks if c.scalars is not None]
    return pl.concat(frames), [i for c in chunks for i in c.issues], chunks[-1].end


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda p: p.name)
def test_every_pattern_parses_its_example(pattern):
    parsed = parse_line(pattern.example)
    got = dict(parsed.metrics)
    got.update({k: getattr(parsed, k) for k in ("step", "epoch", "batch") if getattr(parsed, k) is not None})
    for key, value in pattern.expect.items():
        assert key in got and _same(got[key], value), (pattern.name, key, got)
    assert pattern.regex.search(pattern.example), f"{pattern.name}'s own example must use it"


def test_traceback_lines_are_not_metrics():
    assert parse_line('  File "/home/u/trainer.py", line 71, in <module>').metrics == {}


def test_real_nanogpt_nan_after_step_3000():
    frame, issues, _ = _read(REAL / "log_nanogpt215" / "console.log")
    loss = frame.filter(pl.col("tag") == "loss")
    assert loss["step"][0] == 2920 and loss["value"][0] == 3.9883
    assert loss["step"][-1] == 3060 and math.isnan(loss["value"][-1])
    first_nan = loss.filter(pl.col("value").is_nan())["step"][0]
    assert first_nan == 3010
    val = frame.filter(pl.col("tag") == "val loss")
    assert val["step"].to_list() == [3000] and val["value"][0] == 4.0427
    assert loss["wall_time"][0] == 1679477439.0  # 2023-03-22 09:30:39 UTC
    assert issues == []


def test_real_byteps_epoch_batch_ordinal():
    frame, _, _ = _read(REAL / "log_byteps411" / "console.log")
    loss = frame.filter(pl.col("tag") == "IDLoss")
    assert loss["batch"].to_list() == list(range(1, 10)) and set(loss["epoch"].to_list()) == {1}
    assert loss["ordinal"].all() and loss["step"].to_list() == list(range(9))
    assert loss["value"][5] == 70.405 and math.isnan(loss["value"][6])
    assert loss["wall_time"][0] == pytest.approx(1628747042.294)


def test_real_caffe_iterations_and_output_lines():
    frame, issues, _ = _read(REAL / "log_caffe499" / "console.log")
    loss = frame.filter(pl.col("tag") == "loss")
    assert loss["step"].to_list() == [2, 10, 20, 30, 40] and loss["value"].is_nan().all()
    mbox = frame.filter(pl.col("tag") == "mbox_loss")
    assert mbox["step"].to_list() == [2, 10, 20, 30] and (mbox["value"] == math.inf).all()
    assert frame.filter(pl.col("tag") == "lr")["value"].to_list() == [0.001] * 3
    assert [i.kind for i in issues] == ["assumed_date"]  # glog stamps carry no year
    assert loss["wall_time"][1] - loss["wall_time"][0] == pytest.approx(4.109669, abs=1e-6)


def test_real_insightface_global_step_nan():
    frame, _, _ = _read(REAL / "log_insightface2262" / "console.log")
    loss = frame.filter(pl.col("tag") == "Loss")
    assert loss["step"].to_list() == [20, 30, 40] and loss["value"].is_nan().all()
    assert loss["epoch"].to_list() == [0, 0, 0]
    assert frame.filter(pl.col("tag") == "LearningRate")["value"][0] == 0.001


def test_real_ipexllm_infinity():
    frame, _, _ = _read(REAL / "log_ipexllm1486" / "console.log")
    loss = frame.filter(pl.col("tag") == "Loss")
    assert loss["step"].to_list() == [45457, 45458, 45459, 45460]
    assert loss["value"][2] == math.inf and loss["value"][3] == 1.2483193
    assert set(loss["epoch"].to_list()) == {64}


def test_real_mlx_train_and_val_loss():
    frame, _, _ = _read(REAL / "log_mlx620" / "console.log")
    train = frame.filter(pl.col("tag") == "Train loss")
    assert train["step"][0] == 25 and train["step"][-1] == 200 and train["value"][3] == 6.437
    assert frame.filter(pl.col("tag") == "Val loss")["step"].to_list() == [1]
    assert "iters" not in frame["tag"].to_list()


def test_real_wandb_output_log_tqdm_postfix():
    frame, _, _ = _read(REAL / "wandb_vqvae" / "output.log")
    assert frame["tag"].to_list() == ["loss"] and frame["value"][0] == 0.481
    assert frame["epoch"][0] == 1 and frame["batch"][0] == 158 and frame["ordinal"][0]


def test_tqdm_carriage_return_updates_are_records(tmp_path):
    from tqdm import tqdm

    path = tmp_path / "train.log"
    with open(path, "w") as f:
        bar = tqdm(total=5, file=f, ascii=False, mininterval=0, miniters=1)
        for i in range(5):
            bar.set_postfix(loss=1.0 / (i + 1) if i < 4 else float("nan"))
            bar.update(1)
        bar.close()
    frame, issues, _ = _read(path)
    loss = frame.filter(pl.col("tag") == "loss")
    assert loss["batch"].to_list()[-1] == 5 and math.isnan(loss["value"][-1])
    assert loss["value"][0] == 1.0 and loss.height >= 5


def test_resume_reads_only_appended_lines(tmp_path):
    path = tmp_path / "train.log"
    path.write_text("iter 1: loss 2.0\niter 2: loss 1.5\n")
    _, _, end = _read(path)
    with open(path, "a") as f:
        f.write("iter 3: loss nan\niter 4: lo")
    frame, _, end2 = _read(path, end)
    assert frame["step"].to_list() == [3] and math.isnan(frame["value"][0])
    assert frame["position"].to_list() == [end]
    assert end2 == path.stat().st_size - len("iter 4: lo")
    with open(path, "a") as f:
        f.write("ss 0.5\nTrain net output #0: acc = 0.25\n")
    frame, _, _ = _read(path, end2)
    assert frame["step"].to_list() == [4, 4]  # the counter-less line takes the last step seen before it


def test_second_counter_on_a_line_leaves_the_metrics_readable(tmp_path):
    # litgpt's pretrain loop prints the micro-batch and the optimizer step on one line, with this f-string:
    # f"iter {iter_num} step {step_count}: loss {loss:.4f}, iter time: {ms:.2f}ms{' (optimizer.step)' ...}"
    lines = []
    for iter_num in range(76, 82):
        accumulating = iter_num % 2 == 0
        lines.append(f"iter {iter_num} step {(iter_num + 1) // 2}: loss {10.8259:.4f}, iter time:"
                     f" {198.0 if accumulating else 215.0:.2f}ms{' (optimizer.step)' if not accumulating else ''}")
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    frame, issues, _ = _read(path)
    loss = frame.filter(pl.col("tag") == "loss")
    assert loss["value"].to_list() == [10.8259] * 6
    assert loss["step"].to_list() == list(range(76, 82)) and not loss["ordinal"].any()  # the first counter
    assert "step" not in frame["tag"].to_list() and issues == []


def test_hf_log_lines_with_typographic_quotes(tmp_path):
    # HF Trainer prints its logs as a dict; pasted through an issue tracker or an editor, the quotes become
    # typographic (transformers#33336 shows `{‘loss’: 1.453, ...}`). The values are read the same.
    logs = [{"loss": 1.453, "grad_norm": 2.474428415298462, "learning_rate": 4.682539682539683e-05, "epoch": 0.19},
            {"loss": 1.406, "grad_norm": 2.5064773559570312, "learning_rate": 4.3650793650793655e-05, "epoch": 0.38}]
    path = tmp_path / "train.log"
    path.write_text("".join(str(d).replace("'", "\u2019").replace("{\u2019", "{\u2018")
                            .replace(", \u2019", ", \u2018") + "\n" for d in logs), encoding="utf-8")
    assert "\u2018loss\u2019: 1.453" in path.read_text(encoding="utf-8")
    frame, issues, _ = _read(path)
    for key in logs[0]:
        assert frame.filter(pl.col("tag") == key)["value"].to_list() == [d[key] for d in logs]
    assert issues == []


def test_unmatched_metric_lines_are_counted_once(tmp_path):
    path = tmp_path / "train.log"
    path.write_text("loss(5) reached\nstarting\nacc@1 92.1 top\nloss(7) reached\n")
    chunks = list(read_console(path, 0))
    issues = [i for c in chunks for i in c.issues]
    assert [i.kind for i in issues] == ["unmatched_lines"]
    assert "3 lines" in issues[0].detail and "1, 3, 4" in issues[0].detail


def test_binary_junk_named_train_log(tmp_path):
    path = tmp_path / "train.log"
    path.write_bytes(bytes(range(256)) * 40)
    chunks = list(read_console(path, 0))
    assert [i.kind for c in chunks for i in c.issues] == ["not_this_format"]
    assert all(c.scalars is None or c.scalars.height == 0 for c in chunks)


def test_empty_log(tmp_path):
    path = tmp_path / "train.log"
    path.write_bytes(b"")
    chunks = list(read_console(path, 0))
    assert all(c.scalars is None or c.scalars.height == 0 for c in chunks) and chunks[-1].end == 0


@pytest.mark.parametrize("rel,claimed", [
    ("train.log", True), ("slurm-12345.out", True), ("nohup.out", True), ("stdout.txt", True),
    ("console-rank0.txt", True), ("wandb/run-x/files/output.log", True),
    ("wandb/run-x/logs/debug-internal.log", False), ("wandb/run-x/logs/debug.log", False), ("notes.txt", False),
])
def test_format_claims(rel, claimed):
    fmt = format_for(PurePosixPath(rel))
    assert (fmt is not None and fmt.name == "console") == claimed


def test_unnamed_log_is_sniffed(tmp_path):
    head = (REAL / "log_nanogpt215" / "console.log").read_bytes()[:4096]
    fmt = format_for(PurePosixPath("run1"), lambda: head)
    assert fmt is not None and fmt.name == "console"
    assert format_for(PurePosixPath("README"), lambda: b"This project trains models.\nSee docs.\n") is None


def test_reading_never_imports_heavy_modules():
    import subprocess

    code = ("import sys, ingest.formats, ingest.console, ingest.tabular, ingest.hf_trainer, ingest.mlflow, "
            "ingest.lightning; bad=[m for m in ('torch','scipy','wandb','tensorboard') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[1])


# ------------------------------------------------------------------------------ the slow reference
# The reader as it was before it was made fast (ingest/console.py at 342bb9a): every pattern of the table
# applied to every line, one line at a time. The fast reader must give exactly what this gives.


def reference_parse_line(line: str) -> ParsedLine:
    text = C.ANSI.sub("", line)
    out = ParsedLine(metrics={})
    for pattern in C._TIME:
        match = pattern.regex.search(text)
        if match:
            out.time = {k: v for k, v in match.groupdict().items() if v is not None}
            out.time_kind = pattern.name
            text = C._blank(text, match.span())
            break
    for pattern in C._COUNTERS:
        for match in pattern.regex.finditer(text):
            groups = match.groupdict()
            found = [name for name in ("step", "epoch", "batch") if groups.get(name) is not None]
            took = [name for name in found if getattr(out, name) is None]
            for name in took:
                setattr(out, name, int(groups[name]))
            if found:  # a second counter of a taken kind is blanked too (`iter 76 step 38: loss ...`)
                text = C._blank(text, match.span())
            if took:
                break
    for pattern in C._ASSIGN:
        for match in list(pattern.regex.finditer(text)):
            out.metrics.setdefault(match["key"].strip() if pattern.tag is None else pattern.tag, float(match["value"]))
            text = C._blank(text, match.span())
    counted = out.step is not None or out.epoch is not None or out.batch is not None
    text = C._WIDE_SEPARATOR.sub(r"\1 ", text)
    for clause in C.CLAUSE_SPLIT.split(text):
        clause = clause.strip().lstrip("-:>#*").rstrip(".").strip()
        if not clause or not any(c.isdigit() or c in "nNiI" for c in clause):
            continue
        match = C.PHRASE.match(clause)
        if match is None:
            continue
        key = match["key"].strip()
        if counted or C.METRIC_WORDS.search(key):
            out.metrics.setdefault(key, float(match["value"]))
    return out


class _ReferenceState(C._State):
    """The old per-line loop; `_wall_time` and `issues` are the old ones too (below)."""

    def parse(self, data: bytes, offset: int) -> pl.DataFrame:
        cols: dict[str, list] = {k: [] for k in ("tag", "step", "value", "position", "wall_time", "epoch",
                                                 "batch", "ordinal")}
        pos = 0
        for match in re.finditer(rb"[^\r\n]*(?:\r\n|\r|\n)", data):
            raw = match.group()
            position = offset + pos
            pos += len(raw)
            ordinal = self.segment
            line_no = self.line_no
            self.segment += 1
            if raw.endswith(b"\n"):
                self.line_no += 1
            text = raw.rstrip(b"\r\n").decode("utf-8", errors="replace")
            if not text.strip():
                continue
            parsed = reference_parse_line(text)
            wall_time = self._reference_wall_time(parsed, line_no)
            if not parsed.metrics:
                if C.LOOKS_LIKE_METRIC.search(text):
                    self.n_unmatched += 1
                    if len(self.unmatched) < C.MAX_LINES_LISTED:
                        self.unmatched.append(line_no)
                if parsed.step is not None:
                    self.last_step = parsed.step
                continue
            if parsed.step is not None:
                step, is_ordinal = parsed.step, False
                self.last_step = parsed.step
            elif parsed.epoch is None and parsed.batch is None and self.last_step is not None:
                step, is_ordinal = self.last_step, False
            else:
                step, is_ordinal = ordinal, True
            for tag, value in parsed.metrics.items():
                cols["tag"].append(tag)
                cols["step"].append(step)
                cols["value"].append(value)
                cols["position"].append(position)
                cols["wall_time"].append(wall_time)
                cols["epoch"].append(parsed.epoch)
                cols["batch"].append(parsed.batch)
                cols["ordinal"].append(is_ordinal)
        return scalars_frame(pl.DataFrame(cols, schema={
            "tag": pl.Utf8, "step": pl.Int64, "value": pl.Float64, "position": pl.Int64, "wall_time": pl.Float64,
            "epoch": pl.Int64, "batch": pl.Int64, "ordinal": pl.Boolean}))

    def _reference_wall_time(self, parsed: ParsedLine, line_no: int) -> float | None:
        t = parsed.time
        if not t:
            return None
        frac = float("0." + t["frac"]) if t.get("frac") else 0.0
        tod = int(t["h"]) * 3600 + int(t["mi"]) * 60 + int(t["s"]) + frac
        if "y" in t:
            try:
                midnight = datetime(int(t["y"]), int(t["mo"]), int(t["d"]), tzinfo=timezone.utc)
            except ValueError:
                return None
            self.date, self.last_tod = midnight, None
            return midnight.timestamp() + tod - C._offset_seconds(t.get("tz"))
        if self.assumed is None and self.date is None:
            self.assumed = line_no
        base = self.date or datetime(1970, 1, 1, tzinfo=timezone.utc)
        if "mo" in t:
            try:
                base = base.replace(month=int(t["mo"]), day=int(t["d"]))
            except ValueError:
                return None
        elif self.last_tod is not None and tod < self.last_tod - 60:
            base = base + timedelta(days=1)
            self.date = base
        self.last_tod = tod
        return base.timestamp() + tod


def reference_read(path: Path, start: int = 0):
    """Chunks as the old reader cut and parsed them (the chunking and resume code is unchanged)."""
    with path.open("rb") as f:
        head = f.read(4096) if start == 0 else b""
        if start == 0 and C._is_binary(head):
            yield Chunk(end=path.stat().st_size, issues=[Issue(0, "not_this_format", "binary")])
            return
        state = _ReferenceState.resume(f, start)
        f.seek(start)
        offset, pending = start, b""
        while True:
            block = f.read(C.CHUNK_BYTES)
            data = pending + block
            cut = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
            if cut == 0 and block:
                pending = data
                continue
            complete, pending = data[:cut], data[cut:]
            if complete:
                frame = state.parse(complete, offset)
                offset += len(complete)
                last = not block
                yield Chunk(end=offset, scalars=frame, issues=state.issues(path.name) if last else [])
                if last:
                    return
            if not block:
                yield Chunk(end=offset, issues=state.issues(path.name))
                return


# ------------------------------------------------------------------- the fast reader equals the reference


def _rows(chunks) -> tuple[list, list, list]:
    """Points (values as their bits, so NaN == NaN and -0.0 != 0.0), issues and chunk ends."""
    frames = [c.scalars for c in chunks if c.scalars is not None]
    frame = pl.concat(frames) if frames else scalars_frame(None)
    bits = frame["value"].to_numpy().view(np.int64).tolist()
    rows = list(zip(frame["tag"], frame["step"], bits, frame["wall_time"], frame["position"], frame["epoch"],
                    frame["batch"], frame["ordinal"]))
    return rows, [i for c in chunks for i in c.issues], [c.end for c in chunks]


def _assert_same_as_reference(path: Path, start: int = 0) -> int:
    got, want = _rows(list(read_console(path, start))), _rows(list(reference_read(path, start)))
    assert got[0] == want[0], "points differ"
    assert got[1:] == want[1:]
    return len(got[0])


CONSOLE_LOGS = sorted(REAL.glob("log_*/console.log")) + [REAL / "wandb_vqvae" / "output.log"]


@pytest.mark.parametrize("path", CONSOLE_LOGS, ids=lambda p: p.parent.name)
def test_real_console_log_equals_reference_from_every_line(path):
    data = path.read_bytes()
    assert _assert_same_as_reference(path) > 0
    for start in [m.end() for m in re.finditer(rb"\r\n|\r|\n", data)]:
        _assert_same_as_reference(path, start)


# Lines the generated log adds to the benchmark's mix: what the fast path must not get wrong.
TRICKY = [
    "\x1b[32m2024-01-01 10:00:00\x1b[0m iter 5: loss 1.5",  # escapes split a stamp; taken out first
    "lr\x1b[0m5", "\x1b[1mloss\x1b[0m: 0.25 \x1b[31m(grad 3)\x1b[0m",
    "f1 0.93", "F1: 0.5 top5 acc 0.8 f2 0.1", "val f1=0.7, f2=0.6",  # METRIC_WORDS names the digit 1
    "lr5", "lrnan", "ſtep 5 loss 2", "Global \u017ftep: 7, \u212al 0.1", "\u0130ter 3: lo\u0131ss 2",
    "learnıng rate 0.1", "x=\u00a05", "x=\x1c7", "'k':\x1f 8", "Loss is Infinity", "loss = +inf, acc = -NaN",
    "{'lr 2024-01-01 10:00:00': 5, 'loss': 1}",  # a dict key holding a blanked time stamp
    "{\u2018loss\u2019: 1.453, \u201cgrad_norm\u201d: 2.47}", "{\u2018k\u2019: 8}",  # typographic quotes
    "iter 76 step 38: loss 10.8259, iter time: 197.87ms", "step 3 epoch 1 step 4 loss 2",  # two counters
    "Fp16 Grad Scale:  0   Required: 194 hours  Epoch: 1", "a:   b:    c: 7   loss:     9",
    "step 12/300 | loss 0.5 | acc 0.9", "epoch 2 batch 3/9 loss 0.31 loss 0.4",
    "[10:00:00] step 1 loss: 0.25", "[09:00:00] step 2 loss: 0.2", "[23:59:59.5] loss 1", "[00:00:01] loss 2",
    "I0822 20:54:57.256644 14071 solver.cpp:341] Iteration 2, loss = nan",
    "I1340 20:54:57.256644 14071 solver.cpp:341] Iteration 3, loss = 1",  # month 13: no wall time
    "2024-02-30 10:00:00 loss 1", "2024-03-26T10:00:00.123456789+05:30 loss 3", "2024-03-26 10:00:00Z loss 4",
    "loss(5) reached", "acc@1 92.1 top", "grad norm", "Traceback: line 71", "٣ loss ٣", "loss ٣.٥",
    "line 71, in <module>", "   ", "", "Map:  45%|████▌     | 450/1000 [00:01<00:02, 400it/s]",
    "Epoch 1:  50%|█████     | 5/10 [00:01<00:01, 4.2it/s, loss=0.5, v_num=0]", "\ufffd\ufffd loss \ufffd 3",
]


def _tricky_log(path: Path, n_lines: int = 3000) -> None:
    from benchmarks.bench_ingest_console import write_mixed_log

    write_mixed_log(path, n_lines, seed=7)
    mixed = path.read_bytes().split(b"\n")
    extra = [t.encode() for t in TRICKY] + [b"loss \xff\xfe 3", b"\xe2\x80 iter 9 loss 1", b"acc 0.5 \xe2"]
    out = []
    for i, line in enumerate(mixed):
        out.append(line)
        if i % 7 == 0:
            out.append(extra[(i // 7) % len(extra)])
    # line breaks of every kind: \n, \r\n, a lone \r (a tqdm update), blank lines
    breaks = [b"\n", b"\r\n", b"\r", b"\n\n", b"\r\r\n"]
    path.write_bytes(b"".join(line + breaks[i % 5 if i % 3 == 0 else 0] for i, line in enumerate(out)))


def test_mixed_log_equals_reference(tmp_path, monkeypatch):
    path = tmp_path / "train.log"
    _tricky_log(path)
    assert _assert_same_as_reference(path) > 1000
    # Small chunks put chunk boundaries everywhere, `\r|\n` pairs included; resume from arbitrary bytes.
    monkeypatch.setattr(C, "CHUNK_BYTES", 4099)
    _assert_same_as_reference(path)
    size = path.stat().st_size
    for start in (1, size // 3, size // 2 + 1, size - 100):
        _assert_same_as_reference(path, start)


def test_every_tricky_line_parses_as_the_reference():
    for line in TRICKY:
        _assert_parses_as_reference(line)


_FRAGMENTS = [p.example for p in PATTERNS] + TRICKY + [
    "loss", "Loss", "lr", "acc", "f", "1", "0", "7", "12", "3.5", "1e-3", ".5", "nan", "Inf", "-inf", "=", ":",
    " ", "  ", "   ", ",", "|", "'", '"', "[", "]", "(", ")", "\x00", "\x1b[0m", "%|", "/", "-", ". ", "is",
    "step", "Iter", "Epoch", "batch", "global_step", "10:00:00", "2024-01-01 ", "ſ", "K", "ı", "İ", "٣", "\u00a0",
    "\x1c", "█", "\ufffd", "_", "e5", "Train net output #0:",
]


@settings(deadline=None, max_examples=400, derandomize=True)
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=12))
def test_any_line_parses_as_the_reference(parts):
    _assert_parses_as_reference("".join(parts).replace("\n", " ").replace("\r", " "))


def _assert_parses_as_reference(line: str) -> None:
    fast, slow = parse_line(line), reference_parse_line(line)
    assert list(fast.metrics) == list(slow.metrics), line
    assert all(_bits(fast.metrics[k]) == _bits(slow.metrics[k]) for k in slow.metrics), line
    assert (fast.step, fast.epoch, fast.batch, fast.time, fast.time_kind) == (
        slow.step, slow.epoch, slow.batch, slow.time, slow.time_kind), line
    looks = not slow.metrics and bool(C.LOOKS_LIKE_METRIC.search(line))
    assert C._parse(line)[4] == looks, line
    # A line the pre-filter drops must give nothing at all.
    one = pl.Series([line])
    if not (one.str.contains(C._CANDIDATE) | (one.str.contains(C._METRIC_WORD) & one.str.contains(C._NUMBER)))[0]:
        assert not line.strip() or (not slow.metrics and slow.time is None and slow.step is None and not looks)


def _bits(x: float) -> int:
    return int(np.float64(x).view(np.int64))


def test_no_pattern_names_a_digit_but_f1():
    """The shape cache treats the ASCII digits alike; a regex naming one (as `f1` does) must be handled."""
    from re import _parser

    named = []

    def walk(tree, prev):
        for op, av in tree:
            name = str(op)
            if name == "LITERAL" and chr(av).isdigit():
                named.append((prev, chr(av)))
            elif name in ("NOT_LITERAL",) and chr(av).isdigit():
                named.append((None, chr(av)))
            elif name == "IN":
                digits = {chr(c) for o, c in av if str(o) == "LITERAL" and chr(c).isdigit()}
                ranges = [r for o, r in av if str(o) == "RANGE"]
                covered = {chr(c) for lo, hi in ranges for c in range(lo, hi + 1) if chr(c) in "0123456789"}
                if (digits | covered) and (digits | covered) != set("0123456789"):
                    named.append((None, "".join(sorted(digits | covered))))
            for sub in av if isinstance(av, (list, tuple)) else ():
                if isinstance(sub, _parser.SubPattern):
                    walk(sub, None)
                elif isinstance(sub, (list, tuple)):
                    for item in sub:
                        if isinstance(item, _parser.SubPattern):
                            walk(item, None)
            prev = chr(av) if name == "LITERAL" else None

    regexes = [p.regex for p in PATTERNS] + [C.PHRASE, C.CLAUSE_SPLIT, C._WIDE_SEPARATOR, C.METRIC_WORDS,
                                              C.LOOKS_LIKE_METRIC]
    for regex in regexes:
        walk(_parser.parse(regex.pattern, regex.flags), None)
    assert set(named) == {("f", "1")}, named
    assert C._DIGIT_WORDS == ("f1", "F1")


def test_doubled_sign_before_inf_is_no_number_and_no_crash(tmp_path):
    """`loss=--inf` once crashed the reader with ValueError from float(); now it is simply not a value."""
    log = tmp_path / "train.log"
    log.write_text("step 1: loss=--inf lr=0.1\nstep 2: loss: +-Infinity\nstep 3: loss=-inf\n")
    points = pl.concat([c.scalars for c in read_console(log, 0) if c.scalars is not None])
    got = {(r["tag"], r["step"]): r["value"] for r in points.iter_rows(named=True)}
    assert got[("lr", 1)] == 0.1
    assert got[("loss", 3)] == float("-inf")
    assert ("loss", 1) not in got and ("loss", 2) not in got
