"""Training engine: one loop for every run, resumable, with per-epoch diagnostics and logits dump."""

from focalcal.training.config import OptimizerConfig, Recipe, RunConfig
from focalcal.training.segmentation_eval import evaluate_segmentation
from focalcal.training.trainer import TrainingDiverged, Trainer, export_run_logits, load_finished_run, train_run

__all__ = ["OptimizerConfig", "Recipe", "RunConfig", "Trainer", "TrainingDiverged", "evaluate_segmentation",
           "export_run_logits", "load_finished_run", "train_run"]
