"""`forensics replay` on the gallery's NaN runs (real checkpoints, batches and entry points made by
sample_runs/gen), checked against sample_runs/ground_truth.json; and the negative cases: a wrong entry point is
unfaithful, a transient one-off NaN is not reproduced, missing ingredients are one clear line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from forensics.cli import main
from forensics.usercode.replay.report import lines
from forensics.usercode.replay.result import ReplayResult
from tests.paths import REPO

torch = pytest.importorskip("torch")

RUNS = REPO / "sample_runs" / "runs"
TRUTH = json.loads((REPO / "sample_runs" / "ground_truth.json").read_text())["runs"]
NAN_RUNS = sorted(n for n, t in TRUTH.items() if t.get("replay"))


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under root with its size and mtime: what 'never written to' is checked against."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


@pytest.fixture
def run_copy(tmp_path):
    def copy(name: str) -> Path:
        dst = tmp_path / name
        shutil.copytree(RUNS / name, dst)
        return dst
    return copy


def replay_json(run_dir: Path, db: Path, capsys, *extra: str) -> tuple[int, dict | None, str]:
    code = main(["replay", str(run_dir), "--db", str(db), "--json", *extra])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 else None), out.err


def test_gallery_has_the_five_nan_runs():
    assert NAN_RUNS == ["nan_adam_eps_zero", "nan_bad_sample", "nan_log_zero", "nan_lr_too_high", "nan_sqrt_norm"]


@pytest.mark.parametrize("name", NAN_RUNS)
def test_gallery_nan_run_replays_and_matches_ground_truth(name, run_copy, tmp_path, capsys):
    """Step, phase, op, module and culprit samples as the generator recorded them, with fidelity checked. On the CPU,
    where the gallery was trained: `auto` picks CUDA where there is one, and a chaotic step is not the CPU's there."""
    run = run_copy(name)
    before = tree(run)
    code, r, err = replay_json(run, tmp_path / "f.duckdb", capsys, "--device", "cpu")
    assert code == 0, err
    truth = TRUTH[name]["replay"]
    assert r["fidelity"]["faithful"] is True
    assert r["reproduced"] is True
    assert r["from_checkpoint"] == truth["checkpoint"]
    assert r["bad_step"] == truth["first_nonfinite_step"]
    hit = r["first_nonfinite"]
    assert (hit["phase"], hit["op"], hit["module"]) == (truth["phase"], truth["op"], truth["module"])
    assert r["culprit_samples"] == truth["samples"]
    if "parameter" in truth:
        assert hit["parameter"] == truth["parameter"]
    if truth["phase"] != "optimizer":  # the user's own file and line, not torch's
        assert hit["file"].endswith("forensics_entry.py") and hit["line"] > 0
    if truth["phase"] == "forward":  # and the aten ops the torch call dispatched to
        assert hit["aten_ops"] and all(op.startswith("aten.") for op in hit["aten_ops"])
    changes = {c["change"]: c for c in r["counterfactuals"]}
    assert set(changes) == {"fp32", "clip_1.0", "lr_div_10", "eps_default", "drop_culprits"}
    assert all(c["window"] == [r["replayed_steps"][0], r["bad_step"]] for c in changes.values())
    assert changes["fp32"]["rerun"] is False  # no autocast in these runs: fp32 is the replay itself, not re-run
    assert str(changes["fp32"]["loss"]) == str(r["rerun"]["loss"][1])
    if 0 < len(truth["samples"]) < 16:  # dropping the culprits makes the step finite
        assert changes["drop_culprits"]["finite"] is True
    # the fix the diagnosis implies, replayed over the window from the checkpoint: eps back to its default for an
    # optimizer-phase NaN, lr/10 for a blow-up of every sample, the culprits dropped for a few bad samples
    fix = ("eps_default" if truth["phase"] == "optimizer" else "lr_div_10" if len(truth["samples"]) >= 16
           else "drop_culprits")
    assert r["likely_fix"]["change"] == fix and changes[fix]["finite"] is True
    assert lines(ReplayResult.from_json(r))[-1].startswith(f"likely fix: {fix} keeps ")
    assert tree(run) == before, "the run directory was written to"


