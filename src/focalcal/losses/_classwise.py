"""Losses that are a sum of per-class terms f_i(log p_i), with a closed-form gradient.

For L = Σ_i f_i(log p_i) the gradient with respect to the logits is

    ∂L/∂u_j = a_j − p_j Σ_i a_i,        a_i = ∂L/∂log p_i,

one pass instead of autograd's chain through every intermediate (several times cheaper for
segmentation-sized inputs). A loss supplies its per-element value and a from the parts below.

Exact 1 − p without a logsumexp per element: for every class but the row's most probable one
(the "top", p_top ≥ p_i) p_i ≤ 1/2, so 1 − p_i by subtraction is exact to rounding; for the top
class 1 − p_top is the sum of the other probabilities (no cancellation), one reduction per row,
and log(1 − p_top) is a logsumexp over the other classes only in rows where that sum
underflows (``SoftmaxParts.log_rest``).

Where the top's a_t is unbounded — a term in log(1 − p_t) or (1 − p_t)^γ with γ < 1 as
p_t → 1 — the loss also supplies, per row, b_t = a_t (1 − p_t) (finite), and that class's share
is applied as b_t (e_t − q), q_j = p_j / (1 − p_t) for j ≠ t: the same quantity without
inf − inf. The loss may then leave anything (even inf) in a at the top position.

On CPU the losses built on this (dual focal, dual cross-entropy, focal with label smoothing)
run through the fused kernel of ``_fused``, which follows the same scheme in four passes; this
module is its reference implementation and the path on GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from ._base import avoid_host_sync


@dataclass
class SoftmaxParts:
    """What a spec may use: log p and p and — if asked for — the row's top class.

    ``top`` (N, 1, *) is the index of the most probable class, ``p_top`` its probability
    (``log_p_top()`` its log-probability, gathered when asked for), ``rest`` = Σ_{j≠top} p_j
    = 1 − p_top exactly (it underflows to 0 only where 1 − p_top < ~1e-38; ``log_rest``
    covers that).
    """

    log_p: torch.Tensor
    p: torch.Tensor
    top: torch.Tensor | None = None
    p_top: torch.Tensor | None = None
    rest: torch.Tensor | None = None
    spare: torch.Tensor | None = None  # a free buffer of p's shape, if finding the top left one

    def log_p_top(self) -> torch.Tensor:
        """log p of the top class (a gather along the class axis: only for specs that need it)."""
        return self.log_p.gather(1, self.top)

    def buffer(self) -> torch.Tensor:
        """A tensor of p's shape to write into (``out=``): the spare one once, then new ones.

        At segmentation sizes a fresh tensor costs more in page faults than the arithmetic
        that fills it, so a spec's first full-size intermediate reuses what ``top_class`` freed."""
        spare, self.spare = self.spare, None
        return spare if spare is not None else torch.empty_like(self.p)

    def log_rest(self) -> torch.Tensor:
        """log(1 − p_top) per row: log(rest) — where p_top > 1/2 ``rest`` is a sum of positive
        terms (a few ulps off), elsewhere it is ≥ 1/2, so the log is within a few ulps of 1
        absolute — and, where ``rest`` underflows, a logsumexp over the other classes
        (computed only for those rows)."""
        finfo = torch.finfo(self.rest.dtype)
        log_rest = torch.log(self.rest)
        if avoid_host_sync(self.rest):  # the logsumexp for every row, kept where it is needed
            others = torch.logsumexp(self.log_p.scatter(1, self.top, float("-inf")), dim=1, keepdim=True)
            return torch.where(self.rest < finfo.tiny / finfo.eps, others, log_rest)
        if float(self.rest.amin()) < finfo.tiny / finfo.eps:  # below this the sum has lost precision
            underflow = self.rest < finfo.tiny / finfo.eps
            pixels = underflow.squeeze(1)
            others = self.log_p.scatter(1, self.top, float("-inf")).movedim(1, -1)[pixels]
            log_rest.squeeze(1)[pixels] = torch.logsumexp(others, dim=-1)
        return log_rest


# parts -> (loss (N, 1, *), a (N, K, *), b_t per row (N, 1, *) or None)
Spec = Callable[[SoftmaxParts], tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]]


def softmax_parts(logits: torch.Tensor, *, needs_top: bool) -> SoftmaxParts:
    log_p = torch.log_softmax(logits, dim=1)
    parts = SoftmaxParts(log_p, log_p.exp())
    if needs_top:
        parts.top, parts.p_top, parts.rest, parts.spare = top_class(log_p, parts.p)
    return parts


