"""Figures drawn from training runs: they read tidy tables, ``history.csv`` frames or arrays.

charoenphakdee2021 (C21) Fig 3 (synthetic 1-D posteriors) and Figs 5-6 (ECE box plots),
komisarenko2024 (K24) Fig 8 (optimal T against γ_ev), mukhoti2020 (M20) Figs 2-3 (training
diagnostics). The reliability figures (C21 Fig 4, M20 Fig 1) are in
:mod:`focalcal.plots.reliability`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from focalcal import metrics
from focalcal._validation import check_probs
from focalcal.metrics.binning import bin_statistics, top_label

from ._boxes import MIN_BOX_VALUES, POINT_EDGE, boxes_or_points, category_order, mark_status_ticks
from ._tables import as_frame, require_columns
from .style import CLASS_COLORS, color_for, corner_text, new_figure, paper_title, status_label, styled

# ------------------------------------------------------------------------------ C21 Fig 3


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
    """C21 Fig 3: predicted class scores along a 1-D input (solid) against the true posterior
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


# --------------------------------------------------------------------------- C21 Figs 5-6

TIDY_COLUMNS = ("calibrator", "metric", "value")


@styled
def ece_box_plots(table, *, metric: str = "ece", calibrators: Mapping[str, str] | None = None,
                  panel_by: Sequence[str] = ("dataset", "model"), x: str = "gamma", scale: float = 100.0,
                  reproduces: str = "charoenphakdee2021 Figs. 5-6", ncols: int = 3):
    """C21 Figs 5-6: box plots over seeds of a metric against γ, raw vs Ψ^γ, one panel per
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


# ------------------------------------------------------------------------------ K24 Fig 8

TEMPERATURE_COLUMNS = ("gamma_ev", "temperature", "loss")


@styled
def optimal_temperature_figure(table, *, panel_by: str | None = "dataset", colors: Mapping[str, str] | None = None):
    """K24 Fig 8: the optimal temperature T of focal temperature scaling against γ_ev, one line per
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


# --------------------------------------------------------------------------- M20 Figs 2-3


def _lr_drops(ax, history: pd.DataFrame) -> None:
    """Dotted vertical lines at the epochs where the learning rate changes."""
    if "lr" not in history.columns or len(history) < 2:
        return
    changed = history["lr"].to_numpy(dtype=np.float64)
    for epoch in history["epoch"].to_numpy()[1:][np.diff(changed) != 0]:
        ax.axvline(epoch, color="0.6", ls=":", lw=1, gid="lr_drop")


def _history(history, name: str) -> pd.DataFrame:
    frame = as_frame(history, name)
    require_columns(frame, ["epoch"], name)
    return frame.sort_values("epoch")


_SPLIT_CURVES = (  # (column suffix, label, line style)
    ("nll", "NLL", "-"),
    ("nll_correct", "NLL, correct", "-"),
    ("nll_incorrect", "NLL, incorrect", "-"),
    ("entropy_correct", "entropy, correct", "--"),
    ("entropy_incorrect", "entropy, incorrect", "--"),
)
_CURVE_COLORS = {"nll": "0.15", "nll_correct": "#2e7d32", "nll_incorrect": "#c62828",
                 "entropy_correct": "#2e7d32", "entropy_incorrect": "#c62828"}


@styled
def training_curves_figure(history, *, eval_split: str = "test", run: str = "cross-entropy", status: str | None = None):
    """M20 Fig 2: one run's calibration diagnostics per epoch — (a) train and (b) ``eval_split``
    NLL, split by correctly / incorrectly classified samples, with the softmax entropy of each;
    (c) train and evaluation error and evaluation ECE.

    ``history``: the trainer's ``history.csv`` (DataFrame or path). Curves whose columns are
    absent are skipped (the trainer does not split train NLL by correctness); the split's
    overall NLL and the errors are required. Dotted lines mark learning-rate drops. ``run``
    names the run in the title, marked with its health ``status`` when that is not "trained".
    """
    history = _history(history, "history")
    require_columns(history, ["train_nll", f"{eval_split}_nll", "train_error", f"{eval_split}_error",
                              f"{eval_split}_ece"], "history")
    epochs = history["epoch"]
    figure, axes = new_figure(1, 3, height=3.8)
    for ax, split, letter in ((axes[0, 0], "train", "a"), (axes[0, 1], eval_split, "b")):
        for suffix, label, style in _SPLIT_CURVES:
            column = f"{split}_{suffix}"
            if column in history.columns:
                ax.plot(epochs, history[column], color=_CURVE_COLORS[suffix], ls=style, label=label)
        _lr_drops(ax, history)
        ax.set(xlabel="epoch", ylabel="nats", title=f"({letter}) {split} NLL and entropy")
        ax.legend(fontsize=8)
    ax = axes[0, 2]
    ax.plot(epochs, 100 * history["train_error"], color="0.5", label="train error")
    ax.plot(epochs, 100 * history[f"{eval_split}_error"], color="0.15", label=f"{eval_split} error")
    ax.plot(epochs, 100 * history[f"{eval_split}_ece"], color="#c62828", label=f"{eval_split} ECE")
    _lr_drops(ax, history)
    ax.set(xlabel="epoch", ylabel="%", title="(c) error and ECE")
    ax.legend(fontsize=8)
    paper_title(figure, f"How calibration changes during training ({status_label(run, [status])})", "mukhoti2020 Fig. 2")
    return figure


