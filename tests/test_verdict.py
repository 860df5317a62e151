"""Issue 13: an honest verdict. "healthy" means "I read this run and found nothing", never "I read nothing"; every
read problem is in the report; a folder of runs is named, not merged; --markdown paths fail in one line."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from forensics.cli import main
from forensics.judge.findings import Analysis, Finding
from forensics.judge.verdict import headline_index
from tests.runwriters import (
    curve,
    hf_history,
    write_tb,
    write_trainer_state,
)

REPO = Path(__file__).resolve().parents[1]
GALLERY = REPO / "sample_runs" / "runs"


def analyze_json(capsys, run: Path, db: Path, *extra: str) -> tuple[int, dict]:
    code = main(["analyze", str(run), "--db", str(db), "--json", *extra])
    out = capsys.readouterr().out
    return code, json.loads(out) if out else {}


def files_of(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*")}


def healthy_tb(root: Path) -> Path:
    """A healthy run by SummaryWriter, at a steady 0.5 s per step (wall times written in a test loop are
    microseconds apart, and their jitter would read as throughput stalls)."""
    from torch.utils.tensorboard import SummaryWriter

    steps, loss = curve()
    w = SummaryWriter(log_dir=str(root))
    for s, v in zip(steps.tolist(), loss.tolist()):
        w.add_scalar("train/loss", v, global_step=s, walltime=1.7e9 + 0.5 * s)
        w.add_scalar("train/grad_norm", 1.0, global_step=s, walltime=1.7e9 + 0.5 * s)
    w.close()
    return root


def nan_tb(root: Path) -> Path:
    steps, loss = curve(n=300)
    loss[240:] = np.nan
    return write_tb(root, {"train/loss": (steps, loss)})


# -- four values --------------------------------------------------------------------------------------------

def test_healthy_run_is_healthy_with_its_reason(tmp_path, capsys):
    run = healthy_tb(tmp_path / "ok")
    code, out = analyze_json(capsys, run, tmp_path / "f.duckdb", "--fail-on", "inconclusive")
    assert code == 0
    assert out["verdict"] == "healthy" and out["healthy"] is True
    assert "300 points of the training loss" in out["verdict_reason"]
    assert out["read_problems"] == [] and out["db"] == str(tmp_path / "f.duckdb")


def test_fail_on_warning_fails_an_inconclusive_run_and_critical_does_not(tmp_path, capsys):
    """`--fail-on warning` passed an INCONCLUSIVE run: a CI gate asking to fail on warnings means "anything not
    healthy", and a run nobody could check must not pass as one where nothing was found. Inconclusive ranks with
    warning (`inconclusive` is the same rule); `critical` still asks for a critical finding only."""
    root = tmp_path / "root"
    run = root / "short"
    run.mkdir(parents=True)
    (run / "train.log").write_text("".join(f"step {i} loss {1 / i}\n" for i in range(1, 4)))  # too short to judge
    db = tmp_path / "f.duckdb"
    expected = {"warning": 1, "inconclusive": 1, "critical": 0}
    got = {}
    for level in expected:
        got[level], out = analyze_json(capsys, run, db, "--fail-on", level)
        assert out["verdict"] == "inconclusive" and not out["findings"]
    assert got == expected
    assert main(["analyze", str(root), "--all", "--db", str(db), "--fail-on", "warning"]) == 1
    assert "INCONCLUSIVE" in capsys.readouterr().out
    healthy = healthy_tb(tmp_path / "ok")
    assert analyze_json(capsys, healthy, db, "--fail-on", "warning")[0] == 0


def test_a_documentation_folder_is_inconclusive_not_healthy(tmp_path, capsys):
    """/usr/share/doc/python3.11 was "healthy": its pybench.log counted as a console log."""
    doc = tmp_path / "python3.11"
    doc.mkdir()
    (doc / "README.Debian").write_text("Python 3.11 for Debian\n----------------------\n\nThis is Python 3.11.\n")
    (doc / "changelog.Debian.gz").write_bytes(gzip.compress(b"python3.11 (3.11.2-6) bookworm; urgency=medium\n"))
    (doc / "copyright").write_text("This package was put together by Matthias Klose.\n")
    (doc / "pybench.log").write_text("pybench run disabled for this build\n")
    before = files_of(doc)
    code, out = analyze_json(capsys, doc, tmp_path / "f.duckdb")
    assert code == 0 and out["verdict"] == "inconclusive" and out["healthy"] is False
    assert "no training-loss series" in out["verdict_reason"]
    assert "README.Debian" in out["unknown_files"]
    assert main(["analyze", str(doc), "--db", str(tmp_path / "f.duckdb"), "--fail-on", "inconclusive"]) == 1
    assert capsys.readouterr().out.splitlines()[0].startswith("python3.11: INCONCLUSIVE: no training-loss series")
    assert files_of(doc) == before


def test_a_system_log_folder_is_inconclusive(tmp_path, capsys):
    """/var/log: every `.log` is a console log, and none holds a training series."""
    logs = tmp_path / "log"
    (logs / "apt").mkdir(parents=True)
    (logs / "dpkg.log").write_text("".join(
        f"2025-04-28 10:{m:02d}:00 status installed python3.11:amd64 3.11.2-6+deb12u{m}\n" for m in range(40)))
    (logs / "alternatives.log").write_text(
        "update-alternatives 2025-04-28 10:00:01: run with --install /usr/bin/python python /usr/bin/python3.11 1\n")
    (logs / "apt" / "history.log").write_text("Start-Date: 2025-04-28  10:00:00\nCommandline: apt-get install -y gcc\n")
    code, out = analyze_json(capsys, logs, tmp_path / "f.duckdb")
    assert code == 0 and out["verdict"] == "inconclusive"
    assert "no training-loss series" in out["verdict_reason"]


def test_five_points_of_a_huge_loss_are_not_healthy(tmp_path, capsys):
    """A TensorBoard run whose loss is ~1e12 at each of its 5 points was "healthy": divergence needs 12 points."""
    steps = np.array([999, 1999, 2999, 3999, 4999])
    run = write_tb(tmp_path / "tb_dlgn_v0", {"train_loss": (steps, np.array([1.87e12, 9e11, 4e10, 8e9, 2.2e9])),
                                             "val_loss": (steps, np.array([4.8e11, 2e11, 3e10, 6e9, 2.4e9]))})
    code, out = analyze_json(capsys, run, tmp_path / "f.duckdb")
    assert code == 0 and out["verdict"] != "healthy" and out["healthy"] is False
    assert out["verdict_reason"]


def test_a_validation_loss_alone_is_judged_as_validation_and_the_verdict_says_the_training_loss_is_missing(
        tmp_path, capsys):
    """No training loss, a validation loss that blows up ×1e5 at its last evaluation: divergence on the validation
    loss, said as such; the same validation loss falling is inconclusive, naming what would decide (the training
    loss), and a rise of ×1.3 is not called a divergence (without the training loss it may be overfitting)."""
    steps = np.arange(1, 7) * 100
    for name, val, verdict, kinds in (("blown", [2.1, 1.8, 1.6, 1.5, 1.45, 2e5], "failed", ["divergence"]),
                                      ("calm", [2.1, 1.8, 1.6, 1.5, 1.45, 1.4], "inconclusive", []),
                                      ("rising", [1.4, 1.45, 1.5, 1.6, 1.7, 1.8], "inconclusive", [])):
        run = write_tb(tmp_path / name, {"eval/loss": (steps, np.array(val))})
        code, out = analyze_json(capsys, run, tmp_path / f"{name}.duckdb")
        assert out["verdict"] == verdict and [f["kind"] for f in out["findings"]] == kinds, name
        assert "no training loss" in out["verdict_reason"] or "no training-loss series" in out["verdict_reason"]
        assert "validation" in out["verdict_reason"]
        if kinds:
            assert out["findings"][0]["series"] == "eval/loss" and "judged as validation" in out["findings"][0]["summary"]
        else:
            assert "the training loss beside it would decide" in out["verdict_reason"]


def test_a_short_log_with_nothing_glaring_says_what_would_decide(tmp_path, capsys):
    """Four falling points: too few for the shape rules, nothing glaring; the verdict names the points it needs."""
    run = write_tb(tmp_path / "short", {"train/loss": (np.arange(1, 5), np.array([2.3, 2.0, 1.8, 1.7]))})
    code, out = analyze_json(capsys, run, tmp_path / "f.duckdb")
    assert out["verdict"] == "inconclusive" and "what would decide" in out["verdict_reason"]
    assert "points of train/loss (it has 4" in out["verdict_reason"]


def test_only_beside_a_nan_is_not_healthy(tmp_path, capsys):
    """`--only loss_spike` on a NaN run said "healthy" with the NaN printed right below it."""
    run = nan_tb(tmp_path / "nan_run")
    code, out = analyze_json(capsys, run, tmp_path / "f.duckdb", "--only", "loss_spike")
    assert code == 0 and out["verdict"] == "inconclusive"
    assert "train/loss is nan at step 2400" in out["verdict_reason"] and "--only" in out["verdict_reason"]
    assert main(["analyze", str(run), "--db", str(tmp_path / "f.duckdb"), "--only", "loss_spike"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "healthy" not in first and "INCONCLUSIVE" in first


def test_a_missing_wandb_reader_is_inconclusive_and_names_the_install(tmp_path):
    """Without wandb installed the gallery's W&B runs were "healthy: no finding from 0 detectors"."""
    run = GALLERY / "val_noise_tiny_val"
    code = ("import sys; sys.modules['wandb'] = None  # as if wandb were not installed\n"
            "from forensics.cli import main\n"
            f"sys.exit(main(['analyze', {str(run)!r}, '--db', {str(tmp_path / 'f.duckdb')!r}, '--json', "
            "'--fail-on', 'inconclusive']))")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                          check=False)
    assert done.returncode == 1, done.stderr
    out = json.loads(done.stdout)
    assert out["verdict"] == "inconclusive" and "pip install wandb" in out["verdict_reason"]
    assert [p["kind"] for p in out["read_problems"]] == ["missing_dependency"]
    assert out["read_problems"][0]["path"].endswith("run-tinyval.wandb")
    assert "Traceback" not in done.stderr


