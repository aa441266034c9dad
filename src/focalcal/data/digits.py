"""sklearn's bundled 8×8 handwritten digits (1,797 samples, 10 classes): no download."""

from __future__ import annotations

import numpy as np

from ._dataset import RawData

# Pixel mean and std of all 1,797 images scaled to [0, 1] (tests recompute them).
DIGITS_MEAN = (0.30526,)
DIGITS_STD = (0.37605,)


def load_digits_data(root, download: bool) -> RawData:
    """Images as float32 (N, 1, 8, 8) in [0, 1] (sklearn's 0..16 divided by 16)."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = (bunch.images / 16.0).astype(np.float32)[:, None, :, :]
    return RawData(pools={"all": (x, bunch.target.astype(np.int64))}, class_names=[str(d) for d in range(10)])
