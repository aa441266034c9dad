"""The one return type of :func:`focalcal.data.load` and what loaders hand to it."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
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


@dataclass(frozen=True)
class ParallelDataset:
    """What :func:`focalcal.data.load` returns for a translation corpus: the loader's
    ``ParallelCorpus`` (:mod:`focalcal.data.translation`) as it is, its official splits kept.

    ``num_classes`` is the shared vocabulary's size (a target token's classes); ``split_hash``
    fingerprints every split's token ids, so a run can tell its corpus from another on resume.
    It is computed on first use, since it reads every split: a job that needs the vocabulary and
    the test set only (a decode) loads nothing else.
    """

    name: str
    corpus: object
    meta: dict = field(default_factory=dict)

    @cached_property
    def split_hash(self) -> str:
        return corpus_hash(self.corpus)

    @property
    def num_classes(self) -> int:
        return len(self.corpus.pieces)

    def sizes(self) -> dict[str, int]:
        """Sentence pairs per split."""
        return {split: len(getattr(self.corpus, split).source) for split in ("train", "val", "test")}

    def target_tokens(self) -> dict[str, int]:
        """Target tokens per split, with the EOS each sentence is trained to end with."""
        return {split: int(sum(len(y) + 1 for y in getattr(self.corpus, split).target))
                for split in ("train", "val", "test")}

    def record(self) -> dict:
        """A JSON-serialisable summary of the corpus (for a run's metadata file and the data marker)."""
        return {"name": self.name, "split_hash": self.split_hash, "sizes": self.sizes(),
                "target_tokens": self.target_tokens(), "num_classes": self.num_classes,
                **{key: self.meta[key] for key in ("dataset", "task", "options") if key in self.meta}}


def corpus_hash(corpus) -> str:
    """sha256 of a parallel corpus's token ids, split by split and sentence by sentence, and its vocabulary."""
    digest = hashlib.sha256()
    digest.update("\n".join(corpus.pieces).encode())
    for split in ("train", "val", "test"):
        part = getattr(corpus, split)
        for side in (part.source, part.target):
            digest.update(f"{split}:{len(side)}".encode())
            for sentence in side:
                ids = np.ascontiguousarray(sentence, dtype=np.int64)
                digest.update(len(ids).to_bytes(8, "little"))
                digest.update(ids.tobytes())
    return digest.hexdigest()


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
