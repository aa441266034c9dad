"""A small U-Net (Ronneberger et al. 2015) for the CPU default config's segmentation study:
``depth`` 2x down/up steps, double conv-BN-ReLU at each scale, skip concatenation; logits
(N, K, H, W) at the input resolution, per-pixel linear layer exposed as ``classifier``.

Plain torch, no torchvision: importing the model registry stays cheap for every job.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ._layers import check_image_batch, check_positive_int, conv_bn_relu, he_init_


def _double_conv(in_channels: int, out_channels: int) -> nn.Sequential:
    return nn.Sequential(*conv_bn_relu(in_channels, out_channels), *conv_bn_relu(out_channels, out_channels))


class UNet(nn.Module):
    """U-Net with ``depth`` down/up steps and ``base_channels`` * 2**level channels per level."""

    def __init__(self, num_classes: int, *, in_channels: int = 3, base_channels: int = 16, depth: int = 3):
        super().__init__()
        self.in_channels = check_positive_int(in_channels, "in_channels")
        check_positive_int(base_channels, "base_channels")
        self.depth = check_positive_int(depth, "depth")
        widths = [base_channels * 2**level for level in range(depth + 1)]
        self.down = nn.ModuleList([_double_conv(in_channels, widths[0])])
        self.down.extend(_double_conv(widths[level - 1], widths[level]) for level in range(1, depth + 1))
        self.upsample = nn.ModuleList(
            nn.ConvTranspose2d(widths[level + 1], widths[level], 2, stride=2) for level in reversed(range(depth))
        )
        self.up = nn.ModuleList(_double_conv(2 * widths[level], widths[level]) for level in reversed(range(depth)))
        self.classifier = nn.Conv2d(widths[0], num_classes, 1)
        he_init_(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_image_batch(x, self.in_channels, 2**self.depth, "unet_small")
        skips = []
        for level, block in enumerate(self.down):
            if level:
                x = F.max_pool2d(x, 2)
            x = block(x)
            skips.append(x)
        skips.pop()  # the bottom level feeds the decoder directly
        for upsample, block in zip(self.upsample, self.up):
            skip = skips.pop()
            x = upsample(x)
            # odd sizes lose a row/column to pooling; pad back to the skip's size
            x = F.pad(x, (0, skip.shape[-1] - x.shape[-1], 0, skip.shape[-2] - x.shape[-2]))
            x = block(torch.cat([skip, x], dim=1))
        return self.classifier(x)
