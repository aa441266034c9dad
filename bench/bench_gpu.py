"""Training throughput on one CUDA GPU, measured so that it cannot flatter. ``python -m bench gpu``
(``--quick``: a smaller set); without CUDA it says so and exits 0 (``--device cpu`` runs the same
code on the CPU, for a smoke test).

Everything is measured in this one run on the same GPU, in these sections, in this order:

1. **study recipes** — one epoch of one distinct recipe per model (``--recipes all``: every one)
   that ``config/studies/*.yaml`` plans, under ``compile: auto`` (:mod:`bench.bench_study_recipes`,
   four processes on the GPU): the run's real step for :data:`RECIPE_BATCHES` full batches of its
   batch size (at most 64) on stand-in inputs, then the epoch's last, partial batch of half that
   size, then the epoch's read-back. PASS or FAIL for each; a capture that fell back to eager is
   a FAIL.
2. **the run** — what ``focalcal train`` does, per epoch: a planned run of each model of
   :data:`RUNS` (ResNet-50's mukhoti2020 ``cifar_350`` run, a charoenphakdee2021 ResNet-20 run),
   its config made by the workflow's planning code, trained by ``Trainer.fit`` under its
   ``compile: auto`` for :data:`RUN_EPOCHS` epochs on random CIFAR-shaped data (45,000 training,
   5,000 validation, 10,000 test images): the data on the device, augmentation, step, evaluation,
   diagnostics, checkpoint. Each epoch's seconds per phase (training, evaluation, diagnostics,
   checkpoint, other) as the trainer timed them (``Trainer.timings``), and their shares.
3. **architectures** — mukhoti2020's CIFAR recipe (batch 128, summed focal loss γ = 3, gradient
   norm clipped to 2, SGD 0.1 / 0.9 / 5e-4, random crop with padding 4 and flip) on random
   CIFAR-10-shaped data, per architecture:

   * ``reference`` — the released code's loop (github.com/torrvision/focal_calibration,
     ``train.py`` / ``train_utils.py``), written here: fp32, the torchvision transform pipeline
     on PIL images in a 4-worker ``DataLoader`` (pinned memory, workers started each epoch),
     ``cudnn.benchmark``, ``loss.item()`` after every batch, the norm clipped to 2; then, for
     the authors' whole epoch, their three validation passes and the best model's save
     (:func:`released_validation`);
   * ours — :class:`focalcal.training.Trainer`'s ``train_one_epoch`` (data on the GPU,
     augmented there) in compile mode ``cudagraphs`` and ``inductor_cudagraphs`` at the
     trainer's precision (:data:`LOOPS`; ``--loops`` adds ``none`` or ``default``), and for
     DenseNet-121 ``fp32 none``: the eager step in full precision, its own fp32 loop.

   Each loop trains a warm-up epoch of :data:`WARMUP_BATCHES` full batches and the partial
   batch (cuDNN's algorithms for both shapes, the capture, the allocator, the DataLoader's
   first start), then one timed **full epoch**: 45,000 images, 351 batches of 128 and the last
   one of 72, every batch timed, the epoch's read-back included (the reference: one pass of
   its ``DataLoader``, worker start-up included). Each measured loop carries its model FLOPs
   per step (``torch.utils.flop_counter``) and its rate as a share of the GPU's dense bf16 peak
   (:data:`BF16_DENSE_PEAK_TFLOPS`). The loops of :data:`DEFERRED` run last, after packing.
4. **packing** — 1, 2 and 4 processes each training one full epoch of a model at once, for each
   model of :data:`PACKING_MODELS`, started together at a shared wall-clock instant after all
   are warm; the throughput is every process's images ÷ (the last end − the first start), from
   the ``time.time()`` stamps the workers write. One pool of processes serves every model.
   Measured without and with CUDA MPS, which this bench starts
   (:mod:`focalcal.pipeline.gpu_sharing`) where ``nvidia-cuda-mps-control`` exists and may run,
   and stops afterwards.

A loop that raises (an OOM included), or whose step fell back to eager (``step.plan.mode``
changed: a failed capture), is FAILED with its one-line reason, in the printout, the JSON and
the table; it never becomes a figure or a ratio. Before starting, the bench prints its
estimate of the time it takes, from the figures of :data:`RESULTS`, and skips a measurement
(SKIPPED, with the reason) that would take it past ``--budget`` seconds. The results record the
commit of the checkout the imported ``focalcal`` package comes from, or none and why
(:func:`package_commit`). They go to ``bench/gpu_results.json`` and the table in
``bench/README.md``, or with ``--out DIR`` to ``DIR/gpu_results.json`` and ``DIR/gpu_table.md``;
``--render JSON`` writes the README's table from a results file.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "gpu_results.json"
README = BENCH_DIR / "README.md"
TABLE_START, TABLE_END = "<!-- bench gpu: start -->", "<!-- bench gpu: end -->"
#: 3: the run section, packing per model, the commit of the package's own checkout (or null and
#: why), model FLOPs per step; 2: full epochs and wall-clock packing of ResNet-50; 1: 100-batch epochs
SCHEMA = 3
READABLE_SCHEMAS = (2, 3)  # --render and check_results read these

ARCHITECTURES = ("resnet50", "resnet110_bottleneck", "wide_resnet26_10", "densenet121")
#: What each architecture is timed in, within the time budget. Every architecture's fastest mode
#: feeds ``focalcal plan`` (where the run section did not time its epoch) and is compared with the
#: reference loop (ResNet-50 carries the 2.5× goal); DenseNet-121 also with its own fp32 eager loop
#: (its goal). ``inductor_cudagraphs`` compiles for about a minute before its epoch, so only
#: ResNet-50's runs in place; the other architectures' run last, after packing (:data:`DEFERRED`),
#: and the budget skips them before anything else.
LOOPS = {"resnet50": ("reference", "cudagraphs", "inductor_cudagraphs"),
         "resnet110_bottleneck": ("reference", "cudagraphs", "inductor_cudagraphs"),
         "wide_resnet26_10": ("reference", "cudagraphs", "inductor_cudagraphs"),
         "densenet121": ("reference", "fp32 none", "cudagraphs", "inductor_cudagraphs")}
QUICK_LOOPS = {"resnet50": ("reference", "cudagraphs")}
DEFERRED = {(arch, "inductor_cudagraphs") for arch in ARCHITECTURES if arch != "resnet50"}
#: the trainer's loops (``default``: torch.compile; ``inductor_cudagraphs``: inductor inside the captured step)
OURS = ("fp32 none", "none", "cudagraphs", "default", "inductor_cudagraphs")
PACKING, QUICK_PACKING = (1, 2, 4), (1, 4)
PACKING_MODEL = "resnet50"  # schema 2's one packed model
#: The models packed, in this order (the budget skips the last first): ResNet-50, then the small
#: models that may not fill a GPU alone: charoenphakdee2021's CIFAR ResNet-20, its MLP, mukhoti2020's
#: text CNN. The CIFAR models train through the trainer on the random CIFAR-shaped data; the MLP
#: and the text CNN, whose data is not CIFAR-shaped, through their planned run's real step on
#: stand-in batches (:data:`STANDIN_RUNS`).
PACKING_MODELS = ("resnet50", "resnet20", "mlp", "global_pooling_cnn")  # --packing-models adds resnet8 etc.
QUICK_PACKING_MODELS = ("resnet50", "resnet20")
STANDIN_RUNS = {"mlp": ("charoenphakdee2021.yaml", "synthetic1d/mlp/focal1/charoenphakdee_synthetic"),
                "global_pooling_cnn": ("mukhoti2020.yaml", "20newsgroups/global_pooling_cnn/focal3/newsgroups_adam_50")}
PACKING_LABELS = {"without_mps": "without MPS", "with_mps": "with MPS"}
#: The run section: a planned run of each model, from the study that plans it, trained through
#: ``Trainer.fit`` under its ``compile`` (``auto``) for :data:`RUN_EPOCHS` epochs on the random
#: CIFAR-shaped data (its recipe otherwise as planned: batch, optimiser, loss, clipping,
#: augmentation; the diagnostic epochs past the second do not come).
RUNS = {"resnet50": ("mukhoti2020.yaml", "cifar10/resnet50/focal3/cifar_350"),
        "resnet20": ("charoenphakdee2021.yaml", "cifar10/resnet20/focal3/charoenphakdee_cifar10")}
QUICK_RUNS = ("resnet50",)
RUN_EPOCHS = 2
RUN_PHASES = ("train", "evaluate", "diagnostics", "checkpoint", "other")  # focalcal.training.trainer.PHASES + other
#: NVIDIA's dense (no sparsity) bf16 tensor-core peaks, TFLOP/s, by a part of the device's name
#: (first match; H100 PCIe before the SXM H100). Another GPU: no fraction, and the reason.
BF16_DENSE_PEAK_TFLOPS = (("H200", 989.0), ("H100 PCIe", 756.0), ("H100", 989.0), ("A100", 312.0))
TRAIN_IMAGES = 45_000  # mukhoti2020's CIFAR training split
BATCH = 128
WARMUP_BATCHES = 10  # full batches of the warm-up epoch, before its partial batch
RECIPE_BATCHES, RECIPE_BATCH_CAP, RECIPE_SHARDS = 5, 64, 4
BUDGET_S, QUICK_BUDGET_S = 510.0, 240.0  # 8.5 and 4 minutes of device time
CIFAR_MEAN, CIFAR_STD = (0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)  # focalcal.data.cifar's
GAMMA, CLIP = 3.0, 2.0
REFERENCE_WORKERS = 4  # the released code's DataLoader workers


@dataclass(frozen=True)
class Sizes:
    """One epoch's shape: ``images`` at ``batch``, and the warm-up epoch's full batches."""

    images: int = TRAIN_IMAGES
    batch: int = BATCH
    warmup_batches: int = WARMUP_BATCHES

    @property
    def full_batches(self) -> int:
        return self.images // self.batch

    @property
    def partial_batch(self) -> int:
        """The epoch's last, smaller batch (0: none); the papers' loaders keep it."""
        return self.images % self.batch

    @property
    def steps(self) -> int:
        return self.full_batches + (self.partial_batch > 0)

    @property
    def warmup_images(self) -> int:
        return min(self.images, self.warmup_batches * self.batch + self.partial_batch)

    @property
    def warmup_steps(self) -> int:
        return -(-self.warmup_images // self.batch)

    @property
    def val_images(self) -> int:
        """The run section's validation images: mukhoti2020's 5,000 beside 45,000 (at least 8)."""
        return max(8, self.images // 9)

    @property
    def test_images(self) -> int:
        """The run section's test images: CIFAR-10's 10,000 beside 45,000 (at least 8)."""
        return max(8, 2 * self.images // 9)


# ---------------------------------------------------------------------------- outcomes

def _publish(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (a sibling renamed into place): the packed
    processes poll for these files and read them as soon as they exist."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    os.replace(partial, path)

def failed(reason: str) -> dict:
    return {"status": "failed", "reason": reason}


def skipped(reason: str) -> dict:
    return {"status": "skipped", "reason": reason}


def ok(row: dict) -> bool:
    return row.get("status") == "ok"


def error_line(error: BaseException) -> str:
    text = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {text}"[:300]


def attempt(function, *arguments, **options) -> dict:
    """One measurement, or FAILED with its reason: one failing loop must not lose the others."""
    try:
        return function(*arguments, **options)
    except Exception as error:  # noqa: BLE001 - recorded in the results and the table
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        return failed(error_line(error))


def measurement(images: int, steps: int, seconds: float, **extra) -> dict:
    """A timed full epoch: its seconds are the epoch's, its per-step figure what ``focalcal plan`` scales."""
    return {"status": "ok", "images": images, "steps": steps, "seconds": round(seconds, 4),
            "s_per_step": round(seconds / steps, 6), "images_per_s": round(images / seconds, 1), **extra}


