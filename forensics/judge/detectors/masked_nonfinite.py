"""masked_nonfinite: the logs hide non-finite values (a NaN gradient norm next to a finite or 0.0 loss)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import polars as pl

from forensics.judge import stats
from forensics.judge.detectors.base import NONFINITE, announced_at, announced_nonfinite, quoted, src
from forensics.judge.findings import Finding
from forensics.judge.numbers import count
from forensics.judge.run import Run
from ingest.announcements import NONFINITE_LOSS


@dataclass(frozen=True)
class MaskedNonfinite:
    """The logs hide non-finite values.

    Detects: logged steps where the gradient norm is NaN/Inf while the loss at the same step is finite (HF's
    `logging_nan_inf_filter` replaces it by a running average) or exactly 0.0, and below `blowup` times the highest
    finite loss before (a loss far above every earlier one shows the blow-up itself). Critical when the non-finite norm persists (`min_streak` points, to the end, or beside a loss of
    0.0); under a logged loss scale, a norm on a step where the scale fell is a skipped step, and a streak counts only
    when it never recovers. Without a logged scale a shorter streak that comes back is a warning, except within the
    first `calibration_steps` steps where a per-step LR (moving between `moving_share` of its points) did not advance:
    the fp16 scaler's start-up calibration. A short streak the log ends on after finite norms, beside a raw loss
    (a writer that filters nothing) that still moves after its first record, is a warning too: applied NaN
    gradients would have made that loss NaN.
    Also: a console log that announces a non-finite loss in words on lines the training skipped and survived (`nan loss
    caught, skipping batch` with finite losses logged after: `base.announced_nonfinite`): the logged curve never shows
    those NaNs; a warning, quoting the first line as printed. False alarms from words: 0 of the 116 healthy labelled real runs of the shared sets and the development parts (docs/engine.md).
    Also: a training loss of exactly 0.0 from some step to the end beside a NaN/Inf validation loss in that stretch
    (critical): HF's logged loss zeroed while its evaluation turns NaN. And, with no loss needed: a grad norm
    non-finite on every record while the optimizer's skip counter reads 0 (critical). One non-finite norm that comes
    back beside a finite loss that moves is a skipped fp16 step, not masking: a brief streak counts under a writer
    that filters non-finite losses (HF's Trainer), from 2 records and `min_share` of them, or beside a loss exactly 0
    or exactly repeated. And: quantities computed from the model's outputs in the loss's records (TRL's log-probs,
    logits, rewards) non-finite from some record to the end beside a finite loss (critical; none of the healthy pool's
    runs logs one non-finite beside a finite loss); never-finite ones beside a loss that moves were never computed.
    Why: the real NaN onset is hidden; the first such step is where the run really broke.
    Evidence: first such step, count, the loss and grad norm there, whether the loss is exactly 0.
    False alarms: 0 of the 403 healthy runs it could check (benchmarks/calibrate.py); 0 of the 40 healthy real runs.
    """

    kind: ClassVar[str] = "masked_nonfinite"
    stage: ClassVar[int] = NONFINITE
    joins_chain: ClassVar[bool] = True  # one event with the NaN its step range holds
    nonfinite: ClassVar[bool] = True  # a non-finite value: where replay starts
    requires: ClassVar[tuple[str, ...]] = ()  # a grad norm, a val loss or lines that announce a NaN (`unavailable`)
    min_streak: int = 3
    blowup: float = 5.0  # a finite loss this many times the highest before is a blow-up it shows, not one it hides
    min_share: float = 0.01  # brief non-finite norms that come back count from 2 records and 1% of them
    moving_share: float = 0.5  # an LR that changes between at least half its logged points is stepped per step
    # GradScaler's start-up calibration skips one step per halving from 65536: 16 at most before the scale reaches 1
    calibration_steps: int = 20
    # outputs computed per record (log-probs, logits, rewards) come several at once: one series alone may be a misread
    min_outputs: int = 2

    def _lr_held(self, run: Run, steps: np.ndarray) -> np.ndarray:
        """Per step of `steps`: the logged LR did not advance there (the same value as at the LR's previous logged
        point, or 0 at its first, a warmup that has not started) within the scaler's start-up calibration (the
        first `calibration_steps` steps), in a run whose LR moves between most of its
        logged points (a per-step schedule, so a held value means a skipped optimizer step: HF steps the scheduler
        only when the optimizer ran). All False without such an LR."""
        out = np.zeros(steps.size, dtype=bool)
        if not run.has("lr"):
            return out
        ls, lv = run.arrays("lr")
        ok = np.isfinite(lv)
        ls, lv = ls[ok], lv[ok]
        if lv.size < 3 or float(np.mean(np.diff(lv) != 0)) < self.moving_share:
            return out
        same = np.r_[lv[0] == 0, lv[1:] == lv[:-1]] & (ls <= self.calibration_steps)
        idx = np.searchsorted(ls, steps)
        found = (idx < ls.size) & (ls[np.minimum(idx, ls.size - 1)] == steps)
        out[found] = same[idx[found]]
        return out

    def unavailable(self, run: Run) -> str | None:
        if not run.has("loss"):
            if run.has("grad_norm") and run.has("skipped_steps"):
                return None  # a norm beside the optimizer's own skip counter speaks without a loss
            return run.missing_message("loss")
        if run.has("grad_norm") or run.has("val_loss") or run.announced(NONFINITE_LOSS).height or _outputs(run):
            return None
        return run.missing_message("grad_norm")

    def check(self, run: Run) -> Iterator[Finding]:
        found = [*self._announced(run), *self._beside_grad_norm(run)] if run.has("loss") else []
        found = found or list(self._nonfinite_norm_not_skipped(run))
        found = found or (list(self._beside_nonfinite_outputs(run)) if run.has("loss") else [])
        yield from found or self._zero_beside_nonfinite_eval(run)  # the evaluation says it only where nothing else did

    def _nonfinite_norm_not_skipped(self, run: Run) -> Iterator[Finding]:
        """A gradient norm non-finite on every logged record (`min_streak`+) while the optimizer's skipped-step
        counter reads 0 on each: the NaN gradients were not skipped, and no loss the log shows says so (Megatron /
        DeepSpeed lines `grad norm: nan | number of skipped iterations: 0`). Critical: the weights take NaN updates."""
        if not (run.has("grad_norm") and run.has("skipped_steps")):
            return
        gs, gv = run.arrays("grad_norm")
        ks, kv = run.arrays("skipped_steps")
        if gv.size < self.min_streak or np.isfinite(gv).any():
            return
        at = np.isin(ks, gs)
        if not at.any() or at.sum() < gv.size or np.any(kv[at] != 0):
            return
        ev = {"first_step": int(gs[0]), "last_step_masked": int(gs[-1]), "steps_masked": int(gv.size),
              "grad_norm_there": float(gv[0]), "skipped_counted": 0, "loss_exactly_zero": False,
              "any_loss_exactly_zero": False, "norm_came_back": False}
        yield Finding.of(self, severity="critical", step=ev["first_step"], step_end=ev["last_step_masked"],
                         series=run.pick("grad_norm"), evidence=ev,
                         sources=(src(run, "grad_norm", gs), src(run, "skipped_steps", ks[at])),
                         summary=(f"grad norm is {gv[0]} at every one of {count(gv.size, 'logged step')} "
                                  f"(steps {gs[0]}-{gs[-1]}) while the optimizer counts 0 skipped steps: the "
                                  "non-finite gradients were applied, and the log shows no loss that says so"))

    def _beside_nonfinite_outputs(self, run: Run) -> Iterator[Finding]:
        """Quantities the training computes from the model's outputs in the same records as the loss (TRL's
        `logps/chosen`, `logits/rejected`, `rewards/margins`: series of no other role, no held-out split), `min_outputs`
        or more, non-finite at every record from their first non-finite one to the end, `min_streak` records or more,
        while the loss logged beside them stays finite: the outputs are NaN and the loss hides it (a filtered or zeroed
        loss). A series NaN on every record beside a loss that takes several values is left out (`_moves`).
        Critical. False alarms: no healthy run of the pool logs such a series non-finite beside a finite loss."""
        ts, tv = run.arrays("loss")
        hidden: dict[str, np.ndarray] = {}
        for name in _outputs(run):
            os_, ov = run.arrays(name)
            at = np.isin(os_, ts)
            os_, ov = os_[at], ov[at]
            bad = ~np.isfinite(ov)
            if not bad.any():
                continue
            first = int(np.argmax(bad))
            if first == 0 and bad.all() and _moves(tv):
                continue  # never finite beside a loss that learns: a quantity this run does not compute (a placeholder)
            if bad[first:].all() and bad.size - first >= self.min_streak:
                hidden[name] = os_[first:]
        if len(hidden) < self.min_outputs:
            return
        first_step = int(min(int(s[0]) for s in hidden.values()))
        stretch = ts >= first_step
        if not np.isfinite(tv[stretch]).all():
            return  # the loss shows it: nan_loss's
        names = sorted(hidden, key=lambda n: (int(hidden[n][0]), n))
        zeros = int((tv[stretch] == 0.0).sum())
        ev = {"first_step": first_step, "loss_there": float(tv[stretch][0]), "steps_masked": int(stretch.sum()),
              "last_step_masked": int(ts[-1]), "nonfinite_series": names, "loss_exactly_zero": bool(tv[stretch][0] == 0.0),
              "any_loss_exactly_zero": zeros > 0, "norm_came_back": False}
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        at = run.printed_span(run.pick("loss"), first_step)
        yield Finding.of(self, severity="critical", step=first_step, step_end=int(ts[-1]), series=run.pick("loss"),
                         evidence=ev, sources=(src(run, "loss", ts[stretch]),
                                               *(src(run, n, hidden[n]) for n in names[:3])),
                         summary=(f"{shown} {'are' if len(names) > 1 else 'is'} non-finite at every record from "
                                  f"{at} to the end ({count(int(stretch.sum()), 'record')}) while the logged "
                                  f"loss stays finite ({ev['loss_there']:.4g} at {at}"
                                  + (f", exactly 0.0 at {count(zeros, 'record')}" if zeros else "")
                                  + "): the model's outputs are NaN and the logged loss hides it"))

    def _beside_grad_norm(self, run: Run) -> Iterator[Finding]:
        if not run.has("grad_norm"):
            return
        loss = run.series("loss").select("step", pl.col("value").alias("loss"))
        grad = run.series("grad_norm").select("step", pl.col("value").alias("grad"))
        both = loss.join(grad, on="step").sort("step")
        bad = ~both["grad"].is_finite().fill_null(False).to_numpy()
        if bad.any() and run.has("loss_scale"):
            scale = run.series("loss_scale").sort("step")
            fell = scale.with_columns((pl.col("value") < pl.col("value").shift(1)).alias("fell")).filter("fell")
            bad &= ~np.isin(both["step"].to_numpy(), fell["step"].to_numpy())  # the scaler skipped those steps
        if not bad.any():
            return
        # The loss must look ordinary there: 0.0, or below `blowup` times the highest finite loss before the first
        # bad grad norm (a running average of earlier losses, as HF logs it, or a loss that moves as losses do); a
        # finite loss far above everything before is divergence, seen.
        first_bad = int(both["step"][int(np.argmax(bad))])
        ceiling = both.filter((pl.col("step") < first_bad) & pl.col("loss").is_finite())["loss"].max()
        lv = both["loss"].fill_null(np.nan).to_numpy()
        top = self.blowup * ceiling if ceiling is not None and ceiling > 0 else (ceiling if ceiling is not None else np.inf)
        ordinary = np.isfinite(lv) & ((lv == 0.0) | (lv <= top))
        # A NaN that poisons the weights keeps the norm non-finite: a streak of `min_streak` logged points, one
        # reaching the end, or one behind a loss of exactly 0.0 (a window of only NaN steps). A lone Inf norm
        # followed by finite ones is a step GradScaler skipped under fp16: nothing is hidden there.
        # Under a GradScaler (a loss scale is logged) a skipped step leaves the weights finite, so the norm comes
        # back however many steps overflowed in a row: only a streak that never recovers hides a NaN there, and
        # it needs `min_streak` points too (the very last logged step of an fp16 run may be one skipped step).
        # Without a logged loss scale nothing tells a step the scaler skipped from a NaN the loss filter hid and
        # the weights survived: such brief streaks are kept too, as a warning that says both readings.
        scaled = run.has("loss_scale")
        held = self._lr_held(run, both["step"].to_numpy()) if not scaled else np.zeros(bad.size, dtype=bool)
        keep = np.zeros(bad.size, dtype=bool)
        poisoned = np.zeros(bad.size, dtype=bool)
        held_loss = np.r_[False, lv[1:] == lv[:-1]] | (lv == 0.0)
        filters = _filters_nonfinite(run)
        for a, b in stats.runs_of(bad):
            n = b - a + 1
            long = n >= self.min_streak and not scaled
            # A brief streak the log ends on poisons the weights, unless it interrupts finite norms and the raw
            # loss logged after its first record still moves (finite, not held at the value before, under a writer
            # that filters nothing): had the NaN gradients been applied, that loss would be NaN. A skipped step,
            # told as a warning.
            survived = (not filters and 0 < a < b and bool(np.isfinite(lv[a + 1:b + 1]).all())
                        and not held_loss[a + 1:b + 1].any())
            at_end = b == bad.size - 1 and (n >= self.min_streak or (not scaled and not survived))
            if long or at_end or bool(np.any(lv[a:b + 1] == 0.0)):
                keep[a:b + 1] = poisoned[a:b + 1] = True
            elif not scaled and not held[a:b + 1].all():
                keep[a:b + 1] = True  # (an LR that did not advance on each of them: steps the scaler skipped)
        # A brief non-finite norm that comes back beside a finite loss that moves is what a skipped fp16 step looks
        # like: it counts as masking only where the writer filters non-finite losses out of what it logs (HF's
        # Trainer), where it recurs (2+ records and `min_share` of them) or where the loss beside it is exactly 0
        # or exactly the previous record's (a value held in place of the NaN).
        brief = keep & ~poisoned
        if brief.any() and not held_loss[brief].any() and not filters \
                and (int(brief.sum()) < 2 or brief.sum() < self.min_share * bad.size):
            keep &= ~brief
        hit = both.filter(pl.Series(keep & ordinary))
        if hit.height == 0:
            return
        severe = bool((poisoned & keep & ordinary).any())
        first = hit.row(0, named=True)
        ev = {"first_step": first["step"], "loss_there": first["loss"], "grad_norm_there": first["grad"],
              "steps_masked": hit.height, "loss_exactly_zero": bool(first["loss"] == 0.0),
              "any_loss_exactly_zero": bool((hit["loss"] == 0.0).any()), "last_step_masked": int(hit["step"][-1])}
        ev["norm_came_back"] = bool(np.isfinite(both["grad"].fill_null(np.nan).to_numpy()[
            both["step"].to_numpy() > ev["last_step_masked"]]).any())
        why = ("the logs hide a non-finite loss" if severe else
               "the norm came back, so a step an fp16 scaler skipped or a NaN the loss filter hid; "
               "a logged loss scale would tell which" if ev["norm_came_back"] else
               "the log ends there, beside a loss that still moves: a step an fp16 scaler skipped, or a NaN the "
               "log stops before showing; a logged loss scale would tell which")
        yield Finding.of(self, severity="critical" if severe else "warning", step=first["step"],
                         step_end=int(hit["step"][-1]), series=run.pick("loss"), evidence=ev,
                         sources=(src(run, "loss", hit["step"].to_numpy()), src(run, "grad_norm", hit["step"].to_numpy())),
                         summary=(f"grad norm is {first['grad']} at step {first['step']} while the logged loss is "
                                  f"{first['loss']:.4g} ({count(hit.height, 'such step')}): {why}"))

    def _zero_beside_nonfinite_eval(self, run: Run) -> Iterator[Finding]:
        """A training loss of exactly 0.0 at every logged point from some step on while an evaluation in that
        stretch is NaN/Inf: the model's outputs are non-finite and the logged training loss was zeroed (fp16
        overflow under HF's filter), not trained to 0. Critical: the run is dead from the first such evaluation."""
        if not run.has("val_loss"):
            return
        ts, tv = run.arrays("loss")
        vs, vv = run.arrays("val_loss")
        if tv.size == 0 or not np.isfinite(tv).all() or tv[-1] != 0.0:
            return
        start = int(ts[int(np.flatnonzero(tv != 0.0)[-1]) + 1]) if (tv != 0.0).any() else int(ts[0])
        bad = (~np.isfinite(vv)) & (vs >= start)
        if not bad.any():
            return
        first = int(vs[int(np.argmax(bad))])
        zeros = int((ts >= start).sum())
        ev = {"first_step": first, "loss_there": 0.0, "val_loss_there": float(vv[int(np.argmax(bad))]),
              "zero_loss_from": start, "zero_loss_points": zeros, "nonfinite_evals": int(bad.sum()),
              "loss_exactly_zero": True}
        yield Finding.of(self, severity="critical", step=first, step_end=int(max(ts[-1], vs[-1])),
                         series=run.pick("loss"), evidence=ev,
                         sources=(src(run, "loss", ts[ts >= start]), src(run, "val_loss", vs[bad])),
                         summary=(f"validation loss is {ev['val_loss_there']} at step {first} while the logged "
                                  f"training loss is exactly 0.0 at {count(zeros, 'point')} from step {start}: the "
                                  "outputs are non-finite and the logs hide it (a zeroed loss, not a trained one)"))

    def _announced(self, run: Run) -> Iterator[Finding]:
        """Non-finite losses a console log announces in words on batches the training skipped and survived (finite
        losses are logged after them): the logged curve hides them (`base.announced_nonfinite`)."""
        _, survived = announced_nonfinite(run)
        if survived.height == 0:
            return
        first = survived.row(0, named=True)
        ev = {"first_step": int(first["step"]), "announced": first["text"], "steps_masked": survived.height,
              "last_step_masked": int(survived["step"][-1]), "source": first["grp"],
              "finite_losses_after": int(survived["finite_after"][-1]), "loss_exactly_zero": False,
              "any_loss_exactly_zero": False, "norm_came_back": True}
        yield Finding.of(self, severity="warning", step=ev["first_step"], step_end=ev["last_step_masked"],
                         series=run.pick("loss"), evidence=ev,
                         sources=({"table": "texts", "source": first["grp"], "step_min": ev["first_step"],
                                   "step_max": ev["last_step_masked"]},),
                         summary=(f"the log announces a non-finite loss {announced_at(first)}: "
                                  f"{quoted(first['text'])}"
                                  + (f" ({count(survived.height, 'such line')}, the last at step "
                                     f"{ev['last_step_masked']})" if survived.height > 1 else "")
                                  + ", and training went on: the logged loss curve never shows it (those batches "
                                  "were skipped); the first such step is where the NaN first appeared"))


