"""Expand the studies of a validated config into one deduplicated pool of runs.

A run is (dataset, model, loss, recipe, seed), each a key of the config's tables, and its
directory is ``results/runs/<dataset>/<model>/<loss>/<recipe>/seed<k>/``. Studies are views
over the pool: two studies that need the same run share its directory and train it once.
The plan is built once when the Snakefile is parsed; the rules' input and params functions
only look things up in it, which keeps a dry run of thousands of jobs fast.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path

from focalcal.catalog import (
    FROM_LOSS,
    default_calibrators,
    focal_gamma,
    is_logits_file,
    is_segmentation,
    is_translation,
)
from focalcal.files.artefacts import read_json
from focalcal.paths import (
    HISTORY,
    LOGITS,
    METRICS,
    RUN_CONFIG,
    RUN_INFO,
    RUN_PATTERN,
    SAMPLES,
    TOKEN_LOGITS,
    calibration_dir,
    evaluation_dir,
    run_dir,
    study_table,
)
from focalcal.pipeline.config import ConfigError, apply_overlays, load_config_files, validate_config

IDENTITY_KEYS = ("dataset", "model", "loss", "recipe", "seed")  # what determines a run's numbers
# How a run is executed, not what it computes: read by the train job from the config, never a rule
# param, so changing them does not re-plan finished runs.
EXECUTION_KEYS = ("device", "compile")
# Snakemake groups of a run's jobs (train, export, calibrate or segmentation evaluation): one
# cluster submission each, or ``group-components`` of them packed into one.
RUN_GROUP = "run"
SHARED_GPU_GROUP = "gpu_run"  # runs_per_gpu of these share one submission and its GPUs


# The recipe part of an imported run's path when its grid names no recipe (logits files only).
IMPORTED_RECIPE = "imported"


@dataclass(frozen=True)
class Run:
    """One training run. In a cross-validated grid (``folds: K``) run k trains with seed k and
    is tested on fold k of K; ``n_folds`` is then K (None otherwise). An ``imported`` run is
    not trained: its model is a ``logits_file`` and its logits come from that file."""

    dataset: str
    model: str
    loss: str
    recipe: str
    seed: int
    n_folds: int | None = None
    segmentation: bool = False
    imported: bool = False
    translation: bool = False  # a translation corpus: its run dumps token_logits.npz

    @property
    def path(self) -> str:
        """``<dataset>/<model>/<loss>/<recipe>/seed<k>``, shared by the run and its calibration."""
        return RUN_PATTERN.format(dataset=self.dataset, model=self.model, loss=self.loss, recipe=self.recipe,
                                  seed=self.seed)

    @property
    def run_dir(self) -> str:
        return run_dir(self.path)

    @property
    def calibration_dir(self) -> str:
        return calibration_dir(self.path)

    @property
    def evaluation_dir(self) -> str:
        """Where a segmentation run's evaluation (metrics.csv, samples.npz) goes."""
        return evaluation_dir(self.path)

    @property
    def fold(self) -> int | None:
        return self.seed if self.n_folds else None

    def columns(self) -> dict:
        return {"dataset": self.dataset, "model": self.model, "loss": self.loss, "recipe": self.recipe, "seed": self.seed}


@dataclass
class StudyRuns:
    """One study: its runs, and for each the calibrators and bin counts it reports."""

    key: str
    paper: str
    mirrors: str
    ece_bins: list[int]
    runs: dict[Run, list[str]] = field(default_factory=dict)  # run -> the calibrator keys it reports, in config order
    grid_of: dict[Run, str] = field(default_factory=dict)  # run -> what its grid mirrors

    def has_table(self, plan: Plan) -> bool:
        """Whether some run of the study is calibrated or evaluated, i.e. has metrics to tabulate."""
        return any(run.segmentation or plan.calibrators[run.path] for run in self.runs)


