"""Check the parameters of every table entry against the library, when the Snakefile is parsed.

The schema checks an entry's ``name`` only; its other keys go to a library constructor or
loader inside a job. A misspelt ``gama:``, a quoted ``gamma: '1'`` or ``objective: nlll``
would pass the dry run and fail minutes later (on a cluster: after the queue), in one job of
many. :func:`check_entries` checks every entry of ``datasets``, ``models``, ``losses`` and
``calibrators`` the way its job will use it and reports every problem at once, each with its
key path (``losses.focal_s.gamma``) and what is allowed:

* losses and calibrators are built (cheap: no weights, no data), so their constructors'
  own checks run; the library stays the one place that says what a value may be;
* datasets and models are not built: that would load data, or allocate weights (on the meta
  device a He-initialised net still imports ``torch._dynamo``). Their option names
  and types are checked against the loader's or factory's signature, and a dataset's
  ``load()`` arguments by the checks ``load()`` itself runs before reading anything.

This imports torch, so the Snakefile runs it in Snakemake's main process only, not
again in every job that re-parses the Snakefile.
"""

from __future__ import annotations

import difflib
import inspect
import re
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import PurePath

from focalcal.catalog import FROM_LOSS, LOGITS_FILE, LOGITS_FILE_FIELDS, is_logits_file
from focalcal.pipeline.config import ConfigError

# What a calibrator parameter given as "from_loss" is checked with: the training loss's gamma
# it stands for is checked as a loss parameter (>= 0), and build_plan refuses a loss without one.
STAND_IN_GAMMA = 1.0
# Dataset keywords the workflow sets itself, from the top-level keys of the config.
WORKFLOW_DATASET_KEYS = {"root": "data_root", "download": "download"}


def check_entries(config: dict) -> None:
    """Raise one ConfigError listing every entry parameter the library would refuse.

    Every entry is checked, every unknown or mistyped key reported; a constructor, though,
    stops at the first value it refuses, so an entry with two bad values shows one at a time.
    """
    library = _library()
    checks = {"datasets": _dataset_problems, "models": _model_problems,
              "losses": _loss_problems, "calibrators": _calibrator_problems}
    problems = []
    for table, check in checks.items():
        for key, entry in config.get(table, {}).items():
            problems += check(f"{table}.{key}", entry, library)
    problems += _claim_note_problems((config.get("report") or {}).get("claim_notes") or {})
    if problems:
        raise ConfigError("invalid workflow config (entries checked against the focalcal library):\n  "
                          + "\n  ".join(problems))


def _claim_note_problems(notes: dict) -> list[str]:
    from focalcal.claims import CLAIMS

    known = [claim.key for claims in CLAIMS.values() for claim in claims]
    return _unknown("report.claim_notes", notes, known, "focalcal.claims", "claim")


def _library() -> types.SimpleNamespace:
    try:
        import torch  # noqa: F401  (first: its absence is the likely cause, and the message says so)

        from focalcal import data, losses, models
        from focalcal.calibration import registry as calibration
    except (ImportError, OSError) as error:
        raise ConfigError(
            "checking the config's entries needs torch and the focalcal library in the Python that runs "
            f"Snakemake ({sys.executable}), and importing them failed: {error}. Run the Snakemake of the "
            "project's environment (make venv; .venv/bin/snakemake)") from error
    return types.SimpleNamespace(data=data, models=models, losses=losses, calibration=calibration)


# ----------------------------------------------------------------------------- per table
def _loss_problems(where: str, entry: dict, library) -> list[str]:
    options = _options(entry)
    try:
        accepted = library.losses.parameters(entry["name"])
    except ValueError as error:
        return [f"{where}.name: {error}"]
    fixed = library.losses.PRESETS.get(entry["name"], (None, {}))[1]
    what = f"loss {entry['name']!r}" + (f" (a preset: it fixes {', '.join(sorted(fixed))})" if fixed else "")
    return (_unknown(where, options, accepted, what, "parameter")
            or _refused(where, options, lambda: library.losses.build(entry)))


