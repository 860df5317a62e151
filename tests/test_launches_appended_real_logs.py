"""Launches appended to one log, on real logs: each is a launch start the judge cuts at (`Run.launch_starts`), so no
curve and no step time is read across one. A launch of one record whose next launch prints the same first epoch a
day later; a Keras CSV whose epoch column never moves (a loop of one-epoch fits) with a fresh model's row in it; a
log whose epoch lines end in an ellipsis (`Meta epoch 0...`), each launch counting from 0 again."""

import numpy as np

from forensics.judge.detectors import LossSpike, ThroughputDrop
from tests.runwriters import load_run

# A BERT classifier's log (asilverlight/BERT-classification@30c585bf67069fbe17c38ba1c432c4724b05d03b:training_log.log,
# lines 1-16): launches of five epochs, one of a single epoch at 13:21, and the next one's `Epoch 1` the day after
ONE_RECORD_LAUNCH = """\
[2024-07-21 10:57:22] Epoch 1, Loss: 0.6617, Val Accuracy: 0.6250
[2024-07-21 10:57:30] Epoch 2, Loss: 0.5099, Val Accuracy: 0.6500
[2024-07-21 10:57:38] Epoch 3, Loss: 0.3341, Val Accuracy: 0.8000
[2024-07-21 10:57:46] Epoch 4, Loss: 0.1459, Val Accuracy: 0.7750
[2024-07-21 10:57:54] Epoch 5, Loss: 0.0734, Val Accuracy: 0.8250
[2024-07-21 11:00:33] Epoch 1, Loss: 0.7018, Val Accuracy: 0.6750
[2024-07-21 11:00:41] Epoch 2, Loss: 0.6094, Val Accuracy: 0.6750
[2024-07-21 11:00:49] Epoch 3, Loss: 0.4125, Val Accuracy: 0.5750
[2024-07-21 11:00:57] Epoch 4, Loss: 0.1887, Val Accuracy: 0.8750
[2024-07-21 11:01:05] Epoch 5, Loss: 0.0530, Val Accuracy: 0.7750
[2024-07-21 13:21:02] Epoch 1, Loss: 0.7011, Val Accuracy: 0.6250
[2024-07-22 17:38:55] Epoch 1, Loss: 0.4676, Val Accuracy: 0.8892
[2024-07-22 17:43:01] Epoch 2, Loss: 0.1860, Val Accuracy: 0.9233
[2024-07-22 17:47:08] Epoch 3, Loss: 0.0998, Val Accuracy: 0.9525
[2024-07-22 17:51:15] Epoch 4, Loss: 0.0573, Val Accuracy: 0.9483
[2024-07-22 17:55:20] Epoch 5, Loss: 0.0549, Val Accuracy: 0.9558
"""


def test_the_first_epoch_printed_again_a_day_later_begins_a_launch(tmp_path):
    # `Epoch 1` right after `Epoch 1`: the counter ran to 5 before and the clock moved on 28 hours where its records
    # come 8 s apart; the day between the two launches is no slow step.
    (tmp_path / "training_log.log").write_text(ONE_RECORD_LAUNCH)
    run = load_run(tmp_path, tmp_path / "db.duckdb")
    name = run.pick("loss")
    view = run.series_named(name)
    starts = run.launch_starts(name)
    assert len(starts) == 3
    losses = dict(zip(view["step"].to_list(), view["value"].to_list()))
    assert [losses[s] for s in starts] == [0.7018, 0.7011, 0.4676]
    assert list(ThroughputDrop().check(run)) == []


def test_the_first_epoch_printed_again_seconds_later_begins_none(tmp_path):
    # The same lines with the last launch's records seconds after the one-record launch: the same epoch printed again
    # at the log's own pace (another line of that epoch) is no launch.
    text = ONE_RECORD_LAUNCH.replace("2024-07-22 17:38:55", "2024-07-21 13:21:10")
    (tmp_path / "training_log.log").write_text(text)
    run = load_run(tmp_path, tmp_path / "db.duckdb")
    assert len(run.launch_starts(run.pick("loss"))) == 2


