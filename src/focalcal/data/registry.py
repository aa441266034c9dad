"""Datasets by name: ``load("cifar10", root="data", split_seed=0)`` -> :class:`SplitDataset`.

Every dataset returns unsplit pools; this module alone decides the split, so all datasets
split the same way: deterministic from ``split_seed`` (independent of the training seed),
stratified by class, val (and test, where there is no official test set) carved first,
the rest is train — unless the data set's authors split it by one fixed shuffle, which is
then kept (``fixed_shuffle_seed``: 20 Newsgroups). A dataset with official val and test
sets (SST's dev/test; declared with ``val_size=None``) keeps them as they are.
``subset_fraction`` then keeps that fraction of every class of the *train* split only
("CIFAR10-s" of charoenphakdee2021 §6.2); the name ``<dataset>-s`` means
``subset_fraction=0.1``. Inputs that depend on the split (a text vocabulary fitted to the
training split) are made last, once the split is decided, by the loader's
``RawData.finalise`` hook (see :class:`~focalcal.data.RawData`).

Options: every dataset takes ``val_size`` (unless it has an official val set) and
``test_size`` (unless it has an official test set), as a count or a fraction of the pool, plus the options its loader declares
(e.g. ``n_samples``); anything else is a ValueError naming the accepted options.

k-fold cross-validation (hossain2021 §4.4): ``n_folds=k, fold=i`` makes the test split
fold i of a seeded k-way partition of the pool (the same partition for every i, so the k
test folds cover each sample once), carves ``val_size`` samples from the other folds (for
early stopping) and trains on the rest. Only datasets split from one pool (no official
test set) take folds: an official test set is the test set.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from focalcal import catalog

from ._dataset import ParallelDataset, RawData, Split, SplitDataset
from .splits import fold_indices, per_class_subset, resolve_size, split_hash, split_indices

TASKS = catalog.TASKS
SUBSET_SUFFIX = catalog.SUBSET_SUFFIX
SUBSET_ALIAS_FRACTION = 0.1


@dataclass(frozen=True)
class DatasetSpec:
    """A declared dataset (:mod:`focalcal.catalog`), its loader and constants imported: its
    split defaults and training conventions."""

    name: str
    loader: Callable[..., RawData]
    task: str
    num_classes: int
    val_size: int | float | None  # None: the dataset has an official val set (and test set)
    test_size: int | float | None  # None: the dataset has an official test set
    augmentation: dict
    mean: tuple[float, ...] | None
    std: tuple[float, ...] | None
    needs_download: bool
    summary: str
    # A data set whose authors split it by one fixed shuffle: numpy's legacy
    # RandomState(seed).shuffle of the pool, test the last test_size, val the val_size before
    # them, train the rest — whatever split_seed (20 Newsgroups: seed 1, ng_loader.py of
    # mukhoti2020's released code). None: stratified by split_seed.
    fixed_shuffle_seed: int | None = None

    def loader_options(self) -> dict:
        """The loader's keyword-only options and their defaults."""
        parameters = inspect.signature(self.loader).parameters.values()
        return {p.name: p.default for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY}

    def options(self) -> dict:
        """Every option load() accepts for this dataset, with its default."""
        split = {name: size for name, size in (("val_size", self.val_size), ("test_size", self.test_size))
                 if size is not None}
        return {**split, **self.loader_options()}

    @property
    def official_val(self) -> bool:
        """Whether the dataset has official val and test sets (load carves nothing)."""
        return self.val_size is None


def register(name: str, loader: Callable[..., RawData], *, task: str = "classification", num_classes: int,
             val_size, test_size=None, augmentation: dict, mean=None, std=None, needs_download: bool = False,
             summary: str = "", fixed_shuffle_seed: int | None = None) -> None:
    """Declare a dataset (the run-time form of a :mod:`focalcal.catalog` entry);
    ``loader(root, download, **options) -> RawData``.

    ``val_size=None`` (with ``test_size=None``): the loader returns official "train", "val"
    and "test" pools, used as they are.
    """
    if not isinstance(name, str) or not name or name.endswith(SUBSET_SUFFIX):
        raise ValueError(f"dataset name must be a non-empty string not ending in {SUBSET_SUFFIX!r}, got {name!r}")
    catalog.declare(name, catalog.Dataset(
        task=task, needs_download=needs_download, loader=loader, num_classes=num_classes, val_size=val_size,
        test_size=test_size, augmentation=dict(augmentation), mean=mean, std=std, summary=summary,
        fixed_shuffle_seed=fixed_shuffle_seed))


