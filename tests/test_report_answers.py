"""The report carries what replay and probe learned: after `forensics replay` or `forensics probe`, `analyze` (--json,
text, --markdown) shows the stored answer under the finding it explains, with when it ran, leads the headline's
"check first" with it, and stops asking to run it again until a file of the run changes.

Gallery runs are copied to tmp_path (with their mtimes), so touching a file cannot change the committed gallery.
"""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest

torch = pytest.importorskip("torch")

from forensics.cli import main  # noqa: E402
from tests.paths import REPO  # noqa: E402

GALLERY = REPO / "sample_runs" / "runs"


def _analyze(capsys, run, db, *more: str) -> dict | str:
    capsys.readouterr()
    assert main(["analyze", str(run), "--db", str(db), *more]) == 0
    out = capsys.readouterr().out
    return json.loads(out) if "--json" in more else out


def _only(findings: list[dict], kind: str) -> dict:
    hits = [f for f in findings if f["kind"] == kind]
    assert len(hits) == 1, [f["kind"] for f in findings]
    return hits[0]


def test_a_stored_replay_sits_under_the_nan_finding_and_the_report_stops_asking_for_it(tmp_path, capsys):
    """A forward-pass NaN from log(0) in the model's head: the replay's op, module, file:line and culprit sample
    show under nan_loss and lead the headline's checks; the replay command is gone until a log file changes."""
    run = shutil.copytree(GALLERY / "nan_log_zero", tmp_path / "nan_log_zero")
    db = tmp_path / "f.duckdb"
    before = _analyze(capsys, run, db, "--json")
    assert before["replay_from"]["command"] and before["answers"] == {"replays": [], "probe": None}
    assert "replay" not in _only(before["findings"], "nan_loss")

    assert main(["replay", str(run), "--db", str(db), "--json"]) == 0
    stored = json.loads(capsys.readouterr().out)
    after = _analyze(capsys, run, db, "--json")
    v = _only(after["findings"], "nan_loss")["replay"]
    hit = stored["first_nonfinite"]
    assert (v["phase"], v["op"], v["module"]) == ("forward", "log", "head") == (hit["phase"], hit["op"], hit["module"])
    assert v["file"].endswith("forensics_entry.py") and v["line"] == hit["line"]
    assert v["culprit_samples"] == stored["culprit_samples"] and v["culprit_samples"]
    assert v["step"] == stored["step"] and v["ran"] and v["changed"] is False
    assert "replay" not in _only(after["findings"], "nonfinite_weights")
    assert after["answers"]["replays"][0]["replay_id"] == stored["replay_id"]
    assert "command" not in after["replay_from"]
    checks = after["headline"]["check_first"]
    assert checks[0].startswith("log in head at ") and "replay" in checks[0]
    assert not any("replay the step" in c for c in checks)

    text = _analyze(capsys, run, db)
    assert "forensics replay" not in text and "replay starting point" not in text
    assert f"replay of step {v['step']} (ran {v['ran']})" in text and "first non-finite value: forward: log in head" in text
    md = tmp_path / "d.md"
    _analyze(capsys, run, db, "--markdown", str(md))
    assert "forward: log in head" in md.read_text()

    # A log written after the replay: its answer may be out of date, so the report asks for it again.
    log = next(run.glob("wandb/*/*.wandb"))
    later = time.time() + 5
    os.utime(log, (later, later))
    changed = _analyze(capsys, run, db, "--json")
    v = _only(changed["findings"], "nan_loss")["replay"]
    assert v["changed"] is True and changed["replay_from"]["command"]
    assert not changed["headline"]["check_first"][0].startswith("log in head")


def test_a_failed_output_head_probe_names_the_softmax_in_the_headline(tmp_path, capsys):
    """A softmax before CrossEntropyLoss: after `forensics probe`, the plateau carries the failed checks with when
    they ran, the headline's first check names the softmax, and the probe command is no longer printed."""
    run = shutil.copytree(GALLERY / "plateau_double_softmax", tmp_path / "plateau_double_softmax")
    db = tmp_path / "f.duckdb"
    assert _analyze(capsys, run, db, "--json")["probe_command"]
    assert main(["probe", str(run), "--db", str(db), "--json"]) == 0
    capsys.readouterr()
    after = _analyze(capsys, run, db, "--json")
    p = _only(after["findings"], "plateau")["probe"]
    failed = {c["name"]: c for c in p["failed"]}
    assert {"output_head", "overfit_one_batch"} <= set(failed) and p["ran"] and p["changed"] is False
    assert failed["output_head"]["names"] == ["softmax"]
    assert after["probe_command"] is None
    assert "softmax" in after["headline"]["check_first"][0] and "output_head" in after["headline"]["check_first"][0]
    assert after["answers"]["probe"]["counts"]["fail"] == len(p["failed"])
    text = _analyze(capsys, run, db)
    assert "probe output_head FAILED (ran " in text and "forensics probe" not in text


def test_a_stored_likely_fix_follows_the_op_in_the_headline(tmp_path, capsys):
    """A replay result that names a likely fix (the change that kept the failing window finite): the finding
    carries it and the headline's check first names the op, then the fix."""
    from ingest.store import connect
    from ingest.writes import insert_replay

    run = GALLERY / "nan_lr_too_high"
    db = tmp_path / "f.duckdb"
    before = _analyze(capsys, run, db, "--json")
    onset = _only(before["findings"], "nan_loss")
    result = {"run": "nan_lr_too_high", "run_id": _run_id(db),
              "step": onset["step"], "bad_step": onset["step"], "status": "diagnosed", "from_checkpoint": "x.pt",
              "first_nonfinite": {"phase": "forward", "op": "linear", "module": "body.fc2", "file": "train.py",
                                  "line": 12},
              "culprit_samples": [], "counterfactuals": [
                  {"change": "lr_div_10", "applicable": True, "finite": True, "loss": 1.2, "window": [61, 80]}],
              "likely_fix": {"change": "lr_div_10", "window": [61, 80],
                             "evidence": "lr_div_10 keeps steps 61-80 finite: loss 1.6 at step 61 → 1.2 at step 80"}}
    with connect(db, write=True) as con:
        insert_replay(con, result)
    after = _analyze(capsys, run, db, "--json")
    v = _only(after["findings"], "nan_loss")["replay"]
    assert v["likely_fix"]["change"] == "lr_div_10" and v["fixed_by"] == "lr_div_10"
    head = after["headline"]
    assert head["event"] == onset["event"]  # the headline is of the NaN's event, which the replay explains
    assert head["check_first"][0].startswith("linear in body.fc2 at train.py:12")
    assert head["check_first"][1].startswith("lr_div_10, the likely fix replay found")
    assert "likely fix: lr_div_10: lr_div_10 keeps steps 61-80 finite" in _analyze(capsys, run, db)


def _run_id(db) -> str:
    from ingest.store import connect

    with connect(db, write=False) as con:
        return con.execute("SELECT run_id FROM runs").fetchone()[0]
