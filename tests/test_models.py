"""Classification models: registry, parameter counts, shapes, last layer, determinism.

Parameter counts are checked twice: exactly, against closed-form counts written here from
each architecture's definition (independent of the model code), and approximately, against
the counts the papers publish.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from focalcal.models import available, build, count_parameters, last_layer, spec

CLASSIFIERS = available("classification")
IMAGE_CLASSIFIERS = [name for name in CLASSIFIERS if len(spec(name).sample_shape) == 3]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _bn(channels: int) -> int:
    return 2 * channels


# --------------------------------------------------------------------------- closed-form counts


def he_cifar_resnet_count(depth: int, k: int) -> int:
    n = (depth - 2) // 6
    total, width_in = 3 * 16 * 9 + _bn(16), 16
    for width in (16, 32, 64):
        for block in range(n):
            c_in = width_in if block == 0 else width
            total += c_in * width * 9 + width * width * 9 + 2 * _bn(width)  # option A: no shortcut weights
        width_in = width
    return total + 64 * k + k


def bottleneck_resnet_count(layers: list[int], k: int, pool_size: int = 1) -> int:
    total, c_in = 3 * 64 * 9 + _bn(64), 64
    for planes, blocks in zip((64, 128, 256, 512), layers):
        out = 4 * planes
        for block in range(blocks):
            source = c_in if block == 0 else out
            total += source * planes + 9 * planes * planes + planes * out + _bn(planes) * 2 + _bn(out)
            if block == 0:
                total += source * out + _bn(out)  # projection shortcut
        c_in = out
    return total + 2048 * pool_size**2 * k + k


def wide_resnet_count(k: int, *, preactivation: bool, n: int = 4, widen: int = 10) -> int:
    total, c_in = 3 * 16 * 9 + (0 if preactivation else _bn(16)), 16
    for width in (16 * widen, 32 * widen, 64 * widen):
        for block in range(n):
            source = c_in if block == 0 else width
            total += source * width * 9 + width * width * 9
            shortcut = source != width
            if preactivation:
                total += _bn(source) + _bn(width) + (source * width if shortcut else 0)
            else:
                total += 2 * _bn(width) + ((source * width + _bn(width)) if shortcut else 0)
        c_in = width
    if preactivation:
        total += _bn(c_in)
    return total + c_in * k + k


def densenet_count(k: int, growth: int = 32, blocks=(6, 12, 24, 16), bottleneck: int = 4) -> int:
    channels = 2 * growth
    total = 3 * channels * 9  # bare stem convolution
    for index, layers in enumerate(blocks):
        for _ in range(layers):
            inner = bottleneck * growth
            total += _bn(channels) + channels * inner + _bn(inner) + inner * growth * 9
            channels += growth
        if index < len(blocks) - 1:
            total += _bn(channels) + channels * (channels // 2)
            channels //= 2
    return total + _bn(channels) + channels * k + k


def mlp_count(k: int, d: int = 1, h: int = 64) -> int:
    return (d * h + h) + (h * h + h) + (h * k + k)


def cnn1d_count(k: int, width: int = 25, length: int = 40) -> int:
    total, channels = 0, 1
    for kernel in (5, 3, 3):
        total += channels * width * kernel + width
        channels, length = width, (length + 2 - kernel) // 2 + 1
    return total + width * length * k + k


def cnn_small_count(k: int, width: int = 16, c_in: int = 1) -> int:
    convs = c_in * width * 9 + width * width * 9 + width * 2 * width * 9
    return convs + 2 * _bn(width) + _bn(2 * width) + 2 * width * k + k


# name, options, closed-form count at K=10, published count (None: no published figure), rel. tolerance
COUNT_CASES = [
    ("resnet8", {}, he_cifar_resnet_count(8, 10), None, None),  # not in He et al.; 0.078 M quoted elsewhere is option B
    ("resnet20", {}, he_cifar_resnet_count(20, 10), 0.27e6, 0.01),  # He et al. 2016 Table 6
    ("resnet32", {}, he_cifar_resnet_count(32, 10), 0.46e6, 0.01),
    ("resnet44", {}, he_cifar_resnet_count(44, 10), 0.66e6, 0.01),
    ("resnet56", {}, he_cifar_resnet_count(56, 10), 0.85e6, 0.01),
    ("resnet110", {}, he_cifar_resnet_count(110, 10), 1.7e6, 0.02),
    ("resnet50", {}, bottleneck_resnet_count([3, 4, 6, 3], 10), 23.5e6, 0.01),  # CIFAR ResNet-50 (mukhoti2020 code)
    ("resnet50", {"pool_size": 2}, bottleneck_resnet_count([3, 4, 6, 3], 10, pool_size=2), None, None),
    ("resnet110_bottleneck", {}, bottleneck_resnet_count([3, 4, 26, 3], 10), None, None),
    ("wide_resnet26_10", {}, wide_resnet_count(10, preactivation=False), 36.5e6, 0.01),
    ("wide_resnet28_10", {}, wide_resnet_count(10, preactivation=True), 36.5e6, 0.01),  # Zagoruyko & Komodakis Table
    ("densenet121", {}, densenet_count(10), 7.0e6, 0.01),  # CIFAR DenseNet-121 as in mukhoti2020's code
    ("mlp", {}, mlp_count(10), None, None),
    ("mlp", {"in_features": 5, "hidden": 32}, mlp_count(10, 5, 32), None, None),
    ("cnn1d", {}, cnn1d_count(10), 5.2e3, 0.05),  # MNIST-1D paper: "~5 k parameters"
    ("cnn1d", {"width": 100}, cnn1d_count(10, width=100), None, None),
    ("cnn_small", {}, cnn_small_count(10), None, None),
]


@pytest.mark.parametrize(("name", "options", "exact", "published", "rel"), COUNT_CASES)
def test_parameter_count_matches_architecture_and_paper(name, options, exact, published, rel):
    with torch.device("meta"):  # counting needs no allocated weights
        count = count_parameters(build(name, 10, **options))
    assert count == exact
    if published is not None:
        assert count == pytest.approx(published, rel=rel)


def test_parameter_count_grows_with_classes_by_one_linear_row_each():
    for name in ("resnet20", "cnn1d", "densenet121"):
        small, large = build(name, 10), build(name, 100)
        in_features = last_layer(small).in_features
        assert count_parameters(large) - count_parameters(small) == 90 * (in_features + 1)


# --------------------------------------------------------------------------- registry


def test_available_partitions_names_by_task():
    classification, segmentation = available("classification"), available("segmentation")
    translation = available("translation")
    assert sorted(classification + segmentation + translation) == available()
    assert not set(classification) & set(segmentation) and not set(translation) & (set(classification) | set(segmentation))
    assert set(translation) == {"transformer-base", "transformer-small"}
    expected = {"resnet8", "resnet20", "resnet44", "resnet110", "resnet50", "resnet110_bottleneck",
                "wide_resnet26_10", "densenet121", "mlp", "cnn_small", "cnn1d"}
    assert expected <= set(classification)
    assert {"unet_small", "deeplabv3plus", "vgg19_fcn"} <= set(segmentation)


def test_unknown_name_lists_known_models():
    with pytest.raises(ValueError, match=r"unknown model 'resnet21'.*resnet20.*wide_resnet26_10"):
        build("resnet21", num_classes=10)


def test_unknown_option_is_named_with_the_accepted_ones():
    with pytest.raises(ValueError, match=r"unknown option\(s\) widht; it accepts: width, input_length"):
        build("cnn1d", 10, widht=50)


@pytest.mark.parametrize("bad", [1, 0, 2.0, True, "10"])
def test_bad_num_classes_rejected(bad):
    with pytest.raises(ValueError, match="num_classes"):
        build("mlp", bad)


@pytest.mark.parametrize(
    ("name", "options", "culprit"),
    [
        ("mlp", {"hidden": 0}, "hidden"),
        ("cnn1d", {"width": 2.5}, "width"),
        ("cnn1d", {"input_length": 2}, "input_length"),
        ("wide_resnet26_10", {"dropout": 1.5}, "dropout"),
        ("resnet50", {"pool_size": 0}, "pool_size"),
        ("resnet20", {"in_channels": -1}, "in_channels"),
    ],
)
def test_bad_option_values_name_the_option(name, options, culprit):
    with pytest.raises(ValueError, match=culprit):
        build(name, 10, **options)


def test_task_filter_rejects_unknown_task():
    with pytest.raises(ValueError, match="task"):
        available("detection")


def test_last_layer_rejects_a_model_without_classifier():
    with pytest.raises(ValueError, match="Sequential has no `classifier`"):
        last_layer(nn.Sequential(nn.Linear(3, 2)))


# --------------------------------------------------------------------------- behaviour of every classifier


# Networks of tens of millions of parameters run the slower checks on 16x16 images (they pool
# adaptively, so any size works); their 32x32 forward is covered by the shape test.
HEAVY = {"resnet50", "resnet110_bottleneck", "wide_resnet26_10", "wide_resnet28_10", "densenet121"}


def _batch(name: str, n: int = 2, *, light: bool = False) -> torch.Tensor:
    """A valid input batch: the registry's example (random floats, token ids, encoded trees)."""
    if light and name in HEAVY:
        return torch.randn(n, spec(name).sample_shape[0], 16, 16)
    return spec(name).example_input(n)


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_forward_shape_and_last_layer_is_the_final_affine_map(name):
    k = 7
    model = build(name, k).eval()
    x = _batch(name)
    with torch.no_grad():
        assert model(x).shape == (2, k)
        layer = last_layer(model)
        # tree_lstm's layer also scores the training-only neutral class; eval drops that last column.
        outputs = getattr(model, "node_classes", k)
        assert isinstance(layer, nn.Linear) and layer.out_features == outputs >= k
        # Zero the weight: the logits must then be the bias, whatever the input.
        layer.weight.zero_()
        layer.bias.copy_(torch.arange(outputs, dtype=torch.float32))
        torch.testing.assert_close(model(x), torch.arange(k, dtype=torch.float32).expand(2, k))


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_every_parameter_receives_a_gradient(name):
    model = build(name, 5).train()
    logits = model(_batch(name, n=3, light=True))
    # (N, C) logits, or (N, C, *) per-position ones (tree_lstm trains on every node): one class per sample.
    target = torch.tensor([0, 3, 4]).view(3, *[1] * (logits.ndim - 2)).expand(3, *logits.shape[2:])
    F.cross_entropy(logits, target).backward()
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]  # frozen embeddings excepted
    missing = [n for n, p in trainable if p.grad is None or not torch.isfinite(p.grad).all()]
    assert not missing
    assert last_layer(model).weight.grad.abs().sum() > 0


