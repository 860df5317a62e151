"""`forensics probe` (issue 27) on runs trained here with forensics.capture, each with one silent bug
(tests/probe_runs.py), plus healthy controls: each check fails exactly where it should and names the module,
parameter or batch key; on the controls every check passes; the run directory is never written to."""

from __future__ import annotations

import json
import math
import shutil
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from forensics.cli import main  # noqa: E402
from forensics.usercode.probe import CHECKS  # noqa: E402
from tests.probe_runs import RUNS, train_run  # noqa: E402

# run -> the checks that fail on it (every other check passes or says n/a)
FAILS = {
    "healthy_adam": set(),
    "healthy_sgd_tanh": set(),
    "softmax_before_ce": {"output_head", "overfit_one_batch"},      # the loss cannot go below log(1 + 2/e)
    "detach_before_head": {"gradient_flow", "overfit_one_batch"},   # the head alone cannot memorise the batch
    "frozen_body": {"gradient_flow", "overfit_one_batch"},
    "body_not_in_optimizer": {"gradient_flow"},                     # Adam over all parameters memorises it
    "lr_1e-7": {"lr_range"},
    "sgd_lr_oscillating": {"lr_range", "gradient_flow"},            # the LR also kills 3/4 of a ReLU layer
    "targets_shuffled": {"label_shuffle"},
    "relu_bias_negative": {"gradient_flow", "overfit_one_batch"},
    "inputs_x1000_tanh": {"input_scale", "gradient_flow"},          # the tanh after the first layer saturates
    "head_init_large": {"initial_loss"},
}
assert set(FAILS) == set(RUNS)

BODY = ["body.0.bias", "body.0.weight", "body.2.bias", "body.2.weight"]

# run -> (the check that must name the bug, names it must give, evidence it must hold, a kind it explains)
NAMED = {
    "softmax_before_ce": ("output_head", ["softmax"], {"received": "probabilities", "producer_op": "softmax"},
                          "initial_loss_mismatch"),
    "detach_before_head": ("gradient_flow", BODY, {"not_connected": BODY}, "flat_loss"),
    "frozen_body": ("gradient_flow", BODY, {"frozen": BODY}, "frozen_parameters"),
    "body_not_in_optimizer": ("gradient_flow", BODY, {"not_in_optimizer": BODY}, "frozen_parameters"),
    "lr_1e-7": ("lr_range", ["lr=1e-07"], {"run_lr": 1e-7}, "flat_loss"),
    "sgd_lr_oscillating": ("lr_range", ["lr=0.5"], {"run_lr": 0.5}, "oscillation"),
    "targets_shuffled": ("label_shuffle", ["y"], {"target_key": "y"}, "underfitting"),
    "relu_bias_negative": ("gradient_flow", ["body.1", "body.3"], {}, "dead_relu"),
    "inputs_x1000_tanh": ("input_scale", ["body.0", "x"], {}, "saturated_activation"),
    "head_init_large": ("initial_loss", ["head"], {"classes": 3}, "initial_loss_mismatch"),
}


@pytest.fixture(autouse=True)
def one_thread():
    """Two shared cores: torch's default threads fight each other (40 ms a step instead of 3 for the tests' MLP)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each run trained once, on first use."""
    root = tmp_path_factory.mktemp("probe_runs")
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            n = torch.get_num_threads()
            torch.set_num_threads(1)
            made[name] = train_run(root, name)
            torch.set_num_threads(n)
        return made[name]
    return get


def files(run: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(run)): (p.stat().st_size, p.stat().st_mtime_ns) for p in run.rglob("*")}


def probe_json(run: Path, db: Path, capsys, *extra: str) -> dict:
    before = files(run)
    code = main(["probe", str(run), "--db", str(db), "--device", "cpu", "--json", *extra])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert files(run) == before  # the run directory is never written to (no __pycache__ either)
    return json.loads(out.out)


def check_of(result: dict, name: str) -> dict:
    return next(c for c in result["checks"] if c["name"] == name)


def run_and_check(name: str, runs, tmp_path, capsys) -> dict:
    r = probe_json(runs(name), tmp_path / "f.duckdb", capsys)
    failed = {c["name"] for c in r["checks"] if c["status"] == "fail"}
    assert failed == FAILS[name], {c["name"]: c["summary"] for c in r["checks"]}
    for c in r["checks"]:  # an answer explains only kinds its check declares (analyze offers the probe under those)
        assert set(c["explains"]) <= set(next(k for k in CHECKS if k.name == c["name"]).explains), c
    if name in NAMED:
        check, names, evidence, kind = NAMED[name]
        c = check_of(r, check)
        assert set(names) <= set(c["names"]), c
        for k, v in evidence.items():
            assert (set(c["evidence"][k]) == set(v)) if isinstance(v, list) else c["evidence"][k] == v, c
        assert kind in c["explains"]
    return r


