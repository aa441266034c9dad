"""Cross-entropy + λ · MMCE, the trainable calibration measure of Kumar et al. (2018).

MMCE is a kernel mean embedding of the calibration error over the batch: with top-label
confidence r_i, correctness c_i and the Laplacian kernel k(r, r') = exp(−|r − r'| / 0.4),

    MMCE² = Σ_ij w_i w_j k(r_i, r_j).

Unweighted (Kumar et al. Eq 2): w_i = (c_i − r_i)/m, the embedding of c − r; the regulariser
is √MMCE². Weighted (Kumar et al. §4, the default): an MMD between the m correct samples,
weighted by 1 − r_i, and the n wrong ones, weighted by r_j. Two normalisations of its groups:

``normalization="count"`` (default) — the estimator of the released code, Kumar et al.'s
(github.com/aviralkumar2907/MMCE, ``calibration_mmce_w_loss``) and mukhoti2020's
(github.com/torrvision/focal_calibration, ``Losses/mmce.py``, ``MMCE_weighted``), which is
what mukhoti2020's λ = 2 was tuned with. Each group's kernel sum is a *mean over its pairs*
and is then divided by the pair count once more:

    MMCE_w² = S_cc / (m² (m² + 10⁻⁵)) + S_ww / (n² (n² + 10⁻⁵)) − 2 S_cw / (m n (m n + 10⁻⁵)),
    S_cc = Σ_{i,j correct} (1 − r_i)(1 − r_j) k,  S_ww = Σ_{i,j wrong} r_i r_j k,
    S_cw = Σ_{i correct, j wrong} (1 − r_i) r_j k,

and the regulariser is √(MMCE_w² + 10⁻¹⁰) (their ε), 0 with zero gradient when a group is
empty. The 10⁻⁵'s make the form slightly indefinite (by O(10⁻⁵ MMCE_w²)): where the released
code's root would be NaN, the value under it is clamped at 0. Up to the ε's it is the quadratic
form of w_i = (1 − r_i)/m² (correct), −r_j/n² (wrong): small in an accurate batch (about the
wrong samples' mean confidence over n), largest when one sample of the batch is wrong (then
≈ its confidence, whatever the batch size), and not a calibration measure in the strict
sense — it does not vanish under perfect calibration unless m = n.

``normalization="weight"`` — an alternative estimator: the squared MMD between
the two weighted groups each normalised to total weight 1, w_i = (1 − r_i)/Σ_correct(1 − r)
and −r_j/Σ_wrong r. Under perfect calibration (P(correct | r) = r) both weighted
distributions are f(r) r (1 − r), so it vanishes; unlike the plain version it is not swamped
by the majority of correct samples in an accurate batch. It is several times the released
estimator (2–20× in √ on batches of 128), and so is its gradient: with λ = 2 on a freshly
initialised network its gradient is ~10× the cross-entropy's (the released estimator's ~0.1×)
and holds the network at the uniform prediction, which is perfectly calibrated — the default
config's MMCE run never left chance with it. Without both groups (or with zero total weight
in one) it is 0; the regulariser is √MMCE² with gradient 0 at exactly 0, a subgradient of
the norm.

``normalization`` applies to the weighted estimator only. mukhoti2020 used λ = 2 for
images, 8 for text.
"""

from __future__ import annotations

from typing import ClassVar

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from focalcal.core.constraints import NON_NEGATIVE, POSITIVE, Options

from . import _fused
from ._base import Loss, avoid_host_sync

NORMALIZATIONS = ("count", "weight")
#: The released code's constants: added to each count product, and under the square root.
COUNT_EPSILON = 1e-5
ROOT_EPSILON = 1e-10


