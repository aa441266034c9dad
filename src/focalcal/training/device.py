"""Device choice: CUDA when present (with bf16 autocast and channels_last), else CPU."""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class DeviceSetup:
    device: torch.device
    autocast_dtype: torch.dtype | None  # None: full precision
    channels_last: bool

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
        # bf16 autocast needs no loss scaling; losses compute in float32 from the logits.
        return DeviceSetup(torch.device("cuda"), torch.bfloat16, channels_last=True)
    return DeviceSetup(torch.device("cpu"), None, channels_last=False)


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
