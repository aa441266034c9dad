"""`python -m bench gpu`'s logic on the CPU: the full epoch's batches, the packing formula on
the workers' stamps, FAILED loops that never become figures, the results' schema, the estimate,
and a tiny run of the whole bench on the CPU; the GPU figures need a GPU (bench/README.md)."""

import json
import os
import stat
import sys
from pathlib import Path

import pytest
import torch

from focalcal import losses
from focalcal.pipeline import gpu_sharing
from focalcal.training.step import CompilePlan

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's bench/ package
from bench import bench_gpu

TINY = bench_gpu.Sizes(images=40, batch=16, warmup_batches=1)  # 2 batches of 16 and one of 8


def test_the_reference_loss_is_the_summed_focal_loss():
    logits = (torch.randn(64, 10, generator=torch.Generator().manual_seed(0)) * 4).requires_grad_()
    labels = torch.randint(0, 10, (64,), generator=torch.Generator().manual_seed(1))
    ours = losses.build({"name": "focal", "gamma": 3, "reduction": "sum"})(logits, labels)
    theirs = bench_gpu.released_focal_loss(logits, labels, 3.0)
    torch.testing.assert_close(theirs, ours, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.autograd.grad(theirs, logits)[0], torch.autograd.grad(ours, logits)[0],
                               rtol=1e-4, atol=1e-5)


def test_a_full_epoch_is_351_batches_and_the_partial_one_of_72():
    sizes = bench_gpu.Sizes()
    assert (sizes.images, sizes.batch) == (45_000, 128)
    assert (sizes.full_batches, sizes.partial_batch, sizes.steps) == (351, 72, 352)
    assert (sizes.warmup_images, sizes.warmup_steps) == (10 * 128 + 72, 11)  # the warm-up meets the partial shape too
    assert bench_gpu.Sizes(images=256, batch=128).steps == 2  # no partial batch: none counted
    # the reference's loader takes the same steps: drop_last is off, as in the released code
    loader = torch.utils.data.DataLoader(range(sizes.images), batch_size=sizes.batch)
    assert len(loader) == 352 and len(list(loader)[-1]) == 72


def test_packing_is_all_images_over_first_start_to_last_end():
    workers = [{"start": 100.0, "end": 104.0, "images": 45_000}, {"start": 100.5, "end": 106.0, "images": 45_000}]
    row = bench_gpu.packing_throughput(workers)
    assert row == {"images": 90_000, "seconds": 6.0, "images_per_s": 15_000.0, "start_spread_s": 0.5}
    summed = sum(w["images"] / (w["end"] - w["start"]) for w in workers)  # what the per-worker sum would claim
    assert summed == pytest.approx(19_431.8, abs=0.1) and row["images_per_s"] < summed
    with pytest.raises(ValueError, match="no packed worker"):
        bench_gpu.packing_throughput([])
    with pytest.raises(ValueError, match="no later than they start"):
        bench_gpu.packing_throughput([{"start": 5.0, "end": 5.0, "images": 1}])


def results_with(rows: dict, packing: dict | None = None) -> dict:
    results = {"schema": 2, "device": "NVIDIA H200", "torch": "2.x", "date": "today", "commit": "abc", "quick": False,
               "epoch": {"images": 45_000, "batch": 128, "warmup_batches": 10, "full_batches": 351,
                         "partial_batch": 72, "steps": 352},
               "architectures": rows, "packing": packing or {}, "total_s": 400.0}
    results["ratios"] = bench_gpu.ratios(results)
    return results


def row(seconds: float, **extra) -> dict:
    return bench_gpu.measurement(45_000, 352, seconds, precision="bf16 channels-last", **extra)


