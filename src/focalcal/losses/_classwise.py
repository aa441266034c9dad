"""Losses that are a sum of per-class terms f_i(log p_i), with a closed-form gradient.

For L = Σ_i f_i(log p_i) the gradient with respect to the logits is

    ∂L/∂u_j = a_j − p_j Σ_i a_i,        a_i = ∂L/∂log p_i,

one pass instead of autograd's chain through every intermediate (several times cheaper for
segmentation-sized inputs). A loss supplies, from log p and log(1 − p), its per-element value
and a. Where some a_t is unbounded — a term in log(1 − p_t) or (1 − p_t)^γ with γ < 1 as
p_t → 1, which can only happen for the one class t per row with p_t > 1/2 — the loss also
supplies, per row, b_t = a_t (1 − p_t) (finite, computed in log space; 0 in rows without such
a class), and that class's share is applied as b_t (e_t − q), q_j = p_j / (1 − p_t) for j ≠ t:
the same quantity without inf − inf.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.autograd.function import once_differentiable

from ._logprob import LOG_HALF, log_one_minus_softmax_parts


@dataclass
class SoftmaxParts:
    """What a spec may use: log p and p, and — if asked for — log(1 − p) (exact, see _logprob)."""

    log_p: torch.Tensor
    p: torch.Tensor
    log_one_minus_p: torch.Tensor | None = None
    is_top: torch.Tensor | None = None     # the class with p > 1/2, if any (at most one per row)
    log_rest: torch.Tensor | None = None   # log(1 − p_top) per row (≈ 0 in rows without one)
    log_p_top: torch.Tensor | None = None  # max_i log p_i per row; a top class exists where > log 1/2


# parts -> (loss (N, 1, *), a (N, K, *), b_t per row (N, 1, *) or None)
Spec = Callable[[SoftmaxParts], tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]]


class _ClasswiseLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, spec, needs_one_minus_p):
        log_p = torch.log_softmax(logits, dim=1)
        parts = SoftmaxParts(log_p, log_p.exp())
        if needs_one_minus_p:
            parts.log_one_minus_p, parts.is_top, parts.log_rest = log_one_minus_softmax_parts(log_p, parts.p)
            parts.log_p_top = log_p.amax(dim=1, keepdim=True)
        loss, a, b = spec(parts)
        ctx.singular = b is not None
        if ctx.singular:
            top_share = torch.where(parts.log_p_top > LOG_HALF, b, 0.0)
            ctx.save_for_backward(log_p, parts.p, a, top_share, parts.is_top, parts.log_rest, parts.log_p_top)
        else:
            ctx.save_for_backward(log_p, parts.p, a)
        return loss

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        if not ctx.singular:
            _, p, a = ctx.saved_tensors
            grad = torch.addcmul(a, p, a.sum(dim=1, keepdim=True), value=-1.0)
            return grad.mul_(grad_output), None, None
        log_p, p, a, top_share, is_top, log_rest, log_p_top = ctx.saved_tensors
        a_regular = torch.where(is_top, 0.0, a)
        total = a_regular.sum(dim=1, keepdim=True)
        grad = torch.addcmul(a_regular, p, total, value=-1.0)
        # − b_t q_j for j ≠ t, q_j = p_j/(1 − p_t); wrong (possibly inf) at t itself, replaced below.
        grad.addcmul_(torch.exp(log_p - log_rest), top_share, value=-1.0)
        grad = torch.where(is_top, top_share - log_p_top.exp() * total, grad)
        return grad.mul_(grad_output), None, None


def classwise_loss(logits: torch.Tensor, spec: Spec, *, needs_one_minus_p: bool = False) -> torch.Tensor:
    """Per-element loss (N, 1, *spatial) of a sum of per-class terms; see the module docstring.

    A spec that returns b_t (a singular slope) must ask for ``needs_one_minus_p``.
    """
    return _ClasswiseLoss.apply(logits, spec, needs_one_minus_p)
