"""`forensics compare`: a failed run beside the runs that worked, from what the store holds.

    from forensics.services.compare import compare
    with connect(db, write=False) as con:
        c = compare(con, "sample_runs/runs/nan_lr_too_high")
    c.as_dict()          # the object `forensics compare --json` prints

Four answers, each from stored data: the siblings a user would put beside the run (same writer and model shape,
nearest config, judged healthy or with fewer/later critical findings), ranked with one line of why; the first
step where the run's loss leaves the best sibling's beyond both runs' noise, and which logged series (LR, gradient
norm, loss scale, update ratio) left it first; the config values that differ (dotted keys, as ingest flattened
them), ranked by what the run's diagnosis implicates; and, for each, how the store's runs with each value ended,
with counts and Fisher's exact test where there are enough runs. Nothing here is stored or claimed as a cause.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from forensics.judge import numbers, stats
from ingest.errors import ForensicsError
from ingest.jsonvalues import plain

# -- where two curves part ---------------------------------------------------------------------------------
# Each curve is smoothed by a centred median of SMOOTH of its own points, compared on log values where both are
# positive (a loss's seed-to-seed differences are relative), on the sparser run's steps. The runs part where the
# gap stays outside the band for PERSIST aligned points in a row (or until the failed run turns non-finite). The
# band is the larger of BAND_SIGMAS of both runs' point-to-point noise (`stats.noise`, as a median of SMOOTH
# points) and SEED_BAND, the gap two healthy seeds of one config show: calibrated so that no healthy replica
# pair of the corpus parts (docs/engine.md, "compare").
SMOOTH = 5
PERSIST = 3
BAND_SIGMAS = 4.0
SEED_BAND = math.log(2.5)
ABS_SHARE = 0.1
CALM_POINTS = 10  # points before its earliest finding that measure the failed run's own noise
MEDIAN_EFFICIENCY = 1.2533  # a median of k normal points has sigma × this / √k

# Series roles compared for "what moved first"; beside them, each layer's logged norms and checkpoints' parameters.
MOVER_ROLES = ("lr", "grad_norm", "loss_scale", "update_ratio")

SIBLINGS_SHOWN = 5
SHAPE_MIN = 0.4  # mean of the config-key and series-name overlaps (Jaccard) a sibling needs
# A store collects every run a user ever analysed. A run found without being asked for (`compare` without names,
# `analyze`'s one line) is kin only when it sits in the same folder as the run (a sweep's, a team's runs root) or
# both carry configs that pass SHAPE_MIN: two config-less logs of unrelated projects look alike (one loss series
# each) without being siblings.
TEAM_MIN_RUNS = 6  # runs holding a key before its team row gets a test
TEAM_KEYS = 8

# What a diagnosis implicates, most likely first: finding kind -> setting groups. A group is a regular expression
# over the dotted key, lower-cased. The kinds are catalog ids (tests/test_compare.py checks).
_LR = r"(^|[._])(lr|learning_rate|base_lr|max_lr|peak_lr)$"
_WARMUP = r"warmup"
_SCHEDULE = r"sched|lr_decay|decay_steps|milestones|gamma|cosine"
_MOMENTUM = r"momentum|beta"
_CLIP = r"clip|max_grad_norm|grad_norm"
_PRECISION = r"(^|[._])(amp|fp16|bf16|precision|dtype|half|mixed)|loss_scale|grad_scaler|init_scale|growth"
_EPS = r"(^|[._])(eps|epsilon|adam_epsilon|adam_eps)$"
_DATA = r"(^|[._])data[._]|n_train|train_size|num_samples|dataset|augment|label_noise|shuffle"
_REGULARISE = r"dropout|weight_decay|(^|[._])wd$"
_INIT = r"init|std|bias"
_ACTIVATION = r"(^|[._])(act|activation|nonlinearity)$"
_DEPTH = r"depth|n_layer|num_layers|(^|[._])layers$"
_NORM = r"norm|standardi[sz]e|scale_inputs"
_BATCH = r"batch_size|accumulat"
_WIDTH = r"hidden|width|d_model|n_embd|dim$"
_LENGTH = r"max_steps|epochs|max_epochs|num_train_epochs"
_VAL = r"n_val|val_|eval"

IMPLICATES: dict[str, tuple[str, ...]] = {
    "divergence": (_LR, _WARMUP, _SCHEDULE, _MOMENTUM, _CLIP, _BATCH),
    "nan_loss": (_LR, _CLIP, _PRECISION, _EPS, _WARMUP, _DATA),
    "loss_spike": (_LR, _CLIP, _DATA, _BATCH),
    "oscillation": (_LR, _MOMENTUM, _WARMUP, _BATCH),
    "exploding_gradients": (_CLIP, _LR, _WARMUP, _INIT),
    "update_ratio_anomaly": (_LR, _WARMUP, _SCHEDULE),
    "amp_overflow": (_PRECISION, _LR, _CLIP),
    "nonfinite_weights": (_EPS, _LR, _PRECISION, _CLIP),
    "masked_nonfinite": (_EPS, _PRECISION, _DATA),
    "overfitting": (_DATA, _REGULARISE, _LENGTH, _WIDTH),
    "grokking": (_REGULARISE, _DATA, _LENGTH),
    "plateau": (_LR, _SCHEDULE, _WIDTH, _DEPTH),
    "underfitting": (_WIDTH, _DEPTH, _LR, _REGULARISE, _LENGTH),
    "flat_loss": (_LR, _INIT),
    "dead_relu": (_INIT, _ACTIVATION, _LR),
    "saturated_activation": (_NORM, _ACTIVATION, _INIT),
    "vanishing_gradients": (_ACTIVATION, _DEPTH, _INIT, _NORM),
    "weight_norm_growth": (_REGULARISE, _LR),
    "weight_collapse": (_REGULARISE, _LR),
    "lr_schedule_anomaly": (_SCHEDULE, _WARMUP, _LR),
    "frequent_clipping": (_CLIP, _LR),
    "val_noise": (_VAL,),
    "distribution_mismatch": (_NORM, _DATA, _VAL),
    "initial_loss_mismatch": (_INIT, r"classes|num_labels"),
    "bad_batch": (_DATA, _CLIP, _LR),
}


# -- the result ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Sibling:
    """A run put beside the failed one, with why: its verdict, writer, and how near its config and series are."""

    run_id: str
    name: str
    verdict: str
    headline: str | None  # `kind at step N` of its earliest cause, None when healthy
    same_writer: list[str]  # formats both runs' series came from
    keys_shared: int
    keys_union: int
    values_differ: list[str]  # shared keys whose values differ, the farthest apart first
    series_shared: int
    series_union: int
    why: str  # one line


@dataclass(frozen=True)
class Part:
    """Where one series of the failed run leaves the sibling's: the first aligned step of a gap outside the band
    that lasts (None when it never does), above or below, the smoothed values there and the band."""

    series: str
    sibling_series: str
    step: int | None
    direction: str | None  # above, below, non-finite
    value: float | None  # the failed run's smoothed value there
    sibling_value: float | None
    band: float  # as a factor (log scale) or an absolute gap (linear)
    log_scale: bool
    aligned_points: int
    overlap: tuple[int, int] | None
    note: str = ""


@dataclass(frozen=True)
class Setting:
    """One config value that differs between the run and its sibling, with the finding kind that implicates it."""

    key: str
    value: Any
    sibling_value: Any
    change: str  # `0.15 vs 0.001 (×150)`
    implicated_by: str | None
    rank: int


@dataclass(frozen=True)
class TeamRow:
    """How the store's runs with each value of one setting ended: the failed run's side first."""

    key: str
    outcome: str  # `failed with divergence`
    groups: list[dict[str, Any]]  # {label, failed, runs}
    runs: int
    p: float | None  # Fisher's exact test, two-sided (Bonferroni over the cuts tried); None: too few runs
    cuts: int
    text: str


@dataclass
class Comparison:
    """`forensics compare`'s result: what it compared and the four answers (module docstring)."""

    run: str
    run_id: str
    verdict: str
    headline: dict[str, Any] | None
    siblings: list[Sibling] = field(default_factory=list)
    parting: Part | None = None
    movers: list[Part] = field(default_factory=list)
    settings: list[Setting] = field(default_factory=list)
    team: list[TeamRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def sibling(self) -> Sibling | None:
        return self.siblings[0] if self.siblings else None

    def as_dict(self) -> dict[str, Any]:
        return plain({"run": self.run, "run_id": self.run_id, "verdict": self.verdict, "headline": self.headline,
                      "siblings": [asdict(s) for s in self.siblings],
                      "parting": asdict(self.parting) if self.parting else None,
                      "moved_first": [asdict(m) for m in self.movers],
                      "settings": [asdict(s) for s in self.settings], "team": [asdict(t) for t in self.team],
                      "notes": list(self.notes)})


# -- the store's runs ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Store:
    runs: pl.DataFrame  # ingest.queries.compare_runs
    configs: dict[str, dict[str, Any]]
    series: dict[str, dict[str, str]]  # run_id -> series name -> role
    ordinal_loss: dict[str, bool]

    @classmethod
    def read(cls, con: Any) -> _Store:
        from ingest import queries

        s = queries.compare_series(con)
        series: dict[str, dict[str, str]] = {}
        ordinal: dict[str, bool] = {}
        for run_id, name, role, is_ordinal in s.iter_rows():
            series.setdefault(run_id, {})[name] = role
            if role == "train_loss":
                ordinal[run_id] = ordinal.get(run_id, True) and bool(is_ordinal)
        return cls(queries.compare_runs(con), queries.compare_configs(con), series, ordinal)

    def row(self, run_id: str) -> dict[str, Any]:
        return self.runs.filter(pl.col("run_id") == run_id).row(0, named=True)


def resolve(con: Any, what: str | Path) -> str:
    """The stored run a command names: a run folder (by its resolved path, as ingest names runs), a run name or
    a run id. ForensicsError names the way to store it, or the runs the store holds."""
    from ingest.run import run_id_for

    rows = con.execute("SELECT run_id, name FROM runs ORDER BY name").fetchall()
    ids = {r for r, _ in rows}
    path = Path(what).expanduser()
    if path.is_dir():
        rid = run_id_for(path)
        if rid in ids:
            return rid
        raise ForensicsError(f"{what} is not in the store; analyse it first: forensics analyze {what} (same --db)")
    hits = [r for r, n in rows if str(what) in (r, n)]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise ForensicsError(f"{len(hits)} stored runs are named {what}; give the run folder or its id: "
                             + ", ".join(hits[:8]))
    names = ", ".join(n for _, n in rows[:12]) + (", ..." if len(rows) > 12 else "")
    raise ForensicsError(f"no run {what!r} in the store; runs stored: {names or 'none'}")


# -- siblings --------------------------------------------------------------------------------------------------

def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) \
            and not isinstance(b, bool):
        return float(a) == float(b) or (math.isnan(float(a)) and math.isnan(float(b)))
    return a == b


