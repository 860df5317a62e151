"""`forensics probe` (issue 27) on the gallery's runs (sample_runs/, written by sample_runs/generate.py through
forensics.capture: step-0 checkpoint, the first two batches, the entry point): each bug fails the check that should
catch it and names the module, parameter or batch key; the healthy runs pass every check; the run directory is never
written to. Each run is probed in a copy (tmp_path) all the same, so a probe bug cannot touch the committed gallery.
Which gallery bugs no probe sees, and why, is in docs/probe.md."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from forensics.cli import main  # noqa: E402
from forensics.usercode.probe import CHECKS  # noqa: E402
from tests.paths import REPO  # noqa: E402

GALLERY = REPO / "sample_runs" / "runs"
BODY = ["body.fc1.weight", "body.fc1.bias", "body.fc2.weight", "body.fc2.bias"]
HEAD = ["head.weight", "head.bias"]

# run -> (the checks that fail on it: every other passes or says n/a, {check: names it must give})
EXPECTED = {
    # the loop never calls backward(): the probe's own backward works, but the checkpoints never changed
    "flat_no_backward": ({"gradient_flow"}, {"gradient_flow": BODY + HEAD}),
    # a frozen body, and a head replaced after the optimizer was built (never updated)
    "flat_all_frozen": ({"gradient_flow", "overfit_one_batch"}, {"gradient_flow": BODY + HEAD}),
    "plateau_double_softmax": ({"output_head", "overfit_one_batch"}, {"output_head": ["softmax"]}),
    "initial_loss_bad_init": ({"initial_loss"}, {"initial_loss": ["head"]}),
    "underfit_linear": ({"overfit_one_batch"}, {}),                 # a linear model cannot memorise 32 samples
    "update_ratio_lr_too_small": ({"lr_range"}, {"lr_range": ["lr=1e-06"]}),
    "vanishing_deep_sigmoid": ({"gradient_flow", "overfit_one_batch"}, {"gradient_flow": ["body.fc1", "head"]}),
    "saturated_tanh_unscaled": ({"input_scale", "gradient_flow"}, {"input_scale": ["x", "body.fc1"],
                                                                   "gradient_flow": ["body.act1"]}),
    "dead_relu_bias_init": ({"gradient_flow", "overfit_one_batch"}, {"gradient_flow": ["body.act1", "body.act2"]}),
    "healthy_mlp": (set(), {}),
    "healthy_cnn": (set(), {}),
    "healthy_transformer": (set(), {}),
}
# the checks that train (up to 200 and 100 steps): slow; the single-pass ones run on every gallery run
TRAINED = ("overfit_one_batch", "lr_range")
SINGLE_PASS = "input_scale,output_head,initial_loss,gradient_flow,label_shuffle"


@pytest.fixture(autouse=True)
def one_thread():
    """Two shared cores: torch's default threads fight each other (a probe of the gallery's transformer took 370 s
    with them, 6 s with one)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def files(run: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(run)): (p.stat().st_size, p.stat().st_mtime_ns) for p in run.rglob("*")}


def probe(name: str, tmp_path: Path, capsys, checks: str | None = None) -> dict:
    run = tmp_path / name
    shutil.copytree(GALLERY / name, run)
    before = files(run)
    code = main(["probe", str(run), "--db", str(tmp_path / "f.duckdb"), "--device", "cpu", "--json",
                 *(["--checks", checks] if checks else [])])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert files(run) == before  # the run directory is never written to (no __pycache__ either)
    return json.loads(out.out)


def judge(name: str, r: dict, among: set[str]) -> None:
    fails, names = EXPECTED[name]
    statuses = {c["name"]: c["status"] for c in r["checks"]}
    for c in r["checks"]:  # an answer explains only kinds its check declares (analyze offers the probe under those)
        assert set(c["explains"]) <= set(next(k for k in CHECKS if k.name == c["name"]).explains), c
    assert {c for c, s in statuses.items() if s == "fail"} == fails & among, {c["name"]: c["summary"]
                                                                               for c in r["checks"]}
    for check, wanted in names.items():
        if check in among:
            c = next(c for c in r["checks"] if c["name"] == check)
            assert set(wanted) <= set(c["names"]), c
            assert set(c["explains"]) & set(_truth_kinds(name)), (c["explains"], _truth_kinds(name))


def _truth_kinds(name: str) -> list[str]:
    truth = json.loads((REPO / "sample_runs" / "ground_truth.json").read_text())["runs"][name]
    return [k["kind"] for k in truth["kinds"]] or ["none"]


def test_every_probed_gallery_run_ships_what_a_probe_needs():
    for name in EXPECTED:
        run = GALLERY / name
        assert (run / "forensics_entry.py").is_file(), name
        assert sorted(p.name for p in (run / "batches").iterdir()) == ["step_1.pt", "step_2.pt"], name
        assert (run / "checkpoints" / "step_0.pt").is_file(), name


@pytest.mark.parametrize("name", list(EXPECTED))
def test_single_pass_checks_name_each_gallery_bug(name, tmp_path, capsys):
    r = probe(name, tmp_path, capsys, SINGLE_PASS)
    assert r["from_checkpoint"]["first"] == {"path": "checkpoints/step_0.pt", "step": 0}
    judge(name, r, set(SINGLE_PASS.split(",")))
    if not EXPECTED[name][0]:
        assert {c["status"] for c in r["checks"]} == {"pass"}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(EXPECTED))
def test_trained_checks_on_each_gallery_run(name, tmp_path, capsys):
    r = probe(name, tmp_path, capsys, ",".join(TRAINED))
    judge(name, r, set(TRAINED))
    if not EXPECTED[name][0]:
        assert {c["status"] for c in r["checks"]} == {"pass"}


def test_analyze_prints_the_probe_command_under_a_gallery_finding(tmp_path, capsys):
    run = tmp_path / "flat_all_frozen"
    shutil.copytree(GALLERY / "flat_all_frozen", run)
    assert main(["analyze", str(run), "--db", str(tmp_path / "f.duckdb")]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if " flat_loss [" in line)
    assert lines[at + 1].strip().startswith("probe it") and f"forensics probe {run}" in lines[at + 1]
    other = tmp_path / "oscillation_sgd_high_lr"  # no entry point, checkpoint or batch: nothing to probe
    shutil.copytree(GALLERY / "oscillation_sgd_high_lr", other)
    assert main(["analyze", str(other), "--db", str(tmp_path / "f.duckdb")]) == 0
    out = capsys.readouterr().out
    assert " oscillation [" in out and "forensics probe" not in out


def test_the_readme_probe_output_is_what_the_gallery_run_gives(tmp_path, capsys):
    """README.md shows `forensics probe` on plateau_double_softmax: each check's status and names there are the
    real run's (the numbers are left out of the comparison: another CPU may round their last digit differently)."""
    text = (REPO / "README.md").read_text()
    block = text[text.index("$ forensics probe sample_runs/runs/plateau_double_softmax"):]
    block = block[:block.index("```")].splitlines()[1:]
    run = tmp_path / "plateau_double_softmax"
    shutil.copytree(GALLERY / "plateau_double_softmax", run)
    assert main(["probe", str(run), "--db", str(tmp_path / "f.duckdb"), "--device", "cpu"]) == 0
    got = capsys.readouterr().out.splitlines()

    def shape(lines: list[str]) -> list[str]:
        return [line.split(":")[0] for line in lines if line.startswith(("pass ", "FAIL ", "n/a "))] + \
               [line.strip() for line in lines if line.strip().startswith(("names:", "explains:"))]
    assert block[0] == got[0] and shape(block) == shape(got)
