"""φ^γ, τ_oc/τ_uc, g(p, γ), γ*(p0), the binary focal calibration map and temperature fits."""

import math

import mpmath
import numpy as np
import pytest
import torch
from scipy import special

from focalcal.theory import (
    binary_focal_calibration,
    binary_focal_calibration_logit,
    closest_temperature,
    gamma_star,
    gradient_ratio,
    phi,
    psi,
    tau_oc,
    tau_uc,
    temperature_bounds,
)

GAMMAS = np.array([0.01, 0.1, 0.5, 1.0, 2.0, 3.0, 5.0, 7.0, 10.0, 50.0])


# ------------------------------------------------------------------------------ φ and τ


def test_phi_matches_its_definition_and_endpoints():
    v = np.linspace(0.01, 0.99, 99)
    for gamma in (0.0, 0.5, 1.0, 3.0, 10.0, -0.5):
        expected = (1 - v) ** gamma - gamma * (1 - v) ** (gamma - 1) * v * np.log(v)  # C21 Eq 10
        np.testing.assert_allclose(phi(v, gamma), expected, rtol=1e-13)
    np.testing.assert_array_equal(phi(np.array([0.0, 1.0]), 2.0), [1.0, 0.0])
    np.testing.assert_array_equal(phi(np.array([0.0, 1.0]), 0.0), [1.0, 1.0])
    assert phi(np.array([0.0, 1.0]), 0.5)[1] == 0.0
    assert np.isfinite(phi(1 - 1e-16, 0.3)) and phi(1 - 1e-16, 0.3) > 0
    # Broadcasting over γ.
    assert phi(0.3, GAMMAS).shape == GAMMAS.shape


def test_tau_uc_of_one_is_one_over_e():
    # φ^1(v) = 1 - v - v log v = 1  <=>  log v = -1.
    assert tau_uc(1.0) == pytest.approx(1 / math.e, abs=1e-14)
    assert tau_oc(1.0) == pytest.approx(math.exp(-2), abs=1e-14)  # φ^1'(v) = -2 - log v


def test_theorem_8_ordering_and_definitions():
    oc, uc = tau_oc(GAMMAS), tau_uc(GAMMAS)
    assert np.all((0 < oc) & (oc < uc) & (uc < 0.5))
    np.testing.assert_allclose(phi(uc, GAMMAS), 1.0, atol=1e-13)
    # τ_oc is the maximiser of φ: check against a dense grid, independently of the derivative.
    v = np.linspace(1e-6, 0.5, 400001)
    for gamma, peak in zip(GAMMAS, oc):
        values = phi(v, gamma)
        assert abs(v[np.argmax(values)] - peak) < 5e-6
        assert phi(peak, gamma) >= values.max() - 1e-15


# ------------------------------------------------------------------------- g and γ*


def test_gradient_ratio_paper_values():
    # mukhoti2020 §4: g(0.2, 5) ≈ 1 and g(0.25, 3) ≈ 1 (the FLSD-53 schedule), γ=1 threshold p0 ≈ 0.4.
    assert gradient_ratio(0.2, 5.0) == pytest.approx(1.0, abs=0.02)
    assert gradient_ratio(0.25, 3.0) == pytest.approx(1.0, abs=0.01)
    assert tau_uc(1.0) == pytest.approx(0.4, abs=0.04)
    np.testing.assert_allclose(gradient_ratio(np.array([0.0, 1.0]), 3.0), [1.0, 0.0])


def test_gradient_ratio_equals_autograd_ratio_for_a_linear_layer():
    """Prop 1: ∂FL/∂W = g(p_y, γ) ∂CE/∂W for the last linear layer, per sample."""
    torch.manual_seed(0)
    n, features, classes = 64, 7, 5
    x = torch.randn(n, features, dtype=torch.float64)
    labels = torch.randint(classes, (n,))
    weights = (torch.randn(n, classes, features, dtype=torch.float64) * 0.8).requires_grad_(True)  # one copy per sample
    log_p = torch.log_softmax(torch.einsum("nkd,nd->nk", weights, x), dim=1)
    log_p_y = log_p[torch.arange(n), labels]
    p_y = log_p_y.exp().detach().numpy()
    for gamma in (0.5, 1.0, 3.0, 5.0):
        focal = -((1 - log_p_y.exp()) ** gamma * log_p_y).sum()
        cross_entropy = -log_p_y.sum()
        (grad_focal,) = torch.autograd.grad(focal, weights, retain_graph=True)
        (grad_ce,) = torch.autograd.grad(cross_entropy, weights, retain_graph=True)
        expected = grad_ce * torch.from_numpy(gradient_ratio(p_y, gamma))[:, None, None]
        torch.testing.assert_close(grad_focal, expected, rtol=1e-10, atol=1e-13)