def kept_mode(planned, ran) -> str:
    """"" when the step ran in the mode it was planned for, else why not (a failed capture
    falls back to eager and says why in ``step.plan``)."""
    if ran.mode == planned.mode:
        return ""
    return f"the step planned {planned.mode!r} ran {ran.mode!r}: {ran.reason or 'no reason given'}"


# -------------------------------------------------------------------------------- data
def random_images(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8), rng.integers(0, 10, size=n)


def held_out(images: int) -> int:
    """Val and test images each (never trained on; small for a small smoke epoch)."""
    return 256 if images >= 4096 else 8


def dataset_name(images: int, val: int | None = None, test: int | None = None) -> str:
    held = "" if val is None and test is None else f"_{val}_{test}"
    return f"bench_gpu_random_cifar_{images}{held}"


def register_dataset(images: int, val: int | None = None, test: int | None = None) -> str:
    """A random CIFAR-10-shaped data set of ``images`` training images, and ``val`` and ``test``
    held-out ones (default: :func:`held_out`'s few, for the architectures' training epochs)."""
    from focalcal import data
    from focalcal.data import RawData

    name = dataset_name(images, val, test)
    val_size, test_size = val or held_out(images), test or held_out(images)

    def load(root, download):
        x, y = random_images(images + val_size + test_size)
        return RawData(pools={"all": (x.transpose(0, 3, 1, 2).copy(), y)})

    if name not in data.available():
        data.register(name, load, num_classes=10, val_size=val_size, test_size=test_size,
                      augmentation={"random_crop_padding": 4, "horizontal_flip": True}, mean=CIFAR_MEAN,
                      std=CIFAR_STD, summary="random CIFAR-10-shaped images (GPU benchmark only)")
    return name


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def release(device: str) -> None:
    """Free a finished loop's GPU memory (the trainer's closures form reference cycles), so the
    next loop, or the packed processes, start from an empty GPU."""
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


