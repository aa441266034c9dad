"""Drawing helpers every paper's figures share, each taking data and returning a matplotlib Figure
or drawing on an axes.

Nothing here writes files except :func:`save` (PNG at a fixed dpi, or SVG). Figures are built
on an Agg canvas without pyplot, with one style (:mod:`focalcal.plots.style`): report-width
fonts and a fixed colour per loss, calibrator and γ.

* :mod:`.reliability` — reliability bars of a bin table (:func:`draw_reliability`) and one
  model's diagram (:func:`reliability_diagram`, the ``focalcal calibrate`` command's figure).
* :mod:`.boxes` — box plots that draw a group of fewer than three values as its points.
* :mod:`.frames` — the checks on the tables a figure reads.
* :mod:`.figure_arguments` — the argument checks and γ label of the papers' figures.
* :mod:`.claims_forest` — the forest plots of the claims' verdicts.

A paper's own figures are drawn in its package (``figures``, ``theory_figures`` of
:mod:`focalcal.papers`).
"""

from .reliability import draw_reliability, reliability_diagram
from .style import color_for, gamma_color, plot_style, save

__all__ = ["color_for", "draw_reliability", "gamma_color", "plot_style", "reliability_diagram", "save"]
