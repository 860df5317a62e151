"""The engine end to end: `forensics analyze` through main() on runs written by the real TensorBoard writer."""

import json

import numpy as np
import pytest

from forensics.cli import main
from forensics.judge.settings import build_detectors
from ingest.errors import ForensicsError
from tests.runwriters import curve, write_tb


def _nan_run(root):
    steps, loss = curve(n=300)
    g = np.exp(np.random.default_rng(0).normal(0, 0.1, 300))
    loss[200:] = loss[200] * np.exp((steps[200:] - 2000) / 150)
    g[195:] = np.exp((steps[195:] - 1950) / 60)
    loss[240:] = np.nan
    g[241:] = np.inf
    return write_tb(root, {"train/loss": (steps, loss), "train/grad_norm": (steps, g)})


def test_analyze_json_reports_the_chain_as_one_event(tmp_path, capsys):
    run = _nan_run(tmp_path / "nan_run")
    assert main(["analyze", str(run), "--db", str(tmp_path / "f.duckdb"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["healthy"] is False and out["run"] == "nan_run"
    kinds = {f["kind"]: f for f in out["findings"]}
    assert kinds["nan_loss"]["step"] == 2400 and kinds["nan_loss"]["severity"] == "critical"
    assert kinds["exploding_gradients"]["event"] == kinds["nan_loss"]["event"] == kinds["divergence"]["event"]
    assert out["nonfinite"][0] == {"series": "train/loss", "step": 2400, "value": "nan"}
    assert {"kind", "reason"} <= set(out["skipped"][0])
    for f in out["findings"]:
        assert set(f) >= {"kind", "severity", "step", "step_end", "series", "summary", "evidence", "causes", "checks", "event"}


def test_analyze_text_fail_on_and_markdown(tmp_path, capsys):
    run = _nan_run(tmp_path / "nan_run")
    db = str(tmp_path / "f.duckdb")
    md = tmp_path / "diag.md"
    assert main(["analyze", str(run), "--db", db, "--fail-on", "critical", "--markdown", str(md)]) == 1
    text = capsys.readouterr().out
    first = text.splitlines()
    assert "FAILED" in first[0] and first[1].startswith("earliest cause: nan_run:")
    assert "nan_run:2400 nan_loss" in text
    assert "# run-forensics diagnosis" in md.read_text()
    import duckdb
    con = duckdb.connect(db, read_only=True)
    assert con.execute("SELECT count(*) FROM findings WHERE kind = 'nan_loss' AND step = 2400").fetchone()[0] == 1
    con.close()


def test_healthy_run_has_no_critical_and_exits_zero_with_fail_on(tmp_path, capsys):
    run = write_tb(tmp_path / "ok", {"train/loss": curve(), "train/grad_norm": (np.arange(300) * 10, np.ones(300))})
    assert main(["analyze", str(run), "--db", str(tmp_path / "f.duckdb"), "--json", "--fail-on", "critical"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert not [f for f in out["findings"] if f["severity"] == "critical"]


def test_set_is_strict_and_typed():
    [d] = build_detectors(only=["loss_spike"], settings={"loss-spike.min_undo": "0.5", "spike.window": "40"})
    assert d.min_undo == 0.5 and isinstance(d.spike.window, int) and d.spike.window == 40
    with pytest.raises(ForensicsError, match="fields: .*min_undo"):
        build_detectors(settings={"loss-spike.zz": "6"})
    with pytest.raises(ForensicsError, match="detectors: .*nan_loss"):
        build_detectors(settings={"nope.z": "6"})
    with pytest.raises(ForensicsError, match="expected a int"):
        build_detectors(settings={"spike.window": "4.5"})
    with pytest.raises(ForensicsError, match="spike rule has no field 'zz'"):
        build_detectors(settings={"spike.zz": "6"})
    with pytest.raises(ForensicsError, match="a setting of its own.*--set spike.z=6"):
        build_detectors(settings={"loss-spike.z": "6"})


def test_the_spike_rule_reaches_every_reader_of_spikes():
    """`--set spike.z=4` is one setting: loss_spike, bad_batch and the engine's spike list get the same rule, also
    when loss_spike itself does not run, and the stored settings say so."""
    from forensics.judge.settings import selection

    sel = selection(only=["bad_batch"], settings={"spike.z": "4"})
    [bad] = sel.detectors()
    assert bad.kind == "bad_batch" and bad.spike.z == 4.0 and sel.spike.z == 4.0
    assert sel.as_json() == {"spike.z": 4.0}
    both = selection(settings={"spike.z": "4"}).detectors()
    assert {d.kind: d.spike.z for d in both if hasattr(d, "spike")} == {"loss_spike": 4.0, "bad_batch": 4.0}


def test_set_for_a_detector_that_does_not_run_is_refused(tmp_path, capsys):
    with pytest.raises(ForensicsError, match="plateau does not run in this analysis"):
        build_detectors(only=["bad_batch"], settings={"plateau.start_points": "5"})
    assert main(["analyze", str(tmp_path), "--db", str(tmp_path / "f.duckdb"), "--skip", "plateau",
                 "--set", "plateau.start_points=5"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "does not run" in err


def test_bad_set_is_exit_code_2(tmp_path, capsys):
    assert main(["analyze", str(tmp_path), "--db", str(tmp_path / "f.duckdb"), "--set", "loss-spike.bogus=1"]) == 2
    assert "no field 'bogus'" in capsys.readouterr().err


def test_a_reinforcement_learning_runs_losses_are_not_judged_as_a_training_loss(tmp_path, capsys):
    """An agent's losses under the names Stable-Baselines3 logs: a value loss that grows with the returns it
    regresses to, a policy surrogate flat near 0, an entropy term, beside the episode reward. None is expected to
    fall: no flat_loss, divergence or plateau, and the verdict says which curves it judged and why. A NaN in them is
    still nan_loss. A preference-tuning run's implicit rewards (DPO's `rewards/chosen`) make no RL run: its flat
    loss is still flat_loss."""
    rng = np.random.default_rng(2)
    steps = np.arange(2048, 2048 * 201, 2048)
    reward = 20 + 180 * (1 - np.exp(-steps / steps[60]))
    value = 0.3 + 0.02 * reward * (1 + rng.normal(0, 0.1, steps.size))  # grows with the returns: by design
    policy = -0.01 * (1 + rng.normal(0, 0.3, steps.size))
    entropy = -1.1 * (1 + rng.normal(0, 0.01, steps.size))

    def analyze(name, series):
        run = write_tb(tmp_path / name, series)
        main(["analyze", str(run), "--db", str(tmp_path / f"{name}.duckdb"), "--json"])
        out = json.loads(capsys.readouterr().out)
        return out, {f["kind"] for f in out["findings"]}, {s["kind"]: s["reason"] for s in out["skipped"]}

    agent = {"train/value_loss": (steps, value), "train/policy_gradient_loss": (steps, policy),
             "train/entropy_loss": (steps, entropy), "rollout/ep_rew_mean": (steps, reward)}
    out, kinds, skipped = analyze("ppo", agent)
    assert not kinds & {"flat_loss", "divergence", "plateau", "loss_spike", "oscillation"}
    assert all("reinforcement-learning" in skipped[k] for k in ("flat_loss", "plateau")) and "divergence" not in skipped
    assert out["verdict"] == "healthy" and "reinforcement-learning run (it logs rollout/ep_rew_mean)" in \
        out["verdict_reason"] and "judged for non-finite values and blow-ups" in out["verdict_reason"]
    dead = {k: (s, np.where(np.arange(s.size) >= 150, np.nan, v)) if "loss" in k else (s, v)
            for k, (s, v) in agent.items()}
    _, kinds, _ = analyze("ppo_nan", dead)
    assert "nan_loss" in kinds
    flat = 0.6931 * (1 + rng.normal(0, 0.002, steps.size))
    _, kinds, skipped = analyze("dpo", {"train/loss": (steps, flat), "train/rewards/chosen": (steps, flat - 0.69),
                                        "train/rewards/rejected": (steps, flat - 0.7)})
    assert "flat_loss" in kinds and "flat_loss" not in skipped


def test_an_agents_objectives_are_judged_for_blow_ups_past_any_reward_scale(tmp_path, capsys):
    """An agent's value estimate blown up by orders of magnitude (its loss above 1e12 at every record, growing) is
    divergence; a Q-learner's only loss (no policy objective beside it) jumping ×1000 its median at a few episodes
    and straight back is its value objective blowing up on some batches: loss_spike. The same agent with a TD loss
    that only wanders is neither."""
    rng = np.random.default_rng(3)
    steps = np.arange(1, 301)
    reward = -300 + 200 * (1 - np.exp(-steps / 100)) + rng.normal(0, 30, steps.size)
    td = 5 * np.exp(rng.normal(0, 0.4, steps.size))

    def analyze(name, series):
        run = write_tb(tmp_path / name, {**series, "episode_reward": (steps, reward)})
        main(["analyze", str(run), "--db", str(tmp_path / f"{name}.duckdb"), "--json"])
        return {f["kind"]: f for f in json.loads(capsys.readouterr().out)["findings"]}

    blown = 3e23 * np.exp(np.linspace(0, 6, steps.size) + rng.normal(0, 0.5, steps.size))
    found = analyze("blown", {"loss": (steps, blown)})
    assert found["divergence"]["severity"] == "critical" and "above 1e+12 at every one of its 300" in \
        found["divergence"]["summary"]
    jumps = td.copy()
    jumps[[60, 140, 220]] *= 2000
    found = analyze("jumps", {"loss": (steps, jumps)})
    assert set(found) == {"loss_spike"} and found["loss_spike"]["evidence"]["spikes"] == 3
    assert analyze("calm", {"loss": (steps, td)}) == {}
    # a policy objective logged as plain `loss` (GRPO: 0 at most steps, ±0.02 at some) swings around 0: no
    # regression error, so its |median| near 0 is no level for its swings to blow up from
    swings = np.where(rng.random(steps.size) < 0.15, rng.choice([-1.0, 1.0], steps.size) * 0.02, 0.0)
    swings[swings == 0] = rng.normal(0, 1e-5, int((swings == 0).sum()))
    assert "loss_spike" not in analyze("policy", {"loss": (steps, swings)})


def test_a_gans_adversarial_losses_are_not_judged_by_their_level(tmp_path, capsys):
    """A GAN's discriminator sits near 2·ln 2 and its generator near its own level for the whole run: that
    equilibrium is how a GAN trains. The detectors that judge the loss's level (flat_loss here) skip such a
    loss, saying why; a NaN in it is still nan_loss. A plain loss of the same shape is still flat_loss."""
    rng = np.random.default_rng(1)
    steps = np.arange(0, 3000, 10)
    d_loss = 1.33 * (1 + rng.normal(0, 0.01, steps.size))
    g_loss = 0.76 * (1 + rng.normal(0, 0.01, steps.size))

    def analyze(name, series):
        run = write_tb(tmp_path / name, series)
        main(["analyze", str(run), "--db", str(tmp_path / f"{name}.duckdb"), "--json"])
        out = json.loads(capsys.readouterr().out)
        return {f["kind"] for f in out["findings"]}, {s["kind"]: s["reason"] for s in out["skipped"]}

    kinds, skipped = analyze("gan", {"Loss/Discriminator": (steps, d_loss), "Loss/Generator": (steps, g_loss)})
    assert "flat_loss" not in kinds and "adversarial" in skipped["flat_loss"]
    # both sides logged: judged as a pair, by divergence alone (the discriminator wins: tests/detectors/test_gan_pair)
    assert "adversarial" in skipped["plateau"] and "GAN run" in skipped["loss_spike"] and "divergence" not in skipped
    kinds, skipped = analyze("g_loss", {"train/g_loss": (steps, g_loss)})  # the single-letter spelling
    assert "flat_loss" not in kinds and "adversarial" in skipped["flat_loss"]
    d_nan, g_nan = d_loss.copy(), g_loss.copy()
    d_nan[200:], g_nan[200:] = np.nan, np.nan  # a GAN that dies: both sides share the fake samples' NaN
    kinds, _ = analyze("gan_nan", {"Loss/Discriminator": (steps, d_nan), "Loss/Generator": (steps, g_nan)})
    assert "nan_loss" in kinds
    kinds, skipped = analyze("plain", {"train/loss": (steps, d_loss)})
    assert "flat_loss" in kinds and "flat_loss" not in skipped


def _write_csv_run(folder, rows):
    """Two metric files as a user's script writes them with the csv module: train and validation, one row per step."""
    import csv

    folder.mkdir()
    for name, col in (("train.csv", 1), ("validation.csv", 2)):
        with open(folder / name, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["step", "loss"])
            w.writerows((r[0], r[col]) for r in rows)
    return folder


def test_a_validation_loss_non_finite_at_first_then_finite_is_judged_without_a_crash(tmp_path, capsys):
    """Validation logged as NaN before its first real evaluation, then finite: the curve a detector judges is the
    points before its first non-finite value (none here), so the detectors that read it say so and the rest run."""
    steps, losses = curve(n=40, seed=4)
    rows = [(int(s), float(v), float("nan") if i < 5 else float(v) * 1.1) for i, (s, v) in enumerate(zip(steps, losses))]
    run = _write_csv_run(tmp_path / "run", rows)
    assert main(["analyze", str(run), "--json", "--db", str(tmp_path / "f.duckdb")]) == 0
    out = json.loads(capsys.readouterr().out)
    [why] = [s["reason"] for s in out["skipped"] if s["kind"] == "grokking"]
    assert "before its first non-finite value" in why


def test_a_detector_that_raises_costs_its_own_kind_only(tmp_path, monkeypatch):
    """Outside the tests' strict mode, a detector's bug becomes a check that could not run, with the error, and every
    other detector's findings stand."""
    from forensics.judge import engine
    from forensics.judge.detectors.divergence import Divergence
    from tests.runwriters import load_run

    class Broken(Divergence):
        def check(self, run):
            raise IndexError("index 0 is out of bounds")
            yield  # a generator, as detectors are

    steps, losses = curve(n=60, seed=1)
    losses[40:] = np.nan
    write_tb(tmp_path / "run", {"train/loss": (steps, losses)})
    run = load_run(tmp_path / "run", tmp_path / "f.duckdb")
    detectors = [Broken()] + [d for d in build_detectors() if d.kind != "divergence"]
    with pytest.raises(IndexError):
        engine.analyze_run(run, detectors)
    monkeypatch.setattr(engine, "STRICT", False)
    out = engine.analyze_run(run, detectors)
    [why] = [s.reason for s in out.skipped if s.kind == "divergence"]
    assert "IndexError: index 0 is out of bounds" in why and "not judged" in why
    assert "nan_loss" in {f.kind for f in out.findings}


def test_a_stall_is_reported_once_a_flat_training_loss_takes_the_constant_validation_loss(tmp_path, capsys):
    """Keras' CSVLogger, 9 epochs of a model that predicts the majority class: the training loss pinned at 0.0266
    from its second epoch, the accuracy at 0.9983, the validation loss exactly 0.0265 at every epoch. The validation
    loss is constant because the model is: flat_loss says so, and distribution_mismatch (built on the same constant)
    does not say it again."""
    import os

    os.environ.setdefault("KERAS_BACKEND", "torch")
    keras = pytest.importorskip("keras", reason="the test extra installs keras")
    root = tmp_path / "run"
    root.mkdir()
    logger = keras.callbacks.CSVLogger(str(root / "training.log"))
    logger.on_train_begin()
    for epoch in range(9):
        logger.on_epoch_end(epoch, {"accuracy": 0.9983, "loss": 0.0291 if epoch == 0 else 0.0266,
                                    "val_accuracy": 0.9983, "val_loss": 0.0265})
    logger.on_train_end()
    main(["analyze", str(root), "--db", str(tmp_path / "f.duckdb"), "--json"])
    kinds = {f["kind"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert "flat_loss" in kinds and "distribution_mismatch" not in kinds, kinds
