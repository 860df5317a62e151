"""End to end: `forensics app` on a gallery run's database, loaded in headless Chromium (issue 15).

Debian's chromium driven by Playwright (`executable_path`, no Playwright browser download). The waits are the ones
Streamlit's own e2e tests use: the app connected, then its script not running. Screenshots go to tmp_path; with
FORENSICS_APP_SCREENSHOTS=DIR they are also copied there (how docs/img/ was made).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = pytest.mark.skipif(not CHROMIUM.exists(),
                                reason="needs Debian's chromium at /usr/bin/chromium (apt-get install chromium; "
                                       ".ci/run installs it)")
playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the test extra")
pytest.importorskip("streamlit", reason="the app extra is not installed: pip install -e '.[app]'")

CONNECTED = "[data-testid='stApp'][data-test-connection-state='CONNECTED']"
IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"
WIDTH = 1400


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The app serving a database that holds nan_lr_too_high and healthy_mlp, analysed by the real pipeline."""
    from forensics.services.analysis import analyze
    from ingest import queries
    from ingest.store import connect

    db = tmp_path_factory.mktemp("browser") / "gallery.duckdb"
    analyze(REPO / "sample_runs" / "runs" / "nan_lr_too_high", db)
    analyze(REPO / "sample_runs" / "runs" / "healthy_mlp", db)
    with connect(db, write=False) as con:
        runs = queries.app_runs(con)
        run = runs.filter(runs["name"] == "nan_lr_too_high").row(0, named=True)
        findings = queries.app_findings(con, run["analysis_id"])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    log = db.parent / "app.log"
    with log.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "forensics.cli", "app", "--db", str(db), "--port", str(port),
                                 "--no-browser", "--run", "nan_lr_too_high"],
                                stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=REPO)
    line = proc.stdout.readline()
    try:
        assert line.startswith("run-forensics app: http://localhost:"), line + log.read_text()
        url = line.split()[2]
        yield {"url": url, "base": f"http://localhost:{port}/", "findings": findings, "run": run}
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _load(page, url: str) -> None:
    page.goto(url)
    page.wait_for_selector(CONNECTED, timeout=90_000)
    page.wait_for_selector(IDLE, timeout=90_000)


def _shoot(page, path: Path, full: bool = False) -> None:
    """A screenshot of the viewport, or of the whole page: Streamlit scrolls inside its main block, so the
    viewport is made as tall as the content first."""
    if full:
        height = page.evaluate("document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
        page.set_viewport_size({"width": WIDTH, "height": min(int(height) + 40, 12_000)})
        page.wait_for_timeout(800)
    page.screenshot(path=str(path))
    page.set_viewport_size({"width": WIDTH, "height": 1000})
    copy_to = os.environ.get("FORENSICS_APP_SCREENSHOTS")
    if copy_to:
        Path(copy_to).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(copy_to) / path.name)


def _chart_data(page) -> list[dict]:
    """Title, trace names and x range of every plotly chart on the page, read from plotly.js itself."""
    return page.evaluate("""() => [...document.querySelectorAll('.js-plotly-plot')].map(el => ({
        title: el.layout && el.layout.title && el.layout.title.text.replace(/<[^>]+>/g, ''),
        traces: (el.data || []).map(t => t.name),
        range: el.layout && el.layout.xaxis && el.layout.xaxis.range,
        shapes: ((el.layout && el.layout.shapes) || []).map(s => s.name)}))""")


