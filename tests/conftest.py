"""Shared test set-up: hypothesis profiles (derandomized in CI, DECISIONS.md §14) and paths to shared data."""

import os
import sys

import pytest
from hypothesis import HealthCheck, settings

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
