"""Parameter constraints, declared once per class and checked by one validator.

In scikit-learn's manner, a class states what each constructor parameter may hold::

    _parameter_constraints = {"gamma": [GAMMA], "reduction": [Options(REDUCTIONS)], "alpha": [NON_NEGATIVE, None]}

A value is valid when it meets any one constraint of its list: an :class:`Interval`, an
:class:`Options` set, a :class:`SequenceOf` or :class:`Each` of those, ``None`` (the value
None), ``bool`` (True or False) or another type (its instances). :func:`validate_parameters`
checks a dict of values against such a dict and raises one :class:`InvalidParameterError`
naming the owner, the key, what is allowed and the value given ("FocalLoss: gamma must be a
real number in [0, inf), got -1.0"). Booleans are never numbers here, NaN is never in an
interval, and ±inf only where a bound is ±inf and closed. Torch-free: tensors are read through
their ``tolist``/``numpy`` methods.
"""

from __future__ import annotations

import itertools
import math
import numbers
import re
import reprlib
from collections.abc import Iterable, Mapping

import numpy as np

__all__ = [
    "GAMMA",
    "NON_NEGATIVE",
    "POSITIVE",
    "POSITIVE_GAMMA",
    "POSITIVE_INT",
    "PSI_GAMMA",
    "REAL",
    "Constraint",
    "Each",
    "Interval",
    "InvalidParameterError",
    "Options",
    "SequenceOf",
    "Table",
    "json_schema",
    "validate_parameters",
]


class InvalidParameterError(ValueError, TypeError):
    """A parameter outside its declared constraints: both a ValueError (a bad value) and a
    TypeError (a bad type), so callers catching either see it. ``owner`` and ``key`` name it,
    for callers that report it under their own path (a config's ``losses.focal_s.gamma``)."""

    def __init__(self, message: str, *, owner: str = "", key: str = ""):
        super().__init__(message)
        self.owner, self.key = owner, key


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


class Constraint:
    """What one constraint of a parameter's list says: ``is_satisfied_by`` and, as ``str``, its
    description in an error message."""

    def is_satisfied_by(self, value) -> bool:
        raise NotImplementedError

    def culprit(self, value) -> str | None:
        """The part of an unsatisfying ``value`` worth naming (an array's first bad entry), or None."""
        return None


class Interval(Constraint):
    """Numbers of ``kind`` (``numbers.Real`` or ``numbers.Integral``) between ``left`` and
    ``right``; None is an open end at ∓inf. ``closed``: "left", "right", "both" or "neither"."""

    def __init__(self, kind: type, left: float | None, right: float | None, *, closed: str = "both"):
        if kind not in (numbers.Real, numbers.Integral):
            raise ValueError(f"Interval kind must be numbers.Real or numbers.Integral, got {kind!r}")
        if closed not in ("left", "right", "both", "neither"):
            raise ValueError(f"Interval closed must be 'left', 'right', 'both' or 'neither', got {closed!r}")
        if left is not None and right is not None and left > right:
            raise ValueError(f"Interval left {left} is above right {right}")
        self.kind, self.left, self.right, self.closed = kind, left, right, closed

    def _in_bounds(self, values: np.ndarray) -> np.ndarray:
        """Element-wise: inside the interval (NaN never; ±inf only at a closed infinite bound)."""
        closed_left, closed_right = self.closed in ("left", "both"), self.closed in ("right", "both")
        low = -math.inf if self.left is None else self.left
        high = math.inf if self.right is None else self.right
        with np.errstate(invalid="ignore"):
            inside = (values >= low if closed_left and self.left is not None else values > low) & (
                values <= high if closed_right and self.right is not None else values < high)
        return inside

    def _holds(self, values: np.ndarray) -> np.ndarray:
        if values.dtype.kind not in "iuf" or (self.kind is numbers.Integral and values.dtype.kind == "f"):
            return np.zeros(values.shape, dtype=bool)
        return self._in_bounds(values.astype(np.float64))

    def is_satisfied_by(self, value) -> bool:
        if self.kind is numbers.Integral:
            if not (isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))):
                return False
        elif not _is_real(value):
            return False
        return bool(self._in_bounds(np.float64(value)))

    def __str__(self) -> str:
        what = "an integer" if self.kind is numbers.Integral else "a real number"
        if self.left is None and self.right is None:
            return what if self.kind is numbers.Integral else "a finite real number"
        left = "-inf" if self.left is None else f"{self.left:g}"
        right = "inf" if self.right is None else f"{self.right:g}"
        opening = "[" if self.closed in ("left", "both") and self.left is not None else "("
        closing = "]" if self.closed in ("right", "both") and self.right is not None else ")"
        return f"{what} in {opening}{left}, {right}{closing}"


