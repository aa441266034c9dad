"""charoenphakdee2021's theory figures, exact curves from :mod:`focalcal.theory`: Fig 1 (φ^γ with
τ_oc and τ_uc) and Fig 2 (max η against max q*). Every function returns a Figure and writes nothing."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from focalcal import theory
from focalcal.plots.figure_arguments import check_gammas, check_points, gamma_label
from focalcal.plots.style import gamma_color, new_figure, paper_title, styled

# ------------------------------------------------------------------------------ C21 Fig 1


@styled
def phi_figure(gammas: Sequence[float] = (0.5, 1, 2, 3, 5), *, highlight_gamma: float = 3.0, n_points: int = 2001):
    """C21 Fig 1: φ^γ(v) (Eq 10) for several γ, with the regions of Thm 8 shaded for one γ.

    For the highlighted γ: max_y q*_y ∈ (0, τ_oc] means q* is η-overconfident, [τ_uc, 1)
    η-underconfident, in between ambiguous. The two vertical lines sit at
    ``theory.tau_oc(highlight_gamma)`` and ``theory.tau_uc(highlight_gamma)``.
    """
    gammas = check_gammas(gammas, owner="phi_figure")
    highlight = float(check_gammas([highlight_gamma], "highlight_gamma", owner="phi_figure")[0])
    if highlight <= 0:
        raise ValueError(f"highlight_gamma must be > 0 (τ_oc, τ_uc need γ > 0), got {highlight_gamma!r}")
    v = np.linspace(0.0, 1.0, check_points(n_points))
    figure, axes = new_figure(1, 1, height=4.2)
    ax = axes[0, 0]
    t_oc, t_uc = float(theory.tau_oc(highlight)), float(theory.tau_uc(highlight))
    ax.axvspan(0, t_oc, color="#ef9a9a", alpha=0.35, lw=0, label=f"η-overconfident (γ = {highlight:g})")
    ax.axvspan(t_oc, t_uc, color="0.85", alpha=0.6, lw=0, label="ambiguous")
    ax.axvspan(t_uc, 1, color="#90caf9", alpha=0.35, lw=0, label=f"η-underconfident (γ = {highlight:g})")
    for gamma in gammas:
        ax.plot(v, theory.phi(v, gamma), color=gamma_color(gamma), label=gamma_label(gamma),
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
    top = np.linspace(1.0 / num_classes, 1.0, check_points(n_points))
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
    gammas = check_gammas(gammas, owner="posterior_vs_minimizer_figure")
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
            ax.plot(eta.max(axis=1), q.max(axis=1), color=gamma_color(gamma), label=gamma_label(gamma))
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


