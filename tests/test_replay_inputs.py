"""What replay starts from, read through ingest (issue 25): the one table of checkpoint layouts (a torch dict keyed
`net`, Lightning's `step=N` numbering without a hint from the entry point), the run's config as ingest reads it (a
Lightning hparams file with Python tags), and the step asked for (negative or past the run's end is one line)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from forensics.cli import main
from tests.paths import REPO

torch = pytest.importorskip("torch")

RUNS = REPO / "sample_runs" / "runs"
TRUTH = json.loads((REPO / "sample_runs" / "ground_truth.json").read_text())["runs"]


def copy_run(tmp_path: Path, name: str) -> Path:
    dst = tmp_path / name
    shutil.copytree(RUNS / name, dst)
    return dst


def replay(run: Path, tmp_path: Path, capsys, *extra: str) -> tuple[int, dict | None, str]:
    code = main(["replay", str(run), "--db", str(tmp_path / "f.duckdb"), "--json", *extra])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 else None), out.err


def set_step_numbering(run: Path, value: str | None) -> None:
    """Rewrite the entry point's step_options to say `value` (None: say nothing) about checkpoint numbering."""
    entry = run / "forensics_entry.py"
    text = entry.read_text()
    said = ', "step_numbering": "checkpoint_before_step"'
    assert said in text
    entry.write_text(text.replace(said, "" if value is None else f', "step_numbering": "{value}"'))


def assert_gallery_diagnosis(r: dict, name: str) -> None:
    truth = TRUTH[name]["replay"]
    assert r["fidelity"]["faithful"] is True and r["reproduced"] is True
    assert r["from_checkpoint"] == truth["checkpoint"]
    assert r["bad_step"] == truth["first_nonfinite_step"]
    hit = r["first_nonfinite"]
    assert (hit["phase"], hit["op"], hit["module"]) == (truth["phase"], truth["op"], truth["module"])


@pytest.mark.parametrize("numbering", [None, "lightning", "checkpoint_before_step"])
def test_lightning_checkpoint_numbering_comes_from_the_layout(numbering, tmp_path, capsys):
    """Issue 25: Lightning's `step=224` file holds the state before logged step 224. Without a hint, and with
    `"lightning"` (replayed from the wrong step and reported unfaithful before), the replay starts at 224."""
    run = copy_run(tmp_path, "nan_bad_sample")
    set_step_numbering(run, numbering)
    code, r, err = replay(run, tmp_path, capsys)
    assert code == 0, err
    assert r["replayed_steps"][0] == TRUTH["nan_bad_sample"]["replay"]["checkpoint_step"]
    assert_gallery_diagnosis(r, "nan_bad_sample")


def test_unknown_step_numbering_is_an_error_naming_the_accepted_ones(tmp_path, capsys):
    run = copy_run(tmp_path, "nan_bad_sample")
    set_step_numbering(run, "before")
    code, r, err = replay(run, tmp_path, capsys)
    assert code == 2 and r is None
    assert "'before'" in err and "checkpoint_before_step" in err and "checkpoint_after_step" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_checkpoint_keyed_net_replays(tmp_path, capsys):
    """Issue 25: ingest read a torch dict keyed `net` (MODEL_KEYS), replay could not. Same table now."""
    run = copy_run(tmp_path, "nan_lr_too_high")
    for pt in (run / "checkpoints").glob("*.pt"):
        saved = torch.load(pt, weights_only=True)
        saved["net"] = saved.pop("model")
        torch.save(saved, pt)
    code, r, err = replay(run, tmp_path, capsys)
    assert code == 0, err
    assert "optimizer" in r["restored"]
    assert_gallery_diagnosis(r, "nan_lr_too_high")


def test_config_with_python_tags_replays_as_ingest_reads_it(tmp_path, capsys):
    """Issue 25: a config written by Lightning's save_hparams_to_yaml carries `!!python/tuple`; ingest reads it
    as plain data, replay failed on it (yaml.safe_load). Replay reads it through ingest now."""
    import yaml
    from lightning.pytorch.core.saving import save_hparams_to_yaml

    run = copy_run(tmp_path, "nan_lr_too_high")
    config = yaml.safe_load((run / "config.yaml").read_text())
    # Without OmegaConf installed (the default install), Lightning writes plain PyYAML: tuples tagged.
    save_hparams_to_yaml(run / "config.yaml", {**config, "betas": (0.9, 0.999)}, use_omegaconf=False)
    assert "!!python/tuple" in (run / "config.yaml").read_text()
    code, r, err = replay(run, tmp_path, capsys)
    assert code == 0, err
    assert r["config"] == "config.yaml"
    assert_gallery_diagnosis(r, "nan_lr_too_high")


