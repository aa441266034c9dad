"""Figures of the four papers, each a function that takes data and returns a matplotlib Figure.

Nothing here writes files except :func:`save` (PNG at a fixed dpi, or SVG). Figures are built
on an Agg canvas without pyplot, with one style (:mod:`focalcal.plots.style`): report-width
fonts and a fixed colour per loss, calibrator and γ.

Theory (exact, no training) — :mod:`.simplex` draws komisarenko2024's K = 3 simplex figures:
    conditional_risk_isolines_figure (K24 Fig 4), calibration_arrows_figure (K24 Fig 5),
    calibration_difference_figure (K24 Fig 7). Every other theory figure is drawn by its
    paper's ``theory`` module (:mod:`focalcal.papers`), with :mod:`.theory_figures`' checks.
From runs — :mod:`.experiment_figures`, :mod:`.reliability`:
    synthetic_posterior_figure (C21 Fig 3), raw_vs_psi_reliability_figure (C21 Fig 4),
    ece_box_plots (C21 Figs 5-6), optimal_temperature_figure (K24 Fig 8),
    training_reliability_figure (M20 Fig 1), training_curves_figure (M20 Fig 2),
    training_comparison_figure (M20 Fig 3), gradient_norm_histograms_figure (M20 Fig 4b-d),
    sample_confidences_figure (M20 Fig 9, :mod:`.confidences`), feature_norms_figure (M20 Fig 10),
    reliability_diagram (any run).
From segmentation runs — :mod:`.segmentation`:
    segmentation_scores_figure (H21 Tables 2-3 over folds), segmentation_overlays_figure (H21 Figs 3-6).

C21 = charoenphakdee2021, K24 = komisarenko2024, M20 = mukhoti2020, H21 = hossain2021.
"""

import importlib

# name -> the submodule defining it. Each submodule is imported when one of its names is first
# asked for: a command that draws one reliability diagram does not load seaborn's plot families
# and every other figure module (~0.5 s).
_DEFINED_IN = {
    **dict.fromkeys(("choose_samples", "sample_confidences_figure"), "confidences"),
    **dict.fromkeys(("ece_box_plots", "feature_norms_figure", "gradient_norm_histograms_figure",
                     "optimal_temperature_figure", "posterior_scores", "synthetic_posterior_figure",
                     "training_comparison_figure", "training_curves_figure"), "experiment_figures"),
    **dict.fromkeys(("draw_reliability", "raw_vs_psi_reliability_figure", "reliability_diagram",
                     "training_reliability_figure"), "reliability"),
    **dict.fromkeys(("segmentation_overlays_figure", "segmentation_scores_figure"), "segmentation"),
    **dict.fromkeys(("barycentric_grid", "calibration_arrows_figure", "calibration_difference_figure",
                     "conditional_risk", "conditional_risk_isolines_figure", "map_difference", "to_cartesian"),
                    "simplex"),
    **dict.fromkeys(("color_for", "gamma_color", "plot_style", "save"), "style"),
}


def __getattr__(name: str):
    if name not in _DEFINED_IN:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_DEFINED_IN[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted({*globals(), *_DEFINED_IN})


__all__ = [
    "barycentric_grid",
    "calibration_arrows_figure",
    "calibration_difference_figure",
    "choose_samples",
    "color_for",
    "conditional_risk",
    "conditional_risk_isolines_figure",
    "draw_reliability",
    "ece_box_plots",
    "feature_norms_figure",
    "gamma_color",
    "gradient_norm_histograms_figure",
    "map_difference",
    "optimal_temperature_figure",
    "plot_style",
    "posterior_scores",
    "raw_vs_psi_reliability_figure",
    "reliability_diagram",
    "sample_confidences_figure",
    "save",
    "segmentation_overlays_figure",
    "segmentation_scores_figure",
    "synthetic_posterior_figure",
    "to_cartesian",
    "training_comparison_figure",
    "training_curves_figure",
    "training_reliability_figure",
]
