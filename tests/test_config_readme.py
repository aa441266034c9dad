"""config/README.md describes every key the config schema accepts (the schema as validation
loads it: its recipe, device and compile generated from the trainer's constraints)."""

from __future__ import annotations

import re
from pathlib import Path

from focalcal.pipeline.config import load_schema

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def schema_keys(node: dict, defs: dict, prefix: str = "") -> list[str]:
    """Every key path the schema names: ``training.threads``, ``datasets.<key>.name``,
    ``studies.<key>.grids[].seeds``, ... (``<key>``: a table key, ``[]``: a list item)."""
    if "$ref" in node:
        node = defs[node["$ref"].removeprefix("#/$defs/")]
    keys = []
    for name, child in node.get("properties", {}).items():
        path = f"{prefix}.{name}" if prefix else name
        keys += [path, *schema_keys(child, defs, path)]
    if isinstance(node.get("additionalProperties"), dict):
        keys += schema_keys(node["additionalProperties"], defs, f"{prefix}.<key>")
    if isinstance(node.get("items"), dict):
        keys += schema_keys(node["items"], defs, f"{prefix}[]")
    return keys


def test_the_walk_finds_keys_at_every_depth():
    schema = load_schema(SCHEMA)
    keys = schema_keys(schema, schema["$defs"])
    for key in ("data_root", "report.claim_notes", "training.by_recipe.<key>.gpu", "datasets.<key>.name",
                "recipes.<key>.optimizer.betas", "studies.<key>.grids[].folds"):
        assert key in keys, key
    assert len(keys) == len(set(keys))


def test_config_readme_describes_every_schema_key():
    schema = load_schema(SCHEMA)
    described = set(re.findall(r"^\| `([^`]+)` \|", (ROOT / "config" / "README.md").read_text(), flags=re.MULTILINE))
    missing = [key for key in schema_keys(schema, schema["$defs"]) if key not in described]
    assert not missing, f"config/README.md does not describe {missing}"