_COMPARISON_PANELS = (  # (column, y label, title)
    ("{split}_nll", "NLL (nats)", "(a) {split} NLL"),
    ("{split}_nll_correct", "NLL (nats)", "(b) {split} NLL, correct"),
    ("{split}_nll_incorrect", "NLL (nats)", "(c) {split} NLL, incorrect"),
    ("{split}_entropy_incorrect", "entropy (nats)", "(d) {split} entropy, incorrect"),
    ("weight_norm", "‖W‖₂ of the last linear layer", "(e) weight norm"),
)


@styled
def training_comparison_figure(histories: Mapping[str, object], *, eval_split: str = "test",
                               colors: Mapping[str, str] | None = None):
    """M20 Fig 3: diagnostics per epoch of several runs (cross-entropy vs focal γ = 1, 2, 3):
    (a) NLL, (b) NLL of correct and (c) of incorrect samples, (d) entropy of incorrect samples on
    ``eval_split``, (e) L2 norm of the last linear layer's weights.

    ``histories`` maps a run label (e.g. "cross_entropy", "focal γ=1") to its ``history.csv``
    (DataFrame or path). Colours come from :func:`focalcal.plots.style.color_for` unless given.
    """
    if not isinstance(histories, Mapping) or not histories:
        raise ValueError("histories must be a non-empty mapping label -> history DataFrame")
    colors = dict(colors or {})
    columns = [template.format(split=eval_split) for template, _, _ in _COMPARISON_PANELS]
    frames = {}
    for label, history in histories.items():
        frames[label] = _history(history, f"histories[{label!r}]")
        require_columns(frames[label], columns, f"histories[{label!r}]")
    figure, axes = new_figure(2, 3, height=6.4, sharex=True)
    flat = list(axes.flat)
    for ax, (template, ylabel, title), column in zip(flat, _COMPARISON_PANELS, columns):
        for label, frame in frames.items():
            ax.plot(frame["epoch"], frame[column], color=colors.get(label) or color_for(str(label)), label=str(label))
        _lr_drops(ax, next(iter(frames.values())))
        ax.set(ylabel=ylabel, title=title.format(split=eval_split))
    for ax in axes[-1]:
        ax.set_xlabel("epoch")
    handles, labels = flat[0].get_legend_handles_labels()
    flat[-1].axis("off")
    flat[-1].legend(handles, labels, loc="center", title="training loss")
    paper_title(figure, "Calibration diagnostics during training: cross-entropy vs focal loss", "mukhoti2020 Fig. 3")
    return figure


# --------------------------------------------------------------------------- M20 Figs 4b-d, 10

GRADIENT_NORM_FLOOR = 1e-8  # log-scale bins: smaller norms (a gradient that has died) go in the first bin