# A Keras CSVLogger(append=True) file over a loop of `fit(epochs=1)` (Areya911/AgriSmart@
# 8f2375622a6968520ed163620d3900d01cfe1666:training_log.csv, whole): every row is epoch 0; row 17 is a new model at
# its untrained loss (1.67, accuracy 0.40), which then falls again
EPOCH_ZERO_ROWS = """\
epoch,accuracy,loss,val_accuracy,val_loss
0,0.8271250128746033,0.3934960663318634,0.8514999747276306,0.43080681562423706
0,0.8400225043296814,0.3660835027694702,0.8619999885559082,0.40893471240997314
0,0.8411874771118164,0.36590883135795593,0.8787500262260437,0.36893975734710693
0,0.8493124842643738,0.3471182584762573,0.8824999928474426,0.35739585757255554
0,0.8453124761581421,0.33324533700942993,0.8812500238418579,0.3556673526763916
0,0.8564640879631042,0.3211836814880371,0.8977500200271606,0.313050240278244
0,0.8585000038146973,0.3224841356277466,0.918749988079071,0.26567554473876953
0,0.856249988079071,0.32413867115974426,0.9337499737739563,0.22171279788017273
0,0.856249988079071,0.2959441840648651,0.9312499761581421,0.2412806898355484
0,0.8587499856948853,0.32329821586608887,0.9362499713897705,0.2303522676229477
0,0.8697500228881836,0.2812918722629547,0.9587500095367432,0.1748337298631668
0,0.8575000166893005,0.3059329092502594,0.9275000095367432,0.25130951404571533
0,0.8634999990463257,0.2965752184391022,0.9287499785423279,0.22734785079956055
0,0.862500011920929,0.31317245960235596,0.9175000190734863,0.25674664974212646
0,0.859749972820282,0.31933408975601196,0.9362499713897705,0.22099174559116364
0,0.8662499785423279,0.3012937903404236,0.9474999904632568,0.18770267069339752
0,0.398499995470047,1.674519419670105,0.7487499713897705,0.809704601764679
0,0.672249972820282,0.7347423434257507,0.8075000047683716,0.5588382482528687
0,0.749750018119812,0.5411394834518433,0.8725000023841858,0.41521644592285156
0,0.7900000214576721,0.47406741976737976,0.8799999952316284,0.3815420866012573
0,0.7994999885559082,0.43226563930511475,0.8725000023841858,0.3456306457519531
0,0.8230000138282776,0.39833176136016846,0.8637499809265137,0.3679538071155548
0,0.8217499852180481,0.3692568838596344,0.9150000214576721,0.26761841773986816
0,0.8362500071525574,0.335896372795105,0.8899999856948853,0.31431829929351807
0,0.8460000157356262,0.31882035732269287,0.90625,0.26787176728248596
0,0.8500000238418579,0.30596601963043213,0.9225000143051147,0.2478877454996109
"""


def test_a_fresh_models_row_under_an_epoch_that_never_moves_begins_a_launch(tmp_path):
    # No counter starts again (every row is epoch 0): the row where the loss reopens above the file's opening level,
    # after the model before had learned, is a new launch; its untrained loss is no spike.
    (tmp_path / "training_log.csv").write_text(EPOCH_ZERO_ROWS)
    run = load_run(tmp_path, tmp_path / "db.duckdb")
    for role in ("loss", "val_loss"):
        name = run.pick(role)
        starts = run.launch_starts(name)
        assert len(starts) == 1
        view = run.series_named(name)
        assert int(np.searchsorted(view["step"].to_numpy(), starts[0])) == 16  # the 17th row
    assert list(LossSpike().check(run)) == []


# A MAML trainer's log (ANarayan/DAMSL-CS224N-FinalProject@fedf0d8ec4812b2a2b82f8e1ec7e23e1cb5d4457:train.log, lines
# 696-703, 710-717 and 724-730, the eval lines after each `Total train loss` left out): each launch announces its meta
# epochs as `Meta epoch N...`; the launch after meta epoch 12 counts from 0 again
META_EPOCHS = """\
2020-03-09 10:02:51,580:INFO: Meta epoch 11...
2020-03-09 10:03:05,308:INFO: Meta batch loss: 0.08609654754400253
2020-03-09 10:03:05,308:INFO: Average inner loss after inner updates : 0.08609654754400253
2020-03-09 10:03:18,451:INFO: Meta batch loss: 0.18990056216716766
2020-03-09 10:03:18,451:INFO: Average inner loss after inner updates : 0.18990056216716766
2020-03-09 10:03:31,481:INFO: Meta batch loss: 2.0676321983337402
2020-03-09 10:03:31,481:INFO: Average inner loss after inner updates : 2.0676321983337402
2020-03-09 10:03:31,811:INFO: Total train loss: 2.3436293601989746
2020-03-09 10:03:38,245:INFO: Meta epoch 12...
2020-03-09 10:03:51,914:INFO: Meta batch loss: 0.040452927350997925
2020-03-09 10:03:51,914:INFO: Average inner loss after inner updates : 0.040452927350997925
2020-03-09 10:04:05,538:INFO: Meta batch loss: 0.09145405888557434
2020-03-09 10:04:05,538:INFO: Average inner loss after inner updates : 0.09145405888557434
2020-03-09 10:04:18,814:INFO: Meta batch loss: 0.9221608638763428
2020-03-09 10:04:18,816:INFO: Average inner loss after inner updates : 0.9221608638763428
2020-03-09 10:04:19,156:INFO: Total train loss: 1.054067850112915
2020-03-09 10:06:22,382:INFO: Loading the datasets...
2020-03-09 10:06:22,382:INFO: -done
2020-03-09 10:06:22,514:INFO: Starting MAML for 20 meta epoch(s)
2020-03-09 10:06:25,276:INFO: Meta epoch 0...
2020-03-09 10:06:53,799:INFO: Meta batch loss: 2990.936767578125
2020-03-09 10:07:09,316:INFO: Meta batch loss: 1398.28857421875
2020-03-09 10:07:25,176:INFO: Meta batch loss: 1230.23828125
"""


def test_an_epoch_line_ending_in_an_ellipsis_counts_its_epoch(tmp_path):
    # `Meta epoch 0...` is epoch 0 (an ellipsis, not a fraction's point): after meta epochs 11 and 12, the launch that
    # counts from 0 again begins at its first record.
    (tmp_path / "train.log").write_text(META_EPOCHS)
    run = load_run(tmp_path, tmp_path / "db.duckdb")
    name = "Meta batch loss"
    view = run.series_named(name)
    starts = run.launch_starts(name)
    assert len(starts) == 1
    assert dict(zip(view["step"].to_list(), view["value"].to_list()))[starts[0]] == 2990.936767578125