def _outputs(run: Run) -> list[str]:
    """Series of no known role and no held-out split that hold a non-finite value: quantities computed from the
    model's outputs beside the loss (`logps/chosen`, `rewards/margins`), read by `_beside_nonfinite_outputs`."""
    m = run.meta.filter((pl.col("role") == "other") & pl.col("split").is_null() & (pl.col("n_nonfinite") > 0))
    return sorted(m["name"].to_list())


def _moves(values: np.ndarray) -> bool:
    """Whether a logged loss is finite and never exactly 0 on every record and takes more than one value: a loss
    computed from outputs that change, none of it zeroed by a filter. Beside it, a quantity non-finite from the first
    record to the last was never computed (an optimizer statistic of a method the run does not use, left NaN by its
    writer), not an output turned NaN."""
    return bool(values.size > 1 and np.isfinite(values).all() and (values != 0).all() and np.unique(values).size > 1)


def _filters_nonfinite(run: Run) -> bool:
    """The writer of the loss leaves non-finite step losses out of what it logs: HF's Trainer
    (`logging_nan_inf_filter`, on unless the config turns it off)."""
    said = run.config("logging_nan_inf_filter")
    if said is not None:
        return str(said).lower() in ("true", "1")
    return run.format_of(run.pick("loss")) == "hf_trainer_state"


def zeroed(run: Run) -> np.ndarray:
    """Per point of the training loss (`run.arrays("loss")`): logged exactly 0.0 where the logs show the value
    was non-finite, a non-finite gradient norm at the same step or a NaN/Inf evaluation inside a stretch of zeros
    the log ends on (HF's filter zeroing a NaN). Such a 0.0 is a hidden NaN, never a level a curve reached."""
    ts, tv = run.arrays("loss")
    out = np.zeros(tv.size, dtype=bool)
    zero = np.isfinite(tv) & (tv == 0.0)
    if not zero.any():
        return out
    if run.has("grad_norm"):
        gs, gv = run.arrays("grad_norm")
        out |= zero & np.isin(ts, gs[~np.isfinite(gv)])
    if run.has("val_loss") and tv[-1] == 0.0 and np.isfinite(tv).all():
        start = ts[int(np.flatnonzero(tv != 0.0)[-1]) + 1] if (tv != 0.0).any() else ts[0]
        vs, vv = run.arrays("val_loss")
        if np.any(~np.isfinite(vv) & (vs >= start)):
            out |= ts >= start
    return out
