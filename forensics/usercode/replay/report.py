"""A replay result as a person reads it: terminal text, markdown, and the sentences the app's replay card shows.
`ReplayResult.to_json()` is what scripts read."""

from __future__ import annotations

from typing import Any

from forensics.judge.numbers import ints
from forensics.text.render import fenced, md
from forensics.usercode.replay.result import ReplayResult


def _g(v: Any) -> str:
    if v is None:
        return "n/a"
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def fidelity_line(r: ReplayResult) -> str:
    """The verdict and how the logged values compared: within the logged rounding, or only within the measured
    rounding spread, with the amplification measured where the run is blowing up. No value outside its tolerance is
    counted as matching."""
    fid = r.fidelity or {}
    compared = fid.get("compared") or []
    verdict = "UNFAITHFUL" if not fid.get("faithful") else "faithful" if fid.get("verified") else "UNVERIFIED"
    if not fid.get("verified"):
        return f"{verdict}: no logged loss or gradient norm in the replayed steps: unverified"
    n_in = sum(bool(c.get("match")) for c in compared)
    n_spread = sum(c.get("within") == "spread" for c in compared)
    how = f"{n_in}/{len(compared)} logged values within tolerance"
    if n_spread:
        how += (f", {n_in - n_spread} to the logged rounding, {n_spread} only within "
                f"{_g((fid.get('spread') or {}).get('noise_factor', 4.0))}x the measured rounding spread")
    else:
        how += ", all to the logged rounding"
    spread = fid.get("spread")
    if spread and spread.get("amplification_max") is not None:
        at = spread["at"]
        how += (f"; rounding amplified up to {_amp(spread['amplification_max'])}x ({at['series']}@{at['step']}; "
                f"spread of {spread['reruns']} re-runs with every weight moved one float32 ulp)")
    return f"{verdict}: {how}"


def _amp(x: Any) -> str:
    return "non-finite" if not isinstance(x, (int, float)) or x != x or x == float("inf") else f"{x:.2g}"


def value_line(c: dict[str, Any]) -> str:
    """One compared value with how it matched and the tolerance it was held to (never a bare "ok")."""
    tol = c.get("tolerance")
    tol_text = f"±{tol:.2g}" if isinstance(tol, (int, float)) else "±?"
    within = c.get("within") or ("rounding" if c.get("match") else "none")  # results stored before `within`
    said = {"exact": "equal" + (f" (tolerance {tol_text})" if c.get("rounding_spread") is not None else ""),
            "rounding": f"within {tol_text} (the logged rounding)",
            "spread": f"within {tol_text} (the measured rounding spread"
                      + (f", amplified {_amp(c['amplification'])}x)" if c.get("amplification") is not None else ")"),
            "none": f"DIFFERS (outside {tol_text})"}[within]
    return f"{c['series']}@{c['step']}: logged {_g(c['logged'])}, replayed {_g(c['replayed'])}: {said}"


def reproduced_line(r: ReplayResult) -> str:
    """Whether the failure came back: a finite step (a spike) is finite, as logged; a non-finite one twice the same."""
    if r.bad_step is None:
        if r.spike is not None:
            return "finite, as logged"
        return "no: every replayed step stayed finite"
    rr = r.rerun or {}
    loss, gn = rr.get("loss", [None, None]), rr.get("grad_norm", [None, None])
    return (f"{'yes' if r.reproduced else 'NO (transient)'}: step {r.bad_step} re-run from the same state gives loss "
            f"{_g(loss[0])} / {_g(loss[1])}, grad norm {_g(gn[0])} / {_g(gn[1])}")


def where_line(r: ReplayResult) -> str | None:
    """phase: op in module at file:line (parameter)."""
    hit = r.first_nonfinite
    if not hit:
        return None
    where = f" at {hit['file']}:{hit['line']}" if hit.get("file") else ""
    param = f" (parameter {hit['parameter']})" if hit.get("parameter") else ""
    return f"{hit['phase']}: {hit['op']} in {hit['module'] or '(top level)'}{where}{param}"


def culprits_line(r: ReplayResult) -> str | None:
    c = r.culprits
    if not c:
        return ints(r.culprit_samples, 12) if r.culprit_samples else None
    return (f"{ints(c['samples'], 12)} ({c['method']})" if c["samples"] else f"none ({c.get('note', c['method'])})")


def counterfactual_lines(r: ReplayResult) -> list[tuple[str, str]]:
    """(change, what it gave) for each counterfactual: over its window, whether it stayed finite and how the loss
    moved (a result stored before counterfactuals had windows: the step alone)."""
    out = []
    for cf in r.counterfactuals:
        if not cf.get("applicable", True):
            out.append((cf["change"], f"n/a: {cf['note']}"))
            continue
        where = f" ({cf['phase']})" if cf.get("phase") else ""
        if cf.get("window") and cf.get("loss_start") is not None:
            first, last = cf["window"]
            at = cf["failed_at"] if cf.get("failed_at") is not None else last
            verdict = (f"finite through step {last}" if cf["finite"] else f"non-finite at step {at}{where}")
            loss = (f"loss {_g(cf['loss'])} at step {at}" if first == at else
                    f"loss {_g(cf['loss_start'])} at step {first} → {_g(cf['loss'])} at step {at}")
        else:
            verdict = "finite" if cf["finite"] else f"still non-finite{where}"
            loss = f"loss {_g(cf['loss'])}"
        note = f" [{cf['note']}]" if cf.get("note") else ""
        out.append((cf["change"], f"{verdict}: {loss}, grad norm {_g(cf['grad_norm'])}{note}"))
    return out


