"""Facts the library states in one place: each test finds every statement of one fact in the
source (``ast``) or compares the tables that read it, so a second copy fails here."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "focalcal"


def _modules() -> dict[str, ast.Module]:
    return {path.relative_to(PACKAGE).as_posix(): ast.parse(path.read_text(), filename=str(path))
            for path in sorted(PACKAGE.rglob("*.py"))}


def _is_minus_100(node: ast.AST) -> bool:
    return (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
            and isinstance(node.operand, ast.Constant) and node.operand.value == 100)


def ignore_index_statements(modules: dict[str, ast.Module]) -> list[str]:
    """Where an ignore index is written as a number: a literal -100 (not a percentage's factor)
    or a number assigned to a name ending in IGNORE_INDEX."""
    found = []
    for name, tree in modules.items():
        factors = {id(side) for node in ast.walk(tree) if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)
                   for side in (node.left, node.right)}
        for node in ast.walk(tree):
            if _is_minus_100(node) and id(node) not in factors:
                found.append(f"{name}:{node.lineno}")
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                named = any(isinstance(t, ast.Name) and t.id.endswith("IGNORE_INDEX") for t in targets)
                if named and isinstance(node.value, ast.Constant | ast.UnaryOp) and not _is_minus_100(node.value):
                    found.append(f"{name}:{node.lineno}")
    return sorted(set(found))


def test_each_ignore_index_is_written_once_by_its_owner():
    found = ignore_index_statements(_modules())
    assert [place.split(":")[0] for place in found] == ["data/segmentation.py", "data/text.py"], found


def test_the_ignore_index_guard_finds_a_second_copy():
    modules = _modules()
    modules["training/copy.py"] = ast.parse("IGNORE = -100\nSEGMENT_IGNORE_INDEX = 255\nshare = -100 * drop\n")
    found = ignore_index_statements(modules)
    assert "training/copy.py:1" in found and "training/copy.py:2" in found and "training/copy.py:3" not in found


def colour_statements(roles: dict, calibrators: dict) -> list[str]:
    """Each colour value the role and calibrator tables declare, with every declaration of it
    after the first, and every calibrator colour that the role it plays by default overrides."""
    from focalcal import catalog

    seen, found = {}, []
    for table, entries in (("ROLES", roles), ("CALIBRATORS", calibrators)):
        for key, entry in entries.items():
            if entry.colour is None:
                continue
            if entry.colour in seen:
                found.append(f"{table}[{key}] repeats {seen[entry.colour]}'s {entry.colour}")
            seen.setdefault(entry.colour, f"{table}[{key}]")
    for name, entry in calibrators.items():
        played = roles.get(name) or roles.get(catalog.calibrator_role({"build": {"name": name}}))
        if entry.colour is not None and played is not None and played.colour is not None:
            found.append(f"CALIBRATORS[{name}]'s colour is role {played.label!r}'s to give")
    return found


def test_each_calibrator_colour_is_declared_once():
    from focalcal import catalog

    assert colour_statements(catalog.ROLES, catalog.CALIBRATORS) == []


def test_the_colour_guard_finds_a_second_copy():
    from dataclasses import replace

    from focalcal import catalog

    calibrators = {**catalog.CALIBRATORS,
                   "temperature_scaling": replace(catalog.CALIBRATORS["temperature_scaling"], colour="#1565c0")}
    assert len(colour_statements(catalog.ROLES, calibrators)) == 2


def test_a_calibrator_takes_the_colour_of_the_role_it_plays_by_default_else_its_own():
    from focalcal import catalog
    from focalcal.plots import style

    assert style.color_for("temperature_scaling") == style.color_for("ts_nll") == catalog.ROLES["ts_nll"].colour
    assert style.color_for("identity") == style.color_for("raw") == catalog.RAW_COLOR
    assert style.color_for("vector_scaling") == catalog.ROLES["vector_scaling"].colour
    assert style.color_for("focal_temperature_scaling") == catalog.CALIBRATORS["focal_temperature_scaling"].colour
    assert catalog.declared_colour("fts_ece") is None  # a role without a colour: a hash of its key, not its calibrator's


def calibrator_name_lists(modules: dict[str, ast.Module], names: set[str]) -> list[str]:
    """``module:NAME`` of every module-level name bound to a literal list of calibrator names."""
    found = []
    for module, tree in modules.items():
        for node in tree.body:
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
                continue
            value = node.value
            if (isinstance(value, ast.Tuple | ast.List | ast.Set) and value.elts
                    and all(isinstance(item, ast.Constant) and item.value in names for item in value.elts)):
                found.append(f"{module}:{node.targets[0].id}")
    return found


def test_the_fused_kernel_fits_are_listed_once():
    from focalcal import catalog

    assert calibrator_name_lists(_modules(), set(catalog.CALIBRATORS)) == ["commands/shared_work.py:FUSED_KERNEL_FITS"]


def test_the_calibrator_list_guard_finds_a_second_copy():
    from focalcal import catalog

    modules = {**_modules(), "calibration/copy.py": ast.parse('USES_FUSED_KERNELS = ("focal_temperature_scaling",)\n')}
    assert "calibration/copy.py:USES_FUSED_KERNELS" in calibrator_name_lists(modules, set(catalog.CALIBRATORS))


def role_objective_tables(modules: dict[str, ast.Module]) -> list[str]:
    """Where a literal dict keyed by calibrator roles restates their specs' objectives."""
    from focalcal import catalog

    found = []
    for module, tree in modules.items():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Dict) and len(node.keys) > 1 and all(
                    isinstance(key, ast.Constant) and key.value in catalog.ROLES for key in node.keys)):
                continue
            values = [value.value if isinstance(value, ast.Constant) else object() for value in node.values]
            objectives = [catalog.ROLES[key.value].spec.get("objective") for key in node.keys]
            if values == objectives and any(objectives):
                found.append(f"{module}:{node.lineno}")
    return found


