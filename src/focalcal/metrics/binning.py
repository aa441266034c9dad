"""Confidence binning: the one place that decides which bin a score falls in.

Every binned metric (``ece``, ``mce``, ``classwise_ece``) and the reliability-diagram
table (``reliability_bins``) go through :func:`bin_statistics`, so the bin convention
below holds everywhere.

Bin convention (mukhoti2020 §2). With edges ``e_0 = 0 < ... < e_M = 1`` bin ``i``
(1-based) is the right-closed interval ``(e_{i-1}, e_i]``; the first bin also holds
its lower edge, so a score of exactly 0 lands in bin 1 and a score of exactly 1 in
bin M. Every score in [0, 1] is in exactly one bin.

* ``binning="width"`` (ECE): ``e_i = i/M``, computed as ``np.arange(M + 1) / M`` and
  then rounded to the scores' dtype, so a float32 score equal to ``float32(i/M)`` sits
  on edge i and falls in bin i.
* ``binning="mass"`` (AdaECE of mukhoti2020 eq. 3; the "equal-mass ECE" of
  komisarenko2024): the edges are rank quantiles of the scores themselves. Sort the
  N scores ``s_(0) <= ... <= s_(N-1)`` and cut after rank ``r_i = ceil(i N / M)``:
  ``e_i = s_(r_i - 1)`` for ``i = 1 .. M-1``. Without ties, the sample of rank r is in
  bin ``floor(r M / N) + 1``, so bin sizes differ by at most one and all N samples are
  binned, whether or not M divides N.

  Ties: samples with the same score are never split across bins. Because bins are
  right-closed intervals of score, a run of equal scores that straddles a cut stays
  whole in the lower bin (the one its lowest-ranked member falls in). When a run spans
  a whole bin, two edges coincide and the bin above is empty, so fewer than M bins are
  non-empty; ``reliability_bins`` shows these as rows with ``count == 0`` and
  ``lower == upper``. Example: 30 % of confidences exactly 1.0 with M = 15 gives 11
  non-empty bins; bin 11 holds the tied 1.0s plus the few samples ranked just below
  them, bins 12-15 are empty. Splitting ties instead would make the metric depend on
  the order of the samples (which of two equal-confidence samples, one right and one
  wrong, goes up), so the result would not be a function of the data.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from focalcal._constraints import POSITIVE_INT, Options, validate_parameters

BINNINGS = ("width", "mass")
#: What a class's ``n_bins`` and ``binning`` parameters may hold (:mod:`focalcal._constraints`).
N_BINS, BINNING = POSITIVE_INT, Options(BINNINGS)


class BinStatistics(NamedTuple):
    """Per-bin sums, float64 (sums of float32 scores are accumulated in float64)."""

    edges: np.ndarray  # (M + 1,) float64: bin i is (edges[i], edges[i + 1]], bin 0 also holds edges[0]
    count: np.ndarray  # (M,) int64: samples per bin
    score_sum: np.ndarray  # (M,) float64: sum of the scores (confidences) in each bin
    hit_sum: np.ndarray  # (M,) float64: number of hits (correct predictions) in each bin


def check_n_bins(n_bins, owner: str = "metrics") -> int:
    """``n_bins`` (see :data:`N_BINS`) as an int, or the validator's error naming ``owner``."""
    validate_parameters({"n_bins": [N_BINS]}, {"n_bins": n_bins}, owner)
    return int(n_bins)


def check_binning(binning, owner: str = "metrics") -> str:
    """``binning`` (see :data:`BINNING`), or the validator's error naming ``owner``."""
    validate_parameters({"binning": [BINNING]}, {"binning": binning}, owner)
    return binning


def top_label(probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Confidence (max probability, in the input dtype) and predicted class (first argmax)."""
    predicted = probs.argmax(axis=1)
    confidence = probs[np.arange(probs.shape[0]), predicted]
    return confidence, predicted


def bin_edges(scores: np.ndarray, n_bins: int, binning: str) -> np.ndarray:
    """Edges ``e_0 .. e_M`` in the dtype of ``scores`` (see the module docstring)."""
    if binning == "width":
        return (np.arange(n_bins + 1) / n_bins).astype(scores.dtype)
    inner = np.sort(scores)[mass_cut_ranks(scores.shape[0], n_bins) - 1]
    return np.concatenate([np.zeros(1, scores.dtype), inner, np.ones(1, scores.dtype)])


def mass_cut_ranks(n_samples: int, n_bins: int) -> np.ndarray:
    """The equal-mass cuts r_i = ceil(i N / M), i = 1 .. M-1: edge i is the score of rank r_i
    (1-based) in sorted order. Exact integer arithmetic."""
    return -(-np.arange(1, n_bins) * n_samples // n_bins)


def bin_statistics(scores: np.ndarray, hits: np.ndarray, n_bins: int, binning: str) -> BinStatistics:
    """Bin 1-D ``scores`` in [0, 1] and sum scores and boolean ``hits`` per bin.

    Vectorised: one sort (equal-mass only), one ``searchsorted`` and three ``bincount``.
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
