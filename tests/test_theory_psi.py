"""Ψ^γ (charoenphakdee2021 Eq 11-13 = komisarenko2024 Eq 1): closed form, extremes, backends."""

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special

from focalcal.theory import log_psi_from_logits, psi, psi_from_logits, tau_oc, tau_uc

mpmath.mp.dps = 80


def psi_reference(q, gamma):
    """Eq 12-13 evaluated literally in 80-digit arithmetic (h(0) = 0)."""
    gamma = mpmath.mpf(gamma)

    def h(v):
        v = mpmath.mpf(v)
        if v == 0:
            return mpmath.mpf(0)
        return v / ((1 - v) ** gamma - gamma * (1 - v) ** (gamma - 1) * v * mpmath.log(v))

    values = [h(v) for v in q]
    total = sum(values)
    return np.array([float(v / total) for v in values])


def psi_reference_from_logits(logits, gamma):
    """Same, with q = softmax(logits) formed in 80 digits (so 1 - q is not rounded away)."""
    exps = [mpmath.exp(mpmath.mpf(float(s))) for s in logits]
    total = sum(exps)
    q = [e / total for e in exps]
    gamma = mpmath.mpf(gamma)
    h = [v / ((1 - v) ** gamma - gamma * (1 - v) ** (gamma - 1) * v * mpmath.log(v)) for v in q]
    return np.array([float(v / sum(h)) for v in h])


EXTREME_ROWS = [
    [1 - 1e-12, 1e-12],
    [1e-12, 1 - 1e-12],
    [0.999, 0.0005, 0.0005],
    [0.5, 0.5 - 1e-15, 1e-15],
    [0.7, 0.2, 0.1],
    [1 / 3, 1 / 3, 1 / 3],
    [0.25, 0.0, 0.75],
]


@pytest.mark.parametrize("gamma", [-0.5, -0.2, 0.5, 1.0, 2.0, 10.0])
@pytest.mark.parametrize("row", EXTREME_ROWS)
def test_psi_matches_high_precision_closed_form(row, gamma):
    q = np.array(row, dtype=np.float64)
    q = q / q.sum()
    expected = psi_reference(q, gamma)
    got = psi(q, gamma)
    assert got.shape == q.shape
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-300)


def test_psi_paper_example_binary_80_20_and_underconfidence():
    # komisarenko2024 §3.1: FL γ=2 predicts ~0.62 where the truth is 0.8, so Ψ(0.6266..) = 0.8.
    # Value 0.626614831 found by root-finding Ψ(q)_1 = 0.8 in mpmath below (independent of focalcal.theory).
    q1 = mpmath.findroot(lambda v: psi_reference([v, 1 - v], 2.0)[0] - 0.8, 0.6)
    assert abs(float(q1) - 0.62) < 0.01
    np.testing.assert_allclose(psi(np.array([float(q1), 1 - float(q1)]), 2.0), [0.8, 0.2], atol=1e-12)


def test_psi_gamma_zero_is_identity_and_preserves_dtype():
    rng = np.random.default_rng(0)
    q = rng.dirichlet(np.ones(7), size=20)
    np.testing.assert_array_equal(psi(q, 0.0), q)
    q32 = q.astype(np.float32)
    out = psi(q32, 0)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, q32)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    num_classes=st.sampled_from([2, 3, 10, 1000]),
    concentration=st.sampled_from([0.05, 0.5, 1.0, 5.0]),
    gamma=st.floats(0.0, 10.0),
)
def test_psi_preserves_argmax_and_follows_theorem_8(seed, num_classes, concentration, gamma):
    """Prop 12 (argmax kept) and Thm 8: with q = q*, Ψ(q) = η is below max q when
    max q <= τ_oc (η-overconfident q*) and above it when max q >= τ_uc (η-underconfident)."""
    rng = np.random.default_rng(seed)
    q = rng.dirichlet(np.full(num_classes, concentration), size=5)
    out = psi(q, gamma)
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out.sum(axis=1), 1.0, atol=1e-12)
    top = np.argmax(q, axis=1)
    np.testing.assert_array_equal(np.argmax(out, axis=1), top)
    if gamma > 1e-3:
        q_max, eta_max = q.max(axis=1), out.max(axis=1)
        overconfident = q_max <= tau_oc(gamma)
        underconfident = q_max >= tau_uc(gamma)
        assert np.all(eta_max[overconfident] <= q_max[overconfident] + 1e-12)
        assert np.all(eta_max[underconfident] >= q_max[underconfident] - 1e-12)


