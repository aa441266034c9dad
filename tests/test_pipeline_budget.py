"""`focalcal plan`: a study's training budget in GPU-hours from what `bench gpu` measured: the
run's measured epoch (Trainer.fit under compile: auto) where the run section has it, else,
labelled as the step's alone, per-step seconds × the steps of an epoch (351 batches and the
partial one), from full-epoch results or derived from the older 100-batch ones; and packing
recommended per model only where it was measured to gain."""

import json
from pathlib import Path

import pytest

from focalcal.commands.cli import main
from focalcal.pipeline import build_plan, load_config_file, validate_config
from focalcal.pipeline.budget import (
    CPU_STEP,
    PACKING_GAIN,
    describe,
    epoch_figures,
    packing_advice,
    seconds_per_epoch,
    study_budgets,
)

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "config" / "studies" / "mukhoti2020.yaml"
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def legacy_row(seconds_per_100_batches):
    return {"images": 12_800, "seconds": seconds_per_100_batches, "images_per_s": 12_800 / seconds_per_100_batches}


#: the older results: 100-batch epochs, packing summed from each worker's own rate
LEGACY = {
    "device": "NVIDIA H200", "torch": "2.x", "date": "2026-11-26", "commit": "abc1234", "batch_size": 128,
    "steps_per_epoch": 100,
    "architectures": {
        # the fastest of ours counts; the reference loop, the fp32 baseline and a failed mode never do
        "resnet50": {"reference": legacy_row(0.5), "fp32 none": legacy_row(0.8), "bf16 none": legacy_row(2.5),
                     "bf16 cudagraphs": legacy_row(1.0), "bf16 default": {"error": "RuntimeError: boom"}},
        "densenet121": {"reference": legacy_row(9.0), "fp32 none": legacy_row(4.0), "bf16 none": legacy_row(5.0)},
    },
    "packing": [{"runs": 1, "images_per_s": 10_000.0}, {"runs": 4, "images_per_s": 25_000.0}],
}


def row(s_per_step, status="ok"):
    return ({"status": status, "steps": 352, "seconds": s_per_step * 352, "s_per_step": s_per_step,
             "images": 45_000, "images_per_s": 45_000 / (s_per_step * 352)} if status == "ok"
            else {"status": status, "reason": "the step planned 'cudagraphs' ran 'none': capture failed"})


#: full-epoch results (bench gpu's schema 2)
FULL = {
    "schema": 2, "device": "NVIDIA H100 80GB HBM3", "torch": "2.y", "date": "2026-11-28", "commit": "def5678",
    "epoch": {"images": 45_000, "batch": 128, "warmup_batches": 10, "full_batches": 351, "partial_batch": 72,
              "steps": 352},
    "architectures": {
        "resnet50": {"reference": row(0.001), "cudagraphs": row(0.0125), "none": row(0.03)},
        "densenet121": {"reference": row(0.07), "fp32 none": row(0.001), "cudagraphs": row(0, "failed"),
                        "none": row(0.05)},
    },
    "packing": {"without_mps": {"rows": [{"runs": 1, "status": "ok", "images_per_s": 10_000.0},
                                         {"runs": 4, "status": "ok", "images_per_s": 12_000.0},
                                         {"runs": 8, "status": "failed", "reason": "worker 3 exited -9"}]},
                "with_mps": {"rows": [{"runs": 1, "status": "ok", "images_per_s": 9_800.0},
                                      {"runs": 4, "status": "ok", "images_per_s": 19_600.0}]}},
}


@pytest.fixture(scope="module")
def plan():
    return build_plan(validate_config(load_config_file(STUDY), SCHEMA))


def test_an_epoch_is_the_per_step_time_times_352_steps():
    # 100-batch results: 1.0 s per 100 steps -> 10 ms per step, × 352 steps (the partial one counted as full)
    assert seconds_per_epoch(LEGACY) == {"resnet50": pytest.approx(3.52), "densenet121": pytest.approx(17.6)}
    assert epoch_figures(LEGACY)["resnet50"] == {"source": "step", "loop": "bf16 cudagraphs", "s_per_step": 0.01,
                                                 "steps": 352, "s_per_epoch": pytest.approx(3.52)}
    # full epochs: their own per-step time × their own 352 steps; the failed cudagraphs row never counts
    assert epoch_figures(FULL)["resnet50"]["s_per_epoch"] == pytest.approx(4.4)
    assert epoch_figures(FULL)["densenet121"] == {"source": "step", "loop": "none", "s_per_step": 0.05, "steps": 352,
                                                  "s_per_epoch": pytest.approx(17.6)}


