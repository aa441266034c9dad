"""Per-epoch diagnostics of mukhoti2020 §3 (Figs 1–3), computed from logits.

NLL and entropy are split by correct/incorrect prediction, because the paper's argument is
that miscalibration shows up as rising NLL and falling entropy on the misclassified
samples ("peak at the wrong place").
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from focalcal import metrics

# Segmentation masks mark unlabelled pixels with this value (CamVid "void"); diagnostics skip them.
IGNORE_INDEX = 255


def as_samples(logits: torch.Tensor, labels: torch.Tensor):
    """(N, K, *spatial) logits and (N, *spatial) labels → (M, K) and (M,) over labelled pixels.

    Segmentation diagnostics are pixel-level: every labelled pixel counts as one prediction.
    """
    if logits.dim() > 2:
        logits = logits.movedim(1, -1).reshape(-1, logits.shape[1])
        labels = labels.reshape(-1)
    keep = labels != IGNORE_INDEX
    if not bool(keep.all()):
        logits, labels = logits[keep], labels[keep]
    return logits, labels



def split_statistics(logits: torch.Tensor, labels: torch.Tensor, loss_value: float, prefix: str) -> dict[str, float]:
    """Loss, NLL, error, ECE (15 equal-width bins), NLL/entropy by correctness, for one split."""
    logits, labels = as_samples(logits, labels)
    logits = logits.double()
    log_probs = F.log_softmax(logits, dim=1)
    nll_per_sample = -log_probs.gather(1, labels[:, None]).squeeze(1)
    entropy = -(log_probs.exp() * log_probs).sum(1)  # exp(-inf) * -inf is avoided: log_softmax is finite
    correct = log_probs.argmax(1) == labels

    def mean_where(values, mask):
        return float(values[mask].mean()) if bool(mask.any()) else float("nan")

    probs = log_probs.exp().numpy()
    return {
        f"{prefix}_loss": loss_value,
        f"{prefix}_nll": float(nll_per_sample.mean()),
        f"{prefix}_error": float(1.0 - correct.double().mean()),
        f"{prefix}_ece": float(metrics.ece(probs, labels.numpy(), n_bins=15)),
        f"{prefix}_nll_correct": mean_where(nll_per_sample, correct),
        f"{prefix}_nll_incorrect": mean_where(nll_per_sample, ~correct),
        f"{prefix}_entropy_correct": mean_where(entropy, correct),
        f"{prefix}_entropy_incorrect": mean_where(entropy, ~correct),
    }


def training_reliability(logits: torch.Tensor, labels: torch.Tensor, epoch: int, n_bins: int):
    """Reliability bins and confidence histogram of the training set at one epoch (mukhoti2020 Fig 1)."""
    logits, labels = as_samples(logits, labels)
    probs = F.softmax(logits.double(), dim=1).numpy()
    table = metrics.reliability_bins(probs, labels.numpy(), n_bins=n_bins)
    table.insert(0, "epoch", epoch)
    table["share"] = table["count"] / max(int(table["count"].sum()), 1)
    return table


def weight_norm(layer: torch.nn.Module) -> float:
    """L2 norm of a layer's weight matrix (mukhoti2020 Fig 3e)."""
    return float(np.sqrt(sum(float((p.detach().double() ** 2).sum()) for n, p in layer.named_parameters() if n == "weight")))
