"""focalcal.catalog: the one list of names and their facts, against the registries that build them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from focalcal import catalog
from focalcal.pipeline import ConfigError, validate_config
from focalcal.pipeline.config import load_config_file, load_schema

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def registries() -> dict:
    """Every registry's names (and tasks), read in a fresh interpreter: the test suite registers
    extra entries of its own in this one."""
    code = """
import json
from focalcal import calibration, data, losses, models
print(json.dumps({
    "datasets": {task: data.available(task) for task in ("classification", "segmentation")},
    "models": {task: models.available(task) for task in ("classification", "segmentation")},
    "losses": losses.available(),
    "calibrators": sorted(calibration.CALIBRATORS),
}))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    return json.loads(result.stdout)


def test_the_catalog_lists_exactly_the_registered_names_with_their_tasks():
    registered = registries()
    for table, entries in (("datasets", catalog.DATASETS), ("models", catalog.MODELS)):
        for task in catalog.TASKS:
            assert sorted(registered[table][task]) == sorted(n for n, e in entries.items() if e.task == task), (table, task)
    assert sorted(registered["losses"]) == sorted(catalog.LOSSES)
    assert sorted(registered["calibrators"]) == sorted(catalog.CALIBRATORS)


def test_the_catalog_imports_without_torch():
    code = "import sys, focalcal.catalog, focalcal.pipeline.plan, focalcal.report.targets; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert result.stdout.strip() == "False"


def test_the_schema_enums_are_the_catalogs_and_refuse_other_names():
    raw = load_config_file(SCHEMA)["$defs"]
    assert all(raw[name] == {"enum": []} for name in catalog.schema_enums())  # no hand-copied list in the file
    filled = load_schema(SCHEMA)["$defs"]
    assert filled["loss_name"]["enum"] == sorted(catalog.LOSSES) and filled["paper_name"]["enum"] == list(catalog.PAPERS)
    config = load_config_file(ROOT / "config" / "test.yaml")
    config["losses"]["new"] = {"name": "poly1"}
    with pytest.raises(ConfigError, match=r"losses\.new\.name: 'poly1' is not allowed; allowed values: adafocal, "):
        validate_config(config, SCHEMA)


@pytest.mark.parametrize(("spec", "gamma"), [
    ({"name": "cross_entropy"}, 0.0), ({"name": "focal", "gamma": 3}, 3.0), ({"name": "focal"}, None),
    ({"name": "focal", "gamma": 2, "smoothing": 0.1}, 2.0), ({"name": "flsd53"}, None), ({"name": "brier"}, None),
])
def test_focal_gamma_is_the_losses_single_focusing_parameter(spec, gamma):
    assert catalog.focal_gamma(spec) == gamma


def test_every_subset_of_a_classification_set_is_listed_and_only_cifar10_s_is_published():
    assert {n for n in catalog.DATASETS if n.endswith("-s")} == {
        n + "-s" for n, e in catalog.DATASETS.items() if e.task == "classification" and not n.endswith("-s")}
    published = {n: e.paper_name for n, e in catalog.DATASETS.items() if n.endswith("-s") and e.paper_name}
    assert published == {"cifar10-s": "CIFAR-10-s", "mnist1d-s": "CIFAR-10-s"}
    assert catalog.DATASETS["mnist1d-s"].stand_in and not catalog.DATASETS["cifar10-s"].stand_in


def test_an_unknown_name_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown loss 'poly1'; known: \['adafocal'"):
        catalog.loss("poly1")
    with pytest.raises(ValueError, match=r"unknown dataset 'mnist2d'"):
        catalog.is_segmentation({"name": "mnist2d"})


POLY_MODULE = '''"""Poly-1 loss (Leng et al. 2022), added by tests/test_catalog.py."""

import torch

from focalcal.losses.registry import register
from focalcal.losses._base import Loss


@register
class PolyLoss(Loss):
    name = "poly1"

    def __init__(self, *, epsilon: float = 1.0, reduction: str = "mean", ignore_index=None):
        super().__init__(reduction=reduction, ignore_index=ignore_index)
        self.epsilon = epsilon

    def elementwise(self, logits, index):
        log_p = torch.log_softmax(logits, dim=1).gather(1, index)
        return -log_p - self.epsilon * torch.expm1(log_p)
'''
POLY_ENTRY = '\nLOSSES["poly1"] = Loss("poly", "Poly-1")\n'


def test_a_new_loss_is_its_module_plus_one_catalog_entry(workflow_checkout):
    """Nothing else is touched (plan, naming, schema, targets): the loss validates in a config,
    its runs are planned and trained by the workflow, and the report labels it."""
    import yaml

    checkout = workflow_checkout
    (checkout / "src/focalcal/losses/poly.py").write_text(POLY_MODULE)
    with open(checkout / "src/focalcal/catalog.py", "a") as handle:
        handle.write(POLY_ENTRY)
    config = yaml.safe_load((ROOT / "config/test.yaml").read_text())
    config["losses"]["poly"] = {"name": "poly1", "epsilon": 2.0}
    config["studies"] = {"test_digits": config["studies"]["test_digits"]}
    config["studies"]["test_digits"]["grids"][0]["losses"].append("poly")
    (checkout / "poly.yaml").write_text(yaml.safe_dump(config))
    env = {**os.environ, "PYTHONPATH": str(checkout / "src")}

    check = """
import yaml
from focalcal import losses
from focalcal.pipeline import build_plan, validate_config
from focalcal.report.naming import loss_info
from focalcal.report.targets import report_plan
config = validate_config(yaml.safe_load(open("poly.yaml")), "workflow/schemas/config.schema.yaml")
plan = build_plan(config)
runs = [path for path in plan.runs if "/poly/" in path]
study = report_plan(plan).studies["test_digits"]
labelled = "poly" in study.scale["losses"] and loss_info(config["losses"]["poly"]).label == "Poly-1"
print(len(runs), labelled, type(losses.build(config["losses"]["poly"])).__name__)
"""
    result = subprocess.run([sys.executable, "-c", check], cwd=checkout, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["1", "True", "PolyLoss"]  # one seed; in the report's plan, labelled

    run = "results/runs/digits/cnn_small/poly/tiny/seed0/history.csv"
    trained = subprocess.run([str(Path(sys.executable).with_name("snakemake")), run, "--cores", "1", "--configfile",
                              "poly.yaml"], cwd=checkout, env=env, capture_output=True, text=True, timeout=600)
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert (checkout / run).exists()