def test_a_study_costs_epochs_times_the_measured_epoch_per_run(plan):
    budget, _ = study_budgets(plan, LEGACY)
    assert budget.study == "mukhoti2020" and budget.runs == 121
    # CIFAR-10 and CIFAR-100, 11 losses each, 350 epochs (the cifar_350 recipe)
    assert budget.by_architecture["resnet50"] == {"runs": 22, "epochs": 22 * 350,
                                                  "gpu_hours": pytest.approx(22 * 350 * 3.52 / 3600)}
    assert budget.by_architecture["densenet121"]["gpu_hours"] == pytest.approx(22 * 350 * 17.6 / 3600)
    assert budget.gpu_hours == pytest.approx(22 * 350 * 21.12 / 3600)
    assert budget.estimated == 44
    # what the benchmark did not measure is counted, not guessed
    assert budget.unmeasured["cifar10 / wide_resnet26_10"] == 11
    assert budget.unmeasured["tiny_imagenet / resnet50"] == 11
    assert sum(budget.unmeasured.values()) == 121 - 44
    text = describe([budget], LEGACY, "bench/gpu_results.json")
    assert text.startswith("Training budget on NVIDIA H200, one run per GPU, from bench/gpu_results.json, measured on "
                           "NVIDIA H200 by `python -m bench gpu` (torch 2.x, 2026-11-26, commit abc1234): the step's "
                           "figures alone: this results file has no run section")
    assert ("evaluation, checkpoint and the rest of the epoch are not counted; 100-batch epochs, per-step time × 352 "
            "steps per epoch (the partial batch counted as a full one):") in text
    assert "mukhoti2020: 45.2 GPU-hours for 44 of its 121" in text
    assert "resnet50: 22 runs, 7,700 epochs, 7.5 GPU-hours (bf16 cudagraphs: 10.0 ms/step × 352 = 3.52 s per epoch)" in text
    # the older packing summed each run's own rate: no recommendation from it
    assert ("  resnet50: packing unmeasured (the older results summed each packed run's own rate, which overstates); "
            "not recommended: one run per GPU") in text
    assert "  densenet121: packing unmeasured (bench gpu packed no densenet121 runs beside one)" in text


def test_full_epoch_figures_say_so_and_pack_with_mps(plan):
    budget, _ = study_budgets(plan, FULL)
    assert budget.by_architecture["resnet50"]["gpu_hours"] == pytest.approx(22 * 350 * 0.0125 * 352 / 3600)
    text = describe([budget], FULL, "gpu.json")
    assert text.startswith("Training budget on NVIDIA H100 80GB HBM3, one run per GPU, from gpu.json, measured on "
                           "NVIDIA H100 80GB HBM3 by `python -m bench gpu` (torch 2.y, 2026-11-28, commit def5678): "
                           "the step's figures alone")
    assert ("full epochs of 45,000 images (351 batches of 128 and one of 72), per-step time × 352 steps:") in text
    assert "densenet121: 22 runs, 7,700 epochs, 37.6 GPU-hours (none: 50.0 ms/step × 352 = 17.60 s per epoch)" in text
    # ResNet-50's best: 4 runs with MPS at 2.00× one (without MPS 1.20×)
    assert ("  resnet50: 4 packed runs per GPU with MPS trained 2.00× the images/s of one: training.runs_per_gpu: 4 "
            "divides its GPU-hours by 2.00") in text


def test_it_says_plainly_when_nothing_was_measured_for_that_gpu(plan):
    budgets = study_budgets(plan, LEGACY)
    text = describe(budgets, LEGACY, "bench/gpu_results.json", gpu="A100")
    assert text.startswith("No figures were measured on A100: bench/gpu_results.json holds NVIDIA H200's")
    assert "mukhoti2020: 121 training runs, GPU-hours not measured" in text
    none = describe(study_budgets(plan, None), None, "bench/gpu_results.json")
    assert none.startswith("No GPU figures: bench/gpu_results.json does not exist")
    assert study_budgets(plan, None)[0].gpu_hours == 0


def test_the_translation_study_counts_steps_with_the_published_and_the_measured_step_cost(plan):
    """mukhoti2020 §5.2: 3 Transformer-base runs of 100,000 steps (Vaswani et al. §5.2); bench gpu
    does not time them, so GPU-hours come from Vaswani's 0.4 s per step on 8 P100s."""
    _, translation = study_budgets(plan, LEGACY)
    assert (translation.study, translation.runs, translation.estimated) == ("mukhoti2020_translation", 3, 0)
    assert translation.steps == {"transformer-base": {"runs": 3, "steps": 300_000, "tokens": 25_000}}
    assert translation.unmeasured == {"WMT14-en-de / transformer-base": 3}
    text = describe([translation], LEGACY, "bench/gpu_results.json")
    hours = 300_000 * 0.4 * 8 / 3600
    assert (f"transformer-base: 3 runs, 300,000 steps of about 25,000 tokens; published: 0.4 s per step on 8 "
            f"NVIDIA P100 GPUs (Vaswani et al. 2017 §5.2), {hours:,.1f} NVIDIA P100 GPU-hours; measured here: ") in text
    cpu = CPU_STEP["transformer-base"].seconds
    assert f"{cpu:,.0f} CPU s per 25,000-token step" in text and f"{300_000 * cpu / 86400:,.0f} CPU-days" in text
    assert "transformer-base: 3 runs, 300,000 steps" in describe([translation], None, "bench/gpu_results.json")


