"""Beta calibration of a binary classifier (Kull, Silva Filho & Flach 2017, "Beyond sigmoids").

With s the model's probability of class 1, the calibrated probability is

    logit(q) = a ln s − b ln(1 − s) + c,    a, b ≥ 0,

a logistic regression on the two features (ln s, −ln(1 − s)): convex, fitted here by Newton's
method on the mean log loss. It contains Platt scaling on the logit (a = b) and the identity
(a = b = 1, c = 0), and unlike a sigmoid it can bend both tails. a, b ≥ 0 keeps the map
monotone; as in the authors' released package (``betacal/beta_calibration.py``,
``_beta_calibration``), a negative a is handled by refitting without ln s (a = 0), or else a
negative b by refitting without −ln(1 − s) (b = 0). That code clips s to [eps, 1 − eps]
before the logs; here both features come from the logits exactly (log-softmax), so a score
that rounds to 0 or 1 as a probability keeps its finite features.

When the fitted map classifies every validation sample correctly, the two classes are
separable by it and no finite maximum-likelihood fit exists: the log loss keeps falling as
(a, b, c) grow, and the fit ends wherever its tolerance or iteration cap stops it. The fit then
warns (:class:`SeparableDataWarning`) instead of returning those parameters silently.
"""

from __future__ import annotations

import warnings
from typing import ClassVar

import numpy as np
from scipy.special import expit, log_softmax

from focalcal._constraints import POSITIVE_INT
from focalcal.calibration._base import Calibrator


class SeparableDataWarning(UserWarning):
    """A logistic fit on separable data: its maximum-likelihood parameters are infinite."""


def beta_features(logits: np.ndarray) -> np.ndarray:
    """(N, 2): ln s and −ln(1 − s), s = softmax(logits)[:, 1], from the log-softmax."""
    log_probs = log_softmax(logits, axis=1)
    return np.stack([log_probs[:, 1], -log_probs[:, 0]], axis=1)


def fit_logistic(features: np.ndarray, labels: np.ndarray, max_iter: int = 100) -> np.ndarray:
    """(weights..., intercept) minimising the mean log loss of sigmoid(features @ w + c), by
    Newton's method with step halving; stops at a gradient below 1e-12."""
    design = np.column_stack([features, np.ones(len(labels))])
    targets = labels.astype(np.float64)
    coef = np.zeros(design.shape[1])

    def loss(w):
        margin = design @ w
        return float(np.mean(np.logaddexp(0.0, margin) - targets * margin))

    value = loss(coef)
    for _ in range(max_iter):
        probs = expit(design @ coef)
        gradient = design.T @ (probs - targets) / len(targets)
        if np.abs(gradient).max() < 1e-12:
            break
        hessian = (design * (probs * (1 - probs))[:, None]).T @ design / len(targets)
        step = np.linalg.lstsq(hessian, gradient, rcond=None)[0]
        size = 1.0
        while size > 1e-10:
            candidate = coef - size * step
            new_value = loss(candidate)
            if new_value <= value - 1e-4 * size * float(gradient @ step) or new_value <= value:
                break
            size /= 2
        else:
            break  # no decrease left at float64 resolution
        coef, value = candidate, new_value
    if not np.isfinite(coef).all():
        raise RuntimeError("beta calibration fit diverged (non-finite parameters)")
    return coef


class BetaCalibration(Calibrator):
    """Binary (K = 2) logits -> [1 − q, q] with logit(q) = a_ ln s − b_ ln(1 − s) + c_."""

    name = "beta"
    _fitted_attributes = ("a_", "b_", "c_")
    binary_only = True
    _parameter_constraints: ClassVar[dict] = {"max_iter": [POSITIVE_INT]}

    def __init__(self, max_iter: int = 100):
        self.max_iter = max_iter

    def _fit(self, logits, labels):
        features = beta_features(logits)
        a, b, c = fit_logistic(features, labels, self.max_iter)
        if a < 0:  # the released package's rule: refit without the feature whose weight is negative
            b, c = fit_logistic(features[:, 1:], labels, self.max_iter)
            a = 0.0
        elif b < 0:
            a, c = fit_logistic(features[:, :1], labels, self.max_iter)
            b = 0.0
        self.a_, self.b_, self.c_ = float(a), float(b), float(c)
        margin = features @ np.array([self.a_, self.b_]) + self.c_
        if np.all(np.where(labels == 1, margin, -margin) > 0):
            warnings.warn(f"beta calibration: the {len(labels)} validation samples are separable (the fitted map "
                          f"classifies every one correctly), so no finite maximum-likelihood fit exists; the "
                          f"parameters a = {self.a_:.3g}, b = {self.b_:.3g}, c = {self.c_:.3g} are where the fit "
                          f"stopped, not an optimum", SeparableDataWarning, stacklevel=3)

    def _transform(self, logits):  # 2 columns: ``transform`` checks them against the fitted class count
        margin = beta_features(logits) @ np.array([self.a_, self.b_]) + self.c_
        return np.stack([expit(-margin), expit(margin)], axis=1)
