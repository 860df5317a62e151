"""loss_spike on real TensorBoard event files."""


import numpy as np
import pytest

from forensics.judge.detectors import LossSpike
from tests.paths import REAL_RUNS_TEST
from tests.runwriters import curve, load_run, write_tb



def test_fires_at_each_spike_with_its_baseline(tmp_path):
    steps, loss = curve(n=400, every=5)
    loss[120] *= 4
    loss[300] *= 3
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    found = list(LossSpike().check(run))
    assert [f.step for f in found] == [600, 1500]
    assert found[0].evidence["ratio"] > 3 and found[0].evidence["z"] >= 8


def test_level_shift_and_noise_are_not_spikes(tmp_path):
    steps, loss = curve(n=400, every=5, noise=0.05)
    loss[350:] *= 3  # a level shift that never comes back
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    assert list(LossSpike().check(run)) == []


def test_heavy_tailed_noise_near_zero_is_not_a_spike(tmp_path):
    """Issue 12 class 2: at a loss of 0.004 minibatch noise is right-skewed; 0.07 is ordinary there."""
    rng = np.random.default_rng(4)
    steps = np.arange(2000)
    loss = (2.0 * np.exp(-steps / 150) + 0.004) * rng.lognormal(0, 0.8, steps.size)  # noise relative to the level
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    assert max(loss[1500:]) / np.median(loss[1500:]) > 5  # "spikes" by a ratio to the median
    assert list(LossSpike().check(run)) == []


def test_heavy_tailed_bursts_need_to_beat_their_own_extremes(tmp_path):
    """SGD trained to ~0.01: batches x5-9 above the level every ~20 steps and a few x20 ones, which the
    baseline's sigma calls spikes; a corrupt batch (x300) still stands far above the run's own extremes."""
    rng = np.random.default_rng(3)
    steps = np.arange(2500)
    loss = (0.7 * np.exp(-steps / 100) + 0.01) * rng.lognormal(0, 0.3, steps.size)
    small = rng.choice(np.arange(300, 2500), 110, replace=False)
    loss[small] *= rng.uniform(5, 9, small.size)
    loss[[700, 1200, 1600, 2100]] *= 20
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    # the heavy-tail rule alone (the undo rule off) removes what the baseline's sigma calls spikes
    assert list(LossSpike(heavy=float("inf"), min_undo=0).check(run)) and not list(LossSpike(min_undo=0).check(run))
    assert not list(LossSpike().check(run))
    loss[1800] = 300 * np.median(loss[1700:1800])
    run = load_run(write_tb(tmp_path / "r2", {"loss": (steps, loss)}), tmp_path / "f2.duckdb")
    [f] = LossSpike().check(run)
    assert f.step == 1800 and f.evidence["recent_max_excursion"] >= 3


def test_single_nonfinite_loss_between_finite_ones_is_a_spike(tmp_path):
    """ipex-llm#1486: 1.26, 1.31, Infinity, 1.25 — a non-finite blip that recovers, on four lines."""
    steps = np.arange(45457, 45461)
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, np.array([1.26, 1.31, np.inf, 1.25]))}),
                   tmp_path / "f.duckdb")
    [f] = LossSpike().check(run)
    assert f.step == 45459 and f.evidence["value"] == "inf" and f.evidence["next_value"] == np.float32(1.25)


def test_a_jump_that_undoes_little_of_the_progress_near_zero_is_not_a_spike(tmp_path):
    """A healthy LSTM near the end of training (issue 12): at 0.011, one batch reads 0.067 (×6, 7+ log sigmas
    in this series' noise), a twentieth of the way back to the start 0.69; the same jump at a loss of 0.3
    (a bad batch throwing the model back a third of the way it came) is a spike."""
    rng = np.random.default_rng(6)
    steps = np.arange(600)
    loss = (0.68 * np.exp(-steps / 60) + 0.011) * np.exp(rng.normal(0, 0.12, steps.size))
    loss[450] = 6 * np.median(loss[420:450])
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    assert list(LossSpike(min_undo=0.0).check(run))  # the jump is there by z and ratio alone
    assert list(LossSpike().check(run)) == []
    loss = (0.68 * np.exp(-steps / 60) + 0.3) * np.exp(rng.normal(0, 0.12, steps.size))
    loss[450] = 2.5 * np.median(loss[420:450])
    run = load_run(write_tb(tmp_path / "s", {"loss": (steps, loss)}), tmp_path / "g.duckdb")
    [f] = LossSpike().check(run)
    assert f.step == 450 and f.evidence["undone"] > 0.25


