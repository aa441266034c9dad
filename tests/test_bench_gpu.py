"""`python -m bench gpu`'s pieces on the CPU: the reference loop's loss, both loops on a tiny
model, the table it writes; the GPU figures themselves need a GPU (bench/README.md)."""

import sys
from pathlib import Path

import pytest
import torch

from focalcal import losses

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's bench/ package
from bench import bench_gpu


def test_the_reference_loss_is_the_summed_focal_loss():
    logits = (torch.randn(64, 10, generator=torch.Generator().manual_seed(0)) * 4).requires_grad_()
    labels = torch.randint(0, 10, (64,), generator=torch.Generator().manual_seed(1))
    ours = losses.build({"name": "focal", "gamma": 3, "reduction": "sum"})(logits, labels)
    theirs = bench_gpu.released_focal_loss(logits, labels, 3.0)
    torch.testing.assert_close(theirs, ours, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.autograd.grad(theirs, logits)[0], torch.autograd.grad(ours, logits)[0],
                               rtol=1e-4, atol=1e-5)


def test_both_loops_run_on_the_cpu(monkeypatch, tmp_path):
    """The code the GPU run takes, on a small model and a few batches (device "cpu")."""
    monkeypatch.setattr(bench_gpu, "STEPS", 2)
    monkeypatch.setattr(bench_gpu, "BATCH", 16)
    reference = bench_gpu.time_reference("resnet8", device="cpu")
    ours = bench_gpu.time_ours("resnet8", "cudagraphs", str(tmp_path), device="cpu")
    assert reference["images"] == ours["images"] == 32
    assert ours["mode"] == "none"  # the graph mode's CPU fallback
    for row in (reference, ours):
        assert row["s_per_epoch_45k"] == pytest.approx(45_000 / row["images_per_s"], rel=1e-2)


def test_packed_runs_train_together_on_the_cpu(monkeypatch, tmp_path):
    """The packing path (worker processes behind a barrier), 2 small runs on the CPU."""
    monkeypatch.setattr(bench_gpu, "STEPS", 2)
    monkeypatch.setattr(bench_gpu, "BATCH", 16)
    bench_gpu.time_ours("resnet8", "none", str(tmp_path), device="cpu")  # the data, made once before the workers
    packed = bench_gpu.time_packing(2, str(tmp_path), model="resnet8", device="cpu")
    assert packed["runs"] == 2 and [row["images"] for row in packed["per_run"]] == [32, 32]
    assert packed["images_per_s"] == pytest.approx(sum(row["images_per_s"] for row in packed["per_run"]), abs=0.2)


def test_a_failing_loop_is_recorded_and_the_others_kept():
    def broken():
        raise RuntimeError("CUDA error: operation not permitted when stream is capturing\nmore")

    assert bench_gpu.attempt(broken) == {"error": "RuntimeError: CUDA error: operation not permitted when stream is capturing"}
    rows = {"reference": bench_gpu.measurement(100, 1.0), "fp32 none": bench_gpu.measurement(100, 0.5),
            "bf16 cudagraphs": bench_gpu.attempt(broken), "bf16 none": bench_gpu.measurement(100, 0.25)}
    results = {"device": "GPU", "torch": "2.x", "date": "today", "commit": "abc", "architectures": {"resnet50": rows}}
    results["ratios"] = bench_gpu.ratios(results)
    assert results["ratios"]["resnet50"]["fastest"] == "bf16 none"
    assert "| resnet50 | bf16 cudagraphs | failed: RuntimeError" in bench_gpu.table(results)


def test_the_table_and_ratios(monkeypatch, tmp_path):
    def row(rate):
        return bench_gpu.measurement(12_800, 12_800 / rate)

    results = {"device": "NVIDIA H200", "torch": "2.x", "date": "today", "commit": "abc",
               "architectures": {"resnet50": {"reference": row(4000), "fp32 none": row(5000),
                                              "bf16 none": row(6000), "bf16 cudagraphs": row(12000)}},
               "packing": [{"runs": 1, "images_per_s": 12000.0}, {"runs": 2, "images_per_s": 18000.0}]}
    results["ratios"] = bench_gpu.ratios(results)
    assert results["ratios"]["resnet50"] == {"fastest": "bf16 cudagraphs", "vs_reference": 3.0, "vs_own_fp32_eager": 2.4}
    assert results["ratios"]["packing_vs_reference_one_run"] == {"1": 3.0, "2": 4.5}
    readme = tmp_path / "README.md"
    readme.write_text(f"# t\n\n{bench_gpu.TABLE_START}\nold\n{bench_gpu.TABLE_END}\n\nafter\n")
    monkeypatch.setattr(bench_gpu, "README", readme)
    bench_gpu.write_table(bench_gpu.table(results))
    text = readme.read_text()
    assert "old" not in text and text.endswith("after\n")
    assert "| resnet50 | bf16 cudagraphs | 3.75 | 12,000 | 3.00× |" in text
    assert "| 2 | 18,000 | 4.50× |" in text


def test_without_cuda_it_says_so_and_writes_nothing(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(bench_gpu, "RESULTS", tmp_path / "gpu_results.json")
    bench_gpu.main()
    assert "no CUDA device here" in capsys.readouterr().out
    assert not (tmp_path / "gpu_results.json").exists()
