"""Cross-entropy, the baseline every other loss is compared with."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._base import Loss


class CrossEntropyLoss(Loss):
    r"""Cross-entropy $\ell = -\log p_y$, the negative log-likelihood of the softmax.

    Args:
        reduction: ``"mean"`` (over non-ignored samples/pixels), ``"sum"``, or ``"none"``
            (one value per sample/pixel).
        ignore_index: target value whose samples/pixels are left out; ``None`` (default)
            means none.

    Examples:
        >>> import torch
        >>> from focalcal.losses import CrossEntropyLoss
        >>> logits = torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.3, 1.2]])
        >>> targets = torch.tensor([0, 1])
        >>> loss = CrossEntropyLoss()
        >>> print(f"{loss(logits, targets).item():.4f}")
        0.8474
    """

    name = "cross_entropy"

    def elementwise(self, logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        r"""The cross-entropy of each element.

        Args:
            logits: float logits, (N, K, *spatial).
            index: target class indices, (N, 1, *spatial), every one a valid class.

        Returns:
            $-\log p_y$ of each element, (N, 1, *spatial).
        """
        return F.cross_entropy(logits, index.squeeze(1), reduction="none").unsqueeze(1)

    def _forward_trusted(self, logits, target):
        # Targets checked once, none ignored: straight to the fused kernel (the trainer's
        # per-batch call; the generic path adds a few view ops per batch).
        if self.ignore_index is None and logits.dtype in (torch.float32, torch.float64) and target.dtype == torch.long:
            return F.cross_entropy(logits, target, reduction=self.reduction)
        return super()._forward_trusted(logits, target)

    def reduce_valid(self, logits: torch.Tensor, index: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
        """The reduced cross-entropy; torch's fused reduction where no element is ignored.

        Args:
            logits: float logits, (N, K, *spatial).
            index: target class indices, (N, 1, *spatial), ignored ones replaced by class 0.
            valid: which elements count, (N, *spatial) booleans, or None when all do.

        Returns:
            A 0-d tensor, or (N,) / (N, *spatial) for ``reduction="none"``.
        """
        if valid is None and self.reduction != "none":  # torch's fused reduction: one kernel less
            return F.cross_entropy(logits, index.squeeze(1), reduction=self.reduction)
        return super().reduce_valid(logits, index, valid)
