"""The Streamlit app (issue 15): evidence-keeping decimation, the pages' figures, and a store that cannot be read.

Databases are made by the real pipeline: `forensics.services.analysis.analyze` on gallery runs, and on a run whose metric
table polars writes as Parquet (a format `forensics ingest` reads) with spikes and NaN/Inf planted in 600k points.
Pages run under Streamlit's AppTest; a plotly figure's spec is JSON, so the tests read its shapes and traces.
"""

from __future__ import annotations

import base64
import json
import math
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest

pytest.importorskip("streamlit", reason="the app extra is not installed: pip install -e '.[app]'")
pytest.importorskip("plotly", reason="the app extra is not installed: pip install -e '.[app]'")

from streamlit.testing.v1 import AppTest

from forensics.services.analysis import analyze
from forensics.cli import main
from ingest import queries
from ingest.store import connect
from tests.paths import REPO


APP = str(REPO / "app" / "streamlit_app.py")
GALLERY = REPO / "sample_runs" / "runs"
N_BIG = 600_000
PLANTED_SPIKES = {60_000: 6.0, 60_120: 4.0, 240_000: 8.0, 420_123: 5.0}  # 60_000 and 60_120 share a pixel column
NAN_RUN = (540_000, 540_050)  # NaN over these steps, then finite again
INF_STEP = 570_000  # +Inf, then NaN to the end


@pytest.fixture(scope="module")
def gallery_db(tmp_path_factory) -> Path:
    """nan_lr_too_high (NaN at step 80, spikes, checkpoints, batches) and its healthy sibling healthy_mlp."""
    db = tmp_path_factory.mktemp("app") / "gallery.duckdb"
    analyze(GALLERY / "nan_lr_too_high", db)
    analyze(GALLERY / "healthy_mlp", db)
    return db


@pytest.fixture(scope="module")
def big_db(tmp_path_factory) -> Path:
    """One run, a 600k-point loss written by polars as Parquet, with planted spikes, a NaN stretch, an Inf and a
    non-finite tail; analysed, so its spikes table holds the detector's spike rows."""
    root = tmp_path_factory.mktemp("big")
    run = root / "big_run"
    run.mkdir()
    rng = np.random.default_rng(0)
    step = np.arange(N_BIG)
    loss = 2.0 * np.exp(-step / 2e5) + 0.5 + 0.01 * rng.standard_normal(N_BIG)
    for s, factor in PLANTED_SPIKES.items():
        loss[s] *= factor
    loss[NAN_RUN[0]:NAN_RUN[1]] = np.nan
    loss[INF_STEP] = np.inf
    loss[INF_STEP + 1:] = np.nan
    pl.DataFrame({"step": step, "loss": loss}).write_parquet(run / "metrics.parquet")
    db = root / "big.duckdb"
    analyze(run, db)
    return db


def _read(db: Path, name: str, *args):
    with connect(db, write=False) as con:
        return getattr(queries, name)(con, *args)


def _loss_series(db: Path) -> tuple[dict, int]:
    runs = _read(db, "app_runs")
    run = runs.row(0, named=True)
    series = _read(db, "app_series", run["run_id"])
    loss = series.filter(pl.col("role") == "train_loss").row(0, named=True)
    return loss, run["analysis_id"]


# -- decimation keeps the evidence ------------------------------------------------------------------------------

