"""nan_loss: the training loss becomes NaN or ±Inf."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import polars as pl

from forensics.judge.detectors.base import (NONFINITE, announced_at, announced_nonfinite, placeholder_nans, quoted,
                                           src)
from forensics.judge.findings import Finding
from forensics.judge.run import Run
from ingest.announcements import NONFINITE_LOSS


@dataclass(frozen=True)
class NanLoss:
    """The training loss becomes NaN or ±Inf.

    Detects: the first logged step whose loss is not finite (the onset, exact to the logged step).
    False alarms: fires on 0 of the 171 healthy runs it could check (at most 1.8% at 95% confidence;
    benchmarks/calibrate.py over the corpus tune + calib parts and shared/real_runs).
    Why: the first non-finite value is where the run died; every later value is a symptom.
    Evidence: onset step and value, last finite step and value, how much of the rest is non-finite, and the
    gradient norm at the last finite step against its earlier median where a grad-norm series exists.
    A loss that turns finite again right after is still reported, as a warning, with `stays_nonfinite` false.
    Where the judged loss stays finite, every other series of the training-loss role (an epoch mean, a component, a
    loss printed under another name) that ends non-finite is the onset, critical, naming its series; an evaluation
    loss that ends non-finite is a warning of its own, unless the evaluation columns are placeholders
    (`_other_series`); a NaN announced in words is quoted first. A table's empty cells printed as NaN, the training
    and validation columns taking turns row by row, are no NaN (`base.placeholder_nans`).
    Where the logged loss stays finite, a console line that announces a non-finite loss in words and ends the run
    (`Loss is nan, stopping training`; or `nan loss caught, skipping batch` with no finite loss logged after it:
    `base.announced_nonfinite`) is the onset, quoted as printed; critical, as a NaN the run died of.
    False alarms from words: 0 of the 116 healthy labelled real runs of the shared sets and the development parts (docs/engine.md).
    """

    kind: ClassVar[str] = "nan_loss"
    stage: ClassVar[int] = NONFINITE
    joins_chain: ClassVar[bool] = True  # one event with the NaN its step range holds
    nonfinite: ClassVar[bool] = True  # a non-finite value: where replay starts
    requires: ClassVar[tuple[str, ...]] = ("loss",)
    stays_fraction: float = 0.5  # non-finite share of the points after the onset that counts as "stays so"

    def restates(self, finding: Finding, findings: Sequence[Finding]) -> bool:
        """An evaluation loss gone non-finite beside masked_nonfinite (non-finite values the training loss hides)
        is that finding's consequence, told once."""
        return finding.evidence.get("split") == "val" and any(f.kind == "masked_nonfinite" for f in findings)

    def check(self, run: Run) -> Iterator[Finding]:
        steps, values = run.arrays("loss")
        bad = ~np.isfinite(values) & ~placeholder_nans(run, run.pick("loss"), steps, values)
        if not bad.any():
            found = list(self._announced(run)) or list(self._other_series(run, "train_loss"))  # words quote it best
            yield from found or self._other_series(run, "val_loss")
            return
        i = int(np.argmax(bad))
        after = _share_after(bad, i)
        stays = stays_nonfinite(values, self.stays_fraction)  # the rule's one home, loss_spike asks it too
        ev = {"onset_step": int(steps[i]), "onset_value": values[i], "nonfinite_points": int(bad.sum()),
              "nonfinite_fraction_after": after, "stays_nonfinite": stays,
              "last_finite_step": int(steps[i - 1]) if i > 0 else None,
              "last_finite_value": float(values[i - 1]) if i > 0 else None}
        sources = [src(run, "loss", steps)]
        if run.has("grad_norm") and i > 0:
            gs, gv = run.arrays("grad_norm")
            before = gv[(gs < steps[i]) & np.isfinite(gv)]
            if before.size >= 2:
                ev.update(grad_norm_before=float(before[-1]), grad_norm_median=float(np.median(before)))
                sources.append(src(run, "grad_norm", gs[gs < steps[i]]))
        first = "at the first logged step" if i == 0 else f"after {ev['last_finite_value']:.4g} at step {ev['last_finite_step']}"
        if not stays:
            how = f"then turns finite again ({after:.0%} non-finite after)"
        elif after == 1.0:
            how = "and stays non-finite"
        else:  # it comes back finite in between: say how much of the rest is not
            how = f"and is non-finite at {after:.0%} of the points after" + (", the last included" if bad[-1] else "")
        yield Finding.of(self, severity="critical" if stays else "warning", step=int(steps[i]),
                         series=run.pick("loss"), evidence=ev, sources=tuple(sources),
                         summary=f"loss is {ev['onset_value']} from step {steps[i]} {first} {how}")

    def _other_series(self, run: Run, role: str) -> Iterator[Finding]:
        """A loss the judged one does not show: another series of the training-loss role (an epoch mean, a component,
        a loss printed under another name) or the evaluation loss, non-finite at its last logged point (the log ends
        in it; a value that comes back finite is a step that survived). The earliest onset is reported, naming its
        series. Training: critical, as a NaN the run died of. Evaluation: a warning of its own (the training loss
        stays finite; an evaluation in half precision can overflow on weights that are sound). Not an evaluation loss
        non-finite at every one of its points beside its sibling terms exactly 0 at every one of theirs
        (`_placeholders`): those columns were never computed, not a model that blew up."""
        judged = run.pick("loss")
        onsets = []
        for name in run.all_of(role):
            if name == judged:
                continue
            f = run.series_named(name)
            steps, values = f["step"].to_numpy(), f["value"].fill_null(np.nan).to_numpy()
            bad = ~np.isfinite(values) & ~placeholder_nans(run, name, steps, values)
            if bad.size == 0 or not bad[-1] or (role == "val_loss" and bad.all() and self._placeholders(run)):
                continue
            i = int(np.argmax(bad))
            onsets.append((int(steps[i]), name, steps, values, i))
        if not onsets:
            return
        step, name, steps, values, i = min(onsets, key=lambda o: (o[0], o[1]))
        train = role == "train_loss"
        ev = {"onset_step": step, "onset_value": values[i], "nonfinite_points": int((~np.isfinite(values)).sum()),
              "nonfinite_fraction_after": float((~np.isfinite(values[i + 1:])).mean()) if i + 1 < values.size else 1.0,
              "stays_nonfinite": True, "series": name, "judged_loss": judged, "split": "train" if train else "val",
              "last_finite_step": int(steps[i - 1]) if i > 0 else None,
              "last_finite_value": float(values[i - 1]) if i > 0 else None}
        before = (f"after {ev['last_finite_value']:.4g} at step {ev['last_finite_step']}" if i > 0
                  else "its first logged point")
        what = (f"the training loss series {name!r} (beside the judged {judged!r}, which stays finite)" if train
                else f"the evaluation loss {name!r} (the training loss stays finite)")
        yield Finding.of(self, severity="critical" if train else "warning", step=step, series=name, evidence=ev,
                         sources=(src(run, name, steps[i:]),),
                         summary=f"{what} is {values[i]} from step {step} ({before}) and ends non-finite")

    def _placeholders(self, run: Run) -> bool:
        """Whether the evaluation-loss columns are placeholders, not measurements: each one non-finite at every point
        or exactly 0 at every point, and at least one of them 0 (a writer that fills a split's loss columns it never
        computed). A lone evaluation loss non-finite from its first point is still a NaN the evaluation produced."""
        zero = False
        for name in run.all_of("val_loss"):
            v = run.series_named(name)["value"].fill_null(np.nan).to_numpy()
            if v.size and np.all(v == 0):
                zero = True
            elif np.any(np.isfinite(v)):
                return False
        return zero

    def _announced(self, run: Run) -> Iterator[Finding]:
        """The run ended on a non-finite loss its log announces in words, not as a value (`base.announced_nonfinite`):
        the onset is the first such line of the file whose records it ends, the last finite loss the one logged before."""
        ended, _ = announced_nonfinite(run)
        if ended.height == 0:
            return
        first = ended.row(0, named=True)
        lines = ended.filter(pl.col("grp") == first["grp"]).height
        ev = {"onset_step": int(first["step"]), "onset_value": None, "announced": first["text"],
              "announcing_lines": lines, "source": first["grp"], "stays_nonfinite": True,
              "logged_after": int(first["finite_after"]), "last_finite_step": None, "last_finite_value": None}
        name = run.pick("loss")
        sources = [{"table": "texts", "source": first["grp"], "step_min": int(first["step"]),
                    "step_max": int(ended["step"].max())}]
        if name is not None and run.meta.filter(pl.col("name") == name)["grp"][0] == first["grp"]:
            steps, values = run.arrays("loss")
            ok = np.flatnonzero((steps <= first["step"]) & np.isfinite(values))
            if ok.size:
                ev.update(last_finite_step=int(steps[ok[-1]]), last_finite_value=float(values[ok[-1]]))
                sources.append(src(run, "loss", steps[ok[-1:]]))
        before = (f" (the last finite loss logged before it: {ev['last_finite_value']:.4g} at step "
                  f"{ev['last_finite_step']})" if ev["last_finite_step"] is not None else "")
        what = "loss" if first["tag"] == NONFINITE_LOSS else "gradient"
        how = ("and no finite loss is logged after it" if first["finite_after"] == 0 else
               "and says the training stops")
        yield Finding.of(self, severity="critical", step=int(first["step"]), series=name, evidence=ev,
                         sources=tuple(sources),
                         summary=(f"the log announces a non-finite {what} {announced_at(first)}{before}: "
                                  f"{quoted(first['text'])}"
                                  + (f" ({lines} such lines)" if lines > 1 else "") + f", {how}: the run ended on it; "
                                  f"the NaN is printed in words, not as a logged loss value"))


def stays_nonfinite(values: np.ndarray, share: float = NanLoss.stays_fraction) -> bool:
    """Whether a loss turned non-finite stays so: it ends non-finite, or `share` of the points after its first
    non-finite one are. Then every non-finite point from the onset on is that one NaN story (nan_loss's, critical),
    never a spike that recovered (`loss_spike` asks this)."""
    bad = ~np.isfinite(values)
    return bool(bad.any()) and (bool(bad[-1]) or _share_after(bad, int(np.argmax(bad))) >= share)


def _share_after(bad: np.ndarray, onset: int) -> float:
    """The non-finite share of the points after the onset (1.0 where the onset is the last point)."""
    return float(bad[onset + 1:].mean()) if onset + 1 < bad.size else 1.0
