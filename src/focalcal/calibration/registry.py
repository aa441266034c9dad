"""Calibrators by name, for configs: ``build({"name": "temperature_scaling", "objective": "nll"})``."""

from __future__ import annotations

from focalcal.calibration._base import Calibrator
from focalcal.calibration.binning import HistogramBinning, IsotonicCalibration
from focalcal.calibration.fixed_maps import IdentityCalibration, PsiCalibration
from focalcal.calibration.focal_temperature import FocalTemperatureScaling
from focalcal.calibration.scaling import MatrixScaling, VectorScaling
from focalcal.calibration.temperature import TemperatureScaling

CALIBRATORS: dict[str, type[Calibrator]] = {
    cls.name: cls
    for cls in (
        IdentityCalibration,
        PsiCalibration,
        TemperatureScaling,
        FocalTemperatureScaling,
        VectorScaling,
        MatrixScaling,
        HistogramBinning,
        IsotonicCalibration,
    )
}


def register(cls: type[Calibrator]) -> type[Calibrator]:
    """Add a calibrator class under its ``name`` (usable as a class decorator): ``build`` and
    ``Calibrator.from_dict`` then take it."""
    if not (isinstance(cls, type) and issubclass(cls, Calibrator)) or cls is Calibrator:
        raise ValueError(f"a calibrator must be a subclass of focalcal.calibration.Calibrator, got {cls!r}")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name or name == getattr(Calibrator, "name", None):
        raise ValueError(f"{cls.__name__} needs its own class attribute `name` (the config name)")
    if name in CALIBRATORS:
        raise ValueError(f"calibrator name {name!r} is already registered")
    CALIBRATORS[name] = cls
    return cls


def calibrator_class(name: str) -> type[Calibrator]:
    """The calibrator class registered under ``name``."""
    try:
        return CALIBRATORS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown calibrator {name!r}; available: {sorted(CALIBRATORS)}") from None


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
    calibrator._check_params()
    return calibrator
