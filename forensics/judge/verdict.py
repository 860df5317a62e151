"""The verdict on one analysed run (failed, suspicious, inconclusive or healthy, with a one-line reason) and the
headline finding a report leads with.

"healthy" is a claim like any finding: it means "I read this run and found nothing", never "I read nothing".
So, when no finding is critical or warning, the run is inconclusive (first rule that applies wins) when:

1. a file's reader is missing (its package is not installed): the run was not read;
2. no training-loss series was read (a folder of documents, a system log, a run that logged only metrics);
3. `--only`/`--skip` left out detectors and a series holds NaN/Inf: what judges it may not have run (this rule
   also outranks warnings: a NaN printed under "suspicious" would understate it);
4. none of the detectors that read the shape of the loss curve could run (every one found the series too short);
5. most detectors that read the training loss could not run;
6. a file was read with a loss (a document cut short, a damaged record, an unreadable checkpoint): what was lost
   may hold the failure. The cut tail of an append-only log is not such a loss: it is the record in flight.

Otherwise a critical finding makes the run failed, a warning suspicious, and nothing (or notes only) healthy.

The headline is the earliest cause in the chain of events, by this rule: take the findings of the worst severity
present, add every warning or critical finding that shares an event with one of them (the engine ties findings of
one episode into an event), and pick the one whose kind comes first from cause to symptom (each detector's `stage`, lower
is earlier), then the earliest step, then the worse severity. A weight collapse headlines the flat loss it causes;
exploding gradients or a divergence, whichever starts first, headline the NaN they end in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from forensics.judge.detectors import CURVE_KINDS, STAGE
from forensics.judge.findings import RANK, Analysis, Finding
from forensics.judge.numbers import count
from ingest.records import lossy


@dataclass(frozen=True)
class Verdict:
    value: str  # failed, suspicious, inconclusive or healthy
    reason: str  # one line, in the user's terms
    short: bool = False  # inconclusive only for want of points: the same log, longer, would decide


def judge(a: Analysis, *, selected: list[str], loss_detectors: list[str], restricted: bool,
          loss_points: int | None, read_problems: list[dict[str, Any]], val_points: int | None = None) -> Verdict:
    """The verdict on analysis `a`. `selected` are the kinds of the detectors this analysis ran or tried,
    `loss_detectors` those of them that read the training loss, `restricted` says `--only`/`--skip` left some
    out, `loss_points` is the number of finite points of the training loss read (None when there is none),
    `val_points` that of the validation loss, `read_problems` the run's read problems (`kind` per row)."""
    counts = {s: sum(f.severity == s for f in a.findings) for s in ("critical", "warning", "info")}
    # Where only a validation loss was read it is judged as validation, and every verdict says the training loss is missing
    missing = (f"; no training loss was read: the validation loss ({count(val_points, 'point')}) was judged as "
               f"validation" if loss_points is None and val_points else "")
    rl = a.checked.get("reinforcement_learning")
    # an agent's losses are read for non-finite values and blow-ups only: every verdict says so, and why
    rl_note = "" if not rl else (f"; a reinforcement-learning run that logs its reward ({rl['evidence']}) and no "
                                 f"loss: the reward was judged") if not rl["objectives"] else (
        f"; a reinforcement-learning run (it logs {rl['evidence']}): its losses "
                    f"({_names(rl['objectives'], 3)}) were judged for non-finite values and blow-ups, not as a "
                    f"training loss that should fall (they chase targets that move with the policy)")
    gan = a.checked.get("gan_pair")
    if gan:  # a GAN's two losses are judged as a pair, never one by one as a training loss: every verdict says so
        rl_note += (f"; a GAN run: its losses ({gan['generator']} and {gan['discriminator']}) were judged as a pair "
                    f"(does the discriminator win?), not as a training loss that should fall")
    if counts["critical"]:
        return Verdict("failed", _count_line(counts) + missing + rl_note)
    skipped = {s.kind: s.reason for s in a.skipped if s.kind in selected}
    ran = [k for k in selected if k not in skipped]
    if restricted and a.nonfinite:
        n = a.nonfinite[0]
        found = f"{_count_line(counts)}; " if a.findings else ""
        return Verdict("inconclusive", f"{found}{n['series']} is {n['value']} at step {n['step']} and only "
                       f"{_names(ran) or 'no detector'} ran; analyse without --only/--skip for a verdict")
    if counts["warning"]:
        return Verdict("suspicious", _count_line(counts) + missing + rl_note)
    missing = [p for p in read_problems if p["kind"] == "missing_dependency"]
    if missing:
        return Verdict("inconclusive", f"{missing[0]['path']} was not read: {missing[0]['detail']}")
    if loss_points is None and val_points:
        return Verdict("inconclusive", f"no training-loss series was read, only a validation loss ({count(val_points, 'point')}); "
                       f"judged as validation it neither blows up nor stays flat, and a rise or a stall in it could be "
                       f"overfitting or a failing run alike: the training loss beside it would decide")
    if loss_points is None and rl and not rl["objectives"]:  # only its reward could be judged
        return Verdict("inconclusive", f"a reinforcement-learning run that logs no loss: its reward "
                       f"({rl['evidence']}) was the one curve to judge and showed no stall; a logged policy or value "
                       f"loss would say more")
    if loss_points is None:
        series = a.checked.get("n_series", 0)
        what = (f"{count(series, 'other series', 'other series')} {'was' if series == 1 else 'were'} read"
                if series else "nothing in it was a training log")
        return Verdict("inconclusive", f"no training-loss series was read ({what}); there is nothing to judge")
    curve = [k for k in selected if k in CURVE_KINDS]
    if rl or gan:
        pass  # its curves were left unjudged by design, not for want of points: the rules below do not apply
    elif curve and not any(k in ran for k in curve):
        return Verdict("inconclusive", f"the training loss has {count(loss_points, 'finite point')}, too few for "
                       f"{_names(curve)}; nothing glaring stands out in them (no blow-up, no constant loss, no rise "
                       f"at every point){_would_decide(skipped, curve)}", short=True)
    loss_skipped = [k for k in loss_detectors if k in skipped]
    if not rl and not gan and loss_detectors and len(loss_skipped) * 2 > len(loss_detectors):
        return Verdict("inconclusive", f"{len(loss_skipped)} of the {len(loss_detectors)} detectors that read the "
                       f"training loss could not run ({_names(loss_skipped)}) and nothing glaring stands out"
                       f"{_would_decide(skipped, loss_skipped)}",
                       short=len([k for k in loss_skipped if not _too_short(skipped[k])]) * 2 <= len(loss_detectors))
    lossy = sorted({p["path"] for p in read_problems if lossy_read(p)})
    if lossy:
        return Verdict("inconclusive", f"no critical or warning finding, but {count(len(lossy), 'file')} read with problems "
                       f"({_names(lossy, 3)}): what could not be read may hold the failure")
    notes = f"; {count(counts['info'], 'note')}" if counts["info"] else ""
    only = f" (only {_names(ran)} checked)" if restricted else ""
    return Verdict("healthy", f"no finding from {count(len(ran), 'detector')}{only} over "
                   f"{count(loss_points, 'point')} of the training loss{notes}{rl_note}")


