"""The per-token dump of a translation model under teacher forcing: bounded, and exact for ECE, NLL and TS.

For each target token (EOS included, PAD excluded) of a split it keeps the top logit and its
index, the label's logit, the label, the sentence, and logsumexp(z / T) for every T of a
fixed grid: 5 + G numbers per token instead of the vocabulary's V (37,000 for WMT14's
shared vocabulary; G = 115 here). At every T of the grid these give, exactly:

* the prediction: argmax z / T = argmax z for every T > 0, so ``top_index``;
* the top-label confidence: max softmax(z / T) = exp(top_logit / T − logsumexp(z / T));
* the NLL: −log softmax(z / T)_y = logsumexp(z / T) − label_logit / T;

hence ECE (top-label, mukhoti2020 eq. 1: 15 equal-width bins, over tokens) and NLL at each T,
and temperature scaling by grid search over those Ts. Everything is computed in float64 from
the model's logits.

The grid, :data:`TOKEN_TEMPERATURES`, is the TS grid of mukhoti2020 §5 (0.1 to 10 in steps
of 0.1) with 0.05 steps between 0.5 and 2 added: the paper's text does not give Figure 5's
axis, and its optimal temperatures (Table 3: 1.0 and 1.2) lie in that range.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from focalcal.calibration.temperature import MUKHOTI_TEMPERATURES
from focalcal.files.artefacts import atomic_savez, load_npz
from focalcal.metrics.batched import ece_grid
from focalcal.metrics.calibration import ece_of_confidence

#: Temperatures between 0.5 and 2 at a 0.05 step: the finer part of the token grid.
FINE_TEMPERATURES = np.round(np.arange(10, 41) * 0.05, 10)
#: The grid each profile keeps logsumexp(z / T) at: mukhoti2020's TS grid and the finer points.
TOKEN_TEMPERATURES = np.unique(np.concatenate([MUKHOTI_TEMPERATURES, FINE_TEMPERATURES]))
FIELDS = ("top_logit", "top_index", "label_logit", "labels", "sentence", "logsumexp")
SPLITS = ("val", "test")
OBJECTIVES = ("ece", "nll")
_ROWS_PER_CHUNK = 256  # bounds the float64 copy of (rows, V) logits


@dataclass(frozen=True)
class TokenProfile:
    """One split's tokens (see the module docstring); ``logsumexp[:, g]`` is at ``temperatures[g]``."""

    temperatures: np.ndarray  # (G,) float64
    top_logit: np.ndarray  # (N,) float64
    top_index: np.ndarray  # (N,) int64
    label_logit: np.ndarray  # (N,) float64
    labels: np.ndarray  # (N,) int64
    sentence: np.ndarray  # (N,) int64
    logsumexp: np.ndarray  # (N, G) float64

    def __post_init__(self):
        check_profile(self, "token profile")

    def __len__(self) -> int:
        return len(self.labels)

    def _column(self, temperature: float) -> int:
        matches = np.flatnonzero(np.isclose(self.temperatures, temperature, rtol=0, atol=1e-9))
        if matches.size == 0:
            raise ValueError(
                f"temperature {float(temperature)!r} is not on the profile's grid "
                f"({self.temperatures.min():g} to {self.temperatures.max():g}, {self.temperatures.size} points)"
            )
        return int(matches[0])

    @property
    def correct(self) -> np.ndarray:
        """Whether each token's prediction (argmax, the same at every T) is its label."""
        return self.top_index == self.labels

    def confidences(self, temperature: float) -> np.ndarray:
        """Top-label confidence max softmax(z / T) of every token."""
        g = self._column(temperature)
        return np.exp(self.top_logit / self.temperatures[g] - self.logsumexp[:, g])

    def nll(self, temperature: float) -> float:
        """Mean −log softmax(z / T)_label over the tokens."""
        g = self._column(temperature)
        return float(np.mean(self.logsumexp[:, g] - self.label_logit / self.temperatures[g]))

    def ece(self, temperature: float, n_bins: int = 15) -> float:
        """Top-label ECE over the tokens at T (equal-width bins), a fraction."""
        return ece_of_confidence(self.confidences(temperature), self.correct, n_bins=n_bins)

    def grid_scores(self, objective: str, temperatures=None, n_bins: int = 15) -> tuple[np.ndarray, np.ndarray]:
        """(temperatures, objective at each): ECE or mean NLL; default the mukhoti2020 grid."""
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
        grid = MUKHOTI_TEMPERATURES if temperatures is None else np.asarray(temperatures, dtype=np.float64).reshape(-1)
        columns = np.array([self._column(t) for t in grid], dtype=np.int64)
        values = self.temperatures[columns]
        if objective == "nll":
            return values, np.mean(self.logsumexp[:, columns] - self.label_logit[:, None] / values, axis=0)
        confidences = np.exp(self.top_logit[None, :] / values[:, None] - self.logsumexp[:, columns].T)
        return values, ece_grid(confidences, self.correct, n_bins=n_bins)

    @classmethod
    def concatenate(cls, profiles) -> TokenProfile:
        """One profile of the tokens of several (batches' profiles, in order); their grids must agree."""
        profiles = list(profiles)
        if not profiles:
            raise ValueError("concatenate needs at least one profile")
        grid = profiles[0].temperatures
        if any(not np.array_equal(p.temperatures, grid) for p in profiles):
            raise ValueError("profiles with different temperature grids cannot be concatenated")
        return cls(grid, **{field: np.concatenate([getattr(p, field) for p in profiles]) for field in FIELDS})