def _log_ratio(a: Any, b: Any) -> float:
    """|log(a/b)| for two positive numbers, 1 for any other difference (0 when equal)."""
    if _same(a, b):
        return 0.0
    try:
        fa, fb = float(a), float(b)
    except (TypeError, ValueError):
        return 1.0
    if isinstance(a, bool) or isinstance(b, bool) or not (fa > 0 and fb > 0 and math.isfinite(fa * fb)):
        return 1.0
    return abs(math.log(fa / fb))


def _same_folder(a: str | None, b: str | None) -> bool:
    """Whether two stored run folders sit in one parent folder."""
    return bool(a and b) and Path(a).parent == Path(b).parent


def _jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def _decided(verdict: str) -> bool:
    return verdict in ("healthy", "suspicious", "failed")


def _tier(me: dict[str, Any], other: dict[str, Any]) -> int | None:
    """0 healthy; 1 judged with fewer critical findings, or as many with the first one later, or (neither has one)
    fewer warnings; None: not a reference."""
    if other["verdict"] == "healthy":
        return 0
    if not _decided(other["verdict"]) or me["verdict"] == "healthy":
        return None
    if other["verdict"] == "failed" and other["headline_kind"] == me["headline_kind"]:
        return None  # the same failure, however late, is no run that worked
    if other["n_critical"] != me["n_critical"]:
        return 1 if other["n_critical"] < me["n_critical"] else None
    if me["first_critical"] is not None:  # as many critical findings: the first one later
        return 1 if other["first_critical"] is not None and other["first_critical"] > me["first_critical"] else None
    return 1 if other["n_findings"] < me["n_findings"] else None  # no critical finding: fewer warnings


