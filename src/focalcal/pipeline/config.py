"""Validate a workflow config before any job runs.

Three layers, each failing with a message that names the offending key:

1. :func:`validate_config` — the JSON schema (``workflow/schemas/config.schema.yaml``):
   types, allowed names (with the list of allowed values), unknown keys; defaults are
   filled in place, so the rest of the workflow never guesses a missing value.
2. :func:`validate_config` then checks what a schema cannot: every key a study names
   exists in its table, study bin counts are among the computed ones, calibrator chains
   point at a temperature scaling, claim notes state no measured figure
   (:mod:`focalcal.claims.notes`).
3. :func:`check_configfile_conflicts` — Snakemake merges several ``--configfile`` files
   silently, the last one winning key by key; two files that define the same table key
   differently would give one run directory two meanings, so that is an error.

Within one file YAML has the same silent rule: a key written twice in one mapping keeps its
last value. :func:`load_config_file` refuses that, naming the key and both lines, and
:func:`check_config_files` applies it to the files Snakemake loaded itself. The parameters
of every table entry are checked against the library in :mod:`focalcal.pipeline.entries`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from focalcal.catalog import is_logits_file, is_segmentation

TABLES = ("datasets", "models", "losses", "recipes", "calibrators")
# grid field -> the table its keys refer to
GRID_REFERENCES = {"datasets": "datasets", "models": "models", "losses": "losses", "calibrators": "calibrators"}


class ConfigError(ValueError):
    """A workflow config that cannot be run; the message names the key."""


def load_config_file(path) -> dict:
    """A YAML (or JSON) config file as a dict; a key given twice in one mapping is a ConfigError."""
    with open(path, encoding="utf-8") as stream:
        loader = UniqueKeyLoader(stream)
        try:
            loaded = loader.get_single_data()
        finally:
            loader.dispose()
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: a workflow config must be a mapping, got {type(loaded).__name__}")
    return loaded


class UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping, at any depth.

    ``yaml.safe_load`` keeps the last value: ``focal1`` written with gamma 1 and again with
    gamma 5 would silently train with 5. The error names every such key with both 1-based
    lines. Keys brought in by a YAML merge (``<<: *base``) may be overridden, as YAML intends.
    """

    def construct_document(self, node):
        duplicates = self._duplicates(node, (), set())
        if duplicates:
            raise ConfigError(f"{self.name}: a key given twice keeps only its last value; remove or rename one:\n  "
                              + "\n  ".join(duplicates))
        return super().construct_document(node)

    def _duplicates(self, node, parents: tuple, seen: set) -> list[str]:
        """``duplicate key 'k' at lines 12 and 14 (under losses)`` for each key given twice under ``node``."""
        if id(node) in seen:  # an alias: walked once
            return []
        seen.add(id(node))
        problems = []
        if isinstance(node, yaml.MappingNode):
            first_line: dict = {}
            for key_node, value_node in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    problems += self._duplicates(value_node, parents, seen)
                    continue
                if not isinstance(key_node, yaml.ScalarNode):  # a mapping or list as a key: nothing to compare
                    problems += self._duplicates(value_node, (*parents, "?"), seen)
                    continue
                key = self.construct_object(key_node)
                line = key_node.start_mark.line + 1
                if key in first_line:
                    where = f"under {key_path(parents)}" if parents else "at the top level"
                    problems.append(f"duplicate key {key!r} at lines {first_line[key]} and {line} ({where})")
                else:
                    first_line[key] = line
                problems += self._duplicates(value_node, (*parents, key), seen)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                problems += self._duplicates(item, (*parents, index), seen)
        return problems


def load_schema(path) -> dict:
    """The config schema with its registry-name enums filled from :mod:`focalcal.catalog`."""
    from focalcal.catalog import schema_enums

    schema = load_config_file(path)
    for name, values in schema_enums().items():
        schema["$defs"][name] = {"enum": values}
    return schema


def validate_config(config: dict, schema: dict | str | Path) -> dict:
    """Check ``config`` against ``schema`` and its own cross-references; fill defaults in place."""
    if not isinstance(schema, dict):
        schema = load_schema(schema)
    _validate_schema(config, schema)
    _check_references(config)
    return config


