"""Segmentation networks of hossain2021 (the small U-Net of the CPU default is in ``unet``).

All map (N, C, H, W) images to (N, K, H, W) logits at the input resolution and expose their
per-pixel linear layer (a 1x1 convolution) as ``classifier``.

* ``DeepLabV3Plus`` — Chen et al. 2018: a torchvision ResNet encoder (ResNet-18 in hossain2021)
  whose last stage(s) are dilated to reach the output stride (16 by default), atrous
  *separable* spatial pyramid pooling, and a decoder that fuses the stride-4 features.
* ``VGG19FCN`` — Long et al. 2015's FCN-8s on torchvision's VGG19 convolutions: fc6/fc7 as
  convolutions, class scores at strides 32, 16, 8 summed coarse-to-fine (skip scores zero-
  initialised as in the paper), then upsampled to the input. Upsampling is fixed bilinear
  interpolation (FCN learns it from a bilinear start), so any input size >= 32 works.

``pretrained=True`` loads torchvision's ImageNet weights for the encoder from the torch hub
cache only; nothing is downloaded, and a missing file raises FileNotFoundError that names it.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F
import torchvision
from torch import nn
from torchvision.models.vgg import cfgs as VGG_CONFIGS
from torchvision.models.vgg import make_layers as make_vgg_layers

from ._layers import check_image_batch, check_positive_int, conv_bn_relu, he_init_

# --------------------------------------------------------------------------- pretrained weights


def cached_weights_path(weights: torchvision.models.WeightsEnum) -> str:
    """Where torch hub keeps the file of ``weights`` (whether or not it is there)."""
    return os.path.join(torch.hub.get_dir(), "checkpoints", os.path.basename(weights.url))


def load_cached_state_dict(weights: torchvision.models.WeightsEnum) -> dict[str, torch.Tensor]:
    """The state dict of ``weights`` from the local torch hub cache; never downloads."""
    path = cached_weights_path(weights)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"pretrained=True needs torchvision's {weights} weights, which are not cached at {path} "
            f"and cannot be downloaded here. Copy {weights.url} to that path, or use pretrained=False."
        )
    return torch.load(path, map_location="cpu", weights_only=True)


def _check_pretrained_channels(pretrained: bool, in_channels: int, model: str) -> None:
    if pretrained and in_channels != 3:
        raise ValueError(f"{model}: pretrained=True needs in_channels=3 (ImageNet RGB), got in_channels={in_channels}")


def _upsample_to(x: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    return F.interpolate(x, size=reference.shape[-2:], mode="bilinear", align_corners=False)


# --------------------------------------------------------------------------- DeepLabV3+

_RESNET_BACKBONES = {
    "resnet18": (torchvision.models.resnet18, torchvision.models.ResNet18_Weights.IMAGENET1K_V1),
    "resnet34": (torchvision.models.resnet34, torchvision.models.ResNet34_Weights.IMAGENET1K_V1),
    "resnet50": (torchvision.models.resnet50, torchvision.models.ResNet50_Weights.IMAGENET1K_V1),
    "resnet101": (torchvision.models.resnet101, torchvision.models.ResNet101_Weights.IMAGENET1K_V1),
}


def dilate_stage(stage: nn.Sequential, dilation: int) -> None:
    """Turn a ResNet stage's stride 2 into dilation, in place (keeps every weight's shape).

    Works for basic and bottleneck blocks alike, which torchvision's
    ``replace_stride_with_dilation`` does not (it refuses basic blocks).
    """
    for module in stage.modules():
        if isinstance(module, nn.Conv2d):
            module.stride = (1, 1)
            if module.kernel_size == (3, 3):
                module.dilation = (dilation, dilation)
                module.padding = (dilation, dilation)


class SeparableConvBNReLU(nn.Sequential):
    """Atrous depthwise 3x3 conv-BN-ReLU then pointwise 1x1 conv-BN-ReLU (DeepLabV3+ §3.2)."""

    def __init__(self, in_channels: int, out_channels: int, dilation: int = 1):
        super().__init__(
            nn.Conv2d(in_channels, in_channels, 3, padding=dilation, dilation=dilation, groups=in_channels, bias=False),
            nn.BatchNorm2d(in_channels),
            nn.ReLU(inplace=True),
            *conv_bn_relu(in_channels, out_channels, kernel=1),
        )


class ASPP(nn.Module):
    """1x1 branch, three atrous separable branches and image pooling, concatenated and projected."""

    def __init__(self, in_channels: int, out_channels: int, rates: tuple[int, ...]):
        super().__init__()
        self.branches = nn.ModuleList(
            [conv_bn_relu(in_channels, out_channels, kernel=1)]
            + [SeparableConvBNReLU(in_channels, out_channels, rate) for rate in rates]
        )
        self.image_pooling = nn.Sequential(nn.AdaptiveAvgPool2d(1), *conv_bn_relu(in_channels, out_channels, kernel=1))
        self.project = nn.Sequential(
            *conv_bn_relu((len(rates) + 2) * out_channels, out_channels, kernel=1), nn.Dropout(0.1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = self.image_pooling(x).expand(-1, -1, *x.shape[-2:])
        return self.project(torch.cat([branch(x) for branch in self.branches] + [pooled], dim=1))


class DeepLabV3Plus(nn.Module):
    """DeepLabV3+ on a torchvision ResNet; logits (N, K, H, W) at input resolution."""

    ASPP_CHANNELS = 256
    LOW_LEVEL_CHANNELS = 48
    BASE_RATES = (6, 12, 18)  # at output stride 16; doubled at 8, halved at 32

    def __init__(
        self,
        num_classes: int,
        *,
        backbone: str = "resnet18",
        output_stride: int = 16,
        in_channels: int = 3,
        pretrained: bool = False,
    ):
        super().__init__()
        if backbone not in _RESNET_BACKBONES:
            raise ValueError(f"backbone={backbone!r} is not one of {sorted(_RESNET_BACKBONES)}")
        if output_stride not in (8, 16, 32):
            raise ValueError(f"output_stride must be 8, 16 or 32, got {output_stride!r}")
        check_positive_int(in_channels, "in_channels")
        _check_pretrained_channels(pretrained, in_channels, "deeplabv3plus")
        self.in_channels = in_channels
        self.output_stride = output_stride

        factory, weights = _RESNET_BACKBONES[backbone]
        resnet = factory()
        if pretrained:
            resnet.load_state_dict(load_cached_state_dict(weights))
        elif in_channels != 3:
            resnet.conv1 = he_init_(nn.Conv2d(in_channels, 64, 7, stride=2, padding=3, bias=False))
        self.stem = nn.Sequential(resnet.conv1, resnet.bn1, resnet.relu, resnet.maxpool)
        self.layer1, self.layer2, self.layer3, self.layer4 = resnet.layer1, resnet.layer2, resnet.layer3, resnet.layer4
        if output_stride <= 16:
            dilate_stage(self.layer4, 2 if output_stride == 16 else 4)
        if output_stride == 8:
            dilate_stage(self.layer3, 2)

        high_channels = resnet.fc.in_features
        low_channels = high_channels // 8  # layer1 width: 64 (basic) or 256 (bottleneck)
        rates = tuple(rate * 16 // output_stride for rate in self.BASE_RATES)
        self.aspp = ASPP(high_channels, self.ASPP_CHANNELS, rates)
        self.low_level = conv_bn_relu(low_channels, self.LOW_LEVEL_CHANNELS, kernel=1)
        self.decoder = nn.Sequential(
            SeparableConvBNReLU(self.ASPP_CHANNELS + self.LOW_LEVEL_CHANNELS, self.ASPP_CHANNELS),
            SeparableConvBNReLU(self.ASPP_CHANNELS, self.ASPP_CHANNELS),
        )
        self.classifier = nn.Conv2d(self.ASPP_CHANNELS, num_classes, 1)
        he_init_(self.aspp)
        he_init_(self.low_level)
        he_init_(self.decoder)

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(stride-4 low-level features, stride-``output_stride`` high-level features)."""
        low = self.layer1(self.stem(x))
        return low, self.layer4(self.layer3(self.layer2(low)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_image_batch(x, self.in_channels, 32, "deeplabv3plus")
        low, high = self.encode(x)
        context = _upsample_to(self.aspp(high), low)
        fused = self.decoder(torch.cat([context, self.low_level(low)], dim=1))
        return _upsample_to(self.classifier(fused), x)


# --------------------------------------------------------------------------- VGG19-FCN

_VGG19_WEIGHTS = torchvision.models.VGG19_Weights.IMAGENET1K_V1
_FC6_KERNEL = 7  # VGG's first fully connected layer sees a 7x7 window of pool5


def _split_at_pools(features: nn.Sequential) -> list[nn.Sequential]:
    """VGG ``features`` cut after each max-pool: five stages at strides 2, 4, 8, 16, 32."""
    stages, current = [], []
    for layer in features:
        current.append(layer)
        if isinstance(layer, nn.MaxPool2d):
            stages.append(nn.Sequential(*current))
            current = []
    return stages


class VGG19FCN(nn.Module):
    """FCN-8s on torchvision VGG19; ``classifier`` scores the stride-32 features."""

    def __init__(self, num_classes: int, *, head_channels: int = 4096, in_channels: int = 3, pretrained: bool = False):
        super().__init__()
        check_positive_int(head_channels, "head_channels")
        check_positive_int(in_channels, "in_channels")
        _check_pretrained_channels(pretrained, in_channels, "vgg19_fcn")
        self.in_channels = in_channels
        state = load_cached_state_dict(_VGG19_WEIGHTS) if pretrained else None
        # torchvision's VGG19 convolutions ("configuration E"), initialised as torchvision does,
        # without building its 120 M-parameter fully connected classifier only to discard it.
        vgg_features = he_init_(make_vgg_layers(VGG_CONFIGS["E"], batch_norm=False))
        if state is not None:
            features_state = {k.removeprefix("features."): v for k, v in state.items() if k.startswith("features.")}
            vgg_features.load_state_dict(features_state)
        elif in_channels != 3:
            vgg_features[0] = he_init_(nn.Conv2d(in_channels, 64, 3, padding=1))
        stages = _split_at_pools(vgg_features)
        self.to_pool3 = nn.Sequential(*stages[:3])
        self.to_pool4 = stages[3]
        self.to_pool5 = stages[4]

        fc6 = nn.Conv2d(512, head_channels, _FC6_KERNEL, padding=_FC6_KERNEL // 2)
        fc7 = nn.Conv2d(head_channels, head_channels, 1)
        self.head = he_init_(
            nn.Sequential(fc6, nn.ReLU(inplace=True), nn.Dropout(0.5), fc7, nn.ReLU(inplace=True), nn.Dropout(0.5))
        )
        if state is not None and head_channels == 4096:  # "convolutionalise" VGG's fc6/fc7 as FCN does
            with torch.no_grad():
                for conv, linear in ((fc6, "classifier.0"), (fc7, "classifier.3")):
                    conv.weight.copy_(state[f"{linear}.weight"].reshape(conv.weight.shape))
                    conv.bias.copy_(state[f"{linear}.bias"])
        self.classifier = nn.Conv2d(head_channels, num_classes, 1)
        self.score_pool4 = nn.Conv2d(512, num_classes, 1)
        self.score_pool3 = nn.Conv2d(256, num_classes, 1)
        for skip in (self.score_pool4, self.score_pool3):  # FCN-8s starts from FCN-32s behaviour
            nn.init.zeros_(skip.weight)
            nn.init.zeros_(skip.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_image_batch(x, self.in_channels, 32, "vgg19_fcn")
        pool3 = self.to_pool3(x)
        pool4 = self.to_pool4(pool3)
        scores = self.classifier(self.head(self.to_pool5(pool4)))
        scores = _upsample_to(scores, pool4) + self.score_pool4(pool4)
        scores = _upsample_to(scores, pool3) + self.score_pool3(pool3)
        return _upsample_to(scores, x)
