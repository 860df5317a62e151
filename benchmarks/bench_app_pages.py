"""Benchmark: how long each app page takes to settle in a real browser, on the gallery.

    python benchmarks/bench_app_pages.py                           # analyses the gallery into /tmp first
    python benchmarks/bench_app_pages.py --db /tmp/gallery.duckdb  # a store that already holds it
    python benchmarks/bench_app_pages.py --runs nan_lr_too_high resumed_after_crash --rounds 3
    python benchmarks/bench_app_pages.py --db /tmp/g.duckdb --against /path/to/other/checkout   # both, interleaved

`forensics app` serves the store; headless Chromium (Debian's, driven by Playwright) opens it and, for each run
named, clicks each page in the sidebar. A page has settled when its own heading is on screen, Streamlit's script
is no longer running, nothing on the page is stale and every plotly chart is drawn. The first round visits each
page cold (nothing cached yet); later rounds show what a user pays on coming back. Prints one row per page: the
median and worst settle time over runs and rounds after the first, and the first round's. Goal: under 1 s.
`--against CHECKOUT` serves that checkout's app too and measures the two in turn, run by run, so a busy machine
weighs on both alike.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
PAGES = {  # sidebar label -> a selector that only that page's own run puts on screen
    "Runs": "h1 >> text=\"Runs\"",
    "Run report": "h2 >> text=/^(Curves|Findings)$/",
    "Layers": "h1:has-text('Layers ·')",
    "Checkpoints and replays": "h1:has-text('Checkpoints and replays ·')",
    "Compare": "h1:has-text('Compare runs')",
}
SETTLED = """() => {
    const app = document.querySelector("[data-testid='stApp']");
    if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
    if (document.querySelector("[data-stale='true']")) return false;
    const charts = document.querySelectorAll("[data-testid='stPlotlyChart']").length;
    return document.querySelectorAll('.js-plotly-plot .main-svg').length >= charts;
}"""


def gallery_store(path: Path) -> None:
    subprocess.run([sys.executable, "-m", "forensics", "analyze", str(REPO / "sample_runs" / "runs"), "--all",
                    "--jobs", "2", "--db", str(path)], check=True, cwd=REPO, stdout=subprocess.DEVNULL)


def serve(db: Path, run: str, repo: Path = REPO) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "forensics", "app", "--db", str(db), "--port", str(port),
                             "--no-browser", "--run", run], cwd=repo, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=dict(os.environ, PYTHONPATH=str(repo)))
    line = proc.stdout.readline()
    if not line.startswith("run-forensics app: http"):
        proc.terminate()
        raise SystemExit(f"the app did not start: {line!r}")
    return proc, f"http://localhost:{port}/"


def settle(page, label: str, timeout_ms: int = 60_000) -> float:
    """Seconds from clicking `label` in the sidebar until its page has settled."""
    t0 = time.perf_counter()
    page.locator("[data-testid='stSidebar']").get_by_text(label, exact=True).click()
    page.locator(PAGES[label]).first.wait_for(timeout=timeout_ms)
    page.wait_for_function(SETTLED, timeout=timeout_ms, polling=20)
    return time.perf_counter() - t0


def visit(page, base: str, runs: list[str], rounds: int, first: dict, later: dict) -> None:
    for run in runs:
        page.goto(f"{base}?run={run}&page=Runs")
        page.locator(PAGES["Runs"]).first.wait_for(timeout=90_000)
        page.wait_for_function(SETTLED, timeout=90_000)
        for round_ in range(rounds):
            for label in [p for p in PAGES if p != "Runs"] + ["Runs"]:
                (first if round_ == 0 else later)[label].append(settle(page, label))


def table(name: str, first: dict, later: dict, runs: int, rounds: int) -> None:
    print(f"{name}: {'page':<26} {'first visit':>12} {'median later':>13} {'worst later':>12}   ({runs} runs, "
          f"{rounds} rounds)")
    for label in PAGES:
        f, w = first[label], later[label] or first[label]
        print(f"{name}: {label:<26} {max(f):>11.2f}s {statistics.median(w):>12.2f}s {max(w):>11.2f}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path)
    parser.add_argument("--runs", nargs="+", default=["nan_lr_too_high", "resumed_after_crash", "healthy_mlp"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--against", type=Path, help="another checkout whose app is measured in turn with this one")
    args = parser.parse_args()
    db = args.db
    if db is None or not db.exists():
        db = db or Path(tempfile.mkdtemp()) / "gallery.duckdb"
        print(f"analysing the gallery into {db} ...", file=sys.stderr)
        gallery_store(db)

    from playwright.sync_api import sync_playwright

    repos = {"this": REPO, **({"against": args.against.resolve()} if args.against else {})}
    servers = {name: serve(db, args.runs[0], repo) for name, repo in repos.items()}
    results = {name: ({p: [] for p in PAGES}, {p: [] for p in PAGES}) for name in repos}
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            for run in args.runs:
                for name, (_, base) in servers.items():
                    visit(page, base, [run], args.rounds, *results[name])
            browser.close()
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(timeout=20)
    for name, (first, later) in results.items():
        table(name, first, later, len(args.runs), args.rounds)


if __name__ == "__main__":
    main()
