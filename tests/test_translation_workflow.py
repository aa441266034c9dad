"""The translation rules, planned but not run: a decode per (run, temperature), re-made alone."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import planned_jobs, snakemake
from test_translation_report import SCHEMA, translation_config
from test_workflow import jobs_from_plan

from focalcal import paths
from focalcal.pipeline import build_plan
from focalcal.pipeline.config import ConfigError


def test_a_translation_study_plans_a_decode_per_run_and_temperature(tmp_path):
    configfile = tmp_path / "translation.yaml"
    configfile.write_text(yaml.safe_dump(translation_config()))
    counts = planned_jobs(snakemake(tmp_path, "-n", "--configfile", str(configfile)))
    assert counts == jobs_from_plan(configfile)
    # 9 runs (3 losses x 3 seeds): a decode at each of the 9 grid temperatures, one more at each
    # fitted temperature (TS by val ECE and by val NLL), one token calibration and metrics each
    assert (counts["decode"], counts["decode_calibrated"], counts["calibrate_tokens"],
            counts["translation_metrics"]) == (81, 18, 9, 9)
    assert "calibrate" not in counts and "export_logits" not in counts


def test_one_decode_is_re_made_alone(tmp_path):
    config = translation_config()
    configfile = tmp_path / "translation.yaml"
    configfile.write_text(yaml.safe_dump(config))
    plan = build_plan(config)
    run = next(iter(plan.runs.values()))
    (tmp_path / run.run_dir).mkdir(parents=True)
    (tmp_path / paths.run_file(run.path, paths.RUN_CONFIG)).write_text(json.dumps(plan.run_config(run)))
    for made in (paths.ready_marker("data", run.dataset), paths.run_file(run.path, paths.HISTORY),
                 *(paths.translation_decode(run.path, t) for t in config["decode_temperatures"] if t != 1.2)):
        (tmp_path / made).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / made).write_text("{}")
    target = paths.translation_decode(run.path, 1.2)
    assert target.endswith(f"{run.path}/decode/T1.20.json")
    result = snakemake(tmp_path, "-n", target, "--configfile", str(configfile))
    assert planned_jobs(result) == {"decode": 1, "total": 1}
    assert f"wildcards: dataset={run.dataset}, model={run.model}, loss={run.loss}, recipe={run.recipe}, " \
           f"seed={run.seed}, temperature=1.20" in result.stdout
    # a temperature off the grid is no target
    off_grid = snakemake(tmp_path, "-n", paths.translation_decode(run.path, 1.25), "--configfile",
                         str(configfile), check=False)
    assert off_grid.returncode != 0 and "MissingRuleException" in off_grid.stdout + off_grid.stderr


def test_a_decode_grid_without_t1_is_refused_naming_the_key():
    config = translation_config()
    config["decode_temperatures"] = [0.8, 1.2]
    with pytest.raises(ConfigError, match=r"decode_temperatures: \[0.8, 1.2\] lacks 1, the temperature of the model "
                                          r"as trained, which studies.test_translation.grids\[0\] decodes"):
        translation_config_validated(config)


def translation_config_validated(config):
    from focalcal.pipeline import validate_config

    return validate_config(config, str(SCHEMA))
