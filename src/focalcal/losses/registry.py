"""Build a loss from a config: ``build({"name": "focal", "gamma": 3})``.

Names are the module's ``name`` attributes; the papers' named variants (FLSD-53, FLSc-531, …)
are presets of them. An unknown name or parameter is a ValueError that lists what exists.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping

from ._base import Loss
from .adafocal import AdaFocalLoss
from .brier import BrierLoss
from .cross_entropy import CrossEntropyLoss
from .focal import FocalLoss, SampleDependentFocalLoss, ScheduledFocalLoss
from .mmce import MMCELoss
from .segmentation import (DualCrossEntropyLoss, DualFocalLoss, GeneralizedDiceLoss,
                           WeightedCrossEntropyLoss)
from .smoothing import LabelSmoothingLoss

LOSSES: dict[str, type[Loss]] = {cls.name: cls for cls in (
    CrossEntropyLoss, FocalLoss, LabelSmoothingLoss, SampleDependentFocalLoss, ScheduledFocalLoss,
    BrierLoss, MMCELoss, AdaFocalLoss, WeightedCrossEntropyLoss, DualCrossEntropyLoss, DualFocalLoss,
    GeneralizedDiceLoss)}

# The papers' named variants: (loss name, parameters the preset fixes).
PRESETS: dict[str, tuple[str, dict]] = {
    "flsd53": ("focal_sample_dependent", {"thresholds": (0.2,), "gammas": (5.0, 3.0)}),
    "flsd532": ("focal_sample_dependent", {"thresholds": (0.2, 0.5), "gammas": (5.0, 3.0, 2.0)}),
    "flsc531": ("focal_scheduled", {"milestones": (2 / 7, 5 / 7), "gammas": (5.0, 3.0, 1.0)}),
    "flsc532": ("focal_scheduled", {"milestones": (2 / 7, 5 / 7), "gammas": (5.0, 3.0, 2.0)}),
}


def register(cls: type[Loss]) -> type[Loss]:
    """Add a loss class under its ``name`` (usable as a class decorator); ``build`` then takes it."""
    if not (isinstance(cls, type) and issubclass(cls, Loss)) or cls is Loss:
        raise ValueError(f"a loss must be a subclass of focalcal.losses.Loss, got {cls!r}")
    if not isinstance(cls.name, str) or not cls.name or cls.name == Loss.name:
        raise ValueError(f"{cls.__name__} needs its own class attribute `name` (the config name)")
    if cls.name in LOSSES or cls.name in PRESETS:
        raise ValueError(f"loss name {cls.name!r} is already registered")
    LOSSES[cls.name] = cls
    return cls


def available() -> list[str]:
    """Every name ``build`` accepts: the losses, then the presets."""
    return sorted(LOSSES) + sorted(PRESETS)


def parameters(name: str) -> dict:
    """The parameters ``name`` accepts, with their defaults (a preset's fixed ones left out)."""
    cls, fixed = _resolve(name)
    signature = inspect.signature(cls.__init__)
    return {p.name: p.default for p in signature.parameters.values()
            if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in fixed}


def build(config: Mapping) -> Loss:
    """A loss module from ``{"name": ..., **parameters}``."""
    if not isinstance(config, Mapping):
        raise ValueError(f"a loss config must be a mapping with a 'name', got {type(config).__name__}")
    if "name" not in config:
        raise ValueError(f"a loss config needs a 'name'; available: {', '.join(available())}")
    options = dict(config)
    name = options.pop("name")
    cls, fixed = _resolve(name)
    accepted = parameters(name)
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        fixed_note = f" ({name} fixes {', '.join(sorted(fixed))})" if set(unknown) & set(fixed) else ""
        raise ValueError(f"unknown parameter(s) {unknown} for loss {name!r}{fixed_note}; "
                         f"accepted: {', '.join(accepted) or 'none'}")
    return cls(**fixed, **options)


def _resolve(name) -> tuple[type[Loss], dict]:
    if isinstance(name, str) and name in LOSSES:
        return LOSSES[name], {}
    if isinstance(name, str) and name in PRESETS:
        base, fixed = PRESETS[name]
        return LOSSES[base], dict(fixed)
    raise ValueError(f"unknown loss {name!r}; available: {', '.join(available())}")