def mmce_squared(confidence: torch.Tensor, one_minus_confidence: torch.Tensor, correct: torch.Tensor,
                 *, bandwidth: float = 0.4, weighted: bool = True, normalization: str = "count") -> torch.Tensor:
    r"""$\mathrm{MMCE}^2 = \sum_{ij} w_i w_j k(r_i, r_j)$ of a batch (the module docstring gives the weights).

    Differentiable by autograd; ``MMCELoss`` uses the closed-form gradient of the same quantity.
    For the weighted "count" estimator this is the released code's value under its square root,
    before the 10⁻¹⁰ (0 when a group is empty); ``mmce_norm`` gives the regulariser.

    Args:
        confidence: each sample's top-label confidence r, (m,).
        one_minus_confidence: 1 − r computed without cancellation, (m,).
        correct: whether each sample's prediction is right, (m,) booleans.
        bandwidth: width h of the Laplacian kernel $e^{-|r - r'|/h}$ (0.4 in Kumar et al.).
        weighted: the weighted MMCE (default) or the plain one.
        normalization: of the weighted estimator's groups, ``"count"`` (default, the released
            code's) or ``"weight"``.

    Returns:
        MMCE², a 0-d tensor.

    Raises:
        ValueError: if ``normalization`` is not one of the two.

    Examples:
        >>> import torch
        >>> from focalcal.losses.mmce import mmce_squared
        >>> confidence = torch.tensor([0.9, 0.8, 0.6, 0.7], dtype=torch.float64)
        >>> correct = torch.tensor([True, True, False, True])
        >>> square = mmce_squared(confidence, 1 - confidence, correct, normalization="weight")
        >>> print(f"{square.item():.4f}")
        0.4955
    """
    kernel = torch.exp(-(confidence.unsqueeze(0) - confidence.unsqueeze(1)).abs() / bandwidth)
    if weighted and _check_normalization(normalization) == "count":
        m = int(correct.sum())
        n = correct.numel() - m
        if m == 0 or n == 0:
            return torch.zeros((), dtype=confidence.dtype, device=confidence.device)
        a, b, c = _count_coefficients(m, n)
        u_correct = torch.where(correct, one_minus_confidence, 0.0)
        u_wrong = torch.where(correct, 0.0, confidence)
        return (a * (u_correct @ kernel @ u_correct) + b * (u_wrong @ kernel @ u_wrong)
                - 2 * c * (u_correct @ kernel @ u_wrong))
    w, _ = _mmce_weights(confidence, one_minus_confidence, correct, weighted)
    return w @ kernel @ w


def mmce_norm(confidence: torch.Tensor, one_minus_confidence: torch.Tensor, correct: torch.Tensor,
              *, bandwidth: float = 0.4, weighted: bool = True, normalization: str = "count") -> torch.Tensor:
    r"""The regulariser MMCE of a batch, by autograd.

    It is $\sqrt{\mathrm{MMCE}^2 + 10^{-10}}$ for the released "count" estimator (0 without
    both groups), else $\sqrt{\mathrm{MMCE}^2}$ (gradient 0 at 0).

    Args:
        confidence: each sample's top-label confidence r, (m,).
        one_minus_confidence: 1 − r computed without cancellation, (m,).
        correct: whether each sample's prediction is right, (m,) booleans.
        bandwidth: width h of the Laplacian kernel $e^{-|r - r'|/h}$ (0.4 in Kumar et al.).
        weighted: the weighted MMCE (default) or the plain one.
        normalization: of the weighted estimator's groups, ``"count"`` (default, the released
            code's) or ``"weight"``.

    Returns:
        MMCE, a 0-d tensor.

    Raises:
        ValueError: if ``normalization`` is not one of the two.

    Examples:
        >>> import torch
        >>> from focalcal.losses.mmce import mmce_norm
        >>> confidence = torch.tensor([0.9, 0.8, 0.6, 0.7], dtype=torch.float64)
        >>> correct = torch.tensor([True, True, False, True])
        >>> print(f"{mmce_norm(confidence, 1 - confidence, correct).item():.4f}")
        0.5569
        >>> print(f"{mmce_norm(confidence, 1 - confidence, correct, normalization='weight').item():.4f}")
        0.7039
    """
    square = mmce_squared(confidence, one_minus_confidence, correct, bandwidth=bandwidth, weighted=weighted,
                          normalization=normalization)
    if weighted and normalization == "count":
        m = int(correct.sum())
        if m == 0 or m == correct.numel():
            return square  # 0, with zero gradient
        return _norm_from_square(square + ROOT_EPSILON)  # 0, gradient 0, where the ε's make it < 0
    return _norm_from_square(square)


