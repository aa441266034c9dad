"""The run configuration: everything that determines one training run.

A run is (dataset, model, loss, recipe, seed). The recipe is the named set of training
hyperparameters a study shares (epochs, optimiser, LR milestones, batch size,
augmentation). The whole config is stored in the run directory's ``run.json``; resuming a
run with a different config is an error rather than a silent mix of two runs.
"""

from __future__ import annotations

import copy
import hashlib
import json
import numbers
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from focalcal.catalog import AUGMENTATION_PRESETS
from focalcal.core.constraints import (
    NON_NEGATIVE,
    POSITIVE,
    POSITIVE_INT,
    REAL,
    Interval,
    Options,
    SequenceOf,
    Table,
    json_schema,
    validate_parameters,
)

OPTIMIZERS = ("sgd", "adam", "adagrad")
AUGMENTATIONS = ("dataset", *AUGMENTATION_PRESETS)  # "dataset": the data set's own (its catalog entry)
DEVICES = ("auto", "cpu", "cuda")
# How the training step runs (focalcal.training.step, which documents each); not part of a run's identity.
COMPILE_MODES = ("auto", "none", "default", "cudagraphs", "inductor_cudagraphs")
LOSS_REDUCTIONS = ("mean", "sum", "mean_of_sums")
SELECTIONS = ("final", "best_val_accuracy")
# "epoch": lr_milestones / lr_step_every, stepped after each epoch; "inverse_sqrt": Vaswani et
# al. 2017's warm-up then inverse-square-root decay (eq. 3), stepped after each batch.
LR_SCHEDULES = ("epoch", "inverse_sqrt")
PER_BATCH_SCHEDULES = ("inverse_sqrt",)
# Recipe keys added after runs had been checkpointed, with their defaults: left out of the
# fingerprint while at the default, so a checkpoint written before they existed (whose run
# trained with exactly these defaults) still resumes.
LATER_RECIPE_DEFAULTS = {"loss_reduction": "mean", "grad_clip_norm": None, "gradient_norm_epochs": [],
                         "select": "final", "embedding_lr": None, "drop_last": False, "flsd_threshold": None,
                         "lr_schedule": "epoch", "warmup_steps": None, "max_tokens": None,
                         "max_steps": None, "average_checkpoints": None}
LATER_OPTIMIZER_DEFAULTS = {"eps": 1e-8}  # the same, for recipe.optimizer


@dataclass
class OptimizerConfig:
    name: str = "sgd"
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 5e-4
    nesterov: bool = False
    betas: tuple[float, float] = (0.9, 0.999)  # adam only
    eps: float = 1e-8  # adam only: torch's default; 1e-9 in Vaswani et al. 2017 §5.3


