"""Bootstrap intervals: every resample's value is the library's metric on that resample, and
the intervals cover the true value of a model whose miscalibration is known."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import softmax

from focalcal import metrics
from focalcal.metrics.bootstrap import METRICS, bootstrap_indices, metrics_with_intervals, resampled_metrics


def _probs(n=300, k=6, seed=0, scale=3.0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * scale
    labels = rng.integers(0, k, size=n)
    logits[np.arange(n), labels] += 2.0
    return softmax(logits, axis=1), labels


@pytest.mark.parametrize("n_bins", [1, 10, 60])  # 60: more bins than some resamples have distinct scores
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_each_resample_equals_the_metric_on_that_resample(dtype, n_bins):
    probs, labels = _probs()
    probs = probs.astype(dtype)
    probs[:7] = np.eye(6, dtype=dtype)[labels[:7]]  # exact one-hots: confidence 1 and ties in the mass bins
    probs[7, :] = 0
    probs[7, (labels[7] + 1) % 6] = 1  # a true-class probability of exactly 0: NLL inf wherever it is drawn
    indices = bootstrap_indices(len(labels), n_resamples=25, seed=3)
    values = resampled_metrics(probs, labels, indices, n_bins=n_bins)
    assert set(values) == set(METRICS)
    reference = {
        "ece": lambda p, y: metrics.ece(p, y, n_bins, "width"),
        "adaece": lambda p, y: metrics.ece(p, y, n_bins, "mass"),
        "mce": lambda p, y: metrics.mce(p, y, n_bins, "width"),
        "classwise_ece": lambda p, y: metrics.classwise_ece(p, y, n_bins, "width"),
        "nll": metrics.nll, "brier": metrics.brier, "error": metrics.error,
        "top5_error": lambda p, y: metrics.top_k_error(p, y, 5),
    }
    probs64 = probs.astype(np.float64)
    for b, index in enumerate(indices):
        for name, metric in reference.items():
            expected = metric(probs64[index], labels[index])
            assert values[name][b] == pytest.approx(expected, rel=1e-12, abs=1e-14), (name, b)
    assert np.isinf(values["nll"]).any() and np.isfinite(values["nll"]).any()


def test_intervals_hold_the_estimate_and_top5_needs_five_classes():
    probs, labels = _probs(k=3)
    intervals = metrics_with_intervals(probs, labels, bootstrap_indices(len(labels), 200, seed=1), n_bins=15)
    assert "top5_error" not in intervals
    assert intervals["ece"].estimate == metrics.ece(probs, labels, 15)
    for name, interval in intervals.items():
        assert interval.low <= interval.high, name
        assert interval.low - 0.05 <= interval.estimate <= interval.high + 0.05, name


def test_bad_arguments_are_named():
    probs, labels = _probs(n=20)
    with pytest.raises(ValueError, match="n_resamples must be an integer >= 2"):
        bootstrap_indices(20, 1)
    with pytest.raises(ValueError, match=r"indices must be \(n_resamples, 20\)"):
        resampled_metrics(probs, labels, np.zeros((3, 19), dtype=int))
    with pytest.raises(ValueError, match="level must lie in"):
        metrics_with_intervals(probs, labels, bootstrap_indices(20, 5), level=1.0)


def _known_model(n, rng):
    """Binary model whose confidence c ~ U(0.55, 1) is right with probability c - 0.1: the true
    ECE with 15 equal-width bins is exactly 0.1 (every bin's accuracy is its mean confidence - 0.1)."""
    confidence = rng.uniform(0.55, 1.0, size=n)
    correct = rng.uniform(size=n) < confidence - 0.1
    labels = rng.integers(0, 2, size=n)
    probs = np.empty((n, 2))
    predicted = np.where(correct, labels, 1 - labels)
    probs[np.arange(n), predicted] = confidence
    probs[np.arange(n), 1 - predicted] = 1 - confidence
    return probs, labels


def test_intervals_cover_the_true_ece_of_a_known_model():
    """50 test sets of 2,000 samples: the 95 % interval holds the true ECE (0.1) in >= 90 %."""
    rng = np.random.default_rng(2026)
    covered = 0
    for repetition in range(50):
        probs, labels = _known_model(2000, rng)
        interval = metrics_with_intervals(probs, labels, bootstrap_indices(2000, 500, seed=repetition))["ece"]
        covered += interval.low <= 0.1 <= interval.high
    assert covered >= 45, covered


def test_classwise_ece_of_many_classes_equals_the_metric_on_each_resample():
    rng = np.random.default_rng(5)  # 40 samples x 500 classes: nearly every probability in bin 0
    probs = rng.dirichlet(np.full(500, 0.05), size=40)
    labels = rng.integers(0, 500, 40)
    indices = bootstrap_indices(40, n_resamples=10, seed=2)
    values = resampled_metrics(probs, labels, indices, n_bins=15)["classwise_ece"]
    for b, index in enumerate(indices):
        assert values[b] == pytest.approx(metrics.classwise_ece(probs[index], labels[index], 15), rel=1e-12)


def test_the_classwise_estimate_is_the_library_metric():
    probs, labels = _probs(n=200, k=40)
    intervals = metrics_with_intervals(probs, labels, bootstrap_indices(200, 20, seed=0), n_bins=15)
    assert intervals["classwise_ece"].estimate == pytest.approx(metrics.classwise_ece(probs, labels, 15), rel=1e-12)
