"""What a config key *is*, independent of what the config calls it.

Configs name their losses and calibrators freely (``raw`` or ``uncalibrated``, ``focal3`` or
``fl_gamma3``); the figures and paper tables need to know what each one does. This module
reads the specs behind the keys with the facts of :mod:`focalcal.catalog`: a loss spec gives
its focal parameter γ, smoothing and label; a resolved calibrator spec (``Plan.calibrators``)
gives its role (:func:`focalcal.catalog.calibrator_role`). What one paper calls a loss, a data
set or a model is in that paper's package (``labels``, :mod:`focalcal.papers`).

Datasets and architectures of the default config stand in for the papers' (MNIST-1D for
CIFAR-10, digits for SVHN): :func:`paper_setting` says which published setting a run is
compared with, and whether it is a stand-in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from focalcal import catalog

# ------------------------------------------------------------------------------ losses

def number(value) -> str:
    """2.0 -> "2", 0.05 -> "0.05" (the papers' spelling of parameters)."""
    return f"{float(value):g}"


@dataclass(frozen=True)
class LossInfo:
    """What a loss spec means for the papers' figures and tables.

    ``gamma``: the focal parameter when the loss has a single one (cross-entropy: 0), else
    None. ``smoothing``: label smoothing folded into a focal loss, 0 if none. ``label``: short
    human name for legends ("FL γ=3", "CE"). What a paper calls the loss is its package's
    (``labels`` of :mod:`focalcal.papers`).
    """

    name: str
    gamma: float | None
    smoothing: float
    label: str


def loss_info(spec: dict) -> LossInfo:
    """Read a config loss spec (``{"name": "focal", "gamma": 3}``); labels come from
    :mod:`focalcal.catalog`."""
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise ValueError(f"a loss spec must be a dict with a 'name', got {spec!r}")  # noqa: TRY004  a missing name too
    name = spec["name"]
    entry = catalog.loss(name)
    gamma = catalog.focal_gamma(spec)
    if name == "focal":
        smoothing = float(spec.get("smoothing", 0.0) or 0.0)
        if gamma is None:
            return LossInfo(name, None, smoothing, entry.label)
        label = f"FL γ={number(gamma)}" + (f" + LS {number(smoothing)}" if smoothing else "")
        return LossInfo(name, gamma, smoothing, label)
    if name == "label_smoothing":
        value = number(spec.get("smoothing", 0.05))  # the loss default (LS-0.05)
        return LossInfo(name, None, 0.0, f"LS-{value}")
    return LossInfo(name, gamma, 0.0, entry.label)


def focal_gamma_in_name(key: str) -> float | None:
    """The focal γ a loss name states in the canonical spelling of :func:`focalcal.plots.style.canonical_name`
    (lower case, ``_`` for spaces and dashes): ``focal_gamma3``, ``fl_3``, ``focal_loss(gamma=2)`` or
    :func:`loss_info`'s label ``FL γ=3`` (``fl_γ=3``); None for any other name."""
    match = re.fullmatch(r"(?:focal|fl)_*(?:loss)?[_(]*(?:gamma|γ)?[_=]*(\d+(?:\.\d+)?)\)?", key)
    return float(match.group(1)) if match else None


def loss_color_key(info: LossInfo) -> tuple[str, float | None]:
    """Arguments for :func:`focalcal.plots.style.color_for`: the same loss, the same colour."""
    if info.name == "focal" and info.gamma is not None and not info.smoothing:
        return ("focal", info.gamma) if info.gamma > 0 else ("cross_entropy", None)
    return (info.name, None)


# ---------------------------------------------------------------------------- settings

@dataclass(frozen=True)
class PaperSetting:
    """The published setting a run of ours is compared with."""

    dataset: str | None
    model: str | None
    stand_in: bool

    def describe(self) -> str:
        if self.dataset is None:
            return "no published counterpart"
        where = f"{self.dataset}, {self.model}" if self.model else self.dataset
        return f"{where} (ours is a small stand-in)" if self.stand_in else where


def paper_setting(dataset_spec: dict, model_spec: dict, reference_model: str | None) -> PaperSetting:
    """Which published (dataset, model) a run on these config specs stands for.

    A model the paper does not use is compared with ``reference_model`` (the paper's, its
    ``Paper.reference_model``; None: with the data set alone) on the dataset it stands in for.
    The data set's task (classification, translation, segmentation) says where both are looked up.
    """
    entry = catalog.DATASETS.get(dataset_spec.get("name"))
    task = entry.task if entry is not None else "classification"
    dataset, stand_in = published_name(catalog.DATASETS, dataset_spec.get("name"), task)
    model, _ = published_name(catalog.MODELS, model_spec.get("name"), task)
    return compared_setting(dataset, stand_in, model, reference_model)


def published_name(entries: dict, name, task: str) -> tuple[str | None, bool]:
    """(the published name, whether ours stands in for it) of a catalog data set or model of
    ``task``; (None, True) for a name of another task or none the papers use."""
    entry = entries.get(name)
    if entry is None or entry.task != task:
        return None, True
    return entry.paper_name, getattr(entry, "stand_in", False)


def compared_setting(dataset: str | None, stand_in: bool, model: str | None,
                     reference_model: str | None) -> PaperSetting:
    """No published data set: no counterpart; a model the paper lacks: its reference model (None:
    none named), as a stand-in."""
    if dataset is None:
        return PaperSetting(None, None, True)
    if model is None:
        return PaperSetting(dataset, reference_model, True)
    return PaperSetting(dataset, model, stand_in)
