"""Vector and matrix scaling (Guo et al. 2017): softmax(w ⊙ z + b) and softmax(W z + b).

Both minimise the mean validation NLL in float64 from the identity map; the problem is convex
in the parameters (the logits are linear in them). Vector scaling's 2K parameters are fitted
by damped Newton steps with the exact Hessian (a (2K, 2K) system from three (N, K)ᵀ(N, K)
products; ~10 steps, a few ms each, where L-BFGS took ~350 evaluations for K = 100). Matrix
scaling's K² + K are fitted by full-batch L-BFGS with strong-Wolfe line search (torch,
imported only when fitting). Matrix scaling
has K² + K parameters and overfits with many classes; ``off_diagonal_l2``/``bias_l2`` add the
ODIR penalty of Kull et al. 2019 ("Beyond temperature scaling", Dirichlet calibration):
λ_od / (K(K−1)) Σ_{i≠j} W_ij² + λ_b / K Σ_j b_j².
"""

from __future__ import annotations

import numbers

import numpy as np
from scipy.special import log_softmax, softmax

from focalcal.calibration._base import Calibrator


def _check_penalty(value, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value < float("inf"):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


def _check_max_iter(value) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"max_iter must be a positive integer, got {value!r}")


def _fit_lbfgs(parameters, logits, labels, predict, penalty, max_iter: int) -> None:
    """Minimise mean NLL(predict(logits)) + penalty() over ``parameters`` in place."""
    import torch

    logits_t = torch.as_tensor(logits, dtype=torch.float64)
    labels_t = torch.as_tensor(labels, dtype=torch.int64)
    optimiser = torch.optim.LBFGS(
        parameters,
        lr=1.0,
        max_iter=max_iter,
        tolerance_grad=1e-9,
        tolerance_change=1e-14,
        history_size=20,
        line_search_fn="strong_wolfe",
    )

    def closure():
        optimiser.zero_grad()
        loss = torch.nn.functional.cross_entropy(predict(logits_t), labels_t) + penalty()
        loss.backward()
        return loss

    optimiser.step(closure)
    for parameter in parameters:
        if not torch.isfinite(parameter).all():
            raise RuntimeError("scaling fit diverged (non-finite parameters); try a positive L2 penalty")


def _vector_scaling_objective(scale, bias, logits, labels, l2: float):
    """Mean NLL of softmax(scale ⊙ z + bias) plus the L2 penalty, and the probabilities."""
    n, n_classes = logits.shape
    log_probs = log_softmax(logits * scale + bias, axis=1)
    nll = -log_probs[np.arange(n), labels].mean()
    penalty = l2 / n_classes * (((scale - 1) ** 2).sum() + (bias**2).sum())
    return nll + penalty, np.exp(log_probs)


