"""exploding_gradients: the gradient norm jumps by orders of magnitude or grows until it is non-finite."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from forensics.judge import stats
from forensics.judge.detectors.base import MECHANISM, level_of, point, src, too_short
from forensics.judge.findings import Finding
from forensics.judge.numbers import ratio
from forensics.judge.run import Run


@dataclass(frozen=True)
class ExplodingGradients:
    """The gradient norm jumps by orders of magnitude, or grows until it is non-finite.

    Detects: episodes where the global gradient norm stays at least `factor` above its reference (the lowest trailing
    median over `window` points so far, within the launch: `Run.launch_starts`) for `min_points` points or more, or ends non-finite, or peaks `huge_factor`
    above it; episodes less than `window` points apart are one; the onset is the last point within `calm_factor`.
    A window whose norms are mostly exactly 0 or non-finite (`min_valid_share`: skipped fp16 steps) sets no
    reference, and an episode right after one has no level it rose from.
    A sustained episode counts only as an explosion: `huge_factor`, or the loss pays (its median `loss_rise` above
    before, `loss_z` standard errors, giving back `loss_giveback` of the gain), or fast growth (×2 to ×`factor`
    within `fast_points`, counted from where the norm first stood ×2) that never comes back and holds
    `sustained_factor` × its level before. Shorter episodes that come back are spikes; one the log ends on counts
    only at `huge_factor`. A norm that turns non-finite without growing first is the NaN's symptom, not this.
    Effect size first: a norm rising at each of its last `geometric_points` or more, ×`factor` over them, no record
    over `geometric_step_share` of the growth (log scale), grows geometrically.
    Why: a norm that explodes precedes NaN losses and weights; a single bad batch makes a spike, not this.
    Evidence: onset and end step, norm before (baseline), peak norm, factor, growth per step (Theil–Sen on
    log10), points from ×2 to ×factor, the loss's change over the episode, whether it ends non-finite.
    Critical when it ends non-finite or the loss turns non-finite.
    False alarms: 0 of the 399 healthy runs it could check (benchmarks/calibrate.py); 0 of the 40 healthy real runs.
    """

    kind: ClassVar[str] = "exploding_gradients"
    stage: ClassVar[int] = MECHANISM
    joins_chain: ClassVar[bool] = True  # one event with the NaN its step range holds
    requires: ClassVar[tuple[str, ...]] = ("grad_norm",)
    window: int = 30  # trailing points of the reference level
    factor: float = 10.0  # an order of magnitude above the reference
    min_points: int = 3  # sustained: a single point above is a spike (loss_spike's business), not this
    huge_factor: float = 1000.0  # three orders of magnitude: an explosion whatever the loss does
    fast_points: int = 10  # ×2 to ×factor within this many logged points is exponential growth
    loss_rise: float = 0.2  # the loss's median over the episode 20% above before: the loss pays for it
    loss_z: float = 3.0  # ... and that rise 3 standard errors beyond the loss's own noise
    sustained_factor: float = 3.0  # fast growth must hold: the episode's median norm ×3 its median before
    loss_giveback: float = 0.05  # ... and gives back 5% of what training had gained (initial level − before)
    min_series: int = 8  # fewer points have no reference level
    calm_factor: float = 2.0  # within ×2 of the reference the norm is calm: the onset is the last calm point
    onset_lookback: int = 4  # ... looked for up to this many windows back
    start_points: int = stats.START_POINTS  # the initial level: the median of the first this many points
    geometric_points: int = 5  # a norm rising at every one of its last 5 points or more, ×`factor` over them, to the end
    geometric_step_share: float = 0.5  # ... no single record more than half of that growth (on a log scale)
    min_valid_share: float = 0.5  # a reference window needs half its norms finite and above 0

    def _rise_points(self, excess: np.ndarray, a: int, b: int) -> int | None:
        """Logged points from ×`calm_factor` to ×`factor` above the reference: from the first point of the episode
        at ×2, or, when the episode already starts above ×2 (no calm point to place its onset at: the norm grew
        from the first points), from where that stretch above ×2 began. None without both."""
        two, ten = np.log10(self.calm_factor), np.log10(self.factor)
        up2 = np.flatnonzero(excess[a:b + 1] >= two)
        up10 = np.flatnonzero(excess[a:b + 1] >= ten)
        if not (up2.size and up10.size):
            return None
        start = a + int(up2[0])
        while start > 0 and excess[start - 1] >= two:  # NaN (no reference yet) ends the stretch
            start -= 1
        return a + int(up10[0]) - start

    def unavailable(self, run: Run) -> str | None:
        short = too_short(run, "grad_norm", self.min_series)
        if short and self._geometric(*run.arrays("grad_norm")) is None:
            return short  # under `min_series` points only a norm growing at every record can speak
        return None

    def check(self, run: Run) -> Iterator[Finding]:
        found = list(self._episodes(run)) if not too_short(run, "grad_norm", self.min_series) else []
        if not found:
            steps, g = run.arrays("grad_norm")
            hit = self._geometric(steps, g)
            if hit is not None:
                found = [self._geometric_finding(run, steps, g, hit)]
        yield from found

    def _geometric(self, steps: np.ndarray, g: np.ndarray) -> int | None:
        """Where a run of growth the log ends on begins: the norm rises at every one of its last
        `geometric_points` points or more and ends `factor` × where that run began. None otherwise."""
        k = stats.rising_tail(g)
        if k < self.geometric_points or not g[-k] > 0 or not g[-1] >= self.factor * g[-k]:
            return None
        steps_up = np.diff(np.log(g[-k:]))
        if float(steps_up.max()) > self.geometric_step_share * float(steps_up.sum()):
            return None  # one jump makes most of it: a jump the log ends on, not growth at every record
        return g.size - k

    def _geometric_finding(self, run: Run, steps: np.ndarray, g: np.ndarray, a: int) -> Finding:
        n = g.size - a
        per = (g[-1] / g[a]) ** (1 / (n - 1))
        ev = {"onset_step": int(steps[a]), "end_step": int(steps[-1]), "norm_before": float(g[a]),
              "peak_norm": float(g[-1]), "factor": float(g[-1] / g[a]), "points": int(n), "growth_per_record": per,
              "ends_nonfinite": False, "rising_at_every_record": True}
        return Finding.of(self, severity="warning", step=int(steps[a]), step_end=int(steps[-1]),
                          series=run.pick("grad_norm"), evidence=ev, sources=(src(run, "grad_norm", steps[a:]),),
                          summary=(f"gradient norm rises at every one of its last {n} points, from {g[a]:.3g} at step "
                                   f"{steps[a]} to {g[-1]:.3g} at step {steps[-1]} ({ratio(ev['factor'])}, about "
                                   f"{ratio(per)} a record): it grows geometrically to the end of the log"))

    def _episodes(self, run: Run) -> Iterator[Finding]:
        """Episodes above the trailing reference (docstring)."""
        steps, g = run.arrays("grad_norm")
        with np.errstate(divide="ignore", invalid="ignore"):
            lg = np.where(np.isfinite(g) & (g > 0), np.log10(np.where(g > 0, g, 1.0)), np.nan)
        # the trailing level and the lowest one so far, within each launch appended to the log (`Run.launch_starts`):
        # no ratio reads across a fresh start
        cuts = np.searchsorted(steps, np.asarray(run.launch_starts(run.pick("grad_norm")), dtype=np.int64))
        trailing = np.concatenate([stats.rolling_baseline(p, self.window)[0] for p in np.split(lg, cuts) if p.size])
        # a window mostly of norms exactly 0 or non-finite (steps an fp16 scaler skipped) is no reference level: the
        # few positive norms among them set none
        valid = np.isfinite(lg).astype(float)
        share = np.r_[np.nan, np.convolve(valid, np.ones(self.window), "full")[:valid.size - 1]
                      / np.minimum(np.arange(1, valid.size), self.window)]
        trailing = np.where(share >= self.min_valid_share, trailing, np.nan)
        base = np.concatenate([np.fmin.accumulate(p) for p in np.split(
            np.where(np.isfinite(trailing), trailing, np.inf), cuts) if p.size])
        base = np.where(np.isfinite(base), base, np.nan)
        nonfinite = ~np.isfinite(g) & (np.arange(g.size) > 0)
        excess = lg - base
        mask = (excess >= np.log10(self.factor)) | nonfinite
        calm = np.flatnonzero(excess < np.log10(self.calm_factor))
        loss_onset = None
        if run.has("loss"):
            ls, lv = run.arrays("loss")
            if (~np.isfinite(lv)).any():
                loss_onset = int(ls[np.argmax(~np.isfinite(lv))])
        episodes: list[list[int]] = []
        for a, b in stats.runs_of(mask):  # episodes closer than `window` points are one explosion
            if episodes and a - episodes[-1][1] <= self.window:
                episodes[-1][1] = b
            else:
                episodes.append([a, b])
        for a, b in episodes:
            before = calm[calm < a]
            if before.size and a - before[-1] <= self.onset_lookback * self.window:
                a = int(before[-1]) + 1
            k = a + int(np.argmax(excess[a:b + 1] >= np.log10(self.factor)))  # the first point ×factor up
            if k > a and np.mean(np.isfinite(lg[max(0, k - self.window):k])) < self.min_valid_share:
                continue  # the norms before the rise are mostly 0 or non-finite: no level it rose from
            pre = lg[max(0, a - self.window):a]
            around = lg[max(0, a - self.window):a + 1]
            b0 = base[a] if np.isfinite(base[a]) else (np.nanmedian(around) if np.isfinite(around).any() else np.nan)
            if not np.isfinite(b0):
                continue
            seg = lg[a:b + 1]
            if not np.any(excess[a:b + 1] >= np.log10(self.factor)):
                continue  # only non-finite norms, no growth first: the NaN's symptom, listed under nonfinite
            peak = float(np.nanmax(seg)) if np.isfinite(seg).any() else float("inf")
            # counted above ×factor, not over the episode: its onset moved back to the last calm point, so one
            # spike after a stretch between ×2 and ×10 made a "long" episode (spike_corrupt_batches' ×1000
            # batches, once its `train/grad_norm_preclip` was read as the gradient norm it is)
            above = int(np.sum(excess[a:b + 1] >= np.log10(self.factor)))
            long = above >= self.min_points
            huge = peak - b0 >= np.log10(self.huge_factor) and above >= 2  # a single point is a spike, however tall
            # ... except on the log's last point: nothing shows it coming back, so ×huge_factor there is enough
            # (a pre-clip norm that ends at 11140 after 5-15)
            ends_huge = b == g.size - 1 and peak - b0 >= np.log10(self.huge_factor)
            if not (long or bool(nonfinite[a:b + 1].any()) or ends_huge):
                continue  # too few points above ×factor: a spike that came back, or one the log ends on
            rise_points = self._rise_points(excess, a, b)
            fast = rise_points is not None and rise_points <= self.fast_points
            paid_by = _loss_change(run, steps, a, b, self.window, self.start_points)
            loss_change = paid_by[0] if paid_by else None
            paid = (paid_by is not None and paid_by[0] >= self.loss_rise and paid_by[1] >= self.loss_z
                    and paid_by[2] >= self.loss_giveback)
            unrecovered = b == g.size - 1 or bool(nonfinite[a:b + 1].any())  # still up when the log ends
            held = (not np.isfinite(seg).any() or not np.isfinite(pre).any()  # all non-finite or no before: held
                    or float(np.nanmedian(seg)) - float(np.nanmedian(pre)) >= np.log10(self.sustained_factor))
            if not (huge or paid or (fast and unrecovered and held)):
                continue  # late, slow growth the loss does not pay for: no explosion
            near_nan = loss_onset is not None and steps[a] <= loss_onset <= steps[min(b + 1, g.size - 1)] + self.window
            slope, _ = stats.theil_sen(steps[a:b + 1], seg) if np.isfinite(seg).sum() >= 2 else (float("nan"), 0)
            ev = {"onset_step": int(steps[a]), "end_step": int(steps[b]), "norm_before": 10 ** b0,
                  "peak_norm": 10 ** peak, "factor": 10 ** (peak - b0), "points": int(b - a + 1),
                  "log10_growth_per_step": slope, "ends_nonfinite": bool(nonfinite[a:b + 1].any()),
                  "loss_nonfinite_step": loss_onset, "points_x2_to_factor": rise_points,
                  "loss_change_over_episode": loss_change}
            severe = ev["ends_nonfinite"] or near_nan
            yield Finding.of(self, severity="critical" if severe else "warning", step=int(steps[a]),
                             step_end=int(steps[b]), series=run.pick("grad_norm"), evidence=ev,
                             sources=(src(run, "grad_norm", steps[max(0, a - self.window):b + 1]),),
                             summary=_rise(steps, g, a, b, self.window, ev))


def _rise(steps: np.ndarray, g: np.ndarray, a: int, b: int, window: int, ev: dict) -> str:
    """The sentence, with the file's numbers: the median of the `window` logged norms before the episode, and its
    highest logged norm with the step (the evidence keeps the detector's own reference, a running low of trailing
    log-medians)."""
    before = g[max(0, a - window):a]
    seg = np.where(np.isfinite(g[a:b + 1]), g[a:b + 1], -np.inf)
    ends = " and turns non-finite" if ev["ends_nonfinite"] else ""
    ref, ref_text = (level_of(steps, g, max(0, a - window), a - 1, ".3g") if np.isfinite(before).any()
                     else (np.nan, ""))
    if not np.isfinite(seg).any() or not ref > 0:  # norms of exactly 0 (skipped steps) are no level to quote
        return (f"gradient norm rises from about {ev['norm_before']:.3g} to {ev['peak_norm']:.3g} "
                f"({ratio(ev['factor'])}) over steps {steps[a]}-{steps[b]}{ends}")
    top = a + int(np.argmax(seg))
    return (f"gradient norm rises from {'the ' if a - 1 > max(0, a - window) else ''}{ref_text} to "
            f"{point(steps, g, top, '.3g')} ({ratio(g[top] / ref)}) over steps {steps[a]}-{steps[b]}{ends}")


def _loss_change(run: Run, steps: np.ndarray, a: int, b: int, window: int,
                 start_points: int = stats.START_POINTS) -> tuple[float, float, float] | None:
    """(change, z, giveback) of the loss over grad-norm points a..b: its median there relative to its median over
    the `window` grad-norm points before a, minus 1 (0.2 = 20% higher); that log-ratio in standard errors of a
    median of the loss's own log-scale noise before (so a loss near zero, whose minibatch noise is ±100%, does
    not pay for anything by chance); and the rise as a share of what training had gained before the episode
    (initial level, the median of the first three points, minus the level before), so that a loss doubling
    from 0.005 to 0.01 after falling from 0.7 gives back 0.7%, not an explosion's share. None without a loss or
    a before; a non-finite loss inside the episode is an unbounded rise."""
    if not run.has("loss"):
        return None
    ls, lv = run.arrays("loss")
    lo, start, end = steps[max(0, a - window)], steps[a], steps[b]
    before = lv[(ls >= lo) & (ls < start)]
    during = lv[(ls >= start) & (ls <= end)]
    before = before[np.isfinite(before)]
    if before.size == 0 or during.size == 0:
        return None
    if not np.all(np.isfinite(during)):
        return float("inf"), float("inf"), float("inf")
    ref, now = float(np.median(before)), float(np.median(during))
    gained = stats.start_level(lv, start_points) - ref
    giveback = (now - ref) / gained if gained > 0 else float("inf")
    if not (ref > 0 and now > 0):
        return None
    sigma = stats.noise(np.log(before[before > 0])) if before.size >= 3 else float("nan")
    se = 1.25 * sigma / math.sqrt(min(before.size, during.size)) if math.isfinite(sigma) and sigma > 0 else 0.0
    z = math.log(now / ref) / se if se > 0 else float("inf")
    return now / ref - 1, z, giveback