@pytest.mark.skipif(not (REAL_RUNS_TEST / "hf_qwen_chess").is_dir(), reason="shared/real_runs_test is not beside the checkout")
@pytest.mark.needs_shared
def test_an_unstable_stretch_of_several_peaks_that_comes_back_is_one_spike(tmp_path):
    """Issue 24, hf_qwen_chess (a LoRA fine-tune logged every 5 steps, 2400 points): around a grad-norm burst the loss
    (0.52-0.55) goes to 0.95, 0.66, 0.94, 0.53, 0.55, 1.51 (×2.8), 1.17, 0.66, 0.70, 1.08, then back to 0.52-0.55
    for good. Each peak comes back, then the next one rises: no peak alone is isolated, but the episode spans a
    handful of points of 2400 and ends where it began: one spike."""
    run = load_run(REAL_RUNS_TEST / "hf_qwen_chess", tmp_path / "f.duckdb")
    [f] = LossSpike().check(run)
    assert (f.step, f.step_end) == (2700, 2720) and f.evidence["ratio"] > 2.5 and f.evidence["z"] > 10
    assert "steps 2700-2720" in f.summary


@pytest.mark.parametrize("seed", range(2))
def test_a_few_alike_hard_batches_in_a_long_per_step_log_are_its_tail(tmp_path, seed):
    """Four thousand single-batch losses (±8% batch noise on a slow fall) where five batches, far apart, come out
    ×2.1-×2.5 their neighbours and the next batch is ordinary again: the batches' own tail, nothing to act on. One
    such jump alone, or one ×6, stays a spike."""
    rng = np.random.default_rng(seed)
    steps = np.arange(1, 4001)
    loss = (2.0 + 0.3 * np.exp(-steps / 1500)) * np.exp(rng.normal(0, 0.08, steps.size))
    hard = loss.copy()
    at = [700, 1500, 2300, 3100, 3900]
    hard[at] *= [2.1, 2.4, 2.2, 2.5, 2.3]
    run = load_run(write_tb(tmp_path / "a", {"loss": (steps, hard)}), tmp_path / "a.duckdb")
    assert list(LossSpike().check(run)) == []
    assert len(list(LossSpike(tail_crowd=99).check(run))) == 5  # each one stands out of its own window
    one = loss.copy()
    one[1500] *= 2.4
    run = load_run(write_tb(tmp_path / "b", {"loss": (steps, one)}), tmp_path / "b.duckdb")
    assert [f.step for f in LossSpike().check(run)] == [1501]
    big = hard.copy()
    big[2000] = 6 * loss[2000]
    run = load_run(write_tb(tmp_path / "c", {"loss": (steps, big)}), tmp_path / "c.duckdb")
    assert [f.step for f in LossSpike().check(run)] == [2001]


def _bumped_fine_tune(val_bumps: bool, lr_restart: bool = False) -> list[dict]:
    """An HF Trainer run logged every 50 steps (60 records): the loss falls from ~11000 to ~900, then over eight
    records climbs to ×2.6 that and over eight more comes back near it; evaluations every 250 steps that rise ×1.7
    with it and come back (or keep falling); a constant LR (or one that restarts ×4 where the bump begins)."""
    rng = np.random.default_rng(2)
    steps = np.arange(50, 3001, 50)
    loss = 900 + 10000 * np.exp(-steps / 350.0)
    bump = np.interp(steps, [2200, 2600, 3000], [0, 1500, 150])
    loss = (loss + bump) * np.exp(rng.normal(0, 0.03, steps.size))
    lr = np.where((steps >= 2200) & lr_restart, 1.2e-3, 3e-4)
    hist = [{"loss": round(float(v), 1), "grad_norm": 1.0, "learning_rate": float(r), "epoch": round(s / 500, 3),
             "step": int(s)} for s, v, r in zip(steps, loss, lr)]
    val = 600 + 1400 * np.exp(-np.arange(250, 3001, 250) / 700.0)
    if val_bumps:
        val = val + np.interp(np.arange(250, 3001, 250), [2200, 2500, 3000], [0, 450, 60])
    hist += [{"eval_loss": round(float(v), 1), "epoch": round(s / 500, 3), "step": int(s)}
             for s, v in zip(range(250, 3001, 250), val)]
    return sorted(hist, key=lambda e: (e["step"], "eval_loss" in e))


