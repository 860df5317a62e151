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