def counterfactuals_window(r: ReplayResult) -> str:
    """`steps 61-80 replayed from checkpoints/step_60.pt with one change` (a result stored before windows: the step
    alone)."""
    window = next((cf["window"] for cf in r.counterfactuals if cf.get("window")), None)
    if not window:
        return "the step re-run with one change"
    span = f"step {window[0]}" if window[0] == window[1] else f"steps {window[0]}-{window[1]}"
    return f"{span} replayed from {r.from_checkpoint} with one change"


def likely_fix_line(r: ReplayResult) -> str | None:
    """`likely fix: <change> keeps steps a-b finite: ...`, or that no change did; None without counterfactuals."""
    if r.likely_fix:
        return f"likely fix: {r.likely_fix['evidence']}"
    tried = [cf for cf in r.counterfactuals if cf.get("applicable", True)]
    if not tried:
        return None
    window = tried[0].get("window")
    span = f"steps {window[0]}-{window[1]}" if window and window[0] != window[1] else f"step {r.bad_step}"
    return f"likely fix: none found: no change tried kept {span} finite (without zeroing every gradient)"


def lines(r: ReplayResult) -> list[str]:
    """The report, verdict first."""
    first, last = r.replayed_steps or (None, None)
    out = [f"{r.run}: replay of step {r.step}: {r.status}",
           f"  entry point: {r.entry} (your code was run)",
           (f"  from checkpoint: {r.from_checkpoint} (step {r.checkpoint_step}; restored: "
            f"{', '.join(r.restored)}); replayed steps {first}-{last} on {r.device}"
            + (f", {r.determinism['threads']} thread{'s' if r.determinism['threads'] != 1 else ''} "
               f"({r.determinism['threads_from']})"
               if r.determinism.get("threads_from") else ""))]
    out += [f"  note: {n}" for n in r.notes]
    fid = r.fidelity or {}
    out.append(f"fidelity: {fidelity_line(r)}")
    compared = fid.get("compared") or []
    for c in compared[-6:] if fid.get("faithful") else [c for c in compared if not c["match"]][:6]:
        out.append(f"  {value_line(c)}")
    if r.rerun or r.spike is not None:
        out.append(f"reproduced: {reproduced_line(r)}")
    hit = r.first_nonfinite
    if hit:
        out.append(f"first non-finite: {where_line(r)}")
        if hit.get("source"):
            out.append(f"    {hit['source']}")
        if hit.get("aten_ops"):
            out.append(f"  dispatched to {', '.join(hit['aten_ops'])}")
        if hit.get("forward_op"):
            out.append(f"  made by the forward op `{hit['forward_op']}`")
        for name, st in (hit.get("inputs") or {}).items():
            out.append(f"  {name}: {_describe(st)}")
    if r.culprits:
        out.append(f"culprit samples: {culprits_line(r)}")
        for k, s in (r.culprits.get("stats") or {}).items():
            if "culprit_abs_max" in s:
                out.append(f"  {k}: culprits' NaN/Inf {s['culprit_nonfinite'][:6]}, |max| "
                           f"{', '.join(_g(x) for x in s['culprit_abs_max'][:6])} vs median |max| of the rest "
                           f"{_g(s['rest_abs_max_median'])}")
    if r.spike:
        sp = r.spike
        out.append(f"step {r.step}: loss {_g(sp['loss'])}, grad norm {_g(sp['grad_norm'])}")
        out.append("  samples by loss: " + ", ".join(f"{x['sample']} ({_g(x['value'])}, {_g(x['x_median'])}x median)"
                                                   for x in sp["samples_by_loss"]))
        out.append("  samples by grad norm: " + ", ".join(f"{x['sample']} ({_g(x['value'])}, {_g(x['x_median'])}x median)"
                                                        for x in sp["samples_by_grad_norm"]))
        out.append("  layers by grad norm: " + ", ".join(f"{x['parameter']} ({x['share_of_squared_norm']:.0%})"
                                                        for x in sp["layers_by_grad_norm"]))
    if r.counterfactuals:
        out.append(f"counterfactuals ({counterfactuals_window(r)}):")
        out += [f"  {change:<14} {text}" for change, text in counterfactual_lines(r)]
    if r.command:
        out.append(f"command: {r.command}")
    fix = likely_fix_line(r)
    if fix:
        out.append(fix)
    return out


def _describe(st: Any) -> str:
    if not isinstance(st, dict):
        return _g(st)
    if "shape" not in st:
        return ", ".join(f"{k} ({_describe(v)})" if isinstance(v, dict) else
                         f"{k} {', '.join(_g(x) for x in v) if isinstance(v, list) else _g(v)}" for k, v in st.items())
    parts = [f"{st.get('dtype')}{st['shape']}"]
    for k in ("n_nan", "n_inf", "n_zero"):
        if st.get(k):
            parts.append(f"{st[k]} {k[2:]}")
    if st.get("abs_max") is not None:
        parts.append(f"|max| {_g(st['abs_max']) if not isinstance(st['abs_max'], float) else format(st['abs_max'], '.3g')}")
    if st.get("from"):
        parts.append(f"from {st['from']}")
    return ", ".join(parts)


def text(r: ReplayResult) -> str:
    return "\n".join(lines(r))


def markdown(r: ReplayResult) -> str:
    return "\n".join([f"# run-forensics replay: {md(r.run)} step {r.step}", "", f"**{md(r.status)}**", "",
                      *fenced(lines(r)), ""])
