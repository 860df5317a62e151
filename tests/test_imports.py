"""The analyze path stays fast: heavy libraries are imported only by the commands that need them."""

import subprocess
import sys

import pytest

from tests.paths import REAL_RUNS

HF_TSVIZ = REAL_RUNS / "hf_tsviz"  # an ordinary run: logs only (tests/conftest.py skips the tests naming it without ../shared)
HEAVY = ("torch", "scipy", "wandb", "streamlit", "plotly", "tensorboard", "tbparse", "pandas", "matplotlib")


def test_cli_and_ingest_import_no_heavy_library():
    code = (
        "import sys, forensics.cli, ingest.run, ingest.formats, ingest.store\n"
        "parser = forensics.cli.build_parser()\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"imported at start-up: {out}"


@pytest.mark.needs_shared
def test_analyze_of_an_ordinary_run_imports_no_pyarrow(tmp_path):
    """Issue 28: pyarrow's import (~40-70 ms) was part of every first answer, only to hand frames between polars and
    DuckDB, which both speak the Arrow C stream interface. A logs-only run's `analyze` (ingest, detectors, storing,
    the report) imports it no more."""
    run = HF_TSVIZ
    code = (
        "import sys\nfrom forensics import cli\n"
        f"code = cli.main(['analyze', {str(run)!r}, '--db', {str(tmp_path / 'f.duckdb')!r}])\n"
        "print('pyarrow' in sys.modules, code, file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stderr.strip().splitlines()[-1] == "False 0"


@pytest.mark.needs_shared
def test_analyze_as_its_own_process_writes_all_its_output_closes_the_store_and_keeps_its_exit_code(tmp_path):
    """Issue 28: `forensics analyze` as a process skips the interpreter's teardown (`cli._leave_now`, os._exit: 0.15 s
    of duckdb's, polars' and numpy's modules). What it printed through a pipe is whole, its exit code is the command's
    (1 under --fail-on warning, hf_tsviz has a warning), and the store was closed properly: no WAL left behind, and
    the next process reads the stored analysis."""
    import json

    run = HF_TSVIZ
    db = tmp_path / "f.duckdb"
    done = subprocess.run([sys.executable, "-m", "forensics.cli", "analyze", str(run), "--db", str(db), "--json",
                           "--fail-on", "warning"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    out = json.loads(done.stdout)
    assert out["verdict"] == "suspicious" and [f["kind"] for f in out["findings"]] == ["overfitting"]
    assert not (tmp_path / "f.duckdb.wal").exists()
    runs = subprocess.run([sys.executable, "-m", "forensics.cli", "runs", "--db", str(db), "--json"],
                          capture_output=True, text=True, timeout=300, check=True)
    assert [r["name"] for r in json.loads(runs.stdout)["runs"]] == ["hf_tsviz"]
