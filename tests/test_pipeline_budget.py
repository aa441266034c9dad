"""`focalcal plan`: a study's training budget in GPU-hours from what `bench gpu` measured."""

import json
from pathlib import Path

import pytest

from focalcal.cli import main
from focalcal.pipeline import build_plan, load_config_file, validate_config
from focalcal.pipeline.budget import describe, seconds_per_epoch, study_budgets

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "config" / "studies" / "mukhoti2020.yaml"
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def row(s_per_epoch):
    return {"s_per_epoch_45k": s_per_epoch, "images_per_s": 45_000 / s_per_epoch}


RESULTS = {
    "device": "NVIDIA H200", "torch": "2.x", "date": "2026-11-26", "commit": "abc1234",
    "architectures": {
        # the fastest of ours counts; the reference loop and the fp32 baseline never do
        "resnet50": {"reference": row(1.0), "fp32 none": row(2.0), "bf16 none": row(9.0), "bf16 cudagraphs": row(4.0)},
        "densenet121": {"reference": row(30.0), "fp32 none": row(20.0), "bf16 none": row(18.0)},
    },
    "packing": [{"runs": 1, "images_per_s": 10_000.0}, {"runs": 4, "images_per_s": 25_000.0}],
}


@pytest.fixture(scope="module")
def plan():
    return build_plan(validate_config(load_config_file(STUDY), SCHEMA))


def test_seconds_per_epoch_is_our_fastest_mode():
    assert seconds_per_epoch(RESULTS) == {"resnet50": 4.0, "densenet121": 18.0}


def test_a_study_costs_epochs_times_the_measured_epoch_per_run(plan):
    (budget,) = study_budgets(plan, RESULTS)
    assert budget.study == "mukhoti2020" and budget.runs == 121
    # CIFAR-10 and CIFAR-100, 11 losses each, 350 epochs (the cifar_350 recipe)
    assert budget.by_architecture["resnet50"] == {"runs": 22, "epochs": 22 * 350,
                                                  "gpu_hours": pytest.approx(22 * 350 * 4.0 / 3600)}
    assert budget.by_architecture["densenet121"]["gpu_hours"] == pytest.approx(22 * 350 * 18.0 / 3600)
    assert budget.gpu_hours == pytest.approx(22 * 350 * 22.0 / 3600)
    assert budget.estimated == 44
    # what the benchmark did not measure is counted, not guessed
    assert budget.unmeasured["cifar10 / wide_resnet26_10"] == 11
    assert budget.unmeasured["tiny_imagenet / resnet50"] == 11
    assert sum(budget.unmeasured.values()) == 121 - 44
    text = describe([budget], RESULTS, "bench/gpu_results.json")
    assert "Training budget on NVIDIA H200" in text and "mukhoti2020: 47.1 GPU-hours for 44 of its 121" in text
    assert "resnet50: 22 runs, 7,700 epochs, 8.6 GPU-hours" in text
    assert "Packed 4 runs per GPU" in text and "2.50×" in text


def test_it_says_plainly_when_nothing_was_measured_for_that_gpu(plan):
    budgets = study_budgets(plan, RESULTS)
    text = describe(budgets, RESULTS, "bench/gpu_results.json", gpu="A100")
    assert text.startswith("No figures were measured on A100: bench/gpu_results.json holds NVIDIA H200's")
    assert "mukhoti2020: 121 training runs, GPU-hours not measured" in text
    none = describe(study_budgets(plan, None), None, "bench/gpu_results.json")
    assert none.startswith("No GPU figures: bench/gpu_results.json does not exist")
    assert study_budgets(plan, None)[0].gpu_hours == 0


def test_the_plan_command(tmp_path, capsys):
    results = tmp_path / "gpu_results.json"
    results.write_text(json.dumps(RESULTS))
    assert main(["plan", str(STUDY), "--gpu-results", str(results), "--schema", str(SCHEMA)]) == 0
    assert "mukhoti2020: 47.1 GPU-hours" in capsys.readouterr().out
    results.write_text("{not json")
    assert main(["plan", str(STUDY), "--gpu-results", str(results), "--schema", str(SCHEMA)]) == 2
    assert "is not valid JSON" in capsys.readouterr().err
