"""mukhoti2020's training diagnostics, each a function that takes a run's tables and returns a
Figure: Fig 1 (training-set reliability over epochs), Figs 2-3 (NLL, entropy, error and ECE per
epoch), Fig 4b-d (per-sample gradient norms) and Fig 10 (feature norms). Fig 9 is in
:mod:`.confidences`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from focalcal.plots.frames import as_frame, require_columns
from focalcal.plots.reliability import draw_reliability
from focalcal.plots.style import color_for, new_figure, paper_title, status_label, styled

# ----------------------------------------------------------------------------------- Fig 1

TRAINING_RELIABILITY_COLUMNS = ("epoch", "lower", "upper", "count", "accuracy", "share")


@styled
def training_reliability_figure(table, *, epochs=None, color: str = "#1565c0", status: str | None = None):
    """Fig 1: training-set reliability diagrams (top row) and the % of training
    samples per confidence bin (bottom row) at several epochs.

    ``table``: the trainer's ``train_reliability.csv`` (DataFrame or path) with columns epoch,
    lower, upper, count, accuracy, share (one row per epoch and bin). ``epochs``: which ones
    (default: all in the table, in order). ``status``: the run's health, shown in the title
    when it is not "trained".
    """
    table = as_frame(table, "train_reliability table")
    require_columns(table, TRAINING_RELIABILITY_COLUMNS, "train_reliability table")
    available = sorted(table["epoch"].unique())
    epochs = available if epochs is None else list(epochs)
    unknown = [e for e in epochs if e not in available]
    if unknown or not epochs:
        raise ValueError(f"epochs {unknown or epochs} not in the table; it has epochs {available}")
    figure, axes = new_figure(2, len(epochs), width=min(9.0, 2.3 * len(epochs) + 0.5), height=5.0, sharey="row")
    for column, epoch in enumerate(epochs):
        bins = table[table["epoch"] == epoch].sort_values("lower")
        top, bottom = axes[0, column], axes[1, column]
        draw_reliability(top, bins, color=color)
        top.set_title(f"epoch {epoch}", fontsize=10)
        top.set_xlabel("")
        width = (bins["upper"] - bins["lower"]).to_numpy()
        bottom.bar(bins["lower"], 100 * bins["share"].to_numpy(dtype=np.float64), width=width, align="edge",
                   color=color, alpha=0.75, edgecolor="0.2", linewidth=0.5)
        bottom.set(xlim=(0, 1), xlabel="confidence", ylabel="% of samples" if column == 0 else "")
        if column:
            top.set_ylabel("")
    paper_title(figure, status_label("Training-set confidence over epochs", [status]), "mukhoti2020 Fig. 1")
    return figure


# -------------------------------------------------------------------------------- Figs 2-3


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
    """Fig 2: one run's calibration diagnostics per epoch — (a) train and (b) ``eval_split``
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
    """Fig 3: diagnostics per epoch of several runs (cross-entropy vs focal γ = 1, 2, 3):
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


# ------------------------------------------------------------------------------ Figs 4b-d, 10

GRADIENT_NORM_FLOOR = 1e-8  # log-scale bins: smaller norms (a gradient that has died) go in the first bin


@styled
def gradient_norm_histograms_figure(tables: Mapping[str, object], *, epochs: Sequence[int] | None = None,
                                    colors: Mapping[str, str] | None = None, n_bins: int = 40):
    """Fig 4(b-d): histograms over the training set of each sample's gradient norm of the
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
    """Fig 10: (a) the L2 norm of the features entering the last linear layer (the last
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