def test_fidelity_is_verified_where_the_logs_cover_the_replayed_steps(run_copy, tmp_path, capsys):
    _, r, _ = replay_json(run_copy("nan_bad_sample"), tmp_path / "f.duckdb", capsys)
    compared = {(c["series"], c["step"]): c for c in r["fidelity"]["compared"]}
    assert compared[("train_loss_step", 224)]["match"] and compared[("train_loss_step", 224)]["logged"] > 0
    assert r["fidelity"]["verified"] is True


def test_weights_only_checkpoints_are_unfaithful_not_diagnosed(run_copy, tmp_path, capsys):
    """nan_log_zero's checkpoints saved as bare weights (weights/step_N.safetensors, as a run that saves only the
    model does): no Adam state, so the replayed steps are not the run's and nothing is diagnosed."""
    from safetensors.torch import save_file

    run = run_copy("nan_log_zero")
    (run / "weights").mkdir()
    for pt in sorted((run / "checkpoints").glob("step_*.pt")):
        step = pt.stem.split("_")[1]
        save_file(torch.load(pt, weights_only=True)["model"], run / "weights" / f"step_{step}.safetensors",
                  metadata={"step": step})
    shutil.rmtree(run / "checkpoints")
    code, r, _ = replay_json(run, tmp_path / "f.duckdb", capsys)
    assert code == 0
    assert r["from_checkpoint"] == TRUTH["nan_log_zero"]["replay"]["checkpoint"].replace("checkpoints/", "weights/").replace(
        ".pt", ".safetensors")
    assert r["fidelity"]["faithful"] is False
    assert r["first_nonfinite"] is None and r["status"].startswith("unfaithful")
    assert any("no optimizer state" in n for n in r["notes"])


WRONG_ENTRY = '''
import torch
exec(open(__file__.replace("wrong_entry.py", "forensics_entry.py")).read().split("# ---- this run's")[0])


def build_model(config):
    torch.manual_seed(config["seed"])
    return SmallCNN(n_classes=config["model"]["classes"], width=config["model"]["width"])


def loss_fn(model, batch):  # wrong: label smoothing the run never used
    return torch.nn.functional.cross_entropy(model(batch["image"]), batch["label"], label_smoothing=0.1)


def build_optimizer(model, config):
    return torch.optim.SGD(model.parameters(), lr=config["optim"]["lr"], momentum=0.9)


STATE_DICT_PREFIX = "model."


def step_options(config):
    return {"max_grad_norm": None, "grad_accumulation_steps": 1, "step_numbering": "checkpoint_before_step"}
'''


def test_wrong_entry_point_is_unfaithful_and_not_diagnosed(run_copy, tmp_path, capsys):
    run = run_copy("nan_bad_sample")
    wrong = tmp_path / "wrong_entry.py"
    wrong.write_text(WRONG_ENTRY.replace('__file__.replace("wrong_entry.py", "forensics_entry.py")', repr(str(run / "forensics_entry.py"))))
    code, r, _ = replay_json(run, tmp_path / "f.duckdb", capsys, "--entry", str(wrong))
    assert code == 0
    assert r["fidelity"]["faithful"] is False
    assert r["first_nonfinite"] is None and r["culprit_samples"] == [] and r["counterfactuals"] == []
    assert r["status"].startswith("unfaithful")


def _transient_run(root: Path) -> Path:
    """A real run whose loss was NaN once at step 7 by a hardware-like glitch the code does not contain: the
    training loop multiplied that one loss by NaN and, as many loops do, skipped the non-finite update."""
    from torch.utils.tensorboard import SummaryWriter

    root.mkdir()
    (root / "config.json").write_text(json.dumps({"seed": 3, "lr": 0.05}))
    entry = '''
import torch


def build_model(config):
    torch.manual_seed(config["seed"])
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def loss_fn(model, batch):
    return torch.nn.functional.mse_loss(model(batch["x"]), batch["y"])


def build_optimizer(model, config):
    return torch.optim.SGD(model.parameters(), lr=config["lr"])
'''
    (root / "forensics_entry.py").write_text(entry)
    ns: dict = {}
    exec(entry, ns)
    model = ns["build_model"]({"seed": 3})
    opt = ns["build_optimizer"](model, {"lr": 0.05})
    (root / "checkpoints").mkdir()
    (root / "batches").mkdir()
    g = torch.Generator().manual_seed(0)
    w = SummaryWriter(str(root))
    for step in range(1, 9):
        batch = {"x": torch.randn(16, 4, generator=g), "y": torch.randn(16, 1, generator=g)}
        if step == 5:
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": 4},
                       root / "checkpoints" / "step_4.pt")
        if step >= 5:
            torch.save(batch, root / "batches" / f"step_{step}.pt")
        loss = ns["loss_fn"](model, batch)
        if step == 7:
            loss = loss * float("nan")  # the glitch
        loss.backward()
        gn = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in model.parameters()]))
        w.add_scalar("loss", loss.item(), step)
        w.add_scalar("grad_norm", gn.item(), step)
        if torch.isfinite(loss):
            opt.step()
        opt.zero_grad()
    w.close()
    return root


