"""Classification, calibration and segmentation metrics (core install: numpy and scipy only).

Conventions shared by every function here:

* Input: (N, K) probabilities (rows summing to 1) as numpy arrays or torch tensors, and
  N integer labels; ``nll_from_logits`` takes logits. Bad input (NaN/Inf, labels out of
  range, shape mismatch, no samples, rows not summing to 1) raises ``ValueError``.
* Output: fractions, not percentages (ECE 0.0123 is the papers' "1.23 %"); NLL and KL
  in nats.
* Binned metrics use right-closed bins $((i-1)/M, i/M]$ with 0 in the first bin;
  ``binning="mass"`` gives equal-mass bins (AdaECE) that never split tied confidences.
  Details: :mod:`focalcal.metrics.binning`.
* ``smooth_ece`` (Błasiok & Nakkiran 2023) needs no bins; it comes from the ``relplot``
  package, and ``reliability_bins``' DataFrame from pandas (both in ``focalcal[plots]``).
* Segmentation (:mod:`focalcal.metrics.segmentation`): IoU, pixel accuracy and Hausdorff
  distance take integer label maps; ``pixel_ece`` is ``ece`` over the flattened pixels.

Examples:
    >>> import numpy as np
    >>> from focalcal import metrics
    >>> probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]])
    >>> labels = np.array([0, 1, 1, 1])
    >>> round(metrics.ece(probs, labels, n_bins=5), 4), metrics.error(probs, labels)
    (0.25, 0.25)
"""
from focalcal.metrics.calibration import (
    SmoothReliability,
    classwise_ece,
    ece,
    ece_of_confidence,
    mce,
    reliability_bins,
    reliability_columns,
    smooth_ece,
    smooth_reliability_curve,
)
from focalcal.metrics.classification import (
    S99,
    brier,
    confidence_gap,
    error,
    kl_divergence,
    nll,
    nll_from_logits,
    s99,
    top_k_error,
)
from focalcal.metrics.segmentation import (
    IoU,
    hausdorff_distance,
    iou,
    iou_from_confusion,
    pixel_accuracy,
    pixel_confusion_matrix,
    pixel_ece,
)

__all__ = [
    "S99",
    "IoU",
    "SmoothReliability",
    "brier",
    "classwise_ece",
    "confidence_gap",
    "ece",
    "ece_of_confidence",
    "error",
    "hausdorff_distance",
    "iou",
    "iou_from_confusion",
    "kl_divergence",
    "mce",
    "nll",
    "nll_from_logits",
    "pixel_accuracy",
    "pixel_confusion_matrix",
    "pixel_ece",
    "reliability_bins",
    "reliability_columns",
    "s99",
    "smooth_ece",
    "smooth_reliability_curve",
    "top_k_error",
]
