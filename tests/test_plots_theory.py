"""Theory figures (each paper's ``theory`` module in focalcal.papers): the drawn curves are checked against
independent computations (risk minimisation, logit-space maps, probability-space scans,
autograd through the training losses), not against the code that drew them."""

import re

import numpy as np
import pytest
import torch
from scipy import special

from focalcal import losses, theory
from focalcal.papers.charoenphakdee2021 import theory_figures as c21
from focalcal.papers.hossain2021 import theory_figures as h21
from focalcal.papers.komisarenko2024 import theory_figures as k24
from focalcal.papers.mukhoti2020 import theory_figures as m20
from focalcal.plots import style


def _lines_with_label(ax, label):
    return [line for line in ax.get_lines() if line.get_label() == label]


def _texts(figure):
    return [text.get_text() for ax in figure.axes for text in ax.texts]


def test_phi_figure_marks_tau_oc_and_tau_uc_where_the_curve_peaks_and_crosses_one():
    figure = c21.phi_figure(gammas=(1.0, 3.0), highlight_gamma=3.0, n_points=4001)
    ax = figure.axes[0]
    vertical = {line.get_gid(): line.get_xdata()[0] for line in ax.get_lines() if line.get_gid()}
    assert vertical["tau_oc"] == pytest.approx(float(theory.tau_oc(3.0)), abs=1e-12)
    assert vertical["tau_uc"] == pytest.approx(float(theory.tau_uc(3.0)), abs=1e-12)
    # The highlighted curve itself: its maximum sits at τ_oc, it crosses 1 (from above) at τ_uc.
    (curve,) = _lines_with_label(ax, "γ = 3")
    v, y = curve.get_xdata(), curve.get_ydata()
    step = v[1] - v[0]
    assert abs(v[np.argmax(y)] - vertical["tau_oc"]) <= step
    after_peak = np.flatnonzero((v > vertical["tau_oc"]) & (y < 1.0))[0]
    assert abs(v[after_peak] - vertical["tau_uc"]) <= step
    assert len(_lines_with_label(ax, "γ = 1")) == 1
    assert "charoenphakdee2021 Fig. 1" in figure.get_suptitle()


def test_posterior_vs_minimizer_binary_is_underconfident_and_k1000_has_overconfident_points():
    figure = c21.posterior_vs_minimizer_figure(gammas=(0.5, 3.0), num_classes=(2, 1000), n_points=120)
    binary, many, zoom = figure.axes[:3]
    for label, gamma in (("γ = 0.5", 0.5), ("γ = 3", 3.0)):
        (line,) = _lines_with_label(binary, label)
        eta_max, q_max = line.get_xdata(), line.get_ydata()
        # Independent: minimise the focal risk for η = (η_max, 1 - η_max) and read off max q*.
        q_star = theory.focal_risk_minimizer(np.column_stack([eta_max, 1 - eta_max]), gamma).max(axis=1)
        np.testing.assert_allclose(q_max, q_star, atol=1e-9)
        interior = (eta_max > 0.5 + 1e-6) & (eta_max < 1 - 1e-6)
        assert np.all(q_max[interior] < eta_max[interior])  # C21 Cor. 10
    (line,) = _lines_with_label(many, "γ = 0.5")
    assert np.any(line.get_ydata() > line.get_xdata() + 1e-3)  # η-overconfident somewhere (C21 Fig 2b)
    assert any(np.any(line.get_ydata() > 1e-3) for line in zoom.get_lines())


def test_posterior_vs_minimizer_rejects_one_class():
    with pytest.raises(ValueError, match="num_classes"):
        c21.minimizer_family(1)


