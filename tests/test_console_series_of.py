"""Which series a printed value belongs to: a loss under a name no role knows (taken only when it is the one
candidate, and said), a line whose message begins with a held-out split (all its values are that split's), an
evaluation printed batch by batch (one evaluation, not one per batch), and a cost printed in seconds (no loss).

Logs are written by real loops over a small torch model, through Python's `logging` and `print` in the printers'
shapes."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

from ingest.roles import loss_like, role_of
from ingest.run import ingest_run
from tests.runwriters import load_run, log_messages, logger_writing, sgd_losses

torch = pytest.importorskip("torch")



def _issues(db, kind: str) -> list[str]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [d for (d,) in con.execute("SELECT detail FROM ingest_issues WHERE kind = ?", [kind]).fetchall()]
    finally:
        con.close()


# ---- a loss under a name no role knows

def _vse_log(path, names: tuple[str, ...], losses: list[float]) -> None:
    """A VSE-style logger (`Epoch: [e][b/N]\\tEit i  lr x  Le y\\tTime t (avg)\\tData d (avg)`): its objective under a
    formula's letter."""
    messages = []
    for i, loss in enumerate(losses):
        terms = "  ".join(f"{n} {loss * (k + 1):.6f}" for k, n in enumerate(names))
        messages.append(f"Epoch: [{i // 10}][{i % 10 * 100}/1000]\tEit {i * 100}  lr 0.0002  {terms}\t"
                        f"Time {0.9 + i % 3 / 100:.3f} (0.000)\tData {0.04:.3f} (0.000)\t")
    log_messages(path, messages)


