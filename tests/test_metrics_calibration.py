"""Binned calibration metrics against torchmetrics and direct reference implementations (netcal:
tests/test_against_netcal.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torchmetrics.functional.classification import multiclass_calibration_error

from focalcal import metrics
from focalcal.metrics import classwise_ece, ece, mce, reliability_bins
from focalcal.metrics.binning import bin_statistics


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def sample_labels(rng, probs):
    """Labels drawn from ``probs`` (a calibrated model), so ECE is small but not zero."""
    cumulative = probs.cumsum(axis=1)
    draws = rng.random((probs.shape[0], 1)) * cumulative[:, -1:]
    return np.minimum((draws > cumulative).sum(axis=1), probs.shape[1] - 1)


def random_problem(seed, n=3000, k=10, scale=3.0, n_bins=15, edge_margin=1e-5):
    """Random probabilities whose top-label confidence stays ``edge_margin`` away from every i/M.

    torchmetrics bins [i/M, (i+1)/M) (torch.bucketize(right=True)), mukhoti2020 and we bin
    ((i-1)/M, i/M]; the two agree everywhere except on the edges themselves, and
    torchmetrics rounds confidences to float32, so inputs near an edge are dropped.
    """
    rng = np.random.default_rng(seed)
    probs = softmax(rng.standard_normal((n, k)) * scale)
    confidence = probs.max(axis=1)
    distance = np.abs(confidence[:, None] - np.arange(n_bins + 1)[None, :] / n_bins).min(axis=1)
    probs = probs[distance > edge_margin]
    # Half the labels from the model (calibrated-ish), half uniform (miscalibrated).
    labels = sample_labels(rng, probs)
    flip = rng.random(len(labels)) < 0.5
    labels[flip] = rng.integers(0, k, flip.sum())
    return probs, labels


def left_closed_bin_reference(confidence, correct, n_bins):
    """Per-bin loop with boolean masks on ((i-1)/M, i/M], 0 in the first bin: the papers' definition."""
    rows = []
    for i in range(1, n_bins + 1):
        lower, upper = (i - 1) / n_bins, i / n_bins
        in_bin = (confidence > lower) & (confidence <= upper)
        if i == 1:
            in_bin |= confidence == 0
        rows.append((in_bin.sum(), confidence[in_bin].sum(), correct[in_bin].sum()))
    return np.array(rows, dtype=np.float64)


# ---------------------------------------------------------------- equal-width ECE / MCE


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("n_bins", [15, 10, 7])
def test_ece_and_mce_match_torchmetrics(seed, n_bins):
    probs, labels = random_problem(seed, n_bins=n_bins, scale=1.0 + seed)
    probs_t, labels_t = torch.from_numpy(probs), torch.from_numpy(labels)
    expected_ece = multiclass_calibration_error(probs_t, labels_t, num_classes=10, n_bins=n_bins, norm="l1")
    expected_mce = multiclass_calibration_error(probs_t, labels_t, num_classes=10, n_bins=n_bins, norm="max")
    # torchmetrics accumulates in float32: agreement to float32 precision.
    assert ece(probs, labels, n_bins=n_bins) == pytest.approx(float(expected_ece), abs=2e-6)
    assert mce(probs, labels, n_bins=n_bins) == pytest.approx(float(expected_mce), abs=2e-6)
    assert ece(probs, labels, n_bins=n_bins) > 0.01  # a non-trivial value was compared


def test_ece_matches_per_bin_loop_and_formula():
    probs, labels = random_problem(5, n=1000, k=4)
    confidence, correct = probs.max(axis=1), probs.argmax(axis=1) == labels
    table = left_closed_bin_reference(confidence, correct, 15)
    count, conf_sum, hit_sum = table.T
    filled = count > 0
    gaps = np.abs(hit_sum[filled] / count[filled] - conf_sum[filled] / count[filled])
    assert ece(probs, labels) == pytest.approx(np.sum(count[filled] / len(labels) * gaps), abs=1e-14)
    assert mce(probs, labels) == pytest.approx(gaps.max(), abs=1e-14)


