"""Training throughput on one CUDA GPU: our trainer in each compile mode against a loop with the
authors' released training semantics, per architecture of mukhoti2020, and several runs packed
on the one GPU. ``python -m bench gpu``; without CUDA it says so and exits 0.

Everything is measured in this one run on the same GPU, on random CIFAR-10-shaped data
(uint8 32×32×3 images, 10 classes), with mukhoti2020's CIFAR recipe: batch 128, summed focal
loss γ = 3, gradient norm clipped to 2, SGD 0.1 / 0.9 / 5e-4, random crop (padding 4) and flip.

* **reference** — the released code's loop (github.com/torrvision/focal_calibration,
  ``train.py`` / ``train_utils.py``), written here: fp32, the torchvision transform pipeline on
  PIL images in a 4-worker ``DataLoader`` (pinned memory), ``cudnn.benchmark``, ``loss.item()``
  after every batch, the norm clipped to 2.
* **ours** — :class:`focalcal.training.Trainer`'s ``train_one_epoch`` (data on the GPU,
  augmented there), as a run trains: ``fp32 none`` (eager, full precision: each architecture's
  own fp32 eager loop), then bf16 autocast with channels-last in compile modes ``none``,
  ``cudagraphs`` and (ResNet-50 only, its compile takes minutes) ``default``.
* **packing** — 1, 2, 4 and 8 processes each training ResNet-50 in ``cudagraphs`` mode at once on
  the GPU; their images/s summed.

Each measurement trains one warm-up epoch, then times one epoch of :data:`STEPS` batches (the
per-epoch graph capture and the end-of-epoch read-back included) or, for the reference, one
pass of its ``DataLoader`` (worker start-up included). Seconds per epoch are scaled to the
45,000 training images of the papers' CIFAR split; per-epoch overheads are then counted once
per :data:`STEPS` batches instead of once per 352, which overstates both loops' epoch time a
little. The results go to ``bench/gpu_results.json`` and the table in ``bench/README.md``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "gpu_results.json"
README = BENCH_DIR / "README.md"
TABLE_START, TABLE_END = "<!-- bench gpu: start -->", "<!-- bench gpu: end -->"

ARCHITECTURES = ("resnet50", "resnet110_bottleneck", "wide_resnet26_10", "densenet121")
BATCH = 128
STEPS = 100  # batches per timed epoch
PAPER_TRAIN_IMAGES = 45_000  # mukhoti2020's CIFAR training split
PACKING = (1, 2, 4, 8)
DATASET = "bench_gpu_random_cifar"
CIFAR_MEAN, CIFAR_STD = (0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)  # focalcal.data.cifar's
GAMMA, CLIP = 3.0, 2.0


# ---------------------------------------------------------------------------------- data
def random_images(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8), rng.integers(0, 10, size=n)


def register_dataset() -> None:
    from focalcal import data
    from focalcal.data import RawData

    def load(root, download):
        x, y = random_images(BATCH * STEPS + 512)
        return RawData(pools={"all": (x.transpose(0, 3, 1, 2).copy(), y)})

    if DATASET not in data.available():
        data.register(DATASET, load, num_classes=10, val_size=256, test_size=256,
                      augmentation={"random_crop_padding": 4, "horizontal_flip": True}, mean=CIFAR_MEAN,
                      std=CIFAR_STD, summary="random CIFAR-10-shaped images (GPU benchmark only)")


# ----------------------------------------------------------------------------- ours
def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def our_trainer(model: str, compile_mode: str, run_dir: str, data_root: str, full_precision: bool = False,
                device: str = "cuda"):
    from focalcal.training import RunConfig, Trainer
    from focalcal.training import trainer as trainer_module
    from focalcal.training.device import DeviceSetup

    register_dataset()
    config = RunConfig.from_dict({
        "dataset": {"name": DATASET}, "model": {"name": model}, "loss": {"name": "focal", "gamma": GAMMA},
        "device": device, "compile": compile_mode,
        "recipe": {"epochs": 3, "batch_size": BATCH, "loss_reduction": "sum", "grad_clip_norm": CLIP,
                   "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 5e-4}},
    })
    if full_precision and device == "cuda":  # each architecture's own fp32 eager loop: no autocast, no channels-last
        original = trainer_module.choose_device
        trainer_module.choose_device = lambda spec: DeviceSetup(torch.device("cuda"), None, channels_last=False)
        try:
            return Trainer(config, run_dir, data_root=data_root, progress=False)
        finally:
            trainer_module.choose_device = original
    return Trainer(config, run_dir, data_root=data_root, progress=False)


def time_ours(model: str, compile_mode: str, data_root: str, full_precision: bool = False,
              device: str = "cuda") -> dict:
    with tempfile.TemporaryDirectory() as run_dir:
        trainer = our_trainer(model, compile_mode, run_dir, data_root, full_precision, device)
        images = int(trainer.train_y.shape[0])
        trainer.train_one_epoch(1)  # warm-up: cuDNN autotuning, compilation, allocator
        synchronize(device)
        start = time.perf_counter()
        trainer.train_one_epoch(2)  # ends with the epoch's read-back: the GPU's work is done
        seconds = time.perf_counter() - start
        mode = trainer.compile_plan.mode
        del trainer
    if device == "cuda":
        torch.cuda.empty_cache()
    return measurement(images, seconds, mode=mode)


def measurement(images: int, seconds: float, **extra) -> dict:
    per_second = images / seconds
    return {"images": images, "seconds": round(seconds, 4), "images_per_s": round(per_second, 1),
            "s_per_epoch_45k": round(PAPER_TRAIN_IMAGES / per_second, 3), **extra}


# ------------------------------------------------------------------------ reference
class _PilDataset(torch.utils.data.Dataset):
    """HWC uint8 images served as PIL images through a torchvision transform, as torchvision's
    CIFAR10 data set serves them to the released code."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, transform) -> None:
        self.images, self.labels, self.transform = images, labels, transform

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index):
        from PIL import Image

        return self.transform(Image.fromarray(self.images[index])), int(self.labels[index])


