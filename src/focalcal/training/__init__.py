"""Training engine: one loop for every run, resumable, with per-epoch diagnostics and logits dump."""

from focalcal.training.config import OptimizerConfig, Recipe, RunConfig
from focalcal.training.trainer import TrainingDiverged, Trainer, export_run_logits, train_run

__all__ = ["OptimizerConfig", "Recipe", "RunConfig", "Trainer", "TrainingDiverged", "export_run_logits", "train_run"]