@dataclass
class Recipe:
    """Training hyperparameters shared by every run of a study (papers' §Experimental setup)."""

    epochs: int = 30
    batch_size: int = 128
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    lr_milestones: list[int] = field(default_factory=list)
    lr_decay: float = 0.1
    # hossain2021 §4.2: "drop factor 0.3 every 10 epochs" = lr_step_every=10, lr_decay=0.3
    lr_step_every: int | None = None
    # "dataset": what the papers train this dataset with (crop+flip for CIFAR, crop for SVHN, none for 1-D data)
    augmentation: str = "dataset"
    eval_batch_size: int = 1024
    # Epochs (1-based) at which to record the training set's reliability bins (mukhoti2020 Fig 1).
    reliability_epochs: list[int] = field(default_factory=list)
    reliability_bins: int = 25
    # Epochs (1-based) at which to record, over the un-augmented training set in eval mode, each
    # sample's gradient norm of the last linear layer (mukhoti2020 Fig 4b-d; the paper's epochs
    # are 10, 100, 200; how it measured them is not published: this is the project's reading).
    gradient_norm_epochs: list[int] = field(default_factory=list)
    # Stop when the validation loss has not improved for this many epochs (hossain2021 §4.2);
    # the logits are then dumped from the best epoch's weights. None: train all epochs.
    early_stopping_patience: int | None = None
    # What the gradient step descends: "mean" (default: the PyTorch convention, the project's
    # choice) the batch's per-sample (per-pixel) mean loss; "sum" that mean times the batch's
    # labelled count, i.e. the summed loss, as in the released code of mukhoti2020
    # (train_utils.py; its MMCE is CE mean + λ·MMCE, times the batch size); "mean_of_sums"
    # each sample's element losses summed (a tree's node losses), averaged over the batch's
    # samples, i.e. the summed loss divided by the batch's samples (mukhoti2020's released
    # treeLSTM/trainer.py). The logged train_loss stays the per-element mean either way.
    loss_reduction: str = "mean"
    # Step the model's word vectors (its ``embedding``) by plain SGD at this rate — no momentum,
    # no weight decay, no LR schedule — and the rest by ``optimizer``; None (default): the
    # vectors are one more parameter of ``optimizer``. 0.1 in mukhoti2020's released SST code
    # (treeLSTM/config.py ``--emblr``, applied in treeLSTM/trainer.py).
    embedding_lr: float | None = None
    # Clip the total 2-norm of all parameter gradients to this before every step; None (default:
    # no clipping, the project's choice). 2 in the released code of mukhoti2020 (train_utils.py).
    grad_clip_norm: float | None = None
    # Which weights the run reports (its logits, run.json): "final" (default) the last epoch's;
    # "best_val_accuracy" those of the epoch with the lowest validation error (the first such
    # epoch), kept in the checkpoint — mukhoti2020 App. D's text models "used the models with the
    # best validation accuracy". Early stopping picks by validation loss instead; not both.
    select: str = "final"
    # Step on whole batches only: each epoch leaves out the last len(train) % batch_size samples
    # of its shuffle (True), or steps on that partial batch too (False, default). True in
    # mukhoti2020's released 20 Newsgroups code (NewsGroup/ng_utils.py: range(N // batch_size)).
    drop_last: bool = False
    # The p_y below which FLSD (focal_sample_dependent, FLSD-53, FLSD-532) takes its largest γ,
    # in place of the loss's own first threshold (0.2, mukhoti2020's vision code); None (default):
    # the loss's own. 0.19 in mukhoti2020's released text code. Other losses ignore it.
    flsd_threshold: float | None = None
    # How the learning rate moves: "epoch" (default) by lr_milestones or lr_step_every after each
    # epoch; "inverse_sqrt" after each batch, Vaswani et al. 2017 §5.3 (eq. 3):
    # lr = optimizer.lr · min(step^-0.5, step · warmup_steps^-1.5), step = 1 on the first batch,
    # with optimizer.lr = d_model^-0.5 for the paper's rate (0.0442 for d_model 512).
    lr_schedule: str = "epoch"
    warmup_steps: int | None = None  # "inverse_sqrt" only: 4000 in Vaswani et al. 2017 §5.3
    # Translation runs: batches of sentence pairs of about this many tokens
    # (focalcal.data.translation.token_batches; Vaswani et al. 2017 §5.1: about 25,000 source and
    # 25,000 target tokens), in place of batch_size sentences. None: batch_size sentences.
    max_tokens: int | None = None
    # Translation runs: stop after this many batches (Vaswani et al. 2017 §5.2: 100,000 for the
    # base model), the last epoch then a partial one; ``epochs`` stays the upper bound. None: epochs.
    max_steps: int | None = None
    # {count: k, every_steps: n}: the run's final weights are the element-wise mean of the last k
    # snapshots, taken every n optimiser steps and after the last step (Vaswani et al. 2017 §6.1:
    # the last 5 checkpoints, written every 10 minutes; focalcal.training.averaging). None: the
    # last step's weights. Not with early stopping or recipe.select, which pick an epoch's weights.
    average_checkpoints: dict[str, int] | None = None


