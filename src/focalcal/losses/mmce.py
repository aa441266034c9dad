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
from torch.autograd.function import once_differentiable

from . import _fused
from ._base import Loss, check_number


def mmce_squared(confidence: torch.Tensor, one_minus_confidence: torch.Tensor, correct: torch.Tensor,
                 *, bandwidth: float = 0.4, weighted: bool = True) -> torch.Tensor:
    """MMCE² of a batch (1-D inputs: top-label confidence, 1 − confidence, correct as bool).

    Differentiable by autograd; ``MMCELoss`` uses the closed-form gradient of the same quantity.
    """
    w, _ = _mmce_weights(confidence, one_minus_confidence, correct, weighted)
    kernel = torch.exp(-(confidence.unsqueeze(0) - confidence.unsqueeze(1)).abs() / bandwidth)
    return w @ kernel @ w


def _norm_from_square(square: torch.Tensor) -> torch.Tensor:
    """√x with gradient 0 (not inf · 0) where x ≤ 0; x < 0 only by rounding of a PSD form."""
    positive = square > 0
    return torch.where(positive, torch.sqrt(torch.where(positive, square, torch.ones_like(square))),
                       torch.zeros_like(square))


def _mmce_weights(confidence, one_minus_confidence, correct, weighted):
    """(w, scale) with MMCE² = wᵀ K w; scale = W_correct, W_wrong (weighted) or m, for the gradient."""
    if not weighted:
        m = confidence.numel()
        return torch.where(correct, one_minus_confidence, -confidence) / m, None
    weight_correct = torch.where(correct, one_minus_confidence, 0.0)
    weight_wrong = torch.where(correct, 0.0, confidence)
    totals = torch.stack([weight_correct.sum(), weight_wrong.sum()])
    both = bool((totals > 0).all())  # nothing to compare without both groups
    if not both:
        return torch.zeros_like(confidence), None
    return weight_correct / totals[0] - weight_wrong / totals[1], totals