@styled
def gradient_norm_histograms_figure(tables: Mapping[str, object], *, epochs: Sequence[int] | None = None,
                                    colors: Mapping[str, str] | None = None, n_bins: int = 40):
    """M20 Fig 4(b-d): histograms over the training set of each sample's gradient norm of the
    last linear layer, one panel per recorded epoch, one histogram per run (cross-entropy vs
    focal loss).

    ``tables`` maps a run label to its ``train_gradient_norms.csv`` (columns ``epoch``,
    ``gradient_norm``; DataFrame or path). ``epochs``: the panels (default: every epoch all runs
    recorded). Bins are log-spaced, since focal loss shrinks the gradients of confident samples
    by orders of magnitude (Prop 1); norms below ``GRADIENT_NORM_FLOOR`` count in the first bin.
    Each run's median is marked with a dashed line.
    """
    if not isinstance(tables, Mapping) or not tables:
        raise ValueError("tables must be a non-empty mapping label -> gradient-norm table")
    frames = {}
    for label, table in tables.items():
        frames[label] = as_frame(table, f"tables[{label!r}]")
        require_columns(frames[label], ["epoch", "gradient_norm"], f"tables[{label!r}]")
        if not np.isfinite(frames[label]["gradient_norm"]).all():
            raise ValueError(f"tables[{label!r}] has non-finite gradient norms")
    shared = sorted(set.intersection(*(set(f["epoch"].astype(int)) for f in frames.values())))
    epochs = shared if epochs is None else [int(e) for e in epochs]
    missing = {label: sorted(set(epochs) - set(f["epoch"].astype(int))) for label, f in frames.items()}
    missing = {label: m for label, m in missing.items() if m}
    if missing:
        raise ValueError(f"no gradient norms recorded at epoch(s) {missing}")
    if not epochs:
        raise ValueError("the runs share no recorded epoch")
    colors = dict(colors or {})
    values = np.concatenate([f["gradient_norm"].to_numpy(np.float64) for f in frames.values()])
    high = max(float(values.max()), GRADIENT_NORM_FLOOR * 10)
    edges = np.geomspace(GRADIENT_NORM_FLOOR, high * 1.01, n_bins + 1)
    figure, axes = new_figure(1, len(epochs), height=3.8, sharey=True, squeeze=False)
    for index, (ax, epoch) in enumerate(zip(axes[0], epochs)):
        for label, frame in frames.items():
            norms = frame.loc[frame["epoch"].astype(int) == epoch, "gradient_norm"].to_numpy(np.float64)
            color = colors.get(label) or color_for(str(label))
            ax.hist(np.maximum(norms, GRADIENT_NORM_FLOOR), bins=edges, color=color, alpha=0.45,
                    label=f"{label} (median {np.median(norms):.2g})")
            ax.axvline(np.median(norms), color=color, ls="--", lw=1.2)
        ax.set(xscale="log", xlabel="‖∂L_i/∂W‖ of the last linear layer",
               title=f"({chr(ord('b') + index)}) epoch {epoch}")
        ax.legend(fontsize=7, loc="upper left")
    axes[0, 0].set_ylabel("training samples")
    paper_title(figure, "Per-sample gradient norms of the last linear layer over the training set",
                "mukhoti2020 Fig. 4(b-d)")
    return figure


@styled
def feature_norms_figure(histories: Mapping[str, object], *, colors: Mapping[str, str] | None = None):
    """M20 Fig 10: (a) the L2 norm of the features entering the last linear layer (the last
    block's output), averaged over the training set, per epoch; (b) the last layer's weight
    norm (Fig 3e) beside it, since the paper reads the two orderings together (App. D).

    ``histories`` maps a run label to its ``history.csv`` (columns ``epoch``,
    ``train_feature_norm``, ``weight_norm``; DataFrame or path).
    """
    if not isinstance(histories, Mapping) or not histories:
        raise ValueError("histories must be a non-empty mapping label -> history DataFrame")
    colors = dict(colors or {})
    frames = {}
    for label, history in histories.items():
        frames[label] = _history(history, f"histories[{label!r}]")
        require_columns(frames[label], ["train_feature_norm", "weight_norm"], f"histories[{label!r}]")
    figure, axes = new_figure(1, 2, height=3.8, sharex=True)
    for ax, column, ylabel, title in ((axes[0, 0], "train_feature_norm", "mean ‖h(x)‖₂ over the training set",
                                       "(a) feature norm (last block)"),
                                      (axes[0, 1], "weight_norm", "‖W‖₂ of the last linear layer", "(b) weight norm")):
        for label, frame in frames.items():
            ax.plot(frame["epoch"], frame[column], color=colors.get(label) or color_for(str(label)), label=str(label))
        _lr_drops(ax, next(iter(frames.values())))
        ax.set(xlabel="epoch", ylabel=ylabel, title=title)
    axes[0, 0].legend(fontsize=8, title="training loss")
    paper_title(figure, "Norm of the last block's features during training", "mukhoti2020 Fig. 10")
    return figure