def _headline_words(row: dict[str, Any]) -> str | None:
    if not row.get("headline_kind"):
        return None
    step = row.get("headline_step")
    return row["headline_kind"] + ("" if step is None else f" at step {step}")


def siblings(store: _Store, run_id: str, only: list[str] | None = None) -> list[Sibling]:
    """The runs to put beside `run_id`, best first (module docstring); `only` restricts them to these run ids,
    kept in that order and whatever their verdict."""
    me = store.row(run_id)
    mine_cfg = store.configs.get(run_id, {})
    mine_series = set(store.series.get(run_id, {}))
    my_formats = set(me["formats"].split())
    ranked = []
    for other in store.runs.iter_rows(named=True):
        rid = other["run_id"]
        if rid == run_id or (only is not None and rid not in only):
            continue
        tier = 0 if only is not None else _tier(me, other)
        if tier is None or "train_loss" not in store.series.get(rid, {}).values():
            continue
        if store.ordinal_loss.get(rid) != store.ordinal_loss.get(run_id):
            continue  # a loss on line ordinals is never placed on logged steps (DECISIONS §16)
        writers = sorted(my_formats & set(other["formats"].split()))
        if not writers and only is None:
            continue
        cfg = store.configs.get(rid, {})
        if only is None and not (mine_cfg and cfg) and not _same_folder(me["root"], other["root"]):
            continue
        theirs = set(store.series.get(rid, {}))
        keys_j = _jaccard(set(mine_cfg), set(cfg)) if (mine_cfg or cfg) else 1.0
        shape = (keys_j + _jaccard(mine_series, theirs)) / 2
        if shape < SHAPE_MIN and only is None:
            continue
        shared = sorted(set(mine_cfg) & set(cfg))
        differ = sorted((k for k in shared if not _same(mine_cfg[k], cfg[k])),
                        key=lambda k: (-_log_ratio(mine_cfg[k], cfg[k]), k))
        distance = sum(_log_ratio(mine_cfg[k], cfg[k]) for k in differ)
        verdict = other["verdict"]
        head = _headline_words(other)
        judged = "healthy" if verdict == "healthy" else f"{verdict}, " + (
            f"{other['n_critical']} critical finding(s) against {me['n_critical']}"
            + (f", the first at step {other['first_critical']}" if other["first_critical"] is not None else ""))
        shown = ", ".join(differ[:4]) + (", ..." if len(differ) > 4 else "")
        why = (f"{judged}; same writer ({', '.join(writers) or 'none'}); {len(shared)} of "
               f"{len(set(mine_cfg) | set(cfg))} config keys shared, {len(differ)} value(s) differ"
               + (f" ({shown})" if differ else "") + f"; {len(mine_series & theirs)} of {len(mine_series | theirs)} "
               "series shared")
        sib = Sibling(rid, other["name"], verdict, head, writers, len(shared), len(set(mine_cfg) | set(cfg)),
                      differ, len(mine_series & theirs), len(mine_series | theirs), why)
        order = only.index(rid) if only is not None else 0
        ranked.append(((order, tier, -round(shape, 1), len(differ), distance, other["name"]), sib))
    return [s for _, s in sorted(ranked, key=lambda t: t[0])]