def test_an_unstable_stretch_that_recovers_beside_the_validation_loss_is_a_spike(tmp_path):
    """A bump of sixteen records (a quarter of the log: no spike window is that short) that doubles the loss and
    comes back, the validation loss rising and falling with it: an unstable stretch a user wants named. The same
    training bump with the validation loss calm, or under an LR restart, is no finding."""
    from tests.runwriters import write_trainer_state

    run = load_run(write_trainer_state(tmp_path / "a", _bumped_fine_tune(True)), tmp_path / "a.duckdb")
    [f] = LossSpike().check(run)
    assert f.evidence["bump"] and 2450 <= f.step <= 2700 and f.evidence["ratio"] >= 2
    assert f.evidence["val_peak"] >= 1.3 * f.evidence["val_before"] and "recovered" in f.summary
    run = load_run(write_trainer_state(tmp_path / "b", _bumped_fine_tune(False)), tmp_path / "b.duckdb")
    assert list(LossSpike().check(run)) == []
    run = load_run(write_trainer_state(tmp_path / "c", _bumped_fine_tune(True, lr_restart=True)), tmp_path / "c.duckdb")
    assert list(LossSpike().check(run)) == []


def test_recurrent_jumps_on_a_long_smooth_descent_fire_whatever_each_undoes(tmp_path):
    """A per-line averaged loss falling 8 -> 0.1 over 4000 lines (±2% noise) that jumps ×4-×7 from its level five
    times and is back within a few lines each time: each jump undoes a few percent of the descent, together they are
    what the user sees. The same log without the jumps is silent."""
    rng = np.random.default_rng(0)
    steps = np.arange(4000)
    loss = (8.0 * np.exp(-steps / 600) + 0.1) * np.exp(rng.normal(0, 0.02, steps.size))
    calm = loss.copy()
    for at, k in ((1500, 4.0), (2100, 6.0), (2700, 5.0), (3300, 7.0), (3800, 4.5)):
        loss[at] *= k
        loss[at + 1] *= k / 2
    found = list(LossSpike().check(load_run(write_tb(tmp_path / "a", {"loss": (steps, loss)}), tmp_path / "a.duckdb")))
    assert found and all(f.kind == "loss_spike" for f in found)
    assert {1500, 2100, 2700, 3300, 3800} <= {s for f in found for s in f.evidence.get("steps", [f.step])}
    assert list(LossSpike().check(load_run(write_tb(tmp_path / "b", {"loss": (steps, calm)}), tmp_path / "b.duckdb"))) == []


def test_a_jump_within_a_per_batch_logs_own_scatter_is_silent(tmp_path):
    """Thirty thousand single-batch losses whose batches scatter ×0.5-×2 around a level of 1 (a segmentation run on
    small batches): one batch at ×3.5 its trailing median sits within the log's own spread. One at ×12 stands out."""
    rng = np.random.default_rng(1)
    steps = np.arange(30000)
    loss = (1.0 + np.exp(-steps / 3000)) * np.exp(rng.normal(0, 0.3, steps.size))
    loss[20000] = 3.5 * np.median(loss[19950:20000])
    run = load_run(write_tb(tmp_path / "a", {"loss": (steps, loss)}), tmp_path / "a.duckdb")
    assert 20000 not in {f.step for f in LossSpike().check(run)}
    loss[20000] *= 12 / 3.5
    run = load_run(write_tb(tmp_path / "b", {"loss": (steps, loss)}), tmp_path / "b.duckdb")
    assert 20000 in {f.step for f in LossSpike().check(run)}


@pytest.mark.parametrize("blows_up", [True, False])
def test_an_rl_value_loss_that_blows_up_again_and_again_is_a_spike(tmp_path, blows_up):
    """An actor-critic agent's TensorBoard tags (stable-baselines3: `rollout/ep_rew_mean`, `train/value_loss`,
    `train/policy_gradient_loss`): the value loss wanders around 10 as the returns move, which is how an agent
    trains; four logs at ×150-×1400 its median, each back at the next log, are blow-ups an expert flags."""
    rng = np.random.default_rng(0)
    steps = np.arange(100, 30100, 100)
    value = 10 * np.exp(rng.normal(0, 0.5, steps.size))
    if blows_up:
        value[[50, 110, 190, 260]] = [1500.0, 14000.0, 4000.0, 2200.0]
    series = {"rollout/ep_rew_mean": (steps, np.linspace(20, 200, steps.size)), "train/value_loss": (steps, value),
              "train/policy_gradient_loss": (steps, rng.normal(0, 0.05, steps.size))}
    found = list(LossSpike().check(load_run(write_tb(tmp_path / "r", series), tmp_path / "f.duckdb")))
    assert [f.evidence.get("spikes") for f in found] == ([4] if blows_up else [])