def _too_short(reason: str) -> bool:
    """Whether a detector could not run only for want of points (a series too short so far), not for a series the
    run does not log: the same run, longer, would have it run."""
    return "finite points; this detector needs at least" in reason


def _would_decide(skipped: dict[str, str], kinds: list[str]) -> str:
    """What would decide, from the skip reasons of `kinds`: the fewest points a short series needs for the detectors
    that found it too short (`series S has n finite points; this detector needs at least N`), and the series the
    others lack (`no series with role R`)."""
    short: dict[str, tuple[int, int]] = {}
    for k in kinds:
        m = re.search(r"series (.+?) has (\d+) finite points; this detector needs at least (\d+)", skipped.get(k, ""))
        if m and (m.group(1) not in short or int(m.group(3)) < short[m.group(1)][1]):
            short[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    roles = sorted({m.group(1) for k in kinds if (m := re.search(r"no series with role (\w+)", skipped.get(k, "")))})
    parts = [f"{need}+ points of {name} (it has {have}: log more often, or longer)"
             for name, (have, need) in list(short.items())[:2]]
    if roles:
        parts.append("a logged " + " and ".join(r.replace("_", " ") for r in roles))
    return "; what would decide: " + ", and ".join(parts) if parts else ""


def lossy_read(problem: dict[str, Any]) -> bool:
    """Whether a read problem lost evidence. The cut tail of an append-only log (an event file, a .wandb, a
    console log) is the record being written when the reader came, or when the run died: at most one record;
    a whole document cut short (trainer_state.json, a checkpoint) lost an unknown part."""
    if not lossy(problem["kind"]):
        return False
    return not (problem["kind"] == "truncated" and problem.get("format") in append_only_formats())


def append_only_formats() -> frozenset[str]:
    from ingest.formats import FORMATS

    return frozenset(f.name for f in FORMATS if f.resumable)


def headline_index(findings: list[Finding]) -> int | None:
    """Which finding a report leads with: the earliest cause in the chain (module docstring), or None. The engine
    calls this once per analysis; the store keeps the answer and every face reads it from there."""
    worst = min((f.severity for f in findings), key=RANK.__getitem__, default=None)
    if worst is None:
        return None
    top = [i for i, f in enumerate(findings) if f.severity == worst]
    events = {findings[i].event for i in top if findings[i].event is not None}
    pool = top + [i for i, f in enumerate(findings)
                  if f.severity != "info" and f.event in events and f.severity != worst]
    return min(pool, key=lambda i: (_stage(findings[i], findings), findings[i].step is None,
                                    findings[i].step or 0, RANK[findings[i].severity]))


def _stage(f: Finding, findings: list[Finding]) -> float:
    """`f`'s place in the chain: its kind's stage, or just after the kind its evidence says it `follows` when the
    analysis found that kind too (amp_overflow whose every halving came with a NaN loss is the NaN's consequence)."""
    follows = f.evidence.get("follows")
    if follows and any(g.kind == follows for g in findings):
        return STAGE.get(follows, 2) + 0.5
    return STAGE.get(f.kind, 2)


def fails(a: Analysis, level: str) -> bool:
    """`--fail-on`: `critical` a critical finding; `warning` a warning or worse, or a run that could not be judged
    (inconclusive ranks with warning: a pipeline asking to fail on warnings means "anything not healthy", and a
    run nobody could check must not pass as one where nothing was found); `inconclusive`, the earlier spelling
    of that rule, the same. One rule for one run and for `analyze ROOT --all`."""
    if level in ("warning", "inconclusive"):
        return a.verdict != "healthy" or any(RANK[f.severity] <= RANK["warning"] for f in a.findings)
    return any(RANK[f.severity] <= RANK[level] for f in a.findings)


def _count_line(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {s}" for s, n in counts.items() if n)


def _names(items: list[str], shown: int = 4) -> str:
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more
