"""A GAN's two losses, judged as a pair: the generator's and the discriminator's losses are two sides of one game,
not a training loss that should fall, so where both are logged the detectors that judge a training loss's level or
shape leave them (`base.missing_reason`) and divergence reads the pair for the one failure they show plainly: the
discriminator wins (its loss falls to 0 while the generator's climbs and stays up: no fake fools it, and the
generator learns nothing from a saturated discriminator). docs/engine.md says why that is `divergence`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from forensics.judge.detectors.base import GanPair, level_of
from forensics.judge.findings import Finding
from forensics.judge.run import Run

BCE_CLAMP = 100.0  # torch's BCELoss clamps log at -100: a sigmoid output of exactly 0 or 1 costs 100
# A saturated BCELoss's values: 0 (a sigmoid output of exactly its target), the clamp, and the clamp averaged with a 0
# over a real and a fake term; within 0.001 (a loss printed with three or four decimals).
SATURATED = (0.0, BCE_CLAMP / 2, BCE_CLAMP)
SATURATED_ATOL = 1e-3


@dataclass(frozen=True)
class DiscriminatorWins:
    """The thresholds of the discriminator-wins shape (read by divergence on a GAN pair).

    Detects: over the last `tail` of the points (at least `min_tail`), the generator's loss sits ≥ `g_growth` × its
    first level and ≥ `g_level`, while the discriminator's loss (never negative: a BCE or hinge loss) sits at ≤
    `d_share` of its first level and ≤ `d_level`, or the generator's at half BCELoss's clamp or above; or
    `clamp_share` of one side's last points are at a saturated BCELoss's values (0, its clamp 100, or 50: the clamp
    averaged over two terms; within 0.001), the clamp among them (a loss at 0 alone is a hinge, relativistic or WGAN
    discriminator whose margins are met, no saturation), neither loss ever negative; `min_points` points of each.
    Why: a discriminator that rejects every fake saturates, and the generator's gradient through it vanishes: the
    generator stops learning, and its loss climbs toward the criterion's clamp (100 for BCELoss).
    False alarms: 0 of the 116 healthy labelled runs of the development sets, two of them GANs (a discriminator near
    2·ln 2 for 63,000 steps; one whose discriminator falls to 0.27 of 1.39).
    """

    tail: float = 0.2  # the level a GAN ends on: the median of its last fifth of points ...
    min_tail: int = 3  # ... and of 3 points at least
    start_points: int = 3  # its first level: the median of its first 3 points
    d_share: float = 0.05  # a discriminator's loss at 5% of its start or below ...
    d_level: float = 0.05  # ... and at 0.05 or below (BCE: it gives every sample its class at 95%+)
    g_growth: float = 5.0  # the generator's loss ×5 its start or more ...
    g_level: float = 3.0  # ... and 3 or more (BCE: the discriminator gives each fake 5% or less of being real)
    min_points: int = 10  # a handful of records of a game that swings by design say nothing critical
    clamp_share: float = 0.5  # half of one side's last points exactly at a saturated BCELoss's values (0, 50, 100)


def discriminator_wins(detector, run: Run, pair: GanPair, rule: DiscriminatorWins = DiscriminatorWins()
                       ) -> Iterator[Finding]:
    """One finding of `detector`'s kind where the pair ends in the discriminator-wins shape (`DiscriminatorWins`)."""
    g, d = run.series_named(pair.generator), run.series_named(pair.discriminator)
    gs, gv = g["step"].to_numpy(), g["value"].fill_null(np.nan).to_numpy()
    ds, dv = d["step"].to_numpy(), d["value"].fill_null(np.nan).to_numpy()
    gk, dk = np.isfinite(gv), np.isfinite(dv)
    gs, gv, ds, dv = gs[gk], gv[gk], ds[dk], dv[dk]
    if min(gv.size, dv.size) < rule.min_points or float(dv.min()) < 0:
        return
    kg = max(rule.min_tail, int(round(rule.tail * gv.size)))
    kd = max(rule.min_tail, int(round(rule.tail * dv.size)))
    g0, g0_said = level_of(gs, gv, 0, rule.start_points - 1)
    d0, d0_said = level_of(ds, dv, 0, rule.start_points - 1)
    g1, g1_said = level_of(gs, gv, gv.size - kg, gv.size - 1)
    d1, d1_said = level_of(ds, dv, dv.size - kd, dv.size - 1)
    d_down = d0 > 0 and d1 <= rule.d_share * d0 and d1 <= rule.d_level
    near_clamp = g1 >= BCE_CLAMP / 2  # most fakes cost the clamp: the discriminator's output for them is exactly 0
    if not (g0 > 0 and g1 >= rule.g_growth * g0 and g1 >= rule.g_level and (d_down or near_clamp)):
        clamped = _at_clamp(gs, gv, ds, dv, kg, kd, rule)
        if clamped is not None:
            yield clamped_finding(detector, pair, clamped)
        return
    # where the discriminator took over: its first point at or below its end level's bound, or the generator's first
    # at half the clamp
    onset = int(ds[int(np.argmax(dv <= max(rule.d_level, rule.d_share * d0)))]) if d_down else \
        int(gs[int(np.argmax(gv >= BCE_CLAMP / 2))])
    clamp = near_clamp or bool(np.any(np.isclose(gv, BCE_CLAMP, rtol=0, atol=1e-3)))
    ev = {"shape": "discriminator_wins", "generator": pair.generator, "discriminator": pair.discriminator,
          "generator_start": g0, "generator_end": g1, "discriminator_start": d0, "discriminator_end": d1,
          "onset_step": onset, "generator_at_bce_clamp": clamp}
    yield Finding.of(detector, severity="critical", step=onset, step_end=int(max(gs[-1], ds[-1])),
                     series=pair.generator, evidence=ev, sources=_sources(pair, gs, ds),
                     summary=(f"the discriminator wins: {pair.discriminator} falls from {d0_said} to {d1_said} while "
                              f"{pair.generator} climbs from {g0_said} to {g1_said}"
                              + ((f", half or more of BCELoss's clamp of {BCE_CLAMP:g} (the discriminator's output is "
                                  f"exactly 0 for most fakes)" if near_clamp else
                                  f", reaching BCELoss's clamp of {BCE_CLAMP:g}") if clamp else "")
                              + ": the discriminator rejects every fake and the generator gets no gradient from it; "
                                "the adversarial game has diverged"))


