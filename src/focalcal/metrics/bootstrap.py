"""Bootstrap confidence intervals of the test metrics, over test samples.

A metric measured on N test samples is one draw; its spread over resamples of those N (with
replacement) gives a percentile interval (Efron & Tibshirani 1993, ch. 13). Each resample's
value is exactly the library's metric on ``probs[index], labels[index]`` — same bins, same
ties — but computed for all resamples at once:

* ECE, AdaECE, MCE: the samples are sorted by confidence once; a resample is a multiplicity
  per sample, and its bins' sums are differences of cumulative sums in that order
  (equal-mass edges are re-cut per resample, from its cumulative counts);
* classwise ECE (equal-width bins, which do not depend on the resample): a resample is a
  multiplicity per sample, so its per-(class, bin) sums are one sparse product;
* NLL, Brier, error, top-5 error: means of per-sample losses, weighted by multiplicity.

Pass the same ``indices`` to every calibrator of one model, so their intervals are paired, and
the same :func:`resample_weights` of them, so their multiplicities are counted once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from focalcal.core.validation import check_labels, check_probs
from focalcal.metrics.binning import bin_edges, check_n_bins, mass_cut_ranks, top_label

if TYPE_CHECKING:
    from focalcal.core.types import ArrayLike

METRICS = ("ece", "adaece", "mce", "classwise_ece", "nll", "brier", "error", "top5_error")


@dataclass(frozen=True)
class Interval:
    r"""A metric on the whole test set (``estimate``) and its percentile bootstrap interval.

    Attributes:
        estimate: The metric on the whole test set.
        low: The interval's lower end, the $(1 - \text{level})/2$ quantile of the resamples' values.
        high: The interval's upper end, the $(1 + \text{level})/2$ quantile of the resamples' values.

    Examples:
        >>> from focalcal.metrics.bootstrap import Interval
        >>> Interval(estimate=0.05, low=0.03, high=0.08).high
        0.08
    """

    estimate: float
    low: float
    high: float


def bootstrap_indices(n_samples: int, n_resamples: int = 200, seed: int = 0) -> np.ndarray:
    """Sample indices drawn with replacement, reproducibly from ``seed``.

    Args:
        n_samples: The number of test samples N.
        n_resamples: The number of resamples B, an integer >= 2.
        seed: The seed of numpy's ``default_rng``: the same seed gives the same resamples.

    Returns:
        int64 array of shape (n_resamples, n_samples): row b is resample b's sample indices.

    Raises:
        ValueError: ``n_resamples`` is not an integer >= 2.

    Examples:
        >>> from focalcal.metrics.bootstrap import bootstrap_indices
        >>> indices = bootstrap_indices(5, n_resamples=3, seed=0)
        >>> indices.shape, bool((indices == bootstrap_indices(5, n_resamples=3, seed=0)).all())
        ((3, 5), True)
    """
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 2:
        raise ValueError(f"n_resamples must be an integer >= 2, got {n_resamples!r}")
    return np.random.default_rng(seed).integers(0, n_samples, size=(n_resamples, n_samples))


def resample_weights(indices: ArrayLike, n_samples: int) -> np.ndarray:
    """How many times each resample of ``indices`` draws each sample.

    Args:
        indices: Sample indices in 0 .. N-1, shape (n_resamples, N) (:func:`bootstrap_indices`).
        n_samples: The number of test samples N.

    Returns:
        float64 array of shape (n_resamples, N) of whole numbers; each row sums to N.

    Raises:
        ValueError: ``indices`` is not (n_resamples, N) or holds an index outside 0 .. N-1.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics.bootstrap import resample_weights
        >>> resample_weights(np.array([[0, 0, 2], [1, 2, 2]]), 3).tolist()
        [[2.0, 0.0, 1.0], [0.0, 1.0, 2.0]]
    """
    indices = np.asarray(indices)
    if indices.ndim != 2 or indices.shape[1] != n_samples or indices.min() < 0 or indices.max() >= n_samples:
        raise ValueError(f"indices must be (n_resamples, {n_samples}) sample indices, got shape {indices.shape}")
    return _multiplicities(indices, n_samples)


def resampled_metrics(probs: ArrayLike, labels: ArrayLike, indices: ArrayLike, n_bins: int = 15, *,
                      weights: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Each metric of :data:`METRICS` on every resample ``probs[indices[b]], labels[indices[b]]``.

    ``ece``, ``mce`` use equal-width bins, ``adaece`` equal-mass bins, ``classwise_ece``
    equal-width bins, each with ``n_bins`` bins, exactly as the library's metrics bin them.

    Args:
        probs: Predicted probabilities, shape (N, K), rows summing to 1 (numpy or torch).
        labels: True classes, integers in 0 .. K-1, shape (N,).
        indices: Sample indices in 0 .. N-1, shape (B, N) (:func:`bootstrap_indices`).
        n_bins: The number of bins of the binned metrics (15, as in :func:`focalcal.metrics.ece`).
        weights: ``resample_weights(indices, N)``, when the caller has it already (shared by
            the calibrators of one model); None computes it.

    Returns:
        Metric name -> float64 array of shape (B,), one value per resample, fractions (NLL in
        nats); ``top5_error`` only with 5 or more classes.

    Raises:
        ValueError: Malformed ``probs``, ``labels``, ``indices`` or ``n_bins``, or ``weights``
            not the multiplicities of N draws in the shape of ``indices``.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics.bootstrap import bootstrap_indices, resampled_metrics
        >>> probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]])
        >>> values = resampled_metrics(probs, np.array([0, 1, 1, 1]), bootstrap_indices(4, 50))
        >>> sorted(values), values["ece"].shape
        (['adaece', 'brier', 'classwise_ece', 'ece', 'error', 'mce', 'nll'], (50,))
    """
    probs = check_probs(probs).astype(np.float64, copy=False)
    labels = check_labels(labels, probs.shape[0], probs.shape[1])
    n_bins = check_n_bins(n_bins)
    weights = _checked_weights(weights, indices, probs.shape[0])
    return _resampled(probs, labels, weights, n_bins, _per_sample_losses(probs, labels))[0]


