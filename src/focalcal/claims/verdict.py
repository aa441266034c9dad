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
VERDICT_COLORS = {HOLDS: "#1a7f37", FAILS: "#b00020", INCONCLUSIVE: "#8a6d00", NOT_TESTABLE: "#666666"}  # report and plots

MIN_PAIRS = 3  # the floor: fewer pairs give no interval worth reading
CONFIDENCE = 0.95
INTERVAL = "Student-t 95 % over pairs"
PAIRS_NEEDED_LIMIT = 100_000  # beyond this, "pairs needed" is reported as "more than"


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
    """The paired differences of one claim: each with its unit (dataset, model, recipe, seed
    or fold) and what it subtracts, in words ("focal3 − ce"), for the reader."""

    differences: list[float] = field(default_factory=list)
    units: list[tuple] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)

    def add(self, difference: float, unit: tuple, label: str) -> None:
        if not math.isfinite(difference):
            raise ValueError(f"non-finite difference {difference!r} for {unit} ({label}); its run should be "
                             "marked unhealthy")
        self.differences.append(float(difference))
        self.units.append(tuple(unit))
        self.labels.append(label)

    def __len__(self) -> int:
        return len(self.differences)


@dataclass
class NotTestable:
    """Why a config cannot test a claim: what it lacks, in words."""

    reason: str


@dataclass
class LowerBounds:
    """Pairs of which some differences are only lower bounds of the true ones (a quantity read
    off a grid at the grid's edge, where the true value may lie beyond it). A lower bound can
    show that the true difference is large, never that it is small: a verdict the bounds
    support stands (does not hold, for a claim that the difference is below a threshold), any
    other is inconclusive with ``reason``."""

    pairs: Pairs
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


def on_paper_side(value: float, direction: Direction, threshold: float = 0.0) -> bool:
    """Whether one difference points the paper's way (strictly, or touching for ≤ / ≥)."""
    direction = Direction(direction)
    if direction is Direction.BELOW:
        return value < threshold
    if direction is Direction.AT_MOST:
        return value <= threshold
    if direction is Direction.ABOVE:
        return value > threshold
    return value >= threshold


def pairs_needed(mean: float, sd: float, n: int, direction: Direction, threshold: float = 0.0,
                 confidence: float = CONFIDENCE, limit: int | None = None) -> int | None:
    """How many pairs with this mean and spread (sample sd) a 95 % interval would need to lie
    wholly on the paper's side of the threshold: the smallest m ≥ max(n, MIN_PAIRS) with
    t_{0.975, m−1} · sd / √m < |mean − threshold|. None when no number would: the mean is on
    the other side of (or at) the threshold, or more than ``limit`` pairs would be needed."""
    from scipy import stats

    limit = PAIRS_NEEDED_LIMIT if limit is None else limit
    gap = mean - threshold
    if not math.isfinite(gap) or not math.isfinite(sd) or gap == 0 or not on_paper_side(mean, direction, threshold):
        return None
    start = max(n, MIN_PAIRS)
    if sd == 0:
        return start

    def excludes(m: int) -> bool:
        return float(stats.t.ppf(0.5 + confidence / 2, m - 1)) * sd / math.sqrt(m) < abs(gap)

    if not excludes(limit):
        return None
    low, high = start, limit  # t·sd/√m falls with m: bisect for the first m that excludes
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if excludes(middle) else (middle + 1, high)
    return low


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
    """A claim's verdict on one study, with its statistic, the evidence behind it and the
    reason when it is not plain. ``pairs`` are the differences it was decided on."""

    verdict: str
    n_pairs: int = 0
    mean: float = math.nan
    low: float = math.nan
    high: float = math.nan
    reason: str = ""
    pairs: Pairs = field(default_factory=Pairs)
    n_paper_way: int = 0  # pairs on the paper's side of the threshold
    contains: str = ""  # what the interval contains, against the threshold
    pairs_needed: int | None = None  # inconclusive: pairs an interval of this mean and spread would need


def interval_contains(low: float, high: float, threshold: float = 0.0) -> str:
    """What [low, high] contains, said against the threshold."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return ""
    if low <= threshold <= high:
        return f"the threshold {threshold:g}"
    return f"only values {'above' if low > threshold else 'below'} {threshold:g}"


def judge(evidence: Pairs | LowerBounds | NotTestable, direction: Direction, threshold: float = 0.0) -> Outcome:
    """Turn a claim's evidence into its :class:`Outcome`."""
    if isinstance(evidence, NotTestable):
        return Outcome(NOT_TESTABLE, reason=evidence.reason)
    if isinstance(evidence, LowerBounds):
        outcome = judge(evidence.pairs, direction, threshold)
        bounds_show = FAILS if Direction(direction) in (Direction.BELOW, Direction.AT_MOST) else HOLDS
        if outcome.verdict not in (bounds_show, NOT_TESTABLE):
            outcome.verdict, outcome.reason, outcome.pairs_needed = INCONCLUSIVE, evidence.reason, None
        return outcome
    n = len(evidence)
    if n == 0:
        return Outcome(NOT_TESTABLE, reason="no pair of runs to compare")
    values = np.asarray(evidence.differences, dtype=float)
    paper_way = sum(on_paper_side(value, direction, threshold) for value in values)
    mean = float(values.mean())
    sd = float(values.std(ddof=1)) if n > 1 else math.nan
    if n < MIN_PAIRS:
        needed = pairs_needed(mean, sd, n, direction, threshold)
        return Outcome(INCONCLUSIVE, n, mean, reason=f"only {n} pair(s); a verdict needs at least {MIN_PAIRS} "
                       f"(add seeds){_needed_text(needed, n, mean, direction, threshold)}", pairs=evidence,
                       n_paper_way=paper_way, pairs_needed=needed)
    mean, low, high = t_interval(values)
    verdict = decide(low, high, direction, threshold)
    reason, needed = "", None
    if verdict == INCONCLUSIVE:
        needed = pairs_needed(mean, sd, n, direction, threshold)
        reason = (f"the 95 % interval [{low:.4g}, {high:.4g}] contains {threshold:g}"
                  + _needed_text(needed, n, mean, direction, threshold))
    return Outcome(verdict, n, mean, low, high, reason, evidence, paper_way, interval_contains(low, high, threshold),
                   needed)


def _needed_text(needed: int | None, n: int, mean: float, direction: Direction, threshold: float) -> str:
    if n < 2:
        return "; one pair has no spread to extrapolate from"
    if needed is not None:
        return f"; with this mean and spread, {needed} pairs would exclude {threshold:g}"
    if mean == threshold:
        return f"; no number of pairs would make it hold: the mean lies at {threshold:g}"
    if on_paper_side(mean, direction, threshold):
        return f"; with this mean and spread, more than {PAIRS_NEEDED_LIMIT:,} pairs would be needed"
    return f"; no number of pairs would make it hold: the mean lies on the other side of {threshold:g}"