# -------------------------------------------------------------------------------- ours
def our_trainer(model: str, loop: str, run_dir: str, data_root: str, sizes: Sizes, device: str = "cuda"):
    """The trainer of ``loop`` (``fp32 none``: eager in full precision; else the compile mode)."""
    from focalcal.training import RunConfig, Trainer
    from focalcal.training import trainer as trainer_module
    from focalcal.training.device import DeviceSetup

    config = RunConfig.from_dict({
        "dataset": {"name": register_dataset(sizes.images)}, "model": {"name": model},
        "loss": {"name": "focal", "gamma": GAMMA}, "device": device, "compile": loop.split()[-1],
        "recipe": {"epochs": 1000, "batch_size": sizes.batch, "loss_reduction": "sum", "grad_clip_norm": CLIP,
                   "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 5e-4}},
    })
    if loop.startswith("fp32") and device == "cuda":  # no autocast, no channels-last
        original = trainer_module.choose_device
        trainer_module.choose_device = lambda spec: DeviceSetup(torch.device("cuda"), None, channels_last=False)
        try:
            trainer = Trainer(config, run_dir, data_root=data_root, progress=False)
        finally:
            trainer_module.choose_device = original
        if trainer.step.autocast_dtype is not None:
            raise RuntimeError(f"the trainer's step autocasts to {trainer.step.autocast_dtype}: no fp32 loop")
        return trainer
    return Trainer(config, run_dir, data_root=data_root, progress=False)


def precision(trainer) -> str:
    dtype = trainer.step.autocast_dtype
    name = "fp32" if dtype is None else str(dtype).removeprefix("torch.").replace("bfloat16", "bf16")
    return name + (" channels-last" if trainer.setup.channels_last else "")


def warm_up(trainer, sizes: Sizes) -> None:
    """A short first epoch: ``warmup_batches`` full batches and the partial one."""
    full_x, full_y = trainer.train_x, trainer.train_y
    trainer.train_x, trainer.train_y = full_x[: sizes.warmup_images], full_y[: sizes.warmup_images]
    try:
        trainer.train_one_epoch(1)
    finally:
        trainer.train_x, trainer.train_y = full_x, full_y


def time_ours(model: str, loop: str, data_root: str, sizes: Sizes, device: str = "cuda") -> dict:
    with tempfile.TemporaryDirectory() as run_dir:
        trainer = our_trainer(model, loop, run_dir, data_root, sizes, device)
        if int(trainer.train_y.shape[0]) != sizes.images:
            raise RuntimeError(f"the trainer holds {int(trainer.train_y.shape[0])} training images, not {sizes.images}")
        planned = trainer.step.plan
        warm_up(trainer, sizes)
        synchronize(device)
        start = time.perf_counter()
        trainer.train_one_epoch(2)  # ends with the epoch's read-back: the GPU's work is done
        seconds = time.perf_counter() - start
        changed = kept_mode(planned, trainer.step.plan)
        row = (failed(changed) if changed else
               measurement(sizes.images, sizes.steps, seconds, mode=trainer.step.plan.mode,
                           precision=precision(trainer)))
        del trainer
    release(device)
    return row


# ---------------------------------------------------------------------------- the run
def planned_run(label: str, studies=None):
    """The planned run ``label`` (``dataset/model/loss/recipe``) of the shipped studies, as the
    workflow plans it (:func:`focalcal.pipeline.plan.planned_runs`, seed 0)."""
    from focalcal.pipeline.plan import planned_runs

    folder = BENCH_DIR.parent / "config" / "studies"
    files = [folder / name for name in studies] if studies else sorted(folder.glob("*.yaml"))
    for run in planned_runs(files):
        if run.label == label:
            return run
    raise RuntimeError(f"{', '.join(f.name for f in files)} plan no run {label}")


def bench_run_config(run_config: dict, sizes: Sizes, device: str) -> dict:
    """A planned run's config on the bench's random CIFAR-shaped data: :data:`RUN_EPOCHS` epochs,
    its batch at most ``sizes.batch`` (the recipe's 128 at full size), the diagnostic epochs that
    fall within them, the device; the rest (optimiser, loss, reduction, clipping, augmentation,
    ``compile``) as planned."""
    config = json.loads(json.dumps(run_config))
    config["dataset"] = {"name": register_dataset(sizes.images, sizes.val_images, sizes.test_images)}
    recipe = config["recipe"]
    recipe["epochs"] = RUN_EPOCHS
    recipe["batch_size"] = min(int(recipe.get("batch_size", sizes.batch)), sizes.batch)
    for key in ("reliability_epochs", "gradient_norm_epochs"):
        if key in recipe:
            recipe[key] = [epoch for epoch in recipe[key] if epoch <= RUN_EPOCHS]
    recipe["lr_milestones"] = [m for m in recipe.get("lr_milestones", []) if m <= RUN_EPOCHS]
    config["device"] = device
    return config


def epoch_phases(timing: dict) -> dict:
    """One epoch of the trainer's :attr:`~focalcal.training.Trainer.timings`: seconds per phase and their shares."""
    total = timing["total"]
    row = {"epoch": timing["epoch"], "seconds": round(total, 4),
           **{phase: round(timing[phase], 4) for phase in RUN_PHASES}}
    row["shares"] = {phase: round(timing[phase] / total, 4) if total > 0 else None for phase in RUN_PHASES}
    if "checkpoint_write" in timing:  # the background write's own time, overlapping the next epoch
        row["checkpoint_write_s"] = round(timing["checkpoint_write"], 4)
    return row


def time_run(arch: str, sizes: Sizes, data_root: str, device: str = "cuda") -> dict:
    """The planned run of ``arch`` (:data:`RUNS`) trained by ``Trainer.fit`` for :data:`RUN_EPOCHS`
    epochs from a fresh run directory: its loader on the device, augmentation, step, evaluation
    of val and test, diagnostics, checkpoint; each epoch's phases as the trainer timed them."""
    from focalcal.training import RunConfig, Trainer

    study, label = RUNS[arch]
    config = RunConfig.from_dict(bench_run_config(planned_run(label, [study]).run_config, sizes, device))
    with tempfile.TemporaryDirectory() as run_dir:
        started = time.perf_counter()
        trainer = Trainer(config, run_dir, data_root=data_root, progress=False)
        setup_s = time.perf_counter() - started
        planned = trainer.step.plan
        trainer.fit()
        changed = kept_mode(planned, trainer.step.plan)
        epochs = [epoch_phases(t) for t in trainer.timings]
        last = epochs[-1]
        from focalcal.training.trainer import steps_per_epoch

        steps = steps_per_epoch(sizes.images, config.recipe)
        row = failed(changed) if changed else {
            "status": "ok", "run": label, "study": study, "images": sizes.images, "val_images": sizes.val_images,
            "test_images": sizes.test_images, "batch": config.recipe.batch_size, "steps": steps,
            "compile": config.compile, "mode": trainer.step.plan.mode, "precision": precision(trainer),
            "setup_s": round(setup_s, 3), "epochs": epochs, "seconds": last["seconds"],
            "images_per_s": round(sizes.images / last["seconds"], 1),
            "outside_train_share": round(1 - last["train"] / last["seconds"], 4)}
        del trainer
    release(device)
    return row


def model_flops(model: str, batch: int) -> float:
    """The FLOPs of one training step's forward and backward of ``model`` on a batch of CIFAR-shaped
    images (``torch.utils.flop_counter``: matrix products and convolutions, 2 per multiply-add),
    counted on the meta device (shapes only, nothing computed)."""
    from torch.utils.flop_counter import FlopCounterMode

    from focalcal import models

    net = models.build(model, num_classes=10).to("meta")
    inputs = torch.empty(batch, 3, 32, 32, device="meta")
    with FlopCounterMode(display=False) as counter:
        net(inputs).float().sum().backward()
    return float(counter.get_total_flops())


def bf16_peak(device_name: str) -> tuple[float | None, str]:
    """The GPU's dense bf16 peak in TFLOP/s (:data:`BF16_DENSE_PEAK_TFLOPS`), or None and why."""
    for part, tflops in BF16_DENSE_PEAK_TFLOPS:
        if part.lower() in device_name.lower():
            return tflops, ""
    known = ", ".join(part for part, _ in BF16_DENSE_PEAK_TFLOPS)
    return None, f"no dense bf16 peak known for {device_name} (known: {known})"


def with_flops(row: dict, flops_per_step: float, batch: int, device_name: str) -> dict:
    """A measured loop with its model FLOPs per step, the rate its epoch achieved, and that rate
    as a fraction of the GPU's dense bf16 peak (or the reason there is none)."""
    if not ok(row):
        return row
    rate = flops_per_step / batch * row["images"] / row["seconds"] / 1e12  # the partial batch at its size
    out = {**row, "model_tflop_per_step": round(flops_per_step / 1e12, 4), "model_tflop_per_s": round(rate, 3)}
    peak, reason = bf16_peak(device_name)
    if peak:
        out["bf16_peak_fraction"] = round(rate / peak, 4)
    else:
        out["bf16_peak_reason"] = reason
    return out


# --------------------------------------------------------------------------- reference
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


def released_validation(model, loader, device: str) -> None:
    """The released code's three passes over the validation loader after each training epoch
    (``train.py``: ``test_single_epoch`` for the val loss, again for the "test" loss, which it
    also computes on ``val_loader``, then ``Metrics/metrics.py``'s ``test_classification_net``
    for the accuracy): eval mode, no gradients, ``loss.item()`` per batch in the first two, the
    softmax's confidences, predictions and labels read back per batch (``.cpu().numpy().tolist()``)
    in the third, then its accuracy and confusion matrix (sklearn's, as theirs; numpy's where
    sklearn is absent)."""
    model.eval()
    with torch.no_grad():
        for _ in range(2):  # test_single_epoch on val_loader, twice
            loss = 0.0
            for data, labels in loader:
                data, labels = data.to(device), labels.to(device)
                loss += released_focal_loss(model(data), labels, GAMMA).item()
        truth, predicted, confidences = [], [], []
        for data, labels in loader:  # test_classification_net
            data, labels = data.to(device), labels.to(device)
            confidence, prediction = torch.max(F.softmax(model(data), dim=1), dim=1)
            truth.extend(labels.cpu().numpy().tolist())
            predicted.extend(prediction.cpu().numpy().tolist())
            confidences.extend(confidence.cpu().numpy().tolist())
    try:
        from sklearn.metrics import accuracy_score, confusion_matrix

        accuracy_score(truth, predicted), confusion_matrix(truth, predicted)
    except ImportError:
        (np.asarray(truth) == np.asarray(predicted)).mean()
        np.bincount(10 * np.asarray(truth) + np.asarray(predicted), minlength=100)
    model.train()


def time_reference(model_name: str, sizes: Sizes, device: str = "cuda", validation: int = 0) -> dict:
    """The reference loop's training epoch (``seconds``: what the ratios compare), and with
    ``validation`` images its whole epoch as the authors run it: their three validation passes
    (:func:`released_validation`, a 4-worker loader of batch 128 over ``ToTensor`` and
    ``Normalize``, as ``Data/cifar10.py``'s ``valid_loader``) and the ``torch.save`` of the
    state dict that ``train.py`` writes on each epoch whose validation accuracy improved (early
    in training, most epochs)."""
    import torchvision.transforms as T

    from focalcal import models

    torch.backends.cudnn.benchmark = True
    images, labels = random_images(sizes.images)
    transform = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToTensor(),
                           T.Normalize(CIFAR_MEAN, CIFAR_STD)])

    def loader(n: int):
        return torch.utils.data.DataLoader(_PilDataset(images[:n], labels[:n], transform), batch_size=sizes.batch,
                                           shuffle=True, num_workers=REFERENCE_WORKERS, pin_memory=device == "cuda")

    model = models.build(model_name, num_classes=10).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)

    def epoch(batches, model, optimizer) -> int:
        model.train()
        train_loss, steps = 0.0, 0
        for data, target in batches:
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            loss = released_focal_loss(model(data), target, GAMMA)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
            train_loss += loss.item()
            optimizer.step()
            steps += 1
        return steps

    epoch(loader(sizes.warmup_images), model, optimizer)
    synchronize(device)
    full = loader(sizes.images)
    start = time.perf_counter()
    steps = epoch(full, model, optimizer)
    seconds = time.perf_counter() - start
    whole = {}
    if validation:
        val_x, val_y = random_images(validation, seed=1)
        val_transform = T.Compose([T.ToTensor(), T.Normalize(CIFAR_MEAN, CIFAR_STD)])
        val_loader = torch.utils.data.DataLoader(_PilDataset(val_x, val_y, val_transform), batch_size=BATCH,
                                                 num_workers=REFERENCE_WORKERS, pin_memory=device == "cuda")
        started = time.perf_counter()
        released_validation(model, val_loader, device)
        validation_s = time.perf_counter() - started
        with tempfile.TemporaryDirectory() as folder:
            started = time.perf_counter()
            torch.save(model.state_dict(), Path(folder) / "best.model")
            save_s = time.perf_counter() - started
        whole = {"val_images": validation, "validation_s": round(validation_s, 4), "save_s": round(save_s, 4),
                 "whole_epoch_s": round(seconds + validation_s + save_s, 4)}
    del model, optimizer, full
    release(device)
    if steps != sizes.steps:
        raise RuntimeError(f"the reference epoch took {steps} steps, not {sizes.steps}")
    return measurement(sizes.images, steps, seconds, mode="reference", precision="fp32", **whole)


# ----------------------------------------------------------------------------- packing
def packing_throughput(workers: list[dict]) -> dict:
    """All the workers' images ÷ (the last end − the first start), from their ``time.time()`` stamps."""
    if not workers:
        raise ValueError("no packed worker reported")
    first, last = min(w["start"] for w in workers), max(w["end"] for w in workers)
    if last <= first:
        raise ValueError(f"the packed workers' stamps end ({last}) no later than they start ({first})")
    images = sum(w["images"] for w in workers)
    return {"images": images, "seconds": round(last - first, 4), "images_per_s": round(images / (last - first), 1),
            "start_spread_s": round(max(w["start"] for w in workers) - first, 4)}


