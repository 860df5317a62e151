"""`forensics replay`: re-execute a run's bad step from its last finite checkpoint and say where the first
non-finite value came from (phase, op, module, file:line), which samples cause it, and which change fixes it.

    from forensics.usercode.replay import replay
    result = replay("sample_runs/runs/nan_bad_sample", db="/tmp/f.duckdb")   # the NaN onset from the store
    result.first_nonfinite           # {"phase": "forward", "op": "conv2d", "module": "features.conv1", ...}
    result.to_json()                 # the documented JSON object (docs/replay.md)

Running it runs the user's code (the run's `forensics_entry.py`): calling `replay` is the opt-in. Torch is
imported only here (never at the import of `forensics` or `ingest`). The run directory is never written to.
Order: fidelity first (replayed vs logged losses and gradient norms), then the failing step a second time from
the same state (transient or deterministic), and only a faithful, reproduced failure is diagnosed.
"""

from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path
from typing import Any

from forensics.judge.numbers import shell_path  # one home for paths as a person types them (`~/...`)
from forensics.usercode.replay.result import ReplayResult


def replay(run_dir: str | os.PathLike, step: int | None = None, *, entry: str | os.PathLike | None = None,
           from_checkpoint: str | None = None, device: str = "auto", threads: int | None = None,
           db: str | os.PathLike, store: bool = True) -> ReplayResult:
    """Replay `run_dir` up to step `step` (default: the first non-finite loss, else gradient norm, else
    checkpoint the store knows) with `threads` intra-op threads (default: what the machine can give now). Returns
    the result (`to_json()`: the documented object, docs/replay.md) and, with `store`, writes it to the `replays`
    table of `db` (the CLI resolves --db, $FORENSICS_DB and the user cache). Raises ReplayError subclasses for
    missing ingredients. Process-wide settings replay changes (RNG, deterministic algorithms, threads, cuDNN
    flags) are given back when it returns."""
    from forensics.judge.run import Run
    from forensics.usercode.kit.template import entry_path
    from ingest.errors import ForensicsError, ReplayError
    from ingest.run import ingest_run
    from ingest.store import hold

    root = Path(run_dir).resolve()
    if not root.is_dir():
        raise ForensicsError(f"{run_dir} is not a directory")
    if threads is not None and threads < 1:
        raise ReplayError(f"--threads {threads}: give 1 or more (default: the CPUs free now)")
    path = Path(db).expanduser()
    # One connection for the check of what is new and the read of the run (store.hold, as analyze does: replay
    # opened the store 7 times before its model ran); closed before any user code runs.
    with hold(path) as store:
        report = ingest_run(root, store, progress=None)
        with store.connect(write=False) as con:
            # Fidelity compares the logged value at every replayed step: a long series is read whole here, never
            # reduced as analyze reads it (a reduced view keeps a few points per bucket: most steps would be
            # missing).
            run = Run.from_store(con, report.run_id, long_series=sys.maxsize)
            for role in ("loss", "grad_norm"):  # series load lazily: read what fidelity needs while it is open
                if run.pick(role):
                    run.series(role)
            last_logged = run.last_step()
    if step is not None:
        check_step(run.name, step, last_logged)
    entry_file = entry_path(run, root, entry)
    target = step if step is not None else default_step(run)
    command = replay_command(run_dir, target, entry=entry, from_checkpoint=from_checkpoint, device=device,
                             threads=threads)

    from forensics.usercode.kit.device import choose_device
    from forensics.usercode.kit.rng import get_rng, set_rng
    from forensics.usercode.replay.determinism import deterministic

    dev = choose_device(device)
    saved_rng = get_rng()  # replay sets process-wide state: the caller's RNG comes back afterwards, as do the flags
    try:
        with deterministic(dev, threads) as settings:
            return _replay(run, root, target, entry_file, from_checkpoint, dev, settings, command,
                           path if store else None)
    finally:
        set_rng(saved_rng)


def replay_command(run_dir: str | os.PathLike, step: int, *, entry: str | os.PathLike | None = None,
                   from_checkpoint: str | None = None, device: str = "auto", threads: int | None = None,
                   db: str | os.PathLike | None = None) -> str:
    """The `forensics replay` command line for these settings, paths under the home directory written with `~`."""
    parts = ["forensics replay", shell_path(run_dir), "--step", str(step)]
    if entry:
        parts += ["--entry", shell_path(entry)]
    if from_checkpoint:
        parts += ["--from-checkpoint", shell_path(from_checkpoint)]
    if device != "auto":
        parts += ["--device", device]
    if threads:
        parts += ["--threads", str(threads)]
    if db:
        parts += ["--db", shell_path(db)]
    return " ".join(parts)


