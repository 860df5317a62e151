"""What makes a re-run give the same numbers, set for one replay and given back afterwards.

`torch.use_deterministic_algorithms` imports torch's compiler stack (`torch._inductor.config`, which pulls in
`torch._dynamo` and sympy: 1.3-4.6 s measured here, more than a replayed step) only to set inductor's
`deterministic` flag. The same two settings without that import: the C flag `torch._C._set_deterministic_algorithms`
(what the Python function calls), and inductor's flag either set on the module when it is already imported or read
from `TORCHINDUCTOR_DETERMINISTIC`, the variable inductor's config reads when it is first imported (torch.compile in
the user's code imports it later). tests/test_replay_determinism.py checks both against torch's own function.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from forensics.usercode.kit.threads import intra_op_threads

INDUCTOR_ENV = "TORCHINDUCTOR_DETERMINISTIC"
# The libraries' own variables replay sets (and gives back): nothing of ours is configured through the environment.
LIBRARY_ENV = (INDUCTOR_ENV, "CUBLAS_WORKSPACE_CONFIG")


def library_values() -> dict[str, str | None]:
    """The LIBRARY_ENV variables as they are now (None: unset)."""
    return {name: os.environ.get(LIBRARY_ENV[i]) for i, name in enumerate(LIBRARY_ENV)}


def library_env(values: dict[str, str | None]) -> dict[str, str | None]:
    """Set LIBRARY_ENV variables (None removes one); returns their values before, to give back the same way."""
    before = {}
    for i, name in enumerate(LIBRARY_ENV):
        if name in values:
            before[name] = os.environ.get(LIBRARY_ENV[i])
            if values[name] is None:
                os.environ.pop(LIBRARY_ENV[i], None)
            else:
                os.environ[LIBRARY_ENV[i]] = values[name]
    return before


def set_deterministic(mode: bool, warn_only: bool = False) -> None:
    """`torch.use_deterministic_algorithms(mode, warn_only=warn_only)` without importing the compiler stack."""
    import torch

    torch._C._set_deterministic_algorithms(mode, warn_only=warn_only)
    config = sys.modules.get("torch._inductor.config")
    if config is not None:
        config.deterministic = mode
    else:
        library_env({INDUCTOR_ENV: "1" if mode else "0"})


@contextmanager
def deterministic(device: Any, threads: int | None = None) -> Iterator[dict[str, Any]]:
    """Within: deterministic algorithms (warn only), the thread count (`threads`, else `available_threads`), and on
    CUDA cuDNN deterministic without benchmark or TF32. Yields the settings as the result reports them; every
    setting, environment variable included, is given back on exit."""
    import torch

    saved = {"det": (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()),
             "env": library_values(),
             "inductor": getattr(sys.modules.get("torch._inductor.config"), "deterministic", None)}
    settings: dict[str, Any] = {"use_deterministic_algorithms": "True (warn_only)"}
    cuda = device.type == "cuda"
    if cuda:
        saved["cudnn"] = (torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic,
                          torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    try:
        set_deterministic(True, warn_only=True)
        if cuda:
            if saved["env"]["CUBLAS_WORKSPACE_CONFIG"] is None:  # cuBLAS's deterministic workspace
                library_env({"CUBLAS_WORKSPACE_CONFIG": ":4096:8"})
            torch.backends.cudnn.benchmark = False
            torch.backends.cudnn.deterministic = True
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            settings.update({"cudnn.deterministic": True, "cudnn.benchmark": False, "tf32": False})
        settings["limits"] = ("bitwise equality with the original run needs the same hardware, library versions and "
                              "thread count; other reductions differ in the last bits")
        with intra_op_threads(threads) as (settings["threads"], settings["threads_from"]):
            yield settings
    finally:
        torch._C._set_deterministic_algorithms(saved["det"][0], warn_only=saved["det"][1])
        library_env(saved["env"])
        config = sys.modules.get("torch._inductor.config")
        if config is not None:  # imported during the replay (torch.compile): its flag as it was, or as the env said
            config.deterministic = saved["inductor"] if saved["inductor"] is not None else saved["env"][INDUCTOR_ENV] == "1"
        if cuda:
            (torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic,
             torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) = saved["cudnn"]
