"""The CIFAR ResNets of He et al. 2016 (§4.2): ResNet-8/20/32/44/56/110.

Three stages of basic blocks with 16/32/64 channels at 32/16/8 px, ``n`` blocks per stage,
depth = 6n + 2. Shortcuts are "option A": identity, and where a stage halves the resolution
and doubles the width, identity on every other pixel padded with zero channels — so the
shortcuts add no parameters and the counts match the paper (ResNet-20 0.27 M,
ResNet-110 1.7 M). charoenphakdee2021 uses ResNet-8/20/44/110.

torchvision has no such network (its ResNets are the ImageNet ones), hence this file.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ._layers import check_positive_int, he_init_

STAGE_WIDTHS = (16, 32, 64)


class ZeroPadShortcut(nn.Module):
    """Option-A shortcut: subsample by ``stride`` and append zero channels up to ``out_channels``."""

    def __init__(self, in_channels: int, out_channels: int, stride: int):
        super().__init__()
        if out_channels < in_channels:
            raise ValueError(f"ZeroPadShortcut cannot shrink channels ({in_channels} -> {out_channels})")
        self.extra_channels = out_channels - in_channels
        self.stride = stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride != 1:
            x = x[:, :, :: self.stride, :: self.stride]
        if self.extra_channels:
            x = F.pad(x, (0, 0, 0, 0, 0, self.extra_channels))
        return x


class BasicBlock(nn.Module):
    """conv3x3-BN-ReLU-conv3x3-BN, plus the shortcut, then ReLU (He et al. 2016, Fig. 2)."""

    def __init__(self, in_channels: int, out_channels: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        if stride != 1 or in_channels != out_channels:
            self.shortcut = ZeroPadShortcut(in_channels, out_channels, stride)
        else:
            self.shortcut = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class CifarResNet(nn.Module):
    """He et al.'s CIFAR ResNet of the given depth (6n + 2); ``classifier`` is the last layer."""

    def __init__(self, depth: int, num_classes: int, *, in_channels: int = 3):
        super().__init__()
        check_positive_int(depth, "depth")
        check_positive_int(in_channels, "in_channels")
        if (depth - 2) % 6 != 0:
            raise ValueError(f"CIFAR ResNet depth must be 6n + 2 (8, 20, 32, 44, 56, 110, ...), got {depth}")
        blocks_per_stage = (depth - 2) // 6
        self.depth = depth
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, STAGE_WIDTHS[0], 3, padding=1, bias=False),
            nn.BatchNorm2d(STAGE_WIDTHS[0]),
            nn.ReLU(inplace=True),
        )
        stages, width_in = [], STAGE_WIDTHS[0]
        for index, width in enumerate(STAGE_WIDTHS):
            first_stride = 1 if index == 0 else 2
            blocks = [BasicBlock(width_in, width, first_stride)]
            blocks += [BasicBlock(width, width) for _ in range(blocks_per_stage - 1)]
            stages.append(nn.Sequential(*blocks))
            width_in = width
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(STAGE_WIDTHS[-1], num_classes)
        he_init_(self, mode="fan_in")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.pool(self.stages(self.stem(x))).flatten(1)
        return self.classifier(features)
