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
   differently would give one run directory two meanings, so that is an error. What an
   overlay changes on purpose is exempt (:data:`OVERLAID`, a study's ``mirrors``): e.g.
   ``config/examples/every_claim_3_seeds.yaml`` gives named grids more seeds through
   ``replicates``. :func:`load_config_files` merges files as Snakemake does.

Within one file YAML has the same silent rule: a key written twice in one mapping keeps its
last value. :func:`load_config_file` refuses that, naming the key and both lines, and
:func:`check_config_files` applies it to the files Snakemake loaded itself. The parameters
of every table entry are checked against the library in :mod:`focalcal.pipeline.entries`.
"""

from __future__ import annotations

import copy
import json
import os
import reprlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from focalcal.catalog import is_logits_file, is_segmentation, is_translation

CONFIG_TABLES = ("datasets", "models", "losses", "recipes", "calibrators")  # the named tables a run's keys point into
OVERLAID = ("report", "replicates")  # top-level keys a later config file may change (config/examples/)
# grid field -> the table its keys refer to
GRID_REFERENCES = {"datasets": "datasets", "models": "models", "losses": "losses", "calibrators": "calibrators"}


# What a config file may be before it is validated: the shipped ones are under 20 kB and expand
# to a few thousand values. The YAML aliases of a "billion laughs" file expand a few hundred
# bytes to billions of values (and jsonschema formats every one into its error message).
MAX_CONFIG_BYTES = 1 << 20
MAX_CONFIG_VALUES = 200_000
MAX_GRID_RUNS = 10_000  # runs one grid expands to (every paper's studies together: about 1,000)
SHOWN_VALUE = 60  # characters of a value an error message quotes
_BOUNDED_REPR = reprlib.Repr()
_BOUNDED_REPR.maxlevel, _BOUNDED_REPR.maxlist, _BOUNDED_REPR.maxdict = 3, 8, 8
_BOUNDED_REPR.maxstring = _BOUNDED_REPR.maxother = SHOWN_VALUE


class ConfigError(ValueError):
    """A workflow config that cannot be run; the message names the key."""


def load_config_file(path) -> dict:
    """A YAML (or JSON) config file as a dict; a key given twice in one mapping, a file over
    :data:`MAX_CONFIG_BYTES` or one that expands to over :data:`MAX_CONFIG_VALUES` is a ConfigError."""
    size = os.path.getsize(path)
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: {size:,} bytes; a workflow config is at most {MAX_CONFIG_BYTES:,} (the shipped ones "
                          "are under 20 kB): refused before validation")
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
        values = _expanded_size(node, {})
        if values > MAX_CONFIG_VALUES:
            raise ConfigError(f"{self.name}: expands to {values:,} values through its YAML aliases (*name); a workflow "
                              f"config has at most {MAX_CONFIG_VALUES:,}: refused before validation")
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


def _expanded_size(node, sizes: dict) -> int:
    """How many values ``node`` stands for once every alias is expanded, counted on the node
    graph (each node once), so that a billion laughs costs microseconds, not gigabytes."""
    if id(node) not in sizes:
        sizes[id(node)] = 1  # a cycle (a recursive alias) counts once; it cannot become JSON anyway
        if isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = node.value
        else:
            children = []
        sizes[id(node)] = 1 + sum(_expanded_size(child, sizes) for child in children)
    return sizes[id(node)]


def load_schema(path) -> dict:
    """The config schema with its registry-name enums and the default calibrators filled from
    :mod:`focalcal.catalog` (and the theory figures' grids), and what a recipe, ``device`` and
    ``compile`` may hold from the constraints the trainer checks (:mod:`focalcal.training.config`)."""
    from focalcal.catalog import THEORY_GRIDS, default_calibrators, schema_enums
    from focalcal.training.config import execution_schema, recipe_schema

    schema = load_config_file(path)
    for name, values in schema_enums().items():
        schema["$defs"][name] = {"enum": values}
    schema["$defs"]["recipe"] = recipe_schema()
    for key, generated in execution_schema().items():
        schema["properties"][key].update(generated)
    schema["properties"]["calibrators"]["default"] = default_calibrators()
    schema["properties"]["report"]["properties"]["theory_grid"].update(enum=list(THEORY_GRIDS), default=THEORY_GRIDS[0])
    return schema


def validate_config(config: dict, schema: dict | str | Path) -> dict:
    """Check ``config`` against ``schema`` and its own cross-references; fill defaults in place."""
    if not isinstance(schema, dict):
        schema = load_schema(schema)
    _validate_schema(config, schema)
    apply_overlays(config)
    _check_references(config)
    return config


def apply_overlays(config: dict) -> None:
    """What an overlay config may change without copying a study: ``replicates`` (a named grid's
    seeds or folds, and what it mirrors) and a claim note removed with null."""
    report = config.setdefault("report", {})
    report["claim_notes"] = {key: text for key, text in (report.get("claim_notes") or {}).items() if text is not None}
    problems = []
    for study_key, study in config.get("studies", {}).items():
        names = [grid["name"] for grid in study.get("grids", []) if "name" in grid]
        problems += [f"studies.{study_key}.grids: two grids are named {name!r}; a name picks one grid"
                     for name in sorted({name for name in names if names.count(name) > 1})]
    for study_key, grids in config.get("replicates", {}).items():
        study = config["studies"].get(study_key)
        if study is None:
            problems.append(f"replicates.{study_key}: unknown studies key; defined: {', '.join(config['studies'])}")
            continue
        named = {grid["name"]: grid for grid in study["grids"] if "name" in grid}
        for name, change in grids.items():
            where = f"replicates.{study_key}.{name}"
            grid = named.get(name)
            if grid is None:
                problems.append(f"{where}: studies.{study_key} has no grid named {name!r}; named grids: "
                                f"{', '.join(named) or 'none (give a grid a name)'}")
                continue
            kind = "folds" if "folds" in grid else "seeds"
            other = {"seeds", "folds"} - {kind}
            if other & set(change):
                problems.append(f"{where}: the grid runs {kind}, so give {kind}, not {other.pop()}")
                continue
            grid.update(change)
    if problems:
        raise ConfigError("invalid workflow config:\n  " + "\n  ".join(problems))


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
    """One line for one schema error, naming its key; values are cut to :data:`SHOWN_VALUE` characters."""
    where = key_path(error.absolute_path) or "<top level>"
    if error.validator == "enum":
        return f"{where}: {shorten(error.instance)} is not allowed; allowed values: {', '.join(map(str, error.validator_value))}"
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        unexpected = sorted(map(str, set(error.instance) - set(allowed)))
        return f"{where}: unknown key(s) {shorten(unexpected)}; allowed keys: {', '.join(allowed)}"
    if error.validator in ("maximum", "maxItems"):
        limit = "items" if error.validator == "maxItems" else "the value"
        reason = error.schema.get("description") or error.parent and error.parent.schema.get("description")
        return (f"{where}: {shorten(error.instance)} is over the limit ({limit} at most {error.validator_value})"
                + (f": {reason}" if reason else ""))
    if error.validator == "type":
        types = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        return f"{where}: {shorten(error.instance)} is not of type {', '.join(map(repr, types))}"
    if error.validator == "required":
        return f"{where}: {error.message}"
    if error.validator == "oneOf" and all(set(option) == {"required"} for option in error.validator_value):
        keys = " or ".join(repr(option["required"][0]) for option in error.validator_value)
        return f"{where}: give exactly one of {keys}"
    if error.validator == "pattern" or (error.validator == "propertyNames"):
        return f"{where}: {error.message} (keys become directory names: letters, digits, '_', '.', '-')"
    return f"{where}: {shorten(error.message, quoted=False)}"


def shorten(value, quoted: bool = True) -> str:
    """``repr(value)`` (or ``value``, a message) cut to :data:`SHOWN_VALUE` characters: an error
    line names the key and shows the start of a value, never a whole expanded document."""
    text = _BOUNDED_REPR.repr(value) if quoted else str(value)  # bounded: never builds the whole repr
    return text if len(text) <= SHOWN_VALUE else text[:SHOWN_VALUE] + "..."


def key_path(parts: Iterable) -> str:
    """``['studies', 'x', 'grids', 0]`` -> ``studies.x.grids[0]``."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def segmentation_keys(config: dict, grid: dict) -> list[str]:
    return [key for key in grid["datasets"] if key in config["datasets"] and is_segmentation(config["datasets"][key])]


def translation_keys(config: dict, grid: dict) -> list[str]:
    return [key for key in grid["datasets"] if key in config["datasets"] and is_translation(config["datasets"][key])]


def _token_calibrator_problems(config: dict, grid: dict, where: str) -> list[str]:
    """A translation grid's calibrators must be fittable on its token profile (uncalibrated, TS by val ECE or NLL)."""
    from focalcal.pipeline.translation import token_objective

    problems = []
    for key in grid.get("calibrators", []):
        if key in config["calibrators"]:
            try:
                token_objective(key, {"build": config["calibrators"][key]})
            except ValueError as error:
                problems.append(f"{where}.calibrators: {error}")
    return problems


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
            translation = translation_keys(config, grid)
            if translation and (imported or len(translation) != len(grid["datasets"])):
                problems.append(f"{where}: translation corpora {translation} are trained (no logits_file models) and "
                                "kept in grids of their own")
            if translation:
                problems += _token_calibrator_problems(config, grid, where)
                if 1.0 not in [float(t) for t in config.get("decode_temperatures", [1.0])]:
                    problems.append(f"decode_temperatures: {config['decode_temperatures']} lacks 1, the temperature of "
                                    f"the model as trained, which {where} decodes")
            runs = len(grid["datasets"]) * len(grid["models"]) * len(grid["losses"]) * (
                grid["folds"] if "folds" in grid else len(grid["seeds"]))
            if runs > MAX_GRID_RUNS:
                problems.append(f"{where}: {runs:,} runs (datasets x models x losses x seeds or folds); a grid has at "
                                f"most {MAX_GRID_RUNS:,}, more than every paper's studies together: split it, or fix "
                                "the typo")
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


def load_config_files(paths: Iterable) -> dict:
    """Several config files merged as ``snakemake --configfile a.yaml b.yaml`` merges them (a
    mapping key by key, anything else replaced by the later file), after
    :func:`check_config_files`' checks: a base config and its overlays, outside Snakemake."""
    configs = {Path(path): load_config_file(path) for path in paths}
    if not configs:
        raise ValueError("no config file given")
    _check_conflicts(configs)
    merged: dict = {}
    for loaded in configs.values():
        _merge(merged, loaded)
    return merged


def _merge(into: dict, overlay: dict) -> None:
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)


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
    """(key path, value) of everything a file defines, at the depth Snakemake merges it. What an
    overlay may change on purpose is left out: the report's options, ``replicates``, and the
    words a study says it mirrors."""
    for top, value in config.items():
        if top in OVERLAID:
            continue
        if top in CONFIG_TABLES and isinstance(value, dict):
            for key, entry in value.items():
                yield f"{top}.{key}", entry
        elif top == "studies" and isinstance(value, dict):
            for key, study in value.items():
                if not isinstance(study, dict):
                    yield f"{top}.{key}", study
                    continue
                yield from ((f"{top}.{key}.{field}", entry) for field, entry in study.items() if field not in ("mirrors", "notes"))
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
