r"""Confidence binning: the one place that decides which bin a score falls in.

Every binned metric (``ece``, ``mce``, ``classwise_ece``) and the reliability-diagram
table (``reliability_bins``) go through :func:`bin_statistics`, so the bin convention
below holds everywhere.

Bin convention (mukhoti2020 §2). With edges $0 = e_0 < \dots < e_M = 1$, bin $i$
(1-based) is the right-closed interval $(e_{i-1}, e_i]$; the first bin also holds
its lower edge, so a score of exactly 0 lands in bin 1 and a score of exactly 1 in
bin $M$. Every score in [0, 1] is in exactly one bin.

* ``binning="width"`` (ECE): $e_i = i/M$, computed as ``np.arange(M + 1) / M`` and
  then rounded to the scores' dtype, so a float32 score equal to ``float32(i/M)`` sits
  on edge $i$ and falls in bin $i$.
* ``binning="mass"`` (AdaECE of mukhoti2020 eq. 3; the "equal-mass ECE" of
  komisarenko2024): the edges are rank quantiles of the scores themselves. Sort the
  $N$ scores $s_{(0)} \le \dots \le s_{(N-1)}$ and cut after rank $r_i = \lceil i N / M \rceil$:
  $e_i = s_{(r_i - 1)}$ for $i = 1, \dots, M-1$. Without ties, the sample of rank $r$ is in
  bin $\lfloor r M / N \rfloor + 1$, so bin sizes differ by at most one and all $N$ samples are
  binned, whether or not $M$ divides $N$.

    Ties: samples with the same score are never split across bins. Because bins are
    right-closed intervals of score, a run of equal scores that straddles a cut stays
    whole in the lower bin (the one its lowest-ranked member falls in). When a run spans
    a whole bin, two edges coincide and the bin above is empty, so fewer than $M$ bins are
    non-empty; ``reliability_bins`` shows these as rows with ``count == 0`` and
    ``lower == upper``. Example: 30 % of confidences exactly 1.0 with $M = 15$ gives 11
    non-empty bins; bin 11 holds the tied 1.0s plus the few samples ranked just below
    them, bins 12-15 are empty. Splitting ties instead would make the metric depend on
    the order of the samples (which of two equal-confidence samples, one right and one
    wrong, goes up), so the result would not be a function of the data.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from focalcal.core.constraints import POSITIVE_INT, Options, validate_parameters

BINNINGS = ("width", "mass")
#: What a class's ``n_bins`` and ``binning`` parameters may hold (:mod:`focalcal.core.constraints`).
N_BINS, BINNING = POSITIVE_INT, Options(BINNINGS)


class BinStatistics(NamedTuple):
    """Per-bin sums, float64 (sums of float32 scores are accumulated in float64).

    Attributes:
        edges: float64 array, shape (M + 1,): bin ``i`` (0-based) is
            ``(edges[i], edges[i + 1]]``, and bin 0 also holds ``edges[0]``.
        count: int64 array, shape (M,): samples per bin.
        score_sum: float64 array, shape (M,): sum of the scores (confidences) in each bin.
        hit_sum: float64 array, shape (M,): number of hits (correct predictions) in each bin.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics.binning import bin_statistics
        >>> bins = bin_statistics(np.array([0.2, 0.7, 0.9]), np.array([False, True, True]), 2, "width")
        >>> bins.count.tolist(), bins.hit_sum.tolist()
        ([1, 2], [0.0, 2.0])
    """

    edges: np.ndarray
    count: np.ndarray
    score_sum: np.ndarray
    hit_sum: np.ndarray


def check_n_bins(n_bins: int, owner: str = "metrics") -> int:
    """``n_bins`` (see :data:`N_BINS`) as an int, or the validator's error naming ``owner``.

    Args:
        n_bins: The number of bins, a positive integer.
        owner: What the error message names as the parameter's owner (a class or a function).

    Returns:
        ``n_bins`` as a Python int.

    Raises:
        focalcal.core.constraints.InvalidParameterError: ``n_bins`` is not a positive integer
            (a ``ValueError`` and a ``TypeError``).

    Examples:
        >>> from focalcal.metrics.binning import check_n_bins
        >>> check_n_bins(15)
        15
    """
    validate_parameters({"n_bins": [N_BINS]}, {"n_bins": n_bins}, owner)
    return int(n_bins)


def check_binning(binning: str, owner: str = "metrics") -> str:
    """``binning`` (see :data:`BINNING`), or the validator's error naming ``owner``.

    Args:
        binning: ``"width"`` (equal-width bins) or ``"mass"`` (equal-mass bins).
        owner: What the error message names as the parameter's owner (a class or a function).

    Returns:
        ``binning`` itself.

    Raises:
        focalcal.core.constraints.InvalidParameterError: ``binning`` is not one of :data:`BINNINGS`
            (a ``ValueError`` and a ``TypeError``).

    Examples:
        >>> from focalcal.metrics.binning import check_binning
        >>> check_binning("mass")
        'mass'
    """
    validate_parameters({"binning": [BINNING]}, {"binning": binning}, owner)
    return binning


def top_label(probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Confidence (max probability, in the input dtype) and predicted class (first argmax).

    Args:
        probs: Checked probabilities, shape (N, K).

    Returns:
        ``(confidence, predicted)``: the top probability of each row, shape (N,), in the dtype
        of ``probs``, and its class index, int64 of shape (N,); ties go to the lower index.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics.binning import top_label
        >>> confidence, predicted = top_label(np.array([[0.2, 0.8], [0.5, 0.5]]))
        >>> confidence.tolist(), predicted.tolist()
        ([0.8, 0.5], [1, 0])
    """
    predicted = probs.argmax(axis=1)
    confidence = probs[np.arange(probs.shape[0]), predicted]
    return confidence, predicted


