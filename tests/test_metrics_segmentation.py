"""Segmentation metrics against second implementations: sklearn for IoU/accuracy/confusion,
scipy's directed_hausdorff (and brute-force cdist) on boundary point sets for Hausdorff,
focalcal.metrics.ece on hand-flattened pixels for pixel ECE."""

import numpy as np
import pytest
import torch
from scipy.ndimage import gaussian_filter
from scipy.spatial.distance import cdist, directed_hausdorff
from sklearn.metrics import accuracy_score, confusion_matrix, jaccard_score

from focalcal.metrics import IoU, ece, hausdorff_distance, iou, pixel_accuracy, pixel_confusion_matrix, pixel_ece

IGNORE = 255


def _blob_labels(rng, n, size, num_classes, smooth=2.0):
    """Label maps made of blobs (argmax of smoothed noise), like real segmentations."""
    noise = gaussian_filter(rng.standard_normal((n, num_classes, size, size)), sigma=(0, 0, smooth, smooth))
    return noise.argmax(axis=1)


# ---------------------------------------------------------------- IoU, accuracy, confusion


def test_iou_matches_sklearn_jaccard():
    rng = np.random.default_rng(0)
    target = _blob_labels(rng, 5, 24, 4)
    pred = np.where(rng.random(target.shape) < 0.2, rng.integers(0, 4, target.shape), target)
    result = iou(pred, target, 4)
    expected = jaccard_score(target.ravel(), pred.ravel(), labels=range(4), average=None)
    assert isinstance(result, IoU)
    np.testing.assert_allclose(result.per_class, expected, rtol=1e-12)
    assert result.mean == pytest.approx(jaccard_score(target.ravel(), pred.ravel(), average="macro"), rel=1e-12)


def test_iou_absent_class_is_nan_and_left_out_of_the_mean():
    rng = np.random.default_rng(1)
    target = _blob_labels(rng, 3, 16, 3)  # classes 0..2; class 3 appears nowhere
    pred = np.where(rng.random(target.shape) < 0.3, (target + 1) % 3, target)
    result = iou(pred, target, 4)
    assert np.isnan(result.per_class[3])
    expected = jaccard_score(target.ravel(), pred.ravel(), labels=range(3), average=None)
    np.testing.assert_allclose(result.per_class[:3], expected, rtol=1e-12)
    assert result.mean == pytest.approx(expected.mean(), rel=1e-12)
    # A class only predicted (never true) has IoU 0, not NaN.
    pred_with_extra = pred.copy()
    pred_with_extra[0, 0, 0] = 3
    assert iou(pred_with_extra, target, 4).per_class[3] == 0.0


def test_ignore_index_is_honoured_whatever_is_predicted_there():
    rng = np.random.default_rng(2)
    target = _blob_labels(rng, 4, 20, 3)
    pred = np.where(rng.random(target.shape) < 0.25, rng.integers(0, 3, target.shape), target)
    void = rng.random(target.shape) < 0.15
    target = np.where(void, IGNORE, target)
    pred = np.where(void, 99, pred)  # out-of-range predictions on void pixels must not matter
    keep = target != IGNORE
    np.testing.assert_allclose(iou(pred, target, 3, ignore_index=IGNORE).per_class,
                               jaccard_score(target[keep], pred[keep], labels=range(3), average=None), rtol=1e-12)
    assert pixel_accuracy(pred, target, ignore_index=IGNORE) == pytest.approx(accuracy_score(target[keep], pred[keep]))
    np.testing.assert_array_equal(pixel_confusion_matrix(pred, target, 3, ignore_index=IGNORE),
                                  confusion_matrix(target[keep], pred[keep], labels=range(3)))
    with pytest.raises(ValueError, match="outside 0..2"):
        iou(pred, target, 3)  # without ignore_index, 255 is not a class


