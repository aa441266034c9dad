"""What a config key *is*, independent of what the config calls it.

Configs name their losses and calibrators freely (``raw`` or ``uncalibrated``, ``focal3`` or
``fl_gamma3``); the figures and paper tables need to know what each one does. This module
reads the specs behind the keys: a loss spec gives its focal parameter γ, training paradigm
and the name the papers print; a resolved calibrator spec (``Plan.methods``) gives its role
(uncalibrated, Ψ^γ, TS by NLL, TS by ECE, TS_FL, TS_FL+Ψ, grid TS, focal TS).

Datasets and architectures of the default config stand in for the papers' (MNIST-1D for
CIFAR-10, digits for SVHN): :func:`paper_setting` says which published setting a run is
compared with, and whether it is a stand-in.
"""

from __future__ import annotations

from dataclasses import dataclass

# ------------------------------------------------------------------------------ losses

# mukhoti2020's column names for its losses (Tables 1-12), by loss registry name.
_MUKHOTI_FIXED_NAMES = {
    "cross_entropy": "Cross-Entropy",
    "brier": "Brier Loss",
    "mmce": "MMCE",
    "flsc531": "FLSc-531",
    "flsc532": "FLSc-532",
    "flsd53": "FLSD-53",
    "flsd532": "FLSD-532",
}

_SHORT_NAMES = {
    "cross_entropy": "CE",
    "brier": "Brier",
    "mmce": "MMCE",
    "flsc531": "FLSc-531",
    "flsc532": "FLSc-532",
    "flsd53": "FLSD-53",
    "flsd532": "FLSD-532",
    "adafocal": "AdaFocal",
    "dual_focal": "DFL",
    "dual_cross_entropy": "DCE",
    "weighted_cross_entropy": "WCE",
    "generalized_dice": "GDL",
}


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
    """Read a config loss spec (``{"name": "focal", "gamma": 3}``)."""
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise ValueError(f"a loss spec must be a dict with a 'name', got {spec!r}")
    name = spec["name"]
    smoothing = float(spec.get("smoothing", 0.0) or 0.0)
    if name == "cross_entropy":
        return LossInfo(name, 0.0, 0.0, "CE", "Cross-Entropy")
    if name == "focal":
        if "gamma" not in spec:
            return LossInfo(name, None, smoothing, "FL", None)
        gamma = float(spec["gamma"])
        label = f"FL γ={_number(gamma)}" + (f" + LS {_number(smoothing)}" if smoothing else "")
        mukhoti = f"FL-{_number(gamma)}" if not smoothing and gamma > 0 else ("Cross-Entropy" if not smoothing else None)
        return LossInfo(name, gamma, smoothing, label, mukhoti)
    if name == "label_smoothing":
        value = _number(spec.get("smoothing", 0.05))  # the loss default (LS-0.05)
        return LossInfo(name, None, 0.0, f"LS-{value}", f"LS-{value}")
    return LossInfo(name, None, 0.0, _SHORT_NAMES.get(name, name), _MUKHOTI_FIXED_NAMES.get(name))


def loss_color_key(info: LossInfo) -> tuple[str, float | None]:
    """Arguments for :func:`focalcal.plots.style.color_for`: the same loss, the same colour."""
    if info.name == "focal" and info.gamma is not None and not info.smoothing:
        return ("focal", info.gamma) if info.gamma > 0 else ("cross_entropy", None)
    return (info.name, None)


# ------------------------------------------------------------------------- calibrators

ROLE_LABELS = {
    "raw": "uncalibrated",
    "psi": "Ψ^γ",
    "ts_nll": "TS (val NLL)",
    "ts_ece": "TS (val ECE grid)",
    "ts_focal": "TS_FL",
    "ts_focal_psi": "TS_FL + Ψ^γ",
    "ts_grid_ece": "TS (grid, val ECE)",
    "ts_grid_nll": "TS (grid, val NLL)",
    "fts_ece": "focal TS (val ECE)",
    "fts_nll": "focal TS (val NLL)",
}


