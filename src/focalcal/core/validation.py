"""Input checks shared by metrics and calibrators.

Every public function that takes logits, probabilities or labels funnels them through
here, so bad input fails in one consistent way: a ``ValueError`` naming the argument
and the problem, before any work is done.
"""

from __future__ import annotations

import numbers
import sys

import numpy as np

from focalcal.core.constraints import PSI_GAMMA, SequenceOf, validate_parameters

#: A grid of focal parameters γ for Ψ^γ (komisarenko2024's γ_ev), each > −1.
GAMMA_GRID = SequenceOf(PSI_GAMMA)

# Bound on a probability row's sum that rounding alone can cause, in units of the storage
# dtype's eps (= 2u, u the unit roundoff). Each entry of a correctly rounded softmax is off by
# at most u relative (or half the smallest subnormal η below the normal range), so its row
# sums to 1 within u + K·η/2; one computed in the dtype itself (exp, sum and quotient each
# rounded) within 2u + u² + K·η/2. Allowing 3u + K·η also covers the float32 accumulation
# inside those kernels ((K-1)·u_float32 < u for K < 8000 in float16). Measured: float16 and
# bfloat16 softmax rows stay within 1.5u for K up to 10^4, while a row off by 1% still fails
# in float16 (3u = 0.0015); bfloat16 (3u = 0.012) holds 8 bits and cannot tell much more.
ROW_SUM_EPS = 1.5


def as_numpy(array, name: str) -> np.ndarray:
    """Return ``array`` (numpy array, torch tensor or sequence) as a numpy array.

    Half-precision tensors (float16, bfloat16, which numpy cannot hold) become float32.
    """
    if array is None:
        raise ValueError(f"{name} is None")
    if hasattr(array, "detach") and hasattr(array, "cpu"):  # torch.Tensor, without importing torch
        array = array.detach().cpu()
        if array.is_floating_point() and array.element_size() < 4:
            array = array.float()
        array = array.numpy()
    return np.asarray(array)


def row_sum_tolerance(dtype, n_classes: int, floor: float = 1e-4) -> float:
    """How far from 1 a row of ``n_classes`` probabilities stored in ``dtype`` (numpy or torch)
    may sum: rounding to that dtype alone (see ``ROW_SUM_EPS``), but never below ``floor``."""
    eps, smallest_subnormal = _float_limits(dtype)
    return max(floor, ROW_SUM_EPS * eps + n_classes * smallest_subnormal)


