"""The probe's checks are declared once (forensics/usercode/probe/checks.py: one class each, in `CHECKS`) and every
list other modules need is derived from them: the check names `--checks` accepts, and the finding kinds under which
`analyze` prints the probe command (`PROBED_KINDS`). These tests fail when a check or a kind it explains would be
missed. Whether each answer explains only what its class declares is checked on every probe the probe tests run."""

from __future__ import annotations

import dataclasses
import inspect
from types import SimpleNamespace

from forensics.judge import catalog
from forensics.usercode.probe import CHECK_NAMES, CHECKS, PROBED_KINDS, checks, parse_checks


def test_every_check_class_is_in_the_tuple_once():
    declared = [c for _, c in inspect.getmembers(checks, inspect.isclass)
                if dataclasses.is_dataclass(c) and c.__module__ == checks.__name__]
    assert declared and sorted(c.__name__ for c in declared) == sorted(type(c).__name__ for c in CHECKS)
    assert len(set(CHECK_NAMES)) == len(CHECKS) and parse_checks(None) == CHECK_NAMES


def test_the_probed_kinds_are_every_kind_a_check_explains_and_each_is_a_catalog_kind():
    assert set(PROBED_KINDS) == {k for c in CHECKS for k in c.explains}
    for c in CHECKS:
        assert c.explains and set(c.explains) <= set(catalog.KINDS), (c.name, set(c.explains) - set(catalog.KINDS))


def test_gradient_flow_explains_no_kind_its_class_does_not_declare():
    """gradient_flow's failing answer explains the kinds of the problems it found (PROBLEM_EXPLAINS): each must be
    one the class declares, or analyze would not print the probe command under a finding the probe explains."""
    from forensics.usercode.probe import gradient_flow

    declared = set(checks.GradientFlow.explains)
    assert {k for kinds in gradient_flow.PROBLEM_EXPLAINS.values() for k in kinds} <= declared


def test_analyze_offers_the_probe_under_every_kind_a_check_explains(tmp_path):
    from forensics.services.analysis import set_probe_command
    from forensics.usercode.kit.entry import ENTRY_NAME

    (tmp_path / ENTRY_NAME).write_text("")
    for c in CHECKS:
        for kind in c.explains:
            result = SimpleNamespace(findings=[SimpleNamespace(kind=kind)], probe_command=None, answers=None)
            set_probe_command(result, tmp_path, tmp_path / "f.duckdb", True)
            assert result.probe_command and result.probe_command.startswith("forensics probe"), (c.name, kind)
    result = SimpleNamespace(findings=[SimpleNamespace(kind="nan_loss")], probe_command=None, answers=None)
    set_probe_command(result, tmp_path, tmp_path / "f.duckdb", True)
    assert result.probe_command is None  # a kind no check explains: no probe offered
