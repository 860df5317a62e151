"""Fidelity: do the replayed losses and gradient norms match the logged ones? A replay is trusted only then.

Each logged point inside the replayed steps is compared with what the replay computed for it, the way the
writer computed it: HF Trainer's `loss` is the mean over its logging window, rounded to 4 digits, with
`logging_nan_inf_filter`'s replacement of non-finite step losses; everything else is the step's own value.
Tolerance: the logged rounding (half a unit in the last decimal the value was written with) or, for values
written at full precision, 1e-5 relative (float32 sums reassociated by another thread count or kernel).

Another machine's kernels round differently in the last bit, and where the run is blowing up that bit is amplified
step by step (a 1e-7 difference at the first step is 50 % ten steps later). So where the tight comparison fails, or
the replayed window blows up (its loss or gradient norm grows BLOWUP times), the replay is run twice more from the
checkpoint with every weight moved by one float32 ulp (two sign patterns): how far that moves each value, the
measured rounding spread, is what rounding alone explains, and its ratio to one ulp is the amplification. A value
within NOISE_FACTOR times that spread is within the measured tolerance, and said so with the tolerance; a value
outside every tolerance makes the replay unfaithful. A wrong entry point or config differs from the first step on by
far more than rounding, so it stays unfaithful.
"""

from __future__ import annotations

import math
from typing import Any

from forensics.usercode.replay.state import StepOut
from forensics.judge.run import Run

REL_TOL = 1e-5
NOISE_FACTOR = 4.0
BLOWUP = 100.0  # a window whose replayed loss or gradient norm grows this many times is blowing up
ULP = 2.0 ** -23  # one float32 ulp, relative: what the perturbed re-runs move every weight by
SPREAD_RERUNS = 2


def blowing_up(outs: dict[int, StepOut]) -> bool:
    """Whether the replayed loss or gradient norm grows BLOWUP times within the window (finite values)."""
    for attr in ("loss", "grad_norm"):
        values = [abs(getattr(o, attr)) for _, o in sorted(outs.items()) if math.isfinite(getattr(o, attr))]
        if len(values) > 1 and values[0] > 0 and max(values) >= BLOWUP * values[0]:
            return True
    return False


def _half_unit(v: float) -> float:
    """Half a unit in the last decimal of the shortest repr: 0.1234 -> 5e-5; full precision -> tiny."""
    text = repr(float(v))
    mant, _, exp = text.partition("e")
    decimals = len(mant.partition(".")[2]) if "." in mant else 0
    if decimals >= 9:  # written at full precision
        return 0.0
    return 0.5 * 10.0 ** (-decimals + (int(exp) if exp else 0))


def close(logged: float, replayed: float) -> tuple[bool, float]:
    """Whether a replayed value matches the logged one, and the tolerance used. Non-finite values match only
    a value of the same kind (NaN with NaN, +inf with +inf)."""
    if not math.isfinite(logged) or not math.isfinite(replayed):
        same = (math.isnan(logged) and math.isnan(replayed)) or logged == replayed
        return same, 0.0
    tol = max(_half_unit(logged), REL_TOL * max(abs(logged), 1e-12))
    return abs(logged - replayed) <= tol, tol


def _hf_window_loss(steps: list[int], outs: dict[int, StepOut]) -> float:
    """HF Trainer's logged loss over a window of steps: the mean, non-finite step losses replaced by the running
    average (`logging_nan_inf_filter`, on by default), rounded to 4 digits."""
    tr, last = 0.0, steps[0] - 1
    for s in steps:
        v = outs[s].loss
        tr += tr / (1 + s - 1 - last) if not math.isfinite(v) else v
    return round(tr / len(steps), 4)


def compare(run: Run, outs: dict[int, StepOut], first: int, last: int,
            perturbed: list[dict[int, StepOut]] | None = None) -> dict[str, Any]:
    """Compare every logged loss and gradient norm in [first, last] with the replay's; `perturbed` are the re-runs
    with every weight moved one ulp (the measured rounding spread), None when not measured. Each value says how it
    matched (`within`: exact, rounding, spread, or none) and its tolerance. A logged non-finite value the replay does
    not reproduce is listed but counts as 'not reproduced', not as unfaithful."""
    compared: list[dict[str, Any]] = []
    for role, attr in (("loss", "loss"), ("grad_norm", "grad_norm")):
        name = run.pick(role)
        if name is None:
            continue
        fmt = run.format_of(name)
        frame = run.series_named(name)
        prev = None
        for step, value in zip(frame["step"].to_list(), frame["value"].to_list()):
            lo = (prev + 1) if prev is not None else step
            prev = step
            if value is None or step < first or step > last or step not in outs:
                continue
            if fmt == "hf_trainer_state" and role == "loss":
                window = list(range(lo, step + 1))
                if any(s not in outs for s in window):
                    continue
                replayed = _hf_window_loss(window, outs)
                others = [_hf_window_loss(window, p) for p in perturbed or () if all(s in p for s in window)]
                how = f"mean of steps {lo}-{step}, rounded to 4 digits (HF logging window)"
            else:
                replayed, how = getattr(outs[step], attr), "the step's own value"
                others = [getattr(p[step], attr) for p in perturbed or () if step in p]
            compared.append(judge_value(name, int(step), float(value), replayed, others, how))
    finite_logged = [c for c in compared if math.isfinite(c["logged"])]
    mismatched = [c for c in finite_logged if not c["match"]]
    unreproduced = [c for c in compared if not math.isfinite(c["logged"]) and not c["match"]]
    amplified = [c for c in compared if c.get("amplification") is not None]
    top = max(amplified, key=lambda c: c["amplification"]) if amplified else None
    return {"faithful": not mismatched, "verified": bool(finite_logged),
            "within_rounding_noise": any(c["within"] == "spread" for c in compared), "compared": compared,
            "mismatched": len(mismatched), "logged_nonfinite_not_reproduced": len(unreproduced),
            "first_mismatch": mismatched[0] if mismatched else None,
            "spread": None if perturbed is None else {
                "reruns": len(perturbed), "perturbation": "every weight moved by one float32 ulp",
                "noise_factor": NOISE_FACTOR,
                "amplification_max": top["amplification"] if top else None,
                "at": {"series": top["series"], "step": top["step"]} if top else None}}


def judge_value(series: str, step: int, logged: float, replayed: float, others: list[float], how: str) -> dict[str, Any]:
    """One logged value against the replay's: within the logged rounding, else within NOISE_FACTOR times the measured
    rounding spread (`others`: the perturbed re-runs' values), else not at all."""
    match, tol = close(logged, replayed)
    entry: dict[str, Any] = {"series": series, "step": step, "logged": logged, "replayed": replayed, "match": match,
                             "tolerance": tol, "how": how,
                             "within": ("exact" if logged == replayed or (math.isnan(logged) and math.isnan(replayed))
                                        else "rounding") if match else "none"}
    if others and math.isfinite(replayed):
        spread = max(abs(o - replayed) if math.isfinite(o) else math.inf for o in others)
        entry["rounding_spread"] = spread
        entry["amplification"] = (spread / (abs(replayed) * ULP)) if replayed else None
        entry["tolerance"] = max(tol, NOISE_FACTOR * spread)
        if not match and math.isfinite(logged) and abs(logged - replayed) <= NOISE_FACTOR * spread:
            entry.update(match=True, tolerance=NOISE_FACTOR * spread, within="spread",
                         how=how + ("; rounding alone turns it non-finite (measured)" if math.isinf(spread) else
                                    f"; within {NOISE_FACTOR:g}x the measured rounding spread"))
    return entry