def test_transient_one_off_nan_is_not_reproduced(tmp_path, capsys):
    run = _transient_run(tmp_path / "glitch")
    before = tree(run)
    code, r, _ = replay_json(run, tmp_path / "f.duckdb", capsys)
    assert code == 0
    assert r["step"] == 7
    assert r["reproduced"] is False and r["first_nonfinite"] is None
    assert r["status"].startswith("not reproduced: transient")
    assert r["fidelity"]["faithful"] is True and r["fidelity"]["logged_nonfinite_not_reproduced"] >= 1
    assert tree(run) == before


def test_missing_entry_point_prints_a_template_and_one_line(run_copy, tmp_path, capsys):
    run = run_copy("nan_bad_sample")
    (run / "forensics_entry.py").unlink()
    code = main(["replay", str(run), "--db", str(tmp_path / "f.duckdb")])
    out = capsys.readouterr()
    assert code == 2
    assert len(out.err.strip().splitlines()) == 1 and "no entry point" in out.err
    assert "def build_model(config" in out.out and "def loss_fn(model" in out.out
    assert "features.conv1.weight: [8, 1, 3, 3]" in out.out  # the checkpoint's tensor names and shapes
    assert "image: [32, 1, 12, 12], float32" in out.out      # the batch's keys
    assert 'STATE_DICT_PREFIX = "model."' in out.out


