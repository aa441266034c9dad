"""Segmentation metrics: IoU, pixel accuracy, Hausdorff distance (hossain2021 §4.3), pixel-level ECE.

Conventions:

* ``pred`` and ``target`` are integer label maps of the same shape, (N, H, W) or (H, W)
  (take the argmax of the logits first); numpy arrays or torch tensors.
* ``ignore_index``: pixels whose *target* equals it are left out of every count, whatever
  their prediction (CamVid's void is 255 in :mod:`focalcal.data`). Every other target and
  every counted prediction must be a class in 0 .. num_classes-1, else ValueError.
* IoU and pixel accuracy pool all pixels of all images (one confusion matrix over the set,
  as MATLAB's ``evaluateSemanticSegmentation`` reports per-class IoU), so large images and
  large objects weigh more; average per-image values yourself if you want the other view.
* IoU is ``|X ∩ Y| / |X ∪ Y|``. (hossain2021's eq. 16 prints ``+ |X ∩ Y|`` in the
  denominator, a typo: that is neither IoU nor Dice, and could never reach 1.)
* Hausdorff distances are per image and per class, between the *boundaries* of the
  predicted and the true region (the "surface distance" of hossain2021 §4.3), in pixels or
  in the units of ``spacing`` (e.g. mm per pixel).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from focalcal._validation import as_numpy, check_scores
from focalcal.metrics.calibration import ece


class IoU(NamedTuple):
    """Per-class IoU (float64, NaN for a class absent from both prediction and target) and
    their mean over the classes that are present (NaN-skipping)."""

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


def pixel_confusion_matrix(pred, target, num_classes: int, ignore_index: int | None = None) -> np.ndarray:
    """(K, K) int64 pixel counts, rows = true class, columns = predicted class."""
    num_classes = _check_num_classes(num_classes)
    pred, target = _valid_pixels(pred, target, num_classes, ignore_index)
    return np.bincount(target * num_classes + pred, minlength=num_classes**2).reshape(num_classes, num_classes)


def iou(pred, target, num_classes: int, ignore_index: int | None = None) -> IoU:
    """Intersection over union of every class over all pixels, and their mean.

    A class in neither ``pred`` nor ``target`` has IoU NaN (0/0: nothing to get right or
    wrong) and is left out of the mean; a class in only one of them has IoU 0.
    """
    return iou_from_confusion(pixel_confusion_matrix(pred, target, num_classes, ignore_index))


def iou_from_confusion(confusion) -> IoU:
    """``iou`` from a (K, K) pixel confusion matrix (rows true, columns predicted), e.g. one
    summed over the batches of a test set too large to hold at once."""
    confusion = np.asarray(confusion, dtype=np.float64)
    if confusion.ndim != 2 or confusion.shape[0] != confusion.shape[1] or np.any(confusion < 0):
        raise ValueError(f"confusion must be a square matrix of non-negative counts, got shape {confusion.shape}")
    intersection = np.diag(confusion)
    union = confusion.sum(axis=0) + confusion.sum(axis=1) - intersection
    with np.errstate(invalid="ignore", divide="ignore"):
        per_class = np.where(union > 0, intersection / union, np.nan)
    return IoU(per_class=per_class, mean=float(np.nanmean(per_class)))


def pixel_accuracy(pred, target, ignore_index: int | None = None) -> float:
    """Fraction of the (non-ignored) pixels whose predicted class is the true one."""
    pred, target = _valid_pixels(pred, target, None, ignore_index)
    return float(np.count_nonzero(pred == target) / target.size)


# ---------------------------------------------------------------- Hausdorff distance

# scipy.ndimage and scipy.special are imported in the functions that use them: every training
# job imports focalcal.metrics, and only segmentation needs them (~0.25 s of import each job).
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
    """Boundary pixels of boolean masks (..., H, W): mask pixels with a 4-neighbour outside the
    mask or outside the image (a region touching the frame has its edge there)."""
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


def hausdorff_distance(pred_mask, true_mask, num_classes: int | None = None, *, spacing=None,
                       percentile: float | None = None, ignore_index: int | None = None) -> np.ndarray | float:
    """Symmetric Hausdorff distance between predicted and true region boundaries (hossain2021 eq. 17).

    ``HD = max(max_{a in ∂P} d(a, ∂T), max_{b in ∂T} d(b, ∂P))`` with ``∂`` the boundary
    pixels (:func:`boundaries`) and ``d`` the Euclidean distance between pixel centres,
    read off ``scipy.ndimage.distance_transform_edt`` with ``sampling=spacing``; so
    distances are in pixels, or in mm for ``spacing`` in mm per pixel (one number, or
    (row, column)). ``percentile=q`` replaces each directed max by the q-th percentile of
    that direction's distances (q=95: the robust HD95; q=100 is the plain HD).

    Two input forms:

    * label maps, int (N, H, W) or (H, W), with ``num_classes``: returns (N, K) or (K,),
      one distance per image and class (class k's region is ``mask == k``);
    * boolean masks (N, H, W) or (H, W) without ``num_classes``: returns (N,) or a float.

    Empty regions: NaN where the class is in neither mask (nothing to measure; skip it with
    ``np.nanmean``), ``inf`` where it is in exactly one (a missed or invented region is
    infinitely far; this is the mathematical value, kept rather than replaced by an
    arbitrary penalty). Pixels whose true label is ``ignore_index`` belong to no region.
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


def pixel_ece(scores, target, n_bins: int = 15, *, binning: str = "width", ignore_index: int | None = None,
              from_logits: bool = False) -> float:
    """Top-label ECE of every (non-ignored) pixel as one sample: :func:`focalcal.metrics.ece`
    on the flattened pixels, so the bins are exactly those of ``ece``.

    ``scores``: probabilities (N, K, H, W) (any number of spatial axes after K), or logits
    with ``from_logits=True`` (softmax over K in log space); ``target``: (N, H, W) labels.
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
