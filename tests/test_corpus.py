"""The development corpus (issue 12): labels against the files the real writers wrote, regeneration, the split,
and eval_corpus.py's scoring arithmetic on real generated runs.

A handful of the corpus's own runs are generated into a temporary folder (the smallest ones: a few seconds in
all); the files are read with the writers' own tools (TensorBoard's EventAccumulator, json, csv, torch.load with
weights_only=True), never with this project's readers.
"""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from benchmarks.eval_corpus import READERS, Case, Label, score_case, summarise
from corpus.spec import all_specs
from tests.test_sample_runs import tb_scalars

SPECS = {s.name: s for s in all_specs()}
RUNS = ("nan_lr_regression_100_r0", "nan_input_mlp_1_r0", "nan_input_cnn_1_r0", "exploding_guard_regression_100_r1",
        "healthy_mlp_sgd_linear_short_r0", "nan_lr_regression_60_r6", "flat_no_backward_lstm_1_r6",
        "healthy_mlp_sgd_linear_short_r1")


def _build(out: Path, name: str) -> dict:
    from corpus.build import build_run
    spec = SPECS[name]
    return build_run(spec, out / spec.split / spec.name)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("corpus")
    for name in RUNS:
        _build(out, name)
    return out


def _run(corpus: Path, name: str) -> tuple[Path, dict]:
    root = corpus / SPECS[name].split / name
    return root, json.loads((root / "labels.json").read_text())




def _kinds(lab: dict) -> dict[str, dict]:
    return {k["kind"]: k for k in lab["kinds"]}


# ------------------------------------------------------------------------------------------ the split

def test_split_is_by_replica_and_both_parts_cover_every_variant():
    specs = list(SPECS.values())
    measured = [s for s in specs if s.split in ("tune", "holdout")]  # the first tune and holdout parts
    assert len(measured) >= 200
    assert sum(s.bug == "none" for s in measured) / len(measured) >= 0.4
    by_variant: dict[str, dict[int, str]] = {}
    for s in specs:
        by_variant.setdefault(s.variant, {})[s.replica] = s.split
        assert s.split == ("tune", "holdout", "calib", "calib", "holdout2", "holdout3", "holdout4", "holdout5", "holdout6",
                           "holdout7", "holdout8", "holdout9")[s.replica]
    # every variant has a tune and a holdout replica; only healthy recipes have calibration replicas
    assert all({0: "tune", 1: "holdout"}.items() <= v.items() for v in by_variant.values())
    assert {s.bug for s in specs if s.split == "calib"} == {"none"}
    for part in ("tune", "holdout", "holdout2", "holdout3", "holdout4", "holdout5", "holdout6", "holdout7", "holdout8",
                 "holdout9"):
        got = [s for s in specs if s.split == part]
        assert {s.bug for s in got} == {s.bug for s in specs}
        assert {s.family for s in got} == {s.family for s in specs}
    seeds: dict[str, set[int]] = {}
    for s in specs:
        seeds.setdefault(s.variant, set()).add(s.seed)
    # no replica repeats another's seed (the holdout never shares the tune run's data draw)
    assert all(len(seeds[v]) == len(by_variant[v]) for v in seeds)


def test_corpus_varies_what_real_runs_vary():
    specs = list(SPECS.values())
    assert {s.optimizer for s in specs} == {"sgd", "adam", "adamw", "adafactor"}
    assert {s.schedule for s in specs} >= {"constant", "warmup_cosine", "linear", "step", "onecycle"}
    assert Counter(len(s.loggers) for s in specs).keys() >= {1, 2, 3}
    assert {s.family for s in specs} >= {"mlp", "cnn", "lstm", "gru", "transformer", "finetune", "modular"}


# ------------------------------------------------------------------------------ labels against the files