def _resampled(probs: np.ndarray, labels: np.ndarray, weights: np.ndarray, n_bins: int,
               losses: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], float]:
    """``resampled_metrics`` of checked float64 input and its per-sample ``losses``, and the
    whole sample's classwise ECE (the same computation with every multiplicity 1)."""
    n_samples = probs.shape[0]
    confidence, predicted = top_label(probs)
    correct = predicted == labels
    values = {}
    bins = _top_label_bins(confidence, correct, weights, n_bins)
    for name, binning in (("ece", "width"), ("adaece", "mass")):
        score_sum, hit_sum, count = bins[binning]
        gap = np.abs(score_sum - hit_sum)
        values[name] = gap.sum(axis=1) / n_samples
        if name == "ece":
            with np.errstate(invalid="ignore", divide="ignore"):
                values["mce"] = np.where(count > 0, gap / count, -np.inf).max(axis=1)
    values["classwise_ece"], whole = _classwise_ece(probs, labels, (weights, np.ones((1, n_samples))), n_bins)
    by_column = np.asfortranarray(weights)  # one copy for all the means (see _weighted_means)
    for name, loss in losses.items():
        values[name] = _weighted_means(by_column, loss)
    return values, float(whole[0])


def metrics_with_intervals(probs: ArrayLike, labels: ArrayLike, indices: ArrayLike, n_bins: int = 15,
                           level: float = 0.95, *, weights: np.ndarray | None = None) -> dict[str, Interval]:
    """Each metric on the whole test set with its ``level`` percentile interval over ``indices``.

    The interval's ends are the resamples' ``(1 - level)/2`` and ``(1 + level)/2`` quantiles,
    without interpolation (an infinite NLL stays infinite).

    Args:
        probs: Predicted probabilities, shape (N, K), rows summing to 1 (numpy or torch).
        labels: True classes, integers in 0 .. K-1, shape (N,).
        indices: Sample indices in 0 .. N-1, shape (B, N) (:func:`bootstrap_indices`).
        n_bins: The number of bins of the binned metrics (15, as in :func:`focalcal.metrics.ece`).
        level: The interval's coverage, in (0, 1) (0.95 for a 95 % interval).
        weights: As for :func:`resampled_metrics`.

    Returns:
        Metric name (:data:`METRICS`; ``top5_error`` only with 5 or more classes) -> its
        :class:`Interval`, fractions (NLL in nats).

    Raises:
        ValueError: ``level`` outside (0, 1), or malformed input as for :func:`resampled_metrics`.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics.bootstrap import bootstrap_indices, metrics_with_intervals
        >>> probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]])
        >>> intervals = metrics_with_intervals(probs, np.array([0, 1, 1, 1]), bootstrap_indices(4, 50))
        >>> error = intervals["error"]
        >>> error.estimate, error.low <= error.estimate <= error.high
        (0.25, True)
    """
    from focalcal import metrics

    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    probs = check_probs(probs).astype(np.float64, copy=False)
    labels = check_labels(labels, probs.shape[0], probs.shape[1])
    n_bins = check_n_bins(n_bins)
    weights = _checked_weights(weights, indices, probs.shape[0])
    losses = _per_sample_losses(probs, labels)
    # classwise ECE: the resamples' own computation with every multiplicity 1, so estimate and interval share it
    replicates, whole_classwise = _resampled(probs, labels, weights, n_bins, losses)
    estimates = {
        "ece": metrics.ece(probs, labels, n_bins, "width"),
        "adaece": metrics.ece(probs, labels, n_bins, "mass"),
        "mce": metrics.mce(probs, labels, n_bins, "width"),
        "classwise_ece": whole_classwise,
        # the metrics' own means of the same per-sample losses (nll: −mean log p_y = mean(−log p_y) exactly)
        **{name: float(np.mean(losses[name])) for name in ("nll", "brier", "error", "top5_error") if name in losses},
    }
    tail = (1 - level) / 2
    intervals = {}
    for name, estimate in estimates.items():
        low, high = np.quantile(replicates[name], [tail, 1 - tail], method="inverted_cdf")  # no interpolation: inf stays inf
        intervals[name] = Interval(float(estimate), float(low), float(high))
    return intervals


