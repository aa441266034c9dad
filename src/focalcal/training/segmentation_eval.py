"""Test-split evaluation of a finished segmentation run (hossain2021 §4.3, plus calibration).

One pass over the test images in eval-size batches (a fold of a real data set does not fit
in memory as logits): the pixel confusion matrix, Hausdorff distances per image and class,
each pixel's top-label confidence and correctness, and the per-pixel NLL are accumulated,
then reduced to a tidy table of ``metric, class, value`` rows:

* ``iou`` per class and ``mean`` (the classes present in prediction or truth), pooled over
  all test pixels (:func:`focalcal.metrics.iou`);
* ``hausdorff`` per class: mean over the test images where the class is in both the
  prediction and the truth (pixels); ``mean`` over the classes. ``hausdorff_missed`` is the
  fraction of (image, class) pairs in which a class is in exactly one of them — there the
  distance is infinite, so it is counted, not averaged;
* ``pixel_accuracy``, ``pixel_ece`` (``n_bins`` equal-width bins, every pixel a sample) and
  ``nll`` per pixel.

hossain2021 reports per fold the mean IoU and mean HD and then mean ± std over folds; the
study tables do that second step.

The run's health (:mod:`focalcal.training.health`) is judged on the same pixels — test
accuracy against chance and the majority (in practice background) pixel share — and left in
``trainer.health`` for its ``run.json``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from focalcal import metrics
from focalcal.training.diagnostics import IGNORE_INDEX
from focalcal.training.health import assess_health_from_confusion
from focalcal.training.trainer import Trainer

SAMPLE_IMAGES = 4  # test images kept, with their masks, for the qualitative figure


def evaluate_segmentation(trainer: Trainer, *, n_bins: int = 15, n_samples: int = SAMPLE_IMAGES):
    """(tidy metrics DataFrame, samples dict) of a finished segmentation run's test split; sets
    ``trainer.health`` from the pixel confusion matrix and the finiteness of the logits.

    ``samples`` holds the first ``n_samples`` test images as the data set stores them (before
    normalisation), their true masks and the predicted masks.
    """
    inputs, labels = trainer.eval_splits["test"]
    if labels.dim() != 3:
        raise ValueError(f"not a segmentation run: test labels have shape {tuple(labels.shape)}, need (N, H, W)")
    trainer.use_final_weights()
    num_classes = trainer.dataset.num_classes
    confusion = np.zeros((num_classes, num_classes), dtype=np.int64)
    distances, confidence, correct, predictions = [], [], [], []
    nll_sum, pixels, finite = 0.0, 0, True
    batch = trainer.config.recipe.eval_batch_size
    for start in range(0, labels.shape[0], batch):
        logits = trainer.predict(inputs[start : start + batch]).double()
        finite = finite and bool(torch.isfinite(logits).all())
        target = labels[start : start + batch].cpu()
        log_p = torch.log_softmax(logits, dim=1)
        top, pred = log_p.max(dim=1)
        keep = target != IGNORE_INDEX
        pred_np, target_np = pred.numpy(), target.numpy()
        confusion += metrics.pixel_confusion_matrix(pred_np, target_np, num_classes, ignore_index=IGNORE_INDEX)
        distances.append(metrics.hausdorff_distance(pred_np, target_np, num_classes, ignore_index=IGNORE_INDEX))
        confidence.append(top.exp()[keep].numpy())
        correct.append((pred == target)[keep].numpy())
        nll_sum += float(F.nll_loss(log_p, target, ignore_index=IGNORE_INDEX, reduction="sum"))
        pixels += int(keep.sum())
        if sum(len(p) for p in predictions) < n_samples:
            predictions.append(pred_np[: n_samples - sum(len(p) for p in predictions)])
    if pixels == 0:
        raise ValueError("the test split has no labelled pixel")
    rows = _metric_rows(confusion, np.concatenate(distances), np.concatenate(confidence),
                        np.concatenate(correct), nll_sum / pixels, n_bins)
    trainer.health = assess_health_from_confusion(trainer.history, confusion, logits_finite=finite,
                                                  stopped_early=trainer.stopped_early)
    kept = sum(len(p) for p in predictions)
    samples = {
        "images": trainer.dataset.test.x[:kept].cpu().numpy().astype(np.float32),
        "true_masks": labels[:kept].cpu().numpy().astype(np.int64),
        "predicted_masks": np.concatenate(predictions).astype(np.int64),
    }
    return pd.DataFrame(rows, columns=["metric", "class", "value"]), samples


def _metric_rows(confusion, distances, confidence, correct, nll, n_bins) -> list[tuple]:
    scores = metrics.iou_from_confusion(confusion)
    rows = [("iou", str(k), float(v)) for k, v in enumerate(scores.per_class)]
    rows.append(("iou", "mean", scores.mean))
    finite = np.where(np.isfinite(distances), distances, np.nan)  # (images, classes); NaN: class in neither
    with warnings.catch_warnings():  # a class never in both masks has no distance: NaN, quietly
        warnings.simplefilter("ignore", RuntimeWarning)
        per_class = np.nanmean(finite, axis=0)
    rows += [("hausdorff", str(k), float(v)) for k, v in enumerate(per_class)]
    rows.append(("hausdorff", "mean", float(np.nanmean(per_class)) if np.any(np.isfinite(per_class)) else np.nan))
    measured = ~np.isnan(distances)  # pairs where the class is in at least one mask
    rows.append(("hausdorff_missed", "all", float(np.isinf(distances).sum() / max(measured.sum(), 1))))
    rows.append(("pixel_accuracy", "all", float(np.trace(confusion) / confusion.sum())))
    rows.append(("pixel_ece", "all", metrics.ece_of_confidence(confidence, correct, n_bins)))
    rows.append(("nll", "all", nll))
    return rows