def test_a_failed_mode_is_shown_as_failed_never_as_a_figure():
    fallback = bench_gpu.kept_mode(CompilePlan("auto", "cudagraphs"),
                                   CompilePlan("auto", "none", "capture failed (RuntimeError: operation not permitted "
                                                               "when stream is capturing); the step ran eagerly"))
    assert fallback.startswith("the step planned 'cudagraphs' ran 'none': capture failed (RuntimeError")
    assert bench_gpu.kept_mode(CompilePlan("auto", "cudagraphs"), CompilePlan("auto", "cudagraphs")) == ""

    def out_of_memory():
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB\nmore lines")

    rows = {"resnet50": {"reference": row(12.0), "fp32 none": row(10.0), "none": row(11.0),
                         "cudagraphs": bench_gpu.failed(fallback)},
            "densenet121": {"reference": row(26.0), "cudagraphs": bench_gpu.attempt(out_of_memory)}}
    assert rows["densenet121"]["cudagraphs"] == {"status": "failed", "reason": "OutOfMemoryError: CUDA out of memory. "
                                                                               "Tried to allocate 2.00 GiB"}
    packing = {"without_mps": {"rows": [{"runs": 1, "status": "ok", "images": 45_000, "seconds": 4.0,
                                         "images_per_s": 11_250.0, "start_spread_s": 0.0},
                                        {"runs": 4, **bench_gpu.failed("worker 2 exited -9: Killed")}]},
               "with_mps": {"status": "unavailable", "reason": "MPS not available: nvidia-cuda-mps-control -d exited 1"}}
    results = results_with(rows, packing)
    bench_gpu.check_results(results)
    # the failed cudagraphs row gives no ratio: the fastest measured mode of ours is bf16 eager
    assert results["ratios"]["resnet50"] == {"fastest": "none", "vs_reference": 1.09, "vs_own_fp32_eager": 0.91}
    assert "densenet121" not in results["ratios"]  # nothing of ours measured, so no ratio at all
    assert results["ratios"]["packing_without_mps_vs_reference_one_run"] == {"1": 3.0}
    text = bench_gpu.table(results)
    assert f"| resnet50 | cudagraphs | FAILED: {fallback} | | | | |" in text
    assert "| densenet121 | cudagraphs | FAILED: OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB |" in text
    assert "| resnet50 | none | bf16 channels-last | 11.00 | 31.2 | 4,091 | 1.09× |" in text
    assert "| 4 | FAILED: worker 2 exited -9: Killed |  |" in text
    assert "With MPS: MPS not available: nvidia-cuda-mps-control -d exited 1" in text
    assert "DenseNet-121 ≥ its fp32 eager loop: not measured" in text
    assert "ResNet-50 epoch ≥ 2.5× the reference: NOT met (1.09×)" in text


def test_the_results_schema_names_the_bad_entry():
    good = results_with({"resnet50": {"reference": row(12.0), "cudagraphs": row(4.0)}})
    bench_gpu.check_results(good)
    assert good["ratios"]["resnet50"] == {"fastest": "cudagraphs", "vs_reference": 3.0}
    for change, message in [
        (lambda r: r.pop("epoch"), "no 'epoch'"),
        (lambda r: r.update(schema=1), "schema 1, expected 2"),
        (lambda r: r["epoch"].update(partial_batch=0), "does not add up"),
        (lambda r: r["architectures"]["resnet50"].update(cudagraphs={"status": "failed", "reason": "x",
                                                                     "images_per_s": 1.0}),
         "resnet50/cudagraphs is failed and must carry a reason and no figure"),
        (lambda r: r["architectures"]["resnet50"].update(cudagraphs={"status": "ok"}), "resnet50/cudagraphs is ok but"),
        (lambda r: r["architectures"]["resnet50"].update(cudagraphs={"error": "x"}), "status None"),
    ]:
        bad = json.loads(json.dumps(good))
        change(bad)
        with pytest.raises(ValueError, match=message):
            bench_gpu.check_results(bad)


def test_the_estimate_from_the_100_batch_figures():
    legacy = {"device": "NVIDIA H200", "date": "2026-11-27", "steps_per_epoch": 100,
              "architectures": {"resnet50": {"reference": {"seconds": 3.5}, "bf16 cudagraphs": {"seconds": 1.2},
                                             "bf16 default": {"error": "boom"}}},
              "packing": [{"runs": 1, "images_per_s": 10_000.0}, {"runs": 4, "images_per_s": 12_000.0}]}
    per_step, packed, source = bench_gpu.step_seconds(legacy)
    assert per_step == {("resnet50", "reference"): 0.035, ("resnet50", "cudagraphs"): 0.012}
    assert packed == {1: 10_000.0, 4: 12_000.0} and source == "NVIDIA H200's 100-batch epochs of 2026-11-27"
    sizes = bench_gpu.Sizes()
    plan = bench_gpu.estimate({"resnet50": ("reference", "cudagraphs", "none")}, (1, 4), "all", sizes, legacy)
    assert plan["rows"]["resnet50 reference"] == pytest.approx(bench_gpu.SETUP_S + (11 + 352) * 0.035)
    assert plan["rows"]["resnet50 none"] == pytest.approx(bench_gpu.SETUP_S + 363 * bench_gpu.UNKNOWN_S_PER_STEP)
    assert plan["packing"] == {1: pytest.approx(4.5), 4: pytest.approx(15.0)}
    assert plan["total"] == pytest.approx(bench_gpu.recipes_seconds("all") + sum(plan["rows"].values())
                                          + 2 * (bench_gpu.POOL_START_S + 19.5))
    # the shipped plans fit their budgets on the H200's figures
    measured = bench_gpu.load_results(bench_gpu.RESULTS)
    full = bench_gpu.estimate(bench_gpu.LOOPS, bench_gpu.PACKING, "all", sizes, measured)["total"]
    quick = bench_gpu.estimate(bench_gpu.QUICK_LOOPS, bench_gpu.QUICK_PACKING, "one-per-model", sizes, measured)["total"]
    assert full <= bench_gpu.BUDGET_S == 480 and quick <= bench_gpu.QUICK_BUDGET_S == 180