def test_the_token_roles_objectives_are_their_specs():
    from focalcal.pipeline.translation import TOKEN_ROLES, token_objective

    assert role_objective_tables(_modules()) == []
    objectives = {role: token_objective(role, {"build": {"name": "identity"}} if role == "raw" else
                                        {"build": {"name": "temperature_scaling", "objective": role[3:]}})
                  for role in TOKEN_ROLES}
    assert objectives == {"raw": None, "ts_ece": "ece", "ts_nll": "nll"}


def test_the_role_objective_guard_finds_a_second_copy():
    modules = {**_modules(), "pipeline/copy.py": ast.parse('OBJECTIVES = {"raw": None, "ts_ece": "ece", "ts_nll": "nll"}\n')}
    assert role_objective_tables(modules) == ["pipeline/copy.py:1"]


def verdict_colour_literals(modules: dict[str, ast.Module]) -> list[str]:
    """Where a verdict's colour is written as a string of its own."""
    from focalcal.claims.verdict import VERDICT_COLORS

    colours = set(VERDICT_COLORS.values())
    return [f"{module}:{node.lineno}" for module, tree in modules.items() for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in colours]


def test_the_verdict_colours_are_written_once():
    assert [place.split(":")[0] for place in verdict_colour_literals(_modules())] == ["claims/verdict.py"] * 4


def test_the_verdict_colour_guard_finds_a_second_copy():
    modules = {**_modules(), "report/copy.py": ast.parse("f\"<li style='color:{'#1a7f37' if way else '#b00020'}'>\"\n")}
    assert verdict_colour_literals(modules)[-2:] == ["report/copy.py:1", "report/copy.py:1"]


def test_a_pair_is_coloured_as_the_verdict_its_way_points_to():
    from types import SimpleNamespace

    import pandas as pd

    from focalcal.claims.verdict import FAILS, HOLDS, VERDICT_COLORS
    from focalcal.report.claims_table import evidence_html

    row = SimpleNamespace(claim="c", study="s", n_pairs=2, n_paper_way=1, mean=0.1, ci_low=float("nan"), ci_high=float("nan"),
                          direction="below", threshold=0.0, interval_contains="", pairs_needed=float("nan"))
    pairs = pd.DataFrame({"claim": ["c", "c"], "study": ["s", "s"], "dataset": ["d", "d"], "model": ["m", "m"],
                          "recipe": ["r", "r"], "seed": [0, 1], "pair": ["a", "b"], "difference": [-1.0, 1.0],
                          "paper_way": [True, False]})
    html = evidence_html(row, pairs)
    assert html.count(f"<li style='color:{VERDICT_COLORS[HOLDS]}'>") == 1
    assert html.count(f"<li style='color:{VERDICT_COLORS[FAILS]}'>") == 1
    assert html.index(VERDICT_COLORS[HOLDS]) < html.index(VERDICT_COLORS[FAILS])


def file_name_literals(modules: dict[str, ast.Module]) -> list[str]:
    """Where a file name of :mod:`focalcal.paths` is written as a string of its own."""
    from focalcal import paths

    names = {value for key, value in vars(paths).items()
             if key.isupper() and isinstance(value, str) and "." in value and "/" not in value}
    return [f"{module}:{node.lineno}" for module, tree in modules.items() for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in names]


