"""The common shell of every loss: input checks, ``ignore_index``, reduction, trainer hooks.

A subclass implements ``elementwise(logits, index)`` — the loss of each sample (or pixel)
given float logits (N, K, *spatial) and target indices (N, 1, *spatial) that are all valid —
and, if it keeps state, overrides one of the hooks. Set-level losses (MMCE, generalised Dice)
override ``reduce_valid`` instead.
"""

from __future__ import annotations

import contextlib
import math
import numbers
from typing import TYPE_CHECKING, ClassVar

import torch
from torch import nn

from focalcal.core.constraints import Interval, Options, validate_parameters
from focalcal.core.validation import real_array

if TYPE_CHECKING:
    from focalcal.core.types import ArrayLike

REDUCTIONS = ("mean", "sum", "none")

_SYNC_FREE_FORCED = [0]  # depth of nested ``sync_free()`` blocks


@contextlib.contextmanager
def sync_free():
    """Inside this block every loss takes its sync-free path, on any device (see ``avoid_host_sync``)."""
    _SYNC_FREE_FORCED[0] += 1
    try:
        yield
    finally:
        _SYNC_FREE_FORCED[0] -= 1


def avoid_host_sync(tensor: torch.Tensor) -> bool:
    """Whether a loss must not read a value back to the host for ``tensor``.

    A read-back (``float(t)``, ``bool(t)``, a boolean-mask index) stalls a GPU until its queue
    drains and cannot be captured in a CUDA graph or traced by ``torch.compile``, so on a GPU,
    while compiling, and inside :func:`sync_free` losses branch on the device instead
    (``torch.where`` over both branches). On the CPU a read-back costs nothing and the
    branching paths skip work, so they stay the default there. Both paths give the same loss.
    """
    return bool(_SYNC_FREE_FORCED[0]) or tensor.device.type != "cpu" or torch.compiler.is_compiling()


