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
