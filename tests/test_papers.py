"""focalcal.papers: one package per paper, declared in catalog.PAPERS and reached through its `Paper` entry."""

from __future__ import annotations

import ast
import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import add_paper_entry, snakemake

from focalcal import catalog
from focalcal.pipeline import build_plan, validate_config
from focalcal.pipeline.config import load_config_file, load_schema
from focalcal.report.targets import report_plan

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def test_the_papers_are_the_packages_and_everything_keyed_by_paper_derives_from_them():
    from focalcal.claims import CLAIMS

    packages = sorted(p.name for p in (ROOT / "src/focalcal/papers").iterdir()
                      if p.is_dir() and (p / "__init__.py").is_file())
    assert sorted(catalog.PAPERS) == packages == sorted(["charoenphakdee2021", "komisarenko2024", "mukhoti2020",
                                                          "hossain2021"])
    assert all(entry.package == f"focalcal.papers.{key}" for key, entry in catalog.PAPERS.items())
    assert list(catalog.PAPER_TITLES) == ["charoenphakdee2021", "komisarenko2024", "mukhoti2020", "hossain2021"]  # page order
    assert catalog.schema_enums()["paper_name"] == list(catalog.PAPER_TITLES) == list(CLAIMS)
    assert load_schema(SCHEMA)["$defs"]["paper_name"]["enum"] == list(catalog.PAPER_TITLES)
    assert {paper: len(claims) for paper, claims in CLAIMS.items()} == {
        "charoenphakdee2021": 9, "komisarenko2024": 3, "mukhoti2020": 12, "hossain2021": 3}
    assert all(claim.paper == paper for paper, claims in CLAIMS.items() for claim in claims)


def test_each_page_has_its_parts_and_unknown_papers_are_refused_with_the_known_ones():
    from focalcal.report.tables import PaperTable

    for paper in catalog.PAPERS.values():
        page = paper.page()
        assert page.SUMMARY.startswith("# ") and callable(page.plan)
        assert all(isinstance(builder, PaperTable) for builder in page.TABLE_BUILDERS)
        names = [catalog.builder_name(builder) for builder in (*page.TABLE_BUILDERS, *page.FIGURE_BUILDERS)]
        assert len(names) == len(set(names))  # a builder's name finds one builder of its paper
    page = catalog.paper("mukhoti2020").page()
    assert catalog.paper("mukhoti2020").table_builder("mukhoti_table") is page.TABLE_BUILDERS[0]
    assert catalog.paper("mukhoti2020").figure_builder("training_curves") is page.training_curves
    with pytest.raises(ValueError, match="paper 'mukhoti2020' has no figure builder 'mukhoti_table'"):
        catalog.paper("mukhoti2020").figure_builder("mukhoti_table")
    with pytest.raises(ValueError, match="paper 'komisarenko2024' has no figure builder 'training_curves'"):
        catalog.paper("komisarenko2024").figure_builder("training_curves")  # a builder is looked up in its own paper
    with pytest.raises(ValueError, match=r"unknown paper 'guo2017'; known: \['charoenphakdee2021'"):
        catalog.paper("guo2017")
    with pytest.raises(ValueError, match="no paper of catalog.PAPERS names the package 'focalcal.papers.guo2017'"):
        catalog.paper_of_package("focalcal.papers.guo2017")


def _default_plan():
    config = load_config_file(ROOT / "config/config.yaml")
    validate_config(config, str(SCHEMA))
    return build_plan(config)


def test_every_planned_study_artifact_is_named_once_and_drawn_by_a_builder_of_its_paper():
    """One name per figure or table: the file stem; its builder is a function of its paper's page
    (no second key), and a theory figure's builder is its own name."""
    report = report_plan(_default_plan())
    for artifact in report.theory:
        assert artifact.builder == artifact.name
    planned = [a for study in report.studies.values() for a in study.artifacts]
    assert planned
    for artifact in planned:
        entry = catalog.paper(artifact.paper)
        look_up = entry.table_builder if artifact.kind == "table" else entry.figure_builder
        assert catalog.builder_name(look_up(artifact.builder)) == artifact.builder
        assert not artifact.builder.startswith(tuple(catalog.PAPER_TITLES)) and artifact.name.startswith(artifact.paper)


