"""Fused CPU kernels for the class-wise losses: forward and logit gradient in one pass.

Why: on CPU every eager PyTorch op costs a few microseconds of dispatch and a fresh
full-size tensor, so an exact loss written as ~60 small ops (dual focal, focal with label
smoothing) costs 4× torch's single fused cross-entropy kernel on a (128, 100) batch. The C++
kernel (``kernels/classwise.cpp``, SIMD through ATen's ``at::vec``) computes the same
formulas — exact log(1 − p) from the second-largest logit, the top class's singular slope
through b_t — in four passes over the logits.

It is compiled once with ``torch.utils.cpp_extension`` (a C++ compiler and ninja) for
the CPU's vector width, by ``python -m focalcal build-kernels`` (``make venv`` runs it; the
workflow runs it before its first job), or else on first use. The build lives in torch's
extension cache (``TORCH_EXTENSIONS_DIR``) under a name keyed by the source's digest, the CPU
capability and the torch version, compiled from a copy of the source kept there — so every
checkout and process of the same source loads the same ``.so`` and none rebuilds it (a build
keyed by a checkout's path would be redone by the next checkout). With
``FOCALCAL_KERNEL_BUILD=never`` (set for workflow jobs) a missing build is not compiled. Where
no build can be had the eager path (``_classwise.py``, the reference implementation) runs
instead, after one warning. ``FOCALCAL_FUSED_KERNELS=0`` turns the kernels off (the switches:
:mod:`focalcal.core.kernels`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import re
import sys
import tempfile
import warnings
from pathlib import Path

import torch
from torch.autograd.function import once_differentiable

from focalcal.core import kernels as kernel_settings

KINDS = {"dual_cross_entropy": 1, "dual_focal": 2, "smoothed_focal": 3}  # the kernel's ``Kind``
#: The constants each kind takes, in the kernel's order.
PARAMETERS = {
    "dual_cross_entropy": ("alpha", "beta"),
    "dual_focal": ("alpha", "beta", "gamma", "rho"),
    "smoothed_focal": ("gamma", "other_weight", "target_weight"),
}
# The losses and the module's bindings (focal temperature scaling's grid kernel is plain C:
# focalcal.calibration._grid_kernel).
SOURCES = (Path(__file__).with_name("kernels") / "classwise.cpp",)
# The switches, shared with the grid kernel.
ENV_SWITCH, BUILD_SWITCH, enabled = kernel_settings.ENV_SWITCH, kernel_settings.BUILD_SWITCH, kernel_settings.enabled
_VECTOR_FLAGS = {  # what torch's own CPU kernels are built for, by torch.backends.cpu capability
    "AVX512": ["-mavx512f", "-mavx512dq", "-mavx512vl", "-mavx512bw", "-mfma", "-DCPU_CAPABILITY_AVX512"],
    "AVX2": ["-mavx2", "-mfma", "-mf16c", "-DCPU_CAPABILITY_AVX2"],
}

_module = None  # None: not tried yet; False: unavailable (warned once)


def kernels():
    """The compiled extension module, or None where there is none (warned once). Loads the
    shared build; compiles it first if missing, unless ``FOCALCAL_KERNEL_BUILD=never``.
    ``usable`` also honours the on/off switch; this loads whenever asked."""
    global _module
    if _module is None:
        _module = _load(allow_build=kernel_settings.may_build())
    return _module or None


def build() -> Path | None:
    """Compile the kernels now if they are not built yet, whatever ``FOCALCAL_KERNEL_BUILD``
    says (for set-up, not a workflow job); the path of the shared build, or None (with a
    warning) where it cannot be built."""
    global _module
    if not _module:
        _module = _load(allow_build=True)
    return Path(_module.__file__) if _module else None


def build_name() -> str:
    """The extension's name: the same for every checkout of the same source on the same torch."""
    capability = torch.backends.cpu.get_cpu_capability()
    torch_version = re.sub(r"\W", "_", torch.__version__)
    return f"focalcal_classwise_{capability.lower()}_{source_digest()}_torch{torch_version}"


def _cpp_extension():
    """``torch.utils.cpp_extension``, imported without its "No CUDA runtime is found" warning: it
    looks for a CUDA toolkit on import, and these kernels are CPU-only, so on a machine with a
    toolkit but no GPU it would warn about nothing focalcal builds or runs."""
    logger = logging.getLogger("torch.utils.cpp_extension")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        from torch.utils import cpp_extension
    finally:
        logger.setLevel(level)
    return cpp_extension


def _library_path(cpp_extension) -> Path:
    name = build_name()
    return Path(cpp_extension._get_build_directory(name, verbose=False)) / f"{name}.so"


def is_built() -> bool:
    """Whether the shared build exists (loaded already, or on disk), without loading or compiling it."""
    if _module:
        return True
    try:
        return _library_path(_cpp_extension()).exists()
    except Exception:  # noqa: BLE001 — no cache directory, source not installed: not built
        return False


def _load(allow_build: bool):
    try:
        cpp_extension = _cpp_extension()
        library = _library_path(cpp_extension)
        name, directory = library.stem, library.parent
        if not library.exists():
            if not allow_build:
                raise RuntimeError(f"no build at {library} and {BUILD_SWITCH}=never; "
                                   "run `python -m focalcal build-kernels` once")
            return _compile(cpp_extension, name, directory)
        return _import(name, library)
    except Exception as error:  # noqa: BLE001  no compiler, no ninja, read-only cache, ...: all fall back
        warnings.warn(f"focalcal: fused CPU loss kernels unavailable, using the eager PyTorch path: {error}",
                      RuntimeWarning, stacklevel=3)
        return False


def _compile(cpp_extension, name: str, directory: Path):
    """Build ``name`` from a copy of the source inside its build directory, so the ninja file
    (which records the source's path) is the same for every checkout; torch's lock in that
    directory makes concurrent builders wait for one build."""
    capability = torch.backends.cpu.get_cpu_capability()
    print(f"focalcal: compiling the fused CPU loss kernels for {capability} (once, ~30 s; then shared)",
          file=sys.stderr, flush=True)
    directory.mkdir(parents=True, exist_ok=True)
    copies = []
    for original in SOURCES:
        source = directory / original.name
        if not source.exists():
            with tempfile.NamedTemporaryFile(dir=directory, suffix=".tmp", delete=False) as handle:
                handle.write(original.read_bytes())
            os.replace(handle.name, source)
        copies.append(str(source))
    return cpp_extension.load(name, copies, extra_cflags=["-O3", "-fopenmp", *_VECTOR_FLAGS.get(capability, [])],
                       extra_ldflags=["-fopenmp"], build_directory=str(directory), verbose=False)


def _import(name: str, library: Path):
    """Load a built extension module from its ``.so`` (no ninja, no rebuild check)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, library)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module


def source_digest() -> str:
    digest = hashlib.sha256()
    for source in SOURCES:
        digest.update(source.read_bytes())
    return digest.hexdigest()[:12]


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