def test_nan_onset_is_the_first_nonfinite_loss_in_metrics_csv(corpus):
    root, lab = _run(corpus, "nan_lr_regression_100_r0")
    rows = list(csv.DictReader(open(root / "lightning_logs" / "version_0" / "metrics.csv")))
    loss = {int(r["step"]): float(r["train_loss"]) for r in rows if r.get("train_loss")}
    bad = sorted(s for s, v in loss.items() if not math.isfinite(v))
    assert lab["nan_onset"] == bad[0] and _kinds(lab)["nan_loss"]["step"] == bad[0]
    assert all(not math.isfinite(loss[s]) for s in loss if s >= bad[0])  # and stays non-finite
    ck = _kinds(lab)["nonfinite_weights"]["evidence"]["checkpoint"]
    import torch
    sd = torch.load(root / ck, weights_only=True)["state_dict"]
    assert any(not bool(torch.isfinite(t).all()) for t in sd.values())
    div = _kinds(lab)["divergence"]
    finite = [loss[s] for s in sorted(loss) if s < bad[0]]
    assert div["evidence"]["final_level"] >= 3 * div["evidence"]["min_level"]
    assert max(finite) >= div["evidence"]["final_level"]


def test_masked_nonfinite_in_trainer_state_and_the_nan_batch(corpus):
    root, lab = _run(corpus, "nan_input_mlp_1_r0")
    hist = json.loads((root / "trainer_state.json").read_text())["log_history"]
    train = [e for e in hist if "loss" in e]
    masked = _kinds(lab)["masked_nonfinite"]
    e = next(x for x in train if x["step"] == masked["step"])
    assert math.isnan(e["grad_norm"]) and math.isfinite(e["loss"])
    assert all(math.isfinite(x["loss"]) for x in train)  # logging_nan_inf_filter: no NaN loss is ever logged
    assert lab["nan_onset"] is None and "nan_loss" not in _kinds(lab)
    import torch
    bb = _kinds(lab)["bad_batch"]
    batch = torch.load(root / "batches" / f"step_{bb['step']}.pt", weights_only=True)
    assert not bool(torch.isfinite(batch["x"]).all())


def test_a_nan_hidden_by_hf_but_logged_by_tensorboard_is_nan_loss(corpus):
    """HF's filter logs 0.0 where the loss was NaN; the run's TensorBoard writer logged the loss itself, non-finite
    from the same step: the NaN is visible, so the label is nan_loss there and masked_nonfinite is allowed."""
    root, lab = _run(corpus, "nan_lr_regression_60_r6")
    hist = json.loads((root / "trainer_state.json").read_text())["log_history"]
    nan = _kinds(lab)["nan_loss"]
    hf = next(x for x in hist if x["step"] == nan["step"] and "loss" in x)
    assert hf["loss"] == 0.0 and math.isnan(hf["grad_norm"])
    tb = tb_scalars(root)["Loss/train"]  # the TensorBoard writer's spelling in this run (TB_STYLES)
    assert not math.isfinite(tb[nan["step"]]) and all(math.isfinite(v) for s, v in tb.items() if s < nan["step"])
    assert lab["nan_onset"] == nan["step"] and "masked_nonfinite" in lab["allowed"]


def test_no_backward_is_flat_loss_by_its_zero_gradient(corpus):
    """The run never calls backward(): its logged grad norm is 0.0 throughout, so the weights cannot move and the
    loss is flat by construction, whatever its minibatch noise does to the first/last-tenth rule."""
    root, lab = _run(corpus, "flat_no_backward_lstm_1_r6")
    grad = tb_scalars(root / "train")[lab["series"]["grad_norm"].removeprefix("train/")]
    assert len(grad) >= 5 and all(v == 0.0 for v in grad.values())
    assert "flat_loss" in _kinds(lab) and not lab["healthy"]


def test_console_labels_read_the_evaluations_the_log_prints(corpus):
    """A run whose only writer is a train.log prints its evaluations as `eval @ step N | val_loss 0.1234 | ...`:
    the labels read validation from those lines (4 decimals, as printed), so the validation kinds get labelled."""
    root, lab = _run(corpus, "healthy_mlp_sgd_linear_short_r1")
    printed = {}
    for line in (root / "train.log").read_text().splitlines():
        if "eval @ step" in line:
            step = int(line.split("eval @ step")[1].split("|")[0])
            printed[step] = float(line.split("val_loss")[1].split("|")[0])
    assert len(printed) >= 4 and lab["series"]["val_loss"] == "val_loss"
    assert {int(k): v for k, v in lab["measured"]["logged"]["val_loss"].items()} == printed  # JSON keys are strings