def default_step(run: Any) -> int:
    """The first non-finite logged loss, else gradient norm, else the first non-finite checkpoint."""
    from ingest.errors import ReplayError

    for role in ("loss", "grad_norm"):
        name = run.pick(role)
        if name is None:
            continue
        f = run.series_named(name)
        bad = [s for s, v in zip(f["step"].to_list(), f["value"].to_list()) if v is not None and not math.isfinite(v)]
        if bad:
            return int(bad[0])
    ck = run.table("checkpoints")
    if ck.height:
        bad = ck.filter(ck["finite"].fill_null(True).not_() & ck["step"].is_not_null()).sort("step")
        if bad.height:
            return int(bad["step"][0])
    raise ReplayError(f"run {run.name} has no non-finite loss, gradient norm or checkpoint in the store; "
                      f"name the step to replay with --step N")


def check_step(run_name: str, step: int, last_logged: int | None) -> None:
    """A step to replay is one the run logged: not negative, not past its last logged step."""
    from ingest.errors import ReplayError

    if step < 0:
        raise ReplayError(f"--step {step}: steps are not negative; name a logged step of run {run_name}")
    if last_logged is not None and step > last_logged:
        raise ReplayError(f"--step {step} is past the last logged step {last_logged} of run {run_name}; name a "
                          f"step from 0 to {last_logged}")


def _replay(run: Any, root: Path, target: int, entry_path: Path, from_checkpoint: str | None, device: Any,
            settings: dict[str, Any], command: str, db: Path | None) -> ReplayResult:
    from forensics.usercode.kit.batches import load_batch
    from forensics.usercode.kit.checkpoints import choose_checkpoint
    from forensics.usercode.kit.entry import StepOptions, load_entry, nested_config, read_config
    from forensics.usercode.kit.restore import restore_checkpoint
    from forensics.usercode.replay import counterfactuals, culprits, fidelity, instrument
    from forensics.usercode.replay.state import require_single_micro_batch, restore, run_step, snapshot
    from ingest.errors import MissingBatch

    t0 = time.perf_counter()
    config, config_from = read_config(root, nested_config(run._configs))
    entry = load_entry(entry_path)
    options = StepOptions.from_entry(entry, config)
    require_single_micro_batch(options)
    ck = run.table("checkpoints")
    ck_path, ck_fmt, ck_step, start = choose_checkpoint(ck.to_dicts() if ck.height else [], root, target,
                                                        options.step_numbering, from_checkpoint)
    b = run.table("batches")
    batches = {int(s): p for s, p in zip(b["step"].to_list(), b["path"].to_list()) if s is not None} if b.height else {}
    if start not in batches:
        have = sorted(batches)
        raise MissingBatch(
            f"no batch saved for step {start}, the first step after {ck_path}" +
            (f" (batches saved for steps {have[0]}-{have[-1]})" if have else " (no batches saved)") +
            "; save the last K batches before a failure next time (forensics.capture's ring buffer does)")
    st = restore_checkpoint(entry, config, root, ck_path, ck_fmt, device)
    result = ReplayResult(run=run.name, run_id=run.run_id, step=target, command=command, from_checkpoint=ck_path,
                          checkpoint_step=ck_step, entry=str(entry_path), config=config_from, device=str(device),
                          determinism=settings, restored=st.restored, notes=list(st.notes))
    outs, bad, snap, batch, stopped = {}, None, None, None, None
    loaded: dict[int, Any] = {}  # the window's batches as read (the spread re-runs and counterfactuals replay them)

    def load(s: int) -> Any:
        """Step `s`'s batch on the device, a copy of its own each time (user code may change a batch in place)."""
        if s not in loaded:
            loaded[s] = load_batch(root, batches[s])
        return {k: v.clone() if v.device == device else v.to(device) for k, v in loaded[s].items()}

    snap0 = snapshot(st)
    for s in range(start, target + 1):
        if s not in batches:
            stopped = f"no batch saved for step {s}: the replay stopped after step {s - 1}"
            break
        batch = load(s)
        snap = snapshot(st)
        outs[s] = run_step(st, batch)
        if not outs[s].finite:
            bad = s
            break
    last = bad if bad is not None else max(outs)
    result.replayed_steps = [start, last]
    result.timings_s["replay_to_step"] = time.perf_counter() - t0
    fid = fidelity.compare(run, outs, start, last)
    if not fid["faithful"] or fidelity.blowing_up(outs):  # how far one ulp of rounding moves these steps (fidelity.py)
        t1 = time.perf_counter()
        noisy = []
        for seed in range(fidelity.SPREAD_RERUNS):
            restore(st, snap0)
            perturb_one_ulp(st.model, seed)
            noisy.append({s: run_step(st, load(s)) for s in outs})
        fid = fidelity.compare(run, outs, start, last, perturbed=noisy)
        result.timings_s["rounding_noise"] = time.perf_counter() - t1
    result.fidelity = fid
    if stopped:
        result.notes.append(stopped)
    quiet = not fid["logged_nonfinite_not_reproduced"]  # the logs show no NaN/Inf the replay missed
    if bad is None and stopped is None and quiet and fid["faithful"]:  # a finite step: a spike, say
        restore(st, snap)
        result.spike = culprits.spike_drivers(st, batch)
        result.status = (f"finite step {target} replayed faithfully: the samples and layers that drive its loss "
                            f"and gradient norm are listed")
        return _finish(result, db, t0)
    if bad is None:
        result.status = ("not reproduced: transient — hardware, non-deterministic kernels, or state not saved: "
                            f"steps {start}-{last} stay finite in the replay"
                            + (f" ({stopped})" if stopped else ""))
        if not fid["faithful"]:
            result.status = _unfaithful(fid) + "; " + result.status
        return _finish(result, db, t0)
    first = outs[bad]
    restore(st, snap)
    second = run_step(st, batch)
    same = _same(first.loss, second.loss) and _same(first.grad_norm, second.grad_norm) and first.phase == second.phase
    result.reproduced = same
    result.bad_step = bad
    result.rerun = {"loss": [first.loss, second.loss], "grad_norm": [first.grad_norm, second.grad_norm],
                       "phase": [first.phase, second.phase]}
    if not fid["faithful"]:
        result.status = _unfaithful(fid)
        return _finish(result, db, t0)
    if not same:
        result.status = ("not reproduced: transient — hardware, non-deterministic kernels, or state not saved: "
                            f"two re-runs of step {bad} from the same state differ")
        return _finish(result, db, t0)
    t1 = time.perf_counter()
    restore(st, snap)
    hit = instrument.locate(st, batch, first.phase)
    result.timings_s["instrumented"] = time.perf_counter() - t1
    result.first_nonfinite = hit
    phase = hit["phase"] if hit else first.phase
    t1 = time.perf_counter()
    restore(st, snap)
    found = culprits.find_culprits(st, batch, phase)
    result.culprit_samples, result.culprits = found["samples"], found
    result.timings_s["culprits"] = time.perf_counter() - t1
    t1 = time.perf_counter()
    window = {**{s: outs[s] for s in range(start, bad)}, bad: second}
    result.counterfactuals = counterfactuals.try_changes(
        st, snap0, list(window), load, found["samples"], baseline=window, phase=phase,
        changes=counterfactuals.changes_for(clip_threshold(run, options)), failing=snap)
    result.likely_fix = counterfactuals.likely_fix(result.counterfactuals, window)
    result.timings_s["counterfactuals"] = time.perf_counter() - t1
    where = f" at step {bad}" + (f", before the requested step {target}" if bad < target else "")
    result.status = f"diagnosed: the first non-finite value appears in the {phase} pass{where}"
    if not fid["verified"]:
        result.status += (f" (fidelity unverified: the logs hold no loss or gradient norm in steps {start}-{last}; "
                             f"log every step next time, as forensics.capture does)")
    return _finish(result, db, t0)


