"""Draw one planned figure: the theory registry and the dispatch to the experiment figures.

Theory figures are exact (from :mod:`focalcal.theory`) and need no runs; each entry of
:data:`THEORY_DRAWERS` is the plotting call at the paper's settings (or, with the config's
``report.theory_grid: coarse``, on quick grids for tests). Experiment figures read
run files and study tables (:mod:`focalcal.report.study_figures`). Plotting modules are
imported inside the functions, so importing this module (at Snakefile parse time) is free.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from focalcal.report.targets import THEORY_FIGURES, Artifact


def _plots():
    from focalcal import plots

    return plots


# Quick grids for tests and previews (config report.theory_grid: coarse): fewer γ values and
# coarser logit grids for the closest-temperature searches, the costly part at K >= 3.
_COARSE = {
    2: {"gammas": [0.0, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0], "logit_step": 0.01},
    3: {"gammas": [0.0, 2.0, 4.0, 6.0, 8.0, 10.0], "logit_step": 0.1},
    4: {"gammas": [0.0, 2.0, 4.0, 6.0, 8.0, 10.0], "logit_step": 0.25},
}


def _closest(classes: int, grid: str):
    options = _COARSE[classes] if grid == "coarse" else {}
    return _plots().closest_temperature_figure(classes, **options)


def _simplex_step(grid: str) -> dict:
    return {"logit_step": _COARSE[3]["logit_step"]} if grid == "coarse" else {}


def _linear_model(grid: str) -> dict:
    return {"iterations": 100} if grid == "coarse" else {}


THEORY_DRAWERS: dict[str, Callable] = {  # name -> draw(grid), grid "paper" or "coarse"
    "charoenphakdee2021_fig1_phi": lambda grid: _plots().phi_figure(),
    "charoenphakdee2021_fig2_posterior_vs_minimizer": lambda grid: _plots().posterior_vs_minimizer_figure(),
    "komisarenko2024_fig1_focal_calibration_map": lambda grid: _plots().focal_calibration_map_figure(),
    "komisarenko2024_fig2_closest_temperature_k2": lambda grid: _closest(2, grid),
    "komisarenko2024_fig6_closest_temperature_k3": lambda grid: _closest(3, grid),
    "komisarenko2024_closest_temperature_k4": lambda grid: _closest(4, grid),
    "komisarenko2024_fig3_temperature_bounds": lambda grid: _plots().temperature_bounds_figure(),
    "komisarenko2024_fig4_conditional_risk": lambda grid: _plots().conditional_risk_isolines_figure(),
    "komisarenko2024_fig5_calibration_arrows": lambda grid: _plots().calibration_arrows_figure(**_simplex_step(grid)),
    "komisarenko2024_fig7_calibration_difference": lambda grid: _plots().calibration_difference_figure(**_simplex_step(grid)),
    "mukhoti2020_fig4a_gradient_ratio": lambda grid: _plots().gradient_ratio_figure(),
    "mukhoti2020_fig6_binary_optimum": lambda grid: _plots().binary_optimum_figure(n_points=401 if grid == "paper" else 41),
    "mukhoti2020_fig7_linear_model_norms": lambda grid: _plots().linear_model_norms_figure(**_linear_model(grid)),
    "mukhoti2020_fig8_linear_model_mistakes": lambda grid: _plots().linear_model_mistakes_figure(**_linear_model(grid)),
    "hossain2021_fig1_loss_derivatives": lambda grid: _plots().loss_derivatives_figure(),
}

if set(THEORY_DRAWERS) != set(THEORY_FIGURES):  # one registry of names, one of calls: keep them in step
    raise RuntimeError(f"theory figure registries differ: {sorted(set(THEORY_DRAWERS) ^ set(THEORY_FIGURES))}")


def draw(artifact: Artifact, root: str | Path = "."):
    """The matplotlib Figure of a planned figure artifact; paths are relative to ``root``."""
    if artifact.kind != "figure":
        raise ValueError(f"{artifact.name!r} is a {artifact.kind}, not a figure")
    if artifact.study is None:
        if artifact.builder not in THEORY_DRAWERS:
            raise ValueError(f"unknown theory figure {artifact.builder!r}; known: {sorted(THEORY_DRAWERS)}")
        return THEORY_DRAWERS[artifact.builder](artifact.params.get("grid", "paper"))
    from focalcal.report import study_figures

    if artifact.builder not in study_figures.BUILDERS:
        raise ValueError(f"unknown figure builder {artifact.builder!r}; known: {sorted(study_figures.BUILDERS)}")
    return study_figures.BUILDERS[artifact.builder](artifact.params, Path(root), artifact.study)


def make(artifact: Artifact, output, root: str | Path = ".") -> Path:
    """Draw ``artifact`` and save it as PNG at ``output``."""
    from focalcal.plots import save

    return save(draw(artifact, root), output)