def available(task: str | None = None) -> list[str]:
    """Sorted dataset names, with the ``-s`` (10 % per class of train) alias of each classification set."""
    if task is not None and task not in TASKS:
        raise ValueError(f"task must be one of {TASKS} or None, got {task!r}")
    return sorted(name for name, entry in catalog.DATASETS.items() if task is None or entry.task == task)


def spec(name: str) -> DatasetSpec:
    """The catalog entry of ``name`` (an ``-s`` alias gives its base entry)."""
    entry = catalog.DATASETS.get(name) if isinstance(name, str) else None
    if entry is None:
        raise ValueError(f"unknown dataset {name!r}; known datasets: {', '.join(available())}")
    base = entry.subset_of or name
    entry = catalog.DATASETS[base]
    mean, std = catalog.resolve_value(entry.mean), catalog.resolve_value(entry.std)
    return DatasetSpec(base, catalog.resolve(entry.loader), entry.task, catalog.resolve_value(entry.num_classes),
                       catalog.resolve_value(entry.val_size), catalog.resolve_value(entry.test_size),
                       dict(catalog.resolve_value(entry.augmentation)), None if mean is None else tuple(mean),
                       None if std is None else tuple(std), entry.needs_download, entry.summary,
                       catalog.resolve_value(entry.fixed_shuffle_seed))


def translation_options(entry: DatasetSpec) -> dict:
    """A translation loader's options and defaults: its parameters but ``root`` and ``download``."""
    parameters = inspect.signature(entry.loader).parameters.values()
    return {p.name: p.default for p in parameters if p.name not in ("root", "download")
            and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}


def _load_translation(entry: DatasetSpec, root, download: bool, options: dict) -> ParallelDataset:
    """A translation corpus (its official train/val/test splits), loaded by its catalog loader."""
    missing = sorted(key for key, value in options.items() if value is inspect.Parameter.empty)
    if missing:
        raise ValueError(f"dataset {entry.name!r} needs option(s) {missing}")
    accepted = inspect.signature(entry.loader).parameters
    where = {key: value for key, value in (("root", str(root)), ("download", bool(download))) if key in accepted}
    corpus = entry.loader(**where, **options)
    meta = {"dataset": entry.name, "task": entry.task, "options": dict(options)}
    return ParallelDataset(name=entry.name, corpus=corpus, meta=meta)


def _check_fraction(subset_fraction) -> float | None:
    if subset_fraction is None:
        return None
    if isinstance(subset_fraction, bool) or not isinstance(subset_fraction, (int, float)) or not 0 < subset_fraction <= 1:
        raise ValueError(f"subset_fraction must be None or a number in (0, 1], got {subset_fraction!r}")
    return float(subset_fraction)


def _check_folds(n_folds, fold, entry: DatasetSpec, options: dict) -> dict | None:
    """``{"n_folds": k, "fold": i}`` or None; both or neither must be given."""
    if n_folds is None and fold is None:
        return None
    for value, name in ((n_folds, "n_folds"), (fold, "fold")):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(  # noqa: TRY004  dataset arguments fail as ValueError (see _checked_arguments)
                f"n_folds and fold must be given together as integers, got {name}={value!r}")
    if n_folds < 2 or not 0 <= fold < n_folds:
        raise ValueError(f"need n_folds >= 2 and 0 <= fold < n_folds, got n_folds={n_folds}, fold={fold}")
    if entry.test_size is None:
        raise ValueError(f"dataset {entry.name!r} has an official test set, so it takes no folds")
    if "test_size" in options:
        raise ValueError(f"test_size={options['test_size']!r} conflicts with n_folds: the test split is fold {fold}")
    return {"n_folds": int(n_folds), "fold": int(fold)}


def check_arguments(name: str, root: str | Path = "data", split_seed: int = 0, subset_fraction: float | None = None,
                    download: bool = False, n_folds: int | None = None, fold: int | None = None, **options) -> None:
    """Run the checks ``load`` runs on its arguments (the same signature) before it reads anything.

    The workflow checks its config's dataset entries this way when the Snakefile is parsed;
    the values of the loaders' own options are checked by the loaders, i.e. only when they load.
    """
    _checked_arguments(name, split_seed, subset_fraction, n_folds, fold, options)


