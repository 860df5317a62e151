"""The user-code kit shared by replay, probe and `analyze`'s replay command: the one rule that chooses the starting
checkpoint (forensics/usercode/kit/checkpoints.py)."""

from __future__ import annotations

import json
import shutil

import pytest

from forensics.cli import main
from forensics.usercode.kit.checkpoints import choose_checkpoint, starting_checkpoint, usable
from tests.paths import REPO


def row(path: str, step: int | None, fmt: str = "torch", finite: bool | None = True, status: str = "ok") -> dict:
    return {"path": path, "format": fmt, "step": step, "finite": finite, "status": status}


def test_the_starting_checkpoint_is_the_last_usable_one_whose_state_precedes_the_step():
    rows = [row("a.pt", 20), row("b.pt", 40), row("c.pt", 60, finite=False), row("d.pt", 50, status="needs_pickle"),
            row("e.pt", None), row("f.pt", 45, finite=None, status="partial"), row("g.pt", 80)]
    assert [r["path"] for r in usable(rows)] == ["a.pt", "b.pt", "f.pt", "g.pt"]
    assert starting_checkpoint(rows, 80)["path"] == "f.pt"  # g.pt holds the state after step 80: past it
    assert starting_checkpoint(rows, 81)["path"] == "g.pt"
    assert starting_checkpoint(rows, 20) is None
    # Lightning's step=N holds the state before step N: a replay of step N starts from it ...
    lightning = [row("a.pt", 20), row("epoch=1-step=30.ckpt", 30, fmt="lightning")]
    assert starting_checkpoint(lightning, 30)["path"] == "epoch=1-step=30.ckpt"
    # ... unless the entry point says its checkpoints hold the state after their step
    assert starting_checkpoint(lightning, 30, "checkpoint_after_step")["path"] == "a.pt"


def test_replay_refuses_what_the_rule_refuses_and_names_the_checkpoints(tmp_path):
    from ingest.errors import CheckpointMismatch

    rows = [row("a.pt", 20, finite=False), row("b.pt", 40, status="unreadable")]
    with pytest.raises(CheckpointMismatch, match=r"no finite checkpoint before step 50 .*a\.pt \(step 20, NON-FINITE\)"):
        choose_checkpoint(rows, tmp_path, 50, None, None)
    assert choose_checkpoint([row("a.pt", 20), *rows[1:]], tmp_path, 50, None, None) == ("a.pt", "torch", 20, 21)


class Unsafe:  # not on torch's weights_only allow-list: a checkpoint holding one needs pickle to be read
    pass


def test_analyze_names_the_checkpoint_replay_starts_from(tmp_path, capsys):
    """A checkpoint the store could not read (it needs pickle) between the last good one and the NaN onset:
    `analyze` named it as the replay start (its own rule: step and finiteness only) while `replay` skipped it."""
    torch = pytest.importorskip("torch")
    run = tmp_path / "nan_lr_too_high"
    shutil.copytree(REPO / "sample_runs" / "runs" / "nan_lr_too_high", run)
    good = torch.load(run / "checkpoints" / "step_60.pt", weights_only=True)
    torch.save({**good, "step": 70, "extra": Unsafe()}, run / "checkpoints" / "step_70.pt")
    db = tmp_path / "f.duckdb"
    assert main(["analyze", str(run), "--db", str(db), "--json"]) == 0
    start = json.loads(capsys.readouterr().out)["replay_from"]
    from forensics.judge.run import Run
    from ingest.store import connect

    with connect(db, write=False) as con:
        stored = Run.from_store(con, con.execute("SELECT run_id FROM runs").fetchone()[0]).table("checkpoints")
    assert {r["path"]: r["status"] for r in stored.to_dicts()}["checkpoints/step_70.pt"] == "needs_pickle"
    assert start["onset_step"] == 80 and start["checkpoint"] == {"path": "checkpoints/step_60.pt", "step": 60}
    assert choose_checkpoint(stored.to_dicts(), run, 80, None, None)[0] == "checkpoints/step_60.pt"


CONFIG_SHAPES = {
    "no_lr": {"seed": 1, "model": {"width": 8}, "optimizer": {"name": "sgd", "momentum": 0.9}},
    "no_optimizer": {"seed": 1, "model": {"width": 8}},
    "no_model_section": {"lr": 0.1, "max_grad_norm": 1.0, "gradient_accumulation_steps": 2},
    "no_config": None,
    "keys_with_quotes_and_breaks": {'it\'s "odd"': {"lr": 0.1}, "a\nb": {"max_grad_norm": 2.0}, "back\\slash": 1},
}


@pytest.mark.parametrize("shape", sorted(CONFIG_SHAPES))
def test_the_entry_template_is_valid_python_for_every_config_shape(shape, tmp_path, capsys):
    """A run without an entry point (TensorBoard logs, a torch checkpoint, a saved batch) whose config lacks the LR,
    the optimizer or the model section, or whose keys hold quotes and line breaks: replay and probe print one
    template that parses, says what to fill in, and fail with the same one line."""
    import ast

    torch = pytest.importorskip("torch")
    from torch.utils.tensorboard import SummaryWriter

    run = tmp_path / 'run """ with quotes'
    run.mkdir()
    if CONFIG_SHAPES[shape] is not None:
        (run / "config.json").write_text(json.dumps(CONFIG_SHAPES[shape]))
    model = torch.nn.Linear(4, 2)
    (run / "checkpoints").mkdir()
    torch.save({"model": model.state_dict(), "step": 2}, run / "checkpoints" / "step_2.pt")
    (run / "batches").mkdir()
    torch.save({"x": torch.randn(8, 4), "y\nlabel": torch.zeros(8, dtype=torch.long)}, run / "batches" / "step_3.pt")
    w = SummaryWriter(str(run))
    for step in range(1, 5):
        w.add_scalar("train/loss", 1.0 / step if step < 4 else float("nan"), step)
    w.close()
    errors = []
    for command in ("replay", "probe"):
        assert main([command, str(run), "--db", str(tmp_path / "f.duckdb")]) == 2
        out = capsys.readouterr()
        tree = ast.parse(out.out)  # valid Python
        assert {f.name for f in tree.body if isinstance(f, ast.FunctionDef)} >= {"build_model", "loss_fn",
                                                                                "build_optimizer", "step_options"}
        assert "Fill in before use" in out.out and out.out.count("TODO") >= 3
        lr_known = shape in ("no_model_section", "keys_with_quotes_and_breaks")
        assert ("no learning rate in the stored config" in out.out) is not lr_known
        errors.append(out.err.strip())
    assert len(errors[0].splitlines()) == 1 and errors[0] == errors[1]  # one error text for both
    assert "no entry point" in errors[0]
