"""Models by name: ``build("resnet20", num_classes=10)``.

Naming convention: lower case, the architecture then its depth/size, parts joined by an
underscore only where two numbers would otherwise touch or a variant needs saying
("resnet110" is He et al.'s CIFAR net, "resnet110_bottleneck" mukhoti2020's; "wide_resnet26_10").

Every factory takes ``num_classes`` and keyword-only options; ``build`` rejects an option
the factory does not know, by name, instead of letting it be silently ignored. Each entry
also records its task (classification or segmentation) and the shape of one input sample
at its default options, so a caller (the trainer, the tests) can make a dummy batch:
``spec(name).example_input(n)``. That is ``torch.randn(n, *sample_shape)`` unless the entry
registers an ``example`` of its own: the text models take integer token ids (and the
Tree-LSTM an encoded tree), for which random floats are no valid input.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from .cifar_resnet import CifarResNet
from .global_pooling_cnn import GlobalPoolingCNN, example_documents
from .small import CNN1D, MLP, SmallCNN
from .tree_lstm import BinaryTreeLSTM, example_trees
from .unet import UNet
from .wide_resnet import WideResNet

# The torchvision-based models (.torchvision_cifar, .segmentation) are imported by their
# factories: importing torchvision costs ~1.5 s, paid by every workflow job otherwise.

TASKS = ("classification", "segmentation")


@dataclass(frozen=True)
class ModelSpec:
    """A registered model: how to build it and what one input sample looks like."""

    name: str
    factory: Callable[..., nn.Module]
    task: str
    sample_shape: tuple[int, ...]
    summary: str
    example: Callable[..., torch.Tensor] | None = None

    def options(self) -> list[str]:
        """The keyword options ``factory`` accepts besides ``num_classes``."""
        parameters = inspect.signature(self.factory).parameters.values()
        return [p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY]

    def example_input(self, n: int = 2, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """A valid batch of ``n`` inputs of shape (n, *sample_shape) for the default options."""
        if self.example is not None:
            return self.example(n, generator=generator)
        return torch.randn(n, *self.sample_shape, generator=generator)


_REGISTRY: dict[str, ModelSpec] = {}


def register(
    name: str,
    factory: Callable[..., nn.Module],
    *,
    task: str,
    sample_shape: tuple[int, ...],
    summary: str,
    example: Callable[..., torch.Tensor] | None = None,
) -> None:
    """Add a model under ``name``; ``factory(num_classes, **options)`` must return an nn.Module.

    ``example(n, generator=None)``, if given, returns a valid (n, *sample_shape) input batch
    (for models whose input is not a float tensor)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"model name must be a non-empty string, got {name!r}")
    if name in _REGISTRY:
        raise ValueError(f"model name {name!r} is already registered")
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    _REGISTRY[name] = ModelSpec(name, factory, task, tuple(sample_shape), summary, example)


def available(task: str | None = None) -> list[str]:
    """Sorted names of the registered models, optionally only those of one ``task``."""
    if task is not None and task not in TASKS:
        raise ValueError(f"task must be one of {TASKS} or None, got {task!r}")
    return sorted(name for name, spec in _REGISTRY.items() if task is None or spec.task == task)


