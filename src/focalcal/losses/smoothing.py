"""Label-smoothed cross-entropy (Müller et al. 2019), in either of the papers' conventions.

Two conventions give the same α different targets (q the one-hot target, K classes):

* ``"wrong_classes"`` — mukhoti2020 §5.1: s = (1 − α) q + α (1 − q)/(K − 1); the true class
  keeps 1 − α and the K − 1 wrong classes share α. mukhoti2020's LS-0.05 means this.
* ``"uniform"`` — Müller et al. 2019, which charoenphakdee2021 cites for its LS paradigm:
  s = (1 − α) q + α/K; α is spread over all K classes, so the true class keeps 1 − α + α/K.
  torch's ``cross_entropy(label_smoothing=α)`` is this one.

The uniform target with α is the wrong-classes target with α' = α (K − 1)/K (both give each
wrong class α/K), so every loss implements the wrong-classes form only and converts α at
forward time, when K is known (``wrong_classes_smoothing``): one kernel for both.
"""

from __future__ import annotations

import numbers
from typing import ClassVar

import torch

from focalcal.core.constraints import Interval, Options

from ._base import Loss
from ._classwise import classwise_loss

CONVENTIONS = ("wrong_classes", "uniform")
#: What the smoothing parameters of every loss may hold (α = 1 would leave no weight on the true class).
SMOOTHING_CONSTRAINTS = {"smoothing": [Interval(numbers.Real, 0, 1, closed="left")],
                         "convention": [Options(CONVENTIONS)]}


def wrong_classes_smoothing(smoothing: float, num_classes: int, convention: str) -> float:
    r"""The α of the wrong-classes target (true class $1 - \alpha$, others $\alpha/(K - 1)$) that
    equals the smoothed target of ``convention`` with ``smoothing``.

    Args:
        smoothing: the label-smoothing α of ``convention``, in [0, 1).
        num_classes: the number of classes K.
        convention: ``"wrong_classes"`` (returned as is) or ``"uniform"`` (converted to
            $\alpha (K - 1)/K$).

    Returns:
        The wrong-classes α, a float in [0, 1).

    Examples:
        >>> from focalcal.losses.smoothing import wrong_classes_smoothing
        >>> wrong_classes_smoothing(0.1, num_classes=10, convention="uniform")
        0.09
        >>> wrong_classes_smoothing(0.1, num_classes=10, convention="wrong_classes")
        0.1
    """
    if convention == "uniform":
        return smoothing * (num_classes - 1) / num_classes
    return smoothing


class LabelSmoothingLoss(Loss):
    r"""Cross-entropy against the smoothed one-hot target s of ``convention`` (module docstring).

    In the wrong-classes form $s_i = (1 - \alpha) q_i + \alpha (1 - q_i)/(K - 1)$, α = 0 is
    cross-entropy. Per element:

    $$
    \ell = -(1 - \alpha) \log p_y - \frac{\alpha}{K - 1} \sum_{i \ne y} \log p_i.
    $$

    Args:
        smoothing: the label-smoothing α, in [0, 1). Default 0.05 (LS-0.05, the better of the
            two values mukhoti2020 tried).
        convention: what α means: ``"wrong_classes"`` (default, mukhoti2020's: the K − 1 wrong
            classes share α) or ``"uniform"`` (Müller et al.'s $(1 - \alpha) q + \alpha/K$, as
            torch's ``cross_entropy(label_smoothing=α)``).
        reduction: ``"mean"`` (over non-ignored samples/pixels), ``"sum"``, or ``"none"``
            (one value per sample/pixel).
        ignore_index: target value whose samples/pixels are left out; ``None`` (default)
            means none.

    Examples:
        >>> import torch
        >>> from focalcal.losses import LabelSmoothingLoss
        >>> logits = torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.3, 1.2]])
        >>> targets = torch.tensor([0, 1])
        >>> loss = LabelSmoothingLoss(smoothing=0.1)
        >>> print(f"{loss(logits, targets).item():.4f}")
        0.9424
        >>> uniform = LabelSmoothingLoss(smoothing=0.1, convention="uniform")
        >>> print(f"{uniform(logits, targets).item():.4f}")
        0.9108
    """

    name = "label_smoothing"
    _parameter_constraints: ClassVar[dict] = {**Loss._parameter_constraints, **SMOOTHING_CONSTRAINTS}

    def __init__(self, *, smoothing: float = 0.05, convention: str = "wrong_classes", reduction: str = "mean",
                 ignore_index: int | None = None) -> None:
        super().__init__(reduction=reduction, ignore_index=ignore_index)
        self._validate(smoothing=smoothing, convention=convention)
        self.smoothing = float(smoothing)
        self.convention = convention

    def elementwise(self, logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """The smoothed cross-entropy of each element.

        Args:
            logits: float logits, (N, K, *spatial).
            index: target class indices, (N, 1, *spatial), every one a valid class.

        Returns:
            The loss of each element, (N, 1, *spatial).
        """
        return self.reduced(logits, index, "none")

    def reduced(self, logits: torch.Tensor, index: torch.Tensor, reduction: str) -> torch.Tensor:
        """The smoothed cross-entropy, reduced inside its one autograd node.

        Args:
            logits: float logits, (N, K, *spatial).
            index: target class indices, (N, 1, *spatial), every one a valid class.
            reduction: ``"mean"``, ``"sum"`` or ``"none"``.

        Returns:
            A 0-d tensor, or (N, 1, *spatial) for ``"none"``.
        """
        smoothing = wrong_classes_smoothing(self.smoothing, logits.shape[1], self.convention)
        keep, share = 1.0 - smoothing, smoothing / (logits.shape[1] - 1)

        def spec(parts):
            log_p = parts.log_p
            loss = -(keep - share) * log_p.gather(1, index) - share * log_p.sum(dim=1, keepdim=True)
            slope = torch.full_like(log_p, -share).scatter_(1, index, -keep)  # ∂L/∂log p_i = −s_i
            return loss, slope, None

        return classwise_loss(logits, spec, reduction=reduction)

    def hyperparameters(self) -> dict[str, object]:
        """The constructor arguments that define this loss.

        Returns:
            Constructor parameter name -> value.
        """
        return {"smoothing": self.smoothing, "convention": self.convention, **super().hyperparameters()}