def _checked_weights(weights: np.ndarray | None, indices: np.ndarray, n_samples: int) -> np.ndarray:
    """``weights``, or :func:`resample_weights` of ``indices`` where None; refused unless each row
    is the multiplicities of n_samples draws: whole numbers >= 0 that sum to n_samples (their
    running sums are counted in integers, which that bound keeps from overflowing)."""
    if weights is None:
        return resample_weights(indices, n_samples)  # (n_resamples, n_samples)
    if weights.shape != np.shape(indices):
        raise ValueError(f"weights must have the shape of indices {np.shape(indices)}, got {weights.shape}")
    if weights.size and (weights.min() < 0 or not np.array_equal(weights, np.trunc(weights))
                         or (weights.sum(axis=1) != n_samples).any()):
        raise ValueError(f"weights must be multiplicities of {n_samples} draws: whole numbers >= 0, each row "
                         f"summing to {n_samples} (resample_weights(indices, n_samples))")
    return weights


def _multiplicities(indices: np.ndarray, n_samples: int) -> np.ndarray:
    rows = np.arange(indices.shape[0])[:, None] * n_samples
    counts = np.bincount((indices + rows).ravel(), minlength=indices.shape[0] * n_samples)
    return counts.reshape(indices.shape[0], n_samples).astype(np.float64)


def _top_label_bins(confidence: np.ndarray, correct: np.ndarray, weights: np.ndarray, n_bins: int) -> dict:
    """binning -> (score_sum, hit_sum, count), each (n_resamples, n_bins): the top-label bins of
    every resample, equal-width and equal-mass, as ``bin_statistics`` makes them for
    ``confidence[index]``. The samples are sorted once; a resample is then its multiplicities
    in that order, and a bin's sums are differences of cumulative sums at the last sample whose
    score is <= the bin's upper edge (the whole run of tied scores, as the right-closed rule
    puts it). Equal-mass edges are the resample's order statistics: the first sorted sample
    whose cumulative multiplicity reaches rank ceil(i N / M)."""
    n_resamples, n_samples = weights.shape
    order = np.argsort(confidence, kind="stable")
    scores = confidence[order]
    # Multiplicities are whole numbers: their running counts and hits are summed in integers (exact,
    # and several times faster than float64 sums); the scores in float64, in sample order. np.take keeps rows contiguous, so each running sum walks memory in order.
    whole = np.int32 if n_samples < 2**31 - 1 else np.int64  # running counts reach n_samples (_checked_weights)
    in_order = np.take(weights.astype(whole), order, axis=1)
    count_sums, hit_sums = (np.zeros((n_resamples, n_samples + 1), whole) for _ in range(2))
    np.cumsum(in_order, axis=1, out=count_sums[:, 1:])
    np.multiply(in_order, correct[order], out=hit_sums[:, 1:])
    np.cumsum(hit_sums[:, 1:], axis=1, out=hit_sums[:, 1:])
    score_sums = np.zeros((n_resamples, n_samples + 1))
    np.multiply(in_order, scores, out=score_sums[:, 1:])
    np.cumsum(score_sums[:, 1:], axis=1, out=score_sums[:, 1:])
    inner_edges = bin_edges(scores, n_bins, "width")[1:-1]
    run_ends = np.append(np.flatnonzero(scores[1:] != scores[:-1]), n_samples - 1)
    last_of_run = np.repeat(run_ends, np.diff(run_ends, prepend=-1))  # sorted position -> end of its tie run
    ranks = mass_cut_ranks(n_samples, n_bins)
    below = {  # per resample, how many sorted samples lie at or below each inner edge
        "width": np.broadcast_to(np.searchsorted(scores, inner_edges, side="right"), (n_resamples, n_bins - 1)),
        "mass": last_of_run[_searchsorted_rows(count_sums[:, 1:], ranks, n_samples)] + 1,
    }
    bins = {}
    for binning, inner in below.items():
        ends = np.concatenate([np.zeros((n_resamples, 1), np.int64), inner, np.full((n_resamples, 1), n_samples)],
                              axis=1)
        count, score_sum, hit_sum = (np.diff(np.take_along_axis(sums, ends, axis=1), axis=1).astype(np.float64)
                                     for sums in (count_sums, score_sums, hit_sums))
        bins[binning] = (score_sum, hit_sum, count)
    return bins


