"""Class-imbalance losses of hossain2021 §3 (and Sudre et al. 2017's generalised Dice).

All take logits (N, K) or (N, K, H, W) with integer targets (N,) or (N, H, W); z = softmax.
Notation follows hossain2021: y the one-hot target, α, β, γ, ρ its loss constants.

Sign of the dual-focal term. hossain2021 prints Eq 8 (and its derivative Eq 12) with the
α|y − z|^γ term *subtracted* (inside −Σ(…)), but Eq 7, Appendix B (Eq B.2), the text ("DFL
always has a larger derivative than CE", Fig. 1a) and the authors' code all *add* it to the
loss. ``DualFocalLoss`` implements the added form,

    L = −Σ_i [ y_i log z_i + β (1 − y_i) log(ρ − z_i) ] + α Σ_i |y_i − z_i|^γ,

whose derivative with α = β = γ = ρ = 1 is ∂L/∂z_i = −y_i/z_i + (1 − y_i)/(1 − z_i) − sign(y_i − z_i)
(i.e. −1/z − 1 for the true class: larger in magnitude than cross-entropy's −1/z, as Fig. 1a shows).
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from focalcal.core.constraints import GAMMA, NON_NEGATIVE, POSITIVE, Interval, SequenceOf
from focalcal.core.validation import real_array

from . import _fused
from ._base import Loss, avoid_host_sync, class_weight_tensor
from ._classwise import choose, classwise_loss

if TYPE_CHECKING:
    from focalcal.core.types import ArrayLike


# ---- class weights ---------------------------------------------------------------------------
def class_counts(targets: ArrayLike, num_classes: int, ignore_index: int | None = None) -> np.ndarray:
    """How many samples/pixels of each class ``targets`` holds.

    Args:
        targets: integer class indices, any shape (e.g. every training mask).
        num_classes: the number of classes K ≥ 2.
        ignore_index: a target value left uncounted (e.g. 255 for unlabelled pixels); ``None``
            (default) counts every value.

    Returns:
        The count of each class, (K,) int64.

    Raises:
        ValueError: if ``num_classes`` is not an int ≥ 2, or ``targets`` is not integer or
            holds a value outside 0..K − 1 (besides ``ignore_index``).

    Examples:
        >>> import torch
        >>> from focalcal.losses import class_counts
        >>> masks = torch.tensor([[0, 0, 1], [2, 0, 255]])
        >>> class_counts(masks, num_classes=3, ignore_index=255).tolist()
        [3, 1, 1]
    """
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
        raise ValueError(f"num_classes must be an int >= 2, got {num_classes!r}")
    if torch.is_tensor(targets):
        targets = targets.detach().cpu().numpy()
    targets = np.asarray(targets)
    if targets.size and not np.issubdtype(targets.dtype, np.integer):
        raise ValueError(f"targets must hold integer class indices, got dtype {targets.dtype}")
    flat = targets.reshape(-1).astype(np.int64)
    if ignore_index is not None:
        flat = flat[flat != ignore_index]
    if flat.size and (flat.min() < 0 or flat.max() >= num_classes):
        bad = flat[(flat < 0) | (flat >= num_classes)][0]
        raise ValueError(f"targets out of range: found {bad}, expected 0..{num_classes - 1}")
    return np.bincount(flat, minlength=num_classes)


def inverse_frequency_weights(counts: ArrayLike) -> np.ndarray:
    r"""$w_i = n / (K n_i)$: inversely proportional to each class's count, 1 for balanced data.

    A class with no samples has no finite weight; that is an error naming the class rather
    than a silent guess.

    Args:
        counts: one count $n_i$ per class, (K,) (see ``class_counts``); n is their sum.

    Returns:
        The weight of each class, (K,) float64.

    Raises:
        ValueError: if ``counts`` is not 1-D with at least two finite non-negative entries,
            or a class has count 0.

    Examples:
        >>> from focalcal.losses import inverse_frequency_weights
        >>> inverse_frequency_weights([3, 1, 1]).round(4).tolist()
        [0.5556, 1.6667, 1.6667]
    """
    counts = counts.detach().cpu().numpy().astype(np.float64) if torch.is_tensor(counts) else real_array(counts, "counts")
    if counts.ndim != 1 or counts.size < 2:
        raise ValueError(f"counts must be 1-D with one entry per class, got shape {counts.shape}")
    if not np.all(np.isfinite(counts)) or np.any(counts < 0):
        raise ValueError(f"counts must be finite and non-negative, got {counts.tolist()}")
    absent = np.flatnonzero(counts == 0)
    if absent.size:
        raise ValueError(f"classes {absent.tolist()} never occur, so their inverse frequency is infinite; "
                         "pass explicit weights or counts for them")
    return counts.sum() / (counts.size * counts)


class WeightedCrossEntropyLoss(Loss):
    r"""hossain2021 Eq 3: $-w_y \log z_y$ with inverse-frequency class weights.

    Give ``weights`` (one per class) or ``class_counts`` (weights = inverse frequency), or
    neither and let the trainer call ``set_training_targets(train_targets, num_classes)``.
    The mean reduction is the plain mean of $w_y \cdot \mathrm{CE}$ over elements.

    Args:
        weights: one non-negative weight per class, (K,); None (default) for none given.
        class_counts: one count per class, (K,), turned into ``inverse_frequency_weights``;
            None (default) for none given.
        reduction: ``"mean"`` (over non-ignored samples/pixels), ``"sum"``, or ``"none"``
            (one value per sample/pixel).
        ignore_index: target value whose samples/pixels are left out (e.g. 255 for unlabelled
            pixels); ``None`` (default) means none.

    Attributes:
        weights (torch.Tensor | None): the class weights as float32, (K,), None until given.
        needs_training_targets (bool): True while no weights are given, so the trainer calls
            ``set_training_targets``.

    Raises:
        ValueError: if both ``weights`` and ``class_counts`` are given.

    Examples:
        >>> import torch
        >>> from focalcal.losses import WeightedCrossEntropyLoss
        >>> logits = torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.3, 1.2]])
        >>> targets = torch.tensor([0, 1])
        >>> loss = WeightedCrossEntropyLoss(class_counts=[3, 1, 1])
        >>> print(f"{loss(logits, targets).item():.4f}")
        1.2783
        >>> loss = WeightedCrossEntropyLoss.from_targets(torch.tensor([0, 0, 0, 1, 2]), num_classes=3)
        >>> print(f"{loss(logits, targets).item():.4f}")
        1.2783
    """

    name = "weighted_cross_entropy"
    _parameter_constraints: ClassVar[dict] = {**Loss._parameter_constraints,
                              "weights": [SequenceOf(NON_NEGATIVE, min_length=2), None],
                              "class_counts": [SequenceOf(NON_NEGATIVE, min_length=2), None]}

    def __init__(self, *, weights: ArrayLike | None = None, class_counts: ArrayLike | None = None,
                 reduction: str = "mean", ignore_index: int | None = None) -> None:
        super().__init__(reduction=reduction, ignore_index=ignore_index)
        self._validate(weights=weights, class_counts=class_counts)
        if weights is not None and class_counts is not None:
            raise ValueError("give weights or class_counts, not both")
        if class_counts is not None:
            weights = inverse_frequency_weights(class_counts)
        weights = class_weight_tensor(weights, "weights")
        # The float64 weights as given (hyperparameters); the buffer holds them as float32, the
        # logits' type in training, so a step reads them where they are with no copy.
        self._weight_values = None if weights is None else tuple(weights.tolist())
        self.register_buffer("weights", None if weights is None else weights.float())
        # Where the module lives, moved with it: set_training_targets puts the weights there.
        self.register_buffer("_placement", torch.empty(0), persistent=False)
        self.needs_training_targets = weights is None

    @classmethod
    def from_targets(cls, targets: ArrayLike, num_classes: int, **kwargs: object) -> WeightedCrossEntropyLoss:
        """Weights from the class frequencies of ``targets`` (e.g. all training masks).

        Args:
            targets: integer class indices, any shape.
            num_classes: the number of classes K.
            **kwargs: the other constructor arguments (``reduction``, ``ignore_index``, which
                also leaves its value uncounted).

        Returns:
            The loss, with inverse-frequency weights.
        """
        return cls(class_counts=class_counts(targets, num_classes, kwargs.get("ignore_index")), **kwargs)

    def set_training_targets(self, targets: ArrayLike, num_classes: int) -> None:
        """Counts the classes once (one read-back, before training) and puts the weights on the
        module's device, so that no step copies them there. A no-op where weights were given.

        Args:
            targets: every training target, integer class indices of any shape.
            num_classes: the number of classes K.

        Raises:
            ValueError: if a target is out of range or a class never occurs.
        """
        if self.needs_training_targets:
            weights = inverse_frequency_weights(class_counts(targets, num_classes, self.ignore_index))
            self._weight_values = tuple(weights.tolist())
            self.weights = torch.as_tensor(weights, dtype=torch.float32).to(self._placement.device)

    def _class_weights(self, logits):
        if self.weights is None:
            raise ValueError("weighted_cross_entropy has no class weights: give weights or class_counts, "
                             "or call set_training_targets(train_targets, num_classes) first")
        if self.weights.numel() != logits.shape[1]:
            raise ValueError(f"weights has {self.weights.numel()} entries but logits have {logits.shape[1]} classes")
        return self.weights.to(device=logits.device, dtype=logits.dtype)  # itself when both match

    def elementwise(self, logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """The weighted cross-entropy of each element.

        Args:
            logits: float logits, (N, K, *spatial).
            index: target class indices, (N, 1, *spatial), every one a valid class.

        Returns:
            The loss of each element, (N, 1, *spatial).
        """
        return F.cross_entropy(logits, index.squeeze(1), weight=self._class_weights(logits),
                               reduction="none").unsqueeze(1)

    def reduce_valid(self, logits: torch.Tensor, index: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
        """The reduced weighted cross-entropy; torch's fused sum where no element is ignored.

        Args:
            logits: float logits, (N, K, *spatial).
            index: target class indices, (N, 1, *spatial), ignored ones replaced by class 0.
            valid: which elements count, (N, *spatial) booleans, or None when all do.

        Returns:
            A 0-d tensor, or (N,) / (N, *spatial) for ``reduction="none"``.

        Raises:
            ValueError: if the loss has no weights yet or not one per class.
        """
        if valid is None and self.reduction != "none":  # torch's fused sum Σ w_y CE; the mean is over elements
            total = F.cross_entropy(logits, index.squeeze(1), weight=self._class_weights(logits), reduction="sum")
            return total if self.reduction == "sum" else total / index.numel()
        return super().reduce_valid(logits, index, valid)

    def hyperparameters(self) -> dict[str, object]:
        """The constructor arguments that define this loss.

        Returns:
            Constructor parameter name -> value.
        """
        return {"weights": self._weight_values, **super().hyperparameters()}


# ---- dual cross-entropy and dual focal loss -------------------------------------------------
class DualCrossEntropyLoss(Loss):
    r"""hossain2021 Eq 4 (Li et al.'s dual CE): $-\log z_y + \beta \sum_{i \ne y} \log(\alpha + z_i)$.

    Args:
        alpha: α > 0 (default 1).
        beta: β ≥ 0, the weight of the wrong classes' term (default 1; 0 is cross-entropy).
        reduction: ``"mean"`` (over non-ignored samples/pixels), ``"sum"``, or ``"none"``
            (one value per sample/pixel).
        ignore_index: target value whose samples/pixels are left out (e.g. 255 for unlabelled
            pixels); ``None`` (default) means none.

    Examples:
        >>> import torch
        >>> from focalcal.losses import DualCrossEntropyLoss
        >>> logits = torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.3, 1.2]])
        >>> targets = torch.tensor([0, 1])
        >>> loss = DualCrossEntropyLoss(alpha=1.0, beta=1.0)
        >>> print(f"{loss(logits, targets).item():.4f}")
        1.2620
    """

    name = "dual_cross_entropy"
    _parameter_constraints: ClassVar[dict] = {**Loss._parameter_constraints, "alpha": [POSITIVE], "beta": [NON_NEGATIVE]}

    def __init__(self, *, alpha: float = 1.0, beta: float = 1.0, reduction: str = "mean",
                 ignore_index: int | None = None) -> None:
        super().__init__(reduction=reduction, ignore_index=ignore_index)
        self._validate(alpha=alpha, beta=beta)
        self.alpha, self.beta = float(alpha), float(beta)

    def elementwise(self, logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """The dual cross-entropy of each element.

        Args:
            logits: float logits, (N, K, *spatial).
            index: target class indices, (N, 1, *spatial), every one a valid class.

        Returns:
            The loss of each element, (N, 1, *spatial).
        """
        return self.reduced(logits, index, "none")

    def reduced(self, logits: torch.Tensor, index: torch.Tensor, reduction: str) -> torch.Tensor:
        """The dual cross-entropy, reduced inside its one autograd node.

        Args:
            logits: float logits, (N, K, *spatial).
            index: target class indices, (N, 1, *spatial), every one a valid class.
            reduction: ``"mean"``, ``"sum"`` or ``"none"``.

        Returns:
            A 0-d tensor, or (N, 1, *spatial) for ``"none"``.
        """
        alpha, beta = self.alpha, self.beta
        if _fused.usable(logits):
            return _fused.classwise(logits, index, "dual_cross_entropy", (alpha, beta), reduction=reduction)

        def spec(parts):
            alpha_plus_p = parts.p + alpha  # α > 0: no cancellation
            loss = torch.log(alpha_plus_p).mul_(beta).scatter_(1, index, parts.log_p.gather(1, index).neg_())
            # ∂L/∂log p_i = β p_i/(α + p_i) for the other classes, −1 for the true one.
            slope = torch.div(parts.p, alpha_plus_p.div_(beta)).scatter_(1, index, -1.0)
            return loss.sum(dim=1, keepdim=True), slope, None

        return classwise_loss(logits, spec, reduction=reduction)

    def hyperparameters(self) -> dict[str, object]:
        """The constructor arguments that define this loss.

        Returns:
            Constructor parameter name -> value.
        """
        return {"alpha": self.alpha, "beta": self.beta, **super().hyperparameters()}


class DualFocalLoss(Loss):
    r"""hossain2021 dual focal loss (Eq 8 with Eq 7's added $\alpha |y - z|^\gamma$; see the module docstring).

    $$
    L = -\log z_y - \beta \sum_{i \ne y} \log(\rho - z_i)
        + \alpha \Big[(1 - z_y)^\gamma + \sum_{i \ne y} z_i^\gamma\Big],
    $$

    all constants 1 by default as in the paper. ρ ≥ 1 keeps log(ρ − z) finite; log(1 − z) is
    computed exactly.

    Args:
        alpha: α ≥ 0, the weight of the $|y - z|^\gamma$ term (default 1).
        beta: β ≥ 0, the weight of the wrong classes' log term (default 1).
        gamma: γ ≥ 0, the exponent of $|y - z|$ (default 1).
        rho: ρ ≥ 1, the offset inside the wrong classes' log (default 1).
        reduction: ``"mean"`` (over non-ignored samples/pixels), ``"sum"``, or ``"none"``
            (one value per sample/pixel).
        ignore_index: target value whose samples/pixels are left out (e.g. 255 for unlabelled
            pixels); ``None`` (default) means none.

    Examples:
        >>> import torch
        >>> from focalcal.losses import DualFocalLoss
        >>> logits = torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.3, 1.2]])
        >>> targets = torch.tensor([0, 1])
        >>> loss = DualFocalLoss()
        >>> print(f"{loss(logits, targets).item():.4f}")
        2.4783
        >>> print(f"{DualFocalLoss(gamma=2.0, rho=1.5)(logits, targets).item():.4f}")
        0.9380
    """

    name = "dual_focal"
    _parameter_constraints: ClassVar[dict] = {**Loss._parameter_constraints, "alpha": [NON_NEGATIVE], "beta": [NON_NEGATIVE],
                              "gamma": [GAMMA], "rho": [Interval(numbers.Real, 1, None, closed="left")]}

    def __init__(self, *, alpha: float = 1.0, beta: float = 1.0, gamma: float = 1.0, rho: float = 1.0,
                 reduction: str = "mean", ignore_index: int | None = None) -> None:
        super().__init__(reduction=reduction, ignore_index=ignore_index)
        self._validate(alpha=alpha, beta=beta, gamma=gamma, rho=rho)
        self.alpha, self.beta, self.gamma, self.rho = float(alpha), float(beta), float(gamma), float(rho)

    def elementwise(self, logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """The dual focal loss of each element.

        Args:
            logits: float logits, (N, K, *spatial).
            index: target class indices, (N, 1, *spatial), every one a valid class.

        Returns:
            The loss of each element, (N, 1, *spatial).
        """
        return self.reduced(logits, index, "none")

    def reduced(self, logits: torch.Tensor, index: torch.Tensor, reduction: str) -> torch.Tensor:
        """The dual focal loss, reduced inside its one autograd node.

        Args:
            logits: float logits, (N, K, *spatial).
            index: target class indices, (N, 1, *spatial), every one a valid class.
            reduction: ``"mean"``, ``"sum"`` or ``"none"``.

        Returns:
            A 0-d tensor, or (N, 1, *spatial) for ``"none"``.
        """
        if _fused.usable(logits):
            constants = (self.alpha, self.beta, self.gamma, self.rho)
            return _fused.classwise(logits, index, "dual_focal", constants, reduction=reduction)
        if self.gamma == 1.0 and self.rho == 1.0:
            return classwise_loss(logits, self._paper_setting_spec(index), needs_top=True, reduction=reduction)
        alpha, beta, gamma, rho_minus_one = self.alpha, self.beta, self.gamma, self.rho - 1.0
        linear = gamma == 1.0  # z^γ = z and Σ_{i≠y} z_i = 1 − z_y, no powers

        def spec(parts):
            log_p, p, top = parts.log_p, parts.p, parts.top
            # Row values of the target y: log z_y, z_y, and 1 − z_y exactly (the top's is `rest`).
            log_rest = parts.log_rest()
            target_is_top = top == index
            # log z_y; where y is the top, log1p(−(1 − z_y)): log-softmax has rounded it to 0 when 1 − z_y < eps
            log_p_y = torch.where(target_is_top, torch.log1p(parts.rest.neg()), log_p.gather(1, index))
            p_y = p.gather(1, index)
            q_y = torch.where(target_is_top, parts.rest, torch.rsub(p_y, 1.0))
            log_q_y = torch.where(target_is_top, log_rest, torch.log1p(p_y.neg()))
            # log(ρ − z_i) of every class: log1p(−z) is exact but at the top, whose 1 − z_t is `rest`.
            if rho_minus_one == 0.0:
                log_rho_minus_p = torch.log1p(p.neg()).scatter_(1, top, log_rest)
            else:
                log_rho_minus_p = torch.log(torch.rsub(p, 1.0).scatter_(1, top, parts.rest).add_(rho_minus_one))
            # L = −log z_y + α (1 − z_y)^γ + Σ_{i≠y} [α z_i^γ − β log(ρ − z_i)]
            others = log_rho_minus_p.scatter_(1, index, 0.0).sum(dim=1, keepdim=True).mul_(-beta)
            if linear:
                others.add_(q_y, alpha=alpha)
                target_loss = q_y * alpha
            else:
                others.add_(p.pow(gamma).scatter_(1, index, 0.0).sum(dim=1, keepdim=True), alpha=alpha)
                target_loss = torch.exp(log_q_y * gamma).mul_(alpha)
            loss = target_loss.sub_(log_p_y).add_(others)
            # a = ∂L/∂log z: β z/(ρ − z) + αγ z^γ for the other classes, −1 − αγ z_y (1 − z_y)^(γ−1)
            # for y. Plain 1 − z is exact but at the top, whose share goes through b below.
            rho_minus_p = torch.rsub(p, 1.0 + rho_minus_one)
            if linear:
                slope = torch.addcdiv(p * alpha if alpha != 1.0 else p, p, rho_minus_p, value=beta)
            else:
                slope = torch.addcdiv(p.pow(gamma).mul_(alpha * gamma), p, rho_minus_p, value=beta)
            target_slope = torch.exp(log_p_y + (gamma - 1.0) * log_q_y).mul_(-alpha * gamma).sub_(1.0)
            slope.scatter_(1, index, target_slope)
            # b_t = a_t (1 − z_t) for the top class t (finite: a_t may be unbounded as z_t → 1).
            p_t, q_t = parts.p_top, parts.rest
            other_b = p_t * q_t / (q_t + rho_minus_one) if rho_minus_one else p_t * beta
            if rho_minus_one:
                other_b.mul_(beta)
            other_b.add_((p_t if linear else p_t.pow(gamma)) * q_t, alpha=alpha * gamma)
            target_b = torch.exp(log_p_y + gamma * log_q_y).mul_(-alpha * gamma).sub_(q_y)
            return loss, slope, torch.where(target_is_top, target_b, other_b)

        return classwise_loss(logits, spec, needs_top=True, reduction=reduction)

    def _paper_setting_spec(self, index):
        """γ = ρ = 1 (the paper's setting, any α, β) in fewer passes: there α Σ_i |y_i − z_i| =
        2α (1 − z_y), so L = −log z_y + 2α (1 − z_y) − β Σ_{i≠y} log(1 − z_i), and
        a = ∂L/∂log z is z_i (α + β/(1 − z_i)) for i ≠ y and −1 − α z_y for y."""
        alpha, beta = self.alpha, self.beta

        def spec(parts):
            p, top, rest = parts.p, parts.top, parts.rest
            target_is_top = (top == index).to(p.dtype)  # a 0/1 mask for ``choose``
            target_not_top = torch.rsub(target_is_top, 1.0)
            # log z_y; where y is the top, log1p(−(1 − z_y)): log-softmax has rounded it to 0 when
            # 1 − z_y < eps (torch.where: log1p(−rest) is −inf in rows without a top above 1/2)
            log_p_y = torch.where(target_is_top > 0, torch.log1p(rest.neg()), parts.log_p.gather(1, index))
            p_y = log_p_y.exp()  # cheaper than a second gather along the class axis
            q_y = choose(target_is_top, target_not_top, rest, torch.rsub(p_y, 1.0))  # 1 − z_y exactly
            # log(1 − z_i): log1p is exact but at the top, whose 1 − z_t is `rest`.
            # In place where possible: at segmentation sizes a fresh tensor costs more in page faults
            # than the arithmetic that fills it.
            log_one_minus = torch.neg(p, out=parts.buffer()).log1p_().scatter_(1, top, parts.log_rest())
            others = log_one_minus.scatter_(1, index, 0.0).sum(dim=1, keepdim=True)  # no cancellation
            loss = q_y.mul(2.0 * alpha).sub_(log_p_y).sub_(others, alpha=beta)
            del log_one_minus
            one_minus = torch.rsub(p, 1.0)
            slope = torch.addcdiv(p if alpha == 1.0 else p * alpha, p, one_minus, value=beta, out=one_minus)
            target_slope = p_y.mul(-alpha).sub_(1.0)
            slope.scatter_(1, index, target_slope)
            # b_t = a_t (1 − z_t) for the top t: z_t (β + α (1 − z_t)) if t ≠ y, a_y (1 − z_y) if t = y.
            other_b = torch.addcmul(parts.p_top * beta, parts.p_top, rest, value=alpha)
            return loss, slope, choose(target_is_top, target_not_top, target_slope * q_y, other_b)

        return spec

    def hyperparameters(self) -> dict[str, object]:
        """The constructor arguments that define this loss.

        Returns:
            Constructor parameter name -> value.
        """
        return {"alpha": self.alpha, "beta": self.beta, "gamma": self.gamma, "rho": self.rho,
                **super().hyperparameters()}


# ---- generalised Dice --------------------------------------------------------------------------
class GeneralizedDiceLoss(Loss):
    r"""Sudre et al. (2017)'s generalised Dice loss,

    $$
    L = 1 - 2 \frac{\sum_l w_l \sum_n r_{ln} z_{ln}}{\sum_l w_l \sum_n (r_{ln} + z_{ln})},
    \quad w_l = \frac{1}{\big(\sum_n r_{ln}\big)^2}.
    $$

    The sums over n run over every pixel of the batch (default) or of each image
    (``per_image=True``, then reduced over images). A class absent from the reference has no
    finite weight; it gets the largest weight of the present classes, so predicting it still
    costs (through the denominator) instead of being ignored or dominating. Ignored pixels
    (``ignore_index``) are left out of every sum.

    Args:
        per_image: sum over each image's pixels and reduce the images' losses (True), or sum
            over every pixel of the batch (default False).
        reduction: over images with ``per_image`` (``"mean"``, ``"sum"``, or ``"none"``: one
            value per image, (N,)); without it the batch has one loss, a 0-d tensor, whatever
            the reduction.
        ignore_index: target value whose pixels are left out; ``None`` (default) means none.

    Examples:
        >>> import torch
        >>> from focalcal.losses import GeneralizedDiceLoss
        >>> logits = torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.3, 1.2], [0.4, 1.5, 0.2]])
        >>> targets = torch.tensor([0, 1, 1])
        >>> loss = GeneralizedDiceLoss()
        >>> print(f"{loss(logits, targets).item():.4f}")
        0.4634
    """

    name = "generalized_dice"
    _parameter_constraints: ClassVar[dict] = {**Loss._parameter_constraints, "per_image": [bool]}
    mean_over_elements = False  # one value for the batch (or a mean over images): nothing to sum
    per_sample = False

    def __init__(self, *, per_image: bool = False, reduction: str = "mean", ignore_index: int | None = None) -> None:
        super().__init__(reduction=reduction, ignore_index=ignore_index)
        self._validate(per_image=per_image)
        self.per_image = bool(per_image)

    def reduce_valid(self, logits: torch.Tensor, index: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
        """The generalised Dice loss of the batch, or of each image reduced.

        Args:
            logits: float logits, (N, K, *spatial).
            index: target class indices, (N, 1, *spatial), ignored ones replaced by class 0.
            valid: which elements count, (N, *spatial) booleans, or None when all do.

        Returns:
            A 0-d tensor; (N,) for ``per_image`` with ``reduction="none"``.
        """
        if valid is None and not self.per_image and not avoid_host_sync(logits):  # the closed form reads sums back
            return _fused.batch_dice(logits, index) if _fused.usable(logits) else self._batch_dice_loss(logits, index)
        n, k = logits.shape[:2]
        probs = torch.softmax(logits, dim=1).reshape(n, k, -1)  # (N, K, pixels); 1 pixel for (N, K)
        reference = torch.zeros_like(probs).scatter_(1, index.reshape(n, 1, -1), 1.0)
        if valid is not None:
            mask = valid.reshape(n, 1, -1).to(probs.dtype)
            probs, reference = probs * mask, reference * mask
        dims = (2,) if self.per_image else (0, 2)
        class_count = reference.sum(dim=dims)  # (N, K) per image, (K,) for the batch
        present = class_count > 0
        weight = torch.where(present, torch.where(present, class_count, 1.0).square().reciprocal(), 0.0)
        weight = torch.where(present, weight, weight.amax(dim=-1, keepdim=True))
        numerator = (weight * (reference * probs).sum(dim=dims)).sum(dim=-1)
        denominator = (weight * (class_count + probs.sum(dim=dims))).sum(dim=-1)
        has_pixels = denominator > 0  # False only when every pixel is ignored
        dice = 2 * numerator / torch.where(has_pixels, denominator, 1.0)
        loss = torch.where(has_pixels, 1.0 - dice, 0.0)
        return self._reduce(loss.unsqueeze(1), None) if self.per_image else loss  # batch level: one value

    @staticmethod
    def _batch_dice_loss(logits, index):
        """The common case (every pixel counts, sums over the batch) without the one-hot
        reference — Σ_l w_l Σ_n r_ln z_ln = Σ_n w_(y_n) z_(y_n, n), Σ_n r_ln = the class
        counts — and with the gradient in closed form (``_BatchDice``)."""
        k = logits.shape[1]
        with torch.no_grad():
            counts = torch.bincount(index.reshape(-1), minlength=k).to(logits.dtype)
            present = counts > 0
            weight = torch.where(present, counts, float("inf")).square_().reciprocal_()  # 0 where absent
            weight = torch.where(present, weight, weight.amax())
            reference_total = float(torch.dot(weight, counts))
        return _BatchDice.apply(logits, index, weight, reference_total)

    def hyperparameters(self) -> dict[str, object]:
        """The constructor arguments that define this loss.

        Returns:
            Constructor parameter name -> value.
        """
        return {"per_image": self.per_image, **super().hyperparameters()}


class _BatchDice(torch.autograd.Function):
    """1 − 2 N/D with N = Σ_n w_(y_n) z_(y_n, n), D = Σ_l w_l Σ_n z_ln + Σ_l w_l c_l, in one node.

    ∂L/∂z_nl = B w_l − A w_l [l = y_n] with A = 2/D, B = 2N/D²; through the softmax,
    ∂L/∂u_nk = z_nk (B (w_k − Σ_l z_nl w_l) + A w_(y_n) z_(y_n, n)) − A w_(y_n) z_(y_n, n) [k = y_n]:
    a few whole-tensor ops instead of autograd's chain through every intermediate.
    """

    @staticmethod
    def forward(ctx, logits, index, weight, reference_total):
        probs = torch.softmax(logits, dim=1)
        class_axis = [1] * logits.dim()
        class_axis[1] = -1
        weight_per_class = weight.view(class_axis)
        target_term = probs.gather(1, index).mul_(weight[index])  # w_(y_n) z_(y_n, n), (N, 1, *)
        numerator = float(target_term.sum())
        predicted_total = probs.sum(dim=(0, *range(2, probs.dim())))  # Σ_n z_ln per class
        denominator = float(torch.dot(weight, predicted_total)) + reference_total
        ctx.save_for_backward(probs, index, weight_per_class, target_term)
        ctx.slopes = (2.0 / denominator, 2.0 * numerator / denominator ** 2)
        return torch.tensor(1.0 - 2.0 * numerator / denominator, dtype=logits.dtype, device=logits.device)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        probs, index, weight_per_class, target_term = ctx.saved_tensors
        a, b = ctx.slopes
        expected_weight = (probs * weight_per_class).sum(dim=1, keepdim=True)  # Σ_l z_nl w_l
        row = torch.sub(target_term * a, expected_weight, alpha=b)
        grad = (weight_per_class * b + row).mul_(probs)
        grad.scatter_add_(1, index, target_term * -a)
        return grad.mul_(grad_output), None, None, None