def _at_clamp(gs, gv, ds, dv, kg: int, kd: int, rule: DiscriminatorWins) -> dict | None:
    """Where `clamp_share` or more of one side's last points sit at a value of a saturated BCELoss (`SATURATED`),
    both losses never negative: the discriminator's sigmoid outputs are 0 or 1, and no gradient flows through them.
    Else None."""
    if float(gv.min()) < 0 or float(dv.min()) < 0:
        return None
    for name, steps, values, k in (("generator", gs, gv, kg), ("discriminator", ds, dv, kd)):
        saturated = np.any([np.isclose(values, c, rtol=0, atol=SATURATED_ATOL) for c in SATURATED], axis=0)
        if saturated[-k:].mean() >= rule.clamp_share:
            levels = [c for c in SATURATED if np.any(np.isclose(values[-k:], c, rtol=0, atol=SATURATED_ATOL))]
            if levels == [0.0]:
                continue  # 0 alone is no BCE signature: a hinge, relativistic or WGAN loss sits there, margins met
            return {"side": name, "levels": levels, "points_saturated": int(saturated[-k:].sum()),
                    "tail_points": k, "first_step": int(steps[int(np.argmax(saturated))]),
                    "tail_from": int(steps[-k]), "last_step": int(steps[-1])}
    return None


def clamped_finding(detector, pair: GanPair, c: dict) -> Finding:
    series = pair.generator if c["side"] == "generator" else pair.discriminator
    ev = {"shape": "loss_at_bce_saturation", "generator": pair.generator, "discriminator": pair.discriminator, **c}
    said = " or ".join(f"{x:g}" for x in c["levels"])
    return Finding.of(detector, severity="critical", step=c["first_step"], step_end=c["last_step"], series=series,
                      evidence=ev, sources=({"table": "scalars", "series": series, "step_min": c["first_step"],
                                             "step_max": c["last_step"]},),
                      summary=(f"{series} is {said} (within {SATURATED_ATOL:g}) on {c['points_saturated']} of its last "
                               f"{c['tail_points']} records (steps {c['tail_from']}-{c['last_step']}), first at step "
                               f"{c['first_step']}: "
                               f"the values of a saturated BCELoss (a sigmoid output of exactly 0 or 1 costs 0 or the "
                               f"clamp of 100; 50 is the clamp averaged over a real and a fake term), so no gradient "
                               f"flows through the discriminator's outputs; the adversarial game has diverged"))


def _sources(pair: GanPair, gs: np.ndarray, ds: np.ndarray) -> tuple[dict, ...]:
    return ({"table": "scalars", "series": pair.generator, "step_min": int(gs[0]), "step_max": int(gs[-1])},
            {"table": "scalars", "series": pair.discriminator, "step_min": int(ds[0]), "step_max": int(ds[-1])})
