"""Would a model learned from the labelled gatherings judge an unseen gathering better than the rules? A study.

Two steps over the labelled pool (the labels files benchmarks/false_alarms.py reads, its store cache, and its
--json findings for the same runs):

  features  reads each run's store (read only) and writes generic curve features per run: what a reader of a curve
            looks at (points, first/last/min/max, fall, rebound, rise share, noise, constant/zero, non-finite counts)
            for the training loss, the validation loss, the main metric, the gradient norm, the learning rate and the
            step time, plus the run's shape (launches, epoch resets, steps going backwards, announcements). No run
            name, path or set id is a feature.
  cv        leave-one-gathering-out: per kind with enough positive runs, a gradient-boosted and a regularised
            logistic classifier, the threshold picked on the training gatherings alone (inner group folds) for
            precision >= --precision; scored as ../shared/tools/score.py scores. Compared on each held-out
            gathering: (a) the engine, (b) the model on curve features alone, (c) the engine plus the model's extra
            claims (the model may only add a kind the engine did not claim).

scikit-learn is not a dependency of the project: pass --site DIR, a folder it was installed into with
`pip install --target DIR scikit-learn`; it is appended to sys.path, so the environment's numpy stays first.

  PYTHONPATH=$PWD python benchmarks/false_alarms.py LABELS... --cache CACHE --json POOL.json
  PYTHONPATH=$PWD python benchmarks/learned_second_opinion.py features --findings POOL.json --cache CACHE --out F.json
  OMP_NUM_THREADS=1 PYTHONPATH=$PWD python benchmarks/learned_second_opinion.py cv --findings POOL.json \
      --features F.json --site DIR [--importance] [--json OUT.json]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np

EQ = {"nan_loss", "masked_nonfinite"}
SEVERITY = {"info": 1, "warning": 2, "critical": 3}


def norm(kinds) -> set[str]:
    """Kinds as score.py counts them: nan_loss and masked_nonfinite are one observation."""
    return {"nan_loss" if k in EQ else k for k in kinds}


def gathering(setpath: str) -> str:
    """The gathering a labels file's folder belongs to: one cross-validation group. The folder less the split and
    format names beneath a gathering (`set3/dev/console` and `set3/blind/structured` are one gathering, `set3`); the
    labelled sets of ../shared are one gathering."""
    parts = Path(setpath).parts
    if "shared" in parts:
        return "shared"
    kept = [p for p in parts if p not in ("console", "structured", "dev", "blind", "gate")]
    return kept[-1] if kept else setpath


# --- features -------------------------------------------------------------------------------------------------

def curve_features(prefix: str, steps: np.ndarray | None, values: np.ndarray | None) -> dict[str, float]:
    """What a reader sees in one curve; NaN where the curve is missing or too short for the measure."""
    f: dict[str, float] = {}
    nan = float("nan")
    names = ["present", "points", "nonfinite", "nonfinite_share", "first_nonfinite_at", "first", "last", "min", "max",
             "log_first", "fall", "last_over_min", "rebound", "min_at", "rise_share", "noise", "constant", "zero",
             "unique_share", "max_jump", "spike", "late_fall", "late_slope", "above_first_share", "half_ratio",
             "repeat_run", "negative"]
    for n in names:
        f[f"{prefix}_{n}"] = nan
    f[f"{prefix}_present"] = 0.0
    if values is None or values.size == 0:
        return f
    f[f"{prefix}_present"] = 1.0
    finite = np.isfinite(values)
    v = values[finite]
    f[f"{prefix}_points"] = float(v.size)
    f[f"{prefix}_nonfinite"] = float((~finite).sum())
    f[f"{prefix}_nonfinite_share"] = float((~finite).mean())
    if (~finite).any():
        f[f"{prefix}_first_nonfinite_at"] = float(np.argmax(~finite) / max(1, values.size - 1))
    if v.size == 0:
        return f
    first, last, lo, hi = float(v[0]), float(v[-1]), float(v.min()), float(v.max())
    scale = max(abs(first), abs(lo), abs(hi), 1e-12)
    f[f"{prefix}_first"], f[f"{prefix}_last"], f[f"{prefix}_min"], f[f"{prefix}_max"] = first, last, lo, hi
    f[f"{prefix}_log_first"] = float(np.log10(abs(first) + 1e-12))
    f[f"{prefix}_negative"] = float(lo < 0)
    f[f"{prefix}_constant"] = float(lo == hi)
    f[f"{prefix}_zero"] = float(lo == hi == 0.0)
    f[f"{prefix}_unique_share"] = float(np.unique(v).size / v.size)
    if v.size < 2:
        return f
    f[f"{prefix}_fall"] = (first - lo) / scale
    f[f"{prefix}_last_over_min"] = last / lo if lo > 0 else nan
    f[f"{prefix}_rebound"] = (last - lo) / max(first - lo, 1e-12 * scale) if first > lo else (last - lo) / scale
    f[f"{prefix}_min_at"] = float(np.argmin(v) / (v.size - 1))
    d = np.diff(v)
    f[f"{prefix}_rise_share"] = float((d > 0).mean())
    level = float(np.median(np.abs(v))) or scale
    f[f"{prefix}_noise"] = float(np.std(d) / level)
    med = float(np.median(np.abs(d)))
    f[f"{prefix}_max_jump"] = float(np.abs(d).max() / med) if med > 0 else (0.0 if not np.abs(d).max() else 1e6)
    f[f"{prefix}_spike"] = float((hi - np.median(v)) / max(abs(np.median(v)), 1e-12 * scale))
    q = max(2, v.size // 4)
    tail = v[-q:]
    f[f"{prefix}_late_fall"] = float((tail[0] - tail[-1]) / max(first - lo, 1e-12 * scale))
    x = np.arange(tail.size)
    f[f"{prefix}_late_slope"] = float(np.polyfit(x, tail, 1)[0] * tail.size / level) if tail.size >= 2 else nan
    f[f"{prefix}_above_first_share"] = float((v > first).mean())
    half = v.size // 2
    if half >= 1:
        f[f"{prefix}_half_ratio"] = float(np.mean(v[half:]) / np.mean(v[:half])) if np.mean(v[:half]) else nan
    same = np.concatenate([[0], (d == 0).astype(int)])
    runs, cur = 0, 0
    for s in same:
        cur = cur + 1 if s else 0
        runs = max(runs, cur)
    f[f"{prefix}_repeat_run"] = float(runs / v.size)
    return f


def run_features(run) -> dict[str, float]:
    """Generic features of one run (Run from forensics.judge.run): its curves and its shape."""
    feats: dict[str, float] = {}
    roles = {"loss": "loss", "val": "val_loss", "acc": "accuracy", "vacc": "val_accuracy", "gn": "grad_norm",
             "lr": "lr", "st": "step_time", "tp": "throughput", "mem": "memory", "ls": "loss_scale"}
    arrays = {}
    for prefix, role in roles.items():
        steps = values = None
        try:
            if run.has(role):
                steps, values = run.arrays(role)
        except Exception:  # noqa: BLE001 - a series the view cannot compose is a missing feature, not a failure
            steps = values = None
        arrays[prefix] = (steps, values)
        feats.update(curve_features(prefix, steps, values))
    # train versus val on the val steps: does the val loss rise after its minimum while the training loss falls
    ls, lv = arrays["loss"]
    vs, vv = arrays["val"]
    nan = float("nan")
    feats["tv_gap"] = feats["tv_trend"] = feats["tv_corr"] = feats["val_per_train"] = nan
    if ls is not None and vs is not None and lv is not None and vv is not None:
        lf, vf = np.isfinite(lv), np.isfinite(vv)
        if lf.sum() >= 2 and vf.sum() >= 2:
            tr_on_v = np.interp(vs[vf], ls[lf], lv[lf])
            feats["tv_gap"] = float(vv[vf][-1] / tr_on_v[-1]) if tr_on_v[-1] > 0 else nan
            i = int(np.argmin(vv[vf]))
            v_rise = (vv[vf][-1] - vv[vf][i]) / max(abs(vv[vf][i]), 1e-12)
            t_fall = (tr_on_v[i] - tr_on_v[-1]) / max(abs(tr_on_v[i]), 1e-12)
            feats["tv_trend"] = float(v_rise * (t_fall > 0))
            if vf.sum() >= 3 and np.std(tr_on_v) > 0 and np.std(vv[vf]) > 0:
                feats["tv_corr"] = float(np.corrcoef(tr_on_v, vv[vf])[0, 1])
            feats["val_per_train"] = float(vf.sum() / max(1, lf.sum()))
    # learning rate: zero share, range, jumps
    _, lr = arrays["lr"]
    feats["lr_zero_share"] = feats["lr_range"] = feats["lr_jumps"] = feats["lr_rises"] = feats["lr_end_over_max"] = nan
    if lr is not None and np.isfinite(lr).sum() >= 2:
        x = lr[np.isfinite(lr)]
        feats["lr_zero_share"] = float((x == 0).mean())
        pos = x[x > 0]
        feats["lr_range"] = float(np.log10(pos.max() / pos.min())) if pos.size else nan
        ratio = np.abs(np.log10(np.maximum(x[1:], 1e-30) / np.maximum(x[:-1], 1e-30)))
        feats["lr_jumps"] = float((ratio > np.log10(2)).sum())
        feats["lr_rises"] = float((np.diff(x) > 0).mean())
        feats["lr_end_over_max"] = float(x[-1] / x.max()) if x.max() > 0 else nan
    _, st = arrays["st"]
    feats["st_spread"] = feats["st_late_over_early"] = nan
    if st is not None and np.isfinite(st).sum() >= 4:
        x = st[np.isfinite(st)]
        feats["st_spread"] = float(np.std(x) / max(np.median(x), 1e-12))
        h = x.size // 2
        feats["st_late_over_early"] = float(np.median(x[h:]) / max(np.median(x[:h]), 1e-12))
    # the run's shape: steps going backwards in write order, launches, resets, announcements, formats
    name = run.pick("loss")
    feats["steps_back"] = feats["launches"] = feats["appended"] = nan
    if name:
        try:
            raw = run.points(name)["step"].drop_nulls().to_numpy()
            feats["steps_back"] = float((np.diff(raw) < 0).sum()) if raw.size > 1 else 0.0
            feats["steps_dup"] = float(raw.size - np.unique(raw).size)
            feats["launches"] = float(len(run.launch_starts(name)))
            feats["appended"] = float(len(run.appended_launches(name)))
        except Exception:  # noqa: BLE001 - see above
            pass
        from forensics.judge.run import TEXT_FORMATS
        feats["text_format"] = float((run.format_of(name) or "") in TEXT_FORMATS)
    try:
        feats["epoch_resets"] = float(len(run.epoch_resets()))
    except Exception:  # noqa: BLE001
        feats["epoch_resets"] = nan
    for tag in ("nonfinite_loss", "nonfinite_grad", "resume", "train_end"):
        try:
            feats[f"said_{tag}"] = float(run.announced(f"announced/{tag}").height)
        except Exception:  # noqa: BLE001
            feats[f"said_{tag}"] = nan
    feats["n_series"] = float(run.meta.height)
    feats["n_loss_series"] = float(len(run.all_of("train_loss")))
    feats["n_val_series"] = float(len(run.all_of("val_loss")))
    return feats


def features_main(a) -> int:
    from forensics.judge.run import Run
    from ingest.store import connect

    rows = json.loads(Path(a.findings).read_text())
    out = {}
    for i, r in enumerate(rows):
        db = Path(a.cache) / (hashlib.sha1(r["path"].encode()).hexdigest()[:12] + ".duckdb")
        try:
            with connect(db, write=False) as con:
                run_id = con.execute("SELECT run_id FROM runs").fetchone()[0]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    feats = run_features(Run.from_store(con, run_id, tables=False))
        except Exception as e:  # noqa: BLE001 - an unreadable store: the run keeps no curve features
            print(f"no features for {r['path']}: {type(e).__name__}: {e}", file=sys.stderr)
            feats = {}
        out[r["path"]] = feats
        if i % 100 == 0:
            print(f"{i}/{len(rows)}", file=sys.stderr)
    Path(a.out).write_text(json.dumps(out))
    return 0


# --- cross-validation -----------------------------------------------------------------------------------------

def engine_features(row: dict, kinds: list[str]) -> dict[str, float]:
    """The engine's own outputs: each kind's highest severity (0 none), whether it judged the kind, and count."""
    sev: dict[str, int] = defaultdict(int)
    for f in row.get("findings", []):
        k = "nan_loss" if f["kind"] in EQ else f["kind"]
        sev[k] = max(sev[k], SEVERITY.get(f["severity"], 1))
    judged = norm(row.get("judged", []))
    out = {f"eng_{k}": float(sev[k]) for k in kinds}
    out.update({f"judged_{k}": float(k in judged) for k in kinds})
    out["eng_count"] = float(len(row.get("findings", [])))
    return out


def matrix(dicts: list[dict], cols: list[str] | None = None) -> tuple[np.ndarray, list[str]]:
    cols = cols or sorted({k for d in dicts for k in d})
    x = np.array([[d.get(c, np.nan) for c in cols] for d in dicts], dtype=float)
    x[~np.isfinite(x)] = np.nan
    return np.clip(x, -1e9, 1e9), cols


class Varying:
    """A classifier fitted on the columns that vary on its training rows (two distinct finite values or more):
    the boosted trees' binning fails on a column with none."""

    def __init__(self, model):
        self.model = model

    def fit(self, x, y):
        self.keep = np.array([np.unique(c[np.isfinite(c)]).size >= 2 for c in x.T])
        self.model.fit(x[:, self.keep], y)
        return self

    def predict_proba(self, x):
        return self.model.predict_proba(x[:, self.keep])


