"""Reliability diagrams: the bars of one bin table on an axes, and one model's diagram.

Bars are drawn from the bin table of :func:`focalcal.metrics.reliability_bins` (same bins as
``metrics.ece``): a bar spans its bin ``(lower, upper]`` and its height is the bin's accuracy;
empty bins have no bar height (0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from focalcal import metrics

from .style import RAW_COLOR, corner_text, new_figure, styled
from .svg import observed_part

if TYPE_CHECKING:
    import pandas as pd

BIN_COLUMNS = ("lower", "upper", "accuracy")


def draw_reliability(ax, bins: pd.DataFrame, *, color: str, label: str | None = None, alpha: float = 0.75,
                     diagonal: bool = True, part: tuple[float, float] = (0.0, 1.0)):
    """Accuracy bars of a bin table on ``ax`` (and the y = x line); returns the BarContainer.

    ``part`` = (start, end) fractions of each bin's width the bar covers, so two diagrams can
    share an axes side by side (e.g. raw in (0, 0.5), Ψ^γ in (0.5, 1)).
    """
    from .frames import require_columns

    require_columns(bins, BIN_COLUMNS, "bins")
    return _draw_bars(ax, {column: bins[column].to_numpy(dtype=np.float64) for column in BIN_COLUMNS}, color=color,
                      label=label, alpha=alpha, diagonal=diagonal, part=part)


def _draw_bars(ax, bins: dict, *, color: str, label: str | None, alpha: float, diagonal: bool,
               part: tuple[float, float]):
    """:func:`draw_reliability` on the columns of :func:`focalcal.metrics.reliability_columns`."""
    start, end = part
    if not 0.0 <= start < end <= 1.0:
        raise ValueError(f"part must be (start, end) with 0 <= start < end <= 1, got {part!r}")
    lower, upper, accuracy = (np.asarray(bins[column], dtype=np.float64) for column in BIN_COLUMNS)
    width = upper - lower
    bars = ax.bar(lower + start * width, np.nan_to_num(accuracy, nan=0.0), width=(end - start) * width, align="edge",
                  color=color, alpha=alpha, edgecolor="0.2", linewidth=0.5, label=label)
    if diagonal:
        ax.plot([0, 1], [0, 1], color="0.3", ls="--", lw=1)
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="confidence (max predicted probability)", ylabel="accuracy")
    return bars


@styled
def reliability_diagram(probs, labels, *, n_bins: int = 15, binning: str = "width", title: str = "Reliability diagram",
                        color: str = RAW_COLOR, smooth: bool | metrics.SmoothReliability = False):
    """One model's reliability diagram (top) and the share of samples per confidence bin (bottom).

    ``probs`` (N, K) probabilities, ``labels`` (N,). ECE (same bins) printed in the corner;
    with ``smooth``, also the smooth reliability curve and smECE of Błasiok & Nakkiran 2023
    (:func:`focalcal.metrics.smooth_reliability_curve`; pass its result instead of True to reuse it).
    """
    bins = metrics.reliability_columns(probs, labels, n_bins=n_bins, binning=binning)  # no pandas import
    ece = metrics.ece(probs, labels, n_bins=n_bins, binning=binning)
    # Fixed margins (figure fractions, room for 3-digit ticks and the legend above the title): the
    # command draws one diagram per calibrator, and constrained layout would measure each twice.
    figure, axes = new_figure(2, 1, width=4.8, height=5.6, sharex=True, layout=None)
    figure.subplots_adjust(left=0.135, right=0.97, bottom=0.09, top=0.895 if smooth else 0.94, hspace=0.085)
    top, bottom = axes[0, 0], axes[1, 0]
    _draw_bars(top, bins, color=color, label="accuracy (bins)", alpha=0.75, diagonal=True, part=(0.0, 1.0))
    top.set_xlabel("")
    text = f"ECE = {100 * ece:.2f} %  ({n_bins} {binning} bins)"
    if smooth:
        curve = smooth if isinstance(smooth, metrics.SmoothReliability) else metrics.smooth_reliability_curve(probs, labels)
        top.plot(*observed_part(curve, probs), color="0.1", lw=1.6, label="smoothed accuracy")
        text += f"\nsmECE = {100 * curve.smooth_ece:.2f} %"
        # above the panel: inside it, some model's bars are under any corner
        figure.legend(loc="upper center", bbox_to_anchor=(0.5, 0.995), ncol=2, frameon=False, fontsize="small")
    corner_text(top, text, loc="upper left")
    counts = np.asarray(bins["count"], dtype=np.float64)
    width = bins["upper"] - bins["lower"]
    bottom.bar(bins["lower"], 100 * counts / counts.sum(), width=width, align="edge", color=color, alpha=0.75,
               edgecolor="0.2", linewidth=0.5)
    bottom.set(xlim=(0, 1), xlabel="confidence (max predicted probability)", ylabel="% of samples")
    top.set_title(title)
    return figure