def test_report_in_chromium_shows_findings_charts_and_focuses_a_finding(served, tmp_path):
    sync_playwright = playwright_api.sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM),
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
        try:
            _load(page, served["url"])
            page.wait_for_function("document.querySelectorAll('.js-plotly-plot .scatterlayer').length >= 3",
                                   timeout=60_000)
            assert page.get_by_role("heading", name="nan_lr_too_high").is_visible()
            assert page.get_by_text("Failed", exact=False).first.is_visible()
            for f in served["findings"].iter_rows(named=True):
                assert page.get_by_text(f["summary"], exact=True).count() >= 1, f["kind"]

            charts = {c["title"]: c for c in _chart_data(page)}
            assert {"Loss", "Gradient norm", "Learning rate"} <= set(charts)
            loss = charts["Loss"]
            assert {"train/loss", "val/loss", "train/loss · spikes", "train/loss · first non-finite"} <= set(
                loss["traces"])
            assert any(s and s.startswith("finding ") for s in loss["shapes"])
            # The star and the crosses are drawn as SVG points, not only listed in the spec.
            assert page.locator(".js-plotly-plot .scatterlayer .trace .points path").count() > 10
            _shoot(page, tmp_path / "app_report.png")
            _shoot(page, tmp_path / "app_report_full.png", full=True)
            page.get_by_role("heading", name="Curves").evaluate("el => el.scrollIntoView({block: 'start'})")
            page.wait_for_timeout(500)
            _shoot(page, tmp_path / "app_curves.png")

            # Zoom by selecting a box on the Loss chart: every chart is re-queried over the selected steps.
            drag = page.locator(".js-plotly-plot").first.locator(".nsewdrag").first
            box = drag.bounding_box()
            y = box["y"] + box["height"] * 0.5
            page.mouse.move(box["x"] + box["width"] * 0.25, y)
            page.mouse.down()
            page.mouse.move(box["x"] + box["width"] * 0.45, y + 20, steps=8)
            page.mouse.move(box["x"] + box["width"] * 0.55, y + 40, steps=8)
            page.mouse.up()
            page.wait_for_function(
                """() => [...document.querySelectorAll('.js-plotly-plot')].every(
                    e => e.layout.xaxis.range[1] - e.layout.xaxis.range[0] < 60)""", timeout=60_000)
            page.wait_for_selector(IDLE, timeout=60_000)
            ranges = [c["range"] for c in _chart_data(page)]
            assert all(20 < lo < 40 and 45 < hi < 65 for lo, hi in ranges), ranges
            page.get_by_role("button", name="Show all steps").click()
            page.wait_for_function(
                """() => [...document.querySelectorAll('.js-plotly-plot')].every(
                    e => e.layout.xaxis.range[1] - e.layout.xaxis.range[0] > 90)""", timeout=60_000)

            spike = served["findings"].filter(served["findings"]["kind"] == "loss_spike").row(-1, named=True)
            page.locator(f".st-key-focus_{spike['finding_id']} button").first.click()
            page.wait_for_function(
                """(step) => { const el = [...document.querySelectorAll('.js-plotly-plot')]
                        .find(e => e.layout && e.layout.title
                              && e.layout.title.text.replace(/<[^>]+>/g, '') === 'Loss');
                    return el && el.layout.xaxis.range[1] - el.layout.xaxis.range[0] < 60
                        && el.layout.xaxis.range[0] < step && el.layout.xaxis.range[1] > step; }""",
                arg=spike["step"], timeout=60_000)
            page.wait_for_selector(IDLE, timeout=60_000)
            # the Focus button sits in the findings, far below the charts it redrew: the page scrolls up to them
            page.wait_for_function("""() => { const el = document.getElementById('curves');
                    const top = el && el.getBoundingClientRect().top; return top !== null && top > -80 && top < 300; }""",
                                   timeout=30_000)
            for c in _chart_data(page):
                if c["title"] in ("Loss", "Gradient norm", "Learning rate"):
                    lo, hi = c["range"]
                    assert lo < spike["step"] < hi and hi - lo < 60, c["title"]
            page.get_by_role("heading", name="Curves").evaluate("el => el.scrollIntoView({block: 'start'})")
            page.wait_for_timeout(500)
            _shoot(page, tmp_path / "app_focused.png")

            for name, label, shows in (("app_runs.png", "Runs", "2 runs in this database"),
                                       ("app_layers.png", "Layers", "Per-layer weight norm"),
                                       ("app_checkpoints.png", "Checkpoints and replays", "forensics replay"),
                                       ("app_compare.png", "Compare", "config values differ")):
                page.locator("[data-testid='stSidebar']").get_by_text(label, exact=True).click()
                page.get_by_text(shows).first.wait_for(timeout=60_000)
                page.wait_for_selector(IDLE, timeout=60_000)
                assert page.locator("[data-testid='stException']").count() == 0, label
                _shoot(page, tmp_path / name, full=label != "Runs")
        finally:
            browser.close()
    assert all((tmp_path / n).stat().st_size > 10_000 for n in ("app_report.png", "app_focused.png"))


