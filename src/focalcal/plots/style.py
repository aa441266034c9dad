"""One look for every figure: fonts sized for a ~900 px report column, a fixed colour per
loss / calibrator / γ, and a ``save`` helper.

Figures are built on ``matplotlib.figure.Figure`` with an Agg canvas, never through pyplot's
global state: a figure function can run in a worker, a test or a notebook without a display
and without leaking open figures. Styling is applied with :func:`styled` (a context-managed
rc theme: seaborn's "whitegrid"), so importing this module changes no global matplotlib setting.

Size convention: a full-width figure is ``REPORT_WIDTH`` = 9 in wide; at 900 px that is 100 px
per inch, so 11 pt text renders at ~15 px. ``save`` writes PNG at ``DPI`` = 150 (1350 px: crisp
when the report scales it down), or SVG when the path ends in ``.svg``.
"""

from __future__ import annotations

import functools
import math
import re
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from pathlib import Path

import matplotlib as mpl
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.text import Text

from focalcal import catalog
from focalcal.core.constraints import REAL, validate_parameters
from focalcal.core.spec_facts import focal_gamma_in_name
from focalcal.files.artefacts import atomic_write
from focalcal.training.health import HEALTHY

REPORT_WIDTH = 9.0  # inches; one report column (~900 px)
PANEL_HEIGHT = 3.0  # inches per row of panels
DPI = 150
BASE_FONT_SIZE = 11

# seaborn's "colorblind" palette and "whitegrid" axes style (seaborn 0.13: ``color_palette("colorblind",
# 10)``, ``axes_style("whitegrid")``, less its default colormap "rocket", which only importing seaborn
# registers; every figure here names its colormap), written out so that drawing a figure does not
# import seaborn and scipy.stats; tests/test_plots_style.py checks both against seaborn.
SEABORN_COLORBLIND = ["#0173b2", "#de8f05", "#029e73", "#d55e00", "#cc78bc", "#ca9161", "#fbafe4", "#949494",
                      "#ece133", "#56b4e9"]
SEABORN_WHITEGRID = {
    "figure.facecolor": "white", "axes.labelcolor": ".15", "xtick.direction": "out", "ytick.direction": "out",
    "xtick.color": ".15", "ytick.color": ".15", "axes.axisbelow": True, "grid.linestyle": "-", "text.color": ".15",
    "font.family": ["sans-serif"],
    "font.sans-serif": ["Arial", "DejaVu Sans", "Liberation Sans", "Bitstream Vera Sans", "sans-serif"],
    "lines.solid_capstyle": "round", "patch.edgecolor": "w", "patch.force_edgecolor": True, "xtick.top": False,
    "ytick.right": False, "axes.grid": True, "axes.facecolor": "white", "axes.edgecolor": ".8", "grid.color": ".8",
    "axes.spines.left": True, "axes.spines.bottom": True, "axes.spines.right": True, "axes.spines.top": True,
    "xtick.bottom": False, "ytick.left": False,
}  # fmt: skip

# Colours for names the catalog declares none for, picked by a hash of the name: colour-blind-safe
# (seaborn "colorblind" + a few darker companions).
_PALETTE = SEABORN_COLORBLIND + ["#1b3a5c", "#7a3d00", "#3c6e47", "#5e3c99", "#8c510a"]

# The colours and short names of losses, calibrators and calibrator roles are declared with
# them in focalcal.catalog; charoenphakdee2021 Fig 4's convention: raw scores red, Ψ^γ green.
RAW_COLOR = catalog.RAW_COLOR
PSI_COLOR = catalog.PSI_COLOR

# Class colours for per-class curves (synthetic posteriors, simplex corners).
CLASS_COLORS = ["#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00"]

_GAMMA_CMAP = mpl.colormaps["plasma"]
_GAMMA_KNOTS = (0.0, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 10.0)


