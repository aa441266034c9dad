"""What each name of the library *is* to the workflow and the report, in one torch-free place.

The registries (:mod:`focalcal.losses`, ``.calibration``, ``.data``, ``.models``) build
things; this catalog says what a name means: a data set's task, whether its class posterior
is known and which published set it stands for; a model's name in the papers; a loss's focal
γ, its label and the names the papers print; a calibrator's role; a paper's title. The
workflow reads it at parse time (no torch), the config schema's name enums are filled from
it (:func:`focalcal.pipeline.config.validate_config`), and each registry imports the modules
the catalog names, so a new loss is one module plus one entry here (``tests/test_catalog.py``
checks that catalog and registries list the same names).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

TASKS = ("classification", "segmentation")
SUBSET_SUFFIX = "-s"  # "<set>-s": 10 % of each class of the training split (focalcal.data)
FROM_LOSS = "from_loss"  # a calibrator parameter that takes the run's focal γ (config: gamma: from_loss)


# -------------------------------------------------------------------------------- papers

PAPERS = {  # paper -> the title of its report page
    "charoenphakdee2021": "Charoenphakdee et al. 2021 — Focal loss and class posteriors (φ^γ, τ_oc/τ_uc, Ψ^γ)",
    "komisarenko2024": "Komisarenko et al. 2024 — Focal calibration map and focal temperature scaling",
    "mukhoti2020": "Mukhoti et al. 2020 — Calibrating deep neural networks using focal loss",
    "hossain2021": "Hossain et al. 2021 — Dual focal loss for class-imbalanced segmentation",
}


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
    # images and masks is matched to a paper set by its folder name (focalcal.report.naming).
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
    ``label``: short name in legends. ``paper_names``: paper -> the name it prints."""

    module: str | None
    label: str
    gamma: float | str | None = None
    paper_names: dict[str, str] = field(default_factory=dict)