def test_focal_calibration_map_figure_proper_part_is_proper_and_map_matches_logit_form():
    figure = k24.focal_calibration_map_figure(loss_gammas=(3.0,), map_gammas=(-0.5, 2.0), n_points=399)
    left, right = figure.axes[:2]
    (proper,) = _lines_with_label(left, "proper part, γ = 3")
    q, loss_positive = proper.get_xdata(), proper.get_ydata()
    # Binary properness: R(p, q) = p L*(q) + (1 - p) L*(1 - q) is minimised at q = p. The grid is
    # symmetric, so L*(1 - q) is the reversed curve.
    for p in (0.2, 0.5, 0.7, 0.9):
        risk = p * loss_positive + (1 - p) * loss_positive[::-1]
        assert abs(q[np.argmin(risk)] - p) <= 1.5 * (q[1] - q[0])
    # The plain focal loss is not proper: its minimiser for p = 0.8 is ≈ 0.62 for γ = 2 (K24 §3.1)
    # and lower for γ = 3.
    (focal,) = _lines_with_label(left, "focal, γ = 3")
    f = focal.get_ydata()
    assert q[np.argmin(0.8 * f + 0.2 * f[::-1])] < 0.7
    # Right panel against the logit-space implementation of the same map.
    for label, gamma in (("γ = -0.5", -0.5), ("γ = 2", 2.0)):
        (line,) = _lines_with_label(right, label)
        x = line.get_xdata()
        expected = theory.binary_focal_calibration(special.logit(x), gamma)
        np.testing.assert_allclose(line.get_ydata(), expected, atol=1e-10)
    (negative,) = _lines_with_label(right, "γ = -0.5")
    above_half = negative.get_xdata() > 0.55
    assert np.all(negative.get_ydata()[above_half] < negative.get_xdata()[above_half])  # inverse sigmoid


def _fit_from_text(figure):
    text = next(t for t in _texts(figure) if t.startswith("fit:"))
    slope, intercept = map(float, re.search(r"1/T ≈ ([-\d.]+)·γ \+ ([-\d.]+)", text).groups())
    return slope, intercept


def test_closest_temperature_figure_binary_prints_the_papers_linear_fit():
    figure = k24.closest_temperature_figure(2, np.linspace(0.0, 10.0, 11), logit_step=0.01)
    slope, intercept = _fit_from_text(figure)
    assert abs(slope - 0.95) < 0.1 and abs(intercept - 0.85) < 0.1  # K24 Fig 2
    assert len(figure.axes) == 3
    # Panel (c): each closest TS curve stays within the minimax error of its focal map.
    curves = figure.axes[2].get_lines()
    assert len(curves) == 4
    for focal_line, ts_line in zip(curves[::2], curves[1::2]):
        assert np.max(np.abs(focal_line.get_ydata() - ts_line.get_ydata())) < 2e-3
    # Panel (b): γ = 0 is the identity map (error 0); the error is < 1e-3-ish everywhere (K24 §3.2).
    errors = figure.axes[1].get_lines()[0].get_ydata()
    assert errors[0] == 0.0 and errors.max() < 2e-3


def test_closest_temperature_figure_three_classes_fit_near_paper():
    figure = k24.closest_temperature_figure(3, np.linspace(0.0, 9.0, 7), logit_step=0.1)
    slope, intercept = _fit_from_text(figure)
    assert abs(slope - 0.64) < 0.1 and abs(intercept - 0.91) < 0.1  # K24 Fig 6
    assert len(figure.axes) == 2
    assert "komisarenko2024 Fig. 6" in figure.get_suptitle()


def test_closest_temperature_figure_needs_two_gammas():
    with pytest.raises(ValueError, match="two values"):
        k24.closest_temperature_figure(2, [1.0])


def test_numerical_temperature_bounds_match_a_probability_space_scan_and_the_paper():
    low, high = k24.numerical_temperature_bounds([4.0])
    theory_low, theory_high = theory.temperature_bounds(4.0)
    assert theory_low <= low[0] < high[0] <= theory_high
    assert high[0] == pytest.approx(0.218, abs=1e-3)  # K24 §3.2: numerical upper bound for γ = 4
    # Independent scan as in the paper: the smallest T on a 0.001 grid whose TS map lies at or
    # below the focal map for every logit in (0, 20] (probability space, where they can be told apart).
    s = np.arange(1, 20001) * 1e-3
    focal = theory.binary_focal_calibration(s, 4.0)
    temperatures = np.arange(0.150, 0.300, 0.001)
    below = np.array([np.all(special.expit(s / t) <= focal + 1e-15) for t in temperatures])
    assert temperatures[below].min() == pytest.approx(high[0], abs=1.5e-3)