# What each key may hold (focalcal.core.constraints), declared once: RunConfig.validate checks them,
# and the config schema's recipe, device and compile are generated from them (recipe_schema,
# execution_schema; focalcal.pipeline.config.load_schema). The checks between keys are in validate.
MAX_EPOCHS = 10_000
MAX_BATCH_SIZE = 100_000
#: Why a bound is where it is: the schema's description of the key, shown in its errors.
BOUND_REASONS = {
    "epochs": "the papers train for at most a few hundred epochs; more is a typo that would run for years",
    "batch_size": "no data set of the catalog has more training samples than this",
    "eval_batch_size": "no data set of the catalog has more samples in one split than this",
}
EPOCH_LIST = SequenceOf(POSITIVE_INT, min_length=0)
#: What recipe.optimizer may hold.
OPTIMIZER_CONSTRAINTS = {
    "name": [Options(OPTIMIZERS)], "lr": [POSITIVE], "momentum": [NON_NEGATIVE], "weight_decay": [NON_NEGATIVE],
    "nesterov": [bool], "betas": [SequenceOf(REAL, length=2)], "eps": [POSITIVE],
}
#: What recipe.average_checkpoints may hold, when it is not None.
AVERAGE_CHECKPOINTS_CONSTRAINTS = {"count": [POSITIVE_INT], "every_steps": [POSITIVE_INT]}
#: What each recipe key may hold (optimizer and average_checkpoints: the two tables above).
RECIPE_CONSTRAINTS = {
    "epochs": [Interval(numbers.Integral, 1, MAX_EPOCHS)],
    "batch_size": [Interval(numbers.Integral, 1, MAX_BATCH_SIZE)],
    "optimizer": [OptimizerConfig],
    "lr_milestones": [SequenceOf(POSITIVE_INT, min_length=0, increasing=True)],
    "lr_decay": [POSITIVE],
    "lr_step_every": [POSITIVE_INT, None],
    "augmentation": [Options(AUGMENTATIONS)],
    "eval_batch_size": [Interval(numbers.Integral, 1, MAX_BATCH_SIZE)],
    "reliability_epochs": [EPOCH_LIST],
    "reliability_bins": [POSITIVE_INT],
    "gradient_norm_epochs": [EPOCH_LIST],
    "early_stopping_patience": [POSITIVE_INT, None],
    "loss_reduction": [Options(LOSS_REDUCTIONS)],
    "embedding_lr": [POSITIVE, None],
    "grad_clip_norm": [POSITIVE, None],
    "select": [Options(SELECTIONS)],
    "drop_last": [bool],
    "flsd_threshold": [Interval(numbers.Real, 0, 1, closed="neither"), None],
    "lr_schedule": [Options(LR_SCHEDULES)],
    "warmup_steps": [POSITIVE_INT, None],
    "max_tokens": [POSITIVE_INT, None],
    "max_steps": [POSITIVE_INT, None],
    "average_checkpoints": [Table(AVERAGE_CHECKPOINTS_CONSTRAINTS), None],
}
#: How a run is executed (not part of its identity).
EXECUTION_CONSTRAINTS = {"device": [Options(DEVICES)], "compile": [Options(COMPILE_MODES)]}


def _mapping_schema(constraints: dict, owner, nested: dict | None = None) -> dict:
    """An object of ``owner``'s fields and nothing else, each as ``constraints`` declares it
    (``nested``: the schemas of the fields that hold a table of their own)."""
    nested = nested or {}
    properties = {item.name: nested[item.name] if item.name in nested else json_schema(constraints[item.name])
                  for item in fields(owner)}
    for key, reason in BOUND_REASONS.items():
        if key in properties:
            properties[key]["description"] = reason
    return {"type": "object", "additionalProperties": False, "properties": properties}


def recipe_schema() -> dict:
    """The config schema's ``$defs.recipe``: :data:`RECIPE_CONSTRAINTS` as JSON schema. A key
    left out takes the :class:`Recipe` default when the run is built (no default is filled into
    the config: the recipe's entries are the train rule's params)."""
    return _mapping_schema(RECIPE_CONSTRAINTS, Recipe,
                           {"optimizer": _mapping_schema(OPTIMIZER_CONSTRAINTS, OptimizerConfig)})


def execution_schema() -> dict:
    """The config schema's ``device`` and ``compile``: their options and :class:`RunConfig`'s defaults."""
    defaults = {item.name: item.default for item in fields(RunConfig) if item.default is not MISSING}
    return {key: {**json_schema(value), "default": defaults[key]} for key, value in EXECUTION_CONSTRAINTS.items()}