def method_role(resolved: dict) -> str:
    """The role of a calibrator as resolved by the plan (``{"build": {...}, "after": {...}}``).

    One of :data:`ROLE_LABELS`' keys, or "other" for calibrators no paper figure uses
    (vector scaling, isotonic, ...).
    """
    if not isinstance(resolved, dict) or "build" not in resolved:
        raise ValueError(f"expected a resolved calibrator spec with a 'build' dict, got {resolved!r}")
    build, after = resolved["build"], resolved.get("after")
    name = build.get("name")
    if after is not None:
        chained = name == "psi" and after.get("name") == "temperature_scaling" and after.get("objective") == "focal"
        return "ts_focal_psi" if chained else "other"
    if name == "identity":
        return "raw"
    if name == "psi":
        return "psi"
    if name == "temperature_scaling":
        return {"nll": "ts_nll", "ece": "ts_ece", "focal": "ts_focal"}.get(build.get("objective", "nll"), "other")
    if name == "focal_temperature_scaling":
        objective = build.get("objective", "ece")
        if objective not in ("ece", "nll"):
            return "other"
        gammas = build.get("gammas")
        only_zero = gammas is not None and [float(g) for g in gammas] == [0.0]
        return f"{'ts_grid' if only_zero else 'fts'}_{objective}"
    return "other"


def roles_of(methods: dict[str, dict], keys) -> dict[str, str]:
    """role -> first calibrator key (in ``keys`` order) that plays it, for one run."""
    found: dict[str, str] = {}
    for key in keys:
        found.setdefault(method_role(methods[key]), key)
    return found


# ---------------------------------------------------------------------------- settings

# Paper dataset names by dataset registry name; the stand-ins of the default config map to
# the dataset they stand in for (config/config.yaml says which).
_PAPER_DATASETS = {
    "cifar10": ("CIFAR-10", False),
    "cifar100": ("CIFAR-100", False),
    "tiny_imagenet": ("Tiny-ImageNet", False),
    "svhn": ("SVHN", False),
    "cifar10-s": ("CIFAR-10-s", False),
    "mnist1d": ("CIFAR-10", True),
    "mnist1d-s": ("CIFAR-10-s", True),
    "digits": ("SVHN", True),
}

# mukhoti2020's model names by model registry name.
_PAPER_MODELS = {
    "resnet50": "ResNet 50",
    "resnet110_bottleneck": "ResNet 110",
    "wide_resnet26_10": "Wide ResNet 26-10",
    "densenet121": "DenseNet 121",
}

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
    dataset, stand_in = _PAPER_DATASETS.get(dataset_spec.get("name"), (None, True))
    model = _PAPER_MODELS.get(model_spec.get("name"))
    if dataset is None:
        return PaperSetting(None, None, True)
    if model is None:
        return PaperSetting(dataset, REFERENCE_MODEL, True)
    return PaperSetting(dataset, model, stand_in)


# hossain2021 (segmentation): its dataset and model names (Tables 2-3). The synthetic set stands
# in for the MRI prostate set, whose 15:1 background:prostate imbalance it copies; an image/mask
# folder is matched by its folder name; any other model is compared with DeepLabV3+ (Table 2).
_HOSSAIN_DATASETS = {"synthetic_segmentation": ("MRI prostate", True), "camvid": ("CamVid", False)}
_HOSSAIN_FOLDERS = (("mri", "MRI prostate"), ("trus", "TRUS prostate"), ("cityscape", "Cityscape"))
_HOSSAIN_MODELS = {"deeplabv3plus": "DeepLabV3+", "vgg19_fcn": "VGG19 FCN"}
HOSSAIN_TABLES = {"DeepLabV3+": 2, "VGG19 FCN": 3}
HOSSAIN_LOSSES = {"cross_entropy": "CE", "weighted_cross_entropy": "WCE", "dual_cross_entropy": "DCE", "focal": "FL",
                  "generalized_dice": "GDL", "dual_focal": "DFL"}


def hossain_setting(dataset_spec: dict, model_spec: dict) -> PaperSetting:
    """Which hossain2021 (dataset, model) a segmentation run stands for."""
    name = dataset_spec.get("name")
    if name == "segmentation_folder":
        folder = str(dataset_spec.get("folder", "")).lower()
        dataset, stand_in = next((paper for key, paper in _HOSSAIN_FOLDERS if key in folder), None), False
    else:
        dataset, stand_in = _HOSSAIN_DATASETS.get(name, (None, True))
    model = _HOSSAIN_MODELS.get(model_spec.get("name"))
    if dataset is None:
        return PaperSetting(None, None, True)
    if model is None:
        return PaperSetting(dataset, "DeepLabV3+", True)
    return PaperSetting(dataset, model, stand_in)


def komisarenko_dataset(paper_dataset: str | None) -> str | None:
    """komisarenko2024 spells Tiny-ImageNet "TinyImageNet"."""
    return "TinyImageNet" if paper_dataset == "Tiny-ImageNet" else paper_dataset
