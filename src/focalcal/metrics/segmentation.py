r"""Segmentation metrics: IoU, pixel accuracy, Hausdorff distance (hossain2021 §4.3), pixel-level ECE.

Conventions:

* ``pred`` and ``target`` are integer label maps of the same shape, (N, H, W) or (H, W)
  (take the argmax of the logits first); numpy arrays or torch tensors.
* ``ignore_index``: pixels whose *target* equals it are left out of every count, whatever
  their prediction (CamVid's void is 255 in :mod:`focalcal.data`). Every other target and
  every counted prediction must be a class in 0 .. num_classes-1, else ValueError.
* IoU and pixel accuracy pool all pixels of all images (one confusion matrix over the set,
  as MATLAB's ``evaluateSemanticSegmentation`` reports per-class IoU), so large images and
  large objects weigh more; average per-image values yourself if you want the other view.
* IoU is $|X \cap Y| / |X \cup Y|$. (hossain2021's eq. 16 prints $+ |X \cap Y|$ in the
  denominator, a typo: that is neither IoU nor Dice, and could never reach 1.)
* Hausdorff distances are per image and per class, between the *boundaries* of the
  predicted and the true region (the "surface distance" of hossain2021 §4.3), in pixels or
  in the units of ``spacing`` (e.g. mm per pixel).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from focalcal.core.validation import as_numpy, check_scores
from focalcal.metrics.calibration import ece

if TYPE_CHECKING:
    from focalcal.core.types import ArrayLike


class IoU(NamedTuple):
    """Per-class IoU and their mean over the classes that are present, as :func:`iou` returns them.

    Attributes:
        per_class: float64 array, shape (K,): each class's IoU in [0, 1]; NaN for a class
            absent from both prediction and target.
        mean: The mean of ``per_class`` over the classes that are present (NaN-skipping), in [0, 1].

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics import iou
        >>> result = iou(np.array([[0, 1], [1, 1]]), np.array([[0, 1], [0, 1]]), num_classes=3)
        >>> result.per_class.round(4).tolist(), round(result.mean, 4)
        ([0.5, 0.6667, nan], 0.5833)
    """

    per_class: np.ndarray
    mean: float


def _check_num_classes(num_classes) -> int:
    if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)) or num_classes < 2:
        raise ValueError(f"num_classes must be an integer >= 2, got {num_classes!r}")
    return int(num_classes)


def _integer_maps(pred, target, pred_name: str = "pred", target_name: str = "target") -> tuple[np.ndarray, np.ndarray]:
    """Both label maps as integer numpy arrays of one shape, or ValueError."""
    pred, target = as_numpy(pred, pred_name), as_numpy(target, target_name)
    if pred.shape != target.shape:
        raise ValueError(f"{pred_name} has shape {pred.shape} but {target_name} has shape {target.shape}")
    if pred.size == 0:
        raise ValueError(f"{pred_name} and {target_name} are empty")
    for array, name in ((pred, pred_name), (target, target_name)):
        if not (np.issubdtype(array.dtype, np.integer) or array.dtype == bool):
            raise ValueError(f"{name} must hold integer class labels, got dtype {array.dtype}; take the argmax of "
                             f"scores first")
    return pred.astype(np.int64, copy=False), target.astype(np.int64, copy=False)


def _check_range(values: np.ndarray, num_classes: int, name: str) -> None:
    if values.size and (values.min() < 0 or values.max() >= num_classes):
        bad = values[(values < 0) | (values >= num_classes)][0]
        raise ValueError(f"{name} holds label {bad}, outside 0..{num_classes - 1} (and not ignore_index)")


def _valid_pixels(pred, target, num_classes: int | None, ignore_index) -> tuple[np.ndarray, np.ndarray]:
    """Flat labels of the pixels whose target is not ``ignore_index``, range-checked."""
    pred, target = _integer_maps(pred, target)
    keep = None if ignore_index is None else target != ignore_index
    pred, target = (pred.ravel(), target.ravel()) if keep is None else (pred[keep], target[keep])
    if target.size == 0:
        raise ValueError(f"no pixels left: every target equals ignore_index={ignore_index}")
    if num_classes is not None:
        _check_range(target, num_classes, "target")
        _check_range(pred, num_classes, "pred")
    return pred, target


def pixel_confusion_matrix(pred: ArrayLike, target: ArrayLike, num_classes: int,
                           ignore_index: int | None = None) -> np.ndarray:
    """Pixel counts of every (true class, predicted class) pair over all images.

    Args:
        pred: Predicted class labels, integer, shape (N, H, W) or (H, W) (numpy or torch).
        target: True class labels, integer, the shape of ``pred``.
        num_classes: The number of classes K, an integer >= 2.
        ignore_index: A target label whose pixels are left out (CamVid's void, 255), or None.

    Returns:
        int64 array of shape (K, K): rows are the true class, columns the predicted class.

    Raises:
        ValueError: The label maps differ in shape, are empty or not integer, hold a label
            outside 0 .. K-1 (other than ``ignore_index`` in ``target``), or every target
            pixel is ignored; or ``num_classes`` is not an integer >= 2.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics import pixel_confusion_matrix
        >>> pred, target = np.array([[0, 1], [1, 1]]), np.array([[0, 1], [0, 255]])
        >>> pixel_confusion_matrix(pred, target, num_classes=2, ignore_index=255).tolist()
        [[1, 1], [0, 1]]
    """
    num_classes = _check_num_classes(num_classes)
    pred, target = _valid_pixels(pred, target, num_classes, ignore_index)
    return np.bincount(target * num_classes + pred, minlength=num_classes**2).reshape(num_classes, num_classes)


def iou(pred: ArrayLike, target: ArrayLike, num_classes: int, ignore_index: int | None = None) -> IoU:
    """Intersection over union of every class over all pixels, and their mean.

    A class in neither ``pred`` nor ``target`` has IoU NaN (0/0: nothing to get right or
    wrong) and is left out of the mean; a class in only one of them has IoU 0.

    Args:
        pred: Predicted class labels, integer, shape (N, H, W) or (H, W) (numpy or torch).
        target: True class labels, integer, the shape of ``pred``.
        num_classes: The number of classes K, an integer >= 2.
        ignore_index: A target label whose pixels are left out (CamVid's void, 255), or None.

    Returns:
        The per-class IoU, shape (K,), and their NaN-skipping mean, fractions in [0, 1].

    Raises:
        ValueError: Malformed label maps or ``num_classes``, as for :func:`pixel_confusion_matrix`.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics import iou
        >>> pred, target = np.array([[0, 1], [1, 1]]), np.array([[0, 1], [0, 1]])
        >>> result = iou(pred, target, num_classes=2)
        >>> result.per_class.round(4).tolist(), round(result.mean, 4)
        ([0.5, 0.6667], 0.5833)
    """
    return iou_from_confusion(pixel_confusion_matrix(pred, target, num_classes, ignore_index))


def iou_from_confusion(confusion: ArrayLike) -> IoU:
    """:func:`iou` from a pixel confusion matrix.

    For example one summed over the batches of a test set too large to hold at once.

    Args:
        confusion: Non-negative pixel counts, shape (K, K), rows the true class and columns
            the predicted class (:func:`pixel_confusion_matrix`).

    Returns:
        The per-class IoU, shape (K,), and their NaN-skipping mean, fractions in [0, 1].

    Raises:
        ValueError: ``confusion`` is not a square matrix of non-negative counts.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics import iou_from_confusion, pixel_confusion_matrix
        >>> batches = [(np.array([[0, 1]]), np.array([[0, 1]])), (np.array([[1, 1]]), np.array([[0, 1]]))]
        >>> total = sum(pixel_confusion_matrix(pred, target, num_classes=2) for pred, target in batches)
        >>> round(iou_from_confusion(total).mean, 4)
        0.5833
    """
    confusion = np.asarray(confusion, dtype=np.float64)
    if confusion.ndim != 2 or confusion.shape[0] != confusion.shape[1] or np.any(confusion < 0):
        raise ValueError(f"confusion must be a square matrix of non-negative counts, got shape {confusion.shape}")
    intersection = np.diag(confusion)
    union = confusion.sum(axis=0) + confusion.sum(axis=1) - intersection
    with np.errstate(invalid="ignore", divide="ignore"):
        per_class = np.where(union > 0, intersection / union, np.nan)
    return IoU(per_class=per_class, mean=float(np.nanmean(per_class)))


def pixel_accuracy(pred: ArrayLike, target: ArrayLike, ignore_index: int | None = None) -> float:
    """Fraction of the (non-ignored) pixels whose predicted class is the true one.

    Args:
        pred: Predicted class labels, integer, shape (N, H, W) or (H, W) (numpy or torch).
        target: True class labels, integer, the shape of ``pred``.
        ignore_index: A target label whose pixels are left out (CamVid's void, 255), or None.

    Returns:
        The pixel accuracy, a fraction in [0, 1], not a percentage.

    Raises:
        ValueError: The label maps differ in shape, are empty or not integer, or every
            target pixel is ignored.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics import pixel_accuracy
        >>> pred, target = np.array([[0, 1], [1, 1]]), np.array([[0, 1], [0, 255]])
        >>> round(pixel_accuracy(pred, target, ignore_index=255), 4)
        0.6667
    """
    pred, target = _valid_pixels(pred, target, None, ignore_index)
    return float(np.count_nonzero(pred == target) / target.size)


# ---------------------------------------------------------------- Hausdorff distance

# scipy.ndimage and scipy.special are imported in the functions that use them: every training
# job imports focalcal.metrics, and only segmentation needs them (``python -m bench workflow``
# counts each job's CPU).
_FOUR_NEIGHBOURS = np.array([[0, 1, 0], [1, 1, 1], [0, 1, 0]], dtype=bool)  # generate_binary_structure(2, 1)


def _check_spacing(spacing) -> tuple[float, float]:
    if spacing is None:
        return 1.0, 1.0
    pair = (spacing, spacing) if np.isscalar(spacing) else tuple(spacing)
    try:
        pair = tuple(float(s) for s in pair)
    except (TypeError, ValueError):
        raise ValueError(f"spacing must be a positive number or a (row, column) pair of them, got {spacing!r}") from None
    if len(pair) != 2 or not all(np.isfinite(s) and s > 0 for s in pair):
        raise ValueError(f"spacing must be a positive number or a (row, column) pair of them, got {spacing!r}")
    return pair


def boundaries(masks: np.ndarray) -> np.ndarray:
    """Boundary pixels of boolean masks: mask pixels with a 4-neighbour outside the mask or the image.

    A region touching the frame has its edge there.

    Args:
        masks: Boolean masks, shape (..., H, W); the leading axes are independent masks.

    Returns:
        Boolean array of the shape of ``masks``, True on each region's boundary pixels.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics.segmentation import boundaries
        >>> square = np.zeros((4, 4), dtype=bool)
        >>> square[:3, :3] = True
        >>> boundaries(square).astype(int).tolist()
        [[1, 1, 1, 0], [1, 0, 1, 0], [1, 1, 1, 0], [0, 0, 0, 0]]
    """
    from scipy.ndimage import binary_erosion

    structure = _FOUR_NEIGHBOURS.reshape((1,) * (masks.ndim - 2) + (3, 3))
    return masks & ~binary_erosion(masks, structure=structure, border_value=0)


def _directed(distance_to_other: np.ndarray, own_boundary: np.ndarray, percentile: float | None) -> float:
    distances = distance_to_other[own_boundary]
    return float(distances.max() if percentile is None else np.percentile(distances, percentile))


def _hausdorff_pair(pred_edge: np.ndarray, true_edge: np.ndarray, spacing, percentile) -> float:
    pred_any, true_any = pred_edge.any(), true_edge.any()
    if not pred_any and not true_any:
        return np.nan
    if not pred_any or not true_any:
        return np.inf
    from scipy.ndimage import distance_transform_edt

    to_true = distance_transform_edt(~true_edge, sampling=spacing)  # distance of each pixel to the true boundary
    to_pred = distance_transform_edt(~pred_edge, sampling=spacing)
    return max(_directed(to_true, pred_edge, percentile), _directed(to_pred, true_edge, percentile))


def hausdorff_distance(pred_mask: ArrayLike, true_mask: ArrayLike, num_classes: int | None = None, *,
                       spacing: float | tuple[float, float] | None = None, percentile: float | None = None,
                       ignore_index: int | None = None) -> np.ndarray | float:
    r"""Symmetric Hausdorff distance between predicted and true region boundaries (hossain2021 eq. 17).

    $$
    \mathrm{HD} = \max\Big(\max_{a \in \partial P} d(a, \partial T),\ \max_{b \in \partial T} d(b, \partial P)\Big)
    $$

    with $\partial$ the boundary pixels (:func:`boundaries`) and $d$ the Euclidean distance
    between pixel centres, read off ``scipy.ndimage.distance_transform_edt`` with
    ``sampling=spacing``. ``percentile=q`` replaces each directed max by the q-th percentile
    of that direction's distances (q=95: the robust HD95; q=100 is the plain HD).

    Two input forms:

    * label maps, int (N, H, W) or (H, W), with ``num_classes``: returns (N, K) or (K,),
      one distance per image and class (class k's region is ``mask == k``);
    * boolean masks (N, H, W) or (H, W) without ``num_classes``: returns (N,) or a float.

    Empty regions: NaN where the class is in neither mask (nothing to measure; skip it with
    ``np.nanmean``), ``inf`` where it is in exactly one (a missed or invented region is
    infinitely far; this is the mathematical value, kept rather than replaced by an
    arbitrary penalty). Pixels whose true label is ``ignore_index`` belong to no region.

    Args:
        pred_mask: Predicted label map (integer) or boolean mask, shape (N, H, W) or (H, W).
        true_mask: True label map or boolean mask, the shape and kind of ``pred_mask``.
        num_classes: The number of classes K for label maps; None for boolean masks.
        spacing: The size of a pixel, one number or a (row, column) pair (e.g. mm per pixel);
            None for distances in pixels.
        percentile: The percentile q in [0, 100] of each direction's distances to take instead
            of its maximum (95 for HD95); None for the plain Hausdorff distance.
        ignore_index: A true label whose pixels belong to no region (label maps only), or None.

    Returns:
        Distances in pixels, or in the units of ``spacing``: float64 (N, K) or (K,) for label
        maps, (N,) or a float for boolean masks; NaN and ``inf`` for empty regions as above.

    Raises:
        ValueError: The masks differ in shape, are not (H, W) or (N, H, W), are of the wrong
            kind (boolean masks are needed without ``num_classes``), hold a label outside
            0 .. K-1; or ``spacing``, ``percentile`` or ``ignore_index`` are invalid.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics import hausdorff_distance
        >>> true = np.zeros((8, 8), dtype=bool)
        >>> true[2:5, 2:5] = True
        >>> pred = np.roll(true, 2, axis=1)
        >>> hausdorff_distance(pred, true), hausdorff_distance(pred, true, spacing=0.5)
        (2.0, 1.0)
    """
    spacing = _check_spacing(spacing)
    if percentile is not None and (isinstance(percentile, bool) or not np.isscalar(percentile)
                                   or not 0 <= float(percentile) <= 100):
        raise ValueError(f"percentile must be None or a number in [0, 100], got {percentile!r}")
    pred, true = as_numpy(pred_mask, "pred_mask"), as_numpy(true_mask, "true_mask")
    if num_classes is None:
        if pred.dtype != bool or true.dtype != bool:
            raise ValueError(f"without num_classes, pred_mask and true_mask must be boolean masks, got dtypes "
                             f"{pred.dtype} and {true.dtype}; pass num_classes for label maps")
        if ignore_index is not None:
            raise ValueError("ignore_index applies to label maps (with num_classes), not to boolean masks")
    pred, true = _integer_maps(pred, true, "pred_mask", "true_mask")
    if pred.ndim not in (2, 3):
        raise ValueError(f"masks must be (H, W) or (N, H, W), got shape {pred.shape}")
    single_image = pred.ndim == 2
    pred, true = (pred[None], true[None]) if single_image else (pred, true)
    valid = np.ones(true.shape, dtype=bool) if ignore_index is None else true != ignore_index
    if num_classes is None:
        pred_regions, true_regions = pred.astype(bool)[:, None], true.astype(bool)[:, None]
    else:
        num_classes = _check_num_classes(num_classes)
        _check_range(true[valid], num_classes, "true_mask")
        _check_range(pred[valid], num_classes, "pred_mask")
        classes = np.arange(num_classes)[None, :, None, None]
        pred_regions, true_regions = pred[:, None] == classes, true[:, None] == classes  # (N, K, H, W)
    pred_edges = boundaries(pred_regions & valid[:, None])
    true_edges = boundaries(true_regions & valid[:, None])
    n_images, n_regions = pred_edges.shape[:2]
    out = np.empty((n_images, n_regions))
    for i in range(n_images):  # one distance transform per image and region: scipy's EDT has no batch axis
        for k in range(n_regions):
            out[i, k] = _hausdorff_pair(pred_edges[i, k], true_edges[i, k], spacing, percentile)
    out = out[0] if single_image else out
    return out if num_classes is not None else (float(out[0]) if single_image else out[:, 0])


# ---------------------------------------------------------------- pixel-level calibration


def pixel_ece(scores: ArrayLike, target: ArrayLike, n_bins: int = 15, *, binning: str = "width",
              ignore_index: int | None = None, from_logits: bool = False) -> float:
    """Top-label ECE of every (non-ignored) pixel as one sample.

    :func:`focalcal.metrics.ece` on the flattened pixels, so the bins are exactly those of ``ece``.

    Args:
        scores: Probabilities, shape (N, K, H, W) (any number of spatial axes after K), or
            logits with ``from_logits=True``.
        target: True class labels, shape (N, H, W): ``scores`` without the class axis.
        n_bins: The number of bins, as in :func:`focalcal.metrics.ece`.
        binning: ``"width"`` or ``"mass"``, as in :func:`focalcal.metrics.ece`.
        ignore_index: A target label whose pixels are left out (CamVid's void, 255), or None.
        from_logits: Whether ``scores`` are logits (softmax over K in log space first).

    Returns:
        The pixel-level ECE, a fraction in [0, 1], not a percentage.

    Raises:
        ValueError: ``scores`` has fewer than 3 axes, ``target`` does not match its shape
            without the class axis, every target pixel is ignored, or the pixels' scores and
            labels are malformed (as for :func:`focalcal.metrics.ece`).

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics import pixel_ece
        >>> logits = np.random.default_rng(0).normal(size=(2, 3, 4, 4))
        >>> target = logits.argmax(axis=1)
        >>> round(pixel_ece(logits, target, n_bins=10, from_logits=True), 4)
        0.3609
    """
    scores = as_numpy(scores, "scores")
    target = as_numpy(target, "target")
    if scores.ndim < 3:
        raise ValueError(f"scores must be (N, K, H, W) (or (N, K, *spatial)), got shape {scores.shape}")
    if target.shape != scores.shape[:1] + scores.shape[2:]:
        raise ValueError(f"target must have shape {scores.shape[:1] + scores.shape[2:]} (scores without the class "
                         f"axis), got {target.shape}")
    flat = np.moveaxis(scores, 1, -1).reshape(-1, scores.shape[1])
    labels = target.reshape(-1)
    if ignore_index is not None:
        keep = labels != ignore_index
        flat, labels = flat[keep], labels[keep]
        if labels.size == 0:
            raise ValueError(f"no pixels left: every target equals ignore_index={ignore_index}")
    if from_logits:
        from scipy.special import log_softmax

        flat = np.exp(log_softmax(check_scores(flat, "logits"), axis=1))
    return ece(flat, labels, n_bins=n_bins, binning=binning)
