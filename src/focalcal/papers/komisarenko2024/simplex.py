"""komisarenko2024's figures on the K = 3 probability simplex, drawn as a triangle: Figs 4, 5 and 7.

A probability vector (q1, q2, q3) is drawn at q1·A + q2·B + q3·C for the corners
A = (0, 0) (class 1), B = (1, 0) (class 2), C = (1/2, √3/2) (class 3). Grids are barycentric
lattices {(i, j, k)/n : i + j + k = n}, pulled towards the centre by ``margin`` so that no
point has a zero coordinate (log-losses and log-temperature scaling stay finite).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.tri import Triangulation
from scipy import special

from focalcal import theory
from focalcal.plots.figure_arguments import check_gammas
from focalcal.plots.style import color_for, gamma_color, new_figure, paper_title, styled

CORNERS = np.array([[0.0, 0.0], [1.0, 0.0], [0.5, np.sqrt(3.0) / 2.0]])


def barycentric_grid(subdivisions: int, *, margin: float = 1e-3) -> np.ndarray:
    """All (i, j, k)/n with i + j + k = n, shrunk towards the centre: (1 − margin)·g + margin/3.

    Returns (M, 3) rows on the simplex, M = (n + 1)(n + 2)/2.
    """
    if isinstance(subdivisions, bool) or not isinstance(subdivisions, (int, np.integer)) or subdivisions < 1:
        raise ValueError(f"subdivisions must be a positive integer, got {subdivisions!r}")
    if not 0.0 <= margin < 1.0:
        raise ValueError(f"margin must lie in [0, 1), got {margin!r}")
    n = int(subdivisions)
    i, j = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    keep = i + j <= n
    lattice = np.column_stack([i[keep], j[keep], n - i[keep] - j[keep]]) / n
    return (1.0 - margin) * lattice + margin / 3.0


def interior_grid(subdivisions: int) -> np.ndarray:
    """Lattice points strictly inside the triangle, (i, j, k)/n with i, j, k >= 1 (arrow starts)."""
    if isinstance(subdivisions, bool) or not isinstance(subdivisions, (int, np.integer)) or subdivisions < 3:
        raise ValueError(f"subdivisions must be an integer >= 3, got {subdivisions!r}")
    lattice = barycentric_grid(subdivisions, margin=0.0)
    return lattice[(lattice > 1e-12).all(axis=1)]


def to_cartesian(probs) -> np.ndarray:
    """(M, 3) simplex points -> (M, 2) triangle coordinates."""
    probs = np.asarray(probs, dtype=np.float64)
    if probs.ndim != 2 or probs.shape[1] != 3:
        raise ValueError(f"probs must have shape (M, 3), got {probs.shape}")
    return probs @ CORNERS


def draw_triangle(ax, labels: Sequence[str] = ("class 1", "class 2", "class 3")) -> None:
    """Triangle outline, corner labels, no axes frame, equal aspect."""
    outline = np.vstack([CORNERS, CORNERS[:1]])
    ax.plot(outline[:, 0], outline[:, 1], color="0.2", lw=1)
    offsets = [(-0.04, -0.05, "right"), (0.04, -0.05, "left"), (0.0, 0.04, "center")]
    for (x, y), (dx, dy, ha), label in zip(CORNERS, offsets, labels):
        ax.text(x + dx, y + dy, label, ha=ha, va="center", fontsize=9)
    ax.set(xlim=(-0.12, 1.12), ylim=(-0.1, 0.95), aspect="equal")
    ax.axis("off")


def _triangulation(probs: np.ndarray) -> Triangulation:
    xy = to_cartesian(probs)
    return Triangulation(xy[:, 0], xy[:, 1])


def temperature_scale_probs(probs, temperature: float) -> np.ndarray:
    """softmax(log q / T): temperature scaling applied to probabilities (q has no zeros)."""
    return special.softmax(np.log(np.asarray(probs, dtype=np.float64)) / temperature, axis=1)


def _closest_temperatures(gammas, temperatures, max_logit_gap, logit_step) -> np.ndarray:
    if temperatures is not None:
        temperatures = np.atleast_1d(np.asarray(temperatures, dtype=np.float64))
        if temperatures.shape != gammas.shape or np.any(~np.isfinite(temperatures)) or np.any(temperatures <= 0):
            raise ValueError(f"temperatures must be positive, one per gamma ({gammas.size}), got {temperatures.tolist()}")
        return temperatures
    found, _ = theory.closest_temperature(gammas, 3, max_logit_gap=max_logit_gap, logit_step=logit_step)
    return np.atleast_1d(found)


# ------------------------------------------------------------------------------ K24 Fig 4


def conditional_risk(eta, q, loss: str, gamma: float = 0.0, *, properized: bool = True) -> np.ndarray:
    """Conditional risk R(η, q) = Σ_i η_i L(q, e_i) of each row of ``q`` (M, 3) for one η.

    ``loss``: "brier" (Σ_i η_i ‖q − e_i‖²), "cross_entropy" (−Σ η_i log q_i) or "focal". For
    "focal" with ``properized`` (K24 Fig 4) the loss is the proper part L*(q) = L(p̂^{-1}(q)),
    p̂^{-1} = the focal risk minimiser, so R is minimal at q = η; without it, the plain focal
    risk W(q; η) of C21 Eq 7, minimal at q*(η).
    """
    eta = np.asarray(eta, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if loss == "brier":
        return (q**2).sum(axis=1) - 2 * q @ eta + 1.0
    if loss == "cross_entropy":
        return -(np.log(q) @ eta)
    if loss == "focal":
        preimage = theory.focal_risk_minimizer(q, gamma) if properized else q
        with np.errstate(divide="ignore"):
            return -((1.0 - preimage) ** gamma * np.log(preimage)) @ eta
    raise ValueError(f"loss must be 'brier', 'cross_entropy' or 'focal', got {loss!r}")


@styled
def conditional_risk_isolines_figure(eta: Sequence[float] = (0.55, 0.3, 0.15), gammas: Sequence[float] = (1.0, 3.0), *,
                                     percentiles: Sequence[float] = (3, 12, 20), subdivisions: int = 150,
                                     properized: bool = True):
    """K24 Fig 4: isolines of the conditional risk over q ∈ Δ³ for a fixed ground truth η —
    Brier score, cross-entropy and the (properized) focal loss for each γ. The levels are the
    given percentiles of the risk over the grid; a star marks η, a cross the grid minimiser.
    ``properized=False`` draws the plain focal risk W(q; η), whose minimum sits at q*(η) ≠ η.
    """
    eta = np.asarray(eta, dtype=np.float64)
    if eta.shape != (3,) or np.any(eta <= 0) or abs(eta.sum() - 1) > 1e-9:
        raise ValueError(f"eta must be 3 positive probabilities summing to 1, got {eta.tolist()}")
    gammas = check_gammas(gammas, owner="conditional_risk_isolines_figure")
    percentiles = np.sort(np.asarray(percentiles, dtype=np.float64))
    if percentiles.size == 0 or np.any((percentiles <= 0) | (percentiles >= 100)):
        raise ValueError(f"percentiles must lie in (0, 100), got {percentiles.tolist()}")
    grid = barycentric_grid(subdivisions)
    triangulation = _triangulation(grid)
    focal_name = "proper part of focal" if properized else "focal"
    panels = [("Brier score", "brier", 0.0), ("cross-entropy", "cross_entropy", 0.0)]
    panels += [(f"{focal_name}, γ = {g:g}", "focal", g) for g in gammas]
    ncols = min(len(panels), 2)
    nrows = -(-len(panels) // ncols)
    figure, axes = new_figure(nrows, ncols, width=7.0, height=3.1 * nrows + 0.8)
    star = to_cartesian(eta[None, :])[0]
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, (title, loss, gamma) in zip(axes.flat, panels):
        risk = conditional_risk(eta, grid, loss, gamma, properized=properized)
        levels = np.percentile(risk, percentiles)
        colour = gamma_color(gamma) if loss == "focal" else color_for(loss)
        ax.tricontour(triangulation, risk, levels=levels, colors=[colour], linewidths=np.linspace(2.2, 1.0, len(levels)))
        draw_triangle(ax)
        best = to_cartesian(grid[np.argmin(risk)][None, :])[0]
        ax.plot(*star, marker="*", ms=11, color="0.1", ls="none", label="η")
        ax.plot(*best, marker="x", ms=7, mew=2, color=colour, ls="none", label="grid minimiser")
        ax.set_title(title, fontsize=10)
    figure.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside lower center", ncols=2, fontsize=9)
    levels_text = ", ".join(f"{p:g}%" for p in percentiles)
    paper_title(figure, f"Conditional-risk isolines (percentiles {levels_text}) for η = {tuple(eta.round(3).tolist())}",
                "komisarenko2024 Fig. 4")
    return figure


# ------------------------------------------------------------------------------ K24 Fig 5


def _arrows(ax, starts: np.ndarray, ends: np.ndarray, colour: str) -> None:
    start_xy, end_xy = to_cartesian(starts), to_cartesian(ends)
    delta = end_xy - start_xy
    ax.quiver(start_xy[:, 0], start_xy[:, 1], delta[:, 0], delta[:, 1], angles="xy", scale_units="xy", scale=1,
              color=colour, width=0.006, headwidth=3.5, headlength=4)


@styled
def calibration_arrows_figure(gammas: Sequence[float] = (1.0, 3.0), *, temperatures: Sequence[float] | None = None,
                              subdivisions: int = 10, max_logit_gap=None, logit_step=None):
    """K24 Fig 5: the focal calibration map Ψ^γ (top row) and the temperature scaling closest to
    it (bottom row) as arrows from q to its image, over a uniform grid of Δ³.

    ``temperatures`` default to :func:`focalcal.theory.closest_temperature` for K = 3
    (``max_logit_gap``/``logit_step`` are passed on).
    """
    gammas = check_gammas(gammas, owner="calibration_arrows_figure")
    temperatures = _closest_temperatures(gammas, temperatures, max_logit_gap, logit_step)
    starts = interior_grid(subdivisions)
    figure, axes = new_figure(2, len(gammas), width=min(9.0, 3.6 * len(gammas) + 0.6), height=6.6)
    for column, (gamma, temperature) in enumerate(zip(gammas, temperatures)):
        top, bottom = axes[0, column], axes[1, column]
        _arrows(top, starts, theory.psi(starts, gamma), gamma_color(gamma))
        draw_triangle(top)
        top.set_title(f"focal calibration, γ = {gamma:g}", fontsize=10)
        _arrows(bottom, starts, temperature_scale_probs(starts, temperature), color_for("temperature_scaling"))
        draw_triangle(bottom)
        bottom.set_title(f"temperature scaling, T = {temperature:.2f}", fontsize=10)
    paper_title(figure, "Focal calibration vs its closest temperature scaling on the simplex", "komisarenko2024 Fig. 5")
    return figure


# ------------------------------------------------------------------------------ K24 Fig 7


def map_difference(probs, gamma: float, temperature: float, statistic: str = "max_abs") -> np.ndarray:
    """Per-point difference TS(q) − Ψ^γ(q): its largest absolute coordinate ("max_abs", the
    quantity the closest temperature minimises) or the signed difference of the predicted class's
    probability ("top_class", > 0 where TS is the more confident)."""
    ts = temperature_scale_probs(probs, temperature)
    fc = theory.psi(probs, gamma)
    if statistic == "max_abs":
        return np.abs(ts - fc).max(axis=1)
    if statistic == "top_class":
        top = np.argmax(probs, axis=1)
        rows = np.arange(len(top))
        return ts[rows, top] - fc[rows, top]
    raise ValueError(f"statistic must be 'max_abs' or 'top_class', got {statistic!r}")


@styled
def calibration_difference_figure(gammas: Sequence[float] = (0.5, 2.0), *, temperatures: Sequence[float] | None = None,
                                  subdivisions: int = 120, statistic: str = "max_abs", max_logit_gap=None,
                                  logit_step=None):
    """K24 Fig 7: heat map over Δ³ of temperature scaling minus focal calibration for (γ, closest
    T) pairs (the paper's pairs are (0.5, 0.8) and (2, 0.46)). See :func:`map_difference`.
    """
    gammas = check_gammas(gammas, owner="calibration_difference_figure")
    temperatures = _closest_temperatures(gammas, temperatures, max_logit_gap, logit_step)
    grid = barycentric_grid(subdivisions)
    triangulation = _triangulation(grid)
    values = [map_difference(grid, g, t, statistic) for g, t in zip(gammas, temperatures)]
    figure, axes = new_figure(1, len(gammas), width=min(9.0, 4.0 * len(gammas) + 0.8), height=3.8)
    if statistic == "max_abs":
        cmap, vmin, vmax = "magma_r", 0.0, max(float(v.max()) for v in values)
        label = "max_i |TS_i(q) − Ψ_i(q)|"
    else:
        bound = max(float(np.abs(v).max()) for v in values)
        cmap, vmin, vmax = "RdBu_r", -bound, bound
        label = "TS − Ψ, predicted class"
    for ax, gamma, temperature, value in zip(axes[0], gammas, temperatures, values):
        mesh = ax.tripcolor(triangulation, value, shading="gouraud", cmap=cmap, vmin=vmin, vmax=vmax)
        draw_triangle(ax)
        ax.set_title(f"γ = {gamma:g}, T = {temperature:.2f}", fontsize=10)
    figure.colorbar(mesh, ax=list(axes[0]), shrink=0.8, label=label + " (probability)")
    paper_title(figure, "Temperature scaling minus focal calibration over the simplex", "komisarenko2024 Fig. 7")
    return figure
