"""Labels measured from the run's own logged numbers (never from the bug's intent).

Every rule reads the series the primary writer wrote (`LoggerSet.series`, keyed by logged step), the checkpoints
and batches on disk, or the simulated clock; the rules and their thresholds are documented in corpus/README.md.
A rule that holds clearly gives a *kind*; one that holds only weakly, or a defensible consequence of the bug,
goes to *allowed* (a finding of an allowed kind is neither right nor wrong).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

# universal rules run on every run; the others only where the run's bug could produce them (a healthy run is
# checked by the universal rules, so a "healthy" recipe that overfits or diverges is labelled so)
CONSEQUENCES = {  # defensible companions of a bug's symptom
    "nan": ["divergence", "exploding_gradients", "loss_spike", "update_ratio_anomaly", "nonfinite_weights",
            "masked_nonfinite", "bad_batch", "oscillation"],
    "spike": ["exploding_gradients"],
    "divergence_lr_ramp": ["lr_schedule_anomaly", "exploding_gradients", "loss_spike", "frequent_clipping",
                           "oscillation", "nan_loss"],
    "flat": ["update_ratio_anomaly", "underfitting", "plateau", "frozen_parameters", "lr_schedule_anomaly",
             "distribution_mismatch", "vanishing_gradients"],
    "plateau": ["underfitting", "lr_schedule_anomaly", "flat_loss"],
    "oscillation_high_lr": ["loss_spike", "val_noise", "underfitting", "plateau", "exploding_gradients"],
    "overfitting_tiny_train": ["val_noise"],
    "dist_mismatch": ["overfitting", "val_noise", "underfitting"],
    "underfitting": ["plateau", "flat_loss"],
    "val_noise_tiny_val": ["overfitting"],
    "initial_loss_bad_init": ["loss_spike"],
    "grokking": ["overfitting", "val_noise", "loss_spike"],
    "exploding_guard": ["divergence", "loss_spike", "oscillation", "update_ratio_anomaly"],
    "exploding_rnn": ["nan_loss", "divergence", "loss_spike", "oscillation", "nonfinite_weights"],
    "vanishing_deep_sigmoid": ["flat_loss", "plateau", "underfitting"],
    "clip_too_small": ["plateau", "underfitting", "flat_loss"],
    "update_ratio_tiny_lr": ["flat_loss", "plateau", "underfitting"],
    "weight_growth_no_wd": ["overfitting"],
    "weight_collapse_wd": ["flat_loss", "plateau", "underfitting"],
    "dead_relu_bias": ["flat_loss", "plateau", "underfitting", "vanishing_gradients"],
    "saturated_tanh": ["plateau", "underfitting", "vanishing_gradients"],
    "lr_sched_per_micro": ["plateau", "flat_loss"],
    "lr_sched_never_stepped": [],
    "amp_overflow": ["loss_spike", "oscillation", "plateau"],
}


def base(spec) -> dict:
    return {"name": spec.name, "split": spec.split, "variant": spec.variant, "bug": spec.bug, "magnitude": spec.mag,
            "family": spec.family, "optimizer": spec.optimizer, "schedule": spec.schedule, "flavour": spec.flavour,
            "loggers": list(spec.loggers), "seed": spec.seed, "steps": spec.steps, "healthy": None, "kinds": [],
            "allowed": [], "nan_onset": None, "series": {}, "notes": {}}


def entry(kind, step, step_end, series, evidence, note) -> dict:
    return {"kind": kind, "step": None if step is None else int(step),
            "step_end": None if step_end is None else int(step_end), "series": series,
            "evidence": {k: _plain(v) for k, v in evidence.items()}, "note": note}


def _plain(v):
    if isinstance(v, (np.floating, float)):
        v = float(v)
        return v if math.isfinite(v) else str(v)
    if isinstance(v, np.integer):
        return int(v)
    return v


def _arr(series: dict) -> tuple[list[int], np.ndarray]:
    steps = sorted(series)
    return steps, np.array([float(series[s]) for s in steps], dtype=float)


def _finite(series: dict) -> dict:
    return {s: v for s, v in series.items() if math.isfinite(v)}


def smooth(v: np.ndarray) -> np.ndarray:
    """Running median over max(3, n/20) points (centred), so one noisy point does not decide a level."""
    w = max(3, len(v) // 20) | 1
    h = w // 2
    return np.array([np.median(v[max(0, i - h):i + h + 1]) for i in range(len(v))])


# ------------------------------------------------------------------------------------------ universal

def nan_rule(L: dict, G: dict, hf: bool, tag: str, gtag: str | None) -> tuple[list, int | None]:
    out, onset = [], None
    steps, v = _arr(L)
    bad = [s for s, x in zip(steps, v) if not math.isfinite(x)]
    if bad:
        first = bad[0]
        later = [x for s, x in zip(steps, v) if s >= first]
        fin = [(s, x) for s, x in zip(steps, v) if s < first]
        ev = {"first_nonfinite_step": first, "last_finite_step": fin[-1][0] if fin else None,
              "last_finite_value": fin[-1][1] if fin else None, "nonfinite_points": len(bad)}
        if all(not math.isfinite(x) for x in later):
            out.append(entry("nan_loss", first, steps[-1], tag, ev, f"first non-finite logged loss at step {first}, "
                             f"non-finite to the end ({len(bad)} points)"))
            onset = first
    if hf and G:
        gs, gv = _arr(G)
        gbad = [s for s, x in zip(gs, gv) if not math.isfinite(x) and math.isfinite(L.get(s, float("nan")))]
        if gbad:
            out.append(entry("masked_nonfinite", gbad[0], gs[-1], gtag, {
                "first_nonfinite_grad_norm_step": gbad[0], "loss_at_that_step": L[gbad[0]],
                "steps_masked": len(gbad)}, f"grad_norm non-finite from step {gbad[0]} while the logged loss is finite "
                                            f"({L[gbad[0]]}): logging_nan_inf_filter hides the NaN"))
    return out, onset


def _seen_by_another_writer(found: list, onset: int | None, spec, L: dict, tag: str, allowed: set) -> tuple[list, int | None]:
    """HF's filter hides a NaN loss from trainer_state.json, but the run's other writers (TensorBoard, W&B, CSV,
    console) log the loss as the loop computed it. Where HF logged exactly 0.0 at the first masked step (a window
    of only non-finite steps), they show it non-finite there: the NaN is in plain sight, so the kind is nan_loss
    at that step and masked_nonfinite (true of trainer_state.json alone) is allowed."""
    masked = next((e for e in found if e["kind"] == "masked_nonfinite"), None)
    if masked is None or len(spec.loggers) < 2 or L.get(masked["step"]) != 0.0:
        return found, onset
    allowed.add("masked_nonfinite")
    step = masked["step"]
    seen = entry("nan_loss", step, masked["step_end"], tag, {"first_nonfinite_step": step,
                 "hidden_in": "trainer_state.json", "shown_by": list(spec.loggers[1:])},
                 f"HF logged 0.0 at step {step} (a window of only non-finite losses); "
                 f"{', '.join(spec.loggers[1:])} logged the loss itself")
    return [e for e in found if e is not masked] + [seen], step


def nonfinite_weights_rule(root: Path, ckpts: list) -> list:
    from safetensors.torch import load_file
    for step, rel in ckpts:
        p = root / rel
        if p.is_dir():
            sd = load_file(p / "model.safetensors")
        elif p.suffix == ".safetensors":
            sd = load_file(p)
        else:
            obj = torch.load(p, weights_only=True)
            sd = obj.get("model") or obj.get("state_dict")
        bad = {k: int((~torch.isfinite(t)).sum()) for k, t in sd.items() if t.is_floating_point() and not bool(torch.isfinite(t).all())}
        if bad:
            return [entry("nonfinite_weights", step, None, None, {"checkpoint": rel, "tensors": len(bad),
                                                                   "nonfinite_values": sum(bad.values())},
                          f"{rel} holds {sum(bad.values())} non-finite values in {len(bad)} tensors")]
    return []


def divergence_rule(L: dict, tag: str) -> tuple[str | None, dict]:
    """The (finite part of the) training loss rises from its smoothed minimum to a final level >= 3x that minimum
    and >= half the initial level, and stays there (the last 10 % of points): a kind. Half as strong: allowed."""
    F = _finite(L)
    if len(F) < 5:
        return None, {}
    steps, v = _arr(F)
    sm = smooth(v)
    i = int(np.argmin(sm))
    k = max(2, len(v) // 10)
    final = float(np.median(v[-k:]))
    lo, init = float(sm[i]), float(np.median(v[:k]))
    if i >= len(v) - k or lo <= 0:
        return None, {}
    ev = {"min_step": steps[i], "min_level": lo, "initial_level": init, "final_level": final,
          "factor": final / lo, "last_step": steps[-1]}
    if final >= 3 * lo and final >= 0.5 * init:
        return "kind", ev
    if final >= 1.5 * lo and final >= 0.25 * init:
        return "allowed", ev
    return None, ev


def is_flat(L: dict, tol: float = 0.03) -> tuple[bool, dict]:
    """The gallery's rule: medians of the first and last tenth differ by < 3 % and the running median never fell
    more than 3 % below the start."""
    steps, v = _arr(_finite(L))
    if len(v) < 5:
        return False, {}
    k = max(2, len(v) // 10)
    first, last = np.median(v[:k]), np.median(v[-k:])
    w = max(3, len(v) // 20)
    low = min(np.median(v[i:i + w]) for i in range(len(v) - w + 1))
    ev = {"first_level": first, "last_level": last, "relative_change": (first - last) / abs(first),
          "lowest_running_median": low}
    return bool(abs(last - first) / abs(first) < tol and (first - low) / abs(first) < tol), ev


def _no_update(G: dict, LR: dict) -> str | None:
    """Why no optimizer step can move the weights, measured from the logs: every logged gradient norm is exactly
    0 (no backward(), or every parameter frozen), or every logged learning rate is exactly 0; else None."""
    for name, S in (("grad norm", G), ("learning rate", LR)):
        _, v = _arr(_finite(S or {}))
        if len(v) >= 5 and np.all(v == 0.0):
            return f"{name} exactly 0 on all {len(v)} logged steps"
    return None


def overfitting_rule(L: dict, V: dict) -> tuple[str | None, dict]:
    """Validation loss (median of 3 evaluations) passes its minimum (not in its last two points) and ends >= 20 %
    above it, and >= 3x the evaluations' own jitter (median |diff| / level), while the training loss after the
    minimum keeps falling (median of its later half >= 10 % below its level at the minimum: a drift of a few
    per cent beside a doubling validation loss is the damage of something else showing on validation first):
    a kind; >= 5 %: allowed.
    The end level is the median of the last quarter of the evaluations (at least 3): the last one or two of a
    12-sample validation set swing by 2x, and one such swing is not a rise."""
    V = _finite(V)
    if len(V) < 4 or len(_finite(L)) < 4:
        return None, {}
    vs, raw = _arr(V)
    # median of 3 (ends kept): one noisy evaluation neither makes the minimum nor the rise
    vv = np.array([raw[0]] + [float(np.median(raw[j - 1:j + 2])) for j in range(1, len(raw) - 1)] + [raw[-1]])
    i = int(np.argmin(vv))
    if i >= len(vv) - 2:
        return None, {}
    end = float(np.median(raw[-max(3, len(raw) // 4):]))
    rise = (end - vv[i]) / abs(vv[i])
    noise = float(np.median(np.abs(np.diff(raw)))) / abs(float(np.median(raw)))
    if rise < 3 * noise:  # within the evaluations' own jitter
        return ("allowed" if rise >= 0.05 else None), {"val_rise": rise, "val_noise": noise}
    ls, lv = _arr(_finite(L))
    at = lv[[j for j, s in enumerate(ls) if s <= vs[i]][-3:] or [0]]
    after = lv[[j for j, s in enumerate(ls) if s > vs[i]]]
    if len(after) < 2:
        return None, {}
    falling = float(np.median(after[len(after) // 2:])) < 0.9 * float(np.median(at))
    ev = {"val_min_step": vs[i], "val_min": vv[i], "val_end": end, "val_rise": rise, "last_val_step": vs[-1],
          "train_at_min": float(np.median(at)), "train_late": float(np.median(after[len(after) // 2:]))}
    if falling and rise >= 0.2:
        return "kind", ev
    if rise >= 0.05:
        return "allowed", ev
    return None, ev


# ------------------------------------------------------------------------------------------ per bug

def spikes(L: dict, factor: float, window: int = 10, recover: int = 8) -> list[tuple[int, float]]:
    """Points > `factor` x the median of the `window` points before them that fall back below 1.5x that median
    within `recover` points (transient: not the start of a blow-up)."""
    steps, v = _arr(L)
    out = []
    for i in range(min(window, max(3, len(v) // 5)), len(v)):
        b = float(np.median(v[max(0, i - window):i]))
        if math.isfinite(v[i]) and b > 0 and v[i] > factor * b:
            after = v[i + 1:i + 1 + recover]
            if len(after) and np.all(np.isfinite(after)) and after.min() < 1.5 * b:
                out.append((steps[i], v[i] / b))
    return out


def plateau_rule(L: dict) -> tuple[str | None, dict]:
    """The loss falls >= 10 % from its start, then its last half changes < 5 % (smoothed), at a level >= 25 % of
    the start (well above the floor a working model reaches). Start of the plateau: the first point whose
    smoothed level is within 5 % of the final level."""
    steps, v = _arr(_finite(L))
    if len(v) < 8:
        return None, {}
    sm = smooth(v)
    k = max(2, len(v) // 10)
    init, final = float(np.median(v[:k])), float(np.median(v[-k:]))
    half = sm[len(sm) // 2:]
    change = abs(half[0] - half[-1]) / abs(final)
    start = next(s for s, x in zip(steps, sm) if abs(x - final) <= 0.05 * abs(final))
    ev = {"initial_level": init, "final_level": final, "fraction_of_initial": final / init,
          "late_half_change": change, "plateau_start": start}
    if init > 0 and final <= 0.9 * init and change < 0.05 and final >= 0.25 * init:
        return "kind", {**ev}
    return None, ev


class Measured:
    """What the primary writer wrote: canonical name -> tag, and tag -> {logged step: value}. Saved in
    labels.json ("measured") so that the rules can be re-applied without training again (`--relabel`)."""

    def __init__(self, tags: dict[str, str], logged: dict[str, dict[int, float]]):
        self.tags, self.logged = tags, logged

    @classmethod
    def of(cls, logs) -> "Measured":
        return cls(dict(logs.tags), {t: {int(s): float(v) for s, v in d.items()} for t, d in logs.primary.logged.items()
                                     if t in set(logs.tags.values())})

    def tag(self, canonical: str) -> str | None:
        return self.tags.get(canonical)

    def series(self, canonical: str) -> dict[int, float]:
        t = self.tag(canonical)
        return dict(self.logged.get(t, {})) if t else {}

    def to_json(self) -> dict:
        return {"tags": self.tags, "logged": {t: {str(s): (v if math.isfinite(v) else str(v)) for s, v in d.items()}
                                              for t, d in self.logged.items()}}

    @classmethod
    def from_json(cls, d: dict) -> "Measured":
        return cls(d["tags"], {t: {int(s): float(v) for s, v in x.items()} for t, x in d["logged"].items()})


def label_run(spec, logs, facts, root: Path) -> dict:
    """Labels of one run from what its primary writer wrote (`logs`: a Measured), the run's facts (checkpoints,
    saved batches, configured clip norm, classes, ...) and the files under `root`."""
    lab = base(spec)
    lab["series"] = {k: logs.tag(k) for k in ("loss", "val_loss", "grad_norm", "lr") if logs.tag(k)}
    hf = spec.loggers[0] == "hf"
    L, V, G, LR = logs.series("loss"), logs.series("val_loss"), logs.series("grad_norm"), logs.series("lr")
    tag, vtag, gtag = logs.tag("loss"), logs.tag("val_loss"), logs.tag("grad_norm")
    kinds, allowed = lab["kinds"], set()
    bug = spec.bug

    def add(kind, step, step_end, series, ev, note):
        if not any(k["kind"] == kind for k in kinds):
            kinds.append(entry(kind, step, step_end, series, ev, note))

    # universal: NaN, masked NaN, non-finite weights, divergence, flat, overfitting
    found, onset = nan_rule(L, G, hf, tag, gtag)
    found, onset = _seen_by_another_writer(found, onset, spec, L, tag, allowed)
    for e in found:
        kinds.append(e)
    lab["nan_onset"] = onset
    if found or bug in ("nan_lr", "nan_input", "log_zero"):
        allowed.update(CONSEQUENCES["nan"])
    if facts.get("ckpt"):
        kinds.extend(nonfinite_weights_rule(root, facts["ckpt"]))
    verdict, ev = divergence_rule(L, tag)
    if verdict == "kind":
        add("divergence", ev["min_step"], ev["last_step"], tag, ev,
            f"loss rises from {ev['min_level']:.4g} (step {ev['min_step']}) to {ev['final_level']:.4g} "
            f"(x{ev['factor']:.1f}) and stays")
    elif verdict == "allowed":
        allowed.add("divergence")
    flat, ev = is_flat(L)
    if flat:
        add("flat_loss", min(L), max(L), tag, ev, f"relative change first->last {ev['relative_change']:+.3f}")
    if V:
        verdict, ev = overfitting_rule(L, V)
        if verdict == "kind":
            add("overfitting", ev["val_min_step"], ev["last_val_step"], vtag, ev,
                f"val min {ev['val_min']:.4g} at step {ev['val_min_step']}, ends {ev['val_rise']:+.0%} above it "
                f"while train falls {ev['train_at_min']:.4g} -> {ev['train_late']:.4g}")
        elif verdict == "allowed":
            allowed.add("overfitting")

    # the bug's own symptom, measured
    group = {"flat_no_backward": "flat", "flat_frozen_all": "flat", "flat_lr_zero": "flat",
             "plateau_lr_drop": "plateau", "plateau_double_softmax": "plateau",
             "spike_batches": "spike", "spike_one_of_many": "spike",
             "dist_mismatch_val_zero": "dist_mismatch", "dist_mismatch_val_shift": "dist_mismatch",
             "underfitting_linear": "underfitting", "underfitting_dropout": "underfitting"}.get(bug, bug)
    allowed.update(CONSEQUENCES.get(group, []))
    _bug_rules(group, spec, logs, facts, root, L, V, G, LR, add, allowed)
    _universal_readings(group, facts, root, L, V, G, add, allowed, tag, gtag)

    if spec.flavour == "resumed":
        allowed.add("resumed_run")
    lab["allowed"] = sorted(allowed - {k["kind"] for k in kinds})
    lab["healthy"] = not kinds
    Fl = _finite(L)
    if Fl:
        s, v = _arr(Fl)
        lab["notes"]["loss_first_last"] = [float(v[0]), float(v[-1])]
        lab["notes"]["points"] = len(v)
    Gf = _finite(G)
    if len(Gf) > 10:
        s, g = _arr(Gf)
        k = max(2, len(g) // 10)
        lab["notes"]["grad_norm_last_over_min"] = float(np.median(g[-k:]) / max(1e-30, float(smooth(g).min())))
    return lab


def _bug_rules(group, spec, logs, facts, root, L, V, G, LR, add, allowed):
    tag, vtag, gtag = logs.tag("loss"), logs.tag("val_loss"), logs.tag("grad_norm")
    off = facts.get("step_offset", 0)
    if group == "spike":
        found = spikes(_finite(L), 3.0)
        if found:
            add("loss_spike", found[0][0], found[-1][0], tag, {"spikes": [s for s, _ in found],
                                                               "ratios": [round(r, 2) for _, r in found]},
                f"{len(found)} transient spike(s), x{max(r for _, r in found):.1f} the median of the 10 points before")
        elif spikes(_finite(L), 2.0):
            allowed.add("loss_spike")
    if group == "flat":  # `add` keeps the first flat_loss (is_flat's), if any
        no_update = _no_update(G, LR)
        if no_update and L:
            add("flat_loss", min(L), max(L), tag, {"no_update": no_update},
                f"no update can change the weights ({no_update}): the loss moves only with the data")
    if group in ("spike", "nan_input") and facts.get("saved_batches"):
        _bad_batch_rule(root, facts, add)
    if group == "plateau":
        verdict, ev = plateau_rule(L)
        if verdict == "kind":
            add("plateau", ev["plateau_start"], max(L), tag, ev,
                f"stalls at {ev['final_level']:.4g} = {ev['fraction_of_initial']:.0%} of the initial loss")
        else:
            allowed.add("plateau")
    if group == "oscillation_high_lr":
        s, v = _arr(_finite(L))
        v = v[len(v) // 5:]
        if len(v) > 10:
            d = np.diff(v)
            lo, hi = np.percentile(v, [5, 95])
            sc = float(np.mean(np.sign(d[1:]) != np.sign(d[:-1])))
            trend = abs(np.median(v[:len(v) // 2]) - np.median(v[len(v) // 2:])) / np.median(v)
            ev = {"p5": lo, "p95": hi, "sign_change_rate": sc, "trend": trend}
            if hi > 2 * lo and sc >= 0.4 and trend < 0.3:
                add("oscillation", s[len(s) // 5], s[-1], tag, ev, f"5-95% range {lo:.3g}-{hi:.3g}, sign-change rate {sc:.2f}")
            else:
                allowed.add("oscillation")
    if group == "dist_mismatch" and V:
        vs, vv = _arr(_finite(V))
        ls, lv = _arr(_finite(L))
        q = max(1, len(lv) // 4)
        tr = (np.median(lv[:q]) - np.median(lv[-q:])) / abs(np.median(lv[:q]))
        best = (vv[0] - vv.min()) / abs(vv[0])
        rise = (float(np.median(vv[-2:])) - vv[0]) / abs(vv[0])
        ev = {"train_relative_fall": tr, "val_best_improvement": best, "val_first": vv[0], "val_end_rise": rise}
        # flat from the start: a validation loss that never improves and then rises is overfitting's shape (the
        # human labels of shared/real_runs call tb_dlgn_v11/v12, ln 2 then up to x7, memorisation), so it is
        # allowed here, not a kind
        if tr >= 0.3 and best < 0.05 and rise <= 0.05:
            add("distribution_mismatch", vs[0], vs[-1], vtag, ev,
                f"train falls {tr:.0%}, val never improves on its first value by more than {best:.1%}")
        else:
            allowed.add("distribution_mismatch")
    if group == "underfitting" and V:
        ls, lv = _arr(_finite(L))
        vs, vv = _arr(_finite(V))
        k = max(2, len(lv) // 10)
        init, fin, vfin = np.median(lv[:k]), np.median(lv[-k:]), np.median(vv[-2:])
        late = smooth(lv)[int(len(lv) * 0.7):]
        stall = abs(late[0] - late[-1]) / fin
        gap = abs(vfin - fin) / fin
        ev = {"initial": init, "final_train": fin, "final_val": vfin, "fraction_of_initial": fin / init,
              "train_val_gap": gap, "late_change": stall}
        if fin >= 0.3 * init and gap < 0.15 and stall < 0.05:
            add("underfitting", vs[0], vs[-1], vtag, ev, f"train {fin:.3g} / val {vfin:.3g} stall at {fin / init:.0%} of the initial {init:.3g}")
        else:
            allowed.add("underfitting")
    if group == "val_noise_tiny_val" and V:
        # Both dispersions over the later half of the evaluations: early on the smoothed training curve falls
        # fast between evaluations, and that fall is its trend, not its noise.
        vs, vv = _arr(_finite(V))
        ls, lv = _arr(_finite(L))
        late = slice(len(vv) // 2 if len(vv) >= 8 else 0, None)
        at = [min(range(len(ls)), key=lambda j: abs(ls[j] - s)) for s in vs[late]]
        dv = float(np.median(np.abs(np.diff(vv[late]))) / np.median(vv[late]))
        dt = float(np.median(np.abs(np.diff(smooth(lv)[at]))) / np.median(lv[at]))
        ev = {"val_rel_dispersion": dv, "train_rel_dispersion": dt}
        if dv >= 0.05 and dv >= 3 * dt:
            add("val_noise", vs[0], vs[-1], vtag, ev, f"median |diff| of val {dv:.3f} of its level vs train {dt:.3f}")
        else:
            allowed.add("val_noise")
    classes = facts.get("classes")
    if group in ("initial_loss_bad_init", "amp_overflow") and L and classes:
        first = float(L[min(L)])
        c = math.log(classes)
        ev = {"first_loss": first, "log_C": c, "C": classes, "ratio": first / c}
        if first >= 2 * c:
            add("initial_loss_mismatch", min(L), None, tag, ev, f"first logged loss {first:.3g} vs log({classes}) = {c:.3g}")
        elif first >= 1.3 * c:
            allowed.add("initial_loss_mismatch")
    if group == "grokking":
        ta, va = logs.series("train_acc"), logs.series("val_acc")
        if ta and va:
            ts, tv = _arr(ta)
            vs, vv = _arr(va)
            sat = next((s for s, x in zip(ts, tv) if x >= 0.99), None)
            jump = next((s for s, x in zip(vs, vv) if x >= 0.5), None)
            ev = {"train_saturation_step": sat, "val_acc_at_saturation": va.get(sat), "val_jump_step": jump,
                  "val_acc_final": float(vv[-1])}
            if sat and jump and jump >= 3 * sat:
                add("grokking", sat, jump, logs.tag("val_acc"), ev,
                    f"train accuracy >= 0.99 from step {sat}; val accuracy reaches 0.5 only at step {jump}")
            else:
                allowed.add("grokking")
    if group in ("exploding_rnn", "exploding_guard") and G:
        gs, gv = _arr(G)
        k = max(3, len(gv) // 10)
        b = float(np.median(gv[:k]))
        fin = gv[np.isfinite(gv)]
        peak = float(fin.max()) if len(fin) else float("nan")
        jump = next((s for s, x in zip(gs, gv) if not math.isfinite(x) or x > 10 * b), None)
        ev = {"base": b, "peak": peak, "factor": peak / b if b else None, "jump_step": jump}
        if (peak >= 100 * b or not np.all(np.isfinite(gv))) and jump is not None:
            add("exploding_gradients", jump, gs[-1], gtag, ev, f"grad norm {b:.3g} -> {peak:.3g}")
        else:
            allowed.add("exploding_gradients")
    if group == "vanishing_deep_sigmoid":
        n = int(spec.mag)
        a, h = logs.series("grad_norm/body.fc1"), logs.series("grad_norm/head")
        if a and h:
            r = float(np.median(list(a.values())) / np.median(list(h.values())))
            ev = {"first_layer_median": float(np.median(list(a.values()))), "head_median": float(np.median(list(h.values()))), "ratio": r}
            if r <= 1e-3:
                add("vanishing_gradients", min(a), max(a), "grad_norm/body.fc1", ev, f"first/last layer grad-norm ratio {r:.1e} ({n} sigmoid layers)")
            else:
                allowed.add("vanishing_gradients")
    if group == "clip_too_small" and G:
        gs, gv = _arr(G)
        rate = float(np.mean(gv > facts["max_grad_norm"]))
        ev = {"clip_rate": rate, "threshold": facts["max_grad_norm"], "median_norm": float(np.median(gv))}
        if rate >= 0.5:
            add("frequent_clipping", gs[0], gs[-1], gtag, ev, f"pre-clip norm above {facts['max_grad_norm']} on {rate:.0%} of logged steps")
        else:
            allowed.add("frequent_clipping")
    if group == "update_ratio_tiny_lr":
        r = logs.series("update_ratio/body.fc1")
        if r:
            med = float(np.median(list(r.values())))
            if med < 1e-4:
                add("update_ratio_anomaly", min(r), max(r), "update_ratio/body.fc1", {"median_ratio": med}, f"median update ratio {med:.1e}")
            else:
                allowed.add("update_ratio_anomaly")
    if group in ("weight_growth_no_wd", "weight_collapse_wd"):
        w = logs.series("weight_norm/body.fc1")
        if w:
            ws, wv = _arr(w)
            fac = float(wv[-1] / wv[0])
            ev = {"first": wv[0], "last": wv[-1], "factor": fac}
            if group == "weight_growth_no_wd":
                rising = wv[-1] > wv[int(len(wv) * 0.75)]
                if fac >= 3 and rising:
                    add("weight_norm_growth", ws[0], ws[-1], "weight_norm/body.fc1", ev, f"weight norm x{fac:.1f} and still rising")
                else:
                    allowed.add("weight_norm_growth")
            else:
                if fac <= 0.3:
                    add("weight_collapse", ws[0], ws[-1], "weight_norm/body.fc1", ev, f"weight norm x{fac:.2f}")
                else:
                    allowed.add("weight_collapse")
    if group == "frozen_layer" and len(facts.get("ckpt", [])) >= 2:
        sds = [(s, _state(root, rel)) for s, rel in facts["ckpt"]]
        pre = facts["frozen"]
        (s0, a), (s1, b) = sds[0], sds[-1]
        frozen = [k for k in a if _strip(k).startswith(pre + ".") and torch.equal(a[k], b[k])]
        moved = [k for k in a if not _strip(k).startswith(pre + ".") and a[k].is_floating_point() and not torch.equal(a[k], b[k])]
        if frozen and moved:
            add("frozen_parameters", s0, s1, None, {"frozen": [_strip(k) for k in frozen], "changed": len(moved),
                                                    "checkpoints": [s for s, _ in sds]},
                f"{', '.join(_strip(k) for k in frozen)} identical in every checkpoint while {len(moved)} tensors change")
    if group in ("dead_relu_bias", "saturated_tanh"):
        name = "activations/body.act1/" + ("dead_fraction" if group == "dead_relu_bias" else "saturated_fraction")
        name2 = name.replace("act1", "act2")
        vals = {n: logs.series(n) for n in (name, name2)}
        meds = {n: float(np.median(list(v.values()))) for n, v in vals.items() if v}
        if meds:
            n, m = max(meds.items(), key=lambda t: t[1])
            kind = "dead_relu" if group == "dead_relu_bias" else "saturated_activation"
            if m > 0.5:
                add(kind, min(vals[n]), max(vals[n]), n, {"median_fraction": m, "layer": n.split("/")[1]}, f"median {n.split('/')[-1]} {m:.2f} in {n.split('/')[1]}")
            else:
                allowed.add(kind)
    if group == "lr_sched_per_micro" and LR:
        s, v = _arr(LR)
        top = float(v.max())
        warm = next(i for i, x in enumerate(v) if x >= 0.5 * top)  # past the warmup
        floor = next((st for st, x in list(zip(s, v))[warm:] if x <= 0.01 * top), None)
        ev = {"peak_lr": top, "floor_step": floor, "last_step": s[-1]}
        if floor is not None and floor <= 0.5 * s[-1]:
            add("lr_schedule_anomaly", floor, s[-1], logs.tag("lr"), ev, f"LR reaches 1% of its peak at step {floor} of {s[-1]}")
        else:
            allowed.add("lr_schedule_anomaly")
    if group == "lr_sched_never_stepped" and LR:
        s, v = _arr(LR)
        if v.max() - v.min() <= 1e-3 * abs(v.max()) and facts.get("configured_schedule", "constant") != "constant":
            add("lr_schedule_anomaly", s[0], s[-1], logs.tag("lr"), {"lr": float(v[0]), "configured": facts["configured_schedule"]},
                f"LR constant at {v[0]:.3g} while the config names a {facts['configured_schedule']} schedule")
    if group == "amp_overflow":
        sc = logs.series("scale")
        if sc:
            s, v = _arr(sc)
            drops = int(np.sum(np.diff(v) < 0))
            ev = {"scale_first": v[0], "scale_last": v[-1], "decreases": drops, "points": len(v)}
            if drops >= max(3, 0.1 * len(v)):
                add("amp_overflow", s[0], s[-1], "scale", ev, f"loss scale falls {drops} times in {len(v)} points")
            elif drops:
                allowed.add("amp_overflow")
    if group == "throughput_stalls":
        p = facts["stall_period"]
        add("throughput_drop", p, (spec.steps // p) * p, None, {"stall_s": 6.0, "normal_s": 0.08, "period": p},
            f"a 6 s stall every {p} steps against 0.08 s per step (the simulated clock the writers stamp)")
    if group == "throughput_slowdown":
        a = facts["slowdown_at"]
        add("throughput_drop", a, spec.steps, None, {"before_s": 0.06, "after_s": 0.06 * spec.mag},
            f"step time x{spec.mag:g} from step {a} (simulated clock)")
    if group == "memory_growth":
        m = logs.series("rss_mb")
        if m:
            s, v = _arr(m)
            grow = float(v[-1] - v[0])
            if grow >= 100:
                add("memory_growth", s[0], s[-1], "rss_mb", {"start_mb": v[0], "end_mb": v[-1], "growth_mb": grow},
                    f"RSS +{grow:.0f} MB over {s[-1] - s[0]} steps (measured)")
            else:
                allowed.add("memory_growth")
    if group in ("resumed_older_ckpt", "resumed_epoch_reset"):
        r = facts["resume"]
        if group == "resumed_older_ckpt":
            add("resumed_run", r["from"] + 1, r["crash"], tag, r, f"steps {r['from'] + 1}-{r['crash']} logged twice (resumed from step {r['from']})")
        else:
            add("resumed_run", r["from"] + 1, spec.steps, tag, r, f"epoch restarts at 0 after step {r['from']} while the step keeps rising")
    del off


def _bad_batch_rule(root, facts, add):
    """The saved batch whose inputs hold a non-finite value, or whose max |x| is >= 10x the median of the other
    saved batches' (a culprit among several saved batches)."""
    stats = {}
    for s in facts["saved_batches"]:
        p = next((root / "batches").glob(f"step_{s}.*"))
        b = torch.load(p, weights_only=True) if p.suffix == ".pt" else __import__("safetensors.torch").torch.load_file(p)
        x = b["x"].float()
        stats[s] = (bool(torch.isfinite(x).all()), float(x[torch.isfinite(x)].abs().max()))
    nonfin = [s for s, (ok, _) in stats.items() if not ok]
    if nonfin:
        add("bad_batch", nonfin[0], nonfin[-1], None, {"batches": nonfin, "saved": sorted(stats)}, f"batches/step_{nonfin[0]} holds a non-finite input")
        return
    mx = {s: m for s, (_, m) in stats.items()}
    for s, m in mx.items():
        others = [v for t, v in mx.items() if t != s]
        if others and m >= 10 * float(np.median(others)):
            culprits = [t for t, v in mx.items() if v >= 10 * float(np.median([u for q, u in mx.items() if q != t]))]
            add("bad_batch", culprits[0], culprits[-1], None, {"batches": culprits, "saved": sorted(stats),
                                                               "abs_max": {str(t): mx[t] for t in culprits}},
                f"{len(culprits)} of {len(stats)} saved batches hold inputs >= 10x the others' max")
            return