@pytest.fixture(scope="module")
def judged_served(tmp_path_factory):
    """`forensics app` started as a first-day user would: a HOME with no ~/.streamlit, no DISPLAY, serving runs
    whose verdict the app used to re-derive differently (issue 25), each analysed by `forensics analyze --json`."""
    from tests.test_one_judgement import csv_only_val_loss, only_config

    root = tmp_path_factory.mktemp("judged_browser")
    runs = {"dead_relu_bias_init": REPO / "sample_runs" / "runs" / "dead_relu_bias_init",
            "only_config": only_config(root / "only_config"), "csv_only_val_loss": csv_only_val_loss(root / "csv_only_val_loss")}
    db = root / "f.duckdb"
    home = root / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(PYTHONPATH=str(REPO), HOME=str(home))
    said = {}
    for name, path in runs.items():
        done = subprocess.run([sys.executable, "-m", "forensics.cli", "analyze", str(path), "--db", str(db), "--json"],
                              capture_output=True, text=True, env=env, cwd=REPO, check=True)
        said[name] = __import__("json").loads(done.stdout)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = root / "app.log"
    with log.open("w") as err:  # no --no-browser: with no display, we open none and Streamlit asks nothing
        proc = subprocess.Popen([sys.executable, "-m", "forensics.cli", "app", "--db", str(db), "--port", str(port)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, text=True, env=env,
                                cwd=REPO)
    line = proc.stdout.readline()
    try:
        assert line.startswith("run-forensics app: http://localhost:"), line + log.read_text()
        yield {"base": f"http://localhost:{port}/", "said": said, "home": home}
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_runs_list_and_reports_in_chromium_say_what_analyze_json_said(judged_served):
    """Done-when of issue 25, through the browser: the Runs list and each report show the verdict (INCONCLUSIVE with
    its reason for the two bad inputs, once green "no findings") and the headline `analyze --json` gave."""
    from urllib.parse import urlencode

    said = judged_served["said"]
    assert said["only_config"]["verdict"] == said["csv_only_val_loss"]["verdict"] == "inconclusive"
    assert said["dead_relu_bias_init"]["headline"]["kind"] == "dead_relu"
    assert not (judged_served["home"] / ".streamlit" / "credentials.toml").exists()  # no e-mail prompt was answered
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM),
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
        try:
            _load(page, judged_served["base"])
            runs_text = page.locator("[data-testid='stMain']").inner_text()
            for name, result in said.items():
                assert name in runs_text, runs_text
                text = runs_text[runs_text.rfind("\n", 0, runs_text.index(name)) + 1:]  # from the verdict badge
                text = text[:text.index("ingested ")]  # the run's card: its name, verdict, headline, reason
                assert {"inconclusive": "INCONCLUSIVE", "failed": "failed", "suspicious": "suspicious",
                        "healthy": "healthy"}[result["verdict"]] in text, (name, text)
                head = result["headline"]
                if head:
                    assert f"{head['kind']} at " in text and f"{head['step']:,}" in text, (name, text)
                    assert f"(event {head['event']})" in text, (name, text)
                else:
                    assert result["verdict_reason"] in text, (name, text)
            assert "no findings" not in runs_text
            for name, result in said.items():
                _load(page, judged_served["base"] + "?" + urlencode({"run": name, "page": "Run report"}))
                main_text = page.locator("[data-testid='stMain']").inner_text()
                assert page.locator("[data-testid='stException']").count() == 0, name
                if result["verdict"] == "inconclusive":
                    assert "INCONCLUSIVE" in main_text and result["verdict_reason"] in main_text, name
                head = result["headline"]
                if head:
                    assert "Earliest cause" in main_text and f"{head['kind']} at " in main_text, name
                    assert f"(event {head['event']})" in main_text, name
        finally:
            browser.close()
