"""A series too long to hold whole is read reduced (forensics/judge/run.py, issue 28): the findings on the analysis
benchmark's run (benchmarks/bench_analyze.py: a decaying loss with five 6x spikes and a NaN onset near the end,
gradient norm, LR, validation loss) are the same read reduced as read whole, at a small scale: the threshold is
lowered through the analysis' own setting (`Selection.long_series`), so the same code path runs as on a run of
50M points per series."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.bench_analyze import TAGS, series_values
from forensics.services.analysis import analyze
from forensics.judge.run import Run
from forensics.judge.run import LONG_SERIES
from forensics.judge.settings import Selection
from ingest.store import connect
from tests.runwriters import write_tb

N_STEPS = 6_000
LONG = 1_000  # a series of more points is read reduced: 125 buckets of 48 steps for the 6,000-step series


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    """The benchmark's four series over N_STEPS steps, written with torch's SummaryWriter."""
    root = tmp_path_factory.mktemp("long") / "bench_run"
    vals = series_values(N_STEPS, np.random.default_rng(0)).astype(np.float64)
    steps = np.arange(N_STEPS)
    write_tb(root, {tag: (steps, vals[:, i]) for i, tag in enumerate(TAGS)})
    return root, vals


def _analyses(bench_run, tmp_path):
    root, _ = bench_run
    whole = analyze(root, tmp_path / "whole.duckdb", selection=Selection(long_series=LONG_SERIES))
    reduced = analyze(root, tmp_path / "reduced.duckdb", selection=Selection(long_series=LONG))
    return whole, reduced


def test_long_series_reduced_keeps_the_findings_of_the_whole_series(bench_run, tmp_path):
    _, vals = bench_run
    whole, reduced = _analyses(bench_run, tmp_path)
    assert "reduced" not in whole.checked
    assert set(reduced.checked["reduced"]) == {"loss/train", "grad_norm_", "lr/train__", "loss/valid"}
    assert reduced.checked["reduced"]["loss/train"] == {"n_points": N_STEPS, "buckets": LONG // 8}

    assert {f.kind for f in reduced.findings} == {f.kind for f in whole.findings}
    assert "nan_loss" in {f.kind for f in whole.findings}
    assert reduced.verdict == whole.verdict == "failed"
    onset = int(np.flatnonzero(np.isnan(vals[:, 0]))[0])
    assert [r["step"] for r in reduced.nonfinite] == [r["step"] for r in whole.nonfinite] == [onset]
    assert next(f.step for f in reduced.findings if f.kind == "nan_loss") == onset

    # Each 6x spike the whole series shows survives the reduction (M4 keeps every bucket's maximum) at its own step.
    loss_spikes = {s.step for s in whole.spikes if s.series == "loss/train"}
    assert loss_spikes and loss_spikes <= {s.step for s in reduced.spikes if s.series == "loss/train"}
    # A reduced series' findings say that their statistics saw buckets, with the numbers.
    on_loss = [f for f in reduced.findings if f.series == "loss/train"]
    assert on_loss and all(f.evidence["series_points"] == N_STEPS and f.evidence["reduced_to_buckets"] == LONG // 8
                           for f in on_loss)


def test_reduced_view_holds_a_bounded_number_of_real_points(bench_run, tmp_path):
    root, vals = bench_run
    db = tmp_path / "view.duckdb"
    analyze(root, db, selection=Selection(only=("nan_loss",), long_series=LONG))
    with connect(db, write=False) as con:
        (run_id,), = con.execute("SELECT run_id FROM runs").fetchall()
        run = Run.from_store(con, run_id, long_series=LONG)
        f = run.series("loss")
        assert run.reduced("loss/train") == {"n_points": N_STEPS, "buckets": LONG // 8}
        assert f.height <= 7 * (LONG // 8) and f.height < N_STEPS // 4
        steps, values = f["step"].to_numpy(), f["value"].to_numpy()
        assert np.all(np.diff(steps) > 0)
        fin = np.isfinite(values)  # every kept finite point is a real one, its exact value at its step
        np.testing.assert_array_equal(values[fin], vals[steps[fin], 0])
        # Each bucket's maximum is kept: the reduced series' peak is the whole series'.
        assert np.nanmax(values) == np.nanmax(vals[:, 0])
        assert run.finite_points("loss") == int(np.isfinite(vals[:, 0]).sum())
        assert run.write_order("loss/train")["step"].to_list() == [N_STEPS - 1]  # in order: only the last point


def test_restart_of_a_reduced_series_is_found_as_in_the_whole_series(tmp_path):
    """resumed_run reads write order, which a reduced view (by step) has lost: for a long series it reads the
    points around each place the steps go back from the store (`Run.write_order`), and finds the same restart."""
    import time

    root = tmp_path / "resumed"
    rng = np.random.default_rng(1)
    first, second = np.arange(0, 3_000), np.arange(2_000, 6_000)  # killed at 2,999, resumed from 2,000
    write_tb(root, {"train/loss": (first, 2 + rng.normal(0, 0.05, first.size))})
    time.sleep(1.1)  # the second process starts later: its event file's name and stamps come after the first's
    write_tb(root, {"train/loss": (second, 1 + rng.normal(0, 0.05, second.size))})
    found = {}
    for long_series in (LONG_SERIES, LONG):
        a = analyze(root, tmp_path / f"{long_series}.duckdb",
                    selection=Selection(only=("resumed_run",), long_series=long_series))
        found[long_series] = [(f.step, f.step_end, f.evidence["overlap_steps"]) for f in a.findings]
        assert ("reduced" in a.checked) == (long_series == LONG)
    assert found[LONG] == found[LONG_SERIES] == [(2_000, 2_999, 999)]