def _validator_filling_defaults():
    import jsonschema

    base = jsonschema.Draft202012Validator
    validate_properties = base.VALIDATORS["properties"]

    def properties_with_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, subschema in properties.items():
                if name not in instance and isinstance(subschema, dict) and "default" in subschema:
                    instance[name] = copy.deepcopy(subschema["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(base, {"properties": properties_with_defaults})


def _validate_schema(config: dict, schema: dict) -> None:
    validator = _validator_filling_defaults()(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        lines = [_describe(error) for error in errors[:10]]
        more = f"\n  ... and {len(errors) - 10} more" if len(errors) > 10 else ""
        raise ConfigError("invalid workflow config:\n  " + "\n  ".join(lines) + more)


def _describe(error) -> str:
    where = key_path(error.absolute_path) or "<top level>"
    if error.validator == "enum":
        return f"{where}: {error.instance!r} is not allowed; allowed values: {', '.join(map(str, error.validator_value))}"
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        unexpected = sorted(set(error.instance) - set(allowed))
        return f"{where}: unknown key(s) {unexpected}; allowed keys: {', '.join(allowed)}"
    if error.validator == "required":
        return f"{where}: {error.message}"
    if error.validator == "oneOf" and all(set(option) == {"required"} for option in error.validator_value):
        keys = " or ".join(repr(option["required"][0]) for option in error.validator_value)
        return f"{where}: give exactly one of {keys}"
    if error.validator == "pattern" or (error.validator == "propertyNames"):
        return f"{where}: {error.message} (keys become directory names: letters, digits, '_', '.', '-')"
    return f"{where}: {error.message}"


def key_path(parts: Iterable) -> str:
    """``['studies', 'x', 'grids', 0]`` -> ``studies.x.grids[0]``."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def segmentation_keys(config: dict, grid: dict) -> list[str]:
    return [key for key in grid["datasets"] if key in config["datasets"] and is_segmentation(config["datasets"][key])]


def _check_references(config: dict) -> None:
    problems = []
    for study_key, study in config["studies"].items():
        for index, grid in enumerate(study["grids"]):
            where = f"studies.{study_key}.grids[{index}]"
            for field, table in GRID_REFERENCES.items():
                for key in grid.get(field, []):
                    if key not in config[table]:
                        problems.append(f"{where}.{field}: unknown {table} key {key!r}; defined: {', '.join(config[table])}")
            trained = [key for key in grid["models"] if key in config["models"] and not is_logits_file(config["models"][key])]
            if "recipe" not in grid:
                if trained:
                    problems.append(f"{where}.recipe: missing; models {trained} are trained (only a grid of logits_file "
                                    "models needs none)")
            elif grid["recipe"] not in config["recipes"]:
                problems.append(f"{where}.recipe: unknown recipes key {grid['recipe']!r}; defined: {', '.join(config['recipes'])}")
            segmentation = segmentation_keys(config, grid)
            imported = [key for key in grid["models"] if key in config["models"] and key not in trained]
            if imported and segmentation:
                problems.append(f"{where}.models: logits_file models {imported} give classification logits; a "
                                f"segmentation dataset ({segmentation}) needs trained models")
            if segmentation and grid.get("calibrators"):
                problems.append(f"{where}.calibrators: segmentation datasets {segmentation} are evaluated (IoU, Hausdorff "
                                "distance, pixel ECE), not calibrated; list no calibrators in their grids")
            for key in grid["datasets"]:
                if "folds" in grid and key in config["datasets"] and {"n_folds", "fold"} & set(config["datasets"][key]):
                    problems.append(f"{where}.folds: datasets.{key} sets n_folds/fold itself; give folds in one place")
        bins = study.get("ece_bins")
        if bins and not set(bins) <= set(config["ece_bins"]):
            problems.append(
                f"studies.{study_key}.ece_bins: {sorted(set(bins) - set(config['ece_bins']))} not among the computed "
                f"ece_bins {config['ece_bins']}; add them to the top-level ece_bins"
            )
    from focalcal.claims.notes import note_problems

    problems += note_problems((config.get("report") or {}).get("claim_notes") or {})
    for recipe_key in config["training"]["by_recipe"]:
        if recipe_key not in config["recipes"]:
            problems.append(f"training.by_recipe.{recipe_key}: unknown recipes key; defined: {', '.join(config['recipes'])}")
    for key, spec in config["calibrators"].items():
        after = spec.get("after")
        if after is None:
            continue
        target = config["calibrators"].get(after)
        if target is None:
            problems.append(f"calibrators.{key}.after: unknown calibrators key {after!r}; defined: {', '.join(config['calibrators'])}")
        elif target["name"] != "temperature_scaling" or "after" in target:
            problems.append(
                f"calibrators.{key}.after: {after!r} must be a temperature_scaling calibrator without 'after' "
                f"(its fitted temperature rescales the logits), got {target['name']!r}"
            )
    if problems:
        raise ConfigError("invalid workflow config:\n  " + "\n  ".join(problems))



def check_config_files(paths: Iterable) -> None:
    """Every config file Snakemake loaded: no key given twice in a file, no key two files define differently.

    Snakemake reads the files with its own YAML loader (the last duplicate wins there), so
    the Snakefile passes them here: ``--configfile`` ones, else the default ``configfile:``.
    """
    _check_conflicts({Path(path): load_config_file(path) for path in paths})  # each file read once


def check_configfile_conflicts(paths: Iterable) -> None:
    """Fail if two config files define one table or study key with different content.

    Snakemake merges ``--configfile a.yaml b.yaml`` key by key, so a recipe defined in both
    files with different epochs would silently take b's value in a's runs.
    """
    paths = [Path(p) for p in paths]
    if len(paths) >= 2:
        _check_conflicts({path: load_config_file(path) for path in paths})


def _check_conflicts(configs: dict[Path, dict]) -> None:
    """``check_configfile_conflicts`` on files already loaded (path -> content, in merge order)."""
    seen: dict[str, tuple[Path, Any]] = {}
    problems = []
    for path, loaded in configs.items():
        for where, value in _definitions(loaded):
            if where in seen:
                first_path, first_value = seen[where]
                if _canonical(first_value) != _canonical(value):
                    problems.append(f"{where}: {first_path} defines {first_value!r}, {path} defines {value!r}")
            else:
                seen[where] = (path, value)
    if problems:
        raise ConfigError(
            "config files define the same key differently (the merged config would silently take one; "
            "rename one of them):\n  " + "\n  ".join(problems)
        )


def _definitions(config: dict):
    """(key path, value) of everything a file defines, at the depth Snakemake merges it."""
    for top, value in config.items():
        if top in (*TABLES, "studies") and isinstance(value, dict):
            for key, entry in value.items():
                yield f"{top}.{key}", entry
        elif top == "training" and isinstance(value, dict):
            for key, entry in value.items():
                if key == "by_recipe" and isinstance(entry, dict):
                    yield from ((f"training.by_recipe.{recipe}", e) for recipe, e in entry.items())
                else:
                    yield f"training.{key}", entry
        else:
            yield top, value


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True)
