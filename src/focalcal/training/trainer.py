"""One training loop for every classification run of the workflow.

Data sets are held as tensors on the training device and augmented there
(cifar10-airbench style), so there is no DataLoader in the hot path. Each epoch draws its
randomness from (seed, epoch), and the checkpoint written atomically at the end of every
epoch holds model, optimiser, LR schedule and loss state: a killed run resumes where it
stopped and, on CPU, ends with bit-identical logits. On a GPU the checkpoint is copied to the
CPU at the end of the epoch and written by a background thread while the next epoch trains
(:class:`~focalcal.training.checkpoint.BackgroundWriter`); the trainer waits for it before the
next write, when ``fit`` returns or raises, and before anything reads it. On the CPU it is
written in place (a writer thread would share the training's own cores).

Each epoch's wall seconds per phase (:class:`EpochClock`) are kept in :attr:`Trainer.timings`:
what ``python -m bench gpu`` reports of a real run's epoch besides its step. What a run is
built from (data set, model, loss, optimisers, schedule) is :mod:`focalcal.training.factories`'s.
"""

from __future__ import annotations

import contextlib
import platform
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from focalcal import data as data_lib
from focalcal import losses as loss_lib
from focalcal import models as model_lib
from focalcal.core import pinned_numerics
from focalcal.files.artefacts import atomic_savez, atomic_torch_save, atomic_write_json, atomic_write_text
from focalcal.training.averaging import CheckpointAverage
from focalcal.training.checkpoint import (
    BackgroundWriter,
    cpu_snapshot,
    final_weights,
    foreign_checkpoint,
    load_checkpoint,
)
from focalcal.training.config import PER_BATCH_SCHEDULES, RunConfig
from focalcal.training.device import DeviceSetup, choose_device, epoch_seed, seed_everything
from focalcal.training.diagnostics import (
    IGNORE_INDEX,
    LastLayerInputs,
    last_layer_gradient_norms,
    split_statistics,
    training_reliability,
    weight_norm,
)
from focalcal.training.factories import (
    build_embedding_optimizer,
    build_loss,
    build_model,
    build_optimizer,
    build_scheduler,
    load_dataset,
    resolve_augmentation,
)
from focalcal.training.health import assess_health
from focalcal.training.lock import RunLock
from focalcal.training.progress import Progress, log
from focalcal.training.run_files import CHECKPOINT_SHA256, RunPaths, checkpoint_sha256, logits_record
from focalcal.training.step import (
    COMPILED_MODEL_MODES,
    TrainStep,
    current_lr,
    descended,
    optimizer_options,
    plan_compile,
)

# Inputs with at most this many features are dumped with the logits (for scores-vs-x plots).
LOW_DIMENSIONAL = 2


class TrainingDiverged(RuntimeError):
    """The loss became NaN/Inf; the message names epoch and batch."""


#: The phases of an epoch :class:`EpochClock` times, in the order they run.
PHASES = ("train", "evaluate", "diagnostics", "checkpoint")


