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

    def _forward_trusted(self, logits, target):
        # Targets checked once, none ignored: straight to the fused kernel (the trainer's
        # per-batch call; the generic path adds a few view ops per batch).
        if self.ignore_index is None and logits.dtype in (torch.float32, torch.float64) and target.dtype == torch.long:
            return F.cross_entropy(logits, target, reduction=self.reduction)
        return super()._forward_trusted(logits, target)

    def reduce_valid(self, logits, index, valid):
        if valid is None and self.reduction != "none":  # torch's fused reduction: one kernel less
            return F.cross_entropy(logits, index.squeeze(1), reduction=self.reduction)
        return super().reduce_valid(logits, index, valid)
