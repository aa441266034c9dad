"""Forest plots of the claims: every pair's difference, the mean and its 95 % interval, per claim.

A paper page's plot has one row per claim (per study that tests it), each on its own x-axis
in the claim's own unit (ECE, temperature, px, ...): the pairs as dots, the mean as a
diamond with its interval, the threshold as a dashed line, everything coloured by verdict.
The index's compact plot puts every claim on one axis: each row's differences minus its
threshold, scaled by the row's largest such distance and turned so that the paper's side is
always on the left.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from focalcal.claims.verdict import VERDICT_COLORS
from focalcal.plots.style import BASE_FONT_SIZE, REPORT_WIDTH, new_figure, styled

ROW_HEIGHT = 0.62  # inches per claim on a paper page
COMPACT_ROW_HEIGHT = 0.2  # inches per claim on the index
LIMIT = 2.0  # the compact axis: intervals reaching beyond twice the row's largest distance are cut there
PAPER_SIDE_IS_LOW = {"<": True, "≤": True, ">": False, "≥": False}


def _rows(board: pd.DataFrame, pairs: pd.DataFrame):
    """(claims row, its pair differences) in board order."""
    for row in board.itertuples(index=False):
        mine = pairs[(pairs["claim"] == row.claim) & (pairs["study"].astype(str) == str(row.study))]
        yield row, mine["difference"].to_numpy(dtype=float)


def _label(row) -> str:
    return f"{row.claim} ({row.study})"


@styled
def claims_forest_figure(board: pd.DataFrame, pairs: pd.DataFrame, title: str = ""):
    """One row per claim of ``board`` (``claims.csv`` rows), each on its own x-axis."""
    if board.empty:
        raise ValueError("no claim to plot: the claims table has no row for this page")
    n = len(board)
    figure, axes = new_figure(n, 1, width=REPORT_WIDTH, height=ROW_HEIGHT * n + 0.9)
    for ax, (row, differences) in zip(axes[:, 0], _rows(board, pairs)):
        color = VERDICT_COLORS.get(row.verdict, "#222222")
        if np.isfinite(row.mean):  # a row without pairs has no axis for the threshold to sit on
            ax.axvline(row.threshold, color="0.3", linestyle="--", linewidth=1)
        ax.scatter(differences, np.zeros_like(differences), s=14, color=color, alpha=0.55, zorder=3)
        if np.isfinite(row.ci_low):
            ax.hlines(0, row.ci_low, row.ci_high, color=color, linewidth=3, zorder=4)
        if np.isfinite(row.mean):
            ax.scatter([row.mean], [0], marker="D", s=40, color=color, edgecolor="black", linewidth=0.6, zorder=5)
        else:  # no pairs: no axis to read
            ax.text(0.5, 0.5, row.verdict, transform=ax.transAxes, ha="center", va="center", color=color,
                    fontsize=BASE_FONT_SIZE - 1)
            ax.set_xticks([])
        ax.margins(x=0.08)
        ax.set_yticks([])
        ax.set_ylim(-1, 1)
        ax.tick_params(axis="x", labelsize=BASE_FONT_SIZE - 3, pad=1)
        ax.set_title(f"{_label(row)}: {row.verdict}, {row.n_paper_way} of {row.n_pairs} pairs {row.direction} "
                     f"{row.threshold:g}", fontsize=BASE_FONT_SIZE - 2, loc="left", color=color, pad=2)
        ax.grid(axis="y", visible=False)
    if title:
        figure.suptitle(title)
    return figure


@styled
def claims_forest_compact(board: pd.DataFrame, pairs: pd.DataFrame, title: str = ""):
    """Every claim on one axis: (d − threshold) / the row's largest |d − threshold|, the
    paper's side on the left."""
    if board.empty:
        raise ValueError("no claim to plot: the claims table is empty")
    n = len(board)
    figure, axes = new_figure(1, 1, width=REPORT_WIDTH, height=COMPACT_ROW_HEIGHT * n + 1.1)
    ax = axes[0, 0]
    labels = []
    for y, (row, differences) in enumerate(_rows(board, pairs)):
        color = VERDICT_COLORS.get(row.verdict, "#222222")
        labels.append(_label(row))
        sign = 1.0 if PAPER_SIDE_IS_LOW.get(row.direction, True) else -1.0
        shifted = sign * (differences - row.threshold)
        scale = float(np.max(np.abs(shifted))) if shifted.size and np.max(np.abs(shifted)) > 0 else 1.0
        if np.isfinite(row.ci_low):
            low, high = sorted((sign * (row.ci_low - row.threshold) / scale, sign * (row.ci_high - row.threshold) / scale))
            ax.hlines(y, max(low, -LIMIT), min(high, LIMIT), color=color, linewidth=2.5, zorder=4)
        ax.scatter(shifted / scale, np.full(shifted.shape, y), s=8, color=color, alpha=0.5, zorder=3)
        if np.isfinite(row.mean):
            ax.scatter([sign * (row.mean - row.threshold) / scale], [y], marker="D", s=22, color=color,
                       edgecolor="black", linewidth=0.5, zorder=5)
        else:
            ax.text(0, y, row.verdict, ha="center", va="center", color=color, fontsize=BASE_FONT_SIZE - 3)
    ax.axvline(0, color="0.3", linestyle="--", linewidth=1)
    ax.set_yticks(range(n), labels, fontsize=BASE_FONT_SIZE - 3)
    for tick, row in zip(ax.get_yticklabels(), board.itertuples(index=False)):
        tick.set_color(VERDICT_COLORS.get(row.verdict, "#222222"))
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_xlim(-LIMIT - 0.05, LIMIT + 0.05)
    ax.set_xlabel("← the paper's side   (d − threshold) / the row's largest |d − threshold|   the other side →",
                  fontsize=BASE_FONT_SIZE - 2)
    handles = [ax.scatter([], [], color=color, marker="D", label=verdict) for verdict, color in VERDICT_COLORS.items()
               if verdict in set(board["verdict"])]
    figure.legend(handles=handles, loc="outside lower center", ncol=len(handles), frameon=False,
                  fontsize=BASE_FONT_SIZE - 3)
    if title:
        ax.set_title(title)
    return figure


@styled
def empty_forest(text: str):
    """A small figure that says why there is nothing to plot."""
    figure, axes = new_figure(1, 1, width=REPORT_WIDTH, height=0.8)
    axes[0, 0].axis("off")
    axes[0, 0].text(0.5, 0.5, text, ha="center", va="center", fontsize=BASE_FONT_SIZE - 1)
    return figure