def _fit_vector_scaling_newton(logits, labels, l2: float, max_iter: int):
    """(scale, bias) minimising mean NLL + (l2/K)(‖scale − 1‖² + ‖bias‖²) by Newton's method.

    With p the calibrated probabilities, r = p − onehot(y) and A = z ⊙ p (all (N, K)), the
    gradient is (mean z ⊙ r, mean r) and the Hessian's blocks are
    diag(mean z²p) − AᵀA/N, diag(mean A) − AᵀP/N and diag(mean p) − PᵀP/N (plus 2l2/K · I).
    Adding a constant to every bias changes nothing, so without a penalty the Hessian is
    singular along that direction; the gradient has no component there, and a tiny ridge
    keeps the step out of it (Σ bias stays 0). Steps are halved until the objective falls; the fit stops at a gradient below 1e-12.
    """
    n, n_classes = logits.shape
    one_hot = np.zeros_like(logits)
    one_hot[np.arange(n), labels] = 1.0
    ridge = 2 * l2 / n_classes
    scale, bias = np.ones(n_classes), np.zeros(n_classes)
    value, probs = _vector_scaling_objective(scale, bias, logits, labels, l2)
    for _ in range(max_iter):
        residual = probs - one_hot
        gradient = np.concatenate([(logits * residual).mean(axis=0) + ridge * (scale - 1),
                                   residual.mean(axis=0) + ridge * bias])
        weighted = logits * probs
        hessian = np.block([
            [np.diag((logits * weighted).mean(axis=0)) - weighted.T @ weighted / n,
             np.diag(weighted.mean(axis=0)) - weighted.T @ probs / n],
            [np.diag(weighted.mean(axis=0)) - probs.T @ weighted / n,
             np.diag(probs.mean(axis=0)) - probs.T @ probs / n],
        ])
        hessian[np.diag_indices_from(hessian)] += ridge + 1e-12 * max(float(np.trace(hessian)) / (2 * n_classes), 1.0)
        if np.abs(gradient).max() < 1e-12:
            break
        step = np.linalg.solve(hessian, gradient)
        decrease = float(gradient @ step)  # the Newton decrement
        size = 1.0
        while size > 1e-10:
            new_scale, new_bias = scale - size * step[:n_classes], bias - size * step[n_classes:]
            new_value, new_probs = _vector_scaling_objective(new_scale, new_bias, logits, labels, l2)
            # Below a decrement of 1e-12 the objective's change is lost in its rounding: there
            # Newton's full step (quadratic convergence) is taken without the sufficient-decrease test.
            if new_value <= value - 1e-4 * size * decrease or (decrease < 1e-12 and size == 1.0):
                break
            size /= 2
        else:
            break  # no decrease left at float64 resolution
        scale, bias, value, probs = new_scale, new_bias, new_value, new_probs
    if not (np.isfinite(scale).all() and np.isfinite(bias).all()):
        raise RuntimeError("vector scaling fit diverged (non-finite parameters); try a positive L2 penalty")
    return scale, bias


class VectorScaling(Calibrator):
    """softmax(scale_ ⊙ logits + bias_): one scale and one bias per class.

    ``l2`` penalises (l2 / K) (Σ (scale − 1)² + Σ bias²), shrinking toward the identity.
    """

    name = "vector_scaling"
    _fitted_attributes = ("scale_", "bias_")

    def __init__(self, l2: float = 0.0, max_iter: int = 500):
        self.l2 = l2
        self.max_iter = max_iter

    def _check_params(self):
        _check_penalty(self.l2, "l2")
        _check_max_iter(self.max_iter)

    def _fit(self, logits, labels):
        self.scale_, self.bias_ = _fit_vector_scaling_newton(np.asarray(logits, dtype=np.float64),
                                                             np.asarray(labels, dtype=np.int64), self.l2, self.max_iter)

    def _transform(self, logits):
        return softmax(logits * self.scale_ + self.bias_, axis=1)


class MatrixScaling(Calibrator):
    """softmax(logits @ weight_.T + bias_): a full K × K linear map of the logits.

    ``off_diagonal_l2`` and ``bias_l2`` are the ODIR penalties of Kull et al. 2019 (both 0:
    plain matrix scaling of Guo et al. 2017).
    """

    name = "matrix_scaling"
    _fitted_attributes = ("weight_", "bias_")

    def __init__(self, off_diagonal_l2: float = 0.0, bias_l2: float = 0.0, max_iter: int = 500):
        self.off_diagonal_l2 = off_diagonal_l2
        self.bias_l2 = bias_l2
        self.max_iter = max_iter

    def _check_params(self):
        _check_penalty(self.off_diagonal_l2, "off_diagonal_l2")
        _check_penalty(self.bias_l2, "bias_l2")
        _check_max_iter(self.max_iter)

    def _fit(self, logits, labels):
        import torch

        n_classes = logits.shape[1]
        weight = torch.eye(n_classes, dtype=torch.float64, requires_grad=True)
        bias = torch.zeros(n_classes, dtype=torch.float64, requires_grad=True)
        off_diagonal = ~torch.eye(n_classes, dtype=torch.bool)

        def penalty():
            off = (weight[off_diagonal] ** 2).sum() / (n_classes * (n_classes - 1))
            return self.off_diagonal_l2 * off + self.bias_l2 * (bias**2).sum() / n_classes

        _fit_lbfgs([weight, bias], logits, labels, lambda z: z @ weight.T + bias, penalty, self.max_iter)
        self.weight_ = weight.detach().numpy().copy()
        self.bias_ = bias.detach().numpy().copy()

    def _transform(self, logits):
        return softmax(logits @ self.weight_.T + self.bias_, axis=1)