def test_a_window_the_hf_filter_zeroed_is_no_nonfinite_spike(tmp_path):
    """HF Trainer logs 0.0 for a window whose every step loss was NaN, beside its NaN grad norm, then finite losses
    again. That 0.0 hides a NaN (masked_nonfinite's finding), read as one by the curve detectors; it is no NaN the
    log shows between two finite losses, so no "non-finite spike that recovers"."""
    from tests.runwriters import hf_history, write_trainer_state

    steps = np.arange(10, 410, 10)
    loss = 2.0 * np.exp(-steps / 200) + 0.3
    norm = np.full(steps.size, 1.2)
    loss[20], norm[20] = 0.0, np.nan
    run = load_run(write_trainer_state(tmp_path / "r", hf_history(steps, loss, norm)), tmp_path / "f.duckdb")
    assert list(LossSpike().check(run)) == []


def test_a_burst_orders_of_magnitude_above_its_level_is_a_spike_after_an_enormous_start(tmp_path):
    """An unnormalised regression whose first records sit near 1e8 and fall to ~10 in five steps, then six records
    five to six orders of magnitude above that level and straight back: the burst undoes little of a start that
    high, yet no batch noise rises ×1000, so it is a spike."""
    rng = np.random.default_rng(4)
    steps = np.arange(45)
    loss = 10 * np.exp(rng.normal(0, 0.6, steps.size))
    loss[:5] = [8.2e7, 1.1e8, 2.8e7, 2.6e5, 4.3e6]
    loss[25:31] = [6.9e5, 5.4e5, 8.0e4, 1.8e6, 2.3e6, 7.9e5]
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    [f] = LossSpike().check(run)
    assert 25 <= f.step <= 30 and f.evidence["ratio"] >= 1e3


def test_a_blip_over_a_loss_printed_as_zero_is_no_spike(tmp_path):
    """A memorised training set's loss printed with three decimals: 0.000 for hundreds of epochs with a 0.003 now
    and then. Over a level of 0 a blip has no ratio, and it undoes nothing of the fall from 0.5."""
    steps = np.arange(300)
    loss = np.round(0.5 * np.exp(-steps / 8.0), 3)
    loss[[150, 230]] = 0.003
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, loss)}), tmp_path / "f.duckdb")
    assert list(LossSpike().check(run)) == []


def test_nonfinite_blips_of_a_loss_that_ends_non_finite_are_the_nan_not_spikes(tmp_path):
    """Epoch means of a loss that some batches turned NaN: NaN, finite, NaN for several epochs, NaN at the end. The
    run died of that NaN (nan_loss, critical); its blips are not spikes that recovered. The same blips before a
    finite end are spikes."""
    from forensics.judge.detectors import NanLoss

    steps = np.arange(40)
    ends = 0.6 * 0.99 ** steps
    ends[[10, 30, 34, 35, 36, 38, 39]] = np.nan
    run = load_run(write_tb(tmp_path / "r", {"loss": (steps, ends)}), tmp_path / "f.duckdb")
    assert list(LossSpike().check(run)) == []
    [nan] = NanLoss().check(run)
    assert nan.severity == "critical" and nan.step == 10 and "the last included" in nan.summary
    back = 0.6 * 0.99 ** steps
    back[[30, 34]] = np.nan
    again = load_run(write_tb(tmp_path / "b", {"loss": (steps, back)}), tmp_path / "g.duckdb")
    assert [f.step for f in LossSpike().check(again)] == [30, 34]


