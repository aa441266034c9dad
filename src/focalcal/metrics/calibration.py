"""Binned calibration errors: ECE, AdaECE, MCE, classwise ECE, reliability-diagram bins.

All values are fractions in [0, 1] (multiply by 100 for the papers' "%" tables).
Binning (edges, the right-closed convention, equal-mass ties) is defined once, in
:mod:`focalcal.metrics.binning`; read its docstring for exactly which bin a sample
lands in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from focalcal._validation import _block_rows, check_labels, check_probs
from focalcal.metrics.binning import (
    BinStatistics,
    bin_edges,
    bin_statistics,
    check_binning,
    check_n_bins,
    top_label,
)

if TYPE_CHECKING:
    import pandas as pd


def _top_label_bins(probs, labels, n_bins: int, binning: str) -> BinStatistics:
    probs = check_probs(probs)
    labels = check_labels(labels, probs.shape[0], probs.shape[1])
    confidence, predicted = top_label(probs)
    return bin_statistics(confidence, predicted == labels, check_n_bins(n_bins), check_binning(binning))


def ece(probs, labels, n_bins: int = 15, binning: str = "width") -> float:
    """Top-label expected calibration error, ``sum_i |B_i|/N * |acc_i - conf_i|``.

    ``binning="width"`` is the ECE of mukhoti2020 eq. 1 (M equal-width bins);
    ``binning="mass"`` is their AdaECE (eq. 3) and komisarenko2024's equal-mass ECE.
    ``probs`` is (N, K) probabilities (numpy or torch), ``labels`` N integer classes.
    Bins are right-closed, ``((i-1)/M, i/M]`` for width. Equal-mass bins hold every
    sample (without ties their sizes differ by at most one) but never split tied
    confidences, so with ties fewer than ``n_bins`` bins may be non-empty;
    ``reliability_bins`` shows which.
    Empty bins contribute nothing. Returns a fraction, not a percentage.
    """
    return _ece_of_bins(_top_label_bins(probs, labels, n_bins, binning))


def ece_of_confidence(confidence, correct, n_bins: int = 15, binning: str = "width") -> float:
    """``ece`` from each sample's top-label confidence (in [0, 1]) and whether its prediction
    is right: for samples too many to hold as (N, K) probabilities (pixels, gathered batch by
    batch)."""
    confidence = np.asarray(confidence, dtype=np.float64).reshape(-1)
    correct = np.asarray(correct).reshape(-1)
    if confidence.shape != correct.shape or confidence.size == 0:
        raise ValueError(f"confidence and correct must be non-empty and of one size, got {confidence.size} "
                         f"and {correct.size}")
    if not np.all((confidence >= 0) & (confidence <= 1)):
        raise ValueError("confidence must lie in [0, 1]")
    if correct.dtype != bool:
        raise ValueError(f"correct must be boolean, got dtype {correct.dtype}")
    return _ece_of_bins(bin_statistics(confidence, correct, check_n_bins(n_bins), check_binning(binning)))


def _ece_of_bins(bins: BinStatistics) -> float:
    # |B_i|/N * |A_i - C_i| = |sum of confidences - number correct| / N: no per-bin division.
    return float(np.abs(bins.score_sum - bins.hit_sum).sum() / bins.count.sum())


def mce(probs, labels, n_bins: int = 15, binning: str = "width") -> float:
    """Maximum calibration error, ``max_i |acc_i - conf_i|`` over the non-empty bins (mukhoti2020 eq. 2)."""
    bins = _top_label_bins(probs, labels, n_bins, binning)
    filled = bins.count > 0
    return float(np.max(np.abs(bins.score_sum[filled] - bins.hit_sum[filled]) / bins.count[filled]))


def reliability_bins(probs, labels, n_bins: int = 15, binning: str = "width") -> pd.DataFrame:
    """What a reliability diagram draws: one row per bin, all ``n_bins`` rows always present.

    Columns: ``lower``, ``upper`` (the bin is ``(lower, upper]``; the first bin also holds
    ``lower``), ``count`` (samples in the bin), ``confidence`` (mean top-label confidence)
    and ``accuracy`` (fraction correct). An empty bin has ``count == 0`` and NaN
    confidence/accuracy; with ``binning="mass"`` empty bins are how tied confidences show
    (see :mod:`focalcal.metrics.binning`). ``ece``/``mce`` are computed from the same bins.
    """
    import pandas as pd  # here, not at import: jobs that only compute scalar metrics skip its start-up

    frame = pd.DataFrame(reliability_columns(probs, labels, n_bins, binning))
    frame.index.name = "bin"
    return frame


def reliability_columns(probs, labels, n_bins: int = 15, binning: str = "width") -> dict[str, np.ndarray]:
    """:func:`reliability_bins`' columns as numpy arrays (no pandas import: ``focalcal calibrate``)."""
    bins = _top_label_bins(probs, labels, n_bins, binning)
    with np.errstate(invalid="ignore", divide="ignore"):
        confidence = bins.score_sum / bins.count
        accuracy = bins.hit_sum / bins.count
    return {
        "lower": bins.edges[:-1],
        "upper": bins.edges[1:],
        "count": bins.count,
        "confidence": np.where(bins.count > 0, confidence, np.nan),
        "accuracy": np.where(bins.count > 0, accuracy, np.nan),
    }


