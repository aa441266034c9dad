"""Training engine: one loop for every run, resumable, with per-epoch diagnostics and logits dump.

The names below load on first use, so that the torch-free submodules (``health``: run
statuses, read by the report and the Snakefile) import without torch.
"""

from importlib import import_module

_EXPORTS = {
    "OptimizerConfig": "config", "Recipe": "config", "RunConfig": "config",
    "evaluate_segmentation": "segmentation_eval",
    "TrainingDiverged": "trainer", "Trainer": "trainer", "export_run_logits": "runs", "load_finished_run": "runs",
    "train_run": "runs", "TranslationTrainer": "translation",
}

__all__ = ["OptimizerConfig", "Recipe", "RunConfig", "Trainer", "TrainingDiverged", "TranslationTrainer",
           "evaluate_segmentation",
           "export_run_logits", "load_finished_run", "train_run"]


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
