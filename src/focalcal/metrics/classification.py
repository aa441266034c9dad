"""Unbinned metrics: NLL, Brier score, error, top-k error, KL to a known posterior, S99.

All take (N, K) probabilities (numpy or torch) and N integer labels, return means over
samples as fractions (not %), and keep float32 inputs in float32 for per-sample work
while accumulating means in float64.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from focalcal.core.validation import check_labels, check_probs, check_scores
from focalcal.metrics.binning import top_label

if TYPE_CHECKING:
    from focalcal.core.types import ArrayLike


def _probs_and_labels(probs, labels, name: str = "probs"):
    probs = check_probs(probs, name)
    return probs, check_labels(labels, probs.shape[0], probs.shape[1])


def _true_class(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return scores[np.arange(scores.shape[0]), labels]


def nll(probs: ArrayLike, labels: ArrayLike) -> float:
    r"""Mean negative log-likelihood $-\frac{1}{N} \sum_n \log p_{n, y_n}$ (natural log).

    A true-class probability of exactly 0 gives ``inf``, the honest value; nothing is
    clamped. Softmax probabilities underflow to 0 long before the logits are extreme,
    so prefer :func:`nll_from_logits` when logits are at hand.

    Args:
        probs: Predicted probabilities, shape (N, K), rows summing to 1 (numpy or torch).
        labels: True classes, integers in 0 .. K-1, shape (N,).

    Returns:
        The mean NLL in nats, in [0, inf].

    Raises:
        ValueError: ``probs`` or ``labels`` are malformed (NaN/Inf, rows not summing to 1,
            labels out of range, shape mismatch, no samples).

    Examples:
        >>> from focalcal.metrics import nll
        >>> import numpy as np
        >>> probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]])
        >>> labels = np.array([0, 1, 1, 1])
        >>> round(nll(probs, labels), 4)
        0.6456
    """
    probs, labels = _probs_and_labels(probs, labels)
    with np.errstate(divide="ignore"):
        return float(-np.mean(np.log(_true_class(probs, labels)), dtype=np.float64))


def nll_from_logits(logits: ArrayLike, labels: ArrayLike) -> float:
    r"""Mean cross-entropy computed from logits, exact where softmax would underflow.

    Per sample, with $m = \max_k z_k$ and $e_k = \exp(z_k - m)$:

    $$
    -\log \mathrm{softmax}(z)_y = (m - z_y) + \operatorname{log1p}\Big(\sum_{k \ne \arg\max} e_k\Big)
    $$

    Dropping the argmax term (which is 1) before ``log1p`` keeps tiny losses of confident
    correct predictions accurate, even in float32; logits of $\pm 10^4$ are fine.

    Args:
        logits: Unnormalised scores $z$, shape (N, K), finite (numpy or torch).
        labels: True classes, integers in 0 .. K-1, shape (N,).

    Returns:
        The mean cross-entropy in nats, a float >= 0.

    Raises:
        ValueError: ``logits`` or ``labels`` are malformed (NaN/Inf, labels out of range,
            shape mismatch, no samples).

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics import nll_from_logits
        >>> logits = np.array([[800.0, 0.0]])  # softmax gives class 1 probability 0: nll would be inf
        >>> nll_from_logits(logits, np.array([1]))
        800.0
    """
    logits = check_scores(logits, "logits")
    labels = check_labels(labels, logits.shape[0], logits.shape[1])
    top = logits.argmax(axis=1)
    rows = np.arange(logits.shape[0])
    shifted = np.exp(logits - logits[rows, top][:, None])
    shifted[rows, top] = 0.0
    loss = (logits[rows, top] - logits[rows, labels]) + np.log1p(shifted.sum(axis=1))
    return float(np.mean(loss, dtype=np.float64))


def brier(probs: ArrayLike, labels: ArrayLike) -> float:
    r"""Brier score (Brier 1950, as in mukhoti2020): $\frac{1}{N} \sum_n \sum_k (p_{nk} - [y_n = k])^2$.

    Summed over classes, averaged over samples, so it lies in [0, 2].

    Args:
        probs: Predicted probabilities, shape (N, K), rows summing to 1 (numpy or torch).
        labels: True classes, integers in 0 .. K-1, shape (N,).

    Returns:
        The Brier score, a float in [0, 2].

    Raises:
        ValueError: ``probs`` or ``labels`` are malformed (NaN/Inf, rows not summing to 1,
            labels out of range, shape mismatch, no samples).

    Examples:
        >>> from focalcal.metrics import brier
        >>> import numpy as np
        >>> probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]])
        >>> labels = np.array([0, 1, 1, 1])
        >>> round(brier(probs, labels), 4)
        0.45
    """
    probs, labels = _probs_and_labels(probs, labels)
    return float(np.mean(brier_terms(probs, labels)))


def brier_terms(probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    r"""Each sample's $\sum_k (p_k - [y = k])^2$ of checked ``probs`` and ``labels``.

    Args:
        probs: Checked probabilities, shape (N, K).
        labels: Checked int64 labels in 0 .. K-1, shape (N,).

    Returns:
        float64 array of shape (N,), each in [0, 2]; :func:`brier` is their mean.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics.classification import brier_terms
        >>> brier_terms(np.array([[0.9, 0.1], [0.8, 0.2]]), np.array([0, 1])).round(4).tolist()
        [0.02, 1.28]
    """
    residual = probs.astype(np.float64)  # a copy: subtracting the one-hot in place is exact
    residual[np.arange(probs.shape[0]), labels] -= 1.0
    return np.sum(residual * residual, axis=1)


def error(probs: ArrayLike, labels: ArrayLike) -> float:
    """Top-1 error rate: fraction of samples whose argmax (first on ties) is not the label.

    Args:
        probs: Predicted probabilities, shape (N, K), rows summing to 1 (numpy or torch).
        labels: True classes, integers in 0 .. K-1, shape (N,).

    Returns:
        The error rate, a fraction in [0, 1], not a percentage.

    Raises:
        ValueError: ``probs`` or ``labels`` are malformed (NaN/Inf, rows not summing to 1,
            labels out of range, shape mismatch, no samples).

    Examples:
        >>> from focalcal.metrics import error
        >>> import numpy as np
        >>> probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]])
        >>> labels = np.array([0, 1, 1, 1])
        >>> error(probs, labels)
        0.25
    """
    probs, labels = _probs_and_labels(probs, labels)
    return float(np.mean(probs.argmax(axis=1) != labels))


def confidence_gap(probs: ArrayLike, labels: ArrayLike) -> float:
    r"""Mean confidence (top probability) minus accuracy: below 0 is underconfident on average.

    charoenphakdee2021's $\eta$-underconfidence (§5.2, Cor. 9) seen without the true posterior.

    Args:
        probs: Predicted probabilities, shape (N, K), rows summing to 1 (numpy or torch).
        labels: True classes, integers in 0 .. K-1, shape (N,).

    Returns:
        Mean confidence minus accuracy, a fraction in [-1, 1].

    Raises:
        ValueError: ``probs`` or ``labels`` are malformed (NaN/Inf, rows not summing to 1,
            labels out of range, shape mismatch, no samples).

    Examples:
        >>> from focalcal.metrics import confidence_gap
        >>> import numpy as np
        >>> probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]])
        >>> labels = np.array([0, 1, 1, 1])
        >>> round(confidence_gap(probs, labels), 4)
        0.0
    """
    probs, labels = _probs_and_labels(probs, labels)
    top = probs.argmax(axis=1)
    return float(np.mean(probs[np.arange(probs.shape[0]), top].astype(np.float64)) - np.mean(top == labels))


def top_k_error(probs: ArrayLike, labels: ArrayLike, k: int = 5) -> float:
    """Fraction of samples whose label is not among the ``k`` most probable classes.

    Ties are broken as ``argmax`` does (lower class index ranks first), so
    ``top_k_error(k=1) == error``: the label's rank is the number of classes with a
    higher probability plus those with an equal probability and a smaller index.

    Args:
        probs: Predicted probabilities, shape (N, K), rows summing to 1 (numpy or torch).
        labels: True classes, integers in 0 .. K-1, shape (N,).
        k: How many of the most probable classes count as a hit, 1 .. K (5: the usual top-5).

    Returns:
        The top-k error rate, a fraction in [0, 1], not a percentage.

    Raises:
        ValueError: Malformed ``probs`` or ``labels`` (as for :func:`nll`), or ``k`` not an
            integer in 1 .. K.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics import top_k_error
        >>> probs = np.array([[0.5, 0.3, 0.2], [0.2, 0.3, 0.5], [0.1, 0.6, 0.3]])
        >>> labels = np.array([1, 0, 2])
        >>> round(top_k_error(probs, labels, k=1), 4), round(top_k_error(probs, labels, k=2), 4)
        (1.0, 0.3333)
    """
    probs, labels = _probs_and_labels(probs, labels)
    n_classes = probs.shape[1]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= n_classes:
        raise ValueError(f"k must be an integer in 1..{n_classes} (the number of classes), got {k!r}")
    return float(np.mean(label_rank(probs, labels) >= k))


def label_rank(probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Each label's 0-based rank among its sample's classes, ties broken as ``argmax`` does.

    :func:`top_k_error` counts ranks >= k.

    Args:
        probs: Checked probabilities, shape (N, K).
        labels: Checked int64 labels in 0 .. K-1, shape (N,).

    Returns:
        Integer array of shape (N,): the number of classes ranked above each sample's label.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics.classification import label_rank
        >>> probs = np.array([[0.5, 0.3, 0.2], [0.4, 0.2, 0.4]])
        >>> label_rank(probs, np.array([1, 2])).tolist()
        [1, 1]
    """
    true_prob = _true_class(probs, labels)[:, None]
    before_label = np.arange(probs.shape[1])[None, :] < labels[:, None]
    return np.count_nonzero((probs > true_prob) | ((probs == true_prob) & before_label), axis=1)


