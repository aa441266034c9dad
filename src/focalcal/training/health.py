"""Is a finished run fit to report? One status per run, with the numbers that decide it.

A run is exactly one of :data:`HEALTH_STATUSES`, the first that applies in this order
(diverged > collapsed > not converged > trained):

* **diverged** — a training loss in the history is NaN/±Inf, or the test logits the run
  reports are not all finite (the caller says so: ``logits_finite=False``).
* **collapsed** — test accuracy ≤ max(1/K, share of the most frequent test label) +
  :data:`COLLAPSE_MARGIN`: no better than guessing uniformly over the K classes or always
  predicting the majority class, give or take 2 points. For segmentation
  (:func:`assess_health_from_confusion`) the same rule is applied to mean IoU over the
  labelled test pixels, against the mean IoU of those two trivial predictors.
* **not converged** — the train error (``train_error`` of the history, a fraction) was still
  falling steeply when training stopped. Measured over the last ``k = max(2, ceil(0.1 × E))``
  epochs of an ``E``-epoch history: from epoch ``E − k`` to epoch ``E`` the error fell by
  more than :data:`STILL_FALLING_PER_EPOCH` (1 percentage point) per epoch on average *and* by
  more than :data:`STILL_FALLING_RELATIVE` (10 %) of its value at epoch ``E − k``. With fewer
  than :data:`MIN_EPOCHS_TO_JUDGE` (3) epochs, or when early stopping ended the run (the
  validation loss, not the epoch budget, decided when to stop), convergence is not judged.
* **trained** — none of the above.

Judged from the history alone (no test predictions: a run whose logits were not exported) a
run can be diverged or not converged, but nothing clears it of collapse: it is
:data:`NOT_ASSESSED` instead of trained.

Torch-free (numpy and pandas only): the report and the Snakefile read statuses without a
torch import. :func:`health_of` reads the entry back from a ``run.json``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd  # imported where a history is read: the figures' style names HEALTHY only

HEALTHY, DIVERGED, COLLAPSED, NOT_CONVERGED = "trained", "diverged", "collapsed", "not converged"
HEALTH_STATUSES = (HEALTHY, DIVERGED, COLLAPSED, NOT_CONVERGED)
UNHEALTHY = HEALTH_STATUSES[1:]
NOT_ASSESSED = "not assessed"
"""Not a status of :data:`HEALTH_STATUSES`: what the run inventory shows for a run it cannot
judge (no test predictions were exported, or its ``run.json`` predates health checks)."""

COLLAPSE_MARGIN = 0.02
"""Accuracy (a fraction: 2 percentage points) a run must beat both chance (1/K) and the
always-the-majority-class predictor by. A model that learnt nothing about the inputs scores
one of the two, up to sampling noise: on 1,000 test samples the standard error of an accuracy
is at most 1.6 points, so 2 points separate "learnt something" from noise without flagging
the weak-but-real models of small test configs."""

CONVERGENCE_WINDOW_SHARE = 0.1
"""The last 10 % of the epochs (at least :data:`MIN_CONVERGENCE_WINDOW`) form the window in
which the train error must have settled: the tail of a schedule, after its last LR drop in the
papers' recipes, when a converged run only creeps."""

MIN_CONVERGENCE_WINDOW = 2
"""At least two epoch-to-epoch steps, so that one noisy epoch does not decide."""

MIN_EPOCHS_TO_JUDGE = 3
"""Below this many epochs there is no tail to measure: convergence is not judged."""

STILL_FALLING_PER_EPOCH = 0.01
"""Mean fall of the train error (a fraction) per epoch over the window above which training
was still making fast progress: 1 percentage point per epoch."""

STILL_FALLING_RELATIVE = 0.10
"""...and the fall over the window must also exceed 10 % of the error at its start, so that a
run at 60 % error drifting down by 1.5 points per epoch (noise of a hard task) is not flagged,
while one going 20 % → 15 % is."""