class Loss(nn.Module):
    """Base class of every loss: ``loss(logits, target)`` on logits and integer class targets.

    Logits are (N, K) or (N, K, *spatial), targets (N,) or (N, *spatial). A subclass implements
    :meth:`elementwise` (the loss of each sample or pixel) and, if it keeps state, overrides one
    of the trainer hooks; a set-level loss (MMCE, generalised Dice) overrides
    :meth:`reduce_valid` instead.

    The trainer hooks are no-ops here, overridden by stateful losses, so a trainer calls them
    unconditionally: :meth:`set_training_targets` once before training, :meth:`set_epoch` at the
    start of each epoch (0-based), :meth:`update_from_validation` after each epoch's validation
    pass. The class attributes ``needs_training_targets`` / ``needs_validation`` say whether the
    hook matters, so a trainer can skip computing what no loss uses.

    ``_parameter_constraints`` declares what each constructor parameter may hold
    (:mod:`focalcal.core.constraints`); a subclass extends its parent's. A loss module has no
    ``fit``, so ``__init__`` checks them (:meth:`_validate`), before any batch is seen.

    Args:
        reduction: ``"mean"`` (over non-ignored samples/pixels; an all-ignored batch gives 0),
            ``"sum"``, or ``"none"`` (one value per sample/pixel, 0 where ignored). Class weights
            scale each element's loss; ``"mean"`` is the plain mean of the weighted elements.
        ignore_index: target value whose samples/pixels are left out (e.g. 255 for unlabelled
            pixels); ``None`` (default) means every target must be a valid class.

    Attributes:
        name (str): the loss's config name (a class attribute), as ``build`` takes it.
        validate_inputs (bool): check the targets and name non-finite logits on every call
            (default True); a caller that has checked all of its targets once with
            :func:`check_target_values` may set it to False on the instance.
        needs_training_targets (bool): whether :meth:`set_training_targets` matters.
        needs_validation (bool): whether :meth:`update_from_validation` matters.
        accepts_soft_targets (bool): whether ``forward`` takes float targets of the logits' shape.
        mean_over_elements (bool): whether "mean" × the element count is the "sum".
        per_sample (bool): whether each sample's loss depends on its own logits only.

    Raises:
        ValueError: if ``reduction`` or ``ignore_index`` is not one the loss accepts.

    Examples:
        A new loss needs only its per-element value:

        >>> import torch
        >>> from focalcal.losses import Loss
        >>> class NegativeLogLikelihood(Loss):
        ...     name = "negative_log_likelihood"
        ...     def elementwise(self, logits, index):
        ...         return -torch.log_softmax(logits, dim=1).gather(1, index)
        >>> logits = torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.3, 1.2], [1.0, 1.0, 0.0]])
        >>> targets = torch.tensor([0, 2, 255])
        >>> loss = NegativeLogLikelihood(ignore_index=255)
        >>> print(f"{loss(logits, targets).item():.4f}")
        0.3974
        >>> per_sample = NegativeLogLikelihood(reduction="none", ignore_index=255)(logits, targets)
        >>> [round(value, 4) for value in per_sample.tolist()]
        [0.2413, 0.5536, 0.0]
    """

    name = "loss"
    #: Check the targets (dtype, shape, device, range) and name non-finite logits on every
    #: call. A caller that has checked all of its targets once with ``check_target_values``
    #: (the trainer does, at load) may set this to False on the instance: the loss is the
    #: same, minus a device sync and a few small kernels per batch.
    validate_inputs = True
    needs_training_targets = False
    needs_validation = False
    accepts_soft_targets = False
    #: "mean" is a mean over the non-ignored samples/pixels (a batch-level term such as MMCE's
    #: counted once per sample), so mean × their count is the sum — what a trainer summing the
    #: batch's loss relies on. False for a set-level loss (generalised Dice), which has no sum.
    mean_over_elements = True
    #: The loss is a mean of per-sample (per-pixel) terms, each depending only on its own
    #: logits, so N × ∂(mean)/∂z_i is sample i's own gradient (mukhoti2020 Fig 4b-d's per-sample
    #: gradient norms). False for a loss with a batch-level term (MMCE, Dice).
    per_sample = True
    _parameter_constraints: ClassVar[dict] = {
        "reduction": [Options(REDUCTIONS)],
        "ignore_index": [Interval(numbers.Integral, None, None), None],
    }

    def __init__(self, *, reduction: str = "mean", ignore_index: int | None = None) -> None:
        super().__init__()
        self._validate(reduction=reduction, ignore_index=ignore_index)
        self.reduction = reduction
        self.ignore_index = None if ignore_index is None else int(ignore_index)

    def _validate(self, **values) -> None:
        """Check constructor arguments against the class's ``_parameter_constraints``."""
        validate_parameters(type(self)._parameter_constraints, values, type(self).__name__)

    # ---- trainer hooks -------------------------------------------------------------------
    def set_training_targets(self, targets: ArrayLike, num_classes: int) -> None:
        """Called once with all training labels; only class-frequency losses use it.

        Args:
            targets: every training target, integer class indices of any shape.
            num_classes: the number of classes K.
        """

    def set_epoch(self, epoch: int, num_epochs: int) -> None:
        """Called at the start of every epoch; only scheduled losses use it.

        Args:
            epoch: the epoch about to start, 0-based.
            num_epochs: the run's number of epochs.
        """

    def update_from_validation(self, logits: torch.Tensor, labels: torch.Tensor) -> None:
        """Called after every validation pass; only AdaFocal uses it.

        Args:
            logits: the validation set's logits, (N, K).
            labels: its integer class labels, (N,).
        """

    # ---- computation ---------------------------------------------------------------------
    def elementwise(self, logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """The loss of each element; what a subclass implements.

        Args:
            logits: float logits, (N, K, *spatial).
            index: target class indices, (N, 1, *spatial), every one a valid class.

        Returns:
            The loss of each element, (N, 1, *spatial).
        """
        raise NotImplementedError

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The loss of a batch.

        Args:
            logits: float logits, (N, K) or (N, K, *spatial) with K ≥ 2; float16 and bfloat16
                are computed in float32.
            target: integer class indices, (N,) or (N, *spatial), each in 0..K − 1 or
                ``ignore_index``. A loss with ``accepts_soft_targets`` also takes float targets
                of the logits' shape whose rows along dim 1 are probability vectors.

        Returns:
            A 0-d tensor for ``reduction="mean"`` or ``"sum"``; for ``"none"`` one value per
            sample or pixel, (N,) or (N, *spatial), 0 where the target is ``ignore_index``.

        Raises:
            ValueError: if ``validate_inputs`` is on and the logits or targets have the wrong
                type, dtype, shape, device or values, or if the loss is not finite because the
                logits hold NaN or Inf.
        """
        if not self.validate_inputs:
            return self._forward_trusted(logits, target)
        logits = check_logits(logits)
        if (self.accepts_soft_targets and torch.is_tensor(target) and target.is_floating_point()
                and target.shape == logits.shape):
            loss = self.soft_target_elementwise(logits, check_soft_targets(target, logits))
            return self._finish(self._reduce(loss, None), logits)
        index, valid = check_targets(target, logits, self.ignore_index)
        return self._finish(self.reduce_valid(logits, index, valid), logits)

    def _forward_trusted(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """``forward`` for inputs the caller has already checked (``validate_inputs = False``)."""
        if logits.dtype in (torch.float16, torch.bfloat16):
            logits = logits.float()
        if self.accepts_soft_targets and target.is_floating_point():
            return self._reduce(self.soft_target_elementwise(logits, target.to(logits.dtype)), None)
        index, valid = prepare_targets(target, self.ignore_index)
        return self.reduce_valid(logits, index, valid)

    def soft_target_elementwise(self, logits: torch.Tensor, soft: torch.Tensor) -> torch.Tensor:
        """The loss of each element against soft targets; only losses with ``accepts_soft_targets``.

        Args:
            logits: float logits, (N, K, *spatial).
            soft: soft targets of the logits' shape and dtype, each row a probability vector.

        Returns:
            The loss of each element, (N, 1, *spatial).
        """
        raise NotImplementedError

    def reduce_valid(self, logits: torch.Tensor, index: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
        """Per-element loss, ignored elements zeroed, then reduced.

        Args:
            logits: float logits, (N, K, *spatial).
            index: target class indices, (N, 1, *spatial), ignored ones replaced by class 0.
            valid: which elements count, (N, *spatial) booleans, or None when all do.

        Returns:
            The reduced loss, as :meth:`forward` returns it.
        """
        if valid is None and self.reduction != "none":
            reduced = self.reduced(logits, index, self.reduction)
            if reduced is not None:
                return reduced
        return self._reduce(self.elementwise(logits, index), valid)

    def reduced(self, logits: torch.Tensor, index: torch.Tensor, reduction: str) -> torch.Tensor | None:
        """The loss already reduced inside one autograd node — one node and one pass less per batch.

        Args:
            logits: float logits, (N, K, *spatial).
            index: target class indices, (N, 1, *spatial), every one a valid class.
            reduction: ``"mean"`` or ``"sum"`` (a loss whose ``elementwise`` calls this also
                passes ``"none"``).

        Returns:
            The reduced loss, a 0-d tensor, or None where a loss has no such path.
        """
        return None

    def _reduce(self, loss: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
        """Reduce a per-element loss (N, 1, *spatial); ``valid`` is (N, *spatial) or None.

        The class axis is only squeezed out for "none": mean and sum need no reshape (one
        autograd node less per call, which shows on small batches)."""
        if valid is not None:
            loss = torch.where(valid, loss.squeeze(1), torch.zeros((), dtype=loss.dtype, device=loss.device))
        if self.reduction == "none":
            return loss if valid is not None else loss.squeeze(1)
        if self.reduction == "sum":
            return loss.sum()
        if valid is None:
            return loss.mean()
        return loss.sum() / valid.sum().clamp_min(1)

    def _finish(self, result: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        """Name the culprit when the loss is not finite because the logits are not."""
        finite = math.isfinite(result.detach().item()) if result.dim() == 0 else bool(torch.isfinite(result).all())
        if not finite and not bool(torch.isfinite(logits).all()):
            bad = ~torch.isfinite(logits)
            kind = "NaN" if bool(torch.isnan(logits).any()) else "Inf"
            raise ValueError(f"logits contain {kind} values ({int(bad.sum())} entries); {self.name} loss is undefined")
        return result

    def extra_repr(self) -> str:
        """The hyperparameters as ``name=value`` pairs, for the module's repr.

        Returns:
            The text between the parentheses of ``repr(loss)``.
        """
        parts = [f"{k}={v!r}" for k, v in self.hyperparameters().items()]
        return ", ".join(parts)

    def hyperparameters(self) -> dict[str, object]:
        """The constructor arguments that define this loss (for configs and repr).

        Returns:
            Constructor parameter name -> value.
        """
        return {"reduction": self.reduction, "ignore_index": self.ignore_index}


# ---- input checks --------------------------------------------------------------------------
def check_logits(logits) -> torch.Tensor:
    if not torch.is_tensor(logits):
        raise ValueError(f"logits must be a torch.Tensor, got {type(logits).__name__}")
    if not logits.is_floating_point():
        raise ValueError(f"logits must be floating point, got dtype {logits.dtype}")
    if logits.dim() < 2:
        raise ValueError(f"logits must be (N, K) or (N, K, *spatial), got shape {tuple(logits.shape)}")
    if logits.shape[1] < 2:
        raise ValueError(f"logits must have at least 2 classes along dim 1, got shape {tuple(logits.shape)}")
    if logits.shape[0] == 0:
        raise ValueError("logits are empty (0 samples)")
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()  # softmax tails and log(1 − p) need float32 at least
    return logits


def check_targets(target, logits: torch.Tensor, ignore_index: int | None):
    """Return (index (N, 1, *spatial) with valid classes, valid mask or None)."""
    if not torch.is_tensor(target):
        raise ValueError(f"target must be a torch.Tensor of class indices, got {type(target).__name__}")
    if target.is_floating_point() or target.is_complex() or target.dtype == torch.bool:
        raise ValueError(f"target must hold integer class indices, got dtype {target.dtype} and shape "
                         f"{tuple(target.shape)} (losses that take soft targets need the logits' shape)")
    expected = (logits.shape[0],) + tuple(logits.shape[2:])
    if tuple(target.shape) != expected:
        raise ValueError(f"target has shape {tuple(target.shape)} but logits {tuple(logits.shape)} need {expected}")
    if target.device != logits.device:
        raise ValueError(f"target is on {target.device} but logits are on {logits.device}")
    index, valid = prepare_targets(target, ignore_index)
    check_target_range(index, logits.shape[1], ignore_index)
    return index, valid


def prepare_targets(target: torch.Tensor, ignore_index: int | None):
    """(class indices (N, 1, *spatial), ignored entries set to class 0; valid mask or None)."""
    target = target.long()
    valid = None
    if ignore_index is not None:
        valid = target != ignore_index
        target = target.masked_fill(~valid, 0)
    return target.unsqueeze(1), valid


def check_target_range(index: torch.Tensor, num_classes: int, ignore_index: int | None) -> None:
    """Every index (ignored entries already replaced) is a class in 0..num_classes − 1."""
    low, high = (int(v) for v in torch.aminmax(index)) if index.numel() else (0, 0)
    if low < 0 or high >= num_classes:
        bad = low if low < 0 else high
        hint = "" if ignore_index is None else f" (ignore_index={ignore_index})"
        raise ValueError(f"target out of range: found {bad}, expected 0..{num_classes - 1}{hint}")


def check_target_values(targets: torch.Tensor, num_classes: int, ignore_index: int | None = None) -> None:
    """Check a whole set of integer targets once, e.g. a training set before a loss is told
    ``validate_inputs = False``: integer dtype and every value a class or ``ignore_index``.

    Args:
        targets: integer class indices, any shape (a whole data set's, not one batch's).
        num_classes: the number of classes K; valid classes are 0..K − 1.
        ignore_index: a target value that is allowed besides the classes (e.g. 255 for
            unlabelled pixels); ``None`` (default) allows none.

    Raises:
        ValueError: if ``targets`` is not an integer tensor or holds a value that is neither a
            class nor ``ignore_index``.

    Examples:
        >>> import torch
        >>> from focalcal.losses import check_target_values
        >>> check_target_values(torch.tensor([0, 2, 255]), num_classes=3, ignore_index=255)
        >>> check_target_values(torch.tensor([0, 3]), num_classes=3)
        Traceback (most recent call last):
            ...
        ValueError: target out of range: found 3, expected 0..2
    """
    if not torch.is_tensor(targets) or targets.is_floating_point() or targets.is_complex() or targets.dtype == torch.bool:
        kind = targets.dtype if torch.is_tensor(targets) else type(targets).__name__
        raise ValueError(f"targets must be a tensor of integer class indices, got {kind}")
    check_target_range(prepare_targets(targets, ignore_index)[0], num_classes, ignore_index)


def check_soft_targets(target: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    if tuple(target.shape) != tuple(logits.shape):
        raise ValueError(f"soft targets must have the logits' shape {tuple(logits.shape)}, got {tuple(target.shape)}")
    target = target.to(logits.dtype)
    if bool((target < 0).any()):
        raise ValueError("soft targets must be non-negative")
    sums = target.sum(dim=1)
    worst = float((sums - 1).abs().max())
    if worst > 1e-4:
        raise ValueError(f"soft targets must sum to 1 along dim 1; the worst row is off by {worst:.3g}")
    return target


def class_weight_tensor(weights, name: str) -> torch.Tensor | None:
    """Validate a sequence of non-negative finite class weights (or None)."""
    if weights is None:
        return None
    if isinstance(weights, (int, float)) and not isinstance(weights, bool):
        raise TypeError(f"{name} must be a sequence with one weight per class, got the scalar {weights!r}")
    if not torch.is_tensor(weights):
        weights = real_array(weights, name)  # no text or booleans, which as_tensor would convert
    tensor = torch.as_tensor(weights, dtype=torch.float64).detach().clone()
    if tensor.dim() != 1 or tensor.numel() < 2:
        raise ValueError(f"{name} must be 1-D with one weight per class, got shape {tuple(tensor.shape)}")
    if not bool(torch.isfinite(tensor).all()) or bool((tensor < 0).any()):
        raise ValueError(f"{name} must be finite and non-negative, got {tensor.tolist()}")
    return tensor


def weights_for(weights: torch.Tensor, logits: torch.Tensor, name: str) -> torch.Tensor:
    """Class weights cast to the logits, shaped to broadcast along dim 1."""
    if weights.numel() != logits.shape[1]:
        raise ValueError(f"{name} has {weights.numel()} entries but logits have {logits.shape[1]} classes")
    shape = [1] * logits.dim()
    shape[1] = -1
    return weights.to(device=logits.device, dtype=logits.dtype).view(shape)


def target_weights(weights: torch.Tensor, logits: torch.Tensor, index: torch.Tensor, name: str) -> torch.Tensor:
    """The class weight of each element's target, shaped like ``index`` (N, 1, *spatial)."""
    if weights.numel() != logits.shape[1]:
        raise ValueError(f"{name} has {weights.numel()} entries but logits have {logits.shape[1]} classes")
    return weights.to(device=logits.device, dtype=logits.dtype)[index]


def cast_like(tensor: torch.Tensor, like: torch.Tensor, cache: dict, key: str) -> torch.Tensor:
    """``tensor`` in the device and dtype of ``like``, converted once and reused while ``tensor``
    is the same object, unmodified (small constants used on every batch: no copy per call)."""
    hit = cache.get(key)
    if (hit is None or hit[0] is not tensor or hit[1] != tensor._version
            or hit[2].device != like.device or hit[2].dtype != like.dtype):
        hit = cache[key] = (tensor, tensor._version, tensor.to(device=like.device, dtype=like.dtype))
    return hit[2]
