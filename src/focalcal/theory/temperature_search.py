"""The temperature closest to the focal calibration map (komisarenko2024 §3.2-3.3, Figs 2, 6):
a minimax search over a grid of logit vectors, the grid's size kept within a budget.

:func:`closest_temperature` scans 1/T coarsely on a thinned grid, then runs Brent's method on the
rows that carry the largest errors, adding rows until the full grid's error agrees.
"""

from __future__ import annotations

import math
from functools import lru_cache, partial

import numpy as np

from ..core.constraints import GAMMA
from ..core.types import ArrayLike
from .closed_forms import _gamma, _log_h, _log_q_pair_from_logits, _normalise_log_h, _Ops, _rho, temperature_bounds

__all__ = ["closest_temperature"]


@lru_cache(maxsize=2)  # a default K=3 grid is 12 MB; keep only the last two
def _sorted_logit_grid(num_classes: int, max_logit_gap: float, logit_step: float) -> np.ndarray:
    """Logit vectors 0 = s_0 >= s_1 >= ... >= s_{K-1} >= -max_logit_gap on a step grid.

    Softmax is shift-invariant and both maps are permutation-equivariant with a permutation-
    invariant error, so this covers every vector whose logits span at most ``max_logit_gap``.
    """
    n_steps = round(max_logit_gap / logit_step)
    levels = -np.arange(n_steps + 1) * (max_logit_gap / n_steps)
    index = np.arange(n_steps + 1)[:, None]  # non-decreasing index sequences = non-increasing logits
    for _ in range(num_classes - 2):
        last = index[:, -1]
        counts = n_steps + 1 - last
        repeated = np.repeat(index, counts, axis=0)
        offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        index = np.column_stack([repeated, np.repeat(last, counts) + offsets])
    # Column-major: the maps reduce over the K classes of each row, and numpy reduces a
    # narrow (N, K) array along axis 1 faster when each class is one contiguous column.
    logits = np.asfortranarray(np.column_stack([np.zeros(len(index)), levels[index]]))
    logits.setflags(write=False)
    return logits


_GRID_BUDGET = 2_000_000  # logit vectors; a few times that in float64 memory per map


def _grid_size(num_classes: int, n_steps: int) -> int:
    return math.comb(n_steps + num_classes - 1, num_classes - 1)


def _default_grid(num_classes: int) -> tuple[float, float]:
    if num_classes == 2:
        return 20.0, 0.001  # K24 §3.2: logits in (-20, 20), step 0.001
    if num_classes == 3:
        return 10.0, 0.01  # K24 §3.3: each logit in (-5, 5), step 0.01 -> pairwise gaps <= 10
    # Same span; the finest step (at most 0.01) whose sorted grid stays within ~1e6 vectors.
    n_steps = 1000
    while n_steps > 2 and _grid_size(num_classes, n_steps) > _GRID_BUDGET // 2:
        n_steps = int(n_steps * 0.9)
    return 10.0, 10.0 / n_steps


def _max_abs_difference(target: np.ndarray, logits: np.ndarray, inverse_temperature: float) -> float:
    return float(_row_errors(target, logits, inverse_temperature).max())


def _row_errors(target: np.ndarray, logits: np.ndarray, inverse_temperature: float) -> np.ndarray:
    """Per logit vector, the largest |softmax(s/T)_k − Ψ^γ(softmax(s))_k| over classes."""
    scaled = logits * inverse_temperature
    scaled -= scaled.max(axis=1, keepdims=True)
    np.exp(scaled, out=scaled)
    scaled /= scaled.sum(axis=1, keepdims=True)
    np.subtract(scaled, target, out=scaled)
    return np.abs(scaled, out=scaled).max(axis=1)


