"""The one return type of :func:`focalcal.data.load` and what loaders hand to it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import torch


class Split(NamedTuple):
    """Inputs and targets of one split: ``x`` float32 (N, *input_shape) — int64 for token-id
    inputs (text) — and ``y`` int64 (N, *target_shape)."""

    x: torch.Tensor
    y: torch.Tensor


@dataclass(frozen=True)
class SplitDataset:
    """A dataset split into train/val/test, as whole tensors (they fit in memory; the trainer
    moves them to the device once).

    ``split_indices[s]`` indexes pool ``meta["pools"][s]`` ("all", or the official "train" /
    "test"); ``split_hash`` fingerprints them so a run can store its split and verify it on
    resume. Images are float32 in [0, 1], not normalised: augment first (padding is black),
    then normalise with ``meta["mean"]`` / ``meta["std"]`` (None: use as is).
    ``meta["augmentation"]`` is what the papers train with (see
    :func:`focalcal.data.augment.apply_augmentation`).
    """

    name: str
    train: Split
    val: Split
    test: Split
    num_classes: int
    input_shape: tuple[int, ...]
    split_indices: dict[str, np.ndarray]
    split_hash: str
    meta: dict = field(default_factory=dict)

    def sizes(self) -> dict[str, int]:
        """Number of samples per split."""
        return {"train": len(self.train.y), "val": len(self.val.y), "test": len(self.test.y)}

    def record(self) -> dict:
        """A JSON-serialisable summary that determines the split (for a run's metadata file)."""
        keys = ("dataset", "task", "split_seed", "folds", "subset_fraction", "options", "pools", "augmentation", "mean", "std")
        return {
            "name": self.name,
            "split_hash": self.split_hash,
            "sizes": self.sizes(),
            "num_classes": self.num_classes,
            "input_shape": list(self.input_shape),
            **{key: self.meta[key] for key in keys if key in self.meta},
        }


def verify_split(dataset: SplitDataset, expected_hash: str) -> None:
    """Raise ValueError when ``dataset``'s split differs from the one a run stored."""
    if dataset.split_hash != expected_hash:
        raise ValueError(
            f"split of dataset {dataset.name!r} has hash {dataset.split_hash}, but the run stored "
            f"{expected_hash}: the data, split_seed, sizes or subset differ from the run's"
        )


@dataclass
class RawData:
    """What a dataset loader returns: unsplit pools of samples.

    ``pools`` maps "all" (split three ways by load), or "train" and "test" (official test set;
    load carves val from train), or "train", "val" and "test" (official val and test sets,
    for datasets registered with ``val_size=None``) to ``(x, y)`` numpy arrays. ``x`` uint8
    images are scaled to [0, 1]; other integer inputs (token ids) become int64; float
    inputs are kept. ``per_sample`` holds further arrays aligned with a pool (e.g. the true
    posterior), split alongside and returned in ``meta``. ``num_classes`` overrides the
    registered count when a loader option decides it (e.g. the classes of a segmentation
    folder).

    ``finalise``: for inputs that must be fitted to the training split alone, which only
    load knows (a text vocabulary must not see the test documents). When set, load decides
    the split from the labels first, then calls ``finalise(pool, train_indices)`` — the pool
    the training split is drawn from and its indices in it — and splits the RawData it
    returns instead: same pools, same samples in the same order, same labels, inputs now
    final (until then ``x`` may be anything indexable, e.g. an object array of token lists).
    """

    pools: dict[str, tuple[np.ndarray, np.ndarray]]
    class_names: list[str] | None = None
    per_sample: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    info: dict = field(default_factory=dict)
    num_classes: int | None = None
    finalise: Callable[[str, np.ndarray], RawData] | None = None