def _reference_m4(points: pl.DataFrame, lo: int, hi: int, pixels: int) -> tuple[set, set]:
    """Slow, obvious M4 in polars: per pixel column (ceil(width / pixels) steps) the first/min/max/last finite
    (step, value), and the columns that hold a non-finite value."""
    per_column = math.ceil((hi - lo + 1) / pixels)
    p = points.filter(pl.col("step").is_between(lo, hi)).with_columns(
        ((pl.col("step") - lo) // per_column).alias("col"))
    finite = p.filter(pl.col("value").is_finite())
    keep = set()
    for _, g in finite.group_by("col"):
        g = g.sort("step")
        for i in (0, g.height - 1, int(g["value"].arg_min()), int(g["value"].arg_max())):
            keep.add((g["step"][i], g["value"][i]))
    bad_cols = set(p.filter(~pl.col("value").is_finite())["col"].to_list())
    return keep, bad_cols


@pytest.mark.parametrize("window", ["all", "zoom_on_close_spikes", "starts_inside_nan_run", "tail"])
def test_m4_keeps_every_spike_and_first_nonfinite_point(big_db, window):
    loss, aid = _loss_series(big_db)
    lo, hi = {"all": (0, N_BIG - 1), "zoom_on_close_spikes": (59_000, 61_000),
              "starts_inside_nan_run": (540_020, 560_000), "tail": (560_000, N_BIG - 1)}[window]
    pixels = 1600
    drawn = _read(big_db, "app_m4", loss["series_id"], lo, hi, pixels, aid, loss["name"])
    spikes = _read(big_db, "app_spikes", aid)
    assert set(PLANTED_SPIKES) <= set(spikes["step"].to_list())  # the detector found the planted spikes
    steps = set(drawn["step"].to_list())

    in_range = [s for s in spikes["step"].to_list() if lo <= s <= hi]
    assert set(in_range) <= steps
    first = _read(big_db, "app_first_nonfinite", _read(big_db, "app_runs")["run_id"][0])
    assert first["step"].to_list() == [NAN_RUN[0]]
    if lo <= NAN_RUN[0] <= hi:
        assert NAN_RUN[0] in steps

    with connect(big_db, write=False) as con:
        rows = con.execute("SELECT step, value FROM scalars WHERE series_id = ?", [loss["series_id"]]).fetchall()
    points = pl.DataFrame(rows, schema={"step": pl.Int64, "value": pl.Float64}, orient="row")
    expected, bad_cols = _reference_m4(points, lo, hi, pixels)
    m4 = drawn.filter(pl.col("what") == "m4")
    assert set(zip(m4["step"].to_list(), m4["value"].to_list())) == expected
    nonfinite = drawn.filter(pl.col("what") == "nonfinite")
    cols = {(s - lo) // math.ceil((hi - lo + 1) / pixels) for s in nonfinite["step"].to_list()}
    assert cols == bad_cols  # every column holding a NaN/Inf draws one
    assert not nonfinite["value"].is_finite().any()
    if lo <= INF_STEP <= hi:
        assert INF_STEP in steps and drawn.filter(pl.col("step") == INF_STEP)["value"][0] == float("inf")
    # Bounded by the width, not by the series' length.
    assert drawn.height <= 7 * pixels + len(in_range)


def test_m4_of_a_short_range_is_every_point(big_db):
    loss, aid = _loss_series(big_db)
    drawn = _read(big_db, "app_m4", loss["series_id"], 59_990, 60_010, 1600, aid, loss["name"])
    assert sorted(set(drawn["step"].to_list())) == list(range(59_990, 60_011))


# -- pages --------------------------------------------------------------------------------------------------------

def _app(monkeypatch, db: Path, run: str | None = None) -> AppTest:
    monkeypatch.setenv("FORENSICS_DB", str(db))
    at = AppTest.from_file(APP, default_timeout=60)
    if run:
        at.query_params["run"] = run
        at.query_params["page"] = "Run report"
    return at.run()


def _figures(at: AppTest) -> dict[str, dict]:
    out = {}
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        out[spec["layout"]["title"]["text"]] = spec
    return out


def _array(v):
    """A trace's x or y as a list: plotly sends numpy arrays as base64 typed arrays."""
    if isinstance(v, dict) and "bdata" in v:
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"])).tolist()
    return v


def _traces(spec: dict) -> dict[str, dict]:
    return {t.get("name"): {**t, "x": _array(t.get("x")), "y": _array(t.get("y"))} for t in spec["data"]}


def test_report_draws_findings_spikes_nan_and_checkpoints(gallery_db, monkeypatch):
    at = _app(monkeypatch, gallery_db, run="nan_lr_too_high")
    assert not at.exception
    assert any("Failed" in e.value for e in at.error)
    run = _read(gallery_db, "app_runs").filter(pl.col("name") == "nan_lr_too_high").row(0, named=True)
    findings = _read(gallery_db, "app_findings", run["analysis_id"])
    spikes = _read(gallery_db, "app_spikes", run["analysis_id"])
    figs = _figures(at)
    assert {"Loss", "Gradient norm", "Learning rate"} <= set(figs)

    loss = figs["Loss"]
    shapes = [s.get("name", "") for s in loss["layout"]["shapes"]]
    for f in findings.filter(pl.col("step").is_not_null()).iter_rows(named=True):
        assert f"finding {f['finding_id']}: {f['kind']}" in shapes
    assert {f"checkpoint checkpoints/step_{s}.pt" for s in (20, 40, 60, 80)} <= set(shapes)
    assert loss["layout"]["yaxis"]["type"] == "log"  # 0.7 to 2.4e28

    traces = _traces(loss)
    assert traces["train/loss · spikes"]["x"] == spikes.filter(pl.col("series") == "train/loss")["step"].to_list()
    star = traces["train/loss · first non-finite"]
    assert star["x"] == [80] and "NaN" in star["text"][0]
    assert 80 in traces["train/loss · non-finite"]["x"]
    assert traces["train/loss"]["line"]["color"] != traces["val/loss"]["line"]["color"]
    grad = _traces(figs["Gradient norm"])
    assert grad["train/grad_norm · first non-finite"]["x"] == [79]
    assert "+Inf" in grad["train/grad_norm · first non-finite"]["text"][0]
    assert grad["train/grad_norm · spikes"]["x"] == spikes.filter(
        pl.col("series") == "train/grad_norm")["step"].to_list()


def test_focusing_a_finding_redraws_every_chart_over_its_steps(gallery_db, monkeypatch):
    at = _app(monkeypatch, gallery_db, run="nan_lr_too_high")
    run = _read(gallery_db, "app_runs").filter(pl.col("name") == "nan_lr_too_high").row(0, named=True)
    f = _read(gallery_db, "app_findings", run["analysis_id"]).filter(pl.col("kind") == "loss_spike").row(0, named=True)
    at.button(key=f"focus_{f['finding_id']}").click().run()
    assert not at.exception
    lo, hi = at.session_state.view
    assert lo <= f["step"] <= hi and (hi - lo) < 95
    for title, spec in _figures(at).items():
        x0, x1 = spec["layout"]["xaxis"]["range"]
        assert x0 < lo + 1 and x1 > hi - 1 and x1 - x0 < hi - lo + 3, title
        steps = [x for t in _traces(spec).values() for x in (t["x"] or []) if x is not None]
        assert min(steps) >= lo and max(steps) <= hi, title
    focused = [s for s in _figures(at)["Loss"]["layout"]["shapes"]
               if s.get("name") == f"finding {f['finding_id']}: loss_spike"]
    assert focused and focused[0]["opacity"] > 0.2
    at.button[[b.label for b in at.button].index("Show all steps")].click().run()
    assert at.session_state.view == (1, 95)


def test_a_link_with_a_finding_opens_it_focused(gallery_db, monkeypatch):
    run = _read(gallery_db, "app_runs").filter(pl.col("name") == "nan_lr_too_high").row(0, named=True)
    f = _read(gallery_db, "app_findings", run["analysis_id"]).filter(pl.col("kind") == "nan_loss").row(0, named=True)
    monkeypatch.setenv("FORENSICS_DB", str(gallery_db))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"run": "nan_lr_too_high", "page": "Run report", "finding": str(f["finding_id"])})
    at.run()
    assert not at.exception
    assert at.session_state.focus == f["finding_id"]
    lo, hi = at.session_state.view
    assert lo <= f["step"] <= hi and hi - lo < 20
    at.button[[b.label for b in at.button].index("Show all steps")].click().run()
    assert at.session_state.view == (1, 95) and "finding" not in at.query_params


def test_report_on_600k_points_draws_every_spike_and_the_nan(big_db, monkeypatch):
    at = _app(monkeypatch, big_db, run="big_run")
    assert not at.exception
    traces = _traces(_figures(at)["Loss"])
    assert set(PLANTED_SPIKES) <= set(traces["loss · spikes"]["x"])
    assert set(PLANTED_SPIKES) <= set(traces["loss"]["x"])  # on the line itself, not only as markers
    assert traces["loss · first non-finite"]["x"] == [NAN_RUN[0]]
    assert INF_STEP in traces["loss · non-finite"]["x"]
    assert len(traces["loss"]["x"]) < 8 * 1600  # decimated to the width, not 600k points
    assert traces["loss"]["line"]["color"] == "#0072B2"  # the train loss is blue, whatever its name


def test_runs_page_lists_filters_and_opens_a_run(gallery_db, monkeypatch):
    at = _app(monkeypatch, gallery_db)
    assert not at.exception
    assert any("2 runs in this database: 1 failed" in m.value for m in at.markdown)
    at.text_input[0].set_value("healthy").run()
    assert not any("nan\\_lr\\_too\\_high" in m.value for m in at.markdown)
    at.text_input[0].set_value("").run()
    run_id = _read(gallery_db, "app_runs").filter(pl.col("name") == "nan_lr_too_high")["run_id"][0]
    at.button(key=f"open_{run_id}").click().run()
    assert at.session_state.page == "Run report" and at.session_state.run == run_id
    assert at.title[0].value == "nan\\_lr\\_too\\_high"  # file-derived text is markdown-escaped; it reads the same


def test_layers_checkpoints_and_compare_pages(gallery_db, monkeypatch):
    at = _app(monkeypatch, gallery_db, run="nan_lr_too_high")
    at.sidebar.radio[0].set_value("Layers").run()
    assert not at.exception
    heat = _figures(at)
    assert "Per-layer weight norm" in heat and "Update ratio per step, between checkpoints" in heat
    nan_cells = _traces(heat["Per-layer weight norm"])["NaN/Inf"]
    assert set(nan_cells["x"]) == {80}  # the step-80 checkpoint holds NaN

    at.sidebar.radio[0].set_value("Checkpoints and replays").run()
    assert not at.exception
    text = "\n".join(m.value for m in at.markdown)
    assert "checkpoints/step\\_80.pt" in text and "step\\_60.pt" in text
    assert any("forensics replay" in c.value and "--step 80" in c.value for c in at.code)
    assert any(t.startswith("step 60 → 80") for t in _figures(at))

    at.sidebar.radio[0].set_value("Compare").run()
    assert not at.exception
    _the_compare_page_shows_compare(at, gallery_db)


def _the_compare_page_shows_compare(at: AppTest, db: Path) -> None:
    """The Compare page shows `forensics compare`'s own result: its chosen sibling, the parting step marked on the
    overlaid curves, the settings in its order."""
    from forensics.services.compare import compare

    with connect(db, write=False) as con:
        c = compare(con, "nan_lr_too_high")
    assert at.selectbox[0].value == c.sibling.run_id
    spec = _figures(at)["train loss, aligned by step"]
    assert {"nan_lr_too_high", c.sibling.name} <= set(_traces(spec))
    marks = [s for s in spec["layout"].get("shapes", []) if s.get("line", {}).get("dash") == "dash"]
    assert c.parting.step is not None and [m["x0"] for m in marks] == [c.parting.step]
    assert any(f"at step {c.parting.step}" in m.value for m in at.markdown)
    assert any("config values differ" in m.value for m in at.markdown)
    [settings] = [d.value for d in at.dataframe if "implicated by" in d.value.columns]
    assert list(settings["key"]) == [s.key for s in c.settings]


def test_an_ingested_run_shows_its_logged_layer_norms_and_says_it_is_not_analysed(tmp_path, monkeypatch, capsys):
    db = tmp_path / "ingested.duckdb"
    assert main(["ingest", str(GALLERY / "vanishing_deep_sigmoid"), "--db", str(db), "--quiet"]) == 0
    at = _app(monkeypatch, db, run="vanishing_deep_sigmoid")
    assert not at.exception
    assert any("not analysed yet" in i.value for i in at.info)
    assert "Loss" in _figures(at)
    at.sidebar.radio[0].set_value("Layers").run()
    assert not at.exception
    heat = _figures(at)["Per-layer gradient norm"]["data"][0]
    assert heat["type"] == "heatmap"
    assert heat["y"][:3] == ["body.fc1", "body.fc2", "body.fc3"] and heat["y"][-1] == "head"  # depth order
    assert len(heat["y"]) == 11 and all(len(row) == len(heat["x"]) for row in heat["z"])


def test_analyze_open_starts_the_app_on_the_analysed_run(tmp_path, monkeypatch, capsys):
    """`--open` serves the analysed run's report; `--open --no-browser` (issue 25) only prints its URL."""
    import app.server

    started = []
    monkeypatch.setattr(app.server, "serve_app", lambda db, **kw: started.append((db, kw)) or 0)
    db = tmp_path / "open.duckdb"
    assert main(["analyze", str(GALLERY / "healthy_mlp"), "--db", str(db), "--open"]) == 0
    assert main(["analyze", str(GALLERY / "healthy_mlp"), "--db", str(db), "--open", "--no-browser"]) == 0
    run_id = _read(db, "app_runs")["run_id"][0]
    assert started == [(db, {"run": run_id, "browser": True}), (db, {"run": run_id, "browser": False})]


def test_replays_are_shown_when_the_table_has_rows(gallery_db, tmp_path, monkeypatch):
    """A replay stored by replay's own writer (ingest.writes.insert_replay, the documented JSON object) is shown
    with its step, checkpoint, the op and module of the first non-finite value, culprits and counterfactuals."""
    from ingest.store import connect
    from ingest.writes import insert_replay

    db = tmp_path / "with_replays.duckdb"
    shutil.copy(gallery_db, db)
    run_id = _read(db, "app_runs").filter(pl.col("name") == "nan_lr_too_high")["run_id"][0]
    result = {"run": "nan_lr_too_high", "run_id": run_id, "step": 80, "bad_step": 80,
              "from_checkpoint": "checkpoints/step_60.pt", "entry": "forensics_entry.py", "device": "cpu",
              "status": "diagnosed", "fidelity": {"faithful": True, "compared": []}, "reproduced": True,
              "first_nonfinite": {"phase": "backward", "op": "MulBackward0", "module": "body.fc2",
                                  "file": "forensics_entry.py", "line": 12, "inputs": {}},
              "culprit_samples": [3, 17],
              "counterfactuals": [{"change": "fp32", "finite": False, "loss": float("nan"), "grad_norm": None},
                                  {"change": "lr_div_10", "finite": True, "loss": 2.1, "grad_norm": 0.8}]}
    with connect(db, write=True) as con:
        insert_replay(con, result)
    at = _app(monkeypatch, db, run="nan_lr_too_high")
    at.sidebar.radio[0].set_value("Checkpoints and replays").run()
    assert not at.exception
    text = "\n".join(m.value for m in at.markdown)
    assert "Replay of step 80" in text and "3, 17" in text and "MulBackward0" in text
    assert "lr\\_div\\_10" in text or "lr_div_10" in text
    assert not at.json, "the replay card shows sentences, not a raw dict"


def test_replay_card_reads_as_the_cli_prints_it(gallery_db, tmp_path, monkeypatch):
    """Issue 25: the card showed `created` as a JSON error and the rest as a raw dict. A real replay's JSON, stored by
    replay's own writer, is shown with its fidelity, reproduced line, phase/op/module/file:line, culprits,
    counterfactuals and command; a finite (spike) step reads "finite, as logged", not "reproduced: False"."""
    from forensics.usercode.replay.result import ReplayResult
    from ingest.store import connect
    from ingest.writes import insert_replay

    db = tmp_path / "with_replays.duckdb"
    shutil.copy(gallery_db, db)
    run_id = _read(db, "app_runs").filter(pl.col("name") == "nan_lr_too_high")["run_id"][0]
    common = dict(run="nan_lr_too_high", run_id=run_id, from_checkpoint="checkpoints/step_60.pt", checkpoint_step=60,
                  entry="forensics_entry.py", config="config.yaml", device="cpu", determinism={}, restored=["model"],
                  notes=[], replayed_steps=[61, 80],
                  fidelity={"faithful": True, "verified": True, "compared": [{"match": True}]})
    nan = ReplayResult(step=80, command="forensics replay ~/runs/nan_lr_too_high --step 80", bad_step=80,
                       reproduced=True, status="diagnosed: the first non-finite value appears in the forward pass",
                       rerun={"loss": [float("nan")] * 2, "grad_norm": [float("nan")] * 2},
                       first_nonfinite={"phase": "forward", "op": "linear", "module": "body.fc2",
                                        "file": "forensics_entry.py", "line": 31},
                       culprits={"samples": [3, 17], "method": "per_sample_loss"}, culprit_samples=[3, 17],
                       counterfactuals=[{"change": "lr_div_10", "applicable": True, "finite": True, "loss": 2.1,
                                         "grad_norm": 0.8, "window": [61, 80], "loss_start": 2.3, "failed_at": None}],
                       likely_fix={"change": "lr_div_10", "window": [61, 80], "loss_start": 2.3, "loss_end": 2.1,
                                   "evidence": "lr_div_10 keeps steps 61-80 finite: loss 2.3 at step 61 → 2.1 at step 80"},
                       **common)
    spike = ReplayResult(step=70, command="forensics replay ~/runs/nan_lr_too_high --step 70",
                         status="finite step 70 replayed faithfully", spike={"loss": 3.0, "grad_norm": 9.0,
                         "samples_by_loss": [], "samples_by_grad_norm": [], "layers_by_grad_norm": []}, **common)
    with connect(db, write=True) as con:
        insert_replay(con, nan.to_json())
        insert_replay(con, spike.to_json())
    at = _app(monkeypatch, db, run="nan_lr_too_high")
    at.sidebar.radio[0].set_value("Checkpoints and replays").run()
    assert not at.exception and not at.json
    text = "\n".join(m.value for m in at.markdown)
    assert "ERROR" not in text and "src property" not in text
    assert "**Fidelity**: faithful: 1/1 logged values within tolerance, all to the logged rounding" in text
    assert "**Reproduced**: yes" in text and "**Reproduced**: finite, as logged" in text
    assert "forward: linear in body.fc2 at forensics\\_entry.py:31" in text
    assert "**Culprit samples**: 3, 17" in text
    assert any("lr\\_div\\_10" in t or "lr_div_10" in t for t in text.splitlines())
    assert "steps 61-80 replayed from checkpoints/step\\_60.pt with one change" in text  # the window, as the CLI says
    assert "**Likely fix**: lr\\_div\\_10 keeps steps 61-80 finite" in text
    assert {c.value for c in at.code} >= {nan.command, spike.command}


def _hold_write_lock(db: Path) -> subprocess.Popen:
    code = textwrap.dedent(f"""
        import duckdb, sys, time
        con = duckdb.connect({str(db)!r})
        print("locked", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


@pytest.mark.parametrize("state", ["missing", "not_duckdb", "empty", "older_schema", "locked"])
def test_a_store_that_cannot_be_read_is_a_message(state, gallery_db, tmp_path, monkeypatch):
    db = tmp_path / "store.duckdb"
    holder = None
    if state == "not_duckdb":
        db.write_text("not a database\n" * 100)
    elif state == "empty":
        with connect(db, write=True):
            pass
    elif state == "older_schema":
        shutil.copy(gallery_db, db)
        con = duckdb.connect(str(db))
        con.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
        con.close()
    elif state == "locked":
        shutil.copy(gallery_db, db)
        holder = _hold_write_lock(db)
    try:
        start = time.monotonic()
        at = _app(monkeypatch, db)
        waited = time.monotonic() - start
    finally:
        if holder is not None:
            holder.kill()
            holder.wait()
    assert not at.exception
    messages = " ".join(e.value for e in at.error) + " ".join(i.value for i in at.info)
    expected = {"missing": "no database at", "not_duckdb": "cannot", "empty": "holds no runs",
                "older_schema": "has schema 0", "locked": "locked"}[state]
    assert expected in messages
    if state == "locked":
        assert waited < 30


# -- CLI ----------------------------------------------------------------------------------------------------------

def test_app_help_ends_with_an_example(capsys):
    assert main(["app", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1].strip().startswith("forensics app")


def test_app_on_a_taken_port_is_one_line_and_exit_2(tmp_path, capsys):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert main(["app", "--db", str(tmp_path / "f.duckdb"), "--port", str(port), "--no-browser"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"forensics: error: port {port} is in use; pass another --port"


def test_stopping_forensics_app_stops_its_server(tmp_path):
    """Regression: a SIGTERM to `forensics app` left its streamlit server running, orphaned."""
    import os
    import signal
    import socket

    env = dict(os.environ, PYTHONPATH=str(REPO))
    with (tmp_path / "app.log").open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "forensics.cli", "app", "--db", str(tmp_path / "none.duckdb"),
                                 "--no-browser"], stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=REPO)
    line = proc.stdout.readline()
    assert line.startswith("run-forensics app: http://localhost:"), (tmp_path / "app.log").read_text()
    port = int(line.split()[2].split(":")[2].strip("/").split("/")[0])
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0  # nothing listens any more


def test_a_constant_series_is_drawn_around_its_value():
    """An LR that never moved would sit on plotly's default -1..1 axis and read as 0."""
    from app import charts

    points = pl.DataFrame({"step": [1, 2, 3], "value": [1e-3] * 3, "what": ["m4"] * 3})
    fig = charts.series_figure("Learning rate", [{"name": "lr", "colour": charts.TRAIN, "points": points}], 1, 3)
    low, high = fig.layout.yaxis.range
    assert 0 < low < 1e-3 < high < 2e-3


def test_a_run_whose_ingest_stopped_halfway_says_so_on_the_runs_list_and_its_report(tmp_path, monkeypatch):
    """Issue 26: a run half-stored by an ingest that was locked out looked whole in the app."""
    import ingest.run
    from ingest.errors import StoreLocked

    def locked_out(*args, **kwargs):
        raise StoreLocked("database is locked by another process writing to it")

    db = tmp_path / "f.duckdb"
    run = GALLERY / "nan_lr_too_high"
    with monkeypatch.context() as m:
        m.setattr(ingest.run, "_ingest_tensors", locked_out)  # after the logs, before the checkpoints
        assert main(["ingest", str(run), "--db", str(db), "--quiet"]) == 2
    listed = _app(monkeypatch, db)
    assert any("ingest did not finish" in m.value for m in listed.markdown)
    report = _app(monkeypatch, db, run="nan_lr_too_high")
    assert any("did not finish" in w.value for w in report.warning)


def test_runs_filter_finds_a_run_by_any_of_its_finding_kinds(gallery_db, monkeypatch):
    """Issue 25: the filter searched names and the headline only, so a kind under the headline found nothing."""
    runs = _read(gallery_db, "app_runs")
    failed = runs.filter(pl.col("name") == "nan_lr_too_high").row(0, named=True)
    kinds = _read(gallery_db, "app_run_kinds").filter(pl.col("run_id") == failed["run_id"])["kinds"][0].split()
    hidden = [k for k in kinds if k not in (failed["headline"] or "")]
    assert hidden, "every kind of the run is in its headline: nothing to test"
    at = _app(monkeypatch, gallery_db)
    at.text_input[0].set_value(hidden[0]).run()
    assert not at.exception
    text = "\n".join(m.value for m in at.markdown)
    assert "nan\\_lr\\_too\\_high" in text and "healthy\\_mlp" not in text


def test_a_throughput_drop_shows_its_step_times(tmp_path, monkeypatch):
    """Issue 25: the report drew loss and gradient norm under a throughput_drop, not the step times it is about.
    The seconds per step of the series it judged, from the real run's wall-clock stamps, are drawn under it, with
    the stall's steps among the points."""
    db = tmp_path / "stalls.duckdb"
    analyze(GALLERY / "throughput_stalls", db)
    findings = _read(db, "app_findings", _read(db, "app_runs")["analysis_id"][0])
    drop = findings.filter(pl.col("kind") == "throughput_drop").row(0, named=True)
    at = _app(monkeypatch, db, run="throughput_stalls")
    assert not at.exception
    figures = _figures(at)
    [title] = [t for t in figures if t.startswith("Step time")]
    assert drop["series"] in title
    traces = _traces(figures[title])
    line = traces[f"{drop['series']} · seconds per step"]
    stalled = [y for x, y in zip(line["x"], line["y"]) if drop["step"] <= x <= (drop["step_end"] or drop["step"])]
    calm = [y for x, y in zip(line["x"], line["y"]) if x < drop["step"]]
    assert stalled and calm and max(stalled) > 2 * float(np.median(calm))


def test_the_step_time_chart_draws_the_intervals_throughput_drop_judged(tmp_path):
    """The chart's seconds per step are the detector's own (`ingest.steptime`), not a second derivation: a run
    resumed from an earlier step (a second event file rewrites steps 40-59 an hour later) has no interval across the
    resume, where a Δwall/Δstep over the points sorted by step drew intervals between the two writers' points."""
    from torch.utils.tensorboard import SummaryWriter

    from forensics.judge.detectors.throughput_drop import ThroughputDrop
    from forensics.judge.run import Run

    run_dir = tmp_path / "resumed"
    for first, last, t0, pace in ((0, 60, 1.7e9, 1.0), (40, 100, 1.7e9 + 3600, 2.0)):
        w = SummaryWriter(str(run_dir), filename_suffix=f".{first}")
        for i in range(first, last):
            w.add_scalar("train/loss", 1.0 / (1 + i), i, walltime=t0 + (i - first) * pace)
        w.close()
    db = tmp_path / "f.duckdb"
    analyze(run_dir, db)
    with connect(db, write=False) as con:
        run = Run.from_store(con, queries.app_runs(con)["run_id"][0])
        a, b, r, seg, name = ThroughputDrop()._per_step(run)[:5]
        sid = int(run.meta.filter(pl.col("name") == name)["series_id"][0])
        drawn = queries.app_step_time(con, sid, 0, 99, 1000)
    judged = sorted(zip(b.tolist(), r.tolist()))
    assert sorted(zip(drawn["step"].to_list(), drawn["value"].to_list())) == judged
    assert set(seg.tolist()) == {0, 1} and set(drawn["value"].round(6).to_list()) == {1.0, 2.0}


def test_finding_labels_sit_above_the_plot_not_on_its_markers(gallery_db, monkeypatch):
    """Issue 25: finding labels were drawn inside the plot's top edge, on the NaN/Inf marks and the first
    non-finite star (nan_loss's label lay on the star at step 80). They sit in a band above the plot now, and the
    legend below it."""
    at = _app(monkeypatch, gallery_db, run="nan_lr_too_high")
    loss = _figures(at)["Loss"]
    labels = [a for a in loss["layout"]["annotations"] if a.get("text", "").split(" ", 1)[-1] in
              {"nan_loss", "loss_spike", "divergence", "exploding_gradients", "lr_too_high"}]
    assert labels
    assert all(a["yref"] in ("paper", "y domain") and a["y"] >= 1 and a["yanchor"] == "bottom" for a in labels)
    stars = _traces(loss)["train_loss · first non-finite"] if "train_loss · first non-finite" in _traces(loss) else None
    assert stars is None or stars["yaxis"] in (None, "y")  # markers stay in data coordinates, inside the plot
    assert loss["layout"]["legend"]["y"] < 0


def test_stored_answers_sit_under_their_findings_and_lead_check_first(gallery_db, tmp_path, monkeypatch):
    """After a replay and a probe (stored by their own writers), the Run report shows each under the finding it
    explains, with when it ran, leads "Check first" with the replay's likely fix and op, and no longer asks for the
    replay; the same rule as `analyze` (forensics/judge/learned.py)."""
    from ingest.store import connect
    from ingest.writes import insert_probe, insert_replay

    db = tmp_path / "answers.duckdb"
    shutil.copy(gallery_db, db)
    run_id = _read(db, "app_runs").filter(pl.col("name") == "nan_lr_too_high")["run_id"][0]
    replay = {"run": "nan_lr_too_high", "run_id": run_id, "step": 80, "bad_step": 79, "status": "diagnosed",
              "from_checkpoint": "checkpoints/step_60.pt", "command": "forensics replay x --step 80",
              "first_nonfinite": {"phase": "forward", "op": "addmm", "module": "body.fc2", "file": "train.py",
                                  "line": 12},
              "culprit_samples": [4], "counterfactuals": [],
              "likely_fix": {"change": "lr_div_10", "window": [61, 80], "evidence": "lr_div_10 keeps steps 61-80 "
                             "finite"}}
    probe = {"run_id": run_id, "checks": [
        {"name": "lr_range", "status": "fail", "summary": "the run's LR is past the range where the loss falls",
         "names": ["lr=0.15"], "explains": ["divergence"], "evidence": {}}]}
    with connect(db, write=True) as con:
        insert_replay(con, replay)
        insert_probe(con, probe)
    at = _app(monkeypatch, db, run="nan_lr_too_high")
    assert not at.exception
    text = "\n".join(m.value for m in at.markdown)
    assert "replay of step 80 (ran " in text and "forward: addmm in body.fc2 at train.py:12" in text
    assert "probe lr\\_range FAILED (ran " in text
    check = next(m.value for m in at.markdown if m.value.startswith("Check first:"))
    assert check.startswith("Check first: addmm in body.fc2") and "; lr\\_div\\_10, the likely fix replay found" in check
    assert not any("forensics replay" in c.value and "--step 80" in c.value for c in at.code)


def test_sidebar_lists_runs_worst_first(gallery_db, monkeypatch):
    """The run select follows the Runs page's default order (the failed run first), not the store's (by name)."""
    assert _read(gallery_db, "app_runs")["name"].to_list() == ["healthy_mlp", "nan_lr_too_high"]
    at = _app(monkeypatch, gallery_db)
    assert at.sidebar.selectbox[0].options == ["nan_lr_too_high", "healthy_mlp"]


def test_movers_start_at_zero_and_update_ratios_span_their_interval(gallery_db, monkeypatch):
    at = _app(monkeypatch, gallery_db, run="nan_lr_too_high")
    at.sidebar.radio[0].set_value("Checkpoints and replays").run()
    movers = [spec for title, spec in _figures(at).items() if title.startswith("step ")]
    assert movers and all(s["layout"]["xaxis"]["type"] == "linear" and s["layout"]["xaxis"]["range"][0] == 0
                          for s in movers)
    at.sidebar.radio[0].set_value("Layers").run()
    heat = _figures(at)["Update ratio per step, between checkpoints"]
    edges = _array(heat["data"][0]["x"])
    ckpts = sorted(_read(gallery_db, "app_checkpoints", runs_id(gallery_db, "nan_lr_too_high"))["step"].to_list())
    assert edges == [s for s in ckpts if s in edges] and len(edges) >= 3  # cell edges are checkpoint steps
    assert len(heat["data"][0]["z"][0]) == len(edges) - 1
    assert "per step" in heat["data"][0]["colorbar"]["title"]["text"]


def runs_id(db: Path, name: str) -> str:
    return _read(db, "app_runs").filter(pl.col("name") == name)["run_id"][0]


def test_a_resumed_run_draws_each_pass_apart(tmp_path, monkeypatch):
    """A run resumed from an earlier checkpoint logs the same steps again from a second event file: the loss is drawn
    as one line per file over its own steps, not one line that doubles back."""
    db = tmp_path / "resumed.duckdb"
    analyze(GALLERY / "resumed_after_crash", db)
    at = _app(monkeypatch, db, run="resumed_after_crash")
    assert not at.exception
    traces = _traces(_figures(at)["Loss"])
    passes = sorted(n for n in traces if " · pass " in n and "spikes" not in n)
    assert len(passes) >= 2, list(traces)
    one, two = (traces[n]["x"] for n in passes[:2])
    assert one == sorted(one) and two == sorted(two)  # each pass runs forward
    assert min(two) <= max(one)  # and the second goes back over steps the first logged


def test_report_says_what_the_cli_says_of_other_spikes_and_files_not_read(gallery_db, tmp_path, monkeypatch):
    """The CLI's "other spikes" sentence (spikes no finding accounts for) and its "not read" files, on the page."""
    from forensics.text import report
    from forensics.text.render import md

    db = tmp_path / "copy.duckdb"
    shutil.copy(gallery_db, db)
    run = tmp_path / "lr_too_high_with_notes"  # a name of its own: the gallery store holds the original
    shutil.copytree(GALLERY / "nan_lr_too_high", run)
    (run / "notes.xyz").write_bytes(b"\x00\x01 not a log")
    result = analyze(run, db)
    assert report.other_spikes(result) and result.unknown_files == ["notes.xyz"] and result.code_files
    at = _app(monkeypatch, db, run=run.name)
    assert not at.exception
    text = "\n".join(m.value for m in at.markdown)
    assert md(report.spikes_line(report.other_spikes(result))) in text
    assert any(e.label.startswith("Not read (1 file") for e in at.expander)
    assert "- notes.xyz" in text and not any(f"- {md(c)}" in text for c in result.code_files)
    assert any(c.value.startswith("Code, not logs") and all(md(p) in c.value for p in result.code_files[:5])
               for c in at.caption)


@pytest.mark.parametrize("fixture, name", [("MUSUBI_EXCERPT", "train.log"), ("MARIO_EPISODES", "training_log.log")])
def test_the_step_time_chart_prices_a_console_log_s_records_as_throughput_drop_does(tmp_path, fixture, name):
    """One pricing of steps (`ingest.steptime.seconds_per_step`): a pasted progress bar whose counter skips 34 steps
    and redraws steps (priced by its counters: the gap and the redraws are no intervals) and an agent's episodes of
    their printed lengths are drawn with the seconds per step the detector judged, from the wall-clock source a
    finding of it stores, not one step per line."""
    from forensics.judge.detectors.throughput_drop import ThroughputDrop, _source
    from forensics.judge.run import Run
    from tests.detectors import test_throughput_drop as real

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / name).write_text(getattr(real, fixture), encoding="utf-8")
    db = tmp_path / "f.duckdb"
    analyze(run_dir, db)
    with connect(db, write=False) as con:
        run = Run.from_store(con, queries.app_runs(con)["run_id"][0])
        got = ThroughputDrop()._per_step(run)
        source = _source(got, got.start, got.end)
        sid = int(run.meta.filter(pl.col("name") == got.name)["series_id"][0])
        drawn = queries.app_step_time(con, sid, int(got.start[0]), int(got.end[-1]), 10**6, None, source)
    assert source["priced_by"] in ("counters", f"lengths:{source['priced_by'].split(':')[-1]}")
    assert sorted(zip(drawn["step"].to_list(), drawn["value"].round(9).to_list())) == \
        sorted(zip(got.end.tolist(), np.round(got.seconds, 9).tolist()))