def test_the_study_recipes_estimate_from_their_measured_seconds(tmp_path):
    lines = tmp_path / "recipes.txt"
    lines.write_text("study recipes under compile: auto on cuda: 3 runs\n"
                     "PASS  c/resnet50/focal/r   cudagraphs   4.00 s  loss 2.1\n"
                     "PASS  c/resnet50/ce/r      cudagraphs   0.40 s  loss 2.0\n"
                     "FAIL  c/densenet121/ce/r   none         2.00 s  loss 1.0  (capture failed)\n3/3 passed\n")
    shards, start, build = bench_gpu.RECIPE_SHARDS, bench_gpu.SHARD_START_S, bench_gpu.RECIPE_BUILD_S
    assert bench_gpu.recipes_seconds("all", lines) == pytest.approx(start + (6.4 + 3 * build) / shards)
    assert bench_gpu.recipes_seconds("one-per-model", lines) == pytest.approx(start + (6.0 + 2 * build) / shards)
    assert bench_gpu.recipes_seconds("none", lines) == 0


def test_packing_starts_mps_once_and_stops_it_after(tmp_path, monkeypatch):
    """With a stand-in nvidia-cuda-mps-control on PATH: the packed pool with MPS runs between its
    start and its quit, and sees the daemon's pipe folder; refused, the section says why."""
    record = tmp_path / "calls.txt"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / gpu_sharing.CONTROL
    script.write_text(f'#!/bin/sh\necho "$*" >> "{record}"\n[ -n "$REFUSE" ] && {{ echo "$REFUSE" >&2; exit 1; }}\n'
                      "exit 0\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.setenv(gpu_sharing.PIPE_VARIABLE, str(tmp_path / "pipe"))
    pools = []

    def fake_pool(counts, *args, **kwargs):
        lines = record.read_text().splitlines()
        pools.append((list(lines), os.environ.get(gpu_sharing.PIPE_VARIABLE)))
        return {"rows": [{"runs": n, "status": "ok"} for n in counts]}

    monkeypatch.setattr(bench_gpu, "time_packing", fake_pool)
    record.write_text("")
    out = bench_gpu.packing_section((1, 2), "root", TINY, "resnet8", "cuda", over_budget=lambda runs: "")
    assert pools == [([], str(tmp_path / "pipe")), (["-d"], str(tmp_path / "pipe"))]  # the second pool under MPS
    assert record.read_text().splitlines() == ["-d", ""]  # started once, told to quit once (on stdin)
    assert out["with_mps"]["mps"][-1] == "CUDA MPS stopped" and out["with_mps"]["rows"][0]["status"] == "ok"

    monkeypatch.setenv("REFUSE", "An instance of this daemon is already running")
    record.write_text("")
    out = bench_gpu.packing_section((1,), "root", TINY, "resnet8", "cuda", over_budget=lambda runs: "")
    assert record.read_text().splitlines() == ["-d"]  # nothing to stop
    assert out["with_mps"] == {"status": "unavailable", "reason": (
        f"MPS not available: `{gpu_sharing.CONTROL} -d` exited 1 (An instance of this daemon is already running); "
        "it needs the rights to the GPU and no other MPS daemon on it; the runs share the GPU by time slices")}


def test_our_loop_whose_capture_fell_back_is_failed(monkeypatch, tmp_path):
    """A step that changes its plan during the timed epoch (as a failed capture does) is FAILED."""
    from focalcal.training.trainer import Trainer

    original = Trainer.train_one_epoch

    def falls_back(self, epoch):
        out = original(self, epoch)
        if epoch == 2:
            self.step.plan = CompilePlan(self.step.plan.requested, "eager-after-capture",
                                         "capture failed (RuntimeError: boom); the step ran eagerly from then on")
        return out

    monkeypatch.setattr(Trainer, "train_one_epoch", falls_back)
    row = bench_gpu.time_ours("resnet8", "cudagraphs", str(tmp_path), TINY, device="cpu")
    assert row == {"status": "failed", "reason": "the step planned 'none' ran 'eager-after-capture': capture failed "
                                                 "(RuntimeError: boom); the step ran eagerly from then on"}
    monkeypatch.setattr(Trainer, "train_one_epoch", original)
    good = bench_gpu.time_ours("resnet8", "cudagraphs", str(tmp_path), TINY, device="cpu")
    assert good["status"] == "ok" and (good["images"], good["steps"]) == (40, 3)
    assert good["s_per_step"] == pytest.approx(good["seconds"] / 3, rel=1e-3) and good["precision"] == "fp32"


def test_the_whole_bench_on_the_cpu(tmp_path, capsys):
    """`bench gpu --device cpu` on 40 images of ResNet-8: both loops, 2 packed processes, the JSON and table."""
    code = bench_gpu.main(argv=["--device", "cpu", "--images", "40", "--batch", "16", "--warmup-batches", "1",
                                "--arch", "resnet8", "--loops", "reference,cudagraphs", "--packing", "2",
                                "--recipes", "none", "--out", str(tmp_path)])
    assert code == 0
    results = json.loads((tmp_path / "gpu_results.json").read_text())
    bench_gpu.check_results(results)
    assert results["epoch"] == {"images": 40, "batch": 16, "warmup_batches": 1, "full_batches": 2,
                                "partial_batch": 8, "steps": 3}
    rows = results["architectures"]["resnet8"]
    assert [rows[k]["status"] for k in ("reference", "cudagraphs")] == ["ok", "ok"]
    assert rows["reference"]["steps"] == rows["cudagraphs"]["steps"] == 3 and rows["cudagraphs"]["mode"] == "none"
    (packed,) = results["packing"]["without_mps"]["rows"]
    starts, ends = [w["start"] for w in packed["workers"]], [w["end"] for w in packed["workers"]]
    assert packed["status"] == "ok" and packed["images"] == 80 and len(starts) == 2
    assert packed["seconds"] == pytest.approx(max(ends) - min(starts), abs=1e-3)
    assert packed["images_per_s"] == pytest.approx(80 / packed["seconds"], rel=1e-3)
    assert results["study_recipes"]["status"] == "skipped"
    table = (tmp_path / "gpu_table.md").read_text()
    assert "full epochs of 40 images at batch 16 (2 batches and one of 8, every one timed)" in table
    out = capsys.readouterr().out
    assert out.startswith("bench gpu on cpu: estimated ") and "budget 480 s" in out.splitlines()[0]


def test_measurements_past_the_budget_are_skipped(tmp_path):
    code = bench_gpu.main(argv=["--device", "cpu", "--images", "40", "--batch", "16", "--arch", "resnet8",
                                "--loops", "reference,cudagraphs", "--packing", "", "--recipes", "none",
                                "--budget", "0.001", "--out", str(tmp_path)])
    assert code == 0
    rows = json.loads((tmp_path / "gpu_results.json").read_text())["architectures"]["resnet8"]
    assert {name: r["status"] for name, r in rows.items()} == {"reference": "skipped", "cudagraphs": "skipped"}
    assert "of the 0 s budget used" in rows["reference"]["reason"] and "images_per_s" not in rows["reference"]
    assert "| resnet8 | reference | SKIPPED: " in (tmp_path / "gpu_table.md").read_text()


def test_the_readme_table_is_written_between_its_markers(monkeypatch, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# t\n\n{bench_gpu.TABLE_START}\nold\n{bench_gpu.TABLE_END}\n\nafter\n")
    results = tmp_path / "results.json"
    results.write_text(json.dumps(results_with({"resnet50": {"reference": row(12.0), "cudagraphs": row(4.0)}})))
    monkeypatch.setattr(bench_gpu, "README", readme)
    assert bench_gpu.main(argv=["--render", str(results)]) == 0
    text = readme.read_text()
    assert "old" not in text and text.endswith("after\n")
    assert "| resnet50 | cudagraphs | bf16 channels-last | 4.00 | 11.4 | 11,250 | 3.00× |" in text


def test_without_cuda_it_says_so_and_writes_nothing(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(bench_gpu, "RESULTS", tmp_path / "gpu_results.json")
    bench_gpu.main()
    assert "no CUDA device here" in capsys.readouterr().out
    assert not (tmp_path / "gpu_results.json").exists()
