"""Device choice: CUDA when present, else CPU; on CUDA each architecture's precision and memory
format as its catalog entry declares them (:class:`focalcal.catalog.Precision`)."""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass, replace

import numpy as np
import torch

from focalcal import catalog

CPU_SOURCE = "the CPU: float32, contiguous"


@dataclass(frozen=True)
class DeviceSetup:
    """The device, the forward's autocast dtype (None: float32), whether image batches and
    weights are channels-last, and why (``source``, recorded in ``run.json``)."""

    device: torch.device
    autocast_dtype: torch.dtype | None  # None: full precision
    channels_last: bool
    source: str = "the caller's setup"

    def for_architecture(self, model_name: str, image_batches: bool) -> DeviceSetup:
        """This setup with the architecture's declared CUDA precision and memory format, where the
        setup allows them (a float32 or contiguous setup keeps its own); channels-last only for
        image batches. The CPU keeps float32, contiguous."""
        if self.device.type != "cuda":
            return self
        declared = catalog.MODELS[model_name].cuda_precision
        wants_last = declared.memory_format == "channels_last"
        if (declared.autocast and self.autocast_dtype is None) or (wants_last and not self.channels_last):
            return replace(self, channels_last=self.channels_last and image_batches)  # the setup's own choice
        autocast = getattr(torch, declared.autocast) if declared.autocast else None
        source = declared.source if image_batches or not wants_last else f"{declared.source}; inputs are not images"
        return replace(self, autocast_dtype=autocast, channels_last=wants_last and image_batches, source=source)

    def record(self) -> dict:
        """What ran, for ``run.json``."""
        return {"autocast": None if self.autocast_dtype is None else str(self.autocast_dtype).removeprefix("torch."),
                "memory_format": "channels_last" if self.channels_last else "contiguous", "source": self.source}

    def autocast(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)

    def describe(self) -> str:
        if self.device.type == "cuda":
            return f"cuda:{torch.cuda.get_device_name(self.device)}"
        return f"cpu ({torch.get_num_threads()} threads)"


def choose_device(spec: str = "auto") -> DeviceSetup:
    if spec == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' requested but torch.cuda.is_available() is False")
    use_cuda = spec == "cuda" or (spec == "auto" and torch.cuda.is_available())
    if use_cuda:
        # the architecture narrows this (DeviceSetup.for_architecture)
        return DeviceSetup(torch.device("cuda"), torch.bfloat16, channels_last=True, source=catalog.CUDA_BF16_CHANNELS_LAST.source)
    return DeviceSetup(torch.device("cpu"), None, channels_last=False, source=CPU_SOURCE)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def epoch_seed(run_seed: int, epoch: int) -> int:
    """Seed for one epoch's shuffling, augmentation and dropout.

    Seeding every epoch from (run seed, epoch) makes an epoch's randomness independent of
    how the run got there, so a resumed run replays exactly what an uninterrupted one does.
    """
    return (run_seed * 1_000_003 + epoch * 7919 + 17) % (2**63 - 1)