def test_gamma_star_paper_value_and_defining_equation():
    assert gamma_star(0.25) == pytest.approx(3.0, abs=0.1)  # mukhoti2020: p0 = 0.25 -> γ ≈ 3
    p0 = np.array([1e-4, 0.01, 0.1, 0.2, 0.25, 0.3, 0.4, 0.45, 0.49])
    gs = gamma_star(p0)
    assert np.all(gs > 0) and np.all(np.diff(gs) < 0)
    np.testing.assert_allclose(gradient_ratio(p0, gs), 1.0, atol=1e-12)
    # Prop 2: g(p, γ*) < 1 above p0 and > 1 below.
    for p_threshold, gamma in zip(p0, gs):
        above = np.linspace(p_threshold, 1, 200)[1:]
        below = np.linspace(0, p_threshold, 200)[1:-1]
        assert np.all(gradient_ratio(above, gamma) < 1)
        assert np.all(gradient_ratio(below, gamma) > 1)
    # At p0 = 1/2 the two Lambert-W branches meet and γ* = 0; beyond it any γ >= 0 works.
    assert gamma_star(0.5) == pytest.approx(0.0, abs=1e-6)
    assert gamma_star(0.7) == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize(
    ("func", "arg", "match"),
    [
        (gamma_star, 0.0, r"p0 must lie in \(0, 1\)"),
        (gamma_star, 1.0, r"p0 must lie in \(0, 1\)"),
        (tau_oc, 0.0, r"tau_oc: gamma must be a real number in \(0, inf\) or an array of them, got 0.0"),
        (tau_uc, -1.0, r"tau_uc: gamma must be a real number in \(0, inf\) or an array of them, got -1.0"),
    ],
)
def test_scalar_functions_reject_bad_input(func, arg, match):
    with pytest.raises(ValueError, match=match):
        func(arg)


def test_phi_and_gradient_ratio_reject_bad_input():
    with pytest.raises(ValueError, match=r"v must lie in \[0, 1\]"):
        phi(1.5, 1.0)
    with pytest.raises(ValueError, match=r"gradient_ratio: gamma must be a real number in \[0, inf\)"):
        gradient_ratio(0.5, -0.5)
    with pytest.raises(ValueError, match=r"phi: gamma must be a real number in \(-1, inf\)"):
        phi(0.5, -2.0)
    with pytest.raises(ValueError, match=r"phi: gamma .* or an array of them, got array\(\[ 1., -3.\]\) \(-3.0 at index 1\)"):
        phi(0.5, np.array([1.0, -3.0]))


# ---------------------------------------------------------- binary focal calibration


def focal_calibration_reference(s, gamma, digits=700):
    """komisarenko2024 Prop 2 p̂_γ(σ(s)) and 1 - p̂, evaluated literally with many digits."""
    with mpmath.workdps(digits):
        s, gamma = mpmath.mpf(s), mpmath.mpf(gamma)
        q = 1 / (1 + mpmath.exp(-s))
        ratio = (
            ((1 - q) / q) ** gamma * ((1 - q) - gamma * q * mpmath.log(q)) / (q - gamma * (1 - q) * mpmath.log(1 - q))
        )
        fc = 1 / (1 + ratio)
        return fc, 1 - fc, mpmath.log(fc / (1 - fc))


