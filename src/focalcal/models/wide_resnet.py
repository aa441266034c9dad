"""Wide ResNets (Zagoruyko & Komodakis 2016) for 32x32 inputs.

Three stages of ``n`` basic blocks, 16k/32k/64k channels (k = widen factor) after a
16-channel stem. Two block flavours, because the two sources differ:

* ``preactivation=False`` — the network of mukhoti2020's code ("WRN-26-10"): post-activation
  blocks (conv-BN-ReLU-conv-BN, add, ReLU), a 1x1 conv + BN shortcut where the shape
  changes, depth counted as 6n + 2 → 26 means n = 4.
* ``preactivation=True`` — Zagoruyko & Komodakis' own block (BN-ReLU-conv, optional dropout,
  BN-ReLU-conv), a 1x1 conv shortcut where the shape changes and a final BN-ReLU; they count
  depth as 6n + 4, so the same n = 4 is their WRN-28-10 (36.5 M parameters).

Both have the same convolutions; they differ only in where the BatchNorms sit.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ._layers import check_positive_int, check_probability, he_init_

_STEM_WIDTH = 16


def _conv3x3(in_channels: int, out_channels: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)


class PostActivationBlock(nn.Module):
    """conv-BN-ReLU-(dropout)-conv-BN, plus the shortcut, then ReLU."""

    def __init__(self, in_channels: int, out_channels: int, stride: int, dropout: float):
        super().__init__()
        self.conv1 = _conv3x3(in_channels, out_channels, stride)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.dropout = nn.Dropout(dropout) if dropout else nn.Identity()
        self.conv2 = _conv3x3(out_channels, out_channels)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.shortcut = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False), nn.BatchNorm2d(out_channels)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.dropout(F.relu(self.bn1(self.conv1(x))))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class PreActivationBlock(nn.Module):
    """BN-ReLU-conv-(dropout)-BN-ReLU-conv, plus the shortcut (taken after the first BN-ReLU)."""

    def __init__(self, in_channels: int, out_channels: int, stride: int, dropout: float):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_channels)
        self.conv1 = _conv3x3(in_channels, out_channels, stride)
        self.dropout = nn.Dropout(dropout) if dropout else nn.Identity()
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.conv2 = _conv3x3(out_channels, out_channels)
        self.shortcut = None
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        activated = F.relu(self.bn1(x))
        out = self.conv1(activated)
        out = self.conv2(self.dropout(F.relu(self.bn2(out))))
        residual = x if self.shortcut is None else self.shortcut(activated)
        return out + residual


class WideResNet(nn.Module):
    """Wide ResNet with ``blocks_per_stage`` blocks per stage; ``classifier`` is the last layer."""

    def __init__(
        self,
        num_classes: int,
        *,
        blocks_per_stage: int = 4,
        widen_factor: int = 10,
        preactivation: bool = False,
        dropout: float = 0.0,
        in_channels: int = 3,
    ):
        super().__init__()
        check_positive_int(blocks_per_stage, "blocks_per_stage")
        check_positive_int(widen_factor, "widen_factor")
        check_probability(dropout, "dropout")
        check_positive_int(in_channels, "in_channels")
        block = PreActivationBlock if preactivation else PostActivationBlock
        widths = [_STEM_WIDTH * widen_factor * 2**stage for stage in range(3)]

        stem = [nn.Conv2d(in_channels, _STEM_WIDTH, 3, padding=1, bias=False)]
        if not preactivation:  # pre-activation blocks normalise their own input
            stem += [nn.BatchNorm2d(_STEM_WIDTH), nn.ReLU(inplace=True)]
        self.stem = nn.Sequential(*stem)

        stages, width_in = [], _STEM_WIDTH
        for index, width in enumerate(widths):
            strides = [1 if index == 0 else 2] + [1] * (blocks_per_stage - 1)
            blocks = []
            for stride in strides:
                blocks.append(block(width_in, width, stride, dropout))
                width_in = width
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        # Pre-activation blocks end on a convolution, so the head normalises once more.
        self.head = nn.Sequential(nn.BatchNorm2d(widths[-1]), nn.ReLU(inplace=True)) if preactivation else nn.Identity()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(widths[-1], num_classes)
        he_init_(self, mode="fan_out")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.pool(self.head(self.stages(self.stem(x)))).flatten(1)
        return self.classifier(features)
