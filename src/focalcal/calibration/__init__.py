"""Post-hoc calibrators: ``fit(logits, labels) -> self``, ``transform(logits) -> probabilities``.

* :func:`psi` — the focal calibration map Ψ^γ (charoenphakdee2021 Eq 11-13 =
  komisarenko2024 Eq 1), re-exported from :mod:`focalcal.theory` with its log-space variants.
* :class:`TemperatureScaling` — T by validation NLL (exact, convex in 1/T), ECE grid
  (mukhoti2020) or focal loss (TS_FL of charoenphakdee2021).
* :class:`FocalTemperatureScaling` — Ψ^{γ_ev}(softmax(z/T)) on a (γ_ev, T) grid (komisarenko2024).
* :class:`PsiCalibration`, :class:`IdentityCalibration` — fixed maps, for uniform pipelines.
* :class:`VectorScaling`, :class:`MatrixScaling`, :class:`HistogramBinning`,
  :class:`IsotonicCalibration` — the usual baselines; :class:`DirichletCalibration` (ODIR,
  Kull et al. 2019), :class:`EnsembleTemperatureScaling` (Zhang et al. 2020) and, for binary
  classifiers, :class:`BetaCalibration` (Kull et al. 2017), which practitioners reach for
  beyond the four papers.

Logits are (N, K) numpy arrays or torch tensors; ``transform`` returns float64 numpy
probabilities whose rows sum to 1. Fitted parameters are attributes ending in ``_``;
``to_dict``/``Calibrator.from_dict`` round-trip them through JSON. :func:`build` makes a
calibrator from a config dict by the name :mod:`focalcal.catalog` declares.
"""

from focalcal.calibration._base import Calibrator
from focalcal.calibration.beta import BetaCalibration
from focalcal.calibration.binning import HistogramBinning, IsotonicCalibration
from focalcal.calibration.dirichlet import DirichletCalibration
from focalcal.calibration.ensemble import EnsembleTemperatureScaling
from focalcal.calibration.fixed_maps import IdentityCalibration, PsiCalibration
from focalcal.calibration.focal_temperature import (
    KOMISARENKO_GAMMAS,
    KOMISARENKO_TEMPERATURES,
    FocalTemperatureScaling,
)
from focalcal.calibration.registry import CALIBRATORS, build, calibrator_class, register
from focalcal.calibration.scaling import MatrixScaling, VectorScaling
from focalcal.calibration.temperature import MUKHOTI_TEMPERATURES, TemperatureScaling
from focalcal.theory import log_psi_from_logits, psi, psi_from_logits

__all__ = [
    "CALIBRATORS",
    "KOMISARENKO_GAMMAS",
    "KOMISARENKO_TEMPERATURES",
    "MUKHOTI_TEMPERATURES",
    "BetaCalibration",
    "Calibrator",
    "DirichletCalibration",
    "EnsembleTemperatureScaling",
    "FocalTemperatureScaling",
    "HistogramBinning",
    "IdentityCalibration",
    "IsotonicCalibration",
    "MatrixScaling",
    "PsiCalibration",
    "TemperatureScaling",
    "VectorScaling",
    "build",
    "calibrator_class",
    "log_psi_from_logits",
    "psi",
    "psi_from_logits",
    "register",
]