def _state(root, rel):
    from safetensors.torch import load_file
    p = root / rel
    if p.is_dir():
        return load_file(p / "model.safetensors")
    obj = torch.load(p, weights_only=True)
    return obj.get("model") or obj.get("state_dict")


def _strip(k: str) -> str:
    return k[len("model."):] if k.startswith("model.") else k


def _universal_readings(group, facts, root, L, V, G, add, allowed, tag, gtag):
    """Readings any run's numbers can support, whatever its bug: frequent clipping where a clip norm is configured
    (a kind at >= 50 % of logged steps, the catalog's "most steps"; allowed at >= 20 %); and, as allowed only,
    tiny or huge update ratios between checkpoints, validation flat from its first evaluation while training falls
    over the same window, both losses stalled high together."""
    clip = facts.get("max_grad_norm")
    if clip and G and group != "clip_too_small":
        gs, gv = _arr(_finite(G))
        if len(gv) >= 5:
            rate = float(np.mean(gv > clip))
            if rate >= 0.5:
                add("frequent_clipping", gs[0], gs[-1], gtag, {"clip_rate": rate, "threshold": clip,
                                                               "median_norm": float(np.median(gv))},
                    f"pre-clip norm above {clip} on {rate:.0%} of logged steps (median {np.median(gv):.3g})")
            elif rate >= 0.2:
                allowed.add("frequent_clipping")
    ck = [(s, rel) for s, rel in facts.get("ckpt", []) if s > 0]
    if len(ck) >= 2:
        sds = [(s, _state(root, rel)) for s, rel in ck]
        for (a, wa), (b, wb) in zip(sds, sds[1:]):
            for k in wa:
                if wa[k].is_floating_point() and wa[k].dim() >= 2 and torch.isfinite(wa[k]).all() and torch.isfinite(wb[k]).all():
                    n = float(wa[k].norm())
                    r = float((wb[k] - wa[k]).norm()) / n / (b - a) if n > 0 else 0.0
                    if 0 < r < 1e-4 or r > 0.1:
                        allowed.add("update_ratio_anomaly")
    if V and L and group != "dist_mismatch":
        vs, vv = _arr(_finite(V))
        ls, lv = _arr(_finite(L))
        inside = lv[[i for i, s in enumerate(ls) if s >= vs[0]]] if len(vs) else []
        if len(vv) >= 3 and len(inside) >= 4:
            q = max(1, len(inside) // 4)
            tr = (np.median(inside[:q]) - np.median(inside[-q:])) / abs(np.median(inside[:q]))
            if tr >= 0.3 and (vv[0] - vv.min()) / abs(vv[0]) < 0.05:
                allowed.add("distribution_mismatch")
    if V and L and group != "underfitting":
        ls, lv = _arr(_finite(L))
        vs, vv = _arr(_finite(V))
        if len(lv) >= 8 and len(vv) >= 2:
            k = max(2, len(lv) // 10)
            init, fin, vfin = np.median(lv[:k]), np.median(lv[-k:]), np.median(vv[-2:])
            late = smooth(lv)[int(len(lv) * 0.7):]
            scale = max(abs(fin), 1e-12)
            stalled = abs(vfin - fin) / scale < 0.15 and abs(late[0] - late[-1]) / scale < 0.05
            uniform = facts.get("classes") and fin >= 0.9 * math.log(facts["classes"])  # no better than chance
            if stalled and (fin >= 0.3 * init or uniform):
                allowed.add("underfitting")
            if stalled and uniform:
                allowed.add("plateau")
