"""The axis rule (DECISIONS §16, issue 12 class 3): which series of a role detectors may read."""

import numpy as np
import polars as pl

from forensics.judge.run import META_SCHEMA, usable_series
from tests.runwriters import curve, load_run, write_tb


def _meta(rows: list[dict]) -> pl.DataFrame:
    base = {"series_id": 0, "grp": "", "tag": "", "name": "", "role": "train_loss", "split": None, "layer": None,
            "canonical": True, "ordinal": False, "n_points": 10, "n_nonfinite": 0, "format": "tensorboard"}
    return pl.DataFrame([{**base, "series_id": i, **r} for i, r in enumerate(rows)], schema=META_SCHEMA)


def test_console_copy_drops_out_beside_a_structured_series():
    meta = _meta([{"name": "train_loss", "format": "wandb", "n_points": 158},
                  {"name": "Loss", "format": "console", "ordinal": True, "n_points": 5000}])
    assert usable_series(meta, "train_loss")["name"].to_list() == ["train_loss"]


def test_ordinal_axis_drops_out_beside_logged_steps_of_the_same_role():
    meta = _meta([{"name": "loss", "format": "console", "ordinal": True, "n_points": 900},
                  {"name": "train loss", "format": "console", "ordinal": False, "n_points": 30}])
    assert usable_series(meta, "train_loss")["name"].to_list() == ["train loss"]


def test_a_role_only_the_console_has_is_kept():
    meta = _meta([{"name": "loss", "format": "wandb"},
                  {"name": "loss_scale", "role": "loss_scale", "format": "console", "ordinal": True}])
    assert usable_series(meta, "loss_scale")["name"].to_list() == ["loss_scale"]
    assert usable_series(meta, "train_loss")["name"].to_list() == ["loss"]


def test_console_log_beside_tensorboard_does_not_become_the_loss(tmp_path):
    steps, loss = curve(n=50)
    root = write_tb(tmp_path / "r", {"loss": (steps, loss)})
    # a console log of the same run, printed every batch with no step: more points, ordinal steps
    lines = [f"epoch {e} | Loss: {v:.4f}" for e in range(5) for v in np.linspace(3.0, 0.1, 200)]
    (root / "train.log").write_text("\n".join(lines) + "\n")
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.pick("loss") == "loss" and run.format_of(run.pick("loss")) == "tensorboard"
    assert run.last_step() == int(steps[-1])


def test_a_summary_s_one_last_value_displaces_no_console_curve():
    meta = _meta([{"name": "loss", "format": "wandb_summary", "n_points": 1},
                  {"name": "loss", "format": "console", "n_points": 400}])
    assert sorted(usable_series(meta, "train_loss")["n_points"].to_list()) == [1, 400]


def _epoch_log(root, epochs):
    """A console log written by Python's logging: `Epoch: E, Step: S, loss: V` with a batch counter S that starts
    again at 0 every epoch (no global step printed)."""
    import logging

    root.mkdir(parents=True)
    logger = logging.getLogger(f"axes.{root.name}")
    handler = logging.FileHandler(root / "train.log")
    handler.setFormatter(logging.Formatter("%(asctime)s : %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    for e, values in enumerate(epochs, 1):
        for k, v in enumerate(values):
            logger.info(f"Epoch: {e}, Step: {k * 200}, loss: {v:.5f}")
    handler.close()
    logger.removeHandler(handler)
    return root


def test_a_counter_that_starts_again_every_epoch_is_read_pass_after_pass(tmp_path, capsys):
    """Epochs of 30, 30, 26 and 5 batches, each counting from step 0: one row per step (the last written wins, as a
    resume overwrites) would make one curve out of the last epoch's steps filled in by earlier ones. The passes
    follow one another instead, and a finding says where it is in the writer's words. A ×100 excursion in the third
    epoch that the loss comes back from is a spike, never a divergence."""
    import json

    from forensics.cli import main

    rng = np.random.default_rng(3)
    lengths, level = (30, 30, 26, 5), [0.7, 0.3, 0.15, 0.1]
    epochs = [lv * (1 + rng.normal(0, 0.05, n)) for lv, n in zip(level, lengths)]
    epochs[2][10] = 19.5  # one display far above, then back
    root = _epoch_log(tmp_path / "r", epochs)
    run = load_run(root, tmp_path / "f.duckdb")
    s, v = run.arrays("loss")
    assert s.size == sum(lengths) and np.all(np.diff(s) > 0)  # one pass after another, never overwritten
    assert np.allclose(v, np.concatenate(epochs), rtol=1e-4)
    assert run.writer_positions(run.pick("loss"), [int(s[30])]) == {int(s[30]): "epoch 2, batch 0"}
    capsys.readouterr()
    main(["analyze", str(root), "--db", str(tmp_path / "a.duckdb"), "--json"])
    found = {f["kind"]: f for f in json.loads(capsys.readouterr().out)["findings"]}
    assert "divergence" not in found and "resumed_run" not in found
    assert found["loss_spike"]["at"] == "epoch 3, batch 2000"  # the reader keeps the batch within its epoch


def test_launches_appended_to_one_log_are_no_spikes(tmp_path, capsys):
    """Three launches of one script appended to one log, each counting from step 0 and starting again at the loss a
    fresh model has: where each begins, the loss jumps back up ×15 and falls again. A new launch, not a spike, a
    divergence or a resume."""
    import json

    from forensics.cli import main

    rng = np.random.default_rng(4)
    launches = [6.1 * np.exp(-np.arange(n) / 4) + 0.35 + rng.normal(0, 0.01, n) for n in (30, 30, 40)]
    root = _epoch_log(tmp_path / "r", launches)
    main(["analyze", str(root), "--db", str(tmp_path / "a.duckdb"), "--json"])
    kinds = {f["kind"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert not kinds & {"loss_spike", "divergence", "resumed_run"}
