"""One judgement, one home (issue 25): the verdict, its reason and the headline are computed once by the engine,
stored with the analysis, and every face shows the stored ones: `analyze --json`, the app's Runs list and report,
`forensics runs`, `analyze ROOT --all`. Also the first-day breakages (`--fail-on inconclusive` with `--all`) and
the escaping of file-derived text in the terminal and the app (issue 26, items 8-10).

Runs are the gallery's (sample_runs/runs) and bad inputs written here by real writers: PyYAML, Python's logging,
polars' CSV writer, the HF Trainer layout of tests/runwriters.py cut in half.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

from forensics.cli import main
from tests.paths import REPO
from tests.runwriters import curve, hf_history, log_messages, write_trainer_state

GALLERY = REPO / "sample_runs" / "runs"
# The four whose app headline differed from the CLI's before the verdict was stored once.
DIFFERED = ["dead_relu_bias_init", "weight_collapse_wd", "update_ratio_lr_too_small", "amp_fp16_overflow"]


def only_config(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "config.yaml").write_text(yaml.safe_dump({"lr": 0.1, "epochs": 3, "model": {"width": 64}}))
    return root


def log_without_metric(root: Path) -> Path:
    root.mkdir(parents=True)
    log_messages(root / "train.log",
                 ("starting training", "loading the data set from /data/shards", "model built", "done"))
    return root


def csv_only_val_loss(root: Path) -> Path:
    root.mkdir(parents=True)
    steps = np.arange(100, 1100, 100)
    pl.DataFrame({"step": steps, "val_loss": 2.0 * np.exp(-steps / 500) + 0.3}).write_csv(root / "metrics.csv")
    return root


def truncated_trainer_state(root: Path) -> Path:
    steps, loss = curve(n=60)
    run = write_trainer_state(root, hf_history(steps + 10, loss, np.ones(steps.size)))
    text = (run / "trainer_state.json").read_text()
    (run / "trainer_state.json").write_text(text[:len(text) // 2])
    return run


BAD_INPUTS = {"only_config": only_config, "log_without_metric": log_without_metric,
              "csv_only_val_loss": csv_only_val_loss, "truncated_trainer_state": truncated_trainer_state}


def analyze_json(capsys, run: Path, db: Path, *extra: str) -> dict:
    assert main(["analyze", str(run), "--db", str(db), "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def judged(tmp_path_factory) -> tuple[Path, dict[str, dict]]:
    """A database holding the four runs whose headline differed and the four bad inputs, each analysed through
    `forensics analyze --json`; what it printed, by run name."""
    import contextlib
    import io

    root = tmp_path_factory.mktemp("judged")
    db = root / "f.duckdb"
    runs = {name: GALLERY / name for name in DIFFERED}
    runs |= {name: make(root / name) for name, make in BAD_INPUTS.items()}
    out = {}
    for name, path in runs.items():
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert main(["analyze", str(path), "--db", str(db), "--json"]) == 0
        out[name] = json.loads(buf.getvalue())
    return db, out


def test_bad_inputs_are_inconclusive_with_a_reason(judged):
    _, out = judged
    for name in BAD_INPUTS:
        assert out[name]["verdict"] == "inconclusive", name
        assert out[name]["verdict_reason"] and out[name]["headline"] is None


def test_json_headline_is_a_finding_with_its_event(judged):
    _, out = judged
    for name in DIFFERED:
        head = out[name]["headline"]
        finding = out[name]["findings"][head["finding"]]
        assert {k: finding[k] for k in ("kind", "severity", "step", "step_end", "event", "summary")} == \
            {k: head[k] for k in ("kind", "severity", "step", "step_end", "event", "summary")}
        assert head["event"] is not None


def _verdict_word(verdict: str) -> str:
    from app.pages import VERDICT

    return VERDICT[verdict][1]


def test_app_runs_list_and_report_show_what_analyze_json_said(judged, monkeypatch):
    """The Runs list and each run's report show the verdict, its reason and the headline `analyze --json` gave:
    INCONCLUSIVE for the bad inputs (they were green "no findings"), and the same earliest cause for the four
    runs whose app headline used to differ (flat_loss where the CLI said dead_relu)."""
    pytest.importorskip("streamlit", reason="the app extra is not installed: pip install -e '.[app]'")
    from streamlit.testing.v1 import AppTest

    from app.pages import headline_text

    db, out = judged
    monkeypatch.setenv("FORENSICS_DB", str(db))
    at = AppTest.from_file(str(REPO / "app" / "streamlit_app.py"), default_timeout=90).run()
    assert not at.exception
    shown = [m.value for m in at.markdown]
    for name, result in out.items():
        row = next(i for i, v in enumerate(shown) if f"**{name.replace('_', chr(92) + '_')}**" in v)
        card = " ".join(shown[row:row + 4])
        assert _verdict_word(result["verdict"]) in card, (name, card)
        if result["headline"]:
            head = result["headline"]
            assert f"{head['kind']} at " in card and f"(event {head['event']})" in card, (name, card)
        else:
            assert result["verdict_reason"].split(";")[0][:40] in card.replace("&#x27;", "'"), (name, card)

    for name, result in out.items():
        at = AppTest.from_file(str(REPO / "app" / "streamlit_app.py"), default_timeout=90)
        at.query_params.update({"run": name, "page": "Run report"})
        at.run()
        assert not at.exception
        boxes = [b.value for kind in ("error", "warning", "info", "success") for b in at.get(kind)]
        verdict_box = next(b for b in boxes if _verdict_word(result["verdict"]).lower() in b.lower())
        if result["verdict"] == "inconclusive":
            assert result["verdict_reason"][:40].replace("_", "\\_") in verdict_box
        if result["headline"]:
            head = result["headline"]
            earliest = next(m.value for m in at.markdown if m.value.startswith("**Earliest cause**"))
            assert f"{head['kind']}".replace("_", "\\_") in earliest
            assert f"(event {head['event']})" in earliest
        if result["read_problems"]:
            assert any(e.label.startswith("Read with problems") for e in at.expander)
    assert headline_text  # the one formatter both the list and the report use


def test_forensics_runs_prints_the_stored_verdict_and_headline(judged, capsys):
    db, out = judged
    assert main(["runs", "--db", str(db), "--json"]) == 0
    listed = {r["name"]: r["analysis"] for r in json.loads(capsys.readouterr().out)["runs"]}
    for name, result in out.items():
        assert listed[name]["verdict"] == result["verdict"]
        assert listed[name]["verdict_reason"] == result["verdict_reason"]
        assert (listed[name]["headline"] or {}).get("kind") == (result["headline"] or {}).get("kind")
    assert main(["runs", "--db", str(db)]) == 0
    text = capsys.readouterr().out
    assert "earliest cause: dead_relu at step" in text and " first:" not in text and "INCONCLUSIVE: no training-loss series" in text


def test_a_restricted_analysis_is_stored_and_shown_as_such(tmp_path, capsys):
    db = tmp_path / "f.duckdb"
    out = analyze_json(capsys, GALLERY / "healthy_mlp", db, "--only", "loss_spike,divergence")
    assert out["restricted"] == {"only": ["loss_spike", "divergence"], "skip": []}
    assert main(["runs", "--db", str(db)]) == 0
    assert "[only loss_spike, divergence]" in capsys.readouterr().out
    pytest.importorskip("streamlit", reason="the app extra is not installed: pip install -e '.[app]'")
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(REPO / "app" / "streamlit_app.py"), default_timeout=90)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FORENSICS_DB", str(db))
        at.run()
        assert any("only loss_spike, divergence checked" in m.value for m in at.markdown)
        at.query_params.update({"run": "healthy_mlp", "page": "Run report"})
        at.session_state.page = "Run report"
        at.run()
        assert any("Restricted analysis: only loss\\_spike, divergence checked" in b.value for b in at.success)
    assert main(["analyze", str(GALLERY / "healthy_mlp"), "--db", str(db), "--skip", "plateau"]) == 0
    assert capsys.readouterr().out.splitlines()[0].endswith("[skipping plateau]")


def test_analyze_all_fail_on_inconclusive_is_one_rule(tmp_path, capsys):
    """Regression: `analyze ROOT --all --fail-on inconclusive` raised KeyError (a second copy of fails())."""
    root = tmp_path / "root"
    only_config(root / "docs_run")
    (root / "docs_run" / "train.log").write_text("step 1 loss 2.0\nstep 2 loss 1.9\n")
    code = main(["analyze", str(root), "--all", "--db", str(tmp_path / "f.duckdb"), "--fail-on", "inconclusive"])
    captured = capsys.readouterr()
    assert code == 1 and "Traceback" not in captured.err
    assert "INCONCLUSIVE" in captured.out


# -- escaping (issue 26, items 8-10) ----------------------------------------------------------------------------

def test_control_characters_are_escaped_in_text_output():
    from forensics.text.render import clean

    assert clean("run\nfake: FAILED") == "run\\nfake: FAILED"
    assert clean("\x1b]0;pwned\x07x") == "\\x1b]0;pwned\\x07x"
    assert clean("a\u202eb") == "a\\u202eb"
    assert clean(b"caf\xe9".decode("utf-8", "surrogateescape")) == "caf\\xe9"
    assert clean("ok · ‖Δw‖ 名前") == "ok · ‖Δw‖ 名前"


@pytest.mark.skipif(sys.platform != "linux", reason="file names with control characters: Linux file systems")
def test_a_run_named_to_forge_a_line_prints_escaped(tmp_path, capsys):
    run = tmp_path / "r\nnan_lr_too_high: healthy\x1b]0;owned\x07"
    run.mkdir()
    (run / "train.log").write_text("".join(f"step {i} loss {2.0 / i:.4f}\n" for i in range(1, 40)))
    db = tmp_path / "f.duckdb"
    assert main(["analyze", str(run), "--db", str(db)]) == 0
    assert main(["runs", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert not any(line.startswith("nan_lr_too_high: healthy") for line in out.splitlines())
    assert "r\\nnan_lr_too_high: healthy\\x1b]0;owned\\x07" in out


def test_app_escapes_file_names_and_ignores_bad_page_parameters(tmp_path, monkeypatch):
    """A checkpoint file name holding HTML is shown as text (it made the browser fetch an <img>); `?finding=²`
    and a 5000-digit value fall back to the whole run instead of crashing the page."""
    pytest.importorskip("streamlit", reason="the app extra is not installed: pip install -e '.[app]'")
    import torch
    from streamlit.testing.v1 import AppTest

    from app.pages import link_number, md

    run = tmp_path / "html_run"
    run.mkdir()
    (run / "train.log").write_text("".join(f"step {i} loss {2.0 / i:.4f}\n" for i in range(1, 40)))
    name = "step_20`<img src=x onerror=alert(1)>`.pt"  # a step in the name: a stepless checkpoint is item 4
    torch.save({"w": torch.ones(2)}, run / name)
    db = tmp_path / "f.duckdb"
    assert main(["analyze", str(run), "--db", str(db)]) == 0
    monkeypatch.setenv("FORENSICS_DB", str(db))
    at = AppTest.from_file(str(REPO / "app" / "streamlit_app.py"), default_timeout=90)
    at.query_params.update({"run": "html_run", "page": "Checkpoints and replays"})
    at.run()
    assert not at.exception
    html_blocks = [m.value for m in at.markdown if "<img" in m.value or "&lt;img" in m.value]
    assert html_blocks and all("<img" not in v for v in html_blocks)
    assert "<" not in md("<b>x</b>") and link_number("²") is None and link_number("9" * 5000) is None
    for value in ("²", "9" * 5000, "-1", "1e3"):
        at = AppTest.from_file(str(REPO / "app" / "streamlit_app.py"), default_timeout=90)
        at.query_params.update({"run": "html_run", "page": "Run report", "finding": value})
        at.run()
        assert not at.exception, value
    at = AppTest.from_file(str(REPO / "app" / "streamlit_app.py"), default_timeout=90)
    at.query_params.update({"run": "no such run", "page": "<script>"})
    at.run()
    assert not at.exception and at.session_state.page == "Runs"


def test_a_schema_5_store_migrates_and_asks_for_a_new_analysis(tmp_path, capsys):
    """A store written before verdicts were stored (schema 5: the analyses table without them) is migrated by the
    next writer; its old analysis shows as "re-analyse", never as a verdict judged again from its findings."""
    import duckdb

    from ingest.schema import SCHEMA_VERSION
    from ingest.writes import VERDICT_COLUMNS

    db = tmp_path / "old.duckdb"
    analyze_json(capsys, GALLERY / "healthy_mlp", db)
    con = duckdb.connect(str(db))
    for column in VERDICT_COLUMNS[1:]:  # `healthy` was there before
        con.execute(f"ALTER TABLE analyses DROP COLUMN {column}")
    con.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    con.close()
    import os
    import subprocess

    done = subprocess.run([sys.executable, "-m", "forensics.cli", "ingest", str(GALLERY / "nan_lr_too_high"), "--db",
                           str(db), "--quiet"], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})  # a new process, as a user's next command
    assert done.returncode == 0, done.stderr  # a writer migrates
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    assert main(["runs", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "re-analyse: analysed by an older version" in out and "not analysed: `forensics analyze" in out
    out = analyze_json(capsys, GALLERY / "healthy_mlp", db)
    assert main(["runs", "--db", str(db), "--json"]) == 0
    listed = {r["name"]: r["analysis"] for r in json.loads(capsys.readouterr().out)["runs"]}
    assert listed["healthy_mlp"]["verdict"] == out["verdict"] == "healthy"


# -- one name for a curve's initial level -------------------------------------------------------------------------

def test_the_initial_level_is_named_once_and_set_reaches_it(tmp_path, capsys):
    """"The median of the first three points" was written out in seven detectors; it is stats.start_level with
    stats.START_POINTS, every detector that reads a start level carries it as `start_points`, and --set reaches it."""
    import dataclasses

    from forensics.judge import stats
    from forensics.judge.detectors import ALL
    from forensics.judge.settings import selection

    assert stats.start_level(np.array([np.nan, 5.0, 1.0, 3.0, 100.0])) == 3.0  # non-finite points do not count
    assert stats.start_level(np.array([4.0, 2.0]), points=1) == 4.0 and np.isnan(stats.start_level(np.array([])))
    carriers = {c.kind for c in ALL if "start_points" in {f.name for f in dataclasses.fields(c)}}
    assert {"loss_spike", "plateau", "underfitting", "overfitting", "exploding_gradients", "distribution_mismatch",
            "weight_collapse", "weight_norm_growth"} <= carriers
    sel = selection(settings={"plateau.start_points": "5"})
    assert next(d for d in sel.detectors() if d.kind == "plateau").start_points == 5
    for name in ("forensics/judge/detectors", "forensics/judge/curves.py"):
        for path in (REPO / name).rglob("*.py") if (REPO / name).is_dir() else [REPO / name]:
            assert not re.search(r"np\.median\([^()]*\[:3\]\)", path.read_text(encoding="utf-8")), path
    out = analyze_json(capsys, GALLERY / "healthy_mlp", tmp_path / "f.duckdb", "--set", "plateau.start_points=5")
    assert out["verdict"] == "healthy"


def test_a_detector_that_reads_another_reads_it_as_this_analysis_sets_it():
    """Plateau reads flat_loss's rules (a held excerpt, identical values) and resumed_run's restarts, underfitting
    reads oscillation's, overfitting val_noise's bar: each holds that detector as a field named after its kind, built
    with this analysis's `--set` values (also when it is skipped), and no detector builds another with its defaults."""
    from forensics.judge.detectors import ALL
    from forensics.judge.settings import reads, selection, settable

    by_kind = {c.kind: c for c in ALL}
    assert {"flat_loss", "resumed_run"} <= reads(by_kind["plateau"])
    assert "oscillation" in reads(by_kind["underfitting"]) and "val_noise" in reads(by_kind["overfitting"])
    assert "overfitting" in reads(by_kind["plateau"])
    sel = selection(skip=["flat_loss"], settings={"flat_loss.identical_tol": "0.01", "val_noise.ratio": "7",
                                                   "oscillation.min_bounce_crossings": "9",
                                                   "overfitting.scatter_sigmas": "4"})
    built = {d.kind: d for d in sel.detectors()}
    assert "flat_loss" not in built and built["plateau"].flat_loss.identical_tol == 0.01
    assert built["overfitting"].val_noise.ratio == 7 and built["oscillation"].min_bounce_crossings == 9
    assert built["underfitting"].oscillation.min_bounce_crossings == 9
    assert built["plateau"].overfitting.scatter_sigmas == 4 and built["plateau"].overfitting.val_noise.ratio == 7
    assert "flat_loss" not in settable(by_kind["plateau"])  # set as flat_loss.FIELD, never plateau.flat_loss
    names = {c.__name__ for c in ALL}
    for path in (REPO / "forensics" / "judge" / "detectors").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        for cls in (n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ClassDef)):
            for node in (n for n in ast.walk(cls) if isinstance(n, ast.Attribute)):  # `FlatLoss().held_excerpt`
                built = node.value
                assert not (isinstance(built, ast.Call) and isinstance(built.func, ast.Name)
                            and built.func.id in names), f"{path.name}:{node.lineno} builds {built.func.id}()"
        # nor reads a class default in place of this analysis's value (`FlatLoss.edge`; names in backticks are prose)
        assert not re.search(rf"(?<![`\w])(?:{names})\.[a-z_]+\b(?!\()", text), path