def test_tensorboard_labels_match_event_files(corpus):
    root, lab = _run(corpus, "nan_input_cnn_1_r0")
    sc = tb_scalars(root) or tb_scalars(root / "train")
    loss = sc[lab["series"]["loss"].removeprefix("train/")] if lab["series"]["loss"] not in sc else sc[lab["series"]["loss"]]
    bad = sorted(s for s, v in loss.items() if not math.isfinite(v))
    assert lab["nan_onset"] == bad[0]
    root, lab = _run(corpus, "exploding_guard_regression_100_r1")
    sc = tb_scalars(root) or tb_scalars(root / "train")
    g = sc.get(lab["series"]["grad_norm"]) or sc[lab["series"]["grad_norm"].removeprefix("train/")]
    ex = _kinds(lab)["exploding_gradients"]
    assert max(g.values()) >= 100 * ex["evidence"]["base"]
    assert max(g) <= SPECS["exploding_guard_regression_100_r1"].steps  # the guard ended the logs early


def test_healthy_short_log_is_labelled_healthy_from_its_csv(corpus):
    root, lab = _run(corpus, "healthy_mlp_sgd_linear_short_r0")
    rows = [r for r in csv.DictReader(open(root / "log.csv")) if r.get("loss")]
    assert 4 <= len(rows) <= 8
    v = [float(r["loss"]) for r in rows]
    assert all(math.isfinite(x) for x in v) and v[-1] < v[0]
    assert lab["healthy"] is True and lab["kinds"] == []


def test_regeneration_is_deterministic(corpus, tmp_path):
    for name in ("exploding_guard_regression_100_r1", "healthy_mlp_sgd_linear_short_r0"):
        _build(tmp_path, name)
        root, lab = _run(corpus, name)
        again = json.loads((tmp_path / SPECS[name].split / name / "labels.json").read_text())
        assert again == lab
        if (root / "log.csv").exists():
            assert (root / "log.csv").read_text() == (tmp_path / SPECS[name].split / name / "log.csv").read_text()
        else:
            assert tb_scalars(root) == tb_scalars(tmp_path / SPECS[name].split / name)


# ---------------------------------------------------------------------------------------- the scoring

def test_scoring_arithmetic_on_generated_runs(corpus):
    cases = {c.name: c for c in READERS["corpus"](corpus, "all")}
    assert set(cases) == set(RUNS)
    nan = cases["nan_lr_regression_100_r0"]
    onset = nan.nan_onset
    labelled = {lab.kind for lab in nan.labels}
    assert labelled == {"nan_loss", "divergence", "nonfinite_weights"}
    findings = [
        {"kind": "nan_loss", "step": onset, "step_end": onset, "severity": "critical"},        # correct, exact
        {"kind": "divergence", "step": onset + 1000, "step_end": onset + 1100, "severity": "critical"},  # wrong place
        {"kind": "exploding_gradients", "step": 5, "severity": "critical"},                    # allowed: ignored
        {"kind": "flat_loss", "step": 0, "severity": "warning"},                                 # false
    ]
    s1 = score_case(nan, {"findings": findings})
    assert sorted(s1["tp"]) == ["nan_loss"] and sorted(s1["fn"]) == ["divergence", "nonfinite_weights"]
    assert [f["kind"] for f in s1["fp"]] == ["divergence", "flat_loss"]
    assert s1["allowed_found"] == ["exploding_gradients"] and s1["nan"]["exact"] is True
    healthy = cases["healthy_mlp_sgd_linear_short_r0"]
    s2 = score_case(healthy, {"findings": [{"kind": "loss_spike", "step": 3, "severity": "warning"},
                                           {"kind": "divergence", "step": 9, "severity": "critical"}]})
    summ = summarise([s1, s2])
    assert summ["kinds"]["nan_loss"] == {"examples": 1, "tp": 1, "fn": 0, "correct": 1, "fp": 0,
                                         "precision": 1.0, "recall": 1.0}
    assert summ["kinds"]["divergence"]["fp"] == 2 and summ["kinds"]["divergence"]["recall"] == 0.0
    assert summ["overall"]["examples"] == 3 and summ["overall"]["tp"] == 1
    assert summ["overall"]["precision"] == pytest.approx(1 / 5)  # 1 correct of 1 + 4 false
    assert summ["false_findings_per_healthy_run"] == 2.0
    assert [c["kind"] for c in summ["critical_on_healthy"]] == ["divergence"]
    assert summ["nan_onset_exact"] == [1, 1]


