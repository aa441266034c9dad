"""One declaration per constraint: the config schema's recipe, device and compile are generated
from the constraints the trainer checks (focalcal.training.config), and config/README.md's
defaults and options are those of the code, value by value.

The schema and the trainer are probed with the same values, key by key: each must accept what
the other accepts, but two things JSON schema cannot say (a strictly increasing list; an
integer written as 30.0, which JSON schema counts as an integer and the trainer refuses).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from focalcal.core.constraints import InvalidParameterError
from focalcal.pipeline.config import load_schema
from focalcal.training.config import (
    AVERAGE_CHECKPOINTS_CONSTRAINTS,
    EXECUTION_CONSTRAINTS,
    OPTIMIZER_CONSTRAINTS,
    RECIPE_CONSTRAINTS,
    OptimizerConfig,
    Recipe,
    RunConfig,
)

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = load_schema(ROOT / "workflow" / "schemas" / "config.schema.yaml")
README = (ROOT / "config" / "README.md").read_text()

PROBES = [0, 1, 2, 3, 7, 10_000, 10_001, 100_000, 100_001, -1, 0.5, 1e-9, -0.5, 1.5, True, False, None, "x", "sgd",
          "mean", "crop", "auto", "cuda", "inductor_cudagraphs", [], [1], [1, 2], [0.9, 0.999], [0.9], [0, 1], ["a"],
          {"count": 2, "every_steps": 3}, {"count": 0, "every_steps": 3}, {"count": 2}, {}]
BASE = {"dataset": {"name": "digits"}, "model": {"name": "mlp"}, "loss": {"name": "cross_entropy"}}


def schema_accepts(schema: dict, value) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(value)


def trainer_accepts(run_config: dict) -> bool:
    """Whether the trainer's per-key constraints accept the run config (its checks between keys,
    plain ValueErrors, are not the schema's business)."""
    try:
        RunConfig.from_dict(run_config)
    except InvalidParameterError:
        return False
    except ValueError as error:
        return "must be" not in str(error)
    return True


def recipe_with(key: str, value) -> dict:
    recipe = {"epochs": 12, key: value}
    if key == "lr_schedule" and value == "inverse_sqrt":
        recipe["warmup_steps"] = 4
    return recipe


@pytest.mark.parametrize("key", [k for k in RECIPE_CONSTRAINTS if k != "optimizer"])
def test_the_schema_and_the_trainer_accept_the_same_recipe_values(key):
    schema = SCHEMA["$defs"]["recipe"]
    for value in PROBES:
        if isinstance(value, list) and value != sorted(set(value)) and key == "lr_milestones":
            continue  # strictly increasing: the trainer's alone
        in_schema = schema_accepts(schema, {key: value})
        in_trainer = trainer_accepts({**BASE, "recipe": recipe_with(key, value)})
        assert in_schema == in_trainer, (key, value, in_schema, in_trainer)


@pytest.mark.parametrize("key", list(OPTIMIZER_CONSTRAINTS))
def test_the_schema_and_the_trainer_accept_the_same_optimizer_values(key):
    schema = SCHEMA["$defs"]["recipe"]
    for value in PROBES:
        in_schema = schema_accepts(schema, {"optimizer": {key: value}})
        in_trainer = trainer_accepts({**BASE, "recipe": {"optimizer": {key: value}}})
        assert in_schema == in_trainer, (key, value, in_schema, in_trainer)


@pytest.mark.parametrize("key", list(EXECUTION_CONSTRAINTS))
def test_the_schema_and_the_trainer_accept_the_same_execution_values(key):
    for value in PROBES:
        if key == "compile" and isinstance(value, bool):
            continue  # RunConfig.from_dict's yes/no for a run built in Python; a config names the mode
        assert schema_accepts(SCHEMA["properties"][key], value) == trainer_accepts({**BASE, key: value}), (key, value)


