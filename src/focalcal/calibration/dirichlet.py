"""Dirichlet calibration (Kull et al. 2019, "Beyond temperature scaling"), ODIR-regularised.

softmax(W log q + b) with q = softmax(z): matrix scaling of the log-probabilities rather than
of the logits (§3: the multinomial logistic regression on log q is the canonical
parametrisation of the Dirichlet family). With the ODIR penalty of §4 — off-diagonal and
intercept L2, λ_od / (K(K−1)) Σ_{i≠j} W_ij² + λ_b / K Σ_j b_j², as in
:class:`~focalcal.calibration.MatrixScaling` — the mean NLL is convex in (W, b). It is fitted
as matrix scaling is (float64 from the identity; Newton's method up to 20 classes, Newton-CG
on Hessian-vector products above) and stops when the largest gradient entry is below ``tol``
or no decrease is left at float64 resolution, i.e. at the optimum to that tolerance; a fit
that reaches ``max_iter`` first is not at the optimum and warns
(``sklearn.exceptions.ConvergenceWarning``).
"""

from __future__ import annotations

from scipy.special import log_softmax

from focalcal.calibration.scaling import MatrixScaling


class DirichletCalibration(MatrixScaling):
    """Dirichlet calibration with ODIR: fitted ``weight_`` (K × K) and ``bias_`` (K,) act on log q.

    Kull et al. choose λ_od = λ_b by cross-validation over a grid; the default 1e-2 is our own
    choice when no grid is searched (the papers of this project do not use this calibrator).
    """

    name = "dirichlet"

    def __init__(self, off_diagonal_l2: float = 1e-2, bias_l2: float = 1e-2, max_iter: int = 10000,
                 tol: float = 1e-10):
        super().__init__(off_diagonal_l2=off_diagonal_l2, bias_l2=bias_l2, max_iter=max_iter, tol=tol)

    def _fit(self, logits, labels):
        super()._fit(log_softmax(logits, axis=1), labels)

    def _transform(self, logits):
        return super()._transform(log_softmax(logits, axis=1))