def test_relabel_reproduces_the_labels_without_training(corpus, tmp_path):
    import shutil
    from corpus.build import relabel
    name = "nan_input_mlp_1_r0"
    root, lab = _run(corpus, name)
    copy = tmp_path / name
    shutil.copytree(root, copy)
    assert relabel(SPECS[name], copy) == lab  # the saved measurements and facts give the same labels
    assert json.loads((copy / "labels.json").read_text()) == lab


def test_step_tolerance_is_five_percent_of_the_run():
    case = Case("x", Path("."), [Label("loss_spike", 500, 500)], steps=1000)
    near = score_case(case, {"findings": [{"kind": "loss_spike", "step": 549, "severity": "warning"}]})
    far = score_case(case, {"findings": [{"kind": "loss_spike", "step": 551, "severity": "warning"}]})
    assert near["tp"] == ["loss_spike"] and far["fn"] == ["loss_spike"] and len(far["fp"]) == 1
    lvl = Case("y", Path("."), [Label("frequent_clipping", 10, 20)], steps=1000)  # run-level kind: no step check
    assert score_case(lvl, {"findings": [{"kind": "frequent_clipping", "step": 900}]})["tp"] == ["frequent_clipping"]


def test_eval_script_runs_the_engine_under_test_end_to_end(corpus, tmp_path):
    sub = tmp_path / "one" / "tune"
    sub.mkdir(parents=True)
    (sub / "healthy_mlp_sgd_linear_short_r0").symlink_to(corpus / "tune" / "healthy_mlp_sgd_linear_short_r0")
    p = subprocess.run([sys.executable, "benchmarks/eval_corpus.py", "--corpus", str(tmp_path / "one"), "--split",
                        "tune", "--jobs", "1", "--json"], capture_output=True, text=True,
                       cwd=Path(__file__).resolve().parents[1], timeout=300)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    (part,) = doc.values()
    assert part["summary"]["runs"] == 1 and part["summary"]["errors"] == []
    assert part["runs"][0]["healthy"] is True


def test_claims_count_as_the_shared_scorer_does():
    """benchmarks/eval_corpus.claims counts as ../shared/tools/score.py and issue 24's table: a kind found is one
    claim per run, an allowed kind found counts against precision there, nan_loss and masked_nonfinite stand for
    each other."""
    from benchmarks.eval_corpus import claims

    cases = [Case("a", Path("a"), [Label("nan_loss")], {"divergence"}), Case("b", Path("b"), [Label("plateau")]),
             Case("c", Path("c"), [])]
    found = [[{"kind": "masked_nonfinite"}, {"kind": "divergence"}], [{"kind": "flat_loss"}, {"kind": "flat_loss"}],
             [{"kind": "loss_spike"}]]
    scored = [score_case(c, {"findings": f}) for c, f in zip(cases, found)]
    c = claims(scored)
    assert (c["tp"], c["fp"], c["fn"]) == (1, 3, 1)
    assert c["kinds"]["nan_loss"] == {"tp": 1, "fp": 0, "fn": 0} and c["kinds"]["flat_loss"]["fp"] == 1
    assert summarise(scored)["overall"]["fp"] == 4  # the benchmark's own count: each finding, allowed ones excused