def test_the_generated_schema_refuses_what_a_wrong_declaration_would_let_through():
    recipe = SCHEMA["$defs"]["recipe"]
    assert not schema_accepts(recipe, {"epochs": 10_001})  # the bound of the declaration
    assert not schema_accepts(recipe, {"flsd_threshold": 1})
    assert not schema_accepts(recipe, {"average_checkpoints": {"count": 2}})
    assert not schema_accepts(recipe, {"unknown": 1})
    assert schema_accepts(recipe, {"average_checkpoints": None, "lr_step_every": None})
    assert set(recipe["properties"]["average_checkpoints"]["properties"]) == set(AVERAGE_CHECKPOINTS_CONSTRAINTS)
    assert SCHEMA["properties"]["compile"]["enum"] == ["auto", "none", "default", "cudagraphs", "inductor_cudagraphs"]
    assert SCHEMA["properties"]["compile"]["default"] == RunConfig.__dataclass_fields__["compile"].default


# ------------------------------------------------------------------ config/README.md

def readme_rows() -> dict[str, tuple[str, str]]:
    """key -> (default cell, description cell) of the README's three-column tables."""
    rows = {}
    for key, default, description in re.findall(r"^\| `([^`]+)` \| (.*?) \| (.*) \|$", README, flags=re.MULTILINE):
        rows[key] = (default.strip(), description)
    return rows


def readme_value(cell: str):
    text = cell.strip("`")
    value = yaml.safe_load(text)
    if isinstance(value, str):
        try:
            return float(value)  # YAML 1.1 reads 5e-4 as text
        except ValueError:
            return value
    return value


def code_defaults() -> dict:
    """Every default the code declares, by its README key."""
    defaults = {}
    for item in dataclasses.fields(Recipe):
        if item.name != "optimizer":
            defaults[f"recipes.<key>.{item.name}"] = (item.default if item.default is not dataclasses.MISSING
                                                      else item.default_factory())
    for item in dataclasses.fields(OptimizerConfig):
        defaults[f"recipes.<key>.optimizer.{item.name}"] = item.default
    for key, node in SCHEMA["properties"].items():
        if "default" in node and key not in ("calibrators",):
            defaults[key] = node["default"]
        for child, child_node in node.get("properties", {}).items():
            if "default" in child_node:
                defaults[f"{key}.{child}"] = child_node["default"]
    return defaults


def test_every_default_in_the_config_readme_is_the_codes():
    rows = readme_rows()
    checked = 0
    for key, default in code_defaults().items():
        assert key in rows, f"config/README.md has no row for {key}"
        cell = rows[key][0]
        assert cell, f"config/README.md gives no default for {key} (the code's: {default!r})"
        if "…" in cell:  # a long list shown by its ends
            shown = [readme_value(part) for part in cell.strip("`[]").split(", ") if part != "…"]
            assert list(default[:2]) + list(default[-1:]) == shown, key
        else:
            value = readme_value(cell)
            assert value == (list(default) if isinstance(default, tuple) else default), (key, cell, default)
        checked += 1
    assert checked >= 45


def test_every_option_the_code_allows_is_named_in_the_config_readme():
    rows = readme_rows()
    tables = {"recipes.<key>.": RECIPE_CONSTRAINTS, "recipes.<key>.optimizer.": OPTIMIZER_CONSTRAINTS,
              "": EXECUTION_CONSTRAINTS}
    named = 0
    for prefix, constraints in tables.items():
        for key, declared in constraints.items():
            for constraint in declared:
                for option in getattr(constraint, "options", ()):
                    assert f"`{option}`" in rows[prefix + key][1], f"config/README.md's {prefix + key} does not name `{option}`"
                    named += 1
    assert named >= 20


def test_the_readme_check_fails_on_a_wrong_default(monkeypatch):
    monkeypatch.setattr(Recipe.__dataclass_fields__["epochs"], "default", 31)
    with pytest.raises(AssertionError, match="recipes.<key>.epochs"):
        test_every_default_in_the_config_readme_is_the_codes()