class StandInRun:
    """A planned run's real step (:func:`focalcal.training.graph_safety.build_step`: its model,
    loss, optimiser and mode as ``compile: auto`` builds them on the device) on one stand-in batch
    of its input shape, for the packed models whose data is not CIFAR-shaped (:data:`STANDIN_RUNS`):
    an epoch is ``sizes``' full batches and its partial one, then the epoch's read-back, as the
    trainer's; no loader or augmentation (its data sets have none on the GPU)."""

    def __init__(self, model: str, sizes: Sizes, device: str) -> None:
        from focalcal.training.config import RunConfig
        from focalcal.training.graph_safety import build_step

        study, label = STANDIN_RUNS[model]
        run = planned_run(label, [study])
        self.step, self.inputs, self.targets = build_step(RunConfig.from_dict(run.run_config),
                                                          device=torch.device(device), batch=sizes.batch)
        self.sizes = sizes

    def train_one_epoch(self, epoch: int, full_batches: int | None = None) -> None:
        partial = self.sizes.partial_batch
        self.step.model.train()
        self.step.begin_epoch()
        for _ in range(self.sizes.full_batches if full_batches is None else full_batches):
            self.step.step(self.inputs, self.targets)
        if partial:
            self.step.step(self.inputs[:partial], self.targets[:partial])
        self.step.end_epoch().read()

    def warm_up(self) -> None:
        self.train_one_epoch(1, full_batches=min(self.sizes.warmup_batches, self.sizes.full_batches))


def packed_run(model: str, run_dir: str, data_root: str, sizes: Sizes, device: str):
    """What one packed process trains: the trainer on the CIFAR-shaped data, or a :class:`StandInRun`."""
    if model in STANDIN_RUNS:
        return StandInRun(model, sizes, device)
    return our_trainer(model, "cudagraphs", run_dir, data_root, sizes, device)


def warm(run, sizes: Sizes) -> None:
    run.warm_up() if isinstance(run, StandInRun) else warm_up(run, sizes)


def pack_worker(control: Path, index: int, data_root: str, device: str, sizes: Sizes) -> None:
    """One packed process: start (torch and the device ready), say so, then for each round that
    includes it: build and warm up the round's model if it is not the one it holds (say ready),
    train one full epoch from the round's shared start instant, write its stamps."""
    if device == "cuda":
        torch.zeros(1, device=device)  # the CUDA context, before it says it is up
    _publish(control / f"up{index}", str(os.getpid()))
    trainer, model, epoch, planned = None, None, 2, None
    with tempfile.TemporaryDirectory() as run_dir:
        for round_index in range(10_000):
            go = control / f"go{round_index}"
            while not go.exists():
                if (control / "quit").exists():
                    return
                time.sleep(0.005)
            order = json.loads(go.read_text())
            if index >= order["runs"]:
                continue
            try:
                if order["model"] != model:
                    trainer = model = None
                    release(device)
                    trainer = packed_run(order["model"], str(Path(run_dir) / order["model"]), data_root, sizes, device)
                    model, planned, epoch = order["model"], trainer.step.plan, 2
                    warm(trainer, sizes)
                    synchronize(device)
            except Exception as error:  # noqa: BLE001  the round fails with its reason; the pool goes on
                trainer = model = None
                _publish(control / f"ready{round_index}_{index}", json.dumps(failed(error_line(error))))
                continue
            _publish(control / f"ready{round_index}_{index}", json.dumps({"status": "ok"}))
            start_file = control / f"start{round_index}"
            while not start_file.exists():
                if (control / "quit").exists():
                    return
                time.sleep(0.005)
            time.sleep(max(0.0, json.loads(start_file.read_text())["at"] - time.time()))
            start = time.time()
            trainer.train_one_epoch(epoch)
            end = time.time()
            epoch += 1
            changed = kept_mode(planned, trainer.step.plan)
            result = failed(changed) if changed else {"status": "ok", "start": start, "end": end, "images": sizes.images}
            _publish(control / f"result{round_index}_{index}.json", json.dumps({"worker": index, **result}))


class PackingPool:
    """``size`` worker processes, started once; :meth:`run` times ``runs`` of them training one model
    together (each builds and warms the model first, when it is not the one it holds)."""

    def __init__(self, size: int, data_root: str, device: str, sizes: Sizes) -> None:
        self.control = Path(tempfile.mkdtemp(prefix="bench_gpu_pack_"))
        self.sizes, self.rounds = sizes, 0
        arguments = [str(self.control), data_root, device, str(sizes.images), str(sizes.batch),
                     str(sizes.warmup_batches)]
        environ = {**os.environ, "OMP_NUM_THREADS": "1",
                   "PYTHONPATH": os.pathsep.join(filter(None, [str(BENCH_DIR.parent), os.environ.get("PYTHONPATH")]))}
        self.workers = []
        for i in range(size):
            with open(self.control / f"stderr{i}", "w") as log:  # the child keeps its own handle
                self.workers.append(subprocess.Popen(
                    [sys.executable, "-m", "bench.bench_gpu", "--pack-worker", str(i), *arguments],
                    stdout=subprocess.DEVNULL, stderr=log, cwd=BENCH_DIR.parent, env=environ))

    def _dead(self, indices) -> str:
        for i in indices:
            code = self.workers[i].poll()
            if code is not None and not (self.control / "quit").exists():
                lines = (self.control / f"stderr{i}").read_text().strip().splitlines()
                return f"worker {i} exited {code}: {lines[-1][:300] if lines else 'no message'}"
        return ""

    def _wait_for(self, paths: list[Path], indices, timeout: float, what: str) -> str:
        deadline = time.time() + timeout
        while not all(path.exists() for path in paths):
            dead = self._dead(indices)
            if dead:
                return dead
            if time.time() > deadline:
                return f"{what} within {timeout:.0f} s"
            time.sleep(0.02)
        return ""

    def wait_ready(self, timeout: float) -> str:
        """"" when every worker has started, else why not."""
        count = len(self.workers)
        return self._wait_for([self.control / f"up{i}" for i in range(count)], range(count), timeout,
                              "the workers did not start")

    def run(self, runs: int, model: str, timeout: float) -> dict:
        """``runs`` workers (built and warm) train one full epoch of ``model`` each from one shared start instant."""
        round_index, self.rounds = self.rounds, self.rounds + 1
        _publish(self.control / f"go{round_index}", json.dumps({"runs": runs, "model": model}))
        ready = [self.control / f"ready{round_index}_{i}" for i in range(runs)]
        late = self._wait_for(ready, range(runs), timeout, f"not all {runs} runs were warm")
        _publish(self.control / f"start{round_index}", json.dumps({"at": time.time() + 0.25}))  # none waits forever
        if late:
            return {"runs": runs, **failed(late)}
        states = [json.loads(path.read_text()) for path in ready]
        bad = next((i for i, state in enumerate(states) if not ok(state)), None)
        if bad is not None:
            return {"runs": runs, **failed(f"worker {bad}: {states[bad]['reason']}")}
        paths = [self.control / f"result{round_index}_{i}.json" for i in range(runs)]
        late = self._wait_for(paths, range(runs), timeout, f"not all {runs} runs finished")
        if late:
            return {"runs": runs, **failed(late)}
        workers = [json.loads(path.read_text()) for path in paths]
        bad = [w for w in workers if not ok(w)]
        if bad:
            return {"runs": runs, **failed(f"worker {bad[0]['worker']}: {bad[0]['reason']}")}
        return {"runs": runs, "status": "ok", **packing_throughput(workers),
                "workers": [{k: w[k] for k in ("start", "end", "images")} for w in workers]}

    def close(self) -> None:
        (self.control / "quit").write_text("")
        for worker in self.workers:
            try:
                worker.wait(timeout=60)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()


def time_packing(counts, data_root: str, sizes: Sizes, models=(PACKING_MODEL,), device: str = "cuda",
                 round_timeout: float = 300.0, over_budget=lambda model, runs: "") -> dict:
    """One pool of ``max(counts)`` workers for every model; per model a round per count of runs.
    ``over_budget(model, runs)``: why that round would not fit the budget ("" when it does);
    ``over_budget(None, 0)``: why the pool itself would not (then nothing starts)."""
    out = {model: {"rows": []} for model in models}
    late = over_budget(None, 0)
    if late:
        for model in models:
            out[model]["rows"] = [{"runs": runs, **skipped(late)} for runs in counts]
            for row in out[model]["rows"]:
                report_packing(model, row)
        return out
    pool = PackingPool(max(counts), data_root, device, sizes)
    try:
        broken = pool.wait_ready(timeout=round_timeout)
        for model in models:
            failure = ""  # a failed round fails the model's larger counts with it
            for runs in counts:
                if broken or failure:
                    row = {"runs": runs, **failed(broken or failure)}
                elif over_budget(model, runs):
                    row = {"runs": runs, **skipped(over_budget(model, runs))}
                else:
                    row = pool.run(runs, model, round_timeout)
                    if not ok(row):
                        failure = row["reason"]
                        broken = pool._dead(range(len(pool.workers)))  # a dead worker breaks the pool
                out[model]["rows"].append(row)
                report_packing(model, row)
        return out
    finally:
        pool.close()


