"""docs/own-logits.md's table of the calibrators `focalcal calibrate` offers comes from the catalog.

docs/hooks/calibrators.py renders it at build time from the command's tables (``commands.calibrator_choice``,
which reads ``catalog.ROLES``); the page holds only the marker, so a role declared in the
catalog is on the page, and the page lists no calibrators by hand.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import replace
from types import SimpleNamespace

from conftest import ROOT

from focalcal import catalog
from focalcal.commands import calibrator_choice

PAGE = ROOT / "docs" / "own-logits.md"


def _hook():
    spec = importlib.util.spec_from_file_location("docs_hook_calibrators", ROOT / "docs" / "hooks" / "calibrators.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def table_rows(markdown: str) -> dict[str, tuple[str, str, str]]:
    """key -> (label, runs, cost) of every row of the calibrators' table in ``markdown``."""
    rows = re.findall(r"^\| `([a-z_]+)` \| (.*?) \| (.*?) \| (.*?) \|$", markdown, re.MULTILINE)
    return {key: (label.replace("\\|", "|"), runs, cost) for key, label, runs, cost in rows}


def hand_lists(markdown: str, keys) -> list[str]:
    """Paragraphs of ``markdown`` (outside code blocks) that name three or more of ``keys`` as code."""
    text = re.sub(r"```.*?```", "", markdown, flags=re.DOTALL)
    return [paragraph for paragraph in text.split("\n\n")
            if len({key for key in keys if f"`{key}`" in paragraph}) >= 3]


def test_the_page_shows_every_offered_calibrator_as_the_catalog_declares_it():
    hook = _hook()
    rendered = hook.on_page_markdown(PAGE.read_text(), SimpleNamespace(file=SimpleNamespace(src_uri=hook.PAGE)))
    rows = table_rows(rendered)
    offered = [key for key, role in catalog.ROLES.items() if role.cli]
    assert list(rows) == offered == list(calibrator_choice.CALIBRATORS)
    for key, (label, runs, cost) in rows.items():
        role = catalog.ROLES[key]
        assert (label, cost) == (role.label, role.cost)
        assert runs.startswith("by default") == (role.cli == "default") == (key in calibrator_choice.DEFAULT_CALIBRATORS)
    assert rows["psi"][1] == "by default, given the training γ (`--gamma`)"
    assert rows["vector_scaling"][1] == f"by default up to {calibrator_choice.MAX_CLASSES_QUADRATIC} classes"
    assert rows["dirichlet"][1] == "with `--calibrators`"


def test_a_role_declared_in_the_catalog_is_on_the_page(monkeypatch):
    new = replace(catalog.ROLES["ts_nll"], label="TS | new", cost="O(N K) once")
    monkeypatch.setattr(calibrator_choice, "CALIBRATORS", {**calibrator_choice.CALIBRATORS, "ts_new": {"name": "x"}})
    monkeypatch.setattr(calibrator_choice, "LABELS", {**calibrator_choice.LABELS, "ts_new": new.label})
    monkeypatch.setattr(calibrator_choice, "COSTS", {**calibrator_choice.COSTS, "ts_new": new.cost})
    assert table_rows(_hook().calibrators_table())["ts_new"] == ("TS | new", "with `--calibrators`", "O(N K) once")


def test_the_page_lists_no_calibrators_by_hand():
    text = PAGE.read_text()
    assert _hook().MARKER in text
    assert hand_lists(text, calibrator_choice.CALIBRATORS) == []


def test_no_page_lists_the_calibrator_roles_by_hand():
    pages = [ROOT / "README.md", ROOT / "config" / "README.md",
             *(path for path in sorted((ROOT / "docs").rglob("*.md")) if "node_modules" not in path.parts)]
    assert {path.relative_to(ROOT).as_posix(): hand_lists(path.read_text(), catalog.ROLES) for path in pages} == {
        path.relative_to(ROOT).as_posix(): [] for path in pages}


def test_the_hand_list_guard_finds_a_list_come_back():
    listed = PAGE.read_text() + "\nBy default: uncalibrated, TS by NLL; also `dirichlet`, `ets` and `beta` with `--calibrators`.\n"
    assert len(hand_lists(listed, calibrator_choice.CALIBRATORS)) == 1