def fit_temperature(profile_val: TokenProfile, objective: str = "ece", temperatures=None, n_bins: int = 15) -> float:
    """T of the grid (default mukhoti2020's) minimising the validation objective; the first on ties,
    as :class:`~focalcal.calibration.TemperatureScaling` with a grid."""
    grid, scores = profile_val.grid_scores(objective, temperatures, n_bins)
    return float(grid[int(np.argmin(scores))])


def profile_from_logits(logits, labels, sentence, temperatures=TOKEN_TEMPERATURES) -> TokenProfile:
    """The profile of (N, V) logits (a torch tensor, any device) with N labels and sentence indices."""
    import torch

    if not isinstance(logits, torch.Tensor) or logits.dim() != 2 or logits.shape[0] == 0:
        raise ValueError(
            f"logits must be a non-empty (N, V) torch tensor, got {getattr(logits, 'shape', type(logits))}"
        )
    grid = np.asarray(temperatures, dtype=np.float64).reshape(-1)
    if grid.size == 0 or not np.all(np.isfinite(grid) & (grid > 0)):
        raise ValueError("temperatures must be a non-empty grid of finite values > 0")
    labels = torch.as_tensor(labels, dtype=torch.long, device=logits.device).reshape(-1)
    if labels.shape[0] != logits.shape[0]:
        raise ValueError(f"labels has {labels.shape[0]} tokens but logits has {logits.shape[0]} rows")
    if labels.min() < 0 or labels.max() >= logits.shape[1]:
        raise ValueError(f"labels must lie in [0, {logits.shape[1]}), got {int(labels.min())}..{int(labels.max())}")
    if not torch.isfinite(logits).all():
        raise ValueError("logits contain NaN or infinite values")
    # z / T, not z * (1 / T): the same division the confidences repeat on the top logit, so that
    # logsumexp(z / T) >= top / T holds bit for bit and no confidence rounds above 1.
    divisors = torch.as_tensor(grid, dtype=torch.float64, device=logits.device)
    with torch.no_grad():
        top_logit, top_index = logits.max(dim=1)
        label_logit = logits.gather(1, labels[:, None])[:, 0]
        lse = torch.empty(logits.shape[0], grid.size, dtype=torch.float64, device=logits.device)
        for start in range(0, logits.shape[0], _ROWS_PER_CHUNK):
            rows = logits[start : start + _ROWS_PER_CHUNK].double()
            for g in range(grid.size):
                lse[start : start + _ROWS_PER_CHUNK, g] = torch.logsumexp(rows / divisors[g], dim=1)
    return TokenProfile(
        temperatures=grid,
        top_logit=top_logit.double().cpu().numpy(),
        top_index=top_index.cpu().numpy().astype(np.int64),
        label_logit=label_logit.double().cpu().numpy(),
        labels=labels.cpu().numpy().astype(np.int64),
        sentence=np.asarray(sentence, dtype=np.int64).reshape(-1),
        logsumexp=lse.cpu().numpy(),
    )


