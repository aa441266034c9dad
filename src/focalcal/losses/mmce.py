"""Cross-entropy + λ · MMCE, the trainable calibration measure of Kumar et al. (2018).

MMCE is a kernel mean embedding of the calibration error over the batch: with top-label
confidence r_i, correctness c_i and the Laplacian kernel k(r, r') = exp(−|r − r'| / 0.4),

    MMCE² = Σ_ij w_i w_j k(r_i, r_j).

Unweighted (Kumar et al. Eq 2): w_i = (c_i − r_i)/m, the embedding of c − r. Weighted
(Kumar et al. §4, the default): the squared MMD between the correct samples weighted by
1 − r_i and the wrong ones weighted by r_j, each normalised to total weight 1 —
w_i = (1 − r_i)/Σ_correct(1 − r) for correct samples, −r_j/Σ_wrong r for wrong ones. Under
perfect calibration (P(correct | r) = r) both weighted distributions are f(r) r (1 − r), so
it vanishes; unlike the plain version it is not swamped by the majority of correct samples
in an accurate batch. Without both groups (or with zero total weight in one) it is 0.

The regulariser is √MMCE²; its gradient at exactly 0 (e.g. a single group) is taken as 0, a
subgradient of the norm. mukhoti2020 used λ = 2 for images, 8 for text.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._base import Loss, check_number


def mmce_squared(confidence: torch.Tensor, one_minus_confidence: torch.Tensor, correct: torch.Tensor,
                 *, bandwidth: float = 0.4, weighted: bool = True) -> torch.Tensor:
    """MMCE² of a batch (1-D inputs: top-label confidence, 1 − confidence, correct as bool)."""
    if weighted:
        weight_correct = torch.where(correct, one_minus_confidence, 0.0)
        weight_wrong = torch.where(correct, 0.0, confidence)
        total_correct, total_wrong = weight_correct.sum(), weight_wrong.sum()
        both = (total_correct > 0) & (total_wrong > 0)  # nothing to compare without both groups
        w = torch.where(both, weight_correct / torch.where(both, total_correct, 1.0)
                        - weight_wrong / torch.where(both, total_wrong, 1.0), 0.0)
    else:
        w = torch.where(correct, one_minus_confidence, -confidence) / confidence.numel()
    kernel = torch.exp(-(confidence.unsqueeze(0) - confidence.unsqueeze(1)).abs() / bandwidth)
    return w @ kernel @ w


def _norm_from_square(square: torch.Tensor) -> torch.Tensor:
    """√x with gradient 0 (not inf · 0) where x ≤ 0; x < 0 only by rounding of a PSD form."""
    positive = square > 0
    return torch.where(positive, torch.sqrt(torch.where(positive, square, torch.ones_like(square))),
                       torch.zeros_like(square))


class MMCELoss(Loss):
    """Per sample: −log p_y + λ · MMCE(batch). Classification logits (N, K) only.

    Args:
        lam: weight λ of the MMCE term (default 2, mukhoti2020's value for images).
        bandwidth: Laplacian kernel width (0.4 in Kumar et al.).
        weighted: weighted MMCE (default) or the plain one.
    """

    name = "mmce"

    def __init__(self, *, lam: float = 2.0, bandwidth: float = 0.4, weighted: bool = True,
                 reduction: str = "mean", ignore_index: int | None = None) -> None:
        super().__init__(reduction=reduction, ignore_index=ignore_index)
        self.lam = check_number(lam, "lam", low=0.0)
        self.bandwidth = check_number(bandwidth, "bandwidth", low=0.0, low_open=True)
        if not isinstance(weighted, bool):
            raise ValueError(f"weighted must be True or False, got {weighted!r}")
        self.weighted = weighted

    def regulariser(self, logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """√MMCE² of the samples given (logits (m, K), targets (m, 1))."""
        log_p = torch.log_softmax(logits, dim=1)
        log_conf, predicted = log_p.max(dim=1, keepdim=True)
        log_rest = torch.logsumexp(log_p.scatter(1, predicted, float("-inf")), dim=1)
        correct = predicted.squeeze(1) == index.squeeze(1)
        square = mmce_squared(log_conf.squeeze(1).exp(), log_rest.exp(), correct,
                              bandwidth=self.bandwidth, weighted=self.weighted)
        return _norm_from_square(square)

    def reduce_valid(self, logits, index, valid):
        if logits.dim() != 2:
            raise ValueError(f"mmce compares every pair of samples (quadratic in the batch), so it takes "
                             f"classification logits (N, K); got shape {tuple(logits.shape)}")
        cross_entropy = F.cross_entropy(logits, index.squeeze(1), reduction="none")
        if valid is None:
            regulariser = self.regulariser(logits, index)
        else:
            regulariser = self.regulariser(logits[valid], index[valid])
        return self._reduce(cross_entropy + self.lam * regulariser, valid)

    def hyperparameters(self):
        return {"lam": self.lam, "bandwidth": self.bandwidth, "weighted": self.weighted, **super().hyperparameters()}
