"""What pinning the CPU numerics costs: process CPU of short training runs, pinned against native.

``training.numerics: pinned`` (:mod:`focalcal.core.pinned_numerics`) caps ATen, oneDNN, numpy and OpenBLAS
at their AVX2 kernels, runs MKL's vendor-neutral COMPATIBLE path and fixes the thread count, so a
CPU run is bit-identical on every x86-64 machine, AMD or Intel. On an AVX-512 machine that gives
up the wider kernels, and MKL's COMPATIBLE path gives up its AVX2 matrix products everywhere.
Each run below is a default-config-like run
trained by ``focalcal train`` in its own process, once per mode, the modes interleaved and
their order alternated between repetitions so that a busy spell of a shared machine hits
both alike. Measured: the child process's CPU time (user + system), start-up included. The
goal is a ratio pinned / native of at most 1.15.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from focalcal.core.pinned_numerics import pinned_environment

RECIPE = {"batch_size": 64, "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 5e-4},
          "lr_milestones": [], "reliability_epochs": []}
RUNS = {  # the default config's kinds of run, shorter
    "mnist1d_cnn1d_32_focal3": {"dataset": {"name": "mnist1d", "n_samples": 4000}, "model": {"name": "cnn1d", "width": 32},
                                "loss": {"name": "focal", "gamma": 3}, "epochs": 4},
    "digits_cnn_small_focal2_ls": {"dataset": {"name": "digits"}, "model": {"name": "cnn_small", "width": 16},
                                   "loss": {"name": "focal", "gamma": 2, "smoothing": 0.1, "convention": "uniform"},
                                   "epochs": 4},
    "synthetic1d_mlp_ce": {"dataset": {"name": "synthetic1d"}, "model": {"name": "mlp", "hidden": 64},
                           "loss": {"name": "cross_entropy"}, "epochs": 6},
    "synthetic_seg_unet_dual_focal": {"dataset": {"name": "synthetic_segmentation", "size": 32},
                                      "model": {"name": "unet_small", "base_channels": 8, "depth": 2},
                                      "loss": {"name": "dual_focal"}, "epochs": 2},
}
MODES = ("native", "pinned")


def run_config(name: str) -> dict:
    spec = dict(RUNS[name])
    epochs = spec.pop("epochs")
    return {**spec, "recipe": {**RECIPE, "epochs": epochs}, "seed": 0, "device": "cpu"}


def child_cpu(command: list[str]) -> float:
    """CPU seconds (user + system) of one child process run to its end."""
    before = os.times()
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    after = os.times()
    if result.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    return (after.children_user - before.children_user) + (after.children_system - before.children_system)


def main(quick: bool = False) -> None:
    repetitions = 1 if quick else 3
    names = list(RUNS)[:2] if quick else list(RUNS)
    cpu = {(name, mode): [] for name in names for mode in MODES}
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        for name in names:
            (work / f"{name}.json").write_text(json.dumps(run_config(name)))

        def command(name: str, mode: str, tag: str) -> list[str]:
            return [sys.executable, "-m", "focalcal", "train", "--config", str(work / f"{name}.json"),
                    "--run-dir", str(work / "runs" / f"{name}_{mode}_{tag}"), "--data-root", str(work / "data"),
                    "--no-export", "--progress", "lines", "--numerics", mode, "--threads", "1"]

        for name in names:  # data generated and cached once, outside the timings
            child_cpu(command(name, "native", "warmup"))
        for repetition in range(repetitions):
            order = MODES if repetition % 2 == 0 else MODES[::-1]
            for name in names:
                for mode in order:
                    seconds = child_cpu(command(name, mode, str(repetition)))
                    cpu[(name, mode)].append(seconds)
                    print(f"  rep {repetition}: {name:32s} {mode:7s} {seconds:6.2f} s CPU", flush=True)
    print(f"\nprocess CPU (s), sum over {repetitions} repetition(s), interleaved:")
    totals = {mode: 0.0 for mode in MODES}
    for name in names:
        native, pinned = sum(cpu[(name, "native")]), sum(cpu[(name, "pinned")])
        totals["native"] += native
        totals["pinned"] += pinned
        print(f"  {name:32s} native {native:7.2f}  pinned {pinned:7.2f}  ratio {pinned / native:5.3f}")
    ratio = totals["pinned"] / totals["native"]
    print(f"  {'all':32s} native {totals['native']:7.2f}  pinned {totals['pinned']:7.2f}  ratio {ratio:5.3f} "
          f"(goal <= 1.15: {'met' if ratio <= 1.15 else 'NOT met'}); {time.strftime('%Y-%m-%d %H:%M %Z')}")
    matrix_products(quick)


#: What the matrix-product section times in a child process: float32 products of the shapes the
#: default config's models multiply (batch 64 × hidden 64, a 1-D CNN's unfolded convolution) and a
#: larger one, forward only, best of 5 after a warm-up.
_PRODUCTS = """
import json, sys, time, torch
torch.set_num_threads(1)
out = {}
for m, k, n in json.loads(sys.argv[1]):
    a, b = torch.randn(m, k), torch.randn(k, n)
    torch.mm(a, b)
    best = min((lambda t: (torch.mm(a, b), time.perf_counter() - t)[1])(time.perf_counter()) for _ in range(5))
    out[f"{m}x{k}x{n}"] = best
print(json.dumps(out))
"""


def matrix_products(quick: bool) -> None:
    """MKL's COMPATIBLE path against the libraries' own choice on the products alone: where the
    pin costs most, on a model whose time is its matrix products (the short runs above spend
    most of theirs elsewhere)."""
    shapes = [(64, 64, 64), (64, 160, 2560), (512, 512, 512)] + ([] if quick else [(1024, 1024, 1024)])
    repetitions = 1 if quick else 3
    seconds = {mode: [] for mode in MODES}
    for repetition in range(repetitions):
        for mode in MODES if repetition % 2 == 0 else MODES[::-1]:
            environ = dict(os.environ, **(pinned_environment(1) if mode == "pinned" else {}))
            result = subprocess.run([sys.executable, "-c", _PRODUCTS, json.dumps(shapes)], env=environ,
                                    capture_output=True, text=True, check=True)
            seconds[mode].append(json.loads(result.stdout))
    print("\nmatrix products alone (float32, one thread; best of 5, summed over repetitions):")
    for m, k, n in shapes:
        key = f"{m}x{k}x{n}"
        native = sum(run[key] for run in seconds["native"])
        pinned = sum(run[key] for run in seconds["pinned"])
        print(f"  {key:16s} native {native * 1e3:8.3f} ms  pinned {pinned * 1e3:8.3f} ms  ratio {pinned / native:5.2f}")


if __name__ == "__main__":
    main()