def test_exact_edges_land_in_the_bin_they_close():
    """Confidence exactly i/M is in bin i = ((i-1)/M, i/M]; conf 1 in bin M (mukhoti2020 §2)."""
    n_bins, n_classes = 15, 20
    confidence = np.arange(1, n_bins + 1) / n_bins  # every edge from 1/15 to 1
    probs = np.empty((n_bins, n_classes))
    probs[:] = ((1 - confidence) / (n_classes - 1))[:, None]
    probs[:, 3] = confidence  # class 3 is the argmax (1/15 > 14/15/19)
    labels = np.full(n_bins, 3)
    table = reliability_bins(probs, labels, n_bins=n_bins)
    np.testing.assert_array_equal(table["count"], np.ones(n_bins, dtype=int))
    np.testing.assert_allclose(table["confidence"], confidence, rtol=0, atol=0)
    np.testing.assert_allclose(table["upper"], confidence, rtol=0, atol=0)
    # all correct: accuracy 1, ECE = mean(1 - confidence).
    assert ece(probs, labels, n_bins=n_bins) == pytest.approx(np.mean(1 - confidence), abs=1e-15)
    # torchmetrics would put each i/M in the bin *opened* by it ([i/M, (i+1)/M), with 1.0
    # in an extra bucket); ECE is the same here because every bin holds one sample,
    # but per-bin tables differ, which is why the random tests avoid exact edges.


def test_zero_and_one_land_in_first_and_last_bin_float32_and_float64():
    n_bins = 10
    for dtype in (np.float64, np.float32):
        scores = (np.arange(n_bins + 1) / n_bins).astype(dtype)  # 0, edges, 1
        stats = bin_statistics(scores, np.ones(len(scores), bool), n_bins, "width")
        expected = np.ones(n_bins, dtype=int)
        expected[0] = 2  # 0 and 1/M share bin 1 = [0, 1/M]
        np.testing.assert_array_equal(stats.count, expected)
        assert stats.count.sum() == len(scores)
        assert stats.score_sum.dtype == np.float64


def test_float32_and_torch_inputs_give_the_float64_numpy_result():
    probs, labels = random_problem(6, n=2000, edge_margin=1e-4)
    expected = ece(probs, labels)
    assert ece(probs.astype(np.float32), labels) == pytest.approx(expected, abs=1e-6)
    assert ece(torch.from_numpy(probs), torch.from_numpy(labels)) == expected
    assert ece(torch.from_numpy(probs).requires_grad_(), torch.from_numpy(labels)) == expected
    assert mce(torch.from_numpy(probs.astype(np.float32)), torch.from_numpy(labels)) == pytest.approx(
        mce(probs, labels), abs=1e-6
    )
    assert ece(probs, labels, binning="mass") == ece(torch.from_numpy(probs), torch.from_numpy(labels), binning="mass")


# ---------------------------------------------------------------- equal-mass (AdaECE)


def tie_aware_rank_reference(confidence, correct, n_bins):
    """Sort and split by rank: the sample of rank r goes to bin floor(r M / N); a run of equal
    confidences all go to the bin of its lowest rank. Loop over bins with boolean masks."""
    n = len(confidence)
    order = np.argsort(confidence, kind="stable")
    sorted_conf = confidence[order]
    rank_of_first_tie = np.searchsorted(sorted_conf, sorted_conf, side="left")
    bin_of_sorted = rank_of_first_tie * n_bins // n
    rows = []
    for b in range(n_bins):
        in_bin = bin_of_sorted == b
        rows.append((in_bin.sum(), sorted_conf[in_bin].sum(), correct[order][in_bin].sum()))
    return np.array(rows, dtype=np.float64)


def ece_from_table(table, n):
    _count, conf_sum, hit_sum = table.T
    return np.abs(conf_sum - hit_sum).sum() / n


