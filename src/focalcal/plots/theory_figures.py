"""Figures that need no training: exact curves from :mod:`focalcal.theory`.

charoenphakdee2021 (C21) Figs 1-2, komisarenko2024 (K24) Figs 1-3 and 6, mukhoti2020 (M20)
Fig 4a with γ*(p0), hossain2021 (H21) Fig 1. The K = 3 simplex figures (K24 Figs 4, 5, 7)
live in :mod:`focalcal.plots.simplex`. Every function returns a Figure and writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import special

from focalcal import theory

from .style import (CLASS_COLORS, color_for, corner_text, gamma_color, new_figure, paper_title, styled)

# The linear fits 1/T ≈ slope·γ + intercept that K24 prints (Fig 2: K = 2, Fig 6: K = 3, §3.3: K = 4).
PAPER_TEMPERATURE_FITS = {2: (0.95, 0.85), 3: (0.64, 0.91), 4: (0.47, 0.85)}


def _gamma_label(gamma: float) -> str:
    return f"γ = {gamma:g}"


def _check_gammas(gammas, name: str = "gammas", *, minimum: float = 0.0) -> np.ndarray:
    values = np.atleast_1d(np.asarray(gammas, dtype=np.float64))
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence of numbers, got {gammas!r}")
    if not np.all(np.isfinite(values)) or np.any(values < minimum):
        raise ValueError(f"{name} must be finite and >= {minimum:g}, got {values.tolist()}")
    return values


def _check_points(n_points, name: str = "n_points", minimum: int = 10) -> int:
    if isinstance(n_points, bool) or not isinstance(n_points, (int, np.integer)) or n_points < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {n_points!r}")
    return int(n_points)


# ------------------------------------------------------------------------------ C21 Fig 1


@styled
def phi_figure(gammas: Sequence[float] = (0.5, 1, 2, 3, 5), *, highlight_gamma: float = 3.0, n_points: int = 2001):
    """C21 Fig 1: φ^γ(v) (Eq 10) for several γ, with the regions of Thm 8 shaded for one γ.

    For the highlighted γ: max_y q*_y ∈ (0, τ_oc] means q* is η-overconfident, [τ_uc, 1)
    η-underconfident, in between ambiguous. The two vertical lines sit at
    ``theory.tau_oc(highlight_gamma)`` and ``theory.tau_uc(highlight_gamma)``.
    """
    gammas = _check_gammas(gammas)
    highlight = float(_check_gammas([highlight_gamma], "highlight_gamma")[0])
    if highlight <= 0:
        raise ValueError(f"highlight_gamma must be > 0 (τ_oc, τ_uc need γ > 0), got {highlight_gamma!r}")
    v = np.linspace(0.0, 1.0, _check_points(n_points))
    figure, axes = new_figure(1, 1, height=4.2)
    ax = axes[0, 0]
    t_oc, t_uc = float(theory.tau_oc(highlight)), float(theory.tau_uc(highlight))
    ax.axvspan(0, t_oc, color="#ef9a9a", alpha=0.35, lw=0, label=f"η-overconfident (γ = {highlight:g})")
    ax.axvspan(t_oc, t_uc, color="0.85", alpha=0.6, lw=0, label="ambiguous")
    ax.axvspan(t_uc, 1, color="#90caf9", alpha=0.35, lw=0, label=f"η-underconfident (γ = {highlight:g})")
    for gamma in gammas:
        ax.plot(v, theory.phi(v, gamma), color=gamma_color(gamma), label=_gamma_label(gamma),
                lw=2.6 if gamma == highlight else 1.6)
    ax.axvline(t_oc, color="0.25", ls="--", lw=1, gid="tau_oc")
    ax.axvline(t_uc, color="0.25", ls=":", lw=1.2, gid="tau_uc")
    ax.axhline(1.0, color="0.4", lw=0.8)
    ax.text(t_oc, 0.03, f"τ_oc = {t_oc:.3f} ", ha="right", va="bottom", rotation=90, fontsize=9,
            transform=ax.get_xaxis_transform())
    ax.text(t_uc, 0.03, f"τ_uc = {t_uc:.3f} ", ha="right", va="bottom", rotation=90, fontsize=9,
            transform=ax.get_xaxis_transform())
    ax.set(xlim=(0, 1), xlabel="v  (largest predicted score max_y q*_y)", ylabel="φ^γ(v)  (C21 Eq 10)")
    ax.legend(loc="upper right", ncols=2)
    paper_title(figure, "φ^γ and the over/under-confidence regions of the focal risk minimiser",
                "charoenphakdee2021 Fig. 1")
    return figure


# ------------------------------------------------------------------------------ C21 Fig 2


def minimizer_family(num_classes: int, n_points: int = 300) -> np.ndarray:
    """Focal risk minimisers q* with top score m ∈ [1/K, 1] and the rest spread evenly, (n, K).

    For K > 2 the relation max η ↔ max q* depends on the other coordinates; C21 Fig 2 needs
    one curve per γ, so the remaining mass is shared equally (the most ambiguous case).
    """
    if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)) or num_classes < 2:
        raise ValueError(f"num_classes must be an integer >= 2, got {num_classes!r}")
    top = np.linspace(1.0 / num_classes, 1.0, _check_points(n_points))
    rest = (1.0 - top) / (num_classes - 1)
    q = np.repeat(rest[:, None], num_classes, axis=1)
    q[:, 0] = top
    return q


@styled
def posterior_vs_minimizer_figure(gammas: Sequence[float] = (0.5, 1, 2, 3, 5), num_classes: Sequence[int] = (2, 1000),
                                  *, n_points: int = 300):
    """C21 Fig 2: max_y η_y against max_y q*_y for K = 2 (only η-underconfident) and K = 1000
    (η-overconfident near 1/K too). Exact: η = Ψ^γ(q*) for q* from :func:`minimizer_family`.

    Below the diagonal q* is η-underconfident, above it η-overconfident.
    """
    gammas = _check_gammas(gammas)
    num_classes = [int(k) for k in num_classes]
    largest = max(num_classes)
    show_difference = largest > 2
    figure, axes = new_figure(1, len(num_classes) + show_difference, height=4.3)
    letters = iter("abcdefgh")
    for ax, k in zip(axes[0], num_classes):
        q = minimizer_family(k, n_points)
        ax.plot([1 / k, 1], [1 / k, 1], color="0.3", ls="--", lw=1, label="γ = 0 (cross-entropy: q* = η)")
        for gamma in gammas:
            eta = theory.psi(q, gamma)
            ax.plot(eta.max(axis=1), q.max(axis=1), color=gamma_color(gamma), label=_gamma_label(gamma))
        ax.text(0.97, 0.05, "below diagonal:\nη-underconfident", transform=ax.transAxes, ha="right", fontsize=8,
                color="0.3")
        ax.text(0.03, 0.95, "above diagonal:\nη-overconfident", transform=ax.transAxes, va="top", fontsize=8,
                color="0.3")
        ax.set(xlabel="max_y η_y\n(true class posterior)", ylabel="max_y q*_y  (focal risk minimiser)",
               title=f"({next(letters)}) K = {k}" + ("" if k == 2 else " (rest equal)"),
               xlim=(0, 1), ylim=(0, 1), aspect="equal")
    if show_difference:
        ax = axes[0, -1]
        q = minimizer_family(largest, n_points)
        for gamma in gammas:
            eta_max = theory.psi(q, gamma).max(axis=1)
            keep = eta_max <= 0.45
            ax.plot(eta_max[keep], (q.max(axis=1) - eta_max)[keep], color=gamma_color(gamma))
        ax.axhline(0.0, color="0.3", ls="--", lw=1)
        ax.text(0.03, 0.05, "> 0: η-overconfident\n< 0: η-underconfident", transform=ax.transAxes, fontsize=8,
                color="0.3")
        ax.set(xlabel="max_y η_y\n(true class posterior)", ylabel="max_y q*_y − max_y η_y",
               title=f"({next(letters)}) K = {largest}, zoom")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=min(6, len(labels)), fontsize=9)
    paper_title(figure, "What the focal risk minimiser predicts for a given true posterior", "charoenphakdee2021 Fig. 2")
    return figure


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
    loss_gammas = _check_gammas(loss_gammas, "loss_gammas")
    map_gammas = _check_gammas(map_gammas, "map_gammas", minimum=-0.99)
    n_points = _check_points(n_points)
    q = np.linspace(0.0, 1.0, n_points + 2)[1:-1]  # open interval: the losses are infinite at 0
    figure, axes = new_figure(1, 2, height=4.0)
    left, right = axes[0]
    left.plot(q, _focal_loss_positive(q, 0.0), color=color_for("cross_entropy"), label="cross-entropy")
    for gamma in loss_gammas:
        colour = gamma_color(gamma)
        left.plot(q, _focal_loss_positive(q, gamma), color=colour, ls="--", label=f"focal, {_gamma_label(gamma)}")
        left.plot(q, proper_focal_loss_positive(q, gamma), color=colour, label=f"proper part, {_gamma_label(gamma)}")
    left.set(xlabel="predicted probability q of the positive class", ylabel="loss on a positive instance (nats)",
             ylim=(0, 4), xlim=(0, 1), title="(left) proper part of the focal loss")
    left.legend()
    right.plot([0, 1], [0, 1], color="0.4", ls=":", lw=1, label="identity (γ = 0)")
    for gamma in map_gammas:
        fc = theory.psi(np.column_stack([q, 1.0 - q]), gamma)[:, 0]
        right.plot(q, fc, color=gamma_color(gamma), label=_gamma_label(gamma))
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
    gammas = _check_gammas(gammas)
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
        _logit_scale_panel(axes[0, 2], _check_gammas(example_gammas, "example_gammas"))
    which = {2: "komisarenko2024 Fig. 2", 3: "komisarenko2024 Fig. 6"}.get(num_classes, "komisarenko2024 §3.3 (K = 4)")
    paper_title(figure, f"Temperature scaling closest to the focal calibration map, K = {num_classes}", which)
    return figure


def _logit_scale_panel(ax, example_gammas: np.ndarray) -> None:
    s = np.linspace(-8, 8, 401)
    temperatures, _ = theory.closest_temperature(example_gammas, 2)
    for gamma, temperature in zip(example_gammas, np.atleast_1d(temperatures)):
        colour = gamma_color(gamma)
        ax.plot(s, theory.binary_focal_calibration(s, gamma), color=colour, lw=2.4, alpha=0.6,
                label=f"focal map, {_gamma_label(gamma)}")
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
    gammas = _check_gammas(gammas)
    if not (np.isfinite(max_logit) and max_logit > 0 and np.isfinite(logit_step) and 0 < logit_step <= max_logit):
        raise ValueError(f"need 0 < logit_step <= max_logit, got logit_step={logit_step!r}, max_logit={max_logit!r}")
    s = np.arange(1, int(round(max_logit / logit_step)) + 1) * logit_step
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
    gammas = _check_gammas(np.linspace(0.1, 10.0, 100) if gammas is None else gammas)
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


# ------------------------------------------------------------------------------ M20 Fig 4a


@styled
def gradient_ratio_figure(gammas: Sequence[float] = (1, 2, 3, 4, 5, 7, 10), *, n_points: int = 1000,
                          schedule_points: Sequence[tuple[float, float]] = ((0.2, 5.0), (0.25, 3.0))):
    """M20 Fig 4a: g(p, γ) (Prop 1; ∂L_focal/∂w = g · ∂L_CE/∂w) against p; right: γ*(p0)
    (Prop 2, Lambert W) — the γ at which g(p0, γ) = 1, with FLSD-53's (p0, γ) pairs marked.
    """
    gammas = _check_gammas(gammas)
    p = np.linspace(0.0, 1.0, _check_points(n_points))
    figure, axes = new_figure(1, 2, height=3.8)
    left, right = axes[0]
    for gamma in gammas:
        left.plot(p, theory.gradient_ratio(p, gamma), color=gamma_color(gamma), label=_gamma_label(gamma))
    left.axhline(1.0, color="0.3", ls="--", lw=1, label="g = 1 (cross-entropy)")
    left.set(xlabel="probability of the true class p", ylabel="g(p, γ)", xlim=(0, 1), title="(a) gradient ratio")
    left.legend(ncols=2, fontsize=8)
    p0 = np.linspace(0.1, 0.5, 300)
    right.plot(p0, theory.gamma_star(p0), color=color_for("flsd53"), label="γ*(p0)")
    for p_point, gamma_point in schedule_points:
        right.plot(p_point, gamma_point, "o", color="0.2")
        right.annotate(f"(p0 = {p_point:g}, γ = {gamma_point:g})", (p_point, gamma_point),
                       xytext=(10, 4), textcoords="offset points", fontsize=8)
    right.set(xlabel="threshold p0", ylabel="γ*(p0), where g(p0, γ*) = 1", ylim=(0, None),
              title="(b) γ* from Lambert W (Prop. 2); dots: FLSD-53")
    paper_title(figure, "Focal-to-cross-entropy gradient ratio", "mukhoti2020 Fig. 4(a) and Prop. 2")
    return figure


def binary_optimum(q, gamma: float) -> np.ndarray:
    """M20 Eq 5: p̂ = argmin_x −q (1 − x)^γ log x − (1 − q) x^γ log(1 − x), the prediction of
    class 1 that minimises the expected focal loss of a binary problem with P(y = 1) = q.
    It is the K = 2 focal risk minimiser (p̂ = q for cross-entropy, γ = 0)."""
    q = np.asarray(q, dtype=np.float64)
    return theory.focal_risk_minimizer(np.stack([q, 1.0 - q], axis=-1), gamma)[..., 0]


def binary_optimum_figure(gammas: Sequence[float] = (0, 1, 2, 3, 5), *, n_points: int = 401):
    """M20 Fig 6: the optimal p̂ against q for cross-entropy (γ = 0: p̂ = q) and focal loss.

    Focal loss's optimum lies between q and 1/2: a more entropic prediction for every γ > 0
    (mukhoti2020 §4, "focal loss favours a more entropic solution p̂ that is closer to 0.5").
    """
    gammas = _check_gammas(gammas)
    q = np.linspace(0.0, 1.0, _check_points(n_points))
    figure, axes = new_figure(1, 1, height=4.2)
    ax = axes[0, 0]
    for gamma in gammas:
        label = "cross-entropy (γ = 0): p̂ = q" if gamma == 0 else _gamma_label(gamma)
        ax.plot(q, binary_optimum(q, gamma), color=gamma_color(gamma), label=label)
    ax.set(xlabel="q = P(y = 1)", ylabel="optimal p̂ (Eq. 5)", xlim=(0, 1), ylim=(0, 1), aspect="equal")
    ax.legend(fontsize=8)
    paper_title(figure, "Optimal prediction of a binary problem", "mukhoti2020 Fig. 6")
    return figure


# ------------------------------------------------------------------------------ H21 Fig 1


def loss_derivatives(z, target: int, *, alpha: float = 1.0, beta: float = 1.0, gamma: float = 1.0,
                     rho: float = 1.0) -> dict[str, np.ndarray]:
    """∂L/∂z of CE, DCE, FL and DFL with respect to one softmax output z (H21 Eq 9-12).

    ``target`` is y ∈ {0, 1} for that class. DFL uses the *added* α|y − z|^γ term of H21 Eq 7
    and Fig 1 (the sign in Eq 8/12 is a typo; see ``focalcal.losses.segmentation``), as
    :class:`focalcal.losses.DualFocalLoss` trains with:
    y = 1: −1/z − αγ(1 − z)^{γ−1};  y = 0: β/(ρ − z) + αγ z^{γ−1}.
    DCE: y = 1: −1/z; y = 0: β/(α + z). FL (α(1−z)^γ weighting): y = 1:
    αγ(1 − z)^{γ−1} log z − α(1 − z)^γ / z; y = 0: 0. CE: −y/z.
    """
    if target not in (0, 1):
        raise ValueError(f"target must be 0 or 1, got {target!r}")
    z = np.asarray(z, dtype=np.float64)
    if np.any((z <= 0) | (z >= 1)):
        raise ValueError("z must lie in the open interval (0, 1)")
    if target == 1:
        return {
            "cross_entropy": -1.0 / z,
            "dual_cross_entropy": -1.0 / z,
            "focal": alpha * (gamma * (1 - z) ** (gamma - 1) * np.log(z) - (1 - z) ** gamma / z),
            "dual_focal": -1.0 / z - alpha * gamma * (1 - z) ** (gamma - 1),
        }
    return {
        "cross_entropy": np.zeros_like(z),
        "dual_cross_entropy": beta / (alpha + z),
        "focal": np.zeros_like(z),
        "dual_focal": beta / (rho - z) + alpha * gamma * z ** (gamma - 1),
    }


_DERIVATIVE_LABELS = {"cross_entropy": "CE", "dual_cross_entropy": "DCE", "focal": "FL", "dual_focal": "DFL"}


def logit_gradients(z) -> dict[str, np.ndarray]:
    """∂L/∂u_y for a binary softmax with p_y = z, by autograd through the training losses
    (``focalcal.losses.build``, all constants 1): the gradient the network actually receives."""
    import torch

    from focalcal import losses

    z = torch.as_tensor(np.asarray(z, dtype=np.float64))
    configs = {"cross_entropy": {"name": "cross_entropy"}, "dual_cross_entropy": {"name": "dual_cross_entropy"},
               "focal": {"name": "focal", "gamma": 1.0}, "dual_focal": {"name": "dual_focal"}}
    gradients = {}
    for name, config in configs.items():
        logits = torch.stack([torch.log(z), torch.log1p(-z)], dim=1).requires_grad_(True)
        loss = losses.build({**config, "reduction": "sum"})(logits, torch.zeros(len(z), dtype=torch.long))
        (grad,) = torch.autograd.grad(loss, logits)
        gradients[name] = grad[:, 0].numpy()
    return gradients


@styled
def loss_derivatives_figure(*, n_points: int = 400):
    """H21 Fig 1: derivatives of CE, DCE, FL and DFL (α = β = γ = ρ = 1) with respect to the
    softmax output z, (a) for the true class (y = 1), (b) for a negative class (y = 0); (c) the
    gradient with respect to the true-class logit in a binary problem, by autograd through the
    ``focalcal.losses`` modules that training uses.
    """
    z = np.linspace(0.0, 1.0, _check_points(n_points) + 2)[1:-1]
    figure, axes = new_figure(1, 3, height=3.8)
    styles = {"cross_entropy": "-", "dual_cross_entropy": "--", "focal": "-.", "dual_focal": "-"}
    for ax, target, letter in ((axes[0, 0], 1, "a"), (axes[0, 1], 0, "b")):
        for name, values in loss_derivatives(z, target).items():
            ax.plot(z, values, color=color_for(name), ls=styles[name], label=_DERIVATIVE_LABELS[name])
        ax.set(xlabel=f"softmax output z (y = {target})", ylabel="∂L/∂z",
               ylim=(-10, 2) if target == 1 else (-0.5, 10), title=f"({letter}) y = {target}")
        ax.legend()
    for name, values in logit_gradients(z).items():
        axes[0, 2].plot(z, values, color=color_for(name), ls=styles[name], label=_DERIVATIVE_LABELS[name])
    axes[0, 2].set(xlabel="true-class output z_y (K = 2)", ylabel="∂L/∂u_y (logit)",
                   title="(c) logit gradient, autograd")
    axes[0, 2].legend()
    paper_title(figure, "Loss derivatives of CE, DCE, FL and DFL", "hossain2021 Fig. 1")
    return figure


# --------------------------------------------------------------------------- M20 Figs 7, 8


def _linear_experiment(experiment, focal_gamma: float, seed: int, iterations: int, lr: float):
    """The App. B experiment for CE (γ = 0) and FL (``focal_gamma``), or ``experiment`` if given."""
    focal_gamma = float(_check_gammas([focal_gamma], "focal_gamma")[0])
    if focal_gamma == 0:
        raise ValueError("focal_gamma must be > 0 (γ = 0 is the cross-entropy curve already drawn)")
    if experiment is None:
        experiment = theory.linear_model_experiment((0.0, focal_gamma), seed, lr=lr, iterations=iterations)
    missing = {0.0, focal_gamma} - set(experiment.fits)
    if missing:
        raise ValueError(f"experiment has no fit for γ = {sorted(missing)}")
    return experiment, focal_gamma


def _linear_runs(focal_gamma: float):
    return ((0.0, "cross-entropy", color_for("cross_entropy")),
            (focal_gamma, f"focal, {_gamma_label(focal_gamma)}", gamma_color(focal_gamma)))


@styled
def linear_model_norms_figure(*, focal_gamma: float = 1.0, seed: int = 0, iterations: int = 1000, lr: float = 0.1,
                              experiment=None):
    """M20 Fig 7: (a) norm of the logits, (b) norm of the weights over gradient-descent iterations
    of the 2-parameter logistic model of App. B (:func:`focalcal.theory.linear_model_experiment`),
    cross-entropy against focal loss. "Norm of logits" is the RMS training logit ‖Xw‖/√N.
    Pass ``experiment`` to reuse fits; fewer ``iterations`` make it cheaper.
    """
    experiment, focal_gamma = _linear_experiment(experiment, focal_gamma, seed, iterations, lr)
    figure, axes = new_figure(1, 2, height=3.8)
    left, right = axes[0]
    for gamma, label, colour in _linear_runs(focal_gamma):
        fit = experiment.fits[gamma]
        keep = fit.steps >= 1
        left.plot(fit.steps[keep], fit.logit_rms[keep], color=colour, label=label)
        right.plot(fit.steps[keep], fit.weight_norm[keep], color=colour, label=label)
    for ax, what, values in ((left, "logits", "logit_rms"), (right, "weights", "weight_norm")):
        final = {label: getattr(experiment.fits[gamma], values)[-1] for gamma, label, _ in _linear_runs(focal_gamma)}
        corner_text(ax, "final:\n" + "\n".join(f"{label}: {value:.3f}" for label, value in final.items()),
                    loc="lower right")
        ax.set(xscale="log", xlabel="gradient-descent iteration", ylim=(0, None))
        ax.legend(loc="upper left")
    left.set(ylabel="RMS logit ‖Xw‖/√N (train)", title="(a) norm of logits")
    right.set(ylabel="‖w‖", title="(b) norm of weights")
    paper_title(figure, "Logistic model on noisy Gaussian clusters: CE grows larger logits and weights than FL",
                "mukhoti2020 Fig. 7")
    return figure


def _decision_panel(ax, data, w: np.ndarray, title: str) -> None:
    for label in (0, 1):
        points = data.x_test[data.y_test == label]
        ax.scatter(points[:, 0], points[:, 1], s=5, alpha=0.45, color=CLASS_COLORS[label], lw=0,
                   label=f"test points, label {label}")
    norm = float(np.linalg.norm(w))
    direction = np.array([-w[1], w[0]]) / norm
    reach = 12.0
    for offset, style, label in ((0.0, "-", "boundary w·x = 0"),
                                 (np.log(9.0), "--", "confidence 0.9"), (-np.log(9.0), "--", None)):
        centre = offset * w / norm**2
        ends = np.stack([centre - reach * direction, centre + reach * direction])
        ax.plot(ends[:, 0], ends[:, 1], color="0.15", ls=style, lw=1.6 if offset == 0 else 1.0, label=label)
    ax.set(xlim=(-6.5, 6.5), ylim=(-6.5, 6.5), aspect="equal", xlabel="x1", ylabel="x2", title=title)


@styled
def linear_model_mistakes_figure(*, focal_gamma: float = 1.0, seed: int = 0, iterations: int = 1000, lr: float = 0.1,
                                 experiment=None):
    """M20 Fig 8: (a) histogram of the confidence max(p, 1 − p) of misclassified test points,
    CE against FL; (b) CE's and (c) FL's decision boundary w·x = 0 over the test points, with
    the lines where the confidence is 0.9 (w·x = ±log 9). Options as :func:`linear_model_norms_figure`.
    """
    experiment, focal_gamma = _linear_experiment(experiment, focal_gamma, seed, iterations, lr)
    figure, axes = new_figure(1, 3, height=4.0)
    hist_ax = axes[0, 0]
    bins = np.linspace(0.5, 1.0, 11)
    for gamma, label, colour in _linear_runs(focal_gamma):
        wrong = experiment.misclassified_confidence(gamma)
        summary = f"{label}\n{wrong.size} points, mean {wrong.mean():.2f}, {np.mean(wrong > 0.9):.0%} > 0.9"
        hist_ax.hist(wrong, bins=bins, color=colour, alpha=0.45, label=summary)
        hist_ax.hist(wrong, bins=bins, color=colour, histtype="step", lw=1.4)
    hist_ax.set(xlabel="confidence max(p, 1 − p)", ylabel="misclassified test points", xlim=(0.5, 1.0),
                title="(a) confidence of mistakes")
    hist_ax.set_ylim(0, hist_ax.get_ylim()[1] * 1.6)
    hist_ax.legend(loc="upper left", fontsize=8)
    for ax, (gamma, label, _), letter in zip(axes[0, 1:], _linear_runs(focal_gamma), "bc"):
        w = experiment.fits[gamma].w
        _decision_panel(ax, experiment.data, w, f"({letter}) {label}: ‖w‖ = {np.linalg.norm(w):.2f}")
    handles, labels = axes[0, 1].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize=9, markerscale=3)
    paper_title(figure, "Logistic model: same decision boundary, but CE is more confident on its mistakes",
                "mukhoti2020 Fig. 8")
    return figure
