"""Every public function and class of the library's four packages is documented the way the API
reference shows it: typed signature, Args, Returns, and an example (which `make test` and CI run as
a doctest, ``--doctest-modules``).

Public: a top-level function or class whose name has no leading underscore, defined in a module of
``focalcal.metrics``, ``.calibration``, ``.losses`` or ``focalcal.theory`` whose own name has none,
or named in a package's ``__all__`` wherever it is defined."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import re

import pytest

PACKAGES = ("focalcal.metrics", "focalcal.calibration", "focalcal.losses", "focalcal.theory")
SECTION = re.compile(r"^\s*(Args|Returns|Yields|Attributes|Examples|Raises|Warns|Note|Notes):\s*$", re.MULTILINE)


def modules():
    for name in PACKAGES:
        package = importlib.import_module(name)
        yield package
        for info in pkgutil.iter_modules(getattr(package, "__path__", [])):
            if not info.name.startswith("_"):
                yield importlib.import_module(f"{name}.{info.name}")


def public_objects() -> dict[str, object]:
    found = {}
    for module in modules():
        exported = set(getattr(module, "__all__", ()))
        for name, value in vars(module).items():
            if name.startswith("_") or not (inspect.isfunction(value) or inspect.isclass(value)):
                continue
            defined_here = getattr(value, "__module__", None) == module.__name__
            if defined_here or (name in exported and value.__module__.startswith("focalcal.")):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


PUBLIC = public_objects()


def sections(doc: str) -> set[str]:
    return set(SECTION.findall(doc))


def parameters(function) -> list[inspect.Parameter]:
    return [p for name, p in inspect.signature(function).parameters.items() if name not in ("self", "cls")]


def test_the_four_packages_have_many_public_names():
    assert len(PUBLIC) > 100, sorted(PUBLIC)


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_name_has_a_typed_signature_and_sections_with_an_example(name):
    value = PUBLIC[name]
    doc = inspect.getdoc(value) or ""
    assert doc, f"{name} has no docstring"
    found = sections(doc)
    assert "Examples" in found and ">>> " in doc.split("Examples:", 1)[1], f"{name} has no Examples section with a doctest"
    if inspect.isclass(value):
        if (issubclass(value, tuple) and hasattr(value, "_fields")) or dataclasses.is_dataclass(value):
            assert "Attributes" in found, f"{name}: a NamedTuple's or dataclass's fields are listed under Attributes"
            return
        init = value.__init__
        if init is not object.__init__ and "__init__" in vars(value) and parameters(init):
            assert "Args" in found, f"{name}: its constructor's parameters have no Args section"
            unannotated = [p.name for p in parameters(init) if p.annotation is inspect.Parameter.empty
                           and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
            assert not unannotated, f"{name}.__init__ leaves {unannotated} without a type"
        return
    params = parameters(value)
    if params:
        assert "Args" in found, f"{name} has parameters but no Args section"
    unannotated = [p.name for p in params if p.annotation is inspect.Parameter.empty
                   and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    assert not unannotated, f"{name} leaves {unannotated} without a type"
    returns = inspect.signature(value).return_annotation
    assert returns is not inspect.Signature.empty, f"{name} has no return type"
    if returns not in ("None", None):
        assert found & {"Returns", "Yields"}, f"{name} returns {returns} but has no Returns section"


@pytest.mark.parametrize("name", sorted(n for n, v in PUBLIC.items() if inspect.isclass(v)))
def test_public_methods_are_typed_and_say_what_they_take_and_return(name):
    cls = PUBLIC[name]
    missing = []
    for attribute, method in vars(cls).items():
        if attribute.startswith("_") or not inspect.isfunction(method) or not (inspect.getdoc(method) or ""):
            continue
        params = parameters(method)
        found = sections(inspect.getdoc(method))
        if params and "Args" not in found:
            missing.append(f"{attribute}: Args")
        if inspect.signature(method).return_annotation is inspect.Signature.empty:
            missing.append(f"{attribute}: return type")
    assert not missing, f"{name}: {missing}"
