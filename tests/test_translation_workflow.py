"""The translation rules: one decode job per run for its temperature grid, made by asking for any
of its files; a translation run's training forced again, or retrained, with what depends on it."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from conftest import SNAKEFILE, planned_jobs, run_as_printed, snakemake
from test_translation_report import SCHEMA, translation_config
from test_workflow import jobs_from_plan

from focalcal import paths
from focalcal.commands.cli import main
from focalcal.files import remake
from focalcal.pipeline import build_plan
from focalcal.pipeline.config import ConfigError


def test_a_translation_study_plans_a_decode_job_per_run_for_its_temperature_grid(tmp_path):
    configfile = tmp_path / "translation.yaml"
    configfile.write_text(yaml.safe_dump(translation_config()))
    counts = planned_jobs(snakemake(tmp_path, "-n", "--configfile", str(configfile)))
    assert counts == jobs_from_plan(configfile)
    # 9 runs (3 losses x 3 seeds): one job each decoding the 9 grid temperatures, one more decode at
    # each fitted temperature (TS by val ECE and by val NLL), one token calibration and metrics each
    assert (counts["decode"], counts["decode_calibrated"], counts["calibrate_tokens"],
            counts["translation_metrics"]) == (9, 18, 9, 9)
    assert "calibrate" not in counts and "export_logits" not in counts


def test_one_temperatures_decode_asked_for_makes_its_runs_grid_in_one_job(tmp_path):
    config = translation_config()
    configfile = tmp_path / "translation.yaml"
    configfile.write_text(yaml.safe_dump(config))
    plan = build_plan(config)
    run = next(iter(plan.runs.values()))
    (tmp_path / run.run_dir).mkdir(parents=True)
    (tmp_path / paths.run_file(run.path, paths.RUN_CONFIG)).write_text(json.dumps(plan.run_config(run)))
    for made in (paths.ready_marker("data", run.dataset), paths.run_file(run.path, paths.HISTORY)):
        (tmp_path / made).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / made).write_text("{}")
    target = paths.translation_decode(run.path, 1.2)
    assert target.endswith(f"{run.path}/decode/T1.20.json")
    result = snakemake(tmp_path, "-n", target, "--configfile", str(configfile))
    assert planned_jobs(result) == {"decode": 1, "total": 1}
    assert f"wildcards: dataset={run.dataset}, model={run.model}, loss={run.loss}, recipe={run.recipe}, " \
           f"seed={run.seed}\n" in result.stdout
    for t in config["decode_temperatures"]:  # the one job writes every temperature's pair
        assert paths.translation_decode(run.path, t) in result.stdout
        assert paths.translation_hypotheses(run.path, t) in result.stdout
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


def _one_tiny_run(tmp_path):
    """translation_config() cut to one stand-in run of one epoch, decoded at T = 1 and at its val-ECE temperature."""
    config = translation_config()
    config["datasets"]["words"] = {"name": "synthetic-translation", "n_train": 200, "n_val": 20, "n_test": 20,
                                   "n_nouns": 4, "n_adjectives": 2, "n_verbs": 3}
    config["recipes"]["mt_tiny"] = {"epochs": 1, "max_tokens": 300, "lr_schedule": "inverse_sqrt", "warmup_steps": 10,
                                    "optimizer": {"name": "adam", "lr": 0.01, "betas": [0.9, 0.98], "eps": 1e-9,
                                                  "weight_decay": 0.0}}
    config["decode_temperatures"] = [1.0]
    grid = config["studies"]["test_translation"]["grids"][0]
    grid.update(losses=["fl1"], seeds=[0], recipe="mt_tiny", calibrators=["uncalibrated", "ts_ece"])
    configfile = tmp_path / "one_run.yaml"
    configfile.write_text(yaml.safe_dump(config))
    run = next(iter(build_plan(validate(config)).runs.values()))
    return configfile, run


def validate(config):
    from focalcal.pipeline import validate_config

    return validate_config(config, str(SCHEMA))


def test_a_forced_translation_train_job_rewrites_its_records_and_a_retrained_run_re_makes_its_decodes(
        tmp_path, monkeypatch, capsys):
    (tmp_path / "config").mkdir()
    configfile, run = _one_tiny_run(tmp_path / "config")
    monkeypatch.setenv(remake.WORKFLOW_ENV, json.dumps({"snakefile": str(SNAKEFILE), "configfiles": [str(configfile)]}))
    workdir = tmp_path / "work"
    metrics = f"{run.calibration_dir}/{paths.METRICS}"
    decodes = [paths.translation_decode(run.path, 1.0), paths.calibrated_decode(run.path, "ts_ece")]
    checkpoint = workdir / run.run_dir / paths.CHECKPOINT
    snakemake(workdir, metrics, "--cores", "1", "--configfile", str(configfile))
    first = checkpoint.read_bytes()
    decoded_from = {path: json.loads((workdir / path).read_text())["checkpoint_sha256"] for path in decodes}
    assert set(decoded_from.values()) == {digest(checkpoint)}

    # forced on a finished run, the job re-writes its records from the checkpoint: nothing retrained, so
    # nothing after it is re-made
    forced = snakemake(workdir, "-f", paths.run_file(run.path, paths.HISTORY), "--cores", "1", "--configfile",
                       str(configfile))
    assert planned_jobs(forced) == {"train": 1, "total": 1} and checkpoint.read_bytes() == first
    assert "records re-written from the checkpoint" in (workdir / paths.log("train", run.path)).read_text()
    assert planned_jobs(snakemake(workdir, metrics, "-n", "--configfile", str(configfile))) == {}

    # retrained as the checkpoint's re-make command says: a new checkpoint, the old decodes named by verify
    command = remake.remake_command(checkpoint)[0]
    assert re.fullmatch(rf"cd \S+ && rm -f {run.run_dir}/checkpoint.pt && snakemake --cores 1 -s \S+ -f "
                        rf"{run.run_dir}/history.csv --configfile \S+", command), command
    run_as_printed(command, workdir)
    assert checkpoint.read_bytes() != first and "epoch 1/1" in (workdir / paths.log("train", run.path)).read_text()
    assert main(["verify", str(workdir)]) == 1
    named = [line for line in capsys.readouterr().out.splitlines() if line.startswith("mismatched: ")]
    new = digest(checkpoint)[:12]
    assert named == [
        (f"mismatched: {workdir / paths.token_logits(run.path)}: it and its run.json were dumped from another "
         f"checkpoint (run.json records sha256 {decoded_from[decodes[0]][:12]}..., checkpoint.pt is {new}...)"),
        *(f"mismatched: {workdir / path}: it was decoded from another checkpoint (it records sha256 "
          f"{decoded_from[path][:12]}..., {checkpoint} is {new}...)" for path in decodes)]

    # the next full run re-makes everything after training, from the new checkpoint
    planned = planned_jobs(snakemake(workdir, metrics, "--cores", "1", "--configfile", str(configfile)))
    assert planned == {"export_token_logits": 1, "calibrate_tokens": 1, "decode": 1, "decode_calibrated": 1,
                       "translation_metrics": 1, "total": 5}
    for path in decodes:
        assert json.loads((workdir / path).read_text())["checkpoint_sha256"] == digest(checkpoint)
    info = json.loads((workdir / run.run_dir / paths.RUN_INFO).read_text())
    assert info["checkpoint_sha256"] == digest(checkpoint)
    assert main(["verify", str(workdir)]) == 0


def digest(path) -> str:
    from focalcal.files.sidecar import digest_file

    return digest_file(path).sha256