def _searchsorted_rows(cumulative_counts: np.ndarray, ranks: np.ndarray, n_samples: int) -> np.ndarray:
    """``np.searchsorted(row, ranks, side="left")`` for every row of ``cumulative_counts`` (B, N),
    non-decreasing rows of values in [0, N], in one call: row b is shifted by b (N + 1), so the
    flattened rows stay sorted and each row's ranks land in their own row."""
    n_rows = cumulative_counts.shape[0]
    shift = np.arange(n_rows)[:, None] * (n_samples + 1)
    found = np.searchsorted((cumulative_counts + shift).ravel(), (ranks[None, :] + shift).ravel(), side="left")
    return found.reshape(n_rows, len(ranks)) - np.arange(n_rows)[:, None] * n_samples


def _classwise_ece(probs: np.ndarray, labels: np.ndarray, all_weights: tuple[np.ndarray, ...],
                   n_bins: int) -> list[np.ndarray]:
    """Classwise ECE (equal-width bins) of every resample given by its multiplicities, for each
    of ``all_weights`` (the bins and cells are found once for all).

    A (class, bin) cell's sum is Σ_i w_i (p_ik − [y_i = k]) over the samples in the bin. Bin 0 is
    taken as each class's total minus its other bins, so only the cells of the other bins are
    summed one by one: with many classes most probabilities lie in bin 0, and at most N · (bins − 1)
    such cells exist (100 × 10,000 logits: ~10³ cells instead of 1.5 · 10⁵ per resample)."""
    from scipy import sparse

    n_samples, n_classes = probs.shape
    inner_edges = bin_edges(probs[:, 0], n_bins, "width")[1:-1]
    bins = np.searchsorted(inner_edges, probs, side="left")  # right-closed, as bin_statistics
    residual = probs.copy()
    residual[np.arange(n_samples), labels] -= 1.0
    samples, classes = np.nonzero(bins > 0)
    cells, cell_of = np.unique(classes * n_bins + bins[samples, classes], return_inverse=True)
    per_cell = sparse.csr_matrix((residual[samples, classes], (samples, cell_of)), shape=(n_samples, len(cells)))
    class_of_cell = sparse.csr_matrix((np.ones(len(cells)), (np.arange(len(cells)), cells // n_bins)),
                                      shape=(len(cells), n_classes))
    eces = []
    for weights in all_weights:
        totals = weights @ residual  # (n_resamples, K): every bin of each class
        cell_sums = np.asarray((per_cell.T @ weights.T).T)  # (n_resamples, cells outside bin 0)
        outside_bin_0 = np.asarray((class_of_cell.T @ cell_sums.T).T)  # (n_resamples, K)
        gaps = np.abs(totals - outside_bin_0).sum(axis=1) + np.abs(cell_sums).sum(axis=1)
        eces.append(gaps / (n_samples * n_classes))
    return eces


def _per_sample_losses(probs: np.ndarray, labels: np.ndarray) -> dict[str, np.ndarray]:
    from focalcal.metrics.classification import brier_terms, label_rank

    with np.errstate(divide="ignore"):
        losses = {"nll": -np.log(probs[np.arange(probs.shape[0]), labels]), "brier": brier_terms(probs, labels),
                  "error": (probs.argmax(axis=1) != labels).astype(np.float64)}
    if probs.shape[1] >= 5:
        losses["top5_error"] = (label_rank(probs, labels) >= 5).astype(np.float64)
    return losses


def _weighted_means(weights: np.ndarray, losses: np.ndarray) -> np.ndarray:
    """Per resample, the mean of ``losses`` (N,) under multiplicities ``weights`` (B, N); a
    resample holding a sample with an infinite loss (a true-class probability of 0) has mean inf.
    Pass ``weights`` column-major, as ``weights[:, finite]`` lays them out: BLAS then sums each
    mean in one order whether or not a loss is infinite."""
    finite = np.isfinite(losses)
    if finite.all():  # the common case, without copying the (B, N) weights
        return weights @ losses / weights.shape[1]
    means = weights[:, finite] @ losses[finite] / weights.shape[1]
    means[(weights[:, ~finite] > 0).any(axis=1)] = np.inf
    return means
