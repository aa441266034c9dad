"""Training throughput on one CUDA GPU, measured so that it cannot flatter. ``python -m bench gpu``
(``--quick``: a smaller set); without CUDA it says so and exits 0 (``--device cpu`` runs the same
code on the CPU, for a smoke test).

Everything is measured in this one run on the same GPU, in three sections:

1. **study recipes** — one epoch of every distinct recipe that ``config/studies/*.yaml`` plans,
   under ``compile: auto`` (:mod:`bench.bench_study_recipes`, four processes on the GPU): the
   run's real step for :data:`RECIPE_BATCHES` full batches of its batch size (at most 64) on
   stand-in inputs, then the epoch's last, partial batch of half that size, then the epoch's
   read-back. PASS or FAIL for each; a capture that fell back to eager is a FAIL.
2. **architectures** — mukhoti2020's CIFAR recipe (batch 128, summed focal loss γ = 3, gradient
   norm clipped to 2, SGD 0.1 / 0.9 / 5e-4, random crop with padding 4 and flip) on random
   CIFAR-10-shaped data, per architecture:

   * ``reference`` — the released code's loop (github.com/torrvision/focal_calibration,
     ``train.py`` / ``train_utils.py``), written here: fp32, the torchvision transform pipeline
     on PIL images in a 4-worker ``DataLoader`` (pinned memory, workers started each epoch),
     ``cudnn.benchmark``, ``loss.item()`` after every batch, the norm clipped to 2;
   * ours — :class:`focalcal.training.Trainer`'s ``train_one_epoch`` (data on the GPU,
     augmented there) in compile mode ``cudagraphs`` at the trainer's precision (:data:`LOOPS`;
     ``--loops`` adds ``none`` or ``default``), and for DenseNet-121 ``fp32 none``: the eager
     step in full precision, its own fp32 loop.

   Each loop trains a warm-up epoch of :data:`WARMUP_BATCHES` full batches and the partial
   batch (cuDNN's algorithms for both shapes, the capture, the allocator, the DataLoader's
   first start), then one timed **full epoch**: 45,000 images, 351 batches of 128 and the last
   one of 72, every batch timed, the epoch's read-back included (the reference: one pass of
   its ``DataLoader``, worker start-up included).
3. **packing** — 1, 2, 4 and 8 processes each training ResNet-50 (``cudagraphs``) at once, each
   one full epoch, started together at a shared wall-clock instant after all are warm; the
   throughput is every process's images ÷ (the last end − the first start), from the
   ``time.time()`` stamps the workers write. Measured without and with CUDA MPS, which this
   bench starts (:mod:`focalcal.pipeline.gpu_sharing`) where ``nvidia-cuda-mps-control`` exists
   and may run, and stops afterwards.

A loop that raises (an OOM included), or whose step fell back to eager (``step.plan.mode``
changed: a failed capture), is FAILED with its one-line reason, in the printout, the JSON and
the table; it never becomes a figure or a ratio. Before starting, the bench prints its
estimate of the time it takes, from the figures of :data:`RESULTS`, and skips a measurement
(SKIPPED, with the reason) that would take it past ``--budget`` seconds. The results go to
``bench/gpu_results.json`` and the table in ``bench/README.md``, or with ``--out DIR`` to
``DIR/gpu_results.json`` and ``DIR/gpu_table.md``; ``--render JSON`` writes the README's table
from a results file.
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
SCHEMA = 2  # results with full epochs and wall-clock packing; schema 1 timed 100-batch epochs

ARCHITECTURES = ("resnet50", "resnet110_bottleneck", "wide_resnet26_10", "densenet121")
#: What each architecture is timed in, within the time budget. Every architecture's fastest mode
#: feeds ``focalcal plan`` and is compared with the reference loop (ResNet-50 carries the 2.5×
#: goal); DenseNet-121 also with its own fp32 eager loop (its goal). ``--loops`` times others.
LOOPS = {"resnet50": ("reference", "cudagraphs"),
         "resnet110_bottleneck": ("reference", "cudagraphs"),
         "wide_resnet26_10": ("reference", "cudagraphs"),
         "densenet121": ("reference", "fp32 none", "cudagraphs")}
QUICK_LOOPS = {"resnet50": ("reference", "cudagraphs")}
OURS = ("fp32 none", "none", "cudagraphs", "default")  # the trainer's loops (``default``: torch.compile)
PACKING, QUICK_PACKING = (1, 2, 4, 8), (1, 4)
PACKING_MODEL = "resnet50"
PACKING_LABELS = {"without_mps": "without MPS", "with_mps": "with MPS"}
TRAIN_IMAGES = 45_000  # mukhoti2020's CIFAR training split
BATCH = 128
WARMUP_BATCHES = 10  # full batches of the warm-up epoch, before its partial batch
RECIPE_BATCHES, RECIPE_BATCH_CAP, RECIPE_SHARDS = 5, 64, 4
BUDGET_S, QUICK_BUDGET_S = 480.0, 180.0  # 8 and 3 minutes of device time
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


def dataset_name(images: int) -> str:
    return f"bench_gpu_random_cifar_{images}"


def register_dataset(images: int) -> str:
    from focalcal import data
    from focalcal.data import RawData

    name = dataset_name(images)

    def load(root, download):
        x, y = random_images(images + 2 * held_out(images))
        return RawData(pools={"all": (x.transpose(0, 3, 1, 2).copy(), y)})

    if name not in data.available():
        data.register(name, load, num_classes=10, val_size=held_out(images), test_size=held_out(images),
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


def time_reference(model_name: str, sizes: Sizes, device: str = "cuda") -> dict:
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
    del model, optimizer, full
    release(device)
    if steps != sizes.steps:
        raise RuntimeError(f"the reference epoch took {steps} steps, not {sizes.steps}")
    return measurement(sizes.images, steps, seconds, mode="reference", precision="fp32")


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


def pack_worker(control: Path, index: int, data_root: str, model: str, device: str, sizes: Sizes) -> None:
    """One packed run: build and warm up, say ready, then for each round that includes it train
    one full epoch from the round's shared start instant and write its stamps."""
    with tempfile.TemporaryDirectory() as run_dir:
        trainer = our_trainer(model, "cudagraphs", run_dir, data_root, sizes, device)
        planned = trainer.step.plan
        warm_up(trainer, sizes)
        synchronize(device)
        _publish(control / f"ready{index}", str(os.getpid()))
        epoch = 2
        for round_index in range(10_000):
            go = control / f"go{round_index}"
            while not go.exists():
                if (control / "quit").exists():
                    return
                time.sleep(0.005)
            order = json.loads(go.read_text())
            if index >= order["runs"]:
                continue
            time.sleep(max(0.0, order["at"] - time.time()))
            start = time.time()
            trainer.train_one_epoch(epoch)
            end = time.time()
            epoch += 1
            changed = kept_mode(planned, trainer.step.plan)
            result = failed(changed) if changed else {"status": "ok", "start": start, "end": end, "images": sizes.images}
            _publish(control / f"result{round_index}_{index}.json", json.dumps({"worker": index, **result}))


