"""A training objective a log states otherwise than as a `loss`: a perplexity printed in its place (the training loss,
kept away from log-levels), a loss function's name (`train_mse_step`), a value printed inside literal braces or a
one-element tuple (`loss : {1.90}`), and a history dict printed on one line (`print(history.history)`). Each log is a real excerpt, its source beside it."""

from __future__ import annotations

import duckdb
import numpy as np

from forensics.judge.detectors.base import class_count, loss_is_perplexity
from forensics.judge.detectors.initial_loss_mismatch import InitialLossMismatch
from ingest.reprs import cell_number
from ingest.roles import is_perplexity, names_loss_function
from tests.runwriters import load_run

# source: https://github.com/QingyaoAi/Deep-Listwise-Context-Model-for-Ranking-Refinement/issues/4
TF_SEQ2SEQ = """\
global step 6000 learning rate 0.1937 step-time 0.67 perplexity 13.56
  eval: perplexity 13.34
global step 6100 learning rate 0.1937 step-time 0.67 perplexity 13.34
  eval: perplexity 13.35
global step 6200 learning rate 0.1937 step-time 0.67 perplexity 13.57
  eval: perplexity 13.25
"""

# source: https://github.com/Eurus-Holmes/MNMT/issues/8
OPENNMT = """\
Epoch 13,   250/  725; acc:   0.00; ppl:   1.93; 5988 src tok/s; 6500 tgt tok/s;     22 s elapsed
Epoch 13,   300/  725; acc:   0.00; ppl:   1.81; 6119 src tok/s; 6593 tgt tok/s;     26 s elapsed
Epoch 13,   350/  725; acc:   0.00; ppl:   1.79; 6386 src tok/s; 6924 tgt tok/s;     30 s elapsed
Epoch 13,   400/  725; acc:   0.00; ppl:   1.75; 6089 src tok/s; 6541 tgt tok/s;     35 s elapsed
Epoch 13,   650/  725; acc:   0.00; ppl:   1.64; 6455 src tok/s; 7003 tgt tok/s;     57 s elapsed
Epoch 13,   700/  725; acc:   0.00; ppl:   1.62; 5744 src tok/s; 6212 tgt tok/s;     61 s elapsed
Train perplexity: 1.79125
Train accuracy: 0
Loading valid dataset from data/m30k.valid.1.pt, number of examples: 1014
Validation perplexity: 8.59283
Validation accuracy: 0
Decaying learning rate to 7.8125e-06
"""

# source: https://github.com/allenai/bilm-tf/issues/77
BILM = """\
Batch 142200, train_perplexity=24.746037
Total time: 585740.8309390545
Batch 142300, train_perplexity=25.46843
Total time: 586129.8147296906
Batch 142400, train_perplexity=25.55357
"""

# source: https://github.com/kimiyoung/transformer-xl/issues/15
TXL = """\
| epoch   1 step     7400 |   7400 batches | lr 0.000249 | ms/batch 619.56 | loss  7.42 | ppl  1670.860
| epoch   1 step     7600 |   7600 batches | lr 0.000249 | ms/batch 620.25 | loss  7.42 | ppl  1664.089
| epoch   1 step     7800 |   7800 batches | lr 0.000249 | ms/batch 619.83 | loss  7.42 | ppl  1661.560
"""

# source: GregoryTomy/dctaxi@c473ddc57d71993a6c112b93f4c1e5d90687b9b8:logs/dctaxi/seed_2146955208/metrics.csv
LIGHTNING_MSE = """\
train_mse_step,train_rmse_step,train_steps_per_sec_step,epoch,step,val_mse_step,val_rmse_step,train_val_rmse_step,\
val_mse_epoch,val_rmse_epoch,train_val_rmse_epoch,train_mse_epoch,train_rmse_epoch,train_steps_per_sec_epoch
10.392968742470025,3.223812764797302,5.934935316000076,0,0,,,,,,,,,
9.271826681065324,3.04496743514037,9.395341295590912,0,1,,,,,,,,,
8.69830140421944,2.9492882877432383,11.730283618082131,0,2,,,,,,,,,
8.008742888601015,2.829972241666164,9.792490995498353,0,3,,,,,,,,,
7.2246772429206665,2.6878759723842665,11.023281085876627,0,4,,,,,,,,,
0.16257385515828515,0.403204483058268,13.573005555926521,0,33,,,,,,,,,
0.0960437658015168,0.3099092864073563,13.719716707935616,0,34,,,,,,,,,
,,,0,34,,,,,,,2.162438385924966,1.1389210216201797,12.827069885624324
"""