def _calibrator_problems(where: str, entry: dict, library) -> list[str]:
    options = {key: value for key, value in _options(entry).items() if key != "after"}  # after: workflow-level
    try:
        accepted = library.calibration.calibrator_class(entry["name"])._param_names()
    except ValueError as error:
        return [f"{where}.name: {error}"]
    resolved = {key: STAND_IN_GAMMA if value == FROM_LOSS else value for key, value in options.items()}
    return (_unknown(where, options, accepted, f"calibrator {entry['name']!r}", "parameter")
            or _refused(where, options, lambda: library.calibration.build_checked({"name": entry["name"], **resolved})))


def _dataset_problems(where: str, entry: dict, library) -> list[str]:
    options = _options(entry)
    try:
        spec = library.data.spec(entry["name"])
    except ValueError as error:
        return [f"{where}.name: {error}"]
    if spec.task == "translation":  # a corpus of official splits: its loader's options only
        hints = _hints(spec.loader)
        accepted = {key: (hints.get(key, inspect.Parameter.empty), default)
                    for key, default in library.data.registry.translation_options(spec).items()}
        problems = _unknown(where, options, accepted, f"dataset {entry['name']!r}", "option")
        problems += _type_problems(where, options, accepted)
        return problems or _refused(where, options,
                                    lambda: library.data.registry.check_arguments(entry["name"], **options))
    load, hints = inspect.signature(library.data.load).parameters.values(), _hints(library.data.load)
    accepted = {p.name: (hints.get(p.name, p.empty), p.default) for p in load
                if p.name not in ("name", *WORKFLOW_DATASET_KEYS) and p.kind is not p.VAR_KEYWORD}
    split = {key: default for key, default in spec.options().items() if key not in spec.loader_options()}
    accepted.update({key: (inspect.Parameter.empty, default) for key, default in split.items()})
    accepted.update(_keyword_parameters(spec.loader))
    problems = [f"{where}.{key}: set for every dataset by the top-level {top!r} key, not per dataset"
                for key, top in WORKFLOW_DATASET_KEYS.items() if key in options]
    options = {key: value for key, value in options.items() if key not in WORKFLOW_DATASET_KEYS}
    problems += _unknown(where, options, accepted, f"dataset {entry['name']!r}", "option")
    problems += _type_problems(where, options, accepted)
    return problems or _refused(where, options, lambda: library.data.registry.check_arguments(entry["name"], **options))


def _model_problems(where: str, entry: dict, library) -> list[str]:
    options = _options(entry)
    if is_logits_file(entry):
        return _logits_file_problems(where, options)
    try:
        spec = library.models.spec(entry["name"])
    except ValueError as error:
        return [f"{where}.name: {error}"]
    accepted = _keyword_parameters(spec.factory)
    return (_unknown(where, options, accepted, f"model {entry['name']!r}", "option")
            + _type_problems(where, options, accepted))


def _logits_file_problems(where: str, options: dict) -> list[str]:
    """A logits_file model has the option ``path``, which may name {dataset}, {loss} and {seed},
    and optionally ``inputs``: what its score arrays hold (:data:`focalcal.logits_file.INPUT_KINDS`)."""
    import string

    from focalcal.logits_file import INPUT_KINDS

    problems = _unknown(where, options, {"path": None, "inputs": None}, f"model {LOGITS_FILE!r}", "option")
    if options.get("inputs", "logits") not in INPUT_KINDS:
        problems.append(f"{where}.inputs: {options['inputs']!r} is not one of {list(INPUT_KINDS)}")
    path = options.get("path")
    if not isinstance(path, str) or not path:
        return problems + [f"{where}.path: a logits_file model needs the path of its logits (.npz or folder of .npy)"]
    try:
        fields = [field for _, field, _, _ in string.Formatter().parse(path) if field is not None]
    except ValueError as error:
        return problems + [f"{where}.path: {error} in {path!r}"]
    unknown = sorted(set(fields) - set(LOGITS_FILE_FIELDS))
    if unknown:
        problems.append(f"{where}.path: unknown placeholder(s) {unknown}; a path may name "
                        + ", ".join("{" + field + "}" for field in LOGITS_FILE_FIELDS))
    return problems