def make_model(kind: str, seed: int = 0):
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer, StandardScaler

    if kind == "gb":
        return Varying(HistGradientBoostingClassifier(max_iter=40, learning_rate=0.15, max_bins=32, max_leaf_nodes=15, min_samples_leaf=8,
                                              l2_regularization=1.0, class_weight="balanced", random_state=seed))
    squash = FunctionTransformer(lambda x: np.sign(x) * np.log1p(np.abs(x)))
    return make_pipeline(squash, SimpleImputer(strategy="median", add_indicator=True, keep_empty_features=True), StandardScaler(),
                         LogisticRegression(C=0.1, class_weight="balanced", max_iter=2000))


def pick_threshold(scores: np.ndarray, truth: np.ndarray, counted: np.ndarray, precision: float,
                   min_hits: int) -> float:
    """The lowest threshold whose claims on out-of-fold scores reach `precision` (claims on `counted` runs only:
    an allowed kind is neither right nor wrong) with at least `min_hits` right; inf when none does."""
    order = np.argsort(-scores)
    best = np.inf
    tp = fp = 0
    for i in order:
        if counted[i]:
            tp += int(truth[i])
            fp += int(not truth[i])
        if tp >= min_hits and tp / max(1, tp + fp) >= precision:
            best = scores[i]
    return float(best)


