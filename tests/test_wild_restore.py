"""corpus/wild/restore.py: a committed run is re-created byte-exact from a real git snapshot (checked against the
blob id), a page is listed for a person, and the consensus labels keep only what both labellers name."""

from __future__ import annotations

import subprocess
from pathlib import Path

from corpus.wild.restore import committed, consensus, restore_run


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _snapshot(mirror: Path, repo: str, files: dict[str, bytes]) -> str:
    work = mirror / repo.replace("/", "+") / "repo"
    work.mkdir(parents=True)
    _git(work, "init", "-q")
    for rel, data in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_bytes(data)
    _git(work, "add", ".")
    _git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "logs")
    return _git(work, "rev-parse", "HEAD")


def test_committed_sources_and_pages_are_told_apart():
    sha = "a" * 40
    assert committed(f"o/r@{sha}:logs/train.log") == ("o/r", sha, ["logs/train.log"])
    assert committed(f"o/r@{sha}:{{run/a.csv, run/b.yaml}}") == ("o/r", sha, ["run/a.csv", "run/b.yaml"])
    assert committed("https://stackoverflow.com/questions/1/loss-nan") is None


def test_a_committed_log_is_restored_byte_exact(tmp_path):
    mirror = tmp_path / "mirror"
    log = b"Epoch 1 loss: 0.9\r\nEpoch 2 loss: nan\r\n\xff"  # CRLF and a stray byte survive as they are
    sha = _snapshot(mirror, "someone/model", {"out/train.log": log, "out/cfg.yaml": b"lr: 0.1\n"})
    out = tmp_path / "set"
    key = {"source": f"someone/model@{sha}:out/train.log"}
    assert restore_run("c01_plain", key, "console", out, mirror) == "ok"
    assert (out / "c01_plain" / "out" / "train.log").read_bytes() == log

    both = {"source": f"someone/model@{sha}:{{out/train.log, out/cfg.yaml}}", "files": ["train.log", "cfg.yaml"]}
    assert restore_run("r01_csv", both, "structured", out, mirror) == "ok"
    assert (out / "r01_csv" / "cfg.yaml").read_bytes() == b"lr: 0.1\n"


def test_what_cannot_be_restored_says_why(tmp_path):
    mirror = tmp_path / "mirror"
    sha = _snapshot(mirror, "someone/model", {"train.log": b"loss 1\n"})
    out = tmp_path / "set"
    assert restore_run("a", {"source": f"other/repo@{sha}:train.log"}, "console", out, mirror) == "fetch other/repo"
    assert restore_run("b", {"source": f"someone/model@{sha}:gone.log"}, "console", out, mirror) == "missing gone.log"
    assert restore_run("c", {"source": "https://discuss.pytorch.org/t/1"}, "console", out, mirror) == "page"
    assert not out.exists() or not any(out.iterdir())


def test_consensus_keeps_what_both_name_and_allows_the_rest():
    first = {"x": {"pathologies": ["divergence", "loss_spike"], "allowed": []}, "y": {"pathologies": []}}
    second = {"x": {"pathologies": ["divergence", "nan_loss"], "allowed": ["plateau"]}}
    got = consensus(first, second)
    assert got["x"]["pathologies"] == ["divergence"]
    assert got["x"]["allowed"] == ["loss_spike", "nan_loss", "plateau"]
    assert got["y"] == first["y"]