# -- where they part ---------------------------------------------------------------------------------------------

def _finite_head(steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, int | None]:
    """The finite points before the first non-finite one, and that step (None when every point is finite)."""
    bad = ~np.isfinite(values)
    if bad.any():
        i = int(np.argmax(bad))
        return steps[:i], values[:i], int(steps[i])
    return steps, values, None


def part(f_steps: np.ndarray, f_values: np.ndarray, s_steps: np.ndarray, s_values: np.ndarray, *,
         series: str = "", sibling_series: str = "", until: int | None = None, calm_until: int | None = None) -> Part:
    """Where the failed run's curve (f) leaves the sibling's (s), aligned by step: both smoothed (`SMOOTH`),
    compared on the sparser one's steps inside the steps both cover (different lengths, resumes read as one row
    per step, sampled exports and missing stretches: a step the other run has no point near is left out), on a
    log scale when both are positive. The first step of a gap outside the band over `PERSIST` of the sparser run's
    intervals (same side), or of one that lasts until the failed curve turns non-finite while the sibling's is
    still logged, after the curves were once inside the band (a gap they start with and lose is none; one they
    never lose is reported at the first aligned step); `until` stops the search at a step. The failed run's noise is measured before `calm_until` (its
    earliest finding: a diverged stretch is not its noise), or taken as the sibling's when too few points precede."""
    fs, fv, f_nonfinite = _finite_head(np.asarray(f_steps), np.asarray(f_values, dtype=float))
    ss = np.asarray(s_steps)
    sv = np.asarray(s_values, dtype=float)
    keep = np.isfinite(sv)
    ss, sv = ss[keep], sv[keep]

    def nothing(note: str, overlap=None, points: int = 0, log_scale: bool = False, band: float = math.nan) -> Part:
        return Part(series, sibling_series, None, None, None, None, band, log_scale, points, overlap, note)

    if f_nonfinite is not None and fs.size == 0 and ss.size and ss[0] <= f_nonfinite <= ss[-1]:
        return Part(series, sibling_series, f_nonfinite, "non-finite", math.nan, None, math.nan, False, 0,
                    (f_nonfinite, f_nonfinite), "non-finite from its first point")
    if fs.size < PERSIST or ss.size < PERSIST:
        return nothing("too few points to align")
    log_scale = bool((fv > 0).all() and (sv > 0).all())
    tf, ts = (np.log(fv), np.log(sv)) if log_scale else (fv, sv)
    lo, hi = max(fs[0], ss[0]), min(fs[-1], ss[-1])
    if hi < lo:
        return nothing("no steps in common")
    sf, sm = stats.rolling_median(tf, SMOOTH), stats.rolling_median(ts, SMOOTH)
    cf, cs = stats.cadence(fs), stats.cadence(ss)
    # The denser run's steps are the grid, the sparser curve read between its points; a grid step with no point of
    # the sparser run near (a missing stretch, a sampled export's hole) is left out. A gap must last over PERSIST of
    # the sparser run's intervals, so that one interpolated stretch cannot pass for a lasting gap.
    grid_is_f = cf <= cs
    g_steps, g_vals, o_steps, o_vals, c_other = (fs, sf, ss, sm, cs) if grid_is_f else (ss, sm, fs, sf, cf)
    inside = (g_steps >= lo) & (g_steps <= hi)
    g_steps, g_vals = g_steps[inside], g_vals[inside]
    near = 2 * c_other
    j = np.clip(np.searchsorted(o_steps, g_steps), 1, o_steps.size - 1)
    gap_to_other = np.minimum(np.abs(o_steps[j] - g_steps), np.abs(o_steps[j - 1] - g_steps))
    ok = gap_to_other <= near
    g_steps, g_vals = g_steps[ok], g_vals[ok]
    span = PERSIST * max(cf, cs) - min(cf, cs)
    o_at = np.interp(g_steps, o_steps, o_vals)
    f_at, s_at = (g_vals, o_at) if grid_is_f else (o_at, g_vals)
    within = (fs >= lo) & (fs <= hi)
    within_s = (ss >= lo) & (ss <= hi)
    calm = within & (fs < calm_until) if calm_until is not None else within
    s_noise = _noise(ts[within_s])
    sigma = math.hypot(_noise(tf[calm]) if calm.sum() >= CALM_POINTS else s_noise, s_noise)
    band = max(BAND_SIGMAS * sigma * MEDIAN_EFFICIENCY / math.sqrt(SMOOTH), SEED_BAND if log_scale else 0.0)
    if not log_scale:  # a linear scale has no seed band: the same share of the sibling's typical level
        band = max(band, (math.exp(SEED_BAND) - 1) * float(np.median(np.abs(ts[within_s]))) if within_s.any() else 0)
    gap = f_at - s_at
    steps = g_steps.astype(np.int64)
    # A lag of one of the sparser run's logging intervals is no parting: where the sibling's curve falls fast (the
    # first steps), two seeds one interval apart differ by its slope times that interval.
    lag = np.abs(np.gradient(s_at, steps)) * max(cf, cs) if steps.size > 1 else np.zeros(steps.size)
    # Near a loss of 0, two seeds differ by large factors in small amounts: a gap must also be ABS_SHARE of the
    # sibling's initial level.
    floor = ABS_SHARE * abs(stats.start_level(sv))
    plain_gap = (np.exp(f_at) - np.exp(s_at)) if log_scale else gap
    out = np.where((gap > band + lag) & (plain_gap > floor), 1,
                   np.where((gap < -band - lag) & (plain_gap < -floor), -1, 0))
    ends_nonfinite = f_nonfinite is not None and ss[0] <= f_nonfinite <= ss[-1] + max(cs, cf)
    if until is not None:
        keep = steps <= until
        steps, out, f_at, s_at = steps[keep], out[keep], f_at[keep], s_at[keep]
        ends_nonfinite = ends_nonfinite and f_nonfinite <= until
    overlap = (int(lo), int(hi))
    shown_band = math.exp(band) if log_scale else band

    def value(x: float) -> float:
        return float(math.exp(x)) if log_scale else float(x)

    n = steps.size
    together = False  # a gap the runs start with is no parting: they must have run together first
    for i in range(n):
        together = together or out[i] == 0
        if out[i] == 0 or not together:
            continue
        held = steps[i:][steps[i:] <= steps[i] + span]
        run = out[i:i + held.size]
        lasting = held.size >= PERSIST and steps[i] + span <= steps[-1] and bool((run == out[i]).all())
        to_the_end = ends_nonfinite and out[i] > 0 and bool((out[i:] == out[i]).all())
        if lasting or to_the_end:
            return Part(series, sibling_series, int(steps[i]), "above" if out[i] > 0 else "below", value(f_at[i]),
                        value(s_at[i]), shown_band, log_scale, n, overlap)
    if n and not together:
        return Part(series, sibling_series, int(steps[0]), "above" if out[0] > 0 else "below", value(f_at[0]),
                    value(s_at[0]), shown_band, log_scale, n, overlap, "apart from the first aligned step: the runs "
                    "never ran together")
    if ends_nonfinite:
        return Part(series, sibling_series, f_nonfinite, "non-finite", math.nan,
                    value(s_at[-1]) if n else None, shown_band, log_scale, n, overlap,
                    "turns non-finite while the sibling's is finite")
    return nothing("never outside the band for long", overlap, n, log_scale, shown_band)