def score(claims: list[set[str]], rows: list[dict]) -> tuple[int, int, int]:
    """(hits, misses, false claims) as score.py counts them."""
    t = m = fl = 0
    for got, r in zip(claims, rows):
        w, al = norm(r["want"]), norm(r["allowed"])
        got = norm(got)
        t += len(w & got)
        m += len(w - got)
        fl += len(got - w - al)
    return t, m, fl


def cv_main(a) -> int:
    sys.path.append(a.site)
    import os
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from sklearn.model_selection import GroupKFold

    rows = json.loads(Path(a.findings).read_text())
    curves = json.loads(Path(a.features).read_text())
    rows = [r for r in rows if "error" not in r]
    groups = np.array([gathering(r["set"]) for r in rows])
    positives = defaultdict(int)
    for r in rows:
        for k in norm(r["want"]):
            positives[k] += 1
    kinds = sorted(k for k, n in positives.items() if n >= a.min_positive)
    all_kinds = sorted({k for r in rows for k in norm(r["want"]) | norm(f["kind"] for f in r.get("findings", []))})
    xc, cc = matrix([curves.get(r["path"], {}) for r in rows])
    xe, ce = matrix([engine_features(r, all_kinds) for r in rows])
    xb = np.hstack([xc, xe])
    sets = {"curves": (xc, cc), "curves+engine": (xb, cc + ce)}
    engine = [norm(f["kind"] for f in r.get("findings", [])) for r in rows]
    want = {k: np.array([k in norm(r["want"]) for r in rows]) for k in kinds}
    allowed = {k: np.array([k in norm(r["allowed"]) for r in rows]) for k in kinds}
    claimed = {k: np.array([k in e for e in engine]) for k in kinds}
    print(f"{len(rows)} runs, {len(set(groups))} gatherings, {xc.shape[1]} curve features, {xe.shape[1]} engine "
          f"features; kinds with >= {a.min_positive} positive runs: "
          + ", ".join(f"{k} {positives[k]}" for k in kinds), flush=True)

    names = sorted(set(groups))
    targets = sorted({a.precision, *(float(t) for t in a.targets.split(",") if t)}, reverse=True)
    # per (features, model): outer held-out scores per kind, and per target the thresholds picked on the training
    # gatherings alone, for claims alone (b) and for claims added to the engine (c)
    held_scores, thresholds = {}, {}
    importances = defaultdict(list)
    pairs = [tuple(p.split(":")) if ":" in p else (p, fs) for p in a.models.split(",") for fs in sets
             if ":" not in p or p.endswith(":" + fs)]
    for mk, fs in pairs:
        x, cols = sets[fs]
        for held in names:
            test = groups == held
            train = ~test
            for k in kinds:
                y = want[k]
                key = (fs, mk, k)
                held_scores.setdefault(key, np.zeros(len(rows)))
                if y[train].sum() < 5:
                    continue
                oof = np.full(len(rows), np.nan)
                tr_idx = np.flatnonzero(train)
                inner = GroupKFold(n_splits=min(a.inner, len(set(groups[train]))))
                for fit_i, val_i in inner.split(tr_idx, y[tr_idx], groups[tr_idx]):
                    fi, vi = tr_idx[fit_i], tr_idx[val_i]
                    if y[fi].sum() < 3:
                        oof[vi] = 0.0
                        continue
                    oof[vi] = make_model(mk).fit(x[fi], y[fi]).predict_proba(x[vi])[:, 1]
                counted = ~allowed[k] | y
                free = tr_idx[~claimed[k][tr_idx]]
                for t in targets:
                    thresholds[(fs, mk, k, held, t)] = (
                        pick_threshold(oof[tr_idx], y[tr_idx], counted[tr_idx], t, a.min_hits),
                        pick_threshold(oof[free], y[free], counted[free], t, a.min_hits))
                m = make_model(mk).fit(x[train], y[train])
                held_scores[key][test] = m.predict_proba(x[test])[:, 1]
                if mk == "lr" and fs == "curves":
                    importances[(k, "lr")].append(m[-1].coef_[0][: len(cols)])
            print(f"  {fs} {mk} held out {held} done", flush=True)
    results, added_by_kind = {}, {}
    for mk, fs in pairs:
        for t in targets:
            alone = [set() for _ in rows]
            plus = [set(e) for e in engine]
            add_stats = defaultdict(lambda: [0, 0, 0])  # kind -> hits added, false added, allowed added
            for i in range(len(rows)):
                for k in kinds:
                    th = thresholds.get((fs, mk, k, groups[i], t))
                    if th is None:
                        continue
                    p = held_scores[(fs, mk, k)][i]
                    if p >= th[0]:
                        alone[i].add(k)
                    if p >= th[1] and not claimed[k][i]:
                        plus[i].add(k)
                        add_stats[k][0 if want[k][i] else 2 if allowed[k][i] else 1] += 1
            results[(fs, mk, t)] = (alone, plus)
            added_by_kind[(fs, mk, t)] = dict(add_stats)
    report = {"kinds": kinds, "positives": {k: positives[k] for k in kinds}, "gatherings": {}, "added": {},
              "targets": {}, "ranking": {}}
    main = [key for key in results if key[2] == a.precision]
    print()
    header = f"{'held-out gathering':<14} {'runs':>4} {'kinds':>5}  {'(a) engine':>16}"
    for (fs, mk, _) in main:
        header += f"  {'(b) ' + mk + ' ' + fs:>26}  {'(c) ' + mk + ' ' + fs:>26}"
    print(header)
    for held in names + ["ALL"]:
        idx = np.flatnonzero(groups == held) if held != "ALL" else np.arange(len(rows))
        sub = [rows[i] for i in idx]
        t_, m_, f_ = score([engine[i] for i in idx], sub)
        line = f"{held:<14} {len(idx):4} {t_ + m_:5}  {cell(t_, m_, f_):>16}"
        entry = {"runs": int(len(idx)), "labelled": t_ + m_, "engine": [t_, m_, f_]}
        for key in main:
            alone, plus = results[key]
            tb = score([alone[i] for i in idx], sub)
            tc = score([plus[i] for i in idx], sub)
            line += f"  {cell(*tb):>26}  {cell(*tc):>26}"
            entry[f"alone {key[1]} {key[0]}"] = list(tb)
            entry[f"plus {key[1]} {key[0]}"] = list(tc)
        print(line)
        report["gatherings"][held] = entry
    print("\nALL held-out gatherings at each precision target picked on the training gatherings: (b) alone, (c) added")
    for key, (alone, plus) in results.items():
        tb, tc = score(alone, rows), score(plus, rows)
        s8 = groups == "set8"
        tc8 = score([plus[i] for i in np.flatnonzero(s8)], [rows[i] for i in np.flatnonzero(s8)])
        tb8 = score([alone[i] for i in np.flatnonzero(s8)], [rows[i] for i in np.flatnonzero(s8)])
        print(f"  {key[1]:>2} {key[0]:<14} target {key[2]:.2f}: (b) {cell(*tb)}  (c) {cell(*tc)}  on set8 (b) {cell(*tb8)} (c) {cell(*tc8)}")
        report["targets"][f"{key[1]} {key[0]} {key[2]}"] = {
            "alone": list(tb), "plus": list(tc),
            "per_gathering": {g: {"alone": score([alone[i] for i in np.flatnonzero(groups == g)],
                                                 [rows[i] for i in np.flatnonzero(groups == g)]),
                                  "plus": score([plus[i] for i in np.flatnonzero(groups == g)],
                                                [rows[i] for i in np.flatnonzero(groups == g)])} for g in names}}
    for key in results:
        per = report["targets"][f"{key[1]} {key[0]} {key[2]}"]["per_gathering"]
        print(f"  (b) per gathering, {key[1]} {key[0]} target {key[2]:.2f}: "
              + ", ".join(f"{g} {cell(*per[g]['alone'])}" for g in names))
    print("\nadded claims per kind over all held-out gatherings (c): hits / false / allowed")
    for key, stats in added_by_kind.items():
        if stats:
            print(f"  {key[1]} {key[0]} {key[2]:.2f}: " + ", ".join(f"{k} {s[0]}/{s[1]}/{s[2]}" for k, s in sorted(stats.items())))
        report["added"][f"{key[1]} {key[0]} {key[2]}"] = stats
    if a.scores:  # each run's held-out score per kind, for reading what the model ranks high (development only)
        Path(a.scores).write_text(json.dumps({
            "runs": [{"path": r["path"], "want": sorted(norm(r["want"])), "allowed": sorted(norm(r["allowed"])),
                      "engine": sorted(e)} for r, e in zip(rows, engine)],
            "scores": {f"{mk} {fs} {k}": [round(float(v), 4) for v in sc] for (fs, mk, k), sc in held_scores.items()}}))
    from sklearn.metrics import average_precision_score, roc_auc_score
    print("\nranking on held-out gatherings, threshold-free (AUC, average precision / base rate); all runs | runs the "
          "engine did not claim the kind on")
    for key, sc in held_scores.items():
        k = key[2]
        counted = ~allowed[k] | want[k]
        free = counted & ~claimed[k]
        vals = []
        for mask in (counted, free):
            y = want[k][mask]
            if y.sum() and (~y).sum():
                vals.append((roc_auc_score(y, sc[mask]), average_precision_score(y, sc[mask]), y.mean(), int(y.sum())))
            else:
                vals.append((float("nan"),) * 3 + (0,))
        report["ranking"][f"{key[1]} {key[0]} {k}"] = vals
        print(f"  {key[1]:>2} {key[0]:<14} {k:<20} " + " | ".join(f"AUC {v[0]:.2f} AP {v[1]:.2f}/{v[2]:.2f} (n+ {v[3]})"
                                                                   for v in vals))
    print("\nlogistic coefficients on curve features (mean over folds; top 6 by size):")
    report["coefficients"] = {}
    for (k, _), cs in sorted(importances.items()):
        mean = np.mean(cs, axis=0)
        top = np.argsort(-np.abs(mean))[:6]
        report["coefficients"][k] = [(cc[i], round(float(mean[i]), 3)) for i in top]
        print(f"  {k:<22} " + ", ".join(f"{cc[i]} {mean[i]:+.2f}" for i in top))
    if a.importance:
        report["permutation"] = permutation_report(xc, cc, kinds, want, a)
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1, default=str))
    return 0