def test_a_loss_under_a_name_no_role_knows_is_taken_when_it_is_the_one_candidate_and_said(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    losses = sgd_losses(12)
    _vse_log(root / "train.log", ("Le",), losses)
    db = tmp_path / "f.duckdb"
    run = load_run(root, db)
    assert run.all_of("train_loss") == ["Le"]
    assert np.allclose(run.arrays("Le")[1], losses, rtol=1e-5)
    said = _issues(db, "loss_by_elimination")
    assert len(said) == 1 and "`Le`" in said[0]
    assert run.all_of("step_time") == ["Time"] and "Data" not in run.all_of("train_loss")  # no time, no counter


def test_two_candidates_or_a_named_loss_leave_the_unknown_names_as_they_are(tmp_path):
    two = tmp_path / "two"
    two.mkdir()
    _vse_log(two / "train.log", ("Le", "L_rec"), sgd_losses(12))
    run = load_run(two, tmp_path / "two.duckdb")
    assert run.all_of("train_loss") == [] and not _issues(tmp_path / "two.duckdb", "loss_by_elimination")
    named = tmp_path / "named"
    named.mkdir()
    _vse_log(named / "train.log", ("loss", "Le"), sgd_losses(12))
    run = load_run(named, tmp_path / "named.duckdb")
    assert run.all_of("train_loss") == ["loss"] and not _issues(tmp_path / "named.duckdb", "loss_by_elimination")


def test_a_loss_like_name_printed_on_some_records_only_is_not_taken(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    losses = sgd_losses(12)
    log_messages(root / "train.log", [f"Epoch {i}: Train_rf {v:.4e}   Memory 9.7%" if i % 2 else f"Epoch {i}: Memory 9.8%"
                                      for i, v in enumerate(losses)])
    assert load_run(root, tmp_path / "f.duckdb").all_of("train_loss") == []
    every = tmp_path / "every"
    every.mkdir()
    log_messages(every / "train.log", [f"Epoch {i}: Train_rf {v:.4e}   Memory 9.7%" for i, v in enumerate(losses)])
    assert load_run(every, tmp_path / "e.duckdb").all_of("train_loss") == ["Train_rf"]


def test_a_name_opened_by_a_count_is_a_name(tmp_path):
    """VideoPose3D's `print('[%d] time %.2f lr %f 3d_train %f 3d_valid %f')`: `3d_train` (the training's error in mm,
    its objective) is a name, and the one loss-like value of the log."""
    root = tmp_path / "r"
    root.mkdir()
    train, held = sgd_losses(8), sgd_losses(8, seed=1)
    with open(root / "train.log", "w") as log:
        for e, (v, w) in enumerate(zip(train, held)):
            print("[%d] time %.2f lr %f 3d_train %.2f 3d_valid %.2f" % (e + 1, 19.8, 2e-4 * 0.98 ** e, v, w), file=log)
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.all_of("train_loss") == ["3d_train"] and np.allclose(run.arrays("3d_train")[1], [round(v, 2) for v in train])
    assert run.all_of("val_loss") == ["3d_valid"]  # its held-out twin: the validation's loss


@pytest.mark.parametrize("name", ["Le", "L", "L_rec", "Train_rf", "rec", "kl", "batch_cost"])
def test_names_a_loss_may_hide_under(name):
    assert loss_like(name)


@pytest.mark.parametrize("name", ["Data", "Eit", "Memory", "Train_f1", "train F1", "lr", "Time cost", "Nsdr",
                                  "train_samples", "Penalty"])
def test_names_that_are_no_loss(name):
    assert not loss_like(name)


@pytest.mark.parametrize("name", ["batch_cost", "avg_batch_cost", "reader_cost", "avg_reader_cost", "data_cost"])
def test_a_pipeline_cost_is_a_duration_not_a_loss(name):
    assert role_of(name).role != "train_loss"


def test_a_paddle_log_s_costs_are_notsgd_losses(tmp_path):
    """PaddleDetection's LogPrinter prints `batch_cost: 1.18 data_cost: 0.19` (seconds, no unit) beside the loss."""
    root = tmp_path / "r"
    root.mkdir()
    losses = sgd_losses(6)
    log_messages(root / "train.log", [
        f"Epoch: [{i // 2}] [{i % 2 * 100:>3}/166] learning_rate: 0.00{i}000 loss: {v:.6f} loss_cls: {v / 2:.6f} "
        f"eta: 16:21:30 batch_cost: {1.18 + i / 10:.4f} data_cost: {0.19 + i / 10:.4f} ips: 2.5369 images/s"
        for i, v in enumerate(losses)], fmt="[%(asctime)s] ppdet.engine %(levelname)s: %(message)s")
    run = load_run(root, tmp_path / "f.duckdb")
    assert set(run.all_of("train_loss")) == {"loss", "loss_cls"}


# ---- a line whose message begins with a held-out split

def test_a_line_that_begins_with_a_held_out_split_gives_all_its_values_to_that_split(tmp_path):
    """A demucs-style logger: `Train | Epoch e | b/N | x it/sec | Loss l | Reco r`, then per-batch `Valid | Epoch e |
    b/N | ... | Loss l` lines and one `Valid Summary | Epoch e | Loss=l`: the Valid values are the validation's, and the
    evaluation is its summary, once per epoch."""
    root = tmp_path / "r"
    root.mkdir()
    train, held = sgd_losses(12), sgd_losses(12, seed=1)
    messages, summaries = [], []
    for e in range(3):
        messages.append("Training...")
        for b in range(4):
            v = train[e * 4 + b]
            messages.append(f"Train | Epoch {e + 1} | {(b + 1) * 143}/573 | 1.45 it/sec | Loss {v:.4f} | Reco {v:.4f}")
        messages.append("Cross validation...")
        for b in range(3):
            v = held[e * 4 + b]
            messages.append(f"Valid | Epoch {e + 1} | {b + 1}/3 | 0.3{b} it/sec | Loss {v:.4f} | Reco {v:.4f}")
        summaries.append(round(held[e * 4 + 3], 4))
        messages.append(f"Valid Summary | Epoch {e + 1} | Loss={summaries[-1]:.4f} | Reco={summaries[-1]:.4f}")
    log_messages(root / "train.log", messages, fmt="%(message)s")
    run = load_run(root, tmp_path / "f.duckdb")
    assert np.allclose(run.arrays("Loss")[1], [round(v, 4) for v in train], atol=1e-9)
    assert np.allclose(run.arrays("val_loss")[1], summaries, atol=1e-9)


def test_cross_validation_opens_a_block(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    train, held = sgd_losses(4), sgd_losses(4, seed=1)
    messages = []
    for e, (v, w) in enumerate(zip(train, held)):
        messages += ["Training...", f"Epoch {e + 1} | Loss {v:.4f} | Grad 0.1", "Cross validation...",
                     f"Loss {w:.4f} | Nsdr 3.9"]
    log_messages(root / "train.log", messages, fmt="- %(message)s")
    run = load_run(root, tmp_path / "f.duckdb")
    assert np.allclose(run.arrays("val_loss")[1], [round(w, 4) for w in held])
    assert np.allclose(run.arrays("Loss")[1], [round(v, 4) for v in train])


def test_a_validation_line_under_a_train_logger_is_the_validation_s(tmp_path):
    """tf-pose-estimation's logger `[time] [train] [INFO] validation(4992) <model> loss=x, loss_ll=y` between its
    training lines `epoch=e step=n, ... loss=x`: the logger's name is no split, the message's first word is."""
    root = tmp_path / "r"
    root.mkdir()
    train, held = sgd_losses(8), sgd_losses(8, seed=1)
    messages = []
    for i, v in enumerate(train):
        messages.append(f"epoch={i / 10:.2f} step={113800 + i * 200}, 21.7 examples/sec lr=0.000000, loss={v * 500:g}, "
                        f"loss_ll={v * 80:g}")
        if i % 4 == 3:
            messages.append(f"validation(4992) mobilenet_thin_batch:16_lr:0.0001 loss={held[i] * 500:f}, "
                            f"loss_ll={held[i] * 80:f}")
    log_messages(root / "train.log", messages, fmt="[%(asctime)s] [%(name)s] [%(levelname)s] %(message)s")
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.arrays("loss")[1].size == len(train)
    assert np.allclose(run.arrays("val_loss")[1], [held[3] * 500, held[7] * 500], rtol=1e-5)


def test_a_split_word_inside_a_name_or_later_in_a_line_names_its_own_value_only(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    losses = sgd_losses(6)
    log_messages(root / "train.log", [f"Epoch {i + 1}/6 - loss: {v:.4f} - val_loss: {v * 1.1:.4f} - val_acc: 0.5{i}"
                                      for i, v in enumerate(losses)])
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.all_of("train_loss") == ["loss"] and run.all_of("val_loss") == ["val_loss"]


def test_headed_blocks_give_their_records_to_the_split_they_name(tmp_path):
    """group_DRO's Logger: `Epoch [e]:`, a bare `Training:` over `Average incurred loss: x` / `Average acc: y`, a bare
    `Validation:` over the same names, then `Current lr`: each header's records are its split's, whatever their shape,
    up to the next header or epoch line; the learning rate is no split's."""
    root = tmp_path / "r"
    root.mkdir()
    train, held = sgd_losses(5), sgd_losses(5, seed=1)
    with open(root / "log.txt", "w") as log:
        for e in range(5):
            print(f"Epoch [{e}]:", file=log)
            for header, v in (("Training:", train[e]), ("Validation:", held[e])):
                print(header, file=log)
                print(f"Average incurred loss: {v:.3f}  \nAverage sample loss: {v * 0.98:.3f}  \n"
                      f"Average acc: {0.8 + e / 100:.3f}  ", file=log)
            print("Current lr: 0.001000\nCurrent validation accuracy: 0.71\nBest model saved at epoch 0\n\n", file=log)
    run = load_run(root, tmp_path / "f.duckdb")
    assert np.allclose(run.arrays("Average incurred loss")[1], [round(v, 3) for v in train])
    assert np.allclose(run.arrays("val Average incurred loss")[1], [round(v, 3) for v in held])
    assert run.all_of("lr") == ["Current lr"]


# ---- an evaluation printed batch by batch

class _Meter:
    """pytorch/examples imagenet's AverageMeter: '{name} {val:fmt} ({avg:fmt})'."""

    def __init__(self, name: str, fmt: str):
        self.name, self.fmt, self.sum, self.count, self.val = name, fmt, 0.0, 0, 0.0

    def update(self, val: float) -> None:
        self.val, self.sum, self.count = val, self.sum + val, self.count + 1

    @property
    def avg(self) -> float:
        return self.sum / self.count

    def __str__(self) -> str:
        return f"{self.name} {self.val:{self.fmt}} ({self.avg:{self.fmt}})"


def test_an_evaluation_printed_batch_by_batch_is_one_evaluation(tmp_path):
    """The ImageNet example's validate(): `Test: [b/N]\\tTime ..\\tLoss cur (avg)\\tAcc@1 cur (avg)` every print_freq
    batches, then ` * Acc@1 a Acc@5 b`: one evaluation whose loss is the last running average and whose accuracy is
    the summary's, not one evaluation per printed batch."""
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    root = tmp_path / "r"
    root.mkdir()
    want_loss, want_acc = [], []
    with open(root / "train.log", "w") as log:
        for epoch in range(3):
            for b in range(0, 300, 100):
                x, y = torch.randn(32, 8), torch.randint(0, 4, (32,))
                loss = torch.nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                print(f"Epoch: [{epoch}][{b:>4}/300]\tTime  0.129 ( 0.605)\tLoss {loss.item():.4e} ({loss.item():.4e})",
                      file=log)
            losses, top1, top5 = _Meter("Loss", ".4e"), _Meter("Acc@1", "6.2f"), _Meter("Acc@5", "6.2f")
            with torch.no_grad():
                for b in range(20):
                    x, y = torch.randn(32, 8), torch.randint(0, 4, (32,))
                    out = model(x)
                    losses.update(torch.nn.functional.cross_entropy(out, y).item())
                    top1.update((out.argmax(1) == y).float().mean().item() * 100)
                    top5.update(100.0)
                    if b % 10 == 0:
                        print(f"Test: [{b:>3}/20]\t{losses}\t{top1}\t{top5}", file=log)
                        printed = float(f"{losses.avg:.4e}")  # the pass's loss as far as it was printed
            want_loss.append(printed)
            print(f" * Acc@1 {top1.avg:.3f} Acc@5 {top5.avg:.3f}", file=log)
            want_acc.append(round(top1.avg, 3))
    run = load_run(root, tmp_path / "f.duckdb")
    assert np.allclose(run.arrays("val_loss")[1], want_loss, rtol=1e-4)
    assert np.allclose(run.arrays("val_accuracy")[1], want_acc, atol=1e-9)
    assert run.arrays("Loss")[1].size == 9  # the training's lines stay its own


def test_an_evaluation_pass_under_its_epoch_summary_is_the_summary(tmp_path):
    """A logger printing `val --- Current batch:200/400  loss:[ 0.52]` per batch, then `Epoch [e]/[199] \t Validation
    Phase Loss: x \t Accuracy: y`: the evaluation's loss is the summary's, not a batch's; without a summary, the mean
    of the printed batches."""
    root = tmp_path / "r"
    root.mkdir()
    train, held = sgd_losses(12), sgd_losses(12, seed=1)
    messages, means = [], []
    for e in range(3):
        messages += [f"train --- Current batch:{(b + 1) * 200}/800  loss:[ {train[e * 4 + b]:.8f}]" for b in range(4)]
        messages.append(f"Epoch [{e}]/[199] \t Training Phase Loss: {train[e * 4 + 3] / 10:.12f} \t Accuracy: 0.6")
        messages += [f"val --- Current batch:{(b + 1) * 200}/400  loss:[ {held[e * 4 + b]:.8f}]" for b in range(2)]
        means.append(np.mean([round(held[e * 4 + b], 8) for b in range(2)]))
        messages.append(f"Epoch [{e}]/[199] \t Validation Phase Loss: {held[e * 4 + 1] / 10:.12f} \t Accuracy: 0.7")
    log_messages(root / "train.log", messages, fmt="%(asctime)s %(levelname)s    : %(message)s")
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.all_of("val_loss") == ["Validation Phase Loss"]
    assert np.allclose(run.arrays("val_loss")[1], [round(held[e * 4 + 1] / 10, 12) for e in range(3)])
    bare = tmp_path / "bare"
    bare.mkdir()
    log_messages(bare / "train.log", [m for m in messages if "Validation Phase" not in m],
                 fmt="%(asctime)s %(levelname)s    : %(message)s")
    assert np.allclose(load_run(bare, tmp_path / "b.duckdb").arrays("val_loss")[1], means)


def test_evaluations_printed_back_to_back_without_a_batch_stay_each_its_own(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    held = sgd_losses(6)
    log_messages(root / "train.log", [f"Validation loss: {v:.4f}" for v in held])
    run = load_run(root, tmp_path / "f.duckdb")
    assert np.allclose(run.arrays("val_loss")[1], [round(v, 4) for v in held])


def test_ingest_twice_keeps_one_loss_taken(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    _vse_log(root / "train.log", ("Le",), sgd_losses(12))
    db = tmp_path / "f.duckdb"
    ingest_run(root, db)
    _vse_log(root / "train.log", ("Le",), sgd_losses(4, seed=2))
    ingest_run(root, db)
    assert len(_issues(db, "loss_by_elimination")) == 1


# ---- odd tokens: a terminal's wrap, a comment after a table row, procps free's table

def test_a_line_a_terminal_wrapped_inside_a_word_is_read_whole(tmp_path):
    """DeepSpeed's `OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 4096.0, reducing to 2048.0`, copied from a
    terminal that cut it inside `scale`: the scale's halvings are read, not a series `ale`."""
    import io

    stream = io.StringIO()
    with logger_writing(stream, "[%(asctime)s] [%(levelname)s] [stage_1_and_2.py:1762:step] %(message)s",
                        name="ds") as logger:
        scale = 4096
        for _ in range(4):
            logger.info(f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {scale:.1f}, reducing to "
                        f"{scale / 2:.1f}")
            scale //= 2
    lines = stream.getvalue().splitlines()
    width = lines[0].index("scale") + 2  # the terminal's width falls inside `scale`
    wrapped = [row for line in lines for row in (line[i:i + width] for i in range(0, len(line), width))]
    root = tmp_path / "r"
    root.mkdir()
    (root / "train.log").write_text("\n".join(wrapped) + "\n")
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.arrays("loss_scale")[1].tolist() == [2048.0, 1024.0, 512.0, 256.0]
    assert "ale" not in run.meta["name"].to_list()


def test_lines_of_the_greatest_width_that_are_no_wrap_stay_apart(tmp_path):
    """A fixed-format training line of the file's greatest width, ending in a unit (`time 12.3s`), each followed by a
    validation line in lower case: two lines, not one cut by a terminal."""
    root = tmp_path / "r"
    root.mkdir()
    train, held = sgd_losses(6), sgd_losses(6, seed=1)
    with open(root / "train.log", "w") as log:
        for e, (v, w) in enumerate(zip(train, held)):
            print(f"Epoch {e + 1:>3} | train loss {v:8.4f} | lr 0.00100 | time {12.3 + e / 10:5.1f}s", file=log)
            print(f"val loss {w:.4f} | acc 0.9{e}", file=log)
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.arrays("train loss")[1].size == 6 and np.allclose(run.arrays("val loss")[1], [round(w, 4) for w in held])


def test_a_comment_after_a_table_row_keeps_the_row(tmp_path):
    """chainer's PrintReport table, one row annotated by hand (`# unexpected accuracy`): the row is read."""
    root = tmp_path / "r"
    root.mkdir()
    losses = sgd_losses(6)
    head = "epoch       main/loss   validation/main/loss  main/accuracy  validation/main/accuracy"
    rows = [f"{e + 1:<12}{v:<12.6g}{v * 1.1:<22.6g}{0.9 + e / 100:<15.6g}{0.95:<26.6g}" for e, v in enumerate(losses)]
    rows[3] = rows[3].rstrip() + "  # unexpected accuracy"
    (root / "train.log").write_text("\n".join([head, *rows]) + "\n")
    run = load_run(root, tmp_path / "f.duckdb")
    assert np.allclose(run.arrays("main/loss")[1], [float(f"{v:.6g}") for v in losses])


def test_procps_free_s_table_is_the_host_s_memory(tmp_path):
    import shutil
    import subprocess

    if shutil.which("free") is None:
        pytest.skip("no procps free here")
    root = tmp_path / "r"
    root.mkdir()
    outputs = [subprocess.run(["free", "-m"], capture_output=True, text=True, check=True).stdout for _ in range(3)]
    (root / "free.log").write_text("\n".join(outputs))
    used = [float(line.split()[2]) for out in outputs for line in out.splitlines() if line.startswith("Mem:")]
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.pick("memory") == "Mem used" and run.arrays("memory")[1].tolist() == used
    assert {"Mem total", "Mem free", "Mem available"} <= set(run.all_of("memory"))
