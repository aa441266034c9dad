"""Trainer throughput against a bare hand-written PyTorch loop, same model, data and batch size.

The bare loop is the floor: tensors already on the device, a random permutation per epoch,
forward, cross-entropy, backward, SGD step — nothing else. The trainer adds per-batch
divergence checks and running train NLL/error; the ratio says what those cost. Only the
training phase is timed (the trainer's per-epoch evaluation is reported separately).
"""

from __future__ import annotations

import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

from focalcal import data, models
from focalcal.data import RawData
from focalcal.training import RunConfig, Trainer, train_run
from focalcal.training.diagnostics import last_layer_gradient_norms

BENCH_IMAGES = "bench_random_images32"


def _random_images(root, download, *, n_samples: int = 4096) -> RawData:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(n_samples, 3, 32, 32), dtype=np.uint8)
    y = rng.integers(0, 10, size=n_samples)
    return RawData(pools={"all": (x, y)})


def _register_bench_dataset() -> None:
    if BENCH_IMAGES not in data.available():
        data.register(BENCH_IMAGES, _random_images, num_classes=10, val_size=0.05, test_size=0.05,
                      augmentation={}, summary="random 32x32 images (benchmark only)")


def bare_epoch(model, optimizer, x, y, batch_size, generator) -> None:
    model.train()
    order = torch.randperm(len(y), generator=generator)
    for start in range(0, len(y), batch_size):
        index = order[start : start + batch_size]
        loss = F.cross_entropy(model(x[index]), y[index])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


