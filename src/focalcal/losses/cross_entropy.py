"""Cross-entropy, the baseline every other loss is compared with."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._base import Loss


class CrossEntropyLoss(Loss):
    """ℓ = −log p_y (negative log-likelihood of the softmax)."""

    name = "cross_entropy"

    def elementwise(self, logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, index.squeeze(1), reduction="none").unsqueeze(1)

    def reduce_valid(self, logits, index, valid):
        if valid is None and self.reduction != "none":  # torch's fused reduction: one kernel less
            return F.cross_entropy(logits, index.squeeze(1), reduction=self.reduction)
        return super().reduce_valid(logits, index, valid)