@dataclass
class RunConfig:
    dataset: dict[str, Any]
    model: dict[str, Any]
    loss: dict[str, Any]
    recipe: Recipe = field(default_factory=Recipe)
    seed: int = 0
    device: str = "auto"
    compile: str = "auto"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["recipe"]["optimizer"]["betas"] = list(out["recipe"]["optimizer"]["betas"])
        return out

    def fingerprint(self) -> str:
        """Hash of the settings that determine the run's numbers (not the device)."""
        settings = self.to_dict()
        for key in ("device", "compile"):
            settings.pop(key)
        for key, default in LATER_RECIPE_DEFAULTS.items():
            if settings["recipe"][key] == default:
                settings["recipe"].pop(key)
        for key, default in LATER_OPTIMIZER_DEFAULTS.items():
            if settings["recipe"]["optimizer"][key] == default:
                settings["recipe"]["optimizer"].pop(key)
        return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> RunConfig:
        raw = copy.deepcopy(dict(raw))
        _reject_unknown(raw, cls, "run config")
        for key in ("dataset", "model", "loss"):
            if key not in raw:
                raise ValueError(f"run config is missing {key!r}")
            if not isinstance(raw[key], dict) or "name" not in raw[key]:
                raise ValueError(f"run config {key!r} must be a mapping with a 'name', got {raw[key]!r}")
        if isinstance(raw.get("compile"), bool):  # a yes/no: torch.compile the model, or not
            raw["compile"] = "default" if raw["compile"] else "none"
        recipe = dict(raw.pop("recipe", {}) or {})
        _reject_unknown(recipe, Recipe, "recipe")
        optimizer = dict(recipe.pop("optimizer", {}) or {})
        _reject_unknown(optimizer, OptimizerConfig, "recipe.optimizer")
        if isinstance(optimizer.get("betas"), list):
            optimizer["betas"] = tuple(optimizer["betas"])
        config = cls(recipe=Recipe(optimizer=OptimizerConfig(**optimizer), **recipe), **raw)
        config.validate()
        return config

    def validate(self) -> None:
        """Each key against its declared constraints, then the checks between keys."""
        recipe = self.recipe
        _check("", EXECUTION_CONSTRAINTS, {"device": self.device, "compile": self.compile})
        _check("recipe.", RECIPE_CONSTRAINTS, {item.name: getattr(recipe, item.name) for item in fields(Recipe)})
        _check("recipe.optimizer.", OPTIMIZER_CONSTRAINTS,
               {item.name: getattr(recipe.optimizer, item.name) for item in fields(OptimizerConfig)})
        if recipe.lr_milestones and recipe.lr_step_every:
            raise ValueError("set either recipe.lr_milestones or recipe.lr_step_every, not both")
        if recipe.early_stopping_patience is not None and recipe.select != "final":
            raise ValueError(f"recipe.select = {recipe.select!r} conflicts with early stopping, which reports the epoch of "
                             "the best validation loss; set one of them")
        if recipe.lr_schedule == "inverse_sqrt":
            if recipe.warmup_steps is None:
                raise ValueError("recipe.lr_schedule = 'inverse_sqrt' needs recipe.warmup_steps, an integer >= 1, "
                                 "got None")
            if recipe.lr_milestones or recipe.lr_step_every:
                raise ValueError("recipe.lr_schedule = 'inverse_sqrt' sets the rate of every batch; leave "
                                 "recipe.lr_milestones and recipe.lr_step_every unset")
        elif recipe.warmup_steps is not None:
            raise ValueError(f"recipe.warmup_steps is for recipe.lr_schedule = 'inverse_sqrt', not "
                             f"{recipe.lr_schedule!r}")
        _check_average_checkpoints(recipe)
        for key in ("reliability_epochs", "gradient_norm_epochs"):
            bad = [e for e in getattr(recipe, key) if not 1 <= e <= recipe.epochs]
            if bad:
                raise ValueError(f"recipe.{key} {bad} outside 1..{recipe.epochs}")


def _check(prefix: str, constraints: dict, values: dict) -> None:
    """:func:`validate_parameters` with each key named by its path in the run config (``recipe.epochs``)."""
    validate_parameters({prefix + key: value for key, value in constraints.items()},
                        {prefix + key: value for key, value in values.items()}, "run config")


def _check_average_checkpoints(recipe: Recipe) -> None:
    """What averaging asks of the rest of the recipe (its own keys are :data:`RECIPE_CONSTRAINTS`')."""
    average = recipe.average_checkpoints
    if average is None:
        return
    if recipe.early_stopping_patience is not None or recipe.select != "final":
        raise ValueError("recipe.average_checkpoints averages the last steps' weights, but early stopping or "
                         f"recipe.select = {recipe.select!r} reports one epoch's; set one of them")
    count, every = average["count"], average["every_steps"]
    if recipe.max_steps is not None and -(-recipe.max_steps // every) < count:
        raise ValueError(f"recipe.average_checkpoints: recipe.max_steps = {recipe.max_steps} leaves "
                         f"{-(-recipe.max_steps // every)} snapshots every {every} steps, fewer than count = {count}")


def _reject_unknown(raw: dict, cls, where: str) -> None:
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"unknown key(s) {unknown} in {where}; allowed: {sorted(known)}")
