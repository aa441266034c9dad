"""What a run is built from, by its config: data set, model, loss, optimisers and LR schedule.

The :class:`~focalcal.training.trainer.Trainer` (and the translation trainer) call these
``build_*`` functions once at the start of a run; each reads one section of the
:class:`~focalcal.training.config.RunConfig` and, where the data set decides an option
(``meta``), the loaded data set.
"""

from __future__ import annotations

from pathlib import Path

import torch

from focalcal import catalog
from focalcal import data as data_lib
from focalcal import losses as loss_lib
from focalcal import models as model_lib
from focalcal.training.config import RunConfig

#: Model options a data set decides (its meta key): a text model's vocabulary size and the
#: classes of its training nodes come from the data, like ``num_classes``.
DATASET_MODEL_OPTIONS = {"vocab_size": "vocab_size", "node_classes": "train_node_classes"}


def build_loss(config: RunConfig, dataset):
    """The run's loss; it skips the targets the data set marks as unlabelled (``meta["ignore_index"]``)
    unless the config sets ``ignore_index`` itself. An FLSD loss takes ``recipe.flsd_threshold``
    as its first threshold when the recipe sets one."""
    options = dict(config.loss)
    if dataset.meta.get("ignore_index") is not None and "ignore_index" not in options:
        options["ignore_index"] = int(dataset.meta["ignore_index"])
    threshold = config.recipe.flsd_threshold
    base, fixed = loss_lib.PRESETS.get(options["name"], (options["name"], {}))
    if threshold is not None and base == FLSD:
        options = {**fixed, **options, "name": FLSD}
        thresholds = tuple(options.get("thresholds", loss_lib.parameters(FLSD)["thresholds"]))
        options["thresholds"] = (float(threshold), *thresholds[1:])
    return loss_lib.build(options)


FLSD = "focal_sample_dependent"  # the loss recipe.flsd_threshold applies to (and its presets)


def build_model(config: RunConfig, dataset) -> torch.nn.Module:
    """The run's model: the config's options, plus those the data set decides (an option the
    config sets is not overridden), with the data set's pretrained word vectors loaded, if any."""
    options = _options(config.model)
    accepted = model_lib.spec(config.model["name"]).options()
    for option, key in DATASET_MODEL_OPTIONS.items():
        if option in accepted and option not in options and dataset.meta.get(key) is not None:
            options[option] = int(dataset.meta[key])
    model = model_lib.build(config.model["name"], num_classes=dataset.num_classes, **options)
    embeddings = dataset.meta.get("pretrained_embeddings")
    if embeddings is not None and hasattr(model, "load_pretrained_embeddings"):
        model.load_pretrained_embeddings(torch.as_tensor(embeddings, dtype=torch.float32))
    return model


def load_dataset(config: RunConfig, data_root: Path):
    options = _options(config.dataset)
    options.setdefault("root", str(data_root))
    return data_lib.load(config.dataset["name"], **options)


def resolve_augmentation(name: str, meta: dict) -> dict:
    """The recipe's augmentation: "dataset" means what the papers use for this dataset, another
    name a preset of :data:`focalcal.catalog.AUGMENTATION_PRESETS`."""
    if name == "dataset":
        return dict(meta.get("augmentation") or {})
    return dict(catalog.resolve_value(catalog.AUGMENTATION_PRESETS[name]))


def build_optimizer(model: torch.nn.Module, config: RunConfig, **implementation) -> torch.optim.Optimizer:
    """The recipe's optimiser over the model's parameters (its word vectors excepted when
    ``recipe.embedding_lr`` steps them: :func:`build_embedding_optimizer`); ``implementation``
    picks torch's kernels (``fused``, ``foreach``, ``capturable``:
    :func:`focalcal.training.step.optimizer_options`), not the update."""
    opt = config.recipe.optimizer
    vectors = _word_vectors(model, config)
    parameters = [p for p in model.parameters() if p is not vectors]
    if opt.name == "sgd":
        return torch.optim.SGD(parameters, lr=opt.lr, momentum=opt.momentum, weight_decay=opt.weight_decay,
                               nesterov=opt.nesterov, **implementation)
    if opt.name == "adagrad":  # mukhoti2020 App. D's SST recipe (Tai et al. 2015's optimiser)
        return torch.optim.Adagrad(parameters, lr=opt.lr, weight_decay=opt.weight_decay, **implementation)
    return torch.optim.Adam(parameters, lr=opt.lr, betas=tuple(opt.betas), eps=opt.eps, weight_decay=opt.weight_decay,
                            **implementation)


def build_embedding_optimizer(model: torch.nn.Module, config: RunConfig, **implementation) -> torch.optim.Optimizer | None:
    """Plain SGD (no momentum, no weight decay) on the word vectors at ``recipe.embedding_lr``, or
    None; ``implementation`` as for :func:`build_optimizer`."""
    vectors = _word_vectors(model, config)
    return None if vectors is None else torch.optim.SGD([vectors], lr=config.recipe.embedding_lr, momentum=0.0,
                                                        weight_decay=0.0, **implementation)


def _word_vectors(model: torch.nn.Module, config: RunConfig) -> torch.nn.Parameter | None:
    """The embedding weight ``recipe.embedding_lr`` steps, or None when it is not set."""
    if config.recipe.embedding_lr is None:
        return None
    embedding = getattr(model, "embedding", None)
    if not isinstance(embedding, torch.nn.Embedding):
        raise ValueError(  # noqa: TRY004  a recipe that does not fit the model, not a wrong argument type
            f"recipe.embedding_lr steps a model's word vectors, but model {config.model['name']!r} has none")
    if not embedding.weight.requires_grad:
        raise ValueError(f"recipe.embedding_lr steps the word vectors, but model {config.model['name']!r} freezes them "
                         "(freeze_embeddings: true); set one of the two")
    return embedding.weight


class InverseSqrt:
    """Vaswani et al. 2017 eq. 3 without its d_model^-0.5 (that is ``recipe.optimizer.lr``):
    min(step^-0.5, step · warmup^-1.5), a linear warm-up to step ``warmup``, then 1/sqrt(step).
    Called by LambdaLR with the batches done so far, so the first batch trains at step 1."""

    def __init__(self, warmup: int) -> None:
        self.warmup = int(warmup)

    def __call__(self, batches_done: int) -> float:
        step = batches_done + 1
        return min(step**-0.5, step * self.warmup**-1.5)


def build_scheduler(optimizer: torch.optim.Optimizer, config: RunConfig):
    recipe = config.recipe
    if recipe.lr_schedule == "inverse_sqrt":
        return torch.optim.lr_scheduler.LambdaLR(optimizer, InverseSqrt(recipe.warmup_steps))
    if recipe.lr_step_every:
        return torch.optim.lr_scheduler.StepLR(optimizer, step_size=recipe.lr_step_every, gamma=recipe.lr_decay)
    return torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=list(recipe.lr_milestones), gamma=recipe.lr_decay)


def _options(section: dict) -> dict:
    return {k: v for k, v in section.items() if k != "name"}
