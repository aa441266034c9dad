"""Fused CPU kernels for the class-wise losses: forward and logit gradient in one pass.

Why: on CPU every eager PyTorch op costs a few microseconds of dispatch and a fresh
full-size tensor, so an exact loss written as ~60 small ops (dual focal, focal with label
smoothing) costs 4× torch's single fused cross-entropy kernel on a (128, 100) batch. The C++
kernel (``kernels/classwise.cpp``, SIMD through ATen's ``at::vec``) computes the same
formulas — exact log(1 − p) from the second-largest logit, the top class's singular slope
through b_t — in four passes over the logits.

It is compiled on first use with ``torch.utils.cpp_extension`` (a C++ compiler and ninja;
~40 s once, cached under ``TORCH_EXTENSIONS_DIR``, shared by concurrent processes through
torch's build lock) for the CPU's vector width. Where that is impossible the eager path
(``_classwise.py``, the reference implementation) runs instead, after one warning.
``FOCALCAL_FUSED_KERNELS=0`` turns the kernels off.
"""

from __future__ import annotations

import hashlib
import os
import sys
import warnings
from pathlib import Path

import torch
from torch.autograd.function import once_differentiable

KINDS = {"dual_cross_entropy": 1, "dual_focal": 2, "smoothed_focal": 3}  # the kernel's ``Kind``
#: The constants each kind takes, in the kernel's order.
PARAMETERS = {
    "dual_cross_entropy": ("alpha", "beta"),
    "dual_focal": ("alpha", "beta", "gamma", "rho"),
    "smoothed_focal": ("gamma", "other_weight", "target_weight"),
}
SOURCE = Path(__file__).with_name("kernels") / "classwise.cpp"
ENV_SWITCH = "FOCALCAL_FUSED_KERNELS"
_VECTOR_FLAGS = {  # what torch's own CPU kernels are built for, by torch.backends.cpu capability
    "AVX512": ["-mavx512f", "-mavx512dq", "-mavx512vl", "-mavx512bw", "-mfma", "-DCPU_CAPABILITY_AVX512"],
    "AVX2": ["-mavx2", "-mfma", "-mf16c", "-DCPU_CAPABILITY_AVX2"],
}

_module = None  # None: not tried yet; False: unavailable (warned once)


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1") != "0"


def kernels():
    """The compiled extension module, or None where it cannot be built (warned once).
    ``usable`` also honours the switch; this builds whenever asked."""
    global _module
    if _module is None:
        _module = _build()
    return _module or None


def _build():
    capability = torch.backends.cpu.get_cpu_capability()
    flags = _VECTOR_FLAGS.get(capability, [])
    try:
        from torch.utils import cpp_extension

        # One cache entry per source version: two checkouts (or installs) never rebuild each other's.
        name = f"focalcal_classwise_{capability.lower()}_{source_digest()}"
        if not _is_built(cpp_extension, name):
            print(f"focalcal: compiling the fused CPU loss kernels for {capability} (once, ~30 s; then cached)",
                  file=sys.stderr, flush=True)
        return cpp_extension.load(name, [str(SOURCE)], extra_cflags=["-O3", "-fopenmp", *flags],
                                  extra_ldflags=["-fopenmp"], verbose=False)
    except Exception as error:  # no compiler, no ninja, read-only cache, source not installed, ...
        warnings.warn(f"focalcal: fused CPU loss kernels unavailable, using the eager PyTorch path: {error}",
                      RuntimeWarning, stacklevel=3)
        return False


def source_digest() -> str:
    return hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]


def _is_built(cpp_extension, name: str) -> bool:
    """Whether a build of ``name`` is in torch's extension cache (only to say when compiling)."""
    try:
        return (Path(cpp_extension._get_build_directory(name, verbose=False)) / f"{name}.so").exists()
    except Exception:  # a private helper of torch: if it moves, just say nothing
        return True


def usable(logits: torch.Tensor) -> bool:
    """Whether ``classwise`` can take these logits (CPU, float32/64) and the kernels exist."""
    return (logits.device.type == "cpu" and logits.dtype in (torch.float32, torch.float64)
            and enabled() and kernels() is not None)


class _Classwise(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, index, kind, constants, reduction):
        scale = 1.0 / index.numel() if reduction == "mean" else 1.0
        loss, grad = kernels().classwise(logits, index, KINDS[kind], list(constants), ctx.needs_input_grad[0], scale)
        ctx.save_for_backward(grad if ctx.needs_input_grad[0] else None)
        ctx.per_element = reduction == "none"
        if reduction == "none":
            return loss.unsqueeze(1)
        return loss.sum() if reduction == "sum" else loss.mean()

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        (grad,) = ctx.saved_tensors
        return grad * grad_output, None, None, None, None  # (N, 1, *) broadcasts along the classes


def classwise(logits: torch.Tensor, index: torch.Tensor, kind: str, constants, *, reduction: str = "none"):
    """A class-wise loss by the fused kernel: per element (N, 1, *spatial) for ``"none"``, else
    the mean or sum. ``constants`` are ``PARAMETERS[kind]`` in order; check ``usable`` first."""
    if len(constants) != len(PARAMETERS[kind]):
        raise ValueError(f"{kind} takes {PARAMETERS[kind]}, got {len(constants)} constants")
    return _Classwise.apply(logits, index, kind, tuple(float(c) for c in constants), reduction)


class _BatchLevel(torch.autograd.Function):
    """A loss of the whole batch (one value) whose kernel returns the logit gradient with it."""

    @staticmethod
    def forward(ctx, logits, kernel, *arguments):
        loss, grad = kernel(logits, *arguments, ctx.needs_input_grad[0])
        ctx.save_for_backward(grad if ctx.needs_input_grad[0] else None)
        ctx.arguments = len(arguments)
        return loss

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        (grad,) = ctx.saved_tensors
        return grad * grad_output, None, *([None] * ctx.arguments)


def cross_entropy_mmce(logits: torch.Tensor, index: torch.Tensor, lam: float, bandwidth: float, weighted: bool, *,
                       reduction: str) -> torch.Tensor:
    """Mean or sum over the batch of −log p_y + λ √MMCE² by the fused kernel (check ``usable``
    first); the kernel sums the Laplacian kernel over sorted confidences in O(N log N)."""
    if reduction not in ("mean", "sum"):
        raise ValueError(f"the fused MMCE reduces the batch; reduction must be 'mean' or 'sum', got {reduction!r}")
    return _BatchLevel.apply(logits, kernels().cross_entropy_mmce, index.view(-1), float(lam), float(bandwidth),
                             bool(weighted), reduction == "sum")


def batch_dice(logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Generalised Dice loss over every pixel of the batch (check ``usable`` first)."""
    return _BatchLevel.apply(logits, kernels().batch_dice, index)