def test_no_finite_checkpoint_before_the_step_is_one_clear_line(run_copy, tmp_path, capsys):
    code = main(["replay", str(run_copy("nan_lr_too_high")), "--step", "15", "--db", str(tmp_path / "f.duckdb")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "no finite checkpoint before step 15" in err and "checkpoints/step_20.pt" in err


def test_missing_batch_is_one_clear_line(run_copy, tmp_path, capsys):
    run = run_copy("nan_lr_too_high")
    (run / "batches" / "step_61.pt").unlink()
    code = main(["replay", str(run), "--db", str(tmp_path / "f.duckdb")])
    err = capsys.readouterr().err
    assert code == 2 and "no batch saved for step 61" in err and len(err.strip().splitlines()) == 1


def test_replay_result_is_stored_for_the_app(run_copy, tmp_path, capsys):
    from ingest.queries import app_replays
    from ingest.store import connect

    db = tmp_path / "f.duckdb"
    _, r, _ = replay_json(run_copy("nan_bad_sample"), db, capsys)
    with connect(db, write=False) as con:
        rows = app_replays(con, r["run_id"])  # what the app's replay page reads
    assert rows.height == 1
    row = rows.row(0, named=True)
    assert (row["phase"], row["op"], row["module"], row["culprit_samples"]) == ("forward", "conv2d", "features.conv1", [7])
    assert row["faithful"] and row["reproduced"] and json.loads(row["result"])["bad_step"] == 229
    stored = ReplayResult.from_json(json.loads(row["result"]))  # the likely fix is part of the stored result
    assert stored.likely_fix["change"] == "drop_culprits" and "keeps steps 224-229 finite" in stored.likely_fix["evidence"]


def test_markdown_inside_the_run_directory_is_refused(run_copy, tmp_path, capsys):
    run = run_copy("nan_bad_sample")
    code = main(["replay", str(run), "--db", str(tmp_path / "f.duckdb"), "--markdown", str(run / "r.md")])
    assert code == 2 and "never written to" in capsys.readouterr().err


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device; this machine has none")
def test_gallery_replay_on_cuda(run_copy, tmp_path, capsys):
    code, r, err = replay_json(run_copy("nan_bad_sample"), tmp_path / "f.duckdb", capsys, "--device", "cuda")
    assert code == 0, err
    assert r["device"].startswith("cuda")
    assert r["first_nonfinite"]["op"] == "conv2d" and r["culprit_samples"] == [7]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device; this machine has none")
@pytest.mark.parametrize("name", NAN_RUNS)
def test_a_cuda_replay_of_a_cpu_run_gives_its_answer_or_says_unfaithful(name, run_copy, tmp_path, capsys):
    """The gallery was trained on the CPU. On CUDA a replay either finds what the CPU recorded or says the replayed
    steps are not the run's (a loss at 1e7 before the NaN is not reproduced there within tolerance): never a
    diagnosis of other steps than the run's."""
    code, r, err = replay_json(run_copy(name), tmp_path / "f.duckdb", capsys, "--device", "cuda")
    assert code == 0, err
    truth = TRUTH[name]["replay"]
    if r["fidelity"]["faithful"] is False:
        assert r["first_nonfinite"] is None and r["status"].startswith("unfaithful")
    else:
        hit = r["first_nonfinite"]
        assert (r["bad_step"], hit["phase"], hit["op"], hit["module"]) == (
            truth["first_nonfinite_step"], truth["phase"], truth["op"], truth["module"])
        assert r["culprit_samples"] == truth["samples"]


def test_help_ends_with_an_example(capsys):
    assert main(["replay", "--help"]) == 0
    assert capsys.readouterr().out.rstrip().splitlines()[-1].strip().startswith("forensics replay ")


def test_analyze_prints_the_exact_replay_command_and_it_runs(run_copy, tmp_path, capsys):
    import shlex

    run, db = run_copy("nan_bad_sample"), tmp_path / "f.duckdb"
    assert main(["analyze", str(run), "--db", str(db)]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "forensics replay " in ln)
    argv = shlex.split(line.split(": ", 1)[1])
    assert argv[:2] == ["forensics", "replay"] and "--step" in argv
    assert main([*argv[1:], "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["first_nonfinite"]["op"] == "conv2d" and r["culprit_samples"] == [7]


def test_finite_spike_step_lists_the_samples_and_layers_that_drive_it(run_copy, tmp_path, capsys):
    """nan_lr_too_high's ground truth has a loss spike at step 63: replaying it is faithful, finite, no NaN
    diagnosis, and names the samples and layers behind the spike."""
    spike = TRUTH["nan_lr_too_high"]["kinds"][0]
    assert spike["kind"] == "loss_spike"
    code, r, _ = replay_json(run_copy("nan_lr_too_high"), tmp_path / "f.duckdb", capsys, "--step", str(spike["step_end"]))
    assert code == 0 and r["fidelity"]["faithful"] and r["first_nonfinite"] is None
    sp = r["spike"]
    logged = next(c["logged"] for c in r["fidelity"]["compared"] if c["step"] == spike["step_end"] and c["series"] == "train/loss")
    assert abs(sp["loss"] - logged) <= 1e-5 * logged
    top = sp["samples_by_loss"][0]
    assert top["x_median"] > 5  # a few samples carry the spike
    assert sp["layers_by_grad_norm"][0]["parameter"] in {"body.fc1.weight", "body.fc2.weight", "head.weight"}


def test_from_checkpoint_is_used_and_one_without_batches_after_it_is_one_line(run_copy, tmp_path, capsys):
    run = run_copy("nan_bad_sample")
    early = "lightning_logs/version_0/checkpoints/epoch=5-step=192.ckpt"
    code = main(["replay", str(run), "--from-checkpoint", early, "--db", str(tmp_path / "f.duckdb")])
    err = capsys.readouterr().err
    assert code == 2 and "no batch saved for step 192" in err and "198-229" in err
    code, r, _ = replay_json(run, tmp_path / "f.duckdb", capsys, "--from-checkpoint",
                             str(run / "lightning_logs/version_0/checkpoints/epoch=6-step=224.ckpt"))
    assert code == 0 and r["from_checkpoint"].endswith("epoch=6-step=224.ckpt") and r["culprit_samples"] == [7]


@pytest.mark.parametrize(("logged", "replayed", "match"), [
    (0.1234, 0.12344, True),                 # HF rounds to 4 digits: half a unit of the last one
    (0.1234, 0.12346, False),
    (2.3098154067993164, 2.3098154067993164 * (1 + 5e-6), True),   # full precision: 1e-5 relative
    (2.3098154067993164, 2.3098154067993164 * (1 + 5e-5), False),
    (1.5e-05, 1.54e-05, True), (1.5e-05, 1.56e-05, False),         # rounding read through an exponent
    (float("nan"), float("nan"), True), (float("inf"), float("inf"), True),
    (float("nan"), 1.0, False), (float("inf"), float("-inf"), False),
])
def test_fidelity_tolerance_is_the_logged_rounding(logged, replayed, match):
    from forensics.usercode.replay.fidelity import close

    assert close(logged, replayed)[0] is match


def test_replay_of_a_stored_run_opens_the_store_twice_and_never_while_the_model_runs(run_copy, tmp_path, capsys,
                                                                                      monkeypatch):
    """Issue 28: replay opened DuckDB 7 times (14 connections' open and close) before its answer. With the run
    and its checkpoints already stored, the check of what is new and the read of the run share one held
    connection, closed before the user's code runs; the result is written through one more."""
    from ingest import store

    run = run_copy("nan_sqrt_norm")
    db = tmp_path / "f.duckdb"
    assert replay_json(run, db, capsys)[0] == 0  # the first replay stores the run and its checkpoints
    events, connections = [], []
    real_open, real_entry = store._open, None

    def spy_open(path, write, deadline):
        events.append("open")
        connections.append(real_open(path, write, deadline))
        return connections[-1]
    monkeypatch.setattr(store, "_open", spy_open)
    import forensics.usercode.kit.entry as entry
    real_entry = entry.load_entry

    def is_open(con) -> bool:
        try:
            con.execute("SELECT 1").fetchall()
            return True
        except duckdb.ConnectionException:
            return False

    def spy_entry(*a, **k):
        events.append(("user code", sum(map(is_open, connections))))
        return real_entry(*a, **k)
    monkeypatch.setattr(entry, "load_entry", spy_entry)
    code, r, err = replay_json(run, db, capsys)
    assert code == 0 and r["reproduced"] is True, err
    assert events == ["open", ("user code", 0), "open"]


def _terminate_after_the_answer(command: str, run: Path, db: Path) -> tuple[int, str]:
    """The real CLI: wait for the command's JSON answer to close on stdout, then SIGTERM it at once; (rc, stderr)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-m", "forensics", command, str(run), "--db", str(db), "--json",
                             *(["--device", "cpu"] if command == "probe" else [])], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO)
    try:
        for line in proc.stdout:
            if line.rstrip("\n") == "}":  # the answer's last line, flushed as main returns: the process ends
                time.sleep(0.3)  # past main (torch's teardown took about a second more)
                proc.send_signal(signal.SIGTERM)
                break
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    return proc.returncode, err


def test_sigterm_as_replay_ends_says_what_analyze_says(run_copy, tmp_path):
    """`analyze` ends without the interpreter's teardown; replay ran torch's (about a second) after main had put
    SIGTERM's default action back, so a SIGTERM then ended it with 143 and not a word (analyze: one line, 143). Now
    the process either ends first with its own code or says the one line and exits 143."""
    from forensics.services.process import TERMINATED_LINE

    code, err = _terminate_after_the_answer("replay", run_copy("nan_lr_too_high"), tmp_path / "f.duckdb")
    assert (code, err) == (0, "") or (code == 143 and err.splitlines() == [TERMINATED_LINE]), (code, err)


@pytest.mark.parametrize("then", ["interrupted", "store_failed"])
def test_a_sigterm_a_library_turned_into_its_own_error_is_still_a_sigterm(monkeypatch, capsys, then):
    """DuckDB turns an interrupt during a query into its own error, which the store raises back as a plain
    KeyboardInterrupt, or a write after it fails ("Current transaction is aborted"): a SIGTERM there said
    "interrupted" (130) or "cannot write the database" (2). It is a SIGTERM: one line, 143."""
    import os
    import signal

    from forensics import cli
    from forensics.services.process import TERMINATED_LINE
    from ingest.errors import StoreUnwritable

    def command(args):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        except KeyboardInterrupt:
            if then == "interrupted":
                raise KeyboardInterrupt from None  # as ingest.store's _failures re-raises DuckDB's
            raise StoreUnwritable("cannot write the database: Current transaction is aborted") from None
        return 0

    monkeypatch.setitem(cli.COMMANDS, "rules", cli.Command(command))
    assert main(["rules"]) == 143
    assert capsys.readouterr().err.splitlines() == [TERMINATED_LINE]
    monkeypatch.setitem(cli.COMMANDS, "rules", cli.Command(lambda args: (_ for _ in ()).throw(StoreUnwritable("x"))))
    assert main(["rules"]) == 2  # the next command starts with no SIGTERM seen: its own error is its own