def compare(dataset: dict, model: dict, batch_size: int, epochs: int, data_root: str) -> dict:
    config = RunConfig.from_dict({
        "dataset": dataset, "model": model, "loss": {"name": "cross_entropy"}, "device": "cpu",
        "recipe": {"epochs": epochs, "batch_size": batch_size, "augmentation": "none",
                   "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 5e-4}},
    })
    with tempfile.TemporaryDirectory() as run_dir:
        trainer = Trainer(config, run_dir, data_root=data_root, progress=False)
        x, y = trainer.normalised_train_x(), trainer.train_y
        bare_model = models.build(model["name"], num_classes=trainer.dataset.num_classes,
                                  **{k: v for k, v in model.items() if k != "name"})
        bare_model.load_state_dict(trainer.model.state_dict())
        bare_optimizer = torch.optim.SGD(bare_model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
        generator = torch.Generator().manual_seed(0)
        trainer_times, bare_times = [], []
        for epoch in range(1, epochs + 1):  # interleave, so machine noise hits both alike
            start = time.perf_counter()
            trainer.train_one_epoch(epoch)
            trainer_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            bare_epoch(bare_model, bare_optimizer, x, y, batch_size, generator)
            bare_times.append(time.perf_counter() - start)
            start = time.perf_counter()
        eval_start = time.perf_counter()
        trainer.evaluate_epoch(epochs)
        eval_time = time.perf_counter() - eval_start
    n = len(y)
    # the first epoch warms up allocators and kernels: report the median of the rest
    trainer_s, bare_s = float(np.median(trainer_times[1:])), float(np.median(bare_times[1:]))
    return {"samples": n, "trainer_sps": n / trainer_s, "bare_sps": n / bare_s, "ratio": bare_s / trainer_s,
            "eval_s": eval_time}


def default_run_time(data_root: str, epochs: int) -> float:
    config = RunConfig.from_dict({
        "dataset": {"name": "mnist1d"}, "model": {"name": "cnn1d"}, "loss": {"name": "focal", "gamma": 3},
        "device": "cpu",
        "recipe": {"epochs": epochs, "batch_size": 128, "lr_milestones": [epochs // 2, 3 * epochs // 4],
                   "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 5e-4}},
    })
    with tempfile.TemporaryDirectory() as run_dir:
        start = time.perf_counter()
        train_run(config, run_dir, data_root=data_root, progress=False)
        return time.perf_counter() - start


def diagnostics_cost(data_root: str, epochs: int) -> dict:
    """What mukhoti2020's Fig 4b-d and Fig 10 logging costs, on the default config's mukhoti2020
    setting (MNIST-1D 1k, 1-D CNN width 32, batch 64, FL-3, summed and clipped step).

    An epoch here is ~50 ms, so machine noise (±5 %) swamps a whole-epoch comparison; the costs
    are timed directly instead and shown as shares of the median epoch (training + evaluation):
    the feature-norm hook's own time per training epoch (Fig 10, every epoch), and the
    per-sample gradient norms of a recording epoch (Fig 4b-d, at ``gradient_norm_epochs`` only;
    they share the training-set pass of the reliability bins), also spread over the default
    recipe's 40 epochs with its 3 recording epochs. The paired whole-epoch ratio with the hook
    removed is printed too, as a check.
    """
    recipe = {"epochs": epochs, "batch_size": 64, "augmentation": "none", "loss_reduction": "sum",
              "grad_clip_norm": 2.0, "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 5e-4}}
    raw = {"dataset": {"name": "mnist1d", "n_samples": 4000, "val_size": 1000, "test_size": 2000},
           "model": {"name": "cnn1d", "width": 32}, "loss": {"name": "focal", "gamma": 3.0}, "device": "cpu"}
    config = RunConfig.from_dict({**raw, "recipe": recipe})
    with tempfile.TemporaryDirectory() as with_dir, tempfile.TemporaryDirectory() as without_dir:
        logged = Trainer(config, with_dir, data_root=data_root, progress=False)
        bare = Trainer(config, without_dir, data_root=data_root, progress=False)
        bare.last_layer_inputs.handle.remove()
        watcher = logged.last_layer_inputs
        watcher.handle.remove()
        hook_seconds = [0.0]

        def timed_hook(module, inputs, output):
            start = time.perf_counter()
            watcher._hook(module, inputs, output)
            hook_seconds[0] += time.perf_counter() - start

        models.last_layer(logged.model).register_forward_hook(timed_hook)
        ratios, train_times, eval_times, hook_shares = [], [], [], []
        for epoch in range(1, epochs + 1):
            seconds = {}
            hook_seconds[0] = 0.0
            for trainer in ((logged, bare) if epoch % 2 else (bare, logged)):
                start = time.perf_counter()
                trainer.train_one_epoch(epoch)
                seconds[id(trainer)] = time.perf_counter() - start
            ratios.append(seconds[id(logged)] / seconds[id(bare)])
            train_times.append(seconds[id(logged)])
            hook_shares.append(hook_seconds[0])
            start = time.perf_counter()
            logged.evaluate_epoch(epoch)
            eval_times.append(time.perf_counter() - start)
        with watcher.keeping() as kept:
            logits = logged.predict(logged.normalised_train_x())
        gradient_times = []
        for _ in range(20):
            start = time.perf_counter()
            last_layer_gradient_norms(logits, kept.features, logged.train_y, logged.loss_fn)
            gradient_times.append(time.perf_counter() - start)
    epoch_s = float(np.median(train_times[1:])) + float(np.median(eval_times[1:]))
    gradient_s = float(np.median(gradient_times))
    return {"feature_norm_cost": float(np.median(hook_shares[1:])) / epoch_s,
            "paired_ratio": float(np.median(ratios[1:])) - 1.0, "epoch_s": epoch_s,
            "gradient_norm_cost": gradient_s / epoch_s, "gradient_norm_cost_40": 3 * gradient_s / (40 * epoch_s),
            "samples": int(logged.train_y.shape[0])}


def main(quick: bool = False) -> None:
    _register_bench_dataset()
    data_root = tempfile.mkdtemp(prefix="focalcal-bench-data-")
    epochs = 3 if quick else 6
    cases = [
        ("ResNet-20, 32x32", {"name": BENCH_IMAGES, "n_samples": 1024 if quick else 4096}, {"name": "resnet20"}, 128),
        ("1-D CNN, MNIST-1D", {"name": "mnist1d", "n_samples": 4000 if quick else 20000}, {"name": "cnn1d"}, 128),
    ]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU; median of epochs 2..{epochs}")
    print(f"{'case':<20} {'train samples':>13} {'trainer /s':>11} {'bare loop /s':>13} {'ratio':>6} {'eval s':>7}")
    for label, dataset, model, batch_size in cases:
        r = compare(dataset, model, batch_size, epochs, data_root)
        print(f"{label:<20} {r['samples']:>13} {r['trainer_sps']:>11.0f} {r['bare_sps']:>13.0f} "
              f"{r['ratio']:>6.3f} {r['eval_s']:>7.2f}")
    cost = diagnostics_cost(data_root, 4 if quick else 12)
    print(f"mukhoti2020 Fig 10 logging (last-layer feature norm, every epoch): {100 * cost['feature_norm_cost']:.2f} % "
          f"of an epoch ({cost['epoch_s'] * 1e3:.0f} ms, {cost['samples']} samples, training + evaluation); "
          f"whole-epoch paired check {100 * cost['paired_ratio']:+.1f} % (noise ±5 %)")
    print(f"mukhoti2020 Fig 4b-d logging (per-sample gradient norms, at gradient_norm_epochs only): "
          f"{100 * cost['gradient_norm_cost']:.2f} % of a recording epoch; {100 * cost['gradient_norm_cost_40']:.3f} % "
          f"of the default recipe's 40 epochs (3 recording epochs)")
    run_epochs = 5 if quick else 30
    seconds = default_run_time(data_root, run_epochs)
    print(f"one default-style run (MNIST-1D 20k, 1-D CNN, focal γ=3, {run_epochs} epochs, with per-epoch "
          f"evaluation and checkpoints): {seconds:.1f} s")


if __name__ == "__main__":
    main()
