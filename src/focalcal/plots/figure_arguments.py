"""What the papers' theory figures share: argument checks and the γ label.

Each paper draws its own theory figures (exact curves from :mod:`focalcal.theory`) in its
package's ``theory_figures`` module (:mod:`focalcal.papers`).
"""

from __future__ import annotations

import numpy as np


def gamma_label(gamma: float) -> str:
    return f"γ = {gamma:g}"


def check_gammas(gammas, name: str = "gammas", *, minimum: float = 0.0) -> np.ndarray:
    values = np.atleast_1d(np.asarray(gammas, dtype=np.float64))
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence of numbers, got {gammas!r}")
    if not np.all(np.isfinite(values)) or np.any(values < minimum):
        raise ValueError(f"{name} must be finite and >= {minimum:g}, got {values.tolist()}")
    return values


def check_points(n_points, name: str = "n_points", minimum: int = 10) -> int:
    if isinstance(n_points, bool) or not isinstance(n_points, (int, np.integer)) or n_points < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {n_points!r}")
    return int(n_points)
