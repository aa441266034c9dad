"""docs/translation.md's "Where the track lives" names every module of the translation track,
and only modules that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
HEADING = "## Where the track lives"


def track_map() -> set[str]:
    """The modules and workflow files the map's table names in its module column."""
    text = (ROOT / "docs" / "translation.md").read_text(encoding="utf-8")
    assert HEADING in text, f"docs/translation.md has no section {HEADING!r}"
    section = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|") for line in section.splitlines() if line.startswith("| ") and "`" in line]
    return {name for row in rows for name in re.findall(r"`([^`]+)`", row[2])}


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def translation_modules() -> set[str]:
    """Every module whose name says translation, or that lives in focalcal/translation/, and
    every workflow file whose name says it."""
    python = {module_name(path) for path in SRC.rglob("*.py")
              if "translation" in path.stem or "translation" in path.relative_to(SRC).parts}
    workflow = {path.relative_to(ROOT).as_posix() for path in (ROOT / "workflow").rglob("*translation*")}
    return python | workflow


def exists(name: str) -> bool:
    if "/" in name:
        return (ROOT / name).is_file()
    path = SRC.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def test_every_module_of_the_track_is_on_the_map():
    modules = translation_modules()
    assert {"focalcal.translation.bleu", "focalcal.data.translation", "workflow/rules/translation.smk"} <= modules
    missing = sorted(modules - track_map())
    assert not missing, f"docs/translation.md ({HEADING}) does not name {missing}"


def test_the_map_names_only_modules_that_exist():
    named = track_map()
    assert len(named) >= len(translation_modules())
    gone = sorted(name for name in named if not exists(name))
    assert not gone, f"docs/translation.md ({HEADING}) names modules that do not exist: {gone}"
