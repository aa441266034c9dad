"""Exact log p and log(1 − p) from logits, along the class dimension (dim 1).

Focal-type losses need log(1 − p) for probabilities that round to 1 in floating point:
``log1p(-softmax)`` is −inf there and its gradient is NaN. Here 1 − p_i is never formed by
subtraction: log(1 − p_i) = logsumexp over the *other* classes of log p, which is finite
and exact (to rounding) for every finite logit, however large.

Shapes: ``logits`` is (N, K, *spatial); targets are class indices of shape (N, 1, *spatial)
(``index`` below), so one code path serves classification and segmentation.
"""

from __future__ import annotations

import math

import torch

LOG_HALF = math.log(0.5)


def target_log_probs(log_probs: torch.Tensor, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (log p_y, log(1 − p_y)) of the target class, each of shape (N, 1, *spatial).

    ``log_probs`` is the log-softmax of the logits along dim 1; ``index`` holds the target
    class of each element (N, 1, *spatial). log(1 − p_y) is the logsumexp of log p over the
    classes other than y, so it is exact as p_y → 1 and differentiable everywhere.
    """
    log_p_target = log_probs.gather(1, index)
    log_p_others = log_probs.scatter(1, index, float("-inf"))
    return log_p_target, torch.logsumexp(log_p_others, dim=1, keepdim=True)


def log_one_minus_softmax_parts(log_probs: torch.Tensor, probs: torch.Tensor | None = None):
    """(log(1 − p) for every class, mask of the class with p > 1/2, log(1 − p_top) per row).

    Where p_i ≤ 1/2, ``log1p(-p_i)`` is exact. At most one class per row has p_i > 1/2 and it
    may have p → 1; for it the value is the logsumexp of log p over the other classes (in rows
    without such a class the third output is ≈ 0 and unused). Under autograd the ``log1p``
    branch is fed a harmless 0 at that class, so the unused branch adds no inf · 0 = NaN.
    ``probs`` (= exp(log_probs)) may be passed in when already computed.
    """
    is_top = log_probs > LOG_HALF
    log_rest_of_top = torch.logsumexp(log_probs.masked_fill(is_top, float("-inf")), dim=1, keepdim=True)
    probs = log_probs.exp() if probs is None else probs
    if probs.requires_grad:
        probs = probs.masked_fill(is_top, 0.0)
    return torch.where(is_top, log_rest_of_top, torch.log1p(-probs)), is_top, log_rest_of_top


def log_one_minus_softmax(log_probs: torch.Tensor) -> torch.Tensor:
    """log(1 − p_i) for every class i, from log-probabilities (log-softmax along dim 1)."""
    return log_one_minus_softmax_parts(log_probs)[0]