def kl_divergence(eta: ArrayLike, q: ArrayLike) -> float:
    r"""Mean over samples of $\mathrm{KL}(\eta_n \,\|\, q_n) = \sum_k \eta_{nk} \log(\eta_{nk} / q_{nk})$, in nats.

    Terms with $\eta_{nk} = 0$ are 0 ($0 \log 0 = 0$), whatever $q_{nk}$; a term with
    $\eta_{nk} > 0$ and $q_{nk} = 0$ is ``inf``. Computed as $\eta (\log \eta - \log q)$ in
    float64, which cannot overflow as $\eta / q$ can.

    Args:
        eta: The known class posterior (charoenphakdee2021 §5.2), shape (N, K), rows summing to 1.
        q: The predicted probabilities, shape (N, K), rows summing to 1.

    Returns:
        The mean KL divergence in nats, in [0, inf].

    Raises:
        ValueError: ``eta`` or ``q`` are not valid probabilities, or their shapes differ.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics import kl_divergence
        >>> eta = np.array([[0.5, 0.5], [1.0, 0.0]])
        >>> q = np.array([[0.9, 0.1], [0.8, 0.2]])
        >>> round(kl_divergence(eta, q), 4)
        0.367
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
    """The confidently predicted samples' share and accuracy, as :func:`s99` returns them.

    Attributes:
        share: Fraction of samples with top-label confidence >= the threshold, in [0, 1].
        accuracy: Accuracy among them, a fraction in [0, 1]; NaN when there are none.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics import s99
        >>> result = s99(np.array([[0.995, 0.005], [0.6, 0.4]]), np.array([0, 1]))
        >>> result.share, result.accuracy
        (0.5, 1.0)
    """

    share: float
    accuracy: float


def s99(probs: ArrayLike, labels: ArrayLike, threshold: float = 0.99) -> S99:
    """``S99`` of mukhoti2020 Appendix F / Table 13 (after Kumar et al. 2018).

    The samples predicted with confidence 0.99 or more: returns their share of the test
    set and their accuracy, both fractions (Table 13 prints them as %). The threshold is
    compared in the dtype of ``probs``. Accuracy is NaN if no sample qualifies.

    Args:
        probs: Predicted probabilities, shape (N, K), rows summing to 1 (numpy or torch).
        labels: True classes, integers in 0 .. K-1, shape (N,).
        threshold: The top-label confidence a sample needs to count, in [0, 1] (0.99, the paper's).

    Returns:
        ``S99(share, accuracy)``, both fractions.

    Raises:
        ValueError: Malformed ``probs`` or ``labels`` (as for :func:`nll`), or ``threshold``
            outside [0, 1].

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics import s99
        >>> probs = np.array([[0.995, 0.005], [0.001, 0.999], [0.6, 0.4], [0.7, 0.3]])
        >>> result = s99(probs, np.array([0, 0, 1, 0]))
        >>> result.share, result.accuracy
        (0.5, 0.5)
    """
    probs, labels = _probs_and_labels(probs, labels)
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must lie in [0, 1], got {threshold!r}")
    confidence, predicted = top_label(probs)
    confident = confidence >= np.asarray(threshold, dtype=probs.dtype)
    n_confident = int(np.count_nonzero(confident))
    accuracy = float(np.mean(predicted[confident] == labels[confident])) if n_confident else float("nan")
    return S99(share=n_confident / probs.shape[0], accuracy=accuracy)
