"""Box plots that stay readable with few runs: a (category, hue) group with fewer than
``MIN_BOX_VALUES`` values is drawn as coloured points where its box would stand (a box of one
or two values collapses to a line that shows neither its colour nor its spread)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from .style import status_label

MIN_BOX_VALUES = 3
POINT_SIZE = 42  # points², the area of one scatter marker
POINT_EDGE = "0.15"


def boxes_or_points(ax, data: pd.DataFrame, *, x: str, y: str, hue: str, order: Sequence, hue_order: Sequence,
                    palette: Mapping[str, str], width: float = 0.7, dodge: bool = True, fliersize: float = 3.0,
                    overlay: str | None = None) -> dict[str, int]:
    """Draw ``data`` on ``ax``: one box per (``x``, ``hue``) group of at least
    ``MIN_BOX_VALUES`` finite ``y`` values, the values of a smaller group as points in the hue's
    colour at the box's place (dodged by hue the way seaborn dodges the boxes, a group's points
    spread a little so two equal values stay two). ``overlay`` (a colour) also draws the values
    of boxed groups as small points over their boxes. Returns how many groups became
    {"boxes": n, "points": n}.
    """
    data = data[np.isfinite(data[y].astype(float))]
    sizes = data.groupby([x, hue], sort=False)[y].transform("size")
    boxed, few = data[sizes >= MIN_BOX_VALUES], data[sizes < MIN_BOX_VALUES]
    positions = {value: index for index, value in enumerate(order)}
    if not boxed.empty:
        import seaborn as sns  # here, not at the top: the workflow's plan imports this module and never draws

        with warnings.catch_warnings():  # seaborn 0.13 passes matplotlib's deprecated `vert`
            warnings.filterwarnings("ignore", message=".*vert: bool was deprecated", category=DeprecationWarning)
            sns.boxplot(data=boxed, x=x, y=y, hue=hue, order=list(order), hue_order=list(hue_order), palette=palette,
                        saturation=1.0, ax=ax, width=width, linewidth=1.0, fliersize=0 if overlay else fliersize,
                        dodge=dodge, legend=False)
        if overlay:
            _seeded_stripplot(data=boxed, x=x, y=y, hue=hue, order=list(order), hue_order=list(hue_order),
                          palette={level: overlay for level in hue_order}, dodge=dodge, size=3, jitter=0.12 * width,
                          ax=ax, legend=False)
    levels = len(hue_order) if dodge else 1
    each = width / levels
    for index, level in enumerate(hue_order):
        offset = (each * index + each / 2 - width / 2) if dodge else 0.0
        for value, rows in few[few[hue] == level].groupby(x, sort=False):
            spread = (np.arange(len(rows)) - (len(rows) - 1) / 2) * 0.3 * each
            ax.scatter(positions[value] + offset + spread, rows[y].astype(float), s=POINT_SIZE, color=palette[level],
                       edgecolor=POINT_EDGE, linewidth=0.7, zorder=3)
    ax.set_xticks(range(len(order)), [str(value) for value in order])
    ax.set_xlim(-0.5, len(order) - 0.5)
    ax.xaxis.grid(False)
    counts = {"boxes": int(boxed.groupby([x, hue]).ngroups) if not boxed.empty else 0,
              "points": int(few.groupby([x, hue]).ngroups) if not few.empty else 0}
    return counts


def mark_status_ticks(ax, data: pd.DataFrame, *, x: str, order: Sequence, per_run: str | None = None) -> None:
    """Append the run health of each ``x`` category to its tick label (:func:`style.status_label`)
    when ``data`` has a ``status`` column; ``per_run`` names a column whose first value's rows
    hold one row per run (e.g. the calibrator: every run has a raw and a Ψ row)."""
    if "status" not in data.columns:
        return
    labels = []
    for value in order:
        rows = data[data[x] == value]
        if per_run is not None and not rows.empty:
            rows = rows[rows[per_run] == rows[per_run].iloc[0]]
        labels.append(status_label(str(value), rows["status"], sep="\n"))
    ax.set_xticks(range(len(order)), labels)


def _seeded_stripplot(**kwargs) -> None:
    """seaborn's strip plot, its jitter drawn from a fixed seed: seaborn draws it from numpy's
    global generator, which would make the same figure's bytes differ from run to run. The
    caller's global generator state is left as it was."""
    import seaborn as sns

    state = np.random.get_state()
    try:
        np.random.seed(0)
        sns.stripplot(**kwargs)
    finally:
        np.random.set_state(state)