def test_healthy_control_passes_every_check_and_the_result_is_stored(runs, tmp_path, capsys):
    r = run_and_check("healthy_adam", runs, tmp_path, capsys)
    assert [c["status"] for c in r["checks"]] == ["pass"] * 7
    assert set(r) >= {"run", "entry", "from_checkpoint", "device", "checks", "timings_s"}
    assert r["from_checkpoint"]["first"] == {"path": "checkpoints/step_0.pt", "step": 0}
    assert r["from_checkpoint"]["last"]["step"] == 60 and r["device"] == "cpu"
    for c in r["checks"]:
        assert set(c) == {"name", "status", "summary", "evidence", "names", "explains"} and c["summary"]
    overfit = check_of(r, "overfit_one_batch")["evidence"]["run_optimizer"]
    assert overfit["memorised"] and overfit["best"] <= 0.01 * overfit["start"]
    from ingest import queries
    from ingest.store import connect

    with connect(tmp_path / "f.duckdb", write=False) as con:
        stored = queries.app_probes(con, queries.app_runs(con)["run_id"][0])
    assert stored["check_name"].to_list() == [c["name"] for c in r["checks"]]
    assert set(stored["status"].to_list()) == {"pass"}


@pytest.mark.parametrize("name", ["lr_1e-7", "targets_shuffled"])
def test_a_bug_fails_its_check_and_names_it(name, runs, tmp_path, capsys):
    run_and_check(name, runs, tmp_path, capsys)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in RUNS if n not in ("healthy_adam", "lr_1e-7", "targets_shuffled")])
def test_every_bug_fails_exactly_its_checks_and_names_it(name, runs, tmp_path, capsys):
    run_and_check(name, runs, tmp_path, capsys)


def test_lr_range_says_how_far_below_the_working_range_the_run_is(runs, tmp_path, capsys):
    r = probe_json(runs("lr_1e-7"), tmp_path / "f.duckdb", capsys, "--checks", "lr_range")
    [c] = r["checks"]
    starts, falls = c["evidence"]["lr_starts_to_fall"], c["evidence"]["lr_falls"]
    assert 1e-4 < starts <= falls < 1.0 and c["evidence"]["lr_explodes"] > falls
    assert f"is 10^{round(math.log10(starts / 1e-7))}x below where the loss starts to fall" in c["summary"]


def sweep_curve(falls_from: float | None, lowest_at: float, explodes_at: float | None) -> dict:
    """A sweep as lr_range.sweep returns it, made by hand: the loss 1.0 up to LR `falls_from`, then falling as
    log10(LR) grows to 0.3 at `lowest_at`, then rising, stopped at `explodes_at` (None: a loss that never falls)."""
    from forensics.usercode.probe import lr_range

    lrs, raw, smooth, avg = [], [], [], 0.0
    for i in range(lr_range.STEPS):
        lr = lr_range.LR_MIN * (lr_range.LR_MAX / lr_range.LR_MIN) ** (i / (lr_range.STEPS - 1))
        if explodes_at is not None and lr > explodes_at:
            break
        if falls_from is None or lr <= falls_from:
            loss = 1.0
        elif lr <= lowest_at:
            loss = 1.0 - 0.7 * math.log10(lr / falls_from) / math.log10(lowest_at / falls_from)
        else:
            loss = 0.3 * (lr / lowest_at) ** 0.5
        lrs.append(lr)
        raw.append(loss)
        avg = lr_range.BETA * avg + (1 - lr_range.BETA) * loss
        smooth.append(avg / (1 - lr_range.BETA ** (i + 1)))
    return {"lrs": lrs, "losses": raw, "smoothed": smooth, "batches": [],
            "exploded_at": lrs[-1] if explodes_at is not None else None}


