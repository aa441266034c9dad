"""Calibration errors: ECE, AdaECE, MCE, classwise ECE, reliability-diagram bins, smooth ECE.

All values are fractions in [0, 1] (multiply by 100 for the papers' "%" tables).
Binning (edges, the right-closed convention, equal-mass ties) is defined once, in
:mod:`focalcal.metrics.binning`; read its docstring for exactly which bin a sample
lands in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from focalcal.core.extras import install_hint, require
from focalcal.core.validation import _block_rows, check_labels, check_probs
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

    from focalcal.core.types import ArrayLike


def _top_label_bins(probs, labels, n_bins: int, binning: str) -> BinStatistics:
    probs = check_probs(probs)
    labels = check_labels(labels, probs.shape[0], probs.shape[1])
    confidence, predicted = top_label(probs)
    return bin_statistics(confidence, predicted == labels, check_n_bins(n_bins), check_binning(binning))


def ece(probs: ArrayLike, labels: ArrayLike, n_bins: int = 15, binning: str = "width") -> float:
    r"""Top-label expected calibration error.

    $$
    \mathrm{ECE} = \sum_{i=1}^{M} \frac{|B_i|}{N} \, \lvert \mathrm{acc}(B_i) - \mathrm{conf}(B_i) \rvert
    $$

    ``binning="width"`` is the ECE of mukhoti2020 eq. 1 ($M$ equal-width bins);
    ``binning="mass"`` is their AdaECE (eq. 3) and komisarenko2024's equal-mass ECE.
    Bins are right-closed, $((i-1)/M, i/M]$ for width. Equal-mass bins hold every
    sample (without ties their sizes differ by at most one) but never split tied
    confidences, so with ties fewer than ``n_bins`` bins may be non-empty;
    :func:`reliability_bins` shows which. Empty bins contribute nothing.

    Args:
        probs: Predicted probabilities, shape (N, K), rows summing to 1 (numpy or torch).
        labels: True classes, integers in 0 .. K-1, shape (N,).
        n_bins: The number of bins $M$ (15, as in mukhoti2020).
        binning: ``"width"`` for equal-width bins (ECE) or ``"mass"`` for equal-mass bins (AdaECE).

    Returns:
        The ECE, a fraction in [0, 1], not a percentage.

    Raises:
        ValueError: ``probs`` or ``labels`` are malformed (NaN/Inf, rows not summing to 1,
            labels out of range, shape mismatch, no samples), or ``n_bins``/``binning`` are invalid.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics import ece
        >>> probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]])
        >>> labels = np.array([0, 1, 1, 1])
        >>> round(ece(probs, labels, n_bins=5), 4)
        0.25
        >>> round(ece(probs, labels, n_bins=2, binning="mass"), 4)
        0.35
    """
    return _ece_of_bins(_top_label_bins(probs, labels, n_bins, binning))


def ece_of_confidence(confidence: ArrayLike, correct: ArrayLike, n_bins: int = 15, binning: str = "width") -> float:
    """:func:`ece` from each sample's top-label confidence and whether its prediction is right.

    For samples too many to hold as (N, K) probabilities (pixels, gathered batch by batch).

    Args:
        confidence: Each sample's top-label confidence in [0, 1], any shape with N elements
            (flattened).
        correct: Whether each sample's top-label prediction is right, boolean, N elements.
        n_bins: The number of bins, as in :func:`ece`.
        binning: ``"width"`` or ``"mass"``, as in :func:`ece`.

    Returns:
        The ECE, a fraction in [0, 1]; equal to ``ece(probs, labels, n_bins, binning)`` for
        probabilities with these top-label confidences and hits.

    Raises:
        ValueError: ``confidence`` and ``correct`` are empty or differ in size, a confidence
            lies outside [0, 1], or ``correct`` is not boolean.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics import ece_of_confidence
        >>> confidence = np.array([0.9, 0.8, 0.7, 0.6])
        >>> correct = np.array([True, False, True, True])
        >>> round(ece_of_confidence(confidence, correct, n_bins=5), 4)
        0.25
    """
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


def mce(probs: ArrayLike, labels: ArrayLike, n_bins: int = 15, binning: str = "width") -> float:
    r"""Maximum calibration error over the non-empty bins (mukhoti2020 eq. 2).

    $$
    \mathrm{MCE} = \max_{i:\, |B_i| > 0} \lvert \mathrm{acc}(B_i) - \mathrm{conf}(B_i) \rvert
    $$

    Args:
        probs: Predicted probabilities, shape (N, K), rows summing to 1 (numpy or torch).
        labels: True classes, integers in 0 .. K-1, shape (N,).
        n_bins: The number of bins, as in :func:`ece`.
        binning: ``"width"`` or ``"mass"``, as in :func:`ece`.

    Returns:
        The MCE, a fraction in [0, 1], not a percentage.

    Raises:
        ValueError: Malformed input, as for :func:`ece`.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics import mce
        >>> probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]])
        >>> round(mce(probs, np.array([0, 1, 1, 1]), n_bins=5), 4)
        0.4
    """
    bins = _top_label_bins(probs, labels, n_bins, binning)
    filled = bins.count > 0
    return float(np.max(np.abs(bins.score_sum[filled] - bins.hit_sum[filled]) / bins.count[filled]))


def reliability_bins(probs: ArrayLike, labels: ArrayLike, n_bins: int = 15, binning: str = "width") -> pd.DataFrame:
    """What a reliability diagram draws: one row per bin, all ``n_bins`` rows always present.

    An empty bin has ``count == 0`` and NaN confidence/accuracy; with ``binning="mass"``
    empty bins are how tied confidences show (see :mod:`focalcal.metrics.binning`).
    :func:`ece` and :func:`mce` are computed from the same bins. Needs pandas
    (``focalcal[plots]``); :func:`reliability_columns` gives the same columns without it.

    Args:
        probs: Predicted probabilities, shape (N, K), rows summing to 1 (numpy or torch).
        labels: True classes, integers in 0 .. K-1, shape (N,).
        n_bins: The number of bins, as in :func:`ece`.
        binning: ``"width"`` or ``"mass"``, as in :func:`ece`.

    Returns:
        A DataFrame of ``n_bins`` rows indexed by ``bin`` (0-based), with columns ``lower``,
        ``upper`` (the bin is ``(lower, upper]``; the first bin also holds ``lower``),
        ``count`` (samples in the bin), ``confidence`` (mean top-label confidence) and
        ``accuracy`` (fraction correct).

    Raises:
        ValueError: Malformed input, as for :func:`ece`.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics import reliability_bins
        >>> probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]])
        >>> table = reliability_bins(probs, np.array([0, 1, 1, 1]), n_bins=2)
        >>> table["count"].tolist(), table["accuracy"].round(4).tolist()
        ([0, 4], [nan, 0.75])
    """
    # here, not at import: jobs that only compute scalar metrics skip its start-up
    pd = require("pandas", "focalcal.metrics.reliability_bins")
    frame = pd.DataFrame(reliability_columns(probs, labels, n_bins, binning))
    frame.index.name = "bin"
    return frame


def reliability_columns(probs: ArrayLike, labels: ArrayLike, n_bins: int = 15,
                        binning: str = "width") -> dict[str, np.ndarray]:
    """:func:`reliability_bins`' columns as numpy arrays (no pandas import: ``focalcal calibrate``).

    Args:
        probs: Predicted probabilities, shape (N, K), rows summing to 1 (numpy or torch).
        labels: True classes, integers in 0 .. K-1, shape (N,).
        n_bins: The number of bins, as in :func:`ece`.
        binning: ``"width"`` or ``"mass"``, as in :func:`ece`.

    Returns:
        ``lower``, ``upper``, ``count``, ``confidence`` and ``accuracy``, each an array of
        shape (n_bins,), as the columns of :func:`reliability_bins`.

    Raises:
        ValueError: Malformed input, as for :func:`ece`.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics import reliability_columns
        >>> probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]])
        >>> columns = reliability_columns(probs, np.array([0, 1, 1, 1]), n_bins=2)
        >>> columns["upper"].tolist(), columns["confidence"].round(4).tolist()
        ([0.5, 1.0], [nan, 0.75])
    """
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


def classwise_ece(probs: ArrayLike, labels: ArrayLike, n_bins: int = 15, binning: str = "width") -> float:
    r"""Classwise ECE (Kull et al. 2019; Kumar et al. 2019's marginal calibration error with L1).

    For every class $k$, bin the probabilities ``probs[:, k]`` of all $N$ samples and compare
    each bin's mean ``probs[:, k]`` with the fraction of its samples whose label is $k$:

    $$
    \mathrm{classwise\ ECE} = \frac{1}{K} \sum_{k=1}^{K} \sum_{i=1}^{M} \frac{|B_{ki}|}{N}
        \, \lvert \mathrm{freq}(B_{ki}) - \mathrm{conf}(B_{ki}) \rvert
    $$

    Unlike :func:`ece` it looks at every class, not only the predicted one; per-class
    probabilities can be exactly 0 or 1 and both land in a bin. Same bins and units as
    :func:`ece`.

    Args:
        probs: Predicted probabilities, shape (N, K), rows summing to 1 (numpy or torch).
        labels: True classes, integers in 0 .. K-1, shape (N,).
        n_bins: The number of bins per class, as in :func:`ece`.
        binning: ``"width"`` or ``"mass"`` (equal-mass edges cut per class), as in :func:`ece`.

    Returns:
        The classwise ECE, a fraction in [0, 1], not a percentage.

    Raises:
        ValueError: Malformed input, as for :func:`ece`.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics import classwise_ece
        >>> probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]])
        >>> round(classwise_ece(probs, np.array([0, 1, 1, 1]), n_bins=5), 4)
        0.375
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


