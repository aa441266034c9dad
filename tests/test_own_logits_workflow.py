"""config/examples/own_logits.yaml end to end: logits files of a model trained elsewhere go
through calibration, the study table, the claims and the report like trained runs, beside
two runs trained here; nothing imported is trained, exported or loaded as data."""

from __future__ import annotations

import csv
import json
import shutil

import numpy as np
import pytest
from conftest import ROOT, planned_jobs, snakemake
from test_report_browser import ensure_chromium

from focalcal.calibration import Calibrator
from focalcal.logits_file import EXAMPLE_MODELS, write_example_logits
from focalcal.report.browser import check_report

CONFIG = ROOT / "config" / "examples" / "own_logits.yaml"
IMPORTED = [f"cifar10/my_model/{loss}/imported/seed{seed}" for loss in EXAMPLE_MODELS for seed in (0, 1, 2)]


def read_rows(path) -> list[dict]:
    with open(path) as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def own_logits_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("own_logits")
    write_example_logits(workdir / "own_logits")
    snakemake(workdir, "--cores", "2", "--configfile", str(CONFIG))
    return workdir


def test_imported_runs_are_copied_checked_and_never_trained(own_logits_run):
    for path in IMPORTED:
        run_dir = own_logits_run / "results/runs" / path
        assert sorted(p.name for p in run_dir.iterdir() if p.suffix != ".sha256") == [
            "logits.npz", "run.json", "run_config.json"]  # no checkpoint, no history
        loss, seed = path.split("/")[2], int(path[-1])
        source = own_logits_run / "own_logits" / f"{loss}_seed{seed}.npz"
        original, copied = np.load(source), np.load(run_dir / "logits.npz")
        for key in ("val_logits", "val_labels", "test_logits", "test_labels"):
            np.testing.assert_array_equal(copied[key], original[key])
        info = json.loads((run_dir / "run.json").read_text())
        assert info["imported_from"] == f"own_logits/{loss}_seed{seed}.npz"
        assert len(info["source_sha256"][source.name]) == 64
        assert info["health"]["status"] == "trained" and "too few to judge convergence" in info["health"]["reason"]
    benchmarks = {p.relative_to(own_logits_run / "results/benchmarks/train").as_posix()
                  for p in (own_logits_run / "results/benchmarks/train").rglob("*.tsv")}
    assert benchmarks == {f"digits/cnn_small/{loss}/tiny/seed0.tsv" for loss in EXAMPLE_MODELS}  # only these trained
    assert sorted(p.name for p in (own_logits_run / "data/ready").iterdir() if p.suffix == ".json") == ["digits.json"]


def test_imported_runs_are_calibrated_tabulated_and_claimed_like_trained_ones(own_logits_run):
    rows = read_rows(own_logits_run / "results/tables/own_logits.csv")
    models = {row["model"] for row in rows}
    assert models == {"my_model", "cnn_small"}
    ece = {(r["model"], r["loss"], r["seed"], r["calibrator"]): float(r["value"]) for r in rows
           if r["metric"] == "ece" and r["bins"] == "15"}
    for seed in "012":  # the overconfident stand-in is fixed by temperature scaling
        assert ece["my_model", "ce", seed, "ts_nll"] < ece["my_model", "ce", seed, "raw"] / 2
    stored = json.loads((own_logits_run / "results/calibration" / IMPORTED[0] / "calibration.json").read_text())
    assert {"dirichlet", "ets", "fts_ece"} <= set(stored)
    assert Calibrator.from_dict(stored["ets"]["fitted"]).weights_.sum() == pytest.approx(1.0)
    # the stand-ins' temperatures are 2 (ce) and 0.7 (focal3): TS finds them
    for path in IMPORTED:
        fitted = json.loads((own_logits_run / "results/calibration" / path / "calibration.json").read_text())
        expected = EXAMPLE_MODELS[path.split("/")[2]]
        assert fitted["ts_nll"]["fitted"]["fitted"]["temperature_"] == pytest.approx(expected, rel=0.15)
    claims = {r["claim"]: r for r in read_rows(own_logits_run / "results/tables/claims.csv")}
    assert claims["k24-temperature-falls"]["verdict"] == "holds"
    table = read_rows(own_logits_run / "results/tables/own_logits/komisarenko2024_table1.csv")
    assert {r["model"] for r in table} == {"my_model", "cnn_small"}


def test_the_report_shows_imported_runs_and_opens_in_chromium(own_logits_run):
    inventory = read_rows(own_logits_run / "results/report/runs.csv")
    imported = [r for r in inventory if r["model"] == "my_model"]
    assert len(imported) == 6 and all(r["device"] == "imported logits (not trained here)" for r in imported)
    ensure_chromium()
    assert check_report(own_logits_run / "results/report")["failures"] == []


def test_a_deleted_import_is_remade_from_its_file_alone(own_logits_run):
    run_dir = own_logits_run / "results/runs" / IMPORTED[0]
    (run_dir / "logits.npz").unlink()
    plan = planned_jobs(snakemake(own_logits_run, "-n", "--configfile", str(CONFIG)))
    assert plan["import_logits"] == 1 and "train" not in plan and "export_logits" not in plan


def test_a_bad_logits_file_fails_its_import_job_naming_the_key(own_logits_run, tmp_path):
    workdir = tmp_path / "bad"
    workdir.mkdir()
    shutil.copytree(own_logits_run / "own_logits", workdir / "own_logits")
    arrays = dict(np.load(workdir / "own_logits/ce_seed1.npz"))
    arrays["test_labels"][0] = 10
    np.savez(workdir / "own_logits/ce_seed1.npz", **arrays)
    result = snakemake(workdir, "--cores", "1", "--configfile", str(CONFIG), "--until", "import_logits", check=False)
    assert result.returncode != 0
    log = (workdir / "results/logs/import_logits/cifar10/my_model/ce/imported/seed1.log").read_text()
    assert "own_logits/ce_seed1.npz [test_labels]: label 10 is outside 0..9" in log
    assert not (workdir / "results/runs/cifar10/my_model/ce/imported/seed1/logits.npz").exists()
