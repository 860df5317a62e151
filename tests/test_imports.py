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
    """Issue 28: `forensics analyze` as a process skips the interpreter's teardown (`services.process.leave_now`, os._exit: 0.15 s
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


def _as_own_process(setup: str, argv: list[str]) -> subprocess.CompletedProcess:
    """`main()` as a process's own command, after `setup` (which may replace a command); an exit handler says
    whether the interpreter's teardown ran."""
    code = ("import atexit, sys\nfrom forensics import cli\nfrom forensics.services import process\n"
            "atexit.register(lambda: print('teardown', flush=True))\n" + setup +
            f"sys.argv = ['forensics', *{argv!r}]\nsys.exit(cli.main())\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_the_process_ends_without_teardown_only_when_the_command_says_it_is_done():
    """The process policy follows what the command returns: `Done(code)` (nothing of it left running) ends the process
    at once, with its code; a plain exit code leaves the process to the interpreter's teardown."""
    done = _as_own_process("cli.COMMANDS['rules'] = cli.Command(lambda args: cli.Done(3))\n", ["rules"])
    assert (done.returncode, done.stdout) == (3, "")
    plain = _as_own_process("cli.COMMANDS['rules'] = cli.Command(lambda args: 3)\n", ["rules"])
    assert (plain.returncode, plain.stdout) == (3, "teardown\n")
    real = _as_own_process("", ["rules", "--json"])
    assert real.returncode == 0 and "teardown" not in real.stdout and real.stdout.lstrip().startswith(("[", "{"))


def test_freed_arrays_go_back_at_once_only_in_a_process_whose_command_judges_runs():
    """glibc's mmap threshold is the process's policy, set by main for a command that judges runs (analyze, watch) and
    left alone for one that runs the user's model (replay, probe) or a library caller."""
    show = "print('returned' if process._FREED_ARRAYS_RETURNED else 'left', flush=True) or 0"
    judging = _as_own_process(f"cli.COMMANDS['runs'] = cli.Command(lambda args: {show}, judges=True)\n", ["runs"])
    assert judging.stdout.splitlines()[0] == "returned", judging.stderr
    other = _as_own_process(f"cli.COMMANDS['runs'] = cli.Command(lambda args: {show})\n", ["runs"])
    assert other.stdout.splitlines()[0] == "left", other.stderr
    assert {n for n, c in __import__("forensics.cli", fromlist=["COMMANDS"]).COMMANDS.items() if c.judges} == {
        "analyze", "watch"}
