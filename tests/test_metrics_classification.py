"""Unbinned metrics against torch, scipy and closed forms, including float32 and extreme inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.special import rel_entr

from focalcal.metrics import S99, brier, error, kl_divergence, nll, nll_from_logits, s99, top_k_error


def random_logits(seed, n=500, k=7, scale=3.0):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((n, k)) * scale
    labels = rng.integers(0, k, n)
    return logits, labels


def softmax(logits):
    return torch.softmax(torch.from_numpy(logits), dim=1).numpy()


# ---------------------------------------------------------------- NLL


@pytest.mark.parametrize("seed", [0, 1])
def test_nll_matches_torch_cross_entropy(seed):
    logits, labels = random_logits(seed)
    expected = F.cross_entropy(torch.from_numpy(logits), torch.from_numpy(labels)).item()
    assert nll_from_logits(logits, labels) == pytest.approx(expected, rel=1e-13)
    assert nll(softmax(logits), labels) == pytest.approx(expected, rel=1e-12)
    assert nll(torch.from_numpy(softmax(logits)), torch.from_numpy(labels)) == nll(softmax(logits), labels)
    assert nll_from_logits(torch.from_numpy(logits), torch.from_numpy(labels)) == nll_from_logits(logits, labels)


def test_nll_float32_accumulates_in_float64():
    logits, labels = random_logits(2, n=20000)
    expected = F.cross_entropy(torch.from_numpy(logits), torch.from_numpy(labels)).item()
    logits32 = logits.astype(np.float32)
    assert nll_from_logits(logits32, labels) == pytest.approx(expected, rel=1e-6)
    assert nll(softmax(logits32), labels) == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_nll_from_logits_extreme_logits(dtype):
    logits = np.array([[1e4, -1e4, 0.0]] * 3, dtype=dtype)
    labels = np.array([0, 1, 2])
    # per-sample losses: log1p(e^-2e4 + e^-1e4) = 0, 2e4, 1e4 (exactly, to float precision)
    assert nll_from_logits(logits, labels) == pytest.approx((0 + 2e4 + 1e4) / 3, rel=1e-12)
    assert math.isfinite(nll_from_logits(logits, labels))
    # softmax underflows: probabilities 0 for the wrong classes, so nll from probs is inf
    assert nll(softmax(logits), labels) == math.inf


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_nll_from_logits_keeps_tiny_losses(dtype):
    """A confident correct prediction has loss log1p(e^-30) ~ 9.4e-14; 1 + e^-30 rounds to 1."""
    logits = np.array([[0.0, -30.0], [-30.0, 0.0]], dtype=dtype)
    labels = np.array([0, 1])
    assert nll_from_logits(logits, labels) == pytest.approx(math.log1p(math.exp(-30.0)), rel=1e-6)


def test_nll_from_probabilities_exactly_zero_and_one():
    probs = np.array([[1.0, 0.0], [0.0, 1.0]])
    assert nll(probs, [0, 1]) == 0.0
    assert nll(probs, [1, 1]) == math.inf  # honest: no clamping


# ---------------------------------------------------------------- Brier, error, top-k


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_brier_matches_direct_formula(dtype):
    logits, labels = random_logits(3)
    probs = softmax(logits).astype(dtype)
    one_hot = np.eye(probs.shape[1])[labels]
    expected = np.mean(np.sum((probs.astype(np.float64) - one_hot) ** 2, axis=1))
    assert brier(probs, labels) == pytest.approx(expected, rel=1e-14)
    assert brier(torch.from_numpy(probs), torch.from_numpy(labels)) == brier(probs, labels)


def test_brier_extremes():
    one_hot = np.eye(3)
    assert brier(one_hot, [0, 1, 2]) == 0.0
    assert brier(one_hot, [1, 2, 0]) == 2.0  # the maximum: sum over classes, not a mean
    assert brier(np.full((2, 4), 0.25), [0, 3]) == pytest.approx(0.75**2 + 3 * 0.25**2, abs=1e-15)


def test_error_and_top_k_error_match_torch_topk():
    logits, labels = random_logits(4, n=2000, k=10)
    probs = softmax(logits)
    labels_t = torch.from_numpy(labels)
    assert error(probs, labels) == pytest.approx(np.mean(probs.argmax(1) != labels), abs=0)
    for k in (1, 3, 5, 10):
        topk = torch.topk(torch.from_numpy(probs), k, dim=1).indices
        expected = 1.0 - (topk == labels_t[:, None]).any(dim=1).double().mean().item()
        assert top_k_error(probs, labels, k=k) == pytest.approx(expected, abs=1e-15)
    assert top_k_error(probs, labels, k=1) == error(probs, labels)
    assert top_k_error(probs, labels, k=10) == 0.0
    assert 0.1 < top_k_error(probs, labels, k=5) < error(probs, labels)


def test_top_k_ties_break_like_argmax():
    probs = np.array([[0.4, 0.4, 0.2], [0.4, 0.4, 0.2], [0.2, 0.4, 0.4]])
    labels = np.array([0, 1, 2])
    # argmax picks the first maximum: row 0 correct, rows 1 and 2 wrong
    assert error(probs, labels) == pytest.approx(2 / 3)
    assert top_k_error(probs, labels, k=1) == pytest.approx(2 / 3)
    assert top_k_error(probs, labels, k=2) == 0.0


# ---------------------------------------------------------------- KL divergence


def test_kl_divergence_matches_scipy_rel_entr_with_zeros_in_eta():
    rng = np.random.default_rng(5)
    eta = rng.dirichlet(np.ones(4), size=300)
    eta[:100, 0] = 0.0  # zeros in the posterior: 0 log 0 = 0
    eta[:100] /= eta[:100].sum(axis=1, keepdims=True)
    eta[100:110] = np.eye(4)[rng.integers(0, 4, 10)]  # one-hot posteriors
    q = rng.dirichlet(np.ones(4) * 2, size=300)
    expected = rel_entr(eta, q).sum(axis=1).mean()
    assert kl_divergence(eta, q) == pytest.approx(expected, rel=1e-12)
    assert kl_divergence(torch.from_numpy(eta), torch.from_numpy(q)) == kl_divergence(eta, q)
    assert kl_divergence(eta.astype(np.float32), q.astype(np.float32)) == pytest.approx(expected, rel=1e-5)


def test_kl_divergence_exact_cases():
    eta = np.array([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])
    assert kl_divergence(eta, eta) == 0.0
    q = np.array([[0.25, 0.75, 0.0], [0.5, 0.0, 0.5]])  # q = 0 only where eta = 0 too
    expected = (0.5 * math.log(2) + 0.5 * math.log(0.5 / 0.75) + math.log(2)) / 2
    assert kl_divergence(eta, q) == pytest.approx(expected, rel=1e-15)
    assert kl_divergence(q, eta) == math.inf  # q has mass where eta has none
    tiny = np.array([[1 - 1e-300, 1e-300]])  # eta / q would overflow; log-difference does not
    assert kl_divergence(np.array([[0.0, 1.0]]), tiny) == pytest.approx(300 * math.log(10), rel=1e-15)


# ---------------------------------------------------------------- S99


def test_s99_share_and_accuracy():
    confidence = np.array([0.995, 0.99, 0.9899, 0.5, 1.0, 0.999])
    probs = np.stack([confidence, 1 - confidence], axis=1)
    labels = np.array([0, 1, 0, 0, 0, 0])
    result = s99(probs, labels)
    assert isinstance(result, S99)
    confident = confidence >= 0.99  # 0.99 or more: rows 0, 1, 4, 5
    assert result.share == pytest.approx(confident.mean())
    assert result.accuracy == pytest.approx((labels[confident] == 0).mean())  # 3 of 4
    assert result == (pytest.approx(4 / 6), pytest.approx(3 / 4))


def test_s99_float32_threshold_and_empty_set():
    probs = np.array([[0.99, 0.01], [0.6, 0.4]], dtype=np.float32)
    assert s99(probs, [0, 0]).share == 0.5  # float32(0.99) counts as >= 0.99
    result = s99(np.array([[0.6, 0.4]]), [0])
    assert result.share == 0.0 and math.isnan(result.accuracy)
    assert s99(torch.from_numpy(probs), torch.tensor([0, 0])) == s99(probs, [0, 0])


# ---------------------------------------------------------------- validation


GOOD = np.array([[0.7, 0.3], [0.4, 0.6]])


@pytest.mark.parametrize("metric", [nll, brier, error, top_k_error, s99])
@pytest.mark.parametrize(
    ("probs", "labels", "message"),
    [
        (np.array([[np.nan, 1.0], [0.4, 0.6]]), [0, 1], "NaN"),
        (GOOD, [0, 5], "out of range"),
        (GOOD, [0], "shape mismatch"),
        (np.empty((0, 2)), np.empty(0, int), "empty"),
        (np.array([[0.7, 0.4], [0.4, 0.6]]), [0, 1], "sum to 1"),
    ],
)
def test_invalid_input_raises_value_error(metric, probs, labels, message):
    with pytest.raises(ValueError, match=message):
        metric(probs, labels)


def test_invalid_input_specific_arguments():
    with pytest.raises(ValueError, match="logits contains Inf"):
        nll_from_logits(np.array([[np.inf, 0.0]]), [0])
    with pytest.raises(ValueError, match="labels out of range"):
        nll_from_logits(np.zeros((2, 3)), [0, 3])
    with pytest.raises(ValueError, match="k must be"):
        top_k_error(GOOD, [0, 1], k=3)
    with pytest.raises(ValueError, match="k must be"):
        top_k_error(GOOD, [0, 1], k=0)
    with pytest.raises(ValueError, match="shape mismatch"):
        kl_divergence(GOOD, np.full((2, 3), 1 / 3))
    with pytest.raises(ValueError, match="eta rows must sum to 1"):
        kl_divergence(np.array([[0.5, 0.6]]), np.array([[0.5, 0.5]]))
    with pytest.raises(ValueError, match="q contains NaN"):
        kl_divergence(np.array([[0.5, 0.5]]), np.array([[np.nan, 0.5]]))
    with pytest.raises(ValueError, match="threshold"):
        s99(GOOD, [0, 1], threshold=1.5)