def classwise_ece(probs, labels, n_bins: int = 15, binning: str = "width") -> float:
    """Classwise ECE (Kull et al. 2019; Kumar et al. 2019's marginal calibration error with L1).

    For every class k, bin the probabilities ``probs[:, k]`` of all N samples and compare
    each bin's mean ``probs[:, k]`` with the fraction of its samples whose label is k:
    ``classwise_ece = (1/K) sum_k sum_i |B_ki|/N * |freq_ki - conf_ki|``. Unlike ``ece``
    it looks at every class, not only the predicted one; per-class probabilities can be
    exactly 0 or 1 and both land in a bin. Same bins and units as ``ece``.
    """
    probs = check_probs(probs)
    labels = check_labels(labels, probs.shape[0], probs.shape[1])
    n_bins, binning = check_n_bins(n_bins), check_binning(binning)
    n_samples, n_classes = probs.shape
    if binning == "width":
        return _classwise_ece_width(probs, labels, n_bins)
    total = 0.0
    for k in range(n_classes):  # equal-mass edges differ per class: one sort per class
        bins = bin_statistics(np.ascontiguousarray(probs[:, k]), labels == k, n_bins, binning)
        total += np.abs(bins.score_sum - bins.hit_sum).sum()
    return float(total / (n_samples * n_classes))


def _classwise_ece_width(probs: np.ndarray, labels: np.ndarray, n_bins: int) -> float:
    """Equal-width classwise ECE without a loop over classes.

    Every (class, bin) cell is binned exactly as ``bin_statistics`` bins it (edges in the
    scores' dtype, right-closed). With many classes nearly every probability lies in the
    first bin, so only the probabilities above the first inner edge are located and summed
    cell by cell; each class's first-bin sums are its totals minus its other bins.
    """
    n_samples, n_classes = probs.shape
    edges = bin_edges(probs[:, 0], n_bins, "width")
    class_hits = np.bincount(labels, minlength=n_classes).astype(np.float64)
    if n_bins == 1:
        class_totals = probs.sum(axis=0, dtype=np.float64)
        return float(np.abs(class_totals - class_hits).sum() / (n_samples * n_classes))
    class_totals = np.zeros(n_classes)
    cells, scores, hits = [], [], []
    step = _block_rows(n_classes)
    for start in range(0, n_samples, step):  # row blocks: each block is read from cache by every pass
        block = probs[start:start + step]
        class_totals += np.ones(len(block)) @ block if block.dtype == np.float64 else block.sum(
            axis=0, dtype=np.float64)
        flat = np.flatnonzero(block > edges[1])
        rows, classes = np.divmod(flat, n_classes)
        block_scores = block.ravel()[flat]
        cells.append(classes * n_bins + np.searchsorted(edges[1:-1], block_scores, side="left"))
        scores.append(block_scores)
        hits.append(labels[start + rows] == classes)
    cells, scores, hits = np.concatenate(cells), np.concatenate(scores), np.concatenate(hits)
    score_sum = np.bincount(cells, weights=scores, minlength=n_classes * n_bins).reshape(n_classes, n_bins)
    hit_sum = np.bincount(cells, weights=hits, minlength=n_classes * n_bins).reshape(n_classes, n_bins)
    score_sum[:, 0] = class_totals - score_sum[:, 1:].sum(axis=1)
    hit_sum[:, 0] = class_hits - hit_sum[:, 1:].sum(axis=1)
    return float(np.abs(score_sum - hit_sum).sum() / (n_samples * n_classes))