def test_lr_range_reads_the_sweep_as_the_lr_finder_literature_does():
    """Smith / fastai's `lr_find`: an LR above the loss-minimum LR is too high, one an order of magnitude or more
    below where the loss starts to fall is too low, and a sweep whose loss never falls 10 % is a failed sweep."""
    from forensics.usercode.probe.checks import LrRange
    from forensics.usercode.probe.lr_range import analyse, judge

    found = analyse(sweep_curve(1e-4, 1e-1, 3.0))
    assert 1e-4 < found["lr_starts_to_fall"] < found["lr_falls"] < found["lr_min_loss"] < found["lr_explodes"]
    assert 0.05 < found["lr_min_loss"] < 0.3
    assert judge(found, 1e-2, LrRange.explains)[0] == "pass"
    status, summary, explains = judge(found, 0.5, LrRange.explains)  # above the minimum, though 6x below the explosion
    assert status == "fail" and "too high" in summary and "oscillation" in explains
    status, summary, explains = judge(found, found["lr_starts_to_fall"] / 12, LrRange.explains)  # 12x below: an order of magnitude
    assert status == "fail" and "too low" in summary and "flat_loss" in explains
    assert judge(found, found["lr_starts_to_fall"] / 5, LrRange.explains)[0] == "pass"
    status, summary, _ = judge(analyse(sweep_curve(None, 1e-1, None)), 1e-2, LrRange.explains)
    assert status == "n/a" and "the sweep failed" in summary and "never fell 10%" in summary


def test_without_a_step_0_checkpoint_initial_loss_says_why_not(runs, tmp_path, capsys):
    run = tmp_path / "no_step0"
    shutil.copytree(runs("healthy_adam"), run)
    (run / "checkpoints" / "step_0.pt").unlink()
    r = probe_json(run, tmp_path / "f.duckdb", capsys, "--checks", "initial_loss,output_head")
    c = check_of(r, "initial_loss")
    assert c["status"] == "n/a" and "no step-0 checkpoint" in c["summary"]
    assert any("no step-0 checkpoint" in n for n in r["notes"])
    assert [c["name"] for c in r["checks"]] == ["output_head", "initial_loss"]  # the run order, not the asked one


def test_text_and_markdown_reports(runs, tmp_path, capsys):
    run = runs("targets_shuffled")
    md = tmp_path / "probe.md"
    code = main(["probe", str(run), "--db", str(tmp_path / "f.duckdb"), "--device", "cpu",
                 "--checks", "label_shuffle,gradient_flow", "--markdown", str(md)])
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines()[0] == "targets_shuffled: probe: 1 failed, 1 passed, 0 not applicable"
    assert "FAIL label_shuffle:" in out and "names: y" in out and "your code was run" in out
    text = md.read_text()
    assert "| `label_shuffle` | fail |" in text and "| y |" in text


def test_bad_arguments_are_one_line_and_exit_2(runs, tmp_path, capsys):
    run = runs("healthy_adam")
    assert main(["probe", str(run), "--db", str(tmp_path / "f.duckdb"), "--checks", "overfit,lr_range"]) == 2
    err = capsys.readouterr().err
    assert "unknown check overfit" in err and "overfit_one_batch" in err
    assert main(["probe", str(run), "--db", str(tmp_path / "f.duckdb"), "--markdown", str(run / "x.md")]) == 2
    assert "never written to" in capsys.readouterr().err
    bare = tmp_path / "bare"
    shutil.copytree(run, bare, ignore=shutil.ignore_patterns("forensics_entry.py"))
    assert main(["probe", str(bare), "--db", str(tmp_path / "f.duckdb")]) == 2
    out = capsys.readouterr()
    assert "no entry point" in out.err and "def build_model" in out.out  # the fill-in template on stdout