def test_psi_can_lower_the_top_probability_contrary_to_komisarenko_prop5():
    """komisarenko2024 Prop 5 claims Ψ never lowers the top probability; charoenphakdee2021 Thm 8
    (q* η-overconfident when max q* <= τ_oc) says it does for flat rows with many classes."""
    q = np.full(1000, 0.9 / 999)
    q[0] = 0.1  # max 0.1 <= τ_oc(1) = e^{-2} ~ 0.135
    out = psi(q, 1.0)
    assert out[0] < q[0]
    np.testing.assert_allclose(out, psi_reference(q, 1.0), rtol=1e-10)
    # Binary rows are always η-underconfident (Cor 10): the top probability rises.
    binary = np.array([[0.6, 0.4], [0.99, 0.01]])
    assert np.all(psi(binary, 1.0)[:, 0] > binary[:, 0])


@pytest.mark.parametrize("gamma", [-0.5, 0.5, 3.0])
def test_psi_at_zero_and_one_and_one_hot_rows(gamma):
    probs = np.array(
        [
            [1.0, 0.0, 0.0, 0.0],
            [0.0, 0.0, 0.0, 1.0],
            [0.5, 0.5, 0.0, 0.0],
            [0.0, 0.3, 0.0, 0.7],
        ]
    )
    out = psi(probs, gamma)
    assert np.all(np.isfinite(out))
    np.testing.assert_array_equal(out[:2], probs[:2])  # one-hot rows map to themselves (Thm 11)
    np.testing.assert_array_equal(out[:, :][probs == 0], 0.0)  # h(0) = 0
    np.testing.assert_allclose(out[2], [0.5, 0.5, 0, 0], atol=0)
    np.testing.assert_allclose(out[3], psi_reference(probs[3], gamma), rtol=1e-12)


def test_psi_one_thousand_classes_with_mass_in_one_class():
    rng = np.random.default_rng(1)
    rest = rng.dirichlet(np.ones(999)) * 1e-9
    q = np.concatenate([[1 - rest.sum()], rest])
    for gamma in (-0.5, 0.5, 2.0, 10.0):
        out = psi(q, gamma)
        assert np.all(np.isfinite(out)) and np.all(out >= 0)
        assert abs(out.sum() - 1) < 1e-12
        assert np.argmax(out) == 0
        # Spot-check the largest and a few small coordinates against 80-digit arithmetic.
        expected = psi_reference(q, gamma)
        np.testing.assert_allclose(out, expected, rtol=1e-9, atol=0)


def test_psi_float32_matches_float64_and_stays_float32():
    rng = np.random.default_rng(2)
    q64 = rng.dirichlet(np.full(10, 0.3), size=200)
    q32 = q64.astype(np.float32)
    for gamma in (-0.5, 1.0, 5.0):
        out32 = psi(q32, gamma)
        assert out32.dtype == np.float32
        np.testing.assert_allclose(out32, psi(q32.astype(np.float64), gamma), rtol=1e-6, atol=1e-7)


def test_psi_torch_matches_numpy_in_both_precisions():
    rng = np.random.default_rng(3)
    q = rng.dirichlet(np.full(6, 0.4), size=100)
    q[0] = [1, 0, 0, 0, 0, 0]
    q[1] = [1 - 1e-12, 1e-12, 0, 0, 0, 0]
    for gamma in (-0.5, 0.0, 2.0, 7.0):
        expected = psi(q, gamma)
        out64 = psi(torch.from_numpy(q), gamma)
        assert isinstance(out64, torch.Tensor) and out64.dtype == torch.float64
        np.testing.assert_allclose(out64.numpy(), expected, rtol=1e-12, atol=1e-300)
        out32 = psi(torch.from_numpy(q).float(), gamma)
        assert out32.dtype == torch.float32
        np.testing.assert_allclose(out32.numpy(), expected, rtol=2e-5, atol=1e-6)


