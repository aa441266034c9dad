"""AdaFocal (Ghosh, Schaaf & Gormley, NeurIPS 2022), the AdaFocal of komisarenko2024 Table 1.

Focal loss with one γ per confidence bin, adapted once per epoch from the validation set's
calibration. After each validation pass (``update_from_validation``):

1. the validation samples are split into ``num_bins`` equal-mass bins of top-label
   confidence; bin b has mean confidence C_b and accuracy A_b;
2. each bin's γ moves towards calibration: γ_b ← γ_b · exp(λ (C_b − A_b)) in the focal
   regime (γ_b > 0: an over-confident bin, C_b > A_b, gets a larger γ, more entropy); in the
   inverse-focal regime (γ_b < 0, loss −(1 + p_y)^|γ| log p_y, which *raises* confidence)
   |γ_b| ← |γ_b| · exp(−λ (C_b − A_b)), so an under-confident bin is pushed harder;
3. when |γ_b| falls below ``switch_threshold`` (S_th) the bin switches regime: γ_b ← +S_th if
   the bin is over-confident, −S_th if under-confident; then the signed γ_b is clipped to
   [``gamma_min``, ``gamma_max``], as the official AdaFocal code does: an inverse-focal bin's
   weight (1 + p_y)^|γ| stays ≤ 4 by default, while a focal bin's γ may reach 20.

During training each sample uses the γ of the bin its confidence falls in — by default its
probability of the true class p_y (``bin_by="true_class"``, as FLSD does), or its top-label
confidence (``bin_by="predicted"``, the quantity the bins are built from). Before the first
update every bin has ``gamma_initial``. Defaults are those of the official AdaFocal code
(github.com/3mcloud/adafocal), since komisarenko2024 trained AdaFocal with its defaults: 15 bins,
λ = 1, γ_0 = 1, γ ∈ [γ_min, γ_max] = [−2, 20], S_th = 0.2. Signed γ (negative = inverse focal)
is how both that code and this module encode the regime.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, ClassVar

import torch

from focalcal.core.constraints import NON_NEGATIVE, POSITIVE, POSITIVE_INT, REAL, Interval, Options

from ._base import Loss, avoid_host_sync, cast_like, check_targets

if TYPE_CHECKING:
    from focalcal.core.types import ArrayLike
from .focal import focal_of_target

BIN_BY = ("true_class", "predicted")


def equal_mass_bins(confidence: torch.Tensor, correct: torch.Tensor,
                    num_bins: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Split samples into ``num_bins`` bins of (almost) equal size by confidence.

    Bin sizes differ by at most one, the larger bins first (as ``numpy.array_split``). Edge b
    lies halfway between the last confidence of bin b and the first of bin b + 1, and a
    confidence c belongs to the bin ``bucketize(c, inner_edges)`` (edges[b−1] < c ≤ edges[b]).

    Args:
        confidence: each sample's top-label confidence, (N,).
        correct: whether each sample's prediction is right, (N,) booleans (or 0/1).
        num_bins: the number of bins, at most N.

    Returns:
        (inner edges (num_bins − 1,), mean confidence per bin (num_bins,), accuracy per bin
        (num_bins,) as a fraction), all float64.

    Raises:
        ValueError: if there are fewer samples than bins.

    Examples:
        >>> import torch
        >>> from focalcal.losses.adafocal import equal_mass_bins
        >>> confidence = torch.tensor([0.9, 0.4, 0.6, 0.8, 0.5])
        >>> correct = torch.tensor([True, False, True, True, False])
        >>> edges, mean_confidence, accuracy = equal_mass_bins(confidence, correct, num_bins=2)
        >>> [round(value, 4) for value in edges.tolist()]
        [0.7]
        >>> [round(value, 4) for value in mean_confidence.tolist()]
        [0.5, 0.85]
        >>> [round(value, 4) for value in accuracy.tolist()]
        [0.3333, 1.0]
    """
    n = confidence.numel()
    if n < num_bins:
        raise ValueError(f"equal-mass binning needs at least num_bins={num_bins} validation samples, got {n}")
    order = torch.argsort(confidence)
    sorted_conf = confidence[order].to(torch.float64)
    sorted_correct = correct[order].to(torch.float64)
    # Sizes differ by at most one, the larger bins first (as numpy.array_split).
    sizes = torch.full((num_bins,), n // num_bins, device=confidence.device)
    sizes[: n % num_bins] += 1
    bin_of_rank = torch.repeat_interleave(torch.arange(num_bins, device=confidence.device), sizes)
    counts = sizes.to(torch.float64)
    mean_conf = torch.zeros(num_bins, dtype=torch.float64, device=confidence.device).index_add_(
        0, bin_of_rank, sorted_conf) / counts
    accuracy = torch.zeros(num_bins, dtype=torch.float64, device=confidence.device).index_add_(
        0, bin_of_rank, sorted_correct) / counts
    first_of_bin = torch.cumsum(counts, 0).long()[:-1]
    inner_edges = (sorted_conf[first_of_bin - 1] + sorted_conf[first_of_bin]) / 2
    return inner_edges, mean_conf, accuracy


class AdaFocalLoss(Loss):
    r"""Calibration-aware adaptive focal loss; see the module docstring for the update rule.

    Each training sample's loss is $-(1 - p_y)^{\gamma_b} \log p_y$ with the γ of its bin b, or
    the inverse-focal $-(1 + p_y)^{|\gamma_b|} \log p_y$ where $\gamma_b < 0$. Defaults are the
    official AdaFocal code's.

    Args:
        num_bins: equal-mass validation bins (15).
        lam: step size λ of the multiplicative γ update (1).
        gamma_initial: γ of every bin before the first update (1).
        gamma_min: lower bound of the signed γ, i.e. the cap on an inverse-focal bin's |γ| (−2).
        gamma_max: upper bound of γ, the cap on a focal bin's γ (20).
        switch_threshold: S_th, the |γ| below which a bin switches between focal and
            inverse-focal (0.2); at most min(|gamma_min|, gamma_max), so a switched bin is not clipped.
        bin_by: which probability of a training sample picks its bin: ``"true_class"`` (default,
            $p_y$) or ``"predicted"`` (top-label confidence).
        reduction: ``"mean"`` (over non-ignored samples/pixels), ``"sum"``, or ``"none"``
            (one value per sample/pixel).
        ignore_index: target value whose samples/pixels are left out; ``None`` (default)
            means none.

    Attributes:
        gammas (torch.Tensor): the signed γ of each bin, (num_bins,) float64; negative means
            inverse focal.
        bin_edges (torch.Tensor): the inner edges of the bins, (num_bins − 1,) float64, from the
            last validation pass (equal-width before the first).

    Raises:
        ValueError: if ``switch_threshold`` exceeds min(|gamma_min|, gamma_max), or
            ``gamma_initial`` lies outside [gamma_min, gamma_max] or below ``switch_threshold``
            in magnitude.

    Examples:
        >>> import torch
        >>> from focalcal.losses import AdaFocalLoss
        >>> logits = torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.3, 1.2]])
        >>> targets = torch.tensor([0, 1])
        >>> loss = AdaFocalLoss(num_bins=2)
        >>> print(f"{loss(logits, targets).item():.4f}")
        0.5828
        >>> validation_logits = torch.tensor([[3.0, 0.0, 0.0], [2.5, 0.0, 0.0], [0.2, 0.0, 0.1], [0.0, 0.3, 0.0]])
        >>> loss.update_from_validation(validation_logits, torch.tensor([1, 0, 0, 1]))
        >>> [round(value, 4) for value in loss.gammas.tolist()]
        [0.5407, 1.4685]
        >>> print(f"{loss(logits, targets).item():.4f}")
        0.6419
    """

    name = "adafocal"
    needs_validation = True
    # γ_min < 0 < γ_max: the update switches a bin to −S_th or +S_th, so both regimes must fit.
    _parameter_constraints: ClassVar[dict] = {
        **Loss._parameter_constraints,
        "num_bins": [POSITIVE_INT],
        "lam": [NON_NEGATIVE],
        "gamma_initial": [REAL],
        "gamma_min": [Interval(numbers.Real, None, 0, closed="neither")],
        "gamma_max": [POSITIVE],
        "switch_threshold": [NON_NEGATIVE],
        "bin_by": [Options(BIN_BY)],
    }

    def __init__(self, *, num_bins: int = 15, lam: float = 1.0, gamma_initial: float = 1.0, gamma_min: float = -2.0,
                 gamma_max: float = 20.0, switch_threshold: float = 0.2, bin_by: str = "true_class",
                 reduction: str = "mean", ignore_index: int | None = None) -> None:
        super().__init__(reduction=reduction, ignore_index=ignore_index)
        self._validate(num_bins=num_bins, lam=lam, gamma_initial=gamma_initial, gamma_min=gamma_min,
                       gamma_max=gamma_max, switch_threshold=switch_threshold, bin_by=bin_by)
        self.num_bins = int(num_bins)
        self.lam = float(lam)
        self.gamma_min, self.gamma_max = float(gamma_min), float(gamma_max)
        self.switch_threshold = float(switch_threshold)
        self.gamma_initial = float(gamma_initial)
        # relations between parameters
        if self.switch_threshold > min(-self.gamma_min, self.gamma_max):
            raise ValueError(f"switch_threshold must be <= min(-gamma_min, gamma_max) = "
                             f"{min(-self.gamma_min, self.gamma_max)}, got {self.switch_threshold}")
        if not self.gamma_min <= self.gamma_initial <= self.gamma_max:
            raise ValueError(f"gamma_initial must lie in [gamma_min, gamma_max] = [{self.gamma_min}, {self.gamma_max}], "
                             f"got {gamma_initial}")
        if abs(self.gamma_initial) < self.switch_threshold:
            raise ValueError(f"|gamma_initial| must be >= switch_threshold={self.switch_threshold}, got {gamma_initial}")
        self.bin_by = bin_by
        self.register_buffer("gammas", torch.full((num_bins,), self.gamma_initial, dtype=torch.float64))
        # Before any validation statistics the edges do not matter (all γ equal); equal-width is a neutral start.
        self.register_buffer("bin_edges", torch.linspace(0, 1, num_bins + 1, dtype=torch.float64)[1:-1])
        self._cast: dict = {}  # float32 copies of the bins' edges and γs for the loss
        self._inverse: tuple | None = None

    # ---- epoch-level update ------------------------------------------------------------------
    def update_from_validation(self, logits: torch.Tensor, labels: torch.Tensor) -> None:
        """Rebin the validation set by confidence and update every bin's γ (call once per epoch).

        Args:
            logits: the validation set's logits, (N, K), N ≥ ``num_bins``.
            labels: its integer class labels, (N,).

        Raises:
            ValueError: if the logits are not a (N, K) tensor, the labels do not fit them, or
                there are fewer samples than bins.
        """
        if not torch.is_tensor(logits) or logits.dim() != 2:
            raise ValueError(f"adafocal validation logits must be a (N, K) tensor, got "
                             f"{getattr(logits, 'shape', type(logits).__name__)}")
        with torch.no_grad():
            index, _ = check_targets(labels, logits, None)
            confidence, predicted = torch.softmax(logits.double(), dim=1).max(dim=1)
            edges, mean_conf, accuracy = equal_mass_bins(confidence, predicted == index.squeeze(1), self.num_bins)
            self.update_gammas(mean_conf, accuracy)
            self.bin_edges.copy_(edges)

    def update_gammas(self, bin_confidence: ArrayLike, bin_accuracy: ArrayLike) -> None:
        """One AdaFocal step from per-bin validation confidence C_b and accuracy A_b.

        Args:
            bin_confidence: each bin's mean confidence C_b, (num_bins,).
            bin_accuracy: each bin's accuracy A_b, (num_bins,), a fraction.

        Raises:
            ValueError: if either has the wrong shape or a non-finite entry (an empty bin).
        """
        confidence = torch.as_tensor(bin_confidence, dtype=torch.float64, device=self.gammas.device)
        accuracy = torch.as_tensor(bin_accuracy, dtype=torch.float64, device=self.gammas.device)
        if confidence.shape != (self.num_bins,) or accuracy.shape != (self.num_bins,):
            raise ValueError(f"need {self.num_bins} bin confidences and accuracies, got shapes "
                             f"{tuple(confidence.shape)} and {tuple(accuracy.shape)}")
        if not bool(torch.isfinite(confidence).all() and torch.isfinite(accuracy).all()):
            raise ValueError("bin confidences and accuracies must be finite (an empty bin?)")
        # in place: a captured training step reads these very tensors
        self.gammas.copy_(next_gammas(self.gammas, confidence - accuracy, lam=self.lam, gamma_min=self.gamma_min,
                                      gamma_max=self.gamma_max, switch_threshold=self.switch_threshold))

    # ---- training loss -----------------------------------------------------------------------
    def gamma_for(self, confidence: torch.Tensor) -> torch.Tensor:
        """Signed γ of each sample from the probability that picks its bin.

        On the sync-free path the bins and γs are cast inside the step, so a captured step
        reads their current values; elsewhere the casts are kept while the tensors are unchanged.

        Args:
            confidence: each sample's probability that picks its bin (``bin_by``), any shape.

        Returns:
            The signed γ of each sample, ``confidence``'s shape and dtype.
        """
        if avoid_host_sync(confidence):
            edges, gammas = self.bin_edges.to(confidence.dtype), self.gammas.to(confidence.dtype)
        else:
            edges = cast_like(self.bin_edges, confidence, self._cast, "edges")
            gammas = cast_like(self.gammas, confidence, self._cast, "gammas")
        return gammas[torch.bucketize(confidence, edges)]

    def _gamma_of_prediction(self, p: torch.Tensor, p_y: torch.Tensor) -> torch.Tensor:
        if self.bin_by == "true_class":
            return self.gamma_for(p_y)
        return self.gamma_for(p.amax(dim=1, keepdim=True))

    def _has_inverse(self) -> bool:
        """Whether some bin uses the inverse-focal loss (γ < 0); looked up once per γ update."""
        gammas = self.gammas
        if self._inverse is None or self._inverse[0] is not gammas or self._inverse[1] != gammas._version:
            self._inverse = (gammas, gammas._version, bool((gammas < 0).any()))
        return self._inverse[2]

    def elementwise(self, logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """The AdaFocal loss of each element.

        Args:
            logits: float logits, (N, K, *spatial).
            index: target class indices, (N, 1, *spatial), every one a valid class.

        Returns:
            The loss of each element, (N, 1, *spatial).
        """
        return self.reduced(logits, index, "none")

    def reduced(self, logits: torch.Tensor, index: torch.Tensor, reduction: str) -> torch.Tensor:
        """The AdaFocal loss, reduced inside its one autograd node.

        Args:
            logits: float logits, (N, K, *spatial).
            index: target class indices, (N, 1, *spatial), every one a valid class.
            reduction: ``"mean"``, ``"sum"`` or ``"none"``.

        Returns:
            A 0-d tensor, or (N, 1, *spatial) for ``"none"``.
        """
        # Sync-free, every element takes the γ-signed formula, which equals the focal one where γ ≥ 0.
        has_inverse = True if avoid_host_sync(logits) else self._has_inverse()
        return focal_of_target(logits, index, self._gamma_of_prediction, has_inverse=has_inverse,
                               reduction=reduction)

    def hyperparameters(self) -> dict[str, object]:
        """The constructor arguments that define this loss.

        Returns:
            Constructor parameter name -> value.
        """
        return {"num_bins": self.num_bins, "lam": self.lam, "gamma_initial": self.gamma_initial,
                "gamma_min": self.gamma_min, "gamma_max": self.gamma_max, "switch_threshold": self.switch_threshold,
                "bin_by": self.bin_by, **super().hyperparameters()}


def next_gammas(gammas: torch.Tensor, calibration_gap: torch.Tensor, *, lam: float, gamma_min: float,
                gamma_max: float, switch_threshold: float) -> torch.Tensor:
    r"""AdaFocal's γ update for per-bin gaps $C_b - A_b$ (positive = over-confident), the signed
    result clipped to [gamma_min, gamma_max] after the regime switch (the official code's order).

    A focal bin takes $\gamma_b e^{\lambda (C_b - A_b)}$, an inverse-focal one
    $|\gamma_b| e^{-\lambda (C_b - A_b)}$ in magnitude; a bin whose |γ| falls below
    ``switch_threshold`` becomes ±S_th by the sign of its gap.

    Args:
        gammas: each bin's signed γ, (num_bins,); negative means inverse focal.
        calibration_gap: each bin's mean confidence minus accuracy, (num_bins,).
        lam: step size λ.
        gamma_min: lower bound of the signed γ (< 0).
        gamma_max: upper bound of γ (> 0).
        switch_threshold: S_th, the |γ| below which a bin switches regime.

    Returns:
        The updated signed γ of each bin, (num_bins,), ``gammas``' dtype.

    Examples:
        >>> import torch
        >>> from focalcal.losses.adafocal import next_gammas
        >>> gammas = torch.tensor([1.0, 1.0, -1.0], dtype=torch.float64)
        >>> gap = torch.tensor([0.5, -2.0, 0.1], dtype=torch.float64)
        >>> updated = next_gammas(gammas, gap, lam=1.0, gamma_min=-2.0, gamma_max=20.0, switch_threshold=0.2)
        >>> [round(value, 4) for value in updated.tolist()]
        [1.6487, -0.2, -0.9048]
    """
    step = torch.exp(lam * calibration_gap)
    magnitude = torch.where(gammas >= 0, gammas.abs() * step, gammas.abs() / step)
    updated = torch.copysign(magnitude, gammas)
    switched = switch_threshold * torch.where(calibration_gap > 0, 1.0, -1.0).to(gammas.dtype)
    return torch.where(magnitude < switch_threshold, switched, updated).clamp(min=gamma_min, max=gamma_max)

