"""The types public signatures name, said once so every page of the API reference reads alike.

``ArrayLike`` is what the metrics, calibrators and theory functions accept: anything
``numpy.asarray`` takes, or a torch tensor (torch is named only for type checkers, so
importing this module never imports torch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

import numpy.typing as npt

if TYPE_CHECKING:
    import torch

#: A numpy array, a nested sequence of numbers, or a torch tensor (moved to the CPU as float64).
ArrayLike = Union[npt.ArrayLike, "torch.Tensor"]

__all__ = ["ArrayLike"]
