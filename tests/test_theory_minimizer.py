"""Focal risk minimiser q*(η) (charoenphakdee2021 Thm 11): inverse of Ψ, direct minimisation."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize

from focalcal.theory import focal_risk_minimizer, psi


def random_posteriors(seed, num_classes, concentration, n_rows, zero_fraction):
    rng = np.random.default_rng(seed)
    eta = rng.dirichlet(np.full(num_classes, concentration), size=n_rows)
    if zero_fraction > 0:
        keep = rng.random(eta.shape) >= zero_fraction
        keep[np.arange(n_rows), np.argmax(eta, axis=1)] = True
        eta = np.where(keep, eta, 0.0)
        eta /= eta.sum(axis=1, keepdims=True)
    return eta


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    num_classes=st.sampled_from([2, 3, 10, 1000]),
    concentration=st.sampled_from([0.02, 0.3, 1.0, 10.0]),
    zero_fraction=st.sampled_from([0.0, 0.0, 0.5]),
    gamma=st.floats(0.0, 10.0),
)
def test_psi_inverts_the_focal_risk_minimizer(seed, num_classes, concentration, zero_fraction, gamma):
    eta = random_posteriors(seed, num_classes, concentration, 4, zero_fraction)
    q = focal_risk_minimizer(eta, gamma)
    assert q.shape == eta.shape and np.all(np.isfinite(q))
    np.testing.assert_allclose(q.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(q[eta == 0], 0.0)
    np.testing.assert_allclose(psi(q, gamma), eta, rtol=0, atol=1e-6)
    # Thm 3: strictly order preserving (ties only where η ties).
    rows = np.arange(len(eta))
    np.testing.assert_array_equal(np.argmax(q, axis=1), np.argmax(eta, axis=1)[rows])


def test_gamma_zero_returns_eta():
    eta = random_posteriors(0, 5, 1.0, 10, 0.0)
    np.testing.assert_allclose(focal_risk_minimizer(eta, 0.0), eta, rtol=1e-15)


def focal_risk_by_direct_minimisation(eta, gamma):
    """argmin over θ of Σ η_i FL(softmax(θ)_i), BFGS with torch autograd, float64."""
    eta_t = torch.tensor(eta, dtype=torch.float64)

    def risk_and_grad(theta):
        theta_t = torch.tensor(theta, dtype=torch.float64, requires_grad=True)
        log_q = torch.log_softmax(theta_t, dim=0)
        q = log_q.exp()
        risk = -(eta_t * (1 - q) ** gamma * log_q).sum()
        (grad,) = torch.autograd.grad(risk, theta_t)
        return risk.item(), grad.numpy()

    theta0 = np.log(eta) - np.log(eta).mean()
    result = optimize.minimize(risk_and_grad, theta0, jac=True, method="BFGS", options={"gtol": 1e-13, "maxiter": 2000})
    log_q = result.x - np.logaddexp.reduce(result.x)
    return np.exp(log_q)


@pytest.mark.parametrize("gamma", [0.5, 2.0, 5.0, 10.0])
@pytest.mark.parametrize("num_classes", [2, 3, 5])
def test_focal_risk_minimizer_matches_direct_numerical_minimisation(num_classes, gamma):
    rng = np.random.default_rng(num_classes * 100 + int(gamma * 10))
    for eta in rng.dirichlet(np.full(num_classes, 1.5), size=3):
        expected = focal_risk_by_direct_minimisation(eta, gamma)
        np.testing.assert_allclose(focal_risk_minimizer(eta, gamma), expected, atol=2e-7)


def test_komisarenko_80_20_example():
    # §3.1: 80 positives, 20 negatives, γ=2 -> the focal loss predicts "around 0.62".
    q = focal_risk_minimizer(np.array([0.8, 0.2]), 2.0)
    assert abs(q[0] - 0.62) < 0.01
    direct = optimize.minimize_scalar(
        lambda p: -(0.8 * (1 - p) ** 2 * np.log(p) + 0.2 * p**2 * np.log(1 - p)),
        bounds=(0.5, 0.99),
        method="bounded",
        options={"xatol": 1e-12},
    )
    assert abs(q[0] - direct.x) < 1e-7


def test_binary_minimizer_is_always_underconfident():
    """charoenphakdee2021 Cor 10 / Fig 2a: binary q* is η-underconfident, more so for larger γ."""
    eta_top = np.linspace(0.51, 0.999, 50)
    eta = np.column_stack([eta_top, 1 - eta_top])
    previous = eta_top
    for gamma in (0.5, 1.0, 2.0, 5.0):
        q_top = focal_risk_minimizer(eta, gamma)[:, 0]
        assert np.all((q_top > 0.5) & (q_top < previous))
        previous = q_top


def test_thousand_classes_round_trip_extremes():
    rng = np.random.default_rng(5)
    rows = [
        np.full(1000, 1 / 1000),  # uniform: q* = η (Prop 6)
        np.concatenate([[1 - 1e-6], np.full(999, 1e-6 / 999)]),  # mass in one class
        np.concatenate([[1.0], np.zeros(999)]),  # one-hot
        rng.dirichlet(np.full(1000, 0.01)),  # spiky, entries down to ~1e-300
        np.where(np.arange(1000) < 2, 0.5, 0.0),  # uniform on a subset
    ]
    eta = np.stack(rows)
    for gamma in (0.01, 1.0, 10.0):
        q = focal_risk_minimizer(eta, gamma)
        np.testing.assert_allclose(psi(q, gamma), eta, atol=1e-6, rtol=0)
        np.testing.assert_allclose(q[[0, 2, 4]], eta[[0, 2, 4]], atol=1e-15)


def test_thousand_classes_can_be_overconfident():
    """charoenphakdee2021 Fig 2b: with K=1000 and small max η, q* can exceed η (ηOC)."""
    eta = np.full(1000, 0.9 / 999)
    eta[0] = 0.1
    q = focal_risk_minimizer(eta, 1.0)
    assert q[0] > eta[0]
    np.testing.assert_allclose(psi(q, 1.0), eta, atol=1e-12)


def test_single_row_and_sum_tolerance():
    eta = np.array([0.6, 0.3, 0.1])
    q = focal_risk_minimizer(eta, 3.0)
    assert q.shape == (3,)
    np.testing.assert_allclose(focal_risk_minimizer(eta[None, :], 3.0)[0], q, rtol=1e-15)


@pytest.mark.parametrize(
    ("eta", "gamma", "match"),
    [
        (np.array([[0.5, 0.6]]), 1.0, "sum to 1"),
        (np.array([[1.5, -0.5]]), 1.0, r"\[0, 1\]"),
        (np.array([[0.5, np.nan]]), 1.0, "NaN"),
        (np.array([[0.5, 0.5]]), -0.5, r"focal_risk_minimizer: gamma must be a real number in \[0, inf\), got -0.5"),
        (np.array([[0.5, 0.5]]), np.inf, r"focal_risk_minimizer: gamma must be a real number in \[0, inf\), got inf"),
        (np.array([[0.5, 0.5]]), True, "real number"),
        (np.array([[[0.5, 0.5]]]), 1.0, "2-D"),
    ],
)
def test_focal_risk_minimizer_rejects_bad_input(eta, gamma, match):
    with pytest.raises(ValueError, match=match):
        focal_risk_minimizer(eta, gamma)