@pytest.mark.parametrize("name", IMAGE_CLASSIFIERS)
def test_eval_is_deterministic_and_channels_last_agrees(name):
    model = build(name, 10).eval()
    x = _batch(name, light=True)
    with torch.no_grad():
        first, second = model(x), model(x)
        assert torch.equal(first, second)
        model = model.to(memory_format=torch.channels_last)
        channels_last = model(x.contiguous(memory_format=torch.channels_last))
    # Random-init deep nets in eval mode (BN running stats at 0/1) reach large logits; compare relatively.
    scale = first.abs().max().item()
    torch.testing.assert_close(channels_last, first, rtol=1e-5, atol=1e-5 * max(scale, 1.0))


# --------------------------------------------------------------------------- architecture details


def test_option_a_shortcut_is_strided_identity_padded_with_zero_channels():
    model = build("resnet20", 10)
    block = model.stages[1][0]  # 16 -> 32 channels, 32 -> 16 px
    with torch.no_grad():
        block.bn2.weight.zero_()  # silence the residual branch: only the shortcut is left
        block.bn2.bias.zero_()
        x = torch.randn(2, 16, 32, 32)
        out = block(x)
    expected = torch.cat([x[:, :, ::2, ::2], torch.zeros(2, 16, 16, 16)], dim=1).relu()
    assert torch.equal(out, expected)
    assert sum(p.numel() for p in block.shortcut.parameters()) == 0


