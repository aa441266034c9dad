"""The registered datasets and the conventions the papers train them with.

Split defaults: CIFAR-10/100 45k/5k/10k (mukhoti2020 App. D, komisarenko2024 §5);
Tiny-ImageNet 90k/10k from the 100k training images, official val set as test (same
sources); SVHN 68,257/5,000 from the 73,257 training images, official 26,032 as test
(charoenphakdee2021 states no val size; 5k as for CIFAR). Datasets without an official
test set are split 60/20/20.

Augmentation: random 4-pixel-shift crops + horizontal flips for CIFAR and Tiny-ImageNet
(mukhoti2020 App. D and its released code); crops without flips for SVHN (a mirrored digit
is another glyph); none for the vector/1-D/8×8 sets.
"""

from __future__ import annotations

from .augment import CROP_FLIP, CROP_ONLY, NO_AUGMENTATION
from .cifar import CIFAR10_MEAN, CIFAR10_STD, CIFAR100_MEAN, CIFAR100_STD, load_cifar10, load_cifar100
from .digits import DIGITS_MEAN, DIGITS_STD, load_digits_data
from .mnist_1d import load_mnist1d
from .registry import register
from .svhn import SVHN_MEAN, SVHN_STD, load_svhn
from .synthetic import load_synthetic_1d
from .tiny_imagenet import TINY_IMAGENET_MEAN, TINY_IMAGENET_STD, load_tiny_imagenet

POOLED_VAL_FRACTION = 0.2
POOLED_TEST_FRACTION = 0.2

register("synthetic1d", load_synthetic_1d, num_classes=3, val_size=POOLED_VAL_FRACTION, test_size=POOLED_TEST_FRACTION,
         augmentation=NO_AUGMENTATION, summary="1-D 3-class Gaussian mixture with known posterior (charoenphakdee2021 Fig 3)")
register("digits", load_digits_data, num_classes=10, val_size=POOLED_VAL_FRACTION, test_size=POOLED_TEST_FRACTION,
         augmentation=NO_AUGMENTATION, mean=DIGITS_MEAN, std=DIGITS_STD, summary="sklearn's 1,797 8x8 digits")
register("mnist1d", load_mnist1d, num_classes=10, val_size=POOLED_VAL_FRACTION, test_size=POOLED_TEST_FRACTION,
         augmentation=NO_AUGMENTATION, summary="MNIST-1D (40-step signals), generated offline and cached")
register("cifar10", load_cifar10, num_classes=10, val_size=5000, augmentation=CROP_FLIP, mean=CIFAR10_MEAN,
         std=CIFAR10_STD, needs_download=True, summary="CIFAR-10, 45k/5k/10k")
register("cifar100", load_cifar100, num_classes=100, val_size=5000, augmentation=CROP_FLIP, mean=CIFAR100_MEAN,
         std=CIFAR100_STD, needs_download=True, summary="CIFAR-100 (fine labels), 45k/5k/10k")
register("svhn", load_svhn, num_classes=10, val_size=5000, augmentation=CROP_ONLY, mean=SVHN_MEAN, std=SVHN_STD,
         needs_download=True, summary="SVHN cropped digits, 68,257/5k/26,032")
register("tiny_imagenet", load_tiny_imagenet, num_classes=200, val_size=10000, augmentation=CROP_FLIP,
         mean=TINY_IMAGENET_MEAN, std=TINY_IMAGENET_STD, needs_download=True,
         summary="Tiny-ImageNet-200, 90k/10k/10k (official val as test)")
