"""What komisarenko2024 calls our runs: the approach of Table 1 and its spelling of data sets."""

from __future__ import annotations

from focalcal.core.spec_facts import LossInfo


def approach(info: LossInfo) -> tuple[str, float | None] | None:
    """(approach, γ_train) as Table 1 lists them, or None for a loss it does not train."""
    if info.smoothing:
        return None
    if info.name == "cross_entropy" or (info.name == "focal" and info.gamma == 0):
        return ("cross_entropy", None)
    if info.name == "focal":
        return ("focal", info.gamma)
    if info.name in ("flsd53", "adafocal"):
        return (info.name, None)
    return None


def dataset_name(paper_dataset: str | None) -> str | None:
    """The paper spells Tiny-ImageNet "TinyImageNet"."""
    return "TinyImageNet" if paper_dataset == "Tiny-ImageNet" else paper_dataset
