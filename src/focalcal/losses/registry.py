"""Build a loss from a config: ``build({"name": "focal", "gamma": 3})``.

Names are those :mod:`focalcal.catalog` declares: each loss's class, imported when first
built, and the papers' named variants (FLSD-53, FLSc-531, …) as presets of them. An unknown
name or parameter is a ValueError that lists what exists.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping

from focalcal import catalog

from ._base import Loss


class _Declared(Mapping):
    """A read-only view of the catalog's losses: name -> class (``presets=False``) or name ->
    (preset loss, fixed parameters) (``presets=True``), current with every declaration."""

    def __init__(self, presets: bool):
        self._presets = presets

    def _names(self) -> list[str]:
        return [name for name, entry in catalog.LOSSES.items() if (entry.preset is not None) == self._presets]

    def __getitem__(self, name):
        if name not in self._names():
            raise KeyError(name)
        return catalog.LOSSES[name].preset if self._presets else loss_class(name)

    def __iter__(self):
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())


LOSSES: Mapping[str, type[Loss]] = _Declared(presets=False)
# The papers' named variants: (loss name, parameters the preset fixes).
PRESETS: Mapping[str, tuple[str, dict]] = _Declared(presets=True)


def register(cls: type[Loss]) -> type[Loss]:
    """Declare a loss class under its ``name`` (usable as a class decorator): the run-time
    form of a :mod:`focalcal.catalog` entry; ``build`` then takes it."""
    if not (isinstance(cls, type) and issubclass(cls, Loss)) or cls is Loss:
        raise ValueError(f"a loss must be a subclass of focalcal.losses.Loss, got {cls!r}")
    if not isinstance(cls.name, str) or not cls.name or cls.name == Loss.name:
        raise ValueError(f"{cls.__name__} needs its own class attribute `name` (the config name)")
    catalog.declare(cls.name, catalog.Loss(cls, label=cls.name))
    return cls


def loss_class(name: str) -> type[Loss]:
    """The class the catalog declares for loss ``name`` (not a preset)."""
    entry = catalog.loss(name) if isinstance(name, str) else None
    if entry is None or entry.builder is None:
        raise ValueError(f"unknown loss {name!r}; available: {', '.join(available())}")
    cls = catalog.resolve(entry.builder)
    if not (isinstance(cls, type) and issubclass(cls, Loss)) or cls.name != name:
        raise ValueError(f"the catalog's loss {name!r} names {entry.builder!r}, which is not a focalcal.losses.Loss "
                         f"subclass with name = {name!r}")
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
        raise TypeError(f"a loss config must be a mapping with a 'name', got {type(config).__name__}")
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
    if isinstance(name, str) and name in catalog.LOSSES:
        preset = catalog.LOSSES[name].preset
        if preset is None:
            return loss_class(name), {}
        base, fixed = preset
        return loss_class(base), dict(fixed)
    raise ValueError(f"unknown loss {name!r}; available: {', '.join(available())}")