def _noise(values: np.ndarray) -> float:
    s = stats.noise(values)
    return 0.0 if not math.isfinite(s) else s


def _curves(run, role: str) -> tuple[str, np.ndarray, np.ndarray] | None:
    name = run.pick(role)
    if name is None:
        return None
    f = run.series_named(name)
    return name, f["step"].to_numpy(), f["value"].fill_null(np.nan).to_numpy()


def loss_role(store: _Store, run_id: str) -> str:
    """The loss compared: the validation loss where the run's earliest cause was read from it (overfitting, ...),
    else the training loss."""
    series = store.row(run_id)["headline_series"]
    return "val_loss" if store.series.get(run_id, {}).get(series) == "val_loss" else "loss"


def parting(con: Any, run_id: str, sibling_id: str, calm_until: int | None = None,
            role: str = "loss") -> tuple[Part | None, list[Part]]:
    """Where `run_id`'s loss (`role`) leaves `sibling_id`'s, and each of MOVER_ROLES both runs log that left the
    sibling's at or before that step (earliest first)."""
    from forensics.judge.run import Run

    me, sib = Run.from_store(con, run_id), Run.from_store(con, sibling_id)
    mine, theirs = _curves(me, role), _curves(sib, role)
    if mine is None or theirs is None:
        return None, []
    loss = part(mine[1], mine[2], theirs[1], theirs[2], series=mine[0], sibling_series=theirs[0],
                calm_until=calm_until)
    if loss.step is None:
        return loss, []
    movers = []
    for role in MOVER_ROLES:
        a, b = _curves(me, role), _curves(sib, role)
        if a is None or b is None:
            continue
        p = part(a[1], a[2], b[1], b[2], series=a[0], sibling_series=b[0], until=loss.step, calm_until=calm_until)
        if p.step is not None:
            movers.append(p)
    # Per layer, the earliest of the layers both runs log (by name), then of the parameters both runs' checkpoints
    # hold: a layer's norm that left the sibling's says where in the model it started.
    for role in LAYER_ROLES:
        pairs = {n: (me.series_named(n), sib.series_named(n)) for n in set(me.all_of(role)) & set(sib.all_of(role))}
        movers += _earliest(pairs, loss.step, calm_until)
    movers += _earliest(_checkpoint_norms(me, sib), loss.step, calm_until)
    return loss, sorted(movers, key=lambda p: p.step)


