"""`python -m bench gpu`'s logic on the CPU: the full epoch's batches, the packing formula on
the workers' stamps, FAILED loops that never become figures, the results' schema, the estimate,
the commit of the package's own checkout, model FLOPs against a GPU's peak, and a tiny run of the
whole bench on the CPU (the run section through Trainer.fit included); the GPU figures need a
GPU (bench/RESULTS.md)."""

import json
import os
import shutil
import stat
import subprocess
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


def results_with(rows: dict, packing: dict | None = None, schema: int = 2, **extra) -> dict:
    results = {"schema": schema, "device": "NVIDIA H200", "torch": "2.x", "date": "today", "commit": "abc",
               "quick": False, "epoch": {"images": 45_000, "batch": 128, "warmup_batches": 10, "full_batches": 351,
                                         "partial_batch": 72, "steps": 352},
               "architectures": rows, "packing": packing or {}, "total_s": 400.0, **extra}
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
    assert "| resnet50 | none | bf16 channels-last | 11.00 | 31.2 | 4,091 | 1.09× |  |" in text
    assert "| resnet50 | 4 | FAILED: worker 2 exited -9: Killed |  | – |  |" in text
    assert "resnet50, with MPS: MPS not available: nvidia-cuda-mps-control -d exited 1" in text
    assert "DenseNet-121 ≥ its fp32 eager loop: not measured" in text
    assert "ResNet-50 training epoch ≥ 2.5× the reference: NOT met (1.09×)" in text
    assert "ResNet-50 run's epoch (Trainer.fit, compile: auto) ≥ 2.5× the authors' whole epoch: not measured" in text


