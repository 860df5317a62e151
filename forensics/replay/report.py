"""A replay result as a person reads it (terminal text, markdown) and as scripts read it (JSON without NaN)."""

from __future__ import annotations

from typing import Any

from ingest.jsonvalues import plain  # noqa: F401 - the CLI's --json uses report.plain


def _g(v: Any) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def _ints(values: list[int], shown: int = 12) -> str:
    more = f", ... ({len(values)} in all)" if len(values) > shown else ""
    return "[" + ", ".join(str(v) for v in values[:shown]) + more + "]"


def lines(r: dict[str, Any]) -> list[str]:
    """The report, verdict first."""
    first, last = r["replayed_steps"]
    out = [f"{r['run']}: replay of step {r['step']}: {r['status']}",
           f"  entry point: {r['entry']} (your code was run)",
           (f"  from checkpoint: {r['from_checkpoint']} (step {r['checkpoint_step']}; restored: "
            f"{', '.join(r['restored'])}); replayed steps {first}-{last} on {r['device']}")]
    out += [f"  note: {n}" for n in r["notes"]]
    fid = r["fidelity"]
    n_ok = sum(c["match"] for c in fid["compared"])
    how = ("no logged loss or gradient norm in the replayed steps: unverified" if not fid["verified"] else
           f"{n_ok}/{len(fid['compared'])} logged values match" +
           (" (some only within float32 rounding noise, measured)" if fid.get("within_rounding_noise") else ""))
    verdict = "UNFAITHFUL" if not fid["faithful"] else "faithful" if fid["verified"] else "UNVERIFIED"
    out.append(f"fidelity: {verdict}: {how}")
    for c in fid["compared"][-6:] if fid["faithful"] else [c for c in fid["compared"] if not c["match"]][:6]:
        out.append(f"  {c['series']}@{c['step']}: logged {_g(c['logged'])}, replayed {_g(c['replayed'])} "
                   f"{'ok' if c['match'] else 'DIFFERS'}")
    if r.get("rerun"):
        rr = r["rerun"]
        out.append(f"re-run of step {r.get('bad_step')}: loss {_g(rr['loss'][0])} / {_g(rr['loss'][1])}, grad norm "
                   f"{_g(rr['grad_norm'][0])} / {_g(rr['grad_norm'][1])}: "
                   f"{'deterministic' if r['reproduced'] else 'DIFFERENT (transient)'}")
    hit = r.get("first_nonfinite")
    if hit:
        where = f" at {hit['file']}:{hit['line']}" if hit.get("file") else ""
        out.append(f"first non-finite: {hit['phase']}: {hit['op']} in {hit['module'] or '(top level)'}{where}")
        if hit.get("source"):
            out.append(f"    {hit['source']}")
        if hit.get("aten_ops"):
            out.append(f"  dispatched to {', '.join(hit['aten_ops'])}")
        if hit.get("forward_op"):
            out.append(f"  made by the forward op `{hit['forward_op']}`")
        if hit.get("parameter"):
            out.append(f"  parameter: {hit['parameter']}")
        for name, st in (hit.get("inputs") or {}).items():
            out.append(f"  {name}: {_describe(st)}")
    if r.get("culprits"):
        c = r["culprits"]
        out.append(f"culprit samples: {_ints(c['samples'])} ({c['method']})" if c["samples"] else
                   f"culprit samples: none ({c.get('note', c['method'])})")
        for k, s in (c.get("stats") or {}).items():
            if "culprit_abs_max" in s:
                out.append(f"  {k}: culprits' NaN/Inf {s['culprit_nonfinite'][:6]}, |max| "
                           f"{[_g(x) for x in s['culprit_abs_max'][:6]]} vs median |max| of the rest {_g(s['rest_abs_max_median'])}")
    if r.get("spike"):
        sp = r["spike"]
        out.append(f"step {r['step']}: loss {_g(sp['loss'])}, grad norm {_g(sp['grad_norm'])}")
        out.append("  samples by loss: " + ", ".join(f"{x['sample']} ({_g(x['value'])}, {_g(x['x_median'])}x median)"
                                                   for x in sp["samples_by_loss"]))
        out.append("  samples by grad norm: " + ", ".join(f"{x['sample']} ({_g(x['value'])}, {_g(x['x_median'])}x median)"
                                                        for x in sp["samples_by_grad_norm"]))
        out.append("  layers by grad norm: " + ", ".join(f"{x['parameter']} ({x['share_of_squared_norm']:.0%})"
                                                        for x in sp["layers_by_grad_norm"]))
    if r.get("counterfactuals"):
        out.append("counterfactuals (the step re-run with one change):")
        for cf in r["counterfactuals"]:
            if not cf.get("applicable", True):
                out.append(f"  {cf['change']:<14} n/a: {cf['note']}")
                continue
            verdict = "finite" if cf["finite"] else f"still non-finite ({cf.get('phase')})"
            note = f" [{cf['note']}]" if cf.get("note") else ""
            out.append(f"  {cf['change']:<14} {verdict}: loss {_g(cf['loss'])}, grad norm {_g(cf['grad_norm'])}{note}")
    return out


def _describe(st: Any) -> str:
    if not isinstance(st, dict):
        return str(st)
    if "shape" not in st:
        return ", ".join(f"{k}={v}" for k, v in st.items())
    parts = [f"{st.get('dtype')}{st['shape']}"]
    for k in ("n_nan", "n_inf", "n_zero"):
        if st.get(k):
            parts.append(f"{st[k]} {k[2:]}")
    if st.get("abs_max") is not None:
        parts.append(f"|max| {st['abs_max']:.3g}")
    if st.get("from"):
        parts.append(f"from {st['from']}")
    return ", ".join(parts)


def text(r: dict[str, Any]) -> str:
    return "\n".join(lines(r))


def markdown(r: dict[str, Any]) -> str:
    return "\n".join([f"# run-forensics replay: `{r['run']}` step {r['step']}", "", f"**{r['status']}**", "",
                      "```", *lines(r), "```", ""])
