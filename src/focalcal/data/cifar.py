"""CIFAR-10 / CIFAR-100 from the python-pickle release (the layout torchvision downloads).

Read directly rather than through torchvision: the format is four lines of numpy, and our
own md5 table (sources.py) lets the tests build small archives in the same format. Every
member's md5 is checked before it is unpickled, so only the published files are ever
unpickled.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from . import sources
from ._dataset import RawData
from .download import ensure_archive_folder

# Per-channel normalisation in [0, 1]. CIFAR-10: the constants mukhoti2020's released code
# uses (its std is not the pixel std, 0.247/0.243/0.261, but it is what the paper trained
# with). CIFAR-100: mean and std of its 50,000 training images.
CIFAR10_MEAN, CIFAR10_STD = (0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)
CIFAR100_MEAN, CIFAR100_STD = (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)


def _unpickle(path: Path) -> dict:
    """A CIFAR pickle (written by Python 2) as a dict with str keys."""
    with open(path, "rb") as handle:
        content = pickle.load(handle, encoding="latin1")
    return {key.decode() if isinstance(key, bytes) else key: value for key, value in content.items()}


def _read_batches(folder: Path, names: list[str], label_key: str) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate pickled batches into uint8 (N, 3, 32, 32) images and int64 labels."""
    images, labels = [], []
    for name in names:
        batch = _unpickle(folder / name)
        images.append(np.asarray(batch["data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
        labels.append(np.asarray(batch[label_key], dtype=np.int64))
    return np.concatenate(images), np.concatenate(labels)


def _names(values) -> list[str]:
    return [v.decode() if isinstance(v, bytes) else str(v) for v in values]


def load_cifar10(root, download: bool) -> RawData:
    source = sources.CIFAR10
    folder = ensure_archive_folder(source, Path(root), download=download, dataset="cifar10")
    train = _read_batches(folder, [f"data_batch_{i}" for i in range(1, 6)], "labels")
    test = _read_batches(folder, ["test_batch"], "labels")
    class_names = _names(_unpickle(folder / "batches.meta")["label_names"])
    return RawData(pools={"train": train, "test": test}, class_names=class_names, info={"folder": str(folder)})


def load_cifar100(root, download: bool) -> RawData:
    source = sources.CIFAR100
    folder = ensure_archive_folder(source, Path(root), download=download, dataset="cifar100")
    train = _read_batches(folder, ["train"], "fine_labels")
    test = _read_batches(folder, ["test"], "fine_labels")
    class_names = _names(_unpickle(folder / "meta")["fine_label_names"])
    return RawData(pools={"train": train, "test": test}, class_names=class_names, info={"folder": str(folder)})
