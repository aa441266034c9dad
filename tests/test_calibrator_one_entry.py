"""A calibrator is one entry of ``catalog.CALIBRATORS``: its builder, label, colour, figure role,
CLI default and size, and every table that shows a calibrator reads them from there.

The first test adds an entry to the text of src/focalcal/catalog.py alone, in a separate
process, and follows it to ``focalcal calibrate``'s defaults, help and specs, the papers'
figure roles and the default config, the figures' colours and labels, the registry and the
docs' table; a second declaration of any of these (a table of roles beside the calibrators,
a size stated twice) would leave the new entry short of one of them.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace

import pytest
from conftest import ROOT

from focalcal import catalog
from focalcal.commands import calibrator_choice

CATALOG = ROOT / "src" / "focalcal" / "catalog.py"
GUIDE = ROOT / "docs" / "adding-a-calibrator.md"
# The guide's entry (its class, docs/adding-a-calibrator.md's BiasCorrection, stands in its module
# here), and one that runs by default, in the papers' figures, whose fit holds K² numbers.
GUIDE_ENTRY = re.search(r"<!-- readme-test: calibrator_entry -->\n```python\n(.*?)```", GUIDE.read_text(), re.DOTALL)[1]
ENTRY = GUIDE_ENTRY + '''
    "bias_shift": Calibrator("__main__:BiasShift", aliases=("shift",), roles={
        "bias_shift": Role("bias shift", colour="#123456", cost="O(N K) per step", cli="default",
                           parameters=lambda k, spec: k, holds=lambda k, spec: k * k),
    }),
'''

SCRIPT = r'''
import argparse, ast, importlib.util, json, sys
from pathlib import Path

path, entry, hook_path = sys.argv[1:4]
source = Path(path).read_text()
table = next(node.value for node in ast.parse(source).body if isinstance(node, ast.AnnAssign)
             and getattr(node.target, "id", None) == "CALIBRATORS")
lines = source.splitlines(keepends=True)
end = sum(len(line) for line in lines[:table.end_lineno - 1]) + table.end_col_offset - 1
assert source[end] == "}", source[end - 20:end + 1]
spec = importlib.util.spec_from_loader("focalcal.catalog", loader=None, origin=path)
module = importlib.util.module_from_spec(spec)
module.__file__ = path
sys.modules["focalcal.catalog"] = module  # the catalog as its file reads with the entry added
exec(compile(source[:end] + entry + source[end:], path, "exec"), module.__dict__)

import types
import numpy as np
from focalcal import catalog
from focalcal.commands import calibrator_choice, cli
from focalcal.calibration import Calibrator, build
from focalcal.pipeline.config import load_schema
from focalcal.plots import style


class BiasShift(Calibrator):
    name = "bias_shift"
    _fitted_attributes = ("bias_",)

    def _fit(self, logits, labels):
        self.bias_ = np.log(np.bincount(labels, minlength=logits.shape[1]) / len(labels))

    def _transform(self, logits):
        z = logits + self.bias_
        return np.exp(z - np.logaddexp.reduce(z, axis=1, keepdims=True))


class BiasCorrection(Calibrator):
    name = "bias_correction"

    def _fit(self, logits, labels):
        pass

    def _transform(self, logits):
        return np.exp(logits - np.logaddexp.reduce(logits, axis=1, keepdims=True))


sys.modules["focalcal.calibration.bias"] = types.SimpleNamespace(BiasCorrection=BiasCorrection)  # the guide's module
assert catalog is module
parser = argparse.ArgumentParser()
cli._add_calibrate_parser(parser.add_subparsers())
hook_spec = importlib.util.spec_from_file_location("hook", hook_path)
hook = importlib.util.module_from_spec(hook_spec)
hook_spec.loader.exec_module(hook)
fitted = build({"name": "bias_shift"}).fit(np.array([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]), np.array([0, 0, 1]))
print(json.dumps({
    "roles": list(catalog.ROLES), "paper_roles": list(catalog.PAPER_ROLES),
    "default_config": catalog.default_calibrators(),
    "schema_default": load_schema(Path("workflow/schemas/config.schema.yaml"))["properties"]["calibrators"]["default"],
    "figure_role": catalog.calibrator_role({"build": {"name": "bias_shift"}}),
    "label": catalog.ROLE_LABELS["bias_shift"], "colour": style.color_for("bias_shift"),
    "colour_by_alias": style.color_for("shift"),
    "cli": list(calibrator_choice.CALIBRATORS), "cli_default": list(calibrator_choice.DEFAULT_CALIBRATORS),
    "cli_labels": calibrator_choice.LABELS, "cli_costs": calibrator_choice.COSTS,
    "quadratic": list(calibrator_choice.QUADRATIC_IN_K),
    "parameters": calibrator_choice.parameter_count("bias_shift", 7),
    "resolved": calibrator_choice.resolve_calibrators(),
    "help": parser._subparsers._group_actions[0].choices["calibrate"].format_help(),
    "docs": hook.calibrators_table(),
    "fitted": fitted.transform(np.zeros((1, 2))).round(6).tolist(),
    "guide_class": type(build({"name": "bias_correction"})).__name__, "guide_colour": style.color_for("bc"),
}))
'''


@pytest.fixture(scope="module")
def added():
    """What the library shows of a catalog with one more calibrator entry (a separate process)."""
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(CATALOG), ENTRY, str(ROOT / "docs" / "hooks" / "calibrators.py")],
                          check=False, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_a_calibrator_entry_reaches_the_papers_roles_and_the_default_config(added):
    assert added["roles"] == [*catalog.ROLES, "bias", "bias_shift"]
    assert added["paper_roles"] == [*catalog.PAPER_ROLES, "bias_shift"]
    assert added["default_config"] == {**catalog.default_calibrators(), "bias_shift": {"name": "bias_shift"}}
    assert added["schema_default"] == added["default_config"]
    assert added["figure_role"] == "bias_shift"
    assert added["fitted"] == [[0.666667, 0.333333]]  # the registry builds it: softmax(log of the val frequencies)


def test_a_calibrator_entry_reaches_the_figures_labels_and_colours(added):
    assert added["label"] == "bias shift"
    assert added["colour"] == added["colour_by_alias"] == "#123456"


def test_a_calibrator_entry_reaches_focalcal_calibrate_and_its_docs(added):
    assert added["cli"] == [*calibrator_choice.CALIBRATORS, "bias", "bias_shift"]
    assert added["cli_default"] == [*calibrator_choice.DEFAULT_CALIBRATORS, "bias_shift"]
    assert (added["cli_labels"]["bias_shift"], added["cli_costs"]["bias_shift"]) == ("bias shift", "O(N K) per step")
    assert added["quadratic"] == [*calibrator_choice.QUADRATIC_IN_K, "bias_shift"]  # its fit holds K² numbers
    assert added["parameters"] == 7
    assert added["resolved"]["bias_shift"] == {"build": {"name": "bias_shift"}}
    assert "bias_shift O(N K) per step" in " ".join(added["help"].split())
    row = f"| `bias_shift` | bias shift | by default up to {calibrator_choice.MAX_CLASSES_QUADRATIC} classes | O(N K) per step |"
    assert row in added["docs"].splitlines()


def test_the_guides_entry_is_offered_by_focalcal_calibrate_and_built_from_its_module(added):
    assert added["guide_class"] == "BiasCorrection" and added["guide_colour"] == "#6a1b9a"
    assert "bias" not in added["paper_roles"] and "bias" not in added["cli_default"]
    assert "| `bias` | bias correction | with `--calibrators` | O(N K) per fixed-point step |" in added["docs"].splitlines()


def test_the_roles_are_gathered_from_the_calibrators_entries_in_their_order():
    gathered = [(key, name) for name, entry in catalog.CALIBRATORS.items() for key in entry.roles]
    assert [key for key, _ in gathered] == list(catalog.ROLES)
    for key, name in gathered:
        assert catalog.ROLES[key].spec["name"] == ("psi" if key == "ts_focal_psi" else name)
        assert next(iter(catalog.ROLES[key].spec)) == "name"
    assert catalog.ROLE_LABELS == {key: role.label for key, role in catalog.ROLES.items()}
    assert list(catalog.PAPER_ROLES) == [key for key, role in catalog.ROLES.items() if role.in_papers]


def test_a_calibrators_size_in_k_is_read_from_its_roles():
    sizes = {key: (role.holds or role.parameters)(10, role.spec) for key, role in catalog.ROLES.items()}
    assert sizes["vector_scaling"] == 400 and sizes["dirichlet"] == 110 and sizes["histogram_binning"] == 150
    assert [key for key in calibrator_choice.CALIBRATORS if catalog.holds_k_squared(catalog.ROLES[key])] == [
        "vector_scaling", "dirichlet"] == list(calibrator_choice.QUADRATIC_IN_K)
    assert [name for name, entry in catalog.CALIBRATORS.items() if entry.quadratic_in_k] == ["vector_scaling", "dirichlet"]


def test_declare_gathers_a_calibrators_roles(monkeypatch):
    monkeypatch.setattr(catalog, "CALIBRATORS", dict(catalog.CALIBRATORS))
    for table in ("ROLES", "ROLE_LABELS", "PAPER_ROLES"):
        monkeypatch.setattr(catalog, table, dict(getattr(catalog, table)))
    role = catalog.Role("shifted", cost="O(N)", cli="offered", in_papers=False, parameters=lambda k, spec: k)
    catalog.declare("shifted", catalog.Calibrator("focalcal.calibration.temperature:TemperatureScaling",
                                                  roles={"shifted": role}))
    assert catalog.ROLES["shifted"] == replace(role, spec={"name": "shifted"})
    assert catalog.ROLE_LABELS["shifted"] == "shifted" and "shifted" not in catalog.PAPER_ROLES


@pytest.mark.parametrize(("roles", "message"), [
    ({"ts_nll": catalog.Role("again")}, "calibrator role 'ts_nll' is declared by both 'temperature_scaling' and 'new'"),
    ({"x": catalog.Role("x", {"name": "psi"})}, "role 'x' builds 'psi'; a role names another calibrator only after"),
    ({"x": catalog.Role("x", {"name": "new"})}, "role 'x' repeats its calibrator's name in its spec"),
    ({"x": catalog.Role("x", cli="yes")}, "role 'x' has cli='yes'; one of (None, 'offered', 'default')"),
])
def test_a_malformed_calibrator_entry_is_refused_in_one_line(roles, message):
    before = dict(catalog.ROLES)
    with pytest.raises(ValueError) as caught:
        catalog.declare("new", catalog.Calibrator("focalcal.calibration.temperature:TemperatureScaling", roles=roles))
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert "new" not in catalog.CALIBRATORS and catalog.ROLES == before