class PackingPool:
    """``size`` worker processes, built and warmed up once; :meth:`run` times ``runs`` of them together."""

    def __init__(self, size: int, data_root: str, model: str, device: str, sizes: Sizes) -> None:
        self.control = Path(tempfile.mkdtemp(prefix="bench_gpu_pack_"))
        self.sizes, self.rounds = sizes, 0
        arguments = [str(self.control), data_root, model, device, str(sizes.images), str(sizes.batch),
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

    def wait_ready(self, timeout: float) -> str:
        """"" when every worker is warm, else why not."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if all((self.control / f"ready{i}").exists() for i in range(len(self.workers))):
                return ""
            dead = self._dead(range(len(self.workers)))
            if dead:
                return dead
            time.sleep(0.05)
        return f"the workers were not warm within {timeout:.0f} s"

    def run(self, runs: int, timeout: float) -> dict:
        """``runs`` workers train one full epoch each from one shared start instant."""
        round_index, self.rounds = self.rounds, self.rounds + 1
        _publish(self.control / f"go{round_index}", json.dumps({"runs": runs, "at": time.time() + 0.25}))
        deadline = time.time() + timeout
        paths = [self.control / f"result{round_index}_{i}.json" for i in range(runs)]
        while not all(path.exists() for path in paths):
            dead = self._dead(range(runs))
            if dead:
                return {"runs": runs, **failed(dead)}
            if time.time() > deadline:
                return {"runs": runs, **failed(f"not all {runs} runs finished within {timeout:.0f} s")}
            time.sleep(0.02)
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


def time_packing(counts, data_root: str, sizes: Sizes, model: str = PACKING_MODEL, device: str = "cuda",
                 round_timeout: float = 300.0, over_budget=lambda runs: "") -> dict:
    """One pool of ``max(counts)`` warm workers; a round per count of runs."""
    pool = PackingPool(max(counts), data_root, model, device, sizes)
    try:
        not_ready = pool.wait_ready(timeout=round_timeout)
        rows = []
        for runs in counts:
            if not_ready:
                rows.append({"runs": runs, **failed(not_ready)})
            elif over_budget(runs):
                rows.append({"runs": runs, **skipped(over_budget(runs))})
            else:
                rows.append(pool.run(runs, round_timeout))
                if not ok(rows[-1]):
                    not_ready = rows[-1]["reason"]  # the pool is broken: the larger counts fail with it
            report_packing(rows[-1])
        return {"rows": rows}
    finally:
        pool.close()


def report_packing(row: dict) -> None:
    what = (f"{row['images_per_s']:10,.0f} images/s ({row['images']:,} images in {row['seconds']:.2f} s, starts "
            f"{row['start_spread_s'] * 1000:.0f} ms apart)" if ok(row) else f"{row['status'].upper()}: {row['reason']}")
    print(f"  packed {row['runs']}: {what}", flush=True)


def packing_section(counts, data_root: str, sizes: Sizes, model: str, device: str, over_budget) -> dict:
    """Packed runs without MPS, then with it where it can start (stopped afterwards)."""
    from focalcal.pipeline import gpu_sharing

    print("packing without MPS", flush=True)
    out = {"without_mps": time_packing(counts, data_root, sizes, model, device, over_budget=over_budget)}
    messages: list[str] = []
    daemon = gpu_sharing.start_mps(log=messages.append)
    if daemon is None:
        reason = messages[-1].removeprefix("CUDA MPS not started: ") if messages else "no reason given"
        out["with_mps"] = {"status": "unavailable", "reason": f"MPS not available: {reason}"}
        print(out["with_mps"]["reason"], flush=True)
        return out
    print(f"packing with MPS ({messages[-1]})", flush=True)
    try:
        out["with_mps"] = time_packing(counts, data_root, sizes, model, device, over_budget=over_budget)
    finally:
        daemon.stop(log=messages.append)
    out["with_mps"]["mps"] = messages
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


def step_seconds(results: dict | None) -> tuple[dict, dict, str]:
    """Per-step seconds of each (architecture, loop), packed images/s per count of runs, and
    what they come from, in either results schema (schema 1: 100-batch epochs, loops named
    ``bf16 none``/``bf16 cudagraphs``, packing summed from the workers' own rates)."""
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
        packed = {row["runs"]: row["images_per_s"] for row in results.get("packing") or []}
    else:
        packed = {row["runs"]: row["images_per_s"] for row in results.get("packing", {}).get("without_mps", {})
                  .get("rows", []) if ok(row)}
    kind = "100-batch epochs" if legacy else "full epochs"
    return per_step, packed, f"{results.get('device', 'an unnamed GPU')}'s {kind} of {results.get('date', '?')}"


def estimate(loops: dict, counts, recipes: str, sizes: Sizes, results: dict | None) -> dict:
    """Seconds each section should take, from the figures of ``results``."""
    per_step, packed, source = step_seconds(results)
    rows = {f"{arch} {loop}": SETUP_S + (sizes.warmup_steps + sizes.steps) * per_step.get((arch, loop), UNKNOWN_S_PER_STEP)
            for arch, names in loops.items() for loop in names}
    one_run = packed.get(1) or (sizes.batch / per_step[PACKING_MODEL, "cudagraphs"]
                                if (PACKING_MODEL, "cudagraphs") in per_step else sizes.batch / UNKNOWN_S_PER_STEP)
    packing = {runs: runs * sizes.images / packed.get(runs, one_run) for runs in counts}
    pools = 2 * (POOL_START_S + sum(packing.values()))  # without and with MPS
    recipe_s = recipes_seconds(recipes)
    return {"source": source, "recipes": recipe_s, "rows": rows, "packing": packing,
            "total": recipe_s + sum(rows.values()) + pools}


def load_results(path: Path) -> dict | None:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return None


# ------------------------------------------------------------------------------ report
def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=BENCH_DIR, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


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
    reference = results["architectures"].get(results.get("packing_model", PACKING_MODEL), {}).get("reference", {})
    for key, section in (results.get("packing") or {}).items():
        if ok(reference) and section.get("rows"):
            out[f"packing_{key}_vs_reference_one_run"] = {
                str(row["runs"]): round(row["images_per_s"] / reference["images_per_s"], 2)
                for row in section["rows"] if ok(row)}
    return out


def goals(results: dict) -> list[str]:
    """The benchmark's goals, each met, not met, or not measured (never judged from a failed loop)."""
    r, lines = results.get("ratios", {}), []
    resnet = r.get("resnet50", {}).get("vs_reference")
    lines.append("ResNet-50 epoch ≥ 2.5× the reference: " + (f"{'met' if resnet >= 2.5 else 'NOT met'} ({resnet:.2f}×)"
                                                               if resnet is not None else "not measured"))
    dense = r.get("densenet121", {}).get("vs_own_fp32_eager")
    lines.append("DenseNet-121 ≥ its fp32 eager loop: " + (f"{'met' if dense >= 1 else 'NOT met'} ({dense:.2f}×)"
                                                             if dense is not None else "not measured"))
    four = [v["4"] for k, v in r.items() if k.startswith("packing_") and "4" in v]
    lines.append("4 packed runs ≥ 4× the reference's one run: " + (f"{'met' if max(four) >= 4 else 'NOT met'} "
                                                                  f"({max(four):.2f}×)" if four else "not measured"))
    return lines


def cell(row: dict) -> str:
    return f"{row['status'].upper()}: {row['reason']}"


def table(results: dict) -> str:
    e = results["epoch"]
    lines = [(f"Measured by `python -m bench gpu{' --quick' if results.get('quick') else ''}` on {results['device']}, "
              f"torch {results['torch']}, {results['date']}, commit {results['commit']}, in {results['total_s']:.0f} s; "
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
    lines += ["| architecture | loop | precision | s / epoch | ms / step | images/s | × reference |",
              "|---|---|---|---|---|---|---|"]
    for arch, rows in results["architectures"].items():
        reference = rows.get("reference", {})
        for name, row in rows.items():
            if not ok(row):
                lines.append(f"| {arch} | {name} | {cell(row)} | | | | |")
                continue
            ratio = f"{row['images_per_s'] / reference['images_per_s']:.2f}×" if ok(reference) else "–"
            lines.append(f"| {arch} | {name} | {row.get('precision', '')} | {row['seconds']:.2f} | "
                         f"{1000 * row['s_per_step']:.1f} | {row['images_per_s']:,.0f} | {ratio} |")
    packing = results.get("packing") or {}
    if packing:
        lines += ["", (f"Packed runs, each one full {results.get('packing_model', PACKING_MODEL)} epoch in "
                       "`cudagraphs`, started together; images/s = all their images ÷ (last end − first start):"), "",
                  "| runs | without MPS, images/s | × reference, one run | with MPS, images/s | × reference, one run |",
                  "|---|---|---|---|---|"]
        ratios_ = results.get("ratios", {})
        sections = {key: packing.get(key, {}) for key in ("without_mps", "with_mps")}
        shown = [key for key, section in sections.items() if section.get("rows")]
        if len(shown) == 1:  # the other one did not run: a line below says why
            lines[-2:] = [f"| runs | {PACKING_LABELS[shown[0]]}, images/s | × reference, one run |",
                          "|---|---|---|"]
        counts = sorted({row["runs"] for key in shown for row in sections[key]["rows"]})
        for runs in counts:
            cells = []
            for key in shown:
                row = next((r for r in sections[key]["rows"] if r["runs"] == runs), None)
                if row is None:
                    cells += ["not run", ""]
                elif not ok(row):
                    cells += [cell(row), ""]
                else:
                    ratio = ratios_.get(f"packing_{key}_vs_reference_one_run", {}).get(str(runs))
                    cells += [f"{row['images_per_s']:,.0f}", f"{ratio:.2f}×" if ratio is not None else "–"]
            lines.append(f"| {runs} | " + " | ".join(cells) + " |")
        for key, section in sections.items():
            if key not in shown and section.get("reason"):
                lines += ["", f"{PACKING_LABELS[key][0].upper()}{PACKING_LABELS[key][1:]}: {section['reason']}"]
    lines += ["", "Goals: " + "; ".join(goals(results)) + "."]
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
    """The results file's shape (schema 2); raises ValueError naming the first bad entry."""
    for key in ("schema", "device", "torch", "date", "commit", "epoch", "architectures", "packing", "ratios",
                "total_s"):
        if key not in results:
            raise ValueError(f"gpu results: no {key!r}")
    if results["schema"] != SCHEMA:
        raise ValueError(f"gpu results: schema {results['schema']!r}, expected {SCHEMA}")
    e = results["epoch"]
    if e["full_batches"] * e["batch"] + e["partial_batch"] != e["images"]:
        raise ValueError(f"gpu results: epoch {e} does not add up")
    rows = [(f"{a}/{n}", r) for a, rs in results["architectures"].items() for n, r in rs.items()]
    rows += [(f"packing {k} {r.get('runs')}", r) for k, s in results["packing"].items() for r in s.get("rows", [])]
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


def print_row(arch: str, name: str, row: dict, started: float) -> None:
    figures = (f"{row['seconds']:7.2f} s/epoch {1000 * row['s_per_step']:6.1f} ms/step {row['images_per_s']:9,.0f} "
               f"images/s  {row.get('precision', '')}" if ok(row) else cell(row))
    print(f"{arch:22s} {name:11s} {figures} ({time.perf_counter() - started:.0f} s so far)", flush=True)


def parse(argv, quick: bool) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_gpu", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", default=quick, help="ResNet-50 only, packing 1 and 4, "
                        "one recipe per architecture; within 3 minutes")
    parser.add_argument("--device", default=None, help="cuda (default) or cpu (a smoke run)")
    parser.add_argument("--out", default=None, help="write gpu_results.json and gpu_table.md here, not into bench/")
    parser.add_argument("--render", default=None, help="write the README's table from this results file, and exit")
    parser.add_argument("--arch", action="append", default=None, help="only this architecture (repeatable)")
    parser.add_argument("--loops", default=None, help="comma-separated loops for every --arch (e.g. reference,cudagraphs)")
    parser.add_argument("--packing", default=None, help="comma-separated counts of packed runs ('' for none)")
    parser.add_argument("--recipes", choices=("all", "one-per-model", "none"), default=None, help="which study recipes the first "
                        "section trains")
    parser.add_argument("--recipes-match", default="", help="only study recipes whose label contains this")
    parser.add_argument("--images", type=int, default=TRAIN_IMAGES, help="training images per epoch")
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--warmup-batches", type=int, default=WARMUP_BATCHES)
    parser.add_argument("--budget", type=float, default=None, help="seconds; measurements past it are skipped")
    parser.add_argument("--estimate", action="store_true", help="print the estimate and exit")
    return parser.parse_args(argv)


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
    recipes = args.recipes or ("one-per-model" if args.quick else "all")
    budget = args.budget or (QUICK_BUDGET_S if args.quick else BUDGET_S)
    packing_model = args.arch[0] if args.arch else PACKING_MODEL
    plan = estimate(loops, counts, recipes, sizes, load_results(RESULTS))
    print(f"bench gpu{' --quick' if args.quick else ''} on {device}: estimated {plan['total']:.0f} s "
          f"(study recipes {plan['recipes']:.0f} s, architectures {sum(plan['rows'].values()):.0f} s, packing "
          f"{2 * POOL_START_S + 2 * sum(plan['packing'].values()):.0f} s without and with MPS), from "
          f"{plan['source']}; budget {budget:.0f} s", flush=True)
    if args.estimate:
        return 0

    started = time.perf_counter()

    def over_budget(seconds: float) -> str:
        used = time.perf_counter() - started
        return (f"{used:.0f} s of the {budget:.0f} s budget used; its estimated {seconds:.0f} s would exceed it"
                if used + seconds > budget else "")

    results = {"schema": SCHEMA, "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
               "torch": torch.__version__, "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
               "commit": git_commit(), "quick": args.quick,
               "epoch": {**asdict(sizes), "full_batches": sizes.full_batches, "partial_batch": sizes.partial_batch,
                         "steps": sizes.steps},
               "estimate_s": round(plan["total"], 1), "budget_s": budget, "architectures": {}, "packing": {}}
    out = Path(args.out) if args.out else None

    print("\n-- study recipes under compile: auto", flush=True)
    results["study_recipes"] = (recipes_section(device, recipes, args.recipes_match) if recipes != "none"
                                else skipped("not asked for (--recipes none)"))
    print("\n-- architectures", flush=True)
    with tempfile.TemporaryDirectory() as data_root:
        for arch, names in loops.items():
            rows = results["architectures"][arch] = {}
            for name in names:
                late = over_budget(plan["rows"][f"{arch} {name}"])
                if late:
                    rows[name] = skipped(late)
                elif name == "reference":
                    rows[name] = attempt(time_reference, arch, sizes, device)
                else:
                    rows[name] = attempt(time_ours, arch, name, data_root, sizes, device)
                print_row(arch, name, rows[name], started)
        write_results(results, started, out)  # the architectures' figures are kept if packing fails
        if counts:
            release(device)
            print("\n-- packing", flush=True)
            estimates = plan["packing"]
            results["packing_model"] = packing_model
            results["packing"] = packing_section(counts, data_root, sizes, packing_model, device,
                                                 lambda runs: over_budget(estimates[runs]))
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
        index, control, root, model, device, images, batch, warm = sys.argv[2:10]
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        pack_worker(Path(control), int(index), root, model, device, Sizes(int(images), int(batch), int(warm)))
    else:
        sys.exit(main(argv=sys.argv[1:]))
