"""Segmentation data a user brings: an ``images/`` and a ``masks/`` folder of PNGs.

Layout: ``<root>/<folder>/images/<key><image_suffix>.<ext>`` and
``<root>/<folder>/masks/<key><mask_suffix>.png``, paired by ``key`` (the path below
``images/``/``masks/`` without the suffix and extension, so sub-folders such as
Cityscapes' per-city folders pair up). A mask is a single-channel image of integer
labels (8- or 16-bit greyscale, or palette indices).

Labels: without ``class_map`` the mask values are the class indices 0 .. num_classes-1,
and 255 (:data:`IGNORE_INDEX`) marks pixels no loss or metric counts. ``class_map`` maps
raw mask values to class indices (or to 255), e.g. Cityscapes' 34 label ids to its 8
categories (:data:`CITYSCAPES_CATEGORY_MAP`); every class 0 .. num_classes-1 must be the
target of some value, and mask values it does not list raise an error
(``unmapped="error"``) or are ignored (``unmapped="ignore"``). Masks holding only 0 and
255 are refused without a ``class_map``, because 255 would otherwise silently mean
"ignore" where many binary masks (e.g. prostate MRI) mean "foreground".

Resizing (hossain2021 §4.1 resizes everything to 224×224): images bilinearly, masks by
nearest neighbour, so a resized mask holds only values of the original one.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ._dataset import RawData
from .download import DatasetNotFoundError
from .segmentation import IGNORE_INDEX

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")
MASK_SUFFIXES = (".png",)
UNMAPPED_POLICIES = ("error", "ignore")

# Cityscapes label id -> category id (cityscapesScripts' labels.py): void, flat, construction,
# object, nature, sky, human, vehicle. The 8 groups are our reading of hossain2021 §4.1's
# "reduced to 8 by grouping multiple similar classes"; map 0 to IGNORE_INDEX to drop void.
CITYSCAPES_CATEGORY_MAP = {
    **dict.fromkeys(range(7), 0), **dict.fromkeys(range(7, 11), 1), **dict.fromkeys(range(11, 17), 2),
    **dict.fromkeys(range(17, 21), 3), 21: 4, 22: 4, 23: 5, 24: 6, 25: 6, **dict.fromkeys(range(26, 34), 7),
}


def check_size(size) -> tuple[int, int] | None:
    """``size`` as (height, width): an int for a square, a pair, or None to keep the original."""
    if size is None:
        return None
    pair = (size, size) if isinstance(size, (int, np.integer)) and not isinstance(size, bool) else size
    if (not isinstance(pair, (tuple, list)) or len(pair) != 2
            or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1 for v in pair)):
        raise ValueError(f"size must be None, a positive int or a (height, width) pair of them, got {size!r}")
    return int(pair[0]), int(pair[1])


def class_lookup(class_map: dict | None, num_classes: int, unmapped: str) -> np.ndarray | None:
    """A 65,536-entry table from raw mask value to class index (-1: unmapped), or None for identity."""
    if unmapped not in UNMAPPED_POLICIES:
        raise ValueError(f"unmapped must be one of {UNMAPPED_POLICIES}, got {unmapped!r}")
    if class_map is None:
        return None
    if not isinstance(class_map, dict) or not class_map:
        raise ValueError(f"class_map must be a non-empty dict from mask value to class index, got {class_map!r}")
    table = np.full(1 << 16, IGNORE_INDEX if unmapped == "ignore" else -1, dtype=np.int64)
    for raw, target in class_map.items():
        try:
            raw_value = int(raw)  # keys from YAML/JSON configs may be strings
        except (TypeError, ValueError):
            raise ValueError(f"class_map key {raw!r} is not an integer mask value") from None
        if not 0 <= raw_value < table.size:
            raise ValueError(f"class_map key {raw!r} is outside the 16-bit mask range")
        if isinstance(target, bool) or not isinstance(target, (int, np.integer)) or not (
                0 <= target < num_classes or target == IGNORE_INDEX):
            raise ValueError(f"class_map[{raw!r}] = {target!r} is not a class index in 0..{num_classes - 1} "
                             f"or {IGNORE_INDEX} (ignore); pass num_classes to allow more classes")
        table[raw_value] = target
    unused = sorted(set(range(num_classes)) - {int(target) for target in class_map.values()})
    if unused:  # a class no mask value maps to can never be a label: num_classes does not fit the map
        raise ValueError(f"class_map maps no mask value to class(es) {unused[:10]} of 0..{num_classes - 1}; "
                         f"set num_classes to the number of classes the map makes")
    return table


def map_labels(raw: np.ndarray, lookup: np.ndarray | None, num_classes: int, source: str) -> np.ndarray:
    """Class indices (uint8: num_classes <= 255, so masks stay small) of raw mask values; a
    clear error for values outside the class set."""
    if lookup is None:
        values = np.unique(raw)
        bad = values[(values >= num_classes) & (values != IGNORE_INDEX)]
        if bad.size:
            raise ValueError(f"{source}: mask values {bad[:10].tolist()} are not class indices 0..{num_classes - 1} "
                             f"or {IGNORE_INDEX} (ignore); pass num_classes, or a class_map from mask value to class")
        if values.size and set(values.tolist()) <= {0, IGNORE_INDEX} and IGNORE_INDEX in values:
            raise ValueError(f"{source}: masks hold only 0 and {IGNORE_INDEX}. If {IGNORE_INDEX} marks the foreground, "
                             f"pass class_map={{0: 0, {IGNORE_INDEX}: 1}}; if it marks ignored pixels, pass "
                             f"class_map={{0: 0, {IGNORE_INDEX}: {IGNORE_INDEX}}}")
        return raw.astype(np.uint8)
    if raw.min() < 0 or raw.max() >= lookup.size:
        raise ValueError(f"{source}: mask values must lie in 0..{lookup.size - 1}")
    labels = lookup[raw]
    if (labels < 0).any():
        missing = np.unique(raw[labels < 0])
        raise ValueError(f"{source}: mask values {missing[:10].tolist()} are not in class_map; add them, or pass "
                         f"unmapped='ignore' to label them {IGNORE_INDEX} (ignored)")
    return labels.astype(np.uint8)


def read_image(path: Path, size: tuple[int, int] | None, channels: int) -> np.ndarray:
    """uint8 (channels, H, W), bilinearly resized to ``size`` (height, width) if given."""
    from PIL import Image

    with Image.open(path) as image:
        image = image.convert("RGB" if channels == 3 else "L")
        if size is not None and image.size != (size[1], size[0]):
            image = image.resize((size[1], size[0]), Image.Resampling.BILINEAR)
        pixels = np.asarray(image)
    return pixels.transpose(2, 0, 1) if channels == 3 else pixels[None]


def read_mask(path: Path, size: tuple[int, int] | None) -> np.ndarray:
    """Raw integer labels (H, W) of a single-channel mask, nearest-neighbour resized if ``size``."""
    from PIL import Image

    with Image.open(path) as mask:
        if mask.mode not in ("1", "L", "P", "I", "I;16", "I;16B", "I;16L"):
            raise ValueError(f"{path}: a mask must be single-channel integer labels (greyscale or palette), got "
                             f"mode {mask.mode!r}; convert colour-coded masks to label images first")
        if mask.mode.startswith("I;16"):
            mask = mask.convert("I")  # PIL resizes 32-bit integer images, not 16-bit ones
        if size is not None and mask.size != (size[1], size[0]):
            mask = mask.resize((size[1], size[0]), Image.Resampling.NEAREST)
        return np.asarray(mask).astype(np.int32)


def _keyed_files(folder: Path, suffixes: tuple[str, ...], name_suffix: str) -> dict[str, Path]:
    """``key -> path`` of the files below ``folder`` with one of ``suffixes``, keyed by the
    relative path without extension and without ``name_suffix``."""
    files = {}
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.suffix.lower() not in suffixes:
            continue
        key = path.relative_to(folder).with_suffix("").as_posix()
        if name_suffix:
            if not key.endswith(name_suffix):
                continue
            key = key[: -len(name_suffix)]
        if key in files:
            raise ValueError(f"{folder}: both {files[key].name} and {path.name} pair with key {key!r}")
        files[key] = path
    return files


def paired_files(folder: Path, image_suffix: str = "", mask_suffix: str = "", *, dataset: str,
                 images_dir: str = "images", masks_dir: str = "masks") -> list[tuple[str, Path, Path]]:
    """Sorted ``(key, image, mask)`` triples; an error names the unpaired files or the missing folders."""
    image_dir, mask_dir = folder / images_dir, folder / masks_dir
    if not image_dir.is_dir() or not mask_dir.is_dir():
        raise DatasetNotFoundError(
            f"dataset {dataset!r} not found: put the images in {image_dir}/ and the label masks (single-channel "
            f"PNGs, same file names) in {mask_dir}/, or pass folder= (relative to root, or absolute)")
    images = _keyed_files(image_dir, IMAGE_SUFFIXES, image_suffix)
    masks = _keyed_files(mask_dir, MASK_SUFFIXES, mask_suffix)
    if not images:
        raise DatasetNotFoundError(f"dataset {dataset!r}: no images ({', '.join(IMAGE_SUFFIXES)}) in {image_dir}")
    unpaired_images, unpaired_masks = sorted(set(images) - set(masks)), sorted(set(masks) - set(images))
    if unpaired_images or unpaired_masks:
        raise ValueError(f"dataset {dataset!r}: images without a mask in {mask_dir}: {unpaired_images[:5]}"
                         f"{' ...' if len(unpaired_images) > 5 else ''}; masks without an image in {image_dir}: "
                         f"{unpaired_masks[:5]}{' ...' if len(unpaired_masks) > 5 else ''} "
                         f"(image_suffix={image_suffix!r}, mask_suffix={mask_suffix!r})")
    return [(key, images[key], masks[key]) for key in sorted(images)]


def read_pairs(pairs: list[tuple[str, Path, Path]], size: tuple[int, int] | None,
               channels: int) -> tuple[np.ndarray, np.ndarray]:
    """uint8 images (N, channels, H, W) and raw int32 masks (N, H, W) of the pairs, decoded in threads."""
    def read(pair):
        _, image_path, mask_path = pair
        image, mask = read_image(image_path, size, channels), read_mask(mask_path, size)
        if image.shape[1:] != mask.shape:
            raise ValueError(f"{image_path} is {image.shape[1]}x{image.shape[2]} but its mask {mask_path} is "
                             f"{mask.shape[0]}x{mask.shape[1]}")
        return image, mask

    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:  # PIL decodes without the GIL
        decoded = list(pool.map(read, pairs))
    shapes = {image.shape for image, _ in decoded}
    if len(shapes) > 1:
        raise ValueError(f"images differ in size ({sorted(shapes)[:3]} ...); pass size= to resize them to one size")
    return np.stack([image for image, _ in decoded]), np.stack([mask for _, mask in decoded])


def load_segmentation_folder(root, download: bool, *, folder: str = "segmentation", num_classes: int = 2,
                             class_map: dict | None = None, unmapped: str = "error", size=224, channels: int = 3,
                             image_suffix: str = "", mask_suffix: str = "") -> RawData:
    """Images and masks of ``root/folder`` (see the module docstring); nothing is downloaded.

    ``num_classes`` counts the classes after ``class_map`` (default 2: background and
    one structure, as the prostate sets); ``size`` is an int, (height, width) or None;
    ``channels`` 3 (RGB) or 1 (greyscale, e.g. MRI/TRUS).
    """
    if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)) or not 2 <= num_classes <= IGNORE_INDEX:
        raise ValueError(f"num_classes must be an integer in 2..{IGNORE_INDEX}, got {num_classes!r}")
    if channels not in (1, 3):
        raise ValueError(f"channels must be 1 (greyscale) or 3 (RGB), got {channels!r}")
    resize, lookup = check_size(size), class_lookup(class_map, num_classes, unmapped)
    path = Path(root) / Path(folder).expanduser()
    pairs = paired_files(path, image_suffix, mask_suffix, dataset="segmentation_folder")
    images, raw_masks = read_pairs(pairs, resize, channels)
    masks = map_labels(raw_masks, lookup, num_classes, str(path / "masks"))
    return RawData(
        pools={"all": (images, masks)},
        class_names=[f"class {k}" for k in range(num_classes)],
        per_sample={"key": {"all": np.asarray([key for key, _, _ in pairs])}},
        num_classes=int(num_classes),
        info={"ignore_index": IGNORE_INDEX, "folder": str(path), "class_pixel_frequency": class_frequency(masks, num_classes)},
    )


def class_frequency(masks: np.ndarray, num_classes: int) -> list[float]:
    """Fraction of the labelled (not ignored) pixels in each class."""
    counts = np.bincount(masks[masks != IGNORE_INDEX].ravel(), minlength=num_classes)[:num_classes]
    return (counts / max(counts.sum(), 1)).tolist()