# -- read problems in the report ----------------------------------------------------------------------------

def test_a_trainer_state_cut_in_half_is_reported_and_not_healthy(tmp_path, capsys):
    steps, loss = curve(n=60)
    history = hf_history(steps + 10, loss, np.ones(steps.size))
    run = write_trainer_state(tmp_path / "hf_run", history)
    text = (run / "trainer_state.json").read_text()
    (run / "trainer_state.json").write_text(text[:len(text) // 2])
    code, out = analyze_json(capsys, run, tmp_path / "f.duckdb")
    assert code == 0 and out["verdict"] == "inconclusive"
    [problem] = out["read_problems"]
    assert problem["path"] == "trainer_state.json" and problem["kind"] == "truncated"
    assert problem["position"] is not None and problem["detail"]
    assert problem["kept"].endswith("points") and problem["kept"] != "0 points"
    assert "trainer_state.json" in out["verdict_reason"]

    md = tmp_path / "diag.md"
    assert main(["analyze", str(run), "--db", str(tmp_path / "f.duckdb"), "--markdown", str(md)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("read with problems: trainer_state.json at ") and "kept " in lines[1]
    assert "## Read with problems" in md.read_text() and "| trainer\\_state.json |" in md.read_text()


def test_garbage_event_file_and_a_pickled_checkpoint_are_read_problems(tmp_path, capsys):
    import torch

    run = healthy_tb(tmp_path / "run")
    (run / "events.out.tfevents.1700000000.host.1.garbage").write_bytes(bytes(range(256)) * 8)
    torch.save(torch.nn.Linear(2, 2), run / "model.pt")  # a whole module: loading it needs full unpickling
    code, out = analyze_json(capsys, run, tmp_path / "f.duckdb")
    assert code == 0
    by_path = {p["path"]: p for p in out["read_problems"]}
    assert by_path["model.pt"]["kind"] == "needs_pickle" and by_path["model.pt"]["kept"] == "nothing"
    garbage = by_path["events.out.tfevents.1700000000.host.1.garbage"]
    assert garbage["kept"] == "nothing" and garbage["detail"]
    assert out["verdict"] == "inconclusive" and "read with problems" in out["verdict_reason"]


def test_a_cut_event_file_tail_is_shown_but_is_the_record_in_flight(tmp_path, capsys):
    run = healthy_tb(tmp_path / "run")
    [events] = run.glob("events.out.tfevents.*")
    events.write_bytes(events.read_bytes()[:-7])
    code, out = analyze_json(capsys, run, tmp_path / "f.duckdb")
    assert code == 0
    [problem] = out["read_problems"]
    assert problem["kind"] == "truncated" and problem["position"] > 0 and problem["format"] == "tensorboard"
    assert out["verdict"] == "healthy"  # at most the last record was lost: the one being written
    assert main(["analyze", str(run), "--db", str(tmp_path / "f.duckdb")]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith(f"read with problems: {events.name} at ")


# -- a folder of runs ---------------------------------------------------------------------------------------

def test_a_folder_of_runs_is_named_not_merged(tmp_path, capsys):
    root = tmp_path / "experiments"
    healthy_tb(root / "lr_1e-3")
    nan_tb(root / "lr_1e-1")
    db = tmp_path / "f.duckdb"
    assert main(["analyze", str(root), "--db", str(db)]) == 2
    captured = capsys.readouterr()
    [line] = captured.err.splitlines()
    assert "holds 2 runs (lr_1e-1, lr_1e-3)" in line and "--all" in line and captured.out == ""
    assert not db.exists()  # nothing was read as one merged run
    assert main(["ingest", str(root), "--db", str(db), "--quiet"]) == 2
    assert "holds 2 runs" in capsys.readouterr().err
    assert main(["ingest", str(root), "--all", "--db", str(db), "--quiet", "--json"]) == 0
    assert sorted(r["name"] for r in json.loads(capsys.readouterr().out)["runs"]) == ["lr_1e-1", "lr_1e-3"]


def test_ingest_reads_every_directory_it_can_and_names_the_rest(tmp_path, capsys):
    good_a, good_b = healthy_tb(tmp_path / "a"), healthy_tb(tmp_path / "b")
    empty = tmp_path / "empty"
    empty.mkdir()
    code = main(["ingest", str(good_a), str(tmp_path / "missing"), str(empty), str(good_b),
                 "--db", str(tmp_path / "f.duckdb"), "--quiet", "--json"])
    captured = capsys.readouterr()
    assert code == 2
    out = json.loads(captured.out)
    assert [r["name"] for r in out["runs"]] == ["a", "b"]
    assert [f["path"] for f in out["failed"]] == [str(tmp_path / "missing"), str(empty)]
    assert len(captured.err.splitlines()) == 2 and "Traceback" not in captured.err


# -- --markdown ---------------------------------------------------------------------------------------------

def test_unwritable_markdown_is_one_line_and_exit_2(tmp_path, capsys):
    run = healthy_tb(tmp_path / "run")
    assert main(["analyze", str(run), "--db", str(tmp_path / "f.duckdb"),
                 "--markdown", str(tmp_path / "no" / "such" / "r.md")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.splitlines()) == 1 and "does not exist" in captured.err
    assert main(["analyze", str(run), "--db", str(tmp_path / "f.duckdb"), "--markdown", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


def test_markdown_dash_is_stdout(tmp_path, capsys, monkeypatch):
    run = healthy_tb(tmp_path / "run")
    monkeypatch.chdir(tmp_path)
    assert main(["analyze", str(run), "--db", str(tmp_path / "f.duckdb"), "--markdown", "-"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# run-forensics diagnosis: run") and "**run: healthy:" in out
    assert not (tmp_path / "-").exists()
    assert main(["analyze", str(run), "--db", str(tmp_path / "f.duckdb"), "--markdown", "-", "--json"]) == 2


# -- the headline: the earliest cause -----------------------------------------------------------------------

class _Kind:
    def __init__(self, kind: str):
        self.kind = kind


def _finding(kind: str, severity: str, step: int, step_end: int | None, event: int) -> Finding:
    f = Finding.of(_Kind(kind), severity=severity, step=step, step_end=step_end, summary=kind)
    return f.with_event(event)


def headline(a: Analysis) -> Finding | None:
    i = headline_index(a.findings)
    return None if i is None else a.findings[i]


def test_headline_rule_causes_before_symptoms():
    a = Analysis("r", "r", findings=[
        _finding("nan_loss", "critical", 80, None, 1), _finding("exploding_gradients", "critical", 63, 80, 1),
        _finding("flat_loss", "critical", 20, 800, 2), _finding("weight_collapse", "warning", 20, 800, 2),
        _finding("loss_spike", "warning", 10, 10, 3)])
    assert headline(a).kind == "weight_collapse"  # upstream of the flat loss in its event; earliest of stage 0
    a.findings = [f for f in a.findings if f.event != 2]
    assert headline(a).kind == "exploding_gradients"  # a warning in another event does not headline criticals
    assert headline(Analysis("r", "r")) is None


def test_a_finding_that_follows_another_kind_ranks_after_it():
    """amp_overflow is upstream of nan_loss, except where its evidence says it follows the NaN (every halving came
    with a non-finite loss): then the NaN leads; without a nan_loss finding the mark changes nothing."""
    nan, amp = _finding("nan_loss", "critical", 1, None, 1), _finding("amp_overflow", "critical", 1, 2, 1)
    assert headline(Analysis("r", "r", findings=[nan, amp])).kind == "amp_overflow"
    amp.evidence["follows"] = "nan_loss"
    assert headline(Analysis("r", "r", findings=[nan, amp])).kind == "nan_loss"
    assert headline(Analysis("r", "r", findings=[_finding("loss_spike", "critical", 1, 1, 1), amp])).kind == "amp_overflow"


def test_every_detector_declares_its_facts_on_its_class():
    """A detector's place in the chain is its own class's `stage`, declared, not inherited or defaulted: a new
    detector without one fails here; the sets the verdict, the engine and watch read are derived from the flags."""
    from forensics.judge import detectors
    from forensics.judge.catalog import KINDS, NOT_YET_DETECTED
    from forensics.judge.detectors.base import MECHANISM, NONFINITE, SHAPE, UPSTREAM

    assert set(detectors.STAGE) == set(KINDS) - set(NOT_YET_DETECTED)
    for cls in detectors.ALL:
        assert "stage" in vars(cls) and cls.stage in (UPSTREAM, MECHANISM, SHAPE, NONFINITE), cls.__name__
        for flag in ("reads_curve", "joins_chain", "nonfinite", "reads_loss_level"):
            assert isinstance(getattr(cls, flag, False), bool), (cls.__name__, flag)
    assert detectors.NONFINITE_KINDS <= detectors.CHAIN_KINDS  # a NaN is where a chain ends
    assert detectors.CURVE_KINDS and all(detectors.STAGE[k] in (MECHANISM, SHAPE) for k in detectors.CURVE_KINDS)


@pytest.mark.parametrize("name, cause", [("weight_collapse_wd", "weight_collapse"), ("dead_relu_bias_init", "dead_relu"),
                                         ("nan_lr_too_high", "divergence")])
def test_gallery_headline_is_the_ground_truth_primary(name, cause, tmp_path_factory):
    from forensics.services.analysis import analyze

    truth = json.loads((REPO / "sample_runs" / "ground_truth.json").read_text())["runs"][name]
    assert [k["kind"] for k in truth["kinds"] if k.get("primary")] == [cause]
    result = analyze(GALLERY / name, tmp_path_factory.getbasetemp() / "gallery.duckdb")
    assert result.headline().kind == cause


def test_the_default_install_reads_every_listed_format_and_leaves_the_app_out():
    """The README's `pip install -e .` must read .wandb files (a missing reader made runs "healthy"), and the
    CLI must not pull Streamlit and its kin."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    runtime = {d.split(">")[0].split("=")[0].strip() for d in project["dependencies"]}
    assert "wandb" in runtime and "streamlit" not in runtime
    assert any(d.startswith("streamlit") for d in project["optional-dependencies"]["app"])


@pytest.mark.parametrize("records", [5, 8])
def test_each_glaring_effect_is_named_at_a_few_records(tmp_path, capsys, records):
    """What an expert names at a glance, written by SummaryWriter at 5 and 8 records: a loss of exactly 0 at every
    record, a loss blowing up by orders of magnitude on its last records with validation, a loss rising at every
    record with validation rising too, a loss within 1% of its first value while the LR runs its schedule out,
    memory rising at every record, and an LR printed as 0 on every record under a loss that does not fall. Each is
    named (its kind), never healthy or inconclusive."""
    n, rng = records, np.random.default_rng(0)
    s, k = np.arange(1, records + 1) * 10, np.arange(records)
    cases = {
        "flat_loss": {"train/loss": (s, np.zeros(n))},
        "divergence": {"train/loss": (s, np.r_[2.3 - 0.1 * k[:-2], 80.0, 4e4]), "val/loss": (s, np.r_[2.2 - 0.1 * k[:-1], 5e3])},
        "divergence ": {"train/loss": (s, 1.25 ** k), "val/loss": (s, 1.1 * 1.2 ** k)},
        "flat_loss ": {"train/loss": (s, 0.693 * (1 + rng.normal(0, 0.004, n))), "lr": (s, 1e-3 * (1 - k / n))},
        "memory_growth": {"train/loss": (s, 2.3 * 0.9 ** k), "memory/allocated_gb": (s, 2.0 + 0.7 * k)},
        "lr_schedule_anomaly": {"train/loss": (s, 2.3 * (1 + rng.normal(0, 0.01, n))), "lr": (s, np.zeros(n))},
    }
    for i, (kind, series) in enumerate(cases.items()):
        code, out = analyze_json(capsys, write_tb(tmp_path / f"r{i}", series), tmp_path / f"r{i}.duckdb")
        assert out["verdict"] not in ("healthy", "inconclusive"), (kind, out["verdict_reason"])
        assert kind.strip() in [f["kind"] for f in out["findings"]], (kind, [f["summary"] for f in out["findings"]])
