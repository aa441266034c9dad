"""Calibration maps with nothing to fit: softmax itself and the focal calibration map Ψ^γ.

They exist so that every calibrator of a comparison (raw, Ψ, TS, …) has the same
``fit``/``transform``/``to_dict`` interface in a pipeline; ``fit`` only checks the input
and records the number of classes.
"""

from __future__ import annotations

from typing import ClassVar

from scipy.special import softmax

from focalcal._constraints import PSI_GAMMA
from focalcal.calibration._base import Calibrator
from focalcal.theory import psi_from_logits


class IdentityCalibration(Calibrator):
    """softmax(logits): the uncalibrated model, as a calibrator."""

    name = "identity"

    def _fit(self, logits, labels):
        pass

    def _transform(self, logits):
        return softmax(logits, axis=1)


class PsiCalibration(Calibrator):
    """Ψ^γ(softmax(logits)) (charoenphakdee2021 Eq 11-13) with a given γ > −1; no fitting.

    Recovers the class posterior from a model trained with focal loss of the same γ
    (charoenphakdee2021 Thm 11). Computed from the logits in log space
    (:func:`focalcal.theory.psi_from_logits`).
    """

    name = "psi"
    _parameter_constraints: ClassVar[dict] = {"gamma": [PSI_GAMMA]}

    def __init__(self, gamma: float = 0.0):
        self.gamma = gamma

    def _fit(self, logits, labels):
        pass

    def _transform(self, logits):
        return psi_from_logits(logits, float(self.gamma))
