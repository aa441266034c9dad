"""The package as users get it: a core that imports neither torch nor matplotlib, extras by use,
ranges (not pins) in the metadata, the reproduction's exact versions in requirements/lock.txt,
and one version, which CITATION.cff and the CHANGELOG repeat.

CI also builds the wheel and installs it into clean environments (.ci/package_test.sh); these
tests check what can be read from the checkout."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import focalcal
from focalcal.core.extras import EXTRA_OF, install_hint

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXTRAS = PROJECT["optional-dependencies"]
LOCK = ROOT / "requirements" / "lock.txt"
LOCK_LINE = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s;\\]+)")

#: What the core install serves, and what it must not pull in.
CORE_MODULES = ("focalcal.metrics", "focalcal.calibration", "focalcal.theory")
HEAVY = ("torch", "matplotlib", "pandas", "seaborn", "sklearn", "relplot", "yaml")


def lock_versions() -> dict[str, str]:
    versions = {}
    for line in LOCK.read_text().splitlines():
        match = LOCK_LINE.match(line)
        if match:
            versions[canonicalize_name(match.group(1))] = match.group(2)
    return versions


def own_requirements(names) -> list[Requirement]:
    """The third-party requirements of the core and the named extras (self-references expanded)."""
    seen, out, todo = set(), [], [None, *names]
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for text in PROJECT["dependencies"] if extra is None else EXTRAS[extra]:
            requirement = Requirement(text)
            if canonicalize_name(requirement.name) == "focalcal":
                todo.extend(requirement.extras)
            else:
                out.append(requirement)
    return out


def test_core_dependencies_are_numpy_scipy_threadpoolctl_as_ranges_with_a_lower_bound():
    names = sorted(canonicalize_name(Requirement(r).name) for r in PROJECT["dependencies"])
    assert names == ["numpy", "scipy", "threadpoolctl"]


@pytest.mark.parametrize("extra", [None, *EXTRAS])
def test_every_requirement_is_a_range_with_a_lower_bound_never_a_pin(extra):
    for requirement in PROJECT["dependencies"] if extra is None else EXTRAS[extra]:
        requirement = Requirement(requirement)
        if canonicalize_name(requirement.name) == "focalcal":
            assert requirement.extras <= set(EXTRAS), f"{extra}: {requirement} names an extra that does not exist"
            continue
        operators = {spec.operator for spec in requirement.specifier}
        assert ">=" in operators, f"[{extra}] {requirement} has no lower bound"
        assert not operators & {"==", "===", "~="}, f"[{extra}] {requirement} is pinned: the lock pins, the library ranges"


def test_extras_are_named_by_use():
    assert {"torch", "plots", "translation", "workflow", "all", "test", "docs", "dev"} <= set(EXTRAS)


@pytest.mark.parametrize("package", sorted(EXTRA_OF))
def test_each_optional_package_is_in_the_extra_its_error_names(package):
    distribution = {"sklearn": "scikit-learn"}.get(package, package)
    extra = EXTRA_OF[package]
    assert canonicalize_name(distribution) in {canonicalize_name(r.name) for r in own_requirements([extra])}, (
        f"{install_hint(package)} would not install {distribution}")


def test_the_lock_pins_every_requirement_of_the_reproduction_inside_its_range():
    """requirements/lock.txt (pip-compile --generate-hashes over [all,dev]) holds an exact,
    hashed version of every requirement, and each satisfies the library's declared range."""
    locked = lock_versions()
    text = LOCK.read_text()
    for requirement in own_requirements(["all", "dev"]):
        name = canonicalize_name(requirement.name)
        assert name in locked, f"requirements/lock.txt does not pin {requirement.name}"
        assert requirement.specifier.contains(locked[name], prereleases=True), (
            f"lock pins {name}=={locked[name]}, outside pyproject's {requirement}")
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n\n", 1)[-1])
    pinned = [block for block in blocks if LOCK_LINE.match(block)]
    assert pinned and all("--hash=sha256:" in block for block in pinned), "every locked line carries its hashes"


def test_the_lock_keeps_the_golden_numerics_versions():
    """tests/golden's hashes were measured under these; a new torch or numpy is a new golden run."""
    locked = lock_versions()
    assert {name: locked[name] for name in ("torch", "numpy", "scipy")} == {
        "torch": "2.14.1", "numpy": "2.4.6", "scipy": "1.17.1"}


def test_version_is_declared_once_and_repeated_where_citations_read_it():
    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["dynamic"]
    assert "version" not in PROJECT and "version" in PROJECT["dynamic"]
    assert build["version"] == {"attr": "focalcal.__version__"}
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["version"] == focalcal.__version__
    assert citation["license"] == PROJECT["license"] == "MIT"
    # Keep a Changelog: an optional [Unreleased] section sits above the newest release's heading
    headings = re.findall(r"^## \[([^\]]+)\]", (ROOT / "CHANGELOG.md").read_text(), flags=re.MULTILINE)
    released = [heading for heading in headings if heading != "Unreleased"]
    assert released and released[0] == focalcal.__version__
    assert "Unreleased" not in headings[1:], "[Unreleased] is the first section of CHANGELOG.md or absent"


def test_license_file_and_project_urls():
    assert "MIT License" in (ROOT / "LICENSE").read_text()
    assert PROJECT["license-files"] == ["LICENSE"]
    assert {"Homepage", "Documentation", "Repository", "Issues", "Changelog"} <= set(PROJECT["urls"])


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_the_core_modules_import_neither_torch_nor_matplotlib():
    """Importing and using the core (an ECE, a fitted temperature, Ψ) loads none of the extras."""
    code = f"""
import sys
import numpy as np
import focalcal.metrics, focalcal.calibration, focalcal.theory
rng = np.random.default_rng(0)
logits = rng.normal(size=(200, 4)) * 3
labels = rng.integers(0, 4, 200)
probs = focalcal.calibration.TemperatureScaling().fit(logits, labels).transform(logits)
focalcal.metrics.ece(probs, labels)
focalcal.metrics.nll(probs, labels)
focalcal.theory.psi(probs, 2.0)
print(sorted(m for m in {HEAVY!r} if m in sys.modules))
"""
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("module", ["focalcal.losses", "focalcal.models"])
def test_without_torch_the_torch_modules_raise_one_line_naming_the_extra(module):
    result = run_python(f"import sys; sys.modules['torch'] = None\nimport {module}")
    last = result.stderr.strip().splitlines()[-1]
    assert result.returncode != 0
    assert last == f"ModuleNotFoundError: {module} needs torch, which this install lacks: pip install 'focalcal[torch]'"


def test_without_relplot_smooth_ece_names_the_plots_extra():
    code = """
import importlib.abc, importlib.machinery, sys

class NotInstalled(importlib.abc.MetaPathFinder):  # what the import system finds for a package pip left out
    def find_spec(self, name, path=None, target=None):
        return importlib.machinery.ModuleSpec(name, None) if name == "relplot" else None

sys.meta_path.insert(0, NotInstalled())
import numpy as np
from focalcal.metrics import smooth_ece
smooth_ece(np.array([[0.9, 0.1], [0.2, 0.8]]), np.array([0, 1]))
"""
    result = run_python(code)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1] == (
        "ModuleNotFoundError: smooth ECE needs relplot, which this install lacks: pip install 'focalcal[plots]'")
