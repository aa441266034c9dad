"""A run's trainer, chosen by its data set, and what the jobs do with it: train a run, restore a
finished one, re-dump its logits.

:class:`~focalcal.training.trainer.Trainer` trains every classification and segmentation run;
:class:`~focalcal.training.translation.TranslationTrainer` (the same loop, checkpoint and
health) a translation corpus's.
"""

from __future__ import annotations

from pathlib import Path

from focalcal import catalog
from focalcal.training.config import RunConfig
from focalcal.training.trainer import Trainer
from focalcal.training.translation import TranslationTrainer


def trainer_for(config: RunConfig, run_dir, data_root="data", progress: bool | None = None) -> Trainer:
    """The run's trainer: :class:`Trainer`, or for a translation corpus its
    :class:`~focalcal.training.translation.TranslationTrainer` (same loop, checkpoint and health)."""
    if catalog.is_translation(config.dataset):
        return TranslationTrainer(config, run_dir, data_root=data_root, progress=progress)
    return Trainer(config, run_dir, data_root=data_root, progress=progress)


def train_run(config: RunConfig, run_dir, data_root="data", progress: bool | None = None, export: bool = True) -> Trainer:
    """Train (or resume) one run to completion and, by default, dump its logits (token_logits.npz
    for a translation run)."""
    trainer = trainer_for(config, run_dir, data_root=data_root, progress=progress)
    trainer.fit()
    if export:
        trainer.export_logits()
    return trainer


def load_finished_run(config: RunConfig, run_dir, data_root="data") -> Trainer:
    """A Trainer restored from a finished run's checkpoint (no training), for what reads the model."""
    trainer = trainer_for(config, run_dir, data_root=data_root, progress=False)
    if not trainer.resume_if_possible():
        raise FileNotFoundError(f"no checkpoint at {trainer.paths.checkpoint}; train the run first")
    if not trainer.finished:
        raise RuntimeError(
            f"{trainer.paths.checkpoint} holds {trainer.epochs_done}/{config.recipe.epochs} epochs; finish training first"
        )
    return trainer


def export_run_logits(config: RunConfig, run_dir, data_root="data") -> Path:
    """Re-dump ``logits.npz`` from a finished run's checkpoint without training."""
    return load_finished_run(config, run_dir, data_root).export_logits()
