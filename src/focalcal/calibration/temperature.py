"""Temperature scaling, softmax(z / T), with T chosen by validation NLL, ECE or focal loss.

* ``objective="nll"`` (Guo et al. 2017): the NLL of softmax(β z) is convex in β = 1/T (its
  second derivative is the mean variance of z under softmax(β z)), so a safeguarded Newton
  iteration on β finds the global optimum to machine precision. (LBFGS on raw T, the common
  recipe, can stop early on flat objectives.)
* ``objective="ece"`` (mukhoti2020 §5): grid search, by default T = 0.1, 0.2, …, 10 and ECE
  with 15 equal-width bins. mukhoti2020 writes "between 0 and 10, with a step of 0.1"; T = 0
  is not a temperature, so the grid starts at 0.1.
* ``objective="focal"`` (the TS_FL paradigm of charoenphakdee2021 §6.1): minimise the mean
  validation focal loss −(1 − p_y)^γ log p_y. Not convex in general, so a log-spaced grid
  over the temperature bounds locates the basin and a bounded Brent search refines it.

With ``temperatures`` given, every objective is a plain grid search over those values
(komisarenko2024 §5.1 compares focal temperature scaling with TS "over the same values grid
and same choice criteria"); the scores are kept in ``grid_scores_``.
"""

from __future__ import annotations

import numbers
from typing import ClassVar

import numpy as np
from scipy.special import log_softmax, logsumexp, softmax

from focalcal._constraints import GAMMA, POSITIVE, Interval, Options, SequenceOf, validate_parameters
from focalcal._validation import real_array
from focalcal.calibration._base import Calibrator
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

    Parameters
    ----------
    objective : "nll", "ece" or "focal"
        Validation criterion (see the module docstring).
    temperatures : array of T > 0, "mukhoti" or None
        Grid to search. ``None`` means continuous optimisation within ``temperature_bounds``
        for "nll" and "focal", and the mukhoti2020 grid for "ece".
    gamma : float
        Focal-loss γ ≥ 0 for ``objective="focal"`` (ignored otherwise).
    n_bins, binning : int, "width" | "mass"
        ECE estimator for ``objective="ece"`` (mukhoti2020: 15 equal-width bins).
    temperature_bounds : (float, float)
        Search interval for continuous optimisation; a fitted T on a bound means the optimum
        lies at or beyond it (``at_bound_`` is then True).

    Fitted attributes: ``temperature_``; with a grid also ``temperatures_`` and
    ``grid_scores_`` (objective per grid value); ``at_bound_`` for continuous searches.
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
        temperatures=None,
        gamma: float = 0.0,
        n_bins: int = 15,
        binning: str = "width",
        temperature_bounds=(1e-3, 1e3),
    ):
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


def check_temperature_grid(grid, owner: str = "temperature grid") -> np.ndarray:
    """``grid`` (see :data:`TEMPERATURE_GRID`) as a float64 array, or the validator's error."""
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


def nll_optimal_inverse_temperature(logits, labels, beta_min, beta_max, *, rtol=1e-13, max_iter=200) -> float:
    """β ∈ [beta_min, beta_max] minimising the mean NLL of softmax(β · logits).

    The NLL is convex in β, so its derivative is non-decreasing: the optimum is the root of the
    derivative, or a bound when the derivative has one sign on the interval. Newton steps are
    taken inside a shrinking bracket and replaced by a geometric bisection whenever they leave
    it, which guarantees convergence (the bracket halves in log β at worst).
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
def temperature_grid_scores(logits, labels, temperatures, objective, *, gamma=0.0, n_bins=15, binning="width"):
    """Validation objective of softmax(logits / T) for every T of the grid, shape (n_T,)."""
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


def minimise_temperature(objective, low: float, high: float, points: int = _FOCAL_SEARCH_POINTS) -> float:
    """T ∈ [low, high] minimising ``objective(T)``, which need not be convex: a log-spaced grid
    locates the basin, a bounded Brent search in log T refines it."""
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
