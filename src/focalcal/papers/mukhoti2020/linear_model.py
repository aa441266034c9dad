"""mukhoti2020 App. B: cross-entropy and focal loss on a 2-parameter logistic model σ(w·x),
trained by full-batch gradient descent on the binary data the appendix describes (Figs 7, 8)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from focalcal.core.constraints import GAMMA, SequenceOf, validate_parameters
from focalcal.core.validation import as_numpy


@dataclass(frozen=True)
class LinearModelData:
    """The M20 App. B data set: float64 features (N, 2) and labels in {0, 1} (float64); for each
    point its cluster (index into ``means``) and whether its label differs from its cluster's
    class (``changed_*``, exactly the labels the noise changed); ``random_state`` handed to
    ``make_classification``."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    cluster_train: np.ndarray
    cluster_test: np.ndarray
    changed_train: np.ndarray
    changed_test: np.ndarray
    means: np.ndarray  # (4, 2) cluster means: the square's vertices
    cluster_labels: np.ndarray  # (4,) clean class of each cluster
    random_state: int


def _check_int(value, name: str, minimum: int, maximum: float = math.inf) -> int:
    if (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum
            or value > maximum):
        bounds = f">= {minimum}" if maximum == math.inf else f"in [{minimum}, {maximum}]"
        raise ValueError(f"{name} must be an integer {bounds}, got {value!r}")
    return int(value)


