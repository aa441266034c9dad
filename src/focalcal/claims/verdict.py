"""From paired differences to a verdict: holds, does not hold, inconclusive, not testable.

A claim reduces to differences d_i = (what the paper says is better) − (its comparator),
one per paired unit (same dataset, model, recipe and seed; for a trend, one per step
between neighbouring levels within a unit). Their mean gets a two-sided 95 % Student-t
interval, mean ± t_{0.975, n−1} · s / √n — chosen over a bootstrap because the default
run has 3–12 pairs, where a percentile bootstrap is too narrow. With a direction and a
threshold (0 unless the claim is "on par", see :class:`Direction`):

* **holds** — the whole interval is on the claimed side of the threshold;
* **does not hold** — the whole interval is on the other side;
* **inconclusive** — the interval contains the threshold, or there are fewer than
  :data:`MIN_PAIRS` pairs;
* **not testable with this config** — the config lacks the runs or calibrators the claim
  compares (the reason names what is missing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

HOLDS = "holds"
FAILS = "does not hold"
INCONCLUSIVE = "inconclusive"
NOT_TESTABLE = "not testable with this config"
VERDICTS = (HOLDS, FAILS, INCONCLUSIVE, NOT_TESTABLE)

MIN_PAIRS = 3  # the floor: fewer pairs give no interval worth reading
CONFIDENCE = 0.95
INTERVAL = "Student-t 95 % over pairs"


class Direction(str, Enum):
    """Which side of the threshold the paper puts the mean difference.

    ``below`` / ``above``: strictly ("lower ECE"). ``at_most`` / ``at_least``: the paper's
    "≤"/"≥", so an interval touching the threshold from the claimed side (e.g. every pair
    exactly 0) still holds.
    """

    BELOW = "below"
    ABOVE = "above"
    AT_MOST = "at_most"
    AT_LEAST = "at_least"

    @property
    def symbol(self) -> str:
        return {"below": "<", "above": ">", "at_most": "≤", "at_least": "≥"}[self.value]


@dataclass
class Pairs:
    """The paired differences of one claim, with a label per pair (for the reader)."""

    differences: list[float] = field(default_factory=list)
    units: list[str] = field(default_factory=list)

    def add(self, difference: float, unit: str) -> None:
        if not math.isfinite(difference):
            raise ValueError(f"non-finite difference {difference!r} for {unit}; its run should be marked unhealthy")
        self.differences.append(float(difference))
        self.units.append(unit)

    def __len__(self) -> int:
        return len(self.differences)


@dataclass
class NotTestable:
    """Why a config cannot test a claim: what it lacks, in words."""

    reason: str


def t_interval(differences, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(mean, low, high) of the mean of ``differences``: Student-t, two-sided."""
    from scipy import stats

    values = np.asarray(differences, dtype=float)
    if values.size < 2:
        raise ValueError(f"an interval needs at least 2 differences, got {values.size}")
    mean = float(values.mean())
    half = float(stats.t.ppf(0.5 + confidence / 2, values.size - 1) * values.std(ddof=1) / math.sqrt(values.size))
    return mean, mean - half, mean + half


def decide(low: float, high: float, direction: Direction, threshold: float = 0.0) -> str:
    """The verdict of an interval [low, high] against a directional claim about its mean."""
    direction = Direction(direction)
    if direction is Direction.BELOW:
        return HOLDS if high < threshold else FAILS if low >= threshold else INCONCLUSIVE
    if direction is Direction.AT_MOST:
        return HOLDS if high <= threshold else FAILS if low > threshold else INCONCLUSIVE
    if direction is Direction.ABOVE:
        return HOLDS if low > threshold else FAILS if high <= threshold else INCONCLUSIVE
    return HOLDS if low >= threshold else FAILS if high < threshold else INCONCLUSIVE


@dataclass
class Outcome:
    """A claim's verdict on one study, with its statistic and the reason when it is not plain."""

    verdict: str
    n_pairs: int = 0
    mean: float = math.nan
    low: float = math.nan
    high: float = math.nan
    reason: str = ""
    units: list[str] = field(default_factory=list)


def judge(evidence: Pairs | NotTestable, direction: Direction, threshold: float = 0.0) -> Outcome:
    """Turn a claim's evidence into its :class:`Outcome`."""
    if isinstance(evidence, NotTestable):
        return Outcome(NOT_TESTABLE, reason=evidence.reason)
    n = len(evidence)
    if n == 0:
        return Outcome(NOT_TESTABLE, reason="no pair of runs to compare")
    if n < MIN_PAIRS:
        mean = float(np.mean(evidence.differences))
        return Outcome(INCONCLUSIVE, n, mean, reason=f"only {n} pair(s); a verdict needs at least {MIN_PAIRS} "
                       "(add seeds)", units=list(evidence.units))
    mean, low, high = t_interval(evidence.differences)
    verdict = decide(low, high, direction, threshold)
    reason = ""
    if verdict == INCONCLUSIVE:
        reason = f"the 95 % interval [{low:.4g}, {high:.4g}] contains {threshold:g}"
    return Outcome(verdict, n, mean, low, high, reason, list(evidence.units))
