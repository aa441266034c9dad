"""The logits format: what every calibration input is, whoever trained the model.

A workflow run's ``logits.npz`` and a user's own model share it: the keys ``val_logits``
(N_val, K) and ``val_labels`` (N_val,), ``test_logits`` (N_test, K) and ``test_labels``
(N_test,); optionally ``class_names`` (K strings). Calibrators are fitted on the val split
and measured on the test split. The same arrays may come as a folder of ``<key>.npy`` files
(``class_names.npy`` or ``class_names.txt``, one name per line). :func:`read_logits` checks
everything before anything downstream is written, and every failure is a ``ValueError``
naming the file, the key and the problem. Torch-free.

Probabilities are not logits. A split whose rows are all non-negative and sum to 1 (within
:data:`SUM_TOLERANCE`) is refused as "looks like probabilities": read as logits, softmax would
flatten them into near-uniform predictions and every metric would describe a model that does
not exist. A file that does hold probabilities is read with ``inputs="probabilities"``
(``focalcal calibrate --inputs probabilities``; ``inputs: probabilities`` on a ``logits_file``
model), which checks them and takes their log: softmax(log p) = p, so every calibrator and
metric sees the model's own probabilities (rows renormalised). A probability of exactly 0 has
no logit (log 0 = −∞, which no logit-based calibrator can scale) and is refused, naming where
it is; clamping it to a small number would invent a probability the model never gave.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

SPLITS = ("val", "test")
INPUT_KINDS = ("logits", "probabilities")  # what the score arrays of a file hold
SUM_TOLERANCE = 1e-3  # |row sum − 1| of probabilities (float32 sums over many classes drift ~1e-5)
REQUIRED_KEYS = ("val_logits", "val_labels", "test_logits", "test_labels")
CLASS_NAMES = "class_names"


@dataclass(frozen=True)
class LogitsSet:
    """Checked val/test logits (float64) and labels (int64), the class names, and where they came from."""

    val_logits: np.ndarray
    val_labels: np.ndarray
    test_logits: np.ndarray
    test_labels: np.ndarray
    class_names: tuple[str, ...]
    source: str

    @property
    def num_classes(self) -> int:
        return self.val_logits.shape[1]


def read_logits(path, inputs: str = "logits") -> LogitsSet:
    """The checked :class:`LogitsSet` of an ``.npz`` file or a folder of ``.npy`` files whose
    score arrays hold ``inputs`` ("logits" or "probabilities", see the module docstring)."""
    path = Path(path)
    if path.is_dir():
        arrays, where = _read_folder(path)
    elif path.is_file():
        arrays, where = _read_npz(path), (lambda key: f"{path} [{key}]")
    else:
        raise ValueError(f"{path}: no such file or folder (expected an .npz file or a folder of .npy files)")
    return check_logits(arrays, where, source=str(path), inputs=inputs)


def check_logits(arrays: dict, where=lambda key: key, source: str = "<arrays>", inputs: str = "logits") -> LogitsSet:
    """A :class:`LogitsSet` from ``arrays`` (key -> array) after every check; ``where(key)``
    names the culprit in error messages (a file and key)."""
    if inputs not in INPUT_KINDS:
        raise ValueError(f"inputs must be one of {list(INPUT_KINDS)}, got {inputs!r}")
    missing = [key for key in REQUIRED_KEYS if key not in arrays]
    if missing:
        raise ValueError(f"{where(missing[0])}: missing; a logits file needs {', '.join(REQUIRED_KEYS)}")
    checked = {}
    for split in SPLITS:
        logits_key, labels_key = f"{split}_logits", f"{split}_labels"
        logits = _check_logits_array(np.asarray(arrays[logits_key]), where(logits_key))
        if inputs == "probabilities":
            logits = _log_of_probabilities(logits, where(logits_key))
        elif _looks_like_probabilities(logits):
            raise ValueError(f"{where(logits_key)}: looks like probabilities, not logits (every row is non-negative "
                             f"and sums to 1); pass them as probabilities to take their log: `focalcal calibrate "
                             f"--inputs probabilities`, or `inputs: probabilities` on a logits_file model")
        labels = _check_labels_array(np.asarray(arrays[labels_key]), where(labels_key), logits, where(logits_key))
        checked[logits_key], checked[labels_key] = logits, labels
    if checked["val_logits"].shape[1] != checked["test_logits"].shape[1]:
        raise ValueError(f"{where('test_logits')}: {checked['test_logits'].shape[1]} classes, but "
                         f"{where('val_logits')} has {checked['val_logits'].shape[1]}; val and test need the same K")
    num_classes = checked["val_logits"].shape[1]
    for split in SPLITS:
        labels = checked[f"{split}_labels"]
        outside = labels[(labels < 0) | (labels >= num_classes)]
        if outside.size:
            raise ValueError(f"{where(f'{split}_labels')}: label {int(outside[0])} is outside 0..{num_classes - 1} "
                             f"({outside.size} such labels)")
    names = _check_class_names(arrays.get(CLASS_NAMES), num_classes, where(CLASS_NAMES))
    return LogitsSet(**checked, class_names=names, source=source)


def _read_npz(path: Path) -> dict:
    """Every array of the archive, each header checked against its member's stored size before
    its data is read (:mod:`focalcal.files.npz`), so a damaged or crafted member is named with its key."""
    import zipfile

    from focalcal.files.npz import read_npz

    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path}: not a readable .npz file (not a zip archive; a folder of .npy files is read too)")
    return read_npz(path, max_ndim=2)


def _read_folder(folder: Path) -> tuple[dict, object]:
    from focalcal.files.npz import read_npy

    arrays = {}
    for key in (*REQUIRED_KEYS, CLASS_NAMES):
        file = folder / f"{key}.npy"
        if file.exists():
            arrays[key] = read_npy(file, max_ndim=2)
    text_names = folder / f"{CLASS_NAMES}.txt"
    if CLASS_NAMES not in arrays and text_names.exists():
        arrays[CLASS_NAMES] = np.array([line.strip() for line in text_names.read_text().splitlines() if line.strip()])

    def where(key: str) -> str:
        if key == CLASS_NAMES and (folder / f"{CLASS_NAMES}.txt").exists() and not (folder / f"{key}.npy").exists():
            return str(text_names)
        return str(folder / f"{key}.npy")

    return arrays, where


def _check_logits_array(logits: np.ndarray, name: str) -> np.ndarray:
    if logits.ndim != 2:
        raise ValueError(f"{name}: logits must be 2-D (samples, classes), got shape {logits.shape}")
    if logits.shape[0] == 0:
        raise ValueError(f"{name}: no samples (shape {logits.shape})")
    if logits.shape[1] < 2:
        raise ValueError(f"{name}: at least 2 classes are needed, got shape {logits.shape}")
    if not np.issubdtype(logits.dtype, np.floating):
        raise ValueError(f"{name}: logits must be floating point, got dtype {logits.dtype}")
    bad = ~np.isfinite(logits)
    if bad.any():
        row, column = np.argwhere(bad)[0]
        kind = "NaN" if np.isnan(logits[row, column]) else "Inf"
        raise ValueError(f"{name}: {int(bad.sum())} non-finite value(s); the first is {kind} at row {row}, "
                         f"column {column}")
    return logits.astype(np.float64)


def _row_sums_are_one(values: np.ndarray) -> np.ndarray:
    return np.abs(values.sum(axis=1) - 1.0) <= SUM_TOLERANCE


def _looks_like_probabilities(logits: np.ndarray) -> bool:
    return bool((logits >= 0).all() and _row_sums_are_one(logits).all())


def _log_of_probabilities(probs: np.ndarray, name: str) -> np.ndarray:
    """log p of checked probabilities; ValueError naming the first entry or row that is none."""
    outside = (probs < 0) | (probs > 1)
    if outside.any():
        row, column = np.argwhere(outside)[0]
        raise ValueError(f"{name}: not probabilities: {int(outside.sum())} value(s) outside [0, 1], the first "
                         f"{probs[row, column]:.6g} at row {row}, column {column}")
    off = ~_row_sums_are_one(probs)
    if off.any():
        row = int(np.flatnonzero(off)[0])
        raise ValueError(f"{name}: not probabilities: {int(off.sum())} row(s) do not sum to 1 (within "
                         f"{SUM_TOLERANCE:g}), the first is row {row}, summing to {probs[row].sum():.6g}")
    zeros = probs == 0
    if zeros.any():
        row, column = np.argwhere(zeros)[0]
        raise ValueError(f"{name}: {int(zeros.sum())} probabilit(ies) exactly 0, the first at row {row}, column "
                         f"{column}: log 0 = -inf is no logit a calibrator can scale, and replacing it would invent "
                         f"a probability the model never gave; export the model's logits (or log-probabilities, "
                         f"e.g. log_softmax) instead")
    return np.log(probs)


def _check_labels_array(labels: np.ndarray, name: str, logits: np.ndarray, logits_name: str) -> np.ndarray:
    if labels.ndim != 1:
        raise ValueError(f"{name}: labels must be 1-D (one class index per sample), got shape {labels.shape}")
    if not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"{name}: labels must be integers, got dtype {labels.dtype}")
    if labels.shape[0] != logits.shape[0]:
        raise ValueError(f"{name}: {labels.shape[0]} labels for {logits.shape[0]} rows of {logits_name}")
    return labels.astype(np.int64)


def _check_class_names(names, num_classes: int, name: str) -> tuple[str, ...]:
    if names is None:
        return tuple(f"class {k}" for k in range(num_classes))
    names = np.asarray(names)
    if names.ndim != 1 or names.shape[0] != num_classes:
        raise ValueError(f"{name}: {names.shape} names for {num_classes} classes; need one name per class")
    if names.dtype.kind not in "US":
        raise ValueError(f"{name}: class names must be strings, got dtype {names.dtype}")
    return tuple(str(value) for value in names)


def stand_in_logits(n_val: int, n_test: int, num_classes: int, temperature: float = 2.0, scale: float = 3.0,
                    seed: int = 0) -> dict[str, np.ndarray]:
    """Val/test logits (float32) and labels of a stand-in model whose labels are drawn from
    softmax(z / temperature): overconfident for temperature > 1 (as cross-entropy models), under-
    confident below 1 (as focal-loss models). For examples, tests and benchmarks."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for split, n in (("val", n_val), ("test", n_test)):
        logits = rng.normal(size=(n, num_classes)) * scale
        scaled = logits / temperature
        probs = np.exp(scaled - scaled.max(axis=1, keepdims=True))
        probs /= probs.sum(axis=1, keepdims=True)
        labels = (rng.uniform(size=(n, 1)) > probs.cumsum(axis=1)).sum(axis=1).clip(max=num_classes - 1)
        arrays[f"{split}_logits"], arrays[f"{split}_labels"] = logits.astype(np.float32), labels.astype(np.int64)
    return arrays


#: The files config/examples/own_logits.yaml reads: (loss key, temperature of the stand-in model).
EXAMPLE_MODELS = {"ce": 2.0, "focal3": 0.7}


def write_example_logits(folder="own_logits", seeds=(0, 1, 2), n_val: int = 1000, n_test: int = 2000) -> list[Path]:
    """Write the stand-in logits files of config/examples/own_logits.yaml into ``folder``:
    ``<loss>_seed<k>.npz`` for a cross-entropy-like (overconfident) and a focal-like
    (underconfident) 10-class model."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for index, (loss, temperature) in enumerate(EXAMPLE_MODELS.items()):
        for seed in seeds:
            path = folder / f"{loss}_seed{seed}.npz"
            np.savez(path, **stand_in_logits(n_val, n_test, 10, temperature, seed=100 * index + seed))
            written.append(path)
    return written
