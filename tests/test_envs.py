"""envs/*.yaml: they parse, every rule points at one, and their pins agree with pyproject.toml."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
ENVS = sorted((ROOT / "workflow" / "envs").glob("*.yaml"))
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)$")


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pyproject_pins() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        requirements += [r for r in extra if not r.startswith("focalcal")]
    pins = {}
    for requirement in requirements:
        match = PIN.match(requirement.strip())
        assert match, f"pyproject.toml requirement {requirement!r} is not pinned with =="
        pins[normalise(match.group(1))] = match.group(2)
    return pins


def env_pins(path: Path) -> dict[str, str]:
    env = yaml.safe_load(path.read_text())
    pins = {}
    for dependency in env["dependencies"]:
        entries = dependency["pip"] if isinstance(dependency, dict) else []
        for entry in entries:
            match = PIN.match(entry)
            assert match, f"{path.name}: pip requirement {entry!r} is not pinned with =="
            pins[normalise(match.group(1))] = match.group(2)
    return pins


def test_there_is_one_env_per_rule_family():
    assert [p.name for p in ENVS] == ["analysis.yaml", "report.yaml", "torch.yaml"]


@pytest.mark.parametrize("path", ENVS, ids=lambda p: p.name)
def test_env_parses_and_pins_agree_with_pyproject(path):
    env = yaml.safe_load(path.read_text())
    assert env["name"].startswith("focalcal-")
    assert "conda-forge" in env["channels"]
    python = [d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python")]
    assert python == ["python=3.11"]  # pyproject: requires-python >= 3.11
    pins = env_pins(path)
    assert pins, f"{path.name} pins nothing"
    project = pyproject_pins()
    for name, version in pins.items():
        assert name in project, f"{path.name} pins {name}, which pyproject.toml does not list"
        assert version == project[name], f"{path.name}: {name}=={version}, pyproject.toml: {name}=={project[name]}"


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