def test_the_plan_command(tmp_path, capsys):
    results = tmp_path / "gpu_results.json"
    results.write_text(json.dumps(FULL))
    assert main(["plan", str(STUDY), "--gpu-results", str(results), "--schema", str(SCHEMA), "--gpu", "H100"]) == 0
    out = capsys.readouterr().out
    assert "full epochs of 45,000 images" in out and "mukhoti2020: 47.1 GPU-hours for 44 of its 121" in out
    results.write_text("{not json")
    assert main(["plan", str(STUDY), "--gpu-results", str(results), "--schema", str(SCHEMA)]) == 2
    assert "is not valid JSON" in capsys.readouterr().err


#: schema 3: the run section's ResNet-50 epoch, and packing per model
RUNS = {**FULL, "schema": 3, "commit": None, "commit_source": "focalcal imported from /copy/focalcal, not a git checkout",
        "runs": {"resnet50": {"status": "ok", "run": "cifar10/resnet50/focal3/cifar_350", "mode": "cudagraphs",
                              "images": 45_000, "seconds": 5.0,
                              "epochs": [{"epoch": 1, "seconds": 9.0, "train": 8.0},
                                         {"epoch": 2, "seconds": 5.0, "train": 4.6}]},
                 "densenet121": {"status": "failed", "reason": "OutOfMemoryError: CUDA out of memory"}},
        "packing": {"resnet50": {"without_mps": {"rows": [{"runs": 1, "status": "ok", "images_per_s": 10_000.0},
                                                          {"runs": 4, "status": "ok", "images_per_s": 10_500.0}]},
                                 "with_mps": {"status": "unavailable", "reason": "MPS not available"}},
                    "global_pooling_cnn": {"without_mps": {"rows": [
                        {"runs": 1, "status": "ok", "images_per_s": 40_000.0},
                        {"runs": 2, "status": "ok", "images_per_s": 70_000.0},
                        {"runs": 4, "status": "failed", "reason": "worker 3 exited -9"}]}}}}


def test_the_runs_measured_epoch_replaces_the_steps_and_says_which_gpu(plan):
    figures = epoch_figures(RUNS)
    assert figures["resnet50"] == {"source": "run", "run": "cifar10/resnet50/focal3/cifar_350", "mode": "cudagraphs",
                                   "epoch": 2, "s_per_epoch": 5.0, "train_s": 4.6, "images": 45_000}
    assert figures["densenet121"]["source"] == "step"  # its run failed: the step's figure, labelled
    budget, _ = study_budgets(plan, RUNS)
    assert budget.by_architecture["resnet50"]["gpu_hours"] == pytest.approx(22 * 350 * 5.0 / 3600)
    text = describe([budget], RUNS, "gpu.json", gpu="H100")
    assert text.startswith("Training budget on NVIDIA H100 80GB HBM3, one run per GPU, from gpu.json, measured on "
                           "NVIDIA H100 80GB HBM3 by `python -m bench gpu` (torch 2.y, 2026-11-28, commit none recorded "
                           "(focalcal imported from /copy/focalcal, not a git checkout)): the run's epoch (Trainer.fit "
                           "under compile: auto) where its run section trained the architecture; elsewhere the step's "
                           "alone, full epochs of 45,000 images")
    assert ("resnet50: 22 runs, 7,700 epochs, 10.7 GPU-hours (the run's epoch: cifar10/resnet50/focal3/cifar_350 "
            "under compile: auto (cudagraphs), epoch 2 of 45,000 images, 5.00 s, of which training 4.60 s)") in text
    assert ("densenet121: 22 runs, 7,700 epochs, 37.6 GPU-hours (the step only, none: 50.0 ms/step × 352 = 17.60 s "
            "per epoch)") in text


def test_packing_is_recommended_only_where_it_was_measured_to_gain():
    lines = packing_advice(RUNS, {"resnet50", "global_pooling_cnn", "mlp"})
    assert PACKING_GAIN == 1.10
    assert lines == [
        ("  global_pooling_cnn: 2 packed runs per GPU without MPS trained 1.75× the images/s of one: "
         "training.runs_per_gpu: 2 divides its GPU-hours by 1.75"),
        "  mlp: packing unmeasured (bench gpu packed no mlp runs beside one); not recommended: one run per GPU",
        ("  resnet50: one run fills the GPU (4 packed runs without MPS trained 1.05× the images/s of one); keep "
         "training.runs_per_gpu: 1"),
    ]
    # schema 2 packed ResNet-50 only
    assert packing_advice(FULL, {"resnet20"}) == [
        "  resnet20: packing unmeasured (bench gpu packed no resnet20 runs beside one); not recommended: one run per GPU"]
