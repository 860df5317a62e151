"""Every real public log in ../shared/real_runs ingests through the CLI, and its analysis shows what
../shared/real_runs/labels.json says the run shows (a development set, DECISIONS.md §17)."""

import json

import pytest

from forensics.cli import main
from tests.paths import REAL_RUNS

RUNS = sorted(p for p in REAL_RUNS.iterdir() if p.is_dir()) if REAL_RUNS.is_dir() else []
pytestmark = pytest.mark.skipif(not RUNS, reason=f"no real runs at {REAL_RUNS} (../shared beside the checkout)")


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return tmp_path_factory.mktemp("real") / "real.duckdb"


@pytest.mark.parametrize("run", RUNS, ids=[p.name for p in RUNS])
def test_real_run_ingests_every_file(run, db, capsys):
    assert main(["ingest", str(run), "--db", str(db), "--quiet", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["runs"][0]
    assert report["points"] > 0
    read = {s["path"] for s in report["sources"]}
    assert read == {p.name for p in run.iterdir()}, f"not read: {report['unknown_files']}"
    assert not [i for i in report["issues"] if i["kind"] in ("garbled", "crc_mismatch", "not_this_format")]


LABELS = json.loads((REAL_RUNS / "labels.json").read_text()) if (REAL_RUNS / "labels.json").is_file() else {}

# Labelled pathologies the engine does not report yet (measured on this branch). Each is a strict xfail: when a
# detector learns to see it, the test passes, pytest reports XPASS as a failure, and the entry goes.
KNOWN_MISSES: dict[tuple[str, str], str] = {}
# Healthy runs where the engine raises a warning (false alarms, DECISIONS.md §8: precision counts).
KNOWN_FALSE_ALARMS: dict[str, str] = {}
# Where a label names the step of the first non-finite loss in the writer's own numbering.
NAN_STEP_KEYS = ("first_nan_iter", "inf_iteration")


@pytest.fixture(scope="module")
def analyses(db):
    """`forensics analyze --json` of each labelled real run, once per run."""
    cache: dict[str, dict] = {}

    def get(name: str) -> dict:
        if name not in cache:
            import contextlib
            import io

            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                assert main(["analyze", str(REAL_RUNS / name), "--db", str(db), "--json"]) == 0
            cache[name] = json.loads(buf.getvalue())
        return cache[name]

    return get


def _cases(kinds: bool):
    out = []
    for name, label in sorted(LABELS.items()):
        if not (REAL_RUNS / name).is_dir():
            continue
        if not kinds:
            out.append(pytest.param(name, id=name))
            continue
        for kind in label["pathologies"]:
            if kind == "healthy":
                continue
            miss = KNOWN_MISSES.get((name, kind))
            marks = [pytest.mark.xfail(strict=True, reason=f"engine misses it: {miss}")] if miss else []
            out.append(pytest.param(name, kind, id=f"{name}-{kind}", marks=marks))
    return out


@pytest.mark.parametrize("name", _cases(kinds=False))
def test_real_run_reads_its_training_loss(name, analyses):
    """Every labelled run logs a training loss: the analysis must have read one (never a verdict from nothing)."""
    out = analyses(name)
    assert "loss" in out["checked"]["series"], out["checked"]
    assert out["verdict"] in ("failed", "suspicious", "inconclusive", "healthy") and out["verdict_reason"]
    assert out["healthy"] == (out["verdict"] == "healthy")


@pytest.mark.parametrize("name,kind", _cases(kinds=True))
def test_real_run_shows_its_labelled_pathology(name, kind, analyses):
    found = {f["kind"]: f for f in analyses(name)["findings"]}
    assert kind in found, f"labelled {kind}; found {sorted(found)}"
    label = LABELS[name]
    for key in NAN_STEP_KEYS:
        if kind == "nan_loss" and key in label["key_steps"]:
            assert found[kind]["step"] == label["key_steps"][key]


HEALTHY = [n for n, label in sorted(LABELS.items()) if label["pathologies"] == ["healthy"] and (REAL_RUNS / n).is_dir()]


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_real_run_has_no_critical_finding(name, analyses):
    assert [f for f in analyses(name)["findings"] if f["severity"] == "critical"] == []


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.xfail(strict=True, reason=KNOWN_FALSE_ALARMS[n])]
                                               if n in KNOWN_FALSE_ALARMS else []) for n in HEALTHY])
def test_healthy_real_run_has_no_finding(name, analyses):
    out = analyses(name)
    assert out["findings"] == [] and out["healthy"] is True


def test_an_ordinal_step_is_shown_in_the_writers_own_counters(analyses, db, capsys):
    """MXNet's Speedometer prints `Epoch[1] Batch[7] Speed: ... IDLoss=nan` and no global step, so the lines sit
    on an ordinal axis (DECISIONS §2) and the NaN is the 7th record, ordinal step 6. A user reads `Batch[7]` in
    the log: the report says so beside the step, in the JSON and in the text."""
    if not (REAL_RUNS / "log_byteps411").is_dir():
        pytest.skip("shared/real_runs/log_byteps411 is not beside the checkout")
    out = analyses("log_byteps411")
    [nan] = [f for f in out["findings"] if f["kind"] == "nan_loss"]
    assert (nan["step"], nan["at"]) == (6, "epoch 1, batch 7")
    assert out["nonfinite"][0]["at"] == "epoch 1, batch 7"
    assert main(["analyze", str(REAL_RUNS / "log_byteps411"), "--db", str(db)]) in (0, 1)
    text = capsys.readouterr().out
    assert "log_byteps411:6 (epoch 1, batch 7) nan_loss" in text and "nan at step 6 (epoch 1, batch 7)" in text
    logged = analyses("log_nanogpt215")  # a console log that prints its own iteration: nothing to add
    assert all("at" not in f for f in logged["findings"]) and "at" not in logged["nonfinite"][0]
