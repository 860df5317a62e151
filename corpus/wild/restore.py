"""Re-create the keyed real runs of a wild set from their sources, outside the repository.

The logs are third-party data: the repository keeps only their keys (`console/setN.json`, `structured/setN.json`)
and labels. A committed file is re-created byte-exact from a fetched snapshot (`git show <sha>:<path>`, checked
against the blob id); a log pasted in a web page or an issue thread cannot be, and is listed for a person to copy.

    python -m corpus.wild.restore 19 --out /work/wild_own            # lays out /work/wild_own/set19/{console,structured}
    python -m corpus.wild.restore 12 13 --out DIR --need              # prints only the repositories still to fetch

Each `setN/<kind>/` gets its run folders, `keys.json`, `labels.json` (first labels) and `labels_cons.json` (the kinds
both labellers name; the rest allowed). Snapshots are looked up under `--mirror` as `owner+name/repo`.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
KINDS = ("console", "structured")
_SOURCE = re.compile(r"^(?P<repo>[\w.-]+/[\w.-]+)@(?P<sha>[0-9a-f]{40}):(?P<path>.+)$")


def committed(source: str) -> tuple[str, str, list[str]] | None:
    """(owner/name, sha, paths) of a committed source; None for a page or thread."""
    m = _SOURCE.match(source.strip())
    if not m:
        return None
    path = m["path"].strip()
    paths = [p.strip() for p in path[1:-1].split(",")] if path.startswith("{") and path.endswith("}") else [path]
    return m["repo"], m["sha"], paths


def consensus(first: dict, second: dict) -> dict:
    """Labels both labellers give; what either names besides is allowed (neither needed nor false)."""
    out = {}
    for name, a in first.items():
        b = second.get(name)
        if b is None:
            out[name] = a
            continue
        want = sorted(set(a.get("pathologies", [])) & set(b.get("pathologies", [])))
        either = set(a.get("pathologies", [])) | set(b.get("pathologies", []))
        either |= set(a.get("allowed", [])) | set(b.get("allowed", []))
        out[name] = {**a, "pathologies": want, "allowed": sorted(either - set(want))}
    return out


def _git_dir(mirror: Path, repo: str) -> Path | None:
    d = mirror / repo.replace("/", "+") / "repo"
    for cand in (d / ".git", d):
        if (cand / "HEAD").exists():
            return cand
    return None


def _show(git_dir: Path, sha: str, path: str) -> bytes | None:
    r = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{sha}:{path}"], capture_output=True)
    return r.stdout if r.returncode == 0 else None


def _blob_ok(git_dir: Path, sha: str, path: str, data: bytes) -> bool:
    want = subprocess.run(["git", "--git-dir", str(git_dir), "rev-parse", f"{sha}:{path}"],
                          capture_output=True, text=True).stdout.strip()
    got = subprocess.run(["git", "hash-object", "--stdin"], input=data, capture_output=True).stdout.decode().strip()
    return bool(want) and want == got


def restore_run(name: str, key: dict, kind: str, folder: Path, mirror: Path) -> str:
    """Write one run's files; returns 'ok', 'fetch <owner/name>', 'page' or 'missing <path>'."""
    src = committed(key.get("source", ""))
    if src is None:
        return "page"
    repo, sha, paths = src
    git_dir = _git_dir(mirror, repo)
    if git_dir is None:
        return f"fetch {repo}"
    wanted = key.get("files") or None  # a run of several files names them all (a console log and its resume's)
    if wanted is None:  # console: the committed path under the run folder
        wanted = [paths[0]] if kind == "console" else paths
    base = sorted({p.rsplit("/", 1)[0] for p in paths if "/" in p})
    for rel in wanted:
        candidates = [rel] + [f"{b}/{rel}" for b in base] + [p for p in paths if p.endswith("/" + rel)]
        for c in candidates:
            data = _show(git_dir, sha, c)
            if data is not None and _blob_ok(git_dir, sha, c, data):
                target = folder / name / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
                break
        else:
            return f"missing {rel}"
    return "ok"


def restore_set(n: int, out: Path, mirror: Path, need_only: bool) -> dict[str, list[str]]:
    todo: dict[str, list[str]] = {"fetch": [], "page": [], "missing": []}
    for kind in KINDS:
        keys_file = HERE / kind / f"set{n}.json"
        if not keys_file.exists():
            continue
        keys = json.loads(keys_file.read_text())
        folder = out / f"set{n}" / kind
        if not need_only:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "keys.json").write_text(json.dumps(keys, indent=1))
            first = json.loads((HERE / kind / f"set{n}_labels.json").read_text())
            (folder / "labels.json").write_text(json.dumps(first, indent=1))
            second_file = HERE / kind / f"set{n}_labels2.json"
            if second_file.exists():
                cons = consensus(first, json.loads(second_file.read_text()))
                (folder / "labels_cons.json").write_text(json.dumps(cons, indent=1))
        for name, key in keys.items():
            if need_only:
                src = committed(key.get("source", ""))
                if src and _git_dir(mirror, src[0]) is None:
                    todo["fetch"].append(src[0])
                continue
            if (folder / name).exists():
                continue
            how = restore_run(name, key, kind, folder, mirror)
            if how.startswith("fetch "):
                todo["fetch"].append(how.split(" ", 1)[1])
            elif how == "page":
                todo["page"].append(f"set{n}/{kind}/{name}\t{key.get('source')}")
            elif how.startswith("missing"):
                todo["missing"].append(f"set{n}/{kind}/{name}\t{how}")
    return todo


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sets", nargs="+", type=int, help="set numbers (12 for console/set12.json and structured/set12.json)")
    ap.add_argument("--out", type=Path, required=True, help="folder outside the repository that receives setN/")
    ap.add_argument("--mirror", type=Path, default=Path("/work/.mirror"), help="where fetched snapshots lie")
    ap.add_argument("--need", action="store_true", help="only list the repositories still to fetch")
    a = ap.parse_args(argv)
    todo: dict[str, list[str]] = {"fetch": [], "page": [], "missing": []}
    for n in a.sets:
        for k, v in restore_set(n, a.out, a.mirror, a.need).items():
            todo[k] += v
    for repo in sorted(set(todo["fetch"])):
        print(f"fetch\t{repo}")
    for line in todo["page"]:
        print(f"page\t{line}")
    for line in todo["missing"]:
        print(f"missing\t{line}")
    return 0 if not todo["missing"] else 1


if __name__ == "__main__":
    sys.exit(main())