def smooth_ece(probs, labels) -> float:
    """Top-label smooth calibration error (smECE) of Błasiok & Nakkiran 2023: the calibration
    gap smoothed by a kernel whose bandwidth σ is chosen so that smECE = σ (their §4), which
    needs no bins. Computed by their ``relplot`` package on (confidence, correct).
    """
    confidence, correct = _confidence_and_correct(probs, labels)
    return float(_relplot("metrics").smECE(confidence, correct))


class SmoothReliability(NamedTuple):
    """The smooth reliability diagram of Błasiok & Nakkiran 2023 and its smECE, from one ``relplot`` call."""

    mesh: np.ndarray  # confidences in [0, 1]
    accuracy: np.ndarray  # smoothed accuracy on the mesh
    density: np.ndarray  # kernel density of the confidences on the mesh
    smooth_ece: float  # equal to smooth_ece(probs, labels)


def smooth_reliability_curve(probs, labels) -> SmoothReliability:
    """The smooth reliability curve and density at smECE's own bandwidth, with the smECE itself
    (computed once on the way; asking for both separately would compute it twice).

    These are the ``mesh``, ``mu``, ``density`` and ``ce`` of ``relplot.prepare_rel_diagram(f, y,
    plot_confidence_band=False, report_CE=True, report_CE_std=False)``, made by the same relplot
    calls (its default reflected Gaussian kernel, its kernel smoother's ``smooth``), without the
    plotting half of relplot that its package imports (scikit-learn, seaborn, pyplot: ~1 s).
    """
    confidence, correct = _confidence_and_correct(probs, labels)
    relplot_metrics, kernels, config = _relplot("metrics"), _relplot("kernels"), _relplot("config")
    mesh = np.linspace(0, 1, config.plot_mesh_pts)
    ce, sigma = relplot_metrics.smECE(confidence, correct, eps=0.001, return_width=True)
    kernel = kernels.ReflectedGaussianKernel(sigma)
    density = kernel.kde(confidence, mesh)
    accuracy, _ = kernel.smooth(confidence, correct, mesh)
    return SmoothReliability(np.asarray(mesh, dtype=np.float64), np.asarray(accuracy, dtype=np.float64),
                             np.asarray(density, dtype=np.float64), float(ce))


# The name relplot's computing modules are loaded under when relplot itself is not imported.
_RELPLOT_CORE = "focalcal._relplot_core"


def load_relplot() -> None:
    """Load relplot's computing modules now (a process about to fork a second that measures smECE)."""
    for name in ("metrics", "kernels", "config"):
        _relplot(name)


def _relplot(name: str):
    """relplot's submodule ``name`` (``metrics``, ``kernels`` or ``config``: numpy and scipy only).

    relplot's ``__init__`` also imports its plotting modules, and with them scikit-learn, seaborn,
    pandas and pyplot; where relplot is not imported yet, its package is set up under a private
    name without running that ``__init__``, so only the computing modules load (same files,
    same numbers)."""
    import importlib
    import sys

    if "relplot" in sys.modules:
        return importlib.import_module(f"relplot.{name}")
    if _RELPLOT_CORE not in sys.modules:
        import importlib.util

        found = importlib.util.find_spec("relplot")
        if found is None or not found.submodule_search_locations:
            raise ModuleNotFoundError("smECE needs the relplot package (pip install relplot)", name="relplot")
        spec = importlib.util.spec_from_file_location(_RELPLOT_CORE, found.origin,
                                                      submodule_search_locations=list(found.submodule_search_locations))
        sys.modules[_RELPLOT_CORE] = importlib.util.module_from_spec(spec)  # not executed: no __init__ imports
    return importlib.import_module(f"{_RELPLOT_CORE}.{name}")


def _confidence_and_correct(probs, labels) -> tuple[np.ndarray, np.ndarray]:
    probs = check_probs(probs)
    labels = check_labels(labels, probs.shape[0], probs.shape[1])
    confidence, predicted = top_label(probs)
    return confidence.astype(np.float64), (predicted == labels).astype(np.float64)