def test_he_resnet_initialisation():
    model = build("resnet110", 10)
    conv = model.stages[2][5].conv1  # 64 -> 64, 3x3: fan_in 576, 36 864 weights
    assert conv.weight.std().item() == pytest.approx(math.sqrt(2 / 576), rel=0.03)
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            assert torch.equal(module.weight, torch.ones_like(module.weight))
            assert torch.equal(module.bias, torch.zeros_like(module.bias))


@pytest.mark.parametrize("depth", [7, 21, 0])
def test_he_resnet_depth_must_be_6n_plus_2(depth):
    from focalcal.models.cifar_resnet import CifarResNet

    with pytest.raises(ValueError, match="depth"):
        CifarResNet(depth, 10)


def _spatial_sizes(model: nn.Module, modules: dict[str, nn.Module], x: torch.Tensor) -> dict[str, tuple]:
    sizes = {}

    def record(key):
        def hook(_module, _inputs, output):
            sizes[key] = tuple(output.shape[1:])

        return hook

    hooks = [module.register_forward_hook(record(key)) for key, module in modules.items()]
    with torch.no_grad():
        model.eval()(x)
    for hook in hooks:
        hook.remove()
    return sizes


def test_bottleneck_resnet_keeps_cifar_resolution_until_the_first_stage():
    model = build("resnet110_bottleneck", 10)
    sizes = _spatial_sizes(model, {"stem": model.maxpool, "layer3": model.layer3, "layer4": model.layer4},
                           torch.randn(1, 3, 32, 32))
    assert sizes == {"stem": (64, 32, 32), "layer3": (1024, 8, 8), "layer4": (2048, 4, 4)}
    assert len(model.layer3) == 26


