"""Unbinned metrics: NLL, Brier score, error, top-k error, KL to a known posterior, S99.

All take (N, K) probabilities (numpy or torch) and N integer labels, return means over
samples as fractions (not %), and keep float32 inputs in float32 for per-sample work
while accumulating means in float64.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from focalcal._validation import check_labels, check_probs, check_scores
from focalcal.metrics.binning import top_label


def _probs_and_labels(probs, labels, name: str = "probs"):
    probs = check_probs(probs, name)
    return probs, check_labels(labels, probs.shape[0], probs.shape[1])


def _true_class(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return scores[np.arange(scores.shape[0]), labels]


def nll(probs, labels) -> float:
    """Mean negative log-likelihood ``-mean_n log p_n[y_n]`` (natural log).

    A true-class probability of exactly 0 gives ``inf``, the honest value; nothing is
    clamped. Softmax probabilities underflow to 0 long before the logits are extreme,
    so prefer :func:`nll_from_logits` when logits are at hand.
    """
    probs, labels = _probs_and_labels(probs, labels)
    with np.errstate(divide="ignore"):
        return float(-np.mean(np.log(_true_class(probs, labels)), dtype=np.float64))


def nll_from_logits(logits, labels) -> float:
    """Mean cross-entropy computed from logits, exact where softmax would underflow.

    Per sample, with ``m = max_k z_k`` and ``e_k = exp(z_k - m)``:
    ``-log softmax(z)_y = (m - z_y) + log1p(sum_{k != argmax} e_k)``. Dropping the
    argmax term (which is 1) before ``log1p`` keeps tiny losses of confident correct
    predictions accurate, even in float32; logits of +-1e4 are fine.
    """
    logits = check_scores(logits, "logits")
    labels = check_labels(labels, logits.shape[0], logits.shape[1])
    top = logits.argmax(axis=1)
    rows = np.arange(logits.shape[0])
    shifted = np.exp(logits - logits[rows, top][:, None])
    shifted[rows, top] = 0.0
    loss = (logits[rows, top] - logits[rows, labels]) + np.log1p(shifted.sum(axis=1))
    return float(np.mean(loss, dtype=np.float64))


def brier(probs, labels) -> float:
    """Brier score (Brier 1950, as in mukhoti2020): ``mean_n sum_k (p_nk - 1[y_n = k])^2``.

    Summed over classes, averaged over samples, so it lies in [0, 2].
    """
    probs, labels = _probs_and_labels(probs, labels)
    return float(np.mean(brier_terms(probs, labels)))


def brier_terms(probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Each sample's ``sum_k (p_k - 1[y = k])^2`` of checked ``probs`` and ``labels`` (float64)."""
    residual = probs.astype(np.float64)  # a copy: subtracting the one-hot in place is exact
    residual[np.arange(probs.shape[0]), labels] -= 1.0
    return np.sum(residual * residual, axis=1)


def error(probs, labels) -> float:
    """Top-1 error rate: fraction of samples whose argmax (first on ties) is not the label."""
    probs, labels = _probs_and_labels(probs, labels)
    return float(np.mean(probs.argmax(axis=1) != labels))


def confidence_gap(probs, labels) -> float:
    """Mean confidence (top probability) minus accuracy: below 0 is underconfident on average.

    charoenphakdee2021's η-underconfidence (§5.2, Cor. 9) seen without the true posterior.
    """
    probs, labels = _probs_and_labels(probs, labels)
    top = probs.argmax(axis=1)
    return float(np.mean(probs[np.arange(probs.shape[0]), top].astype(np.float64)) - np.mean(top == labels))


def top_k_error(probs, labels, k: int = 5) -> float:
    """Fraction of samples whose label is not among the ``k`` most probable classes.

    Ties are broken as ``argmax`` does (lower class index ranks first), so
    ``top_k_error(k=1) == error``: the label's rank is the number of classes with a
    higher probability plus those with an equal probability and a smaller index.
    """
    probs, labels = _probs_and_labels(probs, labels)
    n_classes = probs.shape[1]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= n_classes:
        raise ValueError(f"k must be an integer in 1..{n_classes} (the number of classes), got {k!r}")
    return float(np.mean(label_rank(probs, labels) >= k))


def label_rank(probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Each label's 0-based rank among its sample's classes, ties broken as ``argmax`` does
    (checked ``probs`` and ``labels``): ``top_k_error`` counts ranks >= k."""
    true_prob = _true_class(probs, labels)[:, None]
    before_label = np.arange(probs.shape[1])[None, :] < labels[:, None]
    return np.count_nonzero((probs > true_prob) | ((probs == true_prob) & before_label), axis=1)


def kl_divergence(eta, q) -> float:
    """Mean over samples of ``KL(eta_n || q_n) = sum_k eta_nk log(eta_nk / q_nk)``, in nats.

    ``eta`` is the known class posterior (charoenphakdee2021 §5.2), ``q`` the prediction,
    both (N, K). Terms with ``eta_nk = 0`` are 0 (0 log 0 = 0), whatever ``q_nk``; a term
    with ``eta_nk > 0`` and ``q_nk = 0`` is ``inf``. Computed as
    ``eta (log eta - log q)`` in float64, which cannot overflow as ``eta / q`` can.
    """
    eta = check_probs(eta, "eta")
    q = check_probs(q, "q")
    if eta.shape != q.shape:
        raise ValueError(f"eta and q must have the same shape, got {eta.shape} and {q.shape} (shape mismatch)")
    eta, q = eta.astype(np.float64), q.astype(np.float64)
    support = eta > 0
    terms = np.zeros_like(eta)
    with np.errstate(divide="ignore"):
        terms[support] = eta[support] * (np.log(eta[support]) - np.log(q[support]))
    return float(np.mean(terms.sum(axis=1)))


class S99(NamedTuple):
    share: float  # fraction of samples with top-label confidence >= threshold
    accuracy: float  # accuracy among them; NaN when there are none


def s99(probs, labels, threshold: float = 0.99) -> S99:
    """``S99`` of mukhoti2020 Appendix F / Table 13 (after Kumar et al. 2018).

    The samples predicted with confidence 0.99 or more: returns their share of the test
    set and their accuracy, both fractions (Table 13 prints them as %). The threshold is
    compared in the dtype of ``probs``. Accuracy is NaN if no sample qualifies.
    """
    probs, labels = _probs_and_labels(probs, labels)
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must lie in [0, 1], got {threshold!r}")
    confidence, predicted = top_label(probs)
    confident = confidence >= np.asarray(threshold, dtype=probs.dtype)
    n_confident = int(np.count_nonzero(confident))
    accuracy = float(np.mean(predicted[confident] == labels[confident])) if n_confident else float("nan")
    return S99(share=n_confident / probs.shape[0], accuracy=accuracy)
