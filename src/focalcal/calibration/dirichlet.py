r"""Dirichlet calibration (Kull et al. 2019, "Beyond temperature scaling"), ODIR-regularised.

softmax(W log q + b) with q = softmax(z): matrix scaling of the log-probabilities rather than
of the logits (§3: the multinomial logistic regression on log q is the canonical
parametrisation of the Dirichlet family). With the ODIR penalty of §4 — off-diagonal and
intercept L2,

$$
\frac{\lambda_{od}}{K(K-1)} \sum_{i \ne j} W_{ij}^2 + \frac{\lambda_b}{K} \sum_j b_j^2,
$$

as in
:class:`~focalcal.calibration.MatrixScaling` — the mean NLL is convex in (W, b). It is fitted
as matrix scaling is (float64; Newton's method from the identity up to 20 classes, above that
block-preconditioned Newton-CG on Hessian-vector products from the diagonal-and-bias optimum) and stops when the largest gradient entry is below ``tol``
or no decrease is left at float64 resolution, i.e. at the optimum to that tolerance; a fit
that reaches ``max_iter`` first is not at the optimum and warns
(``sklearn.exceptions.ConvergenceWarning``).
"""

from __future__ import annotations

from scipy.special import log_softmax

from focalcal.calibration.scaling import MatrixScaling


class DirichletCalibration(MatrixScaling):
    """Dirichlet calibration with ODIR: softmax(weight_ @ log q + bias_), q = softmax(logits).

    Kull et al. choose λ_od = λ_b by cross-validation over a grid; the default 1e-2 is our own
    choice when no grid is searched (the papers of this project do not use this calibrator).

    Args:
        off_diagonal_l2: λ_od ≥ 0, the L2 penalty on W's off-diagonal entries (divided by
            K(K − 1), module docstring).
        bias_l2: λ_b ≥ 0, the L2 penalty on b (divided by K).
        max_iter: Maximum number of Newton steps; reaching it warns (``ConvergenceWarning``).
        tol: The fit stops when the largest gradient entry falls below it.

    Attributes:
        weight_ (np.ndarray): Float array (K, K), the linear map W of the log-probabilities.
        bias_ (np.ndarray): Float array (K,), the intercept b.
        n_classes_ (int): Number of classes K.

    Warns:
        sklearn.exceptions.ConvergenceWarning: When ``max_iter`` steps end before ``tol``.

    Examples:
        >>> import numpy as np
        >>> from focalcal.calibration import DirichletCalibration
        >>> from focalcal.metrics import ece
        >>> rng = np.random.default_rng(0)
        >>> val_labels = rng.integers(0, 3, size=500)
        >>> val_logits = 4 * (np.eye(3)[val_labels] + rng.normal(size=(500, 3)))
        >>> dirichlet = DirichletCalibration().fit(val_logits, val_labels)
        >>> dirichlet.weight_.diagonal().round(2).tolist()
        [0.25, 0.3, 0.28]
        >>> round(ece(dirichlet.transform(val_logits), val_labels), 4)
        0.0435
    """

    name = "dirichlet"

    def __init__(self, off_diagonal_l2: float = 1e-2, bias_l2: float = 1e-2, max_iter: int = 10000,
                 tol: float = 1e-10) -> None:
        super().__init__(off_diagonal_l2=off_diagonal_l2, bias_l2=bias_l2, max_iter=max_iter, tol=tol)

    def _fit(self, logits, labels):
        super()._fit(log_softmax(logits, axis=1), labels)

    def _transform(self, logits):
        return super()._transform(log_softmax(logits, axis=1))