def test_pixel_accuracy_and_confusion_match_sklearn_and_accept_torch():
    rng = np.random.default_rng(3)
    target = torch.from_numpy(_blob_labels(rng, 2, 12, 5))
    pred = torch.randint(0, 5, target.shape, generator=torch.Generator().manual_seed(0))
    assert pixel_accuracy(pred, target) == pytest.approx(accuracy_score(target.ravel(), pred.ravel()))
    np.testing.assert_array_equal(pixel_confusion_matrix(pred, target, 5),
                                  confusion_matrix(target.ravel(), pred.ravel(), labels=range(5)))
    assert iou(target, target, 5).mean == 1.0


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: iou(np.zeros((2, 3), int), np.zeros((3, 2), int), 2), "shape"),
        (lambda: iou(np.zeros((2, 3)), np.zeros((2, 3), int), 2), "integer class labels"),
        (lambda: iou(np.full((2, 3), 2), np.zeros((2, 3), int), 2), "pred holds label 2"),
        (lambda: iou(np.zeros((2, 3), int), np.zeros((2, 3), int), 1), "num_classes"),
        (lambda: pixel_accuracy(np.zeros((2, 3), int), np.full((2, 3), IGNORE), ignore_index=IGNORE), "no pixels left"),
    ],
)
def test_bad_label_maps_raise(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# ---------------------------------------------------------------- Hausdorff distance


def _boundary_points(mask, spacing):
    """Boundary pixel centres (scaled by spacing), found differently from the library: a mask
    pixel with a 4-neighbour outside the mask, the image border counting as outside."""
    padded = np.pad(mask, 1, constant_values=False)
    inner = padded[1:-1, 1:-1]
    neighbours_inside = padded[:-2, 1:-1] & padded[2:, 1:-1] & padded[1:-1, :-2] & padded[1:-1, 2:]
    return np.argwhere(inner & ~neighbours_inside) * np.asarray(spacing, dtype=float)


def _reference_hausdorff(pred, true, spacing=(1.0, 1.0), percentile=None):
    a, b = _boundary_points(pred, spacing), _boundary_points(true, spacing)
    if len(a) == 0 and len(b) == 0:
        return np.nan
    if len(a) == 0 or len(b) == 0:
        return np.inf
    if percentile is None:
        return max(directed_hausdorff(a, b)[0], directed_hausdorff(b, a)[0])
    distances = cdist(a, b)
    return max(np.percentile(distances.min(axis=1), percentile), np.percentile(distances.min(axis=0), percentile))


@pytest.mark.parametrize("spacing", [None, 0.7, (0.5, 1.25)])
def test_hausdorff_matches_directed_hausdorff_on_boundary_points(spacing):
    rng = np.random.default_rng(4)
    true = _blob_labels(rng, 4, 28, 3, smooth=3.0)
    pred = _blob_labels(rng, 4, 28, 3, smooth=3.0)
    pred[:2] = np.where(rng.random((2, 28, 28)) < 0.9, true[:2], pred[:2])  # some close, some far predictions
    got = hausdorff_distance(pred, true, 3, spacing=spacing)
    pair = (1.0, 1.0) if spacing is None else ((spacing, spacing) if np.isscalar(spacing) else spacing)
    expected = np.array([[_reference_hausdorff(pred[i] == k, true[i] == k, pair) for k in range(3)] for i in range(4)])
    assert got.shape == (4, 3)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert np.isfinite(got).sum() >= 8  # the comparison is not vacuous


def test_hausdorff_percentile_matches_brute_force():
    rng = np.random.default_rng(5)
    true = _blob_labels(rng, 3, 24, 2, smooth=2.5)
    pred = _blob_labels(rng, 3, 24, 2, smooth=2.5)
    for q in (50, 95, 100):
        got = hausdorff_distance(pred, true, 2, spacing=(2.0, 0.5), percentile=q)
        expected = [[_reference_hausdorff(pred[i] == k, true[i] == k, (2.0, 0.5), q) for k in range(2)] for i in range(3)]
        np.testing.assert_allclose(got, expected, rtol=1e-12)
    np.testing.assert_allclose(hausdorff_distance(pred, true, 2, percentile=100), hausdorff_distance(pred, true, 2))


def test_hausdorff_closed_forms_in_pixels_and_mm():
    a = np.zeros((10, 12), bool)
    b = np.zeros((10, 12), bool)
    a[2, 3] = True
    b[5, 7] = True
    assert hausdorff_distance(a, b) == pytest.approx(5.0)  # a 3-4-5 triangle
    assert hausdorff_distance(a, b, spacing=(2.0, 1.0)) == pytest.approx(np.sqrt(6.0**2 + 4.0**2))
    # Concentric squares of half-widths 1 and 3: boundaries 2 apart along the axes, the
    # outer corner is sqrt(2^2 + 2^2) from the inner one.
    inner, outer = np.zeros((11, 11), bool), np.zeros((11, 11), bool)
    inner[4:7, 4:7], outer[2:9, 2:9] = True, True
    assert hausdorff_distance(inner, outer) == pytest.approx(np.sqrt(8.0))
    assert hausdorff_distance(inner, inner) == 0.0


def test_hausdorff_empty_regions_nan_or_inf():
    true = np.zeros((2, 8, 8), int)
    pred = np.zeros((2, 8, 8), int)
    true[0, 2:4, 2:4] = 1  # class 1 only in the truth of image 0
    pred[1, 5:7, 5:7] = 1  # ... and only in the prediction of image 1
    got = hausdorff_distance(pred, true, 3)
    assert np.isinf(got[0, 1]) and np.isinf(got[1, 1])
    assert np.isnan(got[:, 2]).all()  # class 2 nowhere
    np.testing.assert_allclose(got[:, 0], [_reference_hausdorff(pred[i] == 0, true[i] == 0) for i in range(2)])
    single = hausdorff_distance(pred[0], true[0], 3)
    assert single.shape == (3,)


def test_hausdorff_ignore_index_removes_void_pixels_from_both_regions():
    rng = np.random.default_rng(6)
    true = _blob_labels(rng, 2, 20, 2, smooth=2.0)
    pred = _blob_labels(rng, 2, 20, 2, smooth=2.0)
    void = np.zeros_like(true, dtype=bool)
    void[:, :, :5] = True
    true_void = np.where(void, IGNORE, true)
    got = hausdorff_distance(pred, true_void, 2, ignore_index=IGNORE)
    expected = [[_reference_hausdorff((pred[i] == k) & ~void[i], (true[i] == k) & ~void[i]) for k in range(2)]
                for i in range(2)]
    np.testing.assert_allclose(got, expected, rtol=1e-12)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"spacing": -1.0}, "spacing"),
        ({"spacing": (1.0, 2.0, 3.0)}, "spacing"),
        ({"percentile": 101}, "percentile"),
    ],
)
def test_hausdorff_bad_arguments(kwargs, message):
    mask = np.ones((4, 4), bool)
    with pytest.raises(ValueError, match=message):
        hausdorff_distance(mask, mask, **kwargs)