def choose(mask: torch.Tensor, complement: torch.Tensor, if_true: torch.Tensor, if_false: torch.Tensor) -> torch.Tensor:
    """``torch.where(mask, if_true, if_false)`` for finite values, given the mask as 0/1 floats
    and its complement: exact (x·1 + y·0 = x), and a multiply-add where CPU torch.where is
    several times slower at segmentation sizes."""
    return torch.addcmul(if_true * mask, if_false, complement)


def top_class(log_p: torch.Tensor, p: torch.Tensor):
    """(index t (N, 1, *) with p_t > 1/2 where a row has such a class, p_t, 1 − p_t exactly,
    and a full-size scratch buffer the caller may overwrite).

    Only a class with p > 1/2 needs its 1 − p from the other classes; rows without one may
    use any class. For (N, K) logits that is the argmax; with spatial dims a max-with-index
    along the strided class axis is slow on CPU (~6 element-wise passes), so there t and
    p_t come from one matrix product of the probabilities above 1/2 with (0, …, K−1) and
    (1, …, 1) — Σ_j j s_j / Σ_j s_j = t exactly, s being 0 but at t — and t = 0 in rows
    without such a class.
    """
    if p.dim() == 2:
        top = p.argmax(dim=1, keepdim=True)
        others = p.scatter(1, top, 0.0)
        return top, p.gather(1, top), others.sum(dim=1, keepdim=True), others
    n, k = p.shape[:2]
    above_half = F.threshold(p, 0.5, 0.0)  # p where p > 1/2 (at most one class per row), else 0
    weights = torch.stack([torch.arange(k, dtype=p.dtype, device=p.device), torch.ones(k, dtype=p.dtype, device=p.device)])
    index_times_p, p_above = torch.matmul(weights, above_half.reshape(n, k, -1)).view(n, 2, 1, *p.shape[2:]).unbind(1)
    has_top = (p_above > 0).to(p.dtype)  # row masks as 0/1 floats, see ``choose``
    no_top = torch.rsub(has_top, 1.0)
    top = index_times_p.div_(p_above + no_top).round_().long()  # 0/1 = class 0 in rows without a top
    p_top = torch.addcmul(p_above, no_top, p[:, :1])  # p_above is already 0 in rows without a top
    below_half = torch.sub(p, above_half, out=above_half)  # reuses the buffer: no fresh full-size tensor
    rest = choose(has_top, no_top, below_half.sum(dim=1, keepdim=True), torch.rsub(p[:, :1], 1.0))
    return top, p_top, rest, below_half


class _ClasswiseLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, spec, needs_top, reduction):
        parts = softmax_parts(logits, needs_top=needs_top)
        loss, a, b = spec(parts)
        ctx.mean_of = loss.numel() if reduction == "mean" else None
        ctx.singular = b is not None
        if ctx.singular:
            a.scatter_(1, parts.top, 0.0)  # the top's share goes through b
            ctx.save_for_backward(parts.p, a, b, parts.top, parts.p_top, parts.rest)
        else:
            ctx.save_for_backward(parts.p, a)
        return loss if reduction == "none" else loss.sum() if reduction == "sum" else loss.mean()

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        if ctx.mean_of is not None:
            grad_output = grad_output / ctx.mean_of
        if not ctx.singular:
            p, a = ctx.saved_tensors
            grad = torch.addcmul(a, p, a.sum(dim=1, keepdim=True), value=-1.0)
            return grad.mul_(grad_output), None, None, None
        p, a, b, top, p_top, rest = ctx.saved_tensors
        total = a.sum(dim=1, keepdim=True)
        # For j ≠ t the top's share is −b_t p_j/(1 − p_t): folded into the row factor as
        # b_t/(1 − p_t) (= a_t where that is finite; capped where 1 − p_t underflowed, and
        # there p_j ≤ 1 − p_t makes the product ≤ b_t anyway), one pass instead of three.
        finfo = torch.finfo(rest.dtype)
        row = torch.div(b, rest.clamp_min(finfo.tiny)).clamp_(-finfo.max, finfo.max).add_(total)
        grad = torch.addcmul(a, p, row, value=-1.0)
        grad.scatter_(1, top, torch.addcmul(b, p_top, total, value=-1.0))
        return grad.mul_(grad_output), None, None, None


def classwise_loss(logits: torch.Tensor, spec: Spec, *, needs_top: bool = False, reduction: str = "none") -> torch.Tensor:
    """Per-element loss (N, 1, *spatial) of a sum of per-class terms; see the module docstring.

    A spec that returns b_t (a singular slope) must ask for ``needs_top``. ``reduction``
    "mean" or "sum" returns the reduced loss from the same autograd node.
    """
    return _ClasswiseLoss.apply(logits, spec, needs_top, reduction)