LAYER_ROLES = ("layer_grad_norm", "layer_weight_norm")


def _earliest(pairs: dict[str, tuple[pl.DataFrame, pl.DataFrame]], until: int, calm_until: int | None) -> list[Part]:
    """The first of these series (name -> the two runs' (step, value) frames) to leave the sibling's, at or before
    `until`; empty when none does."""
    found = [part(a["step"].to_numpy(), a["value"].fill_null(np.nan).to_numpy(), b["step"].to_numpy(),
                  b["value"].fill_null(np.nan).to_numpy(), series=name, sibling_series=name, until=until,
                  calm_until=calm_until) for name, (a, b) in sorted(pairs.items())]
    found = [p for p in found if p.step is not None]
    return [min(found, key=lambda p: p.step)] if found else []


def _checkpoint_norms(me, sib) -> dict[str, tuple[pl.DataFrame, pl.DataFrame]]:
    """Parameter name -> each run's (step, l2) from its checkpoints (`tensor_stats`), for the parameters both hold."""
    def norms(run) -> dict[str, pl.DataFrame]:
        t = run.table("tensor_stats")
        if t.height == 0 or "kind" not in t.columns:
            return {}
        t = t.filter((pl.col("kind") == "param") & pl.col("step").is_not_null()).sort("step")
        return {name: g.select("step", pl.col("l2").alias("value")) for (name,), g in t.group_by("tensor")}

    a, b = norms(me), norms(sib)
    return {f"checkpoint {k} norm": (a[k], b[k]) for k in set(a) & set(b)}


# -- settings ----------------------------------------------------------------------------------------------------

# A seed names a draw, not a setting: it is listed after the others, without a ratio, and gets no team row.
SEED_KEY = r"(^|[._])(seed|random_seed|data_seed|manual_seed)$"


def _change(a: Any, b: Any, key: str = "") -> str:
    shown = f"{_shown(a)} vs {_shown(b)}"
    if re.search(SEED_KEY, key.lower()):
        return f"{shown} (a seed)"
    try:
        fa, fb = float(a), float(b)
    except (TypeError, ValueError):
        return shown
    if isinstance(a, bool) or isinstance(b, bool) or not (fa > 0 and fb > 0):
        return shown
    return f"{shown} ({numbers.ratio(fa / fb)})"


ABSENT = "(absent)"


def _shown(v: Any) -> str:
    if v is ABSENT:
        return ABSENT
    if isinstance(v, float):
        return numbers.sig(v, 3)
    return numbers.shown(v)


def implicated(key: str, kinds: list[str]) -> tuple[int, int, str] | None:
    """(which of `kinds` implicates `key` first, the place of its group in that kind's list, the kind), or None."""
    k = key.lower()
    for i, kind in enumerate(kinds):
        for j, pattern in enumerate(IMPLICATES.get(kind, ())):
            if re.search(pattern, k):
                return i, j, kind
    return None