def report_packing(model: str, row: dict) -> None:
    what = (f"{row['images_per_s']:10,.0f} images/s ({row['images']:,} images in {row['seconds']:.2f} s, starts "
            f"{row['start_spread_s'] * 1000:.0f} ms apart)" if ok(row) else f"{row['status'].upper()}: {row['reason']}")
    print(f"  {model} packed {row['runs']}: {what}", flush=True)


def packing_section(counts, data_root: str, sizes: Sizes, models, device: str, over_budget) -> dict:
    """Every model packed without MPS, then, MPS started where it can start (and stopped
    afterwards), with it: per model ``{"without_mps": ..., "with_mps": ...}``."""
    from focalcal.pipeline import gpu_sharing

    models = list(models)
    print("packing without MPS", flush=True)
    without = time_packing(counts, data_root, sizes, models, device, over_budget=over_budget)
    out = {model: {"without_mps": without[model]} for model in models}
    messages: list[str] = []
    daemon = gpu_sharing.start_mps(log=messages.append)
    if daemon is None:
        reason = messages[-1].removeprefix("CUDA MPS not started: ") if messages else "no reason given"
        for model in models:
            out[model]["with_mps"] = {"status": "unavailable", "reason": f"MPS not available: {reason}"}
        print(f"MPS not available: {reason}", flush=True)
        return out
    print(f"packing with MPS ({messages[-1]})", flush=True)
    try:
        with_mps = time_packing(counts, data_root, sizes, models, device, over_budget=over_budget)
    finally:
        daemon.stop(log=messages.append)
    for model in models:
        out[model]["with_mps"] = {**with_mps[model], "mps": messages}
    return out


# ----------------------------------------------------------------------- study recipes
def recipes_section(device: str, which: str, match: str = "", timeout: float = 300.0) -> dict:
    """Every study recipe's short epoch (:mod:`bench.bench_study_recipes`) in :data:`RECIPE_SHARDS`
    processes; ``which``: ``all`` or ``one-per-model``."""
    started = time.perf_counter()
    folder = Path(tempfile.mkdtemp(prefix="bench_gpu_recipes_"))
    environ = {**os.environ,
               "PYTHONPATH": os.pathsep.join(filter(None, [str(BENCH_DIR.parent), os.environ.get("PYTHONPATH")]))}
    shards = []
    for k in range(RECIPE_SHARDS):
        with open(folder / f"{k}.txt", "w") as log:  # the child keeps its own handle
            shards.append(subprocess.Popen(
                [sys.executable, "-m", "bench.bench_study_recipes", "--device", device, "--batches", str(RECIPE_BATCHES),
                 "--batch", str(RECIPE_BATCH_CAP), "--shard", f"{k}/{RECIPE_SHARDS}", "--out", str(folder / f"{k}.json"),
                 "--match", match, *(["--one-per-model"] if which == "one-per-model" else [])],
                stdout=log, stderr=subprocess.STDOUT, cwd=BENCH_DIR.parent, env=environ))
    deadline, problems, runs = time.time() + timeout, [], []
    for k, shard in enumerate(shards):
        try:
            shard.wait(timeout=max(1.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            shard.kill()
            shard.wait()
            problems.append(f"shard {k} did not finish within {timeout:.0f} s")
        text = (folder / f"{k}.txt").read_text()
        print("".join(line + "\n" for line in text.splitlines() if line.startswith(("PASS", "FAIL"))), end="",
              flush=True)
        if (folder / f"{k}.json").exists():
            runs += json.loads((folder / f"{k}.json").read_text())["runs"]
        elif not problems or not problems[-1].startswith(f"shard {k} "):
            lines = text.strip().splitlines()
            problems.append(f"shard {k} exited {shard.returncode}: {lines[-1][:300] if lines else 'no output'}")
    failures = [{"run": r["run"], "reason": r.get("error") or r.get("reason") or "non-finite loss"}
                for r in runs if not r["passed"]]
    passed = len(runs) - len(failures)
    row = {"status": "ok" if runs and not failures and not problems else "failed", "runs": len(runs),
           "passed": passed, "failures": failures, "which": which, "batches": RECIPE_BATCHES,
           "batch_cap": RECIPE_BATCH_CAP, "seconds": round(time.perf_counter() - started, 1)}
    if problems or not runs:
        row["reason"] = "; ".join(problems) or "no run was planned"
    print(f"study recipes: {passed} of {len(runs)} passed" + (f"; FAILED: {row['reason']}" if "reason" in row else ""),
          flush=True)
    return row


# ---------------------------------------------------------------------------- estimate
#: Assumed, not measured: a trainer's or reference loop's set-up (model, data on the device,
#: DataLoader), a packing pool's start (processes importing torch, building and warming up), and
#: a study-recipe shard's start and each run's build on the CPU (outside its timed steps).
SETUP_S, POOL_START_S, SHARD_START_S, RECIPE_BUILD_S = 6.0, 25.0, 15.0, 0.5
MODEL_WARM_S = 5.0  # a packed worker's build and warm-up of a model (the pool started)
#: Assumed too, until a results file holds the figure: inductor's compile of a model's forward and
#: backward before the capture; the reference's three validation passes and its save; a run's
#: epoch beyond its steps (evaluation of 15,000 images, the checkpoint, the rest), as a factor on
#: its steps; the captured step of the small models no figure exists for (launch-bound steps).
INDUCTOR_COMPILE_S, REFERENCE_VALIDATION_S, RUN_OVERHEAD = 60.0, 5.0, 1.3
ASSUMED_S_PER_STEP = {"resnet20": 0.004, "resnet8": 0.003, "mlp": 0.001, "global_pooling_cnn": 0.002}
COMPILING_LOOPS = ("default", "inductor_cudagraphs")
RECIPE_LINES = BENCH_DIR / "gpu" / "study_recipes_h200.txt"  # every recipe's measured seconds on an H200
UNKNOWN_S_PER_STEP = 0.08  # a loop no figure exists for: about the slowest measured


def recipes_seconds(which: str, lines: Path = RECIPE_LINES) -> float:
    """The study-recipe section's time, from each recipe's seconds in ``lines`` (a
    ``bench_study_recipes`` printout): ``all`` every run, ``one-per-model`` the slowest run of
    each model (its first, which pays cuDNN's tuning), shared by :data:`RECIPE_SHARDS` processes."""
    if which == "none":
        return 0.0
    seconds: dict[str, float] = {}
    for line in Path(lines).read_text().splitlines():
        parts = line.split()
        if parts[:1] in (["PASS"], ["FAIL"]) and "s" in parts:
            seconds[parts[1]] = float(parts[parts.index("s") - 1])
    if which == "one-per-model":
        slowest: dict[str, float] = {}
        for label, value in seconds.items():
            model = label.split("/")[1]
            slowest[model] = max(slowest.get(model, 0.0), value)
        seconds = slowest
    return SHARD_START_S + (sum(seconds.values()) + RECIPE_BUILD_S * len(seconds)) / RECIPE_SHARDS


def packing_by_model(results: dict) -> dict[str, dict]:
    """Packed runs per model, each ``{"without_mps": ..., "with_mps": ...}``: schema 3's own, schema
    2's one model (``packing_model``); older results (a list) have none by this shape."""
    packing = results.get("packing") or {}
    if isinstance(packing, list):
        return {}
    if results.get("schema", 1) >= 3:
        return packing
    return {results.get("packing_model", PACKING_MODEL): packing} if packing else {}


def step_seconds(results: dict | None) -> tuple[dict, dict, str]:
    """Per-step seconds of each (architecture, loop), packed images/s per model and count of runs
    (without MPS), and what they come from, in any results schema (schema 1: 100-batch epochs,
    loops named ``bf16 none``/``bf16 cudagraphs``, packing summed from the workers' own rates)."""
    if not results:
        return {}, {}, "no earlier figures (assumed values)"
    per_step, packed = {}, {}
    legacy = results.get("schema", 1) == 1
    for arch, rows in results.get("architectures", {}).items():
        for name, row in rows.items():
            loop = name.removeprefix("bf16 ") if legacy else name
            if legacy and "error" not in row:
                per_step[arch, loop] = row["seconds"] / results["steps_per_epoch"]
            elif not legacy and ok(row):
                per_step[arch, loop] = row["s_per_step"]
    if legacy:
        packed = {PACKING_MODEL: {row["runs"]: row["images_per_s"] for row in results.get("packing") or []}}
    else:
        packed = {model: {row["runs"]: row["images_per_s"] for row in sections.get("without_mps", {}).get("rows", [])
                          if ok(row)} for model, sections in packing_by_model(results).items()}
    kind = "100-batch epochs" if legacy else "full epochs"
    return per_step, packed, f"{results.get('device', 'an unnamed GPU')}'s {kind} of {results.get('date', '?')}"


def estimate(loops: dict, counts, recipes: str, sizes: Sizes, results: dict | None, runs=(),
             packing_models=(PACKING_MODEL,)) -> dict:
    """Seconds each section should take, from the figures of ``results`` (assumed where it has none)."""
    per_step, packed, source = step_seconds(results)

    def step_of(model: str) -> float:
        return per_step.get((model, "cudagraphs")) or ASSUMED_S_PER_STEP.get(model, UNKNOWN_S_PER_STEP)

    rows = {}
    for arch, names in loops.items():
        for loop in names:
            known = per_step.get((arch, loop)) or (per_step.get((arch, "cudagraphs")) if loop in COMPILING_LOOPS
                                                   else None)
            seconds = SETUP_S + (sizes.warmup_steps + sizes.steps) * (known or UNKNOWN_S_PER_STEP)
            seconds += REFERENCE_VALIDATION_S if loop == "reference" else 0.0
            seconds += INDUCTOR_COMPILE_S if loop in COMPILING_LOOPS else 0.0
            rows[f"{arch} {loop}"] = seconds
    measured_runs = (results or {}).get("runs") or {}
    run_s = {}
    for arch in runs:
        row = measured_runs.get(arch, {})
        run_s[arch] = (row["setup_s"] + sum(e["seconds"] for e in row["epochs"]) if ok(row) else
                       SETUP_S + RUN_EPOCHS * sizes.steps * step_of(arch) * RUN_OVERHEAD)
    packing: dict[str, dict[int, float]] = {}
    for model in packing_models:
        rates = packed.get(model, {})
        one = rates.get(1) or sizes.batch / step_of(model)
        packing[model] = {runs: runs * sizes.images / rates.get(runs, one) for runs in counts}
    # one pool without MPS and one with it, each building and warming every model once
    pools = (2 * (POOL_START_S + sum(MODEL_WARM_S + sum(p.values()) for p in packing.values()))
             if packing and counts else 0.0)
    recipe_s = recipes_seconds(recipes)
    return {"source": source, "recipes": recipe_s, "rows": rows, "runs": run_s, "packing": packing,
            "packing_total": pools, "total": recipe_s + sum(rows.values()) + sum(run_s.values()) + pools}


def load_results(path: Path) -> dict | None:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return None


# ------------------------------------------------------------------------------ report
def package_commit(package_dir=None) -> tuple[str | None, str]:
    """The commit of the checkout the imported ``focalcal`` package comes from, and where that is
    (or None, and why): the git work tree that holds the package's own directory and tracks its
    ``__init__.py``. It never guesses: a package copied into another repository, or imported from
    a folder no repository holds, records no commit rather than that repository's HEAD."""
    if package_dir is None:
        import focalcal

        package_dir = Path(focalcal.__file__).resolve().parent
    package_dir = Path(package_dir)

    def git(*arguments) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *arguments], capture_output=True, text=True, cwd=package_dir, check=False)

    try:
        top = git("rev-parse", "--show-toplevel")
    except OSError as error:
        return None, f"focalcal imported from {package_dir}; git could not run ({error_line(error)})"
    if top.returncode != 0:
        return None, f"focalcal imported from {package_dir}, not a git checkout"
    root = top.stdout.strip()
    if git("ls-files", "--error-unmatch", "--", "__init__.py").returncode != 0:
        return None, f"focalcal imported from {package_dir}, which the git repository at {root} does not track"
    head = git("rev-parse", "--short", "HEAD")
    if head.returncode != 0:
        return None, f"focalcal imported from {package_dir}, in {root}, which has no commit"
    changed = git("status", "--porcelain", "--", ".").stdout.strip()
    return head.stdout.strip(), (f"the checkout at {root} that focalcal was imported from"
                                 + (", with uncommitted changes to the package" if changed else ""))


