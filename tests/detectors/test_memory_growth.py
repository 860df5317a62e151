"""memory_growth on real TensorBoard event files holding a memory series (as torch.cuda.memory_allocated logs it)."""

import numpy as np

from forensics.judge.detectors import MemoryGrowth
from tests.runwriters import curve, load_run, write_tb

STEPS = np.arange(200) * 10
GB = 2.0 ** 30


def _memory(profile: np.ndarray, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Allocated bytes: the profile plus allocator jitter of a few MB."""
    return STEPS, profile + np.random.default_rng(seed).normal(0, 5e6, STEPS.size)


def _run(tmp_path, memory):
    return load_run(write_tb(tmp_path / "r", {"train/loss": curve(n=200), "memory/allocated_bytes": memory}),
                    tmp_path / "f.duckdb")


def test_fires_on_a_leak_that_grows_every_step(tmp_path):
    """Keeping `loss` (not loss.item()) in a list holds each step's graph: memory grows linearly."""
    run = _run(tmp_path, _memory(2 * GB + 4e6 * STEPS / 10))  # +4 MB per logged step: 2 GB -> 2.8 GB
    [f] = MemoryGrowth().check(run)
    assert f.kind == "memory_growth" and f.step == 200 and f.step_end == 1990
    assert 0.25 < f.evidence["growth"] < 0.45 and f.evidence["slope_per_step"] > 0


def test_flat_memory_after_the_first_steps_is_silent(tmp_path):
    run = _run(tmp_path, _memory(np.where(STEPS < 50, 1 * GB, 3 * GB)))
    assert list(MemoryGrowth().check(run)) == []


def test_caches_filling_over_the_first_third_then_flat_is_silent(tmp_path):
    """The caching allocator grows while new batch shapes arrive in the first epoch, then holds: memory ends far
    above where it was after the warmup (a start/end rule fires), but nothing grows any more."""
    profile = 2 * GB + 1.5 * GB * np.clip(STEPS / 600, 0, 1)
    run = _run(tmp_path, _memory(profile))
    assert list(MemoryGrowth().check(run)) == []


def test_memory_rising_at_every_one_of_a_few_records_is_a_leak(tmp_path):
    """Seven iterations of a custom loop, GPU memory in use +0.03 GB at each (0.18 -> 0.35) while the memory
    available falls: too few points for a trend test, glaring all the same. Four records are too few even so."""
    steps = np.arange(6, 13)
    used = np.array([0.18, 0.21, 0.24, 0.27, 0.29, 0.32, 0.35])
    avail = np.array([190.78, 190.58, 190.38, 190.11, 189.94, 189.67, 189.48])
    loss = (steps, np.linspace(2.473, 2.437, 7))
    run = load_run(write_tb(tmp_path / "a", {"loss": loss, "gpu/memory_current_gb": (steps, used),
                                             "cpu/memory_available_gb": (steps, avail)}), tmp_path / "a.duckdb")
    assert MemoryGrowth().unavailable(run) is None
    [f] = MemoryGrowth().check(run)
    assert f.series == "gpu/memory_current_gb" and f.evidence["points"] == 7 and f.step == 6
    short = load_run(write_tb(tmp_path / "b", {"loss": loss, "gpu/memory_current_gb": (steps[:4], used[:4])}),
                     tmp_path / "b.duckdb")
    assert MemoryGrowth().unavailable(short) is not None
    wobble = used.copy()
    wobble[4] = 0.26  # one record down: use that comes and goes
    run = load_run(write_tb(tmp_path / "c", {"loss": loss, "gpu/memory_current_gb": (steps, wobble)}),
                   tmp_path / "c.duckdb")
    assert MemoryGrowth().unavailable(run) is not None


def test_memory_that_jumps_while_caches_fill_and_then_creeps_is_no_leak(tmp_path):
    """A process's RSS rises at every one of 18 records, but 1776 -> 2749 MB over the first four (caches, the data
    in memory) and +14 MB over the other fourteen: the growth is over."""
    steps = np.arange(18)
    rss = np.r_[1775.8, 2090.2, 2402.1, 2692.1, 2748.9 + np.cumsum(np.full(14, 1.0))]
    run = load_run(write_tb(tmp_path / "a", {"loss": (steps, np.linspace(2.0, 1.0, 18)), "proc/memory_rss_mb": (steps, rss)}),
                   tmp_path / "a.duckdb")
    assert list(MemoryGrowth().check(run)) == []


def test_a_leak_through_a_noisy_sampler_is_judged_by_its_growth(tmp_path):
    """Twelve samples of memory in use, scattered by ±1 GB (other processes, the allocator), rising 8.6 -> 14.2 GB:
    +40% from the head to the tail, a Mann–Kendall p of 0.003. The growth decides; the trend test only guards it (0
    of the pool's 22 healthy runs with memory fire at any p up to 0.05). Its twin scatters as much around a level and
    is silent."""
    steps = np.arange(12) * 100
    used = np.array([8.6, 9.07, 9.24, 10.2, 12.54, 9.76, 12.58, 13.17, 11.83, 11.75, 13.2, 14.21])
    loss = (steps, np.linspace(2.0, 1.0, 12))
    run = load_run(write_tb(tmp_path / "a", {"loss": loss, "gpu/memory_current_gb": (steps, used)}),
                   tmp_path / "a.duckdb")
    [f] = MemoryGrowth().check(run)
    assert f.evidence["growth"] > 0.3 and 1e-3 < f.evidence["mk_p"] < 1e-2
    level = 11.0 + (used - np.linspace(8.6, 14.2, 12))  # the same scatter around a level
    twin = load_run(write_tb(tmp_path / "b", {"loss": loss, "gpu/memory_current_gb": (steps, level)}),
                    tmp_path / "b.duckdb")
    assert list(MemoryGrowth().check(twin)) == []


# Three launches appended to one detectron2 log (cyb1219257828/GRiT@04396a148b2801a69bdcd77075feea5549138c2b:nohup.out,
# from lines 3314-13829: each launch's `Starting training from iteration 0` and 12 of its iteration lines, evenly
# spaced): each launch's peak memory settles at its own config's level (14396M, 10049M, then 16269M).
D2_LAUNCHES = """\
[12/30 10:35:04 detectron2]: Starting training from iteration 0
[12/30 10:35:38 d2.utils.events]:  eta: 1 day, 2:43:50  iter: 20  total_loss: 13.52  loss_box_reg_stage0: 0.02369  loss_box_reg_stage1: 0.03242  loss_box_reg_stage2: 0.009551  loss_centernet_agn_neg: 0.0005735  loss_centernet_agn_pos: 0.5857  loss_centernet_loc: 0.7512  loss_cls_stage0: 0.7197  loss_cls_stage1: 0.6525  loss_cls_stage2: 0.7019  loss_mask: 0.6937  text_decoder_loss: 9.359  time: 0.6258  data_time: 1.0845  lr: 2.3237e-09  max_mem: 5415M
[12/30 12:33:28 d2.utils.events]:  eta: 1 day, 18:37:38  iter: 8240  total_loss: 2.292  loss_box_reg_stage0: 0.2237  loss_box_reg_stage1: 0.2967  loss_box_reg_stage2: 0.2583  loss_centernet_agn_neg: 0.04164  loss_centernet_agn_pos: 0.1365  loss_centernet_loc: 0.3199  loss_cls_stage0: 0.1595  loss_cls_stage1: 0.1458  loss_cls_stage2: 0.1374  loss_mask: 0.3229  text_decoder_loss: 0.2785  time: 0.8536  data_time: 0.0054  lr: 7.7114e-07  max_mem: 12310M
[12/30 14:38:00 d2.utils.events]:  eta: 1 day, 17:06:44  iter: 16460  total_loss: 2.231  loss_box_reg_stage0: 0.1949  loss_box_reg_stage1: 0.275  loss_box_reg_stage2: 0.2562  loss_centernet_agn_neg: 0.03727  loss_centernet_agn_pos: 0.1334  loss_centernet_loc: 0.285  loss_cls_stage0: 0.1509  loss_cls_stage1: 0.1512  loss_cls_stage2: 0.1338  loss_mask: 0.3034  text_decoder_loss: 0.2287  time: 0.8781  data_time: 0.0052  lr: 7.5929e-07  max_mem: 13519M
[12/30 16:43:36 d2.utils.events]:  eta: 1 day, 15:20:25  iter: 24680  total_loss: 2.198  loss_box_reg_stage0: 0.1891  loss_box_reg_stage1: 0.2816  loss_box_reg_stage2: 0.2495  loss_centernet_agn_neg: 0.03567  loss_centernet_agn_pos: 0.1182  loss_centernet_loc: 0.2707  loss_cls_stage0: 0.1442  loss_cls_stage1: 0.154  loss_cls_stage2: 0.1424  loss_mask: 0.3089  text_decoder_loss: 0.2897  time: 0.8888  data_time: 0.0051  lr: 7.3981e-07  max_mem: 13519M
[12/30 18:49:49 d2.utils.events]:  eta: 1 day, 13:23:29  iter: 32900  total_loss: 2.012  loss_box_reg_stage0: 0.1713  loss_box_reg_stage1: 0.2677  loss_box_reg_stage2: 0.239  loss_centernet_agn_neg: 0.03528  loss_centernet_agn_pos: 0.1058  loss_centernet_loc: 0.241  loss_cls_stage0: 0.1173  loss_cls_stage1: 0.1209  loss_cls_stage2: 0.1264  loss_mask: 0.2733  text_decoder_loss: 0.1794  time: 0.8954  data_time: 0.0063  lr: 7.1312e-07  max_mem: 13519M
[12/30 20:56:05 d2.utils.events]:  eta: 1 day, 11:13:42  iter: 41120  total_loss: 1.95  loss_box_reg_stage0: 0.1703  loss_box_reg_stage1: 0.2792  loss_box_reg_stage2: 0.2569  loss_centernet_agn_neg: 0.03516  loss_centernet_agn_pos: 0.1081  loss_centernet_loc: 0.2367  loss_cls_stage0: 0.1187  loss_cls_stage1: 0.119  loss_cls_stage2: 0.121  loss_mask: 0.2816  text_decoder_loss: 0.15  time: 0.8995  data_time: 0.0052  lr: 6.7974e-07  max_mem: 13596M
[12/30 23:02:33 d2.utils.events]:  eta: 1 day, 9:21:56  iter: 49340  total_loss: 1.944  loss_box_reg_stage0: 0.1841  loss_box_reg_stage1: 0.2888  loss_box_reg_stage2: 0.2563  loss_centernet_agn_neg: 0.03656  loss_centernet_agn_pos: 0.1136  loss_centernet_loc: 0.2459  loss_cls_stage0: 0.1342  loss_cls_stage1: 0.1456  loss_cls_stage2: 0.1331  loss_mask: 0.2685  text_decoder_loss: 0.135  time: 0.9025  data_time: 0.0048  lr: 6.4037e-07  max_mem: 13596M
[12/31 01:09:06 d2.utils.events]:  eta: 1 day, 7:11:01  iter: 57560  total_loss: 1.813  loss_box_reg_stage0: 0.1564  loss_box_reg_stage1: 0.2551  loss_box_reg_stage2: 0.241  loss_centernet_agn_neg: 0.02966  loss_centernet_agn_pos: 0.09849  loss_centernet_loc: 0.2192  loss_cls_stage0: 0.108  loss_cls_stage1: 0.1105  loss_cls_stage2: 0.1063  loss_mask: 0.2478  text_decoder_loss: 0.1412  time: 0.9047  data_time: 0.0058  lr: 5.9581e-07  max_mem: 13596M
[12/31 03:15:48 d2.utils.events]:  eta: 1 day, 5:03:37  iter: 65780  total_loss: 1.854  loss_box_reg_stage0: 0.1724  loss_box_reg_stage1: 0.2775  loss_box_reg_stage2: 0.2677  loss_centernet_agn_neg: 0.03174  loss_centernet_agn_pos: 0.1056  loss_centernet_loc: 0.2303  loss_cls_stage0: 0.1226  loss_cls_stage1: 0.1253  loss_cls_stage2: 0.1314  loss_mask: 0.2627  text_decoder_loss: 0.1085  time: 0.9066  data_time: 0.0058  lr: 5.4697e-07  max_mem: 13596M
[12/31 05:22:29 d2.utils.events]:  eta: 1 day, 3:03:04  iter: 74000  total_loss: 1.875  loss_box_reg_stage0: 0.1702  loss_box_reg_stage1: 0.2852  loss_box_reg_stage2: 0.2591  loss_centernet_agn_neg: 0.03277  loss_centernet_agn_pos: 0.09682  loss_centernet_loc: 0.2358  loss_cls_stage0: 0.1181  loss_cls_stage1: 0.1254  loss_cls_stage2: 0.1182  loss_mask: 0.2672  text_decoder_loss: 0.1219  time: 0.9080  data_time: 0.0062  lr: 4.9486e-07  max_mem: 13596M
[12/31 07:29:10 d2.utils.events]:  eta: 1 day, 0:52:42  iter: 82220  total_loss: 1.746  loss_box_reg_stage0: 0.1609  loss_box_reg_stage1: 0.2827  loss_box_reg_stage2: 0.3008  loss_centernet_agn_neg: 0.02795  loss_centernet_agn_pos: 0.09583  loss_centernet_loc: 0.1997  loss_cls_stage0: 0.1166  loss_cls_stage1: 0.1116  loss_cls_stage2: 0.1065  loss_mask: 0.2448  text_decoder_loss: 0.09039  time: 0.9091  data_time: 0.0054  lr: 4.4056e-07  max_mem: 13995M
[12/31 09:36:06 d2.utils.events]:  eta: 22:41:11  iter: 90440  total_loss: 1.842  loss_box_reg_stage0: 0.1844  loss_box_reg_stage1: 0.2972  loss_box_reg_stage2: 0.2881  loss_centernet_agn_neg: 0.02993  loss_centernet_agn_pos: 0.09126  loss_centernet_loc: 0.2169  loss_cls_stage0: 0.1188  loss_cls_stage1: 0.1213  loss_cls_stage2: 0.1134  loss_mask: 0.2748  text_decoder_loss: 0.07758  time: 0.9102  data_time: 0.0047  lr: 3.8516e-07  max_mem: 14396M
[12/31 17:28:44 detectron2]: Starting training from iteration 0
[12/31 17:29:09 d2.utils.events]:  eta: 2:46:38  iter: 20  total_loss: 12.52  loss_box_reg_stage0: 0.005752  loss_box_reg_stage1: 0.002583  loss_box_reg_stage2: 0.0002047  loss_centernet_agn_neg: 0.005887  loss_centernet_agn_pos: 0.5622  loss_centernet_loc: 0.7091  loss_cls_stage0: 0.7451  loss_cls_stage1: 0.6628  loss_cls_stage2: 0.7114  text_decoder_loss: 9.112  time: 0.5092  data_time: 0.7029  lr: 1.5447e-09  max_mem: 5393M
[12/31 17:50:25 d2.utils.events]:  eta: 4:03:44  iter: 1680  total_loss: 1.432  loss_box_reg_stage0: 0.05552  loss_box_reg_stage1: 0.121  loss_box_reg_stage2: 0.1418  loss_centernet_agn_neg: 0.02846  loss_centernet_agn_pos: 0.09777  loss_centernet_loc: 0.2021  loss_cls_stage0: 0.03635  loss_cls_stage1: 0.04051  loss_cls_stage2: 0.03819  text_decoder_loss: 0.6584  time: 0.7611  data_time: 0.0045  lr: 7.6203e-07  max_mem: 9624M
[12/31 18:13:23 d2.utils.events]:  eta: 3:50:37  iter: 3340  total_loss: 1.135  loss_box_reg_stage0: 0.04253  loss_box_reg_stage1: 0.094  loss_box_reg_stage2: 0.1239  loss_centernet_agn_neg: 0.01965  loss_centernet_agn_pos: 0.06528  loss_centernet_loc: 0.1806  loss_cls_stage0: 0.03201  loss_cls_stage1: 0.03566  loss_cls_stage2: 0.03412  text_decoder_loss: 0.4654  time: 0.7931  data_time: 0.0045  lr: 7.2369e-07  max_mem: 9908M
[12/31 18:36:16 d2.utils.events]:  eta: 3:26:51  iter: 5000  total_loss: 1.06  loss_box_reg_stage0: 0.0463  loss_box_reg_stage1: 0.1017  loss_box_reg_stage2: 0.1402  loss_centernet_agn_neg: 0.01945  loss_centernet_agn_pos: 0.07548  loss_centernet_loc: 0.1378  loss_cls_stage0: 0.02962  loss_cls_stage1: 0.03023  loss_cls_stage2: 0.03521  text_decoder_loss: 0.4136  time: 0.8021  data_time: 0.0059  lr: 6.6267e-07  max_mem: 10049M
[12/31 18:58:59 d2.utils.events]:  eta: 3:02:26  iter: 6660  total_loss: 1.063  loss_box_reg_stage0: 0.04358  loss_box_reg_stage1: 0.09746  loss_box_reg_stage2: 0.1381  loss_centernet_agn_neg: 0.02377  loss_centernet_agn_pos: 0.06277  loss_centernet_loc: 0.1422  loss_cls_stage0: 0.03023  loss_cls_stage1: 0.03483  loss_cls_stage2: 0.04125  text_decoder_loss: 0.4125  time: 0.8054  data_time: 0.0066  lr: 5.8305e-07  max_mem: 10049M
[12/31 19:21:36 d2.utils.events]:  eta: 2:38:56  iter: 8320  total_loss: 0.7681  loss_box_reg_stage0: 0.03181  loss_box_reg_stage1: 0.07235  loss_box_reg_stage2: 0.104  loss_centernet_agn_neg: 0.01982  loss_centernet_agn_pos: 0.04786  loss_centernet_loc: 0.1178  loss_cls_stage0: 0.02163  loss_cls_stage1: 0.02466  loss_cls_stage2: 0.02457  text_decoder_loss: 0.3177  time: 0.8068  data_time: 0.0058  lr: 4.9029e-07  max_mem: 10049M
[12/31 19:44:10 d2.utils.events]:  eta: 2:15:46  iter: 9980  total_loss: 0.747  loss_box_reg_stage0: 0.03378  loss_box_reg_stage1: 0.07251  loss_box_reg_stage2: 0.08823  loss_centernet_agn_neg: 0.02483  loss_centernet_agn_pos: 0.05891  loss_centernet_loc: 0.1306  loss_cls_stage0: 0.02405  loss_cls_stage1: 0.02884  loss_cls_stage2: 0.02822  text_decoder_loss: 0.2676  time: 0.8074  data_time: 0.0045  lr: 3.9048e-07  max_mem: 10049M
[12/31 20:06:39 d2.utils.events]:  eta: 1:52:42  iter: 11640  total_loss: 0.7118  loss_box_reg_stage0: 0.03128  loss_box_reg_stage1: 0.06934  loss_box_reg_stage2: 0.09513  loss_centernet_agn_neg: 0.01899  loss_centernet_agn_pos: 0.05095  loss_centernet_loc: 0.1181  loss_cls_stage0: 0.02096  loss_cls_stage1: 0.02489  loss_cls_stage2: 0.02631  text_decoder_loss: 0.1821  time: 0.8075  data_time: 0.0041  lr: 2.9059e-07  max_mem: 10049M
[12/31 20:29:02 d2.utils.events]:  eta: 1:30:00  iter: 13300  total_loss: 0.7354  loss_box_reg_stage0: 0.03358  loss_box_reg_stage1: 0.08135  loss_box_reg_stage2: 0.1098  loss_centernet_agn_neg: 0.01939  loss_centernet_agn_pos: 0.04703  loss_centernet_loc: 0.1269  loss_cls_stage0: 0.02096  loss_cls_stage1: 0.02329  loss_cls_stage2: 0.03084  text_decoder_loss: 0.2061  time: 0.8071  data_time: 0.0042  lr: 1.9718e-07  max_mem: 10049M
[12/31 20:51:17 d2.utils.events]:  eta: 1:07:41  iter: 14960  total_loss: 0.6135  loss_box_reg_stage0: 0.02982  loss_box_reg_stage1: 0.07401  loss_box_reg_stage2: 0.1101  loss_centernet_agn_neg: 0.01467  loss_centernet_agn_pos: 0.04114  loss_centernet_loc: 0.1035  loss_cls_stage0: 0.01732  loss_cls_stage1: 0.02273  loss_cls_stage2: 0.02182  text_decoder_loss: 0.1559  time: 0.8063  data_time: 0.0043  lr: 1.1663e-07  max_mem: 10049M
[12/31 21:13:33 d2.utils.events]:  eta: 0:45:21  iter: 16620  total_loss: 0.6276  loss_box_reg_stage0: 0.03062  loss_box_reg_stage1: 0.07822  loss_box_reg_stage2: 0.1047  loss_centernet_agn_neg: 0.01402  loss_centernet_agn_pos: 0.04783  loss_centernet_loc: 0.12  loss_cls_stage0: 0.01773  loss_cls_stage1: 0.01939  loss_cls_stage2: 0.02409  text_decoder_loss: 0.1363  time: 0.8057  data_time: 0.0047  lr: 5.4405e-08  max_mem: 10049M
[12/31 21:35:49 d2.utils.events]:  eta: 0:23:02  iter: 18280  total_loss: 0.5229  loss_box_reg_stage0: 0.02687  loss_box_reg_stage1: 0.06011  loss_box_reg_stage2: 0.09247  loss_centernet_agn_neg: 0.01705  loss_centernet_agn_pos: 0.03682  loss_centernet_loc: 0.09702  loss_cls_stage0: 0.01614  loss_cls_stage1: 0.01926  loss_cls_stage2: 0.02121  text_decoder_loss: 0.1311  time: 0.8052  data_time: 0.0048  lr: 1.4633e-08  max_mem: 10049M
[01/01 12:01:37 detectron2]: Starting training from iteration 0
[01/01 12:02:02 d2.utils.events]:  eta: 2:47:36  iter: 20  total_loss: 12.66  loss_box_reg_stage0: 0.0844  loss_box_reg_stage1: 0.06617  loss_box_reg_stage2: 0.02834  loss_centernet_agn_neg: 0.009537  loss_centernet_agn_pos: 0.5445  loss_centernet_loc: 0.7121  loss_cls_stage0: 0.6436  loss_cls_stage1: 0.7429  loss_cls_stage2: 0.6575  text_decoder_loss: 9.143  time: 0.5098  data_time: 0.7040  lr: 1.5447e-09  max_mem: 5394M
[01/01 12:23:47 d2.utils.events]:  eta: 4:42:49  iter: 1540  total_loss: 1.885  loss_box_reg_stage0: 0.09862  loss_box_reg_stage1: 0.2294  loss_box_reg_stage2: 0.3631  loss_centernet_agn_neg: 0.02626  loss_centernet_agn_pos: 0.0852  loss_centernet_loc: 0.1922  loss_cls_stage0: 0.04814  loss_cls_stage1: 0.06626  loss_cls_stage2: 0.06978  text_decoder_loss: 0.7011  time: 0.8494  data_time: 0.0045  lr: 7.6415e-07  max_mem: 15780M
[01/01 12:47:41 d2.utils.events]:  eta: 4:26:17  iter: 3060  total_loss: 1.56  loss_box_reg_stage0: 0.0836  loss_box_reg_stage1: 0.1893  loss_box_reg_stage2: 0.2933  loss_centernet_agn_neg: 0.02192  loss_centernet_agn_pos: 0.05947  loss_centernet_loc: 0.1567  loss_cls_stage0: 0.03646  loss_cls_stage1: 0.04354  loss_cls_stage2: 0.04823  text_decoder_loss: 0.5441  time: 0.8940  data_time: 0.0049  lr: 7.3184e-07  max_mem: 16269M
[01/01 13:11:20 d2.utils.events]:  eta: 3:56:54  iter: 4580  total_loss: 1.28  loss_box_reg_stage0: 0.07821  loss_box_reg_stage1: 0.1829  loss_box_reg_stage2: 0.2867  loss_centernet_agn_neg: 0.02142  loss_centernet_agn_pos: 0.05514  loss_centernet_loc: 0.152  loss_cls_stage0: 0.03244  loss_cls_stage1: 0.03946  loss_cls_stage2: 0.04386  text_decoder_loss: 0.4215  time: 0.9054  data_time: 0.0048  lr: 6.8003e-07  max_mem: 16269M
[01/01 13:34:42 d2.utils.events]:  eta: 3:33:23  iter: 6100  total_loss: 1.274  loss_box_reg_stage0: 0.06622  loss_box_reg_stage1: 0.164  loss_box_reg_stage2: 0.2461  loss_centernet_agn_neg: 0.02231  loss_centernet_agn_pos: 0.05651  loss_centernet_loc: 0.1389  loss_cls_stage0: 0.03649  loss_cls_stage1: 0.04561  loss_cls_stage2: 0.05325  text_decoder_loss: 0.3534  time: 0.9086  data_time: 0.0044  lr: 6.117e-07  max_mem: 16269M
[01/01 13:58:10 d2.utils.events]:  eta: 3:10:46  iter: 7620  total_loss: 1.14  loss_box_reg_stage0: 0.06683  loss_box_reg_stage1: 0.1613  loss_box_reg_stage2: 0.2276  loss_centernet_agn_neg: 0.01702  loss_centernet_agn_pos: 0.06601  loss_centernet_loc: 0.1486  loss_cls_stage0: 0.03162  loss_cls_stage1: 0.04038  loss_cls_stage2: 0.0408  text_decoder_loss: 0.3002  time: 0.9112  data_time: 0.0045  lr: 5.3056e-07  max_mem: 16269M
[01/01 14:21:23 d2.utils.events]:  eta: 2:45:48  iter: 9140  total_loss: 1.104  loss_box_reg_stage0: 0.06437  loss_box_reg_stage1: 0.1552  loss_box_reg_stage2: 0.2417  loss_centernet_agn_neg: 0.02044  loss_centernet_agn_pos: 0.05793  loss_centernet_loc: 0.1336  loss_cls_stage0: 0.0339  loss_cls_stage1: 0.05195  loss_cls_stage2: 0.06572  text_decoder_loss: 0.2647  time: 0.9113  data_time: 0.0045  lr: 4.4144e-07  max_mem: 16269M
[01/01 14:44:28 d2.utils.events]:  eta: 2:20:23  iter: 10660  total_loss: 0.9369  loss_box_reg_stage0: 0.0559  loss_box_reg_stage1: 0.1427  loss_box_reg_stage2: 0.2379  loss_centernet_agn_neg: 0.01228  loss_centernet_agn_pos: 0.03392  loss_centernet_loc: 0.1164  loss_cls_stage0: 0.02377  loss_cls_stage1: 0.0321  loss_cls_stage2: 0.03853  text_decoder_loss: 0.2279  time: 0.9105  data_time: 0.0049  lr: 3.4921e-07  max_mem: 16269M
[01/01 15:07:21 d2.utils.events]:  eta: 1:57:41  iter: 12180  total_loss: 0.9835  loss_box_reg_stage0: 0.06389  loss_box_reg_stage1: 0.1426  loss_box_reg_stage2: 0.2372  loss_centernet_agn_neg: 0.01792  loss_centernet_agn_pos: 0.05409  loss_centernet_loc: 0.1277  loss_cls_stage0: 0.03135  loss_cls_stage1: 0.04437  loss_cls_stage2: 0.05008  text_decoder_loss: 0.1837  time: 0.9091  data_time: 0.0045  lr: 2.5914e-07  max_mem: 16269M
[01/01 15:30:04 d2.utils.events]:  eta: 1:33:53  iter: 13700  total_loss: 0.8873  loss_box_reg_stage0: 0.06168  loss_box_reg_stage1: 0.138  loss_box_reg_stage2: 0.2264  loss_centernet_agn_neg: 0.02158  loss_centernet_agn_pos: 0.04598  loss_centernet_loc: 0.1147  loss_cls_stage0: 0.0306  loss_cls_stage1: 0.03732  loss_cls_stage2: 0.04328  text_decoder_loss: 0.1649  time: 0.9071  data_time: 0.0047  lr: 1.7636e-07  max_mem: 16269M
[01/01 15:52:22 d2.utils.events]:  eta: 1:10:06  iter: 15220  total_loss: 0.7674  loss_box_reg_stage0: 0.05068  loss_box_reg_stage1: 0.1304  loss_box_reg_stage2: 0.2127  loss_centernet_agn_neg: 0.01605  loss_centernet_agn_pos: 0.0366  loss_centernet_loc: 0.1002  loss_cls_stage0: 0.02308  loss_cls_stage1: 0.03097  loss_cls_stage2: 0.03653  text_decoder_loss: 0.1286  time: 0.9039  data_time: 0.0048  lr: 1.0554e-07  max_mem: 16269M
[01/01 16:14:33 d2.utils.events]:  eta: 0:47:26  iter: 16740  total_loss: 0.8029  loss_box_reg_stage0: 0.05382  loss_box_reg_stage1: 0.131  loss_box_reg_stage2: 0.1995  loss_centernet_agn_neg: 0.02165  loss_centernet_agn_pos: 0.05561  loss_centernet_loc: 0.1258  loss_cls_stage0: 0.02614  loss_cls_stage1: 0.0324  loss_cls_stage2: 0.03559  text_decoder_loss: 0.1216  time: 0.9009  data_time: 0.0054  lr: 5.0702e-08  max_mem: 16269M
"""


def test_memory_is_judged_within_each_launch_appended_to_the_log(tmp_path):
    """Read across the launches, memory climbs from 5415M to 16269M; within each it rises at the start and holds."""
    root = tmp_path / "r"
    root.mkdir()
    (root / "nohup.out").write_text(D2_LAUNCHES)
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.launch_starts(run.pick("memory"))
    assert list(MemoryGrowth().check(run)) == []