def test_the_results_schema_names_the_bad_entry():
    good = results_with({"resnet50": {"reference": row(12.0), "cudagraphs": row(4.0)}})
    bench_gpu.check_results(good)
    assert good["ratios"]["resnet50"] == {"fastest": "cudagraphs", "vs_reference": 3.0}
    for change, message in [
        (lambda r: r.pop("epoch"), "no 'epoch'"),
        (lambda r: r.update(schema=1), r"schema 1, expected one of \[2, 3\]"),
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
    assert packed == {"resnet50": {1: 10_000.0, 4: 12_000.0}} and source == "NVIDIA H200's 100-batch epochs of 2026-11-27"
    sizes = bench_gpu.Sizes()
    plan = bench_gpu.estimate({"resnet50": ("reference", "cudagraphs", "none", "inductor_cudagraphs")}, (1, 4), "all",
                              sizes, legacy, runs=("resnet50", "resnet20"))
    assert plan["rows"]["resnet50 reference"] == pytest.approx(bench_gpu.SETUP_S + (11 + 352) * 0.035
                                                               + bench_gpu.REFERENCE_VALIDATION_S)
    assert plan["rows"]["resnet50 none"] == pytest.approx(bench_gpu.SETUP_S + 363 * bench_gpu.UNKNOWN_S_PER_STEP)
    # not measured: cudagraphs' step, after inductor's assumed compile
    assert plan["rows"]["resnet50 inductor_cudagraphs"] == pytest.approx(bench_gpu.SETUP_S + 363 * 0.012
                                                                         + bench_gpu.INDUCTOR_COMPILE_S)
    # the run: two epochs of its steps and the assumed overhead (ResNet-20: its assumed step)
    assert plan["runs"] == {"resnet50": pytest.approx(bench_gpu.SETUP_S + 2 * 352 * 0.012 * bench_gpu.RUN_OVERHEAD),
                            "resnet20": pytest.approx(bench_gpu.SETUP_S + 2 * 352 * 0.004 * bench_gpu.RUN_OVERHEAD)}
    assert plan["packing"] == {"resnet50": {1: pytest.approx(4.5), 4: pytest.approx(15.0)}}
    assert plan["total"] == pytest.approx(bench_gpu.recipes_seconds("all") + sum(plan["rows"].values())
                                          + sum(plan["runs"].values())
                                          + 2 * (bench_gpu.POOL_START_S + bench_gpu.MODEL_WARM_S + 19.5))
    # a measured run section is its own estimate: its set-up and epochs
    measured_run = {**legacy, "runs": {"resnet50": {"status": "ok", "setup_s": 3.0, "epochs": [{"seconds": 5.0},
                                                                                                {"seconds": 4.0}]}}}
    assert bench_gpu.estimate({}, (), "none", sizes, measured_run, runs=("resnet50",))["runs"] == {"resnet50": 12.0}
    # the shipped plans fit their budgets on the H200's figures: the quick one whole, the full one
    # up to its deferred inductor_cudagraphs loops, which the budget skips first
    measured = bench_gpu.load_results(bench_gpu.RESULTS)
    full = bench_gpu.estimate(bench_gpu.LOOPS, bench_gpu.PACKING, "one-per-model", sizes, measured,
                              list(bench_gpu.RUNS), bench_gpu.PACKING_MODELS)
    deferred = sum(seconds for key, seconds in full["rows"].items() if tuple(key.split(" ", 1)) in bench_gpu.DEFERRED)
    quick = bench_gpu.estimate(bench_gpu.QUICK_LOOPS, bench_gpu.QUICK_PACKING, "one-per-model", sizes, measured,
                               bench_gpu.QUICK_RUNS, bench_gpu.QUICK_PACKING_MODELS)["total"]
    assert full["total"] - deferred <= bench_gpu.BUDGET_S == 510 and quick <= bench_gpu.QUICK_BUDGET_S == 240
    assert {arch for arch, _ in bench_gpu.DEFERRED} == {"resnet110_bottleneck", "wide_resnet26_10", "densenet121"}


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

    def fake_pool(counts, data_root, sizes, models, *args, **kwargs):
        lines = record.read_text().splitlines()
        pools.append((list(lines), os.environ.get(gpu_sharing.PIPE_VARIABLE), list(models)))
        return {model: {"rows": [{"runs": n, "status": "ok"} for n in counts]} for model in models}

    monkeypatch.setattr(bench_gpu, "time_packing", fake_pool)
    record.write_text("")
    out = bench_gpu.packing_section((1, 2), "root", TINY, ["resnet8", "mlp"], "cuda",
                                    over_budget=lambda model, runs: "")
    pipe = str(tmp_path / "pipe")
    # one pool for both models without MPS, then one under it
    assert pools == [([], pipe, ["resnet8", "mlp"]), (["-d"], pipe, ["resnet8", "mlp"])]
    assert record.read_text().splitlines() == ["-d", ""]  # started once, told to quit once (on stdin)
    for model in ("resnet8", "mlp"):
        assert out[model]["with_mps"]["mps"][-1] == "CUDA MPS stopped"
        assert out[model]["with_mps"]["rows"][0]["status"] == out[model]["without_mps"]["rows"][1]["status"] == "ok"

    monkeypatch.setenv("REFUSE", "An instance of this daemon is already running")
    record.write_text("")
    out = bench_gpu.packing_section((1,), "root", TINY, ["resnet8"], "cuda", over_budget=lambda model, runs: "")
    assert record.read_text().splitlines() == ["-d"]  # nothing to stop
    assert out["resnet8"]["with_mps"] == {"status": "unavailable", "reason": (
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


def test_the_whole_bench_on_the_cpu(tmp_path, capsys, monkeypatch):
    """`bench gpu --device cpu` on 40 images: the run section (a planned charoenphakdee2021 ResNet-8
    run through Trainer.fit, 2 epochs), ResNet-8's reference loop (its whole epoch with the three
    validation passes) and ours with their FLOPs, 2 packed processes of ResNet-8 and of the MLP's
    planned step, the JSON and the table."""
    monkeypatch.setitem(bench_gpu.RUNS, "resnet8", ("charoenphakdee2021.yaml",
                                                     "cifar10/resnet8/focal3/charoenphakdee_cifar10"))
    code = bench_gpu.main(argv=["--device", "cpu", "--images", "40", "--batch", "16", "--warmup-batches", "1",
                                "--arch", "resnet8", "--loops", "reference,cudagraphs", "--runs", "resnet8",
                                "--packing", "2", "--packing-models", "resnet8,mlp", "--recipes", "none",
                                "--out", str(tmp_path)])
    assert code == 0
    results = json.loads((tmp_path / "gpu_results.json").read_text())
    bench_gpu.check_results(results)
    assert results["schema"] == 3
    assert results["epoch"] == {"images": 40, "batch": 16, "warmup_batches": 1, "full_batches": 2,
                                "partial_batch": 8, "steps": 3}
    root = Path(__file__).resolve().parents[1]
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=root, check=True)
    assert results["commit"] == head.stdout.strip() and str(root) in results["commit_source"]
    # the run: the planned run's recipe (FL-3, SGD 0.1, mean reduction, no clipping) on the bench's data
    run = results["runs"]["resnet8"]
    assert run["status"] == "ok" and run["run"] == "cifar10/resnet8/focal3/charoenphakdee_cifar10"
    assert (run["images"], run["val_images"], run["test_images"], run["batch"], run["steps"]) == (40, 8, 8, 16, 3)
    assert (run["compile"], run["mode"], run["precision"]) == ("auto", "none", "fp32")  # auto is eager on the CPU
    assert [e["epoch"] for e in run["epochs"]] == [1, 2]
    for epoch in run["epochs"]:
        phases = [epoch[p] for p in bench_gpu.RUN_PHASES]
        assert sum(phases) == pytest.approx(epoch["seconds"], abs=2e-3) and epoch["train"] > 0 and epoch["evaluate"] > 0
        assert sum(epoch["shares"].values()) == pytest.approx(1.0, abs=2e-3) and epoch["checkpoint_write_s"] > 0
    last = run["epochs"][-1]
    assert run["seconds"] == last["seconds"] and run["outside_train_share"] == pytest.approx(
        1 - last["train"] / last["seconds"], abs=1e-3)
    rows = results["architectures"]["resnet8"]
    assert [rows[k]["status"] for k in ("reference", "cudagraphs")] == ["ok", "ok"]
    assert rows["reference"]["steps"] == rows["cudagraphs"]["steps"] == 3 and rows["cudagraphs"]["mode"] == "none"
    reference = rows["reference"]
    assert reference["val_images"] == 8 and reference["validation_s"] > 0 and reference["save_s"] > 0
    assert reference["whole_epoch_s"] == pytest.approx(reference["seconds"] + reference["validation_s"]
                                                       + reference["save_s"], abs=1e-3)
    whole_rate = 40 / reference["whole_epoch_s"]
    assert results["ratios"]["runs"]["resnet8"]["vs_reference_whole_epoch"] == pytest.approx(
        run["images_per_s"] / whole_rate, abs=0.01)
    for row in rows.values():  # ResNet-8's 9.29 GFLOP a step of 128, at 16 here; no bf16 peak for a CPU
        assert row["model_tflop_per_step"] == pytest.approx(9.2867e-3 / 8, abs=1e-4)
        assert row["bf16_peak_reason"].startswith("no dense bf16 peak known for cpu")
    for model in ("resnet8", "mlp"):
        (packed,) = results["packing"][model]["without_mps"]["rows"]
        starts, ends = [w["start"] for w in packed["workers"]], [w["end"] for w in packed["workers"]]
        assert packed["status"] == "ok" and packed["images"] == 80 and len(starts) == 2
        assert packed["seconds"] == pytest.approx(max(ends) - min(starts), abs=1e-3)
        # seconds are stored to 0.1 ms: an MLP epoch of 80 samples takes about 10 ms
        assert packed["images_per_s"] == pytest.approx(80 / packed["seconds"], rel=0.02)
    assert results["study_recipes"]["status"] == "skipped"
    table = (tmp_path / "gpu_table.md").read_text()
    assert "full epochs of 40 images at batch 16 (2 batches and one of 8, every one timed)" in table
    assert f"commit {results['commit']}" in table
    assert "| cifar10/resnet8/focal3/charoenphakdee_cifar10 | none | fp32 | 2 | " in table
    assert "The authors' whole epoch of resnet8 (the reference loop): training" in table
    assert "| mlp | 2 | " in table
    out = capsys.readouterr().out
    assert out.startswith("bench gpu on cpu: estimated ") and "budget 510 s" in out.splitlines()[0]
    assert "the run " in out.splitlines()[0] and "-- the run: Trainer.fit under compile: auto, 2 epochs" in out


def test_the_commit_is_the_package_checkouts_or_none_with_the_reason(tmp_path):
    """The package's own checkout's HEAD; a package copied into another repository, which does not
    track it, or into no repository, records no commit and says why, never that repository's HEAD."""
    root = Path(__file__).resolve().parents[1]
    package = root / "src" / "focalcal"
    commit, source = bench_gpu.package_commit(package)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=root, check=True)
    assert commit == head.stdout.strip() and source.startswith(f"the checkout at {root} that focalcal was imported from")

    loose = tmp_path / "loose" / "focalcal"
    shutil.copytree(package, loose, ignore=shutil.ignore_patterns("__pycache__"))
    assert bench_gpu.package_commit(loose) == (None, f"focalcal imported from {loose}, not a git checkout")

    other = tmp_path / "other"
    environ = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
               "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_GLOBAL": os.devnull}

    def git(*arguments):
        return subprocess.run(["git", *arguments], cwd=other, env=environ, capture_output=True, text=True, check=True)

    other.mkdir()
    git("init", "-q")
    (other / "README").write_text("another project\n")
    git("add", "README")
    git("commit", "-q", "-m", "another project")
    copied = other / "vendor" / "focalcal"
    shutil.copytree(package, copied, ignore=shutil.ignore_patterns("__pycache__"))
    other_head = git("rev-parse", "--short", "HEAD").stdout.strip()
    commit, source = bench_gpu.package_commit(copied)
    assert commit is None and source == (f"focalcal imported from {copied}, which the git repository at "
                                         f"{git('rev-parse', '--show-toplevel').stdout.strip()} does not track")
    git("add", "vendor")
    git("commit", "-q", "-m", "vendor focalcal")
    commit, source = bench_gpu.package_commit(copied)
    assert commit == git("rev-parse", "--short", "HEAD").stdout.strip() != other_head
    assert not source.endswith("uncommitted changes to the package")
    (copied / "theory" / "closed_forms.py").write_text("# changed\n")
    assert bench_gpu.package_commit(copied)[1].endswith("with uncommitted changes to the package")


