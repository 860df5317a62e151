"""The analyze path stays fast: heavy libraries are imported only by the commands that need them."""

import subprocess
import sys

HEAVY = ("torch", "scipy", "wandb", "streamlit", "plotly", "tensorboard", "tbparse", "pandas", "matplotlib")


def test_cli_and_ingest_import_no_heavy_library():
    code = (
        "import sys, forensics.cli, ingest.run, ingest.formats, ingest.store\n"
        "parser = forensics.cli.build_parser()\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"imported at start-up: {out}"


def test_analyze_of_an_ordinary_run_imports_no_pyarrow(tmp_path):
    """Issue 28: pyarrow's import (~40-70 ms) was part of every first answer, only to hand frames between polars and
    DuckDB, which both speak the Arrow C stream interface. A logs-only run's `analyze` (ingest, detectors, storing,
    the report) imports it no more."""
    from tests.paths import REAL_RUNS

    run = REAL_RUNS / "hf_tsviz"
    if not run.is_dir():
        import pytest

        pytest.skip(f"the shared real runs are not beside the checkout ({run})")
    code = (
        "import sys\nfrom forensics import cli\n"
        f"code = cli.main(['analyze', {str(run)!r}, '--db', {str(tmp_path / 'f.duckdb')!r}])\n"
        "print('pyarrow' in sys.modules, code, file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stderr.strip().splitlines()[-1] == "False 0"
