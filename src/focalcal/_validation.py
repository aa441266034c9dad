"""Input checks shared by metrics and calibrators.

Every public function that takes logits, probabilities or labels funnels them through
here, so bad input fails in one consistent way: a ``ValueError`` naming the argument
and the problem, before any work is done.
"""

from __future__ import annotations

import numpy as np


def as_numpy(array, name: str) -> np.ndarray:
    """Return ``array`` (numpy array, torch tensor or sequence) as a numpy array."""
    if array is None:
        raise ValueError(f"{name} is None")
    if hasattr(array, "detach") and hasattr(array, "cpu"):  # torch.Tensor, without importing torch
        array = array.detach().cpu().numpy()
    return np.asarray(array)


def check_scores(scores, name: str = "logits", *, ndim: int = 2) -> np.ndarray:
    """Check a float (N, K) array of logits or probabilities: non-empty, finite."""
    scores = as_numpy(scores, name)
    if scores.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D (n_samples, n_classes), got shape {scores.shape}")
    if scores.shape[0] == 0:
        raise ValueError(f"{name} is empty (0 samples)")
    if ndim == 2 and scores.shape[1] < 2:
        raise ValueError(f"{name} must have at least 2 classes, got shape {scores.shape}")
    if not np.issubdtype(scores.dtype, np.floating):
        if np.issubdtype(scores.dtype, np.number) or scores.dtype == bool:
            scores = scores.astype(np.float64)
        else:
            raise ValueError(f"{name} must be numeric, got dtype {scores.dtype}")
    bad = ~np.isfinite(scores)
    if bad.any():
        kind = "NaN" if np.isnan(scores).any() else "Inf"
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"{name} contains {kind} values ({int(bad.sum())} entries, first at index {first})")
    return scores


def check_probs(probs, name: str = "probs", *, atol: float = 1e-4) -> np.ndarray:
    """Check an (N, K) array of probabilities: finite, in [0, 1], rows summing to 1."""
    probs = check_scores(probs, name)
    if (probs < 0).any() or (probs > 1).any():
        raise ValueError(f"{name} must lie in [0, 1]; got min {probs.min():.3g}, max {probs.max():.3g}")
    # A matrix-vector product is 2-4x faster than sum(axis=1) here and accumulates in float64.
    row_sums = probs @ np.ones(probs.shape[1], dtype=np.float64)
    worst = int(np.argmax(np.abs(row_sums - 1)))
    if abs(row_sums[worst] - 1) > atol:
        raise ValueError(f"{name} rows must sum to 1; row {worst} sums to {row_sums[worst]:.6g}")
    return probs


def check_labels(labels, n_samples: int, n_classes: int, name: str = "labels") -> np.ndarray:
    """Check integer class labels of length ``n_samples`` in ``[0, n_classes)``."""
    labels = as_numpy(labels, name)
    if labels.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {labels.shape}")
    if labels.shape[0] != n_samples:
        raise ValueError(f"{name} has {labels.shape[0]} entries but there are {n_samples} samples (shape mismatch)")
    if labels.size and not np.issubdtype(labels.dtype, np.integer):
        if np.issubdtype(labels.dtype, np.floating) and np.all(labels == np.round(labels)):
            labels = labels.astype(np.int64)
        else:
            raise ValueError(f"{name} must be integer class indices, got dtype {labels.dtype}")
    if labels.size and (labels.min() < 0 or labels.max() >= n_classes):
        bad = labels[(labels < 0) | (labels >= n_classes)][0]
        raise ValueError(f"{name} out of range: found {bad}, expected 0..{n_classes - 1}")
    return labels.astype(np.int64, copy=False)


def check_scores_and_labels(scores, labels, name: str = "logits"):
    """Check (N, K) scores and their N labels together."""
    scores = check_scores(scores, name)
    labels = check_labels(labels, scores.shape[0], scores.shape[1])
    return scores, labels
