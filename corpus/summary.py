"""The corpus's composition from its index.json: `python -m corpus.summary DIR` (runs, healthy share, kinds,
families and primary loggers per split)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path


def composition(index: dict) -> dict:
    runs = list(index["runs"].values())
    out = {}
    for part in ("tune", "holdout"):
        rs = [r for r in runs if r["split"] == part]
        out[part] = {
            "runs": len(rs), "healthy": sum(r["healthy"] for r in rs),
            "kinds": dict(sorted(Counter(k["kind"] for r in rs for k in r["kinds"]).items())),
            "families": dict(sorted(Counter(r["family"] for r in rs).items())),
            "primary_logger": dict(sorted(Counter(r["loggers"][0] for r in rs).items())),
            "logger_count": dict(sorted(Counter(len(r["loggers"]) for r in rs).items())),
            "bug_without_symptom": sum(1 for r in rs if r["bug"] != "none" and r["healthy"]),
            "healthy_recipe_with_symptom": sorted(r["name"] for r in rs if r["bug"] == "none" and not r["healthy"]),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m corpus.summary DIR   (DIR holds index.json)", file=sys.stderr)
        return 2
    path = Path(argv[0]) / "index.json"
    if not path.is_file():
        print(f"no {path}: generate the corpus first (python -m corpus.generate --out {argv[0]})", file=sys.stderr)
        return 2
    c = composition(json.loads(path.read_text()))
    kinds = sorted(set(c["tune"]["kinds"]) | set(c["holdout"]["kinds"]))
    print("| | tune | holdout |\n|---|---|---|")
    for key in ("runs", "healthy", "bug_without_symptom"):
        print(f"| {key} | {c['tune'][key]} | {c['holdout'][key]} |")
    for k in kinds:
        print(f"| {k} | {c['tune']['kinds'].get(k, 0)} | {c['holdout']['kinds'].get(k, 0)} |")
    for group in ("families", "primary_logger", "logger_count"):
        names = sorted(set(c["tune"][group]) | set(c["holdout"][group]), key=str)
        print(f"| *{group}* | " + ", ".join(f"{n}: {c['tune'][group].get(n, 0)}" for n in names) + " | "
              + ", ".join(f"{n}: {c['holdout'][group].get(n, 0)}" for n in names) + " |")
    for part in ("tune", "holdout"):
        if c[part]["healthy_recipe_with_symptom"]:
            print(f"\n{part}: healthy recipes that show a kind: {', '.join(c[part]['healthy_recipe_with_symptom'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