def permutation_report(x, cols, kinds, want, a) -> dict:
    """Which curve features carry each kind for the boosted model: permutation importance on the whole pool's fit
    (descriptive only: the held-out numbers above are the measure)."""
    from sklearn.inspection import permutation_importance
    from sklearn.metrics import average_precision_score

    out = {}
    print("\nboosted model, permutation importance on curve features (average precision drop; top 6):")
    for k in kinds:
        m = make_model("gb").fit(x, want[k])
        kept = [c for c, keep in zip(cols, m.keep) if keep]
        imp = permutation_importance(m.model, x[:, m.keep], want[k], n_repeats=3, random_state=0,
                                     scoring=lambda est, xx, yy: average_precision_score(yy, est.predict_proba(xx)[:, 1]))
        top = np.argsort(-imp.importances_mean)[:6]
        out[k] = [(kept[i], round(float(imp.importances_mean[i]), 3)) for i in top]
        print(f"  {k:<22} " + ", ".join(f"{kept[i]} {imp.importances_mean[i]:.3f}" for i in top), flush=True)
    return out


def cell(t: int, m: int, f: int) -> str:
    r = t / max(1, t + m)
    p = t / max(1, t + f)
    return f"{r:.2f}/{p:.2f} ({t}|{f})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("features", help="curve features per run, from the stores")
    f.add_argument("--findings", required=True, help="benchmarks/false_alarms.py --json output (the runs)")
    f.add_argument("--cache", required=True, help="its store cache")
    f.add_argument("--out", required=True)
    c = sub.add_parser("cv", help="leave-one-gathering-out")
    c.add_argument("--findings", required=True)
    c.add_argument("--features", required=True)
    c.add_argument("--site", required=True, help="folder scikit-learn was installed into (pip install --target)")
    c.add_argument("--models", default="gb:curves,lr",
                   help="models (gb, lr), each on both feature sets or on one as MODEL:SET (curves, curves+engine)")
    c.add_argument("--min-positive", type=int, default=15)
    c.add_argument("--precision", type=float, default=0.9)
    c.add_argument("--min-hits", type=int, default=3)
    c.add_argument("--targets", default="0.8,0.7", help="further precision targets, reported in total")
    c.add_argument("--inner", type=int, default=3, help="inner group folds for the thresholds")
    c.add_argument("--importance", action="store_true", help="permutation importances of the boosted model")
    c.add_argument("--json")
    c.add_argument("--scores", help="write each run's held-out score per kind here (names runs: development only)")
    a = ap.parse_args(argv)
    return features_main(a) if a.cmd == "features" else cv_main(a)


if __name__ == "__main__":
    sys.exit(main())
