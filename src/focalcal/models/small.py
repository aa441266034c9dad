"""Small networks for the CPU-sized default config.

* ``MLP`` — the "three-layer multilayered perceptron" of charoenphakdee2021 §5.2 (three
  linear layers, ReLU between) for the synthetic 1-D problem.
* ``SmallCNN`` — a three-convolution network for sklearn's 8x8 digits (stands in for SVHN).
* ``CNN1D`` — the MNIST-1D convolutional baseline of Greydanus (2020): three stride-2 1-D
  convolutions (kernels 5, 3, 3) and a linear layer on the flattened features; width 25
  gives its ~5 k parameters, a larger width gives the "larger model" of the default config.

Each exposes its last layer as ``classifier`` and checks its input shape, so a wrongly
shaped batch fails with the expected shape in the message.
"""

from __future__ import annotations

import torch
from torch import nn

from ._layers import check_positive_int, he_init_


class MLP(nn.Module):
    """in_features -> hidden -> hidden -> num_classes with ReLU; accepts (N, in_features)."""

    def __init__(self, num_classes: int, *, in_features: int = 1, hidden: int = 64):
        super().__init__()
        self.in_features = check_positive_int(in_features, "in_features")
        check_positive_int(hidden, "hidden")
        self.body = nn.Sequential(
            nn.Linear(in_features, hidden),
            nn.ReLU(inplace=True),
            nn.Linear(hidden, hidden),
            nn.ReLU(inplace=True),
        )
        self.classifier = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim == 1 and self.in_features == 1:  # a batch of scalars, as the 1-D synthetic data comes
            x = x.unsqueeze(1)
        if x.ndim != 2 or x.shape[1] != self.in_features:
            raise ValueError(f"MLP expects input of shape (N, {self.in_features}), got {tuple(x.shape)}")
        return self.classifier(self.body(x))


def _conv_bn_relu(in_channels: int, out_channels: int) -> list[nn.Module]:
    conv = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)
    return [conv, nn.BatchNorm2d(out_channels), nn.ReLU(inplace=True)]


class SmallCNN(nn.Module):
    """conv(w)-conv(w)-maxpool-conv(2w), global average pool, linear.

    Accepts (N, C, H, W) images of any size, and for flat input (N, C*S*S) with
    S = ``image_size`` (sklearn's digits come as (N, 64)).
    """

    def __init__(self, num_classes: int, *, in_channels: int = 1, width: int = 16, image_size: int = 8):
        super().__init__()
        self.in_channels = check_positive_int(in_channels, "in_channels")
        self.image_size = check_positive_int(image_size, "image_size")
        check_positive_int(width, "width")
        self.features = nn.Sequential(
            *_conv_bn_relu(in_channels, width),
            *_conv_bn_relu(width, width),
            nn.MaxPool2d(2),
            *_conv_bn_relu(width, 2 * width),
            nn.AdaptiveAvgPool2d(1),
        )
        self.classifier = nn.Linear(2 * width, num_classes)
        he_init_(self, mode="fan_out")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat_size = self.in_channels * self.image_size**2
        if x.ndim == 2 and x.shape[1] == flat_size:
            x = x.reshape(-1, self.in_channels, self.image_size, self.image_size)
        if x.ndim != 4 or x.shape[1] != self.in_channels or min(x.shape[-2:]) < 2:
            raise ValueError(
                f"SmallCNN expects (N, {self.in_channels}, H, W) with H, W >= 2 or flat (N, {flat_size}), "
                f"got {tuple(x.shape)}"
            )
        return self.classifier(self.features(x).flatten(1))


class CNN1D(nn.Module):
    """Three stride-2 1-D convolutions with ReLU, flatten, linear. Accepts (N, L) or (N, 1, L)."""

    KERNELS = (5, 3, 3)

    def __init__(self, num_classes: int, *, width: int = 25, input_length: int = 40):
        super().__init__()
        check_positive_int(width, "width")
        self.input_length = check_positive_int(input_length, "input_length")
        layers, channels, length = [], 1, input_length
        for kernel in self.KERNELS:
            if length + 2 < kernel:
                raise ValueError(f"input_length={input_length} is too short for three stride-2 convolutions")
            layers += [nn.Conv1d(channels, width, kernel, stride=2, padding=1), nn.ReLU(inplace=True)]
            channels, length = width, (length + 2 - kernel) // 2 + 1
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(width * length, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim == 2:
            x = x.unsqueeze(1)
        if x.ndim != 3 or x.shape[1] != 1 or x.shape[2] != self.input_length:
            raise ValueError(
                f"CNN1D expects input of shape (N, {self.input_length}) or (N, 1, {self.input_length}), "
                f"got {tuple(x.shape)}"
            )
        return self.classifier(self.features(x).flatten(1))


__all__ = ["CNN1D", "MLP", "SmallCNN"]