# source: D641593/Lane_Segmentation@3cc45ff99878f55565a147831192f263abf096d2:train_log.log
BRACES = """\
2022-02-15 17:55:15,241 INFO train using cuda
2022-02-15 17:55:17,761 INFO epoch: {1/300}, step: {1/2}, loss : {1.9027643}, lr : {0.0001000}
2022-02-15 17:55:17,993 INFO epoch: {1/300}, step: {2/2}, loss : {1.7905910}, lr : {0.0001000}
2022-02-15 17:55:18,599 INFO epoch: {2/300}, step: {1/2}, loss : {1.6374745}, lr : {0.0000999}
2022-02-15 17:55:18,834 INFO epoch: {2/300}, step: {2/2}, loss : {1.7490304}, lr : {0.0000999}
2022-02-15 17:55:19,437 INFO epoch: {3/300}, step: {1/2}, loss : {1.5882652}, lr : {0.0000996}
"""

# source: https://blog.51cto.com/u_15847885/5798056 (Keras `print(history.history)`; the page made the quotes typographic)
KERAS_HISTORY = """\
{‘val_loss’: [0.4231100323200226, 0.3713115310668945, 0.3836631367206573], ‘val_acc’: [0.815, 0.84, 0.83], \
‘loss’: [0.8348453622311354, 0.5010451343324449, 0.4296100065112114], ‘acc’: [0.630859375, 0.7509920634920635, \
0.783203125]}
[0, 1, 2]
[0.4231100323200226, 0.3713115310668945, 0.3836631367206573]
"""

# source: https://github.com/the-deep-learners/deep-learning-illustrated/issues/15
KERAS_EPOCHS = """\
Epoch 76/100
1224/1224 [==============================] - 29s 24ms/sample - loss: 0.2306 - acc: 0.9428 - val_loss: 3.3835 - val_acc: 0.6691
Epoch 77/100
1224/1224 [==============================] - 29s 24ms/sample - loss: 0.2370 - acc: 0.9412 - val_loss: 3.3218 - val_acc: 0.6985
Epoch 78/100
1224/1224 [==============================] - 29s 24ms/sample - loss: 0.2234 - acc: 0.9428 - val_loss: 3.1847 - val_acc: 0.6691
"""


def _run(tmp_path, name: str, text: str, rel: str = "train.log", config: str | None = None):
    root = tmp_path / name
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(text)
    if config is not None:
        (root / "config.json").write_text(config)
    return load_run(root, tmp_path / f"{name}.duckdb")


def test_a_perplexity_printed_in_place_of_the_loss_is_the_training_loss(tmp_path):
    run = _run(tmp_path, "tf", TF_SEQ2SEQ)
    assert run.all_of("train_loss") == ["perplexity"] and run.all_of("val_loss") == ["eval perplexity"]
    assert run.arrays("loss")[1].tolist() == [13.56, 13.34, 13.57]
    run = _run(tmp_path, "onmt", OPENNMT)
    assert run.pick("loss") == "ppl" and np.allclose(run.arrays("loss")[1], [1.93, 1.81, 1.79, 1.75, 1.64, 1.62])
    assert run.all_of("val_loss") == ["Validation perplexity"] and run.pick("accuracy") == "acc"
    run = _run(tmp_path, "bilm", BILM, rel="log.txt")
    assert run.all_of("train_loss") == ["train_perplexity"] and run.arrays("loss")[1].size == 3