@pytest.mark.parametrize("n", [1003, 997, 15 * 67, 40])
def test_equal_mass_without_ties_matches_sort_and_split(n):
    rng = np.random.default_rng(n)
    probs = softmax(rng.standard_normal((n, 6)) * 2)
    labels = sample_labels(rng, probs)
    confidence, correct = probs.max(axis=1), probs.argmax(axis=1) == labels
    assert len(np.unique(confidence)) == n
    table = reliability_bins(probs, labels, binning="mass")
    assert table["count"].sum() == n  # every sample binned, N not a multiple of 15
    assert table["count"].max() - table["count"].min() <= 1
    reference = tie_aware_rank_reference(confidence, correct, 15)
    np.testing.assert_array_equal(table["count"], reference[:, 0])
    assert ece(probs, labels, binning="mass") == pytest.approx(ece_from_table(reference, n), abs=1e-14)
    if n % 15 == 0:  # then also np.array_split's chunks, an independent split
        chunks = np.array_split(np.argsort(confidence), 15)
        direct = sum(abs(confidence[c].sum() - correct[c].sum()) for c in chunks) / n
        assert ece(probs, labels, binning="mass") == pytest.approx(direct, abs=1e-14)
        gaps = [abs(confidence[c].mean() - correct[c].mean()) for c in chunks]
        assert mce(probs, labels, binning="mass") == pytest.approx(max(gaps), abs=1e-14)


def test_equal_mass_with_30_percent_confidence_exactly_one():
    rng = np.random.default_rng(11)
    n, n_tied = 1000, 300
    probs = softmax(rng.standard_normal((n, 10)) * 2)
    probs[:n_tied] = np.eye(10)[rng.integers(0, 10, n_tied)]  # confidence exactly 1.0
    labels = sample_labels(rng, probs)
    labels[:n_tied][:30] = (probs[:30].argmax(axis=1) + 1) % 10  # some confident mistakes
    perm = rng.permutation(n)
    probs, labels = probs[perm], labels[perm]
    confidence, correct = probs.max(axis=1), probs.argmax(axis=1) == labels

    table = reliability_bins(probs, labels, binning="mass")
    assert table["count"].sum() == n
    # cuts at ranks ceil(b*1000/15); the 1.0-run starts at rank 700 and reaches bin 11,
    # which keeps it whole; bins 12-15 are empty with lower == upper == 1.
    assert (table["count"] > 0).sum() == 11
    assert (table.loc[11:, "count"] == 0).all()
    assert (table.loc[11:, ["lower", "upper"]] == 1.0).all().all()
    last = table.loc[10]
    assert last["upper"] == 1.0 and last["count"] == n_tied + 33  # ranks 667..999: 33 below 1.0, 300 tied
    reference = tie_aware_rank_reference(confidence, correct, 15)
    np.testing.assert_array_equal(table["count"], reference[:, 0])
    assert ece(probs, labels, binning="mass") == pytest.approx(ece_from_table(reference, n), abs=1e-14)
    # Sample order does not matter, because ties are never split.
    shuffle = rng.permutation(n)
    assert ece(probs[shuffle], labels[shuffle], binning="mass") == pytest.approx(
        ece(probs, labels, binning="mass"), abs=1e-15
    )


def test_equal_mass_with_all_confidences_equal():
    n = 101
    probs = np.tile([0.7, 0.2, 0.1], (n, 1))
    labels = np.zeros(n, dtype=int)
    labels[:40] = 1  # accuracy 61/101
    table = reliability_bins(probs, labels, binning="mass")
    np.testing.assert_array_equal(table["count"], [n] + [0] * 14)
    assert table["confidence"].iloc[1:].isna().all()
    expected = abs(0.7 - 61 / 101)
    assert ece(probs, labels, binning="mass") == pytest.approx(expected, abs=1e-14)
    assert ece(probs, labels, binning="width") == pytest.approx(expected, abs=1e-14)
    assert mce(probs, labels, binning="mass") == pytest.approx(expected, abs=1e-14)


