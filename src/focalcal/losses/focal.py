"""Focal loss ℓ = −α_y (1 − p_y)^γ log p_y and its γ policies (fixed, per-sample, per-epoch).

References: charoenphakdee2021 Eq 5 (the loss, also with soft targets v), mukhoti2020 §4
(Prop 1: the logit gradient is the cross-entropy gradient times
g(p, γ) = (1 − p)^γ − γ p (1 − p)^(γ−1) log p; FLSD-53/532) and App. E (FLSc-531/532).

Every loss here that depends on the target's probability only goes through one autograd
function, ``focal_of_target``: its forward computes log p_y and 1 − p_y exactly (the latter as
the sum of the other classes' probabilities, never 1 − p_y by subtraction) and its backward is
Prop 1 itself, g(p_y, γ) · (p − e_y), with g = (1 − p)^γ (1 + γ p (−log p)/(1 − p)) written so
that no factor is unbounded. That keeps the loss finite with finite gradients for any finite
logits and any γ ≥ 0 (including γ < 1, where (1 − p)^(γ−1) blows up), in one autograd node
(with the reduction inside it). On CPU a fixed γ (and label smoothing) goes through the
fused kernel of ``_fused`` instead, which computes the same formulas; this module is its
reference and the path on GPU.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import ClassVar

import torch
from torch.autograd.function import once_differentiable

from focalcal.core.constraints import GAMMA, NON_NEGATIVE, POSITIVE_INT, Interval, SequenceOf

from . import _fused
from ._base import (
    Loss,
    avoid_host_sync,
    cast_like,
    class_weight_tensor,
    target_weights,
    weights_for,
)
from ._classwise import SoftmaxParts, classwise_loss
from .smoothing import SMOOTHING_CONSTRAINTS, wrong_classes_smoothing

#: Strictly increasing points inside (0, 1): FLSD's p_y thresholds and FLSc's run fractions.
_INSIDE_UNIT = SequenceOf(Interval(numbers.Real, 0, 1, closed="neither"), increasing=True)

GammaSpec = float | torch.Tensor | Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
LOG_HALF = math.log(0.5)  # log p above it: p > 1/2, the one class per row whose 1 − p is a sum of the others


def focal_terms(log_p: torch.Tensor, p: torch.Tensor, q: torch.Tensor, gamma: float | torch.Tensor, *,
                has_inverse: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Focal loss $-(1 - p)^\gamma \log p$ and its slope $g(p, \gamma)$ elementwise, from
    $\log p$, $p$ and the exact $q = 1 - p$.

    $$
    g = (1 - p)^\gamma + \gamma p (1 - p)^{\gamma - 1} (-\log p) = (1 - p)^\gamma (1 + \gamma p r),
    \quad r = \frac{-\log p}{1 - p},
    $$

    is mukhoti2020 Prop 1's factor: $\partial \ell / \partial \log p = -g$. r lies in
    [1, 2 log 2] for p > 1/2, so nothing overflows as p → 1. With ``has_inverse``, entries with
    γ < 0 give the inverse focal loss $-(1 + p)^{|\gamma|} \log p$, whose slope is the same
    expression with 1 + p in place of 1 − p.

    Args:
        log_p: log-probabilities, any shape.
        p: the probabilities, ``log_p``'s shape.
        q: 1 − p computed without cancellation (e.g. the sum of the other classes'
            probabilities), ``log_p``'s shape.
        gamma: γ ≥ 0, a float or a tensor broadcastable to ``log_p``; with ``has_inverse`` a
            tensor whose negative entries select the inverse focal loss.
        has_inverse: whether ``gamma`` may hold negative entries (AdaFocal).

    Returns:
        (loss, slope g), both ``log_p``'s shape.

    Examples:
        >>> import torch
        >>> from focalcal.losses.focal import focal_terms
        >>> p = torch.tensor([0.25, 0.9], dtype=torch.float64)
        >>> loss, slope = focal_terms(p.log(), p, 1 - p, 2.0)
        >>> [round(value, 4) for value in loss.tolist()], [round(value, 4) for value in slope.tolist()]
        ([0.7798, 0.0011], [1.0824, 0.029])
    """
    # −log p: where p > 1/2, log p itself has lost its digits (it is −log(1 + tiny) rounded), so
    # it is −log1p(−q) there. Selected on a 0/1 mask as in ``_classwise.choose``, with log1p fed
    # 0 where unused, since log1p(−q) is −inf at q = 1 and inf · 0 would be NaN.
    confident = (log_p > LOG_HALF).to(q.dtype)
    neg_log_p = torch.addcmul(torch.log1p(q * confident.neg()).neg_(), log_p, confident.sub_(1.0))
    base = torch.where(gamma < 0, 1.0 + p, q) if has_inverse else q
    factor = base.pow(gamma.abs() if has_inverse else gamma)
    # r at q = 0 (1 − p underflowed) is 0 here; it only meets factor = 0 there, or γ = 0.
    ratio = neg_log_p / base.clamp_min(torch.finfo(q.dtype).tiny)
    slope = (p * ratio).mul_(gamma).add_(1.0).mul_(factor)
    return factor.mul_(neg_log_p), slope


