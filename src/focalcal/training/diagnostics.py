"""Per-epoch diagnostics of mukhoti2020 §3 and §4 (Figs 1–4, 10), computed from logits and features.

NLL and entropy are split by correct/incorrect prediction, because the paper's argument is
that miscalibration shows up as rising NLL and falling entropy on the misclassified
samples ("peak at the wrong place").
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from focalcal import metrics
from focalcal.data.segmentation import IGNORE_INDEX  # unlabelled pixels (CamVid "void"): diagnostics skip them


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


def last_layer_gradient_norms(logits: torch.Tensor, features: torch.Tensor, labels: torch.Tensor, loss_fn) -> torch.Tensor:
    """Each sample's ‖∂L_i/∂W‖ for the last linear layer z = W h + b (mukhoti2020 Fig 4b-d).

    ∂L_i/∂W = (∂L_i/∂z_i) h_iᵀ is an outer product, so its Frobenius norm is ‖∂L_i/∂z_i‖ · ‖h_i‖:
    one backward through the loss on the logits, none through the network. ∂L_i/∂z_i is N times
    the gradient of the mean loss, exact for a loss of per-sample terms (``loss_fn.per_sample``).
    """
    if not getattr(loss_fn, "per_sample", False):
        raise ValueError(f"per-sample gradient norms need a loss of per-sample terms; "
                         f"{type(loss_fn).__name__} couples the samples of a batch")
    if logits.dim() != 2 or features.dim() != 2:
        raise ValueError(f"per-sample gradient norms need (N, K) logits and (N, D) features, "
                         f"got {tuple(logits.shape)} and {tuple(features.shape)}")
    with torch.enable_grad():
        z = logits.detach().float().requires_grad_(True)
        (grad,) = torch.autograd.grad(loss_fn(z, labels) * labels.shape[0], z)
    return grad.double().norm(dim=1) * features.double().norm(dim=1)


class LastLayerInputs:
    """A forward hook on the last layer that watches the features it maps to logits.

    In training mode it sums each sample's (each pixel's) feature L2 norm over the epoch's
    batches — mukhoti2020 Fig 10's "norm of the last block's features averaged over the
    training set", read off the forward passes training does anyway (no extra pass; without
    augmentation these are exactly the training inputs). In eval mode, while
    :meth:`keeping`, it keeps the features of a prediction pass (for Fig 4b-d).
    """

    def __init__(self, layer: torch.nn.Module) -> None:
        # Device tensors updated in place, never rebound: a CUDA graph replays the additions and
        # torch.compile sees no Python state change (a Python counter would recompile it every batch).
        device = next(layer.parameters()).device
        self._sum = torch.zeros((), dtype=torch.float64, device=device)
        self._count = torch.zeros((), dtype=torch.int64, device=device)
        self._kept: list[torch.Tensor] | None = None
        self.handle = layer.register_forward_hook(self._hook)

    def _hook(self, module, inputs, output) -> None:
        features = inputs[0].detach()
        if module.training:
            # over features (channels): one norm per sample or pixel; summed on the device, no sync
            self._sum.add_(torch.linalg.vector_norm(features, dim=1, dtype=torch.float32).sum())
            self._count.add_(features.numel() // features.shape[1])
        elif self._kept is not None:
            self._kept.append(features.float())  # on the device: no read-back per batch

    def epoch_mean_norm(self) -> float:
        """Mean feature norm over the training batches seen since the last call (NaN if none)."""
        total, count = torch.stack([self._sum, self._count.double()]).tolist()
        self._sum.zero_()
        self._count.zero_()
        return total / count if count else float("nan")

    def keeping(self):
        """Context manager: keep eval-mode features (on their device); ``.features`` holds them concatenated after."""
        return _Keeping(self)


class _Keeping:
    def __init__(self, watcher: LastLayerInputs) -> None:
        self.watcher, self.features = watcher, None

    def __enter__(self):
        self.watcher._kept = []
        return self

    def __exit__(self, *exc) -> None:
        kept, self.watcher._kept = self.watcher._kept, None
        if kept:
            self.features = torch.cat(kept)


def weight_norm(layer: torch.nn.Module) -> float:
    """L2 norm of a layer's weight matrix (mukhoti2020 Fig 3e)."""
    return float(np.sqrt(sum(float((p.detach().double() ** 2).sum()) for n, p in layer.named_parameters() if n == "weight")))
