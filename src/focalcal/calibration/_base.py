"""What every post-hoc calibrator shares: the fit/transform contract and JSON round trips.

A calibrator is fitted on validation logits and labels and then maps logits to
probabilities. The workflow stores one JSON of fitted parameters per (run, calibrator), so
each calibrator can be written out with :meth:`Calibrator.to_dict` and read back with
:meth:`Calibrator.from_dict` without refitting.
"""

from __future__ import annotations

import inspect
import math
from typing import Any, ClassVar

import numpy as np

from focalcal import catalog
from focalcal.core.constraints import validate_parameters
from focalcal.core.types import ArrayLike
from focalcal.core.validation import check_scores, check_scores_and_labels


def _to_jsonable(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"cannot store non-finite value {value} in JSON")
    if isinstance(value, (list, tuple)):
        return [_to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_jsonable(v) for k, v in value.items()}
    return value


class Calibrator:
    """Base class: ``fit(logits, labels) -> self``, ``transform(logits) -> probabilities``.

    Subclasses set ``name`` (the registry key), keep constructor arguments as attributes of
    the same name, store fitted values in attributes ending in ``_`` listed in
    ``_fitted_attributes``, and implement ``_fit(logits, labels)`` and ``_transform(logits)``
    on validated float64 numpy arrays. ``transform`` returns a float64 numpy array (N, K)
    whose rows sum to 1. ``_parameter_constraints`` declares what each constructor argument
    may hold (:mod:`focalcal.core.constraints`); as in scikit-learn, ``fit`` checks them, so
    ``__init__`` only stores its arguments and ``set``-ting an attribute later is checked too.
    The user guide's "Adding a calibrator" page writes one out.

    Attributes:
        name (str): The name :mod:`focalcal.catalog` declares the class under; ``build``,
            ``to_dict`` and ``from_dict`` use it.
        binary_only (bool): True for calibrators of 2-class logits only (beta calibration):
            ``fit`` refuses other shapes.
        n_classes_ (int): Number of classes K seen by ``fit``; ``transform`` requires the same.

    Examples:
        Any calibrator fits, maps and round-trips through JSON the same way:

        >>> import json
        >>> import numpy as np
        >>> from focalcal.calibration import Calibrator, TemperatureScaling
        >>> rng = np.random.default_rng(0)
        >>> val_labels = rng.integers(0, 3, size=500)
        >>> val_logits = 4 * (np.eye(3)[val_labels] + rng.normal(size=(500, 3)))
        >>> fitted = TemperatureScaling().fit(val_logits, val_labels)
        >>> restored = Calibrator.from_dict(json.loads(json.dumps(fitted.to_dict())))
        >>> bool(np.allclose(restored.transform(val_logits), fitted.transform(val_logits)))
        True
    """

    name: str = ""
    _parameter_constraints: ClassVar[dict] = {}
    _fitted_attributes: tuple[str, ...] = ()
    binary_only: bool = False  # fits and maps 2-class logits only (beta calibration)

    # -- public API ---------------------------------------------------------------------
    def fit(self, logits: ArrayLike, labels: ArrayLike) -> Calibrator:
        """Fit the calibration map on held-out (validation) logits and labels.

        Args:
            logits: Array-like (N, K) of real scores, numpy or torch (N samples, K >= 2
                classes): the model's validation logits, not probabilities.
            labels: Array-like (N,) of integer class indices in [0, K).

        Returns:
            The calibrator itself, fitted (so that ``fit(...).transform(...)`` chains).

        Raises:
            ValueError: If the logits are not a finite non-empty (N, K) array, the labels do not
                match them, a constructor argument breaks its constraint, or a binary-only
                calibrator is given K != 2.
        """
        logits, labels = check_scores_and_labels(logits, labels)
        self._validate_params()
        if self.binary_only and logits.shape[1] != 2:
            raise ValueError(f"{self.name} calibration is for binary classifiers: logits must have 2 columns, "
                             f"got {logits.shape[1]}")
        self._fit(logits.astype(np.float64, copy=False), labels)
        self.n_classes_ = int(logits.shape[1])
        return self

    def transform(self, logits: ArrayLike) -> np.ndarray:
        """Map logits to calibrated probabilities.

        Args:
            logits: Array-like (N, K) of real scores, numpy or torch, with the K of ``fit``.

        Returns:
            Float64 array (N, K) of probabilities; each row sums to 1.

        Raises:
            RuntimeError: If the calibrator is not fitted yet.
            ValueError: If the logits are not finite or have another number of classes than
                the fitted one.
        """
        self._check_fitted()
        logits = check_scores(logits)
        if logits.shape[1] != self.n_classes_:
            raise ValueError(
                f"logits have {logits.shape[1]} classes but {type(self).__name__} was fitted on {self.n_classes_}"
            )
        return self._transform(logits.astype(np.float64, copy=False))

    def fit_transform(self, logits: ArrayLike, labels: ArrayLike) -> np.ndarray:
        """``fit(logits, labels).transform(logits)``: the calibrated probabilities of the fitting data.

        Args:
            logits: Array-like (N, K) of real scores, numpy or torch.
            labels: Array-like (N,) of integer class indices in [0, K).

        Returns:
            Float64 array (N, K) of probabilities; each row sums to 1.
        """
        return self.fit(logits, labels).transform(logits)

    def get_params(self) -> dict[str, Any]:
        """Constructor arguments and their current values (as in scikit-learn).

        Returns:
            Dict of argument name to current value, in the constructor's order.
        """
        return {name: getattr(self, name) for name in self._param_names()}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description: registry name, constructor arguments, fitted attributes.

        The workflow stores this as one calibration JSON per (run, calibrator), so a fitted map
        can be read back by :meth:`from_dict` without refitting.

        Returns:
            Dict with keys ``"name"`` (str, the registry name), ``"params"`` (the constructor
            arguments) and ``"fitted"`` (``n_classes_`` and every fitted attribute); arrays
            become nested lists and numpy scalars Python numbers, so ``json.dumps`` takes it.

        Raises:
            RuntimeError: If the calibrator is not fitted yet.
            ValueError: If a fitted value is not finite (JSON has no NaN or infinity).
        """
        self._check_fitted()
        fitted = {attr: getattr(self, attr) for attr in ("n_classes_", *self._fitted_attributes)}
        return _to_jsonable({"name": self.name, "params": self.get_params(), "fitted": fitted})

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibrator:
        """Rebuild a fitted calibrator from :meth:`to_dict` output (any subclass via the registry).

        Called on ``Calibrator`` it returns whichever class ``data["name"]`` names; called on a
        subclass it also checks that the dict describes that subclass.

        Args:
            data: Dict with keys ``"name"``, ``"params"`` and ``"fitted"``, as :meth:`to_dict`
                writes it (or as read back from its JSON).

        Returns:
            A fitted calibrator of the named class; its ``transform`` equals the original's.

        Raises:
            ValueError: If a key is missing, the name is not a declared calibrator (or not this
                subclass), a parameter breaks its constraint, or a fitted attribute is missing
                or unknown.
        """
        if not isinstance(data, dict) or not {"name", "params", "fitted"} <= set(data):
            raise ValueError("calibrator dict must have keys 'name', 'params' and 'fitted'")
        target = calibrator_class(data["name"])
        if cls is not Calibrator and not issubclass(target, cls):
            raise ValueError(f"dict describes a {target.__name__}, not a {cls.__name__}")
        calibrator = target(**data["params"])
        calibrator._validate_params()
        expected = {"n_classes_", *calibrator._fitted_attributes}
        missing = expected - set(data["fitted"])
        if missing:
            raise ValueError(f"fitted parameters missing from dict for {data['name']}: {sorted(missing)}")
        for attr, value in data["fitted"].items():
            if attr not in expected:
                raise ValueError(f"unknown fitted parameter {attr!r} for {data['name']}; expected {sorted(expected)}")
            setattr(calibrator, attr, calibrator._restore(attr, value))
        return calibrator

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    # -- hooks for subclasses -------------------------------------------------------------
    def _fit(self, logits: np.ndarray, labels: np.ndarray) -> None:
        raise NotImplementedError

    def _transform(self, logits: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _validate_params(self) -> None:
        """Check the constructor arguments against ``_parameter_constraints``."""
        validate_parameters(type(self)._parameter_constraints, self.get_params(), type(self).__name__)

    def _restore(self, attr: str, value):
        """Turn a JSON value back into the attribute's type (lists become float arrays)."""
        if attr == "n_classes_":
            return int(value)
        return np.asarray(value, dtype=np.float64) if isinstance(value, list) else value

    # -- helpers ------------------------------------------------------------------------
    @classmethod
    def _param_names(cls) -> list[str]:
        signature = inspect.signature(cls.__init__)
        return [p.name for p in signature.parameters.values() if p.name != "self" and p.kind == p.POSITIONAL_OR_KEYWORD]

    def _check_fitted(self) -> None:
        if not hasattr(self, "n_classes_"):
            raise RuntimeError(f"{type(self).__name__} is not fitted yet: call fit(logits, labels) before transform")


def calibrator_class(name: str) -> type[Calibrator]:
    """The calibrator class the catalog declares under ``name`` (imported on first use).

    Args:
        name: A calibrator name of :mod:`focalcal.catalog`, e.g. ``"temperature_scaling"``.

    Returns:
        The :class:`~focalcal.calibration.Calibrator` subclass, not an instance.

    Raises:
        ValueError: If the name is not declared, or its entry does not name a ``Calibrator``
            subclass whose ``name`` is ``name``.

    Examples:
        >>> from focalcal.calibration import calibrator_class
        >>> calibrator_class("temperature_scaling").__name__
        'TemperatureScaling'
    """
    try:
        entry = catalog.CALIBRATORS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown calibrator {name!r}; available: {sorted(catalog.CALIBRATORS)}") from None
    cls = catalog.resolve(entry.builder)
    if not (isinstance(cls, type) and issubclass(cls, Calibrator)) or cls.name != name:
        raise ValueError(f"the catalog's calibrator {name!r} names {entry.builder!r}, which is not a "
                         f"focalcal.calibration.Calibrator subclass with name = {name!r}")
    return cls
