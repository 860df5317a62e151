"""Fidelity: do the replayed losses and gradient norms match the logged ones? A replay is trusted only then.

Each logged point inside the replayed steps is compared with what the replay computed for it, the way the
writer computed it: HF Trainer's `loss` is the mean over its logging window, rounded to 4 digits, with
`logging_nan_inf_filter`'s replacement of non-finite step losses; everything else is the step's own value.
Tolerance: the logged rounding (half a unit in the last decimal the value was written with) or, for values
written at full precision, 1e-5 relative (float32 sums reassociated by another thread count or kernel).

Another machine's kernels round differently in the last bit, and a diverging run amplifies that bit step by step
(a 1e-7 difference at the first step is 50 % ten steps later). When the tight comparison fails, the replay is run a
second time from the checkpoint with every weight perturbed by one float32 ulp: how far that moves each logged
value is what rounding alone explains, and a value within NOISE_FACTOR times that still matches. A wrong entry
point or config differs from the first step on by far more than rounding, so it stays unfaithful.
"""

from __future__ import annotations

import math
from typing import Any

from forensics.usercode.replay.state import StepOut
from forensics.judge.run import Run

REL_TOL = 1e-5
NOISE_FACTOR = 4.0


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
            perturbed: dict[int, StepOut] | None = None) -> dict[str, Any]:
    """Compare every logged loss and gradient norm in [first, last] with the replay's; a logged non-finite
    value the replay does not reproduce is listed but counts as 'not reproduced', not as unfaithful."""
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
                other = _hf_window_loss(window, perturbed) if perturbed and all(s in perturbed for s in window) else None
                how = f"mean of steps {lo}-{step}, rounded to 4 digits (HF logging window)"
            else:
                replayed, how = getattr(outs[step], attr), "the step's own value"
                other = getattr(perturbed[step], attr) if perturbed and step in perturbed else None
            match, tol = close(float(value), replayed)
            entry = {"series": name, "step": int(step), "logged": float(value), "replayed": replayed,
                     "match": match, "tolerance": tol, "how": how}
            if other is not None and math.isfinite(replayed) and math.isfinite(other) and math.isfinite(float(value)):
                noise = abs(other - replayed)
                entry["rounding_noise"] = noise
                if not match and abs(float(value) - replayed) <= NOISE_FACTOR * noise:
                    entry.update(match=True, tolerance=NOISE_FACTOR * noise, how=how + "; within rounding noise")
                elif not match and noise >= 0.5 * abs(replayed):  # rounding alone moves it by half: no evidence
                    entry.update(match=True, tolerance=None, how=how + "; rounding noise exceeds half the value: "
                                                                        "uninformative")
            compared.append(entry)
    finite_logged = [c for c in compared if math.isfinite(c["logged"])]
    mismatched = [c for c in finite_logged if not c["match"]]
    unreproduced = [c for c in compared if not math.isfinite(c["logged"]) and not c["match"]]
    exact = not any("noise" in c["how"] for c in compared)
    return {"faithful": not mismatched, "verified": bool(finite_logged), "within_rounding_noise": not exact,
            "compared": compared,
            "mismatched": len(mismatched), "logged_nonfinite_not_reproduced": len(unreproduced),
            "first_mismatch": mismatched[0] if mismatched else None}
