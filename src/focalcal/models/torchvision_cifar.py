"""torchvision's ImageNet networks adapted to 32x32 inputs, as in mukhoti2020's code.

The adaptation replaces the 7x7 stride-2 stem and its max-pool (which would shrink a CIFAR
image to 8x8 before the first block) by one 3x3 stride-1 convolution:

* bottleneck ResNets — torchvision's ``ResNet``/``Bottleneck`` with the stem swapped and the
  max-pool removed. ResNet-50 is [3, 4, 6, 3]; mukhoti2020's "ResNet-110" is the bottleneck
  net [3, 4, 26, 3] (not He et al.'s 1.7 M-parameter CIFAR ResNet-110, which is
  ``cifar_resnet``). ``pool_size=2`` gives mukhoti2020's Tiny-ImageNet head (2x2 average
  pool, 4 x 2048 features into the linear layer).
* DenseNet-121 — torchvision's ``DenseNet`` with the stem reduced to a bare 3x3 convolution of
  2 x growth-rate channels, as Huang et al. 2017 prescribe for CIFAR (no BN/ReLU/pool before
  the first dense block; the first dense layer starts with its own BN-ReLU).
"""

from __future__ import annotations

from torch import nn
from torchvision.models.densenet import DenseNet
from torchvision.models.resnet import Bottleneck, ResNet

from ._layers import check_positive_int, he_init_

_STEM_WIDTH = 64


class CifarBottleneckResNet(ResNet):
    """torchvision ``ResNet`` of bottleneck blocks with a 3x3 stride-1 stem and no max-pool."""

    def __init__(self, layers: list[int], num_classes: int, *, in_channels: int = 3, pool_size: int = 1):
        super().__init__(Bottleneck, layers, num_classes=num_classes)
        check_positive_int(pool_size, "pool_size")
        check_positive_int(in_channels, "in_channels")
        self.conv1 = he_init_(nn.Conv2d(in_channels, _STEM_WIDTH, 3, stride=1, padding=1, bias=False))
        self.maxpool = nn.Identity()
        if pool_size != 1:
            self.avgpool = nn.AdaptiveAvgPool2d(pool_size)
            self.fc = nn.Linear(self.fc.in_features * pool_size**2, num_classes)

    @property
    def classifier(self) -> nn.Linear:
        """The last linear layer (torchvision calls it ``fc``)."""
        return self.fc


class CifarDenseNet(DenseNet):
    """torchvision ``DenseNet`` whose stem is a single 3x3 stride-1 convolution."""

    def __init__(
        self,
        num_classes: int,
        *,
        growth_rate: int = 32,
        block_config: tuple[int, ...] = (6, 12, 24, 16),
        in_channels: int = 3,
    ):
        check_positive_int(growth_rate, "growth_rate")
        check_positive_int(in_channels, "in_channels")
        stem_width = 2 * growth_rate
        super().__init__(
            growth_rate=growth_rate,
            block_config=block_config,
            num_init_features=stem_width,
            num_classes=num_classes,
        )
        stem = nn.Conv2d(in_channels, stem_width, 3, stride=1, padding=1, bias=False)
        self.features.conv0 = he_init_(stem, mode="fan_in")  # as torchvision initialises DenseNet convs
        self.features.norm0 = nn.Identity()
        self.features.relu0 = nn.Identity()
        self.features.pool0 = nn.Identity()
