"""The probe's checks, one small class each, as replay's counterfactuals are: its `name`, the finding kinds it
`explains`, and `check(ctx)`, which runs it on a `Context` and returns its answer (pass / fail / n/a,
docs/probe.md). A check's work lives in its own module, imported when it runs: `forensics analyze` reads
`PROBED_KINDS` here without importing torch. A new check is one class here, added to `CHECKS`, and its module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from forensics.usercode.probe.context import Context


@dataclass(frozen=True)
class InputScale:
    """The saved batch's inputs and the first layer's outputs: standardised, or far from it.
    The work: `input_scale.py`."""

    name: ClassVar[str] = "input_scale"
    explains: ClassVar[tuple[str, ...]] = ("saturated_activation", "vanishing_gradients", "flat_loss", "plateau")

    def check(self, ctx: Context) -> dict[str, Any]:
        from forensics.usercode.probe.input_scale import check as input_scale

        return input_scale(ctx, self)


@dataclass(frozen=True)
class OutputHead:
    """What the loss function receives: logits, probabilities or log-probabilities, as it expects.
    The work: `output_head.py`."""

    name: ClassVar[str] = "output_head"
    explains: ClassVar[tuple[str, ...]] = ("initial_loss_mismatch", "flat_loss", "plateau", "underfitting")

    def check(self, ctx: Context) -> dict[str, Any]:
        from forensics.usercode.probe.output_head import check as output_head

        return output_head(ctx, self)


@dataclass(frozen=True)
class InitialLoss:
    """The step-0 loss against log(C), a uniform guess's. The work: `initial_loss.py`."""

    name: ClassVar[str] = "initial_loss"
    explains: ClassVar[tuple[str, ...]] = ("initial_loss_mismatch",)

    def check(self, ctx: Context) -> dict[str, Any]:
        from forensics.usercode.probe.initial_loss import check as initial_loss

        return initial_loss(ctx, self)


@dataclass(frozen=True)
class GradientFlow:
    """Whether every parameter gets a gradient and is updated; dead, saturated and vanishing layers.
    The work: `gradient_flow.py`."""

    name: ClassVar[str] = "gradient_flow"
    explains: ClassVar[tuple[str, ...]] = ("flat_loss", "plateau", "underfitting", "vanishing_gradients", "dead_relu",
                                           "saturated_activation", "frozen_parameters")

    def check(self, ctx: Context) -> dict[str, Any]:
        from forensics.usercode.probe.gradient_flow import check as gradient_flow

        return gradient_flow(ctx, self)


@dataclass(frozen=True)
class LabelShuffle:
    """The loss with the targets permuted within the batch against the true pairing. The work: `label_shuffle.py`."""

    name: ClassVar[str] = "label_shuffle"
    explains: ClassVar[tuple[str, ...]] = ("flat_loss", "plateau", "underfitting")

    def check(self, ctx: Context) -> dict[str, Any]:
        from forensics.usercode.probe.label_shuffle import check as label_shuffle

        return label_shuffle(ctx, self)


@dataclass(frozen=True)
class OverfitOneBatch:
    """Whether the model can memorise one saved batch. The work: `overfit.py`."""

    name: ClassVar[str] = "overfit_one_batch"
    explains: ClassVar[tuple[str, ...]] = ("flat_loss", "plateau", "underfitting")

    def check(self, ctx: Context) -> dict[str, Any]:
        from forensics.usercode.probe.overfit import check as overfit

        return overfit(ctx, self)


@dataclass(frozen=True)
class LrRange:
    """Smith's LR range test: where the run's LR lies in the working range. The work: `lr_range.py`."""

    name: ClassVar[str] = "lr_range"
    explains: ClassVar[tuple[str, ...]] = ("flat_loss", "plateau", "oscillation", "underfitting")

    def check(self, ctx: Context) -> dict[str, Any]:
        from forensics.usercode.probe.lr_range import check as lr_range

        return lr_range(ctx, self)


# In the order they run and are printed: the single-pass checks first, the trained ones last.
CHECKS = (InputScale(), OutputHead(), InitialLoss(), GradientFlow(), LabelShuffle(), OverfitOneBatch(), LrRange())
CHECK_NAMES = tuple(c.name for c in CHECKS)
# The finding kinds a probe can explain: `forensics analyze` prints the probe command under these.
PROBED_KINDS = tuple(dict.fromkeys(kind for c in CHECKS for kind in c.explains))