def test_a_study_artifact_with_an_undeclared_builder_is_refused():
    from focalcal.report.targets import StudyView

    plan = _default_plan()
    study = next(key for key, view in plan.studies.items() if view.paper == "mukhoti2020")
    view = StudyView(plan, study)

    def undeclared(params, root, study):
        return None

    with pytest.raises(ValueError, match="paper 'mukhoti2020' has no figure builder 'undeclared'"):
        view.artifact("figure", "mukhoti2020_fig99", "Fig 99", undeclared, [], {})


def test_theory_figures_name_a_drawing_of_their_paper_with_valid_arguments():
    figures = catalog.theory_figures()
    assert len(figures) == 15
    for name, figure in figures.items():
        assert name.startswith(figure.paper) and figure.paper in catalog.PAPER_TITLES
        signature = inspect.signature(figure.drawing())
        assert figure.drawing().__module__.startswith(f"focalcal.papers.{figure.paper}.")
        for grid in ("paper", "coarse"):
            signature.bind(**figure.arguments(grid))  # raises on an argument the function does not take


def test_a_theory_figure_named_for_another_paper_is_refused():
    with pytest.raises(ValueError, match="must start with the paper's key"):
        catalog.Paper("guo2017", "Guo", "focalcal.papers.guo2017",
                      {"mukhoti2020_fig1": catalog.TheoryFigure("guo2017", "t", "f")})


def test_the_papers_entries_and_packages_import_without_torch_or_plotting():
    code = ("import sys, importlib, focalcal.catalog, focalcal.report.targets; "
            "loaded = sorted(m for m in sys.modules if m.startswith('focalcal.papers')); "
            "[importlib.import_module(entry.package) for entry in focalcal.catalog.PAPERS.values()]; "
            "print(loaded, sorted(m for m in ('torch', 'matplotlib', 'pandas') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["[]", "[]"]  # the catalog and the report's plan import no paper


def test_shared_code_never_names_a_paper_key():
    """Outside its own package no source or rule file compares with or looks up a paper by its
    key (a quoted key); prose may cite a paper. The catalog declares each key once, as the
    constant its entry is written with."""
    keys = "|".join(catalog.PAPERS)
    quoted = re.compile(rf"""(["'])({keys})\1""")
    declared = re.compile(rf"""^_[A-Z0-9]+ = "({keys})"$""")
    files = [*ROOT.glob("src/focalcal/**/*.py"), *ROOT.glob("workflow/**/*.smk"), *ROOT.glob("workflow/**/*.py"),
             *ROOT.glob("workflow/Snakefile"), *ROOT.glob("Snakefile")]
    found = []
    for path in files:
        relative = path.relative_to(ROOT).as_posix()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in quoted.finditer(line):
                if relative == "src/focalcal/catalog.py" and declared.match(line):
                    continue
                if not relative.startswith(f"src/focalcal/papers/{match.group(2)}/"):
                    found.append(f"{relative}:{number}: {line.strip()}")
    assert found == []


# ------------------------------------------------------------- nothing of one paper outside it

PACKAGE = ROOT / "src" / "focalcal"
#: Shared code: it may cite a paper in prose (docstrings, comments), but holds no paper's figure,
#: fact or name.
SHARED = ("plots/", "report/", "pipeline/", "theory/", "core/spec_facts.py")
#: Shared helpers, each used by shared code or by two papers or more; theory/ is left out:
#: each of its results is cited by the one paper that proved it, and papers share them.
HELPERS = ("plots/", "report/", "pipeline/", "core/spec_facts.py")
FIGURE_NUMBER = re.compile(r"(?i)(?<![a-z])(figs?|figures?|tables?)\.?[\s_]*\d")


def _shared(path: Path, prefixes=SHARED) -> bool:
    return path.relative_to(PACKAGE).as_posix().startswith(prefixes)


def _owner(path: Path) -> str:
    """The paper whose package holds ``path`` ("" for shared code and the papers' index)."""
    parts = path.relative_to(PACKAGE).parts
    return parts[1] if parts[0] == "papers" and len(parts) > 2 else ""


def _paper_words() -> re.Pattern:
    """A paper's key, its author (the key without the year) or its short form (m20), as a word."""
    words = {word for key in catalog.PAPERS for word in (key, key.rstrip("0123456789"), f"{key[0]}{key[-2:]}")}
    return re.compile(rf"(?i)(?<![#\w])({'|'.join(sorted(words))})(?![a-z])")


def _docstrings(tree) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
            and isinstance(node.body[0].value.value, str)}