def _check_real(value, name: str, *, low: float, high: float = math.inf, open_low: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a real number, got {value!r}")  # noqa: TRY004  as _check_int
    value = float(value)
    bad_low = value <= low if open_low else value < low
    if not math.isfinite(value) or bad_low or value > high:
        interval = ("(" if open_low else "[") + f"{low:g}, {high:g}]"
        raise ValueError(f"{name} must be a finite number in {interval}, got {value!r}")
    return value


# make_classification with 2 informative features and 4 clusters uses every vertex of the square,
# in a fixed order (sklearn draws them with sample_without_replacement(4, 4), which returns 0..3
# in order): cluster k sits at class_sep·(2·bits(k) - 1) and has the clean class k mod 2.
_SQUARE = np.array([[-1.0, -1.0], [-1.0, 1.0], [1.0, -1.0], [1.0, 1.0]])
_CLUSTER_CLASS = np.array([0.0, 1.0, 0.0, 1.0])


def linear_model_data(n_train: int = 4000, n_test: int = 1000, flip: float = 0.1, side: float = 4.0,
                      seed: int = 0) -> LinearModelData:
    """Binary data of M20 App. B, drawn with scikit-learn's ``make_classification``.

    The setup text of App. B ("two normally distributed clusters" per class, means "on the
    vertices of a two-dimensional hypercube of side length 4", "standard deviation ... 1",
    "randomly linearly combined within each cluster in order to add covariance", labels of 10 %
    of the points "flipped") is the documentation of ``sklearn.datasets.make_classification``,
    so we call it with n_samples = n_train + n_test, n_features = n_informative = 2,
    n_redundant = n_repeated = 0, n_classes = 2, n_clusters_per_class = 2, class_sep = side/2,
    flip_y = ``flip``, random_state = ``seed``. This is our reading: the authors' data script is
    not released. What that call does (sklearn 1.9.1):

    * cluster means: the 4 vertices (±side/2, ±side/2), always in the same order, so class 0
      owns (·, -side/2) and class 1 (·, +side/2); the line x2 = 0 through the origin separates
      the class means, as the bias-free model σ(w1 x1 + w2 x2) needs (no draw is ever the XOR
      layout). ``means`` and ``cluster_labels`` hold this layout; each cluster has N/4 points.
    * each cluster is z A_k + mean_k with z ~ N(0, I) (the "standard deviation 1") and A_k a
      2×2 matrix uniform in [-1, 1], not normalised, so a coordinate's std is a column norm of
      A_k (between 0 and √2, √(2/3) on average) and the two coordinates are correlated.
    * flip_y: a share ``flip`` of the points get a label drawn uniformly from {0, 1}, so about
      half of them keep theirs: ≈ flip/2 (5 %) of the labels change. ``changed_*`` marks them,
      found by drawing the same random_state again with flip_y = 0 (X is identical).

    One departure, to know each point's cluster: we call it with shuffle=False (points come
    ordered by cluster) and permute the points ourselves (numpy default_rng(seed)) before
    taking the first ``n_train`` for training and the rest for testing. make_classification's
    own shuffle would also swap the two features half of the time; we leave that symmetry out.
    Deterministic for ``seed``.
    """
    n_train = _check_int(n_train, "n_train", 1)
    n_test = _check_int(n_test, "n_test", 1)
    flip = _check_real(flip, "flip", low=0.0, high=1.0)
    side = _check_real(side, "side", low=0.0, open_low=True)
    seed = _check_int(seed, "seed", 0, 2**32 - 1)
    from sklearn.datasets import make_classification  # here: importing sklearn costs every job CPU

    n = n_train + n_test
    options = {"n_samples": n, "n_features": 2, "n_informative": 2, "n_redundant": 0, "n_repeated": 0, "n_classes": 2,
               "n_clusters_per_class": 2, "class_sep": side / 2, "shuffle": False, "random_state": seed}
    x, y = make_classification(flip_y=flip, **options)
    x_clean, y_clean = make_classification(flip_y=0.0, **options)
    # Points come in 4 consecutive blocks, cluster k with clean label k mod 2 (empty blocks only
    # at the end), so the cluster index counts the label changes along the clean labels.
    cluster = np.concatenate([[0], np.cumsum(np.diff(y_clean) != 0)])
    means = side / 2 * _SQUARE
    if not np.array_equal(x, x_clean) or not np.array_equal(_CLUSTER_CLASS[cluster], y_clean):
        raise RuntimeError("this sklearn's make_classification does not draw X before the label noise in cluster order")
    for k in range(4):
        points = x[cluster == k]
        if len(points) >= 100 and not np.array_equal(np.sign(points.mean(axis=0)), _SQUARE[k]):
            raise RuntimeError(f"this sklearn's make_classification does not put cluster {k} on vertex {means[k]}")
    order = np.random.default_rng(seed).permutation(n)
    x, y, cluster = x[order], y[order].astype(np.float64), cluster[order]
    changed = y != _CLUSTER_CLASS[cluster]
    train, test = slice(0, n_train), slice(n_train, n)
    return LinearModelData(x[train], y[train], x[test], y[test], cluster[train], cluster[test], changed[train],
                           changed[test], means, _CLUSTER_CLASS.copy(), seed)


def _check_features_labels(x, y) -> tuple[np.ndarray, np.ndarray]:
    x = as_numpy(x, "x")
    y = as_numpy(y, "y")
    if x.ndim != 2 or x.shape[0] == 0 or not np.issubdtype(x.dtype, np.number):
        raise ValueError(f"x must be a non-empty numeric (N, d) array, got shape {x.shape}, dtype {x.dtype}")
    x = x.astype(np.float64)
    if not np.all(np.isfinite(x)):
        raise ValueError("x contains non-finite values")
    if y.shape != (x.shape[0],):
        raise ValueError(f"y must have shape ({x.shape[0]},) to match x, got {y.shape}")
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("y must hold labels 0 or 1")
    return x, y.astype(np.float64)


def _linear_focal(w: np.ndarray, x: np.ndarray, sign: np.ndarray, gamma: float):
    """Mean binary focal loss of σ(x·w) and its gradient in w; ``sign`` = 2y - 1 (±1)."""
    s = sign * (x @ w)  # logit of the true class: p_y = σ(s)
    softplus_minus = np.logaddexp(0.0, -s)  # -log p_y
    weight = np.exp(-gamma * np.logaddexp(0.0, s))  # (1 - p_y)^γ = σ(-s)^γ; exactly 1 for γ = 0
    loss = weight * softplus_minus
    # dL/ds = -σ(-s)^γ [σ(-s) + γ σ(s) softplus(-s)]  (= -(1 - p_y) g(p_y, γ), M20 Prop. 1)
    d_s = -weight * (special.expit(-s) + gamma * special.expit(s) * softplus_minus)
    return float(loss.mean()), (d_s * sign) @ x / len(s)


def linear_model_loss(w, x, y, gamma) -> tuple[float, np.ndarray]:
    """Mean focal loss -(1 - p_y)^γ log p_y of the model p = σ(x·w), and its gradient in w.

    Evaluated from the logit (log p_y = -softplus(-s), 1 - p_y = σ(-s), s = ±x·w), never from
    clamped probabilities, so it is finite for any logit; γ = 0 is exactly cross-entropy.
    """
    x, y = _check_features_labels(x, y)
    w = as_numpy(w, "w").astype(np.float64)
    if w.shape != (x.shape[1],):
        raise ValueError(f"w must have shape ({x.shape[1]},), got {w.shape}")
    validate_parameters({"gamma": [GAMMA]}, {"gamma": gamma}, "linear_model_loss")
    return _linear_focal(w, x, 2.0 * y - 1.0, float(gamma))


@dataclass(frozen=True)
class LinearModelFit:
    """Full-batch gradient descent on the mean focal loss, recorded every ``record_every`` steps.

    ``steps`` (T,) are the iteration numbers (0 and the last included); ``weights`` (T, 2);
    ``logit_rms`` (T,) = ‖X w‖ / sqrt(N), the root-mean-square training logit (our reading of
    M20 Fig 7a's "norm of logits"); ``weight_norm`` (T,) = ‖w‖; ``loss`` and ``grad_norm`` (T,).
    """

    gamma: float
    lr: float
    steps: np.ndarray
    weights: np.ndarray
    logit_rms: np.ndarray
    weight_norm: np.ndarray
    loss: np.ndarray
    grad_norm: np.ndarray

    @property
    def w(self) -> np.ndarray:
        return self.weights[-1]


def train_linear_model(x, y, gamma, *, lr: float = 0.1, iterations: int = 1000, record_every: int = 1,
                       w0=None) -> LinearModelFit:
    """M20 App. B: fit f_w(x) = σ(w·x) (no bias) by full-batch gradient descent on the mean focal
    loss with γ (γ = 0: cross-entropy), w ← w - lr ∇L, from ``w0`` (default 0).

    The paper gives no optimiser settings and no released code does; w0 = 0, lr = 0.1 and
    1000 iterations are the project's choice: on the default data (seeds 0-2) ‖w‖ is within
    0.1 % of its limit after ~450 iterations, so the curves of M20 Fig 7 level off, and after
    1000 it is within 1e-6 of the optimum (‖∇L‖ ≤ 2e-7 for γ = 0, ≤ 2e-12 for γ = 1; below
    1e-12 for both after 2000).
    """
    x, y = _check_features_labels(x, y)
    validate_parameters({"gamma": [GAMMA]}, {"gamma": gamma}, "train_linear_model")
    gamma = float(gamma)
    lr = _check_real(lr, "lr", low=0.0, open_low=True)
    iterations = _check_int(iterations, "iterations", 0)
    record_every = _check_int(record_every, "record_every", 1)
    w = np.zeros(x.shape[1]) if w0 is None else as_numpy(w0, "w0").astype(np.float64).copy()
    if w.shape != (x.shape[1],) or not np.all(np.isfinite(w)):
        raise ValueError(f"w0 must be a finite vector of shape ({x.shape[1]},), got {w!r}")
    sign = 2.0 * y - 1.0
    records = []
    for step in range(iterations + 1):
        loss, grad = _linear_focal(w, x, sign, gamma)
        if step % record_every == 0 or step == iterations:
            records.append((step, w.copy(), loss, float(np.linalg.norm(grad))))
        if step < iterations:
            w = w - lr * grad
    steps = np.array([r[0] for r in records])
    weights = np.array([r[1] for r in records])
    logit_rms = np.linalg.norm(x @ weights.T, axis=0) / math.sqrt(len(x))
    return LinearModelFit(gamma, lr, steps, weights, logit_rms, np.linalg.norm(weights, axis=1),
                          np.array([r[2] for r in records]), np.array([r[3] for r in records]))


@dataclass(frozen=True)
class LinearModelExperiment:
    """One data set and one fit per γ; ``test_confidence[γ]`` = max(p, 1 - p) and
    ``test_correct[γ]`` (prediction 1 when w·x > 0) on the test points."""

    data: LinearModelData
    fits: dict
    test_confidence: dict
    test_correct: dict

    def misclassified_confidence(self, gamma: float) -> np.ndarray:
        return self.test_confidence[gamma][~self.test_correct[gamma]]


def linear_model_experiment(gammas=(0.0, 1.0), seed: int = 0, *, n_train: int = 4000, n_test: int = 1000,
                            flip: float = 0.1, side: float = 4.0, lr: float = 0.1, iterations: int = 1000,
                            record_every: int = 1) -> LinearModelExperiment:
    """M20 App. B (Figs 7, 8): draw :func:`linear_model_data` once and train each γ on it with
    :func:`train_linear_model`; keys of the returned dicts are the γ values as floats."""
    validate_parameters({"gammas": [GAMMA, SequenceOf(GAMMA)]}, {"gammas": gammas}, "linear_model_experiment")
    gammas = [float(g) for g in np.atleast_1d(np.asarray(gammas, dtype=np.float64))]
    data = linear_model_data(n_train, n_test, flip, side, seed)
    fits, confidence, correct = {}, {}, {}
    for gamma in gammas:
        fit = train_linear_model(data.x_train, data.y_train, gamma, lr=lr, iterations=iterations,
                                 record_every=record_every)
        logits = data.x_test @ fit.w
        fits[gamma] = fit
        confidence[gamma] = special.expit(np.abs(logits))
        correct[gamma] = (logits > 0) == (data.y_test == 1)
    return LinearModelExperiment(data, fits, confidence, correct)