@dataclass
class Plan:
    config: dict
    runs: dict[str, Run]  # run path -> run, in first-seen order
    calibrators: dict[str, dict[str, dict]]  # run path -> calibrator key -> resolved spec
    studies: dict[str, StudyRuns]

    # ----------------------------------------------------------------- lookups for rules
    def run(self, wildcards) -> Run:
        path = RUN_PATTERN.format(dataset=wildcards.dataset, model=wildcards.model, loss=wildcards.loss,
                                  recipe=wildcards.recipe, seed=wildcards.seed)
        try:
            return self.runs[path]
        except KeyError:
            raise ConfigError(f"no run {path} in this config's studies") from None

    def run_identity(self, run: Run) -> dict:
        """The settings that determine the run's numbers (``IDENTITY_KEYS``): the train rule's params."""
        config = self.config
        dataset = copy.deepcopy(config["datasets"][run.dataset])
        if run.n_folds:
            dataset.update(n_folds=run.n_folds, fold=run.fold)
        return {
            "dataset": dataset,
            "model": copy.deepcopy(config["models"][run.model]),
            "loss": copy.deepcopy(config["losses"][run.loss]),
            "recipe": copy.deepcopy(config["recipes"].get(run.recipe)) if run.imported else
            copy.deepcopy(config["recipes"][run.recipe]),
            "seed": run.seed,
        }

    def logits_source(self, run: Run) -> str:
        """The logits file of an imported run: its model's ``path`` with {dataset}, {loss}, {seed} filled in."""
        if not run.imported:
            raise ValueError(f"run {run.path} is trained, not imported from a logits file")
        return self.config["models"][run.model]["path"].format(dataset=run.dataset, loss=run.loss, seed=run.seed)

    def model_keys(self, imported: bool) -> list[str]:
        """The model keys of the planned runs that are imported (``True``) or trained (``False``)."""
        return sorted({run.model for run in self.runs.values() if run.imported == imported})

    def run_config(self, run: Run) -> dict:
        """The trainer's RunConfig dict (focalcal.training.RunConfig.from_dict)."""
        return {**self.run_identity(run), **execution_settings(self.config)}

    def train_resources(self, run: Run) -> dict:
        """What a job that loads the run's model asks the scheduler for: ``threads``, ``mem_mb``,
        ``runtime`` and ``gpu`` from ``training`` (per recipe under ``by_recipe``), plus

        * ``gpu_slots`` — 1 for a job on a GPU, else 0: ``snakemake --resources gpu_slots=N`` lets
          N training jobs share a machine's GPUs at once (several runs per GPU);
        * ``gres`` — with ``training.runs_per_gpu`` > 1, the GPU request as SLURM's ``--gres``
          string (and ``gpu`` 0): Snakemake sums a group's integer resources over its parallel
          jobs but passes a string once, so the runs one submission packs share its GPU. None
          (no such resource) otherwise, so CPU runs packed with GPU runs ask for nothing.
        """
        training = self.config["training"]
        resources = {key: training[key] for key in ("threads", "mem_mb", "runtime", "gpu")}
        resources.update(training["by_recipe"].get(run.recipe, {}))
        gpus = resources["gpu"]
        resources["gpu_slots"] = 1 if gpus else 0
        shared = gpus and training.get("runs_per_gpu", 1) > 1
        resources["gres"] = f"gpu:{gpus}" if shared else None
        if shared:
            resources["gpu"] = 0
        return resources

    def run_group(self, run: Run) -> str:
        """The Snakemake group of a run's jobs: :data:`SHARED_GPU_GROUP` for runs that share GPUs
        (``training.runs_per_gpu`` > 1), :data:`RUN_GROUP` for the others; one submission packs
        runs of one group only, so every job in it asks for the same ``gres``."""
        return SHARED_GPU_GROUP if self.train_resources(run)["gres"] else RUN_GROUP

    def calibrated_runs(self) -> list[Run]:
        return [self.runs[path] for path, keys in self.calibrators.items() if keys]

    def study_inputs(self, study: str) -> list[str]:
        """The files a study's table is built from: each run's metrics (calibration, or segmentation
        evaluation) and its ``run.json`` (the run's health status)."""
        inputs = []
        for run in self.studies[study].runs:
            if run.segmentation:
                inputs += [f"{run.evaluation_dir}/{METRICS}", self.run_info_path(run)]
            elif self.calibrators[run.path]:
                inputs += [f"{run.calibration_dir}/{METRICS}", self.run_info_path(run)]
        return inputs

    @staticmethod
    def run_info_path(run: Run) -> str:
        """The run's ``run.json``: written with its logits, or for a segmentation run with its test scores."""
        return f"{run.evaluation_dir if run.segmentation else run.run_dir}/{RUN_INFO}"

    def table_targets(self) -> list[str]:
        return [study_table(key) for key, study in self.studies.items() if study.has_table(self)]

    def segmentation_runs(self) -> list[Run]:
        return [run for run in self.runs.values() if run.segmentation]

    def evaluation_targets(self) -> list[str]:
        """Every segmentation run's evaluation (a deleted one is re-made from the checkpoint)."""
        return [f"{run.evaluation_dir}/{name}" for run in self.segmentation_runs() for name in (METRICS, SAMPLES)]

    def logits_targets(self) -> list[str]:
        """Every calibrated run's logits: a deleted logits file is re-dumped by a plain ``snakemake``."""
        return [f"{run.run_dir}/{LOGITS}" for run in self.calibrated_runs() if not run.translation]

    def translation_runs(self) -> list[Run]:
        return [run for run in self.runs.values() if run.translation]

    def token_logits_targets(self) -> list[str]:
        """Every translation run's token_logits.npz (a deleted one is re-dumped from the checkpoint)."""
        return [f"{run.run_dir}/{TOKEN_LOGITS}" for run in self.translation_runs()]

    def training_targets(self) -> list[str]:
        """Runs no study calibrates or evaluates: train them."""
        return [f"{run.run_dir}/{HISTORY}" for path, run in self.runs.items()
                if not self.calibrators[path] and not run.segmentation and not run.imported and not run.translation]


