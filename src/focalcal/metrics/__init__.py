"""Classification and calibration metrics.

Conventions shared by every function here:

* Input: (N, K) probabilities (rows summing to 1) as numpy arrays or torch tensors, and
  N integer labels; ``nll_from_logits`` takes logits. Bad input (NaN/Inf, labels out of
  range, shape mismatch, no samples, rows not summing to 1) raises ``ValueError``.
* Output: fractions, not percentages (ECE 0.0123 is the papers' "1.23 %"); NLL and KL
  in nats.
* Binned metrics use right-closed bins ``((i-1)/M, i/M]`` with 0 in the first bin;
  ``binning="mass"`` gives equal-mass bins (AdaECE) that never split tied confidences.
  Details: :mod:`focalcal.metrics.binning`.
"""

from focalcal.metrics.calibration import classwise_ece, ece, mce, reliability_bins
from focalcal.metrics.classification import (
    S99,
    brier,
    error,
    kl_divergence,
    nll,
    nll_from_logits,
    s99,
    top_k_error,
)

__all__ = [
    "S99",
    "brier",
    "classwise_ece",
    "ece",
    "error",
    "kl_divergence",
    "mce",
    "nll",
    "nll_from_logits",
    "reliability_bins",
    "s99",
    "top_k_error",
]