def status_rules() -> dict[str, str]:
    """The rule that flags each unhealthy status, in words, from the constants below (what
    the claims table says of a run it leaves out)."""
    return {
        DIVERGED: "a non-finite training loss, or non-finite test logits",
        COLLAPSED: (f"test accuracy (segmentation: mean IoU) within {COLLAPSE_MARGIN * 100:g} points of chance or "
                      "of always predicting the majority class"),
        NOT_CONVERGED: (f"over the last {CONVERGENCE_WINDOW_SHARE:.0%} of epochs (at least {MIN_CONVERGENCE_WINDOW}) "
                          f"the train error still fell by more than {STILL_FALLING_PER_EPOCH * 100:g} point per epoch "
                          f"and more than {STILL_FALLING_RELATIVE:.0%} relative"),
    }


def assess_health(history, test_labels=None, test_predictions=None, num_classes: int | None = None,
                  ignore_index: int | None = None, *, logits_finite: bool = True,
                  stopped_early: bool = False) -> dict:
    """``{"status", "reason", "measures"}`` of a finished run (rules in the module docstring).

    ``history``: the per-epoch records (a list of dicts or a DataFrame with ``train_loss`` and
    ``train_error``). ``test_labels``/``test_predictions``: same-shape integer arrays (samples,
    or pixels of any shape), ``ignore_index`` labels left out; ``num_classes`` K. Without test
    labels collapse is not judged (``measures["test_accuracy"]`` is None) and a run that is
    neither diverged nor not converged is :data:`NOT_ASSESSED` rather than trained.
    ``logits_finite``: whether every test logit the predictions came from was finite (False:
    diverged). ``stopped_early``: early stopping ended the run (convergence is not judged).
    """
    if test_labels is None:
        return _assess(history, _collapse(None, None, num_classes), num_classes, logits_finite, stopped_early)
    labels = np.asarray(test_labels).ravel()
    predictions = np.asarray(test_predictions).ravel()
    if labels.shape != predictions.shape:
        raise ValueError(f"test labels ({labels.size}) and predictions ({predictions.size}) differ in size")
    if ignore_index is not None:
        keep = labels != ignore_index
        labels, predictions = labels[keep], predictions[keep]
    if num_classes is None:
        raise ValueError("num_classes is needed to judge collapse")
    counts = np.bincount(labels.astype(np.int64), minlength=num_classes)
    collapse = _collapse(int((labels == predictions).sum()), counts, num_classes)
    return _assess(history, collapse, num_classes, logits_finite, stopped_early)


def assess_health_from_confusion(history, confusion, *, logits_finite: bool = True, stopped_early: bool = False) -> dict:
    """:func:`assess_health` of a segmentation run from its (K, K) pixel confusion matrix (rows
    true, columns predicted), accumulated over the test batches.

    Collapse is judged on mean IoU, the segmentation papers' score, not on pixel accuracy: with
    a 15:1 background the all-background predictor's accuracy (94 %) leaves no room for a
    2-point margin, while its mean IoU (background share / K) is what "learnt nothing" scores.
    The references are that predictor and uniform guessing; the margin is the same 2 points.
    """
    confusion = np.asarray(confusion, dtype=np.int64)
    if confusion.ndim != 2 or confusion.shape[0] != confusion.shape[1]:
        raise ValueError(f"confusion must be a square matrix, got shape {confusion.shape}")
    return _assess(history, _iou_collapse(confusion), confusion.shape[0], logits_finite, stopped_early)


