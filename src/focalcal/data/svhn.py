"""SVHN cropped digits (format 2): ``train_32x32.mat`` and ``test_32x32.mat`` under ``root/svhn``.

The .mat files hold X as 32×32×3×N uint8 and y as N×1 with label 10 for the digit 0; here
y mod 10 gives class = digit. The "extra" set is not used (charoenphakdee2021 trains on
the 73,257 training images).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import sources
from ._dataset import RawData
from .download import DatasetNotFoundError, fetch, manual_download_hint, verify_md5

# Per-channel mean and std of the 73,257 training images in [0, 1] (the values usually quoted).
SVHN_MEAN, SVHN_STD = (0.4377, 0.4438, 0.4728), (0.1980, 0.2010, 0.1970)


def _read_mat(path: Path) -> tuple[np.ndarray, np.ndarray]:
    from scipy.io import loadmat

    content = loadmat(path)
    images = np.ascontiguousarray(np.transpose(content["X"], (3, 2, 0, 1)), dtype=np.uint8)
    labels = np.asarray(content["y"], dtype=np.int64).reshape(-1) % 10
    if images.shape[0] != labels.shape[0]:
        raise ValueError(f"{path}: {images.shape[0]} images but {labels.shape[0]} labels")
    return images, labels


def load_svhn(root, download: bool) -> RawData:
    folder = Path(root) / sources.SVHN_FOLDER
    targets = {split: (remote, folder / remote.filename) for split, remote in sources.SVHN.items()}
    missing = [(remote, path) for remote, path in targets.values() if not path.exists()]
    if missing and not download:
        raise DatasetNotFoundError(
            "dataset 'svhn' not found. Load with download=True, or download by hand:\n" + manual_download_hint(missing)
        )
    pools = {}
    for split, (remote, path) in targets.items():
        if path.exists():
            verify_md5(path, remote.md5)
        else:
            fetch(remote, path, dataset="svhn")
        pools[split] = _read_mat(path)
    return RawData(pools=pools, class_names=[str(d) for d in range(10)], info={"folder": str(folder)})
