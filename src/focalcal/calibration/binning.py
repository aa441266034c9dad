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
    Fitted attributes: ``bin_edges_`` (K, n_bins + 1) and ``bin_values_`` (K, n_bins).
    """

    name = "histogram_binning"
    _fitted_attributes = ("bin_edges_", "bin_values_")
    _parameter_constraints: ClassVar[dict] = {"n_bins": [N_BINS], "binning": [BINNING]}

    def __init__(self, n_bins: int = 15, binning: str = "width"):
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
    """

    name = "isotonic"
    _fitted_attributes = ("x_thresholds_", "y_thresholds_")

    def _fit(self, logits, labels):
        from sklearn.isotonic import IsotonicRegression  # here: importing sklearn costs ~1 s per job

        probs = softmax(logits, axis=1)
        seen = np.bincount(labels, minlength=probs.shape[1]) > 0
        self.x_thresholds_, self.y_thresholds_ = [], []
        for k in range(probs.shape[1]):
            if not seen[k]:
                # No class-k label: the fit is 0 everywhere, which scikit-learn stores as its two end
                # points. Written directly, since with many classes (10,000 on 100 rows) most are unseen
                # and each scikit-learn fit costs ~6 ms.
                x = np.unique([probs[:, k].min(), probs[:, k].max()])
                self.x_thresholds_.append(x)
                self.y_thresholds_.append(np.zeros_like(x))
                continue
            model = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip")
            model.fit(probs[:, k], (labels == k).astype(np.float64))
            self.x_thresholds_.append(np.asarray(model.X_thresholds_, dtype=np.float64))
            self.y_thresholds_.append(np.asarray(model.y_thresholds_, dtype=np.float64))

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