def test_equal_mass_fewer_samples_than_bins():
    probs = softmax(np.array([[0.0, 1.0], [2.0, 0.0], [0.0, 3.0]]))
    labels = np.array([1, 0, 0])
    table = reliability_bins(probs, labels, n_bins=15, binning="mass")
    assert table["count"].sum() == 3 and (table["count"] > 0).sum() == 3
    # each sample alone in its bin: ECE = mean |correct - confidence|
    confidence = probs.max(axis=1)
    correct = probs.argmax(axis=1) == labels
    assert ece(probs, labels, binning="mass") == pytest.approx(np.mean(np.abs(correct - confidence)), abs=1e-15)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 8), min_size=1, max_size=80),
    st.integers(1, 12),
    st.randoms(use_true_random=False),
)
def test_equal_mass_bins_property(levels, n_bins, rand):
    """Heavily tied scores: every sample in one bin, ties whole, result order-free."""
    scores = np.array(levels, dtype=np.float64) / 8  # includes exact 0 and 1
    hits = np.array([rand.random() < 0.5 for _ in levels])
    stats = bin_statistics(scores, hits, n_bins, "mass")
    reference = tie_aware_rank_reference(scores, hits, n_bins)
    assert stats.count.sum() == len(scores)
    np.testing.assert_array_equal(stats.count, reference[:, 0])
    np.testing.assert_allclose(stats.score_sum, reference[:, 1], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(stats.hit_sum, reference[:, 2])
    # a value's samples are all in one bin: number of distinct values per bin sums to the distinct count
    index = np.searchsorted(stats.edges[1:-1], scores, side="left")
    assert all(len(np.unique(index[scores == v])) == 1 for v in np.unique(scores))


# ---------------------------------------------------------------- classwise ECE


def classwise_reference(probs, labels, n_bins):
    """Kull et al. 2019: for each class and bin ((i-1)/M, i/M], |B|/N * |freq - mean prob|, averaged over classes."""
    n, k = probs.shape
    total = 0.0
    for c in range(k):
        table = left_closed_bin_reference(probs[:, c], labels == c, n_bins)
        total += np.abs(table[:, 1] - table[:, 2]).sum() / n
    return total / k


def test_classwise_ece_matches_reference_including_zeros_and_ones():
    rng = np.random.default_rng(7)
    probs = softmax(rng.standard_normal((1500, 4)) * 2.5)
    probs[:100] = np.eye(4)[rng.integers(0, 4, 100)]  # exact 0s and 1s per class
    labels = sample_labels(rng, probs)
    labels[:20] = rng.integers(0, 4, 20)
    for n_bins in (15, 10):
        assert classwise_ece(probs, labels, n_bins=n_bins) == pytest.approx(
            classwise_reference(probs, labels, n_bins), abs=1e-14
        )
    assert classwise_ece(probs, labels) > 0.005


def test_classwise_ece_binary_equals_top_label_ece_on_symmetric_problem():
    """For K = 2, class 1's bins mirror class 0's, so classwise ECE is the plain binary
    calibration error of p1; check against torchmetrics' binary calibration error."""
    from torchmetrics.functional.classification import binary_calibration_error

    rng = np.random.default_rng(8)
    p1 = rng.uniform(0.01, 0.99, 4000)
    p1 = p1[np.abs(p1 * 10 - np.round(p1 * 10)) > 1e-4]  # away from edges (conventions differ there)
    probs = np.stack([1 - p1, p1], axis=1)
    labels = (rng.random(len(p1)) < p1**1.5).astype(int)
    expected = binary_calibration_error(torch.from_numpy(p1), torch.from_numpy(labels), n_bins=10, norm="l1")
    assert classwise_ece(probs, labels, n_bins=10) == pytest.approx(float(expected), abs=2e-6)


def classwise_ece_class_loop(probs, labels, n_bins, binning="width"):
    """The per-class loop classwise_ece was first written as: one ``bin_statistics`` per class."""
    from focalcal.metrics.binning import bin_statistics

    total = 0.0
    for k in range(probs.shape[1]):
        bins = bin_statistics(np.ascontiguousarray(probs[:, k]), labels == k, n_bins, binning)
        total += np.abs(bins.score_sum - bins.hit_sum).sum()
    return total / probs.size


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_classwise_ece_equals_the_class_loop_on_many_classes_edges_zeros_and_ones(dtype):
    rng = np.random.default_rng(41)
    probs = softmax(rng.standard_normal((600, 300)) * 4).astype(dtype)
    probs[:30] = np.eye(300, dtype=dtype)[rng.integers(0, 300, 30)]  # exact 0s and 1s
    edge_rows = rng.integers(0, 15, 40)  # a probability exactly on an edge i/15 (in the dtype) and its complement
    probs[30:70] = 0
    probs[30 + np.arange(40), 0] = (edge_rows / 15).astype(dtype)
    probs[30 + np.arange(40), 1] = 1 - probs[30 + np.arange(40), 0]
    labels = sample_labels(rng, probs.astype(np.float64) / probs.sum(axis=1, keepdims=True, dtype=np.float64))
    for n_bins in (15, 10, 2, 1):
        expected = classwise_ece_class_loop(probs, labels, n_bins)
        assert classwise_ece(probs, labels, n_bins=n_bins) == pytest.approx(expected, rel=0, abs=1e-12)
    assert classwise_ece(probs, labels, n_bins=15, binning="mass") == pytest.approx(
        classwise_ece_class_loop(probs, labels, 15, "mass"), rel=0, abs=1e-12)
    assert classwise_ece(probs, labels) > 1e-4


def test_classwise_ece_is_the_mean_of_torchmetrics_binary_errors_per_class():
    """Classwise ECE is the mean over classes of the binary calibration error of (p_k, y == k);
    torchmetrics computes that one class at a time (probabilities kept off the bin edges, where
    its left-closed bins differ)."""
    from torchmetrics.functional.classification import binary_calibration_error

    rng = np.random.default_rng(42)
    probs = softmax(rng.standard_normal((3000, 6)) * 1.5)
    keep = (np.abs(probs * 10 - np.round(probs * 10)) > 1e-4).all(axis=1)
    probs = probs[keep]
    labels = sample_labels(rng, probs)
    per_class = [float(binary_calibration_error(torch.from_numpy(np.ascontiguousarray(probs[:, k])), torch.from_numpy(labels == k).long(),
                                                n_bins=10, norm="l1")) for k in range(6)]
    assert classwise_ece(probs, labels, n_bins=10) == pytest.approx(np.mean(per_class), abs=2e-6)


# ---------------------------------------------------------------- reliability bins and validation


def test_reliability_bins_columns_and_consistency_with_ece():
    probs, labels = random_problem(9, n=2000)
    for binning in ("width", "mass"):
        table = reliability_bins(probs, labels, n_bins=12, binning=binning)
        assert list(table.columns) == ["lower", "upper", "count", "confidence", "accuracy"]
        assert len(table) == 12 and table["count"].sum() == len(labels)
        filled = table[table["count"] > 0]
        assert (filled["confidence"] > filled["lower"]).all() and (filled["confidence"] <= filled["upper"]).all()
        gaps = (filled["count"] / len(labels) * (filled["accuracy"] - filled["confidence"]).abs()).sum()
        assert ece(probs, labels, n_bins=12, binning=binning) == pytest.approx(gaps, abs=1e-14)
        assert mce(probs, labels, n_bins=12, binning=binning) == pytest.approx(
            (filled["accuracy"] - filled["confidence"]).abs().max(), abs=1e-14
        )
    width = reliability_bins(probs, labels, n_bins=12)
    np.testing.assert_allclose(width["lower"], np.arange(12) / 12, atol=1e-7)


GOOD = np.array([[0.7, 0.3], [0.4, 0.6]])


@pytest.mark.parametrize("metric", [ece, mce, classwise_ece, reliability_bins])
@pytest.mark.parametrize(
    ("probs", "labels", "message"),
    [
        (np.array([[np.nan, 1.0], [0.4, 0.6]]), [0, 1], "NaN"),
        (np.array([[np.inf, 0.0], [0.4, 0.6]]), [0, 1], "Inf"),
        (GOOD, [0, 2], "out of range"),
        (GOOD, [0, -1], "out of range"),
        (GOOD, [0, 1, 1], "shape mismatch"),
        (np.empty((0, 3)), np.empty(0, int), "empty"),
        (np.array([[0.7, 0.4], [0.4, 0.6]]), [0, 1], "sum to 1"),
        (np.array([[1.2, -0.2], [0.4, 0.6]]), [0, 1], r"\[0, 1\]"),
        (np.array([0.7, 0.3]), [0], "2-D"),
    ],
)
def test_invalid_input_raises_value_error_naming_the_problem(metric, probs, labels, message):
    with pytest.raises(ValueError, match=message):
        metric(probs, labels)


@pytest.mark.parametrize("metric", [ece, mce, classwise_ece, reliability_bins])
def test_invalid_binning_arguments(metric):
    with pytest.raises(ValueError, match="n_bins"):
        metric(GOOD, [0, 1], n_bins=0)
    with pytest.raises(ValueError, match="n_bins"):
        metric(GOOD, [0, 1], n_bins=2.5)
    with pytest.raises(ValueError, match="binning"):
        metric(GOOD, [0, 1], binning="quantile")


def test_ece_of_confidence_equals_ece_of_the_probabilities():
    rng = np.random.default_rng(5)
    probs = rng.dirichlet(np.ones(4) * 0.7, size=500)
    labels = rng.integers(0, 4, size=500)
    confidence, predicted = probs.max(axis=1), probs.argmax(axis=1)
    for binning in ("width", "mass"):
        assert metrics.ece_of_confidence(confidence, predicted == labels, 15, binning) == pytest.approx(
            metrics.ece(probs, labels, 15, binning), abs=1e-15)
    with pytest.raises(ValueError, match="correct must be boolean"):
        metrics.ece_of_confidence(confidence, (predicted == labels).astype(int))
    with pytest.raises(ValueError, match="one size"):
        metrics.ece_of_confidence(confidence, (predicted == labels)[:-1])


def test_smooth_reliability_curve_carries_the_smooth_ece_and_tracks_the_true_calibration_map():
    """smECE from the curve's one relplot call equals relplot's own smECE; for a model whose true
    accuracy at confidence c is c² (overconfident), smECE is near E[c − c²] and the curve (smoothed
    at bandwidth smECE, so flattened) rises below the diagonal."""
    import relplot

    rng = np.random.default_rng(5)
    confidence = rng.uniform(0.5, 1.0, 20000)
    correct = rng.uniform(size=confidence.size) < confidence**2
    labels = np.where(correct, 0, 1)
    probs = np.column_stack([confidence, 1 - confidence])
    curve = metrics.smooth_reliability_curve(probs, labels)
    assert curve.smooth_ece == pytest.approx(relplot.smECE(confidence, correct.astype(float)), rel=1e-12)
    assert curve.smooth_ece == pytest.approx(metrics.smooth_ece(probs, labels), rel=1e-12)
    inside = (curve.mesh > 0.55) & (curve.mesh < 0.95)
    assert np.all(np.diff(curve.accuracy[inside]) > 0)
    assert np.all(curve.accuracy[inside] < curve.mesh[inside] - 0.08)
    assert curve.smooth_ece == pytest.approx(np.mean(confidence - confidence**2), abs=0.02)
    calibrated = np.where(rng.uniform(size=confidence.size) < confidence, 0, 1)
    assert metrics.smooth_ece(probs, calibrated) < 0.015
