"""Every detector, one per file; `ALL` lists them in the order a report reads best (causes before symptoms). Every
set another module needs is derived here from the detectors' own class facts (`detectors.base.Detector`)."""

from forensics.judge.detectors.amp_overflow import AmpOverflow
from forensics.judge.detectors.bad_batch import BadBatch
from forensics.judge.detectors.dead_relu import DeadRelu
from forensics.judge.detectors.distribution_mismatch import DistributionMismatch
from forensics.judge.detectors.divergence import Divergence
from forensics.judge.detectors.exploding_gradients import ExplodingGradients
from forensics.judge.detectors.flat_loss import FlatLoss
from forensics.judge.detectors.frequent_clipping import FrequentClipping
from forensics.judge.detectors.frozen_parameters import FrozenParameters
from forensics.judge.detectors.grokking import Grokking
from forensics.judge.detectors.initial_loss_mismatch import InitialLossMismatch
from forensics.judge.detectors.loss_spike import LossSpike
from forensics.judge.detectors.lr_schedule_anomaly import LrScheduleAnomaly
from forensics.judge.detectors.masked_nonfinite import MaskedNonfinite
from forensics.judge.detectors.memory_growth import MemoryGrowth
from forensics.judge.detectors.nan_loss import NanLoss
from forensics.judge.detectors.nonfinite_weights import NonfiniteWeights
from forensics.judge.detectors.oscillation import Oscillation
from forensics.judge.detectors.overfitting import Overfitting
from forensics.judge.detectors.plateau import Plateau
from forensics.judge.detectors.resumed_run import ResumedRun
from forensics.judge.detectors.sampled_log import SampledLog
from forensics.judge.detectors.saturated_activation import SaturatedActivation
from forensics.judge.detectors.throughput_drop import ThroughputDrop
from forensics.judge.detectors.underfitting import Underfitting
from forensics.judge.detectors.update_ratio_anomaly import UpdateRatioAnomaly
from forensics.judge.detectors.val_noise import ValNoise
from forensics.judge.detectors.vanishing_gradients import VanishingGradients
from forensics.judge.detectors.weight_collapse import WeightCollapse
from forensics.judge.detectors.weight_norm_growth import WeightNormGrowth

ALL: tuple[type, ...] = (
    NanLoss, MaskedNonfinite, ExplodingGradients, Divergence, NonfiniteWeights, BadBatch, LossSpike, AmpOverflow,
    InitialLossMismatch, FlatLoss, Plateau, Underfitting, Oscillation, Overfitting, DistributionMismatch, Grokking,
    ValNoise, FrequentClipping, UpdateRatioAnomaly, LrScheduleAnomaly, VanishingGradients, DeadRelu,
    SaturatedActivation, FrozenParameters, WeightNormGrowth, WeightCollapse, MemoryGrowth, ThroughputDrop, ResumedRun,
    SampledLog,
)

# Derived from the classes: adding a detector adds it to each set its facts put it in.
STAGE: dict[str, int] = {c.kind: c.stage for c in ALL}
CURVE_KINDS = frozenset(c.kind for c in ALL if getattr(c, "reads_curve", False))
CHAIN_KINDS = frozenset(c.kind for c in ALL if getattr(c, "joins_chain", False))
NONFINITE_KINDS = frozenset(c.kind for c in ALL if getattr(c, "nonfinite", False))
REACH = {c.kind: c.reach for c in ALL if hasattr(c, "reach")}