def test_model_flops_as_a_fraction_of_the_gpus_bf16_peak():
    assert bench_gpu.model_flops("resnet8", 128) == 9_286_680_576  # forward and backward, 2 per multiply-add
    assert bench_gpu.bf16_peak("NVIDIA H200") == (989.0, "")
    assert bench_gpu.bf16_peak("NVIDIA H100 80GB HBM3") == (989.0, "")
    assert bench_gpu.bf16_peak("NVIDIA H100 PCIe") == (756.0, "")
    assert bench_gpu.bf16_peak("NVIDIA A100-SXM4-80GB") == (312.0, "")
    peak, reason = bench_gpu.bf16_peak("NVIDIA GeForce RTX 4090")
    assert peak is None and reason.startswith("no dense bf16 peak known for NVIDIA GeForce RTX 4090 (known: H200")
    # 1 TFLOP a step of 128: 45,000 images in 4 s are 87.9 TFLOP/s, 8.9 % of the H200's 989
    measured = row(4.0)
    out = bench_gpu.with_flops(measured, 1e12, 128, "NVIDIA H200")
    assert out["model_tflop_per_step"] == 1.0 and out["model_tflop_per_s"] == pytest.approx(87.891, abs=1e-3)
    assert out["bf16_peak_fraction"] == pytest.approx(87.891 / 989, abs=1e-4)
    assert "bf16_peak_fraction" not in bench_gpu.with_flops(measured, 1e12, 128, "Tesla T4")
    assert bench_gpu.with_flops(bench_gpu.failed("boom"), 1e12, 128, "NVIDIA H200") == bench_gpu.failed("boom")
    assert bench_gpu.flops_cell(out) == "87.9 (8.9 %)"


