"""Datasets behind one entry point: ``focalcal.data.load(name, root="data", split_seed=0)``.

Returns a :class:`SplitDataset` of whole-dataset tensors (train/val/test, x float32 or int64
token ids for the text sets, y int64), a seeded stratified split and its sha256
fingerprint, plus the dataset's augmentation and normalisation conventions in ``meta``. ``available()`` lists the names;
``<name>-s`` keeps 10 % of each class of the training split (charoenphakdee2021's
CIFAR10-s). Nothing is downloaded unless ``download=True``; a missing dataset raises
:class:`DatasetNotFoundError` saying which URL to save where.
"""

from ._dataset import ParallelDataset, RawData, Split, SplitDataset, verify_split
from .augment import apply_augmentation, normalise, random_crop_flip
from .download import ChecksumError, DatasetNotFoundError
from .registry import DatasetSpec, available, load, register, spec
from .splits import split_hash
from .synthetic import posterior

__all__ = [
    "ChecksumError",
    "DatasetNotFoundError",
    "DatasetSpec",
    "ParallelDataset",
    "RawData",
    "Split",
    "SplitDataset",
    "apply_augmentation",
    "available",
    "load",
    "normalise",
    "posterior",
    "random_crop_flip",
    "register",
    "spec",
    "split_hash",
    "verify_split",
]
