"""Meta-test: detectors, the catalog module and ../shared/CATALOG.md agree; `forensics rules` lists every kind."""

import dataclasses
import json
import re

import pytest

from forensics.judge import catalog
from forensics.cli import main
from forensics.judge.detectors import ALL
from tests.paths import SHARED

CATALOG_MD = SHARED / "CATALOG.md"


def _md_kinds() -> list[str]:
    return re.findall(r"^\| `([a-z_]+)` \|", CATALOG_MD.read_text(), flags=re.M)


@pytest.mark.skipif(not CATALOG_MD.exists(), reason="../shared/CATALOG.md is not beside this checkout")
def test_catalog_module_matches_catalog_md():
    assert list(catalog.KINDS) == _md_kinds()


def test_every_detector_kind_is_a_catalog_id_and_unique():
    kinds = [d.kind for d in ALL]
    assert len(kinds) == len(set(kinds))
    assert set(kinds) <= set(catalog.KINDS)


def test_detected_and_not_yet_detected_cover_the_catalog_exactly():
    detected = {d.kind for d in ALL}
    assert detected.isdisjoint(catalog.NOT_YET_DETECTED)
    assert detected | set(catalog.NOT_YET_DETECTED) == set(catalog.KINDS)


@pytest.mark.parametrize("detector", ALL, ids=lambda d: d.kind)
def test_detector_shape(detector):
    doc = detector.__doc__ or ""
    for part in ("Detects:", "Why:", "Evidence:"):
        assert part in doc, f"{detector.__name__} docstring lacks {part!r}"
    assert dataclasses.is_dataclass(detector) and detector.__dataclass_params__.frozen
    assert isinstance(detector.requires, tuple)
    detector()  # every threshold has a default


def test_every_catalog_entry_has_causes_and_checks():
    for e in catalog.ENTRIES:
        assert e.summary and e.causes and e.checks, e.kind


def test_rules_lists_every_kind_and_which_are_not_yet_detected(capsys):
    assert main(["rules", "--json"]) == 0
    rules = json.loads(capsys.readouterr().out)["rules"]
    assert [r["kind"] for r in rules] == list(catalog.KINDS)
    assert {r["kind"] for r in rules if not r["detected"]} == set(catalog.NOT_YET_DETECTED)
    assert main(["rules"]) == 0
    text = capsys.readouterr().out
    for kind in catalog.NOT_YET_DETECTED:
        assert re.search(rf"^{kind}\s+NOT YET", text, flags=re.M)