def test_auto_picks_inductor_only_where_it_was_measured_faster_everywhere():
    def results(**inductor):
        rows = {arch: {"cudagraphs": row(4.0), **({"inductor_cudagraphs": row(s)} if s else {})}
                for arch, s in inductor.items()}
        return results_with(rows)

    assert bench_gpu.auto_verdict(results_with({"resnet50": {"cudagraphs": row(4.0)}})) == (
        "compile: auto keeps cudagraphs: inductor_cudagraphs not measured")
    verdict = bench_gpu.auto_verdict(results(resnet50=3.0, densenet121=None))
    assert verdict.startswith("compile: auto keeps cudagraphs: inductor_cudagraphs not measured on densenet121")
    verdict = bench_gpu.auto_verdict(results(resnet50=3.0, densenet121=5.0))
    assert verdict.startswith("compile: auto keeps cudagraphs: inductor_cudagraphs not faster on densenet121")
    assert "resnet50 1.33×" in verdict
    verdict = bench_gpu.auto_verdict(results(resnet50=3.0, densenet121=2.0))
    assert verdict.startswith("inductor_cudagraphs faster on every architecture measured (densenet121 2.00×, "
                              "resnet50 1.33×); compile: auto switches to it only once every study recipe")
    from focalcal.training import step as step_module

    assert step_module.AUTO_CUDA_MODE == "cudagraphs"  # no GPU has measured it: auto keeps its choice


