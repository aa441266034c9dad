"""Top-label ECE for many candidate calibrations of one validation set at once.

Grid searches (temperature scaling by ECE, focal temperature scaling) score hundreds or
thousands of confidence vectors of the same N samples. ``ece_grid`` scores them all at
once instead of one :func:`focalcal.metrics.ece` call each, and returns what ``ece``
returns for each row: the same bin edges and the same right-closed membership. Equal-width
bins are summed with one numpy bincount, in ``ece``'s order (bit for bit); equal-mass bins
(one ``correct`` for all rows) from sorted rows and cumulative sums, which agree with
``ece`` to float64 rounding (a relative 1e-12 in tests) at a third of the time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from focalcal.core.validation import as_numpy
from focalcal.metrics.binning import bin_edges, check_binning, check_n_bins, mass_cut_ranks

if TYPE_CHECKING:
    from focalcal.core.types import ArrayLike


def ece_grid(confidences: ArrayLike, correct: ArrayLike, n_bins: int = 15, binning: str = "width") -> np.ndarray:
    """ECE of each row of ``confidences`` against ``correct``.

    Row g gives the same value as ``ece(probs_g, labels, n_bins, binning)`` for
    probabilities ``probs_g`` whose top-label confidences are ``confidences[g]`` and whose
    top-label predictions are right where ``correct`` (row g of it, if 2-D) is True.
    Confidences keep their dtype (float32 edges for float32 input, as in ``ece``).

    Args:
        confidences: Top-label confidences of G candidate calibrations of the same N samples,
            floating point in [0, 1], shape (G, N).
        correct: Whether each top-label prediction is right, boolean, shape (N,) (one for all
            rows) or (G, N).
        n_bins: The number of bins, as in :func:`focalcal.metrics.ece`.
        binning: ``"width"`` or ``"mass"``, as in :func:`focalcal.metrics.ece`.

    Returns:
        float64 array of shape (G,): each row's ECE, a fraction in [0, 1].

    Raises:
        ValueError: ``confidences`` is not a non-empty 2-D floating-point array of finite
            values in [0, 1], ``correct`` has neither shape, or ``n_bins``/``binning`` are invalid.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics.batched import ece_grid
        >>> confidences = np.array([[0.9, 0.8, 0.7, 0.6], [0.6, 0.6, 0.6, 0.6]])
        >>> correct = np.array([True, False, True, True])
        >>> ece_grid(confidences, correct, n_bins=5).round(4).tolist()
        [0.25, 0.15]
    """
    score_sum, hit_sum, _ = binned_grid(confidences, correct, n_bins, binning)
    n_samples = np.shape(confidences)[1]
    return np.abs(score_sum - hit_sum).sum(axis=1) / n_samples


def binned_grid(confidences: ArrayLike, correct: ArrayLike, n_bins: int = 15, binning: str = "width", *,
                counts: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The top-label bins of every row of ``confidences``.

    As :func:`~focalcal.metrics.binning.bin_statistics` makes them for each row.

    Args:
        confidences: Top-label confidences, shape (G, N), as for :func:`ece_grid`.
        correct: Whether each prediction is right, shape (N,) or (G, N), as for :func:`ece_grid`.
        n_bins: The number of bins M.
        binning: ``"width"`` or ``"mass"``.
        counts: Whether to count the samples per bin too (one more pass).

    Returns:
        ``(score_sum, hit_sum, count)``, each of shape (G, M): float64 sums of the
        confidences and of the hits per bin, and the int64 counts (None unless ``counts``).

    Raises:
        ValueError: Malformed input, as for :func:`ece_grid`.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics.batched import binned_grid
        >>> confidences = np.array([[0.9, 0.8, 0.7, 0.6]])
        >>> score_sum, hit_sum, count = binned_grid(confidences, np.array([True, False, True, True]), 2, counts=True)
        >>> score_sum.round(4).tolist(), hit_sum.tolist(), count.tolist()
        ([[0.0, 3.0]], [[0.0, 3.0]], [[0, 4]])
    """
    n_bins, binning = check_n_bins(n_bins), check_binning(binning)
    confidences = as_numpy(confidences, "confidences")
    correct = as_numpy(correct, "correct")
    if confidences.ndim != 2 or confidences.shape[1] == 0:
        raise ValueError(f"confidences must be a non-empty 2-D (n_candidates, n_samples) array, got shape {confidences.shape}")
    if not np.issubdtype(confidences.dtype, np.floating):
        raise ValueError(f"confidences must be floating point, got dtype {confidences.dtype}")
    if not np.all(np.isfinite(confidences)) or confidences.min() < 0 or confidences.max() > 1:
        raise ValueError("confidences must be finite and lie in [0, 1]")
    n_candidates, n_samples = confidences.shape
    if correct.shape not in ((n_samples,), confidences.shape):
        raise ValueError(f"correct must have shape ({n_samples},) or {confidences.shape}, got {correct.shape}")
    if binning == "mass" and correct.ndim == 1:
        return _mass_binned_sorted(confidences, correct.astype(bool), n_bins, counts)
    hits = np.broadcast_to(correct.astype(bool), confidences.shape)
    if binning == "width":
        inner_edges = bin_edges(confidences[0], n_bins, binning)[1:-1]
        index = np.searchsorted(inner_edges, confidences, side="left")
    else:
        # Each row has its own quantile edges, so each row gets its own searchsorted.
        index = np.empty(confidences.shape, dtype=np.int64)
        for row, scores in enumerate(confidences):
            index[row] = np.searchsorted(bin_edges(scores, n_bins, binning)[1:-1], scores, side="left")

    flat_bins = (index + n_bins * np.arange(n_candidates)[:, None]).ravel()
    size = n_candidates * n_bins
    count = np.bincount(flat_bins, minlength=size).reshape(n_candidates, n_bins) if counts else None
    score_sum = np.bincount(flat_bins, weights=confidences.ravel(), minlength=size).reshape(n_candidates, n_bins)
    hit_sum = np.bincount(flat_bins, weights=hits.ravel(), minlength=size).reshape(n_candidates, n_bins)
    return score_sum, hit_sum, count


