"""One model's reliability diagram as SVG text, written without matplotlib.

``focalcal calibrate`` draws one diagram per calibrator and inlines each into its page. Writing
the shapes as SVG elements takes a fraction of matplotlib's import and PNG save (``python -m bench
calibrate_command``), and leaves the text to the browser, so the page stays crisp at any
zoom. The diagram is the one :func:`focalcal.plots.reliability_diagram` draws (the same bins,
ECE, smooth curve and panels); the report's figures keep matplotlib.

The SVG holds no ``id``: several diagrams can be inlined into one page.
"""

from __future__ import annotations

import html
import math

import numpy as np

from focalcal import catalog, metrics

WIDTH, HEIGHT = 480, 560  # px: the matplotlib diagram's 4.8 x 5.6 in at 100 px per inch
FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
FONT_SIZE = 13
GRID_COLOR = "#dddddd"
EDGE_COLOR = "#333333"
BAR_OPACITY = 0.75
# The two panels' boxes in px (left, top, right, bottom): the matplotlib diagram's fixed margins.
_LEFT, _RIGHT = 72, 464
_TOP_PANEL = (60, 300)
_BOTTOM_PANEL = (314, 500)


def observed_part(curve: metrics.SmoothReliability, probs) -> tuple[np.ndarray, np.ndarray]:
    """The smooth curve's (mesh, accuracy) over the observed confidences only: outside their range
    the kernel estimate has no data to average and relplot reports 0, which would read as a
    measured accuracy of 0."""
    confidence = np.asarray(probs, dtype=np.float64).max(axis=1)
    inside = (curve.mesh >= confidence.min()) & (curve.mesh <= confidence.max())
    return curve.mesh[inside], curve.accuracy[inside]


def nice_ticks(top: float, most: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``top`` (> 0), at most ``most`` + 1 of them, in steps
    of 1, 2, 2.5 or 5 times a power of ten."""
    if not top > 0:
        return [0.0, 1.0]
    power = 10.0 ** math.floor(math.log10(top / most))
    step = next(power * factor for factor in (1, 2, 2.5, 5, 10) if top / (power * factor) <= most)
    return [round(i * step, 10) for i in range(math.ceil(top / step - 1e-9) + 1)]


class _Panel:
    """Data coordinates (x in [0, 1], y in [0, y_max]) to px in one panel's box."""

    def __init__(self, top: float, bottom: float, y_max: float):
        self.top, self.bottom, self.y_max = top, bottom, y_max

    def x(self, value) -> float:
        return _LEFT + (_RIGHT - _LEFT) * value

    def y(self, value) -> float:
        return self.bottom - (self.bottom - self.top) * value / self.y_max


def _text(x: float, y: float, text: str, *, anchor: str = "middle", size: int = FONT_SIZE, extra: str = "") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}"{extra}>'
            f"{html.escape(text)}</text>")


def _grid_and_frame(panel: _Panel, y_ticks: list[float], y_format: str, y_label: str, x_labels: bool) -> list[str]:
    parts = []
    for value in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0):
        x = panel.x(value)
        parts.append(f'<line x1="{x:.1f}" y1="{panel.top}" x2="{x:.1f}" y2="{panel.bottom}" stroke="{GRID_COLOR}"/>')
        if x_labels:
            parts.append(_text(x, panel.bottom + 17, f"{value:.1f}", size=FONT_SIZE - 1))
    for value in y_ticks:
        y = panel.y(value)
        parts.append(f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_RIGHT}" y2="{y:.1f}" stroke="{GRID_COLOR}"/>')
        parts.append(_text(_LEFT - 6, y + 4.5, format(value, y_format), anchor="end", size=FONT_SIZE - 1))
    middle = (panel.top + panel.bottom) / 2
    parts.append(_text(22, middle, y_label, extra=f' transform="rotate(-90 22 {middle:.1f})"'))
    return parts


def _bars(panel: _Panel, lower, upper, heights, color: str) -> list[str]:
    return [f'<rect x="{panel.x(a):.2f}" y="{panel.y(h):.2f}" width="{panel.x(b) - panel.x(a):.2f}" '
            f'height="{panel.bottom - panel.y(h):.2f}" fill="{color}" fill-opacity="{BAR_OPACITY}" '
            f'stroke="{EDGE_COLOR}" stroke-width="0.5"/>'
            for a, b, h in zip(lower, upper, heights, strict=True) if h > 0]