# -- one boundary between flat_loss and plateau ------------------------------------------------------------------

def test_learned_or_not_is_one_boundary_that_flat_loss_plateau_and_underfitting_read():
    """Issue 24: "it never learned" (flat_loss) against "it learned, then stopped" (plateau, underfitting) is one
    rule, stats.learned (a fall of stats.LEARNED_FALL below the first three points' median, beyond its noise):
    the three detectors' fields default to it, and flat_loss and plateau both call it."""
    from forensics.judge import stats
    from forensics.judge.detectors import FlatLoss, Plateau, Underfitting

    assert FlatLoss().learned_fall == Plateau().min_drop == Underfitting().min_drop == stats.LEARNED_FALL
    assert Plateau().min_drop_sigmas == stats.LEARNED_SIGMAS
    for name in ("flat_loss.py", "plateau.py"):
        assert "stats.learned(" in (REPO / "forensics" / "judge" / "detectors" / name).read_text(encoding="utf-8"), name


def test_forensics_app_serves_with_no_streamlit_folder_and_no_display(tmp_path):
    """First day (issue 25): with no ~/.streamlit, Streamlit's e-mail prompt went to a discarded stdout and the app
    exited 255 (no terminal) or served nothing (a terminal). Headless always: it serves, asks nothing, and, with
    no display, opens no browser even without --no-browser."""
    pytest.importorskip("streamlit", reason="the app extra is not installed: pip install -e '.[app]'")
    import os
    import subprocess
    import urllib.request

    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(HOME=str(home), PYTHONPATH=str(REPO))
    with (tmp_path / "err.log").open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "forensics.cli", "app", "--db", str(tmp_path / "none.duckdb")],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, text=True, env=env,
                                cwd=REPO)
    try:
        line = proc.stdout.readline()
        assert line.startswith("run-forensics app: http://localhost:"), (tmp_path / "err.log").read_text()
        base = line.split()[2]
        with urllib.request.urlopen(base + "_stcore/health", timeout=30) as r:
            assert r.status == 200 and r.read() == b"ok"
        with urllib.request.urlopen(base, timeout=30) as r:
            assert r.status == 200 and b"<html" in r.read().lower()
        assert not (home / ".streamlit" / "credentials.toml").exists()
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0
    assert "Traceback" not in (tmp_path / "err.log").read_text()


