"""What each name of the library *is* to the workflow and the report, in one torch-free place.

The registries (:mod:`focalcal.losses`, ``.calibration``, ``.data``, ``.models``) build
things; this catalog says what a name means: a data set's task, whether its class posterior
is known and which published set it stands for; a model's name in the papers; a loss's focal
γ and its label; a calibrator's role; the papers' keys and titles (from their packages,
:mod:`focalcal.papers`). The
workflow reads it at parse time (no torch), the config schema's name enums are filled from
it (:func:`focalcal.pipeline.config.validate_config`), and each registry imports the modules
the catalog names, so a new loss is one module plus one entry here (``tests/test_catalog.py``
checks that catalog and registries list the same names).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from focalcal.papers import PAPERS as _PAPERS  # one package per paper (focalcal.papers)

TASKS = ("classification", "segmentation")
SUBSET_SUFFIX = "-s"  # "<set>-s": 10 % of each class of the training split (focalcal.data)
FROM_LOSS = "from_loss"  # a calibrator parameter that takes the run's focal γ (config: gamma: from_loss)


# -------------------------------------------------------------------------------- papers

PAPERS = {key: paper.title for key, paper in _PAPERS.items()}  # paper -> the title of its report page


# ------------------------------------------------------------------------------ datasets


@dataclass(frozen=True)
class Dataset:
    """``paper_name``: the published set a run on it is compared with (None: none);
    ``stand_in``: ours is a small stand-in for that set; ``known_posterior``: its logits.npz
    carries the true class posterior (val_/test_posterior), so KL(η‖q) is measurable."""

    task: str = "classification"
    paper_name: str | None = None
    stand_in: bool = False
    known_posterior: bool = False
    needs_download: bool = False


_DATASETS = {
    "cifar10": Dataset(paper_name="CIFAR-10", needs_download=True),
    "cifar100": Dataset(paper_name="CIFAR-100", needs_download=True),
    "tiny_imagenet": Dataset(paper_name="Tiny-ImageNet", needs_download=True),
    "svhn": Dataset(paper_name="SVHN", needs_download=True),
    "mnist1d": Dataset(paper_name="CIFAR-10", stand_in=True),  # config/config.yaml: MNIST-1D stands in for CIFAR-10
    "digits": Dataset(paper_name="SVHN", stand_in=True),  # sklearn digits stand in for SVHN
    "synthetic1d": Dataset(known_posterior=True),  # charoenphakdee2021 §5.2's kind of data
    # mukhoti2020's text rows (App. D). "20newsgroups" is the 19,997-document release its split
    # adds up to; the "bydate" release splits 18,846 documents by date, so it is another setting.
    "20newsgroups": Dataset(paper_name="20 Newsgroups", needs_download=True),
    "20newsgroups_bydate": Dataset(paper_name="20 Newsgroups", stand_in=True, needs_download=True),
    "sst_binary": Dataset(paper_name="SST Binary", needs_download=True),
    "synthetic_topics": Dataset(paper_name="20 Newsgroups", stand_in=True),  # 20 topics, offline
    "synthetic_treebank": Dataset(paper_name="SST Binary", stand_in=True),  # sentiment trees with negation, offline
    # hossain2021: the synthetic set copies the MRI prostate set's 15:1 imbalance; a folder of
    # images and masks is matched to a paper set by its folder name (focalcal.papers.hossain2021.labels).
    "synthetic_segmentation": Dataset(task="segmentation", paper_name="MRI prostate", stand_in=True),
    "camvid": Dataset(task="segmentation", paper_name="CamVid", needs_download=True),
    "segmentation_folder": Dataset(task="segmentation"),
}


PUBLISHED_SUBSETS = ("CIFAR-10-s",)  # charoenphakdee2021 Fig 5g; no paper reports another "-s" set


def _with_subsets(datasets: dict[str, Dataset]) -> dict[str, Dataset]:
    """Every classification set and its "-s" subset (charoenphakdee2021's CIFAR-10-s for CIFAR-10)."""
    out = {}
    for name, entry in datasets.items():
        out[name] = entry
        if entry.task == "classification":
            subset_name = f"{entry.paper_name}{SUBSET_SUFFIX}"
            subset_name = subset_name if subset_name in PUBLISHED_SUBSETS else None
            out[name + SUBSET_SUFFIX] = Dataset(entry.task, subset_name, entry.stand_in, entry.known_posterior,
                                                entry.needs_download)
    return out


DATASETS: dict[str, Dataset] = _with_subsets(_DATASETS)


def dataset(name: str) -> Dataset:
    try:
        return DATASETS[name]
    except KeyError:
        raise ValueError(f"unknown dataset {name!r}; known: {sorted(DATASETS)}") from None


def is_segmentation(dataset_spec: dict) -> bool:
    """Whether a config dataset spec (``{"name": ...}``) is a segmentation set: its runs are
    evaluated (IoU, Hausdorff distance), not calibrated."""
    return dataset(dataset_spec["name"]).task == "segmentation"


# -------------------------------------------------------------------------------- models


@dataclass(frozen=True)
class Model:
    """``paper_name``: the model's name in the papers' tables (None: no paper uses it)."""

    task: str = "classification"
    paper_name: str | None = None


MODELS: dict[str, Model] = {
    "mlp": Model(),
    "cnn_small": Model(),
    "cnn1d": Model(),
    "resnet8": Model(), "resnet20": Model(), "resnet32": Model(), "resnet44": Model(), "resnet56": Model(),
    "resnet110": Model(),
    "resnet50": Model(paper_name="ResNet 50"),
    "resnet110_bottleneck": Model(paper_name="ResNet 110"),
    "wide_resnet26_10": Model(paper_name="Wide ResNet 26-10"),
    "wide_resnet28_10": Model(),
    "densenet121": Model(paper_name="DenseNet 121"),
    "global_pooling_cnn": Model(paper_name="Global Pooling CNN"),  # mukhoti2020 20 Newsgroups rows
    "tree_lstm": Model(paper_name="Tree LSTM"),  # mukhoti2020 SST Binary rows
    "unet_small": Model(task="segmentation"),
    "deeplabv3plus": Model(task="segmentation", paper_name="DeepLabV3+"),
    "vgg19_fcn": Model(task="segmentation", paper_name="VGG19 FCN"),
}
# A config model name that is not a network: a model trained elsewhere, whose val/test logits
# come from a file (focalcal.logits_file): {name: logits_file, path: ...}. Its runs are
# imported, not trained; it has no paper name (the report shows the data set's).
LOGITS_FILE = "logits_file"
LOGITS_FILE_FIELDS = ("dataset", "loss", "seed")  # what a logits_file path may name: {dataset}, {loss}, {seed}


def is_logits_file(model_spec: dict) -> bool:
    """Whether a config model spec stands for a logits file rather than a network to train."""
    return model_spec.get("name") == LOGITS_FILE


# -------------------------------------------------------------------------------- losses


@dataclass(frozen=True)
class Loss:
    """``module``: where the loss is defined and registered (None: a preset of another loss,
    :data:`focalcal.losses.PRESETS`). ``gamma``: its single focal parameter — a number, or
    "parameter" for the spec's own ``gamma`` (focal) — or None when it has none.
    ``label``: short name in legends. What a paper prints for a loss is in its package
    (``labels`` of :mod:`focalcal.papers`)."""

    module: str | None
    label: str
    gamma: float | str | None = None


LOSSES: dict[str, Loss] = {
    "cross_entropy": Loss("cross_entropy", "CE", 0.0),
    "focal": Loss("focal", "FL", "parameter"),
    "focal_sample_dependent": Loss("focal", "FLSD"),
    "focal_scheduled": Loss("focal", "FLSc"),
    "flsd53": Loss(None, "FLSD-53"),
    "flsd532": Loss(None, "FLSD-532"),
    "flsc531": Loss(None, "FLSc-531"),
    "flsc532": Loss(None, "FLSc-532"),
    "label_smoothing": Loss("smoothing", "LS"),
    "brier": Loss("brier", "Brier"),
    "mmce": Loss("mmce", "MMCE"),
    "adafocal": Loss("adafocal", "AdaFocal"),
    "weighted_cross_entropy": Loss("segmentation", "WCE"),
    "dual_cross_entropy": Loss("segmentation", "DCE"),
    "dual_focal": Loss("segmentation", "DFL"),
    "generalized_dice": Loss("segmentation", "GDL"),
}


def loss(name: str) -> Loss:
    try:
        return LOSSES[name]
    except KeyError:
        raise ValueError(f"unknown loss {name!r}; known: {sorted(LOSSES)}") from None


def focal_gamma(loss_spec: dict) -> float | None:
    """The single focal parameter γ of a config loss spec (cross-entropy: 0), or None when the
    loss has none (a schedule, Brier, MMCE, ...) or leaves it to its default."""
    rule = loss(loss_spec["name"]).gamma
    if rule == "parameter":
        return float(loss_spec["gamma"]) if "gamma" in loss_spec else None
    return None if rule is None else float(rule)


# --------------------------------------------------------------------------- calibrators

CALIBRATORS: dict[str, str] = {  # name -> module of focalcal.calibration that defines and registers it
    "identity": "fixed_maps",
    "psi": "fixed_maps",
    "temperature_scaling": "temperature",
    "focal_temperature_scaling": "focal_temperature",
    "vector_scaling": "scaling",
    "matrix_scaling": "scaling",
    "histogram_binning": "binning",
    "isotonic": "binning",
    "dirichlet": "dirichlet",
    "ensemble_temperature_scaling": "ensemble",
    "beta": "beta",
}

# What a calibrator does in the papers' figures and tables, whatever a config calls it.
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


def calibrator_role(resolved: dict) -> str:
    """The role of a calibrator as the plan resolved it (``{"build": {...}, "after": {...}}``):
    one of :data:`ROLE_LABELS`' keys, or "other" for calibrators no paper figure uses."""
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


# ------------------------------------------------------------------------- registration

_PACKAGES = {"losses": LOSSES, "calibration": CALIBRATORS}


def import_modules(package: str) -> None:
    """Import every module of ``focalcal.<package>`` the catalog names, so that each registers
    its entries: what makes a catalog entry buildable without touching the package's
    ``__init__``."""
    entries = _PACKAGES[package]
    modules = {entry if isinstance(entry, str) else entry.module for entry in entries.values()}
    for module in sorted(m for m in modules if m):
        importlib.import_module(f"focalcal.{package}.{module}")


def schema_enums() -> dict[str, list[str]]:
    """The config schema's name enums (``$defs``), filled from the catalog at validation."""
    return {
        "dataset_name": sorted(DATASETS),
        "model_name": sorted([*MODELS, LOGITS_FILE]),
        "loss_name": sorted(LOSSES),
        "calibrator_name": sorted(CALIBRATORS),
        "paper_name": list(PAPERS),
    }