def test_schema_3_renders_the_run_and_the_packing_per_model(monkeypatch, tmp_path):
    run_row = {"status": "ok", "run": "cifar10/resnet50/focal3/cifar_350", "study": "mukhoti2020.yaml",
               "images": 45_000, "val_images": 5000, "test_images": 10_000, "batch": 128, "steps": 352,
               "compile": "auto", "mode": "cudagraphs", "precision": "bf16 channels-last", "setup_s": 5.0,
               "epochs": [bench_gpu.epoch_phases({"epoch": e, "train": 3.5, "evaluate": 0.3, "diagnostics": 0.01,
                                                  "checkpoint": 0.05, "other": 0.14, "total": 4.0,
                                                  "checkpoint_write": 0.4}) for e in (1, 2)],
               "seconds": 4.0, "images_per_s": 11_250.0, "outside_train_share": 0.125}
    reference = row(10.0, validation_s=3.5, save_s=0.5, whole_epoch_s=14.0, val_images=5000)
    packing = {"resnet50": {"without_mps": {"rows": [packed(1, 12_000), packed(4, 10_800)]},
                            "with_mps": {"rows": [packed(1, 11_000), packed(4, 11_000)]}},
               "resnet20": {"without_mps": {"rows": [packed(1, 30_000), packed(4, 75_000)]},
                            "with_mps": {"status": "unavailable", "reason": "MPS not available: no daemon"}}}
    results = results_with({"resnet50": {"reference": reference, "cudagraphs": row(4.0)}}, packing, schema=3,
                           runs={"resnet50": run_row}, commit=None,
                           commit_source="focalcal imported from /x/focalcal, not a git checkout")
    bench_gpu.check_results(results)
    assert results["ratios"]["runs"]["resnet50"] == {"s_per_epoch": 4.0, "outside_train_share": 0.125,
                                                     "vs_reference_whole_epoch": 3.5}
    assert results["ratios"]["packing_gain"] == {"resnet50": {"without_mps": {"1": 1.0, "4": 0.9},
                                                              "with_mps": {"1": 1.0, "4": 1.0}},
                                                 "resnet20": {"without_mps": {"1": 1.0, "4": 2.5}}}
    text = bench_gpu.table(results)
    assert "no commit recorded (focalcal imported from /x/focalcal, not a git checkout)" in text
    assert ("| cifar10/resnet50/focal3/cifar_350 | cudagraphs | bf16 channels-last | 2 | 4.00 | 3.50 (88 %) | "
            "0.30 (8 %) | 0.01 (0 %) | 0.05 (1 %) | 0.14 (4 %) |") in text
    assert "their three validation passes over 5,000 images 3.50 s, the best model's save 0.50 s: 14.00 s" in text
    assert "| resnet20 | 4 | 75,000 | 2.50× | – |  |" in text and "| resnet50 | 4 | 10,800 | 0.90× | 11,000 | 1.00× |" in text
    assert "resnet20, with MPS: MPS not available: no daemon" in text
    assert "ResNet-50 run's epoch (Trainer.fit, compile: auto) ≥ 2.5× the authors' whole epoch: met (3.50×)" in text
    assert "ResNet-50 run's epoch outside training ≤ 10 %: NOT met (12.5 %)" in text
    assert "4 packed small-ResNet runs ≥ 2× one: met (2.50×)" in text
    for change, message in [(lambda r: r.update(commit_source=None), "no commit and no 'commit_source'"),
                            (lambda r: r["runs"]["resnet50"]["epochs"][0].update(train=9.0), "do not add up"),
                            (lambda r: r["packing"]["resnet20"]["without_mps"]["rows"][0].update(status="maybe"),
                             "packing resnet20 without_mps 1 has status 'maybe'")]:
        bad = json.loads(json.dumps(results))
        change(bad)
        with pytest.raises(ValueError, match=message):
            bench_gpu.check_results(bad)
    readme = tmp_path / "README.md"
    readme.write_text(f"{bench_gpu.TABLE_START}\n{bench_gpu.TABLE_END}\n")
    (tmp_path / "r.json").write_text(json.dumps(results))
    monkeypatch.setattr(bench_gpu, "README", readme)
    assert bench_gpu.main(argv=["--render", str(tmp_path / "r.json")]) == 0 and "| resnet20 | 4 |" in readme.read_text()