def _assess(history, collapse, num_classes, logits_finite, stopped_early) -> dict:
    import pandas as pd

    history = history if isinstance(history, pd.DataFrame) else pd.DataFrame(list(history))
    measures = {"epochs": len(history), "logits_finite": bool(logits_finite), "stopped_early": bool(stopped_early)}
    # diverged
    losses = history["train_loss"].astype(float).to_numpy() if "train_loss" in history else np.array([])
    bad = [int(e) for e, loss in zip(_epochs(history), losses) if not math.isfinite(loss)]
    measures["non_finite_loss_epochs"] = bad
    # collapsed
    measures.update(collapse)
    # not converged
    convergence = _convergence(history, stopped_early)
    measures.update(convergence)

    if bad or not logits_finite:
        parts = []
        if bad:
            parts.append(f"the training loss is non-finite at epoch(s) {', '.join(map(str, bad[:5]))}"
                         + (f" and {len(bad) - 5} more" if len(bad) > 5 else ""))
        if not logits_finite:
            parts.append("the test logits are not all finite")
        return _result(DIVERGED, _sentence(" and ".join(parts)), measures)
    if collapse["test_score"] is not None and collapse["test_score"] <= collapse["collapse_threshold"]:
        name = collapse["score_name"]
        return _result(COLLAPSED, (
            f"Test {name} {_pct(collapse['test_score'])} is not above {_pct(collapse['collapse_threshold'])}, "
            f"{100 * COLLAPSE_MARGIN:g} points over the better of chance ({_pct(collapse['chance_score'])}, "
            f"{num_classes} classes) and always predicting the majority class "
            f"({_pct(collapse['majority_score'])})."), measures)
    if convergence["still_falling"]:
        return _result(NOT_CONVERGED, (
            f"The train error fell from {_pct(convergence['train_error_window_start'])} to "
            f"{_pct(convergence['train_error_last'])} over the last {convergence['convergence_window']} of "
            f"{measures['epochs']} epochs ({100 * convergence['train_error_drop_per_epoch']:.2f} points per epoch, "
            f"{100 * convergence['train_error_relative_drop']:.0f} % relative; converged means at most "
            f"{100 * STILL_FALLING_PER_EPOCH:g} point per epoch or {100 * STILL_FALLING_RELATIVE:g} %): still falling "
            "fast at the last epoch."), measures)
    if collapse["test_score"] is None:  # only the history: it can clear nothing
        return _result(NOT_ASSESSED, _sentence("no test predictions, so collapse is not judged; "
                                               + _healthy_reason(collapse, convergence, measures)), measures)
    return _result(HEALTHY, _sentence(_healthy_reason(collapse, convergence, measures)), measures)


def _collapse(n_correct, label_counts, num_classes) -> dict:
    if label_counts is None:
        return {"test_accuracy": None, "chance": 1.0 / num_classes if num_classes else None, "majority_share": None,
                "majority_class": None, "collapse_threshold": None, "test_samples": 0, "score_name": "accuracy",
                "test_score": None, "chance_score": None, "majority_score": None}
    counts = np.asarray(label_counts, dtype=np.int64)
    total = int(counts.sum())
    if total == 0:
        raise ValueError("no labelled test sample: collapse cannot be judged")
    chance = 1.0 / int(num_classes)
    majority = float(counts.max() / total)
    accuracy = float(n_correct / total)
    return {"test_accuracy": accuracy, "chance": chance, "majority_share": majority,
            "majority_class": int(counts.argmax()), "collapse_threshold": max(chance, majority) + COLLAPSE_MARGIN,
            "test_samples": total, "score_name": "accuracy", "test_score": accuracy, "chance_score": chance,
            "majority_score": majority}


def _mean_iou(confusion: np.ndarray) -> float:
    """Mean over classes present in the labels or predictions of TP / (TP + FP + FN)."""
    tp = np.diag(confusion).astype(np.float64)
    union = confusion.sum(axis=0) + confusion.sum(axis=1) - tp
    present = union > 0
    return float(np.mean(tp[present] / union[present]))


