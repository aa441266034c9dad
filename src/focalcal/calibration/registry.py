"""Calibrators by name, for configs: ``build({"name": "temperature_scaling", "objective": "nll"})``.

Names are those :mod:`focalcal.catalog` declares; each class is imported when first built.
"""

from __future__ import annotations

from collections.abc import Mapping

from focalcal import catalog
from focalcal.calibration._base import Calibrator


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
    """Declare a calibrator class under its ``name`` (usable as a class decorator): the run-time
    form of a :mod:`focalcal.catalog` entry; ``build`` and ``Calibrator.from_dict`` then take it."""
    if not (isinstance(cls, type) and issubclass(cls, Calibrator)) or cls is Calibrator:
        raise ValueError(f"a calibrator must be a subclass of focalcal.calibration.Calibrator, got {cls!r}")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name or name == getattr(Calibrator, "name", None):
        raise ValueError(f"{cls.__name__} needs its own class attribute `name` (the config name)")
    catalog.declare(name, catalog.Calibrator(cls))
    return cls


def calibrator_class(name: str) -> type[Calibrator]:
    """The calibrator class the catalog declares under ``name``."""
    try:
        entry = catalog.CALIBRATORS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown calibrator {name!r}; available: {sorted(catalog.CALIBRATORS)}") from None
    cls = catalog.resolve(entry.builder)
    if not (isinstance(cls, type) and issubclass(cls, Calibrator)) or cls.name != name:
        raise ValueError(f"the catalog's calibrator {name!r} names {entry.builder!r}, which is not a "
                         f"focalcal.calibration.Calibrator subclass with name = {name!r}")
    return cls


def build(config: dict) -> Calibrator:
    """An unfitted calibrator from ``{"name": ..., **constructor arguments}``."""
    if not isinstance(config, dict) or "name" not in config:
        raise ValueError(f"calibrator config must be a dict with a 'name' key, got {config!r}")
    params = {key: value for key, value in config.items() if key != "name"}
    cls = calibrator_class(config["name"])
    allowed = cls._param_names()
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(f"unknown parameter(s) {unknown} for calibrator {config['name']!r}; allowed: {allowed}")
    return cls(**params)


def build_checked(config: dict) -> Calibrator:
    """``build(config)`` with the parameters' values checked now, not at ``fit``.

    Calibrators check their parameters when fitted (as scikit-learn's do); a workflow config
    is checked when it is parsed (focalcal.pipeline.entries), long before any fit.
    """
    calibrator = build(config)
    calibrator._validate_params()
    return calibrator