def smooth_ece(probs: ArrayLike, labels: ArrayLike) -> float:
    r"""Top-label smooth calibration error (smECE) of Błasiok & Nakkiran 2023.

    The calibration gap smoothed by a kernel whose bandwidth $\sigma$ is chosen so that
    smECE $= \sigma$ (their §4), which needs no bins. Computed by their ``relplot`` package
    (``focalcal[plots]``) on (confidence, correct).

    Args:
        probs: Predicted probabilities, shape (N, K), rows summing to 1 (numpy or torch).
        labels: True classes, integers in 0 .. K-1, shape (N,).

    Returns:
        The smECE, a fraction in [0, 1], not a percentage.

    Raises:
        ValueError: Malformed input, as for :func:`ece`.
        ModuleNotFoundError: relplot is not installed.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics import smooth_ece
        >>> probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]])
        >>> round(smooth_ece(probs, np.array([0, 1, 1, 1])), 4)
        0.1377
    """
    confidence, correct = _confidence_and_correct(probs, labels)
    return float(_relplot("metrics").smECE(confidence, correct))


class SmoothReliability(NamedTuple):
    """The smooth reliability diagram of Błasiok & Nakkiran 2023 and its smECE, from one ``relplot`` call.

    Made by :func:`smooth_reliability_curve`.

    Attributes:
        mesh: float64 array, shape (P,): the confidences in [0, 1] the curve is evaluated at
            (relplot's ``plot_mesh_pts`` of them, evenly spaced).
        accuracy: float64 array, shape (P,): the smoothed accuracy at each mesh point.
        density: float64 array, shape (P,): the kernel density of the confidences at each mesh point.
        smooth_ece: The smECE, a fraction; equal to ``smooth_ece(probs, labels)``.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics import smooth_reliability_curve
        >>> probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]])
        >>> curve = smooth_reliability_curve(probs, np.array([0, 1, 1, 1]))
        >>> float(curve.mesh[0]), float(curve.mesh[-1]), curve.accuracy.shape == curve.mesh.shape
        (0.0, 1.0, True)
    """

    mesh: np.ndarray
    accuracy: np.ndarray
    density: np.ndarray
    smooth_ece: float


