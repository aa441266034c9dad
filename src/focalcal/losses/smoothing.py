"""Label-smoothed cross-entropy (Müller et al. 2019) with mukhoti2020's smoothing (§5.1)."""

from __future__ import annotations

import torch

from ._base import Loss, check_number
from ._classwise import classwise_loss


class LabelSmoothingLoss(Loss):
    """Cross-entropy against s_i = (1 − α) q_i + α (1 − q_i)/(K − 1), q the one-hot target.

    The true class keeps 1 − α and the other K − 1 classes share α, so α = 0 is cross-entropy.
    Per element: −(1 − α) log p_y − α/(K − 1) Σ_{i≠y} log p_i. Default α = 0.05 (LS-0.05, the
    better of the two values mukhoti2020 tried).
    """

    name = "label_smoothing"

    def __init__(self, *, smoothing: float = 0.05, reduction: str = "mean", ignore_index: int | None = None) -> None:
        super().__init__(reduction=reduction, ignore_index=ignore_index)
        self.smoothing = check_number(smoothing, "smoothing", low=0.0, high=1.0, high_open=True)

    def elementwise(self, logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return self.reduced(logits, index, "none")

    def reduced(self, logits, index, reduction):
        keep, share = 1.0 - self.smoothing, self.smoothing / (logits.shape[1] - 1)

        def spec(parts):
            log_p = parts.log_p
            loss = -(keep - share) * log_p.gather(1, index) - share * log_p.sum(dim=1, keepdim=True)
            slope = torch.full_like(log_p, -share).scatter_(1, index, -keep)  # ∂L/∂log p_i = −s_i
            return loss, slope, None

        return classwise_loss(logits, spec, reduction=reduction)

    def hyperparameters(self):
        return {"smoothing": self.smoothing, **super().hyperparameters()}