def _declared_names(node) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
        return [node.id]
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
        return [node.attr]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.alias) and node.asname:
        return [node.asname]
    return []


def imports_of_a_paper_from_outside() -> list[str]:
    """Imports of a paper's modules by any module outside that paper's package: shared code
    reaches a paper only through its entry in ``catalog.PAPERS``."""
    from test_layers import import_graph, relative

    found = []
    for path, imports in import_graph().values():
        for target, line, _ in imports:
            parts = target.split(".")
            if len(parts) > 2 and parts[1] == "papers" and parts[2] in catalog.PAPERS and _owner(path) != parts[2]:
                found.append(f"{relative(path)}:{line} imports {target}")
    return found


def paper_names_in_shared_code() -> list[str]:
    """Names declared in shared code (functions, classes, variables, arguments) and its string
    constants (not docstrings) that name a paper or a figure or table number, and its string
    constants that hold a published data set or model (those are the catalog's)."""
    words = _paper_words()
    published = {entry.paper_name for entry in (*catalog.DATASETS.values(), *catalog.MODELS.values())
                 if entry.paper_name}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if not _shared(path):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = _docstrings(tree)
        where = path.relative_to(ROOT).as_posix()
        for node in ast.walk(tree):
            for name in _declared_names(node):
                if words.search(name.replace("_", " ")) or FIGURE_NUMBER.search(name):
                    found.append(f"{where}:{node.lineno}: the name {name}")
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                if words.search(node.value) or FIGURE_NUMBER.search(node.value):
                    found.append(f"{where}:{node.lineno}: the string {node.value!r}")
                found += [f"{where}:{node.lineno}: the published name {name!r}" for name in sorted(published)
                          if name in node.value]
    return found


def helpers_of_one_paper() -> list[str]:
    """Public functions and classes of the shared helpers that one paper alone uses (read by
    name anywhere in the library): that paper's, so in its package."""
    users: dict[str, set[str]] = {}
    definitions = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        owner = _owner(path) or "shared"
        for node in ast.walk(tree):
            # a use reads the name; an import alone (a package re-exporting it) is none
            name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
            if name:
                users.setdefault(name, set()).add(owner)
        if _shared(path, HELPERS):
            definitions += [(path, node) for node in tree.body
                            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_")]
    return [f"{path.relative_to(ROOT).as_posix()}:{node.lineno}: {node.name} is used by {users[node.name]} alone"
            for path, node in definitions if len(users.get(node.name, set())) == 1 and "shared" not in users[node.name]]


def test_no_module_outside_a_paper_imports_it():
    assert imports_of_a_paper_from_outside() == []


def test_shared_code_names_no_paper_figure_or_published_setting():
    assert paper_names_in_shared_code() == []


def test_every_shared_helper_serves_shared_code_or_two_papers():
    assert helpers_of_one_paper() == []


def _patched(monkeypatch, extra: dict[str, str]):
    """Path.read_text with ``extra`` source appended to the named files (relative to the package)."""
    added = {PACKAGE / name: text for name, text in extra.items()}
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: Path.read_bytes(self).decode() + added.get(self, ""))


def test_an_import_of_a_paper_from_shared_code_or_another_paper_is_named(monkeypatch):
    _patched(monkeypatch, {
        "pipeline/plan.py": "\ndef f():\n    from focalcal.papers.mukhoti2020.figures import training_curves_figure\n",
        "papers/hossain2021/page.py": "\nfrom focalcal.papers.komisarenko2024 import labels\n",
    })
    found = imports_of_a_paper_from_outside()
    assert len(found) == 2
    assert found[0].startswith("src/focalcal/papers/hossain2021/page.py:") and found[0].endswith(
        "imports focalcal.papers.komisarenko2024.labels")
    assert found[1].startswith("src/focalcal/pipeline/plan.py:") and found[1].endswith(
        "imports focalcal.papers.mukhoti2020.figures")