@pytest.mark.parametrize("step", ["-1", "100000"])
def test_step_outside_the_logged_steps_is_one_line(step, tmp_path, capsys):
    run = copy_run(tmp_path, "nan_lr_too_high")
    code, r, err = replay(run, tmp_path, capsys, "--step", step)
    assert code == 2 and r is None
    assert re.search(r"--step -?\d+", err) and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_layout_table_says_what_each_step_means():
    """One table, one meaning per layout (DECISIONS.md §10): torch dicts and HF folders hold the state after step N,
    Lightning's files the state before it; an override is checked against the accepted names."""
    from ingest.checkpoints import LAYOUTS, first_step_after, step_means

    assert {name: layout.step_means for name, layout in LAYOUTS.items()} == {
        "torch": "after", "hf": "after", "lightning": "before", "safetensors": "after"}
    assert "net" in LAYOUTS["torch"].model_keys and "state_dict" in LAYOUTS["lightning"].model_keys
    assert first_step_after("lightning", 224) == 224 and first_step_after("torch", 60) == 61
    assert first_step_after("torch", 60, "checkpoint_before_step") == 60
    with pytest.raises(ValueError, match="accepted: checkpoint_after_step, checkpoint_before_step"):
        step_means("torch", "lightning_style")


def test_entry_template_reads_the_configs_own_keys(tmp_path, capsys):
    """Issue 25: the template read `config.get("lr")` where the run's config says `optim: {lr: ...}`, and never its
    `max_grad_norm`. It names the keys the stored config has, and is valid Python."""
    import yaml

    run = copy_run(tmp_path, "nan_lr_too_high")
    (run / "forensics_entry.py").unlink()
    config = yaml.safe_load((run / "config.yaml").read_text())
    (run / "config.yaml").write_text(yaml.safe_dump({**config, "max_grad_norm": 1.0}))
    code = main(["replay", str(run), "--db", str(tmp_path / "f.duckdb")])
    out = capsys.readouterr()
    assert code == 2
    assert 'lr=config["optim"]["lr"]' in out.out
    assert '"max_grad_norm": config["max_grad_norm"]' in out.out
    compile(out.out, "forensics_entry.py", "exec")


def test_replay_commands_write_the_home_directory_as_tilde(tmp_path, monkeypatch):
    """Issue 25: the README shows `~/...`; the hint printed /home/<user>/... (and a quoted `~` would not expand)."""
    from forensics.usercode.replay import replay_command, shell_path

    monkeypatch.setenv("HOME", str(tmp_path))
    run = tmp_path / "runs" / "my run"
    assert shell_path(run) == "~/'runs/my run'"
    assert shell_path("/srv/runs/a") == "/srv/runs/a"
    assert replay_command(run, 80, db=tmp_path / ".cache" / "f.duckdb", threads=2) == \
        "forensics replay ~/'runs/my run' --step 80 --threads 2 --db ~/.cache/f.duckdb"


def test_the_replay_hint_names_a_store_only_when_the_command_would_not_find_it(tmp_path, monkeypatch, capsys):
    """The README's sample shows `forensics replay RUN --step 80` for the default store; the hint printed
    `--db ~/.cache/run-forensics/forensics.duckdb`. Another store is still named, so the command finds the run."""
    default = tmp_path / "default.duckdb"
    monkeypatch.setenv("FORENSICS_DB", str(default))
    run = RUNS / "nan_lr_too_high"
    assert main(["analyze", str(run), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["replay_from"]["command"].endswith(" --step 80")
    other = tmp_path / "other.duckdb"
    assert main(["analyze", str(run), "--json", "--db", str(other)]) == 0
    assert json.loads(capsys.readouterr().out)["replay_from"]["command"].endswith(f" --step 80 --db {other}")
