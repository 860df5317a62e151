"""Shared test set-up: hypothesis profiles (derandomized in CI, DECISIONS.md §14) and paths to shared data."""

import os
import sys
import types
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.paths import SHARED

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


def pytest_collection_modifyitems(config, items):
    """Without the team's shared real logs beside the checkout, a test that reads them skips and says so, instead of
    failing on a missing file (a contributor's clone). CI sets FORENSICS_REQUIRE_SHARED=1: there they must be
    present, and a test that needs them fails as before. A test needs them when its code, or one of its fixtures'
    code, names a module-level path under SHARED (`REAL_RUNS_TEST / "log_x" / "train.log"`)."""
    if SHARED.is_dir() or os.environ.get("FORENSICS_REQUIRE_SHARED"):
        return
    skip = pytest.mark.skip(reason=f"reads the team's shared real logs, not found at {SHARED}: put them at ../shared "
                                   "beside the checkout or set FORENSICS_SHARED")
    for item in items:
        function = getattr(item, "function", None)
        functions = [function, getattr(getattr(function, "hypothesis", None), "inner_test", None)]
        info = getattr(item, "_fixtureinfo", None)
        for defs in (info.name2fixturedefs.values() if info else ()):
            functions += [d.func for d in defs]
        params = getattr(getattr(item, "callspec", None), "params", {})
        if any(_names_shared(f) for f in functions if isinstance(f, types.FunctionType)) or _shared(list(params.values())):
            item.add_marker(skip)


def _names_shared(function: types.FunctionType) -> bool:
    """Whether `function` (or a function nested in it) reads a global that is a path under SHARED, or a list,
    tuple or dict of such paths."""
    def names(code: types.CodeType) -> set[str]:
        out = set(code.co_names)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                out |= names(const)
        return out

    module_globals = function.__globals__
    return any(_shared(module_globals.get(n)) for n in names(function.__code__))


def _shared(value) -> bool:
    """Whether `value` is a path under SHARED, or a list, tuple or dict holding one."""
    if isinstance(value, Path):
        return value == SHARED or SHARED in value.parents
    if isinstance(value, (list, tuple)):
        return any(_shared(v) for v in value)
    if isinstance(value, dict):
        return any(_shared(v) for v in value.values())
    return False