def _check_normalization(normalization) -> str:
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"normalization must be one of {list(NORMALIZATIONS)}, got {normalization!r}")
    return normalization


def _count_coefficients(m: int, n: int) -> tuple[float, float, float]:
    """The released code's factors of S_cc, S_ww and S_cw: a pair mean, then ÷(count + 10⁻⁵)."""
    m, n = float(m), float(n)
    return (1.0 / (m * m * (m * m + COUNT_EPSILON)), 1.0 / (n * n * (n * n + COUNT_EPSILON)),
            1.0 / (m * n * (m * n + COUNT_EPSILON)))


def _norm_from_square(square: torch.Tensor) -> torch.Tensor:
    """√x with gradient 0 (not inf · 0) where x ≤ 0; x < 0 only by rounding of a PSD form."""
    positive = square > 0
    return torch.where(positive, torch.sqrt(torch.where(positive, square, torch.ones_like(square))),
                       torch.zeros_like(square))


def _mmce_weights(confidence, one_minus_confidence, correct, weighted):
    """(w, scale) with MMCE² = wᵀ K w; scale = W_correct, W_wrong (weighted) or m, for the gradient.
    The weighted "weight" estimator and the plain one; "count" is in ``mmce_squared``."""
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


def _mmce_norm_on_device(confidence, one_minus_confidence, correct, member, *, bandwidth: float, weighted: bool,
                         normalization: str) -> torch.Tensor:
    """The regulariser of ``mmce_norm`` over the samples ``member`` marks, with the group counts
    and totals kept on the device (every branch a ``torch.where``): no read-back, so it can be
    captured in a CUDA graph. The same value as the eager estimators, by autograd."""
    dtype = confidence.dtype
    kernel = torch.exp(-(confidence.unsqueeze(0) - confidence.unsqueeze(1)).abs() / bandwidth)
    in_correct, in_wrong = (correct & member).to(dtype), (~correct & member).to(dtype)
    if not weighted:
        w = torch.where(correct, one_minus_confidence, -confidence) * member.to(dtype) / member.sum().clamp_min(1)
        return _norm_from_square(w @ kernel @ w)
    u_correct, u_wrong = one_minus_confidence * in_correct, confidence * in_wrong
    if normalization == "count":
        m, n = in_correct.sum(), in_wrong.sum()
        both = (m > 0) & (n > 0)
        m, n = torch.where(both, m, 1.0), torch.where(both, n, 1.0)
        a, b, c = (1.0 / (m * m * (m * m + COUNT_EPSILON)), 1.0 / (n * n * (n * n + COUNT_EPSILON)),
                   1.0 / (m * n * (m * n + COUNT_EPSILON)))
        square = (a * (u_correct @ kernel @ u_correct) + b * (u_wrong @ kernel @ u_wrong)
                  - 2 * c * (u_correct @ kernel @ u_wrong))
        return torch.where(both, _norm_from_square(square + ROOT_EPSILON), 0.0)
    total_correct, total_wrong = u_correct.sum(), u_wrong.sum()
    both = (total_correct > 0) & (total_wrong > 0)
    w = u_correct / torch.where(both, total_correct, 1.0) - u_wrong / torch.where(both, total_wrong, 1.0)
    w = torch.where(both, w, 0.0)
    return _norm_from_square(w @ kernel @ w)


