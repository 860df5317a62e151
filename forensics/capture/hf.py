"""An HF `TrainerCallback` writing what `forensics replay` needs beside HF's own checkpoints:

    from forensics.capture.hf import ForensicsCallback
    trainer = Trainer(model, args, train_dataset=ds, callbacks=[ForensicsCallback(keep=args.save_steps)])

HF Trainer already saves `checkpoint-N/` with model, optimizer, scheduler and RNG states every `save_steps`
(keep `save_only_model=False`), and logs `loss` and `grad_norm` in `trainer_state.json`. This callback adds
what HF does not keep: the batches (a ring buffer of the model's training inputs, taken by a forward pre-hook,
since callbacks never see the batch), flushed to `batches/step_N.pt` when the loss or the gradients turn
non-finite or the loss spikes; every step's loss at full precision (`forensics_metrics.jsonl`: HF's logged
loss is a rounded window mean that hides NaN); `config.json` with what the entry point needs; and a generated
`forensics_entry.py` (the model class from its source file and config, `model(**batch)["loss"]`, the run's
optimizer groups, HF's scheduler). Imports transformers only here (DECISIONS.md §13).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback

from forensics.capture import Capture
from forensics.capture.entry import optimizer_spec, write_entry

ENTRY_BODY = '''

def build_model(config):
    cls = _model_class()
    torch.manual_seed(0)  # the weights come from the checkpoint
    return cls(cls.config_class.from_dict(config["model_config"]))


def loss_fn(model, batch):
    out = model(**batch)
    return out["loss"] if isinstance(out, dict) else out[0]


def build_scheduler(optimizer, config):
    from transformers import get_scheduler

    return get_scheduler(config["lr_scheduler_type"], optimizer, num_warmup_steps=config["warmup_steps"],
                         num_training_steps=config["max_steps"],
                         scheduler_specific_kwargs=config.get("lr_scheduler_kwargs") or {})


def step_options(config):
    return {"max_grad_norm": config["max_grad_norm"] or None,
            "grad_accumulation_steps": config["gradient_accumulation_steps"]}
'''


class ForensicsCallback(TrainerCallback):
    """Ring buffer of the last `keep` training batches, full-precision step losses, config and entry point."""

    def __init__(self, run_dir: str | Path | None = None, keep: int = 100, spike: float = 10.0):
        self.run_dir, self.keep, self.spike = run_dir, keep, spike
        self.cap: Capture | None = None
        self.step = 0
        self.handles: list = []

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        root = Path(self.run_dir or args.output_dir)
        max_steps = state.max_steps
        sched_type = getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type)
        config = {"model_config": model.config.to_dict(), "optimizer": optimizer_spec(model, optimizer),
                  "lr_scheduler_type": str(sched_type), "lr_scheduler_kwargs": args.lr_scheduler_kwargs or {},
                  "warmup_steps": args.get_warmup_steps(max_steps), "max_steps": max_steps,
                  "max_grad_norm": args.max_grad_norm, "gradient_accumulation_steps": args.gradient_accumulation_steps,
                  "seed": args.seed}
        self.cap = Capture(root, config=config, every=0, keep=self.keep, spike=self.spike)
        # the state at initialisation (HF saves none): `forensics probe` starts its overfit and initial-loss checks here
        self.cap.checkpoint(0, model, optimizer, kwargs.get("lr_scheduler"))
        write_entry(root, "forensics.capture.hf.ForensicsCallback", type(model), ENTRY_BODY)
        self.handles = [model.register_forward_pre_hook(self._inputs, with_kwargs=True),
                        model.register_forward_hook(self._outputs, with_kwargs=True)]

    def on_step_begin(self, args, state, control, **kwargs):
        self.step = state.global_step + 1  # HF's logged step of the batch about to run

    def _inputs(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        if module.training and kwargs:
            self.cap.remember(self.step, kwargs)

    def _outputs(self, module: torch.nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        if module.training:
            loss = output["loss"] if isinstance(output, dict) else output[0]
            self.cap.log(self.step, loss, None)

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        # after HF's clipping: a NaN gradient stays NaN; the loss may still be finite (a masked failure)
        if model is None or self.cap.tripped:
            return
        if any(p.grad is not None and not bool(torch.isfinite(p.grad).all()) for p in model.parameters()):
            self.cap.flush()
            self.cap.tripped = True

    def on_train_end(self, args, state, control, **kwargs):
        for h in self.handles:
            h.remove()
        self.handles = []
