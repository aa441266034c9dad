"""Small pieces shared by the model files: weight initialisation and argument checks."""

from __future__ import annotations

import torch
from torch import nn

_CONVS = (nn.Conv1d, nn.Conv2d)
_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d)


def he_init_(module: nn.Module, *, mode: str = "fan_out") -> nn.Module:
    """He-normal convolutions (bias 0), BatchNorm weight 1 / bias 0, in place.

    This is the initialisation of He et al. 2015/2016 used by every CIFAR network here;
    ``mode`` picks which fan the variance 2/fan refers to ("fan_out" as in torchvision and
    mukhoti2020's code, "fan_in" as in the original He et al. Caffe filler).
    Linear layers keep PyTorch's default initialisation.
    """
    for m in module.modules():
        if isinstance(m, _CONVS):
            nn.init.kaiming_normal_(m.weight, mode=mode, nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, _NORMS):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
    return module


def check_positive_int(value, name: str) -> int:
    """Return ``value`` if it is a positive int, else raise a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def check_probability(value, name: str) -> float:
    """Return ``value`` if it is a float in [0, 1), else raise a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")
    return float(value)


def check_image_batch(x: torch.Tensor, in_channels: int, min_size: int, model: str) -> None:
    """Raise a ValueError unless ``x`` is (N, in_channels, H, W) with H, W >= ``min_size``."""
    if x.ndim != 4 or x.shape[1] != in_channels:
        raise ValueError(f"{model} expects input of shape (N, {in_channels}, H, W), got {tuple(x.shape)}")
    if min(x.shape[-2:]) < min_size:
        raise ValueError(f"{model} needs H and W >= {min_size}, got {tuple(x.shape[-2:])}")


def conv_bn_relu(in_channels: int, out_channels: int, kernel: int = 3, dilation: int = 1) -> nn.Sequential:
    """Convolution (no bias: the batch norm has one), batch norm, ReLU; "same" padding."""
    padding = dilation * (kernel // 2)
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, kernel, padding=padding, dilation=dilation, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
    )