def closest_temperature(gamma: ArrayLike, num_classes: int, *, max_logit_gap: float | None = None,
                        logit_step: float | None = None) -> tuple[float, float] | tuple[np.ndarray, np.ndarray]:
    """Temperature T whose scaling softmax(s/T) is closest to the focal map Ψ^γ(softmax(s)).

    Minimax as in K24 §3.2-3.3 (Figs 2, 6): T minimises the largest absolute difference, over
    all classes and all logit vectors of a grid, between the two maps' probabilities. Grid
    defaults follow the paper: K = 2, logits in (-20, 20) step 0.001; K >= 3, each logit in
    (-5, 5) (pairwise gaps <= 10) step 0.01 for K = 3, coarser for K >= 4 (~1e6 sorted vectors:
    step 0.061 for K = 4, 0.71 for K = 10). Grids above 2e6 vectors are refused.

    Args:
        gamma: γ ≥ 0, a number or an array-like of any shape (γ = 0 gives T = 1, error 0).
        num_classes: Number of classes K ≥ 2.
        max_logit_gap: Largest difference between two logits of a grid vector; ``None`` for the
            paper's (20 for K = 2, 10 otherwise).
        logit_step: Grid step of the logits, in (0, max_logit_gap]; ``None`` for the paper's.

    Returns:
        ``(temperature, max_error)``: the minimax temperature T and the largest absolute
        probability difference at it (a probability, not a percentage); floats for a scalar
        γ, else two float64 arrays of γ's shape.

    Raises:
        ValueError: If a γ < 0, ``num_classes`` is not an integer ≥ 2, the grid arguments are
            out of range, or the grid would hold more than 2e6 vectors.

    Examples:
        K24 Fig 2 fits 1/T ≈ 0.95γ + 0.85 for K = 2 (here on a grid ten times coarser than the
        paper's, which gives the same T to 3 digits):

        >>> from focalcal.theory import closest_temperature
        >>> temperature, max_error = closest_temperature(1.0, num_classes=2, logit_step=0.01)
        >>> round(1 / temperature, 3), round(max_error, 4)
        (1.781, 0.0008)
    """
    gammas = _gamma(gamma, GAMMA, "closest_temperature", scalar=False)
    if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)) or num_classes < 2:
        raise ValueError(f"num_classes must be an integer >= 2, got {num_classes!r}")
    num_classes = int(num_classes)
    default_gap, default_step = _default_grid(num_classes)
    gap = float(default_gap if max_logit_gap is None else max_logit_gap)
    step = float(default_step if logit_step is None else logit_step)
    if not (np.isfinite(gap) and gap > 0):
        raise ValueError(f"max_logit_gap must be a positive number, got {max_logit_gap!r}")
    if not (np.isfinite(step) and 0 < step <= gap):
        raise ValueError(f"logit_step must lie in (0, max_logit_gap], got {logit_step!r}")
    n_points = _grid_size(num_classes, round(gap / step))
    if n_points > _GRID_BUDGET:
        raise ValueError(
            f"the logit grid would hold {n_points:.3g} vectors for num_classes={num_classes}; raise logit_step"
        )
    logits = _sorted_logit_grid(num_classes, gap, step)
    ops = _Ops()
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_q, log_1mq = _log_q_pair_from_logits(logits, ops)  # shared by every γ
        rho = _rho(log_q, log_1mq, ops)

    def focal_map(g: float) -> np.ndarray:  # psi_from_logits(logits, g), its γ-free parts computed once
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return np.asfortranarray(_normalise_log_h(_log_h(log_q, log_1mq, g, ops, rho), None, ops, log=False))

    temperatures, errors = np.empty(gammas.shape), np.empty(gammas.shape)
    for position, g in np.ndenumerate(gammas):
        temperatures[position], errors[position] = _closest_temperature_one(float(g), logits, focal_map, num_classes)
    if gammas.ndim == 0:
        return float(temperatures), float(errors)
    return temperatures, errors


def _closest_temperature_one(gamma: float, logits: np.ndarray, focal_map, num_classes: int) -> tuple[float, float]:
    if gamma == 0:
        return 1.0, 0.0
    target = focal_map(gamma)
    if num_classes == 2:
        t_low, t_high = temperature_bounds(gamma)  # Prop 3: the minimax T lies between them
        low, high = 1 / t_high, 1 / t_low
    else:
        low, high = 0.5, gamma + 2.0
    # Coarse scan on a thinned grid (the error need not be unimodal in 1/T for K >= 3), then
    # Brent between the scan's neighbours of the best candidate.
    thin = slice(None, None, max(1, len(logits) // 20000))
    candidates = np.linspace(low, high, 41)
    scan = np.array([_max_abs_difference(target[thin], logits[thin], c) for c in candidates])
    best = int(np.argmin(scan))
    left, right = candidates[max(best - 1, 0)], candidates[min(best + 1, len(candidates) - 1)]
    start_errors = _row_errors(target, logits, candidates[best])
    inverse_temperature, worst = _minimax_on_active_rows(target, logits, left, right, start_errors)
    at_best = float(start_errors.max())
    if at_best < worst:
        return 1 / float(candidates[best]), at_best
    return 1 / inverse_temperature, worst


_ACTIVE_ROWS = 4096


def _minimax_on_active_rows(target, logits, left: float, right: float, start_errors: np.ndarray) -> tuple[float, float]:
    """argmin over 1/T in [left, right] of the largest error over all rows, and that error.

    Brent runs on the rows that carry the largest errors (the active set), not on all ~1e6.
    Its minimum over a subset is a lower bound of the full objective at every T, so when the
    full grid's error at the subset's minimiser equals the subset's, that minimiser is the
    full one; otherwise the rows that exceed it join the set and Brent runs again. The set
    starts from the rows with the largest errors at both ends and at the scan's best point
    (``start_errors``).
    """
    from scipy import optimize  # here: importing the calibrators (theory's psi) does not load scipy.optimize

    def top_rows(errors: np.ndarray) -> np.ndarray:
        count = min(_ACTIVE_ROWS, len(errors))
        return np.argpartition(errors, len(errors) - count)[len(errors) - count:]

    ends = [_row_errors(target, logits, x) for x in (left, right)]
    active = np.unique(np.concatenate([top_rows(errors) for errors in (ends[0], start_errors, ends[1])]))
    for _ in range(20):
        active_target, active_logits = target[active], logits[active]
        result = optimize.minimize_scalar(
            partial(_max_abs_difference, active_target, active_logits),
            bounds=(left, right), method="bounded", options={"xatol": 1e-7},
        )
        errors = _row_errors(target, logits, float(result.x))
        worst = float(errors.max())
        if worst <= float(result.fun):
            return float(result.x), worst
        active = np.union1d(active, np.flatnonzero(errors > result.fun))
    raise RuntimeError("closest_temperature: the active-set search did not settle in 20 rounds")  # pragma: no cover
