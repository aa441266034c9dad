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
    form of a :mod:`focalcal.catalog` entry; ``build`` then takes it.

    ```python
    @register
    class NegativeLogLikelihood(Loss):
        name = "negative_log_likelihood"

        def elementwise(self, logits, index):
            return -torch.log_softmax(logits, dim=1).gather(1, index)

    loss = build({"name": "negative_log_likelihood", "reduction": "sum"})
    ```

    Args:
        cls: a subclass of :class:`Loss` with its own class attribute ``name``.

    Returns:
        ``cls`` itself.

    Raises:
        ValueError: if ``cls`` is not a ``Loss`` subclass or has no ``name`` of its own.

    Examples:
        A loss needs its own config name before it can be declared:

        >>> from focalcal.losses import Loss, register
        >>> class Unnamed(Loss):
        ...     pass
        >>> register(Unnamed)
        Traceback (most recent call last):
            ...
        ValueError: Unnamed needs its own class attribute `name` (the config name)
    """
    if not (isinstance(cls, type) and issubclass(cls, Loss)) or cls is Loss:
        raise ValueError(f"a loss must be a subclass of focalcal.losses.Loss, got {cls!r}")
    if not isinstance(cls.name, str) or not cls.name or cls.name == Loss.name:
        raise ValueError(f"{cls.__name__} needs its own class attribute `name` (the config name)")
    catalog.declare(cls.name, catalog.Loss(cls, label=cls.name))
    return cls


def loss_class(name: str) -> type[Loss]:
    """The class the catalog declares for loss ``name`` (not a preset).

    Args:
        name: a loss's config name, e.g. ``"focal"``.

    Returns:
        The :class:`Loss` subclass, imported on first use.

    Raises:
        ValueError: if ``name`` is no loss (presets included) or the catalog's entry is not a
            ``Loss`` subclass of that name.

    Examples:
        >>> from focalcal.losses import loss_class
        >>> loss_class("focal").__name__
        'FocalLoss'
    """
    entry = catalog.loss(name) if isinstance(name, str) else None
    if entry is None or entry.builder is None:
        raise ValueError(f"unknown loss {name!r}; available: {', '.join(available())}")
    cls = catalog.resolve(entry.builder)
    if not (isinstance(cls, type) and issubclass(cls, Loss)) or cls.name != name:
        raise ValueError(f"the catalog's loss {name!r} names {entry.builder!r}, which is not a focalcal.losses.Loss "
                         f"subclass with name = {name!r}")
    return cls


def available() -> list[str]:
    """Every name ``build`` accepts: the losses, then the presets.

    Returns:
        The loss names sorted, followed by the preset names sorted.

    Examples:
        >>> from focalcal.losses import available
        >>> "focal" in available(), "flsd53" in available()
        (True, True)
    """
    return sorted(LOSSES) + sorted(PRESETS)


def parameters(name: str) -> dict[str, object]:
    """The parameters ``name`` accepts, with their defaults (a preset's fixed ones left out).

    Args:
        name: a loss or preset name, one of :func:`available`.

    Returns:
        Parameter name -> default, in the constructor's order.

    Raises:
        ValueError: if ``name`` is unknown.

    Examples:
        >>> from focalcal.losses import parameters
        >>> parameters("flsd53")
        {'reduction': 'mean', 'ignore_index': None}
        >>> list(parameters("focal"))
        ['gamma', 'alpha', 'smoothing', 'convention', 'reduction', 'ignore_index']
    """
    cls, fixed = _resolve(name)
    signature = inspect.signature(cls.__init__)
    return {p.name: p.default for p in signature.parameters.values()
            if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in fixed}


def build(config: Mapping[str, object]) -> Loss:
    """A loss module from ``{"name": ..., **parameters}``.

    Args:
        config: the loss or preset name under ``"name"`` and any of its :func:`parameters`.

    Returns:
        The loss module.

    Raises:
        TypeError: if ``config`` is not a mapping.
        ValueError: if the name is missing or unknown, or a parameter is not one the loss
            accepts (the message lists what exists), or a value is out of range.

    Examples:
        >>> from focalcal.losses import build
        >>> build({"name": "focal", "gamma": 3})
        FocalLoss(gamma=3.0, alpha=None, smoothing=0.0, convention='wrong_classes', reduction='mean', ignore_index=None)
        >>> build({"name": "flsd53"}).gammas
        (5.0, 3.0)
    """
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