def _mass_binned_sorted(confidences: np.ndarray, correct: np.ndarray, n_bins: int, counts: bool):
    """Equal-mass ``binned_grid`` with one ``correct`` for every row, from sorted rows: no
    per-sample bin index. Each row is sorted once (its edges are order statistics, as in
    :func:`~focalcal.metrics.binning.bin_edges`); a bin's score sum is a difference of cumulative
    sums at ``count(score <= edge)``, which keeps tied scores in the lower bin as the
    right-closed rule does; the right rows are sorted once more to count their hits so. Rows go in blocks
    whose sorted copy and float64 cumulative sums stay in cache (one (G, N) float64 array would
    be written and read back once per row)."""
    n_candidates, n_samples = confidences.shape
    ranks = mass_cut_ranks(n_samples, n_bins) - 1
    hits = confidences[:, correct]
    below = np.empty((n_candidates, n_bins + 1), dtype=np.int64)  # scores <= each edge, 0 and N at the ends
    hits_below = np.zeros_like(below)
    below[:, 0], below[:, -1] = 0, n_samples
    hits_below[:, -1] = int(correct.sum())
    score_below = np.empty((n_candidates, n_bins + 1))
    step = max(1, _BLOCK_ELEMENTS // n_samples)
    cumulative = np.zeros((min(step, n_candidates), n_samples + 1))
    for start in range(0, n_candidates, step):
        rows = slice(start, min(start + step, n_candidates))
        ordered = np.sort(confidences[rows], axis=1)
        edges = ordered[:, ranks]
        hits_ordered = np.sort(hits[rows], axis=1)
        for row, scores, hit_scores, row_edges in zip(range(start, rows.stop), ordered, hits_ordered, edges):
            below[row, 1:-1] = np.searchsorted(scores, row_edges, side="right")
            hits_below[row, 1:-1] = np.searchsorted(hit_scores, row_edges, side="right")
        block = cumulative[: ordered.shape[0]]
        np.cumsum(ordered, axis=1, dtype=np.float64, out=block[:, 1:])
        score_below[rows] = np.take_along_axis(block, below[rows], axis=1)
    return np.diff(score_below, axis=1), np.diff(hits_below, axis=1).astype(np.float64), \
        (np.diff(below, axis=1) if counts else None)


# Rows of a block in _mass_binned_sorted: this many scores (their float64 sums take 8 bytes each).
_BLOCK_ELEMENTS = 1 << 16