def build_plan(config: dict) -> Plan:
    """The deduplicated runs of every study, each with the calibrators its studies need."""
    runs: dict[str, Run] = {}
    calibrators: dict[str, dict[str, dict]] = {}
    studies: dict[str, StudyRuns] = {}
    for study_key, study in config["studies"].items():
        view = StudyRuns(study_key, study["paper"], study["mirrors"], list(study.get("ece_bins") or config["ece_bins"]))
        for grid in study["grids"]:
            n_folds = grid.get("folds")
            seeds = range(n_folds) if n_folds else grid["seeds"]
            for dataset in grid["datasets"]:
                segmentation = is_segmentation(config["datasets"][dataset])
                translation = is_translation(config["datasets"][dataset])
                for model in grid["models"]:
                    imported = is_logits_file(config["models"][model])
                    for loss in grid["losses"]:
                        for seed in seeds:
                            run = Run(dataset, model, loss, grid.get("recipe", IMPORTED_RECIPE), int(seed), n_folds,
                                      segmentation, imported, translation)
                            known = runs.setdefault(run.path, run)
                            if known != run:
                                raise ConfigError(
                                    f"studies.{study_key}: run {run.path} is planned both with n_folds="
                                    f"{known.n_folds} and n_folds={run.n_folds} (one directory, two data splits); "
                                    "use another recipe or dataset key for one of them")
                            resolved = calibrators.setdefault(run.path, {})
                            for calibrator in grid["calibrators"]:
                                if calibrator not in resolved:
                                    resolved[calibrator] = resolve_calibrator(config, calibrator, run)
                            chosen = view.runs.setdefault(run, [])
                            chosen.extend(c for c in grid["calibrators"] if c not in chosen)
                            view.grid_of.setdefault(run, grid.get("mirrors", study["mirrors"]))
        kinds = {(run.segmentation, run.translation) for run in view.runs}
        if len(kinds) > 1:
            raise ConfigError(f"studies.{study_key} mixes segmentation, translation or classification runs; split it "
                              "into studies of one kind (their metrics and tables differ)")
        studies[study_key] = view
    return Plan(config=config, runs=runs, calibrators=calibrators, studies=studies)


def resolve_calibrator(config: dict, key: str, run: Run) -> dict:
    """The calibrator's build dict for this run: ``from_loss`` replaced by the loss's gamma."""
    spec = copy.deepcopy(config["calibrators"][key])
    after = spec.pop("after", None)
    for name, value in spec.items():
        if value == FROM_LOSS:
            spec[name] = loss_gamma(config["losses"][run.loss], run.loss, f"calibrators.{key}.{name}")
    resolved = {"build": spec}
    if after is not None:
        resolved["after"] = resolve_calibrator(config, after, run)["build"]
    return resolved


def loss_gamma(loss: dict, loss_key: str, where: str) -> float:
    """The run's focal γ for a calibrator parameter ``from_loss`` (:func:`focalcal.catalog.focal_gamma`)."""
    gamma = focal_gamma(loss)
    if gamma is not None:
        return gamma
    if loss["name"] == "focal":
        raise ConfigError(f"{where} = {FROM_LOSS!r} needs losses.{loss_key}.gamma written out (the loss default may change)")
    raise ConfigError(
        f"{where} = {FROM_LOSS!r} but losses.{loss_key} ({loss['name']!r}) has no single gamma; "
        "use it only with focal or cross_entropy losses"
    )