def ranked_settings(mine: dict[str, Any], theirs: dict[str, Any], kinds: list[str],
                    evidence: dict[str, float] | None = None) -> list[Setting]:
    """The dotted keys whose values differ (a key only one run has included), ranked: the ones the diagnosis'
    kinds implicate first (the headline's first), then by the store's evidence (`evidence`: key -> p), then by how
    far apart the values are."""
    evidence = evidence or {}
    rows = []
    for key in sorted(set(mine) | set(theirs)):
        a, b = mine.get(key, ABSENT), theirs.get(key, ABSENT)
        if key in mine and key in theirs and _same(a, b):
            continue
        hit = implicated(key, kinds)
        order = (0, hit[0], hit[1]) if hit else (2 if re.search(SEED_KEY, key.lower()) else 1, 0, 0)
        far = _log_ratio(a, b) if a is not ABSENT and b is not ABSENT else 0.5
        rows.append((order, evidence.get(key, 1.0), -far, key, a, b, hit[2] if hit else None))
    rows.sort(key=lambda r: r[:4])
    return [Setting(key, None if a is ABSENT else a, None if b is ABSENT else b, _change(a, b, key), kind, i + 1)
            for i, (_, _, _, key, a, b, kind) in enumerate(rows)]


# -- what the team's runs say ---------------------------------------------------------------------------------

def fisher_exact(a: int, b: int, c: int, d: int) -> float:
    """Two-sided Fisher's exact test of the 2×2 table [[a, b], [c, d]]: the probability, with the margins fixed,
    of a table no more likely than this one (scipy.stats.fisher_exact's two-sided p)."""
    r1, c1, n = a + b, a + c, a + b + c + d
    lo, hi = max(0, c1 - (c + d)), min(r1, c1)
    total = math.comb(n, c1)

    def prob(x: int) -> float:
        return math.comb(r1, x) * math.comb(n - r1, c1 - x) / total

    observed = prob(a)
    return min(1.0, sum(p for p in (prob(x) for x in range(lo, hi + 1)) if p <= observed * (1 + 1e-7)))


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(float(v)) else None


def _cut(v: float) -> str:
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else numbers.sig(v, 3)


def team_row(key: str, mine: Any, outcomes: list[tuple[Any, bool]], outcome: str) -> TeamRow | None:
    """How the runs holding `key` ended (`outcomes`: (value, ended as the failed run did)), split at the value cut
    that separates them best (numbers; the failed run's side first) or into the failed run's value and the
    others; Fisher's exact p, Bonferroni-adjusted over the cuts tried, where TEAM_MIN_RUNS runs hold the key."""
    if len(outcomes) < 2:
        return None
    num = _number(mine)
    values = [_number(v) for v, _ in outcomes]
    if num is not None and all(v is not None for v in values):
        distinct = sorted(set(values))
        cuts = [(lo, hi) for lo, hi in zip(distinct, distinct[1:])]
        tables = []
        for lo, hi in cuts:
            high_side = num >= hi
            inside = [(v >= hi) == high_side for v in values]
            label_in = f"≥ {_cut(hi)}" if high_side else f"≤ {_cut(lo)}"
            label_out = f"≤ {_cut(lo)}" if high_side else f"≥ {_cut(hi)}"
            tables.append((inside, label_in, label_out))
    else:
        inside = [_same(v, mine) for v, _ in outcomes]
        tables = [(inside, f"= {_shown(mine)}", "other values")]
    if not tables:
        return None
    best = None
    for inside, label_in, label_out in tables:
        a = sum(1 for (_, bad), i in zip(outcomes, inside) if i and bad)
        n_in = sum(inside)
        c = sum(1 for (_, bad), i in zip(outcomes, inside) if not i and bad)
        n_out = len(outcomes) - n_in
        if n_in == 0 or n_out == 0:
            continue
        p = fisher_exact(a, n_in - a, c, n_out - c)
        if best is None or p < best[0]:
            best = (p, [{"label": label_in, "failed": a, "runs": n_in}, {"label": label_out, "failed": c, "runs": n_out}])
    if best is None:
        return None
    p, groups = best
    enough = len(outcomes) >= TEAM_MIN_RUNS
    p_adj = min(1.0, p * len(tables)) if enough else None
    parts = [f"{key} {g['label']}: {g['failed']} of {g['runs']} {outcome}" if i == 0 else
             f"{g['label']}: {g['failed']} of {g['runs']}" for i, g in enumerate(groups)]
    test = (f"Fisher exact p={numbers.sig(p_adj)}" + (f", best of {len(tables)} cuts, Bonferroni" if len(tables) > 1
                                                       else "") if enough else
            f"{len(outcomes)} runs hold it: too few to test (fewer than {TEAM_MIN_RUNS})")
    return TeamRow(key, outcome, groups, len(outcomes), p_adj, len(tables), "; ".join(parts) + f" ({test})")


