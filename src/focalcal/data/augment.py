"""On-device batch augmentation and normalisation for whole-tensor datasets.

Vectorised over the batch: one pad, then one gather with per-sample random offsets, so a
batch of any size costs a few kernel launches on whatever device it lives on.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

NO_AUGMENTATION: dict = {"random_crop_padding": 0, "horizontal_flip": False}
CROP_FLIP: dict = {"random_crop_padding": 4, "horizontal_flip": True}
CROP_ONLY: dict = {"random_crop_padding": 4, "horizontal_flip": False}


def _check_images(x: torch.Tensor, name: str = "x") -> None:
    if not isinstance(x, torch.Tensor) or x.ndim != 4:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{name} must be an N×C×H×W tensor, got {shape}")


def crop_flip_at(x: torch.Tensor, padding: int, top: torch.Tensor, left: torch.Tensor, flip: torch.Tensor | None) -> torch.Tensor:
    """Zero-pad ``x`` by ``padding``, crop each sample at (``top[i]``, ``left[i]``) of the
    padded image, and mirror it left-right where ``flip[i]``: one gather over flattened planes."""
    n, c, h, w = x.shape
    padded = F.pad(x, (padding, padding, padding, padding)) if padding else x
    rows = top.to(x.device)[:, None] + torch.arange(h, device=x.device)
    cols = left.to(x.device)[:, None] + torch.arange(w, device=x.device)
    if flip is not None:
        cols = torch.where(flip.to(x.device)[:, None], cols.flip(1), cols)
    flat = (rows[:, :, None] * padded.shape[3] + cols[:, None, :]).reshape(n, 1, h * w).expand(n, c, h * w)
    return padded.reshape(n, c, -1).gather(2, flat).reshape(n, c, h, w)


def random_crop_flip(x: torch.Tensor, padding: int = 4, *, flip: bool = True,
                     generator: torch.Generator | None = None) -> torch.Tensor:
    """Random ``padding``-pixel-shift crops (zero padding) and, if ``flip``, random
    horizontal flips (p = 1/2) of an N×C×H×W batch: the standard CIFAR augmentation.

    Random numbers are drawn on ``generator``'s device (default: ``x``'s), so a seeded
    generator gives the same crops on CPU and GPU.
    """
    _check_images(x)
    if isinstance(padding, bool) or not isinstance(padding, int) or padding < 0:
        raise ValueError(f"padding must be a non-negative int, got {padding!r}")
    n = x.shape[0]
    device = generator.device if generator is not None else x.device
    top = torch.randint(0, 2 * padding + 1, (n,), device=device, generator=generator)
    left = torch.randint(0, 2 * padding + 1, (n,), device=device, generator=generator)
    mirror = torch.rand(n, device=device, generator=generator) < 0.5 if flip else None
    return crop_flip_at(x, padding, top, left, mirror)


def changes_inputs(augmentation: dict) -> bool:
    """Whether ``augmentation`` (keys random_crop_padding, horizontal_flip) changes any input:
    ``{}`` and :data:`NO_AUGMENTATION` do not."""
    return bool(augmentation.get("random_crop_padding", 0)) or bool(augmentation.get("horizontal_flip", False))


def apply_augmentation(x: torch.Tensor, augmentation: dict, generator: torch.Generator | None = None) -> torch.Tensor:
    """Apply a dataset's ``meta["augmentation"]`` (keys random_crop_padding, horizontal_flip)."""
    unknown = set(augmentation) - set(NO_AUGMENTATION)
    if unknown:
        raise ValueError(f"unknown augmentation keys {sorted(unknown)}; known: {sorted(NO_AUGMENTATION)}")
    if not changes_inputs(augmentation):
        return x
    padding = augmentation.get("random_crop_padding", 0)
    flip = bool(augmentation.get("horizontal_flip", False))
    return random_crop_flip(x, padding, flip=flip, generator=generator)


def normalise(x: torch.Tensor, mean, std) -> torch.Tensor:
    """(x - mean) / std per channel (dim 1) of an N×C×… batch; mean/std None returns x."""
    if mean is None and std is None:
        return x
    if x.ndim < 2:
        raise ValueError(f"x must be N×C×…, got shape {tuple(x.shape)}")
    mean = torch.as_tensor(mean, dtype=x.dtype, device=x.device)
    std = torch.as_tensor(std, dtype=x.dtype, device=x.device)
    if mean.numel() != x.shape[1] or std.numel() != x.shape[1]:
        raise ValueError(f"mean/std have {mean.numel()}/{std.numel()} entries but x has {x.shape[1]} channels")
    if (std <= 0).any():
        raise ValueError(f"std must be positive, got {std.tolist()}")
    view = (1, -1) + (1,) * (x.ndim - 2)
    return (x - mean.view(view)) / std.view(view)


class Normaliser:
    """``normalise`` with mean and std checked once and kept on ``device`` as (1, C, 1, …) tensors,
    so that a training step normalises its batch with no host-to-device copy and no check that
    reads a value back (mean/std None: the identity)."""

    def __init__(self, mean, std, device="cpu") -> None:
        self.identity = mean is None and std is None
        if self.identity:
            return
        mean, std = torch.as_tensor(mean, dtype=torch.float64), torch.as_tensor(std, dtype=torch.float64)
        if mean.dim() != 1 or mean.shape != std.shape:
            raise ValueError(f"mean and std must be 1-D with one entry per channel, got shapes "
                             f"{tuple(mean.shape)} and {tuple(std.shape)}")
        if (std <= 0).any():
            raise ValueError(f"std must be positive, got {std.tolist()}")
        self.mean, self.std = mean.to(device), std.to(device)
        self._cast: dict[torch.dtype, tuple[torch.Tensor, torch.Tensor]] = {}  # one cast per dtype, made once

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.identity:
            return x
        if x.ndim < 2 or x.shape[1] != self.mean.numel():
            raise ValueError(f"mean/std have {self.mean.numel()} entries but x has shape {tuple(x.shape)} "
                             "(N×C×…, one entry per channel C)")
        if x.dtype not in self._cast:
            self._cast[x.dtype] = (self.mean.to(x.dtype), self.std.to(x.dtype))
        mean, std = self._cast[x.dtype]
        view = (1, -1) + (1,) * (x.ndim - 2)
        return (x - mean.view(view)) / std.view(view)