class _CrossEntropyPlusMMCE(torch.autograd.Function):
    """Per sample −log p_y + λ · MMCE, with the gradient in closed form (one autograd node,
    the reduction inside it).

    With r the top-label confidence, K_ij = exp(−|r_i − r_j|/h) and v = K w:
    ∂MMCE²/∂r_k = 2 Σ_i v_i ∂w_i/∂r_k − (2/h) w_k Σ_j K_kj sign(r_k − r_j) w_j, where
    Σ_i v_i ∂w_i/∂r_k is (w·v over the correct samples − v_k)/W_correct for a correct sample,
    −(v_k + w·v over the wrong samples)/W_wrong for a wrong one (weighted), −v_k/m (plain);
    and ∂r_i/∂u_ij = r_i (e_pred − p_ij). Batch-level scalars (W, norms, w·v sums) are read
    back once as Python floats: fewer tiny kernels than 0-d tensor arithmetic.

    The "count" estimator, MMCE² = Σ_ij s_ij u_i u_j K_ij with u = 1 − r (correct) or r (wrong)
    and s_ij = a, b or −c by the pair's groups (constants of the counts): with P = K u_correct,
    Q = K u_wrong, t = aP − cQ (correct) or bQ − cP (wrong) and t̃ the same with K ∘ sign(r_k − r_j),
    ½ ∂MMCE²/∂r_k = ∓t_k − u_k t̃_k / h (− for a correct sample, + for a wrong one).
    """

    @staticmethod
    def forward(ctx, logits, index, lam, bandwidth, weighted, normalization, reduction):
        log_p = torch.log_softmax(logits, dim=1)
        p = log_p.exp()
        confidence, predicted = p.max(dim=1)
        predicted = predicted.unsqueeze(1)
        one_minus = p.scatter(1, predicted, 0.0).sum(dim=1)  # 1 − r exactly
        labels = index.view(-1)
        correct = predicted.view(-1) == labels
        m = confidence.numel()
        difference = confidence.unsqueeze(1) - confidence.unsqueeze(0)
        kernel = torch.exp(difference.abs().div_(-bandwidth))
        count = weighted and normalization == "count"
        if count:
            correct_f = correct.to(logits.dtype)
            m_correct = int(correct.sum())
            coefficients = _count_coefficients(m_correct, m - m_correct) if 0 < m_correct < m else None
            u = torch.where(correct, one_minus, confidence)
            u_correct = u * correct_f
            u_wrong = u - u_correct
            if coefficients is None:
                norm = 0.0  # the released code's 0 (and zero gradient) without both groups
            else:
                a, b, c = coefficients
                along = torch.mm(kernel, torch.stack([u_correct, u_wrong], 1))  # (P, Q) = K u_correct, K u_wrong
                s_cc, s_cw = torch.mv(along.t(), u_correct).tolist()
                s_ww = float(torch.dot(u_wrong, along[:, 1]))
                norm = max(a * s_cc + b * s_ww - 2 * c * s_cw + ROOT_EPSILON, 0.0) ** 0.5
            saved = (correct_f, u_correct, u_wrong, along if coefficients is not None else None)
            extra = coefficients
        elif weighted:
            correct_f = correct.to(logits.dtype)
            # Group weights: 1 − r for correct samples, r for wrong ones; W = their group sums.
            groups = torch.stack([correct_f, torch.rsub(correct_f, 1.0)])
            values = torch.where(correct, one_minus, confidence)
            total_correct, total_wrong = torch.mv(groups, values).tolist()
            both = total_correct > 0 and total_wrong > 0  # nothing to compare without both groups
            inverse = (1 / total_correct, 1 / total_wrong) if both else (0.0, 0.0)
            # w = values/W_correct (correct) or −values/W_wrong (wrong)
            w = values * correct_f.mul(inverse[0] + inverse[1]).sub_(inverse[1])
            v = torch.mv(kernel, w)
            norm = max(float(torch.dot(w, v)), 0.0) ** 0.5  # a PSD form: < 0 only by rounding
            saved = (correct_f, groups, w, v)
            extra = (total_correct, total_wrong)
        else:
            w = torch.where(correct, one_minus, confidence.neg()).div_(m)
            v = torch.mv(kernel, w)
            norm = max(float(torch.dot(w, v)), 0.0) ** 0.5
            saved = (None, None, w, v)  # the plain form has no groups (save_for_backward takes None)
            extra = None
        ctx.save_for_backward(p, index, predicted, confidence, kernel, difference, *saved)
        ctx.scalars = (lam, bandwidth, weighted, count, reduction, m, norm, extra)
        if reduction == "none":
            return log_p.gather(1, index).view(-1).neg_().add_(lam * norm)
        cross_entropy = F.nll_loss(log_p, labels, reduction=reduction)
        return cross_entropy.add_(lam * norm * (m if reduction == "sum" else 1))

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        p, index, predicted, confidence, kernel, difference, *saved = ctx.saved_tensors
        lam, bandwidth, weighted, count, reduction, m, norm, extra = ctx.scalars
        if reduction == "none":
            per_sample = grad_output.unsqueeze(1)
            total = float(grad_output.sum())
        else:
            total = float(grad_output) * (m if reduction == "sum" else 1.0)
            per_sample = total / m
        grad = p.scatter_add(1, index, torch.full_like(p[:, :1], -1.0)).mul_(per_sample)  # p − e_y
        if not norm > 0 or (count and extra is None):
            return grad, None, None, None, None, None, None
        signed_kernel = kernel * difference.sign()
        if count:
            correct_f, u_correct, u_wrong, along = saved
            a, b, c = extra
            signed = torch.mm(signed_kernel, torch.stack([u_correct, u_wrong], 1))
            wrong_f = torch.rsub(correct_f, 1.0)

            def by_group(pair):  # aP − cQ on the correct samples, bQ − cP on the wrong ones
                first, second = pair[:, 0], pair[:, 1]
                return correct_f * (a * first - c * second) + wrong_f * (b * second - c * first)

            # ∂u/∂r = −1 (correct), +1 (wrong)
            d_square = torch.addcmul(by_group(along) * (wrong_f - correct_f), u_correct + u_wrong, by_group(signed),
                                     value=-1.0 / bandwidth)  # half of ∂MMCE²/∂r
        else:
            correct_f, groups, w, v = saved
            if weighted:
                total_correct, total_wrong = extra
                vw_correct, vw_wrong = torch.mv(groups, v * w).tolist()
                inverse_correct, inverse_wrong = 1 / total_correct, 1 / total_wrong
                # (Σ_correct vw − v)/W_correct for correct samples, −(v + Σ_wrong vw)/W_wrong for wrong ones
                slope = correct_f.mul(inverse_wrong - inverse_correct).sub_(inverse_wrong)
                offset = correct_f.mul(vw_correct * inverse_correct + vw_wrong * inverse_wrong).sub_(vw_wrong * inverse_wrong)
                through_w = torch.addcmul(offset, v, slope)
            else:
                through_w = v / -m
            through_kernel = torch.mv(signed_kernel, w)
            d_square = torch.addcmul(through_w, w, through_kernel, value=-1.0 / bandwidth)  # half of ∂MMCE²/∂r
        d_confidence = d_square.mul_(confidence).mul_(lam * total / norm).unsqueeze(1)  # times r_i
        grad.addcmul_(p, d_confidence, value=-1.0)
        grad.scatter_add_(1, predicted, d_confidence)
        return grad, None, None, None, None, None, None