def released_focal_loss(logits: torch.Tensor, labels: torch.Tensor, gamma: float) -> torch.Tensor:
    """The released code's training focal loss: log-softmax, p_t = exp(log p_t), summed over the batch."""
    log_pt = F.log_softmax(logits, dim=1).gather(1, labels[:, None]).view(-1)
    return (-(1 - log_pt.exp()) ** gamma * log_pt).sum()


def time_reference(model_name: str, device: str = "cuda") -> dict:
    import torchvision.transforms as T

    from focalcal import models

    torch.backends.cudnn.benchmark = True
    images, labels = random_images(BATCH * STEPS)
    transform = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToTensor(),
                           T.Normalize(CIFAR_MEAN, CIFAR_STD)])
    loader = torch.utils.data.DataLoader(_PilDataset(images, labels, transform), batch_size=BATCH, shuffle=True,
                                         num_workers=4, pin_memory=device == "cuda")
    model = models.build(model_name, num_classes=10).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)

    def epoch(model, optimizer) -> float:
        model.train()
        train_loss = 0.0
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            loss = released_focal_loss(model(data), target, GAMMA)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
            train_loss += loss.item()
            optimizer.step()
        return train_loss

    epoch(model, optimizer)  # warm-up
    synchronize(device)
    start = time.perf_counter()
    epoch(model, optimizer)
    seconds = time.perf_counter() - start
    del model, optimizer
    if device == "cuda":
        torch.cuda.empty_cache()
    return measurement(len(labels), seconds, mode="reference")


