"""Calibration maps with nothing to fit: softmax itself and the focal calibration map Ψ^γ.

They exist so that every calibrator of a comparison (raw, Ψ, TS, …) has the same
``fit``/``transform``/``to_dict`` interface in a pipeline; ``fit`` only checks the input
and records the number of classes.
"""

from __future__ import annotations

from typing import ClassVar

from scipy.special import softmax

from focalcal.calibration._base import Calibrator
from focalcal.core.constraints import PSI_GAMMA
from focalcal.theory import psi_from_logits


class IdentityCalibration(Calibrator):
    """softmax(logits): the uncalibrated model, as a calibrator.

    It takes no arguments and fits nothing.

    Attributes:
        n_classes_ (int): Number of classes K.

    Examples:
        >>> from focalcal.calibration import IdentityCalibration
        >>> val_logits, val_labels = [[2.0, 0.0], [0.0, 1.0]], [0, 1]
        >>> identity = IdentityCalibration().fit(val_logits, val_labels)
        >>> identity.n_classes_
        2
        >>> identity.transform(val_logits).round(4).tolist()
        [[0.8808, 0.1192], [0.2689, 0.7311]]
    """

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

    Args:
        gamma: γ > −1 of Ψ^γ, the focal loss's γ of the model (0: the identity).

    Attributes:
        n_classes_ (int): Number of classes K.

    Examples:
        Logits of a model trained with focal loss γ = 2, mapped to class posteriors:

        >>> from focalcal.calibration import PsiCalibration
        >>> val_logits, val_labels = [[1.0, 0.0], [0.0, 3.0]], [0, 1]
        >>> psi = PsiCalibration(gamma=2.0).fit(val_logits, val_labels)
        >>> probs = psi.transform(val_logits)
        >>> probs.round(4).tolist()
        [[0.9359, 0.0641], [0.0003, 0.9997]]
        >>> probs.sum(axis=1).round(6).tolist()
        [1.0, 1.0]
    """

    name = "psi"
    _parameter_constraints: ClassVar[dict] = {"gamma": [PSI_GAMMA]}

    def __init__(self, gamma: float = 0.0) -> None:
        self.gamma = gamma

    def _fit(self, logits, labels):
        pass

    def _transform(self, logits):
        return psi_from_logits(logits, float(self.gamma))
