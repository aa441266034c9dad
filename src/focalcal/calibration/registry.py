"""Calibrators by name, for configs: ``build({"name": "temperature_scaling", "objective": "nll"})``.

Names are those :mod:`focalcal.catalog` declares; each class is imported when first built.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from focalcal import catalog
from focalcal.calibration._base import Calibrator, calibrator_class


class _Declared(Mapping):
    """A read-only view of the catalog's calibrators, name -> class, current with every declaration."""

    def __getitem__(self, name):
        if name not in catalog.CALIBRATORS:
            raise KeyError(name)
        return calibrator_class(name)

    def __iter__(self):
        return iter(list(catalog.CALIBRATORS))

    def __len__(self) -> int:
        return len(catalog.CALIBRATORS)


CALIBRATORS: Mapping[str, type[Calibrator]] = _Declared()


def register(cls: type[Calibrator]) -> type[Calibrator]:
    """Declare a calibrator class under its ``name`` (usable as a class decorator).

    The run-time form of a :mod:`focalcal.catalog` entry: ``build`` and ``Calibrator.from_dict``
    then take the name, in this process only (the workflow reads the catalog's entries).

    Args:
        cls: A subclass of :class:`~focalcal.calibration.Calibrator` with its own class
            attribute ``name``.

    Returns:
        ``cls`` itself, unchanged.

    Raises:
        ValueError: If ``cls`` is not a ``Calibrator`` subclass, has no ``name`` of its own, or
            its name is already declared.

    Examples:
        >>> import numpy as np
        >>> from scipy.special import softmax
        >>> from focalcal import catalog
        >>> from focalcal.calibration import Calibrator, build, register
        >>> @register
        ... class Sharpen(Calibrator):
        ...     name = "sharpen_twice"
        ...     def _fit(self, logits, labels):
        ...         pass
        ...     def _transform(self, logits):
        ...         return softmax(2 * logits, axis=1)
        >>> build({"name": "sharpen_twice"}).fit([[1.0, 0.0]], [0]).transform([[1.0, 0.0]]).round(4).tolist()
        [[0.8808, 0.1192]]
        >>> del catalog.CALIBRATORS["sharpen_twice"]  # undeclare it: doctests share one process
    """
    if not (isinstance(cls, type) and issubclass(cls, Calibrator)) or cls is Calibrator:
        raise ValueError(f"a calibrator must be a subclass of focalcal.calibration.Calibrator, got {cls!r}")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name or name == getattr(Calibrator, "name", None):
        raise ValueError(f"{cls.__name__} needs its own class attribute `name` (the config name)")
    catalog.declare(name, catalog.Calibrator(cls))
    return cls


def build(config: dict[str, Any]) -> Calibrator:
    """An unfitted calibrator from ``{"name": ..., **constructor arguments}``.

    The arguments' values are checked when the calibrator is fitted (:func:`build_checked`
    checks them at once).

    Args:
        config: Dict with the calibrator's ``"name"`` and any of its constructor arguments, as a
            workflow config's ``calibrators:`` table gives them.

    Returns:
        A new, unfitted calibrator.

    Raises:
        ValueError: If ``"name"`` is missing or not declared, or an argument is not one of the
            class's constructor arguments.

    Examples:
        >>> from focalcal.calibration import build
        >>> calibrator = build({"name": "temperature_scaling", "objective": "ece"})
        >>> type(calibrator).__name__, calibrator.objective
        ('TemperatureScaling', 'ece')
    """
    if not isinstance(config, dict) or "name" not in config:
        raise ValueError(f"calibrator config must be a dict with a 'name' key, got {config!r}")
    params = {key: value for key, value in config.items() if key != "name"}
    cls = calibrator_class(config["name"])
    allowed = cls._param_names()
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(f"unknown parameter(s) {unknown} for calibrator {config['name']!r}; allowed: {allowed}")
    return cls(**params)


def build_checked(config: dict[str, Any]) -> Calibrator:
    """``build(config)`` with the parameters' values checked now, not at ``fit``.

    Calibrators check their parameters when fitted (as scikit-learn's do); a workflow config
    is checked when it is parsed (focalcal.pipeline.entries), long before any fit.

    Args:
        config: Dict with the calibrator's ``"name"`` and any of its constructor arguments.

    Returns:
        A new, unfitted calibrator whose arguments meet their constraints.

    Raises:
        ValueError: As :func:`build` does, or if an argument's value breaks its constraint.

    Examples:
        >>> from focalcal.calibration.registry import build_checked
        >>> build_checked({"name": "psi", "gamma": -2.0})
        Traceback (most recent call last):
        ...
        focalcal.core.constraints.InvalidParameterError: PsiCalibration: gamma must be a real number in (-1, inf), got -2.0
    """
    calibrator = build(config)
    calibrator._validate_params()
    return calibrator
