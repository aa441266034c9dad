"""Models by name: ``build("resnet20", num_classes=10)``.

Naming convention: lower case, the architecture then its depth/size, parts joined by an
underscore only where two numbers would otherwise touch or a variant needs saying
("resnet110" is He et al.'s CIFAR net, "resnet110_bottleneck" mukhoti2020's; "wide_resnet26_10").

The names, their factories (below, or the text models' classes), tasks and input shapes are
declared in :mod:`focalcal.catalog`. Every factory takes ``num_classes`` and keyword-only
options; ``build`` rejects an option the factory does not know, by name, instead of letting
it be silently ignored. The shape of one input sample at the default options lets a caller
(the trainer, the tests) make a dummy batch: ``spec(name).example_input(n)``. That is
``torch.randn(n, *sample_shape)`` unless the entry declares an ``example`` of its own: the
text models take integer token ids (and the Tree-LSTM an encoded tree), for which random
floats are no valid input.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from focalcal import catalog

from .cifar_resnet import CifarResNet
from .small import CNN1D, MLP, SmallCNN
from .unet import UNet
from .wide_resnet import WideResNet

# The torchvision-based models (.torchvision_cifar, .segmentation) are imported by their
# factories: importing torchvision costs CPU every workflow job would pay otherwise
# (``python -m bench workflow`` counts each job's CPU).

TASKS = catalog.TASKS


@dataclass(frozen=True)
class ModelSpec:
    """A declared model, its factory imported: how to build it and what one input sample looks like."""

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


def register(
    name: str,
    factory: Callable[..., nn.Module],
    *,
    task: str,
    sample_shape: tuple[int, ...],
    summary: str,
    example: Callable[..., torch.Tensor] | None = None,
) -> None:
    """Declare a model under ``name`` (the run-time form of a :mod:`focalcal.catalog` entry);
    ``factory(num_classes, **options)`` must return an nn.Module.

    ``example(n, generator=None)``, if given, returns a valid (n, *sample_shape) input batch
    (for models whose input is not a float tensor)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"model name must be a non-empty string, got {name!r}")
    catalog.declare(name, catalog.Model(task=task, factory=factory, sample_shape=tuple(sample_shape), summary=summary,
                                        example=example))


def available(task: str | None = None) -> list[str]:
    """Sorted names of the declared models, optionally only those of one ``task``."""
    if task is not None and task not in TASKS:
        raise ValueError(f"task must be one of {TASKS} or None, got {task!r}")
    return sorted(name for name, entry in catalog.MODELS.items() if task is None or entry.task == task)


def spec(name: str) -> ModelSpec:
    """The catalog entry of ``name``; an unknown name raises ValueError listing the known ones."""
    if not isinstance(name, str) or name not in catalog.MODELS:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(available())}")
    entry = catalog.MODELS[name]
    example = None if entry.example is None else catalog.resolve(entry.example)
    return ModelSpec(name, catalog.resolve(entry.factory), entry.task, tuple(entry.sample_shape), entry.summary, example)


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
# What focalcal.catalog's model entries name.


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


def densenet121(num_classes: int, *, in_channels: int = 3) -> nn.Module:
    from .torchvision_cifar import CifarDenseNet

    return CifarDenseNet(num_classes, in_channels=in_channels)


def mlp(num_classes: int, *, in_features: int = 1, hidden: int = 64) -> nn.Module:
    return MLP(num_classes, in_features=in_features, hidden=hidden)


def cnn_small(num_classes: int, *, in_channels: int = 1, width: int = 16, image_size: int = 8) -> nn.Module:
    return SmallCNN(num_classes, in_channels=in_channels, width=width, image_size=image_size)


def cnn1d(num_classes: int, *, width: int = 25, input_length: int = 40) -> nn.Module:
    return CNN1D(num_classes, width=width, input_length=input_length)


def unet_small(num_classes: int, *, in_channels: int = 3, base_channels: int = 16, depth: int = 3) -> nn.Module:
    return UNet(num_classes, in_channels=in_channels, base_channels=base_channels, depth=depth)


def deeplabv3plus(
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


def vgg19_fcn(
    num_classes: int, *, head_channels: int = 4096, in_channels: int = 3, pretrained: bool = False
) -> nn.Module:
    from .segmentation import VGG19FCN

    return VGG19FCN(num_classes, head_channels=head_channels, in_channels=in_channels, pretrained=pretrained)


def transformer_base(
    num_classes: int,
    *,
    max_length: int | None = None,
    dropout: float | None = None,
    attention_dropout: float | None = None,
    activation_dropout: float | None = None,
) -> nn.Module:
    """Vaswani et al. 2017's base Transformer over a shared vocabulary of ``num_classes`` pieces
    (``max_length``: the longest sequence it embeds; each option None: the builder's)."""
    from .transformer import transformer_base as build

    return build(num_classes, **_given(max_length, dropout, attention_dropout, activation_dropout))


def transformer_small(
    num_classes: int,
    *,
    max_length: int | None = None,
    dropout: float | None = None,
    attention_dropout: float | None = None,
    activation_dropout: float | None = None,
) -> nn.Module:
    """The stand-in's small Transformer over a shared vocabulary of ``num_classes`` pieces."""
    from .transformer import transformer_small as build

    return build(num_classes, **_given(max_length, dropout, attention_dropout, activation_dropout))


def _given(max_length, dropout, attention_dropout, activation_dropout) -> dict:
    """A Transformer builder's options that are set (not None), so that its own defaults hold for the rest."""
    options = {
        "max_length": max_length,
        "dropout": dropout,
        "attention_dropout": attention_dropout,
        "activation_dropout": activation_dropout,
    }
    return {name: value for name, value in options.items() if value is not None}


resnet8, resnet20, resnet32, resnet44, resnet56, resnet110 = map(_he_cifar_resnet, (8, 20, 32, 44, 56, 110))
resnet50 = _bottleneck_resnet([3, 4, 6, 3])
resnet110_bottleneck = _bottleneck_resnet([3, 4, 26, 3])
wide_resnet26_10 = _wide_resnet(preactivation=False)
wide_resnet28_10 = _wide_resnet(preactivation=True)