def ratios(results: dict) -> dict:
    """Ratios between measured figures only: a FAILED or SKIPPED loop has none."""
    out = {}
    for arch, rows in results["architectures"].items():
        ours = {k: v for k, v in rows.items() if k in OURS and k != "fp32 none" and ok(v)}
        if not ours:
            continue
        best = max(ours, key=lambda k: ours[k]["images_per_s"])
        entry = {"fastest": best}
        for name, key in (("reference", "vs_reference"), ("fp32 none", "vs_own_fp32_eager")):
            if ok(rows.get(name, {})):
                entry[key] = round(ours[best]["images_per_s"] / rows[name]["images_per_s"], 2)
        out[arch] = entry
    runs = {}
    for arch, row in (results.get("runs") or {}).items():
        if not ok(row):
            continue
        entry = {"s_per_epoch": row["seconds"], "outside_train_share": row["outside_train_share"]}
        reference = results["architectures"].get(arch, {}).get("reference", {})
        if ok(reference) and reference.get("whole_epoch_s"):
            whole_rate = reference["images"] / reference["whole_epoch_s"]
            entry["vs_reference_whole_epoch"] = round(row["images_per_s"] / whole_rate, 2)
        runs[arch] = entry
    if runs:
        out["runs"] = runs
    gains: dict[str, dict] = {}
    for model, sections in packing_by_model(results).items():
        for key, section in sections.items():
            rates = {row["runs"]: row["images_per_s"] for row in section.get("rows", []) if ok(row)}
            if 1 in rates:
                gains.setdefault(model, {})[key] = {str(n): round(rate / rates[1], 2) for n, rate in sorted(rates.items())}
    if gains:
        out["packing_gain"] = gains
    reference = results["architectures"].get(PACKING_MODEL, {}).get("reference", {})
    for key, section in packing_by_model(results).get(PACKING_MODEL, {}).items():
        if ok(reference) and section.get("rows"):
            out[f"packing_{key}_vs_reference_one_run"] = {
                str(row["runs"]): round(row["images_per_s"] / reference["images_per_s"], 2)
                for row in section["rows"] if ok(row)}
    return out


def auto_verdict(results: dict) -> str:
    """Whether these results would let ``compile: auto`` pick ``inductor_cudagraphs``
    (:data:`focalcal.training.step.AUTO_CUDA_MODE`): faster than ``cudagraphs`` on every
    architecture measured, and every study recipe captured under it. The switch is made in the
    code, by hand, once a results file shows both."""
    rows = results.get("architectures", {})
    measured = {arch: (r["cudagraphs"]["images_per_s"], r["inductor_cudagraphs"]["images_per_s"])
                for arch, r in rows.items() if ok(r.get("cudagraphs", {})) and ok(r.get("inductor_cudagraphs", {}))}
    missing = sorted(arch for arch in rows if arch not in measured)
    if not measured:
        return "compile: auto keeps cudagraphs: inductor_cudagraphs not measured"
    slower = sorted(arch for arch, (graphs, inductor) in measured.items() if inductor <= graphs)
    faster = ", ".join(f"{arch} {inductor / graphs:.2f}×" for arch, (graphs, inductor) in sorted(measured.items()))
    if slower or missing:
        why = (f"not faster on {', '.join(slower)}" if slower else "") + ("; " if slower and missing else "") + (
            f"not measured on {', '.join(missing)}" if missing else "")
        return f"compile: auto keeps cudagraphs: inductor_cudagraphs {why} (inductor / cudagraphs: {faster})"
    return (f"inductor_cudagraphs faster on every architecture measured ({faster}); compile: auto switches to it "
            "only once every study recipe also captures under it (bench_study_recipes under inductor_cudagraphs)")


def goals(results: dict) -> list[str]:
    """The benchmark's goals, each met, not met, or not measured (never judged from a failed loop)."""
    r, lines = results.get("ratios", {}), []

    def verdict(value, target, text="×") -> str:
        if value is None:
            return "not measured"
        return f"{'met' if value >= target else 'NOT met'} ({value:.2f}{text})"

    run = r.get("runs", {}).get("resnet50", {})
    lines.append("ResNet-50 run's epoch (Trainer.fit, compile: auto) ≥ 2.5× the authors' whole epoch: "
                 + verdict(run.get("vs_reference_whole_epoch"), 2.5))
    share = run.get("outside_train_share")
    lines.append("ResNet-50 run's epoch outside training ≤ 10 %: " + (
        "not measured" if share is None else f"{'met' if share <= 0.10 else 'NOT met'} ({100 * share:.1f} %)"))
    lines.append("ResNet-50 training epoch ≥ 2.5× the reference: " + verdict(r.get("resnet50", {}).get("vs_reference"), 2.5))
    lines.append("DenseNet-121 ≥ its fp32 eager loop: " + verdict(r.get("densenet121", {}).get("vs_own_fp32_eager"), 1))
    four = [v["4"] for k, v in r.items() if k.startswith("packing_") and k.endswith("_one_run") and "4" in v]
    lines.append("4 packed ResNet-50 runs ≥ 4× the reference's one run: " + verdict(max(four) if four else None, 4))
    small = [sections[key]["4"] for model, sections in r.get("packing_gain", {}).items() if model in ("resnet8", "resnet20")
             for key in sections if "4" in sections[key]]
    lines.append("4 packed small-ResNet runs ≥ 2× one: " + verdict(max(small) if small else None, 2))
    lines.append(auto_verdict(results))
    return lines


def cell(row: dict) -> str:
    return f"{row['status'].upper()}: {row['reason']}"


def commit_text(results: dict) -> str:
    if results.get("commit"):
        return f"commit {results['commit']}"
    return f"no commit recorded ({results.get('commit_source') or 'no reason recorded'})"


