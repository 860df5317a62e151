"""The gallery's model code runs on any device `replay --device` / `probe --device` moves it to.

Every gallery run ships sample_runs/gen/models.py as its train.py (and forensics_entry.py), so a tensor built on
the CPU inside a forward breaks every CUDA replay and probe of that run. The meta device stands in for CUDA here:
a forward whose inputs and weights are all on meta fails on any tensor left on the CPU, as CUDA does.
"""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

GEN = Path(__file__).resolve().parent.parent / "sample_runs" / "gen"
RUNS = GEN.parent / "runs"


def _models():
    spec = importlib.util.spec_from_file_location("gallery_models_under_test", GEN / "models.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("kwargs", [{}, {"norm": "custom"}, {"pad_idx": 0}])
def test_the_transformer_builds_its_causal_mask_on_the_input_device(kwargs):
    models = _models()
    with torch.device("meta"):
        model = models.TinyTransformer(**kwargs)
    out = model(torch.zeros(2, 8, dtype=torch.long, device="meta"))
    assert out.device.type == "meta" and tuple(out.shape) == (2, 8, 16)


def test_every_run_ships_the_generator_model_code():
    """The fix above reaches a run only if its train.py / forensics_entry.py carry models.py as it is now."""
    shipped_as = '"""Model code of this run. Tiny models shared'  # as sample_runs/gen/common.py writes it
    src = inspect.getsource(_models()).replace('"""Tiny models shared', shipped_as, 1)
    shipped = sorted(p for p in RUNS.glob("*/*.py") if p.name in ("train.py", "forensics_entry.py"))
    assert len(shipped) >= 40
    stale = [str(p.relative_to(RUNS)) for p in shipped if not p.read_text().startswith(src)]
    assert stale == []