# -------------------------------------------------------------------------- packing
def pack_worker(barrier: str, n: int, index: int, data_root: str, model: str = "resnet50",
                device: str = "cuda") -> None:
    """One of ``n`` concurrent runs: warm up, wait until all are warm, time one epoch, print JSON."""
    with tempfile.TemporaryDirectory() as run_dir:
        trainer = our_trainer(model, "cudagraphs", run_dir, data_root, device=device)
        trainer.train_one_epoch(1)
        synchronize(device)
        Path(barrier, f"ready{index}").touch()
        while len(list(Path(barrier).glob("ready*"))) < n:
            time.sleep(0.05)
        start = time.perf_counter()
        trainer.train_one_epoch(2)
        seconds = time.perf_counter() - start
        print(json.dumps(measurement(int(trainer.train_y.shape[0]), seconds)), flush=True)


def time_packing(n: int, data_root: str, model: str = "resnet50", device: str = "cuda") -> dict:
    with tempfile.TemporaryDirectory() as barrier:
        arguments = [barrier, str(n), "0", data_root, model, device, str(STEPS), str(BATCH)]
        workers = [subprocess.Popen([sys.executable, "-m", "bench.bench_gpu", "--pack-worker",
                                     *arguments[:2], str(i), *arguments[3:]], stdout=subprocess.PIPE, text=True,
                                    cwd=BENCH_DIR.parent)
                   for i in range(n)]
        results = []
        for worker in workers:
            out, _ = worker.communicate()
            if worker.returncode != 0:
                raise RuntimeError(f"packing worker of {n} failed (exit {worker.returncode})")
            results.append(json.loads(out.strip().splitlines()[-1]))
    total = sum(r["images_per_s"] for r in results)
    return {"runs": n, "images_per_s": round(total, 1), "per_run": results}


# --------------------------------------------------------------------------- report
def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=BENCH_DIR, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def ratios(results: dict) -> dict:
    out = {}
    for arch, rows in results["architectures"].items():
        ours = {k: v for k, v in rows.items() if k not in ("reference", "fp32 none") and "error" not in v}
        if not ours or "error" in rows["reference"] or "error" in rows["fp32 none"]:
            continue
        reference, fp32 = rows["reference"]["images_per_s"], rows["fp32 none"]["images_per_s"]
        best = max(ours, key=lambda k: ours[k]["images_per_s"])
        out[arch] = {"fastest": best, "vs_reference": round(ours[best]["images_per_s"] / reference, 2),
                     "vs_own_fp32_eager": round(ours[best]["images_per_s"] / fp32, 2)}
    packing = results.get("packing") or []
    reference = results["architectures"].get("resnet50", {}).get("reference")
    if packing and reference and "error" not in reference:
        out["packing_vs_reference_one_run"] = {str(p["runs"]): round(p["images_per_s"] / reference["images_per_s"], 2)
                                               for p in packing}
    return out


def table(results: dict) -> str:
    lines = [(f"Measured by `python -m bench gpu` on {results['device']}, torch {results['torch']}, "
              f"{results['date']}, commit {results['commit']}; {STEPS} batches of {BATCH} per timed epoch, "
              f"seconds per epoch scaled to {PAPER_TRAIN_IMAGES:,} images."), "",
             "| architecture | loop | s / epoch | images/s | × reference |", "|---|---|---|---|---|"]
    for arch, rows in results["architectures"].items():
        reference = rows["reference"].get("images_per_s")
        for name, row in rows.items():
            if "error" in row:
                lines.append(f"| {arch} | {name} | failed: {row['error']} | | |")
                continue
            ratio = f"{row['images_per_s'] / reference:.2f}×" if reference else "–"
            lines.append(f"| {arch} | {name} | {row['s_per_epoch_45k']:.2f} | {row['images_per_s']:,.0f} | {ratio} |")
    if results.get("packing"):
        lines += ["", "| ResNet-50 runs on the GPU (cudagraphs) | images/s, all runs | × reference, one run |",
                  "|---|---|---|"]
        by_runs = results["ratios"].get("packing_vs_reference_one_run", {})
        for row in results["packing"]:
            ratio = f"{by_runs[str(row['runs'])]:.2f}×" if str(row["runs"]) in by_runs else "–"
            lines.append(f"| {row['runs']} | {row['images_per_s']:,.0f} | {ratio} |")
    if results.get("packing_error"):
        lines += ["", f"Packing stopped: {results['packing_error']}"]
    return "\n".join(lines)