def spec(name: str) -> ModelSpec:
    """The registry entry of ``name``; an unknown name raises ValueError listing the known ones."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(available())}")
    return _REGISTRY[name]


def build(name: str, num_classes: int, **options) -> nn.Module:
    """A freshly initialised model ``name`` with ``num_classes`` outputs (per pixel for segmentation)."""
    entry = spec(name)
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
        raise ValueError(f"num_classes must be an integer >= 2, got {num_classes!r}")
    accepted = entry.options()
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ValueError(
            f"model {name!r} got unknown option(s) {', '.join(unknown)}; it accepts: {', '.join(accepted) or 'none'}"
        )
    return entry.factory(num_classes, **options)


def last_layer(model: nn.Module) -> nn.Module:
    """The layer that maps features to logits (``model.classifier``).

    An ``nn.Linear`` for classifiers, a 1x1 ``nn.Conv2d`` (a per-pixel linear map) for the
    segmentation nets. mukhoti2020 Fig. 3 tracks the norm of its weight during training.
    """
    layer = getattr(model, "classifier", None)
    is_pixelwise_linear = isinstance(layer, nn.Conv2d) and layer.kernel_size == (1, 1)
    if not (isinstance(layer, nn.Linear) or is_pixelwise_linear):
        raise ValueError(
            f"{type(model).__name__} has no `classifier` attribute holding an nn.Linear or 1x1 nn.Conv2d "
            f"(found {type(layer).__name__}); focalcal models expose their last layer there"
        )
    return layer


def count_parameters(model: nn.Module, *, trainable_only: bool = False) -> int:
    """Number of scalar parameters (shared parameters counted once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


# --------------------------------------------------------------------------- factories


def _he_cifar_resnet(depth: int) -> Callable[..., nn.Module]:
    def factory(num_classes: int, *, in_channels: int = 3) -> nn.Module:
        return CifarResNet(depth, num_classes, in_channels=in_channels)

    factory.__name__ = f"resnet{depth}"
    factory.__doc__ = f"He et al. 2016 CIFAR ResNet-{depth} (basic blocks 16/32/64, option-A shortcuts)."
    return factory


def _bottleneck_resnet(layers: list[int]) -> Callable[..., nn.Module]:
    def factory(num_classes: int, *, in_channels: int = 3, pool_size: int = 1) -> nn.Module:
        from .torchvision_cifar import CifarBottleneckResNet

        return CifarBottleneckResNet(layers, num_classes, in_channels=in_channels, pool_size=pool_size)

    return factory


def _wide_resnet(preactivation: bool) -> Callable[..., nn.Module]:
    def factory(num_classes: int, *, widen_factor: int = 10, dropout: float = 0.0, in_channels: int = 3) -> nn.Module:
        return WideResNet(
            num_classes,
            blocks_per_stage=4,
            widen_factor=widen_factor,
            preactivation=preactivation,
            dropout=dropout,
            in_channels=in_channels,
        )

    return factory


def _densenet121(num_classes: int, *, in_channels: int = 3) -> nn.Module:
    from .torchvision_cifar import CifarDenseNet

    return CifarDenseNet(num_classes, in_channels=in_channels)


def _mlp(num_classes: int, *, in_features: int = 1, hidden: int = 64) -> nn.Module:
    return MLP(num_classes, in_features=in_features, hidden=hidden)


def _cnn_small(num_classes: int, *, in_channels: int = 1, width: int = 16, image_size: int = 8) -> nn.Module:
    return SmallCNN(num_classes, in_channels=in_channels, width=width, image_size=image_size)


def _cnn1d(num_classes: int, *, width: int = 25, input_length: int = 40) -> nn.Module:
    return CNN1D(num_classes, width=width, input_length=input_length)


def _unet_small(num_classes: int, *, in_channels: int = 3, base_channels: int = 16, depth: int = 3) -> nn.Module:
    return UNet(num_classes, in_channels=in_channels, base_channels=base_channels, depth=depth)


def _deeplabv3plus(
    num_classes: int,
    *,
    backbone: str = "resnet18",
    output_stride: int = 16,
    in_channels: int = 3,
    pretrained: bool = False,
) -> nn.Module:
    from .segmentation import DeepLabV3Plus

    return DeepLabV3Plus(
        num_classes, backbone=backbone, output_stride=output_stride, in_channels=in_channels, pretrained=pretrained
    )


def _vgg19_fcn(
    num_classes: int, *, head_channels: int = 4096, in_channels: int = 3, pretrained: bool = False
) -> nn.Module:
    from .segmentation import VGG19FCN

    return VGG19FCN(num_classes, head_channels=head_channels, in_channels=in_channels, pretrained=pretrained)


_CIFAR = (3, 32, 32)
for _depth in (8, 20, 32, 44, 56, 110):
    register(
        f"resnet{_depth}",
        _he_cifar_resnet(_depth),
        task="classification",
        sample_shape=_CIFAR,
        summary=f"He et al. 2016 CIFAR ResNet-{_depth}, basic blocks, option-A shortcuts (charoenphakdee2021)",
    )
register(
    "resnet50",
    _bottleneck_resnet([3, 4, 6, 3]),
    task="classification",
    sample_shape=_CIFAR,
    summary="torchvision bottleneck ResNet-50, 3x3 stride-1 stem, no max-pool (mukhoti2020)",
)
register(
    "resnet110_bottleneck",
    _bottleneck_resnet([3, 4, 26, 3]),
    task="classification",
    sample_shape=_CIFAR,
    summary="mukhoti2020's 'ResNet-110': torchvision bottleneck blocks [3, 4, 26, 3], CIFAR stem",
)
register(
    "wide_resnet26_10",
    _wide_resnet(preactivation=False),
    task="classification",
    sample_shape=_CIFAR,
    summary="mukhoti2020's WRN-26-10: 4 post-activation blocks per stage, widths 160/320/640",
)
register(
    "wide_resnet28_10",
    _wide_resnet(preactivation=True),
    task="classification",
    sample_shape=_CIFAR,
    summary="Zagoruyko & Komodakis' WRN-28-10: 4 pre-activation blocks per stage, widths 160/320/640",
)
register(
    "densenet121",
    _densenet121,
    task="classification",
    sample_shape=_CIFAR,
    summary="torchvision DenseNet-121 (growth 32), 3x3 stride-1 stem, no stem BN/pool (mukhoti2020)",
)
register("mlp", _mlp, task="classification", sample_shape=(1,), summary="three-layer MLP (charoenphakdee2021 §5.2)")
register("cnn_small", _cnn_small, task="classification", sample_shape=(1, 8, 8), summary="3-conv CNN for 8x8 digits")
register("cnn1d", _cnn1d, task="classification", sample_shape=(1, 40), summary="MNIST-1D 1-D CNN (Greydanus 2020)")
register("unet_small", _unet_small, task="segmentation", sample_shape=(3, 64, 64), summary="small U-Net for CPU runs")
register(
    "deeplabv3plus",
    _deeplabv3plus,
    task="segmentation",
    sample_shape=(3, 64, 64),
    summary="DeepLabV3+ on a torchvision ResNet-18, output stride 16 (hossain2021)",
)
register(
    "vgg19_fcn",
    _vgg19_fcn,
    task="segmentation",
    sample_shape=(3, 64, 64),
    summary="FCN-8s on torchvision VGG19 features (hossain2021)",
)


# The text models' classes are their factories: same signature (num_classes, *, options), defaults
# from the released code (see each module's docstring).
register(
    "global_pooling_cnn",
    GlobalPoolingCNN,
    task="classification",
    sample_shape=(1000,),
    summary="mukhoti2020's 20 Newsgroups Global Pooling CNN: 3 x Conv1D(128, 5), global max pool, dense 128",
    example=example_documents,
)
register(
    "tree_lstm",
    BinaryTreeLSTM,
    task="classification",
    sample_shape=(37, 4),
    summary="mukhoti2020's SST binary constituency Tree-LSTM (Tai et al. 2015), memory 150; root logits in eval",
    example=example_trees,
)
