"""komisarenko2024's figure from runs: Fig 8, the optimal temperature of focal temperature
scaling against γ_ev (its K = 3 simplex figures are in :mod:`.simplex`)."""

from __future__ import annotations

from collections.abc import Mapping

from focalcal.plots.frames import as_frame, require_columns
from focalcal.plots.style import color_for, new_figure, paper_title, styled

TEMPERATURE_COLUMNS = ("gamma_ev", "temperature", "loss")


@styled
def optimal_temperature_figure(table, *, panel_by: str | None = "dataset", colors: Mapping[str, str] | None = None):
    """Fig 8: the optimal temperature T of focal temperature scaling against γ_ev, one line per
    training loss (γ_tr), one panel per ``panel_by`` value (dataset) when that column exists.

    ``table`` (DataFrame or CSV path): columns gamma_ev, temperature, loss (one row per fitted
    (γ_ev, T); several rows per point — seeds — are averaged, with their range shaded).
    """
    table = as_frame(table, "table")
    require_columns(table, TEMPERATURE_COLUMNS, "table")
    colors = dict(colors or {})
    use_panels = panel_by is not None and panel_by in table.columns
    groups = list(table.groupby(panel_by, sort=False)) if use_panels else [(None, table)]
    figure, axes = new_figure(1, len(groups), width=min(9.0, 4.5 * len(groups)), height=3.8)
    for (name, group), ax in zip(groups, axes[0]):
        for loss, rows in group.groupby("loss", sort=False):
            summary = rows.groupby("gamma_ev")["temperature"].agg(["mean", "min", "max"]).sort_index()
            colour = colors.get(loss) or color_for(str(loss))
            ax.plot(summary.index, summary["mean"], "o-", ms=3, color=colour, label=str(loss))
            if (summary["max"] > summary["min"]).any():
                ax.fill_between(summary.index, summary["min"], summary["max"], color=colour, alpha=0.15, lw=0)
        ax.axhline(1.0, color="0.5", ls=":", lw=1)
        ax.set(xlabel="focal calibration parameter γ_ev", ylabel="optimal temperature T",
               title=str(name) if name is not None else None)
        ax.legend(title="training loss", fontsize=8)
    paper_title(figure, "Optimal temperature of focal temperature scaling against γ_ev", "komisarenko2024 Fig. 8")
    return figure

