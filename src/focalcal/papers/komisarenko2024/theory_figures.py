"""komisarenko2024's theory figures, exact curves from :mod:`focalcal.theory`: Fig 1 (the focal
calibration map), Figs 2 and 6 and §3.3 (the closest temperature against γ), Fig 3 (Prop 3's
bounds); Figs 4, 5 and 7 are drawn on the K = 3 simplex by :mod:`.simplex`. Every
function returns a Figure and writes nothing."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import special

from focalcal import theory
from focalcal.core.constraints import PSI_GAMMA
from focalcal.papers.komisarenko2024.simplex import (  # noqa: F401 (Figs 5, 7, 4)
    calibration_arrows_figure,
    calibration_difference_figure,
    conditional_risk_isolines_figure,
)
from focalcal.plots.figure_arguments import check_gammas, check_points, gamma_label
from focalcal.plots.style import CLASS_COLORS, color_for, corner_text, gamma_color, new_figure, paper_title, styled

# The linear fits 1/T ≈ slope·γ + intercept that K24 prints (Fig 2: K = 2, Fig 6: K = 3, §3.3: K = 4).
PAPER_TEMPERATURE_FITS = {2: (0.95, 0.85), 3: (0.64, 0.91), 4: (0.47, 0.85)}


# ------------------------------------------------------------------------------ K24 Fig 1


def _focal_loss_positive(q: np.ndarray, gamma: float) -> np.ndarray:
    """-(1-q)^γ log q on the positive instance (γ = 0: cross-entropy)."""
    with np.errstate(divide="ignore"):
        return -np.power(1.0 - q, gamma) * np.log(q)


def proper_focal_loss_positive(q, gamma: float) -> np.ndarray:
    """The proper part of the binary focal loss on a positive, L*(q, 1) = L(p̂_γ^{-1}(q), 1) (K24 §3.2).

    p̂_γ is the focal calibration map, so its inverse is the binary focal risk minimiser:
    p̂_γ^{-1}(q) = ``theory.focal_risk_minimizer([q, 1-q], γ)[:, 0]``.
    """
    q = np.asarray(q, dtype=np.float64)
    inverse = theory.focal_risk_minimizer(np.column_stack([q, 1.0 - q]), gamma)[:, 0]
    return _focal_loss_positive(inverse, gamma)


@styled
def focal_calibration_map_figure(loss_gammas: Sequence[float] = (0.5, 3.0),
                                 map_gammas: Sequence[float] = (-0.5, 0.5, 1, 2, 3, 5), *, n_points: int = 400):
    """K24 Fig 1. Left: the proper part L*(q, 1) of the focal loss beside the focal loss itself
    (same γ) and cross-entropy, on a positive instance. Right: the binary focal calibration map
    p̂_γ(q) = Ψ^γ([q, 1-q])_1 (Prop 2); negative γ gives the inverse-sigmoid shape.
    """
    loss_gammas = check_gammas(loss_gammas, "loss_gammas", owner="focal_calibration_map_figure")
    map_gammas = check_gammas(map_gammas, "map_gammas", domain=PSI_GAMMA, owner="focal_calibration_map_figure")
    n_points = check_points(n_points)
    q = np.linspace(0.0, 1.0, n_points + 2)[1:-1]  # open interval: the losses are infinite at 0
    figure, axes = new_figure(1, 2, height=4.0)
    left, right = axes[0]
    left.plot(q, _focal_loss_positive(q, 0.0), color=color_for("cross_entropy"), label="cross-entropy")
    for gamma in loss_gammas:
        colour = gamma_color(gamma)
        left.plot(q, _focal_loss_positive(q, gamma), color=colour, ls="--", label=f"focal, {gamma_label(gamma)}")
        left.plot(q, proper_focal_loss_positive(q, gamma), color=colour, label=f"proper part, {gamma_label(gamma)}")
    left.set(xlabel="predicted probability q of the positive class", ylabel="loss on a positive instance (nats)",
             ylim=(0, 4), xlim=(0, 1), title="(left) proper part of the focal loss")
    left.legend()
    right.plot([0, 1], [0, 1], color="0.4", ls=":", lw=1, label="identity (γ = 0)")
    for gamma in map_gammas:
        fc = theory.psi(np.column_stack([q, 1.0 - q]), gamma)[:, 0]
        right.plot(q, fc, color=gamma_color(gamma), label=gamma_label(gamma))
    right.set(xlabel="predicted probability q", ylabel="focal calibration p̂_γ(q)", xlim=(0, 1), ylim=(0, 1),
              aspect="equal", title="(right) binary focal calibration map")
    right.legend(fontsize=8)
    paper_title(figure, "Focal loss = proper loss ∘ focal calibration map (binary)", "komisarenko2024 Fig. 1")
    return figure


# --------------------------------------------------------------------------- K24 Figs 2, 6


def linear_fit(x, y) -> tuple[float, float]:
    """Least-squares slope and intercept of y ≈ slope·x + intercept (K24's "linear regression")."""
    slope, intercept = np.polyfit(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64), 1)
    return float(slope), float(intercept)


