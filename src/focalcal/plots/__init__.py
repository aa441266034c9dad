"""Drawing helpers every paper's figures share, each taking data and returning a matplotlib Figure
or drawing on an axes.

Nothing here writes files except :func:`save` (PNG at a fixed dpi, or SVG). Figures are built
on an Agg canvas without pyplot, with one style (:mod:`focalcal.plots.style`): report-width
fonts and a fixed colour per loss, calibrator and γ.

* :mod:`.reliability` — reliability bars of a bin table (:func:`draw_reliability`) and one
  model's diagram (:func:`reliability_diagram`).
* :mod:`.svg` — the same diagram as SVG text without matplotlib
  (:func:`reliability_svg`, the ``focalcal calibrate`` command's figure).
* :mod:`.boxes` — box plots that draw a group of fewer than three values as its points.
* :mod:`.frames` — the checks on the tables a figure reads.
* :mod:`.figure_arguments` — the argument checks and γ label of the papers' figures.
* :mod:`.claims_forest` — the forest plots of the claims' verdicts.

A paper's own figures are drawn in its package (``figures``, ``theory_figures`` of
:mod:`focalcal.papers`).
"""

import importlib

# name -> the module that defines it, imported when the name is first asked for: the SVG diagram
# (``focalcal calibrate``) then never imports matplotlib.
_HOMES = {"draw_reliability": "reliability", "reliability_diagram": "reliability", "reliability_svg": "svg",
          "color_for": "style", "gamma_color": "style", "plot_style": "style", "save": "style"}
__all__ = ["color_for", "draw_reliability", "gamma_color", "plot_style", "reliability_diagram", "reliability_svg", "save"]


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))