def _checked_arguments(name, split_seed, subset_fraction, n_folds, fold, options: dict):
    """(registry entry, subset fraction, folds, every option with its default), or ValueError."""
    entry = spec(name)
    is_alias = name != entry.name
    fraction = _check_fraction(subset_fraction)
    if is_alias:
        if fraction is not None:
            raise ValueError(f"{name!r} already means subset_fraction={SUBSET_ALIAS_FRACTION}; pass subset_fraction with {entry.name!r} instead")
        fraction = SUBSET_ALIAS_FRACTION
    if isinstance(split_seed, bool) or not isinstance(split_seed, (int, np.integer)) or split_seed < 0:
        raise ValueError(f"split_seed must be a non-negative int, got {split_seed!r}")
    if entry.task == "translation":  # a corpus of official splits: no split options
        if split_seed or fraction is not None or n_folds is not None or fold is not None:
            raise ValueError(f"dataset {entry.name!r} is a translation corpus with official splits; it takes no "
                             "split_seed, subset_fraction or folds")
        accepted = translation_options(entry)
        open_ended = any(p.kind is inspect.Parameter.VAR_KEYWORD
                         for p in inspect.signature(entry.loader).parameters.values())  # **sizes: the loader checks
        unknown = sorted(set(options) - set(accepted))
        if unknown and not open_ended:
            raise ValueError(f"unknown option(s) {unknown} for dataset {entry.name!r}; accepted: {sorted(accepted)}")
        return entry, None, None, {**accepted, **options}
    folds = _check_folds(n_folds, fold, entry, options)
    accepted = entry.options()
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for dataset {entry.name!r}; accepted: {sorted(accepted)}")
    resolved = {**accepted, **options}
    if folds is not None:
        del resolved["test_size"]  # the test split is a fold
    return entry, fraction, folds, resolved


def _to_tensor(x: np.ndarray) -> torch.Tensor:
    """uint8 images to float32 in [0, 1]; other integer inputs (token ids, tree node tables) to
    int64 unchanged; everything else to float32 unchanged."""
    if x.dtype == np.uint8:
        return torch.from_numpy(np.ascontiguousarray(x)).to(torch.float32).div_(255.0)
    if np.issubdtype(x.dtype, np.integer):
        return torch.from_numpy(np.ascontiguousarray(x, dtype=np.int64))
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))


def _check_pools(raw: RawData, entry: DatasetSpec) -> None:
    """The pools the registration promises: official val/test, official test, or one pool."""
    expected = (("train", "val", "test") if entry.official_val else ("train", "test") if entry.test_size is None
                else ("all",))
    if sorted(raw.pools) != sorted(expected):
        raise ValueError(f"the loader of dataset {entry.name!r} returned pools {sorted(raw.pools)}; its registration "
                         f"expects {list(expected)}")


def _finalised(raw: RawData, pool: str, train_indices: np.ndarray, name: str) -> RawData:
    """``raw.finalise(pool, train_indices)``, checked to keep the pools, their samples and labels."""
    done = raw.finalise(pool, train_indices)
    if not isinstance(done, RawData) or sorted(done.pools) != sorted(raw.pools):
        raise ValueError(f"dataset {name!r}: finalise must return a RawData with the pools {sorted(raw.pools)}")
    for key, (_, y) in raw.pools.items():
        x_done, y_done = done.pools[key]
        if len(x_done) != len(y) or not np.array_equal(np.asarray(y_done), np.asarray(y)):
            raise ValueError(f"dataset {name!r}: finalise changed the samples or labels of pool {key!r}")
    return done


def fixed_shuffle_split(n: int, sizes: dict[str, int], seed: int) -> dict[str, np.ndarray]:
    """A pool of ``n`` shuffled once by ``RandomState(seed)``; "test" is the last ``sizes["test"]``
    positions, "val" the ``sizes["val"]`` before them, "train" the rest (each sorted)."""
    order = np.arange(n)
    np.random.RandomState(seed).shuffle(order)
    test, val = sizes.get("test", 0), sizes["val"]
    if val + test >= n:
        raise ValueError(f"split sizes {sizes} leave no training samples from a pool of {n}")
    parts = {"train": order[:n - val - test], "val": order[n - val - test:n - test], "test": order[n - test:]}
    return {name: np.sort(part).astype(np.int64) for name, part in parts.items()}