def check_profile(profile: TokenProfile, where: str) -> None:
    """One-line ValueError naming ``where`` and the field when the arrays disagree."""
    grid = np.asarray(profile.temperatures)
    if grid.ndim != 1 or grid.size == 0 or not np.all(np.isfinite(grid) & (grid > 0)):
        raise ValueError(f"{where}: temperatures must be a non-empty 1-D grid of finite values > 0")
    n = np.asarray(profile.labels).shape[0] if np.asarray(profile.labels).ndim == 1 else -1
    for field in FIELDS[:-1]:
        if np.asarray(getattr(profile, field)).shape != (n,):
            raise ValueError(
                f"{where}: {field} must have shape ({n},) like labels, got {np.asarray(getattr(profile, field)).shape}"
            )
    if np.asarray(profile.logsumexp).shape != (n, grid.size):
        raise ValueError(
            f"{where}: logsumexp must have shape ({n}, {grid.size}), got {np.asarray(profile.logsumexp).shape}"
        )
    if n == 0:
        raise ValueError(f"{where}: no tokens")


def write_token_profile(path, val: TokenProfile, test: TokenProfile) -> None:
    """``token_logits.npz`` with ``temperatures`` and ``{val,test}_<field>``, written atomically."""
    if not np.array_equal(val.temperatures, test.temperatures):
        raise ValueError("the val and test profiles must share one temperature grid")
    arrays = {"temperatures": np.asarray(val.temperatures, dtype=np.float64)}
    for split, profile in (("val", val), ("test", test)):
        arrays.update({f"{split}_{field}": np.asarray(getattr(profile, field)) for field in FIELDS})
    atomic_savez(path, **arrays)


def read_token_profile(path) -> dict[str, TokenProfile]:
    """{"val": ..., "test": ...} of a file of :func:`write_token_profile`, its headers and sidecar checked."""
    path = Path(path)
    arrays = load_npz(path)
    expected = {"temperatures"} | {f"{split}_{field}" for split in SPLITS for field in FIELDS}
    missing = sorted(expected - set(arrays))
    if missing:
        raise ValueError(f"{path}: not a token profile, missing {missing}")
    return {split: _profile_of(arrays, split, path) for split in SPLITS}


def _profile_of(arrays: dict, split: str, path: Path) -> TokenProfile:
    float_fields = ("top_logit", "label_logit", "logsumexp")
    values = {}
    for field in FIELDS:
        array = arrays[f"{split}_{field}"]
        kinds = "f" if field in float_fields else "iu"
        if array.dtype.kind not in kinds:
            raise ValueError(
                f"{path} [{split}_{field}]: dtype {array.dtype} is not {'float' if kinds == 'f' else 'integer'}"
            )
        values[field] = array.astype(np.float64 if field in float_fields else np.int64)
    temperatures = np.asarray(arrays["temperatures"], dtype=np.float64)
    if not np.isfinite(values["logsumexp"]).all() or not np.isfinite(values["top_logit"]).all():
        raise ValueError(f"{path} [{split}]: non-finite logits or logsumexp")
    try:
        return TokenProfile(temperatures, **values)
    except ValueError as error:
        raise ValueError(f"{path} [{split}]: {str(error).split(': ', 1)[1]}") from None
