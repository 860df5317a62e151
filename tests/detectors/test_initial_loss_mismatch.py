"""initial_loss_mismatch on real TensorBoard event files with a config naming the class count."""

import math

import numpy as np

from forensics.judge.detectors import InitialLossMismatch
from forensics.judge.detectors.base import missing_reason
from tests.runwriters import curve, load_run, write_tb



def test_fires_when_the_first_loss_is_far_above_log_c(tmp_path):
    steps, loss = curve(start=20.0, floor=0.3)
    run = load_run(write_tb(tmp_path / "r", {"train/loss": (steps, loss)}, config={"num_classes": 10}),
                   tmp_path / "f.duckdb")
    [f] = InitialLossMismatch().check(run)
    assert f.kind == "initial_loss_mismatch" and f.step == 0
    assert f.evidence["classes"] == 10 and f.evidence["direction"] == "high"
    assert math.isclose(f.evidence["ratio"], loss[0] / math.log(10), rel_tol=1e-6)


def test_fires_low_only_at_the_first_step_without_pretrained_weights(tmp_path):
    steps, loss = curve(start=0.3, floor=0.05)  # far below log(10) = 2.3 at step 0: labels leak
    run = load_run(write_tb(tmp_path / "a", {"loss": (steps, loss)}, config={"num_classes": 10}), tmp_path / "a.duckdb")
    [f] = InitialLossMismatch().check(run)
    assert f.evidence["direction"] == "low" and f.step == 0
    tuned = load_run(write_tb(tmp_path / "b", {"loss": (steps, loss)},
                              config={"num_classes": 10, "model_name_or_path": "bert-base-uncased"}), tmp_path / "b.duckdb")
    assert list(InitialLossMismatch().check(tuned)) == []  # a fine-tuned model rightly starts low
    late = load_run(write_tb(tmp_path / "c", {"loss": (steps + 500, loss)}, config={"num_classes": 10}),
                    tmp_path / "c.duckdb")
    assert list(InitialLossMismatch().check(late)) == []  # a mean over 500 steps may just be learning


def test_loss_near_log_c_is_silent_and_unknown_c_is_skipped(tmp_path):
    steps, loss = curve(start=math.log(10) * 1.05, floor=0.3)
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}, config={"num_classes": 10}), tmp_path / "f.duckdb")
    assert list(InitialLossMismatch().check(run)) == []
    bare = load_run(write_tb(tmp_path / "s", {"loss": (steps, np.asarray(loss) * 10)}), tmp_path / "s.duckdb")
    assert "class count" in missing_reason(InitialLossMismatch(), bare)


def test_a_first_window_mean_of_a_climbing_loss_says_nothing_of_init(tmp_path):
    """Logged every 10 steps, the first point is a mean over steps 1-10. With an LR too high the loss climbs
    from log(C) inside that window and goes on climbing: 5× log(C) at step 10 is growth, not the loss at init.
    The same mean followed by a falling loss (a bad final-layer init) still counts: its mean understates init."""
    steps = np.arange(10, 310, 10)
    rng = np.random.default_rng(0)
    climbing = 5 * math.log(10) * np.exp(steps / 150) * (1 + rng.normal(0, 0.1, steps.size))
    run = load_run(write_tb(tmp_path / "a", {"loss": (steps, climbing)}, config={"num_classes": 10}), tmp_path / "a.duckdb")
    assert list(InitialLossMismatch().check(run)) == []
    _, falling = curve(start=5 * math.log(10), floor=0.3, n=steps.size)
    run = load_run(write_tb(tmp_path / "b", {"loss": (steps, falling)}, config={"num_classes": 10}), tmp_path / "b.duckdb")
    [f] = InitialLossMismatch().check(run)
    assert f.step == 10 and f.evidence["first_value_may_be_window_mean"]
