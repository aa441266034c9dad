"""Non-parametric one-vs-rest calibrators: histogram binning and isotonic regression.

Each class k gets its own map from p_k = softmax(z)_k to an estimate of P(y = k | p_k),
fitted on the validation set (Zadrozny & Elkan 2001, 2002; Guo et al. 2017 §4.1). The K
calibrated values of a sample are then divided by their sum so that rows are
distributions again; a row whose K values are all 0 becomes uniform (there is no
information to distribute). Neither map is monotone across classes, so unlike temperature
scaling these can change the predicted class.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from scipy.special import softmax

from focalcal.calibration._base import Calibrator
from focalcal.metrics.binning import BINNING, N_BINS, bin_statistics


def _renormalise(calibrated: np.ndarray) -> np.ndarray:
    totals = calibrated.sum(axis=1, keepdims=True)
    uniform = np.full_like(calibrated, 1.0 / calibrated.shape[1])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(totals > 0, calibrated / totals, uniform)


class HistogramBinning(Calibrator):
    """One-vs-rest histogram binning: p_k ↦ fraction of class-k labels in p_k's bin.

    Bins follow :mod:`focalcal.metrics.binning` (right-closed; ``binning="width"`` equal
    width, ``"mass"`` equal mass on the validation p_k). An empty bin maps to its midpoint.
    The K calibrated values of a sample are divided by their sum (module docstring).

    Args:
        n_bins: Number of bins per class (15, the papers' ECE bins).
        binning: ``"width"`` for equal-width bins on [0, 1], ``"mass"`` for bins holding equal
            numbers of validation samples.

    Attributes:
        bin_edges_ (np.ndarray): Float array (K, n_bins + 1), each class's bin edges.
        bin_values_ (np.ndarray): Float array (K, n_bins), each bin's calibrated probability.
        n_classes_ (int): Number of classes K.

    Examples:
        >>> import numpy as np
        >>> from focalcal.calibration import HistogramBinning
        >>> from focalcal.metrics import ece
        >>> rng = np.random.default_rng(0)
        >>> val_labels = rng.integers(0, 3, size=500)
        >>> val_logits = 4 * (np.eye(3)[val_labels] + rng.normal(size=(500, 3)))
        >>> binning = HistogramBinning(n_bins=10).fit(val_logits, val_labels)
        >>> binning.bin_values_.shape
        (3, 10)
        >>> round(ece(binning.transform(val_logits), val_labels), 4)
        0.0218
    """

    name = "histogram_binning"
    _fitted_attributes = ("bin_edges_", "bin_values_")
    _parameter_constraints: ClassVar[dict] = {"n_bins": [N_BINS], "binning": [BINNING]}

    def __init__(self, n_bins: int = 15, binning: str = "width") -> None:
        self.n_bins = n_bins
        self.binning = binning

    def _fit(self, logits, labels):
        probs = softmax(logits, axis=1)
        edges, values = [], []
        for k in range(probs.shape[1]):  # one vectorised binning per class
            bins = bin_statistics(np.ascontiguousarray(probs[:, k]), labels == k, self.n_bins, self.binning)
            midpoints = 0.5 * (bins.edges[:-1] + bins.edges[1:])
            with np.errstate(invalid="ignore", divide="ignore"):
                values.append(np.where(bins.count > 0, bins.hit_sum / bins.count, midpoints))
            edges.append(bins.edges)
        self.bin_edges_ = np.stack(edges)
        self.bin_values_ = np.stack(values)

    def _transform(self, logits):
        probs = softmax(logits, axis=1)
        calibrated = np.empty_like(probs)
        for k in range(probs.shape[1]):
            # Same membership rule as bin_statistics: number of inner edges strictly below p.
            index = np.searchsorted(self.bin_edges_[k, 1:-1], probs[:, k], side="left")
            calibrated[:, k] = self.bin_values_[k, index]
        return _renormalise(calibrated)


class IsotonicCalibration(Calibrator):
    """One-vs-rest isotonic regression (scikit-learn's, clipped to [0, 1] and out of range).

    Each class's fitted step function is stored as its breakpoints ``x_thresholds_`` and
    ``y_thresholds_`` (lists of K arrays) and evaluated by linear interpolation, exactly as
    ``sklearn.isotonic.IsotonicRegression.predict`` does, so the JSON form needs no pickle.
    The fit is scikit-learn's, step for step (:func:`isotonic_thresholds`), without importing
    scikit-learn (a cost every job would pay; ``python -m bench workflow``). It takes no arguments.

    Attributes:
        x_thresholds_ (list[np.ndarray]): K increasing float arrays, each class's breakpoints in
            p_k (their lengths differ).
        y_thresholds_ (list[np.ndarray]): K float arrays of the same lengths, the fitted
            non-decreasing values in [0, 1] at those breakpoints.
        n_classes_ (int): Number of classes K.

    Examples:
        >>> import numpy as np
        >>> from focalcal.calibration import IsotonicCalibration
        >>> from focalcal.metrics import ece
        >>> rng = np.random.default_rng(0)
        >>> val_labels = rng.integers(0, 3, size=500)
        >>> val_logits = 4 * (np.eye(3)[val_labels] + rng.normal(size=(500, 3)))
        >>> isotonic = IsotonicCalibration().fit(val_logits, val_labels)
        >>> [len(x) for x in isotonic.x_thresholds_]
        [34, 28, 30]
        >>> round(ece(isotonic.transform(val_logits), val_labels), 4)
        0.0281
    """

    name = "isotonic"
    _fitted_attributes = ("x_thresholds_", "y_thresholds_")

    def _fit(self, logits, labels):
        probs = softmax(logits, axis=1)
        seen = np.bincount(labels, minlength=probs.shape[1]) > 0
        self.x_thresholds_, self.y_thresholds_ = [], []
        for k in range(probs.shape[1]):
            if not seen[k]:
                # No class-k label: the fit is 0 everywhere, which scikit-learn stores as its two end
                # points. Written directly, since with many classes (10,000 on 100 rows) most are unseen.
                x = np.unique([probs[:, k].min(), probs[:, k].max()])
                self.x_thresholds_.append(x)
                self.y_thresholds_.append(np.zeros_like(x))
                continue
            x, y = isotonic_thresholds(probs[:, k], (labels == k).astype(np.float64))
            self.x_thresholds_.append(x)
            self.y_thresholds_.append(y)

    def _restore(self, attr, value):
        if attr in ("x_thresholds_", "y_thresholds_"):
            return [np.asarray(v, dtype=np.float64) for v in value]
        return super()._restore(attr, value)

    def _transform(self, logits):
        probs = softmax(logits, axis=1)
        calibrated = np.column_stack(
            [np.interp(probs[:, k], x, y) for k, (x, y) in enumerate(zip(self.x_thresholds_, self.y_thresholds_))]
        )
        return _renormalise(calibrated)


def isotonic_thresholds(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The breakpoints of scikit-learn's isotonic regression of 0/1 labels, without scikit-learn.

    ``X_thresholds_`` and ``y_thresholds_`` of ``IsotonicRegression(y_min=0, y_max=1,
    increasing=True).fit(x, y)``, computed as it computes them (``sklearn/isotonic.py``
    ``_build_y``, ``sklearn/_isotonic.pyx`` ``_make_unique``, both 1.9): sort by (x, y); merge x
    closer than float64's resolution (1e-15) to its group's first into one point with the mean
    y; scipy's pool-adjacent-violators; clip to [0, 1]; drop the points whose y equals both
    neighbours'.

    Args:
        x: Float array (N,) of scores (one class's probabilities).
        y: Float64 array (N,) of labels, 0s and 1s.

    Returns:
        ``(x_thresholds, y_thresholds)``: two float64 arrays (M,), M ≤ N, the increasing
        breakpoints and the fitted non-decreasing values in [0, 1] at them;
        ``np.interp(p, x_thresholds, y_thresholds)`` evaluates the fit.

    Examples:
        >>> import numpy as np
        >>> from focalcal.calibration.binning import isotonic_thresholds
        >>> x = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
        >>> x_thresholds, y_thresholds = isotonic_thresholds(x, np.array([0.0, 1.0, 0.0, 0.0, 1.0, 1.0]))
        >>> x_thresholds.tolist(), y_thresholds.round(4).tolist()
        ([0.1, 0.2, 0.4, 0.5, 0.6], [0.0, 0.3333, 0.3333, 1.0, 1.0])
    """
    from scipy.optimize import isotonic_regression

    order = np.lexsort((y, x))
    x, y = x[order], y[order]
    resolution = np.finfo(np.float64).resolution
    gaps = np.diff(x)
    if np.any((gaps > 0) & (gaps < resolution)):  # groups chain through near-equal x: merged one by one
        starts = [0]
        for j in range(1, len(x)):
            if x[j] - x[starts[-1]] >= resolution:
                starts.append(j)
        starts = np.asarray(starts)
    else:
        starts = np.flatnonzero(np.concatenate([[True], gaps >= resolution]))
    weights = np.diff(np.append(starts, len(x))).astype(np.float64)
    unique_x, unique_y = x[starts], np.add.reduceat(y, starts) / weights  # 0/1 labels: exact sums in any order
    fitted = np.asarray(isotonic_regression(unique_y, weights=weights, increasing=True).x, dtype=np.float64)
    np.clip(fitted, 0.0, 1.0, out=fitted)
    keep = np.ones(len(fitted), dtype=bool)
    keep[1:-1] = (fitted[1:-1] != fitted[:-2]) | (fitted[1:-1] != fitted[2:])
    return unique_x[keep], fitted[keep]