def load(name: str, root: str | Path = "data", split_seed: int = 0, subset_fraction: float | None = None,
         download: bool = False, n_folds: int | None = None, fold: int | None = None,
         **options) -> SplitDataset | ParallelDataset:
    """Load dataset ``name`` from ``root`` and split it deterministically by ``split_seed``; a
    translation corpus (catalog task "translation") is a :class:`ParallelDataset` of its official splits.

    ``download=False`` never touches the network: missing files raise
    :class:`~focalcal.data.download.DatasetNotFoundError` saying which URL (and checksum) to
    save where. ``n_folds``/``fold`` select a cross-validation fold as test split. See the module
    docstring for splits, folds, subsets and options.
    """
    entry, fraction, folds, resolved = _checked_arguments(name, split_seed, subset_fraction, n_folds, fold, options)
    if entry.task == "translation":
        return _load_translation(entry, root, download, resolved)
    loader_kwargs = {key: resolved[key] for key in entry.loader_options()}

    raw = entry.loader(Path(root), download=bool(download), **loader_kwargs)
    _check_pools(raw, entry)
    rng = np.random.default_rng(int(split_seed))
    if entry.official_val:
        pool_of = {"train": "train", "val": "val", "test": "test"}
        labels = raw.pools["train"][1]
    elif entry.test_size is None:
        pool_of = {"train": "train", "val": "train", "test": "test"}
        labels = raw.pools["train"][1]
        carve = {"val": resolve_size(resolved["val_size"], len(labels), "val_size")}
    else:
        pool_of = {"train": "all", "val": "all", "test": "all"}
        labels = raw.pools["all"][1]
        carve = {"val": resolve_size(resolved["val_size"], len(labels), "val_size")}
        if folds is None:
            carve["test"] = resolve_size(resolved["test_size"], len(labels), "test_size")
    stratify = labels.ndim == 1
    if entry.official_val:
        indices = {split: np.arange(len(raw.pools[split][1]), dtype=np.int64) for split in pool_of}
    elif folds is None and entry.fixed_shuffle_seed is not None:
        indices = fixed_shuffle_split(len(labels), carve, entry.fixed_shuffle_seed)
    elif folds is None:
        indices = split_indices(labels, len(labels), carve, rng, stratify=stratify)
    else:
        indices = fold_indices(labels, len(labels), folds["n_folds"], folds["fold"], carve["val"], rng, stratify=stratify)
    if entry.test_size is None and not entry.official_val:
        indices["test"] = np.arange(len(raw.pools["test"][1]), dtype=np.int64)
    if fraction is not None and fraction < 1:
        indices["train"] = indices["train"][per_class_subset(labels[indices["train"]], fraction, rng)]
    if raw.finalise is not None:
        raw = _finalised(raw, pool_of["train"], indices["train"], entry.name)

    splits = {}
    for split, pool in pool_of.items():
        x, y = raw.pools[pool]
        splits[split] = Split(_to_tensor(x[indices[split]]), torch.from_numpy(np.ascontiguousarray(y[indices[split]], dtype=np.int64)))
    meta = {
        "dataset": entry.name,
        "task": entry.task,
        "split_seed": int(split_seed),
        "folds": folds,
        "subset_fraction": fraction,
        "options": resolved,
        "pools": pool_of,
        "augmentation": dict(entry.augmentation),
        "mean": entry.mean,
        "std": entry.std,
        "class_names": raw.class_names,
        **raw.info,
    }
    for key, per_pool in raw.per_sample.items():
        meta[key] = {split: per_pool[pool][indices[split]] for split, pool in pool_of.items()}
    if fraction is None:
        display_name = entry.name
    elif fraction == SUBSET_ALIAS_FRACTION:
        display_name = entry.name + SUBSET_SUFFIX
    else:
        display_name = f"{entry.name}{SUBSET_SUFFIX}{fraction:g}"
    return SplitDataset(
        name=display_name,
        train=splits["train"],
        val=splits["val"],
        test=splits["test"],
        num_classes=entry.num_classes if raw.num_classes is None else raw.num_classes,
        input_shape=tuple(splits["train"].x.shape[1:]),
        split_indices=indices,
        split_hash=split_hash(indices, pool_of),
        meta=meta,
    )
