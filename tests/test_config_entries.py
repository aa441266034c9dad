"""focalcal.pipeline.entries: every table entry's parameters checked against the library at parse time."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import yaml
from conftest import ROOT, SHIPPED_CONFIGS, snakemake

from focalcal.pipeline import ConfigError, check_entries, entries, load_config_file, load_config_files, validate_config

SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


@pytest.fixture
def ci_config() -> dict:
    return validate_config(load_config_file(ROOT / "config" / "test.yaml"), SCHEMA)


def problems_of(config: dict) -> str:
    with pytest.raises(ConfigError) as error:
        check_entries(config)
    return str(error.value)


# Six mistakes a dry run without the entry check would pass and a job would fail on: (table, key, entry,
# what the message must say: the key path, the problem, and what is allowed).
BAD_ENTRIES = {
    "quoted number": ("losses", "focal_s", {"name": "focal", "gamma": "1"},
                      ["losses.focal_s.gamma:", "must be a real number in [0, inf), got '1'"]),
    "negative gamma": ("losses", "focal_s", {"name": "focal", "gamma": -2},
                       ["losses.focal_s.gamma:", "FocalLoss: gamma must be a real number in [0, inf)", "got -2"]),
    "misspelt parameter": ("losses", "focal_s", {"name": "focal", "gama": 2},
                           ["losses.focal_s.gama:", "did you mean 'gamma'", "accepted: gamma, alpha, smoothing"]),
    "unknown objective": ("calibrators", "ts", {"name": "temperature_scaling", "objective": "nlll"},
                          ["calibrators.ts.objective:", "'nlll'", "one of 'nll', 'ece', 'focal'"]),
    "misspelt dataset option": ("datasets", "mnist", {"name": "mnist1d", "n_sampls": 500},
                                ["datasets.mnist.n_sampls:", "did you mean 'n_samples'", "n_samples, data_seed"]),
    "misspelt model option": ("models", "cnn", {"name": "cnn_small", "widht": 8},
                              ["models.cnn.widht:", "did you mean 'width'", "accepted: in_channels, width, image_size"]),
}


@pytest.mark.parametrize("mistake", list(BAD_ENTRIES))
def test_a_bad_entry_is_named_with_its_key_path_and_the_allowed_values(ci_config, mistake):
    table, key, entry, expected = BAD_ENTRIES[mistake]
    ci_config[table][key] = entry
    message = problems_of(ci_config)
    for text in expected:
        assert text in message


def test_every_bad_entry_is_reported_at_once(ci_config):
    for mistake, (table, key, entry, _) in BAD_ENTRIES.items():
        ci_config[table][f"{key}_{mistake.replace(' ', '_')}"] = entry
    message = problems_of(ci_config)
    assert message.count("\n  ") == len(BAD_ENTRIES)


@pytest.fixture
def checked(monkeypatch) -> dict:
    """key path -> the problems ``check_entries`` found in that entry, filled as it checks."""
    found = {}
    for table in ("dataset", "model", "loss", "calibrator"):
        check = getattr(entries, f"_{table}_problems")

        def recording(where, entry, library, check=check):
            found[where] = check(where, entry, library)
            return found[where]

        monkeypatch.setattr(entries, f"_{table}_problems", recording)
    return found


@pytest.mark.parametrize("paths", SHIPPED_CONFIGS, ids=lambda paths: "+".join(path.name for path in paths))
def test_the_shipped_configs_pass(paths, checked):
    config = validate_config(load_config_files(paths), SCHEMA)
    check_entries(config)
    every_entry = {f"{table}.{key}" for table in ("datasets", "models", "losses", "calibrators")
                   for key in config.get(table, {})}
    assert set(checked) == every_entry and len(every_entry) >= 10  # each entry checked, none with a problem
    assert not any(checked.values())


def test_from_loss_and_after_are_workflow_level_not_calibrator_parameters(ci_config, checked):
    ci_config["calibrators"]["ts_focal"] = {"name": "temperature_scaling", "objective": "focal", "gamma": "from_loss"}
    ci_config["calibrators"]["ts_focal_psi"] = {"name": "psi", "gamma": "from_loss", "after": "ts_focal"}
    check_entries(ci_config)
    assert checked["calibrators.ts_focal"] == checked["calibrators.ts_focal_psi"] == []
    # the same keys on a calibrator's own parameter are checked as its values: a misspelt one is named
    ci_config["calibrators"]["ts_focal_psi"]["gamma"] = "from_los"
    assert "calibrators.ts_focal_psi.gamma:" in problems_of(ci_config)


@pytest.mark.parametrize(("table", "entry", "expected"), [
    ("losses", {"name": "focal", "gamma": True},
     "losses.x.gamma: FocalLoss: gamma must be a real number in [0, inf), got True"),
    ("losses", {"name": "focal", "alpha": [1, "2"]},
     "losses.x.alpha: FocalLoss: alpha must be a real number in [0, inf), a sequence of at least 2 real numbers"),
    ("losses", {"name": "weighted_cross_entropy", "weights": [True, False]},
     "losses.x.weights: WeightedCrossEntropyLoss: weights must be a sequence of at least 2 real numbers in [0, inf)"),
    ("calibrators", {"name": "temperature_scaling", "objective": "focal", "gamma": "1"},
     "calibrators.x.gamma: TemperatureScaling: gamma must be a real number in [0, inf), got '1'"),
    ("calibrators", {"name": "temperature_scaling", "temperatures": ["0.5", 2]},
     "calibrators.x.temperatures: TemperatureScaling: temperatures must be a non-empty sequence of real numbers"),
    ("calibrators", {"name": "temperature_scaling", "temperature_bounds": ["0.01", 100]},
     ("calibrators.x.temperature_bounds: TemperatureScaling: temperature_bounds must be a strictly increasing "
      "sequence of 2 real numbers in (0, inf)")),
    ("calibrators", {"name": "focal_temperature_scaling", "gammas": [0, True]},
     "calibrators.x.gammas: FocalTemperatureScaling: gammas must be a non-empty sequence of real numbers in (-1, inf)"),
    ("datasets", {"name": "mnist1d", "n_samples": "5000"}, "datasets.x.n_samples: expected int, got '5000' (str)"),
    ("datasets", {"name": "mnist1d", "subset_fraction": True}, "datasets.x.subset_fraction: expected float | None"),
    ("datasets", {"name": "cifar10", "val_size": "5000"}, "datasets.x.val_size: expected a number, got '5000'"),
    ("models", {"name": "wide_resnet28_10", "dropout": "0.3"}, "models.x.dropout: expected float, got '0.3' (str)"),
    ("models", {"name": "deeplabv3plus", "pretrained": "yes"}, "models.x.pretrained: expected bool, got 'yes'"),
])
def test_text_or_a_boolean_where_a_number_is_expected_is_refused(ci_config, table, entry, expected):
    ci_config[table]["x"] = entry
    assert expected in problems_of(ci_config)


def test_a_value_load_would_refuse_is_refused_without_loading(ci_config):
    ci_config["datasets"]["x"] = {"name": "digits-s", "subset_fraction": 0.5}
    ci_config["datasets"]["y"] = {"name": "cifar10", "n_folds": 3, "fold": 0}  # official test set: no folds
    message = problems_of(ci_config)
    assert "datasets.x: 'digits-s' already means subset_fraction=0.1" in message
    assert "datasets.y: dataset 'cifar10' has an official test set, so it takes no folds" in message


def test_data_root_and_download_are_set_for_all_datasets_at_the_top_level(ci_config):
    ci_config["datasets"]["x"] = {"name": "digits", "download": True, "root": "elsewhere"}
    message = problems_of(ci_config)
    assert "datasets.x.download: set for every dataset by the top-level 'download' key" in message
    assert "datasets.x.root: set for every dataset by the top-level 'data_root' key" in message


def test_a_preset_loss_says_which_parameters_it_fixes(ci_config):
    ci_config["losses"]["x"] = {"name": "flsd53", "gammas": [5, 3]}
    assert "losses.x.gammas: unknown parameter of loss 'flsd53' (a preset: it fixes gammas, thresholds)" in problems_of(
        ci_config)


def test_without_torch_the_check_fails_saying_so(ci_config, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    with pytest.raises(ConfigError, match=r"needs torch and the focalcal library in the Python that runs Snakemake"):
        check_entries(ci_config)


# ---------------------------------------------------------------- the library's own number checks
def test_library_number_checks_refuse_text_and_booleans():
    from focalcal import losses
    from focalcal.calibration.registry import build_checked
    from focalcal.core.validation import real_array

    for value in ("1", True):
        with pytest.raises(ValueError, match=r"FocalLoss: gamma must be a real number in \[0, inf\)"):
            losses.build({"name": "focal", "gamma": value})
        with pytest.raises(ValueError, match=r"TemperatureScaling: gamma must be a real number in \[0, inf\)"):
            build_checked({"name": "temperature_scaling", "objective": "focal", "gamma": value})
    for values in ("1", ["1", 2], [1, True], [[1.0], ["2"]], np.array([True])):
        with pytest.raises(ValueError, match="xs must hold real numbers"):
            real_array(values, "xs")
    assert real_array([1, 2.5], "xs").tolist() == [1.0, 2.5]
    assert real_array(np.arange(3), "xs").dtype == np.float64
    build_checked({"name": "temperature_scaling", "temperatures": [0.5, 1, 2.0]})  # ints are numbers


# ------------------------------------------------------------------------- through Snakemake
def test_a_bad_entry_fails_the_dry_run_before_any_job(tmp_path):
    config = yaml.safe_load((ROOT / "config" / "test.yaml").read_text())
    config["losses"]["focal1"]["gamma"] = "1"
    config["models"]["cnn_small"]["widht"] = 8
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    result = snakemake(tmp_path, "-n", "--configfile", str(path), check=False)
    output = result.stdout + result.stderr  # Snakemake 9 logs a parse error to stdout
    assert result.returncode != 0
    assert "losses.focal1.gamma: FocalLoss: gamma must be a real number in [0, inf), got '1'" in output
    assert "models.cnn_small.widht: unknown option of model 'cnn_small'" in output
    assert "Job stats" not in output  # failed while parsing, before planning any job
    assert not (tmp_path / "results").exists() and not (tmp_path / "data").exists()


def test_jobs_that_re_parse_the_snakefile_skip_the_check(tmp_path):
    """A job run by ``snakemake --mode subprocess`` (or ``remote``, on a cluster) parses the
    Snakefile again; the check, and its torch import, ran once in the main process already."""
    config = yaml.safe_load((ROOT / "config" / "test.yaml").read_text())
    config["losses"]["focal1"]["gamma"] = "1"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    assert snakemake(tmp_path, "-n", "--configfile", str(path), check=False).returncode != 0
    snakemake(tmp_path, "-n", "--mode", "subprocess", "--configfile", str(path))


@pytest.mark.parametrize("path", sorted((ROOT / "bench").glob("*.yaml")), ids=lambda path: path.name)
def test_the_benchmarks_frozen_configs_pass(path, checked):
    """A benchmark's baseline config (bench/*.yaml) is run by the workflow too: it passes the
    same checks as a shipped config, so the benchmark does not fail after minutes of work."""
    config = validate_config(load_config_files([path]), SCHEMA)
    check_entries(config)
    assert not any(checked.values())
