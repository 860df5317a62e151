"""Without ../shared (a contributor's clone), the tests that read the team's real logs skip and say why; the rest
run. With FORENSICS_REQUIRE_SHARED=1 (CI) they fail instead, so CI never passes by skipping them (tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.paths import REPO

TESTS = ["tests/test_hf_trainer.py::test_real_star_last_loss_and_string_fields_skipped",  # names REAL
         "tests/test_hf_trainer.py::test_real_file_count",                                # a module-level glob of it
         "tests/test_tensorboard.py::test_damaged_real_file_keeps_only_original_records",  # inside hypothesis
         "tests/test_hf_trainer.py::test_resume_reads_only_new_entries"]                     # needs nothing shared


def _pytest(tmp_path, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *TESTS],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "FORENSICS_SHARED": str(tmp_path / "no_shared"), **env})


def test_missing_shared_skips_what_reads_it_and_says_where(tmp_path):
    out = _pytest(tmp_path, FORENSICS_REQUIRE_SHARED="")
    assert out.returncode == 0, out.stdout[-3000:]
    assert "1 passed, 3 skipped" in out.stdout, out.stdout[-3000:]
    assert f"not found at {tmp_path / 'no_shared'}" in out.stdout


def test_ci_requires_shared(tmp_path):
    out = _pytest(tmp_path, FORENSICS_REQUIRE_SHARED="1")
    assert out.returncode == 1 and "3 failed, 1 passed" in out.stdout, out.stdout[-3000:]