def flops_cell(row: dict) -> str:
    if "model_tflop_per_s" not in row:
        return ""
    if "bf16_peak_fraction" in row:
        return f"{row['model_tflop_per_s']:.1f} ({100 * row['bf16_peak_fraction']:.1f} %)"
    return f"{row['model_tflop_per_s']:.2f} (no peak: {row.get('bf16_peak_reason', '')})"


def run_table(results: dict) -> list[str]:
    runs = results.get("runs") or {}
    if not runs:
        return []
    lines = [(f"The run: a planned run trained by `Trainer.fit` under its `compile: auto` for {RUN_EPOCHS} epochs "
              "from a fresh run directory (loader and augmentation on the device, step, evaluation of val and test, "
              "diagnostics, checkpoint) on the random CIFAR-shaped data; seconds per phase (share of the epoch). "
              "The checkpoint column is what the epoch waits for: on a GPU the state's copy to the CPU, its write "
              "running in the background during the next epoch; on the CPU the write itself."), "",
             "| run | mode | precision | epoch | s | train | evaluate | diagnostics | checkpoint | other |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for arch, row in runs.items():
        if not ok(row):
            lines.append(f"| {arch} | {cell(row)} | | | | | | | | |")
            continue
        for epoch in row["epochs"]:
            phases = " | ".join(f"{epoch[p]:.2f} ({100 * (epoch['shares'][p] or 0):.0f} %)" for p in RUN_PHASES)
            lines.append(f"| {row['run']} | {row['mode']} | {row['precision']} | {epoch['epoch']} | "
                         f"{epoch['seconds']:.2f} | {phases} |")
    for arch, row in runs.items():
        reference = results["architectures"].get(arch, {}).get("reference", {})
        if ok(row) and ok(reference) and reference.get("whole_epoch_s"):
            ratio = results.get("ratios", {}).get("runs", {}).get(arch, {}).get("vs_reference_whole_epoch")
            lines += ["", (f"The authors' whole epoch of {arch} (the reference loop): training {reference['seconds']:.2f} s, "
                           f"their three validation passes over {reference['val_images']:,} images "
                           f"{reference['validation_s']:.2f} s, the best model's save {reference['save_s']:.2f} s: "
                           f"{reference['whole_epoch_s']:.2f} s; the run's epoch {row['seconds']:.2f} s"
                           + (f", {ratio:.2f}× its speed." if ratio is not None else "."))]
    return lines + [""]


def packing_table(results: dict) -> list[str]:
    by_model = packing_by_model(results)
    if not by_model:
        return []
    lines = [("Packed runs, each one full epoch (the CIFAR models through the trainer in `cudagraphs`; the MLP and "
              "the text CNN: their planned run's step on stand-in batches), started together; images/s = all their "
              "images ÷ (last end − first start); × one = over one run of the same model:"), "",
             "| model | runs | without MPS, images/s | × one | with MPS, images/s | × one |", "|---|---|---|---|---|---|"]
    gains = results.get("ratios", {}).get("packing_gain", {})
    notes = []
    for model, sections in by_model.items():
        counts = sorted({row["runs"] for key in PACKING_LABELS for row in sections.get(key, {}).get("rows", [])})
        for runs in counts:
            cells = []
            for key in PACKING_LABELS:
                section = sections.get(key, {})
                row = next((r for r in section.get("rows", []) if r["runs"] == runs), None)
                if row is None:
                    cells += ["not run" if not section.get("reason") else "–", ""]
                elif not ok(row):
                    cells += [cell(row), ""]
                else:
                    gain = gains.get(model, {}).get(key, {}).get(str(runs))
                    cells += [f"{row['images_per_s']:,.0f}", f"{gain:.2f}×" if gain is not None else "–"]
            lines.append(f"| {model} | {runs} | " + " | ".join(cells) + " |")
        for key, label in PACKING_LABELS.items():
            reason = sections.get(key, {}).get("reason")
            if reason and not sections.get(key, {}).get("rows"):
                notes.append(f"{model}, {label}: {reason}")
    return lines + ([""] + notes if notes else []) + [""]


def table(results: dict) -> str:
    e = results["epoch"]
    lines = [(f"Measured by `python -m bench gpu{' --quick' if results.get('quick') else ''}` on {results['device']}, "
              f"torch {results['torch']}, {results['date']}, {commit_text(results)}, in {results['total_s']:.0f} s; "
              f"full epochs of {e['images']:,} images at batch {e['batch']} ({e['full_batches']} batches and one of "
              f"{e['partial_batch']}, every one timed) after a warm-up epoch of {e['warmup_batches']} batches and "
              f"the partial one."), ""]
    recipes = results.get("study_recipes")
    if recipes:
        lines += [("Every study recipe under `compile: auto`, one short epoch each: "
                   + (f"{recipes['passed']} of {recipes['runs']} passed" if recipes.get("runs") else "not run")
                   + (f"; FAILED: {recipes['reason']}" if recipes.get("reason") else "")
                   + "".join(f"; FAIL {f['run']}: {f['reason']}" for f in recipes.get("failures", []))
                   + "." if recipes.get("status") != "skipped" else f"Study recipes: {cell(recipes)}."), ""]
    lines += run_table(results)
    lines += [("| architecture | loop | precision | s / epoch | ms / step | images/s | × reference | "
               "model TFLOP/s (of bf16 peak) |"), "|---|---|---|---|---|---|---|---|"]
    for arch, rows in results["architectures"].items():
        reference = rows.get("reference", {})
        for name, row in rows.items():
            if not ok(row):
                lines.append(f"| {arch} | {name} | {cell(row)} | | | | | |")
                continue
            ratio = f"{row['images_per_s'] / reference['images_per_s']:.2f}×" if ok(reference) else "–"
            lines.append(f"| {arch} | {name} | {row.get('precision', '')} | {row['seconds']:.2f} | "
                         f"{1000 * row['s_per_step']:.1f} | {row['images_per_s']:,.0f} | {ratio} | {flops_cell(row)} |")
    lines += [""] + packing_table(results)
    lines += ["Goals: " + "; ".join(goals(results)) + "."]
    return "\n".join(lines)


def write_table(text: str, readme: Path | None = None) -> None:
    readme = readme or README
    content = readme.read_text()
    if TABLE_START not in content or TABLE_END not in content:
        raise ValueError(f"{readme} has no {TABLE_START} ... {TABLE_END} block for the table")
    head, rest = content.split(TABLE_START, 1)
    _, tail = rest.split(TABLE_END, 1)
    readme.write_text(f"{head}{TABLE_START}\n{text}\n{TABLE_END}{tail}")


def check_results(results: dict) -> None:
    """The results file's shape (schema 2 or 3); raises ValueError naming the first bad entry."""
    for key in ("schema", "device", "torch", "date", "commit", "epoch", "architectures", "packing", "ratios",
                "total_s"):
        if key not in results:
            raise ValueError(f"gpu results: no {key!r}")
    if results["schema"] not in READABLE_SCHEMAS:
        raise ValueError(f"gpu results: schema {results['schema']!r}, expected one of {list(READABLE_SCHEMAS)}")
    if results["schema"] >= 3 and not results["commit"] and not results.get("commit_source"):
        raise ValueError("gpu results: no commit and no 'commit_source' saying why")
    e = results["epoch"]
    if e["full_batches"] * e["batch"] + e["partial_batch"] != e["images"]:
        raise ValueError(f"gpu results: epoch {e} does not add up")
    rows = [(f"{a}/{n}", r) for a, rs in results["architectures"].items() for n, r in rs.items()]
    rows += [(f"packing {m} {k} {r.get('runs')}", r) for m, sections in packing_by_model(results).items()
             for k, s in sections.items() for r in s.get("rows", [])]
    rows += [(f"run {a}", r) for a, r in (results.get("runs") or {}).items()]
    for name, row in rows:
        status = row.get("status")
        if status == "ok":
            missing = [k for k in ("images", "seconds", "images_per_s") if not isinstance(row.get(k), (int, float))]
            if missing:
                raise ValueError(f"gpu results: {name} is ok but has no {missing}")
        elif status in ("failed", "skipped"):
            if not row.get("reason") or "images_per_s" in row:
                raise ValueError(f"gpu results: {name} is {status} and must carry a reason and no figure")
        else:
            raise ValueError(f"gpu results: {name} has status {status!r}")
    for arch, row in (results.get("runs") or {}).items():
        if ok(row):
            for epoch in row.get("epochs") or [None]:
                if epoch is None or abs(sum(epoch[p] for p in RUN_PHASES) - epoch["seconds"]) > 0.01 + 0.01 * epoch["seconds"]:
                    raise ValueError(f"gpu results: run {arch}'s epochs {row.get('epochs')} do not add up to their seconds")


def print_row(arch: str, name: str, row: dict, started: float) -> None:
    figures = (f"{row['seconds']:7.2f} s/epoch {1000 * row['s_per_step']:6.1f} ms/step {row['images_per_s']:9,.0f} "
               f"images/s  {row.get('precision', '')}  {flops_cell(row)}" if ok(row) else cell(row))
    print(f"{arch:22s} {name:11s} {figures} ({time.perf_counter() - started:.0f} s so far)", flush=True)


def print_run(arch: str, row: dict, started: float) -> None:
    if not ok(row):
        print(f"{arch:22s} {cell(row)} ({time.perf_counter() - started:.0f} s so far)", flush=True)
        return
    for epoch in row["epochs"]:
        phases = "  ".join(f"{p} {epoch[p]:.2f} s ({100 * (epoch['shares'][p] or 0):.0f} %)" for p in RUN_PHASES)
        print(f"{row['run']} {row['mode']} epoch {epoch['epoch']}: {epoch['seconds']:.2f} s = {phases}", flush=True)
    print(f"  ({time.perf_counter() - started:.0f} s so far)", flush=True)


def parse(argv, quick: bool) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_gpu", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", default=quick, help="ResNet-50 only, packing 1 and 4, "
                        "one recipe per architecture; within 3 minutes")
    parser.add_argument("--device", default=None, help="cuda (default) or cpu (a smoke run)")
    parser.add_argument("--out", default=None, help="write gpu_results.json and gpu_table.md here, not into bench/")
    parser.add_argument("--render", default=None, help="write the README's table from this results file, and exit")
    parser.add_argument("--arch", action="append", default=None, help="only this architecture (repeatable)")
    parser.add_argument("--loops", default=None, help="comma-separated loops for every --arch (e.g. reference,cudagraphs)")
    parser.add_argument("--runs", default=None, help=f"comma-separated models of the run section, of {list(RUNS)} "
                        "('' for none)")
    parser.add_argument("--packing", default=None, help="comma-separated counts of packed runs ('' for none)")
    parser.add_argument("--packing-models", default=None, help="comma-separated models to pack (default: "
                        f"{','.join(PACKING_MODELS)}; with --arch, the first --arch)")
    parser.add_argument("--recipes", choices=("all", "one-per-model", "none"), default=None, help="which study recipes the first "
                        "section trains")
    parser.add_argument("--recipes-match", default="", help="only study recipes whose label contains this")
    parser.add_argument("--images", type=int, default=TRAIN_IMAGES, help="training images per epoch")
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--warmup-batches", type=int, default=WARMUP_BATCHES)
    parser.add_argument("--budget", type=float, default=None, help="seconds; measurements past it are skipped")
    parser.add_argument("--estimate", action="store_true", help="print the estimate and exit")
    return parser.parse_args(argv)


