"""What mukhoti2020 calls our losses: the names its tables print (Tables 1-13)."""

from __future__ import annotations

from focalcal.core.spec_facts import LossInfo, number

# catalog loss -> the name the paper's tables print (a fixed-γ focal loss is "FL-<γ>", label
# smoothing "LS-<α>": see mukhoti_name)
LOSS_NAMES = {"cross_entropy": "Cross-Entropy", "brier": "Brier Loss", "mmce": "MMCE", "flsd53": "FLSD-53",
              "flsd532": "FLSD-532", "flsc531": "FLSc-531", "flsc532": "FLSc-532"}


def mukhoti_name(info: LossInfo) -> str | None:
    """The name the paper prints for a loss ("FL-3", "Cross-Entropy", "LS-0.05"), or None when
    the paper has no such loss (a label-smoothed focal loss, a schedule it did not run)."""
    if info.name == "focal":
        if info.gamma is None or info.smoothing:
            return None
        return f"FL-{number(info.gamma)}" if info.gamma > 0 else LOSS_NAMES["cross_entropy"]
    if info.name == "label_smoothing":
        return info.label  # "LS-<α>", the paper's spelling
    return LOSS_NAMES.get(info.name)