#: Most labelled elements of an (N, K, *) batch the quadratic MMCE takes (a batch of 25 SST
#: trees has ~1,000 nodes; an image batch has millions of pixels).
MAX_ELEMENTS = 16_384


class MMCELoss(Loss):
    r"""Per sample: $-\log p_y + \lambda \cdot \mathrm{MMCE}(\text{batch})$.

    Takes classification logits (N, K), or (N, K, *) with each labelled element a sample (tree
    nodes; at most ``MAX_ELEMENTS``). The MMCE term couples the batch's samples, so "none"
    gives each sample its own −log p_y plus the batch's shared λ · MMCE.

    Args:
        lam: weight λ of the MMCE term (default 2, mukhoti2020's value for images; 8 for text).
        bandwidth: Laplacian kernel width (0.4 in Kumar et al.).
        weighted: weighted MMCE (default) or the plain one.
        normalization: of the weighted MMCE's groups — "count" (default: the released code of
            Kumar et al. and mukhoti2020, pair means divided by the counts) or "weight" (each
            group normalised to total weight 1). See the module docstring.
        reduction: ``"mean"`` (over non-ignored samples), ``"sum"``, or ``"none"`` (one value
            per sample).
        ignore_index: target value whose samples are left out of both terms; ``None``
            (default) means none.

    Raises:
        ValueError: (in ``forward``) if (N, K, *) logits have more than ``MAX_ELEMENTS``
            labelled elements: the MMCE term is quadratic in them.

    Examples:
        >>> import torch
        >>> from focalcal.losses import MMCELoss
        >>> logits = torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.3, 1.2], [0.4, 1.5, 0.2]])
        >>> targets = torch.tensor([0, 1, 1])
        >>> loss = MMCELoss(lam=2.0)
        >>> print(f"{loss(logits, targets).item():.4f}")
        1.6533
        >>> print(f"{MMCELoss(lam=2.0, normalization='weight')(logits, targets).item():.4f}")
        1.7934
    """

    name = "mmce"
    per_sample = False  # the MMCE term couples every pair of samples in the batch
    _parameter_constraints: ClassVar[dict] = {**Loss._parameter_constraints, "lam": [NON_NEGATIVE], "bandwidth": [POSITIVE],
                              "weighted": [bool], "normalization": [Options(NORMALIZATIONS)]}

    def __init__(self, *, lam: float = 2.0, bandwidth: float = 0.4, weighted: bool = True,
                 normalization: str = "count", reduction: str = "mean", ignore_index: int | None = None) -> None:
        super().__init__(reduction=reduction, ignore_index=ignore_index)
        self._validate(lam=lam, bandwidth=bandwidth, weighted=weighted, normalization=normalization)
        self.lam = float(lam)
        self.bandwidth = float(bandwidth)
        self.weighted = bool(weighted)
        self.normalization = normalization

    def regulariser(self, logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """MMCE of the samples given, by autograd (without the λ).

        Args:
            logits: float logits, (m, K).
            index: target class indices, (m, 1).

        Returns:
            MMCE, a 0-d tensor.
        """
        log_p = torch.log_softmax(logits, dim=1)
        log_conf, predicted = log_p.max(dim=1, keepdim=True)
        log_rest = torch.logsumexp(log_p.scatter(1, predicted, float("-inf")), dim=1)
        correct = predicted.squeeze(1) == index.squeeze(1)
        return mmce_norm(log_conf.squeeze(1).exp(), log_rest.exp(), correct, bandwidth=self.bandwidth,
                         weighted=self.weighted, normalization=self.normalization)

    def reduce_valid(self, logits: torch.Tensor, index: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
        """Cross-entropy plus λ · MMCE over the valid elements, reduced.

        Args:
            logits: float logits, (N, K, *spatial).
            index: target class indices, (N, 1, *spatial), ignored ones replaced by class 0.
            valid: which elements count, (N, *spatial) booleans, or None when all do.

        Returns:
            A 0-d tensor, or (N,) / (N, *spatial) for ``reduction="none"``, 0 where ignored.

        Raises:
            ValueError: if (N, K, *) logits have more than ``MAX_ELEMENTS`` labelled elements.
        """
        if avoid_host_sync(logits):
            return self._reduce_on_device(logits, index, valid)
        if logits.dim() > 2:
            return self._reduce_elements(logits, index, valid)
        arguments = (self.lam, self.bandwidth, self.weighted, self.normalization)
        # The fused kernel computes the "weight" and the plain estimators; "count" runs eagerly.
        fused = not self.weighted or self.normalization == "weight"
        if valid is None and self.reduction != "none" and fused and _fused.usable(logits):
            return _fused.cross_entropy_mmce(logits, index, self.lam, self.bandwidth, self.weighted,
                                             reduction=self.reduction)
        if valid is None:
            return _CrossEntropyPlusMMCE.apply(logits, index, *arguments, self.reduction)
        # Ignored samples: the regulariser is over the valid ones; they get 0 as every loss does.
        per_sample = _CrossEntropyPlusMMCE.apply(logits[valid], index[valid], *arguments, "none")
        loss = torch.zeros(valid.shape, dtype=per_sample.dtype, device=per_sample.device).masked_scatter(valid, per_sample)
        return self._reduce(loss.unsqueeze(1), valid)

    def _reduce_elements(self, logits, index, valid):
        """(N, K, *) logits — a tree's nodes: every labelled element is one sample of the MMCE set,
        as mukhoti2020's released Tree-LSTM trainer (treeLSTM/trainer.py) collects every node's
        output of a batch before its MMCE term. The eager estimator is quadratic in the elements,
        so an image's pixels are refused."""
        n_elements = index.numel() if valid is None else int(valid.sum())
        if n_elements > MAX_ELEMENTS:
            raise ValueError(f"mmce compares every pair of samples (quadratic in the batch): {n_elements:,} labelled "
                             f"elements of logits {tuple(logits.shape)} exceed {MAX_ELEMENTS:,}; it takes "
                             "classification logits (N, K) or small structured outputs such as a batch of trees")
        n_classes = logits.shape[1]
        flat_logits = logits.movedim(1, -1).reshape(-1, n_classes)
        flat_index = index.movedim(1, -1).reshape(-1, 1)
        keep = torch.ones(flat_index.shape[0], dtype=torch.bool, device=logits.device) if valid is None else valid.reshape(-1)
        arguments = (self.lam, self.bandwidth, self.weighted, self.normalization)
        per_element = _CrossEntropyPlusMMCE.apply(flat_logits[keep], flat_index[keep], *arguments, "none")
        loss = torch.zeros(keep.shape, dtype=per_element.dtype, device=per_element.device).masked_scatter(keep, per_element)
        shape = (logits.shape[0], *logits.shape[2:])
        return self._reduce(loss.view(shape).unsqueeze(1), keep.view(shape))

    def _reduce_on_device(self, logits, index, valid):
        """Per element −log p_y + λ · MMCE of the labelled elements, by autograd and without a
        read-back (``avoid_host_sync``): (N, K) samples or (N, K, *) tree nodes, 0 where ignored."""
        if logits.dim() > 2 and index.numel() > MAX_ELEMENTS:  # the labelled count would need a read-back
            raise ValueError(f"mmce compares every pair of samples (quadratic in the batch): {index.numel():,} "
                             f"elements of logits {tuple(logits.shape)} exceed {MAX_ELEMENTS:,}")
        shape = (logits.shape[0], *logits.shape[2:])
        flat_logits = logits.movedim(1, -1).reshape(-1, logits.shape[1])
        flat_index = index.movedim(1, -1).reshape(-1, 1)
        member = torch.ones_like(flat_index.view(-1), dtype=torch.bool) if valid is None else valid.reshape(-1)
        log_p = torch.log_softmax(flat_logits, dim=1)
        log_confidence, predicted = log_p.max(dim=1, keepdim=True)
        log_rest = torch.logsumexp(log_p.scatter(1, predicted, float("-inf")), dim=1)
        correct = predicted.view(-1) == flat_index.view(-1)
        norm = _mmce_norm_on_device(log_confidence.view(-1).exp(), log_rest.exp(), correct, member,
                                    bandwidth=self.bandwidth, weighted=self.weighted, normalization=self.normalization)
        per_element = log_p.gather(1, flat_index).view(-1).neg() + self.lam * norm
        return self._reduce(per_element.view(shape).unsqueeze(1), valid)

    def hyperparameters(self) -> dict[str, object]:
        """The constructor arguments that define this loss.

        Returns:
            Constructor parameter name -> value.
        """
        return {"lam": self.lam, "bandwidth": self.bandwidth, "weighted": self.weighted,
                "normalization": self.normalization, **super().hyperparameters()}