def test_temperature_bounds_figure_draws_theory_and_numerical_bounds():
    gammas = np.array([0.5, 1.0, 4.0])
    figure = k24.temperature_bounds_figure(gammas, logit_step=1e-2)
    left, right = figure.axes[:2]
    assert len(left.get_lines()) == 4 and len(right.get_lines()) == 2
    theory_low, theory_high = theory.temperature_bounds(gammas)
    np.testing.assert_allclose(left.get_lines()[0].get_ydata(), theory_low)
    np.testing.assert_allclose(left.get_lines()[1].get_ydata(), theory_high)
    numeric_width = right.get_lines()[1].get_ydata()
    assert np.all(numeric_width < theory_high - theory_low)  # numerical bounds are tighter (K24 Fig 3)


def test_gradient_ratio_figure_crossings_agree_with_gamma_star():
    figure = m20.gradient_ratio_figure(gammas=(1.0, 3.0, 5.0), n_points=20001)
    left, right = figure.axes[:2]
    for gamma in (1.0, 3.0, 5.0):
        (line,) = _lines_with_label(left, f"γ = {gamma:g}")
        p, g = line.get_xdata(), line.get_ydata()
        crossing = p[np.flatnonzero((p > 0.01) & (g < 1.0))[0]]  # first p0 with g(p0, γ) < 1
        assert float(theory.gamma_star(crossing)) == pytest.approx(gamma, rel=0.02)
    # M20 §4: g(0.2, 5) ≈ 1 and g(0.25, 3) ≈ 1, the FLSD-53 schedule's points, lie on the γ* curve.
    (curve,) = _lines_with_label(right, "γ*(p0)")
    for p0, gamma in ((0.2, 5.0), (0.25, 3.0)):
        assert np.interp(p0, curve.get_xdata(), curve.get_ydata()) == pytest.approx(gamma, rel=0.05)


@pytest.mark.parametrize("name", ["cross_entropy", "dual_cross_entropy", "focal", "dual_focal"])
def test_loss_derivative_closed_forms_agree_with_autograd_through_the_training_losses(name):
    # Through softmax only differences of ∂L/∂z are identified: for K = 2, u = (log z, log(1-z)),
    # target 0, ∂L/∂u_k = z_k (d_k - Σ_j z_j d_j), so g_0/z_0 - g_1/z_1 = d_{y=1}(z) - d_{y=0}(1 - z).
    z = np.linspace(0.02, 0.98, 49)
    config = {"name": name, "reduction": "sum", **({"gamma": 1.0} if name == "focal" else {})}
    logits = torch.tensor(np.column_stack([np.log(z), np.log1p(-z)]), requires_grad=True)
    loss = losses.build(config)(logits, torch.zeros(len(z), dtype=torch.long))
    (grad,) = torch.autograd.grad(loss, logits)
    grad = grad.numpy()
    from_autograd = grad[:, 0] / z - grad[:, 1] / (1 - z)
    closed = h21.loss_derivatives(z, 1)[name] - h21.loss_derivatives(1 - z, 0)[name]
    np.testing.assert_allclose(from_autograd, closed, rtol=1e-9, atol=1e-9)