@pytest.mark.parametrize("gamma", [-0.5, 0.5, 2.0, 10.0])
def test_binary_focal_calibration_exact_up_to_logit_50(gamma):
    logits = np.array([-50.0, -37.5, -20.0, -5.0, -0.3, 0.0, 1e-9, 0.3, 5.0, 20.0, 37.5, 50.0])
    fc = binary_focal_calibration(logits, gamma)
    fc_complement = binary_focal_calibration(-logits, gamma)
    calibrated_logit = binary_focal_calibration_logit(logits, gamma)
    for s, got, got_complement, got_logit in zip(logits, fc, fc_complement, calibrated_logit):
        ref, ref_complement, ref_logit = focal_calibration_reference(s, gamma)
        assert got == pytest.approx(float(ref), rel=1e-12, abs=0)
        assert got_complement == pytest.approx(float(ref_complement), rel=1e-12, abs=0)
        assert got_logit == pytest.approx(float(ref_logit), rel=1e-13, abs=1e-15)


@pytest.mark.parametrize("gamma", [-0.5, 0.0, 0.5, 3.0, 10.0])
def test_binary_focal_calibration_agrees_with_psi_and_is_monotone(gamma):
    s = np.linspace(-8, 8, 161)
    q = special.expit(s)
    # psi sees the rounded column 1 - q, whose own 1 - (1 - q) is off by eps/q; γ amplifies it.
    np.testing.assert_allclose(
        binary_focal_calibration(s, gamma), psi(np.column_stack([q, 1 - q]), gamma)[:, 0], rtol=1e-10
    )
    wide = np.linspace(-50, 50, 20001)
    calibrated_logit = binary_focal_calibration_logit(wide, gamma)
    assert np.all(np.isfinite(calibrated_logit)) and np.all(np.diff(calibrated_logit) > 0)
    fc = binary_focal_calibration(wide, gamma)
    assert np.all(np.diff(fc) >= 0) and np.all((fc >= 0) & (fc <= 1))
    np.testing.assert_allclose(calibrated_logit, -binary_focal_calibration_logit(-wide, gamma), rtol=1e-14, atol=1e-14)


def test_temperature_bounds_of_proposition_3():
    low, high = temperature_bounds(4.0)
    assert low == pytest.approx(0.2) and high == pytest.approx(0.238, abs=5e-4)  # K24 §3.2 text
    assert temperature_bounds(0.0) == (1.0, 1.0)
    s = np.concatenate([np.linspace(-30, -1e-3, 500), np.linspace(1e-3, 30, 500)])
    for gamma in (0.1, 0.5, 1.0, 3.0, 9.0):
        low, high = temperature_bounds(gamma)
        assert low < high
        calibrated = binary_focal_calibration_logit(s, gamma)
        # For s > 0: s/T_high < logit FC(s) < s/T_low; reversed for s < 0 (bounds in logit space).
        positive = s > 0
        assert np.all(calibrated[positive] < s[positive] / low) and np.all(calibrated[positive] > s[positive] / high)
        assert np.all(calibrated[~positive] > s[~positive] / low) and np.all(
            calibrated[~positive] < s[~positive] / high
        )


# ------------------------------------------------------------------ closest temperature


FIT_GAMMAS = np.arange(0.5, 5.01, 0.5)


def fit_inverse_temperature(num_classes, **grid):
    temperature, max_error = closest_temperature(FIT_GAMMAS, num_classes, **grid)
    slope, intercept = np.polyfit(FIT_GAMMAS, 1 / temperature, 1)
    return temperature, max_error, slope, intercept


def test_closest_temperature_binary_matches_fit_and_bounds():
    temperature, max_error, slope, intercept = fit_inverse_temperature(2, logit_step=0.01)
    # komisarenko2024 §3.2: 1/T ≈ 0.95γ + 0.85, max error around 1e-3 in probability.
    assert slope == pytest.approx(0.95, abs=0.05) and intercept == pytest.approx(0.85, abs=0.05)
    assert np.all(max_error < 1.5e-3) and max_error[0] > 1e-4
    low, high = temperature_bounds(FIT_GAMMAS)
    assert np.all((temperature >= low) & (temperature <= high))
    # The minimax claim: moving T either way makes the worst-case error larger.
    s = np.linspace(-20, 20, 4001)
    for gamma, t_best, err_best in zip(FIT_GAMMAS[::3], temperature[::3], max_error[::3]):
        fc = binary_focal_calibration(s, gamma)
        assert np.abs(special.expit(s / t_best) - fc).max() == pytest.approx(err_best, rel=1e-3)
        for factor in (0.98, 1.02):
            assert np.abs(special.expit(s / (t_best * factor)) - fc).max() > err_best