def test_the_server_is_started_headless_without_usage_statistics():
    from app.server import STREAMLIT_FLAGS, has_display, streamlit_command

    cmd = streamlit_command(Path("app/streamlit_app.py"), 8501, Path("/tmp/f.duckdb"), None)
    flags = dict(zip(cmd[::1], cmd[1::1]))
    assert flags["--server.headless"] == "true" and flags["--browser.gatherUsageStats"] == "false"
    assert flags["--server.showEmailPrompt"] == "false" and flags["--server.address"] == "localhost"
    assert set(STREAMLIT_FLAGS) <= set(cmd)
    assert not has_display({}) or sys.platform in ("darwin", "win32")
    assert has_display({"DISPLAY": ":0"}) and has_display({"WAYLAND_DISPLAY": "wayland-0"})


@pytest.mark.slow
def test_every_gallery_run_shows_in_the_app_what_analyze_json_said(tmp_path, capsys, monkeypatch):
    """Done-when of issue 25 for the whole gallery: `analyze ROOT --all --json` and the app's Runs list (its
    query, and the page under AppTest) give every run the same verdict, reason and headline."""
    pytest.importorskip("streamlit", reason="the app extra is not installed: pip install -e '.[app]'")
    from streamlit.testing.v1 import AppTest

    from app.pages import VERDICT, headline_text
    from ingest import queries
    from ingest.store import connect

    db = tmp_path / "gallery.duckdb"
    assert main(["analyze", str(GALLERY), "--all", "--json", "--jobs", "2", "--db", str(db)]) == 0
    said = {r["name"]: r["analysis"] for r in json.loads(capsys.readouterr().out)["runs"]}
    assert len(said) == len([p for p in GALLERY.iterdir() if p.is_dir()])
    with connect(db, write=False) as con:
        rows = {r["name"]: r for r in queries.app_runs(con).iter_rows(named=True)}
    for name, a in said.items():
        row = rows[name]
        assert (row["verdict"], row["verdict_reason"]) == (a["verdict"], a["verdict_reason"]), name
        head = a["headline"]
        assert (row["headline_kind"], row["headline_step"], row["headline_event"]) == (
            (head["kind"], head["step"], head["event"]) if head else (None, None, None)), name
    monkeypatch.setenv("FORENSICS_DB", str(db))
    at = AppTest.from_file(str(REPO / "app" / "streamlit_app.py"), default_timeout=120).run()
    assert not at.exception
    page = " ".join(m.value for m in at.markdown)
    for name, row in rows.items():
        assert VERDICT[row["verdict"]][1] in page
        if row["headline_kind"]:
            assert __import__("html").escape(headline_text(row)) in page, name


def test_watch_alerts_a_stored_inconclusive_verdict_once(tmp_path):
    """watch reads the stored verdict: a run it can only call INCONCLUSIVE (here, a CSV with only a validation
    loss) is alerted with the stored reason, once, also across a restart; a healthy run is not."""
    import shutil

    from forensics.services.watch import Watcher, WatchSettings

    root = tmp_path / "root"
    csv_only_val_loss(root / "val_only")
    shutil.copytree(GALLERY / "healthy_mlp", root / "healthy_mlp", ignore=shutil.ignore_patterns("*.py"))
    db = tmp_path / "f.duckdb"
    first = Watcher([root], db, WatchSettings(events=False)).poll_once()
    said = [a for a in first.alerts if a.kind == "inconclusive"]
    assert [(a.run_name, a.origin, a.severity) for a in said] == [("val_only", "watch", "warning")]
    assert said[0].message.startswith("val_only: INCONCLUSIVE — no training-loss series was read")
    (root / "val_only" / "notes.txt").write_text("changed: analysed again\n")
    again = Watcher([root], db, WatchSettings(events=False)).poll_once()  # a restarted watch
    assert again.analysed >= 1 and not [a for a in again.alerts if a.kind == "inconclusive"]
