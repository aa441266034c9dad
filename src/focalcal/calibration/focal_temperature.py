"""Focal temperature scaling (komisarenko2024 §4.2): Ψ^{γ_ev}(softmax(z / T)).

The focal calibration map Ψ^γ (charoenphakdee2021 Eq 11-13, komisarenko2024 Eq 1) is
composed with temperature scaling, and the pair (γ_ev, T) is picked on a 2-D grid by the
validation ECE (equal-mass, 15 bins) or NLL. The whole grid is scored in one pass (see
:mod:`focalcal.calibration._focal_grid`); every score is kept, so the optimal T per γ_ev
(komisarenko2024 Fig 8) can be plotted from a fitted object. ``search="refine"`` scores about a
third of the pairs, coarse to fine in T (``_focal_grid.SEARCHES``: its tolerance against the
whole grid); the workflow scores the whole grid, `focalcal calibrate` refines.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from focalcal.calibration._base import Calibrator
from focalcal.calibration.temperature import TEMPERATURE_GRID
from focalcal.core.constraints import Options
from focalcal.core.types import ArrayLike
from focalcal.core.validation import GAMMA_GRID, real_array
from focalcal.metrics.binning import BINNING, N_BINS
from focalcal.theory import psi_from_logits

#: komisarenko2024 §5.1: "We iterated over a range of [-0.5, -0.25, 0.05, 0.25, 0.37, 0.5,
#: 0.75, 1, 5] for focal calibration parameter γ_ev". (γ_ev = 0, plain temperature scaling,
#: is not in the paper's grid; the paper compares with TS separately.)
KOMISARENKO_GAMMAS = np.array([-0.5, -0.25, 0.05, 0.25, 0.37, 0.5, 0.75, 1.0, 5.0])

#: komisarenko2024 §5.1: "over a range from 0.01 to 5 with a step of 0.01 for temperature
#: parameter T" — 500 values.
KOMISARENKO_TEMPERATURES = np.round(np.arange(1, 501) * 0.01, 10)

OBJECTIVES = ("ece", "nll")
SEARCHES = ("grid", "refine")  # _focal_grid.SEARCHES, named here so that importing this module does not import torch
DTYPES = ("float32", "float64")  # names, so that importing this module does not import torch


class FocalTemperatureScaling(Calibrator):
    """Ψ^{γ_ev}(softmax(logits / T)) with (γ_ev, T) chosen by grid search on validation data.

    Every (γ_ev, T) pair of the grid is scored in one pass (``search="grid"``, the paper's
    procedure), and every score is kept, so the optimal T per γ_ev (komisarenko2024 Fig 8) can
    be plotted from a fitted object. In float32 the grid is scored by a compiled kernel where
    one is built; ``dtype="float64"``, or float32 without the kernel, scores it in torch
    (``focalcal[torch]``). ``transform`` needs neither.

    Args:
        gammas: 1-D array-like of γ_ev values, each > −1; ``None`` uses the paper's
            (:data:`KOMISARENKO_GAMMAS`).
        temperatures: 1-D array-like of temperatures T > 0; ``None`` uses the paper's
            (:data:`KOMISARENKO_TEMPERATURES`, 0.01 to 5 in steps of 0.01).
        objective: ``"ece"`` or ``"nll"``, the selection criterion on the validation set.
        n_bins: Number of bins of the ECE estimator for ``objective="ece"`` (paper: 15).
        binning: ``"mass"`` (equal-mass bins, the paper's) or ``"width"``, for the ECE.
        dtype: ``"float32"`` or ``"float64"``, the precision of the grid scoring (float32 is
            faster and agrees with float64 to ~1e-7; ``transform`` always works in float64).
        search: ``"grid"`` scores every pair; ``"refine"`` scores about a third of them,
            coarse to fine in T per γ_ev (``focalcal.calibration._focal_grid.SEARCHES``: its
            tolerance against the whole grid).

    Attributes:
        gamma_ (float): The chosen γ_ev (ties go to the first pair in γ-major grid order).
        temperature_ (float): The chosen T.
        gammas_ (np.ndarray): Float array (n_gamma,), the γ_ev grid.
        temperatures_ (np.ndarray): Float array (n_T,), the T grid.
        grid_scores_ (np.ndarray): Float array (n_gamma, n_T), the validation objective of each
            pair (NaN at the pairs a refined search did not score).
        best_temperature_per_gamma_ (np.ndarray): Float array (n_gamma,), the best T for each γ_ev.
        best_score_per_gamma_ (np.ndarray): Float array (n_gamma,), the objective at that T.
        n_classes_ (int): Number of classes K.

    Examples:
        >>> import numpy as np
        >>> from focalcal.calibration import FocalTemperatureScaling
        >>> from focalcal.metrics import ece
        >>> rng = np.random.default_rng(0)
        >>> val_labels = rng.integers(0, 3, size=500)
        >>> val_logits = 4 * (np.eye(3)[val_labels] + rng.normal(size=(500, 3)))
        >>> fts = FocalTemperatureScaling(gammas=[-0.5, 0.25, 1.0], temperatures=np.arange(1, 9) * 0.5)
        >>> fts = fts.fit(val_logits, val_labels)
        >>> fts.gamma_, fts.temperature_, fts.best_temperature_per_gamma_.tolist()
        (-0.5, 3.0, [3.0, 4.0, 4.0])
        >>> round(ece(fts.transform(val_logits), val_labels, binning="mass"), 4)
        0.0587
    """

    name = "focal_temperature_scaling"
    _fitted_attributes = (
        "gamma_",
        "temperature_",
        "gammas_",
        "temperatures_",
        "grid_scores_",
        "best_temperature_per_gamma_",
        "best_score_per_gamma_",
    )
    _parameter_constraints: ClassVar[dict] = {
        "gammas": [GAMMA_GRID, None],
        "temperatures": [TEMPERATURE_GRID, None],
        "objective": [Options(OBJECTIVES)],
        "n_bins": [N_BINS],
        "binning": [BINNING],
        "dtype": [Options(DTYPES)],
        "search": [Options(SEARCHES)],
    }

    def __init__(self, gammas: ArrayLike | None = None, temperatures: ArrayLike | None = None, objective: str = "ece",
                 n_bins: int = 15, binning: str = "mass", dtype: str = "float32", search: str = "grid") -> None:
        self.gammas = gammas
        self.temperatures = temperatures
        self.objective = objective
        self.n_bins = n_bins
        self.binning = binning
        self.dtype = dtype
        self.search = search

    def _grids(self) -> tuple[np.ndarray, np.ndarray]:
        gammas = KOMISARENKO_GAMMAS if self.gammas is None else real_array(self.gammas, "gammas")
        temps = KOMISARENKO_TEMPERATURES if self.temperatures is None else real_array(self.temperatures, "temperatures")
        return gammas.copy(), temps.copy()

    def _fit(self, logits, labels):
        from focalcal.calibration._focal_grid import focal_grid_scores  # imports torch: only when fitting

        gammas, temps = self._grids()
        scores = focal_grid_scores(
            logits, labels, gammas, temps, self.objective,
            n_bins=self.n_bins, binning=self.binning, dtype=self.dtype, search=self.search,
        )  # fmt: skip
        scored = np.where(np.isnan(scores), np.inf, scores)  # a refined search: the pairs it scored
        best_gamma, best_temp = np.unravel_index(int(np.argmin(scored)), scores.shape)
        best_per_gamma = scored.argmin(axis=1)
        self.gammas_, self.temperatures_, self.grid_scores_ = gammas, temps, scores
        self.gamma_ = float(gammas[best_gamma])
        self.temperature_ = float(temps[best_temp])
        self.best_temperature_per_gamma_ = temps[best_per_gamma]
        self.best_score_per_gamma_ = scores[np.arange(len(gammas)), best_per_gamma]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description, as :meth:`Calibrator.to_dict` writes it.

        ``search`` is left out when it is ``"grid"`` (the default), so a whole grid's JSON reads
        as the papers' grid; after a refined search, the pairs it did not score are ``None``
        (JSON has no NaN) and read back as NaN.

        Returns:
            Dict with keys ``"name"``, ``"params"`` and ``"fitted"``, ready for ``json.dumps``.

        Raises:
            RuntimeError: If the calibrator is not fitted yet.
        """
        data = super().to_dict()
        if self.search == "grid":  # the default, read back as such: a whole grid's JSON reads as the papers' grid
            del data["params"]["search"]
        else:  # JSON has no NaN: a pair not scored is null (read back as NaN)
            data["fitted"]["grid_scores_"] = [[None if np.isnan(v) else v for v in row]
                                              for row in data["fitted"]["grid_scores_"]]
        return data

    def _restore(self, attr, value):
        if attr in ("gamma_", "temperature_"):
            return float(value)
        return super()._restore(attr, value)

    def _transform(self, logits):
        return psi_from_logits(logits / self.temperature_, self.gamma_)