def packed(runs: int, rate: float) -> dict:
    return {"runs": runs, "status": "ok", "images": runs * 45_000, "seconds": runs * 45_000 / rate,
            "images_per_s": float(rate), "start_spread_s": 0.01}


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


def test_the_runs_and_stand_ins_are_the_studies_planned_runs():
    """The run section trains the workflow's own planned config of each run, on the bench's data for 2 epochs."""
    for study, label in [*bench_gpu.RUNS.values(), *bench_gpu.STANDIN_RUNS.values()]:
        assert bench_gpu.planned_run(label, [study]).label == label
    study, label = bench_gpu.RUNS["resnet50"]
    planned = bench_gpu.planned_run(label, [study]).run_config
    config = bench_gpu.bench_run_config(planned, bench_gpu.Sizes(), "cuda")
    recipe = config["recipe"]
    assert (recipe["epochs"], recipe["batch_size"], recipe["loss_reduction"], recipe["grad_clip_norm"]) == (2, 128, "sum", 2)
    assert recipe["optimizer"] == planned["recipe"]["optimizer"] and recipe["lr_milestones"] == []
    assert recipe["reliability_epochs"] == recipe["gradient_norm_epochs"] == []  # the first falls at epoch 10
    assert config["loss"] == planned["loss"] == {"name": "focal", "gamma": 3}
    assert (config["compile"], config["device"]) == ("auto", "cuda")
    assert config["dataset"] == {"name": bench_gpu.dataset_name(45_000, 5000, 10_000)}
    with pytest.raises(RuntimeError, match="plan no run cifar10/resnet50/focal9/cifar_350"):
        bench_gpu.planned_run("cifar10/resnet50/focal9/cifar_350", [study])
