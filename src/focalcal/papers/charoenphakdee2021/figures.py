"""charoenphakdee2021's figures from runs, each a function that takes data and returns a Figure:
Fig 3 (predicted scores on a 1-D input against the known posterior), Fig 4 (reliability of raw
vs Ψ^γ scores) and Figs 5-6 (ECE over seeds against γ as box plots)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from scipy import special

from focalcal import metrics, theory
from focalcal.core.validation import check_probs, check_scores_and_labels
from focalcal.metrics.binning import bin_statistics, top_label
from focalcal.plots.boxes import MIN_BOX_VALUES, POINT_EDGE, boxes_or_points, mark_status_ticks
from focalcal.plots.frames import as_frame, require_columns
from focalcal.plots.reliability import draw_reliability
from focalcal.plots.style import (
    CLASS_COLORS,
    PSI_COLOR,
    RAW_COLOR,
    color_for,
    corner_text,
    new_figure,
    paper_title,
    status_label,
    styled,
)

# ----------------------------------------------------------------------------------- Fig 3

def posterior_scores(eta, probs, *, n_bins: int = 10) -> dict[str, float]:
    """ERR, KLD and ECE of predictions ``probs`` against the known posterior ``eta`` on a grid.

    Population versions, each point of the grid weighted equally: ERR = mean(1 − η_ŷ) (the
    expected error of predicting ŷ = argmax q), KLD = mean KL(η ‖ q), and ECE with the expected
    accuracy η_ŷ in place of a 0/1 hit (``n_bins`` equal-width bins, the binning of
    ``metrics.ece``). ERR and ECE are fractions.
    """
    eta = check_probs(eta, "eta").astype(np.float64)
    probs = check_probs(probs, "probs").astype(np.float64)
    if eta.shape != probs.shape:
        raise ValueError(f"eta and probs must have the same shape, got {eta.shape} and {probs.shape}")
    confidence, predicted = top_label(probs)
    expected_hit = eta[np.arange(len(eta)), predicted]
    bins = bin_statistics(confidence, expected_hit, n_bins, "width")
    return {
        "ERR": float(np.mean(1.0 - expected_hit)),
        "KLD": metrics.kl_divergence(eta, probs),
        "ECE": float(np.abs(bins.score_sum - bins.hit_sum).sum() / len(eta)),
    }


def _scores_text(scores: Mapping[str, float]) -> str:
    kld = round(float(scores["KLD"]), 4) + 0.0  # no "-0.0000" from a KL that is 0 up to rounding
    return f"ERR = {100 * scores['ERR']:.2f} %\nKLD = {kld:.4f}\nECE = {100 * scores['ECE']:.2f} %"


@styled
def synthetic_posterior_figure(x, eta, predictions: Mapping[str, np.ndarray], *, density=None,
                               scores: Mapping[str, Mapping[str, float]] | None = None, n_bins: int = 10,
                               ncols: int = 3):
    """Fig 3: predicted class scores along a 1-D input (solid) against the true posterior
    p(y|x) (dashed), one panel per prediction (e.g. CE, FL γ=1, FL γ=5, +TS_NLL, +Ψ^γ).

    ``x`` (N,) sorted grid; ``eta`` (N, K) true posterior on it; ``predictions`` maps a panel label
    label to its (N, K) probabilities on the grid. ``density`` (N,), if given, adds the panel of
    p(x) and p(x, y) (C21 Fig 3a). ERR/KLD/ECE printed per panel come from ``scores`` (e.g.
    measured on a test sample) or else from :func:`posterior_scores` on the grid.
    """
    x = np.asarray(x, dtype=np.float64)
    eta = check_probs(eta, "eta").astype(np.float64)
    if x.ndim != 1 or len(x) != len(eta):
        raise ValueError(f"x must be 1-D with one value per row of eta ({len(eta)}), got shape {x.shape}")
    if not isinstance(predictions, Mapping) or not predictions:
        raise ValueError("predictions must be a non-empty mapping label -> (N, K) probabilities")
    truth_panels = 1 if density is None else 2
    n_panels = truth_panels + len(predictions)
    ncols = min(ncols, n_panels)
    nrows = -(-n_panels // ncols)
    figure, axes = new_figure(nrows, ncols, height=2.5 * nrows + 0.6, sharex=True)
    flat = list(axes.flat)
    classes = range(eta.shape[1])
    if density is not None:
        density = np.asarray(density, dtype=np.float64)
        if density.shape != x.shape or np.any(density < 0) or not np.all(np.isfinite(density)):
            raise ValueError(f"density must be finite, non-negative, shape {x.shape}")
        ax = flat[0]
        ax.plot(x, density, color="0.2", label="p(x)")
        for k in classes:
            ax.fill_between(x, density * eta[:, k], color=CLASS_COLORS[k], alpha=0.35, label=f"p(x, y={k + 1})")
        ax.set(title="(a) p(x) and p(x, y)", ylabel="density")
        ax.legend(fontsize=8)
    ax = flat[truth_panels - 1]
    for k in classes:
        ax.plot(x, eta[:, k], color=CLASS_COLORS[k], label=f"p(y={k + 1} | x)")
    ax.set(title=f"({'ab'[truth_panels - 1]}) true posterior p(y | x)", ylim=(0, 1), ylabel="probability")
    ax.legend(fontsize=8)
    letters = "cdefghijklmnopqrstuvwxyz"
    for index, (label, probs) in enumerate(predictions.items()):
        probs = check_probs(probs, f"predictions[{label!r}]").astype(np.float64)
        if probs.shape != eta.shape:
            raise ValueError(f"predictions[{label!r}] has shape {probs.shape}, expected {eta.shape}")
        ax = flat[truth_panels + index]
        for k in classes:
            ax.plot(x, eta[:, k], color=CLASS_COLORS[k], ls="--", lw=1.0)
            ax.plot(x, probs[:, k], color=CLASS_COLORS[k])
        if scores is not None and label not in scores:
            raise ValueError(f"scores has no entry for label {label!r}")
        shown = scores[label] if scores is not None else posterior_scores(eta, probs, n_bins=n_bins)
        corner_text(ax, _scores_text(shown))
        ax.set(title=f"({letters[index]}) {label}", ylim=(0, 1), ylabel="predicted score")
    for ax in flat[n_panels:]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("input x")
    paper_title(figure, "Focal loss is η-underconfident; Ψ^γ recovers the posterior (solid: model, dashed: truth)",
                "charoenphakdee2021 Fig. 3")
    return figure


# ----------------------------------------------------------------------------------- Fig 4


def _softmax(logits: np.ndarray) -> np.ndarray:
    return special.softmax(logits.astype(np.float64), axis=1)


@styled
def raw_vs_psi_reliability_figure(panels: Mapping[tuple[str, float], tuple], *, n_bins: int = 10,
                                  dataset: str | None = None, health: Mapping[tuple[str, float], str | None] | None = None):
    """Fig 4: reliability diagrams of raw softmax scores (red, ECE-raw) and of
    their Ψ^γ transform (green, ECE-Ψ) for each training paradigm (rows) and γ (columns).

    ``panels`` maps (paradigm, γ) -> (logits, labels): (N, K) logits, already temperature-scaled
    for the TS_FL paradigm, and (N,) labels. ECE-raw, ECE-Ψ and ERR are printed on 0-100 scales
    as in the paper (10 equal-width bins by default, as there). ``health`` maps a panel's key to
    its run's health status; a run that did not train is marked in the panel title.
    """
    if not isinstance(panels, Mapping) or not panels:
        raise ValueError("panels must be a non-empty mapping (paradigm, gamma) -> (logits, labels)")
    paradigms = list(dict.fromkeys(paradigm for paradigm, _ in panels))
    gammas = sorted({float(gamma) for _, gamma in panels})
    figure, axes = new_figure(len(paradigms), len(gammas), width=min(9.0, 2.9 * len(gammas) + 0.4),
                              height=2.9 * len(paradigms) + 0.6)
    for (paradigm, gamma), value in panels.items():
        if not isinstance(value, tuple) or len(value) != 2:
            raise ValueError(f"panels[{(paradigm, gamma)!r}] must be a (logits, labels) pair")
        logits, labels = check_scores_and_labels(*value)
        ax = axes[paradigms.index(paradigm), gammas.index(float(gamma))]
        raw = _softmax(logits)
        transformed = theory.psi_from_logits(logits.astype(np.float64), float(gamma))
        for probs, colour, name, part in ((raw, RAW_COLOR, "raw", (0.0, 0.5)), (transformed, PSI_COLOR, "Ψ^γ", (0.5, 1.0))):
            draw_reliability(ax, metrics.reliability_bins(probs, labels, n_bins=n_bins), color=colour, alpha=0.85,
                             label=name, diagonal=name == "raw", part=part)
        ece_raw = 100 * metrics.ece(raw, labels, n_bins=n_bins)
        ece_psi = 100 * metrics.ece(transformed, labels, n_bins=n_bins)
        err = 100 * metrics.error(raw, labels)
        corner_text(ax, f"ECE-raw = {ece_raw:.2f}\nECE-Ψ = {ece_psi:.2f}\nERR = {err:.2f}", loc="upper left")
        status = (health or {}).get((paradigm, float(gamma)))
        ax.set_title(status_label(f"{paradigm}, γ = {float(gamma):g}", [status]), fontsize=10)
    for (row, column), ax in np.ndenumerate(axes):
        if not ax.has_data():
            ax.set_visible(False)
        ax.set_xlabel("confidence" if row == len(paradigms) - 1 else "")
        ax.set_ylabel("accuracy" if column == 0 else "")
    axes[0, -1].legend(loc="lower right", fontsize=8)
    where = f" on {dataset}" if dataset else ""
    paper_title(figure, f"Reliability of raw (red) vs Ψ^γ-transformed (green) scores{where}",
                "charoenphakdee2021 Fig. 4")
    return figure


# ------------------------------------------------------------------------------- Figs 5-6

def category_order(values) -> list:
    """Distinct ``values`` in numeric order where they read as numbers (γ "0.5" < "2" < "10"),
    then the others in text order."""

    def key(value):
        try:
            return (0, float(value), "")
        except (TypeError, ValueError):
            return (1, 0.0, str(value))

    return sorted(pd.unique(pd.Series(list(values))), key=key)


TIDY_COLUMNS = ("calibrator", "metric", "value")


@styled
def ece_box_plots(table, *, metric: str = "ece", calibrators: Mapping[str, str] | None = None,
                  panel_by: Sequence[str] = ("dataset", "model"), x: str = "gamma", scale: float = 100.0,
                  reproduces: str = "charoenphakdee2021 Figs. 5-6", ncols: int = 3):
    """Figs 5-6: box plots over seeds of a metric against γ, raw vs Ψ^γ, one panel per
    combination of ``panel_by`` columns (e.g. dataset × model, or paradigm).

    ``table``: tidy DataFrame (or CSV path) with columns ``x``, ``calibrator``, ``metric``,
    ``value`` and the ``panel_by`` columns; filter it to one study/paradigm first. ``calibrators``
    maps calibrator values to legend labels (default raw -> "ECE-raw", psi -> "ECE-Ψ"); each box
    is one (γ, calibrator). Values are multiplied by ``scale`` (100: percent, as the paper).
    A (γ, calibrator) with fewer than 3 seeds is drawn as its points, in the calibrator's colour,
    where its box would stand. An optional ``status`` column (run health, one per row) marks a
    γ whose runs did not all train on its tick label, e.g. "3 [collapsed 1/5]".
    """
    calibrators = dict(calibrators or {"raw": "ECE-raw", "psi": "ECE-Ψ"})
    table = as_frame(table, "table")
    panel_by = list(panel_by)
    require_columns(table, [*TIDY_COLUMNS, x, *panel_by], "table")
    data = table[(table["metric"] == metric) & table["calibrator"].isin(list(calibrators))].copy()
    if data.empty:
        raise ValueError(f"table has no rows with metric == {metric!r} and calibrator in {list(calibrators)}")
    data["shown"] = data["value"].astype(float) * scale
    data["calibrator label"] = data["calibrator"].map(calibrators)
    hue_order = [calibrators[m] for m in calibrators if m in set(data["calibrator"])]
    palette = {calibrators[m]: color_for(m) for m in calibrators}
    order = category_order(data[x])
    groups = list(data.groupby(panel_by, sort=False)) if panel_by else [((), data)]
    ncols = min(ncols, len(groups))
    nrows = -(-len(groups) // ncols)
    figure, axes = new_figure(nrows, ncols, height=3.0 * nrows + 0.6, sharey=False)
    flat = list(axes.flat)
    as_boxes = as_points = 0
    for index, ((key, group), ax) in enumerate(zip(groups, flat)):
        drawn = boxes_or_points(ax, group, x=x, y="shown", hue="calibrator label", order=order, hue_order=hue_order,
                                palette=palette)
        as_boxes, as_points = as_boxes + drawn["boxes"], as_points + drawn["points"]
        mark_status_ticks(ax, group, x=x, order=order, per_run="calibrator")
        key = key if isinstance(key, tuple) else (key,)
        ax.set_title(f"({'abcdefghijklmnop'[index]}) " + ", ".join(str(k) for k in key), fontsize=10)
        ax.set(xlabel="focal parameter γ" if x == "gamma" else x,
               ylabel=f"{metric.upper()}{' (%)' if scale == 100 else ''}")
    if as_boxes:
        handles = [Patch(facecolor=palette[label], edgecolor="0.25", label=label) for label in hue_order]
    else:  # only points drawn: the legend shows points
        handles = [Line2D([], [], ls="", marker="o", markersize=7, markerfacecolor=palette[label],
                          markeredgecolor=POINT_EDGE, label=label) for label in hue_order]
    flat[0].legend(handles=handles, fontsize=8, title=f"dots: < {MIN_BOX_VALUES} seeds" if as_points else None,
                   title_fontsize=8)
    for ax in flat[len(groups):]:
        ax.set_visible(False)
    paper_title(figure, f"{metric.upper()} over seeds against γ: raw vs Ψ^γ", reproduces)
    return figure

