"""Seeded, stratified train/val/test index splits and their fingerprint.

A split is a dict ``{"train", "val", "test"} -> sorted int64 index array`` into a *pool*:
one pool ("all") for datasets without an official test set, or the official "train" and
"test" pools. :func:`split_hash` fingerprints the indices (and their pools) so a run can
store it and refuse to resume on a different split.
"""

from __future__ import annotations

import hashlib

import numpy as np

SPLIT_NAMES = ("train", "val", "test")


def resolve_size(size, pool_size: int, name: str) -> int:
    """A split size given as a count (int >= 1) or a fraction of the pool (float in (0, 1))."""
    if isinstance(size, bool) or not isinstance(size, (int, float, np.integer, np.floating)):
        raise ValueError(  # noqa: TRY004  a bad split size is a bad dataset option, a ValueError like the others
            f"{name} must be an int count or a float fraction in (0, 1), got {size!r}")
    if isinstance(size, (float, np.floating)):
        if not 0.0 < size < 1.0:
            raise ValueError(f"{name} as a fraction must lie in (0, 1), got {size}")
        count = int(np.floor(size * pool_size + 0.5))  # round half up
    else:
        count = int(size)
    if count < 1:
        raise ValueError(f"{name}={size!r} gives {count} samples from a pool of {pool_size}; need at least 1")
    return count


def _spread_order(labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random order of all samples in which every prefix holds each class in proportion.

    Each class is shuffled; its r-th sample (of c) gets the key (r + 0.5) / c, and samples are
    sorted by key, ties broken at random. The first m samples then hold round(m c / n) ± 1
    of every class; for balanced classes, exactly m / K each whenever K divides m.
    """
    by_class, rank, count = _shuffled_class_ranks(labels, rng)
    key = (rank + 0.5) / count
    tie_break = rng.random(labels.shape[0])
    return by_class[np.lexsort((tie_break, key))]


def _shuffled_class_ranks(labels: np.ndarray, rng: np.random.Generator):
    """(positions grouped by class, each shuffled within its class; the rank of each within its
    class; the size of its class) — the common start of stratified orders and subsets."""
    shuffled = rng.permutation(labels.shape[0])
    by_class = shuffled[np.argsort(labels[shuffled], kind="stable")]
    _, class_start, class_count = np.unique(labels[by_class], return_index=True, return_counts=True)
    class_of = np.repeat(np.arange(class_count.size), class_count)
    return by_class, np.arange(labels.shape[0]) - class_start[class_of], class_count[class_of]


def split_indices(labels: np.ndarray | None, n: int, sizes: dict[str, int], rng: np.random.Generator,
                  *, stratify: bool = True) -> dict[str, np.ndarray]:
    """Split ``range(n)`` into the named ``sizes`` (taken in order) plus "train" with the rest.

    Stratified by ``labels`` when ``stratify`` (labels must then be 1-D class indices);
    otherwise a plain random permutation. Each returned array is sorted.
    """
    taken = sum(sizes.values())
    if taken >= n:
        raise ValueError(f"split sizes {sizes} leave no training samples from a pool of {n}")
    order = _spread_order(np.asarray(labels), rng) if stratify else rng.permutation(n)
    out, start = {}, 0
    for name, size in sizes.items():
        out[name] = np.sort(order[start:start + size]).astype(np.int64)
        start += size
    out["train"] = np.sort(order[start:]).astype(np.int64)
    return out


def per_class_subset(labels: np.ndarray, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Positions of a random ``fraction`` of each class (rounded half up, at least one), sorted.

    This is the "-s" variant of charoenphakdee2021 §6.2 (CIFAR10-s: 10 % of each class).
    """
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"a per-class subset needs 1-D class labels, got targets of shape {labels.shape}")
    by_class, rank, count = _shuffled_class_ranks(labels, rng)
    keep = np.maximum(1, np.floor(fraction * count + 0.5).astype(np.int64))  # round half up, at least one
    return np.sort(by_class[rank < keep]).astype(np.int64)


def split_hash(indices: dict[str, np.ndarray], pools: dict[str, str]) -> str:
    """sha256 (hex) of each split's pool name, length and int64 little-endian indices, in order."""
    digest = hashlib.sha256()
    for name in SPLIT_NAMES:
        index = np.ascontiguousarray(indices[name], dtype="<i8")
        digest.update(f"{name}:{pools[name]}:{index.size};".encode())
        digest.update(index.tobytes())
    return digest.hexdigest()


def fold_indices(labels: np.ndarray | None, n: int, n_folds: int, fold: int, val_size: int, rng: np.random.Generator,
                 *, stratify: bool = True) -> dict[str, np.ndarray]:
    """k-fold cross-validation splits of ``range(n)``: test = fold ``fold``, val from the rest.

    ``rng`` first draws one seeded order of all samples (stratified like
    :func:`split_indices` when ``stratify``), cut into ``n_folds`` contiguous folds whose
    sizes differ by at most one; so for one seed the test folds of ``fold = 0 .. k-1`` are
    disjoint and cover every sample once. ``val_size`` samples of the other folds are then
    drawn (stratified) for early stopping, as hossain2021 §4.2 does; the rest is train.
    Each returned array is sorted.
    """
    if n_folds > n:
        raise ValueError(f"n_folds={n_folds} exceeds the {n} samples of the pool")
    order = _spread_order(np.asarray(labels), rng) if stratify else rng.permutation(n)
    bounds = np.arange(n_folds + 1) * n // n_folds
    test = order[bounds[fold]:bounds[fold + 1]]
    rest = np.sort(np.concatenate([order[:bounds[fold]], order[bounds[fold + 1]:]]))
    if val_size >= rest.size:
        raise ValueError(f"val_size={val_size} leaves no training samples from the {rest.size} samples outside test fold {fold}")
    inner = split_indices(None if labels is None else np.asarray(labels)[rest], rest.size, {"val": val_size}, rng,
                          stratify=stratify)
    return {"val": rest[inner["val"]], "test": np.sort(test).astype(np.int64), "train": rest[inner["train"]]}