def test_closest_temperature_three_classes_matches_paper():
    temperature, max_error, slope, intercept = fit_inverse_temperature(3, logit_step=0.1)
    # komisarenko2024 §3.3: 1/T ≈ 0.64γ + 0.91; Fig 7 pairs (γ, T) = (0.5, 0.8), (2, 0.46).
    assert slope == pytest.approx(0.64, abs=0.05) and intercept == pytest.approx(0.91, abs=0.05)
    assert temperature[0] == pytest.approx(0.80, abs=0.01)
    assert temperature[3] == pytest.approx(0.46, abs=0.01)
    # Error grows with γ to ~8 % of the probability scale at γ = 9.
    assert np.all(np.diff(max_error) > 0)
    _, error_at_9 = closest_temperature(9.0, 3, logit_step=0.1)
    assert error_at_9 == pytest.approx(0.08, abs=0.01)


def test_closest_temperature_four_classes_close_to_paper_fit():
    temperature, max_error, slope, intercept = fit_inverse_temperature(4, logit_step=0.2)
    # komisarenko2024 §3.3 reports 1/T ≈ 0.47γ + 0.85. We get slope ≈ 0.49, intercept ≈ 0.95 on
    # every grid we tried (gaps 5-10, steps 0.05-0.2, four error norms): the slope agrees, the
    # intercept sits 0.1 higher (our T within 6-10.3 % of the paper's line over γ ∈ [0.5, 5]).
    assert slope == pytest.approx(0.47, abs=0.05)
    assert intercept == pytest.approx(0.85, abs=0.12)
    paper_line = 1 / (0.47 * FIT_GAMMAS + 0.85)
    assert np.all(np.abs(temperature / paper_line - 1) < 0.11)
    # The paper quotes errors "up to 8 %" for K=4; ours grow with γ from 2.7 % to 10.7 % at γ=5
    # (12.5 % at γ=9), larger than for K=3 as one more class gives the maps more room to differ.
    assert np.all(np.diff(max_error) > 0) and 0.02 < max_error[0] and max_error[-1] < 0.12
    _, error_three_classes = closest_temperature(FIT_GAMMAS[[0, -1]], 3, logit_step=0.2)
    assert np.all(max_error[[0, -1]] > error_three_classes)


def test_closest_temperature_gamma_zero_and_validation():
    assert closest_temperature(0.0, 3, logit_step=0.5) == (1.0, 0.0)
    with pytest.raises(ValueError, match="num_classes"):
        closest_temperature(1.0, 1)
    with pytest.raises(ValueError, match=r"closest_temperature: gamma must be a real number in \[0, inf\)"):
        closest_temperature(-0.5, 2)
    with pytest.raises(ValueError, match="logit_step"):
        closest_temperature(1.0, 3, logit_step=0.0)
    with pytest.raises(ValueError, match="raise logit_step"):
        closest_temperature(1.0, 10, logit_step=0.01)


@pytest.mark.parametrize(("num_classes", "gamma", "logit_step"), [(3, 2.0, 0.05), (3, 8.0, 0.05), (4, 4.0, 0.1)])
def test_closest_temperature_on_active_rows_is_the_minimax_of_every_row(num_classes, gamma, logit_step):
    """The search runs Brent on the rows with the largest errors only; the result must be the
    minimax over the whole grid: no temperature of a dense scan around it has a smaller worst
    error over all rows, and the worst error it reports is that of every row."""
    from focalcal import theory
    from focalcal.theory import temperature_search as search

    temperature, max_error = closest_temperature(gamma, num_classes, logit_step=logit_step)
    logits = search._sorted_logit_grid(num_classes, 10.0, logit_step)
    target = theory.psi_from_logits(logits, gamma)
    full = search._row_errors(target, logits, 1 / temperature).max()
    assert full == pytest.approx(max_error, rel=1e-12)
    scan = [search._row_errors(target, logits, b).max() for b in np.linspace(0.9, 1.1, 81) / temperature]
    assert min(scan) >= max_error * (1 - 1e-6)
