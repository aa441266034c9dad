"""Parameter constraints: declared once per class, checked by the one validator of
``focalcal.core.constraints``, which names the owner, the key, what is allowed and the value."""

from __future__ import annotations

import inspect
import math
import numbers
import re
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import torch

from focalcal import losses, theory
from focalcal.calibration import registry as calibration
from focalcal.calibration._base import Calibrator
from focalcal.commands.calibrator_choice import resolve_calibrators
from focalcal.core.constraints import (
    GAMMA,
    PSI_GAMMA,
    Each,
    Interval,
    InvalidParameterError,
    Options,
    SequenceOf,
    validate_parameters,
)
from focalcal.losses import Loss

SOURCE = Path(__file__).resolve().parents[1] / "src" / "focalcal"
LOSS_CLASSES = {name: losses.loss_class(name) for name in losses.LOSSES}
CALIBRATOR_CLASSES = {name: calibration.calibrator_class(name) for name in calibration.CALIBRATORS}


def undeclared(cls) -> list[str]:
    """The constructor parameters of ``cls`` without a declared constraint (or, a stale one, with a
    constraint but no parameter)."""
    parameters = {p.name for p in inspect.signature(cls.__init__).parameters.values()
                  if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    declared = set(getattr(cls, "_parameter_constraints", {}))
    return sorted(parameters ^ declared)


# ------------------------------------------------------------------- every class declares them
@pytest.mark.parametrize("cls", [*LOSS_CLASSES.values(), *CALIBRATOR_CLASSES.values()], ids=lambda c: c.__name__)
def test_every_catalog_class_declares_a_constraint_for_each_constructor_parameter(cls):
    assert undeclared(cls) == [], f"{cls.__name__}: _parameter_constraints and __init__ differ on {undeclared(cls)}"


def test_a_class_that_forgets_a_parameter_is_caught():
    class Forgetful(Loss):
        name = "forgetful"

        def __init__(self, *, sharpness: float = 1.0, reduction: str = "mean", ignore_index=None):
            super().__init__(reduction=reduction, ignore_index=ignore_index)
            self._validate(sharpness=sharpness)

    assert undeclared(Forgetful) == ["sharpness"]
    with pytest.raises(KeyError, match="Forgetful declares no constraint for its parameter 'sharpness'"):
        Forgetful()

    class Stale(Calibrator):
        name = "stale"
        _parameter_constraints: ClassVar[dict] = {"n_bins": [Interval(numbers.Integral, 1, None)]}

    assert undeclared(Stale) == ["n_bins"]


class _NothingMeetsIt:
    """A value no constraint accepts: not a number, text, sequence, bool or None."""

    def __repr__(self) -> str:
        return "<bad>"


@pytest.mark.parametrize(("name", "key"), [(name, key) for name, cls in LOSS_CLASSES.items()
                                           for key in cls._parameter_constraints])
def test_every_loss_checks_every_parameter_in_init(name, key):
    with pytest.raises(InvalidParameterError, match=rf"^{LOSS_CLASSES[name].__name__}: {key} must be .*, got <bad>$"):
        LOSS_CLASSES[name](**{key: _NothingMeetsIt()})


@pytest.mark.parametrize(("name", "key"), [(name, key) for name, cls in CALIBRATOR_CLASSES.items()
                                           for key in cls._parameter_constraints])
def test_every_calibrator_checks_every_parameter_in_fit(name, key):
    cls = CALIBRATOR_CLASSES[name]
    calibrator = cls(**{key: _NothingMeetsIt()})  # __init__ stores, as in scikit-learn
    logits, labels = np.array([[2.0, 0.0], [0.0, 1.0], [1.0, 0.5], [0.0, 3.0]]), np.array([0, 1, 0, 1])
    with pytest.raises(InvalidParameterError, match=rf"^{cls.__name__}: {key} must be .*, got <bad>$"):
        calibrator.fit(logits, labels)
    with pytest.raises(InvalidParameterError, match=rf"^{cls.__name__}: {key} must be"):
        calibration.build_checked({"name": name, key: _NothingMeetsIt()})


# -------------------------------------------------------------------------------- the validator
@pytest.mark.parametrize(("value", "shown"), [
    (-1.0, "-1.0"), (-1e-300, "-1e-300"), (math.nan, "nan"), (math.inf, "inf"), (-math.inf, "-inf"),
    (True, "True"), (np.bool_(False), r"(np\.)?False_?"), ("1", "'1'"), (None, "None"), ([1.0], r"\[1.0\]"),
    (torch.tensor(1.0), r"tensor\(1.\)"),
])
def test_gamma_refuses_each_bad_kind_naming_owner_key_rule_and_value(value, shown):
    expected = rf"^FocalLoss: gamma must be a real number in \[0, inf\), got {shown}$"
    with pytest.raises(InvalidParameterError, match=expected):
        validate_parameters({"gamma": [GAMMA]}, {"gamma": value}, "FocalLoss")


@pytest.mark.parametrize("value", [0, 0.0, -0.0, np.float32(0), np.int64(2), 3, 1e300])
def test_gamma_accepts_zero_and_every_finite_non_negative_number(value):
    assert validate_parameters({"gamma": [GAMMA]}, {"gamma": value}, "FocalLoss") == {"gamma": value}


def test_the_error_is_a_value_error_and_a_type_error_carrying_owner_and_key():
    with pytest.raises(InvalidParameterError) as error:
        validate_parameters({"gamma": [GAMMA]}, {"gamma": -1}, losses.FocalLoss)
    assert isinstance(error.value, ValueError) and isinstance(error.value, TypeError)
    assert (error.value.owner, error.value.key) == ("FocalLoss", "gamma")


def test_options_none_bool_sequences_and_arrays():
    constraints = {
        "objective": [Options(("nll", "ece")), None],
        "flag": [bool],
        "grid": [SequenceOf(PSI_GAMMA, min_length=2, increasing=True)],
        "bounds": [SequenceOf(Interval(numbers.Real, 0, None, closed="neither"), length=2, increasing=True)],
        "gamma": [Each(GAMMA)],
        "count": [Interval(numbers.Integral, 1, 10, closed="both")],
    }
    refused = {
        "objective": ("NLL", r"one of 'nll', 'ece' or None, got 'NLL'"),
        "flag": (1, "True or False, got 1"),
        "grid": ([0.5, -1.0], (r"a strictly increasing sequence of at least 2 real numbers in \(-1, inf\), got "
                               r"\[0.5, -1.0\] \(entry 1 is -1.0\)")),
        "bounds": ((5.0, 1.0), r"a strictly increasing sequence of 2 real numbers in \(0, inf\), got \(5.0, 1.0\)"),
        "gamma": (np.array([[0.0, 1.0], [2.0, -3.0]]), r"\(-3.0 at index \(1, 1\)\)"),
        "count": (11, r"an integer in \[1, 10\], got 11"),
    }
    for key, (value, message) in refused.items():
        with pytest.raises(InvalidParameterError, match=rf"^Owner: {key} must be .*{message}"):
            validate_parameters(constraints, {key: value}, "Owner")
    accepted = {"objective": None, "flag": np.bool_(True), "grid": np.array([-0.5, 0.0, 2.0]), "bounds": [0.1, 10],
                "gamma": torch.tensor([[0.0, 1.0]]), "count": 10}
    assert validate_parameters(constraints, accepted, "Owner") is accepted
    assert Options(("nll",)).is_satisfied_by("nll") and not Options((1,)).is_satisfied_by(True)
    assert not Interval(numbers.Integral, 1, None).is_satisfied_by(2.0)  # an integer parameter takes no float


# ---------------------------------------------------------------- one constraint wherever γ appears
def test_gamma_is_checked_alike_by_losses_calibrators_theory_and_the_command():
    refusals = {
        "FocalLoss": lambda g: losses.build({"name": "focal", "gamma": g}),
        "DualFocalLoss": lambda g: losses.build({"name": "dual_focal", "gamma": g}),
        "TemperatureScaling": lambda g: calibration.build_checked({"name": "temperature_scaling", "gamma": g}),
        "focal_risk_minimizer": lambda g: theory.focal_risk_minimizer(np.array([[0.7, 0.3]]), g),
        "gradient_ratio": lambda g: theory.gradient_ratio(0.5, g),
        "temperature_bounds": lambda g: theory.temperature_bounds(g),
        "focalcal calibrate": lambda g: resolve_calibrators(gamma=g),
    }
    for owner, call in refusals.items():
        for bad in (-0.5, math.nan, math.inf, True):
            with pytest.raises(InvalidParameterError, match=rf"^{owner}: gamma must be a real number in \[0, inf\)"):
                call(bad)
        call(0.0)  # the boundary is allowed: γ = 0 is cross-entropy
    assert losses.build({"name": "focal", "gamma": 0}).gamma == 0.0
    assert theory.gradient_ratio(0.5, 0.0) == pytest.approx(1.0)  # g(p, 0) = 1
    assert "psi" in resolve_calibrators(gamma=0.0)
    # Ψ^γ and focal temperature scaling's γ_ev take γ > −1 (PSI_GAMMA), the same way
    with pytest.raises(InvalidParameterError, match=r"^psi: gamma must be a real number in \(-1, inf\), got -1.0$"):
        theory.psi(np.array([[0.5, 0.5]]), -1.0)
    with pytest.raises(InvalidParameterError, match=r"^PsiCalibration: gamma must be a real number in \(-1, inf\)"):
        calibration.build_checked({"name": "psi", "gamma": -1})
    assert np.allclose(theory.psi(np.array([[0.6, 0.4]]), -0.5).sum(axis=1), 1.0)


# ------------------------------------------------------------------ no hand-written γ checks left
# A raise whose message makes γ its subject ("gamma must be ...", "gammas must ..."), or a check
# function of its own for γ: what the validator replaces.
HAND_WRITTEN = re.compile(r"raise \w+\(\s*f?[\"'](?:\{[^}]*\}:?\s*)?(?:gammas?|γ)\s+must\b"
                          r"|def _check_gamma\b|def check_number\b|def _check_params\b")


def hand_written_gamma_checks(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.parts[-2:] == ("core", "constraints.py"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if HAND_WRITTEN.search(line):
                found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return found


def test_the_pattern_finds_the_checks_it_replaces():
    for line in ('raise ValueError(f"gamma must be a finite number >= 0, got {gamma!r}")',
                 'raise ValueError(f"gammas must be >= 0, got {self.gammas}")',
                 "def _check_gamma(gamma, *, minimum: float = 0.0):",
                 "def check_number(value, name: str):",
                 "    def _check_params(self) -> None:"):
        assert HAND_WRITTEN.search(line), line
    for line in ('raise ValueError(f"need len(gammas) == len(thresholds) + 1, got {n} gammas")',
                 'raise ValueError(f"panels[{(paradigm, gamma)!r}] must be a (logits, labels) pair")',
                 'raise ValueError(f"gamma_initial must lie in [gamma_min, gamma_max], got {g}")'):  # relations
        assert not HAND_WRITTEN.search(line), line


def test_no_module_keeps_a_hand_written_gamma_check():
    assert hand_written_gamma_checks(SOURCE) == []
