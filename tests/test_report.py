"""Issue 13: output a user reads at 3 a.m. — numbers for people, spikes explained, "could not check" as one line in
the user's terms, the database named, header rows, colliding run names told apart, checkpoints counted as analyze
counts them, --version and `python -m forensics`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from forensics.cli import main
from tests.runwriters import curve, write_tb

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "sample_runs" / "runs" / "nan_lr_too_high"


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory):
    """The demo run ingested once for this module (its checkpoints and batches take a few seconds)."""
    db = tmp_path_factory.mktemp("demo") / "f.duckdb"
    assert main(["ingest", str(DEMO), "--db", str(db), "--quiet", "--json"]) == 0
    return db


def test_text_numbers_are_for_people(demo_db, capsys):
    assert main(["analyze", str(DEMO), "--db", str(demo_db)]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0].startswith("nan_lr_too_high: FAILED (") and lines[1].startswith("earliest cause: ")
    assert not re.search(r"×\d{5,}|×[\d.]+e\+|\d\.\de\+\d\d× log|\b1 (points|tensors|layers)\b|layer\(s\)", text)
    assert re.search(r"back within (1 point\b|([2-9]|\d\d+) points)", text)  # counted, singular or plural
    assert re.search(r"\(×\d(\.\d)?e\d+, Mann–Kendall", text)  # the divergence's growth, as ×3.3e28
    assert lines[-1] == f"database: {demo_db}"


def test_spikes_are_explained_and_could_not_check_is_one_line(demo_db, capsys):
    assert main(["analyze", str(DEMO), "--db", str(demo_db)]) == 0
    text = capsys.readouterr().out
    [spikes] = [line for line in text.splitlines() if "spikes" in line]
    assert spikes.startswith("other spikes (") and "came straight back" in spikes
    assert "train/grad_norm at step 14" in spikes  # a grad-norm blip that came straight back
    assert "train/loss" not in spikes  # the loss spikes at 47 and 63 are findings already
    [could] = [line for line in text.splitlines() if line.startswith("could not check")]
    said = re.match(r"could not check: (\d+) of \d+ detectors lacked what they need .*-v lists why$", could)
    assert said and int(said.group(1)) >= 5

    assert main(["analyze", str(DEMO), "--db", str(demo_db), "-v"]) == 0
    verbose = capsys.readouterr().out
    listed = verbose[verbose.index("could not check:\n"):].splitlines()[1:-1]
    assert len(listed) == int(said.group(1)) and all(re.match(r"  [a-z_]+: \S", line) for line in listed)
    assert not re.search(r"DECISIONS|§|issue\b", verbose)


def test_checkpoints_count_model_values_as_analyze_does(demo_db, capsys):
    assert main(["analyze", str(DEMO), "--db", str(demo_db), "--json"]) == 0
    [nf] = [f for f in json.loads(capsys.readouterr().out)["findings"] if f["kind"] == "nonfinite_weights"]
    assert main(["checkpoints", str(DEMO), "--db", str(demo_db), "--quiet"]) == 0
    text = capsys.readouterr().out
    n, values = nf["evidence"]["n_tensors"], nf["evidence"]["nonfinite_elements"]
    assert f"{values:,} NaN/Inf values in {n} model tensors (" in text
    assert "NaN/Inf also in 6 optimizer tensors" in text  # SGD momentum buffers of the same six parameters
    assert main(["checkpoints", str(DEMO), "--db", str(demo_db), "--quiet", "--top", "0"]) == 0
    text = capsys.readouterr().out
    assert "nothing moved" not in text and "biggest movers" not in text and "→" not in text
    assert main(["checkpoints", str(DEMO), "--db", str(demo_db), "--top", "-1"]) == 2
    assert "expected 0 or more" in capsys.readouterr().err


def test_version_and_python_m_forensics(capsys):
    from forensics import __version__

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"forensics {__version__}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "forensics", "rules", "--help"], capture_output=True, text=True,
                          env=env, check=False)
    assert done.returncode == 0 and done.stdout.startswith("usage: forensics rules")
    assert done.stdout.rstrip().endswith("forensics rules --json")


def test_rules_has_a_header_row(capsys):
    assert main(["rules"]) == 0
    assert capsys.readouterr().out.splitlines()[0].split() == ["kind", "status", "summary"]


def test_runs_has_a_header_and_tells_colliding_names_apart(tmp_path, capsys):
    for exp in ("exp_a", "exp_b"):
        write_tb(tmp_path / exp / "lightning_logs" / "version_0", {"train/loss": curve(n=30)})
    write_tb(tmp_path / "solo", {"train/loss": (np.arange(30), np.linspace(2, 1, 30))})
    db = str(tmp_path / "f.duckdb")
    for run in ("exp_a/lightning_logs/version_0", "exp_b/lightning_logs/version_0", "solo"):
        assert main(["ingest", str(tmp_path / run), "--db", db, "--quiet"]) == 0
    capsys.readouterr()
    assert main(["runs", "--db", db]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:6] == ["id", "run", "points", "series", "problems", "sources"]
    body = "\n".join(lines[1:])
    assert str(tmp_path / "exp_a" / "lightning_logs" / "version_0") in body
    assert str(tmp_path / "exp_b" / "lightning_logs" / "version_0") in body
    assert re.search(r"^\w{10}  solo ", body, re.MULTILINE)  # a unique name stays short
    assert lines[-1] == f"database: {db}"


# -- issue 25: events, reprs, plurals, the home folder --------------------------------------------------------

def test_events_are_numbered_from_1_and_a_spike_inside_a_divergence_joins_it(demo_db, capsys):
    """Issue 25: event ids had gaps (events of lone spikes took numbers first), and the loss spikes at steps 47
    and 63, inside the divergence of steps 33-79 that ends in the NaN, were events of their own."""
    assert main(["analyze", str(DEMO), "--db", str(demo_db), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    events = sorted({f["event"] for f in out["findings"]})
    assert events == list(range(1, len(events) + 1))
    assert list(dict.fromkeys(f["event"] for f in out["findings"])) == events  # first met in step order
    by_kind = {f["kind"]: f for f in out["findings"]}
    spikes = [f for f in out["findings"] if f["kind"] == "loss_spike"]
    assert [s["step"] for s in spikes] == [47, 63]
    assert {s["event"] for s in spikes} == {by_kind["divergence"]["event"]} == {by_kind["nan_loss"]["event"]}


def test_verbose_text_and_markdown_hold_no_python_reprs(demo_db, tmp_path, capsys):
    """Issue 25: evidence printed `None`, `True` and `['5.99', ...]`; the app an empty list as `****`."""
    from forensics.judge import numbers

    assert main(["analyze", str(DEMO), "--db", str(demo_db), "-v", "--markdown", str(tmp_path / "d.md")]) == 0
    text = capsys.readouterr().out + (tmp_path / "d.md").read_text()
    assert "evidence: " in text and "Evidence: " in text
    assert not re.search(r"\bNone\b|\bTrue\b|\bFalse\b|\['|\[\d|\*\*\*\*", text)
    assert [numbers.shown(v) for v in (None, True, [], [5.991234, 7], 0.000123456, {"a": None})] == [
        "none", "yes", "none", "5.991, 7", "1.235e-4", "a none"]
    assert numbers.shown(list(range(20))).endswith(", … (20 in all)")


def test_one_other_series_was_read():
    """Issue 25: "1 other series were read"."""
    from forensics.judge.findings import Analysis
    from forensics.judge.verdict import judge

    a = Analysis(run="r", run_id="r1")
    a.checked = {"n_series": 1}
    v = judge(a, selected=["flat_loss"], loss_detectors=["flat_loss"], restricted=False, loss_points=None,
              read_problems=[])
    assert "1 other series was read" in v.reason
    a.checked = {"n_series": 3}
    assert "3 other series were read" in judge(a, selected=["flat_loss"], loss_detectors=["flat_loss"],
                                               restricted=False, loss_points=None, read_problems=[]).reason


def test_one_dead_layer_is_one_layer(tmp_path):
    """Issue 25: "1 layers end with ≥50% dead units"."""
    from forensics.judge.detectors import DeadRelu
    from tests.runwriters import load_run

    steps = np.arange(0, 500, 10)
    run = load_run(write_tb(tmp_path / "r", {"train/loss": curve(n=50), "activations/fc1/dead_fraction": (steps, np.full(50, 0.9))}),
                   tmp_path / "f.duckdb")
    [f] = DeadRelu().check(run)
    assert f.summary.startswith("1 layer ends with ≥"), f.summary


def test_paths_below_home_are_shown_with_a_tilde(tmp_path, monkeypatch, capsys):
    """The `database:` line and the replay command print ~ for the home folder, as the README shows; the default
    store's replay command names no --db (the README's sample), another store's does."""
    from forensics.judge.numbers import home, shell_path

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("FORENSICS_DB", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    default = tmp_path / ".cache" / "run-forensics" / "forensics.duckdb"
    assert home(default) == "~/.cache/run-forensics/forensics.duckdb"
    assert home("/elsewhere/f.duckdb") == "/elsewhere/f.duckdb"
    assert shell_path(tmp_path / "my runs" / "f.duckdb") == "~/'my runs/f.duckdb'"

    (tmp_path / "stores").mkdir()  # a --db goes in a folder that exists
    assert main(["analyze", str(DEMO), "--db", str(tmp_path / "stores" / "f.duckdb")]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[-1] == "database: ~/stores/f.duckdb"
    assert "--step" in text and "--db ~/stores/f.duckdb" in text  # the replay command, as a shell expands it

    assert main(["analyze", str(DEMO)]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[-1] == "database: ~/.cache/run-forensics/forensics.duckdb"
    assert "--step" in text and "--db" not in text


def test_ingest_of_one_file_says_one_file(tmp_path, capsys):
    """Issue 25's plurals, in `forensics ingest`'s line: "from 1 files"."""
    steps, loss = curve(n=20)
    run = write_tb(tmp_path / "r", {"train/loss": (steps, loss)})
    assert main(["ingest", str(run), "--db", str(tmp_path / "f.duckdb"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"new points from 1 file \[", out), out


def test_one_markdown_policy_makes_file_text_inert():
    """`render.md` is the one escaping every markdown face uses: a name from a file cannot open a table cell, a
    heading, a link, a code span or HTML; `render.fenced` picks a fence no line from a file can close."""
    from forensics.text.render import fenced, md

    hostile = "loss | x `code` <script>alert(1)</script> [a](b) *e* # h\nnext"
    out = md(hostile)
    assert "|" not in out.replace("\\|", "") and "<" not in out and "`" not in out.replace("\\`", "")
    assert "\n" not in out and "\\[a\\](b)" in out and "\\*e\\*" in out
    block = fenced(["ok", "a ```` run"])
    assert block[0] == block[-1] == "`````" and block[1:-1] == ["ok", "a ```` run"]
    assert fenced(["plain"])[0] == "```"


def test_markdown_faces_share_the_policy():
    """The report, probe and replay markdown and the app import the one function, none keeps its own."""
    import ast

    for rel in ("forensics/text/report.py", "forensics/usercode/probe/report.py",
                "forensics/usercode/replay/report.py", "app/pages.py"):
        tree = ast.parse((REPO / rel).read_text(encoding="utf-8"))
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                    and n.module == "forensics.text.render" for a in n.names}
        defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert "md" in imported or "fenced" in imported, rel
        assert not {"md", "_md", "escape_md"} & defined, rel


@pytest.mark.parametrize("command", [["rules"], ["rules", "--json"], ["runs"]])
@pytest.mark.parametrize("stream", ["closed", "full"])
def test_a_closed_or_full_standard_output_is_one_line_and_exit_74(tmp_path, command, stream):
    """`forensics rules >&-` and `> /dev/full` ended in a traceback and exit 1: now one line on stderr and the
    documented code, in the real CLI as a process."""
    if stream == "full" and not Path("/dev/full").exists():
        pytest.skip("this system has no /dev/full")
    args = [sys.executable, "-m", "forensics", *command, *(["--db", str(tmp_path / "f.duckdb")] if command == ["runs"]
                                                          else [])]
    if command == ["runs"]:
        subprocess.run([sys.executable, "-m", "forensics", "ingest", str(DEMO), "--db", str(tmp_path / "f.duckdb"),
                        "--quiet"], cwd=REPO, check=True, capture_output=True, timeout=300)
    with open("/dev/full", "w") if stream == "full" else open(os.devnull) as out:
        done = subprocess.run(args, cwd=REPO, stdout=out if stream == "full" else subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, timeout=300,
                              preexec_fn=(lambda: os.close(1)) if stream == "closed" else None)
    assert done.returncode == 74, done.stderr
    assert done.stderr.strip().startswith("forensics: could not write the output") and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    help_text = subprocess.run([sys.executable, "-m", "forensics", command[0], "--help"], cwd=REPO,
                               capture_output=True, text=True, timeout=120).stdout
    assert "74 the output could not be written" in help_text