def canonical_name(name: str) -> str:
    """Catalog spelling of a loss/calibrator name: lower case, '-'/' ' -> '_', aliases resolved."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a loss/calibrator name must be a non-empty string, got {name!r}")
    key = re.sub(r"[\s\-]+", "_", name.strip().lower())
    return catalog.aliases().get(key, key)


def gamma_color(gamma: float) -> str:
    """Colour of a focal parameter γ on one fixed scale, so the same γ has the same colour in
    every figure. The scale is piecewise linear through the γ values the papers use
    (``_GAMMA_KNOTS``), evenly spaced in colour, so γ = 0.5, 1, 2, 3 are told apart;
    γ = 0 is darkest, γ >= 10 lightest. Negative γ (γ_ev) get a separate green-blue scale.
    """
    validate_parameters({"gamma": [REAL]}, {"gamma": gamma}, "gamma_color")
    gamma = float(gamma)
    if gamma < 0:
        return to_hex(mpl.colormaps["viridis"](0.45 + 0.4 * min(-gamma, 1.0)))
    position = np.interp(gamma, _GAMMA_KNOTS, np.linspace(0.0, 1.0, len(_GAMMA_KNOTS)))
    return to_hex(_GAMMA_CMAP(0.05 + 0.85 * position))


def color_for(name: str, gamma: float | None = None) -> str:
    """The fixed colour of a loss or calibrator, the same in every figure.

    ``focal`` with a ``gamma`` (or a name like ``focal_gamma3``/``FL-3``) takes the γ scale,
    so FL γ=1, 2, 3 are told apart. Unknown names get a stable colour from a hash of the name
    (never a colour that depends on plotting order).
    """
    key = canonical_name(name)
    named = focal_gamma_in_name(key)
    if named is not None and gamma is None:
        key, gamma = "focal", named
    if key == "focal" and gamma is not None:
        return gamma_color(gamma)
    declared = catalog.declared_colour(key)
    if declared is not None:
        return declared
    return _PALETTE[zlib.crc32(key.encode()) % len(_PALETTE)]



def _status(value) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    value = str(value).strip()
    return value if value and value.lower() not in ("nan", "none") else None


def status_label(label: str, statuses: Iterable = (), *, sep: str = " ") -> str:
    """``label`` marked with the health of the runs it stands for, for a legend or tick label.

    ``statuses`` holds one run-health status per run ("trained", "diverged", "collapsed",
    "not converged"; None/NaN/"" for a run written before health was recorded, counted as
    not known). When every run trained (or none is known) the label is returned unchanged;
    otherwise each other status is appended in brackets after ``sep``: "FL-3 [collapsed]" when
    all runs share it, "FL-3 [collapsed 2/5]" when 2 of 5 do.
    """
    statuses = [_status(value) for value in statuses]
    total = len(statuses)
    counts = Counter(value for value in statuses if value is not None and value != HEALTHY)
    if not counts:
        return str(label)
    marks = [status if count == total else f"{status} {count}/{total}" for status, count in sorted(counts.items())]
    return f"{label}{sep}[{', '.join(marks)}]"


def _rc() -> dict:
    return {
        "font.size": BASE_FONT_SIZE,
        "axes.titlesize": BASE_FONT_SIZE,
        "axes.labelsize": BASE_FONT_SIZE,
        "xtick.labelsize": BASE_FONT_SIZE - 1,
        "ytick.labelsize": BASE_FONT_SIZE - 1,
        "legend.fontsize": BASE_FONT_SIZE - 1,
        "legend.title_fontsize": BASE_FONT_SIZE - 1,
        "figure.titlesize": BASE_FONT_SIZE + 1,
        "lines.linewidth": 1.8,
        "axes.linewidth": 0.8,
        "savefig.dpi": DPI,
        "svg.fonttype": "none",
    }


@contextmanager
def plot_style():
    """The seaborn ``whitegrid`` theme with report font sizes, restored on exit."""
    with mpl.rc_context():
        mpl.rcParams.update(SEABORN_WHITEGRID)
        mpl.rcParams.update(_rc())
        yield


def styled(function: Callable) -> Callable:
    """Decorator: build the figure under :func:`plot_style` (fonts are fixed when artists are made).


    Every Figure it returns has its titles fitted to their width (:func:`fit_titles`), so no
    figure function can leave a title cut off at the figure's edge.
    """

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with plot_style():
            result = function(*args, **kwargs)
            if isinstance(result, Figure):
                fit_titles(result)
            return result

    return wrapper


def new_figure(nrows: int = 1, ncols: int = 1, *, width: float = REPORT_WIDTH, height: float | None = None,
               sharex=False, sharey=False, squeeze: bool = False, layout: str | None = "constrained", **subplot_kw):
    """A constrained-layout Figure on an Agg canvas and its axes grid (2-D array unless squeeze);
    ``layout=None``: the caller places the axes (``subplots_adjust``), and saving it skips
    constrained layout's two measuring passes (~40 % of saving a small figure).

    Call inside :func:`plot_style` (figure functions are ``@styled``).
    """
    if height is None:
        height = PANEL_HEIGHT * nrows + 0.4
    figure = Figure(figsize=(width, height), layout=layout)
    FigureCanvasAgg(figure)
    axes = figure.subplots(nrows, ncols, sharex=sharex, sharey=sharey, squeeze=squeeze, subplot_kw=subplot_kw or None)
    return figure, axes


def paper_title(figure: Figure, what: str, reproduces: str) -> None:
    """Suptitle naming what the figure shows and which paper figure it reproduces, wrapped to
    the figure's width (a narrow one-panel figure gets a title on several lines, never one cut
    off at both edges)."""
    title = figure.suptitle(f"{what}\n(reproduces {reproduces})")
    fit_text(title, _TITLE_FILL * figure.bbox.width)


def corner_text(ax, text: str, *, loc: str = "upper right") -> None:
    """A small boxed annotation (the papers print metric values in a panel corner)."""
    x, ha = (0.97, "right") if "right" in loc else (0.03, "left")
    y, va = (0.97, "top") if "upper" in loc else (0.03, "bottom")
    ax.text(x, y, text, transform=ax.transAxes, ha=ha, va=va, fontsize=BASE_FONT_SIZE - 2,
            bbox={"boxstyle": "round,pad=0.3", "facecolor": "white", "edgecolor": "0.7", "alpha": 0.9})


def save(figure: Figure, path) -> Path:
    """Write ``figure`` to ``path`` (PNG at ``DPI``; SVG if the suffix is .svg). Parent
    directories are created. Returns the path.

    The figure is left as it is, to be freed with its last reference: clearing it re-creates
    every axis's ticks, a quarter of the cost of saving a two-panel figure.
    """
    path = Path(path)
    if path.suffix.lower() not in (".png", ".svg"):
        raise ValueError(f"save writes .png or .svg files, got {str(path)!r}")
    if not isinstance(figure, Figure):
        raise TypeError(f"figure must be a matplotlib Figure, got {type(figure).__name__}")
    atomic_write(path, lambda handle: figure.savefig(handle, dpi=DPI, format=path.suffix[1:].lower()))
    return path


# ------------------------------------------------------------------------ text that fits

_TITLE_FILL = 0.96  # share of the figure (or of an axes' grid cell) a title line may fill
_SMALLEST_FONT = 7.0


def _renderer(figure: Figure):
    canvas = figure.canvas
    if not hasattr(canvas, "get_renderer"):  # a figure made outside new_figure, on a canvas without one
        canvas = FigureCanvasAgg(figure)
    return canvas.get_renderer()


def _width(text: Text, string: str, renderer) -> float:
    text.set_text(string)
    return text.get_window_extent(renderer).width


def fit_text(text: Text, max_width: float) -> None:
    """Re-break ``text`` at spaces so that no line is wider than ``max_width`` display pixels
    (the units of ``figure.bbox``); lines it already breaks stay broken. A single word wider
    than that (or a line holding mathtext) shrinks the font instead, down to 7 pt. Empty or
    invisible text is left alone.
    """
    original = text.get_text()
    if not original.strip() or not text.get_visible() or text.figure is None or max_width <= 0:
        return
    renderer = _renderer(text.figure)
    lines = []
    for paragraph in original.split("\n"):
        if paragraph.count("$") >= 2:  # mathtext: never broken inside a formula; the font shrinks instead
            lines.append(paragraph)
            continue
        current = ""
        for word in paragraph.split(" "):
            trial = f"{current} {word}" if current else word
            if current and _width(text, trial, renderer) > max_width:
                lines.append(current)
                current = word
            else:
                current = trial
        lines.append(current)
    fitted = "\n".join(lines)
    text.set_text(fitted)
    while text.get_window_extent(renderer).width > max_width and text.get_fontsize() > _SMALLEST_FONT:
        text.set_fontsize(max(_SMALLEST_FONT, text.get_fontsize() - 0.5))


def _cell_width(ax, figure: Figure) -> float:
    """Display width of the grid cell(s) an axes spans (its share of the figure's width)."""
    spec = ax.get_subplotspec() if hasattr(ax, "get_subplotspec") else None
    if spec is None:
        return ax.get_position().width * figure.bbox.width
    ncols = spec.get_gridspec().ncols
    span = spec.colspan
    return figure.bbox.width * (span.stop - span.start) / ncols


def fit_titles(figure: Figure) -> None:
    """Wrap the suptitle to the figure's width and each visible axes' titles to the width of
    its grid cell, so constrained layout never has a title to cut at an edge (it makes room
    above and below a title, not beside it). Run on every figure a ``@styled`` function returns.
    """
    if figure._suptitle is not None:
        fit_text(figure._suptitle, _TITLE_FILL * figure.bbox.width)
    for ax in figure.axes:
        if not ax.get_visible():
            continue
        width = _TITLE_FILL * _cell_width(ax, figure)
        for title in (ax.title, ax._left_title, ax._right_title):
            fit_text(title, width)


def clipped_texts(figure: Figure) -> list[str]:
    """The visible texts of ``figure``, laid out and drawn, that reach past its edges (empty
    when every title, label, legend entry and annotation is whole; tick labels are covered
    through the figure's tight bounding box). Draws the figure once.
    """
    _renderer(figure)  # gives a figure made elsewhere an Agg canvas
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    box = figure.bbox
    clipped = []
    for text in _visible_texts(figure):
        extent = text.get_window_extent(renderer)
        if extent.x0 < box.x0 - 1 or extent.x1 > box.x1 + 1 or extent.y0 < box.y0 - 1 or extent.y1 > box.y1 + 1:
            clipped.append(text.get_text())
    tight = figure.get_tightbbox(renderer)  # inches; covers the tick labels the loop skips
    width, height = figure.get_size_inches()
    if not clipped and (tight.x0 < -0.01 or tight.y0 < -0.01 or tight.x1 > width + 0.01 or tight.y1 > height + 0.01):
        span = ", ".join(f"{float(v):.2f}" for v in tight.extents)
        clipped.append(f"(what is drawn spans ({span}) in, outside the {width:g} x {height:g} in figure)")
    return clipped


def _visible_texts(artist) -> Iterable[Text]:
    """Non-empty Text artists under ``artist`` whose holders are all visible (ticks skipped)."""
    from matplotlib.axis import Tick

    for child in artist.get_children():
        if not child.get_visible() or isinstance(child, Tick):
            continue
        if isinstance(child, Text) and child.get_text().strip():
            yield child
        yield from _visible_texts(child)
