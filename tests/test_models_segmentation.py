"""Segmentation models: output shapes, parameter counts, encoder stride, pretrained loading."""

from __future__ import annotations

import copy
import os

import pytest
import torch
import torchvision
from torch import nn

from focalcal.models import available, build, count_parameters, last_layer
from focalcal.models.segmentation import cached_weights_path

SEGMENTERS = available("segmentation")
# VGG19-FCN's default fc6/fc7 hold 120 M parameters; behaviour tests use a narrow head.
LIGHT_OPTIONS = {"vgg19_fcn": {"head_channels": 64}}


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def empty_hub_dir(tmp_path):
    """Point torch hub at an empty directory, so no real cached weights are visible."""
    previous = torch.hub.get_dir()
    torch.hub.set_dir(str(tmp_path))
    yield tmp_path
    torch.hub.set_dir(previous)


_BUILT: dict[tuple, nn.Module] = {}


def _build(name: str, k: int, **options) -> nn.Module:
    """A fresh copy of the model (VGG19's initialisation is the slow part, so build once)."""
    options = {**LIGHT_OPTIONS.get(name, {}), **options}
    key = (name, k, tuple(sorted(options.items())))
    if key not in _BUILT:
        _BUILT[key] = build(name, k, **options)
    return copy.deepcopy(_BUILT[key])


def _conv_bn(c_in: int, c_out: int, kernel: int) -> int:
    return c_in * c_out * kernel * kernel + 2 * c_out


def _separable(c_in: int, c_out: int) -> int:
    return c_in * 9 + 2 * c_in + _conv_bn(c_in, c_out, 1)


def deeplab_count(k: int) -> int:
    resnet18 = torchvision.models.resnet18()
    backbone = count_parameters(resnet18) - count_parameters(resnet18.fc)
    aspp = _conv_bn(512, 256, 1) + 3 * _separable(512, 256) + _conv_bn(512, 256, 1) + _conv_bn(5 * 256, 256, 1)
    decoder = _conv_bn(64, 48, 1) + _separable(256 + 48, 256) + _separable(256, 256) + 256 * k + k
    return backbone + aspp + decoder


def vgg19_fcn_count(k: int, head: int = 4096) -> int:
    features = count_parameters(torchvision.models.vgg19().features)
    fc6_fc7 = 512 * head * 49 + head + head * head + head
    scores = (head + 1) * k + (512 + 1) * k + (256 + 1) * k
    return features + fc6_fc7 + scores


def unet_count(k: int, c_in: int = 3, base: int = 16, depth: int = 3) -> int:
    widths = [base * 2**level for level in range(depth + 1)]

    def double(a, b):
        return _conv_bn(a, b, 3) + _conv_bn(b, b, 3)

    total = double(c_in, widths[0]) + sum(double(widths[i - 1], widths[i]) for i in range(1, depth + 1))
    for level in range(depth):
        total += widths[level + 1] * widths[level] * 4 + widths[level]  # 2x2 transposed conv
        total += double(2 * widths[level], widths[level])
    return total + widths[0] * k + k


def test_parameter_counts():
    with torch.device("meta"):  # counting needs no allocated weights
        assert count_parameters(build("deeplabv3plus", 11)) == deeplab_count(11)
        assert count_parameters(build("deeplabv3plus", 11)) == pytest.approx(12.3e6, rel=0.01)
        assert count_parameters(build("unet_small", 4)) == unet_count(4)
        assert count_parameters(build("unet_small", 2, in_channels=1, base_channels=8, depth=2)) == unet_count(
            2, c_in=1, base=8, depth=2
        )
        assert count_parameters(build("vgg19_fcn", 5, head_channels=64)) == vgg19_fcn_count(5, head=64)
        full_fcn = build("vgg19_fcn", 5)  # 140 M parameters
        assert count_parameters(full_fcn) == vgg19_fcn_count(5)
        assert count_parameters(full_fcn) == pytest.approx(139.6e6, rel=0.01)


@pytest.mark.parametrize("name", SEGMENTERS)
@pytest.mark.parametrize("size", [(64, 64), (37, 45)])
def test_logits_at_input_resolution_and_last_layer(name, size):
    k = 5
    model = _build(name, k).eval()
    x = torch.randn(2, 3, *size)
    with torch.no_grad():
        assert model(x).shape == (2, k, *size)
        layer = last_layer(model)
        assert isinstance(layer, nn.Conv2d) and layer.out_channels == k
        # A zero weight leaves the bias at every pixel: the layer is what produces the logits.
        layer.weight.zero_()
        layer.bias.copy_(torch.arange(k, dtype=torch.float32))
        expected = torch.arange(k, dtype=torch.float32)[None, :, None, None].expand(2, k, *size)
        torch.testing.assert_close(model(x), expected)