@pytest.mark.parametrize(("file", "source", "named"), [
    ("report/tables.py", "\ndef m20_training_curves(history):\n    return history\n", "the name m20_training_curves"),
    ("plots/style.py", "\ndef fig2_curves(history):\n    return history\n", "the name fig2_curves"),
    ("plots/style.py", "\ndef curves(history, mukhoti_style=True):\n    return history\n", "the name mukhoti_style"),
    ("report/targets.py", '\nTITLE = "How calibration changes (Fig. 2)"\n', "the string 'How calibration changes (Fig. 2)'"),
    ("pipeline/plan.py", '\nDEFAULT = "hossain2021"\n', "the string 'hossain2021'"),
    ("core/spec_facts.py", '\nREFERENCE_MODEL = "ResNet 50"\n', "the published name 'ResNet 50'"),
    ("theory/closed_forms.py", '\ndef a(x):\n    """mukhoti2020 App. B (prose may cite a paper)."""\n    return f"{x} Table 13"\n',
     "the string ' Table 13'"),
])
def test_a_paper_name_figure_number_or_published_setting_in_shared_code_is_named(monkeypatch, file, source, named):
    _patched(monkeypatch, {file: source})
    found = paper_names_in_shared_code()
    assert len(found) == 1 and found[0].startswith(f"src/focalcal/{file}:") and found[0].endswith(named), found


def test_a_shared_helper_one_paper_alone_uses_is_named(monkeypatch):
    _patched(monkeypatch, {
        "plots/style.py": "\ndef loss_landscape(values):\n    return values\n",
        "papers/mukhoti2020/figures.py": "\ndef _landscape(values):\n    return loss_landscape(values)\n",
    })
    assert [line.split(": ", 1)[1] for line in helpers_of_one_paper()] == [
        "loss_landscape is used by {'mukhoti2020'} alone"]
    _patched(monkeypatch, {  # a second paper uses it: it is shared
        "plots/style.py": "\ndef loss_landscape(values):\n    return values\n",
        "papers/mukhoti2020/figures.py": "\ndef _landscape(values):\n    return loss_landscape(values)\n",
        "papers/hossain2021/figures.py": "\ndef _landscape(values):\n    return loss_landscape(values)\n",
    })
    assert helpers_of_one_paper() == []


# ------------------------------------------------------------------- adding a paper

GUO_ENTRY = '''    Paper("guo2017", "Guo et al. 2017 — On calibration of modern neural networks", "focalcal.papers.guo2017", theory={
        "guo2017_fig0_temperature": TheoryFigure("guo2017", "How a temperature flattens the softmax", "temperature_figure",
                                                 {"temperatures": [0.5, 1.0, 2.0]}, {"temperatures": [1.0, 2.0]}),
    }),
'''
GUO_INIT = '''"""guo2017 — Guo et al. 2017, "On calibration of modern neural networks"."""

from focalcal import catalog

PAPER = catalog.paper_of_package(__name__)
KEY = PAPER.key
'''
GUO_THEORY = '''"""guo2017's theory figure: the softmax of fixed logits at a few temperatures."""

import numpy as np

from focalcal.plots.style import new_figure


def temperature_figure(temperatures):
    figure, ax = new_figure(squeeze=True)
    logits = np.array([2.0, 1.0, 0.0])
    for t in temperatures:
        ax.plot(np.exp(logits / t) / np.exp(logits / t).sum(), label=f"T = {t:g}")
    return figure
'''
GUO_CLAIMS = '''"""guo2017's claim: temperature scaling lowers ECE (Table 1)."""

from focalcal.claims.claim import Claim, NotTestable, compare_calibrators
from focalcal.claims.verdict import Direction
from focalcal.papers.guo2017 import KEY


def _ts_lowers_ece(evidence):
    raw, ts = evidence.calibrator("raw"), evidence.calibrator("ts_nll")
    if raw is None or ts is None:
        return NotTestable("needs the uncalibrated model and TS by val NLL")
    return compare_calibrators(evidence, evidence.loss_keys(lambda info: True), ts, raw, "ece", bins=15)


CLAIMS = [Claim("g17-ts-ece", KEY, "Temperature scaling lowers ECE.", "Table 1", "ECE: TS − uncalibrated",
                Direction.BELOW, _ts_lowers_ece)]
'''
GUO_PAGE = '''"""guo2017's report page: Table 1, ECE before and after TS."""

import pandas as pd

from focalcal.report.tables import PaperTable

SUMMARY = "# Guo et al. 2017\\n\\n**Claims.** Temperature scaling removes most miscalibration (Table 1)."
PUBLISHED_SHOWN = ()


def plan(study):
    raw, ts = study.role_key("raw"), study.role_key("ts_nll")
    if raw is None or ts is None:
        return [], ["Table 1: needs the uncalibrated model and TS by val NLL"]
    params = {"raw": raw, "ts": ts}
    return [study.artifact("table", "guo2017_table1", "Table 1: ECE before and after TS", ece_table,
                           [study.table], params)], []


def ece_table(table: pd.DataFrame, params: dict) -> pd.DataFrame:
    return table[table["metric"] == "ece"]


TABLE_BUILDERS = (PaperTable(ece_table, lambda built: built),)
FIGURE_BUILDERS = ()
'''