def smooth_reliability_curve(probs: ArrayLike, labels: ArrayLike) -> SmoothReliability:
    """The smooth reliability curve and density at smECE's own bandwidth, with the smECE itself.

    The smECE is computed once on the way; asking for both separately would compute it twice.
    These are the ``mesh``, ``mu``, ``density`` and ``ce`` of ``relplot.prepare_rel_diagram(f, y,
    plot_confidence_band=False, report_CE=True, report_CE_std=False)``, made by the same relplot
    calls (its default reflected Gaussian kernel, its kernel smoother's ``smooth``), without the
    plotting half of relplot that its package imports (scikit-learn, seaborn, pyplot).

    Args:
        probs: Predicted probabilities, shape (N, K), rows summing to 1 (numpy or torch).
        labels: True classes, integers in 0 .. K-1, shape (N,).

    Returns:
        The curve on relplot's mesh of confidences, its density and the smECE (a fraction).

    Raises:
        ValueError: Malformed input, as for :func:`ece`.
        ModuleNotFoundError: relplot is not installed.

    Examples:
        >>> import numpy as np
        >>> from focalcal.metrics import smooth_ece, smooth_reliability_curve
        >>> probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]])
        >>> labels = np.array([0, 1, 1, 1])
        >>> curve = smooth_reliability_curve(probs, labels)
        >>> round(curve.smooth_ece, 4) == round(smooth_ece(probs, labels), 4)
        True
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
    """Load relplot's computing modules now (a process about to fork a second that measures smECE).

    Only relplot's numpy/scipy modules load, not its plotting half (see :func:`smooth_ece`).

    Raises:
        ModuleNotFoundError: relplot is not installed.

    Examples:
        >>> from focalcal.metrics.calibration import load_relplot
        >>> load_relplot()
    """
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
            raise ModuleNotFoundError(f"smooth ECE needs relplot, which this install lacks: {install_hint('relplot')}",
                                      name="relplot")
        spec = importlib.util.spec_from_file_location(_RELPLOT_CORE, found.origin,
                                                      submodule_search_locations=list(found.submodule_search_locations))
        sys.modules[_RELPLOT_CORE] = importlib.util.module_from_spec(spec)  # not executed: no __init__ imports
    return importlib.import_module(f"{_RELPLOT_CORE}.{name}")


def _confidence_and_correct(probs, labels) -> tuple[np.ndarray, np.ndarray]:
    probs = check_probs(probs)
    labels = check_labels(labels, probs.shape[0], probs.shape[1])
    confidence, predicted = top_label(probs)
    return confidence.astype(np.float64), (predicted == labels).astype(np.float64)