def test_the_output_file_names_are_written_once_in_paths():
    assert {place.split(":")[0] for place in file_name_literals(_modules())} == {"paths.py"}


def test_the_file_name_guard_finds_a_second_copy():
    modules = {**_modules(), "copy.py": ast.parse('OUTPUT_FILES = ("calibration.json", "metrics.csv", "index.html")\n')}
    assert [place for place in file_name_literals(modules) if place.startswith("copy.py")] == ["copy.py:1", "copy.py:1"]



def status_literals(modules: dict[str, ast.Module]) -> list[str]:
    """Where a run-health status is written as a string of its own (docstrings aside)."""
    from focalcal.training.health import HEALTH_STATUSES

    docstrings = {id(node.body[0].value) for tree in modules.values() for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [f"{module}:{node.lineno}" for module, tree in modules.items() for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in HEALTH_STATUSES and id(node) not in docstrings]


def test_each_health_status_is_written_once():
    from focalcal.training import health

    assert status_literals(_modules()) == ["training/health.py:41"] * 4
    assert health.HEALTH_STATUSES[0] == health.HEALTHY and health.UNHEALTHY == health.HEALTH_STATUSES[1:]


def test_the_status_guard_finds_a_second_copy():
    modules = {**_modules(), "copy.py": ast.parse('HEALTHY = "trained"\n')}
    assert status_literals(modules)[-1] == "copy.py:1"


def gamma_readings(modules: dict[str, ast.Module]) -> list[str]:
    """Where a loss spec's ``gamma`` is read (``spec["gamma"]``, ``.get("gamma")``, ``"gamma" in spec``
    on a name that says loss) and where a regular expression looks for a γ in a name."""
    found = []
    for module, tree in modules.items():
        for node in ast.walk(tree):
            target = None
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == "gamma":
                target = node.value
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                  and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == "gamma"):
                target = node.func.value
            elif (isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant) and node.left.value == "gamma"
                  and isinstance(node.ops[0], ast.In)):
                target = node.comparators[0]
            if target is not None and "loss" in ast.unparse(target).lower():
                found.append(f"{module}:{node.lineno}")
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "re" and node.args and isinstance(node.args[0], ast.Constant)
                    and "γ" in str(node.args[0].value)):
                found.append(f"{module}:{node.lineno}")
    return sorted(found)


def test_the_focal_gamma_is_read_from_a_loss_in_one_function_and_from_a_name_in_one():
    assert [place.split(":")[0] for place in gamma_readings(_modules())] == [
        "catalog.py", "catalog.py", "core/spec_facts.py"]


def test_the_gamma_guard_finds_a_second_copy():
    copy = ('def loss_gamma(loss):\n    return float(loss["gamma"]) if "gamma" in loss else None\n'
            'match = re.fullmatch(r"fl_*(?:γ)?=(\\d+)", key)\n')
    modules = {**_modules(), "pipeline/copy.py": ast.parse(copy)}
    assert [place for place in gamma_readings(modules) if place.startswith("pipeline/copy.py")] == [
        "pipeline/copy.py:2", "pipeline/copy.py:2", "pipeline/copy.py:3"]


def test_a_focal_label_is_read_back_as_its_gamma_and_coloured_as_it():
    from focalcal import catalog
    from focalcal.core.spec_facts import focal_gamma_in_name, loss_info
    from focalcal.plots import style

    for gamma in (0.5, 1, 2, 3, 5):
        label = loss_info({"name": "focal", "gamma": gamma}).label
        assert focal_gamma_in_name(style.canonical_name(label)) == catalog.focal_gamma({"name": "focal", "gamma": gamma})
        assert style.color_for(label) == style.gamma_color(gamma)
    assert focal_gamma_in_name(style.canonical_name("FLSD-53")) is None


