"""What each workflow job does, as plain functions (the rule scripts only unpack ``snakemake``).

Training and export call the trainer; the trainer's checkpoint is deliberately *not* a
declared output of the training rule: Snakemake deletes a plain output before re-running its
job, and puts a kept() one (workflow/rules/common.smk) back as it was before a failed job, and
the checkpoint must keep the epochs of a killed, failed or re-triggered job so that the trainer
resumes from it (and a finished run "retrains" in no time).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from focalcal.files.artefacts import atomic_write_json, atomic_write_text, read_json
from focalcal.pipeline.plan import RUN_CONFIG
from focalcal.training.run_files import (
    SEGMENTATION_METRICS,
    SEGMENTATION_SAMPLES,
    DamagedCheckpointError,
    RunPaths,
    damaged_checkpoint_message,
    logits_record,
    publish_staged_segmentation,
    record_staging,
)


def prepare_dataset(spec: dict, data_root, download: bool, marker) -> dict:
    """Download (if allowed) or generate a dataset, check it loads, and write a summary marker."""
    from focalcal import data

    options = {key: value for key, value in spec.items() if key != "name"}
    dataset = data.load(spec["name"], root=str(data_root), download=download, **options)
    summary = dataset.record()
    atomic_write_text(json.dumps(summary, indent=1, sort_keys=True, default=str) + "\n", marker)
    return summary


def train(run_identity: dict, execution: dict, run_dir, data_root, threads: int, segmentation_bins: int = 15) -> None:
    """Write ``run_config.json``, then train (or resume) the run; a classifier's logits, or a
    segmentation run's test-fold evaluation with ``segmentation_bins`` ECE bins, are staged for
    the run's next job (:mod:`focalcal.training.run_files`), not published.

    ``run_identity`` (the rule's params) fixes the numbers; ``execution`` (device, compile) and
    ``segmentation_bins`` are read from the config by the job itself, so changing them never
    re-plans a finished run. On a finished run this re-writes the declared outputs from the
    checkpoint and trains nothing. The job stops itself if its Snakemake dies
    (``exit_when_workflow_dies``).
    """
    import time

    import torch

    from focalcal.training import RunConfig, train_run
    from focalcal.training.lock import refuse_if_trained_elsewhere
    from focalcal.training.orphan import exit_when_workflow_dies

    run_config = {**run_identity, **execution}
    config = RunConfig.from_dict(run_config)  # fails before anything is written if the config is bad
    refuse_if_trained_elsewhere(run_dir, "a second trainer would overwrite its files")  # before writing anything
    exit_when_workflow_dies()
    run_config_path = Path(run_dir) / RUN_CONFIG
    _write_run_config(run_config, run_config_path)
    torch.set_num_threads(max(1, int(threads)))
    trainer = train_run(config, run_dir, data_root=str(data_root), progress=False, export=False)
    # The declared outputs again if they went while training: a second Snakemake whose train rule
    # has plain outputs (another checkout's) deletes them before its job is refused.
    if not run_config_path.exists():
        _write_run_config(run_config, run_config_path)
    if not trainer.paths.history.exists():
        trainer.write_records()
    started = time.process_time()
    staged = trainer.paths.staged_export
    if trainer.exports_logits:  # logits.npz, or a translation run's token_logits.npz
        trainer.export_logits(to=staged)
        record_staging(run_dir, time.process_time() - started)
    else:
        _write_segmentation_evaluation(trainer, segmentation_bins, staged.root / SEGMENTATION_METRICS,
                                       staged.root / SEGMENTATION_SAMPLES, staged.info)
        record_staging(run_dir, time.process_time() - started, n_bins=int(segmentation_bins))


def _write_run_config(run_config: dict, path) -> None:
    """``run_config.json``: what determined the run (check_run_directories compares it)."""
    atomic_write_text(json.dumps(run_config, indent=1, sort_keys=True) + "\n", path)


def export_logits(run_dir, data_root, threads: int) -> None:
    """Publish ``logits.npz`` and ``run.json`` as the training job staged them, or, when they are
    missing or from another checkpoint, dump them from the run's finished checkpoint."""
    from focalcal.training.run_files import publish_staged_export

    _publish_or_dump(run_dir, data_root, threads, publish_staged_export, "logits")


def export_token_logits(run_dir, data_root, threads: int) -> None:
    """A translation run's :func:`export_logits`: publish the staged ``token_logits.npz`` and
    ``run.json``, or dump them from the finished checkpoint."""
    from focalcal.training.run_files import publish_staged_token_logits

    _publish_or_dump(run_dir, data_root, threads, publish_staged_token_logits, "token logits")


def _publish_or_dump(run_dir, data_root, threads: int, publish, what: str) -> None:
    """``publish`` what the training job staged; where it says why it cannot, dump it again from
    the run's checkpoint (the trainer writes a translation run's token logits itself)."""
    why_not = publish(run_dir)
    if not why_not:
        print(f"{run_dir}: published the {what} the training job staged")
        return
    print(f"{run_dir}: {why_not}; dumping the {what} from the checkpoint")
    import torch

    from focalcal.training import RunConfig, export_run_logits

    config = RunConfig.from_dict(read_json(Path(run_dir) / RUN_CONFIG))
    torch.set_num_threads(max(1, int(threads)))
    with _checkpoint_problems(run_dir):
        export_run_logits(config, run_dir, data_root=str(data_root))


@contextlib.contextmanager
def _checkpoint_problems(run_dir):
    """An unreadable or missing checkpoint becomes a :class:`DamagedCheckpointError` that says
    what the run keeps and the ways out."""
    from focalcal.files.artefacts import CorruptArtefactError
    from focalcal.training.checkpoint import UnreadableCheckpointError, UnsafeCheckpointError

    checkpoint = RunPaths(Path(run_dir)).checkpoint
    try:
        yield
    except (CorruptArtefactError, FileNotFoundError) as error:
        concerns_checkpoint = Path(getattr(error, "path", None) or getattr(error, "filename", None) or "") == checkpoint
        if not concerns_checkpoint and checkpoint.exists():
            raise
        problem = error.problem if isinstance(error, CorruptArtefactError) else "it is missing"
        raise DamagedCheckpointError(damaged_checkpoint_message(run_dir, problem)) from error
    except (UnreadableCheckpointError, UnsafeCheckpointError) as error:
        raise DamagedCheckpointError(damaged_checkpoint_message(run_dir, str(error).split(". Re-make it")[0])) from error


def import_logits(source, run_identity: dict, logits_path, info_path, run_config_path) -> dict:
    """An imported run: check a model's own logits file (:mod:`focalcal.logits_file`; nothing is
    written if it fails), then write the run's ``logits.npz`` (the checked arrays), its
    ``run.json`` (the source's path and sha256, the sizes, the health judged on the test
    logits) and ``run_config.json`` (the run's identity, which :func:`check_run_directories`
    compares). Returns the record."""
    import time

    import numpy as np

    from focalcal.files import sidecar
    from focalcal.files.artefacts import atomic_savez
    from focalcal.logits_file import CLASS_NAMES, REQUIRED_KEYS, read_logits
    from focalcal.training.health import assess_health

    logits = read_logits(source, inputs=run_identity["model"].get("inputs", "logits"))
    source = Path(source)
    files = sorted(source.glob("*.npy")) + sorted(source.glob("*.txt")) if source.is_dir() else [source]
    test_predictions = logits.test_logits.argmax(axis=1)
    record = {
        "config": run_identity,
        "imported_from": str(source),
        "source_sha256": {file.name: sidecar.digest_file(file).sha256 for file in files},
        "num_classes": logits.num_classes,
        "class_names": list(logits.class_names),
        "split_sizes": {"val": len(logits.val_labels), "test": len(logits.test_labels)},
        "device": "imported logits (not trained here)",
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        # no training history: collapse is judged on the test logits, convergence is not
        "health": assess_health([], logits.test_labels, test_predictions, logits.num_classes),
    }
    atomic_savez(logits_path, **{key: getattr(logits, key) for key in REQUIRED_KEYS},
                 **{CLASS_NAMES: np.asarray(logits.class_names)})
    record.update(logits_record(logits_path))
    atomic_write_json(record, info_path)
    _write_run_config(run_identity, run_config_path)
    return record


def evaluate_segmentation(run_dir, data_root, threads: int, metrics_path, samples_path, n_bins: int = 15,
                          info_path=None) -> None:
    """Score a finished segmentation run on its test split (IoU, Hausdorff, pixel accuracy and
    ECE), and keep a few test images with true and predicted masks; with ``info_path``, also
    write the run's record (what ``run.json`` holds for exported runs). Publishes what the
    training job staged when it matches the checkpoint and ``n_bins``; else evaluates from the
    checkpoint."""
    if info_path is not None:
        why_not = publish_staged_segmentation(run_dir, metrics_path, samples_path, info_path, n_bins)
        if not why_not:
            print(f"{run_dir}: published the evaluation the training job staged")
            return
        print(f"{run_dir}: {why_not}; evaluating from the checkpoint")
    import torch

    from focalcal.training import RunConfig, load_finished_run

    config = RunConfig.from_dict(read_json(Path(run_dir) / RUN_CONFIG))
    torch.set_num_threads(max(1, int(threads)))
    trainer = load_finished_run(config, run_dir, data_root=str(data_root))
    _write_segmentation_evaluation(trainer, n_bins, metrics_path, samples_path, info_path)


def _write_segmentation_evaluation(trainer, n_bins: int, metrics_path, samples_path, info_path=None) -> None:
    import numpy as np

    from focalcal.files.artefacts import atomic_savez
    from focalcal.training import evaluate_segmentation as evaluate

    table, samples = evaluate(trainer, n_bins=n_bins)
    names = trainer.dataset.meta.get("class_names") or [f"class {k}" for k in range(trainer.dataset.num_classes)]
    atomic_write_text(table.to_csv(index=False), metrics_path)
    atomic_savez(samples_path, class_names=np.asarray(names), **samples)
    if info_path is not None:
        atomic_write_json(trainer.run_info(), info_path)
