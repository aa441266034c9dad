"""focalcal.catalog: each name declared once, and what derives from the declaration."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from focalcal import catalog
from focalcal.pipeline import ConfigError, validate_config
from focalcal.pipeline.config import load_config_file, load_schema

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def test_every_declared_builder_is_the_class_or_function_its_registry_builds():
    from focalcal import calibration, data, losses, models

    for name, entry in catalog.LOSSES.items():
        built = losses.build({"name": name})
        assert type(built) is (losses.loss_class(entry.preset[0]) if entry.preset else catalog.resolve(entry.builder))
        assert built.name == (entry.preset[0] if entry.preset else name)
    for name, entry in catalog.CALIBRATORS.items():
        assert calibration.calibrator_class(name) is catalog.resolve(entry.builder)
        assert calibration.CALIBRATORS[name].name == name
    for name, entry in catalog.MODELS.items():
        spec = models.spec(name)
        assert spec.factory is catalog.resolve(entry.factory) and spec.task == entry.task
    for name, entry in catalog.DATASETS.items():
        spec = data.spec(name)
        assert spec.name == (entry.subset_of or name) and spec.loader is catalog.resolve(entry.loader)
    for table in ("datasets", "models"):
        for task in catalog.TASKS:
            registry = data if table == "datasets" else models
            declared = catalog.DATASETS if table == "datasets" else catalog.MODELS
            assert registry.available(task) == sorted(n for n, e in declared.items() if e.task == task)
    assert sorted(losses.available()) == sorted(catalog.LOSSES)


def test_the_catalog_imports_without_torch():
    code = "import sys, focalcal.catalog, focalcal.pipeline.plan, focalcal.report.targets; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert result.stdout.strip() == "False"


def test_the_schema_enums_are_the_catalogs_and_refuse_other_names():
    raw = load_config_file(SCHEMA)["$defs"]
    assert all(raw[name] == {"enum": []} for name in catalog.schema_enums())  # no hand-copied list in the file
    filled = load_schema(SCHEMA)["$defs"]
    assert filled["loss_name"]["enum"] == sorted(catalog.LOSSES) and filled["paper_name"]["enum"] == list(catalog.PAPER_TITLES)
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


def test_a_config_without_calibrators_gets_the_papers_roles_and_focalcal_calibrate_their_specs():
    from focalcal.commands import calibrator_choice as command

    config = load_config_file(ROOT / "config" / "config.yaml")
    assert "calibrators" not in config
    validated = validate_config(config, ROOT / "workflow" / "schemas" / "config.schema.yaml")
    assert validated["calibrators"] == {key: role.spec for key, role in catalog.ROLES.items() if role.in_papers}
    for key in command.PAPER_CALIBRATORS:
        expected = {name: value for name, value in catalog.ROLES[key].spec.items() if value != catalog.FROM_LOSS}
        if expected["name"] == "focal_temperature_scaling":  # the command refines; the workflow scores the whole grid
            expected["search"] = "refine"
        assert command.CALIBRATORS[key] == expected
    assert command.CALIBRATORS["psi"] == {"name": "psi"}  # its γ comes from --gamma


def test_each_papers_role_spec_plays_that_role():
    for key, role in catalog.PAPER_ROLES.items():
        spec = {name: 2.0 if value == catalog.FROM_LOSS else value for name, value in role.spec.items()}
        after = spec.pop("after", None)
        resolved = {"build": spec, **({"after": dict(catalog.ROLES[after].spec, gamma=2.0)} if after else {})}
        assert catalog.calibrator_role(resolved) == key


def _role_by_hand(resolved: dict) -> str:
    """calibrator_role written out case by case: the reference the catalog-derived one must equal."""
    build, after = resolved["build"], resolved.get("after")
    name = build.get("name")
    if after is not None:
        chained = name == "psi" and after.get("name") == "temperature_scaling" and after.get("objective") == "focal"
        return "ts_focal_psi" if chained else "other"
    if name == "identity":
        return "raw"
    if name == "psi":
        return "psi"
    if name == "temperature_scaling":
        return {"nll": "ts_nll", "ece": "ts_ece", "focal": "ts_focal"}.get(build.get("objective", "nll"), "other")
    if name == "focal_temperature_scaling":
        objective = build.get("objective", "ece")
        if objective not in ("ece", "nll"):
            return "other"
        gammas = build.get("gammas")
        only_zero = gammas is not None and [float(g) for g in gammas] == [0.0]
        return f"{'ts_grid' if only_zero else 'fts'}_{objective}"
    return "other"


def test_the_role_derived_from_the_catalog_equals_the_case_by_case_reading():
    rng = np.random.default_rng(0)
    names = ["identity", "psi", "temperature_scaling", "focal_temperature_scaling", "isotonic", "vector_scaling"]
    objectives = [None, "nll", "ece", "focal", "brier"]
    gammas = [None, [0.0], [0], [0.0, 1.0], [1.0], []]
    checked = set()
    for _ in range(3000):
        build = {"name": str(rng.choice(names))}
        objective = objectives[rng.integers(len(objectives))]
        if objective is not None:
            build["objective"] = objective
        grid = gammas[rng.integers(len(gammas))]
        if grid is not None:
            build["gammas"] = grid
        if rng.random() < 0.3:
            build["n_bins"] = int(rng.integers(5, 20))
        resolved = {"build": build}
        if rng.random() < 0.25:
            resolved["after"] = {"name": str(rng.choice(names)), "objective": objectives[rng.integers(1, 5)]}
        expected = _role_by_hand(resolved)
        assert catalog.calibrator_role(resolved) == expected, resolved
        checked.add(expected)
    assert checked == {*catalog.PAPER_ROLES, "other"}


def test_the_catalogs_calibrator_defaults_are_the_classes_own():
    import inspect

    from focalcal import calibration

    for name, entry in catalog.CALIBRATORS.items():
        signature = inspect.signature(calibration.registry.calibrator_class(name).__init__) if entry.defaults else None
        for parameter, value in entry.defaults.items():
            assert signature.parameters[parameter].default == value, (name, parameter)


def _poly_loss():
    import torch

    from focalcal.losses import Loss

    class PolyLoss(Loss):
        """Poly-1 loss (Leng et al. 2022): −log p_y + ε (1 − p_y), from log-softmax."""

        name = "poly1"

        def __init__(self, *, epsilon: float = 1.0, reduction: str = "mean", ignore_index=None):
            super().__init__(reduction=reduction, ignore_index=ignore_index)
            if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)):
                raise TypeError(f"epsilon must be a number, got {epsilon!r}")
            self.epsilon = epsilon

        def elementwise(self, logits, index):
            log_p = torch.log_softmax(logits, dim=1).gather(1, index)
            return -log_p - self.epsilon * torch.expm1(log_p)

    return PolyLoss


def test_one_declaration_makes_a_loss_buildable_schema_valid_checked_planned_and_styled(fresh_catalog):
    import torch
    from scipy.special import log_softmax

    from focalcal import losses
    from focalcal.pipeline import build_plan
    from focalcal.pipeline.entries import check_entries
    from focalcal.plots import style

    poly = _poly_loss()
    catalog.declare("poly1", catalog.Loss(poly, "Poly-1", colour="#123456", aliases=("poly",)))

    loss = losses.build({"name": "poly1", "epsilon": 2.0})
    assert type(loss) is poly and losses.parameters("poly1") == {"epsilon": 1.0, "reduction": "mean",
                                                                  "ignore_index": None}
    rng = np.random.default_rng(0)
    logits, labels = rng.normal(size=(6, 4)) * 3, rng.integers(0, 4, 6)
    log_p = log_softmax(logits, axis=1)[np.arange(6), labels]
    expected = np.mean(-log_p + 2.0 * (1 - np.exp(log_p)))  # the closed form, in float64
    value = loss(torch.tensor(logits), torch.tensor(labels))
    assert float(value) == pytest.approx(expected, rel=1e-12)

    config = load_config_file(ROOT / "config" / "test.yaml")
    config["losses"]["poly"] = {"name": "poly1", "epsilon": 2.0}
    config["studies"] = {"test_digits": config["studies"]["test_digits"]}
    config["studies"]["test_digits"]["grids"][0]["losses"].append("poly")
    validate_config(config, SCHEMA)
    planned = [str(run) for run in build_plan(config).runs if "/poly/" in str(run)]
    assert len(planned) == 1 and planned[0].endswith("digits/cnn_small/poly/tiny/seed0")  # one seed
    check_entries(config)
    bad = copy.deepcopy(config)
    bad["losses"]["poly"] = {"name": "poly1", "epsilom": 2.0}
    with pytest.raises(ConfigError, match=r"losses\.poly\.epsilom: unknown parameter of loss 'poly1' \(did you mean "
                                          r"'epsilon'\?\)"):
        check_entries(bad)
    bad["losses"]["poly"] = {"name": "poly1", "epsilon": "2"}
    with pytest.raises(ConfigError, match=r"losses\.poly\.epsilon: epsilon must be a number, got '2'"):
        check_entries(bad)

    assert style.color_for("poly1") == style.color_for("Poly") == "#123456"
    from focalcal.core.spec_facts import loss_info
    from focalcal.report.targets import report_plan

    study = report_plan(build_plan(config)).studies["test_digits"]  # in the report's plan, labelled
    assert "poly" in study.scale["losses"] and loss_info(config["losses"]["poly"]).label == "Poly-1"
    assert catalog.loss("poly1").label == "Poly-1" and catalog.focal_gamma({"name": "poly1"}) is None


def test_one_declaration_makes_a_calibrator_buildable_stored_and_schema_valid(fresh_catalog):
    from focalcal.calibration import Calibrator, build

    class Shift(Calibrator):
        """Adds a fitted constant to the first logit (a toy with one fitted number)."""

        name = "shift"
        _fitted_attributes = ("shift_",)

        def _fit(self, logits, labels):
            self.shift_ = float(np.mean(labels == 0) - 0.5)

        def _transform(self, logits):
            shifted = logits + np.eye(logits.shape[1])[0] * self.shift_
            return np.exp(shifted - np.logaddexp.reduce(shifted, axis=1, keepdims=True))

    catalog.declare("shift", catalog.Calibrator(Shift, colour="#654321"))
    logits, labels = np.array([[0.0, 1.0], [2.0, 0.0], [1.0, 1.0], [0.5, 0.0]]), np.array([0, 0, 0, 1])
    fitted = build({"name": "shift"}).fit(logits, labels)
    assert fitted.shift_ == pytest.approx(0.25)
    restored = Calibrator.from_dict(fitted.to_dict())
    np.testing.assert_allclose(restored.transform(logits), fitted.transform(logits), rtol=0, atol=0)
    config = load_config_file(ROOT / "config" / "test.yaml")
    config["calibrators"]["shifted"] = {"name": "shift"}
    validate_config(config, SCHEMA)


def test_declare_refuses_a_name_twice_and_an_entry_it_cannot_build(fresh_catalog):
    from focalcal import losses

    with pytest.raises(ValueError, match="loss name 'focal' is already declared"):
        catalog.declare("focal", catalog.Loss(_poly_loss(), "FL"))
    with pytest.raises(ValueError, match="loss 'flsd9' presets 'flsd53', itself a preset"):
        catalog.declare("flsd9", catalog.Loss(None, "FLSD-9", preset=("flsd53", {})))
    with pytest.raises(ValueError, match="needs a builder .* or a preset"):
        catalog.declare("nothing", catalog.Loss(None, "?"))
    with pytest.raises(ValueError, match="dataset 'mine-s': a name ending in '-s' is the subset of another set"):
        catalog.declare("mine-s", catalog.Dataset(loader="focalcal.data.digits:load_digits_data"))
    with pytest.raises(ValueError, match="model 'net' needs a factory"):
        catalog.declare("net", catalog.Model(sample_shape=(2,)))
    with pytest.raises(ValueError, match="takes a Dataset, Model, Loss or Calibrator"):
        catalog.declare("x", {"name": "x"})
    catalog.declare("typo", catalog.Loss("focalcal.losses.focal:FocalLos", "typo"))
    with pytest.raises(ValueError, match="'focalcal.losses.focal:FocalLos': module 'focalcal.losses.focal' has no "
                                         "attribute 'FocalLos'"):
        losses.build({"name": "typo"})