class EpochClock:
    """Wall seconds per phase of one epoch (:data:`PHASES`, and ``other``: the rest of the epoch).

    :meth:`lap` charges the time since the last lap to a phase. Each phase already ends in a read
    of its results on the host (the epoch's totals, the logits, the weight norm, the checkpoint's
    copy), so the GPU has nothing queued there; on CUDA the lap synchronises anyway, to charge
    work to the phase that queued it, at the cost of a sync with nothing left to wait for. On the
    CPU it reads the clock only."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.started = self.last = time.perf_counter()
        self.seconds = dict.fromkeys((*PHASES, "other"), 0.0)

    def lap(self, phase: str) -> None:
        if self.cuda:
            torch.cuda.synchronize()
        now = time.perf_counter()
        self.seconds[phase] += now - self.last
        self.last = now

    def finish(self, epoch: int) -> dict:
        """The epoch's timings: each phase, ``other`` (the bookkeeping between them, and any time
        no lap charged) and ``total`` (seconds)."""
        total = time.perf_counter() - self.started
        timed = sum(self.seconds[phase] for phase in PHASES)
        return {"epoch": epoch, **self.seconds, "other": max(0.0, total - timed), "total": total}


class Trainer:
    """Train one run; ``fit()`` resumes from the run directory's checkpoint when there is one."""

    #: One dict per epoch this process trained: wall seconds per phase (:meth:`EpochClock.finish`),
    #: and ``checkpoint_write``, the seconds of the checkpoint's write in the background thread
    #: (overlapping the next epoch). Set per trainer when it first trains.
    timings: list[dict]
    _clock: EpochClock | None = None  # the running epoch's, while fit() trains it

    @property
    def _writer(self) -> BackgroundWriter:
        """The checkpoint's writer (made on first use, so subclasses with their own ``__init__`` get one)."""
        writer = self.__dict__.get("_checkpoint_writer")
        if writer is None:
            on_gpu = getattr(getattr(self, "setup", None), "device", torch.device("cpu")).type == "cuda"
            writer = self.__dict__["_checkpoint_writer"] = BackgroundWriter(background=on_gpu)
        return writer

    def __init__(self, config: RunConfig, run_dir, data_root="data", progress: bool | None = None):
        self.config = config
        self.paths = RunPaths(Path(run_dir))
        self.data_root = Path(data_root)
        self.progress = progress
        self.setup: DeviceSetup = choose_device(config.device)
        seed_everything(config.seed)
        self.dataset = load_dataset(config, self.data_root)
        device = self.setup.device
        augmentation = resolve_augmentation(config.recipe.augmentation, self.dataset.meta)
        # None where it changes no input (a preset's or a data set's "none")
        self.augmentation = augmentation if data_lib.augment.changes_inputs(augmentation) else None
        mean, std = self.dataset.meta.get("mean"), self.dataset.meta.get("std")
        # mean and std on the device, checked once: a batch is normalised with no copy and no read-back
        self.normalise = data_lib.augment.Normaliser(mean, std, device)
        # Augmented training images stay un-normalised so that crop padding is black, as in the
        # papers; without augmentation they are normalised once here, like val/test.
        self.train_x, self.train_y = (t.to(device) for t in self.dataset.train)
        if not self.augmentation:
            self.train_x = self.normalise(self.train_x)
        self.eval_splits = {
            split: (self.normalise(getattr(self.dataset, split).x.to(device)), getattr(self.dataset, split).y.to(device))
            for split in ("val", "test")
        }
        self.model = build_model(config, self.dataset)
        self.model.to(device)
        # the architecture's precision and memory format on CUDA (its catalog entry); run.json records them
        self.setup = self.setup.for_architecture(config.model["name"], self.train_x.dim() == 4)
        for split_x in [self.train_x] + [x for x, _ in self.eval_splits.values()]:  # once per data set, not per batch
            _call_hook(self.model, "check_inputs", split_x)
        # before compile, so the compiled graph runs the hook too
        self.last_layer_inputs = LastLayerInputs(model_lib.last_layer(self.model))
        if self.setup.channels_last and self.train_x.dim() == 4:
            self.model.to(memory_format=torch.channels_last)
        # how the step runs (focalcal.training.step): the speed, never the numbers
        self.compile_plan = plan_compile(config.compile, device, config.recipe.optimizer.name)
        self.forward = torch.compile(self.model) if self.compile_plan.mode in COMPILED_MODEL_MODES else self.model
        self.loss_fn = build_loss(config, self.dataset)
        # targets the data marks as unlabelled (segmentation void pixels, a tree batch's padding nodes)
        self.ignore_index = int(self.dataset.meta.get("ignore_index", IGNORE_INDEX))
        if isinstance(self.loss_fn, torch.nn.Module):
            self.loss_fn.to(device)
        if config.recipe.loss_reduction != "mean" and not getattr(self.loss_fn, "mean_over_elements", True):
            raise ValueError(f"recipe.loss_reduction = {config.recipe.loss_reduction!r} sums a per-sample (per-pixel) "
                             f"loss over the batch, but loss {config.loss['name']!r} is a set-level loss with no "
                             f"per-element sum; use 'mean'")
        # Tree models train on every node's label, which may have a class the task lacks (SST's
        # neutral nodes): the training targets' class count comes from the data set.
        train_classes = int(self.dataset.meta.get("train_node_classes") or self.dataset.num_classes)
        _call_hook(self.loss_fn, "set_training_targets", self.train_y, train_classes)
        if isinstance(self.loss_fn, loss_lib.Loss):  # check every target once, not once per batch
            ignore_index = self.loss_fn.ignore_index
            for split, targets in [("train", self.train_y)] + [(s, y) for s, (_, y) in self.eval_splits.items()]:
                try:
                    classes = train_classes if split == "train" else self.dataset.num_classes
                    loss_lib.check_target_values(targets, classes, ignore_index)
                except ValueError as error:
                    raise ValueError(f"dataset {config.dataset['name']!r}, {split} split: {error}") from None
            self.loss_fn.validate_inputs = False
        self.optimizer = build_optimizer(self.model, config, **optimizer_options(
            config.recipe.optimizer.name, device, self.compile_plan.mode))
        self.embedding_optimizer = build_embedding_optimizer(  # stateless: not checkpointed
            self.model, config, **optimizer_options("sgd", device, self.compile_plan.mode))
        self.scheduler = build_scheduler(self.optimizer, config)
        # The step calls through the trainer's forward and loss_fn, so a wrapper set on them takes effect.
        self.step = TrainStep(self.model, lambda inputs: self.forward(inputs),
                              lambda logits, targets: self.loss_fn(logits, targets), self.optimizer, self.objective,
                              self.setup.autocast_dtype, grad_clip_norm=config.recipe.grad_clip_norm,
                              ignore_index=self.ignore_index, plan=self.compile_plan, device=device,
                              embedding_optimizer=self.embedding_optimizer)
        self.history: list[dict] = []
        self.reliability: list[pd.DataFrame] = []
        self.gradient_norms: list[pd.DataFrame] = []
        self._tables_written: dict[Path, int] = {}  # record file -> tables in it, as this process last wrote it
        self.epochs_done = 0
        self.stopped_early = False
        self.finished_at: str | None = None  # when the last epoch ended; kept in the checkpoint
        # The best epoch so far and its weights, for early stopping or ``recipe.select``.
        self.best = {"epoch": 0, "val_loss": float("inf"), "val_error": float("inf"), "model": None}
        # focalcal.training.health's verdict on the test predictions last exported or evaluated
        # (export_logits, segmentation_eval.evaluate_segmentation); run.json records it.
        self.health: dict | None = None
        self.averaging = CheckpointAverage.for_recipe(config.recipe)  # recipe.average_checkpoints, or None
        self.timings: list[dict] = []  # (see the class attribute's note)

    # ------------------------------------------------------------------ state
    def state(self) -> dict:
        return {
            "fingerprint": self.config.fingerprint(),
            "epochs_done": self.epochs_done,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "loss": self.loss_fn.state_dict() if isinstance(self.loss_fn, torch.nn.Module) else {},
            "loss_extra": _loss_extra_state(self.loss_fn),
            "history": self.history,
            "stopped_early": self.stopped_early,
            "finished_at": self.finished_at,
            "best": self.best,
            "reliability": [t.to_dict("list") for t in self.reliability],
            "gradient_norms": [t.to_dict("list") for t in self.gradient_norms],
            **({"snapshots": self.averaging.state()} if self.averaging else {}),  # recipe.average_checkpoints
        }

    def load_state(self, state: dict) -> None:
        foreign = foreign_checkpoint(state, self.config)
        if foreign:
            raise ValueError(f"{self.paths.checkpoint} {foreign}; refusing to resume it with this config — "
                             "delete the run directory or fix the config")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if isinstance(self.loss_fn, torch.nn.Module):
            self.loss_fn.load_state_dict(state["loss"])
        _set_loss_extra_state(self.loss_fn, state.get("loss_extra", {}))
        self.history = list(state["history"])
        self.reliability = [pd.DataFrame(t) for t in state["reliability"]]
        self.gradient_norms = [pd.DataFrame(t) for t in state.get("gradient_norms", [])]
        self.epochs_done = int(state["epochs_done"])
        self.stopped_early = bool(state.get("stopped_early", False))
        self.finished_at = state.get("finished_at") or (_modified_at(self.paths.checkpoint) if self.finished else None)
        self.best = {**self.best, **state.get("best", {})}
        if self.averaging:
            self.averaging.load_state(state.get("snapshots", []))

    def resume_if_possible(self) -> bool:
        self.wait_for_checkpoint()
        if not self.paths.checkpoint.exists():
            return False
        self.load_state(load_checkpoint(self.paths.checkpoint, self.setup.device))
        return True

    # ------------------------------------------------------------------ loop
    def fit(self, stop_after_epoch: int | None = None) -> list[dict]:
        """Train to ``recipe.epochs`` (or stop after ``stop_after_epoch``, for tests), resuming if possible."""
        with RunLock(self.paths.root):
            try:
                history = self._fit_locked(stop_after_epoch)
            except BaseException:
                self._wait_quietly()  # the last complete checkpoint on disk before the error leaves
                raise
            self.wait_for_checkpoint()
            return history

    def _fit_locked(self, stop_after_epoch: int | None) -> list[dict]:
        epochs = self.config.recipe.epochs
        self.__dict__.setdefault("timings", [])
        if self.resume_if_possible():
            log(f"[{self.paths.root}] resuming after epoch {self.epochs_done}/{epochs}")
        if self.finished:
            # A re-planned job on a finished run (changed code, -f, a kill after the last
            # epoch): Snakemake deleted the declared outputs, so write them back from the
            # checkpoint instead of training.
            self.write_records()
            log(f"[{self.paths.root}] already trained ({self.epochs_done} epochs); records re-written from the checkpoint")
            return self.history
        wall_start = time.monotonic() - (self.history[-1]["wall_time_s"] if self.history else 0.0)
        while not self.finished:
            epoch = self.epochs_done + 1
            epoch_start = time.monotonic()
            clock = self._clock = EpochClock(self.setup.device)
            row = {"epoch": epoch, "lr": current_lr(self.optimizer)}
            row.update(self.train_one_epoch(epoch))
            clock.lap("train")
            row.update(self.evaluate_epoch(epoch))
            clock.lap("evaluate")
            row["weight_norm"] = self.last_layer_weight_norm()
            clock.lap("diagnostics")
            row["epoch_time_s"] = time.monotonic() - epoch_start
            row["wall_time_s"] = time.monotonic() - wall_start
            if not steps_per_batch(self.config):  # a per-batch schedule steps in train_one_epoch
                self.scheduler.step()
            self.history.append(row)
            self.epochs_done = epoch
            self.track_best(row)
            if self.finished:
                self.finished_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
                if self.averaging:
                    self.averaging.finish(self.model)
            clock.lap("other")  # the schedule, the history, the best epoch, the averaged weights
            self.save()
            clock.lap("checkpoint")
            self._clock = None
            self.timings.append(clock.finish(epoch))
            log(
                f"[{self.paths.root}] epoch {epoch}/{epochs} lr {row['lr']:.3g} "
                f"train loss {row['train_loss']:.4f} err {row['train_error']:.4f} | "
                f"val nll {row['val_nll']:.4f} err {row['val_error']:.4f} ece {row['val_ece']:.4f} "
                f"({row['epoch_time_s']:.1f} s)"
            )
            if stop_after_epoch is not None and epoch >= stop_after_epoch:
                break
        if self.stopped_early:
            log(f"[{self.paths.root}] early stop after epoch {self.epochs_done}: best val loss at epoch {self.best['epoch']}")
        return self.history

    def last_layer_weight_norm(self) -> float:
        """The norm of the layer that maps features to logits (mukhoti2020 Fig 3)."""
        return weight_norm(model_lib.last_layer(self.model))

    @property
    def finished(self) -> bool:
        return self.stopped_early or self.epochs_done >= self.config.recipe.epochs

    def track_best(self, row: dict) -> None:
        """Keep the weights a finished run reports when they are not the last epoch's.

        Early stopping (hossain2021 §4.2): the epoch of the lowest validation loss, and stop when
        it has not improved for ``patience`` epochs. ``recipe.select = "best_val_accuracy"``
        (mukhoti2020 App. D, text models): the first epoch of the lowest validation error. The
        kept weights are in the checkpoint; the logits are dumped from them.
        """
        recipe = self.config.recipe
        if recipe.early_stopping_patience is not None:
            if row["val_loss"] < self.best["val_loss"]:
                self._keep_best(row)
            elif row["epoch"] - self.best["epoch"] >= recipe.early_stopping_patience:
                self.stopped_early = True
        elif recipe.select == "best_val_accuracy" and row["val_error"] < self.best["val_error"]:
            self._keep_best(row)

    def _keep_best(self, row: dict) -> None:
        self.best = {"epoch": row["epoch"], "val_loss": row["val_loss"], "val_error": row["val_error"],
                     "model": {k: v.detach().clone() for k, v in self.model.state_dict().items()}}

    def train_one_epoch(self, epoch: int) -> dict:
        recipe = self.config.recipe
        seed = epoch_seed(self.config.seed, epoch)
        torch.manual_seed(seed)  # dropout and any other global-RNG use inside the epoch
        device = self.setup.device
        generator = torch.Generator(device=device).manual_seed(seed)
        _call_hook(self.loss_fn, "set_epoch", epoch - 1, recipe.epochs)
        self.model.train()
        n = self.train_y.shape[0]
        order = torch.randperm(n, generator=generator, device=device)
        n_batches = steps_per_epoch(n, recipe)
        progress = Progress(n_batches, f"epoch {epoch}/{recipe.epochs}", self.progress)
        self.step.begin_epoch()
        for batch in range(n_batches):
            index = order[batch * recipe.batch_size : (batch + 1) * recipe.batch_size]
            inputs, targets = self.train_x[index], self.train_y[index]
            if self.augmentation:
                inputs = data_lib.apply_augmentation(inputs, self.augmentation, generator=generator)
                inputs = self.normalise(inputs)
            if self.setup.channels_last and inputs.dim() == 4:
                inputs = inputs.contiguous(memory_format=torch.channels_last)
            self.step.step(inputs, targets)
            self.after_step((epoch - 1) * n_batches + batch + 1)
            if steps_per_batch(self.config):
                self.scheduler.step()
            progress.update()
        progress.close()
        # The epoch's one read-back: a non-finite loss stops the run here, naming its first batch
        # (the steps after it ran on non-finite weights; the checkpoint of the epoch before is kept).
        totals = self.check_epoch_totals(self.step.end_epoch().read(), epoch, n_batches)
        stepped = self.train_y[order[:n_batches * recipe.batch_size]] if recipe.drop_last else self.train_y
        labelled = int((stepped != self.ignore_index).sum())  # samples, pixels or tree nodes
        return {
            "train_loss": totals["loss_sum"] / stepped.shape[0],
            "train_nll": totals["nll_sum"] / labelled,
            "train_error": 1.0 - totals["correct"] / labelled,
            "train_feature_norm": self.last_layer_inputs.epoch_mean_norm(),
        }

    def after_step(self, step: int) -> None:
        """After optimiser step ``step`` (1-based over the run): a snapshot when checkpoint averaging is due."""
        if self.averaging:
            self.averaging.after_step(step, self.model)

    def objective(self, loss: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """What the step descends (:func:`focalcal.training.step.descended`)."""
        return descended(loss, targets, self.config.recipe.loss_reduction, getattr(self.loss_fn, "ignore_index", None))

    def check_epoch_totals(self, totals: dict, epoch: int, n_batches: int) -> dict:
        """The epoch's totals, or :class:`TrainingDiverged` naming the first batch whose loss or
        logits were non-finite."""
        if totals["first_bad"] >= 0:
            what = ("the model's logits became non-finite" if totals["bad_logits"]
                    else f"the loss became {totals['bad_loss']}")
            raise self._diverged(what, epoch, totals["first_bad"], n_batches)
        return totals

    def _diverged(self, what: str, epoch: int, batch: int, n_batches: int) -> TrainingDiverged:
        return TrainingDiverged(
            f"{what} at epoch {epoch}, batch {batch + 1}/{n_batches} (loss {self.config.loss}, "
            f"lr {current_lr(self.optimizer):.3g}); the checkpoint of epoch {epoch - 1} is kept"
        )

    def normalised_train_x(self) -> torch.Tensor:
        """The training inputs as the model sees them, before augmentation."""
        return self.normalise(self.train_x) if self.augmentation else self.train_x

    @torch.no_grad()
    def predict(self, inputs: torch.Tensor) -> torch.Tensor:
        """Logits of the model in eval mode, float32 on the CPU (:meth:`predict_on_device`, read back once)."""
        return self.predict_on_device(inputs).cpu()

    @torch.no_grad()
    def predict_on_device(self, inputs: torch.Tensor) -> torch.Tensor:
        """Logits of the model in eval mode, float32, left on the training device: batches of
        ``eval_batch_size`` in the training step's precision (autocast dtype) and memory format
        (channels-last image batches), with no read-back per batch."""
        self.model.eval()
        outputs = []
        for start in range(0, inputs.shape[0], self.config.recipe.eval_batch_size):
            chunk = inputs[start : start + self.config.recipe.eval_batch_size].to(self.setup.device)
            if self.setup.channels_last and chunk.dim() == 4:
                chunk = chunk.contiguous(memory_format=torch.channels_last)
            with self.setup.autocast():
                outputs.append(self.forward(chunk).float())
        return torch.cat(outputs)

    @torch.no_grad()
    def batched_loss(self, logits: torch.Tensor, labels: torch.Tensor) -> float:
        """The training objective on a whole split, averaged over eval-size batches (MMCE is O(batch²)).

        The batches' ``loss × size`` are summed in float64 on the device in batch order (the
        double arithmetic of summing them as Python floats) and read back once."""
        size = self.config.recipe.eval_batch_size
        total = torch.zeros((), dtype=torch.float64, device=self.setup.device)
        for start in range(0, labels.shape[0], size):
            part = slice(start, start + size)
            value = self.loss_fn(logits[part].to(self.setup.device), labels[part].to(self.setup.device))
            total = total + value.detach().double() * labels[part].shape[0]
        return float(total) / labels.shape[0]

    def lap(self, phase: str) -> None:
        """Charge the time since the last lap to ``phase`` of the running epoch (:class:`EpochClock`), if any."""
        if self._clock is not None:
            self._clock.lap(phase)

    def evaluate_epoch(self, epoch: int) -> dict:
        row = {}
        for split, (inputs, labels) in self.eval_splits.items():
            on_device = self.predict_on_device(inputs)
            logits = on_device.cpu()
            row.update(split_statistics(logits, labels.cpu(), self.batched_loss(on_device, labels), split))
            if split == "val":
                _call_hook(self.loss_fn, "update_from_validation", on_device, labels.to(self.setup.device))
        recipe = self.config.recipe
        # both compare the eval-mode outputs on the training set with its labels
        reliability = epoch in recipe.reliability_epochs and self.predicts_training_labels
        gradients = epoch in recipe.gradient_norm_epochs and self.records_gradient_norms
        if reliability or gradients:  # one pass over the training set serves both
            self.lap("evaluate")
            # the features are kept (on the device) only when the gradient norms need them
            with self.last_layer_inputs.keeping() if gradients else contextlib.nullcontext() as kept:
                train_logits = self.predict_on_device(self.normalised_train_x())
            labels = self.train_y.cpu()
            if reliability:
                self.reliability.append(training_reliability(train_logits.cpu(), labels, epoch, recipe.reliability_bins))
            if gradients:
                norms = last_layer_gradient_norms(train_logits, kept.features.to(self.setup.device),
                                                  self.train_y, self.loss_fn)
                self.gradient_norms.append(pd.DataFrame({"epoch": epoch, "gradient_norm": norms.cpu().numpy()}))
            self.lap("diagnostics")
        return row

    @property
    def records_gradient_norms(self) -> bool:
        """Per-sample last-layer gradient norms exist for classifiers trained on one label per
        sample with a loss of per-sample terms; other runs of a recipe with
        ``gradient_norm_epochs`` skip them."""
        return self.is_classifier and self.train_y.dim() == 1 and getattr(self.loss_fn, "per_sample", False)

    @property
    def is_classifier(self) -> bool:
        """One label per evaluated sample (a segmentation run has one per pixel): the run exports logits."""
        return self.dataset.meta.get("task", "classification") == "classification"

    @property
    def exports_logits(self) -> bool:
        """Whether the run's next job publishes logits the training job staged (else a segmentation evaluation)."""
        return self.is_classifier

    def split_sizes(self) -> dict[str, int]:
        """Samples per split, for ``run.json``."""
        return {s: int(getattr(self.dataset, s)[1].shape[0]) for s in ("train", "val", "test")}

    @property
    def predicts_training_labels(self) -> bool:
        """Whether the model's eval-mode outputs on the training set line up with its labels: per
        sample or per pixel, but not for a tree model (trained per node, predicting the root)."""
        return not self.is_classifier or self.train_y.dim() == 1

    # ------------------------------------------------------------------ outputs
    def save(self) -> None:
        """The checkpoint, then the per-epoch records derived from it. On a GPU (``background_checkpoint``)
        the state is copied to the CPU here (:func:`~focalcal.training.checkpoint.cpu_snapshot`),
        then serialised and written atomically by a background thread while the next epoch trains;
        on the CPU it is written here, from the live state: there the writer would share the
        training's cores, and the copy would only add work. The write before it is waited for
        first, and any error it raised is raised here."""
        self.paths.root.mkdir(parents=True, exist_ok=True)
        self.wait_for_checkpoint()
        state = cpu_snapshot(self.state()) if self.background_checkpoint else self.state()
        records = (state["history"], list(self.reliability), list(self.gradient_norms))  # as of this epoch

        def write() -> None:
            atomic_torch_save(state, self.paths.checkpoint)
            self.write_records(*records)

        self._writer.submit(write)

    @property
    def background_checkpoint(self) -> bool:
        """Whether :meth:`save` writes the checkpoint in a background thread (the default on a GPU)."""
        return self._writer.background

    @background_checkpoint.setter
    def background_checkpoint(self, value: bool) -> None:
        self.wait_for_checkpoint()
        self._writer.background = bool(value)

    def wait_for_checkpoint(self) -> None:
        """Wait for the checkpoint being written, if any, and raise its error; its write's seconds
        go to its epoch's :attr:`timings` as ``checkpoint_write``."""
        seconds = self._writer.join()
        timings = self.__dict__.get("timings")
        if seconds is not None and timings and "checkpoint_write" not in timings[-1]:
            timings[-1]["checkpoint_write"] = seconds

    def _wait_quietly(self) -> None:
        """:meth:`wait_for_checkpoint` while another error leaves ``fit``: a failed write is logged, not raised over it."""
        try:
            self.wait_for_checkpoint()
        except Exception as error:  # noqa: BLE001  the error that stopped training is the one to raise
            log(f"[{self.paths.root}] the last checkpoint write failed too: {type(error).__name__}: {error}")

    def write_records(self, history=None, reliability=None, gradient_norms=None) -> None:
        """``history.csv`` (and the training reliability and gradient-norm tables), all read off the checkpoint's state.

        The two tables gain rows only at their recipe's epochs, so a file is rewritten only when
        its table grew since this process last wrote it, or is gone (a 40-epoch run writes each
        3 times, not 40).
        """
        history = self.history if history is None else history
        reliability = self.reliability if reliability is None else reliability
        gradient_norms = self.gradient_norms if gradient_norms is None else gradient_norms
        atomic_write_text(pd.DataFrame(history).to_csv(index=False), self.paths.history)
        for tables, path in ((reliability, self.paths.reliability), (gradient_norms, self.paths.gradient_norms)):
            if tables and (self._tables_written.get(path) != len(tables) or not path.exists()):
                atomic_write_text(pd.concat(tables).to_csv(index=False), path)
                self._tables_written[path] = len(tables)

    def export_logits(self, to: RunPaths | None = None) -> Path:
        """Write ``logits.npz`` (val/test logits and labels) and ``run.json``, which records the
        run's health (:mod:`focalcal.training.health`) judged on these test logits, into the run
        directory or ``to`` (the training job stages them: :mod:`focalcal.training.run_files`).

        The logits come from the final model, or from the best one when early stopping is on.
        """
        to = to or self.paths
        self.wait_for_checkpoint()  # run.json records the checkpoint's sha256
        self.use_final_weights()
        arrays = {}
        for split, (inputs, labels) in self.eval_splits.items():
            arrays[f"{split}_logits"] = self.predict(inputs).numpy().astype(np.float32)
            arrays[f"{split}_labels"] = labels.cpu().numpy().astype(np.int64)
        test_x = self.dataset.test.x
        if test_x[0].numel() <= LOW_DIMENSIONAL:  # 1-D inputs: figures plot scores against x
            arrays["test_inputs"] = test_x.cpu().numpy().astype(np.float32)
        posterior = self.dataset.meta.get("posterior")
        if posterior is not None:  # known class posterior η(x) (synthetic data): KL(η‖q) becomes measurable
            for split in ("val", "test"):
                arrays[f"{split}_posterior"] = np.asarray(posterior[split], dtype=np.float64)
        atomic_savez(to.logits, **arrays)
        test_logits = arrays["test_logits"]
        self.health = assess_health(self.history, arrays["test_labels"], test_logits.argmax(axis=1),
                                    self.dataset.num_classes, logits_finite=bool(np.isfinite(test_logits).all()),
                                    stopped_early=self.stopped_early)
        atomic_write_json({**self.run_info(), **logits_record(to.logits)}, to.info)
        return to.logits

    def use_final_weights(self) -> None:
        """The weights a finished run reports (:func:`~focalcal.training.checkpoint.final_weights`)."""
        self.model.load_state_dict(final_weights(self.state()))

    def run_info(self) -> dict:
        """The run's record (``run.json``); ``health`` is None until test predictions were assessed."""
        return {
            "config": self.config.to_dict(),
            "fingerprint": self.config.fingerprint(),
            CHECKPOINT_SHA256: checkpoint_sha256(self.paths.root),  # the weights these results come from
            "epochs_done": self.epochs_done,
            "stopped_early": self.stopped_early,
            "best_epoch": self.best["epoch"] or self.epochs_done,
            "split_hash": self.dataset.split_hash,
            "numerics": pinned_numerics.record(),  # what picked the CPU kernels (focalcal.core.pinned_numerics)
            "dataset": self.dataset.record(),
            "num_classes": self.dataset.num_classes,
            "split_sizes": self.split_sizes(),
            "parameters": sum(p.numel() for p in self.model.parameters()),
            "device": self.setup.describe(),
            "compile": self.step.plan.record(),  # the step's mode: asked for, used, and why (a failed capture too)
            "precision": self.setup.record(),  # autocast dtype and memory format that ran, and why
            "train_time_s": self.history[-1]["wall_time_s"] if self.history else 0.0,
            "versions": {
                "python": platform.python_version(),
                "torch": torch.__version__,
                "numpy": np.__version__,
                "focalcal": _focalcal_version(),
            },
            "host": platform.node(),
            "finished_at": self.finished_at,  # when training ended, not when this record was written
            "health": self.health,
            # the steps whose weights the reported ones average (recipe.average_checkpoints)
            **({"averaged_steps": self.averaging.steps} if self.averaging else {}),
            # text data sets: GloVe vectors or a random initialisation, in words (focalcal.data.text)
            **({"embedding_source": self.dataset.meta["embedding_source"]} if "embedding_source" in self.dataset.meta else {}),
        }

def steps_per_epoch(n: int, recipe) -> int:
    """Batches of an epoch over ``n`` training samples: the last one partial, or left out (``recipe.drop_last``)."""
    if not recipe.drop_last:
        return (n + recipe.batch_size - 1) // recipe.batch_size
    if n < recipe.batch_size:
        raise ValueError(f"recipe.drop_last: batch_size {recipe.batch_size} is more than the {n} training samples, "
                         "so every epoch would leave them all out")
    return n // recipe.batch_size



def steps_per_batch(config: RunConfig) -> bool:
    """Whether the run's LR schedule steps after every batch (else after every epoch)."""
    return config.recipe.lr_schedule in PER_BATCH_SCHEDULES




def _call_hook(loss_fn, hook: str, *args) -> None:
    method = getattr(loss_fn, hook, None)
    if callable(method):
        method(*args)


def _loss_extra_state(loss_fn) -> dict:
    getter = getattr(loss_fn, "extra_state", None)
    return getter() if callable(getter) else {}


def _set_loss_extra_state(loss_fn, state: dict) -> None:
    setter = getattr(loss_fn, "load_extra_state", None)
    if callable(setter) and state:
        setter(state)


def _modified_at(path: Path) -> str | None:
    """A checkpoint's modification time: when a checkpoint that predates ``finished_at`` had its last epoch written."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(path.stat().st_mtime)) if path.exists() else None


def _focalcal_version() -> str:
    import focalcal

    return focalcal.__version__