def test_bottleneck_resnet_tiny_imagenet_head():
    model = build("resnet50", 200, pool_size=2).eval()
    assert last_layer(model).in_features == 4 * 2048
    with torch.no_grad():
        assert model(torch.randn(2, 3, 64, 64)).shape == (2, 200)


def test_densenet_stem_is_one_stride_one_convolution():
    model = build("densenet121", 10)
    sizes = _spatial_sizes(model, {"block1": model.features.denseblock1, "block4": model.features.denseblock4},
                           torch.randn(1, 3, 32, 32))
    assert sizes == {"block1": (64 + 6 * 32, 32, 32), "block4": (1024, 4, 4)}
    convs_before_block1 = [m for m in model.features[:4].modules() if isinstance(m, (nn.Conv2d, nn.BatchNorm2d))]
    assert len(convs_before_block1) == 1


def test_wide_resnet_flavours_share_their_convolutions():
    post, pre = build("wide_resnet26_10", 10), build("wide_resnet28_10", 10)

    def conv_shapes(model):
        return [tuple(m.weight.shape) for m in model.modules() if isinstance(m, nn.Conv2d)]

    assert conv_shapes(post) == conv_shapes(pre)
    assert [len(stage) for stage in post.stages] == [4, 4, 4]
    assert [stage[0].conv1.out_channels for stage in post.stages] == [160, 320, 640]


def test_wide_resnet_dropout_only_acts_in_training():
    model = build("wide_resnet26_10", 10, widen_factor=1, dropout=0.3)
    x = torch.randn(4, 3, 32, 32)
    with torch.no_grad():
        model.train()
        assert not torch.equal(model(x), model(x))
        model.eval()
        assert torch.equal(model(x), model(x))


# --------------------------------------------------------------------------- small models and their inputs


def test_mlp_accepts_a_batch_of_scalars():
    model = build("mlp", 3).eval()
    x = torch.linspace(-2, 2, 11)
    torch.testing.assert_close(model(x), model(x[:, None]), rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"\(N, 1\)"):
        model(torch.randn(4, 2))


def test_cnn_small_accepts_flat_digits():
    model = build("cnn_small", 10).eval()
    images = torch.randn(5, 1, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(model(images.reshape(5, 64)), model(images), rtol=0, atol=0)
    with pytest.raises(ValueError, match="SmallCNN expects"):
        model(torch.randn(5, 3, 8, 8))


def test_cnn1d_accepts_both_layouts_and_rejects_wrong_length():
    model = build("cnn1d", 10).eval()
    x = torch.randn(6, 40)
    with torch.no_grad():
        torch.testing.assert_close(model(x), model(x[:, None, :]), rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"\(N, 40\) or \(N, 1, 40\)"):
        model(torch.randn(6, 50))
    longer = build("cnn1d", 10, input_length=50)
    assert longer(torch.randn(2, 50)).shape == (2, 10)


def test_float64_models_work():
    model = build("cnn1d", 4).double().eval()
    assert model(torch.randn(3, 40, dtype=torch.float64)).dtype == torch.float64


def test_registry_and_trainer_import_without_torchvision_or_sklearn():
    """Every workflow job imports these; torchvision (~1.5 s) and sklearn (~1 s) load only when
    a model or calibrator that needs them is built."""
    import subprocess
    import sys

    code = ("import sys, focalcal.training, focalcal.calibration, focalcal.models as m; "
            "assert 'torchvision' not in sys.modules and 'sklearn' not in sys.modules; "
            "m.build('unet_small', num_classes=2); assert 'torchvision' not in sys.modules; "
            "m.build('resnet50', num_classes=10); assert 'torchvision' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