def _float_limits(dtype) -> tuple[float, float]:
    """(eps, smallest subnormal) of a floating dtype; float64's for anything else (ints become float64)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(dtype, torch.dtype):
        if not dtype.is_floating_point:
            return _float_limits(np.float64)
        info = torch.finfo(dtype)
        return info.eps, info.tiny * info.eps  # IEEE-style formats: smallest subnormal = tiny * eps
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        return _float_limits(np.float64)
    if not np.issubdtype(dtype, np.floating):
        return _float_limits(np.float64)
    info = np.finfo(dtype)
    return float(info.eps), float(info.smallest_subnormal)


def check_scores(scores, name: str = "logits", *, ndim: int = 2) -> np.ndarray:
    """Check a float (N, K) array of logits or probabilities: non-empty, finite."""
    return _checked_scores_and_range(scores, name, ndim)[0]


def _checked_scores_and_range(scores, name: str, ndim: int, with_row_sums: bool = False):
    """``check_scores``, and the checked array's (min, max) and float64 row sums (None unless
    ``with_row_sums``), found in the one pass that checks the values."""
    scores = as_numpy(scores, name)
    if scores.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D (n_samples, n_classes), got shape {scores.shape}")
    if scores.shape[0] == 0:
        raise ValueError(f"{name} is empty (0 samples)")
    if ndim == 2 and scores.shape[1] < 2:
        raise ValueError(f"{name} must have at least 2 classes, got shape {scores.shape}")
    if not np.issubdtype(scores.dtype, np.floating):
        if np.issubdtype(scores.dtype, np.number) or scores.dtype == bool:
            scores = scores.astype(np.float64)
        else:
            raise ValueError(f"{name} must be numeric, got dtype {scores.dtype}")
    elif scores.dtype.itemsize < 4:  # float16: numpy computes it slowly and its sums overflow at 65504
        scores = scores.astype(np.float32)
    row_sums = np.empty(scores.shape[0]) if with_row_sums else None
    return (scores, *_finite_range(scores, name, row_sums), row_sums)


# Rows per block of a blockwise pass: about 2 MiB of float64, so that the several reductions of
# one block read it from cache and the whole array crosses main memory once.
def _block_rows(n_classes: int) -> int:
    return max(1, (1 << 18) // max(1, n_classes))


def _finite_range(scores: np.ndarray, name: str, row_sums: np.ndarray | None = None) -> tuple[float, float]:
    """(min, max) of ``scores``, or a ValueError naming the first NaN or Inf; fills ``row_sums``
    (float64) with each row's sum when given, in the same pass.

    Reductions instead of an element-wise ``isfinite`` mask: min and max propagate NaN and
    reach ±Inf, so both are finite exactly when every entry is."""
    if scores.ndim != 2:
        lowest, highest = scores.min(), scores.max()
    else:
        step = _block_rows(scores.shape[1])
        ones = np.ones(scores.shape[1], dtype=scores.dtype)
        lows, highs = [], []
        for start in range(0, scores.shape[0], step):
            block = scores[start:start + step]
            lows.append(block.min())
            highs.append(block.max())
            if row_sums is not None:  # a matrix-vector product beats sum(axis=1)
                row_sums[start:start + step] = block @ ones if block.dtype == np.float64 else block.sum(
                    axis=1, dtype=np.float64)
        lowest, highest = np.min(lows), np.max(highs)
    if not (np.isfinite(lowest) and np.isfinite(highest)):
        bad = ~np.isfinite(scores)
        kind = "NaN" if np.isnan(scores).any() else "Inf"
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"{name} contains {kind} values ({int(bad.sum())} entries, first at index {first})")
    return float(lowest), float(highest)


def check_probs(probs, name: str = "probs", *, atol: float = 1e-4) -> np.ndarray:
    """Check an (N, K) array of probabilities: finite, in [0, 1], rows summing to 1.

    Rows may miss 1 by what rounding to the input's dtype explains (:func:`row_sum_tolerance`,
    at least ``atol``), so softmax outputs stored in float16 or bfloat16 pass. Half-precision
    input is returned as float32.
    """
    stored = getattr(probs, "dtype", None)  # before a bfloat16 tensor becomes float32
    probs, lowest, highest, row_sums = _checked_scores_and_range(probs, name, 2, with_row_sums=True)
    tolerance = row_sum_tolerance(stored if stored is not None else probs.dtype, probs.shape[1], atol)
    if lowest < 0 or highest > 1:
        raise ValueError(f"{name} must lie in [0, 1]; got min {lowest:.3g}, max {highest:.3g}")
    worst = int(np.argmax(np.abs(row_sums - 1)))
    if abs(row_sums[worst] - 1) > tolerance:
        raise ValueError(f"{name} rows must sum to 1 (within {tolerance:.2g} for {_dtype_name(stored, probs)}); "
                         f"row {worst} sums to {row_sums[worst]:.6g}")
    return probs


def _dtype_name(stored, probs: np.ndarray) -> str:
    return str(stored if stored is not None else probs.dtype).removeprefix("torch.")


def check_labels(labels, n_samples: int, n_classes: int, name: str = "labels") -> np.ndarray:
    """Check integer class labels of length ``n_samples`` in ``[0, n_classes)``."""
    labels = as_numpy(labels, name)
    if labels.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {labels.shape}")
    if labels.shape[0] != n_samples:
        raise ValueError(f"{name} has {labels.shape[0]} entries but there are {n_samples} samples (shape mismatch)")
    if labels.size and not np.issubdtype(labels.dtype, np.integer):
        if np.issubdtype(labels.dtype, np.floating) and np.all(labels == np.round(labels)):
            labels = labels.astype(np.int64)
        else:
            raise ValueError(f"{name} must be integer class indices, got dtype {labels.dtype}")
    if labels.size and (labels.min() < 0 or labels.max() >= n_classes):
        bad = labels[(labels < 0) | (labels >= n_classes)][0]
        raise ValueError(f"{name} out of range: found {bad}, expected 0..{n_classes - 1}")
    return labels.astype(np.int64, copy=False)


def check_scores_and_labels(scores, labels, name: str = "logits"):
    """Check (N, K) scores and their N labels together."""
    scores = check_scores(scores, name)
    labels = check_labels(labels, scores.shape[0], scores.shape[1])
    return scores, labels


def real_array(values, name: str) -> np.ndarray:
    """``values`` (numbers, nested sequences of them, or a numeric array) as a float64 array.

    ``np.asarray(values, dtype=float)`` would also take text ('1' -> 1.0) and booleans
    (True -> 1.0): a quoted number or a ``yes`` in a hand-written config would then run with a
    value nobody wrote. Those are refused here, naming ``name``.
    """
    if not _holds_only_reals(values):
        raise ValueError(f"{name} must hold real numbers (not text or booleans), got {values!r}")
    array = np.asarray(values)
    if not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
        raise ValueError(f"{name} must hold real numbers, got {values!r}")
    return array.astype(np.float64)


def _holds_only_reals(values) -> bool:
    if isinstance(values, np.ndarray):
        return np.issubdtype(values.dtype, np.integer) or np.issubdtype(values.dtype, np.floating)
    if isinstance(values, (list, tuple)):
        return all(_holds_only_reals(value) for value in values)
    return isinstance(values, numbers.Real) and not isinstance(values, (bool, np.bool_))


def check_gamma_grid(gammas, owner: str = "focal grid") -> np.ndarray:
    """``gammas`` (see :data:`GAMMA_GRID`) as a float64 array, or the validator's error naming ``owner``."""
    validate_parameters({"gammas": [GAMMA_GRID]}, {"gammas": gammas}, owner)
    return real_array(gammas, "gammas")
