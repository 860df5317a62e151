"""Which module of the user's model is running: forward pre/post hooks on every module keep the stack (replay's
recorder names the module of the first non-finite op with it, probe's watch the module of each op)."""

from __future__ import annotations

import torch


class ModuleStack:
    """Forward pre/post hooks on every module: `names[-1]` is the innermost module running."""

    def __init__(self, model: torch.nn.Module):
        self.names: list[str] = []
        self.handles = []
        for name, m in model.named_modules():
            self.handles.append(m.register_forward_pre_hook(lambda mod, inp, n=name: self.names.append(n)))
            self.handles.append(m.register_forward_hook(lambda mod, inp, out: (self.names.pop(), None)[1]))

    @property
    def current(self) -> str:
        return self.names[-1] if self.names else ""

    def close(self) -> None:
        for h in self.handles:
            h.remove()
