"""Shared test set-up: hypothesis profiles (derandomized in CI, DECISIONS.md §14) and paths to shared data."""

import os
import sys

import pytest
from hypothesis import HealthCheck, settings

from forensics.judge import engine
from tests.paths import SHARED

os.environ.setdefault("FORENSICS_STRICT", "1")  # a detector that raises fails its test, in CLI subprocesses too
engine.STRICT = True  # ... and in this process (forensics.judge.engine)

settings.register_profile("ci", deadline=None, derandomize=True, max_examples=100,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(autouse=True)
def _keep_main_module():
    """AppTest runs the page as `__main__` and leaves it in sys.modules, pointing at a deleted temp file; a later
    test's worker processes (forkserver re-imports `__main__`) would then die. Put the real one back after every
    test, whichever file ran the page."""
    main_module = sys.modules["__main__"]
    yield
    sys.modules["__main__"] = main_module


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_shared: reads the team's shared real logs (../shared or $FORENSICS_SHARED)")


def pytest_collection_modifyitems(config, items):
    """Without the team's shared real logs beside the checkout, a test marked `needs_shared` skips and says so,
    instead of failing on a missing file (a contributor's clone). CI sets FORENSICS_REQUIRE_SHARED=1: there they must
    be present, and a marked test that finds them missing fails as before."""
    if SHARED.is_dir() or os.environ.get("FORENSICS_REQUIRE_SHARED"):
        return
    skip = pytest.mark.skip(reason=f"reads the team's shared real logs, not found at {SHARED}: put them at ../shared "
                                   "beside the checkout or set FORENSICS_SHARED")
    for item in items:
        if item.get_closest_marker("needs_shared"):
            item.add_marker(skip)
