"""Replay's determinism settings (issue 28): the same flags torch.use_deterministic_algorithms sets, without
importing torch's compiler stack (it imports torch._inductor.config, hence torch._dynamo and sympy, for one flag);
every setting given back after the replay."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.paths import REPO

pytest.importorskip("torch")

PROBE = """
import json, sys, torch
{setup}
import torch._inductor.config as inductor_config  # what a later torch.compile would read
print(json.dumps({{"det": torch.are_deterministic_algorithms_enabled(),
                  "warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
                  "inductor": inductor_config.deterministic, "compiler_imported_before": {before}}}))
"""


def settings_after(setup: str) -> dict:
    before = "BEFORE"
    code = PROBE.format(setup=setup + "\nBEFORE = 'torch._dynamo' in sys.modules or 'sympy' in sys.modules",
                        before=before)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    return json.loads(out.stdout)


@pytest.mark.slow  # two fresh interpreters each importing torch and its compiler stack
@pytest.mark.parametrize("mode, warn_only", [(True, True), (False, False)])
def test_set_deterministic_is_torch_use_deterministic_algorithms_without_the_compiler(mode, warn_only):
    ours = settings_after(f"from forensics.usercode.replay.determinism import set_deterministic\n"
                          f"set_deterministic({mode}, warn_only={warn_only})")
    torchs = settings_after(f"torch.use_deterministic_algorithms({mode}, warn_only={warn_only})")
    assert {k: v for k, v in ours.items() if k != "compiler_imported_before"} == \
           {k: v for k, v in torchs.items() if k != "compiler_imported_before"}
    assert ours["compiler_imported_before"] is False
    assert torchs["compiler_imported_before"] is True  # what it costs the other way (1.3-4.6 s here)


def test_deterministic_gives_every_setting_back():
    import os

    import torch

    from forensics.usercode.replay.determinism import INDUCTOR_ENV, deterministic

    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
              torch.get_num_threads(), os.environ.get(INDUCTOR_ENV))
    with deterministic(torch.device("cpu"), threads=1) as settings:
        assert torch.are_deterministic_algorithms_enabled() and torch.get_num_threads() == 1
        assert settings["threads"] == 1 and settings["threads_from"] == "--threads"
    assert (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
            torch.get_num_threads(), os.environ.get(INDUCTOR_ENV)) == before


def test_default_threads_are_what_the_machine_can_give():
    import os

    from forensics.usercode.kit.threads import available_threads

    n, why = available_threads()
    assert 1 <= n <= len(os.sched_getaffinity(0))
    assert "CPUs, load" in why and why.endswith(f"{n} free")