def role_key_literals(modules: dict[str, ast.Module], names: tuple[str, ...]) -> list[str]:
    """Where the modules ``names`` write a calibrator role's key as a string (dict keys and
    subscripts of their own parameters aside)."""
    from focalcal import catalog

    found = []
    for name in names:
        tree = modules[name]
        own = {id(key) for node in ast.walk(tree) if isinstance(node, ast.Dict) for key in node.keys}
        own |= {id(node.slice) for node in ast.walk(tree) if isinstance(node, ast.Subscript)}
        found += [f"{name}:{node.lineno}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and node.value in catalog.ROLES and id(node) not in own]
    return found


MUKHOTI_PAGE = ("papers/mukhoti2020/page.py", "papers/mukhoti2020/translation.py")


def test_mukhoti2020s_page_reads_its_calibrator_roles_from_the_catalog():
    assert role_key_literals(_modules(), MUKHOTI_PAGE) == []


def test_the_role_key_guard_finds_a_second_copy():
    modules = {**_modules(), MUKHOTI_PAGE[0]: ast.parse('post = study.role_key("ts_ece") or study.role_key("ts_nll")\n')}
    assert role_key_literals(modules, MUKHOTI_PAGE) == [f"{MUKHOTI_PAGE[0]}:1"] * 2


def _writes_a_role_key(node: ast.AST) -> bool:
    from focalcal import catalog

    if isinstance(node, ast.Constant):
        return node.value in catalog.ROLES
    start = node.values[0] if isinstance(node, ast.JoinedStr) and node.values else None
    return (isinstance(start, ast.Constant) and isinstance(start.value, str)
            and any(key.startswith(start.value) for key in catalog.ROLES))


def role_lookups(modules: dict[str, ast.Module], names) -> list[str]:
    """Where the modules ``names`` look a calibrator role up by a key they write (a role's key, or
    an f-string that starts like one): in ``<x>.roles[...]``, a comparison with ``<x>.roles`` and
    the arguments of ``role_key`` and ``first_role``."""
    found = set()
    for name in names:
        for node in ast.walk(modules[name]):
            parts = []
            if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("roles"):
                parts = [node.slice]
            elif isinstance(node, ast.Compare) and any(ast.unparse(side).endswith("roles)") or ast.unparse(side).endswith("roles")
                                                       for side in (node.left, *node.comparators)):
                parts = [node.left, *node.comparators]
            elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith(("role_key", "first_role")):
                parts = list(node.args)
            found |= {f"{name}:{inner.lineno}" for part in parts for inner in ast.walk(part) if _writes_a_role_key(inner)}
    return sorted(found)


PAPER_CODE = tuple(name for name in _modules() if name.startswith("papers/") and name.count("/") == 2
                   and name.rsplit("/", 1)[1] in ("__init__.py", "page.py", "figures.py", "translation.py"))


def test_the_papers_pages_read_their_calibrator_roles_from_their_catalog_entries():
    import re

    guide = (PACKAGE.parents[1] / "docs" / "adding-a-paper.md").read_text()
    page = re.search(r"<!-- readme-test: paper_page -->\n```python\n(.*?)```", guide, re.DOTALL)[1]
    modules = {**_modules(), "papers/guo2017/page.py": ast.parse(page)}  # the page the guide shows
    assert {name.split("/")[1] for name in PAPER_CODE} >= {"charoenphakdee2021", "komisarenko2024", "mukhoti2020"}
    assert role_lookups(modules, (*PAPER_CODE, "papers/guo2017/page.py")) == []


def test_the_role_lookup_guard_finds_a_key_written_in_a_page():
    page = "papers/komisarenko2024/page.py"
    copy = ('fts = {c: study.role_key(f"fts_{c}") for c in ("ece", "nll")}\n'
            'views = [v for v in runs if {"raw", "psi"} <= set(v.roles) and "ts_focal" in v.roles]\n'
            'key = v.roles["ts_focal"]\nkey = PAPER.roles["before"][0]\n')
    assert role_lookups({**_modules(), page: ast.parse(copy)}, PAPER_CODE) == [f"{page}:1", f"{page}:2", f"{page}:3"]


def test_a_role_added_to_the_papers_entry_stands_for_its_stage(monkeypatch):
    from dataclasses import replace
    from types import SimpleNamespace

    from focalcal.papers import mukhoti2020

    def study(keys: dict):
        return SimpleNamespace(role_key=lambda role, views=None: keys.get(role))

    keys = {"raw": "uncalibrated", "ts_nll": "ts", "ts_focal": "tsf"}
    assert mukhoti2020.calibration_stages(study(keys)) == ("uncalibrated", "ts", "ts_nll")
    assert mukhoti2020.calibration_stages(study({"ts_ece": "e"})) == (None, "e", "ts_ece")
    monkeypatch.setattr(mukhoti2020, "PAPER", replace(mukhoti2020.PAPER, roles={"before": ("raw",),
                                                                                "after": ("ts_focal", "ts_nll")}))
    assert mukhoti2020.calibration_stages(study(keys)) == ("uncalibrated", "tsf", "ts_focal")
