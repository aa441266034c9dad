"""Reliability diagrams: one run, raw vs Ψ^γ (charoenphakdee2021 Fig 4) and the training-set
diagrams over epochs (mukhoti2020 Fig 1).

Bars are drawn from the bin table of :func:`focalcal.metrics.reliability_bins` (same bins as
``metrics.ece``): a bar spans its bin ``(lower, upper]`` and its height is the bin's accuracy;
empty bins have no bar height (0).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from scipy import special

from focalcal import metrics, theory
from focalcal._validation import check_scores_and_labels

from ._tables import as_frame, require_columns
from .style import PSI_COLOR, RAW_COLOR, corner_text, new_figure, paper_title, status_label, styled

BIN_COLUMNS = ("lower", "upper", "accuracy")


def draw_reliability(ax, bins: pd.DataFrame, *, color: str, label: str | None = None, alpha: float = 0.75,
                     diagonal: bool = True, part: tuple[float, float] = (0.0, 1.0)):
    """Accuracy bars of a bin table on ``ax`` (and the y = x line); returns the BarContainer.

    ``part`` = (start, end) fractions of each bin's width the bar covers, so two diagrams can
    share an axes side by side (e.g. raw in (0, 0.5), Ψ^γ in (0.5, 1)).
    """
    require_columns(bins, BIN_COLUMNS, "bins")
    start, end = part
    if not 0.0 <= start < end <= 1.0:
        raise ValueError(f"part must be (start, end) with 0 <= start < end <= 1, got {part!r}")
    accuracy = bins["accuracy"].to_numpy(dtype=np.float64)
    lower, upper = bins["lower"].to_numpy(dtype=np.float64), bins["upper"].to_numpy(dtype=np.float64)
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
    bins = metrics.reliability_bins(probs, labels, n_bins=n_bins, binning=binning)
    ece = metrics.ece(probs, labels, n_bins=n_bins, binning=binning)
    figure, axes = new_figure(2, 1, width=4.8, height=5.6, sharex=True)
    top, bottom = axes[0, 0], axes[1, 0]
    figure.get_layout_engine().set(h_pad=0.05)
    draw_reliability(top, bins, color=color, label="accuracy (bins)")
    top.set_xlabel("")
    text = f"ECE = {100 * ece:.2f} %  ({n_bins} {binning} bins)"
    if smooth:
        curve = smooth if isinstance(smooth, metrics.SmoothReliability) else metrics.smooth_reliability_curve(probs, labels)
        top.plot(*observed_part(curve, probs), color="0.1", lw=1.6, label="smoothed accuracy")
        text += f"\nsmECE = {100 * curve.smooth_ece:.2f} %"
        # above the panel: inside it, some model's bars are under any corner
        figure.legend(loc="outside upper center", ncol=2, frameon=False, fontsize="small")
    corner_text(top, text, loc="upper left")
    counts = bins["count"].to_numpy(dtype=np.float64)
    width = (bins["upper"] - bins["lower"]).to_numpy()
    bottom.bar(bins["lower"], 100 * counts / counts.sum(), width=width, align="edge", color=color, alpha=0.75,
               edgecolor="0.2", linewidth=0.5)
    bottom.set(xlim=(0, 1), xlabel="confidence (max predicted probability)", ylabel="% of samples")
    top.set_title(title)
    return figure


def observed_part(curve: metrics.SmoothReliability, probs) -> tuple[np.ndarray, np.ndarray]:
    """The smooth curve's (mesh, accuracy) over the observed confidences only: outside their range
    the kernel estimate has no data to average and relplot reports 0, which would read as a
    measured accuracy of 0."""
    confidence = np.asarray(probs, dtype=np.float64).max(axis=1)
    inside = (curve.mesh >= confidence.min()) & (curve.mesh <= confidence.max())
    return curve.mesh[inside], curve.accuracy[inside]


def _softmax(logits: np.ndarray) -> np.ndarray:
    return special.softmax(logits.astype(np.float64), axis=1)


@styled
def raw_vs_psi_reliability_figure(panels: Mapping[tuple[str, float], tuple], *, n_bins: int = 10,
                                  dataset: str | None = None, health: Mapping[tuple[str, float], str | None] | None = None):
    """charoenphakdee2021 Fig 4: reliability diagrams of raw softmax scores (red, ECE-raw) and of
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


TRAINING_RELIABILITY_COLUMNS = ("epoch", "lower", "upper", "count", "accuracy", "share")


@styled
def training_reliability_figure(table, *, epochs=None, color: str = "#1565c0", status: str | None = None):
    """mukhoti2020 Fig 1: training-set reliability diagrams (top row) and the % of training
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
