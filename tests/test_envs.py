"""workflow/envs/*.yaml: they parse, every rule points at one, their pins agree with
requirements/lock.txt (the reproduction's exact versions), they pin every package focalcal's own
install brings, and each installs focalcal from the checkout the workflow names."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

from focalcal.paths import CHECKOUT_ENV

ROOT = Path(__file__).resolve().parents[1]
ENVS = sorted((ROOT / "workflow" / "envs").glob("*.yaml"))
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)$")
FOCALCAL = f"-e ${{{CHECKOUT_ENV}}}"  # pip expands the variable, which the workflow sets


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_pins() -> dict[str, str]:
    """requirements/lock.txt's exact versions (lines ``name==version \\`` followed by their hashes)."""
    pins = {}
    for line in (ROOT / "requirements" / "lock.txt").read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;\\]+)", line)
        if match:
            pins[normalise(match.group(1))] = match.group(2)
    return pins


def core_requirements() -> list[str]:
    """What ``-e ${FOCALCAL_CHECKOUT}`` installs with focalcal: its core dependencies, by name."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [normalise(re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0]) for requirement in project["dependencies"]]


def pip_entries(path: Path) -> list[str]:
    env = yaml.safe_load(path.read_text())
    return [entry for dependency in env["dependencies"] if isinstance(dependency, dict) for entry in dependency["pip"]]


def env_pins(path: Path) -> dict[str, str]:
    pins = {}
    for entry in pip_entries(path):
        if entry != FOCALCAL:
            match = PIN.match(entry)
            assert match, f"{path.name}: pip requirement {entry!r} is not pinned with =="
            pins[normalise(match.group(1))] = match.group(2)
    return pins


def test_there_is_one_env_per_rule_family():
    assert [p.name for p in ENVS] == ["analysis.yaml", "report.yaml", "torch.yaml"]


@pytest.mark.parametrize("path", ENVS, ids=lambda p: p.name)
def test_env_parses_and_pins_agree_with_the_lock(path):
    env = yaml.safe_load(path.read_text())
    assert env["name"].startswith("focalcal-")
    assert "conda-forge" in env["channels"]
    python = [d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python")]
    assert python == ["python=3.11"]  # pyproject: requires-python >= 3.11
    pins = env_pins(path)
    assert pins, f"{path.name} pins nothing"
    locked = lock_pins()
    for name, version in pins.items():
        assert name in locked, f"{path.name} pins {name}, which requirements/lock.txt does not"
        assert version == locked[name], f"{path.name}: {name}=={version}, requirements/lock.txt: {name}=={locked[name]}"


@pytest.mark.parametrize("path", ENVS, ids=lambda p: p.name)
def test_env_pins_what_focalcal_and_relplot_bring(path):
    """focalcal's editable install resolves its ranges against the pins above it, so none is left
    to pip's newest; relplot (smooth ECE, every family's metrics) comes with its plotting deps."""
    pins = env_pins(path)
    for name in [*core_requirements(), "relplot", "matplotlib", "seaborn", "pandas"]:
        assert name in pins, f"{path.name} leaves {name} unpinned"


@pytest.mark.parametrize("path", ENVS, ids=lambda p: p.name)
def test_env_installs_focalcal_editable_from_the_checkout_the_workflow_names(path, tmp_path, monkeypatch):
    """conda hands an env's pip entries to pip as a requirements file; pip expands the variable,
    which the workflow sets to the folder above its Snakefile's: this checkout."""
    from pip._internal.network.session import PipSession
    from pip._internal.req.req_file import parse_requirements

    entries = pip_entries(path)
    assert entries[-1] == FOCALCAL  # after the pins it must agree with
    requirements = tmp_path / "condaenv.requirements.txt"
    requirements.write_text("\n".join(entries) + "\n")
    monkeypatch.setenv(CHECKOUT_ENV, str(ROOT))
    editable = [r.requirement for r in parse_requirements(str(requirements), session=PipSession()) if r.is_editable]
    assert editable == [str(ROOT)] and (ROOT / "pyproject.toml").is_file()
    common = (ROOT / "workflow/rules/common.smk").read_text()
    assert "os.environ[paths.CHECKOUT_ENV] = os.path.dirname(workflow.basedir)" in common
    assert (ROOT / "workflow" / "Snakefile").is_file()  # so workflow.basedir's folder is ROOT


def test_every_rule_declares_a_conda_env_that_exists():
    rules = sorted((ROOT / "workflow" / "rules").glob("*.smk"))
    assert rules
    for path in rules:
        text = path.read_text()
        names = re.findall(r"^rule (\w+):", text, flags=re.MULTILINE)
        envs = re.findall(r"^    conda:\n        \"([^\"]+)\"", text, flags=re.MULTILINE)
        assert len(envs) == len(names), f"{path.name}: {len(names)} rules, {len(envs)} conda directives"
        for env in envs:
            assert (path.parent / env).resolve() in [p.resolve() for p in ENVS], f"{path.name}: {env}"