@pytest.mark.parametrize("name", SEGMENTERS)
def test_eval_is_deterministic_and_channels_last_agrees(name):
    model = _build(name, 3).eval()
    x = torch.randn(2, 3, 48, 48)
    with torch.no_grad():
        first = model(x)
        assert torch.equal(first, model(x))
        model = model.to(memory_format=torch.channels_last)
        channels_last = model(x.contiguous(memory_format=torch.channels_last))
    torch.testing.assert_close(channels_last, first, rtol=1e-5, atol=1e-5 * max(first.abs().max().item(), 1.0))


@pytest.mark.parametrize("name", SEGMENTERS)
def test_every_parameter_receives_a_gradient(name):
    model = _build(name, 3).train()
    logits = model(torch.randn(2, 3, 32, 32))
    nn.functional.cross_entropy(logits, torch.randint(0, 3, (2, 32, 32))).backward()
    assert [n for n, p in model.named_parameters() if p.grad is None] == []


@pytest.mark.parametrize("name", SEGMENTERS)
def test_wrong_input_shape_is_rejected(name):
    model = _build(name, 3)
    with pytest.raises(ValueError, match=r"\(N, 3, H, W\)"):
        model(torch.randn(2, 1, 64, 64))
    with pytest.raises(ValueError, match="H and W"):
        model(torch.randn(2, 3, 4, 64))


@pytest.mark.parametrize("name", SEGMENTERS)
def test_single_channel_input(name):
    model = _build(name, 2, in_channels=1).eval()
    with torch.no_grad():
        assert model(torch.randn(1, 1, 32, 32)).shape == (1, 2, 32, 32)


@pytest.mark.parametrize(("output_stride", "high_size"), [(8, 8), (16, 4), (32, 2)])
def test_deeplab_encoder_output_stride(output_stride, high_size):
    model = build("deeplabv3plus", 3, output_stride=output_stride).eval()
    with torch.no_grad():
        low, high = model.encode(torch.randn(1, 3, 64, 64))
    assert low.shape == (1, 64, 16, 16)
    assert high.shape == (1, 512, high_size, high_size)
    # dilation replaces stride without touching a weight
    assert count_parameters(model) == deeplab_count(3)


def test_deeplab_bottleneck_backbone():
    model = build("deeplabv3plus", 3, backbone="resnet50").eval()
    with torch.no_grad():
        low, high = model.encode(torch.randn(1, 3, 64, 64))
        assert model(torch.randn(1, 3, 64, 64)).shape == (1, 3, 64, 64)
    assert low.shape == (1, 256, 16, 16) and high.shape == (1, 2048, 4, 4)


@pytest.mark.parametrize(
    ("options", "culprit"),
    [({"backbone": "vgg11"}, "backbone"), ({"output_stride": 4}, "output_stride"), ({"in_channels": 0}, "in_channels")],
)
def test_deeplab_bad_options(options, culprit):
    with pytest.raises(ValueError, match=culprit):
        build("deeplabv3plus", 3, **options)


@pytest.mark.parametrize("name", ["deeplabv3plus", "vgg19_fcn"])
def test_pretrained_without_cached_weights_says_where_they_should_be(name, empty_hub_dir):
    with pytest.raises(FileNotFoundError, match=r"not cached at .*checkpoints.*pretrained=False"):
        build(name, 3, **LIGHT_OPTIONS.get(name, {}), pretrained=True)


def test_pretrained_loads_the_cached_backbone(empty_hub_dir):
    weights = torchvision.models.ResNet18_Weights.IMAGENET1K_V1
    path = cached_weights_path(weights)
    assert path.startswith(str(empty_hub_dir))
    os.makedirs(os.path.dirname(path))
    reference = torchvision.models.resnet18()  # stands in for the ImageNet file
    torch.save(reference.state_dict(), path)

    model = build("deeplabv3plus", 3, pretrained=True)
    torch.testing.assert_close(model.stem[0].weight, reference.conv1.weight, rtol=0, atol=0)
    torch.testing.assert_close(model.layer4[1].conv2.weight, reference.layer4[1].conv2.weight, rtol=0, atol=0)
    assert model.layer4[0].conv1.dilation == (2, 2)  # still dilated after loading


def test_pretrained_needs_rgb():
    with pytest.raises(ValueError, match="in_channels=3"):
        build("deeplabv3plus", 3, pretrained=True, in_channels=1)


def test_fcn_skip_scores_start_at_zero():
    model = _build("vgg19_fcn", 4)
    for skip in (model.score_pool4, model.score_pool3):
        assert skip.weight.abs().sum() == 0 and skip.bias.abs().sum() == 0