def test_loss_derivatives_figure_shows_dfl_steeper_than_ce_and_autograd_panel():
    figure = h21.loss_derivatives_figure(n_points=200)
    positive, negative, logit_panel = figure.axes[:3]
    (dfl,) = _lines_with_label(positive, "DFL")
    (ce,) = _lines_with_label(positive, "CE")
    assert np.all(np.abs(dfl.get_ydata()) > np.abs(ce.get_ydata()))  # H21 §3.4: DFL always larger than CE
    (dfl_negative,) = _lines_with_label(negative, "DFL")
    assert np.all(np.diff(dfl_negative.get_ydata()) > 0)  # grows as a negative class's z -> 1 (H21 Fig 1b)
    (ce_logit,) = _lines_with_label(logit_panel, "CE")
    np.testing.assert_allclose(ce_logit.get_ydata(), ce_logit.get_xdata() - 1.0, atol=1e-12)  # ∂CE/∂u_y = z_y - 1
    assert len(logit_panel.get_lines()) == 4


def test_loss_derivatives_rejects_bad_input():
    with pytest.raises(ValueError, match="target"):
        h21.loss_derivatives([0.5], 2)
    with pytest.raises(ValueError, match="open interval"):
        h21.loss_derivatives([0.0, 0.5], 1)


def test_theory_figures_save_to_png(tmp_path):
    path = style.save(c21.phi_figure(n_points=200), tmp_path / "sub" / "phi.png")
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 10_000


THEORY_FIGURES = {  # cheap settings; the default labels, titles and legends of each figure
    "phi": lambda: c21.phi_figure(n_points=201),
    "posterior_vs_minimizer": lambda: c21.posterior_vs_minimizer_figure(n_points=60),
    "focal_calibration_map": lambda: k24.focal_calibration_map_figure(n_points=101),
    "closest_temperature_k2": lambda: k24.closest_temperature_figure(2, np.linspace(0.0, 10.0, 6), logit_step=0.05),
    "closest_temperature_k3": lambda: k24.closest_temperature_figure(3, np.linspace(0.0, 9.0, 4), logit_step=0.2),
    "temperature_bounds": lambda: k24.temperature_bounds_figure(np.linspace(0.5, 5.0, 4), logit_step=0.05),
    "gradient_ratio": lambda: m20.gradient_ratio_figure(n_points=201),
    "binary_optimum": lambda: m20.binary_optimum_figure(n_points=41),
}


@pytest.mark.parametrize("name", sorted(THEORY_FIGURES))
def test_theory_figures_leave_no_title_or_label_cut_at_the_edges(name):
    figure = THEORY_FIGURES[name]()
    assert style.clipped_texts(figure) == []


def test_binary_optimum_matches_a_bounded_scalar_search_of_eq5():
    from scipy.optimize import minimize_scalar

    def expected_focal_loss(x, q, gamma):  # mukhoti2020 Eq 5, written out
        return -q * (1 - x) ** gamma * np.log(x) - (1 - q) * x ** gamma * np.log1p(-x)

    for gamma in (1.0, 2.0, 3.0, 5.0):
        for q in (0.05, 0.3, 0.6, 0.9, 0.99):
            found = minimize_scalar(expected_focal_loss, bounds=(1e-12, 1 - 1e-12), args=(q, gamma), method="bounded",
                                    options={"xatol": 1e-13})
            assert m20.binary_optimum(q, gamma) == pytest.approx(found.x, abs=1e-7)


def test_binary_optimum_is_q_for_cross_entropy_and_more_entropic_for_focal_loss():
    q = np.linspace(0.01, 0.99, 99)
    np.testing.assert_allclose(m20.binary_optimum(q, 0.0), q, rtol=0, atol=1e-15)
    previous = np.abs(q - 0.5)
    for gamma in (1.0, 2.0, 3.0, 5.0):
        p_hat = m20.binary_optimum(q, gamma)
        distance = np.abs(p_hat - 0.5)
        off_centre = np.abs(q - 0.5) > 1e-9
        assert (distance[off_centre] < previous[off_centre]).all()  # closer to 1/2 than at the smaller γ
        assert ((p_hat - 0.5) * (q - 0.5) >= 0).all()  # but on the same side as q
        np.testing.assert_allclose(p_hat + p_hat[::-1], 1.0, atol=1e-12)  # symmetric about q = 1/2
        previous = distance