def write_table(text: str) -> None:
    readme = README.read_text()
    if TABLE_START not in readme or TABLE_END not in readme:
        raise ValueError(f"{README} has no {TABLE_START} ... {TABLE_END} block for the table")
    head, rest = readme.split(TABLE_START, 1)
    _, tail = rest.split(TABLE_END, 1)
    README.write_text(f"{head}{TABLE_START}\n{text}\n{TABLE_END}{tail}")


def main(quick: bool = False) -> None:
    if not torch.cuda.is_available():
        print("bench gpu: no CUDA device here (torch.cuda.is_available() is False); nothing measured. "
              "Run `python -m bench gpu` on a machine with a GPU.")
        return
    started = time.perf_counter()
    architectures = ARCHITECTURES[:1] if quick else ARCHITECTURES
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
               "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
               "commit": git_commit(), "batch_size": BATCH, "steps_per_epoch": STEPS, "architectures": {}}
    with tempfile.TemporaryDirectory() as data_root:
        for arch in architectures:
            loops = {"reference": (time_reference, arch), "fp32 none": (time_ours, arch, "none", data_root, True),
                     "bf16 none": (time_ours, arch, "none", data_root),
                     "bf16 cudagraphs": (time_ours, arch, "cudagraphs", data_root)}
            if arch == "resnet50" and not quick:
                loops["bf16 default"] = (time_ours, arch, "default", data_root)
            rows = results["architectures"][arch] = {}
            for name, (function, *arguments) in loops.items():
                rows[name] = attempt(function, *arguments)
                row = rows[name]
                figures = (f"{row['s_per_epoch_45k']:7.2f} s/epoch {row['images_per_s']:9,.0f} images/s"
                           if "error" not in row else f"failed: {row['error']}")
                print(f"{arch:22s} {name:16s} {figures} ({time.perf_counter() - started:.0f} s so far)", flush=True)
        write_results(results, started)  # the per-architecture figures are kept if packing fails
        results["packing"] = []
        for n in PACKING[:2] if quick else PACKING:
            try:
                results["packing"].append(time_packing(n, data_root))
            except RuntimeError as error:
                results["packing_error"] = str(error)
                print(f"packing stopped: {error}", flush=True)
                break
            print(f"packing {n}: {results['packing'][-1]['images_per_s']:,.0f} images/s", flush=True)
    write_results(results, started)
    print(json.dumps(results["ratios"], indent=1))
    print(f"wrote {RESULTS} and the table in {README} ({results['total_s']:.0f} s)")


def attempt(function, *arguments) -> dict:
    """One measurement, or its error: one failing loop must not lose the run's other figures."""
    try:
        return function(*arguments)
    except Exception as error:  # noqa: BLE001 - recorded in the results and the table
        torch.cuda.empty_cache()
        return {"error": f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:300]}


def write_results(results: dict, started: float) -> None:
    results["ratios"] = ratios(results)
    results["total_s"] = round(time.perf_counter() - started, 1)
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    write_table(table(results))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--pack-worker", nargs=8,
                        metavar=("BARRIER", "N", "INDEX", "DATA_ROOT", "MODEL", "DEVICE", "STEPS", "BATCH"))
    arguments = parser.parse_args()
    if arguments.pack_worker:
        barrier, n, index, root, model, device, STEPS, BATCH = arguments.pack_worker
        STEPS, BATCH = int(STEPS), int(BATCH)
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        pack_worker(barrier, int(n), int(index), root, model, device)
    else:
        main()