def _iou_collapse(confusion: np.ndarray) -> dict:
    counts = confusion.sum(axis=1)
    total = int(counts.sum())
    if total == 0:
        raise ValueError("no labelled test pixel: collapse cannot be judged")
    k = confusion.shape[0]
    shares = counts / total
    majority = int(counts.argmax())
    # always the majority class: its IoU is its share, every other class 0
    majority_score = float(shares[majority] / k)
    # uniform guessing: class c is predicted on 1/K of the pixels, independently of the truth
    chance_score = float(np.mean((shares / k) / (shares + 1.0 / k - shares / k)))
    score = _mean_iou(confusion)
    return {"test_accuracy": float(np.trace(confusion) / total), "chance": 1.0 / k, "majority_share": float(shares[majority]),
            "majority_class": majority, "test_samples": total, "score_name": "mean IoU", "test_score": score,
            "chance_score": chance_score, "majority_score": majority_score,
            "collapse_threshold": max(chance_score, majority_score) + COLLAPSE_MARGIN}


def _convergence(history: pd.DataFrame, stopped_early: bool) -> dict:
    epochs = len(history)
    window = max(MIN_CONVERGENCE_WINDOW, math.ceil(CONVERGENCE_WINDOW_SHARE * epochs))
    out = {"convergence_window": window, "train_error_window_start": None, "train_error_last": None,
           "train_error_drop_per_epoch": None, "train_error_relative_drop": None, "still_falling": False,
           "convergence_judged": False}
    if epochs < MIN_EPOCHS_TO_JUDGE or stopped_early or "train_error" not in history:
        return out
    errors = history["train_error"].astype(float).to_numpy()
    start, last = float(errors[-1 - window]), float(errors[-1])
    drop = start - last
    relative = drop / start if start > 0 else 0.0
    per_epoch = drop / window
    still = bool(np.isfinite(drop) and per_epoch > STILL_FALLING_PER_EPOCH and relative > STILL_FALLING_RELATIVE)
    return {**out, "train_error_window_start": start, "train_error_last": last, "train_error_drop_per_epoch": per_epoch,
            "train_error_relative_drop": relative, "still_falling": still, "convergence_judged": True}


def _healthy_reason(collapse: dict, convergence: dict, measures: dict) -> str:
    parts = []
    if collapse["test_score"] is not None:
        parts.append(f"test {collapse['score_name']} {_pct(collapse['test_score'])} is above "
                     f"{_pct(collapse['collapse_threshold'])} (chance {_pct(collapse['chance_score'])}, majority class "
                     f"{_pct(collapse['majority_score'])})")
    if convergence["convergence_judged"]:
        parts.append(f"the train error changed by {-100 * convergence['train_error_drop_per_epoch']:+.2f} points per "
                     f"epoch over the last {convergence['convergence_window']} of {measures['epochs']} epochs")
    elif measures["stopped_early"]:
        parts.append("early stopping ended training (convergence not judged)")
    else:
        parts.append(f"{measures['epochs']} epoch(s) are too few to judge convergence")
    return "; ".join(parts)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."


def _result(status: str, reason: str, measures: dict) -> dict:
    return {"status": status, "reason": reason, "measures": measures}


def _epochs(history: pd.DataFrame):
    return history["epoch"].tolist() if "epoch" in history else range(1, len(history) + 1)


def _pct(fraction: float) -> str:
    return f"{100 * fraction:.1f} %"


class MissingHealthError(ValueError):
    """A ``run.json`` without a health entry (written before health checks, or by hand)."""


def health_of(info: Mapping, path) -> dict:
    """The ``health`` entry of a run's ``run.json`` (parsed as ``info``, read from ``path``);
    a record written before health checks is refused with the command that re-writes it."""
    health = info.get("health")
    if not isinstance(health, Mapping) or health.get("status") not in HEALTH_STATUSES:
        from focalcal.files.remake import remake_hint

        raise MissingHealthError(f"{path} has no run health entry (written before health checks, or by hand); "
                         f"re-write it from the run's checkpoint: {remake_hint(path)}")
    return dict(health)