class _FocalOfTarget(torch.autograd.Function):
    """Per-element −(1 − p_y)^γ log p_y (γ ≥ 0) or −(1 + p_y)^|γ| log p_y (γ < 0, inverse focal)."""

    @staticmethod
    def forward(ctx, logits, index, gamma, has_inverse, reduction):
        log_p = torch.log_softmax(logits, dim=1)
        log_p_y = log_p.gather(1, index)
        p = log_p.exp()
        p_y = p.gather(1, index)
        if callable(gamma):
            gamma = gamma(p, p_y)
        others = p.scatter_(1, index, 0.0)  # p with the target's entry zeroed
        q_y = others.sum(dim=1, keepdim=True)  # 1 − p_y without cancellation
        loss, slope = focal_terms(log_p_y, p_y, q_y, gamma, has_inverse=has_inverse)
        ctx.save_for_backward(others, index, slope, q_y)
        ctx.mean_of = loss.numel() if reduction == "mean" else None
        return loss if reduction == "none" else loss.sum() if reduction == "sum" else loss.mean()

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        # g · (p − e_y): p_j g for j ≠ y and −(1 − p_y) g for the target (exact, no p_y − 1).
        others, index, slope, q_y = ctx.saved_tensors
        if ctx.mean_of is not None:
            grad_output = grad_output / ctx.mean_of
        scale = grad_output * slope
        grad = others * scale
        grad.scatter_(1, index, q_y.mul(scale).neg_())
        return grad, None, None, None, None


def focal_of_target(logits: torch.Tensor, index: torch.Tensor, gamma: GammaSpec, *,
                    has_inverse: bool = False, reduction: str = "none") -> torch.Tensor:
    r"""Focal loss $-(1 - p_y)^\gamma \log p_y$ of each element, in one autograd node whose
    backward is mukhoti2020 Prop 1, $g(p_y, \gamma) (p - e_y)$.

    A fixed γ on CPU goes through the fused kernel (``_fused``; the same formulas).

    Args:
        logits: float logits, (N, K, *spatial).
        index: target class indices, (N, 1, *spatial), every one a valid class.
        gamma: a float ≥ 0, a tensor broadcastable to (N, 1, *spatial), or a callable
            ``(probs, p_target) -> gamma tensor`` for policies that pick γ from the prediction
            (evaluated without gradient: γ is piecewise constant in p).
        has_inverse: whether negative entries of a γ tensor mean the inverse-focal loss
            $-(1 + p_y)^{|\gamma|} \log p_y$ (AdaFocal).
        reduction: ``"none"`` (default), or ``"mean"``/``"sum"`` to reduce inside the same
            autograd node.

    Returns:
        The loss of each element, (N, 1, *spatial), or a 0-d tensor for ``"mean"``/``"sum"``.

    Examples:
        >>> import torch
        >>> from focalcal.losses import focal_of_target
        >>> logits = torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.3, 1.2]])
        >>> index = torch.tensor([[0], [1]])
        >>> [round(value, 4) for value in focal_of_target(logits, index, 3.0).view(-1).tolist()]
        [0.0024, 0.654]
        >>> print(f"{focal_of_target(logits, index, 3.0, reduction='mean').item():.4f}")
        0.3282
    """
    if (isinstance(gamma, (int, float)) and not isinstance(gamma, bool) and gamma >= 0 and not has_inverse
            and _fused.usable(logits)):
        return _fused.classwise(logits, index, "smoothed_focal", (gamma, 0.0, 1.0), reduction=reduction)
    return _FocalOfTarget.apply(logits, index, gamma, has_inverse, reduction)


