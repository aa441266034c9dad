"""Tiny-ImageNet-200 (cs231n): 200 classes of 64×64 images; 100k train, 10k labelled val.

The papers (mukhoti2020 App. D, komisarenko2024 §5) train on 90k of the training images,
keep 10k (50 per class) as validation and test on the official val set; load() does the
same (the val carve is stratified, so it is exactly 50 per class).

First load: download/verify/unpack ``tiny-imagenet-200.zip`` under ``root``, move
``val/images/*`` into per-class folders ``val/<wnid>/images/`` as listed in
``val/val_annotations.txt`` (the layout of ``train/``, so ImageFolder-style tools read
both), then decode every image once into ``tiny-imagenet-200/focalcal_uint8.npz``. Later
loads read only that cache. Classes are the sorted wnids.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..files.artefacts import atomic_savez, load_npz
from . import sources
from ._dataset import RawData
from .download import ensure_archive_folder

CACHE_NAME = "focalcal_uint8.npz"
IMAGE_SIZE = 64
IMAGE_SUFFIXES = {".jpeg", ".jpg", ".png"}

# ImageNet's channel mean and std, as mukhoti2020's released code normalises Tiny-ImageNet.
TINY_IMAGENET_MEAN, TINY_IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def reorganise_val(folder: Path) -> None:
    """Move ``val/images/<file>`` to ``val/<wnid>/images/<file>``; resumable, a no-op when done."""
    images = folder / "val" / "images"
    if not images.is_dir():
        return
    annotations = folder / "val" / "val_annotations.txt"
    if not annotations.is_file():
        raise FileNotFoundError(f"{annotations} is missing, so the val images in {images} cannot be labelled")
    for line in annotations.read_text().splitlines():
        if not line.strip():
            continue
        filename, wnid = line.split("\t")[:2]
        source, target = images / filename, folder / "val" / wnid / "images" / filename
        if source.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target)
        elif not target.exists():
            raise FileNotFoundError(f"{annotations} lists {filename}, found neither {source} nor {target}")
    leftover = sorted(p.name for p in images.iterdir())
    if leftover:
        raise ValueError(f"{images} holds images not listed in {annotations}: {leftover[:5]}")
    images.rmdir()


def _read_image(path: Path) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as image:
        pixels = np.asarray(image.convert("RGB"))
    if pixels.shape != (IMAGE_SIZE, IMAGE_SIZE, 3):
        raise ValueError(f"{path}: expected a {IMAGE_SIZE}x{IMAGE_SIZE} image, got shape {pixels.shape}")
    return pixels


def _read_split(folder: Path, split: str, wnids: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """uint8 (N, 3, 64, 64) images and labels of ``folder/split/<wnid>/images/*``."""
    paths, labels = [], []
    for label, wnid in enumerate(wnids):
        class_dir = folder / split / wnid / "images"
        if not class_dir.is_dir():
            raise FileNotFoundError(f"Tiny-ImageNet class folder {class_dir} is missing")
        files = sorted(p for p in class_dir.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        paths += files
        labels += [label] * len(files)
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:  # PIL decodes without the GIL
        images = np.stack(list(pool.map(_read_image, paths)))
    return np.ascontiguousarray(images.transpose(0, 3, 1, 2)), np.asarray(labels, dtype=np.int64)


def build_cache(folder: Path) -> Path:
    """Decode the train and (reorganised) val images into the uint8 cache; atomic."""
    wnids = sorted((folder / "wnids.txt").read_text().split())
    x_train, y_train = _read_split(folder, "train", wnids)
    x_test, y_test = _read_split(folder, "val", wnids)
    path = folder / CACHE_NAME
    atomic_savez(path, x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test, wnids=np.asarray(wnids))
    return path


def load_tiny_imagenet(root, download: bool) -> RawData:
    root = Path(root)
    cache = root / sources.TINY_IMAGENET.folder / CACHE_NAME
    if not cache.exists():
        folder = ensure_archive_folder(sources.TINY_IMAGENET, root, download=download, dataset="tiny_imagenet")
        reorganise_val(folder)
        build_cache(folder)
    cached = load_npz(cache)
    pools = {"train": (cached["x_train"], cached["y_train"]), "test": (cached["x_test"], cached["y_test"])}
    wnids = [str(w) for w in cached["wnids"]]
    return RawData(pools=pools, class_names=wnids, info={"cache": str(cache)})