# ----------------------------------------------------------------------------- helpers
def _options(entry: dict) -> dict:
    return {key: value for key, value in entry.items() if key != "name"}


def _unknown(where: str, options: dict, accepted, what: str, kind: str) -> list[str]:
    """An unknown key names the entry's key path, the closest accepted name and all of them."""
    problems = []
    for key in options:
        if key not in accepted:
            close = difflib.get_close_matches(str(key), list(accepted), n=1)
            guess = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(f"{where}.{key}: unknown {kind} of {what}{guess}; accepted: {', '.join(accepted) or 'none'}")
    return problems


def _refused(where: str, options: dict, build) -> list[str]:
    """The library's own message if ``build()`` refuses, under the key path of the option it names."""
    try:
        build()
    except (ValueError, TypeError) as error:
        message = str(error)
        named = [key for key in options if key == getattr(error, "key", None)  # InvalidParameterError names it
                 or re.match(rf"{re.escape(str(key))}\b", message)]
        return [f"{where}.{max(named, key=len)}: {message}" if named else f"{where}: {message}"]
    return []


def _keyword_parameters(function) -> dict[str, tuple]:
    """name -> (type hint or ``Parameter.empty``, default) of ``function``'s keyword-only parameters."""
    hints = _hints(function)
    return {p.name: (hints.get(p.name, p.empty), p.default)
            for p in inspect.signature(function).parameters.values() if p.kind is p.KEYWORD_ONLY}


def _hints(function) -> dict:
    try:
        return typing.get_type_hints(function)
    except Exception:  # noqa: BLE001  an annotation that does not evaluate here: judge by the defaults
        return {}


def _type_problems(where: str, options: dict, accepted: dict) -> list[str]:
    """Values whose type the signature rules out; YAML's ``'1'`` and ``yes`` are not numbers."""
    problems = []
    for key, value in options.items():
        if key not in accepted:
            continue
        hint, default = accepted[key]
        if hint is inspect.Parameter.empty:
            fits, expected = _fits_default(value, default)
        else:
            fits, expected = _fits(value, hint), _describe(hint)
        if fits is False:
            problems.append(f"{where}.{key}: expected {expected}, got {value!r} ({type(value).__name__})")
    return problems


def _fits(value, hint) -> bool | None:
    """Whether ``value`` (as YAML gives it) has the annotated type; None where the hint cannot tell."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        verdicts = [_fits(value, arg) for arg in args]
        return True if True in verdicts else None if None in verdicts else False
    if origin is typing.Literal:
        return value in args
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint in (int, float):
        number = (int,) if hint is int else (int, float)
        return isinstance(value, number) and not isinstance(value, bool)
    if hint is str or (isinstance(hint, type) and issubclass(hint, PurePath)):
        return isinstance(value, str)
    container = origin or hint
    if isinstance(container, type) and issubclass(container, Mapping):
        return isinstance(value, dict)
    if isinstance(container, type) and issubclass(container, Sequence) and container not in (str, bytes):
        if not isinstance(value, (list, tuple)):
            return False
        if container is tuple and args and args[-1] is not Ellipsis:
            if len(value) != len(args):
                return False
            verdicts = [_fits(item, arg) for item, arg in zip(value, args)]
        else:
            verdicts = [_fits(item, args[0]) for item in value] if args else []
        return False if False in verdicts else None if None in verdicts else True
    return None


def _fits_default(value, default) -> tuple[bool | None, str]:
    """Without an annotation: a bool default takes a bool, a number default no text or bool."""
    if isinstance(default, bool):
        return isinstance(value, bool), "true or false"
    if isinstance(default, (int, float)):
        return not isinstance(value, (str, bool)), "a number"
    return None, ""


def _describe(hint) -> str:
    if isinstance(hint, type):
        return hint.__name__
    return re.sub(r"\b(typing|collections\.abc|pathlib)\.", "", str(hint)).replace("NoneType", "None")