def test_hausdorff_needs_num_classes_for_label_maps():
    with pytest.raises(ValueError, match="boolean masks"):
        hausdorff_distance(np.zeros((4, 4), int), np.zeros((4, 4), int))


# ---------------------------------------------------------------- pixel-level ECE


def _logits(rng, n, k, size, scale=3.0, dtype=np.float64):
    return (scale * rng.standard_normal((n, k, size, size))).astype(dtype)


def test_pixel_ece_equals_ece_on_hand_flattened_pixels():
    rng = np.random.default_rng(7)
    logits = _logits(rng, 3, 4, 10)
    probs = torch.softmax(torch.from_numpy(logits), dim=1).numpy()
    target = rng.integers(0, 4, (3, 10, 10))
    flat_probs = np.stack([probs[:, k].ravel() for k in range(4)], axis=1)  # pixel order n, h, w
    for binning in ("width", "mass"):
        assert pixel_ece(probs, target, 15, binning=binning) == ece(flat_probs, target.ravel(), 15, binning=binning)
    assert pixel_ece(logits, target, from_logits=True) == pytest.approx(ece(flat_probs, target.ravel()), abs=1e-12)


def test_pixel_ece_ignores_void_pixels():
    rng = np.random.default_rng(8)
    logits = _logits(rng, 2, 3, 12)
    probs = torch.softmax(torch.from_numpy(logits), dim=1).numpy()
    target = rng.integers(0, 3, (2, 12, 12))
    void = rng.random(target.shape) < 0.3
    target_void = np.where(void, IGNORE, target)
    keep = ~void.ravel()
    flat = np.moveaxis(probs, 1, -1).reshape(-1, 3)
    expected = ece(flat[keep], target.ravel()[keep])
    assert pixel_ece(probs, target_void, ignore_index=IGNORE) == expected
    assert expected != ece(flat, target.ravel())  # the void pixels would change the value
    with pytest.raises(ValueError, match="out of range"):
        pixel_ece(probs, target_void)


def test_pixel_ece_from_extreme_float32_logits_stays_finite():
    rng = np.random.default_rng(9)
    logits = _logits(rng, 2, 3, 8, scale=1e4, dtype=np.float32)
    target = rng.integers(0, 3, (2, 8, 8))
    value = pixel_ece(torch.from_numpy(logits), torch.from_numpy(target), from_logits=True)
    # Saturated softmax: every confidence is 1, so ECE = 1 - accuracy.
    accuracy = (logits.argmax(axis=1) == target).mean()
    assert value == pytest.approx(1 - accuracy, abs=1e-6)


def test_pixel_ece_shape_errors():
    probs = np.full((2, 3, 4, 4), 1 / 3)
    with pytest.raises(ValueError, match="target must have shape"):
        pixel_ece(probs, np.zeros((2, 3, 4), int))
    with pytest.raises(ValueError, match=r"\(N, K, H, W\)"):
        pixel_ece(np.full((4, 3), 1 / 3), np.zeros(4, int))
