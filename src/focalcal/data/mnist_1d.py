"""MNIST-1D (Greydanus 2020) generated offline with the ``mnist1d`` package's own generator.

The package generator is a per-sample Python loop, slow at tens of thousands of samples, so each
(n_samples, data_seed) is generated once and cached as ``root/mnist1d/mnist1d_n<N>_seed<S>.npz``.
It seeds numpy's *global* RNG; the caller's global RNG state is restored afterwards.
All samples form one pool (the package's own 80/20 cut is ignored): load() splits it.
With n_samples=5000 and data_seed=42 the samples are the package's published dataset.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from ..files.artefacts import atomic_savez, load_npz
from ._dataset import RawData

CACHE_FOLDER = "mnist1d"


def cache_path(root: Path, n_samples: int, data_seed: int) -> Path:
    return Path(root) / CACHE_FOLDER / f"mnist1d_n{n_samples}_seed{data_seed}.npz"


def generate_mnist1d(n_samples: int, data_seed: int) -> tuple[np.ndarray, np.ndarray]:
    """All ``n_samples`` signals as float32 (N, 40) and labels int64 (N,), from the package."""
    from mnist1d.data import get_dataset_args, make_dataset

    args = get_dataset_args()
    args.num_samples = n_samples
    args.seed = data_seed
    numpy_state, python_state = np.random.get_state(), random.getstate()
    try:
        data = make_dataset(args)
    finally:
        np.random.set_state(numpy_state)
        random.setstate(python_state)
    x = np.concatenate([data["x"], data["x_test"]]).astype(np.float32)
    y = np.concatenate([data["y"], data["y_test"]]).astype(np.int64)
    return x, y


def load_mnist1d(root, download: bool, *, n_samples: int = 20000, data_seed: int = 42) -> RawData:
    """Signals as float32 (N, 1, 40), standardised by the package; cached under ``root``."""
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 10 or n_samples % 10:
        raise ValueError(f"n_samples must be a positive multiple of 10 (the generator makes n/10 per class), got {n_samples!r}")
    path = cache_path(root, int(n_samples), int(data_seed))
    if path.exists():
        cached = load_npz(path)
        x, y = cached["x"], cached["y"]
    else:
        x, y = generate_mnist1d(int(n_samples), int(data_seed))
        atomic_savez(path, x=x, y=y)
    return RawData(pools={"all": (x[:, None, :], y)}, class_names=[str(d) for d in range(10)], info={"cache": str(path)})