def _frame(panel: _Panel) -> str:
    return (f'<rect x="{_LEFT}" y="{panel.top}" width="{_RIGHT - _LEFT}" height="{panel.bottom - panel.top}" '
            f'fill="none" stroke="{EDGE_COLOR}" stroke-width="0.8"/>')


def reliability_svg(probs, labels, *, n_bins: int = 15, binning: str = "width", title: str = "Reliability diagram",
                    color: str = catalog.RAW_COLOR, smooth: bool | metrics.SmoothReliability = False) -> str:
    """The SVG text of one model's reliability diagram: accuracy per confidence bin (bars, with
    the diagonal) above the share of samples per bin, ECE (same bins) in the corner; with
    ``smooth``, the smooth reliability curve and smECE of Błasiok & Nakkiran 2023 (pass a
    :func:`focalcal.metrics.smooth_reliability_curve` result to reuse it)."""
    bins = metrics.reliability_columns(probs, labels, n_bins=n_bins, binning=binning)
    ece = metrics.ece(probs, labels, n_bins=n_bins, binning=binning)
    lower, upper = bins["lower"], bins["upper"]
    accuracy = np.nan_to_num(bins["accuracy"], nan=0.0)
    share = 100 * np.asarray(bins["count"], dtype=np.float64) / max(1, int(np.sum(bins["count"])))
    top = _Panel(*_TOP_PANEL, 1.0)
    share_ticks = nice_ticks(float(share.max()) * 1.05)
    bottom = _Panel(*_BOTTOM_PANEL, share_ticks[-1])

    parts = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
              f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="{FONT}" fill="#222222" role="img">'),
             f"<title>{html.escape(title)}: reliability diagram</title>",
             f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>']
    parts += _grid_and_frame(top, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0], ".1f", "accuracy", x_labels=False)
    parts += _bars(top, lower, upper, accuracy, color)
    parts.append(f'<line x1="{top.x(0)}" y1="{top.y(0)}" x2="{top.x(1)}" y2="{top.y(1)}" stroke="#4d4d4d" '
                 'stroke-dasharray="5 3"/>')
    lines = [f"ECE = {100 * ece:.2f} %  ({n_bins} {binning} bins)"]
    if smooth:
        curve = smooth if isinstance(smooth, metrics.SmoothReliability) else metrics.smooth_reliability_curve(probs, labels)
        mesh, smoothed = observed_part(curve, probs)
        points = " ".join(f"{top.x(x):.1f},{top.y(y):.1f}" for x, y in zip(mesh, smoothed, strict=True))
        parts.append(f'<polyline points="{points}" fill="none" stroke="#1a1a1a" stroke-width="1.6"/>')
        lines.append(f"smECE = {100 * curve.smooth_ece:.2f} %")
        parts += _legend(color)
    parts.append(_frame(top))
    box_width = 0.6 * (FONT_SIZE - 2) * max(len(line) for line in lines) + 12
    parts.append(f'<rect x="{_LEFT + 8}" y="{top.top + 8}" width="{box_width:.1f}" height="{16 * len(lines) + 8}" '
                 'rx="4" fill="white" fill-opacity="0.9" stroke="#b3b3b3"/>')
    parts += [_text(_LEFT + 14, top.top + 24 + 16 * i, line, anchor="start", size=FONT_SIZE - 2)
              for i, line in enumerate(lines)]
    parts.append(_text((_LEFT + _RIGHT) / 2, top.top - 8, title, size=FONT_SIZE + 1))

    parts += _grid_and_frame(bottom, share_ticks, "g", "% of samples", x_labels=True)
    parts += _bars(bottom, lower, upper, share, color)
    parts.append(_frame(bottom))
    parts.append(_text((_LEFT + _RIGHT) / 2, HEIGHT - 22, "confidence (max predicted probability)"))
    parts.append("</svg>")
    return "\n".join(parts)


def _legend(color: str) -> list[str]:
    """The smooth curve's and the bars' keys, above the title (inside the panel some model's bars
    are under any corner)."""
    y = 22
    return ['<line x1="110" y1="18" x2="140" y2="18" stroke="#1a1a1a" stroke-width="1.6"/>',
            _text(146, y, "smoothed accuracy", anchor="start", size=FONT_SIZE - 1),
            (f'<rect x="300" y="11" width="24" height="13" fill="{color}" fill-opacity="{BAR_OPACITY}" '
             f'stroke="{EDGE_COLOR}" stroke-width="0.5"/>'),
            _text(330, y, "accuracy (bins)", anchor="start", size=FONT_SIZE - 1)]
