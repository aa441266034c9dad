"""What the papers' theory figures share: argument checks and the γ label.

Each paper draws its own theory figures (exact curves from :mod:`focalcal.theory`) in its
package's ``theory_figures`` module (:mod:`focalcal.papers`).
"""

from __future__ import annotations

import numpy as np

from focalcal.core.constraints import GAMMA, Interval, SequenceOf, validate_parameters


def gamma_label(gamma: float) -> str:
    return f"γ = {gamma:g}"


def check_gammas(gammas, name: str = "gammas", *, owner: str, domain: Interval = GAMMA) -> np.ndarray:
    """``gammas`` (one γ or a non-empty 1-D sequence, each in ``domain``) as a float64 array;
    else the validator's error naming ``owner`` and ``name``."""
    validate_parameters({name: [domain, SequenceOf(domain)]}, {name: gammas}, owner)
    return np.atleast_1d(np.asarray(gammas, dtype=np.float64))


def check_points(n_points, name: str = "n_points", minimum: int = 10) -> int:
    if isinstance(n_points, bool) or not isinstance(n_points, (int, np.integer)) or n_points < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {n_points!r}")
    return int(n_points)
