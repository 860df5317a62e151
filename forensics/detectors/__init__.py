"""Every detector, one per file; `ALL` lists them in the order a report reads best (causes before symptoms)."""

from forensics.detectors.amp_overflow import AmpOverflow
from forensics.detectors.bad_batch import BadBatch
from forensics.detectors.dead_relu import DeadRelu
from forensics.detectors.distribution_mismatch import DistributionMismatch
from forensics.detectors.divergence import Divergence
from forensics.detectors.exploding_gradients import ExplodingGradients
from forensics.detectors.flat_loss import FlatLoss
from forensics.detectors.frequent_clipping import FrequentClipping
from forensics.detectors.frozen_parameters import FrozenParameters
from forensics.detectors.grokking import Grokking
from forensics.detectors.initial_loss_mismatch import InitialLossMismatch
from forensics.detectors.loss_spike import LossSpike
from forensics.detectors.lr_schedule_anomaly import LrScheduleAnomaly
from forensics.detectors.masked_nonfinite import MaskedNonfinite
from forensics.detectors.memory_growth import MemoryGrowth
from forensics.detectors.nan_loss import NanLoss
from forensics.detectors.nonfinite_weights import NonfiniteWeights
from forensics.detectors.oscillation import Oscillation
from forensics.detectors.overfitting import Overfitting
from forensics.detectors.plateau import Plateau
from forensics.detectors.resumed_run import ResumedRun
from forensics.detectors.sampled_log import SampledLog
from forensics.detectors.saturated_activation import SaturatedActivation
from forensics.detectors.throughput_drop import ThroughputDrop
from forensics.detectors.underfitting import Underfitting
from forensics.detectors.update_ratio_anomaly import UpdateRatioAnomaly
from forensics.detectors.val_noise import ValNoise
from forensics.detectors.vanishing_gradients import VanishingGradients
from forensics.detectors.weight_collapse import WeightCollapse
from forensics.detectors.weight_norm_growth import WeightNormGrowth

ALL: tuple[type, ...] = (
    NanLoss, MaskedNonfinite, ExplodingGradients, Divergence, NonfiniteWeights, BadBatch, LossSpike, AmpOverflow,
    InitialLossMismatch, FlatLoss, Plateau, Underfitting, Oscillation, Overfitting, DistributionMismatch, Grokking,
    ValNoise, FrequentClipping, UpdateRatioAnomaly, LrScheduleAnomaly, VanishingGradients, DeadRelu,
    SaturatedActivation, FrozenParameters, WeightNormGrowth, WeightCollapse, MemoryGrowth, ThroughputDrop, ResumedRun,
    SampledLog,
)