@styled
def closest_temperature_figure(num_classes: int = 2, gammas: Sequence[float] | None = None, *,
                               example_gammas: Sequence[float] | None = None, max_logit_gap=None, logit_step=None):
    """K24 Fig 2 (K = 2) / Fig 6 (K = 3) / §3.3 (K = 4): the temperature closest to the focal map.

    (a) 1/T against γ with the least-squares line (its equation printed, the paper's beside it);
    (b) the largest absolute probability difference between the two maps. For K = 2 a third
    panel shows the focal map and its closest temperature scaling against the logit for
    ``example_gammas`` (default 0.5 and 3, K24 Fig 2 right). ``max_logit_gap`` / ``logit_step``
    go to :func:`focalcal.theory.closest_temperature` (coarser = faster; defaults = the paper's).
    """
    if gammas is None:
        gammas = np.linspace(0.0, 10.0, 41 if num_classes == 2 else 21)
    gammas = check_gammas(gammas, owner="closest_temperature_figure")
    if gammas.size < 2:
        raise ValueError("gammas needs at least two values to fit a line")
    if example_gammas is None and num_classes == 2:
        example_gammas = (0.5, 3.0)
    temperatures, errors = theory.closest_temperature(gammas, num_classes, max_logit_gap=max_logit_gap,
                                                      logit_step=logit_step)
    inverse = 1.0 / np.asarray(temperatures)
    slope, intercept = linear_fit(gammas, inverse)
    n_panels = 3 if example_gammas else 2
    figure, axes = new_figure(1, n_panels, height=3.8)
    ax_fit, ax_error = axes[0, 0], axes[0, 1]
    ax_fit.plot(gammas, inverse, "o", ms=4, color=color_for("focal"), label="closest T")
    ax_fit.plot(gammas, slope * gammas + intercept, color="0.2", lw=1.2, label="least-squares fit")
    fit_text = f"fit: 1/T ≈ {slope:.2f}·γ + {intercept:.2f}"
    if num_classes in PAPER_TEMPERATURE_FITS:
        paper_slope, paper_intercept = PAPER_TEMPERATURE_FITS[num_classes]
        ax_fit.plot(gammas, paper_slope * gammas + paper_intercept, color="0.5", ls="--", lw=1, label="paper's fit")
        fit_text += f"\npaper: 1/T ≈ {paper_slope:.2f}·γ + {paper_intercept:.2f}"
    corner_text(ax_fit, fit_text, loc="upper left")
    ax_fit.set(xlabel="focal parameter γ", ylabel="inverse temperature 1/T", title=f"(a) K = {num_classes}")
    ax_fit.legend(loc="lower right", fontsize=8)
    ax_error.plot(gammas, errors, "o-", ms=3, color=color_for("focal"))
    ax_error.set(xlabel="focal parameter γ", ylabel="max |focal map − TS| (probability)",
                 title="(b) largest approximation error")
    if example_gammas:
        examples = check_gammas(example_gammas, "example_gammas", owner="closest_temperature_figure")
        _logit_scale_panel(axes[0, 2], examples)
    which = {2: "komisarenko2024 Fig. 2", 3: "komisarenko2024 Fig. 6"}.get(num_classes, "komisarenko2024 §3.3 (K = 4)")
    paper_title(figure, f"Temperature scaling closest to the focal calibration map, K = {num_classes}", which)
    return figure


