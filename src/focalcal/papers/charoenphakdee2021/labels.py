"""What charoenphakdee2021 calls our runs: the training paradigm of a focal-family loss."""

from __future__ import annotations

from focalcal.core.spec_facts import LossInfo


def training_paradigm(info: LossInfo) -> str | None:
    """The paper's training paradigm (§6.1) of a focal-family loss: "Standard" or "LS" (label
    smoothing folded into the focal loss); None for a loss without a single focal γ."""
    if info.gamma is None:
        return None
    return "LS" if info.smoothing > 0 else "Standard"