def bin_edges(scores: np.ndarray, n_bins: int, binning: str) -> np.ndarray:
    r"""Edges $e_0, \dots, e_M$ in the dtype of ``scores`` (see the module docstring).

    Args:
        scores: Scores in [0, 1], shape (N,); equal-mass edges are their rank quantiles.
        n_bins: The number of bins $M$.
        binning: ``"width"`` ($e_i = i/M$) or ``"mass"`` (rank quantiles of ``scores``).

    Returns:
        The edges, shape (M + 1,), in the dtype of ``scores``, from 0 to 1; with tied scores
        equal-mass edges may coincide.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics.binning import bin_edges
        >>> scores = np.array([0.1, 0.2, 0.3, 0.9])
        >>> bin_edges(scores, 4, "width").tolist()
        [0.0, 0.25, 0.5, 0.75, 1.0]
        >>> bin_edges(scores, 2, "mass").tolist()
        [0.0, 0.2, 1.0]
    """
    if binning == "width":
        return (np.arange(n_bins + 1) / n_bins).astype(scores.dtype)
    inner = np.sort(scores)[mass_cut_ranks(scores.shape[0], n_bins) - 1]
    return np.concatenate([np.zeros(1, scores.dtype), inner, np.ones(1, scores.dtype)])


def mass_cut_ranks(n_samples: int, n_bins: int) -> np.ndarray:
    r"""The equal-mass cuts $r_i = \lceil i N / M \rceil$, $i = 1, \dots, M-1$.

    Edge $i$ is the score of rank $r_i$ (1-based) in sorted order. Exact integer arithmetic.

    Args:
        n_samples: The number of samples $N$.
        n_bins: The number of bins $M$.

    Returns:
        The ranks $r_1, \dots, r_{M-1}$, an integer array of shape (M - 1,).

    Examples:
        >>> from focalcal.metrics.binning import mass_cut_ranks
        >>> mass_cut_ranks(10, 3).tolist()
        [4, 7]
    """
    return -(-np.arange(1, n_bins) * n_samples // n_bins)


def bin_statistics(scores: np.ndarray, hits: np.ndarray, n_bins: int, binning: str) -> BinStatistics:
    """Bin 1-D ``scores`` in [0, 1] and sum scores and boolean ``hits`` per bin.

    Vectorised: one sort (equal-mass only), one ``searchsorted`` and three ``bincount``.

    Args:
        scores: Scores (top-label confidences, or one class's probabilities) in [0, 1], shape (N,).
        hits: Whether each sample is a hit (its prediction is right), boolean of shape (N,).
        n_bins: The number of bins $M$.
        binning: ``"width"`` or ``"mass"`` (see the module docstring).

    Returns:
        The bins' edges, counts and sums, each of length M (edges M + 1).

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics.binning import bin_statistics
        >>> scores, hits = np.array([0.1, 0.4, 0.6, 0.9]), np.array([True, False, True, True])
        >>> bins = bin_statistics(scores, hits, 2, "width")
        >>> bins.count.tolist(), bins.score_sum.round(4).tolist(), bins.hit_sum.tolist()
        ([2, 2], [0.5, 1.5], [1.0, 2.0])
    """
    edges = bin_edges(scores, n_bins, binning)
    # side="left" counts the inner edges strictly below a score: right-closed bins.
    index = np.searchsorted(edges[1:-1], scores, side="left")
    return BinStatistics(
        edges=edges.astype(np.float64),
        count=np.bincount(index, minlength=n_bins),
        score_sum=np.bincount(index, weights=scores, minlength=n_bins),
        hit_sum=np.bincount(index, weights=hits, minlength=n_bins),
    )