def _logit_scale_panel(ax, example_gammas: np.ndarray) -> None:
    s = np.linspace(-8, 8, 401)
    temperatures, _ = theory.closest_temperature(example_gammas, 2)
    for gamma, temperature in zip(example_gammas, np.atleast_1d(temperatures)):
        colour = gamma_color(gamma)
        ax.plot(s, theory.binary_focal_calibration(s, gamma), color=colour, lw=2.4, alpha=0.6,
                label=f"focal map, {gamma_label(gamma)}")
        ax.plot(s, special.expit(s / temperature), color=colour, ls="--", lw=1.2, label=f"TS, T = {temperature:.2f}")
    ax.set(xlabel="logit s", ylabel="calibrated probability", title="(c) focal map vs closest TS")
    ax.legend(fontsize=8)


# ------------------------------------------------------------------------------ K24 Fig 3


def numerical_temperature_bounds(gammas, *, max_logit: float = 20.0, logit_step: float = 1e-3):
    """Tightest temperatures (T_low, T_high) with σ(s/T_high) <= FC(s) <= σ(s/T_low) for all
    logits 0 < s <= ``max_logit`` on a ``logit_step`` grid (K24 §3.2's numerical bounds).

    FC is odd in logit space, so negative s give the same bounds. In logit space the condition
    for s > 0 is T_low <= s / logit FC(s) <= T_high, so the tightest bounds are the min and
    max of that ratio (exact on the grid; the paper scanned T in steps of 0.001 in probability
    space, where float64 saturation hides the largest logits).
    """
    gammas = check_gammas(gammas, owner="numerical_temperature_bounds")
    if not (np.isfinite(max_logit) and max_logit > 0 and np.isfinite(logit_step) and 0 < logit_step <= max_logit):
        raise ValueError(f"need 0 < logit_step <= max_logit, got logit_step={logit_step!r}, max_logit={max_logit!r}")
    s = np.arange(1, round(max_logit / logit_step) + 1) * logit_step
    low, high = np.empty_like(gammas), np.empty_like(gammas)
    for i, gamma in enumerate(gammas):
        ratio = s / theory.binary_focal_calibration_logit(s, gamma)
        low[i], high[i] = ratio.min(), ratio.max()
    return low, high


@styled
def temperature_bounds_figure(gammas: Sequence[float] | None = None, *, max_logit: float = 20.0,
                              logit_step: float = 1e-3):
    """K24 Fig 3: Prop 3's temperature bounds of the binary focal map against the numerical ones.

    Left: T_low, T_high against γ (theory solid, numerical dashed); right: their widths.
    """
    gammas = check_gammas(np.linspace(0.1, 10.0, 100) if gammas is None else gammas, owner="temperature_bounds_figure")
    theory_low, theory_high = theory.temperature_bounds(gammas)
    numeric_low, numeric_high = numerical_temperature_bounds(gammas, max_logit=max_logit, logit_step=logit_step)
    figure, axes = new_figure(1, 2, height=3.8)
    left, right = axes[0]
    lower_colour, upper_colour = CLASS_COLORS[0], CLASS_COLORS[1]
    left.plot(gammas, theory_low, color=lower_colour, label="theoretical lower T = 1/(γ+1)")
    left.plot(gammas, theory_high, color=upper_colour, label="theoretical upper T = 1/(γ+1−log(γ+1)/2)")
    left.plot(gammas, numeric_low, color=lower_colour, ls="--", label="numerical lower")
    left.plot(gammas, numeric_high, color=upper_colour, ls="--", label="numerical upper")
    left.set(xlabel="focal parameter γ", ylabel="temperature T", title="(left) bounds")
    left.legend(fontsize=8)
    right.plot(gammas, theory_high - theory_low, color="0.2", label="theoretical")
    right.plot(gammas, numeric_high - numeric_low, color="0.2", ls="--", label="numerical")
    right.set(xlabel="focal parameter γ", ylabel="T_upper − T_lower", title="(right) width of the bounds")
    right.legend()
    paper_title(figure, f"Temperature-scaling bounds of the focal map (logits up to ±{max_logit:g})",
                "komisarenko2024 Fig. 3")
    return figure