class RunConflictError(ConfigError):
    """A run directory on disk was made with settings other than this config's."""


def identity(run_config: dict) -> dict:
    return {key: run_config[key] for key in IDENTITY_KEYS}


def execution_settings(config: dict) -> dict:
    """``EXECUTION_KEYS`` of a validated workflow config."""
    return {key: config[key] for key in EXECUTION_KEYS}


def segmentation_bins(config: dict) -> int:
    """ECE bins of a segmentation run's pixel ECE: the finest of the config's ``ece_bins``."""
    return max(config["ece_bins"])


def check_run_directories(plan: Plan, root=".") -> None:
    """Refuse to reuse a run directory whose ``run_config.json`` holds other settings.

    Runs are keyed by table keys, so a config that redefines, say, recipe ``short`` with
    more epochs would otherwise resume or reuse runs trained with the old recipe.
    """
    root = Path(root)
    problems = []
    for run in plan.runs.values():
        path = root / run.run_dir / RUN_CONFIG
        if not path.exists():
            continue
        on_disk = identity(read_json(path, verify=False))  # parse time: no hashing; a damaged file is still named
        planned = json.loads(json.dumps(plan.run_identity(run)))
        if on_disk != planned:
            differences = "; ".join(_differences(on_disk, planned)) or "differently ordered settings"
            problems.append(f"{run.run_dir}: {differences}")
    if problems:
        raise RunConflictError(
            "this config would reuse run directories made with different settings "
            "(a run directory is named by table keys, so a key must keep its meaning). "
            "Rename the changed key, or delete the run directory to retrain:\n  "
            + "\n  ".join(problems[:20])
            + (f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else "")
        )


def _differences(on_disk, planned, prefix="") -> list[str]:
    if isinstance(on_disk, dict) and isinstance(planned, dict):
        out = []
        for key in sorted(set(on_disk) | set(planned)):
            where = f"{prefix}.{key}" if prefix else key
            if key not in planned:
                out.append(f"{where} = {on_disk[key]!r} on disk, unset in this config")
            elif key not in on_disk:
                out.append(f"{where} unset on disk, {planned[key]!r} in this config")
            else:
                out.extend(_differences(on_disk[key], planned[key], where))
        return out
    return [] if on_disk == planned else [f"{prefix} = {on_disk!r} on disk, {planned!r} in this config"]


@dataclass(frozen=True)
class PlannedRun:
    """One (data set, model, loss, recipe) a shipped config trains, as the trainer's config dict."""

    label: str
    run_config: dict
    configs: tuple[str, ...]


def planned_runs(config_files, schema=None) -> list[PlannedRun]:
    """Every distinct trained (data set, model, loss, recipe) of ``config_files`` (each a file, or
    a base file and its overlays, merged as Snakemake merges them), seeds and folds
    aside, from :func:`build_plan` (translation runs excepted: their trainer never captures a
    step, :mod:`focalcal.training.translation`): what the graph-safety check (:mod:`focalcal.training.graph_safety`)
    and the GPU recipe benchmark step through. ``schema``: validate (and fill defaults)
    with it, which needs jsonschema; without it the files are planned as written."""
    found: dict[str, PlannedRun] = {}
    for files in config_files:
        files = [files] if isinstance(files, (str, Path)) else list(files)
        config, path = load_config_files(files), files[-1]
        if schema is not None:
            config = validate_config(config, schema)
        else:  # the schema's defaults of the execution settings
            config.setdefault("device", "auto")
            config.setdefault("compile", "auto")
            config.setdefault("calibrators", default_calibrators())
            for study in config.get("studies", {}).values():
                for grid in study.get("grids", []):
                    grid.setdefault("calibrators", [])
            apply_overlays(config)
        plan = build_plan(config)
        for run in plan.runs.values():
            if run.imported or run.translation:  # translation: token batches of varying shape, always eager
                continue
            run_config = plan.run_config(run)
            run_config["dataset"] = {k: v for k, v in run_config["dataset"].items() if k not in ("fold", "n_folds")}
            run_config["seed"] = 0
            key = json.dumps({k: run_config[k] for k in ("dataset", "model", "loss", "recipe")}, sort_keys=True,
                             default=str)
            label = f"{run.dataset}/{run.model}/{run.loss}/{run.recipe}"
            known = found.get(key)
            configs = (*known.configs, Path(path).name) if known else (Path(path).name,)
            found[key] = PlannedRun(known.label if known else label, run_config, tuple(dict.fromkeys(configs)))
    return list(found.values())
