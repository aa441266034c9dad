"""K = 3 simplex figures (komisarenko2024 Figs 4, 5, 7): barycentric geometry, where the risk
isolines close up, where the arrows end, and the heat map against the closest-temperature error."""

import numpy as np
import pytest
from matplotlib.quiver import Quiver
from scipy import optimize, special

from focalcal import theory
from focalcal.papers.komisarenko2024 import simplex

ETA = np.array([0.55, 0.3, 0.15])


def test_barycentric_grid_covers_the_simplex_inside_the_margin():
    grid = simplex.barycentric_grid(12, margin=0.03)
    assert grid.shape == (13 * 14 // 2, 3)
    np.testing.assert_allclose(grid.sum(axis=1), 1.0)
    assert grid.min() == pytest.approx(0.01)
    assert len(np.unique(grid.round(12), axis=0)) == len(grid)
    inside = simplex.interior_grid(6)
    assert len(inside) == 10 and inside.min() == pytest.approx(1 / 6)


def test_to_cartesian_maps_corners_and_centre():
    xy = simplex.to_cartesian(np.vstack([np.eye(3), np.full((1, 3), 1 / 3)]))
    np.testing.assert_allclose(xy[:3], simplex.CORNERS)
    np.testing.assert_allclose(xy[3], simplex.CORNERS.mean(axis=0))
    with pytest.raises(ValueError, match=r"\(M, 3\)"):
        simplex.to_cartesian(np.ones((2, 4)) / 4)


def test_conditional_risk_brier_and_cross_entropy_match_their_definitions():
    q = simplex.barycentric_grid(5)
    one_hot = np.eye(3)
    brier = sum(ETA[i] * ((q - one_hot[i]) ** 2).sum(axis=1) for i in range(3))
    np.testing.assert_allclose(simplex.conditional_risk(ETA, q, "brier"), brier)
    np.testing.assert_allclose(simplex.conditional_risk(ETA, q, "cross_entropy"), -(np.log(q) * ETA).sum(axis=1))
    with pytest.raises(ValueError, match="loss must be"):
        simplex.conditional_risk(ETA, q, "hinge")


def test_properized_focal_risk_is_minimised_at_eta_and_plain_focal_risk_at_q_star():
    # Independent minimisation over the simplex (softmax parametrisation), not on the figure's grid.
    def minimiser(properized):
        def risk(u):
            return simplex.conditional_risk(ETA, special.softmax(np.append(u, 0.0))[None, :], "focal", 3.0,
                                            properized=properized)[0]
        return special.softmax(np.append(optimize.minimize(risk, np.zeros(2), method="Nelder-Mead",
                                                           options={"xatol": 1e-9, "fatol": 1e-12}).x, 0.0))

    np.testing.assert_allclose(minimiser(True), ETA, atol=1e-4)
    np.testing.assert_allclose(minimiser(False), theory.focal_risk_minimizer(ETA, 3.0), atol=1e-4)


def _innermost_centre(ax):
    contour = next(c for c in ax.collections if hasattr(c, "levels"))
    vertices = contour.get_paths()[0].vertices  # lowest level: the innermost isoline
    return vertices.mean(axis=0), contour.levels


@pytest.mark.parametrize("properized", [True, False])
def test_isolines_close_around_the_risk_minimiser(properized):
    figure = simplex.conditional_risk_isolines_figure(ETA, gammas=(3.0,), subdivisions=90, properized=properized)
    panels = [ax for ax in figure.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels][:2] == ["Brier score", "cross-entropy"]
    assert len(panels) == 3
    eta_xy = simplex.to_cartesian(ETA[None, :])[0]
    for ax in panels[:2]:  # proper losses: centred on η
        centre, levels = _innermost_centre(ax)
        assert len(levels) == 3
        assert np.linalg.norm(centre - eta_xy) < 0.03
    centre, levels = _innermost_centre(panels[2])
    target = ETA if properized else theory.focal_risk_minimizer(ETA, 3.0)
    assert np.linalg.norm(centre - simplex.to_cartesian(target[None, :])[0]) < 0.03
    if not properized:  # the plain focal minimiser q*(η) is visibly away from η
        assert np.linalg.norm(centre - eta_xy) > 0.08
    # Levels are the 3/12/20 % percentiles of the risk over the figure's grid.
    grid = simplex.barycentric_grid(90)
    risk = simplex.conditional_risk(ETA, grid, "focal", 3.0, properized=properized)
    np.testing.assert_allclose(levels, np.percentile(risk, [3, 12, 20]))


def test_isolines_reject_bad_eta():
    with pytest.raises(ValueError, match="eta"):
        simplex.conditional_risk_isolines_figure((0.5, 0.6, -0.1))


def test_arrow_map_ends_at_the_focal_map_and_at_temperature_scaling():
    figure = simplex.calibration_arrows_figure(gammas=(1.0, 3.0), temperatures=(0.66, 0.36), subdivisions=6)
    starts = simplex.interior_grid(6)
    start_xy = simplex.to_cartesian(starts)
    _top_left, top_right, _bottom_left, bottom_right = figure.axes[:4]
    for ax, image in ((top_right, theory.psi(starts, 3.0)), (bottom_right, simplex.temperature_scale_probs(starts, 0.36))):
        (quiver,) = [c for c in ax.collections if isinstance(c, Quiver)]
        np.testing.assert_allclose(quiver.X, start_xy[:, 0])
        ends = np.column_stack([quiver.X + quiver.U, quiver.Y + quiver.V])
        np.testing.assert_allclose(ends, simplex.to_cartesian(image), atol=1e-12)
    # Temperature scaling by hand: q_i^{1/T} / Σ_j q_j^{1/T}.
    by_hand = starts ** (1 / 0.36) / (starts ** (1 / 0.36)).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(simplex.temperature_scale_probs(starts, 0.36), by_hand)
    # K24 Prop 5: the focal map never lowers the top probability.
    assert np.all(theory.psi(starts, 1.0).max(axis=1) >= starts.max(axis=1) - 1e-12)
    assert "T = 0.36" in bottom_right.get_title()


def test_arrow_map_computes_closest_temperatures_when_not_given():
    figure = simplex.calibration_arrows_figure(gammas=(0.5,), subdivisions=4, logit_step=0.1)
    temperature, _ = theory.closest_temperature(0.5, 3, logit_step=0.1)
    assert f"T = {temperature:.2f}" in figure.axes[1].get_title()
    with pytest.raises(ValueError, match="temperatures"):
        simplex.calibration_arrows_figure(gammas=(1.0, 2.0), temperatures=(0.5,))


def test_difference_heat_map_peaks_at_the_closest_temperature_error():
    temperature, error = theory.closest_temperature(2.0, 3, logit_step=0.05)
    figure = simplex.calibration_difference_figure(gammas=(2.0,), temperatures=(temperature,), subdivisions=60)
    (mesh,) = [c for c in figure.axes[0].collections if c.get_array() is not None]
    values = np.asarray(mesh.get_array())
    grid = simplex.barycentric_grid(60)
    np.testing.assert_allclose(values, simplex.map_difference(grid, 2.0, temperature))
    # The simplex grid lies inside the logit range the minimax error was computed over, so its
    # largest difference is that error, up to the resolution of the two grids.
    assert values.max() == pytest.approx(error, rel=0.02)
    centre = np.argmin(np.abs(grid - 1 / 3).sum(axis=1))
    assert values[centre] < 1e-12  # uniform is a fixed point of both maps


def test_difference_statistic_top_class_is_signed_and_bad_statistic_rejected():
    grid = simplex.barycentric_grid(20)
    signed = simplex.map_difference(grid, 2.0, 0.46, "top_class")
    assert signed.min() < 0 < signed.max()
    assert np.all(np.abs(signed) <= simplex.map_difference(grid, 2.0, 0.46) + 1e-15)
    with pytest.raises(ValueError, match="statistic"):
        simplex.map_difference(grid, 2.0, 0.46, "mean")