def test_a_run_that_prints_its_loss_keeps_it_and_its_perplexity_stays_other(tmp_path):
    run = _run(tmp_path, "txl", TXL)
    assert run.all_of("train_loss") == ["loss"]
    assert run.meta.filter(run.meta["name"] == "ppl")["role"].to_list() == ["other"]


def test_a_perplexity_loss_is_never_read_against_ln_c(tmp_path):
    """A config that declares a vocabulary (ln V is a language model's loss at init) says nothing of a perplexity's
    level: no class count reaches the detectors that compare with ln C."""
    config = '{"vocab_size": 10000}'
    run = _run(tmp_path, "tf", TF_SEQ2SEQ, config=config)
    assert loss_is_perplexity(run) and class_count(run) is None
    assert "perplexity" in InitialLossMismatch().unavailable(run)
    txl = _run(tmp_path, "txl", TXL, config=config)
    assert not loss_is_perplexity(txl) and class_count(txl) == (10000, "vocab_size")


def test_a_series_named_by_its_loss_function_is_the_training_loss_where_none_is_named(tmp_path):
    run = _run(tmp_path, "pl", LIGHTNING_MSE, rel="logs/run/version_0/metrics.csv")
    assert run.pick("loss") == "train_mse_step"
    assert run.arrays("loss")[1][[0, -1]].tolist() == [10.392968742470025, 0.0960437658015168]
    assert run.all_of("train_loss") == ["train_mse_epoch", "train_mse_step"]  # not the score computed from it (rmse)


def test_names_of_an_objective_stated_otherwise():
    assert all(is_perplexity(n) for n in ("ppl", "perplexity", "train_perplexity", "Train-perplexity",
                                          "Validation perplexity"))
    assert not any(is_perplexity(n) for n in ("Validation-perplexity improved to", "loss", "ppl_weight"))
    assert all(names_loss_function(n) for n in ("train_mse_step", "train_mse_epoch", "val_mae", "l1"))
    assert not any(names_loss_function(n) for n in ("train_rmse_step", "accuracy", "f1", "auc", "train_steps_per_sec"))


def test_a_value_printed_inside_braces_or_a_one_element_tuple_is_the_number_inside(tmp_path):
    run = _run(tmp_path, "braces", BRACES, rel="train_log.log")
    assert np.allclose(run.arrays("loss")[1], [1.9027643, 1.7905910, 1.6374745, 1.7490304, 1.5882652])
    assert cell_number("{1.9027643}") == "1.9027643" and cell_number("(0.51,)") == "0.51"
    assert cell_number("(1, 2)") is None


def test_a_history_dict_printed_on_one_line_is_a_history(tmp_path):
    """Each list is a series, its index the epoch (as in a JSON document's history); the lines after it (the epochs'
    list, one list printed again) add nothing."""
    run = _run(tmp_path, "keras", KERAS_HISTORY, rel="output.log")
    assert run.pick("loss") == "loss" and run.pick("val_loss") == "val_loss" and run.pick("accuracy") == "acc"
    assert run.arrays("loss")[0].tolist() == [0, 1, 2]
    assert run.arrays("loss")[1].tolist() == [0.8348453622311354, 0.5010451343324449, 0.4296100065112114]
    assert run.arrays("val_accuracy")[1].tolist() == [0.815, 0.84, 0.83]


def test_a_printed_history_the_epoch_lines_print_too_adds_nothing(tmp_path):
    """A history printed after the progress lines echoes what they print (here a real progress excerpt, then a real
    printed history): the names the lines print stay as the lines read them."""
    run = _run(tmp_path, "both", KERAS_EPOCHS + KERAS_HISTORY, rel="output.log")
    assert run.all_of("train_loss") == ["loss"] and run.arrays("loss")[1].tolist() == [0.2306, 0.2370, 0.2234]
    con = duckdb.connect(str(tmp_path / "both.duckdb"), read_only=True)
    said = con.execute("SELECT detail FROM ingest_issues WHERE kind = 'lines_read'").fetchall()
    con.close()
    assert "12 points of a printed history repeating series the lines print kept once" in said[0][0]
