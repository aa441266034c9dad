"""Brier score as a training loss (Brier 1950; mukhoti2020 §5.1)."""

from __future__ import annotations

import torch

from ._base import Loss


class BrierLoss(Loss):
    r"""Brier score $\sum_k (p_k - e_{y,k})^2$, the squared distance between the softmax and the one-hot target.

    Summed over classes, averaged over samples (as in mukhoti2020); it lies in [0, 2].

    Args:
        reduction: ``"mean"`` (over samples), ``"sum"``, or ``"none"`` (one value per sample).
        ignore_index: target value whose samples are left out; ``None`` (default) means none.

    Examples:
        >>> import torch
        >>> from focalcal.losses import BrierLoss
        >>> logits = torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.3, 1.2]])
        >>> targets = torch.tensor([0, 1])
        >>> loss = BrierLoss()
        >>> print(f"{loss(logits, targets).item():.4f}")
        0.5163
    """

    name = "brier"

    def elementwise(self, logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """The Brier score of each element.

        Args:
            logits: float logits, (N, K, *spatial).
            index: target class indices, (N, 1, *spatial), every one a valid class.

        Returns:
            The score of each element, (N, 1, *spatial), in [0, 2].
        """
        error = torch.softmax(logits, dim=1)
        error = error.scatter_add(1, index, torch.full(index.shape, -1.0, dtype=error.dtype, device=error.device))
        return error.square().sum(dim=1, keepdim=True)