def team(store: _Store, run_id: str, keys: list[str]) -> list[TeamRow]:
    """For each of `keys`, how every judged run of the store that holds it ended (`team_row`): "ended as the run
    did" is a finding of the run's headline kind (with a failed verdict, for a failed run); none for a run without
    a finding."""
    me = store.row(run_id)
    kind = me["headline_kind"]
    if kind is None:
        return []
    failed = me["verdict"] == "failed"
    outcome = f"failed with {kind}" if failed else f"showed {kind}"
    judged = [r for r in store.runs.iter_rows(named=True) if _decided(r["verdict"])]
    rows = []
    mine = store.configs.get(run_id, {})
    for key in keys:
        if key not in mine:
            continue
        outcomes = [(store.configs[r["run_id"]][key],
                     (r["verdict"] == "failed" or not failed) and kind in r["kinds"].split())
                    for r in judged if key in store.configs.get(r["run_id"], {})]
        row = team_row(key, mine[key], outcomes, outcome)
        if row is not None:
            rows.append(row)
    return rows


# -- the whole comparison ----------------------------------------------------------------------------------------

def _kinds(con: Any, run_id: str, headline: str | None) -> list[str]:
    """The run's finding kinds, the headline's first, then critical before warning, by step."""
    rows = con.execute("""
        SELECT kind FROM findings WHERE analysis_id = (SELECT max(analysis_id) FROM analyses WHERE run_id = ?)
        ORDER BY CASE severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END, step NULLS LAST, finding_id
        """, [run_id]).fetchall()
    kinds = [headline] if headline else []
    return kinds + [k for (k,) in rows if k not in kinds]


def compare(con: Any, run: str | Path, others: list[str | Path] | None = None) -> Comparison:
    """Compare a stored run with its siblings (chosen from the store, or `others`), on an open read-only
    connection. ForensicsError when the run is not stored or was never analysed."""
    run_id = resolve(con, run)
    only = [resolve(con, o) for o in others] if others else None
    store = _Store.read(con)
    me = store.row(run_id)
    if not _decided(me["verdict"]) and me["verdict"] != "inconclusive":
        raise ForensicsError(f"{me['name']} has no current analysis in the store; run forensics analyze "
                             f"{me['root']} first (same --db)")
    head = None if not me["headline_kind"] else {"kind": me["headline_kind"], "step": me["headline_step"],
                                                 "step_end": me["headline_step_end"]}
    out = Comparison(me["name"], run_id, me["verdict"], head)
    out.siblings = siblings(store, run_id, only)[:SIBLINGS_SHOWN if only is None else None]
    if not out.siblings:
        out.notes.append("the runs given cannot be put beside it: no training loss, or one on line ordinals against "
                         "logged steps (or the other way round)" if only else
                         "no sibling in the store: no other judged run of the same writer and model shape that is "
                         "healthy or has fewer or later critical findings")
        return out
    best = out.siblings[0]
    out.parting, out.movers = parting(con, run_id, best.run_id, _calm_until(me), loss_role(store, run_id))
    kinds = _kinds(con, run_id, me["headline_kind"])
    mine, theirs = store.configs.get(run_id, {}), store.configs.get(best.run_id, {})
    first = ranked_settings(mine, theirs, kinds)
    out.team = team(store, run_id, [s.key for s in first if not re.search(SEED_KEY, s.key.lower())][:TEAM_KEYS])
    evidence = {t.key: t.p for t in out.team if t.p is not None}
    out.settings = ranked_settings(mine, theirs, kinds, evidence)
    if not mine and not theirs:
        out.notes.append("neither run has a stored config: no settings to compare")
    return out


def compare_at(db: str | Path, run: str | Path, others: list[str | Path] | None = None) -> Comparison:
    """`compare` on the store at `db`, opened read-only for the call."""
    from ingest.store import connect

    with connect(Path(db), write=False) as con:
        return compare(con, run, others)


def _calm_until(row: dict[str, Any]) -> int | None:
    """The step before which the run was judged calm: its earliest cause's, else its first critical finding's."""
    return row["headline_step"] if row["headline_step"] is not None else row["first_critical"]


def sibling_line(con: Any, run_id: str) -> str | None:
    """One line for `analyze` of a failed run: its best sibling in the store and where their losses part; None
    when the store holds none. Reads the runs' verdicts and configs and two loss curves, nothing more."""
    store = _Store.read(con)
    found = siblings(store, run_id)
    if not found:
        return None
    from forensics.judge.run import Run

    best = found[0]
    role = loss_role(store, run_id)
    mine, theirs = (_curves(Run.from_store(con, r, tables=False), role) for r in (run_id, best.run_id))
    where = ""
    if mine is not None and theirs is not None:
        p = part(mine[1], mine[2], theirs[1], theirs[2], calm_until=_calm_until(store.row(run_id)))
        where = (f"; the losses part at step {p.step} ({p.direction})" if p.step is not None
                 else "; the losses never part beyond their noise")
    return f"closest run that worked: {best.name} ({best.verdict}){where}; forensics compare tells more"