class Options(Constraint):
    """One of a fixed set of values (in the order given), each of its own type: ``"1"`` is not 1
    and True is not 1."""

    def __init__(self, options: Iterable):
        self.options = tuple(options)

    def is_satisfied_by(self, value) -> bool:
        for option in self.options:
            if isinstance(value, bool) != isinstance(option, bool) or not isinstance(value, type(option)):
                continue
            if value == option:
                return True
        return False

    def __str__(self) -> str:
        return "one of " + ", ".join(repr(option) for option in self.options)


def _as_list(value) -> list | None:
    """A list, tuple, 1-D numpy array or tensor as a list of its entries; None for anything
    else (text, mappings, scalars, arrays of other shapes)."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if hasattr(value, "tolist") and getattr(value, "ndim", None) == 1:
        dtype = getattr(value, "dtype", None)
        if isinstance(dtype, np.dtype) and dtype.kind not in "iuf":
            return None  # text or booleans, which tolist() would make look like numbers
        if not isinstance(dtype, np.dtype) and ("bool" in str(dtype) or "complex" in str(dtype)):
            return None
        return value.tolist()
    return None


class SequenceOf(Constraint):
    """A list, tuple or 1-D array of ``length`` entries (or at least ``min_length``), each
    meeting ``item``; ``increasing``: strictly increasing."""

    def __init__(self, item: Constraint, *, min_length: int = 1, length: int | None = None, increasing: bool = False):
        self.item, self.min_length, self.length, self.increasing = item, min_length, length, increasing

    def _entries(self, value) -> list | None:
        entries = _as_list(value)
        if entries is None:
            return None
        if (self.length is not None and len(entries) != self.length) or len(entries) < self.min_length:
            return None
        return entries

    def is_satisfied_by(self, value) -> bool:
        entries = self._entries(value)
        if entries is None or not all(self.item.is_satisfied_by(entry) for entry in entries):
            return False
        return not self.increasing or all(b > a for a, b in itertools.pairwise(entries))

    def culprit(self, value) -> str | None:
        entries = self._entries(value)
        if entries is None:
            return None
        for index, entry in enumerate(entries):
            if not self.item.is_satisfied_by(entry):
                return f"entry {index} is {entry!r}"
        return None

    def __str__(self) -> str:
        items = _plural(str(self.item))
        order = "strictly increasing " if self.increasing else ""
        if self.length is not None:
            return f"a {order}sequence of {self.length} {items}"
        if self.min_length == 1:
            return f"a non-empty {order}sequence of {items}"
        at_least = f"at least {self.min_length} " if self.min_length > 1 else ""
        return f"a {order}sequence of {at_least}{items}"


class Table(Constraint):
    """A mapping of exactly the keys of ``constraints`` (key -> a constraint list), each value
    meeting its own list: a parameter that is a small table of its own."""

    def __init__(self, constraints: Mapping):
        self.constraints = {key: [_constraint(spec) for spec in (value if isinstance(value, (list, tuple)) else [value])]
                            for key, value in constraints.items()}

    def is_satisfied_by(self, value) -> bool:
        if not isinstance(value, Mapping) or set(value) != set(self.constraints):
            return False
        return all(any(option.is_satisfied_by(value[key]) for option in options)
                   for key, options in self.constraints.items())

    def culprit(self, value) -> str | None:
        if not isinstance(value, Mapping):
            return None
        missing, unknown = set(self.constraints) - set(value), set(value) - set(self.constraints)
        if missing or unknown:
            return ", ".join([*(f"{key!r} missing" for key in sorted(missing)),
                              *(f"{key!r} unknown" for key in sorted(unknown, key=str))])
        for key, options in self.constraints.items():
            if not any(option.is_satisfied_by(value[key]) for option in options):
                return f"{key} is {value[key]!r}"
        return None

    def __str__(self) -> str:
        return "{" + ", ".join(f"{key}: {_joined([str(o) for o in options])}"
                               for key, options in self.constraints.items()) + "}"


def _plural(description: str) -> str:
    """'a real number in [0, 1)' -> 'real numbers in [0, 1)', for the entries of a sequence."""
    words = description.removeprefix("a ").removeprefix("an ")
    return re.sub(r"\b(number|integer)\b", r"\1s", words, count=1)


def _numeric_array(value) -> np.ndarray | None:
    """A numpy array of ``value`` (array, tensor, nested list) when it holds numbers only."""
    if hasattr(value, "detach") and hasattr(value, "cpu") and hasattr(value, "numpy"):  # a tensor
        value = value.detach().cpu()
        if value.is_floating_point() and value.element_size() < 4:
            value = value.float()
        value = value.numpy()
    if isinstance(value, (str, bytes, Mapping)):
        return None
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):
        return None
    if array.dtype.kind not in "iuf":
        return None
    if isinstance(value, (list, tuple)) and not _only_numbers(value):
        return None
    return array


def _only_numbers(values) -> bool:
    if isinstance(values, (list, tuple)):
        return all(_only_numbers(v) for v in values)
    return _is_real(values)


class Each(Constraint):
    """A scalar meeting ``interval``, or an array (numpy, tensor, nested lists) of any shape
    whose every entry does: for functions that apply element-wise."""

    def __init__(self, interval: Interval):
        self.interval = interval

    def is_satisfied_by(self, value) -> bool:
        if self.interval.is_satisfied_by(value):
            return True
        if _is_real(value) or isinstance(value, (bool, np.bool_)) or value is None:
            return False
        array = _numeric_array(value)
        return array is not None and bool(np.all(self.interval._holds(array)))

    def culprit(self, value) -> str | None:
        array = _numeric_array(value)
        if array is None or array.ndim == 0:
            return None
        bad = np.argwhere(~self.interval._holds(array))
        if not len(bad):
            return None
        index = tuple(int(i) for i in bad[0])
        return f"{array[index].item()!r} at index {index[0] if len(index) == 1 else index}"

    def __str__(self) -> str:
        return f"{self.interval} or an array of them"


class _NoneConstraint(Constraint):
    def is_satisfied_by(self, value) -> bool:
        return value is None

    def __str__(self) -> str:
        return "None"


class _Booleans(Constraint):
    def is_satisfied_by(self, value) -> bool:
        return isinstance(value, (bool, np.bool_))

    def __str__(self) -> str:
        return "True or False"


class _InstanceOf(Constraint):
    def __init__(self, kind: type):
        self.kind = kind

    def is_satisfied_by(self, value) -> bool:
        return isinstance(value, self.kind)

    def __str__(self) -> str:
        return f"an instance of {self.kind.__name__}"


def _constraint(spec) -> Constraint:
    if isinstance(spec, Constraint):
        return spec
    if spec is None:
        return _NoneConstraint()
    if spec is bool:
        return _Booleans()
    if isinstance(spec, type):
        return _InstanceOf(spec)
    raise TypeError(f"a parameter constraint is a Constraint, None or a type, got {spec!r}")


def _owner_name(owner) -> str:
    if isinstance(owner, str):
        return owner
    return owner.__name__ if isinstance(owner, type) else type(owner).__name__


def _joined(descriptions: list[str]) -> str:
    return descriptions[0] if len(descriptions) == 1 else ", ".join(descriptions[:-1]) + " or " + descriptions[-1]


_REPR = reprlib.Repr()
_REPR.maxlist = _REPR.maxtuple = 8
_REPR.maxstring = 60


def validate_parameters(constraints: Mapping, values: Mapping, owner) -> Mapping:
    """Check each of ``values`` (key -> value) against ``constraints[key]`` (a list of
    constraints, any one of which suffices); return ``values``.

    ``owner`` (a name, a class or an instance) heads the error. A key without a declared
    constraint is an error too: a class that adds a parameter declares what it may hold.
    """
    name = _owner_name(owner)
    for key, value in values.items():
        if key not in constraints:
            raise KeyError(f"{name} declares no constraint for its parameter {key!r}: add it to _parameter_constraints")
        declared = constraints[key]
        options = [_constraint(spec) for spec in (declared if isinstance(declared, (list, tuple)) else [declared])]
        if any(option.is_satisfied_by(value) for option in options):
            continue
        culprits = [c for c in (option.culprit(value) for option in options) if c]
        shown = _REPR.repr(value) + (f" ({culprits[0]})" if culprits else "")
        raise InvalidParameterError(f"{name}: {key} must be {_joined([str(o) for o in options])}, got {shown}",
                                    owner=name, key=key)
    return values


#: Real numbers, finite.
REAL = Interval(numbers.Real, None, None)
#: Real numbers ≥ 0, finite: penalties, weights, step sizes.
NON_NEGATIVE = Interval(numbers.Real, 0, None, closed="left")
#: Real numbers > 0, finite: widths, tolerances, temperatures.
POSITIVE = Interval(numbers.Real, 0, None, closed="neither")
#: Integers ≥ 1: counts of bins, iterations.
POSITIVE_INT = Interval(numbers.Integral, 1, None, closed="left")
#: The focal parameter γ of a loss −(1 − p_y)^γ log p_y and of what depends on it: γ ≥ 0
#: (γ = 0 is cross-entropy), finite.
GAMMA = Interval(numbers.Real, 0, None, closed="left")
#: γ > 0, for quantities that γ = 0 (cross-entropy) leaves undefined (charoenphakdee2021's τ_oc, τ_uc).
POSITIVE_GAMMA = Interval(numbers.Real, 0, None, closed="neither")
#: γ of the focal calibration map Ψ^γ (charoenphakdee2021 Eq 11-13) and of komisarenko2024's γ_ev:
#: γ > −1, where φ^γ > 0 on [0, 1).
PSI_GAMMA = Interval(numbers.Real, -1, None, closed="neither")


def json_schema(declared) -> dict:
    """The JSON schema (draft 2020-12) of a parameter's constraint list, for a config schema
    generated from the same declaration the code checks. Intervals, options, None, booleans and
    sequences and tables of them translate exactly, but a sequence's ``increasing``, which the
    schema cannot say and :func:`validate_parameters` still checks."""
    options = [_constraint(spec) for spec in (declared if isinstance(declared, (list, tuple)) else [declared])]
    nullable = any(isinstance(option, _NoneConstraint) for option in options)
    schemas = [_one_json_schema(option) for option in options if not isinstance(option, _NoneConstraint)]
    if not schemas:
        return {"type": "null"}
    if len(schemas) > 1:
        return {"anyOf": schemas + ([{"type": "null"}] if nullable else [])}
    schema = dict(schemas[0])
    if nullable:
        if "enum" in schema:
            schema["enum"] = [*schema["enum"], None]
        else:
            schema["type"] = [schema["type"], "null"]
    return schema


def _one_json_schema(option: Constraint) -> dict:
    if isinstance(option, Interval):
        schema: dict = {"type": "integer" if option.kind is numbers.Integral else "number"}
        closed_left, closed_right = option.closed in ("left", "both"), option.closed in ("right", "both")
        if option.left is not None:
            schema["minimum" if closed_left else "exclusiveMinimum"] = option.left
        if option.right is not None:
            schema["maximum" if closed_right else "exclusiveMaximum"] = option.right
        return schema
    if isinstance(option, Options):
        return {"enum": list(option.options)}
    if isinstance(option, _Booleans):
        return {"type": "boolean"}
    if isinstance(option, SequenceOf):
        schema = {"type": "array", "items": _one_json_schema(option.item)}
        if option.length is not None:
            schema["minItems"] = schema["maxItems"] = option.length
        elif option.min_length:
            schema["minItems"] = option.min_length
        return schema
    if isinstance(option, Table):
        return {"type": "object", "additionalProperties": False, "required": list(option.constraints),
                "properties": {key: json_schema(options) for key, options in option.constraints.items()}}
    raise TypeError(f"no JSON schema for the constraint {option}")
