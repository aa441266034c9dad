"""Training losses of the four papers, as PyTorch modules on logits.

Every loss takes logits (N, K) — or (N, K, *spatial) for segmentation — and integer targets
(N,) / (N, *spatial), and reduces by ``reduction`` ("mean" over samples or pixels, "sum",
"none"); ``ignore_index`` drops unlabelled samples/pixels. Build one from a config with
``build({"name": "focal", "gamma": 3})``; ``available()`` lists the names, ``parameters(name)``
a loss's parameters and defaults. Parameter names spell out the papers' symbols: ``gamma``,
``alpha``, ``beta``, ``rho``, ``smoothing`` (label smoothing's α), ``lam`` (MMCE's and
AdaFocal's λ), ``thresholds``/``gammas`` (FLSD), ``milestones``/``gammas`` (FLSc).

Numerics: everything starts from log-softmax. 1 − p is formed by subtraction only where
p ≤ 1/2, where it is exact to rounding; for the one class per row that may have p > 1/2 it is
the sum of the other classes' probabilities, and its log falls back to a logsumexp over the
other classes where that sum underflows (``_classwise``, ``focal``). So losses and gradients
stay finite for float32 logits of any size.

Trainer protocol — every loss has these methods (no-ops unless the loss is stateful), so a
trainer calls them unconditionally:

    loss.set_training_targets(train_targets, num_classes)  # once, before training
    loss.set_epoch(epoch, num_epochs)                      # start of each epoch, 0-based
    loss.update_from_validation(val_logits, val_labels)    # after each validation pass

``loss.needs_training_targets`` (weighted_cross_entropy without weights) and
``loss.needs_validation`` (adafocal) say when the call matters.

Trusted inputs: every call checks its targets (one device sync). A caller that checks all of
its targets once with ``check_target_values(targets, num_classes)`` may set
``loss.validate_inputs = False`` — the trainer does.
"""

from focalcal.core.extras import require

require("torch", "focalcal.losses")  # one line naming the extra, before any module imports torch

from ._base import Loss, check_target_values
from .adafocal import AdaFocalLoss
from .brier import BrierLoss
from .cross_entropy import CrossEntropyLoss
from .focal import FocalLoss, SampleDependentFocalLoss, ScheduledFocalLoss, focal_of_target
from .mmce import MMCELoss
from .registry import LOSSES, PRESETS, available, build, loss_class, parameters, register
from .segmentation import (
    DualCrossEntropyLoss,
    DualFocalLoss,
    GeneralizedDiceLoss,
    WeightedCrossEntropyLoss,
    class_counts,
    inverse_frequency_weights,
)
from .smoothing import LabelSmoothingLoss

__all__ = [
    "LOSSES",
    "PRESETS",
    "AdaFocalLoss",
    "BrierLoss",
    "CrossEntropyLoss",
    "DualCrossEntropyLoss",
    "DualFocalLoss",
    "FocalLoss",
    "GeneralizedDiceLoss",
    "LabelSmoothingLoss",
    "Loss",
    "MMCELoss",
    "SampleDependentFocalLoss",
    "ScheduledFocalLoss",
    "WeightedCrossEntropyLoss",
    "available",
    "build",
    "check_target_values",
    "class_counts",
    "focal_of_target",
    "inverse_frequency_weights",
    "loss_class",
    "parameters",
    "register",
]
