"""Values a person reads in a console log where no `name=value` says so, printed by a real training loop: the loss
printed against its iteration alone (`243413: nan`), under a counter line of its own, behind a name padded before its
colon, several dict records on one line with typographic punctuation, and fields apart by tabs; with the twins that
must stay unread (counts per class, an optimizer's parameter groups)."""

from __future__ import annotations

import numpy as np
import pytest

from forensics.judge.detectors import NanLoss
from tests.runwriters import load_run, sgd_losses

torch = pytest.importorskip("torch")



def _log(tmp_path, lines: list[str], name: str = "train.log"):
    root = tmp_path / "run"
    root.mkdir()
    (root / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return load_run(root, tmp_path / "f.duckdb")


def test_iteration_colon_loss_lines_are_the_loss_and_its_nan(tmp_path):
    """WaveGlow's `print(f"{iteration}: {reduced_loss:.9f}")` between apex's overflow messages: the number after the
    iteration is the loss at that step, and the NaN it ends in is nan_loss."""
    losses = sgd_losses(30, blow_up_at=20)
    assert not np.isfinite(losses[-1])
    lines = []
    for i, v in enumerate(losses):
        lines.append("Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 1024.0")
        lines.append(f"{243400 + i}: {v:.9f}")
    run = _log(tmp_path, lines)
    steps, values = run.arrays("loss")
    assert steps[0] == 243400 and steps.size == 30 and np.isclose(values[0], losses[0], rtol=1e-6)
    [f] = NanLoss().check(run)
    assert f.severity == "critical" and f.step == 243400 + int(np.argmax(~np.isfinite(losses)))


def test_counts_per_class_printed_as_number_colon_integer_are_no_loss(tmp_path):
    """`0: 5923`, `1: 6742`, ...: a dataset's count per class, rising keys and whole numbers: no series."""
    counts = np.bincount(np.random.default_rng(0).integers(0, 10, 60000))
    run = _log(tmp_path, ["class counts:"] + [f"{c}: {n}" for c, n in enumerate(counts)])
    assert not run.has("loss")


def test_a_lone_number_under_a_counter_line_is_that_counters_loss(tmp_path):
    """TransE's NumPy loop prints `第N次循环` (loop N) on a line of its own, then the loss alone on the next."""
    losses = sgd_losses(12)
    lines = []
    for i, v in enumerate(losses):
        lines += [f"第{100 * i}次循环", f"{v:.8f}", "写入关系", "写入实体"]
    run = _log(tmp_path, lines)
    steps, values = run.arrays("loss")
    assert steps.tolist() == [100 * i for i in range(12)] and np.allclose(values, losses, rtol=1e-6)


def test_lone_whole_numbers_under_a_counter_line_are_no_loss(tmp_path):
    """`Epoch N` then a count of batches alone on the next line: whole numbers, no loss."""
    run = _log(tmp_path, [line for e in range(6) for line in (f"Epoch {e}", "469")])
    assert not run.has("loss")


def test_a_name_padded_before_its_colon_is_read(tmp_path):
    """A primer's aligned print (`print("Epoch    : ", e)`, `print("LOSS     : ", loss)`): the loss and its NaN."""
    losses = sgd_losses(14, blow_up_at=5)
    assert not np.isfinite(losses[-1])
    lines = []
    for e, v in enumerate(losses, start=1):
        lines += [f"Epoch    :  {e}", f"LOSS     :  {v:.6f}", "", f"called epoch end, epoch num:  {e}"]
    run = _log(tmp_path, lines)
    assert run.pick("loss") == "LOSS" and run.finite_points("loss") == int(np.isfinite(losses).sum())
    [f] = NanLoss().check(run)
    assert f.severity == "critical"


def test_several_records_on_one_line_with_typographic_punctuation_are_each_read(tmp_path):
    """HF Trainer's log_history entries pasted on one line through a CJK input method (`“loss”：2.29，“step”：1000`):
    each dict is a record at its own step, not the first one alone."""
    losses = sgd_losses(5, blow_up_at=3)
    entries = [f"{{“epoch”：{(i + 1) / 5}，“grad_norm”：{'NaN' if not np.isfinite(v) else 0.5}，“loss”：{v:.4f}，"
               f"“step”：{1000 * (i + 1)}}}" for i, v in enumerate(losses)]
    run = _log(tmp_path, ["，".join(entries)])
    steps, values = run.arrays("loss")
    assert steps.tolist() == [1000, 2000, 3000, 4000, 5000]
    assert np.isfinite(values).sum() == np.isfinite(losses).sum()
    assert run.arrays("grad_norm")[0].size == 5


def test_an_optimizers_parameter_groups_on_one_line_stay_one_record(tmp_path):
    """`[{'lr': 0.1, 'momentum': 0.9}, {'lr': 0.01, 'momentum': 0.9}]` printed each epoch: groups of one record,
    no counter in them, so no record per group (the LR would seem to jump between them)."""
    opt = torch.optim.SGD([{"params": [torch.zeros(1)]}, {"params": [torch.zeros(1)], "lr": 0.01}], lr=0.1,
                          momentum=0.9)
    groups = [{k: v for k, v in g.items() if k in ("lr", "momentum")} for g in opt.param_groups]
    run = _log(tmp_path, [f"epoch {e} loss {v:.4f} groups {groups}" for e, v in enumerate(sgd_losses(6))])
    assert run.arrays("lr")[1].tolist() == [0.1] * 6


def test_fields_apart_by_tabs_are_read_each_under_its_name(tmp_path):
    """Python logging's `'%s\\tAUC: %.3f\\tpAUC: %.3f' % (machine, auc, pauc)` under an `INFO:utils:` prefix."""
    lines = [f"INFO:utils:pump\tAUC: {80 - e:.3f}\tpAUC: {70 - e / 2:.3f}" for e in range(4)]
    run = _log(tmp_path, lines)
    assert run.series_named("AUC")["value"].to_list() == [80.0, 79.0, 78.0, 77.0]
    assert "pump\tAUC" not in run.names()


def test_a_settings_dump_of_padded_names_gives_no_values(tmp_path):
    """A script's settings printed at every launch through Python logging (`lr             :<TAB>0.003`, aligned,
    some values words: `optimizer      :<TAB>adam`): settings, not logged values, whatever their names."""
    from tests.runwriters import log_messages

    settings = {"optimizer": "adam", "lr": 0.003, "batch_size": 128, "model_type": "bilstm"}
    lines = []
    for launch, lr in enumerate((0.001, 0.003, 0.0001)):
        lines += [f"{k:<15}:\t{lr if k == 'lr' else v}" for k, v in settings.items()]
        lines += [f"iteration:{100 * (launch * 10 + i)}, NER loss:{v:.4f}" for i, v in enumerate(sgd_losses(10))]
    root = tmp_path / "run"
    root.mkdir()
    log_messages(root / "train.log", lines, fmt="%(asctime)s - train.log - %(levelname)s - %(message)s")
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.has("loss") and not run.has("lr") and "batch_size" not in run.names()


def test_rows_of_a_counter_and_a_value_with_no_header_are_read(tmp_path):
    """A loop that writes `f.write('%d %f\\n' % (epoch + 1, loss))` to a file named for its settings
    (`fourlayerlr-2.txt`), and a second file of the same rows named for what they are (`losses.txt`): each row is the
    value at its counter, so the run is read, not refused as a folder with no training log."""
    losses = sgd_losses(40)
    root = tmp_path / "run"
    root.mkdir()
    with open(root / "fourlayerlr-2.txt", "w") as f:
        for epoch, v in enumerate(losses):
            f.write("%d %f\n" % (epoch + 1, v))
    with open(root / "losses.txt", "w") as f:
        for i, v in enumerate(losses[::4]):
            f.write("%d %f\n" % (i, v))
    run = load_run(root, tmp_path / "f.duckdb")
    steps, values = run.arrays("loss")
    assert steps[0] == 1 and steps.size == 40 and np.isclose(values[0], losses[0], rtol=1e-5)
    assert run.has("losses") and run.arrays("losses")[0].size == 10