def test_analyze_prints_the_probe_command_under_a_flat_loss(runs, tmp_path, capsys):
    run = runs("lr_1e-7")
    assert main(["analyze", str(run), "--db", str(tmp_path / "f.duckdb")]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if " flat_loss [" in line)
    assert lines[at + 1].strip().startswith("probe it") and f"forensics probe {run}" in lines[at + 1]
    assert main(["analyze", str(run), "--db", str(tmp_path / "f.duckdb"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["probe_command"].startswith(f"forensics probe {run}")
    assert main(["analyze", str(run), "--db", str(tmp_path / "f.duckdb"), "--markdown", "-"]) == 0
    assert f"Probe it: `forensics probe {run}" in capsys.readouterr().out
    bare = tmp_path / "bare"
    shutil.copytree(run, bare, ignore=shutil.ignore_patterns("forensics_entry.py"))
    assert main(["analyze", str(bare), "--db", str(tmp_path / "f.duckdb")]) == 0
    assert "forensics probe" not in capsys.readouterr().out  # no entry point: nothing a probe could run


def test_app_shows_the_probe_beside_the_finding_it_explains(runs, tmp_path, capsys, monkeypatch):
    pytest.importorskip("streamlit", reason="the app extra is not installed: pip install -e '.[app]'")
    from streamlit.testing.v1 import AppTest

    from tests.paths import REPO

    run, db = runs("lr_1e-7"), tmp_path / "f.duckdb"
    assert main(["analyze", str(run), "--db", str(db)]) == 0
    capsys.readouterr()
    probe_json(run, db, capsys, "--checks", "lr_range,gradient_flow")
    monkeypatch.setenv("FORENSICS_DB", str(db))
    at = AppTest.from_file(str(REPO / "app" / "streamlit_app.py"), default_timeout=60)
    at.query_params["run"] = "lr_1e-7"
    at.query_params["page"] = "Run report"
    main_module = sys.modules["__main__"]
    try:
        at.run()
    finally:  # AppTest leaves the page as __main__ (see test_app.py's _keep_main_module)
        sys.modules["__main__"] = main_module
    assert not at.exception
    text = "\n".join(m.value for m in at.markdown)
    # the CLI's sentence (forensics.text.report.learned_lines), with when the probe ran
    assert "probe lr\\_range FAILED (ran " in text and "below where the loss starts to fall" in text


def test_a_store_from_before_the_probes_table_gains_it_at_the_next_write(tmp_path):
    """Schema 6 -> 7 (issue 27): a new table only, made by the next writing command."""
    import duckdb

    import ingest.store
    from ingest.schema import SCHEMA_VERSION
    from ingest.store import connect

    db = tmp_path / "f.duckdb"
    with connect(db, write=True):
        pass
    con = duckdb.connect(str(db))
    con.execute("DROP TABLE probes")
    con.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    con.close()
    ingest.store._SCHEMA_READY.clear()
    with connect(db, write=True) as con:
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        assert "probes" in tables
        assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)


HOSTILE_ENTRY = '''
import torch
from torch import nn


def build_model(config):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3))
    model.add_module("sm\\x1b]0;owned\\x07|`*", nn.Softmax(dim=-1))  # a module name a file could hold
    return model


def loss_fn(model, batch):
    return nn.functional.cross_entropy(model(batch["x"]), batch["y"])


def build_optimizer(model, config):
    return torch.optim.SGD(model.parameters(), lr=0.1)
'''


def test_a_module_name_with_control_characters_cannot_reach_the_terminal_or_the_markdown(tmp_path, capsys):
    from forensics.capture import Capture

    run = tmp_path / "hostile"
    run.mkdir()
    (run / "forensics_entry.py").write_text(HOSTILE_ENTRY)
    ns: dict = {}
    exec(HOSTILE_ENTRY, ns)
    model = ns["build_model"]({})
    opt = ns["build_optimizer"](model, {})
    cap = Capture(run, config={}, every=2, model=model, optimizer=opt)
    g = torch.Generator().manual_seed(0)
    for step in (1, 2):
        batch = {"x": torch.randn(8, 4, generator=g), "y": torch.randint(0, 3, (8,), generator=g)}
        loss = ns["loss_fn"](model, batch)
        loss.backward()
        opt.step()
        opt.zero_grad()
        cap.step(step, batch, loss, None, model, opt)
    md = tmp_path / "p.md"
    assert main(["probe", str(run), "--db", str(tmp_path / "f.duckdb"), "--device", "cpu",
                 "--checks", "output_head", "--markdown", str(md)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "sm\\x1b]0;owned\\x07" in out
    text = md.read_text()
    assert "\x1b" not in text and "\\|\\`\\*" in text and "FAIL" not in text and "| fail |" in text


def test_sigterm_as_probe_ends_says_what_analyze_says(tmp_path):
    """As replay (tests/test_replay.py): a SIGTERM during the interpreter's teardown after probe's answer ended it
    with 143 and not a word; now it ends first with its own code, or says analyze's one line and exits 143."""

    from forensics.services.process import TERMINATED_LINE
    from tests.paths import REPO
    from tests.test_replay import _terminate_after_the_answer

    run = tmp_path / "run"
    shutil.copytree(REPO / "sample_runs" / "runs" / "nan_sqrt_norm", run)
    code, err = _terminate_after_the_answer("probe", run, tmp_path / "f.duckdb")
    assert (code, err) == (0, "") or (code == 143 and err.splitlines() == [TERMINATED_LINE]), (code, err)