def softmax64(logits):
    return special.softmax(np.asarray(logits, dtype=np.float64), axis=-1)


@pytest.mark.parametrize("gamma", [-0.5, 0.5, 2.0, 10.0])
def test_psi_from_logits_exact_for_extreme_logits(gamma):
    logits = np.array(
        [
            [0.0, -40.0, -45.0],  # 1 - q_top ~ 4e-18: rounds to 1 in probabilities
            [30.0, 0.0, 1.0],
            [0.0, 0.0, -3.0],
            [-2.0, 1.0, 0.5],
        ]
    )
    out = psi_from_logits(logits, gamma)
    log_out = log_psi_from_logits(logits, gamma)
    for row, got, got_log in zip(logits, out, log_out):
        expected = psi_reference_from_logits(row, gamma)
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=0)
        np.testing.assert_allclose(got_log, np.log(expected), rtol=1e-10, atol=1e-14)
    # Moderate logits: same answer as Ψ of the softmax probabilities.
    moderate = np.random.default_rng(4).normal(scale=2.0, size=(50, 5))
    np.testing.assert_allclose(
        psi_from_logits(moderate, gamma), psi(softmax64(moderate), gamma), rtol=1e-12, atol=1e-15
    )


def test_psi_from_logits_huge_gaps_in_float32_match_float64_and_have_finite_gradients():
    rows = [[0.0, -800.0, -800.0], [0.0, -200.0, -300.0], [0.0, -90.0, -90.0], [50.0, -50.0, 0.0], [3.0, 3.0, 3.0]]
    logits = torch.tensor(rows, dtype=torch.float32, requires_grad=True)
    for gamma in (-0.5, 2.0):
        log_out = log_psi_from_logits(logits, gamma)
        assert log_out.dtype == torch.float32
        assert torch.isfinite(log_out).all()
        expected = log_psi_from_logits(np.array(rows), gamma)  # float64 reference
        np.testing.assert_allclose(log_out.detach().numpy(), expected, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(log_out[-1].exp().detach().numpy(), [1 / 3] * 3, atol=1e-6)
        (grad,) = torch.autograd.grad(log_out[:, 0].sum(), logits)
        assert torch.isfinite(grad).all()


def test_psi_from_logits_gradient_matches_finite_differences():
    torch.manual_seed(0)
    logits = (torch.randn(4, 5, dtype=torch.float64) * 3).requires_grad_(True)
    weights = torch.randn(4, 5, dtype=torch.float64)

    def objective(z):
        return (psi_from_logits(z, 1.5) * weights).sum()

    assert torch.autograd.gradcheck(objective, (logits,), eps=1e-6, atol=1e-7)


@pytest.mark.parametrize(
    ("probs", "gamma", "match"),
    [
        (np.array([[0.5, 0.6]]), 1.0, "sum to 1"),
        (np.array([[1.2, -0.2]]), 1.0, r"\[0, 1\]"),
        (np.array([[np.nan, 1.0]]), 1.0, "NaN"),
        (np.array([[0.5, 0.5]]), -1.0, r"psi: gamma must be a real number in \(-1, inf\), got -1.0"),
        (np.array([[0.5, 0.5]]), float("nan"), r"psi: gamma must be a real number in \(-1, inf\), got nan"),
        (np.array([[0.5, 0.5]]), [1.0, 2.0], r"psi: gamma must be a real number in \(-1, inf\), got \[1.0, 2.0\]"),
        (np.array([[1.0]]), 1.0, "at least 2 classes"),
        (np.array(["a", "b"]), 1.0, "numeric"),
    ],
)
def test_psi_rejects_bad_input(probs, gamma, match):
    with pytest.raises(ValueError, match=match):
        psi(probs, gamma)


def test_psi_torch_rejects_bad_input():
    with pytest.raises(ValueError, match="sum to 1"):
        psi(torch.tensor([[0.5, 0.6]]), 1.0)
    with pytest.raises(ValueError, match="NaN"):
        psi_from_logits(torch.tensor([[0.0, float("nan")]]), 1.0)
    with pytest.raises(ValueError, match="Inf"):
        psi_from_logits(np.array([[0.0, np.inf]]), 1.0)