CHECK = """
import json, sys
import pandas as pd
from focalcal import catalog
from focalcal.claims import CLAIMS, evaluate_study
from focalcal.claims.evidence import StudyEvidence
from focalcal.core.spec_facts import loss_info

figure = catalog.theory_figures()["guo2017_fig0_temperature"]
drawn = figure.drawing()(**figure.arguments("coarse"))
rows = [{"dataset": "digits", "model": "cnn_small", "loss": "ce", "recipe": "tiny", "seed": seed, "status": "trained",
         "calibrator": calibrator, "metric": "ece", "bins": 15, "value": value}
        for seed, before, after in ((0, 0.10, 0.04), (1, 0.12, 0.05), (2, 0.09, 0.03), (3, 0.11, 0.05))
        for calibrator, value in (("uncalibrated", before), ("ts_nll", after))]
evidence = StudyEvidence("test_guo", "guo2017", pd.DataFrame(rows), {"ce": loss_info({"name": "cross_entropy"})},
                         {"uncalibrated": "raw", "ts_nll": "ts_nll"})
((row, pairs),) = evaluate_study(evidence)
print(json.dumps({"enum": catalog.schema_enums()["paper_name"], "claims": [c.key for c in CLAIMS["guo2017"]],
                  "verdict": row["verdict"], "mean": row["mean"], "n_pairs": row["n_pairs"], "lines": len(drawn.axes[0].lines)}))
"""


def test_a_new_paper_is_one_package_its_catalog_entry_and_a_study_file(workflow_checkout):
    """A tiny paper package (one theory figure, one claim, a page with one table), its entry in
    catalog.PAPERS and a study file naming it, written into a copy of the checkout and nothing
    else: the paper's claim is judged, its theory figure drawn, and the report plans its page,
    figure and table."""
    import yaml

    checkout = workflow_checkout
    add_paper_entry(checkout, GUO_ENTRY)
    package = checkout / "src/focalcal/papers/guo2017"
    package.mkdir()
    for name, text in (("__init__", GUO_INIT), ("theory_figures", GUO_THEORY), ("claims", GUO_CLAIMS), ("page", GUO_PAGE)):
        (package / f"{name}.py").write_text(text)
    config = yaml.safe_load((ROOT / "config/test.yaml").read_text())
    study = {**config["studies"]["test_digits"], "paper": "guo2017", "mirrors": "Table 1 in miniature"}
    (checkout / "guo_study.yaml").write_text(yaml.safe_dump({"studies": {"test_guo": study}}))
    env = {**os.environ, "PYTHONPATH": str(checkout / "src")}

    checked = subprocess.run([sys.executable, "-c", CHECK], check=False, cwd=checkout, env=env, capture_output=True, text=True,
                             timeout=300)
    assert checked.returncode == 0, checked.stderr[-3000:]
    found = json.loads(checked.stdout)
    assert found["enum"][-1] == "guo2017" and found["claims"] == ["g17-ts-ece"] and found["lines"] == 2
    assert (found["verdict"], found["n_pairs"]) == ("holds", 4) and found["mean"] == pytest.approx(-0.0625)

    dry = snakemake(checkout, "results/report/index.html", "-n", "--configfile", str(checkout / "config/test.yaml"),
                    str(checkout / "guo_study.yaml"), snakefile=checkout / "workflow/Snakefile",
                    env={"PYTHONPATH": str(checkout / "src")}, timeout=300)
    planned = dry.stdout + dry.stderr
    for target in ("results/report/guo2017.html", "results/figures/theory/guo2017_fig0_temperature.png",
                   "results/tables/test_guo/guo2017_table1.csv", "results/figures/claims/guo2017.png",
                   "results/tables/test_guo.csv"):
        assert target in planned, target
