"""What a config key *is*, independent of what the config calls it.

Configs name their losses and calibrators freely (``raw`` or ``uncalibrated``, ``focal3`` or
``fl_gamma3``); the figures and paper tables need to know what each one does. This module
reads the specs behind the keys with the facts of :mod:`focalcal.catalog`: a loss spec gives
its focal parameter γ, training paradigm and the name the papers print; a resolved
calibrator spec (``Plan.calibrators``) gives its role (:func:`focalcal.catalog.calibrator_role`).

Datasets and architectures of the default config stand in for the papers' (MNIST-1D for
CIFAR-10, digits for SVHN): :func:`paper_setting` says which published setting a run is
compared with, and whether it is a stand-in.
"""

from __future__ import annotations

from dataclasses import dataclass

from focalcal import catalog

# ------------------------------------------------------------------------------ losses

def _number(value) -> str:
    """2.0 -> "2", 0.05 -> "0.05" (the papers' spelling of parameters)."""
    return f"{float(value):g}"


@dataclass(frozen=True)
class LossInfo:
    """What a loss spec means for the papers' figures and tables.

    ``gamma``: the focal parameter when the loss has a single one (cross-entropy: 0), else
    None. ``smoothing``: label smoothing folded into a focal loss (charoenphakdee2021's LS
    paradigm), 0 if none. ``label``: short human name for legends ("FL γ=3", "CE").
    ``mukhoti_name``: the name mukhoti2020 prints, or None when that paper has no such loss.
    """

    name: str
    gamma: float | None
    smoothing: float
    label: str
    mukhoti_name: str | None

    @property
    def paradigm(self) -> str | None:
        """charoenphakdee2021's training paradigm of a focal-family loss: "Standard" or "LS"."""
        if self.gamma is None:
            return None
        return "LS" if self.smoothing > 0 else "Standard"

    @property
    def komisarenko_approach(self) -> tuple[str, float | None] | None:
        """(approach, γ_train) as komisarenko2024 Table 1 lists them, or None."""
        if self.smoothing:
            return None
        if self.name == "cross_entropy" or (self.name == "focal" and self.gamma == 0):
            return ("cross_entropy", None)
        if self.name == "focal":
            return ("focal", self.gamma)
        if self.name in ("flsd53", "adafocal"):
            return (self.name, None)
        return None


def loss_info(spec: dict) -> LossInfo:
    """Read a config loss spec (``{"name": "focal", "gamma": 3}``); labels and paper names come
    from :mod:`focalcal.catalog`."""
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise ValueError(f"a loss spec must be a dict with a 'name', got {spec!r}")
    name = spec["name"]
    entry = catalog.loss(name)
    gamma = catalog.focal_gamma(spec)
    mukhoti = entry.paper_names.get("mukhoti2020")
    if name == "focal":
        smoothing = float(spec.get("smoothing", 0.0) or 0.0)
        if gamma is None:
            return LossInfo(name, None, smoothing, entry.label, None)
        label = f"FL γ={_number(gamma)}" + (f" + LS {_number(smoothing)}" if smoothing else "")
        mukhoti = None if smoothing else (f"FL-{_number(gamma)}" if gamma > 0 else catalog.loss("cross_entropy")
                                          .paper_names["mukhoti2020"])
        return LossInfo(name, gamma, smoothing, label, mukhoti)
    if name == "label_smoothing":
        value = _number(spec.get("smoothing", 0.05))  # the loss default (LS-0.05)
        return LossInfo(name, None, 0.0, f"LS-{value}", f"LS-{value}")
    return LossInfo(name, gamma, 0.0, entry.label, mukhoti)


def loss_color_key(info: LossInfo) -> tuple[str, float | None]:
    """Arguments for :func:`focalcal.plots.style.color_for`: the same loss, the same colour."""
    if info.name == "focal" and info.gamma is not None and not info.smoothing:
        return ("focal", info.gamma) if info.gamma > 0 else ("cross_entropy", None)
    return (info.name, None)


# ------------------------------------------------------------------------- calibrators

def roles_of(calibrators: dict[str, dict], keys) -> dict[str, str]:
    """role -> first calibrator key (in ``keys`` order) that plays it, for one run."""
    found: dict[str, str] = {}
    for key in keys:
        found.setdefault(catalog.calibrator_role(calibrators[key]), key)
    return found


# ---------------------------------------------------------------------------- settings

REFERENCE_MODEL = "ResNet 50"  # the model of mukhoti2020 Figs 1-3 and all of komisarenko2024 Table 1


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


def paper_setting(dataset_spec: dict, model_spec: dict) -> PaperSetting:
    """Which published (dataset, model) a run on these config specs stands for.

    A stand-in dataset, or a model the papers do not use, is compared with the paper's
    reference model on the dataset it stands in for.
    """
    dataset, stand_in = _published(catalog.DATASETS, dataset_spec.get("name"), "classification")
    model, _ = _published(catalog.MODELS, model_spec.get("name"), "classification")
    return _setting(dataset, stand_in, model, REFERENCE_MODEL)


# hossain2021 (segmentation): its dataset and model names (Tables 2-3) are the catalog's; an
# image/mask folder is matched by its folder name; any other model is compared with DeepLabV3+
# (Table 2).
_HOSSAIN_FOLDERS = (("mri", "MRI prostate"), ("trus", "TRUS prostate"), ("cityscape", "Cityscape"))
HOSSAIN_TABLES = {"DeepLabV3+": 2, "VGG19 FCN": 3}


def hossain_setting(dataset_spec: dict, model_spec: dict) -> PaperSetting:
    """Which hossain2021 (dataset, model) a segmentation run stands for."""
    name = dataset_spec.get("name")
    if name == "segmentation_folder":
        folder = str(dataset_spec.get("folder", "")).lower()
        dataset, stand_in = next((paper for key, paper in _HOSSAIN_FOLDERS if key in folder), None), False
    else:
        dataset, stand_in = _published(catalog.DATASETS, name, "segmentation")
    model, _ = _published(catalog.MODELS, model_spec.get("name"), "segmentation")
    return _setting(dataset, stand_in, model, "DeepLabV3+")


def _published(entries: dict, name, task: str) -> tuple[str | None, bool]:
    """(the published name, whether ours stands in for it) of a catalog data set or model of
    ``task``; (None, True) for a name of another task or none the papers use."""
    entry = entries.get(name)
    if entry is None or entry.task != task:
        return None, True
    return entry.paper_name, getattr(entry, "stand_in", False)


def _setting(dataset: str | None, stand_in: bool, model: str | None, reference_model: str) -> PaperSetting:
    """No published data set: no counterpart; a model the paper lacks: its reference model, as a stand-in."""
    if dataset is None:
        return PaperSetting(None, None, True)
    if model is None:
        return PaperSetting(dataset, reference_model, True)
    return PaperSetting(dataset, model, stand_in)


def komisarenko_dataset(paper_dataset: str | None) -> str | None:
    """komisarenko2024 spells Tiny-ImageNet "TinyImageNet"."""
    return "TinyImageNet" if paper_dataset == "Tiny-ImageNet" else paper_dataset
