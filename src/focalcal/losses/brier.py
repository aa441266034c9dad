"""Brier score as a training loss (Brier 1950; mukhoti2020 §5.1)."""

from __future__ import annotations

import torch

from ._base import Loss


class BrierLoss(Loss):
    """Σ_k (p_k − e_{y,k})², the squared distance between the softmax and the one-hot target.

    Summed over classes, averaged over samples (as in mukhoti2020); it lies in [0, 2].
    """

    name = "brier"

    def elementwise(self, logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        error = torch.softmax(logits, dim=1)
        error = error.scatter_add(1, index, torch.full(index.shape, -1.0, dtype=error.dtype, device=error.device))
        return error.square().sum(dim=1, keepdim=True)