# The first ten epochs of a history.csv written by pandas' DataFrame.to_csv (github.com/Maggiebat/
# Network-Intrusion-Detection-CNN@b68e715, results/history.csv).
SPIKE_AT_THE_SECOND_EPOCH = """\
epoch,train_loss,val_loss,val_f1,val_auc,best_auc
1,0.06888123295663937,0.008611397712830773,0.9974414530256492,0.9998334862739439,0.9998334862739439
2,1.2098922375991406,0.0738656189924256,0.9740485423848562,0.9958172519646806,0.9998334862739439
3,0.07615320161266811,0.04369471070528082,0.983916533401189,0.998127422081958,0.9998334862739439
4,0.10847937437043492,0.04721317285335248,0.9868562434290123,0.9982567079227923,0.9998334862739439
5,0.07774187514864672,0.08269514659990057,0.9866979147369472,0.9975643899090954,0.9998334862739439
6,0.056737720760386946,0.17106925300818016,0.9829473354721342,0.9966385874377929,0.9998334862739439
7,0.06382782808128018,0.035316943398629355,0.9914242254840773,0.9990640153372271,0.9998334862739439
8,0.05781542171120177,0.026152781754036132,0.9939599882157816,0.9993358113824232,0.9998334862739439
9,0.03875152688353226,0.027417734352169137,0.9909234367020152,0.9993025132480108,0.9998334862739439
10,0.028883183582255036,0.046521865730810456,0.9804214830327462,0.9990413383423224,0.9998334862739439
"""


def test_a_second_record_x17_its_one_predecessor_and_its_successors_is_a_spike(tmp_path):
    """The loss jumps 0.069 -> 1.21 -> 0.076 at the log's second record: ×17 the record before it and ×16 the median
    of its neighbours, back at once. The second record has one predecessor; as far above it as above the records
    after, it is a spike, not the untrained level. A high first record falling to the rest is none."""
    root = tmp_path / "r"
    (root / "results").mkdir(parents=True)
    (root / "results" / "history.csv").write_text(SPIKE_AT_THE_SECOND_EPOCH)
    [f] = [f for f in LossSpike().check(load_run(root, tmp_path / "f.duckdb"))]
    assert f.evidence["value"] == 1.2098922375991406 and f.evidence["glaring"]
    lines = SPIKE_AT_THE_SECOND_EPOCH.splitlines()
    first_high = "\n".join([lines[0], lines[2].replace("2,", "1,", 1), lines[1].replace("1,", "2,", 1), *lines[3:]])
    other = tmp_path / "o"
    (other / "results").mkdir(parents=True)
    (other / "results" / "history.csv").write_text(first_high + "\n")
    assert list(LossSpike().check(load_run(other, tmp_path / "o.duckdb"))) == []


# PointNet's sem_seg train.py, epochs 9-12 of a retraining (https://github.com/charlesq34/pointnet/issues/282)
POINTNET_EPOCHS = """\
EPOCH 009
----
mean loss: 271829.089959
accuracy: 0.549186
----
eval mean loss: 167083.881273
eval accuracy: 0.421601
eval avg class acc: 0.260372
**** EPOCH 010 ****
----
mean loss: 129570.972106
accuracy: 0.561843
----
eval mean loss: 103253.728045
eval accuracy: 0.484906
eval avg class acc: 0.297415
Model saved in file: log6/model.ckpt
**** EPOCH 011 ****
----
mean loss: 37190426.054835
accuracy: 0.354552
----
eval mean loss: 6327.641183
eval accuracy: 0.462198
eval avg class acc: 0.178751
**** EPOCH 012 ****
----
mean loss: 5618.020521
accuracy: 0.337940
----
eval mean loss: 4386.426989
eval accuracy: 0.203347
eval avg class acc: 0.133981
"""


def _console(tmp_path, text):
    root = tmp_path / "r"
    root.mkdir()
    (root / "log.txt").write_text(text)
    return load_run(root, tmp_path / "f.duckdb")


def test_an_epoch_two_orders_above_both_neighbours_and_the_start_is_a_spike_in_four_records(tmp_path):
    """Four epoch means, the third ×287 the one before it, ×6,600 the one after and above the first: too few records
    for any statistic, and an effect no noise makes. ×38 (under two orders) says nothing at four records."""
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    [f] = LossSpike().check(_console(tmp_path / "a", POINTNET_EPOCHS))
    assert f.evidence["value"] == pytest.approx(37190426.054835) and f.evidence["next_value"] == pytest.approx(5618.020521)
    lower = POINTNET_EPOCHS.replace("mean loss: 37190426.054835", "mean loss: 4919426.054835")
    assert list(LossSpike().check(_console(tmp_path / "b", lower))) == []
