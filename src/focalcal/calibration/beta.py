r"""Beta calibration of a binary classifier (Kull, Silva Filho & Flach 2017, "Beyond sigmoids").

With s the model's probability of class 1, the calibrated probability is

$$
\operatorname{logit}(q) = a \ln s - b \ln(1 - s) + c, \qquad a, b \ge 0,
$$

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

from focalcal.calibration._base import Calibrator
from focalcal.core.constraints import POSITIVE_INT


class SeparableDataWarning(UserWarning):
    """A logistic fit on separable data: its maximum-likelihood parameters are infinite.

    :class:`BetaCalibration` warns with it when its fitted map classifies every validation
    sample correctly; its parameters are then where the fit stopped, not an optimum.

    Examples:
        >>> import warnings
        >>> from focalcal.calibration import BetaCalibration
        >>> from focalcal.calibration.beta import SeparableDataWarning
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     _ = BetaCalibration().fit([[0.0, -2.0], [0.0, -1.0], [0.0, 1.0], [0.0, 2.0]], [0, 0, 1, 1])
        >>> [w.category is SeparableDataWarning for w in caught]
        [True]
    """


def beta_features(logits: np.ndarray) -> np.ndarray:
    r"""The two features of beta calibration, $\ln s$ and $-\ln(1 - s)$, with s = softmax(logits)[:, 1].

    Both come from the log-softmax, so a score whose probability rounds to 0 or 1 keeps finite
    features.

    Args:
        logits: Float array (N, 2) of binary logits.

    Returns:
        Float64 array (N, 2): column 0 is $\ln s$ (≤ 0), column 1 is $-\ln(1 - s)$ (≥ 0).

    Examples:
        >>> import numpy as np
        >>> from focalcal.calibration.beta import beta_features
        >>> beta_features(np.array([[0.0, 0.0], [0.0, 2.0]])).round(4).tolist()
        [[-0.6931, 0.6931], [-0.1269, 2.1269]]
    """
    log_probs = log_softmax(logits, axis=1)
    return np.stack([log_probs[:, 1], -log_probs[:, 0]], axis=1)


def fit_logistic(features: np.ndarray, labels: np.ndarray, max_iter: int = 100) -> np.ndarray:
    """Logistic regression without penalty: (w, c) minimising the mean log loss of sigmoid(features @ w + c).

    Newton's method with step halving; it stops at a largest gradient entry below 1e-12, when
    no step decreases the loss at float64 resolution, or after ``max_iter`` steps.

    Args:
        features: Float array (N, D) of features.
        labels: Integer array (N,) of 0s and 1s.
        max_iter: Maximum number of Newton steps.

    Returns:
        Float64 array (D + 1,): the D weights, then the intercept.

    Raises:
        RuntimeError: If the fit diverges to non-finite parameters.

    Examples:
        >>> import numpy as np
        >>> from focalcal.calibration.beta import fit_logistic
        >>> features = np.array([[-2.0], [-1.0], [0.0], [1.0], [2.0], [0.5]])
        >>> fit_logistic(features, np.array([0, 1, 0, 1, 1, 0])).round(3).tolist()
        [0.803, -0.083]
    """
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
    r"""Beta calibration: binary (K = 2) logits -> [1 − q, q] with logit(q) = a ln s − b ln(1 − s) + c.

    s is the model's probability of class 1, and a, b ≥ 0 keep the map monotone. The fit is a
    logistic regression on $(\ln s, -\ln(1 - s))$; a negative a or b is handled as in Kull et
    al.'s released package, by refitting without that feature (module docstring).

    Args:
        max_iter: Maximum number of Newton steps of each logistic fit.

    Attributes:
        a_ (float): Weight of $\ln s$, ≥ 0.
        b_ (float): Weight of $-\ln(1 - s)$, ≥ 0 (a = b is Platt scaling of the logit).
        c_ (float): Intercept.
        n_classes_ (int): Always 2.

    Warns:
        SeparableDataWarning: When the fitted map classifies every validation sample correctly,
            so that no finite maximum-likelihood fit exists.

    Examples:
        >>> import numpy as np
        >>> from focalcal.calibration import BetaCalibration
        >>> from focalcal.metrics import ece
        >>> rng = np.random.default_rng(0)
        >>> val_labels = rng.integers(0, 2, size=500)
        >>> val_logits = 4 * (np.eye(2)[val_labels] + rng.normal(size=(500, 2)))
        >>> beta = BetaCalibration().fit(val_logits, val_labels)
        >>> round(beta.a_, 3), round(beta.b_, 3), round(beta.c_, 3)
        (0.229, 0.273, 0.136)
        >>> probs = beta.transform(val_logits)
        >>> round(ece(probs, val_labels), 4)
        0.0326
    """

    name = "beta"
    _fitted_attributes = ("a_", "b_", "c_")
    binary_only = True
    _parameter_constraints: ClassVar[dict] = {"max_iter": [POSITIVE_INT]}

    def __init__(self, max_iter: int = 100) -> None:
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