class _CrossEntropyPlusMMCE(torch.autograd.Function):
    """Per sample −log p_y + λ √MMCE², with the gradient in closed form (one autograd node,
    the reduction inside it).

    With r the top-label confidence, K_ij = exp(−|r_i − r_j|/h) and v = K w:
    ∂MMCE²/∂r_k = 2 Σ_i v_i ∂w_i/∂r_k − (2/h) w_k Σ_j K_kj sign(r_k − r_j) w_j, where
    Σ_i v_i ∂w_i/∂r_k is (w·v over the correct samples − v_k)/W_correct for a correct sample,
    −(v_k + w·v over the wrong samples)/W_wrong for a wrong one (weighted), −v_k/m (plain);
    and ∂r_i/∂u_ij = r_i (e_pred − p_ij). Batch-level scalars (W, norms, w·v sums) are read
    back once as Python floats: fewer tiny kernels than 0-d tensor arithmetic.
    """

    @staticmethod
    def forward(ctx, logits, index, lam, bandwidth, weighted, reduction):
        log_p = torch.log_softmax(logits, dim=1)
        p = log_p.exp()
        confidence, predicted = p.max(dim=1)
        predicted = predicted.unsqueeze(1)
        one_minus = p.scatter(1, predicted, 0.0).sum(dim=1)  # 1 − r exactly
        labels = index.view(-1)
        correct = predicted.view(-1) == labels
        m = confidence.numel()
        if weighted:
            correct_f = correct.to(logits.dtype)
            # Group weights: 1 − r for correct samples, r for wrong ones; W = their group sums.
            groups = torch.stack([correct_f, torch.rsub(correct_f, 1.0)])
            values = torch.where(correct, one_minus, confidence)
            total_correct, total_wrong = torch.mv(groups, values).tolist()
            both = total_correct > 0 and total_wrong > 0  # nothing to compare without both groups
            inverse = (1 / total_correct, 1 / total_wrong) if both else (0.0, 0.0)
            # w = values/W_correct (correct) or −values/W_wrong (wrong)
            w = values * correct_f.mul(inverse[0] + inverse[1]).sub_(inverse[1])
        else:
            correct_f, groups, total_correct, total_wrong = None, None, 0.0, 0.0
            w = torch.where(correct, one_minus, confidence.neg()).div_(m)
        difference = confidence.unsqueeze(1) - confidence.unsqueeze(0)
        kernel = torch.exp(difference.abs().div_(-bandwidth))
        v = torch.mv(kernel, w)
        norm = max(float(torch.dot(w, v)), 0.0) ** 0.5  # a PSD form: < 0 only by rounding
        ctx.save_for_backward(p, index, predicted, confidence, correct_f, groups, w, v, kernel, difference)
        ctx.scalars = (lam, bandwidth, weighted, reduction, m, norm, total_correct, total_wrong)
        if reduction == "none":
            return log_p.gather(1, index).view(-1).neg_().add_(lam * norm)
        cross_entropy = F.nll_loss(log_p, labels, reduction=reduction)
        return cross_entropy.add_(lam * norm * (m if reduction == "sum" else 1))

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        p, index, predicted, confidence, correct_f, groups, w, v, kernel, difference = ctx.saved_tensors
        lam, bandwidth, weighted, reduction, m, norm, total_correct, total_wrong = ctx.scalars
        if reduction == "none":
            per_sample = grad_output.unsqueeze(1)
            total = float(grad_output.sum())
        else:
            total = float(grad_output) * (m if reduction == "sum" else 1.0)
            per_sample = total / m
        grad = p.scatter_add(1, index, torch.full_like(p[:, :1], -1.0)).mul_(per_sample)  # p − e_y
        if not norm > 0:
            return grad, None, None, None, None, None
        if weighted:
            vw_correct, vw_wrong = torch.mv(groups, v * w).tolist()
            inverse_correct, inverse_wrong = 1 / total_correct, 1 / total_wrong
            # (Σ_correct vw − v)/W_correct for correct samples, −(v + Σ_wrong vw)/W_wrong for wrong ones
            slope = correct_f.mul(inverse_wrong - inverse_correct).sub_(inverse_wrong)
            offset = correct_f.mul(vw_correct * inverse_correct + vw_wrong * inverse_wrong).sub_(vw_wrong * inverse_wrong)
            through_w = torch.addcmul(offset, v, slope)
        else:
            through_w = v / -m
        through_kernel = torch.mv(kernel * difference.sign(), w)
        d_square = torch.addcmul(through_w, w, through_kernel, value=-1.0 / bandwidth)  # half of ∂MMCE²/∂r
        d_confidence = d_square.mul_(confidence).mul_(lam * total / norm).unsqueeze(1)  # times r_i
        grad.addcmul_(p, d_confidence, value=-1.0)
        grad.scatter_add_(1, predicted, d_confidence)
        return grad, None, None, None, None, None


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
        if valid is None and self.reduction != "none" and _fused.usable(logits):
            return _fused.cross_entropy_mmce(logits, index, self.lam, self.bandwidth, self.weighted,
                                             reduction=self.reduction)
        if valid is None:
            return _CrossEntropyPlusMMCE.apply(logits, index, self.lam, self.bandwidth, self.weighted, self.reduction)
        # Ignored samples: the regulariser is over the valid ones; they get 0 as every loss does.
        per_sample = _CrossEntropyPlusMMCE.apply(logits[valid], index[valid], self.lam, self.bandwidth,
                                                 self.weighted, "none")
        loss = torch.zeros(valid.shape, dtype=per_sample.dtype, device=per_sample.device).masked_scatter(valid, per_sample)
        return self._reduce(loss.unsqueeze(1), valid)

    def hyperparameters(self):
        return {"lam": self.lam, "bandwidth": self.bandwidth, "weighted": self.weighted, **super().hyperparameters()}
