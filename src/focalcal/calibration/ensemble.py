r"""Ensemble temperature scaling (ETS) of Zhang, Kailkhura & Han 2020 ("Mix-n-Match", §3.1).

$$
p = w_0 \operatorname{softmax}(z / T) + w_1 \operatorname{softmax}(z) + w_2 / K
$$

with w on the probability simplex: the temperature-scaled, the uncalibrated and the uniform
prediction mixed. As in the authors' released code (``util_calibration.py``,
``ets_calibrate``), T is fitted first by the mean squared error (p − one-hot)² over samples
and classes, within T ∈ [0.05, 5], and then the weights by the same squared error. The paper
leaves the fitting loss open; the released code's default is this one. In w the squared error
is a convex quadratic on the simplex, so the weights are found exactly: the minimiser of the
quadratic on each face of the simplex (vertices, edges, interior) in closed form, keeping the
best feasible one — where the released code runs SLSQP from (1, 0, 0).
"""

from __future__ import annotations

import itertools
from typing import ClassVar

import numpy as np
from scipy.special import softmax

from focalcal.calibration._base import Calibrator
from focalcal.calibration.temperature import TEMPERATURE_BOUNDS as BOUNDS
from focalcal.calibration.temperature import minimise_temperature

#: The released code's temperature bounds (``temperature_scaling``: bnds = (0.05, 5.0)).
TEMPERATURE_BOUNDS = (0.05, 5.0)
_TEMPERATURE_GRID_POINTS = 41


def squared_error(probs: np.ndarray, labels: np.ndarray) -> float:
    """Mean over samples and classes of (p_k − 1[y = k])²: the released code's ``mse``.

    That is the Brier score divided by K (the Brier score sums over classes).

    Args:
        probs: Float array (N, K) of probabilities.
        labels: Integer array (N,) of class indices in [0, K).

    Returns:
        The mean squared error, a float in [0, 1].

    Examples:
        >>> import numpy as np
        >>> from focalcal.calibration.ensemble import squared_error
        >>> round(squared_error(np.array([[0.8, 0.2], [0.5, 0.5]]), np.array([0, 1])), 4)
        0.145
    """
    residual = probs.copy()
    residual[np.arange(len(labels)), labels] -= 1.0
    return float(np.mean(residual * residual))


def simplex_least_squares(components: np.ndarray, target: np.ndarray) -> np.ndarray:
    """w on the simplex minimising ||Σ_j w_j components[j] − target||², exactly.

    The objective is a convex quadratic, so its minimum over the simplex is the minimum over
    its faces of the equality-constrained minimisers that lie inside the face (KKT on the
    active set): one small linear solve per face, 2^J − 1 faces.

    Args:
        components: Float array (J, M), the J vectors to mix (J small: 3 for ETS).
        target: Float array (M,), the vector to approach.

    Returns:
        Float64 array (J,) of weights ≥ 0 summing to 1.

    Examples:
        >>> import numpy as np
        >>> from focalcal.calibration.ensemble import simplex_least_squares
        >>> components = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
        >>> simplex_least_squares(components, np.array([0.3, 0.3])).round(4).tolist()
        [0.3, 0.3, 0.4]
    """
    n_components = components.shape[0]
    gram = components @ components.T
    linear = components @ target
    best, best_value = None, np.inf
    for size in range(1, n_components + 1):
        for face in itertools.combinations(range(n_components), size):
            face = list(face)
            # minimise w'Gw − 2 w'c subject to Σ w = 1 on the face: [[2G, 1], [1', 0]] [w; μ] = [2c; 1]
            system = np.zeros((size + 1, size + 1))
            system[:size, :size] = 2 * gram[np.ix_(face, face)]
            system[:size, size] = system[size, :size] = 1.0
            solution = np.linalg.lstsq(system, np.append(2 * linear[face], 1.0), rcond=None)[0][:size]
            if np.any(solution < -1e-12):
                continue
            weights = np.zeros(n_components)
            weights[face] = np.clip(solution, 0.0, None)
            weights /= weights.sum()
            value = weights @ gram @ weights - 2 * weights @ linear
            if value < best_value - 1e-15:
                best, best_value = weights, value
    return best


class EnsembleTemperatureScaling(Calibrator):
    """ETS: a simplex mixture of softmax(z / T), softmax(z) and the uniform prediction.

    T is fitted first, by the mean squared error within ``temperature_bounds``; then the
    weights, exactly, by the same error (module docstring).

    Args:
        temperature_bounds: ``(low, high)``, 0 < low < high, the interval T is searched in
            (the released code's (0.05, 5)).

    Attributes:
        temperature_ (float): The fitted temperature T.
        weights_ (np.ndarray): Float array (3,), the weights (w_0, w_1, w_2) of softmax(z / T),
            softmax(z) and the uniform prediction; ≥ 0, summing to 1.
        n_classes_ (int): Number of classes K.

    Examples:
        >>> import numpy as np
        >>> from focalcal.calibration import EnsembleTemperatureScaling
        >>> from focalcal.metrics import ece
        >>> rng = np.random.default_rng(0)
        >>> val_labels = rng.integers(0, 3, size=500)
        >>> val_logits = 4 * (np.eye(3)[val_labels] + rng.normal(size=(500, 3)))
        >>> ets = EnsembleTemperatureScaling().fit(val_logits, val_labels)
        >>> round(ets.temperature_, 2), ets.weights_.round(2).tolist()
        (3.56, [1.0, 0.0, 0.0])
        >>> round(ece(ets.transform(val_logits), val_labels), 4)
        0.0321
    """

    name = "ensemble_temperature_scaling"
    _fitted_attributes = ("temperature_", "weights_")
    _parameter_constraints: ClassVar[dict] = {"temperature_bounds": [BOUNDS]}

    def __init__(self, temperature_bounds: tuple[float, float] = TEMPERATURE_BOUNDS) -> None:
        self.temperature_bounds = temperature_bounds

    def _restore(self, attr, value):
        return float(value) if attr == "temperature_" else super()._restore(attr, value)

    def _fit(self, logits, labels):
        low, high = (float(bound) for bound in self.temperature_bounds)
        self.temperature_ = minimise_temperature(
            lambda t: squared_error(softmax(logits / t, axis=1), labels), low, high, points=_TEMPERATURE_GRID_POINTS)
        components = self._components(logits, self.temperature_)
        one_hot = np.zeros_like(components[0])
        one_hot[np.arange(len(labels)), labels] = 1.0
        self.weights_ = simplex_least_squares(components.reshape(3, -1), one_hot.ravel())

    @staticmethod
    def _components(logits: np.ndarray, temperature: float) -> np.ndarray:
        uniform = np.full(logits.shape, 1.0 / logits.shape[1])
        return np.stack([softmax(logits / temperature, axis=1), softmax(logits, axis=1), uniform])

    def _transform(self, logits):
        return np.tensordot(self.weights_, self._components(logits, self.temperature_), axes=1)