def clip_threshold(run: Any, options: Any) -> float | None:
    """The run's own gradient-clipping threshold: the entry point's `max_grad_norm`, else its config's (the keys
    frequent_clipping reads), else None."""
    from forensics.judge.detectors.frequent_clipping import CLIP_KEYS

    if options.max_grad_norm is not None:
        return float(options.max_grad_norm)
    t = run.config_number(*CLIP_KEYS)
    return t if t is not None and 0 < t < math.inf else None


def perturb_one_ulp(model: Any, seed: int = 0) -> None:
    """Move every floating-point weight by about one float32 ulp, with the sign pattern of `seed` (deterministic)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.is_floating_point():
                sign = torch.randint(0, 2, p.shape, generator=gen).to(p.device, p.dtype) * 2 - 1
                p.add_(p * sign * 2.0 ** -23)


def _unfaithful(fid: dict) -> str:
    m = fid["first_mismatch"]
    return (f"unfaithful: the replay does not match the run's logs ({fid['mismatched']} of "
            f"{len(fid['compared'])} values differ; first: {m['series']} at step {m['step']} logged {m['logged']:.6g}, "
            f"replayed {m['replayed']:.6g}, outside its tolerance ±{m['tolerance']:.2g}); no diagnosis — check the entry point, the config and the saved states")


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def _finish(result: ReplayResult, db: Path | None, t0: float) -> ReplayResult:
    result.timings_s["total"] = time.perf_counter() - t0
    if db is not None:
        from ingest.store import connect
        from ingest.writes import insert_replay

        with connect(db, write=True) as con:
            result.replay_id = insert_replay(con, result.to_json())
    return result