def listed(text: str | None, default) -> list[str]:
    return [item for item in text.split(",") if item] if text is not None else list(default)


def main(quick: bool = False, argv=None) -> int:
    args = parse([] if argv is None else argv, quick)
    if args.render:
        results = json.loads(Path(args.render).read_text())
        check_results(results)
        write_table(table(results))
        print(f"wrote the table of {args.render} into {README}")
        return 0
    device = args.device or "cuda"
    if device == "cuda" and not torch.cuda.is_available() and not args.estimate:
        print("bench gpu: no CUDA device here (torch.cuda.is_available() is False); nothing measured. "
              "Run `python -m bench gpu` on a machine with a GPU.")
        return 0
    sizes = Sizes(args.images, args.batch, args.warmup_batches)
    architectures = args.arch or list(QUICK_LOOPS if args.quick else LOOPS)
    defaults = QUICK_LOOPS if args.quick else LOOPS
    loops = {arch: tuple(args.loops.split(",")) if args.loops else defaults.get(arch, ("reference", "cudagraphs"))
             for arch in architectures}
    counts = ([int(n) for n in args.packing.split(",") if n] if args.packing is not None
              else list(QUICK_PACKING if args.quick else PACKING))
    runs = listed(args.runs, QUICK_RUNS if args.quick else RUNS)
    unknown = [arch for arch in runs if arch not in RUNS]
    if unknown:
        print(f"bench gpu: no planned run for {unknown} in the run section; it has {list(RUNS)}", file=sys.stderr)
        return 2
    packing_models = listed(args.packing_models, [args.arch[0]] if args.arch else
                            (QUICK_PACKING_MODELS if args.quick else PACKING_MODELS)) if counts else []
    recipes = args.recipes or "one-per-model"
    budget = args.budget or (QUICK_BUDGET_S if args.quick else BUDGET_S)
    plan = estimate(loops, counts, recipes, sizes, load_results(RESULTS), runs, packing_models)
    print(f"bench gpu{' --quick' if args.quick else ''} on {device}: estimated {plan['total']:.0f} s "
          f"(study recipes {plan['recipes']:.0f} s, the run {sum(plan['runs'].values()):.0f} s, architectures "
          f"{sum(plan['rows'].values()):.0f} s, packing {plan['packing_total']:.0f} s without and with MPS), from "
          f"{plan['source']} and the assumed set-up costs; budget {budget:.0f} s"
          + (" (past it, the last measurements are skipped: the deferred inductor_cudagraphs loops first, then "
             "packing)"
             if plan["total"] > budget else ""), flush=True)
    if args.estimate:
        return 0

    started = time.perf_counter()

    def over_budget(seconds: float) -> str:
        used = time.perf_counter() - started
        return (f"{used:.0f} s of the {budget:.0f} s budget used; its estimated {seconds:.0f} s would exceed it"
                if used + seconds > budget else "")

    commit, commit_source = package_commit()
    device_name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    results = {"schema": SCHEMA, "device": device_name,
               "torch": torch.__version__, "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
               "commit": commit, "commit_source": commit_source, "quick": args.quick,
               "epoch": {**asdict(sizes), "full_batches": sizes.full_batches, "partial_batch": sizes.partial_batch,
                         "steps": sizes.steps},
               "estimate_s": round(plan["total"], 1), "budget_s": budget, "runs": {}, "architectures": {},
               "packing": {}}
    out = Path(args.out) if args.out else None

    print("\n-- study recipes under compile: auto", flush=True)
    results["study_recipes"] = (recipes_section(device, recipes, args.recipes_match) if recipes != "none"
                                else skipped("not asked for (--recipes none)"))
    with tempfile.TemporaryDirectory() as data_root:
        if runs:
            print(f"\n-- the run: Trainer.fit under compile: auto, {RUN_EPOCHS} epochs", flush=True)
        for arch in runs:
            late = over_budget(plan["runs"][arch])
            results["runs"][arch] = skipped(late) if late else attempt(time_run, arch, sizes, data_root, device)
            print_run(arch, results["runs"][arch], started)
        write_results(results, started, out)

        flops: dict[str, float] = {}

        def time_loop(arch: str, name: str) -> dict:
            late = over_budget(plan["rows"][f"{arch} {name}"])
            if late:
                return skipped(late)
            if name == "reference":
                row = attempt(time_reference, arch, sizes, device, validation=sizes.val_images)
            else:
                row = attempt(time_ours, arch, name, data_root, sizes, device)
            if ok(row):
                if arch not in flops:
                    flops[arch] = model_flops(arch, sizes.batch)
                row = with_flops(row, flops[arch], sizes.batch, device_name)
            return row

        print("\n-- architectures", flush=True)
        for arch, names in loops.items():
            rows = results["architectures"][arch] = {}
            for name in names:
                if (arch, name) in DEFERRED:
                    continue
                rows[name] = time_loop(arch, name)
                print_row(arch, name, rows[name], started)
        write_results(results, started, out)  # the architectures' figures are kept if packing fails
        if counts and packing_models:
            release(device)
            print("\n-- packing", flush=True)
            estimates = plan["packing"]

            def packing_late(model: str | None, runs: int) -> str:
                if model is None:  # the pool's start and the first model's first round
                    return over_budget(POOL_START_S + MODEL_WARM_S + estimates[packing_models[0]][counts[0]])
                first = runs == counts[0]  # the round that builds and warms the model
                return over_budget(estimates[model][runs] + (MODEL_WARM_S if first else 0.0))

            results["packing"] = packing_section(counts, data_root, sizes, packing_models, device, packing_late)
            write_results(results, started, out)
        deferred = [(arch, name) for arch, names in loops.items() for name in names if (arch, name) in DEFERRED]
        if deferred:
            print("\n-- architectures, the model compiled by inductor inside the captured step", flush=True)
        for arch, name in deferred:
            row = time_loop(arch, name)
            print_row(arch, name, row, started)
            rows = results["architectures"][arch]
            rows[name] = row
            results["architectures"][arch] = {n: rows[n] for n in loops[arch] if n in rows}  # the loops' order
    write_results(results, started, out)
    print("\n" + "\n".join(goals(results)))
    print(f"wrote {out or RESULTS} ({results['total_s']:.0f} s; estimated {plan['total']:.0f} s)")
    return 0


def write_results(results: dict, started: float, out: Path | None) -> None:
    results["ratios"] = ratios(results)
    results["total_s"] = round(time.perf_counter() - started, 1)
    check_results(results)
    text = table(results)
    if out is None:
        RESULTS.write_text(json.dumps(results, indent=1) + "\n")
        write_table(text)
    else:
        out.mkdir(parents=True, exist_ok=True)
        (out / "gpu_results.json").write_text(json.dumps(results, indent=1) + "\n")
        (out / "gpu_table.md").write_text(text + "\n")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--pack-worker":
        index, control, root, device, images, batch, warm_batches = sys.argv[2:9]
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        pack_worker(Path(control), int(index), root, device, Sizes(int(images), int(batch), int(warm_batches)))
    else:
        sys.exit(main(argv=sys.argv[1:]))