def classwise_focal_terms(parts: SoftmaxParts, gamma: float) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The *negated* focal terms $(1 - p_i)^\gamma \log p_i$ and slopes $g(p_i, \gamma)$ of every class i.

    1 − p_i by subtraction is exact for every class but the row's top (p_i ≤ 1/2 there); the
    top's entries come from ``focal_terms`` with $1 - p_\mathrm{top} = \sum_{j \ne \mathrm{top}} p_j$.

    Args:
        parts: the softmax of the logits with its top class (``softmax_parts(logits,
            needs_top=True)`` of :mod:`focalcal.losses._classwise`); its scratch buffer is
            overwritten.
        gamma: the focusing parameter γ ≥ 0.

    Returns:
        (negated loss terms, slopes g), both the logits' shape (N, K, *spatial).

    Examples:
        >>> import torch
        >>> from focalcal.losses._classwise import softmax_parts
        >>> from focalcal.losses.focal import classwise_focal_terms
        >>> parts = softmax_parts(torch.tensor([[2.0, 0.5, -1.0]]), needs_top=True)
        >>> negated, slope = classwise_focal_terms(parts, gamma=2.0)
        >>> [round(value, 4) for value in negated[0].tolist()]
        [-0.0111, -1.1843, -2.9927]
    """
    log_p, p = parts.log_p, parts.p
    # Two full-size buffers (one reused, see ``SoftmaxParts.buffer``), the rest in place.
    negated = torch.sub(p, 1.0, out=parts.buffer()).neg_()  # 1 − p (the top's entry is replaced below)
    slope = negated.pow(gamma - 1.0)  # (1 − p)^(γ−1), turned into g below
    negated.mul_(slope)  # (1 − p)^γ
    # g = (1 − p)^γ − γ (1 − p)^(γ−1) p log p (a multiply where (1 − p)^γ/(1 − p) would divide);
    # the top entry may be inf · 0 here (γ < 1, p = 1), replaced below.
    torch.add(negated, slope.mul_(p).mul_(log_p), alpha=-gamma, out=slope)
    negated.mul_(log_p)
    top_loss, top_slope = focal_terms(parts.log_p_top(), parts.p_top, parts.rest, gamma)
    negated.scatter_(1, parts.top, top_loss.neg_())
    slope.scatter_(1, parts.top, top_slope)
    return negated, slope


def soft_target_focal(logits: torch.Tensor, soft: torch.Tensor, gamma: float,
                      class_weights: torch.Tensor | None = None) -> torch.Tensor:
    r"""charoenphakdee2021 Eq 5 with a soft target v: $-\sum_i w_i v_i (1 - p_i)^\gamma \log p_i$.

    Gradient in closed form: $\partial L/\partial \log p_i = -w_i v_i g(p_i, \gamma)$, bounded
    for every γ ≥ 0.

    Args:
        logits: float logits, (N, K, *spatial).
        soft: soft targets v of the logits' shape and dtype, each row a probability vector.
        gamma: the focusing parameter γ ≥ 0.
        class_weights: optional class weights w, shaped to broadcast along dim 1 (e.g.
            (1, K) for (N, K) logits); None weighs every class 1.

    Returns:
        The loss of each element, (N, 1, *spatial).

    Examples:
        >>> import torch
        >>> from focalcal.losses.focal import soft_target_focal
        >>> logits = torch.tensor([[2.0, 0.5, -1.0]])
        >>> soft = torch.tensor([[0.8, 0.1, 0.1]])
        >>> print(f"{soft_target_focal(logits, soft, gamma=2.0).item():.4f}")
        0.4266
    """
    weights = soft if class_weights is None else soft * class_weights

    def spec(parts):
        negated, slope = classwise_focal_terms(parts, gamma)
        return (weights * negated).sum(dim=1, keepdim=True).neg_(), slope.mul_(weights).neg_(), None

    return classwise_loss(logits, spec, needs_top=True)


def smoothed_target_focal(logits: torch.Tensor, index: torch.Tensor, gamma: float, smoothing: float, *,
                          reduction: str = "none") -> torch.Tensor:
    r"""``soft_target_focal`` for the smoothed one-hot target of ``smoothed_targets``, without
    building it:

    $$
    -s \sum_i (1 - p_i)^\gamma \log p_i - (k - s) (1 - p_y)^\gamma \log p_y,
    \quad s = \frac{\alpha}{K - 1}, \; k = 1 - \alpha.
    $$

    Args:
        logits: float logits, (N, K, *spatial).
        index: target class indices, (N, 1, *spatial), every one a valid class.
        gamma: the focusing parameter γ ≥ 0.
        smoothing: the wrong-classes label-smoothing α, in [0, 1).
        reduction: ``"none"`` (default), or ``"mean"``/``"sum"`` to reduce inside the same
            autograd node.

    Returns:
        The loss of each element, (N, 1, *spatial), or a 0-d tensor for ``"mean"``/``"sum"``.

    Examples:
        >>> import torch
        >>> from focalcal.losses.focal import smoothed_target_focal
        >>> logits = torch.tensor([[2.0, 0.5, -1.0]])
        >>> index = torch.tensor([[0]])
        >>> print(f"{smoothed_target_focal(logits, index, gamma=2.0, smoothing=0.2).item():.4f}")
        0.4266
    """
    share = smoothing / (logits.shape[1] - 1)
    keep = 1.0 - smoothing
    if _fused.usable(logits):
        return _fused.classwise(logits, index, "smoothed_focal", (gamma, share, keep), reduction=reduction)

    def spec(parts):
        negated, slope = classwise_focal_terms(parts, gamma)
        loss = negated.sum(dim=1, keepdim=True).mul_(-share).sub_(negated.gather(1, index), alpha=keep - share)
        slope_y = slope.gather(1, index).mul_(-keep)
        return loss, slope.mul_(-share).scatter_(1, index, slope_y), None

    return classwise_loss(logits, spec, needs_top=True, reduction=reduction)


def smoothed_targets(index: torch.Tensor, num_classes: int, smoothing: float, dtype: torch.dtype,
                     device: torch.device | str) -> torch.Tensor:
    r"""mukhoti2020 §5.1: $s_i = (1 - \alpha) q_i + \alpha (1 - q_i)/(K - 1)$, q the one-hot target.

    This is the "wrong_classes" form; ``smoothing.wrong_classes_smoothing`` gives α for the
    "uniform" one.

    Args:
        index: target class indices, (N, 1, *spatial).
        num_classes: the number of classes K.
        smoothing: the wrong-classes label-smoothing α, in [0, 1).
        dtype: the floating dtype of the result.
        device: the device of the result.

    Returns:
        The smoothed targets, (N, K, *spatial), each row summing to 1.

    Examples:
        >>> import torch
        >>> from focalcal.losses.focal import smoothed_targets
        >>> soft = smoothed_targets(torch.tensor([[0], [2]]), 3, 0.2, torch.float64, "cpu")
        >>> soft.tolist()
        [[0.8, 0.1, 0.1], [0.1, 0.1, 0.8]]
    """
    shape = list(index.shape)
    shape[1] = num_classes
    soft = torch.full(shape, smoothing / (num_classes - 1), dtype=dtype, device=device)
    return soft.scatter_(1, index, 1.0 - smoothing)


class FocalLoss(Loss):
    r"""Focal loss $\ell = -\alpha_y (1 - p_y)^\gamma \log p_y$.

    Args:
        gamma: focusing parameter γ ≥ 0 (γ = 0 is cross-entropy). Default 3, the best fixed γ
            of mukhoti2020 (App. E).
        alpha: optional class weights: a scalar (hossain2021 Eq 5) or one weight per class;
            None (default) weighs every class 1.
        smoothing: label-smoothing α of the target, giving the "LS" paradigm of
            charoenphakdee2021 §6.1: $-\sum_i v_i (1 - p_i)^\gamma \log p_i$ with the smoothed
            v. Soft target tensors of the logits' shape are accepted directly, too. Default 0.
        convention: what α means (see ``focalcal.losses.smoothing``): ``"wrong_classes"``
            (default, mukhoti2020: the K − 1 wrong classes share α) or ``"uniform"`` (Müller
            et al. 2019, which charoenphakdee2021 cites: $(1 - \alpha) q + \alpha/K$).
        reduction: ``"mean"`` (over non-ignored samples/pixels), ``"sum"``, or ``"none"``
            (one value per sample/pixel).
        ignore_index: target value whose samples/pixels are left out; ``None`` (default)
            means none.

    Examples:
        >>> import torch
        >>> from focalcal.losses import FocalLoss
        >>> logits = torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.3, 1.2]])
        >>> targets = torch.tensor([0, 1])
        >>> loss = FocalLoss(gamma=3.0)
        >>> print(f"{loss(logits, targets).item():.4f}")
        0.3282
        >>> per_sample = FocalLoss(gamma=3.0, reduction="none")(logits, targets)
        >>> [round(value, 4) for value in per_sample.tolist()]
        [0.0024, 0.654]
        >>> soft = torch.tensor([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1]])
        >>> print(f"{loss(logits, soft).item():.4f}")
        0.5010
    """

    name = "focal"
    accepts_soft_targets = True
    _parameter_constraints: ClassVar[dict] = {
        **Loss._parameter_constraints,
        "gamma": [GAMMA],
        "alpha": [NON_NEGATIVE, SequenceOf(NON_NEGATIVE, min_length=2), None],
        **SMOOTHING_CONSTRAINTS,
    }

    def __init__(self, *, gamma: float = 3.0, alpha: float | Sequence[float] | None = None,
                 smoothing: float = 0.0, convention: str = "wrong_classes", reduction: str = "mean",
                 ignore_index: int | None = None) -> None:
        super().__init__(reduction=reduction, ignore_index=ignore_index)
        self._validate(gamma=gamma, alpha=alpha, smoothing=smoothing, convention=convention)
        self.gamma = float(gamma)
        self.smoothing = float(smoothing)
        self.convention = convention
        # alpha: None, one scalar weight, or one weight per class (kept as a buffer).
        self.alpha_scale = 1.0
        self.register_buffer("class_weights", None)
        if NON_NEGATIVE.is_satisfied_by(alpha):
            self.alpha_scale = float(alpha)
            self.alpha = self.alpha_scale
        elif alpha is not None:
            self.class_weights = class_weight_tensor(alpha, "alpha")
            self.alpha = tuple(self.class_weights.tolist())
        else:
            self.alpha = None

    def elementwise(self, logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """The focal loss of each element.

        Args:
            logits: float logits, (N, K, *spatial).
            index: target class indices, (N, 1, *spatial), every one a valid class.

        Returns:
            The loss of each element, (N, 1, *spatial).
        """
        if self.smoothing > 0.0:
            smoothing = wrong_classes_smoothing(self.smoothing, logits.shape[1], self.convention)
            if self.class_weights is None:
                loss = smoothed_target_focal(logits, index, self.gamma, smoothing)
                return loss * self.alpha_scale if self.alpha_scale != 1.0 else loss
            soft = smoothed_targets(index, logits.shape[1], smoothing, logits.dtype, logits.device)
            return self.soft_target_elementwise(logits, soft)
        loss = focal_of_target(logits, index, self.gamma)
        if self.class_weights is not None:
            loss = loss * target_weights(self.class_weights, logits, index, "alpha")
        return loss * self.alpha_scale if self.alpha_scale != 1.0 else loss

    def reduced(self, logits: torch.Tensor, index: torch.Tensor, reduction: str) -> torch.Tensor | None:
        """The focal loss reduced inside its one autograd node, where no class weight applies.

        Args:
            logits: float logits, (N, K, *spatial).
            index: target class indices, (N, 1, *spatial), every one a valid class.
            reduction: ``"mean"``, ``"sum"`` or ``"none"``.

        Returns:
            A 0-d tensor, or (N, 1, *spatial) for ``"none"``; None where class weights or a scalar α apply.
        """
        if self.class_weights is not None or self.alpha_scale != 1.0:
            return None
        if self.smoothing > 0.0:
            smoothing = wrong_classes_smoothing(self.smoothing, logits.shape[1], self.convention)
            return smoothed_target_focal(logits, index, self.gamma, smoothing, reduction=reduction)
        return focal_of_target(logits, index, self.gamma, reduction=reduction)

    def soft_target_elementwise(self, logits: torch.Tensor, soft: torch.Tensor) -> torch.Tensor:
        """The focal loss of each element against soft targets (charoenphakdee2021 Eq 5).

        Args:
            logits: float logits, (N, K, *spatial).
            soft: soft targets of the logits' shape and dtype, each row a probability vector.

        Returns:
            The loss of each element, (N, 1, *spatial).
        """
        weights = None if self.class_weights is None else weights_for(self.class_weights, logits, "alpha")
        loss = soft_target_focal(logits, soft, self.gamma, weights)
        return loss * self.alpha_scale if self.alpha_scale != 1.0 else loss

    def hyperparameters(self) -> dict[str, object]:
        """The constructor arguments that define this loss.

        Returns:
            Constructor parameter name -> value.
        """
        return {"gamma": self.gamma, "alpha": self.alpha, "smoothing": self.smoothing, "convention": self.convention,
                **super().hyperparameters()}


class SampleDependentFocalLoss(Loss):
    r"""Focal loss whose γ depends on each sample's $p_y$ (mukhoti2020 §4, FLSD).

    γ = gammas[i] for $p_y$ in [thresholds[i−1], thresholds[i]); defaults give FLSD-53
    (γ = 5 for $p_y$ < 0.2, else 3). FLSD-532 is thresholds (0.2, 0.5), gammas (5, 3, 2).

    Args:
        thresholds: strictly increasing $p_y$ thresholds inside (0, 1). Default (0.2,).
        gammas: one γ ≥ 0 per interval, ``len(thresholds) + 1`` of them. Default (5, 3).
        reduction: ``"mean"`` (over non-ignored samples/pixels), ``"sum"``, or ``"none"``
            (one value per sample/pixel).
        ignore_index: target value whose samples/pixels are left out; ``None`` (default)
            means none.

    Raises:
        ValueError: if ``gammas`` does not have one entry more than ``thresholds``.

    Examples:
        >>> import torch
        >>> from focalcal.losses import SampleDependentFocalLoss
        >>> logits = torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.3, 1.2]])
        >>> targets = torch.tensor([0, 1])
        >>> loss = SampleDependentFocalLoss(thresholds=(0.2, 0.5), gammas=(5.0, 3.0, 2.0))
        >>> loss.gamma_for(torch.tensor([0.1, 0.2, 0.9])).tolist()
        [5.0, 3.0, 2.0]
        >>> print(f"{loss(logits, targets).item():.4f}")
        0.3325
    """

    name = "focal_sample_dependent"
    _parameter_constraints: ClassVar[dict] = {**Loss._parameter_constraints, "thresholds": [_INSIDE_UNIT],
                              "gammas": [SequenceOf(GAMMA)]}

    def __init__(self, *, thresholds: Sequence[float] = (0.2,), gammas: Sequence[float] = (5.0, 3.0),
                 reduction: str = "mean", ignore_index: int | None = None) -> None:
        super().__init__(reduction=reduction, ignore_index=ignore_index)
        self._validate(thresholds=thresholds, gammas=gammas)
        self.thresholds = tuple(float(t) for t in thresholds)
        self.gammas = tuple(float(g) for g in gammas)
        if len(self.gammas) != len(self.thresholds) + 1:  # a relation between two parameters
            raise ValueError(f"need len(gammas) == len(thresholds) + 1, got {len(self.gammas)} gammas "
                             f"for {len(self.thresholds)} thresholds")
        self.register_buffer("threshold_tensor", torch.tensor(self.thresholds, dtype=torch.float64), persistent=False)
        self.register_buffer("gamma_tensor", torch.tensor(self.gammas, dtype=torch.float64), persistent=False)
        self._cast: dict = {}

    def gamma_for(self, p_target: torch.Tensor) -> torch.Tensor:
        """γ of each sample from its probability of the true class (p = threshold takes the upper γ).

        Args:
            p_target: each sample's probability of its true class, any shape.

        Returns:
            The γ of each sample, ``p_target``'s shape and dtype.
        """
        thresholds = cast_like(self.threshold_tensor, p_target, self._cast, "thresholds")
        gammas = cast_like(self.gamma_tensor, p_target, self._cast, "gammas")
        return gammas[torch.bucketize(p_target, thresholds, right=True)]

    def elementwise(self, logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """The sample-dependent focal loss of each element.

        Args:
            logits: float logits, (N, K, *spatial).
            index: target class indices, (N, 1, *spatial), every one a valid class.

        Returns:
            The loss of each element, (N, 1, *spatial).
        """
        return self.reduced(logits, index, "none")

    def reduced(self, logits: torch.Tensor, index: torch.Tensor, reduction: str) -> torch.Tensor:
        """The sample-dependent focal loss, reduced inside its one autograd node.

        Args:
            logits: float logits, (N, K, *spatial).
            index: target class indices, (N, 1, *spatial), every one a valid class.
            reduction: ``"mean"``, ``"sum"`` or ``"none"``.

        Returns:
            A 0-d tensor, or (N, 1, *spatial) for ``"none"``.
        """
        return focal_of_target(logits, index, lambda p, p_y: self.gamma_for(p_y), reduction=reduction)

    def hyperparameters(self) -> dict[str, object]:
        """The constructor arguments that define this loss.

        Returns:
            Constructor parameter name -> value.
        """
        return {"thresholds": self.thresholds, "gammas": self.gammas, **super().hyperparameters()}


class ScheduledFocalLoss(Loss):
    """Focal loss whose γ changes with the epoch (mukhoti2020 App. E, FLSc).

    ``milestones`` are fractions of the run: γ = gammas[i] from epoch round(milestones[i−1]·E)
    on, E the run's epoch count. Defaults (2/7, 5/7), (5, 3, 1) are FLSc-531 — γ = 5, 3, 1 for
    epochs 0–99, 100–249, 250–349 of the paper's 350 — scaled to any E. ``switch_at`` instead
    names those epochs (0-based, increasing, below E), for schedules that are no fraction of
    the run: mukhoti2020's released text scripts switch at epochs 3 and 7 of SST's 25
    (sst_train.py) and 14 and 35 of 20 Newsgroups' 50 (20newsgroup_train.py:
    int(E·100/350), int(E·250/350)). The trainer must call ``set_epoch(epoch, num_epochs)``
    before the first forward.

    Args:
        milestones: strictly increasing fractions of the run inside (0, 1), one per γ after
            the first. Default (2/7, 5/7).
        gammas: one γ ≥ 0 per stage, ``len(milestones) + 1`` of them. Default (5, 3, 1).
        switch_at: the first epoch (0-based, strictly increasing) of each γ after the first,
            in place of the milestones' fractions; None (default) uses the fractions.
        reduction: ``"mean"`` (over non-ignored samples/pixels), ``"sum"``, or ``"none"``
            (one value per sample/pixel).
        ignore_index: target value whose samples/pixels are left out; ``None`` (default)
            means none.

    Attributes:
        gamma (float | None): the current epoch's γ, None before the first ``set_epoch``.

    Raises:
        ValueError: if ``gammas`` does not have one entry more than ``milestones``, or
            ``switch_at`` does not name one epoch per milestone.

    Examples:
        >>> import torch
        >>> from focalcal.losses import ScheduledFocalLoss
        >>> logits = torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.3, 1.2]])
        >>> targets = torch.tensor([0, 1])
        >>> loss = ScheduledFocalLoss()
        >>> loss.switch_epochs(num_epochs=350)
        [100, 250]
        >>> loss.set_epoch(120, num_epochs=350)
        >>> loss.gamma
        3.0
        >>> print(f"{loss(logits, targets).item():.4f}")
        0.3282
    """

    name = "focal_scheduled"
    _parameter_constraints: ClassVar[dict] = {**Loss._parameter_constraints, "milestones": [_INSIDE_UNIT],
                              "gammas": [SequenceOf(GAMMA)],
                              "switch_at": [SequenceOf(POSITIVE_INT, increasing=True), None]}

    def __init__(self, *, milestones: Sequence[float] = (2 / 7, 5 / 7), gammas: Sequence[float] = (5.0, 3.0, 1.0),
                 switch_at: Sequence[int] | None = None, reduction: str = "mean",
                 ignore_index: int | None = None) -> None:
        super().__init__(reduction=reduction, ignore_index=ignore_index)
        self._validate(milestones=milestones, gammas=gammas, switch_at=switch_at)
        self.milestones = tuple(float(m) for m in milestones)
        self.gammas = tuple(float(g) for g in gammas)
        self.switch_at = None if switch_at is None else tuple(int(e) for e in switch_at)
        # relations between parameters
        if self.switch_at is not None and len(self.switch_at) != len(self.milestones):
            raise ValueError(f"switch_at must name {len(self.milestones)} epochs (0-based, one per γ after the "
                             f"first), got {switch_at!r}")
        if len(self.gammas) != len(self.milestones) + 1:
            raise ValueError(f"need len(gammas) == len(milestones) + 1, got {len(self.gammas)} gammas "
                             f"for {len(self.milestones)} milestones")
        self.gamma: float | None = None
        # The epoch's γ on the loss's device, filled in place by set_epoch: the sync-free path (a
        # GPU, a captured step) reads it there, so one captured graph serves every epoch.
        self.register_buffer("gamma_tensor", torch.zeros((), dtype=torch.float32), persistent=False)
        self._has_epoch = False  # a flag, not the number: a traced step would freeze the number

    def switch_epochs(self, num_epochs: int) -> list[int]:
        """First epoch (0-based) of each γ after the first, for a run of ``num_epochs``.

        Args:
            num_epochs: the run's number of epochs E.

        Returns:
            One epoch per milestone, increasing.

        Raises:
            ValueError: if ``switch_at`` names an epoch the run does not reach.
        """
        if self.switch_at is None:
            return [round(m * num_epochs) for m in self.milestones]
        if self.switch_at[-1] >= num_epochs:
            raise ValueError(f"switch_at {list(self.switch_at)} must stay below the run's {num_epochs} epochs")
        return list(self.switch_at)

    def gamma_at(self, epoch: int, num_epochs: int) -> float:
        """The γ of ``epoch`` in a run of ``num_epochs``.

        Args:
            epoch: the epoch, 0-based, below ``num_epochs``.
            num_epochs: the run's number of epochs E ≥ 1.

        Returns:
            The epoch's γ.

        Raises:
            ValueError: if ``epoch`` or ``num_epochs`` is not an int in range.
        """
        if isinstance(num_epochs, bool) or not isinstance(num_epochs, int) or num_epochs < 1:
            raise ValueError(f"num_epochs must be a positive int, got {num_epochs!r}")
        if isinstance(epoch, bool) or not isinstance(epoch, int) or not 0 <= epoch < num_epochs:
            raise ValueError(f"epoch must be an int in [0, {num_epochs}), got {epoch!r}")
        return self.gammas[sum(epoch >= s for s in self.switch_epochs(num_epochs))]

    def set_epoch(self, epoch: int, num_epochs: int) -> None:
        """Use the γ of ``epoch`` from now on; the trainer calls it at the start of each epoch.

        Args:
            epoch: the epoch about to start, 0-based.
            num_epochs: the run's number of epochs E.

        Raises:
            ValueError: if ``epoch`` or ``num_epochs`` is not an int in range.
        """
        self.gamma = self.gamma_at(epoch, num_epochs)
        self.gamma_tensor.fill_(self.gamma)
        self._has_epoch = True

    def elementwise(self, logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """The focal loss at the current epoch's γ of each element.

        Args:
            logits: float logits, (N, K, *spatial).
            index: target class indices, (N, 1, *spatial), every one a valid class.

        Returns:
            The loss of each element, (N, 1, *spatial).
        """
        return self.reduced(logits, index, "none")

    def reduced(self, logits: torch.Tensor, index: torch.Tensor, reduction: str) -> torch.Tensor:
        """The focal loss at the current epoch's γ, reduced inside its one autograd node.

        Args:
            logits: float logits, (N, K, *spatial).
            index: target class indices, (N, 1, *spatial), every one a valid class.
            reduction: ``"mean"``, ``"sum"`` or ``"none"``.

        Returns:
            A 0-d tensor, or (N, 1, *spatial) for ``"none"``.

        Raises:
            ValueError: if ``set_epoch`` has not been called.
        """
        if not self._has_epoch:
            raise ValueError("focal_scheduled needs the epoch: call set_epoch(epoch, num_epochs) before the first forward")
        # on the CPU the number (the fused kernel's path); sync-free, the device tensor
        gamma = self.gamma_tensor if avoid_host_sync(logits) else self.gamma
        return focal_of_target(logits, index, gamma, reduction=reduction)

    def hyperparameters(self) -> dict[str, object]:
        """The constructor arguments that define this loss.

        Returns:
            Constructor parameter name -> value.
        """
        switch = {} if self.switch_at is None else {"switch_at": self.switch_at}
        return {"milestones": self.milestones, "gammas": self.gammas, **switch, **super().hyperparameters()}
