"""Vector and matrix scaling (Guo et al. 2017): softmax(w ⊙ z + b) and softmax(W z + b).

Fitted by full-batch L-BFGS with strong-Wolfe line search on the mean validation NLL in
float64 (torch, imported only when fitting), starting from the identity map. Matrix scaling
has K² + K parameters and overfits with many classes; ``off_diagonal_l2``/``bias_l2`` add the
ODIR penalty of Kull et al. 2019 ("Beyond temperature scaling", Dirichlet calibration):
λ_od / (K(K−1)) Σ_{i≠j} W_ij² + λ_b / K Σ_j b_j².
"""

from __future__ import annotations

import numbers

from scipy.special import softmax

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
        import torch

        n_classes = logits.shape[1]
        scale = torch.ones(n_classes, dtype=torch.float64, requires_grad=True)
        bias = torch.zeros(n_classes, dtype=torch.float64, requires_grad=True)

        def penalty():
            return self.l2 / n_classes * (((scale - 1) ** 2).sum() + (bias**2).sum())

        _fit_lbfgs([scale, bias], logits, labels, lambda z: z * scale + bias, penalty, self.max_iter)
        self.scale_ = scale.detach().numpy().copy()
        self.bias_ = bias.detach().numpy().copy()

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
