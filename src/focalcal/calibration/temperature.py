r"""Temperature scaling, softmax(z / T), with T chosen by validation NLL, ECE or focal loss.

* ``objective="nll"`` (Guo et al. 2017): the NLL of softmax(β z) is convex in β = 1/T (its
  second derivative is the mean variance of z under softmax(β z)), so a safeguarded Newton
  iteration on β finds the global optimum to machine precision. (LBFGS on raw T, the common
  recipe, can stop early on flat objectives.)
* ``objective="ece"`` (mukhoti2020 §5): grid search, by default T = 0.1, 0.2, …, 10 and ECE
  with 15 equal-width bins. mukhoti2020 writes "between 0 and 10, with a step of 0.1"; T = 0
  is not a temperature, so the grid starts at 0.1.
* ``objective="focal"`` (the TS_FL paradigm of charoenphakdee2021 §6.1): minimise the mean
  validation focal loss $-(1 - p_y)^\gamma \log p_y$. Not convex in general, so a log-spaced grid
  over the temperature bounds locates the basin and a bounded Brent search refines it.

With ``temperatures`` given, every objective is a plain grid search over those values
(komisarenko2024 §5.1 compares focal temperature scaling with TS "over the same values grid
and same choice criteria"); the scores are kept in ``grid_scores_``.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import ClassVar

import numpy as np
from scipy.special import log_softmax, logsumexp, softmax

from focalcal.calibration._base import Calibrator
from focalcal.core.constraints import GAMMA, POSITIVE, Interval, Options, SequenceOf, validate_parameters
from focalcal.core.types import ArrayLike
from focalcal.core.validation import real_array
from focalcal.metrics.binning import BINNING, N_BINS

#: mukhoti2020 §5 ("Temperature Scaling"): T from 0 to 10 in steps of 0.1 — without the
#: invalid T = 0, i.e. 0.1, 0.2, …, 10.0.
MUKHOTI_TEMPERATURES = np.round(np.arange(1, 101) * 0.1, 10)
#: The name a spec gives that grid (``temperatures: mukhoti``).
MUKHOTI_GRID_NAME = "mukhoti"

OBJECTIVES = ("nll", "ece", "focal")
#: A grid of temperatures to search: T > 0, any order.
TEMPERATURE_GRID = SequenceOf(POSITIVE)
#: The interval a continuous temperature search stays in: 0 < low < high < inf.
TEMPERATURE_BOUNDS = SequenceOf(Interval(numbers.Real, 0, None, closed="neither"), length=2, increasing=True)

# Log-spaced points used to find the basin of the (possibly non-convex) focal objective.
_FOCAL_SEARCH_POINTS = 161


class TemperatureScaling(Calibrator):
    """softmax(logits / T) with one temperature T > 0 fitted on validation data.

    T > 0 keeps the ranking of the classes, so the predicted class and the accuracy do not
    change; only the confidence does.

    Args:
        objective: ``"nll"`` (Guo et al. 2017), ``"ece"`` (mukhoti2020) or ``"focal"``
            (charoenphakdee2021's TS_FL): the validation criterion (module docstring).
        temperatures: 1-D array-like of T > 0, ``"mukhoti"`` (:data:`MUKHOTI_TEMPERATURES`)
            or ``None``: the grid to search. ``None`` means continuous optimisation within
            ``temperature_bounds`` for "nll" and "focal", and the mukhoti2020 grid for "ece".
        gamma: Focal-loss γ ≥ 0 for ``objective="focal"`` (ignored otherwise).
        n_bins: Number of bins of the ECE for ``objective="ece"`` (mukhoti2020: 15).
        binning: ``"width"`` (equal-width bins, mukhoti2020's) or ``"mass"``, for the ECE.
        temperature_bounds: ``(low, high)``, 0 < low < high, the search interval of continuous
            optimisation; a fitted T on a bound means the optimum lies at or beyond it.

    Attributes:
        temperature_ (float): The fitted temperature T.
        at_bound_ (bool): After a continuous search only: whether T lies on a bound of
            ``temperature_bounds``.
        temperatures_ (np.ndarray): After a grid search only: float array (n_T,), the grid.
        grid_scores_ (np.ndarray): After a grid search only: float array (n_T,), the
            validation objective at each grid value.
        n_classes_ (int): Number of classes K.

    Examples:
        >>> import numpy as np
        >>> from focalcal.calibration import TemperatureScaling
        >>> from focalcal.metrics import ece
        >>> rng = np.random.default_rng(0)
        >>> val_labels = rng.integers(0, 3, size=500)
        >>> val_logits = 4 * (np.eye(3)[val_labels] + rng.normal(size=(500, 3)))
        >>> ts = TemperatureScaling(objective="nll").fit(val_logits, val_labels)
        >>> round(ts.temperature_, 3), ts.at_bound_
        (3.63, False)
        >>> round(ece(ts.transform(val_logits), val_labels), 4)
        0.0379

        By validation ECE on mukhoti2020's grid, 0.1 to 10 in steps of 0.1:

        >>> ts_ece = TemperatureScaling(objective="ece").fit(val_logits, val_labels)
        >>> ts_ece.temperature_, ts_ece.grid_scores_.shape
        (3.8, (100,))
    """

    name = "temperature_scaling"
    _parameter_constraints: ClassVar[dict] = {
        "objective": [Options(OBJECTIVES)],
        "temperatures": [TEMPERATURE_GRID, Options((MUKHOTI_GRID_NAME,)), None],
        "gamma": [GAMMA],
        "n_bins": [N_BINS],
        "binning": [BINNING],
        "temperature_bounds": [TEMPERATURE_BOUNDS],
    }

    def __init__(
        self,
        objective: str = "nll",
        temperatures: ArrayLike | str | None = None,
        gamma: float = 0.0,
        n_bins: int = 15,
        binning: str = "width",
        temperature_bounds: tuple[float, float] = (1e-3, 1e3),
    ) -> None:
        self.objective = objective
        self.temperatures = temperatures
        self.gamma = gamma
        self.n_bins = n_bins
        self.binning = binning
        self.temperature_bounds = temperature_bounds

    @property
    def _fitted_attributes(self) -> tuple[str, ...]:
        if self._grid() is None:
            return ("temperature_", "at_bound_")
        return ("temperature_", "temperatures_", "grid_scores_")

    def _restore(self, attr, value):
        if attr == "temperature_":
            return float(value)
        if attr == "at_bound_":
            return bool(value)
        return super()._restore(attr, value)

    def _grid(self):
        if isinstance(self.temperatures, str):  # MUKHOTI_GRID_NAME, the one name _parameter_constraints allows
            return MUKHOTI_TEMPERATURES
        if self.temperatures is None:
            return MUKHOTI_TEMPERATURES if self.objective == "ece" else None
        return real_array(self.temperatures, "temperatures")

    def _fit(self, logits, labels):
        grid = self._grid()
        if grid is not None:
            scores = temperature_grid_scores(
                logits, labels, grid, self.objective, gamma=self.gamma, n_bins=self.n_bins, binning=self.binning
            )
            self.temperatures_ = grid.copy()
            self.grid_scores_ = scores
            self.temperature_ = float(grid[int(np.argmin(scores))])
            return
        low, high = (float(bound) for bound in self.temperature_bounds)
        if self.objective == "nll":
            beta = nll_optimal_inverse_temperature(logits, labels, 1.0 / high, 1.0 / low)
            temperature = 1.0 / beta
        else:
            temperature = _minimise_focal_temperature(logits, labels, self.gamma, low, high)
        self.temperature_ = float(np.clip(temperature, low, high))
        self.at_bound_ = bool(np.isclose(self.temperature_, low, rtol=1e-9) or np.isclose(self.temperature_, high, rtol=1e-9))

    def _transform(self, logits):
        return softmax(logits / self.temperature_, axis=1)


def check_temperature_grid(grid: ArrayLike, owner: str = "temperature grid") -> np.ndarray:
    """``grid`` (see :data:`TEMPERATURE_GRID`) as a float64 array, or the validator's error.

    Args:
        grid: 1-D array-like of temperatures, each a real number > 0, in any order.
        owner: What the error message names as the grid's owner.

    Returns:
        Float64 array (n_T,), the grid as given.

    Raises:
        ValueError: If a value is not a real number > 0 (text and booleans are refused).

    Examples:
        >>> from focalcal.calibration.temperature import check_temperature_grid
        >>> check_temperature_grid([0.5, 1, 2]).tolist()
        [0.5, 1.0, 2.0]
    """
    validate_parameters({"temperatures": [TEMPERATURE_GRID]}, {"temperatures": grid}, owner)
    return real_array(grid, "temperatures")


# -- NLL: convex in β = 1/T --------------------------------------------------------------------
def _nll_derivatives(centred_logits, label_logits, beta):
    """First and second derivative in β of mean NLL(softmax(β z)).

    d/dβ = mean(E_p[z] − z_y) and d²/dβ² = mean(Var_p[z]) ≥ 0, with p = softmax(β z).
    """
    probs = softmax(beta * centred_logits, axis=1)
    mean_logit = np.einsum("nk,nk->n", probs, centred_logits)
    deviation = centred_logits - mean_logit[:, None]
    variance = np.einsum("nk,nk->n", probs, deviation * deviation)
    return float(np.mean(mean_logit - label_logits)), float(np.mean(variance))


def nll_optimal_inverse_temperature(logits: np.ndarray, labels: np.ndarray, beta_min: float, beta_max: float, *,
                                    rtol: float = 1e-13, max_iter: int = 200) -> float:
    """β ∈ [beta_min, beta_max] minimising the mean NLL of softmax(β · logits).

    The NLL is convex in β, so its derivative is non-decreasing: the optimum is the root of the
    derivative, or a bound when the derivative has one sign on the interval. Newton steps are
    taken inside a shrinking bracket and replaced by a geometric bisection whenever they leave
    it, which guarantees convergence (the bracket halves in log β at worst).

    Args:
        logits: Float64 array (N, K) of logits.
        labels: Integer array (N,) of class indices in [0, K).
        beta_min: Smallest β = 1/T allowed, > 0.
        beta_max: Largest β allowed, > ``beta_min``.
        rtol: Relative tolerance on β at which the iteration stops.
        max_iter: Maximum number of Newton or bisection steps.

    Returns:
        The optimal inverse temperature β (a float; T = 1/β), a bound when the optimum lies at
        or beyond it.

    Examples:
        >>> import numpy as np
        >>> from focalcal.calibration.temperature import nll_optimal_inverse_temperature
        >>> rng = np.random.default_rng(0)
        >>> labels = rng.integers(0, 3, size=500)
        >>> logits = 4 * (np.eye(3)[labels] + rng.normal(size=(500, 3)))
        >>> beta = nll_optimal_inverse_temperature(logits, labels, 1e-3, 1e3)
        >>> round(1 / float(beta), 3)
        3.63
    """
    centred = logits - logits.max(axis=1, keepdims=True)
    label_logits = centred[np.arange(len(labels)), labels]
    slope_low, _ = _nll_derivatives(centred, label_logits, beta_min)
    if slope_low >= 0:
        return beta_min
    slope_high, _ = _nll_derivatives(centred, label_logits, beta_max)
    if slope_high <= 0:
        return beta_max
    low, high = beta_min, beta_max
    beta = float(np.clip(1.0, low, high))
    for _ in range(max_iter):
        slope, curvature = _nll_derivatives(centred, label_logits, beta)
        if slope == 0:
            return beta
        if slope < 0:
            low = beta
        else:
            high = beta
        newton = beta - slope / curvature if curvature > 0 else np.nan
        candidate = newton if low < newton < high else np.sqrt(low * high)
        if abs(candidate - beta) <= rtol * beta or high - low <= rtol * low:
            return candidate
        beta = candidate
    return beta


# -- grid scores ---------------------------------------------------------------------------------
def temperature_grid_scores(logits: np.ndarray, labels: np.ndarray, temperatures: ArrayLike, objective: str, *,
                            gamma: float = 0.0, n_bins: int = 15, binning: str = "width") -> np.ndarray:
    """Validation objective of softmax(logits / T) for every T of the grid, shape (n_T,).

    Args:
        logits: Float64 array (N, K) of logits.
        labels: Integer array (N,) of class indices in [0, K).
        temperatures: 1-D array-like (n_T,) of temperatures T > 0.
        objective: ``"ece"`` (top-label ECE), ``"nll"`` (mean NLL in nats) or ``"focal"``
            (mean focal loss with ``gamma``).
        gamma: Focal-loss γ ≥ 0 for ``objective="focal"`` (ignored otherwise).
        n_bins: Number of ECE bins.
        binning: ``"width"`` or ``"mass"``, the ECE's bins.

    Returns:
        Float64 array (n_T,): the objective at each temperature; an ECE is a fraction, not a
        percentage.

    Raises:
        ValueError: If a temperature is not a real number > 0.

    Examples:
        >>> import numpy as np
        >>> from focalcal.calibration.temperature import temperature_grid_scores
        >>> rng = np.random.default_rng(0)
        >>> labels = rng.integers(0, 3, size=500)
        >>> logits = 4 * (np.eye(3)[labels] + rng.normal(size=(500, 3)))
        >>> temperature_grid_scores(logits, labels, [1.0, 2.0, 4.0], "nll").round(4).tolist()
        [1.3166, 0.8669, 0.7797]
    """
    temperatures = check_temperature_grid(temperatures, "temperature_grid_scores")
    if objective == "ece":
        from focalcal.metrics.batched import ece_grid

        centred = logits - logits.max(axis=1, keepdims=True)
        correct = logits.argmax(axis=1) == labels
        # Top-label confidence of softmax(z/T) = 1 / Σ_j exp((z_j − max z) / T), one row per T,
        # through one reused buffer (a fresh (N, K) array per T costs its page faults).
        confidences = np.empty((len(temperatures), len(centred)))
        buffer = np.empty_like(centred)
        for row, t in enumerate(temperatures):
            np.exp(np.divide(centred, t, out=buffer), out=buffer)
            np.divide(1.0, buffer.sum(axis=1), out=confidences[row])
        return ece_grid(confidences, correct, n_bins=n_bins, binning=binning)
    return np.array([_mean_focal_loss(logits, labels, 1.0 / t, gamma if objective == "focal" else 0.0) for t in temperatures])


# -- focal loss objective --------------------------------------------------------------------------
def _mean_focal_loss(logits, labels, beta, gamma) -> float:
    """Mean −(1 − p_y)^γ log p_y of softmax(β z); γ = 0 gives the NLL.

    log(1 − p_y) is the logsumexp of the other classes' log-probabilities, so it stays exact
    when p_y rounds to 1.
    """
    log_probs = log_softmax(beta * logits, axis=1)
    rows = np.arange(len(labels))
    log_p_label = log_probs[rows, labels]
    if gamma == 0:
        return float(-log_p_label.mean())
    others = log_probs.copy()
    others[rows, labels] = -np.inf
    log_one_minus = logsumexp(others, axis=1)
    return float(-(np.exp(gamma * log_one_minus) * log_p_label).mean())


def _minimise_focal_temperature(logits, labels, gamma, low, high) -> float:
    """Global-looking minimum of the mean focal loss over T ∈ [low, high]."""
    return minimise_temperature(lambda t: _mean_focal_loss(logits, labels, 1.0 / t, gamma), low, high)


def minimise_temperature(objective: Callable[[float], float], low: float, high: float,
                         points: int = _FOCAL_SEARCH_POINTS) -> float:
    """T ∈ [low, high] minimising ``objective(T)``, which need not be convex.

    A log-spaced grid locates the basin, a bounded Brent search in log T refines it.

    Args:
        objective: Function of a temperature T > 0 returning the value to minimise.
        low: Lower bound of T, > 0.
        high: Upper bound of T, > ``low``.
        points: Number of log-spaced grid points of the first scan (161 by default, enough for
            the basins of the focal objective).

    Returns:
        The minimising temperature, a float in [low, high].

    Examples:
        >>> import math
        >>> from focalcal.calibration.temperature import minimise_temperature
        >>> round(minimise_temperature(lambda t: (math.log(t) - 1) ** 2, 0.1, 10.0), 6)
        2.718282
    """
    # imported here: fits that never search, e.g. in `focalcal calibrate`'s second process, do not load scipy.optimize
    from scipy.optimize import minimize_scalar

    log_grid = np.linspace(np.log(low), np.log(high), points)
    values = np.array([objective(np.exp(u)) for u in log_grid])
    best = int(np.argmin(values))
    left, right = log_grid[max(best - 1, 0)], log_grid[min(best + 1, len(log_grid) - 1)]
    result = minimize_scalar(lambda u: objective(np.exp(u)), bounds=(left, right), method="bounded",
                             options={"xatol": 1e-10})
    if result.fun <= values[best]:
        return float(np.exp(result.x))
    return float(np.exp(log_grid[best]))