LOSSES: dict[str, Loss] = {
    "cross_entropy": Loss("cross_entropy", "CE", 0.0,
                          {"mukhoti2020": "Cross-Entropy", "hossain2021": "CE"}),
    "focal": Loss("focal", "FL", "parameter", {"hossain2021": "FL"}),
    "focal_sample_dependent": Loss("focal", "FLSD"),
    "focal_scheduled": Loss("focal", "FLSc"),
    "flsd53": Loss(None, "FLSD-53", paper_names={"mukhoti2020": "FLSD-53"}),
    "flsd532": Loss(None, "FLSD-532", paper_names={"mukhoti2020": "FLSD-532"}),
    "flsc531": Loss(None, "FLSc-531", paper_names={"mukhoti2020": "FLSc-531"}),
    "flsc532": Loss(None, "FLSc-532", paper_names={"mukhoti2020": "FLSc-532"}),
    "label_smoothing": Loss("smoothing", "LS"),
    "brier": Loss("brier", "Brier", paper_names={"mukhoti2020": "Brier Loss"}),
    "mmce": Loss("mmce", "MMCE", paper_names={"mukhoti2020": "MMCE"}),
    "adafocal": Loss("adafocal", "AdaFocal"),
    "weighted_cross_entropy": Loss("segmentation", "WCE", paper_names={"hossain2021": "WCE"}),
    "dual_cross_entropy": Loss("segmentation", "DCE", paper_names={"hossain2021": "DCE"}),
    "dual_focal": Loss("segmentation", "DFL", paper_names={"hossain2021": "DFL"}),
    "generalized_dice": Loss("segmentation", "GDL", paper_names={"hossain2021": "GDL"}),
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


# ------------------------------------------------------------------------ theory figures


@dataclass(frozen=True)
class TheoryFigure:
    """A figure of a paper's theory, exact and run-free: ``draw`` is the :mod:`focalcal.plots`
    function that draws it, with ``options`` at the paper's grid; ``coarse`` replaces some of
    them for config ``report.theory_grid: coarse`` (quick grids for tests and previews)."""

    paper: str
    title: str
    draw: str
    options: dict = field(default_factory=dict)
    coarse: dict = field(default_factory=dict)

    def arguments(self, grid: str) -> dict:
        return {**self.options, **(self.coarse if grid == "coarse" else {})}


# The closest-temperature searches (K >= 3) are the costly part; coarse grids use fewer γ and
# coarser logit steps.
_COARSE_GAMMAS = [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
_COARSE_SIMPLEX = {"logit_step": 0.1}
_COARSE_LINEAR_MODEL = {"iterations": 100}

THEORY_FIGURES: dict[str, TheoryFigure] = {
    "charoenphakdee2021_fig1_phi": TheoryFigure(
        "charoenphakdee2021", "Fig 1: φ^γ with the η-overconfident (τ_oc) and η-underconfident (τ_uc) regions",
        "phi_figure"),
    "charoenphakdee2021_fig2_posterior_vs_minimizer": TheoryFigure(
        "charoenphakdee2021", "Fig 2: max η against max q* of the focal risk minimiser, K = 2 and K = 1000",
        "posterior_vs_minimizer_figure"),
    "komisarenko2024_fig1_focal_calibration_map": TheoryFigure(
        "komisarenko2024", "Fig 1: the proper part of the focal loss and the binary focal calibration map",
        "focal_calibration_map_figure"),
    "komisarenko2024_fig2_closest_temperature_k2": TheoryFigure(
        "komisarenko2024", "Fig 2: temperature closest to the focal map against γ, K = 2 (linear fit and max error)",
        "closest_temperature_figure", {"num_classes": 2},
        {"gammas": [0.0, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0], "logit_step": 0.01}),
    "komisarenko2024_fig6_closest_temperature_k3": TheoryFigure(
        "komisarenko2024", "Fig 6: temperature closest to the focal map against γ, K = 3",
        "closest_temperature_figure", {"num_classes": 3}, {"gammas": _COARSE_GAMMAS, "logit_step": 0.1}),
    "komisarenko2024_closest_temperature_k4": TheoryFigure(
        "komisarenko2024", "§3.3: temperature closest to the focal map against γ, K = 4",
        "closest_temperature_figure", {"num_classes": 4}, {"gammas": _COARSE_GAMMAS, "logit_step": 0.25}),
    "komisarenko2024_fig3_temperature_bounds": TheoryFigure(
        "komisarenko2024", "Fig 3: Prop 3's temperature bounds against the numerical ones", "temperature_bounds_figure"),
    "komisarenko2024_fig4_conditional_risk": TheoryFigure(
        "komisarenko2024", "Fig 4: conditional-risk isolines on the 3-class simplex", "conditional_risk_isolines_figure"),
    "komisarenko2024_fig5_calibration_arrows": TheoryFigure(
        "komisarenko2024", "Fig 5: arrow maps of the focal map and of its closest temperature scaling",
        "calibration_arrows_figure", coarse=_COARSE_SIMPLEX),
    "komisarenko2024_fig7_calibration_difference": TheoryFigure(
        "komisarenko2024", "Fig 7: heat map of temperature scaling minus focal calibration",
        "calibration_difference_figure", coarse=_COARSE_SIMPLEX),
    "mukhoti2020_fig4a_gradient_ratio": TheoryFigure(
        "mukhoti2020", "Fig 4a and Prop 2: g(p, γ) and γ*(p0)", "gradient_ratio_figure"),
    "mukhoti2020_fig6_binary_optimum": TheoryFigure(
        "mukhoti2020", "Fig 6: optimal p̂ against q for a binary problem, cross-entropy and focal loss",
        "binary_optimum_figure", {"n_points": 401}, {"n_points": 41}),
    "mukhoti2020_fig7_linear_model_norms": TheoryFigure(
        "mukhoti2020", "Fig 7 (App. B): logit and weight norms of a logistic regression trained with cross-entropy "
        "and focal loss γ = 1", "linear_model_norms_figure", coarse=_COARSE_LINEAR_MODEL),
    "mukhoti2020_fig8_linear_model_mistakes": TheoryFigure(
        "mukhoti2020", "Fig 8 (App. B): confidence of the linear model's mistakes and its decision boundaries, "
        "cross-entropy vs focal loss", "linear_model_mistakes_figure", coarse=_COARSE_LINEAR_MODEL),
    "hossain2021_fig1_loss_derivatives": TheoryFigure(
        "hossain2021", "Fig 1: derivatives of CE, DCE, FL and DFL for y = 1 and y = 0", "loss_derivatives_figure"),
}


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
